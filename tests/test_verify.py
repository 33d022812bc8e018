"""Exhaustive verification (engine/verify.py, engine/witness.py).

The bundled rules verify clean. Problems introduced on purpose into a copy are
found, each with the rules it names and, where the verifier promises one, a
counterexample document that reproduces it when decided again:

- a conflict: step `need_disable` claims `hit: unique` although its rules overlap;
- a gap: step `hma` loses its default and its last rule `hma.default_on`;
- a shadowed rule: a broader rule inserted before `model.swa_promoted`;
- an unreachable rule: `preference: enable` with `connector_check: unsupported`
  (an explicit preference skips the connector check, so it is `not_checked`).

All four live in one copy (they sit in different steps and do not interact),
so the expensive search for counterexample documents runs once. The two CLI
runs start in the background when the module starts, so they overlap with the
in-process work.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import hma_policy
from hma_policy.core.errors import EvaluationError
from hma_policy.core.table import Row
from hma_policy.authoring.verify import verify

from rulecopy import bundled_rule_files, copy_rules, edit

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
OUTCOMES = {"enabled", "disabled", "error", "undetermined"}


def break_rules(target: Path) -> Path:
    decision = copy_rules(target) / "decision.yaml"
    # (a) conflict: the three need_disable rules overlap (with the same value).
    edit(decision, "  - step: need_disable\n    hit: any\n", "  - step: need_disable\n    hit: unique\n")
    # (b) gap: step hma without its default and without hma.default_on.
    edit(decision, "    default: enabled\n    rules:\n      - id: hma.explicit_enable_conflict\n",
         # (d) unreachable: inserted first in hma, so no earlier rule can be what hides it.
         "    rules:\n      - id: site.contradiction\n        when: {preference: enable, connector_check: unsupported}\n"
         "        value: disabled\n      - id: hma.explicit_enable_conflict\n")
    edit(decision, "      - id: hma.default_on\n        when: {}\n        value: enabled\n        reason: HMA is on by default\n", "")
    # (c) shadowed: a broader rule (no layer_full_attention test) before model.swa_promoted.
    edit(decision, "    rules:\n      - id: model.swa_promoted\n",
         "    rules:\n      - id: site.swa_promoted_any\n        when: {hma: disabled, layer_sliding_window: true}\n"
         "        value: true\n      - id: model.swa_promoted\n")
    return target


def holds(op: str, value, operand) -> bool:
    """The documented meaning of one condition (docs/rules.md section 4), written
    independently of the engine's own."""
    same = lambda a, b: a == b and type(a) is type(b)  # noqa: E731 - true is not 1
    if op == "eq":
        return same(value, operand)
    if op == "ne":
        return not same(value, operand)
    if op == "in":
        return any(same(value, o) for o in operand)
    if op == "not_in":
        return not any(same(value, o) for o in operand)
    if op == "contains":
        return operand in value
    return {"lt": value < operand, "le": value <= operand, "gt": value > operand, "ge": value >= operand}[op]


def rule_holds(rule, facts: dict) -> bool:
    return all(holds(op, facts[fact], operand) for fact, op, operand in rule.when)


def rules_by_id(model):
    return {r.id: r for steps in model.steps.values() for s in steps for r in s.rules}


def cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hma_policy", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the CLI did not finish within 300 s")
    return proc.returncode, out, err


# -- fixtures ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broken_dir(tmp_path_factory):
    return break_rules(tmp_path_factory.mktemp("verify") / "broken")


@pytest.fixture(scope="module", autouse=True)
def background(broken_dir):
    """The two CLI runs, started first so that they overlap with the rest."""
    procs = {
        "verify_bundled_json": cli("rules", "verify", "--format", "json"),
        "check_broken": cli("rules", "check", str(broken_dir)),
    }
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _verified(rules=None, *, witnesses: bool = True):
    """verify() of a policy of its own, closed afterwards; and its model."""
    policy = hma_policy.load_policy(rules)
    try:
        return policy.model, verify(policy, witnesses=witnesses)
    finally:
        policy.close()


