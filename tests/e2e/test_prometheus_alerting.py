"""Real Prometheus and Alertmanager against a real ``seamscope demo`` run.

One demo run exposes its metrics on a loopback port for about half a minute
(``--turns``/``--pace``: four cycles of the demo's two conversations, the
reference loop's and the LangChain one, so every counter keeps increasing
across many 1 s scrapes). One Prometheus scrapes it and evaluates
the shipped alert rules; one Alertmanager, configured from the shipped
example with its webhook pointed at a receiver this module runs, routes the
alerts. Against that one setup:

* the money-losing offload on gpt-4o and the money-losing context edit on
  claude-sonnet-4-5 each fire ``SeamscopeOffloadRealizedLoss`` (one per model
  and mechanism), and the webhook receives both with the rule's labels and
  annotations;
* the same two settle as losses every time (the ledger settles each
  conversation's offload and context edit), a 100% loss share against a 5%
  budget, while claude-opus-4-6's offload gains every time: the loss budget's
  fast burn (``SeamscopeOffloadLossBudgetFastBurn``, read from the loss
  ratios the recording rules keep) pages for those two only, and the
  webhook receives both pages;
* every PromQL expression of every dashboard panel returns a series;
* every alert rule's expression returns the series the demo should make it
  fire for; a rule the demo legitimately does not trip has its threshold
  stripped and must still return a series (see ``RULE_EXPECTATIONS``).

Expressions are evaluated at one instant, just after the demo's last turn,
so the result does not depend on the order the tests run in.
"""

from __future__ import annotations

import importlib.util
import json
import math
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from seamscope.telemetry import conventions as c

from ._alerting import RULES_FILE, start_alerting
from ._promql import parse_duration, split_threshold, substitute_grafana_variables
from ._support import (
    ROOT,
    ProcessGroup,
    WebhookReceiver,
    child_env,
    free_port,
    get_json,
    read_otlp_spans,
    seamscope_demo_argv,
    wait_for,
)

DASHBOARD_GENERATOR = ROOT / "dashboards" / "generate.py"
DEMO_JOB = "seamscope-demo"

# 28 turns = four cycles of a 4-turn reference-loop conversation and a 3-turn
# LangChain one, one turn a second: every series the first cycle creates grows
# three more times while Prometheus scrapes each second, so rate() over
# RATE_INTERVAL sees real increases.
DEMO_TURNS = 28
DEMO_PACE_S = 1.0
# Far longer than the module needs; the fixture stops the demo by PID.
DEMO_LINGER_S = 600
# What `$__rate_interval` becomes: it covers the whole demo run at 1 s scrapes.
RATE_INTERVAL = "40s"
GRAFANA_VARIABLES = {"__rate_interval": RATE_INTERVAL}
# What the loss ratios' burn rate is on the demo: a 100% loss share over a 5%
# budget (the error-budget recording rule).
DEMO_BURN_RATE = 1.0 / 0.05

LOSS_ALERT = "SeamscopeOffloadRealizedLoss"
FAST_BURN_ALERT = "SeamscopeOffloadLossBudgetFastBurn"
SLOW_BURN_ALERT = "SeamscopeOffloadLossBudgetSlowBurn"
LOSING_MODEL = "gpt-4o"
PAYING_MODEL = "claude-opus-4-6"
EDITING_MODEL = "claude-sonnet-4-5"  # the LangChain agent's; its context edit loses
GATE = c.OffloadMechanism.SEAMSCOPE_GATE.value
CONTEXT_EDITING = c.OffloadMechanism.CONTEXT_EDITING.value
L_MODEL = c.ATTR_GEN_AI_REQUEST_MODEL.replace(".", "_")
L_MECHANISM = c.ATTR_OFFLOAD_MECHANISM.replace(".", "_")
L_POLICY = c.ATTR_POLICY_NAME.replace(".", "_")
LOSSES = (
    {L_MODEL: LOSING_MODEL, L_MECHANISM: GATE},
    {L_MODEL: EDITING_MODEL, L_MECHANISM: CONTEXT_EDITING},
)


