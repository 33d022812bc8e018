"""`hma-policy audit` (engine/audit.py, engine/report.py): the fleet's
outcomes agree with examples/fleet/EXPECTED.md in every report format, the
report is the same for every --jobs, the exit status follows the documented
conventions, and a large, dirty directory is audited to the end."""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hma_policy.audit.run import AuditError, audit, progress_bar
from hma_policy.audit.report import render

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "examples" / "fleet"


def _expected() -> tuple[dict[str, dict], dict[str, str]]:
    """The two tables of EXPECTED.md: deployments, and broken files."""
    deployments, broken = {}, {}
    for line in (FLEET / "EXPECTED.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `"):
            continue
        key = "examples/fleet/" + cells[0].strip("`")
        if len(cells) == 2:
            broken[key] = cells[1]
            continue
        _, fmt, outcome, hma, error, warnings, _why = cells
        deployments[key] = {
            "format": fmt, "outcome": outcome, "hma_enabled": json.loads(hma),
            "error": None if error == "—" else tuple(re.fullmatch(r"(\S+) \((\w+)\)", error).groups()),
            "warnings": [] if warnings == "—" else [w.strip() for w in warnings.split(",")],
        }
    return deployments, broken


EXPECTED, BROKEN = _expected()


def run(*args: str, cwd: Path = REPO, env: dict | None = None) -> tuple[int, str, str]:
    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], cwd=cwd, capture_output=True, timeout=300,
                               env={**os.environ, **(env or {})})
    out, err = completed.stdout.decode(), completed.stderr.decode()
    assert "Traceback" not in out + err, out + err
    return completed.returncode, out, err


@pytest.fixture(scope="module")
def fleet_report():
    cwd = os.getcwd()
    os.chdir(REPO)  # ids are the paths as given: examples/fleet/...
    try:
        return audit(["examples/fleet"])
    finally:
        os.chdir(cwd)


def test_the_expected_table_covers_every_format_and_at_least_30_deployments():
    assert len(EXPECTED) >= 30
    assert {e["format"] for e in EXPECTED.values()} == {"document", "vllm-config", "shell", "dockerfile", "kubernetes"}
    assert {e["outcome"] for e in EXPECTED.values()} == {"enabled", "disabled", "error", "undetermined"}
    assert BROKEN == {"examples/fleet/documents/broken.yaml": "input.parse"}


def test_every_deployment_agrees_with_expected_md(fleet_report):
    found = {e.deployment.id: e for e in fleet_report.entries}
    assert sorted(found) == sorted(EXPECTED)
    for key, want in EXPECTED.items():
        entry = found[key]
        d = entry.decision
        error = (d["errors"][0]["code"], d["errors"][0]["stage"]) if d["errors"] else None
        got = {"format": entry.deployment.format, "outcome": d["outcome"], "hma_enabled": d["hma_enabled"], "error": error,
               "warnings": [w["code"] for w in d["warnings"]]}
        assert got == want, key


def test_counts_and_the_broken_file(fleet_report):
    summary = fleet_report.summary()
    outcomes = {name: sum(1 for e in EXPECTED.values() if e["outcome"] == name) for name in ("enabled", "disabled", "error", "undetermined")}
    assert summary["deployments"] == len(EXPECTED) == 38
    assert summary["outcomes"] == outcomes == {"enabled": 18, "disabled": 12, "error": 7, "undetermined": 1}
    assert summary["files"] == {"seen": 37, "examined": 36, "with_deployments": 35, "with_problems": 1, "skipped": 1}
    (problem,) = fleet_report.problems
    assert (problem.file, problem.code, problem.line) == ("examples/fleet/documents/broken.yaml", "input.parse", 6)
    assert problem.message == ("invalid YAML in `examples/fleet/documents/broken.yaml` at line 6, column 12: "
                               "mapping values are not allowed in this context")


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: dict[str, str] = {}
        self.problems = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "deployment":
            self.rows[a["data-id"]] = a["data-outcome"]
        if tag == "tr" and a.get("class") == "problem":
            self.problems += 1


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html", "policyreport"])
def test_every_format_shows_each_deployment_with_its_outcome(fleet_report, fmt):
    text = render(fleet_report, fmt)
    want = {key: e["outcome"] for key, e in EXPECTED.items()}
    if fmt == "json":
        data = json.loads(text)
        assert {d["id"]: d["decision"]["outcome"] for d in data["deployments"]} == want
        assert data["summary"]["outcomes"] == fleet_report.summary()["outcomes"]
        assert [p["file"] for p in data["problems"]] == list(BROKEN)
        assert data["skipped"] == [{"file": "examples/fleet/EXPECTED.md",
                                    "reason": "not a deployment source (not JSON, YAML, a shell script, Python or a Dockerfile)"}]
    elif fmt == "text":
        lines = text.splitlines()
        assert lines[0].startswith("hma-policy audit of examples/fleet: 38 deployment(s) in 36 file(s) (policy bundled, sha256:")
        # EXPECTED.md is not read as a deployment, and broken.yaml cannot be read, but both mention vLLM's KV
        # options: a file note each (no silent miss).
        assert lines[1] == ("outcomes: enabled 18, disabled 12, error 7, undetermined 1; 1 file problem(s); 2 file note(s); "
                            "1 file(s) skipped (not deployment sources)")
        assert "file notes:" in lines and any(line.startswith("  examples/fleet/EXPECTED.md:") and "source.unrecognized" in line
                                              for line in lines)
        for key, outcome in want.items():
            assert any(line.startswith(f"{key}: {outcome}") for line in lines), key
        assert "  examples/fleet/documents/broken.yaml:6: input.parse: invalid YAML" in text
    elif fmt == "md":
        rows = dict(re.findall(r"^\| `([^`]+)` \| [a-z-]+ \| \*\*(\w+)\*\* \|", text, re.M))
        assert rows == want
        assert "| enabled | 18 |" in text and "| `examples/fleet/documents/broken.yaml` | 6 | `input.parse` |" in text
    elif fmt == "html":
        parser = _Rows()
        parser.feed(text)
        assert parser.rows == want and parser.problems == 1
    else:
        data = json.loads(text)
        assert (data["apiVersion"], data["kind"]) == ("wgpolicyk8s.io/v1alpha2", "PolicyReport")
        results = {r["properties"]["deployment"]: r for r in data["results"] if "deployment" in r["properties"]}
        assert {k: r["properties"]["outcome"] for k, r in results.items()} == want
        for key, e in EXPECTED.items():
            r = results[key]["result"]
            if e["outcome"] in ("enabled", "disabled"):
                assert r == ("warn" if e["warnings"] else "pass"), key
            elif e["outcome"] == "error" and e["error"][1] != "input":
                assert r == "fail" and results[key]["rule"] == e["error"][0], key
            else:
                assert r == "error", key
        assert data["summary"] == {"pass": 18, "fail": 6, "warn": 12, "error": 3, "skip": 2}  # skip: the two file notes
        pods = [r for r in data["results"] if r.get("resources")]
        assert {"apiVersion": "v1", "kind": "Pod", "name": "qwen-decode-canary", "namespace": "inference"} in \
            [p["resources"][0] for p in pods]


