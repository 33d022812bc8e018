"""The rule-runtime driver (engine/_durable.py) and how the evaluator batches
its posts: answers come back per event, in the order posted; unsafe events
never reach the C core; independent work shares one post per round."""

from __future__ import annotations

import pytest

import hma_policy
from hma_policy.core import _durable as _durable
from hma_policy.core._durable import RuleRuntime, RuntimeFault, check_event


def _step_definition() -> dict:
    # One step "s": x == 1 -> r0, x == 2 -> r1, anything else -> r2 (the catch-all).
    return {
        "r0": {"all": [{"m": {"$and": [{"t": "s"}, {"x": 1}]}}], "pri": 1},
        "r1": {"all": [{"m": {"$and": [{"t": "s"}, {"x": 2}]}}], "pri": 2},
        "r2": {"all": [{"m": {"t": "s"}}], "pri": 1_000_000},
    }


@pytest.fixture
def runtime():
    rt = RuleRuntime(_step_definition())
    yield rt
    rt.close()


def test_a_batch_answers_each_event_in_the_order_posted(runtime):
    events = [{"t": "s", "x": 2}, {"t": "s", "x": 3}, {"t": "s", "x": 1}, {"t": "s", "x": 2}]
    assert runtime.fire_many(events) == ["r1", "r2", "r0", "r1"]
    # The session is gone after each batch: the same ids can be posted again.
    assert runtime.fire_many(events[:1]) == ["r1"]


def test_a_string_fact_that_spells_an_event_id_does_not_confuse_the_answer(runtime):
    tricky = 'a", "id": "7'
    events = [{"t": "s", "x": 1, "y": tricky}, {"t": "s", "x": 9, "y": tricky}]
    assert runtime.fire_many(events) == ["r0", "r2"]


@pytest.mark.parametrize(
    "event, message",
    [
        ({"t": "s", "x": 1.5}, "fact `x` has type float, which the rule runtime cannot take safely"),
        ({"t": "s", "x": 2**40}, "fact `x` is out of the integer range"),
        ({"t": "s", "x": "a\x00b"}, "fact `x` is not a short NUL-free string"),
        ({"t": "s", "x": "\ud800"}, "fact `x` is not valid UTF-8"),
        ({"t": "s", "id": "1"}, "fact name `id` is not allowed"),
        ({"t": "s", "bad key": 1}, "fact name `bad key` is not allowed"),
        ({"t": "s", "x": ["a", 1]}, "fact `x` must hold strings"),
        ({"t": "s", **{f"f{i}": True for i in range(64)}}, "too many facts in one event"),
    ],
)
def test_unsafe_events_are_refused_before_the_c_core(runtime, event, message):
    with pytest.raises(RuntimeFault) as info:
        runtime.fire_many([{"t": "s", "x": 1}, event])
    assert str(info.value) == message
    assert runtime.fire_many([{"t": "s", "x": 1}]) == ["r0"]  # nothing was posted


def test_a_session_shares_one_state_across_posts(runtime):
    with runtime.session():
        assert runtime.fire_many([{"t": "s", "x": 1}, {"t": "s", "x": 2}]) == ["r0", "r1"]
        assert runtime.fire_many([{"t": "s", "x": 2}]) == ["r1"]  # ids go on: 3, not 1 again
        with runtime.session():  # nested: the same session
            assert runtime.fire_many([{"t": "s", "x": 7}]) == ["r2"]
    assert runtime.fire_many([{"t": "s", "x": 1}]) == ["r0"]  # a fresh state after it


def test_a_session_whose_posts_were_all_refused_ends_cleanly(runtime):
    # No state was created (nothing reached the C core): ending the session
    # must not delete one, which would crash the process.
    with runtime.session():
        with pytest.raises(RuntimeFault):
            runtime.fire_many([{"t": "s", "x": 1.5}])
    assert runtime.fire_many([{"t": "s", "x": 1}]) == ["r0"]


