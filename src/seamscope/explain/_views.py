"""One trace's spans → decision views: a turn, its iterations and their decisions.

The views are plain dicts: one model serves the text trees and
``--format json``. Only the telemetry contract is read (span names and
attributes from the conventions module), so any exporter's OTLP-JSON of
seamscope spans can be explained. Attributes are decoded as they are read
(:class:`~seamscope.explain._otlp.Values`): a value that cannot be read as
the view needs it is absent in the view, and named as a problem of its
span, so a file with odd types renders like any other.

A trace is assembled first (:func:`assemble`): spans that repeat a span id
are dropped and counted, spans whose parent chain never reaches a root (a
span that is its own parent, a cycle) are named and skipped, and the rest
are walked without recursion, whatever their depth.

A framework middleware's decision (a span with ``seamscope.middleware.name``,
in the span family of its kind: ``seamscope.stage``, ``.seam.pre_model``,
``.dispatch``, ``.compaction``) is never read as one of seamscope's own: it
is a ``"middleware"`` entry of the iteration it belongs to (of the turn,
when it precedes every iteration).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from seamscope.explain._otlp import Problem, SpanRecord, Values
from seamscope.telemetry import conventions as c

__all__ = [
    "TraceTree",
    "assemble",
    "merge",
    "middleware_story",
    "number",
    "settlements",
    "shadow_settlements",
    "span_rows",
    "tool_names",
    "tool_story",
    "turn_view",
]

_EVENTS = (c.EVENT_POLICY_EVALUATED, c.EVENT_ADOPTER_ERROR)
_GENAI_CHAT = "chat"
_GENAI_TOOL = "execute_tool"
_GATE = c.OffloadMechanism.SEAMSCOPE_GATE.value
_MIDDLEWARE = c.ATTR_MIDDLEWARE_NAME  # present on every framework middleware's decision span
_MAX_TOOL_NAMES = 64  # names of one attribute considered for "did you mean"


# --------------------------------------------------------------------------
# Normalising values.
# --------------------------------------------------------------------------


def number(value: Any) -> int | float | None:
    """``value`` when it is a finite number (not a bool), else None."""
    if type(value) is int:
        return value
    if type(value) is float and math.isfinite(value):
        return value
    return None


def _values(span: SpanRecord, tree: TraceTree) -> Values:
    """The span's attributes; a value that cannot be read is a problem of the trace."""
    return Values(span.attributes, tree.problems, span)


# --------------------------------------------------------------------------
# Assembling a trace.
# --------------------------------------------------------------------------


@dataclass(slots=True)
class TraceTree:
    """One trace's spans, merged by span id, in walk order with their depth."""

    order: list[tuple[int, SpanRecord]] = field(default_factory=list)
    kids: dict[str, list[SpanRecord]] = field(default_factory=dict)
    duplicates: int = 0
    problems: list[Problem] = field(default_factory=list)


_start = attrgetter("start_ns", "span_id")


def merge(records: Iterable[SpanRecord]) -> tuple[dict[str, SpanRecord], int]:
    """``records`` (one trace) by span id, the first copy of a repeated id kept
    (a re-sent batch, a collector's replay), and how many copies were dropped."""
    spans: dict[str, SpanRecord] = {}
    duplicates = 0
    for span in records:
        if span.span_id in spans:
            duplicates += 1
        else:
            spans[span.span_id] = span
    return spans, duplicates


def assemble(records: Iterable[SpanRecord]) -> TraceTree:
    """Merge ``records`` (one trace) by span id and walk them from their roots.

    A span whose parent is not in the trace is a root. The first copy of a
    repeated span id is kept. Spans left unreached (their parent chain is a
    cycle) are reported as problems, with the line they were read from.
    """
    tree = TraceTree()
    spans, tree.duplicates = merge(records)
    roots: list[SpanRecord] = []
    kids: dict[str, list[SpanRecord]] = {}
    for span in spans.values():
        parent = span.parent_span_id
        if parent is None or parent not in spans:
            roots.append(span)
        else:
            kids.setdefault(parent, []).append(span)
    for group in kids.values():
        group.sort(key=_start)
    roots.sort(key=_start, reverse=True)
    stack: list[tuple[int, SpanRecord]] = [(0, r) for r in roots]
    while stack:
        depth, span = stack.pop()
        tree.order.append((depth, span))
        children = kids.get(span.span_id)
        if children:
            below = depth + 1
            stack.extend([(below, k) for k in reversed(children)])
    tree.kids = kids
    if len(tree.order) < len(spans):
        reached = {s.span_id for _, s in tree.order}
        for span in spans.values():
            if span.span_id not in reached:
                why = (
                    "is its own parent"
                    if span.parent_span_id == span.span_id
                    else "is in or under a parent cycle"
                )
                tree.problems.append(Problem(span.line, f"{why}; span skipped", span.span_id))
    return tree


