"""Ground truth for LangChain's own compactions: what they really saved and cost.

A conversation of several invokes on one thread (LangGraph's checkpointer)
runs with ContextEditingMiddleware or SummarizationMiddleware watched by
seamscope. The scripted model logs the prompt it really received on every
call (whether it held the cleared result's placeholder, the summary), the
tools log what really ran; the realized savings, costs and net of each
compaction are computed by hand from those prompts and the usage the
scripted model reports (with prompt-cache reads, so a cache disruption is
visible), and compared with the ledger's settlements and the realized
metrics carrying ``seamscope.offload.mechanism``.

The truth harness (``_harness.py``) is not used: its scripted replies have no
cache tokens and its span checks take every ``chat`` span for a
conversation model call, while here decision-model calls (the summary) have
chat spans of their own that the ledger must not count.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters._langchain_support import ModelCall, Toolbox, ai, scripted_models
from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.decisions.records import OffloadMechanism, SettleTrigger
from seamscope.telemetry import conventions as c

OPUS = "claude-opus-4-6"  # default pricing: $5/M input, $25/M output, cache read $0.5/M,
HAIKU = "claude-haiku-4-5"  # cache write $6.25/M; haiku: $1/M input, $5/M output
AGENT = "analyst"


def make_layer(tracer_provider: Any, meter_provider: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def totals(reader: InMemoryMetricReader, name: str, **where: str) -> dict[tuple[Any, ...], float]:
    """Metric points of ``name`` matching ``where``, by their other attributes."""
    data = reader.get_metrics_data()
    found: dict[tuple[Any, ...], float] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    a = dict(point.attributes or {})
                    if all(a.get(k) == v for k, v in where.items()):
                        rest = tuple(sorted((k, v) for k, v in a.items() if k not in where))
                        found[rest] = float(point.value)
    return found


def tool_text(call: ModelCall, call_id: str) -> str | None:
    for message in call.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return str(message.content)
    return None


def test_context_editing_clears_a_large_result_the_model_later_re_reads(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    """Two invokes on thread ``ctx-1``; ClearToolUsesEdit(trigger=10 000, keep=1)
    with ``search`` excluded; seamscope's own offload gate off.

    Calls (usage: input, output, cache read, cache write) and what each prompt
    held for ``c1`` (big_report, 80 000 chars = 20 000 tokens):

    1. (1 000, 40, 800, 0): nothing yet; emits big_report c1
    2. (21 000, 30, 16 800, 0): the full result (it is the one result kept);
       emits search c2. Baseline before any compaction: 17 600 / 22 000 read.
    3. (1 300, 20, 200, 1 000): ``[cleared]`` (c2 is now the kept result): the
       compaction ``context_editing:c1`` starts here, carried. Cache: expected
       0.8 x 1 300 = 1 040 read, 840 short, paid at the write rate:
       840 x ($6.25 - $0.5)/M = $0.00483. Ends the invoke.
    4. (1 400, 25, 1 200, 0): ``[cleared]``, carried; no cache shortfall
       (1 120 expected). Emits big_report c3 with c1's arguments: a re-read,
       20 000 tokens in x $5/M + this call's 25 out x $25/M = $0.100625.
    5. (21 500, 15, 1 400, 20 000): still ``[cleared]``, but re-read: not
       carried. Cache: 17 200 expected, 15 800 short x $5.75/M = $0.09085,
       charged to the re-read compaction.

    Savings: 2 carried calls x 20 000 x $5/M = $0.20. Costs: placeholder
    2 x 2 tokens ([cleared], 9 chars) x $5/M = $0.00002, re-read $0.100625,
    cache $0.00483 + $0.09085 = $0.09568: $0.196325. Net: +$0.003675.
    Predicted (the gate's formula, H=5, p=0.5): 20 000 x 5 x $5/M = $0.50
    minus 2 x 5 x $5/M = $0.00005 minus 0.5 x (12 500 x $5/M + 250 x $25/M)
    = $0.034375: $0.465575.
    """
    layer = make_layer(tracer_provider, meter_provider)
    models, log = scripted_models(
        [OPUS],
        [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 800, 0)),
            ai(("search", {"query": "q3"}, "c2"), usage=(21_000, 30, 16_800, 0)),
            ai(text="Q3 grew 12%.", usage=(1_300, 20, 200, 1_000)),
            ai(("big_report", {"topic": "q3"}, "c3"), usage=(1_400, 25, 1_200, 0)),
            ai(text="Here are the full numbers.", usage=(21_500, 15, 1_400, 20_000)),
        ],
    )
    box = Toolbox()
    edit = ClearToolUsesEdit(trigger=10_000, keep=1, exclude_tools=("search",))
    seamscope = SeamscopeMiddleware(layer, offload=False)
    agent = create_agent(
        models[OPUS],
        box.tools(),
        middleware=seamscope.watching(ContextEditingMiddleware(edits=[edit])),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "ctx-1"}}
    agent.invoke({"messages": [HumanMessage("the q3 report")]}, config=config)
    agent.invoke({"messages": [HumanMessage("the full numbers, please")]}, config=config)
    settlements = layer.end_conversation("ctx-1")

    # ground truth: what each prompt held, and what really ran
    held = [tool_text(call, "c1") for call in log]
    assert [None, 80_000, "[cleared]", "[cleared]", "[cleared]"] == [
        len(h) if h is not None and not h.startswith("[") else h for h in held
    ]
    assert [
        ("big_report", {"topic": "q3"}),
        ("search", {"query": "q3"}),
        ("big_report", {"topic": "q3"}),  # the re-read: same tool, same arguments
    ] == box.executed
    assert 80_000 == len(tool_text(log[4], "c3") or "")  # the data is back in the prompt

    (settlement,) = settlements
    assert (
        "context_editing:c1",
        OffloadMechanism.CONTEXT_EDITING,
        OPUS,
        SettleTrigger.CONVERSATION_END,
        2,
        1,
    ) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.model,
        settlement.trigger,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.2") == settlement.realized_savings
    # "[cleared]": 9 chars, 2.25 tokens (never rounded), carried twice at 5e-6
    assert Decimal("0.0000225") == settlement.stub_carry_cost
    assert Decimal("0.100625") == settlement.recall_cost
    assert Decimal("0.09568") == settlement.cache_disruption_cost
    assert Decimal(0) == settlement.compaction_cost
    assert Decimal("0.1963275") == settlement.realized_costs
    assert Decimal("0.0036725") == settlement.realized_net_saving
    # the prediction carries the same 2.25 tokens per later call (horizon 5)
    assert Decimal("0.46556875") == settlement.predicted_net_saving

    where = {c.ATTR_OFFLOAD_MECHANISM: "context_editing"}
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 0.2} == _rounded(
        totals(metric_reader, c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, **where)
    )
    assert {
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_COST_KIND, "stub_carry")): 0.0000225,
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_COST_KIND, "recall")): 0.100625,
        (
            (c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),
            (c.ATTR_OFFLOAD_COST_KIND, "cache_disruption"),
        ): 0.09568,
    } == _rounded(totals(metric_reader, c.METRIC_OFFLOAD_REALIZED_COSTS.name, **where))
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 1.0} == totals(
        metric_reader, c.METRIC_OFFLOAD_RECALLS.name, **where
    )
    # nothing is counted under seamscope's own gate
    assert {} == totals(
        metric_reader,
        c.METRIC_OFFLOAD_REALIZED_SAVINGS.name,
        **{c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate"},
    )
    compactions = [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_COMPACTION]
    assert ["context_editing:c1"] == [(s.attributes or {})[c.ATTR_OFFLOAD_ID] for s in compactions]


def _rounded(values: dict[tuple[Any, ...], float]) -> dict[tuple[Any, ...], float]:
    return {k: round(v, 9) for k, v in values.items()}


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the archive."""
    return "r" * 4_000  # 1 000 tokens


QUESTION_1 = "How did the third quarter go?".ljust(400, ".")  # 400 chars
ANSWER_1 = "The third quarter grew.".ljust(200, ".")  # 200 chars
QUESTION_2 = "And the fourth quarter?".ljust(400, ".")  # 400 chars
PREFIX = "Here is a summary of the conversation to date:\n\n"  # SummarizationMiddleware's
SUMMARY = "Q3 grew; the user now asks about Q4.".ljust(400 - len(PREFIX), ".")


def test_a_summary_saves_its_removed_messages_and_costs_its_own_call(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    """Two invokes on thread ``sum-1``; SummarizationMiddleware(trigger=("messages",
    6), keep=("messages", 2)) summarizing with claude-haiku-4-5.

    Invoke 1: call 1 (1 000, 20, 800, 0) emits lookup c1 (4 000 chars); call 2
    (1 100, 15, 880, 0) answers (200 chars). Invoke 2 (a 400-char question):
    call 3 (1 200, 20, 960, 0) emits lookup c2: baseline 2 640 / 3 300 = 0.8
    read. Before call 4 the state has 7 messages: the first 5 (400 + 0 +
    4 000 + 200 + 400 chars = 1 250 tokens) become one summary message of 400
    chars (100 tokens); the summary call (2 000 in, 60 out at haiku's $1/$5
    per M) costs $0.0023.

    Call 4 (700, 20, 0, 600) and call 5 (800, 10, 600, 0) hold the summary:
    carried twice. Savings 2 x 1 250 x $5/M = $0.0125; the summary carried
    2 x 100 x $5/M = $0.001; cache: call 4 expects 560 read, 560 short, paid
    at the write rate: 560 x $5.75/M = $0.00322; call 5 expects 640, 40 short,
    paid at the input rate: 40 x $4.5/M = $0.00018. Costs $0.001 + $0.0034 +
    $0.0023 = $0.0067; net +$0.0058. Predicted (never re-read, p=0): 1 250 x
    5 x $5/M - 100 x 5 x $5/M - $0.0023 = $0.02645.
    """
    layer = make_layer(tracer_provider, meter_provider)
    models, log = scripted_models(
        [OPUS],
        [
            ai(("lookup", {"topic": "q3"}, "c1"), usage=(1_000, 20, 800, 0)),
            ai(text=ANSWER_1, usage=(1_100, 15, 880, 0)),
            ai(("lookup", {"topic": "q4"}, "c2"), usage=(1_200, 20, 960, 0)),
            ai(("lookup", {"topic": "q4 detail"}, "c3"), usage=(700, 20, 0, 600)),
            ai(text="Q4 grew too.", usage=(800, 10, 600, 0)),
        ],
    )
    summarizers, summary_log = scripted_models([HAIKU], [ai(text=SUMMARY, usage=(2_000, 60, 0, 0))])
    middleware = SummarizationMiddleware(
        model=summarizers[HAIKU], trigger=("messages", 6), keep=("messages", 2)
    )
    seamscope = SeamscopeMiddleware(layer, offload=False)
    agent = create_agent(
        models[OPUS],
        [lookup],
        middleware=seamscope.watching(middleware),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "sum-1"}}
    agent.invoke({"messages": [HumanMessage(QUESTION_1)]}, config=config)
    agent.invoke({"messages": [HumanMessage(QUESTION_2)]}, config=config)
    settlements = layer.end_conversation("sum-1")

    # ground truth: the prompts that held the summary, and what it replaced
    assert 1 == len(summary_log)
    holding = [
        i for i, call in enumerate(log) if any(PREFIX + SUMMARY == m.content for m in call.messages)
    ]
    assert [3, 4] == holding
    assert [400, 0, 4_000, 200, 400] == [len(str(m.content)) for m in log[2].messages[:5]]
    assert 400 == len(PREFIX + SUMMARY)

    (settlement,) = settlements
    assert settlement.offload_id.startswith("summarization:")
    assert (OffloadMechanism.SUMMARIZATION, OPUS, 2, 0) == (
        settlement.mechanism,
        settlement.model,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.0125") == settlement.realized_savings
    assert Decimal("0.001") == settlement.stub_carry_cost
    assert Decimal("0.0034") == settlement.cache_disruption_cost
    assert Decimal("0.0023") == settlement.compaction_cost
    assert Decimal(0) == settlement.recall_cost
    assert Decimal("0.0067") == settlement.realized_costs
    assert Decimal("0.0058") == settlement.realized_net_saving
    assert Decimal("0.02645") == settlement.predicted_net_saving

    where = {c.ATTR_OFFLOAD_MECHANISM: "summarization"}
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 0.0125} == _rounded(
        totals(metric_reader, c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, **where)
    )
    costs = _rounded(totals(metric_reader, c.METRIC_OFFLOAD_REALIZED_COSTS.name, **where))
    assert {"stub_carry": 0.001, "cache_disruption": 0.0034, "compaction_call": 0.0023} == {
        dict(k)[c.ATTR_OFFLOAD_COST_KIND]: v for k, v in costs.items()
    }
    # the summary call is a chat span of its own, never a conversation model call
    ledgered = totals(metric_reader, c.METRIC_MODEL_INPUT_TOKENS.name)
    assert {OPUS} == {dict(k)[c.ATTR_GEN_AI_REQUEST_MODEL] for k in ledgered}
    names = [s.name for s in span_exporter.get_finished_spans()]
    assert 1 == names.count(f"chat {HAIKU}")
    assert 5 == names.count(f"chat {OPUS}")
