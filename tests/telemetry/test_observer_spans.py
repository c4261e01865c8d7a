"""Spans and span events of a scripted iteration: tree, attributes, events, status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    Decision,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, SpanKind, StatusCode
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from seamscope.adapters import ChatResponse
from seamscope.decisions import (
    ForcedChoiceStage,
    Message,
    ModelConfig,
    NoopObserver,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    StageOutcome,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.decisions._policy import build_dispatch_context
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c

from . import _support as s

CONV = {c.ATTR_GEN_AI_CONVERSATION_ID: s.CONVERSATION, c.ATTR_GEN_AI_AGENT_NAME: s.AGENT}

TREE = [
    (0, "invoke_agent analyst"),
    (1, c.SPAN_ITERATION),
    (2, c.SPAN_SELECT_TOOLS),
    *[(3, c.SPAN_STAGE)] * 6,
    (2, c.SPAN_SEAM_PRE_MODEL),
    (2, "chat claude-haiku-4-5"),
    (2, c.SPAN_SEAM_POST_MODEL),
    (3, c.SPAN_DISPATCH),
    (3, c.SPAN_DISPATCH),
    (2, "execute_tool fetch_data"),
    (2, c.SPAN_OFFLOAD_GATE),
    (2, "execute_tool hydrate_context"),
    (2, c.SPAN_OFFLOAD_GATE),
]


def stage_attrs(
    index: int,
    name: str,
    outcome: c.StageOutcomeKind,
    reason: str,
    *,
    dropped: tuple[str, ...] = (),
    degraded: bool = False,
    protects_forced: bool = True,
    reinstated: bool = False,
) -> dict[str, Any]:
    return {
        c.ATTR_STAGE_NAME: name,
        c.ATTR_STAGE_INDEX: index,
        c.ATTR_STAGE_PROTECTS_FORCED: protects_forced,
        **CONV,
        c.ATTR_STAGE_OUTCOME: outcome.value,
        c.ATTR_STAGE_REASON: reason,
        c.ATTR_STAGE_DEGRADED: degraded,
        c.ATTR_STAGE_DROPPED: dropped,
        c.ATTR_STAGE_DROPPED_COUNT: len(dropped),
        c.ATTR_STAGE_FORCED_REINSTATED: reinstated,
    }


SELECT = c.StageOutcomeKind.SELECT
ABSTAIN = c.StageOutcomeKind.ABSTAIN

STAGES = [
    stage_attrs(
        0,
        "forced_choice",
        ABSTAIN,
        "forced 'export_csv' (resolver) not offered; force released",
        degraded=True,
        protects_forced=False,
    ),
    stage_attrs(
        1,
        "intent_routing",
        SELECT,
        "action turn: keyword intersection (−2: search_docs, deploy)",
        dropped=("search_docs", "deploy"),
    ),
    stage_attrs(2, "lazy_routing", ABSTAIN, "no procedural routing"),
    stage_attrs(
        3,
        "role_palette",
        SELECT,
        "analyst palette (−1: hydrate_context)",
        dropped=("hydrate_context",),
    ),
    stage_attrs(
        4, "policy", SELECT, "safety ceiling 'write' (−1: delete_rows)", dropped=("delete_rows",)
    ),
    stage_attrs(5, "allowlist", SELECT, "re-added hydrate_context"),
]


def evaluated(policy: str, seam: c.Seam, result: c.PolicyResult, **extra: Any) -> Any:
    attrs = {
        c.ATTR_POLICY_NAME: policy,
        c.ATTR_SEAM: seam.value,
        c.ATTR_POLICY_RESULT: result.value,
        **extra,
    }
    return (c.EVENT_POLICY_EVALUATED, attrs)


def folded(
    evaluated: int, not_matched: int, skipped: int, passed_over: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The policy evaluations a seam span folds into counts (and passed-over names)."""
    attrs: dict[str, Any] = {
        c.ATTR_POLICY_EVALUATED_COUNT: evaluated,
        c.ATTR_POLICY_NOT_MATCHED_COUNT: not_matched,
        c.ATTR_POLICY_SKIPPED_COUNT: skipped,
    }
    if passed_over:
        attrs[c.ATTR_POLICY_PASSED_OVER] = passed_over
    return attrs


# hydrate_to_deploy is skipped (PRE: no model; POST: another tool), docs_lookup not matched
PASSED_OVER = folded(4, 1, 1, ("hydrate_to_deploy", "docs_lookup"))

