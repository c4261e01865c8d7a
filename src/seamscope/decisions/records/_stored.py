"""The records an offload store keeps and answers (see
:class:`~seamscope.decisions.OffloadStore`): values, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from seamscope.decisions.records._enums import RecallStatus
from seamscope.decisions.records._values import _ZERO

__all__ = ["AccountDelta", "AccountTotals", "ClaimedOffload", "Recalled", "StoredOffload"]


@dataclass(frozen=True, slots=True)
class StoredOffload:
    """One fired offload as a store keeps it, beside its content.

    ``output_tokens`` and ``stub_tokens``: the output's and the stub's sizes
    (chars / 4, the one token estimator); ``stub``: the text that replaced
    the output in the prompt; ``call_id``: the tool call whose output it
    was. The prediction (``predicted_net_saving`` exact USD, ``horizon``,
    ``recall_probability``) is the gate's. ``created_at``/``expires_at``:
    Unix seconds; ``expires_at`` None: kept until the store's size bound
    drops it.
    """

    offload_id: str
    conversation_id: str
    call_id: str
    tool_name: str
    model: str
    stub: str
    output_tokens: float
    stub_tokens: float
    predicted_net_saving: Decimal
    horizon: int
    recall_probability: float
    created_at: float
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class AccountDelta:
    """What one event (a model call, a recall) realized for one offload,
    written by the worker that saw the event (exact USD, counts)."""

    offload_id: str
    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    recall_cost: Decimal = _ZERO
    cache_cost: Decimal = _ZERO
    turns: int = 0
    recalls: int = 0
    remaining: int = 0


@dataclass(frozen=True, slots=True)
class AccountTotals:
    """An offload's realized accounts summed over every worker's deltas."""

    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    recall_cost: Decimal = _ZERO
    cache_cost: Decimal = _ZERO
    turns: int = 0
    recalls: int = 0
    remaining: int = 0

    def plus(self, delta: AccountDelta) -> AccountTotals:
        return AccountTotals(
            self.savings + delta.savings,
            self.stub_cost + delta.stub_cost,
            self.recall_cost + delta.recall_cost,
            self.cache_cost + delta.cache_cost,
            self.turns + delta.turns,
            self.recalls + delta.recalls,
            self.remaining + delta.remaining,
        )


@dataclass(frozen=True, slots=True)
class ClaimedOffload:
    """An offload this caller claimed for settlement (no other caller ever
    gets it): its record and its whole history's accounts."""

    offload: StoredOffload
    totals: AccountTotals


@dataclass(frozen=True, slots=True)
class Recalled:
    """A store's answer to a recall: the content when ``status`` is FOUND,
    else when it was dropped (``gone_at``, Unix seconds) if it was."""

    status: RecallStatus
    content: str | None = None
    gone_at: float | None = None
