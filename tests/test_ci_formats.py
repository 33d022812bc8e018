"""Results in the formats CI systems read (engine/audit/ci_formats.py):
SARIF 2.1.0 validated against the OASIS schema (tests/data/sarif/), GitHub
workflow commands parsed back as the runner reads them, and JUnit XML read
by junitparser. And the pre-commit hooks, run by pre-commit itself."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from jsonschema import Draft4Validator
from junitparser import Error, Failure, JUnitXml, Skipped

from rulecopy import copy_rules, edit

REPO = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = json.loads((REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def hma(*args: str, cwd: Path = REPO, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], capture_output=True, text=True, cwd=cwd,
                               input=stdin, timeout=300, env={**os.environ, **(env or {})})
    assert "Traceback" not in completed.stdout + completed.stderr, completed.stderr
    return completed


def valid_sarif(text: str) -> dict:
    log = json.loads(text)
    errors = sorted(Draft4Validator(SARIF_SCHEMA).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    return log


def results_by(log: dict) -> list[tuple[str, str, str | None, int | None]]:
    """(ruleId, level, file, line) of each result, the file as a path from the URI."""
    out = []
    for r in log["runs"][0]["results"]:
        location = r["locations"][0]["physicalLocation"] if r.get("locations") else None
        file = unquote(location["artifactLocation"]["uri"]) if location else None
        line = location.get("region", {}).get("startLine") if location else None
        out.append((r["ruleId"], r["level"], file, line))
    return out


def test_the_vendored_schema_is_the_recorded_copy():
    import hashlib

    data = (REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json").read_bytes()
    provenance = (REPO / "tests" / "data" / "sarif" / "PROVENANCE.md").read_text(encoding="utf-8")
    assert hashlib.sha256(data).hexdigest() in provenance
    assert SARIF_SCHEMA["id"].endswith("/sarif-schema-2.1.0.json")


# -- audit -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fleet_sarif():
    completed = hma("audit", "examples/fleet", "--format", "sarif")
    assert completed.returncode == 0, completed.stderr
    return valid_sarif(completed.stdout)


def test_audit_sarif_of_the_fleet_validates_and_points_at_files_and_lines(fleet_sarif):
    results = results_by(fleet_sarif)
    run = fleet_sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "hma-policy"
    assert run["properties"]["policy"]["source"] == "bundled"
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in run["results"])
    errors = {(code, file, line) for code, level, file, line in results if level == "error"}
    # examples/fleet/EXPECTED.md: each error deployment, at its file and line.
    assert ("hisparse.requires_hma", "examples/fleet/scripts/hisparse-disabled.sh", 3) in errors
    assert ("source.unresolved", "examples/fleet/scripts/launch-from-env.sh", 5) in errors
    assert ("hisparse.requires_cuda", "examples/fleet/documents/fleet-batch.yaml", 1) in errors
    assert ("hma.connector_unsupported", "examples/fleet/documents/explicit-enable-lmcache.yaml", 1) in errors
    assert ("hma.connector_unsupported", "examples/fleet/vllm-configs/flexkv-explicit-enable.yaml", 1) in errors
    assert ("input.parse", "examples/fleet/documents/broken.yaml", 6) in errors  # the file problem
    # Seven error deployments (one error each) and the broken file.
    assert len([r for r in results if r[1] == "error"]) == 8
    assert ("source.script_arguments", "note", "examples/fleet/scripts/launch-from-env.sh", 5) in results
    warnings = [r for r in results if r[1] == "warning"]
    assert ("hma.auto_disabled", "warning", "examples/fleet/docker/Dockerfile.lmcache", 8) in warnings
    # Relative paths are relative to the directory the audit ran in.
    uris = {loc["physicalLocation"]["artifactLocation"].get("uriBaseId")
            for r in run["results"] for loc in r.get("locations", [])}
    assert uris == {"%SRCROOT%"}
    for _, _, file, _ in results:
        assert file is None or (REPO / file).is_file(), file


def test_audit_sarif_of_a_kubernetes_error_names_its_resource(fleet_sarif):
    (result,) = [r for r in fleet_sarif["runs"][0]["results"] if r["ruleId"] == "connector.unknown"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "examples/fleet/k8s/typo-connector-pod.yaml"
    assert result["message"]["text"].endswith("(Pod/inference/qwen-decode-canary/vllm)")


def test_audit_sarif_of_an_absolute_path_uses_file_uris(tmp_path):
    shutil.copy(REPO / "examples" / "fleet" / "scripts" / "hisparse-disabled.sh", tmp_path)
    log = valid_sarif(hma("audit", str(tmp_path), "--format", "sarif", cwd=REPO).stdout)
    (location,) = [r["locations"][0]["physicalLocation"] for r in log["runs"][0]["results"] if r["level"] == "error"]
    assert location["artifactLocation"] == {"uri": (tmp_path / "hisparse-disabled.sh").as_uri()}
    assert location["region"] == {"startLine": 3, "startColumn": 1}


GITHUB_LINE = re.compile(r"::(error|warning|notice) ((?:[a-z]+=[^,:]*)(?:,[a-z]+=[^,:]*)*)::(.*)")


def parse_github(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Workflow commands as the runner reads them: properties split on `,`
    and `=`, then each value and the message unescaped."""
    def unescape(value: str) -> str:
        return value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")

    out = []
    for line in text.splitlines():
        match = GITHUB_LINE.fullmatch(line)
        assert match, line
        props = dict(item.split("=", 1) for item in match[2].split(","))
        out.append((match[1], {k: unescape(v) for k, v in props.items()}, unescape(match[3])))
    return out


