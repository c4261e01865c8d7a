"""What whatif and calibrate keep in memory while they read does not grow with
the input: a finished trace leaves only its id in a fixed-size filter, and
where its events are goes to a file; a batch re-sent after its trace was
finished is still read as late (the trace re-read whole)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from benchmarks.bench_calibrate import gate_file

from seamscope.explain import _traces
from seamscope.replay import CourseReader, _course

ENGINE = (str(Path(_traces.__file__).parent), str(Path(_traces.__file__).parents[1] / "replay"))


def _held_while_reading(path: Path) -> int:
    """Bytes the reader's own code holds once every line is read (the spill of
    events aside: it moves to disk past its bound)."""
    reader = CourseReader(lambda conv: None)
    tracemalloc.start()
    try:
        with path.open(encoding="utf-8") as handle:
            reader.read(handle, str(path))
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        reader.close_all()
    return sum(
        stat.size
        for stat in snapshot.statistics("filename")
        if stat.traceback[0].filename.startswith(ENGINE)
    )


def test_what_the_reader_holds_does_not_grow_with_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_course._Index, "_BATCH", 100)  # rows written to the file 100 at a time
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    gate_file(small, 2_000, offloading=False)  # 500 conversations, one trace each
    gate_file(large, 8_000, offloading=False)  # 2 000
    grown = _held_while_reading(large) - _held_while_reading(small)
    assert grown < 64 * 1024, grown  # 1 500 more traces: not 1 500 x hundreds of bytes


def test_a_finished_trace_is_remembered_by_its_id_alone() -> None:
    finished = _traces.FinishedTraces()
    ids = [f"{n:032x}" for n in range(1, 5_001)] + [f"{n:016x}" * 2 for n in range(7, 9)]
    for trace_id in ids:
        finished.add(trace_id)
    assert all(trace_id in finished for trace_id in ids)
    others = [f"{n:032x}" for n in range(10_001, 20_001)]
    assert sum(trace_id in finished for trace_id in others) <= 2
