"""Baseline (a): a plain-Python transcription of vLLM 0.33.0's
KVConnectorFactory.supports_hma_config and VllmConfig's HMA block, written
from ../shared/reference/vllm-hma.md for the benchmarks only (the engine does
not use it; tests/reference_model.py is the independent model for testing).
Like vLLM, it builds a config object per child (vLLM builds a KVTransferConfig).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SUPPORTS_HMA = {
    "ExampleConnector": False, "ExampleHiddenStatesConnector": True, "LMCacheConnectorV1": False,
    "LMCacheMPConnector": True, "NixlConnector": True, "NixlPullConnector": True, "NixlPushConnector": True,
    "MultiConnector": True, "HiSparseConnector": True, "MoRIIOConnector": True, "OffloadingConnector": True,
    "DecodeBenchConnector": True, "MooncakeConnector": True, "MooncakeStoreConnector": True,
    "FlexKVConnectorV1": False, "SimpleCPUOffloadConnector": True, "HF3FSKVConnector": False,
}
EAGLE = {"eagle", "eagle3", "mtp", "dflash", "dspark"}


@dataclass
class KVTransferConfig:
    kv_connector: str | None = None
    engine_id: str | None = None
    kv_role: str | None = None
    kv_connector_extra_config: dict[str, Any] = field(default_factory=dict)
    kv_connector_module_path: str | None = None
    kv_port: int = 14579
    kv_buffer_device: str = "cuda"
    enable_permute_local_kv: bool = False
    kv_load_failure_policy: str = "fail"


def _cls(ktc: KVTransferConfig) -> str:
    if ktc.kv_connector is None:
        raise ValueError("Connector name is not set in KVTransferConfig")
    if ktc.kv_connector_module_path == "":
        raise ValueError("kv_connector_module_path cannot be an empty string.")
    if ktc.kv_connector not in SUPPORTS_HMA:
        raise ValueError(f"Unsupported connector type: {ktc.kv_connector}")
    return ktc.kv_connector


def _supports(ktc: KVTransferConfig) -> bool:
    name = _cls(ktc)
    if ktc.kv_connector != "MultiConnector":
        return SUPPORTS_HMA[name]
    children = ktc.kv_connector_extra_config.get("connectors", [])
    if not children:
        return False
    for child in children:
        if not _supports(KVTransferConfig(**{"engine_id": ktc.engine_id, **child})):
            return False
    return True


def vllm_supports_hma_config(ktc: dict[str, Any]) -> bool:
    return _supports(KVTransferConfig(**ktc))


def vllm_decide(document: dict[str, Any]) -> bool | None:
    """The resolved disable_hybrid_kv_cache_manager."""
    ktc = document.get("kv_transfer_config")
    platform = document.get("platform") or {}
    model = document.get("model") or {}
    spec = document.get("speculative_config") or {}
    need_disable = not platform.get("supports_hybrid_kv_cache", True)
    if model.get("attention_chunk_size") is not None:
        if spec.get("method") in EAGLE:
            need_disable = True
        elif str((document.get("env") or {}).get("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "1")).strip() == "0":
            need_disable = True
    disable = document.get("disable_hybrid_kv_cache_manager")
    if disable is None:
        if ktc is not None and not vllm_supports_hma_config(ktc):
            need_disable = True
        disable = need_disable
    elif disable is False and need_disable:
        raise ValueError("Hybrid KV cache manager was explicitly enabled but is not supported in this configuration")
    return disable
