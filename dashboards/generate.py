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

Each dashboard is data: a :class:`Dashboard` of :class:`Row` s, each row a
tuple of panel specs (:class:`Graph`, :class:`Stat`, :class:`TraceTable`,
:class:`TraceView`). One helper, :func:`build_panel`, turns a spec into its
Grafana panel and places it on the grid; :func:`build_dashboard` does that for
every row of a dashboard.

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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, table, tempo, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dashboard_models
from grafana_foundation_sdk.models import prometheus as prometheus_models
from grafana_foundation_sdk.models import tempo as tempo_models

from seamscope.telemetry import conventions as c

__all__ = [
    "DASHBOARD_FILES",
    "TAGS",
    "all_promql",
    "build_dashboards",
    "main",
    "render",
]

HERE = Path(__file__).resolve().parent
TAGS = ["seamscope"]
DECISIONS_UID = "seamscope-decisions"
OFFLOAD_UID = "seamscope-offload-economics"
DASHBOARD_FILES = {
    DECISIONS_UID: "seamscope-decisions.json",
    OFFLOAD_UID: "seamscope-offload-economics.json",
}

RATE_INTERVAL = "$__rate_interval"
# Provisioned data source uids (dashboards/provisioning/datasources/seamscope.yaml).
PROMETHEUS_UID = "prometheus"
TEMPO_UID = "tempo"
JAEGER_UID = "jaeger"

PROMETHEUS_DS = dashboard_models.DataSourceRef(type_val="prometheus", uid="${datasource}")
TEMPO_DS = dashboard_models.DataSourceRef(type_val="tempo", uid="${tempo}")
JAEGER_DS = dashboard_models.DataSourceRef(type_val="jaeger", uid="${jaeger}")

TRUE = "true"  # metric booleans are strings
# Default of the `service` variable (Jaeger search needs a service.name).
JAEGER_SERVICE = "seamscope-demo"
TRACE_LIMIT = 20


# --------------------------------------------------------------------------
# Names: labels from attribute constants, series from metric specs.
# --------------------------------------------------------------------------


def label(attribute: str) -> str:
    """The Prometheus label the exporter makes of an attribute key."""
    return attribute.replace(".", "_")


L_SEAM = label(c.ATTR_SEAM)
L_WINNER_SOURCE = label(c.ATTR_SEAM_WINNER_SOURCE)
L_POLICY = label(c.ATTR_POLICY_NAME)
L_POLICY_RESULT = label(c.ATTR_POLICY_RESULT)
L_PALETTE_GATE = label(c.ATTR_DISPATCH_PALETTE_GATE)
L_STAGE = label(c.ATTR_STAGE_NAME)
L_SELECTION_SET = label(c.ATTR_SELECTION_SET)
L_STAGE_OUTCOME = label(c.ATTR_STAGE_OUTCOME)
L_STAGE_DEGRADED = label(c.ATTR_STAGE_DEGRADED)
L_MODEL = label(c.ATTR_GEN_AI_REQUEST_MODEL)
L_FIRE = label(c.ATTR_OFFLOAD_FIRE)
L_REASON_CODE = label(c.ATTR_OFFLOAD_REASON_CODE)
L_COST_KIND = label(c.ATTR_OFFLOAD_COST_KIND)
L_OUTCOME = label(c.ATTR_OFFLOAD_OUTCOME)
L_CACHE = label(c.ATTR_USAGE_CACHE)
L_OFFLOAD_ACTIVE = label(c.ATTR_OFFLOAD_ACTIVE)
L_MECHANISM = label(c.ATTR_OFFLOAD_MECHANISM)
L_MIDDLEWARE = label(c.ATTR_MIDDLEWARE_NAME)
L_MIDDLEWARE_DECISION = label(c.ATTR_MIDDLEWARE_DECISION)
L_TOOL = label(c.ATTR_GEN_AI_TOOL_NAME)
L_SHADOW_BASIS = label(c.ATTR_OFFLOAD_SHADOW_BASIS)
L_STORE_OPERATION = label(c.ATTR_OFFLOAD_STORE_OPERATION)
L_ERROR_TYPE = label(c.ATTR_ERROR_TYPE)

POLICY_EVALUATIONS = c.METRIC_POLICY_EVALUATIONS.prometheus
POLICY_WINS = c.METRIC_POLICY_WINS.prometheus
REDIRECTS = c.METRIC_REDIRECTS.prometheus
STAGE_OUTCOMES = c.METRIC_STAGE_OUTCOMES.prometheus
SELECTION_TOOLS = c.METRIC_SELECTION_TOOLS.prometheus
OFFLOAD_DECISIONS = c.METRIC_OFFLOAD_DECISIONS.prometheus
PREDICTED_NET_SAVING = c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.prometheus
REALIZED_SAVINGS = c.METRIC_OFFLOAD_REALIZED_SAVINGS.prometheus
REALIZED_COSTS = c.METRIC_OFFLOAD_REALIZED_COSTS.prometheus
RECALLS = c.METRIC_OFFLOAD_RECALLS.prometheus
SETTLED = c.METRIC_OFFLOAD_SETTLED.prometheus
SHADOW_DISAGREEMENTS = c.METRIC_OFFLOAD_SHADOW_DISAGREEMENTS.prometheus
STORE_ERRORS = c.METRIC_OFFLOAD_STORE_ERRORS.prometheus
SHADOW_SAVINGS = c.METRIC_OFFLOAD_SHADOW_SAVINGS.prometheus
SHADOW_COSTS = c.METRIC_OFFLOAD_SHADOW_COSTS.prometheus
REMAINING_TURNS = c.METRIC_OFFLOAD_REMAINING_TURNS.prometheus
RECALLED_OFFLOADS = c.METRIC_OFFLOAD_RECALLED_OFFLOADS.prometheus
SETTLED_RECALLS = c.METRIC_OFFLOAD_SETTLED_RECALLS.prometheus
CARRIED_TURNS = c.METRIC_OFFLOAD_CARRIED_TURNS.prometheus
PRIOR_RECALL_PROBABILITY = c.METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY.prometheus
INPUT_TOKENS = c.METRIC_MODEL_INPUT_TOKENS.prometheus
MIDDLEWARE_DECISIONS = c.METRIC_MIDDLEWARE_DECISIONS.prometheus
MIDDLEWARE_COST = c.METRIC_MIDDLEWARE_COST.prometheus
# Decision counts and durations come from the collector's spanmetrics connector
# (collector-config.yaml, namespace traces.span.metrics), per span name: the
# process records seamscope.decision.duration only when asked to
# (TelemetryConfig.decision_duration_metric).
SPAN_CALLS = "traces_span_metrics_calls_total"
SPAN_DURATION_BUCKET = "traces_span_metrics_duration_seconds_bucket"
SPAN_DURATION_SUM = "traces_span_metrics_duration_seconds_sum"
SPAN_DURATION_COUNT = "traces_span_metrics_duration_seconds_count"
L_SPAN_NAME = "span_name"
DECISION_SPANS = (
    c.SPAN_SELECT_TOOLS,
    c.SPAN_SEAM_PRE_MODEL,
    c.SPAN_SEAM_POST_MODEL,
    c.SPAN_OFFLOAD_GATE,
)


