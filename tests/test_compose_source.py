"""docker compose files (engine/audit/sources/compose.py): services that run
vLLM, the file's own interpolation and `.env`, anchors and merge keys, and
each launch's place (issue 17)."""

from __future__ import annotations

from hma_policy.audit.run import audit
from hma_policy.audit.sources import find_deployments, read_source, source_format
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import LMCACHE, NIXL, ktc, write


# Trimmed from vllm-project/aibrix deployment/standalone/docker-compose.yml at
# e3e10f9e4aebe9aac5e7d992fb87d2648e01628b (Apache-2.0): an anchor merged into
# each vLLM service, interpolation with defaults, a command as a folded string.
AIBRIX = """x-common-gpu: &common-gpu
  deploy:
    resources:
      reservations:
        devices:
          - driver: nvidia
            capabilities: [gpu]

services:
  redis:
    image: ${REDIS_IMAGE:-redis:7.4.2}
    command: ${REDIS_SERVER_CMD:-redis-server}

  vllm:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}
    container_name: aibrix-vllm
    environment:
      CUDA_VISIBLE_DEVICES: ${VLLM_GPU:-0}
      HF_TOKEN: ${HF_TOKEN:-}
    <<: *common-gpu
    command: >
      --model ${MODEL_NAME:-Qwen/Qwen2.5-1.5B-Instruct}
      --port 8000
      --tensor-parallel-size ${VLLM_TP:-1}
      --enable-prefix-caching

  prefill-engine:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}
    container_name: aibrix-prefill
    profiles: ["pd"]
    <<: *common-gpu
    command: >
      --model ${MODEL_NAME:-Qwen/Qwen2.5-1.5B-Instruct}
      --max-num-seqs ${PREFILL_MAX_SEQS:-64}
"""


def test_services_that_run_vllm_are_launches_at_their_keys(tmp_path):
    path = write(tmp_path / "docker-compose.yml", AIBRIX)
    source = read_source(path)
    assert source.format == "compose" and source.problems == ()
    vllm, prefill = source.deployments
    assert [(d.id, d.line, d.container, d.role) for d in source.deployments] == [
        (f"{path}#services/vllm", 14, "aibrix-vllm", None), (f"{path}#services/prefill-engine", 27, "aibrix-prefill", "prefill")]
    assert vllm.document == {"name": "vllm", "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"}}
    assert vllm.release == ReleaseHint("0.6.6", "image tag vllm/vllm-openai:v0.6.6")
    assert source_format("docker-compose.prod.yaml") == source_format("compose.yml") == "compose"


def test_the_env_file_beside_it_is_read_and_its_values_win_over_defaults(tmp_path):
    write(tmp_path / ".env", f"# settings\nVLLM_IMAGE=docker.io/vllm/vllm-openai:v0.21.0\nKV='{LMCACHE}'\n")
    path = write(tmp_path / "compose.yaml", """services:
  engine:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:latest}
    command: ["m", "--kv-transfer-config", "${KV:?set KV}", "--port", "${PORT}"]
    environment:
      - VLLM_USE_SIMPLE_KV_OFFLOAD=1
      - LMCACHE_USE_UPSTREAM_MP
""")
    (d,) = read_source(path).deployments
    assert d.release == ReleaseHint("0.21.0", "image tag docker.io/vllm/vllm-openai:v0.21.0")
    assert d.chain == (str(path), str(tmp_path / ".env"))
    # LMCACHE_USE_UPSTREAM_MP is passed on from where compose runs: not known, and the decision reads it.
    assert d.problems[0].message == ("the environment variable `LMCACHE_USE_UPSTREAM_MP` takes its value from "
                                     "`$LMCACHE_USE_UPSTREAM_MP`, which this file does not set")
    without = write(tmp_path / "other" / "compose.yaml", path.read_text().replace("      - LMCACHE_USE_UPSTREAM_MP\n", ""))
    (e,) = read_source(without).deployments
    assert e.release == ReleaseHint(None, "image tag vllm/vllm-openai:latest: no release in the tag")
    assert e.problems[0].message == "`--kv-transfer-config` takes its value from `${KV:?set KV}`, which this file does not set"


