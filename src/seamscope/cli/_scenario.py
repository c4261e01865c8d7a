"""The demo's scripted, deterministic scenario.

An analyst agent with a catalogue of 12 tools across roles, the reference
sales-data policy (cheap model + run_block → fetch_data, guarded on the
sales table), a role model resolver, a redirect whose target is not routed
(palette-gate drop), a policy whose predicate raises, an intent classifier
that times out (a degraded stage), a forced tool, all six selection stages,
and two large tool outputs: error logs that get recalled
twice and lose money (on gpt-4o), and an export that pays for its offload
(on the default model).

A conversation has four turns; longer runs start new conversations. The
chat model is scripted per turn and iteration; its token usage is computed
from the prompt it really receives, with a prompt cache that reads the
prefix it saw on the previous call and writes the rest, so offloads and
recalls move the cache the way a real provider's would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seamscope.decisions import (
    AllowlistStage,
    DispatchContext,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    Message,
    ModelConfig,
    ModelUsage,
    PolicyStage,
    RolePaletteStage,
    SelectionContext,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
    last_user_text,
    message_text,
)
from seamscope.loop import RECALL_TOOL, ChatRequest, ChatResponse

__all__ = [
    "AGENT_NAME",
    "DEFAULT_MODEL",
    "SYSTEM_TOKENS",
    "TURNS",
    "Scenario",
    "ScriptedChatModel",
    "build_scenario",
    "tool_output",
]

AGENT_NAME = "analyst"
DEFAULT_MODEL = "claude-opus-4-6"
CHEAP_MODEL = "claude-haiku-4-5"
RESOLVER_MODEL = "gpt-4o"
SYSTEM_TOKENS = 1_200  # system prompt + tool schemas, cached from the first call

CATALOG = ToolCatalog(
    [
        ToolSpec("hydrate_context", "read", 0.0, description="load the account context"),
        ToolSpec("search_docs", "read", 0.001, trigger_keywords=("docs", "how", "policy")),
        ToolSpec("fetch_data", "read", 0.002, trigger_keywords=("sales", "data", "revenue")),
        ToolSpec("run_block", "write", 0.004, trigger_keywords=("sales", "run", "compute")),
        ToolSpec("export_report", "read", 0.003, trigger_keywords=("report", "export")),
        ToolSpec("get_logs", "read", 0.001, trigger_keywords=("logs", "errors", "error")),
        ToolSpec("create_ticket", "write", 0.0, trigger_keywords=("ticket",)),
        ToolSpec("page_oncall", "write", 0.0, trigger_keywords=("page", "oncall")),
        ToolSpec("send_email", "write", 0.05, trigger_keywords=("email", "send")),
        ToolSpec("delete_rows", "destructive", 0.0, trigger_keywords=("delete", "purge", "sales")),
        ToolSpec("deploy_service", "destructive", 0.0, trigger_keywords=("deploy",)),
        ToolSpec("shell", "destructive", None, trigger_keywords=("shell",)),
    ]
)

ANALYST_PALETTE = (
    "hydrate_context",
    "search_docs",
    "fetch_data",
    "run_block",
    "export_report",
    "get_logs",
    "create_ticket",
    "send_email",
    "delete_rows",
    RECALL_TOOL,
)

# procedural routing: the incident procedure names the tools it may use
INCIDENT_PROCEDURE = ("get_logs", "create_ticket", "page_oncall", RECALL_TOOL)


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted model reply: a tool call (name + args) or a final answer."""

    tool: str | None = None
    args: Mapping[str, Any] | Callable[[ChatRequest], Mapping[str, Any]] | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class TurnScript:
    user: str
    intent: str  # action | knowledge | ambiguous
    steps: tuple[Step, ...]
    procedure: tuple[str, ...] | None = None
    force: str | None = None
    # the customer's tier from the CRM, put in the turn's scope; None: no record
    tier: str | None = "standard"


def _offload_id_for(tool: str) -> Callable[[ChatRequest], Mapping[str, Any]]:
    pattern = re.compile(r"\[offloaded ([\w-]+): \d+ tokens from " + re.escape(tool))

    def args(request: ChatRequest) -> Mapping[str, Any]:
        for message in request.messages:
            found = pattern.search(message_text(message))
            if found:
                return {"offload_id": found.group(1)}
        return {"offload_id": "missing"}

    return args


