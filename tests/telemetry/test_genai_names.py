"""Every ``gen_ai.*`` name seamscope really writes is one the GenAI conventions define.

The names are read from the spans and span events of real runs (the loop API
and the demo's LangChain conversation through ``create_agent``, content capture
off and on), and checked against the installed
``opentelemetry-semantic-conventions`` package, plus the names merged upstream
since its release (``MERGED_UPSTREAM``). Cache counts are on inference
(``chat``) spans only, never on ``invoke_agent`` (semantic-conventions-genai
#469); ``gen_ai.tool.definitions`` on every chat span lists the tools sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

from seamscope.adapters import DecisionLayer
from seamscope.decisions import ModelUsage, ToolCall
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c
from seamscope.telemetry._genai import tool_definitions

from .test_conventions import MERGED_UPSTREAM, _installed_attribute_names

SELECTOR_MODEL = "claude-haiku-4-5"  # the demo's LLMToolSelectorMiddleware model

CACHE_KEYS = {
    c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
    c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
}


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _loop_run(capture: bool) -> tuple[ReadableSpan, ...]:
    """A two-iteration turn of the loop API: a tool call, a cached prompt, an offload."""
    provider, exporter = _provider()
    layer = DecisionLayer(
        default_model="claude-opus-4-6",
        agent_name="analyst",
        provider_name="anthropic",
        tracer_provider=provider,
        telemetry_config=TelemetryConfig.create(capture_content=capture),
    )
    tools = [
        {"type": "function", "function": {"name": "fetch", "description": "Fetch a table."}},
        "summarize",
    ]
    with layer.turn("conv-names", [{"role": "user", "content": "q"}]) as turn:
        with turn.iteration() as it:
            it.select_tools(tools)
            it.pre_model()
            with it.chat() as call:
                call.report(
                    ModelUsage(
                        input_tokens=30_000,
                        output_tokens=20,
                        cache_read_tokens=10_000,
                        cache_write_tokens=5_000,
                    ),
                    response_model="claude-opus-4-6-20260101",
                )
            post = it.post_model([ToolCall("c1", "fetch", {"table": "sales"})])
            with it.execute_tool(post.calls[0]) as span:
                it.tool_result(span, "rows")
            it.offload(post.calls[0], "x" * 80_000)
        with turn.iteration() as it:
            it.select_tools(tools)
            it.pre_model()
            with it.chat() as call:
                call.report(ModelUsage(input_tokens=1_000, output_tokens=5))
            it.post_model([])
    layer.end_conversation("conv-names")
    provider.shutdown()
    return exporter.get_finished_spans()


def _langchain_run(capture: bool) -> tuple[ReadableSpan, ...]:
    """The demo's LangChain conversation, every turn, through create_agent."""
    pytest.importorskip("langchain", reason="install the langchain extra: pip install '.[test]'")
    from seamscope.cli._langchain_scenario import TURNS, LangChainConversation

    provider, exporter = _provider()
    conversation = LangChainConversation(
        tracer_provider=provider, telemetry_config=TelemetryConfig.create(capture_content=capture)
    )
    for position in range(len(TURNS)):
        conversation.run_turn("demo-names", position)
    conversation.end_conversation("demo-names")
    provider.shutdown()
    return exporter.get_finished_spans()


RUNS = {
    "loop": _loop_run,
    "langchain-demo": _langchain_run,
}


def _keys(spans: Iterable[ReadableSpan]) -> set[str]:
    keys = {key for span in spans for key in (span.attributes or {})}
    keys |= {key for span in spans for event in span.events for key in (event.attributes or {})}
    return {key for key in keys if key.startswith("gen_ai.")}


@pytest.fixture(scope="module", params=[(r, capture) for r in RUNS for capture in (False, True)])
def spans(request: pytest.FixtureRequest) -> tuple[ReadableSpan, ...]:
    run, capture = request.param
    return RUNS[run](capture)


def test_every_gen_ai_name_written_is_a_convention_name(spans: tuple[ReadableSpan, ...]) -> None:
    known = set(_installed_attribute_names()) | set(MERGED_UPSTREAM)
    written = _keys(spans)
    assert {c.ATTR_GEN_AI_OPERATION_NAME, c.ATTR_GEN_AI_REQUEST_MODEL} <= written
    assert set() == written - known


def test_every_operation_name_written_is_a_convention_value(
    spans: tuple[ReadableSpan, ...],
) -> None:
    values = {v.value for v in gen_ai_attributes.GenAiOperationNameValues}
    written = {(s.attributes or {}).get(c.ATTR_GEN_AI_OPERATION_NAME) for s in spans} - {None}
    assert {"chat", "invoke_agent", "execute_tool"} == written
    assert set() == written - values


def test_cache_counts_are_on_chat_spans_only(spans: tuple[ReadableSpan, ...]) -> None:
    def operation(span: ReadableSpan) -> Any:
        return (span.attributes or {}).get(c.ATTR_GEN_AI_OPERATION_NAME)

    carriers = {operation(s) for s in spans if CACHE_KEYS & set(s.attributes or {})}
    assert {"chat"} == carriers


