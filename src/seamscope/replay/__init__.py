"""Re-settling recorded conversations: the engine of ``seamscope whatif`` and
``seamscope calibrate``.

* :class:`CourseReader` reads OTLP-JSON (files, or export requests fed one by
  one) and hands each conversation's recorded course (:class:`Conversation`:
  its model calls, gate calls, recalls, compactions and settlements, in the
  order the ledger was told them) to a callback; spans re-sent anywhere in
  the input count once, and memory follows the largest conversation, not the
  input;
* :func:`replay` re-settles one conversation with two real ledgers: the
  realized one (what the live ledger was told, to the Decimal) and the
  counterfactual one (every gate call decided again under a changed
  :class:`GateConfig`), giving a :class:`Replay`;
* :func:`whatif` does that for every conversation of an input under
  :class:`Overrides` (:func:`parse_overrides` reads ``KEY=VALUE`` items) and
  sums the :class:`Totals`;
* :func:`calibrate` collects, per (tool, model) pair, the :class:`Evidence` of
  its settled offloads: recalls, horizons, and a Beta posterior of the recall
  probability seeded with :data:`DEFAULT_PRIOR_STRENGTH` pseudo-offloads.

Amounts are exact :class:`~decimal.Decimal` USD, priced as the ledger prices
them. The printed tables and the priors file are the CLI's
(:mod:`seamscope.cli`).
"""

from __future__ import annotations

from seamscope.replay._calibrate import DEFAULT_PRIOR_STRENGTH, Evidence, calibrate
from seamscope.replay._course import Conversation, CourseReader
from seamscope.replay._replay import GateConfig, Replay, replay
from seamscope.replay._whatif import Overrides, Totals, parse_overrides, whatif

__all__ = [
    "DEFAULT_PRIOR_STRENGTH",
    "Conversation",
    "CourseReader",
    "Evidence",
    "GateConfig",
    "Overrides",
    "Replay",
    "Totals",
    "calibrate",
    "parse_overrides",
    "replay",
    "whatif",
]
