"""The Redis offload store: many machines, every worker process."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from seamscope.decisions.records import (
    AccountDelta,
    ClaimedOffload,
    Recalled,
    RecallStatus,
    StoredOffload,
)
from seamscope.stores._checks import (
    check_clock,
    check_limit,
    check_seconds,
    check_ttl,
    redacted,
    stamped,
)
from seamscope.stores._codec import FIELDS, delta_text, offload_fields, offload_from, totals_of

__all__ = ["RedisStore"]

T = TypeVar("T")

_EXPIRES = FIELDS.index("expires_at") + 1  # its place in a Lua row (1-based)

_SLACK = 300.0
"""Seconds a content key outlives its ``expires_at`` in Redis (and a record
its ``expires_at`` plus the TTL): expiry is decided by the store's clock,
workers' clocks differ, Redis only cleans up after them."""

_LUA_FIELDS = "{" + ", ".join(f"'{name}'" for name in FIELDS) + "}"

# Every script names its fixed keys in KEYS; an offload's own keys are the
# prefix (ARGV[1]) and 'o:' (record hash), 'c:' (content), 'd:' (deltas list)
# or 'conv:' (a conversation's ids) followed by the id.

_PUT = """
local prefix, id, now = ARGV[1], ARGV[2], ARGV[3]
local old = redis.call('HGET', KEYS[1], 'conversation_id')
if old and old ~= ARGV[9] then redis.call('ZREM', prefix .. 'conv:' .. old, id) end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('HSET', KEYS[1], 'active', now, 'claimed', '0', 'gone', '', 'gone_at', '',
           unpack(ARGV, 10))
redis.call('SET', KEYS[2], ARGV[5])
local seq = redis.call('INCR', KEYS[9])
redis.call('ZADD', KEYS[4], seq, id)
redis.call('ZADD', KEYS[5], seq, id)
redis.call('ZADD', KEYS[7], now, id)
if ARGV[6] ~= '' then
  redis.call('ZADD', KEYS[6], ARGV[6], id)
  redis.call('ZADD', KEYS[8], ARGV[6], id)
else
  redis.call('ZREM', KEYS[6], id)
  redis.call('ZREM', KEYS[8], id)
end
if ARGV[7] ~= '0' then redis.call('PEXPIRE', KEYS[2], ARGV[7]) end
if ARGV[8] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
  if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[8]) then
    redis.call('PEXPIRE', KEYS[4], ARGV[8])
  end
end
-- contents past their expires_at no longer count against the size bound
local ended = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, 1000)
for _, eid in ipairs(ended) do
  local rec = prefix .. 'o:' .. eid
  redis.call('DEL', prefix .. 'c:' .. eid)
  local row = redis.call('HMGET', rec, 'gone', 'expires_at')
  if row[1] == '' then redis.call('HSET', rec, 'gone', 'expired', 'gone_at', row[2]) end
  redis.call('ZREM', KEYS[5], eid)
  redis.call('ZREM', KEYS[6], eid)
end
local evicted = {}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[4])
if over > 0 then
  evicted = redis.call('ZRANGE', KEYS[5], 0, over - 1)
  for _, eid in ipairs(evicted) do
    local rec = prefix .. 'o:' .. eid
    redis.call('DEL', prefix .. 'c:' .. eid)
    if redis.call('EXISTS', rec) == 1 then
      redis.call('HSET', rec, 'gone', 'evicted', 'gone_at', now)
    end
    redis.call('ZREM', KEYS[5], eid)
    redis.call('ZREM', KEYS[6], eid)
  end
end
return evicted
"""

_ADD = """
local prefix, now = ARGV[1], ARGV[2]
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local rec = prefix .. 'o:' .. id
  if redis.call('EXISTS', rec) == 1 then
    local deltas = prefix .. 'd:' .. id
    redis.call('RPUSH', deltas, ARGV[i + 1])
    local ttl = redis.call('PTTL', rec)
    if ttl > 0 then redis.call('PEXPIRE', deltas, ttl) end
    redis.call('HSET', rec, 'active', now)
    redis.call('ZADD', KEYS[1], 'XX', now, id)
  end
end
return 0
"""

_CLAIM = f"""
if redis.call('HGET', KEYS[1], 'claimed') ~= '0' then return false end
redis.call('HSET', KEYS[1], 'claimed', '1')
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local out = redis.call('HMGET', KEYS[1], unpack({_LUA_FIELDS}))
for _, text in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do out[#out + 1] = text end
return out
"""

_OFFLOADS = f"""
local prefix, now, conversation = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local out = {{}}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local row = redis.call('HMGET', prefix .. 'o:' .. id, unpack({_LUA_FIELDS}))
  if not row[1] or row[2] ~= conversation then
    redis.call('ZREM', KEYS[1], id)
  elseif redis.call('EXISTS', prefix .. 'c:' .. id) == 1
      and (row[{_EXPIRES}] == '' or tonumber(row[{_EXPIRES}]) > now) then
    for i = 1, {len(FIELDS)} do out[#out + 1] = row[i] end
  end
end
return out
"""

