"""The public API: its names, docstrings, the Decision value and its
contract, supports_hma, and the error classes."""

from __future__ import annotations

import dataclasses
import doctest
import inspect

import pytest

import hma_policy
from hma_policy import ConnectorError, Decision, InputError, decide, supports_hma

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}

PUBLIC = [
    "ConnectorError",
    "Decision",
    "HMAPolicyError",
    "InputError",
    "Limits",
    "Policy",
    "PolicyError",
    "PolicySet",
    "__version__",
    "decide",
    "decide_command",
    "load_policy",
    "supports_hma",
]


def test_public_names_are_pinned():
    assert sorted(hma_policy.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(hma_policy, name), name


def test_version_is_a_version_string():
    assert isinstance(hma_policy.__version__, str)
    assert hma_policy.__version__.count(".") >= 1


def own_doc(obj) -> str | None:
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        # dataclasses invent "Name(field: type, ...)" when a class has none.
        if doc and doc.startswith(f"{obj.__name__}("):
            return None
        return doc
    return obj.__doc__


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "__version__"])
def test_every_public_name_has_a_docstring(name):
    doc = own_doc(getattr(hma_policy, name))
    assert doc and doc.strip(), f"{name} has no docstring"


PUBLIC_CLASSES = [hma_policy.Policy, hma_policy.PolicySet, hma_policy.Decision]


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_public_methods_and_properties_have_docstrings(cls):
    missing = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) or inspect.isfunction(member):
            if not (member.__doc__ or "").strip():
                missing.append(name)
    assert missing == [], f"{cls.__name__} members without a docstring: {missing}"


def test_module_doctest_passes():
    result = doctest.testmod(hma_policy)
    assert result.attempted > 0
    assert result.failed == 0


# -- Decision ----------------------------------------------------------------------

def test_decision_is_frozen():
    d = decide({"kv_transfer_config": NIXL})
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.outcome = "disabled"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.hma_enabled = False  # type: ignore[misc]
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        d.extra = 1  # type: ignore[attr-defined]
    assert isinstance(d.errors, tuple) and isinstance(d.warnings, tuple)
    assert isinstance(d.connectors, tuple) and isinstance(d.trace, tuple) and isinstance(d.reasons, tuple)


DOCUMENTS = [
    {"kv_transfer_config": NIXL},
    {"kv_transfer_config": EXAMPLE},
    {"kv_transfer_config": EXAMPLE, "disable_hybrid_kv_cache_manager": False},
    {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                            "kv_connector_extra_config": {"connectors": [NIXL, EXAMPLE]}}},
    {"kv_transfer_config": {"kv_connector": "Mine", "kv_role": "kv_both", "kv_connector_module_path": "my.mod"}},
    {},
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_equal_inputs_give_equal_hashable_decisions(document):
    first = decide(document)
    second = decide(dict(document))
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1
    assert first.to_dict() == second.to_dict()


def test_different_inputs_give_different_decisions():
    assert decide({"kv_transfer_config": NIXL}) != decide({"kv_transfer_config": EXAMPLE})


CONTRACT_KEYS = {
    "outcome", "hma_enabled", "disable_hybrid_kv_cache_manager", "errors", "warnings",
    "connectors", "reasons", "trace", "policy", "vllm",
}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_to_dict_has_exactly_the_contract_keys(document):
    d = decide(document)
    data = d.to_dict()
    assert set(data) == CONTRACT_KEYS
    assert data["outcome"] == d.outcome
    assert data["hma_enabled"] == d.hma_enabled
    assert data["disable_hybrid_kv_cache_manager"] == (None if d.hma_enabled is None else not d.hma_enabled)
    assert data["disable_hybrid_kv_cache_manager"] == d.disable_hybrid_kv_cache_manager
    assert set(data["policy"]) == {"digest"}
    assert data["vllm"] == {"release": "0.33.0", "source": "default"}
    for error in data["errors"]:
        assert set(error) <= {"code", "stage", "message", "path", "hint"}
    for connector in data["connectors"]:
        assert set(connector) == {"path", "kv_connector", "supports_hma", "support", "rule"}
        assert connector["supports_hma"] == {"supported": True, "unsupported": False}.get(connector["support"])


# -- supports_hma ------------------------------------------------------------------

@pytest.mark.parametrize("config, expected", [
    (NIXL, True),
    (EXAMPLE, False),
    ({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [NIXL]}}, True),
    ({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [NIXL, EXAMPLE]}}, False),
    ({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": []}}, False),
    ({"kv_connector": "Mine", "kv_role": "kv_both", "kv_connector_module_path": "my.mod"}, None),
])
def test_supports_hma_answers_true_false_or_none(config, expected):
    assert supports_hma(config) is expected


