"""The platform vLLM runs on (`platform.name`): the rules of each release know
what it supports (docs/vllm-releases.md §4), and the audit reads it from the
images of vLLM's CPU build and AMD's ROCm image (audit.sources.release)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.release import ReleaseHint, from_image, platform_of
from hma_policy.core.facts import extract
from hma_policy.core.markers import unresolved
from sourcefiles import only, write

NOT_CUDA_OR_ROCM = "vLLM before 0.10.2 runs the hybrid KV cache manager only on CUDA and ROCm"
TPU_BEFORE = ("the TPU platform does not support the hybrid KV cache manager before vLLM 0.12.0 (vLLM's own "
              "TpuPlatform, tpu_commons' and tpu-inference's before v0.12.0 define no support_hybrid_kv_cache() and "
              "inherit the base Platform's false)")
HPU_BEFORE = ("Intel Gaudi's HPU platform does not support the hybrid KV cache manager before vLLM 0.14.1 "
              "(vllm-gaudi's HpuPlatform inherits support_hybrid_kv_cache() false until then)")


def facts_of(document):
    return extract(hma_policy.core.input.prepare(document), frozenset()).document


def test_the_platform_name_is_a_fact_of_the_document():
    assert facts_of({}).platform_name == ""
    assert facts_of({"platform": {"name": "cpu"}}).platform_name == "cpu"
    with pytest.raises(hma_policy.InputError) as refused:
        hma_policy.decide({"platform": {"name": "tt"}})  # (Tenstorrent's plugin: no platform the rules hold)
    assert [(p.code, p.path) for p in refused.value.problems] == [("input.schema", "/platform/name")]


@pytest.mark.parametrize(("release", "platform", "outcome", "reason"), [
    # vLLM 0.9.1 to 0.10.1.1: HMA only where current_platform.is_cuda() or is_rocm().
    ("0.9.2", "cpu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.1.1", "cpu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.1", "xpu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.1", "rocm", "enabled", None),
    ("0.10.1", "cuda", "enabled", None),
    # 0.10.2: current_platform.support_hybrid_kv_cache(), true for CUDA, ROCm and CPU; XPU from 0.11.0.
    ("0.10.2", "cpu", "enabled", None),
    ("0.10.2", "xpu", "disabled", "the XPU platform does not support the hybrid KV cache manager before vLLM 0.11.0"),
    ("0.11.0", "xpu", "enabled", None),
    ("0.33.0", "cpu", "enabled", None),
    # Ascend (vllm-ascend): its NPUPlatform defines support_hybrid_kv_cache() -> True from v0.10.2rc1.
    ("0.9.1", "npu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.1.1", "npu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.2", "npu", "enabled", None),
    ("0.33.0", "npu", "enabled", None),
    # Intel Gaudi (vllm-gaudi): its HpuPlatform defines support_hybrid_kv_cache() -> True from v0.14.1,
    # and inherits the base Platform's false before (vllm-project/vllm-gaudi vllm_gaudi/platform.py).
    ("0.10.1", "hpu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.11.0", "hpu", "disabled", HPU_BEFORE),
    ("0.12.0", "hpu", "disabled", HPU_BEFORE),
    ("0.14.0", "hpu", "disabled", HPU_BEFORE),
    ("0.14.1", "hpu", "enabled", None),
    ("0.33.0", "hpu", "enabled", None),
    # TPU: vLLM's own TpuPlatform (0.10.2 - 0.11.0, also tpu_commons') and tpu-inference's before v0.12.0 define
    # no support_hybrid_kv_cache(); tpu-inference's returns True from v0.12.0 (vllm-project/tpu-inference cfc76100).
    ("0.10.1", "tpu", "disabled", NOT_CUDA_OR_ROCM),
    ("0.10.2", "tpu", "disabled", TPU_BEFORE),
    ("0.11.0", "tpu", "disabled", TPU_BEFORE),
    ("0.11.2", "tpu", "disabled", TPU_BEFORE),
    ("0.12.0", "tpu", "enabled", None),
    ("0.33.0", "tpu", "enabled", None),
])
def test_each_release_knows_what_its_platforms_support(release, platform, outcome, reason):
    decision = hma_policy.decide({"vllm_version": release, "platform": {"name": platform}})
    assert decision.outcome == outcome
    assert (reason in decision.reasons) if reason else not any("platform" in r.lower() for r in decision.reasons)


def test_hisparse_needs_cuda_whatever_names_the_platform():
    hisparse = {"vllm_version": "0.33.0", "hisparse_config": {}}
    assert hma_policy.decide(hisparse).outcome == "enabled"
    for platform in ({"is_cuda": False}, {"name": "rocm"}, {"name": "cpu"}, {"name": "npu"}, {"name": "hpu"},
                     {"name": "tpu"}):
        decision = hma_policy.decide({**hisparse, "platform": platform})
        assert [(e.code, e.path) for e in decision.errors] == [
            ("hisparse.requires_cuda", "/platform/is_cuda" if "is_cuda" in platform else "/platform/name")]
    assert hma_policy.decide({**hisparse, "platform": {"name": "cuda"}}).outcome == "enabled"


CPU_COMPOSE = """services:
  vllm-service:
    image: public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:{tag}
    environment:
      VLLM_CPU_KVCACHE_SPACE: 40
    command: --model meta-llama/Meta-Llama-3-8B-Instruct --host 0.0.0.0 --port 80
