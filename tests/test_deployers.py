"""The deployer mappings (engine/core/deployers.yaml): the
`--kv-transfer-config` each chart, controller or launcher setting becomes,
as data the readers apply. The fleet corpus tests (test_k8s_sources.py) read
real files; these cover the template forms and the branches the corpus does
not hold, on small files written the way each deployer's users write them."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from hma_policy.core.deployers import config, deployer
from hma_policy.core.dynamo_args import dynamo_vllm_argv
from hma_policy.audit.sources.kserve import kv_transfer_config
from hma_policy.core.markers import has_unresolved


def ktc(deployment) -> dict:
    assert deployment.document is not None, deployment.problems
    value = deployment.document["kv_transfer_config"]
    return json.loads(value) if isinstance(value, str) else value


def launches(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_source(path).deployments


# -- the template forms ------------------------------------------------------------------------

def test_a_setting_default_and_optional_key():
    template = {"a": {"$setting": "x"}, "b": {"$setting": "y", "default": "d"},
                "c": {"$setting": "z", "optional": True}, "d": [{"e": {"$setting": "x"}}], "f": 1}
    assert config(template, {"x": 5}) == {"a": 5, "b": "d", "d": [{"e": 5}], "f": 1}
    # `default` replaces an empty value, as Helm's `default` does; `optional` leaves out only an unset one
    assert config(template, {"y": "", "z": ""}) == {"a": None, "b": "d", "c": "", "d": [{"e": None}], "f": 1}
    assert config(template, {"y": "given", "z": {}}) == {"a": None, "b": "given", "c": {}, "d": [{"e": None}], "f": 1}


def test_config_returns_a_fresh_copy():
    template = deployer("production-stack-ray")["v1"]
    made = config(template)
    made["kv_role"] = "changed"
    assert config(template)["kv_role"] == "kv_both"


def test_the_mapping_ships_inside_the_package():
    text = resources.files("hma_policy.core").joinpath("deployers.yaml").read_text("utf-8")
    assert "config_merge.go L723-765" in text
    assert set(deployer("dynamo-vllm")["connectors"]) == {"nixl", "lmcache", "kvbm"}


# -- Dynamo's --connector ----------------------------------------------------------------------

def test_dynamo_connectors_one_by_one_and_several():
    def kv(*args: str) -> dict:
        argv = dynamo_vllm_argv(list(args)).argv
        return json.loads(argv[argv.index("--kv-transfer-config") + 1])

    assert kv("--model", "m") == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert kv("--connector", "lmcache") == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert kv("--connector=kvbm") == {"kv_connector": "DynamoConnector", "kv_role": "kv_both",
                                      "kv_connector_module_path": "kvbm.vllm_integration.connector"}
    assert kv("--connector", "kvbm", "lmcache") == {
        "kv_connector": "PdConnector", "kv_role": "kv_both", "kv_connector_module_path": "kvbm.vllm_integration.connector",
        "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "DynamoConnector", "kv_role": "kv_both",
             "kv_connector_module_path": "kvbm.vllm_integration.connector"},
            {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}]}}
    assert has_unresolved(kv("--connector", "mooncake")["kv_connector"])
    assert dynamo_vllm_argv(["--connector", "null"]) == (["vllm", "serve"], (), None)
    given = '{"kv_connector":"X","kv_role":"kv_both"}'
    assert dynamo_vllm_argv(["--kv-transfer-config", given]) == (["vllm", "serve", "--kv-transfer-config", given], (),
                                                                 None)
    # Only the connector of the default --connector is noted as the launcher's own.
    assert dynamo_vllm_argv(["--model", "m"]).notes == (
        "Dynamo's vLLM launcher adds NixlConnector (its default `--connector nixl`) as vLLM's --kv-transfer-config, as "
        "the command names no connector; `--connector none` leaves it out",)
    assert dynamo_vllm_argv(["--connector", "nixl"]).notes == ()


def test_a_dynamo_graph_worker_run_from_a_shell_and_a_plain_container_get_dynamos_config(tmp_path):
    # highopes/pd-disaggregation-demo pd-disaggregation/dynamo/qwen3-14b-pd.yaml runs
    # `/bin/sh -c "ulimit -l unlimited && exec python3 -m dynamo.vllm ..."`: no launch was found.
    graph, pod = launches(tmp_path, "graph.yaml", """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: g, namespace: ns}
