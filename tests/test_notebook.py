"""Jupyter notebooks (audit/sources/notebook.py): the Python of their code
cells is read as a launcher's, each line at the notebook's line that holds it."""

from __future__ import annotations

import json
from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from sourcefiles import linear_ratio


def notebook(path: Path, *cells: tuple[str, list[str]]) -> Path:
    """A notebook as nbformat writes it (sorted keys, one-space indent, a source line a JSON line)."""
    document = {"cells": [{"cell_type": kind, "metadata": {}, "source": source,
                           **({"execution_count": None, "outputs": []} if kind == "code" else {})}
                          for kind, source in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def test_a_notebooks_engine_is_a_launch_at_its_line(tmp_path):
    # huggingface/trl (f2cd577) examples/notebooks/grpo_trl_lora_qlora.ipynb builds `LLM(...)` in a code
    # cell; notebooks were skipped as "not a deployment source (not JSON, ...)" (survey 14b).
    path = notebook(tmp_path / "grpo.ipynb",
                    ("markdown", ["# Serve the merged model with vLLM\n", "llm = LLM(model='not code')\n"]),
                    ("code", ["!pip install -q vllm\n", "%time\n"]),
                    ("code", ["from vllm import LLM\n", "\n", "llm = LLM(\n", "    model='m',\n",
                              "    kv_transfer_config={'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'},\n",
                              ")"]))
    found = read_source(path)
    (d,) = found.deployments
    line = path.read_text(encoding="utf-8").split("\n").index('    "llm = LLM(\\n",') + 1
    assert (found.format, d.line) == ("python", line)
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "disabled"


def test_a_notebook_without_a_launch_and_one_that_is_not_json(tmp_path):
    plain = notebook(tmp_path / "plain.ipynb", ("code", ["import vllm\n", "print(vllm.__version__)"]),
                     ("code", ["%%writefile README.md\n", "vllm serve m\n"]), ("code", ["%%html\n", "vllm serve m\n"]))
    # (a file written that is no source, and another language's cell, are not read; a script written is)
    assert read_source(plain).skipped == "a notebook in whose code cells no vLLM launch is read"
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json vllm", encoding="utf-8")
    assert (read_source(broken).deployments, read_source(broken).format) == ((), None)


def test_a_notebook_written_otherwise_is_read_in_order(tmp_path):
    # A notebook whose JSON escapes what nbformat writes as it is (`ensure_ascii`), here in a cell's
    # source written as one string: its lines cannot all be found where the notebook has them; they are
    # read in order, after the last one found, and the launch is still read.
    path = tmp_path / "escaped.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                           "source": "from vllm import LLM\n# modèle\nllm = LLM(model='m')\n"}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1), encoding="utf-8")
    (d,) = read_source(path).deployments
    assert d.document["model"] == {"name": "m"}


def test_a_notebooks_shell_escapes_and_bash_cells_run_as_ipython_runs_them(tmp_path):
    # LMCache/LMCache-Examples (19b31ac2) tutorial_1_LMCache_basic.ipynb pins `!uv pip install vllm==0.8.4`
    # (0.8.4: no HMA) above its `LLM(...)`, and tutorial_3_Fast_Agent.ipynb runs `vllm serve ...
    # --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1",...}'` in a `%%bash` cell: IPython's
    # own lines were left out, so the pin was lost (0.33.0 decided) and the launch was a mention.
    # IPython runs `!cmd` as get_ipython().system('cmd') and a `%%bash` cell as run_cell_magic.
    path = notebook(tmp_path / "tutorial.ipynb",
                    ("code", ["!uv pip install vllm==0.8.4\n"]),
                    ("code", ["from vllm import LLM\n", "llm = LLM(model='m')\n", "files = !ls\n", "llm?"]),
                    ("code", ["%%bash\n", "nohup vllm serve \\\n", "  meta-llama/Llama-3.2-1B-Instruct \\\n",
                              "  --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\", \"kv_role\":\"kv_both\"}' &\n"]),
                    ("code", ["!bash run_agent.sh \\\n", "    meta-llama/Meta-Llama-3.1-8B-Instruct \\\n",
                              "    http://localhost:8000/v1"]))
    engine, served = read_source(path).deployments
    text = path.read_text(encoding="utf-8").split("\n")
    assert (engine.line, served.line) == (text.index('    "llm = LLM(model=\'m\')\\n",') + 1,
                                          text.index('    "%%bash\\n",') + 1)
    pin = text.index('    "!uv pip install vllm==0.8.4\\n"') + 1
    assert [(d.release.version, d.release.origin) for d in (engine, served)] == [
        ("0.8.4", f"pip pin vllm==0.8.4 at line {pin}")] * 2
    assert json.loads(served.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # Without the pin, each is read as the default release; the `%%bash` launch is `disabled` there too.
    path = notebook(tmp_path / "unpinned.ipynb", ("code", ["%%bash\n", "vllm serve m --kv-transfer-config "
                                                           "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'\n"]))
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "disabled"



def test_a_cell_written_as_one_string_keeps_the_later_cells_at_their_lines(tmp_path):
    # unslothai/notebooks (bdda2efc) nb/Meta-Synthetic-Data-Llama3.1_(8B).ipynb: a `#@title` cell written as
    # one string, then the cell that starts the server: the launch was placed at line 38, a markdown cell,
    # where the notebook has it at line 120 (survey 38a). Each later cell is found where it is again.
    path = notebook(tmp_path / "nb.ipynb", ("code", "x = 1\ny = 2\n"),
                    ("markdown", ["A server:\n"]),
                    ("code", ["import subprocess, sys\n",
                              'subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server",\n',
                              '                  "--model", "m"])\n']))
    lines = path.read_text(encoding="utf-8").split("\n")
    popen = next(n for n, line in enumerate(lines, 1) if "subprocess.Popen(" in line)
    model = next(n for n, line in enumerate(lines, 1) if "--model" in line)
    (d,) = read_source(path).deployments
    assert (d.line, dict(d.origins)["model"]) == (popen, f"line {model}")


def test_a_notebooks_upgrade_of_vllm_installs_a_release_not_known(tmp_path):
    # LMCache/LMCache-Examples (19b31ac2) tutorial_3_Fast_Agent.ipynb runs `!uv pip install -U vllm --pre
    # --extra-index-url https://wheels.vllm.ai/nightly`: decided as the default release without the note
    # the same line in a shell script has (survey 27f).
    path = notebook(tmp_path / "agent.ipynb",
                    ("code", ["!uv pip install -U vllm --pre --extra-index-url https://wheels.vllm.ai/nightly\n"]),
                    ("code", ["from vllm import LLM\n", "llm = LLM(model='m')\n"]))
    (d,) = read_source(path).deployments
    line = path.read_text(encoding="utf-8").split("\n").index(
        '    "!uv pip install -U vllm --pre --extra-index-url https://wheels.vllm.ai/nightly\\n"') + 1
    assert (d.release.version, d.release.origin) == (
        None, f"`pip install -U vllm` at line {line} installs the newest release when it runs: not known from this file")
    assert [n.code for n in d.notes] == ["source.release_unknown"]


def test_a_notebooks_unversioned_install_of_vllm_installs_a_release_not_known(tmp_path):
    # unslothai/notebooks (bdda2efc) Meta-Synthetic-Data-Llama3.1_(8B).ipynb: `!pip install unsloth vllm` in a
    # kernel that holds no vLLM before it installs the newest release, as `-U` does: decided as the default
    # release with nothing said (survey 38a). A pin there names its release as before.
    path = notebook(tmp_path / "nb.ipynb", ("code", ["!pip install unsloth vllm\n"]),
                    ("code", ["from vllm import LLM\n", "llm = LLM(model='m')\n"]))
    (d,) = read_source(path).deployments
    line = path.read_text(encoding="utf-8").split("\n").index('    "!pip install unsloth vllm\\n"') + 1
    assert (d.release.version, d.release.origin, [n.code for n in d.notes]) == (
        None, f"`pip install vllm` at line {line} installs the newest release when it runs: not known from this file",
        ["source.release_unknown"])
    pinned = notebook(tmp_path / "pinned.ipynb", ("code", ["!pip install unsloth vllm==0.10.0\n"]),
                      ("code", ["from vllm import LLM\n", "llm = LLM(model='m')\n"]))
    assert read_source(pinned).deployments[0].release.version == "0.10.0"


def test_what_a_notebooks_cells_printed_once_is_no_mention_of_a_kv_option(tmp_path):
    # unslothai/notebooks (bdda2efc) and huggingface/cookbook (ed2c6467): a cell's stored output holds vLLM's
    # log, `Namespace(... kv_transfer_config=None ...)`; the note "mentions `kv_transfer_config`" pointed at that
    # log line (survey 38a). A markdown cell's mention is still one.
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["print('hello')\n"],
            "outputs": [{"name": "stdout", "output_type": "stream",
                         "text": ["INFO args: Namespace(kv_transfer_config=None)\n", "done\n"]}]}
    document = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    printed = tmp_path / "printed" / "nb.ipynb"
    printed.parent.mkdir()
    printed.write_text(json.dumps(document, indent=1, sort_keys=True), encoding="utf-8")
    assert audit([str(printed)]).notes == ()
    document["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["Pass `--kv-transfer-config`.\n"]})
    printed.write_text(json.dumps(document, indent=1, sort_keys=True), encoding="utf-8")
    line = printed.read_text(encoding="utf-8").split("\n").index('    "Pass `--kv-transfer-config`.\\n"') + 1
    assert [(n.code, n.line) for n in audit([str(printed)]).notes] == [("source.unrecognized", line)]


def test_an_assigned_shell_escape_continues_over_its_backslashes(tmp_path):
    # GoogleCloudPlatform/vertex-ai-samples (cc0d791e) model_garden_axolotl_finetuning.ipynb:
    # `  shell_output = ! gcloud colab runtime-templates create ... \` and its indented continuation lines
    # (IPython joins them into one getoutput call): the notebook was "not Python that Python 3.11 parses"
    # and its two vLLM launches were lost; a pin continued so was too. Survey 20i.
    path = notebook(tmp_path / "axolotl.ipynb",
                    ("code", ["if True:\n", "  shell_output = ! gcloud colab runtimes create --display-name=x \\\n",
                              "      --region=us-central1\n"]),
                    ("code", ["out = !pip install \\\n", "  vllm==0.8.5\n",
                              'vllm_args = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model=m"]\n']))
    (d,) = read_source(path).deployments
    assert (d.release.version, d.document["model"]) == ("0.8.5", {"name": "m"})


def test_cells_are_read_as_ipython_runs_each_apart(tmp_path):
    # ROCm/gpuaidev (2d217d5f) fp8_quantization_quark_vllm.ipynb: a cell `"\n", "%%bash\n", ...` (IPython drops
    # a cell's leading blank lines); HabanaAI/Gaudi-tutorials (f6d9afcb) vLLM_Benchmark_Serving.ipynb:
    # ` !HF_TOKEN=... python ...` (IPython removes the first line's indentation from the cell); and
    # gpuaidev's speculative_decoding_deep_dive.ipynb: a shell command pasted in a Python cell, which
    # IPython cannot run, but which stops no other cell. Each made the notebook "not Python that Python
    # 3.11 parses", and its launches were lost. Survey 20n.
    launch = ["import subprocess\n", "subprocess.Popen('vllm serve m --port 8000', shell=True)"]
    for first in ([" !echo hi\n", " !echo there"], ["docker run -d --rm \\\n", "  vllm/vllm-openai:v0.15.0"],
                  ["x = 1\n", "  y = 2\n"]):
        (d,) = read_source(notebook(tmp_path / "apart.ipynb", ("code", first), ("code", launch))).deployments
        assert d.document["model"] == {"name": "m"}
    bash = notebook(tmp_path / "bash.ipynb", ("code", ["\n", "%%bash\n", "vllm serve m --kv-transfer-config "
                                                       "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'\n"]))
    (d,) = read_source(bash).deployments
    assert d.line == bash.read_text(encoding="utf-8").split("\n").index('    "%%bash\\n",') + 1


def test_a_shell_escape_continued_over_many_lines_is_read_in_linear_time(tmp_path):
    def make(count: int) -> str:
        return notebook(tmp_path / "made.ipynb", ("code", ["!vllm serve m \\\n"] + ["  --opt x \\\n"] * count
                                                   + ["  --end"])).read_text(encoding="utf-8")
    ratio = linear_ratio(make, 20_000, tmp_path, "n.ipynb")
    assert ratio < 3.0, ratio


def test_a_file_a_writefile_cell_writes_is_read_as_that_file(tmp_path):
    # GoogleCloudPlatform/generative-ai (23b75dab) cloud_run_vllm_gemma3_inference.ipynb writes its
    # image's Dockerfile with `%%writefile Dockerfile` (ENTRYPOINT python3 -m vllm.entrypoints.openai
    # .api_server ...): the cell was left out, and the notebook gave no launch (survey 19g).
    path = notebook(tmp_path / "cloud_run.ipynb",
                    ("code", ["%%writefile Dockerfile\n", "FROM vllm/vllm-openai:v0.10.1\n",
                              "ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server \\\n",
                              "    --model m --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"]),
                    ("code", ["%%writefile -a notes.txt\n", "vllm serve is in the Dockerfile\n"]),
                    ("code", ["!gcloud builds submit --tag $IMAGE\n"]))
    (d,) = read_source(path).deployments
    line = path.read_text(encoding="utf-8").split("\n").index(
        '    "ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server \\\\\\n",') + 1
    assert (d.line, d.release.version, d.format) == (line, "0.10.1", "dockerfile")
    (entry,) = audit([str(path)]).entries
    assert entry.decision["outcome"] == "disabled"  # (0.10.1 turns HMA off for any kv_transfer_config)


def test_the_files_a_notebook_writes_are_read_within_a_bound_of_its_size(tmp_path):
    # As a ConfigMap's scripts (tests/test_k8s_sources.py): each written file is read at its lines, so
    # past four times the notebook's size the rest are a source.limit problem, not a quadratic reading.
    path = notebook(tmp_path / "many.ipynb", *[("code", [f"%%writefile s{i}.sh\n", f"vllm serve m{i}\n"])
                                                for i in range(1500)])
    found = read_source(path)
    assert [p.code for p in found.problems] == ["source.limit"] and 10 < len(found.deployments) < 1500
