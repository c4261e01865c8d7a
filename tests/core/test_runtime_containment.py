"""Values of the wrong type at run time are contained and recorded, never raised.

From adopter code (a predicate, a stage, a resolver) or from the caller (the
tools offered, an output size): the decision goes on, and what happened is on
the decision's record (a ContainedError, a degraded abstain) or in its
reason, so telemetry shows it.
"""

from __future__ import annotations

import gc
import logging
import re
import warnings
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from seamscope.decisions import (
    IntentRoutingStage,
    LazyRoutingStage,
    ModelConfig,
    OffloadGate,
    OffloadLedger,
    PricingTable,
    RolePaletteStage,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    StageOutcome,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import (
    ContainedError,
    GuardResult,
    ModelUsage,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyEvaluation,
    PolicyResult,
    Seam,
    StageOutcomeKind,
    WinnerSource,
)

from ._support import ScriptedStage, post_ctx, pre_ctx

DEFAULT = ModelConfig("claude-opus-4-6")
HAIKU = ModelConfig("claude-haiku-4-5")
RUN_BLOCK = ToolCall("call_1", "run_block", {"code": "select 1"})
DECISIONS = "seamscope.decisions"


def answers(value: Any) -> Any:
    def predicate(ctx: Any) -> Any:
        return value

    return predicate


async def _coroutine() -> bool:
    return True


def coroutine_answer(ctx: Any) -> Any:
    return _coroutine()


class BadBool:
    """A value whose truthiness raises (as a NumPy array's does)."""

    def __bool__(self) -> bool:
        raise ValueError("truth value is ambiguous")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == DECISIONS and r.levelno == 30]


