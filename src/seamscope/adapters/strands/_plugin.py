"""``SeamscopePlugin``: seamscope's decisions as a Strands Agents plugin.

The plugin is given to an agent (``Agent(..., plugins=[SeamscopePlugin(layer)])``)
and holds one :class:`~._run.Run` per invocation:

* ``BeforeInvocationEvent``: the run's turn and its ``invoke_agent`` span
  (unless Strands' own tracing records one);
* the model stage (``InvokeModelStage`` middleware, around each model call):
  a new iteration, the selection pipeline over the call's tool specs (what
  the model is offered), the PRE seam (the model object the call goes to)
  and the ``chat`` span; when the call answers, its usage (and the stubs and
  previews its prompt carried) and the POST seam over the tool uses it
  emitted, rewritten in the assistant message before Strands keeps it;
* ``BeforeToolCallEvent``: the call runs as the POST seam decided (the tool
  use renamed, its arguments replaced) and its ``execute_tool`` span opens,
  named by the tool that really runs;
* ``AfterToolCallEvent``, first of its hooks: the span ends with the tool's
  own result; last of them: the offload gate on a large text result (a fired
  offload answers with the stub), the cost of a recall, and the
  ``ContextOffloader``'s offloads priced as compactions (and, opted in,
  gated);
* ``AfterInvocationEvent``: the run's end.

Every hook contains seamscope's own failures: the step then runs as Strands
would have run it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from seamscope._internal import attached, checks
from seamscope.adapters._kit import (
    RECALL,
    RECALL_TOOL,
    Frame,
    account_tool_output,
    check_options,
    estimate_tokens,
    gate_compaction,
    keep_compaction,
    model_answered,
    model_name_of,
    plan_model,
    post_model,
    priced_as_loss,
    structured_answers,
)
from seamscope.adapters.strands import _translate as translate
from seamscope.adapters.strands._framework import (
    AfterInvocationEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeToolCallEvent,
    InvokeModelContext,
    InvokeModelStage,
    Model,
    ModelStopReason,
    Plugin,
    StructuredOutputTool,
    ToolContext,
    tool,
)
from seamscope.adapters.strands._run import HOOKS, Compactions, Run, Tool, failed
from seamscope.decisions import OffloadStore, ToolCall
from seamscope.decisions.records import (
    CarriedStub,
    Compaction,
    MiddlewareDecision,
    MiddlewareDecisionKind,
    OffloadMechanism,
    SettleTrigger,
)
from seamscope.loop import DecisionLayer, Iteration
from seamscope.telemetry import conventions as c

__all__ = ["SeamscopePlugin"]

_FIRST = -10_000
"""The order of the after-tool hook that sees the tool's own result."""
_LAST = 10_000
"""The order of the hooks that see a call as the other hooks left it."""

_MAX_RUNS = 4096
"""Invocations held at once; past that the oldest is ended as abandoned."""

_MAX_CONVERSATIONS = 4096
"""Conversations whose ContextOffloader offloads are remembered at once."""

_OFFLOADER = "ContextOffloader"

_CALLING_RUN = otel_context.create_key("seamscope_strands_run")
"""The run whose tool is running, in the context attached for the tool's body
(an agent the tool runs reads it: its conversation is the caller's)."""

_UNNAMED = "Strands Agents"
"""The name Strands gives an agent created without one."""


def _configured_model_id(model: Any) -> str | None:
    """The ``model_id`` of a Strands model's configuration (what its spans name)."""
    config = getattr(model, "config", None)
    if not isinstance(config, Mapping):
        getter = getattr(model, "get_config", None)
        config = getter() if callable(getter) else None
    value = config.get("model_id") if isinstance(config, Mapping) else None
    return value if isinstance(value, str) and value else None


def _model_name(model: Any) -> str | None:
    return model_name_of(model, _configured_model_id)


