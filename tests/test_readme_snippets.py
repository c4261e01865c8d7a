"""Every python snippet of the README and of the pages under docs/ runs as written.

Each ```python block is found by its page and the heading it sits under and run as a
script in a fresh interpreter, in a temporary folder, with the network
closed to anything but this machine and no ``OTEL_*``/``SEAMSCOPE_*``
variables of the caller. The snippets bring their own stand-ins for the
models and tools a user replaces, so nothing is substituted. A check then
reads back the OTLP-JSON trace file the snippet wrote and asserts the spans
its decisions must produce.

Every block runs with no key and no network: an adapter page's first example
with scripted models (as the README's quickstart), its second with the
provider's real models only when ``OPENAI_API_KEY`` is set (without it, it says
so and stops). Those second examples also run in the adapters' own tests with
only the model objects replaced (``tests/adapters/test_openai_agents.py``,
``tests/adapters/test_pydantic_ai.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

# Runs a script with sockets refused to every address but loopback and Unix ones.
_OFFLINE = """
import ipaddress, runpy, socket, sys

def _local(address):
    if not isinstance(address, tuple):
        return True  # AF_UNIX
    host = address[0]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"

_connect = socket.socket.connect
def connect(self, address):
    if not _local(address):
        raise OSError(f"README snippet test: no network ({address!r})")
    return _connect(self, address)
socket.socket.connect = connect
_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost") and not _local((host, 0)):
        raise socket.gaierror(f"README snippet test: no network ({host!r})")
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


# a structlog console line (``[info     ] seamscope...``) or a stdlib warning
_LOG_LINE = re.compile(r"^.*(?:\[(?:debug|info|warning|error|critical)\s*\]|Warning: ).*$", re.M)


def python_blocks(text: str) -> list[tuple[str, str]]:
    """``(heading, code)`` of every ```python block, the heading being the
    nearest one above it (without its ``#`` marks)."""
    blocks: list[tuple[str, str]] = []
    heading = ""
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            heading = line.strip().lstrip("#").strip()
        elif line.rstrip() == "```python":
            end = index + 1
            while end < len(lines) and lines[end].rstrip() != "```":
                end += 1
            assert end < len(lines), f"unclosed ```python block under {heading!r}"
            blocks.append((heading, "".join(lines[index + 1 : end])))
            index = end
        index += 1
    return blocks


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def snippet(page: str, heading: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = [code for h, code in python_blocks(text) if h == heading]
    assert 1 == len(found), f"expected one python block under {heading!r}, found {len(found)}"
    return found[0]


def trace_file_of(code: str) -> str | None:
    """The ``trace_file=`` a snippet passes to ``configure()``, if any."""
    match = re.search(r'trace_file="([^"]+)"', code)
    return None if match is None else match.group(1)


@dataclass(frozen=True)
class Span:
    name: str
    attributes: dict[str, Any]
    span_id: str = ""
    parent_id: str = ""


def _value(value: dict[str, Any]) -> Any:
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    return None


def read_spans(path: Path) -> list[Span]:
    """Every span of an OTLP-JSON lines file, in file order."""
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    attrs = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
                    spans.append(
                        Span(span["name"], attrs, span["spanId"], span.get("parentSpanId", ""))
                    )
    return spans


@dataclass(frozen=True)
class Run:
    stdout: str
    stderr: str
    spans: list[Span]

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]


def run_snippet(code: str, folder: Path, env: dict[str, str] | None = None) -> Run:
    """Run ``code`` as a script in ``folder``; fail the test unless it exits 0."""
    script = folder / "readme_snippet.py"
    script.write_text(code, encoding="utf-8")
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "SEAMSCOPE_", "OPENAI_", "ANTHROPIC_"))
    }
    environ.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE, str(script)],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, f"the snippet failed:\n{done.stdout}\n{done.stderr}"
    # a library prints nothing by default: no event, no warning beside what the
    # example prints itself
    assert ("", []) == (done.stderr, _LOG_LINE.findall(done.stdout)), done.stdout
    name = trace_file_of(code)
    trace = None if name is None else folder / name
    spans = read_spans(trace) if trace is not None and trace.exists() else []
    return Run(done.stdout, done.stderr, spans)


