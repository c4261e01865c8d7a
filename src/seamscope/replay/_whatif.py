"""What ``seamscope whatif`` computes: every recorded gate call decided again
under a changed configuration and every conversation re-settled on its
recorded course (see :func:`~seamscope.replay.replay`), without re-running
the agent; per conversation and in total.

The configuration changes are an :class:`Overrides` (``--set`` items read by
:func:`parse_overrides`, a priors file); prices are the default table with the
rates each conversation's spans recorded on top (the realized side), then the
``price.*`` overrides (the counterfactual side).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any, TextIO

from seamscope.decisions import PricingTable
from seamscope.replay._course import Compact, Conversation, CourseReader, Gate, Rates
from seamscope.replay._replay import GateConfig, Replay, recorded_rates, replay

__all__ = [
    "Overrides",
    "Totals",
    "counterfactual_pricing",
    "parse_overrides",
    "recorded_pricing",
    "whatif",
]

_INT_KEYS = ("threshold_tokens", "stub_tokens", "horizon", "recall_input_tokens",
             "recall_output_tokens")  # fmt: skip
_KEYS = (*_INT_KEYS, "recall_probability")
_PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
_GATED_KEYS = ("gate_evictions", "gate_offloader")  # the framework offloads the gate decides
_FIELDS = tuple(f.name for f in fields(GateConfig))
_ZERO = Decimal(0)


@functools.cache
def _default_pricing() -> PricingTable:
    """The default table (genai-prices), built once."""
    return PricingTable()


@dataclass(frozen=True, slots=True)
class Overrides:
    """What ``--set`` and ``--priors`` change."""

    gate: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, dict[str, str]] = field(default_factory=dict)
    priors: Any = None  # seamscope.decisions._priors.Priors
    applied: dict[tuple[str, str], int] = field(default_factory=dict)
    """Gate calls (and, with ``gate_evictions``/``gate_offloader``, the
    framework offloads decided again) each (tool, model) pair's prior was
    applied to."""
    seen: set[tuple[str, str]] = field(default_factory=set)
    """The (tool, model) pairs of the gate calls read."""
    gate_evictions: bool = False
    """``gate_evictions=true``: the gate decides each Deep Agents eviction again."""
    gate_offloader: bool = False
    """``gate_offloader=true``: the gate decides each Strands ``ContextOffloader``
    offload again."""
    _resolved: dict[tuple[Any, ...], GateConfig] = field(
        default_factory=dict, repr=False, compare=False
    )
    # the framework offloads whose prior was counted at the replay's first ask
    _asked: set[tuple[int, str]] = field(default_factory=set, repr=False, compare=False)

    def resolve(self, gate: Gate, recorded: GateConfig) -> GateConfig:
        changes = self.gate
        if self.priors is not None:
            pair = (gate.tool or "", gate.model)
            self.seen.add(pair)
            prior = self.priors.lookup(gate.tool, gate.model)
            if prior is not None:
                self.applied[pair] = self.applied.get(pair, 0) + 1
                changes = {
                    **changes,
                    "horizon": prior.horizon,
                    "recall_probability": prior.recall_probability,
                }
        tool = self.tools.get(gate.tool or "")
        if tool:
            changes = {**changes, **tool}
        if not changes:
            return recorded
        # the changes follow from the call's (tool, model): one config per recorded one
        key = (gate.tool, gate.model, recorded)
        found = self._resolved.get(key)
        if found is None:
            if len(self._resolved) >= 1024:
                self._resolved.clear()
            found = GateConfig(*[changes.get(name, getattr(recorded, name)) for name in _FIELDS])
            self._resolved[key] = found
        return found

    def gated(self, ev: Compact) -> tuple[int, float]:
        """The horizon and recall probability the gate decides a framework's
        offload with (a Deep Agents eviction with ``gate_evictions``, a Strands
        ``ContextOffloader`` offload with ``gate_offloader``), as the live
        opt-in gate does: its tool's calibrated prior (``--priors``), then
        ``tool.NAME.*``, else the compaction's, as ``--set`` changes them."""
        horizon, p = self.compaction(ev)
        if self.priors is not None and ev.tool:
            pair = (ev.tool, ev.model)
            self.seen.add(pair)
            prior = self.priors.lookup(ev.tool, ev.model)
            if prior is not None:
                # the replay asks twice per compaction (whether the conversation
                # changes, then its counterfactual): one decision, counted once
                key = (ev.t, ev.compaction_id)
                if key in self._asked:
                    self._asked.discard(key)
                else:
                    self._asked.add(key)
                    self.applied[pair] = self.applied.get(pair, 0) + 1
                horizon, p = prior.horizon, prior.recall_probability
        tool = self.tools.get(ev.tool or "") or {}
        return (
            int(tool.get("horizon", horizon)),
            float(tool.get("recall_probability", p)),
        )

    def compaction(self, ev: Compact) -> tuple[int, float]:
        return (
            int(self.gate.get("horizon", ev.horizon)),
            float(self.gate.get("recall_probability", ev.recall_probability)),
        )

    def priors_use(self) -> dict[str, Any] | None:
        """Which entries of the priors file were applied, and why the others were not."""
        if self.priors is None:
            return None
        minimum = self.priors.min_offloads
        applied, few, absent = [], [], []
        for prior in sorted(self.priors, key=lambda p: (p.tool, p.model)):
            pair = (prior.tool, prior.model)
            entry = {"tool": prior.tool, "model": prior.model, "offloads": prior.offloads}
            if prior.offloads < minimum:
                few.append(entry)
            elif pair not in self.seen:
                absent.append(entry)
            else:
                applied.append({**entry, "gate_calls": self.applied.get(pair, 0)})
        return {
            "version": self.priors.version,
            "entries": len(self.priors),
            "min_offloads": minimum,
            "applied": applied,
            "skipped_fewer_offloads": few,
            "skipped_not_in_input": absent,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "set": dict(self.gate),
            "tools": self.tools,
            "prices": self.prices,
            "gate_evictions": self.gate_evictions,
            "gate_offloader": self.gate_offloader,
            "priors_version": None if self.priors is None else self.priors.version,
            "priors": self.priors_use(),
        }


