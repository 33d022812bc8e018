"""decide() takes what vLLM's own parser produces (issue 18, point 2): a
mapping of vLLM's options in either spelling, with ``model`` as vLLM's model
name, string values as the command line gives them, and an
``argparse.Namespace`` as vLLM leaves it. The option list is 0.33.0's,
recorded from its wheel (rules/options/, named in rules/releases.yaml). Empty and null input
are input errors (issue 18 point 3, issue 20 item 12)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

from hma_policy import InputError, decide
from hma_policy.core.input import prepare
from hma_policy.core.optionlist import ReleaseOptions, known_options

REPO = Path(__file__).resolve().parents[1]
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}
HYBRID = ["full_attention", "sliding_window"]
RECORDED = json.loads(resources.files("hma_policy.rules").joinpath("options", "0.33.0.json").read_text("utf-8"))


def problems_of(document, **kwargs):
    with pytest.raises(InputError) as info:
        decide(document, **kwargs)
    return info.value.problems


def only_problem(document):
    problems = problems_of(document)
    assert len(problems) == 1, problems
    return problems[0]


def fields(problem):
    return problem.code, problem.path, problem.message, problem.hint


class Untouchable:
    """A value that fails on any use: an ignored option's value is never read."""

    def __getattribute__(self, name):
        raise AssertionError(f"an ignored option's value was read ({name})")


# -- the option list --------------------------------------------------------------------

def test_the_option_list_decides_what_is_accepted(tmp_path):
    # prepare() takes a release's options: an option another release lacks is an unknown name there.
    older = ReleaseOptions("0.0.1", {k: v for k, v in known_options().by_dest.items() if k != "port"})
    assert prepare({"port": 8000}) == {}
    with pytest.raises(InputError) as info:
        prepare({"port": 8000}, options=older)
    assert [(p.code, p.path) for p in info.value.problems] == [("input.schema", "/port")]
    path = tmp_path / "9.9.9.json"
    path.write_text(json.dumps({"vllm_version": "9.9.9", "options": {"--port": {"type": "int"}}}))
    assert prepare({"port": "8000"}, options=known_options(path=path)) == {}
    with pytest.raises(InputError) as info:
        prepare({"tensor_parallel_size": 2}, options=known_options(path=path))
    assert [(p.code, p.path) for p in info.value.problems] == [("input.schema", "/tensor_parallel_size")]


# -- vLLM's options in a mapping -----------------------------------------------------------

def test_the_issue_example_is_decided():
    document = {"model": "Qwen/Qwen3-8B", "port": 8000, "tensor_parallel_size": 2, "kv_transfer_config": NIXL}
    d = decide(document)
    assert d.outcome == "enabled"
    assert d.to_dict() == decide({"kv_transfer_config": NIXL}).to_dict()
    assert decide({**document, "kv_transfer_config": EXAMPLE}).outcome == "disabled"


def test_every_option_of_the_release_is_accepted_in_either_spelling_and_ignored_unread():
    read = {"kv_transfer_config", "disable_hybrid_kv_cache_manager", "kv_offloading_size", "kv_offloading_backend",
            "speculative_config", "kv_events_config", "model", "enable_chunked_prefill"}
    ignored = [flag[2:].replace("-", "_") for flag in RECORDED["options"]
               if flag[2:].replace("-", "_") not in read]
    assert len(ignored) == 312
    snake = {name: Untouchable() for name in ignored}
    kebab = {name.replace("_", "-"): Untouchable() for name in ignored}
    for document in (snake, kebab):
        assert decide({**document, "kv_transfer_config": EXAMPLE}).outcome == "disabled"
        assert prepare(document) == {}


def test_vllms_parser_names_besides_its_options_are_accepted():
    document = {"subparser": "serve", "model_tag": "Qwen/Qwen3-8B", "dispatch_function": print, "kv_transfer_config": NIXL}
    assert decide(document).outcome == "enabled"