def _decision_spans(run: Run) -> None:
    """One turn of the sales policy: PRE seam on haiku, run_block redirected to fetch_data."""
    [root] = run.named("invoke_agent analyst")
    assert "conv-7" == root.attributes[c.ATTR_GEN_AI_CONVERSATION_ID]
    assert {"claude-haiku-4-5"} == {
        s.attributes[c.ATTR_GEN_AI_REQUEST_MODEL] for s in run.named(c.SPAN_SEAM_PRE_MODEL)
    }
    assert "sales_data_read" == run.named(c.SPAN_SEAM_PRE_MODEL)[0].attributes[c.ATTR_POLICY_WINNER]
    dispatch = run.named(c.SPAN_DISPATCH)[0]
    assert ("run_block", "fetch_data") == (
        dispatch.attributes[c.ATTR_DISPATCH_EMITTED_TOOL],
        dispatch.attributes[c.ATTR_DISPATCH_FINAL_TOOL],
    )
    assert run.named("execute_tool fetch_data")
    assert not run.named("execute_tool run_block")
    assert "Q3 sales grew 12%." in run.stdout


def check_hand_written_loop(run: Run) -> None:
    _decision_spans(run)
    assert 3 == len(run.named(c.SPAN_ITERATION))
    assert 3 == len(run.named(c.SPAN_STAGE))  # the role palette, every iteration
    assert [["run_block", "fetch_data"], ["run_block", "fetch_data", "recall_tool_result"]] == [
        s.attributes[c.ATTR_SELECTION_SELECTED] for s in run.named(c.SPAN_SELECT_TOOLS)[:2]
    ]
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)  # the recalled text is not gated again
    assert gate.attributes[c.ATTR_OFFLOAD_FIRE] is True
    assert run.named("execute_tool recall_tool_result")
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert (1, 1) == (
        settle.attributes[c.ATTR_OFFLOAD_RECALLS],
        settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED],
    )


def check_held_turn(run: Run) -> None:
    """One turn held open across steps: each span under the one it was started in."""
    [agent] = run.named("invoke_agent analyst")
    [iteration] = run.named(c.SPAN_ITERATION)
    [chat] = run.named("chat gpt-4.1-mini")
    [tool] = run.named("execute_tool fetch_data")
    assert iteration.parent_id == agent.span_id
    assert {iteration.span_id} == {chat.parent_id, tool.parent_id}
    assert 900 == chat.attributes[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS]


def check_langchain(run: Run) -> None:
    _decision_spans(run)
    assert 2 == len(run.named(c.SPAN_ITERATION))
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)
    assert gate.attributes[c.ATTR_OFFLOAD_FIRE] is True
    # the middleware's recall tool is offered once there is something to recall
    assert ["recall_tool_result"] == [
        name
        for name in run.named(c.SPAN_SELECT_TOOLS)[1].attributes[c.ATTR_SELECTION_SELECTED]
        if name not in ("run_block", "fetch_data")
    ]
    assert 1 == len(run.named(c.SPAN_OFFLOAD_SETTLE))


def check_langchain_middlewares(run: Run) -> None:
    """The selector narrowed the tools of each model call; context editing
    cleared the first log once, and its settlement says which mechanism."""
    stages = [
        s
        for s in run.named(c.SPAN_STAGE)
        if s.attributes.get(c.ATTR_MIDDLEWARE_NAME) == "LLMToolSelectorMiddleware"
    ]
    assert [("send_email",)] * 3 == [tuple(s.attributes[c.ATTR_STAGE_DROPPED]) for s in stages]
    [compaction] = run.named(c.SPAN_COMPACTION)
    assert ("context_editing", ("c1",)) == (
        compaction.attributes[c.ATTR_OFFLOAD_MECHANISM],
        tuple(compaction.attributes[c.ATTR_COMPACTION_TOOL_CALL_IDS]),
    )
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert "context_editing" == settle.attributes[c.ATTR_OFFLOAD_MECHANISM]
    assert "Both services time out on the database." in run.stdout.splitlines()


