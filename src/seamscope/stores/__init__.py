"""Offload stores: where fired offloads live, beyond any one process.

One interface (:class:`~seamscope.decisions.OffloadStore`), four places:
:class:`MemoryStore` (this process; the default), :class:`SQLiteStore` (one
machine, many processes, survives restarts), :class:`RedisStore` (many
machines) and :class:`LangGraphStore` (the LangGraph ``BaseStore`` a
LangChain agent is compiled with, a ``PostgresStore`` included). Chosen in
code or by ``SEAMSCOPE_OFFLOAD_STORE`` (:func:`store_from_url`).
docs/many-workers.md says how to run each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seamscope.decisions._lazy import lazy_exports

if TYPE_CHECKING:
    from seamscope.decisions import OffloadStore
    from seamscope.stores._langgraph import LangGraphStore
    from seamscope.stores._memory import MemoryStore
    from seamscope.stores._redis import RedisStore
    from seamscope.stores._sqlite import SQLiteStore
    from seamscope.stores._url import ENV_VAR, store_from_env, store_from_url

__all__ = [
    "ENV_VAR",
    "LangGraphStore",
    "MemoryStore",
    "OffloadStore",
    "RedisStore",
    "SQLiteStore",
    "store_from_env",
    "store_from_url",
]

_HOME = {
    "ENV_VAR": "seamscope.stores._url",
    "LangGraphStore": "seamscope.stores._langgraph",
    "MemoryStore": "seamscope.stores._memory",
    "OffloadStore": "seamscope.decisions._store",
    "RedisStore": "seamscope.stores._redis",
    "SQLiteStore": "seamscope.stores._sqlite",
    "store_from_env": "seamscope.stores._url",
    "store_from_url": "seamscope.stores._url",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__)
