"""The adapter kit: the steps every framework adapter shares, each one code path.

* :mod:`._models`: which model really runs a call and the name every record
  gives it (``choose_model``, ``model_name_of``, ``note_unavailable``);
* :mod:`._errors`: the ``error.type`` of what the user's code raised
  (``error_type``, unwrapping a framework's wrappers);
* :mod:`._tokens`: the one token estimator (``estimate_tokens``);
* :mod:`._offload`: the stub of an offloaded output and the recall tool.

Adapters import these names from here, never the modules behind them.
"""

from seamscope.adapters._kit._errors import error_type
from seamscope.adapters._kit._models import (
    ModelChoice,
    choose_model,
    model_name_of,
    note_unavailable,
)
from seamscope.adapters._kit._offload import RECALL_TOOL, offload_stub
from seamscope.adapters._kit._tokens import estimate_tokens

__all__ = [
    "RECALL_TOOL",
    "ModelChoice",
    "choose_model",
    "error_type",
    "estimate_tokens",
    "model_name_of",
    "note_unavailable",
    "offload_stub",
]
