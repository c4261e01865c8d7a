"""TelemetryConfig: code, then environment, then default; bad input handled per source."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c
from seamscope.telemetry._config import default_mask

from . import _support as s

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
LENGTH = "SEAMSCOPE_MAX_ATTRIBUTE_LENGTH"
ARRAY = "SEAMSCOPE_MAX_ARRAY_LENGTH"
CAP = "SEAMSCOPE_METRIC_LABEL_CAP"

DEFAULTS = TelemetryConfig(
    capture_content=False, max_attribute_length=1024, max_array_length=128, metric_label_cap=64
)


def test_defaults() -> None:
    assert DEFAULTS == TelemetryConfig.create(environ={})
    assert default_mask is TelemetryConfig.create(environ={}).mask
    assert frozenset() == TelemetryConfig.create(environ={}).known_labels


def test_defaults_from_a_clean_process_environment() -> None:
    # the autouse fixture cleared the variables this test would otherwise see
    assert DEFAULTS == TelemetryConfig.create()


def test_environment_over_defaults() -> None:
    env = {CAPTURE: "true", LENGTH: "256", ARRAY: "16", CAP: "8"}
    assert TelemetryConfig(True, 256, 16, 8) == TelemetryConfig.create(environ=env)


def test_process_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE, "TRUE")
    monkeypatch.setenv(CAP, "5")
    assert TelemetryConfig(True, 1024, 128, 5) == TelemetryConfig.create()


def test_code_over_environment() -> None:
    env = {CAPTURE: "true", LENGTH: "256", ARRAY: "16", CAP: "8"}
    config = TelemetryConfig.create(
        capture_content=False,
        max_attribute_length=100,
        max_array_length=10,
        metric_label_cap=3,
        environ=env,
    )
    assert TelemetryConfig(False, 100, 10, 3) == config


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("True", True),
        (" 1 ", True),
        ("span_only", True),
        ("SPAN_AND_EVENT", True),
        ("false", False),
        ("no_content", False),
        ("0", False),
        ("", False),
    ],
)
def test_capture_content_environment_values(raw: str, expected: bool) -> None:
    assert expected is TelemetryConfig.create(environ={CAPTURE: raw}).capture_content


@pytest.mark.parametrize(
    ("name", "raw", "field", "default"),
    [
        (CAPTURE, "maybe", "capture_content", False),
        (LENGTH, "lots", "max_attribute_length", 1024),
        (LENGTH, "8", "max_attribute_length", 1024),
        (ARRAY, "-1", "max_array_length", 128),
        (CAP, "0", "metric_label_cap", 64),
        (CAP, "2.5", "metric_label_cap", 64),
    ],
)
def test_bad_environment_value_warns_and_falls_back(
    caplog: pytest.LogCaptureFixture, name: str, raw: str, field: str, default: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="seamscope.telemetry"):
        config = TelemetryConfig.create(environ={name: raw})
    assert default == getattr(config, field)
    assert [("seamscope.telemetry", logging.WARNING)] == [
        (r.name, r.levelno) for r in caplog.records
    ]
    message = caplog.records[0].getMessage()
    assert name in message
    assert repr(raw) in message


def test_a_bad_variable_does_not_spoil_the_others(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="seamscope.telemetry"):
        config = TelemetryConfig.create(environ={CAP: "many", LENGTH: "64"})
    assert TelemetryConfig(False, 64, 128, 64) == config


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capture_content": "yes"}, "capture_content"),
        ({"capture_content": 1}, "capture_content"),
        ({"max_attribute_length": "64"}, "max_attribute_length"),
        ({"max_attribute_length": True}, "max_attribute_length"),
        ({"max_array_length": 1.5}, "max_array_length"),
        ({"metric_label_cap": "8"}, "metric_label_cap"),
        ({"mask": "not callable"}, "mask"),
        ({"known_labels": "policy-a"}, "known_labels"),
        ({"known_labels": ["a", 1]}, "known_labels"),
    ],
)
def test_wrong_type_in_code_raises_type_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(TypeError, match=field):
        TelemetryConfig.create(environ={}, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attribute_length": 8}, "max_attribute_length"),
        ({"max_array_length": 0}, "max_array_length"),
        ({"metric_label_cap": 0}, "metric_label_cap"),
    ],
)
def test_out_of_range_in_code_raises_value_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        TelemetryConfig.create(environ={}, **kwargs)


def test_code_errors_are_raised_even_when_the_environment_is_valid() -> None:
    with pytest.raises(TypeError, match="metric_label_cap"):
        TelemetryConfig.create(metric_label_cap="8", environ={CAP: "8"})  # type: ignore[arg-type]


def test_observer_rejects_a_config_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="config"):
        OTelObserver(config={"capture_content": True})  # type: ignore[arg-type]


def test_limits_apply_to_span_attributes(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    config = TelemetryConfig.create(max_attribute_length=16, max_array_length=2)
    s.run(tracer_provider=tracer_provider, telemetry_config=config)
    spans = span_exporter.get_finished_spans()
    select = s.one(spans, c.SPAN_SELECT_TOOLS)
    assert ("run_block", "fetch_data") == select.attributes[c.ATTR_SELECTION_OFFERED]
    assert ("run_block", "fetch_data") == select.attributes[c.ATTR_SELECTION_SELECTED]
    first_stage = s.named(spans, c.SPAN_STAGE)[0]
    assert "forced 'export_…" == first_stage.attributes[c.ATTR_STAGE_REASON]
    assert 16 == len(first_stage.attributes[c.ATTR_STAGE_REASON])


def test_decision_duration_metric_is_opt_in_from_code_or_the_environment() -> None:
    duration = "SEAMSCOPE_DECISION_DURATION_METRIC"
    assert (False, True, True, False) == (
        TelemetryConfig.create(environ={}).decision_duration_metric,
        TelemetryConfig.create(environ={duration: "true"}).decision_duration_metric,
        TelemetryConfig.create(decision_duration_metric=True, environ={}).decision_duration_metric,
        TelemetryConfig.create(
            decision_duration_metric=False, environ={duration: "true"}
        ).decision_duration_metric,
    )
    for wrong in ("yes", 1):
        with pytest.raises(TypeError, match="decision_duration_metric"):
            TelemetryConfig.create(decision_duration_metric=wrong, environ={})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="decision_duration_metric"):
            TelemetryConfig(decision_duration_metric=wrong)  # type: ignore[arg-type]
