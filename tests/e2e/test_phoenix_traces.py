"""Decision spans through a real OTLP trace backend: Arize Phoenix.

The demo exports its spans over OTLP/HTTP to a Phoenix server this module
starts, and writes the same spans to an OTLP-JSON file. The test takes the
trace ids from the file, reads every trace back from Phoenix's REST API
(``GET /v1/projects/{project}/spans?trace_id=...``) and checks that each
decision span arrived whole (name, parent, seamscope and ``gen_ai`` attributes,
policy-evaluation events) and that the spans an operator asks about carry the
right answers: a stage's name and reason, the PRE seam's winning policy and
model, the palette gate's drop, the offload gate's priced terms.
"""

from __future__ import annotations

import json
import math
import subprocess
import urllib.error
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seamscope.telemetry import conventions as c

from ._support import (
    ROOT,
    ProcessGroup,
    Span,
    child_env,
    free_port,
    get_json,
    http_ok,
    read_otlp_spans,
    require_executable,
    seamscope_demo_argv,
    wait_for,
)

PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
INSTALL_HINT = "python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix"
DEMO_TURNS = 4  # one conversation: every decision the scenario has
# Small, so reading one trace back goes through several pages.
PAGE_SIZE = 20

# Phoenix answers the keys the demo sent, plus its own (llm.*, tool.*,
# session.id, ...). These prefixes are what seamscope sends and must come back.
SEAMSCOPE_KEYS = ("seamscope.", "gen_ai.", "error.type")


@dataclass
class Phoenix:
    url: str
    processes: ProcessGroup


@dataclass
class DemoRun:
    project: str
    spans: list[Span]
    output: str


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    executable = require_executable(PHOENIX, INSTALL_HINT)
    tmp = tmp_path_factory.mktemp("phoenix-e2e")
    processes = ProcessGroup()
    try:
        port, grpc_port = free_port(), free_port()
        env = child_env(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(port),
            # gRPC binds every interface whatever PHOENIX_HOST says; the demo
            # sends OTLP/HTTP on loopback and never uses it.
            PHOENIX_GRPC_PORT=str(grpc_port),
            PHOENIX_WORKING_DIR=str(tmp / "phoenix-data"),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        )
        processes.start("phoenix", [executable, "serve"], tmp, env=env, cwd=tmp)
        url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: http_ok(f"{url}/healthz"),
            timeout=120,
            what="Phoenix to be healthy",
            diagnostics=processes.diagnostics,
            interval=0.5,
            alive=processes,
        )
        yield Phoenix(url, processes)
    finally:
        processes.stop_all()


@pytest.fixture(scope="module")
def demo_run(phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    tmp = tmp_path_factory.mktemp("phoenix-demo")
    project = f"seamscope-e2e-{uuid.uuid4().hex[:12]}"
    output = tmp / "demo-trace.jsonl"
    completed = subprocess.run(
        seamscope_demo_argv(
            "--turns", str(DEMO_TURNS),
            "--output", str(output),
            "--otlp-endpoint", phoenix.url,
            "--quiet",
        ),
        env=child_env(OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}"),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    log = f"demo stdout:\n{completed.stdout}\ndemo stderr:\n{completed.stderr}"
    assert 0 == completed.returncode, f"{log}\n{phoenix.processes.diagnostics()}"
    spans = read_otlp_spans(Path(output))
    assert spans, f"the demo wrote no spans to {output}\n{log}"
    return DemoRun(project, spans, log)


def _first(spans: list[Span], name: str, **attributes: Any) -> Span:
    """The first span (by start time) named ``name`` with these attribute values."""
    found = sorted(
        (
            s
            for s in spans
            if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())
        ),
        key=lambda s: s.start_ns,
    )
    assert found, f"no {name} span with {attributes} in the demo's OTLP-JSON"
    return found[0]


def _read_trace(phoenix: Phoenix, project: str, trace_id: str) -> list[dict[str, Any]]:
    """Every span Phoenix holds for ``trace_id``, following ``next_cursor``."""
    spans: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"trace_id": [trace_id], "limit": PAGE_SIZE}
        if cursor:
            params["cursor"] = cursor
        try:
            page = get_json(f"{phoenix.url}/v1/projects/{project}/spans", params)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # the project appears with its first ingested span
                return []
            raise
        if page is None:
            return []
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def _sent(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k.startswith(SEAMSCOPE_KEYS)}


