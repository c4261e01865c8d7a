"""What a watched middleware decided, read from each hook call's effect.

Each hook of a watched middleware (:mod:`._watched`) calls the original with
the same arguments and returns what it returns; its exceptions pass through
unchanged. Around that call the watcher reads the middleware's decision
from its effect (:mod:`._explain`) and records it in the run's current
iteration:

* ``wrap_model_call``: the wrapped middleware gets a handler of the
  watcher's own, which sees every request it passes inward: the tools
  (a selection or a provider tool search), the model (a route; several
  attempts on different models are a fallback), the messages (tool
  results replaced by context editing: a compaction, recorded once per
  conversation and tool call);
* ``before_model``: a summary that replaced messages (a compaction that
  belongs to the next model call, kept pending on the run until seamscope
  opens that call's iteration);
* ``after_model``: error tool messages injected for calls of the last
  AIMessage (calls blocked by a limit);
* ``wrap_tool_call``: an error result returned without calling the tool
  (a call blocked by a risk check); a result replaced by Deep Agents'
  eviction notice (``FilesystemMiddleware`` wrote it to a file and left a
  preview: a compaction, recorded once per conversation and tool call;
  with ``gate_evictions`` the offload gate decides it first, and an
  eviction it prices as a loss is undone: the tool's own result is
  returned, see :meth:`ToolWatch.returned`);
* ``before_agent``: the decision model a router asked (its route is read
  at each model call from the agent state).

Decision-model calls (a selector's model, a router's or a risk check's
classifier, a summary model) are ``chat {model}`` spans of their own,
found by :mod:`._calls` while the wrapped middleware's own code runs.

A failure of the watcher's own code is contained (``failed("langchain.
watch...")``): the middleware runs exactly as it would without seamscope.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import time
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import langchain.agents.middleware as lc_middleware

from seamscope.adapters._kit import gate_compaction, keep_compaction, priced_as_loss
from seamscope.adapters.langchain import _explain as explain
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._calls import DECISION_CALLS, DecisionCalls
from seamscope.adapters.langchain._framework import AgentMiddleware, GraphBubbleUp, ToolMessage
from seamscope.adapters.langchain._runs import HOOKS, Run, failed
from seamscope.adapters.langchain._steps import MODEL_STEP, Attached, StepContext
from seamscope.decisions import OffloadStore, ToolCall
from seamscope.decisions.records import (
    Compaction,
    MiddlewareDecision,
    MiddlewareDecisionKind,
    OffloadGateDecision,
    OffloadMechanism,
    SettleTrigger,
)
from seamscope.loop import RECALL_TOOL, Iteration, estimate_tokens

__all__ = [
    "ASYNC_NODE_HOOKS",
    "SYNC_NODE_HOOKS",
    "ModelWatch",
    "NodeWatch",
    "ToolWatch",
    "Watcher",
]

_K = MiddlewareDecisionKind

SYNC_NODE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
ASYNC_NODE_HOOKS = ("abefore_agent", "abefore_model", "aafter_model", "aafter_agent")


def _is(middleware: Any, class_name: str) -> bool:
    """Whether ``middleware`` is an instance of LangChain's class of that name
    (False when the installed LangChain has none)."""
    cls = getattr(lc_middleware, class_name, None)
    return isinstance(cls, type) and isinstance(middleware, cls)


def _classifier_model(middleware: Any) -> str | None:
    """The model a middleware's decision model names (``classifier.model``, read
    defensively: a public field of LangChain's ``BaseDecisionModel``)."""
    model = getattr(getattr(middleware, "classifier", None), "model", None)
    return model if isinstance(model, str) and model else None


# -- one hook call -----------------------------------------------------------------------


