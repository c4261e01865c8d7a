"""A pydantic-ai worker of the fleet: ``python -m tests.fleet._pydantic_ai_worker``.

Built from the environment only, as an operator deploys it: the offload store
is the one ``SEAMSCOPE_OFFLOAD_STORE`` names (no ``offload_store`` argument),
and the framework's persistence is the message history the application saves
after each turn and reloads before the next, in the SQLite file named by
``FLEET_HISTORY_DB`` (a table conversation -> ``all_messages_json()``).

The model is a ``FunctionModel`` scripted deterministically from the messages
it receives (so any worker answers a turn as any other would): the last user
prompt ``logs`` -> a ``fetch_logs`` call; the last request a tool return ->
``done`` (a retry prompt -> ``retried``); ``recall`` -> a
``recall_tool_result`` call for the offload id the stub in the history names;
else ``ok``. Usage: input tokens = the messages' characters // 4, output 10.
Tool call ids are unique per turn (the turn's number is the count of user
prompts).

Handlers: ``turn(conversation, text)`` answers the turn's tool returns and
retry prompts (name, length, sha256, the text when short), per model request
whether the history held a stub and whether the recall tool was offered, and
the recorder's drain; ``end(conversation)`` ends the conversation in the
layer and answers the drain; ``drain()``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from tests.fleet._fleet import Recorder, serve

from seamscope.adapters import DecisionLayer
from seamscope.adapters.pydantic_ai import SeamscopeCapability

HISTORY_ENV = "FLEET_HISTORY_DB"
LOGS_CHARS = 64_000
RECALL_TOOL = "recall_tool_result"  # the adapter's tool, named here as the model sees it
_STUB = re.compile(r"\[offloaded (\S+): ")


def logs_text() -> str:
    """What ``fetch_logs`` returns: exactly 64,000 deterministic characters."""
    lines = (
        f"{i:06d} GET /api/v1/orders/{i * 7919 % 100_003} 200 {i % 97}ms\n" for i in range(4000)
    )
    text = "".join(lines)[:LOGS_CHARS]
    assert len(text) == LOGS_CHARS
    return text


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- the model: deterministic from the messages ----------------------------------------


def _chars(messages: list[ModelMessage]) -> int:
    total = 0
    for message in messages:
        if isinstance(message, ModelRequest):
            total += len(message.instructions or "")
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    total += len(str(part.content))
                elif isinstance(part, ToolReturnPart):
                    total += len(part.model_response_str())
                elif isinstance(part, RetryPromptPart):
                    total += len(part.model_response())
        else:
            for part in message.parts:
                if isinstance(part, TextPart):
                    total += len(part.content)
                elif isinstance(part, ToolCallPart):
                    total += len(part.tool_name) + len(part.args_as_json_str())
    return total


def _stub_ids(messages: list[ModelMessage]) -> list[str]:
    return [
        found.group(1)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
        and isinstance(part.content, str)
        and (found := _STUB.match(part.content)) is not None
    ]


def _user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


class Script:
    """The scripted model; logs, per request, whether the history held a stub
    and whether the recall tool was offered."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered = [t.name for t in info.function_tools]
        stubs = _stub_ids(messages)
        self.requests.append({"stub": bool(stubs), "recall_offered": RECALL_TOOL in offered})
        prompts = _user_prompts(messages)
        turn = len(prompts)
        # the last request's parts (pydantic-ai may add a tool availability
        # notice after a tool return)
        last = messages[-1].parts
        parts: list[Any]
        if any(isinstance(p, ToolReturnPart) for p in last):
            parts = [TextPart("done")]
        elif any(isinstance(p, RetryPromptPart) for p in last):
            parts = [TextPart("retried")]
        elif prompts and prompts[-1] == "logs":
            parts = [ToolCallPart("fetch_logs", {}, tool_call_id=f"t{turn}-logs")]
        elif prompts and prompts[-1] == "recall" and stubs:
            args = {"offload_id": stubs[-1]}
            parts = [ToolCallPart(RECALL_TOOL, args, tool_call_id=f"t{turn}-recall")]
        else:
            parts = [TextPart("ok")]
        usage = RequestUsage(input_tokens=_chars(messages) // 4, output_tokens=10)
        return ModelResponse(parts=parts, usage=usage, model_name="claude-opus-4-6")


# -- the framework's persistence: a shared SQLite file -------------------------------------


def _db() -> sqlite3.Connection:
    connection = sqlite3.connect(os.environ[HISTORY_ENV], timeout=30)
    connection.execute(
        "CREATE TABLE IF NOT EXISTS conversation (id TEXT PRIMARY KEY, messages TEXT NOT NULL)"
    )
    return connection


def load(conversation: str) -> list[ModelMessage]:
    with _db() as db:
        row = db.execute(
            "SELECT messages FROM conversation WHERE id = ?", (conversation,)
        ).fetchone()
    return [] if row is None else list(ModelMessagesTypeAdapter.validate_json(row[0]))


def save(conversation: str, messages_json: bytes) -> None:
    connection = _db()
    with connection as db:
        db.execute(
            "INSERT INTO conversation (id, messages) VALUES (?, ?) "
            "ON CONFLICT(id) DO UPDATE SET messages = excluded.messages",
            (conversation, messages_json.decode()),
        )
    connection.close()


# -- the worker ------------------------------------------------------------------------------


def main() -> None:
    recorder = Recorder(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
    layer = DecisionLayer(default_model="claude-opus-4-6", observer=recorder, agent_name="analyst")
    script = Script()

    def fetch_logs() -> str:
        """The service's request logs."""
        return logs_text()

    agent: Agent[None, str] = Agent(
        FunctionModel(script, model_name="claude-opus-4-6"),
        name="analyst",
        tools=[fetch_logs],
        capabilities=[SeamscopeCapability(layer)],
    )

    def turn(conversation: str, text: str) -> dict[str, Any]:
        history = load(conversation)
        script.requests.clear()
        result = agent.run_sync(text, message_history=history, conversation_id=conversation)
        save(conversation, result.all_messages_json())
        returns: list[dict[str, Any]] = []
        for message in result.new_messages():
            for part in getattr(message, "parts", ()):
                if isinstance(part, ToolReturnPart):
                    content = part.model_response_str()
                    returns.append(
                        {
                            "tool": part.tool_name,
                            "length": len(content),
                            "sha256": digest(content),
                            "text": content if len(content) <= 1000 else None,
                        }
                    )
                elif isinstance(part, RetryPromptPart):
                    returns.append({"retry": part.tool_name, "text": part.model_response()})
        return {
            "conversation_id": result.conversation_id,
            "output": result.output,
            "returns": returns,
            "requests": list(script.requests),
            "pid": os.getpid(),
            **recorder.drain(),
        }

    def end(conversation: str) -> dict[str, Any]:
        layer.end_conversation(conversation)
        return {"pid": os.getpid(), **recorder.drain()}

    def drain() -> dict[str, Any]:
        return {"pid": os.getpid(), **recorder.drain()}

    serve({"turn": turn, "end": end, "drain": drain})


if __name__ == "__main__":
    main()