spec:
  services:
    VllmDecodeWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0
          command: [/bin/sh, -c]
          args:
            - >-
              ulimit -l unlimited && exec python3 -m dynamo.vllm --model m --connector lmcache
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  containers:
    - name: worker
      image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0
      command: [python3, -m, dynamo.vllm, --model, m]
""")
    assert (graph.format, graph.role, ktc(graph)) == ("dynamo", "decode", {"kv_connector": "LMCacheConnectorV1",
                                                                             "kv_role": "kv_both"})
    assert (pod.format, ktc(pod)) == ("kubernetes", {"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def test_a_prefill_workers_flag_inside_its_shell_script_gives_its_role(tmp_path):
    # aws-samples/awsome-inference (7a520c6) 2.projects/dynamo-inference/ngc-builds/configs/vllm-disagg.yaml:
    # VllmPrefillWorker runs `/bin/bash -c "... python3 -m dynamo.vllm ... --is-prefill-worker"`, and
    # was reported as a decode worker; the flag was looked for as a word of the command only.
    (prefill,) = launches(tmp_path, "graph.yaml", """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: g, namespace: ns}
spec:
  services:
    VllmPrefillWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1
          command: [/bin/bash, -c]
          args:
            - python3 -m dynamo.vllm --model m --is-prefill-worker --gpu-memory-utilization 0.9
""")
    assert prefill.role == "prefill"
    # Dynamo 0.6.1.post1's image installs vLLM 0.11.0 (deployers.yaml), where a kv_transfer_config
    # (Dynamo's default NixlConnector) turns HMA off: it was decided as 0.33.0, `enabled`.
    (entry,) = audit([str(tmp_path / "graph.yaml")]).entries
    assert (entry.decision["vllm"], entry.decision["outcome"]) == (
        {"release": "0.11.0", "source": "image tag nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1 "
                                        "(Dynamo 0.6.1.post1, which installs vLLM 0.11.0)"}, "disabled")
    # A longer option that only starts like the flag is no flag.
    (other,) = launches(tmp_path, "other.yaml", (tmp_path / "graph.yaml").read_text().replace(
        "--is-prefill-worker", "--is-prefill-worker-x"))
    assert other.role == "decode"


def test_a_v1beta1_dynamo_graph_is_read_from_its_components(tmp_path):
    # v1beta1 (the storage version: ai-dynamo/dynamo deploy/operator/api/v1beta1)
    # lists `spec.components`, each with a `podTemplate` whose container `main`
    # runs the engine; `spec.env` goes before a component's own. Its graphs
    # (highopes/pd-disaggregation-demo phase2) were read as having no services.
    decode, prefill = launches(tmp_path, "graph.yaml", """apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: g, namespace: ns}
spec:
  env: [{name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: "1"}]
  components:
    - name: Frontend
      type: frontend
      podTemplate: {spec: {containers: [{name: main, image: i, command: [python3, -m, dynamo.frontend]}]}}
    - name: VllmDecodeWorker
      type: worker
      podTemplate:
        spec:
          containers:
            - {name: sidecar, image: s, command: [python3, -m, dynamo.vllm, --connector, lmcache]}
            - name: main
              image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1
              command: [python3, -m, dynamo.vllm]
              args: [--model, m, --disaggregation-mode, decode]
    - name: VllmPrefillWorker
      type: worker
      podTemplate:
        spec:
          containers:
            - name: main
              image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1
              command: [/bin/sh, -c]
              args: ["exec python3 -m dynamo.vllm --model m --disaggregation-mode prefill --kv-transfer-config '{\\"kv_connector\\": \\"LMCacheConnectorV1\\", \\"kv_role\\": \\"kv_both\\"}'"]
