"""``SeamscopePlugin``: seamscope's decisions as a Google ADK plugin.

The plugin is given to an ``App`` (``App(name, root_agent, plugins=[...])``)
and its callbacks hold one :class:`~._run.Run` per invocation:

* ``before_run_callback``: the run's turn and its ``invoke_agent`` span
  (unless ADK's own tracing records one); an agent run as a tool
  (``AgentTool``) is a nested run of the calling run's conversation;
* ``before_model_callback``: a new iteration per model call, the selection
  pipeline over the request's function declarations (what the model sees,
  and what may run), the PRE seam (the request's model) and the ``chat``
  span;
* ``after_model_callback``: usage (and the ledger's carried stubs), then the
  POST seam over the emitted function calls, rewritten in the response
  before any of them runs;
* ``on_model_error_callback``: the failed model call;
* ``before_tool_callback``/``after_tool_callback``/``on_tool_error_callback``:
  the ``execute_tool`` span, then the offload gate on a large text result
  (a fired offload answers with the stub) or the cost of a recall;
* ``after_run_callback``/``on_run_error_callback``: the run's end.

Every callback contains seamscope's own failures and returns None unless it
changes what ADK does: the step then runs as ADK would have run it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from seamscope.adapters._kit import (
    RECALL,
    RECALL_TOOL,
    Frame,
    ModelChoice,
    account_tool_output,
    check_options,
    model_answered,
    note_unavailable,
    plan_model,
    post_model,
    structured_answers,
)
from seamscope.adapters.google_adk import _translate as translate
from seamscope.adapters.google_adk._framework import (
    BaseLlm,
    BasePlugin,
    BaseTool,
    CallbackContext,
    Event,
    FunctionTool,
    InvocationContext,
    LlmRequest,
    LlmResponse,
    ToolContext,
    types,
)
from seamscope.adapters.google_adk._run import HOOKS, Lane, Run, Tool, failed
from seamscope.decisions import OffloadStore, ToolCall
from seamscope.loop import DecisionLayer
from seamscope.telemetry import conventions as c

__all__ = ["SeamscopePlugin"]

_CALLING_RUN = otel_context.create_key("seamscope_google_adk_run")
"""The run whose tool is running, in the context attached for the tool's run
(an ``AgentTool``'s nested run reads it: its conversation is the caller's)."""

_STRUCTURED = "set_model_response"
"""ADK's structured-output tool (an agent with ``output_schema`` and tools)."""


_MAX_RUNS = 4096
"""Invocations held at once; past that the oldest is ended as abandoned (an
invocation ADK stopped without an after-run or run-error callback)."""

_CONFIG_FIELDS = frozenset(types.GenerateContentConfig.model_fields)


def _is_model(value: object) -> bool:
    return isinstance(value, BaseLlm) or (isinstance(value, str) and bool(value))


