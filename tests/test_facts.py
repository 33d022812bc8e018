"""Facts extraction (engine/core/facts.py): what a document gives the rules.

Each test builds a small document, extracts its facts once, and checks the
records field by field: the offloading and document facts, and the connector
graph in post-order with each node's own facts.
"""

from __future__ import annotations

import pytest

from hma_policy.core.errors import InputError
from hma_policy.core.facts import DECLARED, RELEASE_FACTS, DocumentFacts, NodeFacts, OffloadingFacts, declared, extract
from hma_policy.core.input import prepare

CONTAINERS = frozenset({"MultiConnector"})


def facts_of(document):
    return extract(prepare(document), CONTAINERS)


def leaf(name, **more):
    return {"kv_connector": name, "kv_role": "kv_both", **more}


def multi(*children, **more):
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": list(children)}, **more}


def test_the_records_hold_exactly_the_declared_facts_in_order():
    # The release facts are the policy's, not the document's: evaluation adds them.
    release = {f.name for f in RELEASE_FACTS}
    assert release == {"vllm_minor", "vllm_patch"}
    assert OffloadingFacts._fields == tuple(f for f in declared("offloading") if f not in release)
    assert NodeFacts._fields == tuple(f for f in declared("node") if f not in release)
    assert DocumentFacts._fields == tuple(f.name for f in DECLARED if f.ruleset == "decision" and not f.from_graph)


def test_an_empty_document_has_no_graph_and_vllms_defaults():
    facts = facts_of({})
    assert facts.graph == ()
    assert facts.offloading == OffloadingFacts(kv_offloading_size_set=False, kv_offloading_backend="native",
                                               kv_offloading_backend_set=False, env_use_simple_kv_offload=False)
    assert facts.document._asdict() == {
        "preference": "none", "platform_supports_hybrid_kv_cache": True, "platform_is_cuda": True, "platform_name": "",
        "chunked_local_attention": False, "speculative_method": "", "hisparse_config": False,
        "configured_top_name": "", "configured_child_names": (), "layer_full_attention": False,
        "layer_sliding_window": False, "layer_chunked_local": False, "layer_mamba": False,
        "env_allow_chunked_local_attn_with_hybrid_kv_cache": True, "env_use_simple_kv_offload": False,
        "env_lmcache_use_upstream_mp": False, "env_allow_chunked_local_attn_set": False, "env_use_v1": True,
        "kv_events_configured": False, "chunked_prefill_off": False, "kv_transfer_config_configured": False,
        "kv_offloading_size_set": False, "kv_offloading_backend_set": False,
    }
    # The boolean false turns chunked prefill off, also written as vLLM's config reads it ("false"); any other
    # value leaves the default (a value of any type was accepted, and ignored, before the field was read).
    assert [facts_of({"enable_chunked_prefill": value}).document.chunked_prefill_off
            for value in (False, True, None, "false", "no")] == [True, False, False, True, False]


def test_document_facts_are_read_as_vllm_reads_them():
    facts = facts_of({
        "kv_transfer_config": leaf("NixlConnector"), "disable_hybrid_kv_cache_manager": False,
        "kv_offloading_size": 4, "kv_offloading_backend": "lmcache",
        "speculative_config": {"method": "eagle3"}, "hisparse_config": {},
        "model": {"attention_chunk_size": 8192, "layer_kinds": ["sliding_window", "mamba"]},
        "platform": {"supports_hybrid_kv_cache": False, "is_cuda": False},
        "env": {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1", "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": " 0 ",
                "LMCACHE_USE_UPSTREAM_MP": "yes"},
    })
    assert facts.offloading == OffloadingFacts(kv_offloading_size_set=True, kv_offloading_backend="lmcache",
                                               kv_offloading_backend_set=True, env_use_simple_kv_offload=True)
    d = facts.document
    assert (d.preference, d.speculative_method, d.hisparse_config, d.chunked_local_attention) == ("enable", "eagle3", True, True)
    assert (d.layer_full_attention, d.layer_sliding_window, d.layer_chunked_local, d.layer_mamba) == (False, True, False, True)
    assert (d.platform_supports_hybrid_kv_cache, d.platform_is_cuda) == (False, False)
    # bool(int(" 0 ")) is False; LMCACHE_USE_UPSTREAM_MP counts when set at all
    assert (d.env_allow_chunked_local_attn_with_hybrid_kv_cache, d.env_use_simple_kv_offload,
            d.env_lmcache_use_upstream_mp) == (False, True, True)
    assert d.configured_top_name == "NixlConnector" and d.configured_child_names == ()
    # Set explicitly (older releases read whether it was set, not only its value)
    assert (d.env_allow_chunked_local_attn_set, d.env_use_v1, d.kv_transfer_config_configured) == (True, True, True)
    assert d.kv_events_configured is False
    # The decision reads them too: releases before 0.14.0 check the shorthand after the HMA decision.
    assert (d.kv_offloading_size_set, d.kv_offloading_backend_set) == (True, True)
    backend_only = facts_of({"kv_offloading_backend": "native"}).document
    assert (backend_only.kv_offloading_size_set, backend_only.kv_offloading_backend_set) == (False, True)


