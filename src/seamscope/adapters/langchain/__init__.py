"""LangChain v1 agent middleware: seamscope's decisions inside ``create_agent``.

Install the extra: ``pip install 'seamscope[langchain]'``. This is the only
seamscope module that imports LangChain; the rest of the package works
without it.

::

    from langchain.agents import create_agent
    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.langchain import SeamscopeMiddleware

    layer = DecisionLayer(default_model="claude-opus-4-6", policies=[...],
                          stages=[...], agent_name="analyst")
    seamscope = SeamscopeMiddleware(layer, models={"claude-opus-4-6": opus,
                                                   "claude-haiku-4-5": haiku})
    agent = create_agent(opus, tools, middleware=[seamscope])
    agent.invoke({"messages": [...]}, config={"configurable": {"thread_id": "c-7"}})

What it does
------------
Per model call (``wrap_model_call``/``awrap_model_call``), one ReAct
iteration of the :class:`~seamscope.adapters.loop.DecisionLayer`:

* the selection pipeline narrows the request's tools; the model is bound
  only to the selected tools, and a forced tool becomes the request's
  ``tool_choice``;
* the PRE seam picks the model: the chosen name is looked up in ``models``
  and the request runs on that instance (a ``ModelConfig``'s parameters are
  merged into the request's ``model_settings``);
* the model call runs inside a ``chat {model}`` span that gets
  ``gen_ai.usage.*`` from the AIMessage's ``usage_metadata``, which also
  feeds the offload ledger (cache reads and writes from
  ``input_token_details``);
* the POST seam rewrites the emitted tool calls (ids kept; Anthropic-style
  ``tool_use`` content blocks too), so the agent executes the rewritten
  calls. Its context holds the just-emitted AIMessage, and the palette gate
  checks a redirect against the tools selected for this call.

Per tool call (``wrap_tool_call``/``awrap_tool_call``): an
``execute_tool {tool}`` span around the tool; then, for a text output large
enough to reach the gate's threshold, the offload gate. When it fires, the
ToolMessage content is replaced by a stub naming the offload id, the full
output is kept in memory, and the model can bring it back with the
``recall_tool_result`` tool (registered through the middleware's ``tools``,
offered only while the conversation has offloaded outputs). A recall is a
real cost in the ledger.

Spans of one agent run (one ``invoke``) share one trace::

    invoke_agent {agent}
    └── seamscope.iteration              (one per model call)
        ├── seamscope.select_tools ─ seamscope.stage …
        ├── seamscope.seam.pre_model
        ├── chat {model}
        ├── seamscope.seam.post_model ─ seamscope.dispatch …
        ├── execute_tool {tool} …        (the calls that model call emitted)
        └── seamscope.offload_gate …

Decisions and differences from the reference loop
-------------------------------------------------
* LangGraph runs every graph node in its own copy of the context, so the
  run's spans are kept by the middleware (keyed by a private, unsaved state
  key) and attached in each hook. An iteration span stays open from its
  model call until the next model call of the run (or the run's end), so
  the tool calls it emitted are its children.
* Conversation id = ``configurable.thread_id``; without one, spans carry
  no conversation id and the ledger does not follow the run's offloads (the
  gate still decides). Call ``layer.end_conversation(thread_id)`` when a
  conversation ends to settle its offloads.
* A PRE-seam model name that is not in ``models`` keeps the request's model:
  the ``seamscope.seam.pre_model`` span still names the chosen model, the
  ``chat {model}`` span names the model really called, and a warning is
  logged. The default model (``layer.router.default_model``) may be left
  out of ``models``: the agent's own model is used.
* The offload gate is asked only about outputs of at least the gate's
  threshold tokens (chars / 4): smaller ones can never fire, so they get no
  gate span or metric (the reference loop asks about every output). Only
  text content is offloaded; ``Command`` results, error results and
  non-text content blocks pass through, and a recalled output is never
  offloaded again.
* Telemetry never breaks the agent: a failure in seamscope's own code is
  contained (a ``seamscope.telemetry.error`` log event naming the hook and
  the error type) and the call proceeds unchanged (the request as LangChain
  built it, the response as the model returned it). The agent's own
  exceptions cross the hooks unchanged; the spans they cross record
  ``error.type`` and the run's spans end. A ``GraphBubbleUp`` (an
  interrupt) is not an error: the run stays open, and resuming it on the
  same thread continues it in the same trace.

Limitations
-----------
* Put this middleware first in ``middleware=[...]`` (outermost): an
  exception crossing it is taken as the end of the run, so retries (e.g.
  ``ModelRetryMiddleware``) belong inside it. Middleware inside it may
  still change the request it decided (a tool selector narrowing further)
  and the spans will not show that.
* Runs that share a ``thread_id`` are assumed to be sequential: a new run
  closes the spans of a still-open earlier run on the same thread.
* Offloaded outputs live in this process (``max_stored_outputs``, oldest
  dropped first): a recall served by another worker, or after a restart,
  answers that the output is gone.
* Provider-side (dict) tools pass through selection by name; a catalogue
  tool the allowlist re-adds without a bindable ``tool`` object is not bound.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, NotRequired, TypeVar

from opentelemetry import context as otel_context

from seamscope.adapters.loop import ChatCall, DecisionLayer, Iteration, Turn, estimate_tokens
from seamscope.adapters.react import RECALL_TOOL, offload_stub
from seamscope.decisions import ModelUsage, PostModelResult, PreModelResult, ToolCall, tool_name
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import log_event, telemetry_error

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain.tools import ToolRuntime
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.channels.untracked_value import UntrackedValue
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.langchain needs LangChain v1: pip install 'seamscope[langchain]'"
    ) from exc

__all__ = ["SeamscopeMiddleware"]

_log = logging.getLogger("seamscope.adapters.langchain")

_T = TypeVar("_T")

_RUN_KEY = "seamscope_run"
_MAX_OPEN_RUNS = 1024
_RECALL_DESCRIPTION = (
    "Bring back the full text of a tool output that was offloaded from the "
    "conversation. Pass the offload id named in the stub that replaced it."
)


class _SeamscopeState(AgentState[Any]):
    """The agent state plus the run key (private to the middleware, never saved)."""

    seamscope_run: NotRequired[Annotated[str, UntrackedValue, PrivateStateAttr]]


# -- small helpers --------------------------------------------------------------


def _failed(hook: str) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``).

    A ``seamscope.telemetry.error`` event names the hook and the error type;
    the traceback goes to the stdlib logger at DEBUG. Never raises.
    """
    with contextlib.suppress(Exception):
        error = sys.exc_info()[1]
        telemetry_error(hook, error)
        _log.debug("seamscope: %s failed; the agent continues unchanged", hook, exc_info=True)


