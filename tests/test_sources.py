"""Finding deployments in files (engine/sources.py): every format, vLLM's own
argument handling, the problems a file can have, and that nothing in a file
is ever executed or imported."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.audit.sources import SourceLimits, read_source, source_format
from sourcefiles import NIXL, codes, ktc, linear_ratio, only, write


# -- formats ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, head, expected", [
    ("Dockerfile", b"", "dockerfile"), ("Containerfile", b"", "dockerfile"), ("Dockerfile.gpu", b"", "dockerfile"),
    ("serve.dockerfile", b"", "dockerfile"), ("run.sh", b"", "shell"), ("run.bash", b"", "shell"),
    ("start", b"#!/usr/bin/env bash\n", "shell"), ("start", b"#!/bin/sh -e\n", "shell"), ("start", b"#!/usr/bin/python3\n", None),
    ("a.json", b"", "json"), ("a.yaml", b"", "yaml"), ("a.YML", b"", "yaml"), ("notes.md", b"", None), ("model.bin", b"", None),
    # a screenshot of a Dockerfile (GoogleCloudPlatform/accelerated-platforms) is no Dockerfile; a template is one
    ("dockerfile.png", b"", None), ("Dockerfile.md", b"", None), ("Dockerfile.j2", b"", "dockerfile"),
    # a variant's Dockerfile (QwenLM/Qwen2.5-VL's `Dockerfile-2.5-cu121`: it was skipped, its launches unread,
    # survey 28e); a script or a document named after one is that
    ("Dockerfile-2.5-cu121", b"", "dockerfile"), ("Containerfile-cpu", b"", "dockerfile"),
    ("Dockerfile-build.sh", b"", "shell"), ("Dockerfile-notes.md", b"", None),
    # encrypted patches of a Dockerfile (FlagOpen/FlagScale, six source.binary problems: survey 37d)
    ("Dockerfile.cuda.patch.encrypted", b"", None), ("Dockerfile-innersource.npu.patch.encrypted", b"", None),
    ("Dockerfile.patch", b"", None),
    # a `.sh` whose shebang runs Python is Python (malaiwah/vllm-lmcache-cu128's check_sm_in_container.sh, whose
    # `print(...)` lines were six source.shell_syntax problems: survey 31b)
    ("check.sh", b"#!/usr/bin/env python3\nimport json\n", "python"), ("check.sh", b"#!python\n", "python"),
    ("run.sh", b"#!/usr/bin/env bash\n", "shell"),
])
def test_the_reader_is_chosen_by_name_or_shebang(name, head, expected):
    assert source_format(Path(name), head) == expected
    assert source_format(f"some/dir/{name}", head) == expected  # an audit passes strings


@pytest.mark.parametrize("name, shebang, found", [
    ("start", "#!/bin/bash", True), ("serve.slurm", "#!/bin/bash", True), ("job.sbatch", "#!/usr/bin/env bash", True),
    ("job.pbs", "#!/bin/sh", True), ("serve.slurm", "#!/usr/bin/env python3", False), ("notes.txt", "#!/bin/bash", False),
])
def test_a_script_named_without_a_suffix_or_as_a_batch_job_is_read_by_its_shebang(tmp_path, name, shebang, found):
    # The shebang was looked for in the first 256 bytes only when the file had no more
    # (a longer one was "larger than 256 bytes": skipped), and never in a Slurm or PBS
    # job script (open-r1's serve_r1_vllm.slurm, OLCF's launch*_lustre.sbatch).
    path = write(tmp_path / name, f"{shebang}\n#SBATCH --nodes=1\n" + "# padding\n" * 40
                 + f"vllm serve m --kv-transfer-config '{NIXL}'\n")
    source = read_source(path)
    assert (source.format, len(source.deployments)) == (("shell", 1) if found else (None, 0))


@given(st.text(alphabet=".aJ-sonyml_ ", max_size=8))
def test_a_name_without_a_path_object_has_pathlibs_suffix(name):
    # An audit reads names as strings; they must be read as pathlib would.
    from pathlib import PurePosixPath

    from hma_policy.audit.sources import _suffix

    if name in ("", ".", "..") or name.endswith("."):
        # Not file names; and a trailing dot's suffix changed in Python 3.14
        # ("." from ""): the reader keeps one answer, no suffix.
        assert name in ("", ".", "..") or _suffix(name) == ""
        return
    assert _suffix(name) == PurePosixPath(name).suffix
    assert source_format(name) == source_format(PurePosixPath(name))


def test_a_file_that_is_not_a_source_is_skipped_with_its_reason(tmp_path):
    source = read_source(write(tmp_path / "README.md", "vllm serve x --kv-transfer-config '{}'"))
    assert source.deployments == () and source.problems == ()
    assert source.skipped == "not a deployment source (not JSON, YAML, a shell script, Python or a Dockerfile)"


# -- deployment documents -------------------------------------------------------------------

def test_a_yaml_stream_holds_one_deployment_per_document_with_its_number_and_line(tmp_path):
    path = write(tmp_path / "docs.yaml", "# two\nname: a\nkv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}\n"
                                         "---\nname: b\ndisable_hybrid_kv_cache_manager: true\n")
    source = read_source(path)
    assert source.format == "document"
    assert [(d.id, d.line, d.name) for d in source.deployments] == [(f"{path}#1", 1, "a"), (f"{path}#2", 4, "b")]
    assert source.deployments[1].document == {"name": "b", "disable_hybrid_kv_cache_manager": True}


def test_a_misspelt_document_stays_a_document_so_validation_names_the_typo(tmp_path):
    source = read_source(write(tmp_path / "d.yaml", "kv_transfer_confg: {kv_connector: NixlConnector}\n"))
    with pytest.raises(hma_policy.InputError) as info:
        hma_policy.decide(only(source).document)
    assert info.value.problems[0].hint == "did you mean `kv_transfer_config`?"


@pytest.mark.parametrize("text", [
    # vllm-project/recipes models/deepseek-ai/DeepSeek-V4-Pro.yaml
    "meta: {title: DeepSeek-V4-Pro}\nmodel: {model_id: deepseek-ai/DeepSeek-V4-Pro, min_vllm_version: '0.20.0'}\n"
    "compatible_strategies: [tp]\nkv_offload_support: true\n",
    # NVIDIA/srt-slurm recipes/vllm/.../disagg-kv-router.yaml
    "name: disagg\nmodel: {path: deepseekv4-fp4, container: 'vllm/vllm-openai:v0.20.0', precision: fp4}\n"
    "backend: {type: vllm}\n",
    # vllm-project/aibrix test/regression/v0.4.0/values.yaml
    "engine: {type: vllm}\nmodel: {name: m, path: /models/m, tensorParallel: 1}\nenv: []\n",
])
def test_another_tools_model_mapping_is_no_deployment(tmp_path, text):
    # A `model` mapping was taken for a document's model facts: each of these was an
    # "error" deployment (input.schema, unknown field `compatible_strategies`), and once
    # that was narrowed, a vLLM config ("enabled"). vLLM's model is a name.
    source = read_source(write(tmp_path / "recipe.yaml", text))
    assert (source.deployments, source.problems, source.skipped) == (
        (), (), "not a deployment document, vLLM config or Kubernetes manifest")


@pytest.mark.parametrize("text", [
    "platforms:\n  - {name: nvidia, image: vllm/vllm-openai}\n",      # vllm-project/recipes platforms.yaml
    "models:\n  - {name: qwen3, path: /models/qwen3}\n",                # semantic-router's models.example.yaml
])
def test_a_list_of_another_tools_things_is_no_misspelt_document(tmp_path, text):
    # `platforms` reads as a misspelt `platform`, `models` as `model`: each file was an
    # "error" deployment (input.schema, "unknown field `platforms`, did you mean `platform`").
    source = read_source(write(tmp_path / "platforms.yaml", text))
    assert (source.deployments, source.problems) == ((), ())


def test_only_a_charts_values_are_skipped_as_a_charts_values(tmp_path):
    # huggingface/trl keeps Jinja templates (trl/templates/) above Accelerate's configs, which were
    # skipped as "the values of a Helm chart"; so was a chart's own Chart.yaml.
    chart_reason = ("the values of a Helm chart whose mapping to vLLM's command line the audit does not know; audit "
                    "the output of `helm template`")
    chart = tmp_path / "chart"
    write(chart / "templates" / "_helpers.tpl", "{{- define \"x\" -}}{{- end -}}\n")
    write(chart / "Chart.yaml", "apiVersion: v2\nname: x\nversion: 0.1.0\n")
    assert read_source(write(chart / "values.yaml", "image:\n  repository: vllm/vllm-openai\n")).skipped == chart_reason
    assert read_source(write(chart / "ci" / "gpu.yaml", "vllmArgs: [--max-model-len, '4096']\n")).skipped == chart_reason
    assert read_source(chart / "Chart.yaml").skipped != chart_reason
    # One folder below a chart, only values by their name or folder: nebius/nebius-k8s-applications (33d1419)
    # keeps an umbrella Chart.yaml at its root and each app's catalog metadata in `vllm/manifest.yaml`,
    # which was skipped as a chart's values (survey 30a).
    assert read_source(write(chart / "values" / "gpu.yaml", "vllmArgs: [--max-model-len, '4096']\n")).skipped == \
        chart_reason
    assert read_source(write(chart / "vllm" / "manifest.yaml", "imagesMapping: {vllm/vllm-openai:v0.8.5: {dst: r}}\n")
                       ).skipped == "not a deployment document, vLLM config or Kubernetes manifest"
    # One that names no vLLM (gpustack/gpustack 47277d79 charts/gpustack-chart/values.yaml; a chart's
    # `files/prompt.yaml`) is no vLLM chart's: skipped as any other YAML is.
    for name in ("values.yaml", "files/prompt.yaml"):
        assert read_source(write(chart / name, "replicaCount: 1\n")).skipped == \
            "not a deployment document, vLLM config or Kubernetes manifest"
    trl = tmp_path / "trl"
    write(trl / "templates" / "lm_model_card.md", "# {{ model_name }}\n")
    config = write(trl / "accelerate_configs" / "zero3.yaml", "compute_environment: LOCAL_MACHINE\nnum_processes: 8\n")
    assert read_source(config).skipped == "not a deployment document, vLLM config or Kubernetes manifest"


def test_prose_kv_connector_is_no_mention(tmp_path):
    # ddps-lab/vllm-disaggregation (6007776) docker/Dockerfile:95, a comment "Flag enables built-in KV-connector
    # dependency libs", was noted as a mention of a KV option; prose's "KV-transfer" was not (survey 33a).
    from hma_policy.audit.run import audit
    prose = write(tmp_path / "Dockerfile", "# Flag enables built-in KV-connector dependency libs\nFROM ubuntu:24.04\n")
    code = write(tmp_path / "notes.md", "set `kv_connector` in the config\n")
    assert [(n.file, n.line) for n in audit([str(prose), str(code)]).notes] == [(str(code), 1)]


def test_a_saved_response_that_is_no_json_is_skipped_for_its_kv_transfer_params(tmp_path):
    # umesh-khatiwada/aibrix-vllm-deployment (469d483) .../Untitled-1.json: a pasted curl transcript, no JSON, whose
    # responses hold `"kv_transfer_params": null` (a field of vLLM's API, not an option) was an input.parse problem;
    # the same file without that field is skipped (survey 32c).
    found = read_source(write(tmp_path / "log.json", 'curl x\n{"id":"c","kv_transfer_params":null}\n'))
    assert (found.problems, found.skipped) == ((), "mentions no vLLM option, and is not valid JSON (invalid JSON in "
                                                   f"`{tmp_path / 'log.json'}` at line 1, column 1: Expecting value)")


def test_a_documents_misspelt_model_fact_is_still_a_document(tmp_path):
    source = read_source(write(tmp_path / "d.yaml", "model: {layer_kind: [mamba]}\n"))
    with pytest.raises(hma_policy.InputError) as info:
        hma_policy.decide(only(source).document)
    assert info.value.problems[0].hint == "did you mean `layer_kinds`?"


def test_a_model_named_alone_is_no_document(tmp_path):
    # triton-inference-server/tutorials (e8489525) Deployment/Kubernetes/.../chart/gpt2_values.yaml, a Helm
    # chart's values (`gpu: [Tesla-T4]`, `model: {name: gpt2}`): five such files were documents, each an
    # `input.schema` error ("unknown field `gpu`"); `model: {name: x}` alone was an `enabled` launch. A model
    # named alone holds no fact: it is a document only beside a field a decision reads (survey 20v).
    skipped = "not a deployment document, vLLM config or Kubernetes manifest"
    for name, text in (("gpt2_values.yaml", "gpu:\n- Tesla-T4\n\nmodel:\n  name: gpt2\n"), ("m.yaml", "model:\n  name: x\n"),
                       ("train.yaml", "model: {name: x}\ntraining: {epochs: 3}\n"), ("a.json", '{"model": {"name": "x"}}')):
        assert read_source(write(tmp_path / name, text)).skipped == skipped, name
    document = read_source(write(tmp_path / "d.json", '{"model": {"name": "x"}, "kv_transfer_config": '
                                                      '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}}'))
    facts = read_source(write(tmp_path / "f.yaml", "model: {name: x, layer_kinds: [mamba]}\n"))
    assert (document.format, facts.format) == ("document", "document")


def test_json_and_yaml_that_describe_no_deployment_are_skipped(tmp_path):
    assert read_source(write(tmp_path / "package.json", '{"name": 1, "scripts": {}}')).skipped \
        == "not a deployment document, vLLM config or Kubernetes manifest"
    # YAML 1.1 reads `yes` as a boolean: not JSON data, and nothing about vLLM in it.
    assert read_source(write(tmp_path / "flags.yaml", "yes: 1\n")).skipped == (
        "mentions no vLLM option, and is not JSON-compatible YAML (invalid YAML in "
        f"`{tmp_path / 'flags.yaml'}` at line 1, column 1: mapping keys must be strings, got `yes`)")


@pytest.mark.parametrize("comment", ["", "    # Pinned to match the upstream vllm/vllm-openai-rocm image\n"])
def test_a_github_actions_workflow_is_skipped_whatever_it_mentions(tmp_path, comment):
    # kvcache-ai/Mooncake (3b5a594) .github/workflows/ci_rocm.yml: a comment naming vLLM's
    # image made the workflow, whose `on:` YAML 1.1 reads as a boolean, an input.parse
    # problem ("looks like an unrendered Helm or Go template", for its `${{ ... }}`).
    workflow = ("name: 'Build Wheel (ROCm)'\n\non:\n  workflow_call: {}\n\njobs:\n  build:\n    runs-on: ubuntu-22.04\n"
                + comment + "    strategy:\n      matrix:\n        python-version: ['3.10']\n    steps:\n"
                "      - run: echo ${{ matrix.python-version }}\n")
    source = read_source(write(tmp_path / "ci_rocm.yml", workflow))
    assert (source.skipped, source.problems) == (
        "a GitHub Actions workflow (`on:` and `jobs:`): CI jobs, not a deployment", ())


def test_another_tools_yaml_with_tags_of_its_own_is_skipped_not_a_problem(tmp_path):
    # dstackai/dstack (511c318) and vllm-project/vllm-ascend: MkDocs sites whose nav names
    # pages `vllm.md` and whose config uses MkDocs' own tags were each an input.parse problem.
    mkdocs = ("site_name: docs\nnav:\n  - Serving: examples/vllm.md\nmarkdown_extensions:\n  - pymdownx.emoji:\n"
              "      emoji_index: !!python/name:material.extensions.emoji.twemoji\n"
              "extra:\n  analytics:\n    property: !ENV GOOGLE_ANALYTICS_KEY\n")
    assert read_source(write(tmp_path / "mkdocs.yml", mkdocs)).skipped == \
        "not a deployment document, vLLM config or Kubernetes manifest"
    # A deployment the tag makes unreadable as written stays a problem, at the tag: vLLM's own
    # config reader (yaml.safe_load) refuses it too.
    config = read_source(write(tmp_path / "serve.yaml", "model: m\nkv-transfer-config: !ENV KV\n"))
    assert [(p.code, p.line) for p in config.problems] == [("input.parse", 2)]
    manifest = read_source(write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: !Ref Name\n"
                                 "spec:\n  containers:\n  - name: vllm\n    image: vllm/vllm-openai\n"))
    assert [(p.code, p.line) for p in manifest.problems] == [("input.parse", 4)]


def test_a_dashboard_that_is_no_json_and_charts_vllms_metrics_is_skipped_not_a_problem(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) ai-ml/infw-gw/examples/getting-started/
    # dashboard.json: a Cloud Monitoring dashboard after a `/* Copyright ... */` comment, charting
    # vLLM's metrics and naming `vllm.vllm-prometheus` in a description, was an input.parse problem.
    cloud = write(tmp_path / "dashboard.json", '/* Copyright */\n{"mosaicLayout": {"tiles": [{"widget": {"xyChart": '
                  '{"dataSets": [{"timeSeriesQuery": {"prometheusQuery": "vllm:num_requests_running"}}]}}}]},\n'
                  '"description": "see vllm.vllm-prometheus"}\n')
    assert (read_source(cloud).problems, read_source(cloud).skipped) == (
        (), "a monitoring dashboard (Grafana, Cloud Monitoring): charts, not a deployment")
    # A metric's name alone is no mention of vLLM either.
    metrics = write(tmp_path / "grafana.json", '/* c */\n{"title": "x", "rows": [{"query": "vllm:num_requests_running"}]}\n')
    source = read_source(metrics)
    assert source.problems == () and source.skipped.startswith("mentions no vLLM option, and is not valid JSON")
    # A broken JSON file that names vLLM otherwise stays a problem.
    broken = write(tmp_path / "serve.json", '/* c */\n{"kv_transfer_config": {"kv_connector": "NixlConnector"}}\n')
    assert [p.code for p in read_source(broken).problems] == ["input.parse"]


def test_another_tools_yaml_with_keys_that_are_no_strings_is_skipped_not_a_problem(tmp_path):
    # vllm-project/vllm-ascend (182b75e) .agents/skills/vllm-ascend-release/references/version-files.yaml:
    # valid YAML whose `update_order` is keyed by numbers, and which names VLLM_VERSION, was an
    # input.parse problem ("mapping keys must be strings").
    steps = ("files:\n  - path: docker/Dockerfile\n    updates:\n      - variable: VLLM_VERSION\n"
             "update_order:\n  1: mkdocs.yml\n  2: README.md\n")
    source = read_source(write(tmp_path / "version-files.yaml", steps))
    assert (source.skipped, source.problems) == ("not a deployment document, vLLM config or Kubernetes manifest", ())
    # A deployment document with such a key stays a problem, at the key: JSON has none.
    document = read_source(write(tmp_path / "serve.yaml", "kv_transfer_config:\n  kv_connector: NixlConnector\n"
                                 "  kv_role: kv_both\n  1: x\n"))
    assert [(p.code, p.line, p.message.split(": ", 1)[1]) for p in document.problems] == [
        ("input.parse", 4, "mapping keys must be strings, got `1`")]


def test_a_containers_script_that_never_mentions_vllm_is_no_problem_when_it_cannot_be_parsed(tmp_path):
    # aws-samples/awsome-inference (d3236c8), 2.projects/nims-inference/benchmark/genai-perf.yaml: a
    # Triton benchmark pod whose `sh -c` script exports `HF_TOKEN=<YOUR_TOKEN_HERE>` was a
    # source.shell_syntax file problem, though nothing in it runs vLLM.
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: bench}\nspec:\n  containers:\n  - name: bench\n"
           "    image: nvcr.io/nvidia/tritonserver:24.06-py3-sdk\n    command: [/bin/sh, -c]\n    args:\n"
           "    - |\n      export HF_TOKEN=<YOUR_TOKEN_HERE>\n      COMMAND\n")
    bench = read_source(write(tmp_path / "bench.yaml", pod.replace("COMMAND", "genai-perf profile -m m")))
    assert (bench.deployments, bench.problems) == ((), ())
    # One that runs vLLM keeps the problem: the audit cannot read the launch.
    served = read_source(write(tmp_path / "served.yaml", pod.replace("COMMAND", "vllm serve m")))
    assert [p.code for p in served.problems] == ["source.shell_syntax"]


def test_a_broken_yaml_file_is_a_located_problem_and_yields_nothing(tmp_path):
    source = read_source(write(tmp_path / "b.yaml", "name: x\nkv_transfer_config:\n  kv_connector: A\n    kv_role: b\n"))
    assert source.deployments == ()
    (problem,) = source.problems
    assert (problem.code, problem.line) == ("input.parse", 4)
    assert problem.message.startswith(f"invalid YAML in `{tmp_path / 'b.yaml'}` at line 4")


def test_a_manifest_stream_with_one_broken_document_reads_the_others(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365), ai-ml/llm-serving-llama/vllm: five
    # streams of a vLLM Deployment, a Service and a Secret whose token is `{{HF_TOKEN}}`, for the
    # reader to fill in. The Secret's parse problem hid the five launches.
    stream = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm\nspec:\n  template:\n    spec:\n"
              "      containers:\n      - name: server\n        image: vllm/vllm-openai:v0.11.0\n"
              f"        command: [vllm, serve, m, --kv-transfer-config, '{NIXL}']\n"
              "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: hf-secret\nstringData:\n"
              "  hf_api_token: {{HF_TOKEN}}\n")
    source = read_source(write(tmp_path / "llama.yaml", stream))
    d = only(source)
    assert (source.format, d.line, d.name, ktc(d)["kv_connector"]) == ("kubernetes", 9, "vllm/server", "NixlConnector")
    (problem,) = source.problems
    assert (problem.code, problem.line) == ("input.parse", 18)
    # No chart renders it: `{{HF_TOKEN}}` is no Helm value (the hint said to audit `helm template`'s output).
    assert problem.hint == ("`{{HF_TOKEN}}` is a placeholder filled in before the file is applied (not a Helm value, "
                            "which reads `{{ .Values.x }}`); audit the file as it is applied")
    # With no other Kubernetes object in the stream, the file is still its problem alone.
    alone = read_source(write(tmp_path / "alone.yaml", stream.split("---\n")[1] + "---\nkv_transfer_config: {}\n"))
    assert (alone.format, alone.deployments, codes(alone.problems)) == (None, (), ["input.parse"])



def test_kserves_own_fields_in_a_serving_runtime_do_not_make_its_placeholders_a_helm_template(tmp_path):
    # opendatahub-io/odh-dashboard (b9d09633) Cypress fixtures, survey 35a: `name: {{SERVING_RUNTIME_NAME}}`,
    # filled in by the test before `oc apply`, beside `--served-model-name={{.Name}}`, which KServe's controller
    # fills in from the service: the hint said to audit `helm template`'s output, where no chart renders it.
    runtime = ("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata:\n  name: {{SERVING_RUNTIME_NAME}}\n"
               "spec:\n  containers:\n    - name: kserve-container\n      image: quay.io/modh/vllm:rhoai-2.20\n"
               "      command: [python, -m, vllm.entrypoints.openai.api_server]\n"
               "      args: [--port=8080, --model=/mnt/models, \"--served-model-name={{.Name}}\"]\n")
    (problem,) = read_source(write(tmp_path / "sr.yaml", runtime)).problems
    assert problem.hint == ("`{{SERVING_RUNTIME_NAME}}` is a placeholder filled in before the file is applied (not a "
                            "Helm value, which reads `{{ .Values.x }}`); audit the file as it is applied")

def test_an_unrendered_helm_template_is_named_as_such(tmp_path):
    source = read_source(write(tmp_path / "templates" / "d.yaml", "spec:\n  replicas: {{ .Values.replicas }}\n"
                                                                 "  args: [vllm, serve, {{ .Values.model | quote }}\n"))
    assert source.problems[0].hint == "this looks like an unrendered Helm or Go template; audit the output of `helm template` instead"


def test_another_tools_env_settings_are_no_deployment_document(tmp_path):
    # NousResearch/atropos (296a0bc) example_trainer/configs/math_zero_lora.yaml: a trainer's `env:`
    # settings were read as a deployment document's environment, `error input.schema` at
    # /env/eval_limit_ratio. A document's `env` names a variable the decision reads.
    trainer = read_source(write(tmp_path / "math_zero_lora.yaml", (
        'env:\n  tokenizer_name: "Qwen/Qwen3-4B-Instruct-2507"\n  rollout_server_url: "http://localhost:8002"\n'
        "  eval_limit_ratio: 0.1\n")))
    assert (trainer.format, trainer.deployments) == (None, ())
    document = read_source(write(tmp_path / "offload.yaml", 'env:\n  VLLM_USE_SIMPLE_KV_OFFLOAD: "1"\n'))
    assert (document.format, only(document).document) == ("document", {"env": {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}})


def test_an_envsubst_template_is_read_as_the_file_it_renders(tmp_path):
    # meta-llama/llama-stack (b12cd52) docs/source/distributions/k8s/vllm-k8s.yaml.template, applied by
    # its apply.sh as `envsubst < ./vllm-k8s.yaml.template | kubectl apply -f -`: skipped, by its suffix.
    source = read_source(write(tmp_path / "vllm-k8s.yaml.template", (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm-server\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: vllm\n        image: vllm/vllm-openai:latest\n"
        "        command: [\"/bin/sh\", \"-c\"]\n        args:\n"
        "        - \"vllm serve ${INFERENCE_MODEL} --dtype float16 --max-model-len 4096\"\n")))
    d = only(source)
    assert (source.format, d.line, d.name) == ("kubernetes", 9, "vllm-server/vllm")
    assert [n.code for n in d.notes] == ["source.unresolved_unused", "source.release_unknown"]
    # Another suffix before `.template` is not a deployment source.
    assert read_source(write(tmp_path / "notes.txt.template", "vllm serve m\n")).format is None


def test_an_envsubst_template_s_placeholders_are_unknown_wherever_they_stand(tmp_path):
    # aws-samples/aws-do-eks (f721602f) Container-Root/eks/deployment/inference/agentic-ai/nemotron/ultra/
    # disagg/deployment.yaml-template, rendered by its run.sh as `cat ${MANIFEST_TYPE}.yaml-template |
    # envsubst > ${MANIFEST_TYPE}.yaml`: skipped by its name (`-template`), and no YAML as written, the
    # braces of `${VAR}` ending a flow mapping's scalar; and envsubst fills in the placeholder in the
    # script's single quotes too, which was read as JSON that is no JSON (input.parse).
    source = read_source(write(tmp_path / "deployment.yaml-template", (
        "---\napiVersion: apps/v1\nkind: Deployment\n"
        "metadata: { name: ${DEPLOYMENT_NAME}-prefill, namespace: ${NAMESPACE}, labels: { app.kubernetes.io/part-of: "
        "${DEPLOYMENT_NAME} } }\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: { node.kubernetes.io/instance-type: ${INSTANCE_TYPE_WORKER} }\n      containers:\n"
        "        - name: vllm\n          image: ${REGISTRY}${IMAGE}${TAG}\n"
        "          command: [\"/bin/bash\",\"-c\"]\n          args:\n            - |-\n              set -u\n"
        "              exec python3 -m dynamo.vllm \\\n                --model ${MODEL_PATH} \\\n"
        "                --disaggregation-mode prefill \\\n"
        "                --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\","
        "\"kv_connector_extra_config\":{\"backends\":[\"LIBFABRIC\"],\"kv_lease_duration\":${KV_LEASE_DURATION}}}'\n")))
    d = only(source)
    assert (source.format, source.problems, d.line, d.name) == ("kubernetes", (), 10, "${DEPLOYMENT_NAME}-prefill/vllm")
    assert json.loads(d.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_unused", "`--kv-transfer-config` takes its value at `/kv_connector_extra_config/"
                                     "kv_lease_duration` from `${KV_LEASE_DURATION}`, which this file does not set; "
                                     "the decision does not read that value"),
        ("source.unresolved_unused", "the model is `${MODEL_PATH}`, which this file does not set; the decision does not "
                                     "read the model's name"),
        ("source.release_unknown", "the vLLM release is not known: image ${REGISTRY}${IMAGE}${TAG}: the image is not "
                                   "known from this file")]
    # A file holding the characters the placeholders are read as is read as written (here: no YAML).
    odd = read_source(write(tmp_path / "odd.yaml-template", "a: { b: ${C} }\nd: \ue000vllm\n"))
    assert [p.code for p in odd.problems] == ["input.parse"]


DOLLAR_TEMPLATE = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: ${DEPLOYMENT_NAME} }\nspec:\n  template:\n    spec:\n"
    "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.11.0\n"
    "          command: [\"/bin/bash\", \"-c\"]\n          args:\n            - |-\n"
    "              for i in ${DOLLAR}(seq 1 30); do getent hosts nats && break; done\n"
    "              MY_IP=${DOLLAR}(hostname -i)\n"
    "              exec vllm serve ${MODEL_PATH} --data-parallel-address ${DOLLAR}MY_IP \\\n"
    "                --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\n")


@pytest.mark.parametrize("env, escaped", [
    ("export DOLLAR='$'\n", True), ('DOLLAR="$"  # for envsubst\n', True), ("export DOLLAR=\\$\n", True),
    ("export DOLLAR=${DOLLAR:-$}\n", False), ("export DOLLAR='$$'\n", False), (None, False)])
def test_a_placeholder_the_template_s_shell_files_set_to_a_dollar_is_a_dollar(tmp_path, env, escaped):
    # aws-samples/aws-do-eks (f721602) nemotron/ultra/disagg: run.sh sources .env, which exports
    # DOLLAR='$', and renders each *.yaml-template with envsubst, so that `${DOLLAR}(id -u)` becomes the
    # script's `$(id -u)`. Read as a value not known, `${DOLLAR}` left `(` where the shell takes none: 196
    # source.shell_syntax problems over 12 templates (survey 28b). Only a lone `$` is taken from the
    # shell files beside the template: any other value may be set anew by whoever renders it.
    if env is not None:
        write(tmp_path / ".env", env)
    source = read_source(write(tmp_path / "deployment.yaml-template", DOLLAR_TEMPLATE))
    d = only(source)
    assert json.loads(d.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"
    address = [n.message for n in d.notes if "--data-parallel-address" in n.message]
    if escaped:
        assert source.problems == ()
        assert address == ["`--data-parallel-address` takes its value from `$(...)` (which is the output of a "
                           "command the audit does not run); the decision does not read it"]
    else:
        assert [p.message for p in source.problems] == ["cannot read the script: `for` at line 13 has no `do`",
                                                        "cannot read the script: unexpected `(`"]
        assert address == ["`--data-parallel-address` takes its value from `${DOLLAR}`, which this file does not "
                           "set; the decision does not read it"]


ENVSUBST_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-p}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: IMAGE
        args:
        - "--model=${MODEL_NAME}"
        - "--kv-transfer-config={\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\"}"
        - "${VLLM_EXTRA_ARGS_P}"
"""


