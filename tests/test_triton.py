"""Triton's vLLM backend (audit/sources/triton.py): a model repository's
model.json, where the model's config.pbtxt picks the vLLM backend, is one
launch of the engine arguments it holds."""

from __future__ import annotations

import json
from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source

# triton-inference-server/vllm_backend (8de0c14) samples/model_repository/vllm_model: config.pbtxt
# (its license header left out) and 1/model.json, which src/model.py hands AsyncEngineArgs(**json).
CONFIG = """backend: "vllm"

# The usage of device is deferred to the vLLM engine
instance_group [
  {
    count: 1
    kind: KIND_MODEL
  }
]
"""
MODEL = """{
    "model":"facebook/opt-125m",
    "gpu_memory_utilization": 0.5,
    "enforce_eager": true
}
"""


def repository(tmp_path: Path, model_json: str, config: str = CONFIG) -> Path:
    folder = tmp_path / "model_repository" / "vllm_model"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config, encoding="utf-8")
    (folder / "1" / "model.json").write_text(model_json, encoding="utf-8")
    return folder / "1" / "model.json"


def test_a_vllm_backend_model_is_a_launch_of_its_model_json(tmp_path):
    # Skipped as "not a deployment document, vLLM config or Kubernetes manifest" (survey 12a).
    found = read_source(repository(tmp_path, MODEL), roots=(tmp_path,))
    (d,) = found.deployments
    assert (found.format, d.line, d.name, d.document) == ("triton", 1, "facebook/opt-125m",
                                                          {"model": {"name": "facebook/opt-125m"}})
    assert [n.code for n in d.notes] == ["source.release_unknown"]
    (entry,) = audit([str(tmp_path)]).entries
    assert entry.decision["outcome"] == "enabled"


def test_a_kv_transfer_config_in_model_json_is_the_engines(tmp_path):
    path = repository(tmp_path, json.dumps({"model": "m", "kv_transfer_config": {
        "kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}, indent=1))
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.decision["outcome"], [c["kv_connector"] for c in entry.decision["connectors"]]) == \
        ("disabled", ["LMCacheConnectorV1"])
    assert dict(entry.deployment.origins)["kv_transfer_config"] == "line 3: kv_transfer_config"
    assert path.name == "model.json"


def test_a_model_json_without_a_vllm_backend_is_no_launch(tmp_path):
    # Another backend's model (Python, TensorRT-LLM), or no config.pbtxt beside it: not vLLM's arguments.
    path = repository(tmp_path, MODEL, config='backend: "python"\n')
    assert read_source(path, roots=(tmp_path,)).deployments == ()
    (path.parent.parent / "config.pbtxt").unlink()
    assert read_source(path, roots=(tmp_path,)).deployments == ()
