"""ADK and genai values to seamscope's and back: the adapter's pure translations."""

from __future__ import annotations

from google.adk.models import LlmResponse
from google.genai import types

from seamscope.adapters.google_adk import _translate as tr
from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.decisions.records import (
    DispatchRecord,
    GuardResult,
    PaletteVerdict,
    PostModelResult,
    WinnerSource,
)
from seamscope.loop import RECALL_TOOL

from ._google_adk_support import call, text


def answer(call_id: str, name: str, response: dict[str, object]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(id=call_id, name=name, response=response)
    )


def declared(*names: str) -> types.Tool:
    return types.Tool(function_declarations=[types.FunctionDeclaration(name=n) for n in names])


def test_contents_become_the_messages_policies_read() -> None:
    contents = [
        types.Content(role="user", parts=[text("How did Q3 go?")]),
        types.Content(
            role="model",
            parts=[
                types.Part(text="thinking it over", thought=True),
                text("Reading."),
                call("lookup", {"key": "q3"}, "c1"),
            ],
        ),
        types.Content(
            role="user",
            parts=[answer("c1", "lookup", {"result": "found q3"}), answer("c2", "x", {"n": 1})],
        ),
    ]
    assert [
        Message("system", "Be brief."),
        Message("user", "How did Q3 go?"),
        Message("assistant", "Reading.", (ToolCall("c1", "lookup", {"key": "q3"}),)),
        Message("tool", "found q3", name="lookup", tool_call_id="c1"),
        Message("tool", '{"n": 1}', name="x", tool_call_id="c2"),
    ] == tr.messages(contents, "Be brief.")


def test_a_system_instruction_as_content_is_one_system_message() -> None:
    instruction = types.Content(role="system", parts=[text("Be "), text("brief.")])
    assert [Message("system", "Be brief.")] == tr.messages([], instruction)


def test_declarations_and_the_narrowed_tools() -> None:
    search = types.Tool(google_search=types.GoogleSearch())
    tools = [declared("a", "b"), search, declared("c")]

    assert ["a", "b", "c"] == [d.name for d in tr.declarations(tools)]
    narrowed = tr.narrowed(tools, {"b"})
    assert narrowed is not None
    assert [["b"], None] == [
        None if t.function_declarations is None else [d.name for d in t.function_declarations]
        for t in narrowed
    ]
    assert search is narrowed[1]
    assert ["a", "b"] == [d.name for d in tools[0].function_declarations or ()]  # unchanged
    assert tr.narrowed(None, {"a"}) is None


def test_what_may_run_loses_only_the_offered_tools_the_selection_dropped() -> None:
    tools_dict = {"a": 1, "b": 2, "transfer_to_agent": 3}
    assert {"b": 2, "transfer_to_agent": 3} == tr.runnable(tools_dict, {"a", "b"}, {"b"})


def test_a_forced_tool_is_the_only_function_the_model_may_call() -> None:
    config = tr.forced_tool_config(None, "lookup")
    calling = config.function_calling_config
    assert calling is not None
    assert (types.FunctionCallingConfigMode.ANY, ["lookup"]) == (
        calling.mode,
        calling.allowed_function_names,
    )


def test_the_emitted_calls_and_their_rewrite() -> None:
    response = LlmResponse(
        content=types.Content(
            role="model",
            parts=[
                text("Two calls."),
                call("run_block", {"block": "b"}, "c1"),
                call("x", {}, "c2"),
            ],
        )
    )
    message, calls, positions = tr.emitted(response)
    assert (
        Message("assistant", "Two calls.", calls),
        (ToolCall("c1", "run_block", {"block": "b"}), ToolCall("c2", "x", {})),
        (1, 2),
    ) == (message, calls, positions)

    redirected = ToolCall("c1", "fetch_data", {"source": "b"})
    records = (
        DispatchRecord(
            0,
            calls[0],
            redirected,
            "sales",
            "fetch_data",
            GuardResult.PASSED,
            False,
            False,
            PaletteVerdict.KEPT,
            WinnerSource.POLICY,
        ),
        DispatchRecord(
            1,
            calls[1],
            calls[1],
            None,
            None,
            GuardResult.NONE,
            False,
            False,
            PaletteVerdict.KEPT,
            WinnerSource.NONE,
        ),
    )
    post = PostModelResult((redirected, calls[1]), records)
    rewritten = tr.rewrite(response, positions, post)
    assert rewritten is not None and rewritten.content is not None
    assert [("c1", "fetch_data", {"source": "b"}), ("c2", "x", {})] == [
        (p.function_call.id, p.function_call.name, p.function_call.args)
        for p in rewritten.content.parts or ()
        if p.function_call
    ]
    assert "run_block" == (response.content.parts or [])[1].function_call.name  # type: ignore[union-attr]
    unchanged = PostModelResult((calls[1],), records[1:])
    assert tr.rewrite(response, positions[1:], unchanged) is None


def test_usage_metadata_as_adk_counts_it() -> None:
    metadata = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=1_000,
        tool_use_prompt_token_count=20,
        candidates_token_count=50,
        thoughts_token_count=30,
        cached_content_token_count=400,
    )
    assert ModelUsage(1_020, 80, 400, 0) == tr.usage(metadata)
    assert tr.usage(None) is None
    assert tr.usage(types.GenerateContentResponseUsageMetadata()) is None


def test_the_stubs_a_request_carries_and_the_recalls_that_brought_one_back() -> None:
    stub = "[offloaded off-1: big_report output, 20000 tokens] recall it"
    other = "[offloaded off-2: big_report output, 20000 tokens] recall it"
    contents = [
        types.Content(role="user", parts=[answer("c1", "big_report", {"result": stub})]),
        types.Content(role="user", parts=[answer("c2", "big_report", {"result": other})]),
        types.Content(role="model", parts=[call(RECALL_TOOL, {"offload_id": "off-1"}, "r1")]),
        types.Content(role="user", parts=[answer("r1", RECALL_TOOL, {"result": "the text"})]),
        types.Content(role="model", parts=[call(RECALL_TOOL, {"offload_id": "off-2"}, "r2")]),
        types.Content(role="user", parts=[answer("r2", RECALL_TOOL, {"error": "not found"})]),
    ]
    assert (("off-1", "off-2"), ("off-1",)) == tr.stubs(contents)


def test_only_text_results_are_offloadable() -> None:
    assert ["a", "b", None, None] == [
        tr.offloadable_text(r) for r in ("a", {"result": "b"}, {"result": 1}, {"a": "b"})
    ]
    assert {"result": "stub"} == tr.stubbed("stub")
    assert ("off-1", "") == (tr.recall_id({"offload_id": "off-1"}), tr.recall_id(None))
