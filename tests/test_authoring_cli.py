"""The policy author's command line (issue 19): vacuous tests, diff over every
deployment audit finds, locations an editor can open, schemas for editors,
one way to name a policy, and the CLI conventions (streams, exit statuses,
standard input, --quiet, colour, completion)."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

import hma_policy
from rulecopy import copy_rules, edit, lmcache_supported

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
SCHEMAS = REPO / "schemas"
BUNDLED = hma_policy.load_policy().digest


def hma(*args: str, cwd: Path = REPO, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], capture_output=True, text=True, cwd=cwd,
                               input=stdin, timeout=300, env={**os.environ, **(env or {})})
    assert "Traceback" not in completed.stdout + completed.stderr, completed.stderr
    return completed


def line_of(path: Path, text: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


# -- vacuous tests ------------------------------------------------------------------------------

VACUOUS = """kind: tests
cases:
  - name: a typo in not_fired
    document: {kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}}
    expect:
      outcome: enabled
      not_fired: [registry.NixlConector]
  - name: codes that do not exist
    document: {kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}}
    expect:
      error: {stage: config, code: hma.explict_enable_conflict}
      warnings: [hma.auto_disable]
      fired: [hma.default_on]
"""


def test_an_expectation_naming_what_the_policy_does_not_define_is_an_error(tmp_path):
    # Today `not_fired: [registry.NixlConector]` passes: the rule never fires
    # because it does not exist. Each such name is an error, at its line.
    (tmp_path / "site.yaml").write_text(VACUOUS, encoding="utf-8")
    result = hma("test", "site.yaml", "--format", "concise", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "hma-policy: policy bundled (" + BUNDLED[:19] + ") for vLLM 0.33.0",
        "site.yaml:7:19: tests.unknown_rule: case `a typo in not_fired` expects rule id `registry.NixlConector`, "
        "which the policy does not define (at /cases/0/expect/not_fired/0) (hint: did you mean `registry.NixlConnector`?)",
        "site.yaml:11:36: tests.unknown_error: case `codes that do not exist` expects error code `hma.explict_enable_conflict`, "
        "which the policy does not define (at /cases/1/expect/error/code) (hint: did you mean `hma.explicit_enable_conflict`?)",
        "site.yaml:12:18: tests.unknown_warning: case `codes that do not exist` expects warning code `hma.auto_disable`, "
        "which the policy does not define (at /cases/1/expect/warnings/0) (hint: did you mean `hma.auto_disabled`?)",
        "3 problem(s) in the test files; no test ran",
    ]


def test_the_full_format_shows_the_test_file_line_with_a_caret(tmp_path):
    (tmp_path / "site.yaml").write_text(VACUOUS, encoding="utf-8")
    lines = hma("test", "site.yaml", cwd=tmp_path).stderr.splitlines()
    start = lines.index("site.yaml:7:19: tests.unknown_rule: case `a typo in not_fired` expects rule id "
                        "`registry.NixlConector`, which the policy does not define (at /cases/0/expect/not_fired/0)")
    assert lines[start + 1:start + 5] == [
        "  |",
        "7 |       not_fired: [registry.NixlConector]",
        "  | " + " " * 18 + "^",
        "  = hint: did you mean `registry.NixlConnector`?",
    ]


def test_input_codes_and_schema_codes_are_defined(tmp_path):
    # Errors of stage input are the engine's (and the schema's x-code), not the rules'.
    (tmp_path / "t.yaml").write_text("""kind: tests
cases:
  - name: role missing
    document: {kv_transfer_config: {kv_connector: NixlConnector}}
    expect: {error: {stage: input, code: connector.role_missing}}
  - name: schema
    document: {kv_transfer_config: {kv_conector: NixlConnector, kv_role: kv_both}}
    expect: {error: {stage: input, code: input.schema}}