def test_a_manifest_whose_image_is_a_placeholder_is_read_as_an_envsubst_template(tmp_path):
    # llm-d/llm-d-inference-scheduler (520af47) deploy/components/vllm-prefill/deployment.yaml: `image:
    # ${VLLM_IMAGE}`, no image a cluster can pull, is filled in by envsubst before kubectl applies it
    # (scripts/kind-dev-env.sh); its `${VLLM_EXTRA_ARGS_P}` was a word vLLM refuses (`error`), in the file
    # and in the kustomize overlays of its dev environments.
    (d,) = read_source(write(tmp_path / "deployment.yaml", ENVSUBST_MANIFEST.replace("IMAGE", "${VLLM_IMAGE}"))).deployments
    assert json.loads(d.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"
    assert [(n.code, n.message) for n in d.notes if n.code == "source.unresolved_arguments"] == [
        ("source.unresolved_arguments", "the command also takes `${VLLM_EXTRA_ARGS_P}`, which this file does not set; "
                                        "only the options written here are read, and it may hold others")]
    # Only the braced form: `$NAME` in a manifest is as often a shell's, and Kubernetes passes it as written.
    (d,) = read_source(write(tmp_path / "dollar.yaml", ENVSUBST_MANIFEST.replace("IMAGE", "${VLLM_IMAGE}").replace(
        '        - "${VLLM_EXTRA_ARGS_P}"', '        - "$NOT_A_PLACEHOLDER"'))).deployments
    assert [p.code for p in d.problems] == ["source.extra_argument"]
    assert "`$NOT_A_PLACEHOLDER`" in d.problems[0].message
    # Read as a kustomize overlay's base, the same (the overlays of the dev environments).
    (tmp_path / "kustomization.yaml").write_text("resources: [deployment.yaml]\npatches:\n- path: patch.yaml\n")
    (tmp_path / "patch.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm-p}\nspec:\n"
                                         "  template:\n    spec:\n      containers:\n      - name: vllm\n"
                                         "        env: [{name: A, value: b}]\n")
    (overlay,) = [e for e in audit([str(tmp_path / "patch.yaml")]).entries]
    assert (overlay.deployment.format, overlay.decision["outcome"]) == ("kustomize", "enabled")
    # The overlay's patches pass through the same envsubst (`kustomize build | envsubst`): a `${...}` a patch
    # gives is a value not known too, not a word vLLM refuses (llm-d/llm-d-router ebab687
    # deploy/environments/dev/epd/patch-decode.yaml's `"${VLLM_EXTRA_ARGS_D}"` was source.extra_argument, survey 30c).
    (tmp_path / "patch.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm-p}\nspec:\n"
                                         "  template:\n    spec:\n      containers:\n      - name: vllm\n"
                                         '        args: ["--model=${MODEL_NAME}", "${VLLM_EXTRA_ARGS_D}"]\n')
    (overlay,) = [e for e in audit([str(tmp_path / "patch.yaml")]).entries]
    assert (overlay.deployment.problems, overlay.decision["outcome"]) == ((), "enabled")
    assert [n.message for n in overlay.deployment.notes if n.code == "source.unresolved_arguments"] == [
        "the command also takes `${VLLM_EXTRA_ARGS_D}`, which this file does not set; only the options written here "
        "are read, and it may hold others"]
    # ... and one the decision reads is not known (it was read as JSON that is none: input.parse).
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [deployment.yaml]\npatches:\n- target: {kind: Deployment, name: vllm-p}\n  patch: |\n"
        "    - op: replace\n      path: /spec/template/spec/containers/0/args/1\n"
        '      value: "--kv-transfer-config=${KV_CFG}"\n')
    (tmp_path / "patch.yaml").unlink()
    (overlay,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.format == "kustomize"]
    assert [(p.code, p.message) for p in overlay.deployment.problems] == [(
        "source.unresolved", "`--kv-transfer-config` takes its value from `${KV_CFG}`, which this file does not set")]
    # An image Kubernetes can pull: the manifest is applied as written, its `${...}` words literal.
    (d,) = read_source(write(tmp_path / "plain.yaml", ENVSUBST_MANIFEST.replace("IMAGE", "vllm/vllm-openai:v0.26.0"))
                       ).deployments
    assert "`${VLLM_EXTRA_ARGS_P}`" in d.problems[0].message