def check_deepagents(run: Run) -> None:
    """Deep Agents evicted the log; the eviction is a compaction carried by the
    two later calls, its file read back once, settled under its mechanism."""
    [compaction] = run.named(c.SPAN_COMPACTION)
    assert ("deepagents_eviction:c1", "deepagents_eviction", "get_logs", 27_000.0) == (
        compaction.attributes[c.ATTR_OFFLOAD_ID],
        compaction.attributes[c.ATTR_OFFLOAD_MECHANISM],
        compaction.attributes[c.ATTR_GEN_AI_TOOL_NAME],
        compaction.attributes[c.ATTR_COMPACTION_REMOVED_TOKENS],
    )
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert ("deepagents_eviction", 2, 1) == (
        settle.attributes[c.ATTR_OFFLOAD_MECHANISM],
        settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED],
        settle.attributes[c.ATTR_OFFLOAD_RECALLS],
    )
    assert [
        "Checkout times out on the database.",
        "deepagents_eviction:c1 deepagents_eviction +0.2654",
    ] == run.stdout.splitlines()


def check_symfonic(run: Run) -> None:
    _decision_spans(run)
    assert 2 == len(run.named(c.SPAN_ITERATION))
    chats = [s for s in run.spans if s.name.startswith("chat ")]
    assert 2 == len(chats)
    # the tools symfonic bound for each model call (its on_llm_pre_call), names and types only
    assert [[("function", "run_block"), ("function", "fetch_data"), ("function", RECALL)]] * 2 == [
        [(d["type"], d["name"]) for d in json.loads(s.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])]
        for s in chats
    ]


RECALL = "recall_tool_result"


def test_symfonic_tool_descriptions_only_with_content_capture(tmp_path: Path) -> None:
    run = run_snippet(
        snippet("docs/adapters/symfonic.md", "symfonic-core"),
        tmp_path,
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    )
    chat = next(s for s in run.spans if s.name.startswith("chat "))
    definitions = json.loads(chat.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])
    assert ("Run a code block against the warehouse.", ["code"]) == (
        definitions[0]["description"],
        sorted(definitions[0]["parameters"]["properties"]),
    )


def check_openai_sales(run: Run) -> None:
    """The sales policy put gpt-4.1-mini on both calls; the report was offloaded,
    its stub carried to the second call, which was offered the recall tool."""
    assert "Q3 sales grew 12%." in run.stdout.splitlines()
    assert ["sales_data_read"] * 2 == [
        s.attributes[c.ATTR_POLICY_WINNER] for s in run.named(c.SPAN_SEAM_PRE_MODEL)
    ]
    chats = run.named("chat gpt-4.1-mini")
    assert [["big_report"], ["big_report", "recall_tool_result"]] == [
        [d["name"] for d in json.loads(s.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])] for s in chats
    ]
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)
    assert gate.attributes[c.ATTR_OFFLOAD_FIRE] is True
    assert [gate.attributes[c.ATTR_OFFLOAD_ID]] == chats[1].attributes[c.ATTR_OFFLOAD_CARRIED]
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert 1 == settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED]


