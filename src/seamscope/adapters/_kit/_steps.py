"""The loop's shared steps, one function each, for the adapters built on
:class:`~seamscope.loop.DecisionLayer`.

An adapter translates a framework's event into one of these calls and hands
it the open :class:`~seamscope.loop.Iteration`; the step makes the
iteration's context current for its own decisions (whatever task or thread
the framework's hook runs in), so their spans are children of the iteration:

* :func:`plan_model`: the PRE seam and the one model rule (one
  :func:`~seamscope.adapters._kit.choose_model`, one
  :func:`~seamscope.adapters._kit.note_unavailable`);
* :func:`report_model_call`: a model call's usage on its chat span and in the
  ledger (the stubs its prompt carried);
* :func:`post_model`: the POST seam over the emitted tool calls;
* :func:`structured_answers`: the framework's structured-output answer calls,
  one ``seamscope.dispatch`` span each, never routed;
* :func:`account_tool_output`: after a tool ran, a recall's real cost, or the
  offload gate on a large text output (a fired offload keeps the output for
  recall and gives the stub really sent, priced by the one token estimator),
  and a re-read of a result a compaction cleared.

Each step lets the loop's own exceptions through and never raises one of
its own beyond what :class:`~seamscope.loop.Iteration` raises: the caller
contains it (``failed(hook)``) as it does any of its hook's work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from seamscope.adapters._kit._models import (
    ModelChoice,
    choose_model,
    model_name_of,
    note_unavailable,
)
from seamscope.adapters._outputs import Outputs
from seamscope.decisions import ModelUsage, PostModelResult, PreModelResult, ToolCall
from seamscope.decisions.records import (
    CarriedStub,
    DispatchRecord,
    GuardResult,
    PaletteVerdict,
    RecallStatus,
    Seam,
    WinnerSource,
)
from seamscope.loop import RECALL_TOOL, ChatCall, Iteration, estimate_tokens

__all__ = [
    "ModelPlan",
    "ModelStep",
    "account_tool_output",
    "model_answered",
    "plan_model",
    "post_model",
    "report_model_call",
    "rewritten",
    "structured_answers",
]


@dataclass(frozen=True, slots=True)
class ModelPlan:
    """What the PRE seam chose and the model a call really runs on.

    ``params``: the chosen model's parameters, for the framework's settings.
    """

    pre: PreModelResult
    choice: ModelChoice

    @property
    def params(self) -> Mapping[str, Any]:
        return self.pre.model.params


def plan_model(
    iteration: Iteration,
    *,
    models: Mapping[str, Any],
    own: Any,
    name_of: Callable[[Any], str | None] = model_name_of,
) -> ModelPlan:
    """The PRE seam, then the model the call runs on: ``models``' entry for
    the choice, else the request's ``own`` model (named by ``name_of``);
    a choice that is not callable here is reported once, the same way in
    every adapter. Run after the iteration's tool selection."""
    with iteration.current():
        pre = iteration.pre_model()
        default = iteration.default_model
        choice = choose_model(pre.model.model_name, default, models, own, name_of=name_of)
        note_unavailable(iteration, pre, choice)
    return ModelPlan(pre, choice)


def report_model_call(
    call: ChatCall | None,
    usage: ModelUsage | None,
    *,
    response_model: Any = None,
    carried: Iterable[str | CarriedStub] | None = None,
    present: Iterable[CarriedStub] = (),
    outputs: Outputs | None = None,
) -> None:
    """A model call's usage on its chat span and in the ledger. ``response_model``:
    the model the response names (a non-empty str, else ignored); ``carried``:
    the offloads whose stub the call's prompt held (ids, or records of the
    offload store's, :meth:`Outputs.carried`), ``present`` the store-held
    ones whose output a recall brought back; ``outputs``: whose store the
    turn's offloads live in."""
    if call is None or usage is None:
        return
    if outputs is not None:
        call.iteration.turn.store = outputs.store
    named = response_model if isinstance(response_model, str) and response_model else None
    call.report(usage, response_model=named, carried=carried, present=present)


class ModelStep(Protocol):
    """An adapter's open model call: its chat span, what its prompt carried,
    and its usage once it answered (what its tool calls' recalls charge)."""

    chat: ChatCall | None
    usage: ModelUsage | None
    carried: tuple[Any, ...]
    present: tuple[Any, ...]


def model_answered(
    step: ModelStep, usage: ModelUsage | None, *, outputs: Outputs, response_model: Any = None
) -> None:
    """``step``'s model call answered with ``usage``: kept on the step, and
    reported on its chat span and in the ledger with what its prompt carried
    (:func:`report_model_call`)."""
    step.usage = usage
    report_model_call(
        step.chat,
        usage,
        response_model=response_model,
        carried=step.carried,
        present=step.present,
        outputs=outputs,
    )


