"""The truth matrix for symfonic-core's ``SymfonicAgent`` with ``instrument_symfonic``.

The chat model and the tools are the harness's recorders; the agent, its
react node, its policies, palette gates, tool node and offload gate are
symfonic's own. Every scenario ends with the shared :func:`disagreements`.

symfonic differs from the loop the harness was written for in a few ways
the comparison has to know (``check`` below; nothing else is relaxed):

it has no tool-selection stages, so no iteration has a
``seamscope.select_tools`` span, and :func:`check` drops exactly that one
line per model call (the harness has no option to skip selection).

Not here: symfonic's offload (decided only for results of earlier user
turns, re-decided on every iteration, stubbed on the wire only under a
``trm_`` memory id rather than the offload id) does not fit the harness's
offload contract of one gate call per output whose stub the framework keeps;
``tests/adapters/test_symfonic_truth.py`` checks its realized economics.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Annotated, Any

import pytest
import structlog
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import create_model
from symfonic.agent import SymfonicAgent
from symfonic.agent.config import FrameworkConfig
from symfonic.core.callbacks import BaseCallbackHandler
from symfonic.core.config import AgentConfig, ModelConfig
from symfonic.core.contracts import ToolCallPolicy

from seamscope.adapters.symfonic import instrument_symfonic
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Prices, Reply, Seen, disagreements, reply
from .test_reference_truth import Telemetry

pytestmark = [
    pytest.mark.filterwarnings("ignore:ContextBudget is deprecated:DeprecationWarning"),
]

OPUS = "claude-opus-4-6"  # the agent's default model
HAIKU = "claude-haiku-4-5"
# symfonic's MODEL_PRICING rows for these models (USD per token)
PRICES = Prices({OPUS: (5e-6, 25e-6), HAIKU: (1e-6, 5e-6)})
ROUTED = ("run_block", "fetch_data", "search", "lookup", "flaky")  # not archive_search
RECALL = "recall_tool_result"

# -- glue: symfonic's objects as neutral records ----------------------------------------------

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


def seen(message: BaseMessage | dict[str, Any]) -> Seen:
    """A LangChain message, or the dict symfonic's ``AgentResponse`` holds, as a record."""
    m = message if isinstance(message, dict) else message.model_dump()
    kind = m.get("type", "")
    calls = tuple(
        Call(tc.get("id") or "", tc["name"], tc.get("args")) for tc in m.get("tool_calls") or ()
    )
    return Seen(
        _ROLES.get(kind, kind),
        _text(m.get("content", "")),
        m.get("tool_call_id"),
        m.get("name"),
        m.get("status") if kind == "tool" else None,
        calls,
    )


