"""explain on a framework middleware's decisions, recorded by the real OTelObserver.

The spans come from seamscope's own observer (through the loop API's
``Iteration.middleware_decision``), exported by the OpenTelemetry SDK's
OTLP-JSON file exporter: the same shapes an adapter's watcher records.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from seamscope.adapters import DecisionLayer
from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.decisions.records import (
    MiddlewareDecision,
    MiddlewareDecisionKind,
    OffloadMechanism,
)
from seamscope.telemetry import conventions as c
from seamscope.telemetry._genai import GenAISpans
from seamscope.telemetry._invocation import record_error

from ._support import export_line, span, write_lines
from .conftest import Explain

K = MiddlewareDecisionKind
TOOLS = ("get_logs", "create_ticket", "send_email", "search_docs")
SELECTOR = MiddlewareDecision(
    "LLMToolSelectorMiddleware",
    K.TOOL_SELECTION,
    "selector model chose 2 of 4 tools (max_tools=2)",
    before=TOOLS,
    after=("get_logs", "create_ticket"),
    decision_model="claude-haiku-4-5",
)
FALLBACK = MiddlewareDecision(
    "ModelFallbackMiddleware",
    K.MODEL_FALLBACK,
    "primary model failed",
    model="claude-haiku-4-5",
    failed=(("gpt-4o", "RateLimitError"),),
)
LIMIT = MiddlewareDecision(
    "ToolCallLimitMiddleware",
    K.TOOL_CALL_BLOCKED,
    "run limit of 1 send_email call reached",
    calls=(ToolCall("call_2", "send_email", {"to": "ops"}),),
)
ROUTER = MiddlewareDecision(
    "ModelRouterMiddleware", K.MODEL_ROUTE, "route 'triage' chosen", model="gpt-4o"
)


def _record(path: Path) -> Path:
    """Two turns of one conversation: every middleware decision kind, a settled compaction."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    layer = DecisionLayer(default_model="gpt-4o", agent_name="triage", tracer_provider=provider)
    with layer.turn("conv-mw", []) as turn:
        layer.observer.on_middleware_decision(ROUTER)  # once per run, before any iteration
        with turn.iteration() as it:
            it.select_tools(list(TOOLS))
            it.pre_model()
            # the selector's own model call, inside its hook (as a watcher records it)
            asked = time.time_ns()
            with layer.genai.start_chat("claude-haiku-4-5", conversation_id="conv-mw") as inv:
                GenAISpans.record_usage(inv.span, ModelUsage(95, 19))
            it.middleware_decision(replace(SELECTOR, start_time_ns=asked))
            it.middleware_decision(FALLBACK)
            with it.chat("gpt-4o") as call:
                call.report(ModelUsage(1_000, 20))
            it.post_model(
                Message(
                    "assistant",
                    "",
                    (ToolCall("call_1", "get_logs", {}), ToolCall("call_2", "send_email", {})),
                )
            )
            it.middleware_decision(LIMIT)
            with it.execute_tool(ToolCall("call_1", "get_logs", {})):
                pass
    with layer.turn("conv-mw", []) as turn:
        with turn.iteration() as it:
            it.select_tools(list(TOOLS))
            it.pre_model()
            compaction = it.compaction(
                "cmp-1",
                OffloadMechanism.CONTEXT_EDITING,
                removed_tokens=16_000.0,
                kept_tokens=14,
                tool_call_ids=("call_1",),
            )
            it.middleware_decision(
                MiddlewareDecision(
                    "ContextEditingMiddleware",
                    K.COMPACTION,
                    "ClearToolUsesEdit over 10000 tokens",
                    compaction=compaction,
                )
            )
            with it.chat("gpt-4o") as call:
                call.report(ModelUsage(1_200, 20), carried=["cmp-1"])
    layer.end_conversation("conv-mw")
    provider.shutdown()
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("middleware") / "trace.jsonl")


