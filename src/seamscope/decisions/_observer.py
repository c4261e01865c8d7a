"""The observer protocol: how the decision core reports its work.

The core calls a ``start_*`` hook before a decision and the matching
``end_*`` hook after it, passing back whatever the start hook returned (a
handle: for telemetry, the span and its context token). The end hook gets
the finished decision record, which carries its reason, its contained
errors and its duration. :class:`NoopObserver` is the default.

Observers must not raise. The core guards any observer that does not
declare ``never_raises = True`` (see :func:`guard_observer`), so a faulty
observer costs a recorded error, never a decision.

Hook order for one iteration (``h`` = handle)::

    h0 = start_selection(ctx, offered)
        h1 = start_stage(ctx, index, stage)  ... end_stage(h1, record)   # per stage
    end_selection(h0, result)
    h2 = start_pre_model(ctx)
        on_policy_evaluated(h2, evaluation)                               # per policy
    end_pre_model(h2, result)
    h3 = start_post_model(ctx, calls)
        h4 = start_dispatch(ctx, index, call)
            on_policy_evaluated(h4, evaluation)
        end_dispatch(h4, record)                                          # per call
    end_post_model(h3, result)
    h5 = start_offload_gate(inputs, call)  ... end_offload_gate(h5, decision)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from seamscope.decisions._messages import ToolCall
    from seamscope.decisions._offload import GateCall, OffloadGateDecision, OffloadGateInputs
    from seamscope.decisions._policy import DispatchContext
    from seamscope.decisions._seams import (
        DispatchRecord,
        PolicyEvaluation,
        PostModelResult,
        PreModelResult,
    )
    from seamscope.decisions.selection import (
        SelectionContext,
        SelectionResult,
        SelectionStage,
        StageRecord,
    )

__all__ = ["DecisionObserver", "NoopObserver", "guard_observer"]


@runtime_checkable
class DecisionObserver(Protocol):
    """Hooks the decision core calls around every decision it takes."""

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> Any: ...
    def end_selection(self, handle: Any, result: SelectionResult) -> None: ...
    def start_stage(self, ctx: SelectionContext, index: int, stage: SelectionStage) -> Any: ...
    def end_stage(self, handle: Any, record: StageRecord) -> None: ...
    def start_pre_model(self, ctx: DispatchContext) -> Any: ...
    def end_pre_model(self, handle: Any, result: PreModelResult) -> None: ...
    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> Any: ...
    def end_post_model(self, handle: Any, result: PostModelResult) -> None: ...
    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> Any: ...
    def end_dispatch(self, handle: Any, record: DispatchRecord) -> None: ...
    def on_policy_evaluated(self, handle: Any, evaluation: PolicyEvaluation) -> None: ...
    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> Any: ...
    def end_offload_gate(self, handle: Any, decision: OffloadGateDecision) -> None: ...


class NoopObserver:
    """The default observer: does nothing, costs one call per hook."""

    __slots__ = ()
    never_raises = True

    def start_selection(self, ctx: Any, offered: Any) -> None:
        return None

    def end_selection(self, handle: Any, result: Any) -> None:
        return None

    def start_stage(self, ctx: Any, index: int, stage: Any) -> None:
        return None

    def end_stage(self, handle: Any, record: Any) -> None:
        return None

    def start_pre_model(self, ctx: Any) -> None:
        return None

    def end_pre_model(self, handle: Any, result: Any) -> None:
        return None

    def start_post_model(self, ctx: Any, calls: Any) -> None:
        return None

    def end_post_model(self, handle: Any, result: Any) -> None:
        return None

    def start_dispatch(self, ctx: Any, index: int, call: Any) -> None:
        return None

    def end_dispatch(self, handle: Any, record: Any) -> None:
        return None

    def on_policy_evaluated(self, handle: Any, evaluation: Any) -> None:
        return None

    def start_offload_gate(self, inputs: Any, call: Any) -> None:
        return None

    def end_offload_gate(self, handle: Any, decision: Any) -> None:
        return None


NOOP_OBSERVER = NoopObserver()

_HOOKS = tuple(name for name in vars(NoopObserver) if name.startswith(("start_", "end_", "on_")))


class _GuardedObserver:
    """Wraps an observer that may raise: a raising hook is swallowed.

    Errors are kept in :attr:`errors` (the first 100) so a test or an
    operator can see that an observer misbehaved.
    """

    never_raises = True

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.errors: list[tuple[str, BaseException]] = []
        for hook in _HOOKS:
            setattr(self, hook, self._wrap(hook, getattr(inner, hook, None)))

    def _wrap(self, hook: str, fn: Any) -> Any:
        errors = self.errors

        def call(*args: Any) -> Any:
            if fn is None:
                return None
            try:
                return fn(*args)
            except Exception as exc:
                if len(errors) < 100:
                    errors.append((hook, exc))
                return None

        return call


def guard_observer(observer: Any | None) -> Any:
    """The observer to call: the no-op default, a trusted one, or a guarded one."""
    if observer is None:
        return NOOP_OBSERVER
    if getattr(observer, "never_raises", False) is True:
        return observer
    return _GuardedObserver(observer)
