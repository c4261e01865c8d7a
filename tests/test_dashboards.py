"""The generated Grafana dashboards and the Grafana provisioning beside them.

Names are checked against :mod:`seamscope.telemetry.conventions`: every series
a query reads is a Prometheus name the exporter produces from a conventions
instrument (or a series the shipped recording rules record), every label an
attribute of that instrument, every label value a member of the attribute's
closed value set.
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = ROOT / "dashboards"
PROVISIONING = DASHBOARDS / "provisioning"
RULES = DASHBOARDS / "alerts" / "seamscope-alerts.rules.yaml"

EXPECTED_UIDS = {
    "seamscope-decisions": "seamscope-decisions.json",
    "seamscope-offload-economics": "seamscope-offload-economics.json",
}
PROMETHEUS_REF = {"type": "prometheus", "uid": "${datasource}"}
TEMPO_REF = {"type": "tempo", "uid": "${tempo}"}
JAEGER_REF = {"type": "jaeger", "uid": "${jaeger}"}
UNITS = {"ops", "percentunit", "currencyUSD", "s", "short", "none"}


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "seamscope_dashboards_generate", DASHBOARDS / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
panels = sys.modules["_panels"]  # the panel library generate.py loads from beside it


def _label(attribute: str) -> str:
    return attribute.replace(".", "_")


# Series name -> the labels the exporter puts on it.
SERIES: dict[str, set[str]] = {}
for _spec in c.METRICS:
    _labels = {_label(a) for a in _spec.attributes}
    if _spec.kind == "histogram":
        SERIES[_spec.prometheus + "_bucket"] = _labels | {"le"}
        SERIES[_spec.prometheus + "_sum"] = _labels
        SERIES[_spec.prometheus + "_count"] = _labels
    else:
        SERIES[_spec.prometheus] = _labels

# The collector's spanmetrics series (collector-config.yaml): the decision
# counts and durations per span name, with the configured dimensions.
_SPANMETRICS = yaml.safe_load((ROOT / "collector-config.yaml").read_text())["connectors"][
    "spanmetrics"
]
_SPAN_PREFIX = _label(_SPANMETRICS["namespace"])
_SPAN_LABELS = {"service_name", "span_name", "span_kind", "status_code"} | {
    _label(d["name"]) for d in _SPANMETRICS["dimensions"]
}
SERIES[_SPAN_PREFIX + "_calls_total"] = _SPAN_LABELS
for _suffix in ("_bucket", "_sum", "_count"):
    SERIES[_SPAN_PREFIX + "_duration_seconds" + _suffix] = _SPAN_LABELS | (
        {"le"} if _suffix == "_bucket" else set()
    )

_BOOLEAN = {"true", "false"}
LABEL_VALUES: dict[str, set[str]] = {
    _label(c.ATTR_SEAM): {m.value for m in c.Seam},
    _label(c.ATTR_SEAM_WINNER_SOURCE): {m.value for m in c.WinnerSource},
    _label(c.ATTR_POLICY_RESULT): {m.value for m in c.PolicyResult},
    _label(c.ATTR_DISPATCH_PALETTE_GATE): {m.value for m in c.PaletteVerdict},
    _label(c.ATTR_STAGE_OUTCOME): {m.value for m in c.StageOutcomeKind},
    _label(c.ATTR_STAGE_DEGRADED): _BOOLEAN,
    _label(c.ATTR_OFFLOAD_FIRE): _BOOLEAN,
    _label(c.ATTR_OFFLOAD_ACTIVE): _BOOLEAN,
    _label(c.ATTR_OFFLOAD_REASON_CODE): {m.value for m in c.OffloadReasonCode},
    _label(c.ATTR_OFFLOAD_OUTCOME): {m.value for m in c.OffloadOutcome},
    _label(c.ATTR_OFFLOAD_COST_KIND): {m.value for m in c.OffloadCostKind},
    _label(c.ATTR_USAGE_CACHE): {m.value for m in c.CacheUsage},
    _label(c.ATTR_DECISION_KIND): {m.value for m in c.DecisionKind},
    _label(c.ATTR_OFFLOAD_MECHANISM): {m.value for m in c.OffloadMechanism},
    _label(c.ATTR_MIDDLEWARE_DECISION): {m.value for m in c.MiddlewareDecisionKind},
}
L_MECHANISM = _label(c.ATTR_OFFLOAD_MECHANISM)
# The realized offload series, which carry the mechanism.
REALIZED = {
    spec.prometheus
    for spec in (
        c.METRIC_OFFLOAD_REALIZED_SAVINGS,
        c.METRIC_OFFLOAD_REALIZED_COSTS,
        c.METRIC_OFFLOAD_RECALLS,
        c.METRIC_OFFLOAD_SETTLED,
    )
}

PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict[str, Any]]:
    built: dict[str, dict[str, Any]] = generate.build_dashboards()
    return built


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _all_panels(dashboards: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, model in dashboards.items():
        for panel in _panels(model["panels"]):
            yield name, panel


def _prometheus_targets(
    dashboards: dict[str, dict[str, Any]],
) -> Iterator[tuple[str, dict[str, Any]]]:
    for _, panel in _all_panels(dashboards):
        for target in panel.get("targets") or []:
            if target.get("datasource", {}).get("type") == "prometheus":
                yield panel["title"], target


# --------------------------------------------------------------------------
# Generated files.
# --------------------------------------------------------------------------


def test_committed_json_equals_generated(dashboards: dict[str, dict[str, Any]]) -> None:
    assert set(EXPECTED_UIDS.values()) == set(dashboards)
    for name, model in dashboards.items():
        committed = (DASHBOARDS / name).read_text(encoding="utf-8")
        assert generate.render(model) == committed, (
            f"dashboards/{name} is stale: run python dashboards/generate.py"
        )


def test_check_mode_detects_a_stale_file(tmp_path: Path) -> None:
    assert 0 == generate.main(["--out", str(tmp_path)])
    assert 0 == generate.main(["--check", "--out", str(tmp_path)])

    edited = tmp_path / EXPECTED_UIDS["seamscope-decisions"]
    edited.write_text(edited.read_text(encoding="utf-8").replace("Seams", "Seem"))
    assert 1 == generate.main(["--check", "--out", str(tmp_path)])

    edited.unlink()
    assert 1 == generate.main(["--check", "--out", str(tmp_path)])


def test_generation_is_deterministic() -> None:
    first = {n: generate.render(m) for n, m in generate.build_dashboards().items()}
    second = {n: generate.render(m) for n, m in generate.build_dashboards().items()}
    assert first == second


def test_every_panel_is_built_from_a_row_of_data(dashboards: dict[str, dict[str, Any]]) -> None:
    for spec in generate.DASHBOARDS:
        model = dashboards[generate.DASHBOARD_FILES[spec.uid]]
        expected = []
        for row in spec.rows:
            expected.append(("row", row.title))
            for item in row.panels:
                title = "Trace ${traceId}" if isinstance(item, panels.TraceView) else item.title
                expected.append((item.__class__.__name__, title))
        kinds = {
            "row": "row",
            "timeseries": "Graph",
            "stat": "Stat",
            "table": "TraceTable",
            "traces": "TraceView",
        }
        assert expected == [(kinds[p["type"]], p["title"]) for p in _panels(model["panels"])]


# --------------------------------------------------------------------------
# Dashboard frame: uids, tags, variables.
# --------------------------------------------------------------------------


def test_uids_are_stable_and_match_file_names(dashboards: dict[str, dict[str, Any]]) -> None:
    assert EXPECTED_UIDS == {model["uid"]: name for name, model in dashboards.items()}


def test_tags(dashboards: dict[str, dict[str, Any]]) -> None:
    for model in dashboards.values():
        assert ["seamscope"] == model["tags"]


def test_datasource_variables(dashboards: dict[str, dict[str, Any]]) -> None:
    for model in dashboards.values():
        variables = {v["name"]: v for v in model["templating"]["list"]}
        for name, plugin in (
            ("datasource", "prometheus"),
            ("tempo", "tempo"),
            ("jaeger", "jaeger"),
        ):
            assert "datasource" == variables[name]["type"]
            assert plugin == variables[name]["query"]
            # defaults to the provisioned data source of that uid
            assert plugin == variables[name]["current"]["value"]


# --------------------------------------------------------------------------
# Panels and targets.
# --------------------------------------------------------------------------


def test_every_panel_has_a_grid_position_inside_the_grid(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    for name, model in dashboards.items():
        occupied: set[tuple[int, int]] = set()
        for panel in _panels(model["panels"]):
            pos = panel.get("gridPos")
            assert pos is not None, f"{name}: {panel['title']} has no gridPos"
            assert {"h", "w", "x", "y"} <= set(pos)
            assert pos["w"] > 0 and pos["h"] > 0
            assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
            cells = {
                (x, y)
                for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])
            }
            assert not cells & occupied, f"{name}: {panel['title']} overlaps another panel"
            occupied |= cells


def test_panel_ids_are_unique(dashboards: dict[str, dict[str, Any]]) -> None:
    for model in dashboards.values():
        ids = [panel["id"] for panel in _panels(model["panels"])]
        assert len(ids) == len(set(ids))


def test_every_target_has_a_unique_ref_id(dashboards: dict[str, dict[str, Any]]) -> None:
    for _, panel in _all_panels(dashboards):
        ref_ids = [target.get("refId") for target in panel.get("targets") or []]
        assert all(ref_ids), f"{panel['title']}: a target has no refId"
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_every_prometheus_panel_uses_the_datasource_variable(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    seen = 0
    for _, panel in _all_panels(dashboards):
        targets = panel.get("targets") or []
        kinds = {target["datasource"]["type"] for target in targets}
        if "prometheus" not in kinds:
            continue
        seen += 1
        assert {"prometheus"} == kinds, f"{panel['title']} mixes data sources"
        assert PROMETHEUS_REF == panel["datasource"], panel["title"]
        for target in targets:
            assert PROMETHEUS_REF == target["datasource"], panel["title"]
    assert seen > 10


def test_trace_panels_use_the_trace_datasource_variables(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    kinds_seen = set()
    for _, panel in _all_panels(dashboards):
        for target in panel.get("targets") or []:
            ref = target["datasource"]
            if ref["type"] in ("tempo", "jaeger"):
                expected = TEMPO_REF if ref["type"] == "tempo" else JAEGER_REF
                assert expected == ref and expected == panel["datasource"], panel["title"]
                kinds_seen.add(ref["type"])
    assert {"tempo", "jaeger"} == kinds_seen


def test_each_dashboard_has_a_traces_panel(dashboards: dict[str, dict[str, Any]]) -> None:
    for name, model in dashboards.items():
        traces = [p for p in _panels(model["panels"]) if p["type"] == "traces"]
        assert 1 == len(traces), name
        assert "${traceId}" == traces[0]["targets"][0]["query"]


def test_units(dashboards: dict[str, dict[str, Any]]) -> None:
    for _, panel in _all_panels(dashboards):
        if not any(t["datasource"]["type"] == "prometheus" for t in panel.get("targets") or []):
            continue
        unit = panel["fieldConfig"]["defaults"].get("unit")
        assert unit in UNITS, f"{panel['title']}: unit {unit!r}"
        title = panel["title"].lower()
        if "usd" in title:
            assert "currencyUSD" == unit, title
        elif "duration" in title:
            assert "s" == unit, title
        elif any(word in title for word in ("ratio", "share", "fire rate", " / ")):
            assert "percentunit" == unit, title


# --------------------------------------------------------------------------
# PromQL.
# --------------------------------------------------------------------------


def test_all_promql_lists_every_prometheus_query(dashboards: dict[str, dict[str, Any]]) -> None:
    expected = [(title, target["expr"]) for title, target in _prometheus_targets(dashboards)]
    assert expected == generate.all_promql()
    assert len(expected) >= 25


def test_every_rate_uses_rate_interval() -> None:
    for title, expr in generate.all_promql():
        if not re.search(r"\[", expr):
            # a recorded series carries its own window
            assert _metric_names(expr) <= set(RECORDED), f"{title}: no range selector in {expr}"
            continue
        if {panels.SLO_PERIOD} == set(re.findall(r"\[([^\]]*)\]", expr)):
            # the loss budget over the SLO period, in the rules' form for sparse counters
            functions = set(re.findall(r"\b(rate|irate|increase|\w+_over_time)\s*\(", expr))
            assert {"increase", "last_over_time"} == functions, f"{title}: {expr}"
            assert {panels.SLO_PERIOD} == set(re.findall(r"\boffset (\w+)", expr)), title
            continue
        for function in re.findall(r"\b(rate|irate|increase|\w+_over_time)\s*\(", expr):
            assert function in ("rate", "increase"), f"{title}: {function}()"
        ranges = re.findall(r"\[([^\]]*)\]", expr)
        assert ranges, f"{title}: no range selector in {expr}"
        assert {"$__rate_interval"} == set(ranges), f"{title}: {expr}"
        calls = len(re.findall(r"\b(?:rate|increase)\s*\(", expr))
        assert calls == len(ranges), f"{title}: {expr}"


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def _selectors(expr: str) -> list[tuple[str, str]]:
    """(metric, matcher text) for every ``metric{...}`` and bare ``metric[...]``."""
    found = re.findall(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}", expr)
    found += [(m, "") for m in re.findall(r"([A-Za-z_:][\w:]*)\s*\[", expr)]
    return found


def _metric_names(expr: str) -> set[str]:
    text = _strip_strings(expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        word = match.group(0)
        following = text[match.end() :].lstrip()
        if following.startswith("(") or word.lower() in PROMQL_KEYWORDS:
            continue
        names.add(word)
    return names


def _grouping_labels(expr: str) -> set[str]:
    labels: set[str] = set()
    for group in re.findall(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr
    ):
        labels |= {part.strip() for part in group.split(",") if part.strip()}
    return labels


def _recorded() -> dict[str, set[str]]:
    """The series the shipped recording rules record, with the labels each keeps."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return {
        rule["record"]: _grouping_labels(rule["expr"])
        for group in groups
        for rule in group["rules"]
        if "record" in rule
    }


