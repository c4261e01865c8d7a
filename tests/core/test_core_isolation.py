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
