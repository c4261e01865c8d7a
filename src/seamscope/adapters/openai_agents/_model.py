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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace

from seamscope._internal import error_type
from seamscope.adapters._kit import (
    RECALL_TOOL,
    account_tool_output,
    estimate_tokens,
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
    ToolOutputTrimmer,
    cleanup_on_run_end,
)
from seamscope.adapters.openai_agents._framework import RunHooks as SDKRunHooks
from seamscope.adapters.openai_agents._run import HOOKS, LOG, Run, attached, contained, failed
from seamscope.adapters.openai_agents._translate import Trimmed
from seamscope.adapters.openai_agents._trims import Trims, compaction_id
from seamscope.decisions import ToolCall
from seamscope.decisions.records import MiddlewareDecision, MiddlewareDecisionKind, OffloadMechanism
from seamscope.loop import ChatCall, DecisionLayer, Iteration
from seamscope.telemetry import conventions as c

if TYPE_CHECKING:
    from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest


class RunnerView(Protocol):
    """What the hooks of a run read of the runner that started it (the runner
    module imports this one, never the other way round)."""

    layer: DecisionLayer
    models: Mapping[str, Model]
    offload: bool
    outputs: Outputs
    trims: Trims

    def role_for(self, agent: Any) -> str | None: ...

    def nest(
        self, outer: Run, context: ToolContext[Any], agent_name: str | None, agent: Any = None
    ) -> None: ...


__all__ = ["RoutedModel", "RunHooks", "error_formatter", "input_filter"]


_MAX_ERROR_MESSAGE = 256
# RoutedModel's own attributes: never forwarded to the model the SDK sees
_OWN = frozenset({"runner", "run", "_base", "_provider", "_call", "_used", "_resolved"})


@dataclass(slots=True)
class _Plan:
    """What the decisions made of one model call (its retries reuse it)."""

    iteration: Iteration | None
    model: Model
    name: str
    tools: list[Tool]
    settings: ModelSettings
    carried: tuple[Any, ...]
    named: bool = True
    present: tuple[Any, ...] = ()
    attempts: int = 0
    compacted: tuple[str, ...] = ()  # the trims (compaction ids) the input carries


