"""The realized offload metrics of the ledger's records, by mechanism, and what
``seamscope whatif`` needs of them on the span current when they happen."""

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
)
from seamscope.telemetry import conventions as c
from seamscope.telemetry._instruments import Instruments, flag

__all__ = ["annotate_span", "record_account"]


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
        span.add_event(
            c.EVENT_OFFLOAD_RECALLED,
            {
                c.ATTR_OFFLOAD_ID: limits.text(entry.offload_id),
                c.ATTR_GEN_AI_CONVERSATION_ID: limits.text(entry.conversation_id),
                c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(entry.model),
                c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: entry.input_tokens,
                c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: entry.output_tokens,
            },
        )


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
