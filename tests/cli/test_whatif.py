"""``seamscope whatif``: the recorded course re-settled, exactly under the recorded
config, and counterfactually under a changed one."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests.cli._support import export_line, span, write_lines

from seamscope.cli import main
from seamscope.cli._plan import langchain_part, plan, reference_part
from seamscope.decisions._pricing import DEFAULT_PRICING
from seamscope.decisions.records import Settlement
from seamscope.replay import Conversation, CourseReader, replay
from seamscope.telemetry import TelemetryConfig, configure
from seamscope.telemetry import conventions as c


def _run_demo(out: Path, turns: int) -> list[Settlement]:
    """The demo's scenarios through the real loop, gate and ledger; the live
    ledgers' settlements."""
    from seamscope.cli._demo import _seeded_ids

    handle = configure(
        service_name="whatif-test",
        trace_file=out,
        id_generator=_seeded_ids(7),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    try:
        config = TelemetryConfig.create()
        parts = [reference_part(handle, config, 7)]
        lc = langchain_part(handle, config)
        if not isinstance(lc, str):
            parts.append(lc)
        for turn in plan(parts, turns, 7):
            turn.part.run(turn.conversation, turn.position)
            if turn.last:
                turn.part.end(turn.conversation)
        handle.flush()
    finally:
        handle.shutdown()
    return [s for part in parts for s in part.ledger.settlements]


def _courses(path: Path) -> list[Conversation]:
    found: list[Conversation] = []
    reader = CourseReader(found.append)
    with path.open(encoding="utf-8") as handle:
        reader.read(handle, str(path))
    reader.close_all()
    return found


def test_recorded_config_reproduces_every_live_settlement_to_the_decimal(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    live = _run_demo(out, 14)  # two cycles: two conversations of each scenario
    resettled: list[Settlement] = []
    for conv in _courses(out):
        r = replay(
            conv,
            lambda gate, recorded: recorded,
            realized_pricing=DEFAULT_PRICING,
            counterfactual_pricing=DEFAULT_PRICING,
        )
        assert [] == r.mismatches()
        assert r.realized == r.counterfactual
        resettled.extend(r.realized)
    assert len(live) >= 6  # offloads with recalls, one without, compactions re-read
    assert {s.offload_id: s for s in live} == {s.offload_id: s for s in resettled}


def _whatif(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = main(["whatif", *argv, "--format", "json"])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_demo_under_its_recorded_config_changes_nothing(
    demo_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rows, _ = _whatif(capsys, str(demo_trace))
    assert 0 == code
    total = rows[-1]["total"]
    assert total["realized_usd"] == total["counterfactual_exact_usd"]
    assert "0" == total["difference_exact_usd"]
    assert 0 == total["mismatched_settlements"]
    assert (2, 2) == (total["recorded_fires"], total["counterfactual_fires"])


def test_an_offload_that_no_longer_fires_gives_back_its_realized_net(
    demo_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rows, _ = _whatif(capsys, str(demo_trace), "--set", "tool.get_logs.horizon=0")
    assert 0 == code
    demo = next(r for r in rows if r.get("conversation_id") == "demo-7")
    assert ["off-52e6b438"] == demo["no_longer_fired"]
    # the logs offload realized -0.0629413...; without it only the export's gain is left
    realized = Decimal(demo["realized_usd"])
    exact = Decimal(demo["counterfactual_exact_usd"])
    assert Decimal("0.08575125") == exact
    assert exact - realized == Decimal(demo["difference_exact_usd"])
    assert Decimal("-0.0629413010811346954969252132") == realized - exact


def _gate(
    span_id: str, t: int, tokens: float, *, fire: bool = False, **more: Any
) -> dict[str, Any]:
    return span(
        span_id,
        c.SPAN_OFFLOAD_GATE,
        start=t,
        end=t + 1,
        attrs={
            c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1",
            c.ATTR_GEN_AI_TOOL_NAME: "get_logs",
            c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
            c.ATTR_OFFLOAD_OUTPUT_TOKENS: tokens,
            c.ATTR_OFFLOAD_FIRE: fire,
            c.ATTR_OFFLOAD_HORIZON: 1,
            c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
            c.ATTR_OFFLOAD_STUB_TOKENS: 80,
            c.ATTR_OFFLOAD_THRESHOLD_TOKENS: 15_000,
            c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS: 12_500,
            c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: 250,
            **more,
        },
    )


def _chat(span_id: str, t: int, model: str = "gpt-4o") -> dict[str, Any]:
    return span(
        span_id,
        f"chat {model}",
        start=t,
        end=t + 1,
        attrs={
            c.ATTR_GEN_AI_OPERATION_NAME: "chat",
            c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1",
            c.ATTR_GEN_AI_REQUEST_MODEL: model,
            c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 21_000,
            c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 40,
            c.ATTR_OFFLOAD_CARRIED: [],
        },
    )


def test_a_newly_fired_offload_is_expected_with_a_range_from_its_recall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # at H=1 the gate did not fire on 20 000 tokens; three later calls carried the output
    path = write_lines(
        tmp_path / "t.jsonl",
        [
            export_line([_chat("a000000000000001", 100), _gate("a000000000000002", 200, 20_000.0)]),
            export_line([_chat("a000000000000003", 300), _chat("a000000000000004", 400)]),
            export_line([_chat("a000000000000005", 500, "unpriced-model")]),
        ],
    )
    code, rows, _ = _whatif(
        capsys, str(path), "--set", "horizon=3", "--set", "recall_probability=0.2"
    )
    assert 0 == code
    [conv, total] = rows
    rate = Decimal("2.5") / 1_000_000  # gpt-4o input; the unpriced call counts nothing
    # the stub the loop sends for it (an id of the gate's default 16 characters)
    stub = (
        "[offloaded 0000000000000000: 20000 tokens from get_logs; call recall_tool_result"
        "(offload_id='0000000000000000') to re-expand]"
    )
    per_call = (20_000 - Decimal(len(stub)) / 4) * rate
    no_recall = 2 * per_call
    hop = 20_000 * rate + 250 * Decimal(10) / 1_000_000  # the whole output back in
    assert (1, 0) == (total["total"]["newly_fired"], total["total"]["recorded_fires"])
    assert ["get_logs"] == conv["newly_fired"]
    assert "0" == conv["counterfactual_exact_usd"]
    assert no_recall - Decimal("0.2") * hop == Decimal(conv["counterfactual_expected_usd"])
    # at worst recalled by the first later call (it carries no more), at best never
    assert [per_call - hop, no_recall] == [
        Decimal(v) for v in conv["counterfactual_expected_range_usd"]
    ]
    assert "recorded" == conv["carried"]


def test_an_output_the_store_did_not_keep_never_fires_in_a_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live gate fired but the offload store failed (reason code
    store_failed): the output stayed in the prompt whatever the gate's
    configuration, so no replay fires it."""
    failed = {c.ATTR_OFFLOAD_REASON_CODE: c.OffloadReasonCode.STORE_FAILED.value}
    path = write_lines(
        tmp_path / "t.jsonl",
        [
            export_line([_chat("b000000000000001", 100)]),
            export_line([_gate("b000000000000002", 200, 20_000.0, **failed)]),
            export_line([_chat("b000000000000003", 300), _chat("b000000000000004", 400)]),
        ],
    )
    for argv in ((), ("--set", "horizon=3")):
        code, rows, _ = _whatif(capsys, str(path), *argv)
        total = rows[-1]["total"]
        assert (0, 0, 0, "0") == (
            code,
            total["counterfactual_fires"],
            total["newly_fired"],
            total["difference_exact_usd"],
        )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("horizon=-1", "horizon must be an int >= 0"),
        ("recall_probability=2", "recall_probability must be a number in [0, 1]"),
        ("tool.get_logs.nope=1", "unknown key"),
        ("price.gpt-4o.input=cheap", "USD per 1M tokens"),
        ("price.no-such-model.input=1", "give both .input and .output"),
        ("horizon", "expected KEY=VALUE"),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_it(
    demo_trace: Path, capsys: pytest.CaptureFixture[str], setting: str, message: str
) -> None:
    assert 2 == main(["whatif", str(demo_trace), "--set", setting])
    assert message in capsys.readouterr().err


def test_a_file_without_gate_calls_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "t.jsonl", [export_line([_chat("a000000000000001", 1)])])
    assert 2 == main(["whatif", str(path)])
    assert "no offload-gate call or compaction" in capsys.readouterr().err


def test_help_documents_every_flag_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["whatif", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--set KEY=VALUE",
        "--priors FILE",
        "--format {text,json}",
        "tool.NAME.KEY",
        "price.MODEL.input",
        "exit codes: 0 success; 1 some lines or spans were skipped",
        "2 usage error",
    ):
        assert needle in text


def test_a_second_ledger_on_an_unchanged_course_settles_as_the_first(
    demo_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a price override equal to the default is another table: the counterfactual gets a
    # ledger of its own (not the realized one's settlements) and must agree to the Decimal
    code, rows, _ = _whatif(capsys, str(demo_trace), "--set", "price.gpt-4o.input=2.5")
    assert 0 == code
    for row in rows[:-1]:
        assert row["realized_usd"] == row["counterfactual_exact_usd"]
    assert "0" == rows[-1]["total"]["difference_exact_usd"]