def check_google_adk(run: Run) -> None:
    """ADK's own tracing records (configure() installed the global provider): the
    sales policy put gemini-2.5-flash on both calls, which ADK's generate_content
    spans name (seamscope records no chat span of its own), seamscope's
    iterations are children of ADK's invoke_agent; the report was offloaded, its
    stub carried to the second call, which was offered the recall tool."""
    assert "Q3 sales grew 12%." in run.stdout.splitlines()
    assert ["sales_data_read"] * 2 == [
        s.attributes[c.ATTR_POLICY_WINNER] for s in run.named(c.SPAN_SEAM_PRE_MODEL)
    ]
    assert [] == [s.name for s in run.spans if s.name.startswith("chat ")]
    calls = run.named("generate_content gemini-2.5-flash")
    assert [["big_report"], ["big_report", "recall_tool_result"]] == [
        [d["name"] for d in json.loads(s.attributes[c.ATTR_GEN_AI_TOOL_DEFINITIONS])] for s in calls
    ]
    [agent] = run.named("invoke_agent analyst")
    assert [agent.span_id] * 2 == [s.parent_id for s in run.named(c.SPAN_ITERATION)]
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)
    assert gate.attributes[c.ATTR_OFFLOAD_FIRE] is True
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert 1 == settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED]


def check_strands(run: Run) -> None:
    """Strands' own tracing records (configure() installed the global provider):
    the sales policy put claude-haiku-4-5 on both calls, which Strands' chat
    spans name (seamscope records no chat span of its own), seamscope's
    iterations are children of Strands' event-loop cycles; the report was
    offloaded, its stub carried to the second call."""
    assert "Q3 sales grew 12%." in run.stdout.splitlines()
    assert ["sales_data_read"] * 2 == [
        s.attributes[c.ATTR_POLICY_WINNER] for s in run.named(c.SPAN_SEAM_PRE_MODEL)
    ]
    assert ["claude-haiku-4-5"] * 2 == [
        s.attributes[c.ATTR_GEN_AI_REQUEST_MODEL] for s in run.named("chat")
    ]
    assert [] == [s.name for s in run.spans if s.name.startswith("chat ")]
    cycles = {s.span_id for s in run.named("execute_event_loop_cycle")}
    assert 2 == len(cycles) == len({s.parent_id for s in run.named(c.SPAN_ITERATION)} & cycles)
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)
    assert gate.attributes[c.ATTR_OFFLOAD_FIRE] is True
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert 1 == settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED]


def check_strands_offloader(run: Run) -> None:
    """The ContextOffloader's offload of big_report: gated (it saves), a priced
    compaction, carried by the two later calls, recalled once by the grep."""
    assert [
        "strands_context_offload:c1 strands_context_offload carried 2, recalled 1, net +0.1015 USD"
    ] == run.stdout.splitlines()
    [gate] = run.named(c.SPAN_OFFLOAD_GATE)
    assert (True, "strands_context_offload:c1") == (
        gate.attributes[c.ATTR_OFFLOAD_FIRE],
        gate.attributes[c.ATTR_OFFLOAD_ID],
    )
    [compaction] = run.named(c.SPAN_COMPACTION)
    assert "strands_context_offload" == compaction.attributes[c.ATTR_OFFLOAD_MECHANISM]


def check_openai_trimmer(run: Run) -> None:
    """The trimmer trimmed big_report's output once (run 2); runs 2 and 3 carried
    its preview until run 3 read the report again; one settlement, one re-read."""
    [compaction] = run.named(c.SPAN_COMPACTION)
    assert ("tool_output_trimmer", "tool_output_trimmer:c1", "big_report") == (
        compaction.attributes[c.ATTR_OFFLOAD_MECHANISM],
        compaction.attributes[c.ATTR_OFFLOAD_ID],
        compaction.attributes[c.ATTR_GEN_AI_TOOL_NAME],
    )
    carried = [
        s.attributes.get(c.ATTR_OFFLOAD_CARRIED) for s in run.spans if s.name.startswith("chat")
    ]
    assert [[], [], ["tool_output_trimmer:c1"], ["tool_output_trimmer:c1"], []] == carried
    [settle] = run.named(c.SPAN_OFFLOAD_SETTLE)
    assert ("tool_output_trimmer", 2, 1) == (
        settle.attributes[c.ATTR_OFFLOAD_MECHANISM],
        settle.attributes[c.ATTR_OFFLOAD_TURNS_CARRIED],
        settle.attributes[c.ATTR_OFFLOAD_RECALLS],
    )
    assert [
        "tool_output_trimmer:c1 tool_output_trimmer carried 2, re-read 1, net +0.0360 USD"
    ] == run.stdout.splitlines()