""")
    # (`--disaggregation-mode` is Dynamo 1.0.0's and later's, whose launcher adds no connector.)
    assert [(d.format, d.role, d.line, ktc(d)["kv_connector"] if "kv_transfer_config" in d.document else None)
            for d in (decode, prefill)] == [("dynamo", "decode", 10, None), ("dynamo", "prefill", 20, "LMCacheConnectorV1")]
    assert decode.document["env"] == prefill.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    # Dynamo 1.2.1's image runs vLLM 0.20.1: its wheel's `vllm` extra pins it, and the graphs' own engine logs
    # say so (survey 32a); they were decided as the default release, with a source.release_unknown note.
    assert (prefill.release.version, prefill.release.origin) == (
        "0.20.1", "image tag nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1 (Dynamo 1.2.1, which installs vLLM 0.20.1)")


def test_disaggregation_mode_says_dynamo_1_0_or_later_where_the_image_names_no_release(tmp_path):
    # ai-dynamo/aiconfigurator (095f58a5) tests/fixtures/config_adapter/dynamo_nightly/dsv4/deployment.yaml:
    # a graph with no image whose workers run `python3 -m dynamo.vllm ... --disaggregation-mode prefill`.
    # The launcher's default `--connector nixl` (0.5-0.9) was applied; only Dynamo 1.0.0 and later take
    # `--disaggregation-mode` (components/src/dynamo/vllm/args.py: v0.9.1 has `--is-prefill-worker`), and
    # they add no connector and refuse a prefill worker without a --kv-transfer-config.
    found = launches(tmp_path, "deployment.yaml", """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: dsv4}
spec:
  services:
    VllmPrefillWorker:
      componentType: worker
      subComponentType: prefill
      extraPodSpec:
        mainContainer:
          command: [/bin/sh, -c]
          args: ["exec python3 -m dynamo.vllm --model m --disaggregation-mode prefill"]
    VllmDecodeWorker:
      componentType: worker
      subComponentType: decode
      extraPodSpec:
        mainContainer:
          command: [/bin/sh, -c]
          args: ["exec python3 -m dynamo.vllm --model m --disaggregation-mode decode"]
""")
    prefill, decode = sorted(found, key=lambda d: d.role != "prefill")
    assert [(p.code, p.message) for p in prefill.problems] == [("source.deployer_refuses", (
        "Dynamo's vLLM launcher (1.0.0 or later, as `--disaggregation-mode` says) refuses a prefill worker "
        "(`--disaggregation-mode prefill`) without a --kv-transfer-config"))]
    assert (decode.problems, "kv_transfer_config" in decode.document) == ((), False)


# -- KServe kvCacheOffloading ------------------------------------------------------------------

def test_kserve_offloading_with_an_eviction_policy_and_without_tiers():
    text = kv_transfer_config({"cpu": "1Mi", "evictionPolicy": "lru"})
    assert text.startswith("--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",")  # compact, as Go writes it
    assert json.loads(text.split(" ", 1)[1].strip("'"))["kv_connector_extra_config"] == {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 2**20, "eviction_policy": "lru"}
    assert "eviction_policy" not in kv_transfer_config({"cpu": 1, "evictionPolicy": ""})
    assert kv_transfer_config(None) == ""


# -- production-stack: the chart's branches, the Ray head, the operator --------------------------

STACK = """servingEngineSpec:
  modelSpec:
  - name: m
    repository: vllm/vllm-openai
    tag: latest
    modelURL: facebook/opt-125m
{extra}"""


def test_production_stack_v0_writes_the_v0_connector(tmp_path):
    (d,) = launches(tmp_path, "values.yaml", STACK.format(extra="""    vllmConfig:
      v0: "1"
    lmcacheConfig:
      enabled: true
      kvRole: kv_consumer
"""))
    assert ktc(d) == {"kv_connector": "LMCacheConnector", "kv_role": "kv_consumer"}


def test_production_stack_enable_pd_without_a_role_or_nixl_role(tmp_path):
    (d,) = launches(tmp_path, "values.yaml", STACK.format(extra="""    lmcacheConfig:
      enabled: true
      enablePD: false
      kvRole: ""
"""))
    assert ktc(d) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both",
                      "kv_connector_extra_config": {"discard_partial_chunks": False, "lmcache_rpc_port": None}}


def test_the_ray_head_has_the_opposite_default(tmp_path):
    ray = """    raySpec:
      enabled: true
    lmcacheConfig:
      enabled: true
      kvRole: kv_producer
