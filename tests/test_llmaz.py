"""llmaz Playgrounds (audit/sources/llmaz.py): an `inference.llmaz.io`
Playground whose BackendRuntime runs vLLM is a launch, read as llmaz's
Playground controller builds its container (tests/fleet_corpus/FORMATS.md
§17 cites the controller's source). The real Playgrounds of
tests/fleet_corpus/InftyAI__llmaz are checked there."""

from __future__ import annotations

import json

import pytest

import hma_policy
from hma_policy.audit.sources import find_deployments, read_source

KV = json.dumps({"kv_connector": "ExampleConnector", "kv_role": "kv_both"})
PRESET_NOTE = ("source.deployer_default", "BackendRuntime `vllm` is not in the audited paths: read as the one llmaz's "
               "Helm chart installs (chart/templates/backends/vllm.yaml, llmaz v0.1.4), its command and recommended "
               "args; its image is the chart's values' (backendRuntime.vllm.image)")


def playground(spec: str, name: str = "pg", annotations: str = "") -> str:
    return (f"apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata:\n  name: {name}\n  namespace: ai\n"
            f"{annotations}spec:\n{spec}")


def open_model(name: str, source: str) -> str:
    return f"apiVersion: llmaz.io/v1alpha1\nkind: OpenModel\nmetadata: {{name: {name}}}\nspec:\n  familyName: f\n  source: {source}\n"


def runtime(name: str = "vllm", command: str = "[python3, -m, vllm.entrypoints.openai.api_server]",
            image: str = "vllm/vllm-openai", version: str = "v0.30.0", configs: str = "", envs: str = "") -> str:
    configs = configs or "  - name: default\n    args: [--model, '{{ .ModelPath }}', --served-model-name, '{{ .ModelName }}']\n"
    return (f"apiVersion: inference.llmaz.io/v1alpha1\nkind: BackendRuntime\nmetadata: {{name: {name}}}\nspec:\n"
            f"  command: {command}\n  image: {image}\n  version: {version}\n{envs}  recommendedConfigs:\n{configs}")


def one(text: str):
    (d,) = find_deployments("pg.yaml", text).deployments
    return d


def test_a_playground_without_a_backend_runtime_is_read_with_the_charts_vllm_preset():
    text = open_model("opt", "{modelHub: {modelID: facebook/opt-125m}}") + "---\n" + playground(f"""\
  modelClaim:
    modelName: opt
  backendRuntimeConfig:
    args:
      - --kv-transfer-config
      - '{KV}'
    envs:
      - name: LMCACHE_USE_UPSTREAM_MP
        value: "1"
""")
    d = one(text)
    assert (d.format, d.id, d.line, d.container, d.role) == ("llmaz", "pg.yaml#Playground/ai/pg/model-runner", 9,
                                                            "model-runner", None)
    assert dict(d.resource) == {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": "Playground", "name": "pg",
                                "namespace": "ai"}
    assert d.document["model"] == {"name": "/workspace/models/models--facebook--opt-125m"}
    assert d.document["kv_transfer_config"] == KV  # appended to the preset's args
    assert d.document["env"] == {"LMCACHE_USE_UPSTREAM_MP": "1"}
    assert d.problems == ()
    assert [(n.code, n.message, n.line) for n in d.notes] == [
        ("source.release_unknown", "the vLLM release is not known: image backendRuntime.vllm.image of llmaz's Helm "
                                   "values: the image is not known from this file", 9),
        (*PRESET_NOTE, 9)]
    decision = hma_policy.decide(d.document)
    assert (decision.outcome, [w.code for w in decision.warnings]) == ("disabled", ["hma.auto_disabled"])


