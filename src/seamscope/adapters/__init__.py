"""seamscope.adapters."""
