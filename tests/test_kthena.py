"""Kthena's ModelBooster (volcano-sh/kthena): each engine worker is a launch, read as the
container the model-booster controller builds (audit/sources/kthena.py)."""

from __future__ import annotations

import hashlib

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from sourcefiles import write

# volcano-sh/kthena (3cc05728) examples/model-booster/lmcache-pd-disaggregation.yaml, shortened: the
# controller passes the worker's config as options (model_serving.go buildCommands).
LMCACHE_BOOSTER = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelBooster
metadata:
  name: qwen-lmcache-pd
  namespace: default
spec:
  backend:
    name: qwen-lmcache
    type: vLLMDisaggregated
    modelURI: "hf://Qwen/Qwen2.5-0.5B-Instruct"
    cacheURI: "hostpath://tmp/cache"
    env:
      - name: LMCACHE_CHUNK_SIZE
        value: "256"
    workers:
      - type: prefill
        image: lmcache/vllm-openai:latest
        resources:
          limits:
            nvidia.com/gpu: "1"
        config:
          served-model-name: "Qwen2.5-0.5B-Instruct"
          max-model-len: 32768
          gpu-memory-utilization: 0.90
          kv-transfer-config: |
            {"kv_connector": "LMCacheConnectorV1",
              "kv_role": "kv_producer"}
      - type: decode
        image: lmcache/vllm-openai:latest
        config:
          kv-transfer-config: '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_consumer"}'
"""


def test_each_worker_of_a_disaggregated_booster_runs_its_config_as_options(tmp_path):
    # The examples were no launch, silently (survey 19c): LMCacheConnectorV1 never supports HMA.
    booster = write(tmp_path / "lmcache-pd-disaggregation.yaml", LMCACHE_BOOSTER)
    prefill, decode = read_source(booster).deployments
    model = "/tmp/cache/" + hashlib.md5(b"hf://Qwen/Qwen2.5-0.5B-Instruct").hexdigest()
    assert (prefill.id, prefill.line, prefill.role, prefill.format, prefill.document["model"]) == (
        f"{booster}#ModelBooster/default/qwen-lmcache-pd/prefill/prefill", 16, "prefill", "kthena", {"name": model})
    # The config's other keys, sorted, are options of their own; the controller's environment is the engine's.
    assert [option for option, _ in prefill.options] == ["--gpu-memory-utilization", "--max-model-len",
                                                         "--served-model-name"]
    assert prefill.document["env"] == {"VLLM_USE_V1": "1"}
    assert (decode.line, decode.role) == (28, "decode")
    entries = audit([str(booster)]).entries
    assert [(e.decision["outcome"], [w["code"] for w in e.decision["warnings"]]) for e in entries] == \
        [("disabled", ["hma.auto_disabled"])] * 2


def test_a_server_booster_takes_its_first_worker_s_config(tmp_path):
    # examples/model-booster/Qwen2.5-0.5B-Instruct.yaml: a `""` value is a bare flag.
    booster = write(tmp_path / "b.yaml", LMCACHE_BOOSTER.replace("vLLMDisaggregated", "vLLM").replace(
        "type: prefill", "type: server").replace("type: decode", "type: other"))
    (server,) = read_source(booster).deployments
    assert (server.role, server.document["kv_transfer_config"]) == ("server", '{"kv_connector": "LMCacheConnectorV1",'
                                                                              '\n  "kv_role": "kv_producer"}\n')
    flag = write(tmp_path / "flag" / "b.yaml", LMCACHE_BOOSTER.replace("vLLMDisaggregated", "vLLM").replace(
        "type: prefill", "type: server").replace('gpu-memory-utilization: 0.90', 'enable-prefix-caching: ""'))
    (server,) = read_source(flag).deployments
    assert [option for option, _ in server.options][0] == "--enable-prefix-caching"
    assert [n.code for n in server.notes] == ["source.release_unknown"] and server.problems == ()


def test_the_controller_joins_a_nixl_gpu_worker_s_command_for_bash(tmp_path):
    # model_serving.go buildCommands: on a GPU worker whose kv-transfer-config names NixlConnector, the
    # words are joined by blanks after `pip install nixl &&` in `bash -c`, unless the backend's env sets
    # KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL: bash then strips the JSON's quotes and vLLM cannot parse it.
    nixl = LMCACHE_BOOSTER.replace("LMCacheConnectorV1", "NixlConnector").replace(
        "lmcache/vllm-openai:latest", "ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2")
    joined = write(tmp_path / "a" / "nixl.yaml", nixl)
    assert [e.decision["outcome"] for e in audit([str(joined)]).entries] == ["error", "error"]
    kept = write(tmp_path / "b" / "nixl.yaml", nixl.replace(
        '        value: "256"\n', '        value: "256"\n      - name: KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL\n'
                                  '        value: "true"\n'))
    assert [(e.decision["outcome"], e.decision["vllm"]["release"]) for e in audit([str(kept)]).entries] == \
        [("disabled", "0.10.0")] * 2


def test_a_booster_of_another_backend_is_no_launch(tmp_path):
    other = write(tmp_path / "sglang.yaml", LMCACHE_BOOSTER.replace("type: vLLMDisaggregated", "type: SGLang"))
    assert read_source(other).deployments == ()