"""
    (v0,) = launches(tmp_path, "values.yaml", STACK.format(extra=ray))
    (v1,) = launches(tmp_path, "values.yaml", STACK.format(extra=ray + "    vllmConfig:\n      v1: \"1\"\n"))
    assert ktc(v0) == {"kv_connector": "LMCacheConnector", "kv_role": "kv_both"}
    assert ktc(v1) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_a_vllmruntime_without_v1_writes_the_v0_connector(tmp_path):
    (d,) = launches(tmp_path, "runtime.yaml", """apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata:
  name: r
spec:
  model:
    modelURL: facebook/opt-125m
  vllmConfig:
    port: 8000
  lmCacheConfig:
    enabled: true
""")
    assert ktc(d) == {"kv_connector": "LMCacheConnector", "kv_role": "kv_both"}


# -- llm-d-benchmark kvTransfer ----------------------------------------------------------------

def test_a_scenario_kv_transfer_with_its_own_connector_role_and_extra_config(tmp_path):
    (d,) = launches(tmp_path, "scenario.yaml", """scenario:
- name: s
  vllmCommon:
    kvTransfer:
      enabled: true
      connector: OffloadingConnector
      extraConfig: {}
  decode:
    enabled: true
""")
    assert ktc(d) == {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {}}


# -- what Dynamo's launcher adds, by Dynamo release (deployers.yaml dynamo-vllm.lines) ---------

def test_dynamos_own_kv_events_config_and_default_connector_follow_its_release():
    def read(*args: str, dynamo: str | None) -> tuple[dict | None, dict | None, int]:
        argv, notes, _ = dynamo_vllm_argv(list(args), dynamo)
        def value(option: str) -> dict | None:
            return json.loads(argv[argv.index(option) + 1]) if option in argv else None
        return value("--kv-transfer-config"), value("--kv-events-config"), len(notes)

    nixl = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    events = {"enable_kv_cache_events": True, "publisher": "zmq"}
    # Not known: the connector default alone, as before the lines were recorded.
    assert read("--model", "m", dynamo=None) == (nixl, None, 1)
    # 0.4.0-0.6.x: every worker gets KV events while prefix caching is on.
    assert read("--model", "m", dynamo="0.6.1.post1") == (nixl, events, 2)
    assert read("--model", "m", "--is-decode-worker", dynamo="0.6.1") == (nixl, events, 2)
    assert read("--model", "m", "--no-enable-prefix-caching", dynamo="0.5.0") == (nixl, None, 1)
    # 0.7.0-0.9.x: not a decode worker's, whose own is dropped.
    assert read("--model", "m", "--is-decode-worker", dynamo="0.8.0") == (nixl, None, 1)
    given = '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557"}'
    assert read("--model", "m", "--is-decode-worker", "--kv-events-config", given, dynamo="0.9.1") == (nixl, None, 2)
    assert read("--model", "m", "--kv-events-config", given, dynamo="0.9.1") == (nixl, json.loads(given), 1)
    # 1.0.x: no default connector; KV events still for all but decode workers.
    assert read("--model", "m", dynamo="1.0.1") == (None, events, 1)
    assert read("--model", "m", "--disaggregation-mode", "decode", dynamo="1.0.0") == (None, None, 0)
    # 1.1.0 on: neither; a decode worker's own KV events still dropped (until 1.4.0).
    assert read("--model", "m", dynamo="1.1.1") == (None, None, 0)
    assert read("--model", "m", "--disaggregation-mode=decode", "--kv-events-config", given, dynamo="1.1.0") == \
        (None, None, 1)
    assert read("--model", "m", "--disaggregation-mode=decode", "--kv-events-config", given, dynamo="1.4.0") == \
        (None, json.loads(given), 0)


def test_a_dynamo_worker_without_a_connector_is_off_where_its_kv_events_turn_hma_off(tmp_path):
    # vllm-project/semantic-router (3d48f8c) deploy/kubernetes/dynamo/dynamo-resources/
    # dynamo-graph-deployment.yaml: `--connector null` on Dynamo 0.6.1.post1 (vLLM 0.11.0), whose
    # launcher adds a kv_events_config of its own: `enabled`, where vLLM 0.11.0 turns HMA off.
    (path := tmp_path / "graph.yaml").write_text("""apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: vllm, namespace: dynamo-system}