"""


def test_vllms_cpu_image_runs_on_the_cpu_platform(tmp_path):
    # opea-project/GenAIExamples (15b0d46) ChatQnA/docker_compose/intel/cpu/xeon/compose.yaml: 28
    # services on vLLM's CPU image v0.10.1 were decided enabled, as if on CUDA.
    old = write(tmp_path / "old" / "compose.yaml", CPU_COMPOSE.format(tag="v0.10.1"))
    new = write(tmp_path / "new" / "compose.yaml", CPU_COMPOSE.format(tag="v0.10.2"))
    (d,) = read_source(old).deployments
    assert d.document["platform"] == {"name": "cpu"}
    assert dict(d.origins)["platform"] == "image public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1"
    report = audit([str(old), str(new)])
    assert [(e.decision["vllm"]["release"], e.decision["outcome"], NOT_CUDA_OR_ROCM in e.decision["reasons"])
            for e in report.entries] == [("0.10.1", "disabled", True), ("0.10.2", "enabled", False)]


def test_openeulers_cpu_image_names_its_release_and_the_cpu_platform(tmp_path):
    # opea-project/GenAIExamples (15b0d468) ChatQnA/docker_compose/intel/cpu/xeon/compose_openeuler.yaml
    # L90: `image: openeuler/vllm-cpu:0.10.1-oe2403lts`, a CPU build of vLLM v0.10.1
    # (openeuler-mirror/openeuler-docker-images AI/vllm-cpu/0.10.1/24.03-lts/Dockerfile). Four such
    # services were decided as 0.33.0 on CUDA, `enabled`, beside the same stacks' `disabled` ones on
    # vLLM's own CPU image.
    compose = write(tmp_path / "compose_openeuler.yaml", CPU_COMPOSE.format(tag="v0.10.1").replace(
        "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1", "openeuler/vllm-cpu:0.10.1-oe2403lts"))
    (d,) = read_source(compose).deployments
    assert (d.document["platform"], d.release.version, d.release.origin) == (
        {"name": "cpu"}, "0.10.1", "image tag openeuler/vllm-cpu:0.10.1-oe2403lts (openEuler's CPU build of vLLM 0.10.1)")
    (entry,) = audit([str(compose)]).entries
    assert (entry.decision["outcome"], NOT_CUDA_OR_ROCM in entry.decision["reasons"]) == ("disabled", True)
    # Given no command, the image runs vLLM's server (its ENTRYPOINT); a tag of another form names no release.
    bare = write(tmp_path / "b" / "compose.yaml", "services:\n  vllm:\n    image: openeuler/vllm-cpu:latest\n")
    (d,) = read_source(bare).deployments
    assert (d.document["platform"], d.release.version) == ({"name": "cpu"}, None)


def test_a_directive_names_the_platform_over_the_image_and_cuda_images_name_none(tmp_path):
    directed = write(tmp_path / "a" / "compose.yaml", "# hma-policy: {platform: {name: rocm}}\n"
                     + CPU_COMPOSE.format(tag="v0.10.1"))
    (d,) = read_source(directed).deployments
    assert d.document["platform"] == {"name": "rocm"}
    cuda = write(tmp_path / "b" / "compose.yaml", CPU_COMPOSE.format(tag="v0.10.1").replace(
        "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo", "vllm/vllm-openai"))
    (d,) = read_source(cuda).deployments
    assert "platform" not in d.document and "platform" not in dict(d.origins)
    pod = write(tmp_path / "c" / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
                "  - name: vllm\n    image: rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909\n    args: [--model, m]\n")
    (d,) = read_source(pod).deployments
    assert (d.document["platform"], d.release.version) == ({"name": "rocm"}, "0.10.1")


@pytest.mark.parametrize(("image", "release", "origin"), [
    # vllm-project/vllm-ascend: a release tag with the variants its image workflows push.
    ("quay.io/ascend/vllm-ascend:v0.9.2rc1", "0.9.2", "vllm-ascend 0.9.2rc1, on vLLM 0.9.2"),
    ("quay.io/ascend/vllm-ascend:v0.23.0-a3-openeuler", "0.23.0", "vllm-ascend 0.23.0, on vLLM 0.23.0"),
    ("quay.io/ascend/vllm-ascend:v0.18.0-310p", "0.18.0", "vllm-ascend 0.18.0, on vLLM 0.18.0"),
    ("quay.io/ascend/vllm-ascend:v0.23.0.post1", "0.23.0", "vllm-ascend 0.23.0.post1, on vLLM 0.23.0"),
    # Releases whose root Dockerfile builds on another vLLM than the number says (ARG VLLM_TAG).
    ("quay.io/ascend/vllm-ascend:v0.10.1rc1", "0.10.1.1", "vllm-ascend 0.10.1rc1, on vLLM 0.10.1.1"),
    ("quay.io/ascend/vllm-ascend:v0.14.0rc1-a3", "0.14.1", "vllm-ascend 0.14.0rc1, on vLLM 0.14.1"),
    ("quay.io/ascend/vllm-ascend:v0.11.0rc0", "0.11.0rc3", "vllm-ascend 0.11.0rc0, on vLLM 0.11.0rc3"),
])
def test_vllm_ascends_release_images_name_the_vllm_release_they_run_and_the_npu(image, release, origin):
    hint = from_image(image)
    assert hint == ReleaseHint(release, f"image tag {image} ({origin})")
    assert platform_of(image) == "npu"


def test_vllm_ascends_branch_and_nightly_images_name_no_release():
    for tag in ("main-310p", "nightly-main-a3-cann8.3-20251120", "latest"):
        assert from_image(f"quay.io/ascend/vllm-ascend:{tag}") == ReleaseHint(
            None, f"image tag quay.io/ascend/vllm-ascend:{tag}: no vllm-ascend release in the tag")
    assert from_image("quay.io/ascend/cann:8.2.rc1-910b-ubuntu22.04-py3.11").version is None


def test_a_platform_image_whose_tag_is_not_known_keeps_its_platform(tmp_path):
    # kubernetes-sigs/inference-perf (7de5ef2) e2e/vllm_cpu_server.sh runs `docker.io/vllm/vllm-openai-cpu:$tag`:
    # every tag of it is vLLM's CPU build, but the launch was read as CUDA, and the note said "the image is
    # not known" (survey 26b). Before 0.10.2, vLLM runs HMA on CUDA and ROCm only.
    run = write(tmp_path / "run.sh", "# hma-policy: {vllm_version: \"0.10.1\"}\n"
                                     'docker run -d "vllm/vllm-openai-cpu:$1" facebook/opt-125m --max-model-len 2048\n')
    (entry,) = audit([str(run)]).entries
    assert (entry.deployment.document["platform"], entry.decision["outcome"]) == ({"name": "cpu"}, "disabled")
    tagless = write(tmp_path / "b" / "run.sh", 'docker run -d "vllm/vllm-openai-cpu:$1" facebook/opt-125m\n')
    assert only(read_source(tagless)).release == ReleaseHint(
        None, "image vllm/vllm-openai-cpu:$1: its tag is not known from this file")
    # A repository the file does not name is no platform's.
    assert platform_of("vllm/vllm-openai-" + unresolved("$V") + ":v0.10.1") is None


def test_vllms_tpu_image_runs_on_tpu_and_its_release_tag_names_the_release():
    # vllm/vllm-tpu (pushed by vllm-project/tpu-inference's .buildkite/nightly_releases.yml) was "not
    # vLLM's release image" (survey 23a), then vLLM's for a platform the rules did not hold; they hold it now.
    assert from_image("vllm/vllm-tpu:v0.13.0") == ReleaseHint(
        "0.13.0", "image tag vllm/vllm-tpu:v0.13.0 (vLLM 0.13.0 with tpu-inference's TPU platform)")
    nightly = "docker.io/vllm/vllm-tpu:nightly-20260504-e2a6582-67058ca"
    assert from_image(nightly) == ReleaseHint(None, f"image tag {nightly}: no release in the tag")
    for image in ("vllm/vllm-tpu:v0.13.0", nightly, "vllm/vllm-tpu"):
        assert platform_of(image) == "tpu"


# A Docker Swarm stack for Atlas 800I A2 servers (910B NPUs) from a public write-up, "华为 Atlas 800I A2
# 大模型部署实战（九）：Docker Swarm 分布式部署" (2025-07-31), its vllm-stack.yml cut to what vLLM reads.
ASCEND_STACK = """version: '3.8'
services:
  vllm-qwen3:
    image: quay.io/ascend/vllm-ascend:v0.9.2rc1
    init: true
    environment:
      - VLLM_USE_MODELSCOPE=True
      - PYTORCH_NPU_ALLOC_CONF=max_split_size_mb:256
    entrypoint: ["vllm"]
    command: >
      serve /models/Qwen/Qwen3-30B-A3B
      --served-model-name Qwen/Qwen3-30B-A3B
      --tensor-parallel-size 4
      --enable_expert_parallel
      --port 8001
      --max-model-len 32768
