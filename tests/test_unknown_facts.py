"""A value the file leaves unknown that the rules read as a fact, as written
(facts.READ_AT: the speculative method): the launch is decided where each
class of value the rules tell apart gives the same answer, and stays
`source.unresolved` where they differ (audit.unknowns)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit
from rulecopy import copy_rules, edit

NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
# The classes the bundled rules of 0.33.0 tell apart: the EAGLE-style methods
# of hma.chunked_local_eagle, and any other (none given among them).
CLASSES_0_33 = "`speculative_method`: `eagle`, `eagle3`, `mtp`, `dflash`, `dspark`, any other"


def audited(tmp_path: Path, name: str, text: str, rules: str | None = None) -> tuple[dict, tuple]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    policy = hma_policy.PolicySet(rules) if rules is not None else None
    [entry] = audit([str(path)], policy=policy).entries if policy is not None else audit([str(path)]).entries
    notes = tuple((n.code, n.message) for n in entry.deployment.notes if n.code.startswith("source.unresolved"))
    return entry.decision, notes


def test_an_unknown_speculative_config_is_decided_when_no_method_changes_the_answer(tmp_path):
    decision, notes = audited(tmp_path, "serve.sh", f"SPEC=\"$1\"\nvllm serve m --kv-transfer-config '{NIXL}' "
                                                    '--speculative-config "$SPEC"\n')
    assert (decision["outcome"], decision["hma_enabled"], decision["errors"]) == ("enabled", True, [])
    assert notes == (("source.unresolved_unused",
                      "`--speculative-config` takes its value from `$1`, which this file does not set; the decision "
                      f"is the same for each value the rules tell apart ({CLASSES_0_33})"),)


def test_an_unknown_method_inside_the_json_is_decided_alike(tmp_path):
    decision, notes = audited(tmp_path, "serve.sh", 'vllm serve m --speculative-config '
                                                    '"{\\"method\\": \\"${METHOD}\\", \\"model\\": \\"$DRAFT\\"}"\n')
    assert (decision["outcome"], decision["errors"]) == ("enabled", [])
    assert notes == (
        ("source.unresolved_unused", "`--speculative-config` takes its value at `/model` from `$DRAFT`, which this "
                                     "file does not set; the decision does not read that value"),
        ("source.unresolved_unused", "`--speculative-config` takes its value at `/method` from `${METHOD}`, which "
                                     f"this file does not set; the decision is the same for each value the rules "
                                     f"tell apart ({CLASSES_0_33})"))


def test_where_the_method_changes_the_answer_the_launch_stays_unresolved(tmp_path):
    """With chunked local attention, an EAGLE-style method turns HMA off and
    any other leaves it on: the file does not say which."""
    decision, notes = audited(tmp_path, "serve.sh", "# hma-policy: {model_facts: {attention_chunk_size: 8192}}\n"
                                                    'vllm serve m --speculative-config "{\\"method\\": \\"$M\\"}"\n')
    assert decision["outcome"] == "error"
    assert [(e["code"], e["path"], e["message"]) for e in decision["errors"]] == [
        ("source.unresolved", "/speculative_config",
         "line 2: `--speculative-config` takes its value at `/method` from `$M`, which this file does not set")]
    assert notes == ()


TYPE_ALONE = "vLLM reads it for its type alone: the decision is the same for any value it accepts there"


@pytest.mark.parametrize("port", ['\\"$PORT\\"', "$PORT"])  # quoted in the JSON, or written bare
def test_an_unknown_number_read_for_its_type_alone_is_decided(tmp_path, port):
    """vLLM's P2P NCCL examples compute each instance's kv_port: any number
    gives the same decision (it was a source.unresolved error)."""
    ktc = '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\",\\"kv_port\\":' + port + '}'
    decision, notes = audited(tmp_path, "serve.sh", f'# hma-policy: {{vllm_version: "0.11.0"}}\n'
                                                    f'vllm serve m --kv-transfer-config "{ktc}"\n')
    assert (decision["outcome"], decision["hma_enabled"], decision["errors"]) == ("disabled", False, [])
    assert notes == (("source.unresolved_unused", "`--kv-transfer-config` takes its value at `/kv_port` from `$PORT`, "
                                                  f"which this file does not set; {TYPE_ALONE}"),)


def test_a_number_and_a_method_unknown_together_are_decided_with_a_note_each(tmp_path):
    ktc = '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\",\\"kv_port\\":\\"$PORT\\"}'
    decision, notes = audited(tmp_path, "serve.sh", f'vllm serve m --kv-transfer-config "{ktc}" '
                                                    '--speculative-config "$SPEC"\n')
    assert (decision["outcome"], decision["errors"]) == ("enabled", [])
    assert [message.split("; ", 1)[1] for _, message in notes] == [
        TYPE_ALONE, f"the decision is the same for each value the rules tell apart ({CLASSES_0_33})"]


def test_a_stand_in_refused_itself_settles_nothing():
    """A refusal at a stand-in says nothing of the value it stands for."""
    from hma_policy.audit.sources import Deployment
    from hma_policy.audit.unknowns import settled
    from hma_policy.core.command import StandIn
    from hma_policy.core.errors import Problem
    ktc = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": "x"}
    unknown = Problem("source.unresolved", "`--kv-transfer-config` takes its value at `/kv_port` from `$PORT`",
                      "/kv_transfer_config")
    deployment = Deployment("f", "shell", problems=(unknown,),
                            stand_in=StandIn({"kv_transfer_config": ktc}, ("/kv_transfer_config/kv_port",)))
    policies = hma_policy.PolicySet()
    assert settled(policies, deployment, None) is None
    standing = deployment.replace(stand_in=StandIn({"kv_transfer_config": {**ktc, "kv_port": 0}},
                                                   ("/kv_transfer_config/kv_port",)))
    assert settled(policies, standing, None).outcome == "enabled"


def test_a_refusal_away_from_the_unknown_config_is_the_answer(tmp_path):
    ktc = '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1"}'
    decision, notes = audited(tmp_path, "serve.sh", f"vllm serve m --kv-transfer-config '{ktc}' "
                                                    '--speculative-config "$SPEC"\n')
    assert [(e["code"], e["path"]) for e in decision["errors"]] == [
        ("input.schema", "/kv_transfer_config/kv_buffer_size")]
    assert notes == (("source.unresolved_unused", "`--speculative-config` takes its value from `$SPEC`, which this "
                                                  "file does not set; vLLM refuses the command whatever that value is"),)


def test_the_classes_are_the_rules_own(tmp_path):
    """The methods tried come from the rule files: a method added to the
    EAGLE rule is tried too, and its own answer keeps the launch unresolved
    where it differs."""
    rules = copy_rules(tmp_path / "rules")
    policy = hma_policy.load_policy(rules)
    assert policy.classes("speculative_method")[:-1] == ("eagle", "eagle3", "mtp", "dflash", "dspark")
    edit(rules / "decision.yaml", "{in: [eagle, eagle3, mtp, dflash, dspark]}", "{in: [eagle, eagle3, mtp, dflash, dspark, ngram]}")
    assert hma_policy.load_policy(rules).classes("speculative_method")[:-1] == (
        "eagle", "eagle3", "mtp", "dflash", "dspark", "ngram")
    _, notes = audited(tmp_path, "serve.sh", 'vllm serve m --speculative-config "$SPEC"\n', rules=str(rules))
    assert notes[0][1].endswith("(`speculative_method`: `eagle`, `eagle3`, `mtp`, `dflash`, `dspark`, `ngram`, "
                                "any other)")


def test_a_release_tells_apart_its_own_methods(tmp_path):
    decision, notes = audited(tmp_path, "compose.yaml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n"
                                                        '    command: ["--model", "m", "--speculative-config", '
                                                        '"${SPEC_CONFIG}"]\n')
    assert decision["vllm"]["release"] == "0.11.0" and decision["outcome"] == "enabled"
    classes = hma_policy.load_policy(release="0.11.0").classes("speculative_method")
    assert classes != hma_policy.load_policy().classes("speculative_method")
    assert "deepseek_mtp" in classes
    told = ", ".join(f"`{c}`" for c in classes[:-1])
    assert notes[0][1].endswith(f"(`speculative_method`: {told}, any other)")


@pytest.mark.parametrize("call", ['LLM(model="m", speculative_config=spec)',
                                  'LLM(model="m", speculative_config={"method": sys.argv[1], '
                                  '"num_speculative_tokens": 3})'])
def test_python_calls_are_settled_alike(tmp_path, call):
    decision, notes = audited(tmp_path, "run.py", f"import sys\nfrom vllm import LLM\n\ndef main(spec):\n    {call}\n")
    assert (decision["outcome"], decision["errors"]) == ("enabled", [])
    assert notes[-1][1].endswith(f"the decision is the same for each value the rules tell apart ({CLASSES_0_33})")


def test_classes_of_an_unknown_fact_name_is_a_key_error():
    with pytest.raises(KeyError):
        hma_policy.load_policy().classes("preference")


MULTI = ('{\\"kv_connector\\":\\"MultiConnector\\",\\"kv_role\\":\\"kv_both\\",\\"kv_connector_extra_config\\":'
         '{\\"connectors\\":[{\\"kv_connector\\":\\"CHILD\\",\\"kv_role\\":\\"kv_both\\"},'
         '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\",\\"kv_port\\":PORT}]}}')


@pytest.mark.parametrize("port", ["$PORT", '\\"$PORT\\"'])
def test_a_childs_unknown_port_is_read_for_its_type_as_the_top_levels_is(tmp_path, port):
    """vllm-project/vllm-ascend's UCM guide (182b75e, ucm_deployment.md) gives a
    MultiConnector child `"kv_port": '$mooncake_port'`: the children's schema
    sits in the `then` of an `if`, which was not read, so the value was noted
    as one "the decision does not read" and then refused as no integer."""
    ktc = MULTI.replace("CHILD", "OffloadingConnector").replace("PORT", port)
    decision, notes = audited(tmp_path, "serve.sh", f'vllm serve m --kv-transfer-config "{ktc}"\n')
    assert (decision["outcome"], decision["errors"]) == ("enabled", [])
    assert notes == (("source.unresolved_unused", "`--kv-transfer-config` takes its value at "
                      "`/kv_connector_extra_config/connectors/1/kv_port` from `$PORT`, which this file does not set; "
                      f"{TYPE_ALONE}"),)


def test_a_childs_unknown_connector_is_read(tmp_path):
    ktc = MULTI.replace("CHILD", "$CHILD").replace("PORT", "5600")
    decision, notes = audited(tmp_path, "serve.sh", f'vllm serve m --kv-transfer-config "{ktc}"\n')
    assert [(e["code"], e["message"]) for e in decision["errors"]] == [
        ("source.unresolved", "line 1: `--kv-transfer-config` takes its value at "
                              "`/kv_connector_extra_config/connectors/0/kv_connector` from `$CHILD`, which this file "
                              "does not set")]
    assert notes == ()


# NVIDIA-NeMo/RL (7ea279ab) nemo_rl/models/generation/vllm/vllm_worker.py: L424 sets
# `os.environ["VLLM_USE_V1"] = "1" if is_vllm_v1_engine_enabled() else "0"`, L817 builds
# `vllm.LLM(**llm_kwargs)`. Releases from 0.11.1 do not read VLLM_USE_V1: the launch was
# `source.unresolved` where either value gives the same answer.
# The function is nemo_rl/models/policy/utils.py's, which reads NRL_VLLM_USE_V1 when the script runs.
NEMO_RL = ('import os\nimport vllm\nfrom nemo_rl.models.policy.utils import is_vllm_v1_engine_enabled\n\n'
           'os.environ["VLLM_USE_V1"] = "1" if is_vllm_v1_engine_enabled() else "0"\n'
           'llm = vllm.LLM(model="m")\n')


def test_an_unknown_vllm_use_v1_is_decided_where_neither_engine_changes_the_answer(tmp_path):
    decision, notes = audited(tmp_path, "vllm_worker.py", NEMO_RL)
    assert (decision["outcome"], decision["hma_enabled"], decision["errors"]) == ("enabled", True, [])
    assert notes == (("source.unresolved_unused",
                      "the environment variable `VLLM_USE_V1` takes its value from `'1' if is_vllm_v1_engine_enabled() "
                      "else '0'`, where `'1' if is_vllm_v1_engine_enabled() else '0'` is chosen when the script runs; "
                      "the decision is the same for each value the rules tell apart (`env_use_v1`: `0`, `1`)"),)
    # vLLM 0.10.1 runs the V0 engine, which has no hybrid KV cache manager, for VLLM_USE_V1=0.
    decision, _ = audited(tmp_path, "old.sh", 'pip install vllm==0.10.1\nexport VLLM_USE_V1="$V1"\nvllm serve m\n')
    assert [(e["code"], e["path"]) for e in decision["errors"]] == [("source.unresolved", "/env/VLLM_USE_V1")]
    # A variable two facts read (its values are not every answer) stays unresolved whatever the release.
    decision, _ = audited(tmp_path, "offload.sh", 'export VLLM_USE_SIMPLE_KV_OFFLOAD="$X"\nvllm serve m\n')
    assert [(e["code"], e["path"]) for e in decision["errors"]] == [
        ("source.unresolved", "/env/VLLM_USE_SIMPLE_KV_OFFLOAD")]


def test_each_variable_tried_for_its_values_is_one_fact_of_one_ruleset():
    from hma_policy.core.facts import DECLARED, ENV_READ, written_at
    for variable, read in ENV_READ.items():
        assert [f.ruleset for f in DECLARED if f.name == read.fact] == ["decision"], variable
        assert sum(variable in f.doc for f in DECLARED) == 1, variable  # no other fact reads it
        assert [written_at(f"/env/{variable}", value) for value, _ in read.written] == [t for _, t in read.written]
    assert written_at("/speculative_config/method", "eagle") == "eagle"


def test_an_unknown_kv_events_config_is_given_whatever_it_holds(tmp_path):
    # MetaX-MACA/vLLM-metax (3aadf08) tests/v1/engine/test_engine_core_client.py: an EngineArgs'
    # `kv_events_config` from a fixture was an `error` at 0.33.0, a release that does not read it (survey 41a).
    # Releases before 0.20.0 read only that it is given (`is not None`): any value gives their answer.
    unused = ("source.unresolved_unused", "`--kv-events-config` takes its value from `$X`, which this file does not "
                                          "set; the decision reads only that it is given: the same for any value "
                                          "vLLM accepts there")
    decision, notes = audited(tmp_path, "serve.sh", 'vllm serve m --kv-events-config "$X"\n')
    assert (decision["outcome"], decision["hma_enabled"], notes) == ("enabled", True, (unused,))
    decision, notes = audited(tmp_path, "old.sh", 'pip install vllm==0.19.1\nvllm serve m --kv-events-config "$X"\n')
    assert (decision["outcome"], decision["hma_enabled"], notes) == ("disabled", False, (unused,))
    decision, notes = audited(tmp_path, "engine.py", "from vllm import LLM\ndef run(cfg):\n"
                                                     "    return LLM(model='m', kv_events_config=cfg)\n")
    assert (decision["outcome"], [n[1] for n in notes]) == ("enabled", [
        "`kv_events_config` takes its value from `cfg` (which is a parameter of `run`); the decision reads only that "
        "it is given: the same for any value vLLM accepts there"])
    # An option whose contents the decision reads, its whole value not known, stays unresolved.
    decision, _ = audited(tmp_path, "kv.sh", 'vllm serve m --kv-transfer-config "$X"\n')
    assert [(e["code"], e["path"]) for e in decision["errors"]] == [("source.unresolved", "/kv_transfer_config")]


def test_a_path_that_leaves_a_speculative_config_unknown_is_settled_with_the_others(tmp_path):
    # MetaX-MACA/vLLM-metax (3aadf08) tools/batched_test/old/online.py: `if args.speculative_config: cmd +=
    # ["--speculative-config", args.speculative_config]` was an `error`, where the same unknown value
    # written unconditionally is decided (survey 41a). A path whose only unknown values have stand-ins
    # is tried for them, and the paths settle the launch where every path's answer is the same.
    decision, notes = audited(tmp_path, "online.py", (
        "import subprocess\ndef start(args):\n    cmd = ['vllm', 'serve', 'm']\n    if args.speculative_config:\n"
        "        cmd += ['--speculative-config', args.speculative_config]\n    subprocess.Popen(cmd)\n"))
    assert (decision["outcome"], decision["hma_enabled"], decision["errors"]) == ("enabled", True, [])
    assert notes == (("source.unresolved_unused", (
        "on path 1 of 2, where `args.speculative_config` is true: `--speculative-config` takes its value from "
        "`args.speculative_config` (which is computed when the script runs); the decision is the same on each of "
        "the 2 paths (whatever the values a path leaves unknown)")),)
    # Where a method on that path changes the answer (chunked local attention), it stays unresolved.
    decision, _ = audited(tmp_path, "serve.sh", (
        "# hma-policy: {model_facts: {attention_chunk_size: 8192}}\n"
        'if [ -n "$S" ]; then A=(--speculative-config "$S"); fi\nvllm serve m "${A[@]}"\n'))
    assert [(e["code"], e["path"], e["message"]) for e in decision["errors"]] == [(
        "source.unresolved", "/speculative_config", "line 3: on path 1 of 2 through `if` at line 2: "
        "`--speculative-config` takes its value from `$S`, which this file does not set")]
