"""Public names imported on first use (PEP 562), for seamscope's packages.

It lives in the core, which imports nothing outside itself, so the core,
telemetry and the top-level package can all use it. A package lists where
each public name lives; :func:`lazy_exports` gives it
the module ``__getattr__`` and ``__dir__`` that import a name from there on
first use and keep it in the package's globals, so later reads cost a dict
look-up. (``seamscope.decisions.records`` has its own copy: it imports
nothing else of seamscope.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str, homes: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``module``: ``homes`` maps each public
    name to the module (absolute name) that defines it."""
    namespace = sys.modules[module].__dict__
    names = frozenset(public)

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | names)

    return __getattr__, __dir__