# --------------------------------------------------------------------------
# What the demo must do to each shipped rule.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fires:
    """The rule's full expression returns exactly these label sets on the demo."""

    labels: tuple[dict[str, str], ...]
    why: str


@dataclass(frozen=True)
class Quiet:
    """The rule legitimately stays quiet on the demo: its full expression returns
    nothing, and without its top-level threshold it returns a series."""

    why: str


_STORE_NEVER_FAILS = (
    "the demo's in-memory offload store never fails: the counter is born at a store's "
    "first failure (tests/stores/test_store_faults.py counts it against a killed Redis)"
)

RULE_EXPECTATIONS: dict[str, Fires | Quiet] = {
    "SeamscopeOffloadRealizedLoss": Fires(
        LOSSES,
        "the gate's gpt-4o offload of the error logs is recalled twice and disrupts "
        "the prompt cache: its realized costs exceed its savings. In the LangChain "
        "conversation, ContextEditingMiddleware clears the checkout logs on "
        "claude-sonnet-4-5, one call carries the placeholder, then the model reads "
        "the logs again and the cache writes them again: a loss on context_editing. "
        "The gate's claude-opus-4-6 export pays for itself and must not appear.",
    ),
    "SeamscopeOffloadPredictionDrift": Fires(
        ({L_MODEL: LOSING_MODEL}, {L_MODEL: PAYING_MODEL}),
        "each gate offload is carried by one later model call before its conversation "
        "ends, while the gate priced a horizon of 5: gpt-4o realizes a loss, "
        "claude-opus-4-6 about a fifth of the predicted net saving, both below 50%. "
        "The rule follows the gate only: the context edit on claude-sonnet-4-5 has "
        "no prediction series and must not appear.",
    ),
    "SeamscopeOffloadCacheHitCollapse": Fires(
        ({L_MODEL: LOSING_MODEL},),
        "gpt-4o calls with the log offload live read about two thirds of their "
        "input from the prompt cache, against nearly all of it before. claude-opus-4-6 only "
        "runs with an offload live and claude-haiku-4-5 only without one, so "
        "neither has both sides of the ratio. claude-sonnet-4-5 reads about as much "
        "with the context edit live (55%) as without it (52%: its first calls write "
        "the logs), so it stays above 70% of its baseline.",
    ),
    FAST_BURN_ALERT: Fires(
        LOSSES,
        "every conversation's gpt-4o offload and claude-sonnet-4-5 context edit settles "
        "as a loss (see SeamscopeOffloadRealizedLoss): a 100% loss share over 1h and 5m, "
        "20 times the 5% budget, above 14.4. claude-opus-4-6's offloads all settle as "
        "gains: a loss share of 0, which the ratio keeps (not missing), below it.",
    ),
    SLOW_BURN_ALERT: Fires(
        LOSSES,
        "the same 100% loss shares over 6h and 30m, above 6 times the budget; the "
        "demo's run is far shorter than for: 15m, so only the expression is checked.",
    ),
    "SeamscopeRedirectsDroppedByPaletteGate": Fires(
        ({L_POLICY: "escalate_incidents"},),
        "escalate_incidents redirects create_ticket to page_oncall, which the "
        "analyst palette never routes, in every conversation.",
    ),
    "SeamscopeSelectionStageDegraded": Fires(
        ({c.ATTR_STAGE_NAME.replace(".", "_"): "intent_routing"},),
        "the intent classifier times out on the board-report turn (one turn in "
        "four): intent_routing abstains degraded on a quarter of its outcomes, "
        "far above the 5% threshold. No other stage degrades.",
    ),
    "SeamscopeOffloadStoreFailing": Quiet(_STORE_NEVER_FAILS),
}

# Rules whose stripped expression cannot return a series on today's demo.
# strict: the day the demo produces the missing data, the test says so.
STRIPPED_EMPTY: dict[str, str] = {"SeamscopeOffloadStoreFailing": _STORE_NEVER_FAILS}