@pytest.mark.e2e
def test_decision_spans_read_back_from_phoenix(phoenix: Phoenix, demo_run: DemoRun) -> None:
    spans = demo_run.spans
    # The decisions an operator asks about, found in the file the demo wrote.
    stage = _first(spans, c.SPAN_STAGE, **{c.ATTR_STAGE_NAME: "forced_choice"})
    pre_model = _first(
        spans,
        c.SPAN_SEAM_PRE_MODEL,
        **{c.ATTR_POLICY_WINNER: "sales_data_read"},
    )
    dropped = _first(
        spans,
        c.SPAN_DISPATCH,
        **{c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED},
    )
    gate = _first(
        spans,
        c.SPAN_OFFLOAD_GATE,
        **{c.ATTR_OFFLOAD_FIRE: True, c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o"},
    )
    wanted = (stage, pre_model, dropped, gate)

    # Read each of their traces back from Phoenix, once it has ingested all of it.
    read_back: dict[str, dict[str, Any]] = {}
    for trace_id in sorted({s.trace_id for s in wanted}):
        sent = [s for s in spans if s.trace_id == trace_id]

        def whole_trace(trace_id: str = trace_id, count: int = len(sent)) -> list[Any]:
            found = _read_trace(phoenix, demo_run.project, trace_id)
            return found if len(found) >= count else []

        received = wait_for(
            whole_trace,
            timeout=60,
            what=f"Phoenix to hold all {len(sent)} spans of trace {trace_id}",
            diagnostics=lambda: f"{demo_run.output}\n{phoenix.processes.diagnostics()}",
            interval=0.5,
            alive=phoenix.processes,
        )
        by_id = {span["context"]["span_id"]: span for span in received}
        assert sorted(s.span_id for s in sent) == sorted(by_id), trace_id
        assert {trace_id} == {span["context"]["trace_id"] for span in received}

        # Every decision span arrived whole.
        for span in sent:
            got = by_id[span.span_id]
            assert span.name == got["name"], span
            assert (span.parent_span_id or None) == got["parent_id"], span
            if span.name not in c.SPANS:
                continue
            assert _sent(span.attributes) == _sent(got["attributes"]), span.name
            assert span.events == [
                {"name": e["name"], "attributes": e["attributes"]} for e in got["events"]
            ], span.name
        read_back.update(by_id)

    # Stage: which stage decided what, and why.
    got = read_back[stage.span_id]["attributes"]
    assert "forced_choice" == got[c.ATTR_STAGE_NAME]
    assert c.StageOutcomeKind.SELECT == got[c.ATTR_STAGE_OUTCOME]
    assert stage.attributes[c.ATTR_STAGE_REASON] == got[c.ATTR_STAGE_REASON]
    assert "hydrate_context" in got[c.ATTR_STAGE_REASON]

    # PRE seam: the seed's sales-data policy picks the cheap model.
    got = read_back[pre_model.span_id]["attributes"]
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY,
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_GEN_AI_REQUEST_MODEL: "claude-haiku-4-5",
    } == {
        key: got.get(key)
        for key in (c.ATTR_SEAM_WINNER_SOURCE, c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL)
    }
    assert [
        ("vip_customer", c.PolicyResult.ERROR),
        ("sales_data_read", c.PolicyResult.MATCHED),
    ] == [
        (e["attributes"][c.ATTR_POLICY_NAME], e["attributes"][c.ATTR_POLICY_RESULT])
        for e in read_back[pre_model.span_id]["events"]
        if e["name"] == c.EVENT_POLICY_EVALUATED
    ]

    # POST seam: a redirect to an unrouted tool is dropped; the emitted call runs.
    got = read_back[dropped.span_id]["attributes"]
    dispatch_keys = (
        c.ATTR_DISPATCH_EMITTED_TOOL,
        c.ATTR_POLICY_WINNER,
        c.ATTR_DISPATCH_REDIRECT_TO,
        c.ATTR_DISPATCH_PALETTE_GATE,
        c.ATTR_DISPATCH_FINAL_TOOL,
    )
    assert {
        c.ATTR_DISPATCH_EMITTED_TOOL: "create_ticket",
        c.ATTR_POLICY_WINNER: "escalate_incidents",
        c.ATTR_DISPATCH_REDIRECT_TO: "page_oncall",
        c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED,
        c.ATTR_DISPATCH_FINAL_TOOL: "create_ticket",
    } == {key: got.get(key) for key in dispatch_keys}

    # Offload gate: fired, with the priced terms the file has, to the last bit.
    got = read_back[gate.span_id]["attributes"]
    priced = (
        c.ATTR_OFFLOAD_NET_SAVING_USD,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD,
    )
    assert True is got[c.ATTR_OFFLOAD_FIRE]
    assert c.OffloadReasonCode.NET_POSITIVE == got[c.ATTR_OFFLOAD_REASON_CODE]
    assert "gpt-4o" == got[c.ATTR_GEN_AI_REQUEST_MODEL]
    assert {key: gate.attributes[key] for key in priced} == {key: got[key] for key in priced}
    net, reprefill, stub, recall = (got[key] for key in priced)
    assert net > 0
    assert math.isclose(reprefill - stub - recall, net, rel_tol=1e-9)