def test_the_report_is_the_same_for_every_jobs_and_every_run():
    # The report's only clock reading follows SOURCE_DATE_EPOCH (reproducible builds).
    epoch = {"SOURCE_DATE_EPOCH": "1764374400"}
    code1, out1, err1 = run("audit", "examples/fleet", "--format", "json", "--jobs", "1", env=epoch)
    code2, out2, err2 = run("audit", "examples/fleet", "--format", "json", "--jobs", "2", env=epoch)
    code3, out3, _ = run("audit", "examples/fleet", "--format", "json", "--jobs", "3", env=epoch)
    assert code1 == code2 == code3 == 0
    assert out1 == out2 == out3
    assert err1 == err2 == ""  # no progress bar: stderr is not a terminal
    assert json.loads(out1)["generated_at"] == "2025-11-29T00:00:00Z"


def test_the_report_records_its_time_breakdowns_and_remediation(fleet_report):
    data = fleet_report.to_dict()
    assert data["generated_at"].endswith("Z") and data["tool"]["version"] and data["policy"]["digest"].startswith("sha256:")
    summary = data["summary"]
    assert summary["by_connector"]["LMCacheConnectorV1"]["does_not"] >= 1
    assert summary["by_connector"]["NixlConnector"]["supports_hma"] >= 1
    assert summary["by_rule"]["hma.auto_disabled"] == summary["codes"]["hma.auto_disabled"]
    assert summary["warnings"] == sum(len(e["decision"]["warnings"]) for e in data["deployments"])
    blocked = [e for e in data["deployments"] if e["decision"]["outcome"] == "disabled"
               and "LMCacheConnectorV1" in {c["kv_connector"] for c in e["decision"]["connectors"]}
               and any(w["code"] == "hma.auto_disabled" for w in e["decision"]["warnings"])]
    assert blocked and all("`LMCacheConnectorV1`" in e["remediation"] and "block" in e["remediation"] for e in blocked)
    # Every deployment that could be read into a document carries its digest.
    assert all(e["input_digest"] for e in data["deployments"]
               if not (e["decision"]["errors"] and e["decision"]["errors"][0]["stage"] == "input"))


def test_the_readme_main_command_exits_0_on_a_fleet_with_a_broken_file_and_errors():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "pip install . && hma-policy audit examples/fleet\n" in readme
    code, out, err = run("audit", "examples/fleet")
    assert code == 0 and err == ""
    assert "error 7" in out and "1 file problem(s)" in out


def test_fail_on_is_a_ci_gate(tmp_path):
    code, out, err = run("audit", "examples/fleet", "--fail-on", "error,problem")
    assert code == 1
    assert err == "hma-policy: --fail-on met: error: 7; problem: 1\n"
    assert out.startswith("hma-policy audit of examples/fleet")
    assert run("audit", "examples/fleet/documents/llama-70b-pd-prefill.json", "--fail-on", "error,undetermined,disabled,warning,problem")[0] == 0
    code, _, err = run("audit", "examples/fleet", "--fail-on", "errors")
    assert code == 2
    assert "argument --fail-on: unknown condition `errors`; choose from error, undetermined, disabled, warning, problem" in err


@pytest.mark.parametrize("args, message", [
    (["audit", "no/such/dir"], "hma-policy: no/such/dir: audit.path: no such file or directory\n"),
    (["audit", "examples/fleet", "--jobs", "0"], None),
    (["audit", "examples/fleet", "-o", "/nonexistent-dir/report.html"],
     "hma-policy: /nonexistent-dir/report.html: audit.output: cannot write the report: No such file or directory\n"),
    (["audit", "examples/fleet", "--rules", "no-such-rules"], None),
])
def test_usage_and_environment_errors_exit_2(args, message):
    code, out, err = run(*args)
    assert code == 2
    if message:
        assert err == message
    assert err