PRE, POST = c.Seam.PRE_MODEL, c.Seam.POST_MODEL
MATCHED, NOT_MATCHED = c.PolicyResult.MATCHED, c.PolicyResult.NOT_MATCHED
SKIPPED, ERROR = c.PolicyResult.SKIPPED, c.PolicyResult.ERROR


def dispatch_attrs(call_id: str, emitted: str, **end: Any) -> dict[str, Any]:
    return {
        c.ATTR_GEN_AI_TOOL_CALL_ID: call_id,
        c.ATTR_DISPATCH_EMITTED_TOOL: emitted,
        **CONV,
        **end,
    }


CALL_1 = dispatch_attrs(
    "call_1",
    "run_block",
    **PASSED_OVER,
    **{
        c.ATTR_POLICY_WINNER: "run_block_to_fetch",
        c.ATTR_DISPATCH_REDIRECT_TO: "fetch_data",
        c.ATTR_DISPATCH_GUARD: c.GuardResult.NONE.value,
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
        c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.KEPT.value,
        c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
        c.ATTR_DISPATCH_ARGS_TRANSFORMED: True,
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
    },
)
CALL_2 = dispatch_attrs(
    "call_2",
    "hydrate_context",
    **folded(1, 0, 0),
    **{
        c.ATTR_POLICY_WINNER: "hydrate_to_deploy",
        c.ATTR_DISPATCH_REDIRECT_TO: "deploy",
        c.ATTR_DISPATCH_GUARD: c.GuardResult.NONE.value,
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
        c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED.value,
        c.ATTR_DISPATCH_FINAL_TOOL: "hydrate_context",
        c.ATTR_DISPATCH_ARGS_TRANSFORMED: False,
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
    },
)
# only the matched, error and guard-stopped evaluations are events
CALL_1_EVENTS = [
    evaluated(
        "sales_data_read", POST, MATCHED, **{c.ATTR_DISPATCH_GUARD: c.GuardResult.FAILED.value}
    ),
    evaluated("run_block_to_fetch", POST, MATCHED),
]
PRE_EVENTS = [evaluated("sales_data_read", PRE, MATCHED)]


def gate_attrs(call_id: str, tool: str, tokens: float, **end: Any) -> dict[str, Any]:
    return {
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: tokens,
        **CONV,
        c.ATTR_GEN_AI_TOOL_CALL_ID: call_id,
        c.ATTR_GEN_AI_TOOL_NAME: tool,
        c.ATTR_OFFLOAD_HORIZON: 5,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
        # the configuration it was priced with, and where its priors came from
        c.ATTR_OFFLOAD_STUB_TOKENS: 80,
        c.ATTR_OFFLOAD_THRESHOLD_TOKENS: 15_000,
        c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS: 12_500,
        c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: 250,
        c.ATTR_OFFLOAD_PRIOR_SOURCE: c.PriorSource.DEFAULT.value,
        **end,
    }


GATE_FIRED = gate_attrs(
    "call_1",
    "fetch_data",
    20000.0,
    **{
        c.ATTR_OFFLOAD_FIRE: True,
        c.ATTR_OFFLOAD_NET_SAVING_USD: s.PREDICTED_NET_SAVING,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: 0.1,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: 0.0004,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: 0.006875,
        c.ATTR_OFFLOAD_REASON: "net=$0.0927 (saving=$0.1000 − stub=$0.0004 − recall=$0.0069); "
        "H=5 p_recall=0.50 model=claude-haiku-4-5",
        c.ATTR_OFFLOAD_REASON_CODE: c.OffloadReasonCode.NET_POSITIVE.value,
        c.ATTR_OFFLOAD_PRICING_SOURCE: c.PricingSource.OVERRIDE.value,
        c.ATTR_OFFLOAD_ID: "off-1",
        c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK: 1.0,  # the rates it was priced with
        c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK: 5.0,
    },
)
GATE_BELOW = gate_attrs(
    "call_2",
    "hydrate_context",
    2.75,
    **{
        c.ATTR_OFFLOAD_FIRE: False,
        c.ATTR_OFFLOAD_NET_SAVING_USD: 0.0,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: 0.0,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: 0.0,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: 0.0,
        c.ATTR_OFFLOAD_REASON: "below large_offload_threshold (3 < 15000 tokens)",
        c.ATTR_OFFLOAD_REASON_CODE: c.OffloadReasonCode.BELOW_THRESHOLD.value,
        c.ATTR_OFFLOAD_PRICING_SOURCE: c.PricingSource.NONE.value,
    },
)


