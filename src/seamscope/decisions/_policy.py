"""ToolCallPolicy, ModelConfig and the DispatchContext both seams share.

A :class:`ToolCallPolicy` is one declarative rule that applies at two seams
of a ReAct iteration: PRE-model (its ``model`` picks which model reasons the
turn) and POST-model (its ``redirect_to`` rewrites an emitted tool call).
Both seams build their :class:`DispatchContext` with one helper,
:func:`build_dispatch_context`, so a ``match`` predicate sees the same shape
at both points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from seamscope.decisions import _checks as _c
from seamscope.decisions._messages import last_user_text
from seamscope.decisions.records import (
    ModelConfig,
    Seam,
)

__all__ = [
    "ArgsTransform",
    "DispatchContext",
    "ModelConfig",
    "Predicate",
    "ToolCallPolicy",
    "build_dispatch_context",
]

_EMPTY_SCOPE: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DispatchContext:
    """What a policy's ``match``/``guard`` (and a resolver) see at a seam.

    A point-in-time snapshot of the turn:

    * ``messages``: the conversation so far. At the POST seam it includes the
      just-emitted assistant message (the post-LLM reality), so
      ``messages[-1]`` is that assistant message there. To classify intent
      from the user's turn at both seams alike, read :attr:`user_text` (a predicate
      reading ``messages[-1]`` sees the user turn only at the PRE seam).
    * ``resolved_tool_names``: the tools routed (offered to the model) this
      iteration — what the palette gate checks a redirect target against.
    * ``forced_tool_choice``: this iteration's forced tool, if any.
    * ``scope``: the adopter's per-conversation data (read-only).
    """

    seam: Seam
    messages: tuple[Any, ...]
    resolved_tool_names: frozenset[str]
    forced_tool_choice: str | None = None
    scope: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_SCOPE, hash=False)
    iteration: int = 0
    role: str | None = None
    conversation_id: str | None = None
    agent_name: str | None = None

    @property
    def user_text(self) -> str:
        """Text of the most recent user message ('' when there is none)."""
        return last_user_text(self.messages)


def build_dispatch_context(
    seam: Seam,
    messages: Iterable[Any],
    *,
    resolved_tool_names: Iterable[str] = (),
    forced_tool_choice: str | None = None,
    scope: Mapping[str, Any] | None = None,
    iteration: int = 0,
    role: str | None = None,
    conversation_id: str | None = None,
    agent_name: str | None = None,
    emitted_message: Any | None = None,
) -> DispatchContext:
    """The one helper both seams use to build a :class:`DispatchContext`.

    At the POST seam pass the assistant message the model just emitted as
    ``emitted_message``: it is appended to ``messages`` unless it already is
    the last message, so the context reflects the post-LLM reality.
    ``resolved_tool_names`` given as one str is that one name (the palette
    gate would otherwise admit every one-letter tool name).
    """
    msgs = tuple(messages)
    if emitted_message is not None and (not msgs or msgs[-1] is not emitted_message):
        msgs = (*msgs, emitted_message)
    return DispatchContext(
        seam=Seam(seam),
        messages=msgs,
        resolved_tool_names=frozenset(
            (resolved_tool_names,) if isinstance(resolved_tool_names, str) else resolved_tool_names
        ),
        forced_tool_choice=forced_tool_choice,
        scope=_EMPTY_SCOPE if scope is None else MappingProxyType(dict(scope)),
        iteration=iteration,
        role=role,
        conversation_id=conversation_id,
        agent_name=agent_name,
    )


Predicate = Callable[[DispatchContext], bool]
ArgsTransform = Callable[[Mapping[str, Any], DispatchContext], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolCallPolicy:
    """One declarative ``{model + tool-redirect}`` rule for an intent.

    Fields, as the design declares them:

    * ``name``: non-empty; labels the policy in traces, metrics and logs.
    * ``match``: the intent gate, evaluated at both seams.
    * ``when_tool``: POST-seam filter on the emitted tool (a name, a
      frozenset of names, or None for any tool).
    * ``redirect_to``: the POST-seam target; setting it makes a redirect policy.
    * ``model``: the PRE-seam model override.
    * ``args_transform``: ``(args, ctx) -> args`` for the redirected call.
    * ``guard``: a deterministic precondition that gates the redirect only;
      it never affects which model reasons.

    Construction fails with a ValueError naming the class and field
    (``ToolCallPolicy.name must be a non-empty str, got ''``) for a blank or
    non-str ``name``; a ``match``, ``guard`` or ``args_transform`` that is
    not a synchronous callable (an ``async def`` would return a coroutine,
    which is always truthy); a policy with neither ``model`` nor
    ``redirect_to``; ``when_tool`` or ``args_transform`` without
    ``redirect_to``; a blank or non-str ``redirect_to``; a ``when_tool`` that
    is not a non-blank str, a non-empty frozenset of such str, or None; a
    ``model`` that is not a ModelConfig.

    ``match`` and ``guard`` answer with a bool, and only ``True`` is a yes:
    a string such as ``"false"`` or ``"no"`` is truthy, so reading answers
    by truthiness would redirect on a "no". Any other answer (a str, a
    number, None, a regex match: write ``bool(re.search(...))``, an
    awaitable) is contained as an error, as a predicate that raises is: the
    policy counts as not matched (result ``error``), or its guard as
    ``error`` (no redirect), with a :class:`ContainedError` (``TypeError``,
    naming the answer's type, never its value) on that evaluation and on the
    seam's record; a non-bool answer is also logged once per policy and
    predicate (``seamscope.decisions``, WARNING).
    """

    name: str
    match: Predicate
    when_tool: str | frozenset[str] | None = None
    redirect_to: str | None = None
    model: ModelConfig | None = None
    args_transform: ArgsTransform | None = None
    guard: Predicate | None = None

    def __post_init__(self) -> None:
        owner = "ToolCallPolicy"
        _c.nonempty_str(owner, "name", self.name)
        note = f"policy {self.name!r}"
        _c.maybe_callable(owner, "match", self.match, required=True, note=note)
        _c.maybe_callable(owner, "guard", self.guard, note=note)
        _c.maybe_callable(owner, "args_transform", self.args_transform, note=note)
        if self.model is not None and not isinstance(self.model, ModelConfig):
            raise _c.fail(owner, "model", "a ModelConfig or None", self.model, note)
        redirect = self.redirect_to
        if redirect is not None and (not isinstance(redirect, str) or not redirect.strip()):
            raise _c.fail(owner, "redirect_to", "a non-empty str or None", redirect, note)
        if self.model is None and redirect is None:
            raise ValueError(
                f"ToolCallPolicy.model or ToolCallPolicy.redirect_to must be set, got neither "
                f"(policy {self.name!r} would be a no-op)"
            )
        when = self.when_tool
        if when is not None:
            expected = "a non-empty str, a non-empty frozenset of non-empty str, or None"
            if isinstance(when, str):
                if not when.strip():
                    raise _c.fail(owner, "when_tool", expected, when, note)
            elif isinstance(when, frozenset):
                if not when or not all(isinstance(t, str) and t.strip() for t in when):
                    raise _c.fail(owner, "when_tool", expected, when, note)
            else:
                raise _c.fail(owner, "when_tool", expected, when, note)
            if redirect is None:
                raise ValueError(
                    f"ToolCallPolicy.when_tool requires redirect_to, got redirect_to=None ({note})"
                )
        if self.args_transform is not None and redirect is None:
            raise ValueError(
                f"ToolCallPolicy.args_transform requires redirect_to, got redirect_to=None ({note})"
            )

    def applies_to_tool(self, tool: str) -> bool:
        """Whether ``when_tool`` admits the emitted ``tool``."""
        when = self.when_tool
        if when is None:
            return True
        if isinstance(when, str):
            return when == tool
        return tool in when
