"""Loading rule files: the bundled policy, broken copies of it (every problem
located by file, line and column), digests, side-by-side policies, close()."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import hma_policy
from hma_policy import PolicyError, load_policy
from hma_policy.core.errors import HMAPolicyError

from rulecopy import copy_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}


@pytest.fixture
def rules(tmp_path):
    """A fresh copy of the bundled rules to break."""
    target = tmp_path / "rules"
    copy_rules(target)
    return target


def edit(path: Path, old: str, new: str, at: str | None = None) -> tuple[int, int] | None:
    """Replace the single ``old`` by ``new``; return the 1-based (line, column)
    of ``at`` inside the new text (the first occurrence in ``new``)."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path.name}"
    start = text.index(old)
    text = text[:start] + new + text[start + len(old):]
    path.write_text(text, encoding="utf-8")
    if at is None:
        return None
    offset = start + new.index(at)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def load_problems(rules_dir):
    with pytest.raises(PolicyError) as info:
        load_policy(rules_dir)
    return info.value.problems


def only_problem(rules_dir):
    problems = load_problems(rules_dir)
    shown = [p.render() for p in problems[:8]] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
    assert len(problems) == 1, "\n".join(shown)
    return problems[0]


def located(problem):
    return problem.code, problem.file, problem.line, problem.column, problem.message, problem.hint


# -- the bundled policy -------------------------------------------------------------

def test_bundled_policy_loads():
    policy = load_policy()
    try:
        assert policy.source == "bundled"
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", policy.digest)
        assert {"NixlConnector", "MultiConnector", "ExampleConnector", "OffloadingConnector"} <= set(policy.registered_names)
        assert "UMBPStoreConnector" not in policy.registered_names  # shipped but not registered
        assert policy.decide({"kv_transfer_config": NIXL}).outcome == "enabled"
    finally:
        policy.close()


def test_an_unchanged_copy_loads_with_the_digest_of_its_bytes(rules, tmp_path):
    policy = load_policy(rules)
    try:
        assert policy.source == str(rules)
        # The digest is of the files' bytes: another copy has the same one;
        # the bundle differs (its files have other names and schema headers).
        assert policy.digest == load_policy(copy_rules(tmp_path / "again")).digest
        assert policy.digest != load_policy().digest
    finally:
        policy.close()


# -- broken copies: one problem each, exactly located --------------------------------------

def test_unknown_fact_with_did_you_mean(rules):
    line, column = edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}", "disable}")
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.unknown_fact", "decision.yaml", line, column,
        "rule `hma.explicit_disable` reads unknown fact `preferance`", "did you mean `preference`?",
    )
    assert problem.path.endswith("/when/preferance")


def test_bad_value_for_a_closed_fact(rules):
    line, column = edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preference: maybe}", "maybe")
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.bad_value", "decision.yaml", line, column,
        "fact `preference` is never `maybe`; it is one of `none`, `enable`, `disable`", None,
    )


def test_bad_value_close_to_a_valid_one_gets_a_hint(rules):
    edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preference: disabled}")
    problem = only_problem(rules)
    assert problem.code == "rules.bad_value"
    assert problem.hint == "did you mean `disable`?"


def test_contains_on_a_non_list_fact(rules):
    line, column = edit(
        rules / "decision.yaml",
        "when: {configured_top_name: MultiConnector, configured_child_names: {contains: HiSparseConnector}}",
        "when: {top_name: {contains: MultiConnector}}",
        "{contains",
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.bad_operator", "decision.yaml", line, column,
        "`contains` needs a list fact, `top_name` is str", None,
    )


def test_duplicate_rule_id(rules):
    line, column = edit(
        rules / "decision.yaml",
        "- id: hma.explicit_disable\n        when: {preference: disable}",
        "- id: hma.explicit_enable\n        when: {preference: disable}",
        "hma.explicit_enable",
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.duplicate_id", "decision.yaml", line, column,
        "rule id `hma.explicit_enable` is used twice (first in `decision.yaml`)", None,
    )


