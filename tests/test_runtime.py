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


def test_the_table_is_filled_in_one_state_of_the_c_core(monkeypatch):
    # load_policy() posts a batch per step (21 for the bundled rules), all in
    # one session: the C core creates and deletes one state for the whole
    # fill, which cost a fifth of it when each batch had its own.
    sizes = _count_posts(monkeypatch)
    deleted: list[object] = []
    original = _durable._dre.delete_state

    def counting(handle, sid):
        deleted.append(handle)
        return original(handle, sid)
    monkeypatch.setattr(_durable._dre, "delete_state", counting)
    policy = hma_policy.load_policy()
    try:
        assert len(sizes) > 10
        assert len(deleted) == 1
        assert policy.decide(TREE).outcome == "enabled"
    finally:
        policy.close()


def test_a_decision_after_load_posts_nothing_to_the_rule_runtime(monkeypatch):
    # load_policy() fills the step table with durable-rules' answer for every
    # reachable step input: the first decision of an 11-node tree of 8
    # connectors is table lookups only, as any later one.
    policy = hma_policy.load_policy()
    sizes = _count_posts(monkeypatch)
    try:
        decision = policy.decide(TREE)
        assert decision.outcome == "enabled"
        assert len(decision.connectors) == 11
        assert sizes == []
    finally:
        policy.close()


def test_the_first_decision_after_load_does_no_one_time_work(monkeypatch):
    # The option lists and the compiled schema check are made by
    # load_policy(), not by the first decision (which cost 3x a warm one
    # when it parsed the default release's option list a second time, under
    # another cache key, and compiled the schema check).
    from hma_policy.core import accept, optionlist

    policy = hma_policy.load_policy()
    made = []
    monkeypatch.setattr(optionlist, "_parse", lambda *a: made.append("option list"))
    monkeypatch.setattr(accept, "compile_schema", lambda *a: made.append("schema check"))
    try:
        assert policy.decide(TREE).outcome == "enabled"
        assert made == []
    finally:
        policy.close()


def test_the_first_decision_makes_the_calls_a_later_first_decision_makes():
    # What the benchmark's "first decide() after load" figure measures, as
    # work rather than time: the first decision of a tree in a process runs
    # the Python calls that the first decision of the same tree by a policy
    # loaded later runs (each computes every node's answer once), so nothing
    # that a process does once is left to it.
    import cProfile
    import pstats

    def calls(policy, document) -> int:
        profile = cProfile.Profile()
        profile.enable()
        policy.decide(document)
        profile.disable()
        return pstats.Stats(profile).total_calls

    first_policy, later_policy = hma_policy.load_policy(), None
    try:
        first = calls(first_policy, TREE)
        later_policy = hma_policy.load_policy()
        later = calls(later_policy, TREE)
        assert first <= 1.05 * later, (first, later)
        # A later decision of the tree with other leaves reuses what the
        # other nodes' facts gave: far fewer calls.
        assert calls(later_policy, _other_leaves(TREE)) < 0.8 * later
    finally:
        first_policy.close()
        if later_policy is not None:
            later_policy.close()


def _other_leaves(document):
    """``document`` with each leaf's connector swapped for another registered one."""
    import copy
    import json

    swapped = copy.deepcopy(document)
    text = json.dumps(swapped)
    for old, new in (("NixlConnector", "MooncakeConnector"), ("MooncakeConnector", "NixlConnector")):
        text = text.replace(f'"{old}"', f'"{new}-"')
    text = text.replace('-"', '"')
    return json.loads(text)


def test_an_input_outside_the_table_is_asked_once_then_kept(tmp_path, monkeypatch):
    # A list fact tested against more than eight names is walked one name at
    # a time, so a list holding two of them is outside the table: durable-rules
    # answers it on the first decision, and the table keeps the answer.
    from rulecopy import copy_rules, edit

    names = [f"Site{i}Connector" for i in range(9)]
    rules = copy_rules(tmp_path / "rules")
    edit(rules / "decision.yaml", "      - id: hisparse.multi_child\n",
         "".join(f"      - id: site.child_{i}\n        when: {{configured_child_names: {{contains: {n}}}, hisparse_config: true}}\n"
                 f"        value: true\n" for i, n in enumerate(names)) + "      - id: hisparse.multi_child\n")
    policy = hma_policy.load_policy(rules)
    sizes = _count_posts(monkeypatch)
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": n, "kv_role": "kv_both", "kv_connector_module_path": "site.kv"} for n in names[:2]]}}}
    try:
        first = policy.decide(document)
        assert sizes == [1]  # the one step whose input the walk did not reach
        again = policy.decide(document)
        assert sizes == [1] and again == first
    finally:
        policy.close()