def test_jobs_auto_runs_one_process_per_usable_cpu(monkeypatch):
    from hma_policy import cli

    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert cli._parser().parse_args(["audit", "x", "--jobs", "auto"]).jobs == 3
    monkeypatch.delattr(cli.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: None)
    assert cli._parser().parse_args(["audit", "x", "--jobs", "auto"]).jobs == 1
    code, out, err = run("audit", "examples/fleet", "--jobs", "auto", "--format", "json", env={"SOURCE_DATE_EPOCH": "1764374400"})
    assert (code, err) == (0, "")
    assert out == run("audit", "examples/fleet", "--format", "json", env={"SOURCE_DATE_EPOCH": "1764374400"})[1]
    code, _, err = run("audit", "examples/fleet", "--jobs", "some")
    assert code == 2
    assert "argument --jobs: expected a whole number or auto, got `some`" in err
    code, _, err = run("audit", "examples/fleet", "--jobs", "0")
    assert code == 2
    assert "argument --jobs: must be at least 1 (or auto), got 0" in err


def test_output_file_and_decision_log(tmp_path):
    report, log = tmp_path / "fleet.md", tmp_path / "decisions.jsonl"
    code, out, err = run("audit", "examples/fleet", "--format", "md", "-o", str(report), "--log", str(log))
    assert code == 0
    assert out == ""  # the report went to the file; what was written is a note on standard error
    assert err == (f"hma-policy: wrote {report} (md): 38 deployment(s), enabled 18, disabled 12, error 7, undetermined 1; "
                   "1 file problem(s)\n")
    assert report.read_text(encoding="utf-8").startswith("# hma-policy audit\n")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 38 and [r["seq"] for r in records] == list(range(38))
    assert records[0]["input"]["source"] == "examples/fleet/docker/Dockerfile.lmcache:8"
    # The log shows each decided document (the audit keeps them for it).
    assert sum(1 for r in records if r["input"]["document"] is not None) == 37
    code, out, _ = run("log", "verify", str(log))
    assert code == 0 and out.startswith(f"{log}: intact: 38 record(s)")
    # `-o -` is standard output, as `rules wheel -o -` has it (a file named `-` was written; survey 21a).
    code, out, err = run("audit", str(REPO / "examples" / "fleet"), "--format", "md", "-o", "-", cwd=tmp_path)
    assert (code, out.startswith("# hma-policy audit\n"), (tmp_path / "-").exists()) == (0, True, False)


def test_config_root_lets_a_config_outside_the_audited_paths_be_read(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "c.yaml").write_text('kv-transfer-config: {"kv_connector": "NixlConnector", "kv_role": "kv_both"}\n')
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "run.sh").write_text("vllm serve m --config ../shared/c.yaml\n")
    refused = audit([str(tmp_path / "app")])
    assert refused.entries[0].decision["errors"][0]["code"] == "source.config_outside"
    allowed = audit([str(tmp_path / "app")], config_roots=[str(tmp_path / "shared")])
    assert allowed.entries[0].decision["outcome"] == "enabled"


def test_walk_skips_hidden_directories_and_does_not_follow_directory_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "d.json").write_text('{"kv_transfer_config": null}')
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "d.json").write_text('{"kv_transfer_config": null}')
    os.symlink(tmp_path / "a", tmp_path / "loop")
    os.symlink("/etc/hostname", tmp_path / "outside.sh")
    report = audit([str(tmp_path)])
    assert [e.deployment.id for e in report.entries] == [f"{tmp_path}/a/d.json"]
    data = report.to_dict()
    assert data["skipped"] == [{"file": f"{tmp_path}/loop", "reason": "a symbolic link to a directory (not followed)"}]
    assert [(p["file"], p["code"]) for p in data["problems"]] == [(f"{tmp_path}/outside.sh", "source.outside_roots")]


def test_the_text_report_names_the_hidden_directories_it_did_not_enter(tmp_path):
    # Found in a survey (ai-dynamo/nixl): its only disaggregated launches sit in `.ci` and
    # `.gitlab`, and the text report said only "690 file(s) skipped (not deployment sources)".
    for name in (".ci", ".gitlab", ".git"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.sh").write_text("vllm serve m\n")
    (tmp_path / "notes.txt").write_text("x\n")
    lines = render(audit([str(tmp_path)]), "text").splitlines()
    assert lines[1:3] == [
        "outcomes: enabled 0, disabled 0, error 0, undetermined 0; 1 file(s) skipped (not deployment sources)",
        f"not entered: 2 hidden directories ({tmp_path}/.ci, {tmp_path}/.gitlab); audit one by giving its path"]
    # One given as a path of its own is audited, and not said to be passed over, in either order (survey 34f).
    for paths in ([str(tmp_path), f"{tmp_path}/.ci"], [f"{tmp_path}/.ci", str(tmp_path)]):
        report = audit(paths)
        assert [e.deployment.file for e in report.entries] == [f"{tmp_path}/.ci/run.sh"]
        assert render(report, "text").splitlines()[2] == (
            f"not entered: 1 hidden directory ({tmp_path}/.gitlab); audit one by giving its path")


def test_the_text_report_names_the_files_that_look_like_sources_but_are_not_read(tmp_path):
    # A mapping of vLLM's options but for a key no release has (a launcher's own config, as
    # runpod-workers/worker-vllm's `vllm-release:`) was counted among the "file(s) skipped (not
    # deployment sources)"; only the JSON report said which and why.
    (tmp_path / "serve.yaml").write_text("model: m\ntensor-parallel-size: 2\nlauncher-release: 3\n")
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "linked")
    os.symlink("/no/such/file.sh", tmp_path / "gone.sh")
    lines = render(audit([str(tmp_path)]), "text").splitlines()
    assert lines[1] == "outcomes: enabled 0, disabled 0, error 0, undetermined 0; 1 file(s) skipped (not deployment sources)"
    assert lines[-4:] == [
        "skipped, not read:",
        f"  {tmp_path}/gone.sh: a symbolic link to `/no/such/file.sh`, which does not exist",
        f"  {tmp_path}/serve.yaml: not a vLLM config: `launcher-release` is no option of any bundled vLLM release, "
        "and vLLM refuses a --config file with such a key",
        f"  {tmp_path}/linked: a symbolic link to a directory (not followed)"]


