"""The offload store down or full: the loop never breaks and loses nothing.

A real ``redis-server`` killed and restarted under a LangChain agent, and a
SQLite file on a full file system (a 1 MiB tmpfs mounted for the test):
an output the store did not keep is not offloaded (it stays in the prompt;
the gate span says ``store_failed``); a recall the store cannot answer
tells the agent to retry, is an error on its ``execute_tool`` span and a
counted event, and the same recall works once the store is back.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests._redis_server import RedisServer
from tests.adapters._langchain_support import BIG_REPORT_CHARS, Toolbox, ai, scripted_models
from tests.telemetry._support import metric_points

from seamscope.adapters import RECALL_TOOL, DecisionLayer, ReActAgent
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.loop import ChatRequest, ChatResponse
from seamscope.stores import RedisStore, SQLiteStore
from seamscope.telemetry import conventions as c

OPUS = "claude-opus-4-6"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    (tmp_path / "redis").mkdir()
    server = RedisServer.start(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()


def _layer(tracer_provider: Any, meter_provider: Any, **options: Any) -> DecisionLayer:
    options.setdefault("offload_id_factory", lambda: "off-1")
    return DecisionLayer(
        default_model=OPUS,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        **options,
    )


def _gate_reasons(exporter: InMemorySpanExporter) -> list[Any]:
    return [
        (s.attributes or {}).get(c.ATTR_OFFLOAD_REASON_CODE)
        for s in exporter.get_finished_spans()
        if s.name == c.SPAN_OFFLOAD_GATE
    ]


def _store_errors(reader: InMemoryMetricReader) -> dict[str, float]:
    points = metric_points(reader).get(c.METRIC_OFFLOAD_STORE_ERRORS.name, {})
    return {dict(key)[c.ATTR_OFFLOAD_STORE_OPERATION]: value for key, value in points.items()}


def test_redis_down_no_offload_is_made_and_the_output_stays_in_the_prompt(
    redis: RedisServer,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    layer = _layer(tracer_provider, meter_provider)
    store = RedisStore(redis.url, timeout=0.5)
    redis.kill()
    models, calls = scripted_models(
        [OPUS], [ai(("big_report", {"topic": "q3"}, "b1")), ai(text="done")]
    )
    agent = create_agent(
        models[OPUS],
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, offload_store=store)],
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke(
        {"messages": [HumanMessage("report")]}, {"configurable": {"thread_id": "conv-1"}}
    )
    assert "done" == result["messages"][-1].content
    assert BIG_REPORT_CHARS == len(str(calls[1].tool_message("b1").content))
    assert [c.OffloadReasonCode.STORE_FAILED.value] == _gate_reasons(span_exporter)
    assert 1 == _store_errors(metric_reader).get("put")


def test_a_recall_the_store_cannot_answer_says_retry_and_works_once_it_is_back(
    redis: RedisServer,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    layer = _layer(tracer_provider, meter_provider)
    store = RedisStore(redis.url, timeout=0.5)
    script = [
        ai(("big_report", {"topic": "q3"}, "b1")),
        ai(text="offloaded"),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r1")),
        ai(text="retry later"),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r2")),
        ai(text="got it"),
    ]
    models, _ = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS],
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, offload_store=store)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "conv-1"}}
    agent.invoke({"messages": [HumanMessage("report")]}, config)
    redis.kill()
    down = agent.invoke({"messages": [HumanMessage("recall it")]}, config)
    answer = [m for m in down["messages"] if isinstance(m, ToolMessage)][-1]
    assert (RECALL_TOOL, True) == (
        answer.name,
        str(answer.content).startswith(
            "error: the offload store did not answer (ConnectionError); the output is kept: "
            f"call {RECALL_TOOL} again"
        ),
    )
    recall_spans = [
        s for s in span_exporter.get_finished_spans() if s.name == f"execute_tool {RECALL_TOOL}"
    ]
    assert ["ConnectionError"] == [
        (s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in recall_spans
    ]
    assert 1 == _store_errors(metric_reader).get("recall")
    redis.restart()
    back = agent.invoke({"messages": [HumanMessage("recall it again")]}, config)
    answer = [m for m in back["messages"] if isinstance(m, ToolMessage)][-1]
    assert BIG_REPORT_CHARS == len(str(answer.content))
    (settled,) = layer.end_conversation("conv-1")
    assert 1 == settled.recalls  # the failed recall cost nothing: it brought nothing back


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a real file system that fills up."""
    mount = tmp_path / "small"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: the full-disk test needs one (and root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (run as root to enable): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_makes_no_offload_and_loses_nothing(
    full_disk: Path,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    store = SQLiteStore(full_disk / "offloads.db")
    layer = _layer(tracer_provider, meter_provider, offload_store=store, offload_id_factory=None)
    outputs = [f"{n:04d}" + "y" * 79_996 for n in range(40)]  # 40 x 80 kB > 1 MiB
    replies = [Message("assistant", "", (ToolCall(f"t{n}", "dump", {"n": n}),)) for n in range(40)]
    replies.append(Message("assistant", "done"))
    seen: list[ChatRequest] = []

    def chat(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        return ChatResponse(replies[len(seen) - 1], ModelUsage(1_000, 10))

    agent = ReActAgent(
        layer,
        chat,
        {"dump": lambda args: outputs[int(args["n"])]},
        max_iterations=41,
    )
    result = agent.run_turn("conv-1", "dump everything")
    reasons = _gate_reasons(span_exporter)
    kept = reasons.count(c.OffloadReasonCode.NET_POSITIVE.value)
    failed = reasons.count(c.OffloadReasonCode.STORE_FAILED.value)
    assert (40, True, True) == (len(reasons), kept > 0, failed > 0)
    # every output the store could not keep is still whole in the conversation
    tool_texts = [m.content for m in result.messages if getattr(m, "role", "") == "tool"]
    whole = [t for t in tool_texts if len(t) == 80_000]
    assert failed == len(whole)
    assert {o for o in outputs} >= set(whole)
    assert failed == _store_errors(metric_reader).get("put")
    # and every one it kept comes back
    for record in store.offloads("conv-1"):
        assert 80_000 == len(agent.stored_output(record.offload_id, "conv-1") or "")


def test_a_recall_reads_only_its_own_conversations_outputs(
    tmp_path: Path, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """Conversation B (offered the recall tool for an offload of its own) names
    conversation A's offload id: refused as unknown, an error on the recall's
    span; A still recalls it."""
    ids = iter(["off-1", "off-2"])
    layer = _layer(tracer_provider, meter_provider, offload_id_factory=ids.__next__)
    store = SQLiteStore(tmp_path / "offloads.db")
    script = [
        ai(("big_report", {"topic": "q3"}, "b1")),
        ai(text="offloaded"),
        ai(("big_report", {"topic": "q4"}, "b2")),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r1")),
        ai(text="nothing"),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r2")),
        ai(text="got it"),
    ]
    models, _ = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS],
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, offload_store=store)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("report")]}, {"configurable": {"thread_id": "A"}})
    other = agent.invoke(
        {"messages": [HumanMessage("give me A's report")]}, {"configurable": {"thread_id": "B"}}
    )
    answer = [m for m in other["messages"] if isinstance(m, ToolMessage)][-1]
    assert "error: no offloaded output 'off-1' in this conversation" == answer.content
    recall_spans = [
        s for s in span_exporter.get_finished_spans() if s.name == f"execute_tool {RECALL_TOOL}"
    ]
    assert [c.RECALL_UNKNOWN] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in recall_spans]
    own = agent.invoke({"messages": [HumanMessage("recall")]}, {"configurable": {"thread_id": "A"}})
    answer = [m for m in own["messages"] if isinstance(m, ToolMessage)][-1]
    assert BIG_REPORT_CHARS == len(str(answer.content))
