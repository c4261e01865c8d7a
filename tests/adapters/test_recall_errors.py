"""A recall that finds nothing is never silent, in every adapter: the agent is
told why, the recall's ``execute_tool`` span is an error (``offload_unknown``
for an id its conversation does not have), and it costs nothing in the
ledger. (LangChain's case and the store-down cases: tests/stores/test_store_faults.py.)"""

from __future__ import annotations

from typing import Any

from agents import SQLiteSession
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

from . import _openai_agents_support as sdk
from . import _pydantic_ai_support as pai
from . import test_openai_agents as sdk_tests
from . import test_pydantic_ai as pai_tests

UNKNOWN = "error: no offloaded output 'off-9' in this conversation"


def _recall_errors(exporter: InMemorySpanExporter) -> list[Any]:
    return [
        (s.attributes or {}).get(c.ATTR_ERROR_TYPE)
        for s in exporter.get_finished_spans()
        if s.name == f"execute_tool {RECALL_TOOL}"
    ]


def test_pydantic_ai_an_unknown_offload_is_an_error_on_the_recall_span(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = pai_tests.make_layer(tracer_provider, meter_provider)
    models, calls = pai.scripted_models(
        [pai_tests.OPUS],
        [
            pai.step(pai.call("big_report", {"topic": "q3"}, "c1")),
            pai.step(pai.text("ready")),
            pai.step(pai.call(RECALL_TOOL, {"offload_id": "off-9"}, "c2")),
            pai.step(pai.text("nothing there")),
        ],
    )
    agent = pai_tests.analyst(models[pai_tests.OPUS], pai.Toolbox(), SeamscopeCapability(layer))
    first = agent.run_sync("Write the Q3 report.", conversation_id="conv-7")
    agent.run_sync("Show it again.", message_history=first.all_messages())
    assert UNKNOWN == calls[3].outputs()["c2"]
    assert [c.RECALL_UNKNOWN] == _recall_errors(span_exporter)
    (settled,) = layer.end_conversation("conv-7")
    assert 0 == settled.recalls


def test_openai_agents_an_unknown_offload_is_an_error_on_the_recall_span(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = sdk_tests.make_layer(tracer_provider, meter_provider)
    models, calls = sdk.scripted_models(
        [sdk_tests.OPUS],
        [
            sdk.step(sdk.call("big_report", {"topic": "q3"}, "c1")),
            sdk.step(sdk.text("ready")),
            sdk.step(sdk.call(RECALL_TOOL, {"offload_id": "off-9"}, "c2")),
            sdk.step(sdk.text("nothing there")),
        ],
    )
    runner = SeamscopeRunner(layer)
    agent = sdk_tests.analyst(models[sdk_tests.OPUS], sdk.Toolbox(), runner)
    session = SQLiteSession("conv-7")
    runner.run_sync(agent, "Write the Q3 report.", session=session)
    runner.run_sync(agent, "Show it again.", session=session)
    assert UNKNOWN == calls[3].outputs()["c2"]
    assert [c.RECALL_UNKNOWN] == _recall_errors(span_exporter)
    (settled,) = layer.end_conversation("conv-7")
    assert 0 == settled.recalls
