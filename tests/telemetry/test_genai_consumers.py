"""GenAI-aware consumers read seamscope's spans right: the demo's real run through them.

* The Langfuse SDK (v4+) exports a span only if its default filter
  (``langfuse.span_filter.is_default_export_span``: made by the Langfuse SDK,
  any ``gen_ai.*`` attribute, or a known LLM instrumentation scope) keeps it;
  anything else is dropped before export. Its real ``LangfuseSpanProcessor``
  runs here offline, exporting to an in-memory exporter, and keeps every span.
* OpenInference's span processor (the one that maps ``gen_ai.*`` spans to
  OpenInference attributes) and the LangChain instrumentors of OpenInference
  and OpenLLMetry, beside seamscope, leave seamscope's spans as they are:
  same names, attributes, errors and nesting, one trace per turn.

The run is the demo's (``seamscope demo``): the reference loop's and the
LangChain conversation's turns with scripted models, no network.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

ENABLE = "install the test extra: pip install -e '.[test]'"
langfuse_filter = pytest.importorskip("langfuse.span_filter", reason=ENABLE)
langfuse_processor = pytest.importorskip("langfuse._client.span_processor", reason=ENABLE)
pytest.importorskip("langchain", reason=ENABLE)

SEED = 7
TESTS = Path(__file__).resolve().parents[1]
OWN = ("seamscope.", "gen_ai.", "error.")  # the attribute keys seamscope writes


class Run:
    """One demo run: every finished span, and those Langfuse's processor exported."""

    def __init__(self, spans: tuple[ReadableSpan, ...], langfuse: tuple[ReadableSpan, ...]):
        self.spans = spans
        self.langfuse = langfuse

    @property
    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.spans if s.instrumentation_scope.name == "seamscope"]


def _demo(
    before: tuple[SpanProcessor, ...] = (),
    instrument: Callable[[TracerProvider], Callable[[], None]] | None = None,
) -> Run:
    from seamscope.cli._plan import langchain_part, plan, reference_part
    from seamscope.cli._scenario import POLICIES

    provider = TracerProvider()
    for processor in before:
        provider.add_span_processor(processor)
    every, exported = InMemorySpanExporter(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(every))
    # the Langfuse SDK's own processor with its default span filter, exporting offline
    langfuse = langfuse_processor.LangfuseSpanProcessor(
        public_key="pk-lf-offline",
        secret_key="sk-lf-offline",
        base_url="http://127.0.0.1:9",
        span_exporter=exported,
    )
    provider.add_span_processor(langfuse)
    uninstrument = instrument(provider) if instrument else None
    try:
        handle = types.SimpleNamespace(tracer_provider=provider, meter_provider=MeterProvider())
        config = TelemetryConfig.create(known_labels=[p.name for p in POLICIES])
        langchain = langchain_part(handle, config)
        assert not isinstance(langchain, str), langchain
        parts = [reference_part(handle, config, SEED), langchain]
        for turn in plan(parts, sum(p.turns for p in parts), SEED):
            turn.part.run(turn.conversation, turn.position)
            if turn.last:
                turn.part.end(turn.conversation)
    finally:
        if uninstrument:
            uninstrument()
    langfuse.force_flush()
    provider.shutdown()
    return Run(every.get_finished_spans(), exported.get_finished_spans())


def _shape(run: Run) -> list[tuple[Any, ...]]:
    """seamscope's spans as a consumer sees them: name, kind, seamscope's own
    attributes, an error's type, and the nearest seamscope span above each
    (a peer's span may sit between), in the order they ended."""
    by_id = {s.context.span_id: s for s in run.spans}
    index = {s.context.span_id: n for n, s in enumerate(run.ours)}

    def parent(span: ReadableSpan) -> int | None:
        up = span.parent
        while up is not None and up.span_id not in index:
            above = by_id.get(up.span_id)
            up = None if above is None else above.parent
        return None if up is None else index[up.span_id]

    return [
        (
            s.name,
            s.kind,
            {k: v for k, v in (s.attributes or {}).items() if k.startswith(OWN)},
            [(e.name, dict(e.attributes or {})) for e in s.events],
            s.status.description if s.status.status_code is StatusCode.ERROR else None,
            parent(s),
        )
        for s in run.ours
    ]


@pytest.fixture(scope="module")
def plain() -> Run:
    return _demo()


def test_every_seamscope_span_of_the_demo_reaches_langfuse(plain: Run) -> None:
    ids = [s.context.span_id for s in plain.spans]
    assert len(plain.ours) == len(plain.spans) > 150
    # the decision spans of the run are all there: the filter keeps every kind
    kinds = {s.name for s in plain.ours}
    assert {
        c.SPAN_ITERATION,
        c.SPAN_SELECT_TOOLS,
        c.SPAN_STAGE,
        c.SPAN_SEAM_PRE_MODEL,
        c.SPAN_SEAM_POST_MODEL,
        c.SPAN_DISPATCH,
        c.SPAN_OFFLOAD_GATE,
        c.SPAN_OFFLOAD_SETTLE,
        c.SPAN_COMPACTION,
    } <= kinds
    assert {"invoke_agent", "chat", "execute_tool"} <= {name.split(" ")[0] for name in kinds}
    assert sorted(ids) == sorted(s.context.span_id for s in plain.langfuse)
    # kept because each carries a gen_ai.* attribute, not because of its scope
    assert [] == [s.name for s in plain.ours if not langfuse_filter.is_genai_span(s)]
    assert [] == [s.name for s in plain.ours if langfuse_filter.is_known_llm_instrumentor(s)]


