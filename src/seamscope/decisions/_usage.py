"""Token usage of one model call, as the loop reports it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelUsage"]


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Tokens of one model call.

    ``input_tokens`` counts every input token, cached or not;
    ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of it that
    were read from or written to the prompt cache. The rest is uncached.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"ModelUsage.{name} must be an int >= 0, got {value!r}")
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                "ModelUsage: cache_read_tokens + cache_write_tokens exceed input_tokens"
            )

    @property
    def uncached_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def cache_hit_ratio(self) -> float | None:
        """Share of input tokens read from the cache (None with no input)."""
        return None if self.input_tokens == 0 else self.cache_read_tokens / self.input_tokens
