"""The Kubernetes-family readers (audit/sources: kubernetes, kserve, dynamo,
kustomize, helm, helm_template, production_stack, llmdbench), each tested on
real files of the fleet corpus (tests/fleet_corpus, provenance in its
PROVENANCE.md); trimmed copies are made in tmp_path where a test needs a file
without its companions."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hma_policy.audit.run import audit
from hma_policy.audit.sources import find_deployments, read_source
from hma_policy.core.dynamo_args import dynamo_vllm_argv
from hma_policy.audit.sources.gotemplate import render
from hma_policy.audit.sources.release import from_image
from hma_policy.audit.sources.kserve import kv_transfer_config, strategic_merge
from hma_policy.audit.sources.release import from_image
from hma_policy.core.markers import plain
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import LMCACHE, NIXL, linear_ratio, write

CORPUS = Path(__file__).resolve().parent / "fleet_corpus"


def read(relative: str, roots: tuple[Path, ...] = (CORPUS,)):
    return read_source(CORPUS / relative, roots=roots)


def ktc(deployment) -> dict:
    assert deployment.document is not None, deployment.problems
    return json.loads(deployment.document["kv_transfer_config"]) if isinstance(
        deployment.document["kv_transfer_config"], str) else deployment.document["kv_transfer_config"]


def by_role(found) -> dict:
    return {d.role: d for d in found.deployments}


# -- plain Kubernetes objects ------------------------------------------------------------------

def test_a_container_launch_reports_its_name_line_container_and_release():
    found = read("vllm-project__production-stack/src/gateway_inference_extension/configs/vllm/gpu-deployment.yaml")
    (d,) = found.deployments
    assert (d.line, d.container, d.format) == (16, "vllm", "kubernetes")
    assert dict(d.resource)["kind"] == "Deployment"


def test_disaggregatedset_roles_name_their_launches_and_ids():
    found = read("llm-d__llm-d/guides/pd-disaggregation/modelserver/gpu/vllm/base/disaggregatedset.yaml")
    prefill, decode = found.deployments
    assert [(d.role, d.line, d.container) for d in (prefill, decode)] == [("prefill", 55, "modelserver"),
                                                                         ("decode", 192, "modelserver")]
    assert prefill.id.endswith("#DisaggregatedSet/pd-disagg-vllm/prefill/modelserver")
    assert ktc(prefill)["kv_role"] == "kv_producer"


def test_the_lmcache_webhook_injection_is_unresolved_not_enabled():
    (d,) = read("LMCache__LMCache/operator/config/samples/vllm_lmcache_deployment.yaml").deployments
    assert d.document is None and d.line == 60
    problem = d.problems[0]
    assert problem.code == "source.unresolved"
    assert "webhook appends `--kv-transfer-config`" in problem.message and "`my-cache-connection`" in problem.message


def test_pd_webhook_roles_come_from_the_pd_role_annotation():
    found = read("LMCache__LMCache/operator/config/samples/vllm_pd_disaggregation.yaml")
    assert [(d.role, d.problems[0].code) for d in found.deployments] == [("prefill", "source.unresolved"),
                                                                       ("decode", "source.unresolved")]


# -- production-stack --------------------------------------------------------------------------

def test_production_stack_values_make_the_charts_lmcache_connector_per_model_spec():
    found = read("vllm-project__production-stack/tutorials/assets/values-16-disagg-prefill.yaml")
    assert found.format == "helm-values"
    prefill, decode = found.deployments
    assert (prefill.line, prefill.role, prefill.container) == (8, "prefill", "vllm")
    assert dict(prefill.resource)["name"] == "<release>-llama-prefill-deployment-vllm"
    assert ktc(prefill) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_producer",
                            "kv_connector_extra_config": {"discard_partial_chunks": False, "lmcache_rpc_port": "sender"}}
    assert (decode.line, ktc(decode)["kv_role"]) == (37, "kv_consumer")


def test_production_stack_lmcache_config_comes_after_extra_args_and_defaults_to_kv_both():
    (d,) = read("vllm-project__production-stack/tutorials/assets/values-14-vllm-v1.yaml").deployments
    assert ktc(d) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_production_stack_ray_path_is_a_raycluster_head():
    (d,) = read("vllm-project__production-stack/tutorials/assets/"
                "values-15-a-minimal-pipeline-parallel-example-raycluster.yaml").deployments
    assert (dict(d.resource)["kind"], d.container, d.role) == ("RayCluster", "vllm-ray-head", "leader")
    assert "kv_transfer_config" not in d.document


def test_a_disabled_model_spec_renders_nothing_and_is_noted():
    found = read("vllm-project__production-stack/helm/values.yaml")
    assert found.deployments == ()
    assert [(n.code, n.line) for n in found.notes] == [("source.unrecognized", 29)]


def test_vllmruntime_uses_the_v1_connector_when_v1_is_set():
    (d,) = read("vllm-project__production-stack/operator/config/samples/"
                "production-stack_v1alpha1_vllmruntime.yaml").deployments
    assert (d.format, d.line) == ("production-stack-crd", 9)
    assert ktc(d) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


# -- KServe ------------------------------------------------------------------------------------

def test_kserve_merges_the_preset_and_reads_vllm_additional_args_through_eval():
    found = read("kserve__kserve/docs/samples/llmisvc/single-node-gpu/llm-inference-service-pd-qwen2-7b-gpu.yaml")
    roles = by_role(found)
    assert (roles["decode"].line, roles["prefill"].line) == (34, 91)
    assert ktc(roles["decode"]) == {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}
    assert ktc(roles["prefill"])["kv_role"] == "kv_producer"
    assert [Path(p).name for p in roles["prefill"].chain[1:]] == ["config-llm-prefill-template.yaml",
                                                                   "config-llm-decode-template.yaml"]


def test_kserve_base_ref_replaces_the_command():
    (d,) = read("kserve__kserve/docs/samples/llmisvc/e2e-gpt-oss/inference_default.yaml").deployments
    assert d.document is not None and "kv_transfer_config" not in d.document
    assert [Path(p).name for p in d.chain[1:]] == ["config-llm-template.yaml", "llmisvc_config_default.yaml"]


def test_kserve_data_parallel_workers_are_launches():
    found = read("kserve__kserve/docs/samples/llmisvc/dp-ep/deepseek-r1-gpu-rdma-roce/"
                 "llm-inference-service-dp-ep-deepseek-r1-pd-gpu-p-deepep-ht-d-pplx.yaml")
    assert sorted(by_role(found)) == ["decode-leader", "decode-worker", "prefill-leader", "prefill-worker"]


def test_kserve_without_its_presets_is_unresolved(tmp_path):
    sample = "kserve__kserve/docs/samples/llmisvc/single-node-gpu/llm-inference-service-qwen2-7b-gpu.yaml"
    copy = tmp_path / "svc.yaml"
    shutil.copy(CORPUS / sample, copy)
    (d,) = read_source(copy).deployments
    assert d.problems[0].code == "source.unresolved"
    assert "`kserve-config-llm-template`" in d.problems[0].message


def _llm_service(version: str, name: str, model: str, main: str) -> str:
    """An LLMInferenceService of one `main` container, whose fields past its name are ``main``."""
    return (f"apiVersion: serving.kserve.io/{version}\nkind: LLMInferenceService\nmetadata:\n  name: {name}\nspec:\n"
            f"  model:\n    uri: hf://{model}\n    name: {model}\n  template:\n    containers:\n      - name: main\n{main}")


def test_a_kserve_service_whose_own_command_and_args_run_vllm_is_decided_without_its_presets(tmp_path):
    # opendatahub-io/models-as-a-service (c0639b1b) docs/samples/models/qwen3/model.yaml: the service's
    # own `command: [sh, -c]` and args run `exec vllm serve /mnt/models ...`, which replace the presets':
    # it was an `error`, the preset `kserve-config-llm-template` not being audited.
    svc = tmp_path / "model.yaml"
    svc.write_text(_llm_service("v1alpha1", "single-node-no-scheduler-nvidia-gpu", "Qwen/Qwen3-0.6B", (
        '        image: "vllm/vllm-openai:v0.20.0"\n        command: ["sh", "-c"]\n        args:\n          - |\n'
        f"            exec vllm serve /mnt/models --port 8000 --max-model-len 8192 --kv-transfer-config '{LMCACHE}'\n")),
        encoding="utf-8")
    (d,) = read_source(svc).deployments
    assert (d.problems, [(n.code, n.message) for n in d.notes][:1]) == ((), [(
        "source.unresolved_arguments", "LLMInferenceService single-node-no-scheduler-nvidia-gpu: the "
        "LLMInferenceServiceConfig `kserve-config-llm-template` it is merged with is not in the audited paths; the "
        "service's own command and args replace its, and the environment it may add is not read")])
    assert json.loads(d.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"


def test_a_kserve_service_whose_own_command_starts_no_vllm_is_no_launch_without_its_presets(tmp_path):
    # vllm-project/semantic-router (3d48f8c) deploy/kserve/inference-examples/
    # inferenceservice-llm-d-sim-model-a.yaml: the service's own command and args, which replace
    # the presets', run the llm-d simulator. Without the presets it was a launch, `source.unresolved`.
    svc = tmp_path / "inferenceservice-llm-d-sim-model-a.yaml"
    svc.write_text(_llm_service("v1alpha2", "model-a", "facebook/opt-125m", (
        '        image: ghcr.io/llm-d/llm-d-inference-sim:v0.6.1\n        command: ["/app/llm-d-inference-sim"]\n'
        '        args: [--port, "8000", --model, Model-A, --mode, random]\n')), encoding="utf-8")
    assert read_source(svc).deployments == ()
    # With only its command its own, the presets' args may still start vLLM: a launch, unresolved.
    svc.write_text(svc.read_text(encoding="utf-8").replace('        args: [--port, "8000", --model, Model-A, --mode, random]\n', ""),
                   encoding="utf-8")
    (d,) = read_source(svc).deployments
    assert [p.code for p in d.problems] == ["source.unresolved"]


def test_a_kserve_service_sent_as_text_reads_nothing_from_the_file_system(tmp_path, monkeypatch):
    # find_deployments (the admission webhook, the decision service) reads the text alone: the
    # LLMInferenceServiceConfig a service names was looked up by walking the current directory.
    from hma_policy.audit.sources import companions, find_deployments

    sample = (CORPUS / "kserve__kserve/docs/samples/llmisvc/single-node-gpu/llm-inference-service-qwen2-7b-gpu.yaml")
    shutil.copytree(CORPUS / "kserve__kserve/config/llmisvcconfig", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    companions.forget_objects()
    walked = []
    monkeypatch.setattr(companions.os, "walk", lambda *a, **k: walked.append(a) or iter(()))
    (d,) = find_deployments("svc.yaml", sample.read_text(encoding="utf-8")).deployments
    assert walked == [] and d.problems[0].code == "source.unresolved"


def test_a_second_audit_in_one_process_reads_the_configs_as_they_are_now(tmp_path, monkeypatch):
    # The index of the audited paths' objects was kept for the process: a config edited
    # between two audits (a service, an editor's integration) was read as it had been.
    from hma_policy.audit.run import audit

    shutil.copy(CORPUS / "kserve__kserve/docs/samples/llmisvc/e2e-gpt-oss/inference_default.yaml", tmp_path / "svc.yaml")
    monkeypatch.chdir(tmp_path)
    assert audit(["."]).entries[0].decision["errors"][0]["code"] == "source.unresolved"  # no config in the paths
    shutil.copytree(CORPUS / "kserve__kserve/config/llmisvcconfig", tmp_path / "configs")
    shutil.copy(CORPUS / "kserve__kserve/docs/samples/llmisvc/e2e-gpt-oss/llmisvc_config_default.yaml", tmp_path)
    (entry,) = audit(["."]).entries
    assert entry.decision["outcome"] == "enabled"
    assert [Path(p).name for p in entry.deployment.chain[1:]] == ["config-llm-template.yaml", "llmisvc_config_default.yaml"]


def test_kserve_release_hint_from_the_image_and_the_workload_field_problem():
    found = read("kserve__kserve/docs/samples/llmisvc/opt-125m-cpu/llm-inference-service-pd-facebook-opt-125m-cpu.yaml")
    assert {d.release.version for d in found.deployments} == {"0.23.0"}
    offloading = read("kserve__kserve/docs/samples/llmisvc/kv-cache-offloading/"
                      "llm-inference-service-kv-cache-offloading.yaml")
    assert [p.code for p in offloading.problems] == ["source.kserve"]


def test_a_kserve_config_is_no_launch_and_is_noted():
    found = read("kserve__kserve/config/llmisvcconfig/config-llm-template.yaml")
    assert found.deployments == () and [n.code for n in found.notes] == ["source.unrecognized"]


def test_kserve_offloading_config_and_strategic_merge():
    assert json.loads(kv_transfer_config({"cpu": "10Gi", "secondary": [{}]}).split(" ", 1)[1].strip("'")) == {
        "kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 10 * 2**30,
            "secondary_tiers": [{"type": "fs", "root_dir": "/mnt/kv-cache-0"}]}}
    base = {"containers": [{"name": "main", "command": ["a"], "args": ["x"], "env": [{"name": "A", "value": "1"}]}]}
    patch = {"containers": [{"name": "main", "args": ["y"], "env": [{"name": "B", "value": "2"}]}]}
    assert strategic_merge(base, patch) == {"containers": [{"name": "main", "command": ["a"], "args": ["y"], "env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}


def test_go_template_conditions_values_and_functions():
    data = {"Spec": {"parallelism": {"tensor": 2}, "model": {"name": "m"}}, "GlobalConfig": {}}
    text = "{{ .Spec.Model.Name }}{{- if .Spec.Parallelism.Tensor }} --tp {{ .Spec.Parallelism.Tensor }}{{- end }}" \
           "{{ if .GlobalConfig.EnableTLS }} --tls{{ else }} --plain{{ end }} {{ f `x` }}"
    assert render(text, data, {"f": lambda v: v.upper()}) == "m --tp 2 --plain X"


def test_go_template_pipelines_pass_each_value_on_as_the_last_argument():
    data = {"Values": {"tag": "", "name": "n"}, "Chart": {"appVersion": "v0.19.1"}}
    default = {"default": lambda fallback, value=None: value or fallback}
    assert render('{{ .Values.tag | default .Chart.AppVersion }}/{{ .Values.name | default "x" }}', data, default) \
        == "v0.19.1/n"
    # A command it does not know leaves the whole action unknown, as the action is written.
    assert plain(render("{{ .Values.name | quote }}", data, default)) == "{{ .Values.name | quote }}"
    assert plain(render("{{ .Values.name | }}", data, default)) == "{{ .Values.name | }}"


# -- NVIDIA Dynamo -----------------------------------------------------------------------------

def test_dynamo_vllm_default_and_listed_connectors():
    found = read("ai-dynamo__dynamo/components/backends/vllm/deploy/disagg_kvbm.yaml")
    decode, prefill = by_role(found)["decode"], by_role(found)["prefill"]
    assert (decode.line, prefill.line, decode.release.version) == (17, 42, "0.11.0")  # Dynamo 0.6.1 installs vLLM 0.11.0
    assert ktc(decode) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert ktc(prefill)["kv_connector"] == "PdConnector"
    assert [c["kv_connector"] for c in ktc(prefill)["kv_connector_extra_config"]["connectors"]] == \
        ["DynamoConnector", "NixlConnector"]
    assert dynamo_vllm_argv(["--model", "m", "--connector", "none"]).argv == ["vllm", "serve", "--model", "m"]
    # nvidia/nim-deploy's aks-dynamo disagg_planner.yaml (3c6bcbd) names no connector: the report
    # said only that --kv-transfer-config was set, which the file does not hold.
    assert [(n.code, n.message) for n in decode.notes] == [
        ("source.deployer_default", "Dynamo 0.6.1's vLLM launcher adds a kv_events_config of its own (KV events over "
                                    "ZMQ), as prefix caching is on and the command gives none; "
                                    "`--no-enable-prefix-caching` leaves it out"),
        ("source.deployer_default", "Dynamo 0.6.1's vLLM launcher adds NixlConnector (its default `--connector nixl`) "
                                    "as vLLM's --kv-transfer-config, as the command names no connector; `--connector "
                                    "none` leaves it out")]
    assert [n.message.split(" (")[0] for n in prefill.notes] == [
        "Dynamo 0.6.1's vLLM launcher adds a kv_events_config of its own"]


def test_dynamo_serve_reads_the_graph_config_env():
    found = read("vllm-project__aibrix/test/regression/v0.4.0/dynamo/disagg.yaml")
    assert [(d.role, d.line) for d in found.deployments] == [("decode", 81), ("prefill", 114)]
    assert ktc(found.deployments[0]) == {"kv_connector": "DynamoNixlConnector"}


# -- kustomize ---------------------------------------------------------------------------------

def test_a_patch_without_args_is_unresolved_when_its_base_is_not_audited():
    (d,) = read("llm-d__llm-d/guides/tiered-prefix-cache/modelserver/gpu/vllm/base/patch-vllm.yaml").deployments
    assert (d.format, d.line, d.role) == ("kustomize", 10, "decode")
    assert d.problems[0].code == "source.unresolved" and "the patch gives no `args`" in d.problems[0].message


def test_a_patch_with_command_and_args_decides_alone():
    (d,) = read("llm-d__llm-d/guides/pd-disaggregation/modelserver/gpu/vllm/base/patch-decode.yaml").deployments
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_json6902_overlays_apply_to_their_base():
    offloading = read("llm-d__llm-d/guides/tiered-prefix-cache/cpu/manifests/vllm/offloading-connector/kustomization.yaml")
    (d,) = offloading.deployments
    assert (offloading.format, d.line) == ("kustomize", 12)
    assert ktc(d)["kv_connector"] == "OffloadingConnector"
    assert [Path(p).name for p in d.chain[1:]] == ["deployment.yaml"]
    lmcache = read("llm-d__llm-d/guides/tiered-prefix-cache/cpu/manifests/vllm/lmcache-connector/kustomization.yaml")
    (d,) = lmcache.deployments
    assert (d.line, ktc(d)["kv_connector"]) == (13, "LMCacheConnectorV1")


# -- Helm templates, llm-d-modelservice and vLLM chart values ----------------------------------

# A chart template's Deployment, up to its containers.
DEPLOYMENT = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n"
              "    spec:\n      containers:\n")
# Why a chart template of objects that hold no pod is skipped.
PODLESS = "a Helm chart template of objects that hold no pod (an autoscaler, a Service, ...)"
# Why one whose containers are all written in it and run no vLLM is.
RUNS_NO_VLLM = "a Helm chart template whose containers, all written in it, run no vLLM"


def template(tmp_path, name: str, text: str):
    """A template of a chart at ``tmp_path / "chart"``, in its templates/ folder (``name`` may hold a folder)."""
    return write(tmp_path / "chart" / "templates" / name, text)


def test_an_aibrix_chart_template_is_read_where_the_command_is_literal():
    found = read("vllm-project__aibrix/test/regression/v0.4.0/templates/vllm-disaggregated.yaml")
    assert found.format == "helm-template"
    assert [(d.role, d.line) for d in found.deployments] == [("prefill", 49), ("decode", 129)]
    assert found.deployments[0].notes[-1].code == "source.template"
    # The `sh -c` script takes the chart's default values (values.yaml), one word each (regression:
    # `--model {{ .Values.model.path }}` became three words, the model `\ufffd{{`); a value the
    # defaults do not give stays unknown (the image, from a helper template).
    prefill = found.deployments[0]
    assert prefill.document["model"] == {"name": "/models/Qwen3-8B"} and prefill.problems == ()
    assert [n.code for n in prefill.notes] == ["source.release_unknown", "source.template"]
    assert [Path(p).name for p in prefill.chain] == ["vllm-disaggregated.yaml", "values.yaml"]


def test_a_template_that_builds_its_args_from_values_is_one_problem_and_a_note():
    found = read("vllm-project__production-stack/helm/templates/deployment-vllm-multi.yaml")
    assert found.deployments == ()
    assert len(found.problems) == 1 and "helm template" in found.problems[0].hint
    assert [n.code for n in found.notes] == ["source.unrecognized"]


def test_a_chart_template_that_holds_no_pod_is_skipped_not_a_problem(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365), app-design-center/ai-inference:
    # the chart's HPA scales on the metric `vllm:gpu_cache_usage_perc`; it was reported
    # `input.parse` (its `{{ include ... }}` keys), a false problem beside the chart's launch.
    hpa = template(tmp_path, "hpa.yaml", (
        "{{- if .Values.hpa.enabled }}\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n"
        "  name: {{ include \"gemma.fullname\" . }}\n  labels:\n    {{- include \"gemma.labels\" . | nindent 4 }}\n"
        "spec:\n  metrics:\n  - pods:\n      metric:\n        name: prometheus.googleapis.com|vllm:gpu_cache_usage_perc|gauge\n"
        "{{- end }}\n"))
    found = read_source(hpa)
    assert (found.deployments, found.problems, found.skipped) == (
        (), (), PODLESS)
    # A pod whose command the chart's values build is still the one problem, which says why.
    built = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "      - name: vllm\n        image: vllm/vllm-openai\n        args:\n"
        "        {{- range .Values.args }}\n        - {{ . }}\n        {{- end }}\n        env: {{ .Values.env }}\n"))
    found = read_source(built)
    assert found.deployments == () and [(p.code, p.line, p.message) for p in found.problems] == [
        ("input.parse", 12, f"`{built}` is an unrendered Helm template: a template action builds the command or args "
                            "of container `vllm` (line 12: `{{- range .Values.args }}`), which the audit does not render")]
    # A test pod whose command an `if` builds, busybox's `wget` on both branches, runs no vLLM: the file
    # names vLLM only in the chart's helper (redhat-ai-services/helm-charts 0feb783, vllm-kserve's
    # templates/tests/test-connection.yaml; survey 22i). It was that problem; an image from values may be vLLM's.
    probe = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: '{{ include \"vllm-kserve.fullname\" . }}-test'\nspec:\n"
             "  containers:\n    - name: wget\n      image: IMAGE\n      command:\n        - /bin/sh\n        - -c\n"
             "        {{- if .Values.auth }}\n        - 'wget --header=x http://svc/version'\n        {{- else }}\n"
             "        - 'wget http://svc/version'\n        {{- end }}\n")
    found = read_source(template(tmp_path, "test-connection.yaml", probe.replace("IMAGE", "busybox")))
    assert (found.problems, found.skipped) == ((), RUNS_NO_VLLM)
    valued = template(tmp_path, "test-connection.yaml", probe.replace("IMAGE", "{{ .Values.image }}"))
    assert [p.message for p in read_source(valued).problems] == [
        f"`{valued}` is an unrendered Helm template: a template action builds the command or args of container "
        "`wget` (line 12: `{{- if .Values.auth }}`), which the audit does not render"]
    # A kind that keeps its pods in fields of its own (Dynamo's extraPodSpec.mainContainer) is not
    # taken for one that holds none (vllm-project/semantic-router's dynamo-graph-deployment.yaml).
    graph = template(tmp_path, "graph.yaml", (
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  services:\n    VllmWorker:\n      extraPodSpec:\n        mainContainer:\n"
        "          image: {{ .Values.image }}\n          args: [{{ .Values.args }}]\n          env: {{ .Values.env }}\n"))
    found = read_source(graph)
    assert (found.skipped, [p.code for p in found.problems]) == (None, ["input.parse"])



def test_a_key_given_twice_in_a_container_that_runs_no_vllm_leaves_the_problem_to_the_others(tmp_path):
    # castai/helm-charts (daa4628) charts/castai-hosted-model/child-charts/vllm/templates/deployment.yaml: an init
    # container `model-downloader` gives `args` on both branches of an `if`. The file's one problem was that
    # `args` is given twice, at the init container's line; the vLLM container, whose args a `range` builds,
    # was never named (survey 41b).
    chart = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "        - name: vllm\n          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n"
        "          args:\n            - --trust-remote-code\n            {{- range .Values.extraArgs }}\n"
        "            - {{ . | quote }}\n            {{- end }}\n      initContainers:\n        - name: model-downloader\n"
        "          image: \"ghcr.io/example/model-downloader:1.0\"\n          {{- if .Values.cache }}\n"
        "          args:\n            - exec model-downloader download\n          {{- else }}\n          args:\n"
        "            - download\n          {{- end }}\n"))
    assert [(p.line, p.message) for p in read_source(chart).problems] == [(13, (
        f"`{chart}` is an unrendered Helm template: a template action builds the command or args of container "
        "`vllm` (line 13: `{{- range .Values.extraArgs }}`), which the audit does not render"))]
    # A key given twice in a container that may run vLLM stays the problem.
    vllm = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "        - name: vllm\n          image: vllm/vllm-openai:v0.11.0\n          {{- if .Values.kv }}\n"
        "          args: [--model, m, --kv-transfer-config, x]\n          {{- else }}\n          args: [--model, m]\n"
        "          {{- end }}\n"))
    assert [p.message for p in read_source(vllm).problems] == [
        f"`{vllm}` is an unrendered Helm template: `args` is given twice (again at line 14), as on both branches of "
        "a template condition, which the audit does not evaluate"]


def test_a_chart_template_with_anchors_is_read_as_helms_yaml_reads_it(tmp_path):
    # coreweave/reference-architecture (8d7a23a) inference/basic/templates/ingress.yaml: `- host: &host
    # {{ include "vllm-basic.name" . }}.example.com`, then `- *host`. An Ingress holds no pod, but the file
    # was an `input.parse` problem, "mapping keys must be strings", where the same file without its
    # anchor was skipped (survey 41b).
    ingress = template(tmp_path, "ingress.yaml", (
        "{{- if .Values.ingress.enabled }}\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n"
        "  name: {{ include \"vllm-basic.fullname\" . }}\nspec:\n  rules:\n"
        "    - host: &host {{ include \"vllm-basic.name\" . }}.example.com\n  tls:\n    - hosts:\n        - *host\n"
        "{{- end }}\n"))
    found = read_source(ingress)
    assert (found.deployments, found.problems, found.skipped) == ((), (), PODLESS)
    # A pod's template with an anchor is read, each launch at its own line.
    pod = template(tmp_path, "deployment.yaml", (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  labels: &labels\n"
        "    app: vllm\nspec:\n  selector:\n    matchLabels: *labels\n  template:\n    metadata:\n"
        "      labels: *labels\n    spec:\n      containers:\n      - name: vllm\n"
        "        image: vllm/vllm-openai:v0.11.0\n"
        f"        args: [--model, m, --kv-transfer-config, '{NIXL}']\n"))
    (d,) = read_source(pod).deployments
    assert (d.line, d.container, ktc(d)["kv_connector"], d.release.version) == (15, "vllm", "NixlConnector", "0.11.0")


@pytest.mark.parametrize(("args", "line", "action"), [
    # rh-ai-quickstart/maas-code-assistant (0623fb49) charts/.../llminferenceservice.yaml, survey 34d: options
    # the chart's values give, printed after the written ones, were left out, and the launch decided without them
    ("        - --model=m\n        {{- with .Values.extraArgs }}\n        {{- toYaml . | nindent 8 }}\n"
     "        {{- end }}\n", 15, "{{- toYaml . | nindent 8 }}"),
    # ... and printed before them (the key three lines of actions above its first item)
    ("        {{- with .Values.extraArgs }}\n        {{- toYaml . | nindent 8 }}\n        {{- end }}\n"
     "        - --model=m\n", 13, "{{- with .Values.extraArgs }}"),
])
def test_a_chart_template_that_prints_args_from_values_around_the_written_ones_builds_them(tmp_path, args, line, action):
    built = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "      - name: vllm\n        image: vllm/vllm-openai:v0.23.0\n        command: [vllm, serve]\n"
        "        args:\n" + args + "        env: []\n"))
    found = read_source(built)
    assert found.deployments == () and [(p.code, p.line, p.message) for p in found.problems] == [
        ("input.parse", line, f"`{built}` is an unrendered Helm template: a template action builds the command or "
                              f"args of container `vllm` (line {line}: `{action}`), which the audit does not render")]



def test_a_chart_template_that_builds_the_args_of_an_image_its_defaults_give_as_another_is_skipped(tmp_path):
    # vllm-disaggregation (production-stack's chart) templates/job.yaml: a model download Job whose args the chart's
    # values print, in `{{ .Values.extraInit.modelDownload.image.repository }}`, which values.yaml gives as
    # amazon/aws-cli: no vLLM, whichever args the install gives (survey snapshot of c4aa648).
    write(tmp_path / "chart" / "Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
    write(tmp_path / "chart" / "values.yaml", "download:\n  image: {repository: amazon/aws-cli, tag: 2.6.4}\n"
                                              "  args: [s3, cp, --recursive, s3://b/m, /data]\n")
    job = template(tmp_path, "job.yaml", (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: init-vllm\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: job-download-model\n"
        "        image: {{ .Values.download.image.repository }}:{{ .Values.download.image.tag }}\n"
        "        args:\n        {{- toYaml .Values.download.args | nindent 8 }}\n"))
    report = audit([str(tmp_path / "chart")])
    assert (report.entries, [p for p in report.problems if p.file == str(job)]) == ((), [])
    # Its image not given by the defaults, the Job may run vLLM: the template is its one problem.
    write(tmp_path / "chart" / "values.yaml", "download:\n  args: [s3, cp]\n")
    assert [p.code for p in audit([str(tmp_path / "chart")]).problems] == ["input.parse"]

def test_a_chart_templates_actions_that_print_nothing_or_close_around_the_args_leave_them_written(tmp_path):
    # rh-ai-quickstart/ai-architecture-charts (ab5e233b) llm-service/helm/templates/serving-runtime.yaml,
    # survey 34b: `{{- $finalEnv := list }}` after the last argument was "a template action builds the command
    # or args", and the command of a container written `- command:` ran to the end of the container.
    written = template(tmp_path, "runtime.yaml", (
        "apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata:\n  name: rt\nspec:\n"
        "  containers:\n  - command:\n    - python3\n    - -m\n    - vllm.entrypoints.openai.api_server\n"
        "    args:\n    - --port\n    - \"8080\"\n    {{- $finalEnv := list }}\n    {{- if .Values.env }}\n"
        "      {{- $finalEnv = concat $finalEnv .Values.env }}\n    {{- end }}\n    {{- if $finalEnv }}\n"
        "    env:\n      {{- toYaml $finalEnv | nindent 4 }}\n    {{- end }}\n"
        "    image: vllm/vllm-openai:v0.11.1\n    name: kserve-container\n"))
    found = read_source(written)
    assert found.problems == ()
    (d,) = found.deployments
    assert (d.line, d.release.version, [n.code for n in d.notes][-1]) == (23, "0.11.1", "source.template")


def test_a_chart_template_of_an_ome_runtime_whose_runners_run_no_vllm_is_skipped(tmp_path):
    # sgl-project/ome (17b77eda) charts/ome-serving/templates/clusterservingruntime.yaml, survey 35a: a
    # ClusterServingRuntime whose runner runs SGLang, its readiness probe's `path` given on both branches of an
    # `if`, and vLLM named only in a comment ("vLLM support coming soon"): an input.parse problem that asked for
    # `helm template`. Its runner is a container written in the template, and runs no vLLM on either branch.
    found = read_source(template(tmp_path, "csr.yaml", (
        "{{/* Currently supports sglang runtime. vLLM support coming soon. */}}\napiVersion: ome.io/v1beta1\n"
        "kind: ClusterServingRuntime\nmetadata:\n  name: srt\nspec:\n  engineConfig:\n    runner:\n"
        "      name: ome-container\n      image: lmsysorg/sglang:v0.5.5\n"
        "      command: [python3, -m, sglang.launch_server, --model-path, $(MODEL_PATH)]\n"
        "      readinessProbe:\n        httpGet:\n{{- if .Values.pd }}\n          path: /health\n{{- else }}\n"
        "          path: /health_generate\n{{- end }}\n          port: 8080\n")))
    assert (found.deployments, found.problems, found.skipped) == ((), (), RUNS_NO_VLLM)

def test_a_chart_templates_if_and_else_may_both_give_a_key_of_an_object_that_holds_no_pod(tmp_path):
    # opea-project/GenAIInfra (9200b37) helm-charts/agent/templates/configmap.yaml: `no_proxy` in both
    # branches of an `if` (and an HPA's `averageValue`) made the template unreadable and the file
    # an input.parse problem. Its kind is known whichever branch runs; a pod's fields are not.
    config = template(tmp_path, "configmap.yaml", (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include \"agent.fullname\" . }}-config\ndata:\n"
        "  llm_endpoint_url: \"http://{{ .Release.Name }}-vllm\"\n  {{- if .Values.global.no_proxy }}\n"
        "  no_proxy: \"{{ .Values.global.no_proxy }}\"\n  {{- else }}\n  no_proxy: {{ .Values.no_proxy | quote }}\n"
        "  {{- end }}\n"))
    assert read_source(config).skipped == PODLESS
    pod = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "      - name: vllm\n        image: vllm/vllm-openai\n"
        "        {{- if .Values.a }}\n        args: [--model, a]\n        {{- else }}\n        args: [--model, b]\n"
        "        {{- end }}\n"))
    found = read_source(pod)
    assert (found.deployments, [p.code for p in found.problems]) == ((), ["input.parse"])


def test_the_end_of_a_chart_template_s_if_is_no_action_that_builds_the_last_container_s_args(tmp_path):
    # LMCache/LMBench (18fe892) llm-d-deployer/charts/llm-d/templates/tests/modelservice-sim.yaml: the `{{- end }}` of
    # the file's `{{- if .Values.test.enabled -}}` was taken as an action among the last container's args ("a template
    # action builds the command or args of container vllm (line 30: {{- end }})"), and its launch was not read.
    found = read_source(template(tmp_path, "dep.yaml", (
        "{{- if .Values.enabled -}}\n" + DEPLOYMENT + "      - name: vllm\n        image: vllm/vllm-openai:v0.11.0\n"
        "        args: [--model, m, --kv-transfer-config, '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n"
        "{{- end }}\n")))
    (d,) = found.deployments
    assert (found.problems, d.line, d.release.version, ktc(d)["kv_connector"]) == ((), 10, "0.11.0", "NixlConnector")
    # A ModelService's pod is its base config's: a template of one is not read whole, as running no vLLM.
    service = read_source(template(tmp_path, "sim.yaml", (
        "{{- if .Values.test.enabled -}}\napiVersion: llm-d.ai/v1alpha1\nkind: ModelService\nmetadata: {name: sim}\n"
        "spec:\n  baseConfigMapRef: {name: basic-sim-preset}\n  decode:\n    containers:\n    - name: vllm\n"
        "      args: [--model, food-review]\n{{- end }}\n")))
    assert service.skipped != RUNS_NO_VLLM and [p.code for p in service.problems] == ["input.parse"]


def test_a_chart_template_of_a_model_service_base_config_says_what_it_is(tmp_path):
    # LMCache/LMBench (18fe892) llm-d-deployer/charts/llm-d/templates/modelservice/presets/basic-gpu-with-nixl-preset.yaml:
    # a ModelService base config inside `{{- if }}` was noted as "a Helm chart template of objects that hold no pod",
    # though its Deployment (a string) runs vLLM where a ModelService names it (survey 31a).
    found = read_source(template(tmp_path, "preset.yaml", (
        "{{- if .Values.modelservice.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: nixl-preset}\n"
        "data:\n  decodeDeployment: |\n    apiVersion: apps/v1\n    kind: Deployment\n    spec:\n      template:\n"
        "        spec:\n          containers:\n            - name: vllm\n              image: {{ .Values.image }}\n"
        "              args: [\"--kv-transfer-config\", '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n"
        "{{- end }}\n")))
    assert (found.deployments, found.problems, found.skipped) == ((), (), None)
    assert [(n.code, n.line, n.message) for n in found.notes] == [(
        "source.unrecognized", 2, "ConfigMap `nixl-preset` is an llm-d ModelService base config: the controller merges "
        "it into the ModelServices that name it; it is no launch on its own")]


def test_a_key_given_twice_in_a_pod_whose_containers_run_no_vllm_is_no_problem(tmp_path):
    # llm-d/llm-d-router (ebab687) config/charts/routerlib/templates/_deployment.yaml: the EPP's liveness probe
    # gives `grpc` on both branches of an `if`, and a `vllm launch render` sidecar (a server that starts no
    # engine) made the file mention vLLM: an input.parse problem where, without the sidecar, it is skipped.
    text = (DEPLOYMENT + "        - name: epp\n          image: ghcr.io/llm-d/epp:v1\n          livenessProbe:\n"
            "          {{- if gt (.Values.replicas | int) 1 }}\n            grpc: {port: 9003}\n          {{- else }}\n"
            "            grpc: {port: 9004}\n          {{- end }}\n        - name: vllm-render\n"
            "          image: vllm/vllm-openai-cpu:v0.21.0\n          command: [vllm, launch, render]\n"
            "          args: [Qwen/Qwen3-0.6B, --port=8000]\n")
    found = read_source(template(tmp_path, "deploy.yaml", text))
    assert (found.deployments, found.problems, found.skipped) == ((), (), RUNS_NO_VLLM)
    # A sidecar that runs vLLM's server (its image's entrypoint) is a launch: the key given twice is the
    # EPP's, which runs no vLLM whichever branch gives it (before, the file was that key's problem).
    found = read_source(template(tmp_path, "served.yaml", text.replace("          command: [vllm, launch, render]\n", "")))
    assert (found.problems, [(d.line, d.container, d.release.version) for d in found.deployments]) == (
        (), [(17, "vllm-render", "0.21.0")])


def test_a_key_given_twice_in_a_pod_template_is_named_in_its_problem(tmp_path):
    # llm-d/llm-d-kv-cache (7be76e1) vllm-setup-helm/templates/deployment.yaml: `volumeMounts` under
    # both branches of an `if` made the template unreadable, and the problem pointed at line 4,
    # column 10 ("mapping keys must be strings"), an unrelated line.
    chart = template(tmp_path, "deployment.yaml", (
        DEPLOYMENT + "        - name: vllm\n          image: {{ .Values.image }}\n"
        "          args: [--model, m, --kv-transfer-config, x]\n          {{- if .Values.shm }}\n"
        "          volumeMounts:\n            - {name: dshm, mountPath: /dev/shm}\n"
        "          {{- else if .Values.persistence.enabled }}\n          volumeMounts:\n"
        "            - {name: data, mountPath: /data}\n          {{- end }}\n"))
    found = read_source(chart)
    assert [(p.code, p.line, p.message) for p in found.problems] == [(
        "input.parse", 16, f"`{chart}` is an unrendered Helm template: `volumeMounts` is given twice (again at line "
                           "16), as on both branches of a template condition, which the audit does not evaluate")]


@pytest.mark.parametrize("name, text", [
    # InftyAI/llmaz (3c13ff3) chart/templates/backends/vllm.yaml: a BackendRuntime under `{{- if ... -}}` was an
    # input.parse problem; a Playground that names it runs it, never the runtime itself (survey 27b).
    ("backends/vllm.yaml", "{{- if .Values.backendRuntime.enabled -}}\napiVersion: inference.llmaz.io/v1alpha1\n"
                           "kind: BackendRuntime\nmetadata:\n  name: vllm\nspec:\n"
                           "  command: [python3, -m, vllm.entrypoints.openai.api_server]\n"
                           "  image: {{ .Values.backendRuntime.vllm.image.repository }}\n  version: v0.7.3\n{{- end }}\n"),
    # benhurjoel/vllm-deployment-ocp-helm (4cfff02) charts/vllm-hf/templates/route.yaml: an OpenShift Route was an
    # input.parse problem, where an Ingress or a Service written the same way is skipped (survey 32d).
    ("route.yaml", "{{- if .Values.route.enabled -}}\napiVersion: route.openshift.io/v1\nkind: Route\nmetadata:\n"
                   "  name: {{ include \"vllm-hf.fullname\" . }}\nspec:\n  to:\n    kind: Service\n"
                   "    name: {{ include \"vllm-hf.fullname\" . }}\n{{- end }}\n"),
])
def test_a_chart_template_of_objects_that_run_nothing_themselves_holds_no_pod(tmp_path, name, text):
    found = read_source(template(tmp_path, name, text))
    assert (found.skipped, found.problems) == (PODLESS, ())


def test_an_object_of_another_kind_that_names_no_container_is_podless_too(tmp_path):
    # llm-d/llm-d-inference-scheduler (520af47) config/charts/inferencepool/templates/gke.yaml: a GKE
    # HealthCheckPolicy whose `if` and `else` both give `config:` was an input.parse problem, as its kind
    # is not one the reader knows; it names no container, image, command or args, so it runs nothing.
    policy = template(tmp_path, "gke.yaml", (
        "kind: HealthCheckPolicy\napiVersion: networking.gke.io/v1\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  default:\n    {{- if eq .Values.protocol \"http\" }}\n    config:\n      type: HTTP\n"
        "    {{- else if eq .Values.modelServerType \"vllm\" }}\n    config:\n      type: GRPC\n"
        "      grpcHealthCheck:\n        grpcServiceName: \"/vllm.grpc.engine.VllmEngine/HealthCheck\"\n    {{- end }}\n"
        "---\napiVersion: networking.gke.io/v1\nkind: GCPBackendPolicy\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  default:\n    timeoutSec: 300\n"))
    assert read_source(policy).skipped == PODLESS
    # A kind the reader does not know, that names nothing it runs, under such an `if`: the same.
    other = template(tmp_path, "other.yaml", (
        "apiVersion: example.com/v1\nkind: BackendSetting\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n"
        "  {{- if .Values.vllm }}\n  protocol: grpc\n  {{- else }}\n  protocol: http\n  {{- end }}\n"))
    assert read_source(other).skipped == PODLESS
    # A custom resource that names an image or args under such an `if` may run vLLM: still a problem.
    service = template(tmp_path, "isvc.yaml", (
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  predictor:\n    model:\n      {{- if .Values.a }}\n      args: [--kv-transfer-config, a]\n"
        "      {{- else }}\n      args: [--kv-transfer-config, b]\n      {{- end }}\n"))
    assert [p.code for p in read_source(service).problems] == ["input.parse"]


def test_a_chart_template_in_a_folder_of_templates_is_read_as_one(tmp_path):
    # opea-project/GenAIInfra (9200b37) helm-charts/common/vllm/templates/tests/test-pod.yaml: Helm
    # renders every folder under templates/; the curl pod of `helm test` was an input.parse problem.
    test_pod = template(tmp_path, "tests/test-pod.yaml", (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"{{ include \"vllm.fullname\" . }}-testpod\"\n"
        "spec:\n  containers:\n    - name: curl\n      image: python:3.10.14\n      command: ['bash', '-c']\n"
        "      args:\n        - curl http://{{ include \"vllm.fullname\" . }}/v1/completions -d '{\"model\": "
        "{{ .Values.LLM_MODEL_ID | quote }}}'\n"))
    assert read_source(test_pod).skipped == RUNS_NO_VLLM


def test_a_chart_template_s_action_ends_at_the_first_braces_outside_its_strings(tmp_path):
    # alpha-hack-program/llm-d-guide (1f391b7) gitops/instance/llm-d/inference/templates/pd-disaggregation.yaml:
    # `"{{ "{{" }} ChildName .ObjectMeta.Name {{ "}}" }}"`, Helm's idiom for literal braces, was cut at the `}}`
    # inside `"}}"`: the quote after it ended the scalar, and the file was an input.parse problem blamed on
    # another line, its vLLM container lost (survey 30d).
    found = read_source(template(tmp_path, "dep.yaml", (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: epp\n          image: epp:1\n          args:\n"
        "            - --pool-name\n            - \"{{ \"{{\" }} ChildName .ObjectMeta.Name {{ \"}}\" }}\"\n"
        "        - name: vllm\n          image: vllm/vllm-openai:v0.11.0\n"
        "          args: [\"--model\", \"m\", \"--kv-transfer-config\", "
        "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n")))
    (d,) = found.deployments
    assert (found.problems, d.line, d.release.version, ktc(d)["kv_connector"]) == ((), 14, "0.11.0", "NixlConnector")
    # the renderer of presets reads actions so too
    assert render('--pool-name={{ "{{" }} ChildName {{ "}}" }} {{- " x" }}', {}, {}) == "--pool-name={{ ChildName }} x"


def test_a_chart_template_whose_containers_all_run_no_vllm_is_skipped_not_a_problem(tmp_path):
    # kaito-project/kaito (056b828), charts/: a chainlit UI Deployment whose script names vLLM
    # in a `case`, a ConfigMap of vLLM settings and a CustomResourceDefinition were each a
    # false input.parse problem (their `{{ ... }}` keys), though the template reader reads them.
    ui = template(tmp_path, "deployment.yaml", (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"inference.fullname\" . }}\n"
        "  labels:\n    {{- include \"inference.labels\" . | nindent 4 }}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: ui\n        image: python:3.12\n        command: [sh, -c]\n"
        "        args:\n        - |\n          case \"$RUNTIME\" in vllm) echo vllm ;; esac\n"
        "          chainlit run app.py\n"))
    found = read_source(ui)
    assert (found.deployments, found.problems, found.skipped) == (
        (), (), RUNS_NO_VLLM)
    params = template(tmp_path, "inference-params.yaml", (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inference-params-template\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n  inference_config.yaml: |\n    vllm:\n"
        "      cpu-offload-gb: 0\n      gpu-memory-utilization: 0.95\n"))
    assert read_source(params).skipped == PODLESS
    # A container whose args the chart's values build is still not known: the file stays one problem.
    built = template(tmp_path, "server.yaml", (
        DEPLOYMENT + "      - name: ui\n        image: python:3.12\n"
        "      - name: vllm\n        image: vllm/vllm-openai\n        args:\n"
        "        {{- range .Values.args }}\n        - {{ . }}\n        {{- end }}\n"))
    assert [p.code for p in read_source(built).problems] == ["input.parse"]


def test_a_chart_template_takes_the_charts_name_from_chart_yaml():
    # Helm fills `{{ .Chart.Name }}` from Chart.yaml (`name: gemma`), whatever the values.
    found = read("GoogleCloudPlatform__kubernetes-engine-samples/app-design-center/ai-inference/templates/deployment.yaml")
    (d,) = found.deployments
    assert (found.format, d.container, d.line) == ("helm-template", "gemma", 32)


def test_a_chart_templates_image_names_its_release_with_the_charts_default_values():
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365), app-design-center/ai-inference:
    # `image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"`, and values.yaml
    # gives vllm/vllm-openai and v0.19.1.
    found = read("GoogleCloudPlatform__kubernetes-engine-samples/app-design-center/ai-inference/templates/deployment.yaml")
    (d,) = found.deployments
    assert d.release == ReleaseHint("0.19.1", "image tag vllm/vllm-openai:v0.19.1, the chart's default ("
                         + str(CORPUS / "GoogleCloudPlatform__kubernetes-engine-samples/app-design-center/ai-inference/"
                               "values.yaml") + ")")
    assert [Path(p).name for p in d.chain] == ["deployment.yaml", "values.yaml"]
    assert "source.release_unknown" not in [n.code for n in d.notes]
    assert d.notes[-1].message == (
        "read from an unrendered Helm template: values written `{{ ... }}` are the chart's defaults ("
        + str(CORPUS / "GoogleCloudPlatform__kubernetes-engine-samples/app-design-center/ai-inference/values.yaml")
        + ") where it gives them, else not known, and template conditions are not evaluated")
    # The command takes them too: the model and `--max-model-len` (the survey's false "which this file does not set").
    assert d.document["model"] == {"name": "google/gemma-7b-it"}
    assert not [n for n in d.notes if n.code == "source.unresolved_unused"]
    # So the audit checks the command line against 0.19.1's own parser: two of its options are gone
    # (regression: the note showed the reader's markers, NUL characters, around the Deployment's name).
    report = audit([str(CORPUS / "GoogleCloudPlatform__kubernetes-engine-samples/app-design-center/ai-inference")])
    (entry,) = report.entries
    assert [n.message for n in entry.deployment.notes if n.code == "source.option_not_in_release"] == [
        f"vLLM 0.19.1 rejects the unrecognized argument `{option}` (Deployment {{{{ include \"gemma.fullname\" . }}}}, "
        "container gemma): the launch does not start unless a vLLM plugin adds the option" for option in ("--disable-log-requests", "--num-scheduler-steps")]


def test_a_chart_templates_kv_config_is_the_charts_default_where_values_yaml_gives_it(tmp_path):
    # The survey's shape of kubernetes-engine-samples' chart with `--kv-transfer-config={{ .Values.kvTransferConfig }}`:
    # a false source.unresolved ("which this file does not set") where values.yaml gives it.
    chart = tmp_path / "chart"
    write(chart / "Chart.yaml", "apiVersion: v2\nname: gemma\nversion: 0.1.0\n")
    write(chart / "values.yaml", "image: {repository: vllm/vllm-openai, tag: v0.19.1}\n"
                                 "kvTransferConfig: '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\n")
    deployment = template(tmp_path, "deployment.yaml", DEPLOYMENT + (
        "      - name: vllm\n        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n"
        "        command: [python3, -m, vllm.entrypoints.openai.api_server]\n"
        "        args: [--model=m, \"--kv-transfer-config={{ .Values.kvTransferConfig }}\", "
        "--port={{ .Values.port | quote }}]\n"))
    (d,) = read_source(deployment, roots=(tmp_path,)).deployments
    assert (d.problems, d.release.version, ktc(d)["kv_connector"]) == ((), "0.19.1", "NixlConnector")
    # A value the defaults do not give stays unknown: noted where the decision does not read it.
    assert [n.message for n in d.notes if n.code == "source.unresolved_unused"] == [
        "`--port` takes its value from `{{ .Values.port | quote }}`, which this file does not set; the decision "
        "does not read it"]


def test_a_chart_default_image_that_names_no_release_leaves_it_unknown(tmp_path):
    template = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n"
                "    spec:\n      containers:\n      - name: vllm\n        image: \"{{ .Values.image }}:"
                "{{ .Values.tag | default .Chart.AppVersion }}\"\n        command: [vllm, serve, m]\n")
    chart = tmp_path / "chart"
    write(chart / "Chart.yaml", "name: c\nappVersion: v0.21.0\n")
    deployment = write(chart / "templates" / "deployment.yaml", template)
    write(chart / "values.yaml", "image: vllm/vllm-openai\ntag: ''\n")
    (d,) = read_source(deployment, roots=(tmp_path,)).deployments  # an empty tag: `default` gives the chart's appVersion
    assert d.release.version == "0.21.0" and [Path(p).name for p in d.chain] == ["deployment.yaml", "values.yaml"]
    # The aibrix regression chart's defaults are an SGLang image: the release stays unknown, and says which.
    write(chart / "values.yaml", "image: example.com/aibrix:sglang\ntag: v0.4.9\n")
    (d,) = read_source(deployment, roots=(tmp_path,)).deployments
    assert d.release == ReleaseHint(None, "image example.com/aibrix:sglang:v0.4.9 is not vLLM's release image: its tag is not "
                               "read as a vLLM release")
    assert [Path(p).name for p in d.chain] == ["deployment.yaml", "values.yaml"]  # (the container takes its values)
    write(chart / "values.yaml", "image: vllm/vllm-openai\n")  # no tag, and no appVersion to default to
    write(chart / "Chart.yaml", "name: c\n")
    (d,) = read_source(deployment, roots=(tmp_path,)).deployments
    assert d.release.version is None and "source.release_unknown" in [n.code for n in d.notes]


def test_llm_d_modelservice_values_run_vllm_serve_with_the_container_args():
    found = read("llm-d-incubation__llm-d-modelservice/examples/values-pd.yaml")
    assert [(d.role, d.line) for d in found.deployments] == [("decode", 31), ("prefill", 70)]


def test_the_vllm_chart_values_command():
    (d,) = read("vllm-project__vllm/examples/online_serving/chart-helm/values.yaml").deployments
    assert (d.line, d.format) == (11, "helm-values")


# -- llm-d-benchmark ---------------------------------------------------------------------------

def test_a_scenario_custom_command_with_accelerator_fragments():
    found = read("llm-d__llm-d-benchmark/config/scenarios/guides/pd-disaggregation.yaml")
    assert [(d.role, d.line) for d in found.deployments] == [("prefill", 315), ("decode", 406)]
    assert ktc(found.deployments[0]) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_a_scenario_takes_kubelet_env_substitution_from_extra_env_vars():
    (d,) = read("llm-d__llm-d-benchmark/config/scenarios/guides/tiered-prefix-cache.yaml").deployments
    assert ktc(d)["kv_connector_extra_config"] == {"cpu_bytes_to_use": 214748364800}


def test_a_scenario_without_a_custom_command_appends_kv_transfer():
    (d,) = read("llm-d__llm-d-benchmark/config/scenarios/cicd/ocp-keda.yaml").deployments
    assert (d.line, ktc(d)) == (137, {"kv_connector": "NixlConnector", "kv_role": "kv_both"})


@pytest.mark.parametrize("image, flags, found", [
    # llm-d/llm-d-benchmark (8bc9f1d) config/scenarios/cicd/kind.yaml, examples/sim.yaml: the simulator's own
    # entrypoint, which runs no vLLM; each role was a made-up `vllm serve`, `enabled` (survey 27e)
    ("ghcr.io/llm-d/llm-d-inference-sim", [], None),
    ("docker.io/vllm/vllm-openai", ["--model", "m", "--kv-transfer-config", LMCACHE], json.loads(LMCACHE)),
])
def test_a_scenario_with_the_image_default_command_runs_the_image_s_entrypoint(image, flags, found):
    text = json.dumps({"scenario": [{"name": "s", "images": {"vllm": {"repository": image, "tag": "v0.26.0"}},
                                          "vllmCommon": {"kvTransfer": {"enabled": True}},
                                          "decode": {"vllm": {"modelCommand": "imageDefault", "additionalFlags": flags}}}]})
    deployments = find_deployments("sim.yaml", text).deployments
    assert [ktc(d) for d in deployments] == ([found] if found else [])


def test_a_scenario_that_kustomize_deploys_is_a_note_and_a_default_decode_stands_at_its_stack():
    # llm-d/llm-d-benchmark (8bc9f1d) config/scenarios/guides/fast-model-actuation.yaml: with
    # `kustomize.enabled` the guide's manifests deploy the stack, not the modelservice chart; it was a
    # made-up decode placed at no line (survey 27e).
    found = find_deployments("fma.yaml", "scenario:\n  - name: fma\n    model: {name: m}\n"
                                         "    modelservice: {enabled: true}\n"
                                         "    kustomize: {enabled: true, guideName: fast-model-actuation}\n"
                                         "  - name: plain\n    modelservice: {enabled: true}\n")
    assert [(n.code, n.line, n.message) for n in found.notes] == [(
        "source.unrecognized", 5, "stack 1 deploys with kustomize (`kustomize.enabled`): the llm-d guide "
        "`fast-model-actuation`'s manifests, which this file does not hold, run vLLM; they are not read")]
    assert [(d.role, d.line) for d in found.deployments] == [("decode", 6)]


def test_the_legacy_env_file_extra_args():
    found = read("llm-d__llm-d-benchmark/docs/tutorials/kubecon/scenarios/pd-disaggregation.sh")
    assert found.format == "llmdbench-env"
    assert [(d.role, d.line, dict(d.resource)["namespace"]) for d in found.deployments] == [
        ("prefill", 39, "ai-workloads"), ("decode", 68, "ai-workloads")]


@pytest.mark.parametrize("tag, outcome, errors", [
    # vllm-project/aibrix (survey 25d) development/vllm/config/*.yaml: `--enable-chunked-prefill false` on
    # v0.6.1 and v0.7.0, whose StoreBoolean took the word: `error` (vLLM rejects `false`), where those releases
    # have no HMA to decide (`disabled`)
    ("v0.7.0", "disabled", []),
    # 0.9 and later refuse the word, as the default release does
    ("v0.10.0", "error", ["source.extra_argument"]),
])
def test_a_boolean_s_value_is_its_own_on_releases_that_took_one(tmp_path, tag, outcome, errors):
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
            f"      containers:\n      - name: vllm\n        image: vllm/vllm-openai:{tag}\n"
            "        args: [m, --enable-chunked-prefill, 'false', --max-model-len, '4096']\n")
    (entry,) = audit([str(write(tmp_path / "dep.yaml", text))]).entries
    assert (entry.decision["outcome"], [e["code"] for e in entry.decision["errors"]]) == (outcome, errors)


@pytest.mark.parametrize("script, line", [
    # a block scalar: its text starts on the line after `|-`
    ("        - |-\n          echo start\n          for i in 1 2; do echo $i\n          exec vllm serve m\n", 12),
    # a flow scalar on the line of its `-`
    ("        - \"echo start; for i in 1 2; do echo $i; exec vllm serve m\"\n", 10),
])
def test_a_container_script_s_syntax_is_told_at_the_file_s_lines(tmp_path, script, line):
    # aws-samples/aws-do-eks (f721602) agg/deployment.yaml-template: "`for` at line 117 has no `do`" where the
    # `for` is at line 124: lines were counted from the container's `- name:` line (survey 28b).
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: vllm\n"
            "      image: vllm/vllm-openai:v0.10.1\n      command: [/bin/bash, -c]\n      args:\n" + script)
    found = read_source(write(tmp_path / "pod.yaml", text))
    assert [(p.code, p.line, p.message) for p in found.problems] == [
        ("source.shell_syntax", 6, f"cannot read the script: `for` at line {line} has no `done`")]


APPLYING_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: deployer}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: deploy
          image: registry.redhat.io/openshift4/ose-cli:latest
          command: [bash, -c]
          args:
            - |
              SCRIPT
"""

