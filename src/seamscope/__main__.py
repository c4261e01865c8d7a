"""``python -m seamscope``."""

from seamscope.cli import run

run()