# --------------------------------------------------------------------------
# Decision views.
# --------------------------------------------------------------------------


def _events(
    span: SpanRecord, tree: TraceTree, names: tuple[str, ...] = _EVENTS
) -> Iterator[tuple[str, Values]]:
    events = span.events
    if type(events) is not list:
        return
    for event in events:
        if type(event) is not dict:
            continue
        name = event.get("name")
        if name not in names:
            continue
        items = event.get("attributes") or []
        attrs = dict(_pairs(items)) if type(items) is list else {}
        yield name, Values(attrs, tree.problems, span, what=f"event {name} attribute")


def _skipped(span: SpanRecord, tree: TraceTree) -> dict[str, Any] | None:
    """Why an adapter made no decision for this iteration's model call (its
    planning failed: no selection, no policy), from the iteration's
    ``seamscope.decisions.skipped`` event; None when it made them."""
    events = span.events
    if type(events) is not list:
        return None
    for event in events:
        if type(event) is dict and event.get("name") == c.EVENT_DECISIONS_SKIPPED:
            items = event.get("attributes") or []
            a = Values(dict(_pairs(items)) if type(items) is list else {}, tree.problems, span)
            return {
                "error_type": a.text(c.ATTR_ERROR_TYPE) or "error",
                "message": a.text(c.ATTR_ERROR_MESSAGE),
            }
    return None


def _pairs(items: list[Any]) -> Iterator[tuple[Any, Any]]:
    for item in items:
        if type(item) is dict and type(item.get("key")) is str:
            yield item["key"], item.get("value")


def _policy_events(span: SpanRecord, tree: TraceTree) -> list[dict[str, Any]]:
    out = []
    for name, a in _events(span, tree):
        if name == c.EVENT_POLICY_EVALUATED:
            event = {
                "policy": a.text(c.ATTR_POLICY_NAME),
                "result": a.text(c.ATTR_POLICY_RESULT),
            }
            guard = a.text(c.ATTR_DISPATCH_GUARD)
            if guard is not None:
                event["guard"] = guard
            error = a.text(c.ATTR_ERROR_TYPE)
            if error is not None:
                event["error_type"] = error
            out.append(event)
        else:
            out.append(
                {
                    "adopter_error": a.text(c.ATTR_ADOPTER_SOURCE),
                    "policy": a.text(c.ATTR_POLICY_NAME),
                    "error_type": a.text(c.ATTR_ERROR_TYPE),
                }
            )
    return out


def _passed_over(a: Values) -> dict[str, Any]:
    """The evaluations a seam kept as counts: not matched, skipped, and the
    bounded names of those policies (in evaluation order)."""
    return {
        "not_matched": a.number(c.ATTR_POLICY_NOT_MATCHED_COUNT) or 0,
        "skipped": a.number(c.ATTR_POLICY_SKIPPED_COUNT) or 0,
        "names": a.texts(c.ATTR_POLICY_PASSED_OVER),
    }


def _stage(span: SpanRecord, tree: TraceTree) -> dict[str, Any]:
    a = _values(span, tree)
    return {
        "name": a.text(c.ATTR_STAGE_NAME),
        "index": a.number(c.ATTR_STAGE_INDEX),
        "outcome": a.text(c.ATTR_STAGE_OUTCOME),
        "reason": a.text(c.ATTR_STAGE_REASON) or "",
        "degraded": a.flag(c.ATTR_STAGE_DEGRADED),
        "dropped": a.texts(c.ATTR_STAGE_DROPPED),
        "forced_reinstated": a.flag(c.ATTR_STAGE_FORCED_REINSTATED),
        "error_type": a.text(c.ATTR_ERROR_TYPE),
    }