APPLIED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: m}
spec:
  containers:
  - name: main
    image: vllm/vllm-openai:v0.11.0
    args: ["--model=m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']"""


@pytest.mark.parametrize("script", [
    "kubectl apply -f - <<EOF\n" + APPLIED_POD + "\nEOF",
    "cat > /tmp/pod.yaml <<EOF\n" + APPLIED_POD + "\nEOF\noc apply -f /tmp/pod.yaml",
])
def test_a_manifest_a_container_s_script_applies_is_read_at_its_lines(tmp_path, script):
    # openshift-psap/llm-d-bench (682d20b) tasks/deployment/rhaiis/deploy-pod.yaml: a step's script writes
    # /tmp/pod.yaml with a here-document and runs `oc apply -f /tmp/pod.yaml`. A script file that does so is
    # read (sources/applied.py); the same script in a container's `bash -c` gave no launch (survey 30d).
    indented = "\n".join("              " + line if line else "" for line in script.split("\n"))
    found = read_source(write(tmp_path / "job.yaml", APPLYING_JOB.replace("              SCRIPT", indented)))
    (d,) = found.deployments
    text = (tmp_path / "job.yaml").read_text().split("\n")
    assert (d.name, d.release.version, found.problems) == ("m/main", "0.11.0", ())
    assert text[d.line - 1].strip() == "- name: main"
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


# A Deployment `vllm`, up to its pod's fields.
VLLM_POD = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n  template:\n    spec:\n"

INIT_WRITTEN = VLLM_POD + """\
      initContainers:
        - name: setup-script
          image: busybox
          command:
            - sh
            - -c
            - |
              cat > /scripts/entrypoint.sh << 'EOF'
              #!/bin/bash
              /usr/bin/python -m vllm.entrypoints.openai.api_server --model m \\
                --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
              EOF
              chmod +x /scripts/entrypoint.sh
          volumeMounts: [{name: script-volume, mountPath: /scripts}]
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          command: ["/opt/entry/entrypoint.sh"]
          volumeMounts: [{name: script-volume, mountPath: /opt/entry}]
      volumes: [{name: script-volume, VOLUME}]
"""


def test_a_script_an_init_container_writes_is_run_by_the_container_that_mounts_it(tmp_path):
    # LMCache/LMBench (18fe892) 2-serving-engines/direct-production-stack/kubernetes_configurations/basic/
    # llama8B_lmcache.yaml: an init container writes /scripts/entrypoint.sh into an emptyDir, and the vLLM
    # container runs it (`command: ["/scripts/entrypoint.sh"]`); the launch was missed, with only a note (survey 31a).
    found = read_source(write(tmp_path / "dep.yaml", INIT_WRITTEN.replace("VOLUME", "emptyDir: {}")))
    (d,) = found.deployments
    assert (d.name, d.line, d.release.version, found.problems) == ("vllm/vllm", 22, "0.11.0", ())
    assert ktc(d) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    # a volume that is not the pod's own scratch space (a PVC) may hold another file: not read
    found = read_source(write(tmp_path / "pvc.yaml", INIT_WRITTEN.replace("VOLUME", "persistentVolumeClaim: {claimName: c}")))
    assert found.deployments == ()


# -- shared ------------------------------------------------------------------------------------

@pytest.mark.parametrize("image, release", [("docker.io/vllm/vllm-openai:v0.23.0", "0.23.0"),
                                            ("vllm/vllm-openai-cpu:0.9.2", "0.9.2"), ("vllm/vllm-openai:latest", None),
                                            ("lmcache/vllm-openai:v0.3.9", None),
                                            ("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1", "0.10.1"),
                                            ("opea/vllm-gaudi:1.2", None)])
def test_release_hint_from_image_tags(image, release):
    assert from_image(image).version == release


def test_documentation_that_mentions_a_kv_option_is_noted_and_in_memory_text_reads_nothing_from_disk():
    found = read("vllm-project__aibrix/python/aibrix_kvcache/integration/vllm/README.md")
    assert (found.deployments, [n.line for n in found.notes]) == ((), [29])
    text = (CORPUS / "llm-d__llm-d/guides/tiered-prefix-cache/modelserver/gpu/vllm/base/patch-vllm.yaml").read_text()
    (d,) = find_deployments("patch-vllm.yaml", text).deployments
    assert d.format == "kubernetes"  # no kustomization can be looked up for text in memory


@pytest.mark.parametrize("text", [
    # found by mutating corpus files: names that are mappings, metadata that is a list
    "apiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceService\nmetadata: {name: s}\nspec:\n"
    "  template: {containers: [{name: {a: 1}, image: vllm/vllm-openai}, {name: [1], args: [m]}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes: [{name: {a: 1}}, {name: [2]}]\n"
    "  containers: [{name: c, image: vllm/vllm-openai, args: [m]}]\n",
    "apiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceServiceConfig\nmetadata: [x]\nspec: {}\n",
    "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: g}\n"
    "spec: {services: {W: {extraPodSpec: {mainContainer: {command: x, args: [1]}}}}, envs: [1]}\n",
    "apiVersion: production-stack.vllm.ai/v1alpha1\nkind: VLLMRuntime\nmetadata: {name: r}\n"
    "spec: {vllmConfig: {extraArgs: 7, env: {}}, lmCacheConfig: {enabled: true}, deploymentConfig: {image: []}}\n",
    "servingEngineSpec: {modelSpec: [1, {name: a, vllmConfig: [], lmcacheConfig: {enabled: true}, env: 3}]}\n",
    "scenario: [{decode: {vllm: {customCommand: 5, additionalFlags: {}}, extraEnvVars: 1}, vllmCommon: []}]\n",
])
def test_malformed_objects_are_read_without_a_fault(text):
    found = find_deployments("objects.yaml", text)
    assert all(d.file == "objects.yaml" for d in found.deployments)


@pytest.mark.parametrize("config, model, kv", [
    ("[1]", None, None),  # JSON, but not an object
    ('{"VllmWorker": {"model": "m", "common-configs": 5}}', {"name": "m"}, None),
    ('{"VllmWorker": {"model": "m", "common-configs": [{"a": 1}, "kv-transfer-config"]}, '
     '"Common": {"kv-transfer-config": {"kv_connector": "X"}}}', {"name": "m"}, '{"kv_connector": "X"}'),
])
def test_a_dynamo_serve_config_of_the_wrong_shape_reads_as_no_flags(config, model, kv):
    # Dynamo 0.3's DYN_DEPLOYMENT_CONFIG: a config that is not an object has no section for the service, and
    # common-configs pulls in only the Common keys it lists as strings (these raised AttributeError, TypeError)
    text = ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: g}\n"
            f"spec:\n  envs: [{{name: DYN_DEPLOYMENT_CONFIG, value: '{config}'}}]\n"
            "  services: {VllmWorker: {extraPodSpec: {mainContainer: {command: [sh, -c], "
            "args: ['dynamo serve graphs.disagg:VllmWorker']}}}}\n")
    (d,) = find_deployments("graph.yaml", text).deployments
    assert (d.format, d.document.get("model"), d.document.get("kv_transfer_config"), d.problems) == (
        "dynamo", model, kv, ())


