"""A launch's options, checked against the release that runs it: where
something names that release, an option its `vllm serve` does not accept is
noted (`source.option_not_in_release`), since vLLM's argparse exits before
the engine starts. The decision itself stays the HMA answer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hma_policy.audit.report import render
from hma_policy.audit.run import audit
from hma_policy.core.command import read_command
from hma_policy.core.optionlist import known_releases, option_strings, refusal
from sourcefiles import NIXL, write

CODE = "source.option_not_in_release"


def option_notes(result):
    (deployment,) = json.loads(render(result, "json"))["deployments"]
    return deployment, [n for n in deployment["notes"] if n["code"] == CODE]


def test_an_option_the_pinned_release_lacks_is_noted_with_the_releases_that_take_it(tmp_path, monkeypatch):
    # --num-scheduler-steps went with vLLM's V0 engine: 0.30.0's argparse rejects it.
    write(tmp_path / "serve.sh", "pip install vllm==0.30.0\n"
          f"vllm serve m --num-scheduler-steps 8 --port 8000 --kv-transfer-config '{NIXL}'\n")
    monkeypatch.chdir(tmp_path)
    deployment, notes = option_notes(audit(["serve.sh"]))
    assert notes == [{"code": CODE, "file": "serve.sh", "line": 2, "path": "",
                      "message": "vLLM 0.30.0 rejects the unrecognized argument `--num-scheduler-steps` (line 2): "
                                 "the launch does not start",
                      "hint": "an option of vLLM 0.9.1 to 0.10.0 (of the bundled releases)"}]
    # A note: the decision is still how 0.30.0 runs the KV configuration.
    assert deployment["decision"]["outcome"] == "enabled"
    assert deployment["decision"]["vllm"] == {"release": "0.30.0", "source": "pip pin vllm==0.30.0 at line 1"}


def test_forms_argparse_accepts_are_not_noted_and_an_ambiguous_prefix_is(tmp_path, monkeypatch):
    # `_` for `-` (vLLM's parser), a unique prefix, a --no- form, --help: all accepted.
    write(tmp_path / "serve.sh", "pip install vllm==0.30.0\nvllm serve m --max_num_seqs 4 --max-model 4096 "
          "--no-enable-prefix-caching --gpu-memory-utilization=0.9 --max-num 8 --bogus-flag\n")
    monkeypatch.chdir(tmp_path)
    _, notes = option_notes(audit(["serve.sh"]))
    assert [n["message"] for n in notes] == [
        "vLLM 0.30.0 refuses the ambiguous option `--max-num`, which could be `--max-num-batched-tokens`, "
        "`--max-num-queued-reqs`, `--max-num-queued-tokens`, `--max-num-scheduled-tokens`, `--max-num-seqs` "
        "(line 2): the launch does not start",
        "vLLM 0.30.0 rejects the unrecognized argument `--bogus-flag` (line 2): the launch does not start"]
    assert "hint" not in notes[1]  # no bundled release takes it, and nothing is spelled like it


@pytest.mark.parametrize("script, why", [
    ("vllm serve m --num-scheduler-steps 8\n", "no release named: the default may not be the one that runs it"),
    ("pip install vllm==0.6.6\nvllm serve m --num-scheduler-steps 8\n", "a release the rules do not hold"),
    ("pip install vllm==0.10.0\nvllm serve m --num-scheduler-steps 8\n", "0.10.0 takes it"),
    ("pip install vllm==0.30.0\npython3 -m dynamo.vllm --model m --is-prefill-worker\n",
     "Dynamo's launcher takes options of its own"),
])
def test_no_note_where_the_release_is_not_known_or_takes_the_option(tmp_path, monkeypatch, script, why):
    write(tmp_path / "serve.sh", script)
    monkeypatch.chdir(tmp_path)
    _, notes = option_notes(audit(["serve.sh"]))
    assert notes == [], why


def test_the_release_a_directive_or_the_auditor_names_is_the_one_checked(tmp_path):
    write(tmp_path / "serve.sh", "# hma-policy: {vllm_version: \"0.30.0\"}\nvllm serve m --num-scheduler-steps 8\n")
    write(tmp_path / "plain.sh", "vllm serve m --num-scheduler-steps 8\n")
    run = subprocess.run([sys.executable, "-m", "hma_policy", "audit", "serve.sh", "plain.sh"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.stdout.count("note source.option_not_in_release: vLLM 0.30.0 rejects the unrecognized argument "
                            "`--num-scheduler-steps` (line 2): the launch does not start") == 1
    forced = subprocess.run([sys.executable, "-m", "hma_policy", "audit", "plain.sh", "--vllm-version", "0.10.0"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert forced.returncode == 0 and CODE not in forced.stdout  # 0.10.0, as the auditor says, takes it


def test_an_option_from_a_config_file_is_noted_where_it_came_from(tmp_path, monkeypatch):
    write(tmp_path / "serve.yaml", "num-scheduler-steps: 8\nport: 8000\n")
    write(tmp_path / "serve.sh", "pip install vllm==0.30.0\nvllm serve m --config serve.yaml\n")
    monkeypatch.chdir(tmp_path)
    result = audit(["serve.sh"])
    _, notes = option_notes(result)
    assert [n["message"] for n in notes] == [
        "vLLM 0.30.0 rejects the unrecognized argument `--num-scheduler-steps` (`serve.yaml`): "
        "the launch does not start"]
    # Every report shows it, as the other notes.
    assert "note source.option_not_in_release" in render(result, "text")
    sarif = json.loads(render(result, "sarif"))
    assert [r["level"] for r in sarif["runs"][0]["results"] if r["ruleId"] == CODE] == ["note"]


def test_the_command_reader_lists_the_options_the_decision_does_not_read():
    result = read_command(["vllm", "serve", "m", "--port", "8000", "--max_num_seqs", "4", "-tp", "2",
                           "--kv-transfer-config", NIXL, "--disable-hybrid-kv-cache-manager", "--kv-transfer", NIXL])
    # Only long options the decision does not read; `_` read as `-`; short ones are not checked.
    assert [a.text for a in result.unchecked] == ["--port", "--max-num-seqs"]
    dynamo = read_command(["python3", "-m", "dynamo.vllm", "--model", "m", "--is-prefill-worker"])
    assert dynamo.unchecked == ()


def test_refusal_reads_each_releases_list():
    assert refusal("0.30.0", "--max-num-seqs") is None
    assert refusal("0.30.0", "--help") is None  # argparse's own
    assert refusal("0.6.6", "--anything") is None  # no list bundled: nothing is said
    assert refusal("0.33.0", "--disable-log-requests") == (
        "vLLM 0.33.0 rejects the unrecognized argument `--disable-log-requests`",
        "an option of vLLM 0.9.1 to 0.16.0 (of the bundled releases)")
    assert refusal("0.30.0", "--max-num-seq") is None  # a unique prefix
    assert refusal("0.30.0", "--max-num-sesq") == ("vLLM 0.30.0 rejects the unrecognized argument `--max-num-sesq`",
                                                   "did you mean `--max-num-seqs`?")
    # Every bundled list accepts each of its own options, --no- forms and aliases included.
    for release in known_releases():
        assert all(refusal(release, option) is None for option in option_strings(release))
