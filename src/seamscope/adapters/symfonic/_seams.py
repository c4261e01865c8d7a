"""What the wrapped policies, resolver and offload gate report, recorded as seams.

:class:`_SeamRecorder` adds to the run recorder the three places where
symfonic decides without a callback: the PRE seam (``resolve``, with the
policy predicates and role resolver it calls), the POST seam (the policy
predicates symfonic calls per emitted tool call, read back at
``on_tool_call_dispatch``) and the offload gate. The hooks in
:mod:`._install` call its methods; what it gathers is turned into decision
records by :mod:`._translate`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context

from seamscope._internal import contained_error, record_error
from seamscope.adapters.symfonic._recorder import (
    _ACTIVE,
    _MAX_OFFLOAD_IDS,
    ActiveGate,
    _contained,
    _handle_span,
    _Iteration,
    _Run,
    _RunRecorder,
)
from seamscope.adapters.symfonic._translate import (
    _as_args,
    _convert_decision,
    _Dispatch,
    _gate_inputs,
    _Group,
    _model_name,
    _post_outcome,
    _PostEval,
    _PostOutcome,
    _pre_outcome,
    _PreRecorder,
    _qualname,
    _skipped_post,
    _truth,
)
from seamscope.decisions import ModelConfig, OffloadGateInputs, PreModelResult, ToolCall
from seamscope.decisions.records import GateCall, Seam

__all__ = ["_PRE", "_SeamCall", "_SeamRecorder"]

_PRE: contextvars.ContextVar[_PreRecorder | None] = contextvars.ContextVar(
    "seamscope_symfonic_pre", default=None
)
"""The PRE-seam recorder while symfonic's ``resolve`` runs (set and reset around it)."""


@dataclasses.dataclass(eq=False)
class _SeamCall:
    """An open PRE seam or gate call: its run, span handle and context token."""

    run: _Run | None
    iteration: _Iteration | None
    token: Any
    handle: Any
    started: float
    recorder: _PreRecorder | None = None
    inputs: OffloadGateInputs | None = None
    call: GateCall | None = None


