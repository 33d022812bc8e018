"""Amazon SageMaker HyperPod's InferenceEndpointConfig: its worker is a launch, read as the
container the HyperPod inference operator runs (audit/sources/hyperpod.py)."""

from __future__ import annotations

import json

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from sourcefiles import NIXL, write

# aws/sagemaker-hyperpod-cli (011ca927), helm_chart/HyperPodHelmChart/charts/inference-operator/config/
# samples/v1_llama31_8b_kv_cache_l1_l2.yaml, shortened, with vLLM's release image: the audit found
# nothing in it, not even a note (survey 22d).
KV_CACHE = """\
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata:
    name: llama-8b-kv-cache-l1-l2
    namespace: ns-team-a
spec:
    modelName: Llama-3.1-8B-Instruct
    instanceType: ml.g5.8xlarge
{cache}    worker:
        resources:
            limits:
                nvidia.com/gpu: "1"
        image: vllm/vllm-openai:v0.11.0
        args:
        - "/opt/ml/model"
        - "--max-model-len"
        - "4096"
        environmentVariables:
        - name: VLLM_USE_V1
          value: "1"
"""
L1_L2 = """\
    kvCacheSpec:
        enableL1Cache: true
        enableL2Cache: true
        l2CacheSpec:
            l2CacheBackend: redis
"""
UNKNOWN = ("InferenceEndpointConfig llama-8b-kv-cache-l1-l2: its `kvCacheSpec` has the HyperPod inference operator "
           "configure the engine's KV cache offloading (LMCache, by AWS's documentation of HyperPod's managed tiered "
           "KV cache) with a KV connector that is not in the audited files")


def test_the_worker_is_a_launch_of_its_image_with_its_arguments_and_environment(tmp_path):
    found = read_source(write(tmp_path / "endpoint.yaml", KV_CACHE.format(cache="")))
    (launch,) = found.deployments
    assert (launch.format, launch.line, launch.container, launch.role, launch.problems) == ("hyperpod", 13, "worker",
                                                                                            None, ())
    assert launch.id.endswith("#InferenceEndpointConfig/ns-team-a/llama-8b-kv-cache-l1-l2/worker")
    assert (launch.release.version, launch.document["model"], launch.document["env"]) == (
        "0.11.0", {"name": "/opt/ml/model"}, {"VLLM_USE_V1": "1"})
    assert "kv_transfer_config" not in launch.document


def test_a_kv_cache_spec_leaves_the_connector_the_operator_sets_unknown(tmp_path):
    # The operator is not open source; AWS documents HyperPod's tiered KV cache as LMCache's, and
    # kvCacheSpec.enableL1Cache is true by default (the CRD): present at all, the operator sets a connector.
    for cache in (L1_L2, "    kvCacheSpec: {}\n", "    kvCacheSpec:\n        cacheConfigFile: /etc/kv.yaml\n"
                                                  "        enableL1Cache: false\n"):
        (launch,) = read_source(write(tmp_path / "endpoint.yaml", KV_CACHE.format(cache=cache))).deployments
        assert [(p.code, p.path, p.line, p.message) for p in launch.problems] == [
            ("source.unresolved", "/kv_transfer_config", launch.line, UNKNOWN)], cache
    off = "    kvCacheSpec:\n        enableL1Cache: false\n        enableL2Cache: false\n"
    (launch,) = read_source(write(tmp_path / "endpoint.yaml", KV_CACHE.format(cache=off))).deployments
    assert launch.problems == ()
    report = audit([str(write(tmp_path / "a" / "endpoint.yaml", KV_CACHE.format(cache=L1_L2)))])
    (entry,) = report.entries
    assert (entry.decision["outcome"], entry.decision["errors"][0]["code"]) == ("error", "source.unresolved")


def test_a_pd_spec_runs_prefill_and_decode_each_with_its_roles_arguments_after_the_workers(tmp_path):
    lmcache = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    pd = ("    pdSpec:\n        prefillSpec:\n            args: ['--max-num-seqs', '4']\n"
          f"        decodingSpec:\n            args: ['--kv-transfer-config', '{lmcache}']\n")
    text = KV_CACHE.format(cache=pd).replace('        - "4096"\n', f'        - "4096"\n        - --kv-transfer-config\n'
                                                                     f"        - '{NIXL}'\n")
    found = read_source(write(tmp_path / "pd.yaml", text))
    prefill, decode = found.deployments
    assert [(d.role, d.id.rsplit("/", 2)[-2:]) for d in found.deployments] == [
        ("prefill", ["prefill", "worker"]), ("decode", ["decode", "worker"])]
    # A role's arguments come after the worker's, and override them (argparse's last word wins).
    assert [json.loads(d.document["kv_transfer_config"])["kv_connector"] for d in found.deployments] == [
        "NixlConnector", "LMCacheConnectorV1"]
    # The operator connects the two roles itself: the connector is not known, whatever the arguments say.
    assert {p.message for d in found.deployments for p in d.problems} == {
        "InferenceEndpointConfig llama-8b-kv-cache-l1-l2: its `pdSpec` has the HyperPod inference operator run "
        "prefill and decode apart, connected by a KV connector that is not in the audited files"}


def test_another_api_group_or_a_config_without_a_worker_is_not_read_so(tmp_path):
    other = KV_CACHE.format(cache="").replace("inference.sagemaker.aws.amazon.com/v1", "example.com/v1")
    assert read_source(write(tmp_path / "other.yaml", other)).deployments == ()
    workerless = "apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: InferenceEndpointConfig\n" \
                 "metadata: {name: x}\nspec: {modelName: m}\n"
    assert read_source(write(tmp_path / "none.yaml", workerless)).deployments == ()