class RoutedModel(Model):
    """The Model the runner calls for every turn of one run (``RunConfig.model``).

    ``base`` is the caller's own ``RunConfig.model`` (None: each agent's own
    model); names are resolved by the caller's ``RunConfig.model_provider``.

    A wrapper the SDK cannot tell from the model it would have used itself:

    * a model call goes to the model its plan chose; a call the SDK makes again
      without running the input filter (its retry of a failed call) reuses
      that plan: the same model, tools and settings, the same iteration (a
      ``chat`` span per attempt), and no decision made again;
    * ``get_retry_advice`` answers for the model whose call failed;
      ``_cleanup_on_run_end`` and ``close`` reach every model the run called;
    * anything else the SDK reads (``_supports_default_prompt_cache_key``,
      ``model``, ...), and its ``isinstance`` checks (``__class__``), see the
      model the SDK itself would resolve for the agent it runs now
      (``get_model`` with the caller's ``RunConfig``). So the SDK decides what
      depends on the model's type (Chat Completions with output guardrails
      and a server-managed conversation) as it would without seamscope.
    """

    def __init__(self, runner: RunnerView, run: Run, base: Any, provider: Any) -> None:
        self.runner = runner
        self.run = run
        self._base = base
        self._provider = provider
        self._call: _Plan | None = None  # the last model call's plan
        self._used: list[Model] = []  # every model a call went to, first use first
        self._resolved: dict[str | None, Model] = {}  # names resolved by the provider

    # -- the model the SDK sees -------------------------------------------------

    def _named(
        self, name: Any, *, strict: bool = False, provider_errors: bool = False
    ) -> Model | None:
        """The provider's model for ``name`` (resolved once per run); None when
        it cannot be resolved. ``strict``: raise instead (a name that is not a
        str is a TypeError); ``provider_errors``: raise what the provider raised."""
        if name is not None and not isinstance(name, str):
            if strict:
                raise TypeError(f"not a model name: {name!r}")
            return None
        found = self._resolved.get(name)
        if found is None:
            try:
                found = self._provider.get_model(name)
            except Exception:
                if strict or provider_errors:
                    raise
                return None
            self._resolved[name] = found
        return found

    def _seen(self, *, provider_errors: bool = False) -> Model | None:
        """The model the SDK itself would resolve for the agent it runs now
        (its ``get_model`` with the caller's RunConfig); None when unknown.
        ``provider_errors``: what the provider raised resolving it is raised."""
        base = self._base
        if base is not None:  # (the usual None skips two abstract-class checks)
            if isinstance(base, Model):
                return base
            if isinstance(base, str):
                return self._named(base, provider_errors=provider_errors)
        agent = self.run.current_agent
        if agent is None:
            return None
        model = getattr(agent, "model", None)
        if isinstance(model, Model):
            return model
        return self._named(model, provider_errors=provider_errors)

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:
        """The type of the model the SDK would resolve (``isinstance`` reads it).
        Where the SDK checks that type, it resolves the model itself, so what the
        caller's provider raises then is raised here too (``isinstance``
        propagates it): the SDK's check fails as it would without seamscope."""
        seen = self._seen(provider_errors=True)
        return type(self) if seen is None else type(seen)

    def __getattr__(self, name: str) -> Any:
        """Whatever the SDK reads of its model that a Model wrapper has not:
        the model the SDK would resolve itself."""
        if name.startswith("__") or name in _OWN:
            raise AttributeError(name)
        seen = self._seen()
        if seen is None:
            raise AttributeError(name)
        return getattr(seen, name)

    # -- the plan of a turn -----------------------------------------------------

    def _resolve(self, model: Model | str | None) -> Model:
        if isinstance(model, Model):
            return model
        found = self._named(model, strict=True)
        assert found is not None
        return found

    def _begin(
        self,
        instructions: str | None,
        input: Any,
        settings: ModelSettings,
        tools: list[Tool],
        server: bool,
    ) -> _Plan:
        """The plan of this model call: a new one after the input filter ran,
        else (the SDK retrying the call) the last call's. ``server``: the
        conversation's history is the provider's (a previous response or a
        conversation id), not in ``input``."""
        run = self.run
        last = self._call
        if last is not None and not run.fresh:
            last.attempts += 1
            return last
        run.fresh = False
        plan = self._plan(instructions, input, settings, tools, server)
        plan.attempts = 1
        self._call = plan
        if not any(used is plan.model for used in self._used):
            self._used.append(plan.model)
        return plan

    def _plan(
        self,
        instructions: str | None,
        input: Any,
        settings: ModelSettings,
        tools: list[Tool],
        server: bool,
    ) -> _Plan:
        run, runner = self.run, self.runner
        agent, run.agent = run.agent, None
        carried, run.carried = run.carried, ()
        present, run.present = run.present, ()
        trims, run.trims = run.trims, ()
        own = self._base if self._base is not None else getattr(agent, "model", None)
        default = runner.layer.router.default_model.model_name
        try:
            name = getattr(agent, "name", None)
            if isinstance(name, str) and name:
                run.turn.agent_name = name  # a handoff: the agent that runs this turn
            it = run.start_iteration(
                translate.messages(instructions, input), runner.role_for(agent)
            )
            # the recall tool while the prompt holds a stub; where the history is
            # the provider's (not in the input), while the store holds outputs
            recall = run.stubbed or (server and run.recallable)
            named_tools, passed = translate.offered_named(tools, recall=runner.offload and recall)
            with attached(run.otel):
                if passed:
                    trace.get_current_span().set_attribute(
                        c.ATTR_SELECTION_PASSED_THROUGH, [type(t).__name__ for t in passed]
                    )
                selection = it.select_tools(named_tools, fixed=passed)
            model_plan = plan_model(it, models=runner.models, own=own)
            choice = model_plan.choice
            send, other = translate.selected_tools(selection.tools, tools)
            for tool in other:
                LOG.warning("selected tool %r is not an Agents SDK tool; not sent", tool)
            if choice.model is own and self._base is None:
                settings = translate.own_settings(agent, settings)
            settings = translate.with_parameters(settings, model_plan.params)
            settings = translate.with_forced_tool(settings, selection.forced_tool)
            model = self._resolve(choice.model)
            return _Plan(
                it,
                model,
                choice.name,
                send,
                self._cache_key_for(model, settings),
                carried,
                choice.named,
                present,
                compacted=self._trimmed(it, trims, choice.name),
            )
        except Exception as exc:
            failed("openai_agents.before_model_call")
            self._skipped(exc)
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

    def _trimmed(self, it: Iteration, trims: tuple[Trimmed, ...], model: str) -> tuple[str, ...]:
        """The caller's ToolOutputTrimmer trimmed ``trims`` in this call's input:
        each seen for the first time in the conversation is a compaction,
        priced at the model the call goes to; the compaction ids the input
        carries (every trim the model has not re-read)."""
        run = self.run
        trimmer = run.trimmer
        if trimmer is None:
            return ()
        try:
            new, carried = self.runner.trims.sent(run.scope, trims)
            for trim in new:
                compaction = it.compaction(
                    compaction_id(trim.call_id),
                    OffloadMechanism.TOOL_OUTPUT_TRIMMER,
                    removed_tokens=trim.removed_tokens,
                    kept_tokens=estimate_tokens(trim.preview),
                    tool_call_ids=(trim.call_id,),
                    model=model,
                )
                with attached(run.otel):
                    it.middleware_decision(
                        MiddlewareDecision(
                            type(trimmer).__name__,
                            MiddlewareDecisionKind.COMPACTION,
                            translate.trimmer_reason(trimmer, trim),
                            framework="openai_agents",
                            calls=(ToolCall(trim.call_id, trim.tool, dict(trim.args)),),
                            compaction=compaction,
                        )
                    )
            return carried
        except Exception:
            failed("openai_agents.tool_output_trimmer")
            return ()

    @HOOKS.containing("skipped_event")
    def _skipped(self, exc: BaseException) -> None:
        """Planning failed: say so on the iteration, where a trace reader looks."""
        trace.get_current_span(self.run.otel).add_event(
            c.EVENT_DECISIONS_SKIPPED,
            {
                c.ATTR_ERROR_TYPE: error_type(exc),
                c.ATTR_ERROR_MESSAGE: str(exc)[:_MAX_ERROR_MESSAGE],
            },
        )

    def _cache_key_for(self, model: Model, settings: ModelSettings) -> ModelSettings:
        """The SDK generates a prompt cache key when the model it sees takes one:
        dropped when the plan's model is another that does not."""
        seen = self._seen()
        if model is seen or not _takes_cache_key(seen) or _takes_cache_key(model):
            return settings
        return translate.without_generated_cache_key(settings)

    def _attempt(self, plan: _Plan, call: ChatCall | None) -> None:
        """A retry's chat span says which attempt it is."""
        if call is None or plan.attempts < 2:
            return
        try:
            call.span.set_attribute(c.ATTR_CHAT_ATTEMPT, plan.attempts)
        except Exception:
            failed("openai_agents.chat_attempt")

    @HOOKS.containing("usage")
    def _report(self, plan: _Plan, call: Any, raw_usage: Any, model: Any = None) -> None:
        usage = translate.usage(raw_usage)
        self.run.usage = usage
        report_model_call(
            call,
            usage,
            response_model=model,
            carried=(*plan.carried, *plan.compacted),
            present=plan.present,
            outputs=self.runner.outputs,
        )

    def _post(self, plan: _Plan, output: list[Any]) -> list[Any] | None:
        """The POST seam over the emitted tool calls; the rewritten output (or None)."""
        it = plan.iteration
        if it is None:
            return None
        try:
            message, positions = translate.emitted(output)
            if not message.tool_calls:
                return None
            post = post_model(it, message)
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

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        """The retry advice of the model whose call failed."""
        model = self._call.model if self._call is not None else self._seen()
        return None if model is None else model.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        """The run ended: every model it called releases its run-scoped resources."""
        await _each(self._used, lambda model: cleanup_on_run_end(model, owner))

    async def close(self) -> None:
        """Close every model the run called."""
        await _each(self._used, lambda model: model.close())

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
        server = bool(previous_response_id or conversation_id)
        plan = self._begin(system_instructions, input, model_settings, tools, server)
        it = plan.iteration
        with attached(self.run.otel):
            factory = None if it is None else (lambda: it.start_chat(plan.name, named=plan.named))
            with contained(factory, "openai_agents.chat_span") as call:
                self._attempt(plan, call)
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
        server = bool(previous_response_id or conversation_id)
        plan = self._begin(system_instructions, input, model_settings, tools, server)
        it = plan.iteration
        held: ChatCall | None = None
        if it is not None:
            try:  # the chat span lives until the stream's last event (or its end)
                held = it.start_chat(plan.name, named=plan.named, parent=self.run.otel)
            except Exception:
                failed("openai_agents.chat_span")
        self._attempt(plan, held)
        # the provider's own spans are the chat span's children, as in get_response:
        # its context is current while the model produces each event (never
        # across a yield, which hands control to the consumer's code)
        chat_context = self.run.otel if held is None else held.context
        stream: Any = None
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
                held.stop()  # the consumer stopped reading: not a model error
            raise
        except BaseException as exc:
            self.run.model_ended(exc)
            if held is not None:
                held.fail(exc)
            raise
        else:
            self.run.model_ended(None)
        finally:
            if held is not None:
                held.stop()
            # however the stream ends (the consumer stopped, the runner gave up on
            # a failed response), the model's own stream ends now, not when
            # garbage collection finds it
            await _aclose(stream)

    def _completed(
        self, plan: _Plan, held: ChatCall | None, event: ResponseCompletedEvent
    ) -> ResponseCompletedEvent:
        """The final event: usage on the chat span, which ends; then the POST seam.
        The chat span is current while the usage is reported, as in
        ``get_response``: the ledger's account of the call (what its input
        carried) goes on it."""
        with attached(self.run.otel if held is None else held.context):
            self._report(
                plan,
                held,
                event.response.usage,
                getattr(event.response, "model", None),
            )
        if held is not None:
            held.stop()
        output = self._post(plan, list(event.response.output))
        if output is None:
            return event
        try:
            response = event.response.model_copy(update={"output": output})
            return event.model_copy(update={"response": response})
        except Exception:
            failed("openai_agents.rewrite")
            return event


