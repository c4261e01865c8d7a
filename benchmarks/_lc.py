"""Parts 1 and 2 of the peer benchmark: LangChain v1 ``create_agent`` and
symfonic-core's ``SymfonicAgent``, with a scripted LangChain chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from _facts import FACTS, Gate
from _harness import CapturingSpanExporter, Case, Providers, Sink
from _scenario import (
    AGENT,
    CONVERSATION,
    FINAL_TEXT,
    HAIKU,
    LC_TOOLS,
    OPUS,
    PALETTE,
    REPORT,
    SONNET,
    TURN,
    USAGE_IN,
    USAGE_OUT,
    USER_TEXT,
    layer_telemetry,
    lc_layer,
)
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.adapters.symfonic import instrument_symfonic
from seamscope.loop import RECALL_TOOL

__all__ = ["ScriptedChat", "langchain_cases", "lc_tools", "symfonic_cases"]

# symfonic has no selection stages; its offload gate prices only in the (gate) scenario
SYM_TURN = replace(
    TURN,
    offered=None,
    selected=None,
    dropped=None,
    gate=None,
    skip=frozenset({*FACTS[:3], FACTS[8]}),
)
SYM_GATE_TURN = replace(
    SYM_TURN, gate=Gate(HAIKU, 25_000, 5, 0.5, 1.0, 5.0), skip=frozenset(FACTS[:3])
)

_SCHEMAS: dict[str, dict[str, Any]] = {}


def _schema(item: Any) -> Any:
    """A tool's OpenAI schema, computed once per tool name (dict tools pass through)."""
    if not isinstance(item, BaseTool):
        return item
    schema = _SCHEMAS.get(item.name)
    if schema is None:
        schema = _SCHEMAS[item.name] = convert_to_openai_tool(item)
    return schema


class ScriptedChat(BaseChatModel):
    """Answers from the last message: a ``run_block`` call after the user, text after a tool."""

    model_name: str = OPUS

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        kwargs["tools"] = [_schema(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(**kwargs)

    def _generate(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        usage = {
            "input_tokens": USAGE_IN,
            "output_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
        }
        meta = {"model_name": self.model_name}
        if isinstance(messages[-1], ToolMessage):
            message = AIMessage(content=FINAL_TEXT, usage_metadata=usage, response_metadata=meta)
        else:
            message = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "run_block",
                        "args": {"block": "sales_q3", "limit": 5},
                        "id": "call_1",
                        "type": "tool_call",
                    }
                ],
                usage_metadata=usage,
                response_metadata=meta,
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def lc_tools(executed: list[str]) -> list[BaseTool]:
    @tool
    def run_block(block: str, limit: int = 10) -> str:
        """Run a saved analytics block."""
        executed.append("run_block")
        return REPORT

    @tool
    def fetch_data(source: str, rows: int = 10) -> str:
        """Read rows from a governed data source."""
        executed.append("fetch_data")
        return REPORT

    def simple(name: str, doc: str) -> BaseTool:
        def run(query: str) -> str:
            executed.append(name)
            return f"{name}: done"

        run.__name__ = name
        run.__doc__ = doc
        return tool(run)

    others = [
        simple(name, f"The {name.replace('_', ' ')} tool.")
        for name in LC_TOOLS
        if name not in ("run_block", "fetch_data")
    ]
    tools = [run_block, fetch_data, *others]
    assert [t.name for t in tools] == list(LC_TOOLS)
    return tools


class PassThrough(AgentMiddleware):
    """The hooks SeamscopeMiddleware uses, doing nothing: what LangChain charges for any
    middleware (its graph nodes and wrappers), the floor of a middleware-based layer."""

    def before_agent(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)


# Every attribute the two peers wrap (their _instrument methods), as (module, class, name).
PEER_PATCHED = (
    ("langchain_core.callbacks", "BaseCallbackManager", "__init__"),
    ("langgraph.pregel", "Pregel", "stream"),
    ("langgraph.pregel", "Pregel", "astream"),
    ("langgraph.types", "Command", "__init__"),
    *(
        ("langchain.agents.middleware.types", "AgentMiddleware", hook)
        for hook in (
            "before_model",
            "after_model",
            "before_agent",
            "after_agent",
            "abefore_model",
            "aafter_model",
            "abefore_agent",
            "aafter_agent",
        )
    ),
    ("langchain.agents.factory", None, "create_agent"),
    ("langchain.agents", None, "create_agent"),
    ("langgraph.prebuilt.chat_agent_executor", None, "create_react_agent"),
    ("langgraph.prebuilt", None, "create_react_agent"),
)
_MISSING = object()


class Originals:
    """The peers' patch sites as they were before any instrumentation.

    OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrappers in place (it
    passes dotted names such as ``"BaseCallbackManager.__init__"`` to
    ``unwrap``, which looks up a plain attribute and finds none), so spans
    would keep coming after it is switched off; the script puts the
    originals back itself after each block and checks that nothing is left.
    """

    def __init__(self) -> None:
        import importlib

        self.sites: list[tuple[Any, str, Any]] = []
        for module_name, owner_name, name in PEER_PATCHED:
            try:
                owner = importlib.import_module(module_name)
            except ImportError:
                continue
            if owner_name is not None:
                owner = getattr(owner, owner_name, None)
                if owner is None:
                    continue
            self.sites.append((owner, name, vars(owner).get(name, _MISSING)))

    def restore(self) -> None:
        for owner, name, original in self.sites:
            if vars(owner).get(name, _MISSING) is original:
                continue
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)

    def check(self) -> None:
        left = [
            f"{getattr(owner, '__name__', owner)}.{name}"
            for owner, name, original in self.sites
            if vars(owner).get(name, _MISSING) is not original
        ]
        if left:
            raise RuntimeError(f"instrumentation left in place: {left}")


