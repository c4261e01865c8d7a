"""A real Prometheus evaluating the shipped rules and a real Alertmanager routing
their alerts to a webhook, for the end-to-end alerting tests.

Prometheus scrapes one target every second and evaluates
dashboards/alerts/seamscope-alerts.rules.yaml as shipped. Alertmanager runs
the shipped example (dashboards/alertmanager/alertmanager.yml) with every
webhook pointed at the test's receiver and no batching.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ._support import ROOT, ProcessGroup, free_port, http_ok, require_executable, wait_for

__all__ = [
    "ALERTMANAGER_EXAMPLE",
    "RULES_FILE",
    "Alerting",
    "alertmanager_config",
    "prometheus_config",
    "start_alerting",
]

RULES_FILE = ROOT / "dashboards" / "alerts" / "seamscope-alerts.rules.yaml"
ALERTMANAGER_EXAMPLE = ROOT / "dashboards" / "alertmanager" / "alertmanager.yml"
APT_HINT = "apt-get install -y --no-install-recommends prometheus prometheus-alertmanager"


def alertmanager_config(webhook_url: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The shipped example, with every webhook sent to ``webhook_url`` and no batching.

    Returns the configuration and the names of the receivers that have a webhook.
    """
    config = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text(encoding="utf-8"))

    def hurry(route: dict[str, Any]) -> None:
        route["group_wait"] = "0s"
        route["group_interval"] = "1s"
        for child in route.get("routes") or []:
            hurry(child)

    hurry(config["route"])
    webhooks = set()
    for receiver in config.get("receivers") or []:
        for webhook in receiver.get("webhook_configs") or []:
            webhook["url"] = webhook_url
            webhooks.add(receiver["name"])
    assert webhooks, f"{ALERTMANAGER_EXAMPLE} has no webhook receiver to point at the test"
    return config, frozenset(webhooks)


def prometheus_config(target: str, alertmanager_port: int, job: str) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES_FILE)],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]
        },
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}],
    }


@dataclass(frozen=True)
class Alerting:
    prometheus_url: str
    alertmanager_url: str
    # the receivers of the example that have a webhook (now the test's)
    webhook_receivers: frozenset[str]


def start_alerting(
    processes: ProcessGroup, tmp: Path, *, target: str, job: str, webhook_url: str
) -> Alerting:
    """Start Alertmanager and Prometheus (scraping ``target`` as ``job``); wait until ready."""
    prometheus = require_executable("prometheus", APT_HINT)
    alertmanager = require_executable("prometheus-alertmanager", APT_HINT)
    prometheus_port, alertmanager_port = free_port(), free_port()
    prometheus_url = f"http://127.0.0.1:{prometheus_port}"
    alertmanager_url = f"http://127.0.0.1:{alertmanager_port}"

    am_config, webhook_receivers = alertmanager_config(webhook_url)
    (tmp / "am.yml").write_text(yaml.safe_dump(am_config), encoding="utf-8")
    processes.start(
        "alertmanager",
        [
            alertmanager,
            "--cluster.listen-address=",
            f"--web.listen-address=127.0.0.1:{alertmanager_port}",
            f"--storage.path={tmp / 'alertmanager-data'}",
            f"--config.file={tmp / 'am.yml'}",
        ],
        tmp,
    )
    (tmp / "prometheus.yml").write_text(
        yaml.safe_dump(prometheus_config(target, alertmanager_port, job)), encoding="utf-8"
    )
    processes.start(
        "prometheus",
        [
            prometheus,
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            f"--storage.tsdb.path={tmp / 'prometheus-data'}",
            f"--config.file={tmp / 'prometheus.yml'}",
        ],
        tmp,
    )
    wait_for(
        lambda: http_ok(f"{alertmanager_url}/-/ready") and http_ok(f"{prometheus_url}/-/ready"),
        timeout=60,
        what="Prometheus and Alertmanager to be ready",
        diagnostics=processes.diagnostics,
        alive=processes,
    )
    return Alerting(prometheus_url, alertmanager_url, webhook_receivers)