@pytest.fixture(scope="module")
def bundled():
    """The bundled rules, verified in process (no witness search: the bundled
    rules have no error finding, and witnesses do not change the findings)."""
    return _verified(witnesses=False)


@pytest.fixture(scope="module")
def broken(broken_dir):
    """The broken copy, verified in process with counterexample documents, and
    the policy that decides them again."""
    model, report = _verified(broken_dir)
    policy = hma_policy.load_policy(broken_dir)
    try:
        yield model, report, policy
    finally:
        policy.close()


# -- the bundled rules -----------------------------------------------------------------

def _rule_count() -> int:
    """Rules in the bundled files plus the rules the registry compiles into."""
    count = 0
    for path in bundled_rule_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data["kind"] == "registry":
            for entry in data["connectors"].values():
                lookups = int(entry.get("registered", True)) + int(bool(entry.get("module_path")))
                count += lookups * (1 + len(entry.get("cases") or ()))
        else:
            steps = data["steps"] + data.get("results", [])
            count += sum(1 for step in steps for rule in step["rules"] if "include" not in rule)
    return count


def test_bundled_rules_verify_clean(bundled):
    model, report = bundled
    assert report.errors == [], [f.message for f in report.errors]
    assert {f.code for f in report.findings} <= {"verify.order"}
    assert all(f.severity == "info" for f in report.findings)
    assert report.rules_total == _rule_count()
    assert report.rules_fired == report.rules_total
    assert set(report.outcomes) == OUTCOMES
    assert all(count > 0 for count in report.outcomes.values())
    assert report.runtime_checks > 0
    assert set(report.combinations) == {"offloading", "node", "decision", "result"}
    assert all(n > 0 for n in report.combinations.values())


def test_runtime_differential_finds_no_mismatch_on_the_bundled_rules(bundled):
    """The compiled ruleset picks the first rule, in order, of those that
    durable-rules finds matching, for every distinct input of every step."""
    _, report = bundled
    assert report.runtime_checks > 100
    assert not [f for f in report.findings if f.code == "verify.runtime_mismatch"]


def test_verification_is_deterministic(bundled):
    _, first = bundled
    _, again = _verified(witnesses=False)
    assert again.to_dict() == first.to_dict()


def test_runtime_differential_can_fail():
    """The differential is live: a table that gives the default for step
    `hma` where a rule matches is reported as verify.runtime_mismatch."""
    policy = hma_policy.load_policy()

    class WrongTable:
        keys = policy.table.keys

        def rows(self, ruleset, step):
            rows = policy.table.rows(ruleset, step)
            return {k: Row(None, "enabled") for k in rows} if step == "hma" else rows

        def row(self, ruleset, step, facts):
            return policy.table.row(ruleset, step, facts)

    class Wrong:
        model, table = policy.model, WrongTable()

    try:
        report = verify(Wrong(), witnesses=False)
    finally:
        policy.close()
    mismatches = [f for f in report.errors if f.code == "verify.runtime_mismatch"]
    assert mismatches and {f.step for f in mismatches} == {"hma"}
    assert all(f.rules[1] == "(default)" for f in mismatches)


# -- problems introduced on purpose --------------------------------------------------------

def _errors(report, code):
    return [f for f in report.errors if f.code == code]


def test_exactly_the_introduced_problems_are_errors(broken):
    model, report, _ = broken
    assert sorted((f.code, f.step, f.rules) for f in report.errors) == [
        ("verify.conflict", "need_disable", ("need_disable.chunked_local", "need_disable.connector")),
        ("verify.conflict", "need_disable", ("need_disable.platform", "need_disable.chunked_local")),
        ("verify.conflict", "need_disable", ("need_disable.platform", "need_disable.connector")),
        ("verify.gap", "hma", ()),
        ("verify.shadowed", "swa_promotion", ("model.swa_promoted",)),
        ("verify.unreachable", "hma", ("site.contradiction",)),
    ]
    assert report.rules_fired == report.rules_total - 2
    assert "gap" in report.outcomes


