"""Random deployment documents, for hypothesis and for plain ``random``.

One generator serves both: it draws through a small *picker* interface, so
the CI tests get hypothesis's shrinking (the first option of every choice is
the simplest, and hypothesis shrinks towards it) while
benchmarks/differential.py draws a million documents from ``random.Random``
without hypothesis's per-example overhead.

The documents cover what the HMA decision reads: every registered connector
name, unknown names, external classes by module path (declared in the
registry or not), MultiConnector graphs up to 6 levels and 60 nodes with
empty, missing and malformed children lists, children with their own
``engine_id``, empty module paths, missing ``kv_connector``, the user's
preference, platform facts, chunked local attention with speculative
methods, the environment switches, the offloading shorthand, HiSparse and the
model's layer kinds, plus a few invalid shapes (missing ``kv_role``, a child
that is not an object, an unreadable environment switch) and vLLM's CLI
spellings (kebab-case keys, a kv_transfer_config given as a JSON string).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any, Sequence, TypeVar

from hypothesis import strategies as st

__all__ = [
    "RandomPicker",
    "HypothesisPicker",
    "document",
    "documents",
    "json_values",
    "REGISTERED_NAMES",
    "V1",
]

T = TypeVar("T")

V1 = "vllm.distributed.kv_transfer.kv_connector.v1."
# The 17 names of vLLM 0.33.0's factory registry (reference §3).
REGISTERED_NAMES = (
    "NixlConnector", "ExampleConnector", "OffloadingConnector", "LMCacheConnectorV1", "LMCacheMPConnector",
    "ExampleHiddenStatesConnector", "NixlPullConnector", "NixlPushConnector", "MultiConnector", "HiSparseConnector",
    "MoRIIOConnector", "DecodeBenchConnector", "MooncakeConnector", "MooncakeStoreConnector", "FlexKVConnectorV1",
    "SimpleCPUOffloadConnector", "HF3FSKVConnector",
)
UNKNOWN_NAMES = (
    "NoSuchConnector", "SharedStorageConnector", "P2pNcclConnector", "UMBPStoreConnector", "NixConnector",
    "multiconnector", "Nixl\u0301Connector", "\uff2dultiConnector", "",
)
# (module path, class). The first group is declared in the bundled registry,
# the second is not (so its HMA support is unknown); acme.multi's class is
# literally named MultiConnector, so vLLM asks its children.
EXTERNALS = (
    (V1 + "umbp", "UMBPStoreConnector"),
    (V1 + "example_connector", "ExampleConnector"),
    (V1 + "nixl", "NixlPushConnector"),
    (V1 + "nixl", "NixlConnector"),
    (V1 + "multi_connector", "MultiConnector"),
    (V1 + "lmcache_mp_connector", "LMCacheMPConnector"),
    (V1 + "offloading_connector", "OffloadingConnector"),
    (V1 + "flexkv_connector", "FlexKVConnectorV1"),
    ("acme.kv.connector", "AcmeConnector"),
    ("acme.kv.connector", "NixlConnector"),
    ("acme.multi", "MultiConnector"),
    (V1 + "nixl", "ExampleConnector"),
    ("other.pkg.mod", "OtherConnector"),
)
ROLES = ("kv_both", "kv_producer", "kv_consumer")
METHODS = ("ngram", "eagle", "eagle3", "mtp", "dflash", "dspark", "medusa", "EAGLE", "draft_model", None)
LAYER_KINDS = ("full_attention", "sliding_window", "chunked_local", "mamba")
INT_SWITCH_VALUES = ("1", "0", " 1 ", "+0", "-1", "007", 0, 1, 2, True, False)
INVALID_SWITCH_VALUES = ("yes", "", "1.5", "0x1")
JUNK_VALUES = (1, 2.5, 1e-05, 1e16, -0.0, "tcp://10.0.0.1:5555", None, True, [1, [2, [3]]], {"a": {"b": 1e308}})
KEBAB = {
    "kv_transfer_config": "kv-transfer-config",
    "disable_hybrid_kv_cache_manager": "disable-hybrid-kv-cache-manager",
    "kv_offloading_size": "kv-offloading-size",
    "kv_offloading_backend": "kv-offloading-backend",
    "speculative_config": "speculative-config",
    "hisparse_config": "hisparse-config",
    "kv_events_config": "kv-events-config",
}
KEBAB_BACK = {kebab: name for name, kebab in KEBAB.items()}


class RandomPicker:
    """Draws from ``random.Random`` (fast; for the million-document benchmark)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def weighted(self, pairs: Sequence[tuple[T, int]]) -> T:
        # Through integer(), which each picker draws in its own way (randint
        # is randrange(total) here, so seeded runs draw what they drew before).
        total = sum(w for _, w in pairs)
        mark = self.integer(0, total - 1)
        for value, weight in pairs:
            if mark < weight:
                return value
            mark -= weight
        raise AssertionError("unreachable")

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability


