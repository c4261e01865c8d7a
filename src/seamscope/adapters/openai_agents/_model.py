"""The hooks of one run: the routing Model, the input filter, the run hooks.

* :class:`RoutedModel` is the run's ``RunConfig.model``, so the runner asks
  it for every turn of every agent: it opens the iteration, runs the
  selection pipeline on the offered tools and the PRE seam, calls the chosen
  model inside a ``chat`` span, and rewrites the emitted tool calls by the
  POST seam before the runner executes them (streamed: in the final
  ``ResponseCompletedEvent``).
* :func:`input_filter` is the run's ``call_model_input_filter``: it learns
  the turn's agent and replaces offloaded tool outputs by their stubs.
* :class:`RunHooks` opens and ends ``execute_tool`` spans and asks the
  offload gate about each large text result; :func:`error_formatter` sees
  the exception of a tool that raised.

Every step contains seamscope's own failures: the turn then runs as the SDK
would have run it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from seamscope._internal import Invocation
from seamscope.adapters._kit import (
    RECALL_TOOL,
    account_tool_output,
    model_name_of,
    plan_model,
    post_model,
    report_model_call,
)
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.openai_agents import _translate as translate
from seamscope.adapters.openai_agents._framework import (
    CallModelData,
    FunctionTool,
    Model,
    ModelInputData,
    ModelResponse,
    ModelSettings,
    ResponseCompletedEvent,
    RunContextWrapper,
    Tool,
    ToolContext,
    ToolErrorFormatterArgs,
)
from seamscope.adapters.openai_agents._framework import RunHooks as SDKRunHooks
from seamscope.adapters.openai_agents._run import LOG, Run, attached, contained, failed
from seamscope.decisions import ToolCall
from seamscope.loop import ChatCall, DecisionLayer, Iteration


class RunnerView(Protocol):
    """What the hooks of a run read of the runner that started it (the runner
    module imports this one, never the other way round)."""

    layer: DecisionLayer
    models: Mapping[str, Model]
    offload: bool
    outputs: Outputs

    def role_for(self, agent: Any) -> str | None: ...

    def nest(self, outer: Run, context: ToolContext[Any], agent_name: str | None) -> None: ...


__all__ = ["RoutedModel", "RunHooks", "error_formatter", "input_filter"]


@dataclass(slots=True)
class _Plan:
    """What the decisions made of one model call."""

    iteration: Iteration | None
    model: Model
    name: str
    tools: list[Tool]
    settings: ModelSettings
    carried: tuple[Any, ...]
    named: bool = True
    present: tuple[Any, ...] = ()


class RoutedModel(Model):
    """The Model the runner calls for every turn of one run (``RunConfig.model``).

    ``base`` is the caller's own ``RunConfig.model`` (None: each agent's own
    model); names are resolved by the caller's ``RunConfig.model_provider``.
    """

    def __init__(self, runner: RunnerView, run: Run, base: Any, provider: Any) -> None:
        self.runner = runner
        self.run = run
        self._base = base
        self._provider = provider

    # -- the plan of a turn -----------------------------------------------------

    def _resolve(self, model: Model | str | None) -> Model:
        return model if isinstance(model, Model) else self._provider.get_model(model)

    def _plan(
        self,
        instructions: str | None,
        input: Any,
        settings: ModelSettings,
        tools: list[Tool],
    ) -> _Plan:
        run, runner = self.run, self.runner
        agent, run.agent = run.agent, None
        carried, run.carried = run.carried, ()
        present, run.present = run.present, ()
        own = self._base if self._base is not None else getattr(agent, "model", None)
        default = runner.layer.router.default_model.model_name
        try:
            name = getattr(agent, "name", None)
            if isinstance(name, str) and name:
                run.turn.agent_name = name  # a handoff: the agent that runs this turn
            it = run.start_iteration(
                translate.messages(instructions, input), runner.role_for(agent)
            )
            with attached(run.otel):
                offered = translate.offered(tools, recall=runner.offload and run.recallable)
                selection = it.select_tools(offered)
            model_plan = plan_model(it, models=runner.models, own=own, context=run.otel)
            choice = model_plan.choice
            send, other = translate.selected_tools(selection.tools)
            for tool in other:
                LOG.warning("selected tool %r is not an Agents SDK tool; not sent", tool)
            if choice.model is own and self._base is None:
                settings = translate.own_settings(agent, settings)
            settings = translate.with_parameters(settings, model_plan.params)
            settings = translate.with_forced_tool(settings, selection.forced_tool)
            return _Plan(
                it,
                self._resolve(choice.model),
                choice.name,
                send,
                settings,
                carried,
                choice.named,
                present,
            )
        except Exception:
            failed("openai_agents.before_model_call")
            name = model_name_of(own)
            return _Plan(
                run.iteration,
                self._resolve(own),
                name or default,
                tools,
                settings,
                carried,
                name is not None,
                present,
            )

    def _report(self, plan: _Plan, call: Any, raw_usage: Any, model: Any = None) -> None:
        try:
            usage = translate.usage(raw_usage)
            self.run.usage = usage
            report_model_call(
                call,
                usage,
                response_model=model,
                carried=plan.carried,
                present=plan.present,
                outputs=self.runner.outputs,
            )
        except Exception:
            failed("openai_agents.usage")

    def _post(self, plan: _Plan, output: list[Any]) -> list[Any] | None:
        """The POST seam over the emitted tool calls; the rewritten output (or None)."""
        it = plan.iteration
        if it is None:
            return None
        try:
            message, positions = translate.emitted(output)
            if not message.tool_calls:
                return None
            post = post_model(it, message, context=self.run.otel)
            if self.run.hookless:
                # a nested run: no run hooks see its tools; a tool's span runs
                # from its dispatch to the model call that reads its output
                for call in post.calls:
                    self.run.open_tool(call)
            return translate.rewrite(output, positions, post)
        except Exception:
            failed("openai_agents.after_model_call")
            return None

    # -- the Model interface ----------------------------------------------------

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        plan = self._plan(system_instructions, input, model_settings, tools)
        it = plan.iteration
        with attached(self.run.otel):
            factory = None if it is None else (lambda: it.chat(plan.name, named=plan.named))
            with contained(factory, "openai_agents.chat_span") as call:
                try:
                    response = await plan.model.get_response(
                        system_instructions,
                        input,
                        plan.settings,
                        plan.tools,
                        output_schema,
                        handoffs,
                        tracing,
                        previous_response_id=previous_response_id,
                        conversation_id=conversation_id,
                        prompt=prompt,
                    )
                except BaseException as exc:
                    self.run.model_ended(exc)
                    raise
                self.run.model_ended(None)
                self._report(plan, call, response.usage)
        output = self._post(plan, list(response.output))
        if output is None:
            return response
        try:
            return _with_output(response, output)
        except Exception:
            failed("openai_agents.rewrite")
            return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[Any]:
        plan = self._plan(system_instructions, input, model_settings, tools)
        it = plan.iteration
        held: tuple[ChatCall, Invocation] | None = None
        if it is not None:
            try:  # the chat span lives until the stream's last event (or its end)
                held = it.start_chat(plan.name, named=plan.named, parent=self.run.otel)
            except Exception:
                failed("openai_agents.chat_span")
        # the provider's own spans are the chat span's children, as in get_response:
        # its context is current while the model produces each event (never
        # across a yield, which hands control to the consumer's code)
        chat_context = self.run.otel if held is None else held[1].context
        try:
            with attached(chat_context):
                stream = plan.model.stream_response(
                    system_instructions,
                    input,
                    plan.settings,
                    plan.tools,
                    output_schema,
                    handoffs,
                    tracing,
                    previous_response_id=previous_response_id,
                    conversation_id=conversation_id,
                    prompt=prompt,
                ).__aiter__()
            while True:
                with attached(chat_context):
                    try:
                        event = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                if isinstance(event, ResponseCompletedEvent):
                    event = self._completed(plan, held, event)
                yield event
        except GeneratorExit:
            if held is not None:
                held[1].stop()  # the consumer stopped reading: not a model error
            raise
        except BaseException as exc:
            self.run.model_ended(exc)
            if held is not None:
                held[1].fail(exc)
            raise
        else:
            self.run.model_ended(None)
        finally:
            if held is not None:
                held[1].stop()

    def _completed(
        self, plan: _Plan, held: tuple[ChatCall, Invocation] | None, event: ResponseCompletedEvent
    ) -> ResponseCompletedEvent:
        """The final event: usage on the chat span, which ends; then the POST seam."""
        self._report(
            plan,
            None if held is None else held[0],
            event.response.usage,
            getattr(event.response, "model", None),
        )
        if held is not None:
            held[1].stop()
        output = self._post(plan, list(event.response.output))
        if output is None:
            return event
        try:
            response = event.response.model_copy(update={"output": output})
            return event.model_copy(update={"response": response})
        except Exception:
            failed("openai_agents.rewrite")
            return event


def _with_output(response: ModelResponse, output: list[Any]) -> ModelResponse:
    return ModelResponse(
        output=output,
        usage=response.usage,
        response_id=response.response_id,
        request_id=response.request_id,
        raw_usage=response.raw_usage,
    )


# -- the input filter and the error formatter -------------------------------------------


def input_filter(runner: RunnerView, run: Run, user: Callable[..., Any] | None) -> Any:
    """The run's ``call_model_input_filter``: the caller's filter first, then
    the turn's agent noted and offloaded outputs replaced by their stubs."""

    async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        if user is not None:
            updated = user(data)
            model_data = await updated if inspect.isawaitable(updated) else updated
        try:
            run.agent = data.agent
            if run.hookless:
                for call_id, output in translate.call_outputs(model_data.input):
                    run.close_tool(call_id, output)
            if not runner.offload:
                run.carried = run.present = ()
                return model_data
            # the store's outputs of the conversation, whichever worker made them:
            # the session holds their full text, the model gets their stubs
            held = runner.outputs.held(run.scope)
            run.recallable = bool(held)
            items, carried = translate.stub_input(model_data.input, held)
            run.carried, run.present = runner.outputs.carried(
                run.scope, carried, translate.recalled(model_data.input)
            )
            if not carried:
                return model_data
            return ModelInputData(input=items, instructions=model_data.instructions)
        except Exception:
            failed("openai_agents.input_filter")
            return model_data

    return call_model_input_filter


