"""The Prometheus alert rules, their promtool unit tests and the Alertmanager example.

promtool and amtool come with the Debian packages ``prometheus`` and
``prometheus-alertmanager``; the tests that run them skip when they are
missing. The static checks (names, labels, annotations, runbook anchors,
test coverage) always run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from _promql_reader import AGGREGATIONS, PromQLUse
from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[1]
ALERTS_DIR = ROOT / "dashboards" / "alerts"
RULES = ALERTS_DIR / "seamscope-alerts.rules.yaml"
RULE_TESTS = sorted((ALERTS_DIR / "tests").glob("*.test.yaml"))
ALERTMANAGER = ROOT / "dashboards" / "alertmanager" / "alertmanager.yml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_BASE = "https://github.com/seamscope/seamscope/blob/main/docs/runbooks.md#"

TIMEOUT_S = 60
INSTALL_HINT = "apt-get install prometheus prometheus-alertmanager (CI installs it)"

EXPECTED_GROUPS = (
    "seamscope-offload-economics",
    "seamscope-decisions",
    "seamscope-offload-loss-budget",
)
EXPECTED_ALERTS = (
    "SeamscopeOffloadRealizedLoss",
    "SeamscopeOffloadPredictionDrift",
    "SeamscopeOffloadCacheHitCollapse",
    "SeamscopeRedirectsDroppedByPaletteGate",
    "SeamscopeSelectionStageDegraded",
    "SeamscopeOffloadStoreFailing",
    "SeamscopeOffloadLossBudgetFastBurn",
    "SeamscopeOffloadLossBudgetSlowBurn",
)
SEVERITIES = frozenset({"critical", "warning"})
ALERT_NAME = re.compile(r"^Seamscope(?:[A-Z][a-z0-9]*)+$")
# End-to-end tests wait for the realized-loss alert and the fast burn to fire.
MAX_FOR_S = {"SeamscopeOffloadRealizedLoss": 60, "SeamscopeOffloadLossBudgetFastBurn": 60}
# Recorded series: level:metric:operations (Prometheus's naming practice).
RECORD_NAME = re.compile(r"^[a-z][a-z_]*:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$")
# The loss budget: the recorded error budget, the recorded loss ratios per
# window, and the multiwindow burn-rate alerts (long window, short window,
# burn-rate factor), as in the SRE workbook.
ERROR_BUDGET = "seamscope:offload_settled_loss:error_budget"
LOSS_RATIO = "model_mechanism:seamscope_offload_settled_loss:ratio_{window}"
BURN_RATE_ALERTS = {
    "SeamscopeOffloadLossBudgetFastBurn": ("1h", "5m", 14.4),
    "SeamscopeOffloadLossBudgetSlowBurn": ("6h", "30m", 6.0),
}

SCRAPE_LABELS = frozenset({"job", "instance"})
# Labels the OpenTelemetry Prometheus exporter adds from the meter's scope.
SCOPE_LABELS = frozenset({"otel_scope_name", "otel_scope_version"})


# --------------------------------------------------------------------------
# What seamscope really exports, from the conventions module.
# --------------------------------------------------------------------------


def _label(attribute: str) -> str:
    return attribute.replace(".", "_")


def _series_attributes() -> dict[str, frozenset[str]]:
    """Prometheus series name -> the labels its instrument's attributes become."""
    series: dict[str, frozenset[str]] = {}
    for spec in c.METRICS:
        labels = frozenset(_label(a) for a in spec.attributes)
        if spec.kind == "histogram":
            series[spec.prometheus + "_bucket"] = labels | {"le"}
            series[spec.prometheus + "_sum"] = labels
            series[spec.prometheus + "_count"] = labels
        else:
            series[spec.prometheus] = labels
    # the collector's spanmetrics series (collector-config.yaml): decision
    # counts and durations per span name, with the configured dimensions
    connector = yaml.safe_load((ROOT / "collector-config.yaml").read_text(encoding="utf-8"))[
        "connectors"
    ]["spanmetrics"]
    prefix = _label(connector["namespace"])
    span_labels = frozenset({"service_name", "span_name", "span_kind", "status_code"}) | {
        _label(d["name"]) for d in connector["dimensions"]
    }
    series[prefix + "_calls_total"] = span_labels
    series[prefix + "_duration_seconds_bucket"] = span_labels | {"le"}
    series[prefix + "_duration_seconds_sum"] = span_labels
    series[prefix + "_duration_seconds_count"] = span_labels
    return series


