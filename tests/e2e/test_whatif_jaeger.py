"""whatif and calibrate read a real Jaeger v2's query API, paged, as they read the file:
the demo sends its spans to Jaeger over OTLP/HTTP and writes the same spans to a file."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seamscope.cli import main

from ._backends import JAEGER_CONFIG, LOOPBACK, jaeger_binary
from ._support import (
    ProcessGroup,
    child_env,
    free_port,
    get_json,
    http_ok,
    seamscope_demo_argv,
    wait_for,
)

pytestmark = pytest.mark.e2e
SERVICE = "whatif-e2e"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(Jaeger's query URL, the demo's own file) after one demo run sent to Jaeger."""
    tmp = tmp_path_factory.mktemp("whatif-jaeger")
    ports = {
        name: free_port()
        for name in (
            "JAEGER_QUERY_HTTP_PORT", "JAEGER_QUERY_GRPC_PORT", "JAEGER_OTLP_GRPC_PORT",
            "JAEGER_OTLP_HTTP_PORT", "JAEGER_HEALTH_PORT", "JAEGER_METRICS_PORT",
        )
    }  # fmt: skip
    processes = ProcessGroup()
    try:
        processes.start(
            "jaeger",
            [jaeger_binary(), "--config", str(JAEGER_CONFIG)],
            tmp,
            env=child_env(**{k: str(v) for k, v in ports.items()}),
            cwd=tmp,
        )
        url = f"http://{LOOPBACK}:{ports['JAEGER_QUERY_HTTP_PORT']}"
        wait_for(
            lambda: (
                http_ok(f"http://{LOOPBACK}:{ports['JAEGER_HEALTH_PORT']}/status")
                and get_json(f"{url}/api/services") is not None
            ),
            timeout=60,
            what="jaeger to be healthy",
            diagnostics=processes.diagnostics,
            alive=processes,
        )
        output = tmp / "demo.jsonl"
        done = subprocess.run(
            seamscope_demo_argv(
                "--output", str(output), "--quiet", "--service-name", SERVICE,
                "--otlp-endpoint", f"http://{LOOPBACK}:{ports['JAEGER_OTLP_HTTP_PORT']}",
            ),
            env=child_env(), cwd=tmp, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert 0 == done.returncode, done.stderr
        expected = sum(1 for line in output.open() for _ in json.loads(line)["resourceSpans"])

        def stored() -> bool:
            answer = get_json(f"{url}/api/traces", {"service": SERVICE, "limit": 100})
            return bool(answer and len(answer.get("data") or []) >= 7 and expected)

        wait_for(stored, timeout=30, what="the demo's traces in jaeger", alive=processes)
        yield url, output
    finally:
        processes.stop_all()


def _json(*argv: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main([*argv, "--format", "json"])
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_whatif_from_jaeger_paged_equals_whatif_from_the_file(
    recorded: tuple[str, Path],
) -> None:
    url, output = recorded
    change = ["--set", "tool.get_logs.threshold_tokens=1000000"]
    from_file = _json("whatif", str(output), *change)
    # two traces per request: the time windows split until every page has room
    from_jaeger = _json(
        "whatif", "--jaeger", url, "--service", SERVICE, "--since", "1h", "--page-size", "2",
        *change,
    )  # fmt: skip
    assert from_file[:-1] == from_jaeger[:-1]
    keep = ("realized_usd", "counterfactual_exact_usd", "difference_exact_usd", "no_longer_fired")
    assert {k: from_file[-1]["total"][k] for k in keep} == {
        k: from_jaeger[-1]["total"][k] for k in keep
    }
    assert 1 == from_jaeger[-1]["total"]["no_longer_fired"]


def test_calibrate_from_jaeger_equals_calibrate_from_the_file(
    recorded: tuple[str, Path], tmp_path: Path
) -> None:
    url, output = recorded
    a = _json("calibrate", str(output), "--output", str(tmp_path / "a.toml"))
    b = _json(
        "calibrate", "--jaeger", url, "--service", SERVICE, "--page-size", "3",
        "--output", str(tmp_path / "b.toml"),
    )  # fmt: skip
    assert a[:-1] == b[:-1]
    assert a[-1]["total"]["version"] == b[-1]["total"]["version"]
