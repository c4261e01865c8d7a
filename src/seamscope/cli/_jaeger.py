"""Recorded traces from Jaeger's query API (v3, OTLP-JSON), paged by time window.

``GET {url}/api/v3/traces?query.service_name=S&query.start_time_min=…&
query.start_time_max=…&query.num_traces=N`` answers
``{"result": {"resourceSpans": [...]}}`` (404 "No traces found" for none). A
window that returns ``page`` traces may hold more: it is split in two halves,
each read in turn (oldest first), down to a millisecond. Each answer is fed to
the course reader as one export request; a trace returned by two windows is
read once (spans are deduplicated by id).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

__all__ = ["DEFAULT_PAGE", "JaegerError", "parse_time", "requests"]

DEFAULT_PAGE = 500
"""Traces asked for per request; a full page splits its window."""
_TIMEOUT_S = 30.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class JaegerError(RuntimeError):
    """Jaeger could not be read (its message says why)."""


def parse_time(text: str, now_ns: int | None = None) -> int:
    """Nanoseconds since the epoch: an ISO 8601 time (UTC when no zone is given),
    ``now``, or a duration back from now (``90s``, ``30m``, ``6h``, ``7d``)."""
    now = time.time_ns() if now_ns is None else now_ns
    text = text.strip()
    if text == "now":
        return now
    found = _DURATION.fullmatch(text)
    if found:
        return now - int(float(found.group(1)) * _UNIT[found.group(2)] * 1e9)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use ISO 8601 (2026-12-01T10:00:00Z), now, or a "
            "duration back from now (30m, 6h, 7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * 1000


def _stamp(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _get(url: str, service: str, lo: int, hi: int, page: int) -> dict[str, Any] | None:
    query = urllib.parse.urlencode(
        {
            "query.service_name": service,
            "query.start_time_min": _stamp(lo),
            "query.start_time_max": _stamp(hi),
            "query.num_traces": page,
        }
    )
    target = f"{url.rstrip('/')}/api/v3/traces?{query}"
    try:
        with urllib.request.urlopen(target, timeout=_TIMEOUT_S) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None  # no traces in this window
        raise JaegerError(f"{target}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise JaegerError(f"{url}: cannot connect ({reason})") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise JaegerError(f"{target}: the answer is not JSON") from None
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict):
        raise JaegerError(f"{target}: no result in the answer")
    return result


def _traces(result: dict[str, Any]) -> int:
    ids = set()
    for rs in result.get("resourceSpans") or ():
        for ss in rs.get("scopeSpans") or ():
            for sp in ss.get("spans") or ():
                ids.add(sp.get("traceId"))
    return len(ids)


def requests(
    url: str, service: str, since_ns: int, until_ns: int, *, page: int = DEFAULT_PAGE
) -> Iterator[dict[str, Any]]:
    """Export requests (``{"resourceSpans": [...]}``) of ``service``'s traces that
    started in [since, until], oldest window first."""
    windows = [(since_ns, until_ns)]
    while windows:
        lo, hi = windows.pop()
        result = _get(url, service, lo, hi, page)
        if result is None:
            continue
        if _traces(result) >= page and hi - lo > 1_000_000:
            mid = (lo + hi) // 2
            windows += [(mid, hi), (lo, mid)]  # the older half is read first
            continue
        yield {"resourceSpans": result.get("resourceSpans") or []}