def test_error_rule_whose_value_is_not_error(rules):
    line, column = edit(
        rules / "decision.yaml",
        "platform_is_cuda: false}\n        value: error\n",
        "platform_is_cuda: false}\n        value: ok\n",
        "ok",
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.error_value", "decision.yaml", line, column,
        "rule `hisparse.requires_cuda` raises an error, so its value must be `error`", None,
    )


def test_copy_of_a_fact_that_carries_no_error(rules):
    line, column = edit(
        rules / "decision.yaml",
        "error: {copy: top_setup, stage: connector}",
        "error: {copy: preference, stage: connector}",
        "preference",
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.bad_copy", "decision.yaml", line, column,
        "rule `startup.resolve_error` copies the error of `preference`, which carries none", None,
    )


def test_missing_ruleset_file(rules):
    (rules / "offloading.yaml").unlink()
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.missing_ruleset", str(rules), None, None, "no rule file defines ruleset `offloading`", None,
    )


def test_missing_registry_file(rules):
    (rules / "connectors.yaml").unlink()
    problem = only_problem(rules)
    assert (problem.code, problem.file) == ("rules.missing_registry", str(rules))


def test_registry_entry_with_a_wrong_type(rules):
    line, column = edit(
        rules / "connectors.yaml",
        "  ExampleConnector:\n    supports_hma: false",
        '  ExampleConnector:\n    supports_hma: "yes"',
        '"yes"',
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.schema", "connectors.yaml", line, column, "expected boolean, got `yes`", None,
    )
    assert problem.path == "/connectors/ExampleConnector/supports_hma"


def test_registry_entry_with_an_unknown_field(rules):
    line, column = edit(
        rules / "connectors.yaml",
        "  ExampleConnector:\n    supports_hma: false",
        "  ExampleConnector:\n    supports_hma: false\n    suports_hma: false",
        "false\n    suports_hma: false",
    )
    problem = only_problem(rules)
    assert problem.code == "rules.schema"
    assert problem.file == "connectors.yaml"
    assert problem.path == "/connectors/ExampleConnector/suports_hma"
    assert problem.message == "unknown field `suports_hma`"


def test_yaml_aliases_in_a_rule_file(rules):
    line, column = edit(rules / "offloading.yaml",
                        "      - id: offload.native\n        when: {kv_offloading_backend: native}",
                        "      - id: offload.native\n        when: &native {kv_offloading_backend: native}", "&native")
    edit(rules / "offloading.yaml", "        when: {offload_connector: {ne: none}}", "        when: *native")
    problem = only_problem(rules)
    # The anchor is refused where it stands, before any alias can use it.
    assert located(problem) == (
        "rules.parse", "offloading.yaml", line, column, "invalid YAML: YAML anchors and aliases are not allowed", None,
    )


def test_yaml_syntax_error_is_located(rules):
    line, _ = edit(rules / "offloading.yaml", "        when: {kv_offloading_size_set: false}",
                   "        when: {kv_offloading_size_set: false", "when")
    problem = only_problem(rules)
    assert (problem.code, problem.file) == ("rules.parse", "offloading.yaml")
    assert problem.line is not None and problem.line >= line
    assert problem.message.startswith("invalid YAML: ")


def test_include_registry_in_the_decision_ruleset(rules):
    line, column = edit(
        rules / "decision.yaml",
        "      - id: hma.platform_unsupported\n",
        "      - include: registry\n      - id: hma.platform_unsupported\n",
        "include",
    )
    problem = only_problem(rules)
    assert located(problem) == (
        "rules.bad_include", "decision.yaml", line, column, "the registry can only be included in node rules",
        "move `include: registry` into the node step that sets `class_hma`",
    )


def test_non_utf8_rule_file(rules):
    (rules / "offloading.yaml").write_bytes(b"kind: rules\n# caf\xe9\n")
    problem = only_problem(rules)
    assert (problem.code, problem.file) == ("rules.encoding", "offloading.yaml")


