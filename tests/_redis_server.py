"""A real ``redis-server`` for the store tests (never a fake).

Debian's ``/usr/bin/redis-server`` on 127.0.0.1 on a free high port, its data
(an append-only file fsynced at every write: nothing acknowledged is lost
across a restart) and its log in the given folder. Started, killed, restarted
and stopped by PID; waiting is polling PING against a deadline, never a fixed
sleep. The test is skipped when the server is not installed, unless ``CI`` is
set (then it fails).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
from tests.e2e._support import free_port, require_executable

__all__ = ["RedisServer"]

EXECUTABLE = "/usr/bin/redis-server"
INSTALL_HINT = "apt-get install redis-server"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class RedisServer:
    """One ``redis-server`` process; see the module docstring."""

    def __init__(self, executable: str, directory: Path, port: int, password: str | None) -> None:
        self.executable = executable
        self.directory = Path(directory)
        self.password = password
        self._port = port
        self._popen: subprocess.Popen[bytes] | None = None
        self.log_path = self.directory / "redis-server.log"
        self.config_path = self.directory / "redis.conf"

    @classmethod
    def start(cls, directory: Path, *, password: str | None = None) -> RedisServer:
        """A server started in ``directory`` (``requirepass password`` when given),
        answering PING when this returns."""
        executable = require_executable(EXECUTABLE, INSTALL_HINT)
        server = cls(executable, directory, free_port(), password)
        server._write_config()
        server._launch()
        return server

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError("redis-server is not running")
        return self._popen.pid

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self._port}/0"

    def _write_config(self) -> None:
        # a file, not arguments: the password is not shown by ps
        lines = [
            "bind 127.0.0.1",
            f"port {self._port}",
            f'dir "{self.directory}"',
            "protected-mode yes",
            "daemonize no",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            'logfile ""',
        ]
        if self.password:
            lines.append(f"requirepass {self.password}")
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _launch(self) -> None:
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                [self.executable, str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
            )
        self._wait_for_ping()

    def _tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    def _wait_for_ping(self) -> None:
        assert self._popen is not None
        client = redis.Redis(
            host="127.0.0.1",
            port=self._port,
            password=self.password,
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            protocol=2,
        )
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        try:
            while True:
                code = self._popen.poll()
                if code is not None:
                    pytest.fail(
                        f"redis-server exited with {code} on port {self._port}\n{self._tail()}",
                        pytrace=False,
                    )
                try:
                    if client.ping():
                        return
                except redis.exceptions.RedisError as exc:  # not listening or loading yet
                    last = exc
                if time.monotonic() >= deadline:
                    self._signal(signal.SIGKILL)
                    pytest.fail(
                        f"redis-server did not answer PING within {START_TIMEOUT:g} s "
                        f"(last: {last!r})\n{self._tail()}",
                        pytrace=False,
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def _signal(self, signum: int) -> None:
        if self._popen is not None and self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._popen.pid, signum)

    def kill(self) -> None:
        """SIGKILL by PID (no shutdown, no final write): a crash."""
        if self._popen is None:
            return
        self._signal(signal.SIGKILL)
        self._popen.wait(STOP_TIMEOUT)
        self._popen = None

    def stop(self) -> None:
        """SIGTERM by PID, wait, SIGKILL if it does not exit in time."""
        if self._popen is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self._popen.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._popen.wait(STOP_TIMEOUT)
        self._popen = None

    def restart(self) -> None:
        """Stop (if running) and start again on the same port and folder,
        answering PING when this returns."""
        self.stop()
        self._launch()
