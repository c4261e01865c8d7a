"""The truth matrix for LangChain v1 ``create_agent`` with ``SeamscopeMiddleware``.

The chat model and the tools are the harness's recorders; the agent loop,
the middleware chain, the tool node, structured output and the checkpointer
are LangChain's own.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import structlog
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
    ToolErrorMiddleware,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain.tools import ToolRuntime
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from seamscope.adapters import RECALL_TOOL
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.decisions import OffloadLedger, ToolCallPolicy
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Reply, Seen, conversation_of, disagreements, reply
from .test_reference_truth import (
    BIG,
    HAIKU,
    OPUS,
    PRICES,
    PRICING,
    Telemetry,
    make_layer,
)

# -- glue: LangChain's objects as neutral records ------------------------------------------

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


def seen(message: BaseMessage) -> Seen:
    calls = tuple(
        Call(tc.get("id") or "", tc["name"], tc.get("args"))
        for tc in getattr(message, "tool_calls", ())
    )
    return Seen(
        _ROLES.get(message.type, message.type),
        _text(message.content),
        getattr(message, "tool_call_id", None),
        getattr(message, "name", None),
        getattr(message, "status", None) if message.type == "tool" else None,
        calls,
    )


class RecordingModel(BaseChatModel):
    """A chat model instance that answers from the ground's script and logs the call."""

    model_name: str
    ground: Any

    @property
    def _llm_type(self) -> str:
        return "truth"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = [
            t.name
            if isinstance(t, BaseTool)
            else (t.get("name") or t.get("function", {}).get("name"))
            for t in tools
        ]
        return self.bind(truth_tools=names, tool_choice=tool_choice, **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        got = self.ground.model_call(
            self.model_name,
            kwargs.get("truth_tools") or [],
            kwargs.get("tool_choice"),
            [seen(m) for m in messages],
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
            response_metadata={"model_name": self.model_name},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def models(ground: Ground, names: Sequence[str] = (OPUS, HAIKU)) -> dict[str, RecordingModel]:
    return {name: RecordingModel(model_name=name, ground=ground) for name in names}


def _recorded(ground: Ground, name: str, body: Callable[..., str], doc: str) -> Callable[..., str]:
    def run(runtime: ToolRuntime, **kwargs: Any) -> str:
        conversation = None
        for message in runtime.state.get("messages", []):
            if message.type == "human" and ":" in _text(message.content):
                conversation = _text(message.content).split(":", 1)[0]
                break
        return ground.run_tool(
            name, kwargs, runtime.tool_call_id, lambda a: body(**a), conversation
        )

    return run


def lc_tools(ground: Ground) -> list[BaseTool]:
    def flaky(reason: str = "") -> str:
        raise ConnectionError("archive offline")

    def refused(reason: str = "") -> str:
        raise ToolException("the warehouse refused the query")

    specs: list[tuple[str, Callable[..., str], str, dict[str, Any], bool]] = [
        ("run_block", lambda block: f"ran {block}", "Run a saved block.", {"block": str}, False),
        (
            "fetch_data",
            lambda source, rows=10: f"{rows} rows of {source}",
            "Read rows.",
            {"source": str, "rows": int},
            False,
        ),
        ("search", lambda query: f"hits for {query}", "Search the archive.", {"query": str}, False),
        (
            "archive_search",
            lambda query: f"old hits for {query}",
            "Search old archives.",
            {"query": str},
            False,
        ),
        ("big_report", lambda topic="": BIG, "The full report.", {"topic": str}, False),
        ("lookup", lambda key: f"found {key}", "Look a key up.", {"key": str}, False),
        (
            "flaky",
            lambda reason="": flaky(reason),
            "An archive that is down.",
            {"reason": str},
            False,
        ),
        (
            "refused",
            lambda reason="": refused(reason),
            "A query the warehouse refuses.",
            {"reason": str},
            True,
        ),
    ]
    out: list[BaseTool] = []
    for name, body, doc, params, handled in specs:
        fields = {
            k: (v, ...) if k not in ("rows", "topic", "reason") else (v, None)
            for k, v in params.items()
        }
        schema = _schema(name, fields)

        def make(
            name: str = name, body: Callable[..., str] = body, doc: str = doc
        ) -> Callable[..., str]:
            inner = _recorded(ground, name, body, doc)

            def fn(runtime: ToolRuntime, **kwargs: Any) -> str:
                return inner(runtime, **{k: v for k, v in kwargs.items() if v is not None})

            return fn

        out.append(
            StructuredTool.from_function(
                func=make(),
                name=name,
                description=doc,
                args_schema=schema,
                handle_tool_error=handled,
            )
        )
    return out


def _schema(name: str, fields: dict[str, Any]) -> type[BaseModel]:
    from pydantic import create_model

    return create_model(f"{name}_args", **fields)  # type: ignore[call-overload, no-any-return]


THREAD_CONFIG: Callable[[str], dict[str, Any]] = lambda conv: {"configurable": {"thread_id": conv}}  # noqa: E731


def agent_for(
    ground: Ground,
    tel: Telemetry,
    *,
    before: Sequence[AgentMiddleware] = (),
    after: Sequence[AgentMiddleware] = (),
    layer: Any = None,
    watched: bool = False,
    **kwargs: Any,
) -> tuple[Any, SeamscopeMiddleware]:
    """``watched``: the middlewares after seamscope go through ``watching()``
    (their decisions recorded, the chat spans opened by the model tail)."""
    instances = models(ground)
    layer = layer or make_layer(tel)
    seamscope = SeamscopeMiddleware(layer, instances, role="analyst")
    inner = seamscope.watching(*after) if watched else [seamscope, *after]
    agent = create_agent(
        instances[OPUS],
        lc_tools(ground),
        middleware=[*before, *inner],
        checkpointer=InMemorySaver(),
        **kwargs,
    )
    return agent, seamscope


def drive(
    agent: Any,
    ground: Ground,
    conv: str,
    text: str,
    mode: str = "invoke",
    stream_mode: str = "updates",
    abandon_after: int | None = None,
) -> None:
    payload = {"messages": [HumanMessage(f"{conv}: {text}")]}
    config = THREAD_CONFIG(conv)
    if mode == "invoke":
        agent.invoke(payload, config=config)
    elif mode == "ainvoke":
        asyncio.run(agent.ainvoke(payload, config=config))
    elif mode == "stream":
        for i, _ in enumerate(agent.stream(payload, config=config, stream_mode=stream_mode)):
            if abandon_after is not None and i + 1 >= abandon_after:
                break
    else:

        async def consume() -> None:
            stream = agent.astream(payload, config=config, stream_mode=stream_mode)
            i = 0
            async for _ in stream:
                i += 1
                if abandon_after is not None and i >= abandon_after:
                    break
            await stream.aclose()

        asyncio.run(consume())
    gc.collect()
    if abandon_after is not None:
        ground.unfinished.add(conv)
    finish(agent, ground, conv)


def finish(agent: Any, ground: Ground, conv: str) -> None:
    state = agent.get_state(THREAD_CONFIG(conv))
    ground.invoked(conv, [seen(m) for m in state.values.get("messages", [])])


def check(ground: Ground, tel: Telemetry, logs: Any, **kwargs: Any) -> list[str]:
    kwargs.setdefault("prices", PRICES)
    return disagreements(
        ground,
        tel.spans(),
        watch=tel.watch,
        metrics=tel.reader,
        logs=logs,
        recall_tool=RECALL_TOOL,
        **kwargs,
    )


MULTI = [
    reply(
        ("run_block", {"block": "sales_q3"}, "a1"),
        ("search", {"query": "q3"}, "a2"),
        ("lookup", {"key": "k"}, "a3"),
    ),
    reply(text="Q3 sales grew."),
]

# -- the matrix ------------------------------------------------------------------------------

MODES = [("invoke", ""), ("ainvoke", "")] + [
    (mode, stream_mode)
    for mode in ("stream", "astream")
    for stream_mode in ("values", "updates", "messages", "custom", "debug", "checkpoints", "tasks")
]


@pytest.mark.parametrize(("mode", "stream_mode"), MODES)
def test_several_calls_in_one_message_in_every_mode(
    mode: str, stream_mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"c1": list(MULTI)})
    agent, _ = agent_for(ground, tel)
    drive(agent, ground, "c1", "How did sales go?", mode, stream_mode or "updates")

    assert [] == check(ground, tel, captured_logs)
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )


@pytest.mark.parametrize(
    ("mode", "stream_mode"),
    [("invoke", ""), ("ainvoke", ""), ("stream", "updates"), ("astream", "messages")],
)
def test_several_calls_in_one_message_with_the_model_tail(
    mode: str, stream_mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """With ``watching()`` the chat span is the model tail's: the same truth."""
    tel = Telemetry()
    ground = Ground({"c1": list(MULTI)})
    agent, _ = agent_for(ground, tel, watched=True)
    drive(agent, ground, "c1", "How did sales go?", mode, stream_mode or "updates")

    assert [] == check(ground, tel, captured_logs)


@pytest.mark.parametrize(
    ("mode", "stream_mode", "after"),
    [
        ("stream", "updates", 1),
        # after the three tools' chunks (after 2, one tool still runs: LangGraph logs
        # an error whose traceback, kept by pytest's log capture, keeps the run alive)
        ("stream", "updates", 4),
        ("stream", "values", 3),
        ("stream", "messages", 1),
        ("stream", "debug", 6),
        ("astream", "updates", 1),
        ("astream", "updates", 2),
        ("astream", "messages", 1),
        ("astream", "values", 3),
    ],
)
def test_a_stream_the_caller_abandons_ends_every_span(
    mode: str,
    stream_mode: str,
    after: int,
    caplog: pytest.LogCaptureFixture,
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground({"c2": list(MULTI)})
    agent, _ = agent_for(ground, tel)
    with caplog.at_level(logging.ERROR, logger="opentelemetry.context"):
        drive(agent, ground, "c2", "How did sales go?", mode, stream_mode, abandon_after=after)
        gc.collect()

    assert [] == check(ground, tel, captured_logs, prices=None)
    assert [] == [r.getMessage() for r in caplog.records if "detach" in r.getMessage()]
    agents = [s for s in tel.spans() if s.name.startswith("invoke_agent")]
    assert [c.ABANDONED_RUN] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in agents]


@pytest.mark.parametrize("watched", [False, True], ids=["plain", "watched"])
def test_a_conversation_of_several_invokes_offloads_then_recalls(
    watched: bool, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c3": [
                reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                reply(text="Stored.", usage=(2_100, 30)),
                reply(("lookup", {"key": "x"}, "l1"), usage=(2_200, 20)),
                reply(text="x found.", usage=(2_300, 20)),
                reply((RECALL_TOOL, {"offload_id": "off-a"}, "r1"), usage=(2_400, 60)),
                reply(text="Here it is.", usage=(22_000, 25)),
                reply(text="Anything else?", usage=(22_100, 25)),
            ]
        }
    )
    agent, seamscope = agent_for(
        ground, tel, layer=make_layer(tel, offload_id_factory=lambda: "off-a"), watched=watched
    )
    for i, text in enumerate(["the report", "look up x", "the full report again", "thanks"]):
        drive(agent, ground, "c3", text, ["invoke", "ainvoke"][i % 2])
    seamscope.layer.end_conversation("c3")

    assert [] == check(ground, tel, captured_logs)
    assert 1 == sum(1 for m in ground.transcripts["c3"] if m.name == RECALL_TOOL)