def _selection(span: SpanRecord, tree: TraceTree) -> dict[str, Any]:
    a = _values(span, tree)
    view: dict[str, Any] = {
        "offered": a.texts(c.ATTR_SELECTION_OFFERED),
        "selected": a.texts(c.ATTR_SELECTION_SELECTED),
        "dropped": a.texts(c.ATTR_SELECTION_DROPPED),
        "forced_tool": a.text(c.ATTR_SELECTION_FORCED_TOOL),
        "reinstated": a.flag(c.ATTR_SELECTION_REINSTATED),
        "stages": [
            _stage(s, tree)
            for s in tree.kids.get(span.span_id, ())
            if s.name == c.SPAN_STAGE and _MIDDLEWARE not in s.attributes
        ],
    }
    if a.flag(c.ATTR_SELECTION_REUSED):
        # only when set: the view of a trace without it is unchanged
        view["reused"] = True
    return view


def _dispatch(span: SpanRecord, tree: TraceTree) -> dict[str, Any]:
    a = _values(span, tree)
    return {
        "tool_call_id": a.text(c.ATTR_GEN_AI_TOOL_CALL_ID),
        "emitted_tool": a.text(c.ATTR_DISPATCH_EMITTED_TOOL),
        "policy": a.text(c.ATTR_POLICY_WINNER),
        "redirect_to": a.text(c.ATTR_DISPATCH_REDIRECT_TO),
        "guard": a.text(c.ATTR_DISPATCH_GUARD),
        "adopter_override": a.flag(c.ATTR_DISPATCH_ADOPTER_OVERRIDE),
        "palette_gate": a.text(c.ATTR_DISPATCH_PALETTE_GATE),
        "final_tool": a.text(c.ATTR_DISPATCH_FINAL_TOOL),
        "refused": a.flag(c.ATTR_DISPATCH_REFUSED),
        "evaluations": _policy_events(span, tree),
        "passed_over": _passed_over(a),
    }


def _gate(a: Values) -> dict[str, Any]:
    return {
        "fire": a.flag(c.ATTR_OFFLOAD_FIRE),
        "reason_code": a.text(c.ATTR_OFFLOAD_REASON_CODE),
        "reason": a.text(c.ATTR_OFFLOAD_REASON),
        "net_saving_usd": a.number(c.ATTR_OFFLOAD_NET_SAVING_USD),
        "reprefill_saving_usd": a.number(c.ATTR_OFFLOAD_REPREFILL_SAVING_USD),
        "stub_carry_cost_usd": a.number(c.ATTR_OFFLOAD_STUB_CARRY_COST_USD),
        "expected_recall_hop_cost_usd": a.number(c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD),
        "output_tokens": a.number(c.ATTR_OFFLOAD_OUTPUT_TOKENS),
        "horizon": a.number(c.ATTR_OFFLOAD_HORIZON),
        "recall_probability": a.number(c.ATTR_OFFLOAD_RECALL_PROBABILITY),
        "model": a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
        "pricing_source": a.text(c.ATTR_OFFLOAD_PRICING_SOURCE),
        "offload_id": a.text(c.ATTR_OFFLOAD_ID),
        "tool": a.text(c.ATTR_GEN_AI_TOOL_NAME),
        **_gate_extras(a),
    }


def _gate_extras(a: Values) -> dict[str, Any]:
    """Calibrated priors, a shadow verdict and whose offload the gate decided (a
    framework's, with its opt-in gate), shown only when the span has them."""
    out: dict[str, Any] = {}
    mechanism = a.text(c.ATTR_OFFLOAD_MECHANISM)
    if mechanism is not None:
        out["mechanism"] = mechanism
    version = a.text(c.ATTR_OFFLOAD_PRIORS_VERSION)
    if version is not None:
        out["prior_source"] = a.text(c.ATTR_OFFLOAD_PRIOR_SOURCE)
        out["priors_version"] = version
    shadow = a.text(c.ATTR_OFFLOAD_SHADOW_REASON_CODE)
    if shadow is not None:
        out["shadow"] = {
            "fire": a.flag(c.ATTR_OFFLOAD_SHADOW_FIRE),
            "net_saving_usd": a.number(c.ATTR_OFFLOAD_SHADOW_NET_SAVING_USD),
            "reason_code": shadow,
        }
    return out


