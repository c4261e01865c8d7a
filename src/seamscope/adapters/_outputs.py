"""Offloaded tool outputs as an adapter sees them, in an offload store.

Shared by every adapter that keeps offloaded content itself (LangChain, the
OpenAI Agents SDK, pydantic-ai). The content, the records and the accounts
live in the store (:class:`~seamscope.decisions.OffloadStore`): any worker
answers a recall, prices the stubs a prompt carries, and keeps stubbing the
outputs the store holds. A recall reads only its own conversation's outputs.
"""

from __future__ import annotations

import datetime
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from seamscope._internal import record_error
from seamscope.decisions import OffloadStore
from seamscope.decisions.records import CarriedStub, RecallStatus, StoredOffload
from seamscope.loop import RECALL_TOOL, estimate_tokens
from seamscope.telemetry import conventions as c

__all__ = [
    "Offloaded",
    "Outputs",
    "RecallOutcome",
    "StubScan",
    "adapter_store",
    "recall_answer",
    "stub_id",
]

_log = logging.getLogger("seamscope.adapters")
_STUB = re.compile(r"^\[offloaded (\S+): ")
_MAX_RECORDS = 4096
_MAX_OUTCOMES = 1024


def stub_id(text: object) -> str | None:
    """The offload id a stub names, when ``text`` is one of seamscope's stubs."""
    if not isinstance(text, str):
        return None
    found = _STUB.match(text)
    return None if found is None else found.group(1)


