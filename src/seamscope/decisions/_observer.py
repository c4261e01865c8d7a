"""The observer protocol: how the decision core reports its work.

The core calls a ``start_*`` hook before a decision and the matching
``end_*`` hook after it, passing back whatever the start hook returned: a
handle, opaque to the core (for telemetry, the decision's span with its
context token and start clock). The end hook gets the finished decision
record, which carries its reason, its policy evaluations, its contained
errors and its duration. :class:`NoopObserver` is the default.

Two hooks return something to the caller, so nothing travels on
module-level state:

* :meth:`DecisionObserver.end_offload_gate` returns a *link* to the gate
  decision (opaque; for telemetry, the gate span's context). The loop hands
  it to the ledger with the fired offload, and the settlement record
  carries it back, so a settlement links to its own gate decision;
* :meth:`DecisionObserver.iteration` returns a context manager around one
  ReAct iteration; the loop's own exceptions cross it unchanged.

Observers must not raise. The core guards any observer that does not
declare ``never_raises = True`` (see :func:`guard_observer`), so a faulty
observer costs a recorded error, never a decision.

Hook order for one iteration (``h`` = handle)::

    with observer.iteration(index, ...):
        h0 = start_selection(ctx, offered)
            h1 = start_stage(ctx, index, stage)  ... end_stage(h1, record)   # per stage
        end_selection(h0, result)
        h2 = start_pre_model(ctx)  ... end_pre_model(h2, result)
        h3 = start_post_model(ctx, calls)
            h4 = start_dispatch(ctx, index, call) ... end_dispatch(h4, record)  # per call
        end_post_model(h3, result)
        h5 = start_offload_gate(inputs, call)
        link = end_offload_gate(h5, decision)
    on_middleware_decision(decision)   # a framework middleware's decision (returns a link)
    on_offload_accounted(entry)        # the ledger's realized savings and costs
    on_offload_settled(settlement)     # one offload's realized net saving
    on_shadow_settled(settlement)      # optional: a shadow config's counterfactual
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from seamscope.decisions.records import (
    DispatchRecord,
    GateCall,
    LedgerEntry,
    MiddlewareDecision,
    OffloadGateDecision,
    OffloadGateInputs,
    PostModelResult,
    PreModelResult,
    SelectionResult,
    Settlement,
    ShadowSettlement,
    StageRecord,
    ToolCall,
)
from seamscope.decisions.records._values import _fail as fail

if TYPE_CHECKING:  # contexts only: the records above are the contract's values
    from seamscope.decisions._policy import DispatchContext
    from seamscope.decisions.selection._types import SelectionContext, SelectionStage

__all__ = ["NOOP_OBSERVER", "DecisionObserver", "NoopObserver", "check_observer", "guard_observer"]

_log = logging.getLogger("seamscope.decisions")


@runtime_checkable
class DecisionObserver(Protocol):
    """Hooks the decision core (and the loop adapters) call around every decision.

    ``capture_content``: whether the observer records content (messages,
    tool arguments and results) when :meth:`capture` is called; an adapter
    may skip building content it would not record.
    """

    @property
    def capture_content(self) -> bool: ...

    def iteration(
        self, index: int, *, conversation_id: str | None, agent_name: str | None
    ) -> contextlib.AbstractContextManager[object]: ...

    def capture(self, target: object, key: str, value: object) -> None:
        """Record content ``value`` under ``key`` on ``target`` (a span or a
        handle the observer gave), only if content capture is on."""

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> object: ...
    def end_selection(self, handle: object, result: SelectionResult) -> None: ...
    def start_stage(self, ctx: SelectionContext, index: int, stage: SelectionStage) -> object: ...
    def end_stage(self, handle: object, record: StageRecord) -> None: ...
    def start_pre_model(self, ctx: DispatchContext) -> object: ...
    def end_pre_model(self, handle: object, result: PreModelResult) -> None: ...
    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> object: ...
    def end_post_model(self, handle: object, result: PostModelResult) -> None: ...
    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> object: ...
    def end_dispatch(self, handle: object, record: DispatchRecord) -> None: ...
    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> object: ...
    def end_offload_gate(self, handle: object, decision: OffloadGateDecision) -> object:
        """Record the decision; return a link to it (None: nothing to link)."""

    def on_middleware_decision(self, decision: MiddlewareDecision) -> object:
        """A decision a framework's own middleware took (an adapter read it from
        the middleware's effect); return a link to it (None: nothing to link)."""

    def on_offload_accounted(self, entry: LedgerEntry) -> None:
        """The ledger's realized savings and costs of one event (a model call, a recall)."""

    def on_offload_settled(self, settlement: Settlement) -> None:
        """One offload settled: its realized net saving against the prediction."""