def test_supports_hma_reads_the_environment():
    lmcache = {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both"}
    assert supports_hma(lmcache) is True
    assert supports_hma(lmcache, env={"LMCACHE_USE_UPSTREAM_MP": "1"}) is False


def test_supports_hma_unknown_name_raises_with_a_suggestion():
    with pytest.raises(ConnectorError) as info:
        supports_hma({"kv_connector": "NixlConector", "kv_role": "kv_both"})
    (problem,) = info.value.problems
    assert (problem.code, problem.path, problem.message, problem.hint) == (
        "connector.unknown", "/kv_transfer_config/kv_connector",
        "unsupported connector type `NixlConector`", "did you mean `NixlConnector`?",
    )


@pytest.mark.parametrize("config", [{"kv_role": "kv_both"}, {}, {"kv_connector": None}])
def test_supports_hma_missing_name_raises(config):
    with pytest.raises(ConnectorError) as info:
        supports_hma(config)
    (problem,) = info.value.problems
    assert (problem.code, problem.path, problem.message) == (
        "connector.name_missing", "/kv_transfer_config", "connector name is not set in KVTransferConfig",
    )
    assert problem.hint == "set `kv_connector` to a connector name"


def test_supports_hma_unknown_child_raises():
    config = {"kv_connector": "MultiConnector", "kv_role": "kv_both",
              "kv_connector_extra_config": {"connectors": [{"kv_connector": "Bogus", "kv_role": "kv_both"}]}}
    with pytest.raises(ConnectorError) as info:
        supports_hma(config)
    assert info.value.problems[0].path == "/kv_transfer_config/kv_connector_extra_config/connectors/0/kv_connector"


def test_supports_hma_empty_module_path_raises():
    with pytest.raises(ConnectorError) as info:
        supports_hma({**NIXL, "kv_connector_module_path": ""})
    assert info.value.problems[0].code == "connector.module_path_empty"


def test_supports_hma_invalid_config_raises_input_error():
    with pytest.raises(InputError) as info:
        supports_hma({"kv_connector": "NixlConnector", "kv_role": "kv_Both"})
    assert info.value.problems[0].hint == "did you mean `kv_both`?"
    with pytest.raises(InputError):
        supports_hma(None)


def test_supports_hma_accepts_a_json_string():
    import json
    assert supports_hma(json.dumps(NIXL)) is True


class FakeKVTransferConfig:
    def __init__(self, **fields):
        self.kv_connector = None
        self.kv_role = None
        self.engine_id = "e"
        self.kv_connector_extra_config = {}
        self.kv_connector_module_path = None
        self.__dict__.update(fields)


def test_supports_hma_accepts_a_kv_transfer_config_object():
    assert supports_hma(FakeKVTransferConfig(**NIXL)) is True
    assert supports_hma(FakeKVTransferConfig(**EXAMPLE)) is False
    multi = FakeKVTransferConfig(kv_connector="MultiConnector", kv_role="kv_both",
                                 kv_connector_extra_config={"connectors": [NIXL, NIXL]})
    assert supports_hma(multi) is True
    with pytest.raises(ConnectorError):
        supports_hma(FakeKVTransferConfig(kv_connector="NixlConector", kv_role="kv_both"))


# -- errors ----------------------------------------------------------------------------

def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)
    with pytest.raises(ValueError):
        decide({"kv_transfer_confg": NIXL})


def test_connector_error_is_a_value_error():
    assert issubclass(ConnectorError, ValueError)


def test_error_problems_are_sorted_tuples_and_the_message_shows_the_first():
    with pytest.raises(InputError) as info:
        decide({"platform": {"gpu": 1}, "model": {"layer_kinds": ["foo"]}})
    problems = info.value.problems
    assert isinstance(problems, tuple)
    assert [p.path for p in problems] == sorted(p.path for p in problems)
    assert str(info.value).startswith(problems[0].render())
    assert str(info.value).endswith("(and 1 more)")


def test_decide_returns_a_decision():
    assert isinstance(decide({"kv_transfer_config": NIXL}), Decision)


class LyingRepr(dict):
    """A mapping whose repr() claims another content."""

    def __repr__(self):
        return "{'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'}"


def test_a_document_whose_repr_lies_gets_its_own_decision():
    # The old decision cache was keyed by repr() of nested values: the second
    # document got the first one's decision (enabled). Nothing is keyed on
    # the caller's objects now; the decision is of the content.
    first = {"kv_transfer_config": LyingRepr(kv_connector="NixlConnector", kv_role="kv_both")}
    second = {"kv_transfer_config": LyingRepr(kv_connector="LMCacheConnectorV1", kv_role="kv_both")}
    assert [decide(d).outcome for d in (first, second, first)] == ["enabled", "disabled", "enabled"]