def test_each_decision_is_shown_in_its_iteration(recorded: Path, explain: Explain) -> None:
    code, out, err = explain(str(recorded))
    assert (0, "") == (code, err)
    lines = out.splitlines()
    first = lines[: lines.index("")]
    assert [
        f"turn 1 · conversation conv-mw · agent triage · trace {first[0].split('trace ')[1]}",
        "├── middleware  ModelRouterMiddleware  router → gpt-4o: route 'triage' chosen",
        "└── iteration 0",
        "    ├── select_tools  4 offered → 4 selected",
        "    ├── pre_model   default → gpt-4o",
        "    ├── middleware  LLMToolSelectorMiddleware  4 offered → 2 selected (−2: send_email, "
        "search_docs): selector model chose 2 of 4 tools (max_tools=2) · asked claude-haiku-4-5 "
        "(in 95 tok · out 19 tok)",
        "    ├── middleware  ModelFallbackMiddleware  fallback → claude-haiku-4-5 (failed: gpt-4o "
        "RateLimitError): primary model failed",
        "    ├── chat        gpt-4o  in 1 000 tok · out 20 tok",
        "    ├── post_model  get_logs as emitted",
        "    ├── post_model  send_email as emitted",
        "    ├── middleware  ToolCallLimitMiddleware  blocked send_email (call_2): run limit of 1 "
        "send_email call reached",
        "    └── execute_tool get_logs",
    ] == first
    # 16 000 tokens on gpt-4o ($2.50/M in, $10/M out), the gate's priors H=5 and p=0.5:
    # 5 × $0.04 − 5 × 14 × $2.50/M − 0.5 × (12 500 × $2.50/M + 250 × $10/M) = $0.18295
    assert (
        "    ├── middleware  ContextEditingMiddleware  compaction cmp-1 (context_editing)  −16 000 "
        "tok, kept 14 tok (cleared call_1): ClearToolUsesEdit over 10000 tokens\n"
        "    │   predicted net +$0.1830 = saving $0.2000 − stub carry $0.0002 − expected recall "
        "$0.0169 (H=5, p=0.50, gpt-4o, "
        "genai-prices)\n"
    ) in out


def test_the_closing_table_names_each_settlement_mechanism(
    recorded: Path, explain: Explain
) -> None:
    _, out, _ = explain(str(recorded))
    header, row = (line for line in out.splitlines() if line.startswith(("┃", "│")))
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert "mechanism" == header.split("┃")[2].strip()
    assert ["cmp-1", "context_editing", "gpt-4o", "+$0.1830"] == cells[:4]
    _, out, _ = explain(str(recorded), "--format", "json")
    [settlement] = json.loads(out)["settlements"]
    assert ("cmp-1", "context_editing") == (settlement["offload_id"], settlement["mechanism"])


def test_tool_says_which_middleware_dropped_it(recorded: Path, explain: Explain) -> None:
    code, out, _ = explain(str(recorded), "--tool", "search_docs")
    assert 0 == code
    assert (
        "└── iteration 0  search_docs: dropped by LLMToolSelectorMiddleware: selector "
        "model chose 2 of 4 tools (max_tools=2); not called by the model"
    ) in out.splitlines()
    _, out, _ = explain(str(recorded), "--tool", "get_logs")
    assert (
        "└── iteration 0  get_logs: kept by LLMToolSelectorMiddleware; emitted and "
        "dispatched; executed"
    ) in out.splitlines()


def test_tool_says_which_middleware_blocked_its_call(recorded: Path, explain: Explain) -> None:
    story = (
        "dropped by LLMToolSelectorMiddleware: selector model chose 2 of 4 tools "
        "(max_tools=2); emitted; call call_2 blocked by ToolCallLimitMiddleware: run limit of 1 "
        "send_email call reached; never ran"
    )
    code, out, _ = explain(str(recorded), "--tool", "send_email")
    assert 0 == code
    assert f"└── iteration 0  send_email: {story}" in out.splitlines()
    code, out, _ = explain(str(recorded), "--tool", "send_email", "--format", "json")
    assert 0 == code
    report = json.loads(out)
    first = report["tool"]["story"][0]
    assert ("send_email", 1, 0, story) == (
        report["tool"]["name"],
        first["turn"],
        first["iteration"],
        first["story"],
    )


