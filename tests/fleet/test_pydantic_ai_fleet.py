"""One pydantic-ai conversation served by a fleet of worker processes.

The workers (``tests.fleet._pydantic_ai_worker``) share only what production
shares: the message history the application saves and reloads (a SQLite
file) and the offload store ``SEAMSCOPE_OFFLOAD_STORE`` names (SQLite or a
real Redis server). The scenario (six turns, then the end) is run twice per
store: by ONE worker (the baseline) and by THREE workers round-robin, the
worker due to serve the recall SIGKILLed and restarted just before it, the
Redis server restarted between turns 4 and 5, the end served by a worker that
did not make the offload. Whatever worker serves a turn, the recall answers
the whole output, the recall tool is offered whenever the history holds the
stub, the realized amounts are the baseline's and the offload is settled
exactly once, as the baseline settles it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests._redis_server import RedisServer
from tests.e2e._support import child_env
from tests.fleet._fleet import Worker, totals
from tests.fleet._pydantic_ai_worker import HISTORY_ENV, LOGS_CHARS, digest, logs_text

pytestmark = pytest.mark.e2e

MODULE = "tests.fleet._pydantic_ai_worker"
CONVERSATION = "conv-fleet"
SCENARIO = ("logs", "hello", "hello", "recall", "hello", "hello")
RECALL = "recall_tool_result"
KILLED_BEFORE = 3  # the recall turn: its worker is SIGKILLed and restarted first
REDIS_RESTART_BEFORE = 5
_STUB = re.compile(r"^\[offloaded (\S+): ")
STUB = (
    "[offloaded <id>: 16000 tokens from fetch_logs; "
    "call recall_tool_result(offload_id='<id>') to re-expand]"
)

# -- the offload stores, fresh per run ---------------------------------------------------


@contextmanager
def sqlite_store(directory: Path) -> Iterator[tuple[str, RedisServer | None]]:
    yield f"sqlite:///{directory / 'offloads.db'}", None


@contextmanager
def redis_store(directory: Path) -> Iterator[tuple[str, RedisServer | None]]:
    folder = directory / "redis"
    folder.mkdir()
    server = RedisServer.start(folder)
    try:
        yield server.url, server
    finally:
        server.stop()


STORES = {"sqlite": sqlite_store, "redis": redis_store}


# -- one run of the scenario ---------------------------------------------------------------


@contextmanager
def workers(count: int, directory: Path, store_url: str) -> Iterator[list[Worker]]:
    env = child_env(
        SEAMSCOPE_OFFLOAD_STORE=store_url, **{HISTORY_ENV: str(directory / "history.db")}
    )
    started: list[Worker] = []
    try:
        for n in range(count):
            started.append(Worker(f"worker{n}", MODULE, env, directory))
        yield started
    finally:
        for worker in started:
            worker.stop()


def run_scenario(directory: Path, store: str, *, fleet: bool) -> dict[str, Any]:
    """The scenario's answers: per turn, the end's, and every worker's last drain."""
    directory.mkdir()
    with STORES[store](directory) as (url, redis), workers(3 if fleet else 1, directory, url) as ws:
        turns: list[dict[str, Any]] = []
        restarted: list[bool] = []  # the Redis server restarted (a new process)
        for index, text in enumerate(SCENARIO):
            worker = ws[index % len(ws)]
            if fleet and index == KILLED_BEFORE:
                worker.restart()  # SIGKILL by PID, then a fresh process
            if fleet and redis is not None and index == REDIS_RESTART_BEFORE:
                before = redis.pid
                redis.restart()
                restarted.append(before != redis.pid)
            answer = worker.call("turn", conversation=CONVERSATION, text=text)
            turns.append({**answer, "worker": worker.name, "starts": worker.starts})
        offloader = turns[0]["worker"]
        enders = [w for w in ws if w.name != offloader] if fleet else ws
        # the end is served by a worker that did not make the offload; in the
        # fleet the others end the conversation too (it must settle once)
        ends = [enders[0].call("end", conversation=CONVERSATION)]
        if fleet:
            ends += [w.call("end", conversation=CONVERSATION) for w in ws if w is not enders[0]]
        drains = [w.call("drain") for w in ws]
    return {
        "turns": turns,
        "ends": ends,
        "drains": drains,
        "end_worker": enders[0].name,
        "redis_restarted": restarted,
    }


# -- views --------------------------------------------------------------------------------


def offload_ids(run: dict[str, Any]) -> list[str]:
    """The offload ids the run's records name, in order of first appearance."""
    seen: dict[str, None] = {}
    for part in parts(run):
        for a in part["accounts"]:
            for i in a.get("carried", [a.get("offload_id")]):
                if i is not None:
                    seen.setdefault(i)
        for s in part["settled"]:
            seen.setdefault(s["offload_id"])
    return list(seen)


