"""Ray Serve LLM configs and KubeRay RayServices (audit/sources/rayserve.py).
The fleet corpus (tests/fleet_corpus/ray-project__*) holds real files; these
cover the forms and failures the corpus does not, on small files written as
Ray's users write them."""

from __future__ import annotations

from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.release import ReleaseHint

LMCACHE = "{kv_connector: LMCacheConnectorV1, kv_role: kv_both}"


def read(tmp_path: Path, name: str, text: str, roots: tuple[Path, ...] = ()):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return read_source(path, display=name, roots=roots or (tmp_path.resolve(),))


def outcome(deployment) -> str:
    assert deployment.document is not None, deployment.problems
    return hma_policy.decide(deployment.document).outcome


def test_each_llm_config_of_build_openai_app_is_a_deployment_with_what_the_decision_reads(tmp_path):
    found = read(tmp_path, "serve.yaml", f"""\
applications:
- name: llms
  import_path: ray.serve.llm:build_openai_app
  runtime_env: {{env_vars: {{LMCACHE_USE_UPSTREAM_MP: "0", HF_HOME: /cache}}}}
  args:
    llm_configs:
    - model_loading_config: {{model_id: small, model_source: Qwen/Qwen3-0.6B}}
      engine_kwargs:
        max_model_len: 1024
        device: auto
        kv_transfer_config: {LMCACHE}
      runtime_env: {{env_vars: {{LMCACHE_USE_UPSTREAM_MP: "1"}}}}
    - model_loading_config: {{model_id: Qwen/Qwen3-8B}}
      engine_kwargs: {{disable_hybrid_kv_cache_manager: true}}
- name: other
  import_path: app:build
""")
    assert (found.format, found.problems) == ("ray-serve", ())
    first, second = found.deployments
    assert (first.id, first.line, first.name, first.role) == ("serve.yaml#llms/llm_configs/0", 7, "small", None)
    # engine_kwargs the decision does not read (vLLM's field names, not its options) are left out;
    # the config's env_vars win over the application's, and only the variables the decision reads are kept
    assert first.document == {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
                              "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}, "model": {"name": "Qwen/Qwen3-0.6B"}}
    assert dict(first.origins) == {"kv_transfer_config": "line 11: engine_kwargs.kv_transfer_config",
                                   "env": "runtime_env.env_vars", "model": "line 7: model_loading_config"}
    assert outcome(first) == "disabled"
    # a config without env_vars of its own runs with the application's
    assert second.document == {"disable_hybrid_kv_cache_manager": True, "env": {"LMCACHE_USE_UPSTREAM_MP": "0"},
                               "model": {"name": "Qwen/Qwen3-8B"}}
    assert (second.id, second.line) == ("serve.yaml#llms/llm_configs/1", 13)


def test_prefill_and_decode_without_a_kv_transfer_config_get_rays_default_and_a_note(tmp_path):
    text = """\
applications:
- name: pd
  import_path: {builder}
  args:
    prefill_config:
      model_loading_config: {{model_id: m}}
    decode_config:
      model_loading_config: {{model_id: m}}
      engine_kwargs: {{kv_transfer_config: {{kv_connector: NixlConnector, kv_role: kv_consumer}}}}
"""
    found = read(tmp_path, "pd.yaml", text.format(builder="ray.serve.llm:build_pd_openai_app"))
    prefill, decode = found.deployments
    assert (prefill.role, prefill.line, decode.role, decode.line) == ("prefill", 5, "decode", 7)
    assert prefill.document["kv_transfer_config"] == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert dict(prefill.origins)["kv_transfer_config"] == "Ray's default for prefill/decode (2.47-2.50)"
    assert [(n.code, n.line, n.message) for n in prefill.notes] == [
        ("source.deployer_default", 5, "the prefill config sets no `engine_kwargs.kv_transfer_config`: Ray 2.47-2.50 "
         "add NixlConnector (kv_both), as decided here; Ray 2.51 and later refuse the application")]
    assert decode.notes == () and decode.document["kv_transfer_config"]["kv_role"] == "kv_consumer"
    # Ray 2.47-2.48's builder exists only where the default applies: no note
    old = read(tmp_path, "old.yaml", text.format(
        builder="ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app"))
    assert old.deployments[0].notes == () and outcome(old.deployments[0]) == "enabled"
    # Ray's own P/D example app adds the default wherever it runs (ray-project/ray's
    # release/llm_tests/serve/configs/serve_qwen3_0dot6B_1p1d.yaml was skipped as no deployment).
    example = read(tmp_path, "example.yaml", text.format(builder="ray.serve.llm.examples.pd_disagg.app:build_app"))
    prefill, _ = example.deployments
    assert (prefill.notes, dict(prefill.origins)["kv_transfer_config"]) == (
        (), "Ray's default for prefill/decode (its P/D example app)")
    assert prefill.document["kv_transfer_config"] == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_the_openai_builder_before_ray_serve_llm_exported_it_takes_a_list(tmp_path):
    # ray-project/ray python/ray/llm/tests/serve/cpu/builders/test_config_files/
    # llm_app_separate_model_config_files.yaml: skipped as no deployment.
    found = read(tmp_path, "app.yaml", f"""\
applications:
- import_path: ray.llm._internal.serve.builders.application_builders:build_openai_app
  args:
    llm_configs:
    - model_loading_config: {{model_id: m}}
      engine_kwargs: {{kv_transfer_config: {LMCACHE}}}
""")
    (only,) = found.deployments
    assert (only.id, only.line, outcome(only)) == ("app.yaml#0/llm_configs/0", 5, "disabled")


def test_the_data_parallel_builder_takes_one_llm_config(tmp_path):
    found = read(tmp_path, "dp.yaml", f"""\
applications:
- import_path: ray.serve.llm:build_dp_openai_app
  args:
    llm_config:
      model_loading_config: {{model_id: m}}
      engine_kwargs: {{data_parallel_size: 2, kv_transfer_config: {LMCACHE}}}
""")
    (only,) = found.deployments
    assert (only.id, only.line, outcome(only)) == ("dp.yaml#0/llm_config", 4, "disabled")


def test_an_llm_config_file_is_found_where_serve_run_runs_or_reported_missing(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "model.yaml").write_text(f"""\
model_loading_config:
  model_id: m
engine_kwargs:
  kv_transfer_config: {LMCACHE}
""", encoding="utf-8")
    # the path is relative to where `serve run` runs (tmp_path), not to the Serve config's folder
    found = read(tmp_path, "serve/configs/serve.yaml", f"""\
applications:
- import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs:
    - ./configs/model.yaml
    - ./configs/absent.yaml
    - [not, a, mapping]
    - "a\\0b"
    - {"x" * 5000}
""")
    there, absent, shapeless, nul, long = found.deployments
    assert (there.line, outcome(there)) == (5, "disabled")
    assert there.chain == ("serve/configs/serve.yaml", str(tmp_path / "configs" / "model.yaml"))
    assert dict(there.origins)["kv_transfer_config"] == \
        f"{tmp_path / 'configs' / 'model.yaml'}, line 4: engine_kwargs.kv_transfer_config"
    assert absent.document is None
    assert [(p.code, p.line) for p in absent.problems] == [("source.config_missing", 6)]
    assert "`./configs/absent.yaml` is not beside this file or in a folder above it" in absent.problems[0].message
    assert [(p.code, p.message) for p in shapeless.problems] == [
        ("source.config_shape", "the LLM config at `0/llm_configs/2` is not a mapping")]
    # names the file system refuses (a NUL, too long) are files not found, never an exception
    assert [p.code for d in (nul, long) for p in d.problems] == ["source.config_missing"] * 2
    # a folder above the audited paths is not looked in
    inner = read(tmp_path, "serve/configs/again.yaml", "applications:\n- import_path: ray.serve.llm:build_openai_app\n"
                 "  args: {llm_configs: [./configs/model.yaml]}\n", roots=((tmp_path / "serve").resolve(),))
    assert [p.code for p in inner.deployments[0].problems] == ["source.config_missing"]


def test_a_rayservice_serve_config_is_read_with_its_lines_and_its_images_release(tmp_path):
    service = """\
apiVersion: ray.io/v1
kind: RayService
metadata: {{name: svc, namespace: team}}
spec:
  serveConfigV2: |
    applications:
    - name: app
      import_path: ray.serve.llm:build_openai_app
      args:
        llm_configs:
        - model_loading_config: {{model_id: m}}
          engine_kwargs:
            kv_transfer_config: {{kv_connector: NixlConnector, kv_role: kv_both}}
  rayClusterConfig:
    headGroupSpec:
      template: {{spec: {{containers: [{{name: head, image: {head}}}]}}}}
    workerGroupSpecs:
    - template: {{spec: {{containers: [{{name: gpu, image: {worker}}}]}}}}
"""
    found = read(tmp_path, "svc.yaml", service.format(head="rayproject/ray-llm:2.60.0-py311-cu128",
                                                      worker="docker.io/rayproject/ray-llm:2.60.1-py311-cu128"))
    (only,) = found.deployments
    assert (only.id, only.line, only.format) == ("svc.yaml#RayService/team/svc/app/llm_configs/0", 11, "ray-serve")
    assert dict(only.resource) == {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "namespace": "team"}
    assert dict(only.origins)["kv_transfer_config"] == "line 13: engine_kwargs.kv_transfer_config"
    assert (only.release.version, only.release.origin) == (
        "0.29.0", "image tag docker.io/rayproject/ray-llm:2.60.1-py311-cu128: Ray 2.60 pins vllm==0.29.0")
    assert only.notes == () and outcome(only) == "enabled"
    # another image names no vLLM release: noted
    other = read(tmp_path, "other.yaml", service.format(head="rayproject/ray:2.60.0", worker="my/ray:1"))
    assert [n.message for n in other.deployments[0].notes] == [
        "the vLLM release is not known: image my/ray:1 is not Ray's LLM image (rayproject/ray-llm): its tag is not "
        "read as a vLLM release"]
    # awslabs/data-on-eks (a546a19) data-stacks/ray-on-eks/examples/ray-batch-inference/03-rayservice-deepseek-r1-8b.yaml
    # runs Ray's LLM image mirrored to ECR under its name alone; the tag its deploy.sh renders names Ray
    # 2.56. The rendered image was "not Ray's LLM image", and so was the unrendered one, whose tag is the
    # placeholder (envsubst's, which the file does not expand).
    mirrored = read(tmp_path, "mirror.yaml", service.format(
        head="rayproject/ray:2.56.0", worker="123456789012.dkr.ecr.us-west-2.amazonaws.com/ray-llm:2.56.0-py312-cu130"))
    assert mirrored.deployments[0].release.version == "0.22.0"
    # aws/deep-learning-containers (e0ecede) test/ray-llm/eks-multi-node/rayservice.yml: `image: "${IMAGE_URI}"`,
    # rendered by envsubst, may be Ray's LLM image or another: not "not Ray's LLM image" (survey 27d).
    placeholder = read(tmp_path, "placeholder.yaml", service.format(head="rayproject/ray:2.56.0", worker='"${IMAGE_URI}"'))
    assert [n.message for n in placeholder.deployments[0].notes] == [
        "the vLLM release is not known: image ${IMAGE_URI}: the image is not known from this file"]
    unknown = read(tmp_path, "unknown.yaml", service.format(head="rayproject/ray:2.56.0",
                                                            worker="$ECR_REGISTRY/ray-llm:$RAY_LLM_TAG"))
    assert [n.message for n in unknown.deployments[0].notes] == [
        "the vLLM release is not known: image tag $ECR_REGISTRY/ray-llm:$RAY_LLM_TAG: no Ray release in the tag"]
    # The same file declares its cluster's Ray release (`rayVersion: "2.56.0"`, which KubeRay asks to match
    # the image's): where the tag gives none, that one names the image's (survey 20o).
    declared = read(tmp_path, "declared.yaml", service.format(head="rayproject/ray:2.56.0", worker="$ECR_REGISTRY/ray-llm:"
                                                              "$RAY_LLM_TAG").replace("  rayClusterConfig:\n",
                                                                                      "  rayClusterConfig:\n    rayVersion: '2.56.0'\n"))
    assert declared.deployments[0].release == ReleaseHint("0.22.0", (
        "image $ECR_REGISTRY/ray-llm:$RAY_LLM_TAG, of the Ray release rayVersion 2.56.0 declares: Ray 2.56 pins "
        "vllm==0.22.0"))


def test_a_rayservice_whose_serve_config_is_not_yaml_is_a_located_file_problem(tmp_path):
    found = read(tmp_path, "bad.yaml", """\
apiVersion: ray.io/v1
kind: RayService
metadata: {name: svc}
spec:
  serveConfigV2: |
    applications: [
""")
    assert found.deployments == ()
    ((code, line, message),) = [(p.code, p.line, p.message) for p in found.problems]
    assert (code, line) == ("input.parse", 5)
    assert message.startswith("`spec.serveConfigV2` of RayService svc is not valid YAML (its line ")


def test_a_directive_above_an_llm_config_gives_its_facts(tmp_path):
    found = read(tmp_path, "facts.yaml", """\
applications:
- import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs:
    # hma-policy: {model_facts: {layer_kinds: [mamba, full_attention]}, vllm_version: "0.30.0"}
    - model_loading_config: {model_id: m}
""")
    (only,) = found.deployments
    assert only.document["model"] == {"name": "m"} and only.document["model_facts"]["layer_kinds"] == \
        ["mamba", "full_attention"]
    assert (only.release.version, only.release.origin) == ("0.30.0", "line 5: hma-policy directive")


def test_a_serve_config_without_an_llm_builder_is_no_deployment(tmp_path):
    found = read(tmp_path, "plain.yaml", "applications:\n- import_path: app:build\n  args: {kv_transfer_config: x}\n")
    assert (found.format, found.deployments) == (None, ())
    # an import path that is no string (a fuzzed file's list raised TypeError, unhashable)
    odd = read(tmp_path, "odd.yaml", "applications:\n- import_path: [ray.serve.llm:build_openai_app]\n")
    assert (odd.format, odd.deployments, odd.problems) == (None, (), ())


RAY_SERVICE_OF_MODULE = """\
apiVersion: ray.io/v1
kind: RayService
metadata: {{name: {name}}}
spec:
  serveConfigV2: |
    applications:
    - name: llm
      import_path: ai-ml.rayserve.llm.serve:model
      runtime_env:
        working_dir: "https://github.com/GoogleCloudPlatform/kubernetes-engine-samples/archive/main.zip"
        pip: [{pip}]
"""


def test_a_launcher_a_rayservice_runs_takes_the_release_its_runtime_env_pins(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) ai-ml/gke-ray/rayserve/llm: RayServices run
    # `import_path: ai-ml.gke-ray.rayserve.llm.serve_chat_completion:model` with `runtime_env.pip:
    # ["vllm==0.4.3", ...]`; the module's AsyncEngineArgs were decided as the default release, `enabled`:
    # 0.4.3 has no HMA (survey 27a).
    module = tmp_path / "ai-ml" / "rayserve" / "llm" / "serve.py"
    module.parent.mkdir(parents=True)
    module.write_text("from vllm import AsyncEngineArgs\nargs = AsyncEngineArgs(model='m')\n", encoding="utf-8")
    (module.parent / "a.yaml").write_text(RAY_SERVICE_OF_MODULE.format(name="a", pip='"vllm==0.4.3", "torch"'),
                                          encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.format == "python"]
    assert (entry.deployment.release.version, entry.decision["outcome"]) == ("0.4.3", "disabled")
    assert entry.deployment.release.origin == (
        f"pip pin vllm==0.4.3 in the runtime_env of RayService a in {tmp_path}/ai-ml/rayserve/llm/a.yaml (import_path "
        "`ai-ml.rayserve.llm.serve:model`), whose application runs this file")
    # Another RayService runs it with whatever `vllm` is newest: which release runs is not known.
    (module.parent / "b.yaml").write_text(RAY_SERVICE_OF_MODULE.format(name="b", pip='"vllm"'), encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.format == "python"]
    assert entry.deployment.release.version is None
    assert entry.deployment.release.origin == (
        f"the RayServices whose applications run this file run different vLLM releases: no pin in "
        f"RayService b in {tmp_path}/ai-ml/rayserve/llm/b.yaml (import_path `ai-ml.rayserve.llm.serve:model`); pip pin "
        f"vllm==0.4.3 in the runtime_env of RayService a in {tmp_path}/ai-ml/rayserve/llm/a.yaml (import_path "
        "`ai-ml.rayserve.llm.serve:model`)")


RAY_SERVICE_WITH_IMAGE = RAY_SERVICE_OF_MODULE + """\
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            image: {image}
"""


@pytest.mark.parametrize("image, pip, release, origin", [
    # a vLLM release image: its tag
    ("vllm/vllm-openai:v0.8.5", '"torch"', "0.8.5", "image tag vllm/vllm-openai:v0.8.5"),
    # Ray's LLM image: the vLLM its Ray release pins (deployers.yaml)
    ("rayproject/ray-llm:2.58.0-py311-cu128", '"torch"', "0.26.0",
     "image tag rayproject/ray-llm:2.58.0-py311-cu128: Ray 2.58 pins vllm==0.26.0"),
    # another image: not known, and said
    ("rayproject/ray-ml:2.9.0-gpu", '"torch"', None,
     "image rayproject/ray-ml:2.9.0-gpu is not vLLM's release image: its tag is not read as a vLLM release"),
    # `vllm` unpinned: whatever is newest when the cluster starts
    ("vllm/vllm-openai:v0.8.5", '"vllm"', None, "no pin"),
    # an image envsubst fills in
    ("$VLLM_IMAGE", '"torch"', None, "image $VLLM_IMAGE: the image is not known from this file"),
])
def test_a_launcher_a_rayservice_runs_unpinned_takes_the_release_of_its_image(tmp_path, image, pip, release, origin):
    # nebius/nebius-k8s-applications (33d1419) vllm/chart: a RayService runs `import_path: serve:model` in image
    # `.../vllm/vllm-openai:v0.8.5-ray` with no runtime_env pip; its serve.py's AsyncEngineArgs was decided at the
    # default release, with no note (survey 30a). Ray imports the module where the image's vLLM is installed.
    module = tmp_path / "ai-ml" / "rayserve" / "llm" / "serve.py"
    module.parent.mkdir(parents=True)
    module.write_text("from vllm import AsyncEngineArgs\nargs = AsyncEngineArgs(model='m')\n", encoding="utf-8")
    (module.parent / "a.yaml").write_text(RAY_SERVICE_WITH_IMAGE.format(name="a", pip=pip, image=image),
                                          encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.format == "python"]
    served = f"RayService a in {tmp_path}/ai-ml/rayserve/llm/a.yaml (import_path `ai-ml.rayserve.llm.serve:model`)"
    if release is None:  # (decided as the default release, with a source.release_unknown note)
        assert (entry.deployment.release.version, entry.decision["outcome"]) == (None, "enabled")
        assert entry.deployment.release.origin == (f"{origin}, in {served}" if origin != "no pin" else
                                                   f"no pin in {served}") + ", whose application runs this file"
    else:  # (vLLM 0.8.5 has no HMA; 0.26.0 turns it on)
        assert (entry.deployment.release.version, entry.decision["outcome"]) == (
            release, "disabled" if release == "0.8.5" else "enabled")
        assert entry.deployment.release.origin == f"{origin}, in {served}, whose application runs this file"


def test_a_ray_serve_llm_config_is_read_in_a_file_that_names_no_vllm(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) ai-ml/gke-ray/rayserve/llm/tpu/serve_tpu_multihost.py
    # was read only for a comment that says "vLLM": without it, the file was skipped (survey 27a).
    (d,) = read(tmp_path, "serve.py", """\
from ray.serve.llm import LLMConfig, LLMServingArgs, build_openai_app
llm_config = LLMConfig(model_loading_config=dict(model_id="google/gemma-4-31B-it"), engine_kwargs={"max_model_len": 8})
deployment = build_openai_app(LLMServingArgs(llm_configs=[llm_config]))
""").deployments
    assert (d.line, d.document["model"], outcome(d)) == (2, {"name": "google/gemma-4-31B-it"}, "enabled")


def test_rays_llm_configs_built_in_python_are_engine_launches(tmp_path):
    # Ray Data's batch processor and Ray Serve LLM's config, built in Python, start vLLM engines from their
    # `engine_kwargs` (project-codeflare/codeflare-sdk d5acd62c simple_batch_inf.py; anyscale/templates'
    # serve_*.py; awslabs/data-on-eks's RayJob script): no launch was read, and a KV config in the
    # kwargs was a `source.unrecognized` mention (surveys 20l, 20o, 20s).
    batch = read(tmp_path, "batch.py", """\
from ray.data.llm import build_llm_processor, vLLMEngineProcessorConfig
config = vLLMEngineProcessorConfig(
    model_source="unsloth/Llama-3.2-1B-Instruct",
    engine_kwargs=dict(max_model_len=1024,
                       kv_transfer_config={"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}))
processor = build_llm_processor(config)
""")
    (d,) = batch.deployments
    assert (d.line, d.format, d.document["model"], outcome(d)) == (
        2, "python", {"name": "unsloth/Llama-3.2-1B-Instruct"}, "disabled")
    serve = read(tmp_path, "serve_llm.py", """\
import ray.serve.llm
kwargs = {"tensor_parallel_size": 2, "disable_hybrid_kv_cache_manager": True}
config = ray.serve.llm.LLMConfig(model_loading_config={"model_id": "qwen", "model_source": "Qwen/Qwen2.5-7B"},
                                 engine_kwargs=kwargs)
""")
    (d,) = serve.deployments
    assert (d.line, d.document["model"], d.notes, outcome(d)) == (3, {"name": "Qwen/Qwen2.5-7B"}, (), "disabled")
    # Another library's class of the same name is none; a callee that is no name is read past (it raised).
    assert read(tmp_path, "other.py", "from mylib import LLMConfig\nLLMConfig(engine_kwargs={'x': 1})\n").deployments == ()
    calls = read(tmp_path, "calls.py", "from ray.data.llm import vLLMEngineProcessorConfig\nfs = [print]\nfs[0]()\n"
                                       "(lambda: 1)()\nvLLMEngineProcessorConfig(model_source='m')\n")
    assert ([d.line for d in calls.deployments], calls.problems) == ([5], ())


def test_the_environment_a_ray_llm_config_built_in_python_gives_its_engine_is_read(tmp_path):
    # anyscale/e2e-llm-workflows (8d568e8b) README.ipynb: `vLLMEngineProcessorConfig(..., runtime_env={"env_vars":
    # {"VLLM_USE_V1": "0"}})`. Ray starts the engine's actors in that environment, as the YAML form's
    # runtime_env.env_vars is read (rayserve.py); in Python it was not (survey 38b).
    kv = '{"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"}'
    batch = read(tmp_path, "batch.py", f"""\
from ray.data.llm import vLLMEngineProcessorConfig
config = vLLMEngineProcessorConfig(
    model_source="m",
    runtime_env={{"env_vars": {{"LMCACHE_USE_UPSTREAM_MP": "1"}}}},
    engine_kwargs={{"kv_transfer_config": {kv}}})
""")
    (d,) = batch.deployments
    assert (d.document["env"], dict(d.origins)["env"], outcome(d)) == (
        {"LMCACHE_USE_UPSTREAM_MP": "1"}, "line 4: runtime_env", "disabled")
    # Ray Serve's LLMConfig, its runtime_env held by a name; without one the engine is LMCacheMPConnector's.
    serve = read(tmp_path, "serve.py", f"""\
from ray.serve.llm import LLMConfig
env = {{"env_vars": {{"LMCACHE_USE_UPSTREAM_MP": "1"}}}}
config = LLMConfig(model_loading_config={{"model_id": "m"}}, runtime_env=env, engine_kwargs={{"kv_transfer_config": {kv}}})
""")
    assert outcome(serve.deployments[0]) == "disabled"
    plain = read(tmp_path, "plain.py", f"""\
from ray.serve.llm import LLMConfig
config = LLMConfig(model_loading_config={{"model_id": "m"}}, engine_kwargs={{"kv_transfer_config": {kv}}})
""")
    assert outcome(plain.deployments[0]) == "enabled"


def test_a_launcher_whose_rayservice_s_image_is_not_known_takes_the_image_a_dockerfile_copies_it_into(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) ai-ml/gke-ray/rayserve/llm/tpu: the RayService runs
    # `image: $CUSTOM_IMAGE_URI`, which the Dockerfile beside the module builds (`COPY serve_tpu_multihost.py`):
    # the Dockerfile's base image says more than a placeholder does.
    module = tmp_path / "ai-ml" / "rayserve" / "llm" / "serve.py"
    module.parent.mkdir(parents=True)
    module.write_text("from vllm import AsyncEngineArgs\nargs = AsyncEngineArgs(model='m')\n", encoding="utf-8")
    (module.parent / "a.yaml").write_text(RAY_SERVICE_WITH_IMAGE.format(name="a", pip='"torch"', image="$IMAGE"),
                                          encoding="utf-8")
    (module.parent / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.9.0\nCOPY serve.py /app/serve.py\n",
                                              encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.format == "python"]
    assert (entry.deployment.release.version, entry.decision["outcome"]) == ("0.9.0", "disabled")
    assert entry.deployment.release.origin.startswith("image tag vllm/vllm-openai:v0.9.0 in ")
