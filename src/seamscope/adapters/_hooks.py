"""Small helpers the framework adapters' hooks share: contain seamscope's own
failures, attach an OpenTelemetry context for one block, hold a telemetry
``with`` scope around a block of one hook without letting it break the
framework's code.

Every helper takes the adapter's stdlib logger, so a failure is logged under
the adapter's name (``seamscope.adapters.<framework>``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

from seamscope._internal import Invocation, telemetry_error
from seamscope._internal import attached as _attached

__all__ = ["Contained", "attached", "contained", "containing", "containing_async", "failed"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_Async = Callable[_P, Coroutine[Any, Any, _T]]
"""A coroutine function (a framework's async hook)."""


def failed(hook: str, logger: logging.Logger) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``).

    A ``seamscope.telemetry.error`` event names the hook and the error type;
    the traceback goes to ``logger`` at DEBUG. Never raises.
    """
    with contextlib.suppress(Exception):
        telemetry_error(hook, sys.exc_info()[1])
        logger.debug("seamscope: %s failed; the agent continues unchanged", hook, exc_info=True)


def attached(context: Any) -> contextlib.AbstractContextManager[None]:
    """An OpenTelemetry context made current for a block of one hook (same task):
    the telemetry's one attach helper (a failure is a ``seamscope.telemetry.error``)."""
    return _attached(context)


def containing(
    hook: str, logger: logging.Logger
) -> Callable[[Callable[_P, _T]], Callable[_P, _T | None]]:
    """A hook method of seamscope's made unable to raise: its failure is
    recorded as ``hook`` (:func:`failed`) and it returns None (the framework
    goes on as if the hook had changed nothing)."""

    def wrap(method: Callable[_P, _T]) -> Callable[_P, _T | None]:
        @functools.wraps(method)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _T | None:
            try:
                return method(*args, **kwargs)
            except Exception:
                failed(hook, logger)
                return None

        return call

    return wrap


def containing_async(
    hook: str, logger: logging.Logger
) -> Callable[[_Async[_P, _T]], _Async[_P, _T | None]]:
    """:func:`containing` for a coroutine method (a framework's async hook)."""

    def wrap(method: _Async[_P, _T]) -> _Async[_P, _T | None]:
        @functools.wraps(method)
        async def call(*args: _P.args, **kwargs: _P.kwargs) -> _T | None:
            try:
                return await method(*args, **kwargs)
            except Exception:
                failed(hook, logger)
                return None

        return call

    return wrap


@contextlib.contextmanager
def contained(
    factory: Callable[[], _T] | None,
    what: str,
    logger: logging.Logger,
    *,
    passes: tuple[type[BaseException], ...] = (),
) -> Iterator[_T | None]:
    """A span started by ``factory`` (an :class:`Invocation`, or an object
    holding one as ``.invocation``: a ``ChatCall``), current for a block of
    one hook and ended when the block ends: it cannot break the block.

    A failure to start is logged as ``what`` (the block runs without the
    span); the block's own exception is recorded on the span and re-raised
    unchanged; one of ``passes`` (a framework's pause, not a failure) ends the
    span as a normal exit.
    """
    if factory is None:
        yield None
        return
    try:
        value = factory()
        invocation = value if isinstance(value, Invocation) else value.invocation  # type: ignore[attr-defined]
    except Exception:
        failed(what, logger)
        yield None
        return
    with invocation.current(passes):
        yield value
    invocation.stop()


class Contained:
    """One adapter's containment of its own failures, bound to its logger
    (``seamscope.adapters.{name}``, whichever of its modules logs):
    :meth:`failed`, :meth:`contained` and :meth:`containing` are the module
    functions with that logger."""

    __slots__ = ("log", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.log = logging.getLogger(f"seamscope.adapters.{name}")

    def failed(self, hook: str) -> None:
        """Record a contained failure of seamscope's own code (call it in ``except``)."""
        failed(hook, self.log)

    def contained(
        self, factory: Callable[[], _T] | None, what: str
    ) -> contextlib.AbstractContextManager[_T | None]:
        """Enter a telemetry context manager without letting it break the body."""
        return contained(factory, what, self.log)

    def containing(self, hook: str) -> Callable[[Callable[_P, _T]], Callable[_P, _T | None]]:
        """A hook method made unable to raise (:func:`containing`)."""
        return containing(f"{self.name}.{hook}", self.log)

    def containing_async(
        self, hook: str
    ) -> Callable[[_Async[_P, _T]], _Async[_P, _T | None]]:
        """A coroutine hook method made unable to raise (:func:`containing_async`)."""
        return containing_async(f"{self.name}.{hook}", self.log)
