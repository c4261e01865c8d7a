"""Construction checks shared by the stores: a bad setting fails at once,
naming the class and the field."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

from seamscope.decisions.records import StoredOffload

__all__ = [
    "check_clock",
    "check_limit",
    "check_seconds",
    "check_ttl",
    "redacted",
    "stamped",
]


def check_limit(owner: str, field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}.{field} must be an int >= 1, got {value!r}")
    return value


def check_seconds(owner: str, field: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{owner}.{field} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def check_ttl(owner: str, value: object) -> float | None:
    return None if value is None else check_seconds(owner, "ttl_seconds", value)


def check_clock(owner: str, clock: object) -> Callable[[], float]:
    if not callable(clock):
        raise ValueError(f"{owner}.clock must be callable, got {type(clock).__name__}")
    return clock


def stamped(offload: StoredOffload, ttl_seconds: float | None) -> StoredOffload:
    """The record with the store's retention: ``expires_at`` is ``created_at``
    plus the TTL when the record names none (None: no TTL)."""
    if offload.expires_at is not None or ttl_seconds is None:
        return offload
    return replace(offload, expires_at=offload.created_at + ttl_seconds)


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