class Toggle:
    """An instrumentor switched on for a block and off after it (singletons, reused)."""

    def __init__(self, instrumentor: Any, originals: Originals, **kwargs: Any) -> None:
        self.instrumentor = instrumentor
        self.originals = originals
        self.kwargs = kwargs

    def on(self) -> None:
        self.originals.check()
        self.instrumentor.instrument(skip_dep_check=True, **self.kwargs)

    def off(self) -> None:
        self.instrumentor.uninstrument()
        self.originals.restore()
        self.originals.check()


def langchain_cases(sink: Sink) -> list[Case]:
    """Part 1's configurations, each instrumented one with providers of its own."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    executed: list[str] = []
    tools = lc_tools(executed)
    payload_config = {"configurable": {"thread_id": CONVERSATION}}

    def invoker(agent: Any, after: Callable[[], Any] | None = None) -> Callable[[int], Any]:
        def run(i: int) -> Any:
            result = agent.invoke({"messages": [HumanMessage(USER_TEXT)]}, config=payload_config)
            if after is not None:
                after()
            return result

        return run

    def seamscope_agent(providers: Providers | None) -> Callable[[int], Any]:
        opus, haiku = ScriptedChat(model_name=OPUS), ScriptedChat(model_name=HAIKU)
        palette = [*PALETTE, "delete_rows"]
        layer = lc_layer(providers, palette)
        middleware = SeamscopeMiddleware(
            layer,
            models={OPUS: opus, HAIKU: haiku},
            role=AGENT,
            scope={"tables": ["brand_sales"]},
        )
        palette.append(RECALL_TOOL)  # the recall tool, routed to the role
        agent = create_agent(opus, tools, middleware=[middleware])
        return invoker(agent, lambda: layer.end_conversation(CONVERSATION))

    plain = create_agent(ScriptedChat(model_name=OPUS), tools)
    passing = create_agent(ScriptedChat(model_name=OPUS), tools, middleware=[PassThrough()])
    originals = Originals()
    b, c, d, e = (Providers.otlp(sink) for _ in range(4))
    oi = Toggle(LangChainInstrumentor(), originals, tracer_provider=c.tracer_provider)
    oi_e = Toggle(LangChainInstrumentor(), originals, tracer_provider=e.tracer_provider)
    ol = Toggle(
        LangchainInstrumentor(),
        originals,
        tracer_provider=d.tracer_provider,
        meter_provider=d.meter_provider,
    )
    everyone = (b, c, d, e)  # (a) listens to all: an instrumentation left on would show there
    cases = [
        Case("lc-a", "(a) no instrumentation", "", invoker(plain), listen=everyone),
        Case(
            "lc-a-mw",
            "(a') a pass-through middleware (reference)",
            "",
            invoker(passing),
            listen=everyone,
        ),
        Case(
            "lc-b",
            "(b) seamscope middleware",
            "otlp",
            seamscope_agent(b),
            providers=(b,),
            expected=TURN,
        ),
        Case(
            "lc-b0",
            "(b0) seamscope's decisions and adapter alone (no telemetry: reference)",
            "",
            seamscope_agent(None),
            listen=everyone,
        ),
        Case(
            "lc-c",
            "(c) OpenInference",
            "otlp",
            invoker(plain),
            providers=(c,),
            enter=oi.on,
            exit=oi.off,
        ),
        Case(
            "lc-d",
            "(d) OpenLLMetry",
            "otlp",
            invoker(plain),
            providers=(d,),
            enter=ol.on,
            exit=ol.off,
        ),
        Case(
            "lc-e",
            "(e) seamscope + OpenInference",
            "otlp",
            seamscope_agent(e),
            providers=(e,),
            enter=oi_e.on,
            exit=oi_e.off,
            expected=TURN,
        ),
    ]
    # the loop really ran as scripted: 2 model calls, 1 tool, the redirect under seamscope
    for case in cases:
        case.enter()
        try:
            executed.clear()
            result = case.run(0)
        finally:
            case.exit()
        messages = result["messages"]
        assert messages[-1].content == FINAL_TEXT, (case.key, messages[-1])
        assert sum(isinstance(m, AIMessage) for m in messages) == 2, case.key
        expected = "fetch_data" if case.expected is not None or case.key == "lc-b0" else "run_block"
        assert executed == [expected], (case.key, executed)
    for providers in everyone:
        providers.flush()
    return cases


# -- part 2: symfonic-core ------------------------------------------------------------


def symfonic_cases(
    sink: Sink, loop: asyncio.AbstractEventLoop
) -> tuple[list[Case], list[Callable[[], Any]]]:
    """Part 2's configurations (and the agents' closers): off, symfonic's own layer,
    seamscope's ``instrument_symfonic`` (and both), in a plain and a (gate) scenario."""
    from langchain_core.messages import HumanMessage as Human
    from symfonic.agent import SymfonicAgent
    from symfonic.agent.config import FrameworkConfig
    from symfonic.core.config import AgentConfig
    from symfonic.core.config import ModelConfig as SymModel
    from symfonic.core.contracts import ToolCallPolicy as SymPolicy

    class SymScripted(ScriptedChat):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self  # symfonic binds the tools on every iteration

    class Provider:
        def __init__(self, model: Any) -> None:
            self.model = model

        def get_chat_model(self, config: Any) -> Any:
            return self.model

        def supports_thinking(self) -> bool:
            return False

        def supports_streaming(self) -> bool:
            return True

        def supports_forced_tool_choice(self, config: Any) -> bool:
            return True

    def user_text(ctx: Any) -> str:
        for message in reversed(list(ctx.messages)):
            if isinstance(message, Human):
                return str(message.content).lower()
        return ""

    policies = (
        SymPolicy(
            name="docs_lookup",
            match=lambda ctx: "docs" in user_text(ctx),
            model=SymModel(model_name=SONNET),
            when_tool="search",
            redirect_to="web_search",
        ),
        SymPolicy(
            name="sales_data_read",
            match=lambda ctx: "sales" in user_text(ctx),
            model=SymModel(model_name=HAIKU),
            when_tool="run_block",
            redirect_to="fetch_data",
            guard=lambda ctx: True,
            args_transform=lambda args, ctx: {"source": args.get("block", ""), "rows": 5},
        ),
    )
    executed: list[str] = []
    plain = FrameworkConfig.with_defaults().model_copy(
        update={
            "agent": AgentConfig(model=SymModel(model_name=OPUS)),
            "lazy_tooling": False,
            "messages_cache_policy": "off",
            "tool_call_policies": policies,
            "role_tools": {"action": frozenset(PALETTE)},
        }
    )
    # symfonic's size-tiered offload, with its default priors and thresholds
    offloading = plain.model_copy(
        update={
            "tool_result_compaction_enabled": True,
            "tool_result_offload_enabled": True,
            "tool_result_compaction_keep_last_n": 0,
        }
    )
    earlier_turn = [
        Human(content="Dump last year's sales table."),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "run_block", "args": {"block": "dump"}, "id": "c0", "type": "tool_call"}
            ],
        ),
        ToolMessage(content="x" * 100_000, tool_call_id="c0", name="run_block"),
        AIMessage(content="Here is the dump."),
    ]
    closers: list[Callable[[], Any]] = []

    def agent_for(cfg: Any) -> Any:
        agent = SymfonicAgent(
            model_provider=Provider(SymScripted(model_name=OPUS)),
            config=cfg,
            tools=lc_tools(executed),
        )
        loop.run_until_complete(agent.__aenter__())
        closers.append(lambda: loop.run_until_complete(agent.__aexit__(None, None, None)))
        return agent

    def with_own_layer(cfg: Any, exporter: CapturingSpanExporter) -> Any:
        cfg = cfg.model_copy(update={"otel_enabled": True})
        # symfonic's own exporter is OTLP/gRPC to a collector; these are the hooks its factory
        # reads (exporter.build_if_enabled) to take another exporter and a batch processor:
        # the same OTLP/HTTP exporter to the sink as everyone else's
        object.__setattr__(cfg, "_otel_test_span_exporter", exporter)
        object.__setattr__(cfg, "_otel_test_use_batch", True)
        return cfg

    def runner(agent: Any, history: list[Any] | None, holder: list[Any]) -> Callable[[int], Any]:
        def run(i: int) -> Any:
            kwargs = {} if history is None else {"history": [m.model_copy() for m in history]}
            if holder:
                with holder[0].conversation(CONVERSATION):
                    return loop.run_until_complete(agent.run(USER_TEXT, **kwargs))
            return loop.run_until_complete(agent.run(USER_TEXT, **kwargs))

        return run

    def own_layer(cfg: Any) -> tuple[Any, Providers]:
        exporter = CapturingSpanExporter(f"{sink.url}/v1/traces")
        agent = agent_for(with_own_layer(cfg, exporter))
        # symfonic's own TracerProvider, built by its factory
        return agent, Providers.spans_only(agent._otel_handles.tracer, exporter)

    cases: list[Case] = []
    scenarios = (
        ("sym", plain, None, ("seamscope", "both"), SYM_TURN),
        ("sym-gate", offloading, earlier_turn, ("seamscope",), SYM_GATE_TURN),
    )
    for prefix, cfg, history, kinds, expected in scenarios:
        note = " (gate)" if history is not None else ""
        off = agent_for(cfg)
        own, own_providers = own_layer(cfg)
        group: list[Case] = [
            Case(
                f"{prefix}-own",
                f"symfonic's own OTel layer{note}",
                "own",
                runner(own, history, []),
                providers=(own_providers,),
            ),
        ]
        # seamscope is installed for each block and removed after it, like the LangChain
        # peers: it wraps symfonic's gate function process-wide while installed.
        for kind in kinds:
            providers = Providers.otlp(sink)
            chosen: tuple[Providers, ...] = (providers,)
            if kind == "both":
                agent, second = own_layer(cfg)
                chosen += (second,)
                label = "seamscope + symfonic's own layer"
            else:
                agent = agent_for(cfg)
                label = "seamscope instrument_symfonic"
            holder: list[Any] = []

            def on(
                agent: Any = agent, holder: list[Any] = holder, providers: Any = providers
            ) -> None:
                holder.append(
                    instrument_symfonic(agent, agent_name=AGENT, **layer_telemetry(providers))
                )

            def done(holder: list[Any] = holder) -> None:
                holder.pop().uninstrument()

            group.append(
                Case(
                    f"{prefix}-{kind}",
                    label + note,
                    "otlp",
                    runner(agent, history, holder),
                    providers=chosen,
                    enter=on,
                    exit=done,
                    expected=expected,
                )
            )
        listen = tuple(p for case in group for p in case.providers)
        cases += [Case(f"{prefix}-off", f"off{note}", "", runner(off, history, []), listen=listen)]
        cases += group
    for case in cases:
        case.enter()
        try:
            executed.clear()
            result = case.run(0)
        finally:
            case.exit()
        assert result.final_response == FINAL_TEXT, (case.key, result.final_response)
        assert executed == ["fetch_data"], (case.key, executed)
    return cases, closers
