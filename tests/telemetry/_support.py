"""A scripted ReAct iteration through every decision, and readers for its telemetry.

The scenario drives the real components (SeamRouter, SelectionPipeline with
all six stages, OffloadGate, DecisionLayer, ReActAgent). Only the adopter's
pieces are scripted: the chat model, the tools, the predicates.

Iteration 0 of turn "conv-7" (agent "analyst", role "analyst"):

* selection over six offered tools: forced_choice abstains degraded (the
  resolver forces a tool that was not offered), intent_routing, role_palette
  and policy narrow, lazy_routing abstains, allowlist re-adds
  ``hydrate_context``;
* PRE seam: ``hydrate_to_deploy`` skipped (no model), ``docs_lookup`` not
  matched, ``sales_data_read`` matched: ``claude-haiku-4-5`` reasons;
* POST seam over two emitted calls: ``call_1`` run_block is redirected to
  fetch_data by ``run_block_to_fetch`` (after ``sales_data_read`` matched
  but its guard failed); ``call_2`` hydrate_context is redirected to the
  unrouted ``deploy`` and the palette gate drops the rewrite;
* the offload gate fires on fetch_data's 80 000-character output and does
  not fire on hydrate_context's small one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan

from seamscope.adapters import ChatRequest, ChatResponse, DecisionLayer, ReActAgent
from seamscope.decisions import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    Message,
    ModelConfig,
    ModelUsage,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SafetyLevel,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
)
from seamscope.telemetry import TelemetryConfig

CONVERSATION = "conv-7"
AGENT = "analyst"
ROLE = "analyst"
DEFAULT_MODEL = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
USER_TEXT = "show me last month's sales by brand"
OFFERED = ("run_block", "fetch_data", "search_docs", "delete_rows", "deploy", "hydrate_context")
SELECTED = ("run_block", "fetch_data", "hydrate_context")
BIG_OUTPUT_CHARS = 80_000  # 20 000 tokens by the chars/4 rule
USAGE = ModelUsage(input_tokens=1200, output_tokens=80)
PRICING = PricingTable(
    {
        HAIKU: {"input": 1, "output": 5},
        DEFAULT_MODEL: {"input": 5, "output": 25},
        SONNET: {"input": 3, "output": 15},
    },
    use_genai_prices=False,
)
# reprefill 20 000 * $1/M * H5 = 0.1; stub 80 * $1/M * 5 = 0.0004;
# recall 0.5 * (12 500 * $1/M + 250 * $5/M) = 0.006875
PREDICTED_NET_SAVING = 0.092725

CATALOG = ToolCatalog(
    [
        ToolSpec("run_block", SafetyLevel.WRITE, trigger_keywords=("sql",)),
        ToolSpec("fetch_data", SafetyLevel.READ, trigger_keywords=("sales",)),
        ToolSpec("search_docs", SafetyLevel.READ, trigger_keywords=("docs",)),
        ToolSpec("delete_rows", SafetyLevel.DESTRUCTIVE, trigger_keywords=("delete",)),
        ToolSpec("deploy", SafetyLevel.WRITE, trigger_keywords=("deploy",)),
        ToolSpec("hydrate_context", SafetyLevel.READ),
    ]
)

STAGE_NAMES = (
    "forced_choice",
    "intent_routing",
    "lazy_routing",
    "role_palette",
    "policy",
    "allowlist",
)
POLICY_NAMES = ("hydrate_to_deploy", "docs_lookup", "sales_data_read", "run_block_to_fetch")


def always(value: bool) -> Callable[[Any], bool]:
    def predicate(ctx: Any) -> bool:
        return value

    return predicate


def raising(error: BaseException) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        raise error

    return fn


def add_source(args: Mapping[str, Any], ctx: Any) -> Mapping[str, Any]:
    return {**args, "source": "warehouse"}


class ExplodingStage:
    """A selection stage (named like the role palette) whose apply raises."""

    name = "role_palette"
    protects_forced = True

    def apply(self, tools: tuple[Any, ...], ctx: Any) -> Any:
        raise RuntimeError("palette service down")


def policies(
    *,
    docs_match: Callable[[Any], bool] | None = None,
    transform: Callable[..., Mapping[str, Any]] | None = add_source,
) -> list[ToolCallPolicy]:
    """The scenario's four policies, in precedence order."""
    return [
        ToolCallPolicy(
            name="hydrate_to_deploy",
            match=always(True),
            when_tool="hydrate_context",
            redirect_to="deploy",
        ),
        ToolCallPolicy(
            name="docs_lookup",
            match=docs_match or always(False),
            redirect_to="search_docs",
            model=ModelConfig(SONNET),
        ),
        ToolCallPolicy(
            name="sales_data_read",
            match=always(True),
            when_tool="run_block",
            redirect_to="fetch_data",
            model=ModelConfig(HAIKU),
            guard=always(False),
        ),
        ToolCallPolicy(
            name="run_block_to_fetch",
            match=always(True),
            when_tool="run_block",
            redirect_to="fetch_data",
            args_transform=transform,
        ),
    ]


