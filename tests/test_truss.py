"""Baseten Truss configs (audit/sources/truss.py) and the release a Python
launcher's Truss or Cog model names (audit/sources/pyrelease.py), on the
shapes of basetenlabs/truss-examples (dc9c1665) and replicate/cog-vllm
(69318dfc)."""

from __future__ import annotations

from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source

# qwen/qwen-3-30B-A3-vllm/config.yaml: a docker_server Truss on vLLM's release image.
QWEN = """base_image:
  image: vllm/vllm-openai:v0.8.5
docker_server:
  start_command: sh -c "vllm serve Qwen/Qwen3-30B-A3B --enable-reasoning --reasoning-parser deepseek_r1 --served-model-name qwen30b --port 8000"
  readiness_endpoint: /health
  liveness_endpoint: /health
  predict_endpoint: /v1/chat/completions
  server_port: 8000
resources:
  accelerator: H100:1
  use_gpu: true
model_name: Qwen 3 30B-A3B vLLM
environment_variables:
  VLLM_LOGGING_LEVEL: WARNING
"""


def outcomes(paths: list[Path]):
    report = audit([str(p) for p in paths])
    return [(Path(e.deployment.file).name, e.deployment.line, e.decision["outcome"], e.decision["vllm"]["release"],
             e.deployment.release.origin if e.deployment.release else None) for e in report.entries]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_truss_docker_server_is_a_launch_of_its_base_image(tmp_path):
    # The 43 docker_server Trusses of truss-examples that run vLLM were skipped as "not a deployment
    # document"; this one runs vLLM 0.8.5, which has no hybrid KV cache manager.
    config = write(tmp_path / "qwen" / "config.yaml", QWEN)
    found = read_source(config)
    (d,) = found.deployments
    assert (found.format, d.line, d.name, d.document["model"]) == (
        "truss", 4, "Qwen 3 30B-A3B vLLM/model-server", {"name": "Qwen/Qwen3-30B-A3B"})
    assert outcomes([config]) == [("config.yaml", 4, "disabled", "0.8.5", "image tag vllm/vllm-openai:v0.8.5")]


def test_a_truss_requirement_pin_and_environment_are_read(tmp_path):
    # A pin among `requirements` is installed over the base image's vLLM; `environment_variables`
    # are the server's environment (a boolean written as `true`, as TrussConfig.from_dict does).
    config = write(tmp_path / "config.yaml", QWEN.replace("environment_variables:\n", "requirements:\n  - vllm==0.10.0\n"
                                                          "environment_variables:\n  VLLM_USE_SIMPLE_KV_OFFLOAD: 1\n"))
    (d,) = read_source(config).deployments
    assert d.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}  # (the variables the decision reads)
    assert outcomes([config]) == [("config.yaml", 4, "enabled", "0.10.0", "requirement vllm==0.10.0 at line 14")]
    # A command supervisord cannot split is the file's problem; another name than config.yaml is no Truss.
    broken = write(tmp_path / "b" / "config.yaml", QWEN.replace('--port 8000"', "--port 8000"))
    assert [(p.code, p.line) for p in read_source(broken).problems] == [("input.parse", 4)]
    assert read_source(write(tmp_path / "other.yaml", QWEN)).format != "truss"


