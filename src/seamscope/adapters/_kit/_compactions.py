"""A framework's own offload (a compaction): the gate asked about it, and its
record for the other workers.

A framework that takes a large tool result out of the prompt on size alone
(Deep Agents' filesystem eviction, Strands' ``ContextOffloader``) can let
seamscope's gate decide each of its offloads: :func:`gate_compaction` prices
one with the gate's formula, the way the gate prices its own offloads, and
:func:`priced_as_loss` says whether the decision keeps the full result.
:func:`compaction_record` is the offload store's record of one, written
beside the conversation's offloads when a shared store lets every worker
price it.
"""

from __future__ import annotations

import dataclasses
import time
from decimal import Decimal
from typing import Any

from seamscope._internal import attached, evaluate_offload_gate
from seamscope.adapters._outputs import Outputs
from seamscope.decisions import OffloadGateDecision
from seamscope.decisions.records import (
    Compaction,
    GateCall,
    OffloadMechanism,
    OffloadReasonCode,
    PriorSource,
    StoredOffload,
)
from seamscope.loop import Iteration

__all__ = ["compaction_record", "gate_compaction", "keep_compaction", "priced_as_loss"]


def gate_compaction(
    iteration: Iteration,
    tool: str,
    call_id: str,
    removed_tokens: float,
    kept_tokens: float,
    compaction_id: str,
    mechanism: OffloadMechanism,
    *,
    context: Any = None,
) -> OffloadGateDecision:
    """The offload gate's decision on one offload a framework made, on a
    ``seamscope.offload_gate`` span (``seamscope.offload.mechanism``: the
    framework's ``mechanism``, whose offload it decided, so readers never
    take it for one of the gate's own; ``seamscope.offload.id``, when it
    fires: the compaction's): the gate's formula at the iteration's model
    with its priors for the tool (calibrated when it has them), the kept
    preview as the stub, no size threshold (the framework's limit chose the
    size). ``context``: the OpenTelemetry context the span starts under
    (default: the iteration's)."""
    layer = iteration.turn.layer
    gate = layer.gate
    model = iteration.model or layer.router.default_model.model_name
    inputs = dataclasses.replace(
        gate.inputs(removed_tokens, model),
        large_offload_threshold_tokens=0,
        stub_tokens=kept_tokens,
    )
    source = None
    prior = None if gate.priors is None else gate.priors.lookup(tool, model)
    if prior is not None:
        inputs = dataclasses.replace(
            inputs, horizon=prior.horizon, recall_probability=prior.recall_probability
        )
        source = PriorSource.CALIBRATED
    elif gate.priors is not None:
        source = PriorSource.DEFAULT
    # its prediction is the compaction's (settled under the framework's mechanism),
    # never added to the gate's own predicted savings, which the drift rule compares
    # with the gate's realized ones: counted as a decision, not as a prediction
    call = GateCall(
        iteration.turn.conversation_id,
        iteration.turn.agent,
        tool,
        call_id,
        reevaluation=True,
        mechanism=mechanism,
    )
    with attached(iteration.invocation.context if context is None else context):
        handle = layer.observer.start_offload_gate(inputs, call)
        decision = evaluate_offload_gate(inputs, pricing=gate.pricing)
        decision = dataclasses.replace(
            decision,
            offload_id=compaction_id if decision.fire else None,
            prior_source=source or decision.prior_source,
            priors_version=None if gate.priors is None else gate.priors.version,
        )
        layer.observer.end_offload_gate(handle, decision)
    return decision


def priced_as_loss(decision: OffloadGateDecision) -> bool:
    """Whether the gate priced an offload as a loss (the full result stays); an
    unpriced model or a result below nothing leaves the framework's offload."""
    return decision.reason_code is OffloadReasonCode.NET_NOT_POSITIVE


def compaction_record(
    compaction: Compaction, *, conversation_id: str, call_id: str, tool: str, stub: str
) -> StoredOffload:
    """The offload store's record of a compaction (its id ``{mechanism}:...``,
    what it removed, the preview kept as its stub, its predicted terms less
    its own cost), so any worker of the conversation prices the preview a
    prompt carries and the reads that bring its content back."""
    predicted = compaction.predicted
    return StoredOffload(
        offload_id=compaction.compaction_id,
        conversation_id=conversation_id,
        call_id=call_id,
        tool_name=tool,
        model=compaction.model,
        stub=stub,
        output_tokens=compaction.removed_tokens,
        stub_tokens=compaction.kept_tokens,
        predicted_net_saving=(Decimal(0) if predicted is None else predicted.net_saving)
        - compaction.cost,
        horizon=0 if predicted is None else predicted.horizon,
        recall_probability=0.0 if predicted is None else predicted.recall_probability,
        created_at=time.time(),
    )


def keep_compaction(
    outputs: Outputs,
    iteration: Iteration,
    compaction: Compaction,
    *,
    call_id: str,
    tool: str,
    stub: str,
    content: str,
) -> tuple[str, ...] | None:
    """A framework's compaction kept in the conversation's shared offload store
    (its record, :func:`compaction_record`, and ``content``: what locates the
    removed text, which stays where the framework put it), so any worker
    prices its preview and its reads. Returns the ids the store's size bound
    dropped to make room, or None (no shared store, no conversation, or the
    store failed)."""
    conversation_id = iteration.turn.conversation_id
    if not conversation_id or not outputs.store.shared:
        return None
    record = compaction_record(
        compaction, conversation_id=conversation_id, call_id=call_id, tool=tool, stub=stub
    )
    return outputs.keep(record, content)