SERIES = _series_attributes()
# What the recording rules record: series name -> the labels it keeps (the
# grouping labels of its expression; none for a constant).
RECORDED: dict[str, frozenset[str]] = {}
KNOWN_LABELS = frozenset(_label(a) for a in c.ATTRIBUTES) | SCRAPE_LABELS | {"le"}

_BOOLEAN = frozenset({"true", "false"})
CLOSED_VALUES: dict[str, frozenset[str]] = {
    _label(key): frozenset(member.value for member in enum)
    for key, enum in (
        (c.ATTR_SEAM, c.Seam),
        (c.ATTR_SEAM_WINNER_SOURCE, c.WinnerSource),
        (c.ATTR_POLICY_RESULT, c.PolicyResult),
        (c.ATTR_DISPATCH_PALETTE_GATE, c.PaletteVerdict),
        (c.ATTR_STAGE_OUTCOME, c.StageOutcomeKind),
        (c.ATTR_OFFLOAD_REASON_CODE, c.OffloadReasonCode),
        (c.ATTR_OFFLOAD_OUTCOME, c.OffloadOutcome),
        (c.ATTR_OFFLOAD_COST_KIND, c.OffloadCostKind),
        (c.ATTR_USAGE_CACHE, c.CacheUsage),
        (c.ATTR_DECISION_KIND, c.DecisionKind),
        (c.ATTR_OFFLOAD_MECHANISM, c.OffloadMechanism),
        (c.ATTR_MIDDLEWARE_DECISION, c.MiddlewareDecisionKind),
    )
} | {
    _label(c.ATTR_STAGE_DEGRADED): _BOOLEAN,
    _label(c.ATTR_OFFLOAD_FIRE): _BOOLEAN,
    _label(c.ATTR_OFFLOAD_ACTIVE): _BOOLEAN,
}

L_MECHANISM = _label(c.ATTR_OFFLOAD_MECHANISM)
# The realized offload series: what the rules must tell apart by mechanism.
REALIZED_SERIES = frozenset(
    spec.prometheus
    for spec in (
        c.METRIC_OFFLOAD_REALIZED_SAVINGS,
        c.METRIC_OFFLOAD_REALIZED_COSTS,
        c.METRIC_OFFLOAD_RECALLS,
        c.METRIC_OFFLOAD_SETTLED,
    )
)


def _check_promql(expr: str) -> list[str]:
    """What in ``expr`` is not something seamscope exports; empty when all is."""
    use = PromQLUse(expr)
    problems: list[str] = []
    if not use.series:
        problems.append("uses no series at all")
    labels_in_scope = set(SCRAPE_LABELS)
    for name in sorted(use.series):
        if name in RECORDED:
            labels_in_scope |= RECORDED[name]
        elif name not in SERIES:
            problems.append(f"series {name} is not exported by seamscope nor recorded by a rule")
        else:
            labels_in_scope |= SERIES[name]
    for series, label, op, value in use.matchers:
        own = RECORDED[series] if series in RECORDED else SERIES.get(series, KNOWN_LABELS)
        allowed = (own | SCRAPE_LABELS) if series else KNOWN_LABELS
        if label not in allowed:
            problems.append(f"matcher label {label} is not a label of {series or 'any series'}")
        closed = CLOSED_VALUES.get(label)
        if closed is not None and op in ("=", "!=") and value not in closed:
            problems.append(f"{label}={value!r} is not one of {sorted(closed)}")
    for label in sorted(use.grouping - labels_in_scope):
        problems.append(f"grouping label {label} is not a label of the series used")
    return problems