class RecordingChat(BaseChatModel):
    """One chat-model instance: answers from the ground's script, logs the call."""

    model_name: str
    ground: Any
    bound: tuple[str, ...] = ()
    tool_choice: Any = None

    @property
    def _llm_type(self) -> str:
        return "truth"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = tuple(
            str(getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else t))
            for t in tools
        )
        return self.model_copy(update={"bound": names, "tool_choice": tool_choice})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        got = self.ground.model_call(
            self.model_name, self.bound, self.tool_choice, [seen(m) for m in messages]
        )
        message = AIMessage(
            content=got.text,
            tool_calls=[
                {"name": x.name, "args": x.args, "id": x.id, "type": "tool_call"} for x in got.calls
            ],
            usage_metadata={
                "input_tokens": got.usage[0],
                "output_tokens": got.usage[1],
                "total_tokens": sum(got.usage),
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


class Provider:
    """A symfonic ModelProvider: a new recording instance per ModelConfig asked for."""

    def __init__(self, ground: Ground) -> None:
        self.ground = ground

    def get_chat_model(self, cfg: ModelConfig) -> RecordingChat:
        return RecordingChat(model_name=cfg.model_name, ground=self.ground)

    def supports_thinking(self) -> bool:
        return False

    def supports_streaming(self) -> bool:
        return True

    def supports_forced_tool_choice(self, cfg: ModelConfig) -> bool:
        return True


def _flaky(args: Any) -> str:
    raise ConnectionError("archive offline")


BODIES: dict[str, tuple[Callable[[Any], str], dict[str, type]]] = {
    "run_block": (lambda a: f"ran {a['block']}", {"block": str}),
    "fetch_data": (lambda a: f"{a['rows']} rows of {a['source']}", {"source": str, "rows": int}),
    "search": (lambda a: f"hits for {a['query']}", {"query": str}),
    "archive_search": (lambda a: f"old hits for {a['query']}", {"query": str}),
    "lookup": (lambda a: f"found {a['key']}", {"key": str}),
    "flaky": (_flaky, {"reason": str}),
}


def _conversation_of_call(ground: Ground, call_id: str) -> str | None:
    """The conversation whose model emitted ``call_id`` (tools see only their call id)."""
    with ground._lock:
        for m in reversed(ground.model_calls):
            if any(x.id == call_id for x in m.reply.calls):
                return m.conversation
    return None


def sym_tools(ground: Ground) -> list[BaseTool]:
    out: list[BaseTool] = []
    for name, (body, params) in BODIES.items():

        def fn(
            tool_call_id: str, name: str = name, body: Callable[[Any], str] = body, **kw: Any
        ) -> str:
            return ground.run_tool(
                name, kw, tool_call_id, body, _conversation_of_call(ground, tool_call_id)
            )

        fields: dict[str, Any] = {k: (v, ...) for k, v in params.items()}
        fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
        schema = create_model(f"{name}_args", **fields)  # type: ignore[call-overload]
        out.append(
            StructuredTool.from_function(
                func=lambda tool_call_id, _fn=fn, **kw: _fn(tool_call_id, **kw),
                name=name,
                description=f"The {name} tool.",
                args_schema=schema,
            )
        )
    return out


def build(ground: Ground, **update: Any) -> SymfonicAgent:
    """symfonic's defaults, offline: the default model, no lazy tooling, no message cache."""
    cfg = FrameworkConfig.with_defaults().model_copy(
        update={
            "agent": AgentConfig(model=ModelConfig(model_name=OPUS)),
            "lazy_tooling": False,
            "messages_cache_policy": "off",
            "role_tools": {"action": frozenset(ROUTED)},
            **update,
        }
    )
    return SymfonicAgent(model_provider=Provider(ground), config=cfg, tools=sym_tools(ground))


async def turn(
    agent: SymfonicAgent,
    ground: Ground,
    conv: str,
    text: str,
    history: list[BaseMessage] | None = None,
    **kwargs: Any,
) -> list[BaseMessage]:
    """One ``agent.run`` of ``conv``; returns the conversation's messages after it."""
    history = list(history or [])
    response = await agent.run(text, history=history or None, **kwargs)
    held = messages_from_dict([{"type": m["type"], "data": m} for m in response.messages])
    ids = {m.id for m in held if m.id}
    messages = [m for m in history if not m.id or m.id not in ids]
    if not any(isinstance(m, HumanMessage) and _text(m.content) == text for m in held):
        messages.append(HumanMessage(text))
    messages += held
    ground.invoked(conv, [seen(m) for m in messages])
    return messages


# -- what the harness asks that symfonic does not have --------------------------------------

_NO_SELECTION = re.compile(r"^\S+ model call \d+: 0 select_tools spans$")


def check(ground: Ground, tel: Telemetry, logs: Any, **kwargs: Any) -> list[str]:
    kwargs.setdefault("prices", PRICES)
    found = disagreements(
        ground,
        tel.spans(),
        watch=tel.watch,
        metrics=tel.reader,
        logs=logs,
        recall_tool=RECALL,
        **kwargs,
    )
    return [d for d in found if not _NO_SELECTION.match(d)]


# -- several calls in one message: a redirect, a palette drop, an untouched call --------------


def is_sales(ctx: Any) -> bool:
    return any(
        isinstance(m, HumanMessage) and "sales" in _text(m.content).lower() for m in ctx.messages
    )


POLICIES = (
    ToolCallPolicy(
        name="sales_read",
        match=is_sales,
        model=ModelConfig(model_name=HAIKU),
        when_tool="run_block",
        redirect_to="fetch_data",
        args_transform=lambda args, ctx: {"source": args["block"], "rows": 5},
    ),
    # archive_search is registered, but not routed to the action role
    ToolCallPolicy(
        name="to_archive", match=lambda ctx: True, when_tool="search", redirect_to="archive_search"
    ),
)


def test_several_calls_in_one_message_redirected_dropped_and_untouched(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c1": [
                reply(
                    ("run_block", {"block": "sales_q3"}, "a1"),
                    ("search", {"query": "q3"}, "a2"),
                    ("lookup", {"key": "k"}, "a3"),
                ),
                reply(text="Q3 sales grew."),
            ]
        }
    )
    agent = build(ground, tool_call_policies=POLICIES)
    inst = instrument_symfonic(
        agent, tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider
    )

    async def scenario() -> None:
        async with agent:
            with inst.conversation("c1"):
                await turn(agent, ground, "c1", "c1: How did sales go?")

    asyncio.run(scenario())
    inst.uninstrument()

    assert [] == check(ground, tel, captured_logs)
    # what symfonic did: the redirect to a routed tool ran, the unrouted one was dropped
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )
    assert [HAIKU, HAIKU] == [m.model for m in ground.model_calls]


# -- failures ---------------------------------------------------------------------------------