def test_the_langfuse_filter_drops_a_span_without_gen_ai_attributes() -> None:
    # the check above can fail: a span of seamscope's scope with no gen_ai.* key is dropped
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        langfuse_processor.LangfuseSpanProcessor(
            public_key="pk-lf-offline",
            secret_key="sk-lf-offline",
            base_url="http://127.0.0.1:9",
            span_exporter=exporter,
        )
    )
    tracer = provider.get_tracer("seamscope")
    with tracer.start_as_current_span(
        "seamscope.iteration", attributes={c.ATTR_ITERATION_INDEX: 0}
    ):
        pass
    with tracer.start_as_current_span(
        "seamscope.iteration", attributes={c.ATTR_GEN_AI_CONVERSATION_ID: "conv"}
    ):
        pass
    provider.force_flush()
    provider.shutdown()
    assert [{c.ATTR_GEN_AI_CONVERSATION_ID: "conv"}] == [
        {k: v for k, v in (s.attributes or {}).items() if k.startswith(OWN)}
        for s in exporter.get_finished_spans()
    ]


def test_openinference_span_processor_leaves_seamscope_spans_as_they_are(plain: Run) -> None:
    pydantic_ai = pytest.importorskip("openinference.instrumentation.pydantic_ai", reason=ENABLE)
    run = _demo(before=(pydantic_ai.OpenInferenceSpanProcessor(),))
    assert _shape(plain) == _shape(run)
    # it adds its own attributes beside ours (the model, token counts, span kinds)
    added = {k for s in run.ours for k in (s.attributes or {}) if not k.startswith(OWN)}
    assert {"openinference.span.kind", "llm.model_name"} <= added
    # and it marks every span that is not an error OK (seamscope leaves them UNSET)
    assert {StatusCode.UNSET, StatusCode.ERROR} == {s.status.status_code for s in plain.ours}
    assert {StatusCode.OK, StatusCode.ERROR} == {s.status.status_code for s in run.ours}
    assert sorted(s.context.span_id for s in run.spans) == sorted(
        s.context.span_id for s in run.langfuse
    )


def _instrumented(module: str, name: str, scope: str) -> dict[str, Any]:
    """The demo run with a LangChain instrumentor beside seamscope, summed up.

    Run in a process of its own (see the test): OpenLLMetry's ``uninstrument()``
    leaves LangChain's and LangGraph's methods wrapped, spans going to a shut
    provider, so no later test of this process could run LangChain unchanged."""
    package = importlib.import_module(module)

    def instrument(provider: TracerProvider) -> Callable[[], None]:
        instrumentor = getattr(package, name)()
        instrumentor.instrument(tracer_provider=provider)
        return instrumentor.uninstrument

    run = _demo(instrument=instrument)
    traces: dict[int, set[str]] = {}
    for span in run.spans:
        traces.setdefault(span.context.trace_id, set()).add(span.instrumentation_scope.name)
    turns = {s.context.trace_id for s in run.ours if s.name == "invoke_agent triage"}
    return {
        "shape": repr(_shape(run)),
        "theirs": sum(s.instrumentation_scope.name == scope for s in run.spans),
        "turn_scopes": sorted(sorted(traces[t]) for t in turns),
        "turn_roots": sum(s.parent is None and s.context.trace_id in turns for s in run.spans),
        "langfuse_kept_all": sorted(s.context.span_id for s in run.spans)
        == sorted(s.context.span_id for s in run.langfuse),
    }


@pytest.mark.parametrize(
    ("module", "name", "scope"),
    [
        (
            "openinference.instrumentation.langchain",
            "LangChainInstrumentor",
            "openinference.instrumentation.langchain",
        ),
        (
            "opentelemetry.instrumentation.langchain",
            "LangchainInstrumentor",
            "opentelemetry.instrumentation.langchain",
        ),
    ],
    ids=["openinference", "openllmetry"],
)
def test_a_langchain_instrumentor_beside_seamscope_changes_none_of_its_spans(
    plain: Run, module: str, name: str, scope: str
) -> None:
    pytest.importorskip(module, reason=ENABLE)
    code = (
        "import json, sys\n"
        "from telemetry.test_genai_consumers import _instrumented\n"
        "print(json.dumps(_instrumented(*sys.argv[1:])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, module, name, scope],
        cwd=TESTS,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert 0 == done.returncode, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert repr(_shape(plain)) == summary["shape"]
    assert summary["theirs"] > 0
    # one trace per LangChain turn (3): the peer's spans and seamscope's together
    assert [sorted({scope, "seamscope"})] * 3 == summary["turn_scopes"]
    assert 3 == summary["turn_roots"]
    # Langfuse keeps the peer's spans (a known scope) and every seamscope span
    assert summary["langfuse_kept_all"]
