"""One failure, one ``error.type``: every span a failure ends names what the
user's code raised, through whatever wrapper the framework puts around it.

Each adapter runs one turn whose tool (or model) raises ``Kaboom`` and the
framework lets it end the run: the Agents SDK re-raises a tool's exception as
its ``UserError`` (``raise ... from``), pydantic-ai and LangChain raise it as
it is. The exception the caller sees is the ground truth; every span of the
trace that carries ``error.type`` (the ``execute_tool`` or ``chat`` span, the
iteration, ``invoke_agent``) says ``Kaboom``, and the spans the failure ended
are ERROR.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent as SDKAgent
from agents import function_tool, set_tracing_disabled
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool as lc_tool
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent as PAIAgent

from seamscope.adapters import DecisionLayer, ReActAgent
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.decisions import Message, ModelUsage
from seamscope.telemetry import conventions as c

from . import _langchain_support as lcs
from . import _openai_agents_support as sdks
from . import _pydantic_ai_support as pais


class Kaboom(Exception):
    """What the user's code raises."""


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _layer(provider: TracerProvider) -> DecisionLayer:
    return DecisionLayer(
        default_model="gpt-4.1-mini", agent_name="analyst", tracer_provider=provider
    )


def _boom(**_: Any) -> str:
    raise Kaboom("the tool broke")


# -- each adapter: a tool (or the model) raises and the run ends with it ------------------


def reference(provider: TracerProvider, where: str) -> None:
    def chat(*args: Any, **kwargs: Any) -> tuple[Message, ModelUsage]:
        raise Kaboom("the model broke")

    ReActAgent(_layer(provider), chat, {"lookup": _boom}).run_turn("conv-e", "hi")


def langchain(provider: TracerProvider, where: str) -> None:
    @lc_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise Kaboom("the tool broke")

    script = (
        [lcs.ai(("lookup", {"key": "k"}, "c1"))]
        if where == "tool"
        else []  # an empty script: the model raises
    )
    models, _ = lcs.scripted_models(["gpt-4.1-mini"], script)
    model = models["gpt-4.1-mini"]
    if where == "model":

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise Kaboom("the model broke")

        object.__setattr__(model, "_generate", broken)
    agent = create_agent(model, [lookup], middleware=[SeamscopeMiddleware(_layer(provider))])
    agent.invoke({"messages": [HumanMessage("hi")]})


def openai_agents(provider: TracerProvider, where: str) -> None:
    @function_tool(failure_error_function=None)
    def lookup(key: str) -> str:
        """Look a key up."""
        raise Kaboom("the tool broke")

    steps = [sdks.step(sdks.call("lookup", {"key": "k"}, "c1"))] if where == "tool" else []
    models, _ = sdks.scripted_models(["gpt-4.1-mini"], steps)
    model = models["gpt-4.1-mini"]
    if where == "model":

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise Kaboom("the model broke")

        model.get_response = broken  # type: ignore[method-assign]
    agent = SDKAgent(name="analyst", model=model, tools=[lookup])
    SeamscopeRunner(_layer(provider)).run_sync(agent, "hi", conversation="conv-e")


def pydantic_ai(provider: TracerProvider, where: str) -> None:
    steps = [pais.step(pais.call("lookup", {"key": "k"}, "c1"))] if where == "tool" else []
    models, _ = pais.scripted_models(["gpt-4.1-mini"], steps)
    model = models["gpt-4.1-mini"]
    if where == "model":

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise Kaboom("the model broke")

        model.function = broken  # type: ignore[assignment]

    def lookup(key: str) -> str:
        """Look a key up."""
        raise Kaboom("the tool broke")

    agent = PAIAgent(
        model, tools=[lookup], capabilities=[SeamscopeCapability(_layer(provider), {})]
    )
    asyncio.run(agent.run("hi"))


ADAPTERS: dict[str, Callable[[TracerProvider, str], None]] = {
    "reference": reference,
    "langchain": langchain,
    "openai_agents": openai_agents,
    "pydantic_ai": pydantic_ai,
}
CASES = [
    (name, where)
    for name in ADAPTERS
    for where in ("tool", "model")
    if not (name == "reference" and where == "tool")  # its loop answers a tool's error
]