def check_needs_a_key(run: Run) -> None:
    """Without OPENAI_API_KEY the real-provider example says so and stops."""
    assert (["set OPENAI_API_KEY to run this example against OpenAI's models"], []) == (
        run.stdout.splitlines(),
        run.spans,
    )


def check_own_providers(run: Run) -> None:
    """The in-memory exporter got the turn's spans; nothing else was printed."""
    assert [
        str(
            sorted(
                [
                    "invoke_agent analyst",
                    c.SPAN_ITERATION,
                    c.SPAN_SELECT_TOOLS,
                    c.SPAN_SEAM_PRE_MODEL,
                ]
            )
        )
    ] == run.stdout.splitlines()


def check_configuration(run: Run) -> None:
    assert "" == run.stdout  # nothing was lost: the failure branch printed nothing


def check_quickstart(run: Run) -> None:
    """The selector kept get_logs and dropped send_email on both model calls."""
    stages = [
        s
        for s in run.named(c.SPAN_STAGE)
        if s.attributes.get(c.ATTR_MIDDLEWARE_NAME) == "LLMToolSelectorMiddleware"
    ]
    assert [["send_email"]] * 2 == [s.attributes[c.ATTR_STAGE_DROPPED] for s in stages]
    assert ["quickstart-1"] == sorted(
        {s.attributes[c.ATTR_GEN_AI_CONVERSATION_ID] for s in run.named(c.SPAN_ITERATION)}
    )


@dataclass(frozen=True)
class Case:
    page: str
    heading: str
    check: Callable[[Run], None]
    env: dict[str, str] | None = None


QUICKSTART = Case(
    "README.md", "Quickstart: why did my LangChain agent never offer a tool?", check_quickstart
)
CASES = [
    QUICKSTART,
    Case("docs/adapters/loop.md", "A hand-written loop (framework-free API)",
         check_hand_written_loop),
    Case("docs/adapters/loop.md", "A turn held across callbacks", check_held_turn),
    Case("docs/adapters/langchain.md", "LangChain v1 agents", check_langchain),
    Case("docs/adapters/langchain.md", "LangChain's own decision middlewares",
         check_langchain_middlewares),
    Case("docs/adapters/langchain.md", "Deep Agents", check_deepagents),
    Case("docs/adapters/symfonic.md", "symfonic-core", check_symfonic),
    # with a key in the environment too: the SDK's own tracing stays off, nothing printed
    Case("docs/adapters/openai-agents.md", "OpenAI Agents SDK", check_openai_sales,
         {"OPENAI_API_KEY": "sk-offline-test"}),
    Case("docs/adapters/openai-agents.md", "With OpenAI's models", check_needs_a_key),
    Case("docs/adapters/openai-agents.md", "The SDK's ToolOutputTrimmer", check_openai_trimmer),
    Case("docs/adapters/pydantic-ai.md", "pydantic-ai", check_openai_sales),
    Case("docs/adapters/pydantic-ai.md", "With OpenAI's models", check_needs_a_key),
    Case("docs/adapters/google-adk.md", "Google ADK", check_google_adk),
    Case("docs/adapters/strands.md", "Strands Agents", check_strands),
    Case("docs/adapters/strands.md", "Strands' ContextOffloader", check_strands_offloader),
    Case("docs/configuration.md", "Your own providers, and logs", check_own_providers),
    Case("docs/configuration.md", "Configuration", check_configuration),
]
# snippets another test runs too, with a key and the provider's model objects replaced
RUN_ELSEWHERE = {
    ("docs/adapters/openai-agents.md", "With OpenAI's models"):
        ROOT / "tests" / "adapters" / "test_openai_agents.py",
    ("docs/adapters/pydantic-ai.md", "With OpenAI's models"):
        ROOT / "tests" / "adapters" / "test_pydantic_ai.py",
}