def test_the_graph_is_in_post_order_with_each_nodes_own_facts():
    facts = facts_of({"kv_transfer_config": multi(
        leaf("NixlConnector"),
        multi(leaf("LMCacheConnectorV1", engine_id="x"), leaf("Acme", kv_connector_module_path="acme.kv")),
        leaf("ExampleConnector"))})
    base = "/kv_transfer_config/kv_connector_extra_config/connectors"
    assert [n.path for n in facts.graph] == [
        f"{base}/0", f"{base}/1/kv_connector_extra_config/connectors/0",
        f"{base}/1/kv_connector_extra_config/connectors/1", f"{base}/1", f"{base}/2", "/kv_transfer_config"]
    assert [n.children for n in facts.graph] == [(), (), (), (1, 2), (), (0, 3, 4)]
    assert [n.facts.depth for n in facts.graph] == [1, 2, 2, 1, 1, 0]
    top = facts.graph[-1].facts
    assert (top.name, top.is_child, top.children, top.connectors, top.sets_engine_id) == ("MultiConnector", False, 3, "present", False)
    child = facts.graph[1].facts
    assert (child.name, child.is_child, child.sets_engine_id, child.children) == ("LMCacheConnectorV1", True, True, 0)
    external = facts.graph[2].facts
    assert (external.module_path, external.module_path_value) == ("set", "acme.kv")
    assert facts.document.configured_child_names == ("NixlConnector", "MultiConnector", "ExampleConnector")


def test_a_name_outside_the_containers_lists_no_children():
    facts = facts_of({"kv_transfer_config": leaf("NixlConnector", kv_connector_extra_config={"connectors": [leaf("X")]})})
    (node,) = facts.graph
    assert (node.facts.children, node.facts.connectors, node.children) == (0, "present", ())
    assert facts.document.configured_child_names == ()


def test_names_and_module_paths_unset_empty_or_given():
    facts = facts_of({"kv_transfer_config": multi({"kv_role": "kv_both"}, leaf("Nixl", kv_connector_module_path=""),
                                                  leaf("Nixl", kv_connector_module_path=None))})
    unnamed, empty, absent, _ = (n.facts for n in facts.graph)
    assert (unnamed.name, unnamed.name_set, facts.graph[0].kv_connector) == ("", False, None)
    assert (empty.module_path, empty.module_path_value) == ("empty", "")
    assert (absent.module_path, absent.module_path_value) == ("absent", "")


def test_a_name_is_registered_when_the_releases_registry_registers_it():
    """name_registered: the node's kv_connector is one of the registered names
    given to extract (the release's registry); the shorthand's rewrite keeps them."""
    document = prepare({"kv_transfer_config": multi(leaf("NixlConnector", kv_connector_module_path="my.module"),
                                                    leaf("MyConnector"), {"kv_role": "kv_both"}),
                        "kv_offloading_size": 1})
    registered = frozenset({"NixlConnector", "MultiConnector", "OffloadingConnector"})
    facts = extract(document, CONTAINERS, None, registered)
    assert [n.facts.name_registered for n in facts.graph] == [True, False, False, True]
    assert [n.facts.name_registered for n in facts.effective_graph("OffloadingConnector", "kv_both")] == [True]
    # without the registry, no name is registered
    assert not any(n.facts.name_registered for n in extract(document, CONTAINERS).graph)


def test_the_offloading_shorthand_rewrites_the_top_connector_only():
    facts = facts_of({"kv_transfer_config": multi(leaf("NixlConnector"), leaf("ExampleConnector")), "kv_offloading_size": 1})
    rewritten = facts.effective_graph("OffloadingConnector", "kv_both")
    assert [(n.path, n.facts.name, n.facts.children) for n in rewritten] == [("/kv_transfer_config", "OffloadingConnector", 0)]
    assert facts.effective_graph(None, None) is facts.graph
    # With no kv_transfer_config, the shorthand creates one.
    created = facts_of({"kv_offloading_size": 1}).effective_graph("OffloadingConnector", "kv_both")
    assert [(n.path, n.facts.name, n.facts.name_set) for n in created] == [("/kv_transfer_config", "OffloadingConnector", True)]


def test_equal_facts_give_equal_keys_whatever_else_differs():
    a = facts_of({"kv_transfer_config": leaf("NixlConnector", kv_port=1, engine_id="a"), "model": {"name": "x"}})
    b = facts_of({"kv_transfer_config": leaf("NixlConnector", kv_port=2, engine_id="b")})
    c = facts_of({"kv_transfer_config": leaf("NixlPullConnector")})
    assert a.key == b.key and hash(a.key) == hash(b.key)
    assert a.key != c.key


@pytest.mark.parametrize("document, path", [
    ({"kv_transfer_config": leaf("Nixl\ud800")}, "/kv_transfer_config/kv_connector"),
    ({"kv_transfer_config": leaf("X", kv_connector_module_path="a\ud800")}, "/kv_transfer_config/kv_connector_module_path"),
    ({"speculative_config": {"method": "eagle\ud800"}}, "/speculative_config/method"),
])
def test_a_string_the_rule_runtime_cannot_take_is_an_input_error_at_its_place(document, path):
    with pytest.raises(InputError) as info:
        facts_of(document)
    assert [(p.code, p.path, p.message) for p in info.value.problems] == [
        ("input.encoding", path, "the string holds an unpaired surrogate")]
