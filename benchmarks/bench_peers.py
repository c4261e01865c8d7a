"""seamscope next to its peers, on the same scripted agent loops, in one run.

Usage::

    .venv/bin/pip install -e '.[dev,bench]'      # the peers are in the bench extra
    .venv/bin/python benchmarks/bench_peers.py [--quick] [--repeats N] [--invokes K] [--json PATH]
        [--parts lc,sym,core,oa,pai]
    .venv/bin/python benchmarks/bench_peers.py --run-only KEY [--iterations N]

Nothing leaves the process: the chat models are scripted, every span
exporter drops what it is given, and the Prometheus endpoint that
``configure()`` starts (on 127.0.0.1, a free port, a private registry) is
never scraped.

Part 1, LangChain v1 ``create_agent``. One invoke is one user turn: two
model calls and one tool call, twelve tools offered, a tool output of
8 000 characters (2 000 tokens). The model (``ScriptedChat``) answers from
the last message it is sent: a tool call ``run_block`` after the user's
message, a text answer after a tool message; its ``bind_tools`` binds each
tool's OpenAI schema (computed once per tool). Configurations:

(a) no instrumentation;
(a') for reference, a pass-through middleware with the four hooks seamscope's
    uses (before/after agent, wrap model and tool calls), doing nothing: what
    LangChain itself charges for any middleware;
(b) seamscope's ``SeamscopeMiddleware``: a role-palette, a safety-policy and
    an allowlist stage; three policies (the sales policy wins the PRE seam,
    picks the cheaper model and redirects ``run_block`` to ``fetch_data``
    through a guard); the offload gate asked about outputs from 1 000 tokens,
    so the 2 000-token output is priced (and offloaded); every invoke ends its
    conversation (``layer.end_conversation``), which settles that offload;
(c) OpenInference's ``LangChainInstrumentor`` (openinference-instrumentation-langchain);
(d) OpenLLMetry's ``LangchainInstrumentor`` (opentelemetry-instrumentation-langchain);
(e) (b) and (c) together.

Each on two sets of providers: ``sdk``, the SDK's defaults (a
``TracerProvider`` with a ``BatchSpanProcessor`` and a span exporter that
drops every batch, a ``MeterProvider`` with an ``InMemoryMetricReader`` that
is never read), and ``cfg``, the providers ``seamscope.telemetry.configure()``
builds (``prometheus_port=0`` and a private registry: its Prometheus reader;
the same dropping exporter passed as ``extra_span_processors``; no OTLP).
The peers keep their defaults (both record message content). The peers'
instrumentors are switched on for each of their blocks and off after it;
OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrappers in place, so the
script also puts back every attribute the two peers wrap, and checks it.

Part 2, symfonic-core's ``SymfonicAgent.run``, the same turn (two model calls,
one tool call, the tool redirected by a symfonic policy): off; symfonic's own
OpenTelemetry layer (``otel_enabled=True``; its own ``TracerProvider`` with a
``BatchSpanProcessor``, given the dropping exporter through the test hook
symfonic's factory reads, since its default exporter is OTLP/gRPC); seamscope's
``instrument_symfonic`` on ``sdk`` and ``cfg``, installed for each block and
removed after it (it wraps symfonic's gate function process-wide); both. The
``gate`` scenario repeats off, own and seamscope with an earlier turn in the
history holding a 100 000-character tool output and symfonic's offload on,
so symfonic's offload gate prices it on both model calls.

Part 3, the decision core through the framework-free ``DecisionLayer`` API
(its ``SelectionPipeline``, ``SeamRouter`` and ``OffloadGate``): one
``turn.iteration()`` (six stages over T offered tools, the PRE seam, the POST
seam over two emitted calls, one gate call that fires) for P policies, with a
``NoopObserver`` (and no-op providers) and with telemetry on ``sdk`` and on
``cfg``. A block runs in one open turn; the conversation is ended (its
offloads settled) after the block, untimed. The winning policy is the last
one, so every policy is evaluated at the PRE seam and for each emitted call
(3P evaluations per iteration).

Part 4, the OpenAI Agents SDK's ``Runner.run``, the same turn: a scripted
``agents`` ``Model`` (a ``run_block`` call after the user's message, a text
answer after a function call output), the twelve tools as async function
tools, the same 8 000-character output. The SDK's tracing to OpenAI is off
throughout (its processors replaced, by none between blocks; tracing
disabled except in (b), (c) and (e)). Configurations: (a) no
instrumentation; (b) the SDK's own tracing (not OpenTelemetry) handing every
trace and span to a processor that drops them; (c) OpenInference's
``OpenAIAgentsInstrumentor`` on ``sdk`` (switched on for each block, off
after it); (d) seamscope's ``SeamscopeRunner`` with Part 1's layer on
``sdk``, every run ending its conversation; (e) (c) and (d) together.

Part 5, pydantic-ai's ``Agent.run``, the same turn: ``FunctionModel`` s (a
``run_block`` call after the user, text after a tool return), the twelve
tools as async functions. (a) no instrumentation; (b) pydantic-ai's own
``Instrumentation`` capability on ``sdk``; (c) OpenInference's
instrumentation for pydantic-ai, which is a span processor
(``OpenInferenceSpanProcessor``) rewriting the spans of pydantic-ai's own
instrumentation: (b)'s capability on another set of SDK defaults with that
processor before the batch processor; (d) seamscope's ``SeamscopeCapability``
with Part 1's layer on ``sdk``; (e) (d) beside (b). These two parts have no
target: they print the overhead ratios of seamscope to the others.

Each configuration is timed in blocks of K invokes (or iterations) with the
garbage collector off, the configurations of a part interleaved, R blocks
each; instrumenting and uninstrumenting happen outside the blocks. Reported:
the median block; an overhead is the median of the per-block differences to
the uninstrumented configuration of the same repeat, a ratio the median of
the per-block ratios. Wall time decides the targets; the process's CPU time
(all its threads) is shown next to it, since on a shared machine other
processes inflate wall time and not CPU time. Spans, attributes, events and OTLP protobuf bytes
(``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans``) are counted
on the spans one invoke really produced, captured from the same providers
after the warm-up. The nine decision facts are detected from those spans:
a fact is recorded when a span carries the attribute keys (and events) of
``seamscope.telemetry.conventions`` that state it.

Counting instructions instead of time (no noise from the host): run one
configuration untimed under callgrind with two counts and divide the
difference by the difference of the counts (it cancels start-up; the same
three warm-up invokes run before either count; the garbage collector is off,
so a count repeats to about 0.1 M instructions)::

    for n in 0 40; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/bench_peers.py --run-only lc-b-sdk --iterations $n \\
        2>&1 | grep 'Collected'
    done

Keys: ``lc-a``, ``lc-{b,c,d,e}-{sdk,cfg}``, ``sym-off``, ``sym-own``,
``sym-seamscope-{sdk,cfg}``, ``sym-both-{sdk,cfg}``, ``sym-gate-off``,
``sym-gate-own``, ``sym-gate-seamscope-{sdk,cfg}``, ``core-PxT-{noop,sdk,cfg}``
(e.g. ``core-1000x500-cfg``), ``oa-a``, ``oa-b-own``, ``oa-{c,d,e}-sdk``,
``pai-a``, ``pai-{b,c,d,e}-sdk``.

Targets, each a ratio from this run: seamscope's per-invoke overhead on
LangChain <= OpenInference's on the same providers; on symfonic, seamscope's
overhead <= 0.8x that of symfonic's own layer; at 1000 policies x 500 tools,
<= 1 ms of decisions and <= 1 ms more of telemetry per iteration. The
script prints them and exits 0 whatever they say.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import importlib
import json
import logging
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

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
from seamscope.telemetry import configure
from seamscope.telemetry import conventions as c

try:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import BaseTool, tool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.langchain import SeamscopeMiddleware
    from seamscope.adapters.symfonic import instrument_symfonic

    # parts 4 and 5 import what they use; imported here too, to fail early
    for _module in (
        "agents",
        "openinference.instrumentation.openai_agents",
        "pydantic_ai",
        "openinference.instrumentation.pydantic_ai",
    ):
        importlib.import_module(_module)
except ImportError as exc:  # pragma: no cover - depends on the environment
    print(
        f"bench_peers needs the bench extra ({exc}): .venv/bin/pip install -e '.[dev,bench]'",
        file=sys.stderr,
    )
    sys.exit(3)

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
AGENT = "analyst"
CONVERSATION = "bench-conv"
MARKER = "qx7-content-marker"  # in the user's text and the tool output: shows captured content
USER_TEXT = f"How did Q3 sales go? Pull the sales block ({MARKER})."
FINAL_TEXT = "Q3 sales grew 12%."
REPORT = (f"{MARKER} " + "brand,region,amount\n" * 420)[:8_000]
OFFLOAD_THRESHOLD_TOKENS = 1_000
LC_TOOLS = (
    "run_block",
    "fetch_data",
    "search",
    "web_search",
    "summarize",
    "plot_chart",
    "export_report",
    "delete_rows",
    "deploy_service",
    "create_ticket",
    "page_oncall",
    "hydrate_context",
)
SAFETY = {
    "delete_rows": SafetyLevel.DESTRUCTIVE,
    "deploy_service": SafetyLevel.WRITE,
    "run_block": SafetyLevel.WRITE,
    "create_ticket": SafetyLevel.WRITE,
    "page_oncall": SafetyLevel.WRITE,
}
PALETTE = ("run_block", "fetch_data", "search", "web_search", "summarize", "plot_chart")
FACTS = (
    "offered",
    "selected",
    "dropped with reason",
    "model winner",
    "winner source with evaluations",
    "redirect",
    "guard",
    "palette verdict",
    "offload priced terms",
)
TARGET_LC = 1.0  # seamscope overhead / OpenInference overhead
TARGET_SYM = 0.8  # seamscope overhead / symfonic's own layer's overhead
TARGET_CORE_US = 1000.0  # µs of decisions, and µs more of telemetry, at 1000 x 500
WARMUP_RUN_ONLY = 3


# -- providers ----------------------------------------------------------------------


class DroppingExporter(SpanExporter):
    """Accepts every batch and drops it, except while ``capturing``."""

    def __init__(self) -> None:
        self.capturing = False
        self.kept: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.capturing:
            self.kept.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@dataclass
class Providers:
    key: str
    label: str
    tracer_provider: Any
    meter_provider: Any
    exporter: DroppingExporter
    handle: Any = None

    def flush(self) -> None:
        self.tracer_provider.force_flush()

    def shutdown(self) -> None:
        if self.handle is not None:
            self.handle.shutdown()
        else:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()


def sdk_providers(first: Sequence[SpanProcessor] = ()) -> Providers:
    """The SDK's defaults; ``first``: span processors added before the batch processor."""
    exporter = DroppingExporter()
    tracer_provider = TracerProvider()
    for processor in first:
        tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Providers(
        "sdk",
        "SDK defaults (batch, dropping exporter; in-memory metric reader)",
        tracer_provider,
        meter_provider,
        exporter,
    )