def test_a_kustomization_with_malformed_resources_leaves_its_patch_unresolved(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: true\npatches: [{path: patch.yaml}]\n")
    shutil.copy(CORPUS / "llm-d__llm-d/guides/tiered-prefix-cache/modelserver/gpu/vllm/base/patch-vllm.yaml",
                tmp_path / "patch.yaml")
    (d,) = read_source(tmp_path / "patch.yaml").deployments
    assert "the base (none)" in d.problems[0].message


# -- llm-d ModelService (tests/k8s_samples, provenance in its PROVENANCE.md) -------------------

SAMPLES = Path(__file__).resolve().parent / "k8s_samples"


def test_a_model_service_merges_its_base_config_deployment():
    found = read_source(SAMPLES / "llm-d-model-service/facebook-nixl/msvc.yaml", roots=(SAMPLES,))
    decode, prefill = found.deployments
    assert [(d.role, d.line, d.format) for d in (decode, prefill)] == [("decode", 25, "modelservice"),
                                                                      ("prefill", 38, "modelservice")]
    # the service's args come before the base config's: the model, then the base's --kv-transfer-config
    assert decode.document["model"] == {"name": "facebook/opt-125m"}
    assert ktc(decode) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert [Path(p).name for p in decode.chain[1:]] == ["baseconfig.yaml"]


def test_a_model_service_base_config_alone_is_noted_and_without_it_the_service_is_unresolved(tmp_path):
    base = read_source(SAMPLES / "llm-d-model-service/facebook-nixl/baseconfig.yaml", roots=(SAMPLES,))
    # the base config alone starts nothing: noted as what it is (its mention of a KV option at
    # line 42 replaced that note, and lost it)
    assert base.deployments == () and [(n.code, n.line, n.message) for n in base.notes] == [(
        "source.unrecognized", 2, "ConfigMap `facebook-base-config-nixl` is an llm-d ModelService base config: the "
        "controller merges it into the ModelServices that name it; it is no launch on its own")]
    shutil.copy(SAMPLES / "llm-d-model-service/facebook-nixl/msvc.yaml", tmp_path / "msvc.yaml")
    decode, _ = read_source(tmp_path / "msvc.yaml").deployments
    assert decode.problems[0].code == "source.unresolved"
    assert "`facebook-base-config-nixl` is not in the audited paths" in decode.problems[0].message


MODEL_SERVICE_BASE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: base}
data:
  decodeDeployment: |
    apiVersion: apps/v1
    kind: Deployment
    spec:
      template:
        spec:
          initContainers:
            - name: routing-proxy
              image: ghcr.io/llm-d/llm-d-routing-sidecar:0.0.6
              imagePullPolicy: Always
              args: ["--port={{ "port" | getPort }}"]
              imagePullPolicy: IfNotPresent
          containers:
            - name: vllm
              image: ghcr.io/llm-d/llm-d:0.0.8
              command: [vllm, serve]
              args:
                - "--port"
                - "{{ "app_port" | getPort }}"
                - --kv-transfer-config
                - '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
