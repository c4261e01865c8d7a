"""OpenAI Agents SDK: seamscope's decisions inside the SDK's own ``Runner``.

Install the extra: ``pip install 'seamscope[openai-agents]'`` (openai-agents
0.24.0). This is the only seamscope package that imports the SDK.

::

    from agents import Agent
    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.openai_agents import SeamscopeRunner

    layer = DecisionLayer(default_model="gpt-4.1", policies=[...], stages=[...],
                          agent_name="analyst", telemetry=configure())
    seamscope = SeamscopeRunner(layer, models={"gpt-4.1-mini": mini_model})
    agent = Agent(name="analyst", model=full_model,
                  tools=[*tools, seamscope.recall_tool])
    result = await seamscope.run(agent, "How did Q3 sales go?", session=session)
    layer.end_conversation(session.session_id)     # settle its offloads

``run``, ``run_sync`` and ``run_streamed`` take exactly the SDK's arguments
(``context``, ``max_turns``, ``session``, ``run_config`` as a ``RunConfig``
or a dict, ``hooks``, ...; ``run_streamed``'s positional ones too) plus the
keyword ``conversation=``, seamscope's conversation id. The model provider
the SDK makes and closes itself (no ``run_config``, or a dict without
``model_provider``) is closed when the run ends, as the SDK would.

Hook points (all public; nothing in the SDK is patched)
-------------------------------------------------------
* ``RunConfig.model`` = a routing ``Model`` made for the run (a copy of
  your ``RunConfig``; yours is not modified). The runner resolves it for
  every turn of every agent, handoffs included, and calls it with the tools
  offered. Per call it is one ReAct iteration of the
  :class:`~seamscope.loop.DecisionLayer`: the selection pipeline
  narrows the tools sent to the model (handoffs pass through: they are not
  tools to select); a forced tool becomes ``tool_choice``; the PRE seam
  picks the model (a name in ``models``, else the agent's own model; a
  ``ModelConfig``'s parameters go into the ``ModelSettings``); the call runs
  inside a ``chat {model}`` span that gets the usage; the POST seam rewrites
  the function calls in ``ModelResponse.output`` (streamed: in the final
  ``ResponseCompletedEvent``) before the runner executes them, call ids
  kept, so the history, the hooks and the SDK's own tracing show the call
  that really ran. A call the SDK makes again without running the input
  filter (its retry, ``ModelSettings(retry=...)``) reuses the call's plan:
  the same model, tools and settings, in the same iteration, one ``chat``
  span per attempt (a retry's with ``seamscope.chat.attempt``); a failed
  stream's own stream is closed at once. The rest of the ``Model``
  interface goes to the models the run really called
  (``get_retry_advice`` to the one whose call failed; ``close``,
  ``_cleanup_on_run_end`` to each); anything else the SDK reads of its
  model (``_supports_default_prompt_cache_key``, ``model``, and the type
  ``isinstance`` sees, through ``__class__``) is the model the SDK would
  resolve itself for the agent it runs, so its type checks (Chat
  Completions with output guardrails and ``previous_response_id``) decide
  as without seamscope.
* ``RunConfig.call_model_input_filter`` (yours runs first): notes the
  turn's agent and replaces each offloaded tool output by its stub in what
  the model is sent. The history, the session and ``to_input_list()`` keep
  the full text, and the stub is put back, by call id, on every later model
  call of the conversation (next runs too). When yours is the SDK's
  ``ToolOutputTrimmer``, each output it replaced by a preview (read from
  what it returned) is a compaction (``tool_output_trimmer``) the ledger
  follows like an offload: carried by every later call whose input holds
  the preview, re-read by a later call of the same tool with the same
  arguments (docs/adapters/openai-agents.md).
* ``RunHooks`` (yours are called after seamscope's): ``on_tool_start`` /
  ``on_tool_end`` hold an ``execute_tool {tool}`` span per function tool
  call; after it, a text result of at least the gate's threshold (chars / 4)
  goes to the offload gate, and a fired offload is followed by the ledger.
  A call of ``recall_tool_result`` is a recall, a real cost in the ledger.
* ``RunConfig.tool_error_formatter`` (yours answers): sees the exception of
  a tool that raised, so its ``execute_tool`` span records ``error.type``
  although the SDK answered the model with an error message.

Spans of one run share one trace, under the caller's active span::

    invoke_agent {agent}
    └── seamscope.iteration              (one per model call)
        ├── seamscope.select_tools ─ seamscope.stage …
        ├── seamscope.seam.pre_model
        ├── chat {model}
        ├── seamscope.seam.post_model ─ seamscope.dispatch …
        ├── execute_tool {tool} …        (the calls that model call emitted)
        └── seamscope.offload_gate …

``invoke_agent`` is current while the SDK starts its trace, so with
``openinference-instrumentation-openai-agents`` the SDK's own spans (its
workflow, agent, tool and handoff spans) land in the same trace, under
``invoke_agent``, beside seamscope's iterations.

Decisions and differences from the reference loop
-------------------------------------------------
* Conversation id: ``conversation=``, else the session's ``session_id``,
  else the SDK's ``conversation_id``. Without one, spans carry none and the
  ledger does not follow the run's offloads (the gate still decides, and
  the stub still applies within the run). Call
  ``layer.end_conversation(id)`` when a conversation ends.
* The role policies and stages see is the running agent's ``name`` (so a
  role palette can differ per agent across handoffs), unless ``role=``
  says otherwise. The spans' ``gen_ai.agent.name`` is the layer's
  ``agent_name`` for every agent of the run.
* The policies' and stages' messages are seamscope ``Message`` values made
  from the model input (instructions as a system message; function calls
  as an assistant message's tool calls; function outputs as tool messages).
  At the POST seam the just-emitted assistant message is the last one.
* The PRE seam's default model (or a name not in ``models``) means the
  agent's own model: the ``chat`` span names the model that really ran (a
  Model's ``model`` attribute), and a name that is not callable is logged
  (``seamscope.model.unavailable``). The SDK's default settings of a named
  model (e.g. GPT-5 reasoning defaults) are kept for the agent's own model.
* The POST seam sees the handoff calls too (as emitted tool calls); the
  palette gate judges a redirect against the tools selected for the call.
* The recall tool is offered only while the offload store holds outputs of
  the conversation (any worker's); a recalled output is never offloaded again.
* An agent used as a tool (``Agent.as_tool``) runs a nested run of its own:
  an ``invoke_agent {agent}`` span under the tool's ``execute_tool`` span,
  with its own iterations (indices from 0) and decisions, in the same
  conversation. The SDK gives the nested run the tool context's
  ``run_config``: seamscope replaces it, when the agent tool starts, by a
  copy of your ``RunConfig`` bound to the nested run. No run hooks reach a
  nested run (``as_tool(hooks=)`` is yours), so the ``execute_tool`` span
  of each tool it calls runs from the call's dispatch to the model call
  that reads its output, and its outputs are not offloaded. An agent tool
  given its own ``as_tool(run_config=)`` runs outside seamscope. A nested
  run that fails is answered by the agent tool's failure function without
  any hook seeing the exception: its spans end, without ``error.type``.
* Telemetry never breaks the run: a failure in seamscope's own code is
  contained (a ``seamscope.telemetry.error`` log event naming the hook) and
  the turn runs as the SDK would have run it. A model call whose planning
  failed (no selection, no PRE seam) says so on its iteration: a
  ``seamscope.decisions.skipped`` event with ``error.type``. The SDK's exceptions cross
  unchanged; the spans still open when a run ends (an error, a cancelled
  stream) end with its ``error.type``.

Limitations
-----------
* Narrowing is what the model sees: a tool the pipeline removed still runs
  if the model calls it (the SDK resolves calls against the agent's tools).
* Streamed: the raw ``response.*`` events reach the consumer before the
  POST seam, with the emitted names; the run items and the history hold the
  rewritten calls. A stream you stop reading is not over until its task
  ends: call ``result.cancel()``.
* Only text tool results are offloaded. Offloaded outputs live in the
  offload store (``offload_store``, ``SEAMSCOPE_OFFLOAD_STORE``; the default
  is this process's memory): the session keeps the full text and every
  worker stubs each output the store holds; one the store dropped (past its
  retention) is no longer stubbed: the model sees the full text again
  (docs/many-workers.md).
* An agent tool given its own ``as_tool(run_config=)`` runs outside seamscope
  (see above: the others are nested runs of the run that calls them). Every
  tool kind of the SDK (hosted MCP, web and
  file search, computer, shell, code interpreter, ...) goes through
  selection by its name (a tool whose name cannot be read is sent untouched,
  listed in the iteration's ``seamscope.selection.passed_through``); only
  function tools get ``execute_tool`` spans, and the POST seam sees only
  function calls.
* ``RunConfig.model`` is seamscope's for the run; your own ``RunConfig.model``
  (if set) is the model every agent uses when the PRE seam keeps the
  default.
"""

from __future__ import annotations

from seamscope.adapters.openai_agents._runner import SeamscopeRunner

__all__ = ["SeamscopeRunner"]