"""


def test_vllm_ascends_image_runs_on_the_npu_platform(tmp_path):
    # Decided enabled as vLLM 0.33.0 on CUDA before: the image was "not read as a vLLM release".
    # vLLM 0.9.2 runs the hybrid KV cache manager on CUDA and ROCm only, and vllm-ascend
    # v0.9.2rc1's NPUPlatform does not define support_hybrid_kv_cache.
    stack = write(tmp_path / "old" / "vllm-stack.yml", ASCEND_STACK)
    newer = write(tmp_path / "new" / "vllm-stack.yml", ASCEND_STACK.replace("v0.9.2rc1", "v0.13.0rc1"))
    (d,) = read_source(stack).deployments
    assert d.document["platform"] == {"name": "npu"}
    assert dict(d.origins)["platform"] == "image quay.io/ascend/vllm-ascend:v0.9.2rc1"
    report = audit([str(stack), str(newer)])
    assert [(e.decision["vllm"]["release"], e.decision["outcome"], NOT_CUDA_OR_ROCM in e.decision["reasons"])
            for e in report.entries] == [("0.9.2", "disabled", True), ("0.13.0", "enabled", False)]


def test_vllms_rocm_build_names_its_release_and_rocm():
    # vLLM's release pipeline pushes vllm/vllm-openai-rocm:v${RELEASE_VERSION}-rocm (and users pull
    # :vX.Y.Z); its -base tag is the image vLLM is built on, without vLLM.
    for tag in ("v0.22.1", "v0.22.1-rocm"):
        image = f"vllm/vllm-openai-rocm:{tag}"
        assert (from_image(image).version, platform_of(image)) == ("0.22.1", "rocm")
    assert from_image("vllm/vllm-openai-rocm:v0.22.1-base").version is None


def test_vllm_spyres_settings_exported_by_a_script_or_set_in_os_environ_name_the_platform(tmp_path):
    # vllm-project/vllm-spyre (fc6b54b): examples/offline_inference/text_inference.py sets
    # `os.environ["VLLM_SPYRE_DYNAMO_BACKEND"] = args.backend` then builds `LLM(...)`; a script that
    # exports a VLLM_SPYRE_ setting runs vLLM with it too. Only `NAME=value vllm serve` and a
    # container's env were read: both decided as CUDA, `enabled`.
    write(tmp_path / "run.sh", "export VLLM_SPYRE_DYNAMO_BACKEND=eager\nvllm serve m\n"
                               "vllm serve m --no-disable-hybrid-kv-cache-manager\n")
    write(tmp_path / "text_inference.py", (
        "import os\nfrom vllm import LLM\n\nos.environ['VLLM_SPYRE_DYNAMO_BACKEND'] = BACKEND\n"
        "llm = LLM(model='ibm-ai-platform/micro-g3.3-8b-instruct-1b')\n"))
    served, enabled, engine = audit([str(tmp_path / "run.sh"), str(tmp_path / "text_inference.py")]).entries
    assert [e.deployment.document.get("platform") for e in (served, engine)] == [{"name": "spyre"}] * 2
    assert [e.decision["outcome"] for e in (served, enabled, engine)] == ["disabled", "error", "disabled"]
    assert [e["code"] for e in enabled.decision["errors"]] == ["hma.explicit_enable_conflict"]
    # A setting the script does not export is not the server's.
    write(tmp_path / "local.sh", "VLLM_SPYRE_DYNAMO_BACKEND=eager\nvllm serve m\n")
    (local,) = audit([str(tmp_path / "local.sh")]).entries
    assert "platform" not in local.deployment.document



def test_aws_neurons_vllm_settings_name_the_platform(tmp_path):
    # vllm-project/vllm-neuron (a5ef7c88) test/utils/server/start_server.sh exports
    # VLLM_NEURON_FRAMEWORK=neuronx-distributed-inference, a setting only vLLM on AWS Neuron reads (vllm-neuron,
    # and vLLM's own Neuron backend before it); its launches were decided on CUDA, `enabled` (survey 36b).
    write(tmp_path / "run.sh", "export VLLM_NEURON_FRAMEWORK=neuronx-distributed-inference\nvllm serve m\n")
    write(tmp_path / "gen.py", "import os\nos.environ['VLLM_NEURON_FRAMEWORK'] = 'neuronx-distributed-inference'\n"
                               "from vllm import LLM\nLLM(model='m')\n")
    found = [(e.deployment.file.rsplit("/", 1)[-1], e.deployment.document.get("platform"),
              dict(e.deployment.origins).get("platform"), e.decision["outcome"]) for e in audit([str(tmp_path)]).entries]
    assert found == [("gen.py", {"name": "neuron"}, "env VLLM_NEURON_FRAMEWORK", "disabled"),
                     ("run.sh", {"name": "neuron"}, "env VLLM_NEURON_FRAMEWORK", "disabled")]

def test_vllms_device_option_names_the_platform(tmp_path):
    # aws-neuron/aws-neuron-samples (2015d650) inference-benchmarking/server/scripts/start_server.sh passes
    # `--device "neuron"`, and aws-neuron/upstreaming-to-vllm's (dd417b31) examples `LLM(..., device="neuron")`
    # (vLLM's engine option up to 0.9.2, and its Neuron fork's): they were read as CUDA, `enabled`; vLLM
    # turns HMA off on Neuron (survey 20w). `auto` and `cuda` name none; the last `--device` wins.
    write(tmp_path / "start.sh", "#!/bin/bash\npython3 -m vllm.entrypoints.openai.api_server --model m --device neuron\n"
                                 "vllm serve m --device=cuda\nvllm serve m --device neuron --device=auto\n")
    write(tmp_path / "gen.py", "from vllm import LLM\nllm = LLM(model='m', device='neuron', tensor_parallel_size=2)\n")
    found = [(e.deployment.file.rsplit("/", 1)[-1], e.deployment.line, dict(e.deployment.origins).get("platform"),
              e.decision["outcome"]) for e in audit([str(tmp_path)]).entries]
    assert found == [("gen.py", 2, "line 2: device= neuron", "disabled"),
                     ("start.sh", 2, "line 2: --device neuron", "disabled"),
                     ("start.sh", 3, None, "enabled"), ("start.sh", 4, None, "enabled")]


def test_intel_gaudis_container_runtime_names_the_hpu_platform(tmp_path):
    # opea-project/GenAIExamples (15b0d468) and GenAIComps (8130a3fb) run their Gaudi vLLM services with
    # `runtime: habana` (compose) and `docker run --runtime=habana` (test scripts): Intel Gaudi's
    # container runtime, so vLLM runs on HPU; they were read as CUDA (survey 20j).
    write(tmp_path / "compose.yaml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.0\n    runtime: habana\n"
                                     "    command: --model m\n")
    write(tmp_path / "run.sh", "#!/bin/bash\ndocker run --runtime=habana vllm/vllm-openai:v0.10.0 --model m\n"
                               "docker run --runtime habana vllm/vllm-openai:v0.10.0 --model m\n"
                               "docker run --runtime=runc vllm/vllm-openai:v0.10.0 --model m\n")
    found = [(e.deployment.line, e.deployment.document.get("platform"), dict(e.deployment.origins).get("platform"),
              e.decision["outcome"]) for e in audit([str(tmp_path)]).entries]
    assert found == [(2, {"name": "hpu"}, "service vllm: runtime habana", "disabled"),
                     (2, {"name": "hpu"}, "docker run --runtime habana", "disabled"),
                     (3, {"name": "hpu"}, "docker run --runtime habana", "disabled"),
                     (4, None, None, "enabled")]


def test_moore_threads_container_runtime_names_the_musa_platform(tmp_path):
    # MooreThreads/vllm-musa (ac445cda) docker/README.md runs its vLLM image, which keeps the path
    # `vllm/vllm-openai` on Moore Threads' registry, with `docker run --runtime=mthreads`: it was read as
    # vLLM's CUDA image. MUSAPlatform's is_cuda() is false, so HiSparse refuses it (survey 41a).
    write(tmp_path / "run.sh", "#!/bin/bash\ndocker run --runtime=mthreads "
                               "registry.mthreads.com/mcconline/inference/vllm/vllm-openai:v0.33.0 --model m "
                               "--hisparse-config '{}'\n")
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.deployment.document["platform"], dict(entry.deployment.origins)["platform"],
            entry.decision["outcome"], [e["code"] for e in entry.decision["errors"]]) == (
        {"name": "musa"}, "docker run --runtime mthreads", "error", ["hisparse.requires_cuda"])


def test_a_platform_plugin_that_vllm_plugins_leaves_out_runs_no_platform(tmp_path):
    # flagos-ai/vllm-plugin-FL's Enflame deployments (docker/enflame/README.md, .github/configs/enflame.yml) set
    # VLLM_PLUGINS=fl beside TOPS_VISIBLE_DEVICES: vLLM loads only the plugins VLLM_PLUGINS names
    # (vllm/plugins/__init__.py, load_plugins_by_group), so FL's platform runs, whose support_hybrid_kv_cache()
    # is true, not vllm-gcu's (entry point `register_platform_plugins`). It was read as `gcu`, `disabled`;
    # with --no-disable-hybrid-kv-cache-manager, an `error` (survey 43a).
    script = "#!/bin/bash\npip install vllm==0.20.2\nexport VLLM_PLUGINS={}\nexport TOPS_VISIBLE_DEVICES=0,1\nvllm serve m\n"
    write(tmp_path / "fl.sh", script.format("fl"))
    write(tmp_path / "gcu.sh", script.format("register_platform_plugins,fl"))
    write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: vllm\n"
                                 "      image: vllm/vllm-openai:v0.20.2\n      args: [--model, m]\n"
                                 "      env: [{name: VLLM_PLUGINS, value: fl}, {name: TOPS_VISIBLE_DEVICES, value: '0'}]\n")
    found = {Path(e.deployment.file).name: (e.deployment.document.get("platform"), e.decision["outcome"])
             for e in audit([str(tmp_path)]).entries}
    assert found == {"fl.sh": (None, "enabled"), "gcu.sh": ({"name": "gcu"}, "disabled"), "pod.yaml": (None, "enabled")}


def test_vllms_xpu_release_image_names_its_release_and_the_xpu_platform(tmp_path):
    # Danmoreng/intel-b70-qwen38-vllm (39c5541) docker/Dockerfile: `FROM vllm/vllm-openai-xpu@sha256:...`, vLLM's own
    # XPU build (docker/Dockerfile.xpu's `vllm-openai` stage, ENTRYPOINT ["vllm", "serve"]), which home labs run on
    # Intel's Arc GPUs as `vllm/vllm-openai-xpu:v0.30.0`. It was "not vLLM's release image", decided as CUDA at the
    # default release, and `docker run` of it with only the model was no launch at all (survey 43b).
    write(tmp_path / "run.sh", "docker run --rm --device /dev/dri vllm/vllm-openai-xpu:v0.30.0 Qwen/Qwen3-8B\n"
                               "docker run --rm vllm/vllm-openai-xpu:v0.10.2 m\n"
                               "docker run --rm vllm/vllm-openai-xpu@sha256:96db42e2 m\n")
    found = [(e.deployment.line, e.deployment.document.get("platform"), e.decision["vllm"]["release"],
              e.decision["outcome"], [n.message for n in e.deployment.notes]) for e in audit([str(tmp_path)]).entries]
    assert found == [
        (1, {"name": "xpu"}, "0.30.0", "enabled", []),
        # (vLLM 0.10.2 runs the hybrid KV cache manager on CUDA, ROCm and CPU only)
        (2, {"name": "xpu"}, "0.10.2", "disabled", []),
        (3, {"name": "xpu"}, "0.33.0", "enabled", [
            "the vLLM release is not known: image vllm/vllm-openai-xpu@sha256:96db42e2: a digest names no release"])]


def test_intels_xpu_image_names_its_release_and_the_xpu_platform(tmp_path):
    # intel/llm-scaler (8d66bf9e) README.md: `intel/llm-scaler-vllm:0.14.0-b8` "for vLLM 0.14.0"; the image
    # builds vLLM for XPU (vllm/docker/Dockerfile, VLLM_TARGET_DEVICE=xpu). A compose service on
    # `0.10.2-b6` was decided as 0.33.0 on CUDA, `enabled` (survey 19e).
    compose = write(tmp_path / "docker-compose.yml", """services:
  vllm_1:
    image: intel/llm-scaler-vllm:0.10.2-b6
    devices:
      - "/dev/dri:/dev/dri"
    entrypoint: >
      bash -lc "source /opt/intel/oneapi/setvars.sh --force &&
      vllm serve --model /llm/models/Qwen3-8B --block-size 64"
