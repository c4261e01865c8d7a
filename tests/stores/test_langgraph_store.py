"""LangGraphStore beyond the shared contract: the PostgresStore internals its
claims rely on (a tripwire), claims raced by two processes on connections of
their own against a real PostgreSQL, data that outlives a connection,
``shared``, the best-effort path, and construction checks."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore

from seamscope.decisions.records import AccountDelta, AccountTotals, Recalled, RecallStatus
from seamscope.stores import LangGraphStore

from .test_store_contract import OUTPUT, record


def _namespace() -> tuple[str, ...]:
    return ("t", uuid.uuid4().hex)


def test_the_postgres_store_internals_are_the_ones_relied_on(
    postgres_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Tripwire: langgraph-checkpoint-postgres changed what ``_postgres_insert``
    (src/seamscope/stores/_langgraph.py) relies on when this fails."""
    from langgraph.store.postgres.base import MIGRATIONS, _namespace_to_text

    schema = " ".join(MIGRATIONS[0].split())
    for part in (
        "CREATE TABLE IF NOT EXISTS store (",
        "prefix text NOT NULL,",
        "key text NOT NULL,",
        "value jsonb NOT NULL,",
        "PRIMARY KEY (prefix, key)",
    ):
        assert part in schema
    assert "a.b" == _namespace_to_text(("a", "b"))
    pg = postgres_server.store()
    assert pg.MIGRATIONS is MIGRATIONS
    with pg._cursor(pipeline=True) as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = 'store' AND column_name IN ('prefix', 'key', 'value')"
        )
        columns = {row["column_name"]: row["data_type"] for row in cur.fetchall()}
        cur.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'store'::regclass"
            " AND i.indisprimary"
        )
        primary = {row["attname"] for row in cur.fetchall()}
    assert {"prefix": "text", "key": "text", "value": "jsonb"} == columns
    assert {"prefix", "key"} == primary

    namespace = _namespace()
    with caplog.at_level(logging.WARNING, logger="seamscope.stores"):
        store = LangGraphStore(pg, namespace=namespace)
    assert [] == caplog.records
    assert store._insert is not None
    assert store.claim("o1") is None  # unknown: no claim item is written
    assert pg.get((*namespace, "claims"), "o1") is None
    store.put(record("o1"), OUTPUT)
    assert store.claim("o1") is not None
    assert store.claim("o1") is None
    claim = pg.get((*namespace, "claims"), "o1")  # an ordinary item of the store
    assert claim is not None and {"claimed_at", "token"} == set(claim.value)