def test_a_terraform_template_is_read_as_the_manifest_it_renders(tmp_path):
    # GoogleCloudPlatform/ai-on-gke (8676d66d) benchmarks/inference-server/vllm/manifest-templates/vllm.tftpl,
    # rendered by `yamldecode(templatefile(...))` in its main.tf: skipped as no deployment source,
    # though it runs vllm/vllm-openai:v0.5.5 (no HMA). `${expr}` is a value not known; a `%{ for }`
    # block's lines are read once.
    template = write(tmp_path / "vllm.tftpl", (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm\n  namespace: ${namespace}\nspec:\n"
        "  template:\n    spec:\n      serviceAccountName: ${ksa}\n      containers:\n        - name: vllm\n"
        '          image: "vllm/vllm-openai:v0.5.5"\n'
        '          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
        '          args: ["--model", "${model_id}", "--tensor-parallel-size", "${lower(gpu_count)}"]\n'
        "          env:\n%{ for secret in hugging_face_token_secret_list ~}\n"
        "            - name: HUGGING_FACE_HUB_TOKEN\n              value: ${secret.value}\n%{ endfor ~}\n"))
    source = read_source(template)
    d = only(source)
    assert (source.format, source.problems, d.line, d.name) == ("kubernetes", (), 11, "vllm/vllm")
    assert d.release.version == "0.5.5"
    assert [n.message for n in d.notes] == [
        "the model is `${model_id}`, which this file does not set; the decision does not read the model's name",
        "`--tensor-parallel-size` takes its value from `${lower(gpu_count)}`, which this file does not set; the "
        "decision does not read it"]
    # A condition (`%{ if }`) is not evaluated: a problem at its line where the template mentions vLLM.
    write(template, template.read_text().replace("%{ for secret in hugging_face_token_secret_list ~}", '%{ if x != "" }')
          .replace("%{ endfor ~}", "%{ endif }"))
    assert [(p.code, p.line, p.message) for p in read_source(template).problems] == [("input.parse", 16, (
        f"`{template}` is an unrendered Terraform template: `%{{ if x != \"\" }}` keeps or drops lines on a condition "
        "the audit does not evaluate"))]
    assert source_format("run.sh.tftpl") is None and source_format("manifest.yaml.tftpl") == "yaml"