def _middleware(span: SpanRecord, tree: TraceTree) -> dict[str, Any]:
    """A framework middleware's decision, read by the span family it is recorded in."""
    a = _values(span, tree)
    view: dict[str, Any] = {
        "span": span.name,
        "middleware": a.text(c.ATTR_MIDDLEWARE_NAME),
        "decision": a.text(c.ATTR_MIDDLEWARE_DECISION),
        "framework": a.text(c.ATTR_MIDDLEWARE_FRAMEWORK),
        "reason": a.text(c.ATTR_MIDDLEWARE_REASON) or "",
        "decision_model": a.text(c.ATTR_MIDDLEWARE_DECISION_MODEL),
    }
    name = span.name
    if name == c.SPAN_STAGE:
        view["offered"] = a.texts(c.ATTR_SELECTION_OFFERED)
        view["selected"] = a.texts(c.ATTR_SELECTION_SELECTED)
        view["dropped"] = a.texts(c.ATTR_STAGE_DROPPED)
    elif name == c.SPAN_SEAM_PRE_MODEL:
        view["winner_source"] = a.text(c.ATTR_SEAM_WINNER_SOURCE)
        view["model"] = a.text(c.ATTR_SEAM_CHOSEN_MODEL) or a.text(c.ATTR_GEN_AI_REQUEST_MODEL)
        view["failed_models"] = a.texts(c.ATTR_MIDDLEWARE_FAILED_MODELS)
        view["error_types"] = a.texts(c.ATTR_MIDDLEWARE_ERROR_TYPES)
    elif name == c.SPAN_DISPATCH:
        view["blocked"] = a.flag(c.ATTR_DISPATCH_BLOCKED)
        view["tool"] = a.text(c.ATTR_GEN_AI_TOOL_NAME) or a.text(c.ATTR_DISPATCH_EMITTED_TOOL)
        view["tool_call_id"] = a.text(c.ATTR_GEN_AI_TOOL_CALL_ID)
    elif name == c.SPAN_COMPACTION:
        view.update(
            {
                "compaction_id": a.text(c.ATTR_OFFLOAD_ID),
                "tool": a.text(c.ATTR_GEN_AI_TOOL_NAME),
                "mechanism": a.text(c.ATTR_OFFLOAD_MECHANISM),
                "model": a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
                "removed_tokens": a.number(c.ATTR_COMPACTION_REMOVED_TOKENS),
                "kept_tokens": a.number(c.ATTR_COMPACTION_KEPT_TOKENS),
                "tool_call_ids": a.texts(c.ATTR_COMPACTION_TOOL_CALL_IDS),
                "messages_removed": a.number(c.ATTR_COMPACTION_MESSAGES_REMOVED),
                "cost_usd": a.number(c.ATTR_COMPACTION_COST_USD),
                "net_saving_usd": a.number(c.ATTR_OFFLOAD_NET_SAVING_USD),
                "reprefill_saving_usd": a.number(c.ATTR_OFFLOAD_REPREFILL_SAVING_USD),
                "stub_carry_cost_usd": a.number(c.ATTR_OFFLOAD_STUB_CARRY_COST_USD),
                "expected_recall_hop_cost_usd": a.number(
                    c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD
                ),
                "horizon": a.number(c.ATTR_OFFLOAD_HORIZON),
                "recall_probability": a.number(c.ATTR_OFFLOAD_RECALL_PROBABILITY),
                "pricing_source": a.text(c.ATTR_OFFLOAD_PRICING_SOURCE),
            }
        )
    return view


