"""Counterexample documents for verification findings.

A finding holds the facts of one combination. This module searches a small
library of connector graphs (evaluated by the real engine) for a deployment
document whose evaluation reaches the same facts at the same step, then
re-runs the decision on it to confirm that it reproduces the finding.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from ..core.decision import Decision
from ..core.errors import InputError
from ..core.evaluate import EvaluationError, Evaluator

__all__ = ["attach_documents", "library"]

EXTERNAL = {"kv_connector": "MyConnector", "kv_role": "kv_both", "kv_connector_module_path": "my_company.kv.connector"}


def _leaves(registered: tuple[str, ...]) -> list[dict[str, Any]]:
    supported = next((n for n in ("NixlConnector",) if n in registered), registered[0] if registered else "X")
    unsupported = next((n for n in ("ExampleConnector",) if n in registered), "X")
    return [
        {"kv_connector": supported, "kv_role": "kv_both"},
        {"kv_connector": unsupported, "kv_role": "kv_both"},
        {"kv_connector": "NoSuchConnector", "kv_role": "kv_both"},
        dict(EXTERNAL),
        {"kv_connector": supported, "kv_role": "kv_both", "kv_connector_module_path": ""},
        {"kv_role": "kv_both"},
        {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"},
        {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"},
        {"kv_connector": "UMBPStoreConnector", "kv_role": "kv_both",
         "kv_connector_module_path": "vllm.distributed.kv_transfer.kv_connector.v1.umbp"},
        {"kv_connector": supported, "kv_role": "kv_both", "engine_id": "child"},
        {"kv_connector": "NoSuchConnector", "kv_role": "kv_both", "engine_id": "child"},
        {"kv_connector": "MultiConnector", "kv_role": "kv_both"},
        {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": []}},
        # An unknown external class before a child that raises: "unsupported, or it raises".
        {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "connectors": [dict(EXTERNAL), {"kv_connector": "NoSuchConnector", "kv_role": "kv_both"}]}},
    ]


def library(registered: tuple[str, ...], containers: frozenset[str],
            module_paths: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any] | None]:
    """Candidate kv_transfer_config values: leaves, every registry entry by
    name and by module path, and containers of 0 to 2 leaves."""
    leaves = _leaves(registered)
    out: list[dict[str, Any] | None] = [None] + [dict(x) for x in leaves]
    out += [{"kv_connector": name, "kv_role": "kv_both"} for name in registered]
    out += [{"kv_connector": cls, "kv_role": "kv_both", "kv_connector_module_path": module} for module, cls in module_paths]
    for container in sorted(containers):
        for size in range(0, 3):
            for children in itertools.product(leaves, repeat=size):
                out.append({"kv_connector": container, "kv_role": "kv_both",
                            "kv_connector_extra_config": {"connectors": [dict(c) for c in children]}})
    return out


def _same_class(atoms: Mapping[str, list], fact: str, a: Any, b: Any) -> bool:
    from .verify import holds
    conditions = atoms.get(fact)
    if not conditions:
        return a == b and type(a) is type(b)
    return all(holds(op, a, operand) == holds(op, b, operand) for op, operand in conditions)


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
    if ruleset == "decision":
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
            doc["speculative_config"] = {"method": method if "\u2039" not in method else "ngram"}
        if witness.get("hisparse_config"):
            doc["hisparse_config"] = {}
        if witness.get("env_allow_chunked_local_attn_with_hybrid_kv_cache") is False:
            env["VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"] = "0"
    if env:
        doc["env"] = env
    return doc


def _step_facts(decision: Decision, ruleset: str, step: str) -> list[tuple[str | None, dict[str, Any]]]:
    return [(s.node, dict(s.facts)) for s in decision.steps if s.ruleset == ruleset and s.step == step]


def _same_facts(facts: Mapping[str, Any], wanted: Mapping[str, Any], atoms: Mapping[str, list]) -> bool:
    return facts.keys() == wanted.keys() and all(
        _same_class(atoms, k, _norm(facts[k]), _norm(wanted[k])) for k in wanted
    )


def _reproduces(decision: Decision, finding: Any, atoms: Mapping[str, list]) -> bool:
    wanted = dict(finding.facts)
    return any(_same_facts(facts, wanted, atoms) for _, facts in _step_facts(decision, finding.ruleset, finding.step))


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def attach_documents(findings: list, evaluator: Evaluator, atoms_by_ruleset: Mapping[str, Mapping[str, list]]) -> list:
    from dataclasses import replace

    model = evaluator.model
    module_paths = tuple(sorted({
        (operand_of(rule, "module_path_value"), operand_of(rule, "name"))
        for rule in model.steps["node"][_class_step(model)].rules
        if operand_of(rule, "module_path_value") and operand_of(rule, "name")
    }))
    candidates = library(model.registered_names, model.containers, module_paths)
    out = []
    for finding in findings:
        if not finding.witness:
            out.append(finding)
            continue
        witness = dict(finding.witness)
        atoms = atoms_by_ruleset[finding.ruleset]
        base = _base_document(finding.ruleset, witness)
        found = None
        pool = candidates if finding.ruleset != "offloading" else [None, {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}]
        # First look for a document reaching exactly these facts, then one
        # reaching facts that no condition tells apart from them.
        exact = {k: () for k in dict(finding.facts)}
        for strict, ktc in itertools.chain(((True, c) for c in pool), ((False, c) for c in pool)):
            use_atoms = exact if strict else atoms
            document = dict(base)
            if ktc is not None:
                document["kv_transfer_config"] = ktc
            try:
                decision = evaluator.decide(_prepare(document))
            except EvaluationError as exc:
                # A gap stops the engine: it reproduces when it names the same step and facts.
                facts = getattr(exc, "facts", None)
                if finding.code == "verify.gap" and getattr(exc, "step", None) == (finding.ruleset, finding.step) \
                        and facts is not None and _same_facts(facts, dict(finding.facts), use_atoms):
                    found = document
                    break
                continue
            except InputError:
                continue
            if _reproduces(decision, finding, use_atoms):
                found = document
                break
        out.append(replace(finding, document=found, reproduced=found is not None))
    return out


def operand_of(rule: Any, fact: str) -> Any:
    """The value ``rule`` requires of ``fact`` by equality, or None."""
    return next((operand for name, op, operand in rule.when if name == fact and op == "eq"), None)


def _class_step(model: Any) -> int:
    """The index of the node step the registry was included in."""
    for index, step in enumerate(model.steps["node"]):
        if any(r.id.startswith("registry.") for r in step.rules):
            return index
    return 0


def _prepare(document: dict[str, Any]) -> dict[str, Any]:
    from ..core.input import prepare
    return prepare(document)