def decision_spans(metric: str) -> str:
    """``metric`` restricted to the decision spans (one per decision kind)."""
    return f'{metric}{{{L_SPAN_NAME}=~"{"|".join(DECISION_SPANS)}"}}'


# --------------------------------------------------------------------------
# PromQL helpers. They only assemble strings; the test suite checks every
# resulting expression's names, and the end-to-end suite runs each one.
# --------------------------------------------------------------------------


def series(metric: str, **matchers: str) -> str:
    """``metric{label="value", ...}`` (labels in the order given)."""
    if not matchers:
        return metric
    inner = ", ".join(f'{name}="{value}"' for name, value in matchers.items())
    return f"{metric}{{{inner}}}"


def rate(selector: str) -> str:
    return f"rate({selector}[{RATE_INTERVAL}])"


def sum_by(labels: Sequence[str], expr: str) -> str:
    if not labels:
        return f"sum({expr})"
    return f"sum by ({', '.join(labels)}) ({expr})"


def ratio(numerator: str, denominator: str, matching: str = "") -> str:
    """``numerator / denominator``, empty (not NaN) where the denominator is 0.

    ``matching`` is a vector-matching clause for the division, such as
    ``ignoring (label) group_left ()`` (the empty list keeps PromQL from
    reading a parenthesised denominator as the label list).
    """
    op = f"/ {matching}" if matching else "/"
    return f"({numerator})\n{op}\n({denominator} > 0)"


def or_zero_like(expr: str, template: str) -> str:
    """``expr``, or 0 for each series of ``template`` that ``expr`` lacks."""
    return f"({expr}\nor\n0 * {template})"


def per_hour(expr: str) -> str:
    return f"({expr}) * 3600"


# The loss budget: series recorded by the rules in
# dashboards/alerts/seamscope-alerts.rules.yaml (group
# seamscope-offload-loss-budget), and the period of its SLO.
ERROR_BUDGET = "seamscope:offload_settled_loss:error_budget"
SLO_PERIOD = "30d"


def loss_ratio(window: str) -> str:
    """The recorded loss ratio over ``window``, per model and mechanism."""
    return f"model_mechanism:seamscope_offload_settled_loss:ratio_{window}"


def burn_rate(window: str) -> str:
    """The loss ratio over ``window`` in multiples of the error budget."""
    return f"{loss_ratio(window)}\n/\nscalar({ERROR_BUDGET})"


def grown(selector: str, window: str) -> str:
    """How much ``selector`` grew over ``window``, a series born inside it counted
    from zero (the rules' form for sparse counters)."""
    return (
        f"(\n  last_over_time({selector}[{window}])\nunless\n  {selector} offset {window}\n)\n"
        f"or\nincrease({selector}[{window}])"
    )


GATE = c.OffloadMechanism.SEAMSCOPE_GATE.value
_PAIR = [L_TOOL, L_MODEL]
_SHADOW_BY = [L_MODEL, L_TOOL, L_SHADOW_BASIS]


def gate_only(metric: str) -> str:
    """``metric``'s series of the offload gate (mechanism ``seamscope_gate``)."""
    return series(metric, **{L_MECHANISM: GATE})


# --------------------------------------------------------------------------
# Queries and links.
# --------------------------------------------------------------------------


def promql(expr: str, legend: str, ref_id: str = "A") -> prometheus.Dataquery:
    return (
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(ref_id)
        .datasource(PROMETHEUS_DS)
        .editor_mode(prometheus_models.QueryEditorMode.CODE)
        .range()
    )


def traceql(query: str, ref_id: str = "A") -> tempo.TempoQuery:
    return (
        tempo.TempoQuery()
        .ref_id(ref_id)
        .datasource(TEMPO_DS)
        .query_type(tempo_models.TempoQueryType.TRACEQL)
        .query(query)
        .limit(TRACE_LIMIT)
        .table_type(tempo_models.SearchTableType.SPANS)
    )


class JaegerQuery(cogvariants.Dataquery):
    """A Jaeger data source query (the SDK ships no Jaeger model).

    The fields are those of Grafana's Jaeger query: ``queryType`` ``search``
    with a service, an operation (span name) and logfmt ``tags``.
    """

    def __init__(self) -> None:
        self.ref_id = ""
        self.datasource: dashboard_models.DataSourceRef | None = None
        self.query_type = "search"
        self.service: str | None = None
        self.operation: str | None = None
        self.tags: str | None = None
        self.limit: int | None = None

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {"refId": self.ref_id, "queryType": self.query_type}
        if self.datasource is not None:
            payload["datasource"] = self.datasource
        for key, value in (
            ("service", self.service),
            ("operation", self.operation),
            ("tags", self.tags),
            ("limit", self.limit),
        ):
            if value is not None:
                payload[key] = value
        return payload


class JaegerSearch(cogbuilder.Builder[JaegerQuery]):
    def __init__(self) -> None:
        self._internal = JaegerQuery()

    def build(self) -> JaegerQuery:
        return self._internal

    def ref_id(self, ref_id: str) -> JaegerSearch:
        self._internal.ref_id = ref_id
        return self

    def datasource(self, datasource: dashboard_models.DataSourceRef) -> JaegerSearch:
        self._internal.datasource = datasource
        return self

    def service(self, service: str) -> JaegerSearch:
        self._internal.service = service
        return self

    def operation(self, operation: str) -> JaegerSearch:
        self._internal.operation = operation
        return self

    def tags(self, tags: Iterable[tuple[str, str]]) -> JaegerSearch:
        self._internal.tags = " ".join(f"{key}={value}" for key, value in tags)
        return self

    def limit(self, limit: int) -> JaegerSearch:
        self._internal.limit = limit
        return self


def jaeger_search(operation: str, tags: Iterable[tuple[str, str]]) -> JaegerSearch:
    return (
        JaegerSearch()
        .ref_id("A")
        .datasource(JAEGER_DS)
        .service("${service}")
        .operation(operation)
        .tags(tags)
        .limit(TRACE_LIMIT)
    )


class ExploreTracesLink:
    """A field data link that opens a TraceQL search in Explore.

    Grafana resolves an ``internal`` link to an Explore URL itself, with the
    ``${__field.labels.*}`` of the clicked series interpolated into the query.
    The link names the provisioned Tempo data source by uid: Grafana does not
    interpolate variables in an internal link's data source.
    """

    def __init__(self, title: str, query: str) -> None:
        self.title = title
        self.query = query

    def to_json(self) -> dict[str, object]:
        return {
            "title": self.title,
            "url": "",
            "internal": {
                "datasourceUid": TEMPO_UID,
                "datasourceName": "Tempo",
                "query": {
                    "refId": "A",
                    "queryType": tempo_models.TempoQueryType.TRACEQL.value,
                    "query": self.query,
                    "limit": TRACE_LIMIT,
                    "tableType": tempo_models.SearchTableType.SPANS.value,
                },
            },
        }


