"""A pydantic-ai run resumed at its tools, on another worker.

pydantic-ai resumes a run at its tools in two ways, both with the history
(``message_history=``) and no new prompt: the history ends in the response
whose tool calls never ran (worker A stopped after its model answered), or
its deferred calls come back approved (``deferred_tool_results=``). Either
way worker B (its own layer and capability, the same SQLite offload store)
runs the recall that A's model request emitted before any request of its
own. The model is scripted, the run loop, the deferred calls and the
history are pydantic-ai's; no network.

The recall's cost must be the one an uninterrupted run on one worker
charges: the R tokens it brought back as input and the output tokens of the
request that emitted it (A's, read from that ``ModelResponse``'s usage in
the history), settled once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import (
    Agent,
    CallToolsNode,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
)
from pydantic_ai.capabilities import PrepareTools
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.tools import ToolDefinition

from seamscope.adapters import DecisionLayer
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.decisions import Settlement
from seamscope.loop import RECALL_TOOL
from seamscope.stores import SQLiteStore
from seamscope.telemetry import conventions as c

from ._pydantic_ai_support import (
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

# request 1 (1 000 in, 40 out) emits big_report (offloaded); request 2 (2 000
# in, 30 out) emits the recall; request 3 (3 000 in, 10 out) answers
REQUESTS_1_2 = (
    step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0)),
    step(call(RECALL_TOOL, {"offload_id": "off-1"}, "c2"), usage=(2_000, 30, 0)),
)
REQUEST_3 = step(text("Q3 revenue totals 42."), usage=(3_000, 10, 0))


async def _recall_needs_approval(
    ctx: RunContext[Any], tool_defs: list[ToolDefinition]
) -> list[ToolDefinition]:
    """Every recall waits for a human's approval (pydantic-ai's ``unapproved`` kind)."""
    return [
        dataclasses.replace(t, kind="unapproved") if t.name == RECALL_TOOL else t for t in tool_defs
    ]


@dataclasses.dataclass
class Worker:
    """One worker process: its own layer, capability, agent and scripted model."""

    layer: DecisionLayer
    seamscope: SeamscopeCapability
    agent: Agent[Any, Any]
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
    seamscope = SeamscopeCapability(layer, offload_store=SQLiteStore(str(database)))
    models, log = scripted_models([OPUS], steps)
    capabilities: list[Any] = [seamscope]
    if approval:
        capabilities.append(PrepareTools(_recall_needs_approval))
    agent: Agent[Any, Any] = Agent(
        models[OPUS],
        name=AGENT,
        instructions="You analyse sales.",
        tools=[Toolbox().tools()["big_report"]],
        capabilities=capabilities,
        output_type=[str, DeferredToolRequests],
    )
    return Worker(layer, seamscope, agent, log)


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


def recall_iteration(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    """The iteration the recall's execute_tool span belongs to (it holds the recall's event)."""
    (tool,) = [s for s in spans if s.name == f"execute_tool {RECALL_TOOL}"]
    assert tool.parent is not None
    (iteration,) = [
        s for s in spans if s.context is not None and s.context.span_id == tool.parent.span_id
    ]
    assert c.SPAN_ITERATION == iteration.name
    assert [c.EVENT_OFFLOAD_RECALLED] == [e.name for e in iteration.events]
    return iteration


def assert_one_worker_amounts(settlement: Settlement) -> None:
    """What one uninterrupted worker settles (by hand, $5 / $25 per 1M tokens):
    big_report's R = 80 000 chars = 20 000 tokens; request 2 carries the stub;
    the recall brings R/4 back as input and charges request 2's 30 output
    tokens: R/4 x $5/M + 30 x $25/M = $0.10075; request 3 holds the full text
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


def settle_once(a: Worker, b: Worker) -> Settlement:
    """End the conversation on B, then on A: settled once, by B."""
    (settlement,) = b.layer.end_conversation("conv-r", store=b.seamscope.outputs.store)
    assert [] == a.layer.end_conversation("conv-r", store=a.seamscope.outputs.store)
    return settlement


def assert_b_got_the_text_back(b: Worker) -> None:
    assert BIG_REPORT_CHARS == len(b.log[0].outputs()["c2"])
    assert b.log[0].outputs()["c1"].startswith("[offloaded off-1: 20000 tokens from big_report;")


