"""Every offload store under one contract: the in-memory and SQLite stores
in this process, Redis against a real ``redis-server`` and LangGraph's
stores (``InMemoryStore``, ``PostgresStore`` against a real PostgreSQL)
started on 127.0.0.1 by the modules beside this file."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seamscope.decisions import OffloadStore
from seamscope.stores import MemoryStore, SQLiteStore

StoreFactory = Callable[..., OffloadStore]
"""``factory(clock=..., ttl_seconds=..., max_items=...)`` -> a fresh, empty store."""

KINDS = ("memory", "sqlite", "redis", "langgraph-memory", "langgraph-postgres")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests._redis_server import RedisServer

    server = RedisServer.start(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests._postgres_server import PostgresServer

    server = PostgresServer.start(tmp_path_factory.mktemp("postgres"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores of one kind (each test gets empty ones)."""
    made: list[OffloadStore] = []
    kind = request.param
    counter = iter(range(1_000_000))

    def factory(**options: Any) -> OffloadStore:
        n = next(counter)
        if kind == "memory":
            store: OffloadStore = MemoryStore(**options)
        elif kind == "sqlite":
            store = SQLiteStore(tmp_path / f"offloads-{n}.db", **options)
        elif kind == "redis":
            from seamscope.stores import RedisStore

            server = request.getfixturevalue("redis_server")
            store = RedisStore(server.url, prefix=f"t{uuid.uuid4().hex}:", **options)
        elif kind == "langgraph-memory":
            from langgraph.store.memory import InMemoryStore

            from seamscope.stores import LangGraphStore

            store = LangGraphStore(InMemoryStore(), **options)
        else:
            from seamscope.stores import LangGraphStore

            server = request.getfixturevalue("postgres_server")
            store = LangGraphStore(
                server.store(), namespace=("t", uuid.uuid4().hex), **options
            )
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()