def test_the_backend_runtime_of_the_file_gives_the_command_args_env_and_image():
    envs = "  envs:\n  - {name: LMCACHE_USE_UPSTREAM_MP, value: '0'}\n  - {name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: '0'}\n"
    configs = (f"  - name: default\n    args: [--model, '{{{{.ModelPath}}}}', --kv-transfer-config, '{KV}']\n"
               "  - name: other\n    args: [--model, x]\n")
    text = runtime(envs=envs, configs=configs) + "---\n" + open_model("m", "{uri: 'host:///data/m'}") + "---\n" \
        + playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig:\n    version: v0.31.0\n"
                     "    args: [--kv-transfer-config, '{\"kv_connector\": \"OffloadingConnector\", \"kv_role\": "
                     "\"kv_both\"}']\n    envs: [{name: VLLM_USE_SIMPLE_KV_OFFLOAD, value: '1'}]\n")
    found = find_deployments("pg.yaml", text)
    (d,) = found.deployments
    assert d.document["model"] == {"name": "/data/m"}
    assert json.loads(d.document["kv_transfer_config"])["kv_connector"] == "OffloadingConnector"  # the last one wins
    assert d.document["env"] == {"LMCACHE_USE_UPSTREAM_MP": "0", "VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    assert (d.release.version, d.release.origin, d.notes) == ("0.31.0", "image tag vllm/vllm-openai:v0.31.0", ())
    # The BackendRuntime itself is no launch: it is noted, as a KServe preset is.
    assert [(n.code, n.line) for n in found.notes] == [("source.unrecognized", 2)]
    assert found.notes[0].message == ("BackendRuntime `vllm` runs vLLM for the llmaz Playgrounds that name it: llmaz's "
                                      "controller builds their container from it, with their models and args; it is "
                                      "no launch on its own")


def test_a_backend_runtime_alone_that_mentions_a_kv_option_keeps_its_own_note():
    # A file that yields no launch and mentions --kv-transfer-config is noted for the mention,
    # unless its reader already said why it holds none: that note was replaced, and lost.
    configs = f"  - name: default\n    args: [--model, '{{{{.ModelPath}}}}', --kv-transfer-config, '{KV}']\n"
    found = find_deployments("runtime.yaml", runtime(configs=configs))
    assert found.deployments == ()
    assert [(n.code, n.message[:40]) for n in found.notes] == [
        ("source.unrecognized", "BackendRuntime `vllm` runs vLLM for the ")]


@pytest.mark.parametrize("source, annotation, expected", [
    ("{modelHub: {modelID: Qwen/Qwen2-0.5B}}", False, "/workspace/models/models--Qwen--Qwen2-0.5B"),
    ("{modelHub: {modelID: Qwen/Q-GGUF, filename: q5.gguf}}", False, "/workspace/models/q5.gguf"),
    ("{modelHub: {modelID: Qwen/Qwen2-0.5B}}", True, "Qwen/Qwen2-0.5B"),  # the engine loads it itself
    ("{uri: 'host:///workspace/Qwen2'}", True, "/workspace/Qwen2"),
    ("{uri: 'oss://bucket.endpoint.com/models/Qwen2-7B'}", False, "/workspace/models/models--Qwen2-7B"),
    ("{uri: 's3://bucket/a/model.gguf'}", False, "/workspace/models/model.gguf"),
    ("{uri: 's3://bucket/a/Qwen2'}", True, "s3://bucket/a/Qwen2"),
])
def test_the_model_path_is_what_the_controller_puts_in(source, annotation, expected):
    skip = "  annotations: {llmaz.io/skip-model-loader: 'true'}\n" if annotation else ""
    d = one(open_model("m", source) + "---\n" + playground("  modelClaim: {modelName: m}\n", annotations=skip))
    assert d.document["model"] == {"name": expected}


def test_an_open_model_not_in_the_file_leaves_the_path_and_name_unknown():
    d = one(playground("  replicas: 1\n  modelClaim:\n    modelName: opt-125m\n"))
    assert "model" not in d.document and d.problems == ()
    assert [(n.code, n.message) for n in d.notes if n.code == "source.unresolved_unused"] == [
        ("source.unresolved_unused", "the model is `{{ .ModelPath }} of OpenModel opt-125m`, which this file does not "
                                     "set; the decision does not read the model's name"),
        ("source.unresolved_unused", "`--served-model-name` takes its value from `{{ .ModelName }} of OpenModel "
                                     "opt-125m`, which this file does not set; the decision does not read it")]


def test_a_draft_model_picks_the_speculative_decoding_args():
    claims = "  modelClaims:\n    models:\n    - {name: big, role: main}\n    - {name: small, role: draft}\n"
    models = open_model("big", "{modelHub: {modelID: o/big}}") + "---\n" + open_model("small", "{uri: 's3://b/small'}")
    d = one(models + "---\n" + playground(claims))
    assert d.document["model"] == {"name": "/workspace/models/models--o--big"}
    assert [n.code for n in d.notes] == ["source.release_unknown", "source.deployer_default"]
    # Without the draft model's OpenModel, the preset's --speculative_model (read as argparse spells it) has no known path.
    d = one(open_model("big", "{modelHub: {modelID: o/big}}") + "---\n" + playground(claims))
    assert [n.message for n in d.notes if n.code == "source.unresolved_unused"] == [
        "`--speculative-model` takes its value from `{{ .DraftModelPath }} of OpenModel small`, which this file does "
        "not set; the decision does not read it"]


def test_a_config_the_backend_runtime_lacks_or_a_variable_without_a_value_builds_no_pod():
    text = playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig: {configName: fast}\n")
    assert [(p.code, p.message, p.line) for p in one(text).problems] == [
        ("source.kubernetes", "Playground pg: the BackendRuntime has no recommendedConfig `fast`; llmaz's controller "
                              "builds no pod", 2)]
    text = playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig: {configName: speculative-decoding}\n")
    assert [p.message for p in one(text).problems] == [
        "Playground pg: `{{ .DraftModelPath }}` in recommendedConfig `speculative-decoding` has no value for its "
        "models; llmaz's controller builds no pod"]
    assert [p.message for p in one(playground("  replicas: 1\n")).problems] == [
        "Playground pg: it claims no model (modelClaim or modelClaims); llmaz's webhook rejects it"]


def test_a_playground_that_another_engine_serves_is_no_launch_and_an_unknown_backend_is_noted():
    for backend in ("llamacpp", "sglang", "tgi", "ollama", "tensorrt-llm"):  # the chart's other BackendRuntimes
        found = find_deployments("pg.yaml", playground(f"  modelClaim: {{modelName: m}}\n  backendRuntimeConfig: "
                                                       f"{{backendName: {backend}}}\n"))
        assert (found.deployments, found.notes) == ((), ())
    found = find_deployments("pg.yaml", playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig:\n"
                                                   "    backendName: mine\n"))
    assert found.deployments == ()
    assert [(n.code, n.message, n.line) for n in found.notes] == [
        ("source.unrecognized", "Playground `pg` names the BackendRuntime `mine`, which is not in the audited paths: "
                                "whether vLLM serves it is not known", 9)]
    # A BackendRuntime of the file decides, whatever its name.
    served = runtime("mine") + "---\n" + playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig:\n"
                                                    "    backendName: mine\n")
    assert one(served).release.version == "0.30.0"
    other = runtime(command="[python3, -m, sglang.launch_server]", image="lmsysorg/sglang") + "---\n" \
        + playground("  modelClaim: {modelName: m}\n")
    found = find_deployments("pg.yaml", other)
    assert (found.deployments, found.notes) == ((), ())