def error_formatter(run: Run, user: Callable[..., Any] | None) -> Any:
    """The run's ``tool_error_formatter``: note the exception on the tool's
    span, then answer what the caller's formatter answers (None: the SDK's)."""

    def tool_error_formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
        try:
            if args.kind == "tool_exception" and args.error is not None:
                run.tool_error(args.call_id, args.error)
        except Exception:
            failed("openai_agents.tool_error")
        return None if user is None else user(args)

    return tool_error_formatter


# -- the run hooks ----------------------------------------------------------------------------


class RunHooks(SDKRunHooks[Any]):
    """seamscope's run hooks around the caller's own (``hooks=``), which are
    called after seamscope's for every event."""

    def __init__(self, runner: RunnerView, run: Run, user: SDKRunHooks[Any] | None) -> None:
        self._runner = runner
        self._run = run
        self._user = user

    async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
        if self._user is not None:
            await self._user.on_llm_start(context, agent, *args)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        if self._user is not None:
            await self._user.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if self._user is not None:
            await self._user.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self._user is not None:
            await self._user.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        if self._user is not None:
            await self._user.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Any) -> None:
        try:
            if isinstance(context, ToolContext) and isinstance(tool, FunctionTool):
                name = context.tool_name or tool.name
                args = translate.parse_args(context.tool_arguments)
                self._run.open_tool(ToolCall(context.tool_call_id, name, args))
                nested = translate.agent_tool(tool)
                if nested is not None:
                    self._runner.nest(self._run, context, nested)
        except Exception:
            failed("openai_agents.before_tool_call")
        if self._user is not None:
            await self._user.on_tool_start(context, agent, tool)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Any, tool: Any, result: Any
    ) -> None:
        try:
            if isinstance(context, ToolContext):
                call = self._run.close_tool(context.tool_call_id, result)
                if call is not None:
                    self._after_tool(call, result)
        except Exception:
            failed("openai_agents.after_tool_call")
        if self._user is not None:
            await self._user.on_tool_end(context, agent, tool, result)

    def _after_tool(self, call: ToolCall, result: Any) -> None:
        """The offload gate on a large text result, or the cost of a recall."""
        run, runner = self._run, self._runner
        it = run.iteration
        if it is None or not runner.offload:
            return
        # the stub replaces the output in later model calls (the input filter)
        account_tool_output(
            it,
            call,
            None if call.name == RECALL_TOOL else translate.offloadable_text(result),
            outputs=runner.outputs,
            scope=run.scope,
            usage=run.usage,
            context=run.otel,
        )
