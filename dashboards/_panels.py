"""The panel library of the dashboards: names from the conventions, PromQL and
TraceQL helpers, the panel specs (:class:`Graph`, :class:`Stat`,
:class:`TraceTable`, :class:`TraceView`, :class:`Row`, :class:`Dashboard`) and
:func:`build_dashboard`, which turns a spec into its Grafana dashboard.

The dashboards themselves are data, one module each (``_decisions.py``,
``_offload.py``); ``generate.py`` writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, table, tempo, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dashboard_models
from grafana_foundation_sdk.models import prometheus as prometheus_models
from grafana_foundation_sdk.models import tempo as tempo_models

from seamscope.telemetry import conventions as c

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
