"""An independent, plain-Python transcription of vLLM 0.33.0's HMA decision.

Written from /work/shared/reference/vllm-hma.md ("ref §N") and
docs/decision.md (the decision contract: outcomes, stages, codes, paths),
never from engine/: this module must not import hma_policy, and it shares no
code or data with it. The differential test and benchmarks/differential.py
compare the engine with it on random documents; wherever the two disagree,
one of them misreads vLLM.

What it models, in vLLM's own order (ref §5):

1. input: the document conventions of the conformance set (every
   KVTransferConfig of the graph is validated before vLLM runs: a missing
   ``kv_role``, a MultiConnector child that is not an object, a non-empty
   ``connectors`` that is not a list; an integer environment switch that
   ``int()`` cannot read). Only the invalid shapes that tests/strategies.py
   generates are recognised; the model is not a schema validator.
2. VllmConfig.__post_init__: HiSparse auto-configuration on the configured
   connector (``has_connector`` runs before the offloading shorthand), the
   ``--kv-offloading-size`` shorthand, the HMA block with its runtime
   blockers, the connector check and the user's preference, then HiSparse's
   need for HMA.
3. Start-up: KV cache planning (whose "hybrid model" warning is logged
   before any connector exists: create_connector takes the planned
   kv_cache_config, ref §3), then KVConnectorFactory.create_connector:
   resolve the class, refuse an HMA-less graph while HMA is on, construct
   (MultiConnector builds every child first, then constructs them, ref §4).

Unknown external classes. A ``kv_connector_module_path`` class that the
registry below does not list exists and constructs, but whether it inherits
SupportsHMA is unknown. The model runs vLLM once per assignment of
True/False to each such class it meets ("worlds"), and joins the results:
an answer is determined when every world agrees on it (see :func:`expect`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Expected", "expect", "REGISTERED", "MODULE_CLASSES", "EAGLE_STYLE", "V1"]

V1 = "vllm.distributed.kv_transfer.kv_connector.v1."

# ref §3, "Registered connectors (17) and HMA support": name -> (module under
# kv_connector/v1/, inherits SupportsHMA). "env" is LMCacheMPConnector's
# dependence on LMCACHE_USE_UPSTREAM_MP; "multi" is MultiConnector's literal
# name rule (ref §1).
REGISTERED: dict[str, tuple[str, Any]] = {
    "ExampleConnector": ("example_connector", False),
    "ExampleHiddenStatesConnector": ("example_hidden_states_connector", True),
    "LMCacheConnectorV1": ("lmcache_connector", False),
    "LMCacheMPConnector": ("lmcache_mp_connector", "env"),
    "NixlConnector": ("nixl", True),
    "NixlPullConnector": ("nixl", True),
    "NixlPushConnector": ("nixl", True),
    "MultiConnector": ("multi_connector", "multi"),
    "HiSparseConnector": ("hisparse.connector", True),
    "MoRIIOConnector": ("moriio.moriio_connector", True),
    "OffloadingConnector": ("offloading_connector", True),
    "DecodeBenchConnector": ("decode_bench_connector", True),
    "MooncakeConnector": ("mooncake.mooncake_connector", True),
    "MooncakeStoreConnector": ("mooncake.store.connector", True),
    "FlexKVConnectorV1": ("flexkv_connector", False),
    "SimpleCPUOffloadConnector": ("simple_cpu_offload_connector", True),
    "HF3FSKVConnector": ("hf3fs.hf3fs_connector", False),
}
# ref §3: shipped but not registered, reachable only by module path.
_SHIPPED_UNREGISTERED = {"UMBPStoreConnector": ("umbp", True)}

# (module path, class name) -> SupportsHMA, for the classes the reference
# names. Any other module-path class is an unknown external.
MODULE_CLASSES: dict[tuple[str, str], Any] = {
    (V1 + module, name): hma for name, (module, hma) in {**REGISTERED, **_SHIPPED_UNREGISTERED}.items()
}

# What vLLM 0.33.0's import of a module path inside its KV-transfer tree
# finds: the modules its wheel ships and the names each binds
# (rules/modules/0.33.0.json, read from the wheel by `registry from-wheel
# --modules`; the recorded real-vLLM cases of tests/conformance/0.33.0/ show
# the errors). Any other module path is an unknown external.
_TREE = "vllm.distributed.kv_transfer"
# (Data, not code: read with the builtins only, beside tests/, so that the
# model still imports nothing but the standard library's json.)
with open(__file__[: -len("reference_model.py")] + "../rules/modules/0.33.0.json", encoding="utf-8") as _table:
    _SHIPPED = json.load(_table)["modules"]


def _import_error(module: str, name: str) -> str | None:
    """ModuleNotFoundError or "Class X not found" for a module of vLLM's tree, else None."""
    if not (module == _TREE or module.startswith(_TREE + ".")) or not all(p.isidentifier() for p in module.split(".")):
        return None
    shipped = _SHIPPED.get(module)
    if shipped is None:
        return "connector.module_not_found"
    if name not in shipped["names"] and name not in shipped["maybe"] and not shipped["open"]:
        return "connector.class_not_found"
    return None