def test_a_file_that_only_gives_the_hma_switch_in_a_shape_no_reader_reads_is_noted(tmp_path):
    # vllm-project/recipes (8959cf64) models/moonshotai/Kimi-K3.yaml L287: a recipe's prefill `vllm_args`
    # list `"--no-disable-hybrid-kv-cache-manager"`, in a launcher's own schema the audit does not
    # read. The file was skipped with no note: the HMA switch was no mention of a KV option.
    source = read_source(write(tmp_path / "Kimi-K3.yaml", (
        "pd_cluster:\n  prefill:\n    tp: 8\n    vllm_args:\n      - \"--max-num-batched-tokens\"\n"
        "      - \"16384\"\n      - \"--no-disable-hybrid-kv-cache-manager\"\n")))
    assert [(n.code, n.line, n.message.split(":")[0]) for n in source.notes] == [
        ("source.unrecognized", 7, "mentions `disable-hybrid-kv-cache-manager` at line 7, no vLLM launch recognised")]


def test_a_kv_option_that_none_of_a_files_launches_reads_is_noted(tmp_path):
    # FlagBase/FlagScale (survey 37d) flagscale/runner/runner_serve.py: `command_items = ["vllm", "serve"]`
    # is a launch, and the script then writes `f"{vllm_command} --kv-transfer-config '{p_kv_config_json}'"`
    # (a P2pNcclConnector config at line 9 here) into a script it runs. The launch read no KV config,
    # and nothing said that the file gives one: the note of a file without launches was never made.
    runner = write(tmp_path / "runner_serve.py", (
        "import json, subprocess\n\ndef run(model, f):\n    command_items = ['vllm', 'serve', model]\n"
        "    vllm_command = ' '.join(command_items)\n    subprocess.run(command_items)\n"
        "    # (a comment: --kv-transfer-config)\n    p_kv_config = {\n        'kv_connector': 'P2pNcclConnector',\n"
        "        'kv_role': 'kv_producer'}\n"
        "    f.write(f\"{vllm_command} --kv-transfer-config '{json.dumps(p_kv_config)}'\")\n"))
    source = read_source(runner, known=("P2pNcclConnector",))
    assert len(source.deployments) == 1 and [(n.code, n.line, n.message) for n in source.notes] == [
        ("source.unrecognized", 9, "mentions `kv_connector` at line 9, which none of its launches reads")]
    # A launch that reads one, or a mention only in comments, is no note.
    kv = write(tmp_path / "serve.sh", "# NixlConnector is next\nvllm serve m --kv-transfer-config "
                                      "'{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}'\n"
                                      "echo 'the kv_connector above'\n")
    commented = write(tmp_path / "plain.sh", "# --kv-transfer-config, one day\nvllm serve m\n")
    assert [read_source(path, known=("NixlConnector",)).notes for path in (kv, commented)] == [(), ()]
    # A config file's spelling (`kv-transfer-config:`) is read as its field.
    document = write(tmp_path / "d.yaml", "kv-transfer-config: '{\"kv_connector\": \"NixlConnector\", "
                                          "\"kv_role\": \"kv_both\"}'\nmodel: {name: m}\n")
    assert read_source(document, known=("NixlConnector",)).notes == ()


def test_an_unrendered_jinja_template_is_named_as_such(tmp_path):
    # vllm-project/semantic-router (3d48f8c) src/vllm-sr/cli/templates/envoy.template.yaml: an
    # Envoy config rendered by Jinja (`{% for listener in listeners %}`), which names vLLM in its
    # clusters, was said to look like a Helm template.
    source = read_source(write(tmp_path / "envoy.template.yaml", (
        "static_resources:\n  listeners:\n  {% for listener in listeners %}\n  - name: {{ listener.name }}\n"
        "  {% endfor %}\n  clusters:\n  - name: vllm_static_cluster\n")))
    (problem,) = source.problems
    assert (problem.code, problem.hint) == ("input.parse", "this looks like an unrendered Jinja template; audit the "
                                                           "file it renders instead")


# -- vLLM config files ----------------------------------------------------------------------------

def test_a_vllm_config_file_is_the_deployment_vllm_serve_config_file(tmp_path):
    source = read_source(write(tmp_path / "c.yaml", "model: Qwen/Qwen3-8B\ntensor-parallel-size: 2\n"
                                                    "kv-transfer-config:\n  kv_connector: NixlConnector\n  kv_role: kv_both\n"))
    d = only(source)
    assert (source.format, d.name) == ("vllm-config", "Qwen/Qwen3-8B")
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert d.document["model"] == {"name": "Qwen/Qwen3-8B"}
    assert dict(d.origins)["kv_transfer_config"] == f"`{tmp_path / 'c.yaml'}`: --kv-transfer-config"


