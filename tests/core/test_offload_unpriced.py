"""A model no table prices switches offloading off for its turns: the gate says so
once per model, as a WARNING through stdlib logging (``seamscope.decisions``; shown
only where the application configures logging), naming the fix."""

from __future__ import annotations

import logging

import pytest

from seamscope.decisions import OffloadGate, PricingTable
from seamscope.decisions.records import OffloadReasonCode

LOGGER = "seamscope.decisions"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING
    ]


def test_one_warning_per_unpriced_model_naming_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    gate = OffloadGate()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        decisions = [gate.evaluate(30_000, "acme-local-7b") for _ in range(3)]
        gate.evaluate(30_000, "acme-local-13b")
        gate.evaluate(100, "acme-local-70b")  # below the threshold: never priced, nothing said
        gate.evaluate(30_000, "gpt-4o")  # priced: nothing said
    assert {OffloadReasonCode.UNPRICED_MODEL} == {d.reason_code for d in decisions}
    assert [
        "OffloadGate: no price for model 'acme-local-7b' (neither the gate's PricingTable nor "
        "genai-prices knows it): its large tool outputs are never offloaded. Give its rates, "
        "USD per 1M tokens: pricing=PricingTable({'acme-local-7b': {'input': ..., "
        "'output': ...}})",
        "OffloadGate: no price for model 'acme-local-13b' (neither the gate's PricingTable nor "
        "genai-prices knows it): its large tool outputs are never offloaded. Give its rates, "
        "USD per 1M tokens: pricing=PricingTable({'acme-local-13b': {'input': ..., "
        "'output': ...}})",
    ] == _warnings(caplog)


def test_each_gate_says_it_once_and_a_priced_model_never(caplog: pytest.LogCaptureFixture) -> None:
    priced = OffloadGate(pricing=PricingTable({"acme-local-7b": {"input": 1, "output": 2}}))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for gate in (OffloadGate(), OffloadGate(), priced):
            for _ in range(2):
                gate.evaluate(30_000, "acme-local-7b")
    assert 2 == len(_warnings(caplog))


def test_the_library_stays_silent_without_logging_configured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No handler of the application's: nothing reaches stderr (no lastResort print)."""
    OffloadGate().evaluate(30_000, "acme-unconfigured")
    assert ("", "") == tuple(capsys.readouterr())


def test_a_layer_says_it_once_for_all_its_turns(caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry import metrics, trace

    from seamscope.adapters import DecisionLayer
    from seamscope.decisions.records import ToolCall

    def run(layer: DecisionLayer, conversation: str) -> None:
        with layer.turn(conversation, []) as turn, turn.iteration() as it:
            it.offload(ToolCall(f"{conversation}-c", "get_logs", {}), 30_000)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2):
            layer = DecisionLayer(
                default_model="acme-local-7b",
                tracer_provider=trace.NoOpTracerProvider(),
                meter_provider=metrics.NoOpMeterProvider(),
            )
            for n in range(3):
                run(layer, f"conv-{n}")
    assert 2 == len(_warnings(caplog))
