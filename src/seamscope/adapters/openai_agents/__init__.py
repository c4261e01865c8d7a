"""OpenAI Agents SDK (placeholder docstring)."""

from __future__ import annotations

from seamscope.adapters.openai_agents._runner import SeamscopeRunner

__all__ = ["SeamscopeRunner"]