class _SeamRecorder(_RunRecorder):
    """The run recorder, plus the seams symfonic decides without a callback."""

    def _is_installed(self) -> bool:
        return self._installed

    def _active_iteration(self) -> _Iteration | None:
        active = _ACTIVE.get()
        if active is None or active.recorder is not self:
            return None
        with self._lock:
            run = self._runs.get(active.run_id)
        return None if run is None else run.current

    @_contained
    def _adopter_dropped(self, call_id: str, target: str) -> None:
        it = self._active_iteration()
        if it is not None:
            it.adopter_drops[call_id] = target

    @_contained
    def _adopter_dispatch_error(self, error: BaseException) -> None:
        """An adopter's ``on_tool_call_dispatch`` failed on the call being dispatched."""
        it = self._active_iteration()
        if it is None or it.dispatching is None:
            return
        for d in reversed(it.dispatches):
            if d.after_policy.id == it.dispatching:
                d.adopter_errors.append(contained_error("callback", error))
                return

    # -- PRE seam ---------------------------------------------------------------------

    def _resolve(self, original: Callable[[Any], Any], ctx: Any) -> Any:
        call = self._pre_begin(ctx)
        if call is None:
            return original(ctx)
        token = _PRE.set(call.recorder)
        try:
            result = original(ctx)
        except BaseException as exc:
            _PRE.reset(token)
            self._pre_end(call, None, exc)
            raise
        _PRE.reset(token)
        self._pre_end(call, result, None)
        return result

    @_contained
    def _pre_begin(self, ctx: Any) -> _SeamCall | None:
        if not self._installed:
            return None
        run = self._run(getattr(ctx, "run_id", ""), create=True)
        if run is None:
            return None
        it = run.current
        if it is None or it.pre_done:
            it = self._new_iteration(run)
        it.pre_done = True
        _ACTIVE.set(ActiveGate(self, run.run_id, self._is_installed, self._gate))
        sctx = self._context(
            Seam.PRE_MODEL,
            run,
            it,
            getattr(ctx, "messages", ()),
            resolved=getattr(ctx, "resolved_tool_names", None),
            forced=getattr(ctx, "forced_tool_choice", None),
            role=getattr(ctx, "role", None),
        )
        token = otel_context.attach(it.ctx)
        try:
            handle = self._obs.start_pre_model(sctx)
        except Exception:
            otel_context.detach(token)
            raise
        return _SeamCall(run, it, token, handle, time.perf_counter(), _PreRecorder(self))

    @_contained
    def _pre_end(self, call: _SeamCall, result: Any, error: BaseException | None) -> None:
        try:
            self._pre_record(call, result, error)
        finally:
            otel_context.detach(call.token)

    def _pre_record(self, call: _SeamCall, result: Any, error: BaseException | None) -> None:
        rec = call.recorder
        assert rec is not None and call.iteration is not None
        outcome = _pre_outcome(self._pre_policies, rec, error)
        # symfonic's react node degrades to the snapshot default model.
        model: Any = result if error is None else self._snapshot_default
        name = _model_name(model)
        call.iteration.model = name
        self._obs.end_pre_model(
            call.handle,
            PreModelResult(
                ModelConfig(name),
                outcome.source,
                None if outcome.winner is None else outcome.winner.name,
                outcome.evaluations,
                outcome.errors,
                time.perf_counter() - call.started,
            ),
        )

    def _role_resolver(self, original: Callable[[Any], Any], ctx: Any) -> Any:
        rec = _PRE.get()
        if rec is None or rec.owner is not self:
            return original(ctx)
        rec.resolver_called = True
        try:
            result = original(ctx)
        except Exception as exc:
            rec.resolver_error = exc
            raise
        rec.resolver_result = result
        return result

    # -- policy predicates (both seams) ------------------------------------------------

    def _post_eval(self, index: int, stage: str) -> _PostEval | None:
        it = self._active_iteration()
        if it is None or not it.groups or not it.groups[-1].evals:
            return None
        ev = it.groups[-1].evals[-1]
        if ev.index != index or not ev.when_ok:
            return None
        if stage == "match":
            return ev if ev.matched is None and ev.match_error is None else None
        if stage == "guard":
            return ev if ev.matched and ev.guard is None and ev.guard_error is None else None
        return ev if ev.matched and not ev.transform_called else None

    def _match(self, original: Callable[[Any], Any], index: int, ctx: Any) -> Any:
        rec = _PRE.get()
        if rec is not None and rec.owner is self:
            try:
                result = original(ctx)
            except Exception as exc:
                rec.results[index] = (False, exc)
                raise
            rec.results[index] = (_truth(result), None)
            return result
        try:
            ev = self._post_eval(index, "match")
            if ev is not None:
                it = self._active_iteration()
                if it is not None and it.post_messages is None:
                    it.post_messages = tuple(getattr(ctx, "messages", ()) or ())
                    role = getattr(ctx, "role", None)
                    it.post_role = role if isinstance(role, str) else None
        except Exception:
            ev = None
        if ev is None:
            return original(ctx)
        try:
            result = original(ctx)
        except Exception as exc:
            ev.match_error = exc
            raise
        ev.matched = _truth(result)
        return result

    def _guard(self, original: Callable[[Any], Any], index: int, ctx: Any) -> Any:
        try:
            ev = self._post_eval(index, "guard")
        except Exception:
            ev = None
        if ev is None:
            return original(ctx)
        try:
            result = original(ctx)
        except Exception as exc:
            ev.guard_error = exc
            raise
        ev.guard = _truth(result)
        return result

    def _transform(self, original: Callable[..., Any], index: int, args: Any, ctx: Any) -> Any:
        try:
            ev = self._post_eval(index, "transform")
            if ev is not None:
                ev.transform_called = True
                ev.transform_input = _as_args(args)
        except Exception:
            ev = None
        if ev is None:
            return original(args, ctx)
        try:
            return original(args, ctx)
        except Exception as exc:
            ev.transform_error = exc
            raise

    def _on_matches_tool(self, index: int, tool_name: str, ok: bool) -> None:
        try:
            it = self._active_iteration()
            if it is None:
                return
            groups = it.groups
            if not groups or not groups[-1].evals or index <= groups[-1].evals[-1].index:
                groups.append(_Group(str(tool_name), time.perf_counter()))
            groups[-1].evals.append(_PostEval(index, bool(ok)))
        except Exception as exc:
            self._failed("matches_tool", exc)

    # -- POST seam ---------------------------------------------------------------------

    @_contained
    def _dispatch(self, event: Any) -> None:
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if it is None:
            return
        it.dispatching = str(event.call_id)
        index = len(it.dispatches)
        group = it.groups[index] if index < len(it.groups) else None
        available = tuple(str(t) for t in (getattr(event, "available_tools", ()) or ()))
        after = ToolCall(str(event.call_id), str(event.tool_name), _as_args(event.args))
        outcome = _post_outcome(self._post_policies, group)
        winner = outcome.winner
        dropped = winner is not None and winner.redirect_to not in available
        if group is not None and after.name != (
            group.emitted if (winner is None or dropped) else winner.redirect_to
        ):
            # Not the call these evaluations were about: record what is certain.
            self._failed("dispatch_mismatch", LookupError(after.name))
            group, outcome, dropped = None, _PostOutcome(), False
        elif group is None and len(it.groups) == 0:
            # No redirect policy applies: symfonic's walk skipped every policy.
            outcome = _PostOutcome(evaluations=_skipped_post(self._post_policies))
        if group is None:
            emitted = after
            started = time.perf_counter()
        else:
            transform_input = outcome.transform_input
            args = transform_input if transform_input is not None else after.args
            emitted = ToolCall(after.id, group.emitted, dict(args))
            started = group.started
        it.dispatches.append(
            _Dispatch(
                index=index,
                emitted=emitted,
                after_policy=after,
                policy=outcome.winner,
                guard=outcome.guard,
                transformed=outcome.transformed,
                policy_dropped=dropped,
                evaluations=outcome.evaluations,
                errors=outcome.errors,
                available=available,
                duration_s=time.perf_counter() - started,
            )
        )

    # -- offload gate ---------------------------------------------------------------------

    def _gate(
        self,
        original: Callable[[Any], Any],
        inputs: Any,
        run_id: str,
        site: tuple[str | None, str | None],
    ) -> Any:
        """Call symfonic's gate and record its decision; ``site`` is (tool call id, tool)."""
        call = self._gate_begin(inputs, run_id, site)
        if call is None:
            return original(inputs)
        try:
            decision = original(inputs)
        except BaseException as exc:
            self._gate_end(call, inputs, None, exc)
            raise
        self._gate_end(call, inputs, decision, None)
        return decision

    @_contained
    def _gate_begin(
        self, inputs: Any, run_id: str, site: tuple[str | None, str | None]
    ) -> _SeamCall | None:
        with self._lock:
            run = self._runs.get(run_id)
        it = run.current if run is not None else None
        parent = it.ctx if it is not None else (run.ctx if run is not None else None)
        call_id, tool = site
        s_inputs = _gate_inputs(inputs)
        conversation = None if run is None else run.conversation_id
        repeat = False
        if call_id:
            key = (conversation or "", call_id)
            with self._lock:
                repeat = key in self._gated
                self._gated[key] = None
                while len(self._gated) > _MAX_OFFLOAD_IDS:
                    self._gated.popitem(last=False)
        # symfonic re-decides an earlier output on every iteration: count its
        # predicted saving once
        gate_call = GateCall(
            conversation,
            self.agent_name,
            tool,
            call_id,
            reevaluation=repeat,
        )
        token = otel_context.attach(parent) if parent is not None else None
        try:
            handle = self._obs.start_offload_gate(s_inputs, gate_call)
        except Exception:
            if token is not None:
                otel_context.detach(token)
            raise
        return _SeamCall(
            run, it, token, handle, time.perf_counter(), inputs=s_inputs, call=gate_call
        )

    @_contained
    def _gate_end(
        self, call: _SeamCall, inputs: Any, decision: Any, error: BaseException | None
    ) -> None:
        try:
            reason = None
            if error is not None:
                kind = _qualname(error)
                reason = f"evaluate_offload_gate raised {kind}; symfonic does not offload"
                span = _handle_span(call.handle)
                if span is not None:
                    record_error(span, kind)
            offload_id, first = None, False
            if decision is not None and bool(getattr(decision, "fire", False)):
                offload_id, first = self._offload_id(call.call, call.inputs)
            converted = _convert_decision(inputs, decision, offload_id, reason)
            link = self._obs.end_offload_gate(call.handle, converted)
            conversation = None if call.call is None else call.call.conversation_id
            call_id = None if call.call is None else call.call.tool_call_id
            tool = None if call.call is None else call.call.tool_name
            if first and conversation and call_id:
                # symfonic re-decides the output on every later iteration: the
                # ledger follows it from the first fired decision, linked to
                # that decision's span, priced on the stub symfonic really sends
                self._follow_offload(conversation, call_id, converted, link, tool)
        finally:
            if call.token is not None:
                otel_context.detach(call.token)
