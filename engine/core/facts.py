"""Facts: the vocabulary the rules read, and its extraction from a document.

Every fact a rule may test is declared once, in :data:`DECLARED`: its
ruleset, type, closed values, meaning, and how it relates to the other facts
of its ruleset (``empty``/``given``: the graph and the document make some
combinations impossible, such as a child at depth 0). The rule loader checks
rules against these declarations, the verifier and the step table enumerate
the fact space from them, and ``hma-policy rules facts`` prints them for
authors. Facts that rules set themselves (each step's value) and the
MultiConnector aggregates (declared in rules/nodes.yaml) join them at load.

:func:`extract` reads a validated document once and returns :class:`Facts`:
the offloading and decision facts the document holds, and the connector
graph as nodes in post-order, each with its own facts. Python only reads
values here, as vLLM reads them (env switches with int(), field presence,
the order of children); what they mean for HMA is decided by the rules.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .errors import InputError, Problem

__all__ = ["Fact", "Relation", "DECLARED", "RELEASE_FACTS", "DEFAULT_GRAPH", "UNREACHED", "Facts", "Node", "OffloadingFacts",
           "NodeFacts", "DocumentFacts", "READ_AT", "GIVEN_ONLY", "ENV_READ", "EnvRead", "STOOD_FOR", "written_at", "extract",
           "declared", "release_facts", "graph_fact"]


class Relation(NamedTuple):
    """A fact's condition on another fact of its ruleset. ``op``: eq, ne, ge,
    ``container`` (the fact, a connector name, is one that lists children) or
    ``registered`` (it is a name the release's registry registers)."""

    fact: str
    op: str
    value: Any = None


class Fact(NamedTuple):
    """One fact a rule may read.

    ``empty`` is the value the fact takes unless every relation in ``given``
    holds; with ``exact``, it takes another value whenever they hold.
    """

    name: str
    ruleset: str  # offloading | node | decision
    type: str  # bool | int | str | names (a list of strings, tested with `contains`)
    doc: str
    values: tuple[Any, ...] | None = None  # the closed vocabulary, if any
    empty: Any = None
    given: tuple[Relation, ...] = ()
    exact: bool = False
    from_graph: bool = False  # a decision fact the connector graph's evaluation gives, not the document
    # The document value it is, as written (a JSON Pointer; None: it is read
    # otherwise). A file that leaves that value unknown can be decided for
    # each class of value the rules tell apart (audit.unknowns).
    at: str | None = None


_SET = (Relation("has_kv_transfer_config", "eq", True),)

DECLARED: tuple[Fact, ...] = (
    # -- the offloading shorthand --------------------------------------------
    Fact("kv_offloading_size_set", "offloading", "bool", "--kv-offloading-size is set"),
    Fact("kv_offloading_backend", "offloading", "str", "--kv-offloading-backend (default native)", ("native", "lmcache")),
    Fact("kv_offloading_backend_set", "offloading", "bool", "--kv-offloading-backend is given (0.13.0 and earlier start the shorthand from it)"),
    Fact("env_use_simple_kv_offload", "offloading", "bool", "VLLM_USE_SIMPLE_KV_OFFLOAD read as bool(int())"),
    # -- one node of the connector graph ------------------------------------
    Fact("name", "node", "str", 'kv_connector ("" when not set)', empty="", given=(Relation("name_set", "eq", True),)),
    Fact("name_set", "node", "bool", "kv_connector is set"),
    Fact("name_registered", "node", "bool",
         "kv_connector is a name the release's registry registers (vLLM before 0.20.0 takes such a name's "
         "registry class, whatever the module path)", empty=False, given=(Relation("name", "registered"),), exact=True),
    Fact("module_path", "node", "str", "kv_connector_module_path: absent (or null), the empty string, or set",
         ("absent", "empty", "set")),
    Fact("module_path_value", "node", "str", 'kv_connector_module_path ("" when absent)', empty="",
         given=(Relation("module_path", "eq", "set"),), exact=True),
    Fact("module_in_release", "node", "str",
         "the module kv_connector_module_path names, in the release's module table (rules/modules/): present, "
         "missing, or unknown (no module path, a path outside the table's prefix, or no table)",
         ("present", "missing", "unknown"), empty="unknown", given=(Relation("module_path", "eq", "set"),)),
    Fact("class_in_module", "node", "str",
         "whether that module binds kv_connector at module level, as getattr would find it: yes, no, or unknown "
         "(bound on some way through it only, a module-level __getattr__ or star import, or no present module)",
         ("yes", "no", "unknown"), empty="unknown", given=(Relation("module_in_release", "eq", "present"),)),
    Fact("is_child", "node", "bool", "the node is a child of a container connector", empty=False,
         given=(Relation("depth", "ge", 1),), exact=True),
    Fact("depth", "node", "int", "0 for the top-level connector"),
    Fact("sets_engine_id", "node", "bool", "a child's own config has an engine_id key", empty=False,
         given=(Relation("is_child", "eq", True),)),
    Fact("connectors", "node", "str", "kv_connector_extra_config has a non-null `connectors` key", ("absent", "present")),
    Fact("children", "node", "int", "how many children the node lists (only a container connector lists any)", empty=0,
         given=(Relation("name", "container"), Relation("connectors", "eq", "present"))),
    Fact("env_lmcache_use_upstream_mp", "node", "bool", "LMCACHE_USE_UPSTREAM_MP is set (non-empty)"),
    # -- the decision: the document ------------------------------------------
    Fact("has_kv_transfer_config", "decision", "bool", "a kv_transfer_config is configured (after the offloading shorthand)",
         from_graph=True),
    Fact("preference", "decision", "str", "disable_hybrid_kv_cache_manager: null, false, true", ("none", "enable", "disable")),
    Fact("platform_supports_hybrid_kv_cache", "decision", "bool", "current_platform.support_hybrid_kv_cache() (default true)"),
    Fact("platform_is_cuda", "decision", "bool", "current_platform.is_cuda() (default true)"),
    Fact("platform_name", "decision", "str",
         'platform.name: the platform vLLM runs on, where the document names it (an image of vLLM\'s CPU build '
         'does): cuda, rocm, cpu, xpu, npu (Ascend, through vllm-ascend), hpu (Gaudi, through vllm-gaudi), '
         'spyre (IBM Spyre, through vllm-spyre), neuron (AWS Inferentia and Trainium, through vllm-neuron), '
         'tpu (Google\'s TPUs, through tpu-inference), qaic (Qualcomm Cloud AI, through vllm-qaic), gcu '
         '(Enflame\'s GCU, through vllm-gcu), openvino (through vllm-openvino), kunlun (Baidu\'s Kunlun XPU, '
         'through vLLM-Kunlun), maca (MetaX, through vLLM-metax), mlu (Cambricon, through vllm-mlu) or musa (Moore '
         'Threads, through vllm-musa; "" when not named)',
         ("", "cuda", "rocm", "cpu", "xpu", "npu", "hpu", "spyre", "neuron", "tpu", "qaic", "gcu", "openvino", "kunlun",
          "maca", "mlu", "musa")),
    Fact("chunked_local_attention", "decision", "bool", "model.attention_chunk_size is set"),
    Fact("speculative_method", "decision", "str", 'speculative_config.method ("" when none)',
         at="/speculative_config/method"),
    Fact("hisparse_config", "decision", "bool", "an explicit hisparse_config is given"),
    Fact("top_name", "decision", "str",
         'the top-level kv_connector in effect, after the offloading shorthand ("" when none)', empty="", given=_SET,
         from_graph=True),
    Fact("configured_top_name", "decision", "str",
         'the top-level kv_connector as configured, before the offloading shorthand ("" when none)', empty="",
         given=(Relation("kv_transfer_config_configured", "eq", True),)),
    Fact("configured_child_names", "decision", "names",
         "kv_connector of each direct child of the configured top-level connector, before the offloading shorthand",
         empty=(), given=(Relation("kv_transfer_config_configured", "eq", True), Relation("configured_top_name", "container"))),
    Fact("layer_full_attention", "decision", "bool", "model.layer_kinds has full_attention"),
    Fact("layer_sliding_window", "decision", "bool", "model.layer_kinds has sliding_window"),
    Fact("layer_chunked_local", "decision", "bool", "model.layer_kinds has chunked_local"),
    Fact("layer_mamba", "decision", "bool", "model.layer_kinds has mamba"),
    Fact("env_allow_chunked_local_attn_with_hybrid_kv_cache", "decision", "bool",
         "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE read as bool(int()) (default true)"),
    Fact("env_use_simple_kv_offload", "decision", "bool", "VLLM_USE_SIMPLE_KV_OFFLOAD read as bool(int()) (default false)"),
    Fact("env_lmcache_use_upstream_mp", "decision", "bool", "LMCACHE_USE_UPSTREAM_MP is set (non-empty)"),
    Fact("env_allow_chunked_local_attn_set", "decision", "bool",
         "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is given (its default differs between releases)"),
    Fact("env_use_v1", "decision", "bool", "VLLM_USE_V1 read as bool(int()) (default true; releases before 0.11.1 read it)"),
    Fact("kv_events_configured", "decision", "bool", "a kv_events_config is given (releases before 0.20.0 read it)"),
    Fact("chunked_prefill_off", "decision", "bool",
         "enable_chunked_prefill is false (--no-enable-chunked-prefill; 0.22.0 and 0.23.0 read it)"),
    Fact("kv_transfer_config_configured", "decision", "bool",
         "a kv_transfer_config is configured, before the offloading shorthand (which runs after the HMA "
         "decision in releases before 0.22.0)", empty=False, given=_SET),
    Fact("kv_offloading_size_set", "decision", "bool",
         "--kv-offloading-size is set (releases before 0.14.0 check it after the HMA decision)"),
    Fact("kv_offloading_backend_set", "decision", "bool",
         "--kv-offloading-backend is given (releases before 0.14.0 start the offloading shorthand from it, after "
         "the HMA decision)"),
    # -- the result steps: how the evaluation ended --------------------------
    Fact("error_stage", "result", "str", "the stage of the error that ended the evaluation (none when none did)",
         ("none", "config", "connector")),
)

# The release a policy decides for: one value per policy, readable by every
# ruleset, so that the rules of an epoch can follow what changed between its
# releases (a default, a list of methods). The walk over the fact space
# takes the policy's own value only.
RELEASE_FACTS: tuple[Fact, ...] = (
    Fact("vllm_minor", "release", "int", "the vLLM release's minor number (0.14.0: 14)"),
    Fact("vllm_patch", "release", "int", "the vLLM release's patch number (0.14.1: 1)"),
)

# Decision facts read from the top-level node's step values (and the error
# each carries); without a connector graph they are `none`. The decision rule
# file declares them (`graph:`); a file without that section reads these,
# (fact, node step, description).
DEFAULT_GRAPH: tuple[tuple[str, str, str], ...] = (
    ("graph_support", "support", "the top-level node's `support` (none without a kv_transfer_config)"),
    ("top_setup", "setup", "the top-level node's `setup`"),
    ("top_construct", "construct", "the top-level node's `construct`"),
)


def graph_fact(name: str, description: str, values: Iterable[Any] | None) -> Fact:
    """The decision fact ``name`` that holds the top-level node's value of a
    step whose values are ``values`` (None: not known, any value), ``none``
    without a connector graph."""
    closed = None if values is None else ("none", *dict.fromkeys(v for v in values if v != "none"))
    return Fact(name, "decision", "str", description, closed, "none", _SET, True, True)

# In result steps, a step the evaluation did not reach holds this value.
UNREACHED = "unreached"


def declared(ruleset: str) -> dict[str, Fact]:
    """The facts declared for a ruleset, the release's included (the rules
    add their steps' facts, and the result steps read the decision's too)."""
    return {**{f.name: f for f in DECLARED if f.ruleset == ruleset}, **{f.name: f for f in RELEASE_FACTS}}


# The facts that are one document value as written, by where it is (Fact.at).
READ_AT: dict[str, Fact] = {fact.at: fact for fact in DECLARED if fact.at is not None}
# The document's JSON options the facts read only for being given (kv_events_configured: `is not None`),
# each with a value that stands in for one given but not known (any object vLLM accepts gives that decision).
GIVEN_ONLY: dict[str, Any] = {"kv_events_config": {}}


class EnvRead(NamedTuple):
    """An environment variable one fact reads: the fact, and for each of its
    values a text of the variable that gives it (the first: vLLM's default)."""

    fact: str
    written: tuple[tuple[Any, str], ...]


# The environment variables a file may leave unknown and the rules still decide, each tried with
# a text for each value of its fact the rules tell apart (audit.unknowns): those one fact of one
# ruleset reads and no other fact does, so that its values are every answer the variable can
# make. VLLM_USE_SIMPLE_KV_OFFLOAD and LMCACHE_USE_UPSTREAM_MP are read by facts of two rulesets,
# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE by two facts: an unknown one stays unresolved.
ENV_READ: dict[str, EnvRead] = {"VLLM_USE_V1": EnvRead("env_use_v1", ((True, "1"), (False, "0")))}
# The facts a stand-in may stand for, by name: those read as written, and those of ENV_READ.
STOOD_FOR: dict[str, Fact] = {**{f.name: f for f in READ_AT.values()},
                              **{f.name: f for f in DECLARED if f.name in {e.fact for e in ENV_READ.values()}}}


def written_at(at: str, value: Any) -> Any:
    """A value of the fact at the JSON Pointer ``at`` as the document writes
    it there: for a variable of :data:`ENV_READ` (``/env/VLLM_USE_V1``), the
    text that gives it (any value the rules do not tell apart: the default's);
    else the value itself."""
    read = ENV_READ.get(at[len("/env/"):]) if at.startswith("/env/") else None
    if read is None:
        return value
    return next((text for fact_value, text in read.written if fact_value == value), read.written[0][1])


def release_facts(version: str) -> dict[str, int]:
    """The release facts of a version such as 0.14.1 (or 0.10.1.1)."""
    parts = [int(p) for p in re.findall(r"[0-9]+", version)[:3]] + [0, 0, 0]
    return {"vllm_minor": parts[1], "vllm_patch": parts[2]}


def _record(name: str, facts: Iterable[Fact]) -> Any:
    """A record type whose fields are ``facts``, in declared order."""
    return namedtuple(name, [fact.name for fact in facts])


# What extraction gives, as records whose fields are the declared facts in
# order: immutable and hashable, so that equal facts are one key of the
# decision memo, and a fact added above is a field here without another edit.
OffloadingFacts = _record("OffloadingFacts", [f for f in DECLARED if f.ruleset == "offloading"])
NodeFacts = _record("NodeFacts", [f for f in DECLARED if f.ruleset == "node"])
DocumentFacts = _record("DocumentFacts", [f for f in DECLARED if f.ruleset == "decision" and not f.from_graph])


class Node(NamedTuple):
    """One connector config of the graph: where it stands, and its own facts.

    ``children`` are indices into the graph's post-order tuple; ``kv_connector``
    is the name as written (None when it is not a string)."""

    path: str
    kv_connector: str | None
    depth: int
    facts: Any  # NodeFacts
    children: tuple[int, ...]


class Facts(NamedTuple):
    """Every fact a document gives the rules, read in one pass.

    ``graph`` is the configured connector graph in post-order (the top-level
    node last). The offloading shorthand may rewrite the top-level connector
    (:meth:`effective_graph`), so the configured kv_transfer_config is kept."""

    offloading: Any  # OffloadingFacts
    document: Any  # DocumentFacts
    graph: tuple[Node, ...]
    kv_transfer_config: dict[str, Any] | None
    containers: frozenset[str]
    modules: Any = None  # the release's module table (core.modules.ReleaseModules), None: none
    registered: frozenset[str] = frozenset()  # the names the release's registry registers

    @property
    def key(self) -> tuple:
        """Everything a decision reads: equal keys, equal decisions. A node's
        path follows from the graph's shape, and its name from its facts."""
        return (self.offloading, self.document, tuple((node.facts, node.children) for node in self.graph))

    def effective_graph(self, connector: str | None, role: str | None) -> tuple[Node, ...]:
        """The graph once the offloading shorthand has set the top-level
        connector (and role) to these (None: the configured graph). As in
        vLLM, it creates a kv_transfer_config if there is none."""
        if connector is None:
            return self.graph
        rewritten = {**(self.kv_transfer_config or {}), "kv_connector": connector}
        if role is not None:
            rewritten["kv_role"] = role
        return _graph(rewritten, self.containers, self.document.env_lmcache_use_upstream_mp, self.modules, self.registered)


def extract(document: Mapping[str, Any], containers: frozenset[str], modules: Any = None,
            registered: frozenset[str] = frozenset()) -> Facts:
    """The facts of a validated, normalised document (plain dicts and lists);
    ``modules``: the release's module table the node facts look module
    paths up in (None: every module path is unknown); ``registered``: the
    names the release's registry registers.

    Raises :class:`InputError` for a string the rule runtime cannot take (an
    unpaired surrogate): the graph's first, then the document's."""
    env = document.get("env") or {}
    upstream_mp = _is_set(env, "LMCACHE_USE_UPSTREAM_MP")
    simple_offload = _int_switch(env, "VLLM_USE_SIMPLE_KV_OFFLOAD", False)
    ktc = document.get("kv_transfer_config")
    graph = _graph(ktc, containers, upstream_mp, modules, registered)
    preference = document.get("disable_hybrid_kv_cache_manager")
    platform = document.get("platform") or {}
    model = document.get("model") or {}
    kinds = set(model.get("layer_kinds") or ())
    spec = document.get("speculative_config") or {}
    # vLLM configures HiSparse before the offloading shorthand rewrites the
    # connector: those rules read the connector as configured.
    configured = ktc.get("kv_connector") if isinstance(ktc, dict) else None
    children = _children(ktc, containers)
    size_set = document.get("kv_offloading_size") is not None
    backend_set = document.get("kv_offloading_backend") is not None
    offloading = OffloadingFacts(
        kv_offloading_size_set=size_set,
        kv_offloading_backend=document.get("kv_offloading_backend") or "native",
        kv_offloading_backend_set=backend_set,
        env_use_simple_kv_offload=simple_offload,
    )
    facts = DocumentFacts(
        preference="none" if preference is None else ("disable" if preference else "enable"),
        platform_supports_hybrid_kv_cache=platform.get("supports_hybrid_kv_cache", True),
        platform_is_cuda=platform.get("is_cuda", True),
        platform_name=platform.get("name") or "",
        chunked_local_attention=model.get("attention_chunk_size") is not None,
        speculative_method=_text(spec.get("method") if isinstance(spec, dict) else None, "/speculative_config", "method"),
        hisparse_config=document.get("hisparse_config") is not None,
        configured_top_name=_text(configured, "/kv_transfer_config", "kv_connector"),
        configured_child_names=tuple(
            _text(child.get("kv_connector"), f"/kv_transfer_config/kv_connector_extra_config/connectors/{index}", "kv_connector")
            for index, child in enumerate(children) if isinstance(child, dict)),
        layer_full_attention="full_attention" in kinds,
        layer_sliding_window="sliding_window" in kinds,
        layer_chunked_local="chunked_local" in kinds,
        layer_mamba="mamba" in kinds,
        env_allow_chunked_local_attn_with_hybrid_kv_cache=_int_switch(
            env, "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", True),
        env_use_simple_kv_offload=simple_offload,
        env_lmcache_use_upstream_mp=upstream_mp,
        env_allow_chunked_local_attn_set="VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE" in env,
        env_use_v1=_int_switch(env, "VLLM_USE_V1", True),
        kv_events_configured=document.get("kv_events_config") is not None,
        chunked_prefill_off=document.get("enable_chunked_prefill") is False,
        kv_transfer_config_configured=isinstance(ktc, dict),
        kv_offloading_size_set=size_set,
        kv_offloading_backend_set=backend_set,
    )
    return Facts(offloading, facts, graph, ktc if isinstance(ktc, dict) else None, containers, modules, registered)


def _graph(ktc: Any, containers: frozenset[str], upstream_mp: bool, modules: Any = None,
           registered: frozenset[str] = frozenset()) -> tuple[Node, ...]:
    """The nodes of the connector graph in post-order (children before parents).

    Children are read from ``kv_connector_extra_config.connectors`` of nodes
    named as one of ``containers`` (rules/nodes.yaml), in order."""
    if not isinstance(ktc, dict):
        return ()
    out: list[Node] = []
    # A depth-first walk without recursion: each frame is a config whose
    # children are being visited, and the indices of those already in `out`.
    frames = [_Frame(ktc, "/kv_transfer_config", 0, _children(ktc, containers), [])]
    while frames:
        frame = frames[-1]
        if len(frame.done) < len(frame.items):
            index = len(frame.done)
            child = frame.items[index]
            frames.append(_Frame(child, f"{frame.path}/kv_connector_extra_config/connectors/{index}", frame.depth + 1,
                                 _children(child, containers), []))
            frame.done.append(-1)  # filled in when the child's subtree is finished
            continue
        frames.pop()
        out.append(_node(frame.path, frame.config, frame.depth, tuple(frame.done), upstream_mp, modules, registered))
        if frames:
            frames[-1].done[-1] = len(out) - 1
    return tuple(out)


class _Frame(NamedTuple):
    config: Any
    path: str
    depth: int
    items: list[Any]
    done: list[int]


def _node(path: str, config: Any, depth: int, children: tuple[int, ...], upstream_mp: bool, modules: Any = None,
          registered: frozenset[str] = frozenset()) -> Node:
    config = config if isinstance(config, dict) else {}  # the schema refuses a child that is not an object
    name = config.get("kv_connector")
    module = config.get("kv_connector_module_path")
    extra = config.get("kv_connector_extra_config") or {}
    in_release, in_module = _module_facts(modules, module, name)
    facts = NodeFacts(
        name=_text(name, path, "kv_connector"),
        name_set=name is not None,
        name_registered=isinstance(name, str) and name in registered,
        module_path="absent" if module is None else ("empty" if module == "" else "set"),
        module_path_value=_text(module, path, "kv_connector_module_path"),
        module_in_release=in_release,
        class_in_module=in_module,
        is_child=depth > 0,
        depth=depth,
        sets_engine_id=depth > 0 and "engine_id" in config,
        connectors="present" if isinstance(extra, dict) and extra.get("connectors") is not None else "absent",
        children=len(children),
        env_lmcache_use_upstream_mp=upstream_mp,
    )
    return Node(path, name if isinstance(name, str) else None, depth, facts, children)


def _module_facts(modules: Any, module: Any, name: Any) -> tuple[str, str]:
    """(module_in_release, class_in_module): the module path and the name as
    the release's module table records them (core/modules.py)."""
    if modules is None or not isinstance(module, str) or module == "":
        return "unknown", "unknown"
    return modules.facts(module, name if isinstance(name, str) else "")


def _list_of(config: Any) -> list[Any]:
    """The children list a connector config holds, whatever its name."""
    extra = config.get("kv_connector_extra_config") if isinstance(config, dict) else None
    items = extra.get("connectors") if isinstance(extra, dict) else None
    return items if isinstance(items, list) else []


def _children(config: Any, containers: frozenset[str]) -> list[Any]:
    """The children of a container connector (none for any other)."""
    name = config.get("kv_connector") if isinstance(config, dict) else None
    return _list_of(config) if isinstance(name, str) and name in containers else []


def _text(value: Any, parent: str, key: str) -> str:
    """A string fact the rule runtime can take (valid UTF-8); "" for a
    non-string. ``parent`` and ``key`` locate it (the pointer is made only
    for an error)."""
    if not isinstance(value, str):
        return ""
    if value.isascii():  # no surrogate, and no copy made to find out
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError([Problem("input.encoding", "the string holds an unpaired surrogate", f"{parent}/{key}")]) from None
    return value


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
