"""The rules every adapter keeps, each scenario run through every adapter.

The ground truth is what the scripted models and the recorded tools did
(:mod:`._harness`); the adapters are the reference loop, LangChain,
the OpenAI Agents SDK, pydantic-ai, Google ADK and Strands Agents
(symfonic names its models from its own configuration and has no layer
default: the rules of its own scenarios are checked by
``test_symfonic_truth.py`` through the same harness).

* The model really called names the chat span and the ledger's price: an
  agent whose own model is ``gpt-4.1-mini``, given no ``models=``, on a
  layer whose default is ``gpt-4o``.
* A PRE-seam winner that is not callable here is reported the same way:
  one ``seamscope.model.unavailable`` event, and the chat span names it
  (``seamscope.model.chosen_unavailable``) beside the model that ran.
* A stub is priced at the size of the stub really sent, the prompt that
  carried it says ``seamscope.conversation.compacted``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import Agent as SDKAgent
from agents import set_tracing_disabled
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PAIAgent

from seamscope.adapters import RECALL_TOOL, DecisionLayer, ReActAgent
from seamscope.adapters.google_adk import SeamscopePlugin
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.adapters.strands import SeamscopePlugin as StrandsPlugin
from seamscope.decisions import ModelConfig, PricingTable, RolePaletteStage, ToolCallPolicy
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

from . import test_google_adk_truth as adk
from . import test_langchain_truth as lc
from . import test_openai_agents_truth as sdk
from . import test_pydantic_ai_truth as pai
from . import test_strands_truth as strands
from ._harness import Ground, Prices, Reply, disagreements, reply
from .test_reference_truth import PALETTE, Telemetry, chat, seen, standard_bodies, tools

MINI = "gpt-4.1-mini"
GPT4O = "gpt-4o"
SONNET = "claude-sonnet-4-5"
PRICES = Prices({MINI: (0.4e-6, 1.6e-6), GPT4O: (2.5e-6, 10e-6), SONNET: (3e-6, 15e-6)})
PRICING = PricingTable(
    {m: {"input": i * 1e6, "output": o * 1e6} for m, (i, o) in PRICES.rates.items()},
    use_genai_prices=False,
)
PALETTE_STAGE = RolePaletteStage(resolver=lambda role: PALETTE)


threading_left_as_found = strands.threading_left_as_found


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SDK's own exporter posts to OpenAI when a key is set: no key, tracing off."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


# a policy whose model no adapter here can call
TO_SONNET = ToolCallPolicy(
    "deep_reading", match=lambda ctx: "deep" in ctx.user_text, model=ModelConfig(SONNET)
)


def layer(tel: Telemetry, **kwargs: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=GPT4O,
        stages=[PALETTE_STAGE],
        agent_name="analyst",
        pricing=PRICING,
        tracer_provider=tel.tracer_provider,
        meter_provider=tel.meter_provider,
        telemetry_config=TelemetryConfig.create(),
        **kwargs,
    )


# -- one conversation through each adapter; the agent's own model is MINI -----------------


def run_reference(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    agent = ReActAgent(the_layer, chat(ground), tools(ground, standard_bodies()))
    history: list[Any] = []
    with ground.conversation(conv):
        agent.run_turn(conv, f"{conv}: {text}", messages=history, role="analyst")
    ground.invoked(conv, [seen(m) for m in history])
    ground.assign_call_ids(conv)
    the_layer.end_conversation(conv)


def run_langchain(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    own = lc.models(ground, (MINI,))[MINI]
    agent = create_agent(
        own,
        lc.lc_tools(ground),
        middleware=[SeamscopeMiddleware(the_layer, role="analyst")],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage(f"{conv}: {text}")]}, config=lc.THREAD_CONFIG(conv))
    lc.finish(agent, ground, conv)
    the_layer.end_conversation(conv)


def run_openai_agents(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    runner = SeamscopeRunner(the_layer, role="analyst")
    agent = SDKAgent(
        name="analyst",
        instructions="You analyse sales.",
        model=sdk.models(ground, (MINI,))[MINI],
        tools=[*sdk.sdk_tools(ground), runner.recall_tool],
    )
    runner.run_sync(agent, f"{conv}: {text}", context={"conversation": conv}, conversation=conv)
    ground.invoked(conv)
    the_layer.end_conversation(conv)


def run_pydantic_ai(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    agent = PAIAgent(
        pai.models(ground, names=(MINI,))[MINI],
        name="analyst",
        instructions="You analyse sales.",
        tools=pai.tools(ground),
        capabilities=[SeamscopeCapability(the_layer, {}, role="analyst")],
    )
    pai.Conversation(agent, ground, conv).run(text)
    the_layer.end_conversation(conv)


def run_google_adk(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    root = adk.agent(ground, adk.models(ground, (MINI,))[MINI])
    plugin = SeamscopePlugin(the_layer, role="analyst")
    adk.Conversation(adk.runner(root, [plugin]), ground, conv).run(text)
    the_layer.end_conversation(conv)


def run_strands(ground: Ground, tel: Telemetry, conv: str, text: str, **kw: Any) -> None:
    the_layer = layer(tel, **kw)
    plugin = StrandsPlugin(the_layer, role="analyst", conversation=strands.conversation_id)
    made = strands.agent(ground, conv, strands.models(ground, (MINI,))[MINI], [plugin])
    strands.Conversation(made, ground, conv).run(text)
    the_layer.end_conversation(conv)


ADAPTERS: dict[str, Callable[..., None]] = {
    "reference": run_reference,
    "langchain": run_langchain,
    "openai_agents": run_openai_agents,
    "pydantic_ai": run_pydantic_ai,
    "google_adk": run_google_adk,
    "strands": run_strands,
}
OWN_MODEL = {"reference": GPT4O}  # the reference loop calls the model the PRE seam names


def check(ground: Ground, tel: Telemetry, logs: Any, **kwargs: Any) -> list[str]:
    return disagreements(
        ground,
        tel.spans(),
        watch=tel.watch,
        metrics=tel.reader,
        logs=logs,
        recall_tool=RECALL_TOOL,
        **{"prices": PRICES, **kwargs},
    )


def big_then_answer() -> list[Reply]:
    return [
        reply(("big_report", {"topic": "q3"}, "b1")),
        reply(("lookup", {"key": "k"}, "b2")),
        reply(text="The report is long."),
    ]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_the_model_really_called_names_the_chat_span_and_the_price(
    adapter: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"r1": big_then_answer()})
    ADAPTERS[adapter](ground, tel, "r1", "read the report")

    assert [] == check(ground, tel, captured_logs)
    expected = OWN_MODEL.get(adapter, MINI)
    assert [expected] * 3 == [m.model for m in ground.model_calls]
    assert [f"chat {expected}"] * 3 == sorted(
        s.name for s in tel.spans() if s.name.startswith("chat ")
    )
    [gate] = [
        s
        for s in tel.spans()
        if s.name == c.SPAN_OFFLOAD_GATE and (s.attributes or {}).get(c.ATTR_OFFLOAD_FIRE)
    ]
    assert ("b1", expected) == (
        (gate.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID),
        (gate.attributes or {}).get(c.ATTR_GEN_AI_REQUEST_MODEL),
    )
    # the stub was carried by the two later prompts, and the chat spans say so
    assert [False, True, True] == [
        (s.attributes or {}).get(c.ATTR_CONVERSATION_COMPACTED, False)
        for s in sorted(tel.spans(), key=lambda s: s.start_time or 0)
        if s.name.startswith("chat ")
    ]
    assert [] == [e for e in captured_logs if e.get("event") == c.LOG_MODEL_UNAVAILABLE]


@pytest.mark.parametrize("adapter", sorted(set(ADAPTERS) - {"reference"}))
def test_a_pre_seam_winner_not_callable_here_is_reported_the_same_everywhere(
    adapter: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"r2": [reply(text="Deeply read.")]})
    ADAPTERS[adapter](ground, tel, "r2", "a deep reading", policies=[TO_SONNET])

    assert [] == check(ground, tel, captured_logs)
    assert [MINI] == [m.model for m in ground.model_calls]
    [chat_span] = [s for s in tel.spans() if s.name.startswith("chat ")]
    assert (f"chat {MINI}", SONNET) == (
        chat_span.name,
        (chat_span.attributes or {}).get(c.ATTR_MODEL_CHOSEN_UNAVAILABLE),
    )
    [event] = [e for e in captured_logs if e.get("event") == c.LOG_MODEL_UNAVAILABLE]
    assert (SONNET, MINI, "deep_reading") == (
        event["chosen_model"],
        event["used_model"],
        event["policy"],
    )


def test_the_adapters_take_the_same_decisions() -> None:
    """The same script through every adapter: the same models called, the same
    tools run (the reference loop calls the PRE seam's model by design)."""
    ran: dict[str, Any] = {}
    for adapter, run in sorted(ADAPTERS.items()):
        ground = Ground({"r3": big_then_answer()})
        run(ground, Telemetry(), "r3", "read the report")
        ran[adapter] = sorted((r.name, r.call_id) for r in ground.tool_runs)
    assert {a: [("big_report", "b1"), ("lookup", "b2")] for a in ADAPTERS} == ran


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_tool_never_offered_but_called_is_flagged_on_its_dispatch(
    adapter: str, captured_logs: list[dict[str, Any]]
) -> None:
    """``archive_search`` is registered but outside the palette: a model that
    calls it anyway gets what the framework does with it, and the dispatch
    span says the call was not offered."""
    tel = Telemetry()
    ground = Ground(
        {"r4": [reply(("archive_search", {"query": "q3"}, "n1")), reply(text="Old hits.")]}
    )
    ADAPTERS[adapter](ground, tel, "r4", "search the archive")

    assert [] == check(ground, tel, captured_logs, prices=None)
    [dispatch] = [s for s in tel.spans() if s.name == c.SPAN_DISPATCH]
    assert ("archive_search", False) == (
        (dispatch.attributes or {}).get(c.ATTR_DISPATCH_EMITTED_TOOL),
        (dispatch.attributes or {}).get(c.ATTR_DISPATCH_OFFERED),
    )
