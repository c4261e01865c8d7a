"""An adapter's options, resolved the same way everywhere: the role of a turn
and the adopter's scope of a run.

``role`` is a str, a callable of the framework's object for the turn (an
agent, a run context) or None (the framework's own agent name, when it has
one); ``scope`` a mapping, a callable of the run's context or deps, or None.
A callable that raises is contained (``failed(hook)``) and counts as no
role or scope; anything that is not a non-empty str (role) or a mapping
(scope) counts as none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["resolve_role", "resolve_scope"]


def resolve_role(
    role: Any, subject: Any, *, default: Any = None, failed: Callable[[str], None], hook: str
) -> str | None:
    """The role for ``subject``: ``role(subject)`` if callable, ``role`` if
    given, else ``default`` (the framework's agent name)."""
    if callable(role):
        try:
            role = role(subject)
        except Exception:
            failed(hook)
            return None
    elif role is None:
        role = default
    return role if isinstance(role, str) and role else None


def resolve_scope(
    scope: Any, subject: Any, *, failed: Callable[[str], None], hook: str
) -> Mapping[str, Any] | None:
    """The adopter's scope for ``subject``: ``scope(subject)`` if callable, else ``scope``."""
    if callable(scope):
        try:
            scope = scope(subject)
        except Exception:
            failed(hook)
            return None
    return scope if isinstance(scope, Mapping) else None
