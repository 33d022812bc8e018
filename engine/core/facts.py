"""Stage 3, facts: the fact vocabulary, and the walk that turns a validated
document into the facts each ruleset reads.

Documents reach this module validated and plain (``document.prepare``:
dicts and lists only), so objects are tested with ``isinstance(x, dict)``,
not the much slower ABC check. Python only reads values here (as vLLM reads
them: env switches with int(), field presence, the order of children); what
the values mean for HMA is decided by the rule files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import InputError, Problem

__all__ = ["FACTS", "Node", "document_facts", "document_inputs", "build_graph", "node_facts", "graph_signature"]

# The fact vocabulary: every fact a rule may read, per ruleset, with its type
# and (where closed) its values. Step names add the facts their steps set.
# Types: bool, int, str, names (a list of strings, tested with `contains`).
FACTS: dict[str, dict[str, dict[str, Any]]] = {
    "offloading": {
        "kv_offloading_size_set": {"type": "bool", "doc": "--kv-offloading-size is set"},
        "kv_offloading_backend": {"type": "str", "values": ["native", "lmcache"], "doc": "--kv-offloading-backend (default native)"},
        "env_use_simple_kv_offload": {"type": "bool", "doc": "VLLM_USE_SIMPLE_KV_OFFLOAD read as bool(int())"},
    },
    "node": {
        "name": {"type": "str", "doc": "kv_connector (\"\" when not set)"},
        "name_set": {"type": "bool", "doc": "kv_connector is set"},
        "module_path": {"type": "str", "values": ["absent", "empty", "set"], "doc": "kv_connector_module_path: absent (or null), the empty string, or set"},
        "module_path_value": {"type": "str", "doc": "kv_connector_module_path (\"\" when absent)"},
        "is_child": {"type": "bool", "doc": "the node is a child of a container connector"},
        "depth": {"type": "int", "doc": "0 for the top-level connector"},
        "sets_engine_id": {"type": "bool", "doc": "the node's own config has an engine_id key"},
        "connectors": {"type": "str", "values": ["absent", "present"], "doc": "kv_connector_extra_config has a non-null `connectors` key"},
        "children": {"type": "int", "doc": "how many children the node lists"},
        "first_nonsupported": {"type": "str", "values": ["none", "unsupported", "unknown", "error", "unsupported_or_error"], "doc": "support of the first child, in order, that is not `supported`"},
        "after_unknown": {"type": "str", "values": ["none", "unsupported", "error", "unsupported_or_error"], "doc": "after the first `unknown` child, support of the first child that is neither `supported` nor `unknown` (none when there is none, or no `unknown` child)"},
        "first_child_setup": {"type": "str", "values": ["ok", "error"], "doc": "setup of the first child, in order, whose setup is not ok"},
        "first_child_construct": {"type": "str", "values": ["ok", "error"], "doc": "construct of the first child, in order, whose construct is not ok"},
        "env_lmcache_use_upstream_mp": {"type": "bool", "doc": "LMCACHE_USE_UPSTREAM_MP is set (non-empty)"},
    },
    "decision": {
        "has_kv_transfer_config": {"type": "bool", "doc": "a kv_transfer_config is configured (after the offloading shorthand)"},
        "preference": {"type": "str", "values": ["none", "enable", "disable"], "doc": "disable_hybrid_kv_cache_manager: null, false, true"},
        "platform_supports_hybrid_kv_cache": {"type": "bool", "doc": "current_platform.support_hybrid_kv_cache() (default true)"},
        "platform_is_cuda": {"type": "bool", "doc": "current_platform.is_cuda() (default true)"},
        "chunked_local_attention": {"type": "bool", "doc": "model.attention_chunk_size is set"},
        "speculative_method": {"type": "str", "doc": "speculative_config.method (\"\" when none)"},
        "hisparse_config": {"type": "bool", "doc": "an explicit hisparse_config is given"},
        "top_name": {"type": "str", "doc": "the top-level kv_connector in effect, after the offloading shorthand (\"\" when none)"},
        "configured_top_name": {"type": "str", "doc": "the top-level kv_connector as configured, before the offloading shorthand (\"\" when none)"},
        "configured_child_names": {"type": "names", "doc": "kv_connector of each direct child of the configured top-level connector, before the offloading shorthand"},
        "graph_support": {"type": "str", "values": ["none", "supported", "unsupported", "unknown", "error", "unsupported_or_error"], "doc": "the top-level node's `support` (none without a kv_transfer_config)"},
        "top_setup": {"type": "str", "values": ["none", "ok", "error"], "doc": "the top-level node's `setup`"},
        "top_construct": {"type": "str", "values": ["none", "ok", "error"], "doc": "the top-level node's `construct`"},
        "layer_full_attention": {"type": "bool", "doc": "model.layer_kinds has full_attention"},
        "layer_sliding_window": {"type": "bool", "doc": "model.layer_kinds has sliding_window"},
        "layer_chunked_local": {"type": "bool", "doc": "model.layer_kinds has chunked_local"},
        "layer_mamba": {"type": "bool", "doc": "model.layer_kinds has mamba"},
        "env_allow_chunked_local_attn_with_hybrid_kv_cache": {"type": "bool", "doc": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE read as bool(int()) (default true)"},
        "env_use_simple_kv_offload": {"type": "bool", "doc": "VLLM_USE_SIMPLE_KV_OFFLOAD read as bool(int()) (default false)"},
        "env_lmcache_use_upstream_mp": {"type": "bool", "doc": "LMCACHE_USE_UPSTREAM_MP is set (non-empty)"},
    },
}


def _int_switch(env: Mapping[str, Any], name: str, default: bool) -> bool:
    """vLLM's bool(int(os.getenv(name, default))). The schema guarantees int-like text."""
    if name not in env:
        return default
    value = env[name]
    if isinstance(value, bool):
        return value
    if isinstance(value, float):  # the schema admits integral floats only (1.0, 1e16)
        return bool(int(value))
    return bool(int(str(value).strip()))