def test_a_tool_that_raises_is_its_one_failed_execute_tool_span(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c5": [
                reply(("flaky", {"reason": "r"}, "e1"), ("lookup", {"key": "k"}, "e2")),
                reply(text="The archive is down."),
            ]
        }
    )
    agent = build(ground)
    inst = instrument_symfonic(
        agent, tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider
    )

    async def scenario() -> None:
        async with agent:
            with inst.conversation("c5"):
                await turn(agent, ground, "c5", "c5: read the archive")

    asyncio.run(scenario())
    inst.uninstrument()

    assert [] == check(ground, tel, captured_logs)
    assert [("flaky", "ConnectionError"), ("lookup", None)] == sorted(
        (r.name, r.raised) for r in ground.tool_runs
    )
    failed = [s.name for s in tel.spans() if (s.attributes or {}).get(c.ATTR_ERROR_TYPE)]
    assert ["execute_tool flaky"] == failed


class RaisingRewriter(BaseCallbackHandler):
    """The adopter's dispatch hook: raises on run_block, returns junk for search."""

    def __init__(self) -> None:
        self.did: list[tuple[str, str]] = []

    async def on_tool_call_dispatch(self, event: Any, state: Any) -> Any:
        if event.tool_name == "run_block":
            self.did.append((event.call_id, "raised"))
            raise PermissionError("acl service down")
        if event.tool_name == "search":
            self.did.append((event.call_id, "junk"))
            return "archive_search"
        return None


def test_an_adopter_dispatch_hook_that_raises_is_a_contained_error(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c6": [
                reply(
                    ("run_block", {"block": "b"}, "d1"),
                    ("search", {"query": "q"}, "d2"),
                    ("lookup", {"key": "k"}, "d3"),
                ),
                reply(text="done"),
            ]
        }
    )
    agent = build(ground)
    inst = instrument_symfonic(
        agent, tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider
    )
    hook = RaisingRewriter()

    async def scenario() -> None:
        async with agent:
            with inst.conversation("c6"):
                await turn(agent, ground, "c6", "c6: run it", callbacks=[hook])

    asyncio.run(scenario())
    inst.uninstrument()

    assert [] == check(ground, tel, captured_logs)
    # symfonic skipped the broken hook: every call dispatched as emitted
    assert [("d1", "raised"), ("d2", "junk")] == hook.did
    assert [("run_block", "d1"), ("search", "d2"), ("lookup", "d3")] == sorted(
        ((r.name, r.call_id) for r in ground.tool_runs), key=lambda x: x[1]
    )
    errors = {
        (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID): [
            (e.attributes or {}).get(c.ATTR_ERROR_TYPE)
            for e in s.events
            if e.name == c.EVENT_ADOPTER_ERROR
        ]
        for s in tel.spans()
        if s.name == c.SPAN_DISPATCH
    }
    assert {"d1": ["PermissionError"], "d2": ["TypeError"], "d3": []} == errors
    assert ["PermissionError", "TypeError"] == [
        e["error_type"] for e in captured_logs if e["event"] == c.LOG_ADOPTER_ERROR
    ]


# -- concurrency --------------------------------------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(16)]


def _script(conv: str) -> list[Reply]:
    return [
        reply(
            ("run_block", {"block": conv}, f"{conv}-1"),
            ("search", {"query": conv}, f"{conv}-2"),
        ),
        reply(("lookup", {"key": conv}, f"{conv}-3")),
        reply(text=f"{conv} done"),
    ]


def _text_of(conv: str) -> str:
    return f"{conv}: {'sales' if int(conv[1:]) % 3 == 0 else 'notes'} please"


def _normalized(ground: Ground) -> dict[str, Any]:
    return {k: re.sub(r"'id': '[^']*'", "", repr(v)) for k, v in ground.decisions().items()}


def test_sixteen_concurrent_conversations_decide_as_sequential_ones_each_in_its_trace() -> None:
    def run_all(ground: Ground, tel: Telemetry, concurrent: bool) -> None:
        agent = build(ground, tool_call_policies=POLICIES)
        inst = instrument_symfonic(
            agent, tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider
        )

        async def one(conv: str) -> None:
            with inst.conversation(conv):
                await turn(agent, ground, conv, _text_of(conv))

        async def main() -> None:
            async with agent:
                if concurrent:
                    await asyncio.gather(*(one(conv) for conv in CONVERSATIONS))
                else:
                    for conv in CONVERSATIONS:
                        await one(conv)

        asyncio.run(main())
        inst.uninstrument()

    sequential = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    with structlog.testing.capture_logs():
        run_all(sequential, Telemetry(), concurrent=False)
    threaded = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    tel = Telemetry()
    with structlog.testing.capture_logs() as logs:
        run_all(threaded, tel, concurrent=True)

    assert _normalized(sequential) == _normalized(threaded)
    assert [] == check(threaded, tel, logs)
    roots = [s for s in tel.spans() if s.name.startswith("invoke_agent")]
    assert 16 == len({s.context.trace_id for s in roots})
    for root in roots:
        conv = (root.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        mine = [s for s in tel.spans() if s.context.trace_id == root.context.trace_id]
        assert {conv} == {(s.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID) for s in mine}
