"""The one token estimator: characters / 4, a float, never rounded.

Every size seamscope estimates from a text goes through :func:`estimate_tokens`:
a tool output the gate prices, the stub that replaced it, a recall's text, a
framework's placeholder or summary. None is rounded, so two records of the
same text always agree.
"""

from __future__ import annotations

__all__ = ["estimate_tokens"]


def estimate_tokens(text: str) -> float:
    """Tokens of a text by the usual rule of thumb: characters / 4 (unrounded)."""
    return len(text) / 4