# --------------------------------------------------------------------------
# Loading the files.
# --------------------------------------------------------------------------


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _alerts() -> list[dict[str, Any]]:
    return [rule for group in _load(RULES)["groups"] for rule in group["rules"] if "alert" in rule]


def _records() -> list[dict[str, Any]]:
    return [rule for group in _load(RULES)["groups"] for rule in group["rules"] if "record" in rule]


def _all_rules() -> list[dict[str, Any]]:
    return [rule for group in _load(RULES)["groups"] for rule in group["rules"]]


RECORDED.update(
    {rule["record"]: frozenset(PromQLUse(rule["expr"]).grouping) for rule in _records()}
)


def _expr_labels(expr: str) -> set[str]:
    """The labels every series ``expr`` returns carries: its grouping labels and
    those of the recorded series it reads."""
    use = PromQLUse(expr)
    return set(use.grouping).union(*(RECORDED[s] for s in use.series if s in RECORDED))


def _underlying_series(expr: str) -> set[str]:
    """The exported series ``expr`` reads, through the recording rules it reads."""
    records = {rule["record"]: rule["expr"] for rule in _records()}
    seen: set[str] = set()
    todo = set(PromQLUse(expr).series)
    while todo:
        name = todo.pop()
        if name in records:
            todo |= PromQLUse(records[name]).series - seen
        else:
            seen.add(name)
    return seen


def _alert_tests() -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    for path in RULE_TESTS:
        for group in _load(path)["tests"]:
            for case in group.get("alert_rule_test", []):
                yield path, group, case


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _seconds(duration: str) -> float:
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * _UNIT_S[u] for n, u in parts)


def _duration(seconds: float) -> str:
    return f"{int(seconds)}s"


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _runbook_anchors() -> set[str]:
    anchors: set[str] = set()
    fenced = False
    for line in RUNBOOKS.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            anchors.add(_slug(m.group(1)))
    return anchors


