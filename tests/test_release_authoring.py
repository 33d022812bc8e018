"""Authoring the rules of an epoch that serves several vLLM releases.

One folder rules/epochs/<epoch>/ decides for every release of its epoch, and
the releases differ in their registries and in what the rules test of the
release itself (vllm_minor, vllm_patch). So `rules check --rules vllm:X`
checks release X's policy; a rule written for another release of the epoch
is information there, not a dead rule; a test case names the releases it is
for (since/until) and the others skip it; coverage counts the rules that can
fire for the release.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hma_policy
from hma_policy.authoring.testing import check_names, load_cases, run_cases
from hma_policy.authoring.verify import verify
from rulecopy import copy_rules, edit

REPO = Path(__file__).resolve().parents[1]


def hma(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], capture_output=True, text=True, cwd=cwd,
                               timeout=300, env={**os.environ})
    assert "Traceback" not in completed.stdout + completed.stderr, completed.stderr
    return completed


def test_rules_check_of_a_release_checks_that_releases_policy():
    # It checked the default release's policy whatever vllm:X named.
    report = json.loads(hma("rules", "check", "--rules", "vllm:0.21.0", "--format", "json").stdout)
    assert report["ok"] and report["policy"] == "vllm:0.21.0"
    assert report["digest"] == hma_policy.load_policy(release="0.21.0").digest != hma_policy.load_policy().digest


def edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of the 0.33.0 rules in which ``old`` of the file ``name`` reads ``new``."""
    rules = copy_rules(tmp_path / "r")
    edit(rules / name, old, new)
    return rules


def verified(rules: Path):
    """The verification report of the rules folder ``rules``."""
    policy = hma_policy.load_policy(rules)
    try:
        return verify(policy, witnesses=False)
    finally:
        policy.close()


@pytest.fixture()
def later_rule(tmp_path):
    """A copy of the 0.33.0 rules with a rule for vLLM 0.30.0 only, in the step `hma`."""
    return edited(tmp_path, "decision.yaml", "      - id: hma.explicit_enable\n",
                  "      - id: hma.only_in_0_30\n        when: {preference: enable, vllm_minor: 30}\n        value: disabled\n"
                  "      - id: hma.explicit_enable\n")


def test_a_rule_for_another_release_of_the_epoch_is_information(later_rule):
    report = verified(later_rule)
    assert not report.errors, [f.message for f in report.errors]
    (finding,) = [f for f in report.findings if f.code == "verify.other_release"]
    assert finding.severity == "info" and finding.rules == ("hma.only_in_0_30",)
    assert "vllm_minor 33" in finding.message


def test_a_dead_rule_that_tests_this_release_is_still_an_error(tmp_path):
    report = verified(edited(
        tmp_path, "decision.yaml", "      - id: hma.explicit_enable\n",
        "      - id: hma.dead_here\n        when: {preference: enable, vllm_minor: 33, platform_supports_hybrid_kv_cache: false}\n"
        "        value: disabled\n      - id: hma.explicit_enable\n"))
    # hma.explicit_enable_conflict always wins there: shadowed in this very release
    assert [(f.code, f.rules) for f in report.errors] == [("verify.shadowed", ("hma.dead_here",))]


CASES = """kind: tests
cases:
  - name: for a later release
    since: 0.34.0
    document: {kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}}
    expect: {outcome: enabled, fired: [registry.NoSuchEntryHere]}
  - name: for earlier releases
    until: 0.32.0
    document: {}
    expect: {outcome: disabled}
  - name: for this one
    since: 0.30.0
    until: 0.33.0
    document: {kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}}
    expect: {outcome: enabled, fired: [registry.NixlConnector]}
"""


def test_cases_for_other_releases_are_skipped_and_not_checked(tmp_path, later_rule):
    path = tmp_path / "cases.yaml"
    path.write_text(CASES, encoding="utf-8")
    policy = hma_policy.load_policy(later_rule)
    try:
        cases = load_cases([path])
        # The later release's registry defines what the first case names: not a problem here.
        assert check_names(policy.model, cases) == []
        suite = run_cases(policy, cases)
    finally:
        policy.close()
    assert [(r.case.name, r.skipped, r.passed) for r in suite.results] == [
        ("for a later release", True, True), ("for earlier releases", True, True), ("for this one", False, True)]
    assert suite.results[0].case.skip == "for vLLM 0.34.0 and later, not 0.33.0"
    assert suite.results[1].case.skip == "for vLLM 0.32.0 and earlier, not 0.33.0"
    # The rule for 0.30.0 cannot fire for 0.33.0: coverage does not count it.
    assert "hma.only_in_0_30" not in suite.rules


def test_a_case_for_this_release_still_names_only_what_the_policy_defines(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text(CASES.replace("since: 0.34.0", "since: 0.33.0"), encoding="utf-8")
    policy = hma_policy.load_policy()
    try:
        problems = check_names(policy.model, load_cases([path]))
    finally:
        policy.close()
    assert [(p.code, p.line) for p in problems] == [("tests.unknown_rule", 6)]


def test_a_release_bound_that_is_no_release_is_a_located_problem(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text(CASES.replace("since: 0.34.0", "since: latest"), encoding="utf-8")
    with pytest.raises(hma_policy.PolicyError) as raised:
        load_cases([path])
    (problem,) = raised.value.problems
    assert (problem.code, problem.line, problem.path) == ("tests.schema", 4, "/cases/0/since")


def test_two_registry_names_for_one_class_are_one_lookup(tmp_path):
    # vLLM 0.9.x registers PyNcclConnector and MooncakeConnector as simple_connector.SimpleConnector.
    rules = edited(tmp_path, "connectors.yaml", "connectors:\n",
                   "connectors:\n  PyNcclConnector:\n    supports_hma: false\n    module_path: my.simple\n    class: SimpleConnector\n"
                   "  MooncakeAlias:\n    supports_hma: false\n    module_path: my.simple\n    class: SimpleConnector\n")
    report = verified(rules)
    policy = hma_policy.load_policy(rules)
    try:
        suite = run_cases(policy, [])
    finally:
        policy.close()
    assert not report.errors, [f.message for f in report.errors]
    (alias,) = [f for f in report.findings if f.code == "verify.registry_alias"]
    assert alias.rules == ("registry.PyNcclConnector.module", "registry.MooncakeAlias.module")
    assert "registry.MooncakeAlias.module" not in suite.rules and "registry.MooncakeAlias" in suite.rules


def test_diff_between_releases_names_the_step_that_decides():
    # The two epochs differ in many steps; the cause was `hisparse_active`, a
    # step only 0.33.0 has, which took its default and changed nothing.
    result = hma("diff", "--base", "vllm:0.21.0", "--head", "vllm:0.33.0", "examples/nixl-pd-decode.json",
                 "examples/offloading-shorthand.json", "--format", "json")
    assert result.returncode == 0, result.stderr
    causes = {c["source"]: c["cause"] for c in json.loads(result.stdout)["changes"]}
    assert causes == {
        "examples/nixl-pd-decode.json": {
            "ruleset": "decision", "node": None, "step": "connector_check",
            "before": {"rule": "hma.kv_transfer_auto_disabled", "value": "unsupported"},
            "after": {"rule": "hma.connector_supported", "value": "supported"}},
        # 0.21.0 decides on the kv_transfer_config as configured (the shorthand comes later)
        "examples/offloading-shorthand.json": {
            "ruleset": "decision", "node": None, "step": "connector_check",
            "before": {"rule": "hma.kv_transfer_auto_disabled", "value": "unsupported"},
            "after": {"rule": "hma.connector_supported", "value": "supported"}},
    }
