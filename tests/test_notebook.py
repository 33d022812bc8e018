"""Jupyter notebooks (audit/sources/notebook.py): the Python of their code
cells is read as a launcher's, each line at the notebook's line that holds it."""

from __future__ import annotations

import json
from pathlib import Path

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source


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
                     ("code", ["%%bash\n", "vllm serve m\n"]))
    assert read_source(plain).skipped == "a notebook in whose code cells no vLLM launch is read"
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json vllm", encoding="utf-8")
    assert (read_source(broken).deployments, read_source(broken).format) == ((), None)


def test_a_notebook_written_otherwise_is_read_in_order(tmp_path):
    # A notebook whose JSON escapes what nbformat writes as it is (`ensure_ascii`), or holds a cell's
    # source as one string: its lines cannot all be found where the notebook has them; they are read
    # in order, after the last one found, and the launch is still read.
    path = tmp_path / "escaped.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                           "source": "from vllm import LLM\n# modèle\nllm = LLM(model='m')\n"}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1), encoding="utf-8")
    (d,) = read_source(path).deployments
    assert d.document["model"] == {"name": "m"}