@pytest.mark.parametrize(("adapter", "where"), CASES, ids=[f"{a}-{w}" for a, w in CASES])
def test_every_span_a_failure_ends_names_what_the_users_code_raised(
    adapter: str, where: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with pytest.raises(Exception) as raised:
        ADAPTERS[adapter](provider, where)
    # the ground truth: what the caller got, through the framework's wrapper
    cause: BaseException | None = raised.value
    while cause is not None and not isinstance(cause, Kaboom):
        cause = cause.__cause__
    assert isinstance(cause, Kaboom), f"the run ended with {raised.value!r}"
    spans = exporter.get_finished_spans()
    named = {
        s.name: (s.attributes or {}).get(c.ATTR_ERROR_TYPE)
        for s in spans
        if c.ATTR_ERROR_TYPE in (s.attributes or {})
    }
    assert {"Kaboom"} == set(named.values()), named
    ended = _ended_by_the_failure(spans, where)
    assert ended, [s.name for s in spans]
    assert all(s.status.status_code is StatusCode.ERROR for s in ended), [
        (s.name, s.status.status_code) for s in ended
    ]
    assert all((s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "Kaboom" for s in ended)


def _ended_by_the_failure(spans: Any, where: str) -> list[ReadableSpan]:
    """The run's own spans the failure crossed: invoke_agent, the last
    iteration, and the tool's or the model's span."""
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    iterations = [s for s in spans if s.name == c.SPAN_ITERATION]
    inner = [s for s in spans if s.name.startswith("execute_tool" if where == "tool" else "chat ")]
    return [*agents[:1], *iterations[-1:], *inner[-1:]]


# -- a failure a middleware outside seamscope recovers from ends nothing but its tool ----


def test_langchain_a_tool_error_a_middleware_recovers_from_leaves_the_run_ok() -> None:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage

    class Recover(AgentMiddleware):  # type: ignore[type-arg]
        """Answers a tool's exception with an error message (the run goes on)."""

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            try:
                return handler(request)
            except Kaboom as exc:
                return ToolMessage(
                    content=f"error: {exc}", tool_call_id=request.tool_call["id"], status="error"
                )

    @lc_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise Kaboom("the tool broke")

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    models, _ = lcs.scripted_models(
        ["gpt-4.1-mini"], [lcs.ai(("lookup", {"key": "k"}, "c1")), lcs.ai(text="sorry")]
    )
    for order in ("outside", "inside"):
        exporter.clear()
        seamscope = SeamscopeMiddleware(_layer(provider))
        middleware = [Recover(), seamscope] if order == "outside" else [seamscope, Recover()]
        if order == "inside":
            models, _ = lcs.scripted_models(
                ["gpt-4.1-mini"], [lcs.ai(("lookup", {"key": "k"}, "c1")), lcs.ai(text="sorry")]
            )
        agent = create_agent(models["gpt-4.1-mini"], [lookup], middleware=middleware)
        result = agent.invoke({"messages": [HumanMessage("hi")]})
        assert "sorry" == result["messages"][-1].content  # the ground truth: the run answered
        spans = exporter.get_finished_spans()
        statuses = {
            s.name: (s.status.status_code, (s.attributes or {}).get(c.ATTR_ERROR_TYPE))
            for s in spans
            if s.name.startswith(("invoke_agent", "execute_tool")) or s.name == c.SPAN_ITERATION
        }
        assert (StatusCode.UNSET, None) == statuses["invoke_agent analyst"], (order, statuses)
        assert (StatusCode.ERROR, "Kaboom") == statuses["execute_tool lookup"], (order, statuses)
        iterations = [s for s in spans if s.name == c.SPAN_ITERATION]
        assert 2 == len(iterations)
        assert all(s.status.status_code is StatusCode.UNSET for s in iterations), order


def test_langchain_a_tool_retried_by_tool_retry_middleware_leaves_the_run_ok() -> None:
    from langchain.agents.middleware import ToolRetryMiddleware

    tries: list[str] = []

    @lc_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        tries.append(key)
        if len(tries) == 1:
            raise Kaboom("the tool broke once")
        return "found"

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    models, _ = lcs.scripted_models(
        ["gpt-4.1-mini"], [lcs.ai(("lookup", {"key": "k"}, "c1")), lcs.ai(text="done")]
    )
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)
    agent = create_agent(
        models["gpt-4.1-mini"],
        [lookup],
        middleware=[retry, SeamscopeMiddleware(_layer(provider))],
    )
    result = agent.invoke({"messages": [HumanMessage("hi")]})
    assert ("done", ["k", "k"]) == (result["messages"][-1].content, tries)  # the ground truth
    spans = exporter.get_finished_spans()
    [agent_span] = [s for s in spans if s.name == "invoke_agent analyst"]
    assert StatusCode.UNSET is agent_span.status.status_code
    tools = [
        (s.status.status_code, (s.attributes or {}).get(c.ATTR_ERROR_TYPE))
        for s in spans
        if s.name == "execute_tool lookup"
    ]
    assert [(StatusCode.ERROR, "Kaboom"), (StatusCode.UNSET, None)] == tools  # two real runs


# -- a tool call the run cancelled says so: it is not a tool that ran --------------------


def test_openai_agents_a_tripwire_that_cancels_the_tools_leaves_no_span_that_says_they_ran() -> (
    None
):
    """Whether the SDK cancels a call before or during its body is timing; either
    way its span says the run cancelled it, never that it answered."""
    from agents import GuardrailFunctionOutput, input_guardrail
    from agents.exceptions import InputGuardrailTripwireTriggered

    answered: list[str] = []

    @function_tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        await asyncio.sleep(0.5)  # the tripwire comes first, whenever the body began
        answered.append(key)
        return "found"

    @input_guardrail(run_in_parallel=True)
    async def guard(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
        await asyncio.sleep(0.05)  # the model answers first: its calls are dispatched
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    models, _ = sdks.scripted_models(
        ["gpt-4.1-mini"],
        [
            sdks.step(
                sdks.call("lookup", {"key": "a"}, "c1"), sdks.call("lookup", {"key": "b"}, "c2")
            )
        ],
    )
    agent = SDKAgent(
        name="analyst", model=models["gpt-4.1-mini"], tools=[lookup], input_guardrails=[guard]
    )
    with pytest.raises(InputGuardrailTripwireTriggered):
        SeamscopeRunner(_layer(provider)).run_sync(agent, "hi", conversation="conv-g")
    assert [] == answered  # the ground truth: no tool answered
    tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup"]
    assert [(StatusCode.ERROR, c.TOOL_CALL_CANCELLED)] * len(tools) == [
        (s.status.status_code, (s.attributes or {}).get(c.ATTR_ERROR_TYPE)) for s in tools
    ]


# -- final_tool names only what the runner really ran --------------------------------------


def test_pydantic_ai_a_call_of_a_tool_its_prepare_hid_is_refused_not_dispatched() -> None:
    from pydantic_ai import Tool

    ran: list[str] = []

    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return "found"

    def other(key: str) -> str:
        """Another tool."""
        ran.append("other")
        return "other"

    async def hide(ctx: Any, tool_def: Any) -> None:
        return None  # pydantic-ai's prepare: the tool is not available this step

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    models, _ = pais.scripted_models(
        ["gpt-4.1-mini"],
        [pais.step(pais.call("lookup", {"key": "a"}, "c1")), pais.step(pais.text("ok"))],
    )
    agent = PAIAgent(
        models["gpt-4.1-mini"],
        tools=[Tool(lookup, prepare=hide), other],
        capabilities=[SeamscopeCapability(_layer(provider), {})],
    )
    assert "ok" == asyncio.run(agent.run("hi")).output
    assert [] == ran  # the ground truth: pydantic-ai answered with its unknown-tool retry
    [dispatch] = [s for s in exporter.get_finished_spans() if s.name == c.SPAN_DISPATCH]
    attributes = dict(dispatch.attributes or {})
    assert ("lookup", True, False) == (
        attributes[c.ATTR_DISPATCH_EMITTED_TOOL],
        attributes[c.ATTR_DISPATCH_REFUSED],
        attributes[c.ATTR_DISPATCH_OFFERED],
    )
    assert c.ATTR_DISPATCH_FINAL_TOOL not in attributes
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
