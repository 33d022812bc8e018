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
and the set of vLLM warning codes all agree. A failing case is an expected
failure only when it is one of the kinds below, which no rule can express
from the facts the engine extracts; each says what is missing. Any other
difference fails the test, naming the release and the case.
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
PLANNING = ("KV cache planning raised with HMA off (unify_hybrid_kv_cache_specs over the layer kinds); the "
            "decision has no `planning` stage (schemas/decision.schema.json, rules.schema.json: input, config, "
            "connector), and the shared 0.33.0 contract decides such a model `disabled` (mamba-unsupported-auto)")
IMPORT = ("vLLM imported kv_connector_module_path in the recording environment and found no such module or class; "
          "whether a module path can be imported, and holds the class, is no fact: the engine never imports")
REGISTERED_NAME_WINS = ("before 0.20.0 a registered kv_connector wins over kv_connector_module_path; the node "
                        "facts do not say whether a name is registered (missing node fact: name_registered), so "
                        "the rules look the node up by its module path")
FIRST_MODULE_PATH_PRIORITY = (0, 20, 0)


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


def _expected(case) -> tuple:
    expect = case["expect"]
    error = (expect["error"]["stage"], expect["error"]["code"]) if expect["error"] else None
    return expect["outcome"], expect["hma_enabled"], error, sorted(expect["warnings"])


def _nodes(config):
    """Every connector config of a kv_transfer_config, children included."""
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


def _inexpressible(release: str, case, observed: tuple, registered: tuple[str, ...]) -> str | None:
    """Why no rule can give what vLLM gave for this case (None: a rule can)."""
    expected_error = _expected(case)[2]
    if expected_error and expected_error[0] == "planning":
        return PLANNING
    if expected_error and expected_error[1] in ("connector.module_not_found", "connector.class_not_found"):
        return IMPORT
    # Input validation differs per release as each release's options (rules/options/) and config classes
    # (rules/configs/) say: a disagreement at the input stage is a failure.
    document = case["input"]
    config = document.get("kv_transfer_config", document.get("kv-transfer-config"))
    if _key(release)[:3] < FIRST_MODULE_PATH_PRIORITY and any(
            node.get("kv_connector") in registered and node.get("kv_connector_module_path")
            for node in _nodes(config)):
        return REGISTERED_NAME_WINS
    return None


@pytest.mark.parametrize(("release", "case"), CASES, ids=[f"{release}:{case['id']}" for release, case in CASES])
def test_release_decides_as_vllm_did(release, case, policies):
    policy = policies(release)
    observed = _observe(policy, case["input"])
    expected = _expected(case)
    if observed == expected:
        return
    reason = _inexpressible(release, case, observed, policy.model.registered_names)
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
    planning = {"input": {}, "expect": {"outcome": "error", "hma_enabled": False, "warnings": [],
                                        "error": {"stage": "planning", "code": "kv_cache.unify_failed"}}}
    module = {"input": {}, "expect": {"outcome": "error", "hma_enabled": None, "warnings": [],
                                      "error": {"stage": "config", "code": "connector.module_not_found"}}}
    named = {"input": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                              "kv_connector_module_path": "my.module"}},
             "expect": {"outcome": "disabled", "hma_enabled": False, "warnings": [], "error": None}}
    plain = {"input": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}},
             "expect": {"outcome": "disabled", "hma_enabled": False, "warnings": [], "error": None}}
    decided = ("enabled", True, None, [])
    refused = ("error", None, ("input", "input.schema"), [])
    registered = ("NixlConnector",)
    assert _inexpressible("0.33.0", planning, decided, registered) == PLANNING
    assert _inexpressible("0.33.0", module, decided, registered) == IMPORT
    assert _inexpressible("0.33.0", plain, refused, registered) is None
    assert _inexpressible("0.9.1", plain, refused, registered) is None
    assert _inexpressible("0.18.0", named, decided, registered) == REGISTERED_NAME_WINS
    # From 0.20.0 the module path wins, as the rules say: a difference there is a failure.
    assert _inexpressible("0.20.0", named, decided, registered) is None
    assert _inexpressible("0.13.0", plain, decided, registered) is None