@pytest.mark.parametrize("name, hint", [
    ("tensor_parallel_sze", "did you mean `tensor_parallel_size`?"),
    ("tensor-parallel-sze", "did you mean `tensor-parallel-size`?"),
    ("kv_transfer_confg", "did you mean `kv_transfer_config`?"),
    ("gpu_count", None),
    ("layer_kinds", "the model's facts go under `model_facts`"),
])
def test_a_name_that_is_not_a_vllm_option_is_an_input_error_with_a_did_you_mean(name, hint):
    problem = only_problem({name: 2, "port": 8000})
    assert fields(problem) == ("input.schema", f"/{name}", f"unknown field `{name}`", hint)


def test_a_long_alias_is_its_option():
    # --device-memory-utilization is an alias of --gpu-memory-utilization (0.33.0's list).
    assert RECORDED["options"]["--gpu-memory-utilization"]["aliases"] == ["--device-memory-utilization"]
    assert prepare({"device-memory-utilization": 0.5, "kv_transfer_config": NIXL}) == {"kv_transfer_config": NIXL}
    problem = only_problem({"gpu_memory_utilization": 0.9, "device_memory_utilization": 0.5})
    assert (problem.code, problem.path, problem.message) == (
        "input.duplicate_key", "/device_memory_utilization",
        "`gpu_memory_utilization` is given twice, as `gpu_memory_utilization` and as `device_memory_utilization`")
    assert only_problem({"tp": 2}).code == "input.schema"  # a short alias (-tp) names no key


def test_an_option_given_in_both_spellings_is_a_duplicate():
    problem = only_problem({"tensor_parallel_size": 2, "tensor-parallel-size": 4})
    assert (problem.code, problem.path) == ("input.duplicate_key", "/tensor-parallel-size")
    assert problem.message == "`tensor_parallel_size` is given twice, as `tensor_parallel_size` and as `tensor-parallel-size`"


@pytest.mark.parametrize("text, value", [("true", True), ("True", True), (" false ", False), ("FALSE", False)])
def test_a_boolean_option_reads_true_and_false_strings(text, value):
    as_text = decide({"kv_transfer_config": NIXL, "disable_hybrid_kv_cache_manager": text})
    assert as_text.to_dict() == decide({"kv_transfer_config": NIXL, "disable_hybrid_kv_cache_manager": value}).to_dict()
    assert as_text.hma_enabled is (not value)


def test_a_boolean_option_refuses_other_strings():
    problem = only_problem({"disable-hybrid-kv-cache-manager": "yes"})
    assert (problem.code, problem.path) == ("input.schema", "/disable-hybrid-kv-cache-manager")
    assert problem.message == "expected boolean or null, got `yes`"


@pytest.mark.parametrize("text", ["16", " 16 ", "1e1", "0.5"])
def test_a_float_option_reads_numbers_as_argparse_float(text):
    d = decide({"kv-offloading-size": text})
    assert d.to_dict() == decide({"kv_offloading_size": float(text)}).to_dict()
    assert [c.kv_connector for c in d.connectors] == ["OffloadingConnector"]


@pytest.mark.parametrize("text, message", [("16 GiB", "expected number or null, got `16 GiB`"),
                                           ("nan", "`nan` is not a finite number")])
def test_a_float_option_refuses_what_float_refuses_or_what_vllm_refuses(text, message):
    problem = only_problem({"kv_offloading_size": text})
    assert (problem.code, problem.path, problem.message) == ("input.schema", "/kv_offloading_size", message)


def test_json_options_take_json_text_as_before():
    d = decide({"kv-transfer-config": json.dumps(EXAMPLE), "speculative_config": '{"method": "eagle"}'})
    assert d.outcome == "disabled"


# -- model: vLLM's name, and the facts under model_facts -----------------------------------------

def _hybrid_warning(document):
    d = decide({**document, "kv_transfer_config": EXAMPLE})
    assert d.outcome == "disabled"
    return [(w.code, w.path) for w in d.warnings if w.code == "model.hybrid_kv_unoptimized"]


def test_model_is_vllms_model_name_and_the_facts_go_under_model_facts():
    document = {"model": "google/gemma-3-27b-it", "model_facts": {"layer_kinds": HYBRID}}
    assert _hybrid_warning(document) == [("model.hybrid_kv_unoptimized", "/model_facts/layer_kinds")]
    assert _hybrid_warning({"model-facts": {"layer_kinds": HYBRID}}) == [
        ("model.hybrid_kv_unoptimized", "/model-facts/layer_kinds")]
    assert _hybrid_warning({"model": "google/gemma-3-27b-it"}) == []


