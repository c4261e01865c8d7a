"""symfonic-core 9.12's private surface: every private touch of the adapter, here.

symfonic 9.12's public hooks are its callbacks (``CallbackManager.add``/
``merge``, ``BaseAgentDeps.register``/``get``); :mod:`._install` uses them
where they reach. What they do not reach (why each is needed is in
:mod:`._install`) is read or replaced only through this module: private
attribute names, the gate function looked up on its module, the gate's
call site read from the stack, and the log texts symfonic writes where it
has no hook. ``tests/adapters/test_symfonic_private.py`` checks each
against the installed symfonic (a tripwire: it fails when the pinned
version changes one).
"""

from __future__ import annotations

import sys
from typing import Any

from seamscope.adapters.symfonic._symfonic import CallbackManager, _AgentModelResolver, sym_gate

__all__ = [
    "ADOPTER_DROP_PREFIX",
    "AGENT_CONFIG",
    "AGENT_DEPS",
    "DEPS_CAPABILITIES",
    "DISPATCH_HOOK",
    "DISPATCH_MALFORMED",
    "DISPATCH_NOT_A_DICT",
    "DISPATCH_RAISED",
    "GATE_FUNCTION",
    "GATE_SITE",
    "GATE_SITE_LOCAL",
    "MANAGER_LOGGER",
    "PINNED",
    "REACT_LOGGER",
    "RESOLVER_ATTRIBUTES",
    "agent_config",
    "agent_deps",
    "gate",
    "gate_site",
    "model_resolver",
    "resolver_get",
    "resolver_set",
    "set_agent_config",
    "set_gate",
    "unregister",
]

PINNED = "9.12"
"""The symfonic-core minor version this surface was read from."""

AGENT_DEPS = "_deps"
"""``SymfonicAgent._deps``: its ``BaseAgentDeps`` (no public accessor)."""
AGENT_CONFIG = "_config"
"""``SymfonicAgent._config``: the frozen ``FrameworkConfig`` its POST seam reads."""
DEPS_CAPABILITIES = "_capabilities"
"""``BaseAgentDeps._capabilities``: the registry (no public way to unregister)."""
RESOLVER_ATTRIBUTES = ("_tool_call_policies", "_resolver", "_snapshot_default")
"""``_AgentModelResolver``'s PRE-seam policies, role resolver and fallback model."""
GATE_FUNCTION = "evaluate_offload_gate"
"""The gate function symfonic looks up on ``symfonic.core.tool_offload_gate`` per call."""
GATE_SITE = "_maybe_compact_tool_results"
"""The symfonic function on the stack whose local :data:`GATE_SITE_LOCAL` is
the ToolMessage being gated (the gate is given only the economics)."""
GATE_SITE_LOCAL = "msg"
REACT_LOGGER = "symfonic.core.nodes.react"
ADOPTER_DROP_PREFIX = "on_tool_call_dispatch: rewrite targets unregistered tool"
"""symfonic's WARNING when its palette gate drops an adopter rewrite (4 arguments:
the adopter's target first, the call id last)."""
MANAGER_LOGGER = "symfonic.core.callbacks.manager"
DISPATCH_HOOK = "on_tool_call_dispatch"
DISPATCH_RAISED = "Callback handler %r raised in on_tool_call_dispatch"
DISPATCH_NOT_A_DICT = "Callback handler %r returned non-dict from on_tool_call_dispatch"
DISPATCH_MALFORMED = "Callback handler %r returned malformed on_tool_call_dispatch rewrite"


def agent_deps(agent: Any) -> Any:
    return getattr(agent, AGENT_DEPS, None)


def agent_config(agent: Any) -> Any:
    return getattr(agent, AGENT_CONFIG, None)


def set_agent_config(agent: Any, config: Any) -> None:
    setattr(agent, AGENT_CONFIG, config)


def model_resolver(deps: Any) -> Any:
    """The agent's ``_AgentModelResolver`` (registered in its deps by its class)."""
    return None if deps is None else deps.get(_AgentModelResolver)


def resolver_get(resolver: Any, attribute: str) -> Any:
    if attribute not in RESOLVER_ATTRIBUTES:
        raise AttributeError(attribute)
    return getattr(resolver, attribute)


def resolver_set(resolver: Any, attribute: str, value: Any) -> None:
    if attribute not in RESOLVER_ATTRIBUTES:
        raise AttributeError(attribute)
    setattr(resolver, attribute, value)


def unregister(deps: Any, capability: type = CallbackManager) -> None:
    """Remove a capability the agent had none of before seamscope registered one."""
    capabilities = getattr(deps, DEPS_CAPABILITIES, None)
    if isinstance(capabilities, dict):
        capabilities.pop(capability, None)


def gate() -> Any:
    return getattr(sym_gate, GATE_FUNCTION)


def set_gate(function: Any) -> None:
    setattr(sym_gate, GATE_FUNCTION, function)


def gate_site() -> tuple[str | None, str | None]:
    """(tool_call_id, tool_name) of the ToolMessage symfonic is gating, if visible:
    the local :data:`GATE_SITE_LOCAL` of the :data:`GATE_SITE` frame on the
    stack. Read-only and best effort."""
    try:
        frame: Any = sys._getframe(1)
        for _ in range(16):
            if frame is None:
                break
            if frame.f_code.co_name == GATE_SITE:
                msg = frame.f_locals.get(GATE_SITE_LOCAL)
                call_id = str(getattr(msg, "tool_call_id", "") or "") or None
                name = str(getattr(msg, "name", "") or "") or None
                return call_id, name
            frame = frame.f_back
    except Exception:
        pass
    return None, None
