"""Tripwire: every private touch of the symfonic adapter against the installed symfonic.

The adapter reads or replaces symfonic-core internals only through
``seamscope.adapters.symfonic._private``; each test here fails when the
pinned symfonic changes one of them (a name, a log text, the gate's call
site), so an upgrade is noticed here rather than as a silent gap in the
telemetry.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
from typing import Any

import symfonic.core.callbacks.manager as sym_manager
import symfonic.core.nodes.react as sym_react
import symfonic.core.tool_offload_gate as sym_gate
from symfonic.agent import SymfonicAgent
from symfonic.agent.engine import _AgentModelResolver
from symfonic.core.callbacks import CallbackManager

from seamscope.adapters.symfonic import _private as private

from ._symfonic_support import Warehouse, build_agent, config


def _strings(module: Any) -> set[str]:
    """Every string constant of a module's source (adjacent literals joined)."""
    return {
        node.value
        for node in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_the_pinned_symfonic_is_installed() -> None:
    version = importlib.metadata.version("symfonic-core")
    assert private.PINNED == ".".join(version.split(".")[:2])


def test_an_agent_has_the_private_attributes_the_adapter_reads() -> None:
    agent, _ = build_agent([], config(), Warehouse().tools)
    deps = private.agent_deps(agent)
    assert deps is getattr(agent, private.AGENT_DEPS)
    assert isinstance(getattr(deps, private.DEPS_CAPABILITIES), dict)
    assert private.agent_config(agent) is agent.config  # the public property reads it
    resolver = private.model_resolver(deps)
    assert isinstance(resolver, _AgentModelResolver)
    for attribute in private.RESOLVER_ATTRIBUTES:
        assert hasattr(resolver, attribute), attribute
    assert inspect.iscoroutinefunction(SymfonicAgent.run)


class _First:
    async def on_agent_start(self, event: Any) -> None:
        return None


class _Second:
    pass


def test_the_public_callback_merge_keeps_seamscopes_handler_first() -> None:
    merged = CallbackManager([_First()]).merge(CallbackManager([_Second()]))
    assert [
        (f"{__name__}._First", True),
        (f"{__name__}._Second", False),
    ] == merged.describe_hook_handlers("on_agent_start")


def test_the_gate_is_looked_up_on_its_module_at_each_call() -> None:
    """symfonic imports ``evaluate_offload_gate`` inside the function that gates,
    so replacing the module attribute reaches every call."""
    assert callable(getattr(sym_gate, private.GATE_FUNCTION))
    gating = [
        node
        for node in ast.walk(ast.parse(inspect.getsource(sym_react)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            isinstance(inner, ast.ImportFrom)
            and inner.module == "tool_offload_gate"
            and any(alias.name == private.GATE_FUNCTION for alias in inner.names)
            for inner in ast.walk(node)
        )
    ]
    assert gating, "no function of symfonic.core.nodes.react imports the gate at call time"
    assert not any(
        isinstance(node, ast.ImportFrom)
        and node.module == "tool_offload_gate"
        and any(alias.name == private.GATE_FUNCTION for alias in node.names)
        for node in ast.parse(inspect.getsource(sym_react)).body
    ), "symfonic now binds the gate at import time: a module patch no longer reaches it"


def test_the_gate_call_site_has_the_local_the_adapter_reads() -> None:
    site = getattr(sym_react, private.GATE_SITE)
    assert private.GATE_SITE_LOCAL in site.__code__.co_varnames


def test_the_log_texts_the_adapter_matches_are_symfonics() -> None:
    assert private.REACT_LOGGER == sym_react.logger.name
    assert private.MANAGER_LOGGER == sym_manager.logger.name
    assert any(s.startswith(private.ADOPTER_DROP_PREFIX) for s in _strings(sym_react))
    manager_texts = _strings(sym_manager)
    for text in (private.DISPATCH_RAISED, private.DISPATCH_NOT_A_DICT, private.DISPATCH_MALFORMED):
        assert any(s.startswith(text) for s in manager_texts), text