def _is_set(env: Mapping[str, Any], name: str) -> bool:
    value = env.get(name)
    return value is not None and value is not False and str(value) != ""


def _checked_text(value: Any, path: str, suffix: str = "") -> str:
    """A string that may be posted to the rule runtime (valid UTF-8, no
    controls); ``path + suffix`` locates it (joined only for an error)."""
    if not isinstance(value, str):
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError([Problem("input.encoding", "the string holds an unpaired surrogate", path + suffix)]) from None
    return value


def env_facts(document: Mapping[str, Any]) -> Mapping[str, bool]:
    """The env switches the rules read (read-only: shared when there is no env)."""
    env = document.get("env")
    return _switches(env) if env else _NO_ENV


def _switches(env: Mapping[str, Any]) -> dict[str, bool]:
    return {
        "env_allow_chunked_local_attn_with_hybrid_kv_cache": _int_switch(env, "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", True),
        "env_use_simple_kv_offload": _int_switch(env, "VLLM_USE_SIMPLE_KV_OFFLOAD", False),
        "env_lmcache_use_upstream_mp": _is_set(env, "LMCACHE_USE_UPSTREAM_MP"),
    }


_NO_ENV: Mapping[str, bool] = MappingProxyType(_switches({}))


def offloading_facts(document: Mapping[str, Any], env: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The offloading ruleset's facts (``env``: the document's env_facts, when known)."""
    env = env_facts(document) if env is None else env
    return {
        "kv_offloading_size_set": document.get("kv_offloading_size") is not None,
        "kv_offloading_backend": document.get("kv_offloading_backend") or "native",
        "env_use_simple_kv_offload": env["env_use_simple_kv_offload"],
    }


@dataclass(slots=True)
class Node:
    """One connector config in the graph, with its JSON Pointer."""

    path: str
    config: Mapping[str, Any]
    depth: int
    is_child: bool
    children: list["Node"] = field(default_factory=list)

    def __init__(self, path: str, config: Mapping[str, Any], depth: int, is_child: bool,
                 children: list["Node"] | None = None) -> None:
        # Written out: compiled, a dataclass __init__ with a default factory
        # is the generated Python one, four times the cost of this.
        self.path = path
        self.config = config
        self.depth = depth
        self.is_child = is_child
        self.children = [] if children is None else children

    @property
    def name(self) -> str | None:
        value = self.config.get("kv_connector")
        return value if isinstance(value, str) else None


def build_graph(ktc: Mapping[str, Any] | None, containers: frozenset[str]) -> list[Node]:
    """The nodes of the connector graph in post-order (children before parents).

    Children are read from ``kv_connector_extra_config.connectors`` of nodes
    whose kv_connector is one of ``containers`` (rules/nodes.yaml), in order.
    """
    if ktc is None:
        return []
    root = Node("/kv_transfer_config", ktc, 0, False)
    order: list[Node] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        stack.append((node, True))
        if node.name in containers:
            extra = node.config.get("kv_connector_extra_config") or {}
            items = extra.get("connectors") if isinstance(extra, dict) else None
            if isinstance(items, list):
                base = node.path + "/kv_connector_extra_config/connectors"
                node.children = [
                    Node(f"{base}/{i}", child, node.depth + 1, True) for i, child in enumerate(items)
                ]
                for child in reversed(node.children):
                    stack.append((child, False))
    return order


class _NotText:
    """Stands in a graph signature for a value that is neither a string nor null."""

    __slots__ = ()


_NOT_TEXT = _NotText()


def _text_or_null(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else _NOT_TEXT


def graph_signature(ktc: Any, containers: frozenset[str], env: Mapping[str, bool]) -> tuple | None:
    """A key that determines the connector graph and every node's facts:
    equal signatures give build_graph() the same shape and names, and
    node_facts() the same facts (children first, each from its children's
    verdicts, which the same rules make the same). It holds every value those
    two read, and no other (not the ports, ids or names of a deployment), so
    that the evaluator can hold one plan for a fleet's many equal graphs.
    None (no key) when a node is not an object: the plan is then made anew.

    Kept beside build_graph and node_facts, which it mirrors: a value they
    come to read must be added here (a test checks that equal
    signatures have equal facts over random graphs, tests/test_runtime.py).
    """
    flag = env["env_lmcache_use_upstream_mp"]
    if ktc is None:
        return (flag,)
    out: list[Any] = [flag]
    stack: list[tuple[Any, bool]] = [(ktc, False)]
    while stack:  # pre-order; each node's child count fixes the shape
        config, is_child = stack.pop()
        if type(config) is not dict:
            return None
        name = config.get("kv_connector")
        extra = config.get("kv_connector_extra_config") or {}
        items = extra.get("connectors") if isinstance(extra, dict) else None
        children: Any = items if isinstance(name, str) and name in containers and isinstance(items, list) else ()
        out.append((_text_or_null(name), _text_or_null(config.get("kv_connector_module_path")), items is not None,
                    is_child and "engine_id" in config, len(children)))
        stack.extend([(child, True) for child in reversed(children)])
    return tuple(out)


def _first(children: list[Node], verdicts: dict[str, dict[str, Any]], fact: str, ok: str) -> tuple[str, str | None]:
    """The value of ``fact`` of the first child whose value is not ``ok``, and its path."""
    for child in children:
        value = verdicts[child.path][fact]
        if value != ok:
            return value, child.path
    return (ok if ok != "supported" else "none"), None


def node_facts(node: Node, verdicts: dict[str, dict[str, Any]],
               env: Mapping[str, bool]) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """The facts of one node, given its children's verdicts; and, for each
    fact that carries a child's error, the child path to copy it from."""
    config = node.config
    name = _checked_text(config.get("kv_connector"), node.path, "/kv_connector")
    module = config.get("kv_connector_module_path")
    module_state = "absent" if module is None else ("empty" if module == "" else "set")
    extra = config.get("kv_connector_extra_config") or {}
    has_connectors = isinstance(extra, dict) and extra.get("connectors") is not None
    children = node.children
    first_ns, ns_path = _first(children, verdicts, "support", "supported") if children else ("none", None)
    after, after_path = "none", None
    if first_ns == "unknown":
        # Past the first unknown child, the helper either stops there (that
        # child says no) or goes on to the first later child that does not
        # answer supported-or-unknown. Which answer that child gives is the fact.
        later = node.children[[c.path for c in node.children].index(ns_path) + 1:] if ns_path is not None else []
        for child in later:
            value = verdicts[child.path]["support"]
            if value not in ("supported", "unknown"):
                after, after_path = value, child.path
                break
    setup, setup_path = _first(children, verdicts, "setup", "ok") if children else ("ok", None)
    construct, construct_path = _first(children, verdicts, "construct", "ok") if children else ("ok", None)
    facts: dict[str, Any] = {
        "name": name,
        "name_set": config.get("kv_connector") is not None,
        "module_path": module_state,
        "module_path_value": _checked_text(module, node.path, "/kv_connector_module_path"),
        "is_child": node.is_child,
        "depth": node.depth,
        "sets_engine_id": node.is_child and "engine_id" in config,
        "connectors": "present" if has_connectors else "absent",
        "children": len(node.children),
        "first_nonsupported": first_ns,
        "after_unknown": after,
        "first_child_setup": setup,
        "first_child_construct": construct,
        "env_lmcache_use_upstream_mp": env["env_lmcache_use_upstream_mp"],
    }
    sources = {}
    if ns_path is not None:
        sources["first_nonsupported"] = (ns_path, "support")
    if after_path is not None:
        sources["after_unknown"] = (after_path, "support")
    if setup_path is not None:
        sources["first_child_setup"] = (setup_path, "setup")
    if construct_path is not None:
        sources["first_child_construct"] = (construct_path, "construct")
    return facts, sources