def test_a_command_word_that_is_a_default_the_env_file_does_not_set_may_hold_options(tmp_path):
    # luisefigueroa/pulsar-gb10-vllm-stack (203dcd19) docker-compose.yml: `command: > --model ... ${ENGINE_ARGS:-}`,
    # "configured via .env": compose takes ENGINE_ARGS from the environment it runs in first, and its words may
    # hold any option. The shell reader notes such a word; compose said nothing (survey 40a).
    path = write(tmp_path / "compose.yaml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.26.0\n"
                                            "    command: >\n      --model m\n      ${ENGINE_ARGS:-}\n")
    (d,) = read_source(path).deployments
    assert [(n.code, n.message) for n in d.notes] == [(
        "source.unresolved_arguments", "service vllm: the command also takes `${ENGINE_ARGS:-}`, which the .env does "
                                       "not set: its default (nothing) is read, and where the environment sets "
                                       "`ENGINE_ARGS` it may hold other options")]
    # A .env that sets it gives its words.
    write(tmp_path / ".env", "ENGINE_ARGS=--max-model-len 4096\n")
    (d,) = read_source(path).deployments
    assert d.notes == ()


def test_an_entrypoint_script_given_vllm_s_options_is_noted_where_it_is_not_read(tmp_path):
    # yichao-yuan-99/vllm-otel (8abc0307) servers/servers-docker/docker-compose.yml: its vLLM image with
    # `entrypoint: [/opt/vllm-plugins/vllm_entrypoint.sh]` (a script inside the image) and `command: [--model, ...]`:
    # no launch and nothing said (survey 40b).
    path = write(tmp_path / "docker-compose.yml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.14.0\n"
                                                  "    entrypoint: [/opt/vllm-plugins/vllm_entrypoint.sh]\n"
                                                  "    command: [--model, Qwen/Qwen3-8B, --tensor-parallel-size, '2']\n")
    report = audit([str(path)])
    assert (report.entries, [(n.code, n.line, n.message) for n in report.notes]) == ((), [(
        "source.unrecognized", 2, "service vllm: the entrypoint `/opt/vllm-plugins/vllm_entrypoint.sh` is given only "
                                  "arguments, each an option of vLLM's server (`--model`, `--tensor-parallel-size`), but "
                                  "what it runs is not read: not read as a launch")])


def test_entrypoint_command_shell_scripts_extends_and_bind_mounted_configs(tmp_path):
    write(tmp_path / "conf" / "serve.yaml", f"kv-transfer-config: '{NIXL}'\n")
    path = write(tmp_path / "docker-compose.yml", f"""services:
  base:
    image: python:3.12
    environment: {{VLLM_USE_SIMPLE_KV_OFFLOAD: "0"}}
    command: ["python3", "proxy.py"]
  shell:
    extends: base
    entrypoint: ["/bin/bash", "-c"]
    command:
      - |
        pip install vllm==0.22.0 && vllm serve m --kv-transfer-config '{LMCACHE}'
  mounted:
    image: lmcache/vllm-openai:v0.3.9
    volumes: ["./conf:/etc/vllm:ro"]
    command: m --config /etc/vllm/serve.yaml
""")
    shell, mounted = read_source(path).deployments
    assert (shell.name, ktc(shell)["kv_connector"], shell.document["env"]) == ("shell", "LMCacheConnectorV1",
                                                                               {"VLLM_USE_SIMPLE_KV_OFFLOAD": "0"})
    assert shell.release == ReleaseHint("0.22.0", "pip pin vllm==0.22.0 at line 6")  # installed in the container: over its image
    assert ktc(mounted)["kv_connector"] == "NixlConnector"
    assert mounted.chain == (str(path), str(tmp_path / "conf" / "serve.yaml"))
    assert mounted.release.version is None and "not vLLM's release image" in mounted.release.origin


def test_a_service_that_only_extends_another_keeps_the_file_a_compose_file(tmp_path):
    # opea-project/GenAIComps (8130a3f) comps/lvms/deployment/docker_compose/compose.yaml:
    # `lvm-vllm: extends: lvm` has no image, build or command of its own; the whole file was
    # skipped as "not a docker compose file", its vLLM services with it.
    path = write(tmp_path / "compose.yaml", f"""services:
  vllm-service:
    image: vllm/vllm-openai:v0.10.1
    command: [m, --kv-transfer-config, '{NIXL}']
  lvm:
    image: opea/lvm:latest
  lvm-vllm:
    extends: lvm
""")
    (d,) = read_source(path).deployments
    assert (d.name, d.release.version, ktc(d)["kv_connector"]) == ("vllm-service", "0.10.1", "NixlConnector")


