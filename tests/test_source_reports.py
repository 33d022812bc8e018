"""Each launch keeps its place, the release that deploys it, and no file that
mentions vLLM's KV options is missed silently: in the sources and in every
report format (issues 16 part 4 and 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.report import FORMATS, render
from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import NIXL, write


LWS = f"""apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: pd, namespace: serving}}
spec:
  leaderWorkerTemplate:
    leaderTemplate:
      metadata: {{labels: {{llm-d.ai/role: prefill}}}}
      spec:
        containers:
          - name: leader
            image: ghcr.io/vllm/vllm-openai:v0.21.0
            args: [m, --kv-transfer-config, '{NIXL}']
    workerTemplate:
      spec:
        containers:
          - name: worker
            image: vllm/vllm-openai@sha256:{"a" * 64}
            args: [m, --kv-transfer-config, '{NIXL}']
"""


def test_kubernetes_launches_carry_container_role_and_release(tmp_path):
    leader, worker = read_source(write(tmp_path / "lws.yaml", LWS)).deployments
    assert (leader.line, worker.line) == (10, 16)  # each container's `- name:` line
    assert (leader.container, leader.role, leader.release) == (
        "leader", "prefill", ReleaseHint("0.21.0", "image tag ghcr.io/vllm/vllm-openai:v0.21.0"))
    assert (worker.container, worker.role, worker.release.version) == ("worker", "worker", None)
    assert worker.release.origin == f"image vllm/vllm-openai@sha256:{'a' * 64}: a digest names no release"
    assert [n.code for n in worker.notes] == ["source.release_unknown"]


@pytest.mark.parametrize("image, version", [
    ("vllm/vllm-openai:v0.33.0", "0.33.0"), ("docker.io/vllm/vllm-openai:v0.10.1.1", "0.10.1.1"),
    ("quay.io/vllm/vllm-openai:0.9.2", "0.9.2"), ("public.ecr.aws/abc123/vllm/vllm-openai:v0.11.0rc1", "0.11.0rc1"),
    ("localhost:5000/vllm/vllm-openai:v0.22.0", "0.22.0"), ("rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", "0.10.1"),
    # opea-project/GenAIComps (8130a3f) comps/third_parties/vllm/src/Dockerfile.amd_gpu: no `_` after `vllm`.
    ("rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250410", "0.8.3"),
    ("vllm/vllm-openai:latest", None), ("vllm/vllm-openai:nightly", None), ("vllm/vllm-openai", None),
    ("lmcache/vllm-openai:v0.3.9", None), ("rocm/vllm:latest", None),
    # The build variants vLLM's release scripts push (publish-release-images.sh): the same release.
    ("docker.io/vllm/vllm-openai:v0.20.1-cu129", "0.20.1"), ("vllm/vllm-openai:v0.20.1-x86_64-cu129-ubuntu2404", "0.20.1"),
    ("vllm/vllm-openai:v0.33.0-aarch64", "0.33.0"), ("vllm/vllm-openai:v0.33.0-x86_64-zstd", "0.33.0"),
    ("vllm/vllm-openai:v0.33.0-ubuntu2404", "0.33.0"), ("vllm/vllm-openai-cpu:v0.23.0-arm64", "0.23.0"),
    # Not one of them: another suffix, the order changed, a moving tag, another image with a variant-like tag.
    ("vllm/vllm-openai:v0.20.1-cu129-nixl", None), ("vllm/vllm-openai:v0.20.1-cu129-x86_64", None),
    ("vllm/vllm-openai:latest-x86_64-cu129", None), ("lmcache/vllm-openai:v0.9.2-cu128-nixl-v0.4.1", None),
    ("vllm/vllm-openai:v0.20.1-", None), ("vllm/vllm-openai:v0.20.1-cu", None),
    # NVIDIA Dynamo's vLLM runtime: the vLLM release each Dynamo release's image installs
    # (deployers.yaml), with the variants Dynamo pushes; on a mirror (aibrix's registry) too.
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1", "0.11.0"),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.1", "0.10.1.1"),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0-cuda13", "0.12.0"),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.0-efa-amd64", "0.16.0"),
    ("aibrix-container-registry-cn-beijing.cr.volces.com/aibrix/ai-dynamo/vllm-runtime:0.3.2", "0.8.4"),
    # AIBrix's builds on vLLM's image, tagged with its release first (vllm-project/aibrix 0b4d2b7b
    # build/container/Dockerfile.vllm and README.md), and kthena's copy (volcano-sh/kthena 3cc0572
    # examples/model-serving/gpu-pd-disaggregation.yaml: NixlConnector, `enabled` as 0.33.0).
    ("aibrix/vllm-openai:v0.9.2-cu128-nixl-v0.4.1", "0.9.2"),
    ("aibrix/vllm-openai:v0.10.2-aibrix-v0.5.0-nixl-0.7.1-20251123", "0.10.2"),
    ("ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2", "0.10.0"),
    # (aibrix e3e10f9 samples/deepseek-r1: a build of its own on 0.7.3, read as the default before; survey 25d)
    ("aibrix/vllm-openai:v0.7.3.self.post1", "0.7.3"), ("aibrix/vllm-openai:v0.9.2.post1", "0.9.2.post1"),
    ("aibrix/vllm-openai:latest", None), ("aibrix/vllm-openai:nightly-cu128", None),
    # NVIDIA's NGC vLLM container: the vLLM each monthly release ships, where its release notes say
    # (deployers.yaml ngc-vllm; NVIDIA/dgx-spark-playbooks 0db7c141 runs 25.09 and 25.11, not recorded).
    ("nvcr.io/nvidia/vllm:25.10-py3", "0.10.2"), ("nvcr.io/nvidia/vllm:26.01-py3", "0.11.1"),
    ("nvcr.io/nvidia/vllm:25.11-py3", None), ("nvcr.io/nvidia/vllm:latest", None),
    # 1.2.1, recorded from its wheel's pin and its workers' logs (survey 32a); a release whose image was not read, a
    # development tag, no tag.
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", "0.20.1"), ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0", None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0-dev.1", None),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime", None),
])
def test_the_release_an_image_tag_names(image, version):
    from hma_policy.audit.sources.release import from_image

    assert from_image(image).version == version


def test_an_ngc_respin_tag_names_its_ngc_release():
    # rh-ai-quickstart/nvidia-video-search-and-summarization (efafaddb) runs nvcr.io/nvidia/vllm:25.12.post1-py3
    # (survey 34d): "no NGC release in the tag", where it names NGC 25.12.post1, whose vLLM is not recorded.
    from hma_policy.audit.sources.release import from_image

    assert from_image("nvcr.io/nvidia/vllm:25.12.post1-py3").origin == (
        "image tag nvcr.io/nvidia/vllm:25.12.post1-py3: the vLLM release NGC 25.12.post1's image ships is not recorded")


def test_a_directive_or_an_annotation_gives_the_release_over_the_image(tmp_path):
    script = write(tmp_path / "run.sh", f"""pip install vllm==0.22.0
