"""Every name seamscope emits: spans, attributes, events, metrics, enum values.

This module is the project's telemetry contract. Dashboards, alert rules, the
collector configuration and users' queries depend on these strings, so they
are public API: change one only together with every dependent.

Rules the names follow:

* Span names are low-cardinality (no ids, no tool names).
* ``gen_ai.*`` and ``error.type`` are OpenTelemetry's own names, reused and
  never redefined.
* No key is both a leaf and a prefix of another key (a test enforces it):
  ``seamscope.offload.fire`` exists, so nothing is named
  ``seamscope.offload.fire.x``.
* Metric attribute values are bounded: names of policies, stages, models and
  tools come from configuration and the tail folds into :data:`OTHER`.

``docs/semantic-conventions.md`` is generated from this module
(``python -m seamscope.telemetry.conventions > docs/semantic-conventions.md``);
a test fails when the committed copy is stale.
"""

from __future__ import annotations

import enum
from typing import Final

from seamscope.decisions.records import (
    GuardResult,
    MiddlewareDecisionKind,
    OffloadCostKind,
    OffloadMechanism,
    OffloadOutcome,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyResult,
    PricingSource,
    PriorSource,
    RecallStatus,
    Seam,
    SettleTrigger,
    StageOutcomeKind,
    WinnerSource,
)
from seamscope.telemetry._metric_spec import MetricSpec


class SelectionSet(enum.StrEnum):
    """Which set of tools a count is about (``seamscope.selection.set``)."""

    OFFERED = "offered"
    SELECTED = "selected"


class CacheUsage(enum.StrEnum):
    """How a model call's input tokens met the prompt cache (``seamscope.usage.cache``)."""

    READ = "read"
    WRITE = "write"
    UNCACHED = "uncached"


class ShadowBasis(enum.StrEnum):
    """How a shadow settlement's amount is known (``seamscope.offload.shadow.basis``):
    ``exact`` for an offload that fires either way (its real carries and
    recalls), ``expected`` for one only the shadow would have fired (one recall
    hop at the shadow's recall probability)."""

    EXACT = "exact"
    EXPECTED = "expected"


class DecisionKind(enum.StrEnum):
    """Which decision a duration measures (``seamscope.decision.kind``).

    One duration is recorded per decision kind per iteration: the pipeline
    (``select_tools``, all its stages), each seam (``post_model``, all its
    dispatches) and each gate call. Per-stage and per-dispatch durations
    are on their spans; the collector's spanmetrics connector turns them
    into histograms.
    """

    SELECT_TOOLS = "select_tools"
    PRE_MODEL = "pre_model"
    POST_MODEL = "post_model"
    OFFLOAD_GATE = "offload_gate"