def _iteration(
    span: SpanRecord, tree: TraceTree, chats: list[tuple[int, dict[str, Any]]]
) -> dict[str, Any]:
    """An iteration's view; its ``chat`` spans go to ``chats`` (start, view), for
    :func:`turn_view` to tell the agent's own call from a middleware's."""
    a = _values(span, tree)
    view: dict[str, Any] = {
        "index": a.number(c.ATTR_ITERATION_INDEX),
        "selection": None,
        "pre_model": None,
        "chat": None,
        "dispatches": [],
        "executed": [],
        "offload_gates": [],
        "middleware": [],
        "error_type": a.text(c.ATTR_ERROR_TYPE),
    }
    skipped = _skipped(span, tree)
    if skipped is not None:
        view["decisions_skipped"] = skipped
    for child in tree.kids.get(span.span_id, ()):
        name = child.name
        if _MIDDLEWARE in child.attributes:
            continue  # a framework middleware's decision: see turn_view
        if name == c.SPAN_SELECT_TOOLS:
            view["selection"] = _selection(child, tree)
            continue
        if name == c.SPAN_SEAM_POST_MODEL:
            view["dispatches"].extend(
                _dispatch(d, tree)
                for d in tree.kids.get(child.span_id, ())
                if d.name == c.SPAN_DISPATCH and _MIDDLEWARE not in d.attributes
            )
            continue
        a = _values(child, tree)
        if name == c.SPAN_DISPATCH and a.flag(c.ATTR_DISPATCH_STRUCTURED_OUTPUT):
            # a structured-output answer: consumed by the framework, never run
            view["dispatches"].append({**_dispatch(child, tree), "structured_output": True})
            continue
        if name == c.SPAN_SEAM_PRE_MODEL:
            view["pre_model"] = {
                "winner_source": a.text(c.ATTR_SEAM_WINNER_SOURCE),
                "policy": a.text(c.ATTR_POLICY_WINNER),
                "model": a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
                "evaluations": _policy_events(child, tree),
                "passed_over": _passed_over(a),
            }
        elif name == c.SPAN_OFFLOAD_GATE:
            view["offload_gates"].append(_gate(a))
        else:
            op = a.text(c.ATTR_GEN_AI_OPERATION_NAME)
            if op == _GENAI_CHAT:
                chat = {
                    "model": a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
                    "input_tokens": a.number(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS),
                    "output_tokens": a.number(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS),
                }
                chosen = a.text(c.ATTR_MODEL_CHOSEN_UNAVAILABLE)
                if chosen:  # the PRE seam chose a model not callable here
                    chat["chosen_unavailable"] = chosen
                failed = a.text(c.ATTR_ERROR_TYPE)
                if failed or child.status_code == "ERROR":  # the model call raised
                    chat["error_type"] = failed or "error"
                view["chat"] = chat
                chats.append((child.start_ns, chat))
            elif op == _GENAI_TOOL:
                view["executed"].append(
                    {
                        "tool": a.text(c.ATTR_GEN_AI_TOOL_NAME),
                        "tool_call_id": a.text(c.ATTR_GEN_AI_TOOL_CALL_ID),
                        "error_type": a.text(c.ATTR_ERROR_TYPE),
                    }
                )
    recalls = _recalls(span, tree)
    for executed in view["executed"]:
        found = recalls.get(executed["tool_call_id"])
        if found:
            executed["recalls"] = found
    return view


