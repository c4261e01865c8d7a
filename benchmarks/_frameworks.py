"""Parts 3 to 5 of the peer benchmark: the decision core through ``DecisionLayer``,
the OpenAI Agents SDK's ``Runner.run`` and pydantic-ai's ``Agent.run``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from _harness import Case, Providers, Sink
from _scenario import (
    AGENT,
    CONVERSATION,
    FINAL_TEXT,
    HAIKU,
    OPUS,
    PALETTE,
    SONNET,
    TURN,
    USAGE_IN,
    USAGE_OUT,
    USER_TEXT,
    async_tools,
    layer_telemetry,
    lc_layer,
)

from seamscope.adapters import DecisionLayer
from seamscope.decisions import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    Message,
    ModelConfig,
    NoopObserver,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SafetyLevel,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
)
from seamscope.loop import RECALL_TOOL

__all__ = ["CoreLoop", "core_cases", "mock_openai", "openai_agents_cases", "pydantic_ai_cases"]

CORE_COLLECT_EVERY = 100  # iterations between two metric collections in part 3
OA_TURN = TURN  # the same decisions through the Agents SDK and pydantic-ai
PAI_TURN = TURN

# -- part 3: the decision core ---------------------------------------------------------

CORE_PRICING = PricingTable(
    {HAIKU: {"input": 1, "output": 5}, OPUS: {"input": 5, "output": 25}},
    use_genai_prices=False,
)
CORE_MESSAGES = (
    Message("system", "You are an analyst."),
    Message("user", "show me last month's sales by brand as a chart"),
)


def _false(ctx: Any) -> bool:
    return False


def _true(ctx: Any) -> bool:
    return True


class CoreLoop:
    """One ReAct iteration's decisions through the framework-free ``DecisionLayer`` API.

    A block runs inside one open turn (``enter``); each call is one
    ``turn.iteration()``: select among the offered tools, the PRE seam, the
    POST seam over two emitted calls, one gate call. ``exit`` closes the turn
    and ends the conversation (settling the offloads the block fired).
    """

    def __init__(self, policies: int, tools: int, telemetry: dict[str, Any]) -> None:
        names = ["run_block", "fetch_data", "plot_chart", "hydrate_context"]
        names += [f"tool_{i:03d}" for i in range(max(0, tools - len(names)))]
        self.names = tuple(names)
        specs = []
        for i, name in enumerate(self.names):
            safety = SafetyLevel.DESTRUCTIVE if i >= 4 and i % 7 == 0 else SafetyLevel.READ
            keywords = (f"kw{i % 5}",) if i >= 4 and i % 3 == 0 else ()
            specs.append(ToolSpec(name, safety, trigger_keywords=keywords))
        catalog = ToolCatalog(specs)
        palette = list(self.names[: max(4, tools // 2)])
        stages = [
            ForcedChoiceStage(resolver=lambda ctx: None),
            IntentRoutingStage(
                verdict=IntentVerdict("action", ["kw0", "kw1"]),
                trigger_keywords=catalog.trigger_keywords(),
            ),
            LazyRoutingStage(),
            RolePaletteStage(resolver=lambda role: palette, role=AGENT),
            PolicyStage(catalog=catalog, max_safety_level=SafetyLevel.WRITE),
            AllowlistStage(always_include=["hydrate_context"], catalog=catalog),
        ]
        rules = [
            ToolCallPolicy(
                f"policy_{i:04d}", match=_false, model=ModelConfig(SONNET), redirect_to="plot_chart"
            )
            for i in range(policies - 1)
        ]
        rules.append(
            ToolCallPolicy(
                "sales_data_read",
                match=_true,
                model=ModelConfig(HAIKU),
                when_tool="run_block",
                redirect_to="fetch_data",
                guard=_true,
                args_transform=lambda args, ctx: {**args, "source": "warehouse"},
            )
        )
        self.layer = DecisionLayer(
            default_model=OPUS,
            policies=rules,
            stages=stages,
            catalog=catalog,
            agent_name=AGENT,
            pricing=CORE_PRICING,
            **telemetry,
        )
        self.messages = list(CORE_MESSAGES)
        emitted = (
            ToolCall("call_1", "run_block", {"sql": "select brand, sum(amount) from sales"}),
            ToolCall("call_2", "plot_chart", {"kind": "bar"}),
        )
        self.emitted = emitted
        self.reply = Message("assistant", "", emitted)
        self._turn_cm: Any = None
        self._turn: Any = None

    def enter(self) -> None:
        self._turn_cm = self.layer.turn(CONVERSATION, self.messages, role=AGENT)
        self._turn = self._turn_cm.__enter__()

    def exit(self) -> None:
        self._turn_cm.__exit__(None, None, None)
        self._turn_cm = self._turn = None
        self.layer.end_conversation(CONVERSATION)

    def iteration(self, index: int) -> Any:
        with self._turn.iteration() as it:
            selection = it.select_tools(self.names)
            pre = it.pre_model()
            post = it.post_model(self.reply)
            gate = it.offload(post.calls[0], 20_000.0)
        return selection, pre, post, gate


def core_cases(sink: Sink, policies: int, tools: int) -> list[Case]:
    """Decisions alone (a ``NoopObserver``, no-op providers) and with telemetry."""
    from opentelemetry import metrics, trace

    def case(key: str, label: str, kind: str, loop: CoreLoop, **extra: Any) -> Case:
        return Case(
            key,
            label,
            kind,
            loop.iteration,
            enter=loop.enter,
            exit=loop.exit,
            collect_every=CORE_COLLECT_EVERY,
            **extra,
        )

    noop = CoreLoop(
        policies,
        tools,
        {
            "observer": NoopObserver(),
            "tracer_provider": trace.NoOpTracerProvider(),
            "meter_provider": metrics.NoOpMeterProvider(),
        },
    )
    providers = Providers.otlp(sink)
    loop = CoreLoop(policies, tools, layer_telemetry(providers))
    loop.enter()
    try:
        selection, pre, post, gate = loop.iteration(0)
    finally:
        loop.exit()
    assert pre.model.model_name == HAIKU and post.calls[0].name == "fetch_data"
    assert len(selection.offered) == tools and gate.fire
    return [
        case(f"core-{policies}x{tools}-noop", "decisions alone (NoopObserver)", "", noop),
        case(
            f"core-{policies}x{tools}",
            "decisions + telemetry",
            "otlp",
            loop,
            providers=(providers,),
        ),
    ]


# -- parts 4 and 5: the same turn in the OpenAI Agents SDK and in pydantic-ai ------------------


def _responses_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API answer: ``run_block`` after the user, text after a function output."""
    items = body.get("input") or []
    last = items[-1] if isinstance(items, list) and items else {}
    if isinstance(last, dict) and last.get("type") == "function_call_output":
        output: dict[str, Any] = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
        }
    else:
        output = {
            "type": "function_call",
            "id": "fc_call_1",
            "call_id": "call_1",
            "name": "run_block",
            "arguments": json.dumps({"block": "sales_q3", "limit": 5}),
            "status": "completed",
        }
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": body["model"],
        "status": "completed",
        "output": [output],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": USAGE_IN,
            "output_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def mock_openai(calls: dict[str, int]) -> Any:
    """An ``AsyncOpenAI`` client over an in-process ``httpx.MockTransport`` answering the
    Responses API from a script (``calls``: requests per model name)."""
    import httpx
    from openai import AsyncOpenAI

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls[body["model"]] = calls.get(body["model"], 0) + 1
        return httpx.Response(200, json=_responses_reply(body))

    return AsyncOpenAI(
        api_key="sk-bench",
        base_url="http://openai.invalid/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        max_retries=0,
    )


