"""The framework-free API, kept importable here: it lives in :mod:`seamscope.loop`."""

from seamscope.loop import ChatCall, DecisionLayer, Iteration, Turn, estimate_tokens

__all__ = ["ChatCall", "DecisionLayer", "Iteration", "Turn", "estimate_tokens"]