@pytest.fixture
def spans(tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter) -> Any:
    s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return span_exporter.get_finished_spans()


def run_spans(tracer_provider: Any, exporter: InMemorySpanExporter, **kw: Any) -> Sequence[Any]:
    s.run(s.Scenario(**kw), tracer_provider=tracer_provider)
    return exporter.get_finished_spans()


# -- the scripted iteration -----------------------------------------------------


def test_span_tree(spans: Any) -> None:
    assert TREE == s.tree(spans)


def test_one_trace_and_parents(spans: Any) -> None:
    assert 1 == len({span.context.trace_id for span in spans})
    post = s.one(spans, c.SPAN_SEAM_POST_MODEL)
    select = s.one(spans, c.SPAN_SELECT_TOOLS)
    iteration = s.one(spans, c.SPAN_ITERATION)
    assert [post.context.span_id] * 2 == [d.parent.span_id for d in s.named(spans, c.SPAN_DISPATCH)]
    assert [select.context.span_id] * 6 == [t.parent.span_id for t in s.named(spans, c.SPAN_STAGE)]
    decision_names = {
        c.SPAN_SELECT_TOOLS,
        c.SPAN_SEAM_PRE_MODEL,
        c.SPAN_SEAM_POST_MODEL,
        c.SPAN_OFFLOAD_GATE,
    }
    assert {iteration.context.span_id} == {
        span.parent.span_id for span in spans if span.name in decision_names
    }


def test_decision_spans_are_internal_with_status_unset(spans: Any) -> None:
    decision = [span for span in spans if span.name in c.SPANS]
    assert 14 == len(decision)
    assert {SpanKind.INTERNAL} == {span.kind for span in decision}
    assert {StatusCode.UNSET} == {span.status.status_code for span in spans}


def test_iteration_attributes(spans: Any) -> None:
    assert {c.ATTR_ITERATION_INDEX: 0, **CONV} == s.attrs(s.one(spans, c.SPAN_ITERATION))


def test_select_tools_attributes(spans: Any) -> None:
    expected = {
        c.ATTR_ITERATION_INDEX: 0,
        **CONV,
        c.ATTR_SELECTION_OFFERED: s.OFFERED,
        c.ATTR_SELECTION_SELECTED: s.SELECTED,
        c.ATTR_SELECTION_DROPPED: ("search_docs", "delete_rows", "deploy"),
        c.ATTR_SELECTION_OFFERED_COUNT: 6,
        c.ATTR_SELECTION_SELECTED_COUNT: 3,
        c.ATTR_SELECTION_DROPPED_COUNT: 3,
        c.ATTR_SELECTION_REINSTATED: False,
    }
    assert expected == s.attrs(s.one(spans, c.SPAN_SELECT_TOOLS))


def test_one_stage_span_per_stage_in_order(spans: Any) -> None:
    assert STAGES == [s.attrs(span) for span in s.named(spans, c.SPAN_STAGE)]
    assert [[]] * 6 == [s.events(span) for span in s.named(spans, c.SPAN_STAGE)]


def test_pre_model_attributes_and_policy_events(spans: Any) -> None:
    pre = s.one(spans, c.SPAN_SEAM_PRE_MODEL)
    expected = {
        c.ATTR_SEAM: PRE.value,
        c.ATTR_ITERATION_INDEX: 0,
        **CONV,
        **folded(3, 1, 1, ("hydrate_to_deploy", "docs_lookup")),
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
    }
    assert expected == s.attrs(pre)
    assert PRE_EVENTS == s.events(pre)


def test_post_model_attributes(spans: Any) -> None:
    expected = {
        c.ATTR_SEAM: POST.value,
        c.ATTR_ITERATION_INDEX: 0,
        c.ATTR_SEAM_TOOL_CALLS: 2,
        **CONV,
        c.ATTR_SEAM_REWRITTEN: 1,
    }
    post = s.one(spans, c.SPAN_SEAM_POST_MODEL)
    assert expected == s.attrs(post)
    assert [] == s.events(post)