def test_conflict_findings_carry_documents_where_both_rules_hold(broken):
    model, report, policy = broken
    rules = rules_by_id(model)
    conflicts = _errors(report, "verify.conflict")
    assert len(conflicts) == 3
    for finding in conflicts:
        a, b = finding.rules
        assert finding.message == f"rules `{a}` and `{b}` both match (hit policy unique)"
        assert (finding.file, finding.path) == ("decision.yaml", "/steps/5")
        # The facts of the finding satisfy both rules...
        facts = dict(finding.facts)
        assert rule_holds(rules[a], facts) and rule_holds(rules[b], facts)
        # ...and so does the document, decided again: at step need_disable both
        # rules' conditions hold for the facts the decision recorded.
        assert finding.document is not None and finding.reproduced is True, finding
        decision = policy.decide(finding.document)
        steps = [s for s in decision.steps if s.ruleset == "decision" and s.step == "need_disable"]
        assert len(steps) == 1
        recorded = dict(steps[0].facts)
        assert rule_holds(rules[a], recorded), (a, recorded)
        assert rule_holds(rules[b], recorded), (b, recorded)
        assert steps[0].rule == a  # first match wins; `unique` was the false claim


def test_the_bundled_need_disable_overlaps_only_with_equal_values(bundled):
    """The same overlaps are legal under the bundled `hit: any` (same value)."""
    model, report = bundled
    step = next(s for s in model.steps["decision"] if s.name == "need_disable")
    assert step.hit == "any" and {r.value for r in step.rules} == {True}
    assert not [f for f in report.findings if f.step == "need_disable"]


def test_gap_finding_carries_a_document_that_stops_the_engine(broken):
    model, report, policy = broken
    gaps = _errors(report, "verify.gap")
    assert len(gaps) == 1
    gap = gaps[0]
    assert (gap.ruleset, gap.step, gap.file, gap.path) == ("decision", "hma", "decision.yaml", "/steps/6")
    assert gap.message == "no rule of step `hma` matches and it has no default"
    facts = dict(gap.facts)
    hma_step = next(s for s in model.steps["decision"] if s.name == "hma")
    assert not any(rule_holds(r, facts) for r in hma_step.rules)
    assert gap.document is not None and gap.reproduced is True
    with pytest.raises(EvaluationError) as info:
        policy.decide(gap.document)
    assert info.value.problems[0].code == "policy.gap"
    assert info.value.problems[0].message == "no rule of step `hma` matched and it has no default"
    assert info.value.step == ("decision", "hma")


def test_shadowed_rule_is_named(broken):
    model, report, policy = broken
    (finding,) = _errors(report, "verify.shadowed")
    assert finding.rules == ("model.swa_promoted",)
    assert (finding.file, finding.path) == ("decision.yaml", "/steps/8/rules/1")
    assert finding.message == ("rule `model.swa_promoted` never fires: an earlier rule of step "
                               "`swa_promotion` always wins where it matches")
    # Where it matches, the inserted rule wins:
    decision = policy.decide({"disable_hybrid_kv_cache_manager": True,
                              "model": {"layer_kinds": ["full_attention", "sliding_window"]}})
    assert "site.swa_promoted_any" in decision.trace
    assert "model.swa_promoted" not in decision.trace


def test_unreachable_rule_is_named(broken):
    _, report, _ = broken
    (finding,) = _errors(report, "verify.unreachable")
    assert finding.rules == ("site.contradiction",)
    assert (finding.step, finding.file, finding.path) == ("hma", "decision.yaml", "/steps/6/rules/0")
    assert finding.message == "rule `site.contradiction` never matches any reachable combination of facts"