def test_phoenix_shows_the_tools_each_model_call_was_offered(
    phoenix: Phoenix, demo_run: DemoRun
) -> None:
    """A GenAI-aware backend reads what the model saw without knowing seamscope:
    each ``chat`` span's ``gen_ai.tool.definitions`` (the tools really sent,
    after selection) reads back from Phoenix as sent, and names the selected
    tools of its iteration."""
    spans = demo_run.spans
    stage = _first(spans, c.SPAN_STAGE, **{c.ATTR_STAGE_NAME: "forced_choice"})
    sent = [s for s in spans if s.trace_id == stage.trace_id]
    chats = [s for s in sent if c.ATTR_GEN_AI_TOOL_DEFINITIONS in s.attributes]
    assert chats, "no chat span with gen_ai.tool.definitions in the demo's trace"

    def whole_trace() -> list[Any]:
        found = _read_trace(phoenix, demo_run.project, stage.trace_id)
        return found if len(found) >= len(sent) else []

    received = wait_for(
        whole_trace,
        timeout=60,
        what=f"Phoenix to hold all {len(sent)} spans of trace {stage.trace_id}",
        diagnostics=lambda: f"{demo_run.output}\n{phoenix.processes.diagnostics()}",
        interval=0.5,
        alive=phoenix.processes,
    )
    by_id = {span["context"]["span_id"]: span for span in received}
    by_span = {s.span_id: s for s in sent}
    for chat in chats:
        got = by_id[chat.span_id]["attributes"]
        offered = chat.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS]
        assert offered == got[c.ATTR_GEN_AI_TOOL_DEFINITIONS], chat.name
        names = [tool["name"] for tool in json.loads(offered)]
        # the iteration's selection: exactly the tools the model was sent
        iteration = chat.parent_span_id
        (select,) = [
            s for s in sent if s.name == c.SPAN_SELECT_TOOLS and s.parent_span_id == iteration
        ]
        assert sorted(select.attributes[c.ATTR_SELECTION_SELECTED]) == sorted(names)
        assert by_span[iteration].name == c.SPAN_ITERATION
