"""The demo's LangChain conversation, run directly: real create_agent, real middlewares.

The scripted chat models stand in for the providers only; LangChain's
``LLMToolSelectorMiddleware`` and ``ContextEditingMiddleware`` and seamscope's
watcher run as they would in production.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ToolCallLimitMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.cli import main
from seamscope.cli._langchain_scenario import (
    MODEL,
    PLACEHOLDER,
    SELECTOR_MODEL,
    TURNS,
    LangChainConversation,
    Script,
    ScriptedLangChainModel,
    Step,
    TurnScript,
    tools,
)
from seamscope.decisions.records import OffloadMechanism, OffloadOutcome
from seamscope.telemetry import conventions as c

from .conftest import Explain

CONVERSATION = "demo-7-langchain"


@pytest.fixture
def ran(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> tuple[LangChainConversation, list[list[Any]]]:
    conversation = LangChainConversation(
        tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    states = [list(conversation.run_turn(CONVERSATION, n)) for n in range(len(TURNS))]
    conversation.end_conversation(CONVERSATION)
    return conversation, states


def test_the_selector_offers_two_tools_and_the_model_calls_only_those(
    ran: tuple[LangChainConversation, list[list[Any]]], span_exporter: InMemorySpanExporter
) -> None:
    conversation, _ = ran
    selections = [
        dict(s.attributes or {})
        for s in span_exporter.get_finished_spans()
        if s.name == c.SPAN_STAGE and (s.attributes or {}).get(c.ATTR_MIDDLEWARE_NAME)
    ]
    assert [
        ("get_logs", "search_docs"),
        ("get_logs", "search_docs"),
        ("get_logs", "create_ticket"),
        ("get_logs", "create_ticket"),
        ("get_logs", "create_ticket"),
        ("search_docs", "page_oncall"),
    ] == [tuple(a[c.ATTR_SELECTION_SELECTED]) for a in selections]  # in the agent's tool order
    assert {"LLMToolSelectorMiddleware"} == {a[c.ATTR_MIDDLEWARE_NAME] for a in selections}
    assert {SELECTOR_MODEL} == {a[c.ATTR_MIDDLEWARE_DECISION_MODEL] for a in selections}
    assert [
        (MODEL, "get_logs"),
        (MODEL, "final"),
        (MODEL, "create_ticket"),
        (MODEL, "get_logs"),
        (MODEL, "final"),
        (MODEL, "final"),
    ] == [call for call in conversation.script.calls if call[0] == MODEL]
    assert 6 == conversation.script.calls.count((SELECTOR_MODEL, "select"))


def test_the_model_pays_for_the_prompt_it_really_receives(
    ran: tuple[LangChainConversation, list[list[Any]]], span_exporter: InMemorySpanExporter
) -> None:
    """Context editing edits the request only: the call after the ticket gets the
    placeholder (1 323 tokens, its cache prefix ends before it), the agent's state
    keeps the logs, and the re-read puts them back into the prompt."""
    _, states = ran
    chats = [
        dict(s.attributes or {})
        for s in sorted(span_exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
        if s.name == f"chat {MODEL}"
    ]
    usage = [
        (
            a[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            a.get(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, 0),
        )
        for a in chats
    ]
    assert [
        (1_220, 0),
        (16_990, 1_220),
        (17_029, 16_990),
        (1_323, 1_236),  # the placeholder: only the prefix before the logs is cached
        (17_093, 1_323),  # the logs again, written to the cache again
        (17_125, 17_093),
    ] == usage
    logs = [m for m in states[1] if isinstance(m, ToolMessage) and m.name == "get_logs"]
    assert 2 == len(logs)
    assert all(len(m.content) > 60_000 and m.content != PLACEHOLDER for m in logs)


def test_the_compaction_settles_as_a_loss_on_context_editing(
    ran: tuple[LangChainConversation, list[list[Any]]], metric_reader: InMemoryMetricReader
) -> None:
    conversation, _ = ran
    [settlement] = conversation.layer.ledger.settlements
    assert (
        OffloadMechanism.CONTEXT_EDITING,
        MODEL,
        OffloadOutcome.LOSS,
        1,
        1,
    ) == (
        settlement.mechanism,
        settlement.model,
        settlement.outcome,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert settlement.predicted_net_saving > 0 > settlement.realized_net_saving
    # what the loss alert sums: realized costs above savings, on this mechanism
    data = metric_reader.get_metrics_data()
    totals: dict[str, Decimal] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name in (
                    c.METRIC_OFFLOAD_REALIZED_COSTS.name,
                    c.METRIC_OFFLOAD_REALIZED_SAVINGS.name,
                ):
                    for point in metric.data.data_points:
                        attrs = dict(point.attributes or {})
                        assert (MODEL, "context_editing") == (
                            attrs[c.ATTR_GEN_AI_REQUEST_MODEL],
                            attrs[c.ATTR_OFFLOAD_MECHANISM],
                        )
                        totals[metric.name] = totals.get(metric.name, Decimal(0)) + Decimal(
                            str(point.value)
                        )
    assert (
        totals[c.METRIC_OFFLOAD_REALIZED_COSTS.name]
        > totals[c.METRIC_OFFLOAD_REALIZED_SAVINGS.name]
    )


def test_without_langchain_the_demo_runs_the_reference_turns_and_says_how_to_add_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    roots = ("langchain", "langchain_core", "langgraph")
    for name in [*roots, *(n for n in sys.modules if n.startswith(tuple(f"{r}." for r in roots)))]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "seamscope.cli._langchain_scenario", raising=False)
    code = main(["demo"])
    out, err = capsys.readouterr()
    assert (0, "") == (code, err)
    assert (4, 0) == (
        out.count("conversation demo-7 · agent analyst"),
        out.count("conversation demo-7-langchain"),
    )
    assert [
        "4 turns · 4 traces · offloads and compactions predicted +$0.5721, realized +$0.0228",
        "  predicted: what each gate expected at its priors (H turns carried, recall chance p); "
        "realized: what the turns then did (fewer turns, more recalls, the cache): the table "
        "above has each; calibrate learns H and p from it",
        "LangChain turns not run (langchain is not installed): the langchain extra "
        "(in a checkout: pip install '.[langchain]') adds them",
    ] == out.splitlines()[-4:-1]


def test_explain_names_the_langchain_middleware_that_blocked_a_call(
    tmp_path: Path, explain: Explain, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real ToolCallLimitMiddleware, watched, blocks the scripted model's page."""
    path = tmp_path / "blocked.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    layer = DecisionLayer(default_model=MODEL, agent_name="triage", tracer_provider=provider)
    turn = TurnScript(
        user="Page the payments on-call.",
        ranked=(),
        steps=(Step("page_oncall", {"team": "payments"}), Step(text="Paging is off for me.")),
    )
    model = ScriptedLangChainModel(
        model_name=MODEL, script=Script({turn.user: turn}, conversation="c-block")
    )
    seamscope = SeamscopeMiddleware(layer, offload=False)
    limit = ToolCallLimitMiddleware(tool_name="page_oncall", run_limit=0)
    agent = create_agent(model, tools(), middleware=seamscope.watching(limit), name="triage")
    state: Any = {"messages": [HumanMessage(turn.user)]}
    agent.invoke(state, config={"configurable": {"thread_id": "c-block"}})
    provider.shutdown()
    capsys.readouterr()  # structlog's own default output while the agent ran

    code, out, _ = explain(str(path), "--tool", "page_oncall", "--format", "json")
    assert 0 == code
    report = json.loads(out)
    first, second = (s["story"] for s in report["tool"]["story"])
    assert first.startswith("emitted; call call_")
    assert " blocked by ToolCallLimitMiddleware[page_oncall]: " in first
    assert first.endswith("; never ran")
    assert "not called by the model" == second
    [iteration, _] = report["turns"][0]["iterations"]
    assert [] == iteration["executed"]
    [blocked] = iteration["middleware"]
    assert (True, "page_oncall", "tool_call_blocked") == (
        blocked["blocked"],
        blocked["tool"],
        blocked["decision"],
    )
    code, out, _ = explain(str(path), "--tool", "page_oncall")
    assert f"├── iteration 0  page_oncall: {first}" in out.splitlines()
