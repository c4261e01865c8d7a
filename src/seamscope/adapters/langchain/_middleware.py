"""The hooks: ``SeamscopeMiddleware`` and the recall tool it registers.

Each hook hands its work to a step (:mod:`._steps`) in the same order
(``prepare``, the span around the framework's handler, ``finish``, then
``fail``/``close``), so the sync and async hooks stay line for line alike.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from seamscope._internal import checks
from seamscope.adapters._kit import RECALL, check_options
from seamscope.adapters.langchain import _tool_runs as tool_runs
from seamscope.adapters.langchain._framework import (
    AgentMiddleware,
    AgentState,
    AIMessage,
    BaseChatModel,
    BaseTool,
    Command,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    StructuredTool,
    ToolCallRequest,
    ToolMessage,
    ToolRuntime,
    convert_to_openai_tool,
)
from seamscope.adapters.langchain._runs import Compactions, Outputs, Runs, failed
from seamscope.adapters.langchain._steps import (
    MODEL_STEP,
    ModelStep,
    StepContext,
    TailStep,
    ToolStep,
)
from seamscope.adapters.langchain._stubs import Decided
from seamscope.adapters.langchain._watched import watched
from seamscope.decisions import OffloadStore
from seamscope.loop import RECALL_TOOL, DecisionLayer
from seamscope.loop._layer import resolve_store
from seamscope.stores import ENV_VAR, LangGraphStore, MemoryStore

__all__ = ["SeamscopeMiddleware"]

_MAX_CONVERSATIONS = 1024  # conversations whose compactions are remembered


class SeamscopeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """seamscope's decision layer as LangChain v1 agent middleware.

    ``layer``: the :class:`~seamscope.loop.DecisionLayer` whose
    router, selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: model name → chat model instance the PRE seam may switch to.
    ``role`` and ``scope``: what policies and stages see as the turn's role
    and the adopter's per-conversation data; a value, or a callable of the
    LangGraph ``Runtime`` (e.g. reading ``runtime.context``) evaluated at
    the start of each run. ``offload``: False turns the offload gate (and
    the recall tool) off. ``offload_store``: where offloaded outputs live
    (an :class:`~seamscope.decisions.OffloadStore` or a URL); None: the URL in
    ``SEAMSCOPE_OFFLOAD_STORE``, else the LangGraph store the agent is
    compiled with (``create_agent(..., store=...)``, seen as
    ``runtime.store``), else this process's memory (``max_stored_outputs``
    outputs at most, default 256).

    ``gate_evictions``: True lets the offload gate decide each eviction a
    watched Deep Agents ``FilesystemMiddleware`` makes of a large tool result
    (a ``seamscope.offload_gate`` span either way): one the gate prices as a
    loss is undone, the tool's own result is returned instead of the
    preview. False (the default): evictions are observed and priced only.

    Configuration errors raise ValueError naming the argument.

    What it changes for LangChain. Adding it adds no graph node (no
    ``before_agent``/``after_agent`` hook: a run starts at its first hook and
    ends at the model call LangChain routes to the end), so ``stream``
    chunks, checkpoints, state and the ``recursion_limit`` a run needs are
    the same with and without it. Its ``wrap_model_call`` adds, as any
    middleware's does, one conditional edge from the model back to the
    loop's entry in an agent with tools (``get_graph()`` draws it); LangChain
    takes it only when every tool call of the last AIMessage was already
    answered, which only a middleware's own messages can arrange (a recall,
    below). It has no tool hook and registers no tool, offloading or not,
    unless it watches a middleware with tool hooks:

    * the default: each tool call's ``execute_tool`` span comes from
      LangChain's tool callbacks (a handler added to every callback manager
      once such a middleware exists; it ignores all but tool runs of the
      agents it follows, and the failure of a graph run). The next model
      call puts each new tool answer, as the state holds it, to the offload
      gate; a fired offload's stub is sent instead of the output and written
      into the state (the same ``ToolMessage`` id, in the model call's
      ``Command``). The recall tool
      is offered as a tool description (LangChain binds it as a built-in
      tool; its check of the tools a middleware adds is unchanged), and a
      recall the model emits is answered in that model call: its
      ``ToolMessage`` follows the ``AIMessage`` (:mod:`._stubs`). So an agent
      without tools gets no ``tools`` node, and a tool a middleware adds that
      the agent cannot execute raises LangChain's ``ValueError``, as alone.
    * ``watching()`` a middleware with tool hooks: ``wrap_tool_call`` too
      (LangChain builds the ``tools`` node and skips its check for that
      middleware already): the spans name the calls it blocked, the gate
      replaces the output inside it, and ``recall_tool_result`` is a
      registered tool (in ``tools``) the ``tools`` node runs.

    A policy's ``redirect_to`` needs no tool hook: the POST seam rewrites the
    emitted calls in ``wrap_model_call``.
    """

    @property
    def name(self) -> str:
        return "SeamscopeMiddleware"

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, BaseChatModel] | None = None,
        *,
        role: str | Callable[[Any], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        offload: bool = True,
        max_stored_outputs: int | None = None,
        offload_store: OffloadStore | str | None = None,
        gate_evictions: bool = False,
    ) -> None:
        super().__init__()
        options = check_options(
            "SeamscopeMiddleware",
            layer,
            models,
            model_ok=lambda model: isinstance(model, BaseChatModel),
            model_kind="a BaseChatModel",
            models_kind="chat model",
            role=role,
            scope=scope,
            offload=True,  # checked below, after the store
            max_stored_outputs=max_stored_outputs,
            resolve_store=False,
        )
        models = options.models
        # an explicit store, else the environment's; None: the runtime's LangGraph
        # store when the agent has one, else this process's memory
        chosen: OffloadStore | None = None
        if offload_store is not None or os.environ.get(ENV_VAR, "").strip():
            chosen = resolve_store("SeamscopeMiddleware", offload_store)
        checks.flag("SeamscopeMiddleware", "offload", offload)
        checks.flag("SeamscopeMiddleware", "gate_evictions", gate_evictions)
        self.layer = layer
        self.models: Mapping[str, BaseChatModel] = dict(models)
        self._offload = bool(offload)
        self._runs = Runs(layer, role, scope)
        self._outputs = Outputs(
            chosen or MemoryStore(max_items=max_stored_outputs or 256), observer=layer.observer
        )
        self._chosen = chosen is not None
        self._graph_outputs: weakref.WeakKeyDictionary[Any, Outputs] = weakref.WeakKeyDictionary()
        self._graph_lock = threading.Lock()
        self._compactions = Compactions(_MAX_CONVERSATIONS)
        self._tail: _ModelTail | None = None
        # tool hooks and a registered recall tool only once a watched middleware
        # has tool hooks (watching()): LangChain reads both when it builds the agent
        self.tools: Sequence[BaseTool] = []
        self.kit = StepContext(
            layer,
            self.models,
            self._offload,
            self._runs,
            self._outputs,
            self._compactions,
            outputs_of=self._outputs_of,
            tool_hooks=False,
            decided=Decided(_MAX_CONVERSATIONS),
            # the one recall tool, as the model is offered it when it is not registered
            recall_spec=convert_to_openai_tool(self._recall_tool()),
            gate_evictions=bool(gate_evictions),
        )
        """What this middleware's steps read (they never read the middleware)."""
        if not self.kit.tool_hooks:
            tool_runs.follow(self.kit)  # its tool calls' spans, from LangChain's callbacks

    def watching(self, *middlewares: AgentMiddleware[Any, Any, Any]) -> list[Any]:
        """The middleware list for ``create_agent``: this middleware outermost,
        each of ``middlewares`` (in order), watched (its decisions recorded),
        and seamscope's model tail innermost, which opens the ``chat {model}``
        span of every real model call.

        Each middleware is returned itself, watched: its class becomes a
        subclass of its own class of the same name, whose hooks record its
        decisions around the original ones, so it behaves exactly as itself
        (same object, name, state, tools, hooks and graph, ``isinstance`` of
        its class, copied and configured by a framework as itself: Deep
        Agents' permissions reach a watched ``FilesystemMiddleware``). Once
        this is called, this middleware's model calls are recorded by the
        tail: give every agent that uses it the list this returns. A watched
        middleware with tool hooks gives this one tool hooks too (LangChain's
        graph and checks are already those of an agent with tool hooks).
        Raises ValueError for an argument that is not a LangChain
        ``AgentMiddleware`` (or is seamscope's own). A middleware instance
        shared by agents may be watched by each one's middleware.
        """
        for position, middleware in enumerate(middlewares, start=1):
            if not isinstance(middleware, AgentMiddleware) or isinstance(
                middleware, SeamscopeMiddleware | _ModelTail
            ):
                raise ValueError(
                    f"SeamscopeMiddleware.watching: argument {position} must be a LangChain "
                    f"AgentMiddleware other than seamscope's own, got {type(middleware).__name__}"
                )
        if self._tail is None:
            self._tail = _ModelTail(self)
            self.kit.watching = True
        if not self.kit.tool_hooks and any(_has_tool_hooks(m) for m in middlewares):
            self.__class__ = _hooked(type(self))
            self.kit.tool_hooks = True
            self.tools = [self._recall_tool()] if self._offload else []
            tool_runs.unfollow(self.kit)
        return [self, *(watched(self.kit, m) for m in middlewares), self._tail]

    # -- public helpers -----------------------------------------------------------

    def stored_output(self, offload_id: str, conversation_id: str | None = None) -> str | None:
        """The full text of an offloaded output the offload store still holds
        (of ``conversation_id``; None: the conversation this process saw it in)."""
        return self._outputs.get(offload_id, conversation_id)

    def end_conversation(self, conversation_id: str, *, store: Any = None) -> list[Any]:
        """Settle a conversation's offloads (each once, fleet-wide, with a shared
        store) where this middleware keeps them: ``store`` (an offload store, a
        URL, or the LangGraph ``BaseStore`` the agent is compiled with, which a
        worker that has run no turn of the agent does not know yet), else the
        chosen store, else the LangGraph stores its runs used, else this
        process's memory. Returns the settlements this call made."""
        if store is not None and not isinstance(store, OffloadStore | str):
            stores = [self._graph(store).store]
        elif store is not None:
            stores = [resolve_store("SeamscopeMiddleware.end_conversation", store)]
        else:
            with self._graph_lock:
                seen = [o.store for o in self._graph_outputs.values()]
            stores = seen if seen and not self._chosen else [self._outputs.store]
        settled: list[Any] = []
        for chosen in stores:
            settled.extend(self.layer.end_conversation(conversation_id, store=chosen))
        return settled

    def _graph(self, graph_store: Any) -> Outputs:
        """The outputs kept in a LangGraph store (one view per store)."""
        with self._graph_lock:
            outputs = self._graph_outputs.get(graph_store)
            if outputs is None:
                outputs = Outputs(LangGraphStore(graph_store), observer=self.layer.observer)
                self._graph_outputs[graph_store] = outputs
            return outputs

    def _outputs_of(self, runtime: Any) -> Outputs:
        """The offloaded outputs of a run: the chosen store's, else the LangGraph
        store the agent was compiled with, else this process's."""
        graph_store = None if self._chosen else getattr(runtime, "store", None)
        if graph_store is None:
            return self._outputs
        try:
            return self._graph(graph_store)
        except Exception:
            failed("langchain.offload_store")
            return self._outputs

    # -- model hooks --------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = ModelStep(self, request)
        try:
            prepared = step.prepare()
            with step.chat() as call:
                token = MODEL_STEP.set(True)
                try:
                    response = handler(prepared)
                finally:
                    MODEL_STEP.reset(token)
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
        step = ModelStep(self, request)
        try:
            prepared = step.prepare()
            with step.chat() as call:
                token = MODEL_STEP.set(True)
                try:
                    response = await handler(prepared)
                finally:
                    MODEL_STEP.reset(token)
                step.report(call, response)
            return step.finish(response)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()

    # -- the recall tool --------------------------------------------------------------

    def _recall(self, offload_id: str, runtime: Any) -> str:
        scope = self._runs.scope_of(runtime)
        call_id = getattr(runtime, "tool_call_id", None)
        return self._outputs_of(runtime).answer(scope, call_id, offload_id)

    def _recall_tool(self) -> BaseTool:
        def recall_tool_result(offload_id: str, runtime: ToolRuntime) -> str:
            return self._recall(offload_id, runtime)

        async def arecall_tool_result(offload_id: str, runtime: ToolRuntime) -> str:
            return self._recall(offload_id, runtime)

        return StructuredTool.from_function(
            func=recall_tool_result,
            coroutine=arecall_tool_result,
            name=RECALL_TOOL,
            description=RECALL.description,
        )


