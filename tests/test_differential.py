"""Differential testing: the engine against an independent model of vLLM 0.33.0.

tests/reference_model.py transcribes vLLM 0.33.0's decision from the
reference in plain Python (it imports nothing from hma_policy). Random
documents from tests/strategies.py (connector graphs up to 6 levels and 60
nodes, every registered name, unknown names, external classes, every flag)
must get the same outcome, hma_enabled, first error (stage, code, JSON
Pointer), vLLM warnings and capability_unknown nodes from both.

CI runs a few thousand documents; the million-document run is

    python benchmarks/differential.py            # -n 1000000 by default

The model is itself checked first: it must reproduce every conformance case
(observations of vLLM 0.33.0's real code), so a disagreement points at the
engine, or at a reading of the reference that the report then names.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import hma_policy

import reference_model
from compare import FIELDS, expected, observe
from strategies import documents

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "conformance" / "cases.json").read_text(encoding="utf-8"))
TOP = "/kv_transfer_config"
V1 = reference_model.V1


@pytest.fixture(scope="module")
def memo_policy():
    policy = hma_policy.load_policy(None, memo=True)
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def plain_policy():
    policy = hma_policy.load_policy(None, memo=False)
    yield policy
    policy.close()


def assert_agree(policy, document) -> None:
    pristine = copy.deepcopy(document)
    engine = observe(policy, document)
    assert document == pristine, "decide() changed the caller's document"
    model = expected(pristine)
    if engine != model:
        diff = {f: {"engine": a, "model": b} for f, a, b in zip(FIELDS, engine, model) if a != b}
        pytest.fail(f"engine and reference model disagree on {json.dumps(pristine, ensure_ascii=False)}: {diff!r}")


# ---------------------------------------------------------------------------
# The model is checked against vLLM's own behaviour first
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_model_reproduces_the_conformance_case(case):
    e = reference_model.expect(case["input"])
    x = case["expect"]
    error = (e.error[0], e.error[1]) if e.error else None
    assert (e.outcome, e.hma_enabled, error, list(e.vllm_warnings)) == (
        x["outcome"], x["hma_enabled"], (x["error"]["stage"], x["error"]["code"]) if x["error"] else None,
        sorted(x["warnings"]),
    ), case["description"]


def test_reference_model_imports_nothing_from_the_engine():
    # Independence: the model shares no code with engine/ (only the standard library).
    tree = ast.parse((HERE / "reference_model.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "json", "dataclasses", "typing"}, imported


# ---------------------------------------------------------------------------
# Random documents
# ---------------------------------------------------------------------------


@settings(max_examples=12000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents())
def test_engine_agrees_with_reference_model(memo_policy, document):
    assert_agree(memo_policy, document)


@settings(max_examples=800, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents(max_nodes=12, max_depth=3))
def test_engine_agrees_with_reference_model_without_memo(plain_policy, document):
    # memo=False: every step of every node goes through durable-rules.
    assert_agree(plain_policy, document)


# ---------------------------------------------------------------------------
# The disagreements random documents found, one minimal document each. Each
# names the reference section the engine misreads.
# ---------------------------------------------------------------------------


def C(name, role="kv_both", **extra):
    return {"kv_connector": name, "kv_role": role, **extra}


def M(*children, **extra):
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": list(children)}, **extra}


ACME = C("AcmeConnector", kv_connector_module_path="acme.kv.connector")

# An undeclared external class leaves a MultiConnector's answer open; a later
# child that fails to build makes it "unsupported, or it raises" (node support
# `unsupported_or_error`), and an error that start-up raises whichever way the
# class answers is still certain.


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"kv_transfer_config": C("HiSparseConnector"), "kv_offloading_size": 1,
                      "platform": {"is_cuda": False}}, id="top-non-cuda"),
        pytest.param({"kv_transfer_config": C("HiSparseConnector"), "kv_offloading_size": 1,
                      "disable_hybrid_kv_cache_manager": True}, id="top-explicit-disable"),
        pytest.param({"kv_transfer_config": M(C("HiSparseConnector")), "kv_offloading_size": 1,
                      "platform": {"is_cuda": False}}, id="child-non-cuda"),
    ],
)
def test_hisparse_is_configured_before_the_offloading_shorthand(memo_policy, document):
    # Reference §5: HiSparse auto-configuration (step 2, has_connector on the
    # configured connector) runs before _post_init_kv_transfer_config (step 4)
    # overwrites kv_connector; the auto-created hisparse_config stays.
    assert_agree(memo_policy, document)
    assert expected(document)[0] == "error"


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"kv_transfer_config": M(ACME, C("NoSuchConnector"), C("ExampleConnector"))},
                     id="unknown-then-unknown-name-then-unsupported"),
        pytest.param({"kv_transfer_config": M(ACME, C("NoSuchConnector"))}, id="unknown-then-unknown-name"),
        pytest.param({"kv_transfer_config": M(ACME, {"kv_role": "kv_both"})}, id="unknown-then-name-missing"),
        pytest.param({"kv_transfer_config": M(ACME, C("NoSuchConnector"), C("ExampleConnector")),
                      "disable_hybrid_kv_cache_manager": False}, id="explicit-enable"),
        pytest.param({"kv_transfer_config": M(ACME, C("NixlConnector")), "hisparse_config": {},
                      "platform": {"supports_hybrid_kv_cache": True}}, id="unknown-then-hisparse"),
        # The nested MultiConnector is "unsupported, or it raises": its
        # unsupported sibling cannot settle the answer, since vLLM may raise first.
        # vLLM runs the helper even when a runtime blocker already turns HMA off.
        pytest.param({"kv_transfer_config": M(ACME, C("NoSuchConnector")), "platform": {"supports_hybrid_kv_cache": False}},
                     id="unknown-then-unknown-name-on-a-platform-without-hma"),
        pytest.param({"kv_transfer_config": M(M(ACME, C("NoSuchConnector")), C("ExampleConnector"))},
                     id="nested-unknown-then-unknown-name-then-unsupported-sibling"),
        pytest.param({"kv_transfer_config": M(M(ACME, C("NixlPushConnector", kv_connector_module_path="")),
                                              C("LMCacheConnectorV1"))},
                     id="nested-unknown-then-empty-module-path-then-unsupported-sibling"),
    ],
)
def test_an_unknown_child_before_a_failing_one_leaves_the_first_error_unknown(memo_policy, document):
    # Reference §4: all_children_support_hma stops at the first child without
    # support. If the external child supports HMA, vLLM goes on and raises on
    # the next child during VllmConfig (stage config); if it does not, HMA is
    # turned off and the same child fails later, or not at all. Which error
    # vLLM raises first depends on the unknown class: undetermined.
    assert_agree(memo_policy, document)
    assert expected(document)[0] == "undetermined"


@pytest.mark.parametrize(
    "ktc, code",
    [
        pytest.param(C("MultiConnector", kv_connector_module_path=V1 + "multi_connector"),
                     "multiconnector.connectors_missing", id="connectors-missing"),
        pytest.param(M(C("NixlConnector", engine_id="e"), kv_connector_module_path=V1 + "multi_connector"),
                     "multiconnector.child_engine_id", id="child-engine-id"),
        pytest.param(M(C("NoSuchConnector"), kv_connector_module_path=V1 + "multi_connector"),
                     "connector.unknown", id="child-unknown"),
    ],
)
def test_multiconnector_by_its_module_path_is_constructed_like_by_its_name(memo_policy, ktc, code):
    # Reference §3: a module path resolves the class (it takes priority over
    # the registry); vllm...v1.multi_connector.MultiConnector is vLLM's own
    # class, and its __init__ asserts `connectors` and builds every child (§4).
    document = {"kv_transfer_config": ktc, "disable_hybrid_kv_cache_manager": True}
    assert_agree(memo_policy, document)
    assert expected(document)[2][:2] == ("connector", code)


@pytest.mark.parametrize(
    "ktc",
    [
        pytest.param(C("NoSuchConnector"), id="unknown-connector"),
        pytest.param({"kv_role": "kv_both"}, id="name-missing"),
        pytest.param({"kv_connector": "MultiConnector", "kv_role": "kv_both"}, id="connectors-missing"),
    ],
)
def test_kv_cache_planning_warns_before_connectors_are_created(memo_policy, ktc):
    # Reference §3/§5: create_connector(config, role, kv_cache_config) needs
    # the planned KV cache config, so get_kv_cache_groups (which logs
    # "Hybrid KV cache manager is disabled for this hybrid model" when HMA is
    # off) runs before either connector is created and fails.
    document = {"kv_transfer_config": ktc, "disable_hybrid_kv_cache_manager": True,
                "model": {"layer_kinds": ["full_attention", "sliding_window"]}}
    assert_agree(memo_policy, document)
    assert "model.hybrid_kv_unoptimized" in expected(document)[3]


def test_an_error_every_possible_class_reaches_is_determined(memo_policy):
    # Multi[external, child with engine_id], no preference: whether or not the
    # external class supports HMA, the HMA helper raises nothing (engine_id
    # plays no role in it, reference §4), and MultiConnector's construction
    # then fails on the child's engine_id. vLLM's first error is the same in
    # every case: an error, not undetermined (hma_enabled is unknown: null).
    document = {"kv_transfer_config": M(ACME, C("NixlConnector", engine_id="e"))}
    assert_agree(memo_policy, document)
    assert expected(document)[:3] == ("error", None, ("connector", "multiconnector.child_engine_id", TOP + "/kv_connector_extra_config/connectors/1/engine_id"))


def test_decision_paths_point_into_the_document_as_spelled(memo_policy):
    # docs/decision.md: `path` is a JSON Pointer into the deployment document.
    # vLLM's CLI spelling is accepted (kv-transfer-config), and input errors
    # already point at it as spelled; so must the decision's own errors.
    document = {"kv-transfer-config": C("NoSuchConnector")}
    d = memo_policy.decide(document)
    assert (d.outcome, d.errors[0].code) == ("error", "connector.unknown")
    assert d.errors[0].path == "/kv-transfer-config/kv_connector"
