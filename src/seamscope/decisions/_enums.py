"""Closed value sets of the decision core.

They are part of the telemetry contract too (span attribute values, metric
attribute values) and are re-exported by :mod:`seamscope.telemetry.conventions`.
A test pins every member: changing one is a contract change.
"""

from __future__ import annotations

import enum

__all__ = [
    "CacheUsage",
    "DecisionKind",
    "GuardResult",
    "OffloadCostKind",
    "OffloadOutcome",
    "OffloadReasonCode",
    "PaletteVerdict",
    "PolicyResult",
    "PricingSource",
    "Seam",
    "SelectionSet",
    "SettleTrigger",
    "StageOutcomeKind",
    "WinnerSource",
]


class Seam(enum.StrEnum):
    """The two seams of a ReAct iteration (``seamscope.seam``)."""

    PRE_MODEL = "pre_model"
    POST_MODEL = "post_model"


class WinnerSource(enum.StrEnum):
    """Who decided a seam (``seamscope.seam.winner_source``).

    PRE seam: ``policy`` / ``resolver`` / ``default``. A POST-seam dispatch:
    ``policy`` (a policy rewrote it), ``adopter`` (the adopter's
    ``on_tool_call_dispatch`` changed it), ``none`` (it dispatched as emitted).
    """

    POLICY = "policy"
    RESOLVER = "resolver"
    DEFAULT = "default"
    ADOPTER = "adopter"
    NONE = "none"


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


class SelectionSet(enum.StrEnum):
    """Which set of tools a count is about (``seamscope.selection.set``)."""

    OFFERED = "offered"
    SELECTED = "selected"


class OffloadReasonCode(enum.StrEnum):
    """Why the offload gate fired or not (``seamscope.offload.reason_code``)."""

    BELOW_THRESHOLD = "below_threshold"
    UNPRICED_MODEL = "unpriced_model"
    NET_POSITIVE = "net_positive"
    NET_NOT_POSITIVE = "net_not_positive"


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
    """A settled offload's outcome (``seamscope.offload.outcome``)."""

    GAIN = "gain"
    LOSS = "loss"


class OffloadCostKind(enum.StrEnum):
    """What a realized offload cost was spent on (``seamscope.offload.cost_kind``)."""

    STUB_CARRY = "stub_carry"
    RECALL = "recall"
    CACHE_DISRUPTION = "cache_disruption"


class SettleTrigger(enum.StrEnum):
    """What settled an offload (``seamscope.offload.settle_trigger``)."""

    CONVERSATION_END = "conversation_end"
    EXPLICIT = "explicit"
    IDLE = "idle"
    EVICTED = "evicted"


class CacheUsage(enum.StrEnum):
    """How a model call's input tokens met the prompt cache (``seamscope.usage.cache``)."""

    READ = "read"
    WRITE = "write"
    UNCACHED = "uncached"


class DecisionKind(enum.StrEnum):
    """Which decision a duration measures (``seamscope.decision.kind``)."""

    SELECT_TOOLS = "select_tools"
    STAGE = "stage"
    PRE_MODEL = "pre_model"
    POST_MODEL = "post_model"
    DISPATCH = "dispatch"
    OFFLOAD_GATE = "offload_gate"
