"""Malformed constructions of the Strands ``SeamscopePlugin`` are refused at
construction, naming the class and the field (the rows of
``test_bad_input_adapters`` for the other adapters, checked the same way),
and every parameter has a row.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from adapters._strands_support import ScriptedModel, Step
from seamscope.adapters.strands import SeamscopePlugin
from test_bad_input import Bad, layer

V = ValueError
OWNER = "SeamscopePlugin"


def plugin(**kw: Any) -> Any:
    args = {"layer": layer(), **kw}
    return SeamscopePlugin(args.pop("layer"), **args)


ROWS = [
    Bad("strands-str-layer", lambda: plugin(layer="x"), V, OWNER, "layer"),
    Bad("strands-str-models", lambda: plugin(models="gpt"), V, OWNER, "models"),
    Bad("strands-str-model", lambda: plugin(models={"m": "gpt-4o"}), V, OWNER, "models"),
    Bad("strands-empty-model-name", lambda: plugin(models={"": None}), V, OWNER, "models"),
    Bad("strands-int-role", lambda: plugin(role=5), V, OWNER, "role"),
    Bad("strands-int-scope", lambda: plugin(scope=5), V, OWNER, "scope"),
    Bad("strands-int-conversation", lambda: plugin(conversation=5), V, OWNER, "conversation"),
    Bad("strands-empty-conversation", lambda: plugin(conversation=""), V, OWNER, "conversation"),
    Bad("strands-str-offload", lambda: plugin(offload="no"), V, OWNER, "offload"),
    Bad("strands-int-store", lambda: plugin(offload_store=5), V, OWNER, "offload_store"),
    Bad(
        "strands-bad-store-url", lambda: plugin(offload_store="ftp://x"), V, OWNER, "offload_store"
    ),
    Bad("strands-str-gate", lambda: plugin(gate_offloader="yes"), V, OWNER, "gate_offloader"),
    Bad("strands-str-genai-spans", lambda: plugin(genai_spans="yes"), V, OWNER, "genai_spans"),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_a_malformed_plugin_is_refused_naming_the_class_and_field(row: Bad) -> None:
    with pytest.raises(row.error) as raised:
        row.build()
    message = str(raised.value)
    assert (row.error, True) == (type(raised.value), bool(re.search(row.pattern, message))), message


def test_every_parameter_of_the_plugin_has_a_row() -> None:
    parameters = inspect.signature(SeamscopePlugin).parameters
    assert [] == sorted(p for p in parameters if not any(row.field == p for row in ROWS))


def test_a_valid_plugin_keeps_what_it_was_given() -> None:
    fast = ScriptedModel("claude-haiku-4-5", lambda request: Step())
    built = SeamscopePlugin(layer(), {"fast": fast}, role="analyst", offload=False)
    assert ("seamscope", {"fast": fast}, False, False) == (
        built.name,
        dict(built.models),
        built.offload,
        built.gate_offloader,
    )
