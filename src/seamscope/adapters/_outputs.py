"""The offloaded tool outputs an adapter keeps for its recall tool and stubs.

Shared by the OpenAI Agents SDK and pydantic-ai adapters: a fired offload's
full output stays in this process, keyed by offload id, readable only from
the scope (conversation or run) that offloaded it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Offloaded", "Outputs"]


@dataclass(frozen=True, slots=True)
class Offloaded:
    """A fired offload the conversation carries: its id and the stub that
    replaced the output."""

    offload_id: str
    stub: str


class Outputs:
    """Offloaded outputs kept in this process, by offload id, each with the
    scope (conversation or run) allowed to read it and the call it answered;
    oldest dropped first. A dropped output is no longer stubbed nor
    recallable."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        # offload id -> (scope, call id, text, stub)
        self._store: OrderedDict[str, tuple[str, str, str, str]] = OrderedDict()
        self._expanded: set[str] = set()
        self._lock = threading.Lock()

    def keep(self, offload_id: str, scope: str, call_id: str, text: str, stub: str) -> None:
        with self._lock:
            self._store[offload_id] = (scope, call_id, text, stub)
            while len(self._store) > self._limit:
                evicted, _ = self._store.popitem(last=False)
                self._expanded.discard(evicted)

    def get(self, offload_id: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return None if entry is None else entry[2]

    def has(self, scope: str) -> bool:
        with self._lock:
            return any(entry[0] == scope for entry in self._store.values())

    def lookup(self, offload_id: str, scope: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return entry[2] if entry is not None and entry[0] == scope else None

    def offloaded(self, scope: str) -> Mapping[str, Offloaded]:
        """The scope's offloads by the call id whose output they replace."""
        with self._lock:
            return {
                call_id: Offloaded(offload_id, stub)
                for offload_id, (owner, call_id, _, stub) in self._store.items()
                if owner == scope
            }

    def expand(self, offload_id: str) -> None:
        """A recall brought the full output back into the conversation."""
        with self._lock:
            if offload_id in self._store:
                self._expanded.add(offload_id)

    def expanded(self, offload_id: str) -> bool:
        with self._lock:
            return offload_id in self._expanded