def test_model_as_an_object_is_the_facts_as_before():
    assert _hybrid_warning({"model": {"name": "gemma", "layer_kinds": HYBRID}}) == [
        ("model.hybrid_kv_unoptimized", "/model/layer_kinds")]
    # The name alone in the old form, the facts in the new: one model.
    assert _hybrid_warning({"model": {"name": "gemma"}, "model_facts": {"layer_kinds": HYBRID}}) == [
        ("model.hybrid_kv_unoptimized", "/model_facts/layer_kinds")]


def test_chunked_local_attention_from_model_facts():
    document = {"kv_transfer_config": NIXL, "disable_hybrid_kv_cache_manager": False,
                "speculative_config": {"method": "eagle"}}
    for facts in ({"model_facts": {"attention_chunk_size": 8}}, {"model": {"attention_chunk_size": 8}}):
        d = decide({**document, **facts})
        assert (d.outcome, d.errors[0].code) == ("error", "hma.explicit_enable_conflict")


def test_the_facts_given_twice_are_an_input_error():
    problem = only_problem({"model": {"layer_kinds": HYBRID}, "model_facts": {"layer_kinds": HYBRID}})
    assert fields(problem) == (
        "input.duplicate_key", "/model_facts", "the model's facts are given twice: in `model` and in `model_facts`",
        "give them only in `model_facts`, and the model's name as `model`")


def test_problems_in_model_facts_point_into_it():
    problem = only_problem({"model": "x", "model_facts": {"layer_kinds": ["full_attention"], "name": "x"}})
    assert (problem.code, problem.path, problem.message) == ("input.schema", "/model_facts/name", "unknown field `name`")
    problem = only_problem({"model_facts": {"layer_kinds": ["sliding_windw"]}})
    assert (problem.path, problem.hint) == ("/model_facts/layer_kinds/0", "did you mean `sliding_window`?")


@pytest.mark.parametrize("model", [8, ["a"], True])
def test_a_model_that_is_neither_a_name_nor_facts_is_refused(model):
    problem = only_problem({"model": model})
    assert (problem.code, problem.path) == ("input.schema", "/model")
    assert problem.message.startswith("expected string or object or null, got ")


def test_every_shared_conformance_document_with_model_facts_decides_alike_moved():
    # The shared cases write the facts in `model`: the same facts under `model_facts` give the same decision.
    cases = json.loads((REPO / "tests" / "conformance" / "cases.json").read_text(encoding="utf-8"))
    moved = 0
    for case in cases:
        document = case["input"]
        if not isinstance(document.get("model"), dict):
            continue
        rewritten = {k: v for k, v in document.items() if k != "model"}
        rewritten.update(model="some/model", model_facts=document["model"])
        old, new = decide(document).to_dict(), decide(rewritten).to_dict()
        for items in ("warnings", "errors"):
            for item in old[items]:
                item["path"] = item["path"].replace("/model/", "/model_facts/")
        assert new == old, case["id"]
        moved += 1
    assert moved >= 20


# -- an argparse.Namespace as vLLM leaves it ---------------------------------------------------

class KVTransferConfigLike:
    """What vLLM 0.33.0's parser makes of --kv-transfer-config (a pydantic
    dataclass, by TypeAdapter(KVTransferConfig).validate_json): read by attribute."""

    def __init__(self, text):
        self.__dict__.update({"kv_connector": None, "engine_id": "e-1", "kv_buffer_device": "cuda", "kv_role": None,
                              "kv_port": 14579, "kv_connector_extra_config": {}, "kv_connector_module_path": None,
                              "enable_permute_local_kv": False, "kv_load_failure_policy": "fail", "kv_ip": "127.0.0.1"})
        self.__dict__.update(json.loads(text))

    @property
    def is_kv_transfer_instance(self):
        raise AssertionError("a property of the config was called")


