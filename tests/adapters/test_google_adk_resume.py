"""A Google ADK run resumed at its tools (a tool confirmation), on the worker
that asked for it or on another one: a recall ADK runs there costs what it
costs in an uninterrupted run.

ADK's own agent loop, tool confirmation (``require_confirmation=True``: ADK
asks the human with an ``adk_request_confirmation`` call and ends the
invocation; the next invocation, given the human's ``FunctionResponse``,
runs the confirmed call before any model call) and session services
(``InMemorySessionService``; ``SqliteSessionService`` for two workers); the
model is a ``ScriptedLlm`` (no network). The ledger's settlement is the
ground truth, computed by hand from the test's prices: the recall is charged
the recalled text (20 000 tokens at $5/M) and the output of the model call
that emitted it (30 tokens at $25/M).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import LlmRequest
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools import FunctionTool
from google.genai import types
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters.google_adk import SeamscopePlugin
from seamscope.loop import RECALL_TOOL, DecisionLayer
from seamscope.telemetry import conventions as c

from ._google_adk_support import BIG_REPORT_CHARS, ScriptedLlm, Step, Toolbox, call, step, text
from ._resume import RECALL_OUTPUT, prices, recall_cost

MODEL = "m-resume"
PRICES = prices(MODEL)
EXPECTED_RECALL_COST = recall_cost(BIG_REPORT_CHARS)
CONFIRMATION = "adk_request_confirmation"
_STUB = re.compile(r"\[offloaded (\S+): ")


def _offload_id(request: LlmRequest) -> str:
    """The offload id the stub in the request's contents names (what a model reads)."""
    for content in request.contents:
        for part in content.parts or ():
            response = part.function_response
            found = None if response is None else _STUB.search(str(response.response))
            if found is not None:
                return found.group(1)
    raise AssertionError("no stub in the request's contents")


def script() -> Callable[[LlmRequest, bool], Step]:
    """The model's three answers, in order, whichever worker's model serves them:
    the report, the recall of its offloaded output (30 output tokens), the answer."""
    answers: list[Callable[[LlmRequest], Step]] = [
        lambda r: step(call("big_report", {"topic": "q3"}, "b1"), usage=(1_000, 20, 0)),
        lambda r: step(
            call(RECALL_TOOL, {"offload_id": _offload_id(r)}, "r1"),
            usage=(1_500, RECALL_OUTPUT, 0),
        ),
        lambda r: step(text("Done."), usage=(2_000, 10, 0)),
    ]
    return lambda request, streamed: answers.pop(0)(request)


