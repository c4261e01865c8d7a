"""The Agents SDK behaves under ``SeamscopeRunner`` as it does alone.

Each test runs what the SDK promises (its retries, its model interface, the
provider it owns, its type checks, its signatures, every tool kind) through
the SDK's own ``Runner`` and through seamscope, with scripted models (no
network, no key, the SDK's tracing off); the SDK alone is the ground truth.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    CodeInterpreterTool,
    GuardrailFunctionOutput,
    HostedMCPTool,
    ModelProvider,
    ModelRetrySettings,
    ModelSettings,
    MultiProvider,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    UserError,
    WebSearchTool,
    output_guardrail,
    retry_policies,
    set_tracing_disabled,
)
from agents.exceptions import ModelBehaviorError
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest, ModelRetryBackoffSettings
from openai import AsyncOpenAI
from openai.types.responses import ResponseErrorEvent, ResponseTextDeltaEvent
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.adapters.openai_agents import _translate as translate
from seamscope.adapters.openai_agents._model import RoutedModel
from seamscope.adapters.openai_agents._run import Run, new_turn
from seamscope.cli import main
from seamscope.decisions import RolePaletteStage
from seamscope.telemetry import conventions as c

from ._openai_agents_support import ModelCall, ScriptedModel, Step, Toolbox, step, text
from .test_openai_agents import HAIKU, OPUS, analyst, attrs, make_layer, named, run


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


FAIL = step()  # a scripted step that raises instead of answering


class Flaky(ScriptedModel):
    """A scripted model whose ``FAIL`` steps raise ``error`` (a stream raises
    before its first event, so the SDK may retry it); it logs every retry
    advice asked of it, the settings each call got and the run-end cleanups."""

    def __init__(
        self,
        name: str,
        script: list[Step],
        log: list[ModelCall],
        error: Exception | None = None,
        advice: ModelRetryAdvice | None = None,
    ) -> None:
        super().__init__(name, script, log)
        self.error = error or TimeoutError("the connection timed out")
        self.advice = advice
        self.asked: list[ModelRetryAdviceRequest] = []
        self.settings: list[ModelSettings] = []
        self.cleanups: list[object] = []
        self.closed = 0

    def _next(self, *args: Any) -> Step:
        self.settings.append(args[2])
        found = super()._next(*args)
        if found is FAIL:
            raise self.error
        return found

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        self.asked.append(request)
        return self.advice

    async def _cleanup_on_run_end(self, owner: object) -> None:
        self.cleanups.append(owner)

    async def close(self) -> None:
        self.closed += 1

    def _supports_default_prompt_cache_key(self) -> bool:
        return True


def no_delay(**kwargs: Any) -> ModelSettings:
    return ModelSettings(
        retry=ModelRetrySettings(
            backoff=ModelRetryBackoffSettings(initial_delay=0.0, jitter=False), **kwargs
        )
    )


# -- 4. a retried model call: the same model, the same plan, the same iteration -----------


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
@pytest.mark.parametrize(
    ("question", "chosen"), [("How did Q3 sales go?", HAIKU), ("Any news from the CRM?", OPUS)]
)
def test_a_retry_goes_to_the_planned_model_in_the_same_iteration(
    mode: str, question: str, chosen: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """The sales policy's model (haiku), or the agent's own (opus) when the PRE
    seam keeps the default: the SDK's retry goes to the same one."""
    layer = make_layer(tracer_provider)
    log: list[ModelCall] = []
    script = [FAIL, step(text("Q3 sales grew 12%."))]
    models = {OPUS: Flaky(OPUS, script, log), HAIKU: Flaky(HAIKU, script, log)}
    runner = SeamscopeRunner(layer, {HAIKU: models[HAIKU]})
    agent = analyst(
        models[OPUS],
        Toolbox(),
        runner,
        model_settings=no_delay(max_retries=2, policy=retry_policies.network_error()),
    )

    result = run(runner, agent, question, mode, conversation="conv-r")
    spans = list(span_exporter.get_finished_spans())

    # ground truth: the SDK retried the call once, on the same model, with the
    # same tools, tool choice, settings and input
    assert "Q3 sales grew 12%." == result.final_output
    assert [chosen, chosen] == [m.model for m in log]
    assert log[0].tools == log[1].tools and log[0].tool_choice == log[1].tool_choice
    assert log[0].input == log[1].input
    assert models[chosen].settings[0] == models[chosen].settings[1]
    # one iteration, decided once, with one chat span per attempt
    [iteration] = named(spans, c.SPAN_ITERATION)
    assert 1 == len(named(spans, c.SPAN_SELECT_TOOLS)) == len(named(spans, c.SPAN_SEAM_PRE_MODEL))
    chats = named(spans, f"chat {chosen}")
    assert 2 == len(chats)
    assert {iteration.context.span_id} == {s.parent.span_id for s in chats}  # type: ignore[union-attr]
    assert "TimeoutError" == attrs(chats[0]).get(c.ATTR_ERROR_TYPE)
    assert "seamscope.chat.attempt" not in attrs(chats[0])
    assert 2 == attrs(chats[1])["seamscope.chat.attempt"]
    assert c.ATTR_ERROR_TYPE not in attrs(chats[1])
    assert 100 == attrs(chats[1])[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS]