_DUE = """
local prefix, limit = ARGV[1], tonumber(ARGV[4])
local seen, rows = {}, {}
local function take(ids)
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      if redis.call('EXISTS', prefix .. 'o:' .. id) == 1 then
        rows[#rows + 1] = {tonumber(redis.call('ZSCORE', KEYS[1], id) or '0'), id}
      else
        redis.call('ZREM', KEYS[1], id)
        redis.call('ZREM', KEYS[2], id)
      end
    end
  end
end
take(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, limit))
take(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3], 'LIMIT', 0, limit))
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[2] < b[2]
end)
local out = {}
for i = 1, math.min(limit, #rows) do out[i] = rows[i][2] end
return out
"""


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _seconds(value: float) -> str:
    return repr(float(value))


class RedisStore:
    """Offloads in Redis, shared by every worker on every machine and kept
    across restarts as far as the server keeps its data (AOF).

    Retention: each content for ``ttl_seconds`` (default 7 days; None: no
    TTL) and at most ``max_items`` contents (the oldest dropped first). Expiry
    is decided against ``clock`` (a recall past ``expires_at`` is told it
    expired and when); Redis itself drops a content key ``ttl_seconds`` plus
    a few minutes after its put, and its record and deltas a TTL after that,
    so memory does not grow with unsettled records (no Redis expiry when
    ``ttl_seconds`` is None).

    Each method is one round trip (a MULTI/EXEC pipeline or a Lua script;
    the first call of a script after a server restart also loads it).
    ``timeout``: the longest one connect or one reply is waited for
    (seconds), never retried; a call that cannot finish raises the redis
    error (``redis.exceptions.ConnectionError``, ``TimeoutError``, ...)
    with the URL in its message, the password shown as ``***``, which the
    caller contains. Connecting is lazy: the server need not be up at
    construction. ``prefix``: every key's first characters (one store per
    prefix). A standalone Redis (or a primary), not Redis Cluster.
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float | None = 7 * 24 * 3600,
        max_items: int = 100_000,
        timeout: float = 0.5,
        prefix: str = "seamscope:",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise ValueError(f"RedisStore.url must be a redis:// URL, got {type(url).__name__}")
        shown = redacted(url)
        try:
            parts = urlsplit(url)
        except ValueError:
            raise ValueError(f"RedisStore.url {shown!r} cannot be parsed") from None
        if parts.scheme.lower() not in ("redis", "rediss", "unix"):
            raise ValueError(
                f"RedisStore.url must be redis://host:port/db, rediss://... or unix://..., "
                f"got {shown!r}"
            )
        if parts.query:
            raise ValueError(
                f"RedisStore.url {shown!r}: pass settings as arguments, not in the query "
                "(store_from_url reads ttl_seconds, max_items, timeout and prefix from it)"
            )
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"RedisStore.prefix must be a non-empty str, got {prefix!r}")
        self.url = shown
        self.ttl_seconds = check_ttl("RedisStore", ttl_seconds)
        self.max_items = check_limit("RedisStore", "max_items", max_items)
        self.timeout = check_seconds("RedisStore", "timeout", timeout)
        self.prefix = prefix
        self._clock = check_clock("RedisStore", clock)
        self._secrets = tuple({s for s in (parts.password, unquote(parts.password or "")) if s})
        try:
            self._pool = redis.ConnectionPool.from_url(
                url,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False,
                health_check_interval=0,
                decode_responses=True,
                protocol=2,
            )
        except (ValueError, RedisError) as exc:
            raise ValueError(f"RedisStore.url {shown!r}: {self._scrub(str(exc))}") from None
        self._client = redis.Redis(connection_pool=self._pool)
        self._put = self._client.register_script(_PUT)
        self._add = self._client.register_script(_ADD)
        self._claim = self._client.register_script(_CLAIM)
        self._offloads = self._client.register_script(_OFFLOADS)
        self._due = self._client.register_script(_DUE)

    def __repr__(self) -> str:
        return (
            f"RedisStore({self.url!r}, ttl_seconds={self.ttl_seconds}, "
            f"max_items={self.max_items}, prefix={self.prefix!r})"
        )

    def _key(self, kind: str, name: str | None = None) -> str:
        """``prefix + kind`` for the store's own sets, ``prefix + kind:name`` for
        an offload's or a conversation's keys."""
        return f"{self.prefix}{kind}" if name is None else f"{self.prefix}{kind}:{name}"

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _call(self, method: str, work: Callable[[], T]) -> T:
        """Run one round trip; a redis error raises again (same class) with the
        URL and without the password, never chained to the original."""
        try:
            return work()
        except (RedisError, OSError) as exc:
            message = f"{self!r}.{method}: {self._scrub(str(exc))}"
            try:
                error: Exception = type(exc)(message)
            except Exception:
                error = RedisError(message)
            raise error from None

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        now = self._clock()
        offload = stamped(offload, self.ttl_seconds)
        fields = offload_fields(offload)
        expires = offload.expires_at
        content_ms = record_ms = 0
        if self.ttl_seconds is not None and expires is not None:
            left = max(expires - now, 0.0)
            content_ms = _ms(left + _SLACK)
            record_ms = _ms(left + self.ttl_seconds + _SLACK)
        key = offload.offload_id
        keys = [
            self._key("o", key),
            self._key("c", key),
            self._key("d", key),
            self._key("conv", offload.conversation_id),
            self._key("held"),
            self._key("expiring"),
            self._key("idle"),
            self._key("ending"),
            self._key("seq"),
        ]
        args: list[Any] = [
            self.prefix,
            key,
            _seconds(now),
            self.max_items,
            content,
            fields["expires_at"],
            content_ms,
            record_ms,
            offload.conversation_id,
        ]
        for name in FIELDS:
            args += (name, fields[name])
        evicted = self._call("put", lambda: self._put(keys=keys, args=args))
        return tuple(evicted)

    def recall(self, conversation_id: str, offload_id: str) -> Recalled:
        now = self._clock()

        def work() -> list[Any]:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.hmget(
                    self._key("o", offload_id), "conversation_id", "gone", "gone_at", "expires_at"
                )
                pipe.get(self._key("c", offload_id))
                return pipe.execute()

        (conversation, gone, gone_at, expires), content = self._call("recall", work)
        if conversation is None or conversation != conversation_id:
            return Recalled(RecallStatus.UNKNOWN)
        ended = bool(expires) and float(expires) <= now
        if content is not None and not ended:
            return Recalled(RecallStatus.FOUND, content)
        if content is None and gone:
            return Recalled(RecallStatus(gone), None, float(gone_at) if gone_at else None)
        if ended:
            return Recalled(RecallStatus.EXPIRED, None, float(expires))
        # the content key went without the store dropping it (Redis' own maxmemory)
        return Recalled(RecallStatus.EVICTED)

    def _rows(self, values: Sequence[Any]) -> list[StoredOffload]:
        width = len(FIELDS)
        return [
            offload_from(dict(zip(FIELDS, values[i : i + width], strict=True)))
            for i in range(0, len(values), width)
        ]

    def offloads(self, conversation_id: str) -> Sequence[StoredOffload]:
        now = self._clock()
        values = self._call(
            "offloads",
            lambda: self._offloads(
                keys=[self._key("conv", conversation_id)],
                args=[self.prefix, _seconds(now), conversation_id],
            ),
        )
        return self._rows(values)

    def lookup(
        self, conversation_id: str, offload_ids: Iterable[str]
    ) -> Mapping[str, StoredOffload]:
        ids = list(dict.fromkeys(offload_ids))
        if not ids:
            return {}

        def work() -> list[Any]:
            with self._client.pipeline(transaction=True) as pipe:
                for offload_id in ids:
                    pipe.hmget(self._key("o", offload_id), *FIELDS)
                return pipe.execute()

        rows = self._call("lookup", work)
        found = {}
        for offload_id, row in zip(ids, rows, strict=True):
            if row[0] is not None and row[1] == conversation_id:
                found[offload_id] = offload_from(dict(zip(FIELDS, row, strict=True)))
        return found

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        if not deltas:
            return
        now = self._clock()
        args: list[Any] = [self.prefix, _seconds(now)]
        for delta in deltas:
            args += (delta.offload_id, delta_text(delta))
        self._call("add", lambda: self._add(keys=[self._key("idle")], args=args))

    def claim(self, offload_id: str) -> ClaimedOffload | None:
        keys = [
            self._key("o", offload_id),
            self._key("d", offload_id),
            self._key("idle"),
            self._key("ending"),
        ]
        values = self._call("claim", lambda: self._claim(keys=keys, args=[offload_id]))
        if not values:
            return None
        width = len(FIELDS)
        offload = offload_from(dict(zip(FIELDS, values[:width], strict=True)))
        return ClaimedOffload(offload, totals_of(values[width:]))

    def due(self, *, idle_since: float, now: float, limit: int = 100) -> Sequence[str]:
        if limit < 1:
            return []
        ids = self._call(
            "due",
            lambda: self._due(
                keys=[self._key("idle"), self._key("ending")],
                args=[self.prefix, _seconds(idle_since), _seconds(now), int(limit)],
            ),
        )
        return list(ids)

    def close(self) -> None:
        self._pool.disconnect()
