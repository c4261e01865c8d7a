"""An offload store from a URL, and from ``SEAMSCOPE_OFFLOAD_STORE``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from seamscope.decisions import OffloadStore
from seamscope.stores._checks import redacted

__all__ = ["ENV_VAR", "redacted", "store_from_env", "store_from_url"]

ENV_VAR = "SEAMSCOPE_OFFLOAD_STORE"
"""The environment variable an operator sets to choose the offload store
(a URL, see :func:`store_from_url`); read when a layer or an adapter is
built without an explicit store."""

_SETTINGS: dict[str, Callable[[str], Any]] = {
    "ttl_seconds": lambda v: None if v.lower() in ("", "none") else float(v),
    "max_items": int,
    "timeout": float,
    "prefix": str,
}


def _options(scheme: str, query: str, allowed: tuple[str, ...], shown: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in allowed:
            raise ValueError(
                f"offload store URL {shown!r}: unknown setting {key!r} for {scheme}:// "
                f"(known: {', '.join(allowed)})"
            )
        try:
            options[key] = _SETTINGS[key](value)
        except ValueError:
            raise ValueError(
                f"offload store URL {shown!r}: setting {key!r} has a bad value {value!r}"
            ) from None
    return options


def store_from_url(url: str) -> OffloadStore:
    """The store a URL names:

    * ``memory://`` — this process only (``?max_items=256&ttl_seconds=...``);
    * ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` — one
      machine, every process (``?ttl_seconds=...&max_items=...&timeout=...``);
    * ``redis://[user:password@]host:port/db``, ``rediss://...`` — many machines
      (``?ttl_seconds=...&max_items=...&timeout=...&prefix=...``); the password
      is used to connect and never shown in a message or a span.

    A URL that names no known store, or a bad setting, raises ValueError
    (the password redacted).
    """
    if not isinstance(url, str):
        raise ValueError(f"offload store URL must be a str, got {type(url).__name__}")
    shown = redacted(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(f"offload store URL {shown!r} cannot be parsed") from None
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from seamscope.stores._memory import MemoryStore

        return MemoryStore(**_options(scheme, parts.query, ("max_items", "ttl_seconds"), shown))
    if scheme == "sqlite":
        from seamscope.stores._sqlite import SQLiteStore

        path = url.split("://", 1)[1].split("?", 1)[0]
        if not path.startswith("/") or len(path) < 2:
            raise ValueError(
                f"offload store URL {shown!r}: write sqlite:///relative/path.db or "
                "sqlite:////absolute/path.db"
            )
        options = _options(scheme, parts.query, ("ttl_seconds", "max_items", "timeout"), shown)
        return SQLiteStore(path[1:], **options)
    if scheme in ("redis", "rediss"):
        from seamscope.stores._redis import RedisStore

        options = _options(
            scheme, parts.query, ("ttl_seconds", "max_items", "timeout", "prefix"), shown
        )
        return RedisStore(urlunsplit(parts._replace(query="")), **options)
    raise ValueError(
        f"offload store URL {shown!r}: unknown scheme {parts.scheme!r} "
        "(memory://, sqlite:///path, redis://host:port/db)"
    )


def store_from_env(environ: Mapping[str, str] | None = None) -> OffloadStore | None:
    """The store ``SEAMSCOPE_OFFLOAD_STORE`` names, or None when it is unset or
    empty. A bad value raises ValueError naming the variable."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not value:
        return None
    try:
        return store_from_url(value)
    except ValueError as exc:
        raise ValueError(f"{ENV_VAR}: {exc}") from None
