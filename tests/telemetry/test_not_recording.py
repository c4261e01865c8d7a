"""A span that is not recording costs no attribute building."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from seamscope.decisions import NoopObserver
from seamscope.telemetry import _attributes

from . import _support as s

BUILDERS = (
    "policy_summary",
    "selection_attributes",
    "stage_attributes",
    "dispatch_attributes",
    "gate_attributes",
)


@pytest.mark.parametrize(("sampler", "recording"), [(ALWAYS_OFF, False), (ALWAYS_ON, True)])
def test_end_attributes_are_built_only_for_recording_spans(
    sampler: Any, recording: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[str, int] = dict.fromkeys(BUILDERS, 0)
    for name in BUILDERS:
        real = getattr(_attributes, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(_attributes, name, counted)
    provider = TracerProvider(sampler=sampler)
    result = s.run(tracer_provider=provider)
    # the scripted iteration: PRE + two dispatches, one pipeline of six stages,
    # two gate calls
    expected = {
        "policy_summary": 3,
        "selection_attributes": 1,
        "stage_attributes": 6,
        "dispatch_attributes": 2,
        "gate_attributes": 2,
    }
    assert (expected if recording else dict.fromkeys(BUILDERS, 0)) == calls
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)
