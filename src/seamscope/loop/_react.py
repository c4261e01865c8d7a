"""A reference ReAct loop built on the framework-free API.

It works with any chat callable ``chat(ChatRequest) -> ChatResponse`` and
plain tool functions ``tool(args) -> str``. Each iteration: select tools,
PRE seam, model call, POST seam, execute the dispatched calls, and ask the
offload gate about each tool output. A fired offload replaces the output in
the conversation with a short stub; the model can bring it back with the
built-in ``recall_tool_result`` tool (offered only while the layer's offload
store holds outputs of the conversation), and that recall is a real cost in
the ledger.

``seamscope demo`` runs this loop with a scripted chat model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context

from seamscope.decisions import (
    Message,
    ModelConfig,
    ModelUsage,
    OffloadGateDecision,
    OffloadStore,
    SelectionResult,
    ToolCall,
)
from seamscope.decisions.records import DispatchRecord, RecallStatus, WinnerSource
from seamscope.loop._layer import DecisionLayer
from seamscope.loop._stub import RECALL_TOOL, offload_stub
from seamscope.loop._tokens import estimate_tokens
from seamscope.stores import MemoryStore

__all__ = [
    "RECALL_TOOL",
    "ChatRequest",
    "ChatResponse",
    "IterationRecord",
    "ReActAgent",
    "TurnResult",
    "offload_stub",
]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What the loop asks the chat model: the chosen model, the history, the tools."""

    model: ModelConfig
    messages: tuple[Any, ...]
    tools: tuple[Any, ...]
    tool_choice: str | None
    iteration: int
    conversation_id: str | None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The model's answer: an assistant Message (maybe with tool calls) and usage."""

    message: Message
    usage: ModelUsage | None = None
    response_model: str | None = None


ChatFn = Callable[[ChatRequest], ChatResponse]
ToolFn = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """What one iteration decided and did."""

    index: int
    model: str
    model_source: WinnerSource
    model_policy: str | None
    selection: SelectionResult
    dispatches: tuple[DispatchRecord, ...]
    executed: tuple[str, ...]
    gate_decisions: tuple[OffloadGateDecision, ...]
    usage: ModelUsage | None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The turn's final answer, the history after it, and its iterations."""

    answer: str
    messages: tuple[Any, ...]
    iterations: tuple[IterationRecord, ...]