TURNS: tuple[TurnScript, ...] = (
    TurnScript(
        user="Pull Q3 sales by brand for the regional leads.",
        intent="action",
        tier=None,
        force="hydrate_context",
        steps=(
            Step("hydrate_context", {"account": "acme"}),
            Step("run_block", {"code": "SELECT brand, SUM(amount) FROM sales GROUP BY brand"}),
            Step(text="Q3 sales by brand: acme leads, globex second."),
        ),
    ),
    TurnScript(
        user=(
            "Checkout errors spiked after the deploy. Pull the error logs and open a "
            "ticket; no need to page oncall yet."
        ),
        intent="action",
        procedure=INCIDENT_PROCEDURE,
        steps=(
            Step("get_logs", {"service": "checkout", "since": "1h"}),
            Step(RECALL_TOOL, _offload_id_for("get_logs")),
            Step("create_ticket", {"title": "Checkout errors after deploy"}),
            Step(text="Ticket opened with the failing stack traces."),
        ),
    ),
    TurnScript(
        user="Quote the payment gateway errors from those logs, word for word.",
        intent="knowledge",
        steps=(
            Step(RECALL_TOOL, _offload_id_for("get_logs")),
            Step(text="The gateway returned 502 on every retry after 10:42."),
        ),
    ),
    TurnScript(
        user="Export the full quarterly report for the board.",
        intent="action",
        steps=(
            Step("export_report", {"quarter": "Q3", "format": "full"}),
            Step(text="The full quarterly report is exported."),
        ),
    ),
)


class ClassifierTimeout(TimeoutError):
    """The intent classifier did not answer in time (staged by the demo)."""


# error.type names an exception by its module: the demo's own reads as the demo's
ClassifierTimeout.__module__ = "demo"


def _classify(text: str) -> IntentVerdict:
    """A keyword intent classifier, as a verdict source for IntentRoutingStage.

    It times out on the board-report turn: the pipeline contains the raising
    stage as a degraded abstain, and the other stages still narrow.
    """
    if "board" in text.lower():
        raise ClassifierTimeout("intent classifier timed out after 2s")
    words = set(re.findall(r"[a-z]+", text.lower()))
    matched = [
        name
        for name, spec in CATALOG.items()
        if any(keyword in words for keyword in spec.trigger_keywords)
    ]
    for turn in TURNS:
        if turn.user.lower() == text.lower():
            return IntentVerdict(turn.intent, matched)
    return IntentVerdict("ambiguous")


def _turn_of(ctx: SelectionContext) -> TurnScript | None:
    text = ctx.user_text
    return next((t for t in TURNS if t.user == text), None)


def _resolver(ctx: DispatchContext) -> ModelConfig | None:
    # error triage goes to the model the on-call team standardised on
    return ModelConfig(RESOLVER_MODEL) if "errors" in ctx.user_text.lower() else None


def _vip_match(ctx: DispatchContext) -> bool:
    # turn 1's customer has no CRM record, so its scope has no tier: this raises
    # KeyError there, and the seam contains it (what the demo shows on that turn)
    return bool(ctx.scope["tier"] == "vip")


POLICIES: tuple[ToolCallPolicy, ...] = (
    ToolCallPolicy(
        name="vip_customer",
        match=_vip_match,
        model=ModelConfig("claude-sonnet-4-5"),
    ),
    ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: "sales" in ctx.user_text.lower(),
        model=ModelConfig(CHEAP_MODEL),
        when_tool="run_block",
        redirect_to="fetch_data",
        guard=lambda ctx: "brand_sales" in ctx.scope.get("tables", ()),
        args_transform=lambda args, ctx: {"table": "brand_sales"},
    ),
    ToolCallPolicy(
        name="escalate_incidents",
        match=lambda ctx: "spiked" in ctx.user_text.lower(),
        when_tool="create_ticket",
        redirect_to="page_oncall",
    ),
)


def _forced(ctx: SelectionContext) -> str | None:
    turn = _turn_of(ctx)
    return None if turn is None else turn.force


def _procedure(ctx: SelectionContext) -> tuple[str, ...] | None:
    turn = _turn_of(ctx)
    return None if turn is None else turn.procedure


def _stages() -> list[Any]:
    return [
        ForcedChoiceStage(resolver=_forced),
        IntentRoutingStage(
            verdict=lambda ctx: _classify(ctx.user_text),
            trigger_keywords=CATALOG.trigger_keywords(),
            always_include=("search_docs", RECALL_TOOL),
        ),
        LazyRoutingStage(allowed_names=_procedure),
        RolePaletteStage(resolver=lambda role: ANALYST_PALETTE if role == "analyst" else None),
        PolicyStage(catalog=CATALOG, max_safety_level="write", budget_usd=0.01),
        AllowlistStage(always_include=("hydrate_context",), catalog=CATALOG),
    ]


