"""Ground truth for the Agents SDK's ``ToolOutputTrimmer``: what its trims really saved and cost.

A conversation of several runs on one session goes through
``SeamscopeRunner`` with the caller's ``RunConfig(call_model_input_filter=
ToolOutputTrimmer(recent_turns=1))``. The scripted model logs the input it
really received on every call (whether it held a trimmed preview, the full
output or seamscope's stub) and the tools log what really ran; the realized
savings, costs and net of each trim are computed by hand from those inputs
and the usage the scripted model reports (with prompt-cache reads, so a
cache disruption is visible), and compared with the ledger's settlements,
the realized metrics carrying ``seamscope.offload.mechanism`` and what
``seamscope explain`` reads back from the exported trace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, SQLiteSession, set_tracing_disabled
from agents.extensions.tool_output_trimmer import ToolOutputTrimmer
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters._openai_agents_support import (
    BIG_REPORT_CHARS,
    ModelCall,
    Toolbox,
    call,
    scripted_models,
    step,
    text,
)
from seamscope.adapters import RECALL_TOOL, DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.cli import main as cli
from seamscope.decisions.records import OffloadMechanism, SettleTrigger
from seamscope.telemetry import conventions as c

OPUS = "claude-opus-4-6"  # default pricing: $5/M input, $25/M output, cache read $0.5/M
AGENT = "analyst"
TRIMMED = "tool_output_trimmer"


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SDK's own exporter posts to OpenAI when a key is set: no key, tracing off."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


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
                        found[rest] = round(float(point.value), 9)
    return found


def converse(
    runner: SeamscopeRunner, agent: Agent[Any], session: str, *asks: str, streamed: bool = False
) -> None:
    """One run per ask on one session, each with the caller's trimmer."""
    config = RunConfig(call_model_input_filter=ToolOutputTrimmer(recent_turns=1))

    async def go() -> None:
        memory = SQLiteSession(session)
        for ask in asks:
            if streamed:
                result = runner.run_streamed(agent, ask, session=memory, run_config=config)
                async for _ in result.stream_events():
                    pass
            else:
                await runner.run(agent, ask, session=memory, run_config=config)

    asyncio.run(go())


def held(log: list[ModelCall], call_id: str) -> list[str | int | None]:
    """What each model call's input held for ``call_id``'s output: its length
    when whole, else the text (a trimmed preview, seamscope's stub)."""
    out: list[str | int | None] = []
    for model_call in log:
        output = model_call.outputs().get(call_id)
        out.append(len(output) if output is not None and len(output) > 1_000 else output)
    return out


