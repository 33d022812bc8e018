"""The checker's scale in conditional registry entries (issue 19, point 10).

Registry entries reachable by module path compile into rules that compare the
module path only beside the class name. The step table classes the two
jointly (a module path is told apart only beside the name it is declared
with), so the inputs of `class_hma` grow linearly with the registry, not with
its square; and the classes stay exact: every decision through the table is
the one durable-rules gives step by step, for names paired with their own
module path, another entry's, or none.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from hma_policy.core.policy import load_policy
from hma_policy.authoring.verify import verify

# Loaded by path: benchmarks/ on sys.path would shadow the standard library's http.
_SPEC = importlib.util.spec_from_file_location(
    "checker_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "checker_scale.py")
checker_scale = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(checker_scale)
rules_copy = checker_scale.rules_copy


def class_hma_inputs(directory: Path) -> int:
    policy = load_policy(directory)
    try:
        return len(policy.table.rows("node", "class_hma"))
    finally:
        policy.close()


def test_class_hma_inputs_grow_linearly_with_the_registry(tmp_path):
    sizes = {n: class_hma_inputs(rules_copy(tmp_path / f"n{n}", n)) for n in (10, 20, 40)}
    # The same number of new inputs per added entry (the product of names and
    # module paths grew by 30 inputs per entry at 10 entries, 70 at 40).
    assert sizes[40] - sizes[20] == 2 * (sizes[20] - sizes[10]), sizes


def test_joint_classes_decide_as_durable_rules(tmp_path):
    directory = rules_copy(tmp_path / "n3", 3)
    table, direct = load_policy(directory), load_policy(directory, memo=False)
    try:
        names = ["Site0Connector", "Site1Connector", "NixlConnector", "Elsewhere"]
        paths = [None, "site.connectors.c0", "site.connectors.c2", "vllm.distributed.kv_transfer.kv_connector.v1.nixl",
                 "elsewhere.kv"]
        checked = 0
        for name in names:
            for path in paths:
                for upstream in (False, True):
                    leaf = {"kv_connector": name, "kv_role": "kv_both"}
                    if path is not None:
                        leaf["kv_connector_module_path"] = path
                    for ktc in (leaf, {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"connectors": [dict(leaf)]}}):
                        document = {"kv_transfer_config": ktc}
                        if upstream:
                            document["env"] = {"LMCACHE_USE_UPSTREAM_MP": "1"}
                        assert table.decide(document).to_dict() == direct.decide(document).to_dict(), document
                        checked += 1
        assert checked == 80
        # the cases hold: Site1 by its own module path is unsupported as a child, supported at the top
        own = {"kv_connector": "Site1Connector", "kv_connector_module_path": "site.connectors.c1", "kv_role": "kv_both"}
        assert table.decide({"kv_transfer_config": own}).hma_enabled is True
        multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [own]}}
        assert table.decide({"kv_transfer_config": multi}).hma_enabled is False
    finally:
        table.close()
        direct.close()


@pytest.mark.slow
def test_two_hundred_conditional_entries_check_quickly(tmp_path):
    policy = load_policy(rules_copy(tmp_path / "n200", 200))
    start = time.perf_counter()
    try:
        report = verify(policy)
    finally:
        policy.close()
    seconds = time.perf_counter() - start
    assert not report.errors, [f.message for f in report.errors]
    assert report.rules_fired == report.rules_total
    order = {f.rules for f in report.findings if f.code == "verify.order" and f.step == "class_hma"}
    for i in (0, 199):
        # each case wins over the plain entry by order, by name and by module path
        assert (f"registry.Site{i}Connector.upstream", f"registry.Site{i}Connector") in order
        assert (f"registry.Site{i}Connector.module.upstream", f"registry.Site{i}Connector.module") in order
    assert seconds < 120, f"verifying 200 conditional registry entries took {seconds:.0f} s"


# -- steps past durable-rules' limits: cut into parts, parts over rulesets ---

def _documents() -> list[dict]:
    """The shared conformance cases' documents, and a few that reach late registry entries."""
    import json

    cases = json.loads((Path(__file__).resolve().parent / "conformance" / "cases.json").read_text(encoding="utf-8"))
    return [case["input"] for case in cases]


def test_a_policy_cut_into_many_parts_and_rulesets_decides_as_one(monkeypatch):
    """With durable-rules' limits made tiny, every step of the bundled policy
    is cut into parts of a few tests each, laid over many rulesets: the first
    matching rule of each step still wins, so every decision is the same,
    through the table and step by step through durable-rules."""
    from hma_policy.core import compiler

    whole = load_policy()
    monkeypatch.setattr(compiler, "PART_TESTS", 4)
    monkeypatch.setattr(compiler, "RULESET_RULES", 12)
    compiled = compiler.compile_policy(whole.model)
    assert len(compiled.definitions) > 10, len(compiled.definitions)
    assert max(len(parts) for parts in compiled.parts.values()) > 5
    cut, cut_direct = load_policy(), load_policy(memo=False)
    try:
        assert cut.table.size == whole.table.size
        for document in _documents():
            expected = whole.decide(document).to_dict() if _decides(whole, document) else None
            for policy in (cut, cut_direct):
                got = policy.decide(document).to_dict() if _decides(policy, document) else None
                assert got == expected, document
    finally:
        for policy in (whole, cut, cut_direct):
            policy.close()


