"""The verifier respects every relation the connector graph imposes on facts.

A fact declared with ``given`` relations (engine/core/facts.py) takes its
``empty`` value unless they hold: ``is_child`` is true only at depth >= 1,
``children`` counts only for a container with a ``connectors`` list, and so
on. A rule whose condition needs a fact's other value while one of its
relations fails can never fire. The table below is derived from the fact
declarations, not kept by hand: each declared relation yields one such rule
(and an ``exact`` fact one more, needing its empty value while the relations
hold), injected into a copy of the bundled rules. `rules verify` must name
every one of them as unreachable, and `rules check` must fail on the
issue's own example.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import hma_policy
from hma_policy.authoring.verify import verify
from hma_policy.core.facts import DECLARED, Fact, Relation

from rulecopy import copy_rules

# The step each ruleset's injected rules go into: the first node step that
# reads the whole node vocabulary, and the decision's first step.
STEP = {"node": ("nodes.yaml", "support"), "decision": ("decision.yaml", None)}
FACTS = {f.name: f for f in DECLARED}
NON_CONTAINER = "NixlConnector"  # a registered leaf connector of the bundled registry


def other_value(fact: Fact):
    """A condition on ``fact`` that its empty value fails."""
    if fact.type == "bool":
        return not fact.empty
    if fact.type == "int":
        return {"ge": fact.empty + 1}
    if fact.type == "names":
        return {"contains": NON_CONTAINER}
    if fact.values:
        return next(v for v in fact.values if v != fact.empty)
    return NON_CONTAINER


def violated(relation: Relation):
    """A condition on ``relation.fact`` under which the relation fails."""
    target = FACTS[relation.fact]
    if relation.op == "container":
        return NON_CONTAINER
    if relation.op == "registered":
        return "UnregisteredConnector"
    if relation.op == "ge":
        return {"lt": relation.value}
    if relation.op == "eq":
        if target.type == "bool":
            return not relation.value
        return next(v for v in target.values if v != relation.value)
    raise AssertionError(f"no violation written for relation op `{relation.op}`: add one")


def held(relation: Relation):
    """A condition on ``relation.fact`` under which the relation holds."""
    if relation.op == "container":
        return "MultiConnector"
    if relation.op == "registered":
        return NON_CONTAINER
    if relation.op == "ge":
        return {"ge": relation.value}
    assert relation.op == "eq", relation
    return relation.value


def impossible_rules() -> list[tuple[str, str, dict]]:
    """(ruleset, rule id, when) for each declared relation, derived from DECLARED."""
    out = []
    for fact in DECLARED:
        if fact.ruleset not in STEP:
            continue
        for relation in fact.given:
            out.append((fact.ruleset, f"site.impossible.{fact.name}.unless_{relation.fact}",
                        {fact.name: other_value(fact), relation.fact: violated(relation)}))
        if fact.exact:
            out.append((fact.ruleset, f"site.impossible.{fact.name}.empty_although_given",
                        {fact.name: fact.empty, **{r.fact: held(r) for r in fact.given}}))
    return out


def inject(folder: Path, rules: list[tuple[str, str, dict]]) -> None:
    for ruleset, (file, step_name) in STEP.items():
        path = folder / file
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        step = data["steps"][0] if step_name is None else next(s for s in data["steps"] if s["step"] == step_name)
        # A value the step gives that is not an error (an error needs its message).
        value = next(r["value"] for r in step["rules"] if r.get("value", "error") != "error" and "error" not in r)
        new = [{"id": rule_id, "when": when, "value": value, "reason": "cannot happen"}
               for rs, rule_id, when in rules if rs == ruleset]
        step["rules"][:0] = new
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def test_the_table_covers_every_declared_relation():
    rules = impossible_rules()
    relations = sum(len(f.given) + f.exact for f in DECLARED if f.ruleset in STEP)
    assert len(rules) == relations
    # The relations the issue names are among them.
    ids = {rule_id for _, rule_id, _ in rules}
    assert {"site.impossible.is_child.unless_depth", "site.impossible.is_child.empty_although_given",
            "site.impossible.children.unless_name", "site.impossible.children.unless_connectors",
            "site.impossible.module_path_value.unless_module_path", "site.impossible.name_registered.unless_name",
            "site.impossible.name_registered.empty_although_given"} <= ids


@pytest.mark.slow  # a full verify of the bundled rules with 15 more rules: about 30 s
def test_every_impossible_combination_is_reported_unreachable(tmp_path):
    rules = impossible_rules()
    folder = copy_rules(tmp_path / "rules")
    inject(folder, rules)
    policy = hma_policy.load_policy(folder)
    try:
        report = verify(policy, witnesses=False)
    finally:
        policy.close()
    unreachable = {rule for f in report.errors if f.code == "verify.unreachable" for rule in f.rules}
    assert sorted(rule_id for _, rule_id, _ in rules if rule_id not in unreachable) == []
    # and only those: the bundled rules themselves stay clean
    assert {f.code for f in report.errors} == {"verify.unreachable"}
    assert unreachable == {rule_id for _, rule_id, _ in rules}


def test_rules_check_fails_naming_an_impossible_is_child_rule(tmp_path):
    folder = copy_rules(tmp_path / "rules")
    inject(folder, [("node", "site.top_is_deep", {"is_child": False, "depth": {"ge": 1}})])
    result = subprocess.run([sys.executable, "-m", "hma_policy", "rules", "check", "--rules", "rules", "--format", "concise"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("rules/nodes.yaml:") and ": verify.unreachable: rule `site.top_is_deep` never matches " \
        "any reachable combination of facts" in first
    assert result.stdout.splitlines()[-1].startswith("FAILED: rules (")