@pytest.mark.parametrize("case", CASES, ids=[f"{case.page}:{case.heading}" for case in CASES])
def test_the_snippet_runs_as_written(case: Case, tmp_path: Path) -> None:
    case.check(run_snippet(snippet(case.page, case.heading), tmp_path, case.env))


def test_every_python_block_of_the_readme_and_the_docs_is_run() -> None:
    blocks = [
        (page_name(page), heading)
        for page in PAGES
        for heading, _ in python_blocks(page.read_text(encoding="utf-8"))
    ]
    assert len(blocks) == len(set(blocks)), "two python blocks under one heading of a page"
    assert sorted({(case.page, case.heading) for case in CASES} | set(RUN_ELSEWHERE)) == sorted(
        blocks
    )
    for (page, _heading), test in RUN_ELSEWHERE.items():
        source = test.read_text(encoding="utf-8")
        assert f'"{page}"' in source and "exec(compile(" in source, test


def test_each_snippet_writes_a_trace_file_of_its_own() -> None:
    """Run one after the other in one folder, no two examples write one file."""
    files = [
        trace_file_of(code)
        for page in PAGES
        for _heading, code in python_blocks(page.read_text(encoding="utf-8"))
    ]
    named = [name for name in files if name is not None]
    assert len(named) == len(set(named)), named


def _explain_block(readme: str) -> tuple[list[str], list[str]]:
    """The quickstart's ``$ seamscope explain ...`` block: its argv and its output lines."""
    block = re.search(r"```\n\$ seamscope (explain [^\n]*)\n(.*?)```", readme, re.S)
    assert block is not None
    return block.group(1).split(), block.group(2).splitlines()


def test_the_quickstart_explain_output_is_the_real_one(tmp_path: Path) -> None:
    """The README's explain answer, as pasted, is what explain prints on the
    quickstart's own trace file (the trace id, random per run, aside)."""
    run_snippet(snippet(QUICKSTART.page, QUICKSTART.heading), tmp_path)
    argv, expected = _explain_block(README.read_text(encoding="utf-8"))
    done = subprocess.run(
        [sys.executable, "-m", "seamscope", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    hide = re.compile(r"trace [0-9a-f]{8}…")
    assert [hide.sub("trace …", line) for line in expected] == [
        hide.sub("trace …", line) for line in done.stdout.rstrip("\n").splitlines()
    ]


def test_the_configuration_snippet_reports_a_lost_export(tmp_path: Path) -> None:
    """Its failure branch, against a closed port (the OTLP endpoint it reads)."""
    run = run_snippet(
        snippet("docs/configuration.md", "Configuration"),
        tmp_path,
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "SEAMSCOPE_SHUTDOWN_TIMEOUT": "1000"},
    )
    assert re.search(r"^export failed .*1 dropped \(connection refused\)", run.stdout, re.M), (
        run.stdout
    )


def test_a_broken_snippet_fails_and_the_network_is_closed(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the snippet failed"):
        run_snippet("raise SystemExit(3)\n", tmp_path)
    with pytest.raises(AssertionError, match="no network"):
        run_snippet("import socket\nsocket.create_connection(('192.0.2.1', 80), 1)\n", tmp_path)
    with pytest.raises(AssertionError, match="expected one python block"):
        snippet("README.md", "No such heading")


def test_python_blocks_reads_headings_and_blocks() -> None:
    text = "# a\n```python\nx = 1\n```\n## b\ntext\n```bash\nls\n```\n```python\ny = 2\n```\n"
    assert [("a", "x = 1\n"), ("b", "y = 2\n")] == python_blocks(text)
