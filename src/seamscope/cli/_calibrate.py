"""``seamscope calibrate``: placeholder replaced below."""

from __future__ import annotations

from typing import Any

__all__ = ["add_calibrate_parser", "run_calibrate"]


def add_calibrate_parser(sub: Any) -> None:
    sub.add_parser("calibrate", help="(not yet)")


def run_calibrate(args: Any, console: Any, err: Any) -> int:
    return 2
