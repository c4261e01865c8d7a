"""The CLI, called through main(argv): demo trees, written spans, explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from seamscope.adapters import ChatResponse, DecisionLayer, ReActAgent
from seamscope.cli import main
from seamscope.cli._render import LEGEND
from seamscope.decisions import Message, ModelConfig, ModelUsage, ToolCall, ToolCallPolicy
from seamscope.telemetry import conventions as c


def _spans(path: Path) -> list[dict[str, Any]]:
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    return spans


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for item in span.get("attributes", []):
        value = item["value"]
        out[item["key"]] = next(iter(value.values())) if value else None
    return out


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)
    code = main(["demo"])
    out = capsys.readouterr()
    return code, out.out, out.err, tmp_path / "seamscope-trace.jsonl"


def test_demo_prints_one_tree_per_turn_with_every_decision(demo: Any) -> None:
    code, out, _, _ = demo
    assert 0 == code
    assert 4 == out.count("conversation demo-7 · agent analyst · trace ")
    assert 3 == out.count("conversation demo-7-langchain · agent triage · trace ")
    expected_lines = [
        # forced tool, then released once it ran
        "forced_choice  select  forced 'hydrate_context' (resolver)",
        "forced_choice  abstain force 'hydrate_context' released: tool already ran",
        "forced_choice  abstain no force this iteration",
        # every stage narrows or abstains at least once
        "intent_routing select  action turn: keyword intersection (−7:",
        "intent_routing select  knowledge turn: always-include only (−11:",
        "lazy_routing   select  procedural routing (−3: hydrate_context, search_docs, "
        "deploy_service)",
        "lazy_routing   abstain no procedural routing",
        "intent_routing abstain stage raised demo.ClassifierTimeout: "
        "contained as abstain  [degraded]",
        "policy         select  budget $0.01 (−1: send_email); safety ceiling 'write'",
        "role_palette   select  analyst palette (−1: page_oncall)",
        "policy         select  safety ceiling 'write' (−1: delete_rows)",
        "allowlist      select  re-added hydrate_context",
        "allowlist      abstain all mandated tools present",
        # the seams
        "pre_model   policy 'sales_data_read' → claude-haiku-4-5",
        "pre_model   resolver → gpt-4o",
        "pre_model   default → claude-opus-4-6",
        "(note, contained: policy 'vip_customer' raised KeyError, counted as no match)",
        "post_model  run_block → fetch_data (policy 'sales_data_read', guard ok, palette kept)",
        "post_model  create_ticket ↛ page_oncall dropped by palette gate "
        "(policy 'escalate_incidents': target not routed); create_ticket dispatched",
        # the gate's priced terms
        "offload_gate fire    net +$0.1790 = saving $0.1969 − stub carry $0.0010 − expected "
        "recall $0.0169",
        "(15 749 tok, H=5, p=0.50, gpt-4o, genai-prices)",
        "offload_gate fire    net +$0.3931 = saving $0.4295 − stub carry $0.0020 − expected "
        "recall $0.0344",
        "offload_gate no fire  below_threshold (9 < 15000 tokens)",
        # predicted versus realized
        "offload economics: predicted vs realized",
    ]
    missing = [line for line in expected_lines if line not in out]
    assert [] == missing, out


def _table(out: str) -> list[list[str]]:
    """The closing table's rows, as their cells."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in out.splitlines()
        if line.startswith("│ ") and line.rstrip().endswith(" │")
    ]


def test_demo_summary_has_each_settlement_with_its_mechanism(demo: Any) -> None:
    _, out, _, _ = demo
    rows = _table(out)
    assert [
        ("off-52e6b438", "seamscope_gate", "gpt-4o", "loss"),
        ("off-f2a74de4", "seamscope_gate", "claude-opus-4-6", "gain"),
        ("context_editing:call_0b20f645", "context_editing", "claude-sonnet-4-5", "loss"),
    ] == [(row[0], row[1], row[2], row[-1]) for row in rows]
    # the compaction: carried by one call, then re-read once
    assert ["+$0.2154", "−$0.0264", "1", "1"] == rows[2][3:7]
    assert (
        "7 turns · 7 traces · offloads and compactions predicted +$0.7875, realized −$0.0036"
    ) in out.splitlines()


