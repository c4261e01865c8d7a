"""Choosing a store: in code, by URL, by ``SEAMSCOPE_OFFLOAD_STORE``; bad settings
fail at construction naming the class and field, never echoing a password;
and the in-memory store's bound in one process: a dropped output is said
dropped, and settled once, when it is dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from seamscope.adapters import DecisionLayer
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.decisions.records import SettleTrigger
from seamscope.stores import (
    ENV_VAR,
    MemoryStore,
    RedisStore,
    SQLiteStore,
    store_from_env,
    store_from_url,
)

SECRET = "hunter2-s3cret"


def test_each_url_names_its_store(tmp_path: Path) -> None:
    memory = store_from_url("memory://?max_items=3&ttl_seconds=60")
    sqlite = store_from_url(f"sqlite:///{tmp_path}/a.db?ttl_seconds=none&timeout=1")
    redis = store_from_url(f"redis://:{SECRET}@127.0.0.1:1/0?prefix=app:&timeout=0.2")
    assert (MemoryStore, 3, 60.0) == (type(memory), memory.max_items, memory.ttl_seconds)  # type: ignore[attr-defined]
    assert (SQLiteStore, tmp_path / "a.db", None, 1.0) == (
        type(sqlite),
        sqlite.path,  # type: ignore[attr-defined]
        sqlite.ttl_seconds,  # type: ignore[attr-defined]
        sqlite.timeout,  # type: ignore[attr-defined]
    )
    assert RedisStore is type(redis)
    assert SECRET not in repr(redis)
    assert (True, True, False) == (sqlite.shared, redis.shared, memory.shared)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mongodb://x", "unknown scheme 'mongodb'"),
        ("memory://?max_items=0", "MemoryStore.max_items must be an int >= 1"),
        ("memory://?colour=red", "unknown setting 'colour'"),
        ("sqlite://relative.db", "write sqlite:///relative/path.db"),
        (f"redis://:{SECRET}@h:1/0?ttl_seconds=soon", "setting 'ttl_seconds' has a bad value"),
        (f"redis://:{SECRET}@h:1/0?colour=red", "unknown setting 'colour'"),
    ],
)
def test_a_bad_url_fails_at_construction_and_never_shows_the_password(url: str, says: str) -> None:
    with pytest.raises(ValueError) as raised:
        DecisionLayer(default_model="m", tracer_provider=TracerProvider(), offload_store=url)
    message = str(raised.value)
    assert (True, True, False) == (
        message.startswith("DecisionLayer.offload_store: "),
        says in message,
        SECRET in message,
    )


def test_the_environment_chooses_the_store_when_code_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert None is store_from_env({})
    monkeypatch.setenv(ENV_VAR, f"sqlite:///{tmp_path}/env.db")
    layer = DecisionLayer(default_model="m", tracer_provider=TracerProvider())
    assert (SQLiteStore, tmp_path / "env.db") == (
        type(layer.offload_store),
        layer.offload_store.path,  # type: ignore[attr-defined]
    )
    # every adapter honours it (a store given in code wins)
    assert isinstance(SeamscopeMiddleware(layer).kit.outputs.store, SQLiteStore)
    chosen = MemoryStore()
    code = DecisionLayer(default_model="m", tracer_provider=TracerProvider(), offload_store=chosen)
    assert chosen is code.offload_store
    monkeypatch.setenv(ENV_VAR, "bogus://")
    with pytest.raises(ValueError, match=f"DecisionLayer.offload_store: {ENV_VAR}: "):
        DecisionLayer(default_model="m", tracer_provider=TracerProvider())


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda p: MemoryStore(max_items=0), "MemoryStore.max_items"),
        (lambda p: MemoryStore(ttl_seconds=-1), "MemoryStore.ttl_seconds"),
        (lambda p: MemoryStore(clock=5), "MemoryStore.clock"),
        (lambda p: SQLiteStore(p / "missing" / "x.db"), "SQLiteStore.path"),
        (lambda p: SQLiteStore(p / "x.db", timeout=0), "SQLiteStore.timeout"),
        (lambda p: RedisStore("redis://h:1/0", max_items=True), "RedisStore.max_items"),
    ],
)
def test_bad_store_settings_name_the_class_and_field(build: Any, says: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=says.replace(".", r"\.")):
        build(tmp_path)


def test_an_output_dropped_by_the_memory_bound_is_said_dropped_and_settled_once(
    tracer_provider: TracerProvider,
) -> None:
    """One process, more offloads than the bound: the oldest is settled (evicted)
    when the store drops it, a recall says when it went, and the conversation's
    end settles only what is still held."""
    store = MemoryStore(max_items=1)
    ids = iter(("off-1", "off-2"))
    layer = DecisionLayer(
        default_model="claude-opus-4-6",
        tracer_provider=tracer_provider,
        offload_store=store,
        offload_id_factory=lambda: next(ids),
    )
    outputs = Outputs(store)
    with layer.turn("conv-1", [Message("user", "hi")]) as turn:
        for n in (1, 2):
            with turn.iteration() as it:
                it.pre_model()
                with it.chat() as call:
                    call.report(ModelUsage(1_000, 10))
                assert it.offload(ToolCall(f"c{n}", "dump", {}), "z" * 80_000).fire
    (evicted,) = layer.ledger.settlements
    assert ("off-1", SettleTrigger.EVICTED) == (evicted.offload_id, evicted.trigger)
    answer = outputs.answer("conv-1", "r1", "off-1")
    assert answer.startswith("error: the offloaded output 'off-1' was dropped at ")
    assert 80_000 == len(outputs.answer("conv-1", "r2", "off-2"))
    (ended,) = layer.end_conversation("conv-1")
    assert ("off-2", SettleTrigger.CONVERSATION_END) == (ended.offload_id, ended.trigger)
    assert ["off-1", "off-2"] == [s.offload_id for s in layer.ledger.settlements]
