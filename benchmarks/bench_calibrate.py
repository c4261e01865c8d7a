"""Synthetic conversations with known ground truth, through the real gate and ledger.

Each tool has a true recall probability (0.02-0.6) and horizon (2-30 model
calls); a conversation picks a tool and a model (three, priced differently),
an output size (log-uniform 1 000-40 000 tokens), its remaining model calls
(the tool's horizon -1, 0 or +1) and, with the tool's recall probability, the
later call after which the model recalls the output. It runs through
DecisionLayer (the real OffloadGate, OffloadLedger and OTel observer; gate
threshold 1 000 tokens so the priors decide), writing OTLP-JSON.

Measured:

1. calibrate on the first corpus: the share of (tool, model) pairs with >= 50
   offloads whose 90% interval holds the true recall probability (target >=
   85%) and whose horizon median is within 1 turn of the truth;
2. on a fresh corpus, the realized net saving of three gates: the default
   priors, the calibrated ones, and an oracle that knows the true values
   (targets: calibrated >= default, calibrated >= 95% of oracle);
3. whatif over a file of N recorded gate calls against a bare json.loads pass
   over the same file (target <= 4x by CPU), with its peak memory (target < 150 MB),
   on conversations that offload and on conversations that never do (nothing
   tells a reader those are over: memory must not follow the file).

    python benchmarks/bench_calibrate.py [--conversations 10000] [--gate-calls 1000000]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace

from seamscope.adapters import DecisionLayer
from seamscope.cli._calibrate import priors_toml
from seamscope.decisions._priors import Prior, Priors
from seamscope.decisions.records import ModelUsage, ToolCall
from seamscope.loop import RECALL_TOOL
from seamscope.replay import calibrate
from seamscope.telemetry import configure

__all__ = ["Conversation", "Truth", "corpus", "evaluate", "play", "truths"]

MODELS = ("gpt-4o", "claude-opus-4-6", "claude-haiku-4-5")
THRESHOLD = 1_000
MIN_EVIDENCE = 50  # offloads a pair needs to be judged


@dataclass(frozen=True, slots=True)
class Truth:
    tool: str
    recall_probability: float
    horizon: int


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str
    tool: str
    model: str
    tokens: float
    remaining: int
    recall_after: int | None


def truths(n_tools: int, seed: int) -> list[Truth]:
    rng = random.Random(seed)
    return [
        Truth(f"tool_{i:02d}", round(rng.uniform(0.02, 0.6), 4), rng.randint(2, 30))
        for i in range(n_tools)
    ]


def corpus(truth: list[Truth], n: int, seed: int, prefix: str) -> list[Conversation]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = rng.choice(truth)
        model = rng.choice(MODELS)
        tokens = round(math.exp(rng.uniform(math.log(1_000), math.log(40_000))), 2)
        remaining = max(1, t.horizon + rng.choice((-1, 0, 1)))
        recall = rng.randint(1, remaining) if rng.random() < t.recall_probability else None
        out.append(Conversation(f"{prefix}-{i}", t.tool, model, tokens, remaining, recall))
    return out


def play(layer: DecisionLayer, conv: Conversation) -> Decimal:
    """One conversation through the layer; its realized net saving (0 when not offloaded)."""
    with layer.turn(conv.conversation_id, []) as turn, turn.iteration() as it:
        with it.chat(conv.model) as call:
            call.report(ModelUsage(2_000, 20))
        decision = it.offload(ToolCall(f"{conv.conversation_id}-c", conv.tool, {}), conv.tokens)
        offload = decision.offload_id if decision.fire else None
        recalled = False
        for j in range(1, conv.remaining + 1):
            carried = (offload,) if offload and not recalled else ()
            prompt = 2_000 + (80 if carried else int(conv.tokens))
            with it.chat(conv.model) as call:
                call.report(ModelUsage(prompt, 20), carried=carried)
            if offload and not recalled and conv.recall_after == j:
                recall = ToolCall(f"{conv.conversation_id}-r", RECALL_TOOL, {"offload_id": offload})
                with it.execute_tool(recall):
                    it.recall(offload, input_tokens=int(conv.tokens), output_tokens=20)
                recalled = True
    return sum(
        (s.realized_net_saving for s in layer.end_conversation(conv.conversation_id)), Decimal(0)
    )


def _ids() -> Any:
    count = iter(range(1, 1 << 62))
    return lambda: f"off-{next(count)}"


def recorded(convs: list[Conversation], path: Path) -> None:
    """Run ``convs`` with the default priors, spans to ``path`` (OTLP-JSON)."""
    handle = configure(
        service_name="bench-calibrate",
        trace_file=path,
        set_global=False,
        register_atexit=False,
        environ={},
    )
    try:
        layer = DecisionLayer(
            default_model=MODELS[0],
            telemetry=handle,
            offload_threshold_tokens=THRESHOLD,
            offload_id_factory=_ids(),
        )
        for conv in convs:
            play(layer, conv)
        handle.flush()
    finally:
        handle.shutdown()


def realized(convs: list[Conversation], priors: Priors | None) -> Decimal:
    """The realized net saving of ``convs`` under a gate with ``priors`` (no telemetry)."""
    layer = DecisionLayer(
        default_model=MODELS[0],
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider(),
        offload_threshold_tokens=THRESHOLD,
        offload_priors=priors,
        offload_id_factory=_ids(),
    )
    return sum((play(layer, conv) for conv in convs), Decimal(0))


def calibrated(path: Path) -> tuple[list[dict[str, Any]], Priors]:
    with path.open(encoding="utf-8") as handle:
        evidence, _ = calibrate([(str(path), handle)])
    rows = [evidence[k].summary(2.0, 20) for k in sorted(evidence)]
    text, _ = priors_toml(rows, min_offloads=20, strength=2.0, sources=[str(path)])
    return rows, Priors.parse(text)


def oracle(truth: list[Truth]) -> Priors:
    entries = {
        (t.tool, m): Prior(t.tool, m, t.horizon, t.recall_probability, 1 << 30)
        for t in truth
        for m in MODELS
    }
    return Priors(entries, version="oracle", min_offloads=1)


def evaluate(
    n_tools: int, conversations: int, fresh: int, seed: int, workdir: Path
) -> dict[str, Any]:
    """Targets 1 and 2 (see the module docstring) on one seeded run."""
    truth = truths(n_tools, seed)
    by_tool = {t.tool: t for t in truth}
    trace_path = workdir / "calibrate-corpus.jsonl"
    start = time.perf_counter()
    recorded(corpus(truth, conversations, seed + 1, "cal"), trace_path)
    record_s = time.perf_counter() - start
    rows, priors = calibrated(trace_path)
    judged = [r for r in rows if r["offloads"] >= MIN_EVIDENCE]
    covered = [
        r
        for r in judged
        if r["credible_90"][0] <= by_tool[r["tool"]].recall_probability <= r["credible_90"][1]
    ]
    horizon_ok = [
        r for r in judged if abs(r["remaining_turns"]["median"] - by_tool[r["tool"]].horizon) <= 1
    ]
    test = corpus(truth, fresh, seed + 2, "fresh")
    nets = {
        "default": realized(test, None),
        "calibrated": realized(test, priors),
        "oracle": realized(test, oracle(truth)),
    }
    return {
        "pairs_judged": len(judged),
        "coverage": len(covered) / len(judged) if judged else 0.0,
        "horizon_within_1": len(horizon_ok) / len(judged) if judged else 0.0,
        "net": nets,
        "record_s": record_s,
        "trace_mb": trace_path.stat().st_size / 1e6,
    }


# -- whatif throughput ------------------------------------------------------------


def _attr(key: str, value: Any) -> str:
    if isinstance(value, bool):
        v = f'{{"boolValue":{"true" if value else "false"}}}'
    elif isinstance(value, int):
        v = f'{{"intValue":"{value}"}}'
    elif isinstance(value, float):
        v = f'{{"doubleValue":{value!r}}}'
    elif isinstance(value, list):
        v = (
            '{"arrayValue":{"values":['
            + ",".join(f'{{"stringValue":"{x}"}}' for x in value)
            + "]}}"
        )
    else:
        v = f'{{"stringValue":"{value}"}}'
    return f'{{"key":"{key}","value":{v}}}'


def _span(trace_id: str, n: int, name: str, t: int, attrs: dict[str, Any]) -> str:
    body = ",".join(_attr(k, v) for k, v in attrs.items())
    return (
        f'{{"traceId":"{trace_id}","spanId":"{n:016x}","name":"{name}","kind":1,'
        f'"startTimeUnixNano":"{t}","endTimeUnixNano":"{t + 500}","attributes":[{body}],'
        '"status":{}}'
    )


def gate_file(path: Path, gate_calls: int, *, offloading: bool = True) -> None:
    """OTLP-JSON with ``gate_calls`` gate spans as the observer writes them: one export
    line per conversation of 4 gate calls (2 fire), 6 chat spans, 2 settle spans; with
    ``offloading`` false, conversations that never offload (no gate call fires, nothing
    settles: nothing tells a reader they are over)."""
    from seamscope.telemetry import conventions as c

    with path.open("w", encoding="utf-8") as out:
        n = 0
        for conv in range(gate_calls // 4):
            cid = f"conv-{conv}"
            trace_id = f"{conv + 1:032x}"
            t = conv * 1_000_000
            spans = []
            live: list[str] = []
            for g in range(4):
                n += 1
                spans.append(_span(trace_id, n, "chat gpt-4o", t + n * 1000, {
                    c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
                    c.ATTR_GEN_AI_CONVERSATION_ID: cid, c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 3_000,
                    c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 30, c.ATTR_OFFLOAD_CARRIED: list(live),
                }))  # fmt: skip
                fire = offloading and g % 2 == 0
                n += 1
                attrs: dict[str, Any] = {
                    c.ATTR_GEN_AI_TOOL_CALL_ID: f"call-{n}", c.ATTR_GEN_AI_TOOL_NAME: "get_logs",
                    c.ATTR_GEN_AI_CONVERSATION_ID: cid, c.ATTR_OFFLOAD_FIRE: fire,
                    c.ATTR_OFFLOAD_NET_SAVING_USD: 0.17, c.ATTR_OFFLOAD_REASON: "net=...",
                    c.ATTR_OFFLOAD_REASON_CODE: "net_positive" if fire else "below_threshold",
                    c.ATTR_OFFLOAD_OUTPUT_TOKENS: 20_000.0 if fire else 900.0,
                    c.ATTR_OFFLOAD_HORIZON: 5, c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
                    c.ATTR_OFFLOAD_PRICING_SOURCE: "genai-prices",
                    c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o", c.ATTR_OFFLOAD_STUB_TOKENS: 80,
                    c.ATTR_OFFLOAD_THRESHOLD_TOKENS: 15_000,
                    c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS: 12_500,
                    c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: 250,
                    c.ATTR_OFFLOAD_PRIOR_SOURCE: "default",
                }  # fmt: skip
                if fire:
                    attrs[c.ATTR_OFFLOAD_ID] = f"off-{n}"
                    live.append(f"off-{n}")
                spans.append(_span(trace_id, n, c.SPAN_OFFLOAD_GATE, t + n * 1000, attrs))
            for _ in range(2):
                n += 1
                spans.append(_span(trace_id, n, "chat gpt-4o", t + n * 1000, {
                    c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
                    c.ATTR_GEN_AI_CONVERSATION_ID: cid, c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 3_000,
                    c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 30, c.ATTR_OFFLOAD_CARRIED: list(live),
                }))  # fmt: skip
            for offload in live:
                n += 1
                spans.append(_span(trace_id, n, c.SPAN_OFFLOAD_SETTLE, t + n * 1000, {
                    c.ATTR_OFFLOAD_ID: offload, c.ATTR_GEN_AI_CONVERSATION_ID: cid,
                    c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
                    c.ATTR_OFFLOAD_SETTLE_TRIGGER: "conversation_end",
                    c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: 0.1, c.ATTR_OFFLOAD_RECALLS: 0,
                    c.ATTR_OFFLOAD_TURNS_CARRIED: 3,
                }))  # fmt: skip
            out.write(
                '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":'
                '{"name":"seamscope"},"spans":[' + ",".join(spans) + "]}]}]}\n"
            )


_CHILD = """
import json, resource, sys, time
start = time.perf_counter()
if sys.argv[1] == "bare":
    with open(sys.argv[2], encoding="utf-8") as f:
        for line in f:
            json.loads(line)
