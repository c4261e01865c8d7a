"""``python -m seamscope``."""

from seamscope.cli import run

__all__: list[str] = []

run()
