"""The shipped collector configurations, run by a real collector, into a real Jaeger.

Binaries: ``bash deploy/build-backends.sh`` builds Jaeger v2 and
otelcol-seamscope (deploy/collector/builder-manifest.yaml). Every process binds
127.0.0.1 (the gateways of the two-tier test 127.0.0.2 and 127.0.0.3) on free
high ports, passed through the environment variables the configurations read;
Tempo is not installable here, so its exporter points at a closed port.

1. Every shipped configuration passes the built collector's ``validate``; the
   build holds exactly the components the configurations use.
2. The demo exports OTLP to a collector running ``collector-config.yaml``,
   which exports to Jaeger; its decision spans are read back from Jaeger's API
   by trace id and compared with the demo's OTLP-JSON file.
3. Tail sampling over traces with known properties keeps every trace a policy
   of the configuration names, whole, and about its baseline share of the rest.
4. The span metrics, with the decision dimensions, reach Prometheus with exact
   counts (before sampling), and every query built on them returns a series.
5. Every Jaeger search panel of the dashboards finds the traces it is meant to.
6. Agent and two gateways: each trace lands whole at one gateway, and no span is
   lost when a gateway is stopped and restarted mid-run.
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from seamscope.telemetry import conventions as c

from ._backends import (
    AGENT_CONFIG,
    COLLECTOR_CONFIGS,
    GATEWAY_CONFIG,
    JAEGER_CONFIG,
    KEPT_KINDS,
    PLAIN,
    SINGLE_CONFIG,
    Collector,
    Jaeger,
    Prometheus,
    TraceSender,
    closed_port_endpoint,
    collector,
    jaeger_binary,
    otelcol_binary,
    run_binary,
    start_jaeger,
    start_prometheus,
)
from ._support import (
    ROOT,
    ProcessGroup,
    Span,
    child_env,
    free_port,
    read_otlp_spans,
    require_executable,
    seamscope_demo_argv,
    wait_for,
)

pytestmark = pytest.mark.e2e

DASHBOARDS = ROOT / "dashboards"
DATASOURCES = DASHBOARDS / "provisioning" / "datasources" / "seamscope.yaml"
DEMO_TURNS = 7  # one cycle of the demo: the reference turns, then the LangChain ones
DEMO_SERVICE = "seamscope-demo"  # the dashboards' default `service`
SAMPLING_SERVICE = "seamscope-e2e-sampling"
TIER_SERVICE = "seamscope-e2e-tiers"
# Per kind of kept trace, and plain ones: enough for the baseline share to be
# 10% within 4 percentage points (binomial, n=1000: 4.2 standard deviations).
KEPT_PER_KIND = 20
PLAIN_TRACES = 1000
BASELINE_TOLERANCE = 0.04
# seamscope's own keys: what the demo sent and Jaeger must return as sent.
SEAMSCOPE_KEYS = ("seamscope.", "gen_ai.", "error.type")

# Which policy of the configuration keeps each kind of trace the sender makes.
KIND_POLICY = {
    "dropped_redirect": "palette-gate-dropped",
    "degraded_stage": "stage-degraded",
    "error_status": "errors",
    "fired_offload": "offload-fired",
    "offload_loss": "offload-loss",
    "adopter_error": "contained-errors",
    "policy_error": "contained-errors",
    "middleware_block": "middleware-fallback-block-compaction",
}

# The builder names of the components, and the names the configurations use
# (the old names are deprecated aliases in 0.161.0, still accepted).
ALIASES = {
    "otlp_grpc": "otlp",
    "otlp_http": "otlphttp",
    "load_balancing": "loadbalancing",
    "span_metrics": "spanmetrics",
}
# In the manifest for backends that take OTLP/HTTP only; no shipped config uses it.
EXTRA_COMPONENTS = {("exporters", "otlphttp")}


def _load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _policies(config: Path) -> list[dict[str, Any]]:
    policies: list[dict[str, Any]] = _load_yaml(config)["processors"]["tail_sampling"]["policies"]
    return policies


def _decision_wait(config: Path) -> float:
    text = _load_yaml(config)["processors"]["tail_sampling"]["decision_wait"]
    match = re.fullmatch(r"(\d+)s", text)
    assert match, text
    return float(match.group(1))


def _baseline_share(config: Path) -> float:
    (baseline,) = [p for p in _policies(config) if p["type"] == "probabilistic"]
    return float(baseline["probabilistic"]["sampling_percentage"]) / 100


# --------------------------------------------------------------------------
# What the tail sampler must keep, evaluated from the configuration.
# --------------------------------------------------------------------------

_EVENT_NAME = re.compile(r'name == "([^"]+)"')
_EVENT_ATTRIBUTE = re.compile(r'attributes\["([^"]+)"\] == "([^"]*)"')


def _matches(policy: dict[str, Any], spans: list[Span], statuses: dict[str, int]) -> bool:
    """Whether a non-probabilistic policy of the shipped config keeps these spans.

    Only the policy types and OTTL condition forms the configurations use are
    understood; any other fails the test, so the evaluator learns it first.
    """
    kind = policy["type"]
    body = policy[kind]
    if kind == "string_attribute":
        return any(s.attributes.get(body["key"]) in body["values"] for s in spans)
    if kind == "boolean_attribute":
        return any(s.attributes.get(body["key"]) is body["value"] for s in spans)
    if kind == "status_code":
        assert ["ERROR"] == body["status_codes"], body
        return any(statuses.get(s.span_id) == 2 for s in spans)
    if kind == "ottl_condition":
        assert not body.get("span"), body
        for condition in body["spanevent"]:
            if name := _EVENT_NAME.fullmatch(condition):
                if any(e["name"] == name.group(1) for s in spans for e in s.events):
                    return True
            elif attribute := _EVENT_ATTRIBUTE.fullmatch(condition):
                key, value = attribute.groups()
                if any(e["attributes"].get(key) == value for s in spans for e in s.events):
                    return True
            else:
                raise AssertionError(f"the test cannot evaluate the condition {condition!r}")
        return False
    raise AssertionError(f"the test cannot evaluate a {kind} policy")


def kept_by_policy(spans: list[Span], statuses: dict[str, int], config: Path) -> set[str]:
    """The trace ids some non-probabilistic policy of ``config`` must keep."""
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    policies = [p for p in _policies(config) if p["type"] != "probabilistic"]
    return {
        trace_id
        for trace_id, trace in by_trace.items()
        if any(_matches(policy, trace, statuses) for policy in policies)
    }


def otlp_statuses(path: Path) -> dict[str, int]:
    """Span id -> status code (0 unset, 1 ok, 2 error) of an OTLP-JSON file."""
    codes = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
    found: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for raw in scope_spans.get("spans", []):
                    code = (raw.get("status") or {}).get("code", 0)
                    found[raw["spanId"]] = codes.get(code, 0) if isinstance(code, str) else code
    return found


# --------------------------------------------------------------------------
# 1. validate, components.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COLLECTOR_CONFIGS))
def test_shipped_collector_config_passes_validate(name: str) -> None:
    # no variables set: the defaults the files ship with
    run_binary([otelcol_binary(), "validate", "--config", str(COLLECTOR_CONFIGS[name])])


def test_jaeger_config_passes_validate() -> None:
    run_binary([jaeger_binary(), "validate", "--config", str(JAEGER_CONFIG)])


def test_the_build_holds_exactly_the_components_the_configs_use() -> None:
    listed = yaml.safe_load(run_binary([otelcol_binary(), "components"]))
    built = {
        (kind, ALIASES.get(component["name"], component["name"]))
        for kind in ("receivers", "processors", "exporters", "connectors", "extensions")
        for component in listed.get(kind) or []
    }
    used = {
        (kind, component_id.split("/", 1)[0])
        for path in COLLECTOR_CONFIGS.values()
        for kind, section in _load_yaml(path).items()
        if kind != "service"
        for component_id in section or {}
    }
    assert used | EXTRA_COMPONENTS == built
    modules = [
        component["module"]
        for kind in ("receivers", "processors", "exporters", "connectors", "extensions")
        for component in listed.get(kind) or []
    ]
    versions = {module.rsplit(" ", 1)[1] for module in modules}
    assert {"v0.161.0"} == versions, modules


# --------------------------------------------------------------------------
# One collector (collector-config.yaml as shipped) -> Jaeger; Prometheus.
# --------------------------------------------------------------------------


@dataclass
class Single:
    jaeger: Jaeger
    collector: Collector
    prometheus: Prometheus
    processes: ProcessGroup
    demo_output: Path
    demo_spans: list[Span]
    demo_statuses: dict[str, int]
    sampling: TraceSender
    sent_at: float
    _stored: dict[str, list[Span]] = field(default_factory=dict)

    def diagnostics(self) -> str:
        return self.processes.diagnostics()

    def wait_until_stored(self, trace_ids: set[str]) -> dict[str, list[Span]]:
        """Each of these demo traces, read back whole from Jaeger by trace id."""
        expected = Counter(s.trace_id for s in self.demo_spans)
        timeout = _decision_wait(SINGLE_CONFIG) + 90
        for trace_id in sorted(trace_ids - set(self._stored)):

            def whole(trace_id: str = trace_id) -> list[Span]:
                found = self.jaeger.trace(trace_id)
                return found if len(found) >= expected[trace_id] else []

            self._stored[trace_id] = wait_for(
                whole,
                timeout=timeout,
                what=f"Jaeger to hold all {expected[trace_id]} spans of trace {trace_id}",
                diagnostics=self.diagnostics,
                interval=1.0,
                alive=self.processes,
            )
        return {trace_id: self._stored[trace_id] for trace_id in trace_ids}


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Single]:
    tmp = tmp_path_factory.mktemp("jaeger-collector")
    processes = ProcessGroup()
    sender: TraceSender | None = None
    try:
        jaeger = start_jaeger(processes, tmp)
        otelcol = collector(
            "otelcol",
            SINGLE_CONFIG,
            tmp,
            JAEGER_OTLP_ENDPOINT=jaeger.otlp_grpc_endpoint,
            TEMPO_OTLP_ENDPOINT=closed_port_endpoint(),
        ).start(processes)
        prometheus = start_prometheus(processes, tmp, [otelcol.prometheus_target])

        output = tmp / "demo-trace.jsonl"
        completed = subprocess.run(
            seamscope_demo_argv(
                "--turns", str(DEMO_TURNS),
                "--output", str(output),
                "--otlp-endpoint", otelcol.otlp_http_url,
                "--otlp-metrics",
                "--service-name", DEMO_SERVICE,
                "--quiet",
            ),
            env=child_env(),
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )  # fmt: skip
        log = f"demo stdout:\n{completed.stdout}\ndemo stderr:\n{completed.stderr}"
        assert 0 == completed.returncode, f"{log}\n{processes.diagnostics()}"
        spans = read_otlp_spans(output)
        assert spans, f"the demo wrote no spans to {output}\n{log}"

        # Traces with known properties, shuffled, through the same collector.
        sender = TraceSender(otelcol.otlp_http_url, SAMPLING_SERVICE)
        kinds = [kind for kind in KEPT_KINDS for _ in range(KEPT_PER_KIND)]
        kinds += [PLAIN] * PLAIN_TRACES
        random.Random(16).shuffle(kinds)
        for kind in kinds:
            sender.trace(kind)
        sender.flush()
        sent_at = time.monotonic()
        assert 0 == sender.exporter.failed, processes.diagnostics()

        yield Single(
            jaeger,
            otelcol,
            prometheus,
            processes,
            output,
            spans,
            otlp_statuses(output),
            sender,
            sent_at,
        )
    finally:
        if sender is not None:
            sender.close()
        processes.stop_all()


def _first(spans: list[Span], name: str, **attributes: Any) -> Span:
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


def _ours(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k.startswith(SEAMSCOPE_KEYS)}


# --------------------------------------------------------------------------
# 2. The demo's decision spans, read back from Jaeger.
# --------------------------------------------------------------------------


def test_demo_decision_spans_read_back_from_jaeger(single: Single) -> None:
    spans = single.demo_spans
    stage = _first(spans, c.SPAN_STAGE, **{c.ATTR_STAGE_NAME: "forced_choice"})
    pre_model = _first(spans, c.SPAN_SEAM_PRE_MODEL, **{c.ATTR_POLICY_WINNER: "sales_data_read"})
    dropped = _first(
        spans, c.SPAN_DISPATCH, **{c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED}
    )
    gate = _first(
        spans,
        c.SPAN_OFFLOAD_GATE,
        **{c.ATTR_OFFLOAD_FIRE: True, c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o"},
    )
    wanted = {s.trace_id for s in (stage, pre_model, dropped, gate)}
    kept = kept_by_policy(spans, single.demo_statuses, SINGLE_CONFIG)
    # the configuration keeps every trace these decisions are in
    assert wanted <= kept

    stored = single.wait_until_stored(kept)
    read_back: dict[str, Span] = {}
    for trace_id, received in stored.items():
        sent = [s for s in spans if s.trace_id == trace_id]
        by_id = {s.span_id: s for s in received}
        assert sorted(s.span_id for s in sent) == sorted(by_id), trace_id
        assert {trace_id} == {s.trace_id for s in received}
        for span in sent:
            back = by_id[span.span_id]
            assert span.name == back.name, span
            assert span.parent_span_id == back.parent_span_id, span
            assert (span.start_ns, span.end_ns) == (back.start_ns, back.end_ns), span
            assert _ours(span.attributes) == _ours(back.attributes), span.name
            assert span.events == back.events, span.name
        read_back.update(by_id)

    # Stage: which stage decided what, and why.
    got = read_back[stage.span_id].attributes
    assert "forced_choice" == got[c.ATTR_STAGE_NAME]
    assert stage.attributes[c.ATTR_STAGE_OUTCOME] == got[c.ATTR_STAGE_OUTCOME]
    assert stage.attributes[c.ATTR_STAGE_REASON] == got[c.ATTR_STAGE_REASON]
    assert got[c.ATTR_STAGE_REASON]

    # PRE seam: the seed's sales-data policy picks the cheap model.
    got = read_back[pre_model.span_id].attributes
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY,
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_GEN_AI_REQUEST_MODEL: "claude-haiku-4-5",
    } == {
        key: got.get(key)
        for key in (c.ATTR_SEAM_WINNER_SOURCE, c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL)
    }

    # POST seam: a redirect to an unrouted tool is dropped; the emitted call runs.
    got = read_back[dropped.span_id].attributes
    assert {
        c.ATTR_DISPATCH_EMITTED_TOOL: "create_ticket",
        c.ATTR_POLICY_WINNER: "escalate_incidents",
        c.ATTR_DISPATCH_REDIRECT_TO: "page_oncall",
        c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED,
        c.ATTR_DISPATCH_FINAL_TOOL: "create_ticket",
    } == {
        key: got.get(key)
        for key in (
            c.ATTR_DISPATCH_EMITTED_TOOL,
            c.ATTR_POLICY_WINNER,
            c.ATTR_DISPATCH_REDIRECT_TO,
            c.ATTR_DISPATCH_PALETTE_GATE,
            c.ATTR_DISPATCH_FINAL_TOOL,
        )
    }

    # Offload gate: fired, with the priced terms of the OTLP-JSON file, to the last bit.
    got = read_back[gate.span_id].attributes
    priced = (
        c.ATTR_OFFLOAD_NET_SAVING_USD,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD,
    )
    assert True is got[c.ATTR_OFFLOAD_FIRE]
    assert c.OffloadReasonCode.NET_POSITIVE == got[c.ATTR_OFFLOAD_REASON_CODE]
    assert {key: gate.attributes[key] for key in priced} == {key: got[key] for key in priced}
    net, reprefill, stub, recall = (got[key] for key in priced)
    assert net > 0
    assert math.isclose(reprefill - stub - recall, net, rel_tol=1e-9)


# --------------------------------------------------------------------------
# 3. Tail sampling.
# --------------------------------------------------------------------------


def test_every_policy_has_a_kind_of_trace_that_needs_it() -> None:
    names = {p["name"] for p in _policies(SINGLE_CONFIG) if p["type"] != "probabilistic"}
    assert names == set(KIND_POLICY.values())
    assert set(KEPT_KINDS) == set(KIND_POLICY)


def _stored_counts(jaeger: Jaeger, service: str) -> dict[str, int]:
    """Trace id -> spans Jaeger holds, for every trace of ``service``."""
    return {
        trace["traceID"]: len(trace["spans"]) for trace in jaeger.search(service, limit=100_000)
    }


def test_tail_sampling_keeps_what_the_config_says(single: Single) -> None:
    sent = single.sampling.sent
    kept = {t.trace_id: t for t in sent if t.kind != PLAIN}
    plain = {t.trace_id: t for t in sent if t.kind == PLAIN}

    def all_kept_stored() -> dict[str, int]:
        stored = _stored_counts(single.jaeger, SAMPLING_SERVICE)
        whole = all(stored.get(i) == t.spans for i, t in kept.items())
        return stored if whole else {}

    wait_for(
        all_kept_stored,
        timeout=_decision_wait(SINGLE_CONFIG) + 90,
        what=f"Jaeger to hold the {len(kept)} traces the policies keep",
        diagnostics=single.diagnostics,
        interval=1.0,
        alive=single.processes,
    )
    # Every decision was taken at the same time as those: wait out one more
    # batch timeout of the collector (5 s) with margin, then count.
    settle = single.sent_at + _decision_wait(SINGLE_CONFIG) + 15
    wait_for(
        lambda: time.monotonic() >= settle,
        timeout=_decision_wait(SINGLE_CONFIG) + 20,
        what="the baseline decisions to reach Jaeger",
    )
    stored = _stored_counts(single.jaeger, SAMPLING_SERVICE)

    assert set(stored) <= set(kept) | set(plain), "Jaeger holds traces nobody sent"
    for trace_id, trace in kept.items():
        assert trace.spans == stored.get(trace_id), f"{trace.kind} trace {trace_id}"
    sampled = [trace_id for trace_id in plain if trace_id in stored]
    for trace_id in sampled:
        assert plain[trace_id].spans == stored[trace_id], f"partial trace {trace_id}"
    share = len(sampled) / len(plain)
    expected = _baseline_share(SINGLE_CONFIG)
    print(f"baseline: {len(sampled)} of {len(plain)} plain traces kept ({share:.3f})")
    assert abs(share - expected) <= BASELINE_TOLERANCE, (
        f"baseline kept {len(sampled)} of {len(plain)} plain traces ({share:.3f}); "
        f"the config says {expected:.2f} ± {BASELINE_TOLERANCE}"
    )


# --------------------------------------------------------------------------
# 4. Span metrics in Prometheus.
# --------------------------------------------------------------------------

CALLS = "traces_span_metrics_calls_total"


def _label(attribute: str) -> str:
    return attribute.replace(".", "_")


def _label_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _sum_by(prometheus: Prometheus, expr: str, label: str) -> dict[str, float]:
    return {
        sample["metric"].get(label, ""): float(sample["value"][1])
        for sample in prometheus.query(expr)
    }


def test_span_metrics_count_every_span_before_sampling(single: Single) -> None:
    sent = single.sampling.sent
    expected = {
        c.SPAN_ITERATION: len(sent),
        c.SPAN_SELECT_TOOLS: len(sent),
        c.SPAN_STAGE: len(sent),
        c.SPAN_SEAM_PRE_MODEL: len(sent),
        c.SPAN_DISPATCH: len(sent),
        c.SPAN_OFFLOAD_GATE: len(sent),
        c.SPAN_OFFLOAD_SETTLE: sum(t.kind == "offload_loss" for t in sent),
    }
    service = f'service_name="{SAMPLING_SERVICE}"'
    query = f"sum by (span_name) ({CALLS}{{{service}}})"

    def counted() -> dict[str, float]:
        found = _sum_by(single.prometheus, query, "span_name")
        return found if found == {k: float(v) for k, v in expected.items()} else {}

    wait_for(
        counted,
        timeout=90,
        what=f"Prometheus to count every span sent: {expected}",
        diagnostics=lambda: f"{query} -> {_sum_by(single.prometheus, query, 'span_name')}",
        interval=1.0,
        alive=single.processes,
    )
    # The decision dimensions are labels, with exact counts.
    dropped = _label(c.ATTR_DISPATCH_PALETTE_GATE)
    assert {
        c.PaletteVerdict.DROPPED.value: float(KEPT_PER_KIND),
        c.PaletteVerdict.KEPT.value: float(len(sent) - KEPT_PER_KIND),
    } == _sum_by(
        single.prometheus,
        f'sum by ({dropped}) ({CALLS}{{{service}, span_name="{c.SPAN_DISPATCH}"}})',
        dropped,
    )
    reason = _label(c.ATTR_OFFLOAD_REASON_CODE)
    assert {
        c.OffloadReasonCode.NET_POSITIVE.value: float(KEPT_PER_KIND),
        c.OffloadReasonCode.BELOW_THRESHOLD.value: float(len(sent) - KEPT_PER_KIND),
    } == _sum_by(
        single.prometheus,
        f'sum by ({reason}) ({CALLS}{{{service}, span_name="{c.SPAN_OFFLOAD_GATE}"}})',
        reason,
    )


def test_span_metrics_carry_the_demo_decision_dimensions(single: Single) -> None:
    dimensions = [
        d["name"] for d in _load_yaml(SINGLE_CONFIG)["connectors"]["spanmetrics"]["dimensions"]
    ]
    for attribute in dimensions:
        label = _label(attribute)
        values = {
            _label_value(s.attributes[attribute])
            for s in single.demo_spans
            if attribute in s.attributes
        }
        assert values, f"the demo sets no {attribute}"
        _wait_for_label_values(single, label, values)


def _wait_for_label_values(single: Single, label: str, values: set[str]) -> None:
    query = f'count by ({label}) ({CALLS}{{service_name="{DEMO_SERVICE}", {label}!=""}})'

    def labelled() -> set[str]:
        return set(_sum_by(single.prometheus, query, label))

    wait_for(
        lambda: labelled() == values,
        timeout=90,
        what=f"Prometheus to have {label} = each of {sorted(values)}",
        diagnostics=lambda: f"{query} -> {sorted(labelled())}",
        interval=1.0,
        alive=single.processes,
    )


def _span_metrics_queries() -> list[tuple[str, str, list[dict[str, str]]]]:
    """(name, query, tag mapping) of every query built on the span metrics.

    The dashboards' panels (none reads the span metrics today: they read
    seamscope's own metrics) and the trace-to-metrics queries of the
    provisioned Tempo and Jaeger data sources.
    """
    found: list[tuple[str, str, list[dict[str, str]]]] = []
    for name in sorted(DASHBOARDS.glob("*.json")):
        model = json.loads(name.read_text(encoding="utf-8"))
        for panel in model["panels"]:
            for target in panel.get("targets") or []:
                if "traces_span_metrics" in (target.get("expr") or ""):
                    found.append((panel["title"], target["expr"], []))
    for source in _load_yaml(DATASOURCES)["datasources"]:
        config = (source.get("jsonData") or {}).get("tracesToMetrics")
        if config:
            for query in config["queries"]:
                found.append((f"{source['name']}: {query['name']}", query["query"], config["tags"]))
    return found


def test_every_span_metrics_query_returns_a_series(single: Single) -> None:
    queries = _span_metrics_queries()
    assert len(queries) >= 4
    spans = single.demo_spans
    # Spans a user opens: a dropped redirect, a stage, a PRE-seam winner, a fired gate.
    opened = [
        _first(spans, c.SPAN_DISPATCH, **{c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED}),
        _first(spans, c.SPAN_STAGE, **{c.ATTR_STAGE_NAME: "forced_choice"}),
        _first(spans, c.SPAN_SEAM_PRE_MODEL, **{c.ATTR_POLICY_WINNER: "sales_data_read"}),
        _first(spans, c.SPAN_OFFLOAD_GATE, **{c.ATTR_OFFLOAD_FIRE: True}),
    ]
    for title, query, tags in queries:
        for span in opened if tags else [None]:
            # Grafana's $__tags: label="value" for each mapped attribute the span has.
            matchers = ", ".join(
                f'{tag["value"]}="{_label_value(span.attributes[tag["key"]])}"'
                for tag in tags
                if span is not None and tag["key"] in span.attributes
            )
            expr = query.replace("$$", "$").replace("$__tags", matchers)
            expr = expr.replace("$__rate_interval", "1m")

            def answered(expr: str = expr) -> list[dict[str, Any]]:
                return single.prometheus.query(expr)

            wait_for(
                answered,
                timeout=90,
                what=f"{title!r} to return a series: {expr}",
                diagnostics=single.diagnostics,
                interval=1.0,
                alive=single.processes,
            )


# --------------------------------------------------------------------------
# 5. The dashboards' Jaeger searches.
# --------------------------------------------------------------------------


def _jaeger_searches() -> list[tuple[str, dict[str, Any], str]]:
    """(panel title, Jaeger target, service) of every Jaeger panel of the dashboards."""
    found = []
    for name in sorted(DASHBOARDS.glob("*.json")):
        model = json.loads(name.read_text(encoding="utf-8"))
        variables = {v["name"]: v for v in model["templating"]["list"]}
        service = variables["service"]["current"]["value"]
        for panel in model["panels"]:
            for target in panel.get("targets") or []:
                if target["datasource"]["type"] == "jaeger":
                    found.append((panel["title"], target, service))
    return found


def _logfmt(tags: str) -> dict[str, str]:
    """Grafana's Jaeger search tags (logfmt) as the API's JSON object."""
    return dict(pair.split("=", 1) for pair in tags.split())


def test_every_jaeger_search_panel_finds_its_traces(single: Single) -> None:
    searches = _jaeger_searches()
    assert 2 <= len(searches)
    spans = single.demo_spans
    single.wait_until_stored(kept_by_policy(spans, single.demo_statuses, SINGLE_CONFIG))
    for title, target, service in searches:
        assert "${service}" == target["service"], title
        assert DEMO_SERVICE == service, title
        tags = _logfmt(target["tags"])
        expected = {
            s.trace_id
            for s in spans
            if s.name == target["operation"]
            and all(_label_value(s.attributes.get(k)) == v for k, v in tags.items())
        }
        assert expected, f"{title}: the demo has no span it should find"
        found = single.jaeger.search(
            service, operation=target["operation"], tags=tags, limit=target["limit"]
        )
        assert expected == {trace["traceID"] for trace in found}, title
        for trace in found:
            # each result holds a span that matches the search
            assert any(
                span["operationName"] == target["operation"]
                and tags
                == {
                    tag["key"]: _label_value(tag["value"])
                    for tag in span["tags"]
                    if tag["key"] in tags
                }
                for span in trace["spans"]
            ), title


# --------------------------------------------------------------------------
# 6. Agent tier -> two gateways, by trace id.
# --------------------------------------------------------------------------

GATEWAY_HOST = "seamscope-gateways"
GATEWAY_ADDRESSES = ("127.0.0.2", "127.0.0.3")


@dataclass
class Tiers:
    agent: Collector
    gateways: list[Collector]
    jaegers: list[Jaeger]
    processes: ProcessGroup

    def diagnostics(self) -> str:
        return self.processes.diagnostics()

    def stored(self) -> list[dict[str, int]]:
        return [_stored_counts(jaeger, TIER_SERVICE) for jaeger in self.jaegers]


def _require_mount_namespace() -> list[str]:
    """argv prefix that runs a command with its own /etc/hosts (a private mount namespace).

    The agent's DNS resolver then finds both gateways under one name, as on
    Kubernetes with a headless service, without touching the machine's file.
    """
    unshare = require_executable("unshare", "apt-get install -y util-linux")
    if os.geteuid() != 0:
        message = "the two-tier test needs root for a private mount namespace (unshare --mount)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return [unshare, "--mount", "--", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"']


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiers]:
    otelcol_binary()
    jaeger_binary()
    prefix = _require_mount_namespace()
    tmp = tmp_path_factory.mktemp("collector-tiers")
    processes = ProcessGroup()
    try:
        jaegers = [start_jaeger(processes, tmp, f"jaeger-{i}") for i in (1, 2)]
        port = free_port()
        gateways = [
            collector(
                f"gateway-{i}",
                GATEWAY_CONFIG,
                tmp,
                otlp_grpc_endpoint=f"{address}:{port}",
                JAEGER_OTLP_ENDPOINT=jaeger.otlp_grpc_endpoint,
                TEMPO_OTLP_ENDPOINT=closed_port_endpoint(),
            ).start(processes)
            for i, (address, jaeger) in enumerate(zip(GATEWAY_ADDRESSES, jaegers, strict=True), 1)
        ]
        hosts = tmp / "hosts"
        hosts.write_text(
            "127.0.0.1 localhost\n"
            + "".join(f"{address} {GATEWAY_HOST}\n" for address in GATEWAY_ADDRESSES),
            encoding="utf-8",
        )
        agent = collector(
            "agent",
            AGENT_CONFIG,
            tmp,
            prefix=[*prefix, str(hosts)],
            GATEWAY_DNS_NAME=GATEWAY_HOST,
            GATEWAY_OTLP_PORT=str(port),
        ).start(processes)
        yield Tiers(agent, gateways, jaegers, processes)
    finally:
        processes.stop_all()


def test_agent_balances_whole_traces_and_loses_none_when_a_gateway_restarts(
    tiers: Tiers,
) -> None:
    # Small export batches: the spans of one trace leave the process in
    # different requests, and the agent must still route them together.
    sender = TraceSender(tiers.agent.otlp_http_url, TIER_SERVICE, batch_size=7)
    rng = random.Random(6)
    decision_wait = _decision_wait(GATEWAY_CONFIG)

    def send(count: int) -> None:
        for _ in range(count):
            kind = rng.choice([*KEPT_KINDS, PLAIN, PLAIN])
            sender.trace(kind)
        sender.flush()

    def kept_whole(trace_ids: set[str]) -> list[dict[str, int]]:
        stored = tiers.stored()
        expected = {t.trace_id: t.spans for t in sender.sent if t.trace_id in trace_ids}
        whole = all(
            sum(counts.get(trace_id, 0) for counts in stored) == spans
            for trace_id, spans in expected.items()
        )
        return stored if whole else []

    try:
        # Phase 1: both gateways up.
        send(300)
        phase_1 = {t.trace_id for t in sender.sent if t.kind != PLAIN}
        wait_for(
            lambda: kept_whole(phase_1),
            timeout=decision_wait + 90,
            what=f"the {len(phase_1)} kept traces of phase 1 to be stored",
            diagnostics=tiers.diagnostics,
            interval=1.0,
            alive=tiers.processes,
        )
        # Phase 2: gateway 2 down; the agent keeps its share queued and retries.
        stopped = tiers.gateways[1]
        stopped.stop()
        before = len(sender.sent)
        send(150)
        outage = {t.trace_id for t in sender.sent[before:] if t.kind != PLAIN}
        # Phase 3: gateway 2 back on the same address; traffic goes on.
        stopped.start(tiers.processes)
        send(100)
        kept = {t.trace_id for t in sender.sent if t.kind != PLAIN}
        stored = wait_for(
            lambda: kept_whole(kept),
            timeout=decision_wait + 150,
            what=f"all {len(kept)} kept traces to be stored after the restart",
            diagnostics=tiers.diagnostics,
            interval=1.0,
            alive=tiers.processes,
        )
        assert 0 == sender.exporter.failed
    finally:
        sender.close()

    sent = {t.trace_id: t for t in sender.sent}
    delivered = sender.exporter.delivered
    assert {i: t.spans for i, t in sent.items()} == delivered, "the agent refused spans"
    # Each trace is whole at exactly one gateway (its Jaeger); none is split.
    for trace_id, trace in sent.items():
        holders = [counts[trace_id] for counts in stored if trace_id in counts]
        if trace.kind == PLAIN and not holders:
            continue  # not sampled: the baseline decided on the whole trace
        assert [trace.spans] == holders, f"{trace.kind} trace {trace_id}: {holders}"
    # Both gateways got traces, and the stopped one received its share of the
    # traces sent while it was down once it was back.
    by_gateway = [set(counts) & kept for counts in stored]
    assert all(by_gateway), [len(g) for g in by_gateway]
    assert outage & by_gateway[1], "no trace sent during the outage reached gateway 2"
    # Nothing is lost: every span of a kept trace sent is stored.
    assert sum(sent[i].spans for i in kept) == sum(
        counts[i] for counts in stored for i in counts if i in kept
    )
