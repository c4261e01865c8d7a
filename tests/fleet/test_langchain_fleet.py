"""One LangChain conversation served by a fleet of real worker processes.

Six turns ("logs" offloads a 64,000-character output, "recall" brings it
back) and the end of the conversation, served (a) by one worker, (b) by
three workers round-robin that share only LangGraph's SQLite checkpoints
and the offload store: the worker due to serve the recall is SIGKILLed and
restarted just before it, and the end is served by a worker that did not
make the offload. The fleet must answer and account exactly as the single
worker: every recall answers the whole output, the same realized amounts in
the same order (exact Decimal sums), and one settlement fleet-wide, the
baseline's. Stores: SQLite and Redis named by ``SEAMSCOPE_OFFLOAD_STORE``
(the Redis server restarted between turns 4 and 5 of the fleet run), and
the agent's own LangGraph ``PostgresStore`` with no variable set.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests._postgres_server import PostgresServer
from tests._redis_server import RedisServer
from tests.e2e._support import child_env
from tests.fleet._fleet import Worker, totals
from tests.fleet._langchain_worker import CHECKPOINTS_ENV, LOG_CHARS, POSTGRES_ENV, logs_text

from seamscope.loop import RECALL_TOOL
from seamscope.stores import ENV_VAR

pytestmark = pytest.mark.e2e

MODULE = "tests.fleet._langchain_worker"
CONVERSATION = "conv-fleet"
TURNS = ("logs", "hello", "hello", "recall", "hello", "hello")
KILLED_BEFORE = 3  # the worker due to serve this turn is SIGKILLed and restarted first
STORE_RESTARTED_BEFORE = 5  # the Redis server restarts between turns 4 and 5
FLEET = 3
OFFLOAD = "<offload>"
# the stub is carried by turn 0's answer call, turns 1 and 2 and the call of
# turn 3 that asks for the recall; then the output is back in the prompt
CARRIED_AND_RECALLED = (4, 1)

# what each turn's ToolMessages are (a stub's text names the run's offload id)
STUB = {"name": "fetch_logs", "stub": True}
RECALLED = {
    "name": RECALL_TOOL,
    "chars": LOG_CHARS,
    "sha256": hashlib.sha256(logs_text().encode()).hexdigest(),
    "stub_id": None,
}
EXPECTED_TOOLS = [[STUB], [], [], [RECALLED], [], []]
EXPECTED_ANSWERS = ["done", "ok", "ok", "done", "ok", "ok"]


@dataclass
class Played:
    """What one run of the scenario answered and recorded."""

    answers: list[dict[str, Any]]  # per turn
    drained: list[dict[str, Any]]  # every drain, in order: turns, end, then every worker
    starts: list[int]  # how many times each worker was started
    served: list[int]  # which worker served each turn


Between = Callable[[int, list[Worker]], None]


def play(run_dir: Path, env: dict[str, str], workers: int, before: Between, end_by: int) -> Played:
    """The scenario on ``workers`` workers: turn i by worker i % workers
    (``before(i, fleet)`` first), the end by worker ``end_by``."""
    run_dir.mkdir()
    env = {**env, CHECKPOINTS_ENV: str(run_dir / "checkpoints.db")}
    fleet: list[Worker] = []
    try:
        # started side by side (each imports LangChain for seconds)
        with ThreadPoolExecutor(workers) as pool:
            starting = [
                pool.submit(Worker, f"worker-{index}", MODULE, env, run_dir)
                for index in range(workers)
            ]
        failures = []
        for future in starting:
            try:
                fleet.append(future.result())
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]
        answers: list[dict[str, Any]] = []
        drained: list[dict[str, Any]] = []
        served: list[int] = []
        for index, text in enumerate(TURNS):
            before(index, fleet)
            answer = fleet[index % workers].call("turn", conversation=CONVERSATION, text=text)
            served.append(index % workers)
            answers.append(answer)
            drained.append({"accounts": answer["accounts"], "settled": answer["settled"]})
        drained.append(fleet[end_by].call("end", conversation=CONVERSATION))
        drained.extend(worker.call("drain") for worker in fleet)
        return Played(answers, drained, [w.starts for w in fleet], served)
    finally:
        for worker in fleet:
            worker.stop()


def nothing(index: int, fleet: list[Worker]) -> None:
    return None


def normalized(played: Played) -> tuple[list[Any], list[Any], list[Any], list[str]]:
    """(ToolMessages per turn, realized amounts in order, settlements, final
    answers), the run's offload id written ``<offload>``; every id met must be it."""
    [first] = played.answers[0]["tools"]
    offload_id = first["stub_id"]
    assert isinstance(offload_id, str) and offload_id

    def same(found: str) -> str:
        assert offload_id == found
        return OFFLOAD

    tools = [
        [
            {"name": t["name"], "stub": True} if t["stub_id"] is not None else t
            for t in answer["tools"]
        ]
        for answer in played.answers
    ]
    for answer in played.answers:
        for t in answer["tools"]:
            if t["stub_id"] is not None:
                same(t["stub_id"])
    accounts: list[dict[str, Any]] = []
    settled: list[dict[str, Any]] = []
    for part in played.drained:
        for a in part["accounts"]:
            if a["kind"] == "model_call":
                accounts.append({**a, "carried": [same(i) for i in a["carried"]]})
            else:
                accounts.append({**a, "offload_id": same(a["offload_id"])})
        settled.extend({**s, "offload_id": same(s["offload_id"])} for s in part["settled"])
    return tools, accounts, settled, [answer["answer"] for answer in played.answers]