__all__ = [
    "LOG_STAGE_REJECTED",
    "ATTR_POLICY_EVENTS_FOLDED",
    "ATTR_POLICY_PASSED_OVER",
    "ATTR_POLICY_SKIPPED_COUNT",
    "ATTR_POLICY_NOT_MATCHED_COUNT",
    "ATTR_POLICY_EVALUATED_COUNT",
    "ATTR_STAGE_REJECTED",
    "ATTR_STAGE_DROPPED_COUNT",
    "ATTR_SELECTION_DROPPED_COUNT",
    "ATTR_SELECTION_SELECTED_COUNT",
    "ATTR_SELECTION_OFFERED_COUNT",
    "ATTR_ADOPTER_SOURCE",
    "ATTR_DISPATCH_ADOPTER_OVERRIDE",
    "ATTR_DISPATCH_EMITTED_TOOL",
    "ATTR_DISPATCH_FINAL_TOOL",
    "ATTR_DISPATCH_GUARD",
    "ATTR_DISPATCH_PALETTE_GATE",
    "ATTR_DISPATCH_REDIRECT_TO",
    "ATTR_DISPATCH_ARGS",
    "ATTR_DISPATCH_ARGS_TRANSFORMED",
    "ATTR_DECISION_KIND",
    "ATTR_ERROR_MESSAGE",
    "ATTR_ERROR_TYPE",
    "ATTR_GEN_AI_AGENT_NAME",
    "ATTR_GEN_AI_CONVERSATION_ID",
    "ATTR_GEN_AI_OPERATION_NAME",
    "ATTR_GEN_AI_PROVIDER_NAME",
    "ATTR_GEN_AI_REQUEST_MODEL",
    "ATTR_GEN_AI_RESPONSE_MODEL",
    "ATTR_GEN_AI_TOOL_CALL_ID",
    "ATTR_GEN_AI_TOOL_NAME",
    "ATTR_GEN_AI_TOOL_DEFINITIONS",
    "ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    "ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS",
    "ATTR_GEN_AI_USAGE_INPUT_TOKENS",
    "ATTR_GEN_AI_USAGE_OUTPUT_TOKENS",
    "ATTR_ITERATION_INDEX",
    "ATTR_MESSAGE_CONTENT",
    "ATTR_OFFLOAD_ACTIVE",
    "ATTR_OFFLOAD_CACHE_DELTA_USD",
    "ATTR_OFFLOAD_COST_KIND",
    "ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD",
    "ATTR_OFFLOAD_FIRE",
    "ATTR_OFFLOAD_HORIZON",
    "ATTR_OFFLOAD_ID",
    "ATTR_OFFLOAD_NET_SAVING_USD",
    "ATTR_OFFLOAD_OUTCOME",
    "ATTR_OFFLOAD_OUTPUT_TOKENS",
    "ATTR_OFFLOAD_PRICING_SOURCE",
    "ATTR_OFFLOAD_REALIZED_COSTS_USD",
    "ATTR_OFFLOAD_REALIZED_NET_SAVING_USD",
    "ATTR_OFFLOAD_REALIZED_SAVINGS_USD",
    "ATTR_OFFLOAD_REASON",
    "ATTR_OFFLOAD_REASON_CODE",
    "ATTR_OFFLOAD_RECALLS",
    "ATTR_OFFLOAD_RECALL_PROBABILITY",
    "ATTR_OFFLOAD_REPREFILL_SAVING_USD",
    "ATTR_OFFLOAD_SETTLE_TRIGGER",
    "ATTR_OFFLOAD_STUB_CARRY_COST_USD",
    "ATTR_OFFLOAD_TURNS_CARRIED",
    "ATTR_OFFLOAD_STUB_TOKENS",
    "ATTR_OFFLOAD_THRESHOLD_TOKENS",
    "ATTR_OFFLOAD_RECALL_INPUT_TOKENS",
    "ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS",
    "ATTR_OFFLOAD_INPUT_USD_PER_MTOK",
    "ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK",
    "ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK",
    "ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK",
    "ATTR_OFFLOAD_CARRIED",
    "ATTR_OFFLOAD_CARRIED_STUB_TOKENS",
    "ATTR_OFFLOAD_PRIOR_SOURCE",
    "ATTR_OFFLOAD_PRIORS_VERSION",
    "ATTR_OFFLOAD_SHADOW_BASIS",
    "ATTR_OFFLOAD_SHADOW_EXACT_NET_SAVING_USD",
    "ATTR_OFFLOAD_SHADOW_EXPECTED_HIGH_USD",
    "ATTR_OFFLOAD_SHADOW_EXPECTED_LOW_USD",
    "ATTR_OFFLOAD_SHADOW_EXPECTED_NET_SAVING_USD",
    "ATTR_OFFLOAD_SHADOW_FIRE",
    "ATTR_OFFLOAD_SHADOW_NEWLY_FIRED",
    "ATTR_OFFLOAD_SHADOW_NO_LONGER_FIRED",
    "ATTR_OFFLOAD_SHADOW_NET_SAVING_USD",
    "ATTR_OFFLOAD_SHADOW_REASON_CODE",
    "EVENT_OFFLOAD_RECALLED",
    "EVENT_DECISIONS_SKIPPED",
    "PriorSource",
    "ATTR_POLICY_NAME",
    "ATTR_POLICY_RESULT",
    "ATTR_POLICY_WINNER",
    "ATTR_SEAM",
    "ATTR_SEAM_REWRITTEN",
    "ATTR_SEAM_TOOL_CALLS",
    "ATTR_SEAM_WINNER_SOURCE",
    "ATTR_SELECTION_DROPPED",
    "ATTR_SELECTION_FORCED_TOOL",
    "ATTR_SELECTION_OFFERED",
    "ATTR_SELECTION_PASSED_THROUGH",
    "ATTR_CHAT_ATTEMPT",
    "ATTR_SELECTION_REINSTATED",
    "ATTR_SELECTION_REUSED",
    "ATTR_SELECTION_SELECTED",
    "ATTR_SELECTION_SET",
    "ATTR_STAGE_DEGRADED",
    "ATTR_STAGE_DROPPED",
    "ATTR_STAGE_FORCED_REINSTATED",
    "ATTR_STAGE_INDEX",
    "ATTR_STAGE_NAME",
    "ATTR_STAGE_OUTCOME",
    "ATTR_STAGE_PROTECTS_FORCED",
    "ATTR_STAGE_REASON",
    "ATTR_USAGE_CACHE",
    "ATTR_OFFLOAD_MECHANISM",
    "ATTR_OFFLOAD_STORE_OPERATION",
    "ATTR_COMPACTION_REMOVED_TOKENS",
    "ATTR_COMPACTION_KEPT_TOKENS",
    "ATTR_COMPACTION_TOOL_CALL_IDS",
    "ATTR_COMPACTION_MESSAGES_REMOVED",
    "ATTR_COMPACTION_COST_USD",
    "ATTR_MIDDLEWARE_NAME",
    "ATTR_MIDDLEWARE_DECISION",
    "ATTR_MIDDLEWARE_FRAMEWORK",
    "ATTR_MIDDLEWARE_REASON",
    "ATTR_MIDDLEWARE_DECISION_MODEL",
    "ATTR_MIDDLEWARE_FAILED_MODELS",
    "ATTR_MIDDLEWARE_ERROR_TYPES",
    "ATTR_SEAM_CHOSEN_MODEL",
    "ATTR_DISPATCH_BLOCKED",
    "ATTR_DISPATCH_OFFERED",
    "ATTR_DISPATCH_REFUSED",
    "ATTR_DISPATCH_STRUCTURED_OUTPUT",
    "ATTR_CONVERSATION_COMPACTED",
    "ATTR_MODEL_CHOSEN_UNAVAILABLE",
    "LOG_MIDDLEWARE_DECIDED",
    "METRIC_MIDDLEWARE_DECISIONS",
    "METRIC_MIDDLEWARE_COST",
    "ATTR_MIDDLEWARE_COST_USD",
    "SPAN_COMPACTION",
    "OffloadMechanism",
    "MiddlewareDecisionKind",
    "ATTR_TOOL_CALL_RESULT",
    "ATTRIBUTES",
    "CacheUsage",
    "ShadowBasis",
    "DecisionKind",
    "EVENTS",
    "EVENT_OFFLOAD_SETTLED",
    "EVENT_POLICY_EVALUATED",
    "EVENT_ADOPTER_ERROR",
    "GuardResult",
    "LOG_EVENTS",
    "LOG_ADOPTER_ERROR",
    "LOG_OFFLOAD_DECIDED",
    "LOG_OFFLOAD_SETTLED",
    "LOG_OFFLOAD_STORE_FAILED",
    "LOG_MODEL_UNAVAILABLE",
    "LOG_PALETTE_GATE_DROP",
    "LOG_POLICY_ERROR",
    "LOG_STAGE_DEGRADED",
    "LOG_TELEMETRY_ERROR",
    "METRICS",
    "METRIC_DECISION_DURATION",
    "METRIC_MODEL_INPUT_TOKENS",
    "METRIC_OFFLOAD_DECISIONS",
    "METRIC_OFFLOAD_PREDICTED_NET_SAVING",
    "METRIC_OFFLOAD_REALIZED_COSTS",
    "METRIC_OFFLOAD_REALIZED_SAVINGS",
    "METRIC_OFFLOAD_RECALLS",
    "METRIC_OFFLOAD_SETTLED",
    "METRIC_OFFLOAD_SHADOW_DISAGREEMENTS",
    "METRIC_OFFLOAD_SHADOW_SAVINGS",
    "METRIC_OFFLOAD_STORE_ERRORS",
    "METRIC_OFFLOAD_SHADOW_COSTS",
    "METRIC_OFFLOAD_REMAINING_TURNS",
    "METRIC_OFFLOAD_RECALLED_OFFLOADS",
    "METRIC_OFFLOAD_SETTLED_RECALLS",
    "METRIC_OFFLOAD_CARRIED_TURNS",
    "METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY",
    "REMAINING_TURNS_BUCKETS",
    "METRIC_POLICY_EVALUATIONS",
    "METRIC_POLICY_WINS",
    "METRIC_REDIRECTS",
    "METRIC_SELECTION_TOOLS",
    "METRIC_STAGE_OUTCOMES",
    "MetricSpec",
    "OTHER",
    "ABANDONED_RUN",
    "TOOL_ERROR_RESULT",
    "TOOL_CALL_BLOCKED",
    "TOOL_CALL_CANCELLED",
    "RECALL_UNKNOWN",
    "RECALL_EXPIRED",
    "RECALL_EVICTED",
    "OffloadCostKind",
    "OffloadOutcome",
    "OffloadReasonCode",
    "PaletteVerdict",
    "PolicyResult",
    "PricingSource",
    "SPANS",
    "SPAN_DISPATCH",
    "SPAN_ITERATION",
    "SPAN_OFFLOAD_GATE",
    "SPAN_OFFLOAD_SETTLE",
    "SPAN_OFFLOAD_SHADOW_SETTLE",
    "SPAN_SEAM_POST_MODEL",
    "SPAN_SEAM_PRE_MODEL",
    "SPAN_SELECT_TOOLS",
    "SPAN_STAGE",
    "RecallStatus",
    "Seam",
    "SelectionSet",
    "SettleTrigger",
    "StageOutcomeKind",
    "WinnerSource",
    "render_markdown",
]


