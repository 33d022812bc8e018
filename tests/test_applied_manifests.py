"""Manifests a shell script applies with `kubectl apply -f` are read as
manifest files are, at the script's lines: a here-document given to it, one
a `cat` pipes to it, or a file the script wrote with one. KubeAI's own e2e
test applies its Model that way (test/e2e/model-files/test.sh)."""

from __future__ import annotations

import pytest

from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.shell_commands import applied_file
from sourcefiles import NIXL, write

MODEL = """apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: ${model_name}
spec:
  url: "hf://facebook/opt-125m"
  engine: VLLM
  image: vllm/vllm-openai:v0.30.0
  args:
    - --kv-transfer-config=KV
"""

POD = f"""apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.30.0
      args: [m, --kv-transfer-config, '{NIXL}']
"""


def read(tmp_path, script):
    path = write(tmp_path / "deploy.sh", script)
    return read_source(path, display="deploy.sh")


def test_a_here_document_piped_to_kubectl_apply_is_read_with_the_scripts_variables(tmp_path):
    found = read(tmp_path, "model_name=opt\ncat <<EOF | kubectl apply -f -\n"
                 + MODEL.replace("KV", '{"kv_connector":"${KV}","kv_role":"kv_both"}') + "EOF\n")
    (launch,) = found.deployments
    assert (launch.id, launch.format, launch.line, launch.name) == ("deploy.sh#Model/opt/server", "kubeai", 9, "opt/server")
    assert launch.release.version == "0.30.0"
    # A variable the script does not set is a value not known, as in any command line.
    assert [p.message for p in launch.problems] == [
        "`--kv-transfer-config` takes its value at `/kv_connector` from `${KV}`, which this file does not set"]


@pytest.mark.parametrize("script, line", [
    (f"kubectl apply -f - <<'YAML'\n{POD}YAML\n", 7),               # its own here-document, quoted: not expanded
    (f"kubectl -n serving apply --filename=- <<EOF\n{POD}EOF\n", 7),  # global options before the command
    (f"oc create -f- <<EOF\n{POD}EOF\n", 7),
    (f"cat > pod.yaml <<EOF\n{POD}EOF\necho applying\nkubectl apply -f pod.yaml\n", 7),  # a file the script wrote
    # kserve/kserve (aaac4e2) hack/setup/quick-install/*-full-install-with-manifests.sh: a function whose body
    # cats a here-document, piped to kubectl (survey 26a: the ClusterServingRuntime was missed).
    (f"get_manifests() {{\n  cat <<'EOF'\n{POD}EOF\n}}\nget_manifests | kubectl apply --server-side -f -\n", 8),
    # aws-samples/awsome-inference (7a520c6) 2.projects/dynamo-inference/scripts/deploy-dynamo-vllm.sh:
    # a file named by a value the script does not set; the same words apply it (it was dropped unread).
    (f'YAML_FILE="${{DEPLOYMENT_NAME}}.yaml"\ncat > "${{YAML_FILE}}" << EOF\n{POD}EOF\n'
     'kubectl apply -f "${YAML_FILE}"\n', 8),
])
def test_each_way_of_applying_a_here_document_is_read(tmp_path, script, line):
    found = read(tmp_path, script)
    assert [(d.id, d.line, d.document["kv_transfer_config"]) for d in found.deployments] == [
        ("deploy.sh#Pod/p/vllm", line, NIXL)]


@pytest.mark.parametrize("script", [
    f"cat <<EOF > /dev/null\n{POD}EOF\n",                   # written nowhere kubectl reads
    f"kubectl diff -f - <<EOF\n{POD}EOF\n",                 # a command that applies nothing
    f"cat <<EOF | grep vllm\n{POD}EOF\n",                   # piped to another command
    f"m() {{\n  cat <<EOF\n{POD}EOF\n  echo done\n}}\nm | kubectl apply -f -\n",  # a function that sends more
    "kubectl apply -f pod.yaml\n",                          # a file the script did not write (the audit reads it itself)
    f'cat > "$A.yaml" <<EOF\n{POD}EOF\nkubectl apply -f "$B.yaml"\n',  # another value not known: another file
    f'YAML="{POD}"\necho "$YAML" > pod.yaml\nkubectl apply -f pod.yaml\n',  # not the file's own lines
])
def test_what_is_not_applied_from_the_scripts_own_lines_is_not_read(tmp_path, script):
    assert read(tmp_path, script).deployments == ()


def test_a_manifest_that_is_not_yaml_is_a_located_problem_and_the_rest_is_read(tmp_path):
    found = read(tmp_path, f"cat <<EOF | kubectl apply -f -\nkind: Pod\nmetadata: {{name: vllm, [broken\nEOF\n"
                           f"kubectl apply -f - <<EOF\n{POD}EOF\n")
    assert [d.id for d in found.deployments] == ["deploy.sh#Pod/p/vllm"]
    (problem,) = found.problems
    assert (problem.code, problem.line) == ("input.parse", 3)
    assert problem.message.startswith("the manifest the script applies is not YAML the audit reads (line 3): ")


def test_a_broken_manifest_that_never_names_vllm_is_skipped(tmp_path):
    # volcano-sh/volcano (ed72c7c) benchmark/scripts/create-hypernodes.sh applies HyperNodes whose
    # `members:${members}` (a value built in a loop) the audit reads as YAML that does not parse:
    # an input.parse problem for a file that never names vLLM, which a broken YAML file is not.
    found = read(tmp_path, "members=\"\"\nfor i in $(seq 0 $N); do members=\"${members}\n    - type: HyperNode\"; done\n"
                           "cat <<EOF | kubectl apply -f -\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\n"
                           "metadata:\n  name: s1\nspec:\n  tier: 2\n  members:${members}\nEOF\n")
    assert (found.deployments, found.problems) == ((), ())


def test_a_launch_in_the_script_and_one_it_applies_are_both_read(tmp_path):
    found = read(tmp_path, f"vllm serve m --kv-transfer-config '{NIXL}' &\nkubectl apply -f - <<EOF\n{POD}EOF\n")
    assert [(d.id, d.format) for d in found.deployments] == [("deploy.sh:1", "shell"), ("deploy.sh#Pod/p/vllm", "kubernetes")]
    assert found.format == "shell"


@pytest.mark.parametrize("words, file", [
    (["kubectl", "apply", "-f", "-"], "-"),
    (["/usr/local/bin/kubectl", "--context", "c", "replace", "-fpod.yaml"], "pod.yaml"),
    (["kubectl", "apply", "-f=m.yaml"], "m.yaml"),
    (["kubectl", "apply", "-k", "overlay"], None),
    (["kubectl", "get", "pods", "-f", "-"], None),
    (["kubectl", "apply", "-f"], None),
    (["helm", "apply", "-f", "-"], None),
])
def test_applied_file_reads_kubectls_words(words, file):
    assert applied_file(words) == file