# -- 5. the Model interface, forwarded to the model the turn really uses --------------------


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
def test_retry_advice_reaches_the_real_model_of_a_stateful_request(
    mode: str, tracer_provider: Any
) -> None:
    """A ``previous_response_id`` request is retried only when the provider's
    advice says replaying it is safe: the routed model must pass the question on."""

    def outcome(through_seamscope: bool) -> tuple[Any, int, list[int]]:
        log: list[ModelCall] = []
        model = Flaky(
            OPUS,
            [FAIL, step(text("fine"))],
            log,
            error=RuntimeError("overloaded"),
            advice=ModelRetryAdvice(suggested=True, replay_safety="safe"),
        )
        agent = Agent(
            name="analyst",
            model=model,
            model_settings=no_delay(max_retries=1, policy=retry_policies.provider_suggested()),
        )
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner
        try:
            result = run(runner, agent, "hi", mode, previous_response_id="resp_0")
            answer: Any = result.final_output
        except RuntimeError as exc:
            answer = repr(exc)
        return answer, len(log), [r.attempt for r in model.asked]

    assert ("fine", 2, [1]) == outcome(False)  # the SDK alone
    assert outcome(False) == outcome(True)


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_streamed"])
def test_run_end_cleanup_and_probes_reach_the_real_model(mode: str, tracer_provider: Any) -> None:
    """``_cleanup_on_run_end`` at the run's end, and the prompt cache key the SDK
    adds for a model that takes one, as without seamscope."""

    def outcome(through_seamscope: bool) -> tuple[int, list[bool]]:
        model = Flaky(OPUS, [step(text("fine"))], [])
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner
        run(runner, Agent(name="analyst", model=model), "hi", mode)
        keys = [
            str((s.extra_args or {}).get("prompt_cache_key", "")).startswith("agents-sdk:")
            for s in model.settings
        ]
        return len(model.cleanups), keys

    assert (1, [True]) == outcome(False)
    assert outcome(False) == outcome(True)


def test_close_and_what_the_sdk_reads_are_forwarded(tracer_provider: Any) -> None:
    """A routed model is, to whatever reads it, the model the SDK would use
    (attributes, probes, ``isinstance``); closing it closes the models its
    calls went to."""
    model = Flaky(OPUS, [step(text("fine"))], [])
    runner = SeamscopeRunner(make_layer(tracer_provider))
    agent = Agent(name="analyst", model=model)
    config = runner._config(Run("k", new_turn(runner.layer, None, None), "s"), RunConfig())
    routed = config.model
    assert isinstance(routed, RoutedModel)
    routed.run.current_agent = agent
    assert OPUS == routed.model
    assert routed._supports_default_prompt_cache_key() is True
    assert isinstance(routed, Flaky)
    asyncio.run(Runner.run(agent, "hi", run_config=config))
    asyncio.run(routed.close())
    assert 1 == model.closed