class TracesLink(cogbuilder.Builder[dashboard_models.DashboardLink]):
    def __init__(self, title: str, query: str) -> None:
        self._link = ExploreTracesLink(title, query)

    def build(self) -> dashboard_models.DashboardLink:
        return self._link  # type: ignore[return-value]  # serialised via to_json


def field_label(attribute: str) -> str:
    """The data-link variable holding the clicked series' label for ``attribute``."""
    return "${__field.labels." + label(attribute) + "}"


def span_attr(attribute: str, value: str, quote: bool = True) -> str:
    shown = f'"{value}"' if quote else value
    return f"span.{attribute} = {shown}"


def spanset(*conditions: str) -> str:
    return "{ " + " && ".join(conditions) + " }"


def span_name(name: str) -> str:
    return f'name = "{name}"'


# --------------------------------------------------------------------------
# Layout.
# --------------------------------------------------------------------------


class Grid:
    """Places rows and panels explicitly, left to right, 24 columns wide."""

    WIDTH = 24

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def _newline(self) -> None:
        self.y += self.row_height
        self.x = 0
        self.row_height = 0

    def row(self, title: str) -> dash.Row:
        if self.x:
            self._newline()
        row = (
            dash.Row(title)
            .id(self._id())
            .grid_pos(dashboard_models.GridPos(h=1, w=24, x=0, y=self.y))
        )
        self.y += 1
        return row

    def place(self, w: int, h: int) -> dashboard_models.GridPos:
        if self.x + w > self.WIDTH:
            self._newline()
        pos = dashboard_models.GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.row_height = max(self.row_height, h)
        return pos

    def _id(self) -> int:
        value = self.next_id
        self.next_id += 1
        return value

    def panel_id(self) -> int:
        return self._id()


# --------------------------------------------------------------------------
# Panels as data, and the one helper that builds each of them.
# --------------------------------------------------------------------------


class Query(NamedTuple):
    """One PromQL target of a panel: the expression and its legend."""

    expr: str
    legend: str


class Link(NamedTuple):
    """A data link from a metric panel to the traces behind the clicked series."""

    title: str
    traceql: str


class Graph(NamedTuple):
    """A time series panel; its targets get the ref ids A, B, C... in order."""

    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str
    w: int = 12
    h: int = 8
    stacked: bool = False
    max_value: float | None = None
    links: tuple[Link, ...] = ()


class Stat(NamedTuple):
    """A single-value panel (last non-null value); its legend is its title."""

    title: str
    description: str
    expr: str
    unit: str
    w: int = 6
    h: int = 4


class Jaeger(NamedTuple):
    """A Jaeger search: spans named ``operation`` with these tags, for ``${service}``."""

    operation: str
    tags: tuple[tuple[str, str], ...]


class TraceTable(NamedTuple):
    """Trace search results: a TraceQL string (Tempo) or a :class:`Jaeger` search."""

    title: str
    description: str
    search: str | Jaeger
    w: int = 12
    h: int = 10


class TraceView(NamedTuple):
    """The trace whose id is in the ``traceId`` variable, full width."""

    w: int = 24
    h: int = 16


Panel = Graph | Stat | TraceTable | TraceView


class Row(NamedTuple):
    title: str
    panels: tuple[Panel, ...]


class Dashboard(NamedTuple):
    uid: str
    title: str
    description: str
    rows: tuple[Row, ...]


REF_IDS = "ABCDEFGH"


def legend_table() -> common_builders.VizLegendOptions:
    return (
        common_builders.VizLegendOptions()
        .display_mode(common_models.LegendDisplayMode.TABLE)
        .placement(common_models.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["mean", "lastNotNull"])
    )


def show_trace_link(dashboard_uid: str) -> dict[str, str]:
    """A click on a trace id in a search table shows that trace in the trace panel."""
    return {
        "title": "Show this trace below",
        "url": (
            f"/d/{dashboard_uid}?${{__url_time_range}}&${{datasource:queryparam}}"
            "&${tempo:queryparam}&${jaeger:queryparam}&${service:queryparam}"
            "&var-traceId=${__value.raw}"
        ),
    }


def build_panel(
    item: Panel, grid: Grid, dashboard_uid: str
) -> cogbuilder.Builder[dashboard_models.Panel]:
    """The Grafana panel for one row of panel data, placed on ``grid``."""
    if isinstance(item, Graph):
        graph = (
            timeseries.Panel()
            .id(grid.panel_id())
            .title(item.title)
            .description(item.description)
            .datasource(PROMETHEUS_DS)
            .targets(
                [
                    promql(query.expr, query.legend, ref_id)
                    for query, ref_id in zip(item.queries, REF_IDS, strict=False)
                ]
            )
            .unit(item.unit)
            .min(0)
            .legend(legend_table())
            .tooltip(
                common_builders.VizTooltipOptions()
                .mode(common_models.TooltipDisplayMode.MULTI)
                .sort(common_models.SortOrder.DESCENDING)
            )
            .fill_opacity(40 if item.stacked else 10)
            .grid_pos(grid.place(item.w, item.h))
        )
        if item.stacked:
            graph = graph.stacking(
                common_builders.StackingConfig().mode(common_models.StackingMode.NORMAL)
            )
        if item.max_value is not None:
            graph = graph.max(item.max_value)
        if item.links:
            graph = graph.data_links([TracesLink(link.title, link.traceql) for link in item.links])
        return graph
    if isinstance(item, Stat):
        return (
            stat.Panel()
            .id(grid.panel_id())
            .title(item.title)
            .description(item.description)
            .datasource(PROMETHEUS_DS)
            .with_target(promql(item.expr, item.title))
            .unit(item.unit)
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
            .graph_mode(common_models.BigValueGraphMode.AREA)
            .grid_pos(grid.place(item.w, item.h))
        )
    if isinstance(item, TraceTable):
        target: cogbuilder.Builder[cogvariants.Dataquery]
        if isinstance(item.search, Jaeger):
            target, datasource = jaeger_search(item.search.operation, item.search.tags), JAEGER_DS
        else:
            target, datasource = traceql(item.search), TEMPO_DS
        return (
            table.Panel()
            .id(grid.panel_id())
            .title(item.title)
            .description(item.description)
            .datasource(datasource)
            .with_target(target)
            .override_by_name(
                "traceID",
                [
                    dashboard_models.DynamicConfigValue(
                        id_val="links", value=[show_trace_link(dashboard_uid)]
                    )
                ],
            )
            .grid_pos(grid.place(item.w, item.h))
        )
    return (
        dash.Panel()
        .type("traces")
        .id(grid.panel_id())
        .title("Trace ${traceId}")
        .description(
            "The trace whose id is in the traceId variable: click a trace id in a "
            "search table above, or paste one into the variable."
        )
        .datasource(TEMPO_DS)
        .with_target(
            tempo.TempoQuery()
            .ref_id("A")
            .datasource(TEMPO_DS)
            .query_type(tempo_models.TempoQueryType.TRACEQL)
            .query("${traceId}")
        )
        .grid_pos(grid.place(item.w, item.h))
    )