def test_several_problems_are_all_reported_sorted(rules):
    disable = edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}", "disable}")
    enable = edit(rules / "decision.yaml", "when: {preference: enable}\n", "when: {preference: maybe}\n", "maybe")
    child = edit(rules / "nodes.yaml", "when: {is_child: true, sets_engine_id: true}",
                 "when: {is_chld: true, sets_engine_id: true}", "true, sets")
    with pytest.raises(PolicyError) as info:
        load_policy(rules)
    problems = info.value.problems
    assert [(p.code, p.file, p.line, p.column) for p in problems] == [
        ("rules.bad_value", "decision.yaml", *enable),
        ("rules.unknown_fact", "decision.yaml", *disable),
        ("rules.unknown_fact", "nodes.yaml", *child),
    ]
    assert [p.hint for p in problems] == [None, "did you mean `preference`?", "did you mean `is_child`?"]
    summary = str(info.value)
    assert summary.startswith(f"decision.yaml:{enable[0]}:{enable[1]}: rules.bad_value: ")
    assert summary.endswith("(and 2 more)")


def test_rules_dir_that_is_not_a_directory(tmp_path):
    not_a_dir = tmp_path / "rules.yaml"
    not_a_dir.write_text("kind: rules\n", encoding="utf-8")
    for target in (not_a_dir, tmp_path / "missing"):
        problem = only_problem(target)
        assert (problem.code, problem.message) == ("rules.read", f"`{target}` is not a directory")


def test_policy_error_is_not_an_input_error():
    assert issubclass(PolicyError, HMAPolicyError)
    assert not issubclass(PolicyError, hma_policy.InputError)


# -- digest ---------------------------------------------------------------------------

def test_digest_is_stable_and_changes_with_any_rule_file(rules):
    first = load_policy(rules)
    again = load_policy(rules)
    try:
        assert first.digest == again.digest
    finally:
        first.close()
        again.close()
    path = rules / "offloading.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "# a comment changes the file\n", encoding="utf-8")
    changed = load_policy(rules)
    try:
        assert changed.digest != first.digest
    finally:
        changed.close()
    (rules / "README.txt").write_text("not a rule file", encoding="utf-8")
    unchanged = load_policy(rules)
    try:
        assert unchanged.digest == changed.digest
    finally:
        unchanged.close()


def test_decisions_carry_their_policys_digest(rules):
    policy = load_policy(rules)
    try:
        assert policy.decide({"kv_transfer_config": NIXL}).policy_digest == policy.digest
        assert policy.decide({"kv_transfer_config": NIXL}).to_dict()["policy"] == {"digest": policy.digest}
    finally:
        policy.close()


# -- side by side -------------------------------------------------------------------------

def test_two_policies_answer_independently(rules):
    edit(rules / "connectors.yaml", "  ExampleConnector:\n    supports_hma: false", "  ExampleConnector:\n    supports_hma: true")
    bundled = load_policy()
    flipped = load_policy(rules)
    try:
        assert bundled.digest != flipped.digest
        document = {"kv_transfer_config": EXAMPLE}
        for _ in range(3):
            assert bundled.decide(document).outcome == "disabled"
            assert flipped.decide(document).outcome == "enabled"
            assert hma_policy.supports_hma(EXAMPLE, policy=bundled) is False
            assert hma_policy.supports_hma(EXAMPLE, policy=flipped) is True
        assert hma_policy.decide(document).outcome == "disabled"
        flipped.close()
        assert bundled.decide(document).outcome == "disabled"
        assert bundled.decide({"kv_transfer_config": NIXL}).outcome == "enabled"
    finally:
        bundled.close()
        flipped.close()


# -- close ------------------------------------------------------------------------------