def test_json_has_each_decision_with_its_figures(recorded: Path, explain: Explain) -> None:
    _, out, _ = explain(str(recorded), "--format", "json")
    first, second = json.loads(out)["turns"]
    assert [("ModelRouterMiddleware", "model_route", "router", "gpt-4o")] == [
        (d["middleware"], d["decision"], d["winner_source"], d["model"])
        for d in first["middleware"]
    ]
    selector, fallback, blocked = first["iterations"][0]["middleware"]
    assert {
        "span": c.SPAN_STAGE,
        "middleware": "LLMToolSelectorMiddleware",
        "decision": "tool_selection",
        "framework": "langchain",
        "reason": "selector model chose 2 of 4 tools (max_tools=2)",
        "decision_model": "claude-haiku-4-5",
        "offered": list(TOOLS),
        "selected": ["get_logs", "create_ticket"],
        "dropped": ["send_email", "search_docs"],
        "decision_calls": [{"model": "claude-haiku-4-5", "input_tokens": 95, "output_tokens": 19}],
    } == selector
    # the selector's call is not taken for the agent's own
    assert ("gpt-4o", 1_000) == (
        first["iterations"][0]["chat"]["model"],
        first["iterations"][0]["chat"]["input_tokens"],
    )
    assert (["gpt-4o"], ["RateLimitError"]) == (
        fallback["failed_models"],
        fallback["error_types"],
    )
    assert (True, "send_email", "call_2") == (
        blocked["blocked"],
        blocked["tool"],
        blocked["tool_call_id"],
    )
    # seamscope's own PRE seam and dispatches are not replaced by the middleware's spans
    iteration = first["iterations"][0]
    assert "default" == iteration["pre_model"]["winner_source"]
    assert ["get_logs", "send_email"] == [d["emitted_tool"] for d in iteration["dispatches"]]
    [compaction] = second["iterations"][0]["middleware"]
    assert {
        "compaction_id": "cmp-1",
        "mechanism": "context_editing",
        "model": "gpt-4o",
        "removed_tokens": 16_000.0,
        "kept_tokens": 14,
        "tool_call_ids": ["call_1"],
        "messages_removed": 0,
        "cost_usd": 0.0,
        "horizon": 5,
        "recall_probability": 0.5,
        "pricing_source": "genai-prices",
    } == {k: compaction[k] for k in (
        "compaction_id", "mechanism", "model", "removed_tokens", "kept_tokens", "tool_call_ids",
        "messages_removed", "cost_usd", "horizon", "recall_probability", "pricing_source",
    )}  # fmt: skip


def test_only_offloads_keeps_the_iteration_with_a_compaction(
    recorded: Path, explain: Explain
) -> None:
    _, out, _ = explain(str(recorded), "--only-offloads", "--format", "json")
    turns = json.loads(out)["turns"]
    assert [(2, 0)] == [(t["turn"], it["index"]) for t in turns for it in t["iterations"]]


def test_a_decision_nested_under_framework_spans_belongs_to_its_iteration(
    tmp_path: Path, explain: Explain
) -> None:
    """However deep a framework nests the span (here under a chat span and under the
    POST seam), the decision is its iteration's, and not a seamscope dispatch."""
    base = {c.ATTR_GEN_AI_CONVERSATION_ID: "conv-n"}
    blocked = {
        **base,
        c.ATTR_MIDDLEWARE_NAME: "AutoModeMiddleware",
        c.ATTR_MIDDLEWARE_DECISION: "tool_call_blocked",
        c.ATTR_MIDDLEWARE_REASON: "classified as risky (probability: 0.90)",
        c.ATTR_DISPATCH_BLOCKED: True,
        c.ATTR_GEN_AI_TOOL_NAME: "shell",
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c9",
    }
    narrowed = {
        **base,
        c.ATTR_MIDDLEWARE_NAME: "LLMToolSelectorMiddleware",
        c.ATTR_MIDDLEWARE_DECISION: "tool_selection",
        c.ATTR_SELECTION_OFFERED: ["shell", "search_docs"],
        c.ATTR_SELECTION_SELECTED: ["shell"],
        c.ATTR_STAGE_DROPPED: ["search_docs"],
    }
    ids = {
        name: f"{n:016x}" for n, name in enumerate(("root", "it", "chat", "sel", "post", "blk"), 1)
    }
    spans = [
        span(ids["sel"], c.SPAN_STAGE, parent=ids["chat"], start=4, attrs=narrowed),
        span(ids["chat"], "chat m", parent=ids["it"], start=3,
             attrs={c.ATTR_GEN_AI_OPERATION_NAME: "chat"}),
        span(ids["blk"], c.SPAN_DISPATCH, parent=ids["post"], start=6, attrs=blocked),
        span(ids["post"], c.SPAN_SEAM_POST_MODEL, parent=ids["it"], start=5, attrs=base),
        span(ids["it"], c.SPAN_ITERATION, parent=ids["root"], start=2,
             attrs={**base, c.ATTR_ITERATION_INDEX: 0}),
        span(ids["root"], "invoke_agent triage", start=1, attrs=base),
    ]  # fmt: skip
    path = write_lines(tmp_path / "nested.jsonl", [export_line(spans)])
    code, out, _ = explain(str(path), "--format", "json")
    assert 0 == code
    [turn] = json.loads(out)["turns"]
    [iteration] = turn["iterations"]
    assert ([], []) == (turn["middleware"], iteration["dispatches"])
    assert [("LLMToolSelectorMiddleware", None), ("AutoModeMiddleware", True)] == [
        (d["middleware"], d.get("blocked")) for d in iteration["middleware"]
    ]
    _, out, _ = explain(str(path), "--tool", "shell")
    assert (
        "└── iteration 0  shell: kept by LLMToolSelectorMiddleware; call c9 blocked by "
        "AutoModeMiddleware: classified as risky (probability: 0.90); never ran"
    ) in out.splitlines()