def _takes_cache_key(model: Any) -> bool:
    """The SDK's own test: does the model take the runner's generated prompt cache key?"""
    try:
        supports = getattr(model, "_supports_default_prompt_cache_key", None)
        return bool(supports()) if callable(supports) else False
    except Exception:
        return False


async def _each(models: list[Model], step: Callable[[Model], Awaitable[None]]) -> None:
    """``step`` for every model; the first failure is raised once all ran."""
    first: Exception | None = None
    for model in list(models):
        try:
            await step(model)
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


async def _aclose(stream: Any) -> None:
    """End a model's stream (an async generator), as the SDK's own retry loop
    does; a failure to close it is the SDK's to ignore too."""
    aclose = getattr(stream, "aclose", None)
    if not callable(aclose):
        return
    try:
        await aclose()
    except Exception:
        LOG.debug("the model's stream failed to close", exc_info=True)


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
    the turn's agent noted, the outputs a caller's ``ToolOutputTrimmer``
    trimmed read from what it returned, and offloaded outputs replaced by
    their stubs."""
    trimmer = user if isinstance(user, ToolOutputTrimmer) else None

    async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        # a new model call of the turn's agent (a model call after no filter is a retry)
        run.fresh = True
        run.current_agent = data.agent
        model_data = data.model_data
        received = model_data.input
        if user is not None:
            updated = user(data)
            model_data = await updated if inspect.isawaitable(updated) else updated
        run.stubbed = False
        try:
            run.agent = data.agent
            run.trimmer = trimmer
            if run.hookless:
                for call_id, output in translate.call_outputs(model_data.input):
                    run.close_tool(call_id, output)
            trims = [] if trimmer is None else _trimmed(received, model_data.input)
            # a trimmed recall answer is seamscope's own offload leaving the prompt
            # again (its stub is carried), never a trim of its own
            answers = {t.call_id for t in trims if t.tool == RECALL_TOOL}
            trims = [t for t in trims if t.call_id not in answers]
            if not runner.offload:
                run.carried = run.present = ()
                run.trims = tuple(trims)
                return model_data
            # the store's outputs of the conversation, whichever worker made them:
            # the session holds their full text, the model gets their stubs (so an
            # offloaded output the trimmer trimmed reaches the model as its stub)
            held = runner.outputs.held(run.scope)
            run.recallable = bool(held)
            run.trims = tuple(t for t in trims if t.call_id not in held)
            items, carried = translate.stub_input(model_data.input, held)
            run.stubbed = bool(carried)
            run.carried, run.present = runner.outputs.carried(
                run.scope, carried, translate.recalled(model_data.input, answers)
            )
            if not carried:
                return model_data
            return ModelInputData(input=items, instructions=model_data.instructions)
        except Exception:
            failed("openai_agents.input_filter")
            return model_data

    return call_model_input_filter


def _trimmed(received: Any, returned: Any) -> list[Trimmed]:
    """The outputs the trimmer trimmed; none when reading them fails (seamscope's
    own stubbing of offloaded outputs goes on)."""
    try:
        return translate.trimmed(received, returned)
    except Exception:
        failed("openai_agents.tool_output_trimmer")
        return []


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
        self._run.current_agent = agent
        if self._user is not None:
            await self._user.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self._user is not None:
            await self._user.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        # the SDK checks the next turn's model (get_model) before any hook of that turn
        self._run.current_agent = to_agent
        if self._user is not None:
            await self._user.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Any) -> None:
        try:
            if isinstance(context, ToolContext) and isinstance(tool, FunctionTool):
                name = context.tool_name or tool.name
                args = translate.parse_args(context.tool_arguments)
                run = self._run
                if run.iteration is None and run.resumed is not None:
                    # a resumed run runs the calls it was interrupted at first
                    self._resumed_iteration(agent)
                run.open_tool(ToolCall(context.tool_call_id, name, args))
                nested = translate.agent_tool(tool)
                if nested is not None:
                    # the agent an agent tool runs (the SDK's own attribute; None: unknown)
                    agent_of = getattr(tool, "_agent_instance", None)
                    self._runner.nest(self._run, context, nested, agent_of)
        except Exception:
            failed("openai_agents.before_tool_call")
        if self._user is not None:
            await self._user.on_tool_start(context, agent, tool)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Any, tool: Any, result: Any
    ) -> None:
        try:
            if isinstance(context, ToolContext):
                # the recall tool runs outside the execute_tool span: its failure
                # (nothing found, the store down) is recorded here
                failure = self._runner.outputs.failed_recall(context.tool_call_id)
                call = self._run.close_tool(context.tool_call_id, result, error=failure)
                if call is not None:
                    self._after_tool(call, result)
        except Exception:
            failed("openai_agents.after_tool_call")
        if self._user is not None:
            await self._user.on_tool_end(context, agent, tool, result)

    def _resumed_iteration(self, agent: Any) -> None:
        """The iteration of the calls a resumed run starts with, run by ``agent``."""
        run = self._run
        name = getattr(agent, "name", None)
        if isinstance(name, str) and name:
            run.turn.agent_name = name  # the agent the run resumes (a handoff's)
        run.resumed_iteration(self._runner.role_for(agent))

    def _after_tool(self, call: ToolCall, result: Any) -> None:
        """The offload gate on a large text result, or the cost of a recall."""
        run, runner = self._run, self._runner
        it = run.iteration
        if it is None or (not runner.offload and run.trimmer is None):
            return
        scope = run.scope
        usage = run.usage
        if usage is None and call.name == RECALL_TOOL and run.resumed is not None:
            # a recall a resumed run runs before its first model call: the call
            # that emitted it is the run it continues', whose usage the state
            # holds (what a recall charges of it, as in one uninterrupted run)
            usage = run.usage = translate.emitting_usage(run.resumed, call.id)
        # the stub replaces the output in later model calls (the input filter);
        # a call that fetches a trimmed output again is a re-read (a recall)
        account_tool_output(
            it,
            call,
            None if call.name == RECALL_TOOL else translate.offloadable_text(result),
            outputs=runner.outputs,
            scope=scope,
            usage=usage,
            offload=runner.offload,
            reread=(
                None
                if run.trimmer is None
                else (lambda c: runner.trims.reread(scope, c.name, dict(c.args)))
            ),
        )