# Closed value sets live with the decision core (which must not import
# telemetry) and are re-exported here; their members are pinned by tests.

OTHER: Final = "other"
"""The value a capped metric attribute folds its tail into."""

TOOL_ERROR_RESULT: Final = "tool_error_result"
"""error.type of a tool that answered with an error result of unknown type.

The framework's error tool message came back while the exception itself, if
any, was handled before seamscope saw it, so its type is unknown."""

TOOL_CALL_BLOCKED: Final = "tool_call_blocked"
"""error.type of an execute_tool span whose tool never ran: a middleware blocked it.

A framework middleware inside the tool call (a risk check) answered with an
error result without calling the tool; the span also has seamscope.dispatch.blocked."""

TOOL_CALL_CANCELLED: Final = "tool_call_cancelled"
"""error.type of an execute_tool span whose call the run cancelled before it answered.

The framework started the call (its tool-start hook ran) and then ended the
run (a guardrail's tripwire, a cancellation) before the tool answered:
whether its body began is not known, and nothing it returned was used."""

RECALL_UNKNOWN: Final = "offload_unknown"
"""error.type of a recall naming no offload of its conversation.

The offload store holds no output by that id for the conversation (an id of
another conversation is refused the same way)."""

RECALL_EXPIRED: Final = "offload_expired"
"""error.type of a recall of an output whose retention (the store's TTL) ended.

The agent was told when it expired; the offload was settled."""

RECALL_EVICTED: Final = "offload_evicted"
"""error.type of a recall of an output the offload store's size bound dropped.

The agent was told when it was dropped; the offload was settled then."""

ABANDONED_RUN: Final = "abandoned"
"""error.type of an agent run that ended without reaching its end.

A stream the caller closed part way, or an error raised where seamscope's
hooks did not see it: the run's invoke_agent and open iteration spans end
with it."""


# --------------------------------------------------------------------------
# Span names.
# --------------------------------------------------------------------------

SPAN_ITERATION: Final = "seamscope.iteration"
"""One ReAct iteration: select tools, PRE seam, model call, POST seam, tools."""
SPAN_SELECT_TOOLS: Final = "seamscope.select_tools"
"""The selection pipeline; parent of one :data:`SPAN_STAGE` per stage, in order."""
SPAN_STAGE: Final = "seamscope.stage"
"""One selection stage's ``apply``."""
SPAN_SEAM_PRE_MODEL: Final = "seamscope.seam.pre_model"
"""The PRE-model seam: which model reasons the turn."""
SPAN_SEAM_POST_MODEL: Final = "seamscope.seam.post_model"
"""The POST-model seam; parent of one :data:`SPAN_DISPATCH` per emitted tool call."""
SPAN_DISPATCH: Final = "seamscope.dispatch"
"""One emitted tool call through policies, the adopter callback and the palette gate."""
SPAN_OFFLOAD_GATE: Final = "seamscope.offload_gate"
"""One offload-gate call with its priced terms."""
SPAN_COMPACTION: Final = "seamscope.compaction"
"""A framework middleware's compaction (context editing, a summary), priced like an offload."""
SPAN_OFFLOAD_SETTLE: Final = "seamscope.offload.settle"
"""A fired offload settled by the ledger; linked to its gate span."""
SPAN_OFFLOAD_SHADOW_SETTLE: Final = "seamscope.offload.shadow_settle"
"""A shadow config's counterfactual on one settled conversation, beside its live settle spans."""

SPANS: Final = (
    SPAN_ITERATION,
    SPAN_SELECT_TOOLS,
    SPAN_STAGE,
    SPAN_SEAM_PRE_MODEL,
    SPAN_SEAM_POST_MODEL,
    SPAN_DISPATCH,
    SPAN_OFFLOAD_GATE,
    SPAN_COMPACTION,
    SPAN_OFFLOAD_SETTLE,
    SPAN_OFFLOAD_SHADOW_SETTLE,
)

# --------------------------------------------------------------------------
# Attribute keys: OpenTelemetry's own (reused, never redefined).
# --------------------------------------------------------------------------

ATTR_ERROR_TYPE: Final = "error.type"
"""OpenTelemetry: class of a contained or raised error (the exception's qualified name)."""
ATTR_GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""OpenTelemetry GenAI: ``invoke_agent``, ``chat``, ``execute_tool``."""
ATTR_GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""OpenTelemetry GenAI: the model provider, when the caller knows it."""
ATTR_GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
"""OpenTelemetry GenAI: the model that reasons the turn (PRE seam, chat, gate)."""
ATTR_GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
"""OpenTelemetry GenAI: the model that answered, when reported."""
ATTR_GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
"""OpenTelemetry GenAI: the emitted tool call's id (kept through a rewrite)."""
ATTR_GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
"""OpenTelemetry GenAI: the executed tool's name."""
ATTR_GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
"""OpenTelemetry GenAI: on a chat span, the tools sent with the request (JSON, after selection).

A JSON array of ``{"type", "name"}`` objects in the order sent, at most
``max_array_length``; ``description`` and ``parameters`` only when content
capture is on."""
ATTR_GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""OpenTelemetry GenAI: the conversation, when the caller provides it."""
ATTR_GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
"""OpenTelemetry GenAI: the agent, when the caller provides it."""
ATTR_GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""OpenTelemetry GenAI: input tokens of a model call, when reported."""
ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
"""OpenTelemetry GenAI: input tokens of a model call served from the prompt cache."""
ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
"""OpenTelemetry GenAI: input tokens of a model call written to the prompt cache (chat spans only).

The name since semantic-conventions-genai #440; never on ``invoke_agent`` spans
(#469: a consumer sums the inference spans)."""
ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
"""Deprecated alias of ``gen_ai.usage.cache_write.input_tokens``, written beside it until 0.2.0.

Its name before semantic-conventions-genai #440, with the same value for one
release, so queries and backends reading the old name keep working."""
ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
"""OpenTelemetry GenAI: output tokens of a model call, when reported."""

# --------------------------------------------------------------------------
# Attribute keys: seamscope's own.
# --------------------------------------------------------------------------

ATTR_ITERATION_INDEX: Final = "seamscope.iteration.index"
"""int: 0-based index of the ReAct iteration within the turn."""
ATTR_DECISION_KIND: Final = "seamscope.decision.kind"
"""Metric attribute: which decision a duration measures (:class:`DecisionKind`)."""
ATTR_ADOPTER_SOURCE: Final = "seamscope.adopter.source"
"""What adopter code raised: match, guard, args_transform, resolver, callback."""
ATTR_ERROR_MESSAGE: Final = "seamscope.error.message"
"""A contained error's message, truncated; recorded on events only."""