def cfg_providers() -> Providers:
    exporter = DroppingExporter()
    handle = configure(
        prometheus_port=0,
        prometheus_registry=CollectorRegistry(),
        extra_span_processors=(BatchSpanProcessor(exporter),),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    return Providers(
        "cfg",
        "configure() (batch, dropping exporter; Prometheus reader, never scraped)",
        handle.tracer_provider,
        handle.meter_provider,
        exporter,
        handle,
    )


def capture(
    exporters: Sequence[DroppingExporter],
    flushes: Sequence[Callable[[], Any]],
    run: Callable[[], Any],
) -> list[ReadableSpan]:
    """The spans ``run()`` produced, read from the exporters of the timed providers."""
    for flush in flushes:
        flush()
    for exporter in exporters:
        exporter.kept.clear()
        exporter.capturing = True
    try:
        run()
        for flush in flushes:
            flush()
    finally:
        for exporter in exporters:
            exporter.capturing = False
    spans = [span for exporter in exporters for span in exporter.kept]
    for exporter in exporters:
        exporter.kept.clear()
    return spans


# -- what a set of spans records -----------------------------------------------------


def _keys(span: ReadableSpan) -> set[str]:
    return set(span.attributes or {})


# newer conventions fold the passed-over evaluations into counts on the seam span
_EVALUATED_COUNT = getattr(c, "ATTR_POLICY_EVALUATED_COUNT", None)


def _has_evaluations(span: ReadableSpan) -> bool:
    if _EVALUATED_COUNT is not None and _EVALUATED_COUNT in _keys(span):
        return True
    return any(
        event.name == c.EVENT_POLICY_EVALUATED and c.ATTR_POLICY_RESULT in (event.attributes or {})
        for event in span.events
    )


FACT_TESTS: dict[str, Callable[[ReadableSpan], bool]] = {
    "offered": lambda s: c.ATTR_SELECTION_OFFERED in _keys(s),
    "selected": lambda s: c.ATTR_SELECTION_SELECTED in _keys(s),
    "dropped with reason": lambda s: {c.ATTR_STAGE_DROPPED, c.ATTR_STAGE_REASON} <= _keys(s),
    "model winner": lambda s: {c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL} <= _keys(s),
    "winner source with evaluations": lambda s: (
        c.ATTR_SEAM_WINNER_SOURCE in _keys(s) and _has_evaluations(s)
    ),
    "redirect": lambda s: {c.ATTR_DISPATCH_REDIRECT_TO, c.ATTR_DISPATCH_FINAL_TOOL} <= _keys(s),
    "guard": lambda s: c.ATTR_DISPATCH_GUARD in _keys(s),
    "palette verdict": lambda s: c.ATTR_DISPATCH_PALETTE_GATE in _keys(s),
    "offload priced terms": lambda s: (
        {
            c.ATTR_OFFLOAD_NET_SAVING_USD,
            c.ATTR_OFFLOAD_REPREFILL_SAVING_USD,
            c.ATTR_OFFLOAD_STUB_CARRY_COST_USD,
            c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD,
        }
        <= _keys(s)
    ),
}
assert tuple(FACT_TESTS) == FACTS


def _values(span: ReadableSpan) -> list[Any]:
    values = list((span.attributes or {}).values())
    for event in span.events:
        values.extend((event.attributes or {}).values())
    return values


@dataclass
class Recorded:
    """What one invoke (or iteration) produced."""

    spans: int = 0
    traces: int = 0
    attributes: int = 0
    events: int = 0
    dropped: int = 0  # attributes and events the SDK dropped past its limits
    otlp_bytes: int = 0
    content: bool = False
    facts: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(FACTS, False))

    @classmethod
    def of(cls, spans: Sequence[ReadableSpan]) -> Recorded:
        if not spans:
            return cls()
        return cls(
            spans=len(spans),
            traces=len({s.context.trace_id for s in spans if s.context is not None}),
            attributes=sum(len(s.attributes or {}) for s in spans),
            events=sum(len(s.events) for s in spans),
            dropped=sum(s.dropped_attributes + s.dropped_events for s in spans),
            otlp_bytes=len(encode_spans(spans).SerializeToString()),
            content=any(MARKER in v for s in spans for v in _values(s) if isinstance(v, str)),
            facts={name: any(test(s) for s in spans) for name, test in FACT_TESTS.items()},
        )

    @property
    def fact_count(self) -> int:
        return sum(self.facts.values())