def tool_output(name: str, args: Mapping[str, Any]) -> str:
    if name == "export_report":
        rows = [f"brand-{i:03d},Q3,{1000 + i * 37}.00,{(i * 7) % 100}%" for i in range(2_600)]
        return "brand,quarter,revenue,share\n" + "\n".join(rows)  # ~78 000 chars
    if name == "get_logs":
        lines = [
            f"2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d}Z ERROR checkout gateway=pay-eu "
            f"status=502 retry={i % 3}"
            for i in range(900)
        ]
        return "\n".join(lines)  # ~64 000 chars
    if name == "fetch_data":
        return "brand,revenue\nacme,1200000\nglobex,950000\ninitech,780000"
    if name == "hydrate_context":
        return "account=acme tier=standard region=eu"
    if name == "create_ticket":
        return "TICKET-4242 created"
    if name == "page_oncall":
        return "paged the checkout on-call"
    return f"{name}: ok"


def _tools() -> dict[str, Callable[[Mapping[str, Any]], str]]:
    def make(name: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda args: tool_output(name, args)

    return {name: make(name) for name in CATALOG}


class ScriptedChatModel:
    """A deterministic chat model: replies from the turn script, usage from the prompt.

    Usage: input tokens are the prompt's characters / 4 plus the system
    prompt; the cache reads the longest prefix of messages identical to the
    previous call's prompt (per conversation) and writes the rest.
    """

    def __init__(self, turns: Sequence[TurnScript] = TURNS) -> None:
        self._turns = {t.user: t for t in turns}
        self._previous: dict[str, tuple[str, ...]] = {}
        self.calls: list[tuple[str, str]] = []  # (model, emitted tool or "final")

    def __call__(self, request: ChatRequest) -> ChatResponse:
        user = last_user_text(request.messages)
        script = self._turns[user]
        step = script.steps[min(request.iteration, len(script.steps) - 1)]
        if request.tool_choice and request.iteration == 0 and step.tool != request.tool_choice:
            step = Step(request.tool_choice, {})
        usage = self._usage(request, step)
        if step.tool is None:
            self.calls.append((request.model.model_name, "final"))
            return ChatResponse(Message("assistant", step.text), usage, request.model.model_name)
        args = step.args(request) if callable(step.args) else dict(step.args or {})
        call_id = f"call_{request.conversation_id}_{len(request.messages)}"
        self.calls.append((request.model.model_name, step.tool))
        return ChatResponse(
            Message("assistant", "", (ToolCall(call_id, step.tool, args),)),
            usage,
            request.model.model_name,
        )

    def _usage(self, request: ChatRequest, step: Step) -> ModelUsage:
        rendered = tuple(
            f"{m.role}:{m.name or ''}:{message_text(m)}:"
            + json.dumps([(c.name, dict(c.args)) for c in m.tool_calls], sort_keys=True)
            for m in request.messages
        )
        key = request.conversation_id or ""
        previous = self._previous.get(key, ())
        common = 0
        for a, b in zip(previous, rendered, strict=False):
            if a != b:
                break
            common += 1
        self._previous[key] = rendered
        sizes = [len(r) // 4 for r in rendered]
        cached_prefix = sum(sizes[:common])
        total = SYSTEM_TOKENS + sum(sizes)
        read = (SYSTEM_TOKENS if previous else 0) + cached_prefix
        write = total - read
        text = step.text or json.dumps(step.args if isinstance(step.args, Mapping) else {})
        return ModelUsage(total, 20 + len(text) // 4, read, write)


@dataclass(frozen=True, slots=True)
class Scenario:
    policies: tuple[ToolCallPolicy, ...]
    stages: list[Any]
    catalog: ToolCatalog
    tools: dict[str, Callable[[Mapping[str, Any]], str]]
    chat: ScriptedChatModel
    turns: tuple[TurnScript, ...]
    scope: Mapping[str, Any]
    role: str = AGENT_NAME

    @property
    def role_model_resolver(self) -> Callable[[DispatchContext], ModelConfig | None]:
        return _resolver


def build_scenario() -> Scenario:
    """A fresh scenario (its scripted model keeps per-conversation cache state)."""
    return Scenario(
        policies=POLICIES,
        stages=_stages(),
        catalog=CATALOG,
        tools=_tools(),
        chat=ScriptedChatModel(),
        turns=TURNS,
        scope={"tables": ("brand_sales", "orders")},
    )
