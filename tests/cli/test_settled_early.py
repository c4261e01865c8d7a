"""calibrate and whatif on offloads the ledger settled before their conversation
ended (idle under bursty turns, evicted by its bounds): the conversation goes
on, its prompts still carry the stub and its model may still recall the output,
so such a settlement is censored, not the offload's end. A corpus of known truth
is recorded with a small ledger window and run again with a ledger that never
settles early: calibrate's evidence (recalls, remaining turns, turns carried)
and whatif's realized savings on the first equal the second's settlements."""

from __future__ import annotations

import contextlib
import io
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.decisions import OffloadLedger, Settlement
from seamscope.decisions.records import ModelUsage, SettleTrigger, ToolCall
from seamscope.loop import RECALL_TOOL
from seamscope.replay import calibrate
from seamscope.telemetry import configure

MODELS = ("gpt-4o", "claude-haiku-4-5")
TOOLS = ("alpha", "beta")


@dataclass
class Script:
    """One conversation: a first model call and its tool outputs (offloaded), then
    ``later`` model calls; the first output is recalled after call ``recall_at``."""

    conversation_id: str
    model: str
    outputs: list[tuple[str, float]]
    later: int
    recall_at: int | None
    done: int = -1
    offloads: list[str] = field(default_factory=list)
    recalled: set[str] = field(default_factory=set)

    def step(self, layer: DecisionLayer) -> None:
        self.done += 1
        with layer.turn(self.conversation_id, []) as turn, turn.iteration() as it:
            carried = tuple(o for o in self.offloads if o not in self.recalled)
            in_prompt = sum(t for _, t in self.outputs) - 80 * len(carried)
            with it.chat(self.model) as call:
                call.report(ModelUsage(2_000 + int(in_prompt), 20), carried=carried)
            if self.done == 0:
                for n, (tool, tokens) in enumerate(self.outputs):
                    call_id = f"{self.conversation_id}-c{n}"
                    decision = it.offload(ToolCall(call_id, tool, {}), tokens)
                    assert decision.fire and decision.offload_id
                    self.offloads.append(decision.offload_id)
            elif self.done == self.recall_at:
                first = self.offloads[0]
                recall = ToolCall(f"{self.conversation_id}-r", RECALL_TOOL, {"offload_id": first})
                with it.execute_tool(recall):
                    it.recall(first, input_tokens=self.outputs[0][1], output_tokens=20)
                self.recalled.add(first)

    @property
    def over(self) -> bool:
        return self.done >= self.later


def _scripts(n: int, seed: int) -> list[Script]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        count = 2 if rng.random() < 0.3 else 1
        outputs = [(rng.choice(TOOLS), round(rng.uniform(4_000, 30_000), 2)) for _ in range(count)]
        later = rng.randint(2, 9)
        recall_at = rng.randint(1, later) if rng.random() < 0.5 else None
        out.append(Script(f"bursty-{i}", rng.choice(MODELS), outputs, later, recall_at))
    return out


def _run(layer: DecisionLayer, seed: int) -> dict[str, list[Settlement]]:
    """The corpus in bursts: a few conversations at a time, each taking a run of
    model calls in turn; every conversation ended at its last call."""
    rng = random.Random(seed + 1)
    pending = _scripts(24, seed)
    live: list[Script] = []
    settled: dict[str, list[Settlement]] = {}
    while pending or live:
        while pending and len(live) < 4:
            live.append(pending.pop(0))
        script = rng.choice(live)
        for _ in range(rng.randint(1, 6)):
            script.step(layer)
            if script.over:
                settled[script.conversation_id] = layer.end_conversation(script.conversation_id)
                live.remove(script)
                break
    return settled


def _ids() -> Any:
    count = iter(range(1, 1 << 20))
    return lambda: f"off-{next(count)}"


def _layer(ledger: dict[str, int], **more: Any) -> DecisionLayer:
    layer = DecisionLayer(
        default_model=MODELS[0], offload_threshold_tokens=1_000, offload_id_factory=_ids(), **more
    )
    layer.ledger = OffloadLedger(observer=layer.observer, **ledger)
    return layer


SEED = 11


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Settlement]]:
    """The corpus under a ledger that settles early (window 1 round, one live
    offload per conversation): its file and its settlements."""
    path = tmp_path_factory.mktemp("early") / "bursty.jsonl"
    handle = configure(
        service_name="bursty", trace_file=path, set_global=False, register_atexit=False,
        environ={},
    )  # fmt: skip
    try:
        layer = _layer({"idle_turns": 1, "max_offloads_per_conversation": 1}, telemetry=handle)
        _run(layer, SEED)
        handle.flush()
    finally:
        handle.shutdown()
    return path, list(layer.ledger.settlements)


@pytest.fixture(scope="module")
def truth() -> dict[str, list[Settlement]]:
    """The same corpus under a ledger that follows every offload to its
    conversation's end."""
    layer = _layer(
        {"idle_turns": 10**6},
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider(),
    )
    return _run(layer, SEED)


def test_the_corpus_settles_early_by_idleness_and_by_eviction(
    recorded: tuple[Path, list[Settlement]], truth: dict[str, list[Settlement]]
) -> None:
    triggers = Counter(s.trigger for s in recorded[1])
    assert triggers[SettleTrigger.IDLE] >= 5 and triggers[SettleTrigger.EVICTED] >= 3, triggers
    whole = [s for settled in truth.values() for s in settled]
    assert {SettleTrigger.CONVERSATION_END} == {s.trigger for s in whole}
    assert len(whole) == len(recorded[1])
    early = {s.offload_id for s in recorded[1] if s.trigger != SettleTrigger.CONVERSATION_END}
    later = {s.offload_id for s in whole if s.recalls} & early
    assert later, "some offload settled early is recalled after its settlement"


def test_calibrate_counts_an_early_settlement_to_the_conversations_end(
    recorded: tuple[Path, list[Settlement]], truth: dict[str, list[Settlement]]
) -> None:
    path, _ = recorded
    with path.open(encoding="utf-8") as handle:
        evidence, reader = calibrate([(str(path), handle)])
    assert 0 == reader.problem_count
    expected: dict[tuple[str, str], dict[str, Any]] = {}
    for s in (s for settled in truth.values() for s in settled):
        row = expected.setdefault(
            (s.tool_name or "", s.model),
            {"recalled": 0, "recalls": 0, "remaining": [], "carried": []},
        )
        row["recalled"] += s.recalls > 0
        row["recalls"] += s.recalls
        row["remaining"].append(s.remaining_turns)
        row["carried"].append(s.turns_carried)
    got = {
        key: {
            "recalled": ev.recalled,
            "recalls": ev.recalls,
            "remaining": sorted(ev.remaining),
            "carried": sorted(ev.carried),
        }
        for key, ev in evidence.items()
    }
    for row in expected.values():
        row["remaining"].sort()
        row["carried"].sort()
    assert expected == got


def test_whatif_realizes_an_early_settled_offload_whole(
    recorded: tuple[Path, list[Settlement]], truth: dict[str, list[Settlement]]
) -> None:
    path, _ = recorded
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main(["whatif", str(path), "--format", "json"])
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    realized = {r["conversation_id"]: Decimal(r["realized_usd"]) for r in rows[:-1]}
    whole = {
        conversation_id: sum((s.realized_net_saving for s in settled), Decimal(0))
        for conversation_id, settled in truth.items()
    }
    assert whole == realized
    assert 0 == rows[-1]["total"]["mismatched_settlements"]
