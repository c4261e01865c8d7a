"""The scripted turn every framework of the peer benchmark runs, and what it decides.

One user turn: two model calls and one tool call, twelve tools offered, a
tool output of 8 000 characters (2 000 tokens). Under seamscope, the sales
policy wins the PRE seam (the cheaper model) and redirects ``run_block`` to
``fetch_data`` through a guard; a role-palette, a safety-policy and an
allowlist stage narrow the tools; the offload gate prices the output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _facts import Expected, Gate
from _harness import Providers

from seamscope.adapters import DecisionLayer
from seamscope.decisions import (
    AllowlistStage,
    ModelConfig,
    PolicyStage,
    RolePaletteStage,
    SafetyLevel,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
)
from seamscope.decisions.records import GuardResult, PaletteVerdict
from seamscope.loop import RECALL_TOOL

__all__ = [
    "AGENT",
    "CONVERSATION",
    "FINAL_TEXT",
    "HAIKU",
    "LC_TOOLS",
    "MARKER",
    "OPUS",
    "PALETTE",
    "REPORT",
    "SONNET",
    "TURN",
    "USAGE_IN",
    "USAGE_OUT",
    "USER_TEXT",
    "async_tools",
    "layer_telemetry",
    "lc_layer",
]

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
USAGE_IN, USAGE_OUT = 1_200, 40


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


def layer_telemetry(providers: Providers | None) -> dict[str, Any]:
    """The layer's telemetry arguments; None: none at all (a ``NoopObserver`` and the
    API's no-op providers: what the decisions and an adapter cost alone)."""
    if providers is None:
        from opentelemetry import metrics, trace

        from seamscope.decisions import NoopObserver

        return {
            "observer": NoopObserver(),
            "tracer_provider": trace.NoOpTracerProvider(),
            "meter_provider": metrics.NoOpMeterProvider(),
        }
    return {
        "tracer_provider": providers.tracer_provider,
        "meter_provider": providers.meter_provider,
    }


def lc_layer(providers: Providers | None, palette: list[str]) -> DecisionLayer:
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


# Under seamscope: the palette (with delete_rows and the recall tool) drops five tools, the
# safety ceiling drops delete_rows, the allowlist re-adds hydrate_context; the 2 000-token
# output is priced at claude-haiku-4-5's rates ($1 / $5 per million tokens, genai-prices).
TURN = Expected(
    offered=frozenset({*LC_TOOLS, RECALL_TOOL}),
    selected=frozenset({*PALETTE, "hydrate_context", RECALL_TOOL}),
    dropped={
        "role_palette": frozenset(
            {"export_report", "deploy_service", "create_ticket", "page_oncall", "hydrate_context"}
        ),
        "policy": frozenset({"delete_rows"}),
    },
    winner="sales_data_read",
    model=HAIKU,
    passed_over="docs_lookup",
    emitted="run_block",
    redirect_to="fetch_data",
    guard=GuardResult.PASSED,
    palette=PaletteVerdict.KEPT,
    gate=Gate(HAIKU, 2_000, 5, 0.5, 1.0, 5.0),
)
