"""The accept-path check (engine/accept.py) gives jsonschema's answer.

jsonschema is the validator of record; the compiled check only decides
whether jsonschema must be asked for a report. A disagreement would let an
invalid document through, so they are compared on every document the tests
know and on random mutations of them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hma_policy.core import accept as accept
from hma_policy.core.schema import is_valid, validator
from hma_policy.core import yamlsafe as yamlsafe

ROOT = Path(__file__).resolve().parents[1]
CASES = json.loads((ROOT / "tests" / "conformance" / "cases.json").read_text())
DOCUMENTS = [c["input"] for c in CASES]
for path in sorted((ROOT / "examples").rglob("*")):
    if path.suffix in (".json", ".yaml", ".yml"):
        try:
            data = json.loads(path.read_text()) if path.suffix == ".json" else yamlsafe.load(path.read_text())[0]
        except Exception:  # noqa: BLE001 - broken example files are part of the fleet
            continue
        if isinstance(data, dict):
            DOCUMENTS.append(data)
RULE_FILES = [yamlsafe.load(p.read_text())[0] for p in sorted([*(ROOT / "rules").glob("epochs/*/*.yaml"),
                                                                 *(ROOT / "rules").glob("registries/*.yaml")])]
TEST_FILES = [yamlsafe.load(p.read_text())[0] for p in sorted((ROOT / "rules").glob("epochs/*/tests/*.yaml"))]


@pytest.mark.parametrize("name, instances", [("deployment", DOCUMENTS), ("rules", RULE_FILES), ("tests", TEST_FILES)])
def test_known_instances_agree(name, instances):
    assert instances
    for instance in instances:
        assert is_valid(name, instance) == validator(name).is_valid(instance), instance


def test_an_unknown_keyword_fails_compilation():
    with pytest.raises(accept.UnsupportedSchema):
        accept.compile_schema({"type": "object", "dependentRequired": {"a": ["b"]}})


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
    st.sampled_from(["", "kv_both", "kv_producer", "kv_Both", "NixlConnector", "MultiConnector", "native",
                     "lmcache", "0", "1", " 1 ", "true", "x\x00y", "eagle", "mamba", "sliding_window"]),
)
KEYS = st.sampled_from([
    "kv_transfer_config", "kv_connector", "kv_role", "kv_connector_extra_config", "connectors", "engine_id",
    "kv_connector_module_path", "kv_port", "disable_hybrid_kv_cache_manager", "kv_offloading_size", "model",
    "layer_kinds", "attention_chunk_size", "platform", "is_cuda", "env", "VLLM_USE_SIMPLE_KV_OFFLOAD",
    "speculative_config", "method", "unknown", "kv_load_failure_policy",
])


def _mutations(document):
    """Paths (as key lists) of every value in the document."""
    out, stack = [], [((), document)]
    while stack:
        path, value = stack.pop()
        out.append(path)
        if isinstance(value, dict):
            stack += [(path + (k,), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(path + (i,), v) for i, v in enumerate(value)]
    return out


@st.composite
def mutated(draw):
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _mutations(document)
        path = draw(st.sampled_from(paths))
        if not path:
            continue
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(st.one_of(SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(KEYS, SCALARS, max_size=2)))
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(KEYS)] = draw(SCALARS)
    return document


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_documents_agree(document):
    assert is_valid("deployment", document) == validator("deployment").is_valid(document)


class _Text(str):
    pass


TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
FACETS = {"maxLength": st.integers(0, 4), "minLength": st.integers(0, 4), "pattern": st.sampled_from(["^a", "b$", "^[^\\u0000-\\u001f]*$", "^[^\\u0000-\\u001f\\u007f]*$", "^[^\\u0000]*$"]),
          "minimum": st.integers(-3, 3) | st.floats(-3, 3), "maximum": st.integers(-3, 3), "exclusiveMinimum": st.integers(-3, 3),
          "exclusiveMaximum": st.floats(-3, 3)}


@st.composite
def typed_schemas(draw):
    kinds = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
    schema = {"type": kinds[0] if len(kinds) == 1 and draw(st.booleans()) else kinds}
    for key in draw(st.lists(st.sampled_from(sorted(FACETS)), max_size=3, unique=True)):
        schema[key] = draw(FACETS[key])
    return schema


def _edges(schema):
    """Values on and beside each facet's bound (where an off-by-one shows)."""
    out = []
    for key in ("maxLength", "minLength"):
        if key in schema:
            out += ["a" * n for n in (schema[key] - 1, schema[key], schema[key] + 1) if n >= 0]
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            bound = schema[key]
            out += [int(bound) - 1, int(bound), int(bound) + 1, float(bound), bound + 0.5, bound - 0.5]
    return out or [0]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_schemas(), st.data())
def test_a_type_with_its_facets_agrees_with_jsonschema(schema, data):
    # engine/accept.py answers a type and its string and number facets in
    # one closure for values of exact JSON types; every other value (bools,
    # integral floats, subclasses) takes the keywords one by one.
    from jsonschema import Draft202012Validator

    value = data.draw(st.sampled_from(_edges(schema)) | SCALARS | st.integers(-5, 5) | st.floats(-5, 5)
                      | st.sampled_from([2.0, -1.0, 1e300, True, [], {}]) | st.text(max_size=5)
                      | st.builds(_Text, st.text(max_size=5)))
    assert accept.compile_schema(schema)(value) == Draft202012Validator(schema).is_valid(value), (schema, value)


@pytest.mark.parametrize("pattern", sorted(accept._MATCHED_BY_PRINTABLE))
def test_a_pattern_of_no_control_characters_agrees_with_jsonschema(pattern):
    # Such a pattern is answered by str.isprintable() where that is true (a
    # string of printable characters always matches), else by the search.
    from jsonschema import Draft202012Validator

    schema = {"type": "string", "pattern": pattern}
    check, reference = accept.compile_schema(schema), Draft202012Validator(schema)
    values = ["", "NixlConnector", "my.module:Factory", "é ü 日本", "a\x00b", "\x00", "a\x1fb", "a\x7fb", "tab\there",
              "abc\n", "\n", "\u2028", "\x85", "\u200b", "\ud800"]
    assert [check(v) for v in values] == [reference.is_valid(v) for v in values]
    assert not all(check(v) for v in values)  # the search still refuses what it refuses
