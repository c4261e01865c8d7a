"""A LangChain worker of the fleet: ``python -m tests.fleet._langchain_worker``.

Built from the environment alone, as an operator deploys a replica:

* ``SEAMSCOPE_OFFLOAD_STORE`` (read by seamscope itself, never here): the
  offload store every worker shares;
* ``FLEET_CHECKPOINTS``: the SQLite file of LangGraph's checkpointer, the
  framework's own persistence, shared by every worker;
* ``FLEET_POSTGRES_DSN`` (optional): a PostgreSQL the agent's LangGraph
  store (``create_agent(..., store=PostgresStore(...))``) lives in.

The chat model answers from the messages it receives (never from a call
order: each worker has its own instance), with usage computed from the
prompt, so every worker prices the same prompt the same way. Commands
(:func:`tests.fleet._fleet.serve`): ``turn(conversation, text)``,
``end(conversation)``, ``drain()``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from tests.fleet._fleet import Recorder, serve

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.loop import RECALL_TOOL

MODEL = "claude-opus-4-6"
AGENT = "analyst"
LOG_CHARS = 64_000
OUTPUT_TOKENS = 10
CHECKPOINTS_ENV = "FLEET_CHECKPOINTS"
POSTGRES_ENV = "FLEET_POSTGRES_DSN"
_STUB = re.compile(r"\[offloaded (\S+): ")


def logs_text() -> str:
    """What ``fetch_logs`` returns: exactly 64,000 characters, always the same."""
    lines = (
        f"{i:06d} GET /api/v1/items/{i * 7919 % 100_003:06d} status=200 "
        f"bytes={i * 37 % 9973:05d}".ljust(79)
        + "\n"
        for i in range(LOG_CHARS // 80)
    )
    text = "".join(lines)
    assert LOG_CHARS == len(text)
    return text


@tool
def fetch_logs() -> str:
    """Fetch the service's request logs."""
    return logs_text()


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content
    )


def _stub_id(messages: Sequence[BaseMessage]) -> str | None:
    """The offload id of the latest stub the history holds."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            found = _STUB.match(_text(message))
            if found:
                return found.group(1)
    return None


class FleetChatModel(BaseChatModel):
    """Answers from the messages alone: the last one decides the answer, the
    prompt's characters (// 4) are its input tokens."""

    model_name: str = MODEL

    @property
    def _llm_type(self) -> str:
        return "fleet-scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(**kwargs)

    def _answer(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        call_id = f"call-{len(messages)}"
        if isinstance(last, ToolMessage):
            return AIMessage(content="done")
        if isinstance(last, HumanMessage) and _text(last) == "logs":
            calls = [{"name": "fetch_logs", "args": {}, "id": call_id, "type": "tool_call"}]
            return AIMessage(content="", tool_calls=calls)
        if isinstance(last, HumanMessage) and _text(last) == "recall":
            offload_id = _stub_id(messages)
            if offload_id is None:
                return AIMessage(content="nothing to recall")
            args = {"offload_id": offload_id}
            calls = [{"name": RECALL_TOOL, "args": args, "id": call_id, "type": "tool_call"}]
            return AIMessage(content="", tool_calls=calls)
        return AIMessage(content="ok")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self._answer(messages)
        prompt = sum(len(_text(m)) for m in messages) // 4
        answer.usage_metadata = {
            "input_tokens": prompt,
            "output_tokens": OUTPUT_TOKENS,
            "total_tokens": prompt + OUTPUT_TOKENS,
        }
        return ChatResult(generations=[ChatGeneration(message=answer)])


def _graph_store() -> Any:
    dsn = os.environ.get(POSTGRES_ENV, "").strip()
    if not dsn:
        return None
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    store = PostgresStore(conn)
    # workers start together: their migrations may race (LangGraph's setup() is not
    # safe to run at once from several processes). An advisory lock takes turns;
    # tried, never waited on: a waiting statement is a transaction that another
    # worker's CREATE INDEX CONCURRENTLY would wait for (a deadlock)
    with conn.cursor() as cursor:
        while not cursor.execute("SELECT pg_try_advisory_lock(7331) AS won").fetchone()["won"]:
            time.sleep(0.05)
        try:
            store.setup()
        finally:
            cursor.execute("SELECT pg_advisory_unlock(7331)")
    return store


def _tool_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The ToolMessages of the latest turn (after its HumanMessage)."""
    start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    out = []
    for message in messages[start:]:
        if isinstance(message, ToolMessage):
            body = _text(message)
            found = _STUB.match(body)
            out.append(
                {
                    "name": message.name,
                    "chars": len(body),
                    "sha256": hashlib.sha256(body.encode()).hexdigest(),
                    "stub_id": None if found is None else found.group(1),
                }
            )
    return out


def main() -> None:
    recorder = Recorder(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
    layer = DecisionLayer(default_model=MODEL, observer=recorder, agent_name=AGENT)
    checkpoints = sqlite3.connect(os.environ[CHECKPOINTS_ENV], check_same_thread=False)
    options: dict[str, Any] = {}
    graph_store = _graph_store()
    if graph_store is not None:
        options["store"] = graph_store
    seamscope = SeamscopeMiddleware(layer)
    agent = create_agent(
        FleetChatModel(),
        [fetch_logs],
        middleware=[seamscope],
        checkpointer=SqliteSaver(checkpoints),
        **options,
    )

    def turn(conversation: str, text: str) -> dict[str, Any]:
        result = agent.invoke(
            {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": conversation}}
        )
        messages = result["messages"]
        return {
            "tools": _tool_messages(messages),
            "answer": _text(messages[-1]),
            **recorder.drain(),
        }

    def end(conversation: str) -> dict[str, Any]:
        # where the offloads live: the agent's LangGraph store when it has one (a
        # worker that served no turn yet knows it only from here), else the layer's
        seamscope.end_conversation(conversation, store=graph_store)
        return recorder.drain()

    def drain() -> dict[str, Any]:
        return recorder.drain()

    serve({"turn": turn, "end": end, "drain": drain})


if __name__ == "__main__":
    main()
