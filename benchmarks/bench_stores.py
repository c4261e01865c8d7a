"""Offload stores: each operation's latency and round trips, and what a store adds per model call.

Usage::

    .venv/bin/python benchmarks/bench_stores.py [--json PATH]             # 1-2 minutes
    .venv/bin/python benchmarks/bench_stores.py --quick --json out.json   # a smoke run
    .venv/bin/python benchmarks/bench_stores.py --callgrind               # + 2-3 minutes

Three stores of ``seamscope.stores``: ``MemoryStore`` (``max_items`` raised
to 100 000 like the others, so every recall finds its content),
``SQLiteStore`` on a file in a temporary folder (WAL, ``synchronous=NORMAL``,
as the store opens it) and ``RedisStore`` on a real ``redis-server`` this
script starts on 127.0.0.1 (a free port, its data and log in a temporary
folder, ``appendonly yes`` with ``appendfsync everysec``, no RDB snapshots)
and stops by PID (SIGTERM, SIGKILL after 10 s).

Data as the library makes it: a 64 000-character tool output (16 000
tokens), the ``StoredOffload`` record and the ``AccountDelta`` lists the
framework-free loop below really hands its store (captured from one run of
that loop), copied under fresh 16-hex-digit offload ids, four offloads per
conversation.

1. Per operation and store, N timed calls (default 2 000 after 100 warm-up
   calls; the stores interleaved in 10 rounds; garbage collector off):
   ``put`` (one record and its 64 000 characters), ``recall`` (found),
   ``offloads`` (a conversation holding 4), ``lookup`` (the 4 ids of a
   conversation in one call), ``add`` of one model call's deltas with 1 and
   with 4 live offloads, ``claim`` (each offload once, after its deltas).
   p50/p99/max of each call's wall time (``perf_counter_ns``).

   Round trips (Redis): every call of the redis client's
   ``AbstractConnection.send_packed_command`` is counted (one request sent
   before its reply is awaited; a pipeline is one), per store call; the
   server's ``INFO commandstats`` before and after each operation's timed
   calls gives the commands it ran per call.

2. ``put`` as a process goes on: the p50/p99 of 50 puts after 256, 1 000
   and 4 000 offloads made (one per conversation, never claimed, as the
   layer leaves them in its in-memory default, which is not shared: its
   ledger settles without the store); the in-memory store at its defaults
   (``max_items=256``). Run last: its writes (hundreds of MB) would disturb
   the other sections.

3. End to end: one user turn of the framework-free ``DecisionLayer`` (the
   peer benchmark's three stages over twelve tools and the recall tool, the
   PRE seam over three policies, the POST seam): 7 model calls; the first
   emits a tool call whose 64 000-character output the gate offloads (one
   ``put``), the next 5 carry its stub, the 6th of them emits the recall
   (the loop reads the store's ``recall``), the 7th answers with the output
   back in the prompt; then ``end_conversation``. With a shared store the
   ledger writes one ``add`` per model call after the offload (6) and one
   per recall, and settles through ``offloads`` and ``claim``; the
   in-memory store is not shared and is only called for ``put`` and
   ``recall``. Configurations, each with its own providers built alike (an
   SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
   ``InMemorySpanExporter``, emptied after every block, and a
   ``MeterProvider`` with an ``InMemoryMetricReader`` collected at the
   end): no offload (the same turn, the gate's threshold out of reach:
   nothing fired, carried or recalled), the in-memory default
   (``offload_store=None``, ``SEAMSCOPE_OFFLOAD_STORE`` unset), an explicit
   ``MemoryStore()``, SQLite, Redis. Interleaved blocks of K turns, R
   repeats, garbage collector off; per model call = a turn's time / 7,
   with and without its settlement; the ratio to the ``MemoryStore()`` run
   is the median of the per-block ratios (with their range), the added time
   the median of per-block differences. ``--callgrind`` counts the
   instructions of K / 6 turns (with their settlement) of each
   configuration in one ``valgrind --tool=callgrind`` process (this
   process's work only: a server's work and the wait for it are not
   instructions here).

Prints Markdown tables; ``--json PATH`` writes the figures. Exits 0 whatever
the numbers say; 2 when ``redis-server`` is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import platform
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import redis
import structlog
from _harness import mark, read_window
from _scenario import (
    AGENT,
    LC_TOOLS,
    OPUS,
    PALETTE,
    SAFETY,
    USAGE_IN,
    USAGE_OUT,
    lc_policies,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from seamscope.adapters import DecisionLayer
from seamscope.decisions import (
    AllowlistStage,
    Message,
    ModelUsage,
    OffloadStore,
    PolicyStage,
    RolePaletteStage,
    SafetyLevel,
    ToolCall,
    ToolCatalog,
    ToolSpec,
)
from seamscope.decisions.records import (
    AccountDelta,
    RecallStatus,
    StoredOffload,
)
from seamscope.loop import RECALL_TOOL, estimate_tokens, offload_stub
from seamscope.stores import MemoryStore, RedisStore, SQLiteStore

__all__ = ["main"]

STORES = ("memory", "sqlite", "redis")
OPS = ("put", "recall", "offloads", "lookup", "add_1", "add_4", "claim")
PER_CONVERSATION = 4
CONTENT_CHARS = 64_000
ROUNDS = 10  # the stores take turns within each operation, in this many rounds
MODEL_CALLS = 7  # per end-to-end turn
CARRIED_CALLS = 5
GROWTH_LEVELS = (256, 1_000, 4_000)  # offloads made before the timed puts
GROWTH_QUICK = (64, 256)
GROWTH_SAMPLES = 50  # --quick: 20
P99_TARGET_US = 1_000.0  # p99 per round trip on loopback Redis
REDIS_CONFIG = ("appendonly yes", "appendfsync everysec", 'save ""')
SCOPE = {"tables": ["brand_sales"]}
OFFERED = (*LC_TOOLS, RECALL_TOOL)
E2E = ("no_offload", "default", "memory", "sqlite", "redis")
E2E_LABELS = {
    "no_offload": "no offload (gate never fires), in-memory default",
    "default": "in-memory default (`offload_store=None`)",
    "memory": "`MemoryStore()`",
    "sqlite": "`SQLiteStore` (WAL)",
    "redis": "`RedisStore` (loopback)",
}


def _content() -> str:
    """A 64 000-character tool output: a CSV export, as a data tool returns."""
    rng = random.Random(7)
    brands = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
    regions = ("north", "south", "east", "west")
    rows = ["brand,region,month,units,amount_usd"]
    while sum(len(r) + 1 for r in rows) < CONTENT_CHARS:
        rows.append(
            f"{rng.choice(brands)},{rng.choice(regions)},2026-{rng.randint(1, 12):02d},"
            f"{rng.randint(1, 9_999)},{rng.randint(100, 999_999)}.{rng.randint(0, 99):02d}"
        )
    return "\n".join(rows)[:CONTENT_CHARS]


CONTENT = _content()
SMALL = "plot_chart: rendered a bar chart of 24 points to chart-7.png (1 200 x 800)"


# -- counting round trips --------------------------------------------------------------


class RoundTrips:
    """Counts every request the redis client sends (``send_packed_command``)."""

    count = 0
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(self: Any, command: Any, check_health: bool = True) -> Any:
            cls.count += 1
            return original(self, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
        cls._installed = True


# -- the Redis server ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` on 127.0.0.1, started and stopped by PID in ``directory``."""

    def __init__(self, executable: str, directory: Path) -> None:
        self.port = _free_port()
        self.directory = directory
        config = directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    f'dir "{directory}"',
                    "protected-mode yes",
                    "daemonize no",
                    'logfile ""',
                    *REDIS_CONFIG,
                ]
            )
            + "\n",
            encoding="utf-8",
        )
        self.log = directory / "redis-server.log"
        with self.log.open("ab") as log:
            self.popen = subprocess.Popen(
                [executable, str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=directory,
            )
        self.client = redis.Redis(host="127.0.0.1", port=self.port, protocol=2, socket_timeout=5)
        deadline = time.monotonic() + 30
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"redis-server exited:\n{self.log.read_text()[-2000:]}")
            with contextlib.suppress(redis.exceptions.RedisError):
                if self.client.ping():
                    break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not answer PING within 30 s")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def info(self, section: str) -> dict[str, Any]:
        return dict(self.client.info(section))

    def commandstats(self) -> dict[str, int]:
        return {
            key.removeprefix("cmdstat_"): int(value["calls"])
            for key, value in self.info("commandstats").items()
        }

    def quiesce(self, timeout: float = 120.0) -> None:
        """Empty the server and compact its append-only file (a rewrite the data of
        one section started would otherwise land in the next one's timings)."""
        self.client.flushall()
        deadline = time.monotonic() + timeout
        requested = False
        while time.monotonic() < deadline:
            state = self.info("persistence")
            busy = state.get("aof_rewrite_in_progress") or state.get("aof_rewrite_scheduled")
            if not busy and requested:
                return
            if not busy:
                self.client.bgrewriteaof()
                requested = True
            time.sleep(0.05)
        raise RuntimeError(f"redis-server still rewriting its AOF after {timeout:g} s")

    def stop(self) -> None:
        self.client.close()
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)


