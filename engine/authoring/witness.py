"""Counterexample documents for verification findings.

A finding holds one step input (as the step table keys it). This module
decides a small library of deployment documents with the real engine and
looks for one whose evaluation reaches that input at that step. The library
is made from the policy itself: every connector its registry declares (by
name and by module path), the names its rules compare, and a name and a
module path that nothing declares; containers hold none, one or two of a
few of those leaves.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any, Mapping

from ..core.errors import EvaluationError, InputError
from ..core.policy import Policy
from ..core.model import PolicyModel, Rule
from ..core.table import OTHER

__all__ = ["attach_documents", "library"]


def _operand(rule: Rule, fact: str) -> Any:
    """The value ``rule`` requires of ``fact`` by equality, or None."""
    return next((operand for name, op, operand in rule.when if name == fact and op == "eq"), None)


def _unused(taken: set[str], stem: str) -> str:
    name = stem
    while name in taken:
        name += "X"
    return name


def _leaves(model: PolicyModel) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every single connector the policy tells apart (first), and a few of them
    to fill containers with (second)."""
    registry = [r for step in model.steps["node"] for r in step.rules if r.id.startswith("registry.")]
    by_name = [r for r in registry if _operand(r, "resolution") == "registry"]
    by_module = [r for r in registry if _operand(r, "resolution") == "module"]
    names = {str(_operand(r, "name")) for r in registry} | set(model.registered_names)
    literals = {operand for steps in model.steps.values() for step in steps for rule in step.rules
                for fact, op, operand in rule.when if fact in ("name", "top_name", "configured_top_name")
                or (fact == "configured_child_names" and op == "contains")}
    unknown = _unused(names | set(model.containers), "UnregisteredConnector")
    external = {"kv_connector": _unused(names, "ExternalConnector"), "kv_connector_module_path": "external_package.kv"}
    supported = next((str(_operand(r, "name")) for r in by_name if r.value == "supported" and len(r.when) == 2), None)
    unsupported = next((str(_operand(r, "name")) for r in by_name if r.value == "unsupported" and len(r.when) == 2), None)

    def leaf(name: str | None, **more: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"kv_role": "kv_both", **more}
        if name is not None:
            out["kv_connector"] = name
        return out

    fill = [leaf(n) for n in (supported, unsupported) if n] + [leaf(unknown), leaf(None, **external)]
    every = fill + [
        leaf(supported or unknown, kv_connector_module_path=""),
        leaf(None),
        leaf(supported or unknown, engine_id="child"),
        leaf(unknown, engine_id="child"),
        *(leaf(str(n)) for n in sorted({*model.registered_names, *(v for v in literals if isinstance(v, str))})),
        *(leaf(str(_operand(r, "name")), kv_connector_module_path=_operand(r, "module_path_value")) for r in by_module),
        *(leaf(n, kv_connector_module_path=module) for n in sorted({unknown, *model.registered_names,
                                                                     *(v for v in literals if isinstance(v, str))})
          for module in _module_misses(model, n)),
    ]
    # An unknown external class before a child that raises: "unsupported, or it raises".
    for container in sorted(model.containers):
        fill.append(leaf(container, kv_connector_extra_config={"connectors": [leaf(None, **external), leaf(unknown)]}))
    return every, fill


def _module_misses(model: PolicyModel, name: str) -> list[str]:
    """Module paths for which the release's module table answers `missing`,
    and then `no` for ``name``: a module under its prefix it does not hold,
    and the first module that surely does not bind the name (none without a
    table)."""
    table = model.modules
    if table is None:
        return []
    out: list[str | None] = [_unused(set(table.modules), table.prefix + ".no_such_module")]
    out += [next((m for m, bound in sorted(table.modules.items())
                  if not bound.open and name not in bound.names | bound.maybe), None)] if name else []
    return [m for m in out if m is not None]


def library(model: PolicyModel) -> list[dict[str, Any] | None]:
    """Candidate kv_transfer_config values: no connector, every leaf, and each
    container holding nothing, an empty list, or one or two filling leaves."""
    every, fill = _leaves(model)
    out: list[dict[str, Any] | None] = [None, *every]
    for container in sorted(model.containers):
        out.append({"kv_connector": container, "kv_role": "kv_both"})
        for size in range(0, 3):
            for children in itertools.product(fill, repeat=size):
                out.append({"kv_connector": container, "kv_role": "kv_both",
                            "kv_connector_extra_config": {"connectors": [dict(c) for c in children]}})
    return out


