"""A Deep Agents worker of the fleet: ``python -m tests.fleet._deepagents_worker``.

Built from the environment alone, as an operator deploys a replica:
``SEAMSCOPE_OFFLOAD_STORE`` (read by seamscope itself) names the offload
store every worker shares, ``FLEET_CHECKPOINTS`` the SQLite file of
LangGraph's checkpointer (Deep Agents' state backend keeps its files in
the checkpointed state). ``create_deep_agent`` with seamscope watching its
``FilesystemMiddleware`` (evicting above 10,000 tokens), seamscope's own
gate off: Deep Agents evicts, seamscope prices.

The chat model answers from the messages it receives (each worker has its
own instance), usage computed from the prompt: "logs" fetches the 64,000
character log (evicted), "read" reads the first 100 lines of the file the
eviction's preview names, a tool answer ends the turn. Commands
(:func:`tests.fleet._fleet.serve`): ``turn(conversation, text)``,
``end(conversation)``, ``drain()``.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import deepagents
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from tests.fleet._fleet import Recorder, serve
from tests.fleet._langchain_worker import AGENT, CHECKPOINTS_ENV, MODEL, FleetChatModel, fetch_logs

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware

EVICT_ABOVE_TOKENS = 10_000
_NOTICE = re.compile(r"\ATool result too large, .*? at this path: (?P<path>[^\n]+)\n")


def _text(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else str(content)


def evicted_path(messages: Sequence[BaseMessage]) -> str | None:
    """The file the latest eviction preview in the history names."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            found = _NOTICE.match(_text(message))
            if found:
                return found.group("path").strip()
    return None


class DeepFleetChatModel(FleetChatModel):
    """FleetChatModel's answers, and "read": a slice of the evicted file."""

    def _answer(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and _text(last) == "read":
            path = evicted_path(messages)
            if path is None:
                return AIMessage(content="nothing to read")
            args = {"file_path": path, "offset": 0, "limit": 100}
            call = {"name": "read_file", "args": args, "id": f"call-{len(messages)}"}
            return AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        return super()._answer(messages)


def main() -> None:
    recorder = Recorder(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
    layer = DecisionLayer(default_model=MODEL, observer=recorder, agent_name=AGENT)
    checkpoints = sqlite3.connect(os.environ[CHECKPOINTS_ENV], check_same_thread=False)
    seamscope = SeamscopeMiddleware(layer, offload=False)
    agent = deepagents.create_deep_agent(
        model=DeepFleetChatModel(),
        tools=[fetch_logs],
        middleware=seamscope.watching(
            FilesystemMiddleware(tool_token_limit_before_evict=EVICT_ABOVE_TOKENS)
        ),
        checkpointer=SqliteSaver(checkpoints),
    )

    def turn(conversation: str, text: str) -> dict[str, Any]:
        result = agent.invoke(
            {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": conversation}}
        )
        messages = result["messages"]
        read = [
            len(_text(m)) for m in messages if isinstance(m, ToolMessage) and m.name == "read_file"
        ]
        return {"answer": _text(messages[-1]), "read_chars": read, **recorder.drain()}

    def end(conversation: str) -> dict[str, Any]:
        seamscope.end_conversation(conversation)
        return recorder.drain()

    def drain() -> dict[str, Any]:
        return recorder.drain()

    serve({"turn": turn, "end": end, "drain": drain})


if __name__ == "__main__":
    main()