def test_args_env_and_versions_that_are_not_strings_are_refused_as_the_api_server_does():
    d = one(playground("  modelClaim: {modelName: m}\n  backendRuntimeConfig:\n    args: [1, null, --port=8000]\n"
                       "    envs: [{name: A, value: 1}, {name: B, value: null}]\n    version: 0.8\n"))
    assert [(p.code, p.message, p.line) for p in d.problems] == [
        ("source.kubernetes", "Playground pg: spec.backendRuntimeConfig.args[0], spec.backendRuntimeConfig.args[1], "
                              "spec.backendRuntimeConfig.envs[0].value, spec.backendRuntimeConfig.version must be "
                              "strings; the API server rejects the Playground", 2)]
    d = one(runtime(command="[python3, -m, vllm.entrypoints.openai.api_server, 5]") + "---\n"
            + playground("  modelClaim: {modelName: m}\n"))
    assert [p.message for p in d.problems] == [
        "BackendRuntime vllm: spec.command[3] must be a string; the API server rejects the BackendRuntime"]


def test_a_backend_runtime_in_the_audited_paths_is_merged_and_named_in_the_chain(tmp_path):
    (tmp_path / "runtimes").mkdir()
    (tmp_path / "runtimes" / "vllm.yaml").write_text(runtime(version="v0.29.0"), encoding="utf-8")
    (tmp_path / "pg.yaml").write_text(playground("  modelClaim: {modelName: m}\n"), encoding="utf-8")
    (d,) = read_source(tmp_path / "pg.yaml", roots=(tmp_path,)).deployments
    assert d.chain == (str(tmp_path / "pg.yaml"), str(tmp_path / "runtimes" / "vllm.yaml"))
    assert d.release.version == "0.29.0"
    assert "source.deployer_default" not in [n.code for n in d.notes]
    (d,) = read_source(tmp_path / "pg.yaml", roots=(tmp_path / "elsewhere",)).deployments
    assert [n.code for n in d.notes if n.code == "source.deployer_default"] == ["source.deployer_default"]


@pytest.mark.parametrize("spec, refusal", [
    ("  modelClaim: [x]\n  backendRuntimeConfig: x\n", "it claims no model (modelClaim or modelClaims)"),
    ("  modelClaims: {models: x}\n  backendRuntimeConfig: {backendName: null, configName: 5, envs: x, args: {}}\n",
     "it claims no model (modelClaim or modelClaims)"),
    # A draft alone is the main model to the controller, which then has no draft path to put in.
    ("  modelClaims: {models: [x, {name: 5, role: draft}]}\n", "`{{ .DraftModelPath }}` in recommendedConfig"),
    ("  modelClaim: {modelName: m}\n  backendRuntimeConfig: {version: [1]}\n", "spec.backendRuntimeConfig.version"),
])
def test_a_playground_of_the_wrong_shape_is_read_as_far_as_it_goes(spec, refusal):
    # The OpenModels are of shapes llmaz's webhook rejects: their paths are not known.
    text = open_model("m", "{uri: 'nope://x'}") + "---\n" + open_model("5", "[1]") + "---\n" + playground(spec)
    d = one(text)
    assert d.format == "llmaz"
    assert [p.code for p in d.problems] == ["source.kubernetes"] and refusal in d.problems[0].message
