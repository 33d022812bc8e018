"""A launch's options, checked against the release that runs it: where
something names that release, an option its `vllm serve` does not accept is
noted (`source.option_not_in_release`), since vLLM's argparse exits before
the engine starts. The decision itself stays the HMA answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.report import render
from hma_policy.audit.run import audit
from hma_policy.core.command import read_command
from hma_policy.core.errors import InputError
from hma_policy.core.optionlist import known_releases, option_strings, refusal
from sourcefiles import NIXL, write

CODE = "source.option_not_in_release"
# (a plugin may add options to vLLM's parser: Arctic Inference, survey 13a)
PLUGIN = " unless a vLLM plugin adds the option"
PARSERS = Path(__file__).parent / "vllm_releases" / "parsers"


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
                                 f"the launch does not start{PLUGIN}",
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
        f"(line 2): the launch does not start{PLUGIN}",
        f"vLLM 0.30.0 rejects the unrecognized argument `--bogus-flag` (line 2): the launch does not start{PLUGIN}"]
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
                            f"`--num-scheduler-steps` (line 2): the launch does not start{PLUGIN}\n") == 1
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
        f"the launch does not start{PLUGIN}"]
    # Every report shows it, as the other notes.
    assert "note source.option_not_in_release" in render(result, "text")
    sarif = json.loads(render(result, "sarif"))
    assert [r["level"] for r in sarif["runs"][0]["results"] if r["ruleId"] == CODE] == ["note"]


def test_the_command_reader_lists_the_options_the_decision_does_not_read():
    result = read_command(["vllm", "serve", "m", "--port", "8000", "--max_num_seqs", "4", "-tp", "2",
                           "--kv-transfer-config", NIXL, "--disable-hybrid-kv-cache-manager", "--kv-transfer", NIXL,
                           "--enable-hybrid"])
    # Long options the decision does not read, `_` read as `-` (short ones are not checked), and
    # the decision's spellings only newer releases take, as given (0.33.0 expands this prefix).
    assert [a.text for a in result.unchecked] == ["--port", "--max-num-seqs", "--enable-hybrid"]
    assert result.document["disable_hybrid_kv_cache_manager"] is False  # the last occurrence wins
    dynamo = read_command(["python3", "-m", "dynamo.vllm", "--model", "m", "--is-prefill-worker"])
    assert dynamo.unchecked == ()


def test_refusal_reads_each_releases_list():
    assert refusal("0.30.0", "--max-num-seqs") is None
    assert refusal("0.30.0", "--help") is None  # argparse's own
    assert refusal("0.6.6", "--anything") is None  # no list bundled: nothing is said
    assert refusal("0.33.0", "--num-scheduler-steps") == (
        "source.unknown_option", "vLLM 0.33.0 rejects the unrecognized argument `--num-scheduler-steps`",
        "an option of vLLM 0.9.1 to 0.10.0 (of the bundled releases)")
    # 0.33.0 takes each on/off option's inverse spelling (EnableDisableAction); 0.32.0 does not.
    assert refusal("0.33.0", "--disable-log-requests") is None
    assert refusal("0.32.0", "--enable-hybrid-kv-cache-manager") == (
        "source.unknown_option", "vLLM 0.32.0 rejects the unrecognized argument `--enable-hybrid-kv-cache-manager`",
        "an option of vLLM 0.33.0 (of the bundled releases)")
    assert refusal("0.30.0", "--max-num-seq") is None  # a unique prefix
    assert refusal("0.30.0", "--max-num-sesq") == (
        "source.unknown_option", "vLLM 0.30.0 rejects the unrecognized argument `--max-num-sesq`",
        "did you mean `--max-num-seqs`?")
    # Every bundled list accepts each of its own options, --no- forms and aliases included.
    for release in known_releases():
        assert all(refusal(release, option) is None for option in option_strings(release))


def test_every_bundled_release_has_its_real_parser_recorded():
    assert sorted(p.stem for p in PARSERS.glob("*.json")) == sorted(known_releases())


@pytest.mark.parametrize("release", known_releases())
def test_each_releases_list_is_what_its_real_parser_registers(release):
    # tests/vllm_releases/parsers/: every option string of the `vllm serve`
    # parser that the release's own code built (PROVENANCE.md). The bundled
    # lists are read from the wheels without running them: 0.33.0's missed the
    # 50 inverse spellings its EnableDisableAction registers when the parser is
    # built, 0.9.1 to 0.12.0's --no-enable-chunked-prefill, 0.11.0's looped
    # deprecated options and 0.9.1's serve-subcommand options.
    real = json.loads((PARSERS / f"{release}.json").read_text(encoding="utf-8"))
    assert real["vllm_version"] == release and real["allow_abbrev"] is True  # unique prefixes expand
    assert option_strings(release) == frozenset(real["long_options"])


def test_0_33_0s_enable_spelling_is_the_explicit_enable_and_older_releases_refuse_it():
    enable = ["vllm", "serve", "m", "--kv-transfer-config", NIXL]
    spelled = hma_policy.decide_command(enable + ["--enable-hybrid-kv-cache-manager"])
    assert spelled.to_dict() == hma_policy.decide_command(enable + ["--no-disable-hybrid-kv-cache-manager"]).to_dict()
    assert spelled.hma_enabled is True and "HMA was explicitly enabled" in " ".join(spelled.reasons)
    with pytest.raises(InputError) as info:
        hma_policy.decide_command(enable + ["--enable-hybrid-kv-cache-manager"], vllm_version="0.32.0")
    assert [(p.code, p.message, p.hint) for p in info.value.problems] == [
        ("source.unknown_option", "vLLM 0.32.0 rejects the unrecognized argument `--enable-hybrid-kv-cache-manager`",
         "an option of vLLM 0.33.0 (of the bundled releases)")]


def test_a_command_decided_for_a_named_release_is_refused_for_an_option_that_release_rejects(tmp_path):
    steps = ["vllm", "serve", "m", "--num-scheduler-steps", "8"]
    assert hma_policy.decide_command(steps).outcome == "enabled"  # no release named: the default may not run it
    assert hma_policy.decide_command(steps, vllm_version="0.10.0").outcome == "enabled"
    with pytest.raises(InputError) as info:
        hma_policy.decide_command(steps, vllm_version="0.30.0")
    assert [p.message for p in info.value.problems] == [
        "vLLM 0.30.0 rejects the unrecognized argument `--num-scheduler-steps`"]
    # A policy loaded for a release names it; the bundle's default does not.
    with pytest.raises(InputError):
        hma_policy.load_policy(release="0.30.0").decide_command(steps)
    assert hma_policy.load_policy().decide_command(steps).outcome == "enabled"
    cli = subprocess.run([sys.executable, "-m", "hma_policy", "decide", "--vllm-version", "0.30.0", "--", *steps],
                         cwd=tmp_path, capture_output=True, text=True)
    assert cli.returncode == 2
    assert "source.unknown_option [input] at /: vLLM 0.30.0 rejects the unrecognized argument `--num-scheduler-steps`" \
        in cli.stdout


MULTI_LORA = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-qwen3-32b
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "vllm/vllm-openai:{tag}"
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
          args:
          - "--model"
          - "Qwen/Qwen3-32B-AWQ"
          - "--enable-lora"
          - --lora-modules
          - adapter-0=/adapters/adapter-0
          - adapter-1=/adapters/adapter-1
          - adapter-2=/adapters/adapter-2
"""


