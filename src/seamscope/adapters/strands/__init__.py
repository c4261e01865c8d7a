"""Strands Agents: seamscope's decisions inside Strands' own agent loop.

``Agent(..., plugins=[SeamscopePlugin(layer)])``. Install the extra, then
Strands itself and its threading instrumentation without resolution (their
OpenTelemetry pins are one patch release behind seamscope's):
``pip install 'seamscope[strands]' && pip install --no-deps
strands-agents==1.62.0 opentelemetry-instrumentation-threading==0.66b1``.
This is the only seamscope package that imports strands-agents.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/strands.md``.
"""

from __future__ import annotations

from seamscope.adapters.strands._plugin import SeamscopePlugin

__all__ = ["SeamscopePlugin"]
