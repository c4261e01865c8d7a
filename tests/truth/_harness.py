"""What really happened, and every way the telemetry can disagree with it.

The recorders here know nothing of seamscope. An adapter's test turns its
framework's objects into the neutral records below (:class:`Seen`,
:class:`Call`) in a few lines of glue and drives its framework with
:class:`Ground`'s scripted replies and recorded tools:

* :meth:`Ground.model_call` is what a scripted chat model calls: it logs the
  model instance that was called, the tools bound to it, the tool choice and
  the messages it received, and answers the conversation's next scripted
  reply;
* :meth:`Ground.run_tool` is what a recorded tool calls: it logs the tool's
  name, arguments and call id, whether it raised, and what it returned;
* :meth:`Ground.transcript` keeps the framework's own messages after each
  invoke (its state or checkpointer), and :meth:`Ground.invoked` counts the
  invokes of each conversation.

:func:`disagreements` then reads spans (an ``InMemorySpanExporter``'s
finished spans, and :class:`SpanWatch`'s started ones), metric points (an
``InMemoryMetricReader``) and structlog events (``capture_logs``) and returns
one sentence per claim that is not what happened. Names come from
``seamscope.telemetry.conventions``: the telemetry's contract is what is
checked, not its implementation.

Conventions of the scripts: a conversation is named by its first user
message, ``"<conversation>: text"``; call ids are unique within a
conversation unless a scenario is about duplicates; usage has no cache
tokens where realized USD is checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import threading
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from seamscope.telemetry import conventions as c

# -- neutral records ----------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call as the framework holds it."""

    id: str
    name: str
    args: Any = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """One message as the framework holds it (``status``: ``"error"`` for a tool
    message the framework marks as failed)."""

    role: str
    text: str
    call_id: str | None = None
    name: str | None = None
    status: str | None = None
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Reply:
    """A scripted model reply; ``error`` is raised instead of answering."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    usage: tuple[int, int] = (1_000, 50)
    error: BaseException | None = None


def reply(
    *calls: tuple[str, Any, str], text: str = "", usage: tuple[int, int] = (1_000, 50)
) -> Reply:
    """A reply with tool calls ``(name, args, id)``."""
    return Reply(tuple(Call(i, n, a) for n, a, i in calls), text, usage)


@dataclass(frozen=True)
class ModelCall:
    """One call of a chat model instance, as the instance saw it."""

    seq: int
    conversation: str
    model: str
    tools: tuple[str, ...]
    tool_choice: Any
    messages: tuple[Seen, ...]
    reply: Reply
    raised: str | None


@dataclass(frozen=True)
class ToolRun:
    """One execution of a tool, as the tool saw it."""

    seq: int
    conversation: str
    name: str
    args: Any
    call_id: str | None
    raised: str | None
    output: str | None


_NAMED = re.compile(r"^([\w-]+): ", re.MULTILINE)


def conversation_of(messages: Iterable[Seen]) -> str:
    """The conversation a prompt belongs to: the ``name: `` a line of its first
    naming user message starts with (a summary that replaced the first
    message quotes it)."""
    for message in messages:
        found = _NAMED.search(message.text) if message.role == "user" else None
        if found:
            return found.group(1)
    return "?"


_CONVERSATION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "truth_conversation", default=None
)


class Ground:
    """The log of what really happened, and the scripts the model follows.

    Thread-safe: concurrent conversations record into one ground.
    """

    def __init__(self, scripts: Mapping[str, Sequence[Reply]]) -> None:
        self._scripts = {conv: deque(replies) for conv, replies in scripts.items()}
        self._lock = threading.Lock()
        self._seq = 0
        self.model_calls: list[ModelCall] = []
        self.tool_runs: list[ToolRun] = []
        self.transcripts: dict[str, list[Seen]] = {}
        self.invokes: Counter[str] = Counter()
        self.structured: set[str] = set()
        """Tool names the framework consumes itself (structured output)."""
        self.unfinished: set[str] = set()
        """Conversations whose last invoke did not run to its end (abandoned,
        failed): tool calls its model emitted may never have run."""

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- what the scripted model and the tools call ------------------------------

    def model_call(
        self, model: str, tools: Sequence[str], tool_choice: Any, messages: Sequence[Seen]
    ) -> Reply:
        conversation = conversation_of(messages)
        with self._lock:
            script = self._scripts.get(conversation)
            answer = script.popleft() if script else Reply(text="(script exhausted)")
            self.model_calls.append(
                ModelCall(
                    self._next_seq(),
                    conversation,
                    model,
                    tuple(tools),
                    tool_choice,
                    tuple(messages),
                    answer,
                    None if answer.error is None else type(answer.error).__qualname__,
                )
            )
        if answer.error is not None:
            raise answer.error
        return answer

    def run_tool(
        self,
        name: str,
        args: Any,
        call_id: str | None,
        body: Callable[[Any], str],
        conversation: str | None = None,
    ) -> str:
        conversation = conversation or _CONVERSATION.get() or "?"
        try:
            output = body(args)
        except BaseException as exc:
            with self._lock:
                self.tool_runs.append(
                    ToolRun(
                        self._next_seq(),
                        conversation,
                        name,
                        args,
                        call_id,
                        type(exc).__qualname__,
                        None,
                    )
                )
            raise
        with self._lock:
            self.tool_runs.append(
                ToolRun(self._next_seq(), conversation, name, args, call_id, None, output)
            )
        return output

    @contextlib.contextmanager
    def conversation(self, conversation: str) -> Iterator[None]:
        """Tools that cannot see their conversation record under this one."""
        token = _CONVERSATION.set(conversation)
        try:
            yield
        finally:
            _CONVERSATION.reset(token)

    # -- what the framework says ---------------------------------------------------

    def invoked(self, conversation: str, transcript: Sequence[Seen] | None = None) -> None:
        """One invoke of ``conversation`` ended; ``transcript``: its messages now."""
        with self._lock:
            self.invokes[conversation] += 1
            if transcript is not None:
                self.transcripts[conversation] = list(transcript)

    def assign_call_ids(self, conversation: str) -> None:
        """For tools that cannot see their call id: take it from the framework's
        tool messages, in order (each real run answered by one message)."""
        with self._lock:
            answers = [m for m in self.transcripts.get(conversation, []) if m.role == "tool"]
            runs = [r for r in self.tool_runs if r.conversation == conversation]
            cursor = 0
            for i, run in enumerate(self.tool_runs):
                if run.conversation != conversation or run.call_id is not None:
                    continue
                while cursor < len(answers) and answers[cursor].name != run.name:
                    cursor += 1
                if cursor < len(answers):
                    self.tool_runs[i] = ToolRun(
                        run.seq,
                        run.conversation,
                        run.name,
                        run.args,
                        answers[cursor].call_id,
                        run.raised,
                        run.output,
                    )
                    cursor += 1
            del runs

    # -- views -------------------------------------------------------------------------

    def conversations(self) -> list[str]:
        return sorted({m.conversation for m in self.model_calls} | set(self.invokes))

    def calls_of(self, conversation: str) -> list[ModelCall]:
        return [m for m in self.model_calls if m.conversation == conversation]

    def runs_of(self, conversation: str) -> list[ToolRun]:
        return [r for r in self.tool_runs if r.conversation == conversation]

    def messages_of(self, conversation: str) -> list[Seen]:
        """The framework's messages: the last transcript, plus any message a model
        received that it no longer holds (summarised away). A tool message is
        one answer whatever text a model received for it (a middleware may
        clear its text in the request only)."""
        out = list(self.transcripts.get(conversation, []))
        keys = {_key(m) for m in out}
        answers = {m.call_id for m in out if m.role == "tool" and m.call_id}
        for call in self.calls_of(conversation):
            for message in call.messages:
                if message.role == "tool" and message.call_id in answers:
                    continue
                if _key(message) not in keys:
                    keys.add(_key(message))
                    out.append(message)
                    if message.role == "tool" and message.call_id:
                        answers.add(message.call_id)
        return out

    def decisions(self) -> dict[str, list[Any]]:
        """Per conversation, what the loop decided and did, in order (for comparing
        runs: same inputs, same decisions)."""
        out: dict[str, list[Any]] = {}
        for conv in self.conversations():
            steps: list[Any] = [
                (
                    "model",
                    m.model,
                    tuple(sorted(m.tools)),
                    str(m.tool_choice),
                    tuple((x.id, x.name) for x in m.reply.calls),
                )
                for m in self.calls_of(conv)
            ]
            steps.append(
                (
                    "ran",
                    sorted(
                        (r.name, _json(r.args), r.call_id or "", r.raised or "")
                        for r in self.runs_of(conv)
                    ),
                )
            )
            steps.append(
                ("said", [(m.role, m.name, m.text[:60]) for m in self.transcripts.get(conv, [])])
            )
            out[conv] = steps
        return out


def _key(message: Seen) -> tuple[Any, ...]:
    calls = tuple((x.id, x.name, _json(x.args)) for x in message.calls)
    return (message.role, message.call_id, message.name, message.text, calls)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# -- span bookkeeping ------------------------------------------------------------------


class SpanWatch(SpanProcessor):
    """Records every span started and ended (SDK span-processor API)."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: set[int] = set()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None:
            with self._lock:
                self.ended.add(span.context.span_id)

    def open_spans(self) -> list[str]:
        with self._lock:
            return sorted(n for i, n in self.started.items() if i not in self.ended)