@pytest.mark.parametrize("tag", ["v0.9.2", "v0.20.0", "latest"])
def test_lora_modules_takes_every_adapter_after_it(tmp_path, tag):
    # llm-d/llm-d-inference-scheduler (520af47) config/manifests/vllm/gpu-multilora-deployment.yaml
    # (15 adapters, cut to 3): FrontendArgs.lora_modules is a list, so get_kwargs gives it nargs="+",
    # which _customize_cli_kwargs keeps when it replaces the type (0.9.x writes nargs='+'). The option
    # lists read it as one word, and the launch was an error: "vLLM rejects the unrecognized
    # arguments adapter-2=/adapters/adapter-2".
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(MULTI_LORA.format(tag=tag), encoding="utf-8")
    (entry,) = audit([str(manifest)]).entries
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert [n.code for n in entry.deployment.notes] == (["source.release_unknown"] if tag == "latest" else [])


DEVICE = ("the call raises a TypeError, and the launch does not start",
          "a field of vLLM 0.9.1 to 0.9.2 (of the bundled releases)")


@pytest.mark.parametrize("release, notes", [
    # 0.10.0's parser has no spelling of False (`--enable-...` came in 0.33.0), but its EngineArgs has the
    # field: the call passes it as a keyword, and no note. `device` is a field of 0.9.1 and 0.9.2 only.
    ("0.10.0", [(f"vLLM 0.10.0's engine arguments have no field `device` (line 3): {DEVICE[0]}", DEVICE[1])]),
    ("0.9.1", []),
    ("0.33.0", [(f"vLLM 0.33.0's engine arguments have no field `device` (line 3): {DEVICE[0]}", DEVICE[1])]),
    # Older than the rules: the HMA's field is none of that release's (the same note as the flag's).
    ("0.8.5", [("vLLM 0.8.5's engine arguments have no field `disable_hybrid_kv_cache_manager` (line 2): it came "
                "with the hybrid KV cache manager in 0.9.1, and the call raises a TypeError, so the launch does not "
                "start", "drop the argument, or run vLLM 0.9.1 or later")]),
])
def test_a_python_calls_keywords_are_checked_as_the_releases_engine_fields_not_as_option_spellings(
        tmp_path, monkeypatch, release, notes):
    write(tmp_path / "requirements.txt", f"vllm=={release}\n")
    write(tmp_path / "run.py", "from vllm import LLM\nllm = LLM('m', disable_hybrid_kv_cache_manager=False,\n"
          f"          device='cuda', kv_transfer_config={NIXL})\n")
    monkeypatch.chdir(tmp_path)
    deployment, found = option_notes(audit(["run.py"]))
    assert [(n["message"], n.get("hint")) for n in found] == notes
    assert deployment["decision"]["vllm"]["release"] == release
