"""The offload store interface: where fired offloads live, beyond any one process.

In production one conversation's turns are served by several worker
processes and workers restart at every deploy, so a fired offload is a
record in a store, not in a process. A store keeps, per offload, its
content, its :class:`~seamscope.decisions.records.StoredOffload` record (the
stub, the conversation, the tool, the model, the gate's prediction) and its
running realized accounts (:class:`~seamscope.decisions.records.AccountDelta`
appended by whichever worker saw the event), and answers recalls. The core
is handed a store; the implementations (memory, SQLite, Redis, LangGraph's
``BaseStore``) live in :mod:`seamscope.stores`.

Rules every implementation keeps (:mod:`seamscope.stores` tests them all
against real servers):

* a recall reads only its own conversation's outputs: another
  conversation's offload id answers :attr:`RecallStatus.UNKNOWN
  <seamscope.decisions.records.RecallStatus.UNKNOWN>`, as an unknown id does;
* retention is explicit: past its ``expires_at`` (the store's TTL) or once
  the store's size bound dropped it, a recall answers EXPIRED or EVICTED
  with when, for as long as the store keeps the record;
* :meth:`OffloadStore.claim` hands an offload to exactly one caller, ever,
  fleet-wide, with the sum of every delta written for it (exact Decimal);
* a method that cannot answer within the store's timeout raises (the caller
  contains it: the loop never breaks and never waits longer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from seamscope.decisions.records import AccountDelta, ClaimedOffload, Recalled, StoredOffload

__all__ = ["OffloadStore"]


@runtime_checkable
class OffloadStore(Protocol):
    """Where fired offloads, their content and their accounts live."""

    @property
    def shared(self) -> bool:
        """True when other processes see this store (SQLite, Redis, a shared
        LangGraph store): the ledger then keeps its accounts here and settles
        through :meth:`claim`; False for a store of this process alone."""
        ...

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        """Keep a fired offload and its content. Returns the ids of offloads
        the size bound dropped to make room (their content is gone; their
        records stay until settled). Raises when the content was not kept."""
        ...

    def recall(self, conversation_id: str, offload_id: str) -> Recalled:
        """The content of one of the conversation's offloads, or why not."""
        ...

    def offloads(self, conversation_id: str) -> Sequence[StoredOffload]:
        """The conversation's offloads whose content is held, oldest first."""
        ...

    def lookup(
        self, conversation_id: str, offload_ids: Iterable[str]
    ) -> Mapping[str, StoredOffload]:
        """The records of the given offloads of the conversation (held, expired
        or evicted alike: their terms price the stubs still carried)."""
        ...

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        """Append realized amounts to offloads' accounts (one round trip) and
        mark them active now."""
        ...

    def claim(self, offload_id: str) -> ClaimedOffload | None:
        """Claim an offload for settlement: its record and summed accounts the
        first time any caller asks, None ever after (or for an unknown id)."""
        ...

    def due(self, *, idle_since: float, now: float, limit: int = 100) -> Sequence[str]:
        """Unclaimed offloads to settle: no activity since ``idle_since``, or
        whose retention ended by ``now`` (Unix seconds); at most ``limit``."""
        ...

    def close(self) -> None:
        """Release connections (the data stays)."""
        ...
