"""The realized offload metrics of the ledger's records, by mechanism, and what
``seamscope whatif`` needs of them on the span current when they happen; the
evidence of settled gate offloads per (tool, model) that ``seamscope calibrate
--prometheus`` reads; a shadow configuration's savings and costs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import metrics, trace

from seamscope.decisions.records import (
    CompactionAccount,
    LedgerEntry,
    ModelCallAccount,
    OffloadCostKind,
    OffloadMechanism,
    RecallAccount,
    Settlement,
    ShadowSettlement,
)
from seamscope.telemetry import conventions as c
from seamscope.telemetry._instruments import Instruments, flag

__all__ = ["annotate_span", "record_account", "record_evidence", "record_shadow"]

Add = Callable[[Any, float, dict[str, str]], None]
Label = Callable[[str, str | None], str]


def _is_chat(span: trace.Span) -> bool:
    """A chat span, read through the SDK's public ReadableSpan view (False for others)."""
    attributes: Any = getattr(span, "attributes", None)
    try:
        return attributes is not None and attributes.get(c.ATTR_GEN_AI_OPERATION_NAME) == "chat"
    except Exception:
        return False


def annotate_span(entry: LedgerEntry, span: trace.Span, limits: Any) -> None:
    """On the current span (the chat span of a model call, the recall tool's
    span): which offloads a model call carried (empty for none: the attribute
    also marks the call as one the ledger accounted), and each recall with its
    real tokens as a span event."""
    if not span.is_recording():
        return
    if isinstance(entry, ModelCallAccount):
        if not _is_chat(span):
            return  # reported after its chat span ended: whatif reads the ledger's default
        span.set_attribute(c.ATTR_OFFLOAD_CARRIED, tuple(limits.text(i) for i in entry.carried))
        span.set_attribute(c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS, entry.carried_stub_tokens)
    elif isinstance(entry, RecallAccount):
        attributes: dict[str, Any] = {
            c.ATTR_OFFLOAD_ID: limits.text(entry.offload_id),
            c.ATTR_GEN_AI_CONVERSATION_ID: limits.text(entry.conversation_id),
            c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(entry.model),
            c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: entry.input_tokens,
            c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: entry.output_tokens,
        }
        if entry.tool_call_id is not None:
            attributes[c.ATTR_GEN_AI_TOOL_CALL_ID] = limits.text(entry.tool_call_id)
        span.add_event(c.EVENT_OFFLOAD_RECALLED, attributes)


def record_account(
    entry: LedgerEntry,
    *,
    instruments: Instruments,
    add: Callable[[metrics.Counter, float, dict[str, str]], None],
    label: Callable[[str, str | None], str],
) -> None:
    """The realized metrics of one ledger record (a model call, a recall, a
    compaction's own call), each amount under the mechanism that took the
    content out of the prompt."""
    inst = instruments
    model = label(c.ATTR_GEN_AI_REQUEST_MODEL, entry.model)
    # (mechanism, cost kind, amount); savings by mechanism
    costs: list[tuple[str, OffloadCostKind, Any]] = []
    savings: list[tuple[str, Any]] = []
    if isinstance(entry, ModelCallAccount):
        usage = entry.usage
        active = flag(entry.offload_active)
        for kind, tokens in (
            (c.CacheUsage.READ, usage.cache_read_tokens),
            (c.CacheUsage.WRITE, usage.cache_write_tokens),
            (c.CacheUsage.UNCACHED, usage.uncached_tokens),
        ):
            if tokens:
                add(
                    inst.model_input_tokens,
                    tokens,
                    {
                        c.ATTR_GEN_AI_REQUEST_MODEL: model,
                        c.ATTR_USAGE_CACHE: kind.value,
                        c.ATTR_OFFLOAD_ACTIVE: active,
                    },
                )
        shares = entry.by_mechanism or (
            (
                OffloadMechanism.SEAMSCOPE_GATE,
                entry.saving,
                entry.stub_carry_cost,
                entry.cache_disruption_cost,
            ),
        )
        for mechanism, saving, stub, cache in shares:
            savings.append((mechanism.value, saving))
            costs.append((mechanism.value, OffloadCostKind.STUB_CARRY, stub))
            costs.append((mechanism.value, OffloadCostKind.CACHE_DISRUPTION, cache))
    elif isinstance(entry, RecallAccount):
        add(
            inst.offload_recalls,
            1,
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: model,
                c.ATTR_OFFLOAD_MECHANISM: entry.mechanism.value,
            },
        )
        costs = [(entry.mechanism.value, OffloadCostKind.RECALL, entry.cost)]
    elif isinstance(entry, CompactionAccount):
        costs = [(entry.mechanism.value, OffloadCostKind.COMPACTION_CALL, entry.cost)]
    for mechanism_value, amount in savings:
        if amount > 0:
            add(
                inst.offload_realized_savings,
                float(amount),
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model,
                    c.ATTR_OFFLOAD_MECHANISM: mechanism_value,
                },
            )
    for mechanism_value, kind_cost, amount in costs:
        if amount > 0:
            add(
                inst.offload_realized_costs,
                float(amount),
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model,
                    c.ATTR_OFFLOAD_COST_KIND: kind_cost.value,
                    c.ATTR_OFFLOAD_MECHANISM: mechanism_value,
                },
            )