def _recalls(span: SpanRecord, tree: TraceTree) -> dict[str, list[dict[str, Any]]]:
    """The recalls the tool calls of an iteration made, by tool call id: the
    ``seamscope.offload.recalled`` events (on the iteration or one of its
    spans) that name their call (an offload, or a compaction's content read
    back: a Deep Agents eviction's file)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for holder in (span, *tree.kids.get(span.span_id, ())):
        for _, a in _events(holder, tree, (c.EVENT_OFFLOAD_RECALLED,)):
            call_id = a.text(c.ATTR_GEN_AI_TOOL_CALL_ID)
            offload_id = a.text(c.ATTR_OFFLOAD_ID)
            if call_id is None or offload_id is None:
                continue
            found.setdefault(call_id, []).append(
                {
                    "offload_id": offload_id,
                    "input_tokens": a.number(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS),
                }
            )
    return found


def _decision_calls(
    iterations: list[dict[str, Any]],
    chats: dict[int, list[tuple[int, dict[str, Any]]]],
    asked: list[tuple[dict[str, Any], SpanRecord, dict[str, Any]]],
) -> None:
    """Tell a middleware's own model calls from the agent's.

    A middleware that asks a model (a tool selector, a risk classifier) makes
    that call inside its hook, before it records its decision: a ``chat``
    span of the decision model that starts within the decision span's time
    is that decision's call (``decision_calls``), not the iteration's
    ``chat``, which is the agent's own call that remains (the last one).
    """
    position = {id(it): n for n, it in enumerate(iterations)}
    for owner, span, decision in asked:
        mine = chats[position[id(owner)]]
        calls = [
            (start, chat)
            for start, chat in mine
            if chat["model"] == decision["decision_model"] and span.start_ns <= start <= span.end_ns
        ]
        decision["decision_calls"] = [chat for _, chat in calls]
        for call in calls:
            mine.remove(call)
    for n, owner in enumerate(iterations):
        owner["chat"] = chats[n][-1][1] if chats[n] else None


def turn_view(
    tree: TraceTree, *, trace_id: str, turn: int, conversation_id: str | None
) -> dict[str, Any] | None:
    """The turn a trace holds, or None when it has no iteration span.

    A framework middleware's decision (a span with ``seamscope.middleware.name``)
    belongs to the nearest iteration above it, however deep the framework's
    own spans nest it; one above every iteration (a router deciding once per
    run) belongs to the turn (``"middleware"`` of the turn).
    """
    iterations: list[dict[str, Any]] = []
    top: list[dict[str, Any]] = []
    agent = None
    # the iteration whose subtree the walk is in (iterations do not nest)
    owner: dict[str, Any] | None = None
    owner_depth = -1
    chats: dict[int, list[tuple[int, dict[str, Any]]]] = {}  # by position of the iteration
    asked: list[tuple[dict[str, Any], SpanRecord, dict[str, Any]]] = []
    for depth, span in tree.order:
        if depth <= owner_depth:
            owner, owner_depth = None, -1
        if agent is None and c.ATTR_GEN_AI_AGENT_NAME in span.attributes:
            agent = _values(span, tree).text(c.ATTR_GEN_AI_AGENT_NAME)
        if span.name == c.SPAN_ITERATION:
            owner = _iteration(span, tree, chats.setdefault(len(iterations), []))
            owner_depth = depth
            iterations.append(owner)
        elif _MIDDLEWARE in span.attributes:
            decision = _middleware(span, tree)
            if owner is None:
                top.append(decision)
            else:
                owner["middleware"].append(decision)
                if decision["decision_model"]:
                    asked.append((owner, span, decision))
    if asked:
        _decision_calls(iterations, chats, asked)
    if not iterations:
        return None
    return {
        "trace_id": trace_id,
        "turn": turn,
        "conversation_id": conversation_id,
        "agent": agent,
        "start_ns": min(s.start_ns for _, s in tree.order),
        "middleware": top,
        "iterations": iterations,
    }


def settlements(tree: TraceTree) -> list[dict[str, Any]]:
    """The trace's settled offloads, in walk order."""
    out = []
    for _, span in tree.order:
        if span.name != c.SPAN_OFFLOAD_SETTLE:
            continue
        a = _values(span, tree)
        out.append(
            {
                "offload_id": a.text(c.ATTR_OFFLOAD_ID),
                # settle spans written before mechanisms existed were all the gate's
                "mechanism": a.text(c.ATTR_OFFLOAD_MECHANISM) or _GATE,
                "conversation_id": a.text(c.ATTR_GEN_AI_CONVERSATION_ID),
                "model": a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
                "outcome": a.text(c.ATTR_OFFLOAD_OUTCOME),
                "trigger": a.text(c.ATTR_OFFLOAD_SETTLE_TRIGGER),
                "predicted_net_saving_usd": a.number(c.ATTR_OFFLOAD_NET_SAVING_USD),
                "realized_savings_usd": a.number(c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD),
                "realized_costs_usd": a.number(c.ATTR_OFFLOAD_REALIZED_COSTS_USD),
                "realized_net_saving_usd": a.number(c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD),
                "cache_delta_usd": a.number(c.ATTR_OFFLOAD_CACHE_DELTA_USD),
                "turns_carried": a.number(c.ATTR_OFFLOAD_TURNS_CARRIED),
                "recalls": a.number(c.ATTR_OFFLOAD_RECALLS),
            }
        )
    return out