def test_a_link_to_nothing_or_to_a_unit_outside_is_skipped_not_a_problem(tmp_path):
    # containers/ai-lab-recipes keeps an image's /etc tree: systemd units linked to absolute
    # paths of the machine they were made on, which is no file here, were 5 source.outside_roots
    # problems ("links to a file outside the audited paths").
    wants = tmp_path / "etc" / "systemd" / "system" / "timers.target.wants"
    wants.mkdir(parents=True)
    os.symlink("/usr/lib/systemd/system/no-such.timer", wants / "no-such.timer")
    os.symlink("../usr/share/zoneinfo/UTC", tmp_path / "etc" / "localtime")
    os.symlink("/etc/hostname", wants / "hostname.service")  # outside, and a unit: the machine's enablement link
    os.symlink("/etc/hostname", tmp_path / "outside.yaml")  # outside, and it might be one: never read
    data = audit([str(tmp_path)]).to_dict()
    assert [(p["file"], p["code"]) for p in data["problems"]] == [(f"{tmp_path}/outside.yaml", "source.outside_roots")]
    assert data["skipped"] == [
        {"file": f"{tmp_path}/etc/localtime", "reason": "a symbolic link to `../usr/share/zoneinfo/UTC`, which does not exist"},
        {"file": f"{wants}/hostname.service",
         "reason": "a symbolic link to `/etc/hostname`, a systemd unit (an enablement link): the unit is outside the "
                   "audited paths, not read"},
        {"file": f"{wants}/no-such.timer",
         "reason": "a symbolic link to `/usr/lib/systemd/system/no-such.timer`, which does not exist"}]


def test_an_option_no_release_accepts_is_noted_where_no_release_is_named(tmp_path):
    # A config file's misspelt key: every release refuses it, so the launch does not start
    # whichever runs it (it was noted only with --vllm-version). A release the rules do not
    # hold (v0.35.0 here) may accept it: nothing is said.
    (tmp_path / "c.yaml").write_text("model: m\ntensor_parallel_sizee: 2\nmax_model_len: 100\n")
    (entry,) = audit([str(tmp_path / "c.yaml")]).entries
    assert [(n.code, n.message, n.hint) for n in entry.deployment.notes] == [(
        "source.option_not_in_release", "no bundled vLLM release (0.9.1 to 0.33.0) accepts the argument "
        f"`--tensor-parallel-sizee` (`{tmp_path / 'c.yaml'}`): the launch does not start unless a release outside them "
        "runs it, or a vLLM plugin adds the option",
        "did you mean `--tensor-parallel-size`?")]
    (tmp_path / "run.sh").write_text("docker run vllm/vllm-openai:v0.35.0 m --tensor-parallel-sizee 2\n"
                                     "docker run vllm/vllm-openai:latest m --tensor-parallel-sizee 2 --max-model-len 9\n")
    newer, latest = audit([str(tmp_path / "run.sh")]).entries
    assert [n.code for n in newer.deployment.notes] == ["source.release_not_held"]
    assert [n.code for n in latest.deployment.notes] == ["source.release_unknown", "source.option_not_in_release"]


@pytest.mark.parametrize("name, text", [
    ("docker-compose.yml", 'services:\n  vllm:\n    image: vllm/vllm-openai:v0.8.5\n'
                           '    command: ["--model", "m", "--kv-transfer-config", "${KV}"]\n'),
    ("run.sh", 'pip install vllm==0.8.5\nvllm serve m --kv-transfer-config "$(make_kv)"\n'),
])
def test_a_launch_of_a_release_older_than_the_rules_keeps_that_release_when_it_has_a_source_problem(tmp_path, name, text):
    # wang-zr12/PD-Disaggregation-Eval (d398161) PD_bench/src/pd_server.py, beside `vllm==0.7.3`: its config built at
    # run time made it a source error stamped 0.33.0, the default, with a source.release_not_held note ("vLLM 0.7.3 is
    # not a release these rules know"), where the same launch without the unknown value is 0.7.3, disabled
    # (release.before_hma). The source problem still decides it (survey 32b); the release is the one named.
    (tmp_path / name).write_text(text)
    (entry,) = audit([str(tmp_path / name)]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]["release"]) == ("error", "0.8.5")
    assert [e["code"] for e in entry.decision["errors"]] == ["source.unresolved"]
    assert "source.release_not_held" not in [n.code for n in entry.deployment.notes]


def test_a_progress_bar_only_on_a_terminal():
    assert progress_bar(io.StringIO()) is None

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    bar = progress_bar(stream)
    bar(1, 3)
    bar(3, 3)
    assert stream.getvalue() == "\r[##########....................] 1/3 files\r[##############################] 3/3 files\r\x1b[K"