def record_evidence(s: Settlement, *, instruments: Instruments, add: Add, label: Label) -> None:
    """What calibrate learns from one settled offload of the gate whose tool is
    known, by (model, tool): the turns that followed it (a histogram: its count
    is the settled offloads), whether it was recalled, its recalls, the turns
    that carried it and the recall prior the gate decided with."""
    if s.mechanism is not OffloadMechanism.SEAMSCOPE_GATE or not s.tool_name:
        return
    inst = instruments
    attrs = {
        c.ATTR_GEN_AI_REQUEST_MODEL: label(c.ATTR_GEN_AI_REQUEST_MODEL, s.model),
        c.ATTR_GEN_AI_TOOL_NAME: label(c.ATTR_GEN_AI_TOOL_NAME, s.tool_name),
    }
    inst.offload_remaining_turns.record(s.remaining_turns, attrs)
    if s.recalls:
        add(inst.offload_recalled_offloads, 1, attrs)
        add(inst.offload_settled_recalls, s.recalls, attrs)
    if s.turns_carried:
        add(inst.offload_carried_turns, s.turns_carried, attrs)
    if s.recall_probability > 0:
        add(inst.offload_prior_recall_probability, s.recall_probability, attrs)


def record_shadow(
    settlement: ShadowSettlement, *, instruments: Instruments, add: Add, label: Label
) -> None:
    """The shadow's savings and costs by (model, tool, basis): exact for the
    offloads of the gate that fire either way, expected (one recall hop at the
    shadow's probability) for the ones only the shadow fires."""
    inst = instruments
    rows: list[tuple[str, str | None, c.ShadowBasis, Any, Any]] = [
        (s.model, s.tool_name, c.ShadowBasis.EXACT, s.realized_savings, s.realized_costs)
        for s in settlement.settlements
        if s.mechanism is OffloadMechanism.SEAMSCOPE_GATE
    ]
    rows += [
        (
            o.model,
            o.tool_name,
            c.ShadowBasis.EXPECTED,
            o.savings,
            o.savings - o.expected_net_saving,  # stub carry + p × recall hop
        )
        for o in settlement.offloads
    ]
    for model, tool, basis, savings, costs in rows:
        attrs = {
            c.ATTR_GEN_AI_REQUEST_MODEL: label(c.ATTR_GEN_AI_REQUEST_MODEL, model),
            c.ATTR_GEN_AI_TOOL_NAME: label(c.ATTR_GEN_AI_TOOL_NAME, tool),
            c.ATTR_OFFLOAD_SHADOW_BASIS: basis.value,
        }
        if savings > 0:
            add(inst.offload_shadow_savings, float(savings), attrs)
        if costs > 0:
            add(inst.offload_shadow_costs, float(costs), attrs)
