"""Construction checks shared by the decision core's constructors.

Every check raises :class:`ValueError` (wrong types included: that is the
core's one convention) with a message that names the class and the field,
``ToolCallPolicy.name must be a non-empty str, got ''``. A value is shown
by its repr when it is a short scalar, else by its type name, so a message
never carries a large or sensitive value.

The primitives (``fail``, ``show``, ``nonempty_str``, ``flag``, ``tokens``,
``real``) live in :mod:`seamscope.decisions.records`, which must import
nothing of seamscope and checks its own records with them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal

from seamscope.decisions.records._values import _fail as fail
from seamscope.decisions.records._values import _flag as flag
from seamscope.decisions.records._values import _nonempty_str as nonempty_str
from seamscope.decisions.records._values import _real as real
from seamscope.decisions.records._values import _show as show
from seamscope.decisions.records._values import _tokens as tokens

__all__ = [
    "boolean",
    "fail",
    "flag",
    "interface",
    "mapping",
    "maybe_callable",
    "money",
    "names",
    "nonempty_str",
    "optional_str",
    "real",
    "show",
    "tokens",
]


def maybe_callable(
    owner: str, field: str, value: object, *, required: bool = False, note: str = ""
) -> None:
    """A synchronous callable (or None unless ``required``).

    An ``async def`` is refused: its call returns a coroutine, which is
    truthy, so a predicate would always pass and a resolver would never run.
    """
    if value is None and not required:
        return
    expected = "a synchronous callable" + ("" if required else " or None")
    if not callable(value):
        raise fail(owner, field, expected, value, note)
    if inspect.iscoroutinefunction(value):
        raise fail(owner, field, expected, value, "; ".join(filter(None, ["an async def", note])))


def money(owner: str, field: str, value: object) -> None:
    """A USD amount: an int, float or Decimal that is finite and >= 0.

    NaN compares false with everything (a budget rule would turn itself
    off) and Decimal NaN raises on comparison, so both are refused, as are
    infinities; the check itself never raises anything but ValueError.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise fail(owner, field, "a finite number >= 0 (USD)", value)
    finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
    if not finite or value < 0:
        raise fail(owner, field, "a finite number >= 0 (USD)", value)


def names(owner: str, field: str, value: object) -> tuple[str, ...]:
    """An iterable of str, as a tuple. A str is refused: it would read as
    one name per character."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise fail(owner, field, "an iterable of str (not a str)", value)
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise fail(owner, field, "an iterable of str", value, f"an item is {show(item)}")
    return items


def mapping(owner: str, field: str, value: object, *, optional: bool = True) -> None:
    """A Mapping (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, Mapping):
        raise fail(owner, field, "a mapping" + (" or None" if optional else ""), value)


def interface(
    owner: str,
    field: str,
    value: object,
    methods: tuple[str, ...],
    expected: str,
    *,
    error: type[Exception] = ValueError,
) -> None:
    """None, or an object on which every one of ``methods`` is callable
    (duck-typed, so the core imports nothing of OpenTelemetry); ``error``:
    the exception raised (the telemetry side raises TypeError for a wrong
    type), its message as :func:`fail` words it."""
    if value is None:
        return
    if not all(callable(getattr(value, method, None)) for method in methods):
        raise error(str(fail(owner, field, expected + " or None", value)))


def optional_str(
    owner: str, field: str, value: object, *, error: type[Exception] = ValueError
) -> None:
    """None, or a str with a non-blank character."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise error(str(fail(owner, field, "a non-empty str or None", value)))


def boolean(owner: str, field: str, value: object, *, error: type[Exception] = ValueError) -> None:
    """A bool (``"no"`` is truthy: refused rather than read as True); :func:`flag`
    raising ``error``."""
    try:
        flag(owner, field, value)
    except ValueError as exc:
        raise error(str(exc)) from None
