"""One Agents SDK conversation served by a fleet of worker processes equals one worker.

Each worker (:mod:`tests.fleet._openai_agents_worker`) is a real process built
from the environment only: the offload store from ``SEAMSCOPE_OFFLOAD_STORE``,
the SDK's ``SQLiteSession`` on one shared file. The scenario: ``logs`` (a
64 000-character output, 16 000 tokens at chars / 4: above the gate's
15 000, offloaded), ``hello``, ``hello``, ``recall``, ``hello``, ``hello``,
then the conversation ends.

* Baseline: one worker serves every turn and the end.
* Fleet: three workers serve the turns round-robin (turn i by worker i % 3);
  the worker due to serve turn 3 (the one that made the offload) is
  SIGKILLed and restarted just before it; the end is served by a worker
  that did not make the offload. With Redis, the server is restarted
  between turns 4 and 5.

Both run against SQLite (a fresh file per run) and a real ``redis-server``
(fresh per run). The fleet must equal the baseline: the recall answers the
full output on whichever worker serves it; every later model call on every
worker gets the stub (the session holds the full text); the realized
amounts, in order, and their exact sums; one settlement fleet-wide, the
baseline's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from tests._redis_server import RedisServer
from tests.e2e._support import child_env
from tests.fleet._fleet import Worker, totals
from tests.fleet._openai_agents_worker import LOGS_CHARS, SESSION_DB_ENV, digest, logs_text

pytestmark = pytest.mark.e2e

MODULE = "tests.fleet._openai_agents_worker"
CONVERSATION = "conv-fleet-7"
TURNS = ("logs", "hello", "hello", "recall", "hello", "hello")
KILLED_BEFORE = 3  # the worker due to serve this turn is SIGKILLed and restarted first
REDIS_RESTART_AFTER = 4  # Redis is restarted between this turn and the next
END_WORKER = 1  # serves the end; worker 0 made the offload (turn 0)
FLEET = 3

LOGS = logs_text()
LOGS_CALL = "call_0_logs"  # the user message "logs" is item 0
RECALL_CALL = "call_8_recall"  # logs: 4 items, each hello: 2 items


@dataclass
class Outcome:
    """What one run answered: each turn's answer, the end's, and every drain in order."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)
    drained: list[dict[str, Any]] = field(default_factory=list)

    @property
    def offload_id(self) -> str:
        """The offload id the stub in turn 0's second model call names."""
        seen = self.turns[0]["model_calls"][1]["outputs"][0]["text"]
        assert isinstance(seen, str) and seen.startswith("[offloaded "), seen
        return seen[len("[offloaded ") :].split(":", 1)[0]

    def accounts(self) -> list[dict[str, Any]]:
        return [_named(a, self.offload_id) for part in self.drained for a in part["accounts"]]

    def settled(self) -> list[dict[str, Any]]:
        return [_named(s, self.offload_id) for part in self.drained for s in part["settled"]]


def _named(record: dict[str, Any], offload_id: str) -> dict[str, Any]:
    """The record with this run's offload id written ``<offload>`` (ids are random)."""

    def name(value: Any) -> Any:
        return "<offload>" if value == offload_id else value

    out = {k: name(v) for k, v in record.items()}
    if "carried" in out:
        out["carried"] = [name(v) for v in out["carried"]]
    return out


# -- the stores -------------------------------------------------------------------------


