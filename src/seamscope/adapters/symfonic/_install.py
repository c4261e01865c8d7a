"""How seamscope's hooks go into one ``SymfonicAgent`` and come out again.

:func:`instrument_symfonic` builds a :class:`SymfonicInstrumentation` and
installs its hooks; :meth:`SymfonicInstrumentation.uninstrument` undoes
each, in the reverse order. An undo restores an attribute only if it still
holds what the install put there; otherwise it leaves the newer object in
place, with a WARNING. Every hook only forwards to the recorder
(:mod:`._seams`, :mod:`._recorder`), which never raises into symfonic;
adopter exceptions reach symfonic unchanged.

Why each private symfonic object is wrapped
-------------------------------------------

Every private name, the gate's call site and the log texts matched are
read or replaced through :mod:`._private` only (one module, with a
tripwire test against the installed symfonic).

symfonic-core 9.12 has one public hook interface, its callbacks; the other
decisions seamscope records are taken where no callback reaches. From the
least to the most intrusive:

* ``SymfonicAgent._deps`` (the agent's dependency container) holds the
  deps-level ``CallbackManager`` symfonic calls, and a built agent has no
  public way to add a handler. A new manager holding seamscope's handler
  first (so it sees each dispatch as the policies left it, before an
  adopter's handler rewrites it), then the original handlers (symfonic's
  public ``CallbackManager.merge``), is registered in its place (public
  ``BaseAgentDeps.register``); uninstall
  registers the original object again (or, when there was none, removes
  the entry from ``_deps._capabilities``). The handler receives
  ``on_agent_start/end``, ``on_node_start/error``, ``on_llm_start/end``,
  ``on_tool_call_dispatch``, ``on_before_tool_call`` and
  ``on_tool_result``, and never rewrites or vetoes anything.
* ``SymfonicAgent._config`` and ``_AgentModelResolver._tool_call_policies``:
  symfonic's POST seam has no hook and its context lacks the emitted
  message, so which policy matched, its guard, its transform and the
  emitted tool name are seen only by the policies themselves. Each
  ``ToolCallPolicy`` is rebuilt as an instance of a subclass of its own
  class (``isinstance`` still holds) with wrapped ``match``/``guard``/
  ``args_transform`` and a ``matches_tool`` that reports the emitted name.
  The config is frozen: the agent gets a ``model_copy`` holding those
  policies and the model resolver the same policies; the original config
  object and policy tuple are put back.
* ``_AgentModelResolver.resolve`` and ``_AgentModelResolver._resolver``:
  symfonic's PRE seam has no hook. ``resolve`` is shadowed by an instance
  attribute; what it returns is the ``ModelConfig`` symfonic hands to
  ``provider.get_chat_model`` (``gen_ai.request.model``). The wrapped
  ``role_model_resolver`` tells the resolver's choice from the default.
  ``_AgentModelResolver._snapshot_default``, the model symfonic falls back
  to when the resolver raises, is only read.
* ``symfonic.core.tool_offload_gate.evaluate_offload_gate``: symfonic
  prices every offload and discards the decision once ``fire`` is read. It
  looks the function up on the module on every call, so the function is
  wrapped there, once per process however many agents are instrumented;
  the wrapper returns symfonic's own decision object, and the original is
  put back when the last instrumentation goes (or an instrumented agent
  never uninstrumented is garbage-collected). A wrapper someone stacked on
  it later is never removed; seamscope's stays beneath it, passing calls
  through, and is reused by the next instrumentation (:class:`_GatePatch`).
  The gate is given only the economics: the tool call id and tool name are read, read-only and best
  effort, from the ``msg`` local of symfonic's
  ``_maybe_compact_tool_results`` frame.
* The ``symfonic.core.nodes.react`` logger: symfonic's WARNING
  ``on_tool_call_dispatch: rewrite targets unregistered tool ...`` is the
  only trace of an adopter rewrite its dispatch palette gate drops; one
  ``logging.Handler`` reads its arguments and is removed on uninstall.
* The ``symfonic.core.callbacks.manager`` logger: symfonic's
  ``CallbackManager`` contains an adopter ``on_tool_call_dispatch`` that
  raises or returns junk and only logs it (with the exception); a second
  handler turns that into the dispatch's contained error.
* ``SymfonicAgent.run``, shadowed by an instance attribute: symfonic ends
  a run whose exception is crossing ``run`` with the same ``on_agent_end``
  as a success; only a wrapper around ``run`` sees the exception, and ends
  that run's spans with its type. It re-raises it unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace

from seamscope._internal import check_telemetry_options, guard_observer
from seamscope.adapters.symfonic import _private as private
from seamscope.adapters.symfonic._recorder import (
    _ACTIVE,
    OffloadLedger,
    TelemetryConfig,
    _default_ledger,
    _default_observer,
)
from seamscope.adapters.symfonic._seams import _SeamRecorder
from seamscope.adapters.symfonic._symfonic import CallbackManager
from seamscope.adapters.symfonic._translate import _wrappable, symfonic_pricing
from seamscope.decisions import DecisionObserver

__all__ = ["SymfonicInstrumentation", "instrument_symfonic"]

_log = logging.getLogger("seamscope.adapters.symfonic")

_TAP_ATTR = "_seamscope_tap"


# --------------------------------------------------------------------------
# Policies: a subclass of the policy's own class, so isinstance still holds.
# --------------------------------------------------------------------------

_TAPPED_CLASSES: dict[type, type] = {}
_TAPPED_LOCK = threading.Lock()


def _tapped_class(base: type) -> type:
    """A subclass of ``base`` whose ``matches_tool`` reports to the instrumentation."""
    with _TAPPED_LOCK:
        cls = _TAPPED_CLASSES.get(base)
        if cls is not None:
            return cls

        def matches_tool(self: Any, tool_name: str) -> bool:
            result: bool = base.matches_tool(self, tool_name)  # type: ignore[attr-defined]
            tap = self.__dict__.get(_TAP_ATTR)
            if tap is not None:
                tap[0](tap[1], tool_name, result)  # (the recorder's callback, index)
            return result

        cls = type(
            base.__name__,
            (base,),
            {
                "matches_tool": matches_tool,
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
                "__doc__": base.__doc__,
            },
        )
        _TAPPED_CLASSES[base] = cls
        return cls


# --------------------------------------------------------------------------
# The offload gate wrapper: one per process, shared by every instrumentation.
# --------------------------------------------------------------------------


class _GatePatch:
    """seamscope's wrapper of symfonic's offload gate, shared by every instrumentation.

    Installed when the first instrumentation comes, put back when the last
    goes. When someone wrapped the gate again after seamscope did, the
    newer wrapper is never removed: seamscope's own stays beneath it (it
    passes every call straight through while nothing is instrumented) and
    is reused by the next instrumentation, found through the ``__wrapped__``
    chain, so no second layer is stacked. A wrapper that hides the chain
    gets a new seamscope layer on top; every gate call is still recorded
    once, by the outermost seamscope layer (:data:`_IN_GATE`).
    """

    lock = threading.Lock()
    wrapper: Any = None
    users = 0

    @classmethod
    def acquire(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                current = private.gate()
                found = _seamscope_layer(current)
                if found is None:
                    found = _gate_wrapper(current)
                    private.set_gate(found)
                cls.wrapper = found
            cls.users += 1

    @classmethod
    def release(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                return
            cls.users -= 1
            if cls.users:
                return
            cls.wrapper = None
            current: Any = private.gate()
            if _is_ours(current):
                private.set_gate(current.__wrapped__)
            elif _seamscope_layer(current) is not None:
                _log.warning(
                    "symfonic.core.tool_offload_gate.evaluate_offload_gate was wrapped again "
                    "after seamscope wrapped it (%r); leaving that wrapper in place, with "
                    "seamscope's beneath it passing every call straight through until an "
                    "agent is instrumented again",
                    current,
                )
            else:
                _log.warning(
                    "symfonic.core.tool_offload_gate.evaluate_offload_gate was replaced after "
                    "seamscope wrapped it (%r); leaving the newer object in place (if it still "
                    "calls seamscope's wrapper, that passes every call straight through)",
                    current,
                )


_GATE_WRAPPERS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every gate wrapper seamscope made (by identity: ``functools.wraps`` copies attributes)."""