def test_a_large_dirty_directory_is_audited_to_the_end(tmp_path):
    """10,000 generated documents, binary files, broken YAML and JSON, a
    non-UTF-8 script and an empty Dockerfile: every document is decided and
    every problem reported."""
    connectors = ["NixlConnector", "LMCacheConnectorV1", "OffloadingConnector", "MooncakeConnector", "FlexKVConnectorV1"]
    expected_outcomes = {"enabled": 0, "disabled": 0, "error": 0}
    for i in range(10_000):
        name = connectors[i % 5]
        preference = [None, True, False][i % 3]
        doc = {"name": f"gen-{i}", "kv_transfer_config": {"kv_connector": name, "kv_role": "kv_both"},
               "disable_hybrid_kv_cache_manager": preference}
        supported = name not in ("LMCacheConnectorV1", "FlexKVConnectorV1")
        outcome = "disabled" if preference is True or (preference is None and not supported) else (
            "error" if not supported else "enabled")
        expected_outcomes[outcome] += 1
        folder = tmp_path / f"batch{i // 500:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"d{i:05d}.{'json' if i % 2 else 'yaml'}").write_text(json.dumps(doc) if i % 2 else
                                                                          "\n".join(f"{k}: {json.dumps(v)}" for k, v in doc.items()))
    broken = {
        "bad/model.bin": (b"\x00\x01\x02" * 1000, None),
        "bad/weights.yaml": (b"\x89PNG\r\n\x1a\n\x00\x00", "source.binary"),
        "bad/broken.yaml": (b"kv_transfer_config:\n  kv_connector: [NixlConnector\n", "input.parse"),
        "bad/broken.json": (b'{"kv_transfer_config": {"kv_connector": "NixlConnector",', "input.parse"),
        "bad/latin1.sh": (b"vllm serve caf\xe9 --kv-transfer-config '{}'\n", "input.encoding"),
        "bad/Dockerfile": (b"", None),
    }
    for name, (data, _) in broken.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    started = time.monotonic()
    report = audit([str(tmp_path)], jobs=2)
    elapsed = time.monotonic() - started
    summary = report.summary()
    assert summary["deployments"] == 10_000
    assert summary["outcomes"] == {**expected_outcomes, "undetermined": 0}
    problems = {(p.file, p.code) for p in report.problems}
    assert problems == {(f"{tmp_path}/{name}", code) for name, (_, code) in broken.items() if code}
    assert summary["files"]["skipped"] == 1  # model.bin
    assert elapsed < 60, f"{elapsed:.1f} s"


def test_a_missing_path_is_an_audit_error():
    with pytest.raises(AuditError) as info:
        audit(["/no/such/path"])
    assert str(info.value) == "/no/such/path: audit.path: no such file or directory"


def test_jobs_work_from_a_program_read_from_standard_input():
    """A spawned worker re-imports the parent's main script; from `python -`
    there is none to import, so the audit runs in-process instead of failing."""
    program = ("from hma_policy.audit.run import audit\n"
               "print(audit(['examples/fleet'], jobs=2).summary()['outcomes'])\n")
    completed = subprocess.run([sys.executable, "-"], input=program.encode(), cwd=REPO, capture_output=True, timeout=300)
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    assert completed.stdout.decode() == "{'enabled': 18, 'disabled': 12, 'error': 7, 'undetermined': 1}\n"


