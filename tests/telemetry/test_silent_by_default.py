"""A library is silent: with structlog and logging both unconfigured, a loop
that logs a contained error prints nothing; once the application configures
stdlib logging, the same events show there (and with structlog configured,
through structlog: the other tests' ``capture_logs``)."""

from __future__ import annotations

import os
import subprocess
import sys

from seamscope.telemetry import conventions as c

LOOP = """
import logging, sys
if sys.argv[1] == "logging":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
from seamscope.adapters import DecisionLayer
from seamscope.decisions import Message, ModelConfig, ToolCallPolicy
from seamscope.telemetry import configure

def vip(ctx):
    return ctx.scope["tier"] == "vip"  # no tier in the scope: KeyError, contained

telemetry = configure(service_name="quiet", set_global=False, register_atexit=False)
layer = DecisionLayer(default_model="claude-opus-4-6", agent_name="quiet", telemetry=telemetry,
                      policies=[ToolCallPolicy(name="vip", match=vip, model=ModelConfig("m"))])
with layer.turn("conv-1", [Message("user", "hello")]) as turn:
    with turn.iteration() as it:
        it.pre_model()
telemetry.shutdown()
"""


def _run(mode: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SEAMSCOPE_"))}
    done = subprocess.run(
        [sys.executable, "-c", LOOP, mode], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_nothing_is_printed_until_the_application_configures_logging() -> None:
    assert (0, "", "") == _run("unconfigured")


def test_configured_stdlib_logging_shows_the_events() -> None:
    code, out, err = _run("logging")
    [line] = [line for line in err.splitlines() if c.LOG_POLICY_ERROR in line]
    assert (0, "", True) == (code, out, line.startswith("seamscope WARNING "))
