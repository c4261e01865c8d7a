"""What a LangChain decision middleware decided, read from its effect: small pure functions.

Two families, both pure (no OpenTelemetry, no state, nothing mutated):

* effect readers compare what a middleware received with what it passed
  inward or returned: the tools of a model request before and after it
  (:func:`narrowing`), the tool results it replaced (:func:`cleared_results`),
  the messages a summary replaced (:func:`summarized`), the calls it answered
  with an error instead of running them (:func:`blocked_calls`,
  :func:`blocked_call`), the tool results Deep Agents' filesystem evicted
  to its backend (:func:`evicted_results`), the evicted files a later tool
  call reads (:func:`reads_path`);
* one reason translator per middleware turns that effect and the
  middleware's configuration into the sentence a trace shows
  (``seamscope.middleware.reason``). A middleware's configuration is read
  with ``getattr`` and a default: these are public attributes of the
  pinned LangChain (1.5), not a documented contract, so a missing one
  shortens the sentence instead of failing.

Reasons name tools, models, limits and sizes, never message text or tool
arguments: they are recorded whatever the content-capture setting. The one
text taken as is is what a middleware itself wrote for the model (a limit's
or a risk check's error message), which holds no user content.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seamscope.adapters._kit import estimate_tokens
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import (
    REMOVE_ALL_MESSAGES,
    AIMessage,
    BaseTool,
    Command,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from seamscope.decisions import ToolCall
from seamscope.decisions.records import tool_name

__all__ = [
    "Blocked",
    "Cleared",
    "Evicted",
    "Narrowing",
    "Summary",
    "auto_mode_reason",
    "blocked_call",
    "blocked_calls",
    "blocked_reason",
    "cleared_results",
    "context_editing_reason",
    "eviction_path",
    "eviction_reason",
    "evicted_messages",
    "evicted_results",
    "model_fallback_reason",
    "model_route_reason",
    "narrowing",
    "narrowing_reason",
    "reads_path",
    "route_answer",
    "summarization_reason",
    "summarized",
    "summary_text",
    "tool_call_limit_reason",
    "tool_names",
    "tool_search_reason",
    "tool_selection_reason",
]

# -- names -------------------------------------------------------------------------


def _tool_label(tool: Any) -> str:
    """A tool's name; a provider tool dict without one by its ``type``."""
    name = tool_name(tool)
    if name is None and isinstance(tool, Mapping) and isinstance(tool.get("type"), str):
        name = tool["type"]
    return name if isinstance(name, str) else "?"


def tool_names(tools: Sequence[Any]) -> tuple[str, ...]:
    """The names of a request's tools, in order."""
    return tuple(_tool_label(tool) for tool in tools)


def _deferred(tool: Any) -> bool:
    extras = getattr(tool, "extras", None) if isinstance(tool, BaseTool) else None
    return isinstance(extras, Mapping) and extras.get("defer_loading") is True


# -- tools: selection and provider search --------------------------------------------


@dataclass(frozen=True, slots=True)
class Narrowing:
    """The tools a middleware passed inward instead of the ones it received.

    ``before``/``after``: tool names in order. ``deferred``: tools it marked
    for the provider's tool search (loaded only when the model asks), which
    ``after`` leaves out; ``search``: the provider search tools it added.
    """

    before: tuple[str, ...]
    after: tuple[str, ...]
    deferred: tuple[str, ...] = ()
    search: tuple[str, ...] = ()

    @property
    def search_kind(self) -> bool:
        """Whether this is a provider tool search rather than a selection."""
        return bool(self.deferred or self.search)


def narrowing(before: Sequence[Any], after: Sequence[Any]) -> Narrowing | None:
    """How the tools changed between the request received and the one passed
    inward (None: the same tool names, no tool search added)."""
    names_before = tool_names(before)
    known = set(names_before)
    was_deferred = {_tool_label(t) for t in before if _deferred(t)}
    deferred = tuple(_tool_label(t) for t in after if _deferred(t))
    added = tuple(
        _tool_label(t) for t in after if isinstance(t, Mapping) and _tool_label(t) not in known
    )
    if deferred and (added or set(deferred) - was_deferred):
        kept = tuple(_tool_label(t) for t in after if not _deferred(t))
        return Narrowing(names_before, kept, deferred, added)
    names_after = tool_names(after)
    if names_after == names_before:
        return None
    return Narrowing(names_before, names_after)