def test_parallel_recalls_in_one_model_call_charge_its_output_once(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c4": [
                reply(("big_report", {"topic": "a"}, "b1"), ("big_report", {"topic": "b"}, "b2")),
                reply(
                    (RECALL_TOOL, {"offload_id": "off-1"}, "r1"),
                    (RECALL_TOOL, {"offload_id": "off-2"}, "r2"),
                    usage=(2_100, 300),
                ),
                reply(text="Both are back.", usage=(42_000, 25)),
            ]
        }
    )
    ids = iter(["off-1", "off-2"])
    lock = threading.Lock()

    def next_id() -> str:
        with lock:
            return next(ids)

    layer = make_layer(tel, offload_id_factory=next_id)
    agent, _ = agent_for(ground, tel, layer=layer)
    drive(agent, ground, "c4", "both reports")
    layer.end_conversation("c4")

    assert [] == check(ground, tel, captured_logs)


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("handling", ["tool_exception", "tool_error_middleware", "misfit_redirect"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_failed_tool_is_an_error_span_like_the_reference_loop(
    handling: str, mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    calls = {
        "tool_exception": ("refused", {"reason": "r"}),
        "tool_error_middleware": ("flaky", {}),
        "misfit_redirect": ("lookup", {"key": "k"}),
    }[handling]
    ground = Ground({"c5": [reply((*calls, "e1")), reply(text="It failed.")]})
    after = [ToolErrorMiddleware(lambda exc, req: f"failed: {type(exc).__name__}")]
    agent, _ = agent_for(ground, tel, after=after if handling == "tool_error_middleware" else ())
    drive(agent, ground, "c5", "misfit please" if handling == "misfit_redirect" else "go", mode)

    assert [] == check(ground, tel, captured_logs)
    span = next(s for s in tel.spans() if s.name.startswith("execute_tool"))
    # what the tool raised, though LangChain answered it with an error result:
    # the tool's own ToolException (handle_tool_error), the exception an error
    # middleware inside seamscope handled, LangGraph's ToolInvocationError for
    # arguments the tool's schema rejected (the redirect's misfit arguments)
    expected = {
        "tool_exception": "ToolException",
        "tool_error_middleware": "ConnectionError",
        "misfit_redirect": "ToolInvocationError",
    }[handling]
    assert expected == (span.attributes or {}).get(c.ATTR_ERROR_TYPE)
    assert StatusCode.ERROR == span.status.status_code


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_an_unhandled_tool_error_ends_the_run_with_it(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"c6": [reply(("flaky", {}, "f1")), reply(text="never")]})
    agent, _ = agent_for(ground, tel)
    with pytest.raises(ConnectionError):
        drive(agent, ground, "c6", "go", mode)
    ground.unfinished.add("c6")
    finish(agent, ground, "c6")

    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(
        s.name
        for s in tel.spans()
        if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "ConnectionError"
    )
    assert ["execute_tool flaky", "invoke_agent analyst", c.SPAN_ITERATION] == failed


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("where", ["tool", "model"])
def test_keyboard_interrupt_and_system_exit_end_the_spans_they_cross(
    kind: type[BaseException], where: str
) -> None:
    tel = Telemetry()
    stop = kind()
    script = [Reply(error=stop)] if where == "model" else [reply(("flaky", {}, "f1"))]
    ground = Ground({"k": script})
    agent, _ = agent_for(ground, tel)
    if where == "tool":
        tool = agent.nodes["tools"].bound.tools_by_name["flaky"]

        def stopping(runtime: ToolRuntime, **kwargs: Any) -> str:
            raise stop

        tool.func = stopping
    with pytest.raises(kind) as raised:
        agent.invoke({"messages": [HumanMessage("k: go")]}, config=THREAD_CONFIG("k"))
    assert raised.value is stop
    assert [] == tel.watch.open_spans()
    failed = sorted(
        s.name for s in tel.spans() if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == kind.__name__
    )
    crossed = ["execute_tool flaky"] if where == "tool" else [f"chat {OPUS}"]
    assert sorted([*crossed, c.SPAN_ITERATION, "invoke_agent analyst"]) == failed


# -- structured output beside a redirect of any tool ------------------------------------------


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


ANY_TO_LOOKUP = ToolCallPolicy("any_to_lookup", match=lambda ctx: True, redirect_to="lookup")


@pytest.mark.parametrize("strategy", ["tool", "provider"])
def test_structured_output_beside_a_redirect_of_any_tool(
    strategy: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    if strategy == "tool":
        script = [reply(("Weather", {"city": "Oslo", "celsius": 4}, "w1"))]
        response_format: Any = ToolStrategy(Weather)
    else:
        script = [Reply(text='{"city": "Oslo", "celsius": 4}')]
        response_format = ProviderStrategy(Weather)
    ground = Ground({"c7": script})
    ground.structured.add("Weather")
    layer = make_layer(tel, policies=[ANY_TO_LOOKUP])
    agent, _ = agent_for(ground, tel, layer=layer, response_format=response_format)
    drive(agent, ground, "c7", "weather in Oslo?")

    assert [] == check(ground, tel, captured_logs)
    state = agent.get_state(THREAD_CONFIG("c7")).values
    assert Weather(city="Oslo", celsius=4) == state["structured_response"]
    assert [] == ground.tool_runs
    # rule f: the answer call is recorded as emitted and consumed by LangChain,
    # never handed to the tool runner, and the catch-all redirect never takes it
    spans = tel.spans()
    assert [] == [s.name for s in spans if s.name.startswith("execute_tool")]
    assert [] == [s for s in spans if s.name == c.SPAN_SEAM_POST_MODEL]
    answers = [
        {k: v for k, v in (s.attributes or {}).items() if k.startswith("seamscope.dispatch.")}
        | {"id": (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID)}
        for s in spans
        if s.name == c.SPAN_DISPATCH
    ]
    expected = [
        {
            "id": "w1",
            c.ATTR_DISPATCH_STRUCTURED_OUTPUT: True,
            c.ATTR_DISPATCH_EMITTED_TOOL: "Weather",
            c.ATTR_DISPATCH_FINAL_TOOL: "Weather",
            c.ATTR_DISPATCH_GUARD: "none",
            c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
            c.ATTR_DISPATCH_PALETTE_GATE: "kept",
            c.ATTR_DISPATCH_ARGS_TRANSFORMED: False,
        }
    ]
    assert (expected if strategy == "tool" else []) == answers


# -- among other middlewares ---------------------------------------------------------------------


class DropArchive(AgentMiddleware):
    """A middleware that edits the tools of every model request."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(
            request.override(
                tools=[t for t in request.tools if getattr(t, "name", "") != "archive_search"]
            )
        )

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(
            request.override(
                tools=[t for t in request.tools if getattr(t, "name", "") != "archive_search"]
            )
        )


def _summarizer(ground: Ground) -> SummarizationMiddleware:
    def summarize(messages: Any) -> str:
        return (
            f"{conversation_of([seen(m) for m in messages])}: summary of {len(messages)} messages"
        )

    unused = FakeListChatModel(responses=["(the summarizer callable answers)"])
    return SummarizationMiddleware(
        unused, summarizer=summarize, trigger=("messages", 6), keep=("messages", 2)
    )


@pytest.mark.parametrize("watched", [False, True], ids=["plain", "watched"])
@pytest.mark.parametrize("position", ["first", "after_editors", "between"])
def test_among_other_middlewares(
    position: str, watched: bool, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c8": [
                Reply(error=TimeoutError("provider slow")),
                reply(("big_report", {"topic": "q3"}, "m0")),
                reply(("run_block", {"block": "sales_q3"}, "m1")),
                reply(("flaky", {}, "m2")),
                reply(("lookup", {"key": "a"}, "m3")),
                reply(("lookup", {"key": "b"}, "m4")),
                reply(text="Done."),
            ]
        }
    )
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    errors = ToolErrorMiddleware(lambda exc, req: f"failed: {type(exc).__name__}")
    summary = _summarizer(ground)
    edit = DropArchive()
    before, after = {
        "first": ([], [summary, edit, retry, errors]),
        "after_editors": ([summary, edit], [retry, errors]),
        "between": ([edit], [summary, retry, errors]),
    }[position]
    agent, seamscope = agent_for(ground, tel, before=before, after=after, watched=watched)
    drive(agent, ground, "c8", "sales please")
    seamscope.layer.end_conversation("c8")

    assert [] == check(ground, tel, captured_logs)
    assert 7 == len(ground.model_calls)
    # the summary replaced the offload's stub: later prompts no longer carry it
    assert not any("[offloaded" in m.text for m in ground.model_calls[-1].messages)


def test_context_editing_a_result_then_re_reading_it_settles_as_the_prompts_went(
    captured_logs: list[dict[str, Any]],
) -> None:
    """Watched context editing (keep the latest tool result) clears the large
    report once the lookup's result is newer; the model then asks for the same
    report again (a re-read). The prompts hold the cleared text without the
    report once (the call after the lookup), so its compaction settles with
    one carried turn and one recall; the lookup's result is cleared in turn
    for the last call. The gate's own economics are untouched (its threshold
    is out of reach here)."""
    tel = Telemetry()
    ground = Ground(
        {
            "c9": [
                reply(("big_report", {"topic": "q3"}, "e1"), usage=(21_000, 30)),
                reply(("lookup", {"key": "x"}, "e2"), usage=(21_100, 20)),
                reply(("big_report", {"topic": "q3"}, "e3"), usage=(1_200, 20)),
                reply(text="Here it is again.", usage=(21_300, 20)),
            ]
        }
    )
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1_000, keep=1)])
    layer = make_layer(tel, offload_threshold_tokens=10**9)
    agent, seamscope = agent_for(ground, tel, after=[editing], layer=layer, watched=True)
    drive(agent, ground, "c9", "the report, then x")
    settled = seamscope.layer.end_conversation("c9")

    # the gate is never asked here (its threshold is out of reach)
    assert [] == check(ground, tel, captured_logs, offload_threshold_chars=10**12)
    # the report: cleared for the third call, re-read by it; the lookup's small
    # result: cleared for the fourth (the re-read report is then the latest)
    assert [("context_editing:e1", 1, 1), ("context_editing:e2", 1, 0)] == [
        (x.offload_id, x.turns_carried, x.recalls) for x in settled
    ]
    assert {"context_editing"} == {x.mechanism.value for x in settled}
    # ground truth: the model's third prompt held the report's result cleared
    third = ground.model_calls[2]
    assert BIG not in [m.text for m in third.messages if m.role == "tool"]


# -- concurrency ------------------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(64)]


def _script(conv: str) -> list[Reply]:
    return [
        reply(
            ("run_block", {"block": conv}, f"{conv}-1"),
            ("search", {"query": conv}, f"{conv}-2"),
            ("big_report", {"topic": conv}, f"{conv}-3"),
        ),
        reply(text=f"{conv} done"),
        reply((RECALL_TOOL, {"offload_id": f"{conv}-off"}, f"{conv}-4")),
        reply(text="back"),
    ]


def _texts(conv: str) -> list[str]:
    return ["sales please" if int(conv[1:]) % 2 else "archive please", "the report again"]


def _concurrent_agent(ground: Ground, tel: Telemetry) -> Any:
    def offload_id() -> str:
        from langgraph.config import get_config

        return f"{get_config()['configurable']['thread_id']}-off"

    layer = make_layer(tel, offload_id_factory=offload_id)
    # 64 conversations interleave more model calls than the default idle window:
    # the ledger would settle an offload as idle before its recall
    layer.ledger = OffloadLedger(pricing=PRICING, observer=layer.observer, idle_turns=10_000)
    agent, _ = agent_for(ground, tel, layer=layer)
    return agent, layer


def _normalized(ground: Ground) -> dict[str, Any]:
    return {k: re.sub(r"0x[0-9a-f]+", "", repr(v)) for k, v in ground.decisions().items()}


def test_concurrent_conversations_decide_as_sequential_ones_and_keep_their_traces() -> None:
    sequential = Ground({conv: _script(conv) for conv in CONVERSATIONS[:16]})
    agent, layer = _concurrent_agent(sequential, Telemetry())
    for conv in CONVERSATIONS[:16]:
        for text in _texts(conv):
            drive(agent, sequential, conv, text)

    threaded = Ground({conv: _script(conv) for conv in CONVERSATIONS[:16]})
    tel = Telemetry()
    agent, layer = _concurrent_agent(threaded, tel)
    barrier = threading.Barrier(16)

    def worker(conv: str) -> None:
        barrier.wait()
        for text in _texts(conv):
            payload = {"messages": [HumanMessage(f"{conv}: {text}")]}
            agent.invoke(payload, config=THREAD_CONFIG(conv))
            finish(agent, threaded, conv)

    with structlog.testing.capture_logs() as logs, ThreadPoolExecutor(16) as pool:
        list(pool.map(worker, CONVERSATIONS[:16]))
    for conv in CONVERSATIONS[:16]:
        layer.end_conversation(conv)
    assert _normalized(sequential) == {k: v for k, v in _normalized(threaded).items()}
    assert [] == check(threaded, tel, logs)


def test_64_asyncio_conversations_decide_as_sequential_ones_and_keep_their_traces() -> None:
    sequential = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    agent, _ = _concurrent_agent(sequential, Telemetry())
    for conv in CONVERSATIONS:
        for text in _texts(conv):
            drive(agent, sequential, conv, text)

    in_tasks = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    tel = Telemetry()
    agent, layer = _concurrent_agent(in_tasks, tel)

    async def one(conv: str) -> None:
        for text in _texts(conv):
            payload = {"messages": [HumanMessage(f"{conv}: {text}")]}
            await agent.ainvoke(payload, config=THREAD_CONFIG(conv))
            state = await agent.aget_state(THREAD_CONFIG(conv))
            in_tasks.invoked(conv, [seen(m) for m in state.values["messages"]])

    async def main() -> None:
        await asyncio.gather(*(one(conv) for conv in CONVERSATIONS))

    with structlog.testing.capture_logs() as logs:
        asyncio.run(main())
    for conv in CONVERSATIONS:
        layer.end_conversation(conv)
    assert _normalized(sequential) == _normalized(in_tasks)
    assert [] == check(in_tasks, tel, logs)


# -- next to another LangChain instrumentation ----------------------------------------------------


def _peer_scenario(peer: str) -> dict[str, Any]:
    """Two invokes with seamscope beside a peer instrumentation; what to compare."""
    tel = Telemetry()
    if peer == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=tel.tracer_provider)
    ground = Ground({"c9": [*MULTI, reply(text="again")]})
    with structlog.testing.capture_logs() as logs:
        agent, _ = agent_for(ground, tel)
        drive(agent, ground, "c9", "How did sales go?")
        drive(agent, ground, "c9", "and again?")
    ours = ("invoke_agent", "chat ", "execute_tool ", "seamscope.")
    spans = tel.spans()
    own = [
        s for s in spans if s.name.startswith(ours) and s.instrumentation_scope.name == "seamscope"
    ]
    foreign = [s for s in spans if s not in own]
    roots = [s for s in spans if s.parent is None]
    return {
        "disagreements": disagreements(
            ground, own, foreign=foreign, logs=logs, recall_tool=RECALL_TOOL
        ),
        "roots": sorted(r.instrumentation_scope.name for r in roots),
        "traces": len({s.context.trace_id for s in spans}),
        "foreign": len(foreign),
    }


PEERS = {
    "openinference": "openinference.instrumentation.langchain",
    "openllmetry": "opentelemetry.instrumentation.langchain",
}


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_next_to_another_instrumentation_one_trace_per_invoke(peer: str) -> None:
    pytest.importorskip(PEERS[peer], reason=f"{peer} is not installed ({PEERS[peer]})")
    # in a process of its own: neither peer's uninstrument() removes all it patched
    code = (
        "import json, sys; from tests.truth.test_langchain_truth import _peer_scenario; "
        "print(json.dumps(_peer_scenario(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, peer],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, f"the {peer} scenario failed:\n{done.stderr}"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert [] == found["disagreements"]
    # one trace per invoke, rooted in the peer's span; seamscope's spans joined it
    assert (2, 2) == (found["traces"], len(found["roots"]))
    assert "seamscope" not in found["roots"]
    assert found["foreign"] > 0
