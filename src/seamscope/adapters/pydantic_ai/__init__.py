"""pydantic-ai: seamscope's decisions inside pydantic-ai's own agent loop.

Install the extra: ``pip install 'seamscope[pydantic-ai]'`` (pydantic-ai-slim
2.68.0). This is the only seamscope package that imports pydantic-ai.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/pydantic-ai.md``.
"""

from __future__ import annotations

from seamscope.adapters.pydantic_ai._capability import SeamscopeCapability

__all__ = ["SeamscopeCapability"]