class StubScan:
    """What a prompt holds of seamscope's stubs, read call by call and answer
    by answer in the prompt's order: the offload ids whose stub it holds (in
    order) and those of them a recall in the same prompt brought back."""

    __slots__ = ("_asked", "_back", "_found")

    def __init__(self) -> None:
        self._found: list[str] = []
        self._asked: dict[str, str] = {}
        self._back: set[str] = set()

    def recall(self, call_id: str, offload_id: str) -> None:
        """A call of the recall tool, asking for ``offload_id``."""
        self._asked[call_id] = offload_id

    def answer(
        self, call_id: str, text: Any, *, recall: bool = False, failed: bool = False
    ) -> None:
        """A tool's answer to call ``call_id`` (``recall``: the recall tool's,
        by its name; ``failed``: the framework marks it an error): a stub held,
        or a recall that brought its output back."""
        asked = self._asked.get(call_id)
        if not recall and asked is None:
            offload_id = stub_id(text)
            if offload_id is not None:
                self._found.append(offload_id)
        elif (
            asked is not None
            and not failed
            and not (isinstance(text, str) and text.startswith("error:"))
        ):
            self._back.add(asked)

    def result(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The offload ids held, and those of them brought back."""
        ids = tuple(dict.fromkeys(self._found))
        return ids, tuple(o for o in ids if o in self._back)


@dataclass(frozen=True, slots=True)
class Offloaded:
    """A fired offload the conversation carries: its id and the stub that
    replaced the output."""

    offload_id: str
    stub: str


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """What one recall call got from the store: the status, the content's
    size when found (chars / 4), the error type when the store failed."""

    offload_id: str
    status: RecallStatus | None
    tokens: float = 0.0
    error_type: str | None = None


def _when(moment: float | None) -> str:
    if moment is None:
        return "an unknown time"
    stamp = datetime.datetime.fromtimestamp(moment, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def recall_answer(offload_id: str, status: RecallStatus, gone_at: float | None = None) -> str:
    """What the recall tool tells the agent when there is no content."""
    if status is RecallStatus.EXPIRED:
        return (
            f"error: the offloaded output {offload_id!r} expired at {_when(gone_at)} "
            "(its retention ended); run the tool again if you still need it"
        )
    if status is RecallStatus.EVICTED:
        return (
            f"error: the offloaded output {offload_id!r} was dropped at {_when(gone_at)} "
            "(the offload store's size bound); run the tool again if you still need it"
        )
    return f"error: no offloaded output {offload_id!r} in this conversation"


class Outputs:
    """One adapter's view of an offload store: recall answers (their outcome
    kept by call id for the accounting step after the tool), the records of
    the stubs a prompt carries (records never change: each is read from the
    store once per process), and the outputs the store holds for a
    conversation."""

    def __init__(self, store: OffloadStore, *, observer: object = None) -> None:
        self.store = store
        self._observer = observer
        self._records: OrderedDict[str, StoredOffload] = OrderedDict()
        self._outcomes: OrderedDict[str, RecallOutcome] = OrderedDict()
        self._lock = threading.Lock()

    def _failed(self, operation: str, exc: BaseException) -> None:
        _log.warning(
            "offload store %s failed (%s): contained, not raised into the loop",
            operation,
            type(exc).__qualname__,
        )
        hook = getattr(self._observer, "on_store_failed", None)
        if hook is not None:
            try:
                hook(operation, type(exc).__qualname__)
            except Exception:
                pass

    # -- recalls -------------------------------------------------------------------

    def answer(self, scope: str | None, call_id: str | None, offload_id: str) -> str:
        """What the recall tool answers: the whole output, or why not (an error
        the agent can read: unknown, expired or dropped, with when; the store
        not answering, to be retried). The outcome is kept under ``call_id``
        for :meth:`outcome`; a failed recall marks the current span (the
        recall's ``execute_tool``) as an error."""
        status: RecallStatus | None
        try:
            got = self.store.recall(scope, offload_id) if scope is not None else None
        except Exception as exc:
            self._failed("recall", exc)
            error = type(exc).__qualname__
            self._keep(call_id, RecallOutcome(offload_id, None, error_type=error))
            record_error(trace.get_current_span(), error)
            return (
                f"error: the offload store did not answer ({error}); the output is "
                f"kept: call {RECALL_TOOL} again"
            )
        if got is not None and got.status is RecallStatus.FOUND and got.content is not None:
            status = RecallStatus.FOUND
            self._keep(call_id, RecallOutcome(offload_id, status, estimate_tokens(got.content)))
            return got.content
        status = RecallStatus.UNKNOWN if got is None else got.status
        self._keep(call_id, RecallOutcome(offload_id, status))
        record_error(
            trace.get_current_span(),
            {
                RecallStatus.EXPIRED: c.RECALL_EXPIRED,
                RecallStatus.EVICTED: c.RECALL_EVICTED,
            }.get(status, c.RECALL_UNKNOWN),
        )
        return recall_answer(offload_id, status, None if got is None else got.gone_at)

    def _keep(self, call_id: str | None, outcome: RecallOutcome) -> None:
        if not call_id:
            return
        with self._lock:
            self._outcomes[call_id] = outcome
            while len(self._outcomes) > _MAX_OUTCOMES:
                self._outcomes.popitem(last=False)

    def failed_recall(self, call_id: str) -> str | None:
        """The ``error.type`` of the recall call ``call_id`` answered here when it
        found nothing (for an adapter whose tool runs outside its span), else None."""
        with self._lock:
            outcome = self._outcomes.get(call_id)
        if outcome is None or outcome.status is RecallStatus.FOUND:
            return None
        if outcome.error_type is not None:
            return outcome.error_type
        return {
            RecallStatus.EXPIRED: c.RECALL_EXPIRED,
            RecallStatus.EVICTED: c.RECALL_EVICTED,
        }.get(outcome.status or RecallStatus.UNKNOWN, c.RECALL_UNKNOWN)

    def outcome(self, call_id: str) -> RecallOutcome | None:
        """The outcome of the recall call ``call_id`` answered here (once)."""
        with self._lock:
            return self._outcomes.pop(call_id, None)

    def get(self, offload_id: str, scope: str | None = None) -> str | None:
        """The full text of an offloaded output the store still holds (of the
        conversation ``scope``; None: the conversation this process saw it in)."""
        if scope is None:
            with self._lock:
                record = self._records.get(offload_id)
            if record is None:
                return None
            scope = record.conversation_id
        try:
            got = self.store.recall(scope, offload_id)
        except Exception as exc:
            self._failed("recall", exc)
            return None
        return got.content if got.status is RecallStatus.FOUND else None

    # -- what a prompt carries -------------------------------------------------------

    def remember(self, record: StoredOffload) -> None:
        with self._lock:
            self._records[record.offload_id] = record
            while len(self._records) > _MAX_RECORDS:
                self._records.popitem(last=False)

    def keep(self, record: StoredOffload, content: str) -> tuple[str, ...] | None:
        """Write a record the adapter made itself (a framework's compaction)
        to the store, with ``content``: the ids the store's size bound dropped
        to make room, or None when the store failed (contained)."""
        try:
            dropped = tuple(self.store.put(record, content))
        except Exception as exc:
            self._failed("put", exc)
            return None
        self.remember(record)
        return dropped

    def compactions(
        self, scope: str, mechanism: str, call_ids: Iterable[str]
    ) -> dict[str, StoredOffload | None]:
        """By call id, the store's record of the compaction ``mechanism`` made of
        that call's result (``{mechanism}:{call id}``; None: the store has none)."""
        ids = {f"{mechanism}:{call_id}": call_id for call_id in call_ids}
        records = self.records(scope, ids)
        return {call_id: records.get(compaction_id) for compaction_id, call_id in ids.items()}

    def records(self, scope: str, offload_ids: Iterable[str]) -> dict[str, StoredOffload]:
        """The store's records of these offloads of the conversation (one round
        trip for the ones this process has not seen yet)."""
        wanted = list(dict.fromkeys(offload_ids))
        found: dict[str, StoredOffload] = {}
        missing: list[str] = []
        with self._lock:
            for offload_id in wanted:
                record = self._records.get(offload_id)
                if record is not None and record.conversation_id == scope:
                    found[offload_id] = record
                else:
                    missing.append(offload_id)
        if missing:
            try:
                fetched = self.store.lookup(scope, missing)
            except Exception as exc:
                self._failed("lookup", exc)
                fetched = {}
            for record in fetched.values():
                self.remember(record)
            found.update(fetched)
        return found

    def carried(
        self, scope: str | None, stubs: Iterable[str], recalled: Iterable[str] = ()
    ) -> tuple[tuple[str | CarriedStub, ...], tuple[CarriedStub, ...]]:
        """What a prompt carries, for the ledger: each stub it holds (offload ids,
        in order) as a :class:`CarriedStub` with its store record (an id the
        store does not know stays a bare id), minus the ``recalled`` ones,
        which come back second (present, not carried)."""
        stubs = tuple(dict.fromkeys(stubs))
        if not stubs:
            return (), ()
        back = set(recalled)
        records = {} if scope is None else self.records(scope, stubs)
        carried: list[str | CarriedStub] = []
        present: list[CarriedStub] = []
        for offload_id in stubs:
            record = records.get(offload_id)
            item: str | CarriedStub = offload_id
            if record is not None:
                item = CarriedStub(offload_id, record.output_tokens, record.stub_tokens, record)
            if offload_id not in back:
                carried.append(item)
            elif isinstance(item, CarriedStub):
                present.append(item)
        return tuple(carried), tuple(present)

    def held(self, scope: str | None) -> Mapping[str, Offloaded]:
        """The conversation's offloads the store holds, by the call id whose
        output each replaces (one round trip; empty when the store fails)."""
        if scope is None:
            return {}
        try:
            records = self.store.offloads(scope)
        except Exception as exc:
            self._failed("offloads", exc)
            return {}
        for record in records:
            self.remember(record)
        return {r.call_id: Offloaded(r.offload_id, r.stub) for r in records}


def adapter_store(owner: str, layer: Any, store: object, max_items: int | None) -> OffloadStore:
    """The offload store an adapter keeps its outputs in: the one it was given
    (a store or a URL), else the layer's; ``max_items`` (an adapter's older
    ``max_stored_outputs``) bounds an in-memory store of its own when the
    layer's is the in-memory default."""
    from seamscope.loop._layer import resolve_store
    from seamscope.stores import MemoryStore

    if store is not None:
        return resolve_store(owner, store)
    chosen: OffloadStore = layer.offload_store
    if max_items is not None and isinstance(chosen, MemoryStore):
        return MemoryStore(max_items=max_items)
    return chosen
