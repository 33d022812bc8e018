"""Runs inside a release's scratch environment: vLLM's own code decides each case.

Not part of hma_policy and never imported by it. The parent
(tools/vllm_conformance.py) starts one process per batch with the
environment variables that vLLM reads at import time already set, writes the
batch as JSON to a file and reads back one observation per case.

For each deployment document the child does what vLLM does at start-up, as
far as it can be done on a CPU without building a connector:

1. every KVTransferConfig node of the connector graph is validated by the
   release's own ``KVTransferConfig`` (the document is invalid otherwise:
   stage ``input``);
2. ``VllmConfig(device_config=DeviceConfig("cpu"), kv_transfer_config=...,
   scheduler_config=SchedulerConfig(max_model_len=16, is_encoder_decoder=False,
   disable_hybrid_kv_cache_manager=D), ...)`` as vLLM's HMA tests build it,
   with ``current_platform.support_hybrid_kv_cache`` (and ``is_cuda``)
   patched to the document's platform (stage ``config``);
3. KV cache planning: the release's ``get_kv_cache_groups`` over one KV cache
   spec per layer kind of ``model.layer_kinds`` (stage ``planning``);
4. ``KVConnectorFactory.create_connector`` for the scheduler, run for real
   up to the point where it would construct the class: the class's
   ``__init__`` is swapped for one that raises a sentinel, so the release's
   own HMA check runs and nothing is built (stage ``connector``);
5. for a MultiConnector, the release's own
   ``MultiConnector._get_connector_classes_and_configs`` (a classmethod that
   resolves the children without building them), recursively for nested
   MultiConnectors, and the ``__init__`` assertion that HMA is off or every
   child supports it. That assertion runs only when connectors are built, so
   it is evaluated as the release's source states it (read from the
   installed file at run time); such a case is marked ``source-read`` with
   the file and line.

Warnings are vLLM's own log records.

Releases differ in what each step is called and how it asks (a plain bool
preference to 0.12.x, ``is_cuda() or is_rocm()`` as the platform question to
0.10.1.1, ``create_connector_v1``, a MultiConnector that builds its children
in ``__init__``, ``get_kv_cache_config``): the child finds out from the
installed release's attributes and source, never from its version, and
reports what it found (``adaptations``). A connector module that imports a
back end this environment lacks is loaded with an import-only stand-in
(tools/_import_stubs.py; ``prepare_stubs``), and every case that used one
says so.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import logging
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path
from unittest.mock import patch

RELEASE = sys.argv[3] if len(sys.argv) > 3 else "?"

# vLLM log lines -> warning codes (docs/decision.md). Matched on the text
# every release since 0.9 logs; the code is the same whatever the wording.
WARNING_PATTERNS = (
    ("hma.auto_disabled", re.compile(r"Turning off hybrid kv cache manager")),
    ("attention.chunked_local_latency", re.compile(r"latency regression when using chunked local\s*attention")),
    ("model.hybrid_kv_unoptimized", re.compile(r"Hybrid KV cache manager is disabled for this hybrid model")),
)
# Log lines that mention the HMA but have no code: kept for the report, so a
# release's new HMA warning is noticed instead of dropped.
HMA_WORDS = re.compile(r"hybrid kv cache|hybrid_kv_cache|\bHMA\b|SupportsHMA", re.IGNORECASE)


class _Constructed(Exception):
    """create_connector got past its checks and would build the connector (``cls``) now."""

    def __init__(self, cls=None):
        super().__init__(getattr(cls, "__name__", None))
        self.cls = cls


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a malformed record must not stop the batch
        return str(record.msg)


class Outcome(Exception):
    """Carries the stage and code of the first error vLLM raised."""

    def __init__(self, stage, code, message, source=None):
        super().__init__(message)
        self.stage, self.code, self.message, self.source = stage, code, message, source


def _last_line(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return (frames[-1].line or "") if frames else ""


def _in_function(exc: BaseException, name: str) -> bool:
    return any(frame.name == name for frame in traceback.extract_tb(exc.__traceback__))


def classify(exc: BaseException, stage: str) -> tuple[str, str]:
    """(stage, code) for an exception vLLM raised at ``stage``.

    pydantic wraps a ValueError raised in a config's __post_init__ in a
    ValidationError for that config: the wrapped message decides. A
    validation error *of a KVTransferConfig* (a field, a Literal, the kv_role
    check) means the document is invalid: stage input.
    """
    text = str(exc)
    name = type(exc).__name__
    table = (
        ("Please specify kv_role", "connector.role_missing"),
        ("Please specify kv_disagg_role", "connector.role_missing"),  # the wording to 0.11.0
        ("You must set kv_offloading_size when kv_offloading_backend is set", "offload.size_missing"),
        ("Connector name is not set in KVTransferConfig", "connector.name_missing"),
        ("kv_connector_module_path cannot be an empty string", "connector.module_path_empty"),
        # Before the config checked it, an unregistered name with an empty
        # module path reached importlib.import_module("").
        ("Empty module name", "connector.module_path_empty"),
        ("Unsupported connector type", "connector.unknown"),
        ("Hybrid KV cache manager was explicitly enabled but is not", "hma.explicit_enable_conflict"),
        ("HiSparse currently requires NVIDIA CUDA", "hisparse.requires_cuda"),
        ("HiSparse requires the hybrid KV cache manager", "hisparse.requires_hma"),
        ("does not support HMA but HMA is enabled", "hma.connector_unsupported"),
        ("deprecated 2-argument constructor signature", "connector.legacy_signature"),
        ("does not support chunked prefill", "connector.chunked_prefill_unsupported"),
        ("failed to convert the KV cache specs to one unified type", "kv_cache.unify_failed"),
        ("Failed to promote local KV cache specs to one unified type", "kv_cache.unify_failed"),
    )
    if isinstance(exc, ValueError):  # pydantic's ValidationError is a ValueError
        for needle, code in table:
            if needle in text:
                return ("input" if code == "connector.role_missing" else stage), code
        if name == "ValidationError" and re.search(r"validation errors? for KVTransferConfig", text):
            return "input", "input.schema"
    if isinstance(exc, ModuleNotFoundError):
        return stage, "connector.module_not_found"
    if isinstance(exc, AttributeError) and re.search(r"^Class .* not found in ", text):
        return stage, "connector.class_not_found"
    if isinstance(exc, TypeError) and "multiple values for keyword argument 'engine_id'" in text:
        return stage, "multiconnector.child_engine_id"
    if isinstance(exc, AssertionError) and "ktcs is not None" in _last_line(exc):
        return stage, "multiconnector.connectors_missing"
    if isinstance(exc, AssertionError) and re.search(r"issubclass\(connector_cls, KVConnectorBase_V1\)", _last_line(exc)):
        return stage, "connector.not_v1"
    return stage, f"unmapped.{name}"


# ---------------------------------------------------------------- vLLM handles
import vllm  # noqa: E402  (the release under test; the parent set the import-time environment)
from vllm import envs  # noqa: E402
from vllm.config import DeviceConfig, KVTransferConfig, SchedulerConfig, VllmConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1 import base as _base  # noqa: E402
from vllm.platforms import current_platform  # noqa: E402

import _import_stubs  # noqa: E402  (tools/, beside this file)

supports_hma = getattr(_base, "supports_hma", None)  # from 0.11.1; before it no connector supports HMA
SupportsHMA = getattr(_base, "SupportsHMA", None)
KVConnectorBase_V1 = _base.KVConnectorBase_V1

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
except ImportError:  # pragma: no cover - every release with HMA has it
    KVConnectorRole = None

import vllm.config as _config_pkg  # noqa: E402

CacheConfig = getattr(_config_pkg, "CacheConfig")
KVEventsConfig = getattr(_config_pkg, "KVEventsConfig", None)
SpeculativeConfig = getattr(_config_pkg, "SpeculativeConfig", None)
ModelConfig = getattr(_config_pkg, "ModelConfig", None)
ParallelConfig = getattr(_config_pkg, "ParallelConfig", None)


def _dataclass_fields(cls) -> set[str]:
    import dataclasses

    try:
        return {f.name for f in dataclasses.fields(cls)}
    except TypeError:
        return set(inspect.signature(cls).parameters)


CACHE_FIELDS = _dataclass_fields(CacheConfig)
VLLM_FIELDS = _dataclass_fields(VllmConfig)
SCHEDULER_FIELDS = _dataclass_fields(SchedulerConfig)
# --hisparse-config exists from 0.30.0 (AttentionConfig.hisparse_config).
HAS_HISPARSE = "hisparse" in " ".join(_dataclass_fields(getattr(_config_pkg, "AttentionConfig", object)))
# What SchedulerConfig(...) accepts (InitVars too): is_encoder_decoder is not in 0.9.1.
SCHEDULER_PARAMS = set(inspect.signature(SchedulerConfig).parameters)


# ------------------------------------------- what differs between releases
# Each is read from the installed release (an attribute, a signature, a
# source line), never from its version number.

def _cli_default_preference():
    """What ``vllm serve`` passes for disable_hybrid_kv_cache_manager when the option is absent.

    The option's value reaches SchedulerConfig through EngineArgs, whose
    dataclass default is the CLI's default: None (tri-state, 0.13.0 on) or
    False (a plain bool, before). A document's null means "the option is
    absent", so it becomes this value; false and true are what
    ``--no-disable-hybrid-kv-cache-manager`` and
    ``--disable-hybrid-kv-cache-manager`` pass in every release.
    """
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    for field in dataclasses.fields(EngineArgs):
        if field.name == "disable_hybrid_kv_cache_manager":
            return field.default
    raise RuntimeError("EngineArgs has no disable_hybrid_kv_cache_manager in this release")


PREFERENCE_UNSET = _cli_default_preference()


def _platform_question() -> str:
    """How the release's HMA block asks the platform: ``support_hybrid_kv_cache()`` or ``is_cuda() or is_rocm()``."""
    if callable(getattr(current_platform, "support_hybrid_kv_cache", None)):
        return "support_hybrid_kv_cache"
    source = inspect.getsource(VllmConfig.__post_init__)
    if re.search(r"not \(current_platform\.is_cuda\(\) or current_platform\.is_rocm\(\)\)", source):
        return "is_cuda_or_rocm"
    raise RuntimeError("unrecognised platform question in VllmConfig.__post_init__")


