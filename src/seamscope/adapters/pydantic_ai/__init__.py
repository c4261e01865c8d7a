"""pydantic-ai: seamscope's decisions inside pydantic-ai's own agent loop.

Install the extra: ``pip install 'seamscope[pydantic-ai]'`` (pydantic-ai-slim
2.68.0). This is the only seamscope package that imports pydantic-ai.

::

    from pydantic_ai import Agent
    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.pydantic_ai import SeamscopeCapability

    layer = DecisionLayer(default_model="gpt-4.1", policies=[...], stages=[...],
                          agent_name="analyst", telemetry=configure())
    seamscope = SeamscopeCapability(layer, models={"gpt-4.1-mini": mini_model})
    agent = Agent(full_model, name="analyst", tools=[...], capabilities=[seamscope])
    result = await agent.run("How did Q3 sales go?")
    later = await agent.run("And Q4?", message_history=result.all_messages())
    layer.end_conversation(result.conversation_id)     # settle its offloads

Hook points (all public capability hooks; nothing in pydantic-ai is patched)
----------------------------------------------------------------------------
``for_run`` gives every run its own hooks, so concurrent runs share nothing
but the offloaded outputs (kept per conversation).

* ``prepare_tools`` (once per request step): a new ``seamscope.iteration``
  and the selection pipeline over the step's function tools. What it
  returns is what pydantic-ai offers the model *and* what it lets execute,
  so narrowing is real: a call of a removed tool gets pydantic-ai's
  "unknown tool" retry prompt.
* ``wrap_model_request``: the PRE seam; a name in ``models`` swaps the
  request's model (``ModelRequestContext.model``), a ``ModelConfig``'s
  parameters go into its model settings; the request runs inside a
  ``chat {model}`` span.
* ``after_model_request``: the usage (on the ``chat`` span and in the
  ledger, with the offloads whose stub the request carried), then the POST
  seam over the emitted function tool calls. A rewritten ``ToolCallPart``
  replaces the emitted one in the response before anything executes: the
  new tool runs, the message history holds it, its ``tool_call_id`` is
  kept and its provider item ``id`` is cleared.
* ``wrap_tool_execute``: an ``execute_tool {tool}`` span per function tool
  call (its ``error.type`` when the tool raises).
* ``after_tool_execute``: a text result of at least the gate's threshold
  (chars / 4) goes to the offload gate; a fired offload returns the stub,
  which is what the model, the message history and every later run given
  that history see. A call of ``recall_tool_result`` is a recall, a real
  cost in the ledger.
* ``get_toolset``: the ``recall_tool_result`` tool, offered whenever the
  request's messages hold a stub (whichever worker made the offload).

Spans of one run share one trace, under the caller's active span::

    invoke_agent {agent}
    └── seamscope.iteration              (one per model request step)
        ├── seamscope.select_tools ─ seamscope.stage …
        ├── seamscope.seam.pre_model
        ├── chat {model}
        ├── seamscope.seam.post_model ─ seamscope.dispatch …
        ├── execute_tool {tool} …        (the calls that request emitted)
        └── seamscope.offload_gate …

With pydantic-ai's own instrumentation on for the run
(``capabilities=[Instrumentation(...)]``, ``agent.instrument = ...`` or
``Agent.instrument_all()``), seamscope opens no GenAI spans of its own:
its iterations are children of pydantic-ai's ``invoke_agent`` span, beside
pydantic-ai's ``chat`` and ``execute_tool`` spans, in the same trace.
``genai_spans=`` forces either way.

Decisions and differences from the reference loop
-------------------------------------------------
* Conversation id: pydantic-ai's own ``conversation_id`` (the run's
  argument, else the one on ``message_history``, else a fresh one), so a
  conversation continued with ``message_history`` keeps its id. Call
  ``layer.end_conversation(id)`` when a conversation ends.
* The role policies and stages see is the agent's ``name`` unless
  ``role=`` says otherwise.
* The policies' and stages' messages are seamscope ``Message`` values made
  from the request history (instructions and system prompts as system
  messages; tool calls as an assistant message's tool calls; tool returns
  and retry prompts as tool messages). At the POST seam the just-emitted
  assistant message is the last one.
* Output tools (``final_result`` for a structured ``output_type``) are not
  selected (pydantic-ai binds them), never go through the POST seam (no
  policy redirects them) and are never counted as tool runs: each such call
  is a ``seamscope.dispatch`` span with ``seamscope.dispatch.structured_output``,
  as LangChain's ``ToolStrategy`` answer is.
* The PRE seam's default model (or a name not in ``models``) means the
  request's own model: the ``chat`` span names the model that really ran,
  and a name that is not in ``models`` is logged
  (``seamscope.model.unavailable``).
* A step pydantic-ai refuses before its model request (``UsageLimits``:
  ``request_limit``, token or cost limits, checked with their own
  ``check_before_request`` on the run's usage) is no iteration: it makes no
  model call, so it gets no ``seamscope.iteration`` and no selection; the
  run ends with ``UsageLimitExceeded`` on ``invoke_agent`` (and on the
  iteration still open, as every error that ends a run).
* Telemetry never breaks the run: a failure in seamscope's own code is
  contained (a ``seamscope.telemetry.error`` log event naming the hook) and
  the step runs as pydantic-ai would have run it. pydantic-ai's exceptions
  cross unchanged; the spans still open when a run ends (an error, a
  stream abandoned part way) end with its ``error.type``.

Limitations
-----------
* A forced tool (a ``ForcedChoiceStage`` decision) is kept in the offered
  tools but not sent as ``tool_choice``: pydantic-ai has no per-request
  tool choice for function tools.
* Streamed runs: the POST seam runs when the streamed response is
  complete, before its tool calls execute; the stream's own part events
  have reached the consumer with the emitted names.
* Only text tool results are offloaded. Offloaded outputs live in the
  offload store (``offload_store``, ``SEAMSCOPE_OFFLOAD_STORE``; the default
  is this process's memory): with SQLite or Redis any worker answers a
  recall; past the store's retention a recall says when the output expired
  (docs/many-workers.md).
* A model swapped by a capability after seamscope's (or a
  ``RetryModelRequest`` fallback) runs under the PRE seam's ``chat`` span
  name; the span's ``gen_ai.response.model`` names the model that answered.
"""

from __future__ import annotations

from seamscope.adapters.pydantic_ai._capability import SeamscopeCapability

__all__ = ["SeamscopeCapability"]