def stages(*, replace: Mapping[str, Any] | None = None) -> list[Any]:
    """All six stages in the seed's order; ``replace`` swaps one by name."""
    built: list[Any] = [
        ForcedChoiceStage(resolver=lambda ctx: "export_csv"),
        IntentRoutingStage(
            verdict=IntentVerdict("action", ["run_block", "fetch_data", "delete_rows"]),
            trigger_keywords=CATALOG.trigger_keywords(),
        ),
        LazyRoutingStage(),
        RolePaletteStage(resolver=lambda role: ["run_block", "fetch_data", "delete_rows"]),
        PolicyStage(catalog=CATALOG, max_safety_level=SafetyLevel.WRITE),
        AllowlistStage(always_include=["hydrate_context"], catalog=CATALOG),
    ]
    for name, stage in (replace or {}).items():
        built[STAGE_NAMES.index(name)] = stage
    return built


class ScriptedChat:
    """A chat callable that answers from a script, one response per call."""

    def __init__(self, responses: Sequence[ChatResponse]) -> None:
        self._responses = list(responses)
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return self._responses[min(len(self.requests) - 1, len(self._responses) - 1)]


def emitted_calls(call_id: Any = "call_1", args: Mapping[str, Any] | None = None) -> ChatResponse:
    return ChatResponse(
        Message(
            "assistant",
            "",
            (
                ToolCall(call_id, "run_block", dict(args or {"sql": "select 1"})),
                ToolCall("call_2", "hydrate_context", {}),
            ),
        ),
        usage=USAGE,
    )


def tools(big: str | None = None, small: str = "context: ok") -> dict[str, Any]:
    big_output = big if big is not None else "x" * BIG_OUTPUT_CHARS
    return {
        "run_block": lambda args: "ran",
        "fetch_data": lambda args: big_output,
        "search_docs": lambda args: "docs",
        "delete_rows": lambda args: "deleted",
        "deploy": lambda args: "deployed",
        "hydrate_context": lambda args: small,
    }


@dataclass
class Scenario:
    """Knobs for one scripted run; every default is the module docstring's run."""

    policies: list[ToolCallPolicy] = field(default_factory=policies)
    stages: list[Any] = field(default_factory=stages)
    response: ChatResponse = field(default_factory=emitted_calls)
    tools: dict[str, Any] = field(default_factory=tools)
    user_text: str = USER_TEXT
    max_iterations: int = 1
    conversation_id: str | None = CONVERSATION
    agent_name: str | None = AGENT
    role_model_resolver: Callable[[Any], Any] | None = None
    on_tool_call_dispatch: Callable[[Any, Any], Any] | None = None


def make_layer(
    scenario: Scenario,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    telemetry_config: TelemetryConfig | None = None,
    observer: Any = None,
    telemetry: Any = None,
) -> DecisionLayer:
    ids = iter(f"off-{i}" for i in range(1, 1000))
    return DecisionLayer(
        default_model=DEFAULT_MODEL,
        policies=scenario.policies,
        stages=scenario.stages,
        catalog=CATALOG,
        pricing=PRICING,
        agent_name=scenario.agent_name,
        role_model_resolver=scenario.role_model_resolver,
        on_tool_call_dispatch=scenario.on_tool_call_dispatch,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=telemetry_config,
        observer=observer,
        telemetry=telemetry,
        offload_id_factory=lambda: next(ids),
    )


def run(
    scenario: Scenario | None = None,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    telemetry_config: TelemetryConfig | None = None,
    observer: Any = None,
    telemetry: Any = None,
) -> Any:
    """Run one turn of the scenario; returns the TurnResult."""
    scenario = scenario or Scenario()
    layer = make_layer(
        scenario,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=telemetry_config,
        observer=observer,
        telemetry=telemetry,
    )
    agent = ReActAgent(
        layer,
        ScriptedChat([scenario.response]),
        scenario.tools,
        max_iterations=scenario.max_iterations,
    )
    return agent.run_turn(scenario.conversation_id, scenario.user_text, role=ROLE)


def decisions(result: Any) -> list[Any]:
    """What the loop decided, without durations (they are excluded from equality)."""
    return [
        (
            r.model,
            r.model_source,
            r.model_policy,
            r.selection.selected,
            r.selection.forced_tool,
            r.selection.records,
            r.dispatches,
            r.executed,
            r.gate_decisions,
        )
        for r in result.iterations
    ]


# -- reading spans -------------------------------------------------------------


def ordered(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def tree(spans: Sequence[ReadableSpan]) -> list[tuple[int, str]]:
    """(depth, name) in depth-first start order: the span tree as a flat list."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in ordered(spans):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in by_parent.get(parent, []):
            out.append((depth, span.name))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in ordered(spans) if s.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert 1 == len(found), f"expected one {name} span, got {len(found)}"
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """Span attributes as plain values (sequences become tuples)."""
    return {k: tuple(v) if isinstance(v, tuple | list) else v for k, v in span.attributes.items()}


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def hex_ids(span: ReadableSpan) -> dict[str, str]:
    return {
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": format(span.context.span_id, "016x"),
    }


# -- reading metrics -------------------------------------------------------------


def metric_points(reader: InMemoryMetricReader) -> dict[str, dict[frozenset[Any], Any]]:
    """{metric name: {frozenset(attribute items): value}}; histograms give their point."""
    out: dict[str, dict[frozenset[Any], Any]] = {}
    data = reader.get_metrics_data()
    if data is None:
        return out
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points = out.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    key = frozenset((point.attributes or {}).items())
                    if isinstance(point, NumberDataPoint):
                        points[key] = point.value
                    elif isinstance(point, HistogramDataPoint):
                        points[key] = point
    return out


def point_key(mapping: Mapping[str, Any]) -> frozenset[Any]:
    return frozenset(mapping.items())