def check(baseline: Played, fleet: Played) -> dict[str, Any]:
    """The fleet answered and accounted exactly as the single worker did."""
    assert [0] * len(TURNS) == baseline.served
    assert [i % FLEET for i in range(len(TURNS))] == fleet.served
    assert [1] == baseline.starts
    assert [2, 1, 1] == fleet.starts  # worker 0 was killed and restarted before turn 3
    base_tools, base_accounts, base_settled, base_answers = normalized(baseline)
    tools, accounts, settled, answers = normalized(fleet)
    # every recall answered the whole output, on whichever worker served it
    assert EXPECTED_TOOLS == base_tools
    assert EXPECTED_TOOLS == tools
    assert EXPECTED_ANSWERS == base_answers
    assert EXPECTED_ANSWERS == answers
    # the same realized amounts in the same order, and the same exact sums
    assert base_accounts == accounts
    assert totals(baseline.drained) == totals(fleet.drained)
    # one settlement fleet-wide, the baseline's
    expected: dict[str, Any]
    [expected] = base_settled
    assert [expected] == settled
    assert "conversation_end" == expected["trigger"]
    assert expected["turns"] > 0
    assert 1 == expected["recalls"]
    return expected


def scenario(
    tmp_path: Path,
    name: str,
    store: Callable[[Path], contextlib.AbstractContextManager[tuple[dict[str, str], Between]]],
) -> dict[str, Any]:
    """Baseline and fleet, each with a fresh store from ``store(dir)``."""
    with store(tmp_path / f"{name}-baseline-store") as (env, _):
        baseline = play(tmp_path / f"{name}-baseline", env, 1, nothing, end_by=0)
    with store(tmp_path / f"{name}-fleet-store") as (env, restart_store):

        def before(index: int, fleet: list[Worker]) -> None:
            if index == KILLED_BEFORE:
                fleet[index % FLEET].restart()
            restart_store(index, fleet)

        # the end by a worker that did not make the offload (worker 0 made it)
        fleet = play(tmp_path / f"{name}-fleet", env, FLEET, before, end_by=1)
    return check(baseline, fleet)


@contextlib.contextmanager
def sqlite_store(directory: Path) -> Iterator[tuple[dict[str, str], Between]]:
    directory.mkdir()
    yield child_env(**{ENV_VAR: f"sqlite:///{directory / 'offloads.db'}"}), nothing


@contextlib.contextmanager
def redis_store(directory: Path) -> Iterator[tuple[dict[str, str], Between]]:
    directory.mkdir()
    server = RedisServer.start(directory)

    def restart(index: int, fleet: list[Worker]) -> None:
        if index == STORE_RESTARTED_BEFORE:
            server.restart()

    try:
        yield child_env(**{ENV_VAR: server.url}), restart
    finally:
        server.stop()


@contextlib.contextmanager
def postgres_store(directory: Path) -> Iterator[tuple[dict[str, str], Between]]:
    server = PostgresServer.start(directory)
    try:
        yield child_env(**{POSTGRES_ENV: server.dsn}), nothing
    finally:
        server.stop()


def test_sqlite_store_fleet_accounts_as_one_worker(tmp_path: Path) -> None:
    settlement = scenario(tmp_path, "sqlite", sqlite_store)
    assert CARRIED_AND_RECALLED == (settlement["turns"], settlement["recalls"])


def test_redis_store_fleet_accounts_as_one_worker_across_a_redis_restart(
    tmp_path: Path,
) -> None:
    settlement = scenario(tmp_path, "redis", redis_store)
    assert CARRIED_AND_RECALLED == (settlement["turns"], settlement["recalls"])


def test_langgraph_postgres_store_fleet_accounts_as_one_worker(tmp_path: Path) -> None:
    settlement = scenario(tmp_path, "postgres", postgres_store)
    assert CARRIED_AND_RECALLED == (settlement["turns"], settlement["recalls"])


@pytest.mark.parametrize(
    "store", [sqlite_store, postgres_store], ids=["sqlite", "langgraph-postgres"]
)
def test_the_end_served_by_a_worker_that_never_saw_the_conversation_settles_it(
    tmp_path: Path,
    store: Callable[[Path], contextlib.AbstractContextManager[tuple[dict[str, str], Between]]],
) -> None:
    """A worker started after the offload (a deploy) ends the conversation:
    its offload is settled there, once, fleet-wide."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with store(tmp_path / "store") as (env, _):
        env = {**env, CHECKPOINTS_ENV: str(run_dir / "checkpoints.db")}
        made = Worker("made", MODULE, env, run_dir)
        try:
            fresh = Worker("fresh", MODULE, env, run_dir)
            try:
                for text in ("logs", "hello"):
                    made.call("turn", conversation=CONVERSATION, text=text)
                ended = fresh.call("end", conversation=CONVERSATION)["settled"]
                rest = made.call("drain")["settled"]
            finally:
                fresh.stop()
        finally:
            made.stop()
    assert [(2, 0, "conversation_end")] == [(s["turns"], s["recalls"], s["trigger"]) for s in ended]
    assert [] == rest
