"""A framework middleware's decision as telemetry: in the span families of seamscope's own.

An adapter reads what a framework's own middleware decided from its effect
(the request before and after it, the state it rewrote) and hands the
:class:`~seamscope.decisions.records.MiddlewareDecision` to the observer.
Each kind is recorded as a span of the family seamscope's own decisions of
that kind use, joined to the current context (the iteration), with the
middleware's name and reason on it:

=====================  =========================  ==================================
kind                   span                       what it says
=====================  =========================  ==================================
``tool_selection``     ``seamscope.stage``        tools before (``selection.offered``)
``tool_search``                                   and after (``selection.selected``),
                                                  ``stage.dropped``, the reason
``model_route``        ``seamscope.seam.pre_model``  ``winner_source`` ``router`` /
``model_fallback``                                ``fallback``, the chosen model, the
                                                  failed models and error types
``tool_call_blocked``  ``seamscope.dispatch``     one per blocked call:
                                                  ``dispatch.blocked`` and the reason
``compaction``         ``seamscope.compaction``   mechanism, tokens removed and kept,
                                                  cleared tool results, predicted terms
=====================  =========================  ==================================

Plus one ``seamscope.middleware.decisions`` count, the cost of the
middleware's own model calls (``seamscope.middleware.cost``, by decision
model) and a ``seamscope.middleware.decided`` log event per decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from seamscope.decisions.records import MiddlewareDecision, MiddlewareDecisionKind, Seam
from seamscope.telemetry import _attributes as a
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import log_event

__all__ = ["middleware_attributes", "record_middleware_decision"]

_K = MiddlewareDecisionKind
_SPAN_OF = {
    _K.TOOL_SELECTION: c.SPAN_STAGE,
    _K.TOOL_SEARCH: c.SPAN_STAGE,
    _K.MODEL_ROUTE: c.SPAN_SEAM_PRE_MODEL,
    _K.MODEL_FALLBACK: c.SPAN_SEAM_PRE_MODEL,
    _K.TOOL_CALL_BLOCKED: c.SPAN_DISPATCH,
    _K.COMPACTION: c.SPAN_COMPACTION,
}


def middleware_attributes(decision: MiddlewareDecision, limits: a.Limits) -> a.Attributes:
    """The attributes of a middleware decision's span (a blocked call's own
    tool name and id are added per call)."""
    d = decision
    attrs: a.Attributes = {
        c.ATTR_MIDDLEWARE_NAME: limits.text(d.middleware),
        c.ATTR_MIDDLEWARE_DECISION: d.kind.value,
        c.ATTR_MIDDLEWARE_FRAMEWORK: limits.text(d.framework),
        c.ATTR_MIDDLEWARE_REASON: limits.text(d.reason),
    }
    if d.conversation_id:
        attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = limits.text(d.conversation_id)
    if d.agent_name:
        attrs[c.ATTR_GEN_AI_AGENT_NAME] = limits.text(d.agent_name)
    if d.decision_model:
        attrs[c.ATTR_MIDDLEWARE_DECISION_MODEL] = limits.text(d.decision_model)
    if d.cost:
        attrs[c.ATTR_MIDDLEWARE_COST_USD] = float(d.cost)
    if d.kind in (_K.TOOL_SELECTION, _K.TOOL_SEARCH):
        kept = set(d.after)
        dropped = [name for name in d.before if name not in kept]
        attrs.update(
            {
                c.ATTR_STAGE_NAME: limits.text(d.middleware),
                c.ATTR_STAGE_OUTCOME: "select",
                c.ATTR_STAGE_REASON: limits.text(d.reason),
                c.ATTR_STAGE_DEGRADED: False,
                c.ATTR_STAGE_DROPPED: limits.names(dropped),
                c.ATTR_STAGE_DROPPED_COUNT: len(dropped),
                c.ATTR_SELECTION_OFFERED: limits.names(d.before),
                c.ATTR_SELECTION_SELECTED: limits.names(d.after),
                c.ATTR_SELECTION_OFFERED_COUNT: len(d.before),
                c.ATTR_SELECTION_SELECTED_COUNT: len(d.after),
            }
        )
    elif d.kind in (_K.MODEL_ROUTE, _K.MODEL_FALLBACK):
        source = "router" if d.kind is _K.MODEL_ROUTE else "fallback"
        attrs[c.ATTR_SEAM] = Seam.PRE_MODEL.value
        attrs[c.ATTR_SEAM_WINNER_SOURCE] = source
        if d.model:
            attrs[c.ATTR_SEAM_CHOSEN_MODEL] = limits.text(d.model)
            attrs[c.ATTR_GEN_AI_REQUEST_MODEL] = limits.text(d.model)
        if d.failed:
            attrs[c.ATTR_MIDDLEWARE_FAILED_MODELS] = limits.names([m for m, _ in d.failed])
            attrs[c.ATTR_MIDDLEWARE_ERROR_TYPES] = limits.names([e for _, e in d.failed])
    elif d.kind is _K.TOOL_CALL_BLOCKED:
        attrs[c.ATTR_DISPATCH_BLOCKED] = True
    elif d.kind is _K.COMPACTION and d.compaction is not None:
        k = d.compaction
        if k.predicted is not None:
            attrs.update(a.gate_attributes(k.predicted, limits))
            attrs.pop(c.ATTR_OFFLOAD_FIRE, None)  # nothing was gated: the middleware decided
            attrs.pop(c.ATTR_OFFLOAD_REASON_CODE, None)
            # one predicted net, the settlement's: the gate's terms minus the
            # compaction's own model call (compaction.cost_usd), each term named
            attrs[c.ATTR_OFFLOAD_NET_SAVING_USD] = float(k.predicted.net_saving - k.cost)
        attrs.update(
            {
                c.ATTR_OFFLOAD_ID: limits.text(k.compaction_id),
                c.ATTR_OFFLOAD_MECHANISM: k.mechanism.value,
                c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(k.model),
                c.ATTR_COMPACTION_REMOVED_TOKENS: float(k.removed_tokens),
                c.ATTR_COMPACTION_KEPT_TOKENS: float(k.kept_tokens),
                c.ATTR_COMPACTION_MESSAGES_REMOVED: int(k.messages_removed),
                c.ATTR_COMPACTION_COST_USD: float(k.cost),
            }
        )
        if k.tool_call_ids:
            attrs[c.ATTR_COMPACTION_TOOL_CALL_IDS] = limits.names(k.tool_call_ids)
        tools = {call.name for call in d.calls}
        if len(tools) == 1:  # the tool whose output it took out (one tool's outputs)
            attrs[c.ATTR_GEN_AI_TOOL_NAME] = limits.text(tools.pop())
    return attrs


def record_middleware_decision(
    decision: MiddlewareDecision,
    *,
    tracer: trace.Tracer | None,
    limits: a.Limits,
    count: Callable[[dict[str, str]], None] | None,
    spend: Callable[[float, dict[str, str]], None] | None = None,
) -> object:
    """Record one decision; return the (first) span's context, or None.

    ``tracer`` None: spans are off. ``count``: adds one to the decisions
    counter with the given attributes; ``spend``: adds an amount to the
    cost counter (None: metrics are off).
    """
    d = decision
    if not isinstance(d, MiddlewareDecision):
        raise TypeError(f"not a MiddlewareDecision: {type(d).__name__}")
    if count is not None:
        count({c.ATTR_MIDDLEWARE_NAME: d.middleware, c.ATTR_MIDDLEWARE_DECISION: d.kind.value})
    if spend is not None and d.cost > 0:
        spend(
            float(d.cost),
            {
                c.ATTR_MIDDLEWARE_NAME: d.middleware,
                c.ATTR_GEN_AI_REQUEST_MODEL: d.decision_model or "unknown",
            },
        )
    log_event(
        "info",
        c.LOG_MIDDLEWARE_DECIDED,
        middleware=limits.text(d.middleware),
        decision=d.kind.value,
        reason=limits.text(d.reason),
        **_log_fields(d, limits),
    )
    if tracer is None:
        return None
    attrs = middleware_attributes(d, limits)
    end = time.time_ns()
    start = d.start_time_ns if d.start_time_ns is not None else end - int(d.duration_s * 1e9)
    start = min(start, end)
    # a block is one span per call that never ran, each naming its call
    per_span = (
        [
            {
                **attrs,
                c.ATTR_GEN_AI_TOOL_NAME: limits.text(call.name),
                c.ATTR_DISPATCH_EMITTED_TOOL: limits.text(call.name),
                c.ATTR_GEN_AI_TOOL_CALL_ID: limits.text(call.id),
            }
            for call in d.calls
        ]
        if d.kind is _K.TOOL_CALL_BLOCKED and d.calls
        else [attrs]
    )
    link = None
    for span_attrs in per_span:
        span = tracer.start_span(
            _SPAN_OF[d.kind], kind=SpanKind.INTERNAL, attributes=span_attrs, start_time=start
        )
        span.end(end_time=end)
        if link is None:
            link = span.get_span_context()
    return link


def _log_fields(d: MiddlewareDecision, limits: a.Limits) -> dict[str, Any]:
    if d.kind in (_K.TOOL_SELECTION, _K.TOOL_SEARCH):
        kept = set(d.after)
        return {"dropped": limits.names([n for n in d.before if n not in kept])}
    if d.kind in (_K.MODEL_ROUTE, _K.MODEL_FALLBACK):
        return {"model": d.model, "failed_models": [m for m, _ in d.failed]}
    if d.kind is _K.TOOL_CALL_BLOCKED:
        return {"tools": limits.names([call.name for call in d.calls])}
    if d.compaction is not None:
        k = d.compaction
        return {
            "mechanism": k.mechanism.value,
            "compaction_id": limits.text(k.compaction_id),
            "removed_tokens": float(k.removed_tokens),
        }
    return {}
