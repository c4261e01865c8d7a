"""Drive a real symfonic-core SymfonicAgent offline.

The chat model is LangChain's scripted fake (its ``bind_tools`` returns the
model itself, since symfonic binds tools on every iteration) and the
provider is a four-method ``ModelProvider`` that records the ``ModelConfig``
symfonic asks it for: the ground truth of which model reasoned each call.
Tools are plain LangChain tools that record what really ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import Field
from symfonic.agent import SymfonicAgent
from symfonic.agent.config import FrameworkConfig
from symfonic.core.config import AgentConfig, ModelConfig

DEFAULT_MODEL = "claude-opus-4-6"
BIG_OUTPUT = "x" * 100_000  # 25 000 tokens at 4 chars/token: above symfonic's 60 000-char tier


class ScriptedModel(FakeMessagesListChatModel):
    """Returns its responses in order (cycling); records every message list it received."""

    wire: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.wire.append(list(messages))
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kw)
        # A fresh message per call: symfonic rewrites the emitted tool calls in
        # place, and a script that cycles must not see last turn's rewrite.
        for generation in result.generations:
            generation.message = generation.message.model_copy(deep=True)
        return result


class RecordingProvider:
    """A symfonic ModelProvider: one scripted model, every requested model name kept."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.requested: list[str] = []

    def get_chat_model(self, config: ModelConfig) -> ScriptedModel:
        self.requested.append(config.model_name)
        return self.model

    def supports_thinking(self) -> bool:
        return False

    def supports_streaming(self) -> bool:
        return True

    def supports_forced_tool_choice(self, config: ModelConfig) -> bool:
        return True


class Warehouse:
    """The tools of the scenario; ``executed`` is what really ran, in order."""

    def __init__(self) -> None:
        self.executed: list[tuple[str, dict[str, Any]]] = []
        executed = self.executed

        @tool
        def run_block(code: str = "") -> str:
            """Run a code block against the warehouse."""
            executed.append(("run_block", {"code": code}))
            return "run_block ok"

        @tool
        def fetch_data(table: str = "") -> str:
            """Fetch a stored table."""
            executed.append(("fetch_data", {"table": table}))
            return f"rows of {table}"

        @tool
        def search(q: str = "") -> str:
            """Search the notes."""
            executed.append(("search", {"q": q}))
            return "3 notes"

        @tool
        def archive_search(q: str = "") -> str:
            """Search the archive (registered, but not routed to the action role)."""
            executed.append(("archive_search", {"q": q}))
            return "archived notes"

        @tool
        def dump_table(table: str = "") -> str:
            """Dump a whole table."""
            executed.append(("dump_table", {"table": table}))
            return BIG_OUTPUT

        self.tools: list[BaseTool] = [run_block, fetch_data, search, archive_search, dump_table]


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def emits(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=list(calls))


def with_usage(
    message: AIMessage,
    input_tokens: int,
    output_tokens: int,
    *,
    cache_read: int = 0,
    cache_write: int = 0,
) -> AIMessage:
    """``message`` reporting this usage, as a LangChain chat model does.

    ``input_tokens`` includes the cache reads and writes (LangChain's
    convention); symfonic reads them from ``input_token_details``.
    """
    details = {"cache_read": cache_read, "cache_creation": cache_write}
    return message.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
                "input_token_details": details,
            }
        }
    )


def memory_id(tool_call_id: str) -> str:
    """The memory id symfonic's default tool-result ledger gives an offloaded output.

    The stub names it and ``recall_tool_result(mem_id=...)`` takes it; a
    scripted model must know it before the run.
    """
    return "trm_" + hashlib.sha256(tool_call_id.encode("utf-8")).hexdigest()[:12]


def config(**update: Any) -> FrameworkConfig:
    """symfonic's defaults, the scenario's default model, quiet offline settings."""
    base = FrameworkConfig.with_defaults()
    return base.model_copy(
        update={
            "agent": AgentConfig(model=ModelConfig(model_name=DEFAULT_MODEL)),
            "lazy_tooling": False,
            "messages_cache_policy": "off",
            **update,
        }
    )


def offload_settings() -> dict[str, Any]:
    """symfonic's size-tiered offload on, with its default priors and thresholds."""
    return {
        "tool_result_compaction_enabled": True,
        "tool_result_offload_enabled": True,
        "tool_result_compaction_keep_last_n": 0,
    }


def build_agent(
    responses: Sequence[AIMessage], cfg: FrameworkConfig, tools: Sequence[BaseTool]
) -> tuple[SymfonicAgent, RecordingProvider]:
    model = ScriptedModel(responses=list(responses))
    provider = RecordingProvider(model)
    return SymfonicAgent(model_provider=provider, config=cfg, tools=list(tools)), provider


def last_user_text(ctx: Any) -> str:
    for message in reversed(list(ctx.messages)):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def tool_message(content: str, call_id: str, name: str) -> ToolMessage:
    return ToolMessage(content=content, tool_call_id=call_id, name=name)


def raising(error: BaseException) -> Callable[..., Any]:
    def predicate(*args: Any) -> Any:
        raise error

    return predicate


def span_tree(spans: Sequence[ReadableSpan]) -> list[tuple[int, str]]:
    """(depth, name) of every span, depth-first, siblings in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, span.name))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """Spans called ``name``, in start order."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [{"name": e.name, **dict(e.attributes or {})} for e in span.events]


def counters(reader: InMemoryMetricReader) -> dict[tuple[str, frozenset[Any]], float]:
    """Every counter data point: (metric name, attribute items) -> value."""
    out: dict[tuple[str, frozenset[Any]], float] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, NumberDataPoint):
                        key = (metric.name, frozenset((point.attributes or {}).items()))
                        out[key] = point.value
    return out


def histogram_counts(reader: InMemoryMetricReader, name: str) -> dict[frozenset[Any], int]:
    """How many values histogram ``name`` recorded, per attribute set."""
    out: dict[frozenset[Any], int] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        out[frozenset((point.attributes or {}).items())] = point.count
    return out