def test_a_long_session_renews_its_state_before_ids_could_collide(runtime, monkeypatch):
    monkeypatch.setattr(_durable, "_MAX_STATE_IDS", 5)
    with runtime.session():
        for round_ in range(6):
            assert runtime.fire_many([{"t": "s", "x": 1}, {"t": "s", "x": 2}]) == ["r0", "r1"], round_


def test_a_closed_runtime_refuses_events(runtime):
    runtime.close()
    with pytest.raises(RuntimeFault, match="the policy was closed"):
        runtime.fire_many([{"t": "s", "x": 1}])


def test_check_event_accepts_the_fact_types_of_the_vocabulary():
    check_event({"t": "node.support", "name": "NixlConnector", "children": 3, "name_set": True,
                 "configured_child_names": ["A", "B"], "text": "caf\u00e9"})


LEAF = {"kv_role": "kv_both"}
TREE = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
    {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": n, **LEAF} for n in ("NixlConnector", "OffloadingConnector", "MooncakeConnector", "MooncakeStoreConnector")]}},
    {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
        {"kv_connector": n, **LEAF} for n in ("NixlPullConnector", "NixlPushConnector", "MoRIIOConnector", "HiSparseConnector")]}},
]}}}


def _count_posts(monkeypatch) -> list[int]:
    sizes: list[int] = []
    original = _durable.RuleRuntime.fire_many

    def counting(self, events):
        sizes.append(len(events))
        return original(self, events)
    monkeypatch.setattr(_durable.RuleRuntime, "fire_many", counting)
    return sizes


def test_a_cold_decision_posts_one_batch_per_round_not_one_per_node(monkeypatch):
    policy = hma_policy.load_policy()  # primed at load; nothing of this document is cached
    sizes = _count_posts(monkeypatch)
    decision = policy.decide(TREE)
    policy.close()
    assert decision.outcome == "enabled"
    # 11 nodes of 3 heights, 3 node levels each, the offloading rules beside
    # the leaves, then at most 4 decision levels: at most 13 posts, where one
    # post per node and level would be 2 + 33 + 4.
    assert len(sizes) <= 13
    assert sizes[0] >= 2  # the offloading rules share the first round with the leaves


def test_equal_events_of_one_round_are_posted_once(monkeypatch):
    policy = hma_policy.load_policy()
    sizes = _count_posts(monkeypatch)
    names = ("NixlConnector", "OffloadingConnector", "MooncakeConnector")
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"connectors": [{"kv_connector": n, **LEAF} for n in names]}}}
    decision = policy.decide(document)
    policy.close()
    assert [c.support for c in decision.connectors] == ["supported"] * 4
    # Three leaves whose `resolution` and `setup` read the same facts: those
    # steps are posted once for all three (beside the offloading rules'
    # two steps). `class_hma` compares the name with each registered name, so
    # each leaf posts its own; `support` and `construct` compare it only with
    # MultiConnector, which none of the three is, so they share one event each.
    assert sizes[:3] == [1 + 1, 1 + 3, 1 + 1 + 1]


def test_batched_and_unbatched_evaluation_agree():
    batched = hma_policy.load_policy()
    plain = hma_policy.load_policy(memo=False)  # every step of every node posted, none shared
    try:
        for document in (TREE, {"kv_transfer_config": TREE["kv_transfer_config"], "kv_offloading_size": 4},
                         {"kv_transfer_config": TREE["kv_transfer_config"], "disable_hybrid_kv_cache_manager": False}):
            a, b = batched.decide(document), plain.decide(document)
            assert a.to_dict() == b.to_dict()
            assert a.steps == b.steps
    finally:
        batched.close()
        plain.close()


# -- memos: what may be shared, and what may not --------------------------------