def test_a_call_blocked_inside_the_tool_node_never_ran(tmp_path: Path, explain: Explain) -> None:
    """A risk check answers inside the tool node: the execute_tool span exists
    (tool_call_blocked) but the story and the tree say the tool never ran."""
    provider = TracerProvider()
    path = tmp_path / "blocked.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    layer = DecisionLayer(default_model="gpt-4o", agent_name="triage", tracer_provider=provider)
    risky = ToolCall("call_9", "send_email", {"to": "all"})
    with layer.turn("conv-risk", []) as turn, turn.iteration() as it:
        it.select_tools(list(TOOLS))
        it.pre_model()
        with it.chat("gpt-4o") as call:
            call.report(ModelUsage(900, 20))
        it.post_model(Message("assistant", "", (risky,)))
        with it.execute_tool(risky) as tool_span:
            it.middleware_decision(
                MiddlewareDecision(
                    "AutoModeMiddleware",
                    K.TOOL_CALL_BLOCKED,
                    "classified as risky (probability: 0.90)",
                    calls=(risky,),
                )
            )
            tool_span.set_attribute(c.ATTR_DISPATCH_BLOCKED, True)
            record_error(tool_span, c.TOOL_CALL_BLOCKED)
    provider.shutdown()

    code, out, _ = explain(str(path), "--tool", "send_email")
    assert 0 == code
    [story] = [line for line in out.splitlines() if "send_email:" in line]
    assert story.endswith(
        "call call_9 blocked by AutoModeMiddleware: classified as risky (probability: 0.90); "
        "never ran"
    ), story
    code, out, _ = explain(str(path), "--tool", "send_email", "--tree")
    assert 0 == code
    assert any(
        "execute_tool send_email blocked by a middleware: never ran" in line
        for line in out.splitlines()
    ), out


def test_a_pre_seam_choice_not_callable_here_is_shown_beside_the_model_that_ran(
    tmp_path: Path, explain: Explain
) -> None:
    """The kit reports an unavailable PRE-seam winner on the chat span; the tree shows it."""
    from seamscope.adapters._kit import choose_model, note_unavailable
    from seamscope.decisions import ModelConfig, ToolCallPolicy

    provider = TracerProvider()
    path = tmp_path / "unavailable.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    deep = ToolCallPolicy("deep", match=lambda ctx: True, model=ModelConfig("claude-sonnet-4-5"))
    layer = DecisionLayer(
        default_model="gpt-4o", agent_name="triage", tracer_provider=provider, policies=[deep]
    )
    with layer.turn("conv-u", []) as turn, turn.iteration() as it:
        it.select_tools(list(TOOLS))
        pre = it.pre_model()
        choice = choose_model(pre.model.model_name, "gpt-4o", {}, "gpt-4.1-mini")
        note_unavailable(it, pre, choice)
        with it.chat(choice.name) as call:
            call.report(ModelUsage(900, 20))
    provider.shutdown()

    code, out, _ = explain(str(path))
    assert 0 == code
    assert any(
        "gpt-4.1-mini" in line
        and "(the PRE seam chose claude-sonnet-4-5: not callable here)" in line
        for line in out.splitlines()
    ), out