def _setting(key: str, text: str) -> Any:
    if key == "recall_probability":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{key} must be a number in [0, 1], got {text!r}") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{key} must be a number in [0, 1], got {text!r}")
        return value
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{key} must be an int >= 0, got {text!r}") from None
    if number < 0:
        raise ValueError(f"{key} must be an int >= 0, got {text!r}")
    return number


def parse_overrides(items: list[str], priors: Any = None) -> Overrides:
    """``KEY=VALUE`` items as :class:`Overrides` (ValueError naming the bad item)."""
    out = Overrides(priors=priors)
    for item in items:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        if key in _KEYS:
            out.gate[key] = _setting(key, text)
            continue
        if key in _GATED_KEYS:
            if text.lower() not in ("true", "false"):
                raise ValueError(f"--set {key} must be true or false, got {text!r}")
            on = text.lower() == "true"
            if key == "gate_evictions":
                out = replace(out, gate_evictions=on)
            else:
                out = replace(out, gate_offloader=on)
            continue
        head, _, rest = key.partition(".")
        name, _, leaf = rest.rpartition(".")
        if head == "tool" and name and leaf in _KEYS:
            out.tools.setdefault(name, {})[leaf] = _setting(leaf, text)
        elif head == "price" and name and leaf in _PRICE_KEYS:
            try:
                value = Decimal(text)
            except ArithmeticError:
                value = Decimal("NaN")
            if not value.is_finite() or value < 0:
                raise ValueError(f"--set {key}: a price is USD per 1M tokens >= 0, got {text!r}")
            out.prices.setdefault(name, {})[leaf] = text
        else:
            raise ValueError(
                f"--set {key}: unknown key (use {', '.join(_KEYS)}, {', '.join(_GATED_KEYS)}, "
                f"tool.NAME.KEY or price.MODEL.{'|'.join(_PRICE_KEYS)})"
            )
    return out


