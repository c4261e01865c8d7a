"""The in-memory offload store: one process, the default."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from seamscope.decisions.records import (
    AccountDelta,
    AccountTotals,
    ClaimedOffload,
    Recalled,
    RecallStatus,
    StoredOffload,
)
from seamscope.stores._checks import check_clock, check_limit, check_ttl, stamped

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Entry:
    offload: StoredOffload
    content: str | None
    active: float
    totals: AccountTotals = field(default_factory=AccountTotals)
    gone: RecallStatus | None = None
    gone_at: float | None = None
    claimed: bool = False


class MemoryStore:
    """Offloads kept in this process (lost when it exits): for one process and
    tests. Retention: at most ``max_items`` contents held (the oldest dropped
    first, said to a recall as evicted), each for ``ttl_seconds`` (None: no
    TTL). A dropped output's record stays (a recall is told when it went),
    at most ``max_items`` such records (the oldest forgotten first).
    Thread-safe; never blocks on I/O."""

    shared = False

    def __init__(
        self,
        *,
        max_items: int = 256,
        ttl_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_items = check_limit("MemoryStore", "max_items", max_items)
        self.ttl_seconds = check_ttl("MemoryStore", ttl_seconds)
        self._clock = check_clock("MemoryStore", clock)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore(max_items={self.max_items}, ttl_seconds={self.ttl_seconds})"

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        now = self._clock()
        offload = stamped(offload, self.ttl_seconds)
        evicted: list[str] = []
        with self._lock:
            old = self._entries.pop(offload.offload_id, None)
            if old is not None and old.content is not None:
                self._held -= 1
            self._entries[offload.offload_id] = _Entry(offload, content, now)
            self._held += 1
            for key, entry in self._entries.items():
                if self._held <= self.max_items:
                    break
                if entry.content is not None:
                    entry.content, entry.gone, entry.gone_at = None, RecallStatus.EVICTED, now
                    self._held -= 1
                    evicted.append(key)
            self._forget()
        return tuple(evicted)

    def _forget(self) -> None:
        """Drop the oldest records whose content is gone beyond ``max_items`` of
        them (settled or not: a process-local store is settled by its own ledger,
        which never claims from it), so the store holds at most twice its bound."""
        if len(self._entries) <= 2 * self.max_items:
            return
        gone = [k for k, e in self._entries.items() if e.content is None]
        for key in gone[: max(0, len(gone) - self.max_items)]:
            del self._entries[key]

    def _expire(self, entry: _Entry, now: float) -> None:
        expires = entry.offload.expires_at
        if entry.content is not None and expires is not None and expires <= now:
            entry.content, entry.gone, entry.gone_at = None, RecallStatus.EXPIRED, expires
            self._held -= 1

    def recall(self, conversation_id: str, offload_id: str) -> Recalled:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(offload_id)
            if entry is None or entry.offload.conversation_id != conversation_id:
                return Recalled(RecallStatus.UNKNOWN)
            self._expire(entry, now)
            if entry.content is None:
                return Recalled(entry.gone or RecallStatus.UNKNOWN, None, entry.gone_at)
            return Recalled(RecallStatus.FOUND, entry.content)

    def offloads(self, conversation_id: str) -> Sequence[StoredOffload]:
        now = self._clock()
        with self._lock:
            held = []
            for entry in self._entries.values():
                if entry.offload.conversation_id == conversation_id:
                    self._expire(entry, now)
                    if entry.content is not None:
                        held.append(entry.offload)
            return held

    def lookup(
        self, conversation_id: str, offload_ids: Iterable[str]
    ) -> Mapping[str, StoredOffload]:
        with self._lock:
            found = {}
            for offload_id in offload_ids:
                entry = self._entries.get(offload_id)
                if entry is not None and entry.offload.conversation_id == conversation_id:
                    found[offload_id] = entry.offload
            return found

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        now = self._clock()
        with self._lock:
            for delta in deltas:
                entry = self._entries.get(delta.offload_id)
                if entry is not None:
                    entry.totals = entry.totals.plus(delta)
                    entry.active = now

    def claim(self, offload_id: str) -> ClaimedOffload | None:
        with self._lock:
            entry = self._entries.get(offload_id)
            if entry is None or entry.claimed:
                return None
            entry.claimed = True
            return ClaimedOffload(entry.offload, entry.totals)

    def due(self, *, idle_since: float, now: float, limit: int = 100) -> Sequence[str]:
        with self._lock:
            found: list[str] = []
            for key, entry in self._entries.items():
                if len(found) >= limit:
                    break
                expires = entry.offload.expires_at
                if not entry.claimed and (
                    entry.active < idle_since or (expires is not None and expires <= now)
                ):
                    found.append(key)
            return found

    def close(self) -> None:
        return None