# -- the comparison ----------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """USD per token, input and output, of the models a scenario prices."""

    rates: Mapping[str, tuple[float, float]]

    def cost(self, model: str, tokens_in: float, tokens_out: float) -> float:
        rate_in, rate_out = self.rates[model]
        return tokens_in * rate_in + tokens_out * rate_out


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


class _Spans:
    def __init__(self, spans: Sequence[ReadableSpan]) -> None:
        self.all = sorted(spans, key=lambda s: s.start_time or 0)
        self.by_id = {s.context.span_id: s for s in self.all if s.context is not None}
        self.kids: dict[int, list[ReadableSpan]] = defaultdict(list)
        for s in self.all:
            if s.parent is not None:
                self.kids[s.parent.span_id].append(s)

    def children(self, span: ReadableSpan, name: str) -> list[ReadableSpan]:
        return [k for k in self.kids.get(span.context.span_id, []) if k.name == name]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return None if span.parent is None else self.by_id.get(span.parent.span_id)

    def ancestors(self, span: ReadableSpan) -> Iterator[ReadableSpan]:
        node = self.parent(span)
        while node is not None:
            yield node
            node = self.parent(node)

    def of(self, conversation: str, prefix: str) -> list[ReadableSpan]:
        return [
            s
            for s in self.all
            if s.name.startswith(prefix)
            and (s.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID) == conversation
        ]


def _status(span: ReadableSpan) -> tuple[bool, Any]:
    return span.status.status_code is StatusCode.ERROR, (span.attributes or {}).get(
        c.ATTR_ERROR_TYPE
    )


def _points(reader: InMemoryMetricReader | None) -> dict[str, list[tuple[dict[str, Any], float]]]:
    out: dict[str, list[tuple[dict[str, Any], float]]] = defaultdict(list)
    data = None if reader is None else reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is not None:
                        out[metric.name].append((dict(point.attributes or {}), float(value)))
    return out


def _total(points: Sequence[tuple[dict[str, Any], float]], **where: str) -> float:
    return sum(v for a, v in points if all(a.get(k) == w for k, w in where.items()))