vllm serve a --kv-transfer-config '{NIXL}'
# hma-policy: {{vllm_version: "0.24.0"}}
docker run vllm/vllm-openai:v0.21.0 b --kv-transfer-config '{NIXL}'
""")
    a, b = read_source(script).deployments
    assert a.release == ReleaseHint("0.22.0", "pip pin vllm==0.22.0 at line 1")
    uv = write(tmp_path / "uv.sh", 'uv pip install --system "vllm[flashinfer]==0.23.1" lmcache\nvllm serve m\n')
    assert read_source(uv).deployments[0].release == ReleaseHint("0.23.1", "pip pin vllm==0.23.1 at line 1")
    assert b.release == ReleaseHint("0.24.0", "line 3: hma-policy directive")
    annotated = write(tmp_path / "pod.yaml", LWS.replace("metadata: {name: pd, namespace: serving}",
                                                          "metadata: {name: pd, namespace: serving, annotations: "
                                                          "{hma-policy.dev/facts: '{vllm_version: \"0.28.0\"}'}}"))
    assert {d.release.version for d in read_source(annotated).deployments} == {"0.28.0"}
    bad = read_source(write(tmp_path / "bad.sh", "# hma-policy: {vllm_version: 0.22}\nvllm serve m\n")).deployments[0]
    assert bad.problems[0].message == ("an hma-policy directive: `vllm_version` must be a vLLM release such as "
                                       "\"0.22.0\", got `0.22`")


def test_a_file_that_mentions_kv_options_but_yields_no_launch_is_noted(tmp_path):
    values = write(tmp_path / "values.yaml", "engine:\n  extraArgs:\n    - --kv-transfer-config\n    - '{}'\n")
    source = read_source(values)
    assert source.deployments == () and source.problems == ()
    (note,) = source.notes
    assert (note.code, note.line, note.message) == (
        "source.unrecognized", 3, "mentions `kv-transfer-config` at line 3, no vLLM launch recognised: not a "
                                  "deployment document, vLLM config or Kubernetes manifest")  # (the reader's reason)
    # Connector names come from the policy's registry, not from a list in the code.
    template = write(tmp_path / "templates" / "deploy.tpl", "{{- if .Values.lmcache }}\n  connector: LMCacheConnectorV1\n")
    assert read_source(template).notes == ()
    (note,) = read_source(template, known=hma_policy.load_policy().registered_names).notes
    assert note.message == "mentions `LMCacheConnectorV1` at line 2, no vLLM launch recognised"
    assert read_source(write(tmp_path / "unrelated.yaml", "kv_cache_dtype: fp8\nconnector_name: x\n")).notes == ()
    # bentoml/BentoVLLM (3b69b26): a P/D router's request field and a README's folder name were
    # noted as mentions; a connector's own metadata is library code. The options themselves are.
    # (flagos-ai/vllm-plugin-FL's vendored model runner, survey 43a: a step's `kv_connector_output`, its
    # `kv_connector_stats`, were a mention each)
    router = write(tmp_path / "router.py", "import httpx\nprefill_request['kv_transfer_params'] = {}\n"
                                           "meta = self.kv_connector_metadata\nkv_connector_metadata = None\n"
                                           "kv_connector_output = output.kv_connector_output\n"
                                           "def f(kv_connector_stats): pass\n")
    readme = write(tmp_path / "README.md", "cd BentoVLLM/llama3.1-8b-kv-offloading\n"
                                           "| `sglang:` | `sglang:kv_transfer_latency_ms` | Gauge |\n")  # (a metric)
    assert read_source(router).notes == read_source(readme).notes == ()
    # alint77/jupiter-glm52-vllm-worklog (c954a35, survey 44a): Prometheus scrapes of a server's metrics, whose
    # `vllm:cache_config_info` labels print its settings (`kv_offloading_backend="native"`), were 48 mentions.
    scrape = write(tmp_path / "server-metrics-after.txt", (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "vllm:cache_config_info{block_size=\"64\",kv_offloading_backend=\"native\",kv_offloading_size=\"None\"} 1.0\n"))
    assert read_source(scrape).notes == ()
    assert [n.line for n in read_source(write(tmp_path / "notes.txt", "vllm:x 1\n--kv-offloading-size 8\n")).notes] == [2]
    # Terraform's HCL (sarvamai/uidai-deployment's `kubernetes_deployment_v1` of vLLM containers) was skipped as no
    # deployment source, a KV option in its args without a word.
    terraform = write(tmp_path / "main.tf", 'resource "kubernetes_deployment_v1" "v" {\n  container {\n'
                                            '    args = ["--model", "m", "--kv-transfer-config", "{}"]\n  }\n}\n')
    assert [(n.line, n.message) for n in read_source(terraform).notes] == [
        (3, "mentions `kv-transfer-config` at line 3, no vLLM launch recognised")]
    # So is a Nomad job under its older name (survey 45a).
    nomad = write(tmp_path / "vllm.nomad", 'job "vllm" {\n  group "g" {\n    task "vllm" {\n      driver = "docker"\n'
                                           '      config {\n        args = ["--kv-transfer-config", "{}"]\n      }\n'
                                           '    }\n  }\n}\n')
    assert [n.line for n in read_source(nomad).notes] == [6]
    # llm-d/llm-d-inference-sim (eec055a, survey 22f): prose's "KV-transfer" and the simulator's latency
    # field `kv_transfer_time` are no option; a key as code writes it (kv_transfer, kvTransfer) is a mention.
    profile = write(tmp_path / "profile.yaml", "# TTFT and KV-transfer scale with prompt length.\nttft_ms: 120\n"
                                               "kv_transfer_time_ms: 5\n")
    assert read_source(profile).notes == ()
    # aws-samples/aws-do-eks (f721602) disagg-calculator/analyze/calc.py: a cost model's constant
    # `kv_transfer_efficiency` was its mention; its bare key `"kv_transfer"` further down is (survey 28b).
    calc = write(tmp_path / "calc.py", 'CAL = {"kv_transfer_efficiency": 0.0095}\nkv_transfer_ms = 1.0\n'
                                       'out = {"kv_transfer": 2}\n')
    assert [(n.line, n.message) for n in read_source(calc).notes] == [
        (3, "mentions `kv_transfer` at line 3, no vLLM launch recognised")]
    keyed = write(tmp_path / "keyed.yaml", "engine:\n  kvTransfer:\n    connector: x\n")
    assert [(n.line, n.message) for n in read_source(keyed).notes] == [
        (2, "mentions `kvTransfer` at line 2, no vLLM launch recognised: not a deployment document, vLLM config or "
            "Kubernetes manifest")]
    # bentoml/BentoVLLM's LMCache service reads its KV config from BentoML's build args in pyproject.toml
    # (`[tool.bentoml.build.args.kv_transfer_config]`), which it hands vLLM: the file was skipped silently.
    settings = write(tmp_path / "pyproject.toml", '[tool.bentoml.build.args.kv_transfer_config]\n'
                                                  'kv_connector = "LMCacheConnectorV1"\n')
    assert [(n.line, n.message) for n in read_source(settings).notes] == [
        (1, "mentions `kv_transfer_config` at line 1, no vLLM launch recognised")]
    assert read_source(write(tmp_path / "Cargo.toml", '[package]\nname = "vllm-router"\n')).notes == ()
    options = write(tmp_path / "OPTIONS.md", "see\n`--kv-offloading-size`\n")
    assert [(n.line, n.message) for n in read_source(options).notes] == [
        (2, "mentions `kv-offloading-size` at line 2, no vLLM launch recognised")]
    # A Python file that starts no engine the Python reader knows (tests/test_python_source.py), but runs
    # `vllm serve` another way (a command line a function makes when the script runs): noted, never run.
    marker = tmp_path / "ran"
    launcher = write(tmp_path / "launch.py", f"open({str(marker)!r}, 'w').close()\nimport subprocess\n"
                     "KV = 'kv_connector: NixlConnector'\nsubprocess.run(build('vllm serve m --kv-transfer-config', "
                     "KV), shell=True)\n")
    found = read_source(launcher)
    assert (found.deployments, found.skipped, [(n.code, n.line) for n in found.notes]) == (
        (), "Python in which no vLLM launch is read (an engine call, or a command list or string that starts vLLM's server)", [("source.unrecognized", 3)])
    assert found.notes[0].message == "mentions `kv_connector` at line 3, no vLLM launch recognised"
    assert not marker.exists()
    assert read_source(write(tmp_path / "train.py", "import torch\nmodel = torch.nn.Linear(2, 2)\n")).notes == ()


@pytest.fixture
def small_fleet(tmp_path):
    write(tmp_path / "run.sh", f"pip install vllm==0.22.0\ncat > c.yaml <<'EOF'\nkv-transfer-config: '{NIXL}'\nEOF\n"
                               "vllm serve m --config c.yaml\n")
    write(tmp_path / "lws.yaml", LWS)
    write(tmp_path / "chart" / "values.yaml", "vllm:\n  kvConnector: NixlConnector\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield audit(["."])
    finally:
        os.chdir(cwd)


def test_a_release_the_rules_do_not_hold_is_shown_as_the_release_decided(tmp_path, monkeypatch):
    # A release newer than the rules: the text and HTML reports said "vllm release: 0.35.0" for a
    # launch decided as the default release, as the JSON's decision says.
    write(tmp_path / "new.sh", "pip install vllm==0.35.0\nvllm serve m\n")
    monkeypatch.chdir(tmp_path)
    result = audit(["new.sh"])
    (deployment,) = json.loads(render(result, "json"))["deployments"]
    assert deployment["release_hint"]["version"] == "0.35.0" and deployment["decision"]["vllm"]["release"] == "0.33.0"
    assert ("  vllm release: 0.33.0 (default (pip pin vllm==0.35.0 at line 1: vLLM 0.35.0 is not a release these "
            "rules know; they know 0.9.1 to 0.33.0))") in render(result, "text")
    assert "vLLM release: 0.33.0 (default (pip pin vllm==0.35.0 at line 1: " in render(result, "html")
    # A note, with a code a reader can find every such launch by.
    assert deployment["notes"] == [{
        "code": "source.release_not_held", "file": "new.sh", "line": 2, "path": "",
        "message": "pip pin vllm==0.35.0 at line 1 names vLLM 0.35.0, not a release these rules decide for "
                   "(0.9.1 to 0.33.0); decided as vLLM 0.33.0"}]
    forced = subprocess.run([sys.executable, "-m", "hma_policy", "audit", "new.sh", "--vllm-version", "0.22.0"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert "  vllm release: 0.22.0 (--vllm-version (pip pin vllm==0.35.0 at line 1 names 0.35.0))" in forced.stdout
    assert "release_not_held" not in forced.stdout  # the release asked for decides every launch


def test_a_report_counts_the_launches_of_each_release_and_those_decided_by_default(tmp_path, monkeypatch):
    # Surveys 11b-13a: launches that name no release (h2ogpt's run_vllm.sh, FastChat's worker,
    # open-r1's slurm scripts) are decided as the newest release with no line or note that says so;
    # an auditor could not tell how much of a fleet's verdict rests on that default.
    write(tmp_path / "a.sh", "docker run vllm/vllm-openai:v0.11.0 m\nvllm serve m\n")
    write(tmp_path / "b.sh", "docker run vllm/vllm-openai:latest m\npip install vllm==0.11.0\nvllm serve m\n")
    monkeypatch.chdir(tmp_path)
    for jobs in (1, 2):
        summary = audit(["a.sh", "b.sh"], jobs=jobs).summary()
        assert summary["by_release"] == {"0.11.0": {"deployments": 2, "default": 0},
                                         "0.33.0": {"deployments": 2, "default": 2}}


def test_the_release_line_names_the_release_that_decided_a_launch_that_names_none(tmp_path, monkeypatch):
    # rh-aiservices-bu/llm-on-openshift's Deployments run images whose tag names no vLLM release: the
    # text report said "vllm release: unknown (...)" though the JSON's decision was made as 0.33.0 by
    # default, or as the release --vllm-version gives.
    write(tmp_path / "latest.sh", "docker run vllm/vllm-openai:latest m\n")
    monkeypatch.chdir(tmp_path)
    result = audit(["latest.sh"])
    assert render(result, "text").endswith(
        "\n  vllm release: 0.33.0 (default (image tag vllm/vllm-openai:latest: no release in the tag))\n"
        "by vLLM release (deployments; of them, decided as the default: nothing names a release the rules hold):\n"
        "  0.33.0: 1; 1")
    assert "0.33.0 (default (image tag vllm/vllm-openai:latest: no release in the tag))" in render(result, "md")
    forced = subprocess.run([sys.executable, "-m", "hma_policy", "audit", "latest.sh", "--vllm-version", "0.11.0"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert "  vllm release: 0.11.0 (--vllm-version)\n" in forced.stdout


# kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml and GoogleCloudPlatform/kubernetes-engine-samples
# ai-ml/llm-multihost-gpus/vllm-llama3-405b-A3.yaml run vllm/vllm-openai:v0.8.5, a release before the
# hybrid KV cache manager (0.9.1): they were decided as 0.33.0, `enabled`.
LWS_LEADER = """apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: vllm-leader
            image: vllm/vllm-openai:v0.8.5
            command:
              - sh
              - -c
              - "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE);
                 python3 -m vllm.entrypoints.openai.api_server --port 8080 --model meta-llama/Meta-Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline_parallel_size 2"
