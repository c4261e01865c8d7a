"""collector-config.yaml and the two-tier variant in deploy/collector/.

No collector binary is installable here, so the configurations are checked
structurally: every component is defined and exists in the pinned
otelcol-contrib release, listeners default to loopback, and every attribute
the sampler and the span metrics read is a seamscope conventions name.
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[1]
SINGLE = ROOT / "collector-config.yaml"
GATEWAY = ROOT / "deploy" / "collector" / "gateway.yaml"
AGENT = ROOT / "deploy" / "collector" / "agent.yaml"
CONFIGS = {"single": SINGLE, "gateway": GATEWAY, "agent": AGENT}
COMPONENTS_FILE = ROOT / "tests" / "data" / "otelcol-contrib-0.136.0-components.txt"
COLLECTOR_VERSION = "0.136.0"

KINDS = {
    "receivers": "receiver",
    "processors": "processor",
    "exporters": "exporter",
    "connectors": "connector",
    "extensions": "extension",
}
ENV_REF = re.compile(r"\$\{env:(\w+)(?::-([^}]*))?\}")

SPANMETRICS_DIMENSIONS = {
    c.ATTR_STAGE_NAME,
    c.ATTR_STAGE_OUTCOME,
    c.ATTR_POLICY_WINNER,
    c.ATTR_DISPATCH_PALETTE_GATE,
    c.ATTR_OFFLOAD_REASON_CODE,
    c.ATTR_SEAM_WINNER_SOURCE,
    c.ATTR_MIDDLEWARE_NAME,
}


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _components() -> set[str]:
    lines = COMPONENTS_FILE.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _default(value: str) -> str:
    """The value a ``${env:X:-default}`` reference resolves to when X is unset."""
    match = ENV_REF.fullmatch(value)
    if match is None:
        assert "${" not in value, f"unparsed reference {value!r}"
        return value
    assert match.group(2) is not None, f"{value!r} has no default"
    return match.group(2)


def _endpoints(node: Any) -> list[str]:
    """Every ``endpoint`` value under a configuration node."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "endpoint" and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_endpoints(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_endpoints(item))
    return found


@pytest.fixture(params=sorted(CONFIGS), ids=sorted(CONFIGS))
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load(CONFIGS[request.param])


def test_component_list_is_well_formed() -> None:
    components = _components()
    assert len(components) > 200
    for line in components:
        kind, _, type_ = line.partition("/")
        assert kind in KINDS.values(), line
        assert re.fullmatch(r"[a-z0-9_]+", type_), line
    head = COMPONENTS_FILE.read_text(encoding="utf-8")[:2000]
    assert "open-telemetry/opentelemetry-collector-releases" in head
    assert "distributions/otelcol-contrib/manifest.yaml" in head
    assert f"v{COLLECTOR_VERSION}" in head


def test_configs_pin_the_collector_version() -> None:
    for path in CONFIGS.values():
        assert COLLECTOR_VERSION in path.read_text(encoding="utf-8").split("\n\n")[0], path


def test_every_component_type_is_in_the_pinned_release(config: dict[str, Any]) -> None:
    components = _components()
    for section, kind in KINDS.items():
        for component_id in config.get(section) or {}:
            type_ = component_id.split("/", 1)[0]
            assert f"{kind}/{type_}" in components, f"{kind}/{type_} is not in otelcol-contrib"


def test_every_referenced_component_is_defined(config: dict[str, Any]) -> None:
    receivers = set(config.get("receivers") or {})
    processors = set(config.get("processors") or {})
    exporters = set(config.get("exporters") or {})
    connectors = set(config.get("connectors") or {})
    extensions = set(config.get("extensions") or {})
    service = config["service"]

    assert set(service.get("extensions") or []) <= extensions
    pipelines = service["pipelines"]
    assert pipelines
    connector_in: set[str] = set()
    connector_out: set[str] = set()
    for name, pipeline in pipelines.items():
        assert name.split("/", 1)[0] in ("traces", "metrics", "logs"), name
        assert pipeline["receivers"], name
        assert pipeline["exporters"], name
        for receiver in pipeline["receivers"]:
            assert receiver in receivers | connectors, f"{name}: {receiver}"
            if receiver in connectors:
                connector_out.add(receiver)
        for processor in pipeline.get("processors") or []:
            assert processor in processors, f"{name}: {processor}"
        for exporter in pipeline["exporters"]:
            assert exporter in exporters | connectors, f"{name}: {exporter}"
            if exporter in connectors:
                connector_in.add(exporter)
    # a connector is an exporter of one pipeline and a receiver of another
    assert connector_in == connector_out == connectors


