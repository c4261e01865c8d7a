"""Helpers for the end-to-end tests: real processes, free ports, deadlines, OTLP-JSON.

Every process binds 127.0.0.1 on a free high port, writes its output to a log
file in a temporary folder, and is stopped by PID (terminate, wait, kill on
timeout) when the fixture that started it tears down, whatever happened in
between. Waiting is always polling an HTTP API or a file against a deadline,
never a fixed sleep; a timeout fails with the tail of every process's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

__all__ = [
    "ROOT",
    "Process",
    "ProcessGroup",
    "Span",
    "WebhookReceiver",
    "child_env",
    "free_port",
    "get_json",
    "http_ok",
    "read_otlp_spans",
    "require_executable",
    "seamscope_demo_argv",
    "wait_for",
]

ROOT = Path(__file__).resolve().parents[2]

T = TypeVar("T")


def require_executable(name_or_path: str | Path, install_hint: str) -> str:
    """The executable's path; skip the test when it is missing, fail when ``CI`` is set."""
    candidate = Path(name_or_path)
    if candidate.is_absolute() or len(candidate.parts) > 1:
        found = str(candidate) if os.access(candidate, os.X_OK) else None
    else:
        found = shutil.which(str(name_or_path))
    if found:
        return found
    message = f"{name_or_path} is not installed (install it with: {install_hint})"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so the end-to-end tests must run", pytrace=False)
    pytest.skip(f"{message}; install it to run this end-to-end test")


def free_port() -> int:
    """A free TCP port on 127.0.0.1, found by binding port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """This environment without OpenTelemetry or seamscope settings, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "SEAMSCOPE_", "PHOENIX_"))
    }
    env.update(extra)
    return env


def seamscope_demo_argv(*options: str) -> list[str]:
    """``python -m seamscope demo OPTIONS`` with this interpreter (the project's venv)."""
    return [sys.executable, "-m", "seamscope", "demo", *options]


class Process:
    """One child process with its output in a log file; stopped by PID."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
            )
        except BaseException:
            self._log.close()
            raise

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        kept = text.splitlines()[-lines:]
        return "\n".join(kept) if kept else "(empty)"

    def describe(self, lines: int = 40) -> str:
        code = self.popen.poll()
        state = "running" if code is None else f"exited with {code}"
        return (
            f"--- {self.name} (pid {self.pid}, {state}); last {lines} lines of "
            f"{self.log_path} ---\n{self.tail(lines)}"
        )

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate, wait up to ``timeout`` s, then kill; return the exit code."""
        try:
            if self.popen.poll() is None:
                self.popen.terminate()
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait(timeout)
        finally:
            self._log.close()
        return self.popen.returncode


@dataclass
class ProcessGroup:
    """The processes of one fixture: diagnostics for failures, teardown by PID."""

    processes: list[Process] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Process:
        process = Process(name, argv, log_dir, env=env, cwd=cwd)
        self.processes.append(process)
        return process

    def check_alive(self) -> None:
        """Fail at once, with the logs, when a process died before its time."""
        dead = [p for p in self.processes if not p.running()]
        if dead:
            names = ", ".join(f"{p.name} (exit {p.popen.returncode})" for p in dead)
            pytest.fail(f"process exited early: {names}\n{self.diagnostics()}", pytrace=False)

    def diagnostics(self, lines: int = 40) -> str:
        return "\n".join(p.describe(lines) for p in self.processes)

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(Exception):
                process.stop()


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    diagnostics: Callable[[], str] = lambda: "",
    interval: float = 0.25,
    alive: ProcessGroup | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with diagnostics at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if alive is not None:
            alive.check_alive()
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n{diagnostics()}")
        time.sleep(interval)


def get_json(url: str, params: Mapping[str, Any] | None = None, timeout: float = 5.0) -> Any:
    """GET ``url`` and decode JSON; ``None`` when the server is not up (yet).

    ``params`` values that are lists repeat the parameter. An HTTP error
    status raises :class:`urllib.error.HTTPError` with the body in its reason,
    so a rejected query shows why.
    """
    if params:
        url = f"{url}?{urllib.parse.urlencode(params, doseq=True)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", errors="replace")
        raise urllib.error.HTTPError(
            exc.url, exc.code, f"{exc.reason}: {body}", exc.hdrs, None
        ) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when ``url`` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class WebhookReceiver:
    """A tiny HTTP server on 127.0.0.1 that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._payloads: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    payload = json.loads(body.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    payload = {"unparsable": body.decode("utf-8", errors="replace")}
                with receiver._lock:
                    receiver._payloads.append({"path": self.path, "body": payload})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="webhook-receiver", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/alerts"

    def payloads(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._payloads)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


# --------------------------------------------------------------------------
# OTLP-JSON, decoded independently of seamscope's own reader.
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]]


def _value(raw: Mapping[str, Any]) -> Any:
    if "stringValue" in raw:
        return raw["stringValue"]
    if "boolValue" in raw:
        return bool(raw["boolValue"])
    if "intValue" in raw:
        return int(raw["intValue"])
    if "doubleValue" in raw:
        return float(raw["doubleValue"])
    if "arrayValue" in raw:
        return [_value(v) for v in (raw["arrayValue"] or {}).get("values", [])]
    raise AssertionError(f"unexpected OTLP-JSON value {raw!r}")


def _attributes(items: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value") or {}) for item in items or ()}


def read_otlp_spans(path: Path) -> list[Span]:
    """Every span of an OTLP-JSON file (one ``{"resourceSpans": ...}`` per line)."""
    spans: list[Span] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for raw in scope_spans.get("spans", []):
                    spans.append(
                        Span(
                            trace_id=raw["traceId"],
                            span_id=raw["spanId"],
                            parent_span_id=raw.get("parentSpanId") or "",
                            name=raw["name"],
                            start_ns=int(raw["startTimeUnixNano"]),
                            end_ns=int(raw["endTimeUnixNano"]),
                            attributes=_attributes(raw.get("attributes")),
                            events=[
                                {
                                    "name": event["name"],
                                    "attributes": _attributes(event.get("attributes")),
                                }
                                for event in raw.get("events", [])
                            ],
                        )
                    )
    return spans
