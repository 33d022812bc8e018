"""Conformance per vLLM release: the bundled policy of each release decides
the recorded cases of that release as vLLM's own code decided them.

tests/conformance/<release>/cases.json were recorded by
tools/vllm_conformance.py from each release's real code on CPU (the wheel,
its sha256 and what ran are in PROVENANCE.md beside them); no expectation
was written by hand. Each release's cases are decided with
``load_policy(release=R)``: its epoch's rule files (rules/epochs/) and its
registry. The shared 0.33.0 set (tests/conformance/cases.json) stays the
contract of tests/test_conformance.py.

A case fails unless the outcome, the flag, the first error's stage and code
and the set of vLLM warning codes all agree. A case vLLM failed in KV cache
*planning* (unifying the layers' specs after HMA was turned off; the
decision has no planning stage: its stages are the shared contract's, input,
config and connector) is compared on what vLLM had decided before planning
failed: the flag, no input or config error, and the warnings of the HMA
block. Planning runs before the connectors are created, so what connector
creation would have said is unknown there, and the planning warnings
(docs/decision.md) were logged by the step that then failed. The shared
contract decides the one such document it holds, `mamba-unsupported-auto`,
the same way (`disabled`; a test below checks it against vLLM's own run).
A failing case is an expected failure only when it is one of the kinds
below, which no rule can express from the facts the engine extracts; each
says what is missing. Any other difference fails the test, naming the
release and the case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hma_policy

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE / "conformance"
RELEASE_DIR = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


RELEASES = sorted((p.name for p in CONFORMANCE.iterdir() if p.is_dir() and RELEASE_DIR.match(p.name)), key=_key)
CASES = [(release, case) for release in RELEASES
         for case in json.loads((CONFORMANCE / release / "cases.json").read_text(encoding="utf-8"))]

# What no rule can express, by what the recorded case shows (each reason names the missing fact or stage).
IMPORT = ("vLLM imported a kv_connector_module_path outside its own KV-transfer tree in the recording environment, "
          "which lacked that module or class; whether a module outside vLLM can be imported where a deployment runs, "
          "and holds the class, is no fact (only the tree's modules are recorded, rules/modules/): the engine never imports")
# The modules a release's module table records (rules/modules/, `prefix`); any other module path is unknown.
RECORDED_MODULES = "vllm.distributed.kv_transfer"
IMPORT_ERRORS = ("connector.module_not_found", "connector.class_not_found")


@pytest.fixture(scope="module")
def policies():
    loaded: dict[str, hma_policy.Policy] = {}

    def policy(release: str) -> hma_policy.Policy:
        if release not in loaded:
            loaded[release] = hma_policy.load_policy(release=release)
        return loaded[release]

    yield policy
    for each in loaded.values():
        each.close()


def _observe(policy, document) -> tuple:
    """(outcome, hma_enabled, (stage, code) of the first error or None, sorted vLLM warning codes)."""
    try:
        decision = policy.decide(document)
    except hma_policy.InputError as exc:
        return "error", None, ("input", exc.problems[0].code), []
    first = (decision.errors[0].stage, decision.errors[0].code) if decision.errors else None
    return decision.outcome, decision.hma_enabled, first, sorted(w.code for w in decision.warnings if w.source == "vllm")


# Warnings vLLM logs while planning the KV cache (docs/decision.md), the step a planning failure stops.
PLANNING_WARNINGS = frozenset({"model.hybrid_kv_unoptimized", "model.ssm_requires_hma"})


def _expected(case) -> tuple:
    expect = case["expect"]
    error = (expect["error"]["stage"], expect["error"]["code"]) if expect["error"] else None
    return expect["outcome"], expect["hma_enabled"], error, sorted(expect["warnings"])


def _planning_failed(case) -> bool:
    return (case["expect"]["error"] or {}).get("stage") == "planning"


def _before_planning(decided: tuple) -> tuple:
    """What a decision says before KV cache planning: the flag, an input or
    config error, and the warnings of the HMA block."""
    _, flag, error, warnings = decided
    early = error if error is not None and error[0] in ("input", "config") else None
    return flag, early, [w for w in warnings if w not in PLANNING_WARNINGS]


def _nodes(config):
    """Every connector config of a kv_transfer_config (or its JSON text, as
    `--kv-transfer-config` takes it), children included."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return
    stack = [config]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        extra = node.get("kv_connector_extra_config")
        children = extra.get("connectors") if isinstance(extra, dict) else None
        if isinstance(children, list):
            stack.extend(children)


def _recorded(module_path: str) -> bool:
    return module_path == RECORDED_MODULES or module_path.startswith(RECORDED_MODULES + ".")