def test_an_override_file_whose_other_services_give_only_their_environment_is_a_compose_file(tmp_path):
    # opea-project/GenAIExamples (15b0d46) AgentQnA/docker_compose/intel/cpu/xeon/compose_remote.yaml,
    # merged over compose.yaml with `-f`: `worker-rag-agent` gives only its environment, and the whole
    # file, vLLM service and all, was skipped as "not a deployment document".
    path = write(tmp_path / "compose_remote.yaml", f"""services:
  agent-vllm-service:
    image: vllm/vllm-openai:v0.10.1
    command: [--model, m, --kv-transfer-config, '{NIXL}']
  worker-rag-agent:
    environment:
      llm_engine: vllm
""")
    source = read_source(path)
    assert source.format == "compose" and source.skipped is None
    (d,) = source.deployments
    assert (d.name, d.line, d.release.version, ktc(d)["kv_connector"]) == ("agent-vllm-service", 2, "0.10.1", "NixlConnector")
    # Environment alone in every service is no compose file of launches.
    only_env = write(tmp_path / "compose.override.yaml", "services:\n  a:\n    environment: {X: 1}\n")
    assert read_source(only_env).skipped == "not a docker compose file (no services with an image, build, command or extends)"


def test_a_service_that_builds_from_vllms_image_runs_vllm_serve_with_its_command(tmp_path):
    # NVIDIA/GenerativeAIExamples (401cb44), industries/energy/simulation-workflow-agent:
    # `ocr-vllm: build: {context: sim_agent, dockerfile: Dockerfile.ocr}` FROM vllm/vllm-openai,
    # `command: [zai-org/GLM-OCR, --port, "8080", ...]`: the service's model and options were lost
    # (the file was only noted for its KV option); only the Dockerfile was a launch.
    write(tmp_path / "ocr" / "Dockerfile.ocr", "FROM vllm/vllm-openai:v0.11.0\nENV VLLM_USE_V1=1\n"
                                             "RUN pip install --no-cache-dir transformers\n")
    compose = write(tmp_path / "docker-compose.yml", f"""services:
  ocr-vllm:
    image: glm-ocr-vllm
    build:
      context: ocr
      dockerfile: Dockerfile.ocr
    command: ["zai-org/GLM-OCR", "--port", "8080", "--kv-transfer-config", '{LMCACHE}']
  plain:
    build: ocr
    command: ["m"]
""")
    ocr, = [d for d in read_source(compose, roots=(tmp_path,)).deployments if d.name == "ocr-vllm"]
    assert (ocr.line, ocr.document["model"], ktc(ocr)["kv_connector"]) == (2, {"name": "zai-org/GLM-OCR"},
                                                                        "LMCacheConnectorV1")
    assert ocr.release == ReleaseHint("0.11.0", f"image tag vllm/vllm-openai:v0.11.0 in {tmp_path / 'ocr' / 'Dockerfile.ocr'}, "
                                     "which the service builds")
    assert [p.rsplit("/", 1)[-1] for p in ocr.chain] == ["docker-compose.yml", "Dockerfile.ocr"]
    # `build: ocr` names the context, whose Dockerfile is `Dockerfile`: not there, so not a launch.
    assert [d.name for d in read_source(compose, roots=(tmp_path,)).deployments] == ["ocr-vllm"]
    # A Dockerfile that sets its own ENTRYPOINT runs something else with the command.
    write(tmp_path / "ocr" / "Dockerfile.ocr", "FROM vllm/vllm-openai:v0.11.0\nENTRYPOINT [\"python3\", \"app.py\"]\n")
    assert read_source(compose, roots=(tmp_path,)).deployments == ()


