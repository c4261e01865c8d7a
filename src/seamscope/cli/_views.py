"""Spans → decision views: turns, iterations and their decisions, as plain dicts.

One model serves the text trees and ``--format json``. Only the telemetry
contract is read (span names and attributes from the conventions module),
so any exporter's OTLP-JSON of seamscope spans can be explained.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from seamscope.cli._otlp import SpanRecord
from seamscope.telemetry import conventions as c

__all__ = ["build_report", "tool_story"]

_GENAI_CHAT = "chat"
_GENAI_TOOL = "execute_tool"


def _children(spans: Sequence[SpanRecord]) -> dict[str | None, list[SpanRecord]]:
    ids = {s.span_id for s in spans}
    kids: dict[str | None, list[SpanRecord]] = defaultdict(list)
    for s in spans:
        parent = s.parent_span_id if s.parent_span_id in ids else None
        kids[parent].append(s)
    for group in kids.values():
        group.sort(key=lambda s: (s.start_ns, s.span_id))
    return kids


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _policy_events(span: SpanRecord) -> list[dict[str, Any]]:
    out = []
    for name, attrs in span.events:
        if name == c.EVENT_POLICY_EVALUATED:
            event = {
                "policy": attrs.get(c.ATTR_POLICY_NAME),
                "result": attrs.get(c.ATTR_POLICY_RESULT),
            }
            if c.ATTR_DISPATCH_GUARD in attrs:
                event["guard"] = attrs[c.ATTR_DISPATCH_GUARD]
            if c.ATTR_ERROR_TYPE in attrs:
                event["error_type"] = attrs[c.ATTR_ERROR_TYPE]
            out.append(event)
        elif name == c.EVENT_ADOPTER_ERROR:
            out.append(
                {
                    "adopter_error": attrs.get(c.ATTR_ADOPTER_SOURCE),
                    "policy": attrs.get(c.ATTR_POLICY_NAME),
                    "error_type": attrs.get(c.ATTR_ERROR_TYPE),
                }
            )
    return out


def _stage(span: SpanRecord) -> dict[str, Any]:
    a = span.attributes
    return {
        "name": a.get(c.ATTR_STAGE_NAME),
        "index": a.get(c.ATTR_STAGE_INDEX),
        "outcome": a.get(c.ATTR_STAGE_OUTCOME),
        "reason": a.get(c.ATTR_STAGE_REASON, ""),
        "degraded": bool(a.get(c.ATTR_STAGE_DEGRADED, False)),
        "dropped": _list(a.get(c.ATTR_STAGE_DROPPED)),
        "forced_reinstated": bool(a.get(c.ATTR_STAGE_FORCED_REINSTATED, False)),
        "error_type": a.get(c.ATTR_ERROR_TYPE),
    }


def _selection(span: SpanRecord, kids: dict[str | None, list[SpanRecord]]) -> dict[str, Any]:
    a = span.attributes
    return {
        "offered": _list(a.get(c.ATTR_SELECTION_OFFERED)),
        "selected": _list(a.get(c.ATTR_SELECTION_SELECTED)),
        "dropped": _list(a.get(c.ATTR_SELECTION_DROPPED)),
        "forced_tool": a.get(c.ATTR_SELECTION_FORCED_TOOL),
        "reinstated": bool(a.get(c.ATTR_SELECTION_REINSTATED, False)),
        "stages": [_stage(s) for s in kids.get(span.span_id, []) if s.name == c.SPAN_STAGE],
    }


def _dispatch(span: SpanRecord) -> dict[str, Any]:
    a = span.attributes
    return {
        "tool_call_id": a.get(c.ATTR_GEN_AI_TOOL_CALL_ID),
        "emitted_tool": a.get(c.ATTR_DISPATCH_EMITTED_TOOL),
        "policy": a.get(c.ATTR_POLICY_WINNER),
        "redirect_to": a.get(c.ATTR_DISPATCH_REDIRECT_TO),
        "guard": a.get(c.ATTR_DISPATCH_GUARD),
        "adopter_override": bool(a.get(c.ATTR_DISPATCH_ADOPTER_OVERRIDE, False)),
        "palette_gate": a.get(c.ATTR_DISPATCH_PALETTE_GATE),
        "final_tool": a.get(c.ATTR_DISPATCH_FINAL_TOOL),
        "evaluations": _policy_events(span),
    }


def _gate(span: SpanRecord) -> dict[str, Any]:
    a = span.attributes
    return {
        "fire": bool(a.get(c.ATTR_OFFLOAD_FIRE, False)),
        "reason_code": a.get(c.ATTR_OFFLOAD_REASON_CODE),
        "reason": a.get(c.ATTR_OFFLOAD_REASON),
        "net_saving_usd": a.get(c.ATTR_OFFLOAD_NET_SAVING_USD),
        "reprefill_saving_usd": a.get(c.ATTR_OFFLOAD_REPREFILL_SAVING_USD),
        "stub_carry_cost_usd": a.get(c.ATTR_OFFLOAD_STUB_CARRY_COST_USD),
        "expected_recall_hop_cost_usd": a.get(c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD),
        "output_tokens": a.get(c.ATTR_OFFLOAD_OUTPUT_TOKENS),
        "horizon": a.get(c.ATTR_OFFLOAD_HORIZON),
        "recall_probability": a.get(c.ATTR_OFFLOAD_RECALL_PROBABILITY),
        "model": a.get(c.ATTR_GEN_AI_REQUEST_MODEL),
        "pricing_source": a.get(c.ATTR_OFFLOAD_PRICING_SOURCE),
        "offload_id": a.get(c.ATTR_OFFLOAD_ID),
        "tool": a.get(c.ATTR_GEN_AI_TOOL_NAME),
    }


def _iteration(span: SpanRecord, kids: dict[str | None, list[SpanRecord]]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "index": span.attributes.get(c.ATTR_ITERATION_INDEX),
        "selection": None,
        "pre_model": None,
        "chat": None,
        "dispatches": [],
        "executed": [],
        "offload_gates": [],
        "error_type": span.attributes.get(c.ATTR_ERROR_TYPE),
    }
    for child in kids.get(span.span_id, []):
        a = child.attributes
        op = a.get(c.ATTR_GEN_AI_OPERATION_NAME)
        if child.name == c.SPAN_SELECT_TOOLS:
            view["selection"] = _selection(child, kids)
        elif child.name == c.SPAN_SEAM_PRE_MODEL:
            view["pre_model"] = {
                "winner_source": a.get(c.ATTR_SEAM_WINNER_SOURCE),
                "policy": a.get(c.ATTR_POLICY_WINNER),
                "model": a.get(c.ATTR_GEN_AI_REQUEST_MODEL),
                "evaluations": _policy_events(child),
            }
        elif child.name == c.SPAN_SEAM_POST_MODEL:
            view["dispatches"] = [
                _dispatch(d) for d in kids.get(child.span_id, []) if d.name == c.SPAN_DISPATCH
            ]
        elif child.name == c.SPAN_OFFLOAD_GATE:
            view["offload_gates"].append(_gate(child))
        elif op == _GENAI_CHAT:
            view["chat"] = {
                "model": a.get(c.ATTR_GEN_AI_REQUEST_MODEL),
                "input_tokens": a.get(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS),
                "output_tokens": a.get(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS),
            }
        elif op == _GENAI_TOOL:
            view["executed"].append(
                {
                    "tool": a.get(c.ATTR_GEN_AI_TOOL_NAME),
                    "tool_call_id": a.get(c.ATTR_GEN_AI_TOOL_CALL_ID),
                    "error_type": a.get(c.ATTR_ERROR_TYPE),
                }
            )
    return view


def _settlement(span: SpanRecord) -> dict[str, Any]:
    a = span.attributes
    return {
        "offload_id": a.get(c.ATTR_OFFLOAD_ID),
        "conversation_id": a.get(c.ATTR_GEN_AI_CONVERSATION_ID),
        "model": a.get(c.ATTR_GEN_AI_REQUEST_MODEL),
        "outcome": a.get(c.ATTR_OFFLOAD_OUTCOME),
        "trigger": a.get(c.ATTR_OFFLOAD_SETTLE_TRIGGER),
        "predicted_net_saving_usd": a.get(c.ATTR_OFFLOAD_NET_SAVING_USD),
        "realized_savings_usd": a.get(c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD),
        "realized_costs_usd": a.get(c.ATTR_OFFLOAD_REALIZED_COSTS_USD),
        "realized_net_saving_usd": a.get(c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD),
        "cache_delta_usd": a.get(c.ATTR_OFFLOAD_CACHE_DELTA_USD),
        "turns_carried": a.get(c.ATTR_OFFLOAD_TURNS_CARRIED),
        "recalls": a.get(c.ATTR_OFFLOAD_RECALLS),
    }


def _walk(span: SpanRecord, kids: dict[str | None, list[SpanRecord]]) -> Iterable[SpanRecord]:
    yield span
    for child in kids.get(span.span_id, []):
        yield from _walk(child, kids)


def build_report(spans: Sequence[SpanRecord]) -> dict[str, Any]:
    """Group spans into turns (one per trace) with their iterations, plus settlements."""
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    turns: list[dict[str, Any]] = []
    settlements: list[dict[str, Any]] = []
    for trace_id, members in by_trace.items():
        kids = _children(members)
        roots = kids.get(None, [])
        iterations: list[dict[str, Any]] = []
        conversation = agent = None
        start = min(s.start_ns for s in members)
        for root in roots:
            for span in _walk(root, kids):
                a = span.attributes
                conversation = conversation or a.get(c.ATTR_GEN_AI_CONVERSATION_ID)
                agent = agent or a.get(c.ATTR_GEN_AI_AGENT_NAME)
                if span.name == c.SPAN_ITERATION:
                    iterations.append(_iteration(span, kids))
                elif span.name == c.SPAN_OFFLOAD_SETTLE:
                    settlements.append(_settlement(span))
        if iterations:
            turns.append(
                {
                    "trace_id": trace_id,
                    "conversation_id": conversation,
                    "agent": agent,
                    "start_ns": start,
                    "iterations": iterations,
                }
            )
    turns.sort(key=lambda t: (t["start_ns"], t["trace_id"]))
    counters: dict[Any, int] = defaultdict(int)
    for turn in turns:
        counters[turn["conversation_id"]] += 1
        turn["turn"] = counters[turn["conversation_id"]]
    return {"turns": turns, "settlements": settlements}


def tool_story(iteration: dict[str, Any], tool: str) -> str:
    """Why ``tool`` was or was not offered, selected, dispatched and run."""
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
        else:
            if parts:
                parts.append("re-added later")
            parts.append("selected")
    emitted = [d for d in iteration.get("dispatches", []) if d["emitted_tool"] == tool]
    targeted = [
        d
        for d in iteration.get("dispatches", [])
        if d["emitted_tool"] != tool and (d["redirect_to"] == tool or d["final_tool"] == tool)
    ]
    for d in emitted:
        if d["final_tool"] == tool:
            if d["palette_gate"] == "dropped":
                parts.append(
                    f"emitted; redirect to {d['redirect_to']} dropped by the palette gate, ran as emitted"
                )
            else:
                parts.append("emitted and dispatched")
        else:
            who = f"policy '{d['policy']}'" if d["policy"] else "the adopter callback"
            parts.append(f"emitted but redirected to {d['final_tool']} by {who}")
    for d in targeted:
        if d["final_tool"] == tool:
            parts.append(f"dispatched in place of {d['emitted_tool']} (policy '{d['policy']}')")
        else:
            parts.append(
                f"target of a redirect from {d['emitted_tool']} that the palette gate dropped"
            )
    if not emitted and not targeted and sel:
        parts.append("not called by the model")
    if any(e["tool"] == tool for e in iteration.get("executed", [])):
        parts.append("executed")
    return "; ".join(parts)