PLATFORM_QUESTION = _platform_question()


def _asks_async_output() -> bool:
    """Does this platform leave ``is_async_output_supported`` unanswered (the base Platform raises, to 0.10.x)?"""
    probe = getattr(current_platform, "is_async_output_supported", None)
    if probe is None:
        return False
    try:
        probe(False)
    except NotImplementedError:
        return True
    return False


ASYNC_OUTPUT_UNANSWERED = _asks_async_output()


def platform_answer(platform: dict):
    """(for the whole case, while VllmConfig is built): the document's platform as this release asks for it.

    support_hybrid_kv_cache: patched for the whole case, as before.
    is_cuda_or_rocm (to 0.10.1.1): ``is_cuda`` answers the document's
    supports_hybrid_kv_cache and ``is_rocm`` False, only while VllmConfig is
    built: elsewhere a CUDA answer on this CPU would load CUDA kernels.
    Where the platform leaves ``is_async_output_supported`` unanswered, a
    ModelConfig's V0 check asks it while VllmConfig is built: it answers True,
    as the CUDA platform does under the V1 engine.
    """
    value = platform.get("supports_hybrid_kv_cache", True)

    @contextlib.contextmanager
    def while_configuring():
        with contextlib.ExitStack() as stack:
            if PLATFORM_QUESTION == "is_cuda_or_rocm":
                stack.enter_context(patch.object(current_platform, "is_cuda", lambda: value))
                stack.enter_context(patch.object(current_platform, "is_rocm", lambda: False))
            if ASYNC_OUTPUT_UNANSWERED:
                stack.enter_context(patch.object(current_platform, "is_async_output_supported",
                                                 lambda enforce_eager: True))
            yield

    if PLATFORM_QUESTION == "support_hybrid_kv_cache":
        return patch.object(current_platform, "support_hybrid_kv_cache", lambda: value), while_configuring
    return contextlib.nullcontext(), while_configuring


