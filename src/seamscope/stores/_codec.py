"""A store record and an account delta as plain text fields (every store
writes them the same way: Decimal amounts as their exact strings)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from seamscope.decisions.records import AccountDelta, AccountTotals, StoredOffload

__all__ = ["FIELDS", "delta_text", "offload_fields", "offload_from", "totals_of"]

FIELDS = (
    "offload_id",
    "conversation_id",
    "call_id",
    "tool_name",
    "model",
    "stub",
    "output_tokens",
    "stub_tokens",
    "predicted_net_saving",
    "horizon",
    "recall_probability",
    "created_at",
    "expires_at",
)
"""The record's fields, in the order every store writes and reads them."""


def offload_fields(offload: StoredOffload) -> dict[str, str]:
    """The record as str fields (a Redis hash, a JSON object, SQL columns)."""
    return {
        "offload_id": offload.offload_id,
        "conversation_id": offload.conversation_id,
        "call_id": offload.call_id,
        "tool_name": offload.tool_name,
        "model": offload.model,
        "stub": offload.stub,
        "output_tokens": repr(float(offload.output_tokens)),
        "stub_tokens": repr(float(offload.stub_tokens)),
        "predicted_net_saving": str(offload.predicted_net_saving),
        "horizon": str(int(offload.horizon)),
        "recall_probability": repr(float(offload.recall_probability)),
        "created_at": repr(float(offload.created_at)),
        "expires_at": "" if offload.expires_at is None else repr(float(offload.expires_at)),
    }


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def offload_from(fields: Mapping[Any, Any]) -> StoredOffload:
    """The record back from :func:`offload_fields`' fields (str or bytes keys)."""
    get = {_str(k): _str(v) for k, v in fields.items()}
    expires = get.get("expires_at", "")
    return StoredOffload(
        offload_id=get["offload_id"],
        conversation_id=get["conversation_id"],
        call_id=get["call_id"],
        tool_name=get["tool_name"],
        model=get["model"],
        stub=get["stub"],
        output_tokens=float(get["output_tokens"]),
        stub_tokens=float(get["stub_tokens"]),
        predicted_net_saving=Decimal(get["predicted_net_saving"]),
        horizon=int(get["horizon"]),
        recall_probability=float(get["recall_probability"]),
        created_at=float(get["created_at"]),
        expires_at=float(expires) if expires else None,
    )


def delta_text(delta: AccountDelta) -> str:
    """One delta as a compact JSON array (the offload id is the key it is filed under)."""
    return json.dumps(
        [
            str(delta.savings),
            str(delta.stub_cost),
            str(delta.recall_cost),
            str(delta.cache_cost),
            delta.turns,
            delta.recalls,
            delta.remaining,
        ],
        separators=(",", ":"),
    )


def totals_of(texts: Iterable[Any]) -> AccountTotals:
    """The exact sum of deltas written by :func:`delta_text`."""
    savings = stub = recall = cache = Decimal(0)
    turns = recalls = remaining = 0
    for text in texts:
        s, k, r, c, t, n, m = json.loads(_str(text))
        savings += Decimal(s)
        stub += Decimal(k)
        recall += Decimal(r)
        cache += Decimal(c)
        turns += int(t)
        recalls += int(n)
        remaining += int(m)
    return AccountTotals(savings, stub, recall, cache, turns, recalls, remaining)
