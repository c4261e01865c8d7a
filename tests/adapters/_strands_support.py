"""Ground truth for the Strands Agents adapter tests, recorded outside seamscope.

:class:`ScriptedModel` is a Strands ``Model`` that answers from a script
(text and tool uses, with usage), streamed as the Bedrock-style events every
Strands provider yields, with no network and no key. Each call it serves is
logged by the ``answer`` callable it is given: the model id it was asked to
serve (its own ``model_id``: Strands calls the model object the call was
handed), the tool specs it was offered, the tool choice and the messages it
got. Nothing here reads seamscope.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strands.models.model import Model

__all__ = ["Answer", "Request", "ScriptedModel", "Step", "step", "text_of", "use"]


@dataclass(frozen=True)
class Step:
    """One scripted answer: content blocks (``{"text": ...}`` or
    ``{"toolUse": {...}}``) and usage (input, output, cache read); ``error`` is
    raised instead of answering (before any event)."""

    content: tuple[dict[str, Any], ...] = ()
    usage: tuple[int, int, int] = (100, 10, 0)
    error: BaseException | None = None


def use(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A tool use block, as a model emits it."""
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": args}}


def step(*content: dict[str, Any] | str, usage: tuple[int, int, int] = (100, 10, 0)) -> Step:
    blocks = tuple({"text": c} if isinstance(c, str) else c for c in content)
    return Step(blocks, usage)


@dataclass(frozen=True)
class Request:
    """What one model call was asked (the scripted model's own view)."""

    model: str
    tools: tuple[str, ...]
    tool_choice: Any
    messages: tuple[dict[str, Any], ...]
    system: str | None


Answer = Callable[[Request], Step]


def text_of(blocks: Sequence[dict[str, Any]]) -> str:
    """The text of content blocks (tool results' text and JSON included)."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block.get("text"), str):
            out.append(block["text"])
        elif "json" in block:
            out.append(json.dumps(block["json"]))
    return "".join(out)


class ScriptedModel(Model):
    """A Strands model answering each call with ``answer(request)``.

    It streams each text block in two deltas (the first character, then the
    rest), each tool use as a start, one input delta and a stop, then the
    stop reason and the usage. ``hold(request)`` True stops the stream after
    the first text delta, never to complete (a caller abandons it).
    """

    def __init__(
        self,
        model_id: str,
        answer: Answer,
        *,
        hold: Callable[[Request], bool] | None = None,
    ) -> None:
        self.config: dict[str, Any] = {"model_id": model_id}
        self.answer = answer
        self.hold = hold

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    def structured_output(
        self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError("the scripted model answers with tool uses only")

    async def stream(  # type: ignore[override]
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> AsyncIterable[dict[str, Any]]:
        request = Request(
            self.config["model_id"],
            tuple(s["name"] for s in tool_specs or ()),
            copy.deepcopy(tool_choice),
            tuple(copy.deepcopy(list(messages))),
            system_prompt,
        )
        got = self.answer(request)
        if got.error is not None:
            raise got.error
        yield {"messageStart": {"role": "assistant"}}
        calls = False
        for block in got.content:
            if "text" in block:
                body = block["text"]
                yield {"contentBlockDelta": {"delta": {"text": body[:1]}}}
                if self.hold is not None and self.hold(request):
                    await asyncio.Event().wait()
                if body[1:]:
                    yield {"contentBlockDelta": {"delta": {"text": body[1:]}}}
                yield {"contentBlockStop": {}}
            elif "toolUse" in block:
                calls = True
                tool = block["toolUse"]
                start = {"toolUseId": tool["toolUseId"], "name": tool["name"]}
                yield {"contentBlockStart": {"start": {"toolUse": start}}}
                args = json.dumps(tool.get("input", {}))
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": args}}}}
                yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if calls else "end_turn"}}
        inp, out, cached = got.usage
        usage: dict[str, int] = {
            "inputTokens": inp,
            "outputTokens": out,
            "totalTokens": inp + out,
        }
        if cached:
            usage["cacheReadInputTokens"] = cached
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}
