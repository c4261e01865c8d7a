"""A Strands run resumed from an interrupt at its tools, on the worker that
was interrupted or on another one: a recall among the stored calls costs
what it costs in an uninterrupted run.

Strands' own agent loop, interrupts and ``FileSessionManager``; the model is
a ``ScriptedModel`` (no network). A hook of the user's asks a human before
``recall_tool_result`` runs; the run resumed with the answer runs the stored
call before any model call. The ledger's settlement is the ground truth,
computed by hand from the test's prices: the recall is charged the recalled
text (20 000 tokens at $5/M) and the output of the model call that emitted
it (30 tokens at $25/M).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.instrumentation.threading import ThreadingInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from strands import Agent, tool
from strands.hooks import BeforeToolCallEvent
from strands.session import FileSessionManager

from seamscope.adapters.strands import SeamscopePlugin
from seamscope.loop import RECALL_TOOL, DecisionLayer

from ._resume import RECALL_OUTPUT, prices, recall_cost
from ._strands_support import Request, ScriptedModel, Step, step, text_of, use

MODEL = "m-resume"
PRICES = prices(MODEL)
BIG = ("y" * 79 + "\n") * 1_000  # 80 000 chars: 20 000 tokens
EXPECTED_RECALL_COST = recall_cost(len(BIG))
_STUB = re.compile(r"\[offloaded (\S+): ")


@pytest.fixture(autouse=True)
def threading_left_as_found() -> Iterator[None]:
    """Strands' tracer instruments threading for the whole process when it is
    first made: undone after each test."""
    before = ThreadingInstrumentor().is_instrumented_by_opentelemetry
    yield
    if not before and ThreadingInstrumentor().is_instrumented_by_opentelemetry:
        ThreadingInstrumentor().uninstrument()


@tool
def big_report(topic: str) -> str:
    """A long report on a topic.

    Args:
        topic: The topic.
    """
    return BIG


def _offload_id(request: Request) -> str:
    """The offload id the stub in the model's messages names (what a model reads)."""
    for message in request.messages:
        for block in message.get("content") or ():
            result = block.get("toolResult")
            found = None if result is None else _STUB.match(text_of(result.get("content") or []))
            if found is not None:
                return found.group(1)
    raise AssertionError("no stub in the model's messages")


def script() -> Callable[[Request], Step]:
    """The model's three answers, in order, whichever worker's model serves them:
    the report, the recall of its offloaded output (30 output tokens), the answer."""
    answers: list[Callable[[Request], Step]] = [
        lambda r: step(use("big_report", {"topic": "q3"}, "b1"), usage=(1_000, 20, 0)),
        lambda r: step(
            use(RECALL_TOOL, {"offload_id": _offload_id(r)}, "r1"),
            usage=(1_500, RECALL_OUTPUT, 0),
        ),
        lambda r: step("Done.", usage=(2_000, 10, 0)),
    ]
    return lambda request: answers.pop(0)(request)


def approve_recalls(event: BeforeToolCallEvent) -> None:
    """The user's hook: a human approves each recall (a Strands interrupt)."""
    if event.tool_use.get("name") == RECALL_TOOL:
        event.interrupt("approve", reason="a recall needs a human")


def worker(
    tracer_provider: TracerProvider,
    answer: Callable[[Request], Step],
    store: str,
    session: FileSessionManager | None = None,
    *,
    interrupt: bool = True,
) -> tuple[Agent, DecisionLayer]:
    """One worker's agent: its own layer and plugin, the shared offload store."""
    layer = DecisionLayer(
        default_model=MODEL,
        pricing=PRICES,
        agent_name="analyst",
        tracer_provider=tracer_provider,
        offload_store=store,
    )
    plugin = SeamscopePlugin(layer, conversation="conv-s")
    agent = Agent(
        model=ScriptedModel(MODEL, answer),
        tools=[big_report],
        plugins=[plugin],
        session_manager=session,
        callback_handler=None,
    )
    if interrupt:
        agent.add_hook(approve_recalls, BeforeToolCallEvent)
    return agent, layer


def _resume(agent: Agent, first: Any) -> Any:
    (interrupt,) = first.interrupts
    return agent([{"interruptResponse": {"interruptId": interrupt.id, "response": "yes"}}])


def test_an_uninterrupted_run_charges_the_recall_its_emitting_calls_output(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """The amount the resumed runs must match."""
    agent, layer = worker(
        tracer_provider, script(), f"sqlite:///{tmp_path / 'o.db'}", interrupt=False
    )
    assert "end_turn" == agent("look q3 up, then read it whole").stop_reason
    (settled,) = layer.end_conversation("conv-s")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)