# --------------------------------------------------------------------------
# Variables and dashboard frame.
# --------------------------------------------------------------------------


def datasource_variable(
    name: str, plugin: str, label_text: str, uid: str
) -> dash.DatasourceVariable:
    return (
        dash.DatasourceVariable(name)
        .label(label_text)
        .type(plugin)
        .current(dashboard_models.VariableOption(text=uid, value=uid, selected=True))
    )


def textbox_variable(
    name: str, label_text: str, description: str, value: str
) -> dash.TextBoxVariable:
    return (
        dash.TextBoxVariable(name)
        .label(label_text)
        .description(description)
        .default_value(value)
        .current(dashboard_models.VariableOption(text=value, value=value))
    )


def variables() -> list[cogbuilder.Builder[dashboard_models.VariableModel]]:
    return [
        datasource_variable("datasource", "prometheus", "Prometheus", PROMETHEUS_UID),
        datasource_variable("tempo", "tempo", "Tempo", TEMPO_UID),
        datasource_variable("jaeger", "jaeger", "Jaeger", JAEGER_UID),
        textbox_variable(
            "service",
            "Jaeger service",
            "service.name of the process that runs seamscope (Jaeger search needs one).",
            JAEGER_SERVICE,
        ),
        textbox_variable("traceId", "Trace id", "The trace shown in the trace panel.", ""),
    ]


def frame(uid: str, title: str, description: str) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .readonly()
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .tooltip(dashboard_models.DashboardCursorSync.CROSSHAIR)
        .variables(variables())
        .link(
            dash.DashboardLink("seamscope")
            .type(dashboard_models.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(False)
            .include_vars(True)
            .keep_time(True)
        )
    )


def build_dashboard(spec: Dashboard) -> dash.Dashboard:
    """The frame of ``spec`` with its rows and their panels, laid out left to right."""
    grid = Grid()
    built = frame(spec.uid, spec.title, spec.description)
    for row in spec.rows:
        built = built.with_row(grid.row(row.title))
        for item in row.panels:
            built = built.with_panel(build_panel(item, grid, spec.uid))
    return built


def legend(*labels: str) -> str:
    """A legend showing these labels of each series, ``{{a}} · {{b}}``."""
    return " · ".join("{{" + name + "}}" for name in labels)


# --------------------------------------------------------------------------
# Dashboard 1: decisions.
# --------------------------------------------------------------------------

_WINS = rate(POLICY_WINS)
_EVALUATIONS = rate(POLICY_EVALUATIONS)
_REDIRECTS = rate(REDIRECTS)
_DROPPED = c.PaletteVerdict.DROPPED.value
_OUTCOMES = rate(STAGE_OUTCOMES)
_BUCKETS = sum_by(["le", L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_BUCKET)))

_POLICY_WON_LINK = Link(
    "Traces where this policy won",
    spanset(span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME))),
)

