"""Strands Agents: seamscope's decisions inside Strands' own agent loop.

``Agent(..., plugins=[SeamscopePlugin(layer)])``. This is the only seamscope
package that imports strands-agents.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/strands.md``.
"""

from __future__ import annotations

from seamscope.adapters.strands._plugin import SeamscopePlugin

__all__ = ["SeamscopePlugin"]
