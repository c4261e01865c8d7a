"""Offloads and recalls at the model seam, for a middleware without tool hooks.

A ``SeamscopeMiddleware`` whose configuration needs no ``wrap_tool_call``
(nothing watched with tool hooks) still offloads, without changing
LangChain's graph or checks:

* the offload gate decides when the tool's run ends (LangChain's tool
  callbacks, :mod:`._tool_runs`), as in every adapter; a fired offload's
  stub waits in :class:`PendingStubs` until the next model call of the
  conversation, which sends the stub instead of the output and writes it
  into the agent's state (the tool's ``ToolMessage``, same id) with the
  model response's ``Command``;
* the recall tool is offered as a tool description (a dict, as a provider's
  built-in tool is: LangChain binds it and checks only the ``BaseTool``\\ s it
  must run), and a recall the model emits is answered in the same model
  call: :func:`answer_recalls` adds the recall's ``ToolMessage`` after the
  ``AIMessage``, so LangChain sends the agent back to the model (every call
  answered) or to its ``tools`` node for the other calls.

A recall's ``execute_tool`` span is made here, current while the store is
read, under the iteration of the model call that emitted it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from seamscope.adapters._kit import RECALL_TOOL, ToolSpan, account_tool_output
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import AIMessage, ModelResponse, ToolMessage
from seamscope.adapters.langchain._runs import Run, failed
from seamscope.decisions import ToolCall
from seamscope.loop import Iteration

__all__ = ["PendingStubs", "answer_recalls", "recall_spec"]


class PendingStubs:
    """Per conversation (scope), the stubs of fired offloads not yet written
    into the agent's state: tool call id → stub; at most ``limit``
    conversations (the least recently used dropped first: their outputs then
    stay whole in the state, and nothing is lost)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, scope: str, call_id: str, stub: str) -> None:
        with self._lock:
            kept = self._kept.get(scope)
            if kept is None:
                kept = self._kept[scope] = {}
                while len(self._kept) > self._limit:
                    self._kept.popitem(last=False)
            else:
                self._kept.move_to_end(scope)
            kept[call_id] = stub

    def apply(self, scope: str, messages: Sequence[Any]) -> tuple[list[Any], list[ToolMessage]]:
        """``messages`` with the pending stubs in place of their outputs, and
        the replaced ``ToolMessage``\\ s that have an id (for the state)."""
        with self._lock:
            kept = dict(self._kept.get(scope) or {})
        if not kept:
            return list(messages), []
        out: list[Any] = []
        replaced: list[ToolMessage] = []
        for message in messages:
            stub = kept.get(message.tool_call_id) if isinstance(message, ToolMessage) else None
            if stub is not None and message.content != stub:
                message = translate.with_content(message, stub)
                if message.id:
                    replaced.append(message)
            out.append(message)
        return out, replaced

    def written(self, scope: str, call_ids: Sequence[str]) -> None:
        """The stubs of ``call_ids`` are in the state now."""
        with self._lock:
            kept = self._kept.get(scope)
            if kept is None:
                return
            for call_id in call_ids:
                kept.pop(call_id, None)
            if not kept:
                del self._kept[scope]


def recall_spec(description: str) -> dict[str, Any]:
    """The recall tool as a model binds it (OpenAI's function-tool form)."""
    return {
        "type": "function",
        "function": {
            "name": RECALL_TOOL,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"offload_id": {"type": "string"}},
                "required": ["offload_id"],
            },
        },
    }


def answer_recalls(
    response: ModelResponse[Any],
    message: AIMessage,
    *,
    run: Run,
    iteration: Iteration,
    outputs: Outputs,
) -> ModelResponse[Any]:
    """The response with an answer after ``message`` for each recall it emits
    (the output, or why not); ``response`` itself when it emits none."""
    answers: list[ToolMessage] = []
    for raw in message.tool_calls:
        if raw["name"] != RECALL_TOOL or not raw.get("id"):
            continue
        call = translate.tool_call(raw)
        span = ToolSpan(
            iteration, call, parent=run.otel, what="langchain.execute_tool_span", failed=failed
        )
        with span.current():
            answer = outputs.answer(run.scope, call.id, translate.recall_id(call))
        span.stop(answer)
        _account(iteration, call, answer, run=run, outputs=outputs)
        # as the recall tool answers when it runs: its answer, never a raised error
        answers.append(ToolMessage(content=answer, tool_call_id=call.id, name=RECALL_TOOL))
    if not answers:
        return response
    result = [*response.result, *answers]
    return ModelResponse(result=result, structured_response=response.structured_response)


def _account(
    iteration: Iteration, call: ToolCall, answer: str, *, run: Run, outputs: Outputs
) -> None:
    try:
        account_tool_output(
            iteration,
            call,
            answer,
            outputs=outputs,
            scope=run.scope,
            usage=run.usage,
            context=run.otel,
            offload=False,
        )
    except Exception:
        failed("langchain.recall")