# -- 6. the model provider the SDK would have made is closed at the run's end ---------------


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_streamed"])
@pytest.mark.parametrize("config", ["none", "dict", "dict_with_provider", "object"])
def test_the_provider_the_sdk_would_own_is_closed(
    mode: str, config: str, monkeypatch: pytest.MonkeyPatch, tracer_provider: Any
) -> None:
    closed: list[MultiProvider] = []

    async def aclose(self: MultiProvider) -> None:
        closed.append(self)

    monkeypatch.setattr(MultiProvider, "aclose", aclose)

    def closes(through_seamscope: bool) -> int:
        closed.clear()
        options: dict[str, Any] = {
            "none": {},
            "dict": {"run_config": {"workflow_name": "w"}},
            "dict_with_provider": {"run_config": {"model_provider": MultiProvider()}},
            "object": {"run_config": RunConfig()},
        }[config]
        model = ScriptedModel(OPUS, [step(text("fine"))], [])
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner
        result = run(runner, Agent(name="analyst", model=model), "hi", mode, **options)
        assert "fine" == result.final_output
        return len(closed)

    expected = 1 if config in ("none", "dict") else 0
    assert expected == closes(False)  # the SDK alone
    assert expected == closes(True)


# -- 7. a stream that fails is closed, not left to garbage collection ----------------------


class FailingStream(ScriptedModel):
    """Streams a delta, then an ``error`` event the runner fails the run on; keeps
    every stream it made (so only an explicit ``aclose`` can end one)."""

    def __init__(self) -> None:
        super().__init__(OPUS, [], [])
        self.streams: list[Any] = []
        self.ended: list[bool] = []

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = self._events()
        self.streams.append(stream)
        return stream

    async def _events(self) -> AsyncIterator[Any]:
        try:
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg",
                output_index=0,
                content_index=0,
                delta="…",
                logprobs=[],
                sequence_number=0,
            )
            yield ResponseErrorEvent(
                type="error", code="server_error", message="boom", param=None, sequence_number=1
            )
            await asyncio.Event().wait()  # never ends by itself
        finally:
            self.ended.append(True)


def test_a_failed_stream_is_closed(tracer_provider: Any) -> None:
    def outcome(through_seamscope: bool) -> tuple[str, int, list[bool]]:
        model = FailingStream()
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner

        async def go() -> tuple[str, int, list[bool]]:
            result = runner.run_streamed(Agent(name="analyst", model=model), "hi")
            with pytest.raises(ModelBehaviorError) as raised:
                async for _ in result.stream_events():
                    pass
            # before this loop lets anything else run: the model's stream ended
            return type(raised.value).__name__, len(model.streams), list(model.ended)

        return asyncio.run(go())

    assert ("ModelBehaviorError", 1, [True]) == outcome(False)
    assert outcome(False) == outcome(True)


# -- 8. Chat Completions with output guardrails and a server-managed conversation -----------


class ScriptedChatCompletions(OpenAIChatCompletionsModel):
    """The SDK's Chat Completions model class, answering from a script (no request)."""

    def __init__(self) -> None:
        super().__init__(model="gpt-4.1", openai_client=AsyncOpenAI(api_key="sk-offline"))
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return await ScriptedModel("gpt-4.1", [step(text("fine"))], []).get_response(
            *args, **kwargs
        )