def test_dispatch_spans_one_per_emitted_call(spans: Any) -> None:
    dispatches = s.named(spans, c.SPAN_DISPATCH)
    assert [CALL_1, CALL_2] == [s.attrs(span) for span in dispatches]
    assert [CALL_1_EVENTS, [evaluated("hydrate_to_deploy", POST, MATCHED)]] == [
        s.events(span) for span in dispatches
    ]


def test_offload_gate_spans(spans: Any) -> None:
    assert [GATE_FIRED, GATE_BELOW] == [s.attrs(g) for g in s.named(spans, c.SPAN_OFFLOAD_GATE)]


def test_genai_spans_around_the_decisions(spans: Any) -> None:
    chat = s.one(spans, "chat claude-haiku-4-5")
    expected_chat = {
        c.ATTR_GEN_AI_OPERATION_NAME: "chat",
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
        **CONV,
        c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 1200,
        c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 80,
        c.ATTR_OFFLOAD_CARRIED: (),  # accounted by the ledger; no live offload yet
        c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS: (),
        # the selected tools, in order: what the model was sent (names and types only)
        c.ATTR_GEN_AI_TOOL_DEFINITIONS: '[{"type":"function","name":"run_block"},'
        '{"type":"function","name":"fetch_data"},{"type":"function","name":"hydrate_context"}]',
    }
    assert expected_chat == s.attrs(chat)
    assert SpanKind.CLIENT == chat.kind
    tools = [span for span in s.ordered(spans) if span.name.startswith("execute_tool")]
    assert [
        {
            c.ATTR_GEN_AI_OPERATION_NAME: "execute_tool",
            c.ATTR_GEN_AI_TOOL_NAME: "fetch_data",
            c.ATTR_GEN_AI_TOOL_CALL_ID: "call_1",
            c.ATTR_GEN_AI_CONVERSATION_ID: s.CONVERSATION,
        },
        {
            c.ATTR_GEN_AI_OPERATION_NAME: "execute_tool",
            c.ATTR_GEN_AI_TOOL_NAME: "hydrate_context",
            c.ATTR_GEN_AI_TOOL_CALL_ID: "call_2",
            c.ATTR_GEN_AI_CONVERSATION_ID: s.CONVERSATION,
        },
    ] == [s.attrs(span) for span in tools]


# -- attributes a sampler needs are there at span start ---------------------------