class NoopObserver:
    """The default observer: does nothing, costs one call per hook."""

    __slots__ = ()
    never_raises = True
    capture_content = False

    def iteration(
        self, index: int, *, conversation_id: str | None, agent_name: str | None
    ) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()

    def capture(self, target: object, key: str, value: object) -> None:
        return None

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> object:
        return None

    def end_selection(self, handle: object, result: SelectionResult) -> None:
        return None

    def start_stage(self, ctx: SelectionContext, index: int, stage: SelectionStage) -> object:
        return None

    def end_stage(self, handle: object, record: StageRecord) -> None:
        return None

    def start_pre_model(self, ctx: DispatchContext) -> object:
        return None

    def end_pre_model(self, handle: object, result: PreModelResult) -> None:
        return None

    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> object:
        return None

    def end_post_model(self, handle: object, result: PostModelResult) -> None:
        return None

    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> object:
        return None

    def end_dispatch(self, handle: object, record: DispatchRecord) -> None:
        return None

    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> object:
        return None

    def end_offload_gate(self, handle: object, decision: OffloadGateDecision) -> object:
        return None

    def on_middleware_decision(self, decision: MiddlewareDecision) -> object:
        return None

    def on_offload_accounted(self, entry: LedgerEntry) -> None:
        return None

    def on_offload_settled(self, settlement: Settlement) -> None:
        return None

    def on_shadow_settled(self, settlement: ShadowSettlement) -> None:
        """An optional extension of the protocol (an observer without it is
        never called with it): a conversation settled, and this is what the
        shadow configuration of the gate would have realized on its course."""
        return None

    def on_store_failed(self, operation: str, error_type: str) -> None:
        """An optional extension of the protocol: the offload store did not
        answer ``operation`` (``put``, ``recall``, ``offloads``, ``lookup``,
        ``add``, ``claim``, ``due``); ``error_type`` is what it raised. The
        loop went on (a put that failed made no offload)."""
        return None


NOOP_OBSERVER = NoopObserver()

_HOOKS = tuple(
    name
    for name in vars(NoopObserver)
    if name.startswith(("start_", "end_", "on_")) or name == "capture"
)


def check_observer(owner: str, value: object) -> None:
    """None, or an object with at least one observer hook (a partial
    observer is fine: a hook it lacks is a no-op); ValueError naming
    ``owner.observer`` otherwise."""
    if value is None or getattr(value, "never_raises", False) is True:
        return
    hooks = (*_HOOKS, "iteration")
    if not any(callable(getattr(value, hook, None)) for hook in hooks):
        raise fail(
            owner, "observer", "a DecisionObserver (an object with its hooks) or None", value
        )


class _GuardedIteration(contextlib.AbstractContextManager[object]):
    """An observer's iteration scope whose own failures are contained.

    The loop's exception is passed to the inner scope and then always
    propagates unchanged (a scope cannot swallow it).
    """

    def __init__(self, guard: _GuardedObserver, make: Callable[[], object]) -> None:
        self._guard = guard
        self._make = make
        self._inner: contextlib.AbstractContextManager[object] | None = None

    def __enter__(self) -> object:
        try:
            inner = self._make()
            if not isinstance(inner, contextlib.AbstractContextManager):
                raise TypeError(f"iteration() returned {type(inner).__name__}")
            value = inner.__enter__()
            self._inner = inner
            return value
        except Exception as exc:
            self._guard.record("iteration", exc)
            return None

    def __exit__(self, *exc_info: object) -> None:
        if self._inner is None:
            return
        try:
            self._inner.__exit__(*exc_info)  # type: ignore[arg-type]
        except Exception as exc:
            if exc is not exc_info[1]:
                self._guard.record("iteration", exc)


class _GuardedObserver:
    """Wraps an observer that may raise: a raising hook is contained.

    Each error is logged (``seamscope.decisions``, WARNING, the first 100)
    and kept in :attr:`errors` (the first 100), so a test or an operator
    can see that an observer misbehaved. A hook the observer lacks is a
    no-op.
    """

    never_raises = True

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.errors: list[tuple[str, BaseException]] = []
        for hook in _HOOKS:
            setattr(self, hook, self._wrap(hook, getattr(inner, hook, None)))

    @property
    def capture_content(self) -> bool:
        try:
            return bool(getattr(self._inner, "capture_content", False))
        except Exception as exc:
            self.record("capture_content", exc)
            return False

    def iteration(
        self, index: int, *, conversation_id: str | None, agent_name: str | None
    ) -> contextlib.AbstractContextManager[object]:
        fn = getattr(self._inner, "iteration", None)
        if fn is None:
            return contextlib.nullcontext()
        return _GuardedIteration(
            self,
            lambda: fn(index, conversation_id=conversation_id, agent_name=agent_name),
        )

    def record(self, hook: str, exc: BaseException) -> None:
        if len(self.errors) < 100:
            self.errors.append((hook, exc))
            _log.warning(
                "observer %s.%s raised %s; contained",
                type(self._inner).__qualname__,
                hook,
                type(exc).__qualname__,
            )

    def _wrap(self, hook: str, fn: Callable[..., object] | None) -> Callable[..., object]:
        def call(*args: object) -> object:
            if fn is None:
                return None
            try:
                return fn(*args)
            except Exception as exc:
                self.record(hook, exc)
                return None

        return call


def guard_observer(observer: object | None) -> DecisionObserver:
    """The observer to call: the no-op default, a trusted one, or a guarded one."""
    if observer is None:
        return NOOP_OBSERVER
    if getattr(observer, "never_raises", False) is True:
        return observer  # type: ignore[return-value]
    return _GuardedObserver(observer)  # type: ignore[return-value]
