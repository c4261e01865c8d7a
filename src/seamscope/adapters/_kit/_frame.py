"""An adapter's frame, the same in every adapter: its options checked once at
construction, what its object offers users beside its hooks, and the one
recall tool.

:func:`check_options` validates what every adapter takes (the layer, the
models the PRE seam may switch to, the role, the scope, whether to offload
and where offloaded outputs live) and returns them as one frozen
:class:`Options`; a bad value raises ``ValueError`` naming the adapter's
class and the field. :class:`Frame` holds them on the adapter's object (its
``layer``, ``models``, ``offload``, ``outputs``), with its ``repr``,
``stored_output``, and the adopter's role and scope for a run.
:data:`RECALL` is the recall tool every adapter offers
in its framework's own tool shape: its name, description and JSON schema,
and the answers it gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seamscope._internal import checks
from seamscope.adapters._hooks import Contained
from seamscope.adapters._kit._options import resolve_role, resolve_scope
from seamscope.adapters._outputs import Outputs, adapter_store
from seamscope.decisions import OffloadStore
from seamscope.loop import RECALL_TOOL, DecisionLayer

__all__ = ["RECALL", "Frame", "Options", "RecallSpec", "check_options"]


@dataclass(frozen=True, slots=True)
class RecallSpec:
    """The recall tool, whatever framework offers it: ``recall_tool_result(offload_id)``."""

    name: str = RECALL_TOOL
    description: str = (
        "Bring back the full text of a tool output that was offloaded from the "
        "conversation. Pass the offload id named in the stub that replaced it."
    )
    parameter: str = "offload_id"

    @property
    def schema(self) -> dict[str, Any]:
        """Its parameters' JSON schema (a new dict each time: a framework may keep it)."""
        return {
            "type": "object",
            "properties": {self.parameter: {"type": "string"}},
            "required": [self.parameter],
            "additionalProperties": False,
        }


RECALL = RecallSpec()
"""The one recall tool every adapter offers."""


@dataclass(frozen=True, slots=True)
class Options:
    """What every adapter takes, checked once (:func:`check_options`)."""

    owner: str
    layer: DecisionLayer
    models: Mapping[str, Any]
    role: Any
    scope: Any
    offload: bool
    store: OffloadStore | None = field(default=None)
    """Where offloaded outputs live (None: the adapter picks it at run time)."""
    genai_spans: bool | None = None


def check_options(
    owner: str,
    layer: Any,
    models: Any,
    *,
    model_ok: Callable[[Any], bool],
    model_kind: str,
    models_kind: str | None = None,
    role: Any,
    scope: Any,
    offload: Any,
    max_stored_outputs: Any = None,
    offload_store: Any = None,
    resolve_store: bool = True,
    genai_spans: Any = None,
) -> Options:
    """The adapter's options, or ``ValueError`` naming ``owner`` and the field.

    ``model_ok``/``model_kind``: what a value of ``models`` must be (``must be
    {model_kind}``); ``models_kind``: how the mapping is named (default the
    same). ``resolve_store`` False: the adapter resolves its store itself
    (LangChain's comes from the graph at run time).
    """
    if not isinstance(layer, DecisionLayer):
        raise ValueError(f"{owner}.layer must be a DecisionLayer")
    models = {} if models is None else models
    if not isinstance(models, Mapping):
        raise ValueError(f"{owner}.models must be a mapping of name to {models_kind or model_kind}")
    for name, model in models.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{owner}.models: names must be non-empty str")
        if not model_ok(model):
            raise ValueError(f"{owner}.models[{name!r}] must be {model_kind}")
    if role is not None and not isinstance(role, str) and not callable(role):
        raise ValueError(f"{owner}.role must be a str, a callable or None")
    if scope is not None and not isinstance(scope, Mapping) and not callable(scope):
        raise ValueError(f"{owner}.scope must be a mapping, a callable or None")
    if max_stored_outputs is not None and (
        isinstance(max_stored_outputs, bool)
        or not isinstance(max_stored_outputs, int)
        or max_stored_outputs < 1
    ):
        raise ValueError(f"{owner}.max_stored_outputs must be an int >= 1")
    store = (
        adapter_store(owner, layer, offload_store, max_stored_outputs) if resolve_store else None
    )
    checks.flag(owner, "offload", offload)
    if genai_spans is not None and not isinstance(genai_spans, bool):
        raise ValueError(f"{owner}.genai_spans must be a bool or None")
    return Options(owner, layer, dict(models), role, scope, bool(offload), store, genai_spans)


class Frame:
    """What an adapter's object holds of its :class:`Options` and offers its
    users beside its hooks (the Agents SDK's runner, pydantic-ai's
    capability, the ADK and Strands plugins). ``HOOKS``: the adapter's
    containment (its logger; its hooks' names start with its name)."""

    HOOKS: Contained
    layer: DecisionLayer
    models: Mapping[str, Any]
    offload: bool
    outputs: Outputs
    genai_spans: bool | None
    _role: Any
    _scope: Any

    def _hold(self, options: Options) -> None:
        """Keep the checked options (their store as the adapter's outputs)."""
        assert options.store is not None
        self.layer = options.layer
        self.models = options.models
        self.offload = options.offload
        self.outputs = Outputs(options.store, observer=options.layer.observer)
        self.genai_spans = options.genai_spans
        self._role = options.role
        self._scope = options.scope

    def __repr__(self) -> str:
        return f"{type(self).__name__}(agent_name={self.layer.agent_name!r})"

    def stored_output(self, offload_id: str, conversation_id: str | None = None) -> str | None:
        """The full text of an offloaded output the offload store still holds
        (of ``conversation_id``; None: the conversation this process saw it in)."""
        return self.outputs.get(offload_id, conversation_id)

    def scope_for(self, subject: Any) -> Mapping[str, Any] | None:
        """The adopter's scope of a run (``scope``, or ``scope(subject)``)."""
        hooks = self.HOOKS
        return resolve_scope(self._scope, subject, failed=hooks.failed, hook=f"{hooks.name}.scope")

    def _role_of(self, subject: Any, default: Any) -> str | None:
        """The role for ``subject``: ``role(subject)``, ``role``, else ``default``."""
        hooks = self.HOOKS
        return resolve_role(
            self._role, subject, default=default, failed=hooks.failed, hook=f"{hooks.name}.role"
        )