def _decides(policy, document) -> bool:
    import hma_policy

    try:
        policy.decide(document)
    except hma_policy.InputError:
        return False
    return True


def test_verify_reads_every_part_of_a_cut_step(monkeypatch):
    """The verifier asks every part for the rules that match an input, so a
    cut policy verifies exactly as the whole one (the same findings, which
    name rules of different parts side by side)."""
    from hma_policy.core import compiler

    whole = load_policy()
    try:
        expected = verify(whole)
    finally:
        whole.close()
    monkeypatch.setattr(compiler, "PART_TESTS", 4)
    monkeypatch.setattr(compiler, "RULESET_RULES", 12)
    cut = load_policy()
    try:
        report = verify(cut)
    finally:
        cut.close()
    assert [(f.code, f.step, f.rules, f.message) for f in report.findings] == \
        [(f.code, f.step, f.rules, f.message) for f in expected.findings]
    assert (report.rules_fired, report.rules_total) == (expected.rules_fired, expected.rules_total)


def _site_step(tmp_path: Path, second_fact: str) -> Path:
    """The bundled rules with a decision step that compares 520 names in two
    rules of 260 each: on one fact, or on two (the shape that hung
    durable-rules when one step held them all)."""
    from rulecopy import copy_rules, edit

    directory = copy_rules(tmp_path / "rules")
    a = ", ".join(f"SiteA{i:03}" for i in range(260))
    b = ", ".join(f"SiteB{i:03}" for i in range(260))
    edit(directory / "decision.yaml", "steps:\n", "steps:\n"
         "  - step: site_names\n    default: none\n    rules:\n"
         f"      - id: site.names.a\n        when: {{top_name: {{in: [{a}]}}}}\n        value: group_a\n"
         f"      - id: site.names.b\n        when: {{{second_fact}: {{in: [{b}]}}}}\n        value: group_b\n", )
    return directory


@pytest.mark.parametrize("second_fact", ["top_name", "configured_top_name"])
def test_a_step_of_520_alternatives_loads_and_answers_in_order(tmp_path, second_fact):
    policy = load_policy(_site_step(tmp_path, second_fact))
    try:
        rows = policy.table.rows("decision", "site_names")
        key = policy.table.keys[("decision", "site_names")]
        def answer(**facts):
            return rows[key({fact: facts.get(fact, "elsewhere") for fact in key.reads})].value
        assert answer(top_name="SiteA000") == "group_a"
        assert answer(top_name="SiteA259") == "group_a"
        assert answer(**{second_fact: "SiteB259"}) == "group_b"
        assert answer(top_name="Nothing") == "none"
    finally:
        policy.close()


def test_a_rule_of_501_alternatives_is_still_refused(tmp_path):
    """One rule cannot be cut: its tests all follow one node."""
    from rulecopy import copy_rules, edit
    import hma_policy

    directory = copy_rules(tmp_path / "rules")
    names = ", ".join(f"Site{i:03}" for i in range(501))
    edit(directory / "decision.yaml", "steps:\n", "steps:\n"
         "  - step: site_names\n    default: none\n    rules:\n"
         f"      - id: site.names.all\n        when: {{top_name: {{in: [{names}]}}}}\n        value: site\n")
    with pytest.raises(hma_policy.PolicyError) as caught:
        load_policy(directory)
    [problem] = caught.value.problems
    assert (problem.code, problem.message) == (
        "rules.hazard.alternatives", "rule `site.names.all` tests more than 500 distinct values")
    assert problem.hint.startswith("durable-rules hangs defining more than 512 tests after one node; split the rule")


@pytest.mark.slow
def test_a_thousand_conditional_entries_load_and_decide(tmp_path):
    """Issue 19's scale: 1,000 registry entries with 2 cases each compile
    into parts over several rulesets, and the last entries (in the last
    part) decide by name, by module path, and by their cases."""
    from hma_policy.core.compiler import compile_policy

    policy = load_policy(rules_copy(tmp_path / "n1000", 1000))
    try:
        compiled = compile_policy(policy.model)
        assert len(compiled.definitions) > 1 and len(compiled.parts["node.class_hma"]) > 1
        for i in (0, 500, 999):
            for path in (None, f"site.connectors.c{i}"):
                leaf = {"kv_connector": f"Site{i}Connector", "kv_role": "kv_both"}
                if path:
                    leaf["kv_connector_module_path"] = path
                plain = policy.decide({"kv_transfer_config": leaf})
                upstream = policy.decide({"kv_transfer_config": leaf, "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}})
                child = policy.decide({"kv_transfer_config": {
                    "kv_connector": "MultiConnector", "kv_role": "kv_both",
                    "kv_connector_extra_config": {"connectors": [leaf]}}})
                assert (plain.outcome, upstream.outcome, child.outcome) == ("enabled", "disabled", "disabled"), (i, path)
    finally:
        policy.close()
