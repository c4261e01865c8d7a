"""symfonic-core's ``SymfonicAgent``, observed by seamscope (extra ``seamscope[symfonic]``).

::

    inst = instrument_symfonic(agent, tracer_provider=tp, meter_provider=mp,
                               agent_name="analyst")
    with inst.conversation("conv-7"):
        await agent.run("how are sales doing?")
    inst.uninstrument()        # the agent and symfonic are exactly as before

The decisions symfonic really takes appear as seamscope's decision spans,
span events and metrics, with the same contract as seamscope's own loop
(:mod:`seamscope.telemetry.conventions`); nothing of symfonic is forked and
nothing it decides changes. Per ``agent.run`` (one user turn)::

    invoke_agent {agent}
    └─ seamscope.iteration                     (one per react-node call)
       ├─ seamscope.seam.pre_model             (events: seamscope.policy.evaluated)
       ├─ seamscope.offload_gate               (one per gate call symfonic makes)
       ├─ chat {model}                         (CLIENT)
       ├─ seamscope.seam.post_model            (only when the model emitted tool calls)
       │  └─ seamscope.dispatch                (one per emitted call; events as above)
       └─ execute_tool {tool}

The offload ledger (``ledger=``, by default an :class:`OffloadLedger` on the
same providers priced by :func:`symfonic_pricing`) follows the offloads
symfonic fires in each ``inst.conversation(...)`` block to their realized
savings and costs:

* the first fired gate decision of an output in the conversation starts an
  offload (``record_offload``, linked to that ``seamscope.offload_gate``
  span), followed from the first model call that sends its stub and priced
  on that stub (its characters / 4, not the gate's assumed stub size; a
  fired offload whose stub is never sent is followed from the conversation's
  end, on the gate's size); symfonic re-decides the output on every later
  iteration, under the same offload id;
* each react-node model call is recorded with the usage symfonic reports
  on ``on_llm_end`` (input, output, cache-read and cache-creation tokens)
  and, as carried, the offloads whose stub was in the messages symfonic
  sent (``on_llm_start``), less those the model has recalled since;
* a ``recall_tool_result(mem_id=...)`` call is matched to its offload by
  the memory id the stub named, and recorded with the recalled text's
  tokens (chars / 4) and the output tokens of the model call that asked
  for it;
* when the outermost block of a conversation id exits, its offloads
  settle: one ``seamscope.offload.settle`` span each, linked to the gate
  span. Without a conversation id the ledger is not fed.

Where it hooks (each undone exactly by
:meth:`SymfonicInstrumentation.uninstrument`): a handler first in the
agent's ``CallbackManager``; the configured ``tool_call_policies``, rebuilt
with wrapped predicates (symfonic's POST seam has no hook); the agent's
model resolver (the PRE seam); ``agent.run`` (an exception crossing it ends
the run's spans with its type); ``evaluate_offload_gate``, wrapped once per
process; and logging handlers on ``symfonic.core.nodes.react`` and
``symfonic.core.callbacks.manager``. These
rely on symfonic-core 9.12 internals; :mod:`._install` says why each is
needed.

symfonic's own OpenTelemetry layer is left as configured (off by default);
this package never sets global providers. Telemetry never changes or breaks
the agent: every hook (and every call into the ledger) is contained, and
adopter exceptions are re-raised to symfonic unchanged. Where symfonic's
behaviour differs from the design it implements, what symfonic really did
is recorded; ``docs/symfonic.md`` lists the differences and the limits of
the ledger's view.

Layout: :mod:`._install` hooks and unhooks symfonic; :mod:`._seams` and
:mod:`._recorder` keep the per-run bookkeeping and emit the spans;
:mod:`._translate` turns symfonic's objects into decision records (pure).
"""

from seamscope.adapters.symfonic._install import SymfonicInstrumentation, instrument_symfonic
from seamscope.adapters.symfonic._translate import symfonic_pricing

__all__ = ["SymfonicInstrumentation", "instrument_symfonic", "symfonic_pricing"]
