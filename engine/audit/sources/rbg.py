"""RoleBasedGroup objects (sgl-project/rbg, API group ``workloads.x-k8s.io``):
each role's pods as the RBG controller builds them.

A role's pod template is written in the role (``template``) or is one of
``spec.roleTemplates`` that the role names (``templateRef``), with a
strategic-merge patch over it: v1alpha2's ``templateRef.patch``, v1alpha1's
role-level ``templatePatch`` (api/workloads/v1alpha2/helper.go,
GetResolvedTemplate; sgl-project/rbg 993491fb). v1alpha2 holds it in the
role's pattern: ``standalonePattern``, ``leaderWorkerPattern`` or
``customComponentsPattern`` (whose ``components`` each run their own
``template``); v1alpha1 in the role itself, with ``leaderWorkerSet`` for a
leader and its workers. A leader/worker role runs no pod of the template
alone: its leader runs the template merged with ``leaderTemplatePatch``
(v1alpha1: ``patchLeaderTemplate``), its workers the template merged with
``workerTemplatePatch`` (``patchWorkerTemplate``) (pkg/reconciler,
roleinstanceset_reconciler.go and pod_reconciler.go). A role template is
never a pod of its own. A ``RoleBasedGroupSet`` holds a group's spec at
``spec.groupTemplate.spec``.

Not read: the containers a ``ClusterEngineRuntimeProfile`` (another object,
cluster-scoped) injects through a role's ``engineRuntimes``, and the
``args`` and ``env`` the role gives them there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment
from .kserve import strategic_merge
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_role_based_group", "role_based_groups"]

_API_GROUP = "workloads.x-k8s.io/"
_KINDS = {"RoleBasedGroup": ("spec",), "RoleBasedGroupSet": ("spec", "groupTemplate", "spec")}
# A leader/worker role's patches over its template, by the pod they make: v1alpha2's, then v1alpha1's.
_LEADER_PATCHES = ("leaderTemplatePatch", "patchLeaderTemplate")
_WORKER_PATCHES = ("workerTemplatePatch", "patchWorkerTemplate")


class _Pod(NamedTuple):
    """One pod a role runs: its template (a PodTemplateSpec, merged), the role that names it, and the
    paths in the document of what made it (the patch's first, then the template's) for its line."""

    template: dict[str, Any]
    role: str
    written: tuple[tuple, ...]


def is_role_based_group(obj: dict[str, Any]) -> bool:
    """A RoleBasedGroup, or a RoleBasedGroupSet of them."""
    return obj.get("kind") in _KINDS and str(obj.get("apiVersion", "")).startswith(_API_GROUP)


def role_based_groups(ctx: Ctx, groups: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of each pod each role of each group runs."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in groups:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        base = _KINDS[str(obj["kind"])]
        spec = _at(obj, base)
        templates = {str(t["name"]): (t["template"], (*base, "roleTemplates", index, "template"))
                     for index, t in enumerate(_listed(spec.get("roleTemplates")))
                     if isinstance(t.get("template"), dict) and t.get("name") is not None}
        for index, role in enumerate(_listed(spec.get("roles"))):
            path = (*base, "roles", index)
            site = Site(str(obj["kind"]), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                        str(obj.get("apiVersion")), format="rbg")
            for pod in _pods(role, path, templates):
                held = pod.template.get("spec")
                if not isinstance(held, dict):
                    continue
                line = lines.first(*((*at, "spec", "containers", 0, "name") for at in pod.written),
                                   *((*at, "spec", "containers") for at in pod.written), path)
                out += pod_launches(ctx, held, pod.template.get("metadata"), replace(site, role=pod.role), lines,
                                    (*pod.written[-1], "spec"), {}, problems, object_meta=meta, line=line)
    return out, problems


def _pods(role: dict[str, Any], path: tuple, templates: dict[str, tuple[dict[str, Any], tuple]]) -> list[_Pod]:
    """The pods a role runs, each as the controller merges it."""
    name = str(role.get("name") or "")
    components = role.get("customComponentsPattern")
    if isinstance(components, dict):
        return [_Pod(c["template"], f"{name}-{c.get('name')}" if c.get("name") else name,
                     ((*path, "customComponentsPattern", "components", i, "template"),))
                for i, c in enumerate(_listed(components.get("components"))) if isinstance(c.get("template"), dict)]
    for pattern, held in (("leaderWorkerPattern", role.get("leaderWorkerPattern")),
                          ("standalonePattern", role.get("standalonePattern")), ("", role)):
        if not isinstance(held, dict):
            continue
        at = (*path, pattern) if pattern else path
        resolved = _template(held, at, templates)
        if resolved is None:
            continue
        template, written = resolved
        # (its leader and workers: v1alpha2's pattern holds their patches, v1alpha1's `leaderWorkerSet`)
        group, group_at = (held, at) if pattern == "leaderWorkerPattern" else \
            (role.get("leaderWorkerSet"), (*path, "leaderWorkerSet")) if not pattern else (None, at)
        if isinstance(group, dict):
            return [_patched(template, written, group, group_at, keys, f"{name}-{which}")
                    for which, keys in (("leader", _LEADER_PATCHES), ("worker", _WORKER_PATCHES))]
        return [_Pod(template, name, written)]
    return []


def _template(held: dict[str, Any], at: tuple, templates: dict[str, tuple[dict[str, Any], tuple]]
              ) -> tuple[dict[str, Any], tuple[tuple, ...]] | None:
    """A role's (or pattern's) pod template: written in it, or the role template it names merged with its
    patch (v1alpha2's `templateRef.patch`, v1alpha1's `templatePatch`); with the paths that made it."""
    if isinstance(held.get("template"), dict):
        return held["template"], ((*at, "template"),)
    ref = held.get("templateRef")
    if not isinstance(ref, dict) or str(ref.get("name")) not in templates:
        return None
    template, written = templates[str(ref.get("name"))]
    for patch, patch_at in ((ref.get("patch"), (*at, "templateRef", "patch")), (held.get("templatePatch"), (*at, "templatePatch"))):
        if isinstance(patch, dict):
            return strategic_merge(template, patch), (patch_at, written)
    return template, (written,)


def _patched(template: dict[str, Any], written: tuple[tuple, ...], group: Any, at: tuple, keys: tuple[str, ...],
             role: str) -> _Pod:
    """A leader's or a worker's pod: the role's template merged with its patch, where it has one."""
    for key in keys:
        patch = group.get(key) if isinstance(group, dict) else None
        if isinstance(patch, dict):
            return _Pod(strategic_merge(template, patch), role, ((*at, key), *written))
    return _Pod(template, role, written)


def _at(obj: Any, path: tuple) -> dict[str, Any]:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def _listed(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
