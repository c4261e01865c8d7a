"""The decision core works with opentelemetry and structlog unavailable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib.abc
    import json
    import sys

    BLOCKED = ("opentelemetry", "structlog")


    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"blocked for this test: {name}", name=name)
            return None


    for loaded in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
        del sys.modules[loaded]
    sys.meta_path.insert(0, Block())

    try:
        import opentelemetry  # noqa: F401
    except ModuleNotFoundError:
        blocked = True
    else:
        blocked = False

    import seamscope.decisions
    from seamscope import (
        AllowlistStage,
        DispatchContext,
        ForcedChoiceStage,
        IntentRoutingStage,
        LazyRoutingStage,
        ModelConfig,
        OffloadGateDecision,
        OffloadGateInputs,
        PolicyStage,
        RolePaletteStage,
        SelectionPipeline,
        SelectionStage,
        StageOutcome,
        ToolCallPolicy,
        evaluate_offload_gate,
    )

    decision = evaluate_offload_gate(OffloadGateInputs(20_000, 5, 0.5, "claude-opus-4-6"))
    assert isinstance(decision, OffloadGateDecision)
    print(json.dumps({
        "blocked": blocked,
        "fire": decision.fire,
        "net": decision.net_saving_usd,
        "source": str(decision.pricing_source),
        "leaked": sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED),
    }))
    """
)


def test_the_core_imports_and_decides_without_opentelemetry_or_structlog() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert (0, "") == (proc.returncode, proc.stderr)
    assert {
        "blocked": True,
        "fire": True,
        "net": 0.463625,
        "source": "genai-prices",
        "leaked": [],
    } == json.loads(proc.stdout)


def _seamscope_imports(path: str) -> list[str]:
    """The seamscope modules a source file imports (at any level, TYPE_CHECKING too)."""
    import ast

    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("seamscope"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith("seamscope"))
    return found


def test_the_records_package_imports_nothing_else_of_seamscope() -> None:
    import pathlib

    import seamscope.decisions.records as records

    package = pathlib.Path(str(records.__file__)).parent
    modules = sorted(package.glob("*.py"))
    assert {"__init__.py", "_values.py", "_economics.py"} <= {m.name for m in modules}
    assert {} == {
        m.name: outside
        for m in modules
        if (
            outside := [
                name
                for name in _seamscope_imports(str(m))
                if not name.startswith("seamscope.decisions.records.")
            ]
        )
    }


def test_the_core_never_imports_telemetry_adapters_or_the_cli() -> None:
    import pathlib

    import seamscope.decisions as core

    root = pathlib.Path(str(core.__file__)).parent
    outside = {
        str(path.relative_to(root)): [
            m for m in _seamscope_imports(str(path)) if not m.startswith("seamscope.decisions")
        ]
        for path in sorted(root.rglob("*.py"))
    }
    assert {} == {name: mods for name, mods in outside.items() if mods}
