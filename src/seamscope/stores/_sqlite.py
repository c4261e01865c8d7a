"""The SQLite offload store: one machine, many processes, survives restarts."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from seamscope.decisions.records import (
    AccountDelta,
    ClaimedOffload,
    Recalled,
    RecallStatus,
    StoredOffload,
)
from seamscope.stores._checks import check_clock, check_limit, check_seconds, check_ttl, stamped
from seamscope.stores._codec import FIELDS, delta_text, offload_fields, offload_from, totals_of

__all__ = ["SQLiteStore"]

_COLUMNS = ", ".join(FIELDS)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS seamscope_offloads (
    {", ".join(f"{name} TEXT NOT NULL" for name in FIELDS)},
    content TEXT,
    gone TEXT,
    gone_at REAL,
    active REAL NOT NULL,
    expires REAL,
    claimed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (offload_id)
);
CREATE INDEX IF NOT EXISTS seamscope_offloads_conversation
    ON seamscope_offloads (conversation_id);
CREATE INDEX IF NOT EXISTS seamscope_offloads_unclaimed
    ON seamscope_offloads (claimed, active);
CREATE TABLE IF NOT EXISTS seamscope_meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO seamscope_meta (key, value)
    SELECT 'held', COUNT(*) FROM seamscope_offloads WHERE content IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS seamscope_held_insert AFTER INSERT ON seamscope_offloads
    WHEN NEW.content IS NOT NULL
    BEGIN UPDATE seamscope_meta SET value = value + 1 WHERE key = 'held'; END;
CREATE TRIGGER IF NOT EXISTS seamscope_held_delete AFTER DELETE ON seamscope_offloads
    WHEN OLD.content IS NOT NULL
    BEGIN UPDATE seamscope_meta SET value = value - 1 WHERE key = 'held'; END;
CREATE TRIGGER IF NOT EXISTS seamscope_held_update AFTER UPDATE OF content ON seamscope_offloads
    BEGIN UPDATE seamscope_meta
        SET value = value + (NEW.content IS NOT NULL) - (OLD.content IS NOT NULL)
        WHERE key = 'held'; END;
CREATE TABLE IF NOT EXISTS seamscope_accounts (
    offload_id TEXT NOT NULL,
    delta TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS seamscope_accounts_offload ON seamscope_accounts (offload_id);
"""


