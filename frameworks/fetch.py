"""Fetch the frameworks' own released unit tests, for the installed versions.

For each suite: the released sdist of the version installed in this interpreter's
environment (``importlib.metadata``) is downloaded with ``pip download --no-deps
--no-binary :all:`` and the tests the suite needs are extracted, into a cache outside the
clone: ``$SEAMSCOPE_CI_CACHE/framework-suites/<distribution>-<version>/`` (default cache:
``~/.cache/seamscope-ci``). A warm run reuses it: nothing is downloaded again. Nothing of
theirs is ever written into the clone.

    python frameworks/fetch.py            # fetch (or reuse) every suite; prints their folders
    python frameworks/fetch.py --pydantic-ai   # also say whether pydantic-ai's sdists ship tests

pydantic-ai: neither ``pydantic-ai-slim``'s sdist nor ``pydantic-ai``'s (a metapackage)
ships its tests, so there is no pydantic-ai suite here.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Suite:
    """One framework's tests: the files of its sdist to extract, and the ones pytest runs."""

    name: str  # the suite's name (run_suites.py --suite)
    # (the sdist's files: path without its top folder -> bytes) -> (files to extract, to run)
    select: Callable[[dict[str, bytes]], tuple[set[str], list[str]]]
    # path in the suite's folder -> the installed package it links to (tests that find the
    # package's source where the repository keeps it)
    links: tuple[tuple[str, str], ...] = ()
    distribution: str = ""  # the distribution, as pip knows it (default: the name)

    @property
    def dist(self) -> str:
        return self.distribution or self.name

    @property
    def version(self) -> str:
        return importlib.metadata.version(self.dist)


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") and name.endswith(".py")


def _langchain(files: dict[str, bytes]) -> tuple[set[str], list[str]]:
    """Its agent unit tests, the conftests above them, their VCR cassettes, and its
    pyproject (the pytest configuration: asyncio_mode, markers, syrupy's options)."""
    top = {"pyproject.toml", "tests/__init__.py", "tests/unit_tests/__init__.py"}
    top.add("tests/unit_tests/conftest.py")
    keep = {
        path
        for path in files
        if path in top or path.startswith(("tests/unit_tests/agents/", "tests/cassettes/"))
    }
    return keep, ["tests/unit_tests/agents"]


# the Agents SDK's runner tests: the test files under tests/ and tests/models/ that run an
# agent through Runner.run / run_sync / run_streamed
_RUNNER_CALL = re.compile(rb"\bRunner\.(run|run_sync|run_streamed)\b")
_AGENTS_DIRS = ("tests", "tests/models")
# tests of the examples shipped beside the SDK (not in its sdist's tests), not of the Runner
_EXAMPLES = re.compile(rb"^\s*(from|import) examples\b", re.MULTILINE)
# files that call the Runner but test something else
_AGENTS_NOT_RUNNER = {
    # the trace processor's exporter threads (a third of the suite's time); its tests are
    # marked serial (to run alone, after every other test)
    "tests/test_trace_processor.py",
}
_IMPORT = re.compile(
    rb"^[ \t]*from[ \t]+(\.+|tests\b\.?)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE
)


def _imported(path: str, source: bytes, files: dict[str, bytes]) -> set[str]:
    """The files under tests/ that ``path`` imports (``from tests.x import``, ``from .x
    import``, ``from . import x``)."""
    found: set[str] = set()
    package = path.split("/")[:-1]
    for dots, module, names in _IMPORT.findall(source):
        base = package[: len(package) - (len(dots) - 1)] if dots.startswith(b".") else ["tests"]
        parts = base + [part for part in module.decode().split(".") if part]
        candidates = ["/".join(parts) + ".py", "/".join(parts) + "/__init__.py"]
        for name in re.findall(r"\w+", names.decode()):
            candidates.append("/".join([*parts, name]) + ".py")
        found.update(candidate for candidate in candidates if candidate in files)
    return found


def _agents(files: dict[str, bytes]) -> tuple[set[str], list[str]]:
    """The runner's tests, every helper under tests/ (conftests, fixtures, support modules),
    the test files those import (tests/test_responses.py is a helper module), and the
    pyproject (pytest configuration)."""
    run = sorted(
        path
        for path, source in files.items()
        if _is_test_file(path)
        and path.rsplit("/", 1)[0] in _AGENTS_DIRS
        and path not in _AGENTS_NOT_RUNNER
        and _RUNNER_CALL.search(source)
        and not _EXAMPLES.search(source)
    )
    keep = {"pyproject.toml"}
    keep.update(p for p in files if p.startswith("tests/") and not _is_test_file(p))
    todo = list(run)
    while todo:
        path = todo.pop()
        if path in keep:
            continue
        keep.add(path)
        if path.endswith(".py"):
            todo.extend(_imported(path, files[path], files) - keep)
    return keep, run


# Strands Agents' agent-loop unit tests: the agent, its event loop, tools and their
# executors, hooks, plugins, middleware, interventions and the multi-agent orchestrators
# (graph, swarm), all under tests/strands/
_STRANDS_DIRS = (
    "tests/strands/agent/",
    "tests/strands/event_loop/",
    "tests/strands/tools/",
    "tests/strands/hooks/",
    "tests/strands/plugins/",
    "tests/strands/middleware/",
    "tests/strands/interventions/",
    "tests/strands/multiagent/",
)
_STRANDS_NOT_LOOP = (
    # Strands' MCP client against MCP servers (strands-agents caps mcp<2.2; the
    # environment has the Agents SDK's newer mcp)
    "tests/strands/tools/mcp/",
    # the A2A protocol's server and client (a2a-sdk: Strands' a2a extra, not installed)
    "tests/strands/multiagent/a2a/",
    "tests/strands/agent/test_a2a_agent.py",
)


