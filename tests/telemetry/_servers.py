"""Real local servers for the fault tests, all on 127.0.0.1 and free ports.

* :func:`closed_port`: a port nothing listens on (connection refused).
* :class:`Blackhole`: accepts TCP connections and never answers.
* :class:`OtlpHttp`: an OTLP/HTTP receiver that answers ``status`` after
  ``delay`` seconds (200 with an empty protobuf response, or an error with
  an optional ``Retry-After``); it records each request's path, headers and
  span or data point count.
* :class:`OtlpGrpc`: an OTLP/gRPC receiver (traces and metrics) that answers
  after ``delay``, or aborts with ``code``.
* :class:`Drip`: answers 200 with a huge declared body sent slowly.

Each is a context manager and stops everything it started on exit.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

HOST = "127.0.0.1"


def closed_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago and has no listener."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(
        len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans
    )


def count_points(request: ExportMetricsServiceRequest) -> int:
    total = 0
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind is not None:
                    total += len(getattr(metric, kind).data_points)
    return total


class _Server:
    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class Blackhole(_Server):
    """Accepts connections and holds them open, never reading or answering."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for conn in self._held:
            conn.close()
        self._listener.close()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    items: int


@dataclass
class _Behaviour:
    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class OtlpHttp(_Server):
    """An OTLP/HTTP receiver with a chosen answer (see the module doc)."""

    def __init__(self, status: int = 200, delay: float = 0.0, retry_after: str | None = None):
        behaviour = self.behaviour = _Behaviour(status, delay, retry_after)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                items = 0
                if self.path.endswith("/v1/traces"):
                    items = count_spans(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                else:
                    items = count_points(ExportMetricsServiceRequest.FromString(body))
                    reply = ExportMetricsServiceResponse().SerializeToString()
                with behaviour.lock:
                    behaviour.requests.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, items)
                    )
                time.sleep(behaviour.delay)
                try:
                    self.send_response(behaviour.status)
                    if behaviour.status == 200:
                        self.send_header("Content-Type", "application/x-protobuf")
                    else:
                        reply = b""
                    if behaviour.retry_after is not None:
                        self.send_header("Retry-After", behaviour.retry_after)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass  # the client gave up first

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.port = int(self._server.server_address[1])
        self.url = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def requests(self) -> list[Received]:
        with self.behaviour.lock:
            return list(self.behaviour.requests)

    def items(self, path_suffix: str) -> int:
        return sum(r.items for r in self.requests if r.path.endswith(path_suffix))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)


class OtlpGrpc(_Server):
    """An OTLP/gRPC receiver for traces and metrics (see the module doc)."""

    def __init__(self, code: Any = None, delay: float = 0.0) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        self.spans = 0
        self.points = 0
        self.calls = 0
        self.metadata: list[dict[str, str]] = []
        lock = threading.Lock()
        receiver = self

        def answer(context: Any, items: int, attr: str, response: Any) -> Any:
            with lock:
                receiver.calls += 1
                receiver.metadata.append(dict(context.invocation_metadata()))
            time.sleep(delay)
            if code is not None:
                context.abort(code, "injected fault")
            with lock:
                setattr(receiver, attr, getattr(receiver, attr) + items)
            return response

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                return answer(context, count_spans(request), "spans", ExportTraceServiceResponse())

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                return answer(
                    context, count_points(request), "points", ExportMetricsServiceResponse()
                )

        self._server = grpc.server(ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        self.port = self._server.add_insecure_port(f"{HOST}:0")
        self.url = f"http://{HOST}:{self.port}"
        self._server.start()

    def close(self) -> None:
        self._server.stop(grace=0).wait(timeout=2)


class Drip(_Server):
    """An HTTP server that answers every request with status 200 and a huge
    declared body, sent ``chunk`` bytes at a time every ``interval`` seconds,
    at most ``limit`` bytes per answer in all; it counts what it sent."""

    def __init__(
        self,
        *,
        chunk: int = 1,
        interval: float = 0.05,
        limit: int = 64 * 1024 * 1024,
        declared: int = 2 * 1024**3,
    ) -> None:
        self.requests = 0
        self.sent = 0
        lock = threading.Lock()
        server = self
        self._stop = threading.Event()
        stop = self._stop

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    server.requests += 1
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(declared))
                    self.end_headers()
                    self.wfile.flush()
                    block = b"\0" * chunk
                    left = limit
                    while left > 0 and not stop.is_set():
                        self.wfile.write(block[:left])
                        self.wfile.flush()
                        with lock:
                            server.sent += min(chunk, left)
                        left -= chunk
                        if interval:
                            stop.wait(interval)
                except OSError:
                    pass  # the client gave up

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.port = int(self._server.server_address[1])
        self.url = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)


class Answer(_Server):
    """Answers every POST with status 200, ``body`` and ``headers``."""

    def __init__(self, body: bytes, headers: dict[str, str] | None = None) -> None:
        extra = dict(headers or {})

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{HOST}:{int(self._server.server_address[1])}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)