def test_memory_limiter_first_and_batch_last(config: dict[str, Any]) -> None:
    for name, pipeline in config["service"]["pipelines"].items():
        processors = pipeline.get("processors") or []
        assert "memory_limiter" == processors[0], name
        assert "batch" == processors[-1], name


def test_listeners_default_to_loopback(config: dict[str, Any]) -> None:
    listeners = _endpoints(config.get("receivers"))
    assert listeners
    listeners += _endpoints(config.get("extensions"))
    listeners += [
        spec["endpoint"]
        for exporter_id, spec in (config.get("exporters") or {}).items()
        if exporter_id.split("/")[0] == "prometheus"
    ]
    for endpoint in listeners:
        host, _, port = _default(endpoint).rpartition(":")
        assert "127.0.0.1" == host, endpoint
        assert port.isdigit(), endpoint
    for reader in config["service"].get("telemetry", {}).get("metrics", {}).get("readers", []):
        host = reader["pull"]["exporter"]["prometheus"]["host"]
        assert "127.0.0.1" == _default(host), host


def test_env_defaults_parse() -> None:
    assert "127.0.0.1:4317" == _default("${env:OTLP_GRPC_ENDPOINT:-127.0.0.1:4317}")
    assert "127.0.0.1:4317" == _default("127.0.0.1:4317")
    with pytest.raises(AssertionError):
        _default("${env:OTLP_GRPC_ENDPOINT}")


# --------------------------------------------------------------------------
# Sampling and span metrics.
# --------------------------------------------------------------------------


