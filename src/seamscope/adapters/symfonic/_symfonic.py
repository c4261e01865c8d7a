"""The symfonic-core objects this adapter touches, imported in one place.

Importing them here first gives a clear error when the extra is missing;
:mod:`._install` says why each private one is needed.
"""

from __future__ import annotations

try:
    import symfonic.core.tool_offload_gate as sym_gate
    from symfonic.agent.engine import _AgentModelResolver
    from symfonic.core.callbacks import CallbackManager
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seamscope.adapters.symfonic needs symfonic-core: pip install 'seamscope[symfonic]'"
    ) from exc

__all__ = ["CallbackManager", "_AgentModelResolver", "sym_gate"]
