"""whatif's exact part is exact when a model call recalls two offloads and one of
them no longer fires under the change: the model call's output, charged with its
first recall (the loop's rule for parallel recalls), belongs in the counterfactual
to the first recall that still happens. Checked against the conversation run
again, for real, under the changed configuration."""

from __future__ import annotations

import contextlib
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.decisions import OffloadGate
from seamscope.decisions.records import ModelUsage, ToolCall
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import configure

MODEL = "gpt-4o"
SMALL, LARGE = 5_000.0, 20_000.0  # the two outputs: under and over the changed threshold
RECORDED, CHANGED = 1_000, 10_000  # the gate's threshold_tokens: both fire, only LARGE fires
RECALL_OUTPUT = 37  # the output of the model call that recalls


def _ids() -> Any:
    count = iter(range(1, 1 << 20))
    return lambda: f"off-{next(count)}"


def _play(layer: DecisionLayer, conversation_id: str, small_first: bool) -> Decimal:
    """Two tool outputs, both recalled by one later model call (parallel recalls,
    ``small_first``: the small one's first), then two more model calls; the
    conversation's realized net saving."""
    outputs = [("lookup", SMALL), ("search", LARGE)]
    with layer.turn(conversation_id, []) as turn:
        with turn.iteration() as it:
            with it.chat(MODEL) as call:
                call.report(ModelUsage(2_000, 40), carried=())
            offloads = []
            for n, (tool, tokens) in enumerate(outputs):
                decision = it.offload(ToolCall(f"{conversation_id}-c{n}", tool, {}), tokens)
                offloads.append((decision.offload_id if decision.fire else None, tokens))
        live = tuple(o for o, _ in offloads if o)
        in_prompt = sum(t for o, t in offloads if not o)
        with turn.iteration() as it:
            with it.chat(MODEL) as call:
                call.report(ModelUsage(2_000 + int(in_prompt) + 160, RECALL_OUTPUT), carried=live)
            order = offloads if small_first else offloads[::-1]
            for n, (offload_id, tokens) in enumerate(order):
                if offload_id is None:
                    continue  # its output is in the prompt: nothing to recall
                arguments = {"offload_id": offload_id}
                with it.execute_tool(ToolCall(f"{conversation_id}-r{n}", RECALL_TOOL, arguments)):
                    it.recall(offload_id, input_tokens=tokens, output_tokens=RECALL_OUTPUT)
        for _ in range(2):
            with turn.iteration() as it, it.chat(MODEL) as call:
                call.report(ModelUsage(2_000 + int(SMALL + LARGE), 40), carried=())
    settled = layer.end_conversation(conversation_id)
    return sum((s.realized_net_saving for s in settled), Decimal(0))


def _layer(threshold: int, **more: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=MODEL,
        offload_threshold_tokens=threshold,
        offload_id_factory=_ids(),
        **more,
    )


def _whatif(path: Path, *sets: str) -> dict[str, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main(["whatif", str(path), *[f"--set={s}" for s in sets], "--format=json"])
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return {r["conversation_id"]: r for r in rows if "conversation_id" in r}


def test_a_no_longer_fired_recall_beside_one_that_still_fires_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    handle = configure(
        service_name="parallel-recalls", trace_file=path, set_global=False,
        register_atexit=False, environ={},
    )  # fmt: skip
    recorded = {}
    try:
        layer = _layer(RECORDED, telemetry=handle)
        for conversation_id, small_first in (("small-first", True), ("large-first", False)):
            recorded[conversation_id] = _play(layer, conversation_id, small_first)
        handle.flush()
    finally:
        handle.shutdown()
    unchanged = _whatif(path)
    rows = _whatif(path, f"threshold_tokens={CHANGED}")
    quiet = {"tracer_provider": trace.NoOpTracerProvider()}
    rerun = _layer(CHANGED, meter_provider=metrics.NoOpMeterProvider(), **quiet)
    for conversation_id, small_first in (("small-first", True), ("large-first", False)):
        row = rows[conversation_id]
        assert Decimal(unchanged[conversation_id]["realized_usd"]) == recorded[conversation_id]
        assert (2, 1, 1, []) == (
            row["recorded_fires"],
            row["counterfactual_fires"],
            len(row["no_longer_fired"]),
            row["newly_fired"],
        )
        truth = _play(rerun, conversation_id, small_first)  # for real, under the change
        assert truth == Decimal(row["counterfactual_exact_usd"]), conversation_id
        assert truth == Decimal(row["counterfactual_usd"]), conversation_id


def test_the_live_shadow_settles_such_recalls_as_whatif_does() -> None:
    """The live ledger's shadow under the changed threshold follows the same rule:
    its exact part equals the conversation run again under it."""
    quiet = {
        "tracer_provider": trace.NoOpTracerProvider(),
        "meter_provider": metrics.NoOpMeterProvider(),
    }
    shadow = OffloadGate(large_offload_threshold_tokens=CHANGED)
    live = _layer(RECORDED, offload_shadow=shadow, **quiet)
    rerun = _layer(CHANGED, **quiet)
    for conversation_id, small_first in (("small-first", True), ("large-first", False)):
        _play(live, conversation_id, small_first)
        (settled,) = [
            s for s in live.ledger.shadow_settlements if s.conversation_id == conversation_id
        ]
        assert (1, ()) == (len(settled.no_longer_fired), settled.offloads)
        assert _play(rerun, conversation_id, small_first) == settled.exact_net_saving