def _configured_names(ktc: Any, containers: frozenset[str]) -> tuple[str, list[str]]:
    if not isinstance(ktc, dict):
        return "", []
    name = ktc.get("kv_connector")
    name = name if isinstance(name, str) else ""
    extra = ktc.get("kv_connector_extra_config") or {}
    items = extra.get("connectors") if isinstance(extra, dict) and name in containers else None
    children = [c.get("kv_connector") for c in items if isinstance(c, dict)] if isinstance(items, list) else []
    return name, [c if isinstance(c, str) else "" for c in children]


def _dict_or_empty(value: Any) -> dict[str, Any]:
    """A mapping as a dict (itself when it is one); anything false, {}."""
    if type(value) is dict:
        return value
    return dict(value) if value else {}


def document_inputs(document: Mapping[str, Any], containers: frozenset[str] = frozenset(),
                    env: Mapping[str, bool] | None = None) -> tuple:
    """What the decision ruleset's facts take from the document itself, as
    a tuple (those from the connector graph's verdicts aside): document_facts
    builds the facts from it, and the evaluator keys its decision memo on it
    with the graph's signature, so the two cannot disagree."""
    # Read as dicts (a validated document's objects are; other mappings are
    # copied): compiled, a dict's get is a direct call, a Mapping's a lookup
    # of the method by name.
    doc = _dict_or_empty(document)
    preference = doc.get("disable_hybrid_kv_cache_manager")
    platform = _dict_or_empty(doc.get("platform"))
    model = _dict_or_empty(doc.get("model"))
    kinds = set(model.get("layer_kinds") or ())
    spec = doc.get("speculative_config") or {}
    method = spec.get("method") if isinstance(spec, dict) else None
    # vLLM configures HiSparse (vllm.py ~L1876) before the offloading shorthand
    # rewrites the connector (~L2220): those rules read the connector as configured.
    configured, children = _configured_names(doc.get("kv_transfer_config"), containers)
    env = env_facts(document) if env is None else env
    return (
        "none" if preference is None else ("disable" if preference else "enable"),
        platform.get("supports_hybrid_kv_cache", True),
        platform.get("is_cuda", True),
        model.get("attention_chunk_size") is not None,
        _checked_text(method, "/speculative_config/method"),
        doc.get("hisparse_config") is not None,
        "full_attention" in kinds,
        "sliding_window" in kinds,
        "chunked_local" in kinds,
        "mamba" in kinds,
        _checked_text(configured, "/kv_transfer_config/kv_connector"),
        tuple(children),
        tuple(env.items()),
    )