def vllm_parser(config_objects: bool) -> argparse.ArgumentParser:
    """`vllm serve`'s parser as far as its shape goes, from the recorded
    option list: the subcommand (dest `subparser`), serve's positional
    `model_tag` and `dispatch_function` (vllm/entrypoints/cli/main.py), and
    every option with its aliases, type and `--no-` form. vLLM 0.33.0 gives
    config options as config objects (``config_objects``) or dicts."""
    parser = argparse.ArgumentParser(prog="vllm")
    serve = parser.add_subparsers(dest="subparser").add_parser("serve")
    serve.add_argument("model_tag", nargs="?")
    serve.set_defaults(dispatch_function=print)
    kinds = {"int": int, "float": float, "str": str, None: str}
    for flag, entry in RECORDED["options"].items():
        names = [flag, *entry["aliases"]]
        if entry["type"] == "bool":
            serve.add_argument(*names, action=argparse.BooleanOptionalAction if entry["no_form"] else "store_true",
                               default=None if entry["no_form"] else False)
        elif entry["type"] == "list":
            serve.add_argument(*names, nargs="+")
        elif entry["type"] == "json":
            as_object = config_objects and flag == "--kv-transfer-config"
            serve.add_argument(*names, type=KVTransferConfigLike if as_object else json.loads)
        else:
            serve.add_argument(*names, type=kinds[entry["type"]])
    serve.set_defaults(model="Qwen/Qwen3-0.6B", kv_offloading_backend="native", port=8000)
    return parser


@pytest.mark.parametrize("config_objects", [False, True], ids=["dicts", "config-objects"])
def test_a_namespace_as_vllms_parser_leaves_it_is_decided(config_objects):
    parser = vllm_parser(config_objects)
    argv = ["serve", "Qwen/Qwen3-8B", "-tp", "2", "--port", "8001", "--max-model-len", "32768"]
    args = parser.parse_args(argv + ["--kv-transfer-config", json.dumps(NIXL)])
    assert len(vars(args)) == 323 and args.enable_prefix_caching is None  # every attribute set, most to None
    d = decide(args)
    assert d.outcome == "enabled"
    assert d.to_dict() == decide({"kv_transfer_config": NIXL}).to_dict()
    args = parser.parse_args(argv + ["--kv-transfer-config", json.dumps(EXAMPLE), "--no-disable-hybrid-kv-cache-manager"])
    d = decide(args)
    assert (d.outcome, d.errors[0].code) == ("error", "hma.connector_unsupported")
    args = parser.parse_args(argv + ["--kv-offloading-size", "8", "--kv-offloading-backend", "lmcache"])
    assert [c.kv_connector for c in decide(args).connectors] == ["LMCacheMPConnector"]
    assert decide(parser.parse_args(["serve", "m"])).to_dict() == decide({}).to_dict()


def test_an_invalid_namespace_points_at_the_option():
    args = vllm_parser(False).parse_args(["serve", "m", "--kv-transfer-config", '{"kv_connector": "NixlConnector"}'])
    problem = only_problem(args)
    assert (problem.code, problem.path) == ("connector.role_missing", "/kv_transfer_config")


def test_an_object_with_vllms_options_as_attributes_is_read_like_a_namespace():
    assert decide(SimpleNamespace(model="m", port=8000, kv_transfer_config=EXAMPLE)).outcome == "disabled"

    class EngineArgsLike:  # vLLM's EngineArgs: its fields are its options
        def __init__(self):
            self.model, self.tensor_parallel_size, self.kv_transfer_config = "m", 2, KVTransferConfigLike(json.dumps(NIXL))

    assert decide(EngineArgsLike()).outcome == "enabled"
    problem = only_problem(SimpleNamespace(kv_transfer_config=NIXL, tensor_parallel_sze=2))
    assert (problem.path, problem.hint) == ("/tensor_parallel_sze", "did you mean `tensor_parallel_size`?")


