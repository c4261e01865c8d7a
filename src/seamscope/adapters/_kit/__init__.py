"""The adapter kit: the steps every framework adapter shares, each one code path.

* :mod:`._models`: which model really runs a call and the name every record
  gives it (``choose_model``, ``model_name_of``, ``note_unavailable``);
* :mod:`._frame`: an adapter's options checked once (``check_options``, a
  frozen ``Options``) and the one recall tool (``RECALL``: name, description,
  JSON schema);
* :mod:`._options`: the role of a turn and the adopter's scope of a run
  (``resolve_role``, ``resolve_scope``);
* :mod:`._errors`: the ``error.type`` of what the user's code raised
  (``error_type``, unwrapping a framework's wrappers);
* :mod:`._compactions`: the offload gate asked about a framework's own
  offload and its record for the other workers (``gate_compaction``,
  ``priced_as_loss``, ``compaction_record``);
* :mod:`._conversations`: what an adapter remembers per conversation, for a
  bounded number of them (``Conversations``);
* :mod:`._steps`: the loop's shared steps for the adapters built on
  ``DecisionLayer`` (``plan_model``: the PRE seam and one model rule;
  ``report_model_call``; ``post_model``; ``structured_answers``: the
  framework's structured-output calls, never routed; ``account_tool_output``:
  recall cost, offload gate and the stub really sent);
* from :mod:`seamscope.loop`: the one token estimator (``estimate_tokens``),
  the stub of an offloaded output and the recall tool.

The spans themselves are the loop's: ``layer.start_turn()``,
``turn.start_iteration()``, ``iteration.start_chat()``,
``iteration.start_tool(call)``, each ended once with ``stop()``/``fail()``
from whichever hook ends it.

Adapters import these names from here, never the modules behind them.
"""

from seamscope.adapters._kit._compactions import (
    compaction_record,
    gate_compaction,
    keep_compaction,
    priced_as_loss,
)
from seamscope.adapters._kit._conversations import Conversations
from seamscope.adapters._kit._errors import error_type
from seamscope.adapters._kit._frame import RECALL, Frame, Options, RecallSpec, check_options
from seamscope.adapters._kit._models import (
    ModelChoice,
    choose_model,
    model_name_of,
    note_unavailable,
)
from seamscope.adapters._kit._options import resolve_role, resolve_scope
from seamscope.adapters._kit._steps import (
    ModelPlan,
    ModelStep,
    account_tool_output,
    model_answered,
    plan_model,
    post_model,
    report_model_call,
    rewritten,
    structured_answers,
)
from seamscope.loop import RECALL_TOOL, estimate_tokens, offload_stub

__all__ = [
    "RECALL",
    "RECALL_TOOL",
    "Conversations",
    "Frame",
    "ModelChoice",
    "ModelPlan",
    "ModelStep",
    "Options",
    "RecallSpec",
    "account_tool_output",
    "check_options",
    "choose_model",
    "compaction_record",
    "error_type",
    "estimate_tokens",
    "gate_compaction",
    "keep_compaction",
    "model_answered",
    "model_name_of",
    "note_unavailable",
    "offload_stub",
    "plan_model",
    "post_model",
    "priced_as_loss",
    "report_model_call",
    "resolve_role",
    "resolve_scope",
    "rewritten",
    "structured_answers",
]