# -- the framework-free loop -------------------------------------------------------------


def _telemetry() -> tuple[
    TracerProvider, InMemorySpanExporter, MeterProvider, InMemoryMetricReader
]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return tracer_provider, spans, MeterProvider(metric_readers=[reader]), reader


def _usage(step: int) -> ModelUsage:
    """The prompt grows by each call's tool result; the recalled output comes back."""
    back = int(estimate_tokens(CONTENT)) if step > CARRIED_CALLS else 0
    return ModelUsage(input_tokens=USAGE_IN + 60 * step + back, output_tokens=USAGE_OUT)


USAGES = tuple(_usage(step) for step in range(MODEL_CALLS))


class Loop:
    """One ``DecisionLayer`` and the scripted turn (see the module docstring)."""

    def __init__(self, key: str, store: OffloadStore | None, *, offload: bool = True) -> None:
        self.key = key
        self.tracer_provider, self.spans, self.meter_provider, self.reader = _telemetry()
        catalog = ToolCatalog([ToolSpec(n, SAFETY.get(n, SafetyLevel.READ)) for n in LC_TOOLS])
        palette = [*PALETTE, "delete_rows", RECALL_TOOL]
        self.layer = DecisionLayer(
            default_model=OPUS,
            policies=lc_policies(),
            stages=[
                RolePaletteStage(resolver={AGENT: palette}.get),
                PolicyStage(catalog=catalog, max_safety_level=SafetyLevel.WRITE),
                AllowlistStage(always_include=["hydrate_context"], catalog=catalog),
            ],
            catalog=catalog,
            agent_name=AGENT,
            offload_threshold_tokens=1_000 if offload else 10**9,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            offload_store=store,
        )
        self.store = self.layer.offload_store
        self.turns = 0
        self.fired: list[str] = []
        self.recalled: list[int] = []

    def run(self) -> None:
        """One turn and its settlement."""
        self.layer.end_conversation(self.turn())

    def turn(self) -> str:
        """One turn of a new conversation (not ended); its id."""
        conversation = f"{self.key}-{uuid.uuid4().hex[:12]}"
        self.turns += 1
        messages = [
            Message("system", "You are an analyst."),
            Message("user", "How did Q3 sales go? Pull the sales block and chart it."),
        ]
        fired: str | None = None
        with self.layer.turn(conversation, messages, role=AGENT, scope=SCOPE) as turn:
            for step in range(MODEL_CALLS):
                with turn.iteration() as it:
                    it.select_tools(OFFERED)
                    pre = it.pre_model()
                    with it.chat(pre.model.model_name) as call:
                        call.report(USAGES[step])
                    if step == 0:
                        calls: tuple[ToolCall, ...] = (
                            ToolCall("call_0", "run_block", {"block": "sales_q3", "limit": 500}),
                        )
                    elif step == CARRIED_CALLS and fired is not None:
                        calls = (ToolCall(f"call_{step}", RECALL_TOOL, {"offload_id": fired}),)
                    elif step < MODEL_CALLS - 1:
                        calls = (ToolCall(f"call_{step}", "plot_chart", {"kind": "bar"}),)
                    else:
                        calls = ()
                    reply = Message("assistant", "" if calls else "Q3 sales grew 12%.", calls)
                    post = it.post_model(reply)
                    messages.append(reply)
                    for tool_call in post.calls:
                        if tool_call.name == RECALL_TOOL and fired is not None:
                            with it.execute_tool(tool_call):
                                got = turn.store.recall(conversation, fired)
                            text = got.content or ""
                            self.recalled.append(len(text))
                            it.recall(
                                fired, input_tokens=estimate_tokens(text), output_tokens=USAGE_OUT
                            )
                        else:
                            with it.execute_tool(tool_call):
                                text = CONTENT if step == 0 else SMALL
                            decision = it.offload(tool_call, text)
                            if decision.fire and decision.offload_id:
                                fired = decision.offload_id
                                self.fired.append(fired)
                                text = offload_stub(decision, tool_call.name)
                        messages.append(
                            Message("tool", text, name=tool_call.name, tool_call_id=tool_call.id)
                        )
        return conversation

    def clear(self) -> None:
        self.spans.clear()

    def close(self) -> None:
        self.reader.get_metrics_data()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