DECISIONS = Dashboard(
    DECISIONS_UID,
    "seamscope / decisions",
    "Which policy won each seam, which redirects the palette gate dropped, what the "
    "selection stages and a framework's own middlewares did, and how long each decision "
    "took.",
    (
        Row(
            "Seams: who decided",
            (
                Graph(
                    "Policy wins per seam",
                    "Seam decisions per second by seam, winner source and winning policy "
                    "(policy `none` when the resolver, the default or the adopter decided).",
                    (
                        Query(
                            sum_by([L_SEAM, L_WINNER_SOURCE, L_POLICY], _WINS),
                            legend(L_SEAM, L_WINNER_SOURCE, L_POLICY),
                        ),
                    ),
                    "ops",
                    links=(_POLICY_WON_LINK,),
                ),
                Graph(
                    "Winner source share per seam",
                    "Share of each seam's decisions taken by a policy, the role resolver, the "
                    "default, the adopter callback, or nobody (dispatched as emitted).",
                    (
                        Query(
                            ratio(
                                sum_by([L_SEAM, L_WINNER_SOURCE], _WINS),
                                sum_by([L_SEAM], _WINS),
                                f"ignoring ({L_WINNER_SOURCE}) group_left ()",
                            ),
                            legend(L_SEAM, L_WINNER_SOURCE),
                        ),
                    ),
                    "percentunit",
                    stacked=True,
                    max_value=1,
                ),
                Graph(
                    "Policy evaluations by result",
                    "Policy evaluations per second by seam, policy and result. Matched and "
                    "error evaluations carry the policy; `not_matched` and `skipped` (the "
                    "policy does not apply at that seam) are counted per seam only, their "
                    "names are on the seam spans (seamscope.policy.passed_over). `error`: "
                    "its predicate raised (counted as no match).",
                    (
                        Query(
                            sum_by([L_SEAM, L_POLICY, L_POLICY_RESULT], _EVALUATIONS),
                            legend(L_SEAM, L_POLICY, L_POLICY_RESULT),
                        ),
                    ),
                    "ops",
                ),
                Graph(
                    "Policy predicate errors",
                    "Evaluations per second whose predicate raised, by seam and policy. Each "
                    "one silently counts as no match.",
                    (
                        Query(
                            sum_by(
                                [L_SEAM, L_POLICY],
                                rate(
                                    series(
                                        POLICY_EVALUATIONS,
                                        **{L_POLICY_RESULT: c.PolicyResult.ERROR.value},
                                    )
                                ),
                            ),
                            legend(L_SEAM, L_POLICY),
                        ),
                    ),
                    "ops",
                    links=(_POLICY_WON_LINK,),
                ),
            ),
        ),
        Row(
            "Redirects and the palette gate",
            (
                Graph(
                    "Redirects by palette-gate verdict",
                    "Policy redirects per second by policy: `kept` dispatched to the redirect "
                    "target, `dropped` targeted a tool not routed this turn, so the original "
                    "call dispatched.",
                    (
                        Query(
                            sum_by([L_POLICY, L_PALETTE_GATE], _REDIRECTS),
                            legend(L_POLICY, L_PALETTE_GATE),
                        ),
                    ),
                    "ops",
                    links=(
                        Link(
                            "Dispatches with this policy and verdict",
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME)),
                                span_attr(
                                    c.ATTR_DISPATCH_PALETTE_GATE,
                                    field_label(c.ATTR_DISPATCH_PALETTE_GATE),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Palette-gate drop ratio per policy",
                    "Share of a policy's redirects the palette gate dropped. A policy whose "
                    "target is rarely routed is a configuration problem.",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_POLICY],
                                    rate(series(REDIRECTS, **{L_PALETTE_GATE: _DROPPED})),
                                ),
                                sum_by([L_POLICY], _REDIRECTS),
                            ),
                            legend(L_POLICY),
                        ),
                    ),
                    "percentunit",
                    links=(
                        Link(
                            "Dropped redirects of this policy",
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME)),
                                span_attr(c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Tool selection stages",
            (
                Graph(
                    "Stage outcomes",
                    "Selection-stage outcomes per second by stage: `select` narrowed the "
                    "tools, `abstain` left them as they were.",
                    (
                        Query(
                            sum_by([L_STAGE, L_STAGE_OUTCOME], _OUTCOMES),
                            legend(L_STAGE, L_STAGE_OUTCOME),
                        ),
                    ),
                    "ops",
                    links=(
                        Link(
                            "Stage spans with this outcome",
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_NAME, field_label(c.ATTR_STAGE_NAME)),
                                span_attr(c.ATTR_STAGE_OUTCOME, field_label(c.ATTR_STAGE_OUTCOME)),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Degraded abstain ratio per stage",
                    "Share of a stage's runs that abstained degraded (or raised and were "
                    "contained). The pipeline went on without that lever.",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_STAGE],
                                    rate(series(STAGE_OUTCOMES, **{L_STAGE_DEGRADED: TRUE})),
                                ),
                                sum_by([L_STAGE], _OUTCOMES),
                            ),
                            legend(L_STAGE),
                        ),
                    ),
                    "percentunit",
                    links=(
                        Link(
                            "Degraded runs of this stage",
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_NAME, field_label(c.ATTR_STAGE_NAME)),
                                span_attr(c.ATTR_STAGE_DEGRADED, TRUE, quote=False),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Stages that narrowed the tools (select share)",
                    "Share of a stage's runs that selected (narrowed the offered tools).",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_STAGE],
                                    rate(
                                        series(
                                            STAGE_OUTCOMES,
                                            **{L_STAGE_OUTCOME: c.StageOutcomeKind.SELECT.value},
                                        )
                                    ),
                                ),
                                sum_by([L_STAGE], _OUTCOMES),
                            ),
                            legend(L_STAGE),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                ),
                Graph(
                    "Tools offered vs selected",
                    "Tools offered to the selection pipeline and tools it selected, per "
                    "second (one count per tool per iteration). The gap is what the stages "
                    "dropped; which tools and why is on the seamscope.select_tools and "
                    "seamscope.stage spans.",
                    (
                        Query(
                            sum_by([L_SELECTION_SET], rate(SELECTION_TOOLS)),
                            legend(L_SELECTION_SET),
                        ),
                    ),
                    "ops",
                ),
                Graph(
                    "Decisions per second by kind",
                    "Pipeline runs, PRE and POST seam decisions and offload-gate calls per "
                    "second, by decision span (the collector's spanmetrics).",
                    (
                        Query(
                            sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_CALLS))),
                            legend(L_SPAN_NAME),
                        ),
                    ),
                    "ops",
                ),
            ),
        ),
        Row(
            "Framework middlewares",
            (
                Graph(
                    "Middleware decisions by middleware and kind",
                    "Decisions a framework's own middlewares took, per second, by middleware "
                    "(its name in the framework) and kind: tool selection or search, model "
                    "route or fallback, a blocked tool call, a compaction.",
                    (
                        Query(
                            sum_by(
                                [L_MIDDLEWARE, L_MIDDLEWARE_DECISION], rate(MIDDLEWARE_DECISIONS)
                            ),
                            legend(L_MIDDLEWARE, L_MIDDLEWARE_DECISION),
                        ),
                    ),
                    "ops",
                    stacked=True,
                    links=(
                        Link(
                            "Decisions of this middleware of this kind",
                            spanset(
                                span_attr(
                                    c.ATTR_MIDDLEWARE_NAME, field_label(c.ATTR_MIDDLEWARE_NAME)
                                ),
                                span_attr(
                                    c.ATTR_MIDDLEWARE_DECISION,
                                    field_label(c.ATTR_MIDDLEWARE_DECISION),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Middlewares' own model calls: cost by middleware and model (USD/h)",
                    "What the models a middleware asks for its own decisions (a tool "
                    "selector, a router's or a risk check's classifier, a summary model) "
                    "cost per hour, by middleware and decision model.",
                    (
                        Query(
                            per_hour(sum_by([L_MIDDLEWARE, L_MODEL], rate(MIDDLEWARE_COST))),
                            legend(L_MIDDLEWARE, L_MODEL),
                        ),
                    ),
                    "currencyUSD",
                    stacked=True,
                ),
                TraceTable(
                    "Blocked calls, fallbacks and compactions (Tempo)",
                    "TraceQL: tool calls a middleware blocked (they never ran), model calls a "
                    "fallback answered, and compactions (context editing, summaries).",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_DISPATCH_BLOCKED, TRUE, quote=False),
                            ),
                            spanset(
                                span_name(c.SPAN_SEAM_PRE_MODEL),
                                span_attr(c.ATTR_SEAM_WINNER_SOURCE, c.WinnerSource.FALLBACK.value),
                            ),
                            spanset(span_name(c.SPAN_COMPACTION)),
                        ]
                    ),
                    h=8,
                ),
            ),
        ),
        Row(
            "Decision latency",
            (
                Graph(
                    "Decision duration p50 / p95 by kind",
                    "Time seamscope spends deciding, per decision span, from the "
                    "collector's spanmetrics duration histogram. The mean is sum / count.",
                    (
                        Query(
                            f"histogram_quantile(0.5, {_BUCKETS})",
                            "p50 " + legend(L_SPAN_NAME),
                        ),
                        Query(
                            f"histogram_quantile(0.95, {_BUCKETS})",
                            "p95 " + legend(L_SPAN_NAME),
                        ),
                        Query(
                            # A plain division, NaN while a kind is idle, like the
                            # quantiles above (ratio() would drop the series).
                            "("
                            + sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_SUM)))
                            + ")\n/\n("
                            + sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_COUNT)))
                            + ")",
                            "mean " + legend(L_SPAN_NAME),
                        ),
                    ),
                    "s",
                    w=24,
                    h=9,
                ),
            ),
        ),
        Row(
            "Decision traces",
            (
                TraceTable(
                    "Decision spans worth a look (Tempo)",
                    "TraceQL: dispatches whose redirect the palette gate dropped, stages that "
                    "abstained degraded, and decision spans with an error status.",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),
                            ),
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_DEGRADED, TRUE, quote=False),
                            ),
                            spanset('name =~ "seamscope.*"', "status = error"),
                        ]
                    ),
                ),
                TraceTable(
                    "Dropped redirects (Jaeger)",
                    "Jaeger search: dispatch spans whose redirect the palette gate dropped, "
                    "for the service in the `service` variable.",
                    Jaeger(c.SPAN_DISPATCH, ((c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),)),
                ),
                TraceView(),
            ),
        ),
    ),
)


