"""Behaviour tests: the decision, and why it was reached (reasons, trace, messages, paths).

Expected values come from the reference (/work/shared/reference/vllm-hma.md,
section numbers in the comments), written out literally; none is computed by
the engine. Every Decision produced here is validated against
schemas/decision.schema.json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

import hma_policy

ROOT = Path(__file__).resolve().parent.parent
DECISION_VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
)
CHILDREN = "/kv_connector_extra_config/connectors"
TOP = "/kv_transfer_config"


@pytest.fixture(scope="module")
def policy():
    # memo=False: every step of every decision goes through durable-rules.
    p = hma_policy.load_policy(None, memo=False)
    yield p
    p.close()


def C(name, role="kv_both", **extra):
    return {"kv_connector": name, "kv_role": role, **extra}


def M(*children, **extra):
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": list(children)}, **extra}


def child(*indexes):
    """JSON Pointer of a (nested) MultiConnector child of the top-level config."""
    return TOP + "".join(f"{CHILDREN}/{i}" for i in indexes)


def resolve(document, pointer):
    """The element a JSON Pointer designates; fails the test when it designates nothing."""
    assert pointer == "" or pointer.startswith("/"), pointer
    node = document
    for token in pointer.split("/")[1:] if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            assert re.fullmatch(r"0|[1-9][0-9]*", token), (pointer, token)
            node = node[int(token)]
        else:
            assert isinstance(node, dict) and token in node, (pointer, token)
            node = node[token]
    return node


def decide(policy, document):
    decision = policy.decide(document)
    problems = [e.message for e in DECISION_VALIDATOR.iter_errors(decision.to_dict())]
    assert not problems, problems
    if decision.outcome == "error":
        assert len(decision.errors) == 1
    else:
        assert decision.errors == ()
    assert decision.disable_hybrid_kv_cache_manager == (None if decision.hma_enabled is None else not decision.hma_enabled)
    return decision


def input_problems(policy, document):
    with pytest.raises(hma_policy.InputError) as info:
        policy.decide(document)
    return info.value.problems


def first_error(decision):
    e = decision.errors[0]
    return e.stage, e.code, e.path


def warning_codes(decision, source=None):
    return [w.code for w in decision.warnings if source is None or w.source == source]


def rows(decision):
    return [(c.path, c.kv_connector, c.supports_hma, c.rule) for c in decision.connectors]


def before(trace, first, second):
    """``first`` fires before ``second`` in the trace."""
    assert first in trace and second in trace, (first, second, trace)
    return trace.index(first) < trace.index(second)


# --------------------------------------------------------------------------
# Section 3: the 17 registered connectors and their HMA support
# --------------------------------------------------------------------------

# Reference section 3, table "Registered connectors (17) and HMA support".
# LMCacheMPConnector depends on the environment: recent LMCache's class inherits
# SupportsHMA; LMCACHE_USE_UPSTREAM_MP selects vLLM's builtin class, which does not.
# MultiConnector: the class inherits SupportsHMA, the effective answer is "all
# children" (section 4), and with no children it is False.
REFERENCE_SUPPORTS_HMA = {
    "ExampleConnector": False,
    "ExampleHiddenStatesConnector": True,
    "LMCacheConnectorV1": False,
    "LMCacheMPConnector": True,
    "NixlConnector": True,
    "NixlPullConnector": True,
    "NixlPushConnector": True,
    "MultiConnector": False,
    "HiSparseConnector": True,
    "MoRIIOConnector": True,
    "OffloadingConnector": True,
    "DecodeBenchConnector": True,
    "MooncakeConnector": True,
    "MooncakeStoreConnector": True,
    "FlexKVConnectorV1": False,
    "SimpleCPUOffloadConnector": True,
    "HF3FSKVConnector": False,
}
REGISTERED = sorted(REFERENCE_SUPPORTS_HMA)


def test_registry_holds_exactly_the_17_registered_connectors(policy):
    assert len(REGISTERED) == 17
    assert sorted(policy.registered_names) == REGISTERED
    # Shipped but not registered (section 3); removed names from older releases.
    for name in ("UMBPStoreConnector", "SharedStorageConnector", "P2pNcclConnector"):
        assert name not in policy.registered_names


@pytest.mark.parametrize("name", REGISTERED)
def test_supports_hma_matches_reference_table(policy, name):
    assert policy.supports_hma(C(name)) is REFERENCE_SUPPORTS_HMA[name]
    assert hma_policy.supports_hma(C(name)) is REFERENCE_SUPPORTS_HMA[name]


@pytest.mark.parametrize("name", [n for n in REGISTERED if n != "MultiConnector"])
def test_registered_connector_alone_without_preference(policy, name):
    supported = REFERENCE_SUPPORTS_HMA[name]
    document = {"kv_transfer_config": C(name)}
    d = decide(policy, document)
    assert rows(d) == [(TOP, name, supported,
                        "node.support.class_supported" if supported else "node.support.class_unsupported")]
    assert f"registry.{name}" in d.trace
    # The top node's reason names the class and its SupportsHMA inheritance.
    assert any(f"`{name}`" in r and "SupportsHMA" in r for r in d.reasons), d.reasons
    if supported:
        assert (d.outcome, d.hma_enabled) == ("enabled", True)
        assert d.warnings == ()
        assert "hma.connector_supported" in d.trace and "hma.default_on" in d.trace
        assert "hma.auto_disabled" not in d.trace
    else:
        assert (d.outcome, d.hma_enabled) == ("disabled", False)
        assert [(w.code, w.source, w.path) for w in d.warnings] == [("hma.auto_disabled", "vllm", TOP)]
        assert f"`{name}`" in d.warnings[0].message
        assert "does not support HMA" in d.warnings[0].message
        assert before(d.trace, f"registry.{name}", "hma.auto_disabled")
        assert before(d.trace, "hma.auto_disabled", "need_disable.connector")
        assert d.trace[-1] == "hma.auto_need_disable"


def test_multiconnector_alone_without_children_key(policy):
    # Section 4: a missing list gives False (HMA off, warning logged); then
    # construction asserts the list exists -> a connector-stage error.
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {}}}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", False)
    assert first_error(d) == ("connector", "multiconnector.connectors_missing", TOP + "/kv_connector_extra_config")
    resolve(document, d.errors[0].path)
    assert warning_codes(d) == ["hma.auto_disabled"]
    assert rows(d) == [(TOP, "MultiConnector", False, "node.support.multi_no_children")]
    assert "registry.MultiConnector" in d.trace
    assert before(d.trace, "hma.auto_disabled", "startup.construct_error")


def test_lmcache_mp_connector_depends_on_environment(policy):
    # Section 3 / section 8.4: LMCACHE_USE_UPSTREAM_MP selects the builtin
    # LMCacheMPConnectorUpstream, which does not inherit SupportsHMA.
    env = {"LMCACHE_USE_UPSTREAM_MP": "1"}
    assert policy.supports_hma(C("LMCacheMPConnector"), env=env) is False
    d = decide(policy, {"kv_transfer_config": C("LMCacheMPConnector"), "env": env})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert "registry.LMCacheMPConnector.upstream" in d.trace
    assert "registry.LMCacheMPConnector" not in d.trace
    assert warning_codes(d) == ["hma.auto_disabled"]
    assert rows(d) == [(TOP, "LMCacheMPConnector", False, "node.support.class_unsupported")]


# --------------------------------------------------------------------------
# Section 4: MultiConnector graphs
# --------------------------------------------------------------------------


def test_nested_multiconnector_depth_3_with_one_bad_leaf(policy):
    # Multi[Nixl, Multi[Offloading, Multi[SimpleCPU, Example]], Mooncake]:
    # the recursion reaches any depth, one unsupported leaf makes every
    # ancestor unsupported.
    document = {"kv_transfer_config": M(
        C("NixlConnector"),
        M(C("OffloadingConnector"), M(C("SimpleCPUOffloadConnector"), C("ExampleConnector"))),
        C("MooncakeConnector"),
    )}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert d.disable_hybrid_kv_cache_manager is True
    # Top-down pre-order, with each node's own answer and the rule that gave it.
    assert rows(d) == [
        (TOP, "MultiConnector", False, "node.support.multi_child_unsupported"),
        (child(0), "NixlConnector", True, "node.support.class_supported"),
        (child(1), "MultiConnector", False, "node.support.multi_child_unsupported"),
        (child(1, 0), "OffloadingConnector", True, "node.support.class_supported"),
        (child(1, 1), "MultiConnector", False, "node.support.multi_child_unsupported"),
        (child(1, 1, 0), "SimpleCPUOffloadConnector", True, "node.support.class_supported"),
        (child(1, 1, 1), "ExampleConnector", False, "node.support.class_unsupported"),
        (child(2), "MooncakeConnector", True, "node.support.class_supported"),
    ]
    for c in d.connectors:
        assert resolve(document, c.path)["kv_connector"] == c.kv_connector
    # Which leaf: exactly one non-container node does not support HMA.
    bad = [c.path for c in d.connectors if c.supports_hma is False and c.kv_connector != "MultiConnector"]
    assert bad == [child(1, 1, 1)]
    # The graph is evaluated children first: the leaf's verdict precedes its parents'.
    assert before(d.trace, "registry.ExampleConnector", "node.support.multi_child_unsupported")
    assert d.trace.count("node.support.multi_child_unsupported") == 3
    assert [(w.code, w.path) for w in d.warnings] == [("hma.auto_disabled", TOP)]
    assert "`MultiConnector`" in d.warnings[0].message
    assert any("child" in r for r in d.reasons), d.reasons
    assert policy.supports_hma(document["kv_transfer_config"]) is False


def test_nested_multiconnector_depth_4_all_supported(policy):
    document = {"kv_transfer_config": M(M(M(M(C("NixlConnector"), C("OffloadingConnector")))), C("MooncakeStoreConnector"))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())
    assert rows(d) == [
        (TOP, "MultiConnector", True, "node.support.multi_all_children"),
        (child(0), "MultiConnector", True, "node.support.multi_all_children"),
        (child(0, 0), "MultiConnector", True, "node.support.multi_all_children"),
        (child(0, 0, 0), "MultiConnector", True, "node.support.multi_all_children"),
        (child(0, 0, 0, 0), "NixlConnector", True, "node.support.class_supported"),
        (child(0, 0, 0, 1), "OffloadingConnector", True, "node.support.class_supported"),
        (child(1), "MooncakeStoreConnector", True, "node.support.class_supported"),
    ]
    assert policy.supports_hma(document["kv_transfer_config"]) is True


@pytest.mark.parametrize("empty", [[], {}, ""], ids=["list", "dict", "string"])
def test_empty_children_are_no_children(policy, empty):
    # Section 4: a falsy `connectors` gives False; construction accepts any
    # iterable that is not None, with zero children.
    ktc = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": empty}}
    assert policy.supports_hma(ktc) is False

    auto = decide(policy, {"kv_transfer_config": ktc})
    assert (auto.outcome, auto.hma_enabled) == ("disabled", False)
    assert rows(auto) == [(TOP, "MultiConnector", False, "node.support.multi_no_children")]
    assert warning_codes(auto) == ["hma.auto_disabled"]
    assert any("no children" in r for r in auto.reasons), auto.reasons
    assert "node.construct.connectors_missing" not in auto.trace

    enable = decide(policy, {"kv_transfer_config": ktc, "disable_hybrid_kv_cache_manager": False})
    assert (enable.outcome, enable.hma_enabled) == ("error", True)
    assert first_error(enable) == ("connector", "hma.connector_unsupported", TOP)
    assert "`MultiConnector`" in enable.errors[0].message
    assert enable.warnings == ()

    disable = decide(policy, {"kv_transfer_config": ktc, "disable_hybrid_kv_cache_manager": True})
    assert (disable.outcome, disable.hma_enabled, disable.warnings) == ("disabled", False, ())


def test_auto_stops_at_first_unsupported_child_later_error_at_construction(policy):
    # Multi[Example, NoSuch], no preference: all_children_support_hma returns
    # False at Example and never resolves NoSuch; HMA is turned off (warning),
    # then construction builds every child and NoSuch fails.
    document = {"kv_transfer_config": M(C("ExampleConnector"), C("NoSuchConnector"))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", False)
    assert first_error(d) == ("connector", "connector.unknown", child(1) + "/kv_connector")
    assert resolve(document, d.errors[0].path) == "NoSuchConnector"
    assert "`NoSuchConnector`" in d.errors[0].message
    assert [(w.code, w.source) for w in d.warnings] == [("hma.auto_disabled", "vllm")]
    assert rows(d) == [
        (TOP, "MultiConnector", False, "node.support.multi_child_unsupported"),
        (child(0), "ExampleConnector", False, "node.support.class_unsupported"),
        (child(1), "NoSuchConnector", None, "node.support.class_error"),
    ]
    assert before(d.trace, "hma.auto_disabled", "startup.construct_error")


def test_auto_unknown_child_first_is_a_config_error(policy):
    # Multi[NoSuch, Example], no preference: the HMA helper resolves NoSuch
    # first and raises during VllmConfig construction.
    document = {"kv_transfer_config": M(C("NoSuchConnector"), C("ExampleConnector"))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "connector.unknown", child(0) + "/kv_connector")
    assert d.warnings == ()
    assert "hma.connector_check_error" in d.trace
    assert "hma.auto_disabled" not in d.trace
    assert rows(d)[0] == (TOP, "MultiConnector", None, "node.support.multi_child_error")
    with pytest.raises(hma_policy.ConnectorError) as info:
        policy.supports_hma(document["kv_transfer_config"])
    assert (info.value.problems[0].code, info.value.problems[0].path) == ("connector.unknown", child(0) + "/kv_connector")


def test_auto_nested_unsupported_child_stops_before_later_unknown(policy):
    # Multi[Multi[Example], NoSuch]: the nested MultiConnector answers False,
    # so the top-level helper stops there; construction then fails on NoSuch.
    document = {"kv_transfer_config": M(M(C("ExampleConnector")), C("NoSuchConnector"))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", False)
    assert first_error(d) == ("connector", "connector.unknown", child(1) + "/kv_connector")
    assert warning_codes(d) == ["hma.auto_disabled"]


def test_explicit_enable_unsupported_child_first(policy):
    # Multi[Example, NoSuch], --no-disable-hybrid-kv-cache-manager: VllmConfig
    # does not check the connector; create_connector's helper stops at Example
    # and raises "Connector MultiConnector does not support HMA ...".
    document = {"kv_transfer_config": M(C("ExampleConnector"), C("NoSuchConnector")),
                "disable_hybrid_kv_cache_manager": False}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", True)
    assert first_error(d) == ("connector", "hma.connector_unsupported", TOP)
    assert "`MultiConnector`" in d.errors[0].message
    assert "does not support HMA but HMA is enabled" in d.errors[0].message
    assert d.warnings == ()
    assert "hma.connector_check_skipped" in d.trace and "hma.explicit_enable" in d.trace


def test_explicit_enable_unknown_child_first(policy):
    # Multi[NoSuch, Example], explicit enable: the factory helper resolves
    # NoSuch first and raises "Unsupported connector type" at start-up.
    document = {"kv_transfer_config": M(C("NoSuchConnector"), C("ExampleConnector")),
                "disable_hybrid_kv_cache_manager": False}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", True)
    assert first_error(d) == ("connector", "connector.unknown", child(0) + "/kv_connector")
    assert d.warnings == ()


def test_explicit_disable_unknown_child_fails_at_construction(policy):
    document = {"kv_transfer_config": M(C("NoSuchConnector"), C("ExampleConnector")),
                "disable_hybrid_kv_cache_manager": True}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", False)
    assert first_error(d) == ("connector", "connector.unknown", child(0) + "/kv_connector")
    assert d.warnings == ()
    assert "hma.explicit_disable" in d.trace


def test_child_order_does_not_matter_for_all_supported(policy):
    for order in ([C("NixlConnector"), C("OffloadingConnector")], [C("OffloadingConnector"), C("NixlConnector")]):
        d = decide(policy, {"kv_transfer_config": M(*order)})
        assert (d.outcome, d.hma_enabled) == ("enabled", True)
        assert [c.kv_connector for c in d.connectors] == ["MultiConnector"] + [o["kv_connector"] for o in order]


# --------------------------------------------------------------------------
# Section 1: runtime blockers and user preference
# --------------------------------------------------------------------------


def test_platform_unsupported_and_unsupported_connector_still_warns(policy):
    # need_disable is set by the platform; with D=None vLLM still asks the
    # connector and logs "Turning off hybrid kv cache manager".
    d = decide(policy, {"kv_transfer_config": C("ExampleConnector"),
                        "platform": {"supports_hybrid_kv_cache": False}})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert [(w.code, w.source, w.path) for w in d.warnings] == [("hma.auto_disabled", "vllm", TOP)]
    assert "hma.platform_unsupported" in d.trace and "hma.auto_disabled" in d.trace
    assert "need_disable.platform" in d.trace
    assert any("platform" in r for r in d.reasons), d.reasons


def test_platform_unsupported_with_supported_connector_does_not_warn(policy):
    d = decide(policy, {"kv_transfer_config": C("NixlConnector"),
                        "platform": {"supports_hybrid_kv_cache": False}})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("disabled", False, ())
    assert "hma.auto_disabled" not in d.trace


def test_platform_unsupported_explicit_enable_is_a_config_error_before_the_connector(policy):
    document = {"kv_transfer_config": C("ExampleConnector"), "platform": {"supports_hybrid_kv_cache": False},
                "disable_hybrid_kv_cache_manager": False}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "hma.explicit_enable_conflict", "/disable_hybrid_kv_cache_manager")
    resolve(document, d.errors[0].path)
    assert "explicitly enabled" in d.errors[0].message
    assert "hma.connector_unsupported" not in d.trace


def test_chunked_local_eagle_env0_has_no_latency_warning(policy):
    # vLLM checks EAGLE first and the env switch in an `elif`: only one fires.
    d = decide(policy, {"model": {"attention_chunk_size": 8192}, "speculative_config": {"method": "eagle"},
                        "env": {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0"}})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert d.warnings == ()
    assert "hma.chunked_local_eagle" in d.trace
    assert "hma.chunked_local_env" not in d.trace
    assert any("EAGLE" in r for r in d.reasons), d.reasons


def test_chunked_local_env0_without_eagle_warns_about_latency(policy):
    document = {"model": {"attention_chunk_size": 8192}, "speculative_config": {"method": "ngram"},
                "env": {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": 0}}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert [(w.code, w.source, w.path) for w in d.warnings] == [
        ("attention.chunked_local_latency", "vllm", "/env/VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE")]
    resolve(document, d.warnings[0].path)
    assert "latency" in d.warnings[0].message
    assert "hma.chunked_local_env" in d.trace


EAGLE_STYLE = ["eagle", "eagle3", "mtp", "dflash", "dspark"]


@pytest.mark.parametrize("method", EAGLE_STYLE)
def test_chunked_local_with_eagle_style_method_disables(policy, method):
    d = decide(policy, {"model": {"attention_chunk_size": 8192}, "speculative_config": {"method": method}})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("disabled", False, ())
    assert "hma.chunked_local_eagle" in d.trace and "need_disable.chunked_local" in d.trace
    # Explicit enable in the same configuration is refused by VllmConfig.
    e = decide(policy, {"model": {"attention_chunk_size": 8192}, "speculative_config": {"method": method},
                        "disable_hybrid_kv_cache_manager": False})
    assert (e.outcome, e.hma_enabled) == ("error", None)
    assert first_error(e) == ("config", "hma.explicit_enable_conflict", "/disable_hybrid_kv_cache_manager")
    # Without chunked local attention, speculative decoding plays no role.
    n = decide(policy, {"speculative_config": {"method": method}})
    assert (n.outcome, n.hma_enabled) == ("enabled", True)


def test_chunked_local_with_ngram_keeps_hma(policy):
    d = decide(policy, {"model": {"attention_chunk_size": 8192}, "speculative_config": {"method": "ngram"}})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())
    assert "hma.chunked_local_eagle" not in d.trace
    assert "hma.default_on" in d.trace


def test_explicit_disable_is_always_respected_without_warning(policy):
    d = decide(policy, {"kv_transfer_config": C("NixlConnector"), "disable_hybrid_kv_cache_manager": True})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("disabled", False, ())
    assert "hma.explicit_disable" in d.trace
    assert any("explicitly disabled" in r for r in d.reasons), d.reasons


def test_kv_events_config_plays_no_role(policy):
    for events in ({"enable_kv_cache_events": True, "publisher": "zmq"}, {"enable_kv_cache_events": False}):
        d = decide(policy, {"kv_transfer_config": C("NixlConnector"), "kv_events_config": events})
        assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())
        d = decide(policy, {"kv_transfer_config": C("ExampleConnector"), "kv_events_config": events})
        assert (d.outcome, d.hma_enabled) == ("disabled", False)
        assert warning_codes(d) == ["hma.auto_disabled"]


# --------------------------------------------------------------------------
# Section 5.4: the kv_offloading shorthand
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, connector, supported, offload_rule",
    [
        pytest.param({}, "OffloadingConnector", True, "offload.native", id="native"),
        pytest.param({"kv_offloading_backend": "native"}, "OffloadingConnector", True, "offload.native", id="native-explicit"),
        pytest.param({"env": {"VLLM_USE_SIMPLE_KV_OFFLOAD": "0"}}, "OffloadingConnector", True, "offload.native", id="native-simple-0"),
        pytest.param({"env": {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}}, "SimpleCPUOffloadConnector", True, "offload.native_simple", id="native-simple-1"),
        pytest.param({"kv_offloading_backend": "lmcache"}, "LMCacheMPConnector", True, "offload.lmcache", id="lmcache"),
        pytest.param({"kv_offloading_backend": "lmcache", "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}},
                     "LMCacheMPConnector", False, "offload.lmcache", id="lmcache-upstream"),
    ],
)
@pytest.mark.parametrize("user_ktc", [None, C("ExampleConnector", role="kv_producer")], ids=["no-ktc", "user-example"])
def test_kv_offloading_shorthand(policy, extra, connector, supported, offload_rule, user_ktc):
    # The shorthand creates a kv_transfer_config when none exists, and
    # overwrites the user's connector and role; the HMA check sees the result.
    document = {"kv_offloading_size": 4, **extra}
    if user_ktc is not None:
        document["kv_transfer_config"] = user_ktc
    d = decide(policy, document)
    assert rows(d) == [(TOP, connector, supported,
                        "node.support.class_supported" if supported else "node.support.class_unsupported")]
    assert d.trace[0] == offload_rule and d.trace[1] == "offload.role"
    assert "registry.ExampleConnector" not in d.trace
    assert any(connector in r for r in d.reasons), d.reasons
    if supported:
        assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())
    else:
        assert (d.outcome, d.hma_enabled) == ("disabled", False)
        assert [(w.code, w.path) for w in d.warnings] == [("hma.auto_disabled", TOP)]
        assert f"`{connector}`" in d.warnings[0].message


def test_kv_offloading_overwrites_a_multiconnector(policy):
    # The name is overwritten, so the children are no longer consulted.
    d = decide(policy, {"kv_offloading_size": 1, "kv_transfer_config": M(C("ExampleConnector"))})
    assert (d.outcome, d.hma_enabled) == ("enabled", True)
    assert rows(d) == [(TOP, "OffloadingConnector", True, "node.support.class_supported")]


def test_kv_offloading_lmcache_upstream_explicit_enable_fails_at_factory(policy):
    d = decide(policy, {"kv_offloading_size": 1, "kv_offloading_backend": "lmcache",
                        "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}, "disable_hybrid_kv_cache_manager": False})
    assert (d.outcome, d.hma_enabled) == ("error", True)
    assert first_error(d) == ("connector", "hma.connector_unsupported", TOP)
    assert "`LMCacheMPConnector`" in d.errors[0].message


def test_no_kv_offloading_and_no_connector(policy):
    for document in ({}, {"kv_offloading_backend": "lmcache"}, {"kv_transfer_config": None}):
        d = decide(policy, document)
        assert (d.outcome, d.hma_enabled, d.connectors, d.warnings) == ("enabled", True, (), ())
        assert "offload.not_requested" in d.trace and "hma.no_connector" in d.trace


# --------------------------------------------------------------------------
# Section 1 rule 6 / section 2 has_connector: HiSparse
# --------------------------------------------------------------------------


def test_hisparse_direct_child_requires_hma(policy):
    document = {"kv_transfer_config": M(C("HiSparseConnector")), "disable_hybrid_kv_cache_manager": True}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "hisparse.requires_hma", "/disable_hybrid_kv_cache_manager")
    assert "hisparse.multi_child" in d.trace
    assert "HiSparse" in d.errors[0].message


def test_hisparse_nested_at_depth_2_is_not_detected(policy):
    # has_connector looks at direct children only.
    document = {"kv_transfer_config": M(M(C("HiSparseConnector"))), "disable_hybrid_kv_cache_manager": True}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled, d.warnings) == ("disabled", False, ())
    assert not any(rule.startswith("hisparse.") for rule in d.trace), d.trace
    # Nor is the CUDA requirement applied.
    d = decide(policy, {"kv_transfer_config": M(M(C("HiSparseConnector"))), "platform": {"is_cuda": False}})
    assert (d.outcome, d.hma_enabled) == ("enabled", True)
    # Nor the "HiSparse needs HMA" check when an unsupported sibling turns HMA off.
    d = decide(policy, {"kv_transfer_config": M(M(C("HiSparseConnector"), C("ExampleConnector")))})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert warning_codes(d) == ["hma.auto_disabled"]


def test_hisparse_direct_child_on_non_cuda(policy):
    d = decide(policy, {"kv_transfer_config": M(C("HiSparseConnector")), "platform": {"is_cuda": False}})
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "hisparse.requires_cuda", "/platform/is_cuda")


# --------------------------------------------------------------------------
# Section 3: external connectors (kv_connector_module_path)
# --------------------------------------------------------------------------

ACME = C("AcmeConnector", kv_connector_module_path="acme.kv.connector")


def test_undeclared_external_connector_is_undetermined(policy):
    d = decide(policy, {"kv_transfer_config": dict(ACME)})
    assert (d.outcome, d.hma_enabled) == ("undetermined", None)
    assert [(w.code, w.source, w.path) for w in d.warnings] == [("connector.capability_unknown", "policy", TOP)]
    w = d.warnings[0]
    assert "`AcmeConnector`" in w.message and "`acme.kv.connector`" in w.message
    # The hint says what to write and where, whatever the folder's layout (a bundle has no connectors.yaml).
    assert w.hint == ("declare it under `connectors` in a `kind: registry` file of your rules, with `registered: false`, "
                      "`module_path` and `supports_hma`")
    assert rows(d) == [(TOP, "AcmeConnector", None, "node.support.class_unknown")]
    assert "node.resolution.module_path" in d.trace and "node.class.external_undeclared" in d.trace
    assert "hma.auto_unknown" in d.trace
    assert policy.supports_hma(dict(ACME)) is None


def test_undeclared_external_child_warning_is_at_the_child(policy):
    document = {"kv_transfer_config": M(C("NixlConnector"), dict(ACME))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("undetermined", None)
    assert [(w.code, w.source, w.path) for w in d.warnings] == [("connector.capability_unknown", "policy", child(1))]
    assert resolve(document, d.warnings[0].path)["kv_connector"] == "AcmeConnector"
    assert rows(d)[0] == (TOP, "MultiConnector", None, "node.support.multi_child_unknown")


def test_undeclared_external_child_then_unsupported_child_is_disabled(policy):
    # Whatever Acme supports, the later Example makes all_children_support_hma False.
    d = decide(policy, {"kv_transfer_config": M(dict(ACME), C("ExampleConnector"))})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert sorted(warning_codes(d)) == ["connector.capability_unknown", "hma.auto_disabled"]
    assert rows(d)[0][2] is False
    # An unsupported child before it: the helper stops before reaching Acme.
    d = decide(policy, {"kv_transfer_config": M(C("ExampleConnector"), dict(ACME))})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)


def test_undeclared_external_with_explicit_disable(policy):
    d = decide(policy, {"kv_transfer_config": dict(ACME), "disable_hybrid_kv_cache_manager": True})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert "hma.explicit_disable" in d.trace
    assert "hma.auto_disabled" not in warning_codes(d)


def test_undeclared_external_with_explicit_enable(policy):
    # Config construction keeps HMA on; whether create_connector accepts the
    # class is unknown.
    d = decide(policy, {"kv_transfer_config": dict(ACME), "disable_hybrid_kv_cache_manager": False})
    assert (d.outcome, d.hma_enabled) == ("undetermined", True)
    assert warning_codes(d) == ["connector.capability_unknown"]
    assert "hma.explicit_enable" in d.trace


def test_umbp_store_connector_by_module_path(policy):
    ktc = C("UMBPStoreConnector", kv_connector_module_path="vllm.distributed.kv_transfer.kv_connector.v1.umbp")
    d = decide(policy, {"kv_transfer_config": ktc})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())
    assert "registry.UMBPStoreConnector.module" in d.trace
    assert rows(d) == [(TOP, "UMBPStoreConnector", True, "node.support.class_supported")]
    assert policy.supports_hma(ktc) is True
    # Not registered: by name alone it is an unsupported connector type.
    d = decide(policy, {"kv_transfer_config": C("UMBPStoreConnector")})
    assert first_error(d) == ("config", "connector.unknown", TOP + "/kv_connector")


def test_registered_name_with_module_path_is_looked_up_by_module_path(policy):
    # The module path takes priority over the registry, even for registered names.
    d = decide(policy, {"kv_transfer_config": C("NixlConnector", kv_connector_module_path="acme.kv.connector")})
    assert (d.outcome, d.hma_enabled) == ("undetermined", None)
    assert "registry.NixlConnector" not in d.trace
    assert warning_codes(d) == ["connector.capability_unknown"]
    ktc = C("ExampleConnector", kv_connector_module_path="vllm.distributed.kv_transfer.kv_connector.v1.example_connector")
    d = decide(policy, {"kv_transfer_config": ktc})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert "registry.ExampleConnector.module" in d.trace
    assert "registry.ExampleConnector" not in d.trace


def test_empty_module_path_is_an_error(policy):
    ktc = C("NixlConnector", kv_connector_module_path="")
    d = decide(policy, {"kv_transfer_config": ktc})
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "connector.module_path_empty", TOP + "/kv_connector_module_path")
    with pytest.raises(hma_policy.ConnectorError) as info:
        policy.supports_hma(ktc)
    assert info.value.problems[0].code == "connector.module_path_empty"


@pytest.mark.parametrize(
    "children, expect_enabled",
    [
        pytest.param([C("ExampleConnector")], False, id="unsupported-child"),
        pytest.param([C("NixlConnector"), C("OffloadingConnector")], True, id="supported-children"),
    ],
)
def test_module_path_class_literally_named_multiconnector_checks_its_children(policy, children, expect_enabled):
    # Reference section 8.2: "a module-path class literally named
    # "MultiConnector" does get the recursive child check" (section 1:
    # supports_hma_config compares the literal name, whatever the class).
    d = decide(policy, {"kv_transfer_config": M(*children, kv_connector_module_path="acme.multi")})
    assert d.hma_enabled is expect_enabled
    assert d.outcome == ("enabled" if expect_enabled else "disabled")
    assert ("hma.auto_disabled" in warning_codes(d)) is (not expect_enabled)


# --------------------------------------------------------------------------
# Section 5: model facts (downstream warnings)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kinds, expected",
    [
        pytest.param(["full_attention"], [], id="full"),
        pytest.param(["full_attention", "sliding_window"], [("model.hybrid_kv_unoptimized", "vllm")], id="full+swa"),
        pytest.param(["sliding_window"], [], id="swa-only"),
        pytest.param(["full_attention", "chunked_local"], [("model.hybrid_kv_unoptimized", "vllm")], id="full+chunked"),
        pytest.param(["chunked_local"], [], id="chunked-only"),
        pytest.param(["full_attention", "mamba"], [("model.ssm_requires_hma", "policy")], id="full+mamba"),
        pytest.param(["mamba"], [("model.ssm_requires_hma", "policy")], id="mamba-only"),
        pytest.param(["full_attention", "sliding_window", "mamba"],
                     [("model.hybrid_kv_unoptimized", "vllm"), ("model.ssm_requires_hma", "policy")], id="full+swa+mamba"),
    ],
)
def test_model_warnings_when_hma_is_off(policy, kinds, expected):
    document = {"kv_transfer_config": C("ExampleConnector"), "model": {"layer_kinds": kinds}}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    model_warnings = [(w.code, w.source) for w in d.warnings if w.code.startswith("model.")]
    assert sorted(model_warnings) == sorted(expected)
    for w in d.warnings:
        if w.code.startswith("model."):
            assert w.path == "/model/layer_kinds"
            resolve(document, w.path)
    # With an explicit disable the model warnings are the same, without hma.auto_disabled.
    document["disable_hybrid_kv_cache_manager"] = True
    d = decide(policy, document)
    assert sorted((w.code, w.source) for w in d.warnings) == sorted(expected)


def test_model_warnings_need_hma_off(policy):
    d = decide(policy, {"kv_transfer_config": C("NixlConnector"),
                        "model": {"layer_kinds": ["full_attention", "sliding_window", "chunked_local", "mamba"]}})
    assert (d.outcome, d.hma_enabled, d.warnings) == ("enabled", True, ())


def test_hybrid_kv_warning_message(policy):
    d = decide(policy, {"kv_transfer_config": C("ExampleConnector"),
                        "model": {"layer_kinds": ["full_attention", "sliding_window"]}})
    w = [w for w in d.warnings if w.code == "model.hybrid_kv_unoptimized"][0]
    assert "sliding window" in w.message
    s = decide(policy, {"kv_transfer_config": C("ExampleConnector"), "model": {"layer_kinds": ["mamba"]}})
    w = [w for w in s.warnings if w.code == "model.ssm_requires_hma"][0]
    assert "mamba" in w.message


def test_attention_chunk_size_alone_is_not_a_layer_kind(policy):
    d = decide(policy, {"kv_transfer_config": C("ExampleConnector"), "model": {"attention_chunk_size": 8192}})
    assert (d.outcome, d.hma_enabled) == ("disabled", False)
    assert warning_codes(d) == ["hma.auto_disabled"]


# --------------------------------------------------------------------------
# Error locations (JSON Pointers) and hints
# --------------------------------------------------------------------------


def test_child_engine_id_error_points_at_the_childs_engine_id(policy):
    document = {"kv_transfer_config": M(C("NixlConnector", engine_id="engine-a"))}
    d = decide(policy, document)
    # The HMA helper honours the override (HMA on); construction raises TypeError.
    assert (d.outcome, d.hma_enabled) == ("error", True)
    assert first_error(d) == ("connector", "multiconnector.child_engine_id",
                              "/kv_transfer_config/kv_connector_extra_config/connectors/0/engine_id")
    assert resolve(document, d.errors[0].path) == "engine-a"
    assert "engine_id" in d.errors[0].message


def test_nested_child_engine_id_error_path(policy):
    document = {"kv_transfer_config": M(C("NixlConnector"), M(C("OffloadingConnector", engine_id="e")))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", True)
    assert first_error(d) == ("connector", "multiconnector.child_engine_id", child(1, 0) + "/engine_id")
    assert resolve(document, d.errors[0].path) == "e"


def test_top_level_engine_id_is_fine(policy):
    d = decide(policy, {"kv_transfer_config": M(C("NixlConnector"), engine_id="parent")})
    assert (d.outcome, d.hma_enabled) == ("enabled", True)


def test_nested_missing_connectors_key_error_path(policy):
    document = {"kv_transfer_config": M({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                         "kv_connector_extra_config": {"other": 1}})}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", False)
    assert first_error(d) == ("connector", "multiconnector.connectors_missing", child(0) + "/kv_connector_extra_config")
    resolve(document, d.errors[0].path)


def test_missing_connector_name_error_path(policy):
    d = decide(policy, {"kv_transfer_config": {"kv_role": "kv_both"}})
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "connector.name_missing", TOP)
    assert "not set" in d.errors[0].message


def test_unknown_nested_connector_path_and_did_you_mean(policy):
    document = {"kv_transfer_config": M(C("ExampleHiddenStatesConnector"), M(C("NixConnector")))}
    d = decide(policy, document)
    assert (d.outcome, d.hma_enabled) == ("error", None)
    assert first_error(d) == ("config", "connector.unknown", child(1, 0) + "/kv_connector")
    assert resolve(document, d.errors[0].path) == "NixConnector"
    assert "NixlConnector" in (d.errors[0].hint or "")
    assert "did you mean" in d.errors[0].hint


@pytest.mark.parametrize(
    "typo, suggestion",
    [
        ("NixConnector", "NixlConnector"),
        ("multiconnector", "MultiConnector"),
        ("OffloadConnector", "OffloadingConnector"),
        ("LMCacheConnectorV2", "LMCacheConnectorV1"),
    ],
)
def test_unknown_connector_hint_offers_did_you_mean(policy, typo, suggestion):
    d = decide(policy, {"kv_transfer_config": C(typo)})
    assert first_error(d) == ("config", "connector.unknown", TOP + "/kv_connector")
    assert f"`{typo}`" in d.errors[0].message
    assert d.errors[0].hint == f"did you mean `{suggestion}`?"


def test_unknown_connector_far_from_any_name_gets_the_generic_hint(policy):
    d = decide(policy, {"kv_transfer_config": C("Zzzzzz")})
    assert first_error(d) == ("config", "connector.unknown", TOP + "/kv_connector")
    assert "did you mean" not in (d.errors[0].hint or "")
    assert d.errors[0].hint  # still a hint on what to do


def test_removed_registry_names_are_unknown(policy):
    for name in ("SharedStorageConnector", "P2pNcclConnector"):
        d = decide(policy, {"kv_transfer_config": C(name)})
        assert (d.outcome, d.hma_enabled) == ("error", None)
        assert first_error(d)[:2] == ("config", "connector.unknown")


@pytest.mark.parametrize(
    "document, code, path",
    [
        pytest.param({"kv_transfer_config": M({"kv_connector": "NixlConnector"})},
                     "connector.role_missing", child(0), id="child-missing-role"),
        pytest.param({"kv_transfer_config": M(C("NixlConnector"), {"kv_connector": "NixlConnector", "kv_role": "kv_sender"})},
                     "input.schema", child(1) + "/kv_role", id="child-bad-role"),
        pytest.param({"kv_transfer_config": M(C("NixlConnector", kv_unknown_field=1))},
                     "input.schema", child(0) + "/kv_unknown_field", id="child-unknown-field"),
        pytest.param({"kv_transfer_config": M(C("NixlConnector"), "NixlConnector")},
                     "input.schema", child(1), id="child-string"),
        pytest.param({"kv_transfer_config": {"kv_connector": "NixlConnector"}},
                     "connector.role_missing", TOP, id="top-missing-role"),
        pytest.param({"kv_transfer_config": C("NixlConnector", engine_id=7)},
                     "input.schema", TOP + "/engine_id", id="int-engine-id"),
    ],
)
def test_input_errors_point_at_the_offending_element(policy, document, code, path):
    problems = input_problems(policy, document)
    assert (problems[0].code, problems[0].path) == (code, path)
    resolve(document, problems[0].path)


def test_supports_hma_raises_where_vllm_raises(policy):
    with pytest.raises(hma_policy.ConnectorError) as info:
        policy.supports_hma({"kv_role": "kv_both"})
    assert info.value.problems[0].code == "connector.name_missing"
    with pytest.raises(hma_policy.ConnectorError) as info:
        policy.supports_hma(C("NoSuchConnector"))
    assert info.value.problems[0].code == "connector.unknown"