def tool_selection_reason(middleware: Any, change: Narrowing) -> str:
    """LLMToolSelectorMiddleware: how many tools its model kept, and the limits
    it applies (``max_tools``, ``always_include``)."""
    reason = f"selected {len(change.after)} of {len(change.before)} tools"
    limits: list[str] = []
    max_tools = getattr(middleware, "max_tools", None)
    if isinstance(max_tools, int):
        limits.append(f"max_tools={max_tools}")
    always = getattr(middleware, "always_include", None)
    if isinstance(always, Sequence) and not isinstance(always, str) and always:
        limits.append("always included: " + ", ".join(str(n) for n in always))
    return f"{reason} ({'; '.join(limits)})" if limits else reason


def tool_search_reason(middleware: Any, change: Narrowing) -> str:
    """ProviderToolSearchMiddleware: the tools it deferred behind the provider's
    search tool (the search itself runs at the provider)."""
    search = ", ".join(change.search) or "the provider's search tool"
    return (
        f"deferred {len(change.deferred)} of {len(change.before)} tools behind {search}; "
        "the provider loads a deferred tool only when its search finds it"
    )


def narrowing_reason(middleware: Any, change: Narrowing) -> str:
    """The reason of a tool narrowing by whichever middleware made it."""
    if change.search_kind:
        return tool_search_reason(middleware, change)
    if hasattr(middleware, "max_tools") or hasattr(middleware, "always_include"):
        return tool_selection_reason(middleware, change)
    dropped = len([n for n in change.before if n not in set(change.after)])
    return f"passed {len(change.after)} of {len(change.before)} tools inward (-{dropped})"


# -- models: routing and fallback ------------------------------------------------------


def route_answer(state: Any) -> tuple[str, float | None] | None:
    """ModelRouterMiddleware's answer in the agent state: (label, confidence)."""
    answer = state.get("model_route") if isinstance(state, Mapping) else None
    label = getattr(answer, "choice", None)
    if not isinstance(label, str):
        return None
    confidence = getattr(answer, "confidence", None)
    return label, float(confidence) if isinstance(confidence, int | float) else None


def model_route_reason(
    middleware: Any, answer: tuple[str, float | None] | None, model: str | None
) -> str:
    """ModelRouterMiddleware: the route its decision model chose and the model
    the request went to."""
    target = model or "?"
    if answer is None:
        return f"routed to {target}"
    label, confidence = answer
    sure = "" if confidence is None else f" (confidence {confidence:.2f})"
    return f"route {label!r}{sure} -> {target}"


def model_fallback_reason(failed: Sequence[tuple[str, str]], answered: str | None) -> str:
    """ModelFallbackMiddleware: each model that failed (error type), and the one
    that answered."""
    failures = ", ".join(f"{model} failed ({error})" for model, error in failed)
    if answered is None:
        return f"{failures}; no model answered"
    return f"{failures}; {answered} answered"


# -- blocked tool calls ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Blocked:
    """A tool call a middleware answered with an error instead of running it."""

    call: ToolCall
    text: str


