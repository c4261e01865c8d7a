"""Google ADK: seamscope's decisions inside ADK's own agent loop.

Install the extra, then ADK itself without its OpenTelemetry cap (it declares
``<=1.44``; seamscope needs ``>=1.45``): ``pip install 'seamscope[google-adk]'
&& pip install --no-deps google-adk==2.13.0``. This is the only seamscope
package that imports google-adk.

The manual (what it does, its decisions and limits, the spans of a run):
``docs/adapters/google-adk.md``.
"""

from __future__ import annotations

from seamscope.adapters.google_adk._plugin import SeamscopePlugin

__all__ = ["SeamscopePlugin"]