# --------------------------------------------------------------------------
# Dashboard 2: offload economics.
# --------------------------------------------------------------------------

_PREDICTED = sum_by([], rate(PREDICTED_NET_SAVING))
_SAVINGS = sum_by([], rate(REALIZED_SAVINGS))
_COSTS = sum_by([], rate(REALIZED_COSTS))
_REALIZED_NET = f"(({_SAVINGS}) or vector(0))\n-\n(({_COSTS}) or vector(0))"
# Only the gate predicts: realized against predicted compares the gate's terms.
_GATE_SAVINGS = sum_by([], rate(gate_only(REALIZED_SAVINGS)))
_GATE_COSTS = sum_by([], rate(gate_only(REALIZED_COSTS)))
_GATE_NET = f"(({_GATE_SAVINGS}) or vector(0))\n-\n(({_GATE_COSTS}) or vector(0))"
_DECISIONS = rate(OFFLOAD_DECISIONS)
_FIRED = rate(series(OFFLOAD_DECISIONS, **{L_FIRE: TRUE}))
_GATE_SAVINGS_BY_MODEL = sum_by([L_MODEL], rate(gate_only(REALIZED_SAVINGS)))
_GATE_COSTS_BY_MODEL = sum_by([L_MODEL], rate(gate_only(REALIZED_COSTS)))
_PREDICTED_BY_MODEL = sum_by([L_MODEL], rate(PREDICTED_NET_SAVING))
_MODEL_MECHANISM = [L_MODEL, L_MECHANISM]
_SAVINGS_BY_MODEL_MECHANISM = sum_by(_MODEL_MECHANISM, rate(REALIZED_SAVINGS))
_COSTS_BY_MODEL_MECHANISM = sum_by(_MODEL_MECHANISM, rate(REALIZED_COSTS))
_SAVINGS_BY_MECHANISM = sum_by([L_MECHANISM], rate(REALIZED_SAVINGS))
_COSTS_BY_MECHANISM = sum_by([L_MECHANISM], rate(REALIZED_COSTS))
_LOSS = c.OffloadOutcome.LOSS.value

_FIRED_ON_MODEL_LINK = Link(
    "Fired offloads on this model",
    spanset(
        span_name(c.SPAN_OFFLOAD_GATE),
        span_attr(c.ATTR_OFFLOAD_FIRE, TRUE, quote=False),
        span_attr(c.ATTR_GEN_AI_REQUEST_MODEL, field_label(c.ATTR_GEN_AI_REQUEST_MODEL)),
    ),
)
_COMPACTIONS_ON_MODEL_LINK = Link(
    "Compactions of this mechanism on this model",
    spanset(
        span_name(c.SPAN_COMPACTION),
        span_attr(c.ATTR_OFFLOAD_MECHANISM, field_label(c.ATTR_OFFLOAD_MECHANISM)),
        span_attr(c.ATTR_GEN_AI_REQUEST_MODEL, field_label(c.ATTR_GEN_AI_REQUEST_MODEL)),
    ),
)
_LOSING_SETTLEMENTS_LINK = Link(
    "Losing settlements of this mechanism",
    spanset(
        span_name(c.SPAN_OFFLOAD_SETTLE),
        span_attr(c.ATTR_OFFLOAD_MECHANISM, field_label(c.ATTR_OFFLOAD_MECHANISM)),
        span_attr(c.ATTR_OFFLOAD_OUTCOME, _LOSS),
    ),
)

