"""LangChain v1 agent middleware: seamscope's decisions inside ``create_agent``.

Install the extra: ``pip install 'seamscope[langchain]'``. This is the only
seamscope package that imports LangChain; the rest of seamscope works
without it.

::

    from langchain.agents import create_agent
    from seamscope.adapters import DecisionLayer
    from seamscope.adapters.langchain import SeamscopeMiddleware

    layer = DecisionLayer(default_model="claude-opus-4-6", policies=[...],
                          stages=[...], agent_name="analyst")
    seamscope = SeamscopeMiddleware(layer, models={"claude-opus-4-6": opus,
                                                   "claude-haiku-4-5": haiku})
    agent = create_agent(opus, tools, middleware=[seamscope])
    agent.invoke({"messages": [...]}, config={"configurable": {"thread_id": "c-7"}})

What it does
------------
Per model call (``wrap_model_call``/``awrap_model_call``), one ReAct
iteration of the :class:`~seamscope.loop.DecisionLayer`:

* the selection pipeline narrows the request's tools; the model is bound
  only to the selected tools, and a forced tool becomes the request's
  ``tool_choice``;
* the PRE seam picks the model: the chosen name is looked up in ``models``
  and the request runs on that instance (a ``ModelConfig``'s parameters are
  merged into the request's ``model_settings``);
* the model call runs inside a ``chat {model}`` span that gets
  ``gen_ai.usage.*`` from the AIMessage's ``usage_metadata``, which also
  feeds the offload ledger (cache reads and writes from
  ``input_token_details``);
* the POST seam rewrites the emitted tool calls (ids kept; Anthropic-style
  ``tool_use`` content blocks too), so the agent executes the rewritten
  calls. Its context holds the just-emitted AIMessage, and the palette gate
  checks a redirect against the tools selected for this call.

Per tool call: an ``execute_tool {tool}`` span around the tool (in
``wrap_tool_call``/``awrap_tool_call`` when the middleware has tool hooks,
else from LangChain's tool callbacks: see "What it changes for LangChain"
in ``SeamscopeMiddleware``'s docstring); then, for a text output large
enough to reach the gate's threshold, the offload gate. When it fires, the
full output is kept in the offload store and the ToolMessage's content is
replaced by a stub naming the offload id (by the next model call, which
sends the stub and writes it into the state; inside ``wrap_tool_call`` when
the middleware has tool hooks), and the model can bring it back with the
``recall_tool_result`` tool, offered whenever the prompt holds a stub,
whichever worker made it (answered in the model call that emits it; a
registered tool run by the ``tools`` node when the middleware has tool
hooks). A recall is a real cost in the ledger.

LangChain's own decision middlewares
------------------------------------
Keep them, and wrap them in one call::

    agent = create_agent(opus, tools, middleware=seamscope.watching(
        LLMToolSelectorMiddleware(model=selector, max_tools=2),
        ModelFallbackMiddleware(backup),
        ToolCallLimitMiddleware(run_limit=3),
        ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=50_000, keep=1)]),
        SummarizationMiddleware(model=summarizer, trigger=("tokens", 80_000)),
    ))

``watching`` returns ``[seamscope, *watched, model tail]``. A watched
middleware behaves exactly as itself (same name, state schema, tools and
hooks with their jumps: the same graph, the same messages and state); its
decision is read from its effect and recorded in the span family seamscope's
own decisions of that kind use, with ``seamscope.middleware.*`` attributes:

* a tool selection or provider tool search (the tools it passed inward):
  ``seamscope.stage``;
* a route or a fallback (the model it passed inward; each attempt and its
  error): ``seamscope.seam.pre_model`` with ``winner_source`` ``router`` /
  ``fallback``;
* a tool call blocked by a limit (error results its ``after_model``
  injected) or a risk check (an error result without running the tool):
  one ``seamscope.dispatch`` per call, ``dispatch.blocked``;
* a compaction: tool results context editing replaced by a placeholder
  (once per conversation and tool call, ``context_editing:{call id}``), or
  messages a summary replaced (in the iteration of the next model call, with
  the summary call's cost): ``seamscope.compaction``, followed by the offload
  ledger like an offload (``seamscope.offload.mechanism``). A later call of
  the same tool with the same arguments as a cleared result is a re-read
  (a recall). One rule for what a compaction saves: every later prompt that
  really holds its placeholder (or summary) saves the removed tokens, until
  the model re-reads the data; the re-read puts the data back in the
  conversation, so from then on the placeholder saves nothing (a later
  prompt still holding it is not counted as carried). A compaction span's
  ``seamscope.offload.net_saving_usd`` is the settlement's predicted net:
  the gate's terms minus its own model call (``compaction.cost_usd``).
  Deep Agents' ``FilesystemMiddleware`` evicting a large tool result to a
  file (its ``wrap_tool_call`` returned a preview and the path instead) is
  a compaction too (``deepagents_eviction:{call id}``, in the iteration of
  the call that emitted it): a later call reading that file (an argument
  naming it, a ``grep`` whose output names it) is its recall at the tokens
  it returned, and it stays carried until the reads add up to the result.
  With ``SeamscopeMiddleware(..., gate_evictions=True)`` the offload gate
  decides each eviction first (a ``seamscope.offload_gate`` span), and one
  it prices as a loss is undone: the tool's own result is returned
  (docs/adapters/langchain.md, "Deep Agents").

The model tail, innermost, opens the ``chat {model}`` span of every real
model call (a fallback's failed attempt too) instead of the outer step,
naming the model really called, and reports to the ledger the stubs,
placeholders and summaries the prompt really holds. The models a watched
middleware asks for its decision are ``chat {model}`` spans of their own
(``seamscope.middleware.decision_model``), never counted as conversation
model calls: a LangChain callback handler, added with
``register_configure_hook``, sees only the runs started while the wrapped
middleware's own code runs (not while the handler it passed inward does).
A failure of a watcher's own code is contained; the middleware runs
unchanged, and its exceptions pass through as they are. The watcher fails
closed: its hook list is the installed ``AgentMiddleware``'s, read at run
time, and a middleware whose class overrides a hook the watcher does not
know (or an ``AgentMiddleware`` with an attribute it does not forward) is
returned as itself, unwatched, with one WARNING on the
``seamscope.adapters.langchain`` logger naming it.

Spans of one agent run (one ``invoke``) share one trace::

    invoke_agent {agent}
    └── seamscope.iteration              (one per model call)
        ├── seamscope.select_tools ─ seamscope.stage …
        ├── seamscope.seam.pre_model
        ├── seamscope.stage / .seam.pre_model / .compaction   (watched middlewares)
        ├── chat {model}                 (with watching: one per real model call,
        │                                 and one per decision-model call)
        ├── seamscope.seam.post_model ─ seamscope.dispatch …
        ├── execute_tool {tool} …        (the calls that model call emitted)
        └── seamscope.offload_gate …

Decisions and differences from the reference loop
-------------------------------------------------
* LangGraph runs every graph node in its own copy of the context, so the
  run's spans are kept by the middleware and attached in each hook. A hook
  finds its run by the graph invocation it runs in (LangGraph's
  per-invocation ``Runtime.control`` and the agent graph's checkpoint
  namespace), else, resuming after an interrupt, by thread: nothing is
  added to the agent's state and no node to its graph, so ``invoke``
  results, ``stream`` chunks, checkpoints and the ``recursion_limit`` a run
  needs are the same with and without seamscope. A run starts at its first
  hook and ends at the model call (or the ``return_direct`` tool call)
  after which LangChain routes the agent to its end; if another middleware
  sends the agent on from there, the run goes on in the same trace (a new
  ``invoke_agent`` under the ended one's parent, its iterations counting
  on). An iteration span stays open from its model call until the next
  model call of the run (or the run's end), so the tool calls it emitted
  are its children.
* Conversation id = ``configurable.thread_id``; without one, spans carry
  no conversation id and the ledger does not follow the run's offloads (the
  gate still decides). Call ``layer.end_conversation(thread_id)`` when a
  conversation ends to settle its offloads.
* A PRE-seam model name that is not in ``models`` keeps the request's model:
  the ``seamscope.seam.pre_model`` span still names the chosen model, the
  ``chat {model}`` span names the model really called, and a warning is
  logged. The default model (``layer.router.default_model``) may be left
  out of ``models``: the agent's own model is used.
* The offload gate is asked only about outputs of at least the gate's
  threshold tokens (chars / 4): smaller ones can never fire, so they get no
  gate span or metric (the reference loop asks about every output). Only
  text content is offloaded; ``Command`` results, error results and
  non-text content blocks pass through, and a recalled output is never
  offloaded again.
* A tool call whose result is LangChain's error ToolMessage (a handled
  ``ToolException``, arguments the tool rejected, an error middleware
  inside this one) has an ``execute_tool`` span with status ERROR, as the
  reference loop marks a failed tool, and the ``error.type`` of what the
  tool run raised, heard through LangChain's tool callbacks:
  ``ToolException``, the exception an error middleware handled,
  ``ToolInvocationError`` for arguments the tool's schema rejected;
  ``tool_error_result`` only when nothing says more.
* Structured output (``ToolStrategy``): its tools are bound by LangChain
  whatever the stages decide, so ``seamscope.select_tools`` records them as
  offered and selected; their calls are consumed inside the model call, so
  the POST seam never routes or rewrites them: a policy redirecting any
  tool never redirects the answer (the caller's structured response is
  never changed). The answer call has a ``seamscope.dispatch`` span of its
  own under the iteration, with ``seamscope.dispatch.structured_output``
  true and the call as emitted, and no ``execute_tool`` span: it is never
  handed to the tool runner.
* A run that ends where no hook sees it (a stream the caller closes part
  way, an error raised outside this middleware, a jump to the end that an
  unwatched middleware's hook returns while tool calls are pending; a
  watched middleware's declared jump is seen) is closed when LangGraph
  releases the invocation (a finalizer on the runtime's stream writer):
  its ``invoke_agent`` and open iteration spans end with ``error.type``
  ``abandoned``. Context tokens are only ever reset in the context that
  made them.
* When a span is already active (the caller's, OpenLLMetry's), the run's
  spans join its trace; OpenInference's LangChain instrumentation does not
  make its spans current, so its span for the current LangChain run is
  asked for (``get_current_span()``) and joined the same way.
* Telemetry never breaks the agent: a failure in seamscope's own code is
  contained (a ``seamscope.telemetry.error`` log event naming the hook and
  the error type) and the call proceeds unchanged (the request as LangChain
  built it, the response as the model returned it). The agent's own
  exceptions cross the hooks unchanged; the spans they cross record
  ``error.type`` and the run's spans end. A ``GraphBubbleUp`` (an
  interrupt) is not an error: the run stays open, and resuming it on the
  same thread continues it in the same trace.

Limitations
-----------
* Put this middleware first in ``middleware=[...]`` (outermost): an
  exception crossing it is taken as the end of the run, so retries and
  error handlers (``ModelRetryMiddleware``, ``ToolRetryMiddleware``,
  ``ToolErrorMiddleware``) belong inside it. Where one is placed outside
  it, that is seen only when the exception it handled turns out not to
  have ended the run (the next hook of the same invocation): one WARNING
  names the order to use, and the run goes on in the same trace (a new
  ``invoke_agent`` under the ended one, its iterations counting on); the
  ended ``invoke_agent`` keeps the handled exception's ``error.type``. Middleware inside it may
  still change the request it decided (a tool selector narrowing further):
  the spans show that only for middlewares given to ``watching``.
* Once ``watching`` is called, every agent using this middleware needs the
  list it returns: its model calls are recorded by the tail. What a
  provider does with deferred tools (ProviderToolSearchMiddleware) is not
  observable here: the search runs at the provider. A call blocked by a
  risk check (AutoModeMiddleware) is answered inside the tool node: its
  ``execute_tool`` span exists, ERROR with ``error.type``
  ``tool_call_blocked`` and ``seamscope.dispatch.blocked`` (the tool never ran).
* An interrupt raised where this middleware's hooks do not see it (e.g. in
  another middleware's ``after_model`` node) looks like an abandoned run:
  its spans end with ``abandoned`` and the resumed invocation is a new
  trace. An interrupt inside a tool or model call pauses the run instead.
* Runs that share a ``thread_id`` are assumed to be sequential: a new run
  closes the spans of a still-open earlier run on the same thread.
* Offloaded outputs live in the offload store: ``offload_store``, else
  ``SEAMSCOPE_OFFLOAD_STORE``, else the LangGraph store the agent is
  compiled with, else this process's memory; with a shared one any worker
  answers a recall (docs/many-workers.md).
* Provider-side (dict) tools pass through selection by name; a catalogue
  tool the allowlist re-adds without a bindable ``tool`` object is not bound.
"""

from __future__ import annotations

from seamscope.adapters.langchain._middleware import SeamscopeMiddleware

__all__ = ["SeamscopeMiddleware"]