def _strands(files: dict[str, bytes]) -> tuple[set[str], list[str]]:
    """The agent-loop test files, every other file under tests/ but test files
    (conftests, fixtures, their data), and the pyproject (pytest configuration)."""
    run = sorted(
        path
        for path in files
        if _is_test_file(path)
        and path.startswith(_STRANDS_DIRS)
        and not path.startswith(_STRANDS_NOT_LOOP)
    )
    keep = {"pyproject.toml", *run}
    keep.update(p for p in files if p.startswith("tests/") and not _is_test_file(p))
    return keep, run


SUITES: dict[str, Suite] = {
    "langchain": Suite(name="langchain", select=_langchain),
    # tests/test_error_logging_redaction.py looks for the SDK's frames under src/agents
    "openai-agents": Suite(name="openai-agents", select=_agents, links=(("src/agents", "agents"),)),
    "strands": Suite(name="strands", distribution="strands-agents", select=_strands),
}


def cache_root() -> Path:
    base = os.environ.get("SEAMSCOPE_CI_CACHE") or str(Path.home() / ".cache" / "seamscope-ci")
    return Path(base) / "framework-suites"


def _key(suite: Suite) -> str:
    """The version and this file's selection rules: a change to either extracts again."""
    rules = Path(__file__).read_bytes()
    return hashlib.sha256(f"{suite.dist}=={suite.version}\n".encode() + rules).hexdigest()[:16]


def download_sdist(name: str, version: str, into: Path) -> Path:
    """The sdist of ``name==version`` in ``into`` (downloaded unless already there)."""
    into.mkdir(parents=True, exist_ok=True)
    found = sorted(into.glob("*.tar.gz"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                str(into),
                f"{name}=={version}",
            ],
            check=True,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        found = sorted(into.glob("*.tar.gz"))
    if len(found) != 1:
        raise RuntimeError(f"expected one sdist of {name}=={version} in {into}, found {found}")
    return found[0]


def _read(sdist: Path) -> dict[str, bytes]:
    """The sdist's regular files, by path without its top folder."""
    files: dict[str, bytes] = {}
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if not member.isfile() or "/" not in member.name:
                continue
            path = member.name.split("/", 1)[1]
            if ".." in Path(path).parts or "__pycache__" in Path(path).parts:
                continue
            handle = archive.extractfile(member)
            if handle is not None:
                files[path] = handle.read()
    return files


@dataclass(frozen=True)
class Prepared:
    """A suite's extracted tests: pytest runs in ``folder`` with ``paths``."""

    name: str
    version: str
    folder: Path
    paths: list[str]


def prepare(suite: Suite) -> Prepared:
    """``suite``'s extracted tests, fetched and extracted unless the cache has them."""
    version = suite.version
    home = cache_root() / f"{suite.dist}-{version}"
    tree = home / "suite"
    marker = home / "extracted.json"
    key = _key(suite)
    if marker.is_file() and tree.is_dir():
        made = json.loads(marker.read_text())
        if made.get("key") == key:
            _link(suite, tree)
            return Prepared(suite.name, version, tree, list(made["paths"]))
    sdist = download_sdist(suite.dist, version, home / "sdist")
    files = _read(sdist)
    keep, paths = suite.select(files)
    if not paths:
        raise RuntimeError(f"{sdist.name}: no test of the suite {suite.name}")
    partial = Path(tempfile.mkdtemp(prefix="suite.", dir=home))
    try:
        for path in sorted(keep):
            target = partial / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[path])
        shutil.rmtree(tree, ignore_errors=True)
        partial.rename(tree)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    made = {"key": key, "sdist": sdist.name, "files": len(keep), "paths": paths}
    marker.write_text(json.dumps(made, indent=1) + "\n")
    _link(suite, tree)
    return Prepared(suite.name, version, tree, paths)


def _link(suite: Suite, tree: Path) -> None:
    """The suite's links to the installed packages (made again if they point elsewhere)."""
    for path, module in suite.links:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{suite.name}: {module} is not installed")
        target = Path(spec.origin).resolve().parent
        link = tree / path
        if link.is_symlink() and link.resolve() == target:
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)


def sdist_ships_tests(name: str, version: str) -> bool:
    """Whether the sdist of ``name==version`` holds any ``tests/`` file."""
    sdist = download_sdist(name, version, cache_root() / f"{name}-{version}" / "sdist")
    with tarfile.open(sdist) as archive:
        return any(
            "/tests/" in f"/{member.name.split('/', 1)[-1]}" and member.isfile()
            for member in archive.getmembers()
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pydantic-ai",
        action="store_true",
        help="also check whether pydantic-ai-slim's sdist ships its tests",
    )
    args = parser.parse_args(argv)
    for suite in SUITES.values():
        prepared = prepare(suite)
        print(f"{suite.dist}=={prepared.version}: {prepared.folder} ({len(prepared.paths)} paths)")
    if args.pydantic_ai:
        version = importlib.metadata.version("pydantic-ai-slim")
        ships = sdist_ships_tests("pydantic-ai-slim", version)
        print(f"pydantic-ai-slim=={version}: sdist ships tests: {'yes' if ships else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
