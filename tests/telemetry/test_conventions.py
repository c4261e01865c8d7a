"""The conventions module is the one source of every telemetry name."""

from __future__ import annotations

import ast
import enum
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv.attributes import error_attributes

from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "semantic-conventions.md"
SRC = ROOT / "src" / "seamscope"
REGENERATE = "python -m seamscope.telemetry.conventions > docs/semantic-conventions.md"
# a key, or the start of one built in an f-string; free text (messages) has spaces
KEY_LITERAL = re.compile(r"(seamscope|gen_ai)\.[A-Za-z0-9_.{}]*")


def _leaf_prefix_clashes(keys: set[str]) -> list[tuple[str, str]]:
    return sorted((a, b) for a in keys for b in keys if b.startswith(a + "."))


def test_reference_table_is_up_to_date() -> None:
    assert DOC.exists(), f"missing {DOC}; run {REGENERATE}"
    assert c.render_markdown() == DOC.read_text(encoding="utf-8"), f"stale: run {REGENERATE}"


def test_module_entry_point_prints_the_reference_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "seamscope.telemetry.conventions"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert c.render_markdown() == out.stdout


def test_reference_table_lists_every_name() -> None:
    table = c.render_markdown()
    names = [*c.SPANS, *c.ATTRIBUTES, *c.EVENTS, *c.LOG_EVENTS, *(s.name for s in c.METRICS)]
    assert [] == [name for name in names if f"`{name}`" not in table]
    # a histogram's row names its three series: ``<name>_bucket/_sum/_count``
    assert [] == [s.prometheus for s in c.METRICS if f"`{s.prometheus}" not in table]


@pytest.mark.parametrize(
    ("kind", "keys"),
    [
        ("attribute keys", set(c.ATTRIBUTES)),
        ("span names", set(c.SPANS)),
        ("span event names", set(c.EVENTS)),
        ("log event names", set(c.LOG_EVENTS)),
        ("metric names", {spec.name for spec in c.METRICS}),
        # metric attributes and metric names meet in one Prometheus series
        (
            "metric names with their attribute keys",
            {spec.name for spec in c.METRICS} | {a for spec in c.METRICS for a in spec.attributes},
        ),
    ],
)
def test_no_key_is_both_a_leaf_and_a_prefix(kind: str, keys: set[str]) -> None:
    # OpenTelemetry's naming rule: a name is either a namespace or a leaf.
    # Span names and attribute keys live in separate namespaces (a span named
    # ``seamscope.stage`` carrying ``seamscope.stage.name`` follows the rule),
    # so each namespace is checked on its own.
    assert [] == _leaf_prefix_clashes(keys), kind


def test_leaf_prefix_check_can_fail() -> None:
    assert [("a.b", "a.b.c")] == _leaf_prefix_clashes({"a.b", "a.b.c", "a.bc"})


def test_every_public_name_exists() -> None:
    assert [] == [name for name in c.__all__ if not hasattr(c, name)]
    assert len(set(c.__all__)) == len(c.__all__)


def test_every_constant_is_exported_and_collected() -> None:
    constants = {
        name
        for name, value in vars(c).items()
        if name.startswith(("ATTR_", "SPAN_", "EVENT_", "LOG_", "METRIC_"))
        and isinstance(value, str | c.MetricSpec)
    }
    assert set() == constants - set(c.__all__)
    collected = set(c.ATTRIBUTES) | set(c.SPANS) | set(c.EVENTS) | set(c.LOG_EVENTS)
    collected |= {spec.name for spec in c.METRICS}
    values = {getattr(c, name) for name in constants}
    assert set() == {v.name if isinstance(v, c.MetricSpec) else v for v in values} - collected


def test_names_are_namespaced_and_unique() -> None:
    own = [*c.SPANS, *c.EVENTS, *c.LOG_EVENTS, *(spec.name for spec in c.METRICS)]
    assert [] == [name for name in own if not name.startswith("seamscope.")]
    assert [] == [
        key for key in c.ATTRIBUTES if not key.startswith(("seamscope.", "gen_ai.", "error."))
    ]
    assert len(set(c.ATTRIBUTES)) == len(c.ATTRIBUTES)
    assert len({spec.name for spec in c.METRICS}) == len(c.METRICS)


# GenAI names merged upstream (github.com/open-telemetry/semantic-conventions-genai)
# that the installed opentelemetry-semantic-conventions (0.66b2, the newest on PyPI)
# does not have yet: the name -> the constant the package will name it by.
MERGED_UPSTREAM = {
    # semantic-conventions-genai #440 renamed gen_ai.usage.cache_creation.input_tokens
    "gen_ai.usage.cache_write.input_tokens": "GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS",
}


def _installed_attribute_names() -> dict[str, str]:
    names = {
        value: name
        for name, value in vars(gen_ai_attributes).items()
        if name.startswith("GEN_AI_") and isinstance(value, str)
    }
    names[error_attributes.ERROR_TYPE] = "ERROR_TYPE"
    return names


def _otel_attribute_names() -> dict[str, str]:
    return {**_installed_attribute_names(), **MERGED_UPSTREAM}


def test_merged_upstream_names_are_only_those_the_installed_package_lacks() -> None:
    # when the package catches up, its own constant replaces the entry here
    assert [] == [name for name in MERGED_UPSTREAM if name in _installed_attribute_names()]


