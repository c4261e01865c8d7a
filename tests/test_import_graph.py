"""The package's import graph, read with ast: no cycle inside a package
(type-only imports included), and no adapter reads another object's private
field.

Imports are read from every module of ``src/seamscope`` (``import x``,
``from x import y``, relative forms, and those under ``if TYPE_CHECKING:``);
``from pkg import name`` counts as importing ``pkg.name`` when that is a
module. A cycle among modules of one package is a defect even when one edge
is type-only: it means two modules each need the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = ROOT / "seamscope"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges[name] = {
            target for target in _imports(name, path) if target in MODULES and target != name
        }
    return edges


def cycles_within_packages(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (more than one module) whose modules
    share a package (an ``__init__`` importing its own modules is not a
    cycle: the package is their parent, not a sibling)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def parent(m: str) -> str:
        return m if MODULES[m].name == "__init__.py" else m.rpartition(".")[0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if parent(w) != parent(v) or MODULES[w].name == "__init__.py":
                continue  # only sibling modules of one package
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


# Cycles that remain; the list may only shrink (a new cycle, or one fixed and
# still listed, fails).
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycle_inside_a_package() -> None:
    assert KNOWN_CYCLES == cycles_within_packages(graph())


def test_the_cycle_finder_finds_a_type_only_cycle(tmp_path: Path) -> None:
    """Two sibling modules that import each other, one only for typing."""
    edges = {"seamscope.adapters._hooks": {"seamscope.adapters._outputs"}}
    edges["seamscope.adapters._outputs"] = {"seamscope.adapters._hooks"}
    for name in MODULES:
        edges.setdefault(name, set())
    assert [["seamscope.adapters._hooks", "seamscope.adapters._outputs"]] == [
        c for c in cycles_within_packages(edges) if c not in KNOWN_CYCLES
    ]


def test_the_graph_reads_type_only_imports() -> None:
    """The reader sees an import under ``if TYPE_CHECKING:`` (the package's
    own ``__init__`` imports the decision core that way)."""
    assert "seamscope.decisions" in graph()["seamscope"]


ADAPTERS = PACKAGE / "adapters"


def private_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls`` (dunders aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            out.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    return out


# The one module per framework allowed to lean on its internals.
INTERNALS = {
    "seamscope/adapters/symfonic/_private.py",  # symfonic's internals, one module
    "seamscope/adapters/langchain/_framework.py",
    "seamscope/adapters/openai_agents/_framework.py",  # the SDK's run-end and provider rules
}
# What the LangChain steps and watcher still read of the middleware object
# they serve (its fields are private to it); may only shrink.
KNOWN_PRIVATE_READS: dict[str, set[str]] = {}


def test_no_adapter_reads_another_objects_private_field() -> None:
    found: dict[str, set[str]] = {}
    for path in sorted(ADAPTERS.rglob("*.py")):
        key = str(path.relative_to(ROOT))
        if key in INTERNALS:
            continue
        names = {read.rsplit(".", 1)[1] for read in private_reads(path)}
        if names:
            found[key] = names
    assert KNOWN_PRIVATE_READS == found


def test_the_private_read_finder_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f(obj, self):\n    return obj._x, self._y, obj.__class__\n")
    assert ["m.py:2 ._x"] == private_reads(module, root=tmp_path)


def test_adapters_take_the_core_and_the_telemetry_through_one_internal_api() -> None:
    """No adapter imports a private module of the decision core or the
    telemetry: what they need beyond the public API is ``seamscope._internal``."""
    private = [
        f"{name} imports {target}"
        for name, targets in graph().items()
        if name.startswith(("seamscope.adapters", "seamscope.loop"))
        for target in targets
        if target.split(".")[1:2] in (["decisions"], ["telemetry"])
        and any(part.startswith("_") for part in target.split(".")[2:3])
    ]
    assert [] == sorted(private)


def test_the_framework_free_loop_has_a_room_of_its_own() -> None:
    """``seamscope.loop`` imports no adapter, and is the one home of its names
    (the adapters package re-exports the main ones; no shim module)."""
    edges = graph()
    assert [] == sorted(
        f"{name} imports {target}"
        for name, targets in edges.items()
        if name.startswith("seamscope.loop")
        for target in targets
        if target.startswith("seamscope.adapters")
    )
    assert "seamscope.adapters.loop" not in edges
    assert "seamscope.adapters.react" not in edges


def test_the_cli_is_thin_over_its_engines() -> None:
    """``seamscope.explain`` and ``seamscope.replay`` import nothing of the CLI
    (nor rich: they compute, the CLI prints), and the CLI takes them through
    their public surface, never a private module."""
    edges = graph()
    engines = ("seamscope.explain", "seamscope.replay")
    assert [] == sorted(
        f"{name} imports {target}"
        for name, targets in edges.items()
        if name.startswith(engines)
        for target in targets
        if target.startswith("seamscope.cli")
    )
    assert [] == sorted(
        f"{name} imports {target}"
        for name, targets in edges.items()
        if name.startswith("seamscope.cli")
        for target in targets
        if target.startswith(engines) and target.count(".") > 1
    )
    for name, path in MODULES.items():
        if name.startswith(engines):
            assert "rich" not in {t.split(".")[0] for t in _imports(name, path)}, name


# -- one span lifecycle ---------------------------------------------------------------------

_GONE = {"Held", "RunSpans", "ToolSpan", "Handle", "IterationScope", "_SpanScope"}
"""The span holders the one invocation type replaced."""


def _calls_and_classes(path: Path) -> tuple[set[str], list[str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    calls = [
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    ]
    return classes, calls


def test_every_span_has_one_shape_and_one_writer_of_its_failure() -> None:
    """No span holder but ``Invocation``; ``set_status`` (a span's failure:
    status ERROR with ``error.type``) is called in one module, by ``record_error``;
    no adapter builds a ``Turn`` by hand (the loop's ``start_turn`` does)."""
    holders: dict[str, set[str]] = {}
    status_writers: set[str] = set()
    turns_by_hand: set[str] = set()
    for path in sorted(ROOT.rglob("*.py")):
        name = _module(path)
        classes, calls = _calls_and_classes(path)
        if classes & _GONE:
            holders[name] = classes & _GONE
        if "set_status" in calls:
            status_writers.add(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if name.startswith("seamscope.adapters") and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Turn"
            for n in ast.walk(tree)
        ):
            turns_by_hand.add(name)
    assert ({}, {"seamscope.telemetry._invocation"}, set()) == (
        holders,
        status_writers,
        turns_by_hand,
    )


_REEXPORTERS = {
    "seamscope.decisions": "the core's front door over its records and selection",
    "seamscope.adapters": "the framework-free loop's main names beside the adapters",
    "seamscope.telemetry.conventions": "the closed value sets of the telemetry contract",
}
"""The modules that re-export public names on purpose (each name has one home besides)."""


def test_every_public_name_has_one_home_besides_the_deliberate_re_exports() -> None:
    import importlib
    import pkgutil

    import seamscope

    homes: dict[tuple[str, int], list[str]] = {}
    for found in pkgutil.walk_packages(seamscope.__path__, "seamscope."):
        if any(part.startswith("_") for part in found.name.split(".")[1:]):
            continue
        try:
            module = importlib.import_module(found.name)
        except ImportError:  # an adapter whose framework is not installed here
            continue
        for name in getattr(module, "__all__", ()):
            homes.setdefault((name, id(getattr(module, name))), []).append(found.name)
    crowded = {
        name: where
        for (name, _), where in homes.items()
        if len([m for m in where if m not in _REEXPORTERS]) > 1
    }
    assert {} == crowded


def test_the_engines_and_the_cli_read_other_packages_through_their_public_names() -> None:
    """explain, replay and the CLI import no other package's private module: the
    names they need are public where they live (``seamscope.decisions.Priors``,
    ``seamscope.loop.unsent_stub_tokens``, ``seamscope.explain.SpanRecord``)."""
    reads: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        package = ".".join(name.split(".")[:2])
        if package not in ("seamscope.explain", "seamscope.replay", "seamscope.cli"):
            continue
        private = {
            target
            for target in _imports(name, path)
            if target in MODULES
            and not target.startswith(package)
            and any(part.startswith("_") for part in target.split(".")[2:])
            and target != "seamscope._internal"
        }
        if private:
            reads[name] = private
    assert {} == reads