# create_connector (0.10.1 on) or create_connector_v1 (to 0.10.0), with or without kv_cache_config.
CREATE_CONNECTOR = getattr(KVConnectorFactory, "create_connector", None) or KVConnectorFactory.create_connector_v1
CREATE_TAKES_KV_CACHE_CONFIG = "kv_cache_config" in inspect.signature(CREATE_CONNECTOR).parameters
GET_CONNECTOR_CLASS = getattr(KVConnectorFactory, "get_connector_class", None)  # 0.10.1 on


def adaptations() -> dict:
    """What this release has, as the runner found it (for PROVENANCE.md)."""
    multi = _multi_connector_class()
    return {
        "preference_unset": PREFERENCE_UNSET,
        "platform_question": PLATFORM_QUESTION,
        "async_output_unanswered": ASYNC_OUTPUT_UNANSWERED,
        "create_connector": CREATE_CONNECTOR.__name__,
        "get_connector_class": GET_CONNECTOR_CLASS is not None,
        "multi_children": ("_get_connector_classes_and_configs"
                           if hasattr(multi, "_get_connector_classes_and_configs") else "__init__"),
        "supports_hma": supports_hma is not None,
        "planning": _planning_name(),
    }


def _site_relative(path: str) -> str:
    marker = os.sep + "vllm" + os.sep
    index = path.rfind(marker)
    return path[index + 1:] if index >= 0 else path


def _multi_connector_class():
    from vllm.distributed.kv_transfer.kv_connector.v1 import multi_connector

    return multi_connector.MultiConnector


def construction_rule():
    """How this release's MultiConnector.__init__ asserts HMA support, read from its installed source.

    Returns (kind, "file:line") where kind is "children_config" (the
    assertion calls all_children_support_hma on the config) or
    "children_instances" (supports_hma of every direct child instance).
    """
    cls = _multi_connector_class()
    lines, first = inspect.getsourcelines(cls.__init__)
    source_file = _site_relative(inspect.getsourcefile(cls.__init__))
    assert_at = None
    for offset, line in enumerate(lines):
        if "HMA should not be enabled unless all sub-connectors support it" in line:
            assert_at = first + offset
    if assert_at is None:
        return None, source_file
    body = "".join(lines)
    if re.search(r"self\._all_support_hma\s*=\s*MultiConnector\.all_children_support_hma\(", body):
        kind = "children_config"
    elif re.search(r"self\._all_support_hma\s*=\s*all\(\s*supports_hma\(c\) for c in self\._connectors\s*\)", body):
        kind = "children_instances"
    else:
        kind = "unknown"
    if not re.search(r"assert \(\s*vllm_config\.scheduler_config\.disable_hybrid_kv_cache_manager\s*or self\._all_support_hma\s*\)",
                     body):
        kind = "unknown"
    # The line of the assert statement itself.
    for offset in range(assert_at - first, -1, -1):
        if lines[offset].strip().startswith("assert"):
            assert_at = first + offset
            break
    return kind, f"{source_file}:{assert_at}"


CONSTRUCTION = construction_rule()