_IN_GATE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "seamscope_symfonic_in_gate", default=False
)
"""True while a seamscope gate layer records a call: any layer beneath passes it through."""


def _is_ours(func: Any) -> bool:
    try:
        return func in _GATE_WRAPPERS
    except TypeError:  # unhashable: not a function seamscope made
        return False


def _seamscope_layer(func: Any) -> Any:
    """seamscope's gate wrapper in ``func``'s ``__wrapped__`` chain, if visible."""
    try:
        for _ in range(32):
            if func is None:
                return None
            if _is_ours(func):
                return func
            func = getattr(func, "__wrapped__", None)
    except Exception:
        pass
    return None


def _gate_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def evaluate_offload_gate(inputs: Any) -> Any:
        if _IN_GATE.get():
            return original(inputs)
        active = _ACTIVE.get()
        if active is None or not active.installed():
            return original(inputs)
        token = _IN_GATE.set(True)
        try:
            return active.gate(original, inputs, active.run_id, private.gate_site())
        finally:
            _IN_GATE.reset(token)

    _GATE_WRAPPERS.add(evaluate_offload_gate)
    return evaluate_offload_gate


# --------------------------------------------------------------------------
# symfonic callbacks (async only; never rewrites, never vetoes).
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Hooks:
    """The recorder's entry points that the pieces installed into symfonic call
    (its callback handler, the log handlers): what they may reach of the
    instrumentation, never the instrumentation itself."""

    agent_start: Callable[[Any], None]
    agent_end: Callable[[Any], None]
    node_start: Callable[[Any], None]
    node_error: Callable[[Any], None]
    llm_start: Callable[[Any], None]
    llm_pre_call: Callable[[Any], None]
    llm_end: Callable[[Any], None]
    dispatch: Callable[[Any], None]
    before_tool: Callable[[Any, Any], None]
    tool_result: Callable[[Any], None]
    adopter_dropped: Callable[[str, str], None]
    adopter_dispatch_error: Callable[[BaseException], None]