def test_a_truss_model_runs_the_vllm_its_config_pins(tmp_path):
    # gemma/gemma-2-9b-it-vllm: model/model.py builds AsyncEngineArgs; config.yaml's requirements pin
    # vllm==0.5.1. It was decided as 0.33.0, `enabled`.
    truss = tmp_path / "gemma-2-9b-it-vllm"
    write(truss / "config.yaml", 'model_name: "Gemma 2 9B Instruct VLLM"\npython_version: py311\nrequirements:\n'
                                 "  - vllm==0.5.1\n  - https://github.com/flashinfer-ai/flashinfer/releases/download/"
                                 "v0.0.8/flashinfer-0.0.8+cu121torch2.3-cp311-cp311-linux_x86_64.whl\n")
    model = write(truss / "model" / "model.py", "from vllm import AsyncEngineArgs\n\nclass Model:\n"
                                                "    def load(self):\n        self.args = AsyncEngineArgs(model='m')\n")
    # (The config is read where it lies inside the audited paths, as the Truss is audited whole.)
    assert outcomes([truss]) == [("model.py", 5, "disabled", "0.5.1", f"requirement vllm==0.5.1 in "
                                  f"{truss / 'config.yaml'} (the Truss whose model this is)")]
    # Without a pin, the base image's tag; a config whose model folder is another is not this model's.
    write(truss / "config.yaml", "model_name: g\nbase_image:\n  image: vllm/vllm-openai:v0.10.1.1\n")
    assert outcomes([truss])[0][2:] == ("enabled", "0.10.1.1", "image tag vllm/vllm-openai:v0.10.1.1, the base image "
                                                            f"of {truss / 'config.yaml'} (the Truss whose model this is)")
    write(truss / "config.yaml", "model_name: g\nmodel_module_dir: src\nrequirements:\n  - vllm==0.5.1\n")
    assert outcomes([truss])[0][2:] == ("enabled", "0.33.0", None)
    assert outcomes([model])[0][2:] == ("enabled", "0.33.0", None)  # nothing outside the audited paths is read


def test_a_script_a_truss_runs_from_its_data_folder_runs_the_trusss_vllm(tmp_path):
    # llama/llama-4-scout-17b-16e-instruct-bf16-vllm: `start_command: sh -c /app/data/do.sh` (Truss
    # copies data/ to /app/data) on vllm/vllm-openai:v0.8.4; do.sh runs `vllm serve`. It was decided
    # as 0.33.0, `enabled` (survey 24a).
    truss = tmp_path / "llama-4-scout"
    write(truss / "config.yaml", "model_name: scout\nbase_image:\n  image: vllm/vllm-openai:v0.8.4\ndocker_server:\n"
                                 "  start_command: sh -c /app/data/do.sh\n  server_port: 8000\n")
    write(truss / "data" / "do.sh", "#!/bin/bash\nvllm serve meta-llama/Llama-4-Scout-17B-16E-Instruct\n")
    assert outcomes([truss]) == [("do.sh", 2, "disabled", "0.8.4", "image tag vllm/vllm-openai:v0.8.4, the base image "
                                  f"of {truss / 'config.yaml'} (the Truss whose start_command runs this file)")]
    # A pin among the requirements wins; a script the start_command does not run is not the Truss's.
    write(truss / "config.yaml", "model_name: scout\nrequirements:\n  - vllm==0.10.0\ndocker_server:\n"
                                 "  start_command: sh -c /app/data/do.sh\n")
    assert outcomes([truss])[0][3] == "0.10.0"
    write(truss / "config.yaml", "model_name: scout\nrequirements:\n  - vllm==0.10.0\ndocker_server:\n"
                                 "  start_command: sh -c /app/data/other.sh\n")
    assert outcomes([truss])[0][3:] == ("0.33.0", None)


def test_the_model_of_a_truss_that_runs_a_server_of_its_own_is_not_run(tmp_path):
    # deepseek-ocr: a docker_server Truss that runs sglang; its model/model.py, which builds
    # AsyncEngineArgs, is never imported (Truss's supervisord runs the start_command alone). It was a
    # vLLM launch, `enabled` (survey 24a).
    truss = tmp_path / "deepseek-ocr"
    write(truss / "config.yaml", "model_name: ocr\nbase_image:\n  image: lmsysorg/sglang:latest\ndocker_server:\n"
                                 '  start_command: sh -c "python3 -m sglang.launch_server --model m --port 8000"\n')
    write(truss / "model" / "model.py", "from vllm.engine.arg_utils import AsyncEngineArgs\nclass Model:\n"
                                        "    def load(self):\n        self.args = AsyncEngineArgs(model='m')\n")
    report = audit([str(truss)])
    assert (report.entries, [f.skipped for f in report.files if f.skipped]) == ((), [
        f"the model of a Truss whose config runs a server of its own ({truss / 'config.yaml'}: "
        "`docker_server.start_command`), which Truss runs instead of the model"])