def test_table_and_rule_runtime_agree():
    batched = hma_policy.load_policy()
    plain = hma_policy.load_policy(memo=False)  # no table: every step of every node posted
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
        assert a == b  # same facts, same paths
        assert c.trace != a.trace
        # The memo keys on the graph the rules see and on the document's own
        # inputs: a model fact, and the connector as configured, which the
        # offloading shorthand replaces (both graphs are then one
        # OffloadingConnector) but HiSparse's rules read.
        layered = policy.decide({"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                                 "model": {"layer_kinds": ["sliding_window"]}})
        assert layered.outcome == "enabled"
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
        assert not any(f == "top_name" for s in policy.model.steps["decision"] for r in s.rules for f, _, _ in r.when)
        # The same configured connector, replaced by the offloading shorthand
        # with one of two connectors: only `top_name` tells them apart.
        base = {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}, "kv_offloading_size": 4}
        for env, name in (({}, "OffloadingConnector"), ({"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}, "SimpleCPUOffloadConnector")):
            d = policy.decide({**base, "env": env})
            assert d.outcome == "enabled"
            assert f"HMA is on by default with {name}" in d.reasons
    finally:
        policy.close()


def test_names_no_rule_of_a_step_mentions_share_a_table_row_but_not_decisions_or_steps():
    # `hisparse_active` compares the configured children's names only with
    # HiSparseConnector: two MultiConnectors whose supported children differ
    # in name look up one row of its table, yet each decision lists its own
    # connectors and records its own names.
    policy = hma_policy.load_policy()

    def multi(*names):
        return {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
            "connectors": [{"kv_connector": n, "kv_role": "kv_both"} for n in names]}}}

    try:
        a = policy.decide(multi("NixlConnector", "MooncakeConnector"))
        b = policy.decide(multi("NixlPullConnector", "MoRIIOConnector"))
        key = policy.table.keys[("decision", "hisparse_active")]
        assert key({"configured_child_names": ("NixlConnector", "MooncakeConnector"), "hisparse_config": False,
                    "configured_top_name": "MultiConnector"}) == key(
                   {"configured_child_names": ("NixlPullConnector", "MoRIIOConnector"), "hisparse_config": False,
                    "configured_top_name": "MultiConnector"})
        assert a != b and a.outcome == b.outcome == "enabled"
        assert [c.kv_connector for c in b.connectors] == ["MultiConnector", "NixlPullConnector", "MoRIIOConnector"]
        read = {s.step: dict(s.facts) for s in b.steps if s.ruleset == "decision"}
        assert read["hisparse_active"]["configured_child_names"] == ("NixlPullConnector", "MoRIIOConnector")
        # A name the step does mention is a class of its own.
        c = policy.decide({**multi("NixlConnector", "HiSparseConnector"), "platform": {"is_cuda": False}})
        assert c.outcome == "error" and c.errors[0].code == "hisparse.requires_cuda"
    finally:
        policy.close()


def test_the_table_gives_the_decisions_and_steps_of_the_rule_runtime():
    # Many documents through one long-lived policy (its table keyed by fact
    # classes) against a policy that posts every step of every document.
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
    [handle] = [runtime._handle for runtime in policy._runtimes]
    del policy
    gc.collect()
    assert unloaded == [handle]
    closed = hma_policy.load_policy()
    closed.close()
    del closed
    gc.collect()
    assert len(unloaded) == 2  # close() unloads once; the finalizer does not again


def test_with_two_strings_the_runtime_refuses_the_graphs_is_reported_first_with_or_without_memos():
    # An input the runtime refuses (an unpaired surrogate) is reported where
    # the facts are read: the graph's first, with or without the table.
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