def test_a_mapping_with_a_model_name_among_keys_of_its_own_is_no_vllm_config(tmp_path):
    # vllm-project/vllm-ascend (182b75e): 84 test-harness files hold `model: "..."` beside
    # `env_common: &env_common`, `deployment:` and `server_cmd:`. Taken for vLLM `--config`
    # files, whose reader refuses anchors, each was a false input.parse problem. vLLM makes
    # every key of a config file an option and refuses one it lacks: they are not configs.
    harness = read_source(write(tmp_path / "DeepSeek-V3.yaml", (
        'test_name: "pd"\nmodel: "vllm-ascend/DeepSeek-V3-W8A8"\nnum_nodes: 2\nenv_common: &env_common\n  A: 1\n'
        "deployment:\n  - envs:\n      <<: *env_common\n    server_cmd: >\n      vllm serve m --kv-transfer-config "
        '\'{"kv_connector": "MooncakeConnectorV1"}\'\n')))
    assert (harness.deployments, harness.problems) == ((), ())
    assert harness.skipped == "not a deployment document, vLLM config or Kubernetes manifest"
    assert codes(harness.notes) == ["source.unrecognized"]  # it mentions a KV option: not silent
    # A config of an older release's options, or with a misspelt one, is still a vLLM config.
    old = read_source(write(tmp_path / "old.yaml", "model: m\nnum-scheduler-steps: 8\n"))
    typo = read_source(write(tmp_path / "typo.yaml", "model: m\ntensor-paralel-size: 2\n"))
    assert (old.format, typo.format) == ("vllm-config", "vllm-config")
    # A key that is only like an option is another tool's: hiyouga/LLaMA-Factory (examples/v1/
    # train_lora/export_lora.yaml) exports a LoRA with `model:` and `peft_config:`, which reads
    # as a slip of `pooler_config` to a did-you-mean hint and was decided as a vLLM launch.
    export = read_source(write(tmp_path / "export_lora.yaml", "model: Qwen/Qwen3-4B\npeft_config:\n  name: lora\n"
                                                              "  export_dir: ./merge_lora_model\n"))
    assert (export.deployments, export.skipped) == ((), "not a deployment document, vLLM config or Kubernetes manifest")
    # runpod-workers/worker-vllm (7a92503), configs/gemma/gemma4_31b_it.yaml: eleven of vLLM's
    # options and one key of the launcher's own. Not a config vLLM would start with; the reason
    # names the key, so that the auditor sees why its three siblings were read and it was not.
    worker = read_source(write(tmp_path / "gemma.yaml", "model: google/gemma-4-31b-it\nmax-model-len: 8192\n"
                                                        "kv-cache-dtype: fp8\nvllm-release: v2.24.0\n"))
    assert (worker.deployments, worker.skipped) == ((), "not a vLLM config: `vllm-release` is no option of any bundled "
                                                        "vLLM release, and vLLM refuses a --config file with such a key")


def test_false_in_a_config_file_is_an_explicit_enable_only_under_the_dash_spelling(tmp_path):
    dash = only(read_source(write(tmp_path / "a.yaml", "model: m\ndisable-hybrid-kv-cache-manager: false\n")))
    assert dash.document["disable_hybrid_kv_cache_manager"] is False
    assert dict(dash.origins)["disable_hybrid_kv_cache_manager"].endswith("--no-disable-hybrid-kv-cache-manager")
    underscore = only(read_source(write(tmp_path / "b.yaml", "model: m\ndisable_hybrid_kv_cache_manager: false\n")))
    assert "disable_hybrid_kv_cache_manager" not in underscore.document
    (note,) = underscore.notes
    assert note.code == "source.config_false_dropped"
    assert note.hint == "write `disable-hybrid-kv-cache-manager: false` for an explicit enable"
    true = only(read_source(write(tmp_path / "c.yaml", "model: m\ndisable_hybrid_kv_cache_manager: true\n")))
    assert true.document["disable_hybrid_kv_cache_manager"] is True


def test_a_config_file_without_a_model_is_decided_alone_without_complaint(tmp_path):
    d = only(read_source(write(tmp_path / "c.yaml", f"kv-transfer-config: '{NIXL}'\nport: 8000\n")))
    assert d.problems == () and "model" not in d.document


# -- shell scripts -----------------------------------------------------------------------------------

