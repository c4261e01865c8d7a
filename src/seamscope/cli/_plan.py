"""Which conversation each of the demo's turns belongs to, and the loops that run them.

A run cycles through its parts in order: the reference loop's conversation
(4 turns), then, when the ``langchain`` extra is installed, the LangChain
conversation (3 turns). ``--turns`` counts turns across parts; a run that
stops mid-cycle ends the conversation it stopped in. Conversation ids:
``demo-{seed}`` and ``demo-{seed}-langchain``, then ``-2``, ``-3``, ... for
the next cycles, so the first cycle's reference turns are exactly those of
a reference-only run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["LANGCHAIN_HINT", "Part", "Planned", "langchain_part", "plan", "reference_part"]

LANGCHAIN_HINT = "the langchain extra (in a checkout: pip install '.[langchain]')"


@dataclass(frozen=True, slots=True)
class Part:
    """One conversation of the cycle: its turns and how to run and end them."""

    suffix: str  # after demo-{seed}
    turns: int
    run: Callable[[str, int], object]  # (conversation id, position in it)
    end: Callable[[str], None]
    ledger: Any = None  # the part's OffloadLedger (its settlements, for tests)


@dataclass(frozen=True, slots=True)
class Planned:
    part: Part
    conversation: str
    position: int
    last: bool  # the last turn of its conversation in this run


def plan(parts: list[Part], turns: int, seed: int) -> list[Planned]:
    """The run's turns, in order."""
    cycle = sum(p.turns for p in parts)
    out = []
    for index in range(turns):
        number, offset = divmod(index, cycle)
        for part in parts:
            if offset < part.turns:
                break
            offset -= part.turns
        conversation = f"demo-{seed}{part.suffix}" + (f"-{number + 1}" if number else "")
        last = offset == part.turns - 1 or index == turns - 1
        out.append(Planned(part, conversation, offset, last))
    return out


def reference_part(handle: Any, config: Any, seed: int) -> Part:
    """The reference ReAct loop's conversation (``_scenario``)."""
    from seamscope.adapters import DecisionLayer, ReActAgent
    from seamscope.cli._scenario import AGENT_NAME, DEFAULT_MODEL, build_scenario

    scenario = build_scenario()
    ids = random.Random(seed)
    layer = DecisionLayer(
        default_model=DEFAULT_MODEL,
        policies=scenario.policies,
        role_model_resolver=scenario.role_model_resolver,
        stages=scenario.stages,
        catalog=scenario.catalog,
        agent_name=AGENT_NAME,
        provider_name="scripted",
        tracer_provider=handle.tracer_provider,
        meter_provider=handle.meter_provider,
        telemetry_config=config,
        offload_id_factory=lambda: f"off-{ids.getrandbits(32):08x}",
    )
    agent = ReActAgent(layer, scenario.chat, scenario.tools)
    histories: dict[str, list[Any]] = {}

    def run(conversation: str, position: int) -> None:
        history = histories.setdefault(conversation, []) if position else []
        histories[conversation] = history
        script = scenario.turns[position]
        tier = {} if script.tier is None else {"tier": script.tier}
        agent.run_turn(
            conversation,
            script.user,
            messages=history,
            role=scenario.role,
            scope={**scenario.scope, **tier},
        )

    def end(conversation: str) -> None:
        histories.pop(conversation, None)
        layer.end_conversation(conversation)

    return Part("", len(scenario.turns), run, end, layer.ledger)


def langchain_part(handle: Any, config: Any) -> Part | str:
    """The LangChain conversation (``_langchain_scenario``), or why it cannot run."""
    try:
        from seamscope.cli._langchain_scenario import LangChainConversation
    except ModuleNotFoundError as exc:
        return f"{(exc.name or 'langchain').split('.')[0]} is not installed"
    except ImportError as exc:  # an incompatible version
        return f"langchain cannot be imported ({exc})"
    conversation = LangChainConversation(
        tracer_provider=handle.tracer_provider,
        meter_provider=handle.meter_provider,
        telemetry_config=config,
    )
    return Part(
        "-langchain",
        len(conversation.turns),
        conversation.run_turn,
        conversation.end_conversation,
        conversation.layer.ledger,
    )