class Recording(MemoryStore):
    """A MemoryStore the ledger treats as shared: keeps what the loop hands a store."""

    shared = True

    def __init__(self) -> None:
        super().__init__(max_items=100_000)
        self.puts: list[StoredOffload] = []
        self.adds: list[list[AccountDelta]] = []

    def put(self, offload: StoredOffload, content: str) -> tuple[str, ...]:
        self.puts.append(offload)
        return super().put(offload, content)

    def add(self, deltas: Sequence[AccountDelta]) -> None:
        self.adds.append(list(deltas))
        super().add(deltas)


@dataclass(frozen=True)
class Shapes:
    record: StoredOffload
    add_1: list[AccountDelta]
    add_4: list[AccountDelta]


def ledger_shapes() -> Shapes:
    """The record the loop puts and the deltas its ledger adds per model call, with
    one live offload (the scripted turn) and with four (four outputs offloaded in
    one iteration, then one model call)."""
    recording = Recording()
    loop = Loop("shape", recording)
    loop.run()
    record = recording.puts[0]
    carried = [d for d in recording.adds if len(d) == 1 and d[0].turns == 1]
    layer = loop.layer
    conversation = "shape-four"
    with layer.turn(conversation, [Message("user", "sales")], role=AGENT, scope=SCOPE) as turn:
        with turn.iteration() as it:
            it.pre_model()
            for k in range(PER_CONVERSATION):
                assert it.offload(ToolCall(f"c{k}", "run_block", {}), CONTENT).fire
        with turn.iteration() as it:
            pre = it.pre_model()
            with it.chat(pre.model.model_name) as call:
                call.report(USAGES[1])
    four = recording.adds[-1]
    loop.close()
    assert len(four) == PER_CONVERSATION and carried, recording.adds
    return Shapes(record, carried[0], four)


# -- per-operation latency ----------------------------------------------------------------


@dataclass
class Op:
    """One operation's calls on one store: ``calls[i]`` is a zero-argument call."""

    calls: list[Callable[[], Any]]
    ns: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)
    trips: list[int] = field(default_factory=list)
    commands: dict[str, int] = field(default_factory=dict)


