"""One Deep Agents conversation served by a fleet of real worker processes.

Four turns ("logs": Deep Agents evicts the 64,000-character log to its
backend and leaves a preview; "read": the agent reads 100 lines of that
file back) and the end of the conversation, served (a) by one worker, (b)
by three workers round-robin that share only LangGraph's SQLite checkpoints
and the SQLite offload store: the read is served by a worker that did not
see the eviction, which is SIGKILLed and restarted just before it, and the
end by another. The fleet must account exactly as the single worker: the
same realized amounts in the same order (the preview carried, the read its
recall, exact Decimal), and one settlement fleet-wide, the baseline's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.e2e._support import child_env
from tests.fleet._fleet import Worker, totals
from tests.fleet._langchain_worker import CHECKPOINTS_ENV

from seamscope.stores import ENV_VAR

pytest.importorskip("deepagents", reason="Deep Agents is not installed: pip install -e '.[test]'")

pytestmark = pytest.mark.e2e

MODULE = "tests.fleet._deepagents_worker"
CONVERSATION = "conv-deep-fleet"
TURNS = ("logs", "hello", "read", "hello")
FLEET = 3
KILLED_BEFORE = 2  # the read: served by a fresh process that never saw the eviction
EVICTION = "deepagents_eviction:call-2"  # the call id the model gives fetch_logs


def play(run_dir: Path, workers: int, *, kill_before: int | None, end_by: int) -> dict[str, Any]:
    run_dir.mkdir()
    env = child_env(
        **{
            ENV_VAR: f"sqlite:///{run_dir / 'offloads.db'}",
            CHECKPOINTS_ENV: str(run_dir / "checkpoints.db"),
        }
    )
    fleet: list[Worker] = []
    try:
        with ThreadPoolExecutor(workers) as pool:
            starting = [
                pool.submit(Worker, f"worker-{i}", MODULE, env, run_dir) for i in range(workers)
            ]
        fleet = [future.result() for future in starting]
        answers: list[dict[str, Any]] = []
        drained: list[dict[str, Any]] = []
        for index, text in enumerate(TURNS):
            if index == kill_before:
                fleet[index % workers].restart()
            answer = fleet[index % workers].call("turn", conversation=CONVERSATION, text=text)
            answers.append(answer)
            drained.append({"accounts": answer["accounts"], "settled": answer["settled"]})
        drained.append(fleet[end_by].call("end", conversation=CONVERSATION))
        drained.extend(worker.call("drain") for worker in fleet)
        return {
            "answers": [(a["answer"], a["read_chars"]) for a in answers],
            "accounts": [a for part in drained for a in part["accounts"]],
            "settled": [s for part in drained for s in part["settled"]],
            "totals": totals(drained),
            "starts": [w.starts for w in fleet],
        }
    finally:
        for worker in fleet:
            worker.stop()


def test_an_eviction_read_back_by_another_worker_accounts_as_one_worker(tmp_path: Path) -> None:
    baseline = play(tmp_path / "baseline", 1, kill_before=None, end_by=0)
    fleet = play(tmp_path / "fleet", FLEET, kill_before=KILLED_BEFORE, end_by=1)

    assert [1] == baseline["starts"]
    assert [1, 1, 2] == fleet["starts"]  # worker 2 was killed and restarted before the read
    assert baseline["answers"] == fleet["answers"]
    _, read = baseline["answers"][2]
    assert 1 == len(read) and read[0] > 0  # the read turn read the file once
    # the same realized amounts, in the same order: the preview carried by every
    # call after the eviction, the read the eviction's recall
    assert baseline["accounts"] == fleet["accounts"]
    assert [EVICTION] == [a["offload_id"] for a in fleet["accounts"] if a["kind"] == "recall"]
    assert baseline["totals"] == fleet["totals"]
    (settled,) = baseline["settled"]
    assert [settled] == fleet["settled"]  # once, fleet-wide, the baseline's
    assert (EVICTION, "conversation_end", 1) == (
        settled["offload_id"],
        settled["trigger"],
        settled["recalls"],
    )
    assert settled["turns"] > 0