"""


def test_a_release_before_the_hybrid_kv_cache_manager_is_decided_by_the_before_rule(tmp_path, monkeypatch):
    write(tmp_path / "lws.yaml", LWS_LEADER)
    # A V0-era PyNccl config, whose kv_rank 0.33.0 refuses: nothing of it is read for 0.6.6.
    write(tmp_path / "old.sh", "pip install vllm==0.6.6\nvllm serve m --kv-transfer-config "
                               "'{\"kv_connector\":\"PyNcclConnector\",\"kv_role\":\"kv_producer\",\"kv_rank\":0}'\n")
    write(tmp_path / "rc.sh", "pip install vllm==0.9.1rc1\nvllm serve m\n")  # a candidate of 0.9.1: not known to predate it
    monkeypatch.chdir(tmp_path)
    result = audit(["lws.yaml", "old.sh", "rc.sh"])
    lws, old, rc = json.loads(render(result, "json"))["deployments"]
    assert lws["decision"] == {
        "outcome": "disabled", "hma_enabled": False, "disable_hybrid_kv_cache_manager": True, "errors": [],
        "warnings": [], "connectors": [],
        "reasons": ["vLLM 0.8.5 has no hybrid KV cache manager: 0.9.1 is the first release with one"],
        "trace": ["release.before_hma"], "policy": lws["decision"]["policy"],
        "vllm": {"release": "0.8.5", "source": "image tag vllm/vllm-openai:v0.8.5"}}
    assert lws["remediation"] == "upgrade to vLLM 0.9.1 or later to run the hybrid KV cache manager"
    assert lws["notes"] == []  # the release named decides it: no release_not_held note
    assert (old["decision"]["outcome"], old["decision"]["vllm"]) == (
        "disabled", {"release": "0.6.6", "source": "pip pin vllm==0.6.6 at line 1"})
    assert (rc["decision"]["outcome"], [n["code"] for n in rc["notes"]]) == ("enabled", ["source.release_not_held"])
    text = render(result, "text")
    assert "lws.yaml#LeaderWorkerSet/vllm/vllm-leader: disabled (hma_enabled: false)" in text
    assert "  vllm release: 0.8.5 (image tag vllm/vllm-openai:v0.8.5)\n" \
           "  remediation: upgrade to vLLM 0.9.1 or later to run the hybrid KV cache manager" in text
    # The hybrid KV cache manager's own flag is no option of such a release: its argparse exits (a note,
    # as for any option the release running a launch refuses). Other options may have come and gone.
    write(tmp_path / "flag.sh", "docker run vllm/vllm-openai:v0.8.5 m --disable-hybrid-kv-cache-manager "
                                "--use-v2-block-manager\n")
    (flagged,) = json.loads(render(audit(["flag.sh"]), "json"))["deployments"]
    assert [(n["code"], n["message"]) for n in flagged["notes"]] == [(
        "source.option_not_in_release", "vLLM 0.8.5 rejects the unrecognized argument "
        "`--disable-hybrid-kv-cache-manager` (line 1): it came with the hybrid KV cache manager in 0.9.1, and the "
        "launch does not start")]
    assert flagged["decision"]["outcome"] == "disabled"
    # The decision's policy is the rule that made it, not a release's rules.
    assert lws["decision"]["policy"]["digest"] != hma_policy.load_policy().digest
    # A release the auditor fixes decides every launch; a document's own vllm_version must be a release held.
    forced = subprocess.run([sys.executable, "-m", "hma_policy", "audit", "lws.yaml", "--vllm-version", "0.22.0",
                             "--format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert json.loads(forced.stdout)["deployments"][0]["decision"]["vllm"]["release"] == "0.22.0"
    with pytest.raises(hma_policy.InputError) as refused:
        hma_policy.decide({"vllm_version": "0.8.5"})
    assert [p.code for p in refused.value.problems] == ["release.unknown"]


def test_a_bundle_without_a_before_rule_decides_an_older_release_as_its_default(tmp_path):
    import shutil

    from hma_policy.core.policies import Hint, PolicySet
    from rulecopy import RULES

    bundle = tmp_path / "rules"
    shutil.copytree(RULES, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    releases = bundle / "releases.yaml"
    text = releases.read_text()
    releases.write_text(text[:text.index("before:")] + text[text.index("releases:"):])
    decision = PolicySet(bundle).decide({}, hint=Hint("0.8.5", "image tag vllm/vllm-openai:v0.8.5"))
    assert (decision.outcome, decision.vllm.release) == ("enabled", "0.33.0")
    assert PolicySet().decide({}, hint=Hint("0.8.5", "image tag vllm/vllm-openai:v0.8.5")).outcome == "disabled"
    # The rule may only say that such a release runs without HMA, or that it is not judged.
    releases.write_text(text.replace("  outcome: disabled\n", "  outcome: enabled\n"))
    with pytest.raises(hma_policy.PolicyError) as invalid:
        PolicySet(bundle)
    assert [(p.code, p.path) for p in invalid.value.problems] == [("rules.schema", "/before/outcome")]


def test_no_release_note_where_the_release_named_decides(tmp_path, monkeypatch):
    # Held by the rules; named by a directive that wins over the pin; or naming none (its own note).
    write(tmp_path / "held.sh", "pip install vllm==0.22.0\nvllm serve m\n")
    write(tmp_path / "directive.sh", 'pip install vllm==0.6.6\n# hma-policy: {vllm_version: "0.24.0"}\nvllm serve m\n')
    write(tmp_path / "latest.sh", "docker run vllm/vllm-openai:latest m\n")
    monkeypatch.chdir(tmp_path)
    data = json.loads(render(audit(["held.sh", "directive.sh", "latest.sh"]), "json"))
    got = {d["file"]: (d["decision"]["vllm"]["release"], [n["code"] for n in d["notes"]]) for d in data["deployments"]}
    assert got == {"held.sh": ("0.22.0", []), "directive.sh": ("0.24.0", []),
                   "latest.sh": ("0.33.0", ["source.release_unknown"])}


def test_every_report_format_shows_places_releases_and_file_notes(small_fleet):
    data = json.loads(render(small_fleet, "json"))
    by_id = {d["id"]: d for d in data["deployments"]}
    shell = by_id["run.sh:5"]
    assert shell["chain"] == ["run.sh", "c.yaml (written at line 3)"]
    assert shell["release_hint"] == {"version": "0.22.0", "origin": "pip pin vllm==0.22.0 at line 1"}
    leader = by_id["lws.yaml#LeaderWorkerSet/serving/pd/leader"]
    assert (leader["container"], leader["role"]) == ("leader", "prefill")
    assert data["summary"]["notes"] == 1
    assert data["notes"] == [{"code": "source.unrecognized", "message": "mentions `kvConnector` at line 2, no vLLM "
                              "launch recognised: not a deployment document, vLLM config or Kubernetes manifest",
                              "file": "chart/values.yaml", "line": 2, "path": "",
                              "hint": "if this file deploys vLLM in a way the audit does not read, say so in an issue; "
                                      "see docs/audit-formats.md for what is read"}]
    text = render(small_fleet, "text")
    assert "1 file note(s)" in text.splitlines()[1]
    assert "  at lws.yaml:10 · LeaderWorkerSet serving/pd · container leader · role prefill" in text
    assert "  vllm release: 0.22.0 (pip pin vllm==0.22.0 at line 1)" in text
    assert "  chart/values.yaml:2: source.unrecognized: mentions `kvConnector` at line 2" in text
    md = render(small_fleet, "md")
    assert ("| `lws.yaml#LeaderWorkerSet/serving/pd/leader` | 10 | lws.yaml:10 · LeaderWorkerSet serving/pd · "
            "container leader · role prefill | 0.21.0 (image tag ") in md
    assert "## File notes" in md and "| `chart/values.yaml` | 2 | `source.unrecognized` |" in md
    html = render(small_fleet, "html")
    assert 'container leader · role prefill' in html and '<tr class="file-note">' in html
    report = json.loads(render(small_fleet, "policyreport"))
    skipped = [r for r in report["results"] if r["result"] == "skip"]
    assert [(r["rule"], r["properties"]["file"]) for r in skipped] == [("source.unrecognized", "chart/values.yaml")]
    assert any(r["properties"].get("role") == "prefill" and r["properties"]["vllm_release"].startswith("0.21.0")
               for r in report["results"])


def test_a_container_running_a_script_from_a_configmap_is_read(tmp_path):
    manifest = write(tmp_path / "pod.yaml", f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: scripts}}
data:
  start.sh: |
    #!/bin/bash
    KV='{NIXL}'
    exec vllm serve m --kv-transfer-config "$KV"
---
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  volumes: [{{name: s, configMap: {{name: scripts}}}}]
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.33.0
      command: [bash, /opt/start.sh]
      volumeMounts: [{{name: s, mountPath: /opt}}]
""")
    (d,) = read_source(manifest).deployments
    assert (d.line, d.container, json.loads(d.document["kv_transfer_config"])["kv_connector"]) == (16, "vllm", "NixlConnector")


