"""A worker serving one Agents SDK conversation: ``python -m tests.fleet._openai_agents_worker``.

Built from the environment only, as an operator deploys a replica: the
offload store comes from ``SEAMSCOPE_OFFLOAD_STORE`` (the layer is given
none), the framework's persistence is an ``SQLiteSession`` on the file named
by ``FLEET_SESSION_DB`` (shared by every worker). The model is scripted
deterministically from its input items, so every worker's instance answers
the same input the same way:

* the last item is a ``function_call_output``: the text ``done``;
* the last user message is ``logs``: a ``fetch_logs`` call;
* ``recall``: a ``recall_tool_result`` call with the offload id read from the
  stub in its input (the input the model gets holds stubs, never the output);
* anything else: the text ``ok``.

Usage: input tokens = the input's characters // 4, output tokens 10. Call
ids come from the turn's user text and its position in the conversation.
Each model call's view of the function outputs it got is recorded (call id,
characters, hash, the text of a short one) so the test can check stubbing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.models.interface import Model
from agents.usage import InputTokensDetails
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from tests.fleet._fleet import Recorder, serve

from seamscope.adapters import DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner

LOGS_CHARS = 64_000
SESSION_DB_ENV = "FLEET_SESSION_DB"
_STUB = re.compile(r"^\[offloaded (\S+): ")
_SHORT = 1_000  # outputs shorter than this are answered in full


def logs_text() -> str:
    """What ``fetch_logs`` returns: exactly 64 000 deterministic characters."""
    lines: list[str] = []
    size, i = 0, 0
    while size < LOGS_CHARS:
        line = f"{i:06d} GET /api/items/{(i * 7919) % 10007} 200 {(i * 31) % 997}ms\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)[:LOGS_CHARS]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content or ():
        value = _field(part, "text")
        if isinstance(value, str):
            parts.append(value)
    return "".join(parts)


def _chars(item: Any) -> int:
    """The characters of one input item the usage is counted from."""
    kind = _field(item, "type")
    if kind == "function_call":
        return len(str(_field(item, "name"))) + len(str(_field(item, "arguments")))
    if kind == "function_call_output":
        output = _field(item, "output")
        return len(output if isinstance(output, str) else json.dumps(output))
    return len(_text(_field(item, "content")))


def _function_call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        call_id=call_id,
        name=name,
        arguments=json.dumps(args),
        id=f"fc_{call_id}",
        status="completed",
    )


def _message(value: str, message_id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message",
        id=message_id,
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=value, annotations=[])],
    )


class InputScriptedModel(Model):
    """Answers from its input items alone (see the module docstring); logs what it saw."""

    def __init__(self) -> None:
        self.model = "claude-opus-4-6"
        self.seen: list[dict[str, Any]] = []

    def _answer(self, instructions: str | None, input: Any, tools: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        users = [
            (i, _text(_field(item, "content")))
            for i, item in enumerate(items)
            if _field(item, "role") == "user"
        ]
        position, said = users[-1] if users else (-1, "")
        outputs: list[dict[str, Any]] = []
        stubs: list[str] = []
        for item in items:
            if _field(item, "type") != "function_call_output":
                continue
            output = _field(item, "output")
            text = output if isinstance(output, str) else json.dumps(output)
            found = _STUB.match(text)
            if found is not None:
                stubs.append(found.group(1))
            outputs.append(
                {
                    "call_id": _field(item, "call_id"),
                    "chars": len(text),
                    "sha256": digest(text),
                    "text": text if len(text) < _SHORT else None,
                }
            )
        self.seen.append(
            {
                "user": said,
                "tools": [t.name for t in tools],
                "outputs": outputs,
            }
        )
        call_id = f"call_{position}_{said}"
        last = items[-1] if items else None
        if last is not None and _field(last, "type") == "function_call_output":
            output: list[Any] = [_message("done", f"msg_{len(items)}")]
        elif said == "logs":
            output = [_function_call("fetch_logs", {}, call_id)]
        elif said == "recall":
            if not stubs:
                raise AssertionError("a recall turn whose input holds no stub")
            output = [_function_call("recall_tool_result", {"offload_id": stubs[-1]}, call_id)]
        else:
            output = [_message("ok", f"msg_{len(items)}")]
        chars = len(instructions or "") + sum(_chars(item) for item in items)
        usage = Usage(
            requests=1,
            input_tokens=chars // 4,
            output_tokens=10,
            total_tokens=chars // 4 + 10,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        )
        return ModelResponse(output=output, usage=usage, response_id=None)

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **_: Any,
    ) -> ModelResponse:
        return self._answer(system_instructions, input, tools)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the fleet runs are not streamed")


@function_tool
def fetch_logs() -> str:
    """Fetch the service's logs."""
    return logs_text()


def main() -> None:
    os.environ.pop("OPENAI_API_KEY", None)
    set_tracing_disabled(True)
    session_db = os.environ[SESSION_DB_ENV]
    recorder = Recorder(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
    layer = DecisionLayer(default_model="claude-opus-4-6", observer=recorder, agent_name="analyst")
    runner = SeamscopeRunner(layer)
    model = InputScriptedModel()
    agent: Agent[Any] = Agent(
        name="analyst",
        instructions="You analyse the service's logs.",
        model=model,
        tools=[fetch_logs, runner.recall_tool],
    )

    def turn(conversation: str, text: str) -> dict[str, Any]:
        model.seen.clear()
        session = SQLiteSession(conversation, session_db)
        try:
            result = asyncio.run(runner.run(agent, text, session=session))
        finally:
            session.close()
        names = {
            _field(item.raw_item, "call_id"): _field(item.raw_item, "name")
            for item in result.new_items
            if isinstance(item, ToolCallItem)
        }
        outputs = []
        for item in result.new_items:
            if isinstance(item, ToolCallOutputItem):
                call_id = _field(item.raw_item, "call_id")
                answer = _field(item.raw_item, "output")
                answer = answer if isinstance(answer, str) else json.dumps(answer)
                outputs.append(
                    {
                        "name": names.get(call_id),
                        "call_id": call_id,
                        "chars": len(answer),
                        "sha256": digest(answer),
                    }
                )
        return {
            "final": result.final_output,
            "tool_outputs": outputs,
            "model_calls": list(model.seen),
            "pid": os.getpid(),
            **recorder.drain(),
        }

    def end(conversation: str) -> dict[str, Any]:
        layer.end_conversation(conversation)
        return {"pid": os.getpid(), **recorder.drain()}

    def drain() -> dict[str, Any]:
        return recorder.drain()

    serve({"turn": turn, "end": end, "drain": drain})


if __name__ == "__main__":
    main()