""", encoding="utf-8")
    result = hma("test", "t.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "2 passed, 0 failed"


def test_the_input_codes_are_the_documented_ones():
    from hma_policy.authoring.testing import INPUT_CODES

    doc = (REPO / "docs" / "decision.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(input\.[a-z_]+)` \| input \|", doc, re.M))
    assert documented == set(INPUT_CODES)


def test_test_files_from_standard_input(tmp_path):
    text = VACUOUS.replace("      not_fired: [registry.NixlConector]\n", "").replace("explict", "explicit")
    result = hma("test", "-", stdin=text.replace("auto_disable]", "auto_disabled]"), cwd=tmp_path)
    assert result.returncode == 1  # the second case fails: no error, no warning
    assert result.stdout.splitlines()[0] == "FAIL - > codes that do not exist  (-:7)"
    assert result.stdout.splitlines()[-1] == "1 passed, 1 failed"


# -- diff over every deployment audit finds ------------------------------------------------------

@pytest.fixture(scope="module")
def flipped(tmp_path_factory):
    return lmcache_supported(tmp_path_factory.mktemp("au") / "flipped")


def test_diff_reports_every_deployment_audit_finds(flipped):
    audit = json.loads(hma("audit", "examples/fleet", "--format", "json").stdout)
    result = hma("diff", "--base", "rules", "--head", str(flipped), "examples/fleet", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    unreadable = {u["source"]: u["problem"] for u in data["unreadable"]}
    # Every deployment is decided or listed as not decided; the broken file too.
    assert data["documents"] + len(unreadable) == len(audit["deployments"]) + len(audit["problems"]) == 39
    unresolved = [e["id"] for e in audit["deployments"] if e["decision"]["errors"]
                  and e["decision"]["errors"][0]["code"].startswith("source.")]
    assert set(unreadable) == {p["file"] for p in audit["problems"]} | set(unresolved)
    assert unreadable["examples/fleet/scripts/launch-from-env.sh:5"].startswith("source.unresolved: ")
    # Kubernetes manifests, scripts, Dockerfiles and config files are decided,
    # each deployment on its own: LMCacheConnectorV1 users change.
    changed = {c["source"] for c in data["changes"]}
    assert {"examples/fleet/docker/Dockerfile.lmcache:8", "examples/fleet/vllm-configs/lmcache-base.yaml",
            "examples/fleet/k8s/lmcache-statefulset.yaml#StatefulSet/chat/gemma-chat/server",
            "examples/fleet/documents/explicit-enable-lmcache.yaml"} <= changed
    assert data["changed"] == len(changed) and data["unchanged"] == data["documents"] - data["changed"]


def test_diff_text_over_the_fleet_lists_what_it_could_not_decide(flipped):
    lines = hma("diff", "--base", "rules", "--head", str(flipped), "examples/fleet").stdout.splitlines()
    assert re.fullmatch(r"impact of \S+ \(sha256:\w+\) over rules \(sha256:\w+\) on 37 documents: \d+ changed, \d+ unchanged",
                        lines[0])
    assert ("examples/fleet/documents/broken.yaml: not decided: input.parse: invalid YAML in "
            "`examples/fleet/documents/broken.yaml` at line 6, column 12: mapping values are not allowed in this context") in lines
    assert any(line.startswith("examples/fleet/scripts/launch-from-env.sh:5: not decided: source.unresolved:") for line in lines)


def test_diff_with_one_policy_compares_it_against_the_bundled_rules(flipped):
    # `--base mine` alone used to mean mine -> bundled, silently: the change
    # an author made, reported backwards. Now bundled -> mine, and it says so.
    one = hma("diff", "--base", str(flipped), "examples/multi-mixed.json", "--format", "json")
    both = hma("diff", "--base", "bundled", "--head", str(flipped), "examples/multi-mixed.json", "--format", "json")
    assert one.returncode == both.returncode == 0
    assert json.loads(one.stdout)["changes"] == json.loads(both.stdout)["changes"]
    assert json.loads(one.stdout)["by_kind"] == {"disabled -> enabled": 1}
    assert f"no --head: comparing {flipped} against the bundled rules (bundled -> {flipped})" in one.stderr
    rules_spelling = hma("diff", "--rules", str(flipped), "examples/multi-mixed.json", "--format", "json")
    assert json.loads(rules_spelling.stdout)["by_kind"] == {"disabled -> enabled": 1}


@pytest.mark.parametrize("args, message", [
    (["diff", "examples/multi-mixed.json"], "hma-policy: error: diff: name the changed policy"),
    (["diff", "--head", "rules", "no/such/file.json"], "hma-policy: error: diff: no such file or directory: `no/such/file.json`"),
    (["rules", "check", "/nonexistent"], "hma-policy: /nonexistent: rules.read: `/nonexistent` does not exist"),
    (["rules", "check", "--rules", "README.md"], "hma-policy: README.md: rules.read: `README.md` is not a directory"),
    (["rules", "check", "rules", "--rules", "rules"], "hma-policy: error: rules check: name the rules once"),
    (["test", "no/such/tests.yaml"], "hma-policy: error: test: no such test file or directory: `no/such/tests.yaml`"),
    (["decide", "examples/multi-mixed.json", "--rules", "nowhere"], "hma-policy: nowhere: rules.read: `nowhere` does not exist"),
    (["diff", "--head", "git:", "examples/multi-mixed.json"], "hma-policy: cannot read the rules from git: `git:` names no revision"),
])
def test_usage_errors_exit_2_on_standard_error(args, message):
    result = hma(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(message), result.stderr


# -- locations -------------------------------------------------------------------------------------

@pytest.fixture
def broken_copy(tmp_path):
    rules = copy_rules(tmp_path / "work" / "my-rules")
    edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}")
    return rules


def test_rules_check_of_a_release_checks_that_releases_policy():
    """`--rules vllm:X` checks release X's policy (its epoch and registry),
    not the default release's: 0.30.0's registry lacks 0.33.0's
    UMBPStoreConnector, so the two policies differ in digest and rules."""
    import hma_policy

    checked = {}
    for release in ("0.30.0", "0.33.0"):
        result = hma("rules", "check", "--rules", f"vllm:{release}", "--format", "json")
        assert result.returncode == 0, result.stderr
        checked[release] = json.loads(result.stdout)
        policy = hma_policy.load_policy(release=release)
        try:
            assert checked[release]["digest"] == policy.digest
        finally:
            policy.close()
    assert checked["0.30.0"]["digest"] != checked["0.33.0"]["digest"]


def test_rule_problems_are_named_from_the_current_directory_with_a_snippet(broken_copy):
    line = line_of(broken_copy / "decision.yaml", "preferance")
    # The value's position: where the fact's condition is.
    column = (broken_copy / "decision.yaml").read_text(encoding="utf-8").splitlines()[line - 1].index("preferance: ") + 13
    source = (broken_copy / "decision.yaml").read_text(encoding="utf-8").splitlines()[line - 1]
    result = hma("rules", "check", "--rules", "my-rules", cwd=broken_copy.parent)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    head = (f"my-rules/decision.yaml:{line}:{column}: rules.unknown_fact: rule `hma.explicit_disable` reads unknown fact "
            f"`preferance` (at /steps/6/rules/2/when/preferance)")
    pad = " " * len(str(line))
    assert lines[:5] == [head, f"{pad} |", f"{line} | {source}", f"{pad} | {' ' * (column - 1)}^",
                         f"{pad} = hint: did you mean `preference`?"]
    assert lines[-1] == "1 problem(s) in my-rules"
    # From another directory the same file is named from there.
    deeper = broken_copy.parent / "sub"
    deeper.mkdir()
    concise = hma("rules", "check", "--rules", "../my-rules", "--format", "concise", cwd=deeper)
    assert concise.stdout.splitlines()[0] == f"{broken_copy / 'decision.yaml'}:{line}:{column}: rules.unknown_fact: " \
        "rule `hma.explicit_disable` reads unknown fact `preferance` (at /steps/6/rules/2/when/preferance) (hint: did you mean `preference`?)"
    assert len(concise.stdout.splitlines()) == 2


def test_the_bundled_rules_are_named_where_they_are(tmp_path):
    # A problem in the bundled rules would be named by its path on disk, relative when inside the current directory.
    from hma_policy.authoring.diagnostics import Diagnostic, bundled_rules_dir, display_path, from_problem
    from hma_policy.core.errors import Problem

    problem = Problem("rules.x", "m", "/steps/0", file="decision.yaml", line=3, column=4)
    assert from_problem(problem, bundled_rules_dir(), spec="bundled").file == display_path(bundled_rules_dir() / "decision.yaml")
    assert display_path(REPO / "rules" / "decision.yaml", cwd=str(REPO)) == os.path.join("rules", "decision.yaml")
    assert display_path(REPO / "rules" / "decision.yaml", cwd=str(tmp_path)) == str(REPO / "rules" / "decision.yaml")
    assert isinstance(from_problem(problem), Diagnostic)


def test_verify_findings_get_the_line_of_their_rule(tmp_path):
    rules = copy_rules(tmp_path / "r")
    edit(rules / "decision.yaml", "steps:\n", """steps:
  - step: site_step
    rules:
      - id: site.never
        when: {top_name: NixlConnector, has_kv_transfer_config: false}
        value: x
    default: y