class SeamscopePlugin(Frame, Plugin):
    """seamscope's decision layer as a Strands Agents plugin.

    ``layer``: the :class:`~seamscope.loop.DecisionLayer` whose router,
    selection pipeline, offload gate, ledger and telemetry are used.
    ``models``: the PRE seam's model name → the Strands ``Model`` object a
    call is switched to (the model stage's ``context.replace(model=...)``);
    a choice that is neither there nor the agent's own model is reported as
    unavailable beside the model that ran. ``role``: what policies and stages
    see as the role: a str, a callable of the agent, or None (the agent's
    ``name``). ``scope``: the adopter's data for policies, a mapping or a
    callable of the agent. ``conversation``: the conversation id, a str or a
    callable of the agent; None: the agent's ``session_id`` (its session
    manager's, else one per agent instance). ``offload``: False turns the
    offload gate (and the recall tool) off. ``offload_store``: where
    offloaded outputs live (an :class:`~seamscope.decisions.OffloadStore` or
    a URL); None: the layer's. ``gate_offloader``: let the offload gate
    decide each offload Strands' ``ContextOffloader`` makes (when it prices
    one as a loss, the full result stays in the prompt); default False:
    priced and recorded only. ``genai_spans``: whether seamscope opens its
    own ``invoke_agent``, ``chat`` and ``execute_tool`` spans; None (the
    default) means "unless Strands' own tracing records them".

    Configuration errors raise ValueError naming the argument.
    """

    name = "seamscope"
    HOOKS = HOOKS

    def __init__(
        self,
        layer: DecisionLayer,
        models: Mapping[str, Model] | None = None,
        *,
        role: str | Callable[[Any], str | None] | None = None,
        scope: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        conversation: str | Callable[[Any], str | None] | None = None,
        offload: bool = True,
        offload_store: OffloadStore | str | None = None,
        gate_offloader: bool = False,
        genai_spans: bool | None = None,
    ) -> None:
        owner = "SeamscopePlugin"
        options = check_options(
            owner,
            layer,
            models,
            model_ok=lambda model: isinstance(model, Model),
            model_kind="a Strands Model",
            role=role,
            scope=scope,
            offload=offload,
            offload_store=offload_store,
            genai_spans=genai_spans,
        )
        if (
            conversation is not None
            and not (isinstance(conversation, str) and conversation)
            and not callable(conversation)
        ):
            raise ValueError(f"{owner}.conversation must be a non-empty str, a callable or None")
        checks.flag(owner, "gate_offloader", gate_offloader)
        self._hold(options)
        self.gate_offloader = bool(gate_offloader)
        self.compactions = Compactions(_MAX_CONVERSATIONS)
        self._conversation = conversation
        self._runs: dict[int, Run] = {}
        self._lock = threading.Lock()
        super().__init__()
        self.recall_tool_result = tool(
            name=RECALL.name,
            description=RECALL.description,
            inputSchema={"json": RECALL.schema},
            context=True,
        )(self._recall)
        """The ``recall_tool_result`` tool: offered to a model call whose prompt
        holds a stub, and run by the plugin when the model calls it. It is not a
        tool of the plugin's (Strands would register it on the agent): the
        agent's registry and ``tool_names`` stay its own."""

    # -- public helpers -----------------------------------------------------------

    def role_for(self, agent: Any) -> str | None:
        """The role of a model call (default: the agent's name)."""
        return self._role_of(agent, getattr(agent, "name", None))

    def conversation_for(self, agent: Any) -> str:
        """The conversation id of an agent's run (default: its ``session_id``)."""
        chosen: Any = self._conversation
        if callable(chosen):
            try:
                chosen = chosen(agent)
            except Exception:
                failed("strands.conversation")
                chosen = None
        if isinstance(chosen, str) and chosen:
            return chosen
        own = getattr(agent, "session_id", None)
        return own if isinstance(own, str) and own else f"strands-{id(agent):x}"

    # -- joining an agent ---------------------------------------------------------------

    def init_agent(self, agent: Any) -> None:
        """Strands calls this once per agent the plugin is given to: the model
        stage middleware and the hooks (the recall tool is the plugin's tool)."""
        agent.add_middleware(InvokeModelStage, self._model_stage)
        agent.add_hook(self._before_invocation, BeforeInvocationEvent)
        agent.add_hook(self._after_invocation, AfterInvocationEvent)
        agent.add_hook(self._before_tool, BeforeToolCallEvent, order=_LAST)
        agent.add_hook(self._tool_ran, AfterToolCallEvent, order=_FIRST)
        agent.add_hook(self._tool_answered, AfterToolCallEvent, order=_LAST)

    # -- the run ------------------------------------------------------------------------

    def _run_of(self, agent: Any) -> Run | None:
        with self._lock:
            return self._runs.get(id(agent))

    @HOOKS.containing("before_invocation")
    def _before_invocation(self, event: BeforeInvocationEvent) -> None:
        agent = event.agent
        own = self.genai_spans
        if own is None:
            own = not trace.get_current_span().is_recording()
        calling = otel_context.get_value(_CALLING_RUN)
        if isinstance(calling, Run):  # an agent run by a tool: the caller's conversation
            conversation = calling.conversation
        else:
            conversation = self.conversation_for(agent)
        name = getattr(agent, "name", None)
        if not isinstance(name, str) or not name or name == _UNNAMED:
            name = None  # the layer's agent name (else Strands' default)
        if name is None and not self.layer.agent_name:
            name = getattr(agent, "name", None) or None
        turn = self.layer.start_turn(
            conversation,
            scope=self.scope_for(agent),
            agent_span=own,
            agent_name=name,
        )
        run = Run(turn, conversation, conversation, own)
        with self._lock:
            stale = self._runs.pop(id(agent), None)
            self._runs[id(agent)] = run
            evicted = (
                self._runs.pop(next(iter(self._runs))) if len(self._runs) > _MAX_RUNS else None
            )
        for old in (stale, evicted):
            if old is not None:
                old.end(c.ABANDONED_RUN)

    @HOOKS.containing("after_invocation")
    def _after_invocation(self, event: AfterInvocationEvent) -> None:
        with self._lock:
            run = self._runs.pop(id(event.agent), None)
        if run is None:
            return
        exc: BaseException | str | None = run.error
        if exc is None and (event.result is None or run.chat is not None):
            # no result: the run failed or its caller stopped reading the stream
            exc = c.ABANDONED_RUN
        run.end(exc)

    # -- one model call -------------------------------------------------------------------

    async def _model_stage(
        self, context: InvokeModelContext, next_fn: Callable[[Any], AsyncGenerator[Any, None]]
    ) -> AsyncGenerator[Any, None]:
        """The model stage's wrap: the decisions before the call, the call (its
        events passed through unchanged), the decisions on its answer."""
        run = self._run_of(context.agent)
        planned = None
        if run is not None:
            try:
                planned = self._before_model(run, context)
            except Exception:
                failed("strands.before_model")
        try:
            async for event in next_fn(context if planned is None else planned):
                if run is not None and isinstance(event, ModelStopReason):
                    run.error = None  # a call that answers (a retry): the run goes on
                    event = self._answered(run, event)
                yield event
        except BaseException as exc:
            if run is not None:
                if isinstance(exc, Exception):
                    run.error = exc
                    run.end_chat(exc)
                else:  # the caller stopped reading (GeneratorExit, cancellation)
                    run.end_chat(c.ABANDONED_RUN)
            raise

    def _before_model(self, run: Run, context: InvokeModelContext) -> InvokeModelContext | None:
        with run.lock:
            if run.closed:
                return None
            run.end_chat(None)
            turn = run.turn
            turn.messages = translate.messages(context.messages, context.system_prompt)
            turn.role = self.role_for(context.agent)
            if not run.own_spans:
                turn.base = otel_context.get_current()  # Strands' cycle span
            it = turn.start_iteration()
            run.iteration = it
            run.usage = None
            run.carried = run.present = ()
            run.finals = {}
        ids, back = translate.stubs(context.messages)
        recall = self.offload and bool(ids)
        structured = _structured_tools(context.agent)
        fixed = [s for s in context.tool_specs if s.get("name") in structured]
        offered = [
            s
            for s in context.tool_specs
            if s.get("name") != RECALL_TOOL and s.get("name") not in structured
        ]
        if recall:
            offered += [self.recall_tool_result.tool_spec]
        with it.current():
            selection = it.select_tools(offered, fixed=fixed)
        chosen = {str(s.get("name")) for s in (*selection.tools, *fixed)}
        keep = [s for s in (*offered, *fixed) if s.get("name") in chosen]
        names = frozenset(str(s.get("name")) for s in keep)
        run.offered = names
        run.recall_offered = RECALL_TOOL in names
        run.structured = structured
        changes: dict[str, Any] = {}
        if len(keep) != len(context.tool_specs) or any(
            a is not b for a, b in zip(keep, context.tool_specs, strict=False)
        ):
            changes["tool_specs"] = keep
        forced = selection.forced_tool
        if forced and forced in names:
            changes["tool_choice"] = {"tool": {"name": forced}}
        plan = plan_model(it, models=self.models, own=context.model, name_of=_model_name)
        choice = plan.choice
        if isinstance(choice.model, Model) and choice.model is not context.model:
            changes["model"] = choice.model
        stubbed, present = self.outputs.carried(run.scope, ids, back)
        results = _results(context.messages)
        shared = self.outputs.store.shared
        if shared:
            self.compactions.learn(run.scope, results, self.outputs)
        previews = self.compactions.carried(run.scope, results)
        if shared and previews:
            # the ContextOffloader's offloads a shared store keeps: followed as its records
            records = self.outputs.records(run.scope, previews)
            followed: tuple[str | CarriedStub, ...] = tuple(
                i
                if (r := records.get(i)) is None
                else CarriedStub(i, r.output_tokens, r.stub_tokens, r)
                for i in previews
            )
            run.carried = (*stubbed, *followed)
        else:
            run.carried = (*stubbed, *previews)
        run.present = present
        run.chat = it.start_chat(choice.name, named=choice.named, span=run.own_spans, tools=keep)
        return context.replace(**changes) if changes else None

    def _answered(self, run: Run, event: ModelStopReason) -> ModelStopReason:
        """:meth:`_after_model`, contained: the model's own answer when it fails."""
        try:
            return self._after_model(run, event)
        except Exception:
            failed("strands.after_model")
            run.end_chat(None)
            return event

    def _after_model(self, run: Run, event: ModelStopReason) -> ModelStopReason:
        it = run.iteration
        if it is None:
            return event
        stop_reason, message, raw_usage, metrics = event["stop"]
        try:
            chat = run.chat
            # the ledger notes what the call carried on the span current: its chat span
            with attached(None if chat is None else chat.context):
                model_answered(run, translate.usage(raw_usage), outputs=self.outputs)
        except Exception:
            failed("strands.usage")
        run.end_chat(None)
        try:
            emitted, calls = translate.emitted(message)
            answers = tuple(x for x in calls if x.name in run.structured)
            structured_answers(it, emitted, answers)
            calls = tuple(x for x in calls if x.name not in run.structured)
            if not calls:
                return event
            post = post_model(it, emitted, calls=calls)
            run.finals = {r.emitted.id: r.final for r in post.records if r.emitted.id}
            rewritten = translate.rewritten(message, post)
            if rewritten is None:
                return event
            return ModelStopReason(
                stop_reason=stop_reason,
                message=rewritten,  # type: ignore[arg-type]
                usage=raw_usage,
                metrics=metrics,
            )
        except Exception:
            failed("strands.after_model")
            return event

    # -- one tool call --------------------------------------------------------------------

    @HOOKS.containing("before_tool")
    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        run = self._run_of(event.agent)
        if run is None or event.cancel_tool:
            return
        resumed = False
        with run.lock:
            if run.iteration is None and not run.closed:
                # a run resumed from an interrupt runs the stored calls before
                # any model call: their iteration
                if not run.own_spans:
                    run.turn.base = otel_context.get_current()
                run.iteration = run.turn.start_iteration()
                run.recall_offered = True  # judged in the run that emitted them
                resumed = True
            it = run.iteration
        if it is None:
            return
        if resumed and self.outputs.store.shared:
            # the ContextOffloader's offloads made on another worker: a retrieval
            # among the stored calls is their recall here too
            results = _results(getattr(event.agent, "messages", None))
            self.compactions.learn(run.scope, results, self.outputs)
        use = event.tool_use
        call_id = str(use.get("toolUseId") or "")
        if run.usage is None and call_id:
            # a run resumed from an interrupt (on this worker or another): the model
            # call that emitted the call ran in the interrupted run; Strands keeps its
            # usage on the assistant message (what a recall charges of it)
            usage = translate.emitting_usage(getattr(event.agent, "messages", None), call_id)
            with run.lock:
                if run.usage is None:
                    run.usage = usage
        final = run.finals.get(call_id)
        if final is not None and final.name != use.get("name"):
            # the POST seam's call, when the message Strands kept still names another
            event.tool_use = {**use, "name": final.name, "input": dict(final.args)}
            use = event.tool_use
        name = str(use.get("name") or "")
        if name == RECALL_TOOL:
            if not run.recall_offered:
                # a recall the model makes up: an unknown tool's call, as without seamscope
                event.selected_tool = None
                return
            if event.selected_tool is None:
                event.selected_tool = self.recall_tool_result  # not in the agent's registry
        if event.selected_tool is None or not call_id:
            return  # no body starts: Strands answers an unknown tool itself
        if name in run.structured:
            return  # Strands' structured output: its answer, not a tool run
        call = translate.tool_call(use)
        span = it.start_tool(call) if run.own_spans else None
        base = otel_context.get_current() if span is None else span.context
        # the tool's own spans are children of its execute_tool span; an agent
        # it runs reads the calling run (its conversation is the caller's)
        context = otel_context.set_value(_CALLING_RUN, run, base)
        entry = Tool(it, call, span, context)
        entry.token = otel_context.attach(context)
        with run.lock:
            run.tools[call_id] = entry

    @HOOKS.containing("after_tool")
    def _tool_ran(self, event: AfterToolCallEvent) -> None:
        """First of the after-tool hooks: the tool's own result ends its span."""
        run = self._run_of(event.agent)
        if run is None:
            return
        call_id = str(event.tool_use.get("toolUseId") or "")
        with run.lock:
            entry = run.tools.get(call_id)
        if entry is None:
            return
        entry.result = event.result
        if entry.token is not None:
            token, entry.token = entry.token, None
            if otel_context.get_current() is entry.context:
                otel_context.detach(token)  # type: ignore[arg-type]
        span = entry.span
        if span is None:
            return
        entry.iteration.tool_result(span, translate.result_text(event.result.get("content")))
        if event.exception is not None:
            span.fail(event.exception)
        elif event.result.get("status") == "error":
            failure = (
                self.outputs.failed_recall(call_id) if entry.call.name == RECALL_TOOL else None
            )
            span.fail(failure or c.TOOL_ERROR_RESULT)
        else:
            span.stop()

    @HOOKS.containing("after_tool")
    def _tool_answered(self, event: AfterToolCallEvent) -> None:
        """Last of the after-tool hooks: the result as the other hooks left it."""
        run = self._run_of(event.agent)
        if run is None:
            return
        call_id = str(event.tool_use.get("toolUseId") or "")
        with run.lock:
            entry = run.tools.pop(call_id, None)
        if entry is None or event.retry:
            return
        it, call = entry.iteration, entry.call
        result = event.result
        if call.name == translate.OFFLOADER_RETRIEVE:
            self._retrieved(run, it, call, result)
            return
        offloaded = translate.offloaded_by_offloader(entry.result, result)
        if offloaded is not None and call.name == RECALL_TOOL:
            # seamscope's own recall answer brings an offloaded output back whole
            # (the ledger charges it so): never offloaded again
            event.result = entry.result
        elif offloaded is not None:
            if self._offloader(run, it, call, entry.result, offloaded):
                event.result = entry.result  # priced as a loss: the full result stays
            return
        text = None if call.name == RECALL_TOOL else translate.offloadable_text(result)
        stub = account_tool_output(
            it,
            call,
            text,
            outputs=self.outputs,
            scope=run.scope,
            usage=run.usage,
            offload=self.offload,
        )
        if stub is not None:
            event.result = translate.stubbed(result, stub)  # type: ignore[assignment]

    # -- Strands' ContextOffloader ----------------------------------------------------------

    def _offloader(
        self, run: Run, it: Iteration, call: ToolCall, full: Any, offloaded: translate.Offloaded
    ) -> bool:
        """One result the ``ContextOffloader`` replaced by its preview: a
        compaction priced with the gate's formula at the iteration's model
        (removed: the result's tokens; kept: the preview's). With
        ``gate_offloader``, the gate decides first (the kit's
        :func:`~seamscope.adapters._kit.gate_compaction`, on a
        ``seamscope.offload_gate`` span); True when it priced the offload as a
        loss (the caller puts the full result back; an unpriced model leaves
        the offloader's offload)."""
        removed = estimate_tokens(translate.result_text(full.get("content")))
        kept = estimate_tokens(offloaded.preview)
        compaction_id = f"{OffloadMechanism.STRANDS_CONTEXT_OFFLOAD}:{call.id}"
        if self.gate_offloader:
            decision = gate_compaction(
                it,
                call.name,
                call.id,
                removed,
                kept,
                compaction_id,
                OffloadMechanism.STRANDS_CONTEXT_OFFLOAD,
            )
            if priced_as_loss(decision):
                return True
        if not self.compactions.offloaded(
            run.scope, call.id, compaction_id, offloaded.preview, offloaded.references, removed
        ):
            return False
        started = time.time_ns()
        compaction = it.compaction(
            compaction_id,
            OffloadMechanism.STRANDS_CONTEXT_OFFLOAD,
            removed_tokens=removed,
            kept_tokens=kept,
            tool_call_ids=(call.id,),
        )
        shared = self._keep_shared(it, compaction, call, offloaded)
        with it.current():
            it.middleware_decision(
                MiddlewareDecision(
                    _OFFLOADER,
                    MiddlewareDecisionKind.COMPACTION,
                    f"offloaded {call.name}'s result ({removed:,.0f} tokens) to its storage; "
                    f"the prompt keeps a {kept:,.0f}-token preview and "
                    f"{len(offloaded.references)} reference(s)",
                    framework="strands",
                    calls=(call,),
                    compaction=compaction,
                    start_time_ns=started,
                ),
                store=None if shared is None else self.outputs.store,
            )
        for offload_id in shared or ():  # the store's size bound dropped them
            it.turn.layer.ledger.settle_offload(
                it.turn.conversation_id or "",
                offload_id,
                trigger=SettleTrigger.EVICTED,
                store=self.outputs.store,
            )
        return False

    def _keep_shared(
        self, it: Iteration, compaction: Compaction, call: ToolCall, offloaded: translate.Offloaded
    ) -> tuple[str, ...] | None:
        """The offload's record, written to the conversation's offload store
        when other workers see it (its content: the storage references, the
        text stays in the ContextOffloader's storage): any worker then prices
        the preview a prompt carries and the retrievals of its references.
        Returns the ids the store's size bound dropped to make room, or None
        (no shared store, no conversation, or the store failed)."""
        return keep_compaction(
            self.outputs,
            it,
            compaction,
            call_id=call.id,
            tool=call.name,
            stub=offloaded.preview,
            content="\n".join(offloaded.references),
        )

    def _retrieved(self, run: Run, it: Iteration, call: ToolCall, result: Any) -> None:
        """A ``retrieve_offloaded_content`` call that brought content back: the
        recall of the offload whose reference it named, its real tokens."""
        if not isinstance(result, Mapping) or result.get("status") == "error":
            return
        reference = call.args.get("reference")
        if not isinstance(reference, str):
            return
        tokens = estimate_tokens(translate.result_text(result.get("content")))
        compaction_id = self.compactions.read(run.scope, reference, tokens)
        if compaction_id is None:
            return
        it.turn.store = self.outputs.store
        usage = run.usage
        with it.current():
            it.recall(
                compaction_id,
                input_tokens=tokens,
                output_tokens=0 if usage is None else usage.output_tokens,
                call_id=call.id,
            )

    # -- the recall tool --------------------------------------------------------------------

    def _recall(self, offload_id: str, tool_context: ToolContext) -> str:
        """Bring back an offloaded tool output.

        Args:
            offload_id: The offload id the stub names.
        """
        run = self._run_of(tool_context.agent)
        scope = run.scope if run is not None else self.conversation_for(tool_context.agent)
        call_id = str(tool_context.tool_use.get("toolUseId") or "")
        return self.outputs.answer(scope, call_id, offload_id)


def _structured_tools(agent: Any) -> frozenset[str]:
    """The names of Strands' structured-output tools the agent holds now (its
    registry's dynamic tools, during a run with ``structured_output_model``)."""
    registry = getattr(agent, "tool_registry", None)
    tools = getattr(registry, "dynamic_tools", None)
    if not isinstance(tools, Mapping):
        return frozenset()
    return frozenset(n for n, t in tools.items() if isinstance(t, StructuredOutputTool))


def _results(history: Any) -> dict[str, str]:
    """The text of each tool result a model call's messages hold, by call id."""
    out: dict[str, str] = {}
    for message in history or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content or ():
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if isinstance(result, Mapping):
                out[str(result.get("toolUseId"))] = translate.result_text(result.get("content"))
    return out
