"""whatif and calibrate read an at-least-once delivery as explain does: a batch
re-sent later in the file (an OTLP retry, a collector's replay) changes nothing.

The corpus is the demo's own run (the real loop, gate and ledger), its spans cut
into small export requests in the order the SDK ended them; the same requests,
with copies of some of them re-sent later in the file (and one at its very end),
must give the same answers to the Decimal.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests.cli._support import write_lines

from seamscope.cli import main


def _batches(path: Path, size: int) -> list[str]:
    """The file's spans re-cut into export requests of ``size`` spans, in file order."""
    spans: list[tuple[Any, Any, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend((rs["resource"], ss["scope"], sp) for sp in ss["spans"])
    out = []
    for i in range(0, len(spans), size):
        group = spans[i : i + size]
        request = {
            "resourceSpans": [
                {"resource": resource, "scopeSpans": [{"scope": scope, "spans": [sp]}]}
                for resource, scope, sp in group
            ]
        }
        out.append(json.dumps(request, separators=(",", ":")))
    return out


def _resent(lines: list[str], copies: int, replayed: int, seed: int) -> list[str]:
    """``lines`` with ``copies`` of them sent again, each at a later place (the last
    at the very end), then a run of ``replayed`` of them replayed at the end (a
    collector's queue replayed after a restart)."""
    rng = random.Random(seed)
    out = list(lines)
    chosen = rng.sample(range(len(lines)), copies)
    for n, index in enumerate(sorted(chosen, reverse=True)):
        where = len(out) if n == 0 else rng.randrange(index + 1, len(out) + 1)
        out.insert(where, lines[index])
    first = rng.randrange(0, len(lines) // 2)
    return out + lines[first : first + replayed]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """(the demo's run in small requests, the same with re-sent copies, requests
    sent twice)."""
    folder = tmp_path_factory.mktemp("delivery")
    demo = folder / "demo.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert 0 == main(["demo", "--quiet", "--turns", "28", "--output", str(demo)])
    lines = _batches(demo, 2)
    assert len(lines) > 300  # a conversation settles far from most of its copies
    once = write_lines(folder / "once.jsonl", lines)
    twice = write_lines(folder / "twice.jsonl", _resent(lines, 40, 120, seed=3))
    return once, twice, 40 + 120


def _json_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any]]:
    code = main([*argv, "--format", "json"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize(
    "change", [(), ("--set", "horizon=12", "--set", "tool.get_logs.horizon=0")]
)
def test_whatif_is_unchanged_by_batches_sent_again(
    corpus: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str], change: tuple[str, ...]
) -> None:
    once, twice, _ = corpus
    code_once, rows_once = _json_lines(capsys, "whatif", str(once), *change)
    code_twice, rows_twice = _json_lines(capsys, "whatif", str(twice), *change)
    assert (0, 0) == (code_once, code_twice)
    *convs_once, total_once = rows_once
    *convs_twice, total_twice = rows_twice
    assert len(convs_once) == len({r["conversation_id"] for r in convs_once}) >= 8
    key = lambda row: row["conversation_id"]  # noqa: E731
    assert sorted(convs_once, key=key) == sorted(convs_twice, key=key)
    for total in (total_once, total_twice):
        del total["total"]["lines"], total["total"]["duplicates_dropped"]
    assert total_once == total_twice
    assert Decimal(total_once["total"]["realized_usd"]) != 0


def test_calibrate_counts_each_settled_offload_once(
    corpus: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    once, twice, _ = corpus
    outputs = []
    for path in (once, twice):
        priors = tmp_path / f"{path.stem}.toml"
        code, rows = _json_lines(
            capsys, "calibrate", str(path), "--output", str(priors), "--min-offloads", "1"
        )
        assert 0 == code
        outputs.append(rows[:-1])
    assert outputs[0] == outputs[1]
    assert sum(r["offloads"] for r in outputs[0]) >= 4


def test_the_copies_are_counted_as_merged(
    corpus: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    once, twice, copies = corpus
    _, rows_once = _json_lines(capsys, "whatif", str(once))
    _, rows_twice = _json_lines(capsys, "whatif", str(twice))
    assert 0 == rows_once[-1]["total"]["duplicates_dropped"]
    assert 2 * copies == rows_twice[-1]["total"]["duplicates_dropped"]  # two spans a request


def test_requests_from_a_query_api_sent_twice_are_merged_too(
    corpus: tuple[Path, Path, int],
) -> None:
    """The Jaeger path hands parsed requests to the reader: the same merge."""
    from seamscope.replay import Overrides, Replay, whatif

    once, twice, copies = corpus
    answers = []
    for path in (once, twice):
        rows: list[tuple[str, Decimal, Decimal, Decimal, int]] = []
        requests = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

        def query(reader: Any, requests: list[Any] = requests) -> None:
            for request in requests:
                reader.feed(request, "query")

        def each(r: Replay, rows: list[Any] = rows) -> None:
            rows.append(
                (
                    r.conversation_id,
                    r.realized_usd,
                    r.counterfactual_exact_usd,
                    r.counterfactual_expected_usd,
                    r.gate_calls,
                )
            )

        totals, reader = whatif([], Overrides(), each, query=query)
        answers.append((sorted(rows), totals.realized, totals.gate_calls))
        assert (2 * copies if path == twice else 0) == reader.duplicates
    assert answers[0] == answers[1]
