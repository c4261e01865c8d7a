"""The demo's LangChain conversation: real ``create_agent``, scripted chat models.

A triage agent with six tools runs inside LangChain's own agent loop, with
seamscope outermost and two of LangChain's decision middlewares watched by
it (:meth:`SeamscopeMiddleware.watching`):

* ``LLMToolSelectorMiddleware`` asks a scripted selector model (through
  ``with_structured_output``, as with a real provider) which tools fit the
  user's message, and keeps the first two: every model call is offered two
  of the six tools;
* ``ContextEditingMiddleware`` with ``ClearToolUsesEdit`` clears older tool
  results once the prompt passes 10 000 tokens, keeping the latest one
  (ticket ids are never cleared).

Three turns. The first pulls an hour of checkout logs (about 16 000
tokens). The second opens a ticket; the call after it carries the
placeholder instead of the logs (a compaction, priced like an offload:
that call's saving is realized), and the ticket needs the exact lines, so
the model reads the logs again with the same tool and arguments (a recall
of the compaction); the prompt cache, which held the conversation up to
the logs, must write them again. The third drafts a status line, with no
tool call. The compaction settles as a loss, on the ``context_editing``
mechanism: one call's saving against the re-read and the cache it broke.

seamscope's own offload gate is off for this agent (``offload=False``) so
that the clearing is LangChain's alone; the agent has no seamscope policies
or stages.

The chat model's usage is computed from the prompt it really receives (the
messages after every middleware's edits), as the reference scenario does:
input tokens are the characters / 4 of each message plus the system prompt
and tool schemas; the prompt cache reads the longest prefix of messages
identical to the previous call's in the conversation and writes the rest.

This module imports LangChain: the demo imports it only when the
``langchain`` extra is installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    LLMToolSelectorMiddleware,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.cli._scenario import SYSTEM_TOKENS, tool_output

__all__ = [
    "AGENT_NAME",
    "MODEL",
    "SELECTOR_MODEL",
    "TURNS",
    "LangChainConversation",
    "Script",
    "ScriptedLangChainModel",
    "Step",
    "TurnScript",
    "tools",
]

AGENT_NAME = "triage"
MODEL = "claude-sonnet-4-5"
SELECTOR_MODEL = "claude-haiku-4-5"
SYSTEM_PROMPT = "You triage production incidents for the checkout team."
PLACEHOLDER = "[cleared to save context: call the tool again to read it]"
CLEAR_TRIGGER_TOKENS = 10_000
MAX_TOOLS = 2
_SELECTION_TOOL = "ToolSelectionResponse"  # the schema's title in LLMToolSelectorMiddleware

LOGS_ARGS = {"service": "checkout", "since": "1h"}


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted model reply: a tool call (name + args) or a final answer."""

    tool: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True, slots=True)
class TurnScript:
    user: str
    ranked: tuple[str, ...]  # the selector model's answer, most relevant first
    steps: tuple[Step, ...]


TURNS: tuple[TurnScript, ...] = (
    TurnScript(
        user="Checkout is returning 502s. Pull the last hour of checkout error logs.",
        ranked=("get_logs", "search_docs", "create_ticket"),
        steps=(
            Step("get_logs", LOGS_ARGS),
            Step(text="The pay-eu gateway returned 502 on every call from 10:00 to 10:14."),
        ),
    ),
    TurnScript(
        user="Open a ticket for the payments team with the exact 502 log lines in it.",
        ranked=("create_ticket", "get_logs", "page_oncall"),
        steps=(
            Step("create_ticket", {"title": "pay-eu gateway returns 502 since 10:00"}),
            # the logs were cleared from this call's prompt: the model reads them again
            Step("get_logs", LOGS_ARGS),
            Step(text="TICKET-4242 is open for the payments team with the 900 502 lines."),
        ),
    ),
    TurnScript(
        user="Draft a one-line update for the status page.",
        ranked=("search_docs", "page_oncall"),
        steps=(Step(text="Card payments in the EU fail since 10:00; TICKET-4242 tracks the fix."),),
    ),
)


def _description(name: str) -> str:
    return {
        "get_logs": "Read a service's error logs for a time window.",
        "search_docs": "Search the runbooks and internal docs.",
        "create_ticket": "Open a ticket for a team.",
        "page_oncall": "Page a team's on-call engineer.",
        "fetch_data": "Read rows from a governed table.",
        "export_report": "Export a quarterly report.",
    }[name]


def tools() -> list[BaseTool]:
    """The triage agent's six tools (their outputs are the reference scenario's)."""

    def make(name: str, params: tuple[str, ...]) -> BaseTool:
        def run(**kwargs: Any) -> str:
            return tool_output(name, kwargs)

        schema = {
            "type": "object",
            "properties": {p: {"type": "string"} for p in params},
            "required": list(params),
        }
        return StructuredTool.from_function(
            func=run, name=name, description=_description(name), args_schema=schema
        )

    return [
        make("get_logs", ("service", "since")),
        make("search_docs", ("query",)),
        make("create_ticket", ("title",)),
        make("page_oncall", ("team",)),
        make("fetch_data", ("table",)),
        make("export_report", ("quarter",)),
    ]


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, default=str)


def _rendered(message: BaseMessage) -> str:
    calls = getattr(message, "tool_calls", None) or []
    return f"{message.type}:{getattr(message, 'name', None) or ''}:{_text(message)}:" + json.dumps(
        [(c["name"], c["args"]) for c in calls], sort_keys=True
    )


