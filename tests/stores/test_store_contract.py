"""The offload store contract, for every store (tests/stores/conftest.py)."""

from __future__ import annotations

import threading
from decimal import Decimal

from seamscope.decisions import OffloadStore
from seamscope.decisions.records import (
    AccountDelta,
    AccountTotals,
    Recalled,
    RecallStatus,
    StoredOffload,
)

from .conftest import StoreFactory

OUTPUT = "x" * 64_000


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(offload_id: str, conversation: str = "conv-1", created_at: float = 1_800_000_000.0,
           **changes: object) -> StoredOffload:
    fields: dict[str, object] = {
        "offload_id": offload_id,
        "conversation_id": conversation,
        "call_id": f"call-{offload_id}",
        "tool_name": "fetch_logs",
        "model": "claude-opus-4-6",
        "stub": f"[offloaded {offload_id}: 16000 tokens from fetch_logs]",
        "output_tokens": 16_000.25,
        "stub_tokens": 27.5,
        "predicted_net_saving": Decimal("0.21825"),
        "horizon": 5,
        "recall_probability": 0.5,
        "created_at": created_at,
    }
    fields.update(changes)
    return StoredOffload(**fields)  # type: ignore[arg-type]


def test_every_store_is_an_offload_store(make_store: StoreFactory) -> None:
    assert isinstance(make_store(), OffloadStore)


def test_a_recall_returns_the_whole_output_of_its_own_conversation_only(
    make_store: StoreFactory,
) -> None:
    store = make_store(ttl_seconds=None)
    assert () == tuple(store.put(record("o1"), OUTPUT))
    assert Recalled(RecallStatus.FOUND, OUTPUT) == store.recall("conv-1", "o1")
    assert Recalled(RecallStatus.UNKNOWN) == store.recall("conv-2", "o1")
    assert Recalled(RecallStatus.UNKNOWN) == store.recall("conv-1", "nope")


def test_records_come_back_as_they_were_put(make_store: StoreFactory) -> None:
    store = make_store(ttl_seconds=None)
    first, second, other = record("o1"), record("o2", created_at=1_800_000_001.0), record(
        "o3", conversation="conv-2"
    )
    for item in (first, second, other):
        store.put(item, OUTPUT)
    assert [first, second] == list(store.offloads("conv-1"))
    assert {"o1": first} == dict(store.lookup("conv-1", ["o1", "o3", "nope"]))


def test_accounts_sum_exactly_and_are_claimed_once(make_store: StoreFactory) -> None:
    store = make_store()
    store.put(record("o1"), OUTPUT)
    deltas = [
        AccountDelta("o1", Decimal("0.08000125"), Decimal("0.0001375"), turns=1, remaining=1),
        AccountDelta("o1", Decimal("0.08000125"), Decimal("0.0001375"), turns=1, remaining=1),
        AccountDelta("o1", recall_cost=Decimal("0.08125125"), recalls=1),
    ]
    store.add(deltas[:2])
    store.add(deltas[2:])
    claimed = store.claim("o1")
    assert claimed is not None
    assert record("o1", expires_at=claimed.offload.expires_at) == claimed.offload
    assert (
        AccountTotals(
            Decimal("0.16000250"),
            Decimal("0.0002750"),
            Decimal("0.08125125"),
            Decimal(0),
            turns=2,
            recalls=1,
            remaining=2,
        )
        == claimed.totals
    )
    assert store.claim("o1") is None
    assert store.claim("unknown") is None
    # the content outlives the settlement until its retention ends
    assert RecallStatus.FOUND == store.recall("conv-1", "o1").status


def test_one_claim_wins_among_threads(make_store: StoreFactory) -> None:
    store = make_store()
    store.put(record("o1"), OUTPUT)
    wins: list[object] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        barrier.wait()
        won = store.claim("o1")
        if won is not None:
            wins.append(won)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 == len(wins)


def test_past_its_ttl_an_output_is_said_expired_with_when(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store(ttl_seconds=60, clock=clock)
    store.put(record("o1", created_at=clock.now), OUTPUT)
    assert clock.now + 60 == store.lookup("conv-1", ["o1"])["o1"].expires_at
    clock.now += 59
    assert RecallStatus.FOUND == store.recall("conv-1", "o1").status
    assert ["o1"] == [o.offload_id for o in store.offloads("conv-1")]
    assert [] == list(store.due(idle_since=clock.now - 3600, now=clock.now))
    clock.now += 2
    assert Recalled(RecallStatus.EXPIRED, None, 1_800_000_060.0) == store.recall("conv-1", "o1")
    assert [] == list(store.offloads("conv-1"))
    assert ["o1"] == list(store.due(idle_since=clock.now - 3600, now=clock.now))
    # its terms still price a stub some prompt still carries
    assert ["o1"] == list(store.lookup("conv-1", ["o1"]))


def test_the_size_bound_drops_the_oldest_and_says_so(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store(max_items=2, ttl_seconds=None, clock=clock)
    store.put(record("o1"), OUTPUT)
    store.put(record("o2", created_at=clock.now + 1), OUTPUT)
    clock.now += 5
    assert ("o1",) == tuple(store.put(record("o3", created_at=clock.now), OUTPUT))
    assert Recalled(RecallStatus.EVICTED, None, clock.now) == store.recall("conv-1", "o1")
    assert ["o2", "o3"] == [o.offload_id for o in store.offloads("conv-1")]
    claimed = store.claim("o1")  # an evicted offload is still settled, once
    assert claimed is not None and "o1" == claimed.offload.offload_id


def test_idle_offloads_are_due_until_claimed(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store(clock=clock)
    store.put(record("o1", created_at=clock.now), OUTPUT)
    store.put(record("o2", created_at=clock.now), OUTPUT)
    clock.now += 100
    store.add([AccountDelta("o2", turns=1)])  # o2 was active at +100
    clock.now += 10
    assert ["o1"] == list(store.due(idle_since=clock.now - 50, now=clock.now))
    assert {"o1", "o2"} == set(store.due(idle_since=clock.now + 1, now=clock.now))
    assert store.claim("o1") is not None
    assert ["o2"] == list(store.due(idle_since=clock.now + 1, now=clock.now))
