"""benchmarks/bench_stores.py stays runnable against a real ``redis-server``, and
its JSON holds every figure. Counts are asserted (each Redis store call is one
round trip, as ``RedisStore``'s docstring says; the store calls of one turn);
timings never are. A subprocess, since it configures structlog as the
application it plays and starts its own ``redis-server``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e._support import require_executable

from seamscope.decisions import OffloadStore
from seamscope.stores import RedisStore

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_stores.py"
OPS = ("put", "recall", "offloads", "lookup", "add_1", "add_4", "claim")
STORES = ("memory", "sqlite", "redis")
CONFIGS = ("no_offload", "default", "memory", "sqlite", "redis")
# one turn of the scripted loop and its settlement, with a shared store
SHARED_CALLS = {"put": 1, "recall": 1, "offloads": 1, "add": 7, "claim": 1}


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def test_quick_run_writes_every_figure_and_one_redis_round_trip_per_call(tmp_path: Path) -> None:
    server = require_executable("/usr/bin/redis-server", "apt-get install redis-server")
    # what the counts below hold the store to
    assert "Each method is one round trip" in _one_line(RedisStore.__doc__)
    assert "(one round trip)" in _one_line(OffloadStore.add.__doc__)

    out = tmp_path / "stores.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out), "--redis-server", server],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| `claim` |" in done.stdout and "| `RedisStore` (loopback) |" in done.stdout
    figures = json.loads(out.read_text(encoding="utf-8"))

    assert figures["quick"] is True
    assert figures["redis_config"] == ["appendonly yes", "appendfsync everysec", 'save ""']
    assert figures["machine"]["redis"] and figures["machine"]["cpus"] >= 1
    assert figures["content_chars"] == 64_000
    assert figures["shapes"]["deltas_add_1"] == 1 and figures["shapes"]["deltas_add_4"] == 4
    n = figures["n"]
    assert n >= 200
    assert set(figures["ops"]) == set(STORES)
    for store in STORES:
        assert set(figures["ops"][store]) == set(OPS)
        for op in OPS:
            fig = figures["ops"][store][op]
            assert fig["n"] == n, (store, op)
            assert 0 < fig["p50_us"] <= fig["p99_us"] <= fig["max_us"], (store, op)

    # every Redis store call sent exactly one request (counted at the connection)
    for op in OPS:
        trips = figures["round_trips"][op]
        assert trips["per_call"] == [1], (op, trips)
        assert trips["total"] == trips["calls"] == n, (op, trips)
        commands = trips["commands_per_call"]
        if op in ("recall", "lookup"):  # a MULTI/EXEC pipeline
            assert commands["multi"] == commands["exec"] == 1, (op, commands)
            assert "evalsha" not in commands, (op, commands)
        else:  # one Lua script, already loaded
            assert commands["evalsha"] == 1, (op, commands)
            assert "eval" not in commands and "script" not in commands, (op, commands)

    growth = figures["growth"]
    assert set(growth) == set(STORES)
    for store in STORES:
        assert [row["offloads_before"] for row in growth[store]] == [64, 256], store
        assert all(0 < row["p50_us"] <= row["p99_us"] for row in growth[store]), store
    assert all(isinstance(row["records_kept"], int) for row in growth["memory"])

    e2e = figures["e2e"]
    assert e2e["model_calls_per_turn"] == 7 and e2e["carried_calls"] == 5
    configs = e2e["configs"]
    assert set(configs) == set(CONFIGS)
    assert configs["memory"]["turn_wall_ratio"] == 1.0
    for key in CONFIGS:
        fig = configs[key]
        assert fig["blocks"] == e2e["repeats"] == 3
        for name in ("turn_wall_us", "turn_cpu_us", "with_end_wall_us", "turn_wall_ratio"):
            assert fig[name] > 0, (key, name)
    # nothing offloaded: the store is never called; the in-memory store is not shared, so
    # the ledger keeps its accounts itself (no add, no claim)
    assert configs["no_offload"]["store_calls_per_turn"] == {}
    for key in ("default", "memory"):
        assert configs[key]["store_calls_per_turn"] == {"put": 1, "recall": 1}
    for key in ("sqlite", "redis"):
        assert configs[key]["store_calls_per_turn"] == SHARED_CALLS, key
    # Redis: one round trip per store call: put, 5 carried calls' adds, the recall and its
    # add, the last call's add; the settlement's offloads and claim
    assert configs["redis"]["round_trips_per_turn"] == [9]
    assert configs["redis"]["round_trips_per_settlement"] == [2]

    targets = figures["targets"]
    assert set(targets["redis_p99_per_round_trip"]["per_op_us"]) == set(OPS)
    assert isinstance(targets["redis_p99_per_round_trip"]["met"], bool)
    assert targets["default_no_slower"]["compared"]