spec:
  services:
    VLLMDecodeWorker:
      subComponentType: decode
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1
          command: [/bin/sh, -c]
          args:
            - "sleep 15 && python3 -m dynamo.vllm --model TinyLlama/TinyLlama-1.1B-Chat-v1.0 --enforce-eager --connector null"
    AggWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.1
          command: [python3, -m, dynamo.vllm, --model, m]
""", encoding="utf-8")
    old, new = audit([str(path)]).entries
    assert (old.decision["outcome"], old.decision["connectors"]) == ("disabled", [])
    assert "a kv_events_config is set, and this vLLM release does not support the hybrid KV cache manager with KV " \
        "events" in old.decision["reasons"]
    # Dynamo 1.1.1 (vLLM 0.19.0) adds neither a connector nor KV events: HMA stays on. It was
    # read as the 0.5-0.9 line's NixlConnector, which turns HMA off on 0.19.0.
    assert (new.decision["outcome"], new.decision["connectors"], new.deployment.notes) == ("enabled", [], ())


def test_dynamos_launcher_refuses_what_its_release_refuses():
    # Dynamo's args.py at each tag: 0.5.0-0.7.x raise on any --kv-transfer-config (the default
    # --connector counts), 0.8.0-0.9.x unless `--connector none`; 1.0.0 on raise on any
    # --connector and on a prefill worker without a --kv-transfer-config; 0.4.x replace it.
    lmcache = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'
    both = '"Cannot specify both --kv-transfer-config and --connector flags"'
    assert dynamo_vllm_argv(["--model", "m", "--kv-transfer-config", lmcache], "0.6.1").refused == (
        "Dynamo 0.6.1's vLLM launcher refuses a --kv-transfer-config: its --connector is always set (default nixl, "
        f"`none` too): {both}")
    assert dynamo_vllm_argv(["--connector", "none", "--kv-transfer-config", lmcache], "0.7.1").refused is not None
    assert dynamo_vllm_argv(["--kv-transfer-config", lmcache], "0.8.0").refused == (
        f"Dynamo 0.8.0's vLLM launcher refuses a --kv-transfer-config unless `--connector none`: {both}")
    allowed = dynamo_vllm_argv(["--connector", "null", "--kv-transfer-config", lmcache], "0.9.1")
    assert (allowed.refused, allowed.argv[allowed.argv.index("--kv-transfer-config") + 1]) == (None, lmcache)
    assert dynamo_vllm_argv(["--connector", "none"], "1.0.0").refused == (
        "Dynamo 1.0.0's vLLM launcher refuses `--connector`: Dynamo 1.0.0 removed it, and adds no connector; give "
        "vLLM's --kv-transfer-config instead")
    assert dynamo_vllm_argv(["--disaggregation-mode", "prefill"], "1.1.1").refused == (
        "Dynamo 1.1.1's vLLM launcher refuses a prefill worker (`--disaggregation-mode prefill`) without a "
        "--kv-transfer-config")
    assert dynamo_vllm_argv(["--disaggregation-mode", "prefill", "--kv-transfer-config", lmcache], "1.1.1").refused \
        is None
    replaced = dynamo_vllm_argv(["--kv-transfer-config", lmcache], "0.4.1")
    kv = json.loads(replaced.argv[replaced.argv.index("--kv-transfer-config") + 1])
    assert (replaced.refused, kv["kv_connector"]) == (None, "NixlConnector")
    assert "Dynamo 0.4.1's vLLM launcher replaces the command's --kv-transfer-config with its own" in replaced.notes
    # (0.4.x has no --connector: no note tells to turn its connector off with one)
    assert not any("--connector none" in note for note in replaced.notes)
    # A release not known: a --kv-transfer-config given wins, as before.
    assert dynamo_vllm_argv(["--kv-transfer-config", lmcache]).refused is None


def test_a_dynamo_graph_worker_its_launcher_refuses_is_a_start_up_error(tmp_path):
    (path := tmp_path / "graph.yaml").write_text("""apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: g}
spec:
  services:
    VllmWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: [python3, -m, dynamo.vllm, --model, m, --kv-transfer-config,
                    '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}']
""", encoding="utf-8")
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "error"
    assert [(e["code"], e["stage"]) for e in entry.decision["errors"]] == [("source.deployer_refuses", "input")]