def openai_agents_cases(sink: Sink, loop: asyncio.AbstractEventLoop) -> list[Case]:
    """Part 4's configurations. The model is the SDK's own ``OpenAIResponsesModel`` on a
    mock transport, so the SDK opens its model (response) span as in real use."""
    from agents import (
        Agent,
        FunctionTool,
        Model,
        OpenAIResponsesModel,
        RunConfig,
        RunHooks,
        Runner,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.instrumentation.openai_agents import (
        OpenAIAgentsInstrumentor as OpenLLMetryAgentsInstrumentor,
    )

    from seamscope.adapters._kit import RECALL
    from seamscope.adapters.openai_agents import SeamscopeRunner

    class CapturingBackendExporter(BackendSpanExporter):
        """The SDK's own exporter (JSON over HTTP), to the sink; keeps items while capturing."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.capturing = False
            self.kept: list[Any] = []

        def export(self, items: list[Any]) -> None:
            if self.capturing:
                self.kept.extend(items)
            super().export(items)

    calls: dict[str, int] = {}
    client = mock_openai(calls)
    executed: list[str] = []
    tools = [function_tool(f) for f in async_tools(executed)]  # schemas built once, here
    opus, haiku = OpenAIResponsesModel(OPUS, client), OpenAIResponsesModel(HAIKU, client)
    plain = Agent(name=AGENT, instructions="You analyse sales.", model=opus, tools=tools)
    config = RunConfig(workflow_name="bench")

    # The SDK's default processor exports to OpenAI: replaced by none, tracing off between blocks.
    set_trace_processors([])
    set_tracing_disabled(True)
    own_exporter = CapturingBackendExporter(
        api_key="sk-bench", endpoint=f"{sink.url}/v1/traces/ingest"
    )
    own_processor = BatchTraceProcessor(own_exporter)
    openinference = OpenAIAgentsInstrumentor()
    openllmetry = OpenLLMetryAgentsInstrumentor(replace_existing_processors=True)

    def own_on() -> None:
        set_trace_processors([own_processor])
        set_tracing_disabled(False)

    def tracing_off() -> None:
        set_tracing_disabled(True)
        set_trace_processors([])

    def oi_on(providers: Providers) -> Callable[[], None]:
        def on() -> None:
            set_tracing_disabled(False)
            # exclusive (its default): the SDK's processors are its own OTel bridge alone
            openinference.instrument(tracer_provider=providers.tracer_provider, skip_dep_check=True)

        return on

    def oi_off() -> None:
        openinference.uninstrument()
        tracing_off()

    def ol_on(providers: Providers) -> Callable[[], None]:
        def on() -> None:
            set_tracing_disabled(False)
            openllmetry.instrument(
                tracer_provider=providers.tracer_provider,
                meter_provider=providers.meter_provider,
                skip_dep_check=True,
            )

        return on

    def ol_off() -> None:
        openllmetry.uninstrument()  # it leaves its processor registered: removed here
        tracing_off()

    def plain_run(i: int) -> Any:
        return loop.run_until_complete(Runner.run(plain, USER_TEXT, run_config=config))

    def seamscope_run(providers: Providers | None) -> Callable[[int], Any]:
        layer = lc_layer(providers, [*PALETTE, "delete_rows", RECALL_TOOL])
        runner = SeamscopeRunner(
            layer, {OPUS: opus, HAIKU: haiku}, scope={"tables": ["brand_sales"]}
        )
        agent = plain.clone(tools=[*tools, runner.recall_tool])

        def run(i: int) -> Any:
            result = loop.run_until_complete(
                runner.run(agent, USER_TEXT, run_config=config, conversation=CONVERSATION)
            )
            layer.end_conversation(CONVERSATION)
            return result

        return run

    # what the SDK and the client cost with the tools seamscope's selection keeps (its recall
    # tool aside): the part of seamscope's overhead that narrowing saves back
    narrowed = plain.clone(tools=[t for t in tools if t.name in OA_TURN.selected])

    def narrowed_run(i: int) -> Any:
        return loop.run_until_complete(Runner.run(narrowed, USER_TEXT, run_config=config))

    # what the SDK charges for any adapter of seamscope's shape, doing nothing else: run
    # hooks, a RunConfig copy with a model wrapper (sending only the tools seamscope
    # selects), an input filter and an error formatter, the recall tool on the agent
    class PassHooks(RunHooks[Any]):
        """The run hooks SeamscopeRunner implements, each doing nothing."""

        async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
            return None

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            return None

        async def on_agent_start(self, context: Any, agent: Any) -> None:
            return None

        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            return None

        async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
            return None

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            return None

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            return None

    class PassModel(Model):
        """A model wrapper sending the model it wraps only the tools seamscope
        selects, the recall tool once the input holds a tool's output (as
        seamscope offers it once the input holds a stub)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            answered = any(
                isinstance(item, dict) and item.get("type") == "function_call_output"
                for item in kwargs["input"]
            )
            kwargs["tools"] = [
                t
                for t in kwargs["tools"]
                if t.name in OA_TURN.selected and (answered or t.name != RECALL.name)
            ]
            return await self.inner.get_response(*args, **kwargs)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def pass_filter(data: Any) -> Any:
        return data.model_data

    def pass_formatter(args: Any) -> None:
        return None

    async def recall(ctx: Any, arguments: str) -> str:
        return arguments

    recall_tool = FunctionTool(
        name=RECALL.name,
        description=RECALL.description,
        params_json_schema=RECALL.schema,
        on_invoke_tool=recall,
    )
    passing = plain.clone(tools=[*tools, recall_tool])

    def pass_run(i: int) -> Any:
        passed = dataclasses.replace(
            config,
            model=PassModel(opus),
            call_model_input_filter=pass_filter,
            tool_error_formatter=pass_formatter,
        )
        return loop.run_until_complete(
            Runner.run(passing, USER_TEXT, run_config=passed, hooks=PassHooks())
        )

    c, d, e, f = (Providers.otlp(sink) for _ in range(4))
    cases = [
        Case(
            "oa-a", "(a) no instrumentation (SDK tracing off)", "", plain_run, listen=(c, d, e, f)
        ),
        Case(
            "oa-a-narrow",
            "(a') no instrumentation, only the tools seamscope selects (reference)",
            "",
            narrowed_run,
            listen=(c, d, e, f),
        ),
        Case(
            "oa-a-pass",
            "(a'') a pass-through adapter of seamscope's shape (reference)",
            "",
            pass_run,
            listen=(c, d, e, f),
        ),
        Case(
            "oa-b-own",
            "(b) the SDK's own tracing (its exporter, to the sink)",
            "own",
            plain_run,
            enter=own_on,
            exit=tracing_off,
            extra_flush=own_processor.force_flush,
        ),
        Case(
            "oa-c",
            "(c) OpenInference",
            "otlp",
            plain_run,
            providers=(c,),
            enter=oi_on(c),
            exit=oi_off,
        ),
        Case(
            "oa-d",
            "(d) seamscope SeamscopeRunner",
            "otlp",
            seamscope_run(d),
            providers=(d,),
            expected=OA_TURN,
        ),
        Case(
            "oa-d0",
            "(d0) seamscope's decisions and adapter alone (no telemetry: reference)",
            "",
            seamscope_run(None),
            listen=(c, d, e, f),
        ),
        Case(
            "oa-e",
            "(e) seamscope + OpenInference",
            "otlp",
            seamscope_run(e),
            providers=(e,),
            enter=oi_on(e),
            exit=oi_off,
            expected=OA_TURN,
        ),
        Case(
            "oa-f",
            "(f) OpenLLMetry",
            "otlp",
            plain_run,
            providers=(f,),
            enter=ol_on(f),
            exit=ol_off,
        ),
    ]
    # the loop really ran as scripted: 2 model calls, 1 tool, the redirect under seamscope
    for case in cases:
        case.enter()
        try:
            executed.clear()
            calls.clear()
            result = case.run(0)
        finally:
            case.exit()
        assert result.final_output == FINAL_TEXT, (case.key, result.final_output)
        seam = case.expected is not None or case.key.endswith("-d0")
        assert calls == ({HAIKU: 2} if seam else {OPUS: 2}), (case.key, calls)
        assert executed == ["fetch_data" if seam else "run_block"], (case.key, executed)
    for p in (c, d, e, f):
        p.flush()

    def own_spans() -> list[Any]:
        """What the SDK's own exporter is handed for one run (its traces and spans)."""
        own_on()
        try:
            own_processor.force_flush()
            own_exporter.kept.clear()
            own_exporter.capturing = True
            plain_run(0)
            own_processor.force_flush()
        finally:
            own_exporter.capturing = False
            tracing_off()
        kept, own_exporter.kept = own_exporter.kept, []
        return kept

    own = next(case for case in cases if case.key == "oa-b-own")
    own.capture_own = own_spans  # type: ignore[attr-defined]
    return cases


