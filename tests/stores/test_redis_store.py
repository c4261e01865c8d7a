"""What only the Redis store has to show, against a real ``redis-server``
(tests/_redis_server.py): data kept across a restart, a dead server raising
and the same store recovering, the password never shown, one claim per
offload across processes, one round trip per call, Redis expiry for cleanup.
The shared contract is tests/stores/test_store_contract.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis
from tests._redis_server import RedisServer

from seamscope.decisions.records import AccountDelta, AccountTotals, Recalled, RecallStatus
from seamscope.stores import RedisStore, store_from_url

from .test_store_contract import OUTPUT, Clock, record


def fresh_prefix() -> str:
    return f"test-{uuid.uuid4().hex}:"


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test alone (it is restarted or killed)."""
    server = RedisServer.start(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def deltas_for(offload_id: str, n: int) -> list[AccountDelta]:
    """Amounts whose float sums would drift: only an exact sum matches."""
    return [
        AccountDelta(
            offload_id,
            savings=Decimal("0.1000000001") * (k + 1),
            stub_cost=Decimal("0.0000001375"),
            recall_cost=Decimal("0.3") if k % 3 == 0 else Decimal(0),
            cache_cost=Decimal("-0.00000001"),
            turns=1,
            recalls=1 if k % 3 == 0 else 0,
            remaining=n - k,
        )
        for k in range(n)
    ]


def total(deltas: list[AccountDelta]) -> AccountTotals:
    totals = AccountTotals()
    for delta in deltas:
        totals = totals.plus(delta)
    return totals


def test_everything_acknowledged_survives_a_restart(own_server: RedisServer) -> None:
    clock = Clock()
    store = RedisStore(own_server.url, prefix=fresh_prefix(), max_items=8, clock=clock)
    written: dict[str, list[AccountDelta]] = {}
    evicted: set[str] = set()
    for i in range(12):
        offload = record(f"o{i}", conversation=f"conv-{i % 2}", created_at=clock.now)
        evicted.update(store.put(offload, f"{i}:{OUTPUT}"))
        written[f"o{i}"] = deltas_for(f"o{i}", 3 + i % 4)
        store.add(written[f"o{i}"][:2])
        store.add(written[f"o{i}"][2:])
        clock.now += 1
    assert {f"o{i}" for i in range(4)} == evicted
    before = {c: list(store.offloads(c)) for c in ("conv-0", "conv-1")}
    pid = own_server.pid

    own_server.restart()

    assert pid != own_server.pid
    assert before == {c: list(store.offloads(c)) for c in ("conv-0", "conv-1")}
    for i in range(12):
        recalled = store.recall(f"conv-{i % 2}", f"o{i}")
        if f"o{i}" in evicted:
            assert RecallStatus.EVICTED == recalled.status and recalled.gone_at is not None
        else:
            assert Recalled(RecallStatus.FOUND, f"{i}:{OUTPUT}") == recalled
        found = store.lookup(f"conv-{i % 2}", [f"o{i}"])[f"o{i}"]
        assert (
            record(
                f"o{i}",
                conversation=f"conv-{i % 2}",
                created_at=found.created_at,
                expires_at=found.expires_at,
            )
            == found
        )
        claimed = store.claim(f"o{i}")
        assert claimed is not None and found == claimed.offload
        assert total(written[f"o{i}"]) == claimed.totals
        assert store.claim(f"o{i}") is None
    store.close()


def test_a_dead_server_raises_and_the_same_store_recovers(own_server: RedisServer) -> None:
    store = RedisStore(own_server.url, prefix=fresh_prefix(), timeout=0.5)
    store.put(record("o1"), OUTPUT)
    store.add(deltas_for("o1", 2))

    own_server.kill()

    calls: dict[str, Callable[[], Any]] = {
        "put": lambda: store.put(record("o2"), OUTPUT),
        "recall": lambda: store.recall("conv-1", "o1"),
        "offloads": lambda: store.offloads("conv-1"),
        "lookup": lambda: store.lookup("conv-1", ["o1"]),
        "add": lambda: store.add(deltas_for("o1", 1)),
        "claim": lambda: store.claim("o1"),
        "due": lambda: store.due(idle_since=time.time(), now=time.time()),
    }
    for name, call in calls.items():
        with pytest.raises(redis.exceptions.RedisError) as raised:
            call()
        assert f".{name}: " in str(raised.value)
        assert f"127.0.0.1:{own_server.port}" in str(raised.value)
    store.close()  # releasing connections to a dead server does not raise

    own_server.restart()
    assert Recalled(RecallStatus.FOUND, OUTPUT) == store.recall("conv-1", "o1")

    os.kill(own_server.pid, signal.SIGSTOP)  # up but answering nothing: the timeout ends it
    try:
        for call in (calls["recall"], calls["lookup"]):
            with pytest.raises(redis.exceptions.TimeoutError):
                call()
    finally:
        os.kill(own_server.pid, signal.SIGCONT)

    assert Recalled(RecallStatus.FOUND, OUTPUT) == store.recall("conv-1", "o1")
    assert () == store.put(record("o2"), OUTPUT)
    assert ["o1", "o2"] == [o.offload_id for o in store.offloads("conv-1")]
    claimed = store.claim("o1")
    assert claimed is not None and total(deltas_for("o1", 2)) == claimed.totals
    store.close()


def test_a_password_is_never_shown(tmp_path: Path) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    wrong = f"wrong-{uuid.uuid4().hex}"
    server = RedisServer.start(tmp_path, password=secret)
    try:
        bad_url = server.url.replace(secret, wrong)
        for store in (
            RedisStore(bad_url, prefix=fresh_prefix()),
            store_from_url(f"{bad_url}?timeout=2&prefix={fresh_prefix()}"),
        ):
            assert wrong not in repr(store) and "***" in repr(store)
            with pytest.raises(redis.exceptions.RedisError) as raised:
                store.put(record("o1"), OUTPUT)
            shown = "".join(traceback.format_exception(raised.value))
            shown += repr(raised.value) + str(raised.value)
            assert wrong not in shown and secret not in shown
            assert f"127.0.0.1:{server.port}" in shown
            store.close()
        with pytest.raises(ValueError) as refused:
            RedisStore(server.url.replace("redis://", "http://"))
        assert secret not in str(refused.value)

        store = RedisStore(server.url, prefix=fresh_prefix())
        assert secret not in repr(store)
        store.put(record("o1"), OUTPUT)
        assert Recalled(RecallStatus.FOUND, OUTPUT) == store.recall("conv-1", "o1")
        store.close()
    finally:
        server.stop()


_RACER = """
import json, sys
import redis
from seamscope.stores import RedisStore

url, prefix, gate, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = RedisStore(url, prefix=prefix, timeout=10)
signals = redis.Redis.from_url(url)
signals.rpush(gate + "ready", 1)
if signals.blpop([gate + "go"], timeout=60) is None:
    sys.exit("no go")
won = {}
for i in range(n):
    claimed = store.claim(f"o{i}")
    if claimed is not None:
        t = claimed.totals
        won[claimed.offload.offload_id] = [str(t.savings), str(t.cache_cost), t.remaining]
print(json.dumps(won))
"""


def test_two_processes_claim_each_offload_once(redis_server: RedisServer) -> None:
    prefix, gate, n = fresh_prefix(), f"gate-{uuid.uuid4().hex}:", 300
    store = RedisStore(redis_server.url, prefix=prefix)
    for i in range(n):
        store.put(record(f"o{i}"), f"output {i}")
        store.add(deltas_for(f"o{i}", 1 + i % 5))
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, redis_server.url, prefix, gate, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    signals = redis.Redis.from_url(redis_server.url)
    try:
        deadline = time.monotonic() + 60
        while signals.llen(gate + "ready") < 2:  # both connected: start them together
            assert all(r.poll() is None for r in racers), [r.communicate() for r in racers]
            assert time.monotonic() < deadline, "the racing processes did not start"
            time.sleep(0.02)
        signals.rpush(gate + "go", 1, 1)
        outputs = [r.communicate(timeout=120) for r in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
        signals.close()
    assert [0, 0] == [r.returncode for r in racers], outputs
    first, second = (json.loads(out) for out, _ in outputs)
    assert not set(first) & set(second)
    assert {f"o{i}" for i in range(n)} == set(first) | set(second)
    for offload_id, (savings, cache, remaining) in {**first, **second}.items():
        expected = total(deltas_for(offload_id, 1 + int(offload_id[1:]) % 5))
        assert [expected.savings, expected.cache_cost, expected.remaining] == [
            Decimal(savings),
            Decimal(cache),
            remaining,
        ]
    assert all(store.claim(f"o{i}") is None for i in range(n))
    store.close()


def test_each_call_is_one_round_trip(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request the client writes to a socket is counted: a pipeline or a
    script call writes once and then reads its replies."""
    clock = Clock()
    store = RedisStore(redis_server.url, prefix=fresh_prefix(), max_items=2, clock=clock)

    def calls(n: int) -> dict[str, Callable[[], Any]]:
        return {
            "put": lambda: store.put(record(f"o{n}"), OUTPUT),
            "recall": lambda: store.recall("conv-1", f"o{n}"),
            "offloads": lambda: store.offloads("conv-1"),
            "lookup": lambda: store.lookup("conv-1", [f"o{n}", "o0", "nope"]),
            "add": lambda: store.add(deltas_for(f"o{n}", 3) + deltas_for("o0", 2)),
            "claim": lambda: store.claim(f"o{n}"),
            "due": lambda: store.due(idle_since=clock.now + 1, now=clock.now),
        }

    for n in (0, 1):  # connects and loads the scripts
        for call in calls(n).values():
            call()
    sent: list[int] = []
    original: Callable[..., None] = redis.connection.Connection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(1)
        original(self, command, check_health)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counted)
    for n in (2, 3):  # the puts of o2 and o3 each evict the oldest content
        for name, call in calls(n).items():
            before = len(sent)
            result = call()
            assert 1 == len(sent) - before, name
            if name == "put":
                assert (f"o{n - 2}",) == result
            if name == "claim":
                assert result is not None and total(deltas_for(f"o{n}", 3)) == result.totals
    store.close()


def test_redis_drops_what_the_ttl_ended_and_nothing_without_one(
    redis_server: RedisServer,
) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        for ttl in (3600.0, None):
            prefix = fresh_prefix()
            store = RedisStore(redis_server.url, prefix=prefix, ttl_seconds=ttl)
            store.put(record("o1", created_at=time.time()), OUTPUT)
            store.add(deltas_for("o1", 2))
            own = {
                kind: client.pttl(f"{prefix}{kind}:{name}")
                for kind, name in (("o", "o1"), ("c", "o1"), ("d", "o1"), ("conv", "conv-1"))
            }
            if ttl is None:
                assert {kind: -1 for kind in own} == own  # kept, no Redis expiry
            else:
                assert all(v > 0 for v in own.values()), own
                assert own["c"] > ttl * 1000  # the store's clock decides expiry first
                assert own["o"] > own["c"] + ttl * 1000 - 5000  # the record outlives it
                assert own["d"] <= own["o"] and own["conv"] >= own["o"] - 5000
            store.close()
    finally:
        client.close()


def test_bad_settings_fail_at_construction_and_no_server_is_needed() -> None:
    for options, field in (
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"max_items": 0}, "max_items"),
        ({"timeout": -1}, "timeout"),
        ({"prefix": ""}, "prefix"),
        ({"clock": 3}, "clock"),
    ):
        with pytest.raises(ValueError, match=rf"RedisStore\.{field}"):
            RedisStore("redis://127.0.0.1:1/0", **options)
    for url in ("", "http://h/0", "redis://h:6379/0?timeout=1", "redis://h:port/0"):
        with pytest.raises(ValueError, match=r"RedisStore\.url"):
            RedisStore(url)
    store = RedisStore("redis://:hunter2@127.0.0.1:1/0", timeout=0.2)  # nothing listens
    assert "hunter2" not in repr(store)
    with pytest.raises(redis.exceptions.ConnectionError) as raised:
        store.recall("conv-1", "o1")
    assert "hunter2" not in str(raised.value) and "127.0.0.1:1" in str(raised.value)