class HypothesisPicker(RandomPicker):
    """Draws through hypothesis; every draw shrinks towards its first option."""

    def __init__(self, draw: Any):
        self.draw = draw

    def choice(self, options: Sequence[T]) -> T:
        return options[self.draw(st.integers(0, len(options) - 1))]

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def chance(self, probability: float) -> bool:
        # Shrinks to 0, i.e. to "not taken".
        return self.draw(st.integers(0, 9999)) >= 10000 - int(probability * 10000)


class _Budget:
    def __init__(self, nodes: int):
        self.nodes = nodes


def _node(p: RandomPicker, budget: _Budget, depth: int, max_depth: int, is_child: bool) -> Any:
    budget.nodes -= 1
    if is_child and p.chance(0.004):
        return p.choice(["NixlConnector", ["NixlConnector", "kv_both"], 7, None])  # not an object
    can_nest = depth < max_depth and budget.nodes > 0
    kind = p.weighted([
        ("registered", 50), ("multi", 28 if can_nest else 0), ("external", 10), ("unknown", 6),
        ("no_name", 2), ("null_name", 1), ("empty_module", 2),
    ])
    node: dict[str, Any] = {}
    if kind == "registered":
        node["kv_connector"] = p.choice(REGISTERED_NAMES)
    elif kind == "multi":
        node["kv_connector"] = "MultiConnector"
    elif kind == "external":
        module, name = p.choice(EXTERNALS)
        node["kv_connector"] = name
        node["kv_connector_module_path"] = module
    elif kind == "unknown":
        node["kv_connector"] = p.choice(UNKNOWN_NAMES)
    elif kind == "null_name":
        node["kv_connector"] = None
    elif kind == "empty_module":
        node["kv_connector"] = p.choice(REGISTERED_NAMES)
        node["kv_connector_module_path"] = ""
    role = p.weighted([("valid", 990), ("missing", 6), ("null", 4)])
    if role == "valid":
        node["kv_role"] = p.choice(ROLES)
    elif role == "null":
        node["kv_role"] = None
    if p.chance(0.04 if is_child else 0.1):
        node["engine_id"] = p.choice(["engine-a", "", "parent"])
    if p.chance(0.05):
        node["kv_port"] = p.choice([14579, 0, 2**63 - 1])
    if p.chance(0.05):
        node["kv_load_failure_policy"] = p.choice(["fail", "recompute"])
    if p.chance(0.03):
        node["enable_permute_local_kv"] = p.chance(0.5)
    if p.chance(0.03):
        node["kv_buffer_device"] = p.choice(["cuda", "cpu"])
    if node.get("kv_connector") == "MultiConnector":
        node.update(_children(p, budget, depth, max_depth))
    elif p.chance(0.15):
        # A copy: callers may mutate the document, and the constants are shared.
        extra: dict[str, Any] = {"endpoint": copy.deepcopy(p.choice(JUNK_VALUES))}
        if p.chance(0.3):
            # vLLM never reads children here: not a MultiConnector.
            extra["connectors"] = p.choice([["junk"], [{"kv_connector": "ExampleConnector"}], "x"])
        node["kv_connector_extra_config"] = extra
    return node


def _children(p: RandomPicker, budget: _Budget, depth: int, max_depth: int) -> dict[str, Any]:
    shape = p.weighted([
        ("list", 85), ("no_key", 4), ("no_extra", 3), ("empty_dict", 2), ("empty_string", 2),
        ("bad_dict", 1), ("bad_string", 1),
    ])
    if shape == "no_extra":
        return {}
    if shape == "no_key":
        return {"kv_connector_extra_config": p.choice([{}, {"other": 1}])}
    if shape == "empty_dict":
        return {"kv_connector_extra_config": {"connectors": {}}}
    if shape == "empty_string":
        return {"kv_connector_extra_config": {"connectors": ""}}
    if shape == "bad_dict":
        return {"kv_connector_extra_config": {"connectors": {"a": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}}}
    if shape == "bad_string":
        return {"kv_connector_extra_config": {"connectors": "NixlConnector"}}
    count = p.integer(0, 5)
    children = []
    for _ in range(count):
        if budget.nodes <= 0:
            break
        children.append(_node(p, budget, depth + 1, max_depth, True))
    return {"kv_connector_extra_config": {"connectors": children}}