class SQLiteStore:
    """Offloads in one SQLite file (WAL), shared by every process on the
    machine and kept across restarts.

    Retention: each content for ``ttl_seconds`` (default 7 days) and at most
    ``max_items`` contents (the oldest dropped first); a dropped output's
    record stays until it is settled and ``ttl_seconds`` more, so a recall
    is told that it expired and when. ``timeout``: the longest a call waits
    for the file's lock (seconds); a call that cannot finish raises
    (``sqlite3.Error``), which the caller contains. A full disk makes
    :meth:`put` raise: no offload is made.
    """

    shared = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl_seconds: float | None = 7 * 24 * 3600,
        max_items: int = 100_000,
        timeout: float = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not str(path):
            raise ValueError(f"SQLiteStore.path must be a file path, got {path!r}")
        self.path = Path(path)
        self.ttl_seconds = check_ttl("SQLiteStore", ttl_seconds)
        self.max_items = check_limit("SQLiteStore", "max_items", max_items)
        self.timeout = check_seconds("SQLiteStore", "timeout", timeout)
        self._clock = check_clock("SQLiteStore", clock)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        if not self.path.parent.is_dir():
            raise ValueError(
                f"SQLiteStore.path: the folder {str(self.path.parent)!r} does not exist"
            )
        self._db()  # the schema now: a path that cannot be opened fails at construction

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r}, ttl_seconds={self.ttl_seconds})"

    def _db(self) -> sqlite3.Connection:
        """This process's connection (a forked child opens its own)."""
        if self._conn is None or self._pid != os.getpid():
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _run(self, work: Callable[[sqlite3.Connection], Any], *, write: bool = False) -> Any:
        with self._lock:
            db = self._db()
            if not write:
                return work(db)
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        now = self._clock()
        offload = stamped(offload, self.ttl_seconds)
        fields = offload_fields(offload)
        expires = offload.expires_at

        def work(db: sqlite3.Connection) -> tuple[str, ...]:
            # delete, then insert: the held count's triggers see both
            db.execute("DELETE FROM seamscope_offloads WHERE offload_id = ?", (offload.offload_id,))
            db.execute(
                f"INSERT INTO seamscope_offloads ({_COLUMNS}, content, active, expires)"
                f" VALUES ({', '.join('?' * len(FIELDS))}, ?, ?, ?)",
                (*(fields[name] for name in FIELDS), content, now, expires),
            )
            (held,) = db.execute(
                "SELECT value FROM seamscope_meta WHERE key = 'held'"
            ).fetchone()  # kept by triggers: no scan of the table per put
            evicted: tuple[str, ...] = ()
            if held > self.max_items:
                rows = db.execute(
                    "SELECT offload_id FROM seamscope_offloads WHERE content IS NOT NULL"
                    " ORDER BY rowid LIMIT ?",
                    (held - self.max_items,),
                ).fetchall()
                evicted = tuple(row[0] for row in rows)
                db.executemany(
                    "UPDATE seamscope_offloads SET content = NULL, gone = ?, gone_at = ?"
                    " WHERE offload_id = ?",
                    [(RecallStatus.EVICTED.value, now, key) for key in evicted],
                )
            if self.ttl_seconds is not None:  # settled records past their retention
                old = now - self.ttl_seconds
                db.execute(
                    "DELETE FROM seamscope_accounts WHERE offload_id IN (SELECT offload_id"
                    " FROM seamscope_offloads WHERE claimed = 1 AND active < ? AND"
                    " (content IS NULL OR expires < ?))",
                    (old, old),
                )
                db.execute(
                    "DELETE FROM seamscope_offloads WHERE claimed = 1 AND active < ? AND"
                    " (content IS NULL OR expires < ?)",
                    (old, old),
                )
            return evicted

        result: tuple[str, ...] = self._run(work, write=True)
        return result

    def recall(self, conversation_id: str, offload_id: str) -> Recalled:
        now = self._clock()
        row = self._run(
            lambda db: db.execute(
                "SELECT content, gone, gone_at, expires FROM seamscope_offloads"
                " WHERE offload_id = ? AND conversation_id = ?",
                (offload_id, conversation_id),
            ).fetchone()
        )
        if row is None:
            return Recalled(RecallStatus.UNKNOWN)
        content, gone, gone_at, expires = row
        if content is not None and expires is not None and expires <= now:
            return Recalled(RecallStatus.EXPIRED, None, expires)
        if content is None:
            return Recalled(RecallStatus(gone or "unknown"), None, gone_at)
        return Recalled(RecallStatus.FOUND, content)

    def offloads(self, conversation_id: str) -> Sequence[StoredOffload]:
        now = self._clock()
        rows = self._run(
            lambda db: db.execute(
                f"SELECT {_COLUMNS} FROM seamscope_offloads WHERE conversation_id = ? AND"
                " content IS NOT NULL AND (expires IS NULL OR expires > ?) ORDER BY rowid",
                (conversation_id, now),
            ).fetchall()
        )
        return [offload_from(dict(zip(FIELDS, row, strict=True))) for row in rows]

    def lookup(
        self, conversation_id: str, offload_ids: Iterable[str]
    ) -> Mapping[str, StoredOffload]:
        ids = list(dict.fromkeys(offload_ids))
        if not ids:
            return {}
        rows = self._run(
            lambda db: db.execute(
                f"SELECT {_COLUMNS} FROM seamscope_offloads WHERE conversation_id = ? AND"
                f" offload_id IN ({', '.join('?' * len(ids))})",
                (conversation_id, *ids),
            ).fetchall()
        )
        found = [offload_from(dict(zip(FIELDS, row, strict=True))) for row in rows]
        return {o.offload_id: o for o in found}

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        if not deltas:
            return
        now = self._clock()

        def work(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT INTO seamscope_accounts (offload_id, delta) VALUES (?, ?)",
                [(d.offload_id, delta_text(d)) for d in deltas],
            )
            db.executemany(
                "UPDATE seamscope_offloads SET active = ? WHERE offload_id = ?",
                [(now, key) for key in dict.fromkeys(d.offload_id for d in deltas)],
            )

        self._run(work, write=True)

    def claim(self, offload_id: str) -> ClaimedOffload | None:
        def work(db: sqlite3.Connection) -> ClaimedOffload | None:
            won = db.execute(
                "UPDATE seamscope_offloads SET claimed = 1 WHERE offload_id = ? AND claimed = 0",
                (offload_id,),
            ).rowcount
            if won != 1:
                return None
            row = db.execute(
                f"SELECT {_COLUMNS} FROM seamscope_offloads WHERE offload_id = ?", (offload_id,)
            ).fetchone()
            deltas = db.execute(
                "SELECT delta FROM seamscope_accounts WHERE offload_id = ? ORDER BY rowid",
                (offload_id,),
            ).fetchall()
            offload = offload_from(dict(zip(FIELDS, row, strict=True)))
            return ClaimedOffload(offload, totals_of(d[0] for d in deltas))

        claimed: ClaimedOffload | None = self._run(work, write=True)
        return claimed

    def due(self, *, idle_since: float, now: float, limit: int = 100) -> Sequence[str]:
        rows = self._run(
            lambda db: db.execute(
                "SELECT offload_id FROM seamscope_offloads WHERE claimed = 0 AND"
                " (active < ? OR expires <= ?) ORDER BY active LIMIT ?",
                (idle_since, now, limit),
            ).fetchall()
        )
        return [row[0] for row in rows]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
