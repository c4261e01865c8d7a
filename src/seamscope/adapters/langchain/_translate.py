"""LangChain objects in, seamscope values out (and back): small pure functions.

No OpenTelemetry and no state here: each function reads LangChain or
LangGraph objects and returns a seamscope value or a new LangChain object,
mutating nothing. The ambient reads are :func:`thread_id` falling back to
LangGraph's ``get_config()`` when the runtime carries no config, and
:func:`invocation` falling back to ``get_runtime()``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from seamscope.adapters._kit import RECALL_TOOL, model_name_of
from seamscope.adapters.langchain._framework import (
    AIMessage,
    AutoStrategy,
    BaseChatModel,
    BaseTool,
    ModelRequest,
    ModelResponse,
    ProviderStrategy,
    ToolMessage,
    ToolStrategy,
    get_config,
    get_runtime,
    ls_model_name,
)
from seamscope.decisions import ModelConfig, ModelUsage, PostModelResult, ToolCall
from seamscope.decisions.records import tool_name

__all__ = [
    "bindable",
    "carried",
    "client_tools",
    "ends_run",
    "stubs",
    "is_error_result",
    "is_summary",
    "model_name",
    "named_model",
    "routed_calls",
    "structured_calls",
    "structured_tools",
    "last_ai",
    "offered",
    "offloadable_text",
    "prepared_request",
    "recall_id",
    "response_model",
    "rewrite",
    "invocation",
    "text",
    "thread_id",
    "tool_call",
    "usage",
    "usage_of",
    "with_content",
    "with_message",
]

NS_SEP = "|"
"""The separator of LangGraph's checkpoint namespaces (a tripwire test pins it)."""


# -- the run's identity ------------------------------------------------------------


def thread_id(runtime: Any) -> str | None:
    """The run's ``configurable.thread_id``, from whichever runtime shape we got."""
    info = getattr(runtime, "execution_info", None)
    found = getattr(info, "thread_id", None)
    if not found:
        config = getattr(runtime, "config", None)
        if not isinstance(config, Mapping):
            try:
                config = get_config()
            except Exception:
                config = None
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        if isinstance(configurable, Mapping):
            found = configurable.get("thread_id")
    return str(found) if found else None


def invocation(runtime: Any) -> tuple[Any, str] | None:
    """The graph invocation a hook runs in, without writing anything to the
    state: LangGraph's per-invocation ``RunControl`` (``Runtime.control``,
    one per ``invoke``/``stream``; an agent run inside another graph's node
    shares its parent's) and the checkpoint namespace of the graph the agent
    runs as (``""`` at the top, the parent node's task inside another graph).
    None when the hook runs outside a LangGraph run."""
    rt = runtime if getattr(runtime, "control", None) is not None else None
    if rt is None:
        try:
            rt = get_runtime()
        except Exception:
            return None
    control = getattr(rt, "control", None)
    namespace = getattr(getattr(rt, "execution_info", None), "checkpoint_ns", None)
    if control is None or not isinstance(namespace, str):
        return None
    return control, namespace.rsplit(NS_SEP, 1)[0] if NS_SEP in namespace else ""


# -- model calls -------------------------------------------------------------------


def offered(tools: Sequence[Any], *, recall: bool) -> list[Any]:
    """The request's tools; the recall tool only when ``recall`` (something to recall)."""
    if recall:
        return list(tools)
    return [t for t in tools if tool_name(t) != RECALL_TOOL]