def _record(
    path: Path, tracer_provider: TracerProvider, meter_provider: Any, *, streamed: bool = False
) -> tuple[DecisionLayer, list[ModelCall], Toolbox]:
    """The five-call conversation of the first test, exported to ``path`` too."""
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    models, log = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 800)),
            step(text("Q3 grew 12%."), usage=(21_000, 30, 16_800)),
            step(text("Churn fell."), usage=(1_300, 20, 1_040)),
            step(call("big_report", {"topic": "q3"}, "c2"), usage=(1_400, 25, 1_200)),
            step(text("Here are the full numbers."), usage=(21_500, 15, 1_400)),
        ],
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer, offload=False)
    agent = Agent(name=AGENT, model=models[OPUS], tools=[box.tools()["big_report"]])
    asks = ("the q3 report", "and churn?", "the full numbers")
    converse(runner, agent, "trim-1", *asks, streamed=streamed)
    return layer, log, box


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_a_trim_saves_on_every_later_call_until_the_model_runs_the_tool_again(
    streamed: bool,
    tmp_path: Path,
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three runs on session ``trim-1``; seamscope's own offload gate off.

    Calls (usage: input, output, cache read) and what each input held for
    ``c1`` (big_report, 80 000 chars = 20 000 tokens):

    1. (1 000, 40, 800): nothing yet; emits big_report c1.
    2. (21 000, 30, 16 800): the whole output (its run is the recent turn).
       Baseline before any compaction: 17 600 / 22 000 read = 0.8.
    3. (1 300, 20, 1 040), run 2: the trimmer's preview (c1 is before the last
       user message): the compaction ``tool_output_trimmer:c1`` starts here,
       carried. Cache: 0.8 x 1 300 = 1 040 expected, no shortfall.
    4. (1 400, 25, 1 200), run 3: the preview, carried; no shortfall (1 120
       expected). Emits big_report c2 with c1's arguments: a re-read, 20 000
       tokens in x $5/M + this call's 25 out x $25/M = $0.100625.
    5. (21 500, 15, 1 400): still the preview, but re-read: not carried.
       Cache: 17 200 expected, 15 800 short x ($5 - $0.5)/M = $0.0711,
       charged to the re-read trim.

    The preview is the trimmer's own text, read from what the model received:
    265 chars = 66.25 tokens. Savings: 2 carried calls x 20 000 x $5/M = $0.20.
    Costs: preview 2 x 66.25 x $5/M = $0.0006625, re-read $0.100625, cache
    $0.0711: $0.1723875. Net: +$0.0276125. Predicted (the gate's formula,
    H=5, p=0.5): 20 000 x 5 x $5/M = $0.50 minus 66.25 x 5 x $5/M =
    $0.00165625 minus 0.5 x (12 500 x $5/M + 250 x $25/M) = $0.034375:
    $0.46396875.
    """
    path = tmp_path / "trace.jsonl"
    layer, log, box = _record(path, tracer_provider, meter_provider, streamed=streamed)
    settlements = layer.end_conversation("trim-1")
    tracer_provider.force_flush()

    # ground truth: what each input held, and what really ran
    preview = log[2].outputs()["c1"]
    assert preview.startswith("[Trimmed: big_report output — 80000 chars → 200 char preview]\n")
    assert 265 == len(preview)
    assert [None, BIG_REPORT_CHARS, preview, preview, preview] == held(log, "c1")
    assert [None, None, None, None, BIG_REPORT_CHARS] == held(log, "c2")
    assert [("big_report", {"topic": "q3"}), ("big_report", {"topic": "q3"})] == [
        (r.name, r.args) for r in box.runs
    ]

    (settlement,) = settlements
    assert (
        "tool_output_trimmer:c1",
        OffloadMechanism.TOOL_OUTPUT_TRIMMER,
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
    assert Decimal("0.0006625") == settlement.stub_carry_cost
    assert Decimal("0.100625") == settlement.recall_cost
    assert Decimal("0.0711") == settlement.cache_disruption_cost
    assert Decimal(0) == settlement.compaction_cost
    assert Decimal("0.1723875") == settlement.realized_costs
    assert Decimal("0.0276125") == settlement.realized_net_saving
    assert Decimal("0.46396875") == settlement.predicted_net_saving

    where = {c.ATTR_OFFLOAD_MECHANISM: TRIMMED}
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 0.2} == totals(
        metric_reader, c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, **where
    )
    assert {
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_COST_KIND, "stub_carry")): 0.0006625,
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_COST_KIND, "recall")): 0.100625,
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_COST_KIND, "cache_disruption")): (
            0.0711
        ),
    } == totals(metric_reader, c.METRIC_OFFLOAD_REALIZED_COSTS.name, **where)
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 1.0} == totals(
        metric_reader, c.METRIC_OFFLOAD_RECALLS.name, **where
    )
    assert {} == totals(
        metric_reader,
        c.METRIC_OFFLOAD_REALIZED_SAVINGS.name,
        **{c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate"},
    )

    # one compaction span, in the iteration of the first call whose input held the preview
    spans = span_exporter.get_finished_spans()
    (compaction,) = [s for s in spans if s.name == c.SPAN_COMPACTION]
    a = dict(compaction.attributes or {})
    assert (
        "tool_output_trimmer:c1",
        TRIMMED,
        "ToolOutputTrimmer",
        "openai_agents",
        "big_report",
        20_000.0,
        66.25,
        ("c1",),
    ) == (
        a[c.ATTR_OFFLOAD_ID],
        a[c.ATTR_OFFLOAD_MECHANISM],
        a[c.ATTR_MIDDLEWARE_NAME],
        a[c.ATTR_MIDDLEWARE_FRAMEWORK],
        a[c.ATTR_GEN_AI_TOOL_NAME],
        a[c.ATTR_COMPACTION_REMOVED_TOKENS],
        a[c.ATTR_COMPACTION_KEPT_TOKENS],
        a[c.ATTR_COMPACTION_TOOL_CALL_IDS],
    )
    assert 0.46396875 == pytest.approx(a[c.ATTR_OFFLOAD_NET_SAVING_USD])
    # the chat spans carry the trim exactly where the inputs held it un-re-read
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert [(), (), ("tool_output_trimmer:c1",), ("tool_output_trimmer:c1",), ()] == [
        tuple((s.attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())) for s in chats
    ]

    # explain reads the trim and its settlement back from the exported file
    capsys.readouterr()
    assert 0 == cli(["explain", str(path)])
    out = capsys.readouterr().out
    assert (
        "    ├── middleware  ToolOutputTrimmer  compaction tool_output_trimmer:c1  −20 000 tok, "
        "kept 66 tok (cleared c1): ToolOutputTrimmer(recent_turns=1, max_output_chars=500, "
        "preview_chars=200) trimmed the output of big_report (20000 tokens) to a 66.25-token "
        "preview\n"
        "    │   predicted net +$0.4640 = saving $0.5000 − stub carry $0.0017 − expected recall "
        "$0.0344 (H=5, p=0.50, claude-opus-4-6, genai-prices)\n"
    ) in out
    row = next(line for line in out.splitlines() if line.startswith("│ tool_output_trimmer:c1"))
    assert [
        "tool_output_trimmer:c1",
        TRIMMED,
        OPUS,
        "+$0.4640",
        "+$0.0276",
        "2",
        "1",
        "$0.0711",
        "gain",
    ] == [cell.strip() for cell in row.split("│")[1:-1]]

    # explain --tool: the trim in the iteration whose input first held the preview,
    # the re-run (the re-read) in the iteration that emitted it
    story = (
        "output of call c1 taken out of the prompt by ToolOutputTrimmer (compaction "
        "tool_output_trimmer:c1: 20000 tokens, 66.25 kept); not called by the model"
    )
    assert 0 == cli(["explain", str(path), "--tool", "big_report"])
    lines = capsys.readouterr().out.splitlines()
    assert [
        "├── iteration 0  big_report: emitted and dispatched; executed",
        "└── iteration 1  big_report: not called by the model",
        f"└── iteration 0  big_report: {story}",
        "├── iteration 0  big_report: emitted and dispatched; executed; call c2 recalled "
        "tool_output_trimmer:c1 (20000 tokens read back)",
        "└── iteration 1  big_report: not called by the model",
    ] == [line for line in lines if "iteration" in line]
    assert 0 == cli(["explain", str(path), "--tool", "big_report", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert [(1, 0), (1, 1), (2, 0), (3, 0), (3, 1)] == [
        (s["turn"], s["iteration"]) for s in report["tool"]["story"]
    ]
    assert story == report["tool"]["story"][2]["story"]


def test_an_output_seamscope_offloaded_is_never_priced_as_a_trim_too(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    """With seamscope's gate on, big_report's 20 000 tokens are offloaded: every
    later input holds seamscope's stub, never the trimmer's preview (the stub
    replaces the output after the caller's filter ran), so only the gate's
    offload is followed; the trimmer's work on that output reached no model."""
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        offload_id_factory=lambda: "off-1",
    )
    models, log = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0)),
            step(text("Q3 grew 12%."), usage=(1_100, 30, 0)),
            step(text("Churn fell."), usage=(1_200, 20, 0)),
        ],
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    agent = Agent(
        name=AGENT, model=models[OPUS], tools=[box.tools()["big_report"], runner.recall_tool]
    )
    converse(runner, agent, "trim-2", "the q3 report", "and churn?")
    settlements = layer.end_conversation("trim-2")

    stubs = [call.outputs().get("c1") for call in log]
    assert stubs[0] is None
    assert all(s is not None and s.startswith("[offloaded off-1: ") for s in stubs[1:])
    assert [("off-1", OffloadMechanism.SEAMSCOPE_GATE, 2)] == [
        (s.offload_id, s.mechanism, s.turns_carried) for s in settlements
    ]
    assert [] == [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_COMPACTION]