def test_audit_github_annotations(tmp_path):
    completed = hma("audit", "examples/fleet", "--format", "github")
    assert completed.returncode == 0
    commands = parse_github(completed.stdout)
    assert ("error", {"file": "examples/fleet/scripts/hisparse-disabled.sh", "line": "3", "col": "1",
                      "title": "hisparse.requires_hma"}) in [(c, p) for c, p, _ in commands]
    assert any(c == "notice" and p["title"] == "source.script_arguments" for c, p, _ in commands)
    assert completed.stderr.startswith("hma-policy: policy bundled (sha256:")  # annotations cannot name it


def test_github_escapes_what_the_runner_would_read_as_syntax(tmp_path):
    # A file name with `,` and `:` and `%`, and a message with a newline,
    # must come back whole: unescaped, each is exactly what was written.
    from hma_policy.audit.ci_formats import github

    finding = {"code": "x.y", "level": "error", "message": "100% wrong\nsecond line: a, b", "file": "a,b:c%d.yaml",
               "line": 4, "column": 2}
    ((command, props, message),) = parse_github(github([finding]))
    assert (command, props, message) == ("error", {"file": "a,b:c%d.yaml", "line": "4", "col": "2", "title": "x.y"},
                                         "100% wrong\nsecond line: a, b")


def test_audit_junit_reads_back_with_junitparser(tmp_path):
    report = tmp_path / "fleet.xml"
    completed = hma("audit", "examples/fleet", "--format", "junit", "-o", str(report))
    assert completed.returncode == 0, completed.stderr
    xml = JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert len(suites) == 1
    cases = list(suites[0])
    assert len(cases) == 38 + 1  # every deployment, and the broken file
    kinds = {}
    for case in cases:
        result = case.result[0] if case.result else None
        kinds.setdefault(type(result).__name__ if result else "pass", []).append(case.name)
    # vLLM rejects 6 deployments (config or connector stage): failures; the
    # unresolved script, the undetermined one and the broken file: errors.
    assert len(kinds["Failure"]) == 6
    assert sorted(kinds["Error"]) == ["examples/fleet/documents/broken.yaml:6", "examples/fleet/documents/inhouse-connector.json",
                                      "examples/fleet/scripts/launch-from-env.sh:5"]
    assert len(kinds["pass"]) == 38 - 6 - 2
    assert (suites[0].tests, suites[0].failures, suites[0].errors) == (39, 6, 3)
    failure = next(c for c in cases if c.name == "examples/fleet/scripts/hisparse-disabled.sh:3").result[0]
    assert isinstance(failure, Failure) and failure.type == "hisparse.requires_hma"
    properties = {p.name: p.value for p in suites[0].properties()}
    assert properties["policy.source"] == "bundled"