@contextlib.contextmanager
def sqlite_store(folder: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    folder.mkdir()
    yield f"sqlite:///{folder / 'offloads.db'}", lambda: None


@contextlib.contextmanager
def redis_store(folder: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    folder.mkdir()
    server = RedisServer.start(folder)
    try:
        yield server.url, server.restart
    finally:
        server.stop()


STORES = {"sqlite": sqlite_store, "redis": redis_store}


def worker_env(store_url: str, session_db: Path) -> dict[str, str]:
    env = child_env(
        SEAMSCOPE_OFFLOAD_STORE=store_url,
        OPENAI_AGENTS_DISABLE_TRACING="1",
        **{SESSION_DB_ENV: str(session_db)},
    )
    env.pop("OPENAI_API_KEY", None)
    return env


# -- the runs -----------------------------------------------------------------------------


def run_baseline(folder: Path, kind: str) -> Outcome:
    """One worker serves every turn and the end."""
    outcome = Outcome()
    logs = folder / "logs"
    logs.mkdir(parents=True)
    with STORES[kind](folder / "store") as (url, _):
        worker = Worker("solo", MODULE, worker_env(url, folder / "session.db"), logs)
        try:
            for text in TURNS:
                answer = worker.call("turn", conversation=CONVERSATION, text=text)
                outcome.turns.append(answer)
                outcome.drained.append(answer)
            outcome.end = worker.call("end", conversation=CONVERSATION)
            outcome.drained.append(outcome.end)
            outcome.drained.append(worker.call("drain"))
        finally:
            worker.stop()
    return outcome


def run_fleet(folder: Path, kind: str) -> Outcome:
    """Three workers round-robin; a kill and restart before turn 3; the end
    elsewhere; with Redis, the server restarted between turns 4 and 5."""
    outcome = Outcome()
    logs = folder / "logs"
    logs.mkdir(parents=True)
    with STORES[kind](folder / "store") as (url, restart_store):
        env = worker_env(url, folder / "session.db")
        workers: list[Worker] = []
        try:
            with ThreadPoolExecutor(FLEET) as pool:  # each start imports the SDK: seconds
                starting = [pool.submit(Worker, f"w{i}", MODULE, env, logs) for i in range(FLEET)]
                for future in starting:
                    with contextlib.suppress(Exception):
                        workers.append(future.result())
            assert FLEET == len(workers), f"a worker did not start: see {logs}"
            for i, text in enumerate(TURNS):
                worker = workers[i % FLEET]
                if i == KILLED_BEFORE:
                    killed = worker.pid
                    worker.restart()
                    assert killed != worker.pid
                if i == REDIS_RESTART_AFTER + 1 and kind == "redis":
                    restart_store()
                answer = worker.call("turn", conversation=CONVERSATION, text=text)
                outcome.turns.append(answer)
                outcome.drained.append(answer)
            outcome.end = workers[END_WORKER].call("end", conversation=CONVERSATION)
            outcome.drained.append(outcome.end)
            outcome.drained.extend(w.call("drain") for w in workers)
        finally:
            for w in workers:
                w.stop()
    served = [t["pid"] for t in outcome.turns]
    assert FLEET + 1 == len(set(served))  # three workers, one of them restarted
    assert outcome.end["pid"] != served[0]
    return outcome


# -- what every run must show -----------------------------------------------------------------


def expected_views(offload_id: str) -> list[list[dict[str, Any]]]:
    """Each turn's model calls as the model saw them: the logs output is always
    the stub; the recall's answer (the full text) is the recall's own output."""
    stub = (
        f"[offloaded {offload_id}: {LOGS_CHARS // 4} tokens from fetch_logs; "
        f"call recall_tool_result(offload_id={offload_id!r}) to re-expand]"
    )
    logs = {"call_id": LOGS_CALL, "chars": len(stub), "sha256": digest(stub), "text": stub}
    back = {"call_id": RECALL_CALL, "chars": LOGS_CHARS, "sha256": digest(LOGS), "text": None}
    both = ["fetch_logs", "recall_tool_result"]

    def seen(user: str, tools: list[str], *outputs: dict[str, Any]) -> dict[str, Any]:
        return {"user": user, "tools": tools, "outputs": list(outputs)}

    return [
        [seen("logs", ["fetch_logs"]), seen("logs", both, logs)],
        [seen("hello", both, logs)],
        [seen("hello", both, logs)],
        [seen("recall", both, logs), seen("recall", both, logs, back)],
        [seen("hello", both, logs, back)],
        [seen("hello", both, logs, back)],
    ]


def expected_tool_outputs() -> list[list[dict[str, Any]]]:
    full = {"chars": LOGS_CHARS, "sha256": digest(LOGS)}
    return [
        [{"name": "fetch_logs", "call_id": LOGS_CALL, **full}],
        [],
        [],
        [{"name": "recall_tool_result", "call_id": RECALL_CALL, **full}],
        [],
        [],
    ]


def session_outputs(session_db: Path) -> dict[str, int]:
    """The function outputs the SDK's session holds, by call id: their lengths."""

    async def read() -> list[Any]:
        session = SQLiteSession(CONVERSATION, session_db)
        try:
            return await session.get_items()
        finally:
            session.close()

    return {
        item["call_id"]: len(item["output"])
        for item in asyncio.run(read())
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def check_run(outcome: Outcome, folder: Path) -> None:
    assert len(LOGS) == LOGS_CHARS
    assert expected_tool_outputs() == [t["tool_outputs"] for t in outcome.turns]
    assert ["done", "ok", "ok", "done", "ok", "ok"] == [t["final"] for t in outcome.turns]
    assert expected_views(outcome.offload_id) == [t["model_calls"] for t in outcome.turns]
    # the SDK's session (every worker's persistence) keeps the full text
    assert {LOGS_CALL: LOGS_CHARS, RECALL_CALL: LOGS_CHARS} == session_outputs(
        folder / "session.db"
    )


@pytest.mark.parametrize("kind", sorted(STORES))
def test_fleet_serves_the_conversation_as_one_worker(kind: str, tmp_path: Path) -> None:
    baseline = run_baseline(tmp_path / "baseline", kind)
    fleet = run_fleet(tmp_path / "fleet", kind)

    check_run(baseline, tmp_path / "baseline")
    check_run(fleet, tmp_path / "fleet")

    # the realized amounts, in order and summed exactly, are the baseline's
    assert baseline.accounts() == fleet.accounts()
    assert totals(baseline.drained) == totals(fleet.drained)
    assert 1 == sum(1 for a in baseline.accounts() if a["kind"] == "recall")

    # one settlement over the whole fleet, the baseline's
    settled = baseline.settled()
    assert 1 == len(settled)
    assert settled == fleet.settled()
    assert settled == [_named(s, fleet.offload_id) for s in fleet.end["settled"]]
    only = settled[0]
    assert ("<offload>", "conversation_end", 1) == (
        only["offload_id"],
        only["trigger"],
        only["recalls"],
    )
    assert only["turns"] > 0
    sums = totals(baseline.drained)
    assert (sums["saving"], sums["stub_carry"], sums["recall"]) == (
        Decimal(only["savings"]),
        Decimal(only["stub_carry"]),
        Decimal(only["recall_cost"]),
    )
    costs = sums["stub_carry"] + sums["cache"] + sums["recall"]
    assert Decimal(only["net"]) == sums["saving"] - costs
