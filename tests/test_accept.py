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

from hma_policy import accept
from hma_policy.schema import is_valid, validator
from hma_policy import yamlsafe

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
RULE_FILES = [yamlsafe.load(p.read_text())[0] for p in sorted((ROOT / "rules").glob("*.yaml"))]
TEST_FILES = [yamlsafe.load(p.read_text())[0] for p in sorted((ROOT / "rules" / "tests").glob("*.yaml"))]


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
