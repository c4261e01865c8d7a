"""The decision core reports every decision through the observer protocol."""

from __future__ import annotations

import contextlib
from typing import Any

from seamscope.decisions import (
    DecisionObserver,
    ModelConfig,
    NoopObserver,
    OffloadGate,
    OffloadGateInputs,
    SeamRouter,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.decisions._observer import guard_observer
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import GateCall, Seam
from seamscope.decisions.selection import (
    ForcedChoiceStage,
    RolePaletteStage,
    SelectionContext,
    SelectionPipeline,
)

from ._support import USER, Predicate, emitted

HOOKS = [
    "start_selection",
    "end_selection",
    "start_stage",
    "end_stage",
    "start_pre_model",
    "end_pre_model",
    "start_post_model",
    "end_post_model",
    "start_dispatch",
    "end_dispatch",
    "start_offload_gate",
    "end_offload_gate",
    "on_offload_accounted",
    "on_offload_settled",
    "capture",
]


class Recorder:
    """Records every hook call; start hooks return handles h1, h2, …"""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self._next = 0

    def _start(self, hook: str, *args: Any) -> str:
        self._next += 1
        handle = f"h{self._next}"
        self.calls.append((hook, handle, *args))
        return handle

    def start_selection(self, ctx: Any, offered: Any) -> str:
        return self._start("start_selection", ctx, offered)

    def end_selection(self, handle: Any, result: Any) -> None:
        self.calls.append(("end_selection", handle, result))

    def start_stage(self, ctx: Any, index: int, stage: Any) -> str:
        return self._start("start_stage", ctx, index, stage)

    def end_stage(self, handle: Any, record: Any) -> None:
        self.calls.append(("end_stage", handle, record))

    def start_pre_model(self, ctx: Any) -> str:
        return self._start("start_pre_model", ctx)

    def end_pre_model(self, handle: Any, result: Any) -> None:
        self.calls.append(("end_pre_model", handle, result))

    def start_post_model(self, ctx: Any, calls: Any) -> str:
        return self._start("start_post_model", ctx, calls)

    def end_post_model(self, handle: Any, result: Any) -> None:
        self.calls.append(("end_post_model", handle, result))

    def start_dispatch(self, ctx: Any, index: int, call: Any) -> str:
        return self._start("start_dispatch", ctx, index, call)

    def end_dispatch(self, handle: Any, record: Any) -> None:
        self.calls.append(("end_dispatch", handle, record))

    def start_offload_gate(self, inputs: Any, call: Any) -> str:
        return self._start("start_offload_gate", inputs, call)

    def end_offload_gate(self, handle: Any, decision: Any) -> str:
        self.calls.append(("end_offload_gate", handle, decision))
        return f"link-{handle}"

    capture_content = False

    def iteration(self, index: int, *, conversation_id: Any, agent_name: Any) -> Any:
        return contextlib.nullcontext()

    def capture(self, target: Any, key: str, value: Any) -> None:
        self.calls.append(("capture", target, key, value))

    def on_middleware_decision(self, decision: Any) -> str:
        self.calls.append(("on_middleware_decision", decision))
        return "link-middleware"

    def on_offload_accounted(self, entry: Any) -> None:
        self.calls.append(("on_offload_accounted", entry))

    def on_offload_settled(self, settlement: Any) -> None:
        self.calls.append(("on_offload_settled", settlement))


class Raising:
    """An observer that raises in every hook."""

    def __getattr__(self, name: str) -> Any:
        if name in HOOKS:

            def hook(*args: Any) -> Any:
                raise RuntimeError(f"{name} is broken")

            return hook
        raise AttributeError(name)


OFFERED = ("run_block", "fetch_data", "deploy")
RUN_BLOCK = ToolCall("call_1", "run_block", {"code": "select 1"})
SEARCH = ToolCall("call_2", "search", {"q": "sales"})
GATE_CALL = GateCall("conv-1", "sales-agent", "fetch_data", "call_1")


def scripted_iteration(observer: Any, calls: tuple[ToolCall, ...] = (RUN_BLOCK, SEARCH)) -> Any:
    forced = ForcedChoiceStage(resolver=lambda ctx: None)
    palette = RolePaletteStage(resolver=lambda role: ["run_block", "fetch_data"], role="analyst")
    pipeline = SelectionPipeline([forced, palette], observer=observer)
    selection = pipeline.run(OFFERED, SelectionContext(messages=(USER,)))

    router = SeamRouter(
        [
            ToolCallPolicy(
                name="sales",
                match=Predicate(True),
                model=ModelConfig("claude-haiku-4-5"),
                when_tool="run_block",
                redirect_to="fetch_data",
            ),
            ToolCallPolicy(name="audit", match=Predicate(False), redirect_to="run_sql"),
        ],
        default_model="claude-opus-4-6",
        observer=observer,
    )
    pre_ctx = build_dispatch_context(Seam.PRE_MODEL, [USER], resolved_tool_names=selection.selected)
    pre = router.pre_model(pre_ctx)
    post_ctx = build_dispatch_context(
        Seam.POST_MODEL,
        [USER],
        resolved_tool_names=selection.selected,
        emitted_message=emitted(*calls),
    )
    post = router.post_model(post_ctx, calls)

    gate = OffloadGate(observer=observer, id_factory=lambda: "off-1")
    decision = gate.evaluate(20_000, "claude-opus-4-6", GATE_CALL)
    return {
        "stages": (forced, palette),
        "selection": selection,
        "pre_ctx": pre_ctx,
        "pre": pre,
        "post_ctx": post_ctx,
        "post": post,
        "decision": decision,
    }


def test_the_exact_hook_sequence_of_one_iteration() -> None:
    recorder = Recorder()
    it = scripted_iteration(recorder)
    forced, palette = it["stages"]
    selection, pre, post = it["selection"], it["pre"], it["post"]
    sel_ctx = SelectionContext(messages=(USER,), offered=OFFERED)
    assert [
        ("start_selection", "h1", sel_ctx, OFFERED),
        ("start_stage", "h2", sel_ctx, 0, forced),
        ("end_stage", "h2", selection.records[0]),
        ("start_stage", "h3", sel_ctx, 1, palette),
        ("end_stage", "h3", selection.records[1]),
        ("end_selection", "h1", selection),
        ("start_pre_model", "h4", it["pre_ctx"]),
        ("end_pre_model", "h4", pre),
        ("start_post_model", "h5", it["post_ctx"], (RUN_BLOCK, SEARCH)),
        ("start_dispatch", "h6", it["post_ctx"], 0, RUN_BLOCK),
        ("end_dispatch", "h6", post.records[0]),
        ("start_dispatch", "h7", it["post_ctx"], 1, SEARCH),
        ("end_dispatch", "h7", post.records[1]),
        ("end_post_model", "h5", post),
        (
            "start_offload_gate",
            "h8",
            OffloadGateInputs(20_000.0, 5, 0.5, "claude-opus-4-6"),
            GATE_CALL,
        ),
        ("end_offload_gate", "h8", it["decision"]),
    ] == recorder.calls


def test_the_records_the_hooks_receive_are_the_decisions() -> None:
    recorder = Recorder()
    it = scripted_iteration(recorder)
    evaluations = [
        e
        for c in recorder.calls
        if c[0] in ("end_pre_model", "end_dispatch")
        for e in c[2].all_evaluations()
    ]
    assert (
        [
            ("sales", "pre_model", "matched"),
            ("sales", "post_model", "matched"),
            ("sales", "post_model", "skipped"),
            ("audit", "post_model", "not_matched"),
        ],
        ("fetch_data", "search"),
        "off-1",
    ) == (
        [(e.policy, e.seam, e.result) for e in evaluations],
        tuple(c.name for c in it["post"].calls),
        recorder.calls[-1][2].offload_id,
    )


def test_a_turn_without_tool_calls_reports_an_empty_post_seam() -> None:
    recorder = Recorder()
    it = scripted_iteration(recorder, calls=())
    post_hooks = [c for c in recorder.calls if c[0].endswith(("post_model", "dispatch"))]
    assert [
        ("start_post_model", "h5", it["post_ctx"], ()),
        ("end_post_model", "h5", it["post"]),
    ] == post_hooks


def test_an_observer_raising_in_every_hook_never_changes_a_decision() -> None:
    quiet = scripted_iteration(None)
    broken = scripted_iteration(Raising())
    keys = ["selection", "pre", "post", "decision"]
    assert [quiet[k] for k in keys] == [broken[k] for k in keys]


def test_guard_observer_contains_and_keeps_the_errors() -> None:
    guarded = guard_observer(Raising())
    handle = guarded.start_pre_model(None)
    guarded.end_pre_model(handle, None)
    assert (None, [("start_pre_model", "RuntimeError"), ("end_pre_model", "RuntimeError")]) == (
        handle,
        [(hook, type(exc).__name__) for hook, exc in guarded.errors],
    )


def test_guard_observer_tolerates_an_observer_missing_hooks() -> None:
    class OnlyGate:
        def __init__(self) -> None:
            self.decisions: list[Any] = []

        def end_offload_gate(self, handle: Any, decision: Any) -> None:
            self.decisions.append(decision)

    partial = OnlyGate()
    it = scripted_iteration(partial)
    assert [it["decision"]] == partial.decisions


def test_guard_observer_defaults_and_trust() -> None:
    class Trusted(Recorder):
        never_raises = True

    trusted = Trusted()
    assert (NoopObserver, True, True) == (
        type(guard_observer(None)),
        guard_observer(trusted) is trusted,
        isinstance(Recorder(), DecisionObserver),
    )


def test_evaluate_linked_returns_what_end_offload_gate_returned() -> None:
    recorder = Recorder()  # not never_raises: reached through the guard
    gate = OffloadGate(observer=recorder, id_factory=lambda: "off-1")
    decision, link = gate.evaluate_linked(20_000, "claude-opus-4-6", GATE_CALL)
    assert ("link-h1", "off-1") == (link, decision.offload_id)
    assert [
        (
            "start_offload_gate",
            "h1",
            OffloadGateInputs(20_000.0, 5, 0.5, "claude-opus-4-6"),
            GATE_CALL,
        ),
        ("end_offload_gate", "h1", decision),
    ] == recorder.calls
    # evaluate() is the same decision without the link
    assert decision == OffloadGate(observer=Recorder(), id_factory=lambda: "off-1").evaluate(
        20_000, "claude-opus-4-6", GATE_CALL
    )


def test_evaluate_linked_without_a_link() -> None:
    for observer in (None, NoopObserver(), Raising()):
        decision, link = OffloadGate(observer=observer).evaluate_linked(100, "claude-opus-4-6")
        assert (None, False) == (link, decision.fire)