def disagreements(
    ground: Ground,
    spans: Sequence[ReadableSpan],
    *,
    watch: SpanWatch | None = None,
    metrics: InMemoryMetricReader | None = None,
    logs: Sequence[Mapping[str, Any]] | None = None,
    prices: Prices | None = None,
    recall_tool: str | None = None,
    offload_threshold_chars: int = 60_000,
    foreign: Sequence[ReadableSpan] = (),
    telemetry_errors: int = 0,
) -> list[str]:
    """Every telemetry claim that is not what ``ground`` says happened.

    ``foreign``: spans of another instrumentation the scenario runs beside
    (valid parents, not checked); ``recall_tool``: the tool that re-expands
    an offloaded output (its answers are the framework's, not a ground
    tool's); ``telemetry_errors``: how many ``seamscope.telemetry.error``
    events the scenario provokes on purpose.
    """
    out: list[str] = []
    s = _Spans([*spans, *foreign])
    own = _Spans(spans)
    foreign_ids = {f.context.span_id for f in foreign}
    out += _hygiene(ground, s, own, foreign_ids, watch)
    dropped: list[tuple[str, ReadableSpan]] = []
    gates: list[tuple[str, ReadableSpan]] = []
    for conv in ground.conversations():
        out += _conversation(ground, conv, s, dropped, gates, recall_tool, offload_threshold_chars)
        out += _rules(ground, conv, s)
    out += _identity(own, s)
    if logs is not None:
        out += _logs(logs, s, dropped, telemetry_errors)
    points = _points(metrics)
    if metrics is not None:
        out += _metrics(ground, own, points, gates, recall_tool)
    if prices is not None:
        out += _economics(ground, own, points, gates, prices, recall_tool, metrics is not None)
    return out


