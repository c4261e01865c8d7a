"""``seamscope calibrate``: recall posteriors and horizons from settlements, as a priors
file the gate loads."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from seamscope.cli import main
from seamscope.decisions import OffloadGate
from seamscope.decisions._priors import DEFAULT_MIN_OFFLOADS, Priors
from seamscope.decisions.records import GateCall, PriorSource
from seamscope.replay._calibrate import beta_cdf, beta_quantile


def test_beta_quantiles_match_closed_forms() -> None:
    # Beta(2, 1): F(x) = x^2; Beta(1, 3): F(x) = 1 - (1 - x)^3
    assert math.isclose(math.sqrt(0.05), beta_quantile(0.05, 2, 1), abs_tol=1e-9)
    assert math.isclose(1 - 0.05 ** (1 / 3), beta_quantile(0.95, 1, 3), abs_tol=1e-9)
    assert math.isclose(0.5, beta_cdf(0.5, 7.5, 7.5), abs_tol=1e-12)


def _calibrate(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["calibrate", *argv, "--format", "json"])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_the_demo_trace_gives_each_offloaded_pair_its_evidence(
    demo_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "priors.toml"
    code, rows, _ = _calibrate(capsys, str(demo_trace), "--output", str(out))
    assert 0 == code
    pairs = {(r["tool"], r["model"]): r for r in rows if "tool" in r}
    logs = pairs[("get_logs", "gpt-4o")]
    # one offload, recalled (twice): Beta(1, 1) + 1 recall = Beta(2, 1)
    assert (1, 1, 2) == (logs["offloads"], logs["recalled"], logs["recalls"])
    assert [1.0, 1.0] == logs["prior"]
    assert [2.0, 1.0] == logs["posterior"]
    assert 0.666667 == logs["recall_probability"]
    assert [round(math.sqrt(0.05), 6), round(math.sqrt(0.95), 6)] == logs["credible_90"]
    # seven model calls followed it in its conversation; a recall ended its carry after one
    assert 7 == logs["horizon"]
    assert 1.0 == logs["turns_carried"]["median"]
    assert logs["calibrated"] is False  # 1 < the default minimum
    export = pairs[("export_report", "claude-opus-4-6")]
    assert (1, 0, [1.0, 2.0]) == (export["offloads"], export["recalled"], export["posterior"])
    priors = Priors.load(out)
    assert rows[-1]["total"]["version"] == priors.version
    assert DEFAULT_MIN_OFFLOADS == priors.min_offloads
    assert priors.lookup("get_logs", "gpt-4o") is None  # too little evidence: defaults
    assert 2 == len(priors)


def test_the_same_evidence_writes_the_same_file(
    demo_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    assert 0 == main(["calibrate", str(demo_trace), "--output", str(a), "--min-offloads", "1"])
    assert 0 == main(["calibrate", str(demo_trace), "--output", str(b), "--min-offloads", "1"])
    capsys.readouterr()
    assert a.read_text() == b.read_text()
    assert Priors.load(a).lookup("get_logs", "gpt-4o") is not None


def _priors(tmp_path: Path, offloads: int, min_offloads: int = 20) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f'format = 1\nversion = "v7"\nmin_offloads = {min_offloads}\n'
        '[[priors]]\ntool = "get_logs"\nmodel = "gpt-4o"\nhorizon = 0\n'
        f"recall_probability = 1.0\noffloads = {offloads}\n",
        encoding="utf-8",
    )
    return path


def test_the_gate_uses_a_calibrated_pair_and_says_so(tmp_path: Path) -> None:
    gate = OffloadGate(priors=_priors(tmp_path, 50))
    logs = gate.evaluate(20_000, "gpt-4o", GateCall("c", tool_name="get_logs"))
    other = gate.evaluate(20_000, "gpt-4o", GateCall("c", tool_name="fetch_data"))
    assert (0, 1.0, PriorSource.CALIBRATED, "v7") == (
        logs.horizon, logs.recall_probability, logs.prior_source, logs.priors_version
    )  # fmt: skip
    assert (5, 0.5, PriorSource.DEFAULT, "v7") == (
        other.horizon, other.recall_probability, other.prior_source, other.priors_version
    )  # fmt: skip
    # carried for no turn and surely recalled, the logs offload cannot pay; the default one does
    assert (False, True) == (logs.fire, other.fire)


def test_thin_evidence_falls_back_to_the_gates_own_priors(tmp_path: Path) -> None:
    gate = OffloadGate(priors=_priors(tmp_path, 19))
    d = gate.evaluate(20_000, "gpt-4o", GateCall("c", tool_name="get_logs"))
    assert (5, 0.5, PriorSource.DEFAULT, True) == (
        d.horizon, d.recall_probability, d.prior_source, d.fire
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("format = 2\nversion = 'v'\n", "format"),
        ("format = 1\n", "version"),
        ("format = 1\nversion = 'v'\nmin_offloads = 0\n", "min_offloads"),
        (
            "format = 1\nversion = 'v'\n[[priors]]\ntool = 't'\nmodel = 'm'\nhorizon = 1\n"
            "recall_probability = 1.5\noffloads = 3\n",
            "priors[0].recall_probability",
        ),
        ("format = = 1", "not valid TOML"),
    ],
)
def test_a_bad_priors_file_fails_at_construction_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"OffloadGate\.priors") as info:
        OffloadGate(priors=path)
    assert field in str(info.value)


def test_no_settled_offload_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"resourceSpans": []}\n', encoding="utf-8")
    assert 2 == main(["calibrate", str(path), "--output", str(tmp_path / "p.toml")])
    assert "no settled offload" in capsys.readouterr().err
    assert not (tmp_path / "p.toml").exists()


def test_help_documents_every_flag_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["calibrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--output FILE",
        "default seamscope-priors.toml",
        "--min-offloads N",
        f"default {DEFAULT_MIN_OFFLOADS}",
        "--prior-strength K",
        "--version TEXT",
        "--format {text,json}",
        "--prometheus URL",
        "--range DURATION",
        "exit codes: 0 success; 1 some lines or spans were skipped",
        "2 usage error",
    ):
        assert needle in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--range", "30d", "t.jsonl"], "--range goes with --prometheus"),
        (["--prometheus", "http://127.0.0.1:9", "t.jsonl"], "one of them"),
        (["--prometheus", "http://127.0.0.1:9", "--range", "a month"], "a PromQL duration"),
    ],
)
def test_prometheus_flags_misused_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert 2 == main(["calibrate", *argv, "--output", "-"])
    assert message in capsys.readouterr().err


def _answers(values: dict[str, list[tuple[dict[str, str], float]]]) -> Any:
    """A loopback HTTP server answering Prometheus' instant-query API from ``values``
    (by the metric name the query reads)."""
    import http.server
    import threading
    import urllib.parse

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
            name = next(n for n in values if n in query)
            result = [{"metric": m, "value": [0, str(v)]} for m, v in values[name]]
            body = json.dumps({"status": "success", "data": {"result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_remaining_turns_past_32_are_taken_at_their_buckets_bound_and_said_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from seamscope.telemetry import conventions as c

    pair = {"gen_ai_tool_name": "search", "gen_ai_request_model": "gpt-4o"}
    remaining = c.METRIC_OFFLOAD_REMAINING_TURNS.prometheus
    # five offloads: 3, 3, 7 turns (exact buckets) and two in (32, 40]
    cumulative = {3: 2, 7: 3, 32: 3, 40: 5}
    buckets = []
    for le in (*range(0, 33), 40, 48, 64, 96, 128, 256):
        count = max((n for b, n in cumulative.items() if b <= le), default=0)
        buckets.append(({**pair, "le": f"{float(le)}"}, count))
    buckets.append(({**pair, "le": "+Inf"}, 5))
    server = _answers(
        {
            remaining + "_bucket": buckets,
            remaining + "_sum": [(pair, 3 + 3 + 7 + 35 + 39)],
            c.METRIC_OFFLOAD_RECALLED_OFFLOADS.prometheus: [(pair, 2)],
            c.METRIC_OFFLOAD_SETTLED_RECALLS.prometheus: [(pair, 3)],
            c.METRIC_OFFLOAD_CARRIED_TURNS.prometheus: [(pair, 10)],
            c.METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY.prometheus: [(pair, 2.5)],
        }
    )
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert 0 == main(["calibrate", "--prometheus", url, "--output", "-", "--format", "json"])
    finally:
        server.shutdown()
    out = capsys.readouterr()
    import tomllib

    document = tomllib.loads(out.out)
    (entry,) = document["priors"]
    evidence = entry["evidence"]
    assert ("prometheus", 5, 7, 2, 3) == (
        document["source"],
        entry["offloads"],
        entry["horizon"],  # the median: exact (the third of five values)
        evidence["recalled"],
        evidence["recalls"],
    )
    assert {"median": 7.0, "p10": 3.0, "p90": 40.0, "mean": 17.4} == evidence["remaining_turns"]
    assert {"mean": 2.0} == evidence["turns_carried"]
    assert ["remaining_turns"] == evidence["approximate"]
    # the Beta posterior is seeded by the mean prior 0.5 (2.5 over 5 offloads)
    assert [1.0, 1.0] == evidence["prior"] and [3.0, 4.0] == evidence["posterior"]