def document_facts(document: Mapping[str, Any], top: Node | None, top_verdict: Mapping[str, Any] | None,
                   containers: frozenset[str] = frozenset(), env: Mapping[str, bool] | None = None,
                   inputs: tuple | None = None) -> dict[str, Any]:
    """The decision ruleset's facts from the document (``inputs``: its
    document_inputs, when known) and the top node's verdict (``env``: the
    document's env_facts, when known)."""
    if inputs is None:
        inputs = document_inputs(document, containers, env)
    (preference, supports_hybrid, is_cuda, chunked, method, hisparse, full, sliding, chunked_local, mamba,
     configured, children, switches) = inputs
    facts = {
        "has_kv_transfer_config": top is not None,
        "preference": preference,
        "platform_supports_hybrid_kv_cache": supports_hybrid,
        "platform_is_cuda": is_cuda,
        "chunked_local_attention": chunked,
        "speculative_method": method,
        "hisparse_config": hisparse,
        "top_name": top.name or "" if top is not None else "",
        "graph_support": top_verdict["support"] if top_verdict else "none",
        "top_setup": top_verdict["setup"] if top_verdict else "none",
        "top_construct": top_verdict["construct"] if top_verdict else "none",
        "layer_full_attention": full,
        "layer_sliding_window": sliding,
        "layer_chunked_local": chunked_local,
        "layer_mamba": mamba,
        "configured_top_name": configured,
        "configured_child_names": list(children),
    }
    facts.update(switches)
    return facts
