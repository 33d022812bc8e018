"""vLLM's own HMA tests, reproduced against the policy (reference section 7).

- tests/v1/kv_connector/unit/test_hma_auto_config.py (commit 75162ed):
  test_hma_auto_config (4 scenarios) and
  test_explicit_hma_with_non_hma_connector_errors_at_factory.
- tests/v1/kv_connector/unit/test_multi_connector.py (commit 003df29):
  test_multi_connector_hma_support_detection and
  test_multi_connector_mixed_hma_disables_hybrid_kv_cache. Their mock
  connectors (MockConnector, MockHMAConnector, reached through
  kv_connector_module_path="tests.v1.kv_connector.unit.test_multi_connector")
  are declared here as unregistered module-path entries in a temporary copy of
  the rules directory, as an external connector is declared.

Expected values are the ones vLLM's tests assert, written out literally.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

import hma_policy

from rulecopy import copy_rules

ROOT = Path(__file__).resolve().parent.parent
DECISION_VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
)

MOCK_MODULE = "tests.v1.kv_connector.unit.test_multi_connector"
GIB = 1 << 30


def _valid(decision):
    problems = [e.message for e in DECISION_VALIDATOR.iter_errors(decision.to_dict())]
    assert not problems, problems
    return decision


@pytest.fixture(scope="module")
def policy():
    p = hma_policy.load_policy(None, memo=False)
    yield p
    p.close()


@pytest.fixture(scope="module")
def mock_rules_dir(tmp_path_factory):
    """A copy of rules/ whose registry also declares the two mock connectors of
    test_multi_connector.py: unregistered, reachable by module path only."""
    target = copy_rules(tmp_path_factory.mktemp("mock-rules") / "rules")
    registry_file = target / "connectors.yaml"
    registry = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    assert "MockConnector" not in registry["connectors"]
    registry["connectors"]["MockConnector"] = {
        "registered": False,
        "module_path": MOCK_MODULE,
        "supports_hma": False,
        "note": "MockConnector(KVConnectorBase_V1) in vLLM's test_multi_connector.py",
    }
    registry["connectors"]["MockHMAConnector"] = {
        "registered": False,
        "module_path": MOCK_MODULE,
        "supports_hma": True,
        "note": "MockHMAConnector(KVConnectorBase_V1, SupportsHMA) in vLLM's test_multi_connector.py",
    }
    registry_file.write_text(yaml.safe_dump(registry, sort_keys=False), encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def mock_policy(mock_rules_dir):
    p = hma_policy.load_policy(mock_rules_dir, memo=False)
    yield p
    p.close()


def _mock(name, **extra):
    return {"kv_connector": name, "kv_role": "kv_both", "kv_connector_module_path": MOCK_MODULE, **extra}


def _multi(children, **extra):
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": children},
        **extra,
    }


# --------------------------------------------------------------------------
# test_hma_auto_config.py
# --------------------------------------------------------------------------

SIMPLE_CPU = {
    "kv_connector": "SimpleCPUOffloadConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"cpu_bytes_to_use": GIB},
}
OFFLOADING = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}

AUTO_CONFIG_SCENARIOS = [
    pytest.param(SIMPLE_CPU, False, id="hma_connector"),
    pytest.param(EXAMPLE, True, id="non_hma_connector"),
    pytest.param(_multi([SIMPLE_CPU, OFFLOADING]), False, id="multi_all_hma"),
    pytest.param(_multi([SIMPLE_CPU, EXAMPLE]), True, id="multi_mixed"),
]


def _cpu_test_document(kv_transfer_config, **extra):
    # VllmConfig(device_config=cpu), with the autouse fixture that patches
    # current_platform.support_hybrid_kv_cache to True.
    return {
        "kv_transfer_config": kv_transfer_config,
        "platform": {"supports_hybrid_kv_cache": True, "is_cuda": False},
        **extra,
    }


@pytest.mark.parametrize("kv_transfer_config, expect_disabled", AUTO_CONFIG_SCENARIOS)
def test_hma_auto_config(policy, kv_transfer_config, expect_disabled):
    decision = _valid(policy.decide(_cpu_test_document(kv_transfer_config)))
    assert decision.disable_hybrid_kv_cache_manager is expect_disabled
    assert decision.hma_enabled is (not expect_disabled)
    assert decision.outcome == ("disabled" if expect_disabled else "enabled")
    assert decision.errors == ()
    # vLLM logs its "Turning off hybrid kv cache manager" warning exactly when
    # the auto path turned HMA off because of the connector.
    codes = [w.code for w in decision.warnings]
    assert codes == (["hma.auto_disabled"] if expect_disabled else [])
    if expect_disabled:
        warning = decision.warnings[0]
        assert warning.source == "vllm"
        assert warning.path == "/kv_transfer_config"
        assert f"`{kv_transfer_config['kv_connector']}`" in warning.message
        assert "hma.auto_disabled" in decision.trace
    else:
        assert "hma.default_on" in decision.trace
    # The same answer through the factory helper, supports_hma_config.
    assert policy.supports_hma(kv_transfer_config) is (not expect_disabled)


def test_explicit_hma_with_non_hma_connector_errors_at_factory(policy):
    # SchedulerConfig(disable_hybrid_kv_cache_manager=False) + ExampleConnector:
    # VllmConfig builds without error; create_connector then raises.
    document = _cpu_test_document(dict(EXAMPLE), disable_hybrid_kv_cache_manager=False)
    decision = _valid(policy.decide(document))
    # Config construction accepted it: HMA is on in the resolved config.
    assert decision.hma_enabled is True
    assert decision.disable_hybrid_kv_cache_manager is False
    # The failure is KVConnectorFactory.create_connector's, not VllmConfig's.
    assert decision.outcome == "error"
    assert len(decision.errors) == 1
    error = decision.errors[0]
    assert (error.stage, error.code) == ("connector", "hma.connector_unsupported")
    assert "ExampleConnector" in error.message
    assert "does not support HMA but HMA is enabled" in error.message
    assert error.path == "/kv_transfer_config"
    assert "--disable-hybrid-kv-cache-manager" in (error.hint or "")
    # The auto path never ran: no "turning off" warning, no config-stage conflict.
    assert [w.code for w in decision.warnings] == []
    assert "hma.explicit_enable" in decision.trace
    assert "hma.explicit_enable_conflict" not in decision.trace
    assert decision.trace[-1] == "hma.connector_unsupported"


# --------------------------------------------------------------------------
# test_multi_connector.py
# --------------------------------------------------------------------------


def _class_hma_step(decision, node):
    steps = [s for s in decision.steps if s.ruleset == "node" and s.step == "class_hma" and s.node == node]
    assert len(steps) == 1, steps
    return steps[0]


@pytest.mark.parametrize(
    "names, expect_all_support_hma",
    [
        pytest.param(["MockConnector", "MockConnector"], False, id="none_hma"),
        pytest.param(["MockHMAConnector", "MockHMAConnector"], True, id="all_hma"),
        pytest.param(["MockHMAConnector", "MockConnector"], False, id="mixed_hma_first"),
        pytest.param(["MockConnector", "MockHMAConnector"], False, id="mixed_hma_second"),
    ],
)
def test_multi_connector_hma_support_detection(mock_policy, names, expect_all_support_hma):
    expected_child = {"MockConnector": False, "MockHMAConnector": True}
    ktc = _multi([_mock(name) for name in names])

    # _all_support_hma of the constructed MultiConnector.
    assert mock_policy.supports_hma(ktc) is expect_all_support_hma
    # supports_hma(child instance) for each child.
    for name in names:
        assert mock_policy.supports_hma(_mock(name)) is expected_child[name]

    decision = _valid(mock_policy.decide({"kv_transfer_config": ktc, "disable_hybrid_kv_cache_manager": True}))
    # assert supports_hma(MultiConnector): the class itself inherits SupportsHMA.
    top = _class_hma_step(decision, "/kv_transfer_config")
    assert (top.rule, top.value) == ("registry.MultiConnector", "supported")
    # Each child was found through its module path, never through the registry.
    base = "/kv_transfer_config/kv_connector_extra_config/connectors"
    for index, name in enumerate(names):
        step = _class_hma_step(decision, f"{base}/{index}")
        assert step.rule == f"registry.{name}.module"
        assert step.value == ("supported" if expected_child[name] else "unsupported")
    assert [(c.path, c.kv_connector, c.supports_hma) for c in decision.connectors] == [
        ("/kv_transfer_config", "MultiConnector", expect_all_support_hma),
        *[(f"{base}/{i}", name, expected_child[name]) for i, name in enumerate(names)],
    ]
    # The construction itself succeeds (explicit disable, as the mocks need no HMA).
    assert decision.outcome == "disabled"
    assert decision.errors == ()


def test_mock_connectors_are_not_reachable_by_name(mock_policy):
    # registered: false keeps the mocks out of the factory registry.
    decision = _valid(mock_policy.decide({"kv_transfer_config": {"kv_connector": "MockHMAConnector", "kv_role": "kv_both"}}))
    assert decision.outcome == "error"
    assert (decision.errors[0].stage, decision.errors[0].code) == ("config", "connector.unknown")
    with pytest.raises(hma_policy.ConnectorError) as info:
        mock_policy.supports_hma({"kv_connector": "MockConnector", "kv_role": "kv_both"})
    assert info.value.problems[0].code == "connector.unknown"


def test_multi_connector_mixed_hma_disables_hybrid_kv_cache(mock_policy):
    # LLM(Qwen/Qwen3-0.6B) on GPU with MultiConnector[NixlConnector (kv_consumer),
    # MockConnector], no HMA preference.
    ktc = _multi([
        {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
        _mock("MockConnector"),
    ])
    document = {
        "kv_transfer_config": ktc,
        "model": {"name": "Qwen/Qwen3-0.6B", "layer_kinds": ["full_attention"]},
        "platform": {"supports_hybrid_kv_cache": True, "is_cuda": True},
    }
    decision = _valid(mock_policy.decide(document))
    assert decision.disable_hybrid_kv_cache_manager is True
    assert decision.outcome == "disabled"
    assert decision.errors == ()
    # The scheduler's MultiConnector has _all_support_hma False.
    assert mock_policy.supports_hma(ktc) is False
    base = "/kv_transfer_config/kv_connector_extra_config/connectors"
    assert [(c.path, c.kv_connector, c.supports_hma, c.rule) for c in decision.connectors] == [
        ("/kv_transfer_config", "MultiConnector", False, "node.support.multi_child_unsupported"),
        (f"{base}/0", "NixlConnector", True, "node.support.class_supported"),
        (f"{base}/1", "MockConnector", False, "node.support.class_unsupported"),
    ]
    assert [(w.code, w.source) for w in decision.warnings] == [("hma.auto_disabled", "vllm")]
    assert "`MultiConnector`" in decision.warnings[0].message
    assert "registry.MockConnector.module" in decision.trace
