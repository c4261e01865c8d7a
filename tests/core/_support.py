"""Small test doubles for adopter code (predicates, resolvers, stages).

They stand in for the adopter's callables around the component under test,
never for the component itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seamscope.decisions import DispatchContext, Message, ToolCall
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import Seam, StageOutcome
from seamscope.decisions.selection import SelectionContext

USER = Message("user", "show me last month's sales by brand")


class Predicate:
    """A match/guard that answers ``result`` (or raises ``error``) and counts calls."""

    def __init__(self, result: bool = True, error: BaseException | None = None) -> None:
        self.result = result
        self.error = error
        self.seen: list[DispatchContext] = []

    def __call__(self, ctx: DispatchContext) -> bool:
        self.seen.append(ctx)
        if self.error is not None:
            raise self.error
        return self.result

    @property
    def calls(self) -> int:
        return len(self.seen)


def raising(error: BaseException) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        raise error

    return fn


def emitted(*calls: ToolCall) -> Message:
    return Message("assistant", "", tool_calls=calls)


def pre_ctx(
    messages: tuple[Any, ...] = (USER,), resolved: tuple[str, ...] = ("run_block", "fetch_data")
) -> DispatchContext:
    return build_dispatch_context(Seam.PRE_MODEL, messages, resolved_tool_names=resolved)


def post_ctx(
    calls: tuple[ToolCall, ...],
    messages: tuple[Any, ...] = (USER,),
    resolved: tuple[str, ...] = ("run_block", "fetch_data"),
) -> DispatchContext:
    return build_dispatch_context(
        Seam.POST_MODEL,
        messages,
        resolved_tool_names=resolved,
        emitted_message=emitted(*calls),
    )


class ScriptedStage:
    """A selection stage with a scripted answer.

    ``outcome`` is a fixed StageOutcome (or any value, returned as is), or a
    function of the tools it receives whose result it selects with the
    reason ``"<name> narrowed"``; ``error`` makes it raise instead.
    """

    def __init__(
        self,
        name: str,
        outcome: Any = None,
        *,
        protects_forced: bool = True,
        error: BaseException | None = None,
    ) -> None:
        self.name = name
        self.protects_forced = protects_forced
        self._outcome = outcome
        self._error = error
        self.seen: list[tuple[tuple[Any, ...], SelectionContext]] = []

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        self.seen.append((tools, ctx))
        if self._error is not None:
            raise self._error
        if callable(self._outcome):
            return StageOutcome.select(self._outcome(tools), f"{self.name} narrowed")
        return self._outcome  # type: ignore[no-any-return]
