"""The words of the trees and the offload table, shipped with the package:
``seamscope explain --glossary`` prints them (the demo's legend points there), and
``docs/glossary.md`` is this text (``python -m seamscope.cli._glossary`` writes it;
a test holds the two equal)."""

from __future__ import annotations

__all__ = ["GLOSSARY"]

GLOSSARY = """\
# Glossary

The words of the trees and the offload table:

- **abstain**: a selection stage's outcome when it has nothing to say this
  iteration; the tools pass through unchanged. `select` means it narrowed the
  tools (or, for the allowlist, re-added some).
- **degraded**: a stage that raised (a timeout, a bug); the error is contained
  and the stage counts as an abstain, marked `[degraded]`
  (`seamscope.stage.degraded`).
- **contained**: an error in adopter code (a policy predicate, the adopter
  callback) caught inside a seam: the seam goes on as if that policy did not
  match, and the error is recorded. The tree shows it as a dimmed note, not as
  an error: `(note, contained: policy 'vip_customer' raised KeyError, counted as no match)`.
- **palette gate**: the POST seam's last check. A redirect whose target is not
  among the tools selected for this iteration is dropped and the call runs as
  emitted: `create_ticket ↛ page_oncall dropped by palette gate`.
- **net = saving − stub carry − expected recall**: the offload gate's formula.
  *saving*: what re-sending the output inline would cost over the horizon;
  *stub carry*: what carrying the short stub instead costs over the same
  turns; *expected recall*: the cost of one recall hop times `p`. The gate
  fires only when net > 0.
- **H**: the offload gate's horizon, the expected number of remaining turns a
  large tool output would be carried (re-prefilled) if it stayed inline.
- **p**: the gate's recall probability, the chance that an offloaded output is
  fetched back (one recall hop, priced in the last term).
- **carried**: in the offload table, how many later model calls carried the
  offload's stub before it settled.
- **cache Δ**: what the offload really cost in prompt-cache disruption (cache
  reads lost, prefixes written again), counted against its saving.
- **predicted / realized**: *predicted* is the gate's net when it decided, at
  its priors (H turns carried, recall chance p); *realized* is what the
  conversation then did (the turns it really carried, its real recalls, the
  cache). They part when a conversation ends sooner than H or recalls more
  than p: `seamscope calibrate` learns H and p from the realized side, and
  `seamscope whatif` shows what other priors would have given.
"""

if __name__ == "__main__":
    print(GLOSSARY, end="")