def pydantic_ai_cases(sink: Sink, loop: asyncio.AbstractEventLoop) -> list[Case]:
    """Part 5's configurations, each instrumented one with providers of its own."""
    from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import AbstractCapability, Instrumentation
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import RequestUsage

    from seamscope.adapters.pydantic_ai import SeamscopeCapability

    calls: dict[str, int] = {OPUS: 0, HAIKU: 0}

    def scripted(name: str) -> FunctionModel:
        """Answers from the last request: ``run_block`` after the user, text after a return."""

        def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
            calls[name] += 1
            last = messages[-1]
            usage = RequestUsage(input_tokens=USAGE_IN, output_tokens=USAGE_OUT)
            if isinstance(last, ModelRequest) and any(
                isinstance(part, ToolReturnPart) for part in last.parts
            ):
                return ModelResponse(parts=[TextPart(FINAL_TEXT)], usage=usage)
            call = ToolCallPart(
                "run_block", {"block": "sales_q3", "limit": 5}, tool_call_id="call_1"
            )
            return ModelResponse(parts=[call], usage=usage)

        return FunctionModel(answer, model_name=name)

    executed: list[str] = []
    tools = async_tools(executed)
    opus, haiku = scripted(OPUS), scripted(HAIKU)

    def agent(*capabilities: Any) -> Any:
        return Agent(
            opus,
            name=AGENT,
            instructions="You analyse sales.",
            tools=tools,
            capabilities=list(capabilities),
        )

    class PassThrough(AbstractCapability[Any]):
        """The hooks SeamscopeCapability implements, each doing nothing: what
        pydantic-ai charges for a capability with them."""

        async def for_run(self, ctx: Any) -> Any:
            return self

        async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
            return await handler()

        async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
            return tool_defs

        async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
            return await handler(request_context)

        async def after_model_request(
            self, ctx: Any, *, request_context: Any, response: Any
        ) -> Any:
            return response

        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            return await handler(args)

        async def after_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any
        ) -> Any:
            return result

    def instrumentation(providers: Providers) -> Any:
        return Instrumentation(
            settings=InstrumentationSettings(
                tracer_provider=providers.tracer_provider,
                meter_provider=providers.meter_provider,
            )
        )

    def runner(target: Any, layer: Any = None) -> Callable[[int], Any]:
        def run(i: int) -> Any:
            result = loop.run_until_complete(target.run(USER_TEXT, conversation_id=CONVERSATION))
            if layer is not None:
                layer.end_conversation(CONVERSATION)
            return result

        return run

    def seamscope(providers: Providers | None, *others: Any) -> Callable[[int], Any]:
        layer = lc_layer(providers, [*PALETTE, "delete_rows", RECALL_TOOL])
        capability = SeamscopeCapability(
            layer, {OPUS: opus, HAIKU: haiku}, scope={"tables": ["brand_sales"]}
        )
        return runner(agent(capability, *others), layer)

    b, d, e = (Providers.otlp(sink) for _ in range(3))
    # OpenInference's pydantic-ai instrumentation is a span processor that rewrites the spans
    # of pydantic-ai's own instrumentation as they end, before the batch processor queues them
    c = Providers.otlp(sink, first=(OpenInferenceSpanProcessor(),))
    cases = [
        Case("pai-a", "(a) no instrumentation", "", runner(agent()), listen=(b, c, d, e)),
        Case(
            "pai-a-cap",
            "(a') a pass-through capability with seamscope's hooks (reference)",
            "",
            runner(agent(PassThrough())),
            listen=(b, c, d, e),
        ),
        Case(
            "pai-b",
            "(b) pydantic-ai's Instrumentation",
            "otlp",
            runner(agent(instrumentation(b))),
            providers=(b,),
        ),
        Case(
            "pai-c",
            "(c) OpenInference (its span processor on (b))",
            "otlp",
            runner(agent(instrumentation(c))),
            providers=(c,),
        ),
        Case(
            "pai-d",
            "(d) seamscope SeamscopeCapability",
            "otlp",
            seamscope(d),
            providers=(d,),
            expected=PAI_TURN,
        ),
        Case(
            "pai-d0",
            "(d0) seamscope's decisions and adapter alone (no telemetry: reference)",
            "",
            seamscope(None),
            listen=(b, c, d, e),
        ),
        Case(
            "pai-e",
            "(e) seamscope beside pydantic-ai's Instrumentation",
            "otlp",
            seamscope(e, instrumentation(e)),
            providers=(e,),
            expected=PAI_TURN,
        ),
    ]
    for case in cases:
        executed.clear()
        calls.update(dict.fromkeys(calls, 0))
        result = case.run(0)
        assert result.output == FINAL_TEXT, (case.key, result.output)
        seam = case.expected is not None or case.key.endswith("-d0")
        assert (calls[OPUS], calls[HAIKU]) == ((0, 2) if seam else (2, 0)), case.key
        assert executed == ["fetch_data" if seam else "run_block"], (case.key, executed)
    for p in (b, c, d, e):
        p.flush()
    return cases
