"""Values of the wrong type the loop hands the framework-free API are contained
and recorded (a ``seamscope.telemetry.error`` event naming the field), never
raised into the loop; the decisions stay those of well-typed values."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from seamscope.adapters import DecisionLayer
from seamscope.decisions import ModelUsage
from seamscope.telemetry import conventions as c


def _iteration(layer: DecisionLayer, conversation: Any, usage: Any, output: Any) -> Any:
    with layer.turn(conversation, []) as turn, turn.iteration() as it:
        it.select_tools(["search"])
        it.pre_model()
        with it.chat() as call:
            call.report(usage)
        post = it.post_model([{"id": "c1", "name": "search", "args": "not json"}])
        return post, it.offload(post.calls[0], output)


@pytest.mark.parametrize(
    ("conversation", "usage", "output", "field"),
    [
        ({"user": 7}, ModelUsage(10, 1), "short output", "conversation_id"),
        ("conv-1", None, "short output", "usage"),
        ("conv-1", ModelUsage(10, 1), None, "output"),
    ],
    ids=["dict-conversation-id", "report-none", "offload-none"],
)
def test_a_wrong_type_is_recorded_not_raised(
    tracer_provider: Any, conversation: Any, usage: Any, output: Any, field: str
) -> None:
    layer = DecisionLayer(default_model="claude-opus-4-6", tracer_provider=tracer_provider)
    with capture_logs() as logs:
        post, decision = _iteration(layer, conversation, usage, output)
    errors = [e["field"] for e in logs if e["event"] == c.LOG_TELEMETRY_ERROR]
    assert ([field], "search", {"__raw__": "not json"}, False) == (
        errors,
        post.calls[0].name,
        dict(post.calls[0].args),
        decision.fire,
    )


def test_a_layer_built_without_any_tracer_provider_says_so_once() -> None:
    """No provider passed and none set globally: one RuntimeWarning, not silence."""
    import subprocess
    import sys

    script = (
        "import warnings\n"
        "warnings.simplefilter('default')\n"
        "from seamscope.adapters import DecisionLayer\n"
        "for _ in range(3):\n"
        "    DecisionLayer(default_model='claude-opus-4-6')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (0, 1) == (done.returncode, done.stderr.count("RuntimeWarning: DecisionLayer")), (
        done.stderr
    )


def test_a_refused_layer_says_only_why_it_was_refused() -> None:
    """Bad configuration and no provider: the ValueError, and no RuntimeWarning
    about spans of a layer that was never built."""
    import subprocess
    import sys

    script = (
        "import warnings\n"
        "warnings.simplefilter('default')\n"
        "from seamscope.adapters import DecisionLayer\n"
        "try:\n"
        "    DecisionLayer(default_model='claude-opus-4-6', recall_probability=1.5)\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (0, True, 0) == (
        done.returncode,
        done.stdout.startswith("refused: DecisionLayer"),
        done.stderr.count("RuntimeWarning"),
    ), (done.stdout, done.stderr)
