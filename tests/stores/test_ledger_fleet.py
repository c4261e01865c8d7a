"""The ledger over a store other processes see: two ledgers on one SQLite file
stand for two workers (their only shared state is the file, as two processes'
is). Accounts accumulate in the store wherever each event happens; each
offload settles once, from the whole history; idle by wall-clock time."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from seamscope.decisions import OffloadLedger
from seamscope.decisions.records import (
    CarriedStub,
    ModelUsage,
    OffloadGateDecision,
    OffloadReasonCode,
    PricingSource,
    SettleTrigger,
    StoredOffload,
)
from seamscope.stores import SQLiteStore

MODEL = "claude-opus-4-6"  # $5 / M input, $25 / M output
OUTPUT_TOKENS = 16_000.0
STUB_TOKENS = 30.25
IN = Decimal(5) / 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _decision(offload_id: str) -> OffloadGateDecision:
    return OffloadGateDecision(
        fire=True,
        net_saving_usd=0.2,
        reprefill_saving_usd=0.4,
        stub_carry_cost_usd=0.002,
        expected_recall_hop_cost_usd=0.1,
        reason="net positive",
        reason_code=OffloadReasonCode.NET_POSITIVE,
        pricing_source=PricingSource.GENAI_PRICES,
        model_name=MODEL,
        output_tokens=OUTPUT_TOKENS,
        horizon=5,
        recall_probability=0.5,
        net_saving=Decimal("0.2"),
        offload_id=offload_id,
    )


def _record(offload_id: str, conversation: str, clock: Clock) -> StoredOffload:
    return StoredOffload(
        offload_id, conversation, f"call-{offload_id}", "fetch_logs", MODEL,
        f"[offloaded {offload_id}: 16000 tokens from fetch_logs]", OUTPUT_TOKENS,
        STUB_TOKENS, Decimal("0.2"), 5, 0.5, clock.now,
    )  # fmt: skip


def _workers(tmp_path: Path, clock: Clock) -> tuple[OffloadLedger, OffloadLedger, SQLiteStore]:
    """Two ledgers, each with its own connection to one file (two workers)."""
    path = tmp_path / "offloads.db"
    stores = [SQLiteStore(path, clock=clock) for _ in range(2)]
    a, b = (OffloadLedger(idle_seconds=600, clock=clock) for _ in range(2))
    a.store, b.store = stores  # type: ignore[attr-defined]  # kept beside each ledger
    return a, b, stores[0]


def _offload(
    ledger: OffloadLedger, store: SQLiteStore, offload_id: str, conv: str, clock: Clock
) -> StoredOffload:
    record = _record(offload_id, conv, clock)
    store.put(record, "x" * 64_000)
    ledger.record_offload(
        _decision(offload_id), conversation_id=conv, stub_tokens=STUB_TOKENS,
        tool_name="fetch_logs", store=store,
    )  # fmt: skip
    return record


def _call(ledger: OffloadLedger, conv: str, record: StoredOffload | None) -> None:
    carried = () if record is None else (CarriedStub(
        record.offload_id, record.output_tokens, record.stub_tokens, record),)  # fmt: skip
    ledger.record_model_call(
        conv, model=MODEL, usage=ModelUsage(4_000, 10), carried=carried,
        store=ledger.store,  # type: ignore[attr-defined]
    )  # fmt: skip


def test_accounts_from_every_worker_settle_once_from_the_whole_history(tmp_path: Path) -> None:
    clock = Clock()
    a, b, store = _workers(tmp_path, clock)
    record = _offload(a, store, "o1", "conv", clock)
    _call(a, "conv", record)
    _call(b, "conv", record)  # another worker: the prompt it sends carries the stub
    _call(b, "conv", record)
    b.record_recall(
        "conv", "o1", model=MODEL, input_tokens=16_000.0, output_tokens=20,
        store=b.store,  # type: ignore[attr-defined]
    )  # fmt: skip
    _call(a, "conv", None)  # after the recall the prompt carries no stub
    # the worker that ends the conversation settles every worker's offload of it
    (settled,) = b.end_conversation("conv", store=b.store)  # type: ignore[attr-defined]
    assert [] == a.end_conversation("conv", store=a.store)  # type: ignore[attr-defined]
    saving = Decimal(str(OUTPUT_TOKENS)) * IN
    stub = Decimal(str(STUB_TOKENS)) * IN
    recall = Decimal("16000.0") * IN + 20 * Decimal(25) / 1_000_000
    assert (
        "o1", SettleTrigger.CONVERSATION_END, 3, 1, 4, 3 * saving, 3 * stub, recall,
        3 * saving - 3 * stub - recall,
    ) == (
        settled.offload_id, settled.trigger, settled.turns_carried, settled.recalls,
        settled.remaining_turns, settled.realized_savings, settled.stub_carry_cost,
        settled.recall_cost, settled.realized_net_saving,
    )  # fmt: skip
    assert [] == a.settlements


def test_the_worker_that_made_the_offload_settles_nothing_another_settled(
    tmp_path: Path,
) -> None:
    clock = Clock()
    a, b, store = _workers(tmp_path, clock)
    record = _offload(a, store, "o1", "conv", clock)
    _call(b, "conv", record)
    (settled,) = a.end_conversation("conv", store=a.store)  # type: ignore[attr-defined]
    assert (1, 0) == (settled.turns_carried, settled.recalls)
    assert [] == b.end_conversation("conv", store=b.store)  # type: ignore[attr-defined]


def test_other_conversations_rounds_never_settle_an_offload_idle_is_wall_clock(
    tmp_path: Path,
) -> None:
    clock = Clock()
    a, b, store = _workers(tmp_path, clock)
    record = _offload(a, store, "o1", "conv", clock)
    _call(a, "conv", record)
    _call(b, "conv", record)
    for _ in range(200):  # a busy other conversation: rounds of one process mean nothing
        _call(a, "other", None)
    assert [] == a.settlements
    clock.now += 601  # no activity on the offload anywhere for longer than idle_seconds
    _call(b, "other", None)  # any worker's next call sweeps it
    (settled,) = b.settlements
    assert (SettleTrigger.IDLE, 2, 2) == (
        settled.trigger,
        settled.turns_carried,
        settled.remaining_turns,
    )
    clock.now += 601
    _call(a, "other", None)
    assert [] == a.settlements  # once, fleet-wide


def test_a_worker_that_exits_leaves_its_offloads_to_any_other(tmp_path: Path) -> None:
    clock = Clock()
    a, b, store = _workers(tmp_path, clock)
    record = _offload(a, store, "o1", "conv", clock)
    _call(a, "conv", record)
    del a  # the worker exits holding a live offload (nothing settled in it)
    clock.now += 7 * 24 * 3600 + 1  # past the store's retention
    _call(b, "later", None)
    (settled,) = b.settlements
    assert (SettleTrigger.EXPIRED, 1) == (settled.trigger, settled.turns_carried)


def test_a_compaction_the_store_keeps_settles_once_under_its_mechanism(tmp_path: Path) -> None:
    """A framework's compaction recorded with the store that keeps its record
    (a Deep Agents eviction: ``deepagents_eviction:c1``) accounts like an
    offload: worker A carries it once, worker B (which never recorded it)
    carries it twice and re-reads 4 000 of its tokens; one settlement,
    mechanism ``deepagents_eviction``, from both workers' accounts."""
    from seamscope.decisions.records import Compaction, OffloadMechanism

    clock = Clock()
    a, b, store = _workers(tmp_path, clock)
    record = StoredOffload(
        "deepagents_eviction:c1", "conv", "c1", "big_report", MODEL, "Tool result too large",
        OUTPUT_TOKENS, STUB_TOKENS, Decimal("0.3"), 5, 0.5, clock.now,
    )  # fmt: skip
    store.put(record, "/large_tool_results/c1")
    compaction = Compaction(
        "deepagents_eviction:c1", OffloadMechanism.DEEPAGENTS_EVICTION, MODEL, OUTPUT_TOKENS,
        STUB_TOKENS, ("c1",),
    )  # fmt: skip
    a.record_compaction(compaction, conversation_id="conv", store=store)
    _call(a, "conv", record)
    _call(b, "conv", record)
    b.record_recall(
        "conv", "deepagents_eviction:c1", model=MODEL, input_tokens=4_000.0, output_tokens=20,
        store=b.store,  # type: ignore[attr-defined]
    )  # fmt: skip
    _call(b, "conv", record)  # a slice read back: the preview still carried
    (settled,) = b.end_conversation("conv", store=b.store)  # type: ignore[attr-defined]
    assert [] == a.end_conversation("conv", store=a.store)  # type: ignore[attr-defined]
    saving = Decimal(str(OUTPUT_TOKENS)) * IN
    stub = Decimal(str(STUB_TOKENS)) * IN
    recall = Decimal("4000.0") * IN + 20 * Decimal(25) / 1_000_000
    assert (
        "deepagents_eviction:c1", OffloadMechanism.DEEPAGENTS_EVICTION, 3, 1, 3 * saving,
        3 * stub, recall, Decimal("0.3"),
    ) == (
        settled.offload_id, settled.mechanism, settled.turns_carried, settled.recalls,
        settled.realized_savings, settled.stub_carry_cost, settled.recall_cost,
        settled.predicted_net_saving,
    )  # fmt: skip
