"""Model prices for the offload gate and the ledger.

Rates are USD per 1M tokens, held as :class:`~decimal.Decimal` so sums over
many records cannot drift and a verdict cannot be flipped by float
rounding. Lookup order: the user's override table first, then the
genai-prices package's bundled snapshot (used offline: seamscope never
fetches prices at run time). A model neither table knows is unpriced.

A rate is a finite number >= 0: an int, a float (read by its shortest
repr), a numeric str or a Decimal. NaN, infinities, negatives, bools and
anything else fail at construction with a ValueError naming the field (and,
in a :class:`PricingTable`, the model), so a bad override can never reach
the gate's arithmetic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from seamscope.decisions import _checks as _c
from seamscope.decisions.records import PricingSource

__all__ = ["MILLION", "ModelPrice", "PriceQuote", "PricingTable", "to_decimal"]

MILLION = Decimal(1_000_000)


def to_decimal(value: Any, field: str = "value") -> Decimal:
    """An exact Decimal for an int, float, str or Decimal (floats via repr).

    The one rule by which the gate and the ledger read a number as money or a
    probability: a figure computed elsewhere with it (``seamscope whatif``'s)
    sums to the same Decimal. The result may be NaN or infinite;
    :class:`ModelPrice` refuses those.
    """
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number, got bool")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str):
        try:
            return Decimal(value)
        except ArithmeticError:
            raise ValueError(f"{field} must be a number, got {value!r}") from None
    raise ValueError(f"{field} must be a number, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Per-1M-token USD rates of one model (cache rates optional).

    Each rate is stored as a Decimal; see the module docstring for what a
    rate may be.
    """

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache_read_per_mtok: Decimal | None = None
    cache_write_per_mtok: Decimal | None = None

    def __post_init__(self) -> None:
        for name in (
            "input_per_mtok",
            "output_per_mtok",
            "cache_read_per_mtok",
            "cache_write_per_mtok",
        ):
            raw = getattr(self, name)
            if raw is None and name.startswith("cache"):
                continue
            expected = "a finite number >= 0 (USD per 1M tokens)"
            try:
                value = to_decimal(raw, f"ModelPrice.{name}")
            except ValueError:
                raise _c.fail("ModelPrice", name, expected, raw) from None
            if not value.is_finite() or value < 0:
                raise _c.fail("ModelPrice", name, expected, raw)
            object.__setattr__(self, name, value)

    @property
    def rates(self) -> tuple[Decimal, Decimal, Decimal | None, Decimal | None]:
        """(input, output, cache read, cache write) USD per 1M tokens, as given."""
        return (
            self.input_per_mtok,
            self.output_per_mtok,
            self.cache_read_per_mtok,
            self.cache_write_per_mtok,
        )

    @property
    def input_rate(self) -> Decimal:
        """USD per input token."""
        return self.input_per_mtok / MILLION

    @property
    def output_rate(self) -> Decimal:
        """USD per output token."""
        return self.output_per_mtok / MILLION

    @property
    def cache_read_rate(self) -> Decimal:
        """USD per cache-read token (the input rate when unknown)."""
        rate = self.cache_read_per_mtok
        return self.input_rate if rate is None else rate / MILLION

    @property
    def cache_write_rate(self) -> Decimal:
        """USD per cache-write token (the input rate when unknown)."""
        rate = self.cache_write_per_mtok
        return self.input_rate if rate is None else rate / MILLION


@dataclass(frozen=True, slots=True)
class PriceQuote:
    """A model's price and which table it came from."""

    model: str
    price: ModelPrice
    source: PricingSource


def _as_decimal_rate(value: Any) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return value
    base = getattr(value, "base", None)  # genai-prices tiered prices
    return base if isinstance(base, Decimal) else None


@functools.lru_cache(maxsize=512)
def _genai_prices_lookup(model: str) -> ModelPrice | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a hard dependency
        return None
    try:
        calc = calc_price(Usage(input_tokens=0, output_tokens=0), model_ref=model)
    except Exception:
        return None
    mp = calc.model_price
    input_rate = _as_decimal_rate(getattr(mp, "input_mtok", None))
    output_rate = _as_decimal_rate(getattr(mp, "output_mtok", None))
    if input_rate is None or output_rate is None:
        return None
    try:
        return ModelPrice(
            input_rate,
            output_rate,
            _as_decimal_rate(getattr(mp, "cache_read_mtok", None)),
            _as_decimal_rate(getattr(mp, "cache_write_mtok", None)),
        )
    except ValueError:  # a row seamscope cannot use is unpriced
        return None


_RATE_KEYS = frozenset({"input", "output", "cache_read", "cache_write"})


class PricingTable:
    """Resolve a model name to a :class:`PriceQuote`, or None when unpriced.

    ``overrides`` maps a model name to a ModelPrice (or a mapping with keys
    ``input``, ``output``, optional ``cache_read``, ``cache_write``, USD per
    1M tokens). ``use_genai_prices=False`` limits pricing to the overrides.
    A bad override fails with a ValueError naming ``PricingTable.overrides``,
    the model and the field.
    """

    __slots__ = ("_overrides", "_use_genai_prices")

    def __init__(
        self,
        overrides: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None,
        *,
        use_genai_prices: bool = True,
    ) -> None:
        _c.mapping("PricingTable", "overrides", overrides)
        table: dict[str, ModelPrice] = {}
        for model, price in (overrides or {}).items():
            if not isinstance(model, str) or not model.strip():
                raise _c.fail("PricingTable", "overrides", "keyed by non-empty model names", model)
            field = f"overrides[{model!r}]"
            if isinstance(price, Mapping):
                unknown = sorted(str(k) for k in set(price) - _RATE_KEYS)
                if unknown:
                    raise ValueError(
                        f"PricingTable.{field} must have only the keys input, output, "
                        f"cache_read, cache_write, got unknown {unknown}"
                    )
                if "input" not in price or "output" not in price:
                    raise ValueError(
                        f"PricingTable.{field} needs 'input' and 'output' (USD per 1M tokens), "
                        f"got keys {sorted(str(k) for k in price)}"
                    )
                try:
                    price = ModelPrice(
                        price["input"],
                        price["output"],
                        price.get("cache_read"),
                        price.get("cache_write"),
                    )
                except ValueError as exc:
                    raise ValueError(f"PricingTable.{field}: {exc}") from None
            if not isinstance(price, ModelPrice):
                raise _c.fail("PricingTable", field, "a ModelPrice or a mapping of rates", price)
            table[model] = price
        self._overrides = table
        self._use_genai_prices = _c.flag("PricingTable", "use_genai_prices", use_genai_prices)

    def lookup(self, model: str) -> PriceQuote | None:
        """The model's price, overrides first, then genai-prices."""
        price = self._overrides.get(model)
        if price is not None:
            return PriceQuote(model, price, PricingSource.OVERRIDE)
        if self._use_genai_prices and model:
            found = _genai_prices_lookup(model)
            if found is not None:
                return PriceQuote(model, found, PricingSource.GENAI_PRICES)
        return None


DEFAULT_PRICING = PricingTable()
