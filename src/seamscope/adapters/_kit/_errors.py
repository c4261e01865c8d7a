"""``error.type`` names what the user's tool or model raised.

A framework wraps a tool's exception in its own (the Agents SDK's
``UserError`` around the tool's exception, pydantic-ai's ``ToolRetryError``
around a ``ModelRetry``): the wrapper is a framework class raised from the
user's exception (``__cause__``), or carrying it as the part it retries.
:func:`error_type` follows those links back to the exception the user's
code raised. A ``ModelRetry`` is the tool's own answer "try again": it is
an error of that execution (``error.type`` ``ModelRetry``), not of the run.
"""

from __future__ import annotations

from seamscope._internal import error_type

__all__ = ["error_type"]