# -- timing --------------------------------------------------------------------------


@dataclass
class Case:
    key: str
    label: str
    providers: str  # "sdk", "cfg", "own", or "" (uninstrumented)
    run: Callable[[int], Any]
    enter: Callable[[], Any] = lambda: None
    exit: Callable[[], Any] = lambda: None
    flush: Callable[[], Any] = lambda: None
    exporters: tuple[DroppingExporter, ...] = ()
    flushes: tuple[Callable[[], Any], ...] = ()
    samples: list[float] = field(default_factory=list)  # wall seconds per call, per block
    cpu: list[float] = field(default_factory=list)  # process CPU seconds per call, per block
    recorded: Recorded = field(default_factory=Recorded)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def time_block(run: Callable[[int], Any], count: int) -> tuple[float, float]:
    """Wall and process-CPU seconds per call over one block, with the garbage collector off.

    The CPU time (all threads of the process, so the span processor's worker too)
    is not inflated by other processes taking the CPUs, as wall time is.
    """
    gc.collect()
    gc.disable()
    try:
        cpu = time.process_time()
        start = time.perf_counter()
        for i in range(count):
            run(i)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    finally:
        gc.enable()
    return elapsed / count, cpu / count


def measure(cases: Sequence[Case], repeats: int, count: int, warmup: int) -> None:
    for case in cases:
        case.enter()
        try:
            for i in range(warmup):
                case.run(i)
            case.flush()
            spans = capture(case.exporters, case.flushes, functools.partial(case.run, 0))
            case.recorded = Recorded.of(spans)
        finally:
            case.exit()
        if not case.providers and case.recorded.spans:
            raise RuntimeError(f"{case.key} is uninstrumented but recorded spans")
    for _ in range(repeats):
        for case in cases:  # interleaved: a drift of the machine hits every case alike
            case.enter()
            try:
                wall, cpu = time_block(case.run, count)
                case.samples.append(wall)
                case.cpu.append(cpu)
                case.flush()
            finally:
                case.exit()


def overhead(case: Case, base: Case, *, cpu: bool = False) -> float:
    """Median of the per-repeat differences, seconds (of wall time, or of CPU time)."""
    num, den = (case.cpu, base.cpu) if cpu else (case.samples, base.samples)
    return statistics.median(x - b for x, b in zip(num, den, strict=True))


