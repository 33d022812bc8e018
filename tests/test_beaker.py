"""Beaker experiment specs (audit/sources/beaker.py): each task that runs
vLLM is a launch, read as the container it is."""

from __future__ import annotations

from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source

# allenai/open-instruct (e6c3044) configs/judge_configs/general_verifier_judge.yaml, skipped as "not a
# deployment document, vLLM config or Kubernetes manifest" (survey 12b).
JUDGE = """version: v2
budget: ai2/oe-other
description: "VLLM Server for general verifier"
tasks:
  - name: "vllm-job"
    image:
      beaker: ai2/pytorch2.0.0-cuda11.8-python3.10
    hostNetworking: true
    command: ["/bin/sh", "-c"]
    arguments:
      [
        "pip install vllm && \\
          VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-32B \\
            --tensor-parallel-size 2 \\
            --max-model-len 32768 \\
            --port 8001 \\
            --enforce-eager"
      ]
    resources:
      gpuCount: 2
"""


def test_a_beaker_task_that_runs_vllm_is_a_launch(tmp_path):
    path = tmp_path / "general_verifier_judge.yaml"
    path.write_text(JUDGE, encoding="utf-8")
    found = read_source(path)
    (d,) = found.deployments
    assert (found.format, d.line, d.container, d.name, d.document["model"]) == (
        "beaker", 5, "vllm-job", "vllm-job", {"name": "Qwen/Qwen3-32B"})
    assert d.release is not None and d.release.version is None  # (a Beaker image, and an unpinned pip install)
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "enabled"


def test_a_pin_the_tasks_script_installs_is_its_release_over_the_image(tmp_path):
    # The judge with a pinned install (survey 22h): the pin was dropped for the image's release (none,
    # here), and the launch decided as the default release, `enabled`; vLLM 0.8.5 predates HMA.
    path = tmp_path / "judge.yaml"
    path.write_text(JUDGE.replace("pip install vllm &&", "pip install vllm==0.8.5 &&"), encoding="utf-8")
    (entry,) = audit([str(path)]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]) == (
        "disabled", {"release": "0.8.5", "source": "pip pin vllm==0.8.5 at line 5"})
    # An experiment is named when it is created (`beaker experiment create --name`): the spec names none.
    assert dict(entry.deployment.origins)["model"] == "BeakerExperiment, container vllm-job"


def test_a_beaker_tasks_docker_image_and_env_are_the_containers(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("""version: v2
tasks:
  - name: train
    image: {beaker: ai2/cuda}
    command: [python, train.py]
  - name: serve
    image: {docker: vllm/vllm-openai:v0.20.0}
    arguments: [--model, m, --kv-transfer-config, '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}']
    envVars:
      - {name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: "1"}
      - {name: HF_TOKEN, secret: hf_token}
""", encoding="utf-8")
    (d,) = read_source(path).deployments
    assert (d.line, d.container, d.release.version) == (6, "serve", "0.20.0")
    assert d.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "disabled"


def test_a_yaml_file_of_another_version_or_without_tasks_is_no_beaker_spec(tmp_path: Path):
    path = tmp_path / "other.yaml"
    path.write_text("version: v1\ntasks:\n  - name: x\n    image: {docker: vllm/vllm-openai:v0.20.0}\n", encoding="utf-8")
    assert read_source(path).format != "beaker"