@dataclass
class Script:
    """The replies of both scripted models and the main model's cache, per conversation."""

    turns: Mapping[str, TurnScript]
    conversation: str = ""
    previous: dict[str, tuple[str, ...]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (model, tool or "final")

    def reply(self, model: str, messages: Sequence[BaseMessage], offered: list[str]) -> AIMessage:
        """The scripted reply; a scripted call of a tool the model was not offered
        is a mistake in the script (the selector must have kept it)."""
        if model == SELECTOR_MODEL:
            return self._selection(messages)
        last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        script = self.turns[_text(messages[last])]
        done = sum(1 for m in messages[last + 1 :] if isinstance(m, AIMessage))
        step = script.steps[min(done, len(script.steps) - 1)]
        usage = self._usage(messages, step)
        metadata = {"model_name": model}
        if step.tool is None:
            self.calls.append((model, "final"))
            return AIMessage(step.text, usage_metadata=usage, response_metadata=metadata)
        if step.tool not in offered:
            raise ValueError(f"the script calls {step.tool}, not offered ({offered})")
        self.calls.append((model, step.tool))
        # unique in the conversation and the same on every run, like a provider's ids
        seed = f"{self.conversation}:{len(messages)}".encode()
        call_id = f"call_{hashlib.sha256(seed).hexdigest()[:8]}"
        return AIMessage(
            "",
            tool_calls=[{"name": step.tool, "args": dict(step.args), "id": call_id}],
            usage_metadata=usage,
            response_metadata=metadata,
        )

    def _selection(self, messages: Sequence[BaseMessage]) -> AIMessage:
        user = next(_text(m) for m in reversed(messages) if isinstance(m, HumanMessage))
        ranked = list(self.turns[user].ranked)
        self.calls.append((SELECTOR_MODEL, "select"))
        prompt = sum(len(_text(m)) for m in messages) // 4
        return AIMessage(
            "",
            tool_calls=[{"name": _SELECTION_TOOL, "args": {"tools": ranked}, "id": "select"}],
            usage_metadata={
                "input_tokens": prompt,
                "output_tokens": 10 + 3 * len(ranked),
                "total_tokens": prompt + 10 + 3 * len(ranked),
            },
            response_metadata={"model_name": SELECTOR_MODEL},
        )

    def _usage(self, messages: Sequence[BaseMessage], step: Step) -> Any:
        rendered = tuple(_rendered(m) for m in messages if not isinstance(m, SystemMessage))
        previous = self.previous.get(self.conversation, ())
        common = 0
        for a, b in zip(previous, rendered, strict=False):
            if a != b:
                break
            common += 1
        self.previous[self.conversation] = rendered
        sizes = [len(r) // 4 for r in rendered]
        total = SYSTEM_TOKENS + sum(sizes)
        read = (SYSTEM_TOKENS if previous else 0) + sum(sizes[:common])
        text = step.text or json.dumps(dict(step.args), sort_keys=True)
        output = 20 + len(text) // 4
        return {
            "input_tokens": total,
            "output_tokens": output,
            "total_tokens": total + output,
            "input_token_details": {"cache_read": read, "cache_creation": total - read},
        }


class ScriptedLangChainModel(BaseChatModel):
    """A deterministic LangChain chat model: replies and usage from the demo's script.

    ``bind_tools`` keeps only the offered tools' names (the script decides
    the reply, and checks that it calls only a tool it was offered).
    """

    model_name: str
    script: Any  # the shared Script (typed Any so pydantic does not copy it)

    @property
    def _llm_type(self) -> str:
        return "seamscope-scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = [t.name if isinstance(t, BaseTool) else str(t.get("title", "")) for t in tools]
        return self.bind(offered=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self.script.reply(self.model_name, messages, kwargs.get("offered") or [])
        return ChatResult(generations=[ChatGeneration(message=message)])


class LangChainConversation:
    """The LangChain turns, run through real ``create_agent`` with seamscope watching.

    ``layer_options`` go to the agent's own
    :class:`~seamscope.loop.DecisionLayer` (the telemetry providers).
    """

    turns = TURNS

    def __init__(self, **layer_options: Any) -> None:
        self.layer = DecisionLayer(
            default_model=MODEL,
            agent_name=AGENT_NAME,
            provider_name="scripted",
            **layer_options,
        )
        self.script = Script({t.user: t for t in TURNS})
        model = ScriptedLangChainModel(model_name=MODEL, script=self.script)
        selector = ScriptedLangChainModel(model_name=SELECTOR_MODEL, script=self.script)
        seamscope = SeamscopeMiddleware(self.layer, offload=False)
        middleware = seamscope.watching(
            LLMToolSelectorMiddleware(model=selector, max_tools=MAX_TOOLS),
            ContextEditingMiddleware(
                edits=[
                    ClearToolUsesEdit(
                        trigger=CLEAR_TRIGGER_TOKENS,
                        keep=1,
                        exclude_tools=("create_ticket",),
                        placeholder=PLACEHOLDER,
                    )
                ]
            ),
        )
        self.agent = create_agent(
            model,
            tools(),
            system_prompt=SYSTEM_PROMPT,
            middleware=middleware,
            name=AGENT_NAME,
        )
        self._history: dict[str, list[BaseMessage]] = {}

    def run_turn(self, conversation: str, position: int) -> list[BaseMessage]:
        """Run the conversation's turn at ``position`` (0 starts it afresh); returns
        the conversation's messages after it, as the agent's state holds them."""
        history = self._history.get(conversation, []) if position else []
        self.script.conversation = conversation
        state: Any = {"messages": [*history, HumanMessage(TURNS[position].user)]}
        result = self.agent.invoke(state, config={"configurable": {"thread_id": conversation}})
        self._history[conversation] = list(result["messages"])
        return self._history[conversation]

    def end_conversation(self, conversation: str) -> None:
        self._history.pop(conversation, None)
        self.script.previous.pop(conversation, None)
        self.layer.end_conversation(conversation)