class Worker:
    """One worker: its own layer, plugin, agent and runner; the shared offload
    store and session service's storage. ``confirm``: the recall tool is the
    agent's, and ADK asks a human before it runs."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        answer: Callable[[LlmRequest, bool], Step],
        store: str,
        sessions: BaseSessionService,
        *,
        confirm: bool = True,
    ) -> None:
        self.layer = DecisionLayer(
            default_model=MODEL,
            pricing=PRICES,
            agent_name="lead",
            tracer_provider=tracer_provider,
            offload_store=store,
        )
        plugin = SeamscopePlugin(self.layer)
        big_report = next(t for t in Toolbox().tools() if t.__name__ == "big_report")
        tools: list[Any] = [big_report]
        if confirm:
            tools.append(FunctionTool(plugin.recall_tool.func, require_confirmation=True))
        agent = LlmAgent(name="lead", model=ScriptedLlm(model=MODEL, answer=answer), tools=tools)
        self.runner = Runner(
            app=App(name="app", root_agent=agent, plugins=[plugin]), session_service=sessions
        )

    def run(self, message: types.Content) -> tuple[str, str | None]:
        """One invocation: its last text and the confirmation call it asked for."""

        async def go() -> tuple[str, str | None]:
            last, asked = "", None
            async for event in self.runner.run_async(
                user_id="u", session_id="conv-1", new_message=message
            ):
                for function_call in event.get_function_calls():
                    if function_call.name == CONFIRMATION:
                        asked = function_call.id
                parts = event.content.parts if event.content and not event.partial else None
                last = "".join(p.text for p in parts or () if p.text) or last
            return last, asked

        return asyncio.run(go())


def _new_session(sessions: BaseSessionService) -> None:
    asyncio.run(sessions.create_session(app_name="app", user_id="u", session_id="conv-1"))


def _ask() -> types.Content:
    return types.Content(role="user", parts=[types.Part(text="look q3 up, then read it whole")])


def _confirmed(confirmation_id: str) -> types.Content:
    """The human's answer: the confirmation call's ``FunctionResponse``."""
    response = types.FunctionResponse(
        id=confirmation_id, name=CONFIRMATION, response={"confirmed": True}
    )
    return types.Content(role="user", parts=[types.Part(function_response=response)])


def test_an_uninterrupted_run_charges_the_recall_its_emitting_calls_output(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """The amount the resumed runs must match."""
    sessions = InMemorySessionService()
    _new_session(sessions)
    one = Worker(
        tracer_provider, script(), f"sqlite:///{tmp_path / 'o.db'}", sessions, confirm=False
    )
    assert ("Done.", None) == one.run(_ask())
    (settled,) = one.layer.end_conversation("conv-1")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)


def test_a_recall_a_run_resumed_at_its_tools_runs_costs_the_uninterrupted_amount(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """One worker: ADK asks for a confirmation before the recall runs and ends
    the invocation; the next one runs the confirmed recall before any model
    call (no usage of its own): charged the output of the call that emitted
    it, which the session's event of that call keeps."""
    sessions = InMemorySessionService()
    _new_session(sessions)
    one = Worker(tracer_provider, script(), f"sqlite:///{tmp_path / 'o.db'}", sessions)
    _, asked = one.run(_ask())
    assert asked is not None
    assert ("Done.", None) == one.run(_confirmed(asked))
    (settled,) = one.layer.end_conversation("conv-1")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)


def test_a_recall_a_run_resumed_on_another_worker_runs_costs_the_uninterrupted_amount(
    tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Worker A asks for the confirmation; worker B (its own layer, plugin,
    agent and runner; a ``SqliteSessionService`` on the same file, the same
    SQLite offload store) runs the confirmed recall: charged the output of
    A's model call that emitted it (its event in the session). Settled once,
    by B."""
    answer = script()
    store = f"sqlite:///{tmp_path / 'offloads.db'}"
    sessions = str(tmp_path / "sessions.db")
    _new_session(SqliteSessionService(sessions))
    worker_a = Worker(tracer_provider, answer, store, SqliteSessionService(sessions))
    _, asked = worker_a.run(_ask())
    assert asked is not None

    worker_b = Worker(tracer_provider, answer, store, SqliteSessionService(sessions))
    assert ("Done.", None) == worker_b.run(_confirmed(asked))
    (settled,) = worker_b.layer.end_conversation("conv-1")
    assert (1, EXPECTED_RECALL_COST) == (settled.recalls, settled.recall_cost)
    assert [] == worker_a.layer.end_conversation("conv-1")  # settled once, fleet-wide


def test_a_call_held_for_confirmation_did_not_run_and_its_confirmed_run_did(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """ADK answers a call that needs a confirmation with its placeholder, the
    tool's body not run: its ``execute_tool`` span says cancelled
    (``tool_call_cancelled``) and no offload gate judges the placeholder; the
    confirmed call of the next invocation ran (no error). Ground truth: the
    recall's answer reaches the model only after the confirmation."""
    sessions = InMemorySessionService()
    _new_session(sessions)
    one = Worker(tracer_provider, script(), f"sqlite:///{tmp_path / 'o.db'}", sessions)
    _, asked = one.run(_ask())
    assert asked is not None
    recall = f"execute_tool {RECALL_TOOL}"
    first = [s for s in span_exporter.get_finished_spans() if s.name == recall]
    assert [c.TOOL_CALL_CANCELLED] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in first]
    span_exporter.clear()
    assert ("Done.", None) == one.run(_confirmed(asked))
    second = [s for s in span_exporter.get_finished_spans() if s.name == recall]
    assert [None] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in second]
    gates = [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]
    assert all((g.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID) != asked for g in gates)
