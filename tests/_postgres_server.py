"""A real PostgreSQL 15 server for the store tests (Debian's ``postgresql``
package), on 127.0.0.1 at a free high port, trust authentication.

PostgreSQL refuses to run as root, and the tests run as root here: the
server then runs as the ``postgres`` system user the package creates, from a
private folder that user owns (data directory and socket directory), because
pytest's temporary folders are readable by root alone. Its log goes to the
folder the test gave. Readiness is polled (a connection succeeds), never a
fixed sleep. Stopped by PID: ``pg_ctl stop -m fast``, then SIGKILL if
needed; every store it handed out is closed first.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, NoReturn

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore
from psycopg.rows import dict_row
from tests.e2e._support import free_port, require_executable

__all__ = ["PostgresServer"]

BIN = Path("/usr/lib/postgresql/15/bin")
INSTALL_HINT = "apt-get install postgresql"
SERVER_USER = "postgres"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def _unavailable(message: str) -> NoReturn:
    """Skip (fail when ``CI`` is set), as :func:`require_executable` does."""
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so the PostgreSQL tests must run", pytrace=False)
    pytest.skip(f"{message}; install it to run the PostgreSQL tests")


class PostgresServer:
    """One ``postgres`` process and the connections handed out to it."""

    def __init__(
        self,
        *,
        home: Path,
        owned_home: bool,
        port: int,
        popen: subprocess.Popen[bytes],
        log: IO[bytes],
        log_path: Path,
        pg_ctl: str,
        user: dict[str, Any],
    ) -> None:
        self.home = home
        self.port = port
        self.log_path = log_path
        self._owned_home = owned_home
        self._popen = popen
        self._log = log
        self._pg_ctl = pg_ctl
        self._user = user
        self._connections: list[psycopg.Connection[Any]] = []

    @classmethod
    def start(cls, directory: Path) -> PostgresServer:
        initdb = require_executable(BIN / "initdb", INSTALL_HINT)
        postgres = require_executable(BIN / "postgres", INSTALL_HINT)
        pg_ctl = require_executable(BIN / "pg_ctl", INSTALL_HINT)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        user: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(SERVER_USER)
            except KeyError:
                _unavailable(
                    f"PostgreSQL refuses to run as root and there is no {SERVER_USER!r} "
                    f"user to run it as (install it with: {INSTALL_HINT})"
                )
            user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            home = Path(tempfile.mkdtemp(prefix="seamscope-postgres-"))
            os.chown(home, entry.pw_uid, entry.pw_gid)
            owned_home = True
        else:
            home = directory / "server"
            home.mkdir()
            owned_home = False
        data, sockets = home / "data", home / "sockets"
        log_path = directory / "postgres.log"
        try:
            init = subprocess.run(
                [
                    initdb,
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "--no-instructions",
                ],
                cwd=home,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=120,
                check=False,
                **user,
            )
            if init.returncode != 0:
                raise RuntimeError(
                    f"initdb exited with {init.returncode}:\n"
                    f"{init.stdout.decode(errors='replace')}{init.stderr.decode(errors='replace')}"
                )
            if user:
                os.mkdir(sockets, 0o700)
                os.chown(sockets, user["user"], user["group"])
            else:
                sockets.mkdir()
            port = free_port()
            log = log_path.open("wb")
            try:
                popen = subprocess.Popen(
                    [
                        postgres,
                        "-D",
                        str(data),
                        "-k",
                        str(sockets),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(port),
                        "-c",
                        "fsync=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        "full_page_writes=off",
                    ],
                    cwd=home,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    **user,
                )
            except BaseException:
                log.close()
                raise
        except BaseException:
            if owned_home:
                shutil.rmtree(home, ignore_errors=True)
            raise
        server = cls(
            home=home,
            owned_home=owned_home,
            port=port,
            popen=popen,
            log=log,
            log_path=log_path,
            pg_ctl=pg_ctl,
            user=user,
        )
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def pid(self) -> int:
        return self._popen.pid

    def _tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    def _wait_ready(self) -> None:
        """Poll until a connection succeeds; fail with the log if the server
        exits or the deadline passes."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            code = self._popen.poll()
            if code is not None:
                raise RuntimeError(f"postgres exited with {code} while starting:\n{self._tail()}")
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"postgres did not accept connections within {START_TIMEOUT:g} s:\n"
                        f"{self._tail()}"
                    ) from None
            time.sleep(0.05)

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection set up as ``PostgresStore.from_conn_string`` sets
        its own; closed on :meth:`stop`."""
        conn = psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self._connections.append(conn)
        return conn

    def store(self) -> PostgresStore:
        """A ready ``PostgresStore`` (migrations run) on its own connection."""
        store = PostgresStore(self.connect())
        store.setup()
        return store

    def stop(self) -> None:
        for conn in self._connections:
            with contextlib.suppress(Exception):
                conn.close()
        self._connections.clear()
        try:
            if self._popen.poll() is None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(
                        [
                            self._pg_ctl,
                            "stop",
                            "-D",
                            str(self.home / "data"),
                            "-m",
                            "fast",
                            "-w",
                            "-t",
                            str(int(STOP_TIMEOUT)),
                        ],
                        cwd=self.home,
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=STOP_TIMEOUT + 5,
                        check=False,
                        **self._user,
                    )
                try:
                    self._popen.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self._popen.kill()
                    self._popen.wait(STOP_TIMEOUT)
        finally:
            self._log.close()
            if self._owned_home:
                shutil.rmtree(self.home, ignore_errors=True)