RECORDED = _recorded()
SERIES.update(RECORDED)


def test_the_loss_budget_row_reads_what_the_rules_record() -> None:
    used = {name for _, expr in generate.all_promql() for name in _metric_names(expr)}
    assert panels.ERROR_BUDGET in RECORDED
    assert set(RECORDED) - used == set(), "a recorded series no panel shows"


def test_the_name_checks_catch_mistakes() -> None:
    expr = 'sum by (a_b) (rate(foo_total{x="1"}[$__rate_interval])) / on (c) bar'
    assert {"foo_total", "bar"} == _metric_names(expr)
    assert {"foo_total"} == _metric_names("foo_total unless foo_total offset 30d")
    assert {"a_b", "c"} == _grouping_labels(expr)
    assert [("foo_total", 'x="1"')] == _selectors(expr)[:1]


def test_every_metric_name_is_a_conventions_series() -> None:
    used: set[str] = set()
    for title, expr in generate.all_promql():
        names = _metric_names(expr)
        assert names, f"{title}: no metric in {expr}"
        unknown = names - set(SERIES)
        assert not unknown, f"{title}: unknown series {sorted(unknown)}"
        used |= names
    # every instrument appears on some panel, but the opt-in duration
    # histogram: the panels read the collector's spanmetrics instead
    for spec in c.METRICS:
        if spec is c.METRIC_DECISION_DURATION:
            assert not any(name.startswith(spec.prometheus) for name in used)
            continue
        assert any(name.startswith(spec.prometheus) for name in used), spec.name


