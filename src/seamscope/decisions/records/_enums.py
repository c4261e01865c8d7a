"""The closed value sets of the decision records (span and metric attribute
values; a test pins every member)."""

from __future__ import annotations

import enum

__all__ = [
    "Seam",
    "WinnerSource",
    "PolicyResult",
    "GuardResult",
    "PaletteVerdict",
    "StageOutcomeKind",
    "OffloadReasonCode",
    "PricingSource",
    "PriorSource",
    "OffloadOutcome",
    "OffloadCostKind",
    "OffloadMechanism",
    "MiddlewareDecisionKind",
    "SettleTrigger",
    "RecallStatus",
]


class Seam(enum.StrEnum):
    """The two seams of a ReAct iteration (``seamscope.seam``)."""

    PRE_MODEL = "pre_model"
    POST_MODEL = "post_model"


class WinnerSource(enum.StrEnum):
    """Who decided a seam (``seamscope.seam.winner_source``).

    PRE seam: ``policy`` / ``resolver`` / ``default``, or for a framework
    middleware's model choice ``router`` / ``fallback``. A POST-seam dispatch:
    ``policy`` (a policy rewrote it), ``adopter`` (the adopter's
    ``on_tool_call_dispatch`` changed it), ``none`` (it dispatched as emitted).
    """

    POLICY = "policy"
    RESOLVER = "resolver"
    DEFAULT = "default"
    ADOPTER = "adopter"
    NONE = "none"
    ROUTER = "router"
    FALLBACK = "fallback"


class PolicyResult(enum.StrEnum):
    """Result of evaluating one policy at one seam (``seamscope.policy.result``).

    ``skipped`` means the policy does not apply at that seam (no ``model`` at
    PRE, no ``redirect_to`` or a ``when_tool`` that does not match at POST), so
    its predicate was not called.
    """

    MATCHED = "matched"
    NOT_MATCHED = "not_matched"
    SKIPPED = "skipped"
    ERROR = "error"


class GuardResult(enum.StrEnum):
    """The guard's verdict on the winning redirect (``seamscope.dispatch.guard``)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NONE = "none"


class PaletteVerdict(enum.StrEnum):
    """The palette gate's verdict (``seamscope.dispatch.palette_gate``).

    ``kept``: the call dispatches to its (possibly rewritten) target.
    ``dropped``: the rewrite targeted a tool not routed this turn; it was
    dropped and the original call dispatched.
    """

    KEPT = "kept"
    DROPPED = "dropped"


class StageOutcomeKind(enum.StrEnum):
    """A selection stage's outcome (``seamscope.stage.outcome``)."""

    SELECT = "select"
    ABSTAIN = "abstain"


class OffloadReasonCode(enum.StrEnum):
    """Why the offload gate fired or not (``seamscope.offload.reason_code``)."""

    BELOW_THRESHOLD = "below_threshold"
    UNPRICED_MODEL = "unpriced_model"
    NET_POSITIVE = "net_positive"
    NET_NOT_POSITIVE = "net_not_positive"
    STORE_FAILED = "store_failed"
    """The gate's verdict was to fire, but the offload store did not keep the
    content (down, slow, full): no offload was made, the output stays in the
    prompt."""


class PriorSource(enum.StrEnum):
    """Where the gate's horizon and recall prior came from
    (``seamscope.offload.prior_source``): its own configuration, or a
    calibrated priors file with enough evidence for the (tool, model)."""

    DEFAULT = "default"
    CALIBRATED = "calibrated"


class PricingSource(enum.StrEnum):
    """Which table priced a model (``seamscope.offload.pricing_source``).

    ``symfonic``: symfonic-core's own table priced a decision seamscope
    recorded from that framework.
    """

    OVERRIDE = "override"
    GENAI_PRICES = "genai-prices"
    SYMFONIC = "symfonic"
    NONE = "none"


class OffloadOutcome(enum.StrEnum):
    """A settled offload's outcome (``seamscope.offload.outcome``): its exact
    realized net saving is positive (``gain``), negative (``loss``) or exactly
    zero (``break_even``)."""

    GAIN = "gain"
    LOSS = "loss"
    BREAK_EVEN = "break_even"


class OffloadCostKind(enum.StrEnum):
    """What a realized offload cost was spent on (``seamscope.offload.cost_kind``)."""

    STUB_CARRY = "stub_carry"
    RECALL = "recall"
    CACHE_DISRUPTION = "cache_disruption"
    COMPACTION_CALL = "compaction_call"


class OffloadMechanism(enum.StrEnum):
    """What took content out of the prompt (``seamscope.offload.mechanism``):
    seamscope's offload gate, or a framework's compaction the ledger prices
    the same way (a recall is then the model re-reading cleared data)."""

    SEAMSCOPE_GATE = "seamscope_gate"
    CONTEXT_EDITING = "context_editing"
    SUMMARIZATION = "summarization"
    TOOL_OUTPUT_TRIMMER = "tool_output_trimmer"
    """The Agents SDK's ``ToolOutputTrimmer`` replaced an old tool output by a preview."""
    DEEPAGENTS_EVICTION = "deepagents_eviction"
    """Deep Agents' ``FilesystemMiddleware`` wrote a large tool result to its
    backend and replaced it by a head-and-tail preview and the file's path."""
    STRANDS_CONTEXT_OFFLOAD = "strands_context_offload"
    """Strands' ``ContextOffloader`` stored a large tool result and replaced it
    by a preview and its storage references."""


class MiddlewareDecisionKind(enum.StrEnum):
    """What a framework's own middleware decided (``seamscope.middleware.decision``)."""

    TOOL_SELECTION = "tool_selection"
    TOOL_SEARCH = "tool_search"
    MODEL_ROUTE = "model_route"
    MODEL_FALLBACK = "model_fallback"
    TOOL_CALL_BLOCKED = "tool_call_blocked"
    COMPACTION = "compaction"


class SettleTrigger(enum.StrEnum):
    """What settled an offload (``seamscope.offload.settle_trigger``)."""

    CONVERSATION_END = "conversation_end"
    EXPLICIT = "explicit"
    IDLE = "idle"
    EVICTED = "evicted"
    EXPIRED = "expired"
    """The offload store's retention (its TTL) ended for the output."""


class RecallStatus(enum.StrEnum):
    """What an offload store answered for a recall."""

    FOUND = "found"
    EXPIRED = "expired"
    """Past the store's TTL: the content is gone (said with when)."""
    EVICTED = "evicted"
    """Dropped by the store's size bound (said with when)."""
    UNKNOWN = "unknown"
    """No such offload in this conversation (another conversation's id included)."""
