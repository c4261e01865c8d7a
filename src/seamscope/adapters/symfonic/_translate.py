"""symfonic's objects turned into seamscope's decision records and values.

Pure functions: each reads what symfonic handed a hook (an event, a policy,
a gate decision, a message list) or what the hooks gathered while symfonic
decided (the small records below), and returns a seamscope value. No I/O,
no OpenTelemetry, no state of this adapter; the only thing read besides the
arguments is symfonic's own ``MODEL_PRICING`` table, at call time.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from seamscope._internal import ContainedError, contained_error
from seamscope.adapters._kit import estimate_tokens
from seamscope.adapters.symfonic._symfonic import sym_gate as _sym_gate
from seamscope.decisions import (
    ModelPrice,
    ModelUsage,
    OffloadGateDecision,
    OffloadGateInputs,
    PricingTable,
    ToolCall,
)
from seamscope.decisions.records import (
    DispatchRecord,
    GuardResult,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyEvaluation,
    PolicyResult,
    PricingSource,
    Seam,
    WinnerSource,
)

__all__ = [
    "_REACT_NODE",
    "_RECALL_TOOL",
    "_PostOutcome",
    "_PreOutcome",
    "_Dispatch",
    "_Group",
    "_PostEval",
    "_PreRecorder",
    "_as_args",
    "_content_text",
    "_convert_decision",
    "_dispatch_record",
    "_final_calls",
    "_gate_inputs",
    "_model_name",
    "_post_outcome",
    "_pre_outcome",
    "_qualname",
    "_reason_code",
    "_recalled_tokens",
    "_skipped_post",
    "_stubs",
    "_truth",
    "_usage",
    "_wrappable",
    "symfonic_pricing",
]

_REACT_NODE = "react"
"""The node whose calls are the loop's iterations (and whose model calls are recorded)."""

_RECALL_TOOL = "recall_tool_result"
"""symfonic's tool that brings an offloaded output back (``mem_id=``)."""

_STUB_PREFIX = "[symfonic.tool_memory "
_STUB_MEM_ID = re.compile(r"archived as mem=(\S+)")


# --------------------------------------------------------------------------
# What the hooks gather while symfonic decides.
# --------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _PreRecorder:
    """Policy predicate and resolver calls during one ``resolve``."""

    owner: object
    results: dict[int, tuple[bool, BaseException | None]] = dataclasses.field(default_factory=dict)
    resolver_called: bool = False
    resolver_result: Any = None
    resolver_error: BaseException | None = None


@dataclasses.dataclass(eq=False)
class _PostEval:
    """One policy at symfonic's POST seam, for one emitted call."""

    index: int
    when_ok: bool
    matched: bool | None = None
    match_error: BaseException | None = None
    guard: bool | None = None
    guard_error: BaseException | None = None
    transform_called: bool = False
    transform_input: dict[str, Any] | None = None
    transform_error: BaseException | None = None


@dataclasses.dataclass(eq=False)
class _Group:
    """The policy evaluations of one emitted tool call (in symfonic's order)."""

    emitted: str
    started: float
    evals: list[_PostEval] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class _Dispatch:
    """One emitted call as the policies left it (our handler runs first)."""

    index: int
    emitted: ToolCall
    after_policy: ToolCall
    policy: Any
    guard: GuardResult
    transformed: bool
    policy_dropped: bool
    evaluations: tuple[PolicyEvaluation, ...]
    errors: tuple[ContainedError, ...]
    available: tuple[str, ...]
    duration_s: float
    # what the adopter's on_tool_call_dispatch raised (symfonic skipped it)
    adopter_errors: list[ContainedError] = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------
# Small values.
# --------------------------------------------------------------------------


def _wrappable(policy: Any) -> bool:
    """Whether ``policy`` is a symfonic ``ToolCallPolicy`` seamscope can follow."""
    return (
        dataclasses.is_dataclass(policy)
        and not isinstance(policy, type)
        and callable(getattr(policy, "match", None))
        and callable(getattr(type(policy), "matches_tool", None))
    )


def _qualname(exc: BaseException) -> str:
    return contained_error("x", exc).error_type


def _model_name(model: Any) -> str:
    name = getattr(model, "model_name", None)
    if isinstance(name, str) and name:
        return name
    text = str(model) if model is not None else ""
    return text or "unknown"


