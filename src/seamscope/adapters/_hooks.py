"""Small helpers the framework adapters' hooks share: contain seamscope's own
failures, attach an OpenTelemetry context for one block, enter a telemetry
context manager without letting it break the framework's code.

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
) -> Iterator[_T | None]:
    """Enter a telemetry context manager without letting it break the body.

    A failure to enter or exit is logged; the body's own exception is passed
    to the manager (so the span records it) and re-raised unchanged.
    """
    if factory is None:
        yield None
        return
    try:
        manager = factory()
        value = manager.__enter__()
    except Exception:
        failed(what, logger)
        yield None
        return
    try:
        yield value
    except BaseException as exc:
        try:
            manager.__exit__(type(exc), exc, exc.__traceback__)
        except BaseException as exit_exc:
            if exit_exc is not exc:
                failed(what, logger)
        raise
    else:
        try:
            manager.__exit__(None, None, None)
        except Exception:
            failed(what, logger)