CORPORA = [str(Path(__file__).resolve().parent / name) for name in ("fleet_corpus", "k8s_samples")]


def test_no_report_of_the_public_corpus_holds_a_readers_marker(tmp_path):
    """Readers mark a value a file does not give (NUL, the name, SOH, why,
    NUL); a report, in every format, and the decision log show each as the
    file writes it. The public files hold Helm and Go template names and
    if-dependent variables (`$ACCESS_LOG_ARGS`)."""
    report = audit(CORPORA)
    for fmt in FORMATS:
        text = render(report, fmt)
        assert "\x00" not in text and "\x01" not in text and "\\u0000" not in text and "\\u0001" not in text, fmt
    log = tmp_path / "decisions.jsonl"
    result = subprocess.run([sys.executable, "-m", "hma_policy", "audit", *CORPORA, "--format", "json",
                             "-o", str(tmp_path / "report.json"), "--log", str(log)], capture_output=True, text=True)
    assert result.returncode in (0, 1), result.stderr
    assert "\\u0000" not in log.read_text() and "\\u0001" not in log.read_text()
    # Each unknown value reads as written, once, in the deployments that hold one.
    shown = {e.deployment.id for e in report.entries} | {p.message for e in report.entries for p in e.deployment.notes}
    assert any("/{{ .Release.Namespace }}/{{ include \"aibrix-model.fullname\" . }}/prefill/prefill" in s for s in shown)
    assert any(s.startswith("the command also takes `$ACCESS_LOG_ARGS` (which is set differently on the paths "
                            "through `if` in the script at line") for s in shown)
    assert any("takes its value from `{{ .ObjectMeta.Namespace }}`, which this file does not set" in s for s in shown)
    assert ("the model is `$MODEL`, where `$MODEL` may be set by `source $(...)/../../../common/launch_utils.sh` "
            "at line 10, a file the audit does not read; the decision does not read the model's name") in shown