def test_vllms_engine_args_is_read_with_the_fields_it_declares_beyond_the_options():
    # vLLM 0.33.0's EngineArgs (vllm/engine/arg_utils.py) declares five fields that are no command-line
    # option (model_weights L497, _api_process_count L592, _api_process_rank, enable_mm_processor_stats
    # L766, mamba_config L774); an instance has every field as an attribute.
    extra = [("model_weights", str, ""), ("_api_process_count", int, 1), ("_api_process_rank", int, 0),
             ("enable_mm_processor_stats", bool, False), ("mamba_config", object, None)]
    options = [(dest, object, None) for dest in known_options().by_dest if dest not in ("model", "kv_transfer_config")]
    EngineArgs = dataclasses.make_dataclass(
        "EngineArgs", [("model", str, "m"), ("kv_transfer_config", object, None)] + options + extra)
    assert decide(EngineArgs(kv_transfer_config=KVTransferConfigLike(json.dumps(EXAMPLE)))).outcome == "disabled"
    assert decide(EngineArgs()).to_dict() == decide({}).to_dict()
    # A field no dataclass declares is still a name to check.
    args = EngineArgs(kv_transfer_config=NIXL)
    args.tensor_parallel_sze = 2
    problem = only_problem(args)
    assert (problem.path, problem.hint) == ("/tensor_parallel_sze", "did you mean `tensor_parallel_size`?")


def test_other_objects_are_not_documents():
    problem = only_problem(lambda: None)
    assert (problem.code, problem.message) == ("input.schema", "a deployment document must be an object, got function")


# -- empty and null input --------------------------------------------------------------------

def test_decide_none_is_an_input_error():
    problem = only_problem(None)
    assert fields(problem) == ("input.empty", "", "the document is empty (null)",
                               "give a deployment document; `{}` is a deployment without a connector")


@pytest.mark.parametrize("empty", [{}, argparse.Namespace(), SimpleNamespace()])
def test_an_empty_object_is_a_deployment_without_a_connector(empty):
    d = decide(empty)
    assert (d.outcome, d.hma_enabled, d.connectors) == ("enabled", True, ())