ATTR_SELECTION_PASSED_THROUGH: Final = "seamscope.selection.passed_through"
"""string[] on the iteration: the class names of offered tools without a readable
name, sent to the model untouched (no stage judged them)."""
ATTR_CHAT_ATTEMPT: Final = "seamscope.chat.attempt"
"""int on a ``chat`` span: the framework's retry of the iteration's model call (2 for
the first retry, ...); absent on the first attempt."""

ATTR_SELECTION_OFFERED: Final = "seamscope.selection.offered"
"""string[]: tool names offered to the pipeline, in order."""
ATTR_SELECTION_SELECTED: Final = "seamscope.selection.selected"
"""string[]: tool names the pipeline selected, in order."""
ATTR_SELECTION_DROPPED: Final = "seamscope.selection.dropped"
"""string[]: offered tool names that were not selected."""
ATTR_SELECTION_SET: Final = "seamscope.selection.set"
"""Metric attribute: ``offered`` or ``selected`` (:class:`SelectionSet`)."""
ATTR_SELECTION_FORCED_TOOL: Final = "seamscope.selection.forced_tool"
"""The forced tool for this iteration, or absent when none."""
ATTR_SELECTION_REINSTATED: Final = "seamscope.selection.reinstated"
"""bool: the forced tool was dropped by a protects_forced stage and reinstated."""
ATTR_SELECTION_REUSED: Final = "seamscope.selection.reused"
"""bool: no stage ran; the previous iteration's selection was reused, its inputs unchanged.
Set by ``DecisionLayer(reuse_selection=True)``; absent when the stages ran."""
ATTR_SELECTION_OFFERED_COUNT: Final = "seamscope.selection.offered_count"
"""int: how many tools were offered (the array keeps at most ``max_array_length``)."""
ATTR_SELECTION_SELECTED_COUNT: Final = "seamscope.selection.selected_count"
"""int: how many tools were selected."""
ATTR_SELECTION_DROPPED_COUNT: Final = "seamscope.selection.dropped_count"
"""int: how many offered tools were not selected."""

ATTR_STAGE_NAME: Final = "seamscope.stage.name"
"""The stage's ``name`` (bounded: stage names come from code)."""
ATTR_STAGE_INDEX: Final = "seamscope.stage.index"
"""int: 0-based position of the stage in the pipeline."""
ATTR_STAGE_OUTCOME: Final = "seamscope.stage.outcome"
"""``select`` or ``abstain`` (:class:`StageOutcomeKind`)."""
ATTR_STAGE_REASON: Final = "seamscope.stage.reason"
"""The stage outcome's reason, as the stage wrote it."""
ATTR_STAGE_DEGRADED: Final = "seamscope.stage.degraded"
"""bool on spans (``"true"``/``"false"`` on metrics): the stage abstained degraded."""
ATTR_STAGE_PROTECTS_FORCED: Final = "seamscope.stage.protects_forced"
"""bool: the pipeline reinstates a forced tool this stage drops."""
ATTR_STAGE_DROPPED: Final = "seamscope.stage.dropped"
"""string[]: tool names this stage removed."""
ATTR_STAGE_FORCED_REINSTATED: Final = "seamscope.stage.forced_reinstated"
"""bool: the pipeline reinstated the forced tool after this stage."""
ATTR_STAGE_DROPPED_COUNT: Final = "seamscope.stage.dropped_count"
"""int: how many tools this stage removed (the array keeps at most ``max_array_length``)."""
ATTR_STAGE_REJECTED: Final = "seamscope.stage.rejected"
"""string[]: tools the stage returned that were neither offered nor in the catalogue
(ignored: the pipeline never authors a tool); absent when none."""

ATTR_SEAM: Final = "seamscope.seam.name"
"""``pre_model`` or ``post_model`` (:class:`Seam`)."""
ATTR_SEAM_WINNER_SOURCE: Final = "seamscope.seam.winner_source"
"""Who decided (:class:`WinnerSource`)."""
ATTR_SEAM_TOOL_CALLS: Final = "seamscope.seam.tool_calls"
"""int: tool calls the model emitted (POST seam)."""
ATTR_SEAM_REWRITTEN: Final = "seamscope.seam.rewritten"
"""int: emitted tool calls that dispatch to another tool (POST seam)."""

ATTR_POLICY_WINNER: Final = "seamscope.policy.winner"
"""The name of the policy that won a seam or a dispatch; absent when none did."""
ATTR_POLICY_NAME: Final = "seamscope.policy.name"
"""The evaluated policy's name (events, metrics)."""
ATTR_POLICY_RESULT: Final = "seamscope.policy.result"
"""The evaluation's result (:class:`PolicyResult`)."""
ATTR_POLICY_EVALUATED_COUNT: Final = "seamscope.policy.evaluated_count"
"""int: policies evaluated at this seam decision (every result)."""
ATTR_POLICY_NOT_MATCHED_COUNT: Final = "seamscope.policy.not_matched_count"
"""int: policies whose ``match`` was false (no event each)."""
ATTR_POLICY_SKIPPED_COUNT: Final = "seamscope.policy.skipped_count"
"""int: policies that do not apply at this seam (no event each)."""
ATTR_POLICY_PASSED_OVER: Final = "seamscope.policy.passed_over"
"""string[]: names of the not-matched and skipped policies, in order, at most
``max_array_length`` (the counts say how many there were)."""
ATTR_POLICY_EVENTS_FOLDED: Final = "seamscope.policy.events_folded"
"""int: matched, error or guard-failed evaluations not recorded as events because
the span's event budget (``max_array_length``) was spent; absent when none."""

ATTR_DISPATCH_EMITTED_TOOL: Final = "seamscope.dispatch.emitted_tool"
"""The tool the model emitted."""
ATTR_DISPATCH_REDIRECT_TO: Final = "seamscope.dispatch.redirect_to"
"""The winning policy's target, when a policy rewrote the call."""
ATTR_DISPATCH_GUARD: Final = "seamscope.dispatch.guard"
"""The guard verdict on the winning policy (:class:`GuardResult`)."""
ATTR_DISPATCH_ADOPTER_OVERRIDE: Final = "seamscope.dispatch.adopter_override"
"""bool: the adopter's ``on_tool_call_dispatch`` changed the call."""
ATTR_DISPATCH_PALETTE_GATE: Final = "seamscope.dispatch.palette_gate"
"""The palette gate's verdict (:class:`PaletteVerdict`)."""
ATTR_DISPATCH_FINAL_TOOL: Final = "seamscope.dispatch.final_tool"
"""The tool that really dispatches."""
ATTR_DISPATCH_ARGS_TRANSFORMED: Final = "seamscope.dispatch.args_transformed"
"""bool: the winning policy's args_transform rewrote the arguments."""
ATTR_DISPATCH_ARGS: Final = "seamscope.dispatch.arguments"
"""Content (opt-in only): the final call's arguments, masked and truncated."""

