"""The demo's last two steps (before its summary), on its own trace: one ``whatif``
and one ``calibrate``.

* whatif: what if the gate had left ``get_logs`` outputs in the prompt (the
  logs offload that was recalled twice and lost money no longer fires);
* calibrate: the recall probability and horizon of each offloaded (tool,
  model) pair, written beside the trace as ``<stem>.priors.toml`` (with a
  minimum of one offload, so the demo's single offloads show as used).

Both print what the commands print, and the command line that does the same.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from rich.console import Console

__all__ = ["WHATIF_SET", "learn_steps", "priors_path_for"]

WHATIF_SET = "tool.get_logs.threshold_tokens=1000000"
"""The demo's whatif: the gate never offloads get_logs outputs."""


def priors_path_for(output: Path) -> Path:
    """Where the demo writes the priors file calibrated from ``output``."""
    return output.with_name(output.stem + ".priors.toml")


def _run(argv: list[str]) -> tuple[int, list[str]]:
    from seamscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue().splitlines()


def learn_steps(trace: Path, shown_as: str, priors: Path | None) -> list[str]:
    """The lines of the two steps for the demo's trace file (``shown_as`` in the
    command lines); ``priors`` None writes the priors file to a temporary place."""
    lines = [f"whatif: seamscope whatif {shown_as} --set {WHATIF_SET}"]
    code, out = _run(["whatif", str(trace), "--set", WHATIF_SET])
    lines += [f"  {line}" for line in out] if code == 0 else ["  (no offload in this run)"]
    with tempfile.TemporaryDirectory() as scratch:
        target = priors if priors is not None else Path(scratch) / "priors.toml"
        where = str(target) if priors is not None else "PRIORS.toml"
        lines.append(f"calibrate: seamscope calibrate {shown_as} --min-offloads 1 --output {where}")
        code, out = _run(["calibrate", str(trace), "--min-offloads", "1", "--output", str(target)])
        if code != 0:
            return [*lines, "  (no settled offload in this run)"]
        lines += [f"  {line}" for line in out[:-1]]
        lines.append(f"  next: seamscope whatif {shown_as} --priors {where}")
    return lines


def print_learn_steps(console: Console, trace: Path, shown_as: str, priors: Path | None) -> None:
    for line in learn_steps(trace, shown_as, priors):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