class Dataset:
    """Offload ids, conversations and the argument sequences every store gets alike."""

    def __init__(self, shapes: Shapes, n: int, warmup: int, seed: int = 11) -> None:
        rng = random.Random(seed)
        total = n + warmup
        total += -total % PER_CONVERSATION  # whole conversations: N rounded up
        self.n, self.warmup, self.total = total - warmup, warmup, total
        self.ids = [uuid.UUID(int=rng.getrandbits(128)).hex[:16] for _ in range(total)]
        self.conversations = [
            f"conv-{uuid.UUID(int=rng.getrandbits(128)).hex[:20]}"
            for _ in range(total // PER_CONVERSATION)
        ]
        now = time.time()
        self.records = [
            replace(
                shapes.record,
                offload_id=oid,
                conversation_id=self.conversations[i // PER_CONVERSATION],
                call_id=f"call_{uuid.UUID(int=rng.getrandbits(128)).hex[:24]}",
                stub=shapes.record.stub.replace(shapes.record.offload_id, oid),
                created_at=now,
                expires_at=None,
            )
            for i, oid in enumerate(self.ids)
        ]
        k = len(self.conversations)
        self.recall = [rng.randrange(total) for _ in range(total)]
        self.convs = [rng.randrange(k) for _ in range(total)]
        self.claims = list(range(total))
        rng.shuffle(self.claims)
        self.shapes = shapes

    def of(self, c: int) -> list[str]:
        return self.ids[c * PER_CONVERSATION : (c + 1) * PER_CONVERSATION]

    def calls(self, store: OffloadStore, op: str) -> list[Callable[[], Any]]:
        one, four = self.shapes.add_1[0], self.shapes.add_4
        out: list[Callable[[], Any]] = []
        for j in range(self.total):
            rec = self.records[self.recall[j]]
            ids = self.of(self.convs[j])
            name = self.conversations[self.convs[j]]
            if op == "put":
                out.append(partial(store.put, self.records[j], CONTENT))
            elif op == "recall":
                out.append(partial(store.recall, rec.conversation_id, rec.offload_id))
            elif op == "offloads":
                out.append(partial(store.offloads, name))
            elif op == "lookup":
                out.append(partial(store.lookup, name, ids))
            elif op == "add_1":
                out.append(partial(store.add, [replace(one, offload_id=ids[0])]))
            elif op == "add_4":
                deltas = [replace(d, offload_id=i) for d, i in zip(four, ids, strict=True)]
                out.append(partial(store.add, deltas))
            else:
                out.append(partial(store.claim, self.ids[self.claims[j]]))
        return out


def check_answers(store: OffloadStore, data: Dataset) -> None:
    """The calls answer what the benchmark says they do (once, before timing)."""
    rec = data.records[0]
    got = store.recall(rec.conversation_id, rec.offload_id)
    assert got.status is RecallStatus.FOUND and got.content == CONTENT, got.status
    held = store.offloads(rec.conversation_id)
    assert [o.offload_id for o in held] == data.of(0), held
    assert set(store.lookup(rec.conversation_id, data.of(0))) == set(data.of(0))


def run_ops(
    stores: dict[str, OffloadStore], data: Dataset, server: RedisServer | None
) -> dict[str, dict[str, Op]]:
    results: dict[str, dict[str, Op]] = {key: {} for key in stores}
    for op in OPS:
        for key, store in stores.items():
            results[key][op] = Op(data.calls(store, op))
        # warm-up: the first calls of each store, not recorded
        for key in stores:
            for call in results[key][op].calls[: data.warmup]:
                call()
        before = server.commandstats() if server is not None else {}
        bounds = [data.warmup + data.n * r // ROUNDS for r in range(ROUNDS + 1)]
        for r in range(ROUNDS):
            for key in stores:
                timed(results[key][op], bounds[r], bounds[r + 1])
        if server is not None and "redis" in stores:
            after = server.commandstats()
            results["redis"][op].commands = {
                name: after[name] - before.get(name, 0)
                for name in sorted(after)
                if name != "info" and after[name] != before.get(name, 0)
            }
        if op == "put":
            for store in stores.values():
                check_answers(store, data)
    return results


def timed(op: Op, start: int, stop: int) -> None:
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    ns, cpu_ns, trips = op.ns, op.cpu_ns, op.trips
    gc.collect()
    gc.disable()
    try:
        for call in op.calls[start:stop]:
            sent = RoundTrips.count
            c = cpu_clock()
            t = clock()
            call()
            ns.append(clock() - t)
            cpu_ns.append(cpu_clock() - c)
            trips.append(RoundTrips.count - sent)
    finally:
        gc.enable()


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (never interpolated down)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def op_figures(op: Op) -> dict[str, Any]:
    us = [v / 1e3 for v in op.ns]
    out: dict[str, Any] = {
        "n": len(us),
        "p50_us": percentile(us, 50),
        "p99_us": percentile(us, 99),
        "max_us": max(us),
        "mean_us": statistics.fmean(us),
        "cpu_p50_us": percentile([v / 1e3 for v in op.cpu_ns], 50),
    }
    return out


def run_growth(
    folder: Path, url: str, record: StoredOffload, levels: Sequence[int], samples: int
) -> dict[str, list[dict[str, Any]]]:
    """``put`` as a process goes on: after ``level`` offloads (one per conversation,
    never claimed, as the layer leaves them in its non-shared in-memory default), the
    p50/p99 of the next puts. The in-memory store at its defaults (``max_items=256``)."""
    stores: dict[str, OffloadStore] = {
        "memory": MemoryStore(),
        "sqlite": SQLiteStore(folder / "growth.db"),
        "redis": RedisStore(url, prefix="growth:"),
    }
    out: dict[str, list[dict[str, Any]]] = {key: [] for key in stores}
    made = 0

    def put(store: OffloadStore, i: int) -> None:
        store.put(replace(record, offload_id=f"{i:016x}", conversation_id=f"grow-{i}"), CONTENT)

    for level in levels:
        for store in stores.values():
            for i in range(made, level):
                put(store, i)
        made = max(made, level)
        timings: dict[str, list[int]] = {key: [] for key in stores}
        gc.collect()
        gc.disable()
        try:
            for i in range(made, made + samples):
                for key, store in stores.items():
                    t = time.perf_counter_ns()
                    put(store, i)
                    timings[key].append(time.perf_counter_ns() - t)
        finally:
            gc.enable()
        made += samples
        for key, values in timings.items():
            us = [v / 1e3 for v in values]
            row: dict[str, Any] = {
                "offloads_before": level,
                "p50_us": percentile(us, 50),
                "p99_us": percentile(us, 99),
            }
            store = stores[key]
            if isinstance(store, MemoryStore):
                row["records_kept"] = len(store._entries)
            out[key].append(row)
    for store in stores.values():
        store.close()
    return out


# -- end to end ------------------------------------------------------------------------


@dataclass
class Block:
    turn_wall: float
    turn_cpu: float
    end_wall: float
    end_cpu: float
    trips: list[tuple[int, int]]
    calls: set[tuple[tuple[str, int], ...]]
    inside_us: float  # per turn and its settlement, inside the store's methods


def e2e_block(loop: Loop, count: int, meter: StoreMeter) -> Block:
    """``count`` turns (each timed with its settlement apart), gc off; spans emptied after."""
    gc.collect()
    gc.disable()
    turn_wall = turn_cpu = end_wall = end_cpu = 0.0
    trips: list[tuple[int, int]] = []
    calls: set[tuple[tuple[str, int], ...]] = set()
    inside = meter.inside_ns
    end = loop.layer.end_conversation
    try:
        for _ in range(count):
            sent = RoundTrips.count
            before = dict(meter.counts)
            w, c = time.perf_counter(), time.process_time()
            conversation = loop.turn()
            w2, c2 = time.perf_counter(), time.process_time()
            between = RoundTrips.count
            end(conversation)
            w3, c3 = time.perf_counter(), time.process_time()
            turn_wall += w2 - w
            turn_cpu += c2 - c
            end_wall += w3 - w2
            end_cpu += c3 - c2
            trips.append((between - sent, RoundTrips.count - between))
            calls.add(tuple((k, n - before[k]) for k, n in meter.counts.items() if n > before[k]))
    finally:
        gc.enable()
    loop.clear()
    inside_us = (meter.inside_ns - inside) / 1e3 / count
    return Block(
        turn_wall / count,
        turn_cpu / count,
        end_wall / count,
        end_cpu / count,
        trips,
        calls,
        inside_us,
    )


def make_loops(folder: Path, url: str | None) -> dict[str, Loop]:
    loops = {
        "no_offload": Loop("no_offload", None, offload=False),
        "default": Loop("default", None),
        "memory": Loop("memory", MemoryStore()),
        "sqlite": Loop("sqlite", SQLiteStore(folder / "e2e.db")),
    }
    if url is not None:
        loops["redis"] = Loop("redis", RedisStore(url, prefix="e2e:"))
    return loops


def check_loop(loop: Loop) -> None:
    """One turn decides what the benchmark says: fired, carried, recalled whole, settled."""
    fired, settled = len(loop.fired), len(loop.layer.ledger.settlements)
    loop.run()
    if loop.key == "no_offload":
        assert len(loop.fired) == fired, loop.fired
        return
    assert len(loop.fired) == fired + 1, "the gate did not fire"
    assert loop.recalled[-1] == CONTENT_CHARS, loop.recalled[-1:]
    assert len(loop.layer.ledger.settlements) == settled + 1, "not settled once"
    turns = loop.layer.ledger.settlements[-1].turns_carried
    assert turns == CARRIED_CALLS, turns


STORE_METHODS = ("put", "recall", "offloads", "lookup", "add", "claim", "due")


class StoreMeter:
    """Counts the calls of a loop's store methods and the wall time spent inside them
    (wrappers set on the store instance; :meth:`remove` takes them off)."""

    def __init__(self, store: OffloadStore) -> None:
        self.store = store
        self.counts = dict.fromkeys(STORE_METHODS, 0)
        self.inside_ns = 0
        for name in STORE_METHODS:
            method = getattr(store, name)

            def counted(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
                self.counts[_name] += 1
                t = time.perf_counter_ns()
                try:
                    return _method(*args, **kw)
                finally:
                    self.inside_ns += time.perf_counter_ns() - t

            setattr(store, name, counted)

    def calls(self) -> tuple[tuple[str, int], ...]:
        return tuple((name, n) for name, n in self.counts.items() if n)

    def remove(self) -> None:
        for name in STORE_METHODS:
            delattr(self.store, name)


def run_e2e(loops: dict[str, Loop], repeats: int, turns: int, warmup: int) -> dict[str, Any]:
    blocks: dict[str, list[Block]] = {key: [] for key in loops}
    for loop in loops.values():
        check_loop(loop)
        for _ in range(warmup):
            loop.run()
        loop.clear()
    meters = {key: StoreMeter(loop.store) for key, loop in loops.items()}
    for _ in range(repeats):
        for key, loop in loops.items():  # interleaved: a drift of the machine hits all alike
            blocks[key].append(e2e_block(loop, turns, meters[key]))
    for meter in meters.values():
        meter.remove()
    spans_per_turn = {}
    for key, loop in loops.items():
        loop.run()
        spans_per_turn[key] = len(loop.spans.get_finished_spans())
        loop.clear()
        loop.close()
    out: dict[str, Any] = {}
    base = blocks["memory"]
    for key, series in blocks.items():
        per = {
            "turn_wall_us": [b.turn_wall / MODEL_CALLS * 1e6 for b in series],
            "turn_cpu_us": [b.turn_cpu / MODEL_CALLS * 1e6 for b in series],
            "with_end_wall_us": [(b.turn_wall + b.end_wall) / MODEL_CALLS * 1e6 for b in series],
            "with_end_cpu_us": [(b.turn_cpu + b.end_cpu) / MODEL_CALLS * 1e6 for b in series],
        }
        base_per = {
            "turn_wall_us": [b.turn_wall / MODEL_CALLS * 1e6 for b in base],
            "turn_cpu_us": [b.turn_cpu / MODEL_CALLS * 1e6 for b in base],
            "with_end_wall_us": [(b.turn_wall + b.end_wall) / MODEL_CALLS * 1e6 for b in base],
            "with_end_cpu_us": [(b.turn_cpu + b.end_cpu) / MODEL_CALLS * 1e6 for b in base],
        }
        fig: dict[str, Any] = {"label": E2E_LABELS[key], "blocks": len(series)}
        for name, values in per.items():
            ratios = [v / b for v, b in zip(values, base_per[name], strict=True)]
            fig[name] = statistics.median(values)
            fig[name.replace("_us", "_added_us")] = statistics.median(
                v - b for v, b in zip(values, base_per[name], strict=True)
            )
            fig[name.replace("_us", "_ratio")] = statistics.median(ratios)
            fig[name.replace("_us", "_ratio_range")] = [min(ratios), max(ratios)]
        fig["round_trips_per_turn"] = sorted({t[0] for b in series for t in b.trips})
        fig["round_trips_per_settlement"] = sorted({t[1] for b in series for t in b.trips})
        fig["spans_per_turn"] = spans_per_turn[key]
        kinds = sorted({c for b in series for c in b.calls})
        fig["store_calls_per_turn"] = (
            dict(kinds[0]) if len(kinds) == 1 else [dict(k) for k in kinds]
        )
        fig["in_store_us_per_model_call"] = (
            statistics.median(b.inside_us for b in series) / MODEL_CALLS
        )
        fig["series"] = per
        out[key] = fig
    return out


def run_only_e2e(url: str | None, turns: int) -> int:
    """The callgrind child: a window of ``turns`` turns per configuration, in order."""
    with tempfile.TemporaryDirectory(prefix="bench-stores-cg-") as tmp:
        loops = make_loops(Path(tmp), url)
        for loop in loops.values():
            check_loop(loop)
            for _ in range(3):
                loop.run()
            loop.clear()
        gc.disable()
        for loop in loops.values():
            gc.collect()
            mark()
            for _ in range(turns):
                loop.run()
            mark()
            loop.clear()
        mark()
        for loop in loops.values():
            loop.close()
    return 0


def callgrind(url: str | None, turns: int) -> dict[str, float]:
    """Instructions per model call of each configuration, from one valgrind process."""
    if shutil.which("valgrind") is None:
        return {}
    keys = [k for k in E2E if k != "redis" or url is not None]
    with tempfile.TemporaryDirectory() as tmp:
        out_file = str(Path(tmp) / "callgrind.out")
        argv = [sys.executable, str(Path(__file__).resolve()), "--run-only", "--turns", str(turns)]
        if url is not None:
            argv += ["--redis-url", url]
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=getsid",
                f"--callgrind-out-file={out_file}",
                *argv,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        return {
            key: read_window(out_file, 2 * (n + 1)) / turns / MODEL_CALLS
            for n, key in enumerate(keys)
        }


# -- report ---------------------------------------------------------------------------


def _f(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}".replace(",", " ")


def report(figures: dict[str, Any]) -> None:
    meta = figures["machine"]
    print("# seamscope offload stores")
    print()
    print(
        f"{meta['started']}; {meta['cpus']} CPUs, load average {meta['load_start']} at start, "
        f"{meta['load_end']} at end; Python {meta['python']}, SQLite {meta['sqlite']}, "
        f"redis-server {meta.get('redis') or 'not run'} ({', '.join(REDIS_CONFIG)}); "
        f"N = {figures['n']} calls per operation and store after {figures['warmup']} warm-up"
        f"{'; --quick' if figures['quick'] else ''}"
    )
    print()
    print("## Per operation: wall µs per call (p50 / p99 / max)")
    print()
    stores = list(figures["ops"])
    print("| operation | " + " | ".join(stores) + " | Redis round trips per call |")
    print("|---|" + "---:|" * len(stores) + "---:|")
    for op in OPS:
        cells = []
        for key in stores:
            f = figures["ops"][key][op]
            cells.append(f"{_f(f['p50_us'])} / {_f(f['p99_us'])} / {_f(f['max_us'], 0)}")
        rt = figures["round_trips"].get(op)
        trips = "" if rt is None else "/".join(str(v) for v in rt["per_call"])
        print(f"| `{op}` | " + " | ".join(cells) + f" | {trips} |")
    if figures["round_trips"]:
        print()
        print("Redis commands per call (`INFO commandstats` over the timed calls):")
        print()
        for op in OPS:
            rt = figures["round_trips"][op]
            shown = ", ".join(f"{k} {v:g}" for k, v in rt["commands_per_call"].items())
            print(f"- `{op}`: {shown}")
        print()
        verdicts = figures["targets"]["redis_p99_per_round_trip"]
        worst = max(verdicts["per_op_us"].items(), key=lambda kv: kv[1])
        print(
            f"- p99 per round trip on loopback Redis <= {P99_TARGET_US:g} µs: "
            f"{'met' if verdicts['met'] else 'MISSED'} (highest: `{worst[0]}` {_f(worst[1])} µs)"
        )
    growth = figures["growth"]
    print()
    print(
        f"## `put` as offloads accumulate: p50 / p99 µs of {figures['growth_samples']} puts "
        "after K offloads never claimed (the in-memory store at its defaults, `max_items=256`)"
    )
    print()
    print("| K | " + " | ".join(growth) + " | in-memory records kept |")
    print("|---:|" + "---:|" * len(growth) + "---:|")
    for n, row in enumerate(growth["memory"]):
        cells = [f"{_f(growth[k][n]['p50_us'])} / {_f(growth[k][n]['p99_us'])}" for k in growth]
        print(f"| {row['offloads_before']} | " + " | ".join(cells) + f" | {row['records_kept']} |")
    print()
    print(
        f"## End to end: one turn of {MODEL_CALLS} model calls, one output offloaded, "
        f"carried {CARRIED_CALLS} calls, recalled, settled"
    )
    print()
    e2e = figures["e2e"]
    print(
        f"{e2e['repeats']} interleaved blocks of {e2e['turns']} turns per configuration; "
        "µs per model call (a turn / 7), median block; ratio: median of per-block ratios "
        "to `MemoryStore()` [range]; + settlement: the turn and its `end_conversation`"
    )
    print()
    print(
        "| configuration | wall µs | CPU µs | wall added | CPU added | ratio (wall) "
        "| ratio (CPU) | + settlement: wall µs | added | ratio "
        "| Redis round trips: turn + settlement | store calls / turn (+ settlement) "
        "| wall µs inside them | spans / turn |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for key, f in e2e["configs"].items():
        lo, hi = f["turn_wall_ratio_range"]
        lo2, hi2 = f["with_end_wall_ratio_range"]
        clo, chi = f["turn_cpu_ratio_range"]
        trips = ""
        if key == "redis":
            trips = (
                "/".join(str(t) for t in f["round_trips_per_turn"])
                + " + "
                + "/".join(str(t) for t in f["round_trips_per_settlement"])
            )
        print(
            f"| {f['label']} | {_f(f['turn_wall_us'])} | {_f(f['turn_cpu_us'])} | "
            f"{f['turn_wall_added_us']:+.1f} | {f['turn_cpu_added_us']:+.1f} | "
            f"{f['turn_wall_ratio']:.3f} [{lo:.2f}-{hi:.2f}] | "
            f"{f['turn_cpu_ratio']:.3f} [{clo:.2f}-{chi:.2f}] | "
            f"{_f(f['with_end_wall_us'])} | {f['with_end_wall_added_us']:+.1f} | "
            f"{f['with_end_wall_ratio']:.3f} [{lo2:.2f}-{hi2:.2f}] | {trips} | "
            + (", ".join(f"{k} {v}" for k, v in f["store_calls_per_turn"].items()) or "none")
            + f" | {_f(f['in_store_us_per_model_call'])} | {f['spans_per_turn']} |"
        )
    if e2e.get("callgrind"):
        print()
        print(
            "Instructions per model call (callgrind, this process only; a turn and its "
            f"settlement / 7; {e2e['callgrind_turns']} turns per configuration):"
        )
        print()
        print("| configuration | M instructions | over `MemoryStore()` |")
        print("|---|---:|---:|")
        cg = e2e["callgrind"]
        for key, value in cg.items():
            print(
                f"| {E2E_LABELS[key]} | {value / 1e6:.3f} | {(value - cg['memory']) / 1e6:+.3f} |"
            )
    default = figures["targets"]["default_no_slower"]
    print()
    print(
        "- the in-memory default's turn over the same turn with nothing offloaded, per model "
        f"call (median of per-block differences): wall {default['wall_added_us']:+.1f} µs, "
        f"CPU {default['cpu_added_us']:+.1f} µs (with the settlement: wall "
        f"{default['with_end_wall_added_us']:+.1f}, CPU {default['with_end_cpu_added_us']:+.1f})"
        + (
            f", instructions {default['instructions_added'] / 1e6:+.3f} M"
            if default.get("instructions_added") is not None
            else ""
        )
        + f"; of which inside the store's calls {_f(default['in_store_us'])} µs; the turn "
        f"with nothing offloaded: {_f(default['no_offload_cpu_us'])} µs CPU per model call"
    )


def added(e2e: dict[str, Any], name: str) -> float:
    """The in-memory default over the no-offload run: median of per-block differences."""
    pairs = zip(e2e["default"]["series"][name], e2e["no_offload"]["series"][name], strict=True)
    return statistics.median(d - n for d, n in pairs)


def machine(server: RedisServer | None) -> dict[str, Any]:
    return {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "redis": None if server is None else server.info("server")["redis_version"],
        "load_start": "/".join(f"{v:.1f}" for v in os.getloadavg()),
    }


def configure_logging() -> None:
    # The script is the application: structlog events below WARNING are dropped.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000, help="timed calls per operation")
    parser.add_argument("--warmup", type=int, default=100, help="calls per operation")
    parser.add_argument("--repeats", type=int, default=15, help="end-to-end blocks")
    parser.add_argument("--turns", type=int, default=20, help="turns per end-to-end block")
    parser.add_argument("--quick", action="store_true", help="a smoke run (numbers meaningless)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--callgrind", action="store_true", help="+ instructions per model call")
    parser.add_argument("--redis-server", default=shutil.which("redis-server"))
    parser.add_argument("--run-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    configure_logging()
    os.environ.pop("SEAMSCOPE_OFFLOAD_STORE", None)  # the in-memory default is measured
    if args.run_only:
        return run_only_e2e(args.redis_url, args.turns)
    if args.quick:
        args.n, args.warmup, args.repeats, args.turns = 200, 20, 3, 4
    if not args.redis_server or not os.access(args.redis_server, os.X_OK):
        print(
            "redis-server is not installed (install it with: apt-get install redis-server)",
            file=sys.stderr,
        )
        return 2
    RoundTrips.install()
    with tempfile.TemporaryDirectory(prefix="bench-stores-") as tmp:
        folder = Path(tmp)
        (folder / "redis").mkdir()
        server = RedisServer(args.redis_server, folder / "redis")
        try:
            figures = measure(args, folder, server)
        finally:
            server.stop()
    figures["machine"]["load_end"] = "/".join(f"{v:.1f}" for v in os.getloadavg())
    report(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def measure(args: argparse.Namespace, folder: Path, server: RedisServer) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "machine": machine(server),
        "quick": args.quick,
        "n": args.n,
        "warmup": args.warmup,
        "content_chars": CONTENT_CHARS,
        "redis_config": list(REDIS_CONFIG),
    }
    shapes = ledger_shapes()
    figures["shapes"] = {
        "record_stub_chars": len(shapes.record.stub),
        "deltas_add_1": len(shapes.add_1),
        "deltas_add_4": len(shapes.add_4),
    }
    data = Dataset(shapes, args.n, args.warmup)
    figures["n"] = data.n
    stores: dict[str, OffloadStore] = {
        "memory": MemoryStore(max_items=100_000),
        "sqlite": SQLiteStore(folder / "ops.db"),
        "redis": RedisStore(server.url, prefix="ops:"),
    }
    results = run_ops(stores, data, server)
    figures["ops"] = {key: {op: op_figures(results[key][op]) for op in OPS} for key in stores}
    redis_ops = results["redis"]
    figures["round_trips"] = {
        op: {
            "per_call": sorted(set(redis_ops[op].trips)),
            "total": sum(redis_ops[op].trips),
            "calls": len(redis_ops[op].trips),
            "commands_per_call": {
                k: v / len(redis_ops[op].trips) for k, v in redis_ops[op].commands.items()
            },
        }
        for op in OPS
    }
    for store in stores.values():
        store.close()
    del results, data
    gc.collect()
    server.quiesce()
    loops = make_loops(folder, server.url)
    e2e = run_e2e(loops, args.repeats, args.turns, warmup=3)
    figures["e2e"] = {
        "model_calls_per_turn": MODEL_CALLS,
        "carried_calls": CARRIED_CALLS,
        "repeats": args.repeats,
        "turns": args.turns,
        "configs": e2e,
    }
    for loop in loops.values():
        loop.store.close()
    # last: its hundreds of MB written do not disturb the sections above
    server.quiesce()
    levels = GROWTH_QUICK if args.quick else GROWTH_LEVELS
    samples = 20 if args.quick else GROWTH_SAMPLES
    figures["growth"] = run_growth(folder, server.url, shapes.record, levels, samples)
    figures["growth_samples"] = samples
    if args.callgrind:
        figures["e2e"]["callgrind_turns"] = max(2, args.turns // 6)
        figures["e2e"]["callgrind"] = callgrind(server.url, figures["e2e"]["callgrind_turns"])
    ops = figures["ops"]
    per_trip = {
        op: ops["redis"][op]["p99_us"] / max(1, max(figures["round_trips"][op]["per_call"]))
        for op in OPS
    }
    cg = figures["e2e"].get("callgrind") or {}
    figures["targets"] = {
        "redis_p99_per_round_trip": {
            "target_us": P99_TARGET_US,
            "per_op_us": per_trip,
            "met": all(v <= P99_TARGET_US for v in per_trip.values()),
        },
        "default_no_slower": {
            "compared": "per model call: the in-memory default's turn (one output offloaded, "
            "carried 5 calls, recalled) minus the same turn with nothing offloaded",
            "wall_added_us": added(e2e, "turn_wall_us"),
            "cpu_added_us": added(e2e, "turn_cpu_us"),
            "with_end_wall_added_us": added(e2e, "with_end_wall_us"),
            "with_end_cpu_added_us": added(e2e, "with_end_cpu_us"),
            "instructions_added": (cg["default"] - cg["no_offload"]) if cg else None,
            "no_offload_wall_us": e2e["no_offload"]["turn_wall_us"],
            "no_offload_cpu_us": e2e["no_offload"]["turn_cpu_us"],
            "in_store_us": e2e["default"]["in_store_us_per_model_call"],
        },
    }
    return figures


if __name__ == "__main__":
    sys.exit(main())
