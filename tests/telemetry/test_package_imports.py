"""``seamscope.telemetry`` imports its public names on first use.

So ``python -m seamscope.telemetry.conventions`` runs without runpy's
RuntimeWarning (the package no longer imports the module before runpy runs
it), and importing the conventions alone does not load the SDK.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import seamscope.telemetry as telemetry
from seamscope.telemetry import conventions as c


def _python(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_conventions_module_runs_with_warnings_as_errors() -> None:
    run = _python("-W", "error", "-m", "seamscope.telemetry.conventions")
    assert (0, "") == (run.returncode, run.stderr)
    assert c.render_markdown() == run.stdout
    assert run.stdout.startswith("# seamscope semantic conventions\n")
    assert f"`{c.SPAN_OFFLOAD_GATE}`" in run.stdout


def test_importing_the_conventions_loads_neither_the_sdk_nor_the_observer() -> None:
    probe = (
        "import sys, seamscope.telemetry.conventions\n"
        "print(sorted(m for m in ('opentelemetry.sdk', 'opentelemetry.sdk.trace', 'structlog',"
        " 'seamscope.telemetry._observer', 'seamscope.telemetry._configure') if m in sys.modules))"
    )
    run = _python("-W", "error", "-c", probe)
    assert (0, "", "[]\n") == (run.returncode, run.stderr, run.stdout)


@pytest.mark.parametrize("name", telemetry.__all__)
def test_every_public_name_resolves_in_a_fresh_interpreter(name: str) -> None:
    run = _python(
        "-W",
        "error",
        "-c",
        f"from seamscope.telemetry import {name}; import seamscope.telemetry as t; "
        f"print({name} is getattr(t, {name!r}), {name}.__module__)",
    )
    assert 0 == run.returncode, run.stderr
    assert run.stdout.startswith("True seamscope.telemetry._"), run.stdout


def test_public_names_are_the_modules_own_objects() -> None:
    from seamscope.telemetry import _configure, _observer

    assert _configure.configure is telemetry.configure
    assert _configure.TelemetryHandle is telemetry.TelemetryHandle
    assert _observer.OTelObserver is telemetry.OTelObserver
    assert set(telemetry.__all__) <= set(dir(telemetry))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"'seamscope\.telemetry' has no attribute 'nope'"):
        telemetry.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from seamscope.telemetry import nope", {})
