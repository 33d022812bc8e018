"""KubeAI (substratusai/kubeai) ``Model`` objects whose engine is vLLM: each
is a launch.

KubeAI's model controller runs such a Model as a pod of one container
(internal/modelcontroller/engine_vllm.go, substratusai/kubeai 2f32ef49,
lines 20-87): ``python3 -m vllm.entrypoints.openai.api_server`` with
``--model=<model>`` and ``--served-model-name=<the Model's name>``, then
``--load-format=runai_streamer`` for an ``s3://`` URL, the Model's ``args``,
and ``--enable-lora`` when it lists adapters; its environment is
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` with adapters, then the Model's
``env`` by name, and ``envFrom`` (model_controller.go). The model is the
URL's reference (``hf://org/name``: ``org/name``), the URL for ``s3://``,
``/model`` for ``pvc://``, and the cache directory with a ``cacheProfile``
(cache.go: ``/models/<name>-<uid>``). The image is the Model's ``image``,
else the one the operator's configuration names for the Model's resource
profile (``modelServers.VLLM.images`` in its Helm values), which is not in
the file: the release is then not known. The Model's ``files`` (mounted
into the container) are not read.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import Problem
from ...core.markers import unresolved
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_model", "kubeai_models"]

# What the controller starts the engine with (engine_vllm.go, line 86).
_COMMAND = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
# A model URL: scheme://reference[?query] (model_source.go, modelURLRegex).
_URL = re.compile(r"^([a-z0-9]+)://([^?]+)(\?.*)?$")
# The image when the Model names none: the operator's, for its resource profile.
_OPERATOR_IMAGE = unresolved("modelServers.VLLM.images of the KubeAI operator")


def is_model(obj: dict[str, Any]) -> bool:
    """A KubeAI Model that vLLM serves (``spec.engine: VLLM``; other engines run other servers)."""
    spec = obj.get("spec")
    return obj.get("kind") == "Model" and str(obj.get("apiVersion", "")).startswith("kubeai.org/") \
        and isinstance(spec, dict) and spec.get("engine") == "VLLM"


def kubeai_models(ctx: Ctx, models: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    """The launch of each Model, as its controller builds the pod."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in models:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        name = str(meta.get("name") or "")
        site = Site("Model", name, str(meta.get("namespace") or ""), str(obj.get("apiVersion")), format="kubeai")
        pod = {"containers": [_container(obj["spec"], name)]}
        line = lines.first(("spec", "engine"), ("spec",))
        found = pod_launches(ctx, pod, None, site, lines, ("spec",), {}, problems, object_meta=meta, line=line)
        bad = _not_strings(obj["spec"])
        if bad:  # as a Pod's container with such values is refused (kubernetes.py)
            must = "must be strings" if len(bad) > 1 else "must be a string"
            refused = ctx.problem("source.kubernetes", f"Model {name}: {', '.join(bad)} {must}; the API server "
                                  "rejects the Model", line=line)
            found = [d.replace(problems=d.problems + (refused,)) for d in found]
        out += found
    return out, problems


def _not_strings(spec: dict[str, Any]) -> list[str]:
    """Where the Model's args and env hold a value that is not a string (the CRD's types are strings)."""
    args = spec.get("args")
    env = spec.get("env")
    bad = [f"spec.args[{i}]" for i, a in enumerate(args) if not isinstance(a, str)] if isinstance(args, list) else []
    return bad + ([f"spec.env.{k}" for k, v in env.items() if not isinstance(v, str)] if isinstance(env, dict) else [])


def _container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    args = [f"--model={_model(spec)}", f"--served-model-name={name}"]
    url = _URL.match(spec["url"]) if isinstance(spec.get("url"), str) else None
    if url is not None and url.group(1) == "s3" and not spec.get("cacheProfile"):
        args.append("--load-format=runai_streamer")
    args += [a for a in spec["args"] if isinstance(a, str)] if isinstance(spec.get("args"), list) else []
    env = []
    if spec.get("adapters") is not None:
        args.append("--enable-lora")
        env.append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    given = spec["env"] if isinstance(spec.get("env"), dict) else {}
    env += [{"name": key, "value": value} for key, value in sorted(given.items()) if isinstance(value, str)]
    image = spec["image"] if isinstance(spec.get("image"), str) and spec["image"] else _OPERATOR_IMAGE
    container: dict[str, Any] = {"name": "server", "image": image, "command": list(_COMMAND), "args": args, "env": env}
    if isinstance(spec.get("envFrom"), list):
        container["envFrom"] = spec["envFrom"]
    return container


def _model(spec: dict[str, Any]) -> str:
    """What the controller passes as --model (engine_vllm.go, lines 20-32)."""
    url = spec.get("url")
    found = _URL.match(url) if isinstance(url, str) else None
    if found is None:
        return unresolved("the Model's url")  # the controller refuses the Model (an invalid URL)
    if found.group(1) == "pvc":
        return "/model"
    if spec.get("cacheProfile"):
        return unresolved("/models/<name>-<uid>", "is the Model's cache, which KubeAI's controller names")
    return found.group(0) if found.group(1) == "s3" else found.group(2)  # (the whole URL; else its reference)