@contextlib.contextmanager
def _contained(
    factory: Callable[[], contextlib.AbstractContextManager[_T]] | None, what: str
) -> Iterator[_T | None]:
    """Enter a telemetry context manager without letting it break the body.

    A failure to enter or exit is logged; the body's own exception is passed
    to the manager (so the span records it) and re-raised unchanged. An
    interrupt (``GraphBubbleUp``) closes the manager as a normal exit.
    """
    if factory is None:
        yield None
        return
    try:
        manager = factory()
        value = manager.__enter__()
    except Exception:
        _failed(what)
        yield None
        return
    try:
        yield value
    except BaseException as exc:
        try:
            if isinstance(exc, GraphBubbleUp):
                manager.__exit__(None, None, None)
            else:
                manager.__exit__(type(exc), exc, exc.__traceback__)
        except BaseException as exit_exc:
            if exit_exc is not exc:
                _failed(what)
        raise
    else:
        try:
            manager.__exit__(None, None, None)
        except Exception:
            _failed(what)


def _thread_id(runtime: Any) -> str | None:
    """The run's ``configurable.thread_id``, from whichever runtime shape we got."""
    info = getattr(runtime, "execution_info", None)
    found = getattr(info, "thread_id", None)
    if not found:
        config = getattr(runtime, "config", None)
        if not isinstance(config, Mapping):
            try:
                config = get_config()
            except Exception:
                config = None
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        if isinstance(configurable, Mapping):
            found = configurable.get("thread_id")
    return str(found) if found else None