@pytest.fixture
def no_unawaited_coroutine() -> Iterator[None]:
    """Fails the test when a coroutine is left unawaited (and so never closed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    assert [] == [str(w.message) for w in caught if "never awaited" in str(w.message)]


# -- match and guard return values ----------------------------------------------------------


NON_BOOLS = [
    pytest.param("false", id="str-false"),
    pytest.param("no", id="str-no"),
    pytest.param(re.search("sales", "show sales"), id="re-match"),
    pytest.param(1, id="one"),
    pytest.param(0, id="zero"),
    pytest.param([], id="empty-list"),
    pytest.param(None, id="none"),
]


def _non_bool(source: str, value: Any, policy: str) -> ContainedError:
    return ContainedError(
        source,
        "TypeError",
        f"{source} returned {type(value).__qualname__}, not bool (only True is a yes)",
        policy,
    )


@pytest.mark.parametrize("value", NON_BOOLS)
def test_a_match_that_answers_a_non_bool_is_an_error_no_match_and_logged_once(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    router = SeamRouter(
        [ToolCallPolicy(name="cheap", match=answers(value), model=HAIKU)], default_model=DEFAULT
    )
    with caplog.at_level(logging.WARNING, logger=DECISIONS):
        results = [router.pre_model(pre_ctx()) for _ in range(3)]
    error = _non_bool("match", value, "cheap")
    evaluation = PolicyEvaluation("cheap", Seam.PRE_MODEL, PolicyResult.ERROR, error=error)
    assert (
        [(DEFAULT, (evaluation,), (error,))] * 3,
        [
            f"policy 'cheap': match returned {type(value).__qualname__}, not bool; "
            "counted as an error (only True is a yes)"
        ],
    ) == ([(r.model, r.all_evaluations(), r.errors) for r in results], warnings_of(caplog))


@pytest.mark.parametrize("value", NON_BOOLS)
def test_a_post_match_that_answers_a_non_bool_never_redirects(value: Any) -> None:
    policy = ToolCallPolicy(name="sales", match=answers(value), redirect_to="fetch_data")
    record = (
        SeamRouter([policy], default_model=DEFAULT)
        .post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
        .records[0]
    )
    error = _non_bool("match", value, "sales")
    assert ("run_block", (error,)) == (record.final.name, tuple(record.errors))


@pytest.mark.parametrize("value", [pytest.param("ok", id="truthy"), pytest.param(0, id="falsy")])
def test_a_guard_that_answers_a_non_bool_is_a_guard_error_and_logged_once(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    policy = ToolCallPolicy(
        name="sales", match=answers(True), redirect_to="fetch_data", guard=answers(value)
    )
    router = SeamRouter([policy], default_model=DEFAULT)
    with caplog.at_level(logging.WARNING, logger=DECISIONS):
        records = [router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK]).records[0]]
        records.append(router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK]).records[0])
    error = _non_bool("guard", value, "sales")
    assert (
        [(GuardResult.ERROR, "run_block", (error,))] * 2,
        [
            f"policy 'sales': guard returned {type(value).__qualname__}, not bool; "
            "counted as an error (only True is a yes)"
        ],
    ) == ([(r.guard, r.final.name, tuple(r.errors)) for r in records], warnings_of(caplog))


def test_a_match_that_returns_a_coroutine_is_contained_as_an_error(
    no_unawaited_coroutine: None,
) -> None:
    router = SeamRouter(
        [ToolCallPolicy(name="async", match=coroutine_answer, model=HAIKU)], default_model=DEFAULT
    )
    result = router.pre_model(pre_ctx())
    error = ContainedError(
        "match",
        "TypeError",
        "match returned coroutine, an awaitable; predicates must be synchronous and return bool",
        "async",
    )
    assert (
        DEFAULT,
        WinnerSource.DEFAULT,
        (PolicyEvaluation("async", Seam.PRE_MODEL, PolicyResult.ERROR, error=error),),
        (error,),
    ) == (result.model, result.source, result.evaluations, result.errors)


def test_a_guard_that_returns_a_coroutine_is_contained_as_a_guard_error(
    no_unawaited_coroutine: None,
) -> None:
    policy = ToolCallPolicy(
        name="sales", match=answers(True), redirect_to="fetch_data", guard=coroutine_answer
    )
    record = (
        SeamRouter([policy], default_model=DEFAULT)
        .post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
        .records[0]
    )
    assert (GuardResult.ERROR, "run_block", [("guard", "TypeError", "sales")]) == (
        record.guard,
        record.final.name,
        [(e.source, e.error_type, e.policy) for e in record.errors],
    )


def test_a_match_whose_answer_has_a_raising_truthiness_is_contained_unread() -> None:
    # the answer is not a bool: its truthiness (which raises) is never read
    router = SeamRouter(
        [ToolCallPolicy(name="numpy", match=answers(BadBool()), model=HAIKU)],
        default_model=DEFAULT,
    )
    result = router.pre_model(pre_ctx())
    assert (DEFAULT, (_non_bool("match", BadBool(), "numpy"),)) == (
        result.model,
        result.errors,
    )


# -- stages that return the wrong thing ---------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "error_type", "message"),
    [
        (None, "TypeError", "stage returned NoneType, expected StageOutcome"),
        ("ab", "TypeError", "stage returned str, expected StageOutcome"),
        ({"tools": ["a"]}, "TypeError", "stage returned dict, expected StageOutcome"),
        (("a",), "TypeError", "stage returned tuple, expected StageOutcome"),
    ],
    ids=["none", "str", "dict", "tuple"],
)
def test_a_stage_that_returns_no_outcome_is_a_recorded_degraded_abstain(
    returned: Any, error_type: str, message: str
) -> None:
    result = SelectionPipeline([ScriptedStage("odd", returned)]).run(["a", "b"])
    record = result.records[0]
    assert (
        ("a", "b"),
        StageOutcomeKind.ABSTAIN,
        True,
        ContainedError("stage", error_type, message),
    ) == (result.tools, record.outcome, record.degraded, record.error)


def test_a_stage_that_returns_a_coroutine_is_contained_and_the_coroutine_closed(
    no_unawaited_coroutine: None,
) -> None:
    class AsyncByMistake:
        name = "async_stage"
        protects_forced = True

        def apply(self, tools: Any, ctx: Any) -> Any:
            return _coroutine()

    result = SelectionPipeline([AsyncByMistake()]).run(["a"])
    error = ContainedError("stage", "TypeError", "stage returned coroutine, expected StageOutcome")
    assert (("a",), error) == (result.tools, result.records[0].error)


def test_a_stage_that_selects_a_str_is_contained_naming_the_field() -> None:
    stage = ScriptedStage("letters", lambda tools: "ab")
    result = SelectionPipeline([stage]).run(["ab", "a", "b"])
    error = result.records[0].error
    assert (
        ("ab", "a", "b"),
        True,
        ("stage", "ValueError"),
        "StageOutcome.tools must be an iterable of tools (not a str) for a select, got 'ab'",
    ) == (
        result.tools,
        result.records[0].degraded,
        (error.source, error.error_type) if error else None,
        error.message if error else None,
    )


def test_the_contained_stage_error_reaches_the_observer() -> None:
    class Seen:
        def __init__(self) -> None:
            self.errors: list[Any] = []

        def end_stage(self, handle: object, record: Any) -> None:
            self.errors.append(record.error)

    seen = Seen()
    SelectionPipeline([ScriptedStage("odd", None)], observer=seen).run(["a"])
    error = ContainedError("stage", "TypeError", "stage returned NoneType, expected StageOutcome")
    assert [error] == seen.errors


# -- the tools the caller offers ------------------------------------------------------------


def test_routed_tool_names_given_as_one_str_are_that_one_name() -> None:
    ctx = build_dispatch_context(Seam.POST_MODEL, (), resolved_tool_names="fetch_data")
    call = ToolCall("call_1", "run_block")
    policy = ToolCallPolicy(name="to-f", match=answers(True), redirect_to="f")
    record = SeamRouter([policy], default_model=DEFAULT).post_model(ctx, [call]).records[0]
    assert (frozenset({"fetch_data"}), PaletteVerdict.DROPPED, "run_block") == (
        ctx.resolved_tool_names,
        record.palette,
        record.final.name,
    )


class NamedTool:
    name = "search"


def _raising_tools() -> Iterator[str]:
    yield "a"
    raise RuntimeError("registry went away")


@pytest.mark.parametrize(
    ("tools", "offered", "logged"),
    [
        ("ab", ("ab",), ["selection: tools given as one str, read as one tool"]),
        ({"name": "search"}, ("search",), ["selection: tools given as one dict, read as one tool"]),
        (NamedTool(), ("search",), ["selection: tools given as one NamedTool, read as one tool"]),
        (None, (), ["selection: tools=None read as no tools"]),
        (_raising_tools(), (), ["selection: reading the tools raised RuntimeError; no tools"]),
        (("a", "b"), ("a", "b"), []),
        ({"a", "b"}, ("a", "b"), []),
    ],
    ids=["str", "one-mapping", "one-object", "none", "raising-iterable", "tuple", "set"],
)
def test_tools_given_as_one_tool_are_read_as_one_tool(
    tools: Any, offered: tuple[str, ...], logged: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=DECISIONS):
        result = SelectionPipeline([]).run(tools)
    assert (offered, logged) == (tuple(sorted(result.offered)), warnings_of(caplog))


# -- what adopter callables of the stages return ------------------------------------------------

TOOLS = ("search", "fetch_data", "deploy")


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        (
            RolePaletteStage(resolver=lambda role: "search"),
            StageOutcome.select(("search",), "analyst palette (−2: fetch_data, deploy)"),
        ),
        (
            RolePaletteStage(resolver=lambda role: 5),
            StageOutcome.abstain("role resolver returned int, not names", degraded=True),
        ),
        (
            LazyRoutingStage(allowed_names=lambda ctx: "search"),
            StageOutcome.select(("search",), "procedural routing (−2: fetch_data, deploy)"),
        ),
        (
            LazyRoutingStage(allowed_names=lambda ctx: 5),
            StageOutcome.abstain("allowed_names returned int, not names; abstained", degraded=True),
        ),
        (
            IntentRoutingStage(verdict=lambda ctx: "knowledge"),
            StageOutcome.abstain("verdict str has no label; abstained", degraded=True),
        ),
    ],
    ids=["palette-str", "palette-int", "lazy-str", "lazy-int", "verdict-str"],
)
def test_stage_callables_that_return_the_wrong_shape(stage: Any, expected: StageOutcome) -> None:
    assert expected == stage.apply(TOOLS, SelectionContext(role="analyst"))


def test_a_verdict_whose_matched_keywords_are_one_str_keeps_that_one_tool() -> None:
    class Verdict:  # an adopter's own verdict object, not an IntentVerdict
        label = "action"
        matched_tool_keywords = "search"

    stage = IntentRoutingStage(
        verdict=Verdict(), trigger_keywords={"search": ["find"], "deploy": ["ship"]}
    )
    outcome = stage.apply(("search", "deploy", "fetch_data"), SelectionContext())
    assert ("search", "fetch_data") == outcome.tools


# -- the offload gate and the ledger --------------------------------------------------------

ACME = PricingTable({"acme-1": {"input": 5, "output": 25}}, use_genai_prices=False)


@pytest.mark.parametrize(
    "size", [None, "20000", True, object()], ids=["none", "str", "bool", "object"]
)
def test_an_output_size_that_is_not_a_number_never_fires(size: Any) -> None:
    decision = OffloadGate(pricing=ACME).evaluate(size, "acme-1")
    assert (False, OffloadReasonCode.BELOW_THRESHOLD, True) == (
        decision.fire,
        decision.reason_code,
        "not a finite number" in decision.reason,
    )


@pytest.mark.parametrize("model", [None, 5], ids=["none", "int"])
def test_a_model_name_that_is_not_a_str_is_unpriced(model: Any) -> None:
    decision = OffloadGate(pricing=ACME).evaluate(20_000, model)
    assert (False, OffloadReasonCode.UNPRICED_MODEL, "" if model is None else "5") == (
        decision.fire,
        decision.reason_code,
        decision.model_name,
    )


def test_one_carried_id_given_alone_is_read_as_that_one_offload() -> None:
    def account(carried: Any) -> Any:
        ledger = OffloadLedger(pricing=ACME)
        decision = OffloadGate(pricing=ACME, id_factory=lambda: "off-1").evaluate(20_000, "acme-1")
        ledger.record_offload(decision, conversation_id="c")
        return ledger.record_model_call(
            "c", model="acme-1", usage=ModelUsage(1000), carried=carried
        )

    alone, listed = account("off-1"), account(["off-1"])
    assert (alone, Decimal("0.1")) == (listed, listed.saving)


def test_an_id_factory_that_raises_or_returns_no_str_is_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from seamscope.decisions import OffloadGate

    def broken() -> str:
        raise RuntimeError("id service down")

    decisions = [
        OffloadGate(id_factory=factory).evaluate(20_000.0, "claude-opus-4-6")  # type: ignore[arg-type]
        for factory in (broken, lambda: 5, lambda: "")
    ]
    assert [(True, 16)] * 3 == [(d.fire, len(d.offload_id or "")) for d in decisions]
    assert 3 == sum("OffloadGate.id_factory" in r.getMessage() for r in caplog.records)


def test_the_ledger_contains_wrong_typed_values(caplog: pytest.LogCaptureFixture) -> None:
    from seamscope.decisions import ModelUsage, OffloadGate, OffloadLedger

    ledger = OffloadLedger()
    decision = OffloadGate(id_factory=lambda: "off-1").evaluate(20_000.0, "claude-opus-4-6")
    ledger.record_offload(decision, conversation_id={"user": 7})  # type: ignore[arg-type]
    ledger.record_offload("not a decision", conversation_id="c")  # type: ignore[arg-type]
    account = ledger.record_model_call(
        {"user": 7},
        model="claude-opus-4-6",
        usage=None,  # type: ignore[arg-type]
    )
    recall = ledger.record_recall(
        "{'user': 7}",
        "off-1",
        model="claude-opus-4-6",
        input_tokens=-5,
        output_tokens="x",  # type: ignore[arg-type]
    )
    settled = ledger.end_conversation("{'user': 7}")
    assert (ModelUsage(), 0, 0, ["off-1"], 1) == (
        account.usage,
        recall.input_tokens,
        recall.output_tokens,
        [s.offload_id for s in settled],
        settled[0].recalls,
    )
    assert 6 == sum("OffloadLedger." in r.getMessage() for r in caplog.records)
