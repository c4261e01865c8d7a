"""The reference table of the conventions (docs/semantic-conventions.md), built
from the conventions module's names and the docstrings under them."""

from __future__ import annotations

import enum
import inspect
from types import ModuleType
from typing import Any

__all__ = ["render"]


def render(module: ModuleType) -> str:
    """The reference table of every name of the conventions ``module``, as
    committed in docs/semantic-conventions.md (the module is passed in, so this
    one does not import it back)."""
    c: Any = module
    source = inspect.getsource(module)
    docs: dict[str, str] = {}
    lines = source.splitlines()
    for i, line in enumerate(lines):
        head = line.split(":", 1)[0].strip()
        if head.isidentifier() and head.isupper() and ": Final" in line:
            j = i + 1
            # a constant spanning several lines ends at the first line
            # that closes it; its docstring follows.
            while j < len(lines) and not lines[j].lstrip().startswith('"""'):
                if lines[j] and not lines[j].startswith((" ", ")")):
                    break
                j += 1
            if j < len(lines) and lines[j].lstrip().startswith('"""'):
                docs[head] = lines[j].strip().strip('"')

    out = [
        "# seamscope semantic conventions",
        "",
        "Generated from `src/seamscope/telemetry/conventions.py` by",
        "`python -m seamscope.telemetry.conventions`. Do not edit by hand.",
        "",
        "## Spans",
        "",
        "| name | constant | meaning |",
        "|---|---|---|",
    ]
    for key, value in vars(module).items():
        if key.startswith("SPAN_") and isinstance(value, str):
            out.append(f"| `{value}` | `{key}` | {docs.get(key, '')} |")
    out += ["", "## Attributes", "", "| key | constant | meaning |", "|---|---|---|"]
    for key, value in vars(module).items():
        if key.startswith("ATTR_") and isinstance(value, str):
            out.append(f"| `{value}` | `{key}` | {docs.get(key, '')} |")
    out += ["", "## Span events", "", "| name | constant | meaning |", "|---|---|---|"]
    for key, value in vars(module).items():
        if key.startswith("EVENT_") and isinstance(value, str):
            out.append(f"| `{value}` | `{key}` | {docs.get(key, '')} |")
    out += ["", "## Log events (structlog)", "", "| event | constant | meaning |", "|---|---|---|"]
    for key, value in vars(module).items():
        if key.startswith("LOG_") and isinstance(value, str):
            out.append(f"| `{value}` | `{key}` | {docs.get(key, '')} |")
    out += [
        "",
        "## Metrics",
        "",
        "| OTel name | Prometheus series | kind | unit | attributes | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for spec in c.METRICS:
        attrs = ", ".join(f"`{a}`" for a in spec.attributes)
        prom = spec.prometheus
        if spec.kind == "histogram":
            prom += "_bucket/_sum/_count"
        out.append(
            f"| `{spec.name}` | `{prom}` | {spec.kind} | `{spec.unit}` | {attrs} | "
            f"{spec.description} |"
        )
    buckets = ", ".join(str(b) for b in c.DECISION_DURATION_BUCKETS)
    out += ["", f"Histogram buckets (s): {buckets}.", "", "## Closed value sets", ""]
    for key, value in vars(module).items():
        if isinstance(value, type) and issubclass(value, enum.StrEnum):
            members = ", ".join(f"`{m.value}`" for m in value)
            doc = (value.__doc__ or "").strip().splitlines()[0]
            out.append(f"- `{key}`: {members}. {doc}")
    out += ["", f"A capped metric attribute folds its tail into `{c.OTHER}`.", ""]
    out += [
        f"`error.type` values of seamscope's own: `{c.TOOL_ERROR_RESULT}` "
        f"({docs.get('TOOL_ERROR_RESULT', '')}) `{c.TOOL_CALL_BLOCKED}` "
        f"({docs.get('TOOL_CALL_BLOCKED', '')}) `{c.TOOL_CALL_CANCELLED}` "
        f"({docs.get('TOOL_CALL_CANCELLED', '')}) `{c.ABANDONED_RUN}` "
        f"({docs.get('ABANDONED_RUN', '')})",
        "",
    ]
    return "\n".join(out)
