"""Google ADK: seamscope's decisions inside ADK's own agent loop.

Install the extra: ``pip install 'seamscope[google-adk]'`` (google-adk
2.13.0). This is the only seamscope package that imports google-adk.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/google-adk.md``.
"""

from __future__ import annotations

__all__: list[str] = []
