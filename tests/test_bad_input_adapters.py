"""Malformed constructions of the telemetry entry points and the framework
adapters are refused at construction, naming the owner and the field.

The rows are :class:`test_bad_input.Bad`, checked the same way (exception
type exactly, a message naming both). Wrong types of telemetry options are
TypeError, values out of range ValueError; the framework adapters raise
ValueError for every configuration error, as their docstrings say. A test
checks that every parameter of these public constructors has a row.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

from seamscope.loop import DecisionLayer, ReActAgent
from seamscope.telemetry import OTelObserver, configure
from test_bad_input import NAN, Bad, layer

V, T = ValueError, TypeError


def conf(**kw: Any) -> Any:
    return configure(**{"set_global": False, "register_atexit": False, "environ": {}, **kw})


def middleware(**kw: Any) -> Any:
    from seamscope.adapters.langchain import SeamscopeMiddleware

    args = {"layer": layer(), **kw}
    return SeamscopeMiddleware(args.pop("layer"), **args)


def runner(**kw: Any) -> Any:
    from seamscope.adapters.openai_agents import SeamscopeRunner

    args = {"layer": layer(), **kw}
    return SeamscopeRunner(args.pop("layer"), **args)


def capability(**kw: Any) -> Any:
    from seamscope.adapters.pydantic_ai import SeamscopeCapability

    args = {"layer": layer(), **kw}
    return SeamscopeCapability(args.pop("layer"), **args)


def symfonic(**kw: Any) -> Any:
    from seamscope.adapters.symfonic import instrument_symfonic

    args = {"agent": object(), **kw}
    return instrument_symfonic(args.pop("agent"), **args)


def _framework_rows(owner: str, build: Callable[..., Any], prefix: str) -> list[Bad]:
    rows = [
        Bad(f"{prefix}-str-layer", lambda: build(layer="x"), V, owner, "layer"),
        Bad(f"{prefix}-str-models", lambda: build(models="gpt"), V, owner, "models"),
        Bad(f"{prefix}-int-model", lambda: build(models={"m": 5}), V, owner, "models"),
        Bad(f"{prefix}-empty-model-name", lambda: build(models={"": 5}), V, owner, "models"),
        Bad(f"{prefix}-int-role", lambda: build(role=5), V, owner, "role"),
        Bad(f"{prefix}-int-scope", lambda: build(scope=5), V, owner, "scope"),
        Bad(
            f"{prefix}-zero-stored",
            lambda: build(max_stored_outputs=0),
            V,
            owner,
            "max_stored_outputs",
        ),
        Bad(
            f"{prefix}-str-stored",
            lambda: build(max_stored_outputs="9"),
            V,
            owner,
            "max_stored_outputs",
        ),
        Bad(f"{prefix}-str-offload", lambda: build(offload="no"), V, owner, "offload"),
        Bad(
            f"{prefix}-unknown-store-url",
            lambda: build(offload_store="ftp://x"),
            V,
            owner,
            "offload_store",
        ),
        Bad(f"{prefix}-int-store", lambda: build(offload_store=7), V, owner, "offload_store"),
        Bad(f"{prefix}-none-offload", lambda: build(offload=None), V, owner, "offload"),
    ]
    return rows


class _NoProcessor:
    def on_end(self, span: Any) -> None:
        pass


TELEMETRY_REFUSED: list[Bad] = [
    # -- configure --------------------------------------------------------------------
    Bad("conf-int-service", lambda: conf(service_name=5), T, "configure", "service_name"),
    Bad(
        "conf-unknown-trace-file-mode",
        lambda: conf(trace_file_mode="x"),
        V,
        "configure",
        "trace_file_mode",
    ),
    Bad("conf-not-a-url", lambda: conf(otlp_endpoint="not a url"), V, "configure", "otlp_endpoint"),
    Bad(
        "conf-bare-host-port-http",
        lambda: conf(otlp_endpoint="127.0.0.1:4318"),
        V,
        "configure",
        "otlp_endpoint",
    ),
    Bad(
        "conf-ftp-endpoint",
        lambda: conf(otlp_endpoint="ftp://collector:4318"),
        V,
        "configure",
        "otlp_endpoint",
    ),
    Bad(
        "conf-no-host-endpoint",
        lambda: conf(otlp_endpoint="http://:4318"),
        V,
        "configure",
        "otlp_endpoint",
    ),
    Bad(
        "conf-bad-port-endpoint",
        lambda: conf(otlp_endpoint="http://collector:99999"),
        V,
        "configure",
        "otlp_endpoint",
    ),
    Bad(
        "conf-grpc-not-a-url",
        lambda: conf(otlp_endpoint="not a url", otlp_protocol="grpc"),
        V,
        "configure",
        "otlp_endpoint",
    ),
    Bad("conf-int-endpoint", lambda: conf(otlp_endpoint=4318), T, "configure", "otlp_endpoint"),
    Bad("conf-int-protocol", lambda: conf(otlp_protocol=5), T, "configure", "otlp_protocol"),
    Bad(
        "conf-json-protocol",
        lambda: conf(otlp_endpoint="http://127.0.0.1:4318", otlp_protocol="http/json"),
        V,
        "configure",
        "otlp_protocol",
    ),
    Bad("conf-str-headers", lambda: conf(otlp_headers="a=b"), T, "configure", "otlp_headers"),
    Bad("conf-int-header-key", lambda: conf(otlp_headers={1: "b"}), T, "configure", "otlp_headers"),
    Bad("conf-str-metrics", lambda: conf(otlp_metrics="yes"), T, "configure", "otlp_metrics"),
    Bad("conf-int-trace-file", lambda: conf(trace_file=5), T, "configure", "trace_file"),
    Bad("conf-blank-trace-file", lambda: conf(trace_file=" "), V, "configure", "trace_file"),
    Bad("conf-str-port", lambda: conf(prometheus_port="9464"), V, "configure", "prometheus_port"),
    Bad("conf-big-port", lambda: conf(prometheus_port=70_000), V, "configure", "prometheus_port"),
    Bad("conf-int-host", lambda: conf(prometheus_host=5), T, "configure", "prometheus_host"),
    Bad("conf-empty-host", lambda: conf(prometheus_host=""), V, "configure", "prometheus_host"),
    Bad(
        "conf-str-registry",
        lambda: conf(prometheus_registry="default"),
        T,
        "configure",
        "prometheus_registry",
    ),
    Bad(
        "conf-str-resource",
        lambda: conf(resource_attributes="a=b"),
        T,
        "configure",
        "resource_attributes",
    ),
    Bad(
        "conf-int-resource-key",
        lambda: conf(resource_attributes={1: "b"}),
        T,
        "configure",
        "resource_attributes",
    ),
    Bad(
        "conf-object-resource-value",
        lambda: conf(resource_attributes={"k": object()}),
        T,
        "configure",
        "resource_attributes",
    ),
    Bad("conf-str-sampler", lambda: conf(sampler="always_on"), T, "configure", "sampler"),
    Bad(
        "conf-str-id-generator", lambda: conf(id_generator="random"), T, "configure", "id_generator"
    ),
    Bad(
        "conf-object-processor",
        lambda: conf(extra_span_processors=[object()]),
        T,
        "configure",
        "extra_span_processors",
    ),
    Bad(
        "conf-partial-processor",
        lambda: conf(extra_span_processors=[_NoProcessor()]),
        T,
        "configure",
        "extra_span_processors",
    ),
    Bad(
        "conf-str-processors",
        lambda: conf(extra_span_processors="batch"),
        T,
        "configure",
        "extra_span_processors",
    ),
    Bad("conf-dict-config", lambda: conf(config={}), T, "configure", "config"),
    Bad("conf-str-set-global", lambda: conf(set_global="no"), T, "configure", "set_global"),
    Bad("conf-str-atexit", lambda: conf(register_atexit="no"), T, "configure", "register_atexit"),
    Bad(
        "conf-str-shutdown",
        lambda: conf(shutdown_timeout_millis="5000"),
        T,
        "configure",
        "shutdown_timeout_millis",
    ),
    Bad(
        "conf-negative-shutdown",
        lambda: conf(shutdown_timeout_millis=-1),
        V,
        "configure",
        "shutdown_timeout_millis",
    ),
    Bad(
        "conf-nan-export",
        lambda: conf(export_timeout_millis=NAN),
        V,
        "configure",
        "export_timeout_millis",
    ),
    Bad(
        "conf-str-export",
        lambda: conf(export_timeout_millis="10"),
        T,
        "configure",
        "export_timeout_millis",
    ),
    Bad(
        "conf-str-environ",
        lambda: conf(environ="OTEL_SDK_DISABLED=true"),
        T,
        "configure",
        "environ",
    ),
    # -- OTelObserver -----------------------------------------------------------------
    Bad(
        "observer-str-tracer-provider",
        lambda: OTelObserver(tracer_provider="x"),
        T,
        "OTelObserver",
        "tracer_provider",
    ),
    Bad(
        "observer-str-meter-provider",
        lambda: OTelObserver(meter_provider="x"),
        T,
        "OTelObserver",
        "meter_provider",
    ),
    Bad("observer-dict-config", lambda: OTelObserver(config={}), T, "OTelObserver", "config"),
    Bad(
        "observer-str-known-labels",
        lambda: OTelObserver(known_labels="policy"),
        T,
        "OTelObserver",
        "known_labels",
    ),
    Bad(
        "observer-str-known-values",
        lambda: OTelObserver(known_labels={"k": "ab"}),
        T,
        "OTelObserver",
        "known_labels",
    ),
    # -- DecisionLayer's providers ----------------------------------------------------
    Bad(
        "layer-str-tracer-provider",
        lambda: layer(tracer_provider="x"),
        T,
        "DecisionLayer",
        "tracer_provider",
    ),
    Bad("layer-int-policies", lambda: layer(policies=5), V, "DecisionLayer", "policies"),
    Bad("layer-int-stages", lambda: layer(stages=5), V, "DecisionLayer", "stages"),
    Bad(
        "layer-str-meter-provider",
        lambda: layer(meter_provider="x"),
        T,
        "DecisionLayer",
        "meter_provider",
    ),
    Bad("layer-int-priors", lambda: layer(offload_priors=5), V, "DecisionLayer", "offload_priors"),
    Bad(
        "layer-missing-priors-file",
        lambda: layer(offload_priors="/nonexistent/priors.toml"),
        V,
        "DecisionLayer",
        "offload_priors",
    ),
    Bad(
        "layer-str-shadow", lambda: layer(offload_shadow="x"), V, "DecisionLayer", "offload_shadow"
    ),
    # -- instrument_symfonic ----------------------------------------------------------
    Bad("sym-not-an-agent", lambda: symfonic(), T, "instrument_symfonic", "agent"),
    Bad(
        "sym-int-agent-name", lambda: symfonic(agent_name=5), T, "instrument_symfonic", "agent_name"
    ),
    Bad(
        "sym-str-telemetry", lambda: symfonic(telemetry="x"), T, "instrument_symfonic", "telemetry"
    ),
    Bad(
        "sym-str-tracer-provider",
        lambda: symfonic(tracer_provider="x"),
        T,
        "instrument_symfonic",
        "tracer_provider",
    ),
    Bad(
        "sym-str-meter-provider",
        lambda: symfonic(meter_provider="x"),
        T,
        "instrument_symfonic",
        "meter_provider",
    ),
    Bad(
        "sym-dict-telemetry-config",
        lambda: symfonic(telemetry_config={}),
        T,
        "instrument_symfonic",
        "telemetry_config",
    ),
    Bad(
        "sym-str-observer", lambda: symfonic(observer="otel"), T, "instrument_symfonic", "observer"
    ),
    Bad("sym-str-ledger", lambda: symfonic(ledger="x"), T, "instrument_symfonic", "ledger"),
    # -- the framework adapters -------------------------------------------------------
    *_framework_rows("SeamscopeMiddleware", middleware, "mw"),
    Bad(
        "mw-str-gate-evictions",
        lambda: middleware(gate_evictions="yes"),
        V,
        "SeamscopeMiddleware",
        "gate_evictions",
    ),
    *_framework_rows("SeamscopeRunner", runner, "runner"),
    *_framework_rows("SeamscopeCapability", capability, "cap"),
    Bad(
        "cap-str-genai-spans",
        lambda: capability(genai_spans="yes"),
        V,
        "SeamscopeCapability",
        "genai_spans",
    ),
]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in TELEMETRY_REFUSED])
def test_a_malformed_construction_is_refused_naming_the_owner_and_field(row: Bad) -> None:
    with pytest.raises(row.error) as raised:
        row.build()
    message = str(raised.value)
    assert (row.error, True) == (type(raised.value), bool(re.search(row.pattern, message))), message


def test_row_ids_are_unique() -> None:
    from test_bad_input import ADAPTER_REFUSED, REFUSED

    ids = [row.id for row in REFUSED + ADAPTER_REFUSED + TELEMETRY_REFUSED]
    assert [] == sorted({i for i in ids if ids.count(i) > 1})


def _constructors() -> dict[str, Callable[..., Any]]:
    from seamscope.adapters.langchain import SeamscopeMiddleware
    from seamscope.adapters.openai_agents import SeamscopeRunner
    from seamscope.adapters.pydantic_ai import SeamscopeCapability
    from seamscope.adapters.symfonic import instrument_symfonic

    return {
        "configure": configure,
        "OTelObserver": OTelObserver,
        "DecisionLayer": DecisionLayer,
        "ReActAgent": ReActAgent,
        "instrument_symfonic": instrument_symfonic,
        "SeamscopeMiddleware": SeamscopeMiddleware,
        "SeamscopeRunner": SeamscopeRunner,
        "SeamscopeCapability": SeamscopeCapability,
    }


def test_every_parameter_of_the_entry_points_has_a_row() -> None:
    from test_bad_input import ADAPTER_REFUSED

    rows = ADAPTER_REFUSED + TELEMETRY_REFUSED
    missing = {
        name: sorted(
            parameter
            for parameter in inspect.signature(build).parameters
            if not any(row.cls == name and row.field == parameter for row in rows)
        )
        for name, build in _constructors().items()
    }
    assert {name: [] for name in missing} == missing


def test_an_id_factory_answering_a_non_str_is_contained_at_run_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Accepted at construction (its answer is known only when called): a fired
    offload gets a random 16-hex id instead and a WARNING names the problem."""
    import logging

    from seamscope.decisions import OffloadGate

    gate = OffloadGate(id_factory=lambda: 123)  # type: ignore[arg-type,return-value]
    with caplog.at_level(logging.WARNING, logger="seamscope.decisions"):
        decision = gate.evaluate(20_000.0, "claude-opus-4-6")
    assert (
        True,
        True,
        ["OffloadGate.id_factory returned int, not a non-empty str; a random offload id is used"],
    ) == (
        decision.fire,
        bool(re.fullmatch(r"[0-9a-f]{16}", decision.offload_id or "")),
        [r.getMessage() for r in caplog.records if r.name == "seamscope.decisions"],
    )
