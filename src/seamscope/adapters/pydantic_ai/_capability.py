"""``SeamscopeCapability``: seamscope's decisions as a pydantic-ai capability.

The capability is added to an agent (``capabilities=[...]``) or to one run;
``for_run`` gives each run a :class:`_RunCapability` of its own whose hooks
hold that run's :class:`~._run.Run`:

* ``wrap_run``: the run's ``invoke_agent`` span (unless pydantic-ai's own
  instrumentation opens one) and the run's end, which ends its spans;
* ``prepare_tools``: a new iteration per request step and the selection
  pipeline over the step's function tools (the result is both what the
  model is offered and what can execute);
* ``wrap_model_request``: the PRE seam, the model swap and the ``chat``
  span around the request;
* ``after_model_request``: usage (and the ledger's carried stubs), then the
  POST seam over the emitted function tool calls, rewritten in the response
  before any of them executes;
* ``wrap_tool_execute``: the ``execute_tool`` span;
* ``after_tool_execute``: the offload gate on a large text result (a fired
  offload returns the stub) or the cost of a recall;
* ``get_wrapper_toolset``: the recall tool, added to the step's tools where
  the selection kept it (one toolset wrapping the agent's, not a toolset of
  its own beside them: pydantic-ai runs a task group per step over two).

Every hook contains seamscope's own failures: the step then runs as
pydantic-ai would have run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from seamscope._internal import record_error
from seamscope.adapters._kit import (
    RECALL,
    RECALL_TOOL,
    Frame,
    account_tool_output,
    check_options,
    model_answered,
    plan_model,
    post_model,
    structured_answers,
)
from seamscope.adapters.pydantic_ai import _translate as translate
from seamscope.adapters.pydantic_ai._framework import (
    AbstractCapability,
    AbstractToolset,
    FunctionToolset,
    Model,
    ModelRequestContext,
    ModelResponse,
    NoOpTracer,
    PreparedToolset,
    RunContext,
    ToolCallPart,
    ToolDefinition,
    UsageLimitExceeded,
    WrapperToolset,
)
from seamscope.adapters.pydantic_ai._run import HOOKS, Run, attached, contained, failed
from seamscope.decisions import OffloadStore, ToolCall
from seamscope.loop import DecisionLayer
from seamscope.telemetry import conventions as c

__all__ = ["SeamscopeCapability"]


_RUN_HERE = frozenset({"function", "unapproved"})
"""The kinds of tool pydantic-ai runs itself: function tools, and the calls of
tools that need approval once approved (a resumed run's deferred calls)."""


def _refused(ctx: RunContext[Any]) -> bool:
    """Whether pydantic-ai will refuse this step's model request (its usage limits,
    checked with their own public ``check_before_request`` on the run's usage,
    as pydantic-ai checks them before ``wrap_model_request``): such a step is
    no iteration (it makes no model call); the run ends with the limit's
    ``UsageLimitExceeded``."""
    limits = getattr(ctx, "usage_limits", None)
    check = getattr(limits, "check_before_request", None)
    if check is None:
        return False
    try:
        check(ctx.usage)
    except UsageLimitExceeded:
        return True
    except Exception:
        failed("pydantic_ai.usage_limits")
    return False


def _scope(ctx: RunContext[Any]) -> str:
    """Who may read an offloaded output: the conversation (else the run)."""
    return ctx.conversation_id or f"run:{ctx.run_id}"


class SeamscopeCapability(Frame, AbstractCapability[Any]):
    """seamscope's decision layer as a pydantic-ai capability.

    ``layer``: the :class:`~seamscope.loop.DecisionLayer` whose
    router, selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: model name → pydantic-ai ``Model`` the PRE seam may switch
    to. ``role``: what policies and stages see as the run's role: a str, a
    callable of the ``RunContext``, or None (the agent's ``name``).
    ``scope``: the adopter's data for policies, a mapping or a callable of
    the run's ``deps``. ``offload``: False turns the offload gate (and the
    recall tool) off. ``offload_store``: where offloaded outputs live (an
    :class:`~seamscope.decisions.OffloadStore` or a URL); None: the layer's
    (its ``offload_store``, ``SEAMSCOPE_OFFLOAD_STORE``, or this process's
    memory: ``max_stored_outputs`` outputs at most when given).
    ``genai_spans``: whether seamscope opens its own ``invoke_agent``,
    ``chat`` and ``execute_tool`` spans; None (the default)
    means "unless pydantic-ai's own instrumentation is on for the run".

    Configuration errors raise ValueError naming the argument.
    """

    __hash__ = object.__hash__
    HOOKS = HOOKS

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, Model] | None = None,
        *,
        role: str | Callable[[RunContext[Any]], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        offload: bool = True,
        max_stored_outputs: int | None = None,
        genai_spans: bool | None = None,
        offload_store: OffloadStore | str | None = None,
    ) -> None:
        options = check_options(
            "SeamscopeCapability",
            layer,
            models,
            model_ok=lambda model: isinstance(model, Model),
            model_kind="a pydantic_ai Model",
            models_kind="Model",
            role=role,
            scope=scope,
            offload=offload,
            max_stored_outputs=max_stored_outputs,
            offload_store=offload_store,
            genai_spans=genai_spans,
        )
        self.id = None
        self.description = None
        self.defer_loading = False
        self._hold(options)
        self.recall_toolset: FunctionToolset[Any] = FunctionToolset([self._recall_tool()])
        """The toolset holding ``recall_tool_result`` (added to each run's tools by
        the capability). It is offered whenever the request's messages hold a stub."""
        self.recall_tool_def: ToolDefinition = self.recall_toolset.tools[RECALL.name].tool_def
        """Its ``ToolDefinition``, as the selection is offered it."""

    def __eq__(self, other: object) -> bool:
        return self is other

    # -- public helpers -----------------------------------------------------------

    def role_for(self, ctx: RunContext[Any]) -> str | None:
        """The role of a run (default: the agent's name)."""
        return self._role_of(ctx, getattr(ctx.agent, "name", None))

    # -- the capability -----------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        return _RunCapability(self)

    def _recall_tool(self) -> Callable[..., Any]:
        outputs = self.outputs

        async def recall_tool_result(ctx: RunContext[Any], offload_id: str) -> str:
            return outputs.answer(_scope(ctx), ctx.tool_call_id, offload_id)

        recall_tool_result.__name__ = RECALL.name
        recall_tool_result.__doc__ = RECALL.description  # the one recall tool's text
        return recall_tool_result


