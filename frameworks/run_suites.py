"""The frameworks' own tests as the judge: adding seamscope never changes what the agent does.

Runs each framework's released unit tests (fetched by fetch.py, for the installed
versions) without seamscope and with it, and compares: every test that passes without
seamscope must pass with it, except the tests listed in expected_differences.toml (tests
that snapshot a drawn graph, wrap the framework's own entry point, or read what seamscope's
adapter registers on the agent, each with why).

    python frameworks/run_suites.py [--suite langchain] [--mode on] [--jobs 2]

Runs, each a pytest process (``-p frameworks.seamscope_plugin --seamscope=MODE``):
LangChain off / on / watched, the Agents SDK off / on, Strands Agents off / on. The runs
are serial pytest processes run side by side (``--jobs``, default: one per core): each
suite collects once per run, where pytest-xdist would collect once per worker. A test that
passed without seamscope and not with it is run again, alone, in that mode; passing then,
it is reported as flaky and not counted.

``--baseline-cache DIR``: the runs without seamscope are kept there and reused; they
depend only on the suite's files and the environment, so each is keyed by the suite,
its version, the interpreter and every installed distribution but seamscope (name and
version). CI keeps them beside the fetched suites.

Exits 1 on an unexpected difference, on a listed difference that did not happen (the list
is exact), or when a run collected no test or could not run; 0 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import fetch  # noqa: E402

MODES = {
    "langchain": ("off", "on", "watched"),
    "openai-agents": ("off", "on"),
    "strands": ("off", "on"),
}
EXPECTED = HERE / "expected_differences.toml"
_RUN_NUMBERS = itertools.count()


@dataclass
class Outcome:
    passed: bool
    kind: str  # passed, failed, error, skipped
    message: str = ""


@dataclass
class Run:
    suite: str
    mode: str
    returncode: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    results: dict[str, Outcome] = field(default_factory=dict)
    collection_errors: dict[str, str] = field(default_factory=dict)
    log: str = ""

    @property
    def passed(self) -> set[str]:
        return {node for node, outcome in self.results.items() if outcome.passed}

    def counts(self) -> str:
        kinds: dict[str, int] = {}
        for outcome in self.results.values():
            kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
        order = ("passed", "failed", "error", "skipped")
        text = ", ".join(f"{kinds[k]} {k}" for k in order if kinds.get(k))
        if self.collection_errors:
            text += f", {len(self.collection_errors)} modules not collected"
        return text or "nothing collected"


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMSCOPE_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into the cached suites
    return env


def _node_id(classname: str, name: str, folder: Path) -> str:
    """The pytest node id of a junit testcase (its classname is the dotted module path,
    then the class names)."""
    parts = classname.split(".") if classname else []
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut])
        if (folder / f"{module}.py").is_file():
            return "::".join([f"{module}.py", *parts[cut:], name])
    return "::".join([*parts, name])


def _first_lines(text: str, count: int = 3) -> str:
    lines = [line.rstrip() for line in (text or "").strip().splitlines() if line.strip()]
    return "\n".join(line[:240] for line in lines[:count])


def _parse(junit: Path, folder: Path, run: Run) -> None:
    if not junit.is_file():
        return
    for case in ET.parse(junit).iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if not classname and problem is not None:  # a module that could not be collected
            message = problem.get("message") or problem.text or ""
            run.collection_errors[name] = _first_lines(message, 2)
            continue
        node = _node_id(classname, name, folder)
        if problem is not None:
            message = problem.get("message") or ""
            detail = [ln for ln in (problem.text or "").splitlines() if ln.startswith("E ")]
            text = message if message.strip() else "\n".join(detail)
            kind = "failed" if problem.tag == "failure" else "error"
            outcome = Outcome(False, kind, _first_lines(text))
        elif skipped is not None:
            outcome = Outcome(False, "skipped", _first_lines(skipped.get("message") or ""))
        else:
            outcome = Outcome(True, "passed")
        previous = run.results.get(node)
        if previous is None or previous.passed:  # a teardown error after a pass counts
            run.results[node] = outcome


def run_pytest(prepared: fetch.Prepared, mode: str, paths: list[str], work: Path) -> Run:
    """One pytest process over ``paths`` of the suite, in ``mode``."""
    run = Run(prepared.name, mode)
    tag = f"{prepared.name}-{mode}-{next(_RUN_NUMBERS)}"
    junit, log = work / f"{tag}.xml", work / f"{tag}.log"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
        "-rN",
        "--continue-on-collection-errors",
        "-p",
        "frameworks.seamscope_plugin",
        f"--seamscope={mode}",
        f"--seamscope-framework={prepared.name}",
        f"--junitxml={junit}",
        *paths,
    ]
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=prepared.folder,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        # this process's own CPU time (the runs go side by side)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    run.seconds = time.monotonic() - started
    run.cpu_seconds = usage.ru_utime + usage.ru_stime
    run.returncode = process.returncode
    run.log = log.read_text(errors="replace")
    _parse(junit, prepared.folder, run)
    return run


def _baseline_key(prepared: fetch.Prepared) -> str:
    """What a run without seamscope depends on: the suite, its version, its paths, the
    interpreter, every installed distribution but seamscope."""
    installed = sorted(
        f"{(d.metadata['Name'] or '').lower()}=={d.version}"
        for d in importlib.metadata.distributions()
        if (d.metadata["Name"] or "").lower() != "seamscope"
    )
    parts = [prepared.name, prepared.version, sys.version, *prepared.paths, *installed]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _load_baseline(path: Path, suite: str) -> Run | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    run = Run(suite, "off", seconds=0.0, cpu_seconds=0.0)
    run.results = {node: Outcome(*outcome) for node, outcome in data["results"].items()}
    run.collection_errors = dict(data["collection_errors"])
    run.log = f"(the run without seamscope, kept in {path})"
    return run


def _save_baseline(path: Path, run: Run) -> None:
    if run.returncode not in (0, 1) or not run.results:
        return  # a run that could not run is not kept
    data = {
        "results": {n: [o.passed, o.kind, o.message] for n, o in run.results.items()},
        "collection_errors": run.collection_errors,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data))
    partial.replace(path)


def _expected(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    data = tomllib.loads(path.read_text()) if path.is_file() else {}
    expected: dict[tuple[str, str], dict[str, str]] = {}
    for suite, modes in data.items():
        for mode, tests in modes.items():
            expected[(suite, mode)] = dict(tests)
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", choices=sorted(MODES), help="(repeatable)")
    parser.add_argument("--mode", action="append", choices=("on", "watched"), help="(repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", type=Path, help="keep the junit files and logs in this folder")
    parser.add_argument(
        "--baseline-cache", type=Path, help="keep and reuse the runs without seamscope here"
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    suites = args.suite or sorted(MODES)
    prepared = {name: fetch.prepare(fetch.SUITES[name]) for name in suites}
    fetched = time.monotonic() - started
    expected = _expected(EXPECTED)
    work = args.keep or Path(tempfile.mkdtemp(prefix="seamscope-suites."))
    work.mkdir(parents=True, exist_ok=True)

    jobs = [
        (name, mode)
        for name in suites
        for mode in MODES[name]
        if mode == "off" or not args.mode or mode in args.mode
    ]
    runs: dict[tuple[str, str], Run] = {}
    baselines: dict[str, Path] = {}
    if args.baseline_cache is not None:
        for name in suites:
            path = args.baseline_cache / f"{name}-off-{_baseline_key(prepared[name])}.json"
            kept = _load_baseline(path, name) if path.is_file() else None
            if kept is None:
                baselines[name] = path
            else:
                runs[(name, "off")] = kept
                jobs.remove((name, "off"))
    # the longest runs first (the Agents SDK's and Strands'), so the side-by-side runs end
    # together
    jobs.sort(key=lambda job: (job[0] == "langchain", job[1] != "off"))
    again: dict[tuple[str, str], Run] = {}
    candidates: dict[tuple[str, str], list[str]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            pool.submit(run_pytest, prepared[name], mode, prepared[name].paths, work): (name, mode)
            for name, mode in jobs
        }
        for future in concurrent.futures.as_completed(futures):
            runs[futures[future]] = future.result()
        for name, path in baselines.items():
            _save_baseline(path, runs[(name, "off")])
        # each test that passed without seamscope and not with it, run again alone
        for (name, mode), run in runs.items():
            if mode != "off":
                candidates[(name, mode)] = sorted(runs[(name, "off")].passed - run.passed)
        futures = {
            pool.submit(run_pytest, prepared[name], mode, nodes, work): (name, mode)
            for (name, mode), nodes in candidates.items()
            if 0 < len(nodes) <= 200
        }
        for future in concurrent.futures.as_completed(futures):
            again[futures[future]] = future.result()

    failures: list[str] = []
    print(f"\n== frameworks' own tests with seamscope (fetch: {fetched:.0f} s)")
    for (name, mode), run in sorted(runs.items()):
        how = (
            "kept from an earlier run"
            if name not in baselines and mode == "off" and args.baseline_cache is not None
            else f"{run.seconds:.0f} s, {run.cpu_seconds:.0f} s CPU, exit {run.returncode}"
        )
        print(f"{name}=={prepared[name].version} {mode:8} {run.counts()}  [{how}]")
        if not run.results or run.returncode not in (0, 1):
            failures.append(f"{name} {mode}: pytest exit {run.returncode}, no test result")
            print(_first_lines(run.log[-3000:], 20))
    for name in suites:
        off = runs[(name, "off")]
        for module, message in sorted(off.collection_errors.items()):
            print(f"  {name}: not collected (with or without seamscope): {module}: {message}")
        for mode in MODES[name]:
            if (name, mode) not in candidates:
                continue
            run = runs[(name, mode)]
            allowed = expected.get((name, mode), {})
            rerun = again.get((name, mode))
            flaky = {n for n in candidates[(name, mode)] if rerun and n in rerun.passed}
            different = [n for n in candidates[(name, mode)] if n not in flaky]
            unexpected = [n for n in different if n not in allowed]
            missing = sorted(set(allowed) - set(different))
            print(
                f"\n-- {name} {mode}: {len(different)} passed without seamscope and not with it "
                f"({len(different) - len(unexpected)} listed, {len(unexpected)} unexpected; "
                f"{len(flaky)} flaky, passed when run again)"
            )
            for node in sorted(flaky):
                print(f"  flaky: {node}")
            for node in unexpected:
                outcome = run.results.get(node)
                if outcome is None:
                    module = node.split("::", 1)[0].removesuffix(".py").replace("/", ".")
                    why = run.collection_errors.get(module, "not collected")
                    print(f"  UNEXPECTED {node}: not run ({why})")
                else:
                    print(f"  UNEXPECTED {node} [{outcome.kind}]")
                    for line in outcome.message.splitlines():
                        print(f"      {line}")
            for node in missing:
                print(f"  LISTED BUT NOT DIFFERENT {node}: {allowed[node]}")
            if unexpected:
                failures.append(f"{name} {mode}: {len(unexpected)} unexpected differences")
            if missing:
                failures.append(f"{name} {mode}: {len(missing)} listed differences did not happen")

    total = time.monotonic() - started
    cpu = sum(run.cpu_seconds for run in [*runs.values(), *again.values()])
    print(
        f"\ntotal {total:.0f} s, {cpu:.0f} s CPU ({len(runs)} runs and {len(again)} reruns, "
        f"{args.jobs} side by side); logs: {work}"
    )
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("OK: every test that passes without seamscope passes with it (but the listed ones)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