---
apiVersion: llm-d.ai/v1alpha1
kind: ModelService
metadata: {name: m}
spec:
  baseConfigMapRef: {name: base}
  routing: {modelName: facebook/opt-125m}
  decode:
    containers:
    - name: vllm
      args: ["{{ .HFModelName }}"]
"""


def test_a_model_service_base_config_s_actions_the_files_do_not_give_are_values_not_known(tmp_path):
    # llm-d/llm-d-model-service (403e983) samples/nixl-xpyd: the universal base config's
    # `"{{ "app_port" | getPort }}"` rendered as a marker that YAML refuses (`#x0000`), and 6 of the 8
    # launches were errors; its routing-proxy init container gives `imagePullPolicy` twice, which the
    # controller's sigs.k8s.io/yaml.Unmarshal takes, keeping the last (survey 30c).
    found = read_source(write(tmp_path / "ms.yaml", MODEL_SERVICE_BASE))
    (d,) = found.deployments
    assert (d.role, d.problems, ktc(d)) == ("decode", (), {"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    assert [n.message for n in d.notes if n.code == "source.unresolved_unused"] == [
        '`--port` takes its value from `{{ "app_port" | getPort }}`, which this file does not set; the decision does '
        "not read it"]


def test_a_model_service_without_a_base_config_runs_its_own_containers(tmp_path):
    # llm-d/llm-d-model-service (403e983) test/modelservices/ms1.yaml: with no baseConfigMapRef the controller's
    # base is empty (child_resources.go: `return &BaseConfig{}, nil`) and the pod is the service's containers
    # alone; it was a source.unresolved error, "it names no base config" (survey 30c).
    service = ("apiVersion: llm-d.ai/v1alpha1\nkind: ModelService\nmetadata: {name: m}\nspec:\n"
               "  routing: {modelName: repo/model}\n  decode:\n    containers:\n")
    idle = read_source(write(tmp_path / "idle.yaml", service + "    - {name: c, image: busybox, command: [sleep, inf]}\n"))
    assert (idle.deployments, idle.problems) == ((), ())
    served = read_source(write(tmp_path / "served.yaml", service + (
        "    - name: vllm\n      image: vllm/vllm-openai:v0.11.0\n      command: [vllm, serve, m]\n"
        "      args: [--kv-transfer-config, '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n")))
    (d,) = served.deployments
    assert (d.role, d.problems, d.release.version, ktc(d)["kv_connector"]) == ("decode", (), "0.11.0", "NixlConnector")


@pytest.mark.parametrize("fmt", ["text", "md", "html", "policyreport", "json"])
def test_every_report_format_shows_where_a_launch_is(fmt):
    from hma_policy.audit.report import render
    from hma_policy.audit.run import audit

    report = audit([str(CORPUS / "kserve__kserve/docs/samples/llmisvc/opt-125m-cpu"),
                    str(CORPUS / "kserve__kserve/config/llmisvcconfig")])
    text = render(report, fmt)
    if fmt == "json":
        entry = next(d for d in json.loads(text)["deployments"] if d["role"] == "prefill")
        assert (entry["line"], entry["container"], entry["release_hint"]["version"]) == (34, "main", "0.23.0")
        assert [Path(p).name for p in entry["chain"][1:]] == ["config-llm-prefill-template.yaml",
                                                               "config-llm-decode-template.yaml"]
    elif fmt == "policyreport":
        props = next(r["properties"] for r in json.loads(text)["results"] if r["properties"].get("role") == "prefill")
        assert (props["line"], props["container"]) == ("34", "main")
        assert props["vllm_release"].startswith("0.23.0 (image tag ")
    else:
        assert "LLMInferenceService facebook-opt-125m-pd · container main · role prefill" in text.replace("&#x27;", "'")
        assert "0.23.0 (image tag docker.io/vllm/vllm-openai-cpu:v0.23.0)" in text


def test_a_tpu_container_given_no_command_serves_with_the_words_of_vllm_args(tmp_path):
    # vllm-project/tpu-inference's image entrypoint (docker/entrypoint.sh) serves with ${VLLM_ARGS:-}
    # given no arguments; DISABLE_VLLM_SERVER=true starts a shell instead.
    manifest = write(tmp_path / "tpu.yaml", """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: tpu}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-tpu:nightly
        env:
        - {name: VLLM_ARGS, value: "--model m --disable-hybrid-kv-cache-manager"}
      - name: shell
        image: vllm/vllm-tpu:nightly
        env:
        - {name: DISABLE_VLLM_SERVER, value: "true"}
      - name: from-config
        image: vllm/vllm-tpu:nightly
        env:
        - name: VLLM_ARGS
          valueFrom: {configMapKeyRef: {name: args, key: vllm}}
