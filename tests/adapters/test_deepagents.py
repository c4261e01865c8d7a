"""seamscope in a Deep Agents agent, where ``create_deep_agent`` puts it.

``create_deep_agent(middleware=[...])`` replaces a middleware of its own stack by
one of the same name (a watched ``FilesystemMiddleware`` takes the place of its
own, and gets the agent's permissions copied onto it) and puts the others after
its core stack: seamscope's model hook runs inside Deep Agents' filesystem one.
Scripted chat models, Deep Agents' default state backend, no network.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.cli import main as cli
from seamscope.decisions.records import OffloadMechanism, SettleTrigger
from seamscope.telemetry import conventions as c

from ._langchain_support import ModelCall, ai, scripted_models

deepagents = pytest.importorskip(
    "deepagents", reason="Deep Agents is not installed: pip install -e '.[test]'"
)
from deepagents.middleware.filesystem import (  # noqa: E402
    FilesystemMiddleware,
    FilesystemPermission,
)

OPUS = "claude-opus-4-6"
SECRET = "/secret/x.txt"


def layer_for(tracer_provider: Any) -> DecisionLayer:
    return DecisionLayer(default_model=OPUS, agent_name="deep", tracer_provider=tracer_provider)


@pytest.mark.parametrize("mode", ["alone", "plain", "watched"])
def test_a_denied_write_stays_denied_with_seamscope_watching_the_filesystem(
    mode: str, tracer_provider: Any
) -> None:
    """Deep Agents copies the agent's permissions onto its FilesystemMiddleware
    instances only: a watched one is still one, so the rule holds."""
    script = [ai(("write_file", {"file_path": SECRET, "content": "hi"}, "c1")), ai(text="ok")]
    models, _ = scripted_models([OPUS], script)
    middleware: list[Any] = []
    if mode == "plain":
        middleware = [SeamscopeMiddleware(layer_for(tracer_provider))]
    elif mode == "watched":
        middleware = SeamscopeMiddleware(layer_for(tracer_provider)).watching(
            FilesystemMiddleware()
        )
    permissions = [FilesystemPermission(operations=["write"], paths=["/secret/**"], mode="deny")]
    agent = deepagents.create_deep_agent(
        model=models[OPUS], permissions=permissions, middleware=middleware
    )
    out = agent.invoke({"messages": [HumanMessage("write it")]})

    (answer,) = [m for m in out["messages"] if getattr(m, "tool_call_id", None) == "c1"]
    assert f"Error: permission denied for write on {SECRET}" == answer.content
    assert SECRET not in (out.get("files") or {})


def _iteration_of(span: ReadableSpan, spans: list[ReadableSpan]) -> int | None:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    parent = by_id.get(span.parent.span_id) if span.parent is not None else None
    if parent is None or parent.name != c.SPAN_ITERATION:
        return None
    return (parent.attributes or {}).get(c.ATTR_ITERATION_INDEX)  # type: ignore[return-value]


def test_a_watched_middleware_outside_seamscope_records_each_decision_in_its_model_call(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """Deep Agents' FilesystemMiddleware (watched, outermost) narrows the tools of
    every model call (the default backend cannot execute: no ``execute``):
    one decision per model call, each in that call's iteration, the first too."""
    script = [ai(("ls", {"path": "/"}, "c1")), ai(text="done")]
    models, log = scripted_models([OPUS], script)
    middleware = SeamscopeMiddleware(layer_for(tracer_provider)).watching(FilesystemMiddleware())
    agent = deepagents.create_deep_agent(model=models[OPUS], middleware=middleware)
    agent.invoke({"messages": [HumanMessage("list")]})

    assert 2 == len(log)
    assert all("execute" not in (call.tools or []) for call in log)
    spans = list(span_exporter.get_finished_spans())
    decisions = [
        s
        for s in spans
        if (s.attributes or {}).get(c.ATTR_MIDDLEWARE_NAME) == "FilesystemMiddleware"
    ]
    assert ["tool_selection", "tool_selection"] == [
        (s.attributes or {}).get(c.ATTR_MIDDLEWARE_DECISION) for s in decisions
    ]
    assert [0, 1] == [_iteration_of(s, spans) for s in decisions]
    for span in decisions:
        assert "execute" in str((span.attributes or {}).get(c.ATTR_STAGE_DROPPED))


# -- Deep Agents' evictions, priced -------------------------------------------------------

EVICTED = "/large_tool_results/c1"  # where FilesystemMiddleware writes c1's result
_LINES = ["y" * 99] * 1_200
_LINES[599] = "TOTAL revenue 42".ljust(99, ".")
REPORT = "\n".join(_LINES) + "\n"  # 120 000 chars: 30 000 tokens


@tool
def big_report(topic: str) -> str:
    """Produce the full quarterly report."""
    return REPORT


def _eviction_script() -> list[Any]:
    return [
        ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
        ai(
            ("read_file", {"file_path": EVICTED, "offset": 0, "limit": 100}, "c2"),
            usage=(2_000, 30, 0, 0),
        ),
        ai(
            ("grep", {"pattern": "TOTAL", "path": "/large_tool_results"}, "c3"),
            ("ls", {"path": "/large_tool_results"}, "c4"),
            usage=(4_500, 20, 0, 0),
        ),
        ai(text="Q3 revenue totals 42.", usage=(5_000, 10, 0, 0)),
    ]


def _deep_agent(middleware: list[Any]) -> tuple[Any, list[ModelCall]]:
    models, log = scripted_models([OPUS], _eviction_script())
    agent = deepagents.create_deep_agent(
        model=models[OPUS], tools=[big_report], middleware=middleware
    )
    return agent, log


def _text_of(call: ModelCall, call_id: str) -> str | None:
    for message in call.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return str(message.content)
    return None


def _totals(reader: InMemoryMetricReader, name: str, **where: str) -> dict[tuple[Any, ...], float]:
    data = reader.get_metrics_data()
    found: dict[tuple[Any, ...], float] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    a = dict(point.attributes or {})
                    if all(a.get(k) == v for k, v in where.items()):
                        rest = tuple(sorted((k, v) for k, v in a.items() if k not in where))
                        found[rest] = round(float(point.value), 9)
    return found