def test_what_leaves_the_readers_shows_each_marker_as_written():
    """The one pass every file's findings take (sources._as_written): ids,
    names, resources, origins, and the messages, paths and hints of the
    deployments' problems and notes, the file's problems and its notes."""
    from hma_policy.audit.sources import _as_written
    from hma_policy.audit.sources.deployment import Deployment, SourceFile
    from hma_policy.core.errors import Problem
    from hma_policy.core.markers import unresolved

    ns = unresolved("{{ .Release.Namespace }}")
    why = unresolved("$A", "is set differently on the paths through `if` at line 3")
    problem = Problem("source.x", f"the option `--disable-{why}`", f"/a/{ns}", hint=f"see {ns}")
    found = SourceFile("f.yaml", "kubernetes", (Deployment(
        "f.yaml", "kubernetes", f"#Deployment/{ns}/m", 3, f"{ns}/m", {"name": f"{ns}/m"}, (problem,), (problem,),
        (("kv_transfer_config", f"Deployment {ns}/m: args"),), (("name", f"{ns}"), ("namespace", "x")), "c", "r"),),
        (problem,), None, (problem,))
    shown = _as_written(found)
    (d,) = shown.deployments
    assert (d.id, d.name, dict(d.resource)["name"], d.origins[0][1]) == (
        "f.yaml#Deployment/{{ .Release.Namespace }}/m", "{{ .Release.Namespace }}/m", "{{ .Release.Namespace }}",
        "Deployment {{ .Release.Namespace }}/m: args")
    for p in (*d.problems, *d.notes, *shown.problems, *shown.notes):
        assert (p.message, p.path, p.hint) == ("the option `--disable-$A`", "/a/{{ .Release.Namespace }}",
                                               "see {{ .Release.Namespace }}")
    assert d.document == {"name": f"{ns}/m"}  # a document keeps its markers for validation
    clean = SourceFile("g.sh", "shell", (Deployment("g.sh", "shell", ":1", 1, "m"),))
    assert _as_written(clean) is clean


def test_a_launch_in_ngcs_vllm_container_runs_the_release_it_ships(tmp_path):
    # NVIDIA's vLLM Release 25.10 ships vLLM 0.10.2 (its release notes, "Contents of the vLLM container"),
    # where any kv_transfer_config turns HMA off; it was decided as 0.33.0, `enabled`.
    script = write(tmp_path / "run.sh", f"docker run --gpus all nvcr.io/nvidia/vllm:25.10-py3 "
                                        f"vllm serve m --kv-transfer-config '{NIXL}'\n")
    (entry,) = audit([str(script)]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]) == ("disabled", {
        "release": "0.10.2", "source": "image tag nvcr.io/nvidia/vllm:25.10-py3 (NGC 25.10, which ships vLLM 0.10.2)"})