ATTR_OFFLOAD_ID: Final = "seamscope.offload.id"
"""A fired offload's id; the ledger follows it through the conversation."""
ATTR_OFFLOAD_FIRE: Final = "seamscope.offload.fire"
"""bool on spans (``"true"``/``"false"`` on metrics): the gate fired."""
ATTR_OFFLOAD_NET_SAVING_USD: Final = "seamscope.offload.net_saving_usd"
"""float USD: predicted net saving (reprefill − stub carry − expected recall hop)."""
ATTR_OFFLOAD_REPREFILL_SAVING_USD: Final = "seamscope.offload.reprefill_saving_usd"
"""float USD: re-prefill avoided over the horizon."""
ATTR_OFFLOAD_STUB_CARRY_COST_USD: Final = "seamscope.offload.stub_carry_cost_usd"
"""float USD: the stub carried over the horizon."""
ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: Final = "seamscope.offload.expected_recall_hop_cost_usd"
"""float USD: one recall hop weighted by the recall probability."""
ATTR_OFFLOAD_REASON: Final = "seamscope.offload.reason"
"""The gate's reason string, with its priced terms."""
ATTR_OFFLOAD_REASON_CODE: Final = "seamscope.offload.reason_code"
"""Closed reason (:class:`OffloadReasonCode`)."""
ATTR_OFFLOAD_OUTPUT_TOKENS: Final = "seamscope.offload.output_tokens"
"""float: size of the candidate tool output in tokens."""
ATTR_OFFLOAD_HORIZON: Final = "seamscope.offload.horizon"
"""int: the horizon prior H after clamping."""
ATTR_OFFLOAD_RECALL_PROBABILITY: Final = "seamscope.offload.recall_probability"
"""float: the recall-probability prior after clamping."""
ATTR_OFFLOAD_PRICING_SOURCE: Final = "seamscope.offload.pricing_source"
"""Which table priced the model (:class:`PricingSource`)."""
ATTR_OFFLOAD_OUTCOME: Final = "seamscope.offload.outcome"
"""A settled offload's outcome (:class:`OffloadOutcome`)."""
ATTR_OFFLOAD_COST_KIND: Final = "seamscope.offload.cost_kind"
"""Metric attribute: what a realized cost paid for (:class:`OffloadCostKind`)."""
ATTR_OFFLOAD_SETTLE_TRIGGER: Final = "seamscope.offload.settle_trigger"
"""What settled the offload (:class:`SettleTrigger`)."""
ATTR_OFFLOAD_REALIZED_SAVINGS_USD: Final = "seamscope.offload.realized_savings_usd"
"""float USD: savings realized by a settled offload."""
ATTR_OFFLOAD_REALIZED_COSTS_USD: Final = "seamscope.offload.realized_costs_usd"
"""float USD: costs realized by a settled offload."""
ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: Final = "seamscope.offload.realized_net_saving_usd"
"""float USD: realized savings − realized costs of a settled offload."""
ATTR_OFFLOAD_TURNS_CARRIED: Final = "seamscope.offload.turns_carried"
"""int: later model calls that carried the stub."""
ATTR_OFFLOAD_RECALLS: Final = "seamscope.offload.recalls"
"""int: recalls of the offloaded output."""
ATTR_OFFLOAD_CACHE_DELTA_USD: Final = "seamscope.offload.cache_delta_usd"
"""float USD: realized cost of prompt-cache disruption after the offload."""
ATTR_OFFLOAD_STUB_TOKENS: Final = "seamscope.offload.stub_tokens"
"""int: the stub size the gate priced (and the ledger charges per carried call)."""
ATTR_OFFLOAD_THRESHOLD_TOKENS: Final = "seamscope.offload.threshold_tokens"
"""int: the gate's large-output threshold on this call (below it the gate never fires)."""
ATTR_OFFLOAD_RECALL_INPUT_TOKENS: Final = "seamscope.offload.recall_input_tokens"
"""int: the input tokens of one recall hop as the gate priced it."""
ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: Final = "seamscope.offload.recall_output_tokens"
"""int: the output tokens of one recall hop as the gate priced it."""
ATTR_OFFLOAD_INPUT_USD_PER_MTOK: Final = "seamscope.offload.input_usd_per_mtok"
"""double on a gate or settle span: the input rate its model was priced at (USD per 1M tokens).

On a gate span the gate's rate, on a settle span the ledger's; absent when
unpriced. ``seamscope whatif`` re-settles the realized side at these rates
(a user's ``PricingTable`` override included), read by their shortest repr."""
ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK: Final = "seamscope.offload.output_usd_per_mtok"
"""double on a gate or settle span: the output rate its model was priced at (USD per 1M tokens)."""
ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK: Final = "seamscope.offload.cache_read_usd_per_mtok"
"""double on a gate or settle span: the cache-read rate, when the pricing table has one."""
ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK: Final = "seamscope.offload.cache_write_usd_per_mtok"
"""double on a gate or settle span: the cache-write rate, when the pricing table has one."""
ATTR_OFFLOAD_CARRIED: Final = "seamscope.offload.carried"
"""string[] on a chat span the ledger accounted: the offloads whose stub it carried (or none)."""
ATTR_OFFLOAD_CARRIED_STUB_TOKENS: Final = "seamscope.offload.carried_stub_tokens"
"""double[] on a chat span: the stub size (tokens) of each offload in seamscope.offload.carried."""
ATTR_OFFLOAD_PRIOR_SOURCE: Final = "seamscope.offload.prior_source"
"""Where the gate's horizon and recall prior came from (:class:`PriorSource`)."""
ATTR_OFFLOAD_PRIORS_VERSION: Final = "seamscope.offload.priors_version"
"""The version of the calibrated priors file the gate loaded (absent without one)."""
ATTR_OFFLOAD_SHADOW_FIRE: Final = "seamscope.offload.shadow.fire"
"""bool: a shadow configuration of the gate would have fired (the live decision stands)."""
ATTR_OFFLOAD_SHADOW_NET_SAVING_USD: Final = "seamscope.offload.shadow.net_saving_usd"
"""float USD: the shadow configuration's predicted net saving."""
ATTR_OFFLOAD_SHADOW_REASON_CODE: Final = "seamscope.offload.shadow.reason_code"
"""The shadow configuration's closed reason (:class:`OffloadReasonCode`)."""
ATTR_OFFLOAD_SHADOW_BASIS: Final = "seamscope.offload.shadow.basis"
"""How a shadow settlement's amount is known (:class:`ShadowBasis`); string[] on its span."""
ATTR_OFFLOAD_SHADOW_EXACT_NET_SAVING_USD: Final = "seamscope.offload.shadow.exact_net_saving_usd"
"""float USD: the shadow's exact net on the conversation (what fires either way, compactions)."""
ATTR_OFFLOAD_SHADOW_EXPECTED_NET_SAVING_USD: Final = (
    "seamscope.offload.shadow.expected_net_saving_usd"
)
"""float USD: the shadow's expected net from the offloads only it would have fired."""
ATTR_OFFLOAD_SHADOW_EXPECTED_LOW_USD: Final = "seamscope.offload.shadow.expected_low_usd"
"""float USD: the low end of the expected net's range (every such offload recalled once)."""
ATTR_OFFLOAD_SHADOW_EXPECTED_HIGH_USD: Final = "seamscope.offload.shadow.expected_high_usd"
"""float USD: the high end of the expected net's range (no such offload recalled)."""
ATTR_OFFLOAD_SHADOW_NO_LONGER_FIRED: Final = "seamscope.offload.shadow.no_longer_fired"
"""string[]: the live offload ids the shadow would not have fired."""
ATTR_OFFLOAD_SHADOW_NEWLY_FIRED: Final = "seamscope.offload.shadow.newly_fired"
"""string[]: the tools whose outputs only the shadow would have offloaded, one per offload."""
ATTR_OFFLOAD_ACTIVE: Final = "seamscope.offload.active"
"""Metric attribute ``"true"``/``"false"``: the conversation has a live offload."""
ATTR_OFFLOAD_MECHANISM: Final = "seamscope.offload.mechanism"
"""What took content out (:class:`OffloadMechanism`); on a gate span: whose offload it decided.

On a compaction or settle span and the realized metrics: the mechanism that
took the content out of the prompt. On a ``seamscope.offload_gate`` span: the
gate decided a framework's own offload of that mechanism (an opt-in gate on
Deep Agents' evictions or Strands' ``ContextOffloader``), not one of its own;
a gate span without it is the gate's own call. ``whatif`` and ``calibrate``
read only the gate's own calls as gate calls."""
ATTR_OFFLOAD_STORE_OPERATION: Final = "seamscope.offload.store_operation"
"""Metric and log attribute: the offload store call that failed (``put``, ``recall``,
``offloads``, ``lookup``, ``add``, ``claim``, ``due``)."""
ATTR_COMPACTION_REMOVED_TOKENS: Final = "seamscope.compaction.removed_tokens"
"""float: estimated tokens a compaction took out of the prompt (chars / 4)."""
ATTR_COMPACTION_KEPT_TOKENS: Final = "seamscope.compaction.kept_tokens"
"""float: tokens (chars / 4) of what replaced them (placeholder, summary), carried later."""
ATTR_COMPACTION_TOOL_CALL_IDS: Final = "seamscope.compaction.tool_call_ids"
"""The tool results a compaction cleared, by tool call id."""
ATTR_COMPACTION_MESSAGES_REMOVED: Final = "seamscope.compaction.messages_removed"
"""int: messages a compaction removed (a summary)."""
ATTR_COMPACTION_COST_USD: Final = "seamscope.compaction.cost_usd"
"""float USD: the compaction's own model call (a summary)."""
ATTR_MIDDLEWARE_NAME: Final = "seamscope.middleware.name"
"""The framework middleware whose decision a span records (its name in the framework)."""
ATTR_MIDDLEWARE_DECISION: Final = "seamscope.middleware.decision"
"""What the middleware decided (:class:`MiddlewareDecisionKind`)."""
ATTR_MIDDLEWARE_FRAMEWORK: Final = "seamscope.middleware.framework"
"""The framework the middleware belongs to (``langchain``, ``openai_agents``)."""
ATTR_MIDDLEWARE_REASON: Final = "seamscope.middleware.reason"
"""The reason the middleware gives (a selector's choice and limits, a limit, a risk verdict)."""
ATTR_MIDDLEWARE_DECISION_MODEL: Final = "seamscope.middleware.decision_model"
"""The model the middleware asked to decide, when it asked one."""
ATTR_MIDDLEWARE_COST_USD: Final = "seamscope.middleware.cost_usd"
"""float USD: what the middleware's own model calls for this decision cost."""
ATTR_MIDDLEWARE_FAILED_MODELS: Final = "seamscope.middleware.failed_models"
"""A fallback: the models whose calls failed, in order."""
ATTR_MIDDLEWARE_ERROR_TYPES: Final = "seamscope.middleware.error_types"
"""A fallback: the error type of each failed call, in the order of failed_models."""
ATTR_SEAM_CHOSEN_MODEL: Final = "seamscope.seam.chosen_model"
"""A middleware's model choice: the model chosen (a fallback: the model that answered)."""
ATTR_DISPATCH_BLOCKED: Final = "seamscope.dispatch.blocked"
"""bool: a middleware blocked the call; it never ran (the reason is seamscope.middleware.reason)."""
ATTR_CONVERSATION_COMPACTED: Final = "seamscope.conversation.compacted"
"""bool, on a chat span whose prompt carries a compaction or an offload's stub (the
GenAI conventions seamscope pins have no such attribute yet)."""
ATTR_DISPATCH_OFFERED: Final = "seamscope.dispatch.offered"
"""bool, set false only: the dispatched tool was not offered to the model this iteration."""
ATTR_DISPATCH_REFUSED: Final = "seamscope.dispatch.refused"
"""bool, set true only: the framework refused the call (no tool by that name may run
there: pydantic-ai's and Google ADK's unknown-tool answer); nothing ran, and the span
has no seamscope.dispatch.final_tool."""
ATTR_DISPATCH_STRUCTURED_OUTPUT: Final = "seamscope.dispatch.structured_output"
"""bool, set true only: the call is the structured-output answer the framework consumes
itself; it is never handed to the tool runner (no execute_tool span) and no policy routes it."""
ATTR_MODEL_CHOSEN_UNAVAILABLE: Final = "seamscope.model.chosen_unavailable"
"""On a chat span: the model the PRE seam chose, not callable here (the span's model ran)."""
ATTR_USAGE_CACHE: Final = "seamscope.usage.cache"
"""Metric attribute: how input tokens met the prompt cache (:class:`CacheUsage`)."""