""")
    served, unknown = read_source(manifest).deployments
    assert (served.container, served.document["model"], served.document["disable_hybrid_kv_cache_manager"]) == (
        "vllm", {"name": "m"}, True)
    assert [n.code for n in served.notes] == ["source.image_entrypoint", "source.release_unknown"]
    assert unknown.container == "from-config"
    assert [n.code for n in unknown.notes] == ["source.image_entrypoint", "source.unresolved_arguments",
                                               "source.release_unknown"]


def test_a_containers_vllm_use_v1_reaches_the_decision(tmp_path):
    # kubernetes-sigs/inference-perf demos/kubecon-na-2025/vllm+v0_engine/manifests.yaml runs the V0
    # engine with env VLLM_USE_V1=0: the audit copied only the variables the schema declared, and
    # VLLM_USE_V1 was not one, so the launch was decided enabled whatever the release.
    manifest = write(tmp_path / "v0.yaml", """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: v0}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.0
        args: ["--model", "m"]
        env:
        - {name: VLLM_USE_V1, value: "0"}
        - {name: HF_TOKEN, value: secret}
""")
    (entry,) = audit([str(manifest)]).entries
    assert entry.deployment.document["env"] == {"VLLM_USE_V1": "0"}  # and no other variable
    assert (entry.decision["outcome"], entry.decision["vllm"]["release"]) == ("disabled", "0.10.0")
    assert entry.decision["reasons"][-1] == "VLLM_USE_V1=0 runs the V0 engine, which has no hybrid KV cache manager"


def test_a_native_sidecar_init_container_is_a_launch_and_other_init_containers_are_not(tmp_path):
    # GoogleCloudPlatform/accelerated-platforms offline-batch-worker/base/jobset.yaml runs vLLM as an
    # init container with restartPolicy: Always (Kubernetes' native sidecar, beside the worker):
    # only the containers were read, and the launch was a note.
    manifest = write(tmp_path / "worker.yaml", """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec:
  template:
    spec:
      initContainers:
      - name: fetch
        image: vllm/vllm-openai:v0.33.0
        command: ["vllm", "serve", "never-runs-as-a-server"]
      - name: inference-server
        image: vllm/vllm-openai:v0.33.0
        restartPolicy: Always
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args: ["--model=m", '--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
      containers:
      - name: worker
        image: busybox
""")
    (entry,) = audit([str(manifest)]).entries
    assert (entry.deployment.container, entry.deployment.line) == ("inference-server", 11)
    assert (entry.decision["outcome"], entry.decision["hma_enabled"]) == ("disabled", False)


_LMCACHE_SERVER = """\
        command: ["vllm", "serve"]
        args: ["--model=m", '--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
"""


def _overlay(tmp_path, patches: dict[str, str], kustomization: str, base_container_first: str = "",
             server: str = _LMCACHE_SERVER) -> Path:
    """A base Deployment running vLLM (its container's lines after the image: ``server``) and an overlay of it."""
    base = tmp_path / "base"
    write(base / "kustomization.yaml", "resources:\n- deployment.yaml\n")
    write(base / "deployment.yaml", f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:{base_container_first}
      - name: inference-server
        image: vllm/vllm-openai:v0.33.0
""" + server)
    overlay = tmp_path / "overlay"
    write(overlay / "kustomization.yaml", kustomization)
    for name, text in patches.items():
        write(overlay / name, text)
    return overlay


_ARGS_PATCH = VLLM_POD + """\
      containers:
      - name: inference-server
        args: ["--model=m", '--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
               "--no-disable-hybrid-kv-cache-manager"]
"""
_RESOURCES_PATCH = VLLM_POD + """\
      nodeSelector: {gpu: h100}
      containers:
      - name: inference-server
        resources: {limits: {nvidia.com/gpu: 8}}
"""


def test_every_patch_of_an_overlay_shapes_one_launch_at_the_patch_that_gives_its_args(tmp_path):
    # GoogleCloudPlatform/accelerated-platforms: each overlay patches one Deployment three times
    # (args, resources, node selector), and each patch file was a launch of its own merged with
    # the base alone: 140 launches for 68 Deployments, the resources patch decided `disabled`
    # while the Deployment kustomize builds fails at start-up.
    overlay = _overlay(tmp_path, {"patch-resources.yaml": _RESOURCES_PATCH, "patch-vllm-args.yaml": _ARGS_PATCH},
                       "resources:\n- ../base\npatches:\n- path: patch-resources.yaml\n- path: patch-vllm-args.yaml\n")
    entries = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert [(Path(e.deployment.file).name, e.deployment.line, e.decision["outcome"]) for e in entries] == [
        ("patch-vllm-args.yaml", 8, "error")]
    assert [Path(p).name for p in entries[0].deployment.chain] == [
        "patch-vllm-args.yaml", "deployment.yaml", "patch-resources.yaml", "kustomization.yaml"]
    # With no patch that gives args, the first patch of the object is where its launch is; its
    # container's line is the patch's, wherever the base lists it.
    overlay = _overlay(tmp_path / "two", {"patch-resources.yaml": _RESOURCES_PATCH},
                       "resources:\n- ../base\npatches:\n- path: patch-resources.yaml\n",
                       base_container_first="\n      - {name: proxy, image: envoy}")
    (entry,) = [e for e in audit([str(tmp_path / "two")]).entries if "/overlay/" in e.deployment.file]
    assert (Path(entry.deployment.file).name, entry.deployment.line, entry.decision["outcome"]) == (
        "patch-resources.yaml", 9, "disabled")


def test_a_json6902_patch_in_a_file_applies_to_its_target(tmp_path):
    overlay = _overlay(tmp_path, {"patch-args.yaml": "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
                                                     "  value: --no-disable-hybrid-kv-cache-manager\n"},
                       "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                       "resources:\n- ../base\npatches:\n- path: patch-args.yaml\n"
                       "  target: {kind: Deployment, name: vllm}\n")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert (Path(entry.deployment.file).name, entry.deployment.line, entry.decision["outcome"]) == (
        "kustomization.yaml", 6, "error")


def test_a_json6902_patch_that_renames_its_target_still_has_its_base(tmp_path):
    # opendatahub-io/models-as-a-service (c0639b1b) deployment/base/payload-processing/pre-processing:
    # a patch that replaces `/metadata/name` and a container's args was reported as applying "to a base
    # that is not in the audited paths", the base it patched being there: the renamed object was
    # looked up by the name the patch had given it, not the one it targets.
    _overlay(tmp_path, {"patch.yaml": "- op: replace\n  path: /metadata/name\n  value: vllm-renamed\n"
                                      "- op: replace\n  path: /spec/template/spec/containers/0/args\n"
                                      "  value: [--model, m, --disable-hybrid-kv-cache-manager]\n"},
             "resources:\n- ../base\npatches:\n- path: patch.yaml\n  target: {kind: Deployment, name: vllm}\n")
    report = audit([str(tmp_path)])
    (entry,) = [e for e in report.entries if "/overlay/" in e.deployment.file]
    assert (entry.deployment.name, entry.decision["outcome"]) == ("vllm-renamed/inference-server", "disabled")
    assert report.problems == ()


def test_a_json6902_patch_whose_target_names_no_object_applies_to_each_of_its_kind(tmp_path):
    # llm-d-incubation/workload-variant-autoscaler (56a651b0) config/default/kustomization.yaml patches
    # `target: {kind: Deployment}` (every Deployment) with args: "the patch of Deployment None applies to a
    # base that is not in the audited paths", though its base was there (kustomize's selector: no name,
    # every object of the kind).
    _overlay(tmp_path, {"patch.yaml": "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
                                      "  value: --disable-hybrid-kv-cache-manager\n"},
             "resources:\n- ../base\npatches:\n- path: patch.yaml\n  target: {kind: Deployment}\n")
    report = audit([str(tmp_path)])
    assert report.problems == ()
    (entry,) = [e for e in report.entries if "/overlay/" in e.deployment.file]
    assert entry.deployment.document["disable_hybrid_kv_cache_manager"] is True
    # A patch that reaches no base is named by what its target gives, never `None`.
    write(tmp_path / "overlay" / "kustomization.yaml", "resources:\n- ../base\npatches:\n- path: patch.yaml\n"
                                                       "  target: {kind: StatefulSet}\n")
    assert [p.message for p in audit([str(tmp_path)]).problems] == [
        "the patch of StatefulSet applies to a base that is not in the audited paths"]
    # kubeflow/pipelines (7b70c7b9) manifests/kustomize/third-party/argo/installs/namespace: a JSON6902 patch that
    # gives Argo's workflow controller `--namespaced`, over a remote base, was that `source.unresolved` problem; a
    # patch of another program's command is none of vLLM's (survey 46b).
    write(tmp_path / "overlay" / "patch.yaml", "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
                                               "  value: --namespaced\n")
    assert audit([str(tmp_path)]).problems == ()


@pytest.mark.parametrize("name, applies", [
    ("vll[mn]", True), ("v.*", True), ("vllm|other", True), ("vllm", True),
    ("vll", False), ("x.*", False),  # (the whole name, as kustomize anchors it)
    ("(a+)+", False),  # past the subset the audit matches as a pattern: the name it names
])
def test_a_patch_targets_name_is_a_pattern_of_the_whole_name(tmp_path, name, applies):
    # llm-d/llm-d-inference-scheduler (520af47) deploy/components/overlays/simulator targets
    # `name: "vllm-[pe]"`, which kustomize reads as a regular expression: the audit took it for a
    # name, applied the patch to nothing, and said its base was not in the audited paths (survey 24d).
    _overlay(tmp_path, {"patch.yaml": "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
                                      "  value: --disable-hybrid-kv-cache-manager\n"},
             f"resources:\n- ../base\npatches:\n- path: patch.yaml\n  target: {{kind: Deployment, name: '{name}'}}\n")
    report = audit([str(tmp_path)])
    overlaid = [e for e in report.entries if "/overlay/" in e.deployment.file]
    assert ([e.deployment.document["disable_hybrid_kv_cache_manager"] for e in overlaid], bool(report.problems)) == (
        ([True], False) if applies else ([], True))


def test_an_overlay_of_a_kserve_inference_service_is_a_launch_of_its_runtime(tmp_path):
    # openshift-psap/topsail (cfc3e8a) projects/kserve/toolbox/kserve_deploy_model/files/vllm/models/*:
    # 14 overlays patch the base InferenceService's `predictor.model.args`; none was a launch, and five
    # patch files were read as services of their own, "no ServingRuntime ... auto-select its model
    # format ``" (survey 24d).
    write(tmp_path / "base" / "kustomization.yaml", "resources:\n- servingruntime.yaml\n- inferenceservice.yaml\n")
    write(tmp_path / "base" / "servingruntime.yaml", "apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\n"
          "metadata: {name: vllm-servingruntime}\nspec:\n  containers:\n  - name: kserve-container\n"
          "    image: vllm/vllm-openai:v0.10.0\n    args: [--model=/mnt/models/]\n"
          "  supportedModelFormats:\n  - {autoSelect: true, name: pytorch}\n")
    write(tmp_path / "base" / "inferenceservice.yaml", "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
          "metadata: {name: isvc}\nspec:\n  predictor:\n    model:\n      modelFormat: {name: pytorch}\n"
          "      runtime: vllm-servingruntime\n      args: [--dtype=auto]\n")
    write(tmp_path / "models" / "m1" / "kustomization.yaml", "resources:\n- ../../base\npatches:\n- path: patch.yaml\n"
          "  target: {kind: InferenceService, name: isvc}\n")
    patch = write(tmp_path / "models" / "m1" / "patch.yaml", "apiVersion: serving.kserve.io/v1beta1\n"
                  "kind: InferenceService\nmetadata: {name: isvc}\nspec:\n  predictor:\n    model:\n"
                  f"      args: ['--kv-transfer-config={LMCACHE}']\n")
    report = audit([str(tmp_path)])
    assert report.problems == ()
    (overlay,) = [e for e in report.entries if e.deployment.file == str(patch)]
    d = overlay.deployment
    assert (d.format, d.line, d.container, ktc(d)["kv_connector"], overlay.decision["outcome"]) == (
        "kustomize", 6, "kserve-container", "LMCacheConnectorV1", "disabled")  # (vLLM 0.10.0, with a connector)
    assert tuple(os.path.normpath(f) for f in d.chain) == (str(patch), str(tmp_path / "base" / "inferenceservice.yaml"),
                       str(tmp_path / "models" / "m1" / "kustomization.yaml"),
                       str(tmp_path / "base" / "servingruntime.yaml"))


def test_a_components_patches_apply_before_the_overlays_own(tmp_path):
    # llm-d/llm-d-inference-scheduler (520af47) deploy/environments/dev/*: overlays list
    # `components: [../../../components/overlays/simulator]`, a `kind: Component` whose JSON6902
    # patches set the decode container's args (DEVELOPMENT.md's `real-vllm` component adds
    # `--kv-events-config` so). The overlay was read as if the component were absent, and the
    # component file was a note that it mentions a KV option.
    nixl = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    component = tmp_path / "components" / "kv"
    write(component / "kustomization.yaml", (
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n"
        "- target: {kind: Deployment, name: vllm}\n  patch: |\n    - op: add\n"
        "      path: /spec/template/spec/containers/0/args/-\n"
        f"      value: '--kv-transfer-config={nixl}'\n"))
    server = '        command: ["vllm", "serve"]\n        args: ["--model=m"]\n'
    overlay = _overlay(tmp_path, {}, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                     "resources:\n- ../base\ncomponents:\n- ../components/kv\n", server=server)
    report = audit([str(tmp_path)])
    (entry,) = [e for e in report.entries if "/overlay/" in e.deployment.file]
    assert (Path(entry.deployment.file).name, entry.deployment.line) == ("kustomization.yaml", 6)
    assert json.loads(entry.deployment.document["kv_transfer_config"]) == json.loads(nixl)
    assert [Path(os.path.normpath(f)).relative_to(tmp_path).as_posix() for f in entry.deployment.chain] == [
        "overlay/kustomization.yaml", "base/deployment.yaml", "components/kv/kustomization.yaml"]
    assert [(Path(n.file).relative_to(tmp_path).as_posix(), n.message) for n in report.notes] == [
        ("components/kv/kustomization.yaml", "a kustomize Component: its patches apply where a kustomization lists it "
                                             "in `components:`, and are read there; it is no launch on its own")]
    # The overlay's own patch that gives the args is where the launch is reported, the component's applied first.
    own = write(overlay / "patch.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n"
                                        "  template:\n    spec:\n      containers:\n      - name: inference-server\n"
                                        "        args: [--model=m2]\n")
    write(overlay / "kustomization.yaml", "resources:\n- ../base\ncomponents:\n- ../components/kv\npatches:\n"
                                          "- path: patch.yaml\n")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert (entry.deployment.file, entry.deployment.document["model"]) == (str(own), {"name": "m2"})
    assert "kv_transfer_config" not in entry.deployment.document  # the strategic merge replaced the args list


def test_a_components_patch_file_is_read_where_the_component_is_listed_also_through_another_component(tmp_path):
    # kubernetes-sigs/wg-serving (05a48e53) serving-catalog/core/deployment/components/lmcache/vllm: the
    # base Component's patch file (`metadata: {name: "*"}`, targeted at every Deployment) was a launch
    # of its own, `Deployment *`, beside the note that the Component is none; its local-cpu and
    # local-disk tiers are Components listing it, and an overlay listing a tier got nothing (survey 22g).
    write(tmp_path / "base" / "kustomization.yaml", "resources: [deploy.yaml]\n")
    write(tmp_path / "base" / "deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
          "  template:\n    spec:\n      containers:\n      - name: inference-server\n"
          "        image: vllm/vllm-openai:v0.30.0\n        args: [--model, m]\n")
    write(tmp_path / "comp" / "kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
          "patches:\n- path: p.yaml\n  target: {kind: Deployment}\n")
    write(tmp_path / "comp" / "p.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: \"*\"}\nspec:\n"
          "  template:\n    spec:\n      containers:\n      - name: inference-server\n"
          f"        args: [--model, m, --kv-transfer-config, '{LMCACHE}']\n")
    write(tmp_path / "tier" / "kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
          "components: [../comp]\n")
    write(tmp_path / "overlay" / "kustomization.yaml", "resources: [../base]\ncomponents: [../tier]\n")
    report = audit([str(tmp_path)])
    launches = {Path(e.deployment.file).relative_to(tmp_path).as_posix(): e for e in report.entries}
    assert sorted(launches) == ["base/deploy.yaml", "overlay/kustomization.yaml"]
    overlay = launches["overlay/kustomization.yaml"]
    # The targeted patch takes the object's name, as kustomize gives it: not `*`.
    assert (overlay.deployment.name, overlay.decision["outcome"], overlay.decision["vllm"]["release"]) == (
        "web/inference-server", "disabled", "0.30.0")
    assert [Path(os.path.normpath(f)).relative_to(tmp_path).as_posix() for f in overlay.deployment.chain] == [
        "overlay/kustomization.yaml", "base/deploy.yaml", "comp/p.yaml"]
    assert [(Path(n.file).relative_to(tmp_path).as_posix(), n.message) for n in report.notes] == [
        ("comp/kustomization.yaml", "a kustomize Component: its patches apply where a kustomization lists it in "
                                    "`components:`, and are read there; it is no launch on its own"),
        ("comp/p.yaml", f"a patch of the kustomize Component `{tmp_path / 'comp' / 'kustomization.yaml'}`: it applies "
                        "where a kustomization lists the Component in `components:`, and is read there; it is no "
                        "launch on its own")]
    # A Component that lists itself, through another, adds its patches once.
    write(tmp_path / "comp" / "kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
          "components: [../tier]\npatches:\n- path: p.yaml\n  target: {kind: Deployment}\n")
    again = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert [e.decision["outcome"] for e in again] == ["disabled"]


def test_a_pin_a_containers_script_installs_is_its_release_over_the_image(tmp_path):
    # `pip install vllm==X && vllm serve ...` in a container's `sh -c` runs X, as the shell reader says
    # of a container shell (`docker run IMAGE sh -c ...`): the image's release, or the default where the
    # image names none, decided it instead (survey 22h).
    def decided(image: str) -> tuple[str, str]:
        write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n"
              f"  - name: vllm\n    image: {image}\n    command: [/bin/sh, -c]\n"
              "    args: [\"pip install vllm==0.20.1 && vllm serve m --kv-transfer-config "
              "'{\\\"kv_connector\\\":\\\"NixlConnector\\\",\\\"kv_role\\\":\\\"kv_both\\\"}'\"]\n")
        (entry,) = audit([str(tmp_path / "pod.yaml")]).entries
        return entry.decision["outcome"], entry.decision["vllm"]["source"]
    # 0.20.1 turns HMA off for any connector; 0.33.0 keeps it on for NixlConnector.
    assert decided("python:3.11") == ("disabled", "pip pin vllm==0.20.1 at line 6")
    assert decided("vllm/vllm-openai:v0.33.0") == ("disabled", "pip pin vllm==0.20.1 at line 6")


def test_an_overlay_of_a_base_by_url_is_an_unresolved_launch_not_silence(tmp_path):
    # accelerated-platforms' llm-d overlays patch the args of a base in llm-d's repository
    # (`resources: - https://github.com/llm-d/llm-d//guides/...`): 39 launches were dropped
    # without a word, as the patch's container has neither image nor command.
    overlay = tmp_path / "overlay"
    write(overlay / "kustomization.yaml", "resources:\n- https://github.com/llm-d/llm-d//guides/base?ref=main\n"
                                          "patches:\n- path: patch-vllm-args.yaml\n")
    write(overlay / "patch-vllm-args.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: decode}\nspec:\n"
                                            "  template:\n    spec:\n      containers:\n      - name: modelserver\n"
                                            "        args: [--model=gs://bucket/m, --tensor-parallel-size=8]\n")
    (entry,) = audit([str(overlay)]).entries
    assert (entry.deployment.line, entry.decision["outcome"]) == (8, "error")
    assert entry.decision["errors"][0]["message"] == (
        "line 8: Deployment decode, container modelserver: the patch gives no `command`; kustomize takes it from the "
        "base (https://github.com/llm-d/llm-d//guides/base?ref=main), which is not in the audited paths")
    # Most of them list it through a base of their own, `../base`, which the audit reads: the message
    # named that one, "not in the audited paths", and its hint could not be followed (survey 23c).
    write(tmp_path / "base" / "kustomization.yaml", "resources:\n- https://github.com/llm-d/llm-d//guides/base?ref=main\n")
    write(overlay / "kustomization.yaml", "resources:\n- ../base\npatches:\n- path: patch-vllm-args.yaml\n")
    (entry,) = audit([str(tmp_path)]).entries
    assert entry.decision["errors"][0]["message"] == (
        "line 8: Deployment decode, container modelserver: the patch gives no `command`; kustomize takes it from the "
        f"base (https://github.com/llm-d/llm-d//guides/base?ref=main, listed by {tmp_path}/base/kustomization.yaml), "
        "which is not in the audited paths")


def test_env_from_a_configmap_of_the_same_manifest_is_read(tmp_path):
    # `valueFrom` and `envFrom` were values not known ("which this file does not set") even where
    # the ConfigMap is in the same manifest; a value from elsewhere now says where it comes from.
    manifest = write(tmp_path / "m.yaml", """\
apiVersion: v1
kind: ConfigMap
metadata: {name: runtime}
data:
  KV_TRANSFER_CONFIG: '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
      - name: by-key
        image: vllm/vllm-openai:v0.33.0
        command: ["vllm", "serve", "m", "--kv-transfer-config=$(KV_TRANSFER_CONFIG)"]
        env:
        - name: KV_TRANSFER_CONFIG
          valueFrom: {configMapKeyRef: {name: runtime, key: KV_TRANSFER_CONFIG}}
      - name: all-keys
        image: vllm/vllm-openai:v0.33.0
        command: ["vllm", "serve", "m", "--kv-transfer-config=$(KV_TRANSFER_CONFIG)"]
        envFrom:
        - configMapRef: {name: runtime}
      - name: elsewhere
        image: vllm/vllm-openai:v0.33.0
        command: ["vllm", "serve", "m", "--kv-transfer-config=$(KV)"]
        env:
        - name: KV
          valueFrom: {secretKeyRef: {name: s, key: kv}}
""")
    by_key, all_keys, elsewhere = audit([str(manifest)]).entries
    assert [e.decision["outcome"] for e in (by_key, all_keys)] == ["disabled", "disabled"]
    assert elsewhere.decision["errors"][0]["message"] == (
        "line 25: `--kv-transfer-config` takes its value from `$(KV)` (which comes from a Secret)")


def test_a_configmap_generators_env_file_gives_the_overlays_env(tmp_path):
    # GoogleCloudPlatform/accelerated-platforms' cache-offloading overlays pass
    # `--kv-transfer-config=$(KV_TRANSFER_CONFIG)` from ConfigMap `runtime`, which the overlay's
    # configMapGenerator makes from runtime.env: 13 launches were source.unresolved errors.
    server = """\
        command: ["vllm", "serve", "m", "--kv-transfer-config=$(KV_TRANSFER_CONFIG)", "--disable-hybrid-kv-cache-manager"]
        env:
        - name: KV_TRANSFER_CONFIG
          valueFrom: {configMapKeyRef: {name: runtime, key: KV_TRANSFER_CONFIG}}
"""
    _overlay(tmp_path, {"patch-resources.yaml": _RESOURCES_PATCH,
                        "runtime.env": '# the KV cache goes to CPU memory\n'
                                       'KV_TRANSFER_CONFIG={"kv_connector":"OffloadingConnector","kv_role":"kv_both"}\n'},
             "resources:\n- ../base\nconfigMapGenerator:\n- name: runtime\n  envs:\n  - runtime.env\npatches:\n"
             "- path: patch-resources.yaml\n", server=server)
    (entry,) = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("disabled", [])
    assert json.loads(entry.deployment.document["kv_transfer_config"])["kv_connector"] == "OffloadingConnector"


def test_a_broken_inline_patch_is_one_problem_of_the_kustomization_at_its_entry(tmp_path):
    # Found by reading malformed kustomizations: the parse problem had no file or line, and a patch
    # file of the same kustomization reported it again as its own. A JSON6902 patch with no
    # target names no object: kustomize refuses it, and it is no "base not in the audited paths".
    overlay = tmp_path / "overlay"
    write(overlay / "kustomization.yaml", """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../base]
patches:
- path: p.yaml
- patch: "{{ broken"
  target: {kind: Deployment}
- patch: "- {op: add, path: /spec/template/spec/containers/0/args, value: [--x]}"
  target: not-a-mapping
""")
    write(overlay / "p.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\n")
    report = audit([str(overlay)])
    assert [(Path(p.file).name, p.line, p.code) for f in report.files for p in f.problems] == [
        ("kustomization.yaml", 6, "input.parse")]


def test_a_kustomization_without_apiversion_and_kind_is_read_as_kustomize_reads_it(tmp_path):
    # kustomize takes both as given when a kustomization.yaml leaves them out (many do): its inline
    # patches were lost, the file skipped as "not a deployment document".
    overlay = _overlay(tmp_path, {}, "resources:\n- ../base\npatches:\n- target: {kind: Deployment, name: vllm}\n"
                                     "  patch: |\n    - op: add\n      path: /spec/template/spec/containers/0/args/-\n"
                                     "      value: --no-disable-hybrid-kv-cache-manager\n")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert (Path(entry.deployment.file).name, entry.deployment.line, entry.decision["outcome"]) == (
        "kustomization.yaml", 8, "error")


def test_an_inline_strategic_merge_patch_is_a_launch_of_the_kustomization(tmp_path):
    # belonghim/vllm-optimizer (957ed8cd) openshift/vllm-dependency/dev/kustomization.yaml patches its
    # InferenceService's args inline (`- target: ...` then `patch: |`): the patched object was reported nowhere,
    # where the same patch in a `path:` file is a launch at that file (survey 40b).
    patch = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n  template:\n    spec:\n"
             "      containers:\n      - name: inference-server\n        args: [--model=m, --disable-hybrid-kv-cache-manager]\n")
    inline = "".join(f"      {line}\n" for line in patch.splitlines())
    _overlay(tmp_path, {}, f"resources:\n- ../base\npatches:\n- target: {{kind: Deployment, name: vllm}}\n"
                           f"  patch: |\n{inline}")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file]
    assert (Path(entry.deployment.file).name, entry.deployment.line, entry.decision["outcome"],
            entry.deployment.document["disable_hybrid_kv_cache_manager"]) == ("kustomization.yaml", 4, "disabled", True)


@pytest.mark.parametrize("inline", [True, False])
def test_a_patch_that_deletes_its_object_leaves_no_launch(tmp_path, inline):
    # opendatahub-io/odh-model-controller config/overlays/xks/kustomization.yaml deletes every Template of its
    # base with an inline `$patch: delete`: reading inline patches made each Template a launch of the overlay.
    delete = "$patch: delete\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: placeholder\n"
    if inline:
        body = "".join(f"    {line}\n" for line in delete.splitlines())
        _overlay(tmp_path, {}, f"resources:\n- ../base\npatches:\n- target: {{kind: Deployment}}\n  patch: |-\n{body}")
    else:
        _overlay(tmp_path, {"delete.yaml": delete.replace("placeholder", "vllm")},
                 "resources:\n- ../base\npatches:\n- path: delete.yaml\n")
    assert [e for e in audit([str(tmp_path)]).entries if "/overlay/" in e.deployment.file] == []


RAY_SERVICE = """apiVersion: ray.io/v1
kind: RayService
metadata:
  name: ray-vllm{annotations}
spec:
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {{dashboard-host: 0.0.0.0}}
      template:
        spec:
          containers:
            - name: ray-head
              image: vllm/vllm-openai:v0.22.0{head}
    workerGroupSpecs:
      - groupName: gpu
        replicas: 1
        template:
          spec:
            containers:
              - name: ray-worker
                image: vllm/vllm-openai:v0.22.0
              - name: sidecar
                image: vllm/vllm-openai:v0.22.0
                args: [--model, m]
"""


def test_kuberay_gives_the_ray_container_its_own_command(tmp_path):
    def launches(path_name, text):
        return read_source(write(tmp_path / path_name, text)).deployments

    # A RayService whose head and worker run vLLM's image with no command (the shape of
    # awslabs/data-on-eks's ray-batch-inference RayService, on a vLLM image): both containers were
    # launches of the image's `vllm serve`. KubeRay (ray-operator controllers/ray/common/pod.go
    # BuildPod) makes the Ray container, the first, run `bash -lc "<command and args> && ulimit ...;
    # ray start ..."` unless its command says `ray start` or the object is annotated
    # ray.io/overwrite-container-cmd: the image's entrypoint never runs there. Other containers run as written.
    (sidecar,) = launches("ray.yaml", RAY_SERVICE.format(annotations="", head=""))
    assert (sidecar.container, sidecar.role, sidecar.document["model"]) == ("sidecar", "worker", {"name": "m"})
    # Args alone are the script bash runs: here a vLLM server.
    head, _ = launches("args.yaml", RAY_SERVICE.format(
        annotations="", head="\n              args: [vllm serve m2 --port 8000]"))
    assert (head.container, head.role, head.document["model"]) == ("ray-head", "leader", {"name": "m2"})
    # The annotation keeps each container as written: the image's entrypoint runs.
    kept = launches("kept.yaml", RAY_SERVICE.format(
        annotations="\n  annotations: {ray.io/overwrite-container-cmd: \"true\"}", head=""))
    assert [d.container for d in kept] == ["ray-head", "ray-worker", "sidecar"]


def test_a_rayjobs_entrypoint_runs_in_its_head_container(tmp_path):
    # vllm-project/aibrix (e3e10f9) development/tutorials/distributed/rayjob.yaml: `entrypoint: vllm serve
    # facebook/opt-13b ...` on a head of aibrix/vllm-openai:v0.5.2-distributed. KubeRay's submitter runs
    # `ray job submit -- ENTRYPOINT`, a shell command on the head; the file gave nothing, not a note (survey 25d).
    job = write(tmp_path / "rayjob.yaml", f"""apiVersion: ray.io/v1
kind: RayJob
metadata: {{name: vllm-server}}
spec:
  entrypoint: >-
    vllm serve facebook/opt-13b --kv-transfer-config '{LMCACHE}'
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers:
          - name: ray-head
            image: vllm/vllm-openai:v0.22.0
            env: [{{name: VLLM_USE_V1, value: "1"}}]
""")
    (entry,) = audit([str(job)]).entries
    d = entry.deployment
    assert (d.line, d.container, d.release.version, ktc(d)["kv_connector"], d.document["env"]) == (
        5, "entrypoint", "0.22.0", "LMCacheConnectorV1", {"VLLM_USE_V1": "1"})
    assert entry.decision["outcome"] == "disabled"
    # One on a cluster it does not describe (`clusterSelector`) runs there: its release is not known.
    elsewhere = write(tmp_path / "selector.yaml", "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec:\n"
                      "  entrypoint: vllm serve m\n  clusterSelector: {ray.io/cluster: shared}\n")
    (entry,) = audit([str(elsewhere)]).entries
    assert (entry.deployment.line, entry.deployment.release) == (5, None)


def test_a_container_given_only_vllms_options_by_an_image_not_known_to_run_vllm_is_noted(tmp_path):
    # rh-aiservices-bu/llm-on-openshift (2b63898) llm-servers/vllm/hpu/gitops/deployment.yaml: the image
    # (built by the repository's Containerfile, whose ENTRYPOINT runs vLLM's api_server) names no vLLM, and
    # the container gives only vLLM's options: it was passed over without a word.
    # llm-d's inference simulator (kubernetes-sigs/gateway-api-inference-extension config/manifests/vllm/
    # sim-deployment.yaml) takes vLLM's options and runs no vLLM: no note, and its former name, which
    # holds `vllm`, is not taken to run vLLM's server either.
    path = write(tmp_path / "deployment.yaml", """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: server
          image: intel/redhat-ai-services:llm-on-openshift_ubi9.4_1.20.0
          args: [--model=mistralai/Mistral-7B-Instruct-v0.3, --download-dir, /models-cache, --device, hpu,
                 --max-model-len, "6144"]
        - name: tgi
          image: ghcr.io/huggingface/text-generation-inference:2.0
          args: [--model-id, m, --max-input-length, "1024"]
        - name: router
          image: example.com/router:1
          args: [--model, m, --upstream, http://x]
        - name: vllm-sim
          image: ghcr.io/llm-d/llm-d-inference-sim:v0.8.2
          args: [--model, m, --port, "8000", --max-loras, "2"]
        - name: old-sim
          image: ghcr.io/llm-d/vllm-sim:0.1.0
          args: [--model, m, --port, "8000"]
        - name: placeholder-sim
          # (llm-d/llm-d-inference-sim's deploy/deployments.yaml, rendered by envsubst: survey 22f)
          image: ${VLLM_SIMULATOR_IMAGE}
          args: [--model, m, --port, "8000"]
""")
    found = read_source(path)
    assert found.deployments == ()
    assert [(n.code, n.line, n.message) for n in found.notes] == [(
        "source.unrecognized", 8, "Deployment vllm, container server: the image "
        "`intel/redhat-ai-services:llm-on-openshift_ubi9.4_1.20.0` is given only arguments, each an option of vLLM's "
        "server (`--model`, `--download-dir`, `--device`, `--max-model-len`), but it is not known to run vLLM: not "
        "read as a launch")]


def test_a_container_with_vllm_spyres_settings_runs_on_ibm_spyre(tmp_path):
    # opendatahub-io/odh-model-controller (57b43aa) config/runtimes/vllm/vllm-spyre-s390x-template.yaml
    # (and its x86 and ppc64le twins, each in three overlays): vLLM through the vllm-spyre plugin, whose
    # SpyrePlatform inherits support_hybrid_kv_cache() false, so vLLM turns HMA off. They were decided
    # as CUDA, `enabled`; the container's environment holds vllm-spyre's settings (VLLM_SPYRE_*).
    write(tmp_path / "spyre.yaml", """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-spyre-s390x-runtime
spec:
  containers:
    - image: $(vllm-spyre-image)
      name: kserve-container
      command:
        - /bin/bash
        - -c
        - source /etc/profile.d/ibm-aiu-setup.sh && exec python3 -m vllm.entrypoints.openai.api_server "$@"
        - --
      args: ['--model=/mnt/models', '--port=8000']
      env:
        - {name: FLEX_DEVICE, value: VF}
        - {name: VLLM_SPYRE_USE_CB, value: "1"}
""")
    # `docker run -e` says it as well; a directive's platform wins over either.
    write(tmp_path / "run.sh", "docker run -e VLLM_SPYRE_USE_CB=1 vllm/vllm-openai:v0.20.0 m\n"
                               "# hma-policy: {platform: {name: cuda}}\n"
                               "docker run -e VLLM_SPYRE_USE_CB=1 vllm/vllm-openai:v0.20.0 m\n")
    entries = {(Path(e.deployment.file).name, e.deployment.line): e for e in audit([str(tmp_path)]).entries}
    served = entries[("spyre.yaml", 8)]
    assert (served.deployment.document["platform"], dict(served.deployment.origins)["platform"]) == (
        {"name": "spyre"}, "env VLLM_SPYRE_USE_CB")
    assert (served.decision["outcome"], served.decision["reasons"]) == ("disabled", [
        "IBM Spyre's platform (the vllm-spyre plugin) does not support the hybrid KV cache manager: SpyrePlatform "
        "defines no support_hybrid_kv_cache() and inherits the base Platform's false"])
    assert entries[("run.sh", 1)].decision["outcome"] == "disabled"
    assert entries[("run.sh", 3)].decision["outcome"] == "enabled"
    # Its ppc64le twin sets none of them, but its pods go to the Spyre scheduler.
    write(tmp_path / "ppc64le.yaml", """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: vllm-spyre-ppc64le-runtime}
spec:
  containers:
    - image: $(vllm-spyre-image)
      name: kserve-container
      command: [python3, -m, vllm.entrypoints.openai.api_server]
      args: ['--model=/mnt/models']
  schedulerName: spyre-scheduler
""")
    (scheduled,) = [e for e in audit([str(tmp_path / "ppc64le.yaml")]).entries]
    assert (scheduled.deployment.document["platform"], dict(scheduled.deployment.origins)["platform"],
            scheduled.decision["outcome"]) == ({"name": "spyre"}, "schedulerName spyre-scheduler", "disabled")


def test_aws_neuron_containers_for_vllm_run_on_neuron_at_the_release_their_tag_names(tmp_path):
    # rh-ai-quickstart/private-coding-assistant (7fc003ee) charts/pca-ai-serving/templates/
    # vllm-neuron-runtime-template.yaml: a ServingRuntime of AWS's Neuron container for vLLM
    # (public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04), decided
    # as CUDA 0.33.0, `enabled`. Its tag names vLLM 0.13.0 (aws-neuron/deep-learning-containers README.md);
    # NeuronPlatform defines no support_hybrid_kv_cache() (vllm-project/vllm-neuron a5ef7c88), so HMA is off.
    write(tmp_path / "neuron.yaml", """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-neuron-runtime
spec:
  containers:
    - name: kserve-container
      image: public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04
      command: [/bin/bash, -c, 'vllm serve --model="/mnt/models" --tensor-parallel-size="${TP_SIZE:-2}"']
      env:
        - {name: VLLM_NEURON_FRAMEWORK, value: neuronx-distributed-inference}
""")
    (entry,) = audit([str(tmp_path)]).entries
    image = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
    assert (entry.deployment.document["platform"], dict(entry.deployment.origins)["platform"]) == (
        {"name": "neuron"}, f"image {image}")
    assert (entry.decision["vllm"]["release"], entry.deployment.release.origin) == (
        "0.13.0", f"image tag {image} (AWS's Neuron build of vLLM 0.13.0)")
    assert (entry.decision["outcome"], entry.decision["reasons"]) == ("disabled", [
        "AWS Neuron's platform (vLLM's own before 0.10.2, the vllm-neuron plugin after) does not support the hybrid "
        "KV cache manager: NeuronPlatform defines no support_hybrid_kv_cache() and inherits the base Platform's false "
        "(before 0.10.2 vLLM runs it on CUDA and ROCm only)"])
    # The tag of vLLM 0.21.0 with vllm-neuron 1.0.0, in Amazon's own registry.
    assert from_image(
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-inference-vllm-neuronx:0.21.0.1.0.0-neuronx-py313-sdk2.31.1"
        "-ubuntu24.04").version == "0.21.0"



def test_vllm_tpu_images_run_on_tpu_at_the_release_their_tag_names(tmp_path):
    # llm-d-incubation/llm-d-xks-gke helm-configs/pattern-overrides/pattern1-tpu-overrides.yaml (survey 30d)
    # serves vllm/vllm-tpu:v0.11.1 on GKE's TPUs: decided as CUDA 0.33.0, `enabled`. vLLM's TPU image runs
    # tpu-inference's TpuPlatform, which defines no support_hybrid_kv_cache() before v0.12.0
    # (vllm-project/tpu-inference cfc76100 added it), so HMA is off in 0.11.1 and on from 0.12.0.
    def deployment(name: str, image: str, more: str = "") -> str:
        return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  template:\n    spec:\n"
                f"      containers:\n        - name: vllm\n          image: {image}\n"
                f"          command: [vllm, serve, google/gemma-3-27b-it]\n{more}")
    write(tmp_path / "tpu.yaml", "---\n".join((
        deployment("tpu", "vllm/vllm-tpu:v0.11.1"), deployment("nightly", "vllm/vllm-tpu:nightly"),
        deployment("resource", "vllm/vllm-openai:v0.11.0", "          resources: {limits: {google.com/tpu: 4}}\n"))))
    tagged, nightly, resource = audit([str(tmp_path)]).entries
    assert (tagged.deployment.document["platform"], dict(tagged.deployment.origins)["platform"]) == (
        {"name": "tpu"}, "image vllm/vllm-tpu:v0.11.1")
    assert (tagged.decision["vllm"]["release"], tagged.deployment.release.origin) == (
        "0.11.1", "image tag vllm/vllm-tpu:v0.11.1 (vLLM 0.11.1 with tpu-inference's TPU platform)")
    assert (tagged.decision["outcome"], tagged.decision["reasons"]) == ("disabled", [
        "the TPU platform does not support the hybrid KV cache manager before vLLM 0.12.0 (vLLM's own TpuPlatform, "
        "tpu_commons' and tpu-inference's before v0.12.0 define no support_hybrid_kv_cache() and inherit the base "
        "Platform's false)"])
    # A nightly tag names no release: the default one, where tpu-inference supports HMA.
    assert (nightly.deployment.document["platform"], nightly.decision["vllm"]["release"], nightly.decision["outcome"],
            nightly.deployment.release.origin) == (
        {"name": "tpu"}, "0.33.0", "enabled", "image tag vllm/vllm-tpu:nightly: no release in the tag")
    # GKE's TPU device plugin resource places the container on TPUs whatever its image.
    assert (resource.deployment.document["platform"], dict(resource.deployment.origins)["platform"],
            resource.decision["outcome"]) == ({"name": "tpu"}, "resource google.com/tpu", "disabled")

def test_an_inference_service_runs_its_serving_runtime_with_its_model_args_appended(tmp_path):
    # KServe's v1beta1 InferenceService serves its model with a ServingRuntime: the controller merges the
    # model's container fields into the runtime's `kserve-container` and appends the model's args to the
    # runtime's (kserve/kserve aaac4e29 utils.MergeRuntimeContainers: "Concatenate args rather than
    # replacing"), renders `{{.Name}}` with the service's metadata, and `runtimeVersion` replaces the
    # image's tag. The service's `--kv-transfer-config` was a mention with no launch; the runtime alone
    # was decided `enabled` (rh-ai-quickstart/vllm-tool-calling 5b712dec: six such pairs).
    write(tmp_path / "runtime.yaml", """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  supportedModelFormats:
    - {name: vLLM, autoSelect: true}
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.20.0
      command: [python, -m, vllm.entrypoints.openai.api_server]
      args: [--port=8080, --model=/mnt/models, '--served-model-name={{.Name}}']
      env:
        - {name: HF_HOME, value: /tmp/hf}
        - {name: VLLM_USE_V1, value: "1"}
""")
    write(tmp_path / "isvc.yaml", f"""apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    model:
      runtime: vllm-runtime
      runtimeVersion: v0.22.0
      modelFormat: {{name: vLLM}}
      args: [--kv-transfer-config, '{LMCACHE}']
      env:
        - {{name: HF_HOME, value: /models}}
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: auto
spec:
  predictor:
    model:
      modelFormat: {{name: vllm}}
      storageUri: hf://m
""")
    entries = {(Path(e.deployment.file).name, e.deployment.name): e for e in audit([str(tmp_path)]).entries}
    served = entries[("isvc.yaml", "llama/kserve-container")]
    # (placed at its `model:` line, not at the first key under it: survey 34d)
    assert (served.deployment.line, served.deployment.chain) == (7, (str(tmp_path / "isvc.yaml"), str(tmp_path / "runtime.yaml")))
    assert (served.decision["outcome"], served.decision["vllm"]["release"]) == ("disabled", "0.22.0")
    assert json.loads(served.deployment.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    assert served.deployment.document["env"] == {"VLLM_USE_V1": "1"}
    auto = entries[("isvc.yaml", "auto/kserve-container")]
    assert (auto.decision["outcome"], auto.decision["vllm"]["release"]) == ("enabled", "0.20.0")
    assert entries[("runtime.yaml", "vllm-runtime/kserve-container")].decision["outcome"] == "enabled"


def test_the_items_of_a_list_are_read_as_the_file_s_objects(tmp_path):
    # highopes/pd-disaggregation-demo (2dc2f87) pd-disaggregation/phase2/evidence/runs/.../dgd-all.yaml, `kubectl get
    # -o yaml` output: a DynamoGraphDeployment in a `kind: List` was read as a plain pod (no role, at its container's
    # line), and a v1alpha1 one gave no launch at all (survey 32a).
    found = read_source(write(tmp_path / "dgd-all.yaml", (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: nvidia.com/v1alpha1\n  kind: DynamoGraphDeployment\n"
        "  metadata: {name: pd}\n  spec:\n    services:\n      VllmPrefillWorker:\n        componentType: worker\n"
        "        subComponentType: prefill\n        extraPodSpec:\n          mainContainer:\n"
        "            image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1\n            command: [python3, -m, dynamo.vllm]\n"
        "            args: [--model, Qwen/Qwen3-8B, --disaggregation-mode, prefill, --kv-transfer-config, "
        "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n")))
    (d,) = found.deployments
    assert (found.format, d.role, d.line, d.release.version, ktc(d)["kv_connector"]) == (
        "dynamo", "prefill", 9, "0.16.0", "NixlConnector")


RUNTIME_NAMED = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: nm-vllm}
spec:
  supportedModelFormats: [{name: huggingface}]
  containers:
    - name: kserve-container
      image: IMAGE
"""


@pytest.mark.parametrize("first", ["a", "z"])
def test_an_inference_service_runs_the_runtime_of_its_name_nearest_to_it(tmp_path, first):
    # robertgshaw2-neuralmagic/vllm-k8s (d811b74): five examples each keep a ServingRuntime `nm-vllm` beside the
    # InferenceService that runs it; vllm-kserve-pvc/'s service was decided with vllm-kserve/'s runtime (v0.4.2,
    # `disabled`), the first walked, where its own runs vLLM's image of another release (survey 32d).
    write(tmp_path / first / "rt.yml", RUNTIME_NAMED.replace("IMAGE", "vllm/vllm-openai:v0.4.2"))
    write(tmp_path / "b" / "serving-runtime.yml", RUNTIME_NAMED.replace("IMAGE", "vllm/vllm-openai:v0.10.0"))
    write(tmp_path / "b" / "isvc.yml", "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
                                       "metadata: {name: tinyllama}\nspec:\n  predictor:\n    model: {runtime: nm-vllm, "
                                       "modelFormat: {name: huggingface}, args: [--model, m]}\n")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.file.endswith("isvc.yml")]
    assert (entry.decision["vllm"]["release"], Path(entry.deployment.chain[1]).parent.name) == ("0.10.0", "b")


def test_an_inference_service_whose_runtime_is_not_audited_is_a_problem_where_it_looks_like_vllm(tmp_path):
    write(tmp_path / "isvc.yaml", f"""apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {{name: llama}}
spec:
  predictor:
    model:
      runtime: vllm-cuda-runtime
      modelFormat: {{name: vLLM}}
      args: [--kv-transfer-config, '{LMCACHE}']
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {{name: iris}}
spec:
  predictor:
    model: {{modelFormat: {{name: sklearn}}, storageUri: gs://kfserving-examples/models/sklearn/1.0/model}}
""")
    found = read_source(tmp_path / "isvc.yaml")
    assert (found.deployments, [(p.code, p.line, p.message) for p in found.problems]) == ((), [(
        "source.unresolved", 6, "InferenceService llama: the ServingRuntime `vllm-cuda-runtime` it runs with is not "
                                "in the audited paths")])


def test_the_accelerator_a_container_asks_for_names_its_platform(tmp_path):
    # rh-ai-quickstart/vllm-tool-calling (5b712dec) llama3.2-1b/hpu/inferenceservice.yaml asks for
    # `habana.ai/gaudi` (vLLM through vllm-gaudi), and AWS's Neuron pods for `aws.amazon.com/neuron`
    # (the Neuron device plugin): both were decided as CUDA, where nothing else named the platform.
    pods = [("neuron", "limits: {aws.amazon.com/neuron: 1}"), ("gaudi", "requests: {habana.ai/gaudi: '1'}")]
    write(tmp_path / "pods.yaml", "---\n".join(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n    - name: vllm\n"
        f"      image: myorg/vllm-{name}:1\n      command: [vllm, serve, m]\n      resources: {{{asked}}}\n"
        for name, asked in pods))
    neuron, gaudi = audit([str(tmp_path)]).entries
    assert [(e.deployment.document["platform"], dict(e.deployment.origins)["platform"]) for e in (neuron, gaudi)] == [
        ({"name": "neuron"}, "resource aws.amazon.com/neuron"), ({"name": "hpu"}, "resource habana.ai/gaudi")]
    assert (neuron.decision["outcome"], gaudi.decision["outcome"]) == ("disabled", "enabled")  # (Gaudi from 0.14.1)


def test_qualcomm_cloud_ai_and_enflame_gcu_run_without_the_hybrid_kv_cache_manager(tmp_path):
    # qualcomm/vllm-qaic (dc7351f5): QaicPlatform defines no support_hybrid_kv_cache(), on main (vLLM 0.23.0)
    # and its 0.15.0 branch; its pods ask for `qualcomm.com/qaic`, its device variable is QAIC_VISIBLE_DEVICES.
    # EnflameTechnology/vllm-gcu (7b5aaca9): GCUPlatform is neither CUDA nor ROCm and defines none (vLLM 0.9.2);
    # `--device gcu`, TOPS_VISIBLE_DEVICES. Each launch was decided as CUDA, `enabled` (surveys 39a, 39b).
    write(tmp_path / "qaic.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n"
                                  "    - name: vllm\n      image: vllm/vllm-openai:v0.23.0\n      args: [--model, m]\n"
                                  "      resources: {limits: {qualcomm.com/qaic: 1}}\n")
    write(tmp_path / "gcu.sh", "pip install vllm==0.9.2\nTOPS_VISIBLE_DEVICES=0 vllm serve m\nvllm serve m --device gcu\n")
    write(tmp_path / "qaic.py", "import os\nos.environ['QAIC_VISIBLE_DEVICES'] = '0'\nfrom vllm import LLM\nllm = LLM(model='m')\n")
    entries = {(Path(e.deployment.file).name, e.deployment.line): e for e in audit([str(tmp_path)]).entries}
    assert {key: (e.deployment.document["platform"]["name"], dict(e.deployment.origins)["platform"], e.decision["outcome"])
            for key, e in entries.items()} == {
        ("qaic.yaml", 6): ("qaic", "resource qualcomm.com/qaic", "disabled"),
        ("gcu.sh", 2): ("gcu", "env TOPS_VISIBLE_DEVICES", "disabled"),
        ("gcu.sh", 3): ("gcu", "line 3: --device gcu", "disabled"),
        ("qaic.py", 4): ("qaic", "env QAIC_VISIBLE_DEVICES", "disabled")}
    assert entries[("qaic.yaml", 6)].decision["reasons"][0] == (
        "Qualcomm Cloud AI's platform (the vllm-qaic plugin) does not support the hybrid KV cache manager: QaicPlatform "
        "defines no support_hybrid_kv_cache() and inherits the base Platform's false")


def test_openvino_runs_without_the_hybrid_kv_cache_manager(tmp_path):
    # belonghim/vllm-optimizer (957ed8cd) openshift/vllm-dependency/base/vllm-runtime.yaml: a ServingRuntime of an
    # OpenVINO build of vLLM (`VLLM_OPENVINO_DEVICE=CPU`): decided as CUDA, `enabled`. vllm-project/vllm-openvino's
    # OpenVinoPlatform subclasses the base Platform and defines no support_hybrid_kv_cache() (survey 40b).
    write(tmp_path / "ov.yaml", "apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: ov}\n"
                                "spec:\n  containers:\n    - name: kserve-container\n"
                                "      image: quay.io/joopark/vllm-openvino:latest\n"
                                "      command: [python, -m, vllm.entrypoints.openai.api_server]\n"
                                "      args: [--model=/mnt/models]\n"
                                "      env: [{name: VLLM_OPENVINO_DEVICE, value: CPU}]\n")
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.deployment.document["platform"], dict(entry.deployment.origins)["platform"], entry.decision["outcome"],
            entry.decision["reasons"][0]) == (
        {"name": "openvino"}, "env VLLM_OPENVINO_DEVICE", "disabled",
        "OpenVINO's platform (the vllm-openvino plugin) does not support the hybrid KV cache manager: OpenVinoPlatform "
        "defines no support_hybrid_kv_cache() and inherits the base Platform's false")


@pytest.mark.parametrize(("resource", "env", "platform", "origin"), [
    ("mthreads.com/vgpu", None, "musa", "resource mthreads.com/vgpu"),
    ("cambricon.com/mlu", None, "mlu", "resource cambricon.com/mlu"),
    ("metax-tech.com/gpu", None, "maca", "resource metax-tech.com/gpu"),
    ("kunlunxin.com/xpu", None, "kunlun", "resource kunlunxin.com/xpu"),
    ("nvidia.com/gpu", "MLU_VISIBLE_DEVICES", "mlu", "env MLU_VISIBLE_DEVICES"),
    ("nvidia.com/gpu", "MUSA_VISIBLE_DEVICES", "musa", "env MUSA_VISIBLE_DEVICES"),
])
def test_the_platforms_of_kunlun_metax_cambricon_and_moore_threads_are_read(tmp_path, resource, env, platform, origin):
    # baidu/vLLM-Kunlun, MetaX-MACA/vLLM-metax, Cambricon/vllm-mlu and MooreThreads/vllm-musa (survey 41a):
    # out-of-tree platforms whose is_cuda() is false. vLLM before 0.10.2 runs the hybrid KV cache manager on
    # CUDA and ROCm only, and HiSparse needs CUDA; their launches were read as CUDA. Each plugin's devices
    # variable (device_control_env_var) or HAMi's resource for the device names the platform.
    environment = f"      env: [{{name: {env}, value: '0'}}]\n" if env else ""
    write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                 "    - name: vllm\n      image: vllm/vllm-openai:v0.10.1.1\n      args: [--model, m]\n"
                                 f"      resources: {{limits: {{{resource}: 1}}}}\n" + environment)
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.deployment.document["platform"], dict(entry.deployment.origins)["platform"],
            entry.decision["outcome"], entry.decision["reasons"][1:]) == (
        {"name": platform}, origin, "disabled", ["vLLM before 0.10.2 runs the hybrid KV cache manager only on CUDA and ROCm"])