def test_an_eviction_is_a_priced_compaction_its_file_reads_are_its_recalls(
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Thread ``deep-1``, seamscope's own gate off, Deep Agents' filesystem
    watched where ``create_deep_agent`` puts it. Calls (input, output tokens;
    no cache) and what each prompt held for c1 (big_report, 120 000 chars =
    30 000 tokens):

    1. (1 000, 40): nothing yet; emits big_report c1, whose result
       FilesystemMiddleware writes to /large_tool_results/c1 and replaces by
       a preview of P chars (the compaction ``deepagents_eviction:c1``).
    2. (2 000, 30): the preview, carried; emits read_file of the first 100
       lines of that file (c2): a recall of the slice's R2 chars, with this
       call's 30 output tokens.
    3. (4 500, 20): the preview, carried; emits grep of the directory (c3,
       its output names the file: a recall of its R3 chars, with this call's
       20 output tokens) and ls of it (c4: a listing reads nothing).
    4. (5 000, 10): the preview, carried; answers.

    Savings 3 x 30 000 x $5/M = $0.45; preview carry 3 x P/4 x $5/M; recalls
    (R2 + R3)/4 x $5/M + 50 x $25/M. Predicted (the gate's formula, H=5,
    p=0.5): 30 000 x 5 x $5/M - P/4 x 5 x $5/M - 0.5 x (12 500 x $5/M + 250 x
    $25/M).
    """
    path = tmp_path / "deep-trace.jsonl"
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name="deep",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    seamscope = SeamscopeMiddleware(layer, offload=False)
    agent, log = _deep_agent(seamscope.watching(FilesystemMiddleware()))
    out = agent.invoke(
        {"messages": [HumanMessage("the q3 report")]},
        config={"configurable": {"thread_id": "deep-1"}},
    )
    settlements = layer.end_conversation("deep-1")

    # ground truth: what Deep Agents wrote and what each prompt really held
    assert REPORT == out["files"][EVICTED]["content"]
    preview = _text_of(log[1], "c1")
    assert preview is not None and preview.startswith(
        "Tool result too large, the result of this tool call c1 was saved in the filesystem "
        f"at this path: {EVICTED}\n"
    )
    assert [None, preview, preview, preview] == [_text_of(call, "c1") for call in log]
    slice_read, grep_read = _text_of(log[2], "c2"), _text_of(log[3], "c3")
    assert slice_read is not None and "@@ lines 1-100 of 1200" in slice_read
    assert grep_read is not None and EVICTED in grep_read
    kept = Decimal(len(preview)) / 4
    read_back = Decimal(len(slice_read) + len(grep_read)) / 4
    rate_in, rate_out = Decimal("5") / 1_000_000, Decimal("25") / 1_000_000

    (settlement,) = settlements
    assert (
        "deepagents_eviction:c1",
        OffloadMechanism.DEEPAGENTS_EVICTION,
        OPUS,
        SettleTrigger.CONVERSATION_END,
        3,
        2,
    ) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.model,
        settlement.trigger,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.45") == settlement.realized_savings
    assert 3 * kept * rate_in == settlement.stub_carry_cost
    assert read_back * rate_in + 50 * rate_out == settlement.recall_cost
    assert Decimal(0) == settlement.cache_disruption_cost
    assert (
        Decimal("0.45") - 3 * kept * rate_in - read_back * rate_in - 50 * rate_out
        == settlement.realized_net_saving
    )
    predicted = (
        30_000 * 5 * rate_in
        - kept * 5 * rate_in
        - Decimal("0.5") * (12_500 * rate_in + 250 * rate_out)
    )
    assert predicted == settlement.predicted_net_saving

    where = {c.ATTR_OFFLOAD_MECHANISM: "deepagents_eviction"}
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 0.45} == _totals(
        metric_reader, c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, **where
    )
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 2.0} == _totals(
        metric_reader, c.METRIC_OFFLOAD_RECALLS.name, **where
    )

    spans = list(span_exporter.get_finished_spans())
    # each read of the evicted file is a recall at its real tokens, with the output
    # of the model call that emitted it; the listing is none
    recalls = [
        dict(event.attributes or {})
        for span in spans
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED
    ]
    assert [
        ("deepagents_eviction:c1", len(slice_read) / 4, 30),
        ("deepagents_eviction:c1", len(grep_read) / 4, 20),
    ] == [
        (
            r[c.ATTR_OFFLOAD_ID],
            r[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            r[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
        )
        for r in recalls
    ]
    (compaction,) = [s for s in spans if s.name == c.SPAN_COMPACTION]
    attrs = dict(compaction.attributes or {})
    assert {
        c.ATTR_MIDDLEWARE_NAME: "FilesystemMiddleware",
        c.ATTR_MIDDLEWARE_DECISION: "compaction",
        c.ATTR_OFFLOAD_ID: "deepagents_eviction:c1",
        c.ATTR_OFFLOAD_MECHANISM: "deepagents_eviction",
        c.ATTR_COMPACTION_REMOVED_TOKENS: 30_000.0,
        c.ATTR_COMPACTION_KEPT_TOKENS: float(kept),
        c.ATTR_COMPACTION_TOOL_CALL_IDS: ("c1",),
        c.ATTR_GEN_AI_TOOL_NAME: "big_report",
        c.ATTR_MIDDLEWARE_REASON: (
            "over tool_token_limit_before_evict=20000: the result of big_report (30000 "
            f"tokens) was written to {EVICTED} and replaced by a preview"
        ),
    } == {
        k: attrs.get(k)
        for k in (
            c.ATTR_MIDDLEWARE_NAME,
            c.ATTR_MIDDLEWARE_DECISION,
            c.ATTR_OFFLOAD_ID,
            c.ATTR_OFFLOAD_MECHANISM,
            c.ATTR_COMPACTION_REMOVED_TOKENS,
            c.ATTR_COMPACTION_KEPT_TOKENS,
            c.ATTR_COMPACTION_TOOL_CALL_IDS,
            c.ATTR_GEN_AI_TOOL_NAME,
            c.ATTR_MIDDLEWARE_REASON,
        )
    }
    assert 0 == _iteration_of(compaction, spans)  # the iteration whose call emitted c1
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [
        (),
        ("deepagents_eviction:c1",),
        ("deepagents_eviction:c1",),
        ("deepagents_eviction:c1",),
    ] == [tuple((s.attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())) for s in chats]

    # explain --tool: the eviction in the iteration of the call that emitted c1
    capsys.readouterr()
    assert 0 == cli(["explain", str(path), "--tool", "big_report"])
    lines = capsys.readouterr().out.splitlines()
    story = (
        "kept by FilesystemMiddleware; output of call c1 taken out of the prompt by "
        f"FilesystemMiddleware (compaction deepagents_eviction:c1: 30000 tokens, {kept} kept); "
        "emitted and dispatched; executed"
    )
    later = "kept by FilesystemMiddleware; not called by the model"
    assert [
        f"├── iteration 0  big_report: {story}",
        f"├── iteration 1  big_report: {later}",
        f"├── iteration 2  big_report: {later}",
        f"└── iteration 3  big_report: {later}",
    ] == [line for line in lines if "iteration" in line]
    assert 0 == cli(["explain", str(path), "--tool", "big_report", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert story == report["tool"]["story"][0]["story"]

    # explain --tool read_file / grep: each read of the evicted file is named as the
    # recall of that eviction, at its tokens; the listing is a plain run
    ran = "kept by FilesystemMiddleware; emitted and dispatched; executed"
    idle = "kept by FilesystemMiddleware; not called by the model"
    for tool_name, call_id, iteration, text in (
        ("read_file", "c2", 1, slice_read),
        ("grep", "c3", 2, grep_read),
        ("ls", "c4", 2, None),
    ):
        assert 0 == cli(["explain", str(path), "--tool", tool_name])
        lines = [line for line in capsys.readouterr().out.splitlines() if "iteration" in line]
        recalled = (
            ""
            if text is None
            else f"; call {call_id} recalled deepagents_eviction:c1 ({len(text) / 4:g} tokens "
            "read back)"
        )
        expected = [idle] * 4
        expected[iteration] = ran + recalled
        assert [
            f"{'└' if i == 3 else '├'}── iteration {i}  {tool_name}: {told}"
            for i, told in enumerate(expected)
        ] == lines
    assert 0 == cli(["explain", str(path), "--tool", "read_file", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (
        ran + f"; call c2 recalled deepagents_eviction:c1 ({len(slice_read) / 4:g} tokens "
        "read back)" == report["tool"]["story"][1]["story"]
    )


def _seen(out: dict[str, Any]) -> tuple[Any, ...]:
    """What the agent's state holds, ids aside: each message's type, content and
    tool calls, and the files with their contents."""
    messages = [
        (
            type(m).__name__,
            m.content,
            getattr(m, "tool_call_id", None),
            [(t["name"], t["args"], t["id"]) for t in getattr(m, "tool_calls", None) or []],
        )
        for m in out["messages"]
    ]
    files = {path: data["content"] for path, data in (out.get("files") or {}).items()}
    return tuple(messages), tuple(sorted(files.items()))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_watching_the_evictions_changes_nothing_deep_agents_does(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """The same messages and files with Deep Agents' filesystem watched as
    alone, sync and async; the async hooks record the eviction too."""
    runs = []
    for watched in (False, True):
        middleware: list[Any] = []
        if watched:
            layer = layer_for(tracer_provider)
            middleware = SeamscopeMiddleware(layer, offload=False).watching(FilesystemMiddleware())
        agent, _ = _deep_agent(middleware)
        ask = {"messages": [HumanMessage("the q3 report")]}
        config = {"configurable": {"thread_id": f"same-{mode}"}}
        if mode == "async":
            out = asyncio.run(agent.ainvoke(ask, config=config))
        else:
            out = agent.invoke(ask, config=config)
        runs.append(_seen(out))
    alone, watched_run = runs
    assert alone == watched_run
    assert EVICTED in dict(alone[1])
    compactions = [
        (s.attributes or {}).get(c.ATTR_OFFLOAD_ID)
        for s in span_exporter.get_finished_spans()
        if s.name == c.SPAN_COMPACTION
    ]
    assert ["deepagents_eviction:c1"] == compactions
    # observed only, by default: no gate decides the eviction
    assert [] == [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]


def test_seamscope_s_gate_and_deep_agents_evictions_never_take_the_same_output(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """seamscope's gate on (threshold 15 000 tokens) inside Deep Agents'
    filesystem evicting above 5 000 tokens: the 120 000-char report goes to
    the gate, which offloads it (Deep Agents sees the stub: nothing to
    evict); a 40 000-char log (10 000 tokens) is below the gate's threshold
    and Deep Agents evicts it: one offload, one compaction, each its own."""

    @tool
    def get_logs(service: str) -> str:
        """Read a service's logs."""
        return ("z" * 79 + "\n") * 500  # 40 000 chars

    models, log = scripted_models(
        [OPUS],
        [
            ai(
                ("big_report", {"topic": "q3"}, "c1"),
                ("get_logs", {"service": "db"}, "c2"),
                usage=(1_000, 40, 0, 0),
            ),
            ai(text="done", usage=(3_000, 10, 0, 0)),
        ],
    )
    seamscope = SeamscopeMiddleware(layer_for(tracer_provider))
    agent = deepagents.create_deep_agent(
        model=models[OPUS],
        tools=[big_report, get_logs],
        middleware=seamscope.watching(FilesystemMiddleware(tool_token_limit_before_evict=5_000)),
    )
    out = agent.invoke(
        {"messages": [HumanMessage("report and logs")]},
        config={"configurable": {"thread_id": "both-1"}},
    )

    report, logs = _text_of(log[1], "c1"), _text_of(log[1], "c2")
    assert report is not None and report.startswith("[offloaded ")
    assert logs is not None and logs.startswith(
        "Tool result too large, the result of this tool call c2 was saved in the filesystem "
        "at this path: /large_tool_results/c2\n"
    )
    assert ["/large_tool_results/c2"] == sorted(out.get("files") or {})
    spans = span_exporter.get_finished_spans()
    (gate,) = [s for s in spans if s.name == c.SPAN_OFFLOAD_GATE]
    offload_id = (gate.attributes or {}).get(c.ATTR_OFFLOAD_ID)
    assert (True, 30_000.0) == (
        (gate.attributes or {}).get(c.ATTR_OFFLOAD_FIRE),
        (gate.attributes or {}).get(c.ATTR_OFFLOAD_OUTPUT_TOKENS),
    )
    assert ["deepagents_eviction:c2"] == [
        (s.attributes or {}).get(c.ATTR_OFFLOAD_ID) for s in spans if s.name == c.SPAN_COMPACTION
    ]
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert {offload_id, "deepagents_eviction:c2"} == set(
        (chats[-1].attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())
    )


@pytest.mark.parametrize(
    ("tool_name", "args", "text", "reads"),
    [
        ("read_file", {"file_path": EVICTED, "offset": 100, "limit": 100}, "...", True),
        ("read_file", {"file_path": "/large_tool_results/c10"}, "...", False),
        ("grep", {"pattern": "TOTAL", "path": "/large_tool_results"}, f"{EVICTED}\n", True),
        ("grep", {"pattern": "TOTAL", "path": "/large_tool_results"}, "No matches", False),
        ("execute", {"command": f"head -n 5 {EVICTED}"}, "...", True),
        ("ls", {"path": "/large_tool_results"}, f"{EVICTED}\n", False),
        ("glob", {"pattern": f"{EVICTED}*"}, f"{EVICTED}\n", False),
        ("edit_file", {"file_path": EVICTED, "old_string": "a", "new_string": "b"}, "ok", False),
    ],
)
def test_which_calls_read_an_evicted_file(
    tool_name: str, args: dict[str, Any], text: str, reads: bool
) -> None:
    from seamscope.adapters.langchain._explain import reads_path

    assert reads == reads_path(tool_name, args, text, EVICTED)


def test_an_eviction_read_back_whole_is_no_longer_carried() -> None:
    """Reads of an evicted file are recalls while its preview is in the prompt;
    once the reads the prompt holds have brought back as many tokens as were
    evicted (the whole result is in the conversation again) the preview saves
    nothing more. Counted from the prompt: a process that saw none of the
    reads counts them alike."""
    from langchain_core.messages import AIMessage

    from seamscope.adapters.langchain._runs import Compactions

    preview = "Tool result too large ... preview"
    prompt: list[Any] = [ToolMessage(preview, tool_call_id="c1")]
    kept = Compactions(4)
    assert kept.evict("t", "c1", "deepagents_eviction:c1", EVICTED, preview, 1_000.0)
    assert not kept.evict("t", "c1", "deepagents_eviction:c1", EVICTED, preview, 1_000.0)
    assert ("deepagents_eviction:c1",) == kept.carried("t", prompt)
    half = "x" * 2_000  # 500 tokens
    args = {"file_path": EVICTED}

    def read(call_id: str) -> list[Any]:
        return [
            AIMessage("", tool_calls=[{"name": "read_file", "args": args, "id": call_id}]),
            ToolMessage(half, tool_call_id=call_id),
        ]

    assert "deepagents_eviction:c1" == kept.reread("t", "read_file", args, half)
    prompt += read("c2")
    assert ("deepagents_eviction:c1",) == kept.carried("t", prompt)
    assert None is kept.reread("t", "ls", {"path": EVICTED}, half)
    assert None is kept.reread("u", "read_file", args, half)  # another conversation's
    assert "deepagents_eviction:c1" == kept.reread("t", "read_file", args, half)
    prompt += read("c3")
    assert () == kept.carried("t", prompt)
    assert None is kept.reread("t", "read_file", args, half)

    # another process, which saw the eviction and none of the reads
    other = Compactions(4)
    assert other.evict("t", "c1", "deepagents_eviction:c1", EVICTED, preview, 1_000.0)
    assert () == other.carried("t", prompt)
    assert None is other.reread("t", "read_file", args, half)
    assert ("deepagents_eviction:c1",) == other.carried("t", prompt[:3])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_opt_in_gate_undoes_an_eviction_that_loses_and_lets_one_that_saves(
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    """``gate_evictions=True``, Deep Agents evicting above 1 000 tokens, the
    layer's gate at its defaults (H=5, p=0.5, claude-opus-4-6 at $5/$25 per M).
    The 120 000-char report (30 000 tokens) saves: 30 000 x 5 x $5/M minus its
    preview carried 5 times minus 0.5 x (12 500 x $5/M + 250 x $25/M) > 0:
    evicted, a compaction. The 6 000-char log (1 500 tokens) loses: 1 500 x 5
    x $5/M = $0.0375 cannot pay for its preview and the expected recall
    ($0.034375): the model gets the whole log."""

    @tool
    def get_logs(service: str) -> str:
        """Read a service's logs."""
        return ("z" * 79 + "\n") * 75  # 6 000 chars

    models, log = scripted_models(
        [OPUS],
        [
            ai(
                ("big_report", {"topic": "q3"}, "c1"),
                ("get_logs", {"service": "db"}, "c2"),
                usage=(1_000, 40, 0, 0),
            ),
            ai(text="done", usage=(3_000, 10, 0, 0)),
        ],
    )
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name="deep",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    seamscope = SeamscopeMiddleware(layer, offload=False, gate_evictions=True)
    agent = deepagents.create_deep_agent(
        model=models[OPUS],
        tools=[big_report, get_logs],
        middleware=seamscope.watching(FilesystemMiddleware(tool_token_limit_before_evict=1_000)),
    )
    ask = {"messages": [HumanMessage("report and logs")]}
    config = {"configurable": {"thread_id": f"gate-{mode}"}}
    if mode == "async":
        out = asyncio.run(agent.ainvoke(ask, config=config))
    else:
        out = agent.invoke(ask, config=config)

    report, logs = _text_of(log[1], "c1"), _text_of(log[1], "c2")
    assert report is not None and report.startswith("Tool result too large")
    assert ("z" * 79 + "\n") * 75 == logs  # the whole log, as the tool returned it
    (answer,) = [m for m in out["messages"] if getattr(m, "tool_call_id", None) == "c2"]
    assert logs == answer.content
    # Deep Agents had written the log before the gate undid the eviction: the file stays
    assert ["/large_tool_results/c1", "/large_tool_results/c2"] == sorted(out["files"])

    spans = list(span_exporter.get_finished_spans())
    gates = sorted(
        (dict(s.attributes or {}) for s in spans if s.name == c.SPAN_OFFLOAD_GATE),
        key=lambda a: str(a.get(c.ATTR_GEN_AI_TOOL_CALL_ID)),
    )
    # in the iteration of the model call that emitted both calls
    assert [0, 0] == [_iteration_of(s, spans) for s in spans if s.name == c.SPAN_OFFLOAD_GATE]
    rate_in, rate_out = 5 / 1_000_000, 25 / 1_000_000
    recall = 0.5 * (12_500 * rate_in + 250 * rate_out)
    assert [
        ("c1", "big_report", "deepagents_eviction:c1", True, "net_positive", 30_000.0, 0),
        ("c2", "get_logs", None, False, "net_not_positive", 1_500.0, 0),
    ] == [
        (
            a[c.ATTR_GEN_AI_TOOL_CALL_ID],
            a[c.ATTR_GEN_AI_TOOL_NAME],
            a.get(c.ATTR_OFFLOAD_ID),
            a[c.ATTR_OFFLOAD_FIRE],
            a[c.ATTR_OFFLOAD_REASON_CODE],
            a[c.ATTR_OFFLOAD_OUTPUT_TOKENS],
            a[c.ATTR_OFFLOAD_THRESHOLD_TOKENS],
        )
        for a in gates
    ]
    assert len(report) / 4 == gates[0][c.ATTR_OFFLOAD_STUB_TOKENS]  # the real preview
    for a, tokens in zip(gates, (30_000, 1_500), strict=True):
        stub = a[c.ATTR_OFFLOAD_STUB_TOKENS]
        net = tokens * 5 * rate_in - stub * 5 * rate_in - recall
        assert round(net, 6) == round(a[c.ATTR_OFFLOAD_NET_SAVING_USD], 6)
    assert ["deepagents_eviction:c1"] == [
        (s.attributes or {}).get(c.ATTR_OFFLOAD_ID) for s in spans if s.name == c.SPAN_COMPACTION
    ]
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert ("deepagents_eviction:c1",) == tuple(
        (chats[-1].attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())
    )
    # two gate decisions; their predictions are the compaction's, not the gate's own
    decisions = _totals(metric_reader, c.METRIC_OFFLOAD_DECISIONS.name)
    assert 2.0 == sum(decisions.values())
    assert {} == _totals(metric_reader, c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name)


def test_seamscope_s_recall_answer_is_never_evicted(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """seamscope's gate offloads the 120 000-char report (Deep Agents sees the
    stub); the model recalls it; the answer, 30 000 tokens, is over Deep
    Agents' limit, but it is seamscope's own tool bringing an output back
    whole: the model receives it whole, as the ledger charges it, and no
    eviction of it is priced."""
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name="deep",
        tracer_provider=tracer_provider,
        offload_id_factory=lambda: "off1",
    )
    models, log = scripted_models(
        [OPUS],
        [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
            ai(("recall_tool_result", {"offload_id": "off1"}, "c2"), usage=(1_200, 30, 0, 0)),
            ai(text="Q3 revenue totals 42.", usage=(31_500, 10, 0, 0)),
        ],
    )
    seamscope = SeamscopeMiddleware(layer)
    agent = deepagents.create_deep_agent(
        model=models[OPUS],
        tools=[big_report],
        middleware=seamscope.watching(FilesystemMiddleware()),
    )
    agent.invoke(
        {"messages": [HumanMessage("the q3 report")]},
        config={"configurable": {"thread_id": "recall-1"}},
    )
    (settlement,) = layer.end_conversation("recall-1")

    stub = _text_of(log[1], "c1")
    assert stub is not None and stub.startswith("[offloaded off1")
    assert REPORT == _text_of(log[2], "c2")
    spans = span_exporter.get_finished_spans()
    assert [] == [s for s in spans if s.name == c.SPAN_COMPACTION]
    recalls = [
        dict(event.attributes or {})
        for span in spans
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED
    ]
    assert [("off1", 30_000.0)] == [
        (r[c.ATTR_OFFLOAD_ID], r[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS]) for r in recalls
    ]
    assert ("off1", 1) == (settlement.offload_id, settlement.recalls)


# -- an eviction read back on another worker -----------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "langgraph-postgres"])
def test_an_eviction_read_back_on_another_worker_is_its_recall(
    kind: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    tmp_path: Path,
) -> None:
    """Two workers, each its own layer and ``SeamscopeMiddleware``, sharing one
    offload store (a SQLite file named to seamscope, or, named to neither,
    the LangGraph ``PostgresStore`` of a real PostgreSQL the agents are
    compiled with) and the conversation's checkpoints (thread ``fleet-1``).
    Calls (input, output tokens; no cache):

    Worker A, turn 1:
    1. (1 000, 40): emits big_report c1; FilesystemMiddleware evicts its
       120 000 chars (30 000 tokens) to /large_tool_results/c1, a preview of
       P chars instead (``deepagents_eviction:c1``, its record in the store).
    2. (2 000, 10): the preview, carried; answers.

    Worker B, turn 2 (it never saw the eviction):
    3. (2 500, 30): the preview, carried; emits read_file of the first 100
       lines of the evicted file (c2): its recall, R chars, with this call's
       30 output tokens.
    4. (3 500, 10): the preview, carried; answers.

    Settled once, by B, from both workers' accounts: savings 3 x 30 000 x
    $5/M = $0.45; preview carry 3 x P/4 x $5/M; recall R/4 x $5/M + 30 x
    $25/M; predicted 30 000 x 5 x $5/M - P/4 x 5 x $5/M - 0.5 x (12 500 x
    $5/M + 250 x $25/M)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from seamscope.stores import SQLiteStore

    database = tmp_path / "offloads.db"
    checkpoints = InMemorySaver()
    config = {"configurable": {"thread_id": "fleet-1"}}
    server = None
    if kind == "langgraph-postgres":
        from tests._postgres_server import PostgresServer

        server = PostgresServer.start(tmp_path / "postgres")
    scripts = {
        "a": [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
            ai(text="The report is in.", usage=(2_000, 10, 0, 0)),
        ],
        "b": [
            ai(
                ("read_file", {"file_path": EVICTED, "offset": 0, "limit": 100}, "c2"),
                usage=(2_500, 30, 0, 0),
            ),
            ai(text="Q3 revenue totals 42.", usage=(3_500, 10, 0, 0)),
        ],
    }
    workers: dict[str, tuple[DecisionLayer, SeamscopeMiddleware, list[ModelCall]]] = {}
    try:
        for name in ("a", "b"):
            layer = DecisionLayer(
                default_model=OPUS,
                agent_name="deep",
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
            )
            options: dict[str, Any] = {}
            if server is None:
                seamscope = SeamscopeMiddleware(
                    layer, offload=False, offload_store=SQLiteStore(str(database))
                )
            else:
                seamscope = SeamscopeMiddleware(layer, offload=False)
                options["store"] = server.store()  # each worker its own connection
            models, log = scripted_models([OPUS], scripts[name])
            agent = deepagents.create_deep_agent(
                model=models[OPUS],
                tools=[big_report],
                middleware=seamscope.watching(FilesystemMiddleware()),
                checkpointer=checkpoints,
                **options,
            )
            ask = "the q3 report" if name == "a" else "the total?"
            agent.invoke({"messages": [HumanMessage(ask)]}, config=config)
            workers[name] = (layer, seamscope, log)

        (_, seamscope_b, log_b) = workers["b"]
        settlements = seamscope_b.end_conversation("fleet-1")
        assert [] == workers["a"][1].end_conversation("fleet-1")  # settled once, fleet-wide
    finally:
        if server is not None:
            server.stop()

    log = workers["a"][2] + log_b
    preview = _text_of(log[1], "c1")
    assert preview is not None and preview.startswith("Tool result too large")
    assert [None, preview, preview, preview] == [_text_of(call, "c1") for call in log]
    slice_read = _text_of(log[3], "c2")
    assert slice_read is not None and "@@ lines 1-100 of 1200" in slice_read
    kept = Decimal(len(preview)) / 4
    read_back = Decimal(len(slice_read)) / 4
    rate_in, rate_out = Decimal("5") / 1_000_000, Decimal("25") / 1_000_000

    (settlement,) = settlements
    assert (
        "deepagents_eviction:c1",
        OffloadMechanism.DEEPAGENTS_EVICTION,
        OPUS,
        SettleTrigger.CONVERSATION_END,
        3,
        1,
    ) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.model,
        settlement.trigger,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.45") == settlement.realized_savings
    assert 3 * kept * rate_in == settlement.stub_carry_cost
    assert read_back * rate_in + 30 * rate_out == settlement.recall_cost
    predicted = (
        30_000 * 5 * rate_in
        - kept * 5 * rate_in
        - Decimal("0.5") * (12_500 * rate_in + 250 * rate_out)
    )
    assert predicted == settlement.predicted_net_saving
    # the realized metrics of both workers, under the eviction's mechanism
    where = {c.ATTR_OFFLOAD_MECHANISM: "deepagents_eviction"}
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 0.45} == _totals(
        metric_reader, c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, **where
    )
    assert {((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS),): 1.0} == _totals(
        metric_reader, c.METRIC_OFFLOAD_RECALLS.name, **where
    )

    spans = list(span_exporter.get_finished_spans())
    recalls = [
        dict(event.attributes or {})
        for span in spans
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED
    ]
    assert [("deepagents_eviction:c1", len(slice_read) / 4, 30)] == [
        (
            r[c.ATTR_OFFLOAD_ID],
            r[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            r[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
        )
        for r in recalls
    ]
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [
        (),
        ("deepagents_eviction:c1",),
        ("deepagents_eviction:c1",),
        ("deepagents_eviction:c1",),
    ] == [tuple((s.attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())) for s in chats]


def _sliced_reads(workers: str, tmp_path: Path) -> tuple[Any, list[Any], list[ReadableSpan]]:
    """One conversation of four turns, turn ``i`` served by worker
    ``workers[i]`` (each its own layer, middleware and scripted model, one
    SQLite offload store and one checkpointer): the settlement, the model
    calls in order and the spans."""
    from langgraph.checkpoint.memory import InMemorySaver

    from seamscope.stores import SQLiteStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    turns = [
        ("the q3 report", [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
            ai(text="The report is in.", usage=(2_000, 10, 0, 0)),
        ]),
        ("its first half", [
            ai(
                ("read_file", {"file_path": EVICTED, "offset": 0, "limit": 600}, "c2"),
                usage=(2_500, 30, 0, 0),
            ),
            ai(text="Read the first half.", usage=(3_500, 10, 0, 0)),
        ]),
        ("its second half", [
            ai(
                ("read_file", {"file_path": EVICTED, "offset": 600, "limit": 600}, "c3"),
                usage=(4_000, 30, 0, 0),
            ),
            ai(text="Read the second half.", usage=(5_000, 10, 0, 0)),
        ]),
        ("the total?", [ai(text="Q3 revenue totals 42.", usage=(6_000, 10, 0, 0))]),
    ]
    tmp_path.mkdir()
    checkpoints = InMemorySaver()
    config = {"configurable": {"thread_id": "sliced"}}
    agents: dict[str, tuple[SeamscopeMiddleware, Any]] = {}
    logs: list[list[ModelCall]] = []
    for name in dict.fromkeys(workers):
        layer = DecisionLayer(default_model=OPUS, agent_name="deep", tracer_provider=provider)
        seamscope = SeamscopeMiddleware(
            layer, offload=False, offload_store=SQLiteStore(str(tmp_path / "offloads.db"))
        )
        script = [call for (_, calls), w in zip(turns, workers, strict=True) if w == name
                  for call in calls]
        models, log = scripted_models([OPUS], script)
        logs.append(log)
        agent = deepagents.create_deep_agent(
            model=models[OPUS],
            tools=[big_report],
            middleware=seamscope.watching(FilesystemMiddleware()),
            checkpointer=checkpoints,
        )
        agents[name] = (seamscope, agent)
    for (ask, _), name in zip(turns, workers, strict=True):
        agents[name][1].invoke({"messages": [HumanMessage(ask)]}, config=config)
    (settlement,) = agents[workers[-1]][0].end_conversation("sliced")
    provider.shutdown()
    calls = sorted((call for log in logs for call in log), key=lambda call: len(call.messages))
    return settlement, calls, list(exporter.get_finished_spans())


def test_an_eviction_read_back_in_slices_on_several_workers_counts_as_on_one(
    tmp_path: Path,
) -> None:
    """The evicted file read back in two slices, each by another worker, and
    the conversation's last turn on a worker that saw none of the reads: once
    the slices add up to the evicted tokens the preview is no longer carried,
    on every worker, as on one. Seven model calls: the preview is carried by
    calls 2-5 (the first slice brings back about half), not by 6 and 7."""
    one, one_calls, one_spans = _sliced_reads("aaaa", tmp_path / "one")
    many, many_calls, many_spans = _sliced_reads("abca", tmp_path / "many")

    first, second = _text_of(one_calls[4], "c2"), _text_of(one_calls[6], "c3")
    assert first is not None and second is not None
    assert len(first) / 4 < 30_000 <= (len(first) + len(second)) / 4
    assert [[m.content for m in call.messages] for call in one_calls] == [
        [m.content for m in call.messages] for call in many_calls
    ]
    carried = [("deepagents_eviction:c1",)] * 4
    for spans in (one_spans, many_spans):
        chats = sorted(
            (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
        )
        assert [(), *carried, (), ()] == [
            tuple((s.attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())) for s in chats
        ]
    rate_in, rate_out = Decimal("5") / 1_000_000, Decimal("25") / 1_000_000
    assert (4, 2) == (many.turns_carried, many.recalls)
    assert 4 * 30_000 * rate_in == many.realized_savings
    assert Decimal(len(first) + len(second)) / 4 * rate_in + 60 * rate_out == many.recall_cost
    assert (
        one.turns_carried,
        one.recalls,
        one.realized_savings,
        one.stub_carry_cost,
        one.recall_cost,
        one.realized_net_saving,
    ) == (
        many.turns_carried,
        many.recalls,
        many.realized_savings,
        many.stub_carry_cost,
        many.recall_cost,
        many.realized_net_saving,
    )


# -- a large user message, evicted --------------------------------------------------------


def test_an_evicted_user_message_is_a_priced_compaction_its_file_reads_are_its_recalls(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """Deep Agents' filesystem evicts a user message over
    ``human_message_token_limit_before_evict`` (1 000 tokens here) in its
    model hook: the 120 000 chars (30 000 tokens) go to
    /conversation_history/{uuid}.md, the state keeps the whole message and
    every model request gets a preview of P chars instead. Calls (input,
    output tokens; no cache):

    1. (1 000, 40): the preview, carried (the eviction is this call's);
       emits read_file of the first 100 lines of that file (c1): a recall of
       its R chars, with this call's 40 output tokens.
    2. (2 000, 10): the preview, carried; answers.

    Savings 2 x 30 000 x $5/M = $0.30; preview carry 2 x P/4 x $5/M; recall
    R/4 x $5/M + 40 x $25/M; predicted 30 000 x 5 x $5/M - P/4 x 5 x $5/M -
    0.5 x (12 500 x $5/M + 250 x $25/M)."""
    from seamscope.adapters.langchain._explain import eviction_path

    from ._langchain_support import ScriptedChatModel

    log: list[ModelCall] = []

    def script() -> Any:
        (asked,) = [m for m in log[-1].messages if isinstance(m, HumanMessage)]
        path = eviction_path(str(asked.content))
        yield ai(
            ("read_file", {"file_path": path, "offset": 0, "limit": 100}, "c1"),
            usage=(1_000, 40, 0, 0),
        )
        yield ai(text="Q3 revenue totals 42.", usage=(2_000, 10, 0, 0))

    model = ScriptedChatModel(messages=script(), model_name=OPUS, log=log)
    layer = layer_for(tracer_provider)
    seamscope = SeamscopeMiddleware(layer, offload=False)
    agent = deepagents.create_deep_agent(
        model=model,
        middleware=seamscope.watching(
            FilesystemMiddleware(human_message_token_limit_before_evict=1_000)
        ),
    )
    out = agent.invoke(
        {"messages": [HumanMessage(REPORT)]}, config={"configurable": {"thread_id": "human-1"}}
    )
    (settlement,) = layer.end_conversation("human-1")

    # ground truth: the file Deep Agents wrote, the previews each request held
    asked = [[m for m in call.messages if isinstance(m, HumanMessage)] for call in log]
    preview = str(asked[0][0].content)
    path = eviction_path(preview)
    assert path is not None and path.startswith("/conversation_history/")
    assert REPORT == out["files"][path]["content"]
    assert [[preview], [preview]] == [[str(m.content) for m in a] for a in asked]
    assert REPORT == out["messages"][0].content  # the state keeps the whole message
    slice_read = _text_of(log[1], "c1")
    assert slice_read is not None and "@@ lines 1-100 of 1200" in slice_read
    kept = Decimal(len(preview)) / 4
    read_back = Decimal(len(slice_read)) / 4
    rate_in, rate_out = Decimal("5") / 1_000_000, Decimal("25") / 1_000_000

    compaction_id = f"deepagents_eviction:{out['messages'][0].id}"
    assert (compaction_id, OffloadMechanism.DEEPAGENTS_EVICTION, 2, 1) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.30") == settlement.realized_savings
    assert 2 * kept * rate_in == settlement.stub_carry_cost
    assert read_back * rate_in + 40 * rate_out == settlement.recall_cost
    predicted = (
        30_000 * 5 * rate_in
        - kept * 5 * rate_in
        - Decimal("0.5") * (12_500 * rate_in + 250 * rate_out)
    )
    assert predicted == settlement.predicted_net_saving

    spans = list(span_exporter.get_finished_spans())
    (compaction,) = [s for s in spans if s.name == c.SPAN_COMPACTION]
    attrs = dict(compaction.attributes or {})
    assert (
        compaction_id,
        "deepagents_eviction",
        30_000.0,
        float(kept),
        "over human_message_token_limit_before_evict=1000: a user message (30000 tokens) "
        f"was written to {path} and replaced by a preview in each model request",
    ) == (
        attrs.get(c.ATTR_OFFLOAD_ID),
        attrs.get(c.ATTR_OFFLOAD_MECHANISM),
        attrs.get(c.ATTR_COMPACTION_REMOVED_TOKENS),
        attrs.get(c.ATTR_COMPACTION_KEPT_TOKENS),
        attrs.get(c.ATTR_MIDDLEWARE_REASON),
    )
    assert 0 == _iteration_of(compaction, spans)
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [(compaction_id,), (compaction_id,)] == [
        tuple((s.attributes or {}).get(c.ATTR_OFFLOAD_CARRIED, ())) for s in chats
    ]
    recalls = [
        dict(event.attributes or {})
        for span in spans
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED
    ]
    assert [(compaction_id, len(slice_read) / 4, 40, "c1")] == [
        (
            r[c.ATTR_OFFLOAD_ID],
            r[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            r[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            r[c.ATTR_GEN_AI_TOOL_CALL_ID],
        )
        for r in recalls
    ]


def test_an_eviction_read_by_a_run_resumed_at_its_tools_on_another_worker_is_its_recall(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Worker A evicts c1's result (call 1: 1 000 in, 40 out) and its call 2
    (2 000 in, 30 out; the preview carried) emits read_file c2, which Deep
    Agents' ``interrupt_on`` stops for approval. Worker B (its own layer and
    middleware, the same SQLite offload store and checkpoints) resumes the
    run at its tools: the read is the eviction's recall there, at the R
    chars it returned and the 30 output tokens of the call that emitted it
    (A's call, read from the state's AIMessage: as one worker charges it),
    and B's call 3 (3 000 in, 10 out) carries the preview. Settled once, by
    B: 2 calls carried, 1 recall of R/4 x $5/M + 30 x $25/M."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from seamscope.stores import SQLiteStore

    database = tmp_path / "offloads.db"
    checkpoints = InMemorySaver()
    config = {"configurable": {"thread_id": "resume-1"}}
    scripts = {
        "a": [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
            ai(
                ("read_file", {"file_path": EVICTED, "offset": 0, "limit": 100}, "c2"),
                usage=(2_000, 30, 0, 0),
            ),
        ],
        "b": [ai(text="Q3 revenue totals 42.", usage=(3_000, 10, 0, 0))],
    }
    workers: dict[str, tuple[SeamscopeMiddleware, list[ModelCall]]] = {}
    for name in ("a", "b"):
        seamscope = SeamscopeMiddleware(
            layer_for(tracer_provider), offload=False, offload_store=SQLiteStore(str(database))
        )
        models, log = scripted_models([OPUS], scripts[name])
        agent = deepagents.create_deep_agent(
            model=models[OPUS],
            tools=[big_report],
            middleware=seamscope.watching(FilesystemMiddleware()),
            interrupt_on={"read_file": True},
            checkpointer=checkpoints,
        )
        if name == "a":
            out = agent.invoke({"messages": [HumanMessage("the q3 report")]}, config=config)
            assert out.get("__interrupt__")  # stopped before read_file ran
        else:
            agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config=config)
        workers[name] = (seamscope, log)

    (settlement,) = workers["b"][0].end_conversation("resume-1")
    assert [] == workers["a"][0].end_conversation("resume-1")

    log = workers["a"][1] + workers["b"][1]
    preview = _text_of(log[1], "c1")
    assert preview is not None and preview.startswith("Tool result too large")
    assert [None, preview, preview] == [_text_of(call, "c1") for call in log]
    slice_read = _text_of(log[2], "c2")
    assert slice_read is not None and "@@ lines 1-100 of 1200" in slice_read
    kept = Decimal(len(preview)) / 4
    rate_in = Decimal("5") / 1_000_000
    assert ("deepagents_eviction:c1", OffloadMechanism.DEEPAGENTS_EVICTION, 2, 1) == (
        settlement.offload_id,
        settlement.mechanism,
        settlement.turns_carried,
        settlement.recalls,
    )
    assert Decimal("0.30") == settlement.realized_savings
    assert 2 * kept * rate_in == settlement.stub_carry_cost
    rate_out = Decimal("25") / 1_000_000
    assert Decimal(len(slice_read)) / 4 * rate_in + 30 * rate_out == settlement.recall_cost
    recalls = [
        dict(event.attributes or {})
        for span in span_exporter.get_finished_spans()
        for event in span.events
        if event.name == c.EVENT_OFFLOAD_RECALLED
    ]
    assert [("deepagents_eviction:c1", len(slice_read) / 4, 30, "c2")] == [
        (
            r[c.ATTR_OFFLOAD_ID],
            r[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            r[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            r[c.ATTR_GEN_AI_TOOL_CALL_ID],
        )
        for r in recalls
    ]


# -- whatif: gating the evictions ----------------------------------------------------------


def test_whatif_answers_what_gating_the_evictions_would_have_saved(
    tracer_provider: TracerProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Observed only (``gate_evictions`` off), Deep Agents evicting above 1 000
    tokens: the 120 000-char report (c1, 30 000 tokens) and a 6 000-char log
    (c2, 1 500 tokens) are both evicted. Calls (input, output tokens):

    1. (1 000, 40): emits c1 and c2 (both evicted).
    2. (3 000, 30): both previews carried; emits read_file of the log's file
       (c3: R chars, a recall of c2 with this call's 30 output tokens).
    3. (5 000, 10): c1's preview carried, c2's too unless the read brought
       its 1 500 tokens back (R/4 >= 1 500); answers.

    ``whatif --set gate_evictions=true``: the gate (H=5, p=0.5, the preview as
    the stub) prices c2 as a loss (1 500 x 5 x $5/M cannot pay for its preview
    and the expected read-back) and c1 as a saving: c2 stays in the prompt,
    its read never happens, c1 settles as recorded. Counterfactual = c1's
    realized net; the difference is minus c2's realized net."""
    from seamscope.decisions.records import Settlement

    @tool
    def get_logs(service: str) -> str:
        """Read a service's logs."""
        return ("z" * 79 + "\n") * 75  # 6 000 chars

    path = tmp_path / "deep-whatif.jsonl"
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    models, log = scripted_models(
        [OPUS],
        [
            ai(
                ("big_report", {"topic": "q3"}, "c1"),
                ("get_logs", {"service": "db"}, "c2"),
                usage=(1_000, 40, 0, 0),
            ),
            ai(
                ("read_file", {"file_path": "/large_tool_results/c2"}, "c3"),
                usage=(3_000, 30, 0, 0),
            ),
            ai(text="done", usage=(5_000, 10, 0, 0)),
        ],
    )
    layer = layer_for(tracer_provider)
    agent = deepagents.create_deep_agent(
        model=models[OPUS],
        tools=[big_report, get_logs],
        middleware=SeamscopeMiddleware(layer, offload=False).watching(
            FilesystemMiddleware(tool_token_limit_before_evict=1_000)
        ),
    )
    agent.invoke(
        {"messages": [HumanMessage("report and logs")]},
        config={"configurable": {"thread_id": "whatif-1"}},
    )
    settled = {s.offload_id: s for s in layer.end_conversation("whatif-1")}
    tracer_provider.force_flush()

    # ground truth: the previews and the read, by hand
    p1, p2 = _text_of(log[1], "c1"), _text_of(log[1], "c2")
    read = _text_of(log[2], "c3")
    assert p1 is not None and p2 is not None and read is not None
    rate_in, rate_out = Decimal("5") / 1_000_000, Decimal("25") / 1_000_000
    whole = len(read) / 4 >= 1_500
    net1 = 2 * (30_000 - Decimal(len(p1)) / 4) * rate_in
    carries2 = 1 if whole else 2
    net2 = (
        carries2 * (1_500 - Decimal(len(p2)) / 4) * rate_in
        - Decimal(len(read)) / 4 * rate_in
        - 30 * rate_out
    )
    one: Settlement = settled["deepagents_eviction:c1"]
    two: Settlement = settled["deepagents_eviction:c2"]
    assert (net1, net2) == (one.realized_net_saving, two.realized_net_saving)

    capsys.readouterr()
    assert 0 == cli(["whatif", str(path), "--set", "gate_evictions=true", "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (conversation,) = [o for o in out if o.get("conversation_id") == "whatif-1"]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (2, ["deepagents_eviction:c2"]) == (
        conversation["evictions_gated"],
        conversation["evictions_kept"],
    )
    assert Decimal(conversation["realized_usd"]) == net1 + net2
    assert Decimal(conversation["counterfactual_exact_usd"]) == net1
    assert Decimal(total["difference_usd"]) == -net2
    assert (2, 1, True) == (
        total["evictions_gated"],
        total["evictions_kept"],
        total["config"]["gate_evictions"],
    )
    assert 0 == cli(["whatif", str(path), "--set", "gate_evictions=true"])
    text = capsys.readouterr().out
    assert (
        "gating Deep Agents' evictions: 1 of 2 evictions priced as a loss, kept in the prompt"
        in text
    )
    assert "kept deepagents_eviction:c2" in text
    # the tool's own setting decides its evictions, as the live gate's tool priors
    # do: never read back (p=0), the log's preview pays for itself (1 500 x 5 x
    # $5/M > its preview x 5 x $5/M): kept evicted, nothing changes
    never = ["--set", "tool.get_logs.recall_probability=0"]
    assert 0 == cli(
        ["whatif", str(path), "--set", "gate_evictions=true", *never, "--format", "json"]
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (2, 0, "0") == (
        total["evictions_gated"],
        total["evictions_kept"],
        total["difference_usd"],
    )


def test_whatif_reads_a_trace_recorded_with_the_eviction_gate_on(
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Recorded with ``gate_evictions=True`` (and seamscope's own gate off):
    the live gate lets the 30 000-token report's eviction through (c1, a
    compaction) and keeps the 1 500-token log whole (c2). Its two
    ``seamscope.offload_gate`` spans decided Deep Agents' evictions (they
    carry ``seamscope.offload.mechanism`` ``deepagents_eviction``), not
    offloads of seamscope's own gate: whatif reads no gate call of its own
    (fires 0 → 0), re-settles the compaction as the live ledger settled it,
    and calibrate learns nothing from them."""
    from seamscope.replay import calibrate

    @tool
    def get_logs(service: str) -> str:
        """Read a service's logs."""
        return ("z" * 79 + "\n") * 75  # 6 000 chars

    path = tmp_path / "deep-gated.jsonl"
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    models, log = scripted_models(
        [OPUS],
        [
            ai(
                ("big_report", {"topic": "q3"}, "c1"),
                ("get_logs", {"service": "db"}, "c2"),
                usage=(1_000, 40, 0, 0),
            ),
            ai(text="done", usage=(3_000, 10, 0, 0)),
        ],
    )
    layer = layer_for(tracer_provider)
    agent = deepagents.create_deep_agent(
        model=models[OPUS],
        tools=[big_report, get_logs],
        middleware=SeamscopeMiddleware(layer, offload=False, gate_evictions=True).watching(
            FilesystemMiddleware(tool_token_limit_before_evict=1_000)
        ),
    )
    agent.invoke(
        {"messages": [HumanMessage("report and logs")]},
        config={"configurable": {"thread_id": "gated-1"}},
    )
    settled = layer.end_conversation("gated-1")
    tracer_provider.force_flush()

    # the live ledger: c1's preview carried once, nothing read back
    preview = _text_of(log[1], "c1")
    assert preview is not None and preview.startswith("Tool result too large")
    rate_in = Decimal("5") / 1_000_000
    net = (30_000 - Decimal(len(preview)) / 4) * rate_in
    assert [("deepagents_eviction:c1", net)] == [
        (s.offload_id, s.realized_net_saving) for s in settled
    ]
    # both gate spans name whose offload they decided
    assert [("c1", True), ("c2", False)] == sorted(
        (
            (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID),
            (s.attributes or {}).get(c.ATTR_OFFLOAD_FIRE),
        )
        for s in span_exporter.get_finished_spans()
        if s.name == c.SPAN_OFFLOAD_GATE
        and (s.attributes or {}).get(c.ATTR_OFFLOAD_MECHANISM) == "deepagents_eviction"
    )

    capsys.readouterr()
    # explain says whose offload each gate decision was about
    assert 0 == cli(["explain", str(path), "--only-offloads"])
    text = capsys.readouterr().out
    assert 2 == text.count("decides a deepagents_eviction offload (the framework's, opt-in gate)")
    assert 0 == cli(["whatif", str(path), "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (conversation,) = [o for o in out if o.get("conversation_id") == "gated-1"]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (0, 0, 0, 1) == (
        conversation["gate_calls"],
        conversation["recorded_fires"],
        conversation["counterfactual_fires"],
        conversation["compactions"],
    )
    assert [] == conversation["mismatched"]
    assert (net, net, Decimal(0)) == (
        Decimal(total["realized_usd"]),
        Decimal(total["counterfactual_usd"]),
        Decimal(total["difference_usd"]),
    )
    assert (0, 0, 0, 0) == (
        total["gate_calls"],
        total["recorded_fires"],
        total["counterfactual_fires"],
        total["mismatched_settlements"],
    )
    assert 0 == cli(["whatif", str(path)])
    text = capsys.readouterr().out
    assert "fires 0 → 0" in text
    assert "fires 1 → 1" not in text
    # gating the evictions again re-decides the one eviction made (the kept log
    # was never evicted): the gate lets it through, nothing changes
    assert 0 == cli(["whatif", str(path), "--set", "gate_evictions=true", "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (1, 0, 0, "0") == (
        total["evictions_gated"],
        total["evictions_kept"],
        total["gate_calls"],
        total["difference_usd"],
    )
    # calibrate learns from the gate's own settled offloads only
    with path.open(encoding="utf-8") as handle:
        evidence, _ = calibrate([(str(path), handle)])
    assert {} == evidence
