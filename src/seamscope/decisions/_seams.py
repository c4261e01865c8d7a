"""The two seams of a ReAct iteration and their precedence.

PRE-model (which model reasons the turn)::

    first policy with a model whose match is true
      -> role model resolver
        -> default model

POST-model, for each emitted tool call::

    first policy whose when_tool admits the tool, whose match is true and
    whose guard (if any) passes: rewrite to redirect_to (args_transform or
    the original args)
      -> adopter on_tool_call_dispatch (sees that rewrite; may override)
        -> palette gate, always last: a target not routed this turn is
           dropped with a WARN and the original call dispatches

First match wins independently at each seam. Adopter code never breaks the
loop: a raising match or guard counts as no match for that policy; a raising
args_transform keeps the redirect with the original args; a raising resolver
or callback falls through to the next source. Each is recorded as a
:class:`ContainedError` on the seam's record. A match or guard answers with
a bool: only ``True`` is a yes. Any other answer (``"false"``, ``"no"``, a
regex match, None, an awaitable) is contained the same way as a raise: no
match for that policy (a guard: ``error``, no redirect), a ContainedError
``TypeError`` on the evaluation, and a WARNING once per policy and predicate
(see :class:`ToolCallPolicy`).

``policies=()`` is byte-identical to having no policy feature: both seams
skip the policy block after a length check; no predicate is called and the
results equal those of the resolver/callback path alone.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from seamscope.decisions import _checks as _c
from seamscope.decisions._messages import ToolCall
from seamscope.decisions._observer import DecisionObserver, check_observer, guard_observer
from seamscope.decisions._policy import DispatchContext, ModelConfig, ToolCallPolicy
from seamscope.decisions.records import (
    ContainedError,
    DispatchRecord,
    GuardResult,
    PaletteVerdict,
    PassedOver,
    PolicyEvaluation,
    PolicyResult,
    PostModelResult,
    PreModelResult,
    Seam,
    WinnerSource,
    contained_error,
)

__all__ = [
    "ContainedError",
    "DispatchRecord",
    "PolicyEvaluation",
    "PostModelResult",
    "PreModelResult",
    "RoleModelResolver",
    "SeamRouter",
    "ToolCallDispatchCallback",
    "contained_error",
]

_log = logging.getLogger("seamscope.decisions")
_NOTHING = PassedOver()

RoleModelResolver = Callable[[DispatchContext], "ModelConfig | str | None"]
ToolCallDispatchCallback = Callable[[ToolCall, DispatchContext], "ToolCall | None"]


_MAX_CANDIDATE_TOOLS = 256  # emitted tool names whose POST candidates are remembered


class _Trail:
    """The evaluations recorded in full and the contained errors of one seam
    decision, plus the count of evaluations that did not match.

    Only the matched, guard-stopped and error evaluations are records; a
    policy that did not match or does not apply is a count (the seam's
    :class:`PassedOver`). Built only when there are policies, so
    ``policies=()`` allocates nothing here.
    """

    __slots__ = ("_seam", "_warned", "errors", "evaluations", "not_matched")

    def __init__(self, seam: Seam, warned: set[tuple[str, str]]) -> None:
        self._seam = seam
        self._warned = warned
        self.evaluations: list[PolicyEvaluation] = []
        self.errors: list[ContainedError] = []
        self.not_matched = 0

    def note(
        self,
        policy: ToolCallPolicy,
        result: PolicyResult,
        guard: GuardResult = GuardResult.NONE,
        error: ContainedError | None = None,
    ) -> None:
        self.evaluations.append(PolicyEvaluation(policy.name, self._seam, result, guard, error))

    def matching(
        self, candidates: tuple[ToolCallPolicy, ...], ctx: DispatchContext
    ) -> Iterator[ToolCallPolicy]:
        """The candidates whose ``match`` is true, in order, as the caller asks
        for them (first match wins: the caller stops at its winner). A false
        verdict is counted as not matched; a match that raised is recorded as
        ``error`` (no match for that policy) and evaluation goes on.

        This loop is the seams' hot path (every policy, every seam, every
        call), so the match call is made here rather than through a helper:
        one Python call less per policy, measured with
        ``benchmarks/bench_policies.py --callgrind``."""
        not_matched = 0
        try:
            for policy in candidates:
                try:
                    out = policy.match(ctx)
                    if out is not True and out is not False:
                        out = self.verdict(policy, "match", out)
                except Exception as exc:
                    err = contained_error("match", exc, policy.name)
                    self.errors.append(err)
                    self.note(policy, PolicyResult.ERROR, error=err)
                    continue
                if out:
                    self.not_matched += not_matched
                    not_matched = 0
                    yield policy
                else:
                    not_matched += 1
        finally:
            self.not_matched += not_matched

    def predicate(
        self,
        policy: ToolCallPolicy,
        source: str,
        fn: Callable[[DispatchContext], object],
        ctx: DispatchContext,
    ) -> bool:
        """A match or guard verdict: a bool as is (see :meth:`verdict` for the rest)."""
        out = fn(ctx)
        if out is True or out is False:
            return out
        return self.verdict(policy, source, out)

    def verdict(self, policy: ToolCallPolicy, source: str, out: object) -> bool:
        """A predicate's answer that is not a bool: it raises a TypeError (the
        caller contains it: no match, or a guard ``error``), and a non-bool
        that is not an awaitable is also logged once per policy and
        predicate. The answer's value is never shown (it may be content),
        only its type."""
        if inspect.isawaitable(out):
            close = getattr(out, "close", None)
            if callable(close):
                close()  # never awaited: close it so it does not warn later
            raise TypeError(
                f"{source} returned {type(out).__name__}, an awaitable; "
                "predicates must be synchronous and return bool"
            )
        kind = type(out).__qualname__
        key = (policy.name, source)
        if key not in self._warned:
            self._warned.add(key)
            _log.warning(
                "policy %r: %s returned %s, not bool; counted as an error (only True is a yes)",
                policy.name,
                source,
                kind,
            )
        raise TypeError(f"{source} returned {kind}, not bool (only True is a yes)")


class SeamRouter:
    """Applies tool-call policies, the resolver, the adopter callback and the
    palette gate at the two seams.

    Construction fails fast with a ValueError naming the field:
    ``policies`` must be an iterable of ToolCallPolicy with unique names;
    ``default_model`` a ModelConfig (or a non-empty model name); the
    resolver and callback synchronous callables or None; ``observer`` a
    DecisionObserver or None.
    """

    __slots__ = (
        "_callback",
        "_default",
        "_index",
        "_names",
        "_observer",
        "_policies",
        "_post_candidates",
        "_pre_candidates",
        "_resolver",
        "_warned",
    )

    def __init__(
        self,
        policies: Sequence[ToolCallPolicy] = (),
        *,
        default_model: ModelConfig | str,
        role_model_resolver: RoleModelResolver | None = None,
        on_tool_call_dispatch: ToolCallDispatchCallback | None = None,
        observer: DecisionObserver | None = None,
    ) -> None:
        owner = "SeamRouter"
        if isinstance(policies, str | bytes | Mapping) or not isinstance(policies, Iterable):
            raise _c.fail(owner, "policies", "an iterable of ToolCallPolicy", policies)
        policies = tuple(policies)
        seen: set[str] = set()
        for i, policy in enumerate(policies):
            if not isinstance(policy, ToolCallPolicy):
                raise _c.fail(owner, f"policies[{i}]", "a ToolCallPolicy", policy)
            if policy.name in seen:
                raise _c.fail(
                    owner, "policies", "uniquely named", policy.name, "a duplicate policy name"
                )
            seen.add(policy.name)
        if isinstance(default_model, str):
            if not default_model.strip():
                raise _c.fail(
                    owner, "default_model", "a ModelConfig or a non-empty model name", default_model
                )
            default_model = ModelConfig(default_model)
        if not isinstance(default_model, ModelConfig):
            raise _c.fail(
                owner, "default_model", "a ModelConfig or a non-empty model name", default_model
            )
        _c.maybe_callable(owner, "role_model_resolver", role_model_resolver)
        _c.maybe_callable(owner, "on_tool_call_dispatch", on_tool_call_dispatch)
        check_observer(owner, observer)
        self._warned: set[tuple[str, str]] = set()
        self._policies = policies
        # what a seam looks up instead of re-deriving it per policy and call:
        # the names in order (every record's PassedOver shares this tuple),
        # each name's position, the policies that apply at PRE (a model), and
        # per emitted tool name the policies that apply at POST (a redirect
        # whose when_tool admits it; both are configuration, fixed at
        # construction)
        self._names = tuple(p.name for p in policies)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._pre_candidates = tuple(p for p in policies if p.model is not None)
        self._post_candidates: dict[str, tuple[ToolCallPolicy, ...]] = {}
        self._default = default_model
        self._resolver = role_model_resolver
        self._callback = on_tool_call_dispatch
        self._observer = guard_observer(observer)

    @property
    def policies(self) -> tuple[ToolCallPolicy, ...]:
        return self._policies

    @property
    def default_model(self) -> ModelConfig:
        return self._default

    # -- PRE seam ---------------------------------------------------------

    def pre_model(self, ctx: DispatchContext) -> PreModelResult:
        """Which model reasons this turn."""
        obs = self._observer
        handle = obs.start_pre_model(ctx)
        start = time.perf_counter()
        evaluations: list[PolicyEvaluation] | tuple[()] = ()
        errors: list[ContainedError] | tuple[()] = ()
        passed_over = _NOTHING
        if self._policies:
            trail = _Trail(Seam.PRE_MODEL, self._warned)
            evaluations, errors = trail.evaluations, trail.errors
            for policy in trail.matching(self._pre_candidates, ctx):
                # the first match wins
                trail.note(policy, PolicyResult.MATCHED)
                assert policy.model is not None
                result = PreModelResult(
                    policy.model,
                    WinnerSource.POLICY,
                    policy.name,
                    tuple(evaluations),
                    tuple(errors),
                    time.perf_counter() - start,
                    self._passed_over(Seam.PRE_MODEL, trail, policy, None),
                )
                obs.end_pre_model(handle, result)
                return result
            passed_over = self._passed_over(Seam.PRE_MODEL, trail, None, None)
        model, source, resolver_error = self._resolve(ctx)
        if resolver_error is not None:
            errors = [*errors, resolver_error]
        result = PreModelResult(
            model,
            source,
            None,
            tuple(evaluations),
            tuple(errors),
            time.perf_counter() - start,
            passed_over,
        )
        obs.end_pre_model(handle, result)
        return result

    # -- what was passed over, and the per-policy view ------------------------

    def _passed_over(
        self, seam: Seam, trail: _Trail, last: ToolCallPolicy | None, tool: str | None
    ) -> PassedOver:
        """The counts of a seam decision: the policies up to ``last`` (the
        winner; None: all of them) that are not recorded in full."""
        evaluated = len(self._names) if last is None else self._index[last.name] + 1
        recorded = trail.evaluations
        not_matched = trail.not_matched
        skipped = evaluated - not_matched - len(recorded)
        if not_matched == 0 and skipped == 0:
            return _NOTHING
        return PassedOver(
            not_matched,
            skipped,
            evaluated,
            self._names,
            tuple([ev.policy for ev in recorded]),
            functools.partial(self._per_policy, seam, evaluated, tuple(recorded), tool),
        )

    def _per_policy(
        self,
        seam: Seam,
        evaluated: int,
        recorded: tuple[PolicyEvaluation, ...],
        tool: str | None,
    ) -> tuple[PolicyEvaluation, ...]:
        """One evaluation per policy of the prefix, re-derived: a recorded one
        as it was, else ``skipped`` where the policy does not apply at the
        seam (no model at PRE; no redirect, or a when_tool rejecting the
        emitted tool, at POST) and ``not_matched`` otherwise."""
        full = {ev.policy: ev for ev in recorded}
        out: list[PolicyEvaluation] = []
        for policy in self._policies[:evaluated]:
            ev = full.get(policy.name)
            if ev is None:
                if seam is Seam.PRE_MODEL:
                    applies = policy.model is not None
                else:
                    applies = policy.redirect_to is not None and policy.applies_to_tool(tool or "")
                ev = PolicyEvaluation(
                    policy.name,
                    seam,
                    PolicyResult.NOT_MATCHED if applies else PolicyResult.SKIPPED,
                )
            out.append(ev)
        return tuple(out)

    def _candidates(self, tool: str) -> tuple[ToolCallPolicy, ...]:
        """The policies that apply at POST to an emitted ``tool``, in order."""
        found = self._post_candidates.get(tool)
        if found is None:
            found = tuple(
                p for p in self._policies if p.redirect_to is not None and p.applies_to_tool(tool)
            )
            if len(self._post_candidates) < _MAX_CANDIDATE_TOOLS:
                self._post_candidates[tool] = found
        return found

    def _resolve(
        self, ctx: DispatchContext
    ) -> tuple[ModelConfig, WinnerSource, ContainedError | None]:
        if self._resolver is None:
            return self._default, WinnerSource.DEFAULT, None
        try:
            chosen = self._resolver(ctx)
            if isinstance(chosen, str) and chosen:
                chosen = ModelConfig(chosen)
            if chosen is not None and not isinstance(chosen, ModelConfig):
                raise TypeError(
                    f"role_model_resolver returned {type(chosen).__name__}, "
                    "expected ModelConfig, str or None"
                )
        except Exception as exc:
            return self._default, WinnerSource.DEFAULT, contained_error("resolver", exc)
        if chosen is None:
            return self._default, WinnerSource.DEFAULT, None
        return chosen, WinnerSource.RESOLVER, None

    # -- POST seam --------------------------------------------------------

    def post_model(
        self,
        ctx: DispatchContext,
        calls: Sequence[ToolCall],
        *,
        runnable: Collection[str] | None = None,
    ) -> PostModelResult:
        """Rewrite the emitted tool calls; returns the calls to dispatch.

        With no emitted call the seam does nothing (its record is empty).
        ``runnable``: the tools the framework lets run, when it refuses any
        other (a final call outside it is recorded ``refused``); None: every
        call is handed to the tool runner.
        """
        calls = tuple(calls)
        obs = self._observer
        handle = obs.start_post_model(ctx, calls)
        start = time.perf_counter()
        records = tuple(self._dispatch(ctx, i, call, runnable) for i, call in enumerate(calls))
        result = PostModelResult(
            tuple(r.final for r in records), records, time.perf_counter() - start
        )
        obs.end_post_model(handle, result)
        return result

    def _dispatch(
        self,
        ctx: DispatchContext,
        index: int,
        call: ToolCall,
        runnable: Collection[str] | None = None,
    ) -> DispatchRecord:
        obs = self._observer
        handle = obs.start_dispatch(ctx, index, call)
        start = time.perf_counter()
        winner: ToolCallPolicy | None = None
        guard = GuardResult.NONE
        transformed = False
        evaluations: list[PolicyEvaluation] | tuple[()] = ()
        errors: list[ContainedError] | tuple[()] = ()
        rewrite = call
        passed_over = _NOTHING
        if self._policies:
            trail = _Trail(Seam.POST_MODEL, self._warned)
            evaluations, errors = trail.evaluations, trail.errors
            for policy in trail.matching(self._candidates(call.name), ctx):
                verdict = GuardResult.NONE
                guard_err: ContainedError | None = None
                if policy.guard is not None:
                    try:
                        passed = trail.predicate(policy, "guard", policy.guard, ctx)
                        verdict = GuardResult.PASSED if passed else GuardResult.FAILED
                    except Exception as exc:
                        verdict = GuardResult.ERROR
                        guard_err = contained_error("guard", exc, policy.name)
                        errors.append(guard_err)
                trail.note(
                    policy,
                    PolicyResult.ERROR if guard_err is not None else PolicyResult.MATCHED,
                    verdict,
                    guard_err,
                )
                guard = verdict
                if verdict in (GuardResult.PASSED, GuardResult.NONE):
                    winner = policy
                    break
            passed_over = self._passed_over(Seam.POST_MODEL, trail, winner, call.name)
            if winner is not None:
                assert winner.redirect_to is not None
                args: Mapping[str, Any] = call.args
                if winner.args_transform is not None:
                    try:
                        new_args = winner.args_transform(dict(call.args), ctx)
                        if not isinstance(new_args, Mapping):
                            raise TypeError(
                                f"args_transform returned {type(new_args).__name__}, "
                                "expected a mapping"
                            )
                        args = dict(new_args)
                        transformed = True
                    except Exception as exc:
                        errors.append(contained_error("args_transform", exc, winner.name))
                rewrite = ToolCall(call.id, winner.redirect_to, args)

        adopter_override = False
        if self._callback is not None:
            try:
                out = self._callback(rewrite, ctx)
                if out is not None and not isinstance(out, ToolCall):
                    raise TypeError(
                        f"on_tool_call_dispatch returned {type(out).__name__}, "
                        "expected ToolCall or None"
                    )
            except Exception as exc:
                out = None
                errors = [*errors, contained_error("callback", exc)]
            if out is not None and (out.name != rewrite.name or out.args != rewrite.args):
                adopter_override = True
                rewrite = ToolCall(call.id, out.name, out.args)

        palette = PaletteVerdict.KEPT
        final = rewrite
        if rewrite.name != call.name and rewrite.name not in ctx.resolved_tool_names:
            palette = PaletteVerdict.DROPPED
            final = call
            _log.warning(
                "palette gate dropped redirect of %s to unrouted tool %s (policy %s, call %s)",
                call.name,
                rewrite.name,
                winner.name if winner is not None else None,
                call.id,
            )
        if adopter_override:
            source = WinnerSource.ADOPTER
        elif winner is not None:
            source = WinnerSource.POLICY
        else:
            source = WinnerSource.NONE
        record = DispatchRecord(
            index=index,
            emitted=call,
            final=final,
            policy=None if winner is None else winner.name,
            redirect_to=None if winner is None else winner.redirect_to,
            guard=guard,
            args_transformed=transformed,
            adopter_override=adopter_override,
            palette=palette,
            source=source,
            evaluations=tuple(evaluations),
            errors=tuple(errors),
            duration_s=time.perf_counter() - start,
            passed_over=passed_over,
            refused=runnable is not None and final.name not in runnable,
        )
        obs.end_dispatch(handle, record)
        return record