def test_registry_conflicts_come_with_documents_too(tmp_path):
    """A conflict between a registry rule and a node rule is as reproducible as
    one in the decision rules: {"kv_transfer_config": {"kv_connector":
    "DecodeBenchConnector", "kv_role": "kv_both"}} reaches the first one. Every
    error finding must carry its counterexample (docs/rules.md section 8)."""
    rules = copy_rules(tmp_path / "rules")
    edit(rules / "nodes.yaml", "  - step: class_hma\n    hit: first\n", "  - step: class_hma\n    hit: any\n")
    _, report = _verified(rules)
    conflicts = _errors(report, "verify.conflict")
    assert ("registry.DecodeBenchConnector", "node.class.unregistered") in {f.rules for f in conflicts}
    missing = sorted(f.rules for f in conflicts if f.document is None)
    # (The module-table rules stand in the resolution step, so no registry
    # lookup by module path meets them in one step: the fact space need not
    # relate module_path_value to module_in_release.)
    assert missing == [], f"{len(missing)} of {len(conflicts)} conflicts have no document, e.g. {missing[:3]}"


# -- the command line ---------------------------------------------------------------------

def test_rules_check_fails_on_the_broken_copy(background, broken, broken_dir):
    code, out, err = finish(background["check_broken"])
    assert code == 1, err
    assert err == ""
    lines = out.splitlines()
    assert lines[-1].startswith("FAILED: ")
    assert "6 error(s)" in lines[-1]
    assert "decision outcomes reachable:" in lines[-1]
    for text in (
        "decision.yaml: verify.conflict: rules `need_disable.platform` and `need_disable.connector` both match (hit policy unique) (at /steps/5)",
        "decision.yaml: verify.gap: no rule of step `hma` matches and it has no default (at /steps/6)",
        "decision.yaml: verify.shadowed: rule `model.swa_promoted` never fires: an earlier rule of step `swa_promotion` always wins where it matches (at /steps/8/rules/1)",
        "decision.yaml: verify.unreachable: rule `site.contradiction` never matches any reachable combination of facts (at /steps/6/rules/0)",
    ):
        # Each finding names its file from the current directory, with the line of its JSON Pointer.
        file, rest = text.split(": ", 1)
        assert any(re.fullmatch(re.escape(str(broken_dir / file)) + r":\d+:\d+: " + re.escape(rest), line) for line in lines), text
    # `rules check` shows errors only, and every conflict and gap with its document.
    assert "verify.order" not in out
    counterexamples = [json.loads(line.split("counterexample: ", 1)[1]) for line in lines if line.startswith("    counterexample: {")]
    assert len(counterexamples) == 4
    _, report, _ = broken
    assert sorted(map(json.dumps, counterexamples)) == sorted(
        json.dumps(f.document, sort_keys=True) for f in report.errors if f.document is not None)


def test_rules_verify_json_on_the_bundled_rules(background, bundled):
    code, out, err = finish(background["verify_bundled_json"])
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["ok", "combinations", "runtime_checks", "decision_outcomes", "rules", "findings", "digest",
                          "policy", "rules_dir"]
    assert data["ok"] is True
    assert data["digest"] == hma_policy.load_policy().digest
    assert set(data["decision_outcomes"]) == OUTCOMES
    assert data["rules"]["total"] == data["rules"]["fired"] == _rule_count()
    assert data["runtime_checks"] > 0
    model, report = bundled
    assert data["runtime_checks"] == report.runtime_checks
    assert data["combinations"] == report.combinations
    assert data["findings"], "the bundled rules have order-dependent overlaps (hit policy first)"
    for finding in data["findings"]:
        assert list(finding)[:11] == ["code", "severity", "ruleset", "step", "rules", "message", "facts", "document",
                                      "reproduced", "file", "path"]
        assert isinstance(finding["line"], int) and isinstance(finding["column"], int)  # located from the path
        assert (finding["code"], finding["severity"]) == ("verify.order", "info")
        assert finding["reproduced"] in (True, False)
        assert (finding["document"] is not None) == finding["reproduced"]
