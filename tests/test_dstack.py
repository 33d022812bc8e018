"""dstack run configurations (audit/sources/dstack.py): a task's or a
service's `commands`, run as one script with its `env`. The first case has
the shape of dstackai/dstack (511c318c) examples/models/gpt-oss/amd/
120b.dstack.yml; the others cover the KV paths, unknown values, the
entrypoint form and the release, as dstack's users write them."""

from __future__ import annotations

from pathlib import Path

import hma_policy
from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import LMCACHE, NIXL, ktc, linear_ratio, only, write


def read(tmp_path: Path, text: str, name: str = ".dstack.yml"):
    return read_source(write(tmp_path / name, text), display=name)


def test_a_services_commands_are_one_script_with_its_env(tmp_path):
    found = read(tmp_path, """\
type: service
name: gpt-oss-120b

model: openai/gpt-oss-120b

env:
  - HF_TOKEN
  - MODEL=openai/gpt-oss-120b
image: rocm/vllm-dev:open-mi300-08052025
commands:
  - |
    vllm serve $MODEL \\
      --tensor-parallel $DSTACK_GPUS_NUM \\
      --no-enable-prefix-caching
port: 8000
resources:
  gpu: MI300X:8
""", name="120b.dstack.yml")
    d = only(found)
    assert (found.format, d.line, d.name, d.document) == ("dstack", 12, "openai/gpt-oss-120b",
                                                          {"model": {"name": "openai/gpt-oss-120b"}})
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_unused", "`--tensor-parallel` takes its value from `$DSTACK_GPUS_NUM` (which is set by "
                                     "dstack's runner when the run starts); the decision does not read it"),
        ("source.release_unknown", "the vLLM release is not known: image rocm/vllm-dev:open-mi300-08052025 is not "
                                   "vLLM's release image: its tag is not read as a vLLM release")]
    assert hma_policy.decide(d.document).outcome == "enabled"


def test_commands_run_in_turn_each_at_its_line_with_the_env_and_the_runs_variables(tmp_path):
    found = read(tmp_path, f"""\
type: task
env:
  KV: '{LMCACHE}'
  TOKEN: ${{{{ secrets.hf_token }}}}
commands:
  - export PORT=8001
  - pip install vllm==0.21.0
  - vllm serve m --port $PORT --kv-transfer-config "$KV"
  - >-
    vllm serve m --kv-transfer-config '{NIXL}'
    --api-key $TOKEN --data-parallel-rank $DSTACK_NODE_RANK
""")
    first, second = found.deployments
    assert [(d.line, ktc(d)["kv_connector"]) for d in found.deployments] == [(8, "LMCacheConnectorV1"),
                                                                            (10, "NixlConnector")]
    assert first.release == ReleaseHint("0.21.0", "pip pin vllm==0.21.0 at line 7")
    assert hma_policy.decide(first.document).outcome == "disabled"
    assert [n.message for n in second.notes][:2] == [
        "`--api-key` takes its value from `${{ secrets.hf_token }}` (which is filled in by dstack when the run "
        "starts); the decision does not read it",
        "`--data-parallel-rank` takes its value from `$DSTACK_NODE_RANK` (which is set by dstack's runner when the "
        "run starts); the decision does not read it"]


def test_a_variable_dstack_apply_takes_from_its_environment_is_not_known(tmp_path):
    found = read(tmp_path, "type: task\nenv:\n  - KV\nresources: {gpu: 1}\ncommands:\n"
                           "  - vllm serve m --kv-transfer-config \"$KV\"\n")
    (problem,) = only(found).problems
    assert (problem.code, problem.line) == ("source.unresolved", 6)
    assert "`$KV` (which is taken from the environment `dstack apply` runs in)" in problem.message


def test_an_entrypoint_takes_the_commands_as_its_arguments(tmp_path):
    found = read(tmp_path, f"type: service\nport: 8000\nentrypoint: vllm serve\n"
                           f"commands: [m, --kv-transfer-config, '{NIXL}']\n")
    d = only(found)
    assert (d.line, ktc(d)["kv_connector"]) == (3, "NixlConnector")


def test_another_tools_type_and_commands_are_not_a_dstack_configuration(tmp_path):
    found = read(tmp_path, "type: service\ncommands:\n  - vllm serve m\n", name="pipeline.yaml")
    assert (found.format, found.deployments) == (None, ())


def test_each_replica_group_that_runs_commands_is_a_launch_of_its_own(tmp_path):
    # dstackai/dstack (511c318c) mkdocs/docs/examples/inference/vllm.md `pd.dstack.yml`: a service whose
    # `replicas:` is a list of groups (dstack 0.20.17's ReplicaGroup: commands, image, python per group),
    # a prefill and a decode group with their own NixlConnector roles. No launch was read, and the file
    # was "not a deployment document" (survey 20z). Each group runs in its own image.
    found = read(tmp_path, f"""\
type: service
name: pd
port: 8000
env:
  - HF_TOKEN
replicas:
  - count: 1
    image: vllm/vllm-openai:v0.18.0
    commands:
      - vllm serve Qwen/Qwen3-8B --kv-transfer-config '{NIXL.replace(" ", "")}'
  - count: 1..4
    commands:
      - pip install x
      - vllm serve Qwen/Qwen3-8B
""", name="pd.dstack.yml")
    prefill, decode = found.deployments
    assert [(d.line, d.release) for d in (prefill, decode)] == [
        (10, ReleaseHint("0.18.0", "image tag vllm/vllm-openai:v0.18.0")), (14, None)]
    assert (ktc(prefill)["kv_connector"], "kv_transfer_config" in decode.document) == ("NixlConnector", False)
    assert hma_policy.decide({**prefill.document, "vllm_version": "0.18.0"}).outcome == "disabled"


def test_a_configuration_of_many_commands_or_groups_is_read_in_linear_time(tmp_path):
    # Each command's line was found by parsing the whole file again (marks.Lines.inner): 3,000
    # commands took 11 s, and 3,000 replica groups 104 s. The file is parsed once now.
    def commands(count: int) -> str:
        return "type: service\nport: 8000\ncommands:\n" + "".join(f"  - vllm serve m{i}\n" for i in range(count))

    def groups(count: int) -> str:
        return "type: service\nport: 8000\nreplicas:\n" + "".join(
            f"  - count: 1\n    commands:\n      - vllm serve m{i}\n" for i in range(count))
    for make in (commands, groups):
        ratio = linear_ratio(make, 400, tmp_path, "run.dstack.yml")
        assert ratio < 3.0, (make.__name__, ratio)


def test_a_long_entrypoint_is_read_in_linear_time(tmp_path):
    # The entrypoint was split with shlex.split, quadratic in a word's length: 800 kB took 7.7 s,
    # a hang for a file of 16 MB. One longer than a command line is read as one word.
    ratio = linear_ratio(lambda n: "type: service\nimage: vllm/vllm-openai:v0.10.0\nport: 8000\n"
                                   f'entrypoint: "vllm serve m --served-model-name {"a" * n}"\n', 200_000, tmp_path,
                         "run.dstack.yml")
    assert ratio < 3.0, ratio
