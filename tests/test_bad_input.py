"""Malformed constructions are refused at construction, naming the class and field.

Each row of ``REFUSED`` builds one malformed thing; the test checks the
exception type exactly and that the message names both the class and the
field. The decision core raises ValueError for every malformed construction
(wrong types included); TelemetryConfig raises TypeError for a wrong type and
ValueError for a value out of range. ``ACCEPTED`` lists constructions that
look odd but are valid and documented, each with the documented behaviour.

``ADAPTER_REFUSED`` holds the same kind of rows for the adapters'
DecisionLayer and ReActAgent (a row an adapter does not meet would carry
``adapter_gap``, a strict xfail saying what happens instead; none does).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry import trace

from seamscope.decisions import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    ModelConfig,
    ModelPrice,
    ModelUsage,
    OffloadGate,
    OffloadGateInputs,
    OffloadLedger,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    StageOutcome,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
    evaluate_offload_gate,
)
from seamscope.decisions.records import (
    CarriedStub,
    OffloadReasonCode,
    PricingSource,
    StageOutcomeKind,
)
from seamscope.loop import RECALL_TOOL, DecisionLayer, ReActAgent
from seamscope.telemetry import TelemetryConfig

NAN = float("nan")
INF = float("inf")
OPUS = "claude-opus-4-6"
CATALOG = ToolCatalog([ToolSpec("search"), ToolSpec("deploy", "destructive", 0.5)])


def yes(ctx: Any) -> bool:
    return True


async def async_yes(ctx: Any) -> bool:
    return True


def policy(**kw: Any) -> ToolCallPolicy:
    return ToolCallPolicy(**{"name": "p", "match": yes, "redirect_to": "fetch_data", **kw})


def router(**kw: Any) -> SeamRouter:
    return SeamRouter(**{"default_model": "m", **kw})


def gate_inputs(**kw: Any) -> OffloadGateInputs:
    return OffloadGateInputs(
        **{
            "output_tokens": 20_000,
            "horizon": 5,
            "recall_probability": 0.5,
            "model_name": OPUS,
            **kw,
        }
    )


def overrides(**rates: Any) -> PricingTable:
    return PricingTable({"acme-1": {"input": 1, "output": 2, **rates}})


class Stage:
    """A minimal stage whose attributes a row overrides."""

    def __init__(self, name: Any = "s", protects_forced: Any = True, apply: Any = None) -> None:
        self.name = name
        self.protects_forced = protects_forced
        self.apply = apply if apply is not None else (lambda tools, ctx: None)


async def async_apply(tools: Any, ctx: Any) -> None:
    return None


def layer(**kw: Any) -> DecisionLayer:
    """A valid layer unless ``kw`` breaks it; with a no-op tracer provider unless the row
    gives its own telemetry (so a row that builds a layer to refuse something else is not
    also warned that its spans go nowhere)."""
    own = kw.keys() & {"telemetry", "tracer_provider", "observer"}
    quiet = {} if own else {"tracer_provider": trace.NoOpTracerProvider()}
    return DecisionLayer(**{"default_model": "m", **quiet, **kw})


def agent(**kw: Any) -> ReActAgent:
    args = {"layer": layer(), "chat": lambda request: None, "tools": {}, **kw}
    return ReActAgent(args.pop("layer"), args.pop("chat"), args.pop("tools"), **args)


@dataclass(frozen=True)
class Bad:
    """One malformed construction: what builds it, and the refusal expected."""

    id: str
    build: Callable[[], object]
    error: type[Exception]
    cls: str
    field: str
    adapter_gap: str = ""  # an adapter row known to fail (reported, not fixed here)

    @property
    def pattern(self) -> str:
        """Matches a message naming both the class and the field."""
        return rf"(?s)(?=.*\b{re.escape(self.cls)}\b)(?=.*\b{re.escape(self.field)}\b)"


V, T = ValueError, TypeError

REFUSED: list[Bad] = [
    # -- ToolCallPolicy ---------------------------------------------------------------
    Bad("policy-empty-name", lambda: policy(name=""), V, "ToolCallPolicy", "name"),
    Bad("policy-blank-name", lambda: policy(name="  "), V, "ToolCallPolicy", "name"),
    Bad("policy-int-name", lambda: policy(name=3), V, "ToolCallPolicy", "name"),
    Bad("policy-none-name", lambda: policy(name=None), V, "ToolCallPolicy", "name"),
    Bad("policy-str-match", lambda: policy(match="yes"), V, "ToolCallPolicy", "match"),
    Bad("policy-none-match", lambda: policy(match=None), V, "ToolCallPolicy", "match"),
    Bad("policy-async-match", lambda: policy(match=async_yes), V, "ToolCallPolicy", "match"),
    Bad("policy-str-guard", lambda: policy(guard="g"), V, "ToolCallPolicy", "guard"),
    Bad("policy-async-guard", lambda: policy(guard=async_yes), V, "ToolCallPolicy", "guard"),
    Bad(
        "policy-int-transform",
        lambda: policy(args_transform=5),
        V,
        "ToolCallPolicy",
        "args_transform",
    ),
    Bad("policy-str-model", lambda: policy(model="claude-haiku-4-5"), V, "ToolCallPolicy", "model"),
    Bad(
        "policy-dict-model", lambda: policy(model={"model_name": "m"}), V, "ToolCallPolicy", "model"
    ),
    Bad(
        "policy-empty-redirect", lambda: policy(redirect_to=""), V, "ToolCallPolicy", "redirect_to"
    ),
    Bad(
        "policy-blank-redirect", lambda: policy(redirect_to=" "), V, "ToolCallPolicy", "redirect_to"
    ),
    Bad("policy-int-redirect", lambda: policy(redirect_to=5), V, "ToolCallPolicy", "redirect_to"),
    Bad("policy-no-op", lambda: policy(redirect_to=None), V, "ToolCallPolicy", "redirect_to"),
    Bad(
        "policy-when-without-redirect",
        lambda: policy(redirect_to=None, model=ModelConfig("m"), when_tool="run_block"),
        V,
        "ToolCallPolicy",
        "when_tool",
    ),
    Bad(
        "policy-transform-without-redirect",
        lambda: policy(redirect_to=None, model=ModelConfig("m"), args_transform=dict),
        V,
        "ToolCallPolicy",
        "args_transform",
    ),
    Bad("policy-list-when", lambda: policy(when_tool=["a"]), V, "ToolCallPolicy", "when_tool"),
    Bad("policy-set-when", lambda: policy(when_tool={"a"}), V, "ToolCallPolicy", "when_tool"),
    Bad(
        "policy-empty-frozenset-when",
        lambda: policy(when_tool=frozenset()),
        V,
        "ToolCallPolicy",
        "when_tool",
    ),
    Bad(
        "policy-int-frozenset-when",
        lambda: policy(when_tool=frozenset({1})),
        V,
        "ToolCallPolicy",
        "when_tool",
    ),
    Bad("policy-empty-when", lambda: policy(when_tool=""), V, "ToolCallPolicy", "when_tool"),
    Bad("policy-int-when", lambda: policy(when_tool=5), V, "ToolCallPolicy", "when_tool"),
    # -- ModelConfig ------------------------------------------------------------------
    Bad("model-empty-name", lambda: ModelConfig(""), V, "ModelConfig", "model_name"),
    Bad("model-blank-name", lambda: ModelConfig("   "), V, "ModelConfig", "model_name"),
    Bad("model-none-name", lambda: ModelConfig(None), V, "ModelConfig", "model_name"),
    Bad("model-int-name", lambda: ModelConfig(3), V, "ModelConfig", "model_name"),
    Bad("model-int-provider", lambda: ModelConfig("m", provider=5), V, "ModelConfig", "provider"),
    Bad(
        "model-empty-provider", lambda: ModelConfig("m", provider=""), V, "ModelConfig", "provider"
    ),
    Bad("model-str-parameters", lambda: ModelConfig("m", "ab"), V, "ModelConfig", "parameters"),
    Bad("model-int-parameters", lambda: ModelConfig("m", 5), V, "ModelConfig", "parameters"),
    Bad("model-none-parameters", lambda: ModelConfig("m", None), V, "ModelConfig", "parameters"),
    Bad(
        "model-short-pair",
        lambda: ModelConfig("m", [("temperature",)]),
        V,
        "ModelConfig",
        "parameters",
    ),
    Bad("model-int-key-pair", lambda: ModelConfig("m", [(1, 2)]), V, "ModelConfig", "parameters"),
    Bad("model-int-key-mapping", lambda: ModelConfig("m", {1: 2}), V, "ModelConfig", "parameters"),
    Bad("model-empty-key", lambda: ModelConfig("m", {"": 1}), V, "ModelConfig", "parameters"),
    Bad(
        "model-duplicate-key",
        lambda: ModelConfig("m", [("t", 0.1), ("t", 0.2)]),
        V,
        "ModelConfig",
        "parameters",
    ),
    # -- ModelUsage -------------------------------------------------------------------
    Bad("usage-negative-input", lambda: ModelUsage(-1), V, "ModelUsage", "input_tokens"),
    Bad("usage-str-input", lambda: ModelUsage("5"), V, "ModelUsage", "input_tokens"),
    Bad("usage-bool-input", lambda: ModelUsage(True), V, "ModelUsage", "input_tokens"),
    Bad("usage-float-input", lambda: ModelUsage(1.5), V, "ModelUsage", "input_tokens"),
    Bad("usage-negative-output", lambda: ModelUsage(10, -1), V, "ModelUsage", "output_tokens"),
    Bad(
        "usage-none-cache-read",
        lambda: ModelUsage(10, 1, None),
        V,
        "ModelUsage",
        "cache_read_tokens",
    ),
    Bad(
        "usage-negative-cache-write",
        lambda: ModelUsage(10, 1, 0, -1),
        V,
        "ModelUsage",
        "cache_write_tokens",
    ),
    Bad(
        "usage-cache-exceeds-input",
        lambda: ModelUsage(10, 1, 8, 8),
        V,
        "ModelUsage",
        "cache_read_tokens",
    ),
    # -- ToolSpec ---------------------------------------------------------------------
    Bad("spec-empty-name", lambda: ToolSpec(""), V, "ToolSpec", "name"),
    Bad("spec-none-name", lambda: ToolSpec(None), V, "ToolSpec", "name"),
    Bad("spec-unknown-safety", lambda: ToolSpec("a", "lethal"), V, "ToolSpec", "safety_level"),
    Bad("spec-int-safety", lambda: ToolSpec("a", 3), V, "ToolSpec", "safety_level"),
    Bad("spec-negative-cost", lambda: ToolSpec("a", cost_usd=-1.0), V, "ToolSpec", "cost_usd"),
    Bad("spec-nan-cost", lambda: ToolSpec("a", cost_usd=NAN), V, "ToolSpec", "cost_usd"),
    Bad("spec-inf-cost", lambda: ToolSpec("a", cost_usd=INF), V, "ToolSpec", "cost_usd"),
    Bad(
        "spec-decimal-nan-cost",
        lambda: ToolSpec("a", cost_usd=Decimal("NaN")),
        V,
        "ToolSpec",
        "cost_usd",
    ),
    Bad("spec-str-cost", lambda: ToolSpec("a", cost_usd="0.1"), V, "ToolSpec", "cost_usd"),
    Bad("spec-bool-cost", lambda: ToolSpec("a", cost_usd=True), V, "ToolSpec", "cost_usd"),
    Bad(
        "spec-str-capabilities",
        lambda: ToolSpec("a", required_capabilities="net"),
        V,
        "ToolSpec",
        "required_capabilities",
    ),
    Bad(
        "spec-int-capabilities",
        lambda: ToolSpec("a", required_capabilities=5),
        V,
        "ToolSpec",
        "required_capabilities",
    ),
    Bad(
        "spec-unhashable-capabilities",
        lambda: ToolSpec("a", required_capabilities=[[1]]),
        V,
        "ToolSpec",
        "required_capabilities",
    ),
    Bad(
        "spec-str-categories", lambda: ToolSpec("a", categories="data"), V, "ToolSpec", "categories"
    ),
    Bad("spec-int-category", lambda: ToolSpec("a", categories=[1]), V, "ToolSpec", "categories"),
    Bad("spec-int-categories", lambda: ToolSpec("a", categories=5), V, "ToolSpec", "categories"),
    Bad("spec-str-roles", lambda: ToolSpec("a", roles="admin"), V, "ToolSpec", "roles"),
    Bad(
        "spec-str-keywords",
        lambda: ToolSpec("a", trigger_keywords="find"),
        V,
        "ToolSpec",
        "trigger_keywords",
    ),
    Bad(
        "spec-int-keyword",
        lambda: ToolSpec("a", trigger_keywords=[1]),
        V,
        "ToolSpec",
        "trigger_keywords",
    ),
    Bad(
        "spec-str-visible",
        lambda: ToolSpec("a", agent_visible="no"),
        V,
        "ToolSpec",
        "agent_visible",
    ),
    Bad("spec-int-description", lambda: ToolSpec("a", description=5), V, "ToolSpec", "description"),
    # -- ToolCatalog ------------------------------------------------------------------
    Bad("catalog-int", lambda: ToolCatalog(5), V, "ToolCatalog", "specs"),
    Bad("catalog-str", lambda: ToolCatalog("ab"), V, "ToolCatalog", "specs"),
    Bad("catalog-one-spec", lambda: ToolCatalog(ToolSpec("a")), V, "ToolCatalog", "specs"),
    Bad("catalog-mapping", lambda: ToolCatalog({"a": ToolSpec("a")}), V, "ToolCatalog", "specs"),
    Bad("catalog-str-entry", lambda: ToolCatalog(["a"]), V, "ToolCatalog", "specs"),
    Bad(
        "catalog-duplicate",
        lambda: ToolCatalog([ToolSpec("a"), ToolSpec("a")]),
        V,
        "ToolCatalog",
        "specs",
    ),
    # -- OffloadGateInputs ------------------------------------------------------------
    Bad(
        "inputs-str-output",
        lambda: gate_inputs(output_tokens="20000"),
        V,
        "OffloadGateInputs",
        "output_tokens",
    ),
    Bad(
        "inputs-none-output",
        lambda: gate_inputs(output_tokens=None),
        V,
        "OffloadGateInputs",
        "output_tokens",
    ),
    Bad(
        "inputs-bool-output",
        lambda: gate_inputs(output_tokens=True),
        V,
        "OffloadGateInputs",
        "output_tokens",
    ),
    Bad(
        "inputs-float-horizon", lambda: gate_inputs(horizon=2.5), V, "OffloadGateInputs", "horizon"
    ),
    Bad("inputs-str-horizon", lambda: gate_inputs(horizon="5"), V, "OffloadGateInputs", "horizon"),
    Bad(
        "inputs-bool-horizon", lambda: gate_inputs(horizon=True), V, "OffloadGateInputs", "horizon"
    ),
    Bad(
        "inputs-str-probability",
        lambda: gate_inputs(recall_probability="0.5"),
        V,
        "OffloadGateInputs",
        "recall_probability",
    ),
    Bad(
        "inputs-none-probability",
        lambda: gate_inputs(recall_probability=None),
        V,
        "OffloadGateInputs",
        "recall_probability",
    ),
    Bad(
        "inputs-none-model",
        lambda: gate_inputs(model_name=None),
        V,
        "OffloadGateInputs",
        "model_name",
    ),
    Bad(
        "inputs-int-model", lambda: gate_inputs(model_name=5), V, "OffloadGateInputs", "model_name"
    ),
    Bad(
        "inputs-negative-threshold",
        lambda: gate_inputs(large_offload_threshold_tokens=-1),
        V,
        "OffloadGateInputs",
        "large_offload_threshold_tokens",
    ),
    Bad(
        "inputs-float-threshold",
        lambda: gate_inputs(large_offload_threshold_tokens=1.5),
        V,
        "OffloadGateInputs",
        "large_offload_threshold_tokens",
    ),
    Bad(
        "inputs-negative-stub",
        lambda: gate_inputs(stub_tokens=-100_000),
        V,
        "OffloadGateInputs",
        "stub_tokens",
    ),
    Bad(
        "inputs-bool-stub",
        lambda: gate_inputs(stub_tokens=True),
        V,
        "OffloadGateInputs",
        "stub_tokens",
    ),
    Bad(
        "inputs-negative-recall-input",
        lambda: gate_inputs(recall_input_tokens=-1),
        V,
        "OffloadGateInputs",
        "recall_input_tokens",
    ),
    Bad(
        "inputs-str-recall-output",
        lambda: gate_inputs(recall_output_tokens="250"),
        V,
        "OffloadGateInputs",
        "recall_output_tokens",
    ),
    # -- OffloadGate ------------------------------------------------------------------
    Bad("gate-negative-horizon", lambda: OffloadGate(horizon=-1), V, "OffloadGate", "horizon"),
    Bad("gate-float-horizon", lambda: OffloadGate(horizon=2.5), V, "OffloadGate", "horizon"),
    Bad("gate-bool-horizon", lambda: OffloadGate(horizon=True), V, "OffloadGate", "horizon"),
    Bad(
        "gate-negative-probability",
        lambda: OffloadGate(recall_probability=-0.1),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-probability-above-one",
        lambda: OffloadGate(recall_probability=1.01),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-nan-probability",
        lambda: OffloadGate(recall_probability=NAN),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-inf-probability",
        lambda: OffloadGate(recall_probability=INF),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-str-probability",
        lambda: OffloadGate(recall_probability="0.5"),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-bool-probability",
        lambda: OffloadGate(recall_probability=True),
        V,
        "OffloadGate",
        "recall_probability",
    ),
    Bad(
        "gate-negative-threshold",
        lambda: OffloadGate(large_offload_threshold_tokens=-1),
        V,
        "OffloadGate",
        "large_offload_threshold_tokens",
    ),
    Bad(
        "gate-negative-stub", lambda: OffloadGate(stub_tokens=-80), V, "OffloadGate", "stub_tokens"
    ),
    Bad(
        "gate-float-recall-input",
        lambda: OffloadGate(recall_input_tokens=1.5),
        V,
        "OffloadGate",
        "recall_input_tokens",
    ),
    Bad(
        "gate-none-recall-output",
        lambda: OffloadGate(recall_output_tokens=None),
        V,
        "OffloadGate",
        "recall_output_tokens",
    ),
    Bad(
        "gate-dict-pricing",
        lambda: OffloadGate(pricing={"m": {"input": 1, "output": 1}}),
        V,
        "OffloadGate",
        "pricing",
    ),
    Bad(
        "gate-str-id-factory",
        lambda: OffloadGate(id_factory="uuid"),
        V,
        "OffloadGate",
        "id_factory",
    ),
    Bad(
        "gate-async-id-factory",
        lambda: OffloadGate(id_factory=async_apply),
        V,
        "OffloadGate",
        "id_factory",
    ),
    Bad("gate-str-observer", lambda: OffloadGate(observer="otel"), V, "OffloadGate", "observer"),
    # -- ModelPrice and PricingTable overrides -----------------------------------------
    Bad("price-inf-input", lambda: ModelPrice(INF, 1), V, "ModelPrice", "input_per_mtok"),
    Bad("price-nan-input", lambda: ModelPrice(NAN, 1), V, "ModelPrice", "input_per_mtok"),
    Bad("price-negative-input", lambda: ModelPrice(-1, 1), V, "ModelPrice", "input_per_mtok"),
    Bad("price-text-input", lambda: ModelPrice("cheap", 1), V, "ModelPrice", "input_per_mtok"),
    Bad("price-bool-input", lambda: ModelPrice(True, 1), V, "ModelPrice", "input_per_mtok"),
    Bad("price-none-input", lambda: ModelPrice(None, 1), V, "ModelPrice", "input_per_mtok"),
    Bad(
        "price-decimal-nan-output",
        lambda: ModelPrice(1, Decimal("NaN")),
        V,
        "ModelPrice",
        "output_per_mtok",
    ),
    Bad(
        "price-decimal-snan-output",
        lambda: ModelPrice(1, Decimal("sNaN")),
        V,
        "ModelPrice",
        "output_per_mtok",
    ),
    Bad("price-list-output", lambda: ModelPrice(1, [1]), V, "ModelPrice", "output_per_mtok"),
    Bad(
        "price-negative-cache-read",
        lambda: ModelPrice(1, 1, -1),
        V,
        "ModelPrice",
        "cache_read_per_mtok",
    ),
    Bad(
        "price-inf-text-cache-write",
        lambda: ModelPrice(1, 1, None, "inf"),
        V,
        "ModelPrice",
        "cache_write_per_mtok",
    ),
    Bad("override-inf-input", lambda: overrides(input=INF), V, "PricingTable", "input_per_mtok"),
    Bad("override-nan-input", lambda: overrides(input=NAN), V, "PricingTable", "input_per_mtok"),
    Bad(
        "override-negative-output",
        lambda: overrides(output=-2),
        V,
        "PricingTable",
        "output_per_mtok",
    ),
    Bad(
        "override-text-output",
        lambda: overrides(output="two"),
        V,
        "PricingTable",
        "output_per_mtok",
    ),
    Bad(
        "override-nan-text-output",
        lambda: overrides(output="NaN"),
        V,
        "PricingTable",
        "output_per_mtok",
    ),
    Bad("override-bool-input", lambda: overrides(input=True), V, "PricingTable", "input_per_mtok"),
    Bad("override-none-input", lambda: overrides(input=None), V, "PricingTable", "input_per_mtok"),
    Bad(
        "override-minus-inf-cache-read",
        lambda: overrides(cache_read=-INF),
        V,
        "PricingTable",
        "cache_read_per_mtok",
    ),
    Bad(
        "override-missing-output",
        lambda: PricingTable({"m": {"input": 1}}),
        V,
        "PricingTable",
        "overrides",
    ),
    Bad("override-unknown-key", lambda: overrides(batch=1), V, "PricingTable", "overrides"),
    Bad(
        "override-tuple-price", lambda: PricingTable({"m": (1, 2)}), V, "PricingTable", "overrides"
    ),
    Bad(
        "override-empty-model",
        lambda: PricingTable({"": {"input": 1, "output": 1}}),
        V,
        "PricingTable",
        "overrides",
    ),
    Bad(
        "override-int-model",
        lambda: PricingTable({5: {"input": 1, "output": 1}}),
        V,
        "PricingTable",
        "overrides",
    ),
    Bad(
        "override-list",
        lambda: PricingTable([("m", {"input": 1, "output": 1})]),
        V,
        "PricingTable",
        "overrides",
    ),
    Bad("override-str", lambda: PricingTable("m"), V, "PricingTable", "overrides"),
    Bad(
        "pricing-str-genai-flag",
        lambda: PricingTable(use_genai_prices="no"),
        V,
        "PricingTable",
        "use_genai_prices",
    ),
    # -- OffloadLedger ----------------------------------------------------------------
    Bad("ledger-zero-idle", lambda: OffloadLedger(idle_turns=0), V, "OffloadLedger", "idle_turns"),
    Bad("ledger-str-idle", lambda: OffloadLedger(idle_turns="3"), V, "OffloadLedger", "idle_turns"),
    Bad(
        "ledger-bool-idle", lambda: OffloadLedger(idle_turns=True), V, "OffloadLedger", "idle_turns"
    ),
    Bad(
        "ledger-zero-conversations",
        lambda: OffloadLedger(max_conversations=0),
        V,
        "OffloadLedger",
        "max_conversations",
    ),
    Bad(
        "ledger-float-conversations",
        lambda: OffloadLedger(max_conversations=1.5),
        V,
        "OffloadLedger",
        "max_conversations",
    ),
    Bad(
        "ledger-bool-offloads",
        lambda: OffloadLedger(max_offloads_per_conversation=True),
        V,
        "OffloadLedger",
        "max_offloads_per_conversation",
    ),
    Bad(
        "ledger-dict-pricing",
        lambda: OffloadLedger(pricing={"m": 1}),
        V,
        "OffloadLedger",
        "pricing",
    ),
    Bad("ledger-int-observer", lambda: OffloadLedger(observer=5), V, "OffloadLedger", "observer"),
    Bad(
        "ledger-telemetry-setting",
        lambda: OffloadLedger(label_cap=8),
        T,
        "OffloadLedger",
        "label_cap",
    ),
    # -- SeamRouter -------------------------------------------------------------------
    Bad("router-str-policies", lambda: router(policies="ab"), V, "SeamRouter", "policies"),
    Bad("router-int-policies", lambda: router(policies=5), V, "SeamRouter", "policies"),
    Bad("router-not-a-policy", lambda: router(policies=["p"]), V, "SeamRouter", "policies"),
    Bad(
        "router-duplicate-policy",
        lambda: router(policies=[policy(), policy()]),
        V,
        "SeamRouter",
        "policies",
    ),
    Bad("router-int-default", lambda: router(default_model=3), V, "SeamRouter", "default_model"),
    Bad("router-empty-default", lambda: router(default_model=""), V, "SeamRouter", "default_model"),
    Bad(
        "router-none-default", lambda: router(default_model=None), V, "SeamRouter", "default_model"
    ),
    Bad(
        "router-str-resolver",
        lambda: router(role_model_resolver="claude"),
        V,
        "SeamRouter",
        "role_model_resolver",
    ),
    Bad(
        "router-async-resolver",
        lambda: router(role_model_resolver=async_yes),
        V,
        "SeamRouter",
        "role_model_resolver",
    ),
    Bad(
        "router-int-callback",
        lambda: router(on_tool_call_dispatch=1),
        V,
        "SeamRouter",
        "on_tool_call_dispatch",
    ),
    Bad(
        "router-async-callback",
        lambda: router(on_tool_call_dispatch=async_apply),
        V,
        "SeamRouter",
        "on_tool_call_dispatch",
    ),
    Bad("router-object-observer", lambda: router(observer=object()), V, "SeamRouter", "observer"),
    # -- SelectionPipeline ------------------------------------------------------------
    Bad("pipeline-str-stages", lambda: SelectionPipeline("ab"), V, "SelectionPipeline", "stages"),
    Bad("pipeline-int-stages", lambda: SelectionPipeline(5), V, "SelectionPipeline", "stages"),
    Bad(
        "pipeline-not-a-stage",
        lambda: SelectionPipeline([object()]),
        V,
        "SelectionPipeline",
        "stages",
    ),
    Bad(
        "pipeline-empty-name",
        lambda: SelectionPipeline([Stage(name="")]),
        V,
        "SelectionPipeline",
        "name",
    ),
    Bad(
        "pipeline-int-name",
        lambda: SelectionPipeline([Stage(name=5)]),
        V,
        "SelectionPipeline",
        "name",
    ),
    Bad(
        "pipeline-duplicate",
        lambda: SelectionPipeline([Stage(), Stage()]),
        V,
        "SelectionPipeline",
        "stages",
    ),
    Bad(
        "pipeline-str-protects",
        lambda: SelectionPipeline([Stage(protects_forced="no")]),
        V,
        "SelectionPipeline",
        "protects_forced",
    ),
    Bad(
        "pipeline-apply-not-callable",
        lambda: SelectionPipeline([Stage(apply="x")]),
        V,
        "SelectionPipeline",
        "apply",
    ),
    Bad(
        "pipeline-async-apply",
        lambda: SelectionPipeline([Stage(apply=async_apply)]),
        V,
        "SelectionPipeline",
        "apply",
    ),
    Bad(
        "pipeline-dict-catalog",
        lambda: SelectionPipeline([], catalog={}),
        V,
        "SelectionPipeline",
        "catalog",
    ),
    Bad(
        "pipeline-str-observer",
        lambda: SelectionPipeline([], observer="x"),
        V,
        "SelectionPipeline",
        "observer",
    ),
    # -- AllowlistStage ---------------------------------------------------------------
    Bad(
        "allowlist-str",
        lambda: AllowlistStage(always_include="abc"),
        V,
        "AllowlistStage",
        "always_include",
    ),
    Bad(
        "allowlist-int",
        lambda: AllowlistStage(always_include=5),
        V,
        "AllowlistStage",
        "always_include",
    ),
    Bad(
        "allowlist-int-name",
        lambda: AllowlistStage(always_include=[1]),
        V,
        "AllowlistStage",
        "always_include",
    ),
    Bad(
        "allowlist-str-catalog",
        lambda: AllowlistStage(catalog="search"),
        V,
        "AllowlistStage",
        "catalog",
    ),
    Bad(
        "allowlist-dict-catalog",
        lambda: AllowlistStage(catalog={"a": ToolSpec("a")}),
        V,
        "AllowlistStage",
        "catalog",
    ),
    # -- ForcedChoiceStage ------------------------------------------------------------
    Bad(
        "forced-str-resolver",
        lambda: ForcedChoiceStage(resolver="search"),
        V,
        "ForcedChoiceStage",
        "resolver",
    ),
    Bad(
        "forced-async-resolver",
        lambda: ForcedChoiceStage(resolver=async_yes),
        V,
        "ForcedChoiceStage",
        "resolver",
    ),
    Bad(
        "forced-empty-state-key",
        lambda: ForcedChoiceStage(state_key=""),
        V,
        "ForcedChoiceStage",
        "state_key",
    ),
    Bad(
        "forced-int-state-key",
        lambda: ForcedChoiceStage(state_key=5),
        V,
        "ForcedChoiceStage",
        "state_key",
    ),
    Bad(
        "forced-none-is-tool-message",
        lambda: ForcedChoiceStage(is_tool_message=None),
        V,
        "ForcedChoiceStage",
        "is_tool_message",
    ),
    # -- IntentRoutingStage and IntentVerdict ------------------------------------------
    Bad(
        "intent-str-always",
        lambda: IntentRoutingStage(always_include="abc"),
        V,
        "IntentRoutingStage",
        "always_include",
    ),
    Bad(
        "intent-none-name-always",
        lambda: IntentRoutingStage(always_include=[None]),
        V,
        "IntentRoutingStage",
        "always_include",
    ),
    Bad(
        "intent-int-always",
        lambda: IntentRoutingStage(always_include=5),
        V,
        "IntentRoutingStage",
        "always_include",
    ),
    Bad(
        "intent-str-keywords",
        lambda: IntentRoutingStage(trigger_keywords="abc"),
        V,
        "IntentRoutingStage",
        "trigger_keywords",
    ),
    Bad(
        "intent-pairs-keywords",
        lambda: IntentRoutingStage(trigger_keywords=[("a", ["k"])]),
        V,
        "IntentRoutingStage",
        "trigger_keywords",
    ),
    Bad(
        "intent-str-keyword-list",
        lambda: IntentRoutingStage(trigger_keywords={"a": "find"}),
        V,
        "IntentRoutingStage",
        "trigger_keywords",
    ),
    Bad(
        "intent-int-keyword-list",
        lambda: IntentRoutingStage(trigger_keywords={"a": 5}),
        V,
        "IntentRoutingStage",
        "trigger_keywords",
    ),
    Bad(
        "intent-int-keyword-tool",
        lambda: IntentRoutingStage(trigger_keywords={5: ["k"]}),
        V,
        "IntentRoutingStage",
        "trigger_keywords",
    ),
    Bad(
        "intent-str-verdict",
        lambda: IntentRoutingStage(verdict="knowledge"),
        V,
        "IntentRoutingStage",
        "verdict",
    ),
    Bad(
        "intent-dict-verdict",
        lambda: IntentRoutingStage(verdict={"label": "knowledge"}),
        V,
        "IntentRoutingStage",
        "verdict",
    ),
    Bad(
        "intent-async-verdict",
        lambda: IntentRoutingStage(verdict=async_yes),
        V,
        "IntentRoutingStage",
        "verdict",
    ),
    Bad("verdict-empty-label", lambda: IntentVerdict(""), V, "IntentVerdict", "label"),
    Bad("verdict-int-label", lambda: IntentVerdict(5), V, "IntentVerdict", "label"),
    Bad(
        "verdict-str-keywords",
        lambda: IntentVerdict("action", "search"),
        V,
        "IntentVerdict",
        "matched_tool_keywords",
    ),
    # -- LazyRoutingStage -------------------------------------------------------------
    Bad(
        "lazy-str",
        lambda: LazyRoutingStage(allowed_names="ab"),
        V,
        "LazyRoutingStage",
        "allowed_names",
    ),
    Bad(
        "lazy-int",
        lambda: LazyRoutingStage(allowed_names=5),
        V,
        "LazyRoutingStage",
        "allowed_names",
    ),
    Bad(
        "lazy-int-name",
        lambda: LazyRoutingStage(allowed_names=[1]),
        V,
        "LazyRoutingStage",
        "allowed_names",
    ),
    Bad(
        "lazy-async",
        lambda: LazyRoutingStage(allowed_names=async_yes),
        V,
        "LazyRoutingStage",
        "allowed_names",
    ),
    # -- PolicyStage ------------------------------------------------------------------
    Bad(
        "policy-stage-list-catalog",
        lambda: PolicyStage(catalog=["search"]),
        V,
        "PolicyStage",
        "catalog",
    ),
    Bad(
        "policy-stage-none-catalog", lambda: PolicyStage(catalog=None), V, "PolicyStage", "catalog"
    ),
    Bad(
        "policy-stage-dict-catalog",
        lambda: PolicyStage(catalog={"a": ToolSpec("a")}),
        V,
        "PolicyStage",
        "catalog",
    ),
    Bad(
        "policy-stage-unknown-safety",
        lambda: PolicyStage(catalog=CATALOG, max_safety_level="lethal"),
        V,
        "PolicyStage",
        "max_safety_level",
    ),
    Bad(
        "policy-stage-int-safety",
        lambda: PolicyStage(catalog=CATALOG, max_safety_level=3),
        V,
        "PolicyStage",
        "max_safety_level",
    ),
    Bad(
        "policy-stage-nan-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd=NAN),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-inf-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd=INF),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-negative-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd=-1),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-bool-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd=True),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-str-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd="0.1"),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-decimal-nan-budget",
        lambda: PolicyStage(catalog=CATALOG, budget_usd=Decimal("NaN")),
        V,
        "PolicyStage",
        "budget_usd",
    ),
    Bad(
        "policy-stage-str-unknown-cost",
        lambda: PolicyStage(catalog=CATALOG, include_unknown_cost="no"),
        V,
        "PolicyStage",
        "include_unknown_cost",
    ),
    Bad(
        "policy-stage-str-capabilities",
        lambda: PolicyStage(catalog=CATALOG, available_capabilities="net"),
        V,
        "PolicyStage",
        "available_capabilities",
    ),
    Bad(
        "policy-stage-int-capabilities",
        lambda: PolicyStage(catalog=CATALOG, available_capabilities=5),
        V,
        "PolicyStage",
        "available_capabilities",
    ),
    Bad(
        "policy-stage-int-visible",
        lambda: PolicyStage(catalog=CATALOG, agent_visible_only=1),
        V,
        "PolicyStage",
        "agent_visible_only",
    ),
    Bad(
        "policy-stage-str-categories",
        lambda: PolicyStage(catalog=CATALOG, categories="data"),
        V,
        "PolicyStage",
        "categories",
    ),
    Bad(
        "policy-stage-int-category",
        lambda: PolicyStage(catalog=CATALOG, categories=[1]),
        V,
        "PolicyStage",
        "categories",
    ),
    # -- RolePaletteStage -------------------------------------------------------------
    Bad(
        "role-str-resolver",
        lambda: RolePaletteStage(resolver="analyst"),
        V,
        "RolePaletteStage",
        "resolver",
    ),
    Bad(
        "role-async-resolver",
        lambda: RolePaletteStage(resolver=async_yes),
        V,
        "RolePaletteStage",
        "resolver",
    ),
    Bad("role-none-role", lambda: RolePaletteStage(role=None), V, "RolePaletteStage", "role"),
    Bad("role-int-role", lambda: RolePaletteStage(role=5), V, "RolePaletteStage", "role"),
    # -- StageOutcome -----------------------------------------------------------------
    Bad(
        "outcome-unknown-kind", lambda: StageOutcome("pick", ("a",), "r"), V, "StageOutcome", "kind"
    ),
    Bad("outcome-int-kind", lambda: StageOutcome(5, ("a",), "r"), V, "StageOutcome", "kind"),
    Bad("outcome-select-str", lambda: StageOutcome.select("ab", "r"), V, "StageOutcome", "tools"),
    Bad(
        "outcome-str-tools",
        lambda: StageOutcome(StageOutcomeKind.SELECT, "ab", "r"),
        V,
        "StageOutcome",
        "tools",
    ),
    Bad(
        "outcome-select-none",
        lambda: StageOutcome(StageOutcomeKind.SELECT, None, "r"),
        V,
        "StageOutcome",
        "tools",
    ),
    Bad("outcome-select-int", lambda: StageOutcome.select(5, "r"), V, "StageOutcome", "tools"),
    Bad(
        "outcome-abstain-tools",
        lambda: StageOutcome(StageOutcomeKind.ABSTAIN, ("a",), "r"),
        V,
        "StageOutcome",
        "tools",
    ),
    Bad(
        "outcome-str-degraded",
        lambda: StageOutcome.abstain("r", degraded="yes"),
        V,
        "StageOutcome",
        "degraded",
    ),
    Bad(
        "outcome-empty-forced",
        lambda: StageOutcome.select(("a",), "r", forced_tool=""),
        V,
        "StageOutcome",
        "forced_tool",
    ),
    Bad(
        "outcome-int-forced",
        lambda: StageOutcome.select(("a",), "r", forced_tool=5),
        V,
        "StageOutcome",
        "forced_tool",
    ),
    # -- CarriedStub ------------------------------------------------------------------
    Bad("stub-empty-id", lambda: CarriedStub("", 1000), V, "CarriedStub", "offload_id"),
    Bad("stub-none-id", lambda: CarriedStub(None, 1000), V, "CarriedStub", "offload_id"),
    Bad("stub-nan-size", lambda: CarriedStub("off-1", NAN), V, "CarriedStub", "output_tokens"),
    Bad("stub-negative-size", lambda: CarriedStub("off-1", -1), V, "CarriedStub", "output_tokens"),
    Bad("stub-str-size", lambda: CarriedStub("off-1", "5"), V, "CarriedStub", "output_tokens"),
    Bad(
        "stub-negative-stub", lambda: CarriedStub("off-1", 10, -1), V, "CarriedStub", "stub_tokens"
    ),
    # -- TelemetryConfig, built directly ----------------------------------------------
    Bad(
        "config-str-capture",
        lambda: TelemetryConfig(capture_content="yes"),
        T,
        "TelemetryConfig",
        "capture_content",
    ),
    Bad(
        "config-int-capture",
        lambda: TelemetryConfig(capture_content=1),
        T,
        "TelemetryConfig",
        "capture_content",
    ),
    Bad(
        "config-negative-length",
        lambda: TelemetryConfig(max_attribute_length=-5),
        V,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "config-short-length",
        lambda: TelemetryConfig(max_attribute_length=8),
        V,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "config-str-length",
        lambda: TelemetryConfig(max_attribute_length="64"),
        T,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "config-bool-length",
        lambda: TelemetryConfig(max_attribute_length=True),
        T,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "config-zero-array",
        lambda: TelemetryConfig(max_array_length=0),
        V,
        "TelemetryConfig",
        "max_array_length",
    ),
    Bad(
        "config-float-array",
        lambda: TelemetryConfig(max_array_length=1.5),
        T,
        "TelemetryConfig",
        "max_array_length",
    ),
    Bad(
        "config-zero-cap",
        lambda: TelemetryConfig(metric_label_cap=0),
        V,
        "TelemetryConfig",
        "metric_label_cap",
    ),
    Bad(
        "config-str-cap",
        lambda: TelemetryConfig(metric_label_cap="8"),
        T,
        "TelemetryConfig",
        "metric_label_cap",
    ),
    Bad("config-none-mask", lambda: TelemetryConfig(mask=None), T, "TelemetryConfig", "mask"),
    Bad("config-str-mask", lambda: TelemetryConfig(mask="***"), T, "TelemetryConfig", "mask"),
    Bad(
        "config-str-labels",
        lambda: TelemetryConfig(known_labels="policy-a"),
        T,
        "TelemetryConfig",
        "known_labels",
    ),
    Bad(
        "config-int-label",
        lambda: TelemetryConfig(known_labels=["a", 1]),
        T,
        "TelemetryConfig",
        "known_labels",
    ),
    Bad(
        "config-int-labels",
        lambda: TelemetryConfig(known_labels=5),
        T,
        "TelemetryConfig",
        "known_labels",
    ),
    # -- TelemetryConfig.create -------------------------------------------------------
    Bad(
        "create-str-capture",
        lambda: TelemetryConfig.create(capture_content="yes", environ={}),
        T,
        "TelemetryConfig",
        "capture_content",
    ),
    Bad(
        "create-short-length",
        lambda: TelemetryConfig.create(max_attribute_length=8, environ={}),
        V,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "create-str-length",
        lambda: TelemetryConfig.create(max_attribute_length="64", environ={}),
        T,
        "TelemetryConfig",
        "max_attribute_length",
    ),
    Bad(
        "create-zero-array",
        lambda: TelemetryConfig.create(max_array_length=0, environ={}),
        V,
        "TelemetryConfig",
        "max_array_length",
    ),
    Bad(
        "create-bool-cap",
        lambda: TelemetryConfig.create(metric_label_cap=True, environ={}),
        T,
        "TelemetryConfig",
        "metric_label_cap",
    ),
    Bad(
        "create-str-mask",
        lambda: TelemetryConfig.create(mask="***", environ={}),
        T,
        "TelemetryConfig",
        "mask",
    ),
    Bad(
        "create-str-labels",
        lambda: TelemetryConfig.create(known_labels="policy-a", environ={}),
        T,
        "TelemetryConfig",
        "known_labels",
    ),
    Bad(
        "create-int-label",
        lambda: TelemetryConfig.create(known_labels=[1], environ={}),
        T,
        "TelemetryConfig",
        "known_labels",
    ),
    Bad(
        "create-str-environ",
        lambda: TelemetryConfig.create(environ="SEAMSCOPE=1"),
        T,
        "TelemetryConfig",
        "environ",
    ),
    Bad(
        "create-list-environ",
        lambda: TelemetryConfig.create(environ=[("A", "1")]),
        T,
        "TelemetryConfig",
        "environ",
    ),
]

# Constructions of the adapters' DecisionLayer and ReActAgent. A row whose
# refusal does not (yet) name the adapter's class and field carries the gap.
ADAPTER_REFUSED: list[Bad] = [
    Bad("layer-int-default", lambda: layer(default_model=3), V, "DecisionLayer", "default_model"),
    Bad(
        "layer-empty-default", lambda: layer(default_model=""), V, "DecisionLayer", "default_model"
    ),
    Bad("layer-str-policies", lambda: layer(policies="ab"), V, "DecisionLayer", "policies"),
    Bad(
        "layer-str-resolver",
        lambda: layer(role_model_resolver="claude"),
        V,
        "DecisionLayer",
        "role_model_resolver",
    ),
    Bad(
        "layer-int-callback",
        lambda: layer(on_tool_call_dispatch=1),
        V,
        "DecisionLayer",
        "on_tool_call_dispatch",
    ),
    Bad("layer-str-stages", lambda: layer(stages="ab"), V, "DecisionLayer", "stages"),
    Bad("layer-str-catalog", lambda: layer(catalog="search"), V, "DecisionLayer", "catalog"),
    Bad("layer-negative-horizon", lambda: layer(horizon=-1), V, "DecisionLayer", "horizon"),
    Bad(
        "layer-nan-probability",
        lambda: layer(recall_probability=NAN),
        V,
        "DecisionLayer",
        "recall_probability",
    ),
    Bad(
        "layer-negative-threshold",
        lambda: layer(offload_threshold_tokens=-1),
        V,
        "DecisionLayer",
        "offload_threshold_tokens",
    ),
    Bad("layer-dict-pricing", lambda: layer(pricing={}), V, "DecisionLayer", "pricing"),
    Bad(
        "layer-str-id-factory",
        lambda: layer(offload_id_factory="uuid"),
        V,
        "DecisionLayer",
        "offload_id_factory",
    ),
    Bad("layer-str-observer", lambda: layer(observer="otel"), V, "DecisionLayer", "observer"),
    Bad("layer-int-agent-name", lambda: layer(agent_name=5), V, "DecisionLayer", "agent_name"),
    Bad(
        "layer-int-provider-name",
        lambda: layer(provider_name=5),
        V,
        "DecisionLayer",
        "provider_name",
    ),
    Bad("layer-str-telemetry", lambda: layer(telemetry="x"), T, "DecisionLayer", "telemetry"),
    Bad(
        "layer-dict-telemetry-config",
        lambda: layer(telemetry_config={}),
        T,
        "DecisionLayer",
        "telemetry_config",
    ),
    Bad("layer-str-ledger", lambda: layer(ledger="x"), T, "DecisionLayer", "ledger"),
    Bad(
        "layer-str-reuse-selection",
        lambda: layer(reuse_selection="yes"),
        V,
        "DecisionLayer",
        "reuse_selection",
    ),
    Bad(
        "layer-unknown-store-url",
        lambda: layer(offload_store="mongodb://x"),
        V,
        "DecisionLayer",
        "offload_store",
    ),
    Bad("layer-int-store", lambda: layer(offload_store=3), V, "DecisionLayer", "offload_store"),
    Bad(
        "layer-bad-store-setting",
        lambda: layer(offload_store="memory://?max_items=0"),
        V,
        "DecisionLayer",
        "offload_store",
    ),
    Bad("agent-str-layer", lambda: agent(layer="x"), V, "ReActAgent", "layer"),
    Bad("agent-str-chat", lambda: agent(chat="x"), V, "ReActAgent", "chat"),
    Bad("agent-str-tools", lambda: agent(tools="ab"), V, "ReActAgent", "tools"),
    Bad("agent-int-tool", lambda: agent(tools={"search": 1}), V, "ReActAgent", "tools"),
    Bad(
        "agent-reserved-tool",
        lambda: agent(tools={RECALL_TOOL: lambda args: ""}),
        V,
        "ReActAgent",
        "tools",
    ),
    Bad(
        "agent-zero-iterations", lambda: agent(max_iterations=0), V, "ReActAgent", "max_iterations"
    ),
    Bad(
        "agent-bool-iterations",
        lambda: agent(max_iterations=True),
        V,
        "ReActAgent",
        "max_iterations",
    ),
    Bad(
        "agent-negative-stored",
        lambda: agent(max_stored_outputs=-1),
        V,
        "ReActAgent",
        "max_stored_outputs",
    ),
    Bad("agent-str-offload", lambda: agent(offload="no"), V, "ReActAgent", "offload"),
]


def _params(rows: list[Bad]) -> list[Any]:
    return [
        pytest.param(
            row,
            id=row.id,
            marks=[pytest.mark.xfail(strict=True, reason=row.adapter_gap)]
            if row.adapter_gap
            else [],
        )
        for row in rows
    ]


@pytest.mark.parametrize("row", _params(REFUSED + ADAPTER_REFUSED))
def test_a_malformed_construction_is_refused_naming_the_class_and_field(row: Bad) -> None:
    with pytest.raises(row.error) as raised:
        row.build()
    message = str(raised.value)
    assert (row.error, True) == (type(raised.value), bool(re.search(row.pattern, message))), message


def test_the_table_is_large_and_covers_every_component() -> None:
    covered = {row.cls for row in REFUSED}
    assert (True, set()) == (
        len(REFUSED) >= 150,
        {
            "ToolCallPolicy",
            "ModelConfig",
            "ToolSpec",
            "ToolCatalog",
            "OffloadGateInputs",
            "OffloadGate",
            "PricingTable",
            "ModelPrice",
            "OffloadLedger",
            "SeamRouter",
            "SelectionPipeline",
            "AllowlistStage",
            "ForcedChoiceStage",
            "IntentRoutingStage",
            "LazyRoutingStage",
            "PolicyStage",
            "RolePaletteStage",
            "TelemetryConfig",
            "ModelUsage",
            "StageOutcome",
        }
        - covered,
    )


def test_row_ids_are_unique() -> None:
    ids = [row.id for row in REFUSED + ADAPTER_REFUSED]
    assert [] == sorted({i for i in ids if ids.count(i) > 1})


# -- valid and documented ----------------------------------------------------------------


@dataclass(frozen=True)
class Valid:
    """An odd-looking construction that is valid and documented, with what it does."""

    id: str
    check: Callable[[], tuple[object, object]]  # (expected, actual)


def _knowledge_turn(stage: IntentRoutingStage) -> tuple[str, ...]:
    outcome = stage.decide(("a", "b"), IntentVerdict("knowledge"))
    return () if outcome.tools is None else tuple(outcome.tools)


ACCEPTED: list[Valid] = [
    Valid(
        "inputs-negative-horizon-clamps",
        lambda: (0, evaluate_offload_gate(gate_inputs(horizon=-3)).horizon),
    ),
    Valid(
        "inputs-probability-above-one-clamps",
        lambda: (
            1.0,
            evaluate_offload_gate(gate_inputs(recall_probability=1.7)).recall_probability,
        ),
    ),
    Valid(
        "inputs-nan-probability-is-certain-recall",
        lambda: (
            1.0,
            evaluate_offload_gate(gate_inputs(recall_probability=NAN)).recall_probability,
        ),
    ),
    Valid(
        "inputs-nan-output-never-fires",
        lambda: (
            (False, OffloadReasonCode.BELOW_THRESHOLD),
            (lambda d: (d.fire, d.reason_code))(
                evaluate_offload_gate(gate_inputs(output_tokens=NAN))
            ),
        ),
    ),
    Valid(
        "inputs-negative-output-never-fires",
        lambda: (False, evaluate_offload_gate(gate_inputs(output_tokens=-5)).fire),
    ),
    Valid(
        "inputs-empty-model-is-unpriced",
        lambda: (
            OffloadReasonCode.UNPRICED_MODEL,
            evaluate_offload_gate(gate_inputs(model_name="")).reason_code,
        ),
    ),
    Valid(
        "gate-edge-priors",
        lambda: (
            (0, 1.0),
            (lambda g: (g.horizon, g.recall_probability))(
                OffloadGate(horizon=0, recall_probability=1)
            ),
        ),
    ),
    Valid(
        "allowlist-skips-empty-names",
        lambda: (
            StageOutcome.abstain("no mandated tools"),
            AllowlistStage(always_include=["", ""]).apply((), _ctx()),
        ),
    ),
    Valid(
        "intent-skips-empty-always-include",
        lambda: (("a",), _knowledge_turn(IntentRoutingStage(always_include=["", "a"]))),
    ),
    Valid(
        "model-config-unhashable-parameter-values",
        lambda: ({"stop": ["\n"]}, ModelConfig("m", {"stop": ["\n"]}).params),
    ),
    Valid("outcome-reason-stored-as-str", lambda: ("404", StageOutcome.abstain(404).reason)),  # type: ignore[arg-type]
    Valid(
        "outcome-kind-given-as-its-value",
        lambda: (StageOutcomeKind.SELECT, StageOutcome("select", ("a",), "r").kind),
    ),
    Valid(
        "spec-decimal-cost",
        lambda: (Decimal("0.01"), ToolSpec("a", cost_usd=Decimal("0.01")).cost_usd),
    ),
    Valid("spec-zero-cost", lambda: (0, ToolSpec("a", cost_usd=0).cost_usd)),
    Valid("spec-safety-level-value", lambda: ("write", ToolSpec("a", "write").safety_level.value)),
    Valid(
        "policy-stage-zero-budget",
        lambda: (
            ("search",),
            PolicyStage(catalog=CATALOG, budget_usd=0).apply(("search", "deploy"), _ctx()).tools,
        ),
    ),
    Valid("price-numeric-text", lambda: (Decimal("0.3"), ModelPrice("0.3", 1).input_per_mtok)),
    Valid("price-free-model", lambda: (Decimal(0), ModelPrice(0, 0).output_rate)),
    Valid(
        "override-text-rates",
        lambda: (
            PricingSource.OVERRIDE,
            PricingTable({"acme-1": {"input": "1.5", "output": 2}}).lookup("acme-1").source,
        ),
    ),  # type: ignore[union-attr]
    Valid(
        "policy-same-tool-args-rewrite",
        lambda: (
            "run_block",
            policy(
                when_tool="run_block", redirect_to="run_block", args_transform=lambda a, c: a
            ).redirect_to,
        ),
    ),
    Valid("router-partial-observer", lambda: ((), router(observer=_PartialObserver()).policies)),
    Valid(
        "config-labels-from-a-list",
        lambda: (frozenset({"a"}), TelemetryConfig(known_labels=["a"]).known_labels),
    ),
    Valid(
        "create-bad-environment-value-falls-back",
        lambda: (
            1024,
            TelemetryConfig.create(
                environ={"SEAMSCOPE_MAX_ATTRIBUTE_LENGTH": "lots"}
            ).max_attribute_length,
        ),
    ),
    Valid(
        "role-empty-role-uses-the-context",
        lambda: (
            StageOutcome.abstain("no palette for role ''"),
            RolePaletteStage(resolver=lambda role: None).apply(("a",), _ctx()),
        ),
    ),
    Valid("stub-zero-size", lambda: (0, CarriedStub("off-1", 0).output_tokens)),
]


class _PartialObserver:
    """An observer with one hook: the others are no-ops."""

    def end_stage(self, handle: object, record: object) -> None:
        pass


def _ctx() -> SelectionContext:
    return SelectionContext()


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in ACCEPTED])
def test_a_valid_documented_construction_is_accepted(row: Valid) -> None:
    expected, actual = row.check()
    assert expected == actual
