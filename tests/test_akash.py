"""Akash Network SDL deployments (audit/sources/akash.py): each service runs as
the container Akash's provider makes of it (akash-network/provider,
cluster/kube/builder/workload.go): `command` in place of the image's
entrypoint, `args` its arguments, `env` NAME=value. They were read as docker
compose files, whose `command` is the arguments of a vLLM image's `vllm serve`
and which have no `args` or `env`: awesome-akash's launches were read as
`vllm serve bash -c`, their options never read (survey 37a)."""

from __future__ import annotations

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from sourcefiles import LMCACHE, ktc, write

# The shape of akash-network/awesome-akash's deploy files (0a6f1d55): a vLLM image whose
# `command` is a shell and whose `args` hold the script.
SDL = """---
version: "2.0"
services:
  vllm:
    image: vllm/vllm-openai:v0.10.1.1
    expose:
      - port: 8000
        as: 8000
        to:
          - global: true
    command:
      - bash
      - "-c"
    args:
      - >-
        vllm serve Qwen/Qwen3-8B --kv-transfer-config '{kv}'
    env:
      - "HF_TOKEN=" # a token
{more}profiles:
  compute:
    vllm:
      resources:
        cpu:
          units: 8
        gpu:
          units: 1
          attributes:
            vendor:
              {vendor}:
                - model: a100
  placement:
    dcloud:
      pricing:
        vllm:
          denom: uakt
          amount: 1000
deployment:
  vllm:
    dcloud:
      profile: vllm
      count: 1
"""


def sdl(kv: str = LMCACHE, more: str = "", vendor: str = "nvidia") -> str:
    return SDL.replace("{kv}", kv).replace("{more}", more).replace("{vendor}", vendor)


def test_a_service_s_args_are_its_command_s_arguments(tmp_path):
    found = read_source(write(tmp_path / "deploy.yaml", sdl()))
    (d,) = found.deployments
    assert (found.format, d.format, d.line, d.container) == ("akash", "akash", 4, "vllm")
    assert ktc(d)["kv_connector"] == "LMCacheConnectorV1"
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]["release"]) == ("disabled", "0.10.1.1")


def test_env_entries_are_name_equals_value(tmp_path):
    # VLLM_USE_V1=0 runs the V0 engine, which has no HMA: read from the SDL's env list, as from a pod's.
    write(tmp_path / "deploy.yaml", sdl(more="").replace('      - "HF_TOKEN=" # a token\n',
                                                       '      - "HF_TOKEN="\n      - VLLM_USE_V1=0\n')
          .replace(" --kv-transfer-config '{kv}'", "").replace(" --kv-transfer-config '" + LMCACHE + "'", ""))
    (entry,) = audit([str(tmp_path)]).entries
    assert entry.deployment.document["env"]["VLLM_USE_V1"] == "0"
    assert entry.decision["outcome"] == "disabled"


def test_a_service_that_only_joins_a_ray_cluster_is_no_launch(tmp_path):
    # awesome-akash's Llama-3.1-405B-BF16: the head runs vLLM over Ray; the workers, in the same vLLM
    # image, run only `ray start --address ... --block`. Read as compose they were two more launches.
    worker = """  rayworker:
    image: vllm/vllm-openai:v0.10.1.1
    command:
      - bash
      - "-c"
    args:
      - >-
        ray start --address $RAYHEAD_PORT_6380_TCP_ADDR:6380 --block
"""
    found = read_source(write(tmp_path / "deploy.yaml", sdl(more=worker)))
    assert [d.container for d in found.deployments] == ["vllm"]
    alone = read_source(write(tmp_path / "workers.yaml", sdl(more=worker).replace(
        "  vllm:\n    image", "  vllm-unused:\n    image", 1).replace("vllm serve Qwen/Qwen3-8B", "sleep")))
    assert (alone.format, alone.deployments, alone.skipped) == ("akash", (), None)  # (examined, as compose's are)


def test_a_vllm_image_without_a_command_serves_its_args(tmp_path):
    text = sdl().replace('    command:\n      - bash\n      - "-c"\n    args:\n      - >-\n'
                         "        vllm serve Qwen/Qwen3-8B --kv-transfer-config '" + LMCACHE + "'\n",
                         '    args: ["--model", "Qwen/Qwen3-8B", "--disable-hybrid-kv-cache-manager"]\n')
    (entry,) = audit([str(write(tmp_path / "deploy.yaml", text))]).entries
    assert (entry.deployment.document["model"], entry.decision["outcome"]) == ({"name": "Qwen/Qwen3-8B"}, "disabled")


def test_an_amd_gpu_profile_is_rocm(tmp_path):
    (amd,) = read_source(write(tmp_path / "amd.yaml", sdl(vendor="amd"))).deployments
    assert (amd.document["platform"], dict(amd.origins)["platform"]) == (
        {"name": "rocm"}, "profiles.compute.vllm: GPU vendor amd")
    (nvidia,) = read_source(write(tmp_path / "nvidia.yaml", sdl())).deployments
    assert "platform" not in nvidia.document


def test_a_compose_file_with_a_version_is_still_compose(tmp_path):
    # compose files may give `version: "2.0"` too; only the SDL's profiles or deployment make one.
    found = read_source(write(tmp_path / "docker-compose.yaml", """version: "2.0"
services:
  vllm:
    image: vllm/vllm-openai:v0.10.1.1
    command: ["--model", "Qwen/Qwen3-8B", "--disable-hybrid-kv-cache-manager"]
"""))
    (d,) = found.deployments
    assert (found.format, d.document["disable_hybrid_kv_cache_manager"]) == ("compose", True)