def parts(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every drained record set of the run, in the order it was served."""
    return [*run["turns"], *run["ends"], *run["drains"]]


def normalized(run: dict[str, Any]) -> dict[str, Any]:
    """The run's records with each offload id replaced by its ordinal (the
    gate's ids are random: one per offload, different in each run)."""
    names = {i: f"offload#{n}" for n, i in enumerate(offload_ids(run))}
    accounts: list[dict[str, Any]] = []
    settled: list[dict[str, Any]] = []
    for part in parts(run):
        for a in part["accounts"]:
            a = dict(a)
            if "carried" in a:
                a["carried"] = [names[i] for i in a["carried"]]
            else:
                a["offload_id"] = names[a["offload_id"]]
            accounts.append(a)
        settled += [{**s, "offload_id": names[s["offload_id"]]} for s in part["settled"]]
    return {"accounts": accounts, "settled": settled}


def returns_view(turn: dict[str, Any]) -> list[tuple[Any, ...]]:
    view: list[tuple[Any, ...]] = []
    for r in turn["returns"]:
        if "retry" in r:
            view.append(("retry", r["retry"], r["text"]))
        elif r["text"] is not None:
            found = _STUB.match(r["text"])
            text = r["text"] if found is None else r["text"].replace(found.group(1), "<id>")
            view.append((r["tool"], text))
        else:
            view.append((r["tool"], r["length"], r["sha256"]))
    return view


EXPECTED_RETURNS = [
    [("fetch_logs", STUB)],
    [],
    [],
    [(RECALL, LOGS_CHARS, digest(logs_text()))],
    [],
    [],
]
# per request of each turn: (the history holds the stub, the recall tool is offered)
EXPECTED_REQUESTS = [
    [(False, False), (True, True)],
    [(True, True)],
    [(True, True)],
    [(True, True), (True, True)],
    [(True, True)],
    [(True, True)],
]


def check_run(run: dict[str, Any]) -> None:
    """What holds of one run whatever served it."""
    assert [CONVERSATION] * len(SCENARIO) == [t["conversation_id"] for t in run["turns"]]
    assert ["done", "ok", "ok", "done", "ok", "ok"] == [t["output"] for t in run["turns"]]
    assert EXPECTED_RETURNS == [returns_view(t) for t in run["turns"]]
    assert EXPECTED_REQUESTS == [
        [(r["stub"], r["recall_offered"]) for r in t["requests"]] for t in run["turns"]
    ]
    # one offload; the stub in the history names it
    [offload_id] = offload_ids(run)
    stub = run["turns"][0]["returns"][0]["text"]
    assert STUB.replace("<id>", offload_id) == stub


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_fleet_serves_the_conversation_as_one_worker_does(store: str, tmp_path: Path) -> None:
    assert LOGS_CHARS == len(logs_text())
    baseline = run_scenario(tmp_path / "baseline", store, fleet=False)
    fleet = run_scenario(tmp_path / "fleet", store, fleet=True)

    check_run(baseline)
    check_run(fleet)
    # the fleet really was a fleet: round-robin, the recall's worker a fresh
    # process, the end on a worker that did not make the offload
    assert ["worker0", "worker1", "worker2"] * 2 == [t["worker"] for t in fleet["turns"]]
    assert [1, 1, 1, 2, 1, 1] == [t["starts"] for t in fleet["turns"]]
    assert fleet["turns"][0]["pid"] != fleet["turns"][3]["pid"]
    assert "worker0" != fleet["end_worker"]
    assert fleet["turns"][0]["pid"] != fleet["ends"][0]["pid"]
    assert ([True] if store == "redis" else []) == fleet["redis_restarted"]

    expected, actual = normalized(baseline), normalized(fleet)
    # the realized amounts: the same sequence, the same exact sums
    assert expected["accounts"] == actual["accounts"]
    assert totals(parts(baseline)) == totals(parts(fleet))
    # settled exactly once over every worker, as the baseline settles it
    [settlement] = expected["settled"]
    assert [settlement] == actual["settled"]
    assert [1, 0, 0] == [len(e["settled"]) for e in fleet["ends"]]  # the first end settles
    assert settlement["turns"] > 0
    assert 1 == settlement["recalls"]
    sums = totals(parts(baseline))
    assert (sums["saving"], sums["stub_carry"], sums["recall"]) == (
        Decimal(settlement["savings"]),
        Decimal(settlement["stub_carry"]),
        Decimal(settlement["recall_cost"]),
    )