def run_cli(*args, stdin=b"", cwd=None):
    return subprocess.run([sys.executable, "-m", "hma_policy", *args], input=stdin, capture_output=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("name, content, message", [
    ("-", b"", "standard input is empty"),
    ("-", b"  \n\t\n", "standard input is empty"),
    ("-", b"null", "standard input holds no document (it reads as null)"),
    ("empty.json", b"", "`empty.json` is empty"),
    ("null.json", b"null\n", "`null.json` holds no document (it reads as null)"),
    ("null.yaml", b"~\n", "`null.yaml` holds no document (it reads as null)"),
    ("comment.yaml", b"# kv_transfer_config: see below\n", "`comment.yaml` holds no document (it reads as null)"),
    ("bom.json", b"\xef\xbb\xbf", "`bom.json` is empty"),
])
def test_empty_and_null_input_exit_2_in_the_cli(tmp_path, name, content, message):
    if name != "-":
        (tmp_path / name).write_bytes(content)
    result = run_cli("decide", name, "--format", "json", stdin=content if name == "-" else b"", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (error,) = json.loads(result.stdout)["errors"]
    assert (error["code"], error["stage"], error["message"]) == ("input.empty", "input", message)
    result = run_cli("validate", name, stdin=content if name == "-" else b"", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.decode().startswith(f"/: input.empty: {message}")


def test_an_empty_object_still_exits_0_in_the_cli():
    result = run_cli("decide", "-", "--format", "json", stdin=b"{}")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcome"] == "enabled"


# -- the caller's objects (issue 20, items 9 and 11) -------------------------------------------------

class RaisingItems(dict):
    def items(self):
        raise ValueError("items failed")

    def __iter__(self):
        raise ValueError("iteration failed")


class RaisingAttributes:
    def __getattr__(self, name):
        raise ValueError(f"no {name} here")


class RaisingRepr(int):
    def __repr__(self):
        raise ValueError("repr failed")


class Text(str):
    pass


class Number(float):
    pass


@pytest.mark.parametrize("document, failure", [
    (RaisingItems(kv_transfer_config=NIXL), "ValueError: items failed"),
    ({"kv_transfer_config": RaisingItems(NIXL)}, "ValueError: items failed"),
    (RaisingAttributes(), "ValueError: no kv_connector here"),
    (argparse.Namespace(kv_transfer_config=RaisingAttributes()), "ValueError: no kv_connector here"),
], ids=["mapping", "nested-mapping", "object", "namespace-value"])
def test_an_object_that_fails_as_it_is_read_is_input_unreadable(document, failure):
    problem = only_problem(document)
    assert fields(problem) == ("input.unreadable", "", f"the document cannot be read: {failure}",
                               "give plain data: dicts, lists, strings, numbers, booleans and None")


def test_subclasses_of_str_int_and_float_are_read_as_their_values():
    port = {**NIXL, "kv_port": RaisingRepr(14579), "kv_connector": Text("NixlConnector")}
    assert decide({"kv_transfer_config": port}).to_dict() == decide({"kv_transfer_config": {**NIXL, "kv_port": 14579}}).to_dict()
    d = decide({Text("kv_offloading_size"): Number(1.5), "kv_offloading_backend": Text("native")})
    assert d.to_dict() == decide({"kv_offloading_size": 1.5, "kv_offloading_backend": "native"}).to_dict()
    problem = only_problem({"kv_transfer_config": {**NIXL, "engine_id": Text("x" * 17_000_000)}})
    assert (problem.code, problem.path) == ("input.limit", "/kv_transfer_config/engine_id")


# -- audits -------------------------------------------------------------------------------------

def test_an_audit_reports_an_empty_or_null_file_it_was_given_and_skips_one_it_walked_into(tmp_path):
    from hma_policy.audit.run import audit

    for name, content in {"empty.json": "", "null.json": "null", "null.yaml": "~\n---\n", "blank.yaml": "\n"}.items():
        (tmp_path / name).write_text(content)
    named = sorted(str(p) for p in tmp_path.iterdir())
    report = audit(named)
    assert [(p.code, p.file, p.message) for p in report.problems] == [
        ("input.empty", path, f"`{path}` holds no document (it is empty, or reads as null)") for path in named]
    walked = audit([str(tmp_path)])
    assert walked.problems == ()
    assert {f.skipped for f in walked.files} == {"holds no document (it is empty, or reads as null)"}


def test_an_audit_decides_documents_with_vllms_options_and_model_facts_as_decide_does(tmp_path):
    from hma_policy.audit.run import audit

    documents = {
        # One YAML document with `model` as a name would be a vLLM config file, but `model_facts` is no vLLM option.
        "facts.yaml": {"model": "google/gemma-3-27b-it", "model_facts": {"layer_kinds": HYBRID}, "kv_transfer_config": EXAMPLE},
        "options.json": {"model": "Qwen/Qwen3-8B", "port": 8000, "tensor-parallel-size": 2, "kv_transfer_config": NIXL},
    }
    for name, document in documents.items():
        (tmp_path / name).write_text(json.dumps(document))
    report = audit([str(tmp_path)])
    decided = {e.deployment.file.rsplit("/", 1)[-1]: (e.deployment.format, e.decision) for e in report.entries}
    assert decided == {name: ("document", decide(document).to_dict()) for name, document in documents.items()}
    assert decided["facts.yaml"][1]["warnings"][-1]["code"] == "model.hybrid_kv_unoptimized"


def test_an_audit_directive_gives_model_facts_beside_the_commands_model(tmp_path):
    from hma_policy.audit.sources import read_source

    script = tmp_path / "run.sh"
    script.write_text(f"# hma-policy: {{model_facts: {{layer_kinds: [full_attention, sliding_window]}}}}\n"
                      f"vllm serve google/gemma-3-27b-it --kv-transfer-config '{json.dumps(EXAMPLE)}'\n")
    (found,) = read_source(script).deployments
    assert found.document["model_facts"] == {"layer_kinds": HYBRID}
    assert dict(found.origins)["model_facts"] == "line 1: hma-policy directive"
    assert _hybrid_warning({"model": {"name": "google/gemma-3-27b-it"}, "model_facts": {"layer_kinds": HYBRID}}) == [
        ("model.hybrid_kv_unoptimized", "/model_facts/layer_kinds")]
    assert decide(found.document).to_dict() == decide(
        {"model": "google/gemma-3-27b-it", "model_facts": {"layer_kinds": HYBRID}, "kv_transfer_config": EXAMPLE}).to_dict()