def test_shell_variables_defaults_exports_and_per_command_environment(tmp_path):
    script = write(tmp_path / "run.sh", f"""#!/bin/bash
MODEL=${{MODEL:-org/model}}
KV='{NIXL}'
export VLLM_USE_SIMPLE_KV_OFFLOAD=0
# a comment that isn't closed: don't
VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 HF_TOKEN=hf_secret vllm serve $MODEL \\
   --port 8000 --kv-transfer-config "$KV" >log 2>&1 &
""")
    d = only(read_source(script))
    assert d.id == f"{script}:6"
    assert d.document["model"] == {"name": "org/model"}
    assert ktc(d) == json.loads(NIXL)
    # Only the variables the decision reads are copied: the token never enters a document.
    assert d.document["env"] == {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0", "VLLM_USE_SIMPLE_KV_OFFLOAD": "0"}


def test_a_value_the_script_does_not_set_is_reported_not_guessed(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh", 'vllm serve m --kv-transfer-config "$KV_CONFIG" "$@"\n')))
    assert d.document is None
    (problem,) = d.problems
    assert (problem.code, problem.line, problem.path) == ("source.unresolved", 1, "/kv_transfer_config")
    assert problem.message == "`--kv-transfer-config` takes its value from `$KV_CONFIG`, which this file does not set"
    assert codes(d.notes) == ["source.script_arguments"]


def test_nothing_in_a_script_is_executed(tmp_path):
    marker = tmp_path / "executed"
    script = write(tmp_path / "run.sh", f'vllm serve m --kv-transfer-config "$(touch {marker}; echo {{}})" `touch {marker}`\n'
                                        f"touch {marker}\n")
    d = only(read_source(script))
    assert not marker.exists()
    assert d.problems[0].message == ("`--kv-transfer-config` takes its value from `$(...)` (which is the output of a "
                                     "command the audit does not run)")


def test_heredoc_bodies_comments_and_continuations(tmp_path):
    script = write(tmp_path / "run.sh", f"""cat > cfg <<'EOF'
vllm serve not-a-command --kv-transfer-config '{{"kv_connector": "X"}}'
EOF
vllm serve real \\
  --kv-transfer-config '{NIXL}'  # vllm serve in a comment
""")
    d = only(read_source(script))
    assert (d.line, d.name) == (4, "real")


def test_the_api_server_module_docker_run_and_sh_c_are_vllm_commands(tmp_path):
    script = write(tmp_path / "run.sh", f"""python3 -u -m vllm.entrypoints.openai.api_server --model a --kv-transfer-config '{NIXL}'
docker run --gpus all -e VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm/vllm-openai:v0.33.0 b --kv-offloading-size 8
ssh gpu-3 sh -c "vllm serve c --disable-hybrid-kv-cache-manager"
docker run --entrypoint bash vllm/vllm-openai:v0.33.0 -c true
python3 proxy.py --port 8000
""")
    source = read_source(script)
    assert [(d.name, d.line) for d in source.deployments] == [("a", 1), ("b", 2), ("c", 3)]
    a, b, c = source.deployments
    assert ktc(a)["kv_connector"] == "NixlConnector"
    assert b.document["kv_offloading_size"] == 8 and b.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    assert c.document["disable_hybrid_kv_cache_manager"] is True


def test_vllm_argument_handling_last_wins_underscores_and_dotted_options(tmp_path):
    script = write(tmp_path / "run.sh", "vllm serve m --kv_transfer_config '{\"kv_connector\": \"LMCacheConnectorV1\"}' "
                                        "--kv-transfer-config.kv_connector NixlConnector --kv-transfer-config.kv_role=kv_both "
                                        "--kv-transfer-config.kv_connector_extra_config.backends+ UCX,LIBFABRIC "
                                        "--disable-hybrid-kv-cache-manager --no-disable-hybrid-kv-cache-manager\n")
    d = only(read_source(script))
    # Dotted options are merged into one JSON value placed last: it replaces the plain one.
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                      "kv_connector_extra_config": {"backends": ["UCX", "LIBFABRIC"]}}
    assert d.document["disable_hybrid_kv_cache_manager"] is False


def test_a_config_file_is_read_relative_to_the_script_and_the_command_line_wins(tmp_path):
    write(tmp_path / "cfg" / "base.yaml", f"model: from-config\nkv-transfer-config: '{NIXL}'\n"
                                          "disable-hybrid-kv-cache-manager: true\n")
    script = write(tmp_path / "bin" / "run.sh", "vllm serve --config ../cfg/base.yaml --no-disable-hybrid-kv-cache-manager\n")
    d = only(read_source(script, roots=(tmp_path.resolve(),)))
    assert d.document["model"] == {"name": "from-config"}
    assert d.document["disable_hybrid_kv_cache_manager"] is False
    assert dict(d.origins)["kv_transfer_config"] == f"`{tmp_path / 'bin' / '..' / 'cfg' / 'base.yaml'}`: --kv-transfer-config" \
        or dict(d.origins)["kv_transfer_config"].endswith("cfg/base.yaml`: --kv-transfer-config")


@pytest.mark.parametrize("command, code, message", [
    ("vllm serve m --config /etc/passwd.yaml", "source.config_missing",
     "the config file `/etc/passwd.yaml` does not exist (looked for `/etc/passwd.yaml`); vLLM fails to start without it"),
    ("vllm serve m --config ../outside.yaml", "source.config_outside", None),
    ("vllm serve m --config a.yaml --config b.yaml", "source.config_multiple",
     "more than one `--config` file is given; vLLM refuses this"),
    ("vllm serve m --config cfg.json", "source.config_extension", "`--config cfg.json`: vLLM reads only .yaml or .yml config files"),
    ("vllm serve m --config", "source.missing_value", "`--config` has no file; vLLM refuses this"),
    ("vllm serve m --kv-transfer-config", "source.missing_value", "`--kv-transfer-config` has no value; vLLM refuses this"),
    ("vllm serve m --kv-transfer-confg '{}'", "source.unknown_option", "vLLM rejects the unrecognized argument `--kv-transfer-confg`"),
    ("vllm serve m --disable-hybrid-kv-cache-manager=true", "source.option_value",
     "`--disable-hybrid-kv-cache-manager` takes no value; vLLM refuses `--disable-hybrid-kv-cache-manager=true`"),
])
def test_command_line_problems_are_input_problems_of_the_deployment(tmp_path, command, code, message):
    write(tmp_path / "outside.yaml", "model: x\n")
    d = only(read_source(write(tmp_path / "inside" / "run.sh", command + "\n"), roots=((tmp_path / "inside").resolve(),)))
    assert d.document is None
    assert d.problems[0].code == code
    if message:
        assert d.problems[0].message == message


def test_a_model_option_without_its_value_is_one_problem(tmp_path):
    # `vllm serve --model` was two errors of the one mistake: the model's reading and the options'.
    d = only(read_source(write(tmp_path / "run.sh", "vllm serve --model\n"), roots=(tmp_path.resolve(),)))
    assert [(p.code, p.message) for p in d.problems] == [("source.missing_value", "`--model` has no value")]


def test_a_config_outside_the_roots_names_the_way_to_allow_it(tmp_path):
    write(tmp_path / "shared" / "c.yaml", f"kv-transfer-config: '{NIXL}'\n")
    script = write(tmp_path / "app" / "run.sh", "vllm serve m --config ../shared/c.yaml\n")
    refused = only(read_source(script, roots=((tmp_path / "app").resolve(),)))
    assert refused.problems[0].hint == "audit its directory too, or allow it with --config-root DIR"
    allowed = only(read_source(script, roots=((tmp_path / "app").resolve(), (tmp_path / "shared").resolve())))
    assert ktc(allowed)["kv_connector"] == "NixlConnector"


def test_a_symlink_cannot_lead_a_config_out_of_the_roots(tmp_path):
    write(tmp_path / "secret" / "c.yaml", "model: x\n")
    (tmp_path / "app").mkdir()
    os.symlink(tmp_path / "secret" / "c.yaml", tmp_path / "app" / "c.yaml")
    d = only(read_source(write(tmp_path / "app" / "run.sh", "vllm serve m --config c.yaml\n"), roots=((tmp_path / "app").resolve(),)))
    assert d.problems[0].code == "source.config_outside"


def test_notes_config_with_equals_and_abbreviated_options(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh", f"vllm serve m --config=c.yaml --kv-transfer '{NIXL}'\n")))
    assert codes(d.notes) == ["source.config_ignored", "source.abbreviated_option"]
    assert d.notes[0].message == "vLLM reads a config file only from `--config FILE`; `--config=FILE` is accepted and ignored"
    assert ktc(d)["kv_connector"] == "NixlConnector"


def test_real_vllm_options_that_look_alike_are_not_typos(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh", "vllm serve m --ec-transfer-config '{}' --kv-cache-dtype fp8\n")))
    assert d.problems == () and d.notes == ()


def test_an_unbalanced_quote_is_a_located_file_problem(tmp_path):
    source = read_source(write(tmp_path / "run.sh", "echo ok\nvllm serve m --kv-transfer-config '{\n"))
    assert codes(source.problems) == ["source.shell_syntax"]
    assert source.problems[0].line == 2


def test_a_variable_that_doubles_itself_is_bounded(tmp_path):
    text = "X=ab\n" + "X=$X$X\n" * 40 + 'vllm serve m --kv-transfer-config "$X"\n'
    d = only(read_source(write(tmp_path / "run.sh", text), limits=SourceLimits(max_variable_length=4096)))
    assert d.problems[0].code == "source.unresolved"


# -- Dockerfiles ----------------------------------------------------------------------------------------

def test_an_image_from_vllm_openai_keeps_its_vllm_serve_entrypoint(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", f"""FROM vllm/vllm-openai:v0.33.0
ENV VLLM_USE_SIMPLE_KV_OFFLOAD=1 OTHER="a b"
CMD ["org/m", "--kv-transfer-config", {json.dumps(NIXL)}]
""")
    d = only(read_source(dockerfile))
    assert (d.id, d.name) == (f"{dockerfile}:3", "org/m")
    assert ktc(d)["kv_connector"] == "NixlConnector"
    assert d.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}


def test_entrypoint_resets_cmd_and_only_the_final_stage_counts(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", """FROM vllm/vllm-openai AS serve
CMD ["a", "--disable-hybrid-kv-cache-manager"]
FROM serve AS tools
ENTRYPOINT ["python3", "tool.py"]
""")
    assert read_source(dockerfile).deployments == ()


def test_shell_form_cmd_expands_env_and_continuations(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", """# escape=\\
FROM python:3.12
ENV ROLE=kv_both
CMD vllm serve m \\
    # a comment inside a continuation
    --kv-transfer-config "{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"$ROLE\\"}"
""")
    d = only(read_source(dockerfile))
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_a_config_inside_the_image_is_found_through_copy(tmp_path):
    write(tmp_path / "serve.yaml", f"model: m\nkv-transfer-config: '{NIXL}'\n")
    good = write(tmp_path / "Dockerfile", 'FROM vllm/vllm-openai\nCOPY serve.yaml /etc/vllm/\nCMD ["--config", "/etc/vllm/serve.yaml"]\n')
    assert ktc(only(read_source(good)))["kv_connector"] == "NixlConnector"
    bad = write(tmp_path / "Dockerfile.2", 'FROM vllm/vllm-openai\nCMD ["--config", "/etc/vllm/serve.yaml"]\n')
    d = only(read_source(bad))
    assert d.problems[0].message == ("`--config /etc/vllm/serve.yaml` names a path inside the image that no COPY "
                                     "instruction of this Dockerfile provides")


# -- Kubernetes -------------------------------------------------------------------------------------------

POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  containers:
"""


def test_kubernetes_args_with_the_vllm_image_env_and_k8s_expansion(tmp_path):
    manifest = write(tmp_path / "pod.yaml", POD + f"""    - name: vllm
      image: docker.io/vllm/vllm-openai:v0.33.0
      args: [m, --kv-transfer-config, '$(KV)', --port, "$$(not)"]
      env:
        - {{name: KV, value: '{NIXL}'}}
        - {{name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: "1"}}
    - name: sidecar
      image: envoyproxy/envoy
      args: ["--config-path", "/etc/envoy.yaml"]
""")
    source = read_source(manifest)
    d = only(source)
    assert (source.format, d.id, d.name) == ("kubernetes", f"{manifest}#Pod/ns/p/vllm", "p/vllm")
    assert dict(d.resource) == {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns"}
    assert ktc(d)["kv_connector"] == "NixlConnector"
    assert d.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}


@pytest.mark.parametrize("image, note", [
    ("vllm/vllm-openai-cpu:v0.12.0", False), ("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1", False),
    ("opea/vllm-gaudi:latest", True), ("quay.io/rh-aiservices-bu/vllm-openai-ubi9:0.4.2", True)])
def test_an_image_that_runs_vllm_given_only_arguments_is_a_launch(tmp_path, image, note):
    # opea-project/GenAIExamples (15b0d46) runs vLLM as compose services, containers and
    # `docker run`s of vLLM's CPU release images and of OPEA's builds, giving only the
    # arguments: 86 launches in five repositories were neither read nor noted. vLLM's own
    # images are known by name (docker/Dockerfile.cpu: ENTRYPOINT ["vllm", "serve"]);
    # another image that names vLLM and is given `--model` is read so, and noted.
    args = f"--model m --port 80 --kv-transfer-config '{NIXL}'"
    compose = read_source(write(tmp_path / "compose.yaml", f"services:\n  vllm-service:\n    image: {image}\n"
                                                           f"    command: >-\n      {args}\n"))
    pod = read_source(write(tmp_path / "pod.yaml", POD + f"    - name: vllm\n      image: {image}\n"
                                                          f"      args: [--model, m, --kv-transfer-config, '{NIXL}']\n"))
    script = read_source(write(tmp_path / "run.sh", f"docker run -d -p 8000:80 -e HF_TOKEN=$T {image} {args}\n"))
    for source in (compose, pod, script):
        d = only(source)
        assert (ktc(d)["kv_connector"], d.document["model"]) == ("NixlConnector", {"name": "m"})
        presumed = [n for n in d.notes if n.code == "source.image_entrypoint"]
        assert [n.message for n in presumed] == ([
            f"the image `{image}` is taken to run vLLM's OpenAI server with these arguments: it names vLLM and is "
            "given options, `--model` among them, but it is not one of vLLM's release images and its entrypoint "
            "is not in this file"] if note else [])



def test_an_image_named_for_vllm_given_a_newer_option_beside_vllms_own_is_still_its_server(tmp_path):
    # llm-d/llm-d-router (survey 30c) deploy/components/vllm-decode/deployment.yaml gives `${VLLM_IMAGE}` `--port`,
    # `--model` and `--render-url`, an option of a release newer than the bundled ones: a launch (the audit notes
    # that no bundled release takes it), where a benchmark client's options beside `--model` alone are no server's.
    pod = read_source(write(tmp_path / "pod.yaml", POD + "    - name: vllm\n      image: ghcr.io/org/vllm-server:dev\n"
                                                           "      args: [--port=8200, --model=m, --render-url=http://r]\n"))
    d = only(pod)
    assert (d.document["model"], [n.code for n in d.notes]) == ({"name": "m"}, ["source.image_entrypoint", "source.release_unknown"])

@pytest.mark.parametrize("image, args", [
    ("opea/vllm-gaudi:latest", ["--port", "80"]),                    # no model: not told it is vLLM's server
    ("lmcache/lmstack-router:latest", ["--model", "m"]),             # names no vLLM
    ("ghcr.io/org/vllm-router:1", ["serve", "--model", "m"]),        # a program of its own first
    # an option no vLLM release takes beside `--model`: a benchmark client's image, its program's own options
    # (Project-HAMi/HAMi 4707fb02 benchmarks/deployments/job-on-hami.yml, built FROM python:3.12-slim; survey 35d)
    ("myreg/vllm-bench-client:latest", ["--vllm-url", "http://127.0.0.1:8000/v1", "--model", "Qwen3-8B"]),
])
def test_an_image_not_taken_for_vllms_server(tmp_path, image, args):
    pod = read_source(write(tmp_path / "pod.yaml", POD + f"    - name: c\n      image: {image}\n      args: {args}\n"))
    assert pod.deployments == ()


@pytest.mark.parametrize("merged", ["<<: {image: \"vllm/vllm-openai:v0.11.0\"}", "<<: &img {image: vllm/vllm-openai:v0.11.0}"])
def test_a_merge_key_of_a_mapping_written_in_place_is_read_as_one_of_an_alias(tmp_path, merged):
    # ddps-lab/vllm-disaggregation (6007776) .pre-commit-config.yaml: `<<: &mypy_common` then a mapping was an
    # input.parse problem ("the tag `tag:yaml.org,2002:merge` is not allowed"), and a container that merges a mapping
    # written in place lost its launch; `<<: *alias` was read (survey 33a). PyYAML and kubectl take both.
    found = read_source(write(tmp_path / "pod.yaml", (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: vllm\n    " + merged + "\n"
        "    args: [m, --kv-transfer-config, '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}']\n")))
    (d,) = found.deployments
    assert (found.problems, d.release.version, ktc(d)["kv_connector"]) == ((), "0.11.0", "NixlConnector")
    hooks = read_source(write(tmp_path / ".pre-commit-config.yaml", (
        "repos:\n- repo: local\n  hooks:\n  - id: mypy\n    <<: &common\n      language: python\n      files: ^vllm/\n"
        "  - id: mypy-2\n    <<: *common\n")))
    assert (hooks.problems, hooks.skipped) == ((), "not a deployment document, vLLM config or Kubernetes manifest")


def test_a_manifest_with_anchors_aliases_and_merge_keys_is_read_as_kubernetes_reads_it(tmp_path):
    # kubectl takes anchors and merge keys (a Dynamo graph sharing its workers'
    # `envs: &worker-env`, for one, in highopes/pd-disaggregation-demo); they
    # were an input.parse problem for the file, and its launches were lost.
    manifest = write(tmp_path / "pod.yaml", """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
x-env: &env
  - {name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: "1"}
x-base: &base
  image: vllm/vllm-openai:v0.33.0
  env: *env
spec:
  containers:
    - <<: *base
      name: vllm
      args: [m, --kv-transfer-config, '%s']
    - <<: *base
      name: script
      command: [/bin/sh, -c]
      args:
        - |
          echo starting
          vllm serve m --kv-transfer-config '%s'
""" % (NIXL, NIXL))
    source = read_source(manifest)
    first, script = source.deployments
    assert (source.format, source.problems, first.id) == ("kubernetes", (), f"{manifest}#Pod/ns/p/vllm")
    assert ktc(first)["kv_connector"] == ktc(script)["kv_connector"] == "NixlConnector"
    assert first.document["env"] == script.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    # The lines still come from the file (each container's name), and the
    # script held in a block scalar is read from the value already parsed.
    assert (first.line, script.line) == (12, 15)


def test_an_alias_bomb_in_a_manifest_is_a_located_problem_and_a_document_still_refuses_anchors(tmp_path):
    bomb = "apiVersion: v1\nkind: Pod\nimage: vllm/vllm-openai\na: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6))
    source = read_source(write(tmp_path / "bomb.yaml", bomb))
    assert [(p.code, p.line, p.message) for p in source.problems] == [
        ("input.parse", 9, f"invalid YAML in `{tmp_path / 'bomb.yaml'}` at line 9: holds more than 1000000 values "
                           "through its aliases")]
    # A deployment document is this project's format: `hma-policy decide` refuses anchors in it, so does the audit.
    document = read_source(write(tmp_path / "d.yaml", "kv_transfer_config: &k {kv_connector: NixlConnector}\n"))
    assert [(p.code, p.message) for p in document.problems] == [
        ("input.parse", f"invalid YAML in `{tmp_path / 'd.yaml'}` at line 1, column 21: YAML anchors and aliases are not allowed")]


@pytest.mark.parametrize("command", ['["/bin/bash", "-c", "--"]', '[bash, -o, pipefail, -c]', '[sh, -e, -c]',
                                     '[bash, --login, -c]'])
def test_a_shell_takes_its_script_after_all_its_options(tmp_path, command):
    # vllm-project/tpu-inference .buildkite/kubernetes/manifests/v7x/single_decode.yaml runs
    # `command: ["/bin/bash", "-c", "--"]`, `args: ["vllm serve ..."]`: `--` was read as the
    # script, and the launch was lost.
    manifest = write(tmp_path / "pod.yaml", POD + f"""    - name: vllm
      image: vllm/vllm-tpu:nightly
      command: {command}
      args:
        - |
          vllm serve --model=m --kv-transfer-config='{NIXL}'
""")
    assert ktc(only(read_source(manifest)))["kv_connector"] == "NixlConnector"


def test_a_value_from_a_secret_is_unresolved_when_the_decision_needs_it(tmp_path):
    manifest = write(tmp_path / "pod.yaml", POD + """    - name: vllm
      image: vllm/vllm-openai
      command: ["/bin/sh", "-c", "vllm serve m --kv-transfer-config \\"$KV\\""]
      env:
        - {name: KV, valueFrom: {configMapKeyRef: {name: c, key: k}}}
        - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: s, key: t}}}
""")
    d = only(read_source(manifest))
    assert d.problems[0].message == ("`--kv-transfer-config` takes its value from `$KV` (which comes from key `k` of "
                                     "ConfigMap `c`, which is not in this file)")


def test_a_config_file_comes_from_the_mounted_configmap_in_the_same_manifest(tmp_path):
    manifest = write(tmp_path / "all.yaml", f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: cfg, namespace: ns}}
data:
  vllm.yaml: |
    model: from-configmap
    kv-transfer-config: '{NIXL}'
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d, namespace: ns}}
spec:
  template:
    spec:
      volumes: [{{name: v, configMap: {{name: cfg, items: [{{key: vllm.yaml, path: serve.yaml}}]}}}}]
      containers:
        - name: vllm
          image: vllm/vllm-openai
          args: [--config, /etc/vllm/serve.yaml]
          volumeMounts: [{{name: v, mountPath: /etc/vllm}}]
        - name: other
          image: vllm/vllm-openai
          args: [--config, /srv/serve.yaml]
          volumeMounts: [{{name: v, mountPath: /etc/vllm}}]
""")
    good, bad = read_source(manifest).deployments
    assert good.document["model"] == {"name": "from-configmap"}
    assert dict(good.origins)["kv_transfer_config"] == "`ConfigMap cfg key vllm.yaml`: --kv-transfer-config"
    assert bad.problems[0].message == "`--config /srv/serve.yaml` is not in any volume of the container"


def test_kubernetes_lists_annotations_and_manifest_errors(tmp_path):
    manifest = write(tmp_path / "list.yaml", f"""apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: a
      annotations: {{hma-policy.dev/facts: '{{model: {{layer_kinds: [mamba]}}}}'}}
    spec:
      containers:
        - {{name: c, image: vllm/vllm-openai, args: [m, --kv-transfer-config, '{NIXL}', --port, 8000]}}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: b
      annotations: {{hma-policy.dev/facts: '{{kv_transfer_config: {{}}}}'}}
    spec:
      containers:
        - {{name: c, image: vllm/vllm-openai, args: [serve, m]}}
""")
    source = read_source(manifest)
    a, b = source.deployments
    assert a.problems[0].message == "Pod a, container c: args[4] must be strings; Kubernetes rejects the manifest"
    # `serve` in the image's args is the model, so vLLM's argparse refuses `m` as well.
    assert codes(b.problems) == ["source.extra_argument", "source.directive"]
    assert b.problems[0].message == ("vLLM rejects the unrecognized argument `m` (Pod b, container c): `vllm serve` "
                                     "takes one model, and no option takes this word")
    assert b.problems[1].message == ("the annotation hma-policy.dev/facts of Pod b may only give model, model_facts, platform, env; "
                                     "`kv_transfer_config` must come from the deployment itself")
    assert codes(source.problems) == ["source.serve_twice"]


# -- directives -------------------------------------------------------------------------------------------

def test_a_directive_gives_model_facts_to_the_commands_below_it(tmp_path):
    script = write(tmp_path / "run.sh", f"""vllm serve before --kv-transfer-config '{NIXL}'
# hma-policy: {{model: {{layer_kinds: [sliding_window, full_attention]}}}}
vllm serve after --kv-transfer-config '{NIXL}'
# hma-policy: {{model: {{layer_kinds: [mamba]}}}}
vllm serve last --kv-transfer-config '{NIXL}'
""")
    before, after, last = read_source(script).deployments
    assert before.document["model"] == {"name": "before"}
    assert after.document["model"] == {"layer_kinds": ["sliding_window", "full_attention"], "name": "after"}
    assert dict(after.origins)["model"] == "line 2: hma-policy directive"
    assert last.document["model"]["layer_kinds"] == ["mamba"]


def test_a_bad_directive_stops_the_deployments_it_would_describe(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh", "# hma-policy: [not, a, mapping]\nvllm serve m\n")))
    assert d.problems[0].code == "source.directive"
    assert d.problems[0].hint == "for example: # hma-policy: {model_facts: {layer_kinds: [sliding_window, full_attention]}}"


# -- robustness ---------------------------------------------------------------------------------------------

def test_utf16_and_utf32_text_is_read_as_yaml_and_json_tell_them_from_utf8(tmp_path):
    # A manifest Windows PowerShell's `>` wrote (UTF-16 with a byte-order mark, which kubectl reads) was
    # "a binary file, not text", and so was JSON test data in UTF-16 and UTF-32 without a mark
    # (rapidjson's, vendored in mlcommons/inference_results_v5.1: 16 source.binary problems, survey 37c).
    compose = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    command: [--model, m]\n"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"):
        found = read_source(write(tmp_path / "compose.yaml", compose.encode(encoding)))
        assert (found.problems, [d.line for d in found.deployments]) == ((), [2]), encoding
    # A mark, then bytes that are no UTF-16: the encoding's problem, at its byte.
    broken = read_source(write(tmp_path / "b.yaml", b"\xff\xfea\x00\x00\xd8"))
    assert [(p.code, p.message) for p in broken.problems] == [
        ("input.encoding", f"`{tmp_path / 'b.yaml'}` is not UTF-16 text (byte 4)")]


def test_binary_non_utf8_and_oversized_files_are_problems(tmp_path):
    assert codes(read_source(write(tmp_path / "a.yaml", b"\x7fELF\x00\x00binary")).problems) == ["source.binary"]
    assert codes(read_source(write(tmp_path / "b.sh", b"vllm serve \xff\xfe\n")).problems) == ["input.encoding"]
    big = read_source(write(tmp_path / "c.json", "{}" + " " * 2048), limits=SourceLimits(max_file_bytes=1024))
    assert big.problems[0].message == f"`{tmp_path / 'c.json'}` is larger than 1024 bytes"


def test_a_deeply_nested_yaml_file_is_a_problem_not_a_crash(tmp_path):
    source = read_source(write(tmp_path / "deep.yaml", "kv_transfer_config: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert source.deployments == () and source.problems and source.problems[0].code in ("input.limit", "input.parse")


def test_a_module_path_in_a_file_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    write(tmp_path / "pkg" / "evil_connector.py", f"open({str(marker)!r}, 'w').close()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    script = write(tmp_path / "run.sh", "vllm serve m --kv-transfer-config "
                   "'{\"kv_connector\": \"Evil\", \"kv_connector_module_path\": \"evil_connector\", \"kv_role\": \"kv_both\"}'\n")
    decision = hma_policy.decide(only(read_source(script)).document)
    assert decision.outcome == "undetermined"
    assert not marker.exists() and "evil_connector" not in sys.modules


SUFFIXES = ["run.sh", "Dockerfile", "d.yaml", "d.json", "k.yaml"]
TEXT = st.text(alphabet=st.sampled_from(list("vllm serve--kv-transfer-config{}[]:'\"$()`\\\n #=-_.,/abcUCX<>|&;") + ["\x00", "é"]),
               max_size=300)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(SUFFIXES), body=TEXT, prefix=st.sampled_from(["", "apiVersion: v1\nkind: Pod\n", "FROM vllm/vllm-openai\nCMD ",
                                                                          "vllm serve m ", "model: m\n"]))
def test_reading_any_text_never_raises(tmp_path_factory, name, body, prefix):
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_text(prefix + body, encoding="utf-8", errors="surrogatepass")
    source = read_source(path)
    for deployment in source.deployments:
        if deployment.document is not None:
            try:
                hma_policy.decide(deployment.document)
            except hma_policy.InputError:
                pass


def test_fifos_and_devices_are_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    assert read_source(tmp_path / "pipe.yaml").skipped == "not a regular file"
    assert read_source("/dev/zero").skipped == "not a regular file"
    os.mkfifo(tmp_path / "cfg.yaml")
    d = only(read_source(write(tmp_path / "run.sh", "vllm serve m --config cfg.yaml\n")))
    assert d.problems[0].message == f"the config file `{tmp_path / 'cfg.yaml'}` is not a regular file"


def test_files_named_like_no_source_are_not_read(tmp_path, monkeypatch):
    opened = []
    real_open, real_os_open = open, os.open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1])
    monkeypatch.setattr(os, "open", lambda f, *a, **k: (opened.append(str(f)), real_os_open(f, *a, **k))[1])
    assert read_source(write(tmp_path / "model.safetensors", b"\x00" * 4096)).skipped is not None
    assert opened == []
    assert read_source(write(tmp_path / "serve.sh", "vllm serve m\n")).format == "shell"
    assert opened == [str(tmp_path / "serve.sh")]  # the spy sees the reads it guards against


def test_a_script_without_an_extension_is_read_by_its_shebang(tmp_path):
    d = only(read_source(write(tmp_path / "start-decode", f"#!/usr/bin/env bash\nvllm serve m --kv-transfer-config '{NIXL}'\n")))
    assert (d.format, d.id) == ("shell", f"{tmp_path / 'start-decode'}:2")
    assert read_source(write(tmp_path / "notes", "vllm serve m\n")).skipped is not None


@pytest.mark.parametrize("raw, text, byte", [
    (b"\xef\xbb\xbfkv: 1\n", "kv: 1\n", None), (b"kv: 1\n", "kv: 1\n", None), (b"\xef\xbb\xbf\xff", None, 0),
    (b"a\xffb", None, 1), (b"\xef\xbb", None, 0), (b"", "", None),
])
def test_text_is_utf8_with_an_optional_byte_order_mark(raw, text, byte):
    # As the utf-8-sig codec reads it, offsets of bad bytes counted after the mark.
    from hma_policy.audit.sources import _decode

    got, problem = _decode(raw, "f")
    assert got == text
    assert (problem.message if problem else None) == (None if byte is None else f"`f` is not UTF-8 text (byte {byte})")


def test_a_file_saved_with_crlf_line_ends_reads_as_its_lf_twin(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) holds 11 manifests
    # saved with CRLF: a stream's `---\r` started no document, so the whole stream
    # was one document ("more than one YAML document; one is expected").
    stream = ("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\napiVersion: apps/v1\nkind: Deployment\n"
              "metadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: vllm\n"
              "        image: vllm/vllm-openai:v0.11.0\n        command: [vllm, serve, m]\n"
              f"        args: [--kv-transfer-config, '{NIXL}']\n")
    lf = read_source(write(tmp_path / "lf.yaml", stream))
    crlf = read_source(write(tmp_path / "crlf.yaml", stream.replace("\n", "\r\n").encode()))
    assert (crlf.format, crlf.problems, len(crlf.deployments)) == ("kubernetes", (), 1)
    same = lambda d: (d.anchor, d.line, d.name, d.document, d.problems, d.notes, d.origins, d.release, d.options)
    assert same(crlf.deployments[0]) == same(lf.deployments[0])
    assert (crlf.deployments[0].line, ktc(crlf.deployments[0])["kv_connector"]) == (14, "NixlConnector")


def test_deployments_and_source_files_are_frozen_whether_compiled_or_not():
    # Compiled (pip install .), their __init__ stores the fields directly; as
    # Python (an editable install), past __setattr__: frozen either way.
    import dataclasses
    import pickle

    from hma_policy.audit.sources import Deployment, SourceFile

    deployment = Deployment("a.json", "document", "#2", 3, "web", {"kv_transfer_config": None},
                            notes=(), origins=(("kv_transfer_config", "line 3"),))
    found = SourceFile("a.json", "document", (deployment,))
    assert [f.name for f in dataclasses.fields(Deployment)] == [
        "file", "format", "anchor", "line", "name", "document", "problems", "notes", "origins", "resource",
        "container", "role", "chain", "release", "stand_in", "paths", "options", "stood_paths"]
    assert (deployment.file, deployment.format, deployment.anchor, deployment.line, deployment.name) == (
        "a.json", "document", "#2", 3, "web")
    assert deployment.id == "a.json#2" and deployment.origins == (("kv_transfer_config", "line 3"),)
    assert found.deployments == (deployment,) and found.problems == () and found.skipped is None
    for instance, name in ((deployment, "name"), (found, "format")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(instance, name, "changed")
    assert pickle.loads(pickle.dumps(deployment)) == deployment
    assert deployment.without_document() == dataclasses.replace(deployment, document=None)
    assert Deployment("a.json", "document") == Deployment("a.json", "document", "", None, None, None, (), (), (), ())


def test_find_deployments_reads_text_in_memory_and_nothing_from_the_file_system(tmp_path, monkeypatch):
    from hma_policy.audit.sources import find_deployments

    monkeypatch.chdir(tmp_path)
    write(tmp_path / "c.yaml", f"kv-transfer-config: '{NIXL}'\n")  # there, but text in memory has no directory
    source = find_deployments("run.sh", f"vllm serve m --kv-transfer-config '{NIXL}'\nvllm serve n --config c.yaml\n")
    first, second = source.deployments
    assert (source.format, first.id, ktc(first)["kv_connector"]) == ("shell", "run.sh:1", "NixlConnector")
    assert second.problems[0].message == "`--config c.yaml` cannot be located from this file"
    pod = find_deployments("object.json", json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "vllm/vllm-openai", "args": ["m", "--kv-transfer-config", NIXL]}]}}))
    assert [d.id for d in pod.deployments] == ["object.json#Pod/p/c"]
    assert find_deployments("notes.md", "vllm serve m").skipped is not None


def test_an_oci_ai_blueprints_recipe_runs_its_image_with_its_args_and_env(tmp_path):
    # oracle-quickstart/oci-ai-blueprints (1807459d) docs/sample_blueprints/model_serving/llm_inference_with_vllm/
    # vllm-open-hf-model.json, and a deployment group's recipes (platform_features/deployment_groups/
    # llama_stack_basic.json): 19 payloads of 21 vLLM launches, each skipped as "not a deployment document".
    recipe = {"recipe_id": "llm_inference_nvidia", "recipe_mode": "service", "deployment_name": "vllm-open-hf-model",
              "recipe_image_uri": "docker.io/vllm/vllm-openai:v0.9.1",
              "recipe_container_env": [{"key": "tensor_parallel_size", "value": 2},
                                       {"key": "kv", "value": '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'}],
              "recipe_container_command_args": ["--model", "NousResearch/Meta-Llama-3-8B-Instruct",
                                                "--tensor-parallel-size", "$(tensor_parallel_size)",
                                                "--kv-transfer-config", "$(kv)"]}
    single = read_source(write(tmp_path / "vllm-open-hf-model.json", json.dumps(recipe, indent=2)))
    d = only(single)
    assert (single.format, d.line, d.release.version, ktc(d)["kv_connector"]) == (
        "oci-blueprint", 5, "0.9.1", "LMCacheConnectorV1")
    group = {"deployment_group": {"name": "group", "deployments": [
        {"name": "pool", "recipe": {"recipe_mode": "shared_node_pool", "recipe_image_uri": "x"}},
        {"name": "postgres", "recipe": {"recipe_mode": "service", "deployment_name": "postgres",
                                        "recipe_image_uri": "docker.io/library/postgres:latest"}},
        {"name": "vllm", "recipe": {**recipe, "deployment_name": "vllm", "recipe_image_uri": "vllm/vllm-openai:v0.20.0"}}]}}
    (served,) = read_source(write(tmp_path / "group.json", json.dumps(group, indent=1))).deployments
    assert (served.name, served.release.version) == ("vllm/vllm", "0.20.0")
    # The platform's own image, given only vLLM's options, is noted; its hint names the recipe's field, not a
    # Kubernetes `command:` (survey 22j).
    own = {**recipe, "recipe_image_uri": "iad.ocir.io/t/corrino-devops-repository:ray2430_vllmv083",
           "recipe_container_env": [], "recipe_container_command_args": ["--model", "/models", "--max-model-len", "8"]}
    (note,) = read_source(write(tmp_path / "own.json", json.dumps(own))).notes
    assert note.hint == ('if the image runs vLLM\'s server, write its command (`recipe_container_command: ["vllm", '
                         '"serve"]`) in the file; see docs/audit-formats.md, Images')


def test_a_template_of_many_actions_is_read_in_linear_time(tmp_path):
    # Its hint asked whether the file names a ServingRuntime once for each `{{ ... }}` action in it:
    # 16,000 of them took 3.2 s (quadratic).
    ratio = linear_ratio(lambda n: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
                                   "spec:\n  template:\n    spec:\n      containers:\n      - name: v\n"
                                   "        image: vllm/vllm-openai:v0.10.0\n        args:\n"
                                   + "".join(f"        - --a{i}={{{{ .Values.a{i} }}}}\n" for i in range(n)),
                         4000, tmp_path, "deploy.yaml")
    assert ratio < 3.0, ratio

