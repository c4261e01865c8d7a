"""The Agents SDK's ToolOutputTrimmer under SeamscopeRunner: what is read as a trim, and
that reading it never changes the run.

The priced terms, the settlement and ``explain`` are checked against ground truth in
``tests/truth/test_openai_agents_trimmer_truth.py``; here: the pure reading of a
filter's effect (:func:`trimmed`), the model inputs with and without seamscope, the
filters that are not the SDK's trimmer, and a failure of seamscope's own reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, set_tracing_disabled
from agents.extensions.tool_output_trimmer import ToolOutputTrimmer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters._openai_agents_support import ModelCall, Toolbox, call, scripted_models, step, text
from seamscope.adapters import DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.adapters.openai_agents import _translate as translate
from seamscope.adapters.openai_agents._translate import Trimmed
from seamscope.telemetry import conventions as c

OPUS = "claude-opus-4-6"


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _output(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


# -- the pure reading ------------------------------------------------------------------------


def test_a_shortened_text_output_is_a_trim_of_the_call_that_made_it() -> None:
    before = [
        {"role": "user", "content": "q3?"},
        _call("c1", "big_report", '{"topic": "q3"}'),
        _output("c1", "x" * 4_000),
        _call("c2", "search", '{"query": "q3"}'),
        _output("c2", "short"),
    ]
    after = [*before[:2], _output("c1", "[Trimmed]\nxxxx..."), *before[3:]]
    assert [Trimmed("c1", "big_report", {"topic": "q3"}, 1_000.0, "[Trimmed]\nxxxx...")] == (
        translate.trimmed(before, after)
    )


def test_what_is_not_a_shorter_text_is_no_trim() -> None:
    text_parts = [{"type": "input_text", "text": "y" * 800}, {"type": "input_text", "text": "z"}]
    with_image = [
        {"type": "input_text", "text": "y" * 800},
        {"type": "input_image", "image_url": "data:image/png;base64," + "A" * 4_000},
    ]
    before = [
        _output("same", "a" * 1_000),
        _output("longer", "b" * 10),
        _output("parts", text_parts),
        _output("image", with_image),
        _output("orphan", "c" * 1_000),
    ]
    after = [
        _output("same", "a" * 1_000),
        _output("longer", "b" * 40),
        _output("parts", "[Trimmed: parts]"),
        _output("image", "[Trimmed: image]"),
        _output("orphan", "[Trimmed]"),
        _output("new", "[Trimmed]"),  # not in the input the filter received
    ]
    # text parts count by their text (801 chars); an image's size is not its text's;
    # an output whose call is not in the input is named "?"
    assert [
        Trimmed("parts", "?", {}, 200.25, "[Trimmed: parts]"),
        Trimmed("orphan", "?", {}, 250.0, "[Trimmed]"),
    ] == translate.trimmed(before, after)
    assert [] == translate.trimmed("a string input", after)


# -- through the SDK ---------------------------------------------------------------------------


def _script() -> list[Any]:
    return [
        step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0)),
        step(text("Q3 grew 12%."), usage=(21_000, 30, 0)),
        step(text("Churn fell."), usage=(1_300, 20, 0)),
        step(call("big_report", {"topic": "q3"}, "c2"), usage=(1_400, 25, 0)),
        step(text("Here are the full numbers."), usage=(21_500, 15, 0)),
    ]


ASKS = ("the q3 report", "and churn?", "the full numbers")


def _converse(runner: Any, filter_: Any, session: str) -> tuple[list[ModelCall], list[Any]]:
    """Three runs on one session with ``filter_`` as the caller's input filter:
    what each model call received, and each run's final output."""
    models, log = scripted_models([OPUS], _script())
    box = Toolbox()
    agent = Agent(name="analyst", model=models[OPUS], tools=[box.tools()["big_report"]])
    config = RunConfig(call_model_input_filter=filter_)

    async def go() -> list[Any]:
        memory = SQLiteSession(session)
        outputs = []
        for ask in ASKS:
            result = await runner.run(agent, ask, session=memory, run_config=config)
            outputs.append(result.final_output)
        return outputs

    return log, asyncio.run(go())


def test_the_model_receives_what_the_trimmer_alone_sends(tracer_provider: Any) -> None:
    """The same script through the SDK's own Runner and through SeamscopeRunner
    (offload off): every model call receives the same input, every run ends
    with the same output."""
    plain_log, plain_out = _converse(Runner, ToolOutputTrimmer(recent_turns=1), "plain")
    layer = DecisionLayer(default_model=OPUS, agent_name="analyst", tracer_provider=tracer_provider)
    seen_log, seen_out = _converse(
        SeamscopeRunner(layer, offload=False), ToolOutputTrimmer(recent_turns=1), "seen"
    )
    assert plain_out == seen_out
    assert [m.input for m in plain_log] == [m.input for m in seen_log]
    assert 1 == len(layer.end_conversation("seen"))


def test_a_filter_that_is_not_the_trimmer_is_not_priced(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    """A filter of the caller's own that calls the trimmer inside: its trims reach
    the model as it returned them, and are not priced (a documented limit)."""
    trimmer = ToolOutputTrimmer(recent_turns=1)

    def own_filter(data: Any) -> Any:
        return trimmer(data)

    layer = DecisionLayer(default_model=OPUS, agent_name="analyst", tracer_provider=tracer_provider)
    log, _ = _converse(SeamscopeRunner(layer, offload=False), own_filter, "own")
    assert log[2].outputs()["c1"].startswith("[Trimmed: big_report output")
    assert [] == [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_COMPACTION]
    assert [] == layer.end_conversation("own")


def test_a_failure_reading_the_trims_is_contained(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """seamscope's own reading of the trims raises: the runs go on as the SDK runs
    them (the same inputs), nothing is priced, and the failure is one event per call."""

    def broken(before: Any, after: Any) -> list[Trimmed]:
        raise RuntimeError("reading the trims failed")

    monkeypatch.setattr(translate, "trimmed", broken)
    plain_log, plain_out = _converse(Runner, ToolOutputTrimmer(recent_turns=1), "plain")
    layer = DecisionLayer(default_model=OPUS, agent_name="analyst", tracer_provider=tracer_provider)
    seen_log, seen_out = _converse(
        SeamscopeRunner(layer, offload=False), ToolOutputTrimmer(recent_turns=1), "broken"
    )
    assert (plain_out, [m.input for m in plain_log]) == (seen_out, [m.input for m in seen_log])
    assert [("openai_agents.tool_output_trimmer", "RuntimeError")] * 5 == [
        (e["hook"], e["error_type"]) for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR
    ]
    assert [] == [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_COMPACTION]