""")
    result = hma("rules", "check", "--rules", "r", "--format", "concise", cwd=tmp_path)
    assert result.returncode == 1
    line = line_of(rules / "decision.yaml", "- id: site.never")
    assert result.stdout.splitlines()[0] == (f"r/decision.yaml:{line}:9: verify.unreachable: rule `site.never` never matches "
                                             "any reachable combination of facts (at /steps/0/rules/0)")
    data = json.loads(hma("rules", "check", "--rules", "r", "--format", "json", cwd=tmp_path).stdout)
    finding = next(f for f in data["findings"] if f["code"] == "verify.unreachable")
    assert (finding["line"], finding["column"]) == (line, 9)
    assert data["rules_dir"] == "r" and data["policy"] == "r"


def test_a_finding_with_a_line_of_its_own_keeps_it():
    # The verifier will locate its findings itself: the renderer takes their line.
    from types import SimpleNamespace

    from hma_policy.authoring.commands import _finding_diagnostic

    finding = SimpleNamespace(code="verify.gap", message="m", severity="error", file="decision.yaml", path="/steps/0",
                              facts=(), document=None, reproduced=None, line=42, column=7)
    diagnostic = _finding_diagnostic(finding, RULES)
    assert (diagnostic.line, diagnostic.column) == (42, 7)


def test_yaml_syntax_errors_keep_pyyaml_context(tmp_path):
    rules = copy_rules(tmp_path / "r")
    edit(rules / "offloading.yaml", "        when: {kv_offloading_size_set: false}\n", "        when: {kv_offloading_size_set: false\n")
    line = line_of(rules / "offloading.yaml", "when: {kv_offloading_size_set: false")
    result = hma("rules", "check", "r", "--format", "concise", cwd=tmp_path)
    assert result.stdout.splitlines()[0] == (f"r/offloading.yaml:{line + 1}:14: rules.parse: invalid YAML: did not find expected "
                                             f"',' or '}}' (while parsing a flow mapping at line {line}, column 15)")
    # Deployment documents too.
    (tmp_path / "d.yaml").write_text("kv_transfer_config: {kv_connector: NixlConnector\nx: 1\n", encoding="utf-8")
    out = json.loads(hma("decide", "d.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert out["errors"][0]["message"].endswith("(while parsing a flow mapping at line 1, column 21)")


# -- schemas for editors -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["deployment", "rules", "tests", "decision"])
def test_every_schema_has_a_stable_id_and_the_command_prints_it(name):
    text = (SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    assert schema["$id"] == f"https://hma-policy.dev/schemas/{name}.schema.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    result = hma("schema", name)
    assert result.returncode == 0
    assert result.stdout == text if text.endswith("\n") else text + "\n"


def test_schema_without_a_name_lists_them():
    assert hma("schema").stdout.splitlines() == [
        f"{name}\thttps://hma-policy.dev/schemas/{name}.schema.json" for name in ("deployment", "rules", "tests", "decision", "releases")]


HEADER = re.compile(r"^# yaml-language-server: \$schema=(\S+)$", re.M)


def test_rules_init_writes_a_copy_whose_schema_headers_work(tmp_path):
    result = hma("rules", "init", "site", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("hma-policy: wrote a copy of the bundled rules of vLLM 0.33.0 to site (")
    site = tmp_path / "site"
    names = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    # A plain folder: the release's epoch files, its registry as connectors.yaml, its tests, the schemas.
    epoch = RULES / "epochs" / "E8"
    assert names == sorted([f.name for f in epoch.glob("*.yaml")] + ["connectors.yaml", "modules.json"]
                           + [f"tests/{f.name}" for f in (epoch / "tests").glob("*.yaml")]
                           + [f"schemas/{f.name}" for f in SCHEMAS.glob("*.schema.json")])
    assert not [p for p in tmp_path.iterdir() if p.name != "site"]  # no staging folder left
    # Each header names a schema file that exists beside the copy, and each
    # file is valid against it, as an editor would check it, offline.
    for path in [*site.glob("*.yaml"), *(site / "tests").glob("*.yaml")]:
        (target,) = HEADER.findall(path.read_text(encoding="utf-8"))
        schema_file = (path.parent / target).resolve()
        assert schema_file.is_file() and schema_file.parent == (site / "schemas").resolve(), (path, target)
        Draft202012Validator(json.loads(schema_file.read_text(encoding="utf-8"))).validate(
            yaml.safe_load(path.read_text(encoding="utf-8")))
    # The copy is the bundled policy (its digest differs: the headers are
    # part of the files): its checks and tests pass.
    check = hma("rules", "check", "--rules", "site", cwd=tmp_path)
    assert check.returncode == 0 and check.stdout.startswith("ok: site (")
    tests = hma("test", "--rules", "site", "--threshold", "100", cwd=tmp_path)
    assert tests.returncode == 0, tests.stdout


def test_rules_init_refuses_a_folder_that_is_not_empty(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "decision.yaml").write_text("mine\n", encoding="utf-8")
    (site / "notes.txt").write_text("keep\n", encoding="utf-8")
    result = hma("rules", "init", "site", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("hma-policy: error: rules init: `site` is not empty; choose another directory, "
                             "or --force to write into it\n")
    assert (site / "decision.yaml").read_text(encoding="utf-8") == "mine\n"
    assert hma("rules", "init", "site", "--force", cwd=tmp_path).returncode == 0
    assert (site / "decision.yaml").read_bytes() == (RULES / "epochs" / "E8" / "decision.yaml").read_bytes().replace(
        b"$schema=../../../schemas/rules.schema.json", b"$schema=schemas/rules.schema.json")
    assert (site / "notes.txt").read_text(encoding="utf-8") == "keep\n"
    assert sorted(p.name for p in site.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert hma("rules", "init", "file", cwd=tmp_path).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert hma("rules", "init", "empty", cwd=tmp_path).returncode == 0
    assert (empty / "connectors.yaml").is_file()


def test_write_tree_leaves_nothing_when_it_fails(tmp_path, monkeypatch):
    from hma_policy import fileio

    real_fsync = fileio.os.fsync
    calls = []

    def boom(fd):
        calls.append(fd)
        if len(calls) == 2:  # the second file of the tree: the disk is full
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(fileio.os, "fsync", boom)
    with pytest.raises(OSError):
        fileio.write_tree(tmp_path / "copy", {"a.yaml": b"x", "tests/b.yaml": b"y"})
    assert list(tmp_path.iterdir()) == []


# -- one way to name a policy -------------------------------------------------------------------------

def test_every_command_takes_rules_and_says_which_policy_it_used(tmp_path):
    copy_rules(tmp_path / "mine")
    mine = hma_policy.load_policy(tmp_path / "mine").digest
    shutil.copy(REPO / "examples" / "multi-mixed.json", tmp_path)
    label = f"mine ({mine[:19]})"
    text = hma("decide", "multi-mixed.json", "--rules", "mine", cwd=tmp_path)
    assert text.stdout.splitlines()[-2:] == ["vllm: 0.33.0 (rules folder)", f"policy: {mine} (mine)"]
    assert text.stderr == ""
    data = hma("decide", "multi-mixed.json", "--rules", "mine", "--format", "json", cwd=tmp_path)
    assert data.stderr == f"hma-policy: policy {label}\n"
    explain = hma("explain", "multi-mixed.json", "--rules", "mine", cwd=tmp_path)
    assert explain.stdout.splitlines()[-1] == f"policy: {mine} (mine)"
    assert hma("validate", "multi-mixed.json", "--rules", "mine", cwd=tmp_path).returncode == 0
    audit = hma("audit", "multi-mixed.json", "--rules", "mine", cwd=tmp_path)
    assert audit.stdout.startswith(f"hma-policy audit of multi-mixed.json: 1 deployment(s) in 1 file(s) (policy mine, {mine[:19]})")
    test = hma("test", "--rules", "mine", cwd=tmp_path)
    assert test.returncode == 0 and test.stderr == f"hma-policy: policy {label} for vLLM 0.33.0\n"
    for args in (["rules", "check", "--rules", "mine"], ["rules", "check", "mine"]):
        assert hma(*args, cwd=tmp_path).stdout.startswith(f"ok: {label}: ")
    verify = hma("rules", "verify", "--rules", "mine", "--format", "concise", cwd=tmp_path)
    assert verify.stdout.splitlines()[-1].startswith(f"ok: {label}: ")
    assert hma("rules", "check", "--rules", "bundled", cwd=tmp_path).stdout.startswith(f"ok: bundled ({BUNDLED[:19]}): ")


def test_git_references_work_everywhere_a_policy_is_named():
    result = hma("decide", "examples/multi-mixed.json", "--rules", "git:HEAD", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("hma-policy: policy git:HEAD (sha256:")
    assert hma("rules", "check", "--rules", "git:HEAD", "--format", "concise").stdout.splitlines()[-1].startswith("ok: git:HEAD (")


def test_a_new_scheme_is_one_entry(tmp_path, monkeypatch):
    from hma_policy import policyref

    monkeypatch.setitem(policyref.SCHEMES, "copy", lambda spec, workdir: copy_rules(workdir / spec.split(":", 1)[1]))
    with policyref.opened("copy:x") as ref:
        assert ref.name == "copy:x" and (ref.directory / "decision.yaml").is_file()
        kept = ref.directory
    assert not kept.exists()  # the temporary folder is removed with the block
    assert policyref.resolve(None) == policyref.resolve("bundled") == policyref.PolicyRef("bundled", None)
    assert policyref.resolve(str(RULES)).directory == RULES
    with pytest.raises(policyref.PolicyRefError):
        policyref.resolve("copy:x")  # a scheme needs a folder to write into


# -- CLI conventions -----------------------------------------------------------------------------------

def test_decide_takes_several_files():
    files = ["examples/nixl-pd-decode.json", "examples/explicit-enable-unsupported.yaml", "examples/invalid-typo.json"]
    text = hma("decide", *files)
    assert text.returncode == 2  # the worst: an invalid document
    blocks = text.stdout.split("\n\n")
    assert [b.splitlines()[0].split(":")[0] for b in blocks] == files
    data = hma("decide", *files, "--format", "json")
    assert data.returncode == 2
    decided = json.loads(data.stdout)
    assert [d["file"] for d in decided] == files
    assert [d["decision"]["outcome"] for d in decided] == ["enabled", "error", "error"]
    assert hma("decide", files[0], files[1]).returncode == 1
    one = json.loads(hma("decide", files[0], "--format", "json").stdout)
    assert one["outcome"] == "enabled"  # one file: its decision, as always


def test_explain_json():
    result = hma("explain", "examples/multi-mixed.json", "--format", "json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    decision = json.loads(hma("decide", "examples/multi-mixed.json", "--format", "json").stdout)
    assert {k: v for k, v in data.items() if k != "steps"} == decision
    step = next(s for s in data["steps"] if s["step"] == "hma")
    assert step == {"ruleset": "decision", "node": None, "step": "hma", "value": "disabled", "rule": "hma.auto_need_disable",
                    "facts": {"preference": "none", "need_disable": True, "connector_check": "unsupported"}}


def test_quiet_drops_notes_but_not_results_or_errors(tmp_path):
    result = hma("decide", "examples/multi-mixed.json", "--format", "json", "--quiet")
    assert result.stderr == "" and json.loads(result.stdout)["outcome"] == "disabled"
    assert hma("--quiet", "test").stderr == ""
    out = tmp_path / "r.json"
    written = hma("audit", "examples/fleet", "-o", str(out), "--format", "json", "-q", "--fail-on", "error")
    assert written.returncode == 1 and written.stderr == "hma-policy: --fail-on met: error: 7\n"
    assert hma("rules", "check", "/nonexistent", "-q").stderr.startswith("hma-policy: /nonexistent: rules.read")


def run_on_a_terminal(*args: str, env: dict | None = None) -> str:
    """The command's standard output when it is a terminal."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "hma_policy", *args], cwd=REPO, stdout=secondary, stderr=subprocess.DEVNULL,
                            env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(main)
    return b"".join(chunks).decode("utf-8")


