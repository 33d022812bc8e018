"""Author tools: `hma-policy test` (policy tests as data, coverage) and
`hma-policy diff` (the impact of a rule change over a corpus)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hma_policy.authoring.testing import merge_patch

from rulecopy import bundled_rule_files, copy_rules, edit, lmcache_supported

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
TESTS = RULES / "epochs" / "E8" / "tests"
EXAMPLES = REPO / "examples"


def hma(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hma_policy", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# -- what the bundled files say, counted here -------------------------------------------

def bundled_cases() -> tuple[int, int]:
    """(cases that run, cases skipped) in rules/tests/*.yaml."""
    run = skipped = 0
    for path in sorted(TESTS.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]:
            if case.get("skip"):
                skipped += 1
            else:
                run += 1
    return run, skipped


def registry_rule_count() -> int:
    """Registry rules: one per lookup (by name when registered, by module path
    when it has one), each lookup with one more rule per case."""
    count = 0
    for path in bundled_rule_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data["kind"] != "registry":
            continue
        for entry in data["connectors"].values():
            lookups = int(entry.get("registered", True)) + int(bool(entry.get("module_path")))
            count += lookups * (1 + len(entry.get("cases") or ()))
    return count


def rule_count() -> int:
    count = registry_rule_count()
    for path in bundled_rule_files():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data["kind"] == "rules":
            steps = data["steps"] + data.get("results", [])
            count += sum(1 for step in steps for rule in step["rules"] if "include" not in rule)
    return count


def test_the_counts_are_plausible():
    run, skipped = bundled_cases()
    assert run >= 60 and skipped == 0
    assert registry_rule_count() == 37  # 17 registered entries with a module path, 1 with a case, UMBP by path only
    assert rule_count() > registry_rule_count()


# -- hma-policy test ----------------------------------------------------------------------

def test_the_bundled_policy_tests_pass():
    run, _ = bundled_cases()
    result = hma("test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{run} passed, 0 failed"
    assert "FAIL" not in result.stdout


def test_coverage_of_the_bundled_tests_is_complete():
    n, total = registry_rule_count(), rule_count()
    result = hma("test", "--coverage")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"coverage: 100.0% of rules ({total}/{total}); registry lookups {n}/{n}" in lines
    assert not any(line.startswith("not exercised") for line in lines)


def test_threshold_100_passes_on_the_bundled_tests():
    result = hma("test", "--threshold", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "below the threshold" not in result.stdout


def test_threshold_above_the_achievable_coverage_fails():
    # The registry tests alone exercise the registry, not the decision rules.
    result = hma("test", str(TESTS / "registry.yaml"), "--threshold", "90")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    match = next(re.fullmatch(r"coverage: ([0-9.]+)% of rules \((\d+)/(\d+)\); registry lookups (\d+)/(\d+)", line)
                 for line in lines if line.startswith("coverage: "))
    assert match, lines
    percent, covered, total = float(match[1]), int(match[2]), int(match[3])
    assert total == rule_count() and covered < total
    assert percent == round(100 * covered / total, 1) and percent < 90
    assert f"coverage {match[1]}% is below the threshold 90%" in lines
    assert lines[-1].endswith("passed, 0 failed")  # every case passed; only the threshold failed


def test_a_failing_case_shows_expected_and_actual(tmp_path):
    tests = write(tmp_path / "site.yaml", {
        "kind": "tests",
        "cases": [{
            "name": "ExampleConnector is not enabled",
            "document": {"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}},
            "expect": {"outcome": "enabled", "hma_enabled": True, "warnings": [], "fired": ["hma.default_on"],
                       "not_fired": ["hma.auto_need_disable"]},
        }, {
            "name": "NixlConnector is enabled",
            "document": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}},
            "expect": {"outcome": "enabled"},
        }],
    })
    result = hma("test", str(tests))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    start = lines.index(f"FAIL site.yaml > ExampleConnector is not enabled  ({tests}:3)")
    detail = lines[start + 1:start + 6]
    assert all(line.startswith("    ") for line in detail), lines
    detail = [line.strip() for line in detail]
    assert detail[0] == 'outcome: expected "enabled", got "disabled"'
    assert re.fullmatch(r"hma_enabled: expected (True|true), got (False|false)", detail[1])
    assert detail[2] == "warnings: expected [], got ['hma.auto_disabled']"
    assert detail[3] == "fired: `hma.default_on` did not fire"
    assert detail[4] == "not_fired: `hma.auto_need_disable` fired"
    assert "NixlConnector is enabled" not in result.stdout  # passing cases are quiet without -v
    assert lines[-1] == "1 passed, 1 failed"


def test_a_run_that_executes_no_test_fails(tmp_path):
    tests = write(tmp_path / "skipped.yaml", {
        "kind": "tests",
        "cases": [{"name": "later", "document": {}, "skip": "waiting for vLLM 0.34", "expect": {"outcome": "enabled"}}],
    })
    result = hma("test", str(tests))
    assert result.returncode == 1
    assert "SKIP skipped.yaml > later (waiting for vLLM 0.34)" in result.stdout.splitlines()
    assert "no test ran" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "0 passed, 0 failed, 1 skipped"

    empty = tmp_path / "empty"
    empty.mkdir()
    result = hma("test", str(empty))
    assert result.returncode == 1
    assert "no test ran" in result.stdout.splitlines()


@pytest.mark.parametrize("skip", ["", True, None])
def test_a_skip_needs_a_reason(tmp_path, skip):
    tests = write(tmp_path / "bad.yaml", {
        "kind": "tests",
        "cases": [{"name": "later", "document": {}, "skip": skip, "expect": {"outcome": "enabled"}}],
    })
    result = hma("test", str(tests))
    assert result.returncode == 2
    assert result.stdout == ""  # an invalid test file is an error: on standard error, with its line
    assert f"{tests}:5:9: tests.schema: " in result.stderr
    assert "/cases/0/skip" in result.stderr
    assert "passed" not in result.stderr


def test_merge_patch_null_deletes_a_key(tmp_path):
    """RFC 7386: null in a patch deletes the key (it does not set it to null),
    other keys of a patched object stay, and arrays are replaced whole."""
    tests = write(tmp_path / "patch.yaml", {
        "kind": "tests",
        "bases": {"nixl": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                           "disable_hybrid_kv_cache_manager": True}},
        "cases": [
            # Deleted, kv_role is missing from the object: the problem is at the object.
            # Set to null, it would be reported at /kv_transfer_config/kv_role.
            {"name": "null deletes kv_role", "base": "nixl", "patch": {"kv_transfer_config": {"kv_role": None}},
             "expect": {"outcome": "error", "error": {"stage": "input", "code": "connector.role_missing",
                                                      "path": "/kv_transfer_config"}}},
            # Deleting the explicit disable leaves no preference: vLLM decides from the connector.
            {"name": "null deletes the preference", "base": "nixl", "patch": {"disable_hybrid_kv_cache_manager": None},
             "expect": {"outcome": "enabled", "hma_enabled": True, "fired": ["hma.default_on"]}},
            # A nested patch keeps the siblings (kv_role stays).
            {"name": "a nested patch keeps the other keys", "base": "nixl",
             "patch": {"kv_transfer_config": {"kv_connector": "ExampleConnector"}},
             "expect": {"outcome": "disabled", "hma_enabled": False, "warnings": [], "fired": ["hma.explicit_disable"]}},
        ],
    })
    result = hma("test", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "3 passed, 0 failed"
    # The same document with kv_role: null is a different document.
    explicit_null = write(tmp_path / "null.yaml", {"kind": "tests", "cases": [{
        "name": "kv_role null", "document": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": None}},
        "expect": {"error": {"stage": "input", "code": "connector.role_missing", "path": "/kv_transfer_config/kv_role"}}}]})
    assert hma("test", str(explicit_null)).returncode == 0


@pytest.mark.parametrize("target, patch, result", [
    # RFC 7386, Appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_follows_rfc_7386(target, patch, result):
    before = json.dumps(target)
    assert merge_patch(target, patch) == result
    assert json.dumps(target) == before  # the base is not modified


def test_test_json_output(tmp_path):
    run, _ = bundled_cases()
    result = hma("test", "--format", "json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert list(data) == ["passed", "failed", "skipped", "coverage", "rules", "uncovered", "registry", "cases"]
    assert (data["passed"], data["failed"], data["skipped"]) == (run, 0, 0)
    assert data["coverage"] == 100.0 and data["uncovered"] == []
    assert data["rules"] == rule_count()
    assert data["registry"] == {"total": registry_rule_count(), "uncovered": []}
    assert len(data["cases"]) == run
    assert all(list(c) == ["id", "file", "line", "passed", "skipped", "skip", "mismatches"] for c in data["cases"])
    assert all(re.fullmatch(r"rules/epochs/E8/tests/(decision|registry)\.yaml", c["file"]) and c["line"] > 1 for c in data["cases"])
    assert all(c["passed"] and not c["mismatches"] for c in data["cases"])
    assert all(re.fullmatch(r"(decision|registry)\.yaml > .+", c["id"]) for c in data["cases"])


# -- hma-policy diff ----------------------------------------------------------------------

def documented_examples() -> list[str]:
    """The ten documents of examples/README.md's table, as paths relative to the
    repository. The diff runs over these files: examples/ also holds other
    corpora in subfolders (examples/fleet), which this README does not describe."""
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    names = re.findall(r"^\| \[`([^`]+)`\]\(\1\) \|", readme, flags=re.M)
    top = sorted(p.name for p in EXAMPLES.iterdir() if p.is_file() and p.suffix in (".json", ".yaml", ".yml"))
    assert sorted(names) == top and len(names) == 10
    return [f"examples/{name}" for name in sorted(names)]


@pytest.fixture(scope="module")
def flipped(tmp_path_factory):
    """A copy in which LMCacheConnectorV1 inherits SupportsHMA."""
    return lmcache_supported(tmp_path_factory.mktemp("diff") / "flipped")


# Worked out from examples/README.md (recorded outcomes) and vLLM's rule that a
# MultiConnector supports HMA only when every child does, not from the tool.
# Of the ten documents, three name LMCacheConnectorV1:
# - lmcache-offload.yaml: the top-level connector, no preference: disabled with
#   hma.auto_disabled and model.hybrid_kv_unoptimized (sliding window + full
#   attention); once it supports HMA, HMA stays on: enabled, no warning.
# - multi-mixed.json: MultiConnector[NixlConnector, LMCacheConnectorV1], no
#   preference: disabled with hma.auto_disabled; with both children supporting
#   HMA: enabled, no warning (full attention only).
# - offloading-shorthand.json: --kv-offloading-size replaces it with
#   OffloadingConnector before the decision: unchanged.
# The others never build it; invalid-typo.json is an input error both times.
EXPECTED_CHANGES = [
    {
        "source": "examples/lmcache-offload.yaml", "kind": "disabled -> enabled",
        "before": {"outcome": "disabled", "hma_enabled": False, "error": None,
                   "warnings": ["hma.auto_disabled", "model.hybrid_kv_unoptimized"]},
        "after": {"outcome": "enabled", "hma_enabled": True, "error": None, "warnings": []},
        "cause": {"ruleset": "node", "node": "/kv_transfer_config", "step": "class_hma",
                  "before": {"rule": "registry.LMCacheConnectorV1", "value": "unsupported"},
                  "after": {"rule": "registry.LMCacheConnectorV1", "value": "supported"}},
    },
    {
        "source": "examples/multi-mixed.json", "kind": "disabled -> enabled",
        "before": {"outcome": "disabled", "hma_enabled": False, "error": None, "warnings": ["hma.auto_disabled"]},
        "after": {"outcome": "enabled", "hma_enabled": True, "error": None, "warnings": []},
        "cause": {"ruleset": "node", "node": "/kv_transfer_config/kv_connector_extra_config/connectors/1",
                  "step": "class_hma",
                  "before": {"rule": "registry.LMCacheConnectorV1", "value": "unsupported"},
                  "after": {"rule": "registry.LMCacheConnectorV1", "value": "supported"}},
    },
]


def test_diff_of_a_registry_flip_json(flipped):
    result = hma("diff", "--base", "rules", "--head", str(flipped), *documented_examples(), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["base", "head", "documents", "changed", "unchanged", "by_kind", "changes", "unreadable", "rules"]
    assert re.fullmatch(r"rules \(sha256:[0-9a-f]{12}\)", data["base"])
    assert re.fullmatch(re.escape(str(flipped)) + r" \(sha256:[0-9a-f]{12}\)", data["head"])
    assert data["documents"] == 10
    assert (data["changed"], data["unchanged"]) == (2, 8)
    assert data["by_kind"] == {"disabled -> enabled": 2}
    assert data["changes"] == EXPECTED_CHANGES
    assert data["unreadable"] == []
    # multi-mixed.json was the only document where a child made a MultiConnector unsupported.
    assert data["rules"] == {"no_longer_fire": ["node.support.multi_child_unsupported"], "newly_fire": [], "removed": []}


def test_diff_of_a_registry_flip_text(flipped):
    result = hma("diff", "--base", "rules", "--head", str(flipped), *documented_examples())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(re.escape(f"impact of {flipped} (") + r"sha256:[0-9a-f]{12}\) over rules \(sha256:[0-9a-f]{12}\) "
                        r"on 10 documents: 2 changed, 8 unchanged", lines[0])
    assert lines[1] == "  disabled -> enabled: 2"
    changed = [line.split(":", 1)[0] for line in lines if line.startswith("examples/")]
    assert changed == ["examples/lmcache-offload.yaml", "examples/multi-mixed.json"]
    assert re.fullmatch(r"examples/lmcache-offload\.yaml: disabled -> enabled \(hma_enabled (False|false) -> (True|true)\)", lines[2])
    assert lines[3] == "    warnings: -hma.auto_disabled -model.hybrid_kv_unoptimized"
    assert lines[4] == ("    cause: node step `class_hma` at /kv_transfer_config: "
                        "registry.LMCacheConnectorV1 = 'unsupported' -> registry.LMCacheConnectorV1 = 'supported'")
    assert lines[7] == ("    cause: node step `class_hma` at /kv_transfer_config/kv_connector_extra_config/connectors/1: "
                        "registry.LMCacheConnectorV1 = 'unsupported' -> registry.LMCacheConnectorV1 = 'supported'")
    assert lines[-1] == "rules that no longer fire on this corpus: node.support.multi_child_unsupported"


def test_diff_json_counts_an_unreadable_document_once(flipped, tmp_path):
    """Unreadable files are not among `documents`, so `unchanged` is
    documents - changed, as the text summary says."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(EXAMPLES / "lmcache-offload.yaml", corpus)  # changes
    shutil.copy(EXAMPLES / "nixl-pd-decode.json", corpus)  # does not
    (corpus / "zz-broken.yaml").write_text("kv_transfer_config: [\n", encoding="utf-8")
    data = json.loads(hma("diff", "--base", "rules", "--head", str(flipped), str(corpus), "--format", "json").stdout)
    assert [u["source"] for u in data["unreadable"]] == [str(corpus / "zz-broken.yaml")]
    assert (data["documents"], data["changed"]) == (2, 1)
    text = hma("diff", "--base", "rules", "--head", str(flipped), str(corpus)).stdout
    assert text.splitlines()[0].endswith("on 2 documents: 1 changed, 1 unchanged")
    assert data["unchanged"] == 1


def test_diff_against_git_head_inside_the_repo(flipped):
    git = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, cwd=REPO)
    assert git.returncode == 0 and Path(git.stdout.strip()) == REPO
    from_git = hma("diff", "--base", "git:HEAD", "--head", str(flipped), *documented_examples(), "--format", "json")
    from_dir = hma("diff", "--base", "rules", "--head", str(flipped), *documented_examples(), "--format", "json")
    assert from_git.returncode == 0, from_git.stderr
    a, b = json.loads(from_git.stdout), json.loads(from_dir.stdout)
    assert a["base"].startswith("git:HEAD (sha256:")
    # HEAD's rules are the working tree's (rules/ is committed as is).
    tree = subprocess.run(["git", "status", "--porcelain", "--", "rules"], capture_output=True, text=True, cwd=REPO)
    if tree.stdout.strip() == "":
        assert a["base"].split(" ", 1)[1] == b["base"].split(" ", 1)[1]
        assert {k: v for k, v in a.items() if k != "base"} == {k: v for k, v in b.items() if k != "base"}
    assert a["changes"] and all(c["cause"]["step"] == "class_hma" for c in a["changes"])


def test_diff_with_a_bad_revision_exits_2(flipped):
    result = hma("diff", "--base", "git:no-such-revision", "--head", str(flipped), *documented_examples())
    assert result.returncode == 2
    assert result.stdout == ""
    assert "no-such-revision" in result.stderr
    assert "cannot read `rules` at `no-such-revision`" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert len(result.stderr.splitlines()) <= 2


def test_diff_bad_revision_message_has_no_stray_location(flipped):
    """A problem with no file and no pointer is rendered as `/: rules.git: ...`,
    as if it sat at the document root of some file."""
    result = hma("diff", "--base", "git:no-such-revision", "--head", str(flipped), *documented_examples())
    assert "/: " not in result.stderr, result.stderr


@pytest.fixture(scope="module")
def site_rules(tmp_path_factory):
    """After worked example B: a new first decision step that forbids
    LMCacheConnectorV1 at the top, and a MultiConnector with an unsupported child
    (only facts whose names have been stable: top_name, graph_support)."""
    rules = copy_rules(tmp_path_factory.mktemp("diff") / "site")
    edit(rules / "decision.yaml", "steps:\n", """steps:
  - step: site_connector
    hit: unique
    default: allowed
    rules:
      - id: site.forbidden_connector.top
        when: {top_name: LMCacheConnectorV1}
        value: error
        error:
          code: site.forbidden_connector
          stage: config
          message: "connector `{top_name}` is forbidden by site policy"
          at: /kv_transfer_config/kv_connector
      - id: site.forbidden_connector.child
        when: {top_name: MultiConnector, graph_support: unsupported}
        value: error
        error:
          code: site.forbidden_connector
          stage: config
          message: "a child of `{top_name}` does not support HMA, which site policy forbids"
          at: /kv_transfer_config/kv_connector_extra_config/connectors

""")
    return rules


def test_diff_names_an_inserted_step_as_the_cause(site_rules):
    result = hma("diff", "--base", "rules", "--head", str(site_rules), *documented_examples(), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["by_kind"] == {"disabled -> error": 2}
    causes = {c["source"]: c["cause"] for c in data["changes"]}
    assert causes == {
        "examples/lmcache-offload.yaml": {"ruleset": "decision", "node": None, "step": "site_connector", "before": None,
                                          "after": {"rule": "site.forbidden_connector.top", "value": "error"}},
        "examples/multi-mixed.json": {"ruleset": "decision", "node": None, "step": "site_connector", "before": None,
                                      "after": {"rule": "site.forbidden_connector.child", "value": "error"}},
    }
    text = hma("diff", "--base", "rules", "--head", str(site_rules), *documented_examples()).stdout
    assert "    cause: decision step `site_connector`: (step absent) -> site.forbidden_connector.top = 'error'" in text.splitlines()


def test_diff_names_a_removed_step_as_the_cause(site_rules):
    """The same change backwards: the step that no longer exists (and no longer
    halts the decision) is the cause, not `hisparse_active`, the first step the
    base never reached."""
    result = hma("diff", "--base", str(site_rules), "--head", "rules", *documented_examples(), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["by_kind"] == {"error -> disabled": 2}
    assert data["rules"]["removed"] == ["site.forbidden_connector.child", "site.forbidden_connector.top"]
    causes = {c["source"]: c["cause"] for c in data["changes"]}
    assert causes == {
        "examples/lmcache-offload.yaml": {"ruleset": "decision", "node": None, "step": "site_connector",
                                          "before": {"rule": "site.forbidden_connector.top", "value": "error"}, "after": None},
        "examples/multi-mixed.json": {"ruleset": "decision", "node": None, "step": "site_connector",
                                      "before": {"rule": "site.forbidden_connector.child", "value": "error"}, "after": None},
    }


# -- git revisions are never git options (issue 20, item 3) ----------------------------------------

@pytest.mark.parametrize("spec", ["git:--output={victim}:HEAD", "git:--output={victim}", "git:HEAD:--output={victim}"])
def test_a_revision_or_path_spelled_as_an_option_is_not_one(tmp_path, spec):
    # `git:--output=FILE:HEAD` ran `git archive --format=tar --output=FILE HEAD -- rules`: git wrote a
    # tar over a file of the user's choosing. Now the revision is resolved with
    # `git rev-parse --verify --end-of-options REV^{commit}` and nothing user-given precedes
    # `--end-of-options`: no such commit, exit 2, and the file is untouched.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    given = spec.format(victim=victim)
    result = hma("diff", "--base", given, "examples/multi-mixed.json")
    assert (result.returncode, result.stdout) == (2, "")
    # (the first line of standard error says which policies are compared)
    assert result.stderr.splitlines()[-1].startswith("hma-policy: cannot read the rules from git: cannot read `")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


def test_a_rules_path_outside_the_repository_is_refused():
    result = hma("diff", "--base", "git:HEAD:../rules", "examples/multi-mixed.json")
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        2, "hma-policy: cannot read the rules from git: `../rules` is not a path inside the repository")


def test_a_fifo_given_as_a_test_file_is_refused_not_waited_on(tmp_path):
    # `hma-policy test FIFO` opened it and waited for a writer forever.
    import os

    fifo = tmp_path / "cases.yaml"
    os.mkfifo(fifo)
    result = hma("test", str(fifo))
    assert (result.returncode, result.stdout) == (2, "")  # the problems of a test file are written to standard error
    assert f"{fifo}: tests.read: cannot read test file: " in result.stderr
    assert "a FIFO, not a regular file" in result.stderr