def test_a_recall_a_run_resumed_from_an_interrupt_runs_costs_the_uninterrupted_amount(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """One worker: the recall is interrupted, the resumed run (no model call
    yet, so no usage of its own) runs it; its emitting call's usage is the one
    Strands keeps on the assistant message."""
    agent, layer = worker(tracer_provider, script(), f"sqlite:///{tmp_path / 'o.db'}")
    first = agent("look q3 up, then read it whole")
    assert "interrupt" == first.stop_reason
    assert "end_turn" == _resume(agent, first).stop_reason
    (settled,) = layer.end_conversation("conv-s")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)


def test_a_recall_a_run_resumed_on_another_worker_runs_costs_the_uninterrupted_amount(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Worker A is interrupted before the recall runs; worker B (its own layer,
    plugin and agent, restored by a ``FileSessionManager`` from the same
    directory, the same SQLite offload store) resumes the run and runs the
    recall: charged the output of A's model call that emitted it (the
    session keeps it on the assistant message). Settled once, by B."""
    answer = script()
    store = f"sqlite:///{tmp_path / 'offloads.db'}"
    sessions = tmp_path / "sessions"
    agent_a, layer_a = worker(
        tracer_provider, answer, store, FileSessionManager("conv-s", storage_dir=str(sessions))
    )
    first = agent_a("look q3 up, then read it whole")
    assert "interrupt" == first.stop_reason

    agent_b, layer_b = worker(
        tracer_provider, answer, store, FileSessionManager("conv-s", storage_dir=str(sessions))
    )
    assert "end_turn" == _resume(agent_b, first).stop_reason
    (settled,) = layer_b.end_conversation("conv-s")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)
    assert [] == layer_a.end_conversation("conv-s")  # settled once, fleet-wide


def test_a_context_offloader_retrieval_a_run_resumed_on_another_worker_runs_is_its_recall(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """The ``ContextOffloader``'s offload made on worker A (its storage and the
    SQLite offload store shared); A's model asks for its content back
    (``retrieve_offloaded_content``, 60 output tokens) and a human is asked
    first. Worker B resumes the run and runs the retrieval before any model
    call: it is the offload's recall there, charged the content it brought
    back (20 000 tokens at $5/M) and the 60 output tokens of A's call that
    emitted it, as one worker charges it. Settled once, by B."""
    from strands.storage import LocalFileStorage
    from strands.vended_plugins.context_offloader import ContextOffloader

    retrieve = "retrieve_offloaded_content"
    answers: list[Step] = [
        step(use("big_report", {"topic": "q3"}, "b1"), usage=(1_000, 20, 0)),
        step(use(retrieve, {"reference": "b1_0"}, "g1"), usage=(1_500, 60, 0)),
        step("Done.", usage=(22_000, 10, 0)),
    ]
    store = f"sqlite:///{tmp_path / 'offloads.db'}"
    sessions, artifacts = str(tmp_path / "sessions"), str(tmp_path / "artifacts")

    def approve_retrievals(event: BeforeToolCallEvent) -> None:
        if event.tool_use.get("name") == retrieve:
            event.interrupt("approve", reason="a retrieval needs a human")

    def worker_with_offloader() -> tuple[Agent, DecisionLayer]:
        layer = DecisionLayer(
            default_model=MODEL,
            pricing=PRICES,
            agent_name="analyst",
            tracer_provider=tracer_provider,
            offload_store=store,
        )
        agent = Agent(
            model=ScriptedModel(MODEL, lambda r: answers.pop(0)),
            tools=[big_report],
            plugins=[
                ContextOffloader(storage=LocalFileStorage(artifacts)),
                SeamscopePlugin(layer, conversation="conv-s"),
            ],
            session_manager=FileSessionManager("conv-s", storage_dir=sessions),
            callback_handler=None,
        )
        agent.add_hook(approve_retrievals, BeforeToolCallEvent)
        return agent, layer

    agent_a, layer_a = worker_with_offloader()
    first = agent_a("look q3 up, then read it whole")
    assert "interrupt" == first.stop_reason
    agent_b, layer_b = worker_with_offloader()
    assert "end_turn" == _resume(agent_b, first).stop_reason

    (settled,) = layer_b.end_conversation("conv-s")
    assert (1, recall_cost(len(BIG), 60)) == (
        settled.recalls,
        settled.recall_cost,
    )
    assert [] == layer_a.end_conversation("conv-s")  # settled once, fleet-wide