def test_documents_that_differ_only_outside_the_facts_share_one_decision():
    policy = hma_policy.load_policy()
    try:
        a = policy.decide({"name": "a", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 1}})
        b = policy.decide({"name": "b", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 2}})
        c = policy.decide({"kv_transfer_config": {"kv_connector": "NixlPullConnector", "kv_role": "kv_both"}})
        assert a is b  # the decision memo: same facts, same paths
        assert c is not a and c.trace != a.trace
        # The memo keys on the graph the rules see and on the document's own
        # inputs: a model fact, and the connector as configured, which the
        # offloading shorthand replaces (both graphs are then one
        # OffloadingConnector) but HiSparse's rules read.
        layered = policy.decide({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                                 "model": {"layer_kinds": ["sliding_window"]}})
        assert layered is not a and layered.outcome == "enabled"
        shorthand = {"kv_offloading_size": 4, "platform": {"is_cuda": False}}
        hisparse = policy.decide({**shorthand, "kv_transfer_config": {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}})
        nixl = policy.decide({**shorthand, "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}})
        assert [e.code for e in hisparse.errors] == ["hisparse.requires_cuda"]
        assert (nixl.outcome, nixl.errors) == ("enabled", ())
    finally:
        policy.close()


def test_a_reason_that_shows_a_fact_no_rule_reads_is_rendered_for_each_document(tmp_path):
    # Templates are shared by the facts rules read *and* those reasons name:
    # a reason showing `top_name` (which no bundled rule tests) must not be
    # reused across connectors.
    from rulecopy import copy_rules, edit

    rules = copy_rules(tmp_path / "rules")
    edit(rules / "decision.yaml", "reason: HMA is on by default", 'reason: "HMA is on by default with {top_name}"')
    policy = hma_policy.load_policy(rules)
    try:
        assert not any(f == "top_name" for s in policy._model.steps["decision"] for r in s.rules for f, _, _ in r.when)
        # The same configured connector, replaced by the offloading shorthand
        # with one of two connectors: only `top_name` tells them apart.
        base = {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}, "kv_offloading_size": 4}
        for env, name in (({}, "OffloadingConnector"), ({"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}, "SimpleCPUOffloadConnector")):
            d = policy.decide({**base, "env": env})
            assert d.outcome == "enabled"
            assert f"HMA is on by default with {name}" in d.reasons
    finally:
        policy.close()


def test_names_no_rule_of_a_step_mentions_share_its_templates_but_not_decisions_or_steps():
    # `hisparse_active` compares the configured children's names only with
    # HiSparseConnector: two MultiConnectors whose supported children differ
    # in name share the decision ruleset's template (no new round), yet each
    # decision lists its own connectors and records its own names.
    policy = hma_policy.load_policy()
    evaluator = policy._evaluator

    def multi(*names):
        return {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "connectors": [{"kv_connector": n, "kv_role": "kv_both"} for n in names]}}}

    try:
        a = policy.decide(multi("NixlConnector", "MooncakeConnector"))
        def decision_templates():  # the template objects (an exact key may be held beside its class's)
            return {id(t) for k, t in evaluator._templates.items() if k[0] == "decision"}
        held = decision_templates()
        b = policy.decide(multi("NixlPullConnector", "MoRIIOConnector"))
        assert decision_templates() == held  # the decision template was shared, not made again
        assert a is not b and a.outcome == b.outcome == "enabled"
        assert [c.kv_connector for c in b.connectors] == ["MultiConnector", "NixlPullConnector", "MoRIIOConnector"]
        read = {s.step: dict(s.facts) for s in b.steps if s.ruleset == "decision"}
        assert read["hisparse_active"]["configured_child_names"] == ("NixlPullConnector", "MoRIIOConnector")
        # A name the step does mention is a class of its own.
        c = policy.decide({**multi("NixlConnector", "HiSparseConnector"), "platform": {"is_cuda": False}})
        assert c.outcome == "error" and c.errors[0].code == "hisparse.requires_cuda"
    finally:
        policy.close()


def test_classed_templates_give_the_decisions_and_steps_of_no_memo():
    # Many documents through one long-lived policy (its templates shared by
    # fact classes) against a policy that posts every step of every document.
    from compare import answer
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from strategies import documents

    shared = hma_policy.load_policy()
    plain = hma_policy.load_policy(memo=False)

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(documents(max_nodes=8, max_depth=3), min_size=1, max_size=8))
    def check(batch):
        for document in batch:
            assert answer(shared, document) == answer(plain, document)

    try:
        check()
    finally:
        shared.close()
        plain.close()


def test_a_policy_dropped_without_close_unloads_its_ruleset(monkeypatch):
    # Each ruleset holds about 185 KiB of the C core's memory: a program that
    # loads policies and forgets close() must not keep them all.
    import gc

    unloaded = []
    real = _durable._dre.delete_ruleset
    monkeypatch.setattr(_durable._dre, "delete_ruleset", lambda handle: unloaded.append(handle) or real(handle))
    policy = hma_policy.load_policy()
    assert policy.decide({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}).outcome == "enabled"
    handle = policy._evaluator.runtime._handle
    del policy
    gc.collect()
    assert unloaded == [handle]
    closed = hma_policy.load_policy()
    closed.close()
    del closed
    gc.collect()
    assert len(unloaded) == 2  # close() unloads once; the finalizer does not again


def test_equal_graph_signatures_have_equal_graphs_and_node_facts():
    # The evaluator holds one plan per graph signature (facts.graph_signature)
    # and gives it to every graph with that signature: sound only if the
    # signature determines the graph's shape and names and each node's facts.
    # Small random graphs collide often; each also gets a copy that differs
    # only where no fact reads (ports, ids, roles), which must collide.
    import random

    from hma_policy.core.input import prepare
    from hma_policy.core.errors import InputError
    from hma_policy.core.facts import build_graph, graph_signature, node_facts
    from strategies import RandomPicker, document

    containers = hma_policy.load_policy()._evaluator.model.containers
    verdict = {"support": "supported", "setup": "ok", "construct": "ok"}

    def graph(doc):
        env = {"env_lmcache_use_upstream_mp": bool(doc.get("env", {}).get("LMCACHE_USE_UPSTREAM_MP"))}
        nodes = build_graph(doc.get("kv_transfer_config"), containers)
        verdicts = {node.path: verdict for node in nodes}
        return (graph_signature(doc.get("kv_transfer_config"), containers, env),
                [(node.path, node.name, node_facts(node, verdicts, env)) for node in nodes])

    rng = random.Random(5)
    seen: dict = {}
    collisions = copies = 0
    for _ in range(3000):
        try:
            doc = prepare(document(RandomPicker(rng), max_nodes=3, max_depth=2))
        except InputError:
            continue
        signature, facts = graph(doc)
        if signature is None:
            continue
        if signature in seen:
            collisions += 1
            assert seen[signature] == facts, signature
        seen[signature] = facts
        ktc = doc.get("kv_transfer_config")
        if isinstance(ktc, dict):
            copy = dict(doc, kv_transfer_config=dict(ktc, kv_port=1, engine_id="other", kv_role="kv_consumer"))
            assert graph(copy) == (signature, facts)
            copies += 1
    assert collisions > 1000 and copies > 1000


def test_with_two_strings_the_runtime_refuses_the_graphs_is_reported_first_with_or_without_memos():
    # The decision memo's key reads the document's own inputs before the
    # graph's facts are built; an input the runtime refuses (an unpaired
    # surrogate) must not change which error is reported: the graph's, as
    # when every step is posted.
    child = "/kv_transfer_config/kv_connector_extra_config/connectors/0/kv_connector"
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "Nixl\ud800", "kv_role": "kv_both"}]}}, "speculative_config": {"method": "eagle\ud800"}}
    for memo in (True, False):
        policy = hma_policy.load_policy(memo=memo)
        try:
            with pytest.raises(hma_policy.InputError) as info:
                policy.decide(document)
            assert [(p.code, p.path) for p in info.value.problems] == [("input.encoding", child)]
            alone = {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                     "speculative_config": {"method": "eagle\ud800"}}
            with pytest.raises(hma_policy.InputError) as info:
                policy.decide(alone)
            assert [(p.code, p.path) for p in info.value.problems] == [("input.encoding", "/speculative_config/method")]
        finally:
            policy.close()
