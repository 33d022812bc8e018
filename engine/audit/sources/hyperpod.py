"""Amazon SageMaker HyperPod ``InferenceEndpointConfig`` objects: the worker
that serves the model is a launch.

The HyperPod inference operator (its CRD in aws/sagemaker-hyperpod-cli
011ca927, helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd)
runs ``spec.worker`` as the model server's container: its ``image``, its
``command`` (an entrypoint array, not run in a shell; without one, the
image's own entrypoint) and ``args``, ``environmentVariables`` as the
container's environment, ``workingDir`` and ``resources``. A ``pdSpec``
runs prefill and decode as Deployments of their own, each with the worker's
``args`` and then its role's (``prefillSpec.args``, ``decodingSpec.args``:
"appended after the shared workerConfig.args and override any matching
flags"). The operator is not open source: what it adds to the engine is not
in any file. A ``kvCacheSpec`` has it configure KV cache offloading
(``enableL1Cache`` is true by default; LMCache, by AWS's documentation of
HyperPod's managed tiered KV cache), and a ``pdSpec`` connects prefill and
decode: either way through a KV connector the file does not give, so the
launch's KV configuration is not known (``source.unresolved``).
"""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from ...core.markers import unresolved
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_endpoint_config", "endpoint_configs"]

KIND = "InferenceEndpointConfig"
_API_GROUP = "inference.sagemaker.aws.amazon.com/"
# Each role of a pdSpec, and the field of its own arguments.
_ROLES = (("prefill", "prefillSpec"), ("decode", "decodingSpec"))
_HINT = "audit the pods as the operator creates them (kubectl get pod -o yaml)"


def is_endpoint_config(obj: dict[str, Any]) -> bool:
    """A HyperPod InferenceEndpointConfig with a worker."""
    spec = obj.get("spec")
    return obj.get("kind") == KIND and str(obj.get("apiVersion", "")).startswith(_API_GROUP) \
        and isinstance(spec, dict) and isinstance(spec.get("worker"), dict)


def endpoint_configs(ctx: Ctx, configs: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    """The launch of each config's worker (each role's, with a pdSpec), as the operator runs its container."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in configs:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        name = str(meta.get("name") or "")
        spec, worker = obj["spec"], obj["spec"]["worker"]
        line = lines.first(("spec", "worker", "image"), ("spec", "worker"))
        pd = spec.get("pdSpec") if isinstance(spec.get("pdSpec"), dict) else None
        roles: list[tuple[str | None, dict[str, Any]]] = [(None, {})] if pd is None else \
            [(role, pd[field] if isinstance(pd.get(field), dict) else {}) for role, field in _ROLES]
        unknown = _operator_connector(spec)
        for role, own in roles:
            site = Site(KIND, name, str(meta.get("namespace") or ""), str(obj.get("apiVersion")),
                        role=role, format="hyperpod")
            container = _container(worker, own)
            found = pod_launches(ctx, {"containers": [container]}, None, site, lines, ("spec", "worker"), {}, problems,
                                 object_meta=meta, line=line)
            if unknown is not None:
                missing = ctx.problem("source.unresolved", f"{KIND} {name}: {unknown}", line=line,
                                      path="/kv_transfer_config", hint=_HINT)
                found = [d.replace(problems=d.problems + (missing,)) for d in found]
            out += found
    return out, problems


def _container(worker: dict[str, Any], role: dict[str, Any]) -> dict[str, Any]:
    """The worker's container, with a pdSpec role's arguments after its own and the role's resources."""
    image = worker["image"] if isinstance(worker.get("image"), str) and worker["image"] \
        else unresolved("the worker's image")
    container: dict[str, Any] = {"name": "worker", "image": image}
    if isinstance(worker.get("command"), list):
        container["command"] = worker["command"]
    args = [*_strings(worker.get("args")), *_strings(role.get("args"))]
    if args:
        container["args"] = args
    if isinstance(worker.get("environmentVariables"), list):
        container["env"] = worker["environmentVariables"]
    for field in ("workingDir", "resources"):
        if field in worker:
            container[field] = worker[field]
    if isinstance(role.get("resources"), dict):
        container["resources"] = role["resources"]
    return container


def _strings(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _operator_connector(spec: dict[str, Any]) -> str | None:
    """Why the operator sets a KV connector the file does not give (None: it sets none)."""
    cache = spec.get("kvCacheSpec")
    if isinstance(cache, dict) and (cache.get("enableL1Cache", True) is not False or cache.get("enableL2Cache") is True
                                    or cache.get("cacheConfigFile")):
        return ("its `kvCacheSpec` has the HyperPod inference operator configure the engine's KV cache offloading "
                "(LMCache, by AWS's documentation of HyperPod's managed tiered KV cache) with a KV connector that "
                "is not in the audited files")
    if isinstance(spec.get("pdSpec"), dict):
        return ("its `pdSpec` has the HyperPod inference operator run prefill and decode apart, connected by a KV "
                "connector that is not in the audited files")
    return None
