"""vllm-project/production-stack: its Helm chart's values
(``servingEngineSpec.modelSpec[]``) and its operator's ``VLLMRuntime``,
each read through the mapping that turns them into vLLM's command line,
reproduced where it changes the decision (the chart's
``helm/templates/deployment-vllm-multi.yaml`` and ``ray-cluster.yaml``, the
operator's ``vllmruntime_controller.go``):

- each enabled ``modelSpec`` entry is one Deployment (container ``vllm``)
  running ``vllm serve <modelURL> --host 0.0.0.0 --port <containerPort>``,
  its ``vllmConfig.extraArgs``, then, with ``lmcacheConfig.enabled``, a
  ``--kv-transfer-config`` (after extraArgs, so it wins): LMCacheConnectorV1
  with ``kv_role`` ``lmcacheConfig.kvRole`` or kv_both (and its extra config
  when the key ``enablePD`` is there), LMCacheConnector when
  ``vllmConfig.v0`` is "1";
- with ``raySpec.enabled`` the entry is a RayCluster whose head runs vLLM;
  there the connector is LMCacheConnectorV1 only when ``vllmConfig.v1`` is "1";
- a VLLMRuntime's container runs the same with ``spec.vllmConfig.extraArgs``
  and, with ``spec.lmCacheConfig.enabled``, LMCacheConnectorV1 kv_both when
  ``spec.vllmConfig.v1`` is set, else LMCacheConnector.

The release name and namespace are chosen at ``helm install``: the
resource names show them as ``<release>`` and ``<release-namespace>``."""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import Problem
from .context import Ctx
from ...core.deployers import config, deployer
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_stack_values", "stack_values", "vllm_runtimes", "RUNTIME_KIND"]

RUNTIME_KIND = "VLLMRuntime"
_ROLES = {"kv_producer": "prefill", "kv_consumer": "decode"}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def is_stack_values(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(_dict(value.get("servingEngineSpec")).get("modelSpec"), list)


def stack_values(ctx: Ctx, values: dict[str, Any], lines: Lines) -> tuple[list[Deployment], list[Problem], list[Problem]]:
    """The launches of a values file, its problems, and notes on the entries the chart renders nothing for."""
    engine = _dict(values.get("servingEngineSpec"))
    problems: list[Problem] = []
    notes: list[Problem] = []
    out: list[Deployment] = []
    if engine.get("enableEngine") is False:
        notes.append(ctx.problem("source.unrecognized", "servingEngineSpec.enableEngine is false: the chart renders "
                                 "no vLLM Deployment", line=lines.at("servingEngineSpec", "enableEngine")))
        return out, problems, notes
    for index, entry in enumerate(engine["modelSpec"]):
        if isinstance(entry, dict) and entry.get("enabled") is False:
            notes.append(ctx.problem("source.unrecognized", f"modelSpec `{entry.get('name')}` has `enabled: false`: "
                                     "the chart renders no Deployment for it", line=lines.at(
                                         "servingEngineSpec", "modelSpec", index, "enabled")))
        if not isinstance(entry, dict) or entry.get("enabled") is False:
            continue
        name = str(entry.get("name") or index)
        vllm, lmcache = _dict(entry.get("vllmConfig")), _dict(entry.get("lmcacheConfig"))
        ray = _dict(entry.get("raySpec")).get("enabled") is True
        repository, tag = str(entry.get("repository") or ""), str(entry.get("tag") or "")
        program = ["/opt/venv/bin/vllm", "serve"] if repository == "lmcache/vllm-openai" else ["vllm", "serve"]
        args = [str(entry.get("modelURL") or ""), "--host", "0.0.0.0", "--port", str(engine.get("containerPort") or 8000)]
        if ray:
            args += ["--distributed-executor-backend", "ray"]
        extra = vllm["extraArgs"] if isinstance(vllm.get("extraArgs"), list) else []
        args += [str(a) for a in extra]
        if lmcache.get("enabled") is True:  # the template's branch, then the config it writes (deployers.yaml)
            if ray:  # ray-cluster.yaml L740-752
                template = deployer("production-stack-ray")["v1" if str(vllm.get("v1")) == "1" else "v0"]
            else:  # deployment-vllm-multi.yaml L204-217
                branch = "pd" if "enablePD" in lmcache else "v0" if str(vllm.get("v0")) == "1" else "v1"
                template = deployer("production-stack-chart")[branch]
            args += ["--kv-transfer-config", json.dumps(config(template, lmcache))]
        env = [e for e in (entry.get("env") or []) + (engine.get("env") or []) if isinstance(e, dict)] \
            if isinstance(entry.get("env") or [], list) and isinstance(engine.get("env") or [], list) else []
        if str(vllm.get("v0")) == "1":
            env.append({"name": "VLLM_USE_V1", "value": "0"})
        container = {"name": "vllm-ray-head" if ray else "vllm", "image": f"{repository}:{tag}",
                     "command": program, "args": args, "env": env}
        role = "leader" if ray else _ROLES.get(str(lmcache.get("kvRole")))
        site = Site("RayCluster" if ray else "Deployment",
                    f"<release>-{name}-raycluster" if ray else f"<release>-{name}-deployment-vllm",
                    "<release-namespace>", "ray.io/v1" if ray else "apps/v1", role, format="helm-values")
        line = lines.first(("servingEngineSpec", "modelSpec", index, "name"), ("servingEngineSpec", "modelSpec", index))
        out += pod_launches(ctx, {"containers": [container]}, None, site, lines, (), {}, problems, line=line)
    return out, problems, notes


def vllm_runtimes(ctx: Ctx, runtimes: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    out: list[Deployment] = []
    for runtime, lines in runtimes:
        meta, spec = _dict(runtime.get("metadata")), _dict(runtime.get("spec"))
        model, vllm, lmcache = _dict(spec.get("model")), _dict(spec.get("vllmConfig")), _dict(spec.get("lmCacheConfig"))
        args = [str(model.get("modelURL") or ""), "--host", "0.0.0.0", "--port", str(vllm.get("port") or 8000)]
        args += [str(a) for a in vllm["extraArgs"]] if isinstance(vllm.get("extraArgs"), list) else []
        if lmcache.get("enabled") is True:  # vllmruntime_controller.go L541-564
            branch = "v1" if vllm.get("v1") else "v0"
            args += ["--kv-transfer-config", json.dumps(config(deployer("production-stack-operator")[branch]))]
        image = _dict(_dict(spec.get("deploymentConfig")).get("image"))
        container = {"name": "vllm", "image": "/".join(str(image[k]) for k in ("registry", "name") if image.get(k)),
                     "command": ["/opt/venv/bin/vllm", "serve"], "args": args,
                     "env": [e for e in vllm.get("env") or [] if isinstance(e, dict)] if isinstance(vllm.get("env"), list) else []}
        site = Site(RUNTIME_KIND, str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                    str(runtime.get("apiVersion")), format="production-stack-crd")
        out += pod_launches(ctx, {"containers": [container]}, None, site, lines, (), {}, problems,
                            line=lines.key("spec") or lines.at())
    return out, problems
