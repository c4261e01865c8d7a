"""Real worker processes serving one conversation, for the many-worker tests.

A worker is ``python -m tests.fleet.<module>``: a long-lived process that
reads one JSON command per line on standard input and answers one JSON line
on standard output (:func:`serve`), like a replica behind a load balancer
that shares only the framework's persistence and the offload store named by
``SEAMSCOPE_OFFLOAD_STORE``. :class:`Worker` starts it, kills it (SIGKILL,
by PID) and restarts it; :class:`Recorder` is the observer a worker's
``DecisionLayer`` uses: the OTel observer, plus every realized amount and
settlement kept as exact Decimal strings for the test to compare.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from seamscope.decisions.records import (
    ModelCallAccount,
    RecallAccount,
    Settlement,
)
from seamscope.telemetry import OTelObserver

ROOT = Path(__file__).resolve().parents[2]
_ANSWER_TIMEOUT_S = 120.0


class Worker:
    """One worker process; ``call(op, **args)`` sends a command and returns its answer."""

    def __init__(self, name: str, module: str, env: Mapping[str, str], log_dir: Path) -> None:
        self.name, self.module, self.env, self.log_dir = name, module, dict(env), log_dir
        self.starts = 0
        self.popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.starts += 1
        self._log = (self.log_dir / f"{self.name}-{self.starts}.log").open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", self.module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=self.env,
            cwd=ROOT,
        )
        try:
            assert "ready" == self.call("ping")["pong"]
        except BaseException:
            self.kill()  # a worker that never answered is not left running
            raise

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        popen = self.popen
        assert popen is not None and popen.stdin is not None and popen.stdout is not None
        popen.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        popen.stdin.flush()
        ready, _, _ = select.select([popen.stdout], [], [], _ANSWER_TIMEOUT_S)
        line = popen.stdout.readline() if ready else b""
        if not line:
            raise AssertionError(f"{self.name} gave no answer to {op!r}: see {self.log_dir}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"{self.name} failed {op!r}: {answer['error']}")
        return answer

    def kill(self) -> None:
        """SIGKILL by PID: nothing the worker held in memory survives."""
        if self.popen is not None and self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)
        self._close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            try:
                self.call("exit")
                self.popen.wait(timeout=10)
            except Exception:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        if self.popen is not None:
            for stream in (self.popen.stdin, self.popen.stdout):
                if stream is not None:
                    stream.close()
        if self._log is not None:
            self._log.close()
            self._log = None


def serve(handlers: Mapping[str, Callable[..., Mapping[str, Any]]]) -> None:
    """The worker's loop: one JSON command per line in, one JSON answer per line
    out (``{"error": ...}`` when a handler raised), until ``exit`` or EOF."""
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the answers' channel
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "exit":
            out.write(json.dumps({"bye": True}) + "\n")
            out.flush()
            return
        try:
            answer = {"pong": "ready"} if op == "ping" else dict(handlers[op](**command))
        except Exception:
            answer = {"error": traceback.format_exc()}
        out.write(json.dumps(answer) + "\n")
        out.flush()


class Recorder(OTelObserver):
    """The OTel observer, keeping every realized amount and settlement (exact)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.accounts: list[dict[str, Any]] = []
        self.settled: list[dict[str, Any]] = []

    def on_offload_accounted(self, entry: Any) -> None:
        if isinstance(entry, ModelCallAccount):
            self.accounts.append(
                {
                    "kind": "model_call",
                    "saving": str(entry.saving),
                    "stub_carry": str(entry.stub_carry_cost),
                    "cache": str(entry.cache_disruption_cost),
                    "carried": list(entry.carried),
                }
            )
        elif isinstance(entry, RecallAccount):
            self.accounts.append(
                {"kind": "recall", "offload_id": entry.offload_id, "cost": str(entry.cost)}
            )
        super().on_offload_accounted(entry)

    def on_offload_settled(self, settlement: Settlement) -> None:
        self.settled.append(
            {
                "offload_id": settlement.offload_id,
                "trigger": str(settlement.trigger),
                "turns": settlement.turns_carried,
                "recalls": settlement.recalls,
                "net": str(settlement.realized_net_saving),
                "savings": str(settlement.realized_savings),
                "stub_carry": str(settlement.stub_carry_cost),
                "recall_cost": str(settlement.recall_cost),
                "remaining": settlement.remaining_turns,
            }
        )
        super().on_offload_settled(settlement)

    def drain(self) -> dict[str, Any]:
        """What was recorded since the last drain."""
        accounts, self.accounts = self.accounts, []
        settled, self.settled = self.settled, []
        return {"accounts": accounts, "settled": settled}


def totals(drained: list[dict[str, Any]]) -> dict[str, Decimal]:
    """The realized counters summed (exact) over every worker's drained records."""
    sums = {"saving": Decimal(0), "stub_carry": Decimal(0), "cache": Decimal(0)}
    sums["recall"] = Decimal(0)
    for part in drained:
        for a in part["accounts"]:
            if a["kind"] == "model_call":
                for key in ("saving", "stub_carry", "cache"):
                    sums[key] += Decimal(a[key])
            else:
                sums["recall"] += Decimal(a["cost"])
    return sums
