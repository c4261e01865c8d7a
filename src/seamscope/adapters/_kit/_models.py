"""Which model really runs a call, and the name every record gives it.

One rule for every adapter: the model really called names the ``chat``
span, ``gen_ai.request.model``/``gen_ai.response.model`` and the ledger's
price. Its name comes from the model object (:func:`model_name_of`), then
from the response (:meth:`seamscope.loop.ChatCall.report`); the
layer's default model only when nothing says more. A PRE-seam winner that
is not callable here (not in ``models``, not the request's own model) is
reported the same way everywhere (:func:`note_unavailable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seamscope._internal import log_event
from seamscope.decisions import PreModelResult
from seamscope.telemetry import conventions as c

__all__ = ["ModelChoice", "choose_model", "model_name_of", "note_unavailable"]

_NAME_ATTRIBUTES = ("model_name", "model", "model_id")


def model_name_of(model: Any, *extra: Callable[[Any], str | None]) -> str | None:
    """The name a model object gives itself: a non-empty str as it is, else its
    ``model_name``, ``model`` or ``model_id`` attribute, else what one of
    ``extra`` (a framework's own reader) says; None when nothing says."""
    if isinstance(model, str):
        return model or None
    for attribute in _NAME_ATTRIBUTES:
        try:
            own = getattr(model, attribute, None)
        except Exception:
            own = None
        if isinstance(own, str) and own:
            return own
    for reader in extra:
        try:
            own = reader(model)
        except Exception:
            own = None
        if isinstance(own, str) and own:
            return own
    return None


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model a call runs on for a PRE-seam choice.

    ``model``: the object to call (the request's own when the choice is not
    callable here); ``name``: what the chat span, the request model and the
    ledger's price say; ``named``: the name came from ``models`` or the model
    object, not the layer's default (a response's model may still say more);
    ``unavailable``: the PRE seam chose a model that is not the one running.
    """

    model: Any
    name: str
    named: bool
    unavailable: bool


def choose_model(
    chosen: str,
    default: str,
    models: Mapping[str, Any],
    own: Any,
    *,
    name_of: Callable[[Any], str | None] = model_name_of,
) -> ModelChoice:
    """The model for the PRE seam's ``chosen`` name, else the request's ``own``.

    ``models`` maps names to callable models; ``own`` is the model the
    request would run on (an object, a name, or None). The name of ``own``
    is the name ``models`` gives it, else its own (``name_of``), else the
    default. ``chosen`` is unavailable when it names neither a model of
    ``models`` nor ``own`` and is not the default (the default is what the
    layer says when no policy chose: the request's own model runs it).
    """
    model = models.get(chosen)
    if model is not None:
        return ModelChoice(model, chosen, True, False)
    own_name = next((name for name, m in models.items() if m is own), None)
    if own_name is None:
        own_name = name_of(own)
    if own_name is None:
        return ModelChoice(own, default, False, chosen != default)
    return ModelChoice(own, own_name, True, chosen not in (default, own_name))


def note_unavailable(iteration: Any, pre: PreModelResult, choice: ModelChoice) -> None:
    """Report a PRE-seam winner the adapter cannot call, the same way in every
    adapter: one ``seamscope.model.unavailable`` warning event, and the
    iteration's chat span will carry ``seamscope.model.chosen_unavailable``
    (the chosen model, beside the one that ran). Never raises."""
    if not choice.unavailable:
        return
    try:
        log_event(
            "warning",
            c.LOG_MODEL_UNAVAILABLE,
            chosen_model=pre.model.model_name,
            used_model=choice.name,
            winner_source=pre.source.value,
            policy=pre.policy,
        )
        if iteration is not None:
            iteration.unavailable = pre.model.model_name
    except Exception:
        pass