@pytest.mark.parametrize("memo", [True, False])
def test_close_unloads_the_policy(memo):
    policy = load_policy(memo=memo)
    seen = {"kv_transfer_config": NIXL}
    assert policy.decide(seen).outcome == "enabled"
    policy.close()
    policy.close()  # idempotent
    # A closed policy answers nothing: neither a document it has seen nor a new one.
    for document in (seen, {"kv_transfer_config": EXAMPLE}):
        with pytest.raises(HMAPolicyError):
            policy.decide(document)
    # Other policies are unaffected.
    assert hma_policy.decide(seen).outcome == "enabled"


def test_many_policies_can_be_loaded_and_closed(rules):
    for _ in range(20):
        policy = load_policy(rules)
        assert policy.decide({"kv_transfer_config": EXAMPLE}).outcome == "disabled"
        policy.close()


def test_a_failed_reload_leaves_the_loaded_policy_in_service(rules):
    # Loading builds a new Policy or raises: the one a process holds is untouched.
    policy = hma_policy.load_policy(rules)
    document = {"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}}
    before = policy.decide(document)
    edit(rules / "decision.yaml", "  - step: need_disable\n    hit: any\n", "  - step: need_disable\n    hit: bogus\n")
    with pytest.raises(hma_policy.PolicyError) as info:
        hma_policy.load_policy(rules)
    assert [p.code for p in info.value.problems] == ["rules.schema"]
    assert policy.decide(document) == before
    assert policy.decide({"kv_transfer_config": None}).outcome == "enabled"
    policy.close()


# -- symbolic links in a rules directory (issue 20, item 11) ---------------------------------------

def test_a_link_that_leaves_the_rules_directory_is_refused_unread(rules, tmp_path):
    # The old loader followed the link and quoted the target in its error: `root:x:0:0:root:/root:...`.
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (rules / "zz.yaml").symlink_to(secret)
    problem = only_problem(rules)
    assert located(problem) == ("rules.read", "zz.yaml", None, None, f"is a symbolic link to `{secret}`, outside the rules "
                                "directory; rule files are read only from inside it", None)
    assert "root:x" not in problem.render()


def test_a_link_to_a_directory_outside_or_to_nothing_outside_is_refused_too(rules, tmp_path):
    (rules / "elsewhere.yaml").symlink_to(tmp_path)
    assert only_problem(rules).message.startswith(f"is a symbolic link to `{tmp_path}`, outside the rules directory")
    (rules / "elsewhere.yaml").unlink()
    (rules / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    assert only_problem(rules).file == "dangling.yaml"


def test_a_link_inside_the_rules_directory_is_read_as_before(rules):
    (rules / "decision.yaml").rename(rules / "decision.real")
    (rules / "decision.yaml").symlink_to("decision.real")
    plain = load_policy(copy_rules(rules.parent / "plain")).digest
    assert load_policy(rules).digest == plain
    # The directory itself may be reached through a link.
    link = rules.parent / "linked-rules"
    link.symlink_to(rules)
    assert load_policy(link).digest == plain


def test_releases_of_one_epoch_have_their_own_digest():
    # 0.24.0 and 0.25.0 share E7's files and a registry, but 0.25.0's release
    # facts turn on a rule (dspark) that 0.24.0's do not: two policies.
    first, second = load_policy(release="0.24.0"), load_policy(release="0.25.0")
    try:
        assert first.model.files == second.model.files
        assert first.digest != second.digest
    finally:
        first.close()
        second.close()


def test_an_option_a_later_release_added_is_refused_by_the_older_one():
    # vLLM 0.11.0's parser has no --kv-offloading-size (0.11.1 added it): it
    # refuses the document as an unknown argument; 0.11.1 reads it.
    document = {"kv_offloading_size": 4, "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}
    old = load_policy(release="0.11.0")
    try:
        with pytest.raises(hma_policy.InputError) as raised:
            old.decide(document)
    finally:
        old.close()
    (problem,) = raised.value.problems
    assert (problem.code, problem.path, problem.message) == (
        "input.schema", "/kv_offloading_size", "`kv_offloading_size` is not an option of vLLM 0.11.0")
    assert hma_policy.decide({**document, "vllm_version": "0.11.1"}).outcome == "disabled"  # read, not refused
