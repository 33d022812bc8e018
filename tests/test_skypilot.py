"""SkyPilot task YAML (audit/sources/skypilot.py). The fleet corpus holds
real tasks (tests/fleet_corpus/skypilot-org__skypilot, nebius__*), none of
which sets a KV option; these cover the KV paths, unknown values and the
release, on small tasks written as SkyPilot's users write them."""

from __future__ import annotations

from pathlib import Path

import hma_policy
from hma_policy.audit.sources import read_source

LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'


def read(tmp_path: Path, text: str, name: str = "task.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_source(path, display=name)


def test_a_launch_in_run_takes_the_tasks_envs_and_is_decided(tmp_path):
    found = read(tmp_path, f"""\
envs:
  MODEL: Qwen/Qwen3-8B
  KV: '{LMCACHE}'
resources:
  accelerators: L4:1
run: |
  echo starting
  vllm serve $MODEL --kv-transfer-config "$KV" \\
    --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE
""")
    assert found.format == "skypilot"
    (only,) = found.deployments
    assert (only.id, only.line) == ("task.yaml:8", 8)
    assert only.document["kv_transfer_config"] == LMCACHE and only.document["model"] == {"name": "Qwen/Qwen3-8B"}
    assert dict(only.origins)["kv_transfer_config"] == "line 8: --kv-transfer-config"
    assert [n.message for n in only.notes] == [
        "`--tensor-parallel-size` takes its value from `$SKYPILOT_NUM_GPUS_PER_NODE` (which is set by SkyPilot at run "
        "time); the decision does not read it"]
    assert hma_policy.decide(only.document).outcome == "disabled"


def test_a_null_env_the_decision_reads_is_unresolved_and_named_as_given_at_launch(tmp_path):
    found = read(tmp_path, """\
envs:
  KV: null
secrets:
  HF_TOKEN: null
resources: {accelerators: A100:1}
run: vllm serve m --kv-transfer-config "$KV" --hf-token "$HF_TOKEN"
""")
    (only,) = found.deployments
    assert only.document is None and only.line == 6
    assert [(p.code, p.message) for p in only.problems] == [
        ("source.unresolved", "`--kv-transfer-config` takes its value from `$KV` (which is given at launch "
                              "(`--env KV=...`))")]


def test_the_release_is_the_runs_pin_else_the_setups_else_the_image(tmp_path):
    task = """\
resources:
  image_id: docker:vllm/vllm-openai:v0.22.0
setup: |
  {setup}
run: |
  {run}
  vllm serve m
"""
    def release(setup: str, run: str) -> tuple[str | None, str]:
        (only,) = read(tmp_path, task.format(setup=setup, run=run)).deployments
        return only.release.version, only.release.origin

    assert release("pip install vllm==0.21.0", "pip install vllm==0.20.0") == ("0.20.0", "pip pin vllm==0.20.0 at line 6")
    assert release("pip install vllm==0.21.0", "true") == ("0.21.0", "pip pin vllm==0.21.0 at line 4")
    assert release("true", "true") == ("0.22.0", "image tag vllm/vllm-openai:v0.22.0")


def test_a_directive_above_the_launch_gives_its_facts(tmp_path):
    found = read(tmp_path, """\
resources: {accelerators: A100:1}
run: |
  # hma-policy: {model_facts: {layer_kinds: [sliding_window, full_attention]}}
  vllm serve m
""")
    (only,) = found.deployments
    assert only.document["model_facts"] == {"layer_kinds": ["sliding_window", "full_attention"]}


def test_only_a_skypilot_task_is_read_as_one(tmp_path):
    # a `run` with no key only a task has, or beside a key no task has, is another tool's
    assert read(tmp_path, "run: vllm serve m\n").format is None
    assert read(tmp_path, "run: vllm serve m\njobs: {build: {}}\nresources: {}\n").format is None
    # a task whose run starts no vLLM server has no deployment
    found = read(tmp_path, "resources: {accelerators: A100:1}\nrun: python train.py\n")
    assert (found.format, found.deployments) == ("skypilot", ())
