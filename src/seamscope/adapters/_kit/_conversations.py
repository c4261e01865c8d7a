"""What an adapter remembers per conversation, for a bounded number of them.

A compaction recorded once per conversation (context editing, a trimmer, an
eviction), the gate's decisions waiting for the state update that writes
them: each adapter keeps such a record per conversation (its scope), and at
most ``limit`` conversations, the least recently used forgotten first.
:class:`Conversations` is that map, one lock around it; what a record holds
is the adapter's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["Conversations"]

T = TypeVar("T")


class Conversations(Generic[T]):
    """Per conversation (scope), a record made by ``new`` when first needed;
    at most ``limit`` conversations (the least recently used dropped first)."""

    __slots__ = ("_kept", "_limit", "_lock", "_new")

    def __init__(self, limit: int, new: Callable[[], T]) -> None:
        self._limit = limit
        self._new = new
        self._kept: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def of(self, scope: str) -> Iterator[T]:
        """The conversation's record (made when absent), under the lock."""
        with self._lock:
            kept = self._kept.get(scope)
            if kept is None:
                kept = self._kept[scope] = self._new()
                while len(self._kept) > self._limit:
                    self._kept.popitem(last=False)
            else:
                self._kept.move_to_end(scope)
            yield kept

    @contextmanager
    def existing(self, scope: str) -> Iterator[T | None]:
        """The conversation's record if there is one (None), under the lock;
        never made, never moved."""
        with self._lock:
            yield self._kept.get(scope)
