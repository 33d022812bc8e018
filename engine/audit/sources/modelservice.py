"""llm-d ``ModelService`` (``llm-d.ai/v1alpha1``, the llm-d-model-service
controller): its ``decode`` and ``prefill`` are each one launch, made from
the base config the service names (``spec.baseConfigMapRef``: a ConfigMap
whose ``decodeDeployment``/``prefillDeployment`` keys hold a Deployment as a
YAML string, Go template actions allowed) merged with the service's
containers as the controller merges them
(``internal/controller/merge_transformers.go``): containers by name; a
service container's ``command`` replaces the base's; its ``args`` come
*before* the base's; ``env`` merged by name; other fields override.

The base config ConfigMap is looked up in the same file, then in the audited
paths; one that is not there leaves the launch unresolved. A base config
alone is no launch (noted)."""

from __future__ import annotations

from typing import Any

from ...core import yamlsafe
from ...core.markers import unresolved
from ...core.errors import Problem
from .companions import nearest_first, objects_of_kind
from .context import Ctx
from .deployment import Deployment
from .gotemplate import render
from .kserve import strategic_merge
from .kubernetes import Site, pod_launches, pod_templates
from .marks import Lines
from .placeholders import load_rendered

__all__ = ["is_model_service", "is_base_config", "base_config_note", "model_services", "SERVICE_KIND"]

SERVICE_KIND = "ModelService"
_ROLES = ("decode", "prefill")


def is_model_service(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == SERVICE_KIND and str(obj.get("apiVersion", "")).startswith("llm-d.ai/")


def is_base_config(obj: dict[str, Any]) -> bool:
    data = obj.get("data")
    return obj.get("kind") == "ConfigMap" and isinstance(data, dict) \
        and any(isinstance(data.get(f"{role}Deployment"), str) for role in _ROLES)


def base_config_note(ctx: Ctx, obj: dict[str, Any], line: int) -> Problem:
    """What a base config is, for the file that holds it alone."""
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    return ctx.problem("source.unrecognized", f"ConfigMap `{meta.get('name')}` is an llm-d ModelService base config: the "
                       "controller merges it into the ModelServices that name it; it is no launch on its own", line=line)


def _merge_container(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in given.items():
        if key == "args" and isinstance(value, list):
            out["args"] = value + (base["args"] if isinstance(base.get("args"), list) else [])
        elif key == "env" and isinstance(value, list):
            out["env"] = strategic_merge(base.get("env") if isinstance(base.get("env"), list) else [], value, "env")
        elif key == "command" and not value:
            continue
        else:
            out[key] = value
    return out


def _merged_pod(pod: dict[str, Any], given: list[dict[str, Any]]) -> dict[str, Any]:
    """The base pod with the service's containers merged in by name; a new name is added."""
    by_name = {str(g.get("name")): g for g in given}
    containers = [_merge_container(c, by_name.pop(str(c.get("name")))) if isinstance(c, dict)
                  and str(c.get("name")) in by_name else c for c in pod["containers"]]
    return dict(pod, containers=containers + list(by_name.values()))


def model_services(ctx: Ctx, services: list[tuple[dict[str, Any], Lines]],
                   local: list[dict[str, Any]]) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    out: list[Deployment] = []
    here = {str(c["metadata"].get("name")): (c, ctx.display) for c in local if isinstance(c.get("metadata"), dict)}
    for svc, lines in services:
        meta = svc["metadata"] if isinstance(svc.get("metadata"), dict) else {}
        spec = svc["spec"] if isinstance(svc.get("spec"), dict) else {}
        ref = spec.get("baseConfigMapRef") if isinstance(spec.get("baseConfigMapRef"), dict) else {}
        base = _base_config(ctx, str(ref.get("name") or ""), here) if ref else None
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        for role in _ROLES:
            part = spec.get(role)
            if not isinstance(part, dict):
                continue
            given = [c for c in part.get("containers") or [] if isinstance(c, dict)] \
                if isinstance(part.get("containers"), list) else []
            line = lines.first((("spec", role, "containers", 0, "name")), ("spec", role)) or lines.at()
            site = Site(SERVICE_KIND, name, namespace, str(svc.get("apiVersion")), role,
                        (base[1],) if base and base[1] != ctx.display else (), "modelservice")
            template = base[0].get(f"{role}Deployment") if base else None
            deployment, problem = _deployment(ctx, template, svc) if isinstance(template, str) else (None, None)
            if deployment is None:
                found = pod_launches(ctx, {"containers": given}, None, site, lines, (), {}, problems, line=line)
                if not ref:  # (the controller's base is then empty: the pod is the service's containers alone)
                    out += found
                    continue
                why = problem or f"the base config `{ref.get('name')}` is not in the audited paths"
                unresolved_problem = ctx.problem("source.unresolved", f"{SERVICE_KIND} {name} ({role}): its pod "
                                                 f"comes from a base config, and {why}", line=line,
                                                 hint="audit the base config ConfigMap too")
                out += [d.replace(document=None, problems=d.problems + (unresolved_problem,)) for d in found] or \
                    ([Deployment(ctx.display, "modelservice", f"#{SERVICE_KIND}/{name}/{role}", line, f"{name}/{role}",
                                 None, (unresolved_problem,), resource=site.resource(), role=role)] if given else [])
                continue
            for _, pod, pod_meta, _ in pod_templates(deployment):
                out += pod_launches(ctx, _merged_pod(pod, given), pod_meta, site, lines, (), {}, problems, line=line)
    return out, problems


def _base_config(ctx: Ctx, name: str, here: dict[str, tuple[dict[str, Any], str]]) -> tuple[dict[str, Any], str] | None:
    """The data of the base config ConfigMap ``name`` and the file it is in."""
    found = here.get(name)
    if found is None:
        for companion, index in nearest_first(ctx, objects_of_kind(ctx, "ConfigMap").get(name, []))[:1]:
            found = companion.documents[index][0], companion.display
    if found is None or not isinstance(found[0].get("data"), dict):
        return None
    return found[0]["data"], found[1]


def _deployment(ctx: Ctx, template: str, svc: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The Deployment a base config key holds, its Go template actions rendered against the service."""
    meta = svc["metadata"] if isinstance(svc.get("metadata"), dict) else {}
    data = {"ModelServiceName": meta.get("name"),
            "ModelServiceNamespace": meta.get("namespace") or unresolved("{{ .ModelServiceNamespace }}")}
    text = render(template, data, {}) if "{{" in template else template
    try:
        # As the controller reads it (sigs.k8s.io/yaml, not strict): a key given twice keeps its last value.
        value = load_rendered(text, repeated=True)
    except yamlsafe.YamlProblem as exc:
        at = f" at line {exc.line}, column {exc.column}" if exc.line else ""
        return None, f"its Deployment is not YAML the audit can read (invalid YAML in a base config{at}: {exc.message})"
    return (value, None) if isinstance(value, dict) else (None, "its Deployment is not a mapping")
