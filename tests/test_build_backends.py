"""deploy/build-backends.sh on one cache from two runs at once.

The Go toolchain is replaced by a stand-in on PATH that writes the files the
real ``go`` and ``ocb`` would write (so the test takes seconds, not the half
hour of a cold build) and can be held inside Jaeger's compile step; the
script under test runs as shipped. The real builds run in CI
(``bash .ci/run`` builds the binaries the end-to-end tests use).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "build-backends.sh"

# `go` as the script calls it: mod init, get -tool, build -o FILE, install (ocb).
FAKE_GO = r"""#!/usr/bin/env bash
set -euo pipefail
case "$1" in
  mod) exit 0 ;;
  get) exit 0 ;;
  build)
    out=""
    while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done
    touch "$FAKE_GO_STATE/jaeger-compiling"
    while [ -e "$FAKE_GO_STATE/hold" ]; do sleep 0.05; done
    printf '#!/bin/sh\necho jaeger\n' > "$out"; chmod +x "$out" ;;
  install)
    mkdir -p "$GOBIN"
    cat > "$GOBIN/builder" <<'OCB'
#!/usr/bin/env bash
set -euo pipefail
case " $* " in
  *" --skip-compilation "*)
    mkdir -p otelcol-seamscope; echo generated > otelcol-seamscope/main.go ;;
  *" --skip-generate "*)
    test -f otelcol-seamscope/main.go
    printf '#!/bin/sh\necho otelcol\n' > otelcol-seamscope/otelcol-seamscope
    chmod +x otelcol-seamscope/otelcol-seamscope ;;
  *) exit 3 ;;
esac
OCB
    chmod +x "$GOBIN/builder" ;;
  *) echo "fake go: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path) -> dict[str, str]:
    if shutil.which("flock") is None:
        pytest.fail("flock (util-linux) is needed by deploy/build-backends.sh")
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO, encoding="utf-8")
    go.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GO", "SEAMSCOPE_"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        FAKE_GO_STATE=str(state),
        SEAMSCOPE_BACKENDS_CACHE=str(tmp_path / "cache"),
    )
    return env


def _start(env: dict[str, str], stderr: Path) -> subprocess.Popen[str]:
    with stderr.open("w") as err:
        return subprocess.Popen(
            ["bash", str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )


def _wait_for(done: object, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_two_runs_on_one_cache_take_turns_and_leave_one_copy(
    tmp_path: Path, fake_go: dict[str, str]
) -> None:
    cache = tmp_path / "cache"
    state = Path(fake_go["FAKE_GO_STATE"])
    # what an interrupted run leaves: a work directory, a binary's directory without it
    (cache / "src" / "run.killed").mkdir(parents=True)
    (cache / "jaeger-v1.76.0").mkdir()
    (state / "hold").touch()
    errs = [tmp_path / "first.err", tmp_path / "second.err"]
    first = _start(fake_go, errs[0])
    compiling = state / "jaeger-compiling"
    _wait_for(compiling.exists, "the first run to be mid-build, holding the lock")
    second = _start(fake_go, errs[1])
    _wait_for(lambda: "another build holds" in errs[1].read_text(), "the second run to wait")
    (state / "hold").unlink()
    outputs = [
        (run.communicate(timeout=120)[0], err.read_text())
        for run, err in zip((first, second), errs, strict=True)
    ]
    codes = [run.returncode for run in (first, second)]
    jaeger = cache / "jaeger-v1.76.0" / "jaeger"
    [otelcol] = sorted(cache.glob("otelcol-seamscope-*/otelcol-seamscope"))
    lines = f"SEAMSCOPE_JAEGER_BIN={jaeger}\nSEAMSCOPE_OTELCOL_BIN={otelcol}\n"
    assert ([0, 0], [lines, lines]) == (codes, [out for out, _ in outputs])
    first_err, second_err = (err for _, err in outputs)
    assert (True, True, 2) == (
        "removing " in first_err and "run.killed" in first_err,
        "jaeger v1.76.0: building" in first_err,
        second_err.count(": cached"),
    )
    assert ["jaeger\n", "otelcol\n"] == [
        subprocess.run([str(b)], capture_output=True, text=True, check=True).stdout
        for b in (jaeger, otelcol)
    ]
    assert [] == sorted(p.name for p in (cache / "src").iterdir())  # nothing left behind


def test_jaeger_alone_builds_one_binary_and_prints_its_line(
    tmp_path: Path, fake_go: dict[str, str]
) -> None:
    """The one-binary path of docs/backends.md: no collector, no ocb."""
    cache = tmp_path / "cache"
    done = subprocess.run(
        ["bash", str(SCRIPT), "jaeger"], env=fake_go, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    jaeger = cache / "jaeger-v1.76.0" / "jaeger"
    assert (0, f"SEAMSCOPE_JAEGER_BIN={jaeger}\n") == (done.returncode, done.stdout)
    assert "otelcol-seamscope: not built (jaeger only)" in done.stderr
    assert [] == sorted(p.name for p in cache.glob("o*"))  # neither ocb nor the collector
    wrong = subprocess.run(
        ["bash", str(SCRIPT), "collector"], env=fake_go, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert 2 == wrong.returncode and "usage:" in wrong.stderr