@pytest.mark.parametrize(
    "constant",
    sorted(
        name
        for name, value in vars(c).items()
        if name.startswith("ATTR_")
        and isinstance(value, str)
        and value.startswith(("gen_ai.", "error."))
    ),
)
def test_opentelemetry_names_are_reused_not_redefined(constant: str) -> None:
    value = getattr(c, constant)
    otel = _otel_attribute_names()
    assert value in otel, f"{constant}={value!r} is not an OpenTelemetry attribute"
    expected_constant = "ATTR_" + otel[value]
    assert expected_constant == constant


def test_own_attribute_keys_do_not_shadow_opentelemetry() -> None:
    otel = set(_otel_attribute_names())
    own = [key for key in c.ATTRIBUTES if key.startswith("seamscope.")]
    assert [] == [key for key in own if key.split(".", 1)[1] in otel]


def test_metric_attributes_are_known_attribute_keys() -> None:
    assert [] == [
        (spec.name, attr)
        for spec in c.METRICS
        for attr in spec.attributes
        if attr not in c.ATTRIBUTES
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (c.METRIC_POLICY_EVALUATIONS, "seamscope_policy_evaluations_total"),
        (c.METRIC_OFFLOAD_PREDICTED_NET_SAVING, "seamscope_offload_predicted_net_saving_total"),
        (c.METRIC_DECISION_DURATION, "seamscope_decision_duration_seconds"),
    ],
)
def test_prometheus_names(spec: c.MetricSpec, expected: str) -> None:
    assert expected == spec.prometheus


def test_units_are_ucum_and_buckets_explicit() -> None:
    counters = [spec for spec in c.METRICS if spec.kind == "counter"]
    assert [] == [s.name for s in counters if not (s.unit.startswith("{") and s.unit.endswith("}"))]
    assert ["{turn}", "s"] == [spec.unit for spec in c.METRICS if spec.kind == "histogram"]
    buckets = list(c.DECISION_DURATION_BUCKETS)
    assert sorted(set(buckets)) == buckets
    assert 0 < buckets[0] < 0.0001 and buckets[-1] >= 1.0
    turns = list(c.REMAINING_TURNS_BUCKETS)
    assert sorted(set(turns)) == turns
    assert list(range(0, 33)) == turns[:33]  # one bucket per whole turn up to 32


CORE_ENUMS = {
    "GuardResult",
    "MiddlewareDecisionKind",
    "OffloadMechanism",
    "OffloadCostKind",
    "OffloadOutcome",
    "OffloadReasonCode",
    "PaletteVerdict",
    "PolicyResult",
    "PricingSource",
    "PriorSource",
    "RecallStatus",
    "Seam",
    "SettleTrigger",
    "StageOutcomeKind",
    "WinnerSource",
}
TELEMETRY_ENUMS = {"CacheUsage", "DecisionKind", "SelectionSet", "ShadowBasis"}


def test_closed_value_sets_are_the_cores_string_enums() -> None:
    from seamscope.decisions import records

    def enums_of(module: object) -> dict[str, type[enum.Enum]]:
        return {
            n: v
            for n, v in ((n, getattr(module, n)) for n in dir(module))
            if isinstance(v, type) and issubclass(v, enum.Enum)
        }

    core = enums_of(records)
    enums = enums_of(c)
    assert CORE_ENUMS == set(core)
    assert CORE_ENUMS <= set(records.__all__)
    assert CORE_ENUMS | TELEMETRY_ENUMS == set(enums)
    assert [] == [name for name, e in enums.items() if not issubclass(e, enum.StrEnum)]
    # the core's enums are re-used, not redefined; the telemetry-only ones live here
    assert [] == [name for name in CORE_ENUMS if enums[name] is not core[name]]
    assert [] == [name for name in TELEMETRY_ENUMS if enums[name].__module__ != c.__name__]
    assert [] == [name for name in TELEMETRY_ENUMS if hasattr(records, name)]


# -- no string-literal key anywhere else -------------------------------------------


def _is_module_name(value: str) -> bool:
    """``seamscope.telemetry`` names a module (a logger's name), not a telemetry key."""
    try:
        return importlib.util.find_spec(value.rstrip(".")) is not None
    except (ImportError, ValueError):
        return False


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _literal_keys(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and KEY_LITERAL.fullmatch(node.value)
            and not _is_module_name(node.value)
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_no_string_literal_keys_outside_conventions() -> None:
    files = sorted((SRC / "telemetry").rglob("*.py")) + sorted((SRC / "adapters").rglob("*.py"))
    assert files
    assert [] == [
        hit for path in files if path.name != "conventions.py" for hit in _literal_keys(path)
    ]


def test_literal_key_scan_finds_a_key(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Doc about seamscope.offload.fire."""\n'
        'KEY = "seamscope.offload.fire"\n'
        'LOG = "seamscope.telemetry"\n'
        'GEN = f"gen_ai.{KEY}"\n'
        'MSG = "seamscope.adapters.x needs y: pip install z"\n'
    )
    expected = ["sample.py:2: 'seamscope.offload.fire'", "sample.py:4: 'gen_ai.'"]
    assert expected == _literal_keys(sample, tmp_path)