def bindable(tools: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The selected tools a LangChain model can bind (tools and dict tools), and the rest."""
    bound: list[Any] = []
    unbound: list[Any] = []
    for tool in tools:
        (bound if isinstance(tool, BaseTool | dict) else unbound).append(tool)
    return bound, unbound


def model_name(model: Any) -> str | None:
    """A LangChain chat model's own name: ``model_name``/``model``/``model_id``,
    else the name it gives its traces (``ls_model_name``)."""
    return model_name_of(model, ls_model_name)


def named_model(
    model: Any,
    chosen: tuple[Any, str] | None,
    models: Mapping[str, BaseChatModel],
    default: str,
) -> tuple[str, bool]:
    """The name of the model instance a request really runs on, and whether
    anything but the default said it: the PRE seam's name for its chosen
    instance, the name ``models`` gives it, the name it gives itself, else
    the default model's (False)."""
    if chosen is not None and chosen[0] is model:
        return chosen[1], True
    found = next((name for name, m in models.items() if m is model), None)
    if found is None:
        found = model_name(model)
    return (found, True) if found is not None else (default, False)


def prepared_request(
    request: ModelRequest[Any],
    *,
    tools: list[Any],
    model: BaseChatModel,
    config: ModelConfig,
    forced_tool: str | None,
) -> ModelRequest[Any]:
    """The request to execute: bound tools, chosen model and parameters, forced tool."""
    overrides: dict[str, Any] = {"tools": tools}
    if model is not request.model:
        overrides["model"] = model
    if config.parameters:
        overrides["model_settings"] = {**request.model_settings, **config.params}
    if forced_tool:
        overrides["tool_choice"] = forced_tool
    return request.override(**overrides)


def last_ai(messages: Sequence[Any]) -> AIMessage | None:
    """The last AIMessage of a model call's result."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def usage(message: Any) -> ModelUsage | None:
    """A ModelUsage from an AIMessage's ``usage_metadata`` (None when absent).

    LangChain counts cache reads and writes inside ``input_tokens``; a
    provider that does not is corrected so the total covers them.
    """
    return usage_of(getattr(message, "usage_metadata", None))


def emitting_usage(messages: Sequence[Any], call_id: str) -> ModelUsage | None:
    """The usage of the model call that emitted tool call ``call_id``: the
    ``usage_metadata`` of the last AIMessage of ``messages`` that holds it
    (None when none does, or it has no usage)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(
            isinstance(raw, Mapping) and raw.get("id") == call_id
            for raw in message.tool_calls or ()
        ):
            return usage(message)
    return None


def usage_of(meta: Any) -> ModelUsage | None:
    """A ModelUsage from a LangChain ``UsageMetadata`` mapping (None when absent)."""
    if not isinstance(meta, Mapping):
        return None
    details = meta.get("input_token_details")
    details = details if isinstance(details, Mapping) else {}
    read = int(details.get("cache_read") or 0)
    write = int(details.get("cache_creation") or 0)
    input_tokens = max(int(meta.get("input_tokens") or 0), read + write)
    return ModelUsage(input_tokens, int(meta.get("output_tokens") or 0), read, write)


def response_model(message: AIMessage) -> Any:
    """The model the provider says answered (None when it does not say)."""
    metadata = message.response_metadata or {}
    found = metadata.get("model_name") or metadata.get("model")
    return found if found else None


def structured_tools(request: ModelRequest[Any]) -> tuple[dict[str, Any], ...]:
    """The structured-output tools LangChain binds itself for this request (a
    ``ToolStrategy``'s schemas), as named tools for the selection record."""
    strategy = getattr(request, "response_format", None)
    if not isinstance(strategy, ToolStrategy):
        return ()
    return tuple({"name": spec.name} for spec in strategy.schema_specs)


def routed_calls(
    message: AIMessage | None, structured: Sequence[Mapping[str, Any]]
) -> list[tuple[int, Any]]:
    """``(position, call)`` of the emitted calls the agent dispatches: all but
    the structured-output calls, which LangChain consumes in the model call."""
    if message is None or not message.tool_calls:
        return []
    names = {tool["name"] for tool in structured}
    return [(i, call) for i, call in enumerate(message.tool_calls) if call["name"] not in names]


def client_tools(tools: Sequence[Any]) -> dict[str, BaseTool]:
    """The request's tools the agent runs itself (``BaseTool``s), by name:
    LangChain builds its ``tools`` node when there is one."""
    return {tool.name: tool for tool in tools if isinstance(tool, BaseTool)}


def ends_run(request: ModelRequest[Any], response: ModelResponse[Any], *, tools_node: bool) -> bool:
    """Whether LangChain routes the agent to the end after this model call
    (``create_agent``'s edges after the model, when no middleware hook jumps
    elsewhere). With a ``tools`` node (``tools_node``): no AIMessage or no
    tool call ends; a pending call of a tool goes to the tools; only
    structured-output calls end once the structured response is parsed.
    Without one: the end, unless a structured-output strategy loops back
    until its response is parsed."""
    answered = getattr(response, "structured_response", None) is not None
    strategy = getattr(request, "response_format", None)
    if not tools_node:
        loops = strategy is not None and not isinstance(strategy, ProviderStrategy)
        return answered or not loops
    message = last_ai(getattr(response, "result", None) or ())
    if message is None or not message.tool_calls:
        return True
    if isinstance(strategy, AutoStrategy):  # its tools, should it fall back to them
        strategy = ToolStrategy(schema=strategy.schema)
    names = (
        {spec.name for spec in strategy.schema_specs}
        if isinstance(strategy, ToolStrategy)
        else set()
    )
    if any(call["name"] not in names for call in message.tool_calls):
        return False
    return answered


def structured_calls(
    message: AIMessage | None, structured: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """The emitted calls that are structured-output answers (LangChain consumes
    them in the model call; they never reach the tool runner)."""
    if message is None or not message.tool_calls or not structured:
        return []
    names = {tool["name"] for tool in structured}
    return [call for call in message.tool_calls if call["name"] in names]


_STUB = re.compile(r"^\[offloaded (\S+): ")


def stubs(messages: Sequence[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The offload ids whose stub a model call's prompt holds (its tool
    messages, in order), and those of them a recall in the same prompt
    brought back."""
    found: list[str] = []
    recall_ids: dict[str, str] = {}
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == RECALL_TOOL and call.get("id"):
                    args = call.get("args") or {}
                    recall_ids[str(call["id"])] = str(args.get("offload_id", ""))
        elif isinstance(message, ToolMessage):
            body = text(message.content)
            if body is None:
                continue
            match = _STUB.match(body)
            if match and message.name != RECALL_TOOL:
                found.append(match.group(1))
            elif (
                message.tool_call_id in recall_ids
                and message.status != "error"
                and not body.startswith("error:")
            ):
                answered.add(recall_ids[message.tool_call_id])
    ids = tuple(dict.fromkeys(found))
    return ids, tuple(o for o in ids if o in answered)


def carried(messages: Sequence[Any]) -> tuple[str, ...]:
    """The offload ids whose stub (not the output) a model call's prompt holds:
    the stubs in its tool messages, minus the offloads a recall in the same
    prompt brought back."""
    ids, back = stubs(messages)
    return tuple(o for o in ids if o not in back)


def is_summary(message: Any) -> bool:
    """Whether a message is the summary SummarizationMiddleware wrote in place of
    earlier messages (``additional_kwargs["lc_source"] == "summarization"``)."""
    extra = getattr(message, "additional_kwargs", None)
    return isinstance(extra, Mapping) and extra.get("lc_source") == "summarization"


def rewrite(
    message: AIMessage, post: PostModelResult, positions: Sequence[int] | None = None
) -> AIMessage:
    """The AIMessage with the tool calls the POST seam decided (ids kept).

    ``positions``: where each routed call sits in the message's tool calls,
    when the seam saw only some of them (its records index the routed calls).
    """
    calls = list(message.tool_calls)
    renamed: dict[str, ToolCall] = {}
    changed = False
    for record in post.records:
        index = record.index
        if positions is not None:
            index = positions[index] if index < len(positions) else len(calls)
        if record.final == record.emitted or index >= len(calls):
            continue
        original = calls[index]
        final = record.final
        calls[index] = {
            "name": final.name,
            "args": dict(final.args),
            "id": original.get("id"),
            "type": "tool_call",
        }
        changed = True
        if original.get("id"):
            renamed[str(original["id"])] = final
    if not changed:
        return message
    content: Any = message.content
    if isinstance(content, list) and renamed:
        content = [
            {**block, "name": renamed[block["id"]].name, "input": dict(renamed[block["id"]].args)}
            if isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and block.get("id") in renamed
            else block
            for block in content
        ]
    return message.model_copy(update={"tool_calls": calls, "content": content})


def with_message(
    response: ModelResponse[Any], old: AIMessage, new: AIMessage
) -> ModelResponse[Any]:
    """The model response with ``old`` replaced by ``new``."""
    result = [new if m is old else m for m in response.result]
    return ModelResponse(result=result, structured_response=response.structured_response)


# -- tool calls --------------------------------------------------------------------


def tool_call(raw: Mapping[str, Any]) -> ToolCall:
    """A ToolCall from a LangChain tool call dict."""
    return ToolCall(str(raw.get("id") or ""), str(raw["name"]), raw.get("args") or {})


def text(content: Any) -> str | None:
    """The text of a ToolMessage's content, or None when it is not all text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
            else:
                return None
        return "".join(parts)
    return None


def is_error_result(result: Any) -> bool:
    """Whether a tool call's result is LangChain's error result."""
    return isinstance(result, ToolMessage) and result.status == "error"


def offloadable_text(message: ToolMessage) -> str | None:
    """The text the offload gate may take from a tool result (None for an error
    result or content that is not all text)."""
    return None if message.status == "error" else text(message.content)


def with_content(message: ToolMessage, content: str) -> ToolMessage:
    """The ToolMessage with its content replaced (an offload stub)."""
    return message.model_copy(update={"content": content})


def recall_id(call: ToolCall) -> str:
    """The offload id a recall tool call asks for."""
    return str(call.args.get("offload_id", ""))
