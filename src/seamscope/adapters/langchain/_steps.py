"""One step per hook: the work a hook does, in the order it does it.

A :class:`ModelStep` or :class:`ToolStep` is one hook call: ``prepare``,
the span around the framework's handler, ``finish``, then ``fail``/``close``;
a :class:`TailStep` is one call of the model tail (the innermost hook when
other middlewares are watched).
Every step method contains seamscope's own failures; LangChain objects are
read and built by :mod:`._translate`, runs are kept by :mod:`._runs`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from seamscope._internal import Invocation, attached, record_error
from seamscope.adapters import _hooks
from seamscope.adapters._kit import (
    account_tool_output,
    plan_model,
    post_model,
    report_model_call,
    structured_answers,
)
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import (
    Command,
    ExtendedModelResponse,
    GraphBubbleUp,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    ToolMessage,
)
from seamscope.adapters.langchain._runs import (
    HOOKS,
    LOG,
    Compactions,
    Outputs,
    Run,
    Runs,
    contained,
    failed,
)
from seamscope.adapters.langchain._stubs import Decided, answer_recalls, gate_answers
from seamscope.adapters.langchain._tool_errors import TOOL_OUTCOME, ToolOutcome
from seamscope.decisions import ToolCall
from seamscope.decisions.records import (
    CarriedStub,
    OffloadMechanism,
    tool_name,
)
from seamscope.loop import ChatCall, DecisionLayer, Iteration
from seamscope.telemetry import conventions as c

MODEL_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "seamscope_langchain_model_step", default=False
)
"""True inside seamscope's ``wrap_model_call`` handler (a watched middleware
whose model hook sees it True runs inside seamscope's; False: outside it,
before seamscope opens the model call's iteration)."""


@dataclass(slots=True, weakref_slot=True)
class StepContext:
    """What a hook's step needs of the middleware it serves (the steps never
    read the middleware itself): the layer, the models by name, the run
    registry, the offloaded outputs, the compactions followed, and whether
    the model tail records the chat spans (``watching()`` was called)."""

    layer: DecisionLayer
    models: Mapping[str, Any]
    offload: bool
    runs: Runs
    outputs: Outputs
    compactions: Compactions
    outputs_of: Callable[[Any], Outputs] | None = None
    """The offloaded outputs of a run, by its LangGraph runtime (the store the
    agent was compiled with, when seamscope was given none)."""
    watching: bool = False
    tool_hooks: bool = True
    """Whether the middleware defines ``wrap_tool_call`` (LangChain then builds
    a ``tools`` node even for an agent without tools); False: its tool calls'
    spans come from LangChain's tool callbacks (:mod:`._tool_runs`), and its
    offloads and recalls are made at the model seam (:mod:`._stubs`)."""
    decided: Decided | None = None
    """The gate's decisions on tool answers not yet in the state (no tool hooks)."""
    recall_spec: Mapping[str, Any] | None = None
    """The recall tool as the model is offered it (no tool hooks)."""
    gate_evictions: bool = False
    """Whether the offload gate decides each eviction of a watched Deep Agents
    filesystem (one it prices as a loss is undone); False: observed only."""

    def outputs_for(self, runtime: Any) -> Outputs:
        return self.outputs if self.outputs_of is None else self.outputs_of(runtime)


class SeamscopeMiddleware(Protocol):
    """The middleware a step serves: it hands the step its context."""

    @property
    def kit(self) -> StepContext: ...


__all__ = [
    "MODEL_STEP",
    "Attached",
    "ModelStep",
    "StepContext",
    "TailStep",
    "ToolStep",
    "settle_output",
]


class Attached:
    """An OpenTelemetry context current from a hook's start to its end (the
    telemetry's one attach rule, :func:`seamscope._internal.attached`, held
    across the hook's methods)."""

    __slots__ = ("_block",)

    def __init__(self, context: Any) -> None:
        self._block: contextlib.AbstractContextManager[None] | None = attached(context)
        self._block.__enter__()

    def detach(self) -> None:
        block, self._block = self._block, None
        if block is not None:
            block.__exit__(None, None, None)


# -- the steps of one hook -------------------------------------------------------