def test_a_service_that_builds_its_image_runs_in_it_whatever_its_base(tmp_path):
    # NVIDIA/dgx-spark-playbooks (0db7c14) txt2kg's vllm-nvfp4: `build:` of a Dockerfile FROM
    # nvcr.io/nvidia/vllm, and an `entrypoint` that runs vLLM. The built image's release (its base's, a
    # pip pin) and ENV were read only where it is FROM vLLM's own image: decided as 0.33.0 (survey 26d).
    write(tmp_path / "Dockerfile", "FROM python:3.11\nRUN pip install vllm==0.10.2\nENV VLLM_USE_V1=1\n")
    compose = write(tmp_path / "docker-compose.yml", "services:\n  vllm:\n    build: .\n"
                    f"    command: [vllm, serve, m, --kv-transfer-config, '{LMCACHE}']\n")
    (d,) = read_source(compose, roots=(tmp_path,)).deployments
    assert (d.release, d.document["env"]) == (ReleaseHint(
        "0.10.2", f"pip pin vllm==0.10.2 at line 2 in {tmp_path / 'Dockerfile'}, which the service builds"),
        {"VLLM_USE_V1": "1"})
    assert [p.rsplit("/", 1)[-1] for p in d.chain] == ["docker-compose.yml", "Dockerfile"]


def test_a_services_build_args_give_the_dockerfiles_arguments(tmp_path):
    # av/harbor (76469b1) services/compose.vllm.yml: `build.args` give the Dockerfile's
    # `ARG HARBOR_VLLM_VERSION` before `FROM ${HARBOR_VLLM_IMAGE}:${HARBOR_VLLM_VERSION}`. Compose hands
    # them to `docker build --build-arg`, but the release was read from the ARG's default: a service
    # built FROM vllm/vllm-openai:v0.11.0 was decided as 0.8.3, `disabled` (survey 41b).
    write(tmp_path / "img" / "Dockerfile", "ARG VERSION=v0.8.3\nARG IMAGE=vllm/vllm-openai\nFROM ${IMAGE}:${VERSION}\n")
    compose = write(tmp_path / "compose.yml", "services:\n  vllm:\n    build:\n      context: ./img\n"
                    "      args:\n        VERSION: ${TAG}\n        UNDECLARED: x\n    command: --model m\n")
    write(tmp_path / ".env", "TAG=v0.11.0\n")
    (d,) = read_source(compose, roots=(tmp_path,)).deployments
    assert (d.release, [e.decision["outcome"] for e in audit([str(compose)]).entries]) == (ReleaseHint(
        "0.11.0", f"image tag vllm/vllm-openai:v0.11.0 in {tmp_path / 'img' / 'Dockerfile'}, which the service builds"),
        ["enabled"])
    # The list form; an argument given no value is the environment's, where compose runs: its tag is not known.
    write(tmp_path / "compose.yml", "services:\n  vllm:\n    build:\n      context: ./img\n"
                                   "      args: [VERSION=v0.10.0]\n    command: --model m\n")
    assert read_source(compose, roots=(tmp_path,)).deployments[0].release.version == "0.10.0"
    write(tmp_path / "compose.yml", "services:\n  vllm:\n    build:\n      context: ./img\n"
                                   "      args: [VERSION]\n    command: --model m\n")
    (unknown,) = read_source(compose, roots=(tmp_path,)).deployments
    assert [n.message for n in unknown.notes] == [
        "the vLLM release is not known: image vllm/vllm-openai:$VERSION: its tag is not known from this file in "
        f"{tmp_path / 'img' / 'Dockerfile'}, which the service builds"]


def test_a_service_that_builds_an_image_the_audit_cannot_read_has_no_release(tmp_path):
    # av/harbor (76469b1) services/compose.x.vllm.rocm.yml: a service that builds its image, with an
    # entrypoint that runs vLLM, from a Dockerfile outside the audited paths was decided as the
    # default 0.33.0 with nothing said, where an image not known is a `source.release_unknown` note.
    compose = write(tmp_path / "compose.yml", "services:\n  vllm:\n    build: ./nowhere\n"
                    "    entrypoint: [python3, -m, vllm.entrypoints.openai.api_server]\n")
    (d,) = read_source(compose, roots=(tmp_path,)).deployments
    assert [(n.code, n.message) for n in d.notes] == [("source.release_unknown", (
        "the vLLM release is not known: service vllm builds the image it runs, but the Dockerfile it builds, "
        "`./nowhere/Dockerfile`, is not in the audited paths"))]
    write(tmp_path / "compose.yml", "services:\n  vllm:\n    build: {context: $CTX}\n"
                                   "    entrypoint: [vllm, serve, m]\n")
    assert [n.message for n in read_source(compose, roots=(tmp_path,)).deployments[0].notes] == [
        "the vLLM release is not known: service vllm builds the image it runs, but the Dockerfile it builds, "
        "`$CTX/Dockerfile`, is not known from this file"]


