"""The symfonic recorder's span map: one run per ``agent.run``, its current
iteration, and the calls of the instrumented ``agent.run`` (state only: the
recorder in :mod:`._recorder` fills and closes them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from opentelemetry import context as otel_context

from seamscope._internal import Invocation
from seamscope.adapters.symfonic._translate import _Dispatch, _Group
from seamscope.decisions.records import CarriedStub

__all__ = ["_Call", "_Iteration", "_Run"]


@dataclasses.dataclass(eq=False)
class _Iteration:
    """One call of symfonic's react node: its spans and what its seams gathered."""

    index: int
    invocation: Invocation
    pre_done: bool = False
    model: str | None = None
    chat: Invocation | None = None
    groups: list[_Group] = dataclasses.field(default_factory=list)
    dispatches: list[_Dispatch] = dataclasses.field(default_factory=list)
    post_messages: tuple[Any, ...] | None = None
    post_role: str | None = None
    flushed: bool = False
    adopter_drops: dict[str, str] = dataclasses.field(default_factory=dict)
    dispatching: str | None = None  # the call id symfonic's dispatch chain is on
    tools: dict[str, Invocation] = dataclasses.field(default_factory=dict)
    # the offload ledger: offloads whose stub this iteration's prompt carried,
    # the model call's output tokens, and the recalls it emitted (call id ->
    # offload id)
    carried: list[CarriedStub] | None = None
    output_tokens: int = 0
    recall_output_charged: bool = False
    recalls: dict[str, str] = dataclasses.field(default_factory=dict)
    error_type: str | None = None  # what the react node failed with (ends the span with it)

    @property
    def ctx(self) -> otel_context.Context:
        """The context with the iteration's span current."""
        return self.invocation.context


@dataclasses.dataclass(eq=False)
class _Run:
    """One ``agent.run`` (one user turn): its ``invoke_agent`` span and iteration."""

    run_id: str
    invocation: Invocation | None
    ctx: otel_context.Context
    conversation_id: str | None
    iterations: int = 0
    current: _Iteration | None = None
    error_type: str | None = None


@dataclasses.dataclass(eq=False)
class _Call:
    """One call of the instrumented ``agent.run``: the runs symfonic started under it."""

    runs: list[str] = dataclasses.field(default_factory=list)
