"""The input stage: reading, bounding, normalising and validating a deployment
document. Every invalid document ends in an InputError whose problems carry a
stable code, a JSON Pointer, a one-line message and (where useful) a hint."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

import hma_policy
from hma_policy import InputError, Limits, decide
from hma_policy.core.input import parse_text, read_document

from rulecopy import copy_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}
CHILDREN = "/kv_transfer_config/kv_connector_extra_config/connectors"
ENV_CHUNKED = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"


def multi(*children, **extra):
    return {"kv_transfer_config": {
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": list(children), **extra},
    }}


def problems_of(document, **kwargs):
    with pytest.raises(InputError) as info:
        decide(document, **kwargs)
    return info.value.problems


def only_problem(document, **kwargs):
    problems = problems_of(document, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


def parse_problem(text, **kwargs):
    with pytest.raises(InputError) as info:
        parse_text(text, **kwargs)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


def read_problem(path):
    with pytest.raises(InputError) as info:
        read_document(path)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


def fields(problem):
    return problem.code, problem.path, problem.message, problem.hint


# -- unknown fields and did-you-mean -----------------------------------------

def test_unknown_field_in_kv_transfer_config_suggests_the_field():
    problem = only_problem({"kv_transfer_config": {"kv_conector": "NixlConnector", "kv_role": "kv_both"}})
    assert fields(problem) == (
        "input.schema", "/kv_transfer_config/kv_conector",
        "unknown field `kv_conector`", "did you mean `kv_connector`?",
    )


@pytest.mark.parametrize("release", ["0.10.0", "0.33.0"])
def test_vllm_use_v1_that_is_no_integer_is_refused_not_an_internal_error(release):
    # VLLM_USE_V1 was read by the facts but not declared in the schema: "abc" reached int() and
    # `hma-policy decide` ended in "internal error: ValueError" (found by a survey of
    # kubernetes-sigs/inference-perf, whose V0-engine demo sets VLLM_USE_V1=0).
    with pytest.raises(InputError) as info:
        decide({"vllm_version": release, "env": {"VLLM_USE_V1": "abc"}})
    (problem,) = info.value.problems
    assert (problem.code, problem.path, problem.message) == (
        "input.schema", "/env/VLLM_USE_V1", "expected an integer (vLLM reads this switch with int()), got `abc`")
    assert decide({"vllm_version": "0.10.0", "env": {"VLLM_USE_V1": "0"}}).outcome == "disabled"


def test_unknown_top_level_key_suggests_the_key():
    problem = only_problem({"kv_transfer_confg": NIXL})
    assert fields(problem) == (
        "input.schema", "/kv_transfer_confg",
        "unknown field `kv_transfer_confg`", "did you mean `kv_transfer_config`?",
    )


def test_unknown_top_level_key_without_a_close_match_has_no_hint():
    problem = only_problem({"gpu_count": 8})
    assert fields(problem) == ("input.schema", "/gpu_count", "unknown field `gpu_count`", None)


def test_unknown_key_inside_a_multiconnector_child():
    child = {**NIXL, "kv_rol": "kv_both"}
    problem = only_problem(multi(NIXL, child))
    assert fields(problem) == (
        "input.schema", f"{CHILDREN}/1/kv_rol", "unknown field `kv_rol`", "did you mean `kv_role`?",
    )


# -- kv_role -----------------------------------------------------------------

ROLE_ENUM = "is not one of `kv_producer`, `kv_consumer`, `kv_both`"


def test_bad_kv_role_lists_the_choices_and_suggests_the_close_one():
    problem = only_problem({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_Both"}})
    assert fields(problem) == (
        "input.schema", "/kv_transfer_config/kv_role", f"`kv_Both` {ROLE_ENUM}", "did you mean `kv_both`?",
    )


def test_bad_kv_role_without_a_close_match_has_no_hint():
    problem = only_problem({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "banana"}})
    assert fields(problem) == ("input.schema", "/kv_transfer_config/kv_role", f"`banana` {ROLE_ENUM}", None)


def test_bad_kv_role_in_a_child():
    problem = only_problem(multi(NIXL, {"kv_connector": "NixlConnector", "kv_role": "kv_Both"}))
    assert fields(problem) == (
        "input.schema", f"{CHILDREN}/1/kv_role", f"`kv_Both` {ROLE_ENUM}", "did you mean `kv_both`?",
    )


ROLE_MISSING = "kv_role must be set when kv_connector is set"


def test_missing_kv_role_with_a_connector_is_role_missing_at_the_config_object():
    problem = only_problem({"kv_transfer_config": {"kv_connector": "NixlConnector"}})
    assert fields(problem) == ("connector.role_missing", "/kv_transfer_config", ROLE_MISSING, None)


def test_missing_kv_role_in_a_child_is_role_missing_at_the_child():
    problem = only_problem(multi(NIXL, {"kv_connector": "NixlConnector"}))
    assert fields(problem) == ("connector.role_missing", f"{CHILDREN}/1", ROLE_MISSING, None)


@pytest.mark.parametrize("where", ["top", "child"])
def test_null_kv_role_with_a_connector_is_role_missing(where):
    config = {"kv_connector": "NixlConnector", "kv_role": None}
    document, base = ({"kv_transfer_config": config}, "/kv_transfer_config") if where == "top" \
        else (multi(NIXL, config), f"{CHILDREN}/1")
    problem = only_problem(document)
    assert problem.code == "connector.role_missing"
    assert problem.message == ROLE_MISSING
    assert problem.path in (base, base + "/kv_role")


def test_null_kv_role_without_a_connector_is_accepted():
    # KVTransferConfig() with nothing set is legal; vLLM then fails on the missing name.
    d = decide({"kv_transfer_config": {"kv_role": None}})
    assert d.outcome == "error"
    assert d.errors[0].code == "connector.name_missing"


# -- field types ---------------------------------------------------------------

@pytest.mark.parametrize("where", ["top", "child"])
def test_engine_id_as_int_is_a_schema_error_that_names_the_expected_type(where):
    config = {**NIXL, "engine_id": 5}
    document, base = ({"kv_transfer_config": config}, "/kv_transfer_config") if where == "top" \
        else (multi(NIXL, config), f"{CHILDREN}/1")
    problem = only_problem(document)
    assert problem.code == "input.schema"
    assert problem.path == base + "/engine_id"
    assert "`5`" in problem.message
    # engine_id is `str | None`: the message must say a string is expected.
    assert "string" in problem.message, problem.message


def test_kv_connector_as_int_names_the_expected_type():
    problem = only_problem({"kv_transfer_config": {"kv_connector": 5, "kv_role": "kv_both"}})
    assert problem.code == "input.schema"
    assert problem.path == "/kv_transfer_config/kv_connector"
    assert "string" in problem.message, problem.message


def test_wrong_type_of_a_kv_transfer_config_field_is_reported_at_the_field():
    # "80" is not wrong: vLLM's pydantic reads it as 80 (tests/test_lax.py).
    problem = only_problem({"kv_transfer_config": {**NIXL, "kv_port": "eighty"}})
    assert problem.code == "input.schema"
    assert problem.path == "/kv_transfer_config/kv_port"
    assert problem.message == "expected integer, got `eighty`"


def test_kv_transfer_config_of_the_wrong_type_names_object():
    problem = only_problem({"kv_transfer_config": []})
    assert problem.code == "input.schema"
    assert problem.path == "/kv_transfer_config"
    assert "object" in problem.message, problem.message


# -- MultiConnector children -----------------------------------------------------

@pytest.mark.parametrize("child, shown", [("NixlConnector", "`NixlConnector`"), (5, "`5`"), (None, "`null`")])
def test_non_dict_child_is_a_schema_error_at_the_child(child, shown):
    problem = only_problem(multi(NIXL, child))
    assert fields(problem) == ("input.schema", f"{CHILDREN}/1", f"expected object, got {shown}", None)


def test_connectors_as_a_non_empty_dict_is_a_schema_error_that_asks_for_a_list():
    problem = only_problem({"kv_transfer_config": {
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": {"a": NIXL}},
    }})
    assert problem.code == "input.schema"
    assert problem.path == CHILDREN
    # vLLM iterates the dict's keys and fails on each string: the fix is a list.
    assert "array" in problem.message or "list" in problem.message, problem.message


def test_connectors_null_in_a_multiconnector_is_a_schema_error():
    problem = only_problem({"kv_transfer_config": {
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": None},
    }})
    assert fields(problem) == (
        "input.schema", CHILDREN, "MultiConnector `connectors` must be a list of connector configs, got `null`", None,
    )


@pytest.mark.parametrize("empty", [{}, "", []])
def test_empty_connectors_are_accepted_and_give_no_children(empty):
    d = decide({"kv_transfer_config": {
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": empty},
    }})
    assert [c.path for c in d.connectors] == ["/kv_transfer_config"]
    assert d.connectors[0].rule == "node.support.multi_no_children"
    assert d.connectors[0].supports_hma is False
    assert d.outcome == "disabled"
    assert [w.code for w in d.warnings] == ["hma.auto_disabled"]


# -- spellings -----------------------------------------------------------------

KEBAB_CASES = [
    ("kv-transfer-config", "kv_transfer_config", EXAMPLE, {}),
    ("disable-hybrid-kv-cache-manager", "disable_hybrid_kv_cache_manager", True, {"kv_transfer_config": NIXL}),
    ("kv-offloading-size", "kv_offloading_size", 4, {}),
    ("kv-offloading-backend", "kv_offloading_backend", "lmcache", {"kv_offloading_size": 4, "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}}),
    ("speculative-config", "speculative_config", {"method": "eagle"},
     {"model": {"attention_chunk_size": 8}, "disable_hybrid_kv_cache_manager": False}),
    ("hisparse-config", "hisparse_config", {}, {"platform": {"is_cuda": False}}),
    ("kv-events-config", "kv_events_config", {"enable_kv_cache_events": True}, {}),
]


@pytest.mark.parametrize("kebab, snake, value, rest", KEBAB_CASES, ids=[c[0] for c in KEBAB_CASES])
def test_kebab_case_top_level_keys_behave_like_snake_case(kebab, snake, value, rest):
    by_kebab = decide({**rest, kebab: value})
    by_snake = decide({**rest, snake: value})
    # The same decision, with its paths pointing into each document as spelled.
    as_snake = json.loads(json.dumps(by_kebab.to_dict()).replace(f'"/{kebab}', f'"/{snake}'))
    assert as_snake == by_snake.to_dict()
    if snake != "kv_events_config":  # the only one that plays no role in 0.33.0
        assert by_kebab.to_dict() != decide(rest).to_dict(), "the kebab-case key was ignored"


@pytest.mark.parametrize("kebab, snake, value", [
    ("kv-transfer-config", "kv_transfer_config", NIXL),
    ("disable-hybrid-kv-cache-manager", "disable_hybrid_kv_cache_manager", True),
])
@pytest.mark.parametrize("kebab_first", [True, False])
def test_both_spellings_at_once_is_a_duplicate_key(kebab, snake, value, kebab_first):
    document = {kebab: value, snake: value} if kebab_first else {snake: value, kebab: value}
    problem = only_problem(document)
    assert problem.code == "input.duplicate_key"
    # The pointer names the second spelling, as the user wrote it.
    second = kebab if kebab_first is False else snake
    assert problem.path == "/" + second
    assert f"`{kebab}`" in problem.message and f"`{snake}`" in problem.message
    assert problem.message.startswith(f"`{snake}` is given twice")


@pytest.mark.parametrize("text", [
    "kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}\n"
    "kv_transfer_config: {kv_connector: ExampleConnector, kv_role: kv_both}\n",
    '{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_role": "kv_producer"}}',
])
def test_a_key_given_twice_in_the_text_is_not_silently_overwritten(text):
    # YAML requires unique keys; taking the last one silently changes the decision.
    with pytest.raises(InputError) as info:
        decide(parse_text(text))
    assert [p.code for p in info.value.problems] in (["input.duplicate_key"], ["input.parse"])


# -- kv_transfer_config as a JSON string (vllm serve --kv-transfer-config '...') ----

def test_kv_transfer_config_as_a_json_string_works():
    as_string = decide({"kv_transfer_config": json.dumps(EXAMPLE)})
    assert as_string == decide({"kv_transfer_config": EXAMPLE})
    assert as_string.outcome == "disabled"
    assert decide({"kv-transfer-config": json.dumps(NIXL)}).outcome == "enabled"


def test_kv_transfer_config_json_string_is_validated_like_an_object():
    problem = only_problem({"kv_transfer_config": json.dumps({"kv_conector": "NixlConnector", "kv_role": "kv_both"})})
    assert fields(problem) == (
        "input.schema", "/kv_transfer_config/kv_conector",
        "unknown field `kv_conector`", "did you mean `kv_connector`?",
    )


def test_broken_json_string_is_a_parse_error_at_kv_transfer_config():
    problem = only_problem({"kv_transfer_config": '{"kv_connector": '})
    assert problem.code == "input.parse"
    assert problem.path == "/kv_transfer_config"
    assert problem.message.startswith("`kv_transfer_config` is not valid JSON: ")
    assert "\n" not in problem.message


# -- environment switches --------------------------------------------------------

@pytest.mark.parametrize("value", ["0", 0, " 0 ", "+0", "00"])
def test_integer_switch_spellings_of_zero_behave_the_same(value):
    base = {"model": {"attention_chunk_size": 8}}
    d = decide({**base, "env": {ENV_CHUNKED: value}})
    reference = decide({**base, "env": {ENV_CHUNKED: 0}})
    assert d == reference
    assert d.outcome == "disabled"
    assert [w.code for w in d.warnings] == ["attention.chunked_local_latency"]
    assert [w.path for w in d.warnings] == [f"/env/{ENV_CHUNKED}"]


@pytest.mark.parametrize("value", ["1", 1, " 1 "])
def test_integer_switch_one_keeps_hma_on(value):
    d = decide({"model": {"attention_chunk_size": 8}, "env": {ENV_CHUNKED: value}})
    assert d.outcome == "enabled"
    assert d.warnings == ()


@pytest.mark.parametrize("value", ["true", "yes", "0.5", ""])
def test_integer_switch_that_int_cannot_read_is_a_schema_error(value):
    problem = only_problem({"model": {"attention_chunk_size": 8}, "env": {ENV_CHUNKED: value}})
    assert problem.code == "input.schema"
    assert problem.path == f"/env/{ENV_CHUNKED}"
    assert f"`{value}`" in problem.message


# -- model and platform -----------------------------------------------------------

def test_layer_kind_typo_is_an_enum_error_with_a_suggestion():
    problem = only_problem({"model": {"layer_kinds": ["full_attention", "sliding_windw"]}})
    assert fields(problem) == (
        "input.schema", "/model/layer_kinds/1",
        "`sliding_windw` is not one of `full_attention`, `sliding_window`, `chunked_local`, `mamba`",
        "did you mean `sliding_window`?",
    )


def test_platform_rejects_extra_keys():
    problem = only_problem({"platform": {"supports_hybrid_kv_cache": True, "gpu": "h100"}})
    assert fields(problem) == ("input.schema", "/platform/gpu", "unknown field `gpu`", None)


# -- all problems at once -----------------------------------------------------------

def test_independent_problems_in_different_sections_are_all_reported_sorted_by_path():
    problems = problems_of({
        "platform": {"gpu": "h100"},
        "model": {"layer_kinds": ["sliding_windw"]},
        "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_Both"},
    })
    assert [(p.code, p.path) for p in problems] == [
        ("input.schema", "/kv_transfer_config/kv_role"),
        ("input.schema", "/model/layer_kinds/0"),
        ("input.schema", "/platform/gpu"),
    ]


def test_independent_problems_inside_kv_transfer_config_are_all_reported():
    problems = problems_of({"kv_transfer_config": {
        "kv_connector": "NixlConnector", "kv_role": "kv_Both", "kv_port": "x", "kv_load_failure_policy": "recompte",
    }})
    assert [(p.code, p.path) for p in problems] == [
        ("input.schema", "/kv_transfer_config/kv_load_failure_policy"),
        ("input.schema", "/kv_transfer_config/kv_port"),
        ("input.schema", "/kv_transfer_config/kv_role"),
    ]


def test_independent_problems_in_two_children_are_all_reported():
    problems = problems_of(multi(
        NIXL,
        {**NIXL, "kv_conector": "x"},
        {"kv_connector": "NixlConnector", "kv_role": "kv_Both"},
    ))
    assert [(p.code, p.path) for p in problems] == [
        ("input.schema", f"{CHILDREN}/1/kv_conector"),
        ("input.schema", f"{CHILDREN}/2/kv_role"),
    ]


# -- limits -----------------------------------------------------------------------

def nest(depth):
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_depth_limit():
    problem = only_problem({"metadata": nest(10)}, limits=Limits(max_depth=5))
    assert fields(problem) == (
        "input.limit", "/metadata/a/a/a/a/a", "the document is nested deeper than 5 levels", None,
    )
    assert decide({"metadata": nest(3)}, limits=Limits(max_depth=5)).outcome == "enabled"


def test_default_depth_limit_stops_a_deep_document_without_recursion():
    problem = only_problem({"metadata": nest(50_000)})
    assert problem.code == "input.limit"
    assert problem.path.startswith("/metadata/a/a")


def test_string_length_limit():
    problem = only_problem({"name": "x" * 50}, limits=Limits(max_string_length=10))
    assert fields(problem) == ("input.limit", "/name", "a string is longer than 10 characters", None)


def test_depth_limit_applies_inside_a_json_string_field():
    text = json.dumps({**NIXL, "kv_connector_extra_config": nest(10)})
    problem = only_problem({"kv_transfer_config": text}, limits=Limits(max_depth=5))
    assert fields(problem) == (
        "input.limit", "/kv_transfer_config/kv_connector_extra_config/a/a/a/a",
        "the document is nested deeper than 5 levels", None,
    )


def test_connector_count_limit():
    problem = only_problem(multi(NIXL, NIXL, NIXL, NIXL), limits=Limits(max_connectors=3))
    assert fields(problem) == (
        "input.limit", "/kv_transfer_config", "the connector graph has more than 3 connectors", None,
    )
    assert decide(multi(NIXL, NIXL), limits=Limits(max_connectors=3)).outcome == "enabled"


def test_limits_is_frozen():
    with pytest.raises(AttributeError):
        Limits().max_depth = 1  # type: ignore[misc]


# -- YAML ----------------------------------------------------------------------

def test_yaml_aliases_are_rejected():
    problem = parse_problem("kv_transfer_config: &k {kv_connector: NixlConnector, kv_role: kv_both}\nmetadata: {copy: *k}\n")
    assert problem.code == "input.parse"
    # The anchor itself is refused, before any alias can use it.
    assert problem.message == "invalid YAML in <document> at line 1, column 21: YAML anchors and aliases are not allowed"


def test_yaml_alias_bomb_is_rejected_quickly(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    start = time.monotonic()
    problem = read_problem(path)
    assert time.monotonic() - start < 2
    assert problem.code == "input.parse"
    assert problem.message == f"invalid YAML in `{path}` at line 1, column 5: YAML anchors and aliases are not allowed"


def test_two_yaml_documents_are_a_parse_error(tmp_path):
    problem = parse_problem("kv_transfer_config: null\n---\nkv_transfer_config: null\n")
    assert problem.code == "input.parse"
    assert problem.message == "invalid YAML in <document> at line 2, column 1: more than one YAML document; one is expected"
    path = tmp_path / "two.yaml"
    path.write_text("name: a\n---\nname: b\n", encoding="utf-8")
    assert read_problem(path).code == "input.parse"


def test_yaml_python_tags_are_never_constructed(tmp_path):
    canary = tmp_path / "constructed"
    texts = [
        f"name: !!python/object/apply:builtins.open [{json.dumps(str(canary))}, w]\n",
        f"!!python/object/apply:builtins.open [{json.dumps(str(canary))}, w]\n",
        "metadata: !!python/object:collections.OrderedDict {}\n",
        "metadata: !!python/name:os.system\n",
    ]
    for text in texts:
        problem = parse_problem(text)
        assert problem.code == "input.parse"
        assert "\n" not in problem.message
    assert not canary.exists()


@pytest.mark.parametrize("text, path, value", [
    ("name: 2024-01-01\n", ("name",), "2024-01-01"),
    ("metadata: {when: 2024-01-01 10:00:00}\n", ("metadata", "when"), "2024-01-01 10:00:00"),
    ("kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both, engine_id: 2024-01-01}\n",
     ("kv_transfer_config", "engine_id"), "2024-01-01"),
])
def test_yaml_timestamps_stay_strings(text, path, value):
    # JSON has no dates: a YAML timestamp is read as the string it is written as.
    document = parse_text(text)
    node = document
    for key in path:
        node = node[key]
    assert node == value and isinstance(node, str)
    decide(document)  # valid: no InputError


def test_yaml_scalars_read_again_keep_their_tags_and_quotes():
    # Short scalars are read once and kept by (tag, text, quoting): the same
    # text tagged or quoted otherwise is another value, wherever it comes.
    for _ in range(2):
        document = parse_text("metadata: {a: 1, b: '1', c: !!str 1, d: 1, e: true, f: 'true', g: ~, h: '~', i: 1.5}\n")
        assert document["metadata"] == {"a": 1, "b": "1", "c": "1", "d": 1, "e": True, "f": "true", "g": None,
                                        "h": "~", "i": 1.5}
    # A scalar that breaks a rule is refused each time it is read, never taken from what was kept.
    for _ in range(2):
        assert parse_problem("metadata: {a: !!python/name:os.system }\n").code == "input.parse"
        assert parse_problem("metadata: {a: !!timestamp 2024-01-01}\n").code == "input.parse"


def test_yaml_non_string_key_is_an_input_error():
    problem = parse_problem("metadata: {1: 2}\n")
    assert problem.code == "input.parse"
    assert problem.message == "invalid YAML in <document> at line 1, column 12: mapping keys must be strings, got `1`"
    # A collection as a key (what an unrendered `{{ ... }}` template is) is located too.
    problem = parse_problem("metadata:\n  {{ .Values.x }}: 1\n")
    assert problem.code == "input.parse"
    assert problem.message == ("invalid YAML in <document> at line 2, column 3: mapping keys must be strings, "
                               "got a mapping or a list")


def test_read_document_reads_yaml_and_json_files(tmp_path):
    (tmp_path / "d.yaml").write_text("kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}\n", encoding="utf-8")
    (tmp_path / "d.json").write_text(json.dumps({"kv_transfer_config": NIXL}), encoding="utf-8")
    assert read_document(tmp_path / "d.yaml") == read_document(tmp_path / "d.json") == {"kv_transfer_config": NIXL}


def test_non_utf8_file_is_an_encoding_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    problem = read_problem(path)
    assert fields(problem) == ("input.encoding", "", f"`{path}` is not UTF-8 text (byte 9)", None)


def test_missing_file_is_a_read_error(tmp_path):
    path = tmp_path / "nope.yaml"
    problem = read_problem(path)
    assert problem.code == "input.read"
    assert problem.message.startswith(f"cannot read `{path}`: ")


def test_a_directory_is_a_read_error(tmp_path):
    assert read_problem(tmp_path).code == "input.read"


def test_broken_json_file_is_a_parse_error_with_its_location(tmp_path):
    path = tmp_path / "d.json"
    path.write_text('{"kv_transfer_config": }', encoding="utf-8")
    problem = read_problem(path)
    assert problem.code == "input.parse"
    assert problem.message.startswith(f"invalid JSON in `{path}` at line 1, column 24: ")


# -- non-JSON values -------------------------------------------------------------

@pytest.mark.parametrize("value, kind", [({1, 2}, "set"), (b"x", "bytes"), (object(), "object")])
def test_non_json_python_values_are_type_errors(value, kind):
    problem = only_problem({"metadata": {"v": value}})
    assert fields(problem) == ("input.type", "/metadata/v", f"`{kind}` values are not JSON data", None)


def test_a_non_object_document_is_a_schema_error():
    problem = only_problem([])
    assert fields(problem) == ("input.schema", "", "a deployment document must be an object, got list", None)


@pytest.mark.parametrize("text", [
    '{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": ' + "9" * 5000 + "}}",
    "kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both, kv_port: " + "9" * 5000 + "}\n",
])
def test_an_integer_too_long_to_parse_is_an_input_error(text):
    # Python refuses int('9' * 5000) with a plain ValueError (sys.set_int_max_str_digits).
    with pytest.raises(InputError) as info:
        decide(parse_text(text))
    assert info.value.problems[0].code in ("input.parse", "input.limit")


def test_a_huge_integer_value_is_an_input_error_not_a_crash():
    with pytest.raises(InputError) as info:
        decide({"model": {"attention_chunk_size": 10 ** 5000}})
    (problem,) = info.value.problems
    assert (problem.code, problem.path) == ("input.limit", "/model/attention_chunk_size")
    assert problem.message == "an integer is too large"


@pytest.mark.parametrize("value", ["Nixl\x00", "Nixl\x1b[2J", "Nixl\nConnector"])
def test_control_characters_in_user_values_never_reach_messages(value):
    # A message is one printable line: user values are shown escaped, never raw
    # (a raw ESC sequence would drive the user's terminal). Rule messages already
    # do this (see the next test); schema messages must too.
    problem = only_problem({"kv_transfer_config": {"kv_connector": value, "kv_role": "kv_both"}})
    assert (problem.code, problem.path) == ("input.schema", "/kv_transfer_config/kv_connector")
    assert problem.message.isprintable(), repr(problem.message)


def test_control_characters_in_unknown_keys_never_reach_messages():
    problem = only_problem({"bad\x1b[2Jkey": 1})
    assert problem.code == "input.schema"
    assert problem.message.isprintable(), repr(problem.message)


def test_rule_messages_show_unprintable_user_values_escaped():
    d = decide({"kv_transfer_config": {"kv_connector": "Nixl\u202e", "kv_role": "kv_both"}})
    assert d.errors[0].code == "connector.unknown"
    assert d.errors[0].message.isprintable()


def test_unpaired_surrogate_is_an_encoding_error():
    problem = only_problem({"kv_transfer_config": {"kv_connector": "Nixl\ud800", "kv_role": "kv_both"}})
    assert (problem.code, problem.path) == ("input.encoding", "/kv_transfer_config/kv_connector")


# -- vLLM's own config objects, read by attribute ------------------------------------

class FakeKVTransferConfig:
    """Stands in for vllm.config.KVTransferConfig (the same attribute names)."""

    def __init__(self, **overrides):
        self.kv_connector = None
        self.engine_id = "engine-1"
        self.kv_buffer_device = "cuda"
        self.kv_role = None
        self.kv_port = 14579
        self.kv_connector_extra_config = {}
        self.kv_connector_module_path = None
        self.enable_permute_local_kv = False
        self.kv_load_failure_policy = "fail"
        self.__dict__.update(overrides)

    @property
    def is_kv_transfer_instance(self):  # a real property; never needed
        raise AssertionError("the engine must not call KVTransferConfig's properties")


class Namespace:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def fake_vllm_config(ktc=None, *, disable=None, offloading_size=None, backend=None, chunk=None, method=None):
    return Namespace(
        kv_transfer_config=ktc,
        scheduler_config=Namespace(disable_hybrid_kv_cache_manager=disable, max_model_len=16),
        cache_config=Namespace(kv_offloading_size=offloading_size, kv_offloading_backend=backend),
        model_config=Namespace(attention_chunk_size=chunk, model="some/model"),
        speculative_config=None if method is None else Namespace(method=method),
    )


@pytest.fixture
def vllm_tripwire(tmp_path, monkeypatch):
    """A fake `vllm` package on sys.path that records any import of it."""
    marker = tmp_path / "vllm-imported"
    package = tmp_path / "tripwire" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(package.parent))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    yield marker
    assert not marker.exists(), "vllm was imported"
    assert "vllm" not in sys.modules


@pytest.mark.parametrize("config, outcome", [(NIXL, "enabled"), (EXAMPLE, "disabled")])
def test_kv_transfer_config_object_is_read_by_attribute(vllm_tripwire, config, outcome):
    from_object = decide(FakeKVTransferConfig(**config))
    from_dict = decide({"kv_transfer_config": {**config, "engine_id": "engine-1", "kv_buffer_device": "cuda"}})
    assert from_object.outcome == outcome
    assert from_object == from_dict


def test_multiconnector_object_children_are_read(vllm_tripwire):
    ktc = FakeKVTransferConfig(kv_connector="MultiConnector", kv_role="kv_both",
                               kv_connector_extra_config={"connectors": [NIXL, EXAMPLE]})
    d = decide(ktc)
    assert d.outcome == "disabled"
    assert [(c.kv_connector, c.supports_hma) for c in d.connectors] == [
        ("MultiConnector", False), ("NixlConnector", True), ("ExampleConnector", False)]


def test_invalid_kv_transfer_config_object_is_an_input_error(vllm_tripwire):
    problem = only_problem(FakeKVTransferConfig(kv_connector="NixlConnector", kv_role="kv_Both"))
    assert (problem.code, problem.path, problem.hint) == ("input.schema", "/kv_transfer_config/kv_role", "did you mean `kv_both`?")


def test_vllm_config_object_is_read_by_attribute(vllm_tripwire):
    nixl = FakeKVTransferConfig(**NIXL)
    assert decide(fake_vllm_config(nixl)).outcome == "enabled"
    assert decide(fake_vllm_config(FakeKVTransferConfig(**EXAMPLE))).outcome == "disabled"
    # scheduler_config: an explicit disable is respected.
    d = decide(fake_vllm_config(nixl, disable=True))
    assert (d.outcome, d.hma_enabled, d.warnings) == ("disabled", False, ())
    # model_config + speculative_config: chunked local attention with EAGLE under explicit enable.
    d = decide(fake_vllm_config(nixl, disable=False, chunk=8, method="eagle"))
    assert d.outcome == "error"
    assert d.errors[0].code == "hma.explicit_enable_conflict"
    assert decide(fake_vllm_config(nixl, disable=False, chunk=8, method="ngram")).outcome == "enabled"
    # cache_config: --kv-offloading-size synthesises an OffloadingConnector.
    d = decide(fake_vllm_config(None, offloading_size=2.0))
    assert d.outcome == "enabled"
    assert [c.kv_connector for c in d.connectors] == ["OffloadingConnector"]
    d = decide(fake_vllm_config(None, offloading_size=2.0, backend="lmcache"))
    assert [c.kv_connector for c in d.connectors] == ["LMCacheMPConnector"]
    assert decide(fake_vllm_config(None)).connectors == ()


# -- kv_connector_module_path is data: never imported --------------------------------

@pytest.fixture
def canary(tmp_path, monkeypatch):
    """A module on sys.path that records being imported."""
    name = f"hma_canary_{tmp_path.name.replace('-', '_')}"
    marker = tmp_path / "canary-imported"
    (tmp_path / f"{name}.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported')\n"
        "class CanaryConnector:\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    assert not marker.exists(), "kv_connector_module_path was imported"
    assert name not in sys.modules


def canary_config(module):
    return {"kv_connector": "CanaryConnector", "kv_role": "kv_both", "kv_connector_module_path": module}


def test_undeclared_module_path_is_never_imported(canary):
    d = decide({"kv_transfer_config": canary_config(canary)})
    assert d.outcome == "undetermined"
    assert [w.code for w in d.warnings] == ["connector.capability_unknown"]
    assert hma_policy.supports_hma(canary_config(canary)) is None
    assert decide(multi(NIXL, canary_config(canary))).outcome == "undetermined"


def test_declared_module_path_is_never_imported(canary, tmp_path):
    rules = tmp_path / "rules"
    copy_rules(rules)
    registry = rules / "connectors.yaml"
    registry.write_text(registry.read_text(encoding="utf-8") + (
        "  CanaryConnector:\n"
        "    registered: false\n"
        "    supports_hma: true\n"
        f"    module_path: {canary}\n"
    ), encoding="utf-8")
    policy = hma_policy.load_policy(rules)
    try:
        d = decide({"kv_transfer_config": canary_config(canary)}, policy=policy)
        assert d.outcome == "enabled"
        assert d.connectors[0].supports_hma is True
        assert hma_policy.supports_hma(canary_config(canary), policy=policy) is True
        assert decide(multi(NIXL, canary_config(canary)), policy=policy).outcome == "enabled"
        # Not registered: reachable only through its module path.
        d = decide({"kv_transfer_config": {"kv_connector": "CanaryConnector", "kv_role": "kv_both"}}, policy=policy)
        assert d.outcome == "error"
        assert d.errors[0].code == "connector.unknown"
    finally:
        policy.close()


# -- message style ---------------------------------------------------------------------

STYLE_CASES = [
    {"kv_transfer_config": {"kv_conector": "NixlConnector", "kv_role": "kv_both"}},
    {"kv_transfer_confg": NIXL},
    {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_Both"}},
    {"kv_transfer_config": {"kv_connector": "NixlConnector"}},
    {"kv_transfer_config": '{"kv_connector": '},
    {"kv-transfer-config": NIXL, "kv_transfer_config": NIXL},
    {"env": {ENV_CHUNKED: "true"}},
    {"model": {"layer_kinds": ["sliding_windw"], "attention_chunk_size": 0}},
    {"platform": {"gpu": "h100"}},
    {"kv_offloading_size": -1, "kv_offloading_backend": "lmcach"},
    {"metadata": {"when": {1, 2}}},
    {"disable_hybrid_kv_cache_manager": "yes"},  # "true" reads as vLLM reads it
    [],
]


@pytest.mark.parametrize("document", STYLE_CASES, ids=range(len(STYLE_CASES)))
def test_problem_messages_follow_the_style(document):
    for problem in problems_of(document):
        message = problem.message
        assert message and "\n" not in message
        assert not message[0].isupper(), message
        assert not message.endswith("."), message
        assert re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", problem.code)
        assert problem.path == "" or problem.path.startswith("/")
        if problem.hint:
            assert problem.hint not in message


# -- JSON text: orjson where it provably reads as the standard parser --------------
# document._json_loads takes orjson's parse only where it must equal the
# standard parser's with the duplicate-key hook (see _orjson_loads); these
# hold it to that, above all for repeated keys, which orjson keeps silently.

def _standard(text: str):
    """The parse of record: the standard parser, a repeated key refused."""
    def pairs(items):
        out = {}
        for key, value in items:
            if key in out:
                raise KeyError(key)
            out[key] = value
        return out
    try:
        return "ok", repr(json.loads(text, object_pairs_hook=pairs))
    except KeyError as exc:
        return "input.duplicate_key", exc.args[0]
    except json.JSONDecodeError:
        return "input.parse", None
    except (RecursionError, ValueError):
        return "input.limit", None


def _ours(text: str):
    try:
        return "ok", repr(parse_text(text, fmt="json"))
    except InputError as exc:
        problem = exc.problems[0]
        key = re.match(r"key `(.*)` appears twice", problem.message, re.S)
        return problem.code, key.group(1) if key else None


@pytest.mark.parametrize("text, expected", [
    # A repeated key whose lost colon a colon in a string would make up for, were
    # escapes not counted out: \u003a is a colon in the value, not in the text.
    ('{"a": 1, "a": "\\u003a"}', ("input.duplicate_key", "a")),
    ('{"a:": 1, "a:": 2}', ("input.duplicate_key", "a:")),
    ('{"u": "redis://h:6379", "u": "x"}', ("input.duplicate_key", "u")),
    ('{"a": {"b": 1, "b": 2}}', ("input.duplicate_key", "b")),
    ('[{"a": 1}, {"a": 1}]', ("ok", "[{'a': 1}, {'a': 1}]")),
    ('{"url": "redis://h:6379", "n": 1}', ("ok", "{'url': 'redis://h:6379', 'n': 1}")),
    ('{"a\\u003a": "\\u003a"}', ("ok", "{'a:': ':'}")),
    # What orjson reads another way or not at all.
    ('{"n": 18446744073709551616}', ("ok", "{'n': 18446744073709551616}")),
    ('{"n": -9223372036854775809}', ("ok", "{'n': -9223372036854775809}")),
    ('{"n": 1e400}', ("ok", "{'n': inf}")),
    ('{"n": NaN}', ("ok", "{'n': nan}")),
    ('{"s": "\\ud800"}', ("ok", "{'s': '\\ud800'}")),
    ('{"n": 1.0, "m": 2}', ("ok", "{'n': 1.0, 'm': 2}")),
])
def test_json_text_reads_as_the_standard_parser_reads_it(text, expected):
    assert _standard(text) == expected
    assert _ours(text) == expected


def _json_texts():
    from hypothesis import strategies as st

    def string(chars):
        # Each character raw or as a \u escape; quotes and backslashes escaped.
        def render(pairs):
            out = []
            for ch, escaped in pairs:
                if escaped or ch in '"\\' or ch < " ":
                    out.append("\\u%04x" % ord(ch))
                else:
                    out.append(ch)
            return '"' + "".join(out) + '"'
        return st.lists(st.tuples(chars, st.booleans()), max_size=4).map(render)

    keys = string(st.sampled_from("ab:"))
    scalars = st.one_of(
        string(st.sampled_from('ab:"\\é\n')),
        st.integers(min_value=-2**70, max_value=2**70).map(str),
        st.sampled_from(["1.5", "-0", "-0.0", "1e400", "NaN", "true", "null", '"\\ud800"']),
    )

    def containers(children):
        members = st.lists(st.tuples(keys, children), max_size=4).map(
            lambda ms: "{" + ", ".join(f"{k}: {v}" for k, v in ms) + "}")
        return st.one_of(st.lists(children, max_size=3).map(lambda vs: "[" + ",".join(vs) + "]"), members)
    return st.recursive(scalars, containers, max_leaves=12)


def test_json_text_reads_as_the_standard_parser_reads_it_for_generated_text():
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=2000, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_json_texts())
    def check(text):
        assert _ours(text) == _standard(text)
    check()