class _Handler:
    """The callback handler symfonic calls; it only forwards to the instrumentation.

    Not a ``BaseCallbackHandler`` subclass on purpose: symfonic builds an
    optional hook's event only when some handler defines the hook, so this
    defines only the hooks it needs (plus the required ones).
    """

    def __init__(self, hooks: _Hooks) -> None:
        self._hooks = hooks

    def __repr__(self) -> str:
        return "seamscope.adapters.symfonic handler"

    async def on_agent_start(self, event: Any) -> None:
        self._hooks.agent_start(event)

    async def on_agent_end(self, event: Any) -> None:
        self._hooks.agent_end(event)

    async def on_node_start(self, event: Any) -> None:
        self._hooks.node_start(event)

    async def on_node_end(self, event: Any) -> None:
        return None

    async def on_node_error(self, event: Any) -> None:
        self._hooks.node_error(event)

    async def on_llm_start(self, event: Any) -> None:
        self._hooks.llm_start(event)

    async def on_llm_pre_call(self, event: Any) -> None:
        self._hooks.llm_pre_call(event)

    async def on_llm_end(self, event: Any) -> None:
        self._hooks.llm_end(event)

    async def on_token_composition(self, event: Any) -> None:
        return None

    async def on_tool_call_dispatch(self, event: Any, state: Any) -> None:
        self._hooks.dispatch(event)
        return None

    async def on_before_tool_call(self, event: Any, state: Any) -> None:
        self._hooks.before_tool(event, state)
        return None

    async def on_tool_result(self, event: Any) -> None:
        self._hooks.tool_result(event)


