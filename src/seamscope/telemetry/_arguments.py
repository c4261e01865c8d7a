"""The argument checks of :func:`seamscope.telemetry.configure`, and of the
telemetry options every adapter entry point takes.

A wrong type is a TypeError, a value out of range a ValueError; both name
``configure`` and the argument (``configure.otlp_metrics must be a bool,
got 'yes'``), worded by the decision core's check primitives
(:mod:`seamscope.decisions._checks`), before anything is built.

The OTLP endpoint rule (README "Configuration"): for ``http/protobuf`` an
``http://`` or ``https://`` URL with a host; for ``grpc`` such a URL
(``http://`` is plaintext, ``https://`` is TLS) or a bare ``host:port``,
which the SDK's gRPC exporter reaches over TLS unless
``OTEL_EXPORTER_OTLP_INSECURE=true``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from seamscope.decisions import _checks as _c
from seamscope.decisions._observer import check_observer

__all__ = ["check_configure", "check_endpoint", "check_observer_options"]

OWNER = "configure"
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+):\d{1,5}")
_PROCESSOR_METHODS = ("on_start", "on_end", "shutdown", "force_flush")


def _type_error(field: str, expected: str, value: object) -> TypeError:
    return _type_error_of(OWNER, field, expected, value)


def _mapping_of_str(field: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _type_error(field, "a mapping with str keys or None", value)


def check_configure(arguments: Mapping[str, Any]) -> None:
    """Refuse a malformed argument of ``configure()`` (the names are its parameters)."""
    a = arguments
    _c.optional_str(OWNER, "service_name", a["service_name"], error=TypeError)
    for name in ("otlp_endpoint", "otlp_protocol"):
        if a[name] is not None and not isinstance(a[name], str):
            raise _type_error(name, "a str or None", a[name])
    _mapping_of_str("otlp_headers", a["otlp_headers"])
    _mapping_of_str("resource_attributes", a["resource_attributes"])
    for key, value in (a["resource_attributes"] or {}).items():
        if not isinstance(value, str | bool | int | float):
            raise _type_error(
                "resource_attributes", f"values of str, bool, int or float ({key!r})", value
            )
    if a["environ"] is not None and not isinstance(a["environ"], Mapping):
        raise _type_error("environ", "a mapping or None", a["environ"])
    for name in ("otlp_metrics", "set_global", "register_atexit"):
        _c.boolean(OWNER, name, a[name], error=TypeError)
    trace_file = a["trace_file"]
    if trace_file is not None and not isinstance(trace_file, str | os.PathLike):
        raise _type_error("trace_file", "a str or os.PathLike or None", trace_file)
    if isinstance(trace_file, str) and not trace_file.strip():
        raise ValueError(str(_c.fail(OWNER, "trace_file", "a non-empty path", trace_file)))
    host = a["prometheus_host"]
    if not isinstance(host, str):
        raise _type_error("prometheus_host", "a str", host)
    _c.nonempty_str(OWNER, "prometheus_host", host)
    _c.interface(OWNER, "prometheus_registry", a["prometheus_registry"], ("register",),
                 "a prometheus_client CollectorRegistry", error=TypeError)
    _c.interface(OWNER, "sampler", a["sampler"], ("should_sample",),
                 "an OpenTelemetry Sampler", error=TypeError)
    _c.interface(OWNER, "id_generator", a["id_generator"],
                 ("generate_span_id", "generate_trace_id"), "an OpenTelemetry IdGenerator",
                 error=TypeError)
    processors = a["extra_span_processors"]
    if isinstance(processors, str | bytes | Mapping) or not isinstance(processors, Iterable):
        raise _type_error("extra_span_processors", "a sequence of SpanProcessor", processors)
    for index, processor in enumerate(tuple(processors)):
        if processor is None or not all(
            callable(getattr(processor, m, None)) for m in _PROCESSOR_METHODS
        ):
            raise _type_error(
                f"extra_span_processors[{index}]",
                "a SpanProcessor (on_start, on_end, shutdown, force_flush)",
                processor,
            )
    if a["config"] is not None:
        from seamscope.telemetry._config import TelemetryConfig

        if not isinstance(a["config"], TelemetryConfig):
            raise _type_error("config", "a TelemetryConfig or None", a["config"])


def check_endpoint(endpoint: str, protocol: str) -> None:
    """ValueError naming ``configure.otlp_endpoint`` unless ``endpoint`` follows
    the rule of the module doc for ``protocol``."""
    expected = (
        "an http:// or https:// URL, or host:port (TLS) for grpc"
        if protocol == "grpc"
        else "an http:// or https:// URL with a host"
    )
    text = endpoint.strip()
    if protocol == "grpc" and "://" not in text and _HOST_PORT.fullmatch(text):
        return
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port
    except ValueError:
        port_ok = False
    if (
        not port_ok
        or text != endpoint
        or any(ch.isspace() for ch in text)
        or parts.scheme not in ("http", "https")
        or not parts.hostname
    ):
        raise ValueError(str(_c.fail(OWNER, "otlp_endpoint", expected, endpoint)))


def check_observer_options(
    owner: str,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    telemetry_config: Any = None,
    observer: Any = None,
    ledger: Any = None,
    agent_name: Any = None,
    known_labels: Any = None,
) -> None:
    """Refuse a wrong type for any telemetry option given to ``owner``
    (``DecisionLayer``, ``instrument_symfonic``, ``OTelObserver``; None is
    always accepted): TypeError naming the owner and the field, never a
    later ``AttributeError`` deep inside. The ``telemetry`` option (a
    TelemetryHandle) is checked by ``_configure.check_telemetry_options``,
    where the handle is defined, which then calls this."""
    from seamscope.decisions import OffloadLedger
    from seamscope.telemetry._config import TelemetryConfig

    _c.interface(
        owner,
        "tracer_provider",
        tracer_provider,
        ("get_tracer",),
        "a TracerProvider (an object with get_tracer)",
        error=TypeError,
    )
    _c.interface(
        owner,
        "meter_provider",
        meter_provider,
        ("get_meter",),
        "a MeterProvider (an object with get_meter)",
        error=TypeError,
    )
    if telemetry_config is not None and not isinstance(telemetry_config, TelemetryConfig):
        raise TypeError(
            str(_c.fail(owner, "telemetry_config", "a TelemetryConfig or None", telemetry_config))
        )
    try:
        check_observer(owner, observer)
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    if ledger is not None and not isinstance(ledger, OffloadLedger):
        raise TypeError(str(_c.fail(owner, "ledger", "an OffloadLedger or None", ledger)))
    _c.optional_str(owner, "agent_name", agent_name, error=TypeError)
    if known_labels is not None:
        expected = "a mapping of attribute key to an iterable of str, or None"
        if not isinstance(known_labels, Mapping):
            raise _type_error_of(owner, "known_labels", expected, known_labels)
        for key, values in known_labels.items():
            if not isinstance(key, str) or isinstance(values, str | bytes):
                raise _type_error_of(owner, "known_labels", expected, known_labels)
            try:
                _c.names(owner, "known_labels", values)
            except ValueError as exc:
                raise TypeError(str(exc)) from None


def _type_error_of(owner: str, field: str, expected: str, value: object) -> TypeError:
    return TypeError(str(_c.fail(owner, field, expected, value)))