def _base_document(ruleset: str, witness: Mapping[str, Any]) -> dict[str, Any]:
    """The document fields that map one to one from input facts."""
    doc: dict[str, Any] = {}
    env: dict[str, str] = {}
    if ruleset == "offloading":
        if witness.get("kv_offloading_size_set"):
            doc["kv_offloading_size"] = 4
        if "kv_offloading_backend" in witness:
            doc["kv_offloading_backend"] = witness["kv_offloading_backend"]
    if witness.get("env_use_simple_kv_offload"):
        env["VLLM_USE_SIMPLE_KV_OFFLOAD"] = "1"
    if witness.get("env_lmcache_use_upstream_mp"):
        env["LMCACHE_USE_UPSTREAM_MP"] = "1"
    if ruleset in ("decision", "result"):
        preference = witness.get("preference", "none")
        doc["disable_hybrid_kv_cache_manager"] = {"none": None, "enable": False, "disable": True}[preference]
        platform = {}
        if "platform_supports_hybrid_kv_cache" in witness:
            platform["supports_hybrid_kv_cache"] = witness["platform_supports_hybrid_kv_cache"]
        if "platform_is_cuda" in witness:
            platform["is_cuda"] = witness["platform_is_cuda"]
        if platform:
            doc["platform"] = platform
        model: dict[str, Any] = {}
        if witness.get("chunked_local_attention"):
            model["attention_chunk_size"] = 8192
        kinds = [k for k, f in (("full_attention", "layer_full_attention"), ("sliding_window", "layer_sliding_window"),
                                ("chunked_local", "layer_chunked_local"), ("mamba", "layer_mamba")) if witness.get(f)]
        if kinds:
            model["layer_kinds"] = kinds
        if model:
            doc["model"] = model
        method = witness.get("speculative_method")
        if method:
            doc["speculative_config"] = {"method": method if not method.startswith(OTHER) else "ngram"}
        if witness.get("hisparse_config"):
            doc["hisparse_config"] = {}
        if witness.get("env_allow_chunked_local_attn_with_hybrid_kv_cache") is False:
            env["VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"] = "0"
    if env:
        doc["env"] = env
    return doc


def _reached(policy: Policy, document: dict[str, Any]) -> tuple[frozenset[tuple], tuple | None]:
    """Every (ruleset, step, input) that deciding ``document`` reaches, as the
    step table keys inputs, and the one a gap stopped at (None: no gap)."""
    keys = policy.table.keys
    try:
        decision = policy.decide(document)
    except EvaluationError as exc:  # a gap stops the engine: it names the step and its facts
        gap = None
        if exc.step is not None and exc.facts is not None and exc.step in keys:
            gap = (*exc.step, keys[exc.step](exc.facts))
        return frozenset(), gap
    except InputError:
        return frozenset(), None
    reached: set[tuple] = set()
    for visit in decision.trail:
        facts = dict(visit.facts)  # a run's facts, read by each of its steps
        reached.update((visit.ruleset, step, keys[(visit.ruleset, step)](facts)) for step, _, _ in visit.steps)
    return frozenset(reached), None


class _Decided:
    """The library's documents decided so far over one base document, in
    library order, indexed by what they reach: the first that reaches each
    step input, and the first a gap stopped at each. So a finding is looked
    up, not compared with every document (a large registry makes thousands of
    findings and thousands of library documents)."""

    def __init__(self) -> None:
        self.count = 0
        self.first_reaching: dict[tuple, int] = {}
        self.first_gap: dict[tuple, int] = {}

    def add(self, reached: tuple[frozenset[tuple], tuple | None]) -> None:
        trail, gap = reached
        for at in trail:
            self.first_reaching.setdefault(at, self.count)
        if gap is not None:
            self.first_gap.setdefault(gap, self.count)
        self.count += 1

    def first(self, finding: Any) -> int | None:
        """The first document decided so far that reaches the finding's input at its step."""
        at = (finding.ruleset, finding.step, finding.key)
        found = [self.first_reaching.get(at)]
        if finding.code == "verify.gap":
            found.append(self.first_gap.get(at))
        return min((index for index in found if index is not None), default=None)


def attach_documents(findings: list, policy: Policy) -> list:
    """Each finding with a witness, with a document that reproduces it (or
    ``reproduced=False`` where none of the library's documents does): the
    first of the library, in order, whose decision reaches its input. Each
    document is decided once, whatever the number of findings it is tried for."""
    candidates = library(policy.model)
    decided: dict[str, _Decided] = {}  # per base document

    def document(base: dict[str, Any], index: int) -> dict[str, Any]:
        out = dict(base)
        if candidates[index] is not None:
            out["kv_transfer_config"] = candidates[index]
        return out

    out = []
    for finding in findings:
        if not finding.witness:
            out.append(finding)
            continue
        base = _base_document(finding.ruleset, dict(finding.witness))
        tried = decided.setdefault(json.dumps(base, sort_keys=True), _Decided())
        index = tried.first(finding)
        while index is None and tried.count < len(candidates):
            tried.add(_reached(policy, document(base, tried.count)))
            index = tried.first(finding)
        found = document(base, index) if index is not None else None
        out.append(replace(finding, document=found, reproduced=found is not None))
    return out