def test_the_json_report_is_the_standard_librarys_text(fleet_report, monkeypatch):
    # render() writes JSON with orjson when it is installed; the text must be
    # exactly json.dumps(indent=2, ensure_ascii=False), so that reports do not
    # depend on which is installed.
    import json

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764374400")  # both readings of the clock agree

    from hma_policy.audit.report import render

    data = fleet_report.to_dict()
    assert render(fleet_report, "json") == json.dumps(data, indent=2, ensure_ascii=False)
    odd = {"text": "caf\u00e9 \u2028 \x00 \x1f \x7f \"q\" \\", "big": 2**70, "nested": [{}, [], None, True]}
    assert render(odd, "json") == json.dumps(odd, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html", "policyreport"])
def test_a_report_file_holds_the_rendered_text_and_a_final_newline(fleet_report, fmt, monkeypatch):
    # `audit -o FILE` writes render_bytes(): a JSON report straight from
    # orjson, without the detour through text; the bytes are the text's.
    from hma_policy.audit.report import render, render_bytes

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764374400")  # both readings of the clock agree

    text = render(fleet_report, fmt)
    assert render_bytes(fleet_report, fmt) == (text if text.endswith("\n") else text + "\n").encode("utf-8")
    odd = {"text": "caf\u00e9 \u2028 \x00", "big": 2**70}
    if fmt == "json":
        assert render_bytes(odd, fmt) == (json.dumps(odd, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@pytest.mark.parametrize("size", [1, 7, 1024])
def test_a_json_report_written_a_slice_at_a_time_is_the_bytes_of_the_whole(fleet_report, size, monkeypatch, tmp_path):
    # report.write streams a JSON report (the CLI's `-o FILE` and standard
    # output): a slice of deployments at a time, each rendered inside an
    # object of the same depth and spliced in where the report holds a NUL.
    from hma_policy.audit import report as report_module

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764374400")
    monkeypatch.setattr(report_module, "_SLICE", size)

    def written(report):
        out = io.BytesIO()
        report_module.write(report, "json", out)
        return out.getvalue()

    assert written(fleet_report) == report_module.render_bytes(fleet_report, "json")
    (tmp_path / "empty").mkdir()
    empty = audit([str(tmp_path / "empty")])
    assert written(empty) == report_module.render_bytes(empty, "json")
    assert b'"deployments": [],' in written(empty)
    # Text orjson refuses (a lone surrogate), in one deployment's slice and
    # in the report's head (an audited path): written as render_bytes
    # writes it, the surrogate as its escape.
    odd = tmp_path / os.fsdecode(b"odd\xff")
    odd.mkdir()
    (odd / "a.json").write_bytes(b'{"name": "dep-\\ud800", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}')
    for path in (odd / "a.json", odd):
        report = audit([str(path)])
        assert written(report) == report_module.render_bytes(report, "json")
        assert json.loads(written(report).decode("utf-8"))["deployments"][0]["name"] == "dep-\ud800"
    # Other formats are written whole.
    out = io.BytesIO()
    report_module.write(fleet_report, "md", out)
    assert out.getvalue() == report_module.render_bytes(fleet_report, "md")


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_a_json_report_prerendered_by_the_audits_processes_is_the_bytes_of_the_whole(jobs, monkeypatch, tmp_path):
    # audit(prerender=True) (the CLI's --format json): each process renders
    # its chunks' deployments as it decides them, and write() copies that
    # text. The fleet holds every format, a broken file, a skipped one and a
    # lone surrogate, and ends in files that hold no deployment (a chunk of
    # them renders to nothing).
    from hma_policy.audit import report as report_module
    from hma_policy.audit import run as audit_module

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764374400")
    monkeypatch.setattr(audit_module, "CHUNK", 8)  # several chunks, some with no deployment
    shutil.copytree(FLEET, tmp_path / "fleet")
    (tmp_path / "fleet" / "odd.json").write_bytes(
        b'{"name": "dep-\\ud800", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}')
    for n in range(8):
        (tmp_path / "fleet" / f"zz-{n}.json").write_text('{"unrelated": true}')

    def written(report):
        out = io.BytesIO()
        report_module.write(report, "json", out)
        return out.getvalue()

    plain = audit([str(tmp_path / "fleet")], jobs=jobs)
    report = audit([str(tmp_path / "fleet")], jobs=jobs, prerender=True)
    assert plain.rendered is None and report.rendered is not None
    assert len(report.rendered) > jobs and b"" in report.rendered
    assert report.entries == plain.entries and report.files == plain.files
    assert written(report) == written(plain) == report_module.render_bytes(plain, "json")
    assert written(report) == written(report)  # copied, not consumed
    for copied in (pickle.loads(pickle.dumps(report)), copy.deepcopy(report)):
        assert written(copied) == written(plain)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_prerendered_report_without_entries_writes_and_counts_what_one_with_them_does(jobs, monkeypatch):
    # audit(prerender=True, entries=False) (the CLI's --format json without
    # --log): the processes send back only each chunk's counts and text.
    from hma_policy.audit import report as report_module
    from hma_policy.audit import run as audit_module

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764374400")
    monkeypatch.setattr(audit_module, "CHUNK", 4)
    whole = audit([str(FLEET)], jobs=jobs, prerender=True, documents=False)
    bare = audit([str(FLEET)], jobs=jobs, prerender=True, documents=False, entries=False)
    assert bare.entries == () and len(whole.entries) == len(EXPECTED)
    assert bare.summary() == whole.summary() and bare.summary()["deployments"] == len(EXPECTED)
    assert bare.files == whole.files
    conditions = ["error", "undetermined", "disabled", "warning", "problem"]
    assert bare.failing(conditions) == whole.failing(conditions) != []
    out = io.BytesIO()
    report_module.write(bare, "json", out)
    assert out.getvalue() == report_module.render_bytes(whole, "json")


def test_a_report_without_entries_must_be_prerendered():
    with pytest.raises(AuditError) as caught:
        audit([str(FLEET)], entries=False)
    problem = caught.value.problems[0]
    assert (problem.code, problem.message) == ("audit.entries", "a report without entries needs prerender=True")


def test_the_json_report_on_standard_output_is_the_report_file(tmp_path):
    # `audit --format json` streams to standard output the bytes `-o FILE` holds.
    env = {"SOURCE_DATE_EPOCH": "1764374400"}
    code, out, err = run("audit", "examples/fleet", "--format", "json", env=env)
    assert (code, err) == (0, "")
    assert run("audit", "examples/fleet", "--format", "json", "-o", str(tmp_path / "r.json"), env=env)[0] == 0
    assert out.encode("utf-8") == (tmp_path / "r.json").read_bytes()
    assert len(json.loads(out)["deployments"]) == len(EXPECTED)


def test_forked_and_spawned_workers_give_the_report_of_one_process(fleet_report, monkeypatch):
    # From the main thread the workers are forked; from a program running
    # other threads they are spawned (a fork would copy their held locks).
    import threading

    import hma_policy.audit.run as audit_module

    monkeypatch.setattr(audit_module, "CHUNK", 4)  # the fleet is ten chunks: the pool has work

    def summary_and_ids(report):
        return report.summary(), [e.deployment.id for e in report.entries], [e.decision for e in report.entries]

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        forked = audit(["examples/fleet"], jobs=3)
        box = {}
        thread = threading.Thread(target=lambda: box.update(report=audit(["examples/fleet"], jobs=2)))
        thread.start()
        thread.join()
    finally:
        os.chdir(cwd)
    assert summary_and_ids(forked) == summary_and_ids(fleet_report)
    assert summary_and_ids(box["report"]) == summary_and_ids(fleet_report)
    # Each process counts its own entries as it goes: the same summary as
    # counting them all at the end.
    from dataclasses import replace
    assert replace(forked, tally=None).summary() == forked.summary()


def _die():
    os._exit(3)  # as a native crash would end the worker


def _raise():
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("fault", [_die, _raise], ids=["dies", "raises"])
def test_a_worker_that_fails_is_an_audit_error_with_its_reason(monkeypatch, capfd, fault):
    import hma_policy.audit.run as audit_module

    parent = os.getpid()
    original = audit_module.examine

    def failing(*args, **kwargs):
        if os.getpid() != parent:
            fault()
        return original(*args, **kwargs)

    monkeypatch.setattr(audit_module, "examine", failing)
    monkeypatch.setattr(audit_module, "CHUNK", 4)  # the fleet is several chunks
    with pytest.raises(AuditError) as info:
        audit([str(FLEET)], jobs=2)
    assert str(info.value).startswith("--jobs: audit.worker: a worker process failed: ")
    assert str(info.value).endswith("(hint: run again with --jobs 1 to find the file)")
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("stage", ["read", "validate", "evaluate", "digest"])
def test_a_fault_while_examining_one_file_is_that_files_problem(tmp_path, monkeypatch, stage):
    # Files go through the stages in batches; a fault in any stage must stay
    # with its file: the others are decided, in order, as without the fault.
    import hma_policy
    from hma_policy.audit import run as audit_module

    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.json").write_text(json.dumps(
            {"name": name, "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}))

    def boom(*args, **kwargs):
        raise RuntimeError(f"injected {stage} fault")

    if stage == "read":
        real_read = audit_module.read_source
        monkeypatch.setattr(audit_module, "read_source",
                            lambda path, *a, **k: boom() if os.path.basename(path) == "b.json" else real_read(path, *a, **k))
    elif stage == "validate":
        real_prepare = hma_policy.Policy.prepare
        monkeypatch.setattr(hma_policy.Policy, "prepare",
                            lambda self, doc, **kw: boom() if doc.get("name") == "b" else real_prepare(self, doc, **kw))
    elif stage == "evaluate":
        real_decide = hma_policy.Policy.decide_prepared
        monkeypatch.setattr(hma_policy.Policy, "decide_prepared",
                            lambda self, prepared, **kw: boom() if prepared.document.get("name") == "b"
                            else real_decide(self, prepared, **kw))
    else:
        real_digest = audit_module.input_digest
        monkeypatch.setattr(audit_module, "input_digest", lambda doc: boom() if doc.get("name") == "b" else real_digest(doc))

    report = audit([str(tmp_path)])
    assert [e.deployment.name for e in report.entries] == ["a", "c"]
    assert [e.decision["outcome"] for e in report.entries] == ["enabled", "enabled"]
    shown = tmp_path.as_posix() + "/b.json"
    assert [(p.code, p.file, p.message) for p in report.problems] == [
        ("audit.internal", shown, f"the audit of `{shown}` failed: RuntimeError: injected {stage} fault")]
    assert [f.file.rsplit("/", 1)[-1] for f in report.files] == ["a.json", "b.json", "c.json"]


def test_a_file_replaced_by_a_fifo_after_the_walk_is_skipped_not_waited_on(tmp_path, monkeypatch):
    # The walk's listing says which files are plain, and the audit reads them
    # later: a FIFO swapped in meanwhile must be refused, never block the audit.
    import signal

    from hma_policy.audit import run as audit_module

    (tmp_path / "a.json").write_text(json.dumps({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}))
    (tmp_path / "b.json").write_text("{}")
    real_walk = audit_module.walk

    def walk_then_swap(paths):
        listed = real_walk(paths)
        os.remove(tmp_path / "b.json")
        os.mkfifo(tmp_path / "b.json")
        return listed

    monkeypatch.setattr(audit_module, "walk", walk_then_swap)
    previous = signal.signal(signal.SIGALRM, lambda *a: pytest.fail("the audit blocked on a FIFO"))
    signal.alarm(10)
    try:
        report = audit([str(tmp_path)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [(f.file.rsplit("/", 1)[-1], f.skipped) for f in report.files] == [("a.json", None), ("b.json", "not a regular file")]
    assert [e.decision["outcome"] for e in report.entries] == ["enabled"]


def test_walk_order_and_what_it_skips(tmp_path):
    # One order for every file system: each argument's files sorted by their
    # path; directory links reported top-down in name order; a file named
    # twice is examined once.
    from hma_policy.audit.walk import walk

    for name in ["b/z.json", "b/a/y.json", "a.json", "b/__pycache__/p.json", "b/node_modules/n.json",
                 "b/.hidden/h.json", "c/x.json", "b/a/b/w.json"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    os.symlink(tmp_path / "c", tmp_path / "b" / "link")
    os.symlink(tmp_path / "c", tmp_path / "a-link")
    os.symlink(tmp_path / "c" / "x.json", tmp_path / "b" / "x-link.json")
    top = tmp_path.as_posix()
    files, skipped = walk([str(tmp_path), str(tmp_path / "a.json")])
    assert [display for display, _, _ in files] == [
        f"{top}/a.json", f"{top}/b/a/b/w.json", f"{top}/b/a/y.json", f"{top}/b/x-link.json", f"{top}/b/z.json", f"{top}/c/x.json"]
    # One path alone (nothing to deduplicate) gives the same order.
    assert walk([str(tmp_path)])[0] == files
    assert all(Path(path).as_posix() == display for display, path, _ in files)
    # A hidden directory is listed (vllm-project/tpu-inference keeps launches in `.buildkite`,
    # which the report passed over without a word); a version control system's is not.
    assert [(f.file, f.skipped) for f in skipped] == [
        (f"{top}/a-link", "a symbolic link to a directory (not followed)"),
        (f"{top}/b/.hidden", "a hidden directory (not entered; give its path to audit it)"),
        (f"{top}/b/link", "a symbolic link to a directory (not followed)")]
    (tmp_path / "b" / ".hidden" / "h.json").write_text('{"kv_transfer_config": null}')
    assert [f.rsplit("/", 1)[-1] for f, _, _ in walk([str(tmp_path / "b" / ".hidden")])[0]] == ["h.json"]
    # A regular file is known plain from the listing; a link is not (the audit checks where it points).
    assert [(display.rsplit("/", 1)[-1], plain) for display, _, plain in walk([str(tmp_path)])[0]] == [
        ("a.json", True), ("w.json", True), ("y.json", True), ("x-link.json", False), ("z.json", True), ("x.json", True)]


def test_each_entry_is_what_decide_answers_for_its_document(tmp_path):
    # The audit validates and evaluates in two stages, without decide()'s
    # document cache: its answer must still be decide()'s, kebab-case paths,
    # invalid documents and facts the rule runtime refuses included.
    import hma_policy
    from hma_policy.core.decision import input_error_decision
    from hma_policy.core.errors import InputError

    documents = {
        "kebab": {"kv-transfer-config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"}, {"kv_role": "kv_both"}]}}},
        "invalid": {"kv_transfer_config": {"kv_connector": 7}, "disable_hybrid_kv_cache_manager": "yes"},
        "surrogate": {"kv_transfer_config": {"kv_connector": "Nixl\ud800", "kv_role": "kv_both"}},
        "enabled": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}},
        "disabled": {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}},
    }
    for name, document in documents.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    policy = hma_policy.load_policy()
    expected = {}
    for name, document in documents.items():
        try:
            expected[name] = policy.decide(document).to_dict()
        except InputError as exc:
            expected[name] = input_error_decision(exc.problems, policy.digest, policy.vllm).to_dict()
    report = audit([str(tmp_path)])
    got = {Path(e.deployment.file).stem: e.decision for e in report.entries}
    assert got == expected
    assert got["kebab"]["errors"][0]["path"].startswith("/kv-transfer-config/")
    assert [got[n]["outcome"] for n in documents] == ["error", "error", "error", "enabled", "disabled"]
    assert [got[n]["errors"][0]["stage"] for n in ("invalid", "surrogate")] == ["input", "input"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_audit_that_lets_documents_go_reports_the_same(fleet_report, jobs):
    # documents=False (the CLI without --log) frees each document once it is
    # decided and digested: the report is unchanged, only the documents go.
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        lean = audit(["examples/fleet"], jobs=jobs, documents=False)
    finally:
        os.chdir(cwd)
    full, thin = fleet_report.to_dict(), lean.to_dict()
    full.pop("generated_at"), thin.pop("generated_at")
    assert thin == full
    assert [e.deployment.document for e in lean.entries] == [None] * 38
    assert sum(1 for e in fleet_report.entries if e.deployment.document is not None) == 37
    from dataclasses import replace
    assert [e.deployment for e in lean.entries] == [replace(e.deployment, document=None) for e in fleet_report.entries]


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_audit_unloads_its_policy_and_keeps_no_decisions(monkeypatch, jobs):
    # A program may audit again and again: the ruleset an audit loads into
    # the rule runtime (about 185 KiB each, see durable-rules.md) is unloaded
    # when it ends, and the module keeps none of its decisions.
    import hma_policy.core.policies as policies_module

    loaded = []
    real_policy = policies_module.Policy
    monkeypatch.setattr(policies_module, "Policy", lambda *a, **k: loaded.append(real_policy(*a, **k)) or loaded[-1])
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        report = audit(["examples/fleet"], jobs=jobs)
    finally:
        os.chdir(cwd)
    assert len(report.entries) == 38
    assert [p.closed for p in loaded] == [True]
    assert all(runtime._closed for runtime in loaded[0]._runtimes)


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html", "policyreport"])
def test_a_report_file_holds_text_utf8_cannot_as_its_escape(tmp_path, fmt):
    # A file name in another encoding reaches Python as a lone surrogate
    # (\udcff), and so does a `\ud800` escape in a document. orjson refuses
    # both; `-o FILE` used to end in "internal error" (exit 2) where standard
    # output printed the escapes. The file name's undecodable byte is
    # written as `\xff` (JSON: "b\\xff.json"), no longer as a lone surrogate
    # JSON readers refuse; the document's escape stays what it was.
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    document = b'{"name": "dep-\\ud800", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}'
    (fleet / os.fsdecode(b"b\xff.json")).write_bytes(document)
    code, out, err = run("audit", str(fleet), "--format", fmt, "-o", str(tmp_path / "report"))
    assert (code, out) == (0, ""), out  # the report went to the file: what was written is a note
    assert err.startswith(f"hma-policy: wrote {tmp_path / 'report'} ({fmt}): 1 deployment(s), enabled 1,")
    written = (tmp_path / "report").read_bytes().decode("utf-8")  # UTF-8 throughout
    shown = "b\\\\xff.json" if fmt in ("json", "policyreport") else "b\\xff.json"  # JSON escapes the backslash
    assert shown in written and "udcff" not in written
    if fmt == "json":
        report = json.loads(written)
        assert report["deployments"][0]["name"] == "dep-\ud800"
        assert report["deployments"][0]["file"] == str(fleet / "b\\xff.json")
        assert report["deployments"][0]["id"] == str(fleet / "b\\xff.json")


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_audit_leaves_nothing_for_the_cycle_collector(jobs):
    # The CLI keeps the collector paused while it audits: a report held in a
    # reference cycle (a class defined inside a function, with its results
    # in a closure) outlives the command's use of it, and the first
    # collection afterwards walked every object of a large audit (0.16 s
    # for 20,000 files).
    import gc

    audit([str(FLEET)], jobs=jobs)  # modules, the rule runtime, caches: loaded once
    gc.collect()
    paused = gc.isenabled()
    gc.disable()
    try:
        report = audit([str(FLEET)], jobs=jobs)
        assert len(report.entries) == len(EXPECTED)
        del report
        assert gc.collect() == 0
    finally:
        if paused:
            gc.enable()


def test_an_audit_with_a_loaded_policy_uses_it_and_leaves_it_open():
    import hma_policy

    policy = hma_policy.load_policy()
    try:
        first = audit([str(FLEET)], policy=policy, jobs=2)
        assert policy.decide({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}).outcome == "enabled"
        second = audit([str(FLEET)], policy=policy)  # its memos now warm
        assert first.summary() == second.summary() and first.summary()["outcomes"] == {
            "enabled": 18, "disabled": 12, "error": 7, "undetermined": 1}
        assert [e.decision for e in first.entries] == [e.decision for e in second.entries]
        with pytest.raises(AuditError) as info:
            audit([str(FLEET)], policy=policy, rules=str(REPO / "rules"))
        assert str(info.value) == "rules: audit.policy: give the rules or a loaded policy, not both"
    finally:
        policy.close()
    with pytest.raises(AuditError) as info:
        audit([str(FLEET)], policy=policy)
    assert str(info.value) == "policy: audit.policy: the policy was closed"
