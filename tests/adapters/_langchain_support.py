"""Test doubles for the LangChain adapter: a scripted chat model and recording tools.

They stand in for the provider and the user's tools around the real
``create_agent`` loop, never for LangChain or seamscope themselves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.decisions import BaseDecisionModel, ClassifierResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from opentelemetry.sdk.trace import ReadableSpan

BIG_REPORT_CHARS = 80_000


@dataclass
class ModelCall:
    """What one model call really received (``settings``: other bound kwargs)."""

    model: str
    tools: list[str] | None
    tool_choice: Any
    messages: list[BaseMessage]
    settings: dict[str, Any] = field(default_factory=dict)

    def tool_message(self, call_id: str) -> ToolMessage:
        for message in self.messages:
            if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                return message
        raise AssertionError(f"no ToolMessage for {call_id} in the model's input")


def _drain(script: deque[AIMessage]) -> Iterator[AIMessage]:
    while script:
        yield script.popleft()


def _bound_name(tool: Any) -> str:
    """The name a real chat model binds a tool under (LangChain's OpenAI tool form:
    a ``BaseTool``, a function, or a dict already in a provider's form)."""
    if isinstance(tool, dict) and "name" in tool:  # a provider's built-in tool
        return str(tool["name"])
    return str(convert_to_openai_tool(tool)["function"]["name"])


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model that answers from a script shared by several instances.

    Whichever instance the agent calls produces the next scripted step, and
    every call is logged (model, bound tool names, tool_choice, input
    messages), so a test asserts which instance was really called with what.
    """

    model_name: str
    log: Any  # shared list of ModelCall (typed Any so pydantic does not copy it)
    error: Any = None

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = [_bound_name(t) for t in tools]
        return self.bind(bound_tools=names, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.log.append(
            ModelCall(
                self.model_name,
                kwargs.pop("bound_tools", None),
                kwargs.pop("tool_choice", None),
                list(messages),
                kwargs,
            )
        )
        if self.error is not None:
            raise self.error
        return super()._generate(messages, stop=stop, run_manager=run_manager)


class UnnamedChatModel(GenericFakeChatModel):
    """A scripted chat model that gives itself no name (no ``model_name``,
    ``model`` or ``ls_model_name``): ``label`` only tells the log which
    instance was called. Its answers may name a model in their metadata."""

    label: str
    log: Any
    error: Any = None

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = [_bound_name(t) for t in tools]
        return self.bind(bound_tools=names, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools, choice = kwargs.pop("bound_tools", None), kwargs.pop("tool_choice", None)
        self.log.append(ModelCall(self.label, tools, choice, list(messages), kwargs))
        if self.error is not None:
            raise self.error
        return super()._generate(messages, stop=stop, run_manager=run_manager)


def scripted_models(
    names: Sequence[str], script: Sequence[AIMessage], *, error: BaseException | None = None
) -> tuple[dict[str, ScriptedChatModel], list[ModelCall]]:
    """Model instances by name sharing one script, and their shared call log."""
    queue: deque[AIMessage] = deque(script)
    log: list[ModelCall] = []
    models = {
        name: ScriptedChatModel(messages=_drain(queue), model_name=name, log=log, error=error)
        for name in names
    }
    return models, log


def ai(
    *calls: tuple[str, dict[str, Any], str],
    text: str = "",
    usage: tuple[int, int, int, int] | None = None,
    model: str | None = None,
) -> AIMessage:
    """An AIMessage with tool calls ``(name, args, id)``, optional usage
    ``(input, output, cache_read, cache_creation)`` and the model the provider
    says answered (``response_metadata["model_name"]``)."""
    extra: dict[str, Any] = {}
    if model is not None:
        extra["response_metadata"] = {"model_name": model}
    if usage is not None:
        inp, out, read, write = usage
        extra["usage_metadata"] = {
            "input_tokens": inp,
            "output_tokens": out,
            "total_tokens": inp + out,
            "input_token_details": {"cache_read": read, "cache_creation": write},
        }
    return AIMessage(
        content=text,
        tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls],
        **extra,
    )


@dataclass
class Toolbox:
    """The user's tools; each records the calls that really executed."""

    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: BaseException | None = None

    def tools(self) -> list[BaseTool]:
        executed = self.executed
        box = self

        @tool
        def run_block(block: str, limit: int = 10) -> str:
            """Run a saved analytics block."""
            executed.append(("run_block", {"block": block, "limit": limit}))
            return f"ran {block}"

        @tool
        def fetch_data(source: str, rows: int = 10) -> str:
            """Read rows from a governed data source."""
            executed.append(("fetch_data", {"source": source, "rows": rows}))
            return f"{rows} rows of {source}"

        @tool
        def search(query: str) -> str:
            """Search the internal archive."""
            executed.append(("search", {"query": query}))
            if box.error is not None:
                raise box.error
            return f"3 archive hits for {query}"

        @tool
        def web_search(query: str) -> str:
            """Search the public web."""
            executed.append(("web_search", {"query": query}))
            return f"web hits for {query}"

        @tool
        def big_report(topic: str) -> str:
            """Produce the full quarterly report."""
            executed.append(("big_report", {"topic": topic}))
            return ("x" * 79 + "\n") * (BIG_REPORT_CHARS // 80)

        return [run_block, fetch_data, search, web_search, big_report]


def children(spans: Sequence[ReadableSpan]) -> dict[int | None, list[ReadableSpan]]:
    """Spans by parent span id, each list in start order."""
    out: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        out.setdefault(parent, []).append(span)
    return out


def tree(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> tuple[str, list[Any]]:
    """``(name, [child trees])``, children sorted by name (parallel tools race)."""
    by_parent = children(spans)
    assert span.context is not None

    def build(node: ReadableSpan) -> tuple[str, list[Any]]:
        assert node.context is not None
        kids = by_parent.get(node.context.span_id, [])
        return node.name, sorted((build(k) for k in kids), key=lambda t: t[0])

    return build(span)


# -- decision middlewares' doubles ----------------------------------------------------


class ProviderChatModel(ScriptedChatModel):
    """A scripted chat model that reports a provider (``ls_provider``), as
    ProviderToolSearchMiddleware needs to pick the provider's search tool."""

    provider: str = "anthropic"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Also logs (in ``ModelCall.settings["deferred"]``) the tools bound with
        ``defer_loading``: the provider would load them only on a search."""
        deferred = [
            t.name
            for t in tools
            if isinstance(t, BaseTool) and (t.extras or {}).get("defer_loading") is True
        ]
        return super().bind_tools(tools, tool_choice=tool_choice, deferred=deferred, **kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params


@dataclass
class Classified:
    """One request a scripted decision model answered (state and question ids)."""

    model: str
    state: Any
    questions: list[str]


class ScriptedDecisionModel(BaseDecisionModel):
    """A decision model (a router's or a risk check's classifier) answering from a
    script of ``ClassifierResponse``s, logging every request it answers."""

    answers: Any  # deque of ClassifierResponse (Any so pydantic does not copy it)
    log: Any

    @property
    def _provider(self) -> str:
        return "scripted"

    def _classify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        self.log.append(Classified(self.model, state, sorted(questions)))
        return self.answers.popleft()


def choice(label: str, confidence: float, *, model: str, usage: tuple[int, int]) -> Any:
    """A router classifier's answer: ``label`` for the question ``model_route``."""
    return ClassifierResponse(
        model=model,
        answers={
            "model_route": {
                "type": "choice",
                "choice": label,
                "probabilities": {label: confidence},
                "confidence": confidence,
            }
        },
        usage={"input_tokens": usage[0], "output_tokens": usage[1]},
    )


def risk(probability: float, *, model: str, usage: tuple[int, int]) -> Any:
    """A risk classifier's answer to the question ``is_risky``."""
    return ClassifierResponse(
        model=model,
        answers={"is_risky": {"type": "noul", "noul": probability}},
        usage={"input_tokens": usage[0], "output_tokens": usage[1]},
    )


def selection(*tools: str, usage: tuple[int, int, int, int] | None = None) -> AIMessage:
    """What a tool selector model answers: the structured-output tool call
    ``ToolSelectionResponse`` with the tools it picks."""
    return ai(("ToolSelectionResponse", {"tools": list(tools)}, "select"), usage=usage)