def test_a_cog_predictor_runs_the_vllm_its_cog_yaml_installs(tmp_path):
    # replicate/cog-vllm: predict.py builds AsyncEngineArgs(**engine_args); cog.yaml's build.run
    # installs vllm==0.5.3.post1 and names predict.py as the predictor.
    write(tmp_path / "cog.yaml", 'build:\n  gpu: true\n  python_version: "3.11.9"\n  run:\n'
                                 "    - --mount=type=cache,target=/root/.cache/pip pip install --ignore-installed "
                                 "vllm==0.5.3.post1\n    - pip install cog==0.10.0a18\n"
                                 'predict: "predict.py:Predictor"\ntrain: "train.py:train"\n')
    predict = write(tmp_path / "predict.py", "from vllm import AsyncEngineArgs\nargs = AsyncEngineArgs(model='m')\n")
    assert outcomes([predict]) == [("predict.py", 2, "disabled", "0.5.3.post1", f"pin vllm==0.5.3.post1 in "
                                    f"{tmp_path / 'cog.yaml'} (the Cog model whose predictor this is)")]
    # Another file beside it is not the predictor.
    other = write(tmp_path / "train.py", "from vllm import LLM\nllm = LLM(model='m')\n")
    assert outcomes([other])[0][2:] == ("enabled", "0.33.0", None)


def test_a_cerebrium_launcher_runs_the_vllm_its_project_installs(tmp_path):
    # CerebriumAI/examples (fd25fd4d) 6-voice/17.1-orpheus-simple: cerebrium.toml's pre_build_commands run
    # `pip install vllm==0.7.3`; the engine is built in orpheus_tts/engine_class.py. It was decided as the
    # default release, `enabled`: 0.7.3 predates the hybrid KV cache manager (survey 22e).
    write(tmp_path / "cerebrium.toml", '[cerebrium.deployment]\nname = "orpheus"\npre_build_commands = ["apt update", '
                                       '"git clone https://github.com/canopyai/Orpheus-TTS.git && pip install '
                                       'vllm==0.7.3 && export VLLM_PREFILL_CHUNK_SIZE=1024"]\n\n'
                                       '[cerebrium.dependencies.pip]\npydub = "latest"\n')
    engine = write(tmp_path / "orpheus_tts" / "engine_class.py",
                   "from vllm import AsyncEngineArgs\nargs = AsyncEngineArgs(model='m')\n")
    # (the project's folder is audited: the config above the launcher is read only within the audited paths)
    assert outcomes([tmp_path]) == [("engine_class.py", 2, "disabled", "0.7.3", f"pin vllm==0.7.3 in "
                                   f"{tmp_path / 'cerebrium.toml'} (the Cerebrium project that builds the launcher's "
                                   "image)")]
    # A pip dependency pinned exactly is one too; "latest", a range, or two pins name none.
    for pip, release in (('"==0.10.1"', "0.10.1"), ('"latest"', "0.33.0"), ('">=0.9.0"', "0.33.0")):
        write(tmp_path / "cerebrium.toml", f"[cerebrium.dependencies.pip]\nvllm = {pip}\n")
        assert outcomes([tmp_path])[0][3] == release, pip
    write(tmp_path / "cerebrium.toml", '[cerebrium.deployment]\nshell_commands = ["pip install vllm==0.9.2"]\n'
                                       '[cerebrium.dependencies.pip]\nvllm = "==0.10.1"\n')
    assert outcomes([tmp_path])[0][3] == "0.33.0"


def test_a_start_command_longer_than_a_command_line_is_a_problem(tmp_path):
    # It was split with shlex.split, quadratic in a word's length: 800 kB took 7.7 s, a hang for a
    # file of 16 MB. Now it is not split at all.
    config = write(tmp_path / "truss" / "config.yaml", "model_name: m\ndocker_server:\n  start_command: vllm serve m "
                                                       f"--served-model-name {'a' * 70_000}\n")
    found = read_source(config)
    assert [(p.code, p.message, p.line) for p in found.problems] == [
        ("input.limit", f"`docker_server.start_command` of `{config}` is longer than a command line may be "
                        "(65536 bytes)", 3)]
    assert found.deployments == ()
