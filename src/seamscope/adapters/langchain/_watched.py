"""Watching LangChain's own decision middlewares without changing what they do.

:func:`watched` watches a middleware in place: its class becomes a subclass
of its own class, of the same name, that overrides exactly the hooks its
class overrides (sync and async, each with the original's signature and
``__can_jump_to__``), so ``create_agent`` builds the same nodes, edges and
jumps, and every attribute, ``isinstance`` check and copy is the
middleware's own (a framework that configures its instances, as Deep Agents
does, configures it as it would unwatched). Each hook calls the original
with the same arguments and returns what it returns, around a watch of
:mod:`._watch` that records what it decided. The watcher fails closed: its
hook list is the installed ``AgentMiddleware``'s, read at run time, and a
class overriding a hook it does not know is left unwatched, with one
warning naming it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from seamscope.adapters.langchain._calls import outside
from seamscope.adapters.langchain._framework import AgentMiddleware
from seamscope.adapters.langchain._runs import LOG, failed
from seamscope.adapters.langchain._steps import StepContext
from seamscope.adapters.langchain._watch import (
    ASYNC_NODE_HOOKS,
    SYNC_NODE_HOOKS,
    ModelWatch,
    NodeWatch,
    ToolWatch,
    Watcher,
)

__all__ = ["KNOWN_HOOKS", "framework_hooks", "watched"]

KNOWN_HOOKS = frozenset(
    (
        *SYNC_NODE_HOOKS,
        *ASYNC_NODE_HOOKS,
        "wrap_model_call",
        "awrap_model_call",
        "wrap_tool_call",
        "awrap_tool_call",
    )
)
"""The hooks a watcher knows how to watch (and forward)."""


def framework_hooks() -> tuple[str, ...]:
    """The hooks of the installed LangChain: ``AgentMiddleware``'s public methods,
    read at run time (a hook LangChain adds later is in this list)."""
    return tuple(
        name
        for name, value in vars(AgentMiddleware).items()
        if not name.startswith("_") and inspect.isfunction(value)
    )


class _Unwatchable(Exception):
    """A middleware class the watcher cannot copy exactly (the reason is the message)."""


_warned: set[type] = set()
_warned_lock = threading.Lock()


def _warn_unwatched(cls: type, reason: str) -> None:
    """One warning per middleware class, on the adapter's stdlib logger."""
    with _warned_lock:
        if cls in _warned:
            return
        _warned.add(cls)
    LOG.warning(
        "seamscope: %s.%s is not watched (%s); it runs unchanged and its decisions "
        "are not recorded",
        cls.__module__,
        cls.__qualname__,
        reason,
    )


_KITS = "_seamscope_watched_by"
"""The instance attribute of a watched middleware that holds the kits of the
seamscope middlewares watching it (a copy of it, ``copy.copy``, is watched
by the same ones)."""


def _watcher(middleware: Any) -> Watcher | None:
    """The watcher of a watched middleware's hook call (None: no kit, e.g. an
    instance its class made without :func:`watched`: it runs unwatched)."""
    kits = vars(middleware).get(_KITS)
    return Watcher(kits, middleware) if kits else None


