"""Calibrated gate priors: a small, reviewable, versioned TOML file.

``seamscope calibrate`` writes it from realized settlements; a person reviews
it (it is meant to be committed and diffed); :class:`OffloadGate`
(``priors=``) loads it. Format 1::

    format = 1                      # this layout
    version = "2026-12-01.1"        # any string; every gate span records it
    min_offloads = 20               # evidence needed before a pair is used
    generated_by = "seamscope calibrate"
    sources = ["trace.jsonl"]
    source = "prometheus"           # only when read from Prometheus (not read
                                    # by the gate; ``sources`` then lists the
                                    # PromQL queries)

    [[priors]]
    tool = "get_logs"
    model = "gpt-4o"
    horizon = 7                     # median remaining turns (model calls)
    recall_probability = 0.4167     # Beta posterior mean
    offloads = 120                  # settled offloads behind the numbers

    [priors.evidence]               # how the numbers were reached (not read
    recalled = 50                   # by the gate; for the reviewer)
    ...

A (tool, model) pair is used only with at least ``min_offloads`` offloads
behind it (:data:`DEFAULT_MIN_OFFLOADS` when the file does not say); any
other call keeps the gate's own horizon and recall probability, and its span
says so (``prior_source`` ``default``). A file that is not valid TOML, or
whose fields are of the wrong type or out of range, fails to load with a
ValueError naming the file and the field.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MIN_OFFLOADS", "FORMAT", "PRIORS_FORMAT", "Prior", "Priors"]

FORMAT = 1
PRIORS_FORMAT = FORMAT  # the public name of the priors file's format version
"""The layout this module reads and ``calibrate`` writes."""
DEFAULT_MIN_OFFLOADS = 20
"""Settled offloads a (tool, model) pair needs before its calibrated prior is used."""


@dataclass(frozen=True, slots=True)
class Prior:
    """The calibrated horizon and recall probability of one (tool, model) pair."""

    tool: str
    model: str
    horizon: int
    recall_probability: float
    offloads: int


class Priors:
    """A loaded priors file: ``lookup(tool, model)`` gives a usable :class:`Prior` or None."""

    __slots__ = ("_entries", "min_offloads", "source", "version")

    def __init__(
        self,
        entries: Mapping[tuple[str, str], Prior],
        *,
        version: str,
        min_offloads: int = DEFAULT_MIN_OFFLOADS,
        source: str = "<priors>",
    ) -> None:
        self._entries = dict(entries)
        self.version = version
        self.min_offloads = min_offloads
        self.source = source

    def lookup(self, tool: str | None, model: str) -> Prior | None:
        """The pair's prior when it has at least ``min_offloads`` offloads behind it."""
        if tool is None:
            return None
        prior = self._entries.get((tool, model))
        if prior is None or prior.offloads < self.min_offloads:
            return None
        return prior

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Any:
        return iter(self._entries.values())

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Priors:
        """Read a priors file (ValueError naming the file and field when it is bad)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"priors file {path}: {exc.strerror or exc}") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<priors>") -> Priors:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"priors file {source}: not valid TOML ({exc})") from None

        def fail(field: str, expected: str, value: object) -> ValueError:
            return ValueError(f"priors file {source}: {field} must be {expected}, got {value!r}")

        fmt = data.get("format")
        if fmt != FORMAT:
            raise fail("format", f"{FORMAT}", fmt)
        version = data.get("version")
        if not isinstance(version, str) or not version:
            raise fail("version", "a non-empty string", version)
        minimum = data.get("min_offloads", DEFAULT_MIN_OFFLOADS)
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1:
            raise fail("min_offloads", "an int >= 1", minimum)
        rows = data.get("priors", [])
        if not isinstance(rows, list):
            raise fail("priors", "an array of tables ([[priors]])", rows)
        entries: dict[tuple[str, str], Prior] = {}
        for i, row in enumerate(rows):
            where = f"priors[{i}]"
            if not isinstance(row, dict):
                raise fail(where, "a table", row)
            tool, model = row.get("tool"), row.get("model")
            if not isinstance(tool, str) or not tool:
                raise fail(f"{where}.tool", "a non-empty string", tool)
            if not isinstance(model, str) or not model:
                raise fail(f"{where}.model", "a non-empty string", model)
            horizon = row.get("horizon")
            if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 0:
                raise fail(f"{where}.horizon", "an int >= 0 (turns)", horizon)
            p = row.get("recall_probability")
            if (
                isinstance(p, bool)
                or not isinstance(p, int | float)
                or not math.isfinite(p)
                or not 0 <= p <= 1
            ):
                raise fail(f"{where}.recall_probability", "a number in [0, 1]", p)
            offloads = row.get("offloads")
            if isinstance(offloads, bool) or not isinstance(offloads, int) or offloads < 0:
                raise fail(f"{where}.offloads", "an int >= 0", offloads)
            if (tool, model) in entries:
                raise fail(where, "a (tool, model) pair listed once", (tool, model))
            entries[(tool, model)] = Prior(tool, model, horizon, float(p), offloads)
        return cls(entries, version=version, min_offloads=minimum, source=source)