def ratio(case: Case, base: Case) -> tuple[float, float, float]:
    ratios = [x / b for x, b in zip(case.samples, base.samples, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def overhead_ratio(
    num: Case, den: Case, base: Case, *, cpu: bool = False
) -> tuple[float, float, float]:
    """(num - base) / (den - base): of the median overheads, and the per-repeat range."""
    series = (num.cpu, den.cpu, base.cpu) if cpu else (num.samples, den.samples, base.samples)
    per = [(n - b) / (d - b) for n, d, b in zip(*series, strict=True) if d != b]
    median = overhead(num, base, cpu=cpu) / overhead(den, base, cpu=cpu)
    return median, min(per, default=median), max(per, default=median)


# -- part 1: LangChain create_agent ----------------------------------------------------

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
        usage = {"input_tokens": 1_200, "output_tokens": 40, "total_tokens": 1_240}
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


def is_sales(ctx: Any) -> bool:
    return "sales" in ctx.user_text.lower()


def is_docs(ctx: Any) -> bool:
    return "docs" in ctx.user_text.lower()


def has_sales_table(ctx: Any) -> bool:
    return "brand_sales" in (ctx.scope or {}).get("tables", ())


def block_to_source(args: Any, ctx: Any) -> dict[str, Any]:
    return {"source": args["block"], "rows": args.get("limit", 10)}


def _always(ctx: Any) -> bool:
    return True


def lc_policies() -> list[ToolCallPolicy]:
    return [
        ToolCallPolicy(
            "docs_lookup",
            match=is_docs,
            model=ModelConfig(SONNET),
            when_tool="search",
            redirect_to="web_search",
        ),
        ToolCallPolicy(
            "sales_data_read",
            match=is_sales,
            model=ModelConfig(HAIKU),
            when_tool="run_block",
            redirect_to="fetch_data",
            args_transform=block_to_source,
            guard=has_sales_table,
        ),
        ToolCallPolicy(
            "archive_to_web", match=_always, when_tool="search", redirect_to="web_search"
        ),
    ]


def layer_telemetry(providers: Providers) -> dict[str, Any]:
    """How an application hands its providers to seamscope: configure()'s handle, or the
    SDK providers themselves."""
    if providers.handle is not None:
        return {"telemetry": providers.handle}
    return {
        "tracer_provider": providers.tracer_provider,
        "meter_provider": providers.meter_provider,
    }


def lc_layer(providers: Providers, palette: list[str]) -> DecisionLayer:
    catalog = ToolCatalog([ToolSpec(n, SAFETY.get(n, SafetyLevel.READ)) for n in LC_TOOLS])
    stages = [
        RolePaletteStage(resolver={AGENT: palette}.get),
        PolicyStage(catalog=catalog, max_safety_level=SafetyLevel.WRITE),
        AllowlistStage(always_include=["hydrate_context"], catalog=catalog),
    ]
    return DecisionLayer(
        default_model=OPUS,
        policies=lc_policies(),
        stages=stages,
        catalog=catalog,
        agent_name=AGENT,
        offload_threshold_tokens=OFFLOAD_THRESHOLD_TOKENS,
        **layer_telemetry(providers),
    )


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


def langchain_cases(sets: Sequence[Providers]) -> tuple[list[Case], list[str]]:
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

    plain = create_agent(ScriptedChat(model_name=OPUS), tools)
    passing = create_agent(ScriptedChat(model_name=OPUS), tools, middleware=[PassThrough()])
    # (a) listens on every exporter: an instrumentation left in place would show here
    everywhere: dict[str, Any] = {
        "exporters": tuple(p.exporter for p in sets),
        "flushes": tuple(p.flush for p in sets),
    }
    cases = [
        Case("lc-a", "(a) no instrumentation", "", invoker(plain), **everywhere),
        Case(
            "lc-a-mw",
            "(a') a pass-through middleware (reference)",
            "",
            invoker(passing),
            **everywhere,
        ),
    ]
    openinference = LangChainInstrumentor()
    openllmetry = LangchainInstrumentor()
    originals = Originals()
    for providers in sets:
        opus, haiku = ScriptedChat(model_name=OPUS), ScriptedChat(model_name=HAIKU)
        palette = [*PALETTE, "delete_rows"]
        layer = lc_layer(providers, palette)
        middleware = SeamscopeMiddleware(
            layer,
            models={OPUS: opus, HAIKU: haiku},
            role=AGENT,
            scope={"tables": ["brand_sales"]},
        )
        palette += [t.name for t in middleware.tools]  # the recall tool, routed to the role
        seam_agent = create_agent(opus, tools, middleware=[middleware])

        def end(layer: DecisionLayer = layer) -> None:
            layer.end_conversation(CONVERSATION)

        oi = Toggle(openinference, originals, tracer_provider=providers.tracer_provider)
        ol = Toggle(
            openllmetry,
            originals,
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
        )
        p = providers.key
        common: dict[str, Any] = {
            "flush": providers.flush,
            "exporters": (providers.exporter,),
            "flushes": (providers.flush,),
        }
        cases += [
            Case(f"lc-b-{p}", "(b) seamscope middleware", p, invoker(seam_agent, end), **common),
            Case(
                f"lc-c-{p}",
                "(c) OpenInference",
                p,
                invoker(plain),
                enter=oi.on,
                exit=oi.off,
                **common,
            ),
            Case(
                f"lc-d-{p}",
                "(d) OpenLLMetry",
                p,
                invoker(plain),
                enter=ol.on,
                exit=ol.off,
                **common,
            ),
            Case(
                f"lc-e-{p}",
                "(e) seamscope + OpenInference",
                p,
                invoker(seam_agent, end),
                enter=oi.on,
                exit=oi.off,
                **common,
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
        expected = "fetch_data" if case.key[3] in "be" else "run_block"
        assert executed == [expected], (case.key, executed)
    for providers in sets:
        providers.flush()
    return cases, executed


# -- part 2: symfonic-core ------------------------------------------------------------


def symfonic_cases(
    sets: Sequence[Providers], loop: asyncio.AbstractEventLoop
) -> tuple[list[Case], list[Callable[[], Any]]]:
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

    def with_own_layer(cfg: Any, exporter: DroppingExporter) -> Any:
        cfg = cfg.model_copy(update={"otel_enabled": True})
        # symfonic's own exporter is OTLP/gRPC; these are the hooks its factory reads
        # (exporter.build_if_enabled) to take another exporter and a batch processor.
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

    def own_flush(agent: Any) -> Callable[[], Any]:
        return agent._otel_handles.tracer.force_flush  # symfonic's own TracerProvider

    cases: list[Case] = []
    scenarios = (
        ("sym", plain, None, ("seamscope", "both")),
        ("sym-gate", offloading, earlier_turn, ("seamscope",)),
    )
    for prefix, cfg, history, kinds in scenarios:
        note = " (gate)" if history is not None else ""
        off = agent_for(cfg)
        own_exporter = DroppingExporter()
        own = agent_for(with_own_layer(cfg, own_exporter))
        cases += [
            Case(
                f"{prefix}-off",
                f"off{note}",
                "",
                runner(off, history, []),
                exporters=(own_exporter, *(p.exporter for p in sets)),
                flushes=(own_flush(own), *(p.flush for p in sets)),
            ),
            Case(
                f"{prefix}-own",
                f"symfonic's own OTel layer{note}",
                "own",
                runner(own, history, []),
                flush=own_flush(own),
                exporters=(own_exporter,),
                flushes=(own_flush(own),),
            ),
        ]
        # seamscope is installed for each block and removed after it, like the LangChain
        # peers: it wraps symfonic's gate function process-wide while installed.
        for providers in sets:
            for kind in kinds:
                exporters: tuple[DroppingExporter, ...] = (providers.exporter,)
                if kind == "both":
                    second = DroppingExporter()
                    agent = agent_for(with_own_layer(cfg, second))
                    exporters += (second,)
                    flushes: tuple[Callable[[], Any], ...] = (providers.flush, own_flush(agent))
                    label = "seamscope + symfonic's own layer"
                else:
                    agent = agent_for(cfg)
                    flushes = (providers.flush,)
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

                def flush_all(flushes: Sequence[Callable[[], Any]] = flushes) -> None:
                    for flush in flushes:
                        flush()

                cases.append(
                    Case(
                        f"{prefix}-{kind}-{providers.key}",
                        label + note,
                        providers.key,
                        runner(agent, history, holder),
                        enter=on,
                        exit=done,
                        flush=flush_all,
                        exporters=exporters,
                        flushes=flushes,
                    )
                )
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


def core_cases(sets: Sequence[Providers], policies: int, tools: int) -> list[Case]:
    from opentelemetry import metrics, trace

    def case(key: str, label: str, providers: str, loop: CoreLoop, **extra: Any) -> Case:
        return Case(
            key, label, providers, loop.iteration, enter=loop.enter, exit=loop.exit, **extra
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
    cases = [case(f"core-{policies}x{tools}-noop", "decisions alone (NoopObserver)", "", noop)]
    for providers in sets:
        loop = CoreLoop(policies, tools, layer_telemetry(providers))
        loop.enter()
        try:
            selection, pre, post, gate = loop.iteration(0)
        finally:
            loop.exit()
        assert pre.model.model_name == HAIKU and post.calls[0].name == "fetch_data"
        assert len(selection.offered) == tools and gate.fire
        cases.append(
            case(
                f"core-{policies}x{tools}-{providers.key}",
                "decisions + telemetry",
                providers.key,
                loop,
                flush=providers.flush,
                exporters=(providers.exporter,),
                flushes=(providers.flush,),
            )
        )
    return cases


# -- parts 4 and 5: the same turn in the OpenAI Agents SDK and in pydantic-ai ------------------

USAGE_IN, USAGE_OUT = 1_200, 40


def async_tools(executed: list[str]) -> list[Callable[..., Any]]:
    """The twelve tools as async functions (both frameworks run a sync tool in a thread)."""

    async def run_block(block: str, limit: int = 10) -> str:
        """Run a saved analytics block."""
        executed.append("run_block")
        return REPORT

    async def fetch_data(source: str, rows: int = 10) -> str:
        """Read rows from a governed data source."""
        executed.append("fetch_data")
        return REPORT

    def simple(name: str) -> Callable[..., Any]:
        async def run(query: str) -> str:
            executed.append(name)
            return f"{name}: done"

        run.__name__ = run.__qualname__ = name
        run.__doc__ = f"The {name.replace('_', ' ')} tool."
        return run

    tools = [run_block, fetch_data]
    tools += [simple(name) for name in LC_TOOLS if name not in ("run_block", "fetch_data")]
    assert [t.__name__ for t in tools] == list(LC_TOOLS)
    return tools


class DroppingTraceProcessor:
    """An Agents SDK ``TracingProcessor`` that drops every trace and span, except
    while ``capturing`` (the SDK's own tracing, with nothing exported)."""

    def __init__(self) -> None:
        self.capturing = False
        self.traces: list[Any] = []
        self.spans: list[Any] = []

    def on_trace_start(self, trace: Any) -> None:
        return None

    def on_trace_end(self, trace: Any) -> None:
        if self.capturing:
            self.traces.append(trace)

    def on_span_start(self, span: Any) -> None:
        return None

    def on_span_end(self, span: Any) -> None:
        if self.capturing:
            self.spans.append(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


def openai_agents_cases(
    sdk: Providers, loop: asyncio.AbstractEventLoop
) -> tuple[list[Case], Callable[[], Recorded]]:
    """Part 4's cases, and how to record what the SDK's own tracing keeps of one run."""
    from agents import (
        Agent,
        ModelResponse,
        RunConfig,
        Runner,
        Usage,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    from seamscope.adapters.openai_agents import SeamscopeRunner

    class Scripted(Model):
        """Answers from the last input item: ``run_block`` after the user, text after
        a function call output."""

        def __init__(self, name: str) -> None:
            self.model = name
            self.calls = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.calls += 1
            items = args[1] if len(args) > 1 else kwargs["input"]
            last = items[-1] if isinstance(items, list) and items else {}
            output: Any
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                output = ResponseOutputMessage(
                    type="message",
                    id="msg_1",
                    role="assistant",
                    status="completed",
                    content=[
                        ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])
                    ],
                )
            else:
                output = ResponseFunctionToolCall(
                    type="function_call",
                    call_id="call_1",
                    name="run_block",
                    arguments=json.dumps({"block": "sales_q3", "limit": 5}),
                    id="fc_call_1",
                    status="completed",
                )
            usage = Usage(
                requests=1,
                input_tokens=USAGE_IN,
                output_tokens=USAGE_OUT,
                total_tokens=USAGE_IN + USAGE_OUT,
            )
            return ModelResponse(output=[output], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    executed: list[str] = []
    tools = [function_tool(f) for f in async_tools(executed)]  # schemas built once, here
    opus, haiku = Scripted(OPUS), Scripted(HAIKU)
    plain = Agent(name=AGENT, instructions="You analyse sales.", model=opus, tools=tools)
    layer = lc_layer(sdk, [*PALETTE, "delete_rows", "recall_tool_result"])
    seamscope = SeamscopeRunner(
        layer, {OPUS: opus, HAIKU: haiku}, scope={"tables": ["brand_sales"]}
    )
    seam_agent = plain.clone(tools=[*tools, seamscope.recall_tool])
    config = RunConfig(workflow_name="bench")

    # The SDK's default processor exports to OpenAI: replaced by none, tracing off between blocks.
    set_trace_processors([])
    set_tracing_disabled(True)
    dropper = DroppingTraceProcessor()
    instrumentor = OpenAIAgentsInstrumentor()

    def own_on() -> None:
        set_trace_processors([dropper])  # type: ignore[list-item]
        set_tracing_disabled(False)

    def own_off() -> None:
        set_tracing_disabled(True)
        set_trace_processors([])

    def oi_on() -> None:
        set_tracing_disabled(False)
        # exclusive (its default): the SDK's processors are its own OTel bridge alone
        instrumentor.instrument(tracer_provider=sdk.tracer_provider, skip_dep_check=True)

    def oi_off() -> None:
        instrumentor.uninstrument()
        set_tracing_disabled(True)

    def plain_run(i: int) -> Any:
        return loop.run_until_complete(
            Runner.run(plain, USER_TEXT, run_config=config, conversation_id=None)
        )

    def seam_run(i: int) -> Any:
        result = loop.run_until_complete(
            seamscope.run(seam_agent, USER_TEXT, run_config=config, conversation=CONVERSATION)
        )
        layer.end_conversation(CONVERSATION)
        return result

    common: dict[str, Any] = {
        "exporters": (sdk.exporter,),
        "flushes": (sdk.flush,),
    }
    cases = [
        Case("oa-a", "(a) no instrumentation (SDK tracing off)", "", plain_run, **common),
        Case(
            "oa-b-own",
            "(b) the SDK's own tracing (dropping processor)",
            "own",
            plain_run,
            enter=own_on,
            exit=own_off,
            **common,
        ),
        Case(
            "oa-c-sdk",
            "(c) OpenInference",
            "sdk",
            plain_run,
            enter=oi_on,
            exit=oi_off,
            flush=sdk.flush,
            **common,
        ),
        Case(
            "oa-d-sdk", "(d) seamscope SeamscopeRunner", "sdk", seam_run, flush=sdk.flush, **common
        ),
        Case(
            "oa-e-sdk",
            "(e) seamscope + OpenInference",
            "sdk",
            seam_run,
            enter=oi_on,
            exit=oi_off,
            flush=sdk.flush,
            **common,
        ),
    ]
    # the loop really ran as scripted: 2 model calls, 1 tool, the redirect under seamscope
    for case in cases:
        case.enter()
        try:
            executed.clear()
            opus.calls = haiku.calls = 0
            result = case.run(0)
        finally:
            case.exit()
        assert result.final_output == FINAL_TEXT, (case.key, result.final_output)
        seam = case.key[3] in "de"
        assert (opus.calls, haiku.calls) == ((0, 2) if seam else (2, 0)), case.key
        assert executed == ["fetch_data" if seam else "run_block"], (case.key, executed)
    sdk.flush()

    def own_recorded() -> Recorded:
        """What the SDK's own tracing hands its processor for one run (no OTel spans)."""
        own_on()
        try:
            dropper.capturing = True
            plain_run(0)
        finally:
            dropper.capturing = False
            own_off()
        exported = [s.export() for s in dropper.spans]
        dropper.spans.clear()
        traces, dropper.traces = len(dropper.traces), []
        text = json.dumps(exported, default=str)
        return Recorded(spans=len(exported), traces=traces, content=MARKER in text)

    return cases, own_recorded


def pydantic_ai_cases(sdk: Providers, oi: Providers, loop: asyncio.AbstractEventLoop) -> list[Case]:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
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

    def instrumentation(providers: Providers) -> Any:
        return Instrumentation(
            settings=InstrumentationSettings(
                tracer_provider=providers.tracer_provider,
                meter_provider=providers.meter_provider,
            )
        )

    layer = lc_layer(sdk, [*PALETTE, "delete_rows", "recall_tool_result"])

    def capability() -> Any:
        return SeamscopeCapability(
            layer, {OPUS: opus, HAIKU: haiku}, scope={"tables": ["brand_sales"]}
        )

    def runner(target: Any, seam: bool) -> Callable[[int], Any]:
        def run(i: int) -> Any:
            result = loop.run_until_complete(target.run(USER_TEXT, conversation_id=CONVERSATION))
            if seam:
                layer.end_conversation(CONVERSATION)
            return result

        return run

    def on(providers: Providers) -> dict[str, Any]:
        return {
            "flush": providers.flush,
            "exporters": (providers.exporter,),
            "flushes": (providers.flush,),
        }

    cases = [
        Case(
            "pai-a",
            "(a) no instrumentation",
            "",
            runner(agent(), False),
            exporters=(sdk.exporter, oi.exporter),
            flushes=(sdk.flush, oi.flush),
        ),
        Case(
            "pai-b-sdk",
            "(b) pydantic-ai's Instrumentation",
            "sdk",
            runner(agent(instrumentation(sdk)), False),
            **on(sdk),
        ),
        Case(
            "pai-c-sdk",
            "(c) OpenInference (its span processor on (b))",
            "sdk",
            runner(agent(instrumentation(oi)), False),
            **on(oi),
        ),
        Case(
            "pai-d-sdk",
            "(d) seamscope SeamscopeCapability",
            "sdk",
            runner(agent(capability()), True),
            **on(sdk),
        ),
        Case(
            "pai-e-sdk",
            "(e) seamscope beside pydantic-ai's Instrumentation",
            "sdk",
            runner(agent(capability(), instrumentation(sdk)), True),
            **on(sdk),
        ),
    ]
    for case in cases:
        executed.clear()
        calls.update(dict.fromkeys(calls, 0))
        result = case.run(0)
        assert result.output == FINAL_TEXT, (case.key, result.output)
        seam = case.key[4] in "de"
        assert (calls[OPUS], calls[HAIKU]) == ((0, 2) if seam else (2, 0)), case.key
        assert executed == ["fetch_data" if seam else "run_block"], (case.key, executed)
    for providers in (sdk, oi):
        providers.flush()
    return cases


def oi_pydantic_ai_providers() -> Providers:
    """SDK defaults with OpenInference's pydantic-ai span processor first (it rewrites a
    span's attributes as it ends, before the batch processor queues it)."""
    from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor

    providers = sdk_providers(first=(OpenInferenceSpanProcessor(),))
    providers.label = "SDK defaults with OpenInference's pydantic-ai span processor first"
    return providers


# -- output ----------------------------------------------------------------------------


def yes(flag: bool) -> str:
    return "yes" if flag else "–"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def spread(value: tuple[float, float, float], digits: int = 2) -> str:
    return f"{value[0]:.{digits}f} [{value[1]:.{digits}f}–{value[2]:.{digits}f}]"


def print_langchain(cases: list[Case], sets: Sequence[Providers], out: dict[str, Any]) -> list[str]:
    by_key = {case.key: case for case in cases}
    base = by_key["lc-a"]
    print("## Part 1: LangChain v1 create_agent, one invoke (2 model calls, 1 tool call, 12 tools)")
    print()
    for providers in sets:
        print(f"- providers `{providers.key}`: {providers.label}")
    print()
    print(
        "| configuration | providers | key | ms/invoke | overhead ms | CPU overhead ms | × (a) "
        "| spans | traces | span attributes | events | OTLP bytes | µs/span of overhead | content "
        "| facts (of 9) |"
    )
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|")
    rows = []
    for case in cases:
        rec = case.recorded
        extra = overhead(case, base) if case is not base else 0.0
        extra_cpu = overhead(case, base, cpu=True) if case is not base else 0.0
        per_span = extra * 1e6 / rec.spans if rec.spans else 0.0
        times = spread(ratio(case, base)) if case is not base else "1.00"
        print(
            f"| {case.label} | {case.providers or '–'} | `{case.key}` | {case.median * 1e3:.2f} | "
            f"{extra * 1e3:+.2f} | {extra_cpu * 1e3:+.2f} | {times} | {rec.spans} | "
            f"{rec.traces} | {rec.attributes} | "
            f"{rec.events} | {rec.otlp_bytes} | {per_span:.1f} | {yes(rec.content)} | "
            f"{rec.fact_count} |"
        )
        rows.append(
            {
                "key": case.key,
                "label": case.label,
                "providers": case.providers,
                "median_ms": case.median * 1e3,
                "overhead_ms": extra * 1e3,
                "ratio": ratio(case, base)[0],
                "samples_ms": [s * 1e3 for s in case.samples],
                "cpu_samples_ms": [s * 1e3 for s in case.cpu],
                "overhead_cpu_ms": overhead(case, base, cpu=True) * 1e3,
                "us_per_span": per_span,
                **{k: v for k, v in vars(rec).items() if k != "facts"},
                "facts": rec.facts,
            }
        )
    print()
    floor = overhead(by_key["lc-a-mw"], base)
    for providers in sets:
        p = providers.key
        seam = overhead(by_key[f"lc-b-{p}"], base)
        print(
            f"- `{p}`: of seamscope's {seam * 1e3:.2f} ms, {floor * 1e3:.2f} ms is what LangChain "
            f"charges for any middleware (a'); its own work and telemetry: "
            f"{(seam - floor) * 1e3:.2f} ms"
        )
    print()
    print_facts(cases)
    checks = []
    for providers in sets:
        p = providers.key
        seam, oi = by_key[f"lc-b-{p}"], by_key[f"lc-c-{p}"]
        value = overhead_ratio(seam, oi, base)
        cpu = overhead_ratio(seam, oi, base, cpu=True)
        ok = value[0] <= TARGET_LC
        checks.append(
            f"LangChain on `{p}`: seamscope overhead / OpenInference overhead = {spread(value)} "
            f"({overhead(seam, base) * 1e3:.2f} ms / {overhead(oi, base) * 1e3:.2f} ms; "
            f"in CPU time {cpu[0]:.2f}; target <= {TARGET_LC}): {verdict(ok)}"
        )
        out.setdefault("targets", []).append(
            {
                "name": f"langchain-{p}",
                "value": value[0],
                "cpu_value": cpu[0],
                "target": TARGET_LC,
                "met": ok,
            }
        )
    out["langchain"] = rows
    return checks


def print_facts(cases: Sequence[Case]) -> None:
    print("Decision facts found in the recorded spans (attribute keys of seamscope's conventions):")
    print()
    print("| configuration | providers | " + " | ".join(FACTS) + " |")
    print("|---|---|" + "---|" * len(FACTS))
    for case in cases:
        facts = case.recorded.facts
        cells = " | ".join(yes(facts[name]) for name in FACTS)
        print(f"| {case.label} | {case.providers or '–'} | {cells} |")
    print()


def scenario_of(case: Case) -> str:
    return "sym-gate" if case.key.startswith("sym-gate-") else "sym"


def print_symfonic(cases: list[Case], sets: Sequence[Providers], out: dict[str, Any]) -> list[str]:
    by_key = {case.key: case for case in cases}
    print("## Part 2: symfonic-core SymfonicAgent.run, one run (2 model calls, 1 tool call)")
    print()
    print(
        "(gate): the same run with an earlier turn in the history holding a 100 000-character "
        "tool output and symfonic's offload on, so symfonic's offload gate prices it on both "
        "model calls; overheads and ratios are to the `off` row of the same scenario."
    )
    print()
    print(
        "| configuration | providers | key | ms/run | overhead ms | CPU overhead ms | × off "
        "| spans | span attributes | events | OTLP bytes | facts (of 9) |"
    )
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    rows = []
    for case in cases:
        base = by_key[f"{scenario_of(case)}-off"]
        rec = case.recorded
        extra = overhead(case, base) if case is not base else 0.0
        extra_cpu = overhead(case, base, cpu=True) if case is not base else 0.0
        times = spread(ratio(case, base)) if case is not base else "1.00"
        print(
            f"| {case.label} | {case.providers or '–'} | `{case.key}` | {case.median * 1e3:.2f} | "
            f"{extra * 1e3:+.2f} | {extra_cpu * 1e3:+.2f} | {times} | {rec.spans} | "
            f"{rec.attributes} | {rec.events} | "
            f"{rec.otlp_bytes} | {rec.fact_count} |"
        )
        rows.append(
            {
                "key": case.key,
                "label": case.label,
                "providers": case.providers,
                "median_ms": case.median * 1e3,
                "overhead_ms": extra * 1e3,
                "ratio": ratio(case, base)[0],
                "samples_ms": [s * 1e3 for s in case.samples],
                "cpu_samples_ms": [s * 1e3 for s in case.cpu],
                "overhead_cpu_ms": overhead(case, base, cpu=True) * 1e3,
                **{k: v for k, v in vars(rec).items() if k != "facts"},
                "facts": rec.facts,
            }
        )
    print()
    print_facts(cases)
    checks = []
    for prefix, note in (("sym", ""), ("sym-gate", " (gate)")):
        base, own = by_key[f"{prefix}-off"], by_key[f"{prefix}-own"]
        for providers in sets:
            p = providers.key
            seam = by_key[f"{prefix}-seamscope-{p}"]
            value = overhead_ratio(seam, own, base)
            cpu = overhead_ratio(seam, own, base, cpu=True)
            ok = value[0] <= TARGET_SYM
            checks.append(
                f"symfonic{note} on `{p}`: seamscope overhead / symfonic's own layer's overhead "
                f"= {spread(value)} ({overhead(seam, base) * 1e3:.2f} ms / "
                f"{overhead(own, base) * 1e3:.2f} ms; in CPU time {cpu[0]:.2f}; "
                f"target <= {TARGET_SYM}): {verdict(ok)}"
            )
            out.setdefault("targets", []).append(
                {
                    "name": f"{prefix}-{p}",
                    "value": value[0],
                    "cpu_value": cpu[0],
                    "target": TARGET_SYM,
                    "met": ok,
                }
            )
    out["symfonic"] = rows
    return checks


def print_core(
    grid: list[tuple[int, int, list[Case]]], sets: Sequence[Providers], out: dict[str, Any]
) -> list[str]:
    print(
        "## Part 3: the decision core, one iteration (6 stages, PRE seam, POST seam x 2 calls, "
        "1 gate call), µs"
    )
    print()
    header = "| policies | tools | decisions µs |"
    rule = "|---:|---:|---:|"
    for providers in sets:
        header += (
            f" + telemetry `{providers.key}` µs | telemetry µs `{providers.key}` | "
            f"spans | events (dropped by the SDK) |"
        )
        rule += "---:|---:|---:|---:|"
    print(header)
    print(rule)
    rows = []
    checks = []
    for policies, tools, cases in grid:
        noop = cases[0]
        line = f"| {policies} | {tools} | {noop.median * 1e6:.1f} |"
        row: dict[str, Any] = {
            "policies": policies,
            "tools": tools,
            "decisions_us": noop.median * 1e6,
        }
        for case in cases[1:]:
            extra = overhead(case, noop) * 1e6
            rec = case.recorded
            line += (
                f" {case.median * 1e6:.1f} | {extra:+.1f} | {rec.spans} | "
                f"{rec.events} ({rec.dropped}) |"
            )
            row[case.providers] = {
                "total_us": case.median * 1e6,
                "telemetry_us": extra,
                "spans": rec.spans,
                "events": rec.events,
                "dropped": rec.dropped,
            }
        print(line)
        rows.append(row)
        if (policies, tools) == (1000, 500):
            ok = noop.median * 1e6 <= TARGET_CORE_US
            checks.append(
                f"core 1000 policies x 500 tools: decisions {noop.median * 1e6:.0f} µs "
                f"(<= {TARGET_CORE_US:.0f} µs): {verdict(ok)}"
            )
            out.setdefault("targets", []).append(
                {
                    "name": "core-decisions",
                    "value": noop.median * 1e6,
                    "target": TARGET_CORE_US,
                    "met": ok,
                }
            )
            for case in cases[1:]:
                extra = overhead(case, noop) * 1e6
                ok = extra <= TARGET_CORE_US
                checks.append(
                    f"core 1000 policies x 500 tools: telemetry `{case.providers}` "
                    f"+{extra:.0f} µs (<= {TARGET_CORE_US:.0f} µs): {verdict(ok)}"
                )
                out["targets"].append(
                    {
                        "name": f"core-telemetry-{case.providers}",
                        "value": extra,
                        "target": TARGET_CORE_US,
                        "met": ok,
                    }
                )
    if not any((p, t) == (1000, 500) for p, t, _ in grid):
        checks.append("core 1000 policies x 500 tools: not measured in this run")
    print()
    print_slopes(grid)
    out["core"] = rows
    return checks


def print_slopes(grid: list[tuple[int, int, list[Case]]]) -> None:
    """What one more policy evaluation, and one more offered tool, costs (from the grid)."""
    cells = {(p, t): cases for p, t, cases in grid}

    def cost(cases: list[Case]) -> list[tuple[str, float]]:
        noop = cases[0]
        return [("decisions", noop.median)] + [
            (f"telemetry `{case.providers}`", overhead(case, noop)) for case in cases[1:]
        ]

    for (low, high), label, per in (
        (((100, 10), (1000, 10)), "one more policy evaluation (100 → 1000 policies, 10 tools)", 3),
        (((1, 10), (1, 500)), "one more offered tool (10 → 500 tools, 1 policy)", 0),
    ):
        if low not in cells or high not in cells:
            continue
        units = (high[0] - low[0]) * per if per else high[1] - low[1]
        slopes = [
            f"{name} {(b - a) * 1e6 / units:.2f} µs"
            for (name, a), (_, b) in zip(cost(cells[low]), cost(cells[high]), strict=True)
        ]
        print(f"- {label}: " + ", ".join(slopes))
    print()


def print_framework(
    title: str,
    notes: Sequence[str],
    cases: list[Case],
    comparisons: Sequence[tuple[str, str, str]],
    name: str,
    out: dict[str, Any],
) -> None:
    """A part on one framework: every row against its (a), the facts, and the overhead ratios
    (``comparisons``: label, numerator key, denominator key)."""
    by_key = {case.key: case for case in cases}
    base = cases[0]
    print(f"## {title}")
    print()
    for note in notes:
        print(f"- {note}")
    print()
    print(
        "| configuration | providers | key | ms/run | overhead ms | CPU overhead ms | × (a) "
        "| spans | traces | span attributes | events | OTLP bytes | content | facts (of 9) |"
    )
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|")
    rows = []
    for case in cases:
        rec = case.recorded
        extra = overhead(case, base) if case is not base else 0.0
        extra_cpu = overhead(case, base, cpu=True) if case is not base else 0.0
        times = spread(ratio(case, base)) if case is not base else "1.00"
        otel = case.providers != "own"  # the Agents SDK's own tracing is not OpenTelemetry
        counts = (
            f"{rec.attributes} | {rec.events} | {rec.otlp_bytes}" if otel else "n/a | n/a | n/a"
        )
        print(
            f"| {case.label} | {case.providers or '–'} | `{case.key}` | {case.median * 1e3:.2f} | "
            f"{extra * 1e3:+.2f} | {extra_cpu * 1e3:+.2f} | {times} | {rec.spans} | "
            f"{rec.traces} | {counts} | {yes(rec.content)} | {rec.fact_count} |"
        )
        rows.append(
            {
                "key": case.key,
                "label": case.label,
                "providers": case.providers,
                "median_ms": case.median * 1e3,
                "overhead_ms": extra * 1e3,
                "ratio": ratio(case, base)[0],
                "samples_ms": [s * 1e3 for s in case.samples],
                "cpu_samples_ms": [s * 1e3 for s in case.cpu],
                "overhead_cpu_ms": overhead(case, base, cpu=True) * 1e3,
                **{k: v for k, v in vars(rec).items() if k != "facts"},
                "facts": rec.facts,
            }
        )
    print()
    print_facts(cases)
    print("Overheads over (a), as ratios (median of the per-block ratios; no target):")
    print()
    ratios = []
    for label, num_key, den_key in comparisons:
        num, den = by_key[num_key], by_key[den_key]
        wall, cpu = overhead(den, base), overhead(den, base, cpu=True)
        if wall == 0 or cpu == 0:
            print(f"- {label}: the denominator's overhead is 0 in this run")
            continue
        value = overhead_ratio(num, den, base)
        cpu_value = overhead_ratio(num, den, base, cpu=True)
        print(
            f"- {label} = {spread(value)} ({overhead(num, base) * 1e3:.2f} ms / "
            f"{wall * 1e3:.2f} ms; in CPU time {cpu_value[0]:.2f})"
        )
        ratios.append(
            {"name": label, "num": num_key, "den": den_key, "value": value[0], "cpu": cpu_value[0]}
        )
    print()
    out[name] = rows
    out.setdefault("ratios", {})[name] = ratios


# -- main ------------------------------------------------------------------------------


def configure_logging() -> None:
    # The script is the application: structlog events below WARNING are dropped.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="symfonic")


PARTS = ("lc", "sym", "core", "oa", "pai")
OA_NOTES = (
    "the model is a scripted agents `Model` (a `run_block` call after the user, text after a "
    "function call output), the twelve tools are async function tools, the tool output is the "
    "8 000-character report; the SDK's tracing to OpenAI is off throughout: its processors "
    "are replaced (by none between blocks) and tracing is disabled outside (b), (c), (e)",
    "(b): tracing on with `set_trace_processors([a processor that drops])`: the SDK's own "
    "traces and spans, not OpenTelemetry (span attributes, events and OTLP bytes n/a; spans "
    "and traces: what the processor is handed for one run)",
    "(c), (e): OpenInference's `OpenAIAgentsInstrumentor` (its exclusive processor) on `sdk`, "
    "switched on for each block and off after it",
    "(d), (e): `SeamscopeRunner` with Part 1's layer (stages, policies, offload threshold) on "
    "`sdk`; every run ends its conversation",
)
OA_COMPARISONS = (
    ("seamscope (d) / the SDK's own tracing (b)", "oa-d-sdk", "oa-b-own"),
    ("seamscope (d) / OpenInference (c)", "oa-d-sdk", "oa-c-sdk"),
    ("seamscope + OpenInference (e) / OpenInference (c)", "oa-e-sdk", "oa-c-sdk"),
)
PAI_NOTES = (
    "the models are pydantic-ai `FunctionModel`s (a `run_block` call after the user, text "
    "after a tool return), the twelve tools are async functions, the tool output is the "
    "8 000-character report",
    "(b), (e): pydantic-ai's `Instrumentation` capability (`InstrumentationSettings` "
    "defaults: content recorded) on `sdk`",
    "(c): OpenInference's instrumentation for pydantic-ai is a span processor "
    "(`OpenInferenceSpanProcessor`) that rewrites the spans of pydantic-ai's own "
    "instrumentation as they end: pydantic-ai's `Instrumentation` on another set of SDK "
    "defaults with that processor before the batch processor, so (c) is (b) plus the rewrite",
    "(d): `SeamscopeCapability` with Part 1's layer on `sdk`; (e): beside pydantic-ai's "
    "`Instrumentation` (seamscope then opens no GenAI spans of its own); every run ends its "
    "conversation",
)
PAI_COMPARISONS = (
    ("seamscope (d) / pydantic-ai's Instrumentation (b)", "pai-d-sdk", "pai-b-sdk"),
    ("seamscope (d) / OpenInference (c)", "pai-d-sdk", "pai-c-sdk"),
    ("seamscope + Instrumentation (e) / Instrumentation (b)", "pai-e-sdk", "pai-b-sdk"),
)
GRID_POLICIES = (1, 10, 100, 1000)
GRID_TOOLS = (10, 100, 500)


def calibrate(cases: Sequence[Case], seconds: float) -> int:
    """Iterations per block so the slowest case's block takes about ``seconds``."""
    slowest = 0.0
    for case in cases:
        case.enter()
        try:
            case.run(0)
            start = time.perf_counter()
            case.run(1)
            slowest = max(slowest, time.perf_counter() - start)
        finally:
            case.exit()
    return max(2, int(seconds / max(slowest, 1e-6)))


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in (
        "seamscope",
        "langchain",
        "langgraph",
        "openinference-instrumentation-langchain",
        "opentelemetry-instrumentation-langchain",
        "symfonic-core",
        "openai-agents",
        "openinference-instrumentation-openai-agents",
        "pydantic-ai-slim",
        "openinference-instrumentation-pydantic-ai",
        "opentelemetry-sdk",
    ):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "?"
    return found


def run_only(key: str, iterations: int) -> int:
    """Run one configuration untimed: WARMUP_RUN_ONLY calls, then ``iterations`` calls.

    The garbage collector is off throughout (it is off in the timed blocks too):
    when it runs depends on how threads interleave, which made instruction
    counts of the same command differ by hundreds of millions; without it two
    runs agree to about 0.1 M instructions.
    """
    gc.disable()
    sets = [sdk_providers(), cfg_providers()]
    loop = asyncio.new_event_loop()
    if key.startswith("lc-"):
        cases, _ = langchain_cases(sets)
    elif key.startswith("sym-"):
        cases, _ = symfonic_cases(sets, loop)
    elif key.startswith("core-"):
        size = key.split("-")[1]
        policies, tools = (int(n) for n in size.split("x"))
        cases = core_cases(sets, policies, tools)
    elif key.startswith("oa-"):
        cases, _ = openai_agents_cases(sets[0], loop)
    elif key.startswith("pai-"):
        oi = oi_pydantic_ai_providers()
        sets.append(oi)
        cases = pydantic_ai_cases(sets[0], oi, loop)
    else:
        cases = []
    chosen = [case for case in cases if case.key == key]
    if not chosen:
        print(f"unknown configuration {key!r}", file=sys.stderr)
        return 2
    case = chosen[0]
    case.enter()
    try:
        for i in range(WARMUP_RUN_ONLY):
            case.run(i)
        for i in range(iterations):
            case.run(i)
    finally:
        case.exit()
    for providers in sets:
        providers.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--repeats", type=int, default=None, help="timed blocks per configuration")
    parser.add_argument("--invokes", type=int, default=None, help="invokes per timed block")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--run-only",
        metavar="KEY",
        help="only run one configuration, untimed and silent (for valgrind --tool=callgrind)",
    )
    parser.add_argument(
        "--iterations", type=int, default=40, help="with --run-only: invokes or iterations"
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"the parts to run, comma-separated (default: all of {','.join(PARTS)})",
    )
    args = parser.parse_args(argv)
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if not parts or not parts <= set(PARTS):
        parser.error(f"--parts: choose among {','.join(PARTS)}")
    configure_logging()
    if args.run_only:
        # silent whatever a library prints (the output must not perturb a count)
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            return run_only(args.run_only, args.iterations)

    quick = args.quick
    repeats = args.repeats or (2 if quick else 21)
    invokes = args.invokes or (3 if quick else 30)
    warmup = 2 if quick else 10
    core_seconds = 0.01 if quick else 0.15
    core_repeats = 1 if quick else max(3, repeats // 3)
    out: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "repeats": repeats,
        "invokes_per_block": invokes,
    }
    started = time.perf_counter()
    load = os.getloadavg()[0]
    out["versions"] = versions()
    out["load_average_start"] = load
    print("# seamscope and its peers: per-invoke cost, one run")
    print()
    print("versions: " + ", ".join(f"{name} {v}" for name, v in out["versions"].items()))
    print()
    print(
        f"machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {repeats} interleaved blocks of {invokes} invokes per "
        f"configuration (median block; ranges in brackets: lowest–highest per-block ratio); "
        f"gc off while timing; 1-minute load average at the start {load:.2f}"
        f"{'; --quick: numbers are not meaningful' if quick else ''}"
    )
    print()

    sets = [sdk_providers(), cfg_providers()]
    loop = asyncio.new_event_loop()
    checks: list[str] = []

    if "lc" in parts:
        lc, _ = langchain_cases(sets)
        measure(lc, repeats, invokes, warmup)
        checks += print_langchain(lc, sets, out)

    if "sym" in parts:
        sym, closers = symfonic_cases(sets, loop)
        measure(sym, repeats, invokes, warmup)
        checks += print_symfonic(sym, sets, out)
        for close in closers:
            close()

    if "core" in parts:
        grid = []
        for policies in GRID_POLICIES:
            for tools in GRID_TOOLS:
                cases = core_cases(sets, policies, tools)
                count = calibrate(cases, core_seconds)
                measure(cases, core_repeats, count, warmup=min(count, 5))
                grid.append((policies, tools, cases))
        checks += print_core(grid, sets, out)

    if "oa" in parts:
        oa, own_recorded = openai_agents_cases(sets[0], loop)
        measure(oa, repeats, invokes, warmup)
        for case in oa:
            if case.providers == "own":
                case.recorded = own_recorded()
        print_framework(
            "Part 4: OpenAI Agents SDK Runner.run, one run (2 model calls, 1 tool call, 12 tools)",
            OA_NOTES,
            oa,
            OA_COMPARISONS,
            "openai_agents",
            out,
        )

    if "pai" in parts:
        oi = oi_pydantic_ai_providers()
        pai = pydantic_ai_cases(sets[0], oi, loop)
        measure(pai, repeats, invokes, warmup)
        print_framework(
            "Part 5: pydantic-ai Agent.run, one run (2 model calls, 1 tool call, 12 tools)",
            PAI_NOTES,
            pai,
            PAI_COMPARISONS,
            "pydantic_ai",
            out,
        )
        oi.shutdown()

    print("## Targets (ratios and bounds from this run)")
    print()
    for line in checks:
        print(f"- {line}")
    if not checks:
        print("- none in this run: the parts with targets (lc, sym, core) did not run")
    print()
    elapsed = time.perf_counter() - started
    out["load_average_end"] = os.getloadavg()[0]
    print(f"total time {elapsed:.0f} s; 1-minute load average at the end {os.getloadavg()[0]:.2f}")
    out["seconds"] = elapsed
    for providers in sets:
        providers.shutdown()
    loop.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(out, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
