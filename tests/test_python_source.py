"""Python launchers (audit/sources/python.py): a script that starts vLLM
in-process with LLM(...), EngineArgs(...) or AsyncEngineArgs(...). The fleet
corpus holds real ones (tests/fleet_corpus/*, format python); these cover
how values are resolved, what stays unknown, and that nothing is run."""

from __future__ import annotations

import ast
import json
import random
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import ktc, linear_ratio

HEADER = "from vllm import LLM\nfrom vllm.config import KVTransferConfig\n"
NO_LAUNCH = "Python in which no vLLM launch is read (an engine call, or a command list or string that starts vLLM's server)"


def read(tmp_path: Path, text: str, name: str = "run.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_source(path, display=name)


def decided(deployment) -> tuple[str, bool | None]:
    return decided_document(deployment.document)


def decided_document(document) -> tuple[str, bool | None]:
    decision = hma_policy.decide(document)
    return decision.outcome, decision.hma_enabled


def test_a_literal_kv_transfer_config_is_read_and_decided(tmp_path):
    found = read(tmp_path, HEADER + """
llm = LLM(
    model="Qwen/Qwen3-8B",
    kv_transfer_config=KVTransferConfig(kv_connector="LMCacheConnectorV1", kv_role="kv_both"),
    gpu_memory_utilization=0.8,
)
""")
    assert found.format == "python"
    (only,) = found.deployments
    assert (only.id, only.line, only.name) == ("run.py:4", 4, "Qwen/Qwen3-8B")
    # The fields the decision reads, by vLLM's names, as a command line gives them (a JSON option as its
    # text); the others (gpu_memory_utilization) are not read.
    assert only.document == {"kv_transfer_config": '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}',
                             "model": {"name": "Qwen/Qwen3-8B"}}
    assert dict(only.origins) == {"kv_transfer_config": "line 6: kv_transfer_config=", "model": "line 5: model"}
    assert decided(only) == ("disabled", False)


def test_engine_args_handed_to_llm_whole_is_one_launch_at_the_engine_args(tmp_path):
    found = read(tmp_path, """\
from dataclasses import asdict
from vllm import LLM, EngineArgs
from vllm.config import KVTransferConfig

def build(connector, model="m"):
    ktc = KVTransferConfig(kv_connector=connector, kv_role="kv_both")
    args = EngineArgs(model=model, kv_transfer_config=ktc, disable_hybrid_kv_cache_manager=True)
    return LLM(**asdict(args))

build("LMCacheConnectorV1")
""")
    (only,) = found.deployments
    # The parameter takes the argument of the function's one call, the model its default.
    assert only.line == 7 and json.loads(only.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    assert only.document["disable_hybrid_kv_cache_manager"] is True and only.name == "m"
    assert decided(only) == ("disabled", False)


def test_another_librarys_llm_imported_in_its_function_is_no_launch(tmp_path):
    # NVIDIA/TensorRT-Model-Optimizer tests/_test_utils/deploy_utils.py: one function imports
    # TensorRT-LLM's `LLM`, another vLLM's; both calls were read as vLLM launches.
    found = read(tmp_path, """\
from vllm import SamplingParams

def deploy_trtllm(model_id, tp):
    from tensorrt_llm import LLM
    return LLM(model=model_id, tensor_parallel_size=tp)

def deploy_vllm(model_id, tp):
    from vllm import LLM
    return LLM(model=model_id, tensor_parallel_size=tp)

class Deployer:
    def run(self, model_id):
        from vllm import LLM as VllmLLM
        from tensorrt_llm import LLM
        return VllmLLM(model=model_id), LLM(model=model_id)
""")
    assert [d.line for d in found.deployments] == [9, 15]


def test_engine_args_bound_on_each_branch_and_handed_to_llm_are_the_launches(tmp_path):
    # vllm-project/vllm examples/others/lmcache/cpu_offload_lmcache.py before 0.11 (as
    # HabanaAI/vllm-fork still carries it): `llm_args = EngineArgs(...)` on each branch of an `if`,
    # then `LLM(**asdict(llm_args))`. The LLM call was a third launch, decided `enabled` with a note
    # that its unpacked keywords may hold any options, beside the two `disabled` EngineArgs calls.
    found = read(tmp_path, """\
from dataclasses import asdict
from vllm import LLM
from vllm.config import KVTransferConfig
from vllm.engine.arg_utils import EngineArgs

def build_llm_with_lmcache(lmcache_connector, model, vllm_version):
    ktc = KVTransferConfig(kv_connector=lmcache_connector, kv_role="kv_both")
    if vllm_version == "v0":
        llm_args = EngineArgs(model=model, kv_transfer_config=ktc, enable_chunked_prefill=True)
    else:
        llm_args = EngineArgs(model=model, kv_transfer_config=ktc)
    return LLM(**asdict(llm_args))

build_llm_with_lmcache("LMCacheConnectorV1", "mistralai/Mistral-7B-Instruct-v0.2", "v1")
""")
    assert [(d.line, decided(d)) for d in found.deployments] == [(9, ("disabled", False)), (11, ("disabled", False))]


def test_keyword_arguments_unpacked_from_a_dict_the_file_writes_are_read(tmp_path):
    found = read(tmp_path, HEADER + """\
def main(args):
    llm_kwargs = {"model": "m", "gpu_memory_utilization": 0.9}
    llm_kwargs["kv_transfer_config"] = KVTransferConfig(kv_connector="LMCacheConnectorV1", kv_role="kv_both")
    if args.eager:
        llm_kwargs["enforce_eager"] = True  # (not read by the decision)
    return LLM(**llm_kwargs)
def maybe(args):
    kw = dict(model="n")
    if args.kv:
        kw["kv_transfer_config"] = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    return LLM(**kw)
def merged(extra):
    kw = {"model": "o"}
    kw.update(extra)  # (not followed: any key, set or replaced)
    return LLM(**kw)
""")
    main, maybe, merged = found.deployments
    assert (main.line, main.document["model"], decided(main)) == (8, {"name": "m"}, ("disabled", False))
    assert [(p.code, p.line, p.message) for p in maybe.problems] == [
        ("source.unresolved", 13, "`kv_transfer_config` takes its value from `kw['kv_transfer_config']` (which is set "
                                  "on some runs of the script (in an `if`, a loop or a `try`))")]
    # `update(other)` may give any keyword, the KV configuration's too: the note says the launch may
    # hold options (hiyouga/LLaMA-Factory's `engine_args.update(model_args.vllm_config)` was noted
    # only as a model's name not known), and the keys written before it may be replaced by it.
    assert (merged.document, merged.problems) == ({}, ())
    assert [(n.code, n.message) for n in merged.notes] == [
        ("source.unresolved_unused", "the model is `kw['model']`, where `kw['model']` may be changed at line 16 in a "
                                     "way not read; the decision does not read the model's name"),
        ("source.unresolved_arguments", "the call also takes `**kw` (which is changed at line 16 in a way not read); "
                                        "only the arguments written here are read, and it may hold others")]
    # A dict that is unknown as a whole (a parameter) and changed too is one note, not two
    # (EvolvingLMMs-Lab/lmms-eval 75571cf lmms_eval/models/simple/vllm.py; survey 28d).
    (param,) = read(tmp_path, HEADER + """def param(model, **kwargs):
    for key, value in kwargs.items():
        kwargs[key] = json.loads(value)
    return LLM(model=model, **kwargs)
""", name="param.py").deployments
    assert [n.message for n in param.notes if n.code == "source.unresolved_arguments"] == [
        "the call also takes `**kwargs` (which is unpacked when the script runs); only the arguments written here are "
        "read, and it may hold others"]
    # Those it may replace are values not known, those set after it stand (hiyouga/LLaMA-Factory ff6d4d12
    # scripts/vllm_infer.py: a KV config written in the dict was lost with the whole dict; survey 20u), and
    # `update(dict(k=v))` is followed as `update({"k": v})` is.
    replaced, after, written = read(tmp_path, HEADER + """def replaced(extra):
    kw = {"model": "m", "kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}
    kw.update(extra)
    return LLM(**kw)
def after(extra):
    kw = {"model": "m"}
    kw.update(extra)
    kw["disable_hybrid_kv_cache_manager"] = True
    return LLM(**kw)
kw = {"model": "m", "kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}
kw.update(dict(enforce_eager=True))
LLM(**kw)
""", name="update.py").deployments
    assert [p.message for p in replaced.problems] == [
        "`kv_transfer_config` takes its value from `kw['kv_transfer_config']` (which may be changed at line 5 in a "
        "way not read)"]
    assert (decided(after), decided(written), written.notes) == (("disabled", False), ("disabled", False), ())
    # Two changes on one line: the later one holds (they were once compared as syntax trees: a fault).
    (same,) = read(tmp_path, HEADER + "kw = {'model': 'm'}\nkw['kv_transfer_config'] = {'kv_connector': 'NixlConnector', "
                   "'kv_role': 'kv_both'}; kw['kv_transfer_config'] = {'kv_connector': 'LMCacheConnectorV1', "
                   "'kv_role': 'kv_both'}\nLLM(**kw)\n", name="same.py").deployments
    assert decided(same) == ("disabled", False)


def test_values_the_file_does_not_give_are_reported_where_the_decision_reads_them(tmp_path):
    found = read(tmp_path, HEADER + """
import argparse

def build(connector):
    return LLM(model=args.model, kv_transfer_config={"kv_connector": connector, "kv_role": "kv_both"})

args = argparse.ArgumentParser().parse_args()
ktc = KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both")
ktc = KVTransferConfig(kv_connector="LMCacheConnectorV1", kv_role="kv_both")
build("NixlConnector")
build(args.connector)
def same(connector):
    return LLM("m", kv_transfer_config={"kv_connector": connector, "kv_role": "kv_both"})
same("NixlConnector")
same(connector="NixlConnector")
LLM("m", kv_transfer_config=ktc)
LLM("m", kv_transfer_config=KVTransferConfig(kv_connector=f"{args.name}Connector", kv_role="kv_both"))
for config in configs:
    LLM("m", kv_transfer_config=config)
""")
    # `build` is called with two values: each call runs its launch, the second with what only running tells.
    first, first_again, same, second, third, loop = found.deployments
    assert (first.problems, json.loads(first.document["kv_transfer_config"])["kv_connector"]) == ((), "NixlConnector")
    assert [(p.code, p.message, p.path) for p in first_again.problems] == [
        ("source.unresolved", "`kv_transfer_config` takes its value at `/kv_connector` from `args.connector` (which is "
                              "computed when the script runs)", "/kv_transfer_config")]
    # Each call passes the same value: it is known.
    assert json.loads(same.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"
    assert [(n.code, n.message) for n in first.notes] == [
        ("source.call_site", "read as the call of `build` at line 12 runs it (its 2 calls pass different values)"),
        ("source.unresolved_unused", "the model is `args.model`, where `args.model` is computed when the script runs; "
                                     "the decision does not read the model's name")]
    # `ktc` is set twice at the top of the module, each before the call: the second is in effect.
    assert json.loads(second.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # An f-string is a string whatever its fields are: the field not known is named.
    assert third.problems[0].message == ("`kv_transfer_config` takes its value at `/kv_connector` from "
                                         "`{args.name}` (which is computed when the script runs)")
    assert loop.problems[0].message == "`kv_transfer_config` takes its value from `config` (which is a loop variable)"
    assert first_again.document is None and third.document is None


def test_other_spellings_of_a_launch(tmp_path):
    found = read(tmp_path, """\
import os
import vllm
from vllm import EngineArgs as Args, AsyncEngineArgs
from vllm.config import KVTransferConfig as KTC

os.environ["LMCACHE_USE_UPSTREAM_MP"] = "1"
os.environ.setdefault("VLLM_USE_SIMPLE_KV_OFFLOAD", "0")
os.environ["HF_TOKEN"] = "not read"
a = vllm.LLM("m", kv_transfer_config=KTC.from_cli('{"kv_connector":"NixlConnector","kv_role":"kv_both"}'))
b = Args(model="m", kv_transfer_config=dict(kv_connector="NixlConnector", kv_role="kv_producer"), **extra)
c = AsyncEngineArgs.from_cli_args(parsed)
d = vllm.LLM(model="m", kv_offloading_size=8.0, kv_offloading_backend="native", disable_hybrid_kv_cache_manager=None)
""")
    a, b, c, d = found.deployments
    # from_cli's JSON text as a command line gives it: the deployment's checks parse it.
    assert a.document["kv_transfer_config"] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert decided(a) == ("enabled", True)
    # Only the variables the decision reads, with the line that sets the first.
    assert a.document["env"] == {"LMCACHE_USE_UPSTREAM_MP": "1", "VLLM_USE_SIMPLE_KV_OFFLOAD": "0"}
    assert dict(a.origins) == {"env": "line 7: os.environ", "kv_transfer_config": "line 9: kv_transfer_config=",
                               "model": "line 9: model"}
    assert json.loads(b.document["kv_transfer_config"])["kv_role"] == "kv_producer"
    # (the note of an engine call names it a call, with arguments: vllm_backend's model.py, survey 12a)
    assert [n.message for n in b.notes] == ["the call also takes `**extra` (which is unpacked when the script runs); "
                                            "only the arguments written here are read, and it may hold others"]
    assert [(n.code, n.message) for n in c.notes] == [
        ("source.unresolved_unused", "the model is `parsed.model`, where `parsed.model` is given on the script's command "
                                     "line; the decision does not read the model's name"),
        ("source.unresolved_arguments", "the call also takes `parsed` (which is the script's command line, parsed); "
                                        "only the arguments written here are read, and it may hold others")]
    assert "kv_transfer_config" not in c.document
    # None is vLLM's default: as not given.
    assert {k: v for k, v in d.document.items() if k != "env"} == {
        "kv_offloading_size": 8.0, "kv_offloading_backend": "native", "model": {"name": "m"}}


def test_a_name_set_more_than_once_is_known_only_in_straight_line_code(tmp_path):
    found = read(tmp_path, HEADER + """
kv = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
LLM("a", kv_transfer_config=kv)
kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
LLM("b", kv_transfer_config=kv)
if flag:
    LLM("c", kv_transfer_config=kv)
def f():
    LLM("d", kv_transfer_config=kv)
f()
role = "kv_both"
if flag:
    role = "kv_producer"
LLM("e", kv_transfer_config={"kv_connector": "NixlConnector", "kv_role": role})
""")
    a, b, c, d, e = found.deployments
    assert [json.loads(x.document["kv_transfer_config"])["kv_connector"] for x in (a, b, c)] == [
        "LMCacheConnectorV1", "NixlConnector", "NixlConnector"]
    # Read in a function (called when?) or set in an `if`: not known.
    assert d.problems[0].message == "`kv_transfer_config` takes its value from `kv` (which is set 2 times in this file)"
    assert e.problems[0].message == ("`kv_transfer_config` takes its value at `/kv_role` from `role` (which is set 2 "
                                     "times in this file)")


def test_the_hybrid_kv_cache_manager_flag(tmp_path):
    found = read(tmp_path, HEADER + """
LLM("a", disable_hybrid_kv_cache_manager=True)
LLM("b", disable_hybrid_kv_cache_manager=False)
LLM("c", disable_hybrid_kv_cache_manager=args.disable)
LLM("d", disable_hybrid_kv_cache_manager="yes")
""")
    a, b, c, d = found.deployments
    assert (a.document["disable_hybrid_kv_cache_manager"], b.document["disable_hybrid_kv_cache_manager"]) == (True, False)
    assert [(p.code, p.message) for p in c.problems + d.problems] == [
        ("source.unresolved", "`disable_hybrid_kv_cache_manager` takes its value from `args.disable`, where `args.disable` "
                              "is computed when the script runs"),
        ("input.schema", "`disable_hybrid_kv_cache_manager` must be True, False or None, not `'yes'`")]


def test_an_environment_variable_set_twice_is_not_known(tmp_path):
    found = read(tmp_path, HEADER + """import os
os.environ["LMCACHE_USE_UPSTREAM_MP"] = "1"
os.environ.update(LMCACHE_USE_UPSTREAM_MP="")
LLM("m")
""")
    (only,) = found.deployments
    assert [(p.code, p.path, p.message) for p in only.problems] == [
        ("source.unresolved", "/env/LMCACHE_USE_UPSTREAM_MP", "the environment variable `LMCACHE_USE_UPSTREAM_MP` takes "
         "its value from `os.environ['LMCACHE_USE_UPSTREAM_MP']`, where `os.environ['LMCACHE_USE_UPSTREAM_MP']` is set "
         "to different values in this file")]


def test_an_environment_variable_counts_for_the_calls_below_it(tmp_path):
    a, b = read(tmp_path, HEADER + """import os
os.environ["VLLM_USE_SIMPLE_KV_OFFLOAD"] = "1"
LLM("a")
os.environ["LMCACHE_USE_UPSTREAM_MP"] = "1"  # after the first call has built its config
LLM("b")
""").deployments
    assert a.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
    assert b.document["env"] == {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1", "LMCACHE_USE_UPSTREAM_MP": "1"}


def test_a_directive_gives_the_release_and_model_facts(tmp_path):
    found = read(tmp_path, HEADER + """
# hma-policy: {vllm_version: "0.22.0", model_facts: {layer_kinds: [full_attention, sliding_window]}}
llm = LLM("m")
""")
    (only,) = found.deployments
    assert only.release == ReleaseHint("0.22.0", "line 4: hma-policy directive")
    assert only.document["model_facts"] == {"layer_kinds": ["full_attention", "sliding_window"]}


@pytest.mark.parametrize("text", [
    "import torch\nmodel = torch.nn.Linear(2, 2)\n",  # no vLLM
    "from vllm import SamplingParams\nparams = SamplingParams(temperature=0)\n",  # vLLM, no engine
    # An engine a test expects vLLM to refuse (mindspore-ai/vllm-mindspore a7b56a42
    # tests/ut/entrypoints/test_vllm_basic_api.py: `with pytest.raises(TypeError): LLM(model=1)`; survey 39b).
    "import pytest\nfrom vllm import LLM\ndef test_bad():\n    with pytest.raises(TypeError):\n        LLM(model=1)\n",
    "from pytest import raises\nfrom vllm import LLM\nwith raises(ValueError, match='x'):\n    llm = LLM(model='m')\n",
])
def test_a_python_file_that_starts_no_engine_is_skipped(tmp_path, text):
    found = read(tmp_path, text)
    assert (found.deployments, found.problems, found.skipped) == ((), (), NO_LAUNCH)


PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.parametrize("text, line", [
    ("print 'python 2'\nLLM(kv_transfer_config=x)\n", 1),  # not Python 3
    ("from vllm import LLM\nx = " + "[" * 5000 + "]" * 5000 + "\n", 2),  # too deep for the parser
])
def test_a_python_file_that_mentions_vllm_and_does_not_parse_says_why(tmp_path, text, line):
    # Such as a launcher written for a later Python than the audit's: the skip and the note give the parser's reason.
    found = read(tmp_path, text)
    assert (found.deployments, found.problems) == ((), ())
    assert found.skipped.startswith(f"not Python that Python {PYTHON} parses (line {line}: "), found.skipped
    if "kv_transfer_config" in text:
        assert [(n.code, n.message) for n in found.notes] == [
            ("source.unrecognized", f"mentions `kv_transfer_config` at line 2, no vLLM launch recognised: {found.skipped}")]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 parses PEP 701's f-strings: the launch is read")
def test_a_launch_in_python_this_python_cannot_parse_is_noted(tmp_path):
    # FlagOpen/FlagScale (da4935ec) flagscale/serve/run_fs_serve_vllm.py, its default Ray Serve launcher:
    # `LLMConfig(...)`, and a Python 3.12 f-string below it. The skip was in the JSON report alone (survey 37d).
    (tmp_path / "serve_llm.py").write_text(
        'from ray.serve.llm import LLMConfig\ncfg = {"model": "Qwen/Qwen3-8B"}\n'
        'llm_config = LLMConfig(model_loading_config={"model_source": cfg["model"]})\nprint(f"serving {cfg["model"]}")\n')
    report = audit([str(tmp_path)])
    assert [(n.code, n.line, n.message) for n in report.notes] == [(
        "source.unrecognized", 3, f"mentions `LLMConfig(` at line 3, no vLLM launch recognised: not Python that Python "
                                  f"{PYTHON} parses (line 4: f-string: unmatched '[')")]


def test_vllms_own_package_code_starts_no_launch_of_its_own(tmp_path):
    # aws-neuron/upstreaming-to-vllm and vllm-disaggregation (forks of vLLM) and the copy of AMD's fork in
    # mlcommons/inference_results_v5.1: `vllm/benchmarks/latency.py`'s `LLM(**dataclasses.asdict(engine_args))`,
    # `vllm/entrypoints/llm.py`'s EngineArgs(...) in LLM.__init__ were launches (surveys 20w, 33a, 37c).
    (tmp_path / "fork" / "vllm" / "engine").mkdir(parents=True)
    (tmp_path / "fork" / "vllm" / "engine" / "arg_utils.py").write_text("class EngineArgs:\n    pass\n")
    (tmp_path / "fork" / "vllm" / "benchmarks").mkdir()
    (tmp_path / "fork" / "vllm" / "benchmarks" / "latency.py").write_text(
        "import dataclasses\nfrom vllm import LLM\ndef main(engine_args):\n    llm = LLM(**dataclasses.asdict(engine_args))\n")
    (tmp_path / "fork" / "examples").mkdir()
    (tmp_path / "fork" / "examples" / "offline.py").write_text("from vllm import LLM\nllm = LLM(model='m')\n")
    report = audit([str(tmp_path / "fork")])
    assert [Path(e.deployment.file).name for e in report.entries] == ["offline.py"]
    assert [(Path(f.file).name, f.skipped) for f in report.files if f.file.endswith("latency.py")] == [(
        "latency.py", f"vLLM's own code (the package `{tmp_path / 'fork' / 'vllm'}`): the engines it starts take what "
                      "its callers give")]


def test_a_binary_python_file_is_a_problem_as_any_binary_source_is(tmp_path):
    found = read(tmp_path, "from vllm import LLM\n\x00\n")
    assert [(p.code, p.message) for p in found.problems] == [("source.binary", "`run.py` is a binary file, not text")]


def test_a_python_file_that_mentions_a_kv_option_and_is_not_read_is_noted(tmp_path):
    # A command line a function makes when the script runs is not read.
    found = read(tmp_path, "import subprocess\nsubprocess.run(command_for('--kv-transfer-config', KV), shell=True)\n")
    assert [(n.code, n.line, n.message) for n in found.notes] == [
        ("source.unrecognized", 2, "mentions `kv-transfer-config` at line 2, no vLLM launch recognised")]


def test_a_kv_option_only_in_a_python_comment_is_no_mention(tmp_path):
    # OpenPipe/ART (779559fd) src/art/dev/engine.py L116 keeps a field commented out, `# kv_transfer_config:
    # KVTransferConfig | None`: noted "no vLLM launch recognised". A mention after it in code still is.
    commented = 'class EngineArgs(TypedDict, total=False):\n    model: str\n    # kv_transfer_config: KVTransferConfig | None\n'
    assert read(tmp_path, commented).notes == ()
    found = read(tmp_path, commented + 'CONFIG = "--kv-transfer-config"  # kv_connector\n')
    assert [(n.line, n.message) for n in found.notes] == [
        (4, "mentions `kv-transfer-config` at line 4, no vLLM launch recognised")]
    # Code that does not tokenize is searched as it is.
    assert [n.line for n in read(tmp_path, '"""\n# kv_transfer_config\n').notes] == [2]


def test_an_import_of_vllms_kv_transfer_modules_is_no_mention_of_a_kv_option(tmp_path):
    # snowflakedb/ArcticInference arctic_inference/vllm/model_runner.py: library code importing
    # `vllm.distributed.kv_transfer` was noted as "mentions `kv_transfer`". An option's name,
    # an attribute of a config included, still is a mention.
    imports = read(tmp_path, "from vllm.distributed.kv_transfer import (get_kv_transfer_group,\n"
                             "                                          has_kv_transfer_group)\n"
                             "from vllm.distributed.kv_transfer.kv_connector.v1 import base\n")
    assert imports.notes == ()
    attribute = read(tmp_path, "import vllm\nengine.config.kv_transfer_config = make()\n")
    assert [(n.code, n.line) for n in attribute.notes] == [("source.unrecognized", 2)]


# -- command lines built as one string ----------------------------------------------------------------

def test_a_command_line_a_shell_runs_is_read_as_a_shell_reads_it(tmp_path):
    found = read(tmp_path, """\
import json, os, subprocess
MODEL = "Qwen/Qwen3-8B"
KV = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
def serve(port):
    os.system(f"vllm serve {MODEL} --port {port} --kv-transfer-config '{json.dumps(KV)}'")
    cmd = "VLLM_USE_V1=1 vllm serve " + MODEL + " --kv-transfer-config '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\"}'"
    subprocess.Popen(cmd, shell=True)
    subprocess.run(f"vllm serve m --kv-transfer-config {serve.kv}", shell=True)
    subprocess.run("vllm serve m --kv-transfer-config '{}'")  # no shell: a program named so, not vLLM's
    subprocess.run("echo vllm", shell=True)
""")
    first, second, third = found.deployments
    assert (first.id, first.format, first.name) == ("run.py:5", "python", "Qwen/Qwen3-8B")
    assert first.document["kv_transfer_config"] == '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'
    assert [(n.code, n.message) for n in first.notes] == [
        ("source.unresolved_unused", "`--port` takes its value from `{port}` (which is a parameter of `serve`); the "
                                     "decision does not read it")]
    assert decided(first) == ("disabled", False)
    assert (second.line, decided(second)) == (7, ("enabled", True))
    assert [(p.code, p.path, p.message) for p in third.problems] == [
        ("source.unresolved", "/kv_transfer_config", "`--kv-transfer-config` takes its value from `{serve.kv}` (which is "
                                                     "computed when the script runs)")]


def test_a_function_that_runs_the_string_it_is_given_is_a_launch_at_each_call(tmp_path):
    # The Modal "mini-dynamo" pattern: one helper starts each process, the caller writes each command.
    found = read(tmp_path, """\
import json, subprocess
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
def start_process(cmd):
    return subprocess.Popen(cmd, shell=True)
def main():
    start_process(f"vllm serve m --port 8100 --kv-transfer-config '{json.dumps(NIXL)}'")
    start_process(f"vllm serve m --port 8200 --kv-transfer-config '{json.dumps(LMCACHE)}'")
    start_process("python proxy.py --port 8000")
""")
    assert [(d.line, decided(d)) for d in found.deployments] == [(7, ("enabled", True)), (8, ("disabled", False))]


def test_a_function_called_more_often_than_the_audit_reads_is_read_at_its_first_calls(tmp_path):
    calls = "".join(f"start('vllm serve m --port {8000 + i}')\n" for i in range(70))
    found = read(tmp_path, "import subprocess\ndef start(cmd):\n    subprocess.Popen(cmd, shell=True)\n" + calls)
    assert [d.line for d in found.deployments] == list(range(4, 68))
    assert [(p.code, p.line, p.message) for p in found.problems] == [
        ("source.limit", 2, "`start` runs the command line it is given, and the file calls it 70 times; the audit "
                            "reads the first 64 calls, to line 67")]


def test_a_python_launcher_larger_than_the_audit_parses_is_a_limit_problem_not_skipped(tmp_path):
    found = read(tmp_path, HEADER + "# padding\n" * 120_000 + "LLM('m', kv_transfer_config={'kv_connector': 'NixlConnector'})\n")
    assert (found.format, found.deployments, found.skipped) == ("python", (), None)
    assert [(p.code, p.message) for p in found.problems] == [
        ("source.limit", "the file is larger than the audit parses as Python (1048576 bytes, "
                         "SourceLimits.max_config_bytes); its launches are not read")]


def test_a_large_file_whose_only_mention_is_in_base64_data_is_not_a_launcher(tmp_path):
    # tenstorrent/tt-inference-server (11ac526) test_module/load_param_tests/test_payloads/audio_payload_60s.py:
    # 1.5 MB of a base64 audio clip whose letters spell `VLLm` once (`...wEKVLLmVwG1...`) was a source.limit
    # problem, "its launches are not read", in a file that names no vLLM (survey 30b).
    data = ("QUJDREVGR0hJSktMTU5PUFFSU1RVV1hZWmFiY2RlZmdoaWprbG1ub3BxcnN0dXd4eXo" * 9_000)
    found = read(tmp_path, f'AUDIO = "{data}wEKVLLmVwG1{data}"\n')
    assert (found.format, found.deployments, found.problems) == (None, (), ())
    # a mention outside the data is one: the file is said, not skipped
    found = read(tmp_path, f'import vllm\nAUDIO = "{data}{data}"\n')
    assert [p.code for p in found.problems] == ["source.limit"]


def test_a_command_list_that_runs_a_shell_is_read_as_its_script(tmp_path):
    found = read(tmp_path, """\
import json, subprocess
KV = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
def serve(model):
    cmd = f"vllm serve {model} --kv-transfer-config '{json.dumps(KV)}' --disable-hybrid-kv-cache-manager"
    subprocess.Popen(["bash", "-c", cmd])
    subprocess.run(["/bin/sh", "-lc", "VLLM_USE_V1=1 vllm serve m"])
    subprocess.run(["bash", "-c", "echo vllm serve m"])
""")
    first, second = found.deployments
    assert (first.line, decided(first)) == (5, ("disabled", False))
    assert (second.line, decided(second), second.problems) == (6, ("enabled", True), ())


def test_a_launcher_that_starts_each_worker_in_a_loop_is_read_per_worker(tmp_path):
    # Prefill and decode workers started in two loops, each building `kv` and `cmd` again: the
    # binding above the use in the same loop body is the one in effect. An f-string's field not
    # known (`i`) stays a string's part, so the engine_id is a note, not a value of any JSON type.
    found = read(tmp_path, """\
import json, subprocess, sys
CONNECTOR = "NixlConnector"
def start(cmd, name):
    return subprocess.Popen(cmd, shell=True)
def main(ports):
    for i, port in enumerate(ports):
        kv = json.dumps({"kv_connector": CONNECTOR, "kv_role": "kv_producer", "engine_id": f"prefill-{i}"})
        cmd = f"{sys.executable} -m vllm.entrypoints.openai.api_server --port {port} --kv-transfer-config '{kv}'"
        start(cmd, f"prefill-{i}")
    for i, port in enumerate(ports):
        kv = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_consumer"})
        cmd = f"{sys.executable} -m vllm.entrypoints.openai.api_server --port {port} --kv-transfer-config '{kv}'"
        start(cmd, f"decode-{i}")
""")
    prefill, decode = found.deployments
    assert (prefill.line, decided(prefill), prefill.problems) == (9, ("enabled", True), ())
    assert [n.message for n in prefill.notes] == [
        "`--kv-transfer-config` takes its value at `/engine_id` from `{i}` (which is set 2 times in this file); the "
        "decision does not read that value",
        "`--port` takes its value from `{port}` (which is set 2 times in this file); the decision does not read it"]
    assert (decode.line, decided(decode)) == (13, ("disabled", False))


def test_a_binding_in_a_loop_holds_only_where_nothing_rebinds_it_from_a_later_turn(tmp_path):
    found = read(tmp_path, """\
import subprocess
def main(models):
    cmd = "vllm serve m --kv-transfer-config '{}'"
    for model in models:
        subprocess.run(cmd, shell=True)
        cmd = "vllm serve other"
    if models:
        cmd = "vllm serve m2"
    subprocess.run(cmd, shell=True)
""")
    # The first run sees the first `cmd` on the first turn and the loop's on the next ones; the
    # second, either binding above it: neither is known, and neither is a launch.
    assert found.deployments == ()


def test_words_added_in_an_if_stay_open_when_the_paths_settle_a_choice(tmp_path):
    # The shape of vLLM's piecewise_store_pd_launcher.py: the role is a choice read once per
    # branch; a word appended in an `if` is set on no path, so the paths do not settle it.
    read(tmp_path, """\
import json, subprocess, sys
role = "kv_producer" if sys.argv[1] == "prefill" else "kv_consumer"
command = ["vllm", "serve", "m", "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role})]
if len(sys.argv) > 2:
    command.append(sys.argv[2])
subprocess.run(command)
""")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert [n.code for n in entry.deployment.notes] == ["source.unresolved_arguments", "source.unresolved_unused"]
    assert entry.deployment.notes[1].message.endswith("the decision is the same on each of the 2 paths")
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])


def test_a_command_line_split_into_words_is_read_as_its_words(tmp_path):
    found = read(tmp_path, """\
import json, shlex, subprocess
KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
def serve(model):
    cmd = f"vllm serve {model} --kv-transfer-config '{json.dumps(KV)}' --disable-hybrid-kv-cache-manager"
    subprocess.Popen(shlex.split(cmd))
    subprocess.Popen(cmd.split())
    subprocess.Popen(shlex.split("vllm serve m --kv-transfer-config '{"))
""")
    quoted, blanks = found.deployments  # (an unclosed quote: shlex refuses it, and so would the script)
    # shlex keeps the quoted JSON one word, and the unknown model whole, though its reason holds blanks.
    assert (quoted.line, decided(quoted)) == (5, ("disabled", False))
    assert [(n.code, n.message) for n in quoted.notes] == [
        ("source.unresolved_unused", "the model is `{model}`, where `{model}` is a parameter of `serve`; the decision does "
                                     "not read the model's name")]
    # str.split() cuts the JSON at its blanks, as vLLM would then be given it.
    assert blanks.line == 6 and [p.code for p in blanks.problems] == ["source.extra_argument"]




# -- command lists: `vllm serve` run by subprocess or os.exec* ---------------------------------------

def test_words_added_on_one_line_are_read_in_the_order_written(tmp_path):
    found = read(tmp_path, "import json, subprocess\ncmd = ['vllm', 'serve', 'm']\ncmd.append('--kv-transfer-config'); "
                 "cmd.append(json.dumps({'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}))\nsubprocess.run(cmd)\n")
    (launch,) = found.deployments
    assert (launch.problems, decided(launch)) == ((), ("disabled", False))


def test_a_command_list_an_attribute_holds_is_read_with_what_the_script_adds_to_it(tmp_path):
    # A server class builds its command in __init__, and another method may add to it.
    found = read(tmp_path, """\
import json, subprocess
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
class Server:
    def __init__(self):
        self.cmd = ["vllm", "serve", "m"]
        self.cmd += ["--kv-transfer-config", json.dumps(LMCACHE)]
    def with_port(self, port):
        self.cmd.extend(["--port", str(port)])
    def start(self):
        return subprocess.Popen(self.cmd)
class Other:  # its own `self.cmd`
    def grow(self):
        self.cmd.append("--disable-hybrid-kv-cache-manager")
""")
    (launch,) = found.deployments
    assert (launch.line, decided(launch)) == (5, ("disabled", False))
    assert [(n.code, n.line, n.message) for n in launch.notes] == [(
        "source.unresolved_arguments", 5, "the command also takes `self.cmd.extend(...)` (which adds words in another "
        "function, which may run before the list is used or not); only the options written here are read, and it may "
        "hold others")]


def test_a_module_list_a_function_adds_to_is_a_command_that_may_take_those_words(tmp_path):
    found = read(tmp_path, """\
import json, subprocess
CMD = ["vllm", "serve", "m"]
def with_cache():
    CMD.extend(["--kv-transfer-config", json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})])
def listing():
    CMD = ["ls"]  # a list of its own
    CMD.append("-l")
def main():
    cmd = ["vllm", "serve", "n"]
    subprocess.run(cmd)
def other():
    cmd.append("--port")  # not main's list
with_cache()
subprocess.run(CMD)
""")
    assert [(d.line, [(n.code, n.message) for n in d.notes]) for d in found.deployments] == [
        (2, [("source.unresolved_arguments", "the command also takes `CMD.extend(...)` (which adds words in another "
              "function, which may run before the list is used or not); only the options written here are read, and "
              "it may hold others")]),
        (9, [])]


def test_command_lists_made_from_one_base_list_are_each_a_launch(tmp_path):
    # Prefill and decode made from one base list: each list made from it is a launch with its own
    # words (the base's, then its own); the base, which the file never runs itself, is none.
    found = read(tmp_path, """\
import json, subprocess
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
BASE = ["vllm", "serve", "m"]
prefill = BASE + ["--port", "8100", "--kv-transfer-config", json.dumps(NIXL)]
decode = list(BASE)
decode += ["--kv-transfer-config", json.dumps(LMCACHE)]
both = [*BASE, "--kv-transfer-config", json.dumps(LMCACHE)]
subprocess.Popen(prefill)
subprocess.Popen(decode)
subprocess.Popen(both)
""")
    assert [(d.line, decided(d)) for d in found.deployments] == [
        (5, ("enabled", True)), (6, ("disabled", False)), (8, ("disabled", False))]
    # A base the file also runs itself is a launch of its own.
    found = read(tmp_path, "import json, subprocess\nLMCACHE = {'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}\n"
                 "BASE = ['vllm', 'serve', 'm']\nsubprocess.run(BASE)\n"
                 "subprocess.run(BASE.copy() + ['--kv-transfer-config', json.dumps(LMCACHE)])\n",
                 name="runs.py")
    assert [(d.line, decided(d)) for d in found.deployments] == [(3, ("enabled", True)), (5, ("disabled", False))]


def test_a_command_list_is_a_launch_read_as_its_command_line(tmp_path):
    found = read(tmp_path, """\
import json, subprocess
MODEL = "Qwen/Qwen3-8B"
PORT = 8000
KV = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}

def serve():
    cmd = ["vllm", "serve", MODEL, "--port", str(PORT)]
    cmd += ["--kv-transfer-config", json.dumps(KV)]
    subprocess.Popen(cmd)
""")
    # (Joined with blanks and run through a shell, the JSON's blanks would split it into several words:
    # test_a_command_list_joined_and_run_through_a_shell_is_split_again.)
    assert found.format == "python"
    (only,) = found.deployments
    # The launch is where the list is written; what the script adds below it is its words too.
    assert (only.id, only.line, only.name, only.notes, only.problems) == ("run.py:7", 7, "Qwen/Qwen3-8B", (), ())
    assert only.document == {"kv_transfer_config": '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}',
                             "model": {"name": "Qwen/Qwen3-8B"}}
    # Messages and origins name vLLM's options, as the list writes them.
    assert dict(only.origins) == {"kv_transfer_config": "line 8: --kv-transfer-config", "model": "line 7"}
    assert decided(only) == ("disabled", False)


def test_the_interpreter_and_the_api_server_module(tmp_path):
    found = read(tmp_path, """\
import os, sys
os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
         "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'])
""")
    (only,) = found.deployments
    assert (only.line, only.name, only.problems) == (2, "m", ())
    assert decided(only) == ("enabled", True)



# ovg-project/kvcached e8e64063: controller/launch.py runs `[str(python_exec), "-m",
# "vllm.entrypoints.openai.api_server", ...]` with a venv's python a helper computes, and
# benchmarks/bench_idle_footprint finds vLLM's console script with shutil.which.
def test_a_computed_interpreter_and_a_program_found_on_the_path_start_vllm(tmp_path):
    found = read(tmp_path, """\
import json, shutil, subprocess
from pathlib import Path
KV = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
def venv_python(venv):
    return Path(venv) / "bin" / "python"
subprocess.Popen([str(venv_python(VENV)), "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
                  "--kv-transfer-config", json.dumps(KV)])
subprocess.Popen([shutil.which("vllm"), "serve", "m", "--kv-transfer-config", json.dumps(KV)])
subprocess.Popen([find_tool(), "serve", "m", "--kv-transfer-config", json.dumps(KV)])
""")
    # Two launches: a program not known followed by `serve` may be any tool's (ramalama, ollama).
    first, second = found.deployments
    assert (first.line, first.name, first.problems, second.line, second.name, second.problems) == \
        (6, "m", (), 8, "m", ())
    assert decided(first) == decided(second) == ("disabled", False)

def test_words_the_script_adds_on_some_runs_are_noted_or_reported(tmp_path):
    found = read(tmp_path, """\
import subprocess, sys
def prefill(extra, kv):
    cmd = ["vllm", "serve", "m"]
    if extra:
        cmd.extend(extra)
    subprocess.run(cmd)
    subprocess.run(("vllm", "serve", "m", *EXTRA))
    subprocess.run(["vllm", "serve", "m", "--kv-transfer-config", kv])
prefill(None, sys.argv[1])
""")
    first, second, third = found.deployments
    # (the file's one call passes `extra=None`: the branch never runs; survey 22j)
    assert first.notes == ()
    assert [(n.code, n.message) for n in second.notes] == [
        ("source.unresolved_arguments", "the command also takes `EXTRA` (which is not set in this file); only the "
                                        "options written here are read, and it may hold others")]
    assert [(p.code, p.path, p.message) for p in third.problems] == [
        ("source.unresolved", "/kv_transfer_config", "`--kv-transfer-config` takes its value from `sys.argv[1]` (which is "
                                                     "computed when the script runs)")]


def test_a_list_not_known_where_the_model_stands_is_no_model_but_open_words(tmp_path):
    # `["vllm", "serve"] + args` and `*extra`: the list may hold the model and any option.
    found = read(tmp_path, """\
import subprocess
def main(args, extra):
    subprocess.run(["vllm", "serve"] + args)
    subprocess.run(["vllm", "serve", *extra, "--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'])
""")
    first, second = found.deployments
    assert [(n.code, n.message) for n in first.notes] == [
        ("source.unresolved_arguments", "the command also takes `args` (which is a parameter of `main`); only the "
                                        "options written here are read, and it may hold others")]
    assert "model" not in first.document and decided(first) == ("enabled", True)
    assert [(n.code, n.message) for n in second.notes] == [
        ("source.unresolved_arguments", "the command also takes `extra` (which is a parameter of `main`); only the "
                                        "options written here are read, and it may hold others")]
    assert "model" not in second.document and decided(second) == ("disabled", False)


def test_a_choice_the_script_makes_is_read_on_each_path_and_decided_where_they_agree(tmp_path):
    found = read(tmp_path, """\
import json, os, sys
FAST = False
role = "kv_producer" if sys.argv[1] == "prefill" else "kv_consumer"
connector = "NixlConnector" if sys.argv[2] == "a" else "LMCacheConnectorV1"
same = ["vllm", "serve", "m", "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role})]
differ = ["vllm", "serve", "m", "--kv-transfer-config", json.dumps({"kv_connector": connector, "kv_role": "kv_both"})]
known = [os.environ.get("VLLM_BIN", "vllm"), "serve", "m", "--enforce-eager" if FAST else "--no-enforce-eager"]
""")
    same, differ, known = found.deployments
    assert [path for path, _ in same.paths] == ["path 1 of 2, where `sys.argv[1] == 'prefill'` is true",
                                                "path 2 of 2, where `sys.argv[1] == 'prefill'` is false"]
    assert [p.code for p in differ.problems] == ["source.unresolved"]
    report = audit([str(tmp_path / "run.py")])
    outcomes = [(e.deployment.line, e.decision["outcome"], [n.code for n in e.deployment.notes]) for e in report.entries]
    assert outcomes == [(5, "enabled", ["source.unresolved_unused"]),  # NixlConnector whichever role
                        (6, "error", []),  # NixlConnector on one path, LMCacheConnectorV1 on the other: not known
                        (7, "enabled", [])]  # a test the file gives picks its branch; a variable's default is taken
    assert "the decision is the same on each of the 2 paths" in report.entries[0].deployment.notes[0].message
    # The program word is VLLM_BIN's default, and FAST's branch is taken: nothing is left open.
    assert (known.document, known.notes, known.paths) == ({"model": {"name": "m"}}, (), ())


def test_an_engine_call_given_a_choice_is_read_on_each_path_as_a_command_list_is(tmp_path):
    (tmp_path / "run.py").write_text(HEADER + """\
import sys
PREFILL = {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}
DECODE = {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
LLM("m", kv_transfer_config=PREFILL if sys.argv[1] == "prefill" else DECODE)
LLM("m", kv_transfer_config=PREFILL if sys.argv[1] == "prefill" else LMCACHE)
""", encoding="utf-8")
    report = audit([str(tmp_path / "run.py")])
    assert [(e.deployment.line, e.decision["outcome"], [n.code for n in e.deployment.notes]) for e in report.entries] == [
        (7, "enabled", ["source.unresolved_unused"]),  # NixlConnector whichever role: the same decision on each path
        (8, "error", [])]  # NixlConnector on one path, LMCacheConnectorV1 on the other: not known
    assert "the decision is the same on each of the 2 paths" in report.entries[0].deployment.notes[0].message
    assert report.entries[1].decision["errors"][0]["code"] == "source.unresolved"


def test_a_choice_between_a_connector_and_none_that_both_keep_hma_on_is_decided(tmp_path):
    # NixlConnector on one path, no connector on the other: HMA is on either way, so the
    # launch is decided, with the first path's reasons and a note that names that path.
    (tmp_path / "run.py").write_text("""\
import os, subprocess
kv = ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'] if os.environ.get("PD") else []
subprocess.run(["vllm", "serve", "m", *kv])
""", encoding="utf-8")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert [(n.code, n.message) for n in entry.deployment.notes] == [(
        "source.unresolved_unused",
        "the command also takes `kv` (which is chosen when the script runs), which may hold options; HMA is enabled "
        "on each of the 2 paths, for reasons that differ between them; the decision shown is that of path 1 of 2, "
        "where `os.environ.get('PD')` is true")]


def test_a_choice_in_a_command_string_is_read_on_each_path_as_a_command_lists_is(tmp_path):
    # Found in a survey of public launchers (NVIDIA/NeMo-Skills serve_vllm.py builds its command
    # string with `+ (" ..." if c else "")`): the option that turns HMA off, added on one branch,
    # was read into the model's name (or noted only), and the launch decided enabled.
    (tmp_path / "run.py").write_text("""\
import os, subprocess, sys
off = len(sys.argv) > 1
verbose = os.environ.get("VERBOSE") == "1"
subprocess.run("vllm serve m" + (" --disable-hybrid-kv-cache-manager" if off else ""), shell=True)
extra = "--disable-hybrid-kv-cache-manager" if off else ""
os.system(f"vllm serve m {extra}")
subprocess.run("vllm serve m --port 1" + (' | grep -v "200 OK"' if verbose else ""), shell=True)
subprocess.Popen(("vllm serve m " + ("--kv-transfer-config {}" if off else "")).split())
""", encoding="utf-8")
    report = audit([str(tmp_path / "run.py")])
    assert [(e.deployment.line, e.decision["outcome"], [n.code for n in e.deployment.notes]) for e in report.entries] == [
        (4, "error", []),  # disabled on one path, enabled on the other: not known
        (6, "error", []),
        (7, "enabled", []),  # a pipe on one path: no words of the command (NVIDIA/NeMo-Skills, survey 22c)
        (8, "error", [])]  # `{}` is no valid KV configuration: vLLM refuses it on one path only
    assert [e.decision["errors"][0]["message"] for e in report.entries[:2]] == [
        "line 4: the command also takes `' --disable-hybrid-kv-cache-manager' if off else ''` (which is chosen when "
        "the script runs), which may hold options",
        "line 6: the command also takes `'--disable-hybrid-kv-cache-manager' if off else ''` (which is chosen when "
        "the script runs), which may hold options"]
    assert report.entries[2].deployment.paths == ()  # one reading: the pipe leaves the command as it is
    assert [(which, decided_document(document)) for which, document in report.entries[0].deployment.paths] == [
        ("path 1 of 2, where `off` is true", ("disabled", False)), ("path 2 of 2, where `off` is false", ("enabled", True))]


def test_a_command_list_started_empty_and_grown_is_read_with_all_it_gains(tmp_path):
    # containers/ramalama (8bc1f0a), ramalama/plugins/runtimes/inference/vllm.py: `cmd = []`, then
    # `cmd += ["python3", "-m", "vllm.entrypoints.openai.api_server"]` in a branch and more `+=` and
    # `extend` below. Only the first `+=` list was read: the KV config added after it was lost.
    (tmp_path / "run.py").write_text("""\
import subprocess
def build(args):
    cmd = []
    if args.container:
        cmd.append("/entrypoint")
    else:
        cmd += ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    cmd += ["--model", "m"]
    if args.runtime_args:
        cmd.extend(args.runtime_args)
    cmd += ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    return cmd
""", encoding="utf-8")
    report = audit([str(tmp_path / "run.py")])
    (entry,) = report.entries
    assert (entry.deployment.line, entry.decision["outcome"]) == (7, "disabled")
    assert entry.deployment.document["model"] == {"name": "m"}
    assert [n.message for n in entry.deployment.notes] == [
        "the command also takes `cmd.extend(...)` (which adds words at line 10 where `args.runtime_args` is true); "
        "only the options written here are read, and it may hold others"]


@pytest.mark.parametrize("block", ["with open(log_path, 'w') as log:", "try:", "for attempt in range(3):", "if pd:"])
def test_what_the_block_a_list_is_made_in_adds_to_it_is_read_as_written(tmp_path, block):
    # FlagOpen/FlagScale (da4935ec) flagscale/runner/runner_serve.py makes and grows its command inside a
    # `with open(...)`: every statement of that block runs whenever the list is made, but the extend was
    # read as one that runs "on some runs of the script" (`enabled`, a note) and the `if pd:` body as a
    # choice of `pd` (`source.unresolved`), where vLLM runs LMCacheConnectorV1 (survey 37d).
    handler = "\n    except OSError:\n        pass" if block == "try:" else ""
    found = read(tmp_path, f"""import subprocess
def start(log_path, pd):
    {block}
        cmd = ["vllm", "serve", "Qwen/Qwen3-8B"]
        cmd.extend(["--kv-transfer-config", '{{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}}'])
        subprocess.Popen(cmd){handler}
""")
    (d,) = found.deployments
    assert (d.line, json.loads(d.document["kv_transfer_config"])["kv_connector"], d.notes) == (4, "LMCacheConnectorV1", ())


def test_an_if_in_the_block_a_list_is_made_in_is_a_choice_and_a_list_made_anew_there_is_another(tmp_path):
    nixl = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
    (tmp_path / "run.py").write_text(f"""import subprocess
def start(log_path, pd):
    with open(log_path, "w") as log:
        cmd = ["vllm", "serve", "a"]
        if pd:
            cmd += ["--kv-transfer-config", '{nixl % "kv_producer"}']
        else:
            cmd += ["--kv-transfer-config", '{nixl % "kv_consumer"}']
        subprocess.Popen(cmd)
        cmd = ["vllm", "serve", "b"]
        cmd.append("--disable-hybrid-kv-cache-manager")
        for extra in ("--enforce-eager",):
            cmd.append(extra)
        subprocess.Popen(cmd)
""", encoding="utf-8")
    first, second = audit([str(tmp_path / "run.py")]).entries
    # Each path of the `if` runs NixlConnector, which supports HMA: decided on both.
    assert (first.deployment.line, first.decision["outcome"], first.decision["connectors"][0]["kv_connector"]) == (
        4, "enabled", "NixlConnector")
    # The list made anew takes only what follows it; a change in a loop within the block may run or not.
    assert (second.deployment.line, second.decision["outcome"]) == (10, "disabled")
    assert [n.message for n in second.deployment.notes] == [
        "the command also takes `cmd.append(...)` (which adds words at line 13 on some runs of the script: in an "
        "`if`, a loop or a `try`); only the options written here are read, and it may hold others"]


def test_a_list_grown_by_assigning_it_to_itself_plus_more_is_read_as_grown(tmp_path):
    # bentoml/BentoVLLM (3b69b26), qwen3-30b-a3b-instruct-pd/components/decode.py: `cmd_list =
    # cmd_list + extra_list` in an `if` (words from DECODE_EXTRA_ARGS) gave no note that the
    # command may hold other options; written `cmd_list += extra_list`, it did.
    found = read(tmp_path, """\
import os
extra = os.environ.get("EXTRA_ARGS")
cmd = ["vllm", "serve", "m"]
if extra:
    cmd = cmd + extra.split(";")
cmd = cmd + ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
""")
    (d,) = found.deployments
    assert (d.line, json.loads(d.document["kv_transfer_config"])["kv_connector"]) == (3, "LMCacheConnectorV1")
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_arguments", "the command also takes `cmd = cmd + extra.split(';')` (which adds words at "
                                        "line 5 where `extra` is true); only the options written here are read, and it "
                                        "may hold others")]


def test_the_nearest_requirements_file_that_pins_vllm_gives_the_release(tmp_path):
    # bentoml/BentoVLLM (3b69b26): each service directory's requirements.txt pins vllm==0.11.0,
    # the environment its service.py (or components/decode.py) runs in; its 30 launches were
    # decided as the default release, with nothing said (a P2pNcclConnector one decides otherwise).
    service = "import subprocess\nsubprocess.run(['vllm', 'serve', 'm'])\n"
    (tmp_path / "requirements.txt").write_text("bentoml\nvllm==0.10.1.1\n", encoding="utf-8")
    pd = tmp_path / "pd"
    (pd / "components").mkdir(parents=True)
    (pd / "requirements.txt").write_text("bentoml==1.4.0\nvLLM==0.11.0  # the tested release\n", encoding="utf-8")
    (pd / "components" / "decode.py").write_text(service, encoding="utf-8")
    (d,) = read_source(pd / "components" / "decode.py", roots=(tmp_path,)).deployments
    assert d.release == ReleaseHint("0.11.0", f"pin vllm==0.11.0 in {pd / 'requirements.txt'} (the launcher's nearest "
                                   "requirements file)")
    # The nearest file decides, as the environment built from it would: one without an exact pin, or a range
    # bounded above, gives none (`vllm>=0.10`: the newest release when it is installed, as no pin says).
    (pd / "requirements.txt").write_text("vllm>=0.10\n", encoding="utf-8")
    assert only_deployment(read_source(pd / "components" / "decode.py", roots=(tmp_path,))).release is None
    # Nothing above the audited paths is read.
    (pd / "requirements.txt").unlink()
    assert only_deployment(read_source(pd / "components" / "decode.py", roots=(pd,))).release is None
    assert only_deployment(read_source(pd / "components" / "decode.py", roots=(tmp_path,))).release.version == "0.10.1.1"


@pytest.mark.parametrize("file, written, shown, release", [
    # hkust-nlp/simpleRL-reason (cf1c7858) requirements.txt `vllm<=0.6.3`: decided as 0.33.0 with no note, a
    # release its own constraint rules out (survey 38c); 0.6.3 has no hybrid KV cache manager.
    ("requirements.txt", "vllm<=0.6.3", "vllm<=0.6.3", "0.6.3"),
    # opendatalab/MinerU (79d6d8d7) pyproject.toml `vllm>=0.10.1.1,<0.22.0` (survey 37b).
    ("pyproject.toml", "vllm>=0.10.1.1,<0.22.0", "vllm>=0.10.1.1,<0.22.0", "0.21.0"),
    ("requirements.txt", "vllm[audio] ~= 0.10.1  # tested", "vllm~=0.10.1", "0.10.2"),
    ("requirements.txt", "vllm<0.22,!=0.21.0", "vllm<0.22,!=0.21.0", "0.20.2"),
])
def test_a_range_of_releases_a_launchers_environment_allows_gives_the_newest_it_allows(tmp_path, file, written, shown,
                                                                                       release):
    # pip installs the newest release a range allows; the rules' releases tell which.
    (tmp_path / file).write_text(f'[project]\nname = "x"\ndependencies = ["{written}"]\n' if file == "pyproject.toml"
                                 else f"torch\n{written}\n", encoding="utf-8")
    (tmp_path / "run.py").write_text("from vllm import LLM\nllm = LLM(model='m')\n", encoding="utf-8")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert (entry.decision["vllm"], entry.deployment.notes) == ({"release": release, "source": (
        f"range {shown} in {tmp_path / file}: {release}, the newest release it allows, as pip installs it")}, ())
    assert entry.decision["outcome"] == ("disabled" if release == "0.6.3" else "enabled")  # (no HMA before 0.9.1)


@pytest.mark.parametrize("written", ["vllm<0.5", "vllm>=0.30,<0.40", "vllm~=0.33.0"])
def test_a_range_whose_release_the_rules_cannot_tell_is_a_release_not_known(tmp_path, written):
    # One that allows no release the rules hold, or one newer than they know (pip installs the newest it allows).
    (tmp_path / "requirements.txt").write_text(f"{written}\n", encoding="utf-8")
    (tmp_path / "run.py").write_text("from vllm import LLM\nllm = LLM(model='m')\n", encoding="utf-8")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    origin = f"range {written} in {tmp_path / 'requirements.txt'}: which release it installs is not one these rules can tell"
    assert (entry.decision["vllm"]["source"], [(n.code, n.message) for n in entry.deployment.notes]) == (
        f"default ({origin})", [("source.release_unknown", f"the vLLM release is not known: {origin}")])


@pytest.mark.parametrize("written", ["0.5.3post1", "0.5.3-post1", "0.5.3.POST1", "0.5.3-1", "0.5.3.post1"])
def test_a_pin_is_read_in_pep_440_s_normal_form(tmp_path, written):
    # basetenlabs/truss-examples (dc9c1665) llama/llama-3_1-8b-instruct/config.yaml pins `vllm==0.5.3post1`,
    # which pip installs as 0.5.3.post1: a release with no hybrid KV cache manager, `disabled`. The
    # spelling was taken for a release the rules do not know, and the launch decided as 0.33.0
    # (`enabled`), with a note that said so.
    (tmp_path / "requirements.txt").write_text(f"vllm=={written}\n", encoding="utf-8")
    (tmp_path / "run.py").write_text("from vllm import LLM\nllm = LLM(model='m')\n", encoding="utf-8")
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\npip install vllm=={written}\nvllm serve m\n", encoding="utf-8")
    report = audit([str(tmp_path)])
    assert [(Path(e.deployment.file).name, e.decision["outcome"], e.decision["vllm"]["release"],
             e.deployment.release.origin, [n.code for n in e.deployment.notes]) for e in report.entries] == [
        ("run.py", "disabled", "0.5.3.post1", f"pin vllm=={written} in {tmp_path / 'requirements.txt'} (the launcher's "
                                              "nearest requirements file)", []),
        ("run.sh", "disabled", "0.5.3.post1", f"pip pin vllm=={written} at line 2", [])]


def test_what_the_script_does_to_its_engine_arguments_below_the_call_is_read(tmp_path):
    # A field set on the EngineArgs object below its call is the engine's: the config was left out
    # (`enabled`), where vLLM turns HMA off for ExampleConnector.
    found = read(tmp_path, "from vllm import AsyncEngineArgs, AsyncLLMEngine\nfrom vllm.config import KVTransferConfig\n\n"
                           "def build():\n    engine_args = AsyncEngineArgs(model='m')\n"
                           "    engine_args.kv_transfer_config = KVTransferConfig(kv_connector='ExampleConnector', "
                           "kv_role='kv_both')\n    return AsyncLLMEngine.from_engine_args(engine_args)\n")
    (d,) = found.deployments
    assert (d.line, decided(d)) == (5, ("disabled", False))
    assert dict(d.origins)["kv_transfer_config"] == "line 6: kv_transfer_config="
    # Set on some runs only, the value is not known.
    found = read(tmp_path, "from vllm import AsyncEngineArgs\n\ndef load(offload):\n"
                           "    engine_args = AsyncEngineArgs(model='m')\n    if offload:\n"
                           "        engine_args.kv_offloading_size = 4\n    return engine_args\n")
    assert [(p.code, p.message) for p in only_deployment(found).problems] == [
        ("source.unresolved", "`kv_offloading_size` takes its value from `engine_args.kv_offloading_size` "
                              "(which is set at line 6 on some runs only)")]
    # Set in the block that makes the call (a `with`'s body), it is set whenever the call is made
    # (MetaX-MACA/vLLM-metax 3aadf08 tests/v1/engine/test_engine_core_client.py: "set ... on some runs
    # only", an `error`; survey 41a); in an `if` in that block, still on some runs only.
    within = ("from vllm import EngineArgs\n\ndef run(monkeypatch, c):\n    with monkeypatch.context() as m:\n"
              "        engine_args = EngineArgs(model='m')\n        SET\n"
              "        return engine_args.create_engine_config()\n")
    kv = "engine_args.kv_transfer_config = {'kv_connector': 'ExampleConnector', 'kv_role': 'kv_both'}"
    (d,) = read(tmp_path, within.replace("SET", kv)).deployments
    assert (d.line, decided(d), dict(d.origins)["kv_transfer_config"]) == (5, ("disabled", False),
                                                                          "line 6: kv_transfer_config=")
    (d,) = read(tmp_path, within.replace("SET", "if c:\n            " + kv)).deployments
    assert [p.message for p in d.problems] == [
        "`kv_transfer_config` takes its value from `engine_args.kv_transfer_config` (which is set at line 7 on some "
        "runs only)"]
    # mudler/LocalAI (82c191af) backend/python/vllm/backend.py L208-254: `engine_args =
    # apply_options_to_engine_args(engine_args, request.Options)`, whose `dataclasses.replace(engine_args,
    # **extra)` may set kv_transfer_config from the model's YAML: decided with no note that it may.
    found = read(tmp_path, "import dataclasses\nfrom vllm import AsyncEngineArgs, AsyncLLMEngine\n\n"
                           "def apply_options_to_engine_args(engine_args, options):\n"
                           "    return dataclasses.replace(engine_args, **options)\n\n"
                           "def load(request):\n    engine_args = AsyncEngineArgs(model='m')\n"
                           "    engine_args = apply_options_to_engine_args(engine_args, request.Options)\n"
                           "    return AsyncLLMEngine.from_engine_args(engine_args)\n")
    assert [(n.code, n.message) for n in only_deployment(found).notes] == [
        ("source.unresolved_arguments", "the call also takes `apply_options_to_engine_args(engine_args, request.Options)` "
                                        "(which may change `engine_args` at line 9); only the arguments written here "
                                        "are read, and it may hold others")]


def test_from_cli_args_of_a_list_the_file_parses_reads_that_list(tmp_path):
    # NovaSky-AI/SkyRL (a9564572) skyrl/backends/skyrl_train/inference_servers/render_server.py L90-96:
    # `args = parser.parse_args(["--model", model_path, ...])`, `AsyncEngineArgs.from_cli_args(args)`.
    # Its notes said the model and every option come from the script's command line; they come from
    # the list, which here gives a connector vLLM turns HMA off for.
    found = read(tmp_path, "from vllm import AsyncEngineArgs\nfrom vllm.entrypoints.openai.cli_args import make_arg_parser\n"
                           "from vllm.utils.argparse_utils import FlexibleArgumentParser\n\n"
                           "def serve(model_path, port):\n    parser = make_arg_parser(FlexibleArgumentParser())\n"
                           "    args = parser.parse_args(\n        [\"--model\", model_path, \"--port\", str(port),\n"
                           "         \"--kv-transfer-config\", '{\"kv_connector\":\"ExampleConnector\",\"kv_role\":\"kv_both\"}']\n"
                           "    )\n    return AsyncEngineArgs.from_cli_args(args)\n")
    d = only_deployment(found)
    assert (d.line, decided(d)) == (11, ("disabled", False))
    assert [n.message for n in d.notes] == [
        "the model is `model_path`, where `model_path` is a parameter of `serve`; the decision does not read the "
        "model's name",
        "`--port` takes its value from `port` (which is a parameter of `serve`); the decision does not read it"]
    # `parser.parse_args()` parses the script's own command line: not known.
    found = read(tmp_path, "from vllm import EngineArgs\nimport argparse\nargs = argparse.ArgumentParser().parse_args()\n"
                           "engine_args = EngineArgs.from_cli_args(args)\n")
    assert [n.code for n in only_deployment(found).notes] == ["source.unresolved_unused", "source.unresolved_arguments"]


def test_from_cli_args_given_the_namespace_by_keyword_reads_it_as_given_by_position(tmp_path):
    # vLLM's own tests (vendored in mlcommons/inference_results_v5.1, 965182b0, tests/engine/test_arg_utils.py):
    # `EngineArgs.from_cli_args(args=args)` fills the same parameter; its list was not read and the
    # launch was `enabled` with notes that the script's command line gives the model (survey 37c).
    text = ("from vllm.engine.arg_utils import EngineArgs\nfrom vllm.utils import FlexibleArgumentParser\n"
            "parser = EngineArgs.add_cli_args(FlexibleArgumentParser())\n"
            "args = parser.parse_args([\"--model\", \"m\", \"--kv-transfer-config\", "
            "'{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_role\": \"kv_both\"}'])\n"
            "engine_args = EngineArgs.from_cli_args(args=args)\n")
    by_keyword = only_deployment(read(tmp_path, text))
    by_position = only_deployment(read(tmp_path, text.replace("(args=args)", "(args)")))
    for d in (by_keyword, by_position):
        assert (d.line, decided(d), d.document["model"], d.notes) == (5, ("disabled", False), {"name": "m"}, ())


def test_a_dict_written_with_others_unpacked_into_it_keeps_the_keys_it_writes(tmp_path):
    # NVIDIA/NeMo-RL (54bec9d1) nemo_rl/models/generation/vllm.py L316-343: `llm_kwargs = dict(model=...,
    # ..., **vllm_kwargs)` then `vllm.LLM(**llm_kwargs)`: the whole dict was unpacked when the script runs,
    # and a KV config written in it was not read (`enabled`). `dict()` refuses a key given twice, so the
    # keys it writes stand; in a literal, an unpacking written after a key may replace it. Survey 20a.
    kv = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'

    def launch(written: str):
        return only_deployment(read(tmp_path, f"import vllm\n\ndef start(cfg):\n    extra = dict(cfg['vllm'])\n"
                                              f"    kw = {written}\n    return vllm.LLM(**kw)\n"))
    for written in (f"dict(model='m', kv_transfer_config={kv}, **extra)", f"{{**extra, 'model': 'm', 'kv_transfer_config': {kv}}}"):
        d = launch(written)
        assert (decided(d), [n.message for n in d.notes]) == (("disabled", False), [
            "the call also takes `**extra` (which is unpacked when the script runs); only the arguments written here "
            "are read, and it may hold others"])
    # Written in the call itself (ray-project/ray-llm's archived-master 0bf97ce1 vllm_compatibility.py:
    # `AsyncEngineArgs(**dict(model=..., **vllm_app.engine_config.get_initialization_kwargs()))`), the same.
    inline = only_deployment(read(tmp_path, f"import vllm\nvllm.LLM(**dict(model='m', kv_transfer_config={kv}, **extra()))\n"))
    assert (decided(inline), [n.message for n in inline.notes]) == (("disabled", False), [
        "the call also takes `**extra()` (which is unpacked when the script runs); only the arguments written here "
        "are read, and it may hold others"])
    literal = only_deployment(read(tmp_path, "import vllm\nvllm.LLM(**{'model': 'm', 'disable_hybrid_kv_cache_manager': True})\n"))
    assert (decided(literal), literal.notes) == (("disabled", False), ())
    d = launch(f"{{'model': 'm', 'kv_transfer_config': {kv}, **extra}}")
    assert [(p.code, p.message) for p in d.problems] == [("source.unresolved", (
        "`kv_transfer_config` takes its value from `kw['kv_transfer_config']` (which may be replaced by what is "
        "unpacked into the dict when the script runs)"))]


def test_a_containers_command_list_takes_the_arguments_its_call_gives_beside_it(tmp_path):
    # GoogleCloudPlatform/vertex-ai-samples (cc0d791e), 14 Model Garden notebooks:
    # `aiplatform.Model.upload(serving_container_command=["python", "-m", "vllm.entrypoints.api_server"],
    # serving_container_args=vllm_args)`: the command was read alone, with a note that its options are
    # added where it is used, beside the list that gives them. Vertex AI runs the command with the
    # arguments, as Kubernetes runs a container's `command` with its `args`. Survey 20i.
    found = read(tmp_path, """\
from google.cloud import aiplatform

def deploy(model_id, gpu_memory_utilization=None):
    vllm_args = ["--host=0.0.0.0", "--port=7080", "--model=m"]
    if gpu_memory_utilization:
        vllm_args.append(f"--gpu-memory-utilization={gpu_memory_utilization}")
    vllm_args.append('--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}')
    return aiplatform.Model.upload(
        serving_container_command=["python", "-m", "vllm.entrypoints.openai.api_server"],
        serving_container_args=vllm_args)
""")
    d = only_deployment(found)
    assert (d.line, decided(d), d.notes, d.document["model"]) == (9, ("disabled", False), (), {"name": "m"})
    # A Kubernetes client's container, the same way; a command list used otherwise is completed where used.
    k8s = only_deployment(read(tmp_path, "from kubernetes import client\nclient.V1Container(name='v', command=["
                                         "'vllm', 'serve'], args=['m', '--disable-hybrid-kv-cache-manager'])\n"))
    assert decided(k8s) == ("disabled", False)
    # Airflow's KubernetesPodOperator: `cmds=` is the container's command, `arguments=` its arguments, and its
    # `image=` runs them: its release and platform (survey 46b). The arguments were not read, and the launch was
    # decided as the default 0.33.0, `enabled`, where vLLM 0.10.1 turns HMA off beside a KV config.
    (tmp_path / "dag.py").write_text(
        "from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator\n"
        "serve = KubernetesPodOperator(task_id='serve', image='vllm/vllm-openai:v0.10.1', cmds=['vllm', 'serve'],\n"
        "    arguments=['m', '--kv-transfer-config', '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'])\n",
        encoding="utf-8")
    (entry,) = audit([str(tmp_path / "dag.py")]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]["release"], entry.deployment.notes) == (
        "disabled", "0.10.1", ())


def test_an_option_a_path_adds_is_checked_against_the_release_as_the_commands_own_are(tmp_path):
    # GoogleCloudPlatform/vertex-ai-samples (cc0d791e): about 40 Model Garden launches append
    # `--host-prefix-kv-cache-utilization-target=...` (an option of Google's own vLLM build) under an `if`:
    # the paths were read for the decision, but their options were never checked; the same option written
    # in the list was noted. Survey 20i.
    (tmp_path / "go.py").write_text("import subprocess\ndef go(t=0.0):\n    cmd = ['python', '-m', "
                                    "'vllm.entrypoints.openai.api_server', '--model=m']\n    if 0 < t < 1:\n"
                                    "        cmd.append(f'--host-prefix-kv-cache-utilization-target={t}')\n"
                                    "    subprocess.Popen(cmd)\n", encoding="utf-8")
    (entry,) = audit([str(tmp_path / "go.py")]).entries
    assert [n.message for n in entry.deployment.notes][0] == (
        "no bundled vLLM release (0.9.1 to 0.33.0) accepts the argument `--host-prefix-kv-cache-utilization-target` "
        "(line 5): the launch does not start unless a release outside them runs it, or a vLLM plugin adds the option")


def test_a_list_rebound_in_an_if_still_grows_on_the_runs_that_skip_it(tmp_path):
    # GoogleCloudPlatform/vertex-ai-samples (cc0d791e) model_garden_pytorch_deepseek_deployment.ipynb:
    # `if multihost_gpu_node_count > 1: vllm_args = ["/vllm-workspace/ray_launcher.sh"] + vllm_args`, then
    # a dozen `vllm_args.append(...)`: the appends were taken to grow only the list of the `if`, so the
    # first list, which runs where the `if` does not, lost them silently. Survey 20i.
    found = read(tmp_path, "import subprocess\n\ndef deploy(nodes=1):\n    args = ['vllm', 'serve', 'm']\n"
                           "    if nodes > 1:\n        args = ['vllm', 'serve', 'm2']\n"
                           "    args.append('--disable-hybrid-kv-cache-manager')\n    subprocess.Popen(args)\n").deployments
    assert [(d.line, decided(d)) for d in found] == [(4, ("disabled", False)), (6, ("disabled", False))]
    # A statement of the function's own body that binds the name anew still starts a list of its own.
    found = read(tmp_path, "import subprocess\n\ndef deploy():\n    args = ['vllm', 'serve', 'm']\n"
                           "    args = ['vllm', 'serve', 'm2']\n"
                           "    args.append('--disable-hybrid-kv-cache-manager')\n    subprocess.Popen(args)\n").deployments
    assert [(d.line, decided(d)) for d in found] == [(4, ("enabled", True)), (5, ("disabled", False))]


def test_a_string_added_from_names_the_file_binds_is_read(tmp_path):
    # meta-llama/llama-cookbook (0e003351) 3p-integrations/modal/many-llamas-human-eval/inference.py:95:
    # `model=MODELS_DIR + "/" + MODEL_NAME`, both bound once, was "computed when the script runs"; `+` was
    # read only with a literal on one side, so `A + B` of two names left a KV config unknown. Survey 20d.
    kv = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    word = only_deployment(read(tmp_path, f"import subprocess\nOPT = '--kv-transfer-config='\nKV = '{kv}'\n"
                                          "subprocess.Popen(['vllm', 'serve', 'm', OPT + KV])\n"))
    field = only_deployment(read(tmp_path, "from vllm import LLM\nA = 'LMCache'\nB = 'ConnectorV1'\n"
                                           "llm = LLM('m', kv_transfer_config={'kv_connector': A + B, 'kv_role': 'kv_both'})\n"))
    model = only_deployment(read(tmp_path, "from vllm import AsyncEngineArgs\nMODELS_DIR = '/llamas'\nMODEL_NAME = 'meta-llama/L'\n"
                                           "args = AsyncEngineArgs(model=MODELS_DIR + '/' + MODEL_NAME)\n"))
    assert [(decided(d), d.notes, d.problems) for d in (word, field)] == [(("disabled", False), (), ())] * 2
    assert (model.notes, model.document["model"]) == ((), {"name": "/llamas/meta-llama/L"})
    # A side not known leaves its part not known; sums of numbers, or of what the file does not give, are not strings.
    unknown = only_deployment(read(tmp_path, "from vllm import LLM\nN = 2\nllm = LLM('m', tensor_parallel_size=N + 1, "
                                             "kv_transfer_config={'kv_connector': X + 'Connector', 'kv_role': 'kv_both'})\n"))
    assert [p.message for p in unknown.problems] == [
        "`kv_transfer_config` takes its value at `/kv_connector` from `X` (which is not set in this file)"]
    # A string that grows past a command line's length is one not known.
    doubled = "".join(f"A{i} = A{i - 1} + A{i - 1}\n" for i in range(1, 40))
    large = only_deployment(read(tmp_path, f"from vllm import LLM\nA0 = '{'x' * 40_000}'\n{doubled}"
                                           "llm = LLM('m', kv_transfer_config={'kv_connector': A39, 'kv_role': 'kv_both'})\n"))
    assert [p.code for p in large.problems] == ["source.unresolved"]
    assert "is larger than the audit reads" in large.problems[0].message


def test_from_cli_args_reads_parse_args_by_keyword_and_names_a_parameter_as_one(tmp_path):
    # volcengine/verl (b178a3cd) verl/workers/rollout/vllm_rollout/vllm_async_server.py L376-392:
    # `server_args = parser.parse_args(args=server_args)` (argparse's own keyword) was read as the script's
    # command line, and a method's parameter `args` (`def run_server(self, args)`) was said to be "the
    # script's command line, parsed", which the file never parses. Survey 20a.
    kv = "'{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_role\": \"kv_both\"}'"
    keyword = only_deployment(read(tmp_path, (
        "import argparse\nfrom vllm import AsyncEngineArgs\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
        f"    server_args = parser.parse_args(args=['m', '--kv-transfer-config', {kv}])\n"
        "    return AsyncEngineArgs.from_cli_args(server_args)\n")))
    assert (decided(keyword), keyword.notes) == (("disabled", False), ())
    method = only_deployment(read(tmp_path, (
        "import argparse\nfrom vllm import AsyncEngineArgs\n\nclass Server:\n    def launch(self):\n"
        f"        self.run_server(argparse.ArgumentParser().parse_args(['m', '--kv-transfer-config', {kv}]))\n\n"
        "    def run_server(self, args):\n        return AsyncEngineArgs.from_cli_args(args)\n")))
    assert [n.message for n in method.notes] == [
        "the model is `args.model`, where `args.model` comes from `args`, which is a parameter of `run_server`; the "
        "decision does not read the model's name",
        "the call also takes `args` (which is a parameter of `run_server`); only the arguments written here are read, "
        "and it may hold others"]
    # A list that unpacks another (`parse_args([*common_args, "--max-num-batched-tokens", "128"])`,
    # vllm-project/vllm-spyre fc6b54b9 tests/utils/test_cli_args.py; survey 20m) is read as a command list is.
    starred = only_deployment(read(tmp_path, (
        "import argparse\nfrom vllm import EngineArgs\n\ndef test():\n"
        f"    common = ['--model', 'm', '--kv-transfer-config', {kv}]\n"
        "    args = argparse.ArgumentParser().parse_args([*common, '--max-num-batched-tokens', '128'])\n"
        "    EngineArgs.from_cli_args(args)\n")))
    assert (decided(starred), starred.notes) == (("disabled", False), ())
    # `parse_args(None)` and `parse_args(args=None)` parse the script's own command line, as `parse_args()` does,
    # also where an `or` stands in for it when it gives nothing (willccbb/verifiers 39f0675a vllm_server.py).
    for given in ("None", "args=None", ") or argparse.Namespace("):
        found = only_deployment(read(tmp_path, "import argparse\nfrom vllm import EngineArgs\n"
                                               f"args = argparse.ArgumentParser().parse_args({given})\n"
                                               "EngineArgs.from_cli_args(args)\n"))
        assert found.notes[1].message == ("the call also takes `args` (which is the script's command line, parsed); "
                                          "only the arguments written here are read, and it may hold others")


def only_deployment(found):
    (deployment,) = found.deployments
    return deployment


def test_a_modal_image_pin_gives_the_release_of_every_launch_in_the_file(tmp_path):
    app = """\
import subprocess
import modal
image = modal.Image.debian_slim().uv_pip_install({pins})

@modal.web_server(port=8000)
def serve():
    subprocess.Popen(["vllm", "serve", "m", "--kv-transfer-config", '{{"kv_connector": "NixlConnector", "kv_role": "kv_both"}}'])
"""
    (one,) = read(tmp_path, app.format(pins='"vllm==0.10.1.1", "huggingface_hub==0.34.4"')).deployments
    assert one.release == ReleaseHint("0.10.1.1", "pip pin vllm==0.10.1.1 at line 3")
    report = audit([str(tmp_path / "run.py")])
    assert [(e.decision["vllm"]["release"], e.decision["outcome"]) for e in report.entries] == [("0.10.1.1", "disabled")]
    # A list of packages, as Modal also takes them; Beam's image, `Image(...).add_python_packages([...])`
    # (beam-cloud/examples 7d43a7a8 language_models/llama3_70b/app.py, vllm==0.5.4: survey 20p), the same.
    (listed,) = read(tmp_path, app.format(pins='["vllm==0.10.1.1", "huggingface_hub==0.34.4"]')).deployments
    beam = read(tmp_path, app.replace("modal.Image.debian_slim().uv_pip_install", "beam.Image().add_python_packages")
                .format(pins='["vllm==0.5.4"]')).deployments
    assert [d.release for d in (listed, *beam)] == [ReleaseHint("0.10.1.1", "pip pin vllm==0.10.1.1 at line 3"),
                                                    ReleaseHint("0.5.4", "pip pin vllm==0.5.4 at line 3")]
    # Two versions pinned, or none of vLLM: no release is read (the default decides, as for any file that names none).
    for pins in ('"vllm==0.10.1.1", "vllm[audio]==0.11.0"', '"vllm-ascend==0.10.1"', '"torch==2.8.0"'):
        (one,) = read(tmp_path, app.format(pins=pins)).deployments
        assert one.release is None, pins


def test_a_modal_image_from_vllms_registry_image_gives_the_release(tmp_path):
    # modal-labs/modal-examples (0304ede) 06_gpu_and_ml/llm-serving/lfm_snapshot.py: the image is
    # vLLM's own, and its tag is the release the file's `vllm serve` runs (it was decided as the default).
    app = """\
import subprocess
import modal
image = modal.Image.from_registry({image}).entrypoint([]){more}

@modal.web_server(port=8000)
def serve():
    subprocess.Popen(["vllm", "serve", "m", "--kv-transfer-config", '{{"kv_connector": "NixlConnector", "kv_role": "kv_both"}}'])
"""
    (one,) = read(tmp_path, app.format(image='"vllm/vllm-openai:v0.15.1"', more="")).deployments
    assert one.release == ReleaseHint("0.15.1", "image tag vllm/vllm-openai:v0.15.1 at line 3")
    report = audit([str(tmp_path / "run.py")])
    assert [(e.decision["vllm"]["release"], e.decision["outcome"]) for e in report.entries] == [("0.15.1", "disabled")]
    # Another image names no release; with a pin of another release beside it, neither is taken.
    for image, more in (('"nvidia/cuda:12.8.0-devel-ubuntu22.04"', ""), ("IMAGE", ""),
                        ('"vllm/vllm-openai:v0.15.1"', '.uv_pip_install("vllm==0.11.0")')):
        (one,) = read(tmp_path, app.format(image=image, more=more)).deployments
        assert one.release is None, (image, more)
    (one,) = read(tmp_path, app.format(image='"nvidia/cuda:12.8.0"', more='.uv_pip_install("vllm==0.11.0")')).deployments
    assert one.release == ReleaseHint("0.11.0", "pip pin vllm==0.11.0 at line 3")


@pytest.mark.parametrize("text", [
    "import subprocess\nsubprocess.run(['vllm', 'bench', 'serve', '--model', 'm'])\n",  # not the server
    "import subprocess\nsubprocess.run(['vllm', '--version'])\n",
    "WORDS = ['serve', 'vllm']\n",  # not a command's order
    "CHOICES = ('serve', 'vllm.entrypoints.openai.api_server')\n",
])
def test_a_list_that_starts_no_vllm_server_is_no_launch(tmp_path, text):
    found = read(tmp_path, text)
    assert (found.deployments, found.problems, found.skipped) == ((), (), NO_LAUNCH)


def test_a_deeply_nested_value_is_not_known_and_the_reader_does_not_recurse(tmp_path):
    deep = "{'a': " * 60 + "1" + "}" * 60
    found = read(tmp_path, HEADER + f"LLM('m', kv_transfer_config={deep})\n")
    (only,) = found.deployments
    assert "(which is nested too deeply to read)" in only.notes[0].message  # (where the decision reads nothing)
    chained = read(tmp_path, HEADER + "".join(f"v{i} = v{i + 1}\n" for i in range(3000)) + "v3000 = 1\n"
                   "LLM('m', kv_transfer_config=v0)\n", name="chain.py")
    (only,) = chained.deployments
    assert only.problems[0].message.endswith("(which is nested too deeply to read)")
    # A callee 2,000 attributes long (the parser takes it; a recursive reading of it would not).
    long = read(tmp_path, "import vllm\nx = vllm" + ".a" * 2000 + ".LLM('m')\n", name="long.py")
    assert [d.line for d in long.deployments] == [2]


def test_a_value_that_doubles_at_each_name_is_one_value_not_known(tmp_path):
    # 25 lines whose value, read out, would have 2**25 parts: read within a bound, and reported once.
    doubled = "".join(f"a{i} = {{'a': a{i - 1}, 'b': a{i - 1}}}\n" for i in range(1, 26))
    found = read(tmp_path, HEADER + "a0 = {'kv_connector': 'NixlConnector'}\n" + doubled + "LLM('m', kv_transfer_config=a25)\n")
    (only,) = found.deployments
    assert [(p.code, p.message) for p in only.problems] == [
        ("source.unresolved", "`kv_transfer_config` takes its value from `a25` (which is larger than the audit reads)")]
    # A string the script builds the same way is no command line once it is longer than one may be.
    strings = "".join(f"s{i} = s{i - 1} + s{i - 1}\n" for i in range(1, 40))
    started = time.process_time()
    found = read(tmp_path, "import os\ns0 = 'vllm serve m '\n" + strings + "os.system(s39)\n", name="strings.py")
    assert (found.deployments, time.process_time() - started < 5) == ((), True)
    short = "".join(f"s{i} = s{i - 1} + s{i - 1}\n" for i in range(1, 4))  # `vllm serve m ` 8 times: one launch
    (launch,) = read(tmp_path, "import os\ns0 = 'vllm serve m '\n" + short + "os.system(s3)\n", name="short.py").deployments
    assert launch.problems[0].code == "source.extra_argument"


def test_a_string_whose_name_stands_for_itself_twice_is_read_within_the_bound(tmp_path):
    # `cmd = cmd + cmd`: when each read of `cmd` read it twice more, down to the depth bound, each
    # launch below it cost 0.12 s (100 of them, 12 s).
    started = time.process_time()
    found = read(tmp_path, "import os\nwhile True:\n    cmd = cmd + cmd\n" + "os.system('vllm serve m ' + cmd)\n" * 100)
    assert time.process_time() - started < 5
    assert len(found.deployments) == 100
    # (`cmd` in `cmd + cmd` is the value it had before that line: the file sets none)
    (note,) = found.deployments[0].notes
    assert (note.code, note.message) == ("source.unresolved_unused", "the argument `cmdcmd`, where `cmd` is read in its "
                                                                     "own assignment, at line 3; the decision does not read it")


def test_deeply_nested_json_text_is_refused_by_the_deployment_checks_not_a_fault(tmp_path):
    found = read(tmp_path, HEADER + "LLM('m', kv_transfer_config=KVTransferConfig.from_cli('" + "[" * 100_000 + "]" * 100_000 + "'))\n")
    (only,) = found.deployments
    with pytest.raises(hma_policy.InputError) as refused:
        hma_policy.decide(only.document)
    assert refused.value.problems[0].code == "input.limit"


def test_a_recursive_function_is_read_in_time(tmp_path):
    # Each level calls itself twice: following every call's argument at every level would take 2**32 steps.
    found = read(tmp_path, HEADER + """
def f(kv, n):
    if n:
        f(kv, n - 1)
        f(kv, n - 1)
    LLM("m", kv_transfer_config=kv)
f({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, 30)
""")
    (only,) = found.deployments
    assert only.problems[0].message == ("`kv_transfer_config` takes its value from `kv` (which is a parameter of `f`, "
                                        "whose 3 calls do not all pass one known value)")


@pytest.mark.parametrize("unit", [
    "os.environ['VLLM_USE_SIMPLE_KV_OFFLOAD'] = '1'\nLLM('m', kv_transfer_config={'kv_connector': 'NixlConnector'})\n",
    "kv = {'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'}\nLLM('m', kv_transfer_config=kv)\n",
    "cmd = ['vllm', 'serve', 'm']\ncmd += ['--kv-transfer-config', '{\"kv_connector\": \"NixlConnector\"}']\n",
])
def test_reading_is_linear_in_the_number_of_launches(tmp_path, unit):
    # Each launch takes the environment above it and the last binding of its name: read by a sweep
    # and a bisection, not by a scan of the whole file per launch (which made these quadratic).
    def cpu(count: int) -> float:
        path = tmp_path / f"l{count}.py"
        path.write_text("import os\nfrom vllm import LLM\n" + unit * count, encoding="utf-8")
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            assert len(read_source(path).deployments) == count
            best = min(best, time.process_time() - start)
        return best

    cpu(100)
    ratio = cpu(1600) / cpu(800)
    assert ratio < 3.0, ratio


def test_reading_is_linear_in_the_number_of_functions_a_launch_calls(tmp_path):
    # A call of a function the file defines is read through it (`kv_transfer_config=kv7()`): the function
    # is found by its name, not by a scan of every function per call (which made this quadratic).
    def make(count: int) -> str:
        return "from vllm import LLM\n" + "".join(
            f"def kv{i}():\n    return {{'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'}}\n"
            f"LLM('m', kv_transfer_config=kv{i}())\n" for i in range(count))
    (last,) = read(tmp_path, make(1)).deployments
    assert json.loads(last.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"
    ratio = linear_ratio(make, 1600, tmp_path, "f.py")
    assert ratio < 3.0, ratio


def test_reading_is_linear_in_the_rebindings_of_a_name(tmp_path):
    # `cmd = cmd + x` asked each time whether any earlier binding of `cmd` was a list: 16,000 of
    # them, growing a string, took 12 s (quadratic). Whether a name holds a list is kept as it is bound.
    def make(count: int) -> str:
        return 'import subprocess\ncmd = "vllm serve m"\n' + "".join(
            f'cmd = cmd + " --a{i}"\n' for i in range(count)) + "subprocess.run(cmd, shell=True)\n"
    ratio = linear_ratio(make, 4000, tmp_path, "f.py")
    assert ratio < 3.0, ratio
    # A list is still grown so: `cmd = cmd + [...]` after `cmd = [...]`.
    (launch,) = read(tmp_path, 'import subprocess\ncmd = ["vllm", "serve", "m"]\ncmd = cmd + ["--kv-transfer-config", '
                               '\'{"kv_connector": "NixlConnector", "kv_role": "kv_both"}\']\nsubprocess.run(cmd)\n').deployments
    assert json.loads(launch.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"


def test_the_file_is_never_run_or_imported(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    (tmp_path / "evil_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = read(tmp_path, f"open({str(marker)!r}, 'w').close()\nimport evil_module\n" + HEADER +
                 "LLM('m', kv_transfer_config=__import__('evil_module').KV)\n")
    assert found.deployments[0].problems[0].code == "source.unresolved"
    assert not marker.exists() and "evil_module" not in sys.modules


# -- never raises, never runs: mutated launchers ------------------------------------------------

_EXPRESSIONS = ["'NixlConnector'", "None", "True", "1e400", "-5", "args.kv", "f'{x}'", "{**base}", "[*xs]", "x", "(1, 2)",
                "{'kv_connector': 'MultiConnector', 'kv_connector_extra_config': {'connectors': [{}]}}",
                "KVTransferConfig(**kw)", "KVTransferConfig.from_cli('{')", "KVTransferConfig.from_cli('[1]')",
                "KVTransferConfig.from_cli('" + "[" * 5000 + "]" * 5000 + "')",
                "dict(a=1)", "lambda: 1", "b'bytes'", "{1: 2}", "os.environ['X']", "__import__('os').system('touch ran')",
                "cmd", "sys.executable", "'$(touch ran)'", "'`touch ran`'", "f'{cmd} --port {x}'", "'vllm serve m ' + x",
                "kv if x else {'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}", "(a if b else c) if d else e"]
_STATEMENTS = ["x = {e}", "x = {e}\nx = 1", "def f(a, *b, c={e}, **d):\n    return LLM(model=a, kv_transfer_config=c)\n",
               "f({e})", "f(*{e})", "os.environ['LMCACHE_USE_UPSTREAM_MP'] = {e}", "os.environ.update({e})",
               "LLM({e}, kv_transfer_config={e}, **{e})", "EngineArgs(model={e}, disable_hybrid_kv_cache_manager={e})",
               "LLM(**asdict({e}))", "LLM(**vars(x))", "for x in {e}:\n    LLM('m', kv_transfer_config=x)",
               "with {e} as x:\n    pass", "class C:\n    x = {e}", "(y := {e})", "import vllm as v\nv.LLM(kv_transfer_config={e})",
               "cmd = ['vllm', 'serve', {e}, '--kv-transfer-config', json.dumps({e})]", "cmd += {e}", "cmd.extend({e})",
               "if {e}:\n    cmd.append({e})", "cmd.insert(0, {e})", "subprocess.run([sys.executable, '-m', "
               "'vllm.entrypoints.openai.api_server', *{e}, str({e})] + {e})", "os.execvp('vllm', ('vllm', 'serve', {e}))",
               # command lines given as one string (a shell reads them), and helpers that run them
               "cmd = f\"vllm serve m --kv-transfer-config '{json.dumps({e})}'\"", "cmd = cmd + {e}", "os.system({e})",
               "subprocess.run(cmd, shell={e})", "subprocess.Popen(['bash', '-c', {e}])", "subprocess.run(shlex.split({e}))",
               "subprocess.run({e}.split())", "def start(c):\n    subprocess.Popen(c, shell=True)\n", "start({e})",
               "while {e}:\n    cmd = f'{cmd} {cmd} {cmd}'", "for i in {e}:\n    os.system(f'vllm serve m --port {i} ' + cmd)",
               # lists made from a base list, held in attributes, grown in other functions
               "BASE = ['vllm', 'serve', {e}]", "cmd = BASE + {e}", "cmd = list(BASE)", "cmd = [*BASE, {e}]",
               "cmd = BASE[:] + {e}", "class K:\n    def __init__(self):\n        self.cmd = ['vllm', 'serve', {e}]\n"
               "    def more(self):\n        self.cmd += {e}", "def grow():\n    cmd.extend({e})",
               # engine arguments in a dict the file writes out
               "kw = {'model': {e}, 'kv_transfer_config': {e}}", "kw = dict(model={e})", "kw['kv_transfer_config'] = {e}",
               "kw[{e}] = {e}", "kw.update({e})", "kw.update(kv_transfer_config={e})", "del kw[{e}]", "LLM(**kw)",
               "if {e}:\n    kw['disable_hybrid_kv_cache_manager'] = {e}"]


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32))
def test_generated_launchers_are_read_without_raising_or_running_anything(tmp_path_factory, seed):
    rng = random.Random(seed)  # (Hypothesis' own draws start from the simplest: Python's random mixes more)
    lines = [HEADER + "import json, os, shlex, subprocess, sys\nfrom dataclasses import asdict\nfrom vllm import EngineArgs"]
    for _ in range(rng.randint(1, 8)):
        lines.append(rng.choice(_STATEMENTS).replace("{e}", rng.choice(_EXPRESSIONS)))
    directory = tmp_path_factory.mktemp("py")
    found = read(directory, "\n".join(lines))
    assert all((d.document is None) == bool(d.problems) for d in found.deployments)
    report = audit([str(directory / "run.py")])  # decided, or refused as input: never a fault of the audit
    assert [p.code for f in report.files for p in f.problems if p.code == "audit.internal"] == []
    assert len(report.entries) == len(found.deployments)
    assert {e.decision["outcome"] for e in report.entries} <= {"enabled", "disabled", "error", "undetermined"}
    assert not (directory / "ran").exists()


# -- never raises, never runs: mutated real launchers -------------------------------------------

CORPUS = Path(__file__).resolve().parent / "fleet_corpus"
LAUNCHERS = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*__*/**/*.py"))


class _Mutate(ast.NodeTransformer):
    """Replace about one value in five with another expression, and drop about one keyword in ten."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if self.rng.random() < 0.2:
            return ast.parse(self.rng.choice(_EXPRESSIONS), mode="eval").body
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node  # an f-string's parts stay strings

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        node.keywords = [k for k in node.keywords if self.rng.random() > 0.1]
        return node


def test_the_corpus_holds_python_launchers():
    assert len(LAUNCHERS) >= 10, LAUNCHERS


@pytest.mark.parametrize("name", LAUNCHERS)
def test_mutated_real_launchers_are_read_without_raising_or_running_anything(tmp_path, name):
    rng = random.Random(name)
    text = (CORPUS / name).read_text(encoding="utf-8")
    for variant in range(6):
        mutated = ast.unparse(ast.fix_missing_locations(_Mutate(rng).visit(ast.parse(text))))
        directory = tmp_path / str(variant)
        directory.mkdir()
        found = read(directory, mutated)
        assert all((d.document is None) == bool(d.problems) for d in found.deployments)
        report = audit([str(directory / "run.py")])
        assert [p.code for f in report.files for p in f.problems if p.code == "audit.internal"] == []
        assert not (directory / "ran").exists()


def test_a_kv_events_config_call_is_read_as_its_mapping(tmp_path):
    # vllm-project/vllm-ascend (182b75e) tests/e2e/pull_request/one_card/test_cpu_offloading.py: a
    # KVEventsConfig(...) call made the launch source.unresolved ("computed when the script runs");
    # the dict form was read. Releases before 0.20.0 read whether one is given.
    called = read(tmp_path, "from vllm import LLM\nfrom vllm.config import KVEventsConfig, KVTransferConfig\n"
                            "events = KVEventsConfig(enable_kv_cache_events=True, publisher='zmq', endpoint=ENDPOINT)\n"
                            "llm = LLM(model='m', kv_events_config=events,\n"
                            "          kv_transfer_config=KVTransferConfig(kv_connector='OffloadingConnector', kv_role='kv_both'))\n")
    as_dict = read(tmp_path, "from vllm import LLM\nllm = LLM(model='m', kv_events_config={'enable_kv_cache_events': True, "
                             "'publisher': 'zmq', 'endpoint': ENDPOINT}, kv_transfer_config={'kv_connector': "
                             "'OffloadingConnector', 'kv_role': 'kv_both'})\n", name="dict.py")
    (d,) = called.deployments
    (e,) = as_dict.deployments
    assert d.problems == () and d.document == e.document
    assert json.loads(d.document["kv_events_config"])["publisher"] == "zmq"


def test_an_or_default_is_read_as_python_takes_it_and_a_list_after_a_list_option_may_hold_options(tmp_path):
    # vllm-project/vllm-ascend (182b75e) tests/e2e/pull_request/one_card/rlhf/conftest.py: a command list
    # ends `"--served-model-name", "m", *(extra_args or [])`. The starred list was taken for more
    # values of --served-model-name (nargs="+"), "which the decision does not read", and
    # `extra_args or []` was not followed to the list the file's one call passes.
    head = ("import subprocess, sys\n\ndef serve(extra_args=None):\n    cmd = [sys.executable, '-m', "
            "'vllm.entrypoints.openai.api_server', '--model', 'Qwen/Qwen3-0.6B', '--served-model-name', 'm',\n"
            "           *(extra_args or [])]\n    subprocess.Popen(cmd)\n\n")
    called = read(tmp_path, head + "serve(['--kv-transfer-config', "
                                   "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'])\n")
    (d,) = called.deployments
    assert (d.problems, json.loads(d.document["kv_transfer_config"])["kv_connector"]) == ((), "LMCacheConnectorV1")
    assert decided(d) == ("disabled", False)
    # Not called with a list the file gives: the words may be options, and are noted as such.
    unknown = read(tmp_path, head + "serve(sys.argv[1:])\n", name="unknown.py")
    (d,) = unknown.deployments
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_arguments", "the command also takes `extra_args or []` (which is computed when the script "
                                        "runs); only the options written here are read, and it may hold others")]
    # `a and b` goes on past a true operand, as Python does.
    anded = read(tmp_path, "from vllm import LLM\nUSE = True\nLLM('m', kv_transfer_config=USE and "
                           "{'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'})\n", name="anded.py")
    (d,) = anded.deployments
    assert d.problems == () and json.loads(d.document["kv_transfer_config"])["kv_connector"] == "NixlConnector"


def test_a_command_list_joined_and_run_through_a_shell_is_split_again(tmp_path):
    # vllm-project/recipes (8959cf64) Google/gemma4-modal.py: `cmd += [..., "--reasoning-parser gemma4",
    # ...]` then `subprocess.Popen(" ".join(cmd), shell=True)`, on vLLM 0.19.0. The shell splits each
    # element again, so vLLM takes `--reasoning-parser` and `gemma4`; the element was read as one
    # word, an option 0.19.0 refuses (a source.option_not_in_release note: "the launch does not start").
    script = ("import json\nimport subprocess\n\ndef serve():\n    cmd = [\n        'vllm',\n        'serve',\n"
              "        'google/gemma-4',\n    ]\n    cmd += [\n        '--limit-mm-per-prompt',\n"
              "        f\"'{json.dumps({'image': 0})}'\",\n        '--reasoning-parser gemma4',\n    ]\n"
              "    subprocess.Popen(' '.join(cmd){run})\n")
    (tmp_path / "requirements.txt").write_text("vllm==0.19.0\n", encoding="utf-8")
    (d,) = read(tmp_path, script.replace("{run}", ", shell=True")).deployments
    assert d.options == (("--limit-mm-per-prompt", "line 10"), ("--reasoning-parser", "line 10"))
    (entry,) = audit([str(tmp_path)]).entries
    assert (entry.decision["vllm"]["release"], [n.code for n in entry.deployment.notes]) == ("0.19.0", [])
    # Run without a shell, the words are the elements as written: `--reasoning-parser gemma4` is one
    # word, which argparse takes as a positional argument (it holds a blank), a second model `vllm
    # serve` refuses.
    (d,) = read(tmp_path, script.replace("{run}", "").replace("' '.join(cmd)", "cmd")).deployments
    assert d.options == (("--limit-mm-per-prompt", "line 10"),)
    assert [p.code for p in d.problems] == ["source.extra_argument"]


def test_a_shell_string_keeps_the_release_its_image_or_its_pin_names(tmp_path):
    # NVIDIA/GenerativeAIExamples (401cb44) community/ai-vws-sizing-advisor/src/apply_configuration.py runs
    # `docker run ... vllm/vllm-openai:v0.12.0 --model ...` through a shell: the image's release (and
    # platform) was dropped, and the launch decided as 0.33.0 on CUDA, as a shell script's is not.
    nixl = '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\"}'
    found = read(tmp_path, "import os\nimport subprocess\n"
                           f"subprocess.run(\"docker run -d --gpus all vllm/vllm-openai:v0.12.0 --model m --kv-transfer-config '{nixl}'\", shell=True)\n"
                           f"os.system(\"pip install vllm==0.12.0 && vllm serve m --kv-transfer-config '{nixl}'\")\n"
                           "os.system(\"docker run vllm/vllm-openai-cpu:v0.10.1 m\")\n")
    assert [(d.line, d.release) for d in found.deployments] == [
        (3, ReleaseHint("0.12.0", "image tag vllm/vllm-openai:v0.12.0")),
        (4, ReleaseHint("0.12.0", "pip pin vllm==0.12.0 at line 4")),
        (5, ReleaseHint("0.10.1", "image tag vllm/vllm-openai-cpu:v0.10.1"))]
    assert found.deployments[2].document["platform"] == {"name": "cpu"}


def test_shell_given_by_a_parameter_whose_calls_leave_it_true_runs_the_string_through_a_shell(tmp_path):
    # NVIDIA/GenerativeAIExamples (401cb44) community/ai-vws-sizing-advisor/src/apply_configuration.py:
    # `def run_command(cmd, shell=True): subprocess.run(cmd, shell=shell, ...)`: only a literal
    # `shell=True` was read, so the file's docker run of vLLM was skipped as holding no launch.
    helper = "import subprocess\ndef run_command(cmd: str, shell: bool = {default}):\n" \
             "    return subprocess.run(cmd, shell=shell, capture_output=True)\n"
    found = read(tmp_path, helper.format(default=True) + 'run_command("docker run vllm/vllm-openai:v0.12.0 --model m")\n')
    assert [(d.line, d.release) for d in found.deployments] == [(4, ReleaseHint("0.12.0", "image tag vllm/vllm-openai:v0.12.0"))]
    # A default of False, or a call that passes False, runs no shell: no launch is read.
    assert read(tmp_path, helper.format(default=False) + 'run_command("vllm serve m")\n').deployments == ()
    assert read(tmp_path, helper.format(default=True) + 'run_command("vllm serve m", shell=False)\n').deployments == ()


def test_options_the_decision_does_not_read_added_on_some_runs_are_not_noted(tmp_path):
    # containers/ramalama (8bc1f0a) ramalama/plugins/runtimes/inference/vllm.py: `if port is not None:
    # cmd += ["--port", str(port)]` was noted as words that "may hold others", beside the one addition
    # that can carry a KV option (the user's runtime args); so were vLLM's own Mooncake launcher's
    # `command.append("--enforce-eager")` and Dynamo's `extend(["--num-gpu-blocks-override", ...])`.
    found = read(tmp_path, """\
import subprocess
def run(args, port, eager, kv):
    cmd = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    if port is not None:
        cmd += ["--port", str(port)]
    if eager:
        cmd.append("--enforce-eager")
    for size in (1, 2):
        cmd.extend(["--max_model_len=" + str(size)])
    if args.runtime_args:
        cmd.extend(args.runtime_args)
    if port:
        cmd += ["--port", "--x"]
    subprocess.run(cmd)
""")
    (only,) = found.deployments
    # The user's words: still noted. An option followed by an option: read on each path, with and
    # without, which the audit decides (audit.run notes that the paths agree).
    assert [n.message.split("` (")[0] for n in only.notes] == ["the command also takes `cmd.extend(...)"]
    assert [p.message.split("` (")[0] for p in only.problems] == ["the command also takes `cmd += ['--port', '--x']"]
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert entry.decision["outcome"] == "enabled"
    # (and `--x`, which a path gives, is checked against the releases as the command's own options are)
    assert [(n.code, n.message.split("` (")[0]) for n in entry.deployment.notes] == [
        ("source.unresolved_arguments", "the command also takes `cmd.extend(...)"),
        ("source.option_not_in_release", "no bundled vLLM release (0.9.1 to 0.33.0) accepts the argument `--x"),
        ("source.unresolved_unused", "the command also takes `cmd += ['--port', '--x']")]


def test_a_model_and_a_list_option_added_on_some_runs_are_not_noted(tmp_path):
    # containers/ramalama (8bc1f0a) ramalama/plugins/runtimes/inference/vllm.py:44-45: `if model is not
    # None: cmd += ["--model", model_path]; cmd += ["--served-model-name", model.model_alias]` were
    # noted as words that "may hold others": the model names the deployment (the decision does not
    # read it), and a list option's first word is its value, whatever it holds.
    found = read(tmp_path, """\
import subprocess
def run(model, args):
    cmd = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    if model is not None:
        cmd += ["--model", model.path]
        cmd += ["--served-model-name", model.alias, "second"]
    if args.runtime_args:
        cmd.extend(args.runtime_args)
    subprocess.run(cmd)
""")
    (only,) = found.deployments
    assert [n.message.split("` (")[0] for n in only.notes] == ["the command also takes `cmd.extend(...)"]
    assert only.paths == ()  # (not read once with the model and once without: the same either way)
    # A list option's later words are its values only up to one that is an option: a word not known may be.
    later = read(tmp_path, """\
import subprocess
def run(model, extra, flag):
    cmd = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    if flag:
        cmd += ["--served-model-name", "a", extra]
    subprocess.run(cmd)
""", name="later.py")
    (d,) = later.deployments
    assert [n.message.split("` (")[0] for n in d.notes] == ["the command also takes `cmd += ['--served-model-name', 'a', extra]"]
    # `["vllm", "serve"]` that the function grows on some runs with such options is not the
    # server's name alone, handed on to be completed elsewhere.
    alone = read(tmp_path, """\
import subprocess
def run(model, port):
    cmd = ["vllm", "serve"]
    if model:
        cmd += ["--model", model]
    if port:
        cmd += ["--port", str(port)]
    subprocess.run(cmd)
""", name="alone.py")
    (d,) = alone.deployments
    assert (d.notes, d.problems, d.paths) == ((), (), ())


KV_IN_AN_IF = """\
import json
import subprocess

MODEL = "Qwen/Qwen3-8B"
MP_PORT = 5555


def start_engine(config: str) -> subprocess.Popen:
    cmd = ["vllm", "serve", MODEL, "--port", "8000", "--gpu-memory-utilization", "0.75"]
    if config != "off":
        kv_cfg = {
            "kv_connector": "LMCacheMPConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": MP_PORT},
        }
        cmd += ["--kv-transfer-config", json.dumps(kv_cfg)]
    return subprocess.Popen(cmd)
"""


def test_a_kv_option_added_in_an_if_is_read_on_each_path(tmp_path):
    # The shape of benchmark drivers in public code (an LMCache multi-process benchmark's
    # start_engine; launchers with `if self.kv: cmd += ["--kv-transfer-config", json.dumps(self.kv)]`):
    # the command was decided as without the connector, the addition only noted.
    read(tmp_path, KV_IN_AN_IF)
    (newest,) = audit([str(tmp_path / "run.py")]).entries
    assert newest.decision["outcome"] == "enabled"
    (note,) = newest.deployment.notes
    assert (note.code, note.message) == ("source.unresolved_unused", (
        "the command also takes `cmd += ['--kv-transfer-config', json.dumps(kv_cfg)]` (which adds words at line 16 "
        "where `config != 'off'` is true), which may hold options; HMA is enabled on each of the 2 paths, for reasons "
        "that differ between them; the decision shown is that of path 1 of 2, where `config != 'off'` is true"))
    # Where the connector turns HMA off on one path only, the launch is not decided.
    (older,) = audit([str(tmp_path / "run.py")], policy=hma_policy.load_policy(release="0.20.0")).entries
    assert older.decision["outcome"] == "error"
    assert [(e["code"], e["message"]) for e in older.decision["errors"]] == [("source.unresolved", (
        "line 9: the command also takes `cmd += ['--kv-transfer-config', json.dumps(kv_cfg)]` (which adds words at "
        "line 16 where `config != 'off'` is true), which may hold options"))]


def test_a_kv_option_whose_value_is_not_known_added_in_an_if_is_not_decided(tmp_path):
    read(tmp_path, """\
import subprocess
def serve(kv):
    cmd = ["vllm", "serve", "m"]
    if kv:
        cmd += ["--kv-transfer-config", kv]
    subprocess.run(cmd)
""")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert entry.decision["outcome"] == "error"
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [("source.unresolved", (
        "line 3: on path 1 of 2, where `kv` is true: `--kv-transfer-config` takes its value from `kv` (which is a "
        "parameter of `serve`)"))]


def test_words_not_known_added_in_an_if_are_noted_not_read_on_paths(tmp_path):
    # A word not known that is no option's value may be any option: a path holding it would not
    # settle what the command does, so the addition stays a note, as in a loop.
    read(tmp_path, """\
import subprocess, sys
cmd = ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}']
if len(sys.argv) > 2:
    cmd.append(sys.argv[2])
