"""A run the Agents SDK resumes at its tools, on another worker.

An agent whose recall tool needs approval: worker A's model call emits the
recall, the SDK stops the run for approval (``result.interruptions``), and
the run's ``RunState`` is serialized (``to_json``). Worker B (its own
layer and runner, the same SQLite offload store) restores it
(``RunState.from_json``), approves the call and resumes the run: the SDK
runs the recall there before any model call of B. The model is scripted,
the run loop, the approvals and the state's serialization are the SDK's;
no network.

The recall's cost must be the one an uninterrupted run on one worker
charges: the R tokens it brought back as input and the output tokens of the
model call that emitted it (A's call, read from the state's model
responses), settled once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunState, set_tracing_disabled
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.decisions import Settlement
from seamscope.loop import RECALL_TOOL
from seamscope.stores import SQLiteStore
from seamscope.telemetry import conventions as c

from ._openai_agents_support import (
    BIG_REPORT_CHARS,
    ModelCall,
    Step,
    Toolbox,
    call,
    scripted_models,
    step,
    text,
)
from ._resume import RATE_IN, prices, recall_cost

OPUS = "claude-opus-4-6"
AGENT = "analyst"
PRICES = prices(OPUS)

# call 1 (1 000 in, 40 out) emits big_report (offloaded); call 2 (2 000 in,
# 30 out) emits the recall; call 3 (3 000 in, 10 out) answers
CALLS_1_2 = (
    step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0)),
    step(call(RECALL_TOOL, {"offload_id": "off-1"}, "c2"), usage=(2_000, 30, 0)),
)
CALL_3 = step(text("Q3 revenue totals 42."), usage=(3_000, 10, 0))


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SDK's own exporter posts to OpenAI when a key is set: no key, tracing off."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@dataclasses.dataclass
class Worker:
    """One worker process: its own layer, runner, agent and scripted model."""

    layer: DecisionLayer
    runner: SeamscopeRunner
    agent: Agent[Any]
    log: list[ModelCall]


def worker(
    tracer_provider: TracerProvider, database: Path, steps: Sequence[Step], *, approval: bool
) -> Worker:
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        pricing=PRICES,
        tracer_provider=tracer_provider,
        offload_id_factory=lambda: "off-1",
    )
    runner = SeamscopeRunner(layer, offload_store=SQLiteStore(str(database)))
    models, log = scripted_models([OPUS], steps)
    recall = runner.recall_tool
    if approval:  # every call of the recall tool waits for a human's approval
        recall = dataclasses.replace(recall, needs_approval=True)
    agent = Agent(
        name=AGENT,
        instructions="You analyse sales.",
        model=models[OPUS],
        tools=[Toolbox().tools()["big_report"], recall],
    )
    return Worker(layer, runner, agent, log)


def recalled(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """The recalls on the spans: (offload id, input tokens, output tokens, call id)."""
    return [
        (
            event.attributes[c.ATTR_OFFLOAD_ID],
            event.attributes[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            event.attributes[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            event.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
        )
        for span in spans
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED and event.attributes is not None
    ]


def children(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[str]:
    assert span.context is not None
    return sorted(
        s.name for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id
    )


def assert_one_worker_amounts(settlement: Settlement) -> None:
    """What one uninterrupted worker settles (by hand, $5 / $25 per 1M tokens):
    big_report's R = 80 000 chars = 20 000 tokens; call 2 carries the stub;
    the recall brings R/4 back as input and charges call 2's 30 output
    tokens: R/4 x $5/M + 30 x $25/M = $0.10075; call 3 holds the full text
    again (not carried)."""
    assert ("off-1", "conv-r", 1, 1) == (
        settlement.offload_id,
        settlement.conversation_id,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert recall_cost(BIG_REPORT_CHARS) == settlement.recall_cost
    assert Decimal("0.10075") == settlement.recall_cost
    assert Decimal(BIG_REPORT_CHARS) / 4 * RATE_IN == settlement.realized_savings


def test_one_uninterrupted_worker_charges_the_recall_the_output_of_the_call_that_emitted_it(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """The reference: the same script on one worker, the recall needing no approval."""
    one = worker(tracer_provider, tmp_path / "offloads.db", (*CALLS_1_2, CALL_3), approval=False)
    result = asyncio.run(one.runner.run(one.agent, "the q3 report", conversation="conv-r"))
    assert "Q3 revenue totals 42." == result.final_output
    assert [("off-1", BIG_REPORT_CHARS / 4, 30, "c2")] == recalled(
        span_exporter.get_finished_spans()
    )
    (settlement,) = one.layer.end_conversation("conv-r", store=one.runner.outputs.store)
    assert_one_worker_amounts(settlement)


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
def test_a_recall_a_run_resumed_on_another_worker_runs_is_charged_as_one_worker_charges_it(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Worker A stops at the recall's approval; worker B resumes the serialized
    state and runs the recall first: its cost is R/4 x $5/M + 30 x $25/M (call
    2's 30 output tokens, from the state's model responses; 0 before), in an
    iteration of its own (the approved call's execute_tool span), then B's
    model call; settled once, by B, with the one-worker amounts."""
    database = tmp_path / "offloads.db"
    a = worker(tracer_provider, database, CALLS_1_2, approval=True)
    interrupted = asyncio.run(a.runner.run(a.agent, "the q3 report", conversation="conv-r"))
    assert [("c2", RECALL_TOOL)] == [
        (item.raw_item.call_id, item.tool_name)  # type: ignore[union-attr]
        for item in interrupted.interruptions
    ]
    saved = interrupted.to_state().to_json()
    assert [] == recalled(span_exporter.get_finished_spans())  # nothing recalled on A
    span_exporter.clear()

    b = worker(tracer_provider, database, (CALL_3,), approval=True)

    async def resume() -> Any:
        state = await RunState.from_json(b.agent, saved)
        for item in state.get_interruptions():
            state.approve(item)
        if mode == "run":
            return await b.runner.run(b.agent, state, conversation="conv-r")
        streamed = b.runner.run_streamed(b.agent, state, conversation="conv-r")
        async for _ in streamed.stream_events():
            pass
        return streamed

    final = asyncio.run(resume())
    spans = list(span_exporter.get_finished_spans())

    # -- ground truth: B's model call got the recalled text back ----------------------
    assert "Q3 revenue totals 42." == final.final_output
    assert BIG_REPORT_CHARS == len(b.log[0].outputs()["c2"])
    assert b.log[0].outputs()["c1"].startswith("[offloaded off-1: 20000 tokens from big_report;")

    # -- telemetry: the recall's iteration, then B's model call -----------------------
    (agent_span,) = [s for s in spans if s.parent is None]
    assert f"invoke_agent {AGENT}" == agent_span.name
    iterations = sorted(
        (s for s in spans if s.name == c.SPAN_ITERATION), key=lambda s: s.start_time or 0
    )
    assert [f"execute_tool {RECALL_TOOL}"] == children(iterations[0], spans)
    assert [
        f"chat {OPUS}",
        c.SPAN_SEAM_PRE_MODEL,
        c.SPAN_SELECT_TOOLS,
    ] == children(iterations[1], spans)
    assert 2 == len(iterations)
    assert [("off-1", BIG_REPORT_CHARS / 4, 30, "c2")] == recalled(spans)

    # -- the ledger: settled once, as one worker settles it ---------------------------
    (settlement,) = b.layer.end_conversation("conv-r", store=b.runner.outputs.store)
    assert [] == a.layer.end_conversation("conv-r", store=a.runner.outputs.store)
    assert_one_worker_amounts(settlement)