class _Step:
    """What a model step and a tool step share: the run, the attached context."""

    def __init__(self, middleware: SeamscopeMiddleware) -> None:
        self.mw = middleware.kit
        self.run: Run | None = None
        self.iteration: Iteration | None = None
        self.attached: Attached | None = None
        # LangChain routes the agent to its end after this hook (the model call
        # it routes to the end, a return_direct tool's answer): no after_agent
        # node is added to hear it, so the run ends when the hook does
        self.ends = False

    @_hooks.containing("langchain.run_end", LOG)
    def fail(self, exc: BaseException) -> None:
        """The agent's own exception crossed the hook: close the run with it
        (an interrupt is not a failure: the run is paused and resumes later)."""
        if self.run is None:
            return
        if isinstance(exc, GraphBubbleUp):
            self.run.paused = True
        else:
            self.mw.runs.close(self.run, exc)

    def close(self) -> None:
        """Detach; the run ends here when LangChain routes the agent to its end
        (a later hook of the same invocation, another middleware sending the
        agent on, continues it)."""
        if self.attached is not None:
            self.attached.detach()
        try:
            self.mw.runs.drain()
        except Exception:
            failed("langchain.run_end")
        run = self.run
        if self.ends and run is not None and not run.closed:
            try:
                self.mw.runs.close(run, None)
            except Exception:
                failed("langchain.run_end")


class _ModelCallStep(_Step):
    """What the outer model step and the model tail share: the ``chat`` span
    around the model call and the report of its usage."""

    def __init__(self, middleware: SeamscopeMiddleware, request: ModelRequest[Any]) -> None:
        super().__init__(middleware)
        self.request = request
        self.model_name: str | None = None
        self.named = True  # something but the layer's default named the model
        self.compacted: tuple[str, ...] = ()  # compactions the real prompt carries

    def chat(self) -> contextlib.AbstractContextManager[ChatCall | None]:
        it, name = self.iteration, self.model_name
        if it is None or name is None:
            return contained(None, "")
        named, tools = self.named, self.sent_tools()
        return contained(
            lambda: it.start_chat(name, named=named, tools=tools), "langchain.chat_span"
        )

    def sent_tools(self) -> Sequence[Any] | None:
        """The tools the model call is sent, when not the iteration's selection."""
        return None

    @HOOKS.containing("usage")
    def report(self, call: ChatCall | None, response: ModelResponse[Any]) -> None:
        """Usage on the chat span and in the ledger, with what the request's
        prompt carried: seamscope's stubs, and the compactions it holds."""
        message = translate.last_ai(response.result)
        usage = None if message is None else translate.usage(message)
        if self.run is not None and usage is not None:
            self.run.usage = usage
        if call is None or usage is None or message is None:
            return
        outputs = self.mw.outputs_for(self.request.runtime)
        scope = None if self.run is None else self.run.scope
        ids, back = translate.stubs(self.request.messages)
        stubbed, present = outputs.carried(scope, ids, back)
        report_model_call(
            call,
            usage,
            response_model=translate.response_model(message),
            carried=(*stubbed, *_compacted(outputs, scope, self.compacted)),
            present=present,
            outputs=outputs,
        )


def _compacted(
    outputs: Outputs, scope: str | None, compacted: Sequence[str]
) -> tuple[str | CarriedStub, ...]:
    """The compactions a prompt carries, for the ledger: the evictions whose
    record a shared offload store keeps as that record (a worker that did
    not see one made follows it from then on), the others by id."""
    ids = tuple(dict.fromkeys(compacted))
    prefix = f"{OffloadMechanism.DEEPAGENTS_EVICTION}:"
    held = [i for i in ids if i.startswith(prefix)]
    if not held or scope is None or not outputs.store.shared:
        return ids
    records = outputs.records(scope, held)
    return tuple(
        i
        if (record := records.get(i)) is None
        else CarriedStub(i, record.output_tokens, record.stub_tokens, record)
        for i in ids
    )