@pytest.fixture(scope="module")
def broken_for_colour(tmp_path_factory):
    rules = copy_rules(tmp_path_factory.mktemp("colour") / "r")
    edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}")
    return str(rules)


def test_colour_on_a_terminal_unless_no_color(broken_for_colour):
    env = {"NO_COLOR": None, "TERM": "xterm"}
    assert "\x1b[1;31mrules.unknown_fact\x1b[0m" in run_on_a_terminal("rules", "check", broken_for_colour, env=env)
    assert "\x1b[" not in run_on_a_terminal("rules", "check", broken_for_colour, env={**env, "NO_COLOR": "1"})
    assert "\x1b[" not in run_on_a_terminal("rules", "check", broken_for_colour, "--color", "never", env=env)
    piped = hma("rules", "check", broken_for_colour, env={"NO_COLOR": ""})
    assert "\x1b[" not in piped.stdout  # not a terminal
    forced = hma("rules", "check", broken_for_colour, "--color", "always", env={"NO_COLOR": "1"})
    assert "\x1b[1;31mrules.unknown_fact\x1b[0m" in forced.stdout


def test_shell_completion(tmp_path):
    script = hma("completion", "bash")
    assert script.returncode == 0 and "complete " in script.stdout and "hma-policy" in script.stdout
    for shell in ("zsh", "fish"):
        assert "hma-policy" in hma("completion", shell).stdout
    # What the bash script asks the command for, and the answer.
    answer = tmp_path / "answer"
    env = {"_ARGCOMPLETE": "1", "COMP_LINE": "hma-policy schema ", "COMP_POINT": "18", "_ARGCOMPLETE_IFS": "\n",
           "_ARGCOMPLETE_STDOUT_FILENAME": str(answer)}
    completed = subprocess.run([sys.executable, "-m", "hma_policy"], capture_output=True, text=True, cwd=REPO, timeout=60,
                               env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr
    assert {"deployment", "rules", "tests", "decision"} <= set(answer.read_text().split("\n"))


def test_rules_check_says_when_an_old_rule_folder_gets_the_bundled_sections(tmp_path):
    """A rule folder of hma-policy 0.1 has no `aggregates` and `results`: it
    loads with the bundled ones (its decisions unchanged), and `rules check`
    says so on standard error (the note was kept, never shown)."""
    import subprocess
    import sys

    import yaml
    from rulecopy import copy_rules

    directory = copy_rules(tmp_path / "old")
    for name, key in (("nodes.yaml", "aggregates"), ("decision.yaml", "results")):
        data = yaml.safe_load((directory / name).read_text(encoding="utf-8"))
        del data[key]
        (directory / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "hma_policy", "rules", "check", "--rules", str(directory)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "rules.legacy" in line]
    assert notes == [
        "hma-policy: note: nodes.yaml: rules.legacy: `nodes.yaml` has no `aggregates` (a rule folder of hma-policy 0.1): "
        "the bundled aggregates are used (hint: copy `aggregates` from the bundled nodes.yaml (`hma-policy rules init` writes them))",
        "hma-policy: note: decision.yaml: rules.legacy: `decision.yaml` has no `results` (a rule folder of hma-policy 0.1): "
        "the bundled results are used (hint: copy `results` from the bundled decision.yaml (`hma-policy rules init` writes them))"]
    quiet = subprocess.run([sys.executable, "-m", "hma_policy", "rules", "check", "--quiet", "--rules", str(directory)],
                           capture_output=True, text=True, timeout=120)
    assert "rules.legacy" not in quiet.stderr