ATTR_MESSAGE_CONTENT: Final = "seamscope.content.messages"
"""Content (opt-in only): the last message, masked and truncated."""
ATTR_TOOL_CALL_RESULT: Final = "seamscope.content.tool_result"
"""Content (opt-in only): a tool result, masked and truncated."""

ATTRIBUTES: Final = tuple(
    value
    for key, value in sorted(globals().items())
    if key.startswith("ATTR_") and isinstance(value, str)
)
"""Every attribute key above."""

# --------------------------------------------------------------------------
# Span events.
# --------------------------------------------------------------------------

EVENT_POLICY_EVALUATED: Final = "seamscope.policy.evaluated"
"""One policy evaluation: policy name, seam, result (and ``error.type`` on error)."""
EVENT_ADOPTER_ERROR: Final = "seamscope.adopter.error"
"""Adopter code (resolver, callback, args_transform, stage) raised; contained."""
EVENT_OFFLOAD_SETTLED: Final = "seamscope.offload.settled"
"""On the settle span: a fired offload's realized outcome."""

EVENT_OFFLOAD_RECALLED: Final = "seamscope.offload.recalled"
"""On the recall's span: offload id, conversation, model, real gen_ai.usage tokens, tool call id.
The hop's real tokens; gen_ai.tool.call.id: the call that brought it back, when known."""

