"""Small helpers the framework adapters' hooks share: contain seamscope's own
failures, attach an OpenTelemetry context for one block, hold a telemetry
``with`` scope around a block of one hook without letting it break the
framework's code.

Every helper takes the adapter's stdlib logger, so a failure is logged under
the adapter's name (``seamscope.adapters.<framework>``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from seamscope._internal import telemetry_error
from seamscope.adapters._kit import Held

__all__ = ["attached", "contained", "failed"]

_T = TypeVar("_T")


def failed(hook: str, logger: logging.Logger) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``).

    A ``seamscope.telemetry.error`` event names the hook and the error type;
    the traceback goes to ``logger`` at DEBUG. Never raises.
    """
    with contextlib.suppress(Exception):
        telemetry_error(hook, sys.exc_info()[1])
        logger.debug("seamscope: %s failed; the agent continues unchanged", hook, exc_info=True)


@contextlib.contextmanager
def attached(context: Any, prefix: str, logger: logging.Logger) -> Iterator[None]:
    """An OpenTelemetry context made current for a block of one hook (same task);
    a failure to attach or detach is ``{prefix}.context_attach``/``_detach``."""
    token: Any = None
    if context is not None:
        try:
            token = otel_context.attach(context)
        except Exception:
            failed(f"{prefix}.context_attach", logger)
    try:
        yield
    finally:
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception:
                failed(f"{prefix}.context_detach", logger)


@contextlib.contextmanager
def contained(
    factory: Callable[[], contextlib.AbstractContextManager[_T]] | None,
    what: str,
    logger: logging.Logger,
    *,
    passes: tuple[type[BaseException], ...] = (),
) -> Iterator[_T | None]:
    """A telemetry ``with`` scope around a block of one hook that cannot break it
    (the kit's :class:`~seamscope.adapters._kit.Held`, current for the block).

    A failure to enter or exit is logged as ``what``; the body's own exception
    is recorded on the span and re-raised unchanged; one of ``passes`` (a
    framework's pause, not a failure) ends the span as a normal exit.
    """
    if factory is None:
        yield None
        return
    held = Held(factory, what=what, failed=lambda hook: failed(hook, logger))
    with held.current(passes) as value:
        yield value
    held.stop()