def test_a_kthena_model_serving_on_aibrix_s_vllm_image_runs_the_release_its_tag_starts_with(tmp_path):
    # volcano-sh/kthena (3cc0572) examples/model-serving/gpu-pd-disaggregation.yaml: prefill and decode
    # on ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2, AIBrix's build on vLLM
    # v0.10.0, with a NixlConnector. They were decided as 0.33.0 (`enabled`, the release not known);
    # vLLM 0.10.0 turns HMA off for any KV transfer config.
    manifest = write(tmp_path / "gpu-pd-disaggregation.yaml", """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata:
  name: vllm-qwen-06b
spec:
  template:
    roles:
      - name: prefill
        entryTemplate:
          spec:
            containers:
              - name: prefill
                image: ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2
                command: ["sh", "-c"]
                args:
                  - |
                    python3 -m vllm.entrypoints.openai.api_server --model /models/Qwen3-0.6B \\
                    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
""")
    (entry,) = audit([str(manifest)]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]) == ("disabled", {
        "release": "0.10.0", "source": "image tag ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2 "
                                       "(AIBrix's build on vllm/vllm-openai:v0.10.0)"})


def test_a_script_a_config_map_holds_is_read_at_its_lines(tmp_path):
    # awslabs/ai-on-eks (41a979ee) vllm-ray-gpu-deepseek/ray-vllm-deepseek.yml: a ConfigMap's
    # `vllm_serve.py: |` builds AsyncEngineArgs, and the RayService mounts it and serves
    # `import_path: vllm_serve:deployment`. The file gave no launch and no note.
    manifest = write(tmp_path / "ray-vllm.yml", f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: vllm-serve-script
data:
  README: |
    vllm serve is started by vllm_serve.py
  vllm_serve.py: |
    from vllm.engine.arg_utils import AsyncEngineArgs

    engine_args = AsyncEngineArgs(
        model="deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        kv_transfer_config={LMCACHE})
  start.sh: |-
    #!/bin/bash
    exec vllm serve m --disable-hybrid-kv-cache-manager
  cleanup.sh: |
    if then fi
""")
    found = read_source(manifest)
    assert found.problems == ()  # (a script that never names vLLM is not read)
    python, shell = found.deployments
    assert (python.line, ktc(python)["kv_connector"], shell.line, shell.document["disable_hybrid_kv_cache_manager"]) == \
        (11, "LMCacheConnectorV1", 16, True)
    assert [e.decision["outcome"] for e in audit([str(manifest)]).entries] == ["disabled", "disabled"]


def test_a_config_map_script_a_container_runs_from_its_mount_is_read_with_that_container(tmp_path):
    # volcano-sh/kthena (3cc0572) examples/models/deepseek-v4-flash/modelserving.yaml: each role runs
    # `bash -c "cd /workspace && ./prefill.sh"`, the script a ConfigMap key mounted there (`subPath`);
    # the ModelServing names its namespace, the ConfigMap none. The scripts were read on their own, on
    # the default release and CUDA, the container's `MODEL_LOCATION` "not set" (survey 24b).
    def manifest(run: str, namespace: str = "default") -> Path:
        return write(tmp_path / "ms.yaml", f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: pd, namespace: {namespace}}}
spec:
  template:
    spec:
      containers:
      - name: prefill
        image: quay.io/ascend/vllm-ascend:v0.13.0rc3-a3
        command: [/bin/bash]
        args: ['-c', '{run}']
        env: [{{name: MODEL_LOCATION, value: /models/m}}]
        volumeMounts: [{{name: config, mountPath: /workspace/prefill.sh, subPath: prefill.sh}}]
      volumes: [{{name: config, configMap: {{name: pd-cm}}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: pd-cm}}
data:
  prefill.sh: |
    vllm serve $MODEL_LOCATION --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"kv_both"}}'
""")
    for run in ("cd /workspace && ./prefill.sh", "bash /workspace/prefill.sh", "cd /workspace; bash prefill.sh"):
        (entry,) = audit([str(manifest(run))]).entries
        d = entry.deployment
        assert (d.container, d.release.version, d.document["platform"], d.document["model"], d.notes) == (
            "prefill", "0.13.0", {"name": "npu"}, {"name": "/models/m"}, ()), run
        # 0.13.0 turns HMA off for NixlConnector; the default release, which keeps it on, said `enabled`.
        assert entry.decision["outcome"] == "disabled"
    # Where the folder is not known, the script is read on its own, as before.
    (entry,) = audit([str(manifest("cd $DIR && ./prefill.sh"))]).entries
    assert (entry.deployment.container, entry.deployment.line) == (None, 21)
    # A namespace other than the ConfigMap's is another ConfigMap.
    (entry,) = audit([str(manifest("cd /workspace && ./prefill.sh", namespace="other"))]).entries
    assert entry.deployment.container is None


def test_the_scripts_a_config_map_holds_are_read_within_a_bound_of_its_size(tmp_path):
    # Each script is read at its lines, the manifest's lines above it standing blank: a ConfigMap of
    # many small scripts would cost its lines squared. Past four times the file's size (and 64 KiB),
    # the rest are a source.limit problem, and the reading stays linear.
    def make(count: int) -> str:
        return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata:\n" + "".join(
            f"  s{i}.sh: |\n    vllm serve m{i}\n" for i in range(count))
    found = read_source(write(tmp_path / "many" / "scripts.yaml", make(1000)))
    assert [p.code for p in found.problems] == ["source.limit"] and 100 < len(found.deployments) < 1000
    assert linear_ratio(make, 1000, tmp_path, name="scripts.yaml") < 3.0