class ReActAgent:
    """A small, complete ReAct loop on top of a :class:`DecisionLayer`."""

    def __init__(
        self,
        layer: DecisionLayer,
        chat: ChatFn,
        tools: Mapping[str, ToolFn],
        *,
        max_iterations: int = 8,
        offload: bool = True,
        max_stored_outputs: int | None = None,
    ) -> None:
        if not isinstance(layer, DecisionLayer):
            raise ValueError("ReActAgent.layer must be a DecisionLayer")
        if not callable(chat):
            raise ValueError("ReActAgent.chat must be callable")
        if not isinstance(tools, Mapping):
            raise ValueError(
                "ReActAgent.tools must be a mapping of name to callable, "
                f"got {type(tools).__name__}"
            )
        if not isinstance(offload, bool):
            raise ValueError(f"ReActAgent.offload must be a bool, got {offload!r}")
        for name, fn in tools.items():
            if not callable(fn):
                raise ValueError(f"ReActAgent.tools[{name!r}] must be callable")
        if RECALL_TOOL in tools:
            raise ValueError(f"ReActAgent.tools: {RECALL_TOOL!r} is reserved")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or (max_iterations < 1)
        ):
            raise ValueError("ReActAgent.max_iterations must be an int >= 1")
        if max_stored_outputs is not None and (
            isinstance(max_stored_outputs, bool)
            or not isinstance(max_stored_outputs, int)
            or max_stored_outputs < 1
        ):
            raise ValueError(
                f"ReActAgent.max_stored_outputs must be an int >= 1, got {max_stored_outputs!r}"
            )
        self.layer = layer
        self._chat = chat
        self._tools = dict(tools)
        self._max_iterations = max_iterations
        self._offload = offload
        # the offloaded outputs live in the layer's offload store (the layer keeps
        # a fired offload's output there); an agent built with its own bound gets
        # an in-memory store of that size when the layer's is the in-memory default
        self._store: OffloadStore = layer.offload_store
        if max_stored_outputs is not None and isinstance(self._store, MemoryStore):
            self._store = MemoryStore(max_items=max_stored_outputs)
        self._expanded: set[str] = set()  # recalled: the full output is back in the prompt
        self._lock = threading.Lock()

    def _stored_ids(self, conversation_id: str) -> list[str]:
        try:
            return [o.offload_id for o in self._store.offloads(conversation_id)]
        except Exception:
            return []  # the store is down: nothing offered to recall, nothing carried

    def _carried(self, conversation_id: str | None) -> tuple[str, ...] | None:
        """This conversation's offloads whose stub, not the output, is in the prompt."""
        if not conversation_id:
            return None
        stored = self._stored_ids(conversation_id)
        with self._lock:
            return tuple(o for o in stored if o not in self._expanded)

    def stored_output(self, offload_id: str, conversation_id: str = "") -> str | None:
        """The full output of one of the conversation's offloads, while the
        offload store holds it."""
        try:
            found = self._store.recall(conversation_id, offload_id)
        except Exception:
            return None
        return found.content if found.status is RecallStatus.FOUND else None

    def _offered(self, conversation_id: str | None) -> list[str]:
        """The loop's tools, plus the recall tool while this conversation has a
        stored output. Read from the loop's own store, never from the ledger or
        telemetry, so the decision is the same whatever they hold."""
        offered = list(self._tools)
        if self._offload and conversation_id and self._stored_ids(conversation_id):
            offered.append(RECALL_TOOL)
        return offered

    def run_turn(
        self,
        conversation_id: str | None,
        user_text: str,
        *,
        messages: list[Any] | None = None,
        role: str | None = None,
        state: Mapping[str, Any] | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """Run one user turn to a final answer (or ``max_iterations``)."""
        history: list[Any] = [] if messages is None else messages
        history.append(Message("user", user_text))
        records: list[IterationRecord] = []
        answer = ""
        layer = self.layer
        with layer.turn(conversation_id, history, role=role, state=state, scope=scope) as turn:
            for _ in range(self._max_iterations):
                with turn.iteration() as it:
                    selection = it.select_tools(self._offered(conversation_id))
                    pre = it.pre_model()
                    with it.chat(pre.model.model_name) as call:
                        response = self._chat(
                            ChatRequest(
                                model=pre.model,
                                messages=tuple(history),
                                tools=selection.tools,
                                tool_choice=selection.forced_tool,
                                iteration=it.index,
                                conversation_id=conversation_id,
                            )
                        )
                        if response.usage is not None:
                            call.report(
                                response.usage,
                                response_model=response.response_model,
                                carried=self._carried(conversation_id),
                            )
                    emitted = response.message
                    history.append(emitted)
                    dispatches: tuple[DispatchRecord, ...] = ()
                    executed: tuple[str, ...] = ()
                    decisions: list[OffloadGateDecision] = []
                    if emitted.tool_calls:
                        post = it.post_model(emitted)
                        # the history holds what really dispatches (ids unchanged)
                        history[-1] = Message("assistant", emitted.content, post.calls)
                        for tool_call in post.calls:
                            content, decision = self._execute(it, tool_call, response.usage)
                            if decision is not None:
                                decisions.append(decision)
                            history.append(
                                Message(
                                    "tool", content, name=tool_call.name, tool_call_id=tool_call.id
                                )
                            )
                        dispatches = post.records
                        executed = tuple(tc.name for tc in post.calls)
                    else:
                        answer = emitted.content
                    records.append(
                        IterationRecord(
                            it.index,
                            pre.model.model_name,
                            pre.source,
                            pre.policy,
                            selection,
                            dispatches,
                            executed,
                            tuple(decisions),
                            response.usage,
                        )
                    )
                if not emitted.tool_calls:
                    break
        return TurnResult(answer, tuple(history), tuple(records))

    def _execute(
        self, it: Any, call: ToolCall, usage: ModelUsage | None
    ) -> tuple[str, OffloadGateDecision | None]:
        with it.start_tool(call, parent=otel_context.get_current()) as run:
            if call.name == RECALL_TOOL:
                offload_id = str(call.args.get("offload_id", ""))
                stored = self.stored_output(offload_id, it.turn.conversation_id or "")
                if stored is None:
                    run.fail("UnknownOffload")
                    return f"error: no offloaded output {offload_id!r}", None
                with self._lock:
                    self._expanded.add(offload_id)
                it.recall(
                    offload_id,
                    input_tokens=estimate_tokens(stored),
                    output_tokens=0 if usage is None else usage.output_tokens,
                )
                return stored, None
            fn = self._tools.get(call.name)
            if fn is None:
                run.fail("UnknownTool")
                return f"error: unknown tool {call.name!r}", None
            try:
                output = str(fn(dict(call.args)))
            except Exception as exc:
                run.fail(exc)
                return f"error: {type(exc).__name__}", None
            it.tool_result(run, output)
        if not self._offload:
            return output, None
        it.turn.store = self._store  # the layer keeps the fired output there
        decision = it.offload(call, output)
        if not decision.fire or decision.offload_id is None:
            return output, decision
        return offload_stub(decision, call.name), decision
