"""The description of one instrument (kept apart from the names in conventions)."""

from __future__ import annotations

__all__ = ["MetricSpec"]


class MetricSpec:
    """One instrument: its OTel name, kind, unit, description, attributes.

    ``prometheus`` is the series name the OpenTelemetry Prometheus exporter
    really produces (checked against a real Prometheus in the end-to-end
    tests): dots become underscores, counters get ``_total``, a braced unit
    is dropped, ``s`` becomes ``_seconds``.
    """

    __slots__ = ("attributes", "description", "kind", "name", "unit")

    def __init__(
        self,
        name: str,
        kind: str,
        unit: str,
        description: str,
        attributes: tuple[str, ...],
    ) -> None:
        self.name = name
        self.kind = kind
        self.unit = unit
        self.description = description
        self.attributes = attributes

    @property
    def prometheus(self) -> str:
        base = self.name.replace(".", "_")
        if self.unit == "s":
            base += "_seconds"
        elif self.unit and not self.unit.startswith("{"):
            base += "_" + self.unit
        if self.kind == "counter":
            base += "_total"
        return base

    def __repr__(self) -> str:
        return f"MetricSpec({self.name!r}, {self.kind!r}, {self.unit!r})"
