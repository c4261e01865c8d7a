"""TelemetryConfig: what seamscope records, and how much.

Precedence for every field: a value passed in code, then the environment,
then the default. A bad environment value logs a warning and falls back to
the default; a value of the wrong type passed in code raises TypeError, and
an out-of-range one ValueError, both naming the field. That holds for
:meth:`TelemetryConfig.create` and for ``TelemetryConfig(...)`` built
directly (which reads no environment).

=============================  ==================================================  =======
field                          environment variable                                default
=============================  ==================================================  =======
capture_content                OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT  False
max_attribute_length           SEAMSCOPE_MAX_ATTRIBUTE_LENGTH                      1024
max_array_length               SEAMSCOPE_MAX_ARRAY_LENGTH                          128
metric_label_cap               SEAMSCOPE_METRIC_LABEL_CAP                          64
decision_duration_metric       SEAMSCOPE_DECISION_DURATION_METRIC                  False
=============================  ==================================================  =======

``capture_content`` accepts ``true``/``false`` (any case) and, as the GenAI
instrumentations do, ``span_only``/``span_and_event`` (treated as true) and
``no_content`` (false).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TelemetryConfig", "default_mask"]

_log = logging.getLogger("seamscope.telemetry")

ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_MAX_ATTRIBUTE_LENGTH = "SEAMSCOPE_MAX_ATTRIBUTE_LENGTH"
ENV_MAX_ARRAY_LENGTH = "SEAMSCOPE_MAX_ARRAY_LENGTH"
ENV_METRIC_LABEL_CAP = "SEAMSCOPE_METRIC_LABEL_CAP"
ENV_DECISION_DURATION_METRIC = "SEAMSCOPE_DECISION_DURATION_METRIC"

_TRUE = {"true", "1", "yes", "on", "span_only", "span_and_event", "event_only"}
_FALSE = {"false", "0", "no", "off", "no_content", ""}


def default_mask(text: str) -> str:
    """The default masking function: identity (truncation happens after it)."""
    return text


def _env_bool(name: str, default: bool, environ: Mapping[str, str]) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    _log.warning("ignoring %s=%r: expected true or false; using %s", name, raw, default)
    return default


def _env_int(name: str, default: int, minimum: int, environ: Mapping[str, str]) -> int:
    raw = environ.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        _log.warning(
            "ignoring %s=%r: expected an integer >= %d; using %d", name, raw, minimum, default
        )
        return default
    return value


def _code_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"TelemetryConfig.{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"TelemetryConfig.{name} must be >= {minimum}, got {value}")
    return value


_MINIMUMS = {"max_attribute_length": 16, "max_array_length": 1, "metric_label_cap": 1}


def _code_labels(value: Any) -> frozenset[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            "TelemetryConfig.known_labels must be an iterable of str (not a str), got "
            f"{type(value).__name__}"
        )
    try:
        labels = frozenset(value)
    except TypeError:
        raise TypeError("TelemetryConfig.known_labels must contain only str") from None
    if not all(isinstance(v, str) for v in labels):
        raise TypeError("TelemetryConfig.known_labels must contain only str")
    return labels


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """Resolved telemetry settings (see the module docstring for precedence).

    * ``capture_content``: record messages, tool arguments and tool results
      (masked, truncated). Off by default.
    * ``mask``: the one function content passes through when captured.
    * ``max_attribute_length``: string attributes are truncated to this.
    * ``max_array_length``: string-array attributes keep this many items.
    * ``metric_label_cap``: distinct values kept per metric attribute (policy,
      stage, model, tool names); later values fold into ``other``.
    * ``known_labels``: values kept first under the label cap, for every
      metric attribute; they count against it (at most ``metric_label_cap``
      values per attribute, whatever the configuration). Any iterable of str
      is stored as a frozenset.
    * ``decision_duration_metric``: also record ``seamscope.decision.duration``
      (a histogram per decision kind). Off by default: the collector's
      spanmetrics connector derives the same durations from the decision
      spans (``collector-config.yaml``), so the process need not pay for it.

    Built directly, every field is checked as :meth:`create` checks a value
    passed in code (TypeError for a wrong type, ValueError below the
    minimum: 16 for ``max_attribute_length``, 1 for the other two limits).
    """

    capture_content: bool = False
    max_attribute_length: int = 1024
    max_array_length: int = 128
    metric_label_cap: int = 64
    mask: Callable[[str], str] = field(default=default_mask, compare=False)
    known_labels: frozenset[str] = frozenset()
    decision_duration_metric: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.decision_duration_metric, bool):
            raise TypeError(
                "TelemetryConfig.decision_duration_metric must be a bool, got "
                f"{type(self.decision_duration_metric).__name__}"
            )
        if not isinstance(self.capture_content, bool):
            raise TypeError(
                "TelemetryConfig.capture_content must be a bool, got "
                f"{type(self.capture_content).__name__}"
            )
        for name, minimum in _MINIMUMS.items():
            _code_int(name, getattr(self, name), minimum)
        if not callable(self.mask):
            raise TypeError(
                f"TelemetryConfig.mask must be callable, got {type(self.mask).__name__}"
            )
        if not isinstance(self.known_labels, frozenset) or not all(
            isinstance(v, str) for v in self.known_labels
        ):
            object.__setattr__(self, "known_labels", _code_labels(self.known_labels))

    @classmethod
    def create(
        cls,
        *,
        capture_content: bool | None = None,
        max_attribute_length: int | None = None,
        max_array_length: int | None = None,
        metric_label_cap: int | None = None,
        mask: Callable[[str], str] | None = None,
        known_labels: Iterable[str] = (),
        decision_duration_metric: bool | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> TelemetryConfig:
        """Resolve code arguments, then the environment, then defaults."""
        if environ is not None and not isinstance(environ, Mapping):
            raise TypeError(
                f"TelemetryConfig.environ must be a mapping or None, got {type(environ).__name__}"
            )
        env = os.environ if environ is None else environ
        if capture_content is None:
            capture = _env_bool(ENV_CAPTURE_CONTENT, False, env)
        elif isinstance(capture_content, bool):
            capture = capture_content
        else:
            raise TypeError(
                "TelemetryConfig.capture_content must be a bool, got "
                f"{type(capture_content).__name__}"
            )
        length = (
            _env_int(ENV_MAX_ATTRIBUTE_LENGTH, 1024, 16, env)
            if max_attribute_length is None
            else _code_int("max_attribute_length", max_attribute_length, 16)
        )
        array = (
            _env_int(ENV_MAX_ARRAY_LENGTH, 128, 1, env)
            if max_array_length is None
            else _code_int("max_array_length", max_array_length, 1)
        )
        cap = (
            _env_int(ENV_METRIC_LABEL_CAP, 64, 1, env)
            if metric_label_cap is None
            else _code_int("metric_label_cap", metric_label_cap, 1)
        )
        if mask is not None and not callable(mask):
            raise TypeError(f"TelemetryConfig.mask must be callable, got {type(mask).__name__}")
        labels = _code_labels(known_labels)
        if decision_duration_metric is None:
            duration = _env_bool(ENV_DECISION_DURATION_METRIC, False, env)
        elif isinstance(decision_duration_metric, bool):
            duration = decision_duration_metric
        else:
            raise TypeError(
                "TelemetryConfig.decision_duration_metric must be a bool, got "
                f"{type(decision_duration_metric).__name__}"
            )
        return cls(capture, length, array, cap, mask or default_mask, labels, duration)