subprocess.run(cmd)
""")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert entry.decision["outcome"] == "enabled"
    assert [(n.code, n.message) for n in entry.deployment.notes] == [("source.unresolved_arguments", (
        "the command also takes `cmd.append(...)` (which adds words at line 4 where `len(sys.argv) > 2` is true); "
        "only the options written here are read, and it may hold others"))]


H2OGPT_DOCKER = """\
import subprocess


def gpus_cmd():
    return ["--gpus", "all"]


def run_vllm_docker(port=5000, base_model="h2oai/h2ogpt-4096-llama2-7b-chat", tokenizer=None):
    cmd = ["docker"] + ['run',
                        '-d',
                        '--runtime', 'nvidia',
                        ] + gpus_cmd() + [
              '--shm-size', '10.24g',
              '-p', '%s:%s' % (port, port),
              'vllm/vllm-openai:v0.4.2',
              '--port=%s' % port, '--host=0.0.0.0', '--model=%s' % base_model,
              '--tensor-parallel-size=1',
          ]
    if tokenizer:
        cmd.append('--tokenizer=%s' % tokenizer)
    return subprocess.check_output(cmd).decode().strip()
"""


def test_a_command_list_that_runs_a_vllm_image_is_read_as_docker_run(tmp_path):
    # h2oai/h2ogpt (a0ad192) tests/test_inference_servers.py run_vllm_docker: a `docker run` of
    # vllm/vllm-openai:v0.4.2 as a command list joined from several with `+` was not read (the same
    # command as an os.system string was): a launch of vLLM 0.4.2, before the hybrid KV cache manager.
    (d,) = read(tmp_path, H2OGPT_DOCKER).deployments
    assert (d.line, d.release.version, d.release.origin) == (9, "0.4.2", "image tag vllm/vllm-openai:v0.4.2")
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert (entry.decision["outcome"], entry.decision["vllm"]["release"]) == ("disabled", "0.4.2")
    # `'--port=%s' % port` is the option with its value not known, not a model named by a word not known;
    # the word the `if` adds is read on each path.
    assert [n.message for n in entry.deployment.notes] == [
        "the model is `base_model`, where `base_model` is a parameter of `run_vllm_docker`; the decision does not "
        "read the model's name",
        "`--port` takes its value from `port` (which is a parameter of `run_vllm_docker`); the decision does not read it",
        "the command also takes `cmd.append(...)` (which adds words at line 20 where `tokenizer` is true), which may "
        "hold options; the decision is the same on each of the 2 paths"]


def test_a_docker_run_list_with_vllm_serve_and_a_list_without_a_vllm_image(tmp_path):
    found = read(tmp_path, """\
