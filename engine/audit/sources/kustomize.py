"""kustomize: overlays read as ``kustomize build`` would make them, without
calling it.

- A patch file that a ``kustomization.yaml`` beside it names (``patches: -
  path:``, ``patchesStrategicMerge``) is a strategic-merge patch: a
  container with both ``command`` and ``args`` decides on its own (the lists
  replace the base's); one with only ``command`` or only ``args`` is merged
  with the base's container of the same name, read from the
  kustomization's ``resources`` when they are in the audited paths, and is
  unresolved otherwise.
- A kustomization's inline JSON6902 patches (``patches: - target: patch:``)
  are applied to the base object they target; an overlay that replaces a
  container's ``command`` or ``args`` is a launch, reported at the
  ``value:`` that carries the command.

The ``images:`` transformer names the image a placeholder stands for."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

from ...core.errors import InputError, Problem
from ...core.input import parse_text
from .companions import Companion, read_companion
from .context import Ctx
from .deployment import Deployment
from .kserve import strategic_merge
from .kubernetes import Site, pod_launches, pod_templates
from .marks import Lines

__all__ = ["is_kustomization", "kustomization", "patch_file"]

_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def is_kustomization(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Kustomization" and str(obj.get("apiVersion", "")).startswith("kustomize.config.k8s.io")


def _kustomization_in(ctx: Ctx, folder: Path) -> Companion | None:
    # One listing of the folder, not a failed lookup per name: every manifest of a fleet asks.
    try:
        names = set(os.listdir(folder))
    except OSError:
        return None
    for name in _NAMES:
        if name in names:
            found = read_companion(ctx, folder / name)
            if found is not None:
                return found
    return None


def _base_objects(ctx: Ctx, folder: Path, kustomization: dict[str, Any], depth: int = 0) -> list[tuple[dict[str, Any], str]]:
    """The objects a kustomization's ``resources`` hold (kustomizations
    followed, at most 8 deep; a folder without one is read file by file),
    with the file each is in, the ``images:`` transformer applied."""
    out: list[tuple[dict[str, Any], str]] = []
    for entry in kustomization.get("resources") or [] if isinstance(kustomization.get("resources"), list) else []:
        target = folder / str(entry)
        if target.is_dir():
            inner = _kustomization_in(ctx, target) if depth < 8 else None
            if inner is not None and inner.documents and isinstance(inner.documents[0][0], dict):
                out += _base_objects(ctx, target, inner.documents[0][0], depth + 1)
            elif inner is None:
                for path in sorted(target.glob("*.y*ml")):
                    found = read_companion(ctx, path)
                    out += [(v, found.display) for v, _ in found.documents if isinstance(v, dict)] if found else []
        else:
            found = read_companion(ctx, target)
            out += [(v, found.display) for v, _ in found.documents if isinstance(v, dict)] if found else []
    images = {str(i.get("name")): i for i in kustomization.get("images") or [] if isinstance(i, dict)} \
        if isinstance(kustomization.get("images"), list) else {}
    for obj, _ in out:
        for _, pod, _, _ in pod_templates(obj):
            for container in pod["containers"]:
                if isinstance(container, dict) and str(container.get("image", "")).split(":")[0] in images:
                    image = images[str(container["image"]).split(":")[0]]
                    container["image"] = f"{image.get('newName') or container['image']}" + \
                        (f":{image['newTag']}" if image.get("newTag") else "")
    return out


def _find(objects: list[tuple[dict[str, Any], str]], kind: Any, name: Any) -> tuple[dict[str, Any], str] | None:
    for obj, display in objects:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        if obj.get("kind") == kind and meta.get("name") == name:
            return obj, display
    return None


def patch_file(ctx: Ctx, documents: list[tuple[int, dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]] | None:
    """The launches of a strategic-merge patch file, or None when no
    kustomization beside it names it as a patch."""
    if not ctx.fs:
        return None
    folder = ctx.path.parent
    found = _kustomization_in(ctx, folder)
    if found is None or not found.documents or not isinstance(found.documents[0][0], dict):
        return None
    kust = found.documents[0][0]
    named = [p.get("path") for p in kust.get("patches") or [] if isinstance(p, dict)] \
        if isinstance(kust.get("patches"), list) else []
    named += [p for p in kust.get("patchesStrategicMerge") or [] if isinstance(p, str)] \
        if isinstance(kust.get("patchesStrategicMerge"), list) else []
    if ctx.path.name not in {str(p).removeprefix("./") for p in named}:
        return None
    bases = _base_objects(ctx, folder, kust)
    resources = ", ".join(str(r) for r in kust["resources"]) if isinstance(kust.get("resources"), list) else "none"
    out: list[Deployment] = []
    problems: list[Problem] = []
    for _, patch, lines in documents:
        meta = patch["metadata"] if isinstance(patch.get("metadata"), dict) else {}
        base = _find(bases, patch.get("kind"), meta.get("name"))
        obj = strategic_merge(copy.deepcopy(base[0]), patch) if base else patch
        merged_from = (base[1], found.display) if base else (found.display,)
        site = Site(str(patch.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                    str(patch.get("apiVersion")), merged_from=merged_from, format="kustomize")
        for path, pod, pod_meta, role in pod_templates(obj):
            patched = _containers_at(patch, path)
            launches = pod_launches(ctx, pod, pod_meta, Site(site.kind, site.name, site.namespace, site.api, role,
                                                             merged_from, "kustomize"), lines, path, {}, problems)
            for d in launches:
                held = patched.get(d.container or "")
                if base is None and held is not None and not ("command" in held and "args" in held):
                    missing = "args" if "command" in held else "command"
                    d = d.replace(document=None, problems=d.problems + (ctx.problem(
                        "source.unresolved", f"{site.kind} {site.name}, container {d.container}: the patch gives no "
                        f"`{missing}`; kustomize takes it from the base "
                        f"({resources}), which is not in the audited paths",
                        line=d.line, hint="audit the kustomize base too, or the output of `kustomize build`"),))
                out.append(d)
    return out, problems


def _containers_at(obj: dict[str, Any], path: tuple) -> dict[str, dict[str, Any]]:
    pod: Any = obj
    for part in path:
        pod = pod[part] if isinstance(pod, dict) and part in pod else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return {str(c.get("name")): c for c in containers if isinstance(c, dict)} if isinstance(containers, list) else {}


def kustomization(ctx: Ctx, kust: dict[str, Any], lines: Lines) -> tuple[list[Deployment], list[Problem]]:
    """The launches a kustomization's inline JSON6902 patches make."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    patches = kust["patches"] if isinstance(kust.get("patches"), list) else []
    bases = None
    for index, entry in enumerate(patches):
        if not (isinstance(entry, dict) and isinstance(entry.get("patch"), str) and isinstance(entry.get("target"), dict)):
            continue
        try:
            ops = parse_text(entry["patch"], source=f"`{ctx.display}` patch {index + 1}", fmt="yaml")
        except InputError as exc:
            problems.append(exc.problems[0])
            continue
        if not isinstance(ops, list):
            continue
        touched = [j for j, op in enumerate(ops) if isinstance(op, dict) and op.get("op") in ("add", "replace")
                   and re.search(r"/containers/\d+/(?:command|args)(?:/|$)", str(op.get("path", "")))]
        if not touched:
            continue
        if bases is None:
            bases = _base_objects(ctx, ctx.path.parent, kust) if ctx.fs else []
        target = entry["target"]
        base = _find(bases, target.get("kind"), target.get("name"))
        inner = lines.inner("patches", index, "patch")
        line = inner.key(touched[0], "value") or lines.at("patches", index)
        if base is None:
            problems.append(ctx.problem("source.unresolved", f"the patch of {target.get('kind')} {target.get('name')} "
                                        "applies to a base that is not in the audited paths", line=line))
            continue
        obj = copy.deepcopy(base[0])
        for op in ops:
            if isinstance(op, dict):
                _apply(obj, op)
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        for path, pod, pod_meta, role in pod_templates(obj):
            site = Site(str(obj.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                        str(obj.get("apiVersion")), role, (base[1],), "kustomize")
            out += pod_launches(ctx, pod, pod_meta, site, lines, path, {}, problems, line=line)
    return out, problems


def _apply(obj: Any, op: dict[str, Any]) -> None:
    """One JSON6902 add/replace/remove on ``obj`` (others are not read)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op.get("path", "")).split("/")[1:]]
    if not parts:
        return
    holder = obj
    for part in parts[:-1]:
        if isinstance(holder, list) and part.isdigit() and int(part) < len(holder):
            holder = holder[int(part)]
        elif isinstance(holder, dict):
            holder = holder.setdefault(part, {}) if op.get("op") == "add" else holder.get(part)
        else:
            return
    last, kind = parts[-1], op.get("op")
    if isinstance(holder, list):
        if last == "-" and kind == "add":
            holder.append(copy.deepcopy(op.get("value")))
        elif last.isdigit() and int(last) <= len(holder):
            at = int(last)
            if kind == "add":
                holder.insert(at, copy.deepcopy(op.get("value")))
            elif kind == "replace" and at < len(holder):
                holder[at] = copy.deepcopy(op.get("value"))
            elif kind == "remove" and at < len(holder):
                del holder[at]
    elif isinstance(holder, dict):
        if kind in ("add", "replace"):
            holder[last] = copy.deepcopy(op.get("value"))
        elif kind == "remove":
            holder.pop(last, None)