def test_a_trimmed_recall_answer_takes_the_offloaded_output_out_again(
    tracer_provider: TracerProvider,
) -> None:
    """Run 1 offloads big_report (``off-1``), run 2 recalls it, run 3's input
    holds the recall's answer trimmed to a preview: the output is out of the
    prompt again, so that call carries the offload's stub (it is no trim of
    its own: the ledger follows that content as the gate's offload).

    Carried: calls 2 and 3 (the stub, before the recall), call 5 (the stub,
    the recall's answer trimmed): 3 turns; the call after the recall (4)
    holds the whole output and is not counted."""
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        offload_id_factory=lambda: "off-1",
    )
    models, log = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0)),
            step(text("Q3 grew 12%."), usage=(1_100, 30, 0)),
            step(call(RECALL_TOOL, {"offload_id": "off-1"}, "r1"), usage=(1_200, 20, 0)),
            step(text("Here it is."), usage=(21_300, 20, 0)),
            step(text("Churn fell."), usage=(1_400, 20, 0)),
        ],
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    agent = Agent(
        name=AGENT, model=models[OPUS], tools=[box.tools()["big_report"], runner.recall_tool]
    )
    converse(runner, agent, "trim-3", "the q3 report", "the whole report", "and churn?")
    settlements = layer.end_conversation("trim-3")

    answer = log[4].outputs()["r1"]
    assert answer.startswith("[Trimmed: recall_tool_result output — 80000 chars")
    assert [None, None, None, BIG_REPORT_CHARS, answer] == held(log, "r1")
    (settlement,) = settlements
    assert ("off-1", OffloadMechanism.SEAMSCOPE_GATE, 3, 1) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.turns_carried,
        settlement.recalls,
    )
    # savings: 3 carried calls x 20 000 tokens x $5/M
    assert Decimal("0.3") == settlement.realized_savings