""")
    (d,) = read_source(compose).deployments
    assert (d.document["platform"], d.release) == ({"name": "xpu"}, ReleaseHint(
        "0.10.2", "image tag intel/llm-scaler-vllm:0.10.2-b6 (Intel's XPU build of vLLM 0.10.2)"))
    (entry,) = audit([str(compose)]).entries
    assert entry.decision["outcome"] == "disabled"
    assert "the XPU platform does not support the hybrid KV cache manager before vLLM 0.11.0" in \
        entry.decision["reasons"]
    # Its production tags are each the same image as a build tag (intel/llm-scaler 130c8eb6 Releases.md:
    # "`intel/llm-scaler-vllm:1.1-preview` ... Same image as intel/llm-scaler-vllm:0.10.0-b2"):
    # opea-project/GenAIExamples' EdgeCraftRAG service on `1.1-preview` was 0.33.0, `enabled` (survey 20j).
    assert [(from_image(f"intel/llm-scaler-vllm:{tag}").version, platform_of(f"intel/llm-scaler-vllm:{tag}"))
            for tag in ("1.1-preview", "1.2", "1.3")] == [("0.10.0", "xpu"), ("0.10.2", "xpu"), ("0.11.1", "xpu")]
    assert from_image("intel/llm-scaler-vllm:1.1-preview").origin == (
        "image tag intel/llm-scaler-vllm:1.1-preview (the same image as intel/llm-scaler-vllm:0.10.0-b2: Intel's XPU "
        "build of vLLM 0.10.0)")
    # `1.0` is the same image as `0.2.0-b2`, whose tag names Intel's version: no release; still XPU.
    assert (from_image("intel/llm-scaler-vllm:1.0").version, platform_of("intel/llm-scaler-vllm:1.0")) == (None, "xpu")