def test_demo_langchain_turns_show_the_selector_and_the_compaction(demo: Any) -> None:
    _, out, _, _ = demo
    langchain = out.split("conversation demo-7-langchain", 1)[1].split("offload economics")[0]
    lines = [line.lstrip("│├└─ ") for line in langchain.splitlines()]
    selector = [line for line in lines if "LLMToolSelectorMiddleware" in line]
    assert 6 == len(selector)  # one per model call: 2 + 3 + 1 iterations
    assert (
        "middleware  LLMToolSelectorMiddleware  6 offered → 2 selected (−4: create_ticket, "
        "page_oncall, fetch_data, export_report): "
    ) in selector[0]
    assert selector[0].endswith(" · asked claude-haiku-4-5 (in 76 tok · out 19 tok)")
    [compaction] = [i for i, line in enumerate(lines) if "ContextEditingMiddleware" in line]
    assert lines[compaction].startswith(
        "middleware  ContextEditingMiddleware  compaction context_editing:call_0b20f645  "
        "−15 749 tok, kept 14 tok (cleared call_0b20f645): "
    )
    # turn 2, iteration 1: the prompt carries the placeholder, and the model reads the
    # logs again; iteration 2 holds them in full
    assert [
        "predicted net +$0.2154 = saving $0.2362 − stub carry $0.0002 − expected recall $0.0206 "
        "(H=5, p=0.50, claude-sonnet-4-5, "
        "genai-prices)",
        "chat        claude-sonnet-4-5  in 1 323 tok · out 29 tok",
        "post_model  get_logs as emitted",
        "execute_tool get_logs",
        "iteration 2",
    ] == lines[compaction + 1 : compaction + 6]
    assert "chat        claude-sonnet-4-5  in 17 093 tok · out 36 tok" in lines


def test_demo_writes_the_spans_it_printed(demo: Any) -> None:
    _, _, _, path = demo
    spans = _spans(path)
    names = [s["name"] for s in spans]
    assert (4, 3) == (names.count("invoke_agent analyst"), names.count("invoke_agent triage"))
    analyst = {s["traceId"] for s in spans if s["name"] == "invoke_agent analyst"}
    own = [s for s in spans if c.ATTR_MIDDLEWARE_NAME not in _attrs(s)]
    assert 6 * sum(
        1 for s in own if s["name"] == c.SPAN_SELECT_TOOLS and s["traceId"] in analyst
    ) == sum(1 for s in own if s["name"] == c.SPAN_STAGE)  # fmt: skip
    assert 3 == names.count(c.SPAN_OFFLOAD_SETTLE)
    gates = [_attrs(s) for s in spans if s["name"] == c.SPAN_OFFLOAD_GATE]
    fired = sorted(
        (a[c.ATTR_GEN_AI_REQUEST_MODEL], a[c.ATTR_OFFLOAD_NET_SAVING_USD])
        for a in gates
        if a[c.ATTR_OFFLOAD_FIRE]
    )
    # 17 180.75 tokens on opus: 17180.75×5×$5/M − 80×5×$5/M − $0.034375 = $0.39314375
    assert [("claude-opus-4-6", 0.39314375), ("gpt-4o", 0.178996875)] == [
        (m, round(v, 9)) for m, v in fired
    ]
    dropped = [
        _attrs(s)
        for s in spans
        if s["name"] == c.SPAN_DISPATCH and _attrs(s)[c.ATTR_DISPATCH_PALETTE_GATE] == "dropped"
    ]
    assert [("create_ticket", "page_oncall", "create_ticket", "escalate_incidents")] == [
        (
            a[c.ATTR_DISPATCH_EMITTED_TOOL],
            a[c.ATTR_DISPATCH_REDIRECT_TO],
            a[c.ATTR_DISPATCH_FINAL_TOOL],
            a[c.ATTR_POLICY_WINNER],
        )
        for a in dropped
    ]