def shadow_settlements(tree: TraceTree) -> list[dict[str, Any]]:
    """The trace's shadow settlements (one per conversation settled), in walk order."""
    out = []
    for _, span in tree.order:
        if span.name != c.SPAN_OFFLOAD_SHADOW_SETTLE:
            continue
        a = _values(span, tree)
        out.append(
            {
                "conversation_id": a.text(c.ATTR_GEN_AI_CONVERSATION_ID),
                "trigger": a.text(c.ATTR_OFFLOAD_SETTLE_TRIGGER),
                "realized_net_saving_usd": a.number(c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD),
                "shadow_exact_net_saving_usd": a.number(c.ATTR_OFFLOAD_SHADOW_EXACT_NET_SAVING_USD),
                "shadow_expected_net_saving_usd": a.number(
                    c.ATTR_OFFLOAD_SHADOW_EXPECTED_NET_SAVING_USD
                ),
                "shadow_expected_range_usd": [
                    a.number(c.ATTR_OFFLOAD_SHADOW_EXPECTED_LOW_USD),
                    a.number(c.ATTR_OFFLOAD_SHADOW_EXPECTED_HIGH_USD),
                ],
                "basis": a.texts(c.ATTR_OFFLOAD_SHADOW_BASIS),
                "no_longer_fired": a.texts(c.ATTR_OFFLOAD_SHADOW_NO_LONGER_FIRED),
                "newly_fired": a.texts(c.ATTR_OFFLOAD_SHADOW_NEWLY_FIRED),
            }
        )
    return out


def span_rows(tree: TraceTree) -> list[dict[str, Any]]:
    """A trace as plain span rows in walk order (for a trace without decisions)."""
    return [
        {
            "depth": depth,
            "span_id": span.span_id,
            "parent_span_id": span.parent_span_id,
            "name": span.name,
            "start_ns": span.start_ns,
            "end_ns": span.end_ns,
            "status": span.status_code,
            "service": span.service,
            "attributes": dict(_values(span, tree).items()),
        }
        for depth, span in tree.order
    ]


# --------------------------------------------------------------------------
# One tool's story.
# --------------------------------------------------------------------------


_TOOL_LISTS = (c.ATTR_SELECTION_OFFERED, c.ATTR_SELECTION_SELECTED, c.ATTR_STAGE_DROPPED)
_TOOL_KEYS = (
    c.ATTR_DISPATCH_EMITTED_TOOL,
    c.ATTR_DISPATCH_REDIRECT_TO,
    c.ATTR_DISPATCH_FINAL_TOOL,
    c.ATTR_GEN_AI_TOOL_NAME,
    c.ATTR_SELECTION_FORCED_TOOL,
)


def tool_names(span: SpanRecord) -> set[str]:
    """The tool names a span mentions (offered, dropped, emitted, executed, ...)."""
    a = Values(span.attributes)
    names = {v for k in _TOOL_KEYS if (v := a.text(k)) is not None}
    for key in _TOOL_LISTS:
        names.update(a.texts(key)[:_MAX_TOOL_NAMES])
    return names


def _said(who: str, reason: str) -> str:
    return f"{who}: {reason}" if reason else who


def middleware_story(decisions: Sequence[dict[str, Any]], tool: str) -> list[str]:
    """What framework middlewares decided about ``tool``: narrowings that kept
    or dropped it, its calls they blocked, and its outputs they took out of
    the prompt (a compaction that names the tool)."""
    parts: list[str] = []
    for d in decisions:
        who = _name(d.get("middleware"))
        if d.get("span") == c.SPAN_STAGE:
            if tool in d.get("dropped", ()):
                parts.append(_said(f"dropped by {who}", d.get("reason") or ""))
            elif tool in d.get("selected", ()):
                parts.append(f"kept by {who}")
            elif d.get("offered") and tool not in d["offered"]:
                parts.append(f"not offered to {who}")
        elif d.get("blocked") and d.get("tool") == tool:
            call = f"call {d['tool_call_id']}" if d.get("tool_call_id") else "a call"
            reason = (d.get("reason") or "").rstrip(". ")
            parts.append(_said(f"{call} blocked by {who}", reason) + "; never ran")
        elif d.get("compaction_id") and d.get("tool") == tool:
            calls = ", ".join(d.get("tool_call_ids") or ()) or "?"
            parts.append(
                f"output of call {calls} taken out of the prompt by {who} (compaction "
                f"{d['compaction_id']}: {d.get('removed_tokens') or 0:g} tokens, "
                f"{d.get('kept_tokens') or 0:g} kept)"
            )
    return parts