def _table_rows(recorded: Mapping[str, Rates]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for model, (rate_in, rate_out, read, write) in recorded.items():
        row: dict[str, Any] = {"input": rate_in, "output": rate_out}
        if read is not None:
            row["cache_read"] = read
        if write is not None:
            row["cache_write"] = write
        rows[model] = row
    return rows


def recorded_pricing(recorded: Mapping[str, Rates]) -> PricingTable:
    """The default table with the rates the loop recorded on top (see
    :func:`~seamscope.replay.recorded_rates`)."""
    return PricingTable(_table_rows(recorded)) if recorded else _default_pricing()


def counterfactual_pricing(
    overrides: Overrides, recorded: Mapping[str, Rates] | None = None
) -> PricingTable:
    """The default table with the recorded rates on top, then the ``price.*``
    overrides (a rate not given keeps the model's recorded rate, else its default)."""
    if not overrides.prices:
        return recorded_pricing(recorded or {})
    table = _table_rows(recorded or {})
    base_table = recorded_pricing(recorded or {})
    for model, rates in overrides.prices.items():
        quote = base_table.lookup(model)
        base: dict[str, Any] = {}
        if quote is not None:
            price = quote.price
            base = {"input": price.input_per_mtok, "output": price.output_per_mtok}
            if price.cache_read_per_mtok is not None:
                base["cache_read"] = price.cache_read_per_mtok
            if price.cache_write_per_mtok is not None:
                base["cache_write"] = price.cache_write_per_mtok
        merged = {**base, **rates}
        if "input" not in merged or "output" not in merged:
            raise ValueError(
                f"--set price.{model}: the model has no recorded or default price: give both "
                ".input and .output"
            )
        table[model] = merged
    return PricingTable(table)


class _Tables:
    """Per conversation: the realized table (the recorded rates) and the
    counterfactual one (the same with ``price.*`` on top), built once per set
    of recorded rates."""

    def __init__(self, overrides: Overrides, reader: CourseReader) -> None:
        self._overrides = overrides
        self._reader = reader
        self._built: dict[Any, tuple[Any, Any]] = {}

    def __call__(self, conv: Conversation) -> tuple[Any, Any]:
        if not self._built:  # the input is read: a price.* key needs a price to change
            counterfactual_pricing(self._overrides, self._reader.rates)
        recorded = {**self._reader.rates, **recorded_rates(conv)}
        key = tuple(sorted(recorded.items()))
        found = self._built.get(key)
        if found is None:
            realized = recorded_pricing(recorded)
            counterfactual = (
                counterfactual_pricing(self._overrides, recorded)
                if self._overrides.prices
                else realized
            )
            found = self._built[key] = (realized, counterfactual)
            if len(self._built) > 256:
                self._built.pop(next(iter(self._built)))
        return found


@dataclass(slots=True)
class Totals:
    conversations: int = 0
    gate_calls: int = 0
    compactions: int = 0
    recorded_fires: int = 0
    counterfactual_fires: int = 0
    newly_fired: int = 0
    no_longer_fired: int = 0
    realized: Decimal = _ZERO
    exact: Decimal = _ZERO
    expected: Decimal = _ZERO
    low: Decimal = _ZERO
    high: Decimal = _ZERO
    mismatched: int = 0
    inferred: int = 0
    evictions_gated: int = 0
    evictions_kept: int = 0
    offloader_gated: int = 0
    offloader_kept: int = 0

    def add(self, r: Replay) -> None:
        self.conversations += 1
        self.gate_calls += r.gate_calls
        self.compactions += r.compactions
        self.recorded_fires += r.recorded_fires
        self.counterfactual_fires += r.counterfactual_fires
        self.newly_fired += len(r.newly_fired)
        self.no_longer_fired += len(r.no_longer_fired)
        self.realized += r.realized_usd
        self.exact += r.counterfactual_exact_usd
        self.expected += r.counterfactual_expected_usd
        self.low += r.counterfactual_low_usd
        self.high += r.counterfactual_high_usd
        self.mismatched += len(r.mismatches())
        self.inferred += int(r.inferred_carry and (r.gate_calls or r.compactions) > 0)
        self.evictions_gated += r.evictions_gated
        self.evictions_kept += len(r.evictions_kept)
        self.offloader_gated += r.offloader_gated
        self.offloader_kept += len(r.offloader_kept)


def whatif(
    sources: Iterable[tuple[str, TextIO]],
    overrides: Overrides,
    each: Callable[[Replay], None],
    *,
    query: Callable[[CourseReader], None] | None = None,
) -> tuple[Totals, CourseReader]:
    """Re-price every conversation of ``sources`` ((name, text handle) pairs, then
    what ``query`` feeds the reader): ``each`` is given each conversation's
    :class:`Replay` as it closes (one with a gate call or a compaction), and the
    totals are returned with the reader (its lines, problems and duplicates)."""
    totals = Totals()

    def finish(conv: Conversation) -> None:
        realized, counterfactual = tables(conv)
        r = replay(
            conv,
            overrides.resolve,
            realized_pricing=realized,
            counterfactual_pricing=counterfactual,
            resolve_compaction=overrides.compaction,
            gate_evictions=overrides.gated if overrides.gate_evictions else False,
            gate_offloader=overrides.gated if overrides.gate_offloader else False,
        )
        if not (r.gate_calls or r.compactions):
            return
        totals.add(r)
        each(r)

    reader = CourseReader(finish)
    tables = _Tables(overrides, reader)
    for name, handle in sources:
        reader.read(handle, name)
    if query is not None:
        query(reader)
    reader.close_all()
    return totals, reader