def _usage(message: Any) -> ModelUsage | None:
    """A ModelUsage from an AIMessage's ``usage_metadata`` (None when absent).

    LangChain counts cache reads and writes inside ``input_tokens``; a
    provider that does not is corrected so the total covers them.
    """
    meta = getattr(message, "usage_metadata", None)
    if not isinstance(meta, Mapping):
        return None
    details = meta.get("input_token_details")
    details = details if isinstance(details, Mapping) else {}
    read = int(details.get("cache_read") or 0)
    write = int(details.get("cache_creation") or 0)
    input_tokens = max(int(meta.get("input_tokens") or 0), read + write)
    return ModelUsage(input_tokens, int(meta.get("output_tokens") or 0), read, write)


def _text(content: Any) -> str | None:
    """The text of a ToolMessage's content, or None when it is not all text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
            else:
                return None
        return "".join(parts)
    return None


def _rewrite(message: AIMessage, post: PostModelResult) -> AIMessage:
    """The AIMessage with the tool calls the POST seam decided (ids kept)."""
    calls = list(message.tool_calls)
    renamed: dict[str, ToolCall] = {}
    changed = False
    for record in post.records:
        if record.final == record.emitted or record.index >= len(calls):
            continue
        original = calls[record.index]
        final = record.final
        calls[record.index] = {
            "name": final.name,
            "args": dict(final.args),
            "id": original.get("id"),
            "type": "tool_call",
        }
        changed = True
        if original.get("id"):
            renamed[str(original["id"])] = final
    if not changed:
        return message
    content: Any = message.content
    if isinstance(content, list) and renamed:
        content = [
            {**block, "name": renamed[block["id"]].name, "input": dict(renamed[block["id"]].args)}
            if isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and block.get("id") in renamed
            else block
            for block in content
        ]
    return message.model_copy(update={"tool_calls": calls, "content": content})


# -- one agent run ----------------------------------------------------------------


class _Run:
    """The spans and decision state of one agent run, across graph nodes.

    LangGraph gives each node a copy of the caller's context, so a span made
    current in one hook is gone in the next. The run keeps its own
    ``contextvars.Context`` in which the long-lived ``invoke_agent`` and
    iteration spans are entered and exited (so their context tokens match),
    and hands out the OpenTelemetry context each hook attaches.
    """

    def __init__(self, key: str, turn: Turn, scope: str) -> None:
        self.key = key
        self.turn = turn
        self.scope = scope
        self.lock = threading.RLock()
        self.closed = False
        self.iteration: Iteration | None = None
        self.usage: ModelUsage | None = None
        self._context = contextvars.copy_context()
        self._agent: contextlib.AbstractContextManager[Any] | None = None
        self._iteration: contextlib.AbstractContextManager[Any] | None = None
        self._agent_otel: Any = None
        self._otel: Any = None

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach (None when unavailable)."""
        return self._otel

    def open(self) -> None:
        layer = self.turn.layer
        try:
            manager = layer.genai.invoke_agent(
                layer.agent_name, conversation_id=self.turn.conversation_id
            )
            self._context.run(manager.__enter__)
            self._agent = manager
            self._agent_otel = self._otel = self._context.run(otel_context.get_current)
        except Exception:
            _failed("langchain.invoke_agent_start")

    def start_iteration(self, messages: Sequence[Any], state: Mapping[str, Any]) -> Iteration:
        with self.lock:
            self._end_iteration(None)
            turn = self.turn
            turn.messages = list(messages)
            turn.state = state
            manager = turn.iteration()
            try:
                iteration: Iteration = self._context.run(manager.__enter__)
                self._iteration = manager
                self._otel = self._context.run(otel_context.get_current)
            except Exception:
                _failed("langchain.iteration_start")
                iteration = Iteration(turn, max(turn.iterations - 1, 0))
            self.iteration = iteration
            self.usage = None
            return iteration

    def current_iteration(self) -> Iteration:
        """The open iteration, or a new one (a run resumed at its tools)."""
        with self.lock:
            if self.iteration is not None:
                return self.iteration
        return self.start_iteration(self.turn.messages, self.turn.state)

    def _exit(self, manager: Any, exc: BaseException | None, hook: str) -> None:
        """Leave a span's context manager in the run's context, passing the
        agent's exception (if any) so the span records it."""
        if manager is None:
            return
        try:
            if exc is None:
                self._context.run(manager.__exit__, None, None, None)
            else:
                self._context.run(manager.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            _failed(hook)

    def _end_iteration(self, exc: BaseException | None) -> None:
        manager, self._iteration = self._iteration, None
        self._otel = self._agent_otel
        self._exit(manager, exc, "langchain.iteration_end")

    def close(self, exc: BaseException | None = None) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self._end_iteration(exc)
            manager, self._agent = self._agent, None
            self._exit(manager, exc, "langchain.invoke_agent_end")


class _Attached:
    """An OpenTelemetry context attached for the duration of one hook."""

    __slots__ = ("_token",)

    def __init__(self, context: Any) -> None:
        self._token: Any = None
        if context is not None:
            try:
                self._token = otel_context.attach(context)
            except Exception:
                _failed("langchain.context_attach")

    def detach(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception:
                _failed("langchain.context_detach")


# -- the steps of one hook -------------------------------------------------------


class _Step:
    """What a model step and a tool step share: the run, the attached context."""

    def __init__(self, middleware: SeamscopeMiddleware) -> None:
        self.mw = middleware
        self.run: _Run | None = None
        self.iteration: Iteration | None = None
        self.attached: _Attached | None = None

    def fail(self, exc: BaseException) -> None:
        """The agent's own exception crossed the hook: close the run with it
        (an interrupt is not a failure: the run resumes later)."""
        if self.run is not None and not isinstance(exc, GraphBubbleUp):
            self.mw._close_run(self.run, exc)

    def close(self) -> None:
        if self.attached is not None:
            self.attached.detach()


class _ModelStep(_Step):
    """One model call: select, PRE seam, chat span, POST seam."""

    def __init__(self, middleware: SeamscopeMiddleware, request: ModelRequest[Any]) -> None:
        super().__init__(middleware)
        self.request = request
        self.created = False
        self.model_name: str | None = None

    def prepare(self) -> ModelRequest[Any]:
        """The request to execute: selected tools, chosen model, forced tool."""
        request = self.request
        try:
            self.run, self.created = self.mw._run_for(request.state, request.runtime, create=True)
            if self.run is None:
                return request
            it = self.run.start_iteration(request.messages, request.state)
            self.iteration = it
            self.attached = _Attached(self.run.otel)
            offered = self.mw._offered(request.tools, self.run)
            selection = it.select_tools(offered)
            pre = it.pre_model()
            model, self.model_name = self.mw._model_for(pre, request.model)
            overrides: dict[str, Any] = {"tools": self.mw._bindable(selection.tools)}
            if model is not request.model:
                overrides["model"] = model
            if pre.model.parameters:
                overrides["model_settings"] = {**request.model_settings, **pre.model.params}
            if selection.forced_tool:
                overrides["tool_choice"] = selection.forced_tool
            return request.override(**overrides)
        except Exception:
            _failed("langchain.before_model_call")
            return request

    def chat(self) -> contextlib.AbstractContextManager[ChatCall | None]:
        it, name = self.iteration, self.model_name
        if it is None or name is None:
            return _contained(None, "")
        return _contained(lambda: it.chat(name), "langchain.chat_span")

    def report(self, call: ChatCall | None, response: ModelResponse[Any]) -> None:
        try:
            message = _last_ai(response.result)
            usage = None if message is None else _usage(message)
            if self.run is not None:
                self.run.usage = usage
            if call is None or usage is None or message is None:
                return
            metadata = message.response_metadata or {}
            response_model = metadata.get("model_name") or metadata.get("model")
            call.report(usage, response_model=response_model if response_model else None)
        except Exception:
            _failed("langchain.usage")

    def finish(
        self, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """The POST seam over the emitted tool calls; the response to return."""
        try:
            it = self.iteration
            message = _last_ai(response.result)
            if it is not None and message is not None and message.tool_calls:
                post = it.post_model(message)
                rewritten = _rewrite(message, post)
                if rewritten is not message:
                    result = [rewritten if m is message else m for m in response.result]
                    response = ModelResponse(
                        result=result, structured_response=response.structured_response
                    )
            if self.created and self.run is not None:
                return ExtendedModelResponse(
                    model_response=response, command=Command(update={_RUN_KEY: self.run.key})
                )
        except Exception:
            _failed("langchain.after_model_call")
        return response


def _last_ai(messages: Sequence[Any]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


class _ToolStep(_Step):
    """One tool call: the execute_tool span, then the offload gate (or a recall)."""

    def __init__(self, middleware: SeamscopeMiddleware, request: ToolCallRequest) -> None:
        super().__init__(middleware)
        self.request = request
        self.call: ToolCall | None = None

    def prepare(self) -> None:
        request = self.request
        try:
            # a run can be opened here only for a known thread (a run resumed at
            # its tools); it cannot be written back to the state from this hook
            self.run, _ = self.mw._run_for(
                request.state, request.runtime, create=_thread_id(request.runtime) is not None
            )
            if self.run is None:
                return
            self.iteration = self.run.current_iteration()
            self.attached = _Attached(self.run.otel)
            raw = request.tool_call
            self.call = ToolCall(str(raw.get("id") or ""), str(raw["name"]), raw.get("args") or {})
        except Exception:
            _failed("langchain.before_tool_call")

    def span(self) -> contextlib.AbstractContextManager[Any]:
        it, call = self.iteration, self.call
        if it is None or call is None:
            return _contained(None, "")
        return _contained(lambda: it.execute_tool(call), "langchain.execute_tool_span")

    def finish(self, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        try:
            if self.run is None or self.iteration is None or self.call is None:
                return result
            if self.call.name == RECALL_TOOL:
                self.mw._account_recall(self.run, self.iteration, self.call)
                return result
            if not self.mw._offload or not isinstance(result, ToolMessage):
                return result
            if result.status == "error":
                return result
            text = _text(result.content)
            if text is None or estimate_tokens(text) < self.mw.layer.gate.threshold_tokens:
                return result
            decision = self.iteration.offload(self.call, text)
            if not decision.fire or decision.offload_id is None:
                return result
            self.mw._keep(decision.offload_id, self.run.scope, text)
            return result.model_copy(update={"content": offload_stub(decision, self.call.name)})
        except Exception:
            _failed("langchain.after_tool_call")
            return result


# -- the middleware ----------------------------------------------------------------


class SeamscopeMiddleware(AgentMiddleware[_SeamscopeState, Any, Any]):
    """seamscope's decision layer as LangChain v1 agent middleware.

    ``layer``: the :class:`~seamscope.adapters.loop.DecisionLayer` whose
    router, selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: model name → chat model instance the PRE seam may switch to.
    ``role`` and ``scope``: what policies and stages see as the turn's role
    and the adopter's per-conversation data; a value, or a callable of the
    LangGraph ``Runtime`` (e.g. reading ``runtime.context``) evaluated at
    the start of each run. ``offload``: False turns the offload gate (and
    the recall tool) off. ``max_stored_outputs``: offloaded outputs kept for
    recall in this process.

    Configuration errors raise ValueError naming the argument.
    """

    state_schema = _SeamscopeState

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, BaseChatModel] | None = None,
        *,
        role: str | Callable[[Any], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        offload: bool = True,
        max_stored_outputs: int = 256,
    ) -> None:
        super().__init__()
        if not isinstance(layer, DecisionLayer):
            raise ValueError("SeamscopeMiddleware.layer must be a DecisionLayer")
        models = {} if models is None else models
        if not isinstance(models, Mapping):
            raise ValueError("SeamscopeMiddleware.models must be a mapping of name to chat model")
        for name, model in models.items():
            if not isinstance(name, str) or not name:
                raise ValueError("SeamscopeMiddleware.models: names must be non-empty str")
            if not isinstance(model, BaseChatModel):
                raise ValueError(f"SeamscopeMiddleware.models[{name!r}] must be a BaseChatModel")
        if role is not None and not isinstance(role, str) and not callable(role):
            raise ValueError("SeamscopeMiddleware.role must be a str, a callable or None")
        if scope is not None and not isinstance(scope, Mapping) and not callable(scope):
            raise ValueError("SeamscopeMiddleware.scope must be a mapping, a callable or None")
        if (
            isinstance(max_stored_outputs, bool)
            or not isinstance(max_stored_outputs, int)
            or max_stored_outputs < 1
        ):
            raise ValueError("SeamscopeMiddleware.max_stored_outputs must be an int >= 1")
        self.layer = layer
        self.models: Mapping[str, BaseChatModel] = dict(models)
        self._role = role
        self._scope = scope
        self._offload = bool(offload)
        self._max_stored = max_stored_outputs
        self._store: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._lock = threading.Lock()
        self.tools: Sequence[BaseTool] = [self._recall_tool()] if self._offload else []

    # -- public helpers -----------------------------------------------------------

    def stored_output(self, offload_id: str) -> str | None:
        """The full text of an offloaded output still held in this process."""
        with self._lock:
            entry = self._store.get(offload_id)
        return None if entry is None else entry[1]

    # -- agent hooks --------------------------------------------------------------

    def before_agent(self, state: _SeamscopeState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        try:
            run = self._open_run(runtime)
        except Exception:
            _failed("langchain.run_start")
            return None
        return {_RUN_KEY: run.key}

    async def abefore_agent(
        self, state: _SeamscopeState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: _SeamscopeState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        try:
            run, _ = self._run_for(state, runtime, create=False)
            if run is not None:
                self._close_run(run, None)
        except Exception:
            _failed("langchain.run_end")
        return None

    async def aafter_agent(
        self, state: _SeamscopeState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = _ModelStep(self, request)
        try:
            prepared = step.prepare()
            with step.chat() as call:
                response = handler(prepared)
                step.report(call, response)
            return step.finish(response)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = _ModelStep(self, request)
        try:
            prepared = step.prepare()
            with step.chat() as call:
                response = await handler(prepared)
                step.report(call, response)
            return step.finish(response)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        step = _ToolStep(self, request)
        try:
            step.prepare()
            with step.span():
                result = handler(request)
            return step.finish(result)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        step = _ToolStep(self, request)
        try:
            step.prepare()
            with step.span():
                result = await handler(request)
            return step.finish(result)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()

    # -- runs -----------------------------------------------------------------------

    def _resolve(self, value: Any, runtime: Any, what: str) -> Any:
        if not callable(value):
            return value
        try:
            return value(runtime)
        except Exception:
            _failed(f"langchain.{what}")
            return None

    def _new_run(self, runtime: Any, conversation_id: str | None) -> _Run:
        role = self._resolve(self._role, runtime, "role")
        scope = self._resolve(self._scope, runtime, "scope")
        key = uuid.uuid4().hex
        turn = Turn(
            self.layer,
            conversation_id,
            [],
            role if isinstance(role, str) and role else None,
            {},
            scope if isinstance(scope, Mapping) else None,
        )
        return _Run(key, turn, conversation_id or f"run:{key}")

    def _register(self, run: _Run) -> list[_Run]:
        """Add ``run`` (holding the lock); returns the runs it supersedes or evicts."""
        conversation_id = run.turn.conversation_id
        stale: list[_Run] = []
        if conversation_id:
            stale = [r for r in self._runs.values() if r.turn.conversation_id == conversation_id]
            for old in stale:
                del self._runs[old.key]
        self._runs[run.key] = run
        while len(self._runs) > _MAX_OPEN_RUNS:
            stale.append(self._runs.popitem(last=False)[1])
        return stale

    def _open_run(self, runtime: Any) -> _Run:
        """A new run for this invocation (a still-open run on its thread is closed)."""
        run = self._new_run(runtime, _thread_id(runtime))
        with self._lock:
            run.open()
            stale = self._register(run)
        for old in stale:
            old.close()
        return run

    def _find(self, key: Any, conversation_id: str | None) -> _Run | None:
        run = self._runs.get(key) if isinstance(key, str) else None
        if run is None and conversation_id:
            for candidate in reversed(self._runs.values()):
                if candidate.turn.conversation_id == conversation_id:
                    return candidate
        return run

    def _run_for(self, state: Any, runtime: Any, *, create: bool) -> tuple[_Run | None, bool]:
        """The run a hook belongs to: by the state key, else by thread; maybe new.

        A new run is made for a hook that finds none (a run resumed after an
        interrupt, or one whose ``before_agent`` did not run); parallel hooks
        agree on one.
        """
        key = state.get(_RUN_KEY) if isinstance(state, Mapping) else None
        conversation_id = _thread_id(runtime)
        with self._lock:
            run = self._find(key, conversation_id)
        if run is not None or not create:
            return run, False
        candidate = self._new_run(runtime, conversation_id)
        with self._lock:
            run = self._find(key, conversation_id)
            if run is not None:
                return run, False
            candidate.open()
            stale = self._register(candidate)
        for old in stale:
            old.close()
        return candidate, True

    def _close_run(self, run: _Run, exc: BaseException | None) -> None:
        with self._lock:
            if self._runs.get(run.key) is run:
                del self._runs[run.key]
        run.close(exc)

    # -- decisions --------------------------------------------------------------------

    def _offered(self, tools: Sequence[Any], run: _Run) -> list[Any]:
        """The request's tools; the recall tool only while there is something to recall."""
        if self._has_stored(run.scope):
            return list(tools)
        return [t for t in tools if tool_name(t) != RECALL_TOOL]

    def _model_for(self, pre: PreModelResult, current: BaseChatModel) -> tuple[BaseChatModel, str]:
        """The chat model instance for the PRE seam's choice, and its name."""
        chosen = pre.model.model_name
        model = self.models.get(chosen)
        if model is not None:
            return model, chosen
        default = self.layer.router.default_model.model_name
        used = next((name for name, m in self.models.items() if m is current), None)
        if used is None and chosen == default:
            return current, default
        if used is None:
            own = getattr(current, "model_name", None) or getattr(current, "model", None)
            used = own if isinstance(own, str) and own else default
        if chosen != default:
            # the chosen model is not callable here: the request's model runs
            log_event(
                "warning",
                c.LOG_MODEL_UNAVAILABLE,
                chosen_model=chosen,
                used_model=used,
                winner_source=pre.source.value,
                policy=pre.policy,
            )
        return current, used

    @staticmethod
    def _bindable(tools: Sequence[Any]) -> list[Any]:
        """The selected tools a LangChain model can bind (tools and dict tools)."""
        bound: list[Any] = []
        for tool in tools:
            if isinstance(tool, BaseTool | dict):
                bound.append(tool)
            else:
                _log.warning("selected tool %r has no bindable object; not bound", tool)
        return bound

    # -- offloaded outputs ------------------------------------------------------------

    def _keep(self, offload_id: str, scope: str, text: str) -> None:
        with self._lock:
            self._store[offload_id] = (scope, text)
            while len(self._store) > self._max_stored:
                self._store.popitem(last=False)

    def _has_stored(self, scope: str) -> bool:
        with self._lock:
            return any(entry[0] == scope for entry in self._store.values())

    def _lookup(self, offload_id: str, scope: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return entry[1] if entry is not None and entry[0] == scope else None

    def _scope_of(self, runtime: Any) -> str | None:
        conversation_id = _thread_id(runtime)
        if conversation_id:
            return conversation_id
        state = getattr(runtime, "state", None)
        key = state.get(_RUN_KEY) if isinstance(state, Mapping) else None
        return f"run:{key}" if key else None

    def _recall(self, offload_id: str, runtime: Any) -> str:
        scope = self._scope_of(runtime)
        text = None if scope is None else self._lookup(offload_id, scope)
        if text is None:
            return f"error: no offloaded output {offload_id!r} in this conversation"
        return text

    def _account_recall(self, run: _Run, iteration: Iteration, call: ToolCall) -> None:
        offload_id = str(call.args.get("offload_id", ""))
        text = self._lookup(offload_id, run.scope)
        if text is None:
            return
        usage = run.usage
        iteration.recall(
            offload_id,
            input_tokens=int(estimate_tokens(text)),
            output_tokens=0 if usage is None else usage.output_tokens,
        )

    def _recall_tool(self) -> BaseTool:
        def recall_tool_result(offload_id: str, runtime: ToolRuntime) -> str:
            return self._recall(offload_id, runtime)

        async def arecall_tool_result(offload_id: str, runtime: ToolRuntime) -> str:
            return self._recall(offload_id, runtime)

        return StructuredTool.from_function(
            func=recall_tool_result,
            coroutine=arecall_tool_result,
            name=RECALL_TOOL,
            description=_RECALL_DESCRIPTION,
        )
