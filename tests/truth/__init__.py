"""Every span tells the truth: one ground-truth harness, a scenario matrix per adapter.

``_harness`` records what really happened (which model instance was called
with which bound tools, which tool ran with which arguments and call id,
what the framework's own messages say) without knowing anything of
seamscope, and :func:`~tests.truth._harness.disagreements` compares every
telemetry claim (spans, span events, metric points, structlog events) with
that record. Each adapter's matrix drives its framework with the harness's
scripted model and tools and asserts ``[] == disagreements(...)``.
"""