class _AdopterDropLog(logging.Handler):
    """Sees symfonic's WARNING when its dispatch palette gate drops an adopter rewrite."""

    def __init__(self, hooks: _Hooks) -> None:
        super().__init__(level=logging.WARNING)
        self._hooks = hooks

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if not str(record.msg).startswith(private.ADOPTER_DROP_PREFIX):
                return
            args = record.args
            if isinstance(args, tuple) and len(args) == 4:
                self._hooks.adopter_dropped(str(args[3]), str(args[0]))
        except Exception:
            pass


class _AdopterDispatchErrorLog(logging.Handler):
    """Sees symfonic's log when an adopter's ``on_tool_call_dispatch`` raised or returned junk.

    symfonic's ``CallbackManager`` skips such a handler (the chain goes on
    with the call as it was) and only logs it, with the exception.
    """

    def __init__(self, hooks: _Hooks, handler: _Handler) -> None:
        super().__init__(level=logging.WARNING)
        self._hooks = hooks
        self._handler = handler

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = str(record.msg)
            if private.DISPATCH_HOOK not in msg:
                return
            args = record.args if isinstance(record.args, tuple) else ()
            if args and args[0] is self._handler:
                return  # never the case: seamscope's handler is contained
            error: BaseException
            if msg.startswith(private.DISPATCH_RAISED):
                raised = record.exc_info[1] if record.exc_info else None
                error = raised if raised is not None else RuntimeError(msg)
            elif msg.startswith(private.DISPATCH_NOT_A_DICT):
                got = args[1] if len(args) > 1 else "?"
                error = TypeError(f"on_tool_call_dispatch returned {got}, expected a dict or None")
            elif msg.startswith(private.DISPATCH_MALFORMED):
                error = TypeError("on_tool_call_dispatch returned a malformed rewrite")
            else:
                return
            self._hooks.adopter_dispatch_error(error)
        except Exception:
            pass


# --------------------------------------------------------------------------
# The instrumentation: the recorder, installed.
# --------------------------------------------------------------------------