class RecordingSampler(Sampler):
    """Samples everything and remembers the attributes each span started with."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        self.seen.append((name, dict(attributes or {})))
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "RecordingSampler"


def test_sampler_sees_names_indexes_tools_and_model_at_start() -> None:
    sampler = RecordingSampler()
    s.run(tracer_provider=TracerProvider(sampler=sampler))
    started = [(name, attrs) for name, attrs in sampler.seen if name in c.SPANS]
    stage_starts = [
        {
            c.ATTR_STAGE_NAME: name,
            c.ATTR_STAGE_INDEX: i,
            c.ATTR_STAGE_PROTECTS_FORCED: name != "forced_choice",
            **CONV,
        }
        for i, name in enumerate(s.STAGE_NAMES)
    ]
    expected = [
        (c.SPAN_ITERATION, {c.ATTR_ITERATION_INDEX: 0, **CONV}),
        (c.SPAN_SELECT_TOOLS, {c.ATTR_ITERATION_INDEX: 0, **CONV}),
        *[(c.SPAN_STAGE, attrs) for attrs in stage_starts],
        (c.SPAN_SEAM_PRE_MODEL, {c.ATTR_SEAM: PRE.value, c.ATTR_ITERATION_INDEX: 0, **CONV}),
        (
            c.SPAN_SEAM_POST_MODEL,
            {c.ATTR_SEAM: POST.value, c.ATTR_ITERATION_INDEX: 0, c.ATTR_SEAM_TOOL_CALLS: 2, **CONV},
        ),
        (
            c.SPAN_DISPATCH,
            {
                c.ATTR_GEN_AI_TOOL_CALL_ID: "call_1",
                c.ATTR_DISPATCH_EMITTED_TOOL: "run_block",
                **CONV,
            },
        ),
        (
            c.SPAN_DISPATCH,
            {
                c.ATTR_GEN_AI_TOOL_CALL_ID: "call_2",
                c.ATTR_DISPATCH_EMITTED_TOOL: "hydrate_context",
                **CONV,
            },
        ),
        (
            c.SPAN_OFFLOAD_GATE,
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
                c.ATTR_OFFLOAD_OUTPUT_TOKENS: 20000.0,
                **CONV,
                c.ATTR_GEN_AI_TOOL_CALL_ID: "call_1",
                c.ATTR_GEN_AI_TOOL_NAME: "fetch_data",
            },
        ),
        (
            c.SPAN_OFFLOAD_GATE,
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
                c.ATTR_OFFLOAD_OUTPUT_TOKENS: 2.75,
                **CONV,
                c.ATTR_GEN_AI_TOOL_CALL_ID: "call_2",
                c.ATTR_GEN_AI_TOOL_NAME: "hydrate_context",
            },
        ),
    ]
    assert expected == started


def test_unsampled_iteration_exports_nothing_and_decides_the_same() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = s.run(tracer_provider=provider)
    assert () == exporter.get_finished_spans()
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)


# -- contained adopter errors: events, not ERROR status ---------------------------------


def test_raising_predicate_is_an_error_event_and_the_seam_still_decides(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    policies = s.policies(docs_match=s.raising(ValueError("no intent model")))
    spans = run_spans(tracer_provider, span_exporter, policies=policies)
    pre = s.one(spans, c.SPAN_SEAM_PRE_MODEL)
    error_type = {c.ATTR_ERROR_TYPE: "ValueError"}
    assert [
        evaluated("docs_lookup", PRE, ERROR, **error_type),
        evaluated("sales_data_read", PRE, MATCHED),
    ] == s.events(pre)
    # an error is an event, not passed over: only the skipped policy is
    assert {
        c.ATTR_SEAM: PRE.value,
        c.ATTR_ITERATION_INDEX: 0,
        **CONV,
        **folded(3, 0, 1, ("hydrate_to_deploy",)),
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
    } == s.attrs(pre)
    call_1 = s.named(spans, c.SPAN_DISPATCH)[0]
    assert [evaluated("docs_lookup", POST, ERROR, **error_type), *CALL_1_EVENTS] == s.events(call_1)
    assert {**CALL_1, **folded(4, 0, 1, ("hydrate_to_deploy",))} == s.attrs(call_1)
    assert {StatusCode.UNSET} == {span.status.status_code for span in spans}


def test_raising_guard_is_an_error_event(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    policies = s.policies()
    policies[2] = type(policies[2])(
        name="sales_data_read",
        match=s.always(True),
        when_tool="run_block",
        redirect_to="fetch_data",
        model=policies[2].model,
        guard=s.raising(LookupError("no quota")),
    )
    spans = run_spans(tracer_provider, span_exporter, policies=policies)
    call_1 = s.named(spans, c.SPAN_DISPATCH)[0]
    assert [
        evaluated(
            "sales_data_read",
            POST,
            ERROR,
            **{c.ATTR_DISPATCH_GUARD: c.GuardResult.ERROR.value, c.ATTR_ERROR_TYPE: "LookupError"},
        ),
        evaluated("run_block_to_fetch", POST, MATCHED),
    ] == s.events(call_1)
    assert CALL_1 == s.attrs(call_1)
    assert StatusCode.UNSET == call_1.status.status_code


def test_raising_args_transform_keeps_the_redirect_with_original_args(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    policies = s.policies(transform=s.raising(KeyError("region")))
    spans = run_spans(tracer_provider, span_exporter, policies=policies)
    call_1 = s.named(spans, c.SPAN_DISPATCH)[0]
    assert {**CALL_1, c.ATTR_DISPATCH_ARGS_TRANSFORMED: False} == s.attrs(call_1)
    adopter_error = (
        c.EVENT_ADOPTER_ERROR,
        {
            c.ATTR_ADOPTER_SOURCE: "args_transform",
            c.ATTR_ERROR_TYPE: "KeyError",
            c.ATTR_POLICY_NAME: "run_block_to_fetch",
        },
    )
    assert [*CALL_1_EVENTS, adopter_error] == s.events(call_1)
    assert StatusCode.UNSET == call_1.status.status_code


def test_raising_stage_is_the_one_error_status(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    spans = run_spans(
        tracer_provider,
        span_exporter,
        stages=s.stages(replace={"role_palette": s.ExplodingStage()}),
    )
    stage_spans = s.named(spans, c.SPAN_STAGE)
    assert list(s.STAGE_NAMES) == [span.attributes[c.ATTR_STAGE_NAME] for span in stage_spans]
    exploded = stage_spans[3]
    expected = {
        **stage_attrs(
            3,
            "role_palette",
            ABSTAIN,
            "stage raised RuntimeError: contained as abstain",
            degraded=True,
        ),
        c.ATTR_ERROR_TYPE: "RuntimeError",
    }
    assert expected == s.attrs(exploded)
    assert (StatusCode.ERROR, "RuntimeError") == (
        exploded.status.status_code,
        exploded.status.description,
    )
    others = [span for span in spans if span is not exploded]
    assert {StatusCode.UNSET} == {span.status.status_code for span in others}


def test_raising_resolver_and_callback_are_adopter_error_events(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    spans = run_spans(
        tracer_provider,
        span_exporter,
        policies=[],
        role_model_resolver=s.raising(TimeoutError("directory")),
        on_tool_call_dispatch=s.raising(PermissionError("acl")),
    )
    pre = s.one(spans, c.SPAN_SEAM_PRE_MODEL)
    assert [
        (
            c.EVENT_ADOPTER_ERROR,
            {c.ATTR_ADOPTER_SOURCE: "resolver", c.ATTR_ERROR_TYPE: "TimeoutError"},
        )
    ] == s.events(pre)
    assert c.WinnerSource.DEFAULT.value == pre.attributes[c.ATTR_SEAM_WINNER_SOURCE]
    assert s.DEFAULT_MODEL == pre.attributes[c.ATTR_GEN_AI_REQUEST_MODEL]
    callback_error = (
        c.EVENT_ADOPTER_ERROR,
        {c.ATTR_ADOPTER_SOURCE: "callback", c.ATTR_ERROR_TYPE: "PermissionError"},
    )
    assert [[callback_error], [callback_error]] == [
        s.events(span) for span in s.named(spans, c.SPAN_DISPATCH)
    ]
    assert {StatusCode.UNSET} == {span.status.status_code for span in spans}


# -- bounded policy evaluations -------------------------------------------------------


def bounded_router(tracer_provider: Any, **config: Any) -> SeamRouter:
    """A skipped policy (no model), three not matched, three raising, one matching."""
    observer = OTelObserver(
        tracer_provider=tracer_provider, config=TelemetryConfig.create(environ={}, **config)
    )
    haiku = ModelConfig(s.HAIKU)
    policies = [
        ToolCallPolicy(name="skip-0", match=s.always(True), redirect_to="fetch_data"),
        *[ToolCallPolicy(name=f"miss-{i}", match=s.always(False), model=haiku) for i in range(3)],
        *[
            ToolCallPolicy(name=f"boom-{i}", match=s.raising(ValueError("x")), model=haiku)
            for i in range(3)
        ],
        ToolCallPolicy(name="hit", match=s.always(True), model=haiku),
    ]
    return SeamRouter(policies, default_model=s.DEFAULT_MODEL, observer=observer)


def test_policy_events_and_passed_over_names_are_bounded(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    router = bounded_router(tracer_provider, max_array_length=2)
    assert "hit" == router.pre_model(build_dispatch_context(PRE, ())).policy
    pre = s.one(span_exporter.get_finished_spans(), c.SPAN_SEAM_PRE_MODEL)
    boom = {c.ATTR_ERROR_TYPE: "ValueError"}
    # two events (the budget), the third error and the match folded
    assert [
        evaluated("boom-0", PRE, ERROR, **boom),
        evaluated("boom-1", PRE, ERROR, **boom),
    ] == s.events(pre)
    assert {
        c.ATTR_SEAM: PRE.value,
        c.ATTR_ITERATION_INDEX: 0,
        **folded(8, 3, 1, ("skip-0", "miss-0")),
        c.ATTR_POLICY_EVENTS_FOLDED: 2,
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
        c.ATTR_POLICY_WINNER: "hit",
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
    } == s.attrs(pre)


def test_policy_events_within_the_budget_fold_nothing(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    router = bounded_router(tracer_provider, max_array_length=4)
    router.pre_model(build_dispatch_context(PRE, ()))
    pre = s.one(span_exporter.get_finished_spans(), c.SPAN_SEAM_PRE_MODEL)
    boom = {c.ATTR_ERROR_TYPE: "ValueError"}
    assert [
        evaluated("boom-0", PRE, ERROR, **boom),
        evaluated("boom-1", PRE, ERROR, **boom),
        evaluated("boom-2", PRE, ERROR, **boom),
        evaluated("hit", PRE, MATCHED),
    ] == s.events(pre)
    # no seamscope.policy.events_folded: nothing was folded
    assert {
        c.ATTR_SEAM: PRE.value,
        c.ATTR_ITERATION_INDEX: 0,
        **folded(8, 3, 1, ("skip-0", "miss-0", "miss-1", "miss-2")),
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
        c.ATTR_POLICY_WINNER: "hit",
        c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
    } == s.attrs(pre)


# -- stages that return tools nobody offered ----------------------------------------


class InventingStage:
    """A stage that keeps ``a`` and returns two tools that do not exist."""

    name = "inventor"
    protects_forced = True

    def apply(self, tools: tuple[Any, ...], ctx: Any) -> StageOutcome:
        return StageOutcome.select(["a", "ghost", "phantom"], "made some up")


def test_a_stage_that_returns_unknown_tools_records_them_as_rejected(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    observer = OTelObserver(
        tracer_provider=tracer_provider, config=TelemetryConfig.create(environ={})
    )
    pipeline = SelectionPipeline([InventingStage()], observer=observer)
    result = pipeline.run(["a", "b"], SelectionContext())
    assert ("a",) == result.selected
    spans = span_exporter.get_finished_spans()
    stage = s.one(spans, c.SPAN_STAGE)
    assert {
        c.ATTR_STAGE_NAME: "inventor",
        c.ATTR_STAGE_INDEX: 0,
        c.ATTR_STAGE_PROTECTS_FORCED: True,
        c.ATTR_STAGE_OUTCOME: SELECT.value,
        c.ATTR_STAGE_REASON: "made some up",
        c.ATTR_STAGE_DEGRADED: False,
        c.ATTR_STAGE_DROPPED: ("b",),
        c.ATTR_STAGE_DROPPED_COUNT: 1,
        c.ATTR_STAGE_FORCED_REINSTATED: False,
        c.ATTR_STAGE_REJECTED: ("ghost", "phantom"),
    } == s.attrs(stage)
    assert {
        c.ATTR_ITERATION_INDEX: 0,
        c.ATTR_SELECTION_OFFERED: ("a", "b"),
        c.ATTR_SELECTION_SELECTED: ("a",),
        c.ATTR_SELECTION_DROPPED: ("b",),
        c.ATTR_SELECTION_OFFERED_COUNT: 2,
        c.ATTR_SELECTION_SELECTED_COUNT: 1,
        c.ATTR_SELECTION_DROPPED_COUNT: 1,
        c.ATTR_SELECTION_REINSTATED: False,
    } == s.attrs(s.one(spans, c.SPAN_SELECT_TOOLS))
    assert [
        {
            "event": c.LOG_STAGE_REJECTED,
            "log_level": "warning",
            "stage": "inventor",
            "rejected": ["ghost", "phantom"],
            **s.hex_ids(stage),
        }
    ] == captured_logs


def test_no_rejected_attribute_when_a_stage_invents_nothing(spans: Any) -> None:
    assert [] == [
        span.attributes[c.ATTR_STAGE_NAME]
        for span in s.named(spans, c.SPAN_STAGE)
        if c.ATTR_STAGE_REJECTED in span.attributes
    ]


# -- other winners and shapes -------------------------------------------------------


def test_resolver_and_default_winners(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    spans = run_spans(
        tracer_provider, span_exporter, policies=[], role_model_resolver=lambda ctx: s.SONNET
    )
    resolver = s.attrs(s.one(spans, c.SPAN_SEAM_PRE_MODEL))
    span_exporter.clear()
    spans = run_spans(tracer_provider, span_exporter, policies=[])
    default = s.attrs(s.one(spans, c.SPAN_SEAM_PRE_MODEL))
    # no policy configured: zero counts, no passed-over names
    base = {c.ATTR_SEAM: PRE.value, c.ATTR_ITERATION_INDEX: 0, **CONV, **folded(0, 0, 0)}
    assert {
        **base,
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.RESOLVER.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: s.SONNET,
    } == resolver
    assert {
        **base,
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.DEFAULT.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: s.DEFAULT_MODEL,
    } == default


def test_adopter_override_on_the_dispatch_span(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    def override(call: ToolCall, ctx: Any) -> ToolCall | None:
        return ToolCall(call.id, "hydrate_context", {}) if call.name == "fetch_data" else None

    spans = run_spans(tracer_provider, span_exporter, on_tool_call_dispatch=override)
    call_1 = s.named(spans, c.SPAN_DISPATCH)[0]
    expected = {
        **CALL_1,
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: True,
        c.ATTR_DISPATCH_FINAL_TOOL: "hydrate_context",
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.ADOPTER.value,
    }
    assert expected == s.attrs(call_1)


def test_forced_tool_and_reinstatement(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    forced = ForcedChoiceStage(resolver=lambda ctx: "search_docs")
    spans = run_spans(
        tracer_provider, span_exporter, stages=s.stages(replace={"forced_choice": forced})
    )
    select = s.attrs(s.one(spans, c.SPAN_SELECT_TOOLS))
    assert "search_docs" == select[c.ATTR_SELECTION_FORCED_TOOL]
    assert True is select[c.ATTR_SELECTION_REINSTATED]
    assert ("run_block", "fetch_data", "search_docs", "hydrate_context") == select[
        c.ATTR_SELECTION_SELECTED
    ]
    stages = [s.attrs(span) for span in s.named(spans, c.SPAN_STAGE)]
    assert [False, True, False, True, False, False] == [
        attrs[c.ATTR_STAGE_FORCED_REINSTATED] for attrs in stages
    ]
    assert ("forced 'search_docs' (resolver)", ("deploy",), ("hydrate_context",)) == (
        stages[0][c.ATTR_STAGE_REASON],
        stages[1][c.ATTR_STAGE_DROPPED],
        stages[3][c.ATTR_STAGE_DROPPED],
    )


def test_no_conversation_or_agent_attributes_when_not_provided(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    spans = run_spans(tracer_provider, span_exporter, conversation_id=None, agent_name=None)
    decision = [span for span in spans if span.name in c.SPANS]
    assert 14 == len(decision)
    keys = {c.ATTR_GEN_AI_CONVERSATION_ID, c.ATTR_GEN_AI_AGENT_NAME}
    assert [] == [span.name for span in decision if keys & set(span.attributes)]
    assert "invoke_agent" == s.tree(spans)[0][1]


def test_second_iteration_has_its_own_index(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    final = ChatResponse(Message("assistant", "Brand A leads."), usage=s.USAGE)
    scenario = s.Scenario()
    layer = s.make_layer(scenario, tracer_provider=tracer_provider)
    chat = s.ScriptedChat([scenario.response, final])
    result = s.ReActAgent(layer, chat, scenario.tools, max_iterations=3).run_turn(
        s.CONVERSATION, s.USER_TEXT, role=s.ROLE
    )
    assert "Brand A leads." == result.answer
    spans = span_exporter.get_finished_spans()
    first, second = s.named(spans, c.SPAN_ITERATION)
    assert (0, 1) == (
        first.attributes[c.ATTR_ITERATION_INDEX],
        second.attributes[c.ATTR_ITERATION_INDEX],
    )
    # the final iteration selects, picks a model and answers: no POST seam, no gate
    children = [
        span.name
        for span in s.ordered(spans)
        if span.parent is not None and span.parent.span_id == second.context.span_id
    ]
    assert [c.SPAN_SELECT_TOOLS, c.SPAN_SEAM_PRE_MODEL, "chat claude-haiku-4-5"] == children
    # a live offload puts the recall tool on offer
    second_select = s.named(spans, c.SPAN_SELECT_TOOLS)[1]
    assert "recall_tool_result" in second_select.attributes[c.ATTR_SELECTION_OFFERED]


def test_loop_exception_marks_iteration_and_is_reraised_unchanged(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    error = ConnectionError("model endpoint down")

    def chat(request: Any) -> Any:
        raise error

    layer = s.make_layer(s.Scenario(), tracer_provider=tracer_provider)
    agent = s.ReActAgent(layer, chat, s.tools())
    with pytest.raises(ConnectionError) as raised:
        agent.run_turn(s.CONVERSATION, s.USER_TEXT)
    assert error is raised.value
    spans = span_exporter.get_finished_spans()
    failed = {
        span.name: (span.status.status_code, span.attributes.get(c.ATTR_ERROR_TYPE))
        for span in spans
        if span.status.status_code is StatusCode.ERROR
    }
    expected = (StatusCode.ERROR, "ConnectionError")
    assert {
        "invoke_agent analyst": expected,
        c.SPAN_ITERATION: expected,
        "chat claude-haiku-4-5": expected,
    } == failed
