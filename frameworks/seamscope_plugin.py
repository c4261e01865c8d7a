"""pytest plugin: a framework's own tests, with seamscope added to every agent they build.

Load it with ``-p frameworks.seamscope_plugin`` (the repository root on ``PYTHONPATH``) and
choose a mode with ``--seamscope``:

* ``off``: nothing is patched (the baseline).
* ``on``: LangChain: every agent built by ``langchain.agents.create_agent`` (both names
  the tests import it by, ``langchain.agents.create_agent`` and
  ``langchain.agents.factory.create_agent``) gets ``SeamscopeMiddleware(layer)`` first in
  its middleware. Agents SDK: every ``agents.Runner.run`` / ``run_sync`` / ``run_streamed``
  a test makes is made through ``SeamscopeRunner(layer)`` with the same arguments; the
  runs the SDK starts itself inside a run (agents as tools) stay on its ``Runner``, as they
  do for an adopter of ``SeamscopeRunner``. Strands Agents: every ``strands.Agent`` a test
  constructs (``Agent.__init__``, so its subclasses' too) gets ``SeamscopePlugin(layer)``
  last in its ``plugins`` (a new list: the test's own list is left as it is).
* ``watched``: LangChain: the agent's own middlewares are given to
  ``SeamscopeMiddleware(layer).watching(*middlewares)`` instead of being passed as they
  are. The Agents SDK and Strands have nothing to watch: they are patched as in ``on``.

Each agent (each run, for the Agents SDK) gets a fresh ``DecisionLayer`` with the default
model ``claude-opus-4-6``: no policy, no stage. The layers' ``TracerProvider`` is the
session's, made at configure time with its tracers, as an application makes them once, at
startup (``_Tracers``). ``--seamscope-framework`` (``langchain``, ``openai-agents``,
``strands``, or ``all``, the default) says which frameworks are patched. The patches are
made in ``pytest_configure`` (before the tests are imported) and undone in
``pytest_unconfigure``, exactly: the very objects that were there are put back, and a
patch found replaced by someone else is reported.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

MODES = ("off", "on", "watched")
FRAMEWORKS = ("langchain", "openai-agents", "strands")
DEFAULT_MODEL = "claude-opus-4-6"

_PATCHES = pytest.StashKey["Patches"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("seamscope", "seamscope added to a framework's own tests")
    group.addoption(
        "--seamscope",
        choices=MODES,
        default="off",
        help="off: the framework as it is; on: seamscope added to every agent; "
        "watched: LangChain's middlewares watched by seamscope (default: off)",
    )
    group.addoption(
        "--seamscope-framework",
        choices=(*FRAMEWORKS, "all"),
        default="all",
        help="the framework to patch (default: all)",
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--seamscope")
    chosen = config.getoption("--seamscope-framework")
    patches = Patches()
    config.stash[_PATCHES] = patches
    if mode == "off":
        return
    _PROVIDER[:] = [_Tracers()]
    if chosen in ("langchain", "all"):
        patches.langchain(mode)
    if chosen in ("openai-agents", "all"):
        patches.openai_agents()
    if chosen in ("strands", "all"):
        patches.strands()


def pytest_report_header(config: pytest.Config) -> str:
    patches = config.stash.get(_PATCHES, None)
    patched = ", ".join(patches.names()) if patches is not None else ""
    return f"seamscope: {config.getoption('--seamscope')} (patched: {patched or 'nothing'})"


def pytest_unconfigure(config: pytest.Config) -> None:
    patches = config.stash.get(_PATCHES, None)
    if patches is not None:
        patches.undo()


_PROVIDER: list[Any] = []


class _Tracers:
    """The session's tracer provider: an SDK ``TracerProvider`` whose tracers are made once.

    Both are made in ``pytest_configure``, as an application makes them once, at startup:
    ``Resource.create`` runs its detectors on a thread pool and joins it (a blocking call
    LangChain's suite fails in a test's event loop: blockbuster), and the SDK's
    ``get_tracer`` adds a ``warnings`` filter on every call, which empties Python's
    once-per-place warning registry (a layer made per agent would have a framework's
    once-per-process warning shown again: Strands' suite checks that)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from seamscope import __version__

        self._provider = TracerProvider(resource=Resource.create({}), shutdown_on_exit=False)
        self._tracers: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        self.get_tracer("seamscope", __version__)

    def get_tracer(
        self,
        name: str,
        version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> Any:
        key = (name, version, schema_url, tuple(sorted(dict(attributes or {}).items())))
        with self._lock:
            tracer = self._tracers.get(key)
            if tracer is None:
                tracer = self._provider.get_tracer(name, version, schema_url, attributes)
                self._tracers[key] = tracer
            return tracer


def _layer() -> Any:
    """A fresh decision layer on the session's tracer provider."""
    from seamscope.adapters import DecisionLayer

    return DecisionLayer(default_model=DEFAULT_MODEL, tracer_provider=_PROVIDER[0])


class Patches:
    """The attributes replaced, and what was there before, to put back exactly."""

    def __init__(self) -> None:
        self._made: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, patch)

    def names(self) -> list[str]:
        return [f"{_qualname(owner)}.{name}" for owner, name, _, _ in self._made]

    def _set(self, owner: Any, name: str, patch: Any) -> None:
        original = vars(owner)[name]
        setattr(owner, name, patch)
        self._made.append((owner, name, original, patch))

    def undo(self) -> None:
        while self._made:
            owner, name, original, patch = self._made.pop()
            if vars(owner).get(name) is not patch:
                sys.stderr.write(
                    f"seamscope_plugin: {_qualname(owner)}.{name} was replaced during the "
                    "session; putting the original back\n"
                )
            setattr(owner, name, original)

    # -- LangChain --------------------------------------------------------------------

    def langchain(self, mode: str) -> None:
        import langchain.agents
        import langchain.agents.factory as factory

        from seamscope.adapters.langchain import SeamscopeMiddleware

        original = vars(factory)["create_agent"]
        if vars(langchain.agents)["create_agent"] is not original:
            raise pytest.UsageError(
                "seamscope_plugin: langchain.agents.create_agent is not "
                "langchain.agents.factory.create_agent; nothing patched"
            )
        signature = inspect.signature(original)

        @functools.wraps(original)
        def create_agent(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return original(*args, **kwargs)  # LangChain's own error, as it is
            middleware = bound.arguments.get("middleware", ())
            seamscope = SeamscopeMiddleware(_layer())
            if mode == "watched":
                bound.arguments["middleware"] = seamscope.watching(*middleware)
            else:
                bound.arguments["middleware"] = [seamscope, *middleware]
            return original(*bound.args, **bound.kwargs)

        self._set(factory, "create_agent", create_agent)
        self._set(langchain.agents, "create_agent", create_agent)

    # -- the Agents SDK ---------------------------------------------------------------

    def openai_agents(self) -> None:
        from agents import Runner

        from seamscope.adapters.openai_agents import SeamscopeRunner

        # set while a run goes through SeamscopeRunner: its own call of the SDK's Runner,
        # and the runs the SDK starts inside that run, go to the SDK's Runner as they are
        inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
            "seamscope_plugin_inside", default=False
        )

        def runner() -> Any:
            return SeamscopeRunner(_layer())

        def routed_async(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            async def method(cls: type, *args: Any, **kwargs: Any) -> Any:
                if inside.get():
                    return await original(cls, *args, **kwargs)
                token = inside.set(True)
                try:
                    return await getattr(runner(), name)(*args, **kwargs)
                finally:
                    inside.reset(token)

            return method

        def routed(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def method(cls: type, *args: Any, **kwargs: Any) -> Any:
                if inside.get():
                    return original(cls, *args, **kwargs)
                token = inside.set(True)
                try:
                    return getattr(runner(), name)(*args, **kwargs)
                finally:
                    inside.reset(token)

            return method

        for name in ("run", "run_sync", "run_streamed"):
            raw = vars(Runner)[name]
            if not isinstance(raw, classmethod):
                raise pytest.UsageError(f"seamscope_plugin: agents.Runner.{name} is no classmethod")
            original = raw.__func__
            wrap = routed_async if inspect.iscoroutinefunction(original) else routed
            self._set(Runner, name, classmethod(wrap(name, original)))

    # -- Strands Agents ---------------------------------------------------------------

    def strands(self) -> None:
        from strands.agent.agent import Agent

        from seamscope.adapters.strands import SeamscopePlugin

        original = vars(Agent)["__init__"]
        signature = inspect.signature(original)
        if "plugins" not in signature.parameters:
            raise pytest.UsageError("seamscope_plugin: strands.Agent.__init__ takes no plugins")

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError:
                original(self, *args, **kwargs)  # Strands' own error, as it is
                return
            plugins = bound.arguments.get("plugins")
            if plugins is not None and not isinstance(plugins, list):
                original(self, *args, **kwargs)  # as it is: Strands judges it
                return
            bound.arguments["plugins"] = [*(plugins or ()), SeamscopePlugin(_layer())]
            original(*bound.args, **bound.kwargs)

        self._set(Agent, "__init__", __init__)


def _qualname(owner: Any) -> str:
    if inspect.ismodule(owner):
        return owner.__name__
    return f"{owner.__module__}.{owner.__qualname__}"