class SymfonicInstrumentation(_SeamRecorder):
    """seamscope's hooks installed in one ``SymfonicAgent``; undo with :meth:`uninstrument`.

    Build it with :func:`instrument_symfonic` (building it installs the hooks;
    ``forget`` is called with it, last, when it is uninstrumented). It is
    also a context manager
    (uninstruments on exit). ``ledger`` is the :class:`OffloadLedger` that
    follows the offloads symfonic fires in a conversation.
    """

    def __init__(
        self,
        agent: Any,
        *,
        observer: DecisionObserver,
        tracer_provider: trace.TracerProvider | None,
        agent_name: str | None,
        ledger: OffloadLedger,
        forget: Callable[[SymfonicInstrumentation], None] | None = None,
    ) -> None:
        super().__init__(
            agent,
            observer=observer,
            tracer_provider=tracer_provider,
            agent_name=agent_name,
            ledger=ledger,
        )
        hooks = _Hooks(
            agent_start=self._agent_start,
            agent_end=self._agent_end,
            node_start=self._node_start,
            node_error=self._node_error,
            llm_start=self._llm_start,
            llm_pre_call=self._llm_pre_call,
            llm_end=self._llm_end,
            dispatch=self._dispatch,
            before_tool=self._before_tool,
            tool_result=self._tool_result,
            adopter_dropped=self._adopter_dropped,
            adopter_dispatch_error=self._adopter_dispatch_error,
        )
        self._handler = _Handler(hooks)
        self._log_handler = _AdopterDropLog(hooks)
        self._dispatch_error_log = _AdopterDispatchErrorLog(hooks, self._handler)
        self._restore: list[Callable[[], None]] = []
        self._install()
        if forget is not None:
            # uninstrument() forgets the agent last
            self._restore.insert(0, functools.partial(forget, self))

    # -- public --------------------------------------------------------------

    @property
    def installed(self) -> bool:
        """Whether the hooks are in place."""
        return self._installed

    @contextlib.contextmanager
    def conversation(self, conversation_id: str | None) -> Iterator[None]:
        """Runs started inside carry ``gen_ai.conversation.id`` = ``conversation_id``.

        The block is the conversation for the offload ledger: when the
        outermost block of that id exits, its offloads are settled
        (:meth:`OffloadLedger.end_conversation`) and forgotten here, so a
        later block with the same id starts a new conversation. Without a
        conversation id the ledger is not fed.
        """
        token = self._conversation.set(conversation_id)
        opened = bool(conversation_id) and self._open_conversation(str(conversation_id))
        try:
            yield
        finally:
            self._conversation.reset(token)
            if opened:
                self._close_conversation(str(conversation_id))

    def uninstrument(self) -> None:
        """Put back every object that was replaced; idempotent.

        Each replaced attribute is restored only if it still holds what this
        instrumentation put there (otherwise it is left alone, with a WARNING).
        Spans still open are ended.
        """
        if not self._installed:
            return
        self._installed = False
        while self._restore:
            undo = self._restore.pop()
            try:
                undo()
            except Exception as exc:  # pragma: no cover - defensive
                self._failed("uninstrument", exc)
        self._close_runs()

    def __enter__(self) -> SymfonicInstrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstrument()

    # -- install ---------------------------------------------------------------

    def _install(self) -> None:
        agent = self.agent
        deps = private.agent_deps(agent)
        config = private.agent_config(agent)
        resolver = private.model_resolver(deps)
        if deps is None or config is None or resolver is None:
            raise TypeError(
                "instrument_symfonic expects a SymfonicAgent built by symfonic-core 9.12 "
                "(it has no _deps/_config/_AgentModelResolver)"
            )
        for attr in private.RESOLVER_ATTRIBUTES:
            if not hasattr(resolver, attr):
                raise TypeError(f"unsupported symfonic-core: _AgentModelResolver has no {attr}")
        manager = deps.get(CallbackManager)
        self._snapshot_default = private.resolver_get(resolver, "_snapshot_default")
        try:
            self._install_policies(agent, config, resolver)
            self._install_resolve(resolver)
            self._install_callbacks(deps, manager)
            self._install_log_handler()
            self._install_run(agent)
            _GatePatch.acquire()
            # Released by uninstrument(), or when an instrumented agent that
            # was never uninstrumented is garbage-collected with its hooks.
            self._restore.append(weakref.finalize(self, _GatePatch.release))
        except BaseException:
            self._installed = True
            self.uninstrument()
            raise
        self._installed = True

    def _install_policies(self, agent: Any, config: Any, resolver: Any) -> None:
        cache: dict[tuple[int, int], Any] = {}

        def wrap_all(policies: tuple[Any, ...]) -> tuple[Any, ...]:
            out = []
            for index, policy in enumerate(policies):
                key = (id(policy), index)
                if key not in cache:
                    cache[key] = self._wrap_policy(policy, index) if _wrappable(policy) else policy
                out.append(cache[key])
            return tuple(out)

        post = tuple(getattr(config, "tool_call_policies", ()) or ())
        pre = tuple(private.resolver_get(resolver, "_tool_call_policies") or ())
        self._post_policies = post
        self._pre_policies = pre
        wrapped_post = wrap_all(post)
        wrapped_pre = wrap_all(pre)
        if any(w is not p for w, p in zip(wrapped_post, post, strict=True)):
            new_config = config.model_copy(update={"tool_call_policies": wrapped_post})
            private.set_agent_config(agent, new_config)

            def undo_config() -> None:
                if private.agent_config(agent) is new_config:
                    private.set_agent_config(agent, config)
                else:
                    _log.warning("SymfonicAgent._config was replaced; not restoring it")

            self._restore.append(undo_config)
        original_pre = private.resolver_get(resolver, "_tool_call_policies")
        private.resolver_set(resolver, "_tool_call_policies", wrapped_pre)

        def undo_pre() -> None:
            if private.resolver_get(resolver, "_tool_call_policies") is wrapped_pre:
                private.resolver_set(resolver, "_tool_call_policies", original_pre)
            else:
                _log.warning("_AgentModelResolver._tool_call_policies was replaced; not restoring")

        self._restore.append(undo_pre)

    def _wrap_policy(self, policy: Any, index: int) -> Any:
        fields = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}
        match = policy.match

        @functools.wraps(match)
        def wrapped_match(ctx: Any) -> Any:
            return self._match(match, index, ctx)

        fields["match"] = wrapped_match
        guard = getattr(policy, "guard", None)
        if callable(guard):

            @functools.wraps(guard)
            def wrapped_guard(ctx: Any) -> Any:
                return self._guard(guard, index, ctx)

            fields["guard"] = wrapped_guard
        transform = getattr(policy, "args_transform", None)
        if callable(transform):

            @functools.wraps(transform)
            def wrapped_transform(args: Any, ctx: Any) -> Any:
                return self._transform(transform, index, args, ctx)

            fields["args_transform"] = wrapped_transform
        wrapped = _tapped_class(type(policy))(**fields)
        for field in dataclasses.fields(policy):
            if not field.init:
                object.__setattr__(wrapped, field.name, getattr(policy, field.name))
        object.__setattr__(wrapped, _TAP_ATTR, (self._on_matches_tool, index))
        return wrapped

    def _install_resolve(self, resolver: Any) -> None:
        had_own = "resolve" in vars(resolver)
        previous = vars(resolver).get("resolve")
        original_resolve = resolver.resolve

        @functools.wraps(original_resolve)
        def resolve(ctx: Any) -> Any:
            return self._resolve(original_resolve, ctx)

        resolver.resolve = resolve

        def undo_resolve() -> None:
            if vars(resolver).get("resolve") is not resolve:
                _log.warning("_AgentModelResolver.resolve was replaced; not restoring it")
                return
            if had_own:
                resolver.resolve = previous
            else:
                del resolver.resolve

        self._restore.append(undo_resolve)
        role_resolver = private.resolver_get(resolver, "_resolver")
        if role_resolver is None:
            return

        @functools.wraps(role_resolver)
        def wrapped_resolver(ctx: Any) -> Any:
            return self._role_resolver(role_resolver, ctx)

        private.resolver_set(resolver, "_resolver", wrapped_resolver)

        def undo_resolver() -> None:
            if private.resolver_get(resolver, "_resolver") is wrapped_resolver:
                private.resolver_set(resolver, "_resolver", role_resolver)
            else:
                _log.warning("_AgentModelResolver._resolver was replaced; not restoring it")

        self._restore.append(undo_resolver)

    def _install_callbacks(self, deps: Any, manager: Any) -> None:
        # seamscope's handler first, then the agent's own (public merge: no
        # read of the manager's handler list)
        first = CallbackManager([self._handler])
        ours = first.merge(manager) if isinstance(manager, CallbackManager) else first
        deps.register(CallbackManager, ours)

        def undo_callbacks() -> None:
            if deps.get(CallbackManager) is not ours:
                _log.warning("the agent's CallbackManager was replaced; not restoring it")
                return
            if manager is not None:
                deps.register(CallbackManager, manager)
            else:
                private.unregister(deps, CallbackManager)

        self._restore.append(undo_callbacks)

    def _install_log_handler(self) -> None:
        logger = logging.getLogger(private.REACT_LOGGER)
        logger.addHandler(self._log_handler)
        self._restore.append(lambda: logger.removeHandler(self._log_handler))
        manager_logger = logging.getLogger(private.MANAGER_LOGGER)
        manager_logger.addHandler(self._dispatch_error_log)
        self._restore.append(lambda: manager_logger.removeHandler(self._dispatch_error_log))

    def _install_run(self, agent: Any) -> None:
        had_own = "run" in vars(agent)
        previous = vars(agent).get("run")
        original_run = agent.run

        @functools.wraps(original_run)
        async def run(*args: Any, **kwargs: Any) -> Any:
            return await self._guarded_run(original_run, args, kwargs)

        agent.run = run

        def undo_run() -> None:
            if vars(agent).get("run") is not run:
                _log.warning("SymfonicAgent.run was replaced; not restoring it")
                return
            if had_own:
                agent.run = previous
            else:
                del agent.run

        self._restore.append(undo_run)