def _as_args(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    return {}


def _truth(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:
        return False


def _final_calls(state: Any) -> dict[str, ToolCall] | None:
    """The calls symfonic dispatches, by id: the last AIMessage the tool node reads."""
    if not isinstance(state, Mapping):
        return None
    messages = state.get("messages") or ()
    if not messages:
        return None
    calls = getattr(messages[-1], "tool_calls", None)
    if not isinstance(calls, list):
        return None
    out: dict[str, ToolCall] = {}
    for tc in calls:
        if isinstance(tc, Mapping):
            call_id = str(tc.get("id") or "")
            out[call_id] = ToolCall(call_id, str(tc.get("name") or ""), _as_args(tc.get("args")))
    return out


# --------------------------------------------------------------------------
# Usage, messages and the offload stubs.
# --------------------------------------------------------------------------


def _usage(raw: Any) -> ModelUsage | None:
    """The token usage symfonic reports on ``LLMEndEvent.usage`` (None when absent).

    symfonic flattens the AIMessage's ``usage_metadata``: cache reads and
    writes come as ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``. LangChain counts them inside
    ``input_tokens``; a provider that does not is corrected so the total
    covers them.
    """
    if not isinstance(raw, Mapping):
        return None

    def tokens(*keys: str) -> int:
        for key in keys:
            try:
                value = int(raw.get(key) or 0)
            except (TypeError, ValueError):
                continue
            if value:
                return max(0, value)
        return 0

    read = tokens("cache_read_input_tokens", "cache_read_tokens")
    write = tokens("cache_creation_input_tokens", "cache_creation_tokens")
    return ModelUsage(
        max(tokens("input_tokens"), read + write), tokens("output_tokens"), read, write
    )


def _content_text(content: Any) -> str:
    """A message content as text, the way symfonic measures it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(str(block))
        return "".join(parts)
    return "" if content is None else str(content)


def _recalled_tokens(result: Any) -> float:
    """The tokens a recall tool result puts back into the prompt (chars / 4, unrounded)."""
    return estimate_tokens(_content_text(result))


def _stubs(messages: Any) -> Iterator[tuple[str, str, str]]:
    """(tool_call_id, mem_id, stub text) of every ToolMessage that is symfonic's
    offload stub.

    symfonic replaces an offloaded output by its stub only in what it sends
    to the model, keeping the ``tool_call_id``; the stub names the memory id
    its ``recall_tool_result`` tool takes.
    """
    for message in tuple(messages or ()):
        if getattr(message, "type", None) != "tool":
            continue
        content = getattr(message, "content", None)
        if not isinstance(content, str) or not content.startswith(_STUB_PREFIX):
            continue
        call_id = str(getattr(message, "tool_call_id", "") or "")
        found = _STUB_MEM_ID.search(content)
        if call_id and found is not None:
            yield call_id, found.group(1), content


# --------------------------------------------------------------------------
# The offload gate.
# --------------------------------------------------------------------------


def _gate_inputs(inputs: Any) -> OffloadGateInputs:
    """symfonic's ``OffloadGateInputs`` in seamscope's shape."""
    return OffloadGateInputs(
        output_tokens=float(inputs.output_tokens),
        horizon=int(inputs.horizon),
        recall_probability=float(inputs.recall_probability),
        model_name=str(inputs.model_name),
        large_offload_threshold_tokens=int(inputs.large_offload_threshold_tokens),
        stub_tokens=int(inputs.stub_tokens),
        recall_input_tokens=int(inputs.recall_input_tokens),
        recall_output_tokens=int(inputs.recall_output_tokens),
    )


def _reason_code(inputs: Any, decision: Any) -> OffloadReasonCode:
    """The closed reason of a symfonic gate decision, from its own branches."""
    if decision is not None and bool(getattr(decision, "fire", False)):
        return OffloadReasonCode.NET_POSITIVE
    if float(inputs.output_tokens) < float(inputs.large_offload_threshold_tokens):
        return OffloadReasonCode.BELOW_THRESHOLD
    table = getattr(_sym_gate, "MODEL_PRICING", None)
    if isinstance(table, Mapping) and table.get(inputs.model_name) is None:
        return OffloadReasonCode.UNPRICED_MODEL
    return OffloadReasonCode.NET_NOT_POSITIVE


def _convert_decision(
    inputs: Any, decision: Any, offload_id: str | None, reason: str | None = None
) -> OffloadGateDecision:
    """symfonic's gate decision in seamscope's shape; figures exactly as symfonic's.

    USD figures are symfonic's floats; ``net_saving`` is that float as a
    Decimal. ``horizon`` and ``recall_probability`` are clamped as symfonic
    clamps them.
    """
    code = _reason_code(inputs, decision)
    priced = code in (OffloadReasonCode.NET_POSITIVE, OffloadReasonCode.NET_NOT_POSITIVE)
    net = float(getattr(decision, "net_saving_usd", 0.0) or 0.0)
    return OffloadGateDecision(
        fire=bool(getattr(decision, "fire", False)),
        net_saving_usd=net,
        reprefill_saving_usd=float(getattr(decision, "reprefill_saving_usd", 0.0) or 0.0),
        stub_carry_cost_usd=float(getattr(decision, "stub_carry_cost_usd", 0.0) or 0.0),
        expected_recall_hop_cost_usd=float(
            getattr(decision, "expected_recall_hop_cost_usd", 0.0) or 0.0
        ),
        reason=reason if reason is not None else str(getattr(decision, "reason", "")),
        reason_code=code,
        pricing_source=PricingSource.SYMFONIC if priced else PricingSource.NONE,
        model_name=str(inputs.model_name),
        output_tokens=float(inputs.output_tokens),
        horizon=max(0, int(inputs.horizon)),
        recall_probability=max(0.0, min(1.0, float(inputs.recall_probability))),
        stub_tokens=int(inputs.stub_tokens),
        net_saving=Decimal(repr(net)),
        offload_id=offload_id,
        threshold_tokens=int(inputs.large_offload_threshold_tokens),
        recall_input_tokens=int(inputs.recall_input_tokens),
        recall_output_tokens=int(inputs.recall_output_tokens),
    )


def symfonic_pricing(*, use_genai_prices: bool = True) -> PricingTable:
    """symfonic's ``MODEL_PRICING`` as a seamscope :class:`PricingTable`.

    Every row becomes an override (input, output, cache-read and
    cache-write rates exactly as symfonic lists them, USD per 1M tokens),
    so the ledger prices a model call with the prices the offload gate
    decided with. symfonic's 1-hour cache-write rate has no counterpart
    and is left out; a row seamscope cannot read is skipped. Models
    symfonic does not list fall back to genai-prices unless
    ``use_genai_prices`` is False. The table is read once, when called.
    """
    overrides: dict[str, ModelPrice] = {}
    table = getattr(_sym_gate, "MODEL_PRICING", None)
    if isinstance(table, Mapping):
        for model, row in table.items():
            if not isinstance(model, str) or not model or not isinstance(row, Mapping):
                continue
            try:
                overrides[model] = ModelPrice(
                    row["input"], row["output"], row.get("cache_read"), row.get("cache_write")
                )
            except (LookupError, TypeError, ValueError, ArithmeticError):
                continue
    return PricingTable(overrides, use_genai_prices=use_genai_prices)


# --------------------------------------------------------------------------
# The PRE seam: symfonic's policy walk in ``resolve``.
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _PreOutcome:
    """symfonic's PRE-seam walk as seamscope records it."""

    evaluations: tuple[PolicyEvaluation, ...]
    errors: tuple[ContainedError, ...]
    winner: Any
    source: WinnerSource


def _pre_outcome(
    policies: Sequence[Any], rec: _PreRecorder, resolve_error: BaseException | None
) -> _PreOutcome:
    """The PRE seam's evaluations, errors, winning policy and winner source.

    ``rec`` holds what the wrapped predicates and resolver saw during one
    ``resolve``; ``resolve_error`` is what ``resolve`` raised, if anything.
    """
    evaluations: list[PolicyEvaluation] = []
    errors: list[ContainedError] = []
    winner: Any = None
    for index, policy in enumerate(policies):
        if not _wrappable(policy):
            continue
        if getattr(policy, "model", None) is None:
            evaluations.append(PolicyEvaluation(policy.name, Seam.PRE_MODEL, PolicyResult.SKIPPED))
            continue
        outcome = rec.results.get(index)
        if outcome is None:
            break  # not evaluated: an earlier policy won (or resolve stopped)
        matched, exc = outcome
        if exc is not None:
            err = contained_error("match", exc, policy.name)
            errors.append(err)
            evaluations.append(
                PolicyEvaluation(policy.name, Seam.PRE_MODEL, PolicyResult.ERROR, error=err)
            )
            continue
        evaluations.append(
            PolicyEvaluation(
                policy.name,
                Seam.PRE_MODEL,
                PolicyResult.MATCHED if matched else PolicyResult.NOT_MATCHED,
            )
        )
        if matched:
            winner = policy
            break
    if winner is not None:
        source = WinnerSource.POLICY
    elif rec.resolver_called and rec.resolver_error is None and rec.resolver_result is not None:
        source = WinnerSource.RESOLVER
    else:
        source = WinnerSource.DEFAULT
    if resolve_error is not None:
        errors.append(contained_error("resolver", rec.resolver_error or resolve_error))
    return _PreOutcome(tuple(evaluations), tuple(errors), winner, source)


# --------------------------------------------------------------------------
# The POST seam: symfonic's policy walk for each emitted call.
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _PostOutcome:
    """symfonic's POST-seam walk for one emitted call, as seamscope records it."""

    evaluations: tuple[PolicyEvaluation, ...] = ()
    errors: tuple[ContainedError, ...] = ()
    winner: Any = None
    guard: GuardResult = GuardResult.NONE
    transformed: bool = False
    transform_input: dict[str, Any] | None = None


def _post_outcome(policies: Sequence[Any], group: _Group | None) -> _PostOutcome:
    """symfonic's POST-seam walk for one call, as seamscope records it."""
    if group is None:
        return _PostOutcome()
    by_index = {ev.index: ev for ev in group.evals}
    evaluations: list[PolicyEvaluation] = []
    errors: list[ContainedError] = []
    winner: Any = None
    guard = GuardResult.NONE
    winner_eval: _PostEval | None = None
    for index, policy in enumerate(policies):
        if not _wrappable(policy):
            continue
        name = policy.name
        if getattr(policy, "redirect_to", None) is None:
            evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.SKIPPED))
            continue
        ev = by_index.get(index)
        if ev is None:
            break
        if not ev.when_ok:
            evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.SKIPPED))
            continue
        if ev.match_error is not None:
            err = contained_error("match", ev.match_error, name)
            errors.append(err)
            evaluations.append(
                PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.ERROR, error=err)
            )
            continue
        if not ev.matched:
            evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.NOT_MATCHED))
            continue
        if ev.guard_error is not None:
            err = contained_error("guard", ev.guard_error, name)
            errors.append(err)
            guard = GuardResult.ERROR
            evaluations.append(
                PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.ERROR, GuardResult.ERROR, err)
            )
            continue
        if ev.guard is None:
            verdict = GuardResult.NONE
        else:
            verdict = GuardResult.PASSED if ev.guard else GuardResult.FAILED
        guard = verdict
        evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.MATCHED, verdict))
        if verdict is not GuardResult.FAILED:
            winner, winner_eval = policy, ev
            break
    transformed = False
    transform_input: dict[str, Any] | None = None
    if winner_eval is not None and winner_eval.transform_called:
        transform_input = winner_eval.transform_input
        if winner_eval.transform_error is None:
            transformed = True
        else:
            errors.append(
                contained_error("args_transform", winner_eval.transform_error, winner.name)
            )
    return _PostOutcome(
        tuple(evaluations), tuple(errors), winner, guard, transformed, transform_input
    )


