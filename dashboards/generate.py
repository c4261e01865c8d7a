"""Generate the seamscope Grafana dashboards from code.

    python dashboards/generate.py          # write dashboards/*.json
    python dashboards/generate.py --check  # exit 1 when a committed file is stale

The dashboards are built with grafana-foundation-sdk (the Grafana 11.6 build,
``seamscope[dashboards]``). Every metric name comes from
:mod:`seamscope.telemetry.conventions` (``MetricSpec.prometheus``: the name the
OpenTelemetry Prometheus exporter really produces) and every label from an
attribute constant with dots turned into underscores, so a renamed instrument
or attribute changes the dashboards with it. Label values come from the
conventions' closed value sets; metric booleans are the strings
``"true"``/``"false"``.

Each dashboard is data, in a module of its own (``_decisions.py``,
``_offload.py``): a :class:`Dashboard` of :class:`Row` s, each row a
tuple of panel specs (:class:`Graph`, :class:`Stat`, :class:`TraceTable`,
:class:`TraceView`). One helper, :func:`build_panel`, turns a spec into its
Grafana panel and places it on the grid; :func:`build_dashboard` does that for
every row of a dashboard; both live in ``_panels.py``, the panel library.

Every Prometheus panel reads the ``datasource`` variable, every rate uses
``$__rate_interval``. The loss-budget row reads the series the shipped rules
record (dashboards/alerts/seamscope-alerts.rules.yaml: the error budget and
the loss ratios over the alert windows) and the SLO period. Trace panels
read the ``tempo`` and ``jaeger`` variables.
:func:`all_promql` lists every PromQL expression of both dashboards so that a
test can run each one against a real Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this file

from _decisions import DECISIONS
from _offload import OFFLOAD
from _panels import DASHBOARD_FILES, HERE, TAGS, build_dashboard

__all__ = [
    "DASHBOARD_FILES",
    "TAGS",
    "all_promql",
    "build_dashboards",
    "main",
    "render",
]

DASHBOARDS = (DECISIONS, OFFLOAD)

# --------------------------------------------------------------------------
# Output.
# --------------------------------------------------------------------------


def build_dashboards() -> dict[str, dict[str, Any]]:
    """Each dashboard as a JSON-ready dict, keyed by its file name."""
    built = {DASHBOARD_FILES[spec.uid]: build_dashboard(spec).build() for spec in DASHBOARDS}
    return {name: json.loads(json.dumps(model, cls=JSONEncoder)) for name, model in built.items()}


def render(model: dict[str, Any]) -> str:
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def all_promql() -> list[tuple[str, str]]:
    """(panel title, expression) for every Prometheus query of both dashboards.

    ``$__rate_interval`` is left in place: whoever runs an expression
    substitutes it.
    """
    found: list[tuple[str, str]] = []
    for model in build_dashboards().values():
        for panel in _panels(model.get("panels") or []):
            for target in panel.get("targets") or []:
                if (target.get("datasource") or {}).get("type") == "prometheus":
                    found.append((panel["title"], target["expr"]))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a committed dashboard differs from the generated one",
    )
    parser.add_argument(
        "--out", type=Path, default=HERE, help="output folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)

    stale: list[str] = []
    for name, model in build_dashboards().items():
        path = args.out / name
        text = render(model)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(
            "stale dashboards (run python dashboards/generate.py): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