def _hygiene(
    ground: Ground, s: _Spans, own: _Spans, foreign_ids: set[int], watch: SpanWatch | None
) -> list[str]:
    out: list[str] = []
    if watch is not None:
        opened = [n for n in watch.open_spans()]
        if opened:
            out.append(f"spans never ended: {opened}")
    ids = Counter(sp.context.span_id for sp in own.all)
    dupes = [own.by_id[i].name for i, n in ids.items() if n > 1]
    if dupes:
        out.append(f"span ids exported twice: {dupes}")
    for sp in own.all:
        if sp.parent is not None and sp.parent.span_id not in s.by_id:
            out.append(f"{sp.name}: parent span never exported (orphan)")
        if sp.parent is not None and sp.parent.trace_id != sp.context.trace_id:
            out.append(f"{sp.name}: parent in another trace")
        conv = (sp.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        if conv is None:
            continue
        for anc in s.ancestors(sp):
            other = (anc.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
            if other is not None and other != conv:
                out.append(f"{sp.name} of {conv} sits under {anc.name} of {other}")
                break
    traces: dict[int, set[str]] = defaultdict(set)
    for sp in own.all:
        conv = (sp.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        if conv is not None and sp.name != c.SPAN_OFFLOAD_SETTLE:
            traces[sp.context.trace_id].add(conv)
    for trace_id, convs in traces.items():
        if len(convs) > 1:
            out.append(f"trace {trace_id:032x} mixes conversations {sorted(convs)}")
    agent_spans = [sp for sp in own.all if sp.name.startswith("invoke_agent")]
    for conv in ground.conversations():
        mine = [
            sp
            for sp in agent_spans
            if (sp.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID) == conv
        ]
        expected = ground.invokes[conv]
        if conv in ground.unfinished and not ground.calls_of(conv):
            expected = len(mine)  # abandoned before the agent started: maybe no run at all
        if expected and len(mine) != expected:
            out.append(f"{conv}: {len(mine)} invoke_agent spans for {expected} invokes")
        roots = {sp.context.trace_id for sp in mine}
        if len(roots) != len(mine):
            out.append(f"{conv}: two invoke_agent spans share a trace")
    for sp in own.all:
        if sp.name in (c.SPAN_OFFLOAD_SETTLE,) or sp.name.startswith("invoke_agent"):
            continue
        names = [a.name for a in s.ancestors(sp)]
        if c.SPAN_ITERATION not in names and sp.name != c.SPAN_ITERATION:
            out.append(f"{sp.name}: not inside a seamscope.iteration")
        if not any(n.startswith("invoke_agent") for n in names):
            out.append(f"{sp.name}: not inside an invoke_agent span")
    return out


def _rules(ground: Ground, conv: str, s: _Spans) -> list[str]:
    """The rules every adapter keeps, checked against what the models and
    tools did: the model really called names its chat span (request and
    response model); ``error.type`` names what the tool raised (a tool
    whose exception was recorded as raised: never ``tool_error_result``,
    which is only for a result nothing says more of); a chat span whose
    prompt carried a stub or a cleared tool result says
    ``seamscope.conversation.compacted``."""
    out: list[str] = []
    done = [m for m in ground.calls_of(conv) if m.raised is None]
    chats = [sp for sp in s.of(conv, "chat ") if not _status(sp)[0]]
    runs = ground.runs_of(conv)
    outputs = {r.call_id: r.output for r in runs if r.call_id and r.output is not None}
    for call, chat in zip(done, chats, strict=False):
        where = f"{conv} model call {done.index(call)}"
        a = _attrs(chat)
        if chat.name != f"chat {call.model}":
            out.append(f"{where}: chat span named {chat.name!r}, {call.model!r} reasoned")
        response = a.get(c.ATTR_GEN_AI_RESPONSE_MODEL)
        if response is not None and response != call.model:
            out.append(f"{where}: response model {response!r}, {call.model!r} answered")
        texts = {m.text for m in call.messages}
        changed = any(
            m.role == "tool"
            and m.call_id in outputs
            and m.text != outputs[m.call_id]
            and outputs[m.call_id] not in texts  # not brought back (a recall)
            for m in call.messages
        )
        if changed and a.get(c.ATTR_CONVERSATION_COMPACTED) is not True:
            out.append(
                f"{where}: the prompt carried a stub or a cleared result, "
                "the chat span does not say seamscope.conversation.compacted"
            )
    for sp in s.of(conv, "execute_tool "):
        a = _attrs(sp)
        key = (a.get(c.ATTR_GEN_AI_TOOL_NAME), a.get(c.ATTR_GEN_AI_TOOL_CALL_ID))
        raised = next((r.raised for r in runs if (r.name, r.call_id) == key and r.raised), None)
        error_type = a.get(c.ATTR_ERROR_TYPE)
        if raised and error_type != raised:
            out.append(
                f"{conv}: {sp.name} ({key[1]}) error.type {error_type!r}, it raised {raised!r}"
            )
    return out


_DECISION_SPANS = (
    c.SPAN_SELECT_TOOLS,
    c.SPAN_STAGE,
    c.SPAN_SEAM_PRE_MODEL,
    c.SPAN_SEAM_POST_MODEL,
    c.SPAN_DISPATCH,
    c.SPAN_OFFLOAD_GATE,
    c.SPAN_COMPACTION,
)


def _identity(own: _Spans, s: _Spans) -> list[str]:
    """Every decision span names the conversation of the ``invoke_agent`` span
    it sits under and the agent of its iteration (the agent that ran it: after
    a handoff, not the run's first agent)."""
    out: list[str] = []
    for sp in own.all:
        if sp.name not in _DECISION_SPANS and not sp.name.startswith("seamscope.middleware"):
            continue
        agent = next((a for a in s.ancestors(sp) if a.name.startswith("invoke_agent")), None)
        if agent is None:
            continue
        iteration = next((a for a in s.ancestors(sp) if a.name == c.SPAN_ITERATION), agent)
        mine = _attrs(sp)
        theirs = {
            c.ATTR_GEN_AI_CONVERSATION_ID: _attrs(agent).get(c.ATTR_GEN_AI_CONVERSATION_ID),
            c.ATTR_GEN_AI_AGENT_NAME: _attrs(iteration).get(c.ATTR_GEN_AI_AGENT_NAME),
        }
        for key in (c.ATTR_GEN_AI_CONVERSATION_ID, c.ATTR_GEN_AI_AGENT_NAME):
            if theirs.get(key) is not None and mine.get(key) != theirs.get(key):
                out.append(
                    f"{sp.name}: {key} {mine.get(key)!r}, its agent run says {theirs[key]!r}"
                )
    return out


def _assistant_after(ground: Ground, conv: str, call: ModelCall) -> Seen | None:
    """The assistant message the framework kept for ``call``'s reply (rewritten)."""
    ids = [x.id for x in call.reply.calls]
    if not ids or len(set(ids)) != len(ids) or "" in ids:
        # ambiguous ids: the messages in order (one assistant message per reply)
        answers = [m for m in ground.transcripts.get(conv, []) if m.role == "assistant"]
        done = [m for m in ground.calls_of(conv) if m.raised is None]
        index = done.index(call) if call in done else -1
        return answers[index] if 0 <= index < len(answers) else None
    for message in ground.messages_of(conv):
        if message.role == "assistant" and [x.id for x in message.calls] == ids:
            return message
    return None


def _answers(messages: Sequence[Seen]) -> dict[str, list[Seen]]:
    by_id: dict[str, list[Seen]] = defaultdict(list)
    for m in messages:
        if m.role == "tool":
            by_id[m.call_id or ""].append(m)
    return by_id


def _conversation(
    ground: Ground,
    conv: str,
    s: _Spans,
    dropped: list[tuple[str, ReadableSpan]],
    gates: list[tuple[str, ReadableSpan]],
    recall_tool: str | None,
    threshold_chars: int,
) -> list[str]:
    out: list[str] = []
    calls = ground.calls_of(conv)
    done = [m for m in calls if m.raised is None]
    chats = [sp for sp in s.of(conv, "chat ") if not _status(sp)[0]]
    failed_chats = [sp for sp in s.of(conv, "chat ") if _status(sp)[0]]
    if len(chats) != len(done):
        out.append(f"{conv}: {len(chats)} chat spans for {len(done)} model calls")
    if len(failed_chats) > len(calls) - len(done):
        out.append(
            f"{conv}: {len(failed_chats)} failed chat spans, "
            f"{len(calls) - len(done)} failed model calls"
        )
    messages = ground.messages_of(conv)
    answers = _answers(messages)
    for call, chat in zip(done, chats, strict=False):
        where = f"{conv} model call {done.index(call)}"
        attrs = _attrs(chat)
        if attrs.get(c.ATTR_GEN_AI_REQUEST_MODEL) != call.model:
            out.append(
                f"{where}: chat span names {attrs.get(c.ATTR_GEN_AI_REQUEST_MODEL)!r}, "
                f"{call.model!r} reasoned"
            )
        usage = (
            attrs.get(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS),
            attrs.get(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS),
        )
        if usage != call.reply.usage:
            out.append(f"{where}: chat span usage {usage}, the model reported {call.reply.usage}")
        iteration = s.parent(chat)
        if iteration is None or iteration.name != c.SPAN_ITERATION:
            out.append(f"{where}: chat span not under an iteration")
            continue
        selections = s.children(iteration, c.SPAN_SELECT_TOOLS)
        if len(selections) != 1:
            out.append(f"{where}: {len(selections)} select_tools spans")
        else:
            selected = sorted(_attrs(selections[0]).get(c.ATTR_SELECTION_SELECTED, []))
            if selected != sorted(call.tools):
                out.append(f"{where}: select_tools.selected {selected}, bound {sorted(call.tools)}")
            sel = _attrs(selections[0])
            forced = sel.get(c.ATTR_SELECTION_FORCED_TOOL)
            if forced is not None and forced != call.tool_choice:
                out.append(f"{where}: forced_tool {forced!r}, tool_choice {call.tool_choice!r}")
        pres = s.children(iteration, c.SPAN_SEAM_PRE_MODEL)
        if len(pres) != 1:
            out.append(f"{where}: {len(pres)} pre_model spans")
        elif _attrs(pres[0]).get(c.ATTR_GEN_AI_REQUEST_MODEL) != call.model and not (
            # the seam chose the default (nothing said more) or a model not
            # callable here, which the chat span names beside the one that ran
            _attrs(pres[0]).get(c.ATTR_SEAM_WINNER_SOURCE) == c.WinnerSource.DEFAULT.value
            or attrs.get(c.ATTR_MODEL_CHOSEN_UNAVAILABLE)
            == _attrs(pres[0]).get(c.ATTR_GEN_AI_REQUEST_MODEL)
        ):
            out.append(
                f"{where}: pre_model chose {_attrs(pres[0]).get(c.ATTR_GEN_AI_REQUEST_MODEL)!r}, "
                f"{call.model!r} reasoned"
            )
        out += _dispatches(ground, conv, call, where, iteration, s, answers, dropped)
    # tools: every execute_tool span is an answer the framework holds, and back
    executed = s.of(conv, "execute_tool ")
    spans_by = Counter(
        (_attrs(sp).get(c.ATTR_GEN_AI_TOOL_NAME), _attrs(sp).get(c.ATTR_GEN_AI_TOOL_CALL_ID))
        for sp in executed
    )
    runs = ground.runs_of(conv)
    ran = Counter((r.name, r.call_id) for r in runs)
    answered = Counter(
        (m.name, m.call_id)
        for m in messages
        if m.role == "tool" and m.name not in ground.structured
    )
    # a call to a tool that was not offered, answered with an error and never
    # run: the framework may refuse it (no execute_tool span) or hand it to its
    # tool runner that fails it (an ERROR span); either is true
    refused = {
        (x.name, x.id)
        for m in calls
        for x in m.reply.calls
        if m.tools and x.name not in m.tools and not ran[(x.name, x.id)]
    }
    refused = {
        k
        for k in refused
        if any(a.status == "error" for a in answers.get(k[1], []) if a.name == k[0])
    }
    for key in refused:
        answered.pop(key, None)
        spans_by.pop(key, None)
    if conv in ground.unfinished:
        answered = answered | ran
    if spans_by != answered:
        out.append(
            f"{conv}: execute_tool spans {sorted(spans_by.items(), key=str)} but "
            f"the framework answered {sorted(answered.items(), key=str)}"
        )
    missing = ran - spans_by
    if missing:
        out.append(f"{conv}: tools ran without an execute_tool span: {sorted(missing, key=str)}")
    for sp in executed:
        a = _attrs(sp)
        key = (a.get(c.ATTR_GEN_AI_TOOL_NAME), a.get(c.ATTR_GEN_AI_TOOL_CALL_ID))
        failed = any(r.raised for r in runs if (r.name, r.call_id) == key) or any(
            m.status == "error" for m in answers.get(key[1] or "", []) if m.name == key[0]
        )
        error, error_type = _status(sp)
        if failed and not (error and error_type):
            out.append(
                f"{conv}: {sp.name} ({key[1]}) failed but its span is not ERROR with error.type"
            )
        if not failed and error and key in answered:
            out.append(f"{conv}: {sp.name} ({key[1]}) succeeded but its span is ERROR")
    # the offload gate
    big = [r for r in runs if r.output is not None and len(r.output) >= threshold_chars]
    conv_gates = s.of(conv, c.SPAN_OFFLOAD_GATE)
    for sp in conv_gates:
        gates.append((conv, sp))
    for run in big:
        mine = [g for g in conv_gates if _attrs(g).get(c.ATTR_GEN_AI_TOOL_CALL_ID) == run.call_id]
        if len(mine) != 1:
            out.append(f"{conv}: {len(mine)} gate spans for {run.name} ({run.call_id})")
    answered_runs = [r for r in runs if r.output is not None]
    for g in conv_gates:
        a = _attrs(g)
        call_id = a.get(c.ATTR_GEN_AI_TOOL_CALL_ID)
        key = (call_id, a.get(c.ATTR_GEN_AI_TOOL_NAME))
        run = next((r for r in answered_runs if (r.call_id, r.name) == key), None)
        if run is not None:
            answered_runs.remove(run)  # duplicate ids: one gate call per run, in order
        if run is None:
            out.append(f"{conv}: gate span for {call_id}, which no tool answered")
            continue
        if a.get(c.ATTR_OFFLOAD_OUTPUT_TOKENS) != len(run.output or "") / 4:
            out.append(
                f"{conv}: gate output_tokens {a.get(c.ATTR_OFFLOAD_OUTPUT_TOKENS)} for "
                f"{len(run.output or '')} chars"
            )
        seen = [m.text for m in answers.get(call_id, []) if m.name == run.name]
        offload_id = a.get(c.ATTR_OFFLOAD_ID)
        if a.get(c.ATTR_OFFLOAD_FIRE):
            if (
                not offload_id
                or not seen
                or any(t == run.output or offload_id not in t for t in seen)
            ):
                out.append(
                    f"{conv}: gate fired {offload_id} for {call_id}, the model saw "
                    f"{[t[:40] for t in seen]}"
                )
        elif seen and any(t != run.output for t in seen):
            out.append(f"{conv}: gate did not fire for {call_id}, the model saw another text")
    return out


def _structured_answers(
    ground: Ground,
    call: ModelCall,
    where: str,
    iteration: ReadableSpan,
    s: _Spans,
) -> list[str]:
    """Rule f for a structured-output answer: a dispatch span that says
    ``structured_output`` is a call the model emitted to a tool the framework
    consumes itself (never handed to the tool runner: no tool ran for it,
    its dispatch is the call as emitted, no policy routed it), and it sits
    under the iteration, outside the POST seam; and every such call the
    model emitted has one (LangChain's ``ToolStrategy`` tool, pydantic-ai's
    ``final_result``; the Agents SDK answers in plain JSON text, no call)."""
    out: list[str] = []
    flagged = [
        sp
        for sp in s.children(iteration, c.SPAN_DISPATCH)
        if _attrs(sp).get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT) is True
    ]
    emitted = {x.id: x for x in call.reply.calls if x.name in ground.structured}
    for sp in flagged:
        a = _attrs(sp)
        call_id = a.get(c.ATTR_GEN_AI_TOOL_CALL_ID)
        label = f"{where} structured answer {call_id!r}"
        answer = emitted.get(call_id)
        if answer is None:
            out.append(f"{label}: not a structured-output call the model emitted")
            continue
        if (a.get(c.ATTR_DISPATCH_EMITTED_TOOL), a.get(c.ATTR_DISPATCH_FINAL_TOOL)) != (
            answer.name,
            answer.name,
        ):
            out.append(
                f"{label}: emitted {a.get(c.ATTR_DISPATCH_EMITTED_TOOL)!r}, final "
                f"{a.get(c.ATTR_DISPATCH_FINAL_TOOL)!r}; the framework consumed {answer.name!r}"
            )
        if a.get(c.ATTR_POLICY_WINNER) or a.get(c.ATTR_DISPATCH_REDIRECT_TO):
            out.append(f"{label}: says a policy routed it; no policy routes the answer")
        if any(r.call_id == call_id for r in ground.tool_runs):
            out.append(f"{label}: a tool ran for it")
        if s.of(str(a.get(c.ATTR_GEN_AI_CONVERSATION_ID)), f"execute_tool {answer.name}"):
            out.append(f"{label}: an execute_tool span claims it was handed to the tool runner")
    ids = [_attrs(sp).get(c.ATTR_GEN_AI_TOOL_CALL_ID) for sp in flagged]
    missing = [call_id for call_id in emitted if call_id not in ids]
    if missing:
        out.append(f"{where}: structured answers with no dispatch span: {missing}")
    if len(set(ids)) != len(ids):
        out.append(f"{where}: more than one structured answer span for a call: {ids}")
    return out


def _dispatches(
    ground: Ground,
    conv: str,
    call: ModelCall,
    where: str,
    iteration: ReadableSpan,
    s: _Spans,
    answers: Mapping[str, list[Seen]],
    dropped: list[tuple[str, ReadableSpan]],
) -> list[str]:
    out: list[str] = []
    out += _structured_answers(ground, call, where, iteration, s)
    routed = [x for x in call.reply.calls if x.name not in ground.structured]
    posts = s.children(iteration, c.SPAN_SEAM_POST_MODEL)
    if not routed:
        if posts:
            out.append(f"{where}: a post_model span for a reply with no dispatched call")
        return out
    if len(posts) != 1:
        return [*out, f"{where}: {len(posts)} post_model spans for {len(routed)} calls"]
    post = posts[0]
    if _attrs(post).get(c.ATTR_SEAM_TOOL_CALLS) != len(routed):
        out.append(
            f"{where}: post_model.tool_calls {_attrs(post).get(c.ATTR_SEAM_TOOL_CALLS)}, "
            f"{len(routed)} calls dispatched"
        )
    spans = s.children(post, c.SPAN_DISPATCH)
    if len(spans) != len(routed):
        return [*out, f"{where}: {len(spans)} dispatch spans for {len(routed)} calls"]
    kept = _assistant_after(ground, conv, call)
    finals = None if kept is None else [x for x in kept.calls if x.name not in ground.structured]
    if kept is None and conv not in ground.unfinished:
        out.append(f"{where}: the framework kept no assistant message for the reply")
    rewritten = 0
    for i, (emitted, sp) in enumerate(zip(routed, spans, strict=True)):
        a = _attrs(sp)
        label = f"{where} dispatch {emitted.id!r}"
        if a.get(c.ATTR_GEN_AI_TOOL_CALL_ID) != emitted.id:
            out.append(f"{label}: span says call id {a.get(c.ATTR_GEN_AI_TOOL_CALL_ID)!r}")
        if a.get(c.ATTR_DISPATCH_EMITTED_TOOL) != emitted.name:
            out.append(
                f"{label}: emitted_tool {a.get(c.ATTR_DISPATCH_EMITTED_TOOL)!r}, "
                f"the model emitted {emitted.name!r}"
            )
        final = a.get(c.ATTR_DISPATCH_FINAL_TOOL)
        ran = [m.name for m in answers.get(emitted.id, [])]
        if a.get(c.ATTR_DISPATCH_REFUSED) is True:
            # the framework refused the call (no tool by that name may run there)
            if final is not None:
                out.append(f"{label}: refused, yet final_tool {final!r}")
            executed = [r.name for r in ground.runs_of(conv) if r.call_id == emitted.id]
            if executed:
                out.append(f"{label}: refused, but {executed} ran for the call")
            final = emitted.name  # the framework keeps the call as emitted
        if final != emitted.name:
            rewritten += 1
        never_offered = bool(call.tools) and emitted.name not in call.tools
        if never_offered != (a.get(c.ATTR_DISPATCH_OFFERED) is False):
            out.append(
                f"{label}: {emitted.name!r} was {'not ' if never_offered else ''}bound, "
                f"dispatch offered={a.get(c.ATTR_DISPATCH_OFFERED)!r}"
            )
        if finals is not None and i < len(finals) and finals[i].name != final:
            out.append(f"{label}: final_tool {final!r}, the framework kept {finals[i].name!r}")
        if (
            emitted.id
            and len(set(x.id for x in routed)) == len(routed)
            and ran
            and final not in ran
        ):
            out.append(f"{label}: final_tool {final!r}, but {ran} answered the call")
        if (
            c.ATTR_DISPATCH_ARGS in a
            and finals is not None
            and i < len(finals)
            and json.loads(a[c.ATTR_DISPATCH_ARGS]) != json.loads(_json(finals[i].args))
        ):
            out.append(
                f"{label}: dispatch arguments {a[c.ATTR_DISPATCH_ARGS]}, "
                f"the framework kept {_json(finals[i].args)}"
            )
        target = a.get(c.ATTR_DISPATCH_REDIRECT_TO)
        verdict = a.get(c.ATTR_DISPATCH_PALETTE_GATE)
        override = a.get(c.ATTR_DISPATCH_ADOPTER_OVERRIDE)
        if (
            final != emitted.name
            and not override
            and (target != final or not a.get(c.ATTR_POLICY_WINNER))
        ):
            out.append(f"{label}: final_tool {final!r} with no policy redirect to it")
        if verdict == c.PaletteVerdict.DROPPED.value:
            dropped.append((emitted.id, sp))
            if final != emitted.name:
                out.append(f"{label}: palette dropped the rewrite, yet final_tool is {final!r}")
            if not override and target in call.tools:
                out.append(f"{label}: palette dropped {target!r}, which was bound")
        elif target is not None and not override and target not in call.tools:
            out.append(
                f"{label}: palette kept {target!r}, which was not bound {sorted(call.tools)}"
            )
    if _attrs(post).get(c.ATTR_SEAM_REWRITTEN) != rewritten:
        out.append(
            f"{where}: post_model.rewritten {_attrs(post).get(c.ATTR_SEAM_REWRITTEN)}, "
            f"{rewritten} dispatches rewritten"
        )
    return out


def _logs(
    logs: Sequence[Mapping[str, Any]],
    s: _Spans,
    dropped: Sequence[tuple[str, ReadableSpan]],
    telemetry_errors: int,
) -> list[str]:
    out: list[str] = []
    drops = [e for e in logs if e.get("event") == c.LOG_PALETTE_GATE_DROP]
    if len(drops) != len(dropped):
        out.append(f"{len(drops)} palette-drop log events for {len(dropped)} dropped dispatches")
    for call_id, sp in dropped:
        span_id = format(sp.context.span_id, "016x")
        if not any(e.get("tool_call_id") == call_id and e.get("span_id") == span_id for e in drops):
            out.append(f"palette drop of {call_id!r} has no log event on its dispatch span")
    for e in logs:
        span_id = e.get("span_id")
        if span_id is not None and int(span_id, 16) not in s.by_id:
            out.append(f"log {e.get('event')} names span {span_id}, never exported")
    rejected = [e for e in logs if e.get("event") == c.LOG_STAGE_REJECTED]
    stages = [
        sp
        for sp in s.all
        if sp.name == c.SPAN_STAGE and c.ATTR_STAGE_REJECTED in (sp.attributes or {})
    ]
    if len(rejected) != len(stages):
        out.append(
            f"{len(rejected)} stage-rejected log events for {len(stages)} stage spans "
            "with rejected tools"
        )
    for e in rejected:
        sp = s.by_id.get(int(e.get("span_id", "0"), 16))
        if sp is None or sorted(_attrs(sp).get(c.ATTR_STAGE_REJECTED, [])) != sorted(
            e.get("rejected", [])
        ):
            out.append(f"stage-rejected log {e.get('rejected')} does not match its stage span")
    errors = [e for e in logs if e.get("event") == c.LOG_TELEMETRY_ERROR]
    if len(errors) != telemetry_errors:
        out.append(
            f"{len(errors)} telemetry errors logged, {telemetry_errors} expected: "
            f"{[(e.get('hook'), e.get('error_type')) for e in errors]}"
        )
    return out


def _recalls(
    ground: Ground, conv: str, recall_tool: str | None
) -> list[tuple[ModelCall, str, Seen]]:
    """(model call that emitted it, offload id, answer) per recall that brought an output back."""
    if recall_tool is None:
        return []
    found: list[tuple[ModelCall, str, Seen]] = []
    answers = _answers(ground.messages_of(conv))
    for call in ground.calls_of(conv):
        for x in call.reply.calls:
            if x.name != recall_tool:
                continue
            offload_id = str((x.args or {}).get("offload_id", ""))
            for answer in answers.get(x.id, []):
                if (
                    answer.name == recall_tool
                    and answer.status != "error"
                    and not answer.text.startswith("error")
                ):
                    found.append((call, offload_id, answer))
    return found


def _metrics(
    ground: Ground,
    own: _Spans,
    points: Mapping[str, list[tuple[dict[str, Any], float]]],
    gates: Sequence[tuple[str, ReadableSpan]],
    recall_tool: str | None,
) -> list[str]:
    out: list[str] = []
    decisions = _total(points.get(c.METRIC_OFFLOAD_DECISIONS.name, []))
    if decisions != len(gates):
        out.append(f"offload decisions metric {decisions}, {len(gates)} gate spans")
    recalls = sum(len(_recalls(ground, conv, recall_tool)) for conv in ground.conversations())
    counted = _total(
        points.get(c.METRIC_OFFLOAD_RECALLS.name, []),
        **{c.ATTR_OFFLOAD_MECHANISM: c.OffloadMechanism.SEAMSCOPE_GATE.value},
    )  # a framework compaction's re-reads: see _compactions
    if counted != recalls:
        out.append(f"recalls metric {counted}, {recalls} recalls brought an output back")
    redirects = [
        sp
        for sp in own.all
        if sp.name == c.SPAN_DISPATCH
        and (
            (sp.attributes or {}).get(c.ATTR_POLICY_WINNER)
            or (sp.attributes or {}).get(c.ATTR_DISPATCH_ADOPTER_OVERRIDE)
        )
    ]
    for verdict in c.PaletteVerdict:
        spans_n = sum(
            1
            for sp in redirects
            if (sp.attributes or {}).get(c.ATTR_DISPATCH_PALETTE_GATE) == verdict.value
        )
        metric_n = _total(
            points.get(c.METRIC_REDIRECTS.name, []), **{c.ATTR_DISPATCH_PALETTE_GATE: verdict.value}
        )
        if spans_n != metric_n:
            out.append(
                f"redirects metric ({verdict.value}) {metric_n}, {spans_n} redirect dispatch spans"
            )
    return out


def _economics(
    ground: Ground,
    own: _Spans,
    points: Mapping[str, list[tuple[dict[str, Any], float]]],
    gates: Sequence[tuple[str, ReadableSpan]],
    prices: Prices,
    recall_tool: str | None,
    check_metrics: bool,
) -> list[str]:
    """Carried turns, recalls and realized USD of every fired offload of the
    gate, from the prompts the models really received; then every compaction
    a framework middleware made (:func:`_compactions`)."""
    out: list[str] = []
    gated = c.OffloadMechanism.SEAMSCOPE_GATE.value
    every = {
        (sp.attributes or {}).get(c.ATTR_OFFLOAD_ID): sp
        for sp in own.all
        if sp.name == c.SPAN_OFFLOAD_SETTLE
    }
    settles = {
        k: sp
        for k, sp in every.items()
        if (sp.attributes or {}).get(c.ATTR_OFFLOAD_MECHANISM, gated) == gated
    }
    out += _compactions(ground, own, every)
    savings = costs = 0.0
    for conv, gate in gates:
        a = _attrs(gate)
        if not a.get(c.ATTR_OFFLOAD_FIRE):
            continue
        offload_id = a[c.ATTR_OFFLOAD_ID]
        run = next(
            r for r in ground.runs_of(conv) if r.call_id == a.get(c.ATTR_GEN_AI_TOOL_CALL_ID)
        )
        tokens = len(run.output or "") / 4
        carried = 0
        for call in ground.calls_of(conv):
            if call.seq < run.seq or call.raised is not None:
                continue
            texts = [m.text for m in call.messages if m.role == "tool"]
            stubs = [t for t in texts if offload_id in t and t != run.output]
            full = any(t == run.output for t in texts)
            if stubs and not full:
                carried += 1
                rate_in = prices.rates[call.model][0]
                savings += tokens * rate_in
                costs += len(stubs[0]) / 4 * rate_in  # the stub really sent, chars / 4
        recalls = [r for r in _recalls(ground, conv, recall_tool) if r[1] == offload_id]
        settle = settles.get(offload_id)
        if settle is None:
            out.append(f"{conv}: offload {offload_id} never settled")
            continue
        sa = _attrs(settle)
        if (sa.get(c.ATTR_OFFLOAD_TURNS_CARRIED), sa.get(c.ATTR_OFFLOAD_RECALLS)) != (
            carried,
            len(recalls),
        ):
            out.append(
                f"{conv}: offload {offload_id} settled with "
                f"{sa.get(c.ATTR_OFFLOAD_TURNS_CARRIED)} carried turns and "
                f"{sa.get(c.ATTR_OFFLOAD_RECALLS)} recalls; the prompts carried its stub "
                f"{carried} times, {len(recalls)} recalls"
            )
    # recalls: their input at the recalling call's model, its output once per model call
    by_call: dict[int, list[tuple[ModelCall, str, Seen]]] = defaultdict(list)
    for conv in ground.conversations():
        for item in _recalls(ground, conv, recall_tool):
            by_call[item[0].seq].append(item)
    for items in by_call.values():
        call = items[0][0]
        rate_in, rate_out = prices.rates[call.model]
        costs += sum(len(answer.text) / 4 * rate_in for _, _, answer in items)
        costs += call.reply.usage[1] * rate_out
    settled_savings = sum(
        float((sp.attributes or {}).get(c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD, 0))
        for sp in settles.values()
    )
    settled_costs = sum(
        float((sp.attributes or {}).get(c.ATTR_OFFLOAD_REALIZED_COSTS_USD, 0))
        for sp in settles.values()
    )
    if abs(settled_savings - savings) > 1e-9 or abs(settled_costs - costs) > 1e-9:
        out.append(
            f"settlements realized ${settled_savings:.6f} saved, ${settled_costs:.6f} spent; "
            f"the prompts say ${savings:.6f}, ${costs:.6f}"
        )
    if check_metrics:
        by_gate = {c.ATTR_OFFLOAD_MECHANISM: gated}
        metric_savings = _total(points.get(c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, []), **by_gate)
        metric_costs = _total(points.get(c.METRIC_OFFLOAD_REALIZED_COSTS.name, []), **by_gate)
        if abs(metric_savings - savings) > 1e-9 or abs(metric_costs - costs) > 1e-9:
            out.append(
                f"realized metrics ${metric_savings:.6f} saved, ${metric_costs:.6f} spent; "
                f"the prompts say ${savings:.6f}, ${costs:.6f}"
            )
    return out


def _compactions(ground: Ground, own: _Spans, settles: Mapping[Any, ReadableSpan]) -> list[str]:
    """Every compaction a framework middleware made settles once; one that
    cleared tool results (context editing) settles with as many carried turns
    as later model calls really received a cleared text for one of them and
    not its output again (a re-read of the same tool and arguments brings it back),
    and as many recalls as such re-reads after the first call that got it cleared."""
    out: list[str] = []
    for span in own.all:
        if span.name != c.SPAN_COMPACTION:
            continue
        a = _attrs(span)
        compaction_id = a.get(c.ATTR_OFFLOAD_ID)
        settle = settles.get(compaction_id)
        if settle is None:
            out.append(f"compaction {compaction_id} never settled")
            continue
        call_ids = tuple(a.get(c.ATTR_COMPACTION_TOOL_CALL_IDS) or ())
        if a.get(c.ATTR_OFFLOAD_MECHANISM) != c.OffloadMechanism.CONTEXT_EDITING.value:
            continue
        conv = a.get(c.ATTR_GEN_AI_CONVERSATION_ID) or _attrs(settle).get(
            c.ATTR_GEN_AI_CONVERSATION_ID
        )
        runs = {r.call_id: r for r in ground.runs_of(conv)} if conv else {}
        carried = 0
        first_cleared: int | None = None  # seq of the first call that got a cleared text
        for call in ground.calls_of(conv) if conv else ():
            if call.raised is not None:
                continue
            tool_texts = {m.call_id: m.text for m in call.messages if m.role == "tool"}
            outputs = {m.text for m in call.messages if m.role == "tool"}
            for call_id in call_ids:
                run = runs.get(call_id)
                if run is None or call_id not in tool_texts or tool_texts[call_id] == run.output:
                    continue
                if first_cleared is None:
                    first_cleared = call.seq
                if run.output not in outputs:
                    carried += 1
                    break
        turns = _attrs(settle).get(c.ATTR_OFFLOAD_TURNS_CARRIED)
        if turns != carried:
            out.append(
                f"{conv}: compaction {compaction_id} settled with {turns} carried turns; "
                f"the prompts held its cleared text and not its output {carried} times"
            )
        # a re-read: a run of the same tool with the same arguments once it was cleared
        cleared = [runs[i] for i in call_ids if i in runs]
        since = first_cleared if first_cleared is not None else float("inf")
        reread = sum(
            1
            for r in (ground.runs_of(conv) if conv else ())
            for x in cleared
            if r.seq > since
            and r.raised is None
            and (r.name, _json(r.args)) == (x.name, _json(x.args))
        )
        recalls = _attrs(settle).get(c.ATTR_OFFLOAD_RECALLS)
        if recalls != reread:
            out.append(
                f"{conv}: compaction {compaction_id} settled with {recalls} recalls; "
                f"the tools ran again with its arguments {reread} times"
            )
    return out