EVENT_DECISIONS_SKIPPED: Final = "seamscope.decisions.skipped"
"""On the iteration: planning the model call (selection, PRE seam) failed in seamscope's
own code and was contained; the call ran as the framework asked (error.type, message)."""

EVENTS: Final = (
    EVENT_POLICY_EVALUATED, EVENT_ADOPTER_ERROR, EVENT_OFFLOAD_SETTLED, EVENT_OFFLOAD_RECALLED,
    EVENT_DECISIONS_SKIPPED,
)  # fmt: skip

# --------------------------------------------------------------------------
# structlog event names.
# --------------------------------------------------------------------------

LOG_PALETTE_GATE_DROP: Final = "seamscope.palette_gate.drop"
"""WARN: a redirect's target was not routed; the original call dispatched."""
LOG_POLICY_ERROR: Final = "seamscope.policy.error"
"""WARN: a policy predicate raised or answered a non-bool; counted as no match."""
LOG_ADOPTER_ERROR: Final = "seamscope.adopter.error"
"""WARN: a resolver, callback or args_transform raised; contained."""
LOG_STAGE_DEGRADED: Final = "seamscope.stage.degraded"
"""WARN: a selection stage abstained degraded (or raised and was contained)."""
LOG_STAGE_REJECTED: Final = "seamscope.stage.rejected"
"""A stage returned tools that were never offered nor in the catalogue (ignored)."""
LOG_OFFLOAD_DECIDED: Final = "seamscope.offload.decided"
"""INFO: the offload gate fired."""
LOG_OFFLOAD_SETTLED: Final = "seamscope.offload.settled"
"""INFO (WARN on loss): an offload settled."""
LOG_MODEL_UNAVAILABLE: Final = "seamscope.model.unavailable"
"""WARN: the PRE seam chose a model the adapter cannot call; the request's model ran."""
LOG_MIDDLEWARE_DECIDED: Final = "seamscope.middleware.decided"
"""INFO: a framework middleware's decision (name, kind, reason)."""
LOG_OFFLOAD_STORE_FAILED: Final = "seamscope.offload.store_failed"
"""WARNING: the offload store did not answer (operation, error.type); the loop went on."""
LOG_TELEMETRY_ERROR: Final = "seamscope.telemetry.error"
"""ERROR: seamscope's own telemetry code failed; the loop went on."""

LOG_EVENTS: Final = (
    LOG_PALETTE_GATE_DROP,
    LOG_POLICY_ERROR,
    LOG_ADOPTER_ERROR,
    LOG_STAGE_DEGRADED,
    LOG_STAGE_REJECTED,
    LOG_OFFLOAD_DECIDED,
    LOG_OFFLOAD_SETTLED,
    LOG_MODEL_UNAVAILABLE,
    LOG_MIDDLEWARE_DECIDED,
    LOG_OFFLOAD_STORE_FAILED,
    LOG_TELEMETRY_ERROR,
)

# --------------------------------------------------------------------------
# Metrics.
# --------------------------------------------------------------------------