def test_an_alias_bomb_is_refused_before_it_is_walked(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)) + "services: {s: {image: vllm/vllm-openai, command: [m]}}\n"
    source = read_source(write(tmp_path / "compose.yaml", bomb))
    assert source.deployments == ()
    assert source.problems[0].code == "input.parse" and "values through its aliases" in source.problems[0].message


def test_compose_text_in_memory_reads_nothing_from_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / ".env", "VLLM_IMAGE=vllm/vllm-openai:v0.21.0\n")
    (d,) = find_deployments("compose.yaml", "services:\n  s:\n    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.33.0}\n"
                                           "    command: [m]\n").deployments
    assert d.release.version == "0.33.0"


TPU_COMPOSE = """\
services:
  vllm-gemma4-31b:
    image: ${DOCKER_URI:-vllm/vllm-tpu:gemma4}
    privileged: true
    environment:
      - HF_TOKEN=${HF_TOKEN:-<YOUR_HUGGING_FACE_TOKEN_PLACEHOLDER>}
      - VLLM_ARGS= >
          --model google/gemma-4-31B-it
          --max-model-len 16384
          --tensor-parallel-size 8%s
"""


def test_the_tpu_image_given_no_command_serves_with_the_words_of_vllm_args(tmp_path):
    # AI-Hypercomputer/tpu-recipes (c8cfe2f) inference/trillium/vLLM/Gemma4/docker-compose-gemma4-31B.yml:
    # no command, so vllm-project/tpu-inference's entrypoint runs the api_server with ${VLLM_ARGS:-}.
    # Both files were passed over without a word.
    (d,) = read_source(write(tmp_path / "docker-compose.yml", TPU_COMPOSE % "")).deployments
    assert (d.name, d.line, d.document["model"]) == ("vllm-gemma4-31b", 2, {"name": "google/gemma-4-31B-it"})
    assert "kv_transfer_config" not in d.document and "disable_hybrid_kv_cache_manager" not in d.document
    assert [(n.code, n.message) for n in d.notes][:1] == [(
        "source.image_entrypoint", "the image `vllm/vllm-tpu:gemma4`, given no command, runs vLLM's OpenAI server with "
        "words of its environment: `python3 -m vllm.entrypoints.openai.api_server ${VLLM_ARGS:-}` (vllm-project/"
        "tpu-inference's docker/entrypoint.sh; an image built before February 2026 starts a shell instead)")]
    (off,) = read_source(write(tmp_path / "docker-compose.yml",
                               TPU_COMPOSE % "\n          --disable-hybrid-kv-cache-manager")).deployments
    assert off.document["disable_hybrid_kv_cache_manager"] is True


def test_the_tpu_image_with_its_server_switched_off_or_a_command_of_its_own_is_no_such_launch(tmp_path):
    switched = TPU_COMPOSE % "" + "      - DISABLE_VLLM_SERVER=true\n"
    assert read_source(write(tmp_path / "docker-compose.yml", switched)).deployments == ()
    # Given a command, the entrypoint runs it (`exec "$@"`): a launch only where that starts vLLM.
    commanded = TPU_COMPOSE % "" + "    command: [python3, bench.py]\n"
    assert read_source(write(tmp_path / "docker-compose.yml", commanded)).deployments == ()
    served = TPU_COMPOSE % "" + "    command: [vllm, serve, m]\n"
    (d,) = read_source(write(tmp_path / "docker-compose.yml", served)).deployments
    assert (d.document["model"], [n.code for n in d.notes]) == ({"name": "m"}, ["source.release_unknown"])


