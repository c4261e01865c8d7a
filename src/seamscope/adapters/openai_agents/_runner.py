"""``SeamscopeRunner``: ``Runner.run``/``run_sync``/``run_streamed`` with
seamscope's decisions, and the recall tool.

Each call makes one :class:`~._run.Run`, a ``RunConfig`` copy carrying the
run's hooks (:mod:`._model`), and calls the SDK's own ``Runner`` with it;
the caller's ``RunConfig`` and ``hooks`` are kept and composed, never
modified.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from seamscope.adapters._kit import RECALL, Frame, check_options
from seamscope.adapters.openai_agents import _translate as translate
from seamscope.adapters.openai_agents._framework import (
    DEFAULT_MAX_TURNS,
    Agent,
    FunctionTool,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    Model,
    ModelProvider,
    RunConfig,
    Runner,
    RunResult,
    RunResultStreaming,
    RunState,
    ToolContext,
    close_owned_provider,
    normalize_run_config,
    validate_run_hooks,
)
from seamscope.adapters.openai_agents._framework import RunHooks as SDKRunHooks
from seamscope.adapters.openai_agents._model import (
    RoutedModel,
    RunHooks,
    error_formatter,
    input_filter,
)
from seamscope.adapters.openai_agents._run import HOOKS, Run, attached, failed, new_turn
from seamscope.adapters.openai_agents._trims import Trims
from seamscope.decisions import OffloadStore
from seamscope.loop import DecisionLayer

__all__ = ["SeamscopeRunner"]

_MAX_CONVERSATIONS = 1024  # conversations whose trimmed outputs are remembered


class SeamscopeRunner(Frame):
    """seamscope's decision layer around the Agents SDK's ``Runner``.

    ``layer``: the :class:`~seamscope.loop.DecisionLayer` whose
    router, selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: model name → ``agents.Model`` the PRE seam may switch to.
    ``role``: what policies and stages see as the turn's role: a str, a
    callable of the turn's ``Agent``, or None (the agent's ``name``).
    ``scope``: the adopter's data for policies, a mapping or a callable of
    the run's ``context`` evaluated when the run starts. ``offload``: False
    turns the offload gate (and the recall tool) off.
    ``offload_store``: where offloaded outputs live (an
    :class:`~seamscope.decisions.OffloadStore` or a URL); None: the layer's
    (its ``offload_store``, ``SEAMSCOPE_OFFLOAD_STORE``, or this process's
    memory: ``max_stored_outputs`` outputs at most when given).

    Configuration errors raise ValueError naming the argument.
    """

    HOOKS = HOOKS

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, Model] | None = None,
        *,
        role: str | Callable[[Any], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        offload: bool = True,
        max_stored_outputs: int | None = None,
        offload_store: OffloadStore | str | None = None,
    ) -> None:
        options = check_options(
            "SeamscopeRunner",
            layer,
            models,
            model_ok=lambda model: isinstance(model, Model),
            model_kind="an agents.Model",
            models_kind="agents.Model",
            role=role,
            scope=scope,
            offload=offload,
            max_stored_outputs=max_stored_outputs,
            offload_store=offload_store,
        )
        self._hold(options)
        self.trims = Trims(_MAX_CONVERSATIONS)
        self.recall_tool: FunctionTool = FunctionTool(
            name=RECALL.name,
            description=RECALL.description,
            params_json_schema=RECALL.schema,
            on_invoke_tool=self._recall,
        )
        """The ``recall_tool_result`` tool: add it to the agents' ``tools``. It is
        offered to the model only while the call's input holds a stub (any
        worker's offload; where the provider keeps the history, while the
        offload store holds outputs of the conversation)."""

    # -- public helpers -----------------------------------------------------------

    def role_for(self, agent: Any) -> str | None:
        """The role of a turn of ``agent`` (default: the agent's name)."""
        return self._role_of(agent, getattr(agent, "name", None))

    # -- the runs -----------------------------------------------------------------

    async def run(
        self,
        starting_agent: Agent[Any],
        input: Any,
        *,
        context: Any = None,
        max_turns: int | None = DEFAULT_MAX_TURNS,
        hooks: SDKRunHooks[Any] | None = None,
        run_config: RunConfig | dict[str, Any] | None = None,
        error_handlers: Any = None,
        previous_response_id: str | None = None,
        auto_previous_response_id: bool = False,
        conversation_id: str | None = None,
        session: Any = None,
        conversation: str | None = None,
    ) -> RunResult:
        """``Runner.run`` with seamscope's decisions; ``conversation`` is
        seamscope's conversation id (default: the session's ``session_id``,
        else the SDK's ``conversation_id``). The other arguments are the SDK's."""
        run, options, owned = self._prepare(
            starting_agent,
            input,
            conversation,
            run_config,
            hooks,
            context=context,
            max_turns=max_turns,
            error_handlers=error_handlers,
            previous_response_id=previous_response_id,
            auto_previous_response_id=auto_previous_response_id,
            conversation_id=conversation_id,
            session=session,
        )
        try:
            try:
                with attached(run.agent_otel):
                    result = await Runner.run(starting_agent, input, **options)
            finally:
                if owned is not None:
                    await close_owned_provider(owned)
        except BaseException as exc:
            run.close(exc)
            raise
        run.close(None)
        return result

    def run_sync(
        self,
        starting_agent: Agent[Any],
        input: Any,
        *,
        context: Any = None,
        max_turns: int | None = DEFAULT_MAX_TURNS,
        hooks: SDKRunHooks[Any] | None = None,
        run_config: RunConfig | dict[str, Any] | None = None,
        error_handlers: Any = None,
        previous_response_id: str | None = None,
        auto_previous_response_id: bool = False,
        conversation_id: str | None = None,
        session: Any = None,
        conversation: str | None = None,
    ) -> RunResult:
        """``Runner.run_sync`` with seamscope's decisions (see :meth:`run`)."""
        run, options, owned = self._prepare(
            starting_agent,
            input,
            conversation,
            run_config,
            hooks,
            context=context,
            max_turns=max_turns,
            error_handlers=error_handlers,
            previous_response_id=previous_response_id,
            auto_previous_response_id=auto_previous_response_id,
            conversation_id=conversation_id,
            session=session,
        )
        try:
            try:
                with attached(run.agent_otel):
                    result = Runner.run_sync(starting_agent, input, **options)
            finally:
                if owned is not None:
                    _close_on_default_loop(owned)
        except BaseException as exc:
            run.close(exc)
            raise
        run.close(None)
        return result

    def run_streamed(
        self,
        starting_agent: Agent[Any],
        input: Any,
        context: Any = None,
        max_turns: int | None = DEFAULT_MAX_TURNS,
        hooks: SDKRunHooks[Any] | None = None,
        run_config: RunConfig | dict[str, Any] | None = None,
        previous_response_id: str | None = None,
        auto_previous_response_id: bool = False,
        conversation_id: str | None = None,
        session: Any = None,
        *,
        error_handlers: Any = None,
        conversation: str | None = None,
    ) -> RunResultStreaming:
        """``Runner.run_streamed`` with seamscope's decisions (see :meth:`run`).

        The run's spans end when its background task ends: consume
        ``stream_events()`` to the end, or call ``result.cancel()`` when you
        stop reading early.
        """
        run, options, owned = self._prepare(
            starting_agent,
            input,
            conversation,
            run_config,
            hooks,
            context=context,
            max_turns=max_turns,
            error_handlers=error_handlers,
            previous_response_id=previous_response_id,
            auto_previous_response_id=auto_previous_response_id,
            conversation_id=conversation_id,
            session=session,
        )
        try:
            with attached(run.agent_otel):
                result = Runner.run_streamed(starting_agent, input, **options)
        except BaseException as exc:
            run.close(exc)  # the SDK closes no provider of a run it never started
            raise
        if owned is not None:
            _close_when_streamed_run_ends(result, owned)
        # a result without the SDK's task (another runner's, a test's stand-in): the
        # run's spans end now, and the result is the caller's as it is
        task = getattr(result, "run_loop_task", None)
        if task is None:
            run.close(None)
        else:
            task.add_done_callback(lambda t: run.close(_streamed_error(t, result)))
        return result

    # -- building a run -------------------------------------------------------------

    def _prepare(
        self,
        starting_agent: Any,
        input: Any,
        conversation: str | None,
        run_config: RunConfig | dict[str, Any] | None,
        hooks: SDKRunHooks[Any] | None,
        **options: Any,
    ) -> tuple[Run, dict[str, Any], ModelProvider | None]:
        """The run, the SDK's arguments, and the model provider seamscope closes
        when the run ends (the one the SDK would have made, and closed, itself:
        no ``run_config``, or a dict without ``model_provider``)."""
        if hooks is not None:
            # the SDK's own check and refusal, before seamscope composes the hooks
            validate_run_hooks(hooks)
        base, owns_provider = normalize_run_config(run_config)
        conversation_id = translate.conversation_id(
            conversation, options.get("session"), options.get("conversation_id")
        )
        key = uuid.uuid4().hex
        scope = self.scope_for(options.get("context"))
        turn = new_turn(self.layer, conversation_id, scope)
        run = Run(key, turn, conversation_id or f"run:{key}")
        # the agent the SDK checks first: a resumed run's own, else the starting one
        if isinstance(input, RunState):
            run.resumed = input
        resumed = getattr(input, "_current_agent", None) if run.resumed is not None else None
        run.current_agent = resumed if resumed is not None else starting_agent
        run.open()
        options["run_config"] = self._config(run, base)
        options["hooks"] = RunHooks(self, run, hooks)
        return run, options, base.model_provider if owns_provider else None

    def _config(self, run: Run, base: RunConfig) -> RunConfig:
        """A copy of the caller's ``base`` whose model, input filter and error
        formatter are ``run``'s."""
        run.base_config = base
        return dataclasses.replace(
            base,
            model=RoutedModel(self, run, base.model, base.model_provider),
            call_model_input_filter=input_filter(self, run, base.call_model_input_filter),
            tool_error_formatter=error_formatter(run, base.tool_error_formatter),
        )

    def nest(
        self, outer: Run, context: ToolContext[Any], agent_name: str | None, agent: Any = None
    ) -> None:
        """An agent tool (``Agent.as_tool``) of ``outer`` starts: its nested run
        gets a run of its own, an ``invoke_agent`` under the tool's
        ``execute_tool`` span. The SDK runs it with the tool context's
        ``run_config`` (unless the tool has its own): that becomes a copy of
        the caller's configuration bound to the nested run, so its model calls
        are its own iterations, never the outer run's."""
        call_id = context.tool_call_id
        base = outer.base_config
        if base is None or not outer.has_tool(call_id):
            return
        key = uuid.uuid4().hex
        run = Run(
            key, new_turn(self.layer, outer.turn.conversation_id, outer.turn.scope), outer.scope
        )
        run.hookless = True
        run.parent = outer
        run.current_agent = agent
        run.open(agent_name, outer.tool_otel(call_id))
        with outer.lock:
            outer.nested[call_id] = run
        context.run_config = self._config(run, base)

    async def _recall(self, ctx: ToolContext[Any], arguments: str) -> str:
        offload_id = translate.recall_id(arguments)
        scope: str | None = None
        with contextlib.suppress(Exception):
            model = getattr(getattr(ctx, "run_config", None), "model", None)
            if isinstance(model, RoutedModel) and model.runner is self:
                scope = model.run.scope
        call_id = getattr(ctx, "tool_call_id", None)
        return self.outputs.answer(scope, call_id if isinstance(call_id, str) else None, offload_id)


def _close_on_default_loop(provider: ModelProvider) -> None:
    """``run_sync``: close the provider on the loop the SDK ran the run on (its
    thread's default loop, which it leaves open), as its own ``run`` does."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return  # the SDK refused to start (a loop is running): nothing was used
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
        if not loop.is_closed():
            loop.run_until_complete(close_owned_provider(provider))
    except Exception:
        failed("openai_agents.close_provider")


@HOOKS.containing("close_provider")
def _close_when_streamed_run_ends(result: RunResultStreaming, provider: ModelProvider) -> None:
    """The SDK's own way for a provider it made: closed when the run's task ends,
    and ``stream_events()`` waits for it."""
    register = getattr(result, "_ensure_model_provider_cleanup_on_completion", None)
    if callable(register):
        register(lambda: close_owned_provider(provider))
        return
    task = result.run_loop_task
    if task is not None:  # another SDK version: when the run's task ends
        task.add_done_callback(lambda _: asyncio.ensure_future(close_owned_provider(provider)))


def _streamed_error(task: asyncio.Task[Any], result: RunResultStreaming) -> BaseException | None:
    """The exception a streamed run ended with (a cancelled run: CancelledError)."""
    if task.cancelled():
        return asyncio.CancelledError()
    try:
        found = result.run_loop_exception
    except Exception:
        return None
    # the streamed loop keeps the SDK's own end for stream_events() to raise
    # (its task ends without it): read it from the result's public fields, so
    # a streamed run records the end a non-streamed one does
    return found if found is not None else _sdk_end(result)


def _sdk_end(result: RunResultStreaming) -> BaseException | None:
    """The exception a streamed run's consumer gets for a tripped input
    guardrail or too many turns (None when it ended normally)."""
    try:
        for guardrail in result.input_guardrail_results or ():
            if guardrail.output.tripwire_triggered:
                return InputGuardrailTripwireTriggered(guardrail)
        limit = result.max_turns
        if result.final_output is None and limit is not None and result.current_turn > limit:
            return MaxTurnsExceeded(f"Max turns ({limit}) exceeded")
    except Exception:
        failed("openai_agents.streamed_end")
    return None
