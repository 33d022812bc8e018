"""volcano-sh/kthena ``ModelBooster`` objects whose backend is vLLM: each
worker that runs the engine is a launch.

Kthena's model-booster controller turns a ModelBooster into a ModelServing
(pkg/model-booster-controller/convert/model_serving.go, volcano-sh/kthena
3cc05728): a backend of type ``vLLM`` runs its ``server`` worker, one of type
``vLLMDisaggregated`` its ``prefill`` and ``decode`` workers, each in a
container of the worker's ``image`` whose command is ``python3 -m
vllm.entrypoints.openai.api_server --model <cache path>`` followed by the
worker's ``config`` as options: keys sorted, ``--key value`` with ``_`` as
``-``, a value of ``""`` a bare flag, a boolean or a number as Go prints it
(utils/template.go, ConvertVLLMArgsFromJson; a ``vLLM`` backend takes the
first worker's config). A server worker of more than one pod adds
``--distributed_executor_backend ray`` and runs the words joined by blanks
in ``bash -c``, after Kthena's multi-node script; so does a GPU worker
whose ``kv-transfer-config`` names a connector whose package the
controller installs first (deployers.yaml), unless the backend's ``env`` sets
KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL (buildCommands). A joined command is
split again by bash, as the audit reads any ``bash -c``. The engine's
environment is the backend's ``env``, then ``VLLM_USE_V1=1``
(buildEngineEnvVars).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from ...core.deployers import deployer
from ...core.errors import Problem
from ...core.markers import unresolved
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_model_booster", "model_boosters"]

_API_GROUP = "workload.serving.volcano.sh/"
# The workers each backend type runs the engine in (model_serving.go, BuildModelServing).
_WORKERS = {"vLLM": ("server",), "vLLMDisaggregated": ("prefill", "decode")}
_COMMAND = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
_MULTI_NODE_SCRIPT = "examples/online_serving/multi-node-serving.sh"
_SKIP_INSTALL = "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL"
_DEVICES = ("nvidia.com/gpu", "huawei.com/ascend-1980")  # utils/common.go, XPUList


def is_model_booster(obj: dict[str, Any]) -> bool:
    """A ModelBooster whose backend runs vLLM."""
    spec = obj.get("spec")
    backend = spec.get("backend") if isinstance(spec, dict) else None
    return obj.get("kind") == "ModelBooster" and str(obj.get("apiVersion", "")).startswith(_API_GROUP) \
        and isinstance(backend, dict) and backend.get("type") in _WORKERS


def model_boosters(ctx: Ctx, boosters: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    """The launch of each engine worker of each ModelBooster, as the controller builds its container."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in boosters:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        backend = obj["spec"]["backend"]
        workers = [w if isinstance(w, dict) else {} for w in backend.get("workers") or []] \
            if isinstance(backend.get("workers"), list) else []
        for index, worker in enumerate(workers):
            if worker.get("type") not in _WORKERS[backend["type"]]:
                continue
            config = (workers[0] if backend["type"] == "vLLM" else worker).get("config")
            site = Site("ModelBooster", str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                        str(obj.get("apiVersion")), role=str(worker["type"]), format="kthena")
            image = worker.get("image") if isinstance(worker.get("image"), str) else unresolved("the worker's image")
            env = [e for e in backend.get("env") or [] if isinstance(e, dict)] if isinstance(backend.get("env"), list) else []
            container = {"name": str(worker["type"]), "image": image, "env": env + [{"name": "VLLM_USE_V1", "value": "1"}],
                         "command": _command(backend, workers, config)}
            line = lines.first(("spec", "backend", "workers", index, "type"), ("spec", "backend", "workers", index))
            out += pod_launches(ctx, {"containers": [container]}, None, site, lines, ("spec", "backend"), {}, problems,
                                object_meta=meta, line=line)
    return out, problems


def _command(backend: dict[str, Any], workers: list[dict[str, Any]], config: Any) -> list[str]:
    """The container's command (buildCommands)."""
    words = [*_COMMAND, "--model", _model_path(backend), *_options(config)]
    server = next((w for w in workers if w.get("type") == "server"), None)
    if server is not None and _int(server.get("pods")) > 1:
        words += ["--distributed_executor_backend", "ray"]
        script = _MULTI_NODE_SCRIPT
        words = ["bash", "-c", f"chmod u+x {script} && {script} leader --ray_cluster_size={_int(server.get('pods'))} "
                                f"--num-gpus={sum(_limit(server, d) for d in _DEVICES)} && {' '.join(words)}"]
    # (the connectors whose package the controller installs first: deployers.yaml)
    install = deployer("kthena")["installs"].get(_connector(config))
    if install is not None and any(_limit(w, "nvidia.com/gpu") > 0 for w in workers) and not _skips_install(backend):
        words = ["bash", "-c", install + " ".join(words)]
    return words


def _options(config: Any) -> list[str]:
    """The worker's config as options (ConvertVLLMArgsFromJson)."""
    if not isinstance(config, dict):
        return []
    out = []
    for key in sorted(config):
        value = config[key]
        out.append("--" + str(key).replace("_", "-"))
        text = ("true" if value else "false") if isinstance(value, bool) else value if isinstance(value, str) else \
            json.dumps(value) if isinstance(value, int) else repr(value) if isinstance(value, float) else \
            unresolved(f"config.{key}", "is written by Kthena's controller with Go's %v, not as JSON")
        if text != "":
            out.append(text)
    return out


def _connector(config: Any) -> str:
    """The kv_connector of the config's kv-transfer-config text (getKvConnectorFromConfig)."""
    text = config.get("kv-transfer-config") if isinstance(config, dict) else None
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return ""
    connector = value.get("kv_connector") if isinstance(value, dict) else None
    return connector if isinstance(connector, str) else ""


def _skips_install(backend: dict[str, Any]) -> bool:
    """The backend's env sets KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL to what strconv.ParseBool reads as true."""
    env = backend["env"] if isinstance(backend.get("env"), list) else []
    value = next((e.get("value") for e in env if isinstance(e, dict) and e.get("name") == _SKIP_INSTALL), None)
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _model_path(backend: dict[str, Any]) -> str:
    """Where the downloader puts the model: the cache URI's path, then the MD5 of the model URI (GetCachePath,
    GetMountPath)."""
    cache, model = backend.get("cacheURI"), backend.get("modelURI")
    parts = urlsplit(cache) if isinstance(cache, str) and "://" in cache else None
    base = "/" + (parts.netloc + parts.path).strip("/") if parts is not None and (parts.netloc + parts.path).strip("/") \
        else ""
    return base + "/" + hashlib.md5(str(model or "").encode(), usedforsecurity=False).hexdigest()


def _limit(worker: dict[str, Any], device: str) -> int:
    resources = worker.get("resources")
    limits = resources.get("limits") if isinstance(resources, dict) else None
    return _int(limits.get(device)) if isinstance(limits, dict) else 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else \
        int(value) if isinstance(value, str) and value.isdigit() else 0