# ref §1: use_eagle() is true for these speculative methods (exact names).
EAGLE_STYLE = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})

_INT_SWITCHES = ("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "VLLM_USE_SIMPLE_KV_OFFLOAD")
_CHILDREN = "/kv_connector_extra_config/connectors"
_ALIASES = {
    "kv-transfer-config": "kv_transfer_config",
    "disable-hybrid-kv-cache-manager": "disable_hybrid_kv_cache_manager",
    "kv-offloading-size": "kv_offloading_size",
    "kv-offloading-backend": "kv_offloading_backend",
    "speculative-config": "speculative_config",
    "hisparse-config": "hisparse_config",
    "kv-events-config": "kv_events_config",
}


@dataclass(frozen=True)
class Expected:
    """What vLLM 0.33.0 does with a document, in the decision contract's terms.

    ``error`` is ``(stage, code, path)`` of the first error, or None.
    ``input_problems`` (stage input only) is the set of ``(code, path)``.
    ``vllm_warnings`` is the sorted list of codes vLLM certainly logs.
    ``unknown_paths`` are the nodes whose class is an undeclared external
    (each gets the policy warning ``connector.capability_unknown``).
    """

    outcome: str
    hma_enabled: bool | None
    error: tuple[str, str, str] | None
    vllm_warnings: tuple[str, ...]
    input_problems: frozenset[tuple[str, str]] = frozenset()
    unknown_paths: tuple[str, ...] = ()


class _Raised(Exception):
    """vLLM raised: the error code and the JSON Pointer it concerns."""

    def __init__(self, code: str, path: str):
        super().__init__(code, path)
        self.code = code
        self.path = path


class _Ask(Exception):
    """The answer depends on whether an unknown external class supports HMA."""

    def __init__(self, key: tuple[str, str]):
        super().__init__(key)
        self.key = key


# ---------------------------------------------------------------------------
# Stage input (the conformance set's conventions)
# ---------------------------------------------------------------------------


def _int_readable(value: Any) -> bool:
    """vLLM reads these switches with int(); the document may hold an int or a bool too."""
    if isinstance(value, bool) or (isinstance(value, int)):
        return True
    if isinstance(value, str):
        text = value.strip()
        body = text[1:] if text[:1] in "+-" else text
        return body.isascii() and body.isdigit() and 1 <= len(body) <= 18
    return False


def _input_problems(doc: dict[str, Any], spelled: dict[str, str]) -> set[tuple[str, str]]:
    problems: set[tuple[str, str]] = set()
    env = doc.get("env") or {}
    for name in _INT_SWITCHES:
        if name in env and not _int_readable(env[name]):
            problems.add(("input.schema", f"/{spelled.get('env', 'env')}/{name}"))
    top = doc.get("kv_transfer_config")
    if not isinstance(top, dict):
        return problems
    stack = [(top, "/" + spelled.get("kv_transfer_config", "kv_transfer_config"))]
    while stack:
        node, path = stack.pop()
        name = node.get("kv_connector")
        if node.get("kv_role") not in (None, "kv_producer", "kv_consumer", "kv_both"):
            problems.add(("input.schema", path + "/kv_role"))  # a Literal (ref §2)
        elif isinstance(name, str) and node.get("kv_role") is None:
            # ref §2: "Please specify kv_role when kv_connector is set"; at the
            # explicit null when there is one, else at the connector.
            problems.add(("connector.role_missing", path + ("/kv_role" if "kv_role" in node else "")))
        if name != "MultiConnector":
            continue  # vLLM never turns another connector's extra config into children
        extra = node.get("kv_connector_extra_config")
        if not isinstance(extra, dict) or "connectors" not in extra:
            continue
        children = extra["connectors"]
        if isinstance(children, list):
            for index, child in enumerate(children):
                if isinstance(child, dict):
                    stack.append((child, f"{path}{_CHILDREN}/{index}"))
                else:
                    # ref §4: each child is re-validated as a KVTransferConfig.
                    problems.add(("input.schema", f"{path}{_CHILDREN}/{index}"))
        elif children in ({}, ""):
            pass  # falsy: no children (ref §4)
        else:
            problems.add(("input.schema", path + _CHILDREN))
    return problems


# ---------------------------------------------------------------------------
# vLLM's factory and MultiConnector (ref §3, §4)
# ---------------------------------------------------------------------------


def _children(node: dict[str, Any]) -> Any:
    extra = node.get("kv_connector_extra_config") or {}
    return extra.get("connectors", [])


def _get_connector_class(node: dict[str, Any], path: str) -> tuple[str, str]:
    """KVConnectorFactory.get_connector_class (ref §3): a class key, or raise."""
    name = node.get("kv_connector")
    if name is None:
        raise _Raised("connector.name_missing", path)
    module = node.get("kv_connector_module_path")
    if module == "":
        raise _Raised("connector.module_path_empty", path + "/kv_connector_module_path")
    if module is not None:  # the module path takes priority over the registry
        error = _import_error(module, name)
        if error is not None:
            raise _Raised(error, path + ("/kv_connector_module_path" if error.endswith("module_not_found") else "/kv_connector"))
        return (module, name)
    if name in REGISTERED:
        return (V1 + REGISTERED[name][0], name)
    raise _Raised("connector.unknown", path + "/kv_connector")


class _World:
    """One assignment of SupportsHMA to the unknown external classes."""

    def __init__(self, bits: dict[tuple[str, str], bool], env: dict[str, Any]):
        self.bits = bits
        self.upstream_mp = _env_is_set(env, "LMCACHE_USE_UPSTREAM_MP")

    def class_supports(self, key: tuple[str, str]) -> bool:
        known = MODULE_CLASSES.get(key, None)
        if key not in MODULE_CLASSES:
            if key not in self.bits:
                raise _Ask(key)
            return self.bits[key]
        if known == "env":
            # ref §3: LMCACHE_USE_UPSTREAM_MP selects the builtin class without SupportsHMA.
            return not self.upstream_mp
        if known == "multi":
            return True  # the class inherits SupportsHMA; the name rule comes first
        return bool(known)

    def supports_hma_config(self, node: dict[str, Any], path: str) -> bool:
        """KVConnectorFactory.supports_hma_config (ref §1, §4)."""
        cls = _get_connector_class(node, path)
        if node.get("kv_connector") != "MultiConnector":  # a literal name check
            return self.class_supports(cls)
        children = _children(node)
        if not children:
            return False
        for index, child in enumerate(children):
            if not self.supports_hma_config(child, f"{path}{_CHILDREN}/{index}"):
                return False  # stops at the first child without support
        return True


def _is_real_multiconnector(cls: tuple[str, str]) -> bool:
    return cls == (V1 + "multi_connector", "MultiConnector")


def _construct(node: dict[str, Any], path: str, cls: tuple[str, str]) -> None:
    """``cls(config, role, kv_cache_config)``: only vLLM's MultiConnector can fail
    here in this model (external classes are assumed to construct)."""
    if not _is_real_multiconnector(cls):
        return
    extra = node.get("kv_connector_extra_config") or {}
    connectors = extra.get("connectors")
    if connectors is None:
        raise _Raised("multiconnector.connectors_missing", path + "/kv_connector_extra_config")
    built = []
    for index, child in enumerate(connectors):
        child_path = f"{path}{_CHILDREN}/{index}"
        if "engine_id" in child:
            # KVTransferConfig(**child, engine_id=...) -> TypeError (ref §4, §8.3)
            raise _Raised("multiconnector.child_engine_id", child_path + "/engine_id")
        built.append((child, child_path, _get_connector_class(child, child_path)))
    for child, child_path, child_cls in built:
        _construct(child, child_path, child_cls)


# ---------------------------------------------------------------------------
# VllmConfig.__post_init__ and start-up, in one world (ref §1, §5, §6)
# ---------------------------------------------------------------------------


def _env_switch(env: dict[str, Any], name: str, default: bool) -> bool:
    if name not in env:
        return default
    value = env[name]
    if isinstance(value, bool):
        return value
    return bool(int(str(value).strip()))


def _env_is_set(env: dict[str, Any], name: str) -> bool:
    value = env.get(name)
    return value is not None and str(value) != ""


def _effective_ktc(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The kv_transfer_config the HMA block sees: --kv-offloading-size creates
    one if needed and overwrites its connector and role (ref §5 step 4); the
    module path, if any, stays."""
    configured = doc.get("kv_transfer_config")
    if doc.get("kv_offloading_size") is None:
        return configured
    ktc = dict(configured or {})
    if (doc.get("kv_offloading_backend") or "native") == "lmcache":
        ktc["kv_connector"] = "LMCacheMPConnector"
    elif _env_switch(doc.get("env") or {}, "VLLM_USE_SIMPLE_KV_OFFLOAD", False):
        ktc["kv_connector"] = "SimpleCPUOffloadConnector"
    else:
        ktc["kv_connector"] = "OffloadingConnector"
    ktc["kv_role"] = "kv_both"
    return ktc


def _has_connector(ktc: dict[str, Any] | None, name: str) -> bool:
    """KVTransferConfig.has_connector (ref §2): the top name, or a direct child of a MultiConnector."""
    if ktc is None:
        return False
    if ktc.get("kv_connector") == name:
        return True
    if ktc.get("kv_connector") == "MultiConnector":
        return any(isinstance(c, dict) and c.get("kv_connector") == name for c in (_children(ktc) or ()))
    return False


@dataclass
class _Run:
    outcome: str
    hma_enabled: bool | None
    error: tuple[str, str, str] | None
    warnings: list[str]


def _run(doc: dict[str, Any], world: _World) -> _Run:
    warnings: list[str] = []
    env = doc.get("env") or {}
    platform = doc.get("platform") or {}
    model = doc.get("model") or {}
    spec = doc.get("speculative_config") or {}
    preference = doc.get("disable_hybrid_kv_cache_manager")
    configured = doc.get("kv_transfer_config")

    # Step 2 (about L1876): HiSparse auto-configuration, on the connector as configured.
    hisparse = doc.get("hisparse_config") is not None or _has_connector(configured, "HiSparseConnector")
    if hisparse and not platform.get("is_cuda", True):
        return _Run("error", None, ("config", "hisparse.requires_cuda", "/platform/is_cuda"), warnings)

    # Step 4: _post_init_kv_transfer_config, the --kv-offloading-size shorthand.
    ktc = _effective_ktc(doc)

    # Step 5: the HMA block.
    need_disable = False
    if not platform.get("supports_hybrid_kv_cache", True):
        need_disable = True
    if model.get("attention_chunk_size") is not None:
        if spec.get("method") in EAGLE_STYLE:
            need_disable = True
        elif not _env_switch(env, "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", True):
            warnings.append("attention.chunked_local_latency")
            need_disable = True
    disable = preference
    if disable is None:
        if ktc is not None:
            try:
                supported = world.supports_hma_config(ktc, "/kv_transfer_config")
            except _Raised as exc:
                return _Run("error", None, ("config", exc.code, exc.path), warnings)
            if not supported:
                warnings.append("hma.auto_disabled")
                need_disable = True
        disable = need_disable
    elif disable is False and need_disable:
        return _Run("error", None, ("config", "hma.explicit_enable_conflict", "/disable_hybrid_kv_cache_manager"), warnings)

    # Step 6: HiSparse requires HMA.
    if hisparse and disable:
        return _Run("error", None, ("config", "hisparse.requires_hma", "/disable_hybrid_kv_cache_manager"), warnings)
    hma_enabled = not disable

    # Start-up: KV cache planning first (unify_hybrid_kv_cache_specs, ref §5)...
    kinds = set(model.get("layer_kinds") or ())
    if disable and "full_attention" in kinds and kinds & {"sliding_window", "chunked_local"}:
        warnings.append("model.hybrid_kv_unoptimized")
    # ... then create_connector (ref §3).
    if ktc is not None:
        try:
            cls = _get_connector_class(ktc, "/kv_transfer_config")
            if hma_enabled and not world.supports_hma_config(ktc, "/kv_transfer_config"):
                raise _Raised("hma.connector_unsupported", "/kv_transfer_config")
            _construct(ktc, "/kv_transfer_config", cls)
        except _Raised as exc:
            return _Run("error", hma_enabled, ("connector", exc.code, exc.path), warnings)
    return _Run("enabled" if hma_enabled else "disabled", hma_enabled, None, warnings)


def _unknown_paths(ktc: dict[str, Any] | None) -> tuple[str, ...]:
    """Every node of the graph (children walked under the literal name
    MultiConnector) that names an undeclared external class."""
    if ktc is None:
        return ()
    out = []
    stack = [(ktc, "/kv_transfer_config")]
    while stack:
        node, path = stack.pop()
        name, module = node.get("kv_connector"), node.get("kv_connector_module_path")
        if (isinstance(name, str) and isinstance(module, str) and module and (module, name) not in MODULE_CLASSES
                and _import_error(module, name) is None):
            out.append(path)
        if name == "MultiConnector":
            children = _children(node)
            if isinstance(children, list):
                stack.extend((c, f"{path}{_CHILDREN}/{i}") for i, c in enumerate(children))
    return tuple(sorted(out))


def _normalise(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    doc: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in document.items():
        name = _ALIASES.get(key, key)
        doc[name] = value
        spelled[name] = key
    for name in ("kv_transfer_config", "speculative_config", "hisparse_config", "kv_events_config"):
        if isinstance(doc.get(name), str):
            doc[name] = json.loads(doc[name])  # vllm serve takes these as JSON strings
    return doc, spelled


def expect(document: dict[str, Any]) -> Expected:
    """vLLM 0.33.0's decision for ``document`` (a document tests/strategies.py can produce)."""
    doc, spelled = _normalise(document)
    problems = _input_problems(doc, spelled)
    if problems:
        return Expected("error", None, ("input", *sorted(problems)[0]), (), frozenset(problems))

    worlds: list[_Run] = []
    pending: list[dict[tuple[str, str], bool]] = [{}]
    while pending:
        bits = pending.pop()
        try:
            worlds.append(_run(doc, _World(bits, doc.get("env") or {})))
        except _Ask as ask:
            pending += [{**bits, ask.key: True}, {**bits, ask.key: False}]

    unknown = _unknown_paths(_effective_ktc(doc))

    first = worlds[0]
    common_hma = first.hma_enabled if all(w.hma_enabled == first.hma_enabled for w in worlds) else None
    certain = set(first.warnings)
    for w in worlds[1:]:
        certain &= set(w.warnings)
    warnings = tuple(sorted(code for code in first.warnings if code in certain))
    if all((w.outcome, w.error) == (first.outcome, first.error) for w in worlds):
        # Every world agrees on what happens (and, for an error, on the first one).
        return Expected(first.outcome, common_hma, first.error, warnings, frozenset(), unknown)
    return Expected("undetermined", common_hma, None, warnings, frozenset(), unknown)