class _RunCapability(AbstractCapability[Any]):
    """The hooks of one run (``SeamscopeCapability.for_run``)."""

    __hash__ = object.__hash__

    def __init__(self, parent: SeamscopeCapability) -> None:
        self.id = None
        self.description = None
        self.defer_loading = False
        self.parent = parent
        self.run: Run | None = None

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"_RunCapability({self.parent!r})"

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """The run's tools with the recall tool: added beneath the capabilities'
        ``prepare_tools`` (pydantic-ai's ``PreparedToolset``, which every
        capability's hook sees, seamscope's selection included), as a toolset
        of the agent's would be; where no such layer is found, outside them
        (where the selection kept it)."""
        if not self.parent.offload:
            return None
        recall = self.parent.recall_toolset
        try:
            above: list[WrapperToolset[Any]] = []
            layer = toolset
            while isinstance(layer, WrapperToolset) and not isinstance(layer, PreparedToolset):
                above.append(layer)
                layer = layer.wrapped
            if isinstance(layer, PreparedToolset):
                rebuilt: AbstractToolset[Any] = dataclasses.replace(
                    layer, wrapped=_WithRecall(layer.wrapped, recall, None)
                )
                for wrapper in reversed(above):
                    rebuilt = dataclasses.replace(wrapper, wrapped=rebuilt)
                return rebuilt
        except Exception:
            failed("pydantic_ai.recall_toolset")
        return _WithRecall(toolset, recall, self)

    # -- the run ------------------------------------------------------------------

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        parent = self.parent
        layer = parent.layer
        own = parent.genai_spans
        if own is None:
            own = isinstance(ctx.tracer, NoOpTracer)
        conversation = ctx.conversation_id

        turn = None
        try:
            turn = layer.start_turn(conversation, scope=parent.scope_for(ctx.deps), agent_span=own)
            self.run = Run(turn, _scope(ctx), own_spans=own)
        except Exception:
            failed("pydantic_ai.run_start")
        # the run's invoke_agent current for pydantic-ai's own work inside it
        with attached(None if turn is None else turn.agent_context):
            try:
                result = await handler()
            except BaseException as exc:
                if self.run is not None:
                    self.run.close(exc)
                raise
            if self.run is not None:
                self.run.close(None)
        return result

    # -- one request step -----------------------------------------------------------

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        run, parent = self.run, self.parent
        if run is None or _refused(ctx):
            return tool_defs
        try:
            it = run.start_iteration(
                ctx.run_step, translate.messages(ctx.messages), parent.role_for(ctx)
            )
            if it is None:
                return tool_defs
            with attached(run.otel):
                # the recall tool is offered whenever the prompt holds a stub
                # (any worker's: the history may have been saved and reloaded)
                recall = parent.offload and bool(translate.stubs(ctx.messages)[0])
                offered = translate.offered(tool_defs, recall=recall)
                # the recall tool is among the step's tools, unless it is added after
                # every capability's prepare_tools (_WithRecall outside them)
                outside = recall and not any(t.name == RECALL.name for t in tool_defs)
                if outside:
                    offered.append(parent.recall_tool_def)
                selection = it.select_tools(offered)
            kept = [t for t in selection.tools if isinstance(t, ToolDefinition)]
            # pydantic-ai answers a call of any other tool with its unknown-tool retry
            run.runnable = frozenset(t.name for t in kept)
            at = next((i for i, t in enumerate(kept) if t.name == RECALL.name), None)
            run.recall_at = at
            return kept[:at] + kept[at + 1 :] if outside and at is not None else kept
        except Exception:
            failed("pydantic_ai.prepare_tools")
            return tool_defs

    async def wrap_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, handler: Any
    ) -> ModelResponse:
        run, parent = self.run, self.parent
        if run is None:
            return await handler(request_context)  # type: ignore[no-any-return]
        name: str | None = None
        named = True
        try:
            messages = translate.messages(request_context.messages)
            it = run.iteration
            if it is None or run.step != ctx.run_step:  # a step prepare_tools did not open
                it = run.start_iteration(ctx.run_step, messages, parent.role_for(ctx))
            else:
                run.turn.messages = messages
            if it is not None:
                plan = plan_model(it, models=parent.models, own=request_context.model)
                choice = plan.choice
                updates: dict[str, Any] = {}
                if choice.model is not request_context.model:
                    updates["model"] = choice.model
                if plan.params:
                    updates["model_settings"] = {
                        **(request_context.model_settings or {}),
                        **plan.params,
                    }
                if updates:
                    request_context = dataclasses.replace(request_context, **updates)
                ids, back = translate.stubs(request_context.messages)
                run.carried, run.present = parent.outputs.carried(run.scope, ids, back)
                name, named = choice.name, choice.named
        except Exception:
            failed("pydantic_ai.before_model_request")
        it = run.iteration
        if it is None or name is None:
            return await handler(request_context)  # type: ignore[no-any-return]
        chat_name = name
        if not run.own_spans:  # pydantic-ai records the chat span
            run.chat = it.start_chat(chat_name, named=named, span=False)
            return await handler(request_context)  # type: ignore[no-any-return]
        with contained(lambda: it.start_chat(chat_name, named=named), "pydantic_ai.chat") as call:
            run.chat = call if call is not None else it.start_chat(chat_name, span=False)
            return await handler(request_context)  # type: ignore[no-any-return]

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        run = self.run
        it = None if run is None else run.iteration
        if run is None or it is None:
            return response
        if getattr(response, "state", None) == "incomplete":
            # the caller stopped reading the stream: the reply never arrived
            # whole, so its chat span is not a successful call
            try:
                if run.chat is not None:
                    record_error(run.chat.span, c.ABANDONED_RUN)
            except Exception:
                failed("pydantic_ai.after_model_request")
            return response
        try:
            usage = translate.usage(response.usage)
            outputs = self.parent.outputs
            model_answered(run, usage, outputs=outputs, response_model=response.model_name)
        except Exception:
            failed("pydantic_ai.usage")
        try:
            output_tools = [t.name for t in request_context.model_request_parameters.output_tools]
            message, calls, positions = translate.emitted(response, output_tools)
            answers = translate.output_calls(response, output_tools)
            structured_answers(it, message, answers)
            if not calls:
                return response
            post = post_model(it, message, calls=calls, runnable=run.runnable)
            return translate.rewrite(response, positions, post) or response
        except Exception:
            failed("pydantic_ai.after_model_request")
            return response

    # -- one tool call --------------------------------------------------------------

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Any,
    ) -> Any:
        run = self.run
        it = None if run is None else run.iteration
        if run is None or it is None or not run.own_spans or tool_def.kind not in _RUN_HERE:
            return await handler(args)
        tool_call = ToolCall(call.tool_call_id, call.tool_name, translate.call_args(call))
        tool = it.start_tool(tool_call)
        with tool.current():  # the tool's own spans are its children; its exception fails it
            result = await handler(args)
        it.tool_result(tool, result)
        tool.stop()
        return result

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        result: Any,
    ) -> Any:
        run, parent = self.run, self.parent
        it = None if run is None else run.iteration
        if run is None or it is None or not parent.offload or tool_def.kind not in _RUN_HERE:
            return result
        try:
            tool_call = ToolCall(call.tool_call_id, call.tool_name, translate.call_args(call))
            text = None if call.tool_name == RECALL_TOOL else translate.offloadable_text(result)
            usage = run.usage
            if usage is None and call.tool_name == RECALL_TOOL:
                # a run resumed at its tools (the history's last response, or the
                # approvals of its deferred calls): the request that emitted the
                # recall was an earlier run's; its usage is in the history (what a
                # recall charges of it, as in one uninterrupted run)
                usage = run.usage = translate.emitting_usage(ctx.messages, call.tool_call_id)
            stub = account_tool_output(
                it,
                tool_call,
                text,
                outputs=parent.outputs,
                scope=run.scope,
                usage=usage,
            )
            if stub is not None:
                return stub
        except Exception:
            failed("pydantic_ai.after_tool_execute")
        return result


@dataclasses.dataclass
class _WithRecall(WrapperToolset[Any]):
    """Tools and ``recall_tool_result`` after them (one toolset wrapping the
    agent's: pydantic-ai runs a task group per step over two toolsets side by
    side); a call of it is the recall toolset's. ``capability``: None beneath
    the capabilities' ``prepare_tools`` (the recall tool is one of the tools
    they prepare); outside them, the run's, whose selection says where the
    step offers it, if at all."""

    recall: FunctionToolset[Any]
    capability: _RunCapability | None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, Any]:
        tools = await self.wrapped.get_tools(ctx)
        run = None if self.capability is None else self.capability.run
        at = -1 if run is None else run.recall_at
        if at is None:
            return tools
        recall = await self.recall.get_tools(ctx)
        if at < 0 or at >= len(tools):
            return {**tools, **recall}
        items = list(tools.items())
        items[at:at] = recall.items()
        return dict(items)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any
    ) -> Any:
        if name == RECALL.name and tool.toolset is self.recall:
            return await self.recall.call_tool(name, tool_args, ctx, tool)
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)