import subprocess
subprocess.run(["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.12.0", "--model", "m",
                "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'])
subprocess.run(["docker", "run", "--gpus", "all", "--entrypoint", "vllm", "vllm/vllm-openai:v0.21.0", "serve", "m"])
subprocess.run(["docker", "run", "-d", "redis:7"])
""")
    first, second = found.deployments
    assert (first.line, first.release.version, json.loads(first.document["kv_transfer_config"])["kv_connector"]) == \
        (2, "0.12.0", "NixlConnector")
    assert (second.line, second.release.version, second.document["model"]) == (4, "0.21.0", {"name": "m"})
    # The image through a name the file binds once to it (NVIDIA/TensorRT-Model-Optimizer's scripts keep
    # theirs in CONTAINER_IMAGE): no launch was read, or, with `vllm serve` in the list, the default release.
    for command in ('"--model", "m"', '"vllm", "serve", "m"'):
        named = only_deployment(read(tmp_path, f'import subprocess\nIMAGE = "vllm/vllm-openai:v0.8.5"\n'
                                               f'cmd = ["docker", "run", "--gpus", "all", IMAGE, {command}]\n'
                                               "subprocess.run(cmd)\n"))
        assert (named.line, named.release) == (3, ReleaseHint("0.8.5", "image tag vllm/vllm-openai:v0.8.5"))


def test_strings_built_with_percent_and_plus_are_read_as_their_text(tmp_path):
    found = read(tmp_path, """\
import json, subprocess
KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
def serve(model, port):
    subprocess.run(["vllm", "serve", "--model=%s" % model, "--port", "%d" % port,
                    "--kv-transfer-config=" + json.dumps(KV), "--served-model-name=%s-%s" % ("a", model)])
""")
    (d,) = found.deployments
    assert json.loads(d.document["kv_transfer_config"]) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert d.problems == ()
    # A conversion other than %s and %d is a value not known: the word stays whole.
    (other,) = read(tmp_path, 'import subprocess\nsubprocess.run(["vllm", "serve", "m", "--x=%5.2f" % 1.5])\n').deployments
    assert [n.code for n in other.notes] == ["source.unresolved_arguments"]


def test_an_engines_starred_arguments_are_no_model(tmp_path):
    # allenai/open-instruct (e6c3044) open_instruct/vllm_utils.py: `vllm.AsyncEngineArgs(*args, **kwargs)`
    # was read with `*args` as the model's name; it may hold any of the engine's fields by position.
    (d,) = read(tmp_path, "import vllm\n\n\ndef create(*args, **kwargs):\n"
                          "    return vllm.AsyncEngineArgs(*args, **kwargs)\n").deployments
    assert "model" not in d.document
    assert [n.message.split(" (")[0] for n in d.notes] == ["the call also takes `**kwargs`",
                                                           "the call also takes `*args`"]


def test_an_engine_class_held_by_a_name_of_the_scripts_own_is_a_launch(tmp_path):
    # modelscope/ms-swift (3602360) swift/infer_engine/vllm_engine.py: `engine_cls = AsyncEngineArgs`
    # in an `if`, `EngineArgs` in its `else`, then `engine_cls(model=..., **engine_kwargs)`: the
    # engine every `swift deploy --infer_backend vllm` runs was skipped, "no vLLM launch is read".
    found = read(tmp_path, """\
from vllm import AsyncEngineArgs, EngineArgs, SamplingParams


class VllmEngine:
    def _prepare_engine_kwargs(self, **engine_kwargs):
        if self.use_async_engine:
            engine_cls = AsyncEngineArgs
        else:
            engine_cls = EngineArgs
        engine_args = engine_cls(model=self.model_dir, gpu_memory_utilization=0.9, **engine_kwargs)
        other = AsyncEngineArgs if self.use_async_engine else EngineArgs
        other(model="m", kv_transfer_config={"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
        params = SamplingParams
        return engine_args, params(temperature=0)
""")
    first, second = found.deployments
    assert (first.line, second.line) == (10, 12)
    assert [n.code for n in first.notes] == ["source.unresolved_unused", "source.unresolved_arguments"]
    assert second.document["kv_transfer_config"] == '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'


def test_a_class_method_called_through_a_name_of_the_scripts_own_is_a_launch(tmp_path):
    # deepjavalibrary/djl-serving (d21927c) djl_python/properties_manager/vllm_rb_properties.py: the
    # engine of the LMI container is `arg_cls.from_cli_args(args)`, `arg_cls = AsyncEngineArgs if
    # async_engine else EngineArgs`; only `arg_cls(...)` was read, the file was skipped.
    (d,) = read(tmp_path, """\
from vllm import EngineArgs, AsyncEngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser

def get_engine_args(async_engine=False):
    arg_cls = AsyncEngineArgs if async_engine else EngineArgs
    parser = arg_cls.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(args=["--model", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'])
    return arg_cls.from_cli_args(args)
""").deployments
    assert (d.line, d.document["model"]) == (8, {"name": "m"})
    assert d.document["kv_transfer_config"] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def test_a_dockerfile_beside_the_launcher_that_copies_it_gives_its_release(tmp_path):
    # awslabs/ai-on-eks (41a979e) blueprints/inference/vllm-rayserve-gpu: the Dockerfile beside
    # vllm_serve.py runs `pip install vllm==0.4.3` and `COPY vllm_serve.py /app/vllm_serve.py`; the
    # launcher was decided as the newest release (`enabled`), where 0.4.3 predates HMA.
    (tmp_path / "Dockerfile").write_text("FROM rayproject/ray:2.24.0-py310-cu118\n"
                                         "RUN pip install vllm==0.4.3 huggingface_hub==0.23.4\n"
                                         "COPY vllm_serve.py /app/vllm_serve.py\n", encoding="utf-8")
    (tmp_path / "vllm_serve.py").write_text("import os\nfrom vllm import AsyncEngineArgs\n\n"
                                            "args = AsyncEngineArgs(model=os.getenv('MODEL_ID', 'm'))\n",
                                            encoding="utf-8")
    (tmp_path / "other.py").write_text("from vllm import LLM\nLLM(model='m')\n", encoding="utf-8")
    served, other = sorted(audit([str(tmp_path)]).entries, key=lambda e: e.deployment.file)[::-1]
    assert (served.decision["outcome"], served.deployment.release.version) == ("disabled", "0.4.3")
    assert served.deployment.release.origin.startswith("pip pin vllm==0.4.3 at line 2 in ")
    # A file the Dockerfile does not copy is not in its image.
    assert (other.deployment.file.endswith("other.py"), other.deployment.release) == (True, None)



def test_a_launcher_a_dockerfile_copies_runs_on_the_platform_of_its_image(tmp_path):
    # The image a Dockerfile copies a launcher into gave its release but not its platform: a launcher copied into
    # vLLM's TPU image (GoogleCloudPlatform/kubernetes-engine-samples' rayserve/llm/tpu) was decided on CUDA.
    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-tpu:v0.11.1\nCOPY serve.py run.sh /app/\n", encoding="utf-8")
    (tmp_path / "serve.py").write_text("from vllm import LLM\nLLM(model='m')\n", encoding="utf-8")
    (tmp_path / "run.sh").write_text("#!/bin/bash\nvllm serve m\n", encoding="utf-8")
    python, shell = sorted(audit([str(tmp_path)]).entries, key=lambda e: e.deployment.file)
    for entry in (python, shell):
        assert (entry.deployment.document["platform"], entry.decision["vllm"]["release"], entry.decision["outcome"]) == (
            {"name": "tpu"}, "0.11.1", "disabled")
        assert dict(entry.deployment.origins)["platform"] == (
            "image tag vllm/vllm-tpu:v0.11.1 (vLLM 0.11.1 with tpu-inference's TPU platform) in "
            f"{tmp_path}/Dockerfile, which copies this file into the image it builds")

def test_a_dockerfile_whose_image_names_no_release_says_why_where_nothing_else_names_one(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365) ai-ml/gke-ray/rayserve/llm/tpu: the Dockerfile
    # builds FROM vllm/vllm-tpu:v0.21.0 and copies serve_tpu_multihost.py; the launcher was decided as the
    # default release without the note the same image gives in a manifest (survey 27a). (That tag now names
    # its release, 0.21.0: a nightly one names none.)
    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-tpu:nightly\nCOPY serve.py /home/ray/serve.py\n", encoding="utf-8")
    (tmp_path / "serve.py").write_text("from vllm import LLM\nLLM(model='m')\n", encoding="utf-8")
    (d,) = read_source(tmp_path / "serve.py").deployments
    assert d.release.version is None
    assert d.release.origin.startswith("image tag vllm/vllm-tpu:nightly: no release in the tag in ")
    assert d.release.origin.endswith("/Dockerfile, which copies this file into the image it builds")
    assert [n.code for n in d.notes] == ["source.release_unknown"]
    # A pin beside it names the release: the image's unknown one gives way.
    (tmp_path / "requirements.txt").write_text("vllm==0.10.2\n", encoding="utf-8")
    (d,) = read_source(tmp_path / "serve.py").deployments
    assert d.release.version == "0.10.2"


def test_a_dockerfile_above_the_launcher_that_copies_its_folder_gives_its_release(tmp_path):
    # runpod-workers/worker-vllm (7a925039): the root Dockerfile builds `FROM vllm/vllm-openai:${VLLM_VERSION}`
    # (ARG VLLM_VERSION=v0.27.1), `COPY src /src`, `ENTRYPOINT ["python3", "/src/main.py"]`; src/main.py
    # starts `vllm serve`. Only a Dockerfile beside the launcher was read: decided as the default release.
    (tmp_path / "Dockerfile").write_text("ARG VLLM_VERSION=v0.27.1\nFROM vllm/vllm-openai:${VLLM_VERSION}\n"
                                         "COPY builder/requirements.txt /requirements.txt\nCOPY src /src\n"
                                         'ENTRYPOINT ["python3", "/src/main.py"]\n', encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("import subprocess\nsubprocess.Popen(['vllm', 'serve', 'm'])\n",
                                              encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.file.endswith("main.py")]
    assert entry.deployment.release == ReleaseHint("0.27.1", f"image tag vllm/vllm-openai:v0.27.1 in "
                                                   f"{tmp_path / 'Dockerfile'}, which copies this file into the "
                                                   "image it builds")
    # A Dockerfile that copies its whole folder names no file of it (its own launch aside, vLLM's server):
    # the nearest requirements file decides.
    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.27.1\nCOPY . /app\n", encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("vllm==0.10.1.1\n", encoding="utf-8")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.file.endswith("main.py")]
    assert entry.deployment.release.version == "0.10.1.1"


def test_an_engine_class_a_helper_imports_is_the_engine(tmp_path):
    # EvolvingLMMs-Lab/lmms-eval (75571cfe) lmms_eval/models/simple/vllm.py L25 binds
    # `LLM, _has_vllm = optional_import("vllm", "LLM")` and builds `LLM(model=..., **kwargs)` at L232, the
    # whole `--model vllm` backend: skipped as "Python in which no vLLM launch is read".
    found = read(tmp_path, "from lmms_eval.imports import optional_import\n\n"
                           "LLM, _has_vllm = optional_import(\"vllm\", \"LLM\")\n\n"
                           "def build(**kwargs):\n    return LLM(model='m', kv_transfer_config={'kv_connector': "
                           "'ExampleConnector', 'kv_role': 'kv_both'}, **kwargs)\n")
    d = only_deployment(found)
    assert (d.line, decided(d), [n.code for n in d.notes]) == (6, ("disabled", False), ["source.unresolved_arguments"])
    # Another package's class of the same name, or a helper of another name, is none.
    for line in ('LLM, _ = optional_import("other", "LLM")\n', 'LLM = load("vllm", "LLM")\n'):
        assert read(tmp_path, line + "llm = LLM(model='m')\n").deployments == ()



def test_a_list_that_names_vllms_server_alone_is_completed_where_it_is_used(tmp_path):
    # gpustack/gpustack (47277d79) gpustack/worker/backends/vllm.py: `command = ["vllm", "serve"]`,
    # handed with arguments built in other methods (among them a conditional `--kv-transfer-config`
    # with LMCacheConnectorV1) to the workload it creates: it was `enabled`, with no note.
    launcher = read(tmp_path, "class Backend:\n    def start(self):\n        command = [\"vllm\", \"serve\"]\n"
                              "        args = self._build_command_args()\n"
                              "        self._create_workload(command=command, args=args)\n")
    (launch,) = launcher.deployments
    # (the call gives the command's arguments beside it, `args=`, which the script computes)
    assert [(n.code, n.message) for n in launch.notes] == [("source.unresolved_arguments", (
        "the command also takes `args` (which is computed when the script runs); only the options written here "
        "are read, and it may hold others"))]
    handed = read(tmp_path, "class Backend:\n    def start(self):\n        command = [\"vllm\", \"serve\"]\n"
                            "        self._create_workload(command)\n").deployments
    assert [n.message for d in handed for n in d.notes] == [
        "the command also takes `command ...` (which names vLLM's server alone, with no model or option: they are "
        "added where the list is used); only the options written here are read, and it may hold others"]
    # A list that gives a model, or one the file completes, is read as it is.
    (given,) = read(tmp_path, 'import subprocess\nsubprocess.run(["vllm", "serve", "m"])\n').deployments
    grown = read(tmp_path, 'import subprocess\ncmd = ["vllm", "serve"]\ncmd += ["m"]\nsubprocess.run(cmd)\n').deployments
    assert (given.notes, [d.notes for d in grown]) == ((), [()])


def test_a_list_that_ends_in_an_option_without_its_value_is_completed_where_it_is_used(tmp_path):
    # qualcomm/vllm-qaic tests/e2e/conftest.py: a dict of launchers, one of them
    # `["python3", "-m", "vllm.entrypoints.openai.api_server", "--model"]`, which the runner unpacks
    # before the model and its options (`[*self._BACKEND_LAUNCHERS[backend], model_name] + [...]`):
    # the list alone was an `error`, "`--model` has no value; vLLM refuses this".
    found = read(tmp_path, (
        "import subprocess\n\nclass Runner:\n    _LAUNCHERS = {\n        'serve': ['vllm', 'serve'],\n"
        "        'module': ['python3', '-m', 'vllm.entrypoints.openai.api_server', '--model'],\n    }\n"))
    assert [(d.line, decided(d), [n.message for n in d.notes]) for d in found.deployments] == [
        (5, ("enabled", True), [
            "the command also takes `the list ...` (which names vLLM's server alone, with no model or option: they "
            "are added where the list is used); only the options written here are read, and it may hold others"]),
        (6, ("enabled", True), [
            "the command also takes `the list ...` (which ends in `--model`, whose value is added where the list is "
            "used, with any other options); only the options written here are read, and it may hold others"])]
    # An option the decision reads, left so, takes a value not known.
    (kv,) = read(tmp_path, "import subprocess\nbase = ['vllm', 'serve', 'm', '--kv-transfer-config']\n").deployments
    assert [(p.code, p.message) for p in kv.problems] == [("source.unresolved", (
        "`--kv-transfer-config` takes its value from `base ...` (which ends in `--kv-transfer-config`, "
        "whose value is added where the list is used, with any other options)"))]
    # A list that is run as it is written still gives the option no value.
    (run,) = read(tmp_path, "import subprocess\nsubprocess.run(['vllm', 'serve', '--model'])\n").deployments
    assert [(p.code, p.message) for p in run.problems] == [("source.missing_value", "`--model` has no value")]


def test_a_command_list_handed_to_a_function_that_grows_it_may_hold_more(tmp_path):
    # vllm-project/vime (039ae4dd) vime/backends/vllm_utils/vllm_engine.py: `cmd = ["vllm", "serve", ...]`, then
    # `_forward_vllm_cli_args(args, cmd)`, whose body appends the user's `--vllm-*` options (a --kv-transfer-config
    # among them). The launch was `enabled` with nothing said (survey 43a).
    (d,) = read(tmp_path, "import subprocess\n\ndef add_user_opts(cmd, opts):\n    for k, v in opts.items():\n"
                          "        cmd.extend([k, v])\n\ndef launch(opts):\n    cmd = ['vllm', 'serve', 'm']\n"
                          "    add_user_opts(cmd, opts)\n    subprocess.Popen(cmd)\n").deployments
    assert [(n.code, n.message) for n in d.notes] == [("source.unresolved_arguments", (
        "the command also takes `add_user_opts(cmd, opts)` (which may add words to `cmd` at line 9); only the options "
        "written here are read, and it may hold others"))]
    # A function that only reads the list is none.
    (d,) = read(tmp_path, "import subprocess\n\ndef show(cmd):\n    print(' '.join(cmd))\n\n"
                          "def launch():\n    cmd = ['vllm', 'serve', 'm']\n    show(cmd)\n"
                          "    subprocess.Popen(cmd)\n").deployments
    assert d.notes == ()


def test_a_tests_data_and_asserts_are_no_launch(tmp_path):
    # gpustack (47277d79) tests/worker/backends/test_backend.py: `@pytest.mark.parametrize` cases of
    # command lists, input and expected, were six launches; a test's `assert cmd == [...]` is data too.
    found = read(tmp_path, (
        "import pytest\n\n@pytest.mark.parametrize('entry, expected', [\n"
        "    (['vllm', 'serve'], ['vllm', 'serve', '/models/llm', '--port', '8000']),\n])\n"
        "def test_override(entry, expected):\n    assert build(entry) == ['vllm', 'serve', '/models/llm']\n")
        , name="test_backend.py")
    assert found.deployments == ()



def test_a_tests_expected_command_is_no_launch(tmp_path):
    # instructlab/instructlab (2d734099) tests/test_backends.py: `expected_cmd = [sys.executable, "-m",
    # "vllm.entrypoints.openai.api_server", ...]` (also `[...] + vllm_args`), read only by
    # `assert cmd == expected_cmd`, were three launches.
    found = read(tmp_path, """\
import subprocess, sys
def test_build(args):
    expected_cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    assert build() == expected_cmd
    expected = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"] + args
    assert build(args) == expected, expected
def test_run():
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    assert cmd
    subprocess.run(cmd)
""", name="test_backends.py")
    # A list that is also run (or handed on) is a launch.
    assert [d.line for d in found.deployments] == [8]

def test_a_helper_that_returns_a_tests_expected_command_gives_no_launch(tmp_path):
    # neuralmagic/helm-charts (e0c03d0) tests/charts/nm_vllm/test_deployment.py: `get_expected_command()`
    # returns `["python3", "-m", "vllm.entrypoints.openai.api_server", "--host", host, ...]`, and each of
    # its five calls is `expected_command = get_expected_command(...)`, read only by an assert: five
    # launches, one per call (survey 41b).
    helper = ('def get_expected_command(host, model_name):\n'
              '    return ["python3", "-m", "vllm.entrypoints.openai.api_server", "--host", host, "--model", model_name]\n')
    found = read(tmp_path, "def test_command(render):\n    expected_command = get_expected_command('0.0.0.0', 'm')\n"
                           "    assert render()['command'] == expected_command\n\n" + helper, name="test_deployment.py")
    assert found.deployments == ()
    # A call whose list is run is a launch.
    (run,) = read(tmp_path, "import subprocess\ndef test_command(render):\n"
                            "    expected_command = get_expected_command('0.0.0.0', 'm')\n"
                            "    assert render()['command'] == expected_command\n"
                            "    subprocess.run(get_expected_command('h', 'm'))\n\n" + helper,
                  name="test_deployment.py").deployments
    assert (run.line, run.document["model"], [n.message for n in run.notes]) == (8, {"name": "m"}, [
        "read as the call of `get_expected_command` at line 5 runs it (its 2 calls pass different values)"])


def test_a_unittest_or_mock_assertion_s_command_is_no_launch(tmp_path):
    # llm-d/llm-d-benchmark (8bc9f1d) llm_d_stack_discovery/tests/unit/test_utils.py: the list inside
    # `self.assertEqual(container["command"], [...])` was a launch; so would a mock's
    # `run.assert_called_once_with([...])` be, or a list read only by them (survey 27e).
    found = read(tmp_path, """\
import subprocess, unittest
class T(unittest.TestCase):
    def test_assert(self):
        self.assertEqual(get_command(), ["python", "-m", "vllm.entrypoints.openai.api_server"])
    def test_mock(self):
        run.assert_called_once_with(["vllm", "serve", "m"])
    def test_expected(self):
        expected = ["vllm", "serve", "m"]
        self.assertEqual(build(), expected)
    def test_run(self):
        subprocess.run(["vllm", "serve", "m"])
""", name="test_utils.py")
    assert [d.line for d in found.deployments] == [11]


def test_a_launchers_project_or_lock_file_names_its_release(tmp_path):
    # OpenPipe/ART (779559fd) src/art/local/state.py builds `AsyncEngineArgs(**engine_args_dict)`; the
    # repository pins `"vllm==0.8.5.post1"` in pyproject.toml's dependencies and locks it in uv.lock, and
    # has no requirements.txt: it was decided as the default release (`enabled`); 0.8.5.post1 has no HMA.
    launcher = tmp_path / "src" / "art" / "local" / "state.py"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("from vllm import AsyncEngineArgs\nengine_args = AsyncEngineArgs(model='m')\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "openpipe-art"\ndependencies = [\n    "openai>=1.65.5",\n    "vllm==0.8.5.post1",\n]\n'
        '[project.optional-dependencies]\nswebench = ["modal>=1.0.1"]\n', encoding="utf-8")

    def release() -> ReleaseHint:
        (entry,) = audit([str(tmp_path)]).entries
        assert entry.decision["outcome"] == "disabled"
        return entry.deployment.release
    assert release() == ReleaseHint("0.8.5.post1", f"pin vllm==0.8.5.post1 in {tmp_path / 'pyproject.toml'} (the "
                                                   "dependencies of the launcher's nearest project)")
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.8.5.post1"\n'
                                      'source = { registry = "https://pypi.org/simple" }\n', encoding="utf-8")
    assert release() == ReleaseHint("0.8.5.post1", f"vllm 0.8.5.post1 locked in {tmp_path / 'uv.lock'} (the "
                                                   "launcher's nearest lock file)")
    # A project that pins no vLLM, or a file that is no TOML, names none: the nearest decides.
    for text in ('[project]\nname = "x"\ndependencies = ["vllm>=0.8"]\n', "[project\n", "a = " + "[" * 100_000 + "]" * 100_000):
        (tmp_path / "src" / "pyproject.toml").write_text(text, encoding="utf-8")
        (entry,) = audit([str(tmp_path)]).entries
        assert entry.deployment.release is None


def test_vllms_cuda_build_of_a_release_is_that_release(tmp_path):
    # PrimeIntellect-ai/prime-rl (559b4477) uv.lock locks `vllm` `0.26.0+cu129`, the wheel of vLLM's v0.26.0
    # GitHub release built for CUDA 12.9: a launch beside it was decided as 0.33.0 ("not a release these
    # rules decide for"), and a requirements line or a pip pin of it gave the same or no release at all.
    moriio = '{"kv_connector": "MoRIIOConnector", "kv_role": "kv_both"}'
    (tmp_path / "x.py").write_text(f"from vllm import LLM\nllm = LLM('m', kv_transfer_config={moriio})\n", encoding="utf-8")
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\npip install vllm==0.26.0+cu129\nvllm serve m --kv-transfer-config "
                                     f"'{moriio}'\n", encoding="utf-8")

    def decided() -> list[tuple[str, str | None, str]]:
        return [(e.deployment.file.rsplit("/", 1)[-1], e.deployment.release.version, e.decision["outcome"])
                for e in audit([str(tmp_path)]).entries]
    (tmp_path / "requirements.txt").write_text("vllm==0.26.0+cu129\n", encoding="utf-8")
    assert decided() == [("run.sh", "0.26.0", "disabled"), ("x.py", "0.26.0", "disabled")]
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.26.0+cu129"\nsource = { url = "https://github.com/'
        'vllm-project/vllm/releases/download/v0.26.0/vllm-0.26.0+cu129-cp38-abi3-manylinux_2_28_x86_64.whl" }\n',
        encoding="utf-8")
    assert decided() == [("run.sh", "0.26.0", "disabled"), ("x.py", "0.26.0", "disabled")]
    # vLLM's own CPU wheel of a release is that release too (vllm-project/vllm-spyre fc6b54b9 vllm_spyre_next/
    # uv.lock locks `0.17.1+cpu` from vLLM's repository at tag v0.17.1; survey 20m).
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.17.1+cpu"\n',
                                      encoding="utf-8")
    assert decided()[1] == ("x.py", "0.17.1", "disabled")
    # Another local version is a build of someone else's: kept as written, no release the rules hold.
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.26.0+gptoss"\n',
                                      encoding="utf-8")
    assert decided()[1] == ("x.py", "0.26.0+gptoss", "enabled")
    # A Modal image's pin of one was no pin at all, with no note, where a shell script's `pip install` of it
    # was noted (tensorzero/tensorzero 7a6159a4 vllm_gpt_oss.py: `uv_pip_install("vllm==0.10.1+gptoss")`).
    (tmp_path / "uv.lock").unlink()
    (tmp_path / "run.sh").unlink()
    (tmp_path / "x.py").write_text('import modal, subprocess\nimage = modal.Image.debian_slim().uv_pip_install('
                                   '"vllm==0.10.1+gptoss")\nsubprocess.Popen(["vllm", "serve", "openai/gpt-oss-20b"])\n',
                                   encoding="utf-8")
    (entry,) = audit([str(tmp_path)]).entries
    assert [(n.code, n.message) for n in entry.deployment.notes] == [("source.release_not_held", (
        "pip pin vllm==0.10.1+gptoss at line 2 names vLLM 0.10.1+gptoss, a build of 0.10.1 of its own (`+gptoss`), "
        "not a release these rules decide for (0.9.1 to 0.33.0); decided as vLLM 0.33.0"))]


def test_a_value_a_function_of_the_file_returns_is_read(tmp_path):
    # vllm-project/tpu-inference (b8692ff0) tests/offload/tpu_offload_accuracy_test.py: `def
    # get_kv_transfer_config(): """...""" return KVTransferConfig(kv_connector="TPUOffloadConnector", ...)`
    # handed to `LLM(kv_transfer_config=get_kv_transfer_config())`: an `error`, "computed when the script
    # runs", with the hint to write the value in the file, where it is.
    text = (HEADER + '\n\ndef get_kv_transfer_config():\n    """use LMCache"""\n    return KVTransferConfig(\n'
            '        kv_connector="LMCacheConnectorV1", kv_role="kv_both")\n\n\n'
            'def main():\n    llm = LLM(model="m", kv_transfer_config=get_kv_transfer_config())\n')
    d = only_deployment(read(tmp_path, text))
    assert (decided(d), json.loads(d.document["kv_transfer_config"])) == (
        ("disabled", False), {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    # A function with parameters, or of a name bound twice, returns what only running tells.
    for changed in (text.replace("def get_kv_transfer_config():", "def get_kv_transfer_config(role='kv_both'):"),
                    text + "\nget_kv_transfer_config = None\n"):
        d = only_deployment(read(tmp_path, changed))
        assert [n.code for n in d.problems] == ["source.unresolved"]


def test_a_launch_in_a_function_whose_calls_pass_different_values_is_one_launch_per_call(tmp_path):
    # vllm-project/tpu-inference (b8692ff0) tests/e2e/test_hybrid_kvcache.py: `LLM(...,
    # disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager)` in a helper called with `False`,
    # `True` and `False`: an `error` ("whose 3 calls do not all pass one known value"); each call runs
    # it, as a shell function is read once per call.
    text = (HEADER + "\n\ndef run(model, disable=False):\n    llm = LLM(model=model, disable_hybrid_kv_cache_manager=disable)\n\n\n"
            "def test_on():\n    run('m', disable=False)\n\n\ndef test_off():\n    run('m', disable=True)\n\n\n"
            "def test_default():\n    run('m')\n")
    found = read(tmp_path, text).deployments
    assert [(d.line, decided(d), [(n.code, n.message) for n in d.notes]) for d in found] == [
        (6, ("enabled", True), [("source.call_site", "read as the call of `run` at line 10 runs it (its 3 calls pass "
                                                      "different values)")]),
        (6, ("disabled", False), [("source.call_site", "read as the call of `run` at line 14 runs it (its 3 calls "
                                                        "pass different values)")]),
        (6, ("enabled", True), [("source.call_site", "read as the call of `run` at line 18 runs it (its 3 calls pass "
                                                      "different values)")])]
    # Calls that pass one value give one launch, as before.
    (one,) = read(tmp_path, text.replace("disable=True", "disable=False")).deployments
    assert one.notes == ()


@pytest.mark.parametrize("takes", ['"--kv-transfer-config", kv', "*kv"])
def test_a_command_list_in_a_function_whose_calls_pass_different_values_is_one_launch_per_call(tmp_path, takes):
    # The doc says a command list's words are read per call as an engine call's are, but its words were
    # read once: `source.unresolved` ("whose 2 calls do not all pass one known value"), and a list given
    # as `*extra` was `enabled` with a note where one call adds LMCacheConnectorV1 (survey 37b).
    lmcache = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    nixl = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    passed = (f"'{nixl}'", f"'{lmcache}'") if takes.startswith('"') else \
        (f"['--kv-transfer-config', '{nixl}']", f"['--kv-transfer-config', '{lmcache}']")
    found = read(tmp_path, f"""import subprocess
def start(model, kv):
    subprocess.Popen(["vllm", "serve", model, {takes}])
start("a/b", {passed[0]})
start("c/d", {passed[1]})
""").deployments
    assert [(d.line, d.document["model"], json.loads(d.document["kv_transfer_config"])["kv_connector"],
             [n.message for n in d.notes]) for d in found] == [
        (3, {"name": "a/b"}, "NixlConnector", ["read as the call of `start` at line 4 runs it (its 2 calls pass "
                                               "different values)"]),
        (3, {"name": "c/d"}, "LMCacheConnectorV1", ["read as the call of `start` at line 5 runs it (its 2 calls "
                                                    "pass different values)"])]


def test_an_engine_call_with_chunked_prefill_off_gives_the_flag(tmp_path):
    # `LLM(..., enable_chunked_prefill=False)` is `--no-enable-chunked-prefill`; True or a value not known
    # leaves the release's default, as before the field was read (LMCache/LMCache examples give False).
    text = HEADER + ("llm = LLM(model='m', kv_transfer_config={'kv_connector': 'ExampleHiddenStatesConnector', "
                     "'kv_role': 'kv_producer'}, enable_chunked_prefill=VALUE)\n")
    documents = [only_deployment(read(tmp_path, text.replace("VALUE", value))).document.get("enable_chunked_prefill")
                 for value in ("False", "True", "args.chunked")]
    assert documents == [False, None, None]
    # The origin names the keyword the call writes, as for every other field (awslabs/ai-on-eks 41a979ee
    # vllm_serve.py said `--no-enable-chunked-prefill`, which the file does not hold).
    off = only_deployment(read(tmp_path, text.replace("VALUE", "False")))
    assert dict(off.origins)["enable_chunked_prefill"] == "line 3: enable_chunked_prefill="


def test_an_f_strings_field_not_known_is_shown_in_braces_as_the_file_writes_it(tmp_path):
    # huggingface/trl's notebooks (survey 22b): `org/output_dir-merged` read as a model id of its own.
    found = read(tmp_path, "import sys\nfrom vllm import LLM\nmodel_id, output_dir = 'q', 't4-GRPO'\n"
                           "llm = LLM(model=f'org/{output_dir}-merged')\nname = sys.argv[1]\n"
                           "llm = LLM(model=f'org/{name}-merged')\n")
    assert [(d.line, [n.message for n in d.notes]) for d in found.deployments] == [
        (4, ["the model is `org/{output_dir}-merged`, where `{output_dir}` is unpacked from another value; the "
             "decision does not read the model's name"]),
        # Found through a name: where it came from, as `$1` in a script.
        (6, ["the model is `org/sys.argv[1]-merged`, where `sys.argv[1]` is computed when the script runs; the "
             "decision does not read the model's name"])]


def test_a_choice_that_only_pipes_or_redirects_a_command_string_adds_no_words(tmp_path):
    found = read(tmp_path, "import subprocess, sys\nq = len(sys.argv) > 1\n"
                           "subprocess.run('vllm serve m' + (' > /tmp/log 2>&1' if q else ''), shell=True)\n"
                           "subprocess.run('vllm serve m' + (' || echo failed' if q else ''), shell=True)\n")
    assert [(d.line, [n.code for n in d.notes], len(d.paths)) for d in found.deployments] == [
        (3, [], 0),
        # `||` runs another command when vLLM fails: read on each path, as any choice is.
        (4, [], 2)]


SERVICE = """import vllm.entrypoints.openai.api_server as vllm_api_server
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils import FlexibleArgumentParser


async def init_engine(self, settings):
    args = make_arg_parser(FlexibleArgumentParser()).parse_args({parsed})
    args.model = "Qwen/Qwen3-30B-A3B"
    args.kv_transfer_config = '{{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}'
{more}    return await vllm_api_server.build_async_engine_client(args)
"""



def test_the_openai_servers_run_server_of_a_parsed_namespace_is_a_launch(tmp_path):
    # `vllm serve` runs `uvloop.run(run_server(args))`; so do servers of their own (inclusionAI/AReaL's
    # areal_vllm_server.py, prime-rl's, ArcticInference's; survey 34c), whose file was "Python in which no vLLM
    # launch is read" where `build_async_engine_client(args)` was one.
    found = read(tmp_path, """import uvloop
from vllm.entrypoints.openai.api_server import run_server
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
args = parser.parse_args(["--model", "m", "--kv-transfer-config",
                          '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'])
uvloop.run(run_server(args))
""", "server.py")
    (launch,) = found.deployments
    assert (launch.line, launch.document["model"]) == (8, {"name": "m"})
    assert json.loads(launch.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # A function of the file's own of that name is no launch.
    assert read(tmp_path, "import vllm\n\ndef run_server(args):\n    pass\n\nrun_server(['--model', 'm'])\n",
                "own.py").deployments == ()

def test_an_engine_built_from_a_namespace_reads_what_the_script_sets_on_it(tmp_path):
    # BentoML's openllm-models (f0027d6b): 66 services build the OpenAI server's engine from a namespace
    # they parse empty and then set fields on (`args.model = ...`, then `setattr(args, key, value)` for
    # each of their settings), as `AsyncEngineArgs.from_cli_args(args)` reads it (survey 22e). Neither the
    # call nor the fields were read: no launch, and a `from_cli_args(args)` ignored what was set.
    (tmp_path / "requirements.txt").write_text("vllm==0.10.1\n")
    found = read(tmp_path, SERVICE.format(parsed="[]", more=""), "service.py")
    (launch,) = found.deployments
    assert (launch.line, launch.release.version, launch.document["model"], launch.notes) == (
        10, "0.10.1", {"name": "Qwen/Qwen3-30B-A3B"}, ())
    assert json.loads(launch.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # What is set wins over what was parsed: the namespace is changed after parsing.
    parsed = read(tmp_path, SERVICE.format(parsed='["--kv-transfer-config", \'{"kv_connector": "NixlConnector", '
                                                  '"kv_role": "kv_both"}\', "--max-model-len", "4096"]', more=""),
                  "parsed.py").deployments[0]
    assert json.loads(parsed.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # A field set by a key the file does not write may be any of them, and replaces those set above it.
    looped = read(tmp_path, SERVICE.format(parsed="[]", more="    for key, value in settings.items():\n"
                                                            "        setattr(args, key, value)\n"),
                  "looped.py").deployments[0]
    assert [(p.code, p.message) for p in looped.problems] == [
        ("source.unresolved", "`kv_transfer_config` takes its value from `args.kv_transfer_config` (which "
                              "may be changed at line 11 in a way not read)")]
    assert [n.message for n in looped.notes][-1] == (
        "the call also takes `args.*` (which may be set at line 11 in a way not read); only the arguments written "
        "here are read, and it may hold others")
    # Set below the call, or on an EngineArgs object the call made: as before, below it counts there only.
    after = read(tmp_path, "from vllm import EngineArgs, LLM\nfrom dataclasses import asdict\n"
                           "def run(settings):\n    args = EngineArgs(model='m')\n"
                           "    for key, value in settings.items():\n        setattr(args, key, value)\n"
                           "    return LLM(**asdict(args))\n", "after.py").deployments[0]
    assert [n.message for n in after.notes] == [
        "the call also takes `args.*` (which may be set at line 6 in a way not read); only the arguments written "
        "here are read, and it may hold others"]


def test_keys_a_function_sets_on_its_kwargs_parameter_are_read(tmp_path):
    # allenai/open-instruct (e6c3044a) vllm_utils.py: the engine actor sets `kwargs["generation_config"]`
    # and then builds `AsyncEngineArgs(*args, **kwargs)`; a KV configuration set so was not read, and the
    # launch decided `enabled` with only the note that `**kwargs` may hold others (survey 22h).
    head = ("import vllm\n\n\nclass LLMRayActor:\n    def __init__(self, *args, **kwargs):\n"
            "        kwargs['generation_config'] = 'vllm'\n"
            "        kwargs['kv_transfer_config'] = {'kv_connector': 'LMCacheConnectorV1', 'kv_role': 'kv_both'}\n")
    call = "        self.engine = vllm.AsyncEngineArgs(*args, **kwargs)\n"
    (launch,) = read(tmp_path, head + call + "        kwargs['disable_hybrid_kv_cache_manager'] = True\n",
                     "actor.py").deployments
    assert json.loads(launch.document["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    assert "disable_hybrid_kv_cache_manager" not in launch.document  # (set below the call)
    assert {n.message for n in launch.notes} == {
        "the call also takes `**kwargs` (which is unpacked when the script runs); only the arguments written here "
        "are read, and it may hold others",
        "the call also takes `*args` (which is unpacked when the script runs); only the arguments written here are "
        "read, and it may hold others"}
    # Set on some runs only: a value not known.
    (launch,) = read(tmp_path, head + "        if kwargs.get('offload'):\n            kwargs['kv_offloading_size'] = 8\n"
                     + call, "offload.py").deployments
    assert [(p.code, p.message) for p in launch.problems] == [
        ("source.unresolved", "`kv_offloading_size` takes its value from `kwargs['kv_offloading_size']` (which is set "
                              "on some runs of the script (in an `if`, a loop or a `try`))")]


def test_a_key_set_in_the_block_that_starts_the_engine_below_it_is_read(tmp_path):
    # qualcomm/vllm-qaic (dc7351f5) examples/qaic_vision_language_multi_image.py: `ea["kv_transfer_config"] =
    # KVTransferConfig(...)` then `llm = LLM(**ea)`, both in one `try`: whenever the call runs the key is set,
    # but it was "set on some runs of the script", `source.unresolved` (survey 39a).
    head = "from vllm import LLM\nfrom vllm.config import KVTransferConfig\nea = {'model': 'm'}\ntry:\n"
    key = "    ea['kv_transfer_config'] = KVTransferConfig(kv_connector='LMCacheConnectorV1', kv_role='kv_both')\n"
    (d,) = read(tmp_path, head + key + "    llm = LLM(**ea)\nexcept Exception as exc:\n    print(exc)\n").deployments
    assert (json.loads(d.document["kv_transfer_config"])["kv_connector"], d.problems) == ("LMCacheConnectorV1", ())
    # Set in a `try` whose call is below it: on a run where the `try` fails before the key, the call runs without it.
    (d,) = read(tmp_path, head + key + "except Exception:\n    pass\nllm = LLM(**ea)\n").deployments
    assert [(p.code, p.message) for p in d.problems] == [(
        "source.unresolved", "`kv_transfer_config` takes its value from `ea['kv_transfer_config']` (which is set on "
                             "some runs of the script (in an `if`, a loop or a `try`))")]


def test_engine_arguments_only_turned_into_a_model_config_start_no_engine(tmp_path):
    # NovaSky-AI/SkyRL (a9564572) render_server.py and llm-d/llm-d-kv-cache (7be76e11) renderer.py build
    # `AsyncEngineArgs(...)` only for `.create_model_config()`, to render chat templates on the CPU, as
    # vLLM's own render server does: no engine, no KV cache; each was decided as a launch (surveys 22a, 22i).
    found = read(tmp_path, "from vllm.config import DeviceConfig, VllmConfig\n"
                           "from vllm.engine.arg_utils import AsyncEngineArgs\n\n\ndef build(model_name):\n"
                           "    engine_args = AsyncEngineArgs(model=model_name, trust_remote_code=True)\n"
                           "    model_config = engine_args.create_model_config()\n"
                           "    return VllmConfig(model_config=model_config, device_config=DeviceConfig(device='cpu'))\n"
                           "\n\ndef serve(model_name):\n    engine_args = AsyncEngineArgs(model=model_name)\n"
                           "    config = engine_args.create_model_config()\n"
                           "    return AsyncLLMEngine.from_engine_args(engine_args)\n", "renderer.py")
    # The one handed on to an engine is a launch; an object made and never used stays one, as before.
    assert [d.line for d in found.deployments] == [12]
    # A load config too (kserve/kserve aaac4e2 python/huggingfaceserver/tests/server.py downloads the model
    # with it, and starts the server in a subprocess; survey 26a).
    loads = read(tmp_path, "from vllm.engine.arg_utils import AsyncEngineArgs\n\ndef download(args):\n"
                           "    engine_args = AsyncEngineArgs.from_cli_args(args)\n"
                           "    model_config = engine_args.create_model_config()\n"
                           "    load_config = engine_args.create_load_config()\n", "server.py")
    assert loads.deployments == ()
    assert [d.line for d in read(tmp_path, "from vllm import EngineArgs\nargs = EngineArgs(model='m')\n").deployments] \
        == [2]


def test_engine_arguments_a_helper_returns_for_configs_alone_start_no_engine(tmp_path):
    # vllm-project/vllm-metal (211a1e4b) tests/test_gguf_vllm_integration.py: `def _engine_args(**kwargs): return
    # EngineArgs(**kwargs)`, whose every caller only makes a model or engine config: a launch, `enabled` (survey 39a).
    helper = "from vllm.engine.arg_utils import EngineArgs\n\ndef _engine_args(**kwargs):\n    return EngineArgs(**kwargs)\n\n"
    configs = ("def test_model():\n    mc = _engine_args(model='m').create_model_config()\n\n"
               "def test_engine():\n    args = _engine_args(model='m')\n    config = args.create_engine_config()\n")
    assert read(tmp_path, helper + configs).deployments == ()
    # A caller that starts an engine from what it returns makes it a launch.
    started = read(tmp_path, "from vllm.engine.llm_engine import LLMEngine\n" + helper + configs
                   + "\ndef serve():\n    LLMEngine.from_engine_args(_engine_args(model='m'))\n").deployments
    assert [d.line for d in started] == [5]


def test_engine_arguments_only_turned_into_a_vllm_config_the_function_keeps_start_no_engine(tmp_path):
    # vllm-project/tpu-inference (b8692ff) tests/layers/vllm/*: `EngineArgs(...)`, then
    # `vllm_config = engine_args.create_engine_config()` to set up vLLM's distributed state for a layer
    # test: 69 launches, 40 % of the repository's, where no engine starts (survey 23a).
    fixture = ("from vllm.engine.arg_utils import EngineArgs\n{imports}\n\ndef setup(mesh):\n"
               "    engine_args = EngineArgs(model='Qwen/Qwen3-0.6B', max_model_len=64)\n"
               "    vllm_config = engine_args.create_engine_config()\n"
               "    vllm_config.quant_config = get_quant_config(vllm_config, mesh)\n"
               "    with set_current_vllm_config(vllm_config):\n        {last}\n")
    assert read(tmp_path, fixture.format(imports="", last="yield")).deployments == ()
    # A config handed out (returned, yielded, kept on another object), or a script that names one of
    # vLLM's engines that start from a VllmConfig, may start an engine: a launch, as before.
    for imports, last in (("", "yield vllm_config"), ("", "holder.config = vllm_config"),
                          ("from vllm.v1.engine.async_llm import AsyncLLM", "yield"),
                          ("", "engine = AsyncLLM.from_vllm_config(vllm_config)")):
        found = read(tmp_path, fixture.format(imports=imports, last=last), name="launch.py")
        assert [d.line for d in found.deployments] == [5], (imports, last)
    # Made into a config in place, the same (ddps-lab/vllm-disaggregation 6007776 tests/v1/engine/test_engine_args.py:
    # `vllm_config = EngineArgs.from_cli_args(args=args).create_engine_config()`, 14 `enabled` launches: survey 33a).
    chained = ("from vllm.engine.arg_utils import EngineArgs\n\ndef test_default():\n"
               "    vllm_config = EngineArgs(model='m').create_engine_config()\n"
               "    other = EngineArgs.from_cli_args(args=args).create_engine_config()\n    assert vllm_config\n")
    assert read(tmp_path, chained, name="test_chained.py").deployments == ()
    handed = chained.replace("    assert vllm_config\n", "    return vllm_config\n")
    assert [d.line for d in read(tmp_path, handed, name="chained.py").deployments] == [4]


def test_a_connector_the_file_registers_is_loaded_as_vllm_s_factory_loads_it(tmp_path):
    # ddps-lab/vllm-disaggregation (6007776) tests/v1/engine/test_abort_final_step.py registers its own
    # DummyKVConnector with `KVConnectorFactory.register_connector(name, __name__, cls.__name__)` and starts an engine
    # with it: decided `error`, connector.unknown ("vLLM rejects"), though the factory finds it in its registry
    # (factory.py get_connector_class) and loads the class from that module (survey 33a).
    found = read(tmp_path, (
        "from vllm import LLM\nfrom vllm.config import KVTransferConfig\n"
        "from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory\n"
        "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1\n"
        "class DummyKVConnector(KVConnectorBase_V1):\n    pass\n"
        "KVConnectorFactory.register_connector('Dummy', __name__, DummyKVConnector.__name__)\n"
        "llm = LLM(model='m', kv_transfer_config=KVTransferConfig(kv_connector='Dummy', kv_role='kv_both'))\n"),
        name="test_abort.py")
    (d,) = found.deployments
    assert ktc(d) == {"kv_connector": "DummyKVConnector", "kv_role": "kv_both", "kv_connector_module_path": "test_abort"}
    assert [(n.code, n.message) for n in d.notes] == [(
        "source.connector_code", "`Dummy` is registered by this file at line 7 (`KVConnectorFactory.register_connector`): "
        "class `DummyKVConnector` from `test_abort` (the rules read a connector's HMA support from a registry entry, not "
        "from its code)")]
    (entry,) = audit([str(tmp_path / "test_abort.py")]).entries
    assert (entry.decision["outcome"], [w["code"] for w in entry.decision["warnings"]]) == (
        "undetermined", ["connector.capability_unknown"])


def test_a_path_whose_own_words_may_hold_options_says_so_when_the_paths_agree(tmp_path):
    # flytekit (e96c7203) dgxc_lepton/connector.py: `["vllm", "serve", m] + (extra.split() if extra else [])`.
    # Read on each path, the decision agreed, and the launch had only the note that the paths agree
    # (`source.unresolved_unused`); the path with the list read only as far as its words go (survey 22k).
    found = read(tmp_path, "import subprocess\n\ndef run(config):\n    cmd = ['vllm', 'serve', 'm'] + "
                           "(config.get('extra_args', '').split() if config.get('extra_args') else [])\n"
                           "    subprocess.run(cmd)\n")
    (launch,) = found.deployments
    assert [(n.code, n.message[:90]) for n in launch.notes] == [
        ("source.unresolved_arguments", "on path 1 of 2, where `config.get('extra_args')` is true: the command also "
                                        "takes `config.g")]
    (entry,) = audit([str(tmp_path / "run.py")]).entries
    assert [n.code for n in entry.deployment.notes] == ["source.unresolved_arguments", "source.unresolved_unused"]
    assert entry.deployment.notes[1].message.endswith("the decision is the same on each of the 2 paths")


def test_a_list_grown_in_an_if_whose_condition_the_file_gives_takes_that_branch(tmp_path):
    # GoogleCloudPlatform/generative-ai (23b75dab) bigquery_ml_llama_inference.ipynb: `if 0 < target < 1:
    # vllm_args.append(...)` where the only call leaves `target=0.0`; a module's `USE_PD = False` guarding
    # `args += ["--kv-transfer-config", ...]` was read on both paths (`source.unresolved` on 0.21.0), as
    # `a if c else b` is not where the file gives `c` (survey 22j).
    found = read(tmp_path, "import subprocess, sys\nUSE_PD = False\n\ndef deploy(target=0.0):\n"
                           "    args = ['vllm', 'serve', 'm']\n    if USE_PD:\n"
                           "        args += ['--kv-transfer-config', '{\"kv_connector\": \"NixlConnector\"}']\n"
                           "    if 0 < target < 1:\n        args.append(f'--bogus-opt={target}')\n"
                           "    if sys.argv[1:]:\n        args.extend(sys.argv[1:])\n    subprocess.run(args)\n\n"
                           "deploy()\n", "deploy.py")
    (launch,) = found.deployments
    assert "kv_transfer_config" not in launch.document and launch.options == ()
    # A condition only running the script tells is a choice still: its words may hold options.
    assert [(n.code, n.message) for n in launch.notes] == [
        ("source.unresolved_arguments", "the command also takes `args.extend(...)` (which adds words at line 11 where "
                                        "`sys.argv[1:]` is true); only the options written here are read, and it may "
                                        "hold others")]


def test_a_helper_of_the_file_that_sets_any_field_of_the_engine_arguments_is_noted(tmp_path):
    # pytorch/serve (62c4d6a1) ts/torch_handler/vllm_handler.py: `AsyncEngineArgs(model=model)`, then
    # `self._set_attr_value(vllm_engine_config, vllm_engine_params)`, which setattr()s each key of
    # model-config.yaml's vllm_engine_config, kv_transfer_config among them: dropped without a word (survey 22j).
    found = read(tmp_path, "from vllm import AsyncEngineArgs\n\n\nclass Handler:\n"
                           "    def engine_args(self, handler_config):\n        args = AsyncEngineArgs(model='m')\n"
                           "        self._set_attr_value(args, handler_config)\n        self._log(args)\n"
                           "        return args\n\n    def _set_attr_value(self, obj, config):\n"
                           "        for k, v in config.items():\n            setattr(obj, k, v)\n\n"
                           "    def _log(self, obj):\n        print(obj.model)\n", "handler.py")
    (launch,) = found.deployments
    assert [(n.code, n.message) for n in launch.notes] == [(
        "source.unresolved_arguments", "the call also takes `self._set_attr_value(args, handler_config)` (which may "
                                       "set any field of `args` at line 7); only the arguments written here are read, "
                                       "and it may hold others")]