def test_demo_writes_the_compaction_and_links_its_settlement_to_it(demo: Any) -> None:
    _, _, _, path = demo
    spans = _spans(path)
    [compaction] = [s for s in spans if s["name"] == c.SPAN_COMPACTION]
    a = _attrs(compaction)
    assert (
        "ContextEditingMiddleware",
        "compaction",
        "context_editing",
        "context_editing:call_0b20f645",
        "claude-sonnet-4-5",
        {"values": [{"stringValue": "call_0b20f645"}]},
    ) == (
        a[c.ATTR_MIDDLEWARE_NAME],
        a[c.ATTR_MIDDLEWARE_DECISION],
        a[c.ATTR_OFFLOAD_MECHANISM],
        a[c.ATTR_OFFLOAD_ID],
        a[c.ATTR_GEN_AI_REQUEST_MODEL],
        a[c.ATTR_COMPACTION_TOOL_CALL_IDS],
    )
    [settle] = [
        s
        for s in spans
        if s["name"] == c.SPAN_OFFLOAD_SETTLE
        and _attrs(s)[c.ATTR_OFFLOAD_ID] == a[c.ATTR_OFFLOAD_ID]
    ]
    assert ("context_editing", "loss") == (
        _attrs(settle)[c.ATTR_OFFLOAD_MECHANISM],
        _attrs(settle)[c.ATTR_OFFLOAD_OUTCOME],
    )
    assert [(compaction["traceId"], compaction["spanId"])] == [
        (link["traceId"], link["spanId"]) for link in settle["links"]
    ]


def test_demo_logs_carry_the_trace_context(demo: Any) -> None:
    _, _, _, path = demo
    logs = [
        json.loads(line)
        for line in (path.parent / "seamscope-trace.log.jsonl").read_text().splitlines()
    ]
    trace_ids = {s["traceId"] for s in _spans(path)}
    drops = [e for e in logs if e["event"] == c.LOG_PALETTE_GATE_DROP]
    assert 1 == len(drops)
    assert ("escalate_incidents", "create_ticket", "page_oncall") == (
        drops[0]["policy"],
        drops[0]["emitted_tool"],
        drops[0]["target"],
    )
    assert all(e["trace_id"] in trace_ids for e in logs if e["event"] != c.LOG_OFFLOAD_SETTLED)


def test_a_seeded_demo_is_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        assert 0 == main(["demo", "--seed", "11"])
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "conversation demo-11" in outputs[0]