def post_model(
    iteration: Iteration,
    emitted: Any,
    *,
    calls: Sequence[Any] | None = None,
    runnable: Collection[str] | None = None,
) -> PostModelResult:
    """The POST seam over the emitted message (``calls``: the ones the
    framework will dispatch, when not all of the message's; ``runnable``: the
    tools it lets run, when it refuses a call of any other)."""
    with iteration.current():
        return iteration.post_model(emitted, calls=calls, runnable=runnable)


def rewritten(post: PostModelResult, positions: Sequence[int]) -> Iterator[tuple[int, ToolCall]]:
    """The calls the POST seam changed, each as (where the emitted call sits in
    the framework's message, per ``positions``; the call that is to run)."""
    for record in post.records:
        if record.final != record.emitted and record.index < len(positions):
            yield positions[record.index], record.final


def structured_answers(
    iteration: Iteration,
    emitted: Any,
    answers: Sequence[ToolCall],
) -> None:
    """One ``seamscope.dispatch`` span per structured-output answer call (the
    framework's own output tool: LangChain's ``ToolStrategy`` tool,
    pydantic-ai's ``final_result``), under the iteration, its record marked
    ``structured_output``. The framework consumes the call itself: it is never
    handed to the tool runner (no ``execute_tool`` span) and never goes
    through the POST seam, so no policy redirects it (a redirect would take
    the caller's structured answer away); it dispatches as emitted."""
    if not answers:
        return
    with iteration.current():
        observer = iteration.turn.layer.observer
        ctx = iteration.context(Seam.POST_MODEL, emitted_message=emitted)
        for index, call in enumerate(answers):
            handle = observer.start_dispatch(ctx, index, call)
            observer.end_dispatch(
                handle,
                DispatchRecord(
                    index,
                    call,
                    call,
                    None,
                    None,
                    GuardResult.NONE,
                    False,
                    False,
                    PaletteVerdict.KEPT,
                    WinnerSource.NONE,
                    structured_output=True,
                ),
            )


def account_tool_output(
    iteration: Iteration,
    call: ToolCall,
    text: str | None,
    *,
    outputs: Outputs,
    scope: str,
    usage: ModelUsage | None,
    offload: bool = True,
    reread: Callable[[ToolCall], str | None] | None = None,
) -> str | None:
    """After a tool answered: the stub that replaces its output, or None.

    A recall (``call`` is the recall tool) that found its output (the
    outcome ``outputs`` kept when the recall tool answered) is a real cost in
    the ledger: the recalled text comes back as input (the one token
    estimator), the model call's output that emitted it with the first
    recall of the iteration (``usage``). Any other tool's text output
    (``text``; None: not a text) at or above the gate's threshold is put to
    the offload gate; when it fires, the offload store of ``outputs`` keeps
    the text for recall (or no offload is made) and the stub really sent is
    returned (the ledger prices that stub, not the gate's assumed size);
    ``offload`` False: never (recalls and re-reads are still accounted).
    ``scope``: whose offloads a recall may read (the conversation, else the
    adapter's run). ``reread``: the id of a compaction whose cleared result
    this call fetches again (a framework's context editing), else None; its
    text is then a real cost, as a recall's is.
    """
    with iteration.current():
        # where this turn's offloads live, also on a worker whose first event of
        # the conversation is this call (a run resumed at its tools): a recall's
        # accounts go there, so the one settlement counts them
        iteration.turn.store = outputs.store
        if call.name == RECALL_TOOL:
            outcome = outputs.outcome(call.id) if call.id else None
            if outcome is not None and outcome.status is RecallStatus.FOUND:
                iteration.recall(
                    outcome.offload_id,
                    input_tokens=outcome.tokens,
                    output_tokens=0 if usage is None else usage.output_tokens,
                    call_id=call.id,
                )
            return None
        if text is None:
            return None
        tokens = estimate_tokens(text)  # once: the re-read, the threshold and the gate
        compaction_id = None if reread is None else reread(call)
        if compaction_id is not None:
            iteration.recall(
                compaction_id,
                input_tokens=tokens,
                output_tokens=0 if usage is None else usage.output_tokens,
                call_id=call.id,
            )
        if not offload or tokens < iteration.threshold_tokens:
            return None
        iteration.turn.offload_scope = scope
        decision = iteration.offload(call, text, tokens=tokens)
        if not decision.fire or decision.offload_id is None:
            return None
        return iteration.sent_stub(decision, call.name)
