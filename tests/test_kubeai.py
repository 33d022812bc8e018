"""KubeAI Models (audit/sources/kubeai.py): a `kubeai.org/v1` Model served by
vLLM is a launch, read as KubeAI's model controller builds its pod
(tests/fleet_corpus/FORMATS.md §16 cites the controller's source). The real
Models of tests/fleet_corpus/substratusai__kubeai are checked there."""

from __future__ import annotations

import json

import pytest

import hma_policy
from hma_policy.audit.sources import find_deployments
from hma_policy.audit.sources.release import ReleaseHint


def model(spec: str, name: str = "m") -> str:
    return f"apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {{name: {name}, namespace: ai}}\nspec:\n{spec}"


def test_a_vllm_model_is_a_launch_with_its_args_env_and_image():
    kv = json.dumps({"kv_connector": "ExampleConnector", "kv_role": "kv_both"})
    text = model(f"""\
  url: hf://org/llama
  engine: VLLM
  image: vllm/vllm-openai:v0.30.0
  args:
    - '--kv-transfer-config={kv}'
  env:
    LMCACHE_USE_UPSTREAM_MP: "1"
""")
    (d,) = find_deployments("model.yaml", text).deployments
    assert (d.format, d.id, d.line, d.container, d.role) == ("kubeai", "model.yaml#Model/ai/m/server", 6, "server", None)
    assert dict(d.resource) == {"apiVersion": "kubeai.org/v1", "kind": "Model", "name": "m", "namespace": "ai"}
    assert d.document["model"] == {"name": "org/llama"}
    assert d.document["kv_transfer_config"] == kv  # as the command line gives it
    assert d.document["env"] == {"LMCACHE_USE_UPSTREAM_MP": "1"}
    assert (d.release.version, d.problems, d.notes) == ("0.30.0", (), ())
    decision = hma_policy.decide(d.document)
    assert (decision.outcome, [w.code for w in decision.warnings]) == ("disabled", ["hma.auto_disabled"])


@pytest.mark.parametrize("source, expected", [
    ("url: hf://org/llama", "org/llama"),  # the URL's reference
    ("url: s3://bucket/models/opt", "s3://bucket/models/opt"),  # the whole URL (and --load-format=runai_streamer)
    ("url: pvc://claim/models/opt", "/model"),  # mounted at /model
    ("url: ollama://qwen2:0.5b", "qwen2:0.5b"),
])
def test_the_model_is_what_the_controller_passes(source, expected):
    (d,) = find_deployments("model.yaml", model(f"  {source}\n  engine: VLLM\n")).deployments
    assert d.document["model"] == {"name": expected}


def test_a_model_cache_and_the_operators_image_are_noted_as_not_in_the_file():
    (d,) = find_deployments("model.yaml", model("  url: s3://b/opt\n  cacheProfile: standard\n  engine: VLLM\n")).deployments
    assert "model" not in d.document
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_unused", "the model is `/models/<name>-<uid>`, where `/models/<name>-<uid>` is the Model's "
                                     "cache, which KubeAI's controller names; the decision does not read the model's "
                                     "name"),
        ("source.release_unknown", "the vLLM release is not known: image modelServers.VLLM.images of the KubeAI "
                                   "operator: the image is not known from this file")]
    assert d.release == ReleaseHint(None, "image modelServers.VLLM.images of the KubeAI operator: the image is not known from "
                               "this file")


def test_a_model_an_arg_gives_again_over_the_cache_is_noted_in_plain_words():
    # opea-project/GenAIInfra (9200b371) kubeai/models/mistral-7b-instruct-v0.3-gaudi.yaml: `url: hf://...`,
    # `cacheProfile: default`, and `args: [--model=mistralai/Mistral-7B-Instruct-v0.3, ...]`, which
    # overrides the cache's `--model` the controller gives. The note quoted "`--model (a later `--model`
    # wins)`", backticks inside backticks.
    (d,) = find_deployments("model.yaml", model(
        "  url: hf://mistralai/Mistral-7B-Instruct-v0.3\n  cacheProfile: default\n  engine: VLLM\n"
        "  args:\n    - --model=mistralai/Mistral-7B-Instruct-v0.3\n    - --load_format=mistral\n")).deployments
    assert d.document["model"] == {"name": "mistralai/Mistral-7B-Instruct-v0.3"}
    assert [n.message for n in d.notes if n.code == "source.unresolved_unused"] == [
        "`--model` (a later `--model` wins) takes its value from `/models/<name>-<uid>` (which is the Model's cache, "
        "which KubeAI's controller names); the decision does not read it"]


@pytest.mark.parametrize("text", [
    model("  url: ollama://qwen2:0.5b\n  engine: OLlama\n"),  # another engine
    model("  url: hf://org/m\n  engine: Infinity\n"),
    model("  url: hf://org/m\n  engine: vllm\n"),  # the API's value is VLLM
    "apiVersion: example.com/v1\nkind: Model\nmetadata: {name: m}\nspec: {url: hf://org/m, engine: VLLM}\n",
])
def test_a_model_that_vllm_does_not_serve_is_no_launch(text):
    assert find_deployments("model.yaml", text).deployments == ()


def test_a_model_of_the_wrong_shape_is_read_as_far_as_it_goes():
    # No url: the controller refuses the Model; args and env that are no list or map are none.
    (d,) = find_deployments("model.yaml", model("  url: 5\n  engine: VLLM\n  args: {a: 1}\n  env: [1]\n  image: 7\n")).deployments
    assert (d.format, d.problems) == ("kubeai", ())
    assert [(n.code, n.message) for n in d.notes][:1] == [
        ("source.unresolved_unused", "the model is `the Model's url`, which this file does not set; the decision does "
                                     "not read the model's name")]


def test_args_and_env_that_are_not_strings_are_refused_as_the_api_server_does():
    spec = "  url: hf://o/m\n  engine: VLLM\n  args: [1, null, --port=8000]\n  env: {A: 1, B: x}\n"
    (d,) = find_deployments("model.yaml", model(spec)).deployments
    assert [(p.code, p.message, p.line) for p in d.problems] == [
        ("source.kubernetes", "Model m: spec.args[0], spec.args[1], spec.env.A must be strings; the API server "
                              "rejects the Model", 6)]
