"""configure(): SDK providers for an application, a Prometheus endpoint, an OTLP-JSON file."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from seamscope.decisions import NoopObserver
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c

from . import _support as s


def test_builds_sdk_providers_without_touching_globals(handles: Any) -> None:
    before = (trace.get_tracer_provider(), metrics.get_meter_provider())
    handle = handles(environ={})
    # the SDK's providers, whose flush and shutdown are the handle's bounded ones
    assert (True, True, True, OTelObserver) == (
        handle.enabled,
        isinstance(handle.tracer_provider, TracerProvider),
        isinstance(handle.meter_provider, MeterProvider),
        type(handle.observer),
    )
    assert before == (trace.get_tracer_provider(), metrics.get_meter_provider())


def test_service_name_argument_and_environment(
    handles: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = handles(service_name="checkout-agent", environ={})
    assert "checkout-agent" == named.tracer_provider.resource.attributes["service.name"]
    default = handles(environ={})
    assert "seamscope" == default.tracer_provider.resource.attributes["service.name"]
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    from_env = handles()
    assert "from-env" == from_env.tracer_provider.resource.attributes["service.name"]


def test_a_given_environment_sets_the_resource(handles: Any) -> None:
    handle = handles(
        environ={
            "OTEL_SERVICE_NAME": "from-mapping",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=staging,team=agents",
        }
    )
    attributes = handle.tracer_provider.resource.attributes
    assert ("from-mapping", "staging", "agents") == (
        attributes["service.name"],
        attributes["deployment.environment"],
        attributes["team"],
    )
    argument = handles(service_name="arg", environ={"OTEL_SERVICE_NAME": "from-mapping"})
    assert "arg" == argument.tracer_provider.resource.attributes["service.name"]


def test_config_is_passed_to_the_observer(handles: Any) -> None:
    config = TelemetryConfig.create(metric_label_cap=3)
    assert config is handles(config=config, environ={}).observer.config


@pytest.mark.parametrize("how", ["environ", "process"])
def test_sdk_disabled_gives_a_disabled_handle(
    handles: Any,
    monkeypatch: pytest.MonkeyPatch,
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    how: str,
) -> None:
    if how == "process":
        monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
        handle = handles()
    else:
        handle = handles(environ={"OTEL_SDK_DISABLED": "TRUE"}, prometheus_port=0)
    assert (False, None, None, None) == (
        handle.enabled,
        handle.tracer_provider,
        handle.meter_provider,
        handle.prometheus_address,
    )
    # the observer records nothing, and the loop decides as without telemetry
    result = s.run(observer=handle.observer)
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)
    assert True is bool(handle.flush())
    handle.shutdown()
    handle.shutdown()


def test_prometheus_endpoint_serves_seamscope_metrics(handles: Any) -> None:
    registry = CollectorRegistry()
    handle = handles(
        prometheus_port=0,
        prometheus_registry=registry,
        environ={},
        config=TelemetryConfig(decision_duration_metric=True),
    )
    host, port = handle.prometheus_address
    assert "127.0.0.1" == host
    assert port > 0
    s.run(telemetry=handle)
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        families = list(text_string_to_metric_families(response.read().decode()))
    samples = {
        (
            sample.name,
            tuple(
                sorted((k, v) for k, v in sample.labels.items() if not k.startswith("otel_scope_"))
            ),
        ): sample.value
        for family in families
        for sample in family.samples
    }
    series = {name for name, _ in samples}
    ledger_and_observer = [
        c.METRIC_POLICY_EVALUATIONS,
        c.METRIC_POLICY_WINS,
        c.METRIC_REDIRECTS,
        c.METRIC_STAGE_OUTCOMES,
        c.METRIC_OFFLOAD_DECISIONS,
        c.METRIC_OFFLOAD_PREDICTED_NET_SAVING,
        c.METRIC_MODEL_INPUT_TOKENS,
    ]
    assert [] == [spec.prometheus for spec in ledger_and_observer if spec.prometheus not in series]
    duration = c.METRIC_DECISION_DURATION.prometheus
    assert {f"{duration}_bucket", f"{duration}_sum", f"{duration}_count"} <= series
    evaluated = (
        c.METRIC_POLICY_EVALUATIONS.prometheus,
        (
            ("seamscope_policy_name", "sales_data_read"),
            ("seamscope_policy_result", "matched"),
            ("seamscope_seam_name", "pre_model"),
        ),
    )
    assert 1.0 == samples[evaluated]
    predicted = (
        c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.prometheus,
        (("gen_ai_request_model", s.HAIKU),),
    )
    assert s.PREDICTED_NET_SAVING == samples[predicted]


def test_trace_file_writes_otlp_json_lines(handles: Any, tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    handle = handles(trace_file=path, environ={})
    assert path == handle.trace_file
    s.run(telemetry=handle)
    assert True is bool(handle.flush())
    handle.shutdown()
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert lines
    assert all(set(line) == {"resourceSpans"} for line in lines)
    names = [
        span["name"]
        for line in lines
        for resource_spans in line["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    ]
    assert {c.SPAN_ITERATION: 1, c.SPAN_STAGE: 6, c.SPAN_DISPATCH: 2} == {
        name: names.count(name) for name in (c.SPAN_ITERATION, c.SPAN_STAGE, c.SPAN_DISPATCH)
    }


def _trace_ids(path: Path) -> list[str]:
    return [
        span["traceId"]
        for line in path.read_text().splitlines()
        for resource_spans in json.loads(line)["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
        if span["name"] == c.SPAN_ITERATION
    ]


def _one_run(handles: Any, path: Path, **kwargs: Any) -> None:
    handle = handles(trace_file=path, environ={}, **kwargs)
    s.run(telemetry=handle)
    handle.shutdown()


def test_trace_file_starts_afresh_per_configure_unless_appending(
    handles: Any, tmp_path: Path
) -> None:
    """Two runs of one script: the default keeps only the second run's turn;
    ``trace_file_mode="a"`` keeps both."""
    fresh, appended = tmp_path / "fresh.jsonl", tmp_path / "appended.jsonl"
    for _ in range(2):
        _one_run(handles, fresh)
        _one_run(handles, appended, trace_file_mode="a")
    assert (1, 2) == (len(_trace_ids(fresh)), len(set(_trace_ids(appended))))


@pytest.mark.parametrize("mode", ["x", "append", ""])
def test_bad_trace_file_mode_raises_naming_the_field(
    handles: Any, tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "kept.jsonl"
    path.write_text("kept\n")
    with pytest.raises(ValueError, match="configure: trace_file_mode"):
        handles(trace_file=path, trace_file_mode=mode, environ={})
    assert "kept\n" == path.read_text()


def test_extra_span_processors_and_sampler(handles: Any) -> None:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    handle = handles(extra_span_processors=(processor,), environ={})
    s.run(telemetry=handle)
    assert 14 == len([span for span in exporter.get_finished_spans() if span.name in c.SPANS])
    exporter.clear()
    unsampled = handles(extra_span_processors=(processor,), sampler=ALWAYS_OFF, environ={})
    s.run(telemetry=unsampled)
    assert () == exporter.get_finished_spans()


@pytest.mark.parametrize(
    ("kwargs", "environ"),
    [
        ({"otlp_endpoint": "http://127.0.0.1:4318", "otlp_protocol": "http/json"}, {}),
        (
            {},
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            },
        ),
    ],
)
def test_unsupported_protocol_raises_naming_the_field(
    handles: Any, kwargs: dict[str, Any], environ: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match="otlp_protocol"):
        handles(environ=environ, **kwargs)


@pytest.mark.parametrize("port", [-1, 70000, "9464", True])
def test_bad_prometheus_port_raises_naming_the_field(handles: Any, port: Any) -> None:
    with pytest.raises(ValueError, match="prometheus_port"):
        handles(prometheus_port=port, environ={})


def test_malformed_otlp_headers_raise(handles: Any) -> None:
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_HEADERS"):
        handles(
            environ={
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_EXPORTER_OTLP_HEADERS": "novalue",
            }
        )


def test_shutdown_is_idempotent_and_closes_the_endpoint(handles: Any) -> None:
    handle = handles(prometheus_port=0, prometheus_registry=CollectorRegistry(), environ={})
    host, port = handle.prometheus_address
    assert True is bool(handle.flush())
    handle.shutdown()
    handle.shutdown()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=2)
