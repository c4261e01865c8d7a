"""Fixtures of the telemetry tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from seamscope.telemetry import TelemetryHandle, configure


@pytest.fixture
def handles() -> Iterator[Callable[..., TelemetryHandle]]:
    """``configure(**kwargs)`` that never touches globals or atexit; every
    handle made is shut down after the test."""
    made: list[TelemetryHandle] = []

    def make(**kwargs: Any) -> TelemetryHandle:
        kwargs.setdefault("set_global", False)
        kwargs.setdefault("register_atexit", False)
        handle = configure(**kwargs)
        made.append(handle)
        return handle

    yield make
    for handle in made:
        handle.shutdown()