def test_unknown_postgres_internals_fall_back_to_best_effort_claims_with_a_warning(
    postgres_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Changed(PostgresStore):
        MIGRATIONS = ("CREATE TABLE IF NOT EXISTS store_items (id text PRIMARY KEY);",)

    postgres_server.store()  # the real store table exists (it is where items still go)
    with caplog.at_level(logging.WARNING, logger="seamscope.stores"):
        store = LangGraphStore(Changed(postgres_server.connect()), namespace=_namespace())
    assert store._insert is None
    assert any("best-effort" in r.getMessage() for r in caplog.records)
    store.put(record("o1"), OUTPUT)
    store.add([AccountDelta("o1", Decimal("0.1"), turns=1)])
    claimed = store.claim("o1")
    assert claimed is not None and AccountTotals(Decimal("0.1"), turns=1) == claimed.totals
    assert store.claim("o1") is None


_RACER = """
import json, sys
from decimal import Decimal

import psycopg
from langgraph.store.postgres import PostgresStore
from psycopg.rows import dict_row

from seamscope.decisions.records import AccountDelta
from seamscope.stores import LangGraphStore

dsn, namespace, ids = sys.argv[1], tuple(json.loads(sys.argv[2])), json.loads(sys.argv[3])
with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
    store = LangGraphStore(PostgresStore(conn), namespace=namespace)
    print("ready", flush=True)
    sys.stdin.readline()
    store.add([AccountDelta(i, savings=Decimal("0.1"), turns=1) for i in ids])
    print("added", flush=True)
    sys.stdin.readline()
    won = {}
    for i in ids:
        claimed = store.claim(i)
        if claimed is not None:
            won[i] = [str(claimed.totals.savings), str(claimed.totals.stub_cost),
                      claimed.totals.turns]
    print(json.dumps(won), flush=True)
"""


@pytest.fixture
def racers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(10)
        stderr = process.stderr.read() if process.stderr else ""
        pytest.fail(f"racer exited with {process.returncode}:\n{stderr}", pytrace=False)
    return line.strip()


def _say(processes: Sequence[subprocess.Popen[str]], expected: str) -> None:
    """Wait until every racer said ``expected``, then let them all go at once."""
    for process in processes:
        assert expected == _line(process)
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


def test_two_processes_racing_claim_each_offload_once_with_exact_sums(
    postgres_server: Any, racers: list[subprocess.Popen[str]]
) -> None:
    namespace = _namespace()
    ids = [f"o{n}" for n in range(20)]
    store = LangGraphStore(postgres_server.store(), namespace=namespace)
    for offload_id in ids:
        store.put(record(offload_id), OUTPUT)
    store.add([AccountDelta(i, stub_cost=Decimal("0.0000001375"), turns=1) for i in ids])
    for _ in range(2):
        racers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RACER,
                    postgres_server.dsn,
                    json.dumps(namespace),
                    json.dumps(ids),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    _say(racers, "ready")  # both connected: both add their deltas at once
    _say(racers, "added")  # every delta written: both claim at once
    won = [json.loads(_line(process)) for process in racers]
    for process in racers:
        assert 0 == process.wait(30)
    assert sorted(ids) == sorted([*won[0], *won[1]])  # each exactly once in total
    for savings, stub_cost, turns in (*won[0].values(), *won[1].values()):
        assert (Decimal("0.2"), Decimal("0.0000001375"), 3) == (
            Decimal(savings),
            Decimal(stub_cost),
            turns,
        )
    assert all(store.claim(i) is None for i in ids)


def test_content_and_accounts_outlive_the_connection(postgres_server: Any) -> None:
    namespace = _namespace()
    first_pg = postgres_server.store()
    first = LangGraphStore(first_pg, namespace=namespace)
    first.put(record("o1"), OUTPUT)
    first.add([AccountDelta("o1", Decimal("0.08000125"), Decimal("0.0001375"), turns=1)])
    first.add([AccountDelta("o1", recall_cost=Decimal("0.08125125"), recalls=1)])
    first.close()
    first_pg.conn.close()

    second = LangGraphStore(postgres_server.store(), namespace=namespace)
    assert Recalled(RecallStatus.FOUND, OUTPUT) == second.recall("conv-1", "o1")
    claimed = second.claim("o1")
    assert claimed is not None
    assert (
        AccountTotals(
            Decimal("0.08000125"),
            Decimal("0.0001375"),
            Decimal("0.08125125"),
            turns=1,
            recalls=1,
        )
        == claimed.totals
    )


def test_shared_unless_the_store_is_langgraphs_in_memory_store(postgres_server: Any) -> None:
    assert LangGraphStore(InMemoryStore()).shared is False
    assert LangGraphStore(postgres_server.store(), namespace=_namespace()).shared is True


class _Elsewhere(BaseStore):
    """A BaseStore that is neither PostgresStore nor InMemoryStore."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:  # pragma: no cover - unused
        return await self.inner.abatch(ops)


def test_any_other_base_store_claims_best_effort_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="seamscope.stores"):
        store = LangGraphStore(_Elsewhere())
    assert store.shared is True
    assert any("best-effort" in r.getMessage() for r in caplog.records)
    store.put(record("o1"), OUTPUT)
    store.add([AccountDelta("o1", Decimal("0.1"), turns=1)])
    claimed = store.claim("o1")
    assert claimed is not None and AccountTotals(Decimal("0.1"), turns=1) == claimed.totals
    assert store.claim("o1") is None
    assert store.claim("unknown") is None


def test_ids_that_are_not_namespace_labels_keep_their_accounts() -> None:
    store = LangGraphStore(InMemoryStore())
    for offload_id in ("a.b", "a%2Eb", "%", ""):
        store.put(record(offload_id), OUTPUT)
        store.add([AccountDelta(offload_id, Decimal("0.1"), turns=len(offload_id))])
    for offload_id in ("a.b", "a%2Eb", "%", ""):
        claimed = store.claim(offload_id)
        assert claimed is not None
        assert AccountTotals(Decimal("0.1"), turns=len(offload_id)) == claimed.totals


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"store": object()}, "store"),
        ({"store": {}}, "store"),
        ({"namespace": ()}, "namespace"),
        ({"namespace": ["seamscope"]}, "namespace"),
        ({"namespace": ("seamscope", "")}, "namespace"),
        ({"namespace": ("seamscope", 1)}, "namespace"),
        ({"namespace": ("sea.mscope",)}, "namespace"),
        ({"namespace": ("langgraph", "offloads")}, "namespace"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": float("nan")}, "ttl_seconds"),
        ({"max_items": 0}, "max_items"),
        ({"max_items": True}, "max_items"),
        ({"clock": 1.0}, "clock"),
    ],
)
def test_bad_construction_values_name_the_class_and_field(
    changes: dict[str, Any], field: str
) -> None:
    options: dict[str, Any] = {"store": InMemoryStore(), **changes}
    store = options.pop("store")
    with pytest.raises(ValueError, match=rf"LangGraphStore\.{field}\b"):
        LangGraphStore(store, **options)