def _inexpressible(case) -> str | None:
    """Why no rule can give what vLLM gave for this case (None: a rule can), from the recorded case alone."""
    expected_error = _expected(case)[2]
    document = case["input"]
    config = document.get("kv_transfer_config", document.get("kv-transfer-config"))
    if expected_error and expected_error[1] in IMPORT_ERRORS:
        paths = [node.get("kv_connector_module_path") for node in _nodes(config)]
        if any(isinstance(path, str) and path and not _recorded(path) for path in paths):
            return IMPORT
    # Input validation differs per release as each release's options (rules/options/) and config classes
    # (rules/configs/) say, and a module path inside vLLM as its module table (rules/modules/) says: a
    # disagreement there is a failure.
    return None


@pytest.mark.parametrize(("release", "case"), CASES, ids=[f"{release}:{case['id']}" for release, case in CASES])
def test_release_decides_as_vllm_did(release, case, policies):
    policy = policies(release)
    observed, expected = _observe(policy, case["input"]), _expected(case)
    if _planning_failed(case):
        observed, expected = _before_planning(observed), _before_planning(expected)
    if observed == expected:
        return
    reason = _inexpressible(case)
    if reason is not None:
        pytest.xfail(f"vLLM {release} {case['id']}: {reason}")
    assert observed == expected, (
        f"vLLM {release} case {case['id']} ({case['description']}): the policy decides {observed}, "
        f"vLLM decided {expected}")


def test_every_recorded_release_has_its_policy():
    from hma_policy.core.releases import bundled

    known = bundled().releases
    assert RELEASES and set(RELEASES) <= set(known), sorted(set(RELEASES) - set(known))


def test_the_inexpressible_kinds_are_told_apart_from_the_data():
    """The classification reads the recorded case, never the release's answer for it:
    a case of each kind, and a plain disagreement that stays a failure."""
    def imported(path, code="connector.module_not_found"):
        config = {"kv_connector": "AcmeConnector", "kv_role": "kv_both", "kv_connector_module_path": path}
        return {"input": {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                                 "kv_connector_extra_config": {"connectors": [config]}}},
                "expect": {"outcome": "error", "hma_enabled": None, "warnings": [],
                           "error": {"stage": "config", "code": code}}}

    module = imported("acme.kv.connector")
    inside = imported("vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector")
    no_class = imported("vllm.distributed.kv_transfer.kv_connector.v1.example_connector", "connector.class_not_found")
    # the document as --kv-transfer-config takes it, a JSON string
    as_text = {**module, "input": {"kv_transfer_config": json.dumps(module["input"]["kv_transfer_config"])}}
    named = {"input": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                              "kv_connector_module_path": "my.module"}},
             "expect": {"outcome": "disabled", "hma_enabled": False, "warnings": [], "error": None}}
    plain = {"input": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}},
             "expect": {"outcome": "disabled", "hma_enabled": False, "warnings": [], "error": None}}
    assert _inexpressible(module) == _inexpressible(as_text) == IMPORT
    # a module of vLLM's KV-transfer tree is in the release's module table, and a registered name with a
    # module path is the rules' to resolve (name_registered): in every release a difference is a failure
    for case in (inside, no_class, plain, named):
        assert _inexpressible(case) is None


def test_planning_failures_are_compared_before_planning_as_the_contract_decides_them():
    """The shared contract's 63 documents were also run through vLLM 0.33.0's
    real code (tests/conformance/0.33.0/comparison.json). One answer differs:
    mamba-unsupported-auto, where planning fails after HMA is turned off and
    the contract says `disabled`. Compared before planning, as the release
    tests compare such cases, the two agree."""
    comparison = json.loads((CONFORMANCE / "0.33.0" / "comparison.json").read_text(encoding="utf-8"))
    assert len(comparison) == 63
    differ = [entry for entry in comparison if entry["vllm"] != entry["shared"]]
    assert [entry["id"] for entry in differ] == ["mamba-unsupported-auto"]
    [entry] = differ
    vllm, shared = {"expect": entry["vllm"]}, {"expect": entry["shared"]}
    assert _planning_failed(vllm) and not _planning_failed(shared)
    assert _before_planning(_expected(vllm)) == _before_planning(_expected(shared)) == (False, None, ["hma.auto_disabled"])
    # and the comparison still tells a config error, or another flag, apart
    assert _before_planning(("error", None, ("config", "hma.explicit_enable_conflict"), [])) != (False, None, [])
    assert _before_planning(("enabled", True, None, ["hma.auto_disabled"])) != (False, None, ["hma.auto_disabled"])


def test_the_recorded_tree_is_the_module_tables_prefix():
    """IMPORT covers a module path outside what the module tables record."""
    from hma_policy.core.releases import bundled

    bundle = bundled()
    prefixes = {json.loads(bundle.root.joinpath(release.modules).read_text("utf-8"))["prefix"]
                for release in bundle.releases.values()}
    assert prefixes == {RECORDED_MODULES}
