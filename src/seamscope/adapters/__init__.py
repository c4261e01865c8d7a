"""Wrap an existing agent loop.

* :mod:`seamscope.loop` (its main names re-exported here): the framework-free
  API (:class:`DecisionLayer`) and a reference ReAct loop built on it.
* :mod:`seamscope.adapters.langchain`: LangChain v1 agent middleware
  (extra ``seamscope[langchain]``).
* :mod:`seamscope.adapters.symfonic`: symfonic-core's SymfonicAgent
  (extra ``seamscope[symfonic]``).
* :mod:`seamscope.adapters.openai_agents`: the OpenAI Agents SDK's Runner
  (extra ``seamscope[openai-agents]``).
* :mod:`seamscope.adapters.pydantic_ai`: pydantic-ai agents, as a capability
  (extra ``seamscope[pydantic-ai]``).
"""

from seamscope.loop import (
    RECALL_TOOL,
    ChatCall,
    ChatRequest,
    ChatResponse,
    DecisionLayer,
    Iteration,
    IterationRecord,
    ReActAgent,
    Turn,
    TurnResult,
    estimate_tokens,
)

__all__ = [
    "RECALL_TOOL",
    "ChatCall",
    "ChatRequest",
    "ChatResponse",
    "DecisionLayer",
    "Iteration",
    "IterationRecord",
    "ReActAgent",
    "Turn",
    "TurnResult",
    "estimate_tokens",
]