def test_junit_holds_text_xml_cannot(tmp_path):
    # A control character in a document's value reaches an error message;
    # XML 1.0 cannot hold it even as a reference: it is written escaped.
    from hma_policy.audit.ci_formats import junit_test

    text = junit_test({"cases": [{"id": "f > c\x01", "file": "f", "line": 3, "passed": False, "skipped": False,
                                  "skip": None, "mismatches": ["outcome: expected \x1b[31m"]}]})
    case = next(iter(next(iter(JUnitXml.fromstring(text)))))
    assert case.name == "c\\x01"
    assert case.result[0].message == "outcome: expected \\x1b[31m"


# -- rules check -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gap_rules(tmp_path_factory):
    """A copy whose new first decision step has no default and misses FlexKVConnectorV1 (docs/rules.md §7)."""
    rules = copy_rules(tmp_path_factory.mktemp("ci") / "site-gap")
    edit(rules / "decision.yaml", "steps:\n", """steps:
  - step: site_connector
    hit: unique
    rules:
      - id: site.forbidden_connector.top
        when: {top_name: LMCacheConnectorV1}
        value: error
        error: {code: site.forbidden_connector, stage: config, message: "connector `{top_name}` is forbidden", at: /kv_transfer_config/kv_connector}
      - id: site.allowed_connector
        when: {top_name: {not_in: [LMCacheConnectorV1, FlexKVConnectorV1]}}
        value: allowed

""")
    return rules


def test_rules_check_sarif_points_at_the_step(gap_rules):
    completed = hma("rules", "check", "--rules", str(gap_rules), "--format", "sarif", cwd=gap_rules.parent)
    assert completed.returncode == 1
    log = valid_sarif(completed.stdout)
    text = (gap_rules / "decision.yaml").read_text(encoding="utf-8").splitlines()
    line = next(i for i, t in enumerate(text, 1) if t == "  - step: site_connector")
    assert results_by(log) == [("verify.gap", "error", "site-gap/decision.yaml", line)]
    region = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": line, "startColumn": 5}
    assert log["runs"][0]["properties"]["policy"]["source"] == str(gap_rules)


def test_rules_check_sarif_and_github_for_invalid_rules(tmp_path):
    rules = copy_rules(tmp_path / "bad")
    edit(rules / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}")
    completed = hma("rules", "check", "bad", "--format", "sarif", cwd=tmp_path)
    assert completed.returncode == 1
    ((code, level, file, line),) = results_by(valid_sarif(completed.stdout))
    text = (rules / "decision.yaml").read_text(encoding="utf-8").splitlines()
    assert (code, level, file) == ("rules.unknown_fact", "error", "bad/decision.yaml")
    assert "preferance" in text[line - 1]
    completed = hma("rules", "check", "bad", "--format", "github", cwd=tmp_path)
    ((command, props, message),) = parse_github(completed.stdout)
    assert (command, props["file"], props["line"], props["title"]) == ("error", "bad/decision.yaml", str(line), "rules.unknown_fact")
    assert message == "rule `hma.explicit_disable` reads unknown fact `preferance`"


# -- test ----------------------------------------------------------------------------------------