def _last_ai(messages: Sequence[Any]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def blocked_calls(messages: Sequence[Any], update: Any) -> list[Blocked]:
    """The calls of the last AIMessage that an ``after_model`` update answers
    with an error ToolMessage (ToolCallLimitMiddleware): they never run."""
    injected = update.get("messages") if isinstance(update, Mapping) else None
    last = _last_ai(messages)
    if not isinstance(injected, Sequence) or last is None or not last.tool_calls:
        return []
    calls = {str(call.get("id")): call for call in last.tool_calls if call.get("id")}
    out: list[Blocked] = []
    for message in injected:
        if (
            isinstance(message, ToolMessage)
            and message.status == "error"
            and message.tool_call_id in calls
        ):
            text = translate.text(message.content) or ""
            out.append(Blocked(translate.tool_call(calls[message.tool_call_id]), text))
    return out


def blocked_call(raw_call: Mapping[str, Any], result: Any, handler_called: bool) -> Blocked | None:
    """A ``wrap_tool_call`` that answered with an error and never called the
    tool's handler (AutoModeMiddleware) blocked the call."""
    if handler_called or not isinstance(result, ToolMessage) or result.status != "error":
        return None
    return Blocked(translate.tool_call(raw_call), translate.text(result.content) or "")


def _limits_hit(middleware: Any, blocked: Sequence[Blocked], state: Any) -> list[str]:
    """Which of a ToolCallLimitMiddleware's limits the blocked calls hit, with
    the counts its own final message uses (the calls of this run / thread
    had the blocked ones run): ``["run_limit=2 (3/2 calls)"]``. Read from
    its public state keys (``thread_tool_call_count``/``run_tool_call_count``)
    before the update; empty when they cannot be read."""
    if not isinstance(state, Mapping):
        return []
    tool = getattr(middleware, "tool_name", None)
    key = tool if isinstance(tool, str) and tool else "__all__"
    last = _last_ai(state.get("messages") or [])
    if last is None:
        return []
    attempted = sum(1 for c in last.tool_calls if key == "__all__" or c.get("name") == key)
    hit: list[str] = []
    for field, counts in (
        ("thread_limit", "thread_tool_call_count"),
        ("run_limit", "run_tool_call_count"),
    ):
        limit = getattr(middleware, field, None)
        before = state.get(counts) or {}
        count = (before.get(key, 0) if isinstance(before, Mapping) else 0) + attempted
        if isinstance(limit, int) and isinstance(count, int) and count > limit:
            hit.append(f"{field}={limit} reached ({count}/{limit} calls)")
    return hit if blocked else []


def tool_call_limit_reason(middleware: Any, blocked: Sequence[Blocked], state: Any = None) -> str:
    """ToolCallLimitMiddleware: the limit that was hit (thread or run, both when
    both were), for which tool, and what it told the model; the configured
    limits when the state does not say which was hit."""
    hit = _limits_hit(middleware, blocked, state)
    limits = [
        f"{field}={value}"
        for field in ("thread_limit", "run_limit")
        if isinstance(value := getattr(middleware, field, None), int)
    ]
    tool = getattr(middleware, "tool_name", None)
    scope = f"tool {tool!r}" if isinstance(tool, str) and tool else "all tools"
    exit_behavior = getattr(middleware, "exit_behavior", None)
    behavior = f" (exit_behavior={exit_behavior})" if isinstance(exit_behavior, str) else ""
    said = f": {blocked[0].text}" if blocked and blocked[0].text else ""
    limit = " and ".join(hit) if hit else " ".join(limits or ["limit"]) + " reached"
    return f"{limit} for {scope}{behavior}, {len(blocked)} call(s) not run{said}"


_RISKY = re.compile(r"classified as risky \(probability: [0-9.]+\)")


def auto_mode_reason(text: str) -> str:
    """AutoModeMiddleware: its risk verdict, as its error message states it."""
    found = _RISKY.search(text)
    return found.group(0) if found else text


def blocked_reason(middleware: Any, blocked: Sequence[Blocked], state: Any = None) -> str:
    """The reason of a block by whichever middleware made it. The error text is
    quoted only for LangChain's own limit and risk check (texts they write,
    naming only the tool); another middleware's text could hold content."""
    if hasattr(middleware, "run_limit") or hasattr(middleware, "thread_limit"):
        return tool_call_limit_reason(middleware, blocked, state)
    if hasattr(middleware, "classifier") and blocked:
        return auto_mode_reason(blocked[0].text)
    return f"{len(blocked)} call(s) answered with an error instead of running"


# -- context editing --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cleared:
    """A tool result a middleware replaced in the request it passed inward.

    ``tool``/``args``: the call that produced it (as the model emitted it);
    ``removed_tokens``: the original text's tokens (chars / 4);
    ``placeholder``: the text the model received instead.
    """

    tool_call_id: str
    tool: str
    args: Mapping[str, Any]
    removed_tokens: float
    placeholder: str


def _calls_by_id(messages: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    found[str(call["id"])] = call
    return found


def cleared_results(before: Sequence[Any], after: Sequence[Any]) -> list[Cleared]:
    """The tool results whose text differs between the messages a middleware
    received and the ones it passed inward (ContextEditingMiddleware)."""
    original: dict[str, str] = {}
    for message in before:
        if isinstance(message, ToolMessage):
            body = translate.text(message.content)
            if body is not None:
                original[message.tool_call_id] = body
    calls = _calls_by_id(before)
    out: list[Cleared] = []
    for message in after:
        if not isinstance(message, ToolMessage) or message.tool_call_id not in original:
            continue
        body = translate.text(message.content)
        was = original[message.tool_call_id]
        if body is None or body == was:
            continue
        call = calls.get(message.tool_call_id, {})
        name = message.name or call.get("name") or "?"
        args = call.get("args")
        out.append(
            Cleared(
                message.tool_call_id,
                str(name),
                dict(args) if isinstance(args, Mapping) else {},
                estimate_tokens(was),
                body,
            )
        )
    return out


def _edit(edit: Any) -> str:
    name = type(edit).__name__
    fields = [
        f"{field}={value}"
        for field in ("trigger", "keep", "clear_at_least")
        if isinstance(value := getattr(edit, field, None), int) and value
    ]
    return f"{name}({', '.join(fields)})"


def context_editing_reason(middleware: Any, cleared: Cleared) -> str:
    """ContextEditingMiddleware: the edit that fired (its trigger and keep) and
    the result it cleared."""
    edits = getattr(middleware, "edits", None)
    described = (
        " + ".join(_edit(e) for e in edits)
        if isinstance(edits, Sequence) and edits
        else "context edit"
    )
    return (
        f"{described} cleared the result of {cleared.tool} "
        f"({cleared.removed_tokens:g} tokens) from the prompt"
    )


# -- Deep Agents' evictions --------------------------------------------------------------

_EVICTION_NOTICE = re.compile(
    r"\ATool result too large, the result of this tool call .*? was saved in the "
    r"filesystem at this path: (?P<path>[^\n]+)\n"
)
"""The first line of the text Deep Agents' ``FilesystemMiddleware`` puts in place
of a tool result it evicted (``_TOO_LARGE_TOOL_MSG`` of deepagents 0.7, its
legacy form too): the path the full text was written to."""

_MESSAGE_NOTICE = re.compile(
    r"\AMessage content too large and was saved to the filesystem at: (?P<path>[^\n]+)\n"
)
"""The first line of the text Deep Agents' ``FilesystemMiddleware`` sends in place
of a user message it evicted (``_TOO_LARGE_HUMAN_MSG`` of deepagents 0.7): the
path the full text was written to."""


@dataclass(frozen=True, slots=True)
class Evicted:
    """A tool result a middleware wrote to a file and replaced by a preview.

    ``tool``: the tool that produced it; ``path``: the file that holds the
    full text (as the preview names it); ``removed_tokens``: the full text's
    tokens (chars / 4); ``preview``: the text the state holds instead.
    ``message``: a user message, not a tool result (``tool_call_id`` is
    then the message's id, ``tool`` empty, and the preview is what each
    model request holds; the state keeps the whole message).
    """

    tool_call_id: str
    tool: str
    path: str
    removed_tokens: float
    preview: str
    message: bool = False


def eviction_path(text: str) -> str | None:
    """The file an eviction notice (of a tool result or of a user message)
    names (None: ``text`` is not one)."""
    notice = _EVICTION_NOTICE.match(text) or _MESSAGE_NOTICE.match(text)
    return None if notice is None else notice.group("path").strip()


def evicted_messages(before: Sequence[Any], after: Sequence[Any]) -> list[Evicted]:
    """The user messages a ``wrap_model_call`` passed inward as Deep Agents'
    eviction notice (``FilesystemMiddleware`` wrote a large one to its
    backend, tagged it ``lc_evicted_to`` in the state and sends a preview in
    every model request): ``before`` is what it received, ``after`` what it
    passed inward; messages are matched by id."""
    original: dict[str, str] = {}
    for message in before:
        if isinstance(message, HumanMessage) and message.id:
            body = translate.text(message.content)
            if body is not None:
                original[message.id] = body
    out: list[Evicted] = []
    for message in after:
        if not isinstance(message, HumanMessage) or not message.id:
            continue
        was = original.get(message.id)
        body = translate.text(message.content)
        if was is None or body is None or body == was:
            continue
        notice = _MESSAGE_NOTICE.match(body)
        if notice is None:
            continue
        out.append(
            Evicted(message.id, "", notice.group("path").strip(), estimate_tokens(was), body, True)
        )
    return out


def _tool_messages(result: Any) -> list[ToolMessage]:
    """The ToolMessages of a tool call's result: itself, or a ``Command``'s update's."""
    if isinstance(result, ToolMessage):
        return [result]
    update = result.update if isinstance(result, Command) else None
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return []
    return [m for m in messages if isinstance(m, ToolMessage)]


def evicted_results(received: Any, returned: Any, tool: str) -> list[Evicted]:
    """The text tool results a ``wrap_tool_call`` replaced by Deep Agents'
    eviction notice (``FilesystemMiddleware``): ``received`` is what its
    handler returned, ``returned`` what it returned, ``tool`` the called
    tool's name (a message's own name first)."""
    original: dict[str, str] = {}
    for message in _tool_messages(received):
        body = translate.text(message.content)
        if body is not None:
            original[message.tool_call_id] = body
    out: list[Evicted] = []
    for message in _tool_messages(returned):
        was = original.get(message.tool_call_id)
        body = translate.text(message.content)
        if was is None or body is None or body == was:
            continue
        notice = _EVICTION_NOTICE.match(body)
        if notice is None:
            continue
        out.append(
            Evicted(
                message.tool_call_id,
                message.name or tool,
                notice.group("path").strip(),
                estimate_tokens(was),
                body,
            )
        )
    return out


def eviction_reason(middleware: Any, evicted: Evicted) -> str:
    """FilesystemMiddleware: the limit the result passed (its
    ``tool_token_limit_before_evict``, or ``human_message_token_limit_before_evict``
    for a user message, when it can be read) and where the full text went."""
    if evicted.message:
        limit = getattr(middleware, "_human_message_token_limit_before_evict", None)
        over = (
            f"over human_message_token_limit_before_evict={limit}: "
            if isinstance(limit, int)
            else ""
        )
        return (
            f"{over}a user message ({evicted.removed_tokens:g} tokens) was written to "
            f"{evicted.path} and replaced by a preview in each model request"
        )
    limit = getattr(middleware, "_tool_token_limit_before_evict", None)
    over = f"over tool_token_limit_before_evict={limit}: " if isinstance(limit, int) else ""
    return (
        f"{over}the result of {evicted.tool} ({evicted.removed_tokens:g} tokens) was "
        f"written to {evicted.path} and replaced by a preview"
    )


_PATH_END = r"(?![\w.\-/])"
_NOT_READS = frozenset(("ls", "glob", "write_file", "edit_file", "delete"))


def reads_path(tool: str, args: Mapping[str, Any], text: str | None, path: str) -> bool:
    """Whether a tool call reads the file at ``path``: one of its arguments
    names it (``read_file``'s ``file_path``, whole or a slice; a ``grep`` of
    that file; a shell command), or it is a ``grep`` whose output names it
    (a search of the directory that found lines in it). A listing (``ls``,
    ``glob``) names files without reading them, and a write, an edit or a
    delete brings none of the text back: not a read."""
    if tool in _NOT_READS:
        return False
    named = re.compile(re.escape(path) + _PATH_END)
    for value in args.values():
        if isinstance(value, str) and named.search(value):
            return True
    return tool == "grep" and text is not None and named.search(text) is not None


# -- summarization ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """Messages a ``before_model`` update replaced by a summary message.

    ``removed_tokens`` is the removed messages' text (chars / 4; tool-call
    arguments are not counted), ``summary`` the summary message's text.
    """

    messages_removed: int
    removed_tokens: float
    summary: str
    kept: int


def summary_text(message: Any) -> str | None:
    """The text of a summary message SummarizationMiddleware wrote (None for
    any other message)."""
    if not translate.is_summary(message):
        return None
    return translate.text(getattr(message, "content", None))


def summarized(messages: Sequence[Any], update: Any) -> Summary | None:
    """The summary a ``before_model`` update writes: it removes every message
    (``RemoveMessage(REMOVE_ALL_MESSAGES)``) and puts back a summary and the
    preserved messages (None for any other update)."""
    new = update.get("messages") if isinstance(update, Mapping) else None
    if not isinstance(new, Sequence) or not new:
        return None
    first = new[0]
    if not isinstance(first, RemoveMessage) or first.id != REMOVE_ALL_MESSAGES:
        return None
    rest = list(new[1:])
    summaries = [text for text in (summary_text(m) for m in rest) if text is not None]
    if not summaries:
        return None
    kept_ids = {m.id for m in rest if getattr(m, "id", None)}
    removed = [m for m in messages if getattr(m, "id", None) not in kept_ids]
    chars = sum(len(translate.text(getattr(m, "content", "")) or "") for m in removed)
    return Summary(len(removed), chars / 4, summaries[0], len(messages) - len(removed))


def summarization_reason(middleware: Any, summary: Summary) -> str:
    """SummarizationMiddleware: its trigger, and how many messages one summary
    replaced (its ``keep``)."""
    trigger = getattr(middleware, "trigger", None)
    keep = getattr(middleware, "keep", None)
    reason = f"{summary.messages_removed} messages summarized into one"
    if trigger is not None:
        reason = f"trigger {trigger!r} reached: {reason}"
    if keep is not None:
        reason += f" (keep {keep!r}: {summary.kept} kept)"
    return reason
