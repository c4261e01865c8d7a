"""Offloads and recalls at the model seam, for a middleware without tool hooks.

A ``SeamscopeMiddleware`` whose configuration needs no ``wrap_tool_call``
(nothing watched with tool hooks) still offloads, without changing
LangChain's graph or checks:

* each model call, before anything else, puts the tool answers it is about
  to send for the first time (the ``ToolMessage`` answers to the last
  ``AIMessage``'s calls, as the state holds them: after every middleware
  that changed them) to the offload gate, under the iteration whose calls
  they answer (:func:`gate_answers`); a fired offload's stub is sent instead
  of the output and written into the agent's state (the same
  ``ToolMessage`` id) with the model response's ``Command``. The decisions
  are kept per conversation (:class:`Decided`) until that state update is
  made, so a model call made again (its first attempt raised) sends the
  same stubs and never asks the gate twice;
* the recall tool is offered as a tool description (a dict, as a provider's
  built-in tool is: LangChain binds it and checks only the ``BaseTool`` objects it
  must run), and a recall the model emits is answered in the same model
  call: :func:`answer_recalls` adds the recall's ``ToolMessage`` after the
  ``AIMessage``, so LangChain sends the agent back to the model (every call
  answered) or to its ``tools`` node for the other calls.

A recall's ``execute_tool`` span is made here, current while the store is
read, under the iteration of the model call that emitted it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from seamscope.adapters._kit import RECALL_TOOL, Conversations
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import AIMessage, ModelResponse, ToolMessage
from seamscope.adapters.langchain._runs import Run, failed
from seamscope.decisions import ToolCall
from seamscope.loop import Iteration

__all__ = ["Decided", "answer_recalls", "gate_answers"]


class Decided:
    """Per conversation (scope), the gate's decisions on tool answers not yet
    written into the agent's state: tool call id → the stub sent (None: the
    output is sent whole); at most ``limit`` conversations (the least
    recently used dropped first)."""

    def __init__(self, limit: int) -> None:
        self._kept: Conversations[dict[str, str | None]] = Conversations(limit, dict)

    def of(self, scope: str) -> dict[str, str | None]:
        """A copy of the conversation's decisions."""
        with self._kept.existing(scope) as kept:
            return {} if kept is None else dict(kept)

    def put(self, scope: str, call_id: str, stub: str | None) -> None:
        with self._kept.of(scope) as kept:
            kept[call_id] = stub

    def written(self, scope: str, call_ids: Sequence[str]) -> None:
        """The decisions on ``call_ids`` are in the state now."""
        with self._kept.existing(scope) as kept:
            if kept is not None:
                for call_id in call_ids:
                    kept.pop(call_id, None)


def gate_answers(
    messages: Sequence[Any],
    *,
    run: Run,
    decided: Decided,
    gate: Callable[[Iteration, ToolCall, str | None], str | None],
) -> tuple[list[Any], list[ToolMessage], list[str]]:
    """The prompt with the stubs of the fired offloads in place of their
    outputs; the replaced ``ToolMessage`` objects that have an id (for the
    state); the call ids decided (written once the model call succeeds).

    Only the answers to the last ``AIMessage``'s calls are new; each is put
    to ``gate`` (a text output; the recall's answers never) once, under the
    run's open iteration (the one whose model call emitted the calls)."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None
    )
    if last is None or not messages[last].tool_calls:
        return list(messages), [], []
    calls = {raw.get("id"): raw for raw in messages[last].tool_calls if raw.get("id")}
    known = decided.of(run.scope)
    out: list[Any] = list(messages[: last + 1])
    replaced: list[ToolMessage] = []
    ids: list[str] = []
    iteration: Iteration | None = None
    for message in messages[last + 1 :]:
        raw = calls.get(getattr(message, "tool_call_id", None))
        if not isinstance(message, ToolMessage) or raw is None or raw["name"] == RECALL_TOOL:
            out.append(message)
            continue
        call_id = message.tool_call_id
        if call_id in known:
            stub = known[call_id]
        else:
            if iteration is None:
                iteration = run.current_iteration()
            stub = gate(iteration, translate.tool_call(raw), translate.offloadable_text(message))
            decided.put(run.scope, call_id, stub)
        ids.append(call_id)
        if stub is not None and message.content != stub:
            message = translate.with_content(message, stub)
            if message.id:
                replaced.append(message)
        out.append(message)
    return out, replaced, ids


def answer_recalls(
    response: ModelResponse[Any],
    message: AIMessage,
    *,
    run: Run,
    iteration: Iteration,
    outputs: Outputs,
    account: Callable[[ToolCall, str], object],
) -> ModelResponse[Any]:
    """The response with an answer after ``message`` for each recall it emits
    (the output, or why not; ``account`` charges it as the kit does any tool
    answer); ``response`` itself when it emits none."""
    answers: list[ToolMessage] = []
    for raw in message.tool_calls:
        if raw["name"] != RECALL_TOOL or not raw.get("id"):
            continue
        call = translate.tool_call(raw)
        tool = iteration.start_tool(call, parent=run.otel)
        with tool.current():
            answer = outputs.answer(run.scope, call.id, translate.recall_id(call))
        iteration.tool_result(tool, answer)
        tool.stop()
        try:
            account(call, answer)
        except Exception:
            failed("langchain.recall")
        # as the recall tool answers when it runs: its answer, never a raised error
        answers.append(ToolMessage(content=answer, tool_call_id=call.id, name=RECALL_TOOL))
    if not answers:
        return response
    result = [*response.result, *answers]
    return ModelResponse(result=result, structured_response=response.structured_response)
