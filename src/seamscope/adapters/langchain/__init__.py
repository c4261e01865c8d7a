"""LangChain v1 agent middleware: seamscope's decisions inside ``create_agent``.

Install the extra: ``pip install 'seamscope[langchain]'``. This is the only
seamscope package that imports LangChain; the rest of seamscope works
without it.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/langchain.md``.
"""

from __future__ import annotations

from seamscope.adapters.langchain._middleware import SeamscopeMiddleware

__all__ = ["SeamscopeMiddleware"]