def test_one_uninterrupted_worker_charges_the_recall_the_output_of_the_request_that_emitted_it(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """The reference: the same script on one worker, in one run."""
    one = worker(
        tracer_provider, tmp_path / "offloads.db", (*REQUESTS_1_2, REQUEST_3), approval=False
    )
    result = one.agent.run_sync("the q3 report", conversation_id="conv-r")
    assert "Q3 revenue totals 42." == result.output
    spans = list(span_exporter.get_finished_spans())
    assert [("off-1", BIG_REPORT_CHARS / 4, 30, "c2")] == recalled(spans)
    recall_iteration(spans)
    (settlement,) = one.layer.end_conversation("conv-r", store=one.seamscope.outputs.store)
    assert_one_worker_amounts(settlement)


def test_a_recall_whose_call_a_stopped_worker_left_is_charged_as_one_worker_charges_it(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Worker A stops once request 2 answered (the history ends in that response,
    its recall not run); worker B runs that history without a prompt:
    pydantic-ai runs the recall first, charged R/4 x $5/M + 30 x $25/M
    (request 2's 30 output tokens, from its ModelResponse in the history; 0
    before); settled once, by B, with the one-worker amounts."""
    database = tmp_path / "offloads.db"
    a = worker(tracer_provider, database, REQUESTS_1_2, approval=False)

    async def until_the_recall_is_emitted() -> list[ModelMessage]:
        async with a.agent.iter("the q3 report", conversation_id="conv-r") as run:
            async for node in run:
                if isinstance(node, CallToolsNode) and any(
                    p.tool_name == RECALL_TOOL for p in node.model_response.tool_calls
                ):
                    return run.all_messages()
        raise AssertionError("the recall was never emitted")

    history = asyncio.run(until_the_recall_is_emitted())
    last = history[-1]
    assert isinstance(last, ModelResponse) and ["c2"] == [p.tool_call_id for p in last.tool_calls]
    assert [] == recalled(span_exporter.get_finished_spans())  # nothing recalled on A
    span_exporter.clear()

    b = worker(tracer_provider, database, (REQUEST_3,), approval=False)
    final = b.agent.run_sync(message_history=history)
    spans = list(span_exporter.get_finished_spans())

    assert "Q3 revenue totals 42." == final.output
    assert "conv-r" == final.conversation_id
    assert_b_got_the_text_back(b)
    assert [("off-1", BIG_REPORT_CHARS / 4, 30, "c2")] == recalled(spans)
    recall_iteration(spans)
    assert_one_worker_amounts(settle_once(a, b))


def test_an_approved_recall_a_resumed_run_runs_is_charged_as_one_worker_charges_it(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Every recall needs approval: worker A's run ends with the recall deferred
    (``DeferredToolRequests``); worker B runs the history with the approval:
    the approved recall runs there, in its own iteration (its execute_tool
    span), charged R/4 x $5/M + 30 x $25/M (before: no span, no recall);
    settled once, by B, with the one-worker amounts."""
    database = tmp_path / "offloads.db"
    a = worker(tracer_provider, database, REQUESTS_1_2, approval=True)
    interrupted = a.agent.run_sync("the q3 report", conversation_id="conv-r")
    assert isinstance(interrupted.output, DeferredToolRequests)
    assert ["c2"] == [p.tool_call_id for p in interrupted.output.approvals]
    assert [] == recalled(span_exporter.get_finished_spans())  # nothing recalled on A
    span_exporter.clear()

    b = worker(tracer_provider, database, (REQUEST_3,), approval=True)
    final = b.agent.run_sync(
        message_history=interrupted.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c2": True}),
    )
    spans = list(span_exporter.get_finished_spans())

    assert "Q3 revenue totals 42." == final.output
    assert_b_got_the_text_back(b)
    assert [("off-1", BIG_REPORT_CHARS / 4, 30, "c2")] == recalled(spans)
    iteration = recall_iteration(spans)
    chats = [s for s in spans if s.name == f"chat {OPUS}"]
    assert 1 == len(chats)  # B's request, in the iteration after the recall's
    assert chats[0].parent is not None and iteration.context is not None
    assert chats[0].parent.span_id != iteration.context.span_id
    assert_one_worker_amounts(settle_once(a, b))