class _HookWatch:
    """One call of a watched hook: its run, and the decision-model calls the
    wrapped middleware's own code makes while it runs."""

    def __init__(self, watcher: Watcher, state: Any, runtime: Any, hook: str) -> None:
        self.watcher = watcher
        self.middleware = watcher.wrapped
        self.hook = hook
        self.runtime = runtime
        self.started = time.perf_counter()
        self.start_ns = time.time_ns()
        self.run: Run | None = None
        self.calls: DecisionCalls | None = None
        self._token: contextvars.Token[Any] | None = None
        # a hook before the model call may be the run's first (seamscope adds no
        # before_agent node): it opens the run, or continues one that ended
        base = hook[1:] if hook in ASYNC_NODE_HOOKS else hook
        # so does a model hook outside seamscope's (its model call's iteration
        # is opened inside it: its decisions wait for it, see ModelWatch)
        self.outside = base == "wrap_model_call" and not MODEL_STEP.get()
        create = base in ("before_agent", "before_model") or self.outside
        try:
            self.run = watcher.run_for(state, runtime, create=create)
            if self.run is not None:
                self.calls = DecisionCalls(self.run)
        except Exception:
            failed(f"langchain.watch.{hook}")

    def enter(self) -> None:
        if self.calls is not None:
            try:
                self._token = DECISION_CALLS.set(self.calls)
            except Exception:
                failed(f"langchain.watch.{self.hook}")

    def exit(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            try:
                DECISION_CALLS.reset(token)
            except Exception:
                failed(f"langchain.watch.{self.hook}")

    @property
    def name(self) -> str:
        return str(self.middleware.name)

    @property
    def decision_model(self) -> str | None:
        return None if self.calls is None else self.calls.first_model

    def record(
        self,
        iteration: Iteration,
        decision: MiddlewareDecision,
        *,
        charge: bool = True,
        store: OffloadStore | None = None,
    ) -> None:
        """Record a decision in ``iteration``, its span under the iteration's,
        with what the middleware's own model calls cost (``charge`` False: a
        further decision of the same hook call, already charged; ``store``:
        the shared offload store that keeps its compaction's record)."""
        if charge and self.calls is not None and not decision.cost:
            decision = dataclasses.replace(decision, cost=_cost(iteration, self.calls.usages()))
        attached = Attached(None if self.run is None else self.run.otel)
        try:
            iteration.middleware_decision(decision, store=store)
        finally:
            attached.detach()

    def eviction(
        self, run: Run, it: Iteration, evicted: explain.Evicted, calls: tuple[ToolCall, ...] = ()
    ) -> None:
        """Record one Deep Agents eviction (a tool result, or a user message):
        a compaction ``deepagents_eviction:{id}`` priced with the gate's
        formula at the iteration's model (removed: the text's tokens; kept:
        the preview's), once per conversation and id; its record goes to a
        shared offload store (:meth:`_kept`). ``calls``: the tool call whose
        result it is."""
        compaction_id = f"{OffloadMechanism.DEEPAGENTS_EVICTION}:{evicted.tool_call_id}"
        if not self.watcher.kit.compactions.evict(
            run.scope,
            evicted.tool_call_id,
            compaction_id,
            evicted.path,
            evicted.preview,
            evicted.removed_tokens,
        ):
            return
        compaction = it.compaction(
            compaction_id,
            OffloadMechanism.DEEPAGENTS_EVICTION,
            removed_tokens=evicted.removed_tokens,
            kept_tokens=estimate_tokens(evicted.preview),
            tool_call_ids=() if evicted.message else (evicted.tool_call_id,),
        )
        kept = self._kept(it, compaction, evicted)
        self.record(
            it,
            MiddlewareDecision(
                self.name,
                _K.COMPACTION,
                explain.eviction_reason(self.middleware, evicted),
                compaction=compaction,
                calls=calls,
                start_time_ns=self.start_ns,
            ),
            store=None if kept is None else kept[0],
        )
        if kept is not None:
            for offload_id in kept[1]:  # the store's size bound dropped them
                it.turn.layer.ledger.settle_offload(
                    it.turn.conversation_id or "",
                    offload_id,
                    trigger=SettleTrigger.EVICTED,
                    store=kept[0],
                )

    def _kept(
        self, it: Iteration, compaction: Compaction, evicted: explain.Evicted
    ) -> tuple[OffloadStore, tuple[str, ...]] | None:
        """The eviction's record, written to the conversation's offload store
        when other workers see it (its content: the path of the file that
        holds the text, which stays in Deep Agents' backend): any worker then
        prices the preview a prompt carries and the reads of that file.
        Returns the store and the ids its size bound dropped to make room,
        or None (no shared store, no conversation, or the store failed)."""
        outputs = self.watcher.kit.outputs_for(self.runtime)
        dropped = keep_compaction(
            outputs,
            it,
            compaction,
            call_id=evicted.tool_call_id,
            tool=evicted.tool,
            stub=evicted.preview,
            content=evicted.path,
        )
        return None if dropped is None else (outputs.store, dropped)


def _cost(iteration: Iteration, usages: list[tuple[str, Any]]) -> Decimal:
    """What these model calls cost at their models' rates (0 for an unpriced one)."""
    return sum((iteration.model_call_cost(model, usage) for model, usage in usages), Decimal(0))


@dataclasses.dataclass(slots=True)
class _Attempt:
    """One model call the wrapped middleware passed inward: the model object,
    its name, whether more than the layer's default named it, and the type of
    what it raised (None: it answered, or has not returned yet)."""

    model: Any
    name: str
    named: bool
    error: str | None = None


class ModelWatch(_HookWatch):
    """One ``wrap_model_call``: what the wrapped middleware passed inward."""

    def __init__(self, watcher: Watcher, request: Any) -> None:
        super().__init__(watcher, request.state, request.runtime, "wrap_model_call")
        self.request = request
        self.iteration = None if self.run is None else self.run.iteration
        self.attempts: list[_Attempt] = []

    @HOOKS.containing("watch.wrap_model_call")
    def inward(self, request: Any) -> None:
        """The wrapped middleware calls the model with ``request``."""
        run, it = self.run, self.iteration
        if run is None or (it is None and not self.outside):
            return
        kit = self.watcher.kit
        name, named = translate.named_model(
            request.model, run.chosen, kit.models, kit.layer.router.default_model.model_name
        )
        self.attempts.append(_Attempt(request.model, name, named))
        if len(self.attempts) == 1:
            if self.outside:  # recorded in the iteration seamscope opens inside
                with run.lock:
                    run.pending.append(functools.partial(self._later, run, request, name))
            elif it is not None:
                self._first(run, it, request, name)

    def _later(self, run: Run, request: Any, name: str, it: Iteration) -> None:
        """The first attempt's decisions, in the iteration of the model call it
        made (a watched middleware outside seamscope's model hook)."""
        self.iteration = it
        self._first(run, it, request, name)

    def failed_attempt(self, exc: BaseException) -> None:
        if self.attempts and not isinstance(exc, GraphBubbleUp):
            self.attempts[-1].error = type(exc).__qualname__

    def answered(self, response: Any) -> None:
        """The model of the last attempt answered ``response``: when nothing but
        the layer's default named it, the model the response names is its name
        (the rule of the model really called: model object, then response)."""
        try:
            attempt = self.attempts[-1] if self.attempts else None
            if attempt is None or attempt.named:
                return
            message = translate.last_ai(getattr(response, "result", None) or ())
            said = None if message is None else translate.response_model(message)
            if isinstance(said, str) and said:
                attempt.name, attempt.named = said, True
        except Exception:
            failed("langchain.watch.wrap_model_call")

    def _first(self, run: Run, it: Iteration, request: Any, name: str) -> None:
        received, middleware = self.request, self.middleware
        if request.tools is not received.tools:
            change = explain.narrowing(received.tools, request.tools)
            if change is None and _is(middleware, "LLMToolSelectorMiddleware"):
                names = explain.tool_names(received.tools)
                change = explain.Narrowing(names, names)  # it kept every tool
            if change is not None:
                kind = _K.TOOL_SEARCH if change.search_kind else _K.TOOL_SELECTION
                self.record(
                    it,
                    MiddlewareDecision(
                        self.name,
                        kind,
                        explain.narrowing_reason(middleware, change),
                        before=change.before,
                        after=change.after,
                        decision_model=self.decision_model,
                        start_time_ns=self.start_ns,
                    ),
                )
        routed = _is(middleware, "ModelRouterMiddleware")
        if request.model is not received.model or routed:
            answer = explain.route_answer(received.state) if routed else None
            classified = run.notes.pop(f"{self.name}:usages", None) or []
            self.record(
                it,
                MiddlewareDecision(
                    self.name,
                    _K.MODEL_ROUTE,
                    explain.model_route_reason(middleware, answer, name),
                    model=name,
                    decision_model=self.decision_model
                    or run.notes.get(self.name)
                    or _classifier_model(middleware),
                    cost=_cost(it, classified),
                    start_time_ns=self.start_ns,
                ),
            )
        if request.messages is not received.messages:
            self._cleared(run, it, request)
            for evicted in explain.evicted_messages(received.messages, request.messages):
                self.eviction(run, it, evicted)

    def _cleared(self, run: Run, it: Iteration, request: Any) -> None:
        store = self.watcher.kit.compactions
        for cleared in explain.cleared_results(self.request.messages, request.messages):
            compaction_id = f"context_editing:{cleared.tool_call_id}"
            if not store.clear(
                run.scope,
                cleared.tool_call_id,
                compaction_id,
                cleared.tool,
                cleared.args,
                cleared.placeholder,
            ):
                continue  # recomputed on every call: recorded the first time
            compaction = it.compaction(
                compaction_id,
                OffloadMechanism.CONTEXT_EDITING,
                removed_tokens=cleared.removed_tokens,
                kept_tokens=estimate_tokens(cleared.placeholder),
                tool_call_ids=(cleared.tool_call_id,),
            )
            self.record(
                it,
                MiddlewareDecision(
                    self.name,
                    _K.COMPACTION,
                    explain.context_editing_reason(self.middleware, cleared),
                    compaction=compaction,
                    start_time_ns=self.start_ns,
                ),
            )

    def done(self, exc: BaseException | None) -> None:
        """The wrapped middleware returned (or raised ``exc``): attempts on more
        than one model object are a fallback (told apart by identity: two
        models that give themselves no name are still two models)."""
        try:
            it, attempts = self.iteration, self.attempts
            models = {id(a.model) for a in attempts}
            if it is None or (len(models) < 2 and len({a.name for a in attempts}) < 2):
                return
            failures = tuple((a.name, a.error) for a in attempts if a.error is not None)
            last = attempts[-1]
            answered = last.name if last.error is None and exc is None else None
            self.record(
                it,
                MiddlewareDecision(
                    self.name,
                    _K.MODEL_FALLBACK,
                    explain.model_fallback_reason(failures, answered),
                    model=answered,
                    failed=failures,
                    start_time_ns=self.start_ns,
                ),
            )
        except Exception:
            failed("langchain.watch.wrap_model_call")


class ToolWatch(_HookWatch):
    """One ``wrap_tool_call``: whether the tool's handler ran at all, and what
    it returned (``received``) against what the wrapped middleware returned."""

    def __init__(self, watcher: Watcher, request: Any) -> None:
        super().__init__(watcher, request.state, request.runtime, "wrap_tool_call")
        self.request = request
        self.called = False
        self.received: Any = None
        self.keep = False  # the gate kept the tool's own result (gate_evictions)

    def answered(self, result: Any) -> Any:
        """The tool's handler returned ``result`` (returned as is)."""
        self.called = True
        self.received = result
        return result

    def returned(self, result: Any) -> Any:
        """What the watched hook returns: the middleware's result, or the tool's
        own result when the gate found its eviction would lose money, or when
        it was seamscope's own recall answer (the middleware's fallback when it
        cannot write a result, by another cause: the file it wrote stays in
        its backend, unnamed)."""
        return self.received if self.keep else result

    def done(self, result: Any) -> None:
        try:
            run = self.run
            if run is not None and self.received is not None and result is not self.received:
                self._evicted(run, result)
            blocked = explain.blocked_call(self.request.tool_call, result, self.called)
            if run is None or blocked is None:
                return
            if blocked.call.id:
                with run.lock:
                    run.blocked.add(blocked.call.id)  # its execute_tool span says so
            self.record(
                run.current_iteration(),
                MiddlewareDecision(
                    self.name,
                    _K.TOOL_CALL_BLOCKED,
                    explain.blocked_reason(self.middleware, [blocked]),
                    calls=(blocked.call,),
                    decision_model=self.decision_model,
                    start_time_ns=self.start_ns,
                ),
            )
        except Exception:
            failed("langchain.watch.wrap_tool_call")

    def _evicted(self, run: Run, result: Any) -> None:
        """Each result Deep Agents' filesystem evicted: a compaction priced with
        the gate's formula at the iteration's model (removed: the result's
        tokens; kept: the preview's), in the iteration of the model call that
        emitted the tool call; once per conversation and tool call."""
        raw = self.request.tool_call
        name = str(raw.get("name") or "?") if isinstance(raw, Mapping) else "?"
        evictions = explain.evicted_results(self.received, result, name)
        if not evictions:
            return
        if name == RECALL_TOOL and isinstance(self.received, ToolMessage):
            # seamscope's own recall answer brings an offloaded output back whole
            # (the ledger charges it so): never evicted again
            self.keep = True
            return
        it = run.current_iteration()
        gated = self.watcher.kit.gate_evictions and isinstance(self.received, ToolMessage)
        for evicted in evictions:
            compaction_id = f"{OffloadMechanism.DEEPAGENTS_EVICTION}:{evicted.tool_call_id}"
            if gated and priced_as_loss(self._gate(run, it, evicted, compaction_id)):
                # priced as a loss: the tool's own result stays in the prompt
                self.keep = True
                return
            call = translate.tool_call(raw) if isinstance(raw, Mapping) else None
            same = call is not None and call.id == evicted.tool_call_id
            self.eviction(run, it, evicted, (call,) if same and call is not None else ())

    def _gate(
        self, run: Run, it: Iteration, evicted: explain.Evicted, compaction_id: str
    ) -> OffloadGateDecision:
        """The offload gate's decision on one eviction (the kit's
        :func:`~seamscope.adapters._kit.gate_compaction`: the preview as the
        stub, no size threshold, Deep Agents' limit chose the size). Only a
        loss (``net_not_positive``) undoes the eviction: an unpriced model
        leaves it as Deep Agents made it."""
        return gate_compaction(
            it,
            evicted.tool,
            evicted.tool_call_id,
            evicted.removed_tokens,
            estimate_tokens(evicted.preview),
            compaction_id,
            OffloadMechanism.DEEPAGENTS_EVICTION,
            context=run.otel,
        )


class NodeWatch(_HookWatch):
    """One node hook (``before_agent``, ``before_model``, ``after_model``,
    ``after_agent``): what its state update says it decided."""

    def __init__(self, watcher: Watcher, state: Any, runtime: Any, hook: str) -> None:
        super().__init__(watcher, state, runtime, hook)
        self.state = state

    def done(self, update: Any) -> None:
        try:
            if self.run is None or update is None:
                return
            base = self.hook[1:] if self.hook in ASYNC_NODE_HOOKS else self.hook
            if base == "before_agent":
                self._routed(self.run, update)
            elif base == "before_model":
                self._summarized(self.run, update)
            elif base == "after_model":
                self._blocked(self.run, update)
                self._ended(self.run, update)
        except Exception:
            failed(f"langchain.watch.{self.hook}")

    def _ended(self, run: Run, update: Any) -> None:
        """A declared jump to the end (a limit's ``end``) ends the run."""
        if not isinstance(update, Mapping) or update.get("jump_to") != "end":
            return
        cls = type(self.middleware)
        declared = [
            getattr(getattr(cls, hook, None), "__can_jump_to__", None) or ()
            for hook in ("after_model", "aafter_model")
        ]
        if any("end" in jumps for jumps in declared):
            self.watcher.kit.runs.close(run, None)

    def _messages(self) -> list[Any]:
        messages = self.state.get("messages") if isinstance(self.state, Mapping) else None
        return list(messages) if isinstance(messages, list | tuple) else []

    def _routed(self, run: Run, update: Any) -> None:
        """A router's answer is read at each model call; its decision model here."""
        if isinstance(update, Mapping) and "model_route" in update:
            model = self.decision_model or _classifier_model(self.middleware)
            if model is not None:
                run.notes[self.name] = model
            if self.calls is not None:
                # the classifier's calls, paid once per run: charged to the first route
                run.notes[f"{self.name}:usages"] = self.calls.usages()

    def _blocked(self, run: Run, update: Any) -> None:
        """One decision per call that never runs (a limit's ``end`` answers every
        call of the message, ``continue`` the calls past the limit), each with
        the batch's reason: a span and one unit of the decisions counter each."""
        blocked = explain.blocked_calls(self._messages(), update)
        if not blocked:
            return
        reason = explain.blocked_reason(self.middleware, blocked, self.state)
        iteration = run.current_iteration()
        for position, one in enumerate(blocked):
            self.record(
                iteration,
                MiddlewareDecision(
                    self.name,
                    _K.TOOL_CALL_BLOCKED,
                    reason,
                    calls=(one.call,),
                    decision_model=self.decision_model,
                    start_time_ns=self.start_ns,
                ),
                charge=position == 0,
            )

    def _summarized(self, run: Run, update: Any) -> None:
        """A summary belongs to the model call that follows: recorded when
        seamscope opens that call's iteration (priced at its model)."""
        summary = explain.summarized(self._messages(), update)
        if summary is None:
            return
        compaction_id = f"summarization:{uuid.uuid4().hex[:16]}"
        self.watcher.kit.compactions.summary(run.scope, summary.summary, compaction_id)
        usages = [] if self.calls is None else self.calls.usages()
        name, middleware = self.name, self.middleware
        decision_model = self.decision_model
        duration = time.perf_counter() - self.started
        reason = explain.summarization_reason(middleware, summary)

        def record(it: Iteration) -> None:
            cost = _cost(it, usages)
            compaction = it.compaction(
                compaction_id,
                OffloadMechanism.SUMMARIZATION,
                removed_tokens=summary.removed_tokens,
                kept_tokens=estimate_tokens(summary.summary),
                messages_removed=summary.messages_removed,
                cost=cost,
                rereadable=False,
            )
            self.record(
                it,
                MiddlewareDecision(
                    name,
                    _K.COMPACTION,
                    reason,
                    compaction=compaction,
                    decision_model=decision_model,
                    cost=cost,
                    duration_s=duration,
                ),
            )

        with run.lock:
            run.pending.append(record)


# -- the watcher ---------------------------------------------------------------------------


class Watcher:
    r"""What one call of a watched hook reads: seamscope's ``kit`` (the run
    registry, the compactions followed, the models and the layer) and the
    watched middleware itself (``wrapped``). The watcher records into the
    same runs as the seamscope middleware that watches it, never reading
    that middleware itself.

    A middleware instance several ``SeamscopeMiddleware`` objects watch (one shared
    by several agents) has a kit for each: a hook records with the one that
    follows the run it belongs to, and opens no run itself."""

    __slots__ = ("kit", "kits", "wrapped")

    def __init__(
        self, kits: tuple[StepContext, ...], wrapped: AgentMiddleware[Any, Any, Any]
    ) -> None:
        self.kits = kits
        self.kit = kits[0]
        self.wrapped = wrapped

    @property
    def name(self) -> str:
        return str(self.wrapped.name)

    def run_for(self, state: Any, runtime: Any, *, create: bool) -> Run | None:
        """The run the hook belongs to (``create``: opened here when it is the
        run's first hook, with one kit only); its kit becomes ``kit``."""
        if len(self.kits) == 1:
            run, _ = self.kit.runs.for_hook(state, runtime, create=create)
            return run
        for kit in self.kits:
            run, _ = kit.runs.for_hook(state, runtime, create=False)
            if run is not None:
                self.kit = kit
                return run
        return None