def test_explain_prints_the_trees_the_demo_printed(
    demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _, path = demo
    assert 0 == main(["explain", str(path)])
    explained = capsys.readouterr().out
    _writes, _staged, legend, rest = out.split("\n", 3)  # the legend above the first tree
    assert LEGEND == legend
    assert rest.split("offload economics")[0] == explained.split("offload economics")[0]


def test_explain_tool_story_follows_a_dropped_redirect(
    demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, path = demo
    assert 0 == main(["explain", str(path), "--tool", "page_oncall", "--only-redirects"])
    out = capsys.readouterr().out
    assert (
        "page_oncall: dropped by role_palette (analyst palette (−1: page_oncall)); "
        "not selected; target of a redirect from create_ticket that the palette gate dropped"
    ) in out


def test_explain_json_filters_by_conversation_and_offloads(
    demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, path = demo
    assert 0 == main(
        ["explain", str(path), "--conversation", "demo-7", "--only-offloads", "--format", "json"]
    )
    report = json.loads(capsys.readouterr().out)
    fired = [
        (g["tool"], g["model"], g["fire"])
        for turn in report["turns"]
        for it in turn["iterations"]
        for g in it["offload_gates"]
        if g["reason_code"] != "below_threshold"
    ]
    assert [("get_logs", "gpt-4o", True), ("export_report", "claude-opus-4-6", True)] == fired
    assert ["loss", "gain"] == [s["outcome"] for s in report["settlements"]]


def test_explain_trace_id_prefix_selects_one_turn(
    demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, path = demo
    assert 0 == main(["explain", str(path), "--format", "json"])
    trace_id = json.loads(capsys.readouterr().out)["turns"][2]["trace_id"]
    assert 0 == main(["explain", str(path), "--trace-id", trace_id[:10], "--format", "json"])
    turns = json.loads(capsys.readouterr().out)["turns"]
    assert [(trace_id, 3)] == [(t["trace_id"], t["turn"]) for t in turns]


def test_explain_saves_the_printed_tree_as_a_picture(
    demo: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, path = demo
    assert 0 == main(["explain", str(path), "--format", "json"])
    trace_id = json.loads(capsys.readouterr().out)["turns"][1]["trace_id"]
    picture = tmp_path / "turn.svg"
    assert 0 == main(["explain", str(path), "--trace-id", trace_id, "--svg", str(picture)])
    printed = capsys.readouterr().out
    svg = picture.read_text(encoding="utf-8")
    assert "dropped by palette gate" in printed
    assert svg.startswith("<svg") and "palette&#160;gate" in svg


def test_explain_reads_a_file_from_the_plain_sdk_file_exporter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spans exported by the OpenTelemetry SDK's own file exporter, not the demo."""
    path = tmp_path / "sdk.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    policy = ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: "sales" in ctx.user_text,
        model=ModelConfig("claude-haiku-4-5"),
        when_tool="run_block",
        redirect_to="fetch_data",
    )
    layer = DecisionLayer(
        default_model="claude-opus-4-6", policies=[policy], tracer_provider=provider
    )
    replies = iter(
        [
            ChatResponse(
                Message("assistant", "", (ToolCall("c1", "run_block", {}),)), ModelUsage(900, 10)
            ),
            ChatResponse(Message("assistant", "done"), ModelUsage(950, 5)),
        ]
    )
    agent = ReActAgent(
        layer,
        lambda request: next(replies),
        {"run_block": lambda args: "ran", "fetch_data": lambda args: "rows"},
    )
    agent.run_turn("sdk-1", "sales please")
    provider.shutdown()

    assert 0 == main(["explain", str(path)])
    out = capsys.readouterr().out
    assert "turn 1 · conversation sdk-1 · trace " in out
    assert "pre_model   policy 'sales_data_read' → claude-haiku-4-5" in out
    assert (
        "post_model  run_block → fetch_data (policy 'sales_data_read', guard none, palette kept)"
        in out
    )
    assert "execute_tool fetch_data" in out


def test_explain_names_corrupt_lines_and_still_shows_the_good_traces(
    demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, path = demo
    good = path.read_text(encoding="utf-8")
    corrupt = path.with_name("corrupt.jsonl")
    # a truncated last write and a line that is JSON but not an OTLP export
    corrupt.write_text(good + '{"not": "otlp"}\n' + good.splitlines()[0][:200] + "\n")
    assert 1 == main(["explain", str(corrupt)])
    captured = capsys.readouterr()
    lines = len(good.splitlines())
    assert f"{corrupt}:{lines + 1}: not an OTLP trace export (no resourceSpans)" in captured.err
    assert f"{corrupt}:{lines + 2}: line looks truncated" in captured.err
    assert (4, 3) == (
        captured.out.count("conversation demo-7 ·"),
        captured.out.count("conversation demo-7-langchain ·"),
    )


def test_explain_exit_codes_for_missing_and_unreadable_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert 2 == main(["explain", str(tmp_path / "missing.jsonl")])
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")
    assert 2 == main(["explain", str(garbage)])
    err = capsys.readouterr().err
    assert "missing.jsonl: no such file" in err
    assert f"error: {garbage} is not a trace file: no line of it is an OTLP-JSON export" in err
    assert "not valid JSON" not in err  # said once for the file, not line by line


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert 2 == main([])
    assert 2 == main(["demo", "--turns", "zero"])
    assert 2 == main(["demo", "--turns", "0"])
    assert 0 == main(["demo", "--help"])
    assert "--metrics-port" in capsys.readouterr().out
    assert 0 == main(["explain", "--help"])
    assert "--only-redirects" in capsys.readouterr().out


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "seamscope", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (0, "seamscope 0.1.0\n") == (result.returncode, result.stdout)


def test_demo_serves_metrics_on_a_free_port_and_more_turns_start_new_conversations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert 0 == main(["demo", "--turns", "9", "--metrics-port", "0", "--quiet"])
    captured = capsys.readouterr()
    assert "" == captured.err
    assert "9 turns · 9 traces" in captured.out
    assert "metrics: http://127.0.0.1:" in captured.out
    conversations = {
        _attrs(s).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        for s in _spans(tmp_path / "seamscope-trace.jsonl")
    }
    assert {"demo-7", "demo-7-langchain", "demo-7-2"} <= conversations