class SeamscopePlugin(Frame, BasePlugin):
    """seamscope's decision layer as a Google ADK plugin.

    ``layer``: the :class:`~seamscope.loop.DecisionLayer` whose router,
    selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: the PRE seam's model name → the model the request is switched
    to: a model id (a str) the agent's own model serves (``llm_request.model``),
    or an ADK ``BaseLlm`` of the agent's model's kind, whose ``model`` is that
    id. ADK calls the agent's model object whatever a plugin does, so a
    ``BaseLlm`` of another kind cannot serve the call: the PRE seam's choice is
    then reported as unavailable beside the model that ran.
    ``role``: what policies and stages see as the role: a str, a callable of
    ADK's ``CallbackContext``, or None (the name of the agent making the call).
    ``scope``: the adopter's data for policies, a mapping or a callable of the
    ADK ``Session``. ``offload``: False turns the offload gate (and the recall
    tool) off. ``offload_store``: where offloaded outputs live (an
    :class:`~seamscope.decisions.OffloadStore` or a URL); None: the layer's.
    ``genai_spans``: whether seamscope opens its own ``invoke_agent``,
    ``chat`` and ``execute_tool`` spans; None (the default) means "unless
    ADK's own tracing records them". ``name``: the plugin's name in ADK.

    Configuration errors raise ValueError naming the argument.
    """

    HOOKS = HOOKS

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, str | BaseLlm] | None = None,
        *,
        role: str | Callable[[Any], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        offload: bool = True,
        offload_store: OffloadStore | str | None = None,
        genai_spans: bool | None = None,
        name: str = "seamscope",
    ) -> None:
        owner = "SeamscopePlugin"
        options = check_options(
            owner,
            layer,
            models,
            model_ok=_is_model,
            model_kind="a non-empty model id (str) or an ADK BaseLlm",
            models_kind="model id or BaseLlm",
            role=role,
            scope=scope,
            offload=offload,
            offload_store=offload_store,
            genai_spans=genai_spans,
        )
        if not isinstance(name, str) or not name:
            raise ValueError(f"{owner}.name must be a non-empty str")
        super().__init__(name=name)
        self._hold(options)
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()
        self.recall_tool = FunctionTool(self._recall_function())
        """The ``recall_tool_result`` tool, added to a request whenever its
        contents hold a stub (whichever worker made the offload)."""

    # -- public helpers -----------------------------------------------------------

    def role_for(self, callback_context: Any) -> str | None:
        """The role of a model call (default: the name of the agent making it)."""
        return self._role_of(callback_context, getattr(callback_context, "agent_name", None))

    # -- the run --------------------------------------------------------------------

    def _run_of(self, invocation_id: str | None) -> Run | None:
        if invocation_id is None:
            return None
        with self._lock:
            return self._runs.get(invocation_id)

    @HOOKS.containing_async("before_run")
    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        calling = otel_context.get_value(_CALLING_RUN)
        own = self.genai_spans
        if own is None:
            own = not trace.get_current_span().is_recording()
        session = invocation_context.session
        root = getattr(invocation_context.agent, "name", None)
        if isinstance(calling, Run):  # an AgentTool's run: the caller's conversation
            conversation, scope, agent_name = calling.conversation, calling.scope, root
        else:
            conversation = scope = session.id
            agent_name = None
        turn = self.layer.start_turn(
            conversation,
            scope=self.scope_for(session),
            agent_span=own,
            agent_name=agent_name,
        )
        run = Run(turn, conversation, scope, own, root, turn.agent_name)
        run.lanes[None] = Lane(turn)
        with self._lock:
            self._runs[invocation_context.invocation_id] = run
            evicted = (
                self._runs.pop(next(iter(self._runs))) if len(self._runs) > _MAX_RUNS else None
            )
        if evicted is not None:
            evicted.end(c.ABANDONED_RUN)

    def _end_run(self, invocation_id: str, exc: BaseException | str | None) -> None:
        with self._lock:
            run = self._runs.pop(invocation_id, None)
        if run is None:
            return
        if exc is None and any(lane.chat is not None for lane in run.lanes.values()):
            # a model call that never delivered its whole answer: the caller
            # stopped reading the stream, the run did not reach its end
            exc = c.ABANDONED_RUN
        run.end(exc)

    @HOOKS.containing_async("after_run")
    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        aborted = invocation_context.is_aborted is True
        self._end_run(invocation_context.invocation_id, c.ABANDONED_RUN if aborted else None)

    @HOOKS.containing_async("run_error")
    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        self._end_run(invocation_context.invocation_id, error)

    # -- one model call -------------------------------------------------------------

    def _lane(self, run: Run, branch: str | None) -> Lane:
        """The branch's lane (a ``ParallelAgent`` branch gets a turn of its own,
        under the run's ``invoke_agent``)."""
        with run.lock:
            lane = run.lanes.get(branch)
            if lane is None:
                turn = self.layer.start_turn(
                    run.conversation,
                    scope=run.turn.scope,
                    agent_span=False,
                    parent=run.turn.agent_context,
                    agent_name=run.agent_name,
                )
                lane = run.lanes[branch] = Lane(turn)
            return lane

    def _start_step(self, run: Run, lane: Lane, ctx: CallbackContext, request: LlmRequest) -> Any:
        """End the lane's last step and start the iteration of this model call."""
        with run.lock:
            if run.closed:
                return None
            lane.end_chat(None)  # a call answered by a later callback: no model ran
            turn = lane.turn
            turn.messages = translate.messages(request.contents, request.config.system_instruction)
            turn.role = self.role_for(ctx)
            agent = ctx.agent_name
            turn.agent_name = agent if agent and agent != run.root_agent else run.agent_name
            if not run.own_spans:
                # ADK's invoke_agent of the agent making the call is current
                turn.base = otel_context.get_current()
            it = turn.start_iteration()
            lane.iteration = it
            lane.resumed = False
            lane.usage = None
            lane.carried = lane.present = ()
            return it

    def _select(self, lane: Lane, it: Any, request: LlmRequest, has_stub: bool) -> None:
        """The selection over the request's function declarations: what the model
        sees (``config.tools``) and what may run (``tools_dict``)."""
        if self.offload and has_stub and RECALL_TOOL not in request.tools_dict:
            request.append_tools([self.recall_tool])
        declared = translate.declarations(request.config.tools)
        fixed = [d for d in declared if d.name == _STRUCTURED]
        offered = [d for d in declared if d.name != _STRUCTURED]
        with it.current():
            selection = it.select_tools(offered, fixed=fixed)
        names = {d.name or "" for d in declared}
        keep = {d.name or "" for d in fixed} | {getattr(t, "name", "") for t in selection.tools}
        if names - keep:
            request.config.tools = translate.narrowed(request.config.tools, keep)
            request.tools_dict = translate.runnable(request.tools_dict, names, keep)
        forced = selection.forced_tool
        if forced and forced in keep:
            request.config.tool_config = translate.forced_tool_config(
                request.config.tool_config, forced
            )
        lane.runnable = frozenset(request.tools_dict)
        lane.structured = frozenset(d.name or "" for d in fixed)

    def _switchable(self, model: BaseLlm, ctx: CallbackContext) -> bool:
        """Whether the agent's own model object can serve ``model`` by its id
        (the same kind of model: ADK calls the agent's object whatever a
        plugin does)."""
        try:
            agent: Any = ctx.get_invocation_context().agent
            return type(agent.canonical_model) is type(model)
        except Exception:
            return False

    def _plan(self, it: Any, ctx: CallbackContext, request: LlmRequest) -> tuple[str, bool]:
        """The PRE seam, and the model the request is switched to; the name that
        serves it and whether it is named (not only the layer's default)."""
        own = request.model or None
        plan = plan_model(it, models=self.models, own=own)
        choice = plan.choice
        target = choice.model
        served: str | None
        if isinstance(target, BaseLlm):
            if self._switchable(target, ctx):
                served = target.model
            else:
                served = own
                unavailable = ModelChoice(own, own or choice.name, own is not None, True)
                note_unavailable(it, plan.pre, unavailable)
        else:
            served = target if isinstance(target, str) and target else None
        if served and served != request.model:
            request.model = served
        params = {k: v for k, v in plan.params.items() if k in _CONFIG_FIELDS}
        if params:
            request.config = request.config.model_copy(update=params)
        if served:
            return served, True
        return choice.name, choice.named

    @HOOKS.containing_async("before_model")
    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        run = self._run_of(callback_context.invocation_id)
        if run is None:
            return None
        lane = self._lane(run, callback_context.branch)
        it = self._start_step(run, lane, callback_context, llm_request)
        if it is None:
            return None
        ids, back = translate.stubs(llm_request.contents)
        self._select(lane, it, llm_request, bool(ids))
        name, named = self._plan(it, callback_context, llm_request)
        lane.carried, lane.present = self.outputs.carried(run.scope, ids, back)
        lane.chat = it.start_chat(name, named=named, span=run.own_spans)
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        if llm_response.partial:
            return None
        run = self._run_of(callback_context.invocation_id)
        lane = None if run is None else run.lanes.get(callback_context.branch)
        it = None if lane is None else lane.iteration
        if lane is None or it is None:
            return None
        try:
            usage = translate.usage(llm_response.usage_metadata)
            named = llm_response.model_version
            model_answered(lane, usage, outputs=self.outputs, response_model=named)
        except Exception:
            failed("google_adk.usage")
        lane.end_chat(None)
        try:
            message, calls, positions = translate.emitted(llm_response)
            answers = tuple(x for x in calls if x.name in lane.structured)
            structured_answers(it, message, answers)
            routed = [(x, at) for x, at in zip(calls, positions, strict=True) if x not in answers]
            if not routed:
                return None
            # ADK answers a call of a tool outside tools_dict with an error: refused
            post = post_model(it, message, calls=[x for x, _ in routed], runnable=lane.runnable)
            return translate.rewrite(llm_response, [at for _, at in routed], post)
        except Exception:
            failed("google_adk.after_model")
            return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        run = self._run_of(callback_context.invocation_id)
        lane = None if run is None else run.lanes.get(callback_context.branch)
        if lane is not None:
            lane.end_chat(error)
        return None

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        """A model's whole answer that no after-model callback saw (a later
        callback answered the call itself): the call's span ends with it."""
        if event.partial or event.content is None or event.content.role != "model":
            return None
        run = self._run_of(invocation_context.invocation_id)
        lane = None if run is None else run.lanes.get(event.branch)
        if lane is not None and lane.chat is not None:
            lane.end_chat(None)
        return None

    # -- one tool call ----------------------------------------------------------------

    @HOOKS.containing_async("before_tool")
    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        run = self._run_of(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if run is None or not call_id:
            return None
        lane = run.lanes.get(tool_context.branch)
        it = None if lane is None else lane.iteration
        if lane is None or it is None or lane.resumed:
            # no model step of this run emitted the call: a run resumed at its tools
            # (ADK runs the calls a human confirmed before the invocation's first
            # model call), when a model call of the session emitted it
            events = getattr(tool_context.session, "events", None)
            emitting = translate.emitting_event(events, call_id)
            if emitting is None:
                return None  # not a model's call (a workflow's tool node)
            lane = self._lane(run, tool_context.branch)
            it = self._resumed_step(run, lane)
            if it is None:
                return None
            with run.lock:
                if lane.usage is None:
                    # the emitting call's usage, from its event (what a recall charges of it)
                    lane.usage = translate.usage(getattr(emitting, "usage_metadata", None))
        elif tool.name not in lane.runnable or tool.name in lane.structured:
            return None  # no body starts here: ADK answers an unknown tool itself
        span = None
        if run.own_spans:
            span = it.start_tool(ToolCall(call_id, tool.name, dict(tool_args)))
        base = otel_context.get_current() if span is None else span.context
        context = otel_context.set_value(_CALLING_RUN, run, base)
        entry = Tool(lane, it, span, context)
        # the tool's own spans (and an agent tool's nested run) are its children
        entry.token = otel_context.attach(context)
        with run.lock:
            run.tools[call_id] = entry
        return None

    def _resumed_step(self, run: Run, lane: Lane) -> Any:
        """The iteration of the calls a run resumed at its tools runs before its
        first model call (one for them all), whose tools ADK resolved itself (no
        selection or seam: those were decided in the invocation that emitted
        the calls); None when the run has ended."""
        with run.lock:
            if lane.iteration is None and not run.closed:
                lane.iteration = lane.turn.start_iteration()
                lane.resumed = True
            return lane.iteration

    def _tool_ended(self, run: Run | None, call_id: str | None) -> Tool | None:
        if run is None or not call_id:
            return None
        with run.lock:
            entry = run.tools.pop(call_id, None)
        if entry is not None and entry.token is not None:
            try:
                if otel_context.get_current() is entry.context:
                    otel_context.detach(entry.token)  # type: ignore[arg-type]
            except Exception:
                failed("google_adk.context_detach")
        return entry

    @HOOKS.containing_async("after_tool")
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: Any,
    ) -> dict[str, Any] | None:
        run = self._run_of(tool_context.invocation_id)
        entry = self._tool_ended(run, tool_context.function_call_id)
        if run is None or entry is None:
            return None
        held = translate.held_for_confirmation(tool_context)
        if entry.span is not None:
            if held:
                # waiting for (or refused) a human's confirmation: ADK answered the
                # call with its placeholder, the call's work did not happen
                entry.span.end(c.TOOL_CALL_CANCELLED)
            else:
                entry.iteration.tool_result(entry.span, result)
                entry.span.stop()
        if held:
            return None
        call = ToolCall(tool_context.function_call_id or "", tool.name, dict(tool_args))
        text = None if tool.name == RECALL_TOOL else translate.offloadable_text(result)
        stub = account_tool_output(
            entry.iteration,
            call,
            text,
            outputs=self.outputs,
            scope=run.scope,
            usage=entry.lane.usage,
            offload=self.offload,
        )
        if stub is not None:
            return translate.stubbed(stub)
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: BaseException,
    ) -> dict[str, Any] | None:
        run = self._run_of(tool_context.invocation_id)
        entry = self._tool_ended(run, tool_context.function_call_id)
        if entry is not None and entry.span is not None:
            entry.span.fail(error)
        return None

    # -- the recall tool -----------------------------------------------------------------

    def _recall_function(self) -> Callable[..., Any]:
        run_of, outputs = self._run_of, self.outputs

        async def recall_tool_result(offload_id: str, tool_context: ToolContext) -> str:
            run = run_of(tool_context.invocation_id)
            scope = run.scope if run is not None else tool_context.session.id
            return outputs.answer(scope, tool_context.function_call_id, offload_id)

        recall_tool_result.__name__ = RECALL_TOOL
        recall_tool_result.__doc__ = RECALL.description
        return recall_tool_result