# ------------------------------------------------------------------- helpers
@contextlib.contextmanager
def case_environment(env: dict):
    saved = {}
    for key, value in env.items():
        saved[key] = os.environ.get(key)
        os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_MODEL_DIRS: dict = {}
_MODEL_CONFIGS: dict = {}
_SPEC_CONFIGS: dict = {}


def model_config(chunk):
    """A real ModelConfig of a tiny Llama whose HF config sets attention_chunk_size (no weights, no tokenizer)."""
    if chunk not in _MODEL_CONFIGS:
        directory = Path(tempfile.mkdtemp(prefix="hma-model-"))
        (directory / "config.json").write_text(json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
            "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048,
            "torch_dtype": "float32", "attention_chunk_size": chunk,
        }))
        _MODEL_DIRS[chunk] = directory
        _MODEL_CONFIGS[chunk] = ModelConfig(model=str(directory), skip_tokenizer_init=True, max_model_len=16)
    return copy.deepcopy(_MODEL_CONFIGS[chunk])


def speculative_config(method, chunk):
    """A real SpeculativeConfig over the tiny model; the draft (EAGLE-style methods) is the same tiny model."""
    key = (method, chunk)
    if key not in _SPEC_CONFIGS:
        target = model_config(chunk)
        kwargs = dict(method=method, num_speculative_tokens=1, target_model_config=target,
                      target_parallel_config=ParallelConfig())
        if method not in ("ngram", "suffix"):
            kwargs["model"] = str(_MODEL_DIRS[chunk])
        _SPEC_CONFIGS[key] = SpeculativeConfig(**kwargs)
    return copy.deepcopy(_SPEC_CONFIGS[key])


class _NoSuchLayer(Exception):
    """The release has no KV cache spec for a layer kind: its V1 engine cannot serve such a model at all."""