METRIC_POLICY_EVALUATIONS: Final = MetricSpec(
    "seamscope.policy.evaluations",
    "counter",
    "{evaluation}",
    "Policy evaluations by seam and result; by policy too for the matched and error ones "
    "(a not-matched or skipped evaluation has no policy attribute).",
    (ATTR_SEAM, ATTR_POLICY_NAME, ATTR_POLICY_RESULT),
)
METRIC_POLICY_WINS: Final = MetricSpec(
    "seamscope.policy.wins",
    "counter",
    "{decision}",
    "Seam decisions by seam, winner source and winning policy (``none`` when no policy won).",
    (ATTR_SEAM, ATTR_SEAM_WINNER_SOURCE, ATTR_POLICY_NAME),
)
METRIC_REDIRECTS: Final = MetricSpec(
    "seamscope.redirects",
    "counter",
    "{redirect}",
    "Policy redirects by policy and palette-gate verdict.",
    (ATTR_POLICY_NAME, ATTR_DISPATCH_PALETTE_GATE),
)
METRIC_SELECTION_TOOLS: Final = MetricSpec(
    "seamscope.selection.tools",
    "counter",
    "{tool}",
    "Tools offered to and selected by the selection pipeline (one count per tool).",
    (ATTR_SELECTION_SET,),
)
METRIC_STAGE_OUTCOMES: Final = MetricSpec(
    "seamscope.stage.outcomes",
    "counter",
    "{outcome}",
    "Selection-stage outcomes by stage, outcome and degraded flag.",
    (ATTR_STAGE_NAME, ATTR_STAGE_OUTCOME, ATTR_STAGE_DEGRADED),
)
METRIC_OFFLOAD_DECISIONS: Final = MetricSpec(
    "seamscope.offload.decisions",
    "counter",
    "{decision}",
    "Offload-gate decisions by model, fire and reason code.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_OFFLOAD_FIRE, ATTR_OFFLOAD_REASON_CODE),
)
METRIC_OFFLOAD_PREDICTED_NET_SAVING: Final = MetricSpec(
    "seamscope.offload.predicted_net_saving",
    "counter",
    "{USD}",
    "Predicted net saving of fired offloads, in USD.",
    (ATTR_GEN_AI_REQUEST_MODEL,),
)
METRIC_OFFLOAD_REALIZED_SAVINGS: Final = MetricSpec(
    "seamscope.offload.realized_savings",
    "counter",
    "{USD}",
    "Realized savings of offloads and compactions in USD: each later model call that "
    "carried the stub (placeholder, summary), by mechanism.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_OFFLOAD_MECHANISM),
)
METRIC_OFFLOAD_REALIZED_COSTS: Final = MetricSpec(
    "seamscope.offload.realized_costs",
    "counter",
    "{USD}",
    "Realized costs of offloads and compactions in USD by kind (stub carry, recall, "
    "cache disruption, compaction call) and mechanism.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_OFFLOAD_COST_KIND, ATTR_OFFLOAD_MECHANISM),
)
METRIC_OFFLOAD_RECALLS: Final = MetricSpec(
    "seamscope.offload.recalls",
    "counter",
    "{recall}",
    "Recalls of offloaded tool outputs (re-reads of compacted data), by mechanism.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_OFFLOAD_MECHANISM),
)
METRIC_OFFLOAD_SETTLED: Final = MetricSpec(
    "seamscope.offload.settled",
    "counter",
    "{offload}",
    "Settled offloads and compactions by outcome (gain, loss, break_even) and mechanism.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_OFFLOAD_OUTCOME, ATTR_OFFLOAD_MECHANISM),
)
METRIC_OFFLOAD_SHADOW_DISAGREEMENTS: Final = MetricSpec(
    "seamscope.offload.shadow_disagreements",
    "counter",
    "{decision}",
    "Gate calls where the shadow configuration's verdict differs from the live one's.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_OFFLOAD_SHADOW_SAVINGS: Final = MetricSpec(
    "seamscope.offload.shadow.savings",
    "counter",
    "{USD}",
    "What the shadow configuration's offloads would have saved in USD on the "
    "conversations' real course (carries), counted when a conversation settles, by "
    "model, tool and basis (exact: fires either way; expected: only the shadow fires).",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME, ATTR_OFFLOAD_SHADOW_BASIS),
)
METRIC_OFFLOAD_SHADOW_COSTS: Final = MetricSpec(
    "seamscope.offload.shadow.costs",
    "counter",
    "{USD}",
    "What the shadow configuration's offloads would have cost in USD on the "
    "conversations' real course (stub carry, recalls, cache disruption; an expected "
    "recall hop where only the shadow fires), by model, tool and basis.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME, ATTR_OFFLOAD_SHADOW_BASIS),
)
METRIC_OFFLOAD_REMAINING_TURNS: Final = MetricSpec(
    "seamscope.offload.remaining_turns",
    "histogram",
    "{turn}",
    "Model calls that followed each settled offload of the gate in its conversation "
    "until it settled (the gate's horizon, realized), by model and tool; its count is "
    "the settled gate offloads (calibrate --prometheus).",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_OFFLOAD_RECALLED_OFFLOADS: Final = MetricSpec(
    "seamscope.offload.recalled_offloads",
    "counter",
    "{offload}",
    "Settled offloads of the gate that were recalled at least once, by model and tool.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_OFFLOAD_SETTLED_RECALLS: Final = MetricSpec(
    "seamscope.offload.settled_recalls",
    "counter",
    "{recall}",
    "Recalls of settled offloads of the gate, by model and tool (counted at settlement).",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_OFFLOAD_CARRIED_TURNS: Final = MetricSpec(
    "seamscope.offload.carried_turns",
    "counter",
    "{turn}",
    "Model calls that carried the stub of settled offloads of the gate (a recall ends "
    "the carry), by model and tool.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY: Final = MetricSpec(
    "seamscope.offload.prior_recall_probability",
    "counter",
    "{probability}",
    "The sum of the recall probability the gate decided with, over settled offloads of "
    "the gate, by model and tool (divided by their count: the mean prior that seeds "
    "calibrate's Beta posterior).",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_TOOL_NAME),
)
METRIC_MODEL_INPUT_TOKENS: Final = MetricSpec(
    "seamscope.model.input_tokens",
    "counter",
    "{token}",
    "Model input tokens by prompt-cache use and whether an offload is live.",
    (ATTR_GEN_AI_REQUEST_MODEL, ATTR_USAGE_CACHE, ATTR_OFFLOAD_ACTIVE),
)
METRIC_MIDDLEWARE_DECISIONS: Final = MetricSpec(
    "seamscope.middleware.decisions",
    "counter",
    "{decision}",
    "Decisions a framework's own middlewares took, by middleware and kind.",
    (ATTR_MIDDLEWARE_NAME, ATTR_MIDDLEWARE_DECISION),
)
METRIC_OFFLOAD_STORE_ERRORS: Final = MetricSpec(
    "seamscope.offload.store_errors",
    "counter",
    "{error}",
    "Offload store calls that failed (down, slow, full), by operation and error.type: "
    "a failed put made no offload, a failed recall told the agent to retry.",
    (ATTR_OFFLOAD_STORE_OPERATION, ATTR_ERROR_TYPE),
)
METRIC_MIDDLEWARE_COST: Final = MetricSpec(
    "seamscope.middleware.cost",
    "counter",
    "{USD}",
    "What framework middlewares' own model calls (selector, router, risk check, summary) "
    "cost in USD, by middleware and decision model.",
    (ATTR_MIDDLEWARE_NAME, ATTR_GEN_AI_REQUEST_MODEL),
)
METRIC_DECISION_DURATION: Final = MetricSpec(
    "seamscope.decision.duration",
    "histogram",
    "s",
    "Duration of one decision (pipeline, seam, gate), in seconds. Opt-in "
    "(TelemetryConfig.decision_duration_metric): the collector's spanmetrics derive it.",
    (ATTR_DECISION_KIND,),
)

METRICS: Final = (
    METRIC_POLICY_EVALUATIONS,
    METRIC_POLICY_WINS,
    METRIC_REDIRECTS,
    METRIC_SELECTION_TOOLS,
    METRIC_STAGE_OUTCOMES,
    METRIC_OFFLOAD_DECISIONS,
    METRIC_OFFLOAD_PREDICTED_NET_SAVING,
    METRIC_OFFLOAD_REALIZED_SAVINGS,
    METRIC_OFFLOAD_REALIZED_COSTS,
    METRIC_OFFLOAD_RECALLS,
    METRIC_OFFLOAD_SETTLED,
    METRIC_OFFLOAD_SHADOW_DISAGREEMENTS,
    METRIC_OFFLOAD_SHADOW_SAVINGS,
    METRIC_OFFLOAD_SHADOW_COSTS,
    METRIC_OFFLOAD_REMAINING_TURNS,
    METRIC_OFFLOAD_RECALLED_OFFLOADS,
    METRIC_OFFLOAD_SETTLED_RECALLS,
    METRIC_OFFLOAD_CARRIED_TURNS,
    METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY,
    METRIC_MODEL_INPUT_TOKENS,
    METRIC_OFFLOAD_STORE_ERRORS,
    METRIC_MIDDLEWARE_DECISIONS,
    METRIC_MIDDLEWARE_COST,
    METRIC_DECISION_DURATION,
)

DECISION_DURATION_BUCKETS: Final = (
    0.000005,
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
)
"""Explicit bucket boundaries (seconds) of :data:`METRIC_DECISION_DURATION`."""

REMAINING_TURNS_BUCKETS: Final = (*range(0, 33), 40, 48, 64, 96, 128, 256)
"""Explicit bucket boundaries (turns) of :data:`METRIC_OFFLOAD_REMAINING_TURNS`: one
per whole turn up to 32, so the distribution (median, p10, p90) of up to 32 turns
is exact from the bucket counts; coarser above."""


def render_markdown() -> str:
    """The reference table of every name, as committed in docs/semantic-conventions.md."""
    import sys

    from seamscope.telemetry._reference import render

    return render(sys.modules[__name__])


if __name__ == "__main__":
    print(render_markdown(), end="")