def test_a_construct_of_a_containers_script_is_placed_at_the_script_not_at_a_line_of_its_own(tmp_path):
    # opendatahub-io/odh-model-controller (57b43aa) vllm-multinode-template.yaml: the note named "the loop
    # at line 131", the container's line, where no loop is (its kustomize copies: "line 10", a patch
    # entry). A script a container runs is placed at the container; a construct in it is said to be there.
    write(tmp_path / "pod.yaml", """apiVersion: v1
kind: Pod
metadata: {name: w}
spec:
  containers:
  - name: worker
    image: vllm/vllm-openai:v0.11.0
    command:
    - bash
    - -c
    - |
      NODE_RANK=""
      for i in $(seq 15); do
        NODE_RANK=$(hostname | cut -d- -f2)
      done
      if [ -n "$LEADER" ]; then PORT=1; else PORT=2; fi
      exec vllm serve m --data-parallel-rank=${NODE_RANK} --port $PORT
""")
    (launch,) = read_source(tmp_path / "pod.yaml").deployments
    assert (launch.line, [n.message for n in launch.notes if n.code == "source.unresolved_unused"]) == (6, [
        "`--data-parallel-rank` takes its value from `$NODE_RANK` (which is set differently on the paths through "
        "the loop in the script at line 6); the decision does not read it",
        "`--port` takes its value from `$PORT` (which is set differently on the paths through `if` in the script "
        "at line 6); the decision does not read it"])