def _has_tool_hooks(middleware: AgentMiddleware[Any, Any, Any]) -> bool:
    """Whether ``create_agent`` sees tool hooks on ``middleware`` (its class's)."""
    cls = type(middleware)
    return (
        cls.wrap_tool_call is not AgentMiddleware.wrap_tool_call
        or cls.awrap_tool_call is not AgentMiddleware.awrap_tool_call
    )


_HOOKED: dict[type[Any], type[Any]] = {}


def _hooked(cls: type[SeamscopeMiddleware]) -> type[SeamscopeMiddleware]:
    """``cls`` with seamscope's tool hooks (a subclass of it, of the same name)."""
    if issubclass(cls, _ToolHooked):
        return cls
    if cls is SeamscopeMiddleware:
        return _ToolHooked
    made = type(cls.__name__, (cls, _ToolHooked), {"__qualname__": cls.__qualname__})
    return _HOOKED.setdefault(cls, made)


class _ToolHooked(SeamscopeMiddleware):
    """``SeamscopeMiddleware`` with tool hooks: an ``execute_tool`` span around
    each tool call, then the offload gate (or a recall's accounting). Its
    instances are ``SeamscopeMiddleware``s (same name, same arguments): the
    class is chosen by what the middleware must do (see the class docstring
    of :class:`SeamscopeMiddleware`)."""

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        step = ToolStep(self, request)
        try:
            step.prepare()
            with step.span() as span:
                result = handler(request)
                step.result(span, result)
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
        step = ToolStep(self, request)
        try:
            step.prepare()
            with step.span() as span:
                result = await handler(request)
                step.result(span, result)
            return step.finish(result)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            step.close()


class _ModelTail(AgentMiddleware[AgentState[Any], Any, Any]):
    """seamscope innermost, when middlewares are watched: a ``chat {model}`` span
    per real model call (a fallback's failed attempt too), naming the model
    really called, with its usage and the ledger report of the prompt the
    model really receives."""

    def __init__(self, seamscope: SeamscopeMiddleware) -> None:
        super().__init__()
        self._seamscope = seamscope

    @property
    def name(self) -> str:
        return "SeamscopeModelTail"

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = TailStep(self._seamscope, request)
        try:
            step.prepare()
            with step.chat() as call:
                response = handler(request)
                step.report(call, response)
            return response
        finally:
            step.close()

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = TailStep(self._seamscope, request)
        try:
            step.prepare()
            with step.chat() as call:
                response = await handler(request)
                step.report(call, response)
            return response
        finally:
            step.close()