def _runtime(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return kwargs.get("runtime", args[0] if args else None)


def _node_hook(hook: str, original: Callable[..., Any]) -> Callable[..., Any]:
    if hook in ASYNC_NODE_HOOKS:

        async def anode(self: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
            watcher = _watcher(self)
            if watcher is None:
                return await original(self, state, *args, **kwargs)
            watch = NodeWatch(watcher, state, _runtime(args, kwargs), hook)
            watch.enter()
            try:
                update = await original(self, state, *args, **kwargs)
            finally:
                watch.exit()
            watch.done(update)
            return update

        return anode

    def node(self: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        watcher = _watcher(self)
        if watcher is None:
            return original(self, state, *args, **kwargs)
        watch = NodeWatch(watcher, state, _runtime(args, kwargs), hook)
        watch.enter()
        try:
            update = original(self, state, *args, **kwargs)
        finally:
            watch.exit()
        watch.done(update)
        return update

    return node


def _wrap_model_call(original: Callable[..., Any]) -> Callable[..., Any]:
    def wrap_model_call(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
        watcher = _watcher(self)
        if watcher is None:
            return original(self, request, handler)
        watch = ModelWatch(watcher, request)

        def inward(req: Any) -> Any:
            watch.inward(req)
            with outside():
                try:
                    response = handler(req)
                except BaseException as exc:
                    watch.failed_attempt(exc)
                    raise
            watch.answered(response)
            return response

        watch.enter()
        try:
            response = original(self, request, inward)
        except BaseException as exc:
            watch.exit()
            watch.done(exc)
            raise
        watch.exit()
        watch.done(None)
        return response

    return wrap_model_call


def _awrap_model_call(original: Callable[..., Any]) -> Callable[..., Any]:
    async def awrap_model_call(
        self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        watcher = _watcher(self)
        if watcher is None:
            return await original(self, request, handler)
        watch = ModelWatch(watcher, request)

        async def inward(req: Any) -> Any:
            watch.inward(req)
            with outside():
                try:
                    response = await handler(req)
                except BaseException as exc:
                    watch.failed_attempt(exc)
                    raise
            watch.answered(response)
            return response

        watch.enter()
        try:
            response = await original(self, request, inward)
        except BaseException as exc:
            watch.exit()
            watch.done(exc)
            raise
        watch.exit()
        watch.done(None)
        return response

    return awrap_model_call


def _wrap_tool_call(original: Callable[..., Any]) -> Callable[..., Any]:
    def wrap_tool_call(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
        watcher = _watcher(self)
        if watcher is None:
            return original(self, request, handler)
        watch = ToolWatch(watcher, request)

        def inward(req: Any) -> Any:
            watch.called = True
            with outside():
                return watch.answered(handler(req))

        watch.enter()
        try:
            result = original(self, request, inward)
        finally:
            watch.exit()
        watch.done(result)
        return watch.returned(result)

    return wrap_tool_call


def _awrap_tool_call(original: Callable[..., Any]) -> Callable[..., Any]:
    async def awrap_tool_call(
        self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        watcher = _watcher(self)
        if watcher is None:
            return await original(self, request, handler)
        watch = ToolWatch(watcher, request)

        async def inward(req: Any) -> Any:
            watch.called = True
            with outside():
                return watch.answered(await handler(req))

        watch.enter()
        try:
            result = await original(self, request, inward)
        finally:
            watch.exit()
        watch.done(result)
        return watch.returned(result)

    return awrap_tool_call


_WRAP_HOOKS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "wrap_model_call": _wrap_model_call,
    "awrap_model_call": _awrap_model_call,
    "wrap_tool_call": _wrap_tool_call,
    "awrap_tool_call": _awrap_tool_call,
}


@functools.lru_cache(maxsize=256)
def _watched_class(cls: type) -> type:
    """``cls`` watched: a subclass of the same name, module and qualified name
    that overrides exactly the hooks ``cls`` overrides, each calling the
    original with the same arguments, with its signature and
    ``__can_jump_to__`` (what ``create_agent`` reads to build the graph).

    The hook list is the installed ``AgentMiddleware``'s (read at run time);
    raises :class:`_Unwatchable` for a class overriding a hook the watcher
    does not know."""
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__seamscope_watches__": cls,
    }
    for hook in framework_hooks():
        original = getattr(cls, hook, None)
        if original is None or original is getattr(AgentMiddleware, hook):
            continue
        if hook not in KNOWN_HOOKS:
            raise _Unwatchable(f"it overrides {hook}, a hook seamscope does not know")
        make = _WRAP_HOOKS.get(hook)
        function = make(original) if make is not None else _node_hook(hook, original)
        with contextlib.suppress(TypeError, ValueError):
            function.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
        jump = getattr(original, "__can_jump_to__", None)
        if jump is not None:
            function.__can_jump_to__ = jump  # type: ignore[attr-defined]
        function.__name__ = hook
        function.__qualname__ = f"{cls.__qualname__}.{hook}"
        namespace[hook] = function
    return type(cls.__name__, (cls,), namespace)


def watched(kit: StepContext, middleware: AgentMiddleware[Any, Any, Any]) -> Any:
    """``middleware`` itself, watched by ``kit``: its class becomes
    :func:`_watched_class` of its class (same name, hooks, signatures and
    jumps: ``isinstance`` checks, ``copy``, and every attribute the framework
    reads or sets on it are its own, so a framework that configures its
    instances, as Deep Agents copies an agent's permissions onto its
    ``FilesystemMiddleware``, configures it as it would unwatched). It stays
    unwatched when no exact watched class can be built for its class (one
    warning naming it: a hook of the installed LangChain the watcher does not
    know), or when watching it fails: seamscope never changes the agent."""
    cls: Any = getattr(type(middleware), "__seamscope_watches__", None) or type(middleware)
    try:
        watching = _watched_class(cls)
        kits = vars(middleware).get(_KITS) or ()
        if kit not in kits:
            vars(middleware)[_KITS] = (*kits, kit)
        if type(middleware) is not watching:
            middleware.__class__ = watching
    except _Unwatchable as exc:
        _warn_unwatched(cls, str(exc))
    except Exception:
        failed("langchain.watch")
    return middleware