def _runbook_queries() -> list[str]:
    """Each PromQL query in the runbooks: blocks split at comments and blank lines."""
    text = RUNBOOKS.read_text(encoding="utf-8")
    queries: list[str] = []
    for block in re.findall(r"^```promql\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        current: list[str] = []
        for line in [*block.splitlines(), ""]:
            if not line.strip() or line.lstrip().startswith("#"):
                if current:
                    queries.append("\n".join(current))
                current = []
            else:
                current.append(line)
    return queries


# --------------------------------------------------------------------------
# Running promtool and amtool.
# --------------------------------------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found: {INSTALL_HINT}")
    return path


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def promtool() -> str:
    return _tool("promtool")


@pytest.fixture(scope="module")
def amtool() -> str:
    return _tool("amtool")


def test_promtool_check_rules(promtool: str) -> None:
    result = _run(promtool, "check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_all_rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    assert RULE_TESTS, "no promtool unit tests in dashboards/alerts/tests/"
    result = _run(promtool, "test", "rules", *RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout + result.stderr


@pytest.mark.parametrize("alertname", EXPECTED_ALERTS)
def test_promtool_unit_tests_pin_the_for_boundary(
    promtool: str, alertname: str, tmp_path: Path
) -> None:
    """One more evaluation interval of ``for`` breaks that alert's tests."""
    step = max(_seconds(_load(p).get("evaluation_interval", "1m")) for p in RULE_TESTS)
    rules = _load(RULES)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alertname:
                rule["for"] = _duration(_seconds(rule["for"]) + step)
    (tmp_path / RULES.name).write_text(yaml.safe_dump(rules, sort_keys=False), encoding="utf-8")
    (tmp_path / "tests").mkdir()
    copies = []
    for path in RULE_TESTS:
        copy = tmp_path / "tests" / path.name
        shutil.copyfile(path, copy)
        copies.append(copy)

    result = _run(promtool, "test", "rules", *copies)

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"alertname: {alertname}" in result.stdout + result.stderr


def test_amtool_check_config(amtool: str) -> None:
    result = _run(amtool, "check-config", ALERTMANAGER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (
            [
                "alertname=SeamscopeOffloadRealizedLoss",
                "severity=critical",
                "gen_ai_request_model=claude-opus-4-6",
                "seamscope_offload_mechanism=context_editing",
            ],
            "seamscope-critical",
        ),
        (
            [
                "alertname=SeamscopeOffloadLossBudgetFastBurn",
                "severity=critical",
                "gen_ai_request_model=gpt-4o",
                "seamscope_offload_mechanism=seamscope_gate",
            ],
            "seamscope-critical",
        ),
        (["alertname=SeamscopeOffloadLossBudgetSlowBurn", "severity=warning"], "default"),
        (["alertname=SeamscopeOffloadPredictionDrift", "severity=warning"], "default"),
        (["alertname=SeamscopeSelectionStageDegraded", "severity=warning"], "default"),
        (["alertname=SeamscopeOffloadStoreFailing", "severity=warning"], "default"),
        (["alertname=NodeDown", "severity=critical"], "default"),
    ],
)
def test_alertmanager_routes_critical_seamscope_alerts_to_the_webhook(
    amtool: str, labels: list[str], receiver: str
) -> None:
    config = f"--config.file={ALERTMANAGER}"
    verify = f"--verify.receivers={receiver}"
    result = _run(amtool, "config", "routes", "test", config, verify, *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [receiver]


# --------------------------------------------------------------------------
# Static checks: always run.
# --------------------------------------------------------------------------


def _alert_labels(alert: dict[str, Any]) -> set[str]:
    """The labels every instance of ``alert`` carries."""
    return set(alert["labels"]) | _expr_labels(alert["expr"]) | {"alertname"}


def test_alertmanager_groups_critical_alerts_by_every_label_they_are_split_by() -> None:
    config = _load(ALERTMANAGER)
    (critical,) = [r for r in config["route"]["routes"] if 'severity="critical"' in r["matchers"]]
    for alert in _alerts():
        if alert["labels"]["severity"] == "critical":
            assert _alert_labels(alert) - {"severity"} <= set(critical["group_by"])


def test_alertmanager_inhibitions_compare_labels_both_alerts_carry() -> None:
    alerts = {a["alert"]: a for a in _alerts()}
    rules = _load(ALERTMANAGER)["inhibit_rules"]
    assert rules
    for rule in rules:
        (source,) = [m.split("=", 1)[1].strip('"') for m in rule["source_matchers"]]
        (target,) = [m.split("=", 1)[1].strip('"') for m in rule["target_matchers"]]
        equal = set(rule["equal"])
        assert equal <= _alert_labels(alerts[source]), source
        assert equal <= _alert_labels(alerts[target]), target
    loss, drift = alerts["SeamscopeOffloadRealizedLoss"], alerts["SeamscopeOffloadPredictionDrift"]
    # a losing compaction never hides the gate's drift
    assert {L_MECHANISM, _label(c.ATTR_GEN_AI_REQUEST_MODEL)} <= set(rules[0]["equal"])
    assert L_MECHANISM in PromQLUse(loss["expr"]).grouping
    assert c.OffloadMechanism.SEAMSCOPE_GATE.value == drift["labels"][L_MECHANISM]


def test_rule_groups_and_alerts_are_the_expected_ones() -> None:
    groups = _load(RULES)["groups"]
    assert [g["name"] for g in groups] == list(EXPECTED_GROUPS)
    assert sorted(a["alert"] for a in _alerts()) == sorted(EXPECTED_ALERTS)


@pytest.mark.parametrize("alert", _alerts(), ids=lambda a: a["alert"])
def test_alert_metadata(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert ALERT_NAME.match(name), f"{name} is not CamelCase with the Seamscope prefix"
    assert _seconds(alert["for"]) > 0
    assert _seconds(alert["for"]) <= MAX_FOR_S.get(name, 3600)
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert annotations["summary"].strip()
    description = annotations["description"]
    assert "$value" in description, "the description shows the alert's value"
    for label in _expr_labels(alert["expr"]):
        assert f"$labels.{label}" in description, f"the description names {label}"
    url = annotations["runbook_url"]
    assert url.startswith(RUNBOOK_BASE)
    assert url.removeprefix(RUNBOOK_BASE) == name.lower()
    assert url.removeprefix(RUNBOOK_BASE) in _runbook_anchors()


@pytest.mark.parametrize("alert", _alerts(), ids=lambda a: a["alert"])
def test_alert_expr_uses_only_exported_series_and_labels(alert: dict[str, Any]) -> None:
    assert _check_promql(alert["expr"]) == []


@pytest.mark.parametrize("query", _runbook_queries())
def test_runbook_queries_use_only_exported_series_and_labels(query: str) -> None:
    assert _check_promql(query) == []


def test_runbooks_have_a_section_per_alert_and_the_loading_section() -> None:
    anchors = _runbook_anchors()
    assert {a.lower() for a in EXPECTED_ALERTS} <= anchors
    assert "loading-the-rules" in anchors
    assert len(_runbook_queries()) >= len(EXPECTED_ALERTS)


def test_promql_reader_finds_what_an_expression_uses() -> None:
    use = PromQLUse(
        "sum by (gen_ai_request_model) (increase(seamscope_offload_realized_costs_total"
        '{seamscope_offload_cost_kind="recall", job=~"a.*"}[30m] offset 1h)) # note\n'
        "/ on (gen_ai_request_model) group_left max(foo) > 0.5"
    )
    assert use.series == {"seamscope_offload_realized_costs_total", "foo"}
    assert use.functions == {"sum", "increase", "max"}
    assert use.grouping == {"gen_ai_request_model"}
    assert use.matchers == [
        ("seamscope_offload_realized_costs_total", "seamscope_offload_cost_kind", "=", "recall"),
        ("seamscope_offload_realized_costs_total", "job", "=~", "a.*"),
    ]
    assert _check_promql(
        'sum by (nope) (seamscope_redirects_total{seamscope_dispatch_palette_gate="gone"})'
    ) == [
        "seamscope_dispatch_palette_gate='gone' is not one of ['dropped', 'kept']",
        "grouping label nope is not a label of the series used",
    ]
    assert _check_promql("rate(seamscope_redirects[5m])") == [
        "series seamscope_redirects is not exported by seamscope nor recorded by a rule",
    ]
    with pytest.raises(ValueError, match="unknown PromQL function"):
        PromQLUse("rates(seamscope_redirects_total[5m])")


def _series_labels(series: str) -> tuple[str, dict[str, str]]:
    use = PromQLUse(series)
    (name,) = use.series
    labels = {label: value for _, label, op, value in use.matchers if op == "="}
    assert len(labels) == len(use.matchers), f"{series}: input series take '=' labels only"
    return name, labels


def _input_series() -> Iterator[tuple[str, dict[str, str]]]:
    for path in RULE_TESTS:
        for group in _load(path)["tests"]:
            for item in group["input_series"]:
                yield _series_labels(item["series"])


@pytest.mark.parametrize("path", RULE_TESTS, ids=lambda p: p.name)
def test_input_series_have_the_label_sets_a_scrape_produces(path: Path) -> None:
    for group in _load(path)["tests"]:
        for item in group["input_series"]:
            name, labels = _series_labels(item["series"])
            assert name in SERIES, f"{name} is not exported by seamscope"
            keys = set(labels)
            assert keys >= SCRAPE_LABELS, f"{item['series']}: job and instance as a scrape sets"
            assert keys - SCRAPE_LABELS - SCOPE_LABELS == SERIES[name], (
                f"{item['series']}: labels must be exactly the instrument's attributes"
            )
            for key, value in labels.items():
                closed = CLOSED_VALUES.get(key)
                assert closed is None or value in closed, f"{key}={value!r}"


def test_unit_tests_cover_every_mechanism_and_cost_kind() -> None:
    """The realized costs and savings come in every mechanism, the costs in
    every cost kind."""
    every = {m.value for m in c.OffloadMechanism}
    for metric in (c.METRIC_OFFLOAD_REALIZED_COSTS, c.METRIC_OFFLOAD_REALIZED_SAVINGS):
        seen = {
            labels[L_MECHANISM] for name, labels in _input_series() if name == metric.prometheus
        }
        assert every == seen, metric.prometheus
    kinds = {
        labels[_label(c.ATTR_OFFLOAD_COST_KIND)]
        for name, labels in _input_series()
        if name == c.METRIC_OFFLOAD_REALIZED_COSTS.prometheus
    }
    assert {k.value for k in c.OffloadCostKind} == kinds


def _realized_series_used(alert: dict[str, Any]) -> set[str]:
    return _underlying_series(alert["expr"]) & REALIZED_SERIES


@pytest.mark.parametrize(
    "alert", [a for a in _alerts() if _realized_series_used(a)], ids=lambda a: a["alert"]
)
def test_realized_offload_alerts_say_which_mechanism(alert: dict[str, Any]) -> None:
    """An alert over the realized series either sums by mechanism and names it
    in its summary and description, or is about one mechanism: it selects
    that mechanism's series and carries it as a fixed label."""
    use = PromQLUse(alert["expr"])
    if L_MECHANISM in _expr_labels(alert["expr"]):
        assert f"$labels.{L_MECHANISM}" in alert["annotations"]["summary"]
        assert f"$labels.{L_MECHANISM}" in alert["annotations"]["description"]
        return
    fixed = alert["labels"].get(L_MECHANISM)
    assert fixed in CLOSED_VALUES[L_MECHANISM], f"{alert['alert']}: no mechanism"
    selected = [
        (series, op, value)
        for series, label, op, value in use.matchers
        if series in REALIZED_SERIES and label == L_MECHANISM
    ]
    # every selector of a realized series: its own mechanism
    assert len(selected) == len(
        re.findall(r"\b(?:" + "|".join(REALIZED_SERIES) + r")\b", alert["expr"])
    )
    assert {("=", fixed)} == {(op, value) for _, op, value in selected}


def test_every_alert_has_firing_and_quiet_test_cases() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for _, _, case in _alert_tests():
        (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - firing == set(), "alerts without a test case expecting them to fire"
    assert names - quiet == set(), "alerts without a test case expecting them not to fire"


def test_firing_expectations_are_complete() -> None:
    """Each expected alert spells out its labels and every annotation."""
    alerts = {a["alert"]: a for a in _alerts()}
    for path, group, case in _alert_tests():
        alert = alerts[case["alertname"]]
        grouping = _expr_labels(alert["expr"])
        for exp in case.get("exp_alerts") or []:
            where = f"{path.name}: {group['name']} at {case['eval_time']}"
            assert set(exp["exp_labels"]) == set(alert["labels"]) | grouping, where
            assert set(exp["exp_annotations"]) == set(alert["annotations"]), where


# --------------------------------------------------------------------------
# Recording rules and the loss budget.
# --------------------------------------------------------------------------

_CONSTANT = re.compile(r"^vector\(\s*(\d+(?:\.\d+)?)\s*\)$")


def _budget() -> float:
    (rule,) = [r for r in _records() if r["record"] == ERROR_BUDGET]
    match = _CONSTANT.match(rule["expr"].strip())
    assert match, f"{ERROR_BUDGET} is a constant vector(X), the one place the SLO is set"
    return float(match.group(1))


@pytest.mark.parametrize("rule", _records(), ids=lambda r: r["record"])
def test_recording_rule_names_and_expressions(rule: dict[str, Any]) -> None:
    name = rule["record"]
    assert RECORD_NAME.match(name), f"{name} is not level:metric:operations"
    assert name not in SERIES, f"{name} shadows an exported series"
    if _CONSTANT.match(rule["expr"].strip()):
        assert set() == RECORDED[name]
        return
    assert _check_promql(rule["expr"]) == []
    use = PromQLUse(rule["expr"])
    # aggregated: the recorded labels are exactly its grouping labels
    assert use.functions & AGGREGATIONS, f"{name} does not aggregate"
    assert RECORDED[name], f"{name} keeps no label"


def test_every_recorded_series_is_read_by_an_alert_after_it_is_recorded() -> None:
    """A rule group evaluates its rules in order: a recorded series an alert
    reads is recorded earlier in the same group, and none is recorded for nothing."""
    read: set[str] = set()
    for group in _load(RULES)["groups"]:
        recorded_so_far: set[str] = set()
        for rule in group["rules"]:
            used = PromQLUse(rule["expr"]).series & set(RECORDED)
            assert used <= recorded_so_far, f"{rule.get('alert') or rule['record']} reads {used}"
            read |= used
            if "record" in rule:
                recorded_so_far.add(rule["record"])
    assert set(RECORDED) == read


def test_loss_ratios_read_only_their_own_window() -> None:
    windows = {w for long, short, _ in BURN_RATE_ALERTS.values() for w in (long, short)}
    for window in sorted(windows, key=_seconds):
        name = LOSS_RATIO.format(window=window)
        (rule,) = [r for r in _records() if r["record"] == name]
        expr = rule["expr"]
        assert {window} == set(re.findall(r"\[(\w+)\]", expr)), name
        assert {window} == set(re.findall(r"\boffset (\w+)", expr)), name
        assert {c.METRIC_OFFLOAD_SETTLED.prometheus} == PromQLUse(expr).series, name
        assert {L_MECHANISM, _label(c.ATTR_GEN_AI_REQUEST_MODEL)} == RECORDED[name]
        loss = c.OffloadOutcome.LOSS.value
        outcome = (c.METRIC_OFFLOAD_SETTLED.prometheus, _label(c.ATTR_OFFLOAD_OUTCOME), "=", loss)
        assert {outcome} == set(PromQLUse(expr).matchers), name


@pytest.mark.parametrize(
    ("alertname", "windows"), sorted(BURN_RATE_ALERTS.items()), ids=lambda v: str(v)
)
def test_burn_rate_alerts_read_a_long_and_a_short_window_at_one_factor(
    alertname: str, windows: tuple[str, str, float]
) -> None:
    long, short, factor = windows
    (alert,) = [a for a in _alerts() if a["alert"] == alertname]
    expr = alert["expr"]
    expected = {LOSS_RATIO.format(window=long), LOSS_RATIO.format(window=short), ERROR_BUDGET}
    assert expected == PromQLUse(expr).series
    assert [factor, factor] == [float(x) for x in re.findall(r"\)\s*>\s*([\d.]+)", expr)]
    # both windows over the threshold
    assert 1 == len(re.findall(r"^and$", expr, re.MULTILINE))
    # the page or ticket is reachable: a 100% loss share is above factor x budget
    assert factor * _budget() < 1
    assert f"{factor:g}x" in alert["annotations"]["description"]
    assert f"{long} (and the last {short})" in alert["annotations"]["description"]


def _expr_tests() -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    for path in RULE_TESTS:
        for group in _load(path)["tests"]:
            for case in group.get("promql_expr_test", []):
                yield path, group, case


def test_promql_expr_tests_read_only_exported_or_recorded_series() -> None:
    for path, group, case in _expr_tests():
        assert _check_promql(case["expr"]) == [], f"{path.name}: {group['name']}"


def test_every_recorded_series_is_pinned_by_a_promql_expr_test() -> None:
    pinned = {name for _, _, case in _expr_tests() for name in PromQLUse(case["expr"]).series}
    assert set(RECORDED) - pinned == set()


def test_the_checker_knows_recorded_series_and_their_labels() -> None:
    ratio = LOSS_RATIO.format(window="1h")
    assert _check_promql(f'{ratio}{{seamscope_offload_mechanism="context_editing"}}') == []
    assert _check_promql(f"sum by (seamscope_offload_cost_kind) ({ratio})") == [
        "grouping label seamscope_offload_cost_kind is not a label of the series used"
    ]
    assert _check_promql(f'{ratio}{{seamscope_offload_cost_kind="recall"}}') == [
        f"matcher label seamscope_offload_cost_kind is not a label of {ratio}"
    ]
    assert _check_promql("model_mechanism:seamscope_offload_settled_loss:ratio_2h") == [
        "series model_mechanism:seamscope_offload_settled_loss:ratio_2h is not exported by "
        "seamscope nor recorded by a rule"
    ]
