"""OpenAI Agents SDK: seamscope's decisions inside the SDK's own ``Runner``.

Install the extra: ``pip install 'seamscope[openai-agents]'`` (openai-agents
0.24.0). This is the only seamscope package that imports the SDK.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/openai-agents.md``.
"""

from __future__ import annotations

from seamscope.adapters.openai_agents._runner import SeamscopeRunner

__all__ = ["SeamscopeRunner"]
