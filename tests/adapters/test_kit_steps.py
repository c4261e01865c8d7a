"""The kit's shared loop steps, driven through a real DecisionLayer.

The spans an in-memory exporter received, the ledger's settlement and the
stored outputs are the ground truth; the model objects are plain objects
the steps must name the way every adapter does.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters._kit import (
    RECALL_TOOL,
    account_tool_output,
    estimate_tokens,
    plan_model,
    post_model,
    report_model_call,
    structured_answers,
)
from seamscope.adapters._outputs import Outputs
from seamscope.decisions import (
    Message,
    ModelConfig,
    ModelUsage,
    PricingTable,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.decisions.records import Compaction, OffloadMechanism
from seamscope.loop import DecisionLayer
from seamscope.stores import MemoryStore
from seamscope.telemetry import conventions as c

MODEL = "m-big"
PRICES = PricingTable({MODEL: {"input": 10, "output": 30}}, use_genai_prices=False)


class _Named:
    def __init__(self, model_name: str) -> None:
        self.model_name = model_name


def _layer(tracer_provider: TracerProvider, **kwargs: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=MODEL,
        pricing=PRICES,
        agent_name="lead",
        tracer_provider=tracer_provider,
        **kwargs,
    )


def test_plan_model_runs_the_pre_seam_under_the_iteration_and_names_the_model(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    layer = _layer(
        tracer_provider,
        policies=[ToolCallPolicy(name="fast", match=lambda ctx: True, model=ModelConfig("m-gone"))],
    )
    own = _Named("m-own")
    with layer.turn("conv-1", [Message("user", "hi")]) as turn:
        it = turn.start_iteration()
        plan = plan_model(it, models={"m-other": object()}, own=own)
    assert ("m-own", True, own, "m-gone") == (
        plan.choice.name,
        plan.choice.unavailable,
        plan.choice.model,
        it.unavailable,
    )
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    pre = spans[c.SPAN_SEAM_PRE_MODEL]
    assert pre.parent is not None
    assert spans[c.SPAN_ITERATION].context.span_id == pre.parent.span_id  # type: ignore[union-attr]


def test_plan_model_takes_the_models_entry_for_the_choice(
    tracer_provider: TracerProvider,
) -> None:
    fast = object()
    layer = _layer(
        tracer_provider,
        policies=[ToolCallPolicy(name="fast", match=lambda ctx: True, model=ModelConfig("m-fast"))],
    )
    with layer.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        plan = plan_model(it, models={"m-fast": fast}, own=_Named("m-own"))
    assert (fast, "m-fast", False, None) == (
        plan.choice.model,
        plan.choice.name,
        plan.choice.unavailable,
        it.unavailable,
    )


def test_a_fired_offload_keeps_the_output_and_the_ledger_prices_the_stub_really_sent(
    tracer_provider: TracerProvider,
) -> None:
    layer = _layer(tracer_provider)
    outputs = Outputs(MemoryStore(max_items=8))
    text = "x" * 80_000  # 20 000 tokens: above the gate's threshold
    call = ToolCall("c1", "report", {})
    with layer.turn("conv-1", [Message("user", "hi")]) as turn:
        with turn.iteration() as it:
            it.pre_model()
            stub = account_tool_output(it, call, text, outputs=outputs, scope="conv-1", usage=None)
            offloads = outputs.held("conv-1")
            assert ["c1"] == list(offloads)
            offload_id = offloads["c1"].offload_id
            assert stub == offloads["c1"].stub
            assert stub is not None
            assert text == outputs.answer("conv-1", "r1", offload_id)
            # another conversation reads nothing
            assert outputs.answer("conv-2", "r2", offload_id).startswith("error: no offloaded")
            assert offload_id in stub
        with turn.iteration() as it:
            it.pre_model()
            with it.chat(MODEL) as chat:
                report_model_call(
                    chat, ModelUsage(1000, 10), response_model="", carried=[offload_id]
                )
            recall = ToolCall("c2", RECALL_TOOL, {"offload_id": offload_id})
            assert text == outputs.answer("conv-1", "c2", offload_id)  # the recall tool's answer
            assert None is account_tool_output(
                it, recall, None, outputs=outputs, scope="conv-1", usage=ModelUsage(1000, 10)
            )
            assert None is outputs.outcome("c2")  # taken by the accounting step
    (settlement,) = layer.end_conversation("conv-1")
    per_token_in = Decimal(10) / Decimal(1_000_000)
    stub_tokens = Decimal(str(estimate_tokens(stub)))
    assert (1, 1) == (settlement.turns_carried, settlement.recalls)
    assert stub_tokens * per_token_in == settlement.stub_carry_cost
    assert stub.startswith(f"[offloaded {offload_id}: 20000 tokens from report;")
    assert 80 != estimate_tokens(stub)  # priced as sent, not at the gate's assumed size


def test_a_small_or_non_text_output_is_left_as_it_is(tracer_provider: TracerProvider) -> None:
    layer = _layer(tracer_provider)
    outputs = Outputs(MemoryStore(max_items=8))
    with layer.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        call = ToolCall("c1", "report", {})
        assert None is account_tool_output(
            it, call, "small", outputs=outputs, scope="s", usage=None
        )
        assert None is account_tool_output(it, call, None, outputs=outputs, scope="s", usage=None)
        missing = ToolCall("c2", RECALL_TOOL, {"offload_id": "nope"})
        assert None is account_tool_output(
            it, missing, None, outputs=outputs, scope="s", usage=None
        )
    assert {} == outputs.held("s")


def test_a_re_read_of_a_compacted_result_is_a_recall_and_offload_false_skips_the_gate(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """A framework's context editing cleared a result; the same call fetches it
    again: ``reread`` names the compaction and the text is a recall's cost.
    ``offload=False`` keeps a large output as it is (no gate)."""
    layer = _layer(tracer_provider)
    outputs = Outputs(MemoryStore(max_items=8))
    text = "x" * 80_000  # 20 000 tokens: above the gate's threshold
    asked: list[ToolCall] = []

    def reread(call: ToolCall) -> str | None:
        asked.append(call)
        return "cmp-1" if call.name == "report" else None

    layer.ledger.record_compaction(
        Compaction("cmp-1", OffloadMechanism.CONTEXT_EDITING, MODEL, 20_000.0, 2.25),
        conversation_id="conv-1",
    )
    with layer.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        it.pre_model()
        again, other = ToolCall("c1", "report", {}), ToolCall("c2", "search", {})
        usage = ModelUsage(1000, 7)
        for call in (again, other):
            assert None is account_tool_output(
                it,
                call,
                text,
                outputs=outputs,
                scope="s",
                usage=usage,
                offload=False,
                reread=reread,
            )
    assert [again, other] == asked
    assert {} == outputs.held("s")
    assert [] == [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]
    (settlement,) = layer.end_conversation("conv-1")
    per_token_in, per_token_out = Decimal(10) / 1_000_000, Decimal(30) / 1_000_000
    assert ("cmp-1", 1) == (settlement.offload_id, settlement.recalls)
    assert 20_000 * per_token_in + 7 * per_token_out == settlement.recall_cost


def test_a_structured_answer_is_a_dispatch_under_the_iteration_that_no_policy_routes(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    everything = ToolCallPolicy("everything", match=lambda ctx: True, redirect_to="search")
    layer = _layer(tracer_provider, policies=[everything])
    answer = ToolCall("c9", "final_result", {"growth": 0.12})
    with layer.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        it.pre_model()
        structured_answers(it, Message("assistant", "", (answer,)), [answer])
    spans = list(span_exporter.get_finished_spans())
    [dispatch] = [s for s in spans if s.name == c.SPAN_DISPATCH]
    [iteration] = [s for s in spans if s.name == c.SPAN_ITERATION]
    a = dispatch.attributes or {}
    assert iteration.context.span_id == dispatch.parent.span_id  # type: ignore[union-attr]
    assert (True, "final_result", "c9", "conv-1") == (
        a.get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT),
        a.get(c.ATTR_DISPATCH_FINAL_TOOL),
        a.get(c.ATTR_GEN_AI_TOOL_CALL_ID),
        a.get(c.ATTR_GEN_AI_CONVERSATION_ID),
    )
    assert None is a.get(c.ATTR_POLICY_WINNER)
    assert [] == [s for s in spans if s.name == c.SPAN_SEAM_POST_MODEL]


@pytest.mark.parametrize("fails", [False, True])
def test_a_tool_span_ends_once_with_the_error_or_the_output(
    fails: bool, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    layer = _layer(tracer_provider)
    with layer.turn("conv-1", [Message("user", "hi")]) as turn:
        it = turn.start_iteration()
        post = post_model(it, Message("assistant", "", (ToolCall("c1", "search", {}),)))
        tool = it.start_tool(post.calls[0])
        turn.end_iteration()
        if fails:
            tool.fail(KeyError("k"))
        it.tool_result(tool, "answer")
        tool.stop()
        tool.end(None)
    tools = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool search"]
    (tool,) = tools
    assert ("KeyError" if fails else None) == (tool.attributes or {}).get(c.ATTR_ERROR_TYPE)
    assert "c1" == (tool.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID)


def test_a_recall_on_a_worker_whose_first_event_is_that_call_is_accounted_in_the_shared_store(
    tracer_provider: TracerProvider, tmp_path: Any
) -> None:
    """Worker A offloads into a shared store; worker B's first event of the
    conversation is the recall (a run resumed at its tools): its accounts go to
    the shared store, so the one settlement counts it."""
    from seamscope.stores import SQLiteStore

    path = str(tmp_path / "offloads.sqlite")
    worker_a, worker_b = _layer(tracer_provider), _layer(tracer_provider)
    outputs_a, outputs_b = Outputs(SQLiteStore(path)), Outputs(SQLiteStore(path))
    text = "x" * 80_000
    with worker_a.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        it.pre_model()
        stub = account_tool_output(
            it, ToolCall("c1", "report", {}), text, outputs=outputs_a, scope="conv-1", usage=None
        )
    assert stub is not None
    offload_id = outputs_a.held("conv-1")["c1"].offload_id
    with worker_b.turn("conv-1", [Message("user", "hi")]) as turn, turn.iteration() as it:
        it.pre_model()
        assert text == outputs_b.answer("conv-1", "c2", offload_id)  # the recall tool ran here
        recall = ToolCall("c2", RECALL_TOOL, {"offload_id": offload_id})
        account_tool_output(
            it, recall, None, outputs=outputs_b, scope="conv-1", usage=ModelUsage(1000, 10)
        )
    (settlement,) = worker_a.end_conversation("conv-1", store=outputs_a.store)
    assert 1 == settlement.recalls


def test_every_adapter_offers_the_one_recall_tool(tracer_provider: TracerProvider) -> None:
    """The recall tool's name, description and schema are the kit's ``RECALL``
    in each framework's own tool shape."""
    import asyncio

    from seamscope.adapters._kit import RECALL
    from seamscope.adapters.openai_agents import SeamscopeRunner
    from seamscope.adapters.pydantic_ai import SeamscopeCapability

    layer = _layer(tracer_provider)
    sdk = SeamscopeRunner(layer).recall_tool
    assert (RECALL.name, RECALL.description, RECALL.schema) == (
        sdk.name,
        sdk.description,
        sdk.params_json_schema,
    )
    toolset = SeamscopeCapability(layer, {}).recall_toolset
    (tool,) = asyncio.run(_tool_defs(toolset))
    assert (RECALL.name, RECALL.description) == (tool.name, tool.description)
    assert ["offload_id"] == tool.parameters_json_schema["required"]


async def _tool_defs(toolset: Any) -> list[Any]:
    return [t.tool_def for t in toolset.tools.values()]
