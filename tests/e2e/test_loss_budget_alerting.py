"""The loss budget's burn-rate alerts on real settlements, real Prometheus and
real Alertmanager.

This process runs seamscope's own telemetry (``configure()`` serving the
OpenTelemetry Prometheus exporter on a loopback port), and the real offload
gate and ledger settle offloads on three models: a fired offload that is
recalled settles as a loss, one carried by a later model call as a gain.
The mix puts one model on each side of the fast burn's threshold (14.4 times
the 5% budget: a 72% loss share) and of the slow burn's (6 times: 30%):

=================  ======  =====  ==========  ==========================
model              losses  gains  burn rate   alerts
=================  ======  =====  ==========  ==========================
gpt-4o             4       1      16x         fast burn pages, slow burn
claude-haiku-4-5   3       2      12x         slow burn only
claude-opus-4-6    1       4      4x          none
=================  ======  =====  ==========  ==========================

One Prometheus scrapes this process every second and evaluates the shipped
rules; one Alertmanager, configured from the shipped example with its
webhook pointed at a receiver this module runs, routes the alerts. The
fast burn's page for gpt-4o reaches the webhook; Prometheus holds no fast
burn for the other two, and a pending slow burn for gpt-4o and
claude-haiku-4-5 (its ``for:`` is 15m: the test does not wait for it).
Everything is polled through the HTTP APIs, with bounds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from seamscope.decisions import ModelUsage, OffloadGate, OffloadLedger, PricingTable
from seamscope.decisions.records import GateCall
from seamscope.telemetry import TelemetryHandle, configure
from seamscope.telemetry import conventions as c

from ._alerting import RULES_FILE, Alerting, start_alerting
from ._promql import parse_duration
from ._support import ProcessGroup, WebhookReceiver, get_json, wait_for

FAST_BURN = "SeamscopeOffloadLossBudgetFastBurn"
SLOW_BURN = "SeamscopeOffloadLossBudgetSlowBurn"
JOB = "seamscope-agent"
GATE = c.OffloadMechanism.SEAMSCOPE_GATE.value
L_MODEL = c.ATTR_GEN_AI_REQUEST_MODEL.replace(".", "_")
L_MECHANISM = c.ATTR_OFFLOAD_MECHANISM.replace(".", "_")
LOSS, GAIN = c.OffloadOutcome.LOSS, c.OffloadOutcome.GAIN

# model -> (losses, gains) the ledger settles
MIX = {
    "gpt-4o": (4, 1),
    "claude-haiku-4-5": (3, 2),
    "claude-opus-4-6": (1, 4),
}
PAGED = {"gpt-4o"}  # above 72% losses
TICKETED = {"gpt-4o", "claude-haiku-4-5"}  # above 30%
PRICE = {"input": 1, "output": 5, "cache_read": "0.1", "cache_write": "1.25"}
PRICING = PricingTable(dict.fromkeys(MIX, PRICE), use_genai_prices=False)
OUTPUT_TOKENS = 20_000.0  # large enough for the gate to fire at these prices
TOOL = "fetch_logs"


@dataclass
class BudgetStack:
    alerting: Alerting
    webhook: WebhookReceiver
    processes: ProcessGroup
    telemetry: TelemetryHandle

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = get_json(f"{self.alerting.prometheus_url}/api/v1/query", {"query": expr})
        assert answer is not None and "success" == answer["status"], answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def alerts(self, alertname: str) -> dict[tuple[str, str], str]:
        """(model, mechanism) -> state (pending, firing) of ``alertname`` in Prometheus."""
        answer = get_json(f"{self.alerting.prometheus_url}/api/v1/alerts")
        assert answer is not None, "Prometheus did not answer"
        return {
            (alert["labels"][L_MODEL], alert["labels"][L_MECHANISM]): alert["state"]
            for alert in answer["data"]["alerts"]
            if alert["labels"]["alertname"] == alertname
        }

    def diagnostics(self) -> str:
        alerts = get_json(f"{self.alerting.prometheus_url}/api/v1/alerts")
        settled = self.query(c.METRIC_OFFLOAD_SETTLED.prometheus)
        return (
            f"Prometheus alerts: {json.dumps(alerts and alerts.get('data'))}\n"
            f"settled series: {json.dumps(settled)}\n"
            f"webhook payloads: {json.dumps(self.webhook.payloads())}"
        )


def _settle(gate: OffloadGate, ledger: OffloadLedger, model: str, n: int, loss: bool) -> Any:
    """One conversation: the gate fires on a large tool output; the model then
    recalls it (a loss) or carries the stub on one later call (a gain)."""
    conversation = f"{model}-{n}"
    decision, link = gate.evaluate_linked(
        OUTPUT_TOKENS, model, GateCall(conversation, None, TOOL, f"call_{n}")
    )
    assert decision.fire, decision
    ledger.record_offload(decision, conversation_id=conversation, link=link)
    if loss:
        ledger.record_recall(
            conversation, decision.offload_id, model=model, input_tokens=20_000, output_tokens=500
        )
    else:
        ledger.record_model_call(conversation, model=model, usage=ModelUsage(1000))
    (settlement,) = ledger.end_conversation(conversation)
    return settlement


@pytest.fixture(scope="module")
def budget_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BudgetStack]:
    tmp = tmp_path_factory.mktemp("loss-budget-e2e")
    processes = ProcessGroup()
    webhook = WebhookReceiver()
    telemetry = configure(
        service_name="seamscope-loss-budget-e2e",
        prometheus_port=0,
        prometheus_registry=CollectorRegistry(),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    try:
        assert telemetry.prometheus_address is not None
        host, port = telemetry.prometheus_address
        alerting = start_alerting(
            processes, tmp, target=f"{host}:{port}", job=JOB, webhook_url=webhook.url
        )
        ids = iter(range(1, 1000))
        gate = OffloadGate(
            pricing=PRICING, observer=telemetry.observer, id_factory=lambda: f"off-{next(ids)}"
        )
        ledger = OffloadLedger(pricing=PRICING, observer=telemetry.observer)
        outcomes = {
            model: sorted(
                _settle(gate, ledger, model, n, loss=n < losses).outcome
                for n in range(losses + gains)
            )
            for model, (losses, gains) in MIX.items()
        }
        # the ledger, not the test, decided each outcome
        assert {
            model: sorted([LOSS] * losses + [GAIN] * gains)
            for model, (losses, gains) in MIX.items()
        } == outcomes
        yield BudgetStack(alerting, webhook, processes, telemetry)
    finally:
        telemetry.shutdown()
        processes.stop_all()
        webhook.close()


def _for_s(alertname: str) -> float:
    document = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    (rule,) = [r for g in document["groups"] for r in g["rules"] if r.get("alert") == alertname]
    return parse_duration(rule["for"])


@pytest.mark.e2e
@pytest.mark.parametrize("window", ["5m", "30m", "1h", "6h"])
def test_recorded_loss_ratios_are_the_ledgers_loss_shares(
    budget_stack: BudgetStack, window: str
) -> None:
    name = f"model_mechanism:seamscope_offload_settled_loss:ratio_{window}"
    expected = {(model, GATE): losses / (losses + gains) for model, (losses, gains) in MIX.items()}

    def ratios() -> dict[tuple[str, str], float] | None:
        found = {
            (s["metric"][L_MODEL], s["metric"][L_MECHANISM]): float(s["value"][1])
            for s in budget_stack.query(name)
        }
        return found if set(found) == set(expected) else None

    found = wait_for(
        ratios,
        timeout=60,
        what=f"Prometheus to record {name} for every model",
        diagnostics=budget_stack.diagnostics,
        alive=budget_stack.processes,
    )
    assert expected == pytest.approx(found)


@pytest.mark.e2e
def test_fast_burn_pages_the_model_above_the_threshold_and_only_it(
    budget_stack: BudgetStack,
) -> None:
    def pages() -> list[tuple[dict[str, Any], dict[str, Any]]] | None:
        found = [
            (payload["body"], alert)
            for payload in budget_stack.webhook.payloads()
            for alert in payload["body"].get("alerts", [])
            if alert.get("labels", {}).get("alertname") == FAST_BURN
        ]
        return found or None

    # `for:` of the shipped rule, plus the first scrapes and some slack for slow CI
    notifications = wait_for(
        pages,
        timeout=_for_s(FAST_BURN) + 90,
        what=f"Alertmanager to send {FAST_BURN} to the webhook",
        diagnostics=budget_stack.diagnostics,
        interval=0.5,
        alive=budget_stack.processes,
    )
    context = f"\nnotifications: {json.dumps(notifications)}\n{budget_stack.diagnostics()}"
    for body, alert in notifications:
        assert {
            "alertname": FAST_BURN,
            "severity": "critical",
            L_MODEL: "gpt-4o",
            L_MECHANISM: GATE,
        } == alert["labels"], context
        assert "firing" == alert["status"], context
        assert body["receiver"] in budget_stack.alerting.webhook_receivers, context
        # 80% losses against a 5% budget
        assert "were losses 16.0 times as often" in alert["annotations"]["description"], context
        assert alert["annotations"]["runbook_url"].endswith("#" + FAST_BURN.lower()), context
    # The ratios are constant since the settlements: what Prometheus holds now
    # is what it evaluated all along. No fast burn for the others, not even pending.
    assert {(model, GATE): "firing" for model in PAGED} == budget_stack.alerts(FAST_BURN), context
    # The slow burn is pending (for: 15m) above 30% losses only.
    assert {(model, GATE): "pending" for model in TICKETED} == budget_stack.alerts(SLOW_BURN), (
        context
    )
