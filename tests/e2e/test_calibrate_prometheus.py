"""``seamscope calibrate --prometheus``: the priors a fleet's Prometheus gives equal
the priors calibrated from the trace file of the same run.

This process runs seamscope's own telemetry (``configure()`` writing the trace
file and serving the OpenTelemetry Prometheus exporter on a loopback port) and
a loop through the real DecisionLayer, gate and ledger: conversations on three
tools and two models, each offloading one large output, carrying it for a
seeded number of later model calls and recalling some. One real Prometheus
scrapes the process every second. Both calibrations run the real command.

Exact from Prometheus (so equal to the trace's): every pair's offloads,
recalled offloads, recalls, the recall prior, the Beta posterior and its
interval, the remaining turns' median, p10, p90 and mean (all under 32 turns,
one bucket each), the carried turns' mean. Not there: the carried turns'
median (only their sum is exported), and so the file's version (a hash of
its numbers).
"""

from __future__ import annotations

import contextlib
import io
import random
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.decisions.records import ModelUsage, ToolCall
from seamscope.telemetry import configure
from seamscope.telemetry import conventions as c

from ._backends import Prometheus, start_prometheus
from ._support import ProcessGroup, wait_for

TOOLS = ("search_docs", "fetch_logs", "read_table")
MODELS = ("gpt-4o", "claude-haiku-4-5")
CONVERSATIONS = 60
REMAINING = c.METRIC_OFFLOAD_REMAINING_TURNS.prometheus


@dataclass
class Run:
    prometheus: Prometheus
    trace: Path
    offloads: int
    tmp: Path


def _conversation(layer: DecisionLayer, n: int, rng: random.Random) -> int:
    """One conversation: an offload of a large output, then ``k`` model calls; the
    output is recalled at one of them with the tool's chance. Returns 1 if the
    gate fired."""
    conversation = f"conv-{n}"
    tool, model = TOOLS[n % 3], MODELS[(n // 3) % 2]
    later = rng.randint(1, 12)
    recall_at = rng.randint(0, later - 1) if rng.random() < (0.15 + 0.3 * (n % 3)) else None
    with layer.turn(conversation, []) as turn:
        with turn.iteration() as it:
            it.pre_model()
            with it.chat(model) as call:
                call.report(ModelUsage(2_000, 50))
            decision = it.offload(ToolCall(f"call-{n}", tool, {}), 20_000.0)
        for k in range(later):
            with turn.iteration() as it:
                it.pre_model()
                with it.chat(model) as call:
                    call.report(ModelUsage(3_000, 40))
                if k == recall_at and decision.offload_id:
                    it.recall(decision.offload_id, input_tokens=20_000.0, output_tokens=30)
    layer.end_conversation(conversation)
    return int(decision.fire)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("calibrate-prometheus-e2e")
    processes = ProcessGroup()
    trace = tmp / "trace.jsonl"
    telemetry = configure(
        service_name="seamscope-calibrate-e2e",
        trace_file=trace,
        prometheus_port=0,
        prometheus_registry=CollectorRegistry(),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    try:
        assert telemetry.prometheus_address is not None
        host, port = telemetry.prometheus_address
        prometheus = start_prometheus(processes, tmp, [f"{host}:{port}"])
        layer = DecisionLayer(default_model=MODELS[0], telemetry=telemetry)
        rng = random.Random(24)
        offloads = sum(_conversation(layer, n, rng) for n in range(CONVERSATIONS))
        telemetry.flush()

        def scraped() -> bool:
            found = prometheus.query(f"sum({REMAINING}_count)")
            return bool(found) and round(float(found[0]["value"][1])) == offloads

        wait_for(
            scraped,
            timeout=60,
            what="Prometheus to scrape every settled offload",
            diagnostics=processes.diagnostics,
            alive=processes,
        )
        yield Run(prometheus, trace, offloads, tmp)
    finally:
        telemetry.shutdown()
        processes.stop_all()


def _calibrate(*argv: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["calibrate", *argv, "--min-offloads", "5", "--output", "-"])
    assert 0 == code, err.getvalue()
    return tomllib.loads(out.getvalue())


def _comparable(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    rows = {}
    for entry in document["priors"]:
        evidence = dict(entry["evidence"])
        evidence["turns_carried"] = {"mean": evidence["turns_carried"]["mean"]}
        rows[(entry["tool"], entry["model"])] = {**entry, "evidence": evidence}
    return rows


@pytest.mark.e2e
@pytest.mark.parametrize("window", [None, "1h"])
def test_priors_from_prometheus_equal_the_priors_from_the_trace(
    run: Run, window: str | None
) -> None:
    from_trace = _calibrate(str(run.trace))
    argv = ["--prometheus", run.prometheus.url]
    if window is not None:
        argv += ["--range", window]
    from_prometheus = _calibrate(*argv)
    assert run.offloads == CONVERSATIONS  # every output was large enough to offload
    assert len(TOOLS) * len(MODELS) == len(from_trace["priors"])
    assert sum(e["offloads"] for e in from_trace["priors"]) == run.offloads
    assert any(e["evidence"]["recalled"] for e in from_trace["priors"])
    assert _comparable(from_trace) == _comparable(from_prometheus)
    assert "prometheus" == from_prometheus["source"]
    assert "source" not in from_trace
    assert all("median" not in e["evidence"]["turns_carried"] for e in from_prometheus["priors"])
    # one PromQL query per quantity, named in the file
    assert 6 == len(from_prometheus["sources"])


@pytest.mark.e2e
def test_an_unreachable_prometheus_is_exit_1_naming_it(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["calibrate", "--prometheus", "http://127.0.0.1:9", "--output", "-"])
    assert 1 == code
    assert "http://127.0.0.1:9" in capsys.readouterr().err