def test_a_command_string_is_split_as_compose_go_splits_it(tmp_path):
    # opea-project/GenAIExamples (15b0d46) EdgeCraftRAG/docker_compose/intel/gpu/arc/compose.yaml: a folded
    # `bash -c "..."` entrypoint whose lines end in ` \`. compose-go splits the string with
    # mattn/go-shellwords, which drops a backslash inside double quotes too, so bash runs
    # `VLLM_USE_V1=1  python3 -m vllm...`; read as Docker splits words, bash got `\ python3` and
    # the launch was missed without a word.
    tight = NIXL.replace(" ", "")  # (a plain YAML scalar takes no `: `)
    escaped = tight.replace('"', '\\"')  # inside the double-quoted bash -c script
    path = write(tmp_path / "compose.yaml", f"""services:
  llm:
    image: intel/llm-scaler-vllm:1.1-preview
    entrypoint:
      /bin/bash -c "
      cd /workspace/vllm/models &&
      VLLM_USE_V1=1 \\
      python3 -m vllm.entrypoints.openai.api_server \\
      --model m \\
      --kv-transfer-config '{escaped}'"
  logged:
    image: vllm/vllm-openai:v0.10.1
    command: --model m --kv-transfer-config '{tight}' > /tmp/log 2>&1
""")
    llm, logged = read_source(path).deployments
    assert (llm.name, llm.line, ktc(llm)["kv_connector"], llm.document["env"]) == (
        "llm", 2, "NixlConnector", {"VLLM_USE_V1": "1"})
    # An operator outside quotes ends compose's words: the redirection is no argument of vLLM's.
    assert (logged.problems, ktc(logged)["kv_connector"]) == ((), "NixlConnector")


def test_an_env_file_whose_path_names_a_variable_not_set_is_noted_not_a_crash(tmp_path):
    # NVIDIA-AI-Blueprints/video-search-and-summarization (16d696c5) deploy/docker/services/nim/
    # qwen3-vl-8b-instruct/compose.yml: `env_file: - ${MDX_SAMPLE_APPS_DIR}/.../hw-${HARDWARE_PROFILE}.env`.
    # The path, holding a value not known, was opened: `audit.internal` (ValueError: embedded null byte),
    # and both of the file's vLLM services were lost.
    path = tmp_path / "compose.yml"
    path.write_text("services:\n  vlm:\n    image: vllm/vllm-openai:v0.20.0\n    command: --model m\n"
                    "    env_file:\n      - ${MDX_SAMPLE_APPS_DIR}/hw-${HARDWARE_PROFILE}.env\n"
                    "      - path: ${OTHER}/x.env\n        required: false\n", encoding="utf-8")
    (entry,) = audit([str(tmp_path)]).entries
    assert entry.decision["outcome"] == "enabled"
    assert [(n.code, n.message) for n in entry.deployment.notes][:1] == [("source.unresolved_arguments", (
        "service vlm: the env_file `${MDX_SAMPLE_APPS_DIR}/hw-${HARDWARE_PROFILE}.env` is not known from this file "
        "(its path names what is set where compose runs): the variables it sets are not read"))]
    assert len(entry.deployment.notes) == 2


def test_an_env_file_that_cannot_be_read_is_an_error_of_the_vllm_service_it_belongs_to(tmp_path):
    # tensorzero/tensorzero (7a6159a4): 15 compose files give services that run no vLLM (a gateway, nginx,
    # ngrok) `env_file: .env`, a file the repository ignores; each was a `source.env_file` file problem
    # naming a service no audit reads, 25 in all, and `--fail-on problem` failed a repository without vLLM.
    # A vLLM service's own is its deployment's error, as docs/decision.md says: compose does not start it.
    path = tmp_path / "docker-compose.yml"
    path.write_text("services:\n  web:\n    image: nginx\n    env_file: .env\n"
                    "  vllm:\n    image: vllm/vllm-openai:v0.20.0\n    command: m\n    env_file:\n      - vllm.env\n"
                    "      - path: optional.env\n        required: false\n", encoding="utf-8")
    result = audit([str(tmp_path)])
    ((entry,), problems) = result.entries, [p for f in result.files for p in f.problems]
    assert problems == []
    assert (entry.decision["outcome"], [(p.code, p.message, p.line) for p in entry.deployment.problems]) == (
        "error", [("source.env_file", f"service vllm: the env_file `vllm.env` cannot be read (no such regular file: "
                   f"`{tmp_path / 'vllm.env'}`); docker compose refuses to start the service", 5)])