def test_every_label_belongs_to_its_metric_and_every_value_to_its_value_set() -> None:
    for title, expr in generate.all_promql():
        metric_labels: set[str] = set()
        for metric, matchers in _selectors(expr):
            assert metric in SERIES, f"{title}: {metric}"
            metric_labels |= SERIES[metric]
            for name, _, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                assert name in SERIES[metric], f"{title}: {metric} has no label {name}"
                if name in LABEL_VALUES:
                    assert value in LABEL_VALUES[name], f"{title}: {name}={value!r}"
        extra = _grouping_labels(expr) - metric_labels
        assert not extra, f"{title}: labels {sorted(extra)} are on none of its series"


def _queries_of(dashboards: dict[str, dict[str, Any]], uid: str) -> list[tuple[str, str]]:
    model = dashboards[EXPECTED_UIDS[uid]]
    return [
        (panel["title"], target["expr"])
        for panel in _panels(model["panels"])
        for target in panel.get("targets") or []
        if target["datasource"]["type"] == "prometheus"
    ]


def test_offload_dashboard_shows_each_realized_series_by_mechanism(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    by_mechanism = {
        metric
        for _, expr in _queries_of(dashboards, "seamscope-offload-economics")
        if L_MECHANISM in _grouping_labels(expr)
        for metric in _metric_names(expr)
    }
    assert REALIZED <= by_mechanism
    decisions = _queries_of(dashboards, "seamscope-decisions")
    grouped = [
        _grouping_labels(expr)
        for _, expr in decisions
        if c.METRIC_MIDDLEWARE_DECISIONS.prometheus in _metric_names(expr)
    ]
    wanted = {_label(c.ATTR_MIDDLEWARE_NAME), _label(c.ATTR_MIDDLEWARE_DECISION)}
    assert [wanted] == grouped


def test_queries_against_the_prediction_read_only_the_gates_realized_series() -> None:
    """Only the gate predicts: a query that compares realized terms with the
    prediction reads only the gate's realized series."""
    gate = c.OffloadMechanism.SEAMSCOPE_GATE.value
    predicted = c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.prometheus
    checked = 0
    for title, expr in generate.all_promql():
        if predicted not in _metric_names(expr) or not _metric_names(expr) & REALIZED:
            continue
        realized = [m for m, _ in _selectors(expr) if m in REALIZED]
        gate_only = re.findall(rf'\b(\w+)\{{{L_MECHANISM}="{gate}"\}}', expr)
        assert realized and sorted(realized) == sorted(gate_only), title
        checked += 1
    assert checked


# --------------------------------------------------------------------------
# Traces: TraceQL, Jaeger searches, data links.
# --------------------------------------------------------------------------


def _trace_queries(dashboards: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(panel title, TraceQL) of Tempo targets and of Explore data links."""
    for _, panel in _all_panels(dashboards):
        for target in panel.get("targets") or []:
            if target["datasource"]["type"] == "tempo" and target["query"] != "${traceId}":
                yield panel["title"], target["query"]
        for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links") or []:
            internal = link["internal"]
            assert "tempo" == internal["datasourceUid"]
            yield panel["title"], internal["query"]["query"]


def test_traceql_uses_conventions_names(dashboards: dict[str, dict[str, Any]]) -> None:
    queries = list(_trace_queries(dashboards))
    assert len(queries) >= 10
    for title, query in queries:
        assert query.count("{") == query.count("}"), f"{title}: {query}"
        attributes = re.findall(r"\bspan\.([\w.]+)", query)
        assert attributes or "status = error" in query, f"{title}: {query}"
        for attribute in attributes:
            assert attribute in c.ATTRIBUTES, f"{title}: {attribute}"
        for name in re.findall(r'(?<![.\w])name = "([^"]+)"', query):
            assert name in c.SPANS, f"{title}: span {name}"
        for variable in re.findall(r"\$\{__field\.labels\.(\w+)\}", query):
            assert variable in {_label(a) for a in c.ATTRIBUTES}, f"{title}: {variable}"


def test_dropped_redirect_search_is_on_the_decisions_dashboard(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    model = dashboards[EXPECTED_UIDS["seamscope-decisions"]]
    tempo_queries = [
        t["query"]
        for p in _panels(model["panels"])
        for t in p.get("targets") or []
        if t["datasource"]["type"] == "tempo"
    ]
    wanted = f'span.{c.ATTR_DISPATCH_PALETTE_GATE} = "{c.PaletteVerdict.DROPPED.value}"'
    assert any(wanted in q for q in tempo_queries)


def test_jaeger_searches_use_conventions_names(dashboards: dict[str, dict[str, Any]]) -> None:
    searches = [
        target
        for _, panel in _all_panels(dashboards)
        for target in panel.get("targets") or []
        if target["datasource"]["type"] == "jaeger"
    ]
    assert 2 == len(searches)
    for search in searches:
        assert "search" == search["queryType"]
        assert "${service}" == search["service"]
        assert search["operation"] in c.SPANS
        for pair in search["tags"].split():
            key, _, value = pair.partition("=")
            assert key in c.ATTRIBUTES
            assert value


def test_metric_panels_link_to_traces(dashboards: dict[str, dict[str, Any]]) -> None:
    for name, model in dashboards.items():
        linked = [
            p
            for p in _panels(model["panels"])
            if p.get("fieldConfig", {}).get("defaults", {}).get("links")
        ]
        assert len(linked) >= 3, name
        for panel in linked:
            for link in panel["fieldConfig"]["defaults"]["links"]:
                query = link["internal"]["query"]["query"]
                # the clicked series' labels fill the query, and each is on the series
                series_labels: set[str] = set()
                for target in panel["targets"]:
                    for metric in _metric_names(target["expr"]):
                        series_labels |= SERIES[metric]
                for variable in re.findall(r"\$\{__field\.labels\.(\w+)\}", query):
                    assert variable in series_labels, f"{panel['title']}: {variable}"


# --------------------------------------------------------------------------
# Provisioning.
# --------------------------------------------------------------------------


def _datasources() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((PROVISIONING / "datasources" / "seamscope.yaml").read_text())
    return {ds["uid"]: ds for ds in data["datasources"]}


def test_provisioned_datasource_uids() -> None:
    datasources = _datasources()
    assert {"prometheus": "prometheus", "tempo": "tempo", "jaeger": "jaeger"} == {
        uid: ds["type"] for uid, ds in datasources.items()
    }
    assert datasources["prometheus"]["isDefault"] is True


def test_traces_to_metrics_maps_span_attributes_to_span_metric_labels() -> None:
    datasources = _datasources()
    for uid in ("tempo", "jaeger"):
        config = datasources[uid]["jsonData"]["tracesToMetrics"]
        assert "prometheus" == config["datasourceUid"]
        assert config["tags"]
        for tag in config["tags"]:
            assert tag["key"] in c.ATTRIBUTES
            assert _label(tag["key"]) == tag["value"]
        for query in config["queries"]:
            # Grafana expands $VAR in provisioning files: a literal $ is $$.
            assert re.search(r"(?<!\$)\$(?!\$)", query["query"].replace("$$", "")) is None
            assert "{$$__tags}" in query["query"]
            assert "[$$__rate_interval]" in query["query"]
    (exemplars,) = datasources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert {"name": "trace_id", "datasourceUid": "tempo"} == exemplars


def test_dashboard_provider_loads_a_folder() -> None:
    data = yaml.safe_load((PROVISIONING / "dashboards" / "seamscope.yaml").read_text())
    (provider,) = data["providers"]
    assert "file" == provider["type"]
    assert provider["options"]["path"].startswith("/")


def test_committed_json_is_valid_json() -> None:
    for name in EXPECTED_UIDS.values():
        json.loads((DASHBOARDS / name).read_text(encoding="utf-8"))
