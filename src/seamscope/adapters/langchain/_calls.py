"""The model calls a watched middleware's own code makes: ``chat`` spans of their own.

A selector's model, a router's or a risk check's decision model, a summary
model: each call is a ``chat {model}`` span with ``gen_ai.usage.*``, a child
of the run's current iteration (of ``invoke_agent`` before the first one),
never reported to the ledger as a conversation model call.

They are found with a LangChain callback handler (:class:`DecisionCalls`)
that ``register_configure_hook`` (public ``langchain_core.tracers.context``
API) adds to every callback manager configured while :data:`DECISION_CALLS`
holds it. The watcher sets the variable only while the wrapped middleware's
own code runs, and unsets it (:func:`outside`) while the handler it passed
inward runs, so the agent's own model and tool calls never reach it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from seamscope._internal import GenAISpans, Invocation
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import BaseCallbackHandler, register_configure_hook
from seamscope.adapters.langchain._runs import HOOKS, Run
from seamscope.decisions import ModelUsage

__all__ = ["DECISION_CALLS", "DecisionCalls", "outside"]


class DecisionCalls(BaseCallbackHandler):
    """The model calls a watched middleware's own code makes, as ``chat`` spans.

    A chat model run (``on_chat_model_start``/``on_llm_start``) or a decision
    model run (``on_chain_start`` with ``run_type="llm"``, as
    ``BaseDecisionModel`` reports itself) opens a span under the run's
    current OpenTelemetry context, held open (``GenAISpans.start_chat``: the
    span is never made current in LangChain's context); its end records the
    usage and stops it, or fails it with the run's error.
    A run inside one already followed (the chat model a decision model
    calls) is not counted twice.
    """

    run_inline = True  # called where the run happens, in its context

    def __init__(self, run: Run) -> None:
        super().__init__()
        self._run = run
        self._parent = run.otel
        self._lock = threading.Lock()
        self._open: dict[Any, tuple[Invocation, str]] = {}
        self.calls: list[tuple[str, ModelUsage | None]] = []

    @property
    def first_model(self) -> str | None:
        with self._lock:
            return self.calls[0][0] if self.calls else None

    def usages(self) -> list[tuple[str, ModelUsage]]:
        with self._lock:
            return [(model, usage) for model, usage in self.calls if usage is not None]

    # -- LangChain callbacks ---------------------------------------------------------

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._start(kwargs)

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        self._start(kwargs)

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        if kwargs.get("run_type") == "llm":
            self._start(kwargs)

    @HOOKS.containing("watch.decision_model")
    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        generations = getattr(response, "generations", None) or [[]]
        message = getattr(generations[0][0], "message", None) if generations[0] else None
        usage = translate.usage(message) if message is not None else None
        model = None if message is None else translate.response_model(message)
        self._end(kwargs.get("run_id"), usage, model, None)

    @HOOKS.containing("watch.decision_model")
    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        if kwargs.get("run_id") not in self._open:
            return
        answered = getattr(outputs, "model", None)
        usage = translate.usage_of(getattr(outputs, "usage", None))
        model = answered if isinstance(answered, str) else None
        self._end(kwargs.get("run_id"), usage, model, None)

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self._end(kwargs.get("run_id"), None, None, error)

    def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        if kwargs.get("run_id") in self._open:
            self._end(kwargs.get("run_id"), None, None, error)

    # -- spans -------------------------------------------------------------------------

    @HOOKS.containing("watch.decision_model")
    def _start(self, kwargs: Mapping[str, Any]) -> None:
        run_id = kwargs.get("run_id")
        with self._lock:
            if run_id is None or kwargs.get("parent_run_id") in self._open:
                return
        model = _called_model(kwargs)
        turn = self._run.turn
        layer = turn.layer
        held = layer.genai.start_chat(
            model,
            parent=self._parent,
            provider=layer.provider_name,
            conversation_id=turn.conversation_id,
            agent_name=layer.agent_name,
        )
        with self._lock:
            self._open[run_id] = (held, model)

    @HOOKS.containing("watch.decision_model")
    def _end(
        self,
        run_id: Any,
        usage: ModelUsage | None,
        response_model: str | None,
        error: BaseException | None,
    ) -> None:
        with self._lock:
            entry = self._open.pop(run_id, None)
            if entry is not None:
                self.calls.append((entry[1], usage))
        if entry is None:
            return
        held = entry[0]
        if usage is not None:
            GenAISpans.record_usage(held.span, usage, response_model)
        if error is None:
            held.stop()
        else:
            held.fail(error)


def _called_model(kwargs: Mapping[str, Any]) -> str:
    """The model a LangChain run calls: its ``ls_model_name``, else its
    invocation parameters', else the run's name."""
    metadata = kwargs.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("ls_model_name"), str):
        return str(metadata["ls_model_name"])
    params = kwargs.get("invocation_params")
    if isinstance(params, Mapping):
        for key in ("model_name", "model"):
            if isinstance(params.get(key), str) and params[key]:
                return str(params[key])
    name = kwargs.get("name")
    return name if isinstance(name, str) and name else "unknown"


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """The handler a watched middleware passes inward runs with no decision
    calls set: the agent's own model and tool calls are never counted."""
    token = DECISION_CALLS.set(None)
    try:
        yield
    finally:
        DECISION_CALLS.reset(token)


DECISION_CALLS: contextvars.ContextVar[DecisionCalls | None] = contextvars.ContextVar(
    "seamscope_decision_calls", default=None
)
"""The decision calls of the watched hook running in this context (None: none)."""
# every callback manager configured while the variable holds a handler gets it
register_configure_hook(DECISION_CALLS, True)