def test_cache_writes_carry_todays_name_and_the_old_one_alike(
    spans: tuple[ReadableSpan, ...],
) -> None:
    pairs = [
        (
            (s.attributes or {}).get(c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS),
            (s.attributes or {}).get(c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        )
        for s in spans
        if (s.attributes or {}).get(c.ATTR_GEN_AI_OPERATION_NAME) == "chat"
    ]
    written = [pair for pair in pairs if pair != (None, None)]
    assert written  # both runs report cache writes
    assert [] == [(new, old) for new, old in written if new != old or not isinstance(new, int)]


def test_every_chat_span_lists_the_tools_sent(spans: tuple[ReadableSpan, ...]) -> None:
    # the agent's model calls (a watched middleware's own decision model, LangChain's
    # tool selector, is recorded from LangChain's callbacks, without its tools)
    chats = [
        s
        for s in spans
        if (s.attributes or {}).get(c.ATTR_GEN_AI_OPERATION_NAME) == "chat"
        and (s.attributes or {}).get(c.ATTR_GEN_AI_REQUEST_MODEL) != SELECTOR_MODEL
    ]
    assert chats
    for span in chats:
        definitions = json.loads(span.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])
        assert definitions, span.name
        # the conventions' schema requires type and name (gen-ai-tool-definitions.json)
        assert [] == [d for d in definitions if not (d.get("type") and d.get("name"))]


# -- gen_ai.tool.definitions, tool by tool ------------------------------------------------


def _framework_tools() -> list[Any]:
    agents = pytest.importorskip("agents", reason="install the openai-agents extra")
    lc_tools = pytest.importorskip("langchain_core.tools", reason="install the langchain extra")
    pai_tools = pytest.importorskip("pydantic_ai.tools", reason="install the pydantic-ai extra")

    @lc_tools.tool
    def get_logs(service: str) -> str:
        """Read a service's error logs."""
        return service

    @agents.function_tool
    def page_oncall(team: str) -> str:
        """Page the on-call engineer."""
        return team

    return [
        get_logs,
        page_oncall,
        pai_tools.ToolDefinition(
            name="search_docs",
            description="Search the docs.",
            parameters_json_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        ),
        {
            "type": "function",
            "function": {
                "name": "fetch",
                "description": "Fetch.",
                "parameters": {"type": "object"},
            },
        },
        {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
        "summarize",
        agents.WebSearchTool(),
    ]


def test_names_and_types_by_default() -> None:
    assert [
        {"type": "function", "name": "get_logs"},
        {"type": "function", "name": "page_oncall"},
        {"type": "function", "name": "search_docs"},
        {"type": "function", "name": "fetch"},
        {"type": "function", "name": "read_file"},
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "function", "name": "summarize"},
        {"type": "WebSearchTool", "name": "web_search"},
    ] == json.loads(tool_definitions(_framework_tools(), max_length=4096) or "")


def test_descriptions_and_schemas_only_with_detail_and_masked() -> None:
    detailed = json.loads(
        tool_definitions(
            _framework_tools(), max_length=100_000, detail=True, mask=lambda t: t.upper()
        )
        or ""
    )
    assert [
        ("get_logs", "READ A SERVICE'S ERROR LOGS.", ["service"]),
        ("page_oncall", "PAGE THE ON-CALL ENGINEER.", ["team"]),
        ("search_docs", "SEARCH THE DOCS.", ["q"]),
        ("fetch", "FETCH.", []),
        ("read_file", "READ A FILE.", []),
        ("web_search", None, None),
        ("summarize", None, None),
        ("web_search", None, None),
    ] == [
        (
            d["name"],
            d.get("description"),
            None if "parameters" not in d else sorted(d["parameters"].get("properties", {})),
        )
        for d in detailed
    ]


def test_the_text_is_json_within_the_length_limit() -> None:
    tools = [f"tool_{i:03}" for i in range(100)]
    text = tool_definitions(tools, max_length=200) or ""
    assert len(text) <= 200
    kept = json.loads(text)
    assert [f"tool_{i:03}" for i in range(len(kept))] == [d["name"] for d in kept]
    assert 0 < len(kept) < 100
    # an entry whose detail does not fit is listed bare; none that fits: no attribute
    one = [{"name": "t", "description": "d" * 500}]
    assert [{"type": "function", "name": "t"}] == json.loads(
        tool_definitions(one, max_length=100, detail=True) or ""
    )
    assert None is tool_definitions(["x" * 300], max_length=64)
    assert "[]" == tool_definitions([], max_length=64)
    assert 3 == len(json.loads(tool_definitions(tools, max_items=3) or ""))


@pytest.mark.parametrize("capture", [False, True])
def test_content_capture_opts_in_to_descriptions_on_the_chat_span(capture: bool) -> None:
    provider, exporter = _provider()
    layer = DecisionLayer(
        default_model="claude-opus-4-6",
        tracer_provider=provider,
        telemetry_config=TelemetryConfig.create(
            capture_content=capture, mask=lambda t: t.replace("secret", "[masked]")
        ),
    )
    tool = {"name": "lookup", "description": "Look up a secret.", "parameters": {"type": "object"}}
    with layer.turn("conv-tools", []) as turn, turn.iteration() as it:
        it.select_tools([tool])
        with it.chat():
            pass
    provider.shutdown()
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    expected: dict[str, Any] = {"type": "function", "name": "lookup"}
    if capture:
        expected |= {"description": "Look up a [masked].", "parameters": {"type": "object"}}
    assert [expected] == json.loads(chat.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])


def test_each_chat_span_lists_its_own_iterations_tools() -> None:
    """The text is remembered per tool list: a list seen before gives the same
    text, another list its own (the same objects in another order too)."""
    provider, exporter = _provider()
    layer = DecisionLayer(default_model="claude-opus-4-6", tracer_provider=provider)
    a, b = {"name": "a"}, {"name": "b", "type": "web_search"}
    with layer.turn("conv-memo", []) as turn:
        for tools in ([a, b], [a], [b, a], [a, b]):
            with turn.iteration() as it:
                it.select_tools(tools)
                with it.chat():
                    pass
    provider.shutdown()
    assert [["a", "b"], ["a"], ["b", "a"], ["a", "b"]] == [
        [d["name"] for d in json.loads(s.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])]
        for s in exporter.get_finished_spans()
        if s.name.startswith("chat ")
    ]