@pytest.fixture
def failing_tests(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text("""kind: tests
cases:
  - name: passes
    document: {kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}}
    expect: {outcome: enabled}
  - name: fails
    document: {kv_transfer_config: {kv_connector: ExampleConnector, kv_role: kv_both}}
    expect: {outcome: enabled}
  - name: later
    skip: waiting for vLLM 0.34
    document: {}
    expect: {outcome: enabled}
""", encoding="utf-8")
    return path


def test_test_sarif_github_and_junit(failing_tests):
    cwd = failing_tests.parent
    sarif = hma("test", "site.yaml", "--format", "sarif", cwd=cwd)
    assert sarif.returncode == 1
    assert results_by(valid_sarif(sarif.stdout)) == [("tests.failed", "error", "site.yaml", 6)]
    github = parse_github(hma("test", "site.yaml", "--format", "github", cwd=cwd).stdout)
    assert github == [("error", {"file": "site.yaml", "line": "6", "col": "1", "title": "tests.failed"},
                       'site.yaml > fails: outcome: expected "enabled", got "disabled"')]
    junit = hma("test", "site.yaml", "--format", "junit", cwd=cwd)
    assert junit.returncode == 1
    (suite,) = list(JUnitXml.fromstring(junit.stdout))
    assert (suite.name, suite.tests, suite.failures, suite.skipped) == ("site.yaml", 3, 1, 1)
    results = {case.name: case.result for case in suite}
    assert results["passes"] == []
    assert isinstance(results["fails"][0], Failure) and "expected \"enabled\"" in results["fails"][0].message
    assert isinstance(results["later"][0], Skipped) and results["later"][0].message == "waiting for vLLM 0.34"


def test_test_junit_and_sarif_report_an_invalid_test_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("kind: tests\ncases:\n  - name: x\n    document: {}\n    expect: {fired: [hma.default_onn]}\n",
                                       encoding="utf-8")
    junit = hma("test", "bad.yaml", "--format", "junit", cwd=tmp_path)
    assert junit.returncode == 2
    (suite,) = list(JUnitXml.fromstring(junit.stdout))
    (case,) = list(suite)
    assert isinstance(case.result[0], Error) and case.result[0].type == "tests.unknown_rule"
    sarif = hma("test", "bad.yaml", "--format", "sarif", cwd=tmp_path)
    assert sarif.returncode == 2
    assert results_by(valid_sarif(sarif.stdout)) == [("tests.unknown_rule", "error", "bad.yaml", 5)]


# -- pre-commit --------------------------------------------------------------------------------

HOOKS = yaml_hooks = REPO / ".pre-commit-hooks.yaml"


def test_the_hooks_file_names_real_commands():
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load(HOOKS.read_text(encoding="utf-8"))}
    assert set(hooks) == {"hma-policy-rules-check", "hma-policy-audit"}
    assert hooks["hma-policy-rules-check"]["entry"].startswith("hma-policy rules check")
    assert hooks["hma-policy-audit"]["entry"].startswith("hma-policy audit")
    assert all(h["language"] == "python" for h in hooks.values())


@pytest.mark.slow
def test_the_hooks_run_under_pre_commit(tmp_path):
    """`pre-commit try-repo` installs this repository as a hook repository
    would be (a virtualenv with the package built from a clone of its
    working tree), then runs each hook on a scratch repository: a clean
    copy of the rules and a fleet file pass; a broken rule file and a
    deployment vLLM rejects fail, each with its finding."""
    if shutil.which("git") is None:
        pytest.fail("git is needed to run pre-commit")
    work = tmp_path / "user-repo"
    work.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HMA_POLICY_PURE": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True, env=env)

    def try_repo(hook: str, *files: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), hook, "--verbose",
                               "--files", *files], cwd=work, capture_output=True, text=True, env=env, timeout=1200)

    git("init", "-q")
    copy_rules(work / "rules")
    shutil.copy(REPO / "examples" / "fleet" / "scripts" / "multi-connector.sh", work / "ok.sh")
    git("add", "-A")
    ok = try_repo("hma-policy-rules-check", "rules/decision.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok: rules (sha256:" in ok.stdout
    audit_ok = try_repo("hma-policy-audit", "ok.sh")
    assert audit_ok.returncode == 0, audit_ok.stdout + audit_ok.stderr

    edit(work / "rules" / "decision.yaml", "when: {preference: disable}", "when: {preferance: disable}")
    shutil.copy(REPO / "examples" / "fleet" / "scripts" / "hisparse-disabled.sh", work / "bad.sh")
    git("add", "-A")
    broken = try_repo("hma-policy-rules-check", "rules/decision.yaml")
    assert broken.returncode == 1
    assert re.search(r"rules/decision\.yaml:\d+:\d+: rules\.unknown_fact: rule `hma\.explicit_disable` reads unknown fact `preferance`",
                     broken.stdout), broken.stdout
    rejected = try_repo("hma-policy-audit", "ok.sh", "bad.sh")
    assert rejected.returncode == 1
    assert "bad.sh:3: error" in rejected.stdout and "--fail-on met: error: 1" in rejected.stdout