def _policy_attributes(policy: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(attribute keys, event names) a tail-sampling policy reads."""
    attributes: set[str] = set()
    events: set[str] = set()
    kind = policy["type"]
    body = policy.get(kind) or {}
    if "key" in body:
        attributes.add(body["key"])
    if kind == "ottl_condition":
        for condition in (body.get("span") or []) + (body.get("spanevent") or []):
            attributes |= set(re.findall(r'attributes\["([^"]+)"\]', condition))
        for condition in body.get("spanevent") or []:
            events |= set(re.findall(r'\bname == "([^"]+)"', condition))
    for nested in body.get("and_sub_policy") or body.get("sub_policy") or []:
        sub_attributes, sub_events = _policy_attributes(nested)
        attributes |= sub_attributes
        events |= sub_events
    return attributes, events


@pytest.mark.parametrize("name", ["single", "gateway"])
def test_tail_sampling_reads_conventions_names(name: str) -> None:
    config = _load(CONFIGS[name])
    policies = config["processors"]["tail_sampling"]["policies"]
    for policy in policies:
        attributes, events = _policy_attributes(policy)
        assert attributes <= set(c.ATTRIBUTES), f"{policy['name']}: {attributes}"
        assert events <= set(c.EVENTS), f"{policy['name']}: {events}"


@pytest.mark.parametrize("name", ["single", "gateway"])
def test_tail_sampling_keeps_the_interesting_traces(name: str) -> None:
    policies = _load(CONFIGS[name])["processors"]["tail_sampling"]["policies"]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for policy in policies:
        by_kind.setdefault(policy["type"], []).append(policy[policy["type"]])

    strings = {(p["key"], tuple(p["values"])) for p in by_kind["string_attribute"]}
    assert (c.ATTR_DISPATCH_PALETTE_GATE, (c.PaletteVerdict.DROPPED.value,)) in strings
    assert (c.ATTR_OFFLOAD_OUTCOME, (c.OffloadOutcome.LOSS.value,)) in strings
    assert (
        c.ATTR_MIDDLEWARE_DECISION,
        (
            c.MiddlewareDecisionKind.MODEL_FALLBACK.value,
            c.MiddlewareDecisionKind.TOOL_CALL_BLOCKED.value,
            c.MiddlewareDecisionKind.COMPACTION.value,
        ),
    ) in strings
    booleans = {(p["key"], p["value"]) for p in by_kind["boolean_attribute"]}
    assert {(c.ATTR_STAGE_DEGRADED, True), (c.ATTR_OFFLOAD_FIRE, True)} <= booleans
    assert [["ERROR"]] == [p["status_codes"] for p in by_kind["status_code"]]
    (baseline,) = by_kind["probabilistic"]
    assert 0 < baseline["sampling_percentage"] < 100


@pytest.mark.parametrize("name", ["single", "gateway"])
def test_spanmetrics_dimensions_are_the_decision_attributes(name: str) -> None:
    spanmetrics = _load(CONFIGS[name])["connectors"]["spanmetrics"]
    dimensions = [d["name"] for d in spanmetrics["dimensions"]]
    assert len(dimensions) == len(set(dimensions))
    assert set(dimensions) <= set(c.ATTRIBUTES)
    assert SPANMETRICS_DIMENSIONS == set(dimensions)


@pytest.mark.parametrize("name", ["single", "gateway"])
def test_pipelines_sample_traces_and_count_every_span(name: str) -> None:
    pipelines = _load(CONFIGS[name])["service"]["pipelines"]
    sampled = pipelines["traces"]
    processors = sampled["processors"]
    assert processors.index("tail_sampling") < processors.index("batch")
    assert {"otlp/jaeger", "otlp/tempo"} == set(sampled["exporters"])

    # span metrics read every span, not only the sampled ones
    feeding = [p for p in pipelines.values() if "spanmetrics" in p["exporters"]]
    assert feeding
    for pipeline in feeding:
        assert "tail_sampling" not in (pipeline.get("processors") or [])
        assert "otlp" in pipeline["receivers"]

    metrics = pipelines["metrics"]
    assert "spanmetrics" in metrics["receivers"]
    assert ["prometheus"] == metrics["exporters"]


def test_single_collector_also_exports_otlp_metrics() -> None:
    metrics = _load(SINGLE)["service"]["pipelines"]["metrics"]
    assert {"otlp", "spanmetrics"} == set(metrics["receivers"])


def test_trace_backends_default_to_the_compose_services() -> None:
    for name in ("single", "gateway"):
        exporters = _load(CONFIGS[name])["exporters"]
        assert "jaeger:4317" == _default(exporters["otlp/jaeger"]["endpoint"])
        assert "tempo:4317" == _default(exporters["otlp/tempo"]["endpoint"])


def test_gateway_samples_and_counts_like_the_single_collector() -> None:
    single, gateway = _load(SINGLE), _load(GATEWAY)
    assert single["processors"]["tail_sampling"] == gateway["processors"]["tail_sampling"]
    assert single["connectors"]["spanmetrics"] == gateway["connectors"]["spanmetrics"]


# --------------------------------------------------------------------------
# Agent tier.
# --------------------------------------------------------------------------


def test_agent_load_balances_traces_by_trace_id() -> None:
    agent = _load(AGENT)
    balancer = agent["exporters"]["loadbalancing"]
    assert "traceID" == balancer["routing_key"]
    resolver = balancer["resolver"]
    assert 1 == len(resolver) and next(iter(resolver)) in ("static", "dns", "k8s")
    assert "endpoint" not in (balancer["protocol"]["otlp"] or {})

    pipelines = agent["service"]["pipelines"]
    assert ["loadbalancing"] == pipelines["traces"]["exporters"]
    for name, pipeline in pipelines.items():
        # the agent never samples: the gateway decides on whole traces
        assert "tail_sampling" not in (pipeline.get("processors") or []), name
        # routing by trace id is meaningless for metrics
        if not name.startswith("traces"):
            assert "loadbalancing" not in pipeline["exporters"], name
    assert "tail_sampling" not in (agent.get("processors") or {})


def test_gateway_receives_from_agents() -> None:
    gateway = _load(GATEWAY)
    assert "grpc" in gateway["receivers"]["otlp"]["protocols"]
    assert "loadbalancing" not in (gateway.get("exporters") or {})


def test_collector_readme_explains_the_tiers() -> None:
    text = (ROOT / "deploy" / "collector" / "README.md").read_text(encoding="utf-8")
    for word in ("tail_sampling", "loadbalancing", "traceID", "whole traces"):
        assert word in text