OFFLOAD = Dashboard(
    OFFLOAD_UID,
    "seamscope / offload economics",
    "What the offload gate predicted, what offloads and framework compactions (context "
    "editing, summaries) really saved and cost, by mechanism, recalls, settled outcomes, "
    "and the prompt cache with and without a live offload.",
    (
        Row(
            "Overview",
            (
                Stat(
                    "Predicted net saving (USD/h)",
                    "Net saving the gate predicted for the offloads it fired, per hour.",
                    per_hour(_PREDICTED),
                    "currencyUSD",
                ),
                Stat(
                    "Realized net saving (USD/h)",
                    "Realized savings minus realized costs of offloads and compactions, "
                    "every mechanism, per hour. Negative: taking content out of the prompt "
                    "loses money.",
                    per_hour(_REALIZED_NET),
                    "currencyUSD",
                ),
                Stat(
                    "Realized / predicted",
                    "The gate's realized net saving as a share of its predicted one. The "
                    "realized side lags by the turns an offload is carried.",
                    ratio(_GATE_NET, _PREDICTED),
                    "percentunit",
                ),
                Stat(
                    "Gate fire rate",
                    "Share of offload-gate calls that fired.",
                    ratio(sum_by([], _FIRED), sum_by([], _DECISIONS)),
                    "percentunit",
                ),
            ),
        ),
        Row(
            "Offload gate decisions",
            (
                Graph(
                    "Gate decisions by reason code",
                    "Share of offload-gate calls per reason: below the size threshold, "
                    "unpriced model, net saving positive (fired) or not positive.",
                    (
                        Query(
                            ratio(
                                sum_by([L_REASON_CODE], _DECISIONS),
                                sum_by([], _DECISIONS),
                                f"ignoring ({L_REASON_CODE}) group_left ()",
                            ),
                            legend(L_REASON_CODE),
                        ),
                    ),
                    "percentunit",
                    stacked=True,
                    max_value=1,
                    links=(
                        Link(
                            "Gate calls with this reason",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(
                                    c.ATTR_OFFLOAD_REASON_CODE,
                                    field_label(c.ATTR_OFFLOAD_REASON_CODE),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Fire rate by model",
                    "Share of each model's offload-gate calls that fired.",
                    (
                        Query(
                            ratio(sum_by([L_MODEL], _FIRED), sum_by([L_MODEL], _DECISIONS)),
                            legend(L_MODEL),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                    links=(_FIRED_ON_MODEL_LINK,),
                ),
            ),
        ),
        Row(
            "Predicted vs realized",
            (
                Graph(
                    "Predicted vs realized net saving (USD/h)",
                    "Predicted: the gate's net saving for fired offloads. Realized: savings "
                    "(later model calls that carried the stub) minus costs (stub carry, "
                    "recalls, prompt-cache disruption), counted where they happen: the "
                    "gate's, and of every mechanism (with framework compactions).",
                    (
                        Query(per_hour(_PREDICTED), "predicted"),
                        Query(per_hour(_GATE_NET), "realized (gate)"),
                        Query(per_hour(_REALIZED_NET), "realized (every mechanism)"),
                    ),
                    "currencyUSD",
                ),
                Graph(
                    "Realized costs by kind (USD/h)",
                    "What offloads and compactions cost, per hour: the stub, placeholder or "
                    "summary carried on later turns, recalls of the removed content, "
                    "prompt-cache disruption, and summaries' own model calls.",
                    (
                        Query(
                            per_hour(sum_by([L_COST_KIND], rate(REALIZED_COSTS))),
                            legend(L_COST_KIND),
                        ),
                    ),
                    "currencyUSD",
                    stacked=True,
                ),
                Graph(
                    "Realized loss by model and mechanism (USD/h)",
                    "Realized costs minus realized savings per model and mechanism, where "
                    "positive: what that mechanism takes out of the prompt on that model "
                    "loses money (what SeamscopeOffloadRealizedLoss alerts on).",
                    (
                        Query(
                            per_hour(
                                f"{_COSTS_BY_MODEL_MECHANISM}\n-\n"
                                + or_zero_like(
                                    _SAVINGS_BY_MODEL_MECHANISM, _COSTS_BY_MODEL_MECHANISM
                                )
                            )
                            + " > 0",
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "currencyUSD",
                    links=(
                        _FIRED_ON_MODEL_LINK,
                        _COMPACTIONS_ON_MODEL_LINK,
                        _LOSING_SETTLEMENTS_LINK,
                    ),
                ),
                Graph(
                    "Realized / predicted by model",
                    "The gate's realized net saving as a share of its predicted one, per "
                    "model. Below 100%: the gate's priors (horizon, recall probability) are "
                    "optimistic for this workload.",
                    (
                        Query(
                            ratio(
                                or_zero_like(_GATE_SAVINGS_BY_MODEL, _PREDICTED_BY_MODEL)
                                + "\n-\n"
                                + or_zero_like(_GATE_COSTS_BY_MODEL, _PREDICTED_BY_MODEL),
                                _PREDICTED_BY_MODEL,
                            ),
                            legend(L_MODEL),
                        ),
                    ),
                    "percentunit",
                ),
            ),
        ),
        Row(
            "Mechanisms: the gate and framework compactions",
            (
                Graph(
                    "Realized net saving by mechanism (USD/h)",
                    "Savings minus costs per hour of each mechanism: the offload gate "
                    "(seamscope_gate), a framework's context editing (cleared tool results), "
                    "summarization, tool output trimming (the Agents SDK's "
                    "ToolOutputTrimmer) and Deep Agents' evictions of large tool results "
                    "(deepagents_eviction). Negative: that mechanism loses money.",
                    (
                        Query(
                            per_hour(
                                or_zero_like(_SAVINGS_BY_MECHANISM, _COSTS_BY_MECHANISM)
                                + "\n-\n"
                                + or_zero_like(_COSTS_BY_MECHANISM, _SAVINGS_BY_MECHANISM)
                            ),
                            legend(L_MECHANISM),
                        ),
                    ),
                    "currencyUSD",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    "Realized savings by mechanism (USD/h)",
                    "Re-prefill avoided per hour by each mechanism: later model calls that "
                    "carried the stub, placeholder or summary instead of the content.",
                    (Query(per_hour(_SAVINGS_BY_MECHANISM), legend(L_MECHANISM)),),
                    "currencyUSD",
                    w=8,
                    stacked=True,
                ),
                Graph(
                    "Realized costs by mechanism and kind (USD/h)",
                    "What each mechanism costs per hour, by kind: carry, recalls (re-reads "
                    "of cleared or summarized data), cache disruption, compaction calls.",
                    (
                        Query(
                            per_hour(sum_by([L_MECHANISM, L_COST_KIND], rate(REALIZED_COSTS))),
                            legend(L_MECHANISM, L_COST_KIND),
                        ),
                    ),
                    "currencyUSD",
                    w=8,
                    stacked=True,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
            ),
        ),
        Row(
            "Recalls and settled offloads",
            (
                Graph(
                    "Recalls by model and mechanism",
                    "Recalls per second: of offloaded tool outputs (seamscope_gate), and "
                    "re-reads of data a compaction cleared or summarized.",
                    (
                        Query(
                            sum_by(_MODEL_MECHANISM, rate(RECALLS)),
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "ops",
                    w=8,
                ),
                Graph(
                    "Recalls per fired offload",
                    "The gate's recalls per offload it fired, per model: compare with the "
                    "recall probability prior the gate priced.",
                    (
                        Query(
                            ratio(
                                sum_by([L_MODEL], rate(gate_only(RECALLS))),
                                sum_by([L_MODEL], _FIRED),
                            ),
                            legend(L_MODEL),
                        ),
                    ),
                    "none",
                    w=8,
                ),
                Graph(
                    "Settled by mechanism and outcome",
                    "Offloads and compactions settled per second by mechanism and outcome "
                    "(gain, loss, break_even), where one process saw the whole conversation.",
                    (
                        Query(
                            sum_by([L_MECHANISM, L_OUTCOME], rate(SETTLED)),
                            legend(L_MECHANISM, L_OUTCOME),
                        ),
                    ),
                    "ops",
                    w=8,
                    stacked=True,
                    links=(
                        Link(
                            "Settlements of this mechanism with this outcome",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_SETTLE),
                                span_attr(
                                    c.ATTR_OFFLOAD_MECHANISM,
                                    field_label(c.ATTR_OFFLOAD_MECHANISM),
                                ),
                                span_attr(
                                    c.ATTR_OFFLOAD_OUTCOME, field_label(c.ATTR_OFFLOAD_OUTCOME)
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Loss budget",
            (
                Graph(
                    "Loss budget burn rate, page windows (1h, 5m)",
                    "Loss share of settled offloads and compactions per model and mechanism "
                    "over 1h and 5m, in multiples of the error budget (the "
                    f"{ERROR_BUDGET} rule). SeamscopeOffloadLossBudgetFastBurn pages when "
                    "both are above 14.4.",
                    (
                        Query(burn_rate("1h"), legend(L_MODEL, L_MECHANISM) + " · 1h"),
                        Query(burn_rate("5m"), legend(L_MODEL, L_MECHANISM) + " · 5m"),
                    ),
                    "none",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    "Loss budget burn rate, ticket windows (6h, 30m)",
                    "The same over 6h and 30m. SeamscopeOffloadLossBudgetSlowBurn opens a "
                    "ticket when both are above 6.",
                    (
                        Query(burn_rate("6h"), legend(L_MODEL, L_MECHANISM) + " · 6h"),
                        Query(burn_rate("30m"), legend(L_MODEL, L_MECHANISM) + " · 30m"),
                    ),
                    "none",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    f"Loss budget left over {SLO_PERIOD}",
                    f"Share of the error budget left over the last {SLO_PERIOD} per model and "
                    "mechanism: 1 - (loss share / budget). Below 0: the SLO is missed.",
                    (
                        Query(
                            "1 - (\n"
                            + ratio(
                                or_zero_like(
                                    sum_by(
                                        _MODEL_MECHANISM,
                                        grown(series(SETTLED, **{L_OUTCOME: _LOSS}), SLO_PERIOD),
                                    ),
                                    f"group by ({', '.join(_MODEL_MECHANISM)}) "
                                    f"(last_over_time({SETTLED}[{SLO_PERIOD}]))",
                                ),
                                sum_by(_MODEL_MECHANISM, grown(SETTLED, SLO_PERIOD)),
                            )
                            + f"\n) / scalar({ERROR_BUDGET})",
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "percentunit",
                    w=8,
                ),
                Graph(
                    "Offload store failures by call and error type",
                    "Offload store calls per second that failed (the store down, slow or "
                    "full), by operation and error type. A failed put made no offload (the "
                    "output stayed in the prompt: gate reason store_failed); a failed recall "
                    "told the agent to retry; failed accounts or claims leave the offload "
                    "to be settled later by any worker.",
                    (
                        Query(
                            sum_by([L_STORE_OPERATION, L_ERROR_TYPE], rate(STORE_ERRORS)),
                            legend(L_STORE_OPERATION, L_ERROR_TYPE),
                        ),
                    ),
                    "ops",
                    w=12,
                ),
                Graph(
                    "Shadow disagreements by model and tool",
                    "Offload-gate calls per second where the shadow configuration "
                    "(OffloadGate(shadow=...)) reached another verdict than the live one, "
                    "per model and tool: what rolling the shadow out would change.",
                    (
                        Query(
                            sum_by([L_MODEL, L_TOOL], rate(SHADOW_DISAGREEMENTS)),
                            legend(L_MODEL, L_TOOL),
                        ),
                    ),
                    "ops",
                    w=12,
                    links=(
                        Link(
                            "Gate calls on this model and tool",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(
                                    c.ATTR_GEN_AI_REQUEST_MODEL,
                                    field_label(c.ATTR_GEN_AI_REQUEST_MODEL),
                                ),
                                span_attr(
                                    c.ATTR_GEN_AI_TOOL_NAME, field_label(c.ATTR_GEN_AI_TOOL_NAME)
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Shadow net saving by model and tool",
                    "What the shadow configuration's offloads would have saved minus what "
                    "they would have cost per hour, on the conversations' real course "
                    "(counted as conversations settle): exact where the offload fires either "
                    "way, expected (one recall hop at the shadow's probability) where only "
                    "the shadow fires. Compare with the realized net of the live gate.",
                    (
                        Query(
                            per_hour(
                                or_zero_like(
                                    sum_by(_SHADOW_BY, rate(SHADOW_SAVINGS)),
                                    sum_by(_SHADOW_BY, rate(SHADOW_COSTS)),
                                )
                                + "\n-\n"
                                + or_zero_like(
                                    sum_by(_SHADOW_BY, rate(SHADOW_COSTS)),
                                    sum_by(_SHADOW_BY, rate(SHADOW_SAVINGS)),
                                )
                            ),
                            legend(L_MODEL, L_TOOL) + " · " + legend(L_SHADOW_BASIS),
                        ),
                    ),
                    "currencyUSD",
                    w=12,
                ),
            ),
        ),
        Row(
            "Calibration evidence",
            (
                Graph(
                    "Recall probability by tool and model: realized vs the gate's prior",
                    "Per tool and model: the share of settled "
                    "offloads of the gate that were recalled (what seamscope calibrate "
                    "--prometheus learns the recall probability from) and the mean recall "
                    "prior the gate decided them with.",
                    (
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(RECALLED_OFFLOADS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · recalled",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(PRIOR_RECALL_PROBABILITY)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · prior",
                        ),
                    ),
                    "percentunit",
                    w=12,
                ),
                Graph(
                    "Turns after an offload (remaining, carried) and recalls per offload",
                    "Per tool and model: the model calls that followed each settled offload "
                    "of the gate until it settled (the gate's horizon, realized: median and "
                    "90th percentile), the mean number that carried its stub, and its mean "
                    "recalls.",
                    (
                        Query(
                            "histogram_quantile(0.5, "
                            + sum_by([*_PAIR, "le"], rate(REMAINING_TURNS + "_bucket"))
                            + ")",
                            legend(L_TOOL, L_MODEL) + " · median remaining",
                        ),
                        Query(
                            "histogram_quantile(0.9, "
                            + sum_by([*_PAIR, "le"], rate(REMAINING_TURNS + "_bucket"))
                            + ")",
                            legend(L_TOOL, L_MODEL) + " · p90 remaining",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(CARRIED_TURNS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · mean carried",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(SETTLED_RECALLS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · recalls per offload",
                        ),
                    ),
                    "none",
                    w=12,
                ),
            ),
        ),
        Row(
            "Prompt cache",
            (
                Graph(
                    "Cache-hit ratio with / without a live offload",
                    "Share of model input tokens read from the prompt cache, for calls made "
                    "while the conversation had a live offload and for the others. A gap "
                    "means offloads disrupt the cache.",
                    (
                        Query(
                            ratio(
                                or_zero_like(
                                    sum_by(
                                        [L_MODEL, L_OFFLOAD_ACTIVE],
                                        rate(
                                            series(
                                                INPUT_TOKENS,
                                                **{L_CACHE: c.CacheUsage.READ.value},
                                            )
                                        ),
                                    ),
                                    sum_by([L_MODEL, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                                ),
                                sum_by([L_MODEL, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                            ),
                            legend(L_MODEL) + " · live offload " + legend(L_OFFLOAD_ACTIVE),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                ),
                Graph(
                    "Input tokens by cache use",
                    "Model input tokens per second: read from the cache, written to it, or "
                    "uncached, with and without a live offload.",
                    (
                        Query(
                            sum_by([L_CACHE, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                            legend(L_CACHE) + " · live offload " + legend(L_OFFLOAD_ACTIVE),
                        ),
                    ),
                    "short",
                ),
            ),
        ),
        Row(
            "Offload traces",
            (
                TraceTable(
                    "Fired offloads, compactions and losing settlements (Tempo)",
                    "TraceQL: offload-gate calls that fired, framework compactions (context "
                    "editing, summaries), and settled offloads or compactions that lost money.",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(c.ATTR_OFFLOAD_FIRE, TRUE, quote=False),
                            ),
                            spanset(span_name(c.SPAN_COMPACTION)),
                            spanset(
                                span_name(c.SPAN_OFFLOAD_SETTLE),
                                span_attr(c.ATTR_OFFLOAD_OUTCOME, _LOSS),
                            ),
                        ]
                    ),
                ),
                TraceTable(
                    "Fired offloads (Jaeger)",
                    "Jaeger search: offload-gate spans that fired, for the service in the "
                    "`service` variable.",
                    Jaeger(c.SPAN_OFFLOAD_GATE, ((c.ATTR_OFFLOAD_FIRE, TRUE),)),
                ),
                TraceView(),
            ),
        ),
    ),
)

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
