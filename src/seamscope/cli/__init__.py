"""seamscope.cli."""