else:
    from seamscope.cli import main
    import contextlib, os
    # whatif writes each conversation's row as it goes: to nowhere here, not held
    with open(os.devnull, "w") as out, contextlib.redirect_stdout(out):
        main(["whatif", sys.argv[2], "--set", "horizon=2", "--format", "json"])
usage = resource.getrusage(resource.RUSAGE_SELF)
import os
print(json.dumps({"s": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
                  "peak_mb": usage.ru_maxrss / 1024, "mb": os.path.getsize(sys.argv[2]) / 1e6}))
"""


def _child(kind: str, path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def throughput(gate_calls: int, workdir: Path, *, offloading: bool = True) -> dict[str, Any]:
    """whatif against a bare json.loads pass over the same file, each a child process:
    wall seconds and CPU seconds (start-up included; on a shared machine the CPU ratio
    is the steadier one)."""
    path = workdir / f"whatif-gates{'' if offloading else '-never'}.jsonl"
    gate_file(path, gate_calls, offloading=offloading)
    bare = _child("bare", path)
    whatif = _child("whatif", path)
    path.unlink()
    return {"gate_calls": gate_calls, "file_mb": bare["mb"], "bare": bare,
            "whatif": whatif, "ratio": whatif["s"] / bare["s"], "offloading": offloading,
            "cpu_ratio": whatif["cpu"] / bare["cpu"]}  # fmt: skip


def _rows(result: dict[str, Any], speed: list[dict[str, Any]] | None) -> Iterator[str]:
    net = result["net"]
    yield "| measure | value | target | met |"
    yield "|---|---|---|---|"
    yield (
        f"| pairs with >= {MIN_EVIDENCE} offloads whose 90% interval holds the true p | "
        f"{result['coverage']:.1%} of {result['pairs_judged']} | >= 85% | "
        f"{'yes' if result['coverage'] >= 0.85 else 'no'} |"
    )
    yield (
        f"| pairs whose horizon median is within 1 turn | {result['horizon_within_1']:.1%} | "
        f"100% | {'yes' if result['horizon_within_1'] == 1 else 'no'} |"
    )
    yield f"| realized net, default priors | ${net['default']:.4f} | | |"
    yield (
        f"| realized net, calibrated priors | ${net['calibrated']:.4f} | >= default | "
        f"{'yes' if net['calibrated'] >= net['default'] else 'no'} |"
    )
    share = net["calibrated"] / net["oracle"] if net["oracle"] else Decimal(0)
    yield (
        f"| realized net, oracle priors | ${net['oracle']:.4f} (calibrated {share:.1%}) | "
        f"calibrated >= 95% | {'yes' if share >= Decimal('0.95') else 'no'} |"
    )
    for run in speed or []:
        kind = "offloading" if run["offloading"] else "never offloading"
        yield (
            f"| whatif over {run['gate_calls']:,} gate calls, {kind} ({run['file_mb']:.0f} MB) "
            f"| {run['whatif']['s']:.1f} s wall, {run['whatif']['cpu']:.1f} s CPU = "
            f"{run['ratio']:.2f}x / {run['cpu_ratio']:.2f}x a bare json.loads pass "
            f"({run['bare']['s']:.1f} s, {run['bare']['cpu']:.1f} s CPU) | <= 4x CPU | "
            f"{'yes' if run['cpu_ratio'] <= 4 else 'no'} |"
        )
        yield (
            f"| whatif peak memory, {kind} | {run['whatif']['peak_mb']:.0f} MB "
            f"(the bare pass: {run['bare']['peak_mb']:.0f} MB) | < 150 MB | "
            f"{'yes' if run['whatif']['peak_mb'] < 150 else 'no'} |"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", type=int, default=12)
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--fresh", type=int, default=10_000)
    p.add_argument("--gate-calls", type=int, default=1_000_000, help="0 skips target 3")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", type=Path, help="write the files here (default: a temporary folder)")
    args = p.parse_args(argv)
    import structlog  # the library logs through structlog; this program shows none of it

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.keep or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        result = evaluate(args.tools, args.conversations, args.fresh, args.seed, workdir)
        speed = (
            [throughput(args.gate_calls, workdir, offloading=kind) for kind in (True, False)]
            if args.gate_calls
            else None
        )
    out = io.StringIO()
    print(
        f"bench_calibrate: {args.tools} tools x {len(MODELS)} models, {args.conversations} "
        f"conversations to calibrate ({result['trace_mb']:.0f} MB recorded in "
        f"{result['record_s']:.0f} s), {args.fresh} fresh, seed {args.seed}",
        file=out,
    )
    for row in _rows(result, speed):
        print(row, file=out)
    print(out.getvalue(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