class ModelStep(_ModelCallStep):
    """One model call: select, PRE seam, chat span, POST seam."""

    def __init__(self, middleware: SeamscopeMiddleware, request: ModelRequest[Any]) -> None:
        super().__init__(middleware, request)
        self.created = False
        self.structured: tuple[dict[str, Any], ...] = ()
        self.written: list[ToolMessage] = []  # offloaded outputs' stubs for the state
        self.decided: list[str] = []  # the tool calls whose answers the gate decided
        # the recall tool was offered (as a description): seamscope answers its calls
        self.recall_offered = False

    def prepare(self) -> ModelRequest[Any]:
        """The request to execute: selected tools, chosen model, forced tool."""
        request = self.request
        mw = self.mw
        try:
            self.run, self.created = mw.runs.for_hook(request.state, request.runtime, create=True)
            if self.run is None:
                return request
            self.run.failing = None  # a tool's exception was handled: the run goes on
            self.run.bound = None
            self.run.tools = translate.client_tools(request.tools)
            if mw.decided is not None and mw.offload and not mw.tool_hooks:
                # the tool answers sent for the first time, to the gate
                run, runtime = self.run, request.runtime
                messages, self.written, self.decided = gate_answers(
                    request.messages,
                    run=run,
                    decided=mw.decided,
                    gate=lambda it, call, text: settle_output(
                        mw, run, it, call, text, runtime, reread=False
                    ),
                )
                if any(new is not old for new, old in zip(messages, request.messages, strict=True)):
                    request = self.request = request.override(messages=messages)
            it = self.run.start_iteration(request.messages, request.state)
            self.iteration = it
            self.attached = Attached(self.run.otel)
            # the recall tool is offered whenever the prompt holds a stub (any worker's)
            recall = bool(translate.stubs(request.messages)[0])
            offered = translate.offered(request.tools, recall=recall)
            if recall and not mw.tool_hooks and mw.recall_spec is not None:
                offered.append(dict(mw.recall_spec))
                self.recall_offered = True
            self.structured = translate.structured_tools(request)
            selection = it.select_tools(offered, fixed=self.structured)
            plan = plan_model(it, models=mw.models, own=request.model, name_of=translate.model_name)
            choice = plan.choice
            self.model_name, self.named = choice.name, choice.named
            self.run.chosen = (choice.model, choice.name)
            if self.run.pending:
                self.run.record_pending(it)
            # LangChain binds the structured-output tools itself
            fixed = len(self.structured)
            chosen = selection.tools[: len(selection.tools) - fixed] if fixed else selection.tools
            tools, unbound = translate.bindable(chosen)
            for tool in unbound:
                LOG.warning("selected tool %r has no bindable object; not bound", tool)
            return translate.prepared_request(
                request,
                tools=tools,
                model=choice.model,
                config=plan.pre.model,
                forced_tool=selection.forced_tool,
            )
        except Exception:
            failed("langchain.before_model_call")
            return request

    def chat(self) -> contextlib.AbstractContextManager[ChatCall | None]:
        if self.mw.watching:
            # watching: the model tail opens a chat span per real model call
            return contained(None, "")
        return super().chat()

    def report(self, call: ChatCall | None, response: ModelResponse[Any]) -> None:
        if not self.mw.watching:  # watching: the model tail reported each real call
            super().report(call, response)

    def finish(
        self, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """The POST seam over the emitted tool calls, the recalls answered (no
        tool hooks); the response to return, with the stubs this call sent."""
        mw = self.mw
        try:
            it = self.iteration
            message = translate.last_ai(response.result)
            routed = translate.routed_calls(message, self.structured)
            bound = None if self.run is None else self.run.bound
            if it is not None and it.selection is not None and bound is not None:
                # routed this turn = what the model was really bound with
                kept = tuple(t for t in it.selection.tools if (tool_name(t) or "?") in bound)
                it.selection = dataclasses.replace(it.selection, tools=kept)
            if it is not None and message is not None and routed:
                # a structured-output call is LangChain's, consumed before this
                # hook returns: never routed or rewritten
                post = post_model(it, message, calls=[call for _, call in routed])
                rewritten = translate.rewrite(message, post, [i for i, _ in routed])
                if rewritten is not message:
                    response = translate.with_message(response, message, rewritten)
            answers = translate.structured_calls(message, self.structured)
            if it is not None and message is not None and answers:
                structured_answers(it, message, [translate.tool_call(raw) for raw in answers])
            run = self.run
            message = translate.last_ai(response.result)
            if run is not None and it is not None and message is not None and self.recall_offered:
                # a recall tool never offered is the model's mistake, answered by LangChain
                runtime = self.request.runtime
                response = answer_recalls(
                    response,
                    message,
                    run=run,
                    iteration=it,
                    outputs=mw.outputs_for(runtime),
                    account=lambda call, answer: settle_output(
                        mw, run, it, call, answer, runtime, offload=False, reread=False
                    ),
                )
            if run is not None:
                run.emitted = len(translate.routed_calls(message, self.structured))
                # a tools node exists when seamscope runs tool hooks or the agent has tools
                tools_node = self.mw.tool_hooks or bool(run.tools)
                self.ends = translate.ends_run(self.request, response, tools_node=tools_node)
        except Exception:
            failed("langchain.after_model_call")
        return self._with_stubs(response)

    def _with_stubs(
        self, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """The response, with the stubs this call sent written into the state
        (same ``ToolMessage`` ids: LangGraph's message reducer replaces them)."""
        run, decided = self.run, self.mw.decided
        if run is None or decided is None or not self.decided:
            return response
        try:
            decided.written(run.scope, self.decided)
            if not self.written:
                return response
            return ExtendedModelResponse(
                model_response=response, command=Command(update={"messages": self.written})
            )
        except Exception:
            failed("langchain.after_model_call")
            return response


class ToolStep(_Step):
    """One tool call: the execute_tool span, then the offload gate (or a recall)."""

    def __init__(self, middleware: SeamscopeMiddleware, request: ToolCallRequest) -> None:
        super().__init__(middleware)
        self.request = request
        self.call: ToolCall | None = None
        self.tool: Invocation | None = None
        self.outcome: ToolOutcome | None = None
        self._outcome_token: contextvars.Token[ToolOutcome | None] | None = None

    def prepare(self) -> None:
        request = self.request
        try:
            # a run can be opened here only for a known thread (a run resumed at
            # its tools); it cannot be written back to the state from this hook
            self.run, _ = self.mw.runs.for_hook(
                request.state,
                request.runtime,
                create=translate.thread_id(request.runtime) is not None,
                resume=True,
            )
            if self.run is None:
                return
            self.iteration = self.run.current_iteration()
            self.attached = Attached(self.run.otel)
            self.call = translate.tool_call(request.tool_call)
            if self.call.id:
                # LangChain's callbacks report the tool run's exception to it
                self.outcome = ToolOutcome(self.call.id)
                self._outcome_token = TOOL_OUTCOME.set(self.outcome)
        except Exception:
            failed("langchain.before_tool_call")

    def close(self) -> None:
        token, self._outcome_token = self._outcome_token, None
        if token is not None:
            try:
                TOOL_OUTCOME.reset(token)
            except Exception:
                failed("langchain.after_tool_call")
        super().close()

    @contextlib.contextmanager
    def span(self) -> Iterator[Any]:
        """The kit's ``execute_tool`` span around the tool's run (the handler the
        hook calls), current for it; an interrupt ends it as a normal exit."""
        it, call = self.iteration, self.call
        if it is None or call is None:
            yield None
            return
        tool = it.start_tool(call)
        self.tool = tool
        with tool.current(passes=(GraphBubbleUp,)):
            yield tool.span

    @HOOKS.containing("tool_result")
    def result(self, span: Any, result: ToolMessage | Command[Any]) -> None:
        """An error result (a handled exception, arguments the tool rejected) is a
        failed execution, as in the reference loop: the span is ERROR with the
        ``error.type`` of what the tool run raised (:mod:`._tool_errors`;
        ``tool_error_result`` when nothing says more); one a watched middleware
        gave without running the tool is ``tool_call_blocked``."""
        if span is None or not translate.is_error_result(result):
            return
        run, call = self.run, self.call
        if run is not None and call is not None and call.id and call.id in run.blocked:
            # a watched middleware answered for the tool: it never ran
            with run.lock:
                run.blocked.discard(call.id)
            span.set_attribute(c.ATTR_DISPATCH_BLOCKED, True)
            record_error(span, c.TOOL_CALL_BLOCKED)
        else:
            outcome = self.outcome
            raised = None if outcome is None else outcome.error_type(self.request.tool)
            record_error(span, raised or c.TOOL_ERROR_RESULT)

    def finish(self, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        """The ``execute_tool`` span ends with the tool's answer; then the kit's
        accounting: a recall's cost, a re-read of a result a watched context
        editing cleared, or the offload gate (the stub really sent replaces
        the answer's content)."""
        text = None
        try:
            if isinstance(result, ToolMessage):
                text = translate.offloadable_text(result)
        except Exception:
            failed("langchain.after_tool_call")
        if self.tool is not None and self.iteration is not None:
            self.iteration.tool_result(self.tool, text if text is not None else result)
            self.tool.stop()
        try:
            run, it, call = self.run, self.iteration, self.call
            if run is None or it is None or call is None:
                return result
            self.ends = run.ends_at(call.name)
            state = self.request.state
            if isinstance(state, Mapping):
                messages = state.get("messages") or ()
                if run.usage is None and call.id:
                    # a run resumed at its tools on this worker: the model call that
                    # emitted this call ran elsewhere; its usage is in the state (what a
                    # recall charges of it, as on the worker that made the call)
                    run.usage = translate.emitting_usage(messages, call.id)
                if self.mw.watching:
                    # an eviction made on another worker, when this run resumed at its tools
                    self.mw.compactions.learn(
                        run.scope, messages, self.mw.outputs_for(self.request.runtime)
                    )
            stub = settle_output(self.mw, run, it, call, text, self.request.runtime)
            if stub is None or not isinstance(result, ToolMessage):
                return result
            return translate.with_content(result, stub)
        except Exception:
            failed("langchain.after_tool_call")
            return result


def settle_output(
    mw: StepContext,
    run: Run,
    it: Iteration,
    call: ToolCall,
    text: str | None,
    runtime: Any,
    *,
    offload: bool | None = None,
    reread: bool = True,
) -> str | None:
    """The kit's accounting of a tool's answer: a recall's cost, a re-read of a
    result a watched context editing cleared or a read of a file a watched
    Deep Agents filesystem evicted a result to (``reread``), or the offload
    gate (``offload``; None: the middleware's choice); the stub that replaces
    the answer's text, or None."""
    compactions, scope = mw.compactions, run.scope
    outputs = mw.outputs_for(runtime)  # the kit's step makes it the turn's store
    return account_tool_output(
        it,
        call,
        text,
        outputs=outputs,
        scope=scope,
        usage=run.usage,
        offload=mw.offload if offload is None else offload,
        reread=(
            (lambda c: compactions.reread(scope, c.name, dict(c.args), text))
            if mw.watching and reread
            else None
        ),
    )


class TailStep(_ModelCallStep):
    """One real model call, innermost, when middlewares are watched: the
    ``chat {model}`` span names the model really called, and its report
    counts as carried what the prompt really holds (seamscope's stubs, the
    placeholders and summaries of watched middlewares' compactions)."""

    def prepare(self) -> None:
        request, mw = self.request, self.mw
        try:
            self.run, _ = mw.runs.for_hook(request.state, request.runtime, create=False)
            run = self.run
            if run is None or run.iteration is None:
                return
            self.iteration = run.iteration
            self.attached = Attached(run.otel)
            self.model_name, self.named = translate.named_model(
                request.model, run.chosen, mw.models, mw.layer.router.default_model.model_name
            )
            self.compacted = mw.compactions.carried(
                run.scope, request.messages, mw.outputs_for(request.runtime)
            )
            # the tools the model is really bound with (a watched middleware may
            # have narrowed seamscope's selection): the POST seam's palette
            run.bound = tuple(tool_name(t) or "?" for t in request.tools)
        except Exception:
            failed("langchain.model_tail")

    def sent_tools(self) -> Sequence[Any] | None:
        return self.request.tools  # a watched middleware may have narrowed the selection