def _env(p: RandomPicker) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for name in ("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "VLLM_USE_SIMPLE_KV_OFFLOAD"):
        if p.chance(0.5):
            env[name] = p.choice(INVALID_SWITCH_VALUES) if p.chance(0.01) else p.choice(INT_SWITCH_VALUES)
    if p.chance(0.3):
        env["LMCACHE_USE_UPSTREAM_MP"] = p.choice(["1", "0", "true"])
    if p.chance(0.1):
        env["HOME"] = "/root"
    return env


def document(p: RandomPicker, *, max_nodes: int = 60, max_depth: int = 6) -> dict[str, Any]:
    """One deployment document."""
    doc: dict[str, Any] = {}
    ktc = p.weighted([("tree", 80), ("absent", 10), ("null", 10)])
    if ktc == "tree":
        doc["kv_transfer_config"] = _node(p, _Budget(p.integer(1, max_nodes)), 0, max_depth, False)
    elif ktc == "null":
        doc["kv_transfer_config"] = None
    preference = p.choice(["absent", None, True, False])
    if preference != "absent":
        doc["disable_hybrid_kv_cache_manager"] = preference
    if p.chance(0.15):
        doc["kv_offloading_size"] = p.choice([1, 2.5, 1e-05, 64, None])
    if p.chance(0.15):
        doc["kv_offloading_backend"] = p.choice(["native", "lmcache", None])
    if p.chance(0.25):
        doc["speculative_config"] = p.choice([None, {}, "method"])
        if doc["speculative_config"] == "method":
            doc["speculative_config"] = {"method": p.choice(METHODS)}
            if p.chance(0.2):
                doc["speculative_config"]["num_speculative_tokens"] = 3
    if p.chance(0.1):
        doc["hisparse_config"] = p.choice([None, {}, {"index_topk": 2048}])
    if p.chance(0.1):
        doc["kv_events_config"] = p.choice([None, {"enable_kv_cache_events": True, "publisher": "zmq"}, {"enable_kv_cache_events": False}])
    if p.chance(0.4):
        model: dict[str, Any] = {}
        if p.chance(0.5):
            model["attention_chunk_size"] = p.choice([8192, 1, None])
        if p.chance(0.7):
            model["layer_kinds"] = [p.choice(LAYER_KINDS) for _ in range(p.integer(0, 4))]
        if p.chance(0.1):
            model["name"] = "meta-llama/Llama-4-Scout-17B-16E"
        doc["model"] = model
    if p.chance(0.3):
        platform: dict[str, Any] = {}
        for key in ("supports_hybrid_kv_cache", "is_cuda"):
            if p.chance(0.6):
                platform[key] = p.chance(0.5)
        doc["platform"] = platform
    if p.chance(0.4):
        doc["env"] = _env(p)
    if p.chance(0.05):
        doc["metadata"] = {"team": "inference", "ratio": 1e-05}
    if isinstance(doc.get("kv_transfer_config"), dict) and p.chance(0.05):
        # vllm serve --kv-transfer-config '{...}'
        doc["kv_transfer_config"] = json.dumps(doc["kv_transfer_config"])
    if p.chance(0.08):
        doc = {KEBAB.get(k, k): v for k, v in doc.items()}
    return doc


@st.composite
def _structured(draw: Any, max_nodes: int, max_depth: int) -> dict[str, Any]:
    return document(HypothesisPicker(draw), max_nodes=max_nodes, max_depth=max_depth)


def documents(max_nodes: int = 60, max_depth: int = 6) -> st.SearchStrategy[dict[str, Any]]:
    """Hypothesis strategy: one deployment document (see :func:`document`).

    Hypothesis draws small integers far more often than large ones, which
    would make nearly every optional feature rare; so most documents come
    from ``random.Random`` seeded by hypothesis (the benchmark's distribution;
    a failure shrinks to the smallest failing seed), the rest draw through
    hypothesis directly and shrink towards the simplest document.
    """
    seeded = st.integers(0, 2**64 - 1).map(
        lambda seed: document(RandomPicker(random.Random(seed)), max_nodes=max_nodes, max_depth=max_depth))
    return st.one_of(seeded, _structured(max_nodes, max_depth))


def json_values(max_leaves: int = 40) -> st.SearchStrategy[Any]:
    """Any JSON value (as Python's json module reads it: NaN and Infinity included)."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([1e-05, 1e16, 1e308, -1e-320, 5e-324, 1.5e-07]),
        st.text(),
        st.sampled_from(["MultiConnector", "NixlConnector", "kv_both", "\x00", "e\u0301", "\ud800"]),
    )
    keys = st.one_of(
        st.text(max_size=12),
        st.sampled_from(["kv_transfer_config", "kv_connector", "kv_role", "kv_connector_extra_config", "connectors",
                         "disable_hybrid_kv_cache_manager", "env", "model", "platform", "layer_kinds",
                         "kv_connector_module_path", "engine_id", "kv-transfer-config", "kv_offloading_size"]),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=6)),
        max_leaves=max_leaves,
    )