# Dashboard panels that cannot show a series on today's demo, and why.
_SPANMETRICS = (
    "the collector's spanmetrics series: this setup scrapes the process, with no "
    "collector (tests/e2e/test_jaeger_collector.py checks those series)"
)
EMPTY_PANELS: dict[str, str] = {
    "Shadow disagreements by model and tool": "the demo's gate runs no shadow configuration",
    "Shadow net saving by model and tool": "the demo's gate runs no shadow configuration",
    "Decisions per second by kind": _SPANMETRICS,
    "Decision duration p50 / p95 by kind": _SPANMETRICS,
    "Offload store failures by call and error type": _STORE_NEVER_FAILS,
}


def _load_rules() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return {
        rule["alert"]: rule
        for group in document["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def _load_dashboard_queries() -> list[tuple[str, str]]:
    spec = importlib.util.spec_from_file_location("seamscope_e2e_dashboards", DASHBOARD_GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    queries: list[tuple[str, str]] = module.all_promql()
    return queries


RULES = _load_rules()
DASHBOARD_QUERIES = _load_dashboard_queries()


def _query_params(queries: list[tuple[str, str]]) -> list[Any]:
    seen: dict[str, int] = {}
    params = []
    for title, expr in queries:
        seen[title] = seen.get(title, 0) + 1
        marks = (
            [pytest.mark.xfail(strict=True, raises=AssertionError, reason=EMPTY_PANELS[title])]
            if title in EMPTY_PANELS
            else []
        )
        query_id = title if seen[title] == 1 else f"{title} #{seen[title]}"
        params.append(pytest.param(title, expr, marks=marks, id=query_id))
    return params


def _rule_params() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=[
                pytest.mark.xfail(strict=True, raises=AssertionError, reason=STRIPPED_EMPTY[name])
            ]
            if name in STRIPPED_EMPTY
            else [],
            id=name,
        )
        for name in RULES
    ]


# --------------------------------------------------------------------------
# The running setup.
# --------------------------------------------------------------------------


@dataclass
class Stack:
    prometheus_url: str
    alertmanager_url: str
    webhook: WebhookReceiver
    webhook_receivers: frozenset[str]
    processes: ProcessGroup
    eval_time: float

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate ``expr`` at :attr:`eval_time`; fail with Prometheus's error text."""
        try:
            answer = get_json(
                f"{self.prometheus_url}/api/v1/query",
                {"query": expr, "time": f"{self.eval_time:.3f}"},
            )
        except urllib.error.HTTPError as exc:
            pytest.fail(f"Prometheus rejected the query:\n{expr}\n{exc.reason}")
        assert answer is not None, f"Prometheus did not answer\n{self.diagnostics()}"
        assert "success" == answer["status"], answer
        assert "vector" == answer["data"]["resultType"], answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def diagnostics(self) -> str:
        """What Prometheus and the webhook hold (process logs come with every failure)."""
        alerts = get_json(f"{self.prometheus_url}/api/v1/alerts")
        series = get_json(
            f"{self.prometheus_url}/api/v1/label/__name__/values",
            {"match[]": '{__name__=~"seamscope_.+"}'},
        )
        return (
            f"Prometheus alerts: {json.dumps(alerts and alerts.get('data'))}\n"
            f"seamscope series in Prometheus: {series and series.get('data')}\n"
            f"webhook payloads: {json.dumps(self.webhook.payloads())}"
        )


def _demo_finished_ns(trace_file: Path) -> int | None:
    """End of the demo's last turn, once the trace file holds every turn's root span."""
    try:
        spans = read_otlp_spans(trace_file)
    except (OSError, ValueError):  # not written yet, or a line being written
        return None
    roots = [
        s
        for s in spans
        if not s.parent_span_id and s.attributes.get(c.ATTR_GEN_AI_OPERATION_NAME) == "invoke_agent"
    ]
    return max(s.end_ns for s in roots) if len(roots) >= DEMO_TURNS else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("prometheus-e2e")
    processes = ProcessGroup()
    webhook = WebhookReceiver()
    try:
        demo_port = free_port()
        alerting = start_alerting(
            processes, tmp, target=f"127.0.0.1:{demo_port}", job=DEMO_JOB, webhook_url=webhook.url
        )
        prometheus_url = alerting.prometheus_url

        trace_file = tmp / "demo-trace.jsonl"
        processes.start(
            "seamscope-demo",
            seamscope_demo_argv(
                "--turns", str(DEMO_TURNS),
                "--pace", str(DEMO_PACE_S),
                "--linger", str(DEMO_LINGER_S),
                "--metrics-port", str(demo_port),
                "--output", str(trace_file),
                "--quiet",
            ),
            tmp,
            env=child_env(),
            cwd=tmp,
        )  # fmt: skip
        finished_ns = wait_for(
            lambda: _demo_finished_ns(trace_file),
            timeout=DEMO_TURNS * DEMO_PACE_S + 60,
            what=f"the demo to finish its {DEMO_TURNS} turns",
            diagnostics=processes.diagnostics,
            interval=0.5,
            alive=processes,
        )
        # one scrape after the last turn has every increment
        eval_time = finished_ns / 1e9 + 2.0

        def scraped_after_eval_time() -> bool:
            answer = get_json(
                f"{prometheus_url}/api/v1/query", {"query": f'up{{job="{DEMO_JOB}"}}'}
            )
            result = (answer or {}).get("data", {}).get("result") or []
            return any(float(r["value"][0]) > eval_time and r["value"][1] == "1" for r in result)

        wait_for(
            scraped_after_eval_time,
            timeout=30,
            what="Prometheus to scrape the demo after its last turn",
            diagnostics=processes.diagnostics,
            alive=processes,
        )
        yield Stack(
            prometheus_url,
            alerting.alertmanager_url,
            webhook,
            alerting.webhook_receivers,
            processes,
            eval_time,
        )
    finally:
        processes.stop_all()
        webhook.close()


# --------------------------------------------------------------------------
# Tests.
# --------------------------------------------------------------------------


def test_every_rule_has_an_expectation() -> None:
    assert sorted(RULES) == sorted(RULE_EXPECTATIONS)
    assert set(EMPTY_PANELS) <= {title for title, _ in DASHBOARD_QUERIES}
    assert set(STRIPPED_EMPTY) <= {n for n, e in RULE_EXPECTATIONS.items() if isinstance(e, Quiet)}


def _losing(labels: dict[str, str]) -> tuple[str | None, str | None]:
    return labels.get(L_MODEL), labels.get(L_MECHANISM)


@pytest.mark.e2e
@pytest.mark.parametrize("alertname", [LOSS_ALERT, FAST_BURN_ALERT])
def test_losing_model_and_mechanism_pages_reach_the_webhook(stack: Stack, alertname: str) -> None:
    """One notification per losing model and mechanism: the gate's offload on
    gpt-4o and LangChain's context edit on claude-sonnet-4-5. The realized loss
    pages on the money; the fast burn on the share of settlements that lose."""
    rule = RULES[alertname]
    expected = sorted(_losing(labels) for labels in LOSSES)

    def loss_notifications() -> list[tuple[dict[str, Any], dict[str, Any]]] | None:
        found = [
            (payload["body"], alert)
            for payload in stack.webhook.payloads()
            for alert in payload["body"].get("alerts", [])
            if alert.get("labels", {}).get("alertname") == alertname
        ]
        return found if sorted({_losing(a["labels"]) for _, a in found}) == expected else None

    # `for:` of the shipped rule, plus the first scrapes and some slack for slow CI
    timeout = parse_duration(rule.get("for", "0s")) + 90
    notifications = wait_for(
        loss_notifications,
        timeout=timeout,
        what=f"Alertmanager to send {alertname} for {expected} to the webhook",
        diagnostics=stack.diagnostics,
        interval=0.5,
    )

    context = f"\nnotifications: {json.dumps(notifications, indent=1)}\n{stack.diagnostics()}"
    for body, alert in notifications:
        assert {
            "alertname": alertname,
            "severity": "critical",
            **dict(zip((L_MODEL, L_MECHANISM), _losing(alert["labels"]), strict=True)),
        } == alert["labels"], context
        assert "firing" == alert["status"], context
        assert "firing" == body["status"], context
        assert body["receiver"] in stack.webhook_receivers, context
        # grouped by model and mechanism: one losing series per notification
        assert 1 == len({_losing(a["labels"]) for a in body["alerts"]}), context
        assert sorted(rule["annotations"]) == sorted(alert["annotations"]), context
        for key, text in alert["annotations"].items():
            assert text.strip(), f"annotation {key} is empty{context}"
            assert "{{" not in text, f"annotation {key} is not rendered{context}"
        model, mechanism = _losing(alert["labels"])
        assert f"{mechanism} on {model}" in alert["annotations"]["summary"], context
        if alertname == FAST_BURN_ALERT:
            description = alert["annotations"]["description"]
            assert f"losses {DEMO_BURN_RATE:.1f} times" in description, context
        assert rule["annotations"]["runbook_url"] == alert["annotations"]["runbook_url"], context
    # no other model or mechanism is reported as losing money
    assert expected == sorted({_losing(a["labels"]) for _, a in notifications}), context


@pytest.mark.e2e
@pytest.mark.parametrize("window", ["5m", "30m", "1h", "6h"])
def test_recorded_loss_ratios_follow_the_ledgers_settlements(stack: Stack, window: str) -> None:
    """The recording rules' loss share per model and mechanism: every demo
    settlement of the gpt-4o offload and the claude-sonnet-4-5 context edit is
    a loss, every one of the claude-opus-4-6 offload a gain (0, not missing).
    The demo's series are all born inside every window."""
    name = f"model_mechanism:seamscope_offload_settled_loss:ratio_{window}"
    result = stack.query(name)
    assert {
        (LOSING_MODEL, GATE): 1.0,
        (EDITING_MODEL, CONTEXT_EDITING): 1.0,
        (PAYING_MODEL, GATE): 0.0,
    } == {_losing(sample["metric"]): float(sample["value"][1]) for sample in result}, (
        f"{result}\n{stack.diagnostics()}"
    )
    (budget,) = stack.query("seamscope:offload_settled_loss:error_budget")
    assert 1.0 / float(budget["value"][1]) == DEMO_BURN_RATE


@pytest.mark.e2e
@pytest.mark.parametrize(("title", "expr"), _query_params(DASHBOARD_QUERIES))
def test_dashboard_query_returns_a_series(stack: Stack, title: str, expr: str) -> None:
    query = substitute_grafana_variables(expr, GRAFANA_VARIABLES)
    result = stack.query(query)
    assert result, f"panel {title!r}: no series for\n{query}\n{stack.diagnostics()}"
    values = [float(sample["value"][1]) for sample in result]
    assert any(math.isfinite(v) for v in values), (
        f"panel {title!r}: only non-finite values {values} for\n{query}"
    )


@pytest.mark.e2e
@pytest.mark.parametrize("name", _rule_params())
def test_alert_rule_expression_returns_a_series(stack: Stack, name: str) -> None:
    expr = RULES[name]["expr"]
    expectation = RULE_EXPECTATIONS[name]
    result = stack.query(expr)
    labels = sorted((sample["metric"] for sample in result), key=lambda m: sorted(m.items()))
    if isinstance(expectation, Fires):
        expected = sorted(expectation.labels, key=lambda m: sorted(m.items()))
        assert expected == labels, (
            f"{name} should fire for {expected} on the demo ({expectation.why}); "
            f"its expression returned {result}\n{expr}\n{stack.diagnostics()}"
        )
        return
    assert [] == labels, (
        f"{name} was expected to stay quiet on the demo ({expectation.why}); it returned {result}"
    )
    operand, threshold = split_threshold(expr)
    stripped = stack.query(operand)
    assert stripped, (
        f"{name} without its threshold ({threshold}) returned no series\n{operand}\n"
        f"{stack.diagnostics()}"
    )
    values = [float(sample["value"][1]) for sample in stripped]
    assert any(math.isfinite(v) for v in values), f"{name}: only non-finite values {values}"
