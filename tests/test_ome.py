"""OME runtimes (audit/sources/ome.py). The fleet corpus holds real vLLM
ClusterServingRuntimes (tests/fleet_corpus/sgl-project__ome), each with one
engine runner; these cover the decoder, leader and worker runners."""

from __future__ import annotations

import hma_policy
from hma_policy.audit.sources import read_source

NIXL_ARGS = """--kv-transfer-config, '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""
LMCACHE_ARGS = """--kv-transfer-config, '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""


def test_a_disaggregated_runtime_has_a_prefilling_engine_and_a_decoder(tmp_path):
    path = tmp_path / "rt.yaml"
    path.write_text(f"""\
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {{name: pd}}
spec:
  routerConfig:
    runner: {{name: router, image: lightseekorg/smg:1.4.1, args: [--port, "8080"]}}
  engineConfig:
    runner: {{name: ome-container, image: vllm/vllm-openai:v0.22.0, command: [vllm, serve, $(MODEL_PATH), {NIXL_ARGS}]}}
  decoderConfig:
    leader:
      runner: {{name: ome-container, image: vllm/vllm-openai:v0.22.0, command: [vllm, serve, m, {LMCACHE_ARGS}]}}
    worker:
      runner: {{name: ome-container, image: vllm/vllm-openai:v0.22.0, command: [ray, start, --block]}}
""", encoding="utf-8")
    found = read_source(path, display="rt.yaml")
    assert found.format == "ome"
    by_role = {d.role: d for d in found.deployments}
    assert sorted(by_role) == ["decode", "prefill"]  # the router and the worker start no vLLM engine
    assert (by_role["prefill"].id, by_role["prefill"].line) == ("rt.yaml#ClusterServingRuntime/pd/prefill/ome-container", 8)
    assert (by_role["decode"].id, by_role["decode"].line) == ("rt.yaml#ClusterServingRuntime/pd/decode/ome-container", 11)
    assert by_role["prefill"].release.version == "0.22.0"
    assert hma_policy.decide(by_role["prefill"].document).outcome == "enabled"
    assert hma_policy.decide(by_role["decode"].document).outcome == "disabled"


def test_only_omes_runtimes_are_read_as_such(tmp_path):
    path = tmp_path / "rt.yaml"
    path.write_text("apiVersion: serving.kserve.io/v1alpha1\nkind: ClusterServingRuntime\nmetadata: {name: x}\n"
                    "spec:\n  engineConfig:\n    runner: {name: c, image: vllm/vllm-openai:v0.22.0}\n", encoding="utf-8")
    assert read_source(path).deployments == ()
