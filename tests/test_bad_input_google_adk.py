"""Malformed constructions of ``SeamscopePlugin`` are refused at construction,
naming the class and the field (the rows of ``test_bad_input_adapters`` for
the other adapters, checked the same way), and every parameter has a row.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from seamscope.adapters.google_adk import SeamscopePlugin
from test_bad_input import Bad, layer

V = ValueError
OWNER = "SeamscopePlugin"


def plugin(**kw: Any) -> Any:
    args = {"layer": layer(), **kw}
    return SeamscopePlugin(args.pop("layer"), **args)


ROWS = [
    Bad("adk-str-layer", lambda: plugin(layer="x"), V, OWNER, "layer"),
    Bad("adk-str-models", lambda: plugin(models="gpt"), V, OWNER, "models"),
    Bad("adk-int-model", lambda: plugin(models={"m": 5}), V, OWNER, "models"),
    Bad("adk-empty-model-id", lambda: plugin(models={"m": ""}), V, OWNER, "models"),
    Bad("adk-empty-model-name", lambda: plugin(models={"": "m"}), V, OWNER, "models"),
    Bad("adk-int-role", lambda: plugin(role=5), V, OWNER, "role"),
    Bad("adk-int-scope", lambda: plugin(scope=5), V, OWNER, "scope"),
    Bad("adk-str-offload", lambda: plugin(offload="no"), V, OWNER, "offload"),
    Bad("adk-int-store", lambda: plugin(offload_store=5), V, OWNER, "offload_store"),
    Bad("adk-bad-store-url", lambda: plugin(offload_store="ftp://x"), V, OWNER, "offload_store"),
    Bad("adk-str-genai-spans", lambda: plugin(genai_spans="yes"), V, OWNER, "genai_spans"),
    Bad("adk-empty-name", lambda: plugin(name=""), V, OWNER, "name"),
    Bad("adk-int-name", lambda: plugin(name=5), V, OWNER, "name"),
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
    built = SeamscopePlugin(layer(), {"fast": "gemini-2.5-flash"}, role="analyst", offload=False)
    assert ("seamscope", {"fast": "gemini-2.5-flash"}, False) == (
        built.name,
        dict(built.models),
        built.offload,
    )