@output_guardrail
def accept(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


@pytest.mark.parametrize("kind", ["chat_completions", "responses"])
def test_the_sdk_still_sees_a_chat_completions_model(kind: str, tracer_provider: Any) -> None:
    """The SDK refuses output guardrails with ``previous_response_id`` unless the
    model is Chat Completions (it checks the model's type): same answer through
    seamscope."""

    def outcome(through_seamscope: bool) -> str:
        model: Any = (
            ScriptedChatCompletions()
            if kind == "chat_completions"
            else ScriptedModel("gpt-4.1", [step(text("fine"))], [])
        )
        agent = Agent(name="analyst", model=model, output_guardrails=[accept])
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner
        try:
            return str(run(runner, agent, "hi", "run", previous_response_id="resp_0").final_output)
        except UserError:
            return "UserError"

    expected = "fine" if kind == "chat_completions" else "UserError"
    assert expected == outcome(False)
    assert expected == outcome(True)


class FailingProvider(ModelProvider):
    """A model provider that cannot resolve any name (counts its attempts)."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def get_model(self, model_name: str | None) -> Any:
        self.asked.append(model_name)
        raise ValueError("provider failure")


@pytest.mark.parametrize("method", ["run_streamed", "run"])
def test_a_provider_that_fails_in_the_sdks_model_check_fails_the_same(
    method: str, tracer_provider: Any
) -> None:
    """Resolving the model for that check, the SDK meets the provider's error
    first: the caller gets the provider's ValueError, not a UserError."""

    def outcome(through_seamscope: bool) -> tuple[str, str, bool]:
        provider = FailingProvider()
        agent = Agent(name="analyst", model="gpt-4.1", output_guardrails=[accept])
        runner: Any = SeamscopeRunner(make_layer(tracer_provider)) if through_seamscope else Runner
        config = RunConfig(model_provider=provider)
        try:
            if method == "run_streamed":
                runner.run_streamed(agent, "hi", previous_response_id="r", run_config=config)
            else:
                asyncio.run(runner.run(agent, "hi", previous_response_id="r", run_config=config))
        except Exception as exc:
            return type(exc).__name__, str(exc), bool(provider.asked)
        return "no error", "", bool(provider.asked)

    assert ("ValueError", "provider failure", True) == outcome(False)
    assert outcome(False) == outcome(True)


# -- 9. the SDK's signatures -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_the_runs_take_the_sdks_arguments(method: str, tracer_provider: Any) -> None:
    runner = SeamscopeRunner(make_layer(tracer_provider))

    def shape(fn: Any) -> list[tuple[str, Any, Any]]:
        return [
            (p.name, p.kind, p.default)
            for p in inspect.signature(fn).parameters.values()
            if p.name != "conversation"
        ]

    assert shape(getattr(Runner, method)) == shape(getattr(runner, method))
    assert inspect.Parameter.KEYWORD_ONLY == (
        inspect.signature(getattr(runner, method)).parameters["conversation"].kind
    )


def test_a_dict_run_config_and_positional_streamed_arguments(tracer_provider: Any) -> None:
    runner = SeamscopeRunner(make_layer(tracer_provider))
    models = [ScriptedModel(OPUS, [step(text("fine"))], []) for _ in range(2)]
    result = run(
        runner, Agent(name="a", model=models[0]), "hi", "run", run_config={"workflow_name": "w"}
    )
    assert "fine" == result.final_output

    async def streamed() -> Any:
        # context, max_turns, hooks, run_config: positional, as the SDK allows
        result = runner.run_streamed(
            Agent(name="a", model=models[1]), "hi", {"user": 1}, 3, None, {"workflow_name": "w"}
        )
        async for _ in result.stream_events():
            pass
        return result

    assert "fine" == asyncio.run(streamed()).final_output


# -- 10. every tool kind goes through selection; a failed plan is never silent --------------


def test_hosted_tools_go_through_selection(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    """A hosted MCP tool, a code interpreter and a web search beside function
    tools: the palette narrows them by name, and the policies still apply."""
    layer = make_layer(
        tracer_provider,
        stages=[RolePaletteStage(resolver={"analyst": ["fetch_data", "hosted_mcp"]}.get)],
    )
    log: list[ModelCall] = []
    script = [step(text("Q3 sales grew 12%."))]
    own, haiku = ScriptedModel(OPUS, script, log), ScriptedModel(HAIKU, script, log)
    runner = SeamscopeRunner(layer, {HAIKU: haiku})
    mcp = HostedMCPTool(tool_config={"type": "mcp", "server_label": "crm", "server_url": "x"})
    interpreter = CodeInterpreterTool(
        tool_config={"type": "code_interpreter", "container": {"type": "auto"}}
    )
    agent = analyst(own, Toolbox(), runner)
    agent = agent.clone(tools=[*agent.tools, mcp, interpreter, WebSearchTool()])
    result = run(runner, agent, "How did Q3 sales go?", "run", conversation="conv-t")
    spans = list(span_exporter.get_finished_spans())

    assert "Q3 sales grew 12%." == result.final_output
    assert [(HAIKU, ("fetch_data", "hosted_mcp"))] == [(m.model, m.tools) for m in log]
    [select] = named(spans, c.SPAN_SELECT_TOOLS)
    offered = attrs(select)[c.ATTR_SELECTION_OFFERED]
    assert {"hosted_mcp", "code_interpreter", WebSearchTool().name, "fetch_data"} <= set(offered)
    assert ["fetch_data", "hosted_mcp"] == attrs(select)[c.ATTR_SELECTION_SELECTED]
    assert [] == [e for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR]
    [iteration] = named(spans, c.SPAN_ITERATION)
    assert not [e for e in iteration.events if e.name == "seamscope.decisions.skipped"]


def test_a_failed_plan_is_recorded_on_the_iteration_and_explain_says_so(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("planning broke")

    monkeypatch.setattr(translate, "selected_tools", broken)
    path = tmp_path / "trace.jsonl"
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    log: list[ModelCall] = []
    model = ScriptedModel(OPUS, [step(text("fine"))], log)
    runner = SeamscopeRunner(make_layer(tracer_provider))
    result = run(runner, analyst(model, Toolbox(), runner), "hi", "run")
    spans = list(span_exporter.get_finished_spans())

    assert "fine" == result.final_output  # the turn ran as the SDK asked for it
    assert 1 == len(log)
    [iteration] = named(spans, c.SPAN_ITERATION)
    [event] = [e for e in iteration.events if e.name == "seamscope.decisions.skipped"]
    assert {c.ATTR_ERROR_TYPE: "RuntimeError", c.ATTR_ERROR_MESSAGE: "planning broke"} == dict(
        event.attributes or {}
    )
    # where a user looks: explain's tree and its JSON
    tracer_provider.force_flush()
    capsys.readouterr()
    assert 0 == main(["explain", str(path)])
    tree = capsys.readouterr().out
    assert "decisions skipped: RuntimeError while planning the model call" in tree
    assert 0 == main(["explain", str(path), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    [turn] = report["turns"] if isinstance(report, dict) else report
    [it] = turn["iterations"]
    assert {"error_type": "RuntimeError", "message": "planning broke"} == it["decisions_skipped"]


def test_every_sdk_tool_kind_is_sendable() -> None:
    """The SDK's ``Tool`` union holds a subscripted generic: ``isinstance`` against
    it raises, so each kind is checked by its class."""
    mcp = HostedMCPTool(tool_config={"type": "mcp", "server_label": "crm", "server_url": "x"})
    web = WebSearchTool()
    sendable, other = translate.selected_tools([mcp, web, "not-a-tool"])
    assert ([mcp, web], ["not-a-tool"]) == (sendable, other)
    unnamed = object()
    assert ([mcp], [unnamed]) == translate.offered_named([mcp, unnamed], recall=True)


def test_agent_hooks_given_as_run_hooks_are_refused_as_the_sdk_refuses_them() -> None:
    """The SDK refuses agent-scoped hooks passed as a run's hooks with its own
    TypeError; seamscope checks before composing them, so the same error."""
    from agents import Agent, AgentHooks, Runner
    from opentelemetry.sdk.trace import TracerProvider

    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.openai_agents import SeamscopeRunner

    agent = Agent(name="a")
    hooks: Any = AgentHooks()
    with pytest.raises(TypeError) as alone:
        Runner.run_sync(agent, "hi", hooks=hooks)
    layer = DecisionLayer(default_model="m", tracer_provider=TracerProvider())
    with pytest.raises(TypeError) as added:
        SeamscopeRunner(layer).run_sync(agent, "hi", hooks=hooks)
    assert str(alone.value) == str(added.value)