def _name(value: Any) -> str:
    return value if type(value) is str else "?"


def tool_story(iteration: dict[str, Any], tool: str) -> str:
    """Why ``tool`` was or was not offered, selected, dispatched and run: by
    seamscope's stages and seams, then by the framework's own middlewares."""
    sel = iteration.get("selection") or {}
    offered = sel.get("offered", [])
    if sel and tool not in offered:
        return "not offered to the pipeline"
    parts: list[str] = []
    if sel:
        for stage in sel.get("stages", []):
            if tool in stage["dropped"]:
                parts.append(f"dropped by {stage['name']} ({stage['reason']})")
        if tool not in sel.get("selected", []):
            parts.append("not selected")
        elif sel.get("stages"):  # a pipeline without stages decided nothing
            if parts:
                parts.append("re-added later")
            parts.append("selected")
    decisions: Sequence[dict[str, Any]] = iteration.get("middleware", [])
    narrowed = [d for d in decisions if d.get("span") == c.SPAN_STAGE]
    blocked = [d for d in decisions if d.get("blocked") and d.get("tool") == tool]
    blocked_ids = {d.get("tool_call_id") for d in blocked}
    parts.extend(middleware_story(narrowed, tool))
    compacted = [d for d in decisions if d.get("compaction_id") and d.get("tool") == tool]
    parts.extend(middleware_story(compacted, tool))
    dispatches: Sequence[dict[str, Any]] = iteration.get("dispatches", [])
    emitted = [d for d in dispatches if d["emitted_tool"] == tool]
    targeted = [
        d
        for d in dispatches
        if d["emitted_tool"] != tool and (d["redirect_to"] == tool or d["final_tool"] == tool)
    ]
    for d in emitted:
        if d.get("structured_output"):
            parts.append("emitted as the structured answer; consumed by the framework, never run")
            continue
        if d.get("refused"):
            parts.append("emitted, but the framework refused it (not a tool it may run): never ran")
            continue
        if d["final_tool"] == tool:
            if d["palette_gate"] == "dropped":
                parts.append(
                    f"emitted; redirect to {d['redirect_to']} dropped by the palette gate, "
                    "ran as emitted"
                )
            elif d["tool_call_id"] in blocked_ids:
                parts.append("emitted")
            else:
                parts.append("emitted and dispatched")
        else:
            who = f"policy '{d['policy']}'" if d["policy"] else "the adopter callback"
            parts.append(f"emitted but redirected to {d['final_tool']} by {who}")
    for d in targeted:
        if d["final_tool"] == tool:
            who = f"policy '{d['policy']}'" if d["policy"] else "the adopter callback"
            parts.append(f"dispatched in place of {d['emitted_tool']} ({who})")
        else:
            parts.append(
                f"target of a redirect from {d['emitted_tool']} that the palette gate dropped"
            )
    parts.extend(middleware_story(blocked, tool))
    if not emitted and not targeted and not blocked and (sel or narrowed):
        parts.append("not called by the model")
    # a call a middleware answered inside the tool node has a span but never ran;
    # one the run cancelled before it answered is said as such
    fates = [e.get("error_type") for e in iteration.get("executed", []) if e["tool"] == tool]
    if any(f not in (c.TOOL_CALL_BLOCKED, c.TOOL_CALL_CANCELLED) for f in fates):
        parts.append("executed")
        for e in iteration.get("executed", []):
            for recall in e.get("recalls", ()) if e["tool"] == tool else ():
                parts.append(
                    f"call {e['tool_call_id']} recalled {recall['offload_id']} "
                    f"({recall.get('input_tokens') or 0:g} tokens read back)"
                )
    elif c.TOOL_CALL_CANCELLED in fates:
        parts.append("started, then cancelled when the run ended before it answered")
    return "; ".join(parts) or "no decision about it in this iteration"