def _skipped_post(policies: Sequence[Any]) -> tuple[PolicyEvaluation, ...]:
    """The POST evaluations when no redirect policy applies: symfonic skipped every policy."""
    return tuple(
        PolicyEvaluation(p.name, Seam.POST_MODEL, PolicyResult.SKIPPED)
        for p in policies
        if _wrappable(p) and getattr(p, "redirect_to", None) is None
    )


def _dispatch_record(
    d: _Dispatch, final: ToolCall | None, adopter_drop: str | None
) -> DispatchRecord:
    """One emitted call's dispatch decision, once symfonic's tool node shows the outcome.

    ``final`` is the call symfonic dispatches (None: as the policies left
    it); ``adopter_drop`` the target of an adopter rewrite symfonic's
    palette gate dropped, if any.
    """
    after = d.after_policy
    if final is None:
        final = after
    adopter_override = adopter_drop is not None or (
        final.name != after.name or dict(final.args) != dict(after.args)
    )
    palette = (
        PaletteVerdict.DROPPED
        if d.policy_dropped or adopter_drop is not None
        else PaletteVerdict.KEPT
    )
    if adopter_override:
        source = WinnerSource.ADOPTER
    elif d.policy is not None:
        source = WinnerSource.POLICY
    else:
        source = WinnerSource.NONE
    return DispatchRecord(
        index=d.index,
        emitted=d.emitted,
        final=final,
        policy=None if d.policy is None else d.policy.name,
        redirect_to=None if d.policy is None else d.policy.redirect_to,
        guard=d.guard,
        args_transformed=d.transformed,
        adopter_override=adopter_override,
        palette=palette,
        source=source,
        evaluations=d.evaluations,
        errors=(*d.errors, *d.adopter_errors),
        duration_s=d.duration_s,
    )
