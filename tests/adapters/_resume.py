"""What the tests of runs resumed at their tools price by hand: one model at
$5 / $25 per 1M input / output tokens, and the recall such a run must charge
as one uninterrupted worker charges it."""

from __future__ import annotations

from decimal import Decimal

from seamscope.decisions import PricingTable

__all__ = ["RATE_IN", "RATE_OUT", "RECALL_OUTPUT", "prices", "recall_cost"]

RATE_IN = Decimal("5") / 1_000_000
RATE_OUT = Decimal("25") / 1_000_000
RECALL_OUTPUT = 30  # the output tokens of the model call that emits the recall


def prices(model: str) -> PricingTable:
    """``model`` at the two rates, and no other."""
    return PricingTable({model: {"input": 5, "output": 25}}, use_genai_prices=False)


def recall_cost(chars: int, output_tokens: int = RECALL_OUTPUT) -> Decimal:
    """A recall bringing ``chars`` characters back (chars / 4 tokens of input)
    with the output of the model call that emitted it."""
    return Decimal(chars) / 4 * RATE_IN + output_tokens * RATE_OUT