def kv_cache_specs(kinds, chunk):
    import torch
    from vllm.v1 import kv_cache_interface as k

    def attention(cls, **extra):
        kwargs = dict(block_size=16, num_kv_heads=1, head_size=64, dtype=torch.float16, **extra)
        parameter = inspect.signature(cls).parameters.get("use_mla")
        if parameter is not None and parameter.default is inspect.Parameter.empty:
            kwargs["use_mla"] = False  # a required field to 0.10.x
        return cls(**kwargs)

    needs = {"chunked_local": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec"}
    for kind in kinds:
        if kind in needs and not hasattr(k, needs[kind]):
            raise _NoSuchLayer(f"this release has no {needs[kind]} (layer kind {kind})")
    specs = {}
    for index, kind in enumerate(kinds):
        if kind == "full_attention":
            spec = attention(k.FullAttentionSpec)
        elif kind == "sliding_window":
            spec = attention(k.SlidingWindowSpec, sliding_window=128)
        elif kind == "chunked_local":
            spec = attention(k.ChunkedLocalAttentionSpec, attention_chunk_size=chunk or 8192)
        elif kind == "mamba":
            spec = k.MambaSpec(block_size=16, shapes=((16, 16),), dtypes=(torch.float16,))
        else:
            raise ValueError(kind)
        specs[f"model.layers.{index}.attn"] = spec
    return specs


def _planning_module():
    for module in ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils"):
        try:
            mod = __import__(module, fromlist=["get_kv_cache_groups"])
        except ImportError:
            continue
        if hasattr(mod, "get_kv_cache_groups") or hasattr(mod, "get_kv_cache_config"):
            return mod
    raise RuntimeError("neither get_kv_cache_groups nor get_kv_cache_config in this release")


def _planning_name() -> str:
    mod = _planning_module()
    name = "get_kv_cache_groups" if hasattr(mod, "get_kv_cache_groups") else "get_kv_cache_config"
    return f"{mod.__name__}.{name}"


# Memory offered to get_kv_cache_config (before 0.11.1), which checks it
# before it unifies the specs: plenty, so that the check never decides.
PLANNING_MEMORY = 1 << 40


def plan(config, specs):
    """The release's KV cache planning over the specs: get_kv_cache_groups, or get_kv_cache_config before it."""
    mod = _planning_module()
    if hasattr(mod, "get_kv_cache_groups"):
        return mod.get_kv_cache_groups(config, specs)
    if config.model_config is None:
        # get_kv_cache_config reads model_config.max_model_len first; the
        # tiny model's (16) stands in for it, on a copy used only here.
        config = copy.copy(config)
        config.model_config = model_config(None)
    return mod.get_kv_cache_config(config, specs, PLANNING_MEMORY)


# ----------------------------------------------------------------- the stages
def validate_graph(node, notes, path="/kv_transfer_config"):
    """Stage input: the release's KVTransferConfig on every node vLLM would build."""
    if not isinstance(node, dict):
        raise Outcome("input", "input.schema", f"{path}: not an object")
    try:
        KVTransferConfig(**node)
    except Exception as exc:  # pydantic ValidationError, TypeError
        stage, code = classify(exc, "input")
        if code != "connector.role_missing":
            code = "input.schema"
        raise Outcome(stage, code, f"{path}: {type(exc).__name__}: {str(exc)[:300]}") from None
    if node.get("kv_connector") == "MultiConnector":
        extra = node.get("kv_connector_extra_config") or {}
        children = extra.get("connectors") if isinstance(extra, dict) else None
        if children and not isinstance(children, list):
            raise Outcome("input", "input.schema", f"{path}: connectors is neither a list nor empty")
        for index, child in enumerate(children or []):
            validate_graph(child, notes, f"{path}/kv_connector_extra_config/connectors/{index}")


_UNBUILT: dict = {}


def _unbuilt(cls):
    """A subclass of ``cls`` whose __init__ does nothing: isinstance/issubclass answer as for ``cls``."""
    if cls not in _UNBUILT:
        _UNBUILT[cls] = type(cls.__name__, (cls,), {"__init__": lambda self, *args, **kwargs: None,
                                                    "__module__": cls.__module__})
    return _UNBUILT[cls]


_CONSTRUCTION_MODE: list = []  # empty: connectors are built as usual; else "stop" or "unbuilt"


def _connector_new(cls, *args, **kwargs):
    """KVConnectorBase_V1.__new__ while the runner is installed: see connector_construction."""
    mode = _CONSTRUCTION_MODE[-1] if _CONSTRUCTION_MODE else None
    if mode == "stop":
        raise _Constructed(cls)
    if mode == "unbuilt" and not issubclass(cls, _multi_connector_class()):
        return object.__new__(_unbuilt(cls))
    return object.__new__(cls)


@contextlib.contextmanager
def connector_construction(stop: bool):
    """While active, constructing a connector builds nothing.

    ``stop``: the first construction raises _Constructed (create_connector
    got past its checks). Otherwise a MultiConnector is built for real (its
    own __init__ resolves and builds its children through the factory, as
    before 0.11.1) and any other connector becomes an instance of
    ``_unbuilt(cls)``, so its __init__ never runs. Done in
    KVConnectorBase_V1.__new__: type() calls __init__ of the object that
    __new__ returns, so the release's factory and __init__ code run unchanged.
    That __new__ stays once installed (outside this block it builds as
    object.__new__ does): CPython cannot take a class's __new__ back.
    """
    if KVConnectorBase_V1.__dict__.get("__new__") is not _connector_new:
        if "__new__" in KVConnectorBase_V1.__dict__:
            raise RuntimeError("KVConnectorBase_V1 has a __new__ of its own in this release")
        KVConnectorBase_V1.__new__ = _connector_new
    _CONSTRUCTION_MODE.append("stop" if stop else "unbuilt")
    try:
        yield
    finally:
        _CONSTRUCTION_MODE.pop()


def simulate_multi_construction(cls, vllm_config, sources):
    """MultiConnector.__init__ without building a connector.

    With ``_get_connector_classes_and_configs`` (0.11.1 on): the real child
    resolution, recursively, then the source's assertion. Before it, the
    children are built by __init__ itself through the factory: that
    __init__ runs for real, with every other connector left unbuilt.
    """
    MultiConnector = _multi_connector_class()
    if not hasattr(MultiConnector, "_get_connector_classes_and_configs"):
        if CONSTRUCTION[0] is not None:
            raise RuntimeError("a MultiConnector.__init__ HMA assertion without _get_connector_classes_and_configs")
        with connector_construction(stop=False):
            cls(vllm_config, KVConnectorRole.SCHEDULER)
        return
    pairs = MultiConnector._get_connector_classes_and_configs(vllm_config)
    for child_cls, child_config in pairs:
        if isinstance(child_cls, type) and issubclass(child_cls, MultiConnector):
            simulate_multi_construction(child_cls, child_config, sources)
    kind, where = CONSTRUCTION
    if kind is None:
        return  # this release's MultiConnector.__init__ asserts nothing about HMA
    if kind not in ("children_config", "children_instances"):
        raise RuntimeError(f"unrecognised MultiConnector.__init__ HMA assertion in {where}")
    disabled = vllm_config.scheduler_config.disable_hybrid_kv_cache_manager
    if kind == "children_config":
        all_support = MultiConnector.all_children_support_hma(vllm_config.kv_transfer_config)
    else:
        all_support = all(supports_hma(child_cls) for child_cls, _ in pairs)
    sources.add(where)
    if not (disabled or all_support):
        raise Outcome("connector", "multiconnector.child_unsupported",
                      "HMA should not be enabled unless all sub-connectors support it", source=where)


def _create(vllm_config):
    args = (vllm_config, KVConnectorRole.SCHEDULER) + ((None,) if CREATE_TAKES_KV_CACHE_CONFIG else ())
    return CREATE_CONNECTOR(*args)


def create_connector_checks(vllm_config):
    """The release's create_connector, stopped where it would construct the connector."""
    if GET_CONNECTOR_CLASS is None:
        # To 0.10.0 the class is resolved inside create_connector_v1 only.
        try:
            with connector_construction(stop=True):
                _create(vllm_config)
        except _Constructed as constructed:
            return constructed.cls
        raise RuntimeError("create_connector returned without constructing the connector")
    ktc = vllm_config.kv_transfer_config
    cls = GET_CONNECTOR_CLASS(ktc)
    had_init = "__init__" in cls.__dict__
    saved = cls.__dict__.get("__init__")

    def refuse(self, *args, **kwargs):
        raise _Constructed(cls)

    cls.__init__ = refuse
    try:
        _create(vllm_config)
    except _Constructed:
        return cls
    finally:
        if had_init:
            cls.__init__ = saved
        else:
            del cls.__init__
    raise RuntimeError("create_connector returned without constructing the connector")


# ------------------------------------------------------ import-only stand-ins
# module path -> the stand-ins that importing it needed (tools/_import_stubs.py),
# filled by prepare_stubs() before the first case.
STUBS_BY_MODULE: dict[str, list[str]] = {}
STUB_ERRORS: dict[str, str] = {}
LOADED_WITH_STUBS: dict[str, list[str]] = {}  # module path -> vLLM modules first loaded during its import
STUB_REASONS: dict[str, dict[str, str]] = {}  # module path -> stand-in -> the error that called for it


def registry_modules() -> dict[str, tuple[str, str]]:
    """Registered name -> (module path, class name), read from the factory's lazy loaders."""
    out = {}
    for name, loader in KVConnectorFactory._registry.items():
        free = inspect.getclosurevars(loader).nonlocals
        if "module_path" in free and "class_name" in free:
            out[name] = (free["module_path"], free["class_name"])
    return out


def _module_paths(value, found: set):
    if isinstance(value, dict):
        path = value.get("kv_connector_module_path")
        if isinstance(path, str) and (path == "vllm" or path.startswith("vllm.")):
            found.add(path)
        for item in value.values():
            _module_paths(item, found)
    elif isinstance(value, list):
        for item in value:
            _module_paths(item, found)


def prepare_stubs(docs) -> None:
    """Find what the release's connector modules need stood in, and import those modules here with it.

    The modules: every registered connector's, and every vLLM module path the
    documents name. Each is first imported in a forked process of its own
    (nothing here has imported a connector module yet, so every fork starts
    from the same state), standing in what its ImportErrors name. Then each
    module that needed a stand-in is imported here, with only its own
    stand-ins and only for the length of that import; a case that imports it
    later finds it loaded. Everything else is imported by the cases as
    installed: a guarded ``try: import mooncake`` elsewhere still fails.
    """
    paths: set[str] = {module for module, _ in registry_modules().values()}
    for doc in docs:
        _module_paths(doc, paths)
    protected = frozenset(name.split(".")[0] for name in sys.modules)
    for path in sorted(paths):
        found = _import_stubs.in_fork(_import_stubs.discover, path, protected)
        STUBS_BY_MODULE[path] = found["stubs"]
        if found["stubs"]:
            STUB_REASONS[path] = found.get("why", {})
    for path in sorted(paths):
        if STUBS_BY_MODULE[path]:
            loaded = _import_stubs.load(path, STUBS_BY_MODULE[path])
            LOADED_WITH_STUBS[path] = loaded["loaded"]
            if loaded["error"]:
                STUB_ERRORS[path] = loaded["error"]


@contextlib.contextmanager
def record_imports():
    """The module paths vLLM's factory imports (importlib.import_module) during a case; nothing else changes."""
    import importlib

    imported: set[str] = set()
    original = importlib.import_module

    def import_module(name, package=None):
        imported.add(name)
        return original(name, package)

    importlib.import_module = import_module
    try:
        yield imported
    finally:
        importlib.import_module = original


def _node_names(value, found: set):
    if isinstance(value, dict):
        if isinstance(value.get("kv_connector"), str):
            found.add(value["kv_connector"])
        for item in value.values():
            _node_names(item, found)
    elif isinstance(value, list):
        for item in value:
            _node_names(item, found)


def stub_use(imported: set, doc: dict) -> tuple[list[str], list[str]]:
    """(stand-ins the case's imports needed, connector classes of the case that would come from a stand-in)."""
    stubs = sorted({stub for module in imported for stub in STUBS_BY_MODULE.get(module, [])})
    names = set()
    _node_names(doc.get("kv_transfer_config"), names)
    by_module: dict[str, set] = {}
    for module, class_name in registry_modules().values():
        by_module.setdefault(module, set()).add(class_name)
    backed = []
    for module in sorted(imported):
        loaded = sys.modules.get(module)
        if loaded is None or not STUBS_BY_MODULE.get(module):
            continue
        for class_name in sorted(names | by_module.get(module, set())):
            value = getattr(loaded, class_name, None)
            if value is not None and _import_stubs.from_stub(value):
                backed.append(f"{module}.{class_name}")
    return stubs, backed


@contextlib.contextmanager
def patch_is_cuda(doc, platform):
    """``current_platform.is_cuda`` as the document says (default True) where HiSparse is in play.

    HiSparse's checks are the only part of the HMA decision that asks
    ``is_cuda``. Elsewhere the CPU platform's own answer stays: patched to
    True, other code would load CUDA-only kernels (vllm_flash_attn) that a
    CPU cannot, which is no part of the decision.
    """
    graph = json.dumps(doc.get("kv_transfer_config"))
    if doc.get("hisparse_config") is None and "HiSparseConnector" not in graph:
        yield
        return
    cuda = platform.get("is_cuda", True)
    config_module = sys.modules.get(VllmConfig.__module__)
    with contextlib.ExitStack() as stack:
        stack.enter_context(patch.object(current_platform, "is_cuda", lambda: cuda))
        if cuda and hasattr(config_module, "HAS_TRITON"):
            # 0.30.0: HiSparse takes the V2 model runner, which refuses to run
            # without Triton; a CUDA deployment has it, this CPU has not.
            stack.enter_context(patch.object(config_module, "HAS_TRITON", True))
        yield


# Errors that come from standing in for the deployment on a CPU, not from the
# HMA decision: the case is not recorded.
NOT_A_CASE = (
    (ImportError, re.compile(r"requires the CUDA|vllm_flash_attn|_C\b")),
    (ValueError, re.compile(r"HiSparse is only supported for DSA models")),
    # The V2 model runner needs Triton, which this CPU environment has not:
    # asked for it, vLLM refuses (0.28.0); left to choose, it takes the V1
    # runner, which refuses what only V2 serves (0.30.0: dspark drafts).
    (ValueError, re.compile(r"Model Runner V2 requires Triton|Model Runner V1 does not support: ")),
    (AttributeError, re.compile(r"'_C' object has no attribute")),
)
# Modules that probe CUDA kernels when first imported: imported once here,
# with the CPU platform's own is_cuda, so that no case pays for the probe.
for _module in ("vllm.model_executor.layers.quantization.utils.w8a8_utils",):
    try:
        __import__(_module)
    except Exception:
        pass


def _not_a_case(exc):
    for kind, pattern in NOT_A_CASE:
        if isinstance(exc, kind) and pattern.search(str(exc)):
            return {"skip": f"needs what a CPU stand-in lacks: {type(exc).__name__}: {str(exc)[:200]}"}
    return None


class _NotACase(Exception):
    """A stage failed for want of what the CPU stand-in lacks (NOT_A_CASE): the case is not recorded."""

    def __init__(self, skip: dict):
        super().__init__(skip["skip"])
        self.skip = skip


@contextlib.contextmanager
def vllm_stage(stage: str):
    """What vLLM raises inside is the case's first error at ``stage`` (or, per NOT_A_CASE, no case at all)."""
    try:
        yield
    except Outcome:
        raise
    except Exception as exc:
        skip = _not_a_case(exc)
        if skip:
            raise _NotACase(skip) from None
        stage, code = classify(exc, stage)
        raise Outcome(stage, code, f"{type(exc).__name__}: {str(exc)[:400]}") from None


def run_case(doc: dict) -> dict:
    capture = _Capture()
    vllm_logger = logging.getLogger("vllm")
    vllm_logger.addHandler(capture)
    root = logging.getLogger()
    root.addHandler(capture)
    notes: list[str] = []
    sources: set[str] = set()
    hma_enabled = None
    error = None
    env = {k: v for k, v in (doc.get("env") or {}).items()}
    platform = doc.get("platform") or {}
    whole_case, while_configuring = platform_answer(platform)
    try:
        with case_environment(env), whole_case, patch_is_cuda(doc, platform), \
                record_imports() as imported:
            try:
                ktc_doc = doc.get("kv_transfer_config")
                if ktc_doc is not None:
                    validate_graph(ktc_doc, notes)
                model = doc.get("model") or {}
                chunk = model.get("attention_chunk_size")
                kwargs = {"device_config": DeviceConfig("cpu")}
                preference = doc.get("disable_hybrid_kv_cache_manager")
                sched = dict(max_model_len=16, is_encoder_decoder=False,
                             disable_hybrid_kv_cache_manager=PREFERENCE_UNSET if preference is None else preference)
                kwargs["scheduler_config"] = SchedulerConfig(**{k: v for k, v in sched.items() if k in SCHEDULER_PARAMS})
                if ktc_doc is not None:
                    kwargs["kv_transfer_config"] = KVTransferConfig(**ktc_doc)
                cache = {}
                for key in ("kv_offloading_size", "kv_offloading_backend"):
                    if doc.get(key) is not None:
                        if key not in CACHE_FIELDS:
                            raise Outcome("input", "input.schema", f"{key}: not in this release")
                        cache[key] = doc[key]
                if cache:
                    kwargs["cache_config"] = CacheConfig(**cache)
                if doc.get("kv_events_config") is not None:
                    kwargs["kv_events_config"] = KVEventsConfig(**doc["kv_events_config"])
                if doc.get("hisparse_config") is not None:
                    if not HAS_HISPARSE:
                        # vllm serve refuses an option it does not have, as for the offloading fields.
                        raise Outcome("input", "input.schema", "hisparse_config: not in this release")
                    from vllm.config import AttentionConfig
                    from vllm.config.attention import HiSparseConfig  # type: ignore

                    kwargs["attention_config"] = AttentionConfig(hisparse_config=HiSparseConfig(**doc["hisparse_config"]))
                spec = doc.get("speculative_config") or {}
                method = spec.get("method")
                if chunk is not None or method is not None:
                    # A model is needed for chunked local attention, and as the
                    # speculative config's target.
                    kwargs["model_config"] = model_config(chunk)
                if method is not None:
                    kwargs["speculative_config"] = speculative_config(method, chunk)
            except Outcome:
                raise
            except Exception as exc:
                # Building the inputs (not vLLM's decision) failed: not a case.
                return {"skip": f"inputs could not be built: {type(exc).__name__}: {str(exc)[:300]}"}
            with vllm_stage("config"), while_configuring():
                config = VllmConfig(**kwargs)
            hma_enabled = not config.scheduler_config.disable_hybrid_kv_cache_manager
            kinds = model.get("layer_kinds") or []
            if kinds:
                try:
                    specs = kv_cache_specs(kinds, chunk)  # any other failure here is the runner's: reported
                except _NoSuchLayer as exc:
                    return {"skip": f"the model cannot be expressed: {exc}"}
                try:
                    plan(config, specs)
                except Exception as exc:
                    if _in_function(exc, "unify_hybrid_kv_cache_specs"):
                        stage, code = classify(exc, "planning")
                        raise Outcome(stage, code, f"{type(exc).__name__}: {str(exc)[:400]}") from None
                    if _in_function(exc, "check_enough_kv_cache_memory"):
                        # get_kv_cache_config checks memory before it unifies: never let it decide.
                        raise RuntimeError("KV cache planning failed before the specs were unified") from exc
                    # Grouping the synthetic specs (page sizes) is not the HMA decision.
                    notes.append(f"planning after unification raised {type(exc).__name__}: {str(exc)[:200]}")
            if config.kv_transfer_config is not None:
                with vllm_stage("connector"):
                    cls = create_connector_checks(config)
                if cls.__name__ == "MultiConnector" or issubclass(cls, _multi_connector_class()):
                    try:
                        simulate_multi_construction(cls, config, sources)
                    except Outcome:
                        raise
                    except Exception as exc:
                        stage, code = classify(exc, "connector")
                        raise Outcome(stage, code, f"{type(exc).__name__}: {str(exc)[:400]}") from None
    except _NotACase as exc:
        return exc.skip
    except Outcome as outcome:
        error = {"stage": outcome.stage, "code": outcome.code, "message": outcome.message}
        if outcome.stage in ("input", "config"):
            hma_enabled = None
        if outcome.source:
            sources.add(outcome.source)
    finally:
        vllm_logger.removeHandler(capture)
        root.removeHandler(capture)
    stubs, backed = stub_use(imported, doc)
    if backed:
        return {"skip": "a connector class would come from an import-only stand-in: " + ", ".join(backed)}
    warnings, unmapped = [], []
    seen = set()
    for record in capture.records:
        if record.levelno < logging.WARNING:
            continue
        text = _message(record)
        if id(record) in seen:
            continue
        seen.add(id(record))
        for code, pattern in WARNING_PATTERNS:
            if pattern.search(text):
                warnings.append(code)
                break
        else:
            if HMA_WORDS.search(text):
                unmapped.append(text[:300])
    if error is not None and error["stage"] == "input":
        warnings = []
    outcome = "error" if error else ("enabled" if hma_enabled else "disabled")
    return {
        "outcome": outcome,
        "hma_enabled": hma_enabled,
        "error": error,
        "warnings": sorted(set(warnings)),
        "unmapped_warnings": unmapped,
        "source_read": sorted(sources),
        "stubs": stubs,
        "notes": notes,
    }


def registered_names() -> list[str]:
    return sorted(KVConnectorFactory._registry)


def hma_classes() -> dict:
    """Each registered name -> True/False (class inherits SupportsHMA), or the error resolving it."""
    answer = {}
    for name in registered_names():
        try:
            module, class_name = registry_modules().get(name, (None, None))
            if GET_CONNECTOR_CLASS is not None:
                cls = GET_CONNECTOR_CLASS(KVTransferConfig(kv_connector=name, kv_role="kv_both"))
            else:
                cls = getattr(__import__(module, fromlist=[class_name]), class_name)
            if _import_stubs.from_stub(cls):
                answer[name] = "the class would come from an import-only stand-in"
            else:
                answer[name] = bool(supports_hma(cls)) if supports_hma else False
        except Exception as exc:
            answer[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return answer


def main() -> int:
    job_file, out_file = Path(sys.argv[1]), Path(sys.argv[2])
    job = json.loads(job_file.read_text(encoding="utf-8"))
    prepare_stubs([doc for _, doc in job["cases"]])
    results = {}
    info = {
        "adaptations": adaptations(),
        "stubs_by_module": {k: v for k, v in STUBS_BY_MODULE.items() if v},
        "stub_errors": STUB_ERRORS,
        "loaded_with_stubs": LOADED_WITH_STUBS,
        "stub_reasons": STUB_REASONS,
        "vllm_version": getattr(vllm, "__version__", "?"),
        "construction_rule": list(CONSTRUCTION),
        "cache_fields": sorted(CACHE_FIELDS & {"kv_offloading_size", "kv_offloading_backend"}),
        "has_hisparse": HAS_HISPARSE,
    }
    if job.get("describe"):
        info["registered"] = registered_names()
        info["supports_hma"] = hma_classes()
    for case_id, doc in job["cases"]:
        try:
            results[case_id] = run_case(doc)
        except Exception as exc:  # the runner itself failed on this case: reported, never recorded
            results[case_id] = {"fault": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    out_file.write_text(json.dumps({"info": info, "results": results}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
