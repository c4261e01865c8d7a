"""The LangGraph offload store: seamscope's offloads in the ``BaseStore`` a
LangChain agent already has (``create_agent(..., store=PostgresStore(...))``)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from seamscope.decisions.records import (
    AccountDelta,
    ClaimedOffload,
    Recalled,
    RecallStatus,
    StoredOffload,
)
from seamscope.stores._checks import check_clock, check_limit, check_ttl, stamped
from seamscope.stores._codec import delta_text, offload_fields, offload_from, totals_of

__all__ = ["LangGraphStore"]

_log = logging.getLogger("seamscope.stores")

_PAGE = 100_000
"""Items asked of one search (LangGraph's default limit is 10); a full page
asks for the next one."""

_MEMORY_LOCK = threading.Lock()
"""``InMemoryStore`` does not lock its own dicts: this process's calls on one are serialized."""

_CLAIM_LOCK = threading.Lock()
"""Claims on a store without an atomic insert: one at a time in this process."""

Namespace = tuple[str, ...]
_Insert = Callable[[Namespace, str, Mapping[str, Any], Namespace], bool]
"""``insert(namespace, key, value, guard)``: put the item unless it exists,
and only while ``guard`` (a namespace holding an item of the same key) does;
True when this call put it."""


def _instant(seconds: float) -> str:
    """Unix seconds as fixed-width text (ms) that sorts and compares as the number
    does, both as text (PostgresStore's ``$lt`` filters) and as a float (InMemoryStore's)."""
    return f"{max(0.0, min(seconds, 999_999_999_999.0)):017.3f}"


def _label(offload_id: str) -> str:
    """An offload id as one namespace label (a label holds no '.' or NUL and is not empty)."""
    escaped = offload_id.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")
    return escaped or "%"


def _check_store(store: object) -> BaseStore:
    if not isinstance(store, BaseStore):
        raise ValueError(
            f"LangGraphStore.store must be a langgraph BaseStore (langgraph.store.base), "
            f"got {type(store).__name__}"
        )
    return store


def _check_namespace(namespace: object) -> Namespace:
    if (
        not isinstance(namespace, tuple)
        or not namespace
        or any(
            not isinstance(label, str) or not label or "." in label or "\x00" in label
            for label in namespace
        )
    ):
        raise ValueError(
            "LangGraphStore.namespace must be a non-empty tuple of non-empty str labels"
            f" (no '.'), got {namespace!r}"
        )
    if namespace[0] == "langgraph":
        raise ValueError(
            f"LangGraphStore.namespace must not start with 'langgraph' (LangGraph's own), "
            f"got {namespace!r}"
        )
    return cast(Namespace, namespace)


def _postgres_insert(store: BaseStore) -> _Insert | None:
    """For langgraph's ``PostgresStore``: the atomic conditional insert a claim
    needs, in SQL through the store's own connection, into the store's own
    table (so a claim is a normal store item). None for any other store.

    THE ONLY RELIANCE ON PostgresStore INTERNALS (langgraph-checkpoint-postgres
    3.x; tests/stores/test_langgraph_store.py trips when they change):

    * the table is ``store`` (``prefix text``, ``key text``, ``value jsonb``,
      primary key ``(prefix, key)``), made by the first of ``store.MIGRATIONS``;
    * a namespace is kept in ``prefix`` as its labels joined by '.'
      (``langgraph.store.postgres.base._namespace_to_text``);
    * ``store._cursor(pipeline=True)`` yields a cursor on the store's
      connection (one connection or a pool, pipelined or not) under the lock
      its own ``batch`` takes.

    Fails closed: when any of these is not as expected, it warns and returns
    None, and claims take the best-effort path.
    """
    try:
        from langgraph.store.postgres import PostgresStore
    except ImportError:  # langgraph-checkpoint-postgres not installed: not a PostgresStore
        return None
    if not isinstance(store, PostgresStore):
        return None
    try:
        from langgraph.store.postgres.base import _namespace_to_text
        from psycopg.types.json import Jsonb

        schema = " ".join(str(store.MIGRATIONS[0]).split())
        cursor = store._cursor
        expected = (
            "CREATE TABLE IF NOT EXISTS store (",
            "prefix text NOT NULL,",
            "key text NOT NULL,",
            "value jsonb NOT NULL,",
            "PRIMARY KEY (prefix, key)",
        )
        known = (
            all(part in schema for part in expected)
            and callable(cursor)
            and _namespace_to_text(("a", "b")) == "a.b"
        )
    except (ImportError, AttributeError, IndexError, TypeError):
        known = False
    if not known:
        _log.warning(
            "LangGraphStore: this PostgresStore's table or connection is not the one"
            " seamscope knows (langgraph-checkpoint-postgres 3.x); claims are best-effort"
        )
        return None

    def insert(namespace: Namespace, key: str, value: Mapping[str, Any], guard: Namespace) -> bool:
        with cursor(pipeline=True) as cur:
            cur.execute(
                "INSERT INTO store (prefix, key, value) SELECT %s, %s, %s"
                " WHERE EXISTS (SELECT 1 FROM store WHERE prefix = %s AND key = %s)"
                " ON CONFLICT (prefix, key) DO NOTHING RETURNING key",
                (
                    _namespace_to_text(namespace),
                    key,
                    Jsonb(dict(value)),
                    _namespace_to_text(guard),
                    key,
                ),
            )
            return cur.fetchone() is not None

    return insert


class LangGraphStore:
    """Offloads in a LangGraph ``BaseStore``: the one a LangChain agent is
    compiled with, so its offloads live where its memories do.
    ``PostgresStore`` is shared by every process and machine on the database;
    ``InMemoryStore`` is this process's alone (``shared`` False).

    Under ``namespace`` (default ``("seamscope", "offloads")``), per offload:
    its record (``records``, the :class:`StoredOffload` fields as exact text),
    its content (``contents``), an index entry while the content is held
    (``held``: put order and conversation), when it was last active
    (``active``) and when its retention ends (``expires``) until it is
    claimed, why and when its content was dropped (``gone``), its claim
    (``claims``), and each account delta as an item of its own
    (``deltas/<offload id>``, a uuid4 key), so concurrent writers never
    overwrite each other: a claim sums them exactly. No item is rewritten
    from a read, so no update is lost to a race. Items are written without
    a LangGraph TTL and never indexed for semantic search.

    Retention: each content for ``ttl_seconds`` (default 7 days; None: no
    TTL) against ``clock``, and at most ``max_items`` contents held: a put
    beyond it drops the oldest (its content item deleted, said to a recall
    as evicted, with when). Expiry is logical: past ``expires_at`` a recall
    answers EXPIRED; the content item stays until the size bound drops it.
    Records and deltas stay in the store.

    Claims: with ``PostgresStore`` a claim is one ``INSERT ... ON CONFLICT DO
    NOTHING`` of the claim item into the store's own table (atomic in the
    database: one caller fleet-wide wins); with ``InMemoryStore`` a process
    lock. Any other ``BaseStore`` has no conditional write: a claim there is
    BEST-EFFORT (read, write a token, read it back: two processes claiming
    the same offload at the same instant can both win), and the store says
    so in a warning when built.

    Store calls (``batch`` round trips): recall, offloads, lookup, add, due
    1 each; put 2 (3 more when the size bound drops an output); claim 1 SQL
    statement and 1 batch on PostgresStore, 2 batches on InMemoryStore, 3
    elsewhere. A call's deadline is the store's own (the connection's or
    pool's timeouts); a store error raises, and the caller contains it.
    :meth:`close` leaves the ``BaseStore`` open: it is the application's.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace: tuple[str, ...] = ("seamscope", "offloads"),
        ttl_seconds: float | None = 7 * 24 * 3600,
        max_items: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = _check_store(store)
        self.namespace = _check_namespace(namespace)
        self.ttl_seconds = check_ttl("LangGraphStore", ttl_seconds)
        self.max_items = check_limit("LangGraphStore", "max_items", max_items)
        self._clock = check_clock("LangGraphStore", clock)
        self._in_memory = isinstance(store, InMemoryStore)
        self._insert = _postgres_insert(store)
        if self._insert is None and not self._in_memory:
            _log.warning(
                "LangGraphStore over %s: no atomic insert, claims are best-effort"
                " (two processes may settle one offload twice)",
                type(store).__name__,
            )
        ns = self.namespace
        self._records = (*ns, "records")
        self._contents = (*ns, "contents")
        self._held = (*ns, "held")
        self._active = (*ns, "active")
        self._expires = (*ns, "expires")
        self._gone = (*ns, "gone")
        self._claims = (*ns, "claims")

    @property
    def shared(self) -> bool:
        return not self._in_memory

    def __repr__(self) -> str:
        return (
            f"LangGraphStore({type(self.store).__name__}, namespace={self.namespace!r},"
            f" ttl_seconds={self.ttl_seconds})"
        )

    # -- store calls ---------------------------------------------------------

    def _batch(self, ops: Sequence[Op]) -> list[Any]:
        if self._in_memory:
            with _MEMORY_LOCK:
                return list(self.store.batch(ops))
        return list(self.store.batch(ops))

    def _deltas(self, offload_id: str) -> Namespace:
        return (*self.namespace, "deltas", _label(offload_id))

    @staticmethod
    def _get(namespace: Namespace, key: str) -> GetOp:
        return GetOp(namespace, key, refresh_ttl=False)

    @staticmethod
    def _put(namespace: Namespace, key: str, value: Mapping[str, Any] | None) -> PutOp:
        """An item written (or, with None, deleted), without a TTL, not indexed."""
        return PutOp(namespace, key, None if value is None else dict(value), index=False, ttl=None)

    def _gather(
        self,
        ops: Sequence[Op],
        searches: Sequence[tuple[Namespace, dict[str, Any] | None]],
        *,
        offset: int = 0,
    ) -> tuple[list[Any], list[list[Item]]]:
        """``ops`` and the first page of every search in one batch, then the
        next pages of the searches that filled theirs."""
        found: list[dict[str, Item]] = [{} for _ in searches]
        offsets = [offset] * len(searches)
        pending = list(range(len(searches)))
        head: list[Any] = []
        first = True
        while first or pending:
            batch: list[Op] = list(ops) if first else []
            batch += [
                SearchOp(
                    searches[i][0],
                    filter=searches[i][1],
                    limit=_PAGE,
                    offset=offsets[i],
                    refresh_ttl=False,
                )
                for i in pending
            ]
            results = self._batch(batch)
            if first:
                head, results, first = results[: len(ops)], results[len(ops) :], False
            full = []
            for i, items in zip(pending, results, strict=True):
                for item in items:
                    found[i].setdefault(item.key, item)
                if len(items) >= _PAGE:
                    offsets[i] += _PAGE
                    full.append(i)
            pending = full
        return head, [list(items.values()) for items in found]

    # -- the protocol --------------------------------------------------------

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        now = self._clock()
        offload = stamped(offload, self.ttl_seconds)
        key = offload.offload_id
        expires = offload.expires_at
        self._batch(
            [
                self._put(self._records, key, offload_fields(offload)),
                self._put(self._contents, key, {"content": content}),
                self._put(
                    self._held,
                    key,
                    {
                        "order": f"{_instant(now)}{time.time_ns():020d}",
                        "conversation_id": offload.conversation_id,
                    },
                ),
                self._put(self._active, key, {"active": _instant(now)}),
                self._put(
                    self._expires, key, None if expires is None else {"expires": _instant(expires)}
                ),
                self._put(self._gone, key, None),
                self._put(self._claims, key, None),
            ]
        )
        return self._evict(key, now)

    def _evict(self, kept: str, now: float) -> tuple[str, ...]:
        """Drop the oldest held contents beyond ``max_items``: count those past
        the bound (any order), then read the entries no newer than the newest
        of them (a superset of the oldest) and drop the oldest."""
        _, (beyond,) = self._gather([], [(self._held, None)], offset=self.max_items)
        if not beyond:
            return ()
        newest = max(str(item.value["order"]) for item in beyond)
        _, (candidates,) = self._gather([], [(self._held, {"order": {"$lte": newest}})])
        oldest = sorted((str(item.value["order"]), item.key) for item in candidates)
        evicted = tuple(key for _, key in oldest if key != kept)[: len(beyond)]
        if evicted:
            gone = {"gone": RecallStatus.EVICTED.value, "gone_at": repr(float(now))}
            self._batch(
                [
                    op
                    for key in evicted
                    for op in (
                        self._put(self._contents, key, None),
                        self._put(self._held, key, None),
                        self._put(self._gone, key, gone),
                    )
                ]
            )
        return evicted

    def recall(self, conversation_id: str, offload_id: str) -> Recalled:
        now = self._clock()
        record, content, gone = self._batch(
            [
                self._get(self._records, offload_id),
                self._get(self._contents, offload_id),
                self._get(self._gone, offload_id),
            ]
        )
        if record is None or record.value.get("conversation_id") != conversation_id:
            return Recalled(RecallStatus.UNKNOWN)
        expires = offload_from(record.value).expires_at
        if gone is not None:
            gone_at = float(gone.value["gone_at"])
            if expires is not None and expires <= gone_at:  # it had expired first
                return Recalled(RecallStatus.EXPIRED, None, expires)
            return Recalled(RecallStatus(gone.value["gone"]), None, gone_at)
        if expires is not None and expires <= now:
            return Recalled(RecallStatus.EXPIRED, None, expires)
        if content is None:
            return Recalled(RecallStatus.UNKNOWN)
        return Recalled(RecallStatus.FOUND, str(content.value["content"]))

    def offloads(self, conversation_id: str) -> Sequence[StoredOffload]:
        now = self._clock()
        where = {"conversation_id": conversation_id}
        _, (held, records) = self._gather([], [(self._held, where), (self._records, where)])
        order = {item.key: str(item.value["order"]) for item in held}
        found = []
        for item in records:
            if item.key in order:
                offload = offload_from(item.value)
                if offload.expires_at is None or offload.expires_at > now:
                    found.append((order[item.key], offload))
        found.sort(key=lambda pair: pair[0])
        return [offload for _, offload in found]

    def lookup(
        self, conversation_id: str, offload_ids: Iterable[str]
    ) -> Mapping[str, StoredOffload]:
        ids = list(dict.fromkeys(offload_ids))
        if not ids:
            return {}
        items = self._batch([self._get(self._records, key) for key in ids])
        return {
            item.key: offload_from(item.value)
            for item in items
            if item is not None and item.value.get("conversation_id") == conversation_id
        }

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        if not deltas:
            return
        active = {"active": _instant(self._clock())}
        self._batch(
            [
                *(
                    self._put(
                        self._deltas(d.offload_id), uuid.uuid4().hex, {"delta": delta_text(d)}
                    )
                    for d in deltas
                ),
                *(
                    self._put(self._active, key, active)
                    for key in dict.fromkeys(d.offload_id for d in deltas)
                ),
            ]
        )

    def claim(self, offload_id: str) -> ClaimedOffload | None:
        claim = {"claimed_at": repr(float(self._clock())), "token": uuid.uuid4().hex}
        settled = [
            self._put(self._active, offload_id, None),
            self._put(self._expires, offload_id, None),
        ]
        if self._insert is not None:
            if not self._insert(self._claims, offload_id, claim, self._records):
                # no longer due (an add after the claim made it active again)
                self._batch(settled[:1])
                return None
            (record, *_), (deltas,) = self._gather(
                [self._get(self._records, offload_id), *settled], [(self._deltas(offload_id), None)]
            )
        else:
            record, deltas = self._claim_best_effort(offload_id, claim, settled)
        if record is None:
            return None
        return ClaimedOffload(
            offload_from(record.value), totals_of(item.value["delta"] for item in deltas)
        )

    def _claim_best_effort(
        self, offload_id: str, claim: Mapping[str, Any], settled: list[PutOp]
    ) -> tuple[Item | None, list[Item]]:
        """Without a conditional write: read, write, read back (``InMemoryStore``:
        the process lock makes it exact; elsewhere two processes at the same
        instant can both win)."""
        with _CLAIM_LOCK:
            record, claimed = self._batch(
                [self._get(self._records, offload_id), self._get(self._claims, offload_id)]
            )
            if record is None or claimed is not None:
                self._batch(settled[:1])
                return None, []
            _, (deltas,) = self._gather(
                [self._put(self._claims, offload_id, claim), *settled],
                [(self._deltas(offload_id), None)],
            )
            if not self._in_memory:
                (mine,) = self._batch([self._get(self._claims, offload_id)])
                if mine is None or mine.value.get("token") != claim["token"]:
                    return None, []
            return record, deltas

    def due(self, *, idle_since: float, now: float, limit: int = 100) -> Sequence[str]:
        if limit < 1:
            return []
        idle, expired = self._batch(
            [
                SearchOp(
                    self._active,
                    filter={"active": {"$lt": _instant(idle_since)}},
                    limit=limit,
                    refresh_ttl=False,
                ),
                SearchOp(
                    self._expires,
                    filter={"expires": {"$lte": _instant(now)}},
                    limit=limit,
                    refresh_ttl=False,
                ),
            ]
        )
        found = [item.key for item in sorted(idle, key=lambda item: str(item.value["active"]))]
        found += [item.key for item in expired]
        return list(dict.fromkeys(found))[:limit]

    def close(self) -> None:
        """Nothing to release: the ``BaseStore`` and its connection are the application's."""
        return None