def instrument_symfonic(
    agent: Any,
    *,
    agent_name: str | None = None,
    telemetry: Any | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: Any | None = None,
    telemetry_config: TelemetryConfig | None = None,
    observer: DecisionObserver | None = None,
    ledger: OffloadLedger | None = None,
) -> SymfonicInstrumentation:
    """Record a ``SymfonicAgent``'s real decisions as seamscope telemetry.

    ``agent`` is a built ``symfonic.agent.SymfonicAgent`` (symfonic reads
    its policies and resolver at construction, so a bare ``FrameworkConfig``
    cannot be instrumented: build the agent first). ``telemetry`` may be a
    :class:`~seamscope.telemetry.TelemetryHandle` from ``configure()``;
    otherwise the providers passed, or the global API's, are used (never
    set). ``observer`` replaces the :class:`OTelObserver` built from them.

    ``ledger`` follows the offloads symfonic fires in each conversation
    (``inst.conversation(...)``) to their realized savings and costs. By
    default it is an :class:`OffloadLedger` on the same providers, sharing
    the observer's instruments, priced by :func:`symfonic_pricing`.

    Raises TypeError for an object that is not a supported SymfonicAgent
    or a ``ledger`` that is not an OffloadLedger, and RuntimeError if the
    agent is already instrumented.
    """
    check_telemetry_options(
        "instrument_symfonic",
        telemetry=telemetry,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=telemetry_config,
        observer=observer,
        ledger=ledger,
        agent_name=agent_name,
    )
    if telemetry is not None:
        tracer_provider = tracer_provider or telemetry.tracer_provider
        meter_provider = meter_provider or telemetry.meter_provider
        observer = observer or telemetry.observer
    config = private.agent_config(agent)
    if config is None or private.agent_deps(agent) is None:
        raise TypeError(
            f"instrument_symfonic.agent must be a SymfonicAgent, got {type(agent).__name__}"
            " (a FrameworkConfig is read at agent construction: build the agent first)"
        )
    with _AGENTS_LOCK:
        existing = _AGENTS.get(id(agent))
        if existing is not None and existing.installed and existing.agent is agent:
            raise RuntimeError("this SymfonicAgent is already instrumented")
        if observer is None:
            observer = _default_observer(
                tuple(getattr(config, "tool_call_policies", ()) or ()),
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                telemetry_config=telemetry_config,
            )
        if ledger is None:
            ledger = _default_ledger(symfonic_pricing(), observer=guard_observer(observer))
        inst = SymfonicInstrumentation(
            agent,
            observer=observer,
            tracer_provider=tracer_provider,
            agent_name=agent_name,
            ledger=ledger,
            forget=functools.partial(_forget, id(agent)),
        )
        _AGENTS[id(agent)] = inst
    return inst


_AGENTS: weakref.WeakValueDictionary[int, SymfonicInstrumentation] = weakref.WeakValueDictionary()
_AGENTS_LOCK = threading.Lock()


def _forget(key: int, inst: SymfonicInstrumentation) -> None:
    with _AGENTS_LOCK:
        if _AGENTS.get(key) is inst:
            del _AGENTS[key]
