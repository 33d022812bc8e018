"""kustomize: overlays read as ``kustomize build`` would make them, without
calling it.

A kustomization's patches apply to the objects of its ``resources`` in
order (``patchesStrategicMerge``, then ``patches``, then
``patchesJson6902``): strategic-merge patches, from a file or inline, and
JSON6902 patches, inline or from a file (``path:`` with ``target:``). Each
patched object is one launch, whatever number of patches shape it, reported
at the patch that gives a container its ``command`` or ``args`` (the first
such; else the first patch of the object): at that patch file's container,
or at the kustomization's ``value:`` for a JSON6902 patch. A patch file
that is not that one yields no launch of its own.

Where the base is not in the audited paths (another repository's, by URL),
a strategic-merge patch container with both ``command`` and ``args``
decides on its own (the lists replace the base's); one with only ``args``
or only ``command`` is a launch the decision cannot make
(``source.unresolved``), and a JSON6902 patch is a problem of the
kustomization.

The patches of the kustomize Components a kustomization lists
(``components:``, each a folder whose kustomization is ``kind: Component``)
apply before its own, as kustomize applies them; a launch that a
component's patch gives its command or args is reported at that
``components:`` entry (llm-d adds a connector or ``--kv-events-config``
this way).

The ``images:`` transformer names the image a placeholder stands for."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from ...core.errors import InputError, Problem
from ...core.input import parse_text
from ...core.schema import pointer_parts
from .companions import Companion, companion_text, read_companion, shown
from .context import Ctx
from .deployment import Deployment
from .detect import mentions_vllm
from .inference_service import inference_services, is_inference_service
from .kserve import strategic_merge
from .kubernetes import Site, pod_launches, pod_templates
from .marks import Lines
from .placeholders import read_as_template, with_placeholders

__all__ = ["is_patch_file", "is_kustomization", "is_component", "component_note", "kustomization", "patch_file", "KUSTOMIZATION_NAMES"]

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# Components listed by Components, at most this deep (kustomize itself has no bound).
_MAX_NESTING = 8
_NAMES = KUSTOMIZATION_NAMES


def is_kustomization(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Kustomization" and str(obj.get("apiVersion", "")).startswith("kustomize.config.k8s.io")


def is_component(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Component" and str(obj.get("apiVersion", "")).startswith("kustomize.config.k8s.io")


def component_note(ctx: Ctx, component: dict[str, Any], lines: Lines) -> Problem | None:
    """A kustomize Component whose patches give a container its command or
    args is no launch of its own: a note says where it is read."""
    if not any(_commands(patch, part) for patch in _named_patches(ctx, ctx.path.parent, component, [], lines)
               for part in patch.content):
        return None
    return ctx.problem("source.unrecognized", "a kustomize Component: its patches apply where a kustomization lists "
                       "it in `components:`, and are read there; it is no launch on its own", line=lines.at() or 1)


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


def _unread(ctx: Ctx, folder: Path, kustomization: dict[str, Any], via: str | None = None, depth: int = 0) -> list[str]:
    """The entries of a kustomization's ``resources``, and of the
    kustomizations they list (at most 8 deep), that the audit cannot read
    (a remote base, a path outside the audited ones), each with the
    kustomization that lists it where that is not the first."""
    out: list[str] = []
    entries = kustomization.get("resources")
    for entry in entries if isinstance(entries, list) else []:
        target = folder / str(entry)
        inner = _kustomization_in(ctx, target) if depth < 8 and target.is_dir() else None
        if inner is not None and inner.documents and isinstance(inner.documents[0][0], dict):
            out += _unread(ctx, target, inner.documents[0][0], os.path.normpath(inner.display), depth + 1)
            continue
        # (a folder without a kustomization is read file by file, as _base_objects reads it)
        read = any(read_companion(ctx, path) for path in sorted(target.glob("*.y*ml"))) if target.is_dir() \
            else read_companion(ctx, target) is not None
        if not read:
            out.append(f"{entry}, listed by {via}" if via else str(entry))
    return out


class _Patch(NamedTuple):
    """One patch of a kustomization, in the order kustomize applies them."""

    file: str | None  # the patch file, as the kustomization names it (None: inline)
    entry: int | None  # its index in `patches` (None: a patchesStrategicMerge or patchesJson6902 entry)
    target: dict[str, Any] | None  # `target:`, for a JSON6902 patch or a targeted strategic merge
    content: list[Any]  # the strategic-merge documents, or [the JSON6902 operations]
    json6902: bool
    component: int | None = None  # its Component's index in `components` (None: the kustomization's own)
    written_in: str | None = None  # a Component's patch: its file, or the Component's kustomization (inline)


class _Overlaid(NamedTuple):
    """A base object with every patch that targets it applied."""

    obj: dict[str, Any]
    base: str  # the file the base object is in
    anchor: _Patch  # where its launch is reported
    files: tuple[str, ...]  # the patch files applied to it, by name
    target: tuple[Any, Any]  # the base object's kind and name, which patches target (a patch may rename it)
    patches: frozenset[int]  # the patches applied to it (their ids)


def _named_patches(ctx: Ctx, folder: Path, kust: dict[str, Any], problems: list[Problem], lines: Lines) -> list[_Patch]:
    """The kustomization's patches in order, each read (a file from the
    audited paths); an inline patch that is not YAML is a problem at its
    entry's line (``lines``: the kustomization's)."""
    def listed(key: str) -> list[Any]:
        return kust[key] if isinstance(kust.get(key), list) else []

    entries: list[tuple[Any, int | None]] = [(e, None) for e in listed("patchesStrategicMerge")]
    entries += [(e, i) for i, e in enumerate(listed("patches"))] + [(e, None) for e in listed("patchesJson6902")]
    out = []
    for entry, index in entries:
        file = entry if isinstance(entry, str) else entry.get("path") if isinstance(entry, dict) else None
        target = entry.get("target") if isinstance(entry, dict) and isinstance(entry.get("target"), dict) else None
        if isinstance(file, str):
            found = read_companion(ctx, folder / file)
            values = [v for v, _ in found.documents] if found is not None else []
            file = file.removeprefix("./")
        elif isinstance(entry, dict) and isinstance(entry.get("patch"), str):
            try:
                value = parse_text(entry["patch"], source=f"`{ctx.display}` patch {(index or 0) + 1}", fmt="yaml")
            except InputError as exc:
                first = exc.problems[0]
                problems.append(ctx.problem(first.code, first.message, line=lines.at("patches", index) if index is not None
                                            else None, hint=first.hint))
                continue
            values, file = [value], None
        else:
            continue
        ops = len(values) == 1 and isinstance(values[0], list)
        if ops and target is None:
            continue  # a JSON6902 patch without a target: kustomize refuses it, and it names no object
        out.append(_Patch(file, index, target, values if not ops else [values[0]], ops))
    return out


def _patches(ctx: Ctx, folder: Path, kust: dict[str, Any], problems: list[Problem], lines: Lines) -> list[_Patch]:
    """Every patch a kustomization applies, in order: those of the
    Components it lists (a patch file named from the kustomization's
    folder), then its own."""
    out: list[_Patch] = []
    components = kust["components"] if isinstance(kust.get("components"), list) else []
    for index, entry in enumerate(components):
        out += [patch._replace(component=index) for patch in _component_patches(ctx, folder, entry, ())]
    return out + _named_patches(ctx, folder, kust, problems, lines)


def _component_patches(ctx: Ctx, folder: Path, entry: Any, within: tuple[str, ...]) -> list[_Patch]:
    """The patches of the Component a ``components:`` entry of the
    kustomization in ``folder`` names, each named from ``folder``: those of
    the Components it lists itself, then its own, as kustomize applies them
    (wg-serving's LMCache tiers are Components of a Component). ``within``:
    the Components being read (a Component that lists itself, through
    others, adds nothing again)."""
    found = _kustomization_in(ctx, folder / entry) if isinstance(entry, str) and ctx.fs else None
    component = found.documents[0][0] if found is not None and found.documents else None
    key = os.path.realpath(folder / str(entry))
    if not isinstance(component, dict) or not is_component(component) or key in within or len(within) >= _MAX_NESTING:
        return []
    assert found is not None

    def named(file: str | None) -> str | None:
        return os.path.normpath(os.path.join(entry, file)) if file is not None else None

    out = [patch._replace(file=named(patch.file), written_in=named(patch.written_in))
           for inner in (component["components"] if isinstance(component.get("components"), list) else [])
           for patch in _component_patches(ctx, folder / entry, inner, (*within, key))]
    written_in = named(Path(found.display).name)
    for patch in _named_patches(ctx, folder / entry, component, [], found.documents[0][1]):
        out.append(patch._replace(file=named(patch.file), entry=None, written_in=named(patch.file) or written_in))
    return out


def _targets(patch: _Patch, obj: dict[str, Any]) -> list[Any]:
    """The parts of ``patch`` that apply to ``obj``: its operations (JSON6902) or its documents."""
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    if patch.target is not None:
        hit = all(_selects(patch.target.get(k), v) for k, v in (("kind", obj.get("kind")), ("name", meta.get("name"))))
        return [c for c in patch.content if isinstance(c, (list, dict))] if hit else []
    return [c for c in patch.content if isinstance(c, dict) and c.get("kind") == obj.get("kind")
            and isinstance(c.get("metadata"), dict) and c["metadata"].get("name") == meta.get("name")]


# A target's pattern the audit matches as kustomize does: letters, digits, `.`, `_`, `-`, `[...]`
# classes, `|`, and at most two `*` or `?` (so that no pattern makes matching slow).
_PATTERN = re.compile(r"(?:[A-Za-z0-9._-]|\[[A-Za-z0-9._-]+\]|[*?|])+")


def _selects(pattern: Any, value: Any) -> bool:
    """Whether a patch target's `kind` or `name` selects an object's: kustomize
    reads each as a regular expression of the whole value (llm-d's simulator
    overlay targets `name: "vllm-[pe]"`); unset selects any. A pattern past
    the audit's subset is taken as the value it names."""
    if pattern is None:
        return True
    if not isinstance(pattern, str) or not isinstance(value, str):
        return pattern == value
    if _PATTERN.fullmatch(pattern) and len(pattern) <= 253 and sum(pattern.count(c) for c in "*?") <= 2:
        try:
            return re.fullmatch(f"(?:{pattern})", value) is not None
        except re.error:  # (`*` alone, wg-serving's `name: "*"`, is no regular expression: its text)
            pass
    return pattern == value


def _commands(patch: _Patch, part: Any) -> bool:
    """Whether a part of a patch gives a container its command or args."""
    if patch.json6902:
        return any(isinstance(op, dict) and op.get("op") in ("add", "replace")
                   and re.search(r"/containers/\d+/(?:command|args)(?:/|$)", str(op.get("path", ""))) for op in part)
    return any("command" in c or "args" in c for _, pod, _, _ in pod_templates(part) for c in pod["containers"]
               if isinstance(c, dict))


def _overlaid(ctx: Ctx, folder: Path, kust: dict[str, Any], patches: list[_Patch]) -> list[_Overlaid]:
    """Each base object some patch targets, with all of them applied in order."""
    out = []
    # (text given in memory, as to the admission webhook, reads nothing from disk)
    for base, display in _base_objects(ctx, folder, kust) if patches and ctx.fs else []:
        obj, anchor, first, files, applied = copy.deepcopy(base), None, None, [], set()
        templated = read_as_template(base)  # (its patches pass through the same envsubst)
        deleted = False
        for patch in patches:
            for part in _targets(patch, base):
                # (`$patch: delete`: kustomize removes the object; odh-model-controller's xks overlay
                # deletes every Template of its base so)
                deleted = deleted or (not patch.json6902 and isinstance(part, dict) and part.get("$patch") == "delete")
                part = with_placeholders(part) if templated else part
                first = first or patch
                applied.add(id(patch))
                named = patch.written_in or patch.file
                files += [named] if named is not None and named not in files else []
                # The kustomization's own patch is where a reader looks first; a Component's where none is.
                if _commands(patch, part) and (anchor is None or anchor.component is not None and patch.component is None):
                    anchor = patch
                if patch.json6902:
                    for op in part:
                        if isinstance(op, dict):
                            _apply(obj, op)
                else:
                    obj = strategic_merge(obj, _named_as(part, obj) if patch.target is not None else part)
        if first is not None and not deleted:
            out.append(_Overlaid(obj, display, anchor or first, tuple(files),
                                 (base.get("kind"), (base.get("metadata") or {}).get("name")), frozenset(applied)))
    return out


def _named_as(part: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """A targeted strategic-merge patch as kustomize applies it to ``obj``:
    with the object's name and namespace (its own, such as wg-serving's
    `name: "*"`, only say which objects it fits)."""
    meta = part["metadata"] if isinstance(part.get("metadata"), dict) else {}
    own = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    named = {**{k: v for k, v in meta.items() if k not in ("name", "namespace")},
             **{k: own[k] for k in ("name", "namespace") if k in own}}
    return {**part, "metadata": named}


def _kustomization_of(ctx: Ctx) -> tuple[Companion, dict[str, Any]] | None:
    found = _kustomization_in(ctx, ctx.path.parent) if ctx.fs else None
    if found is None or not found.documents or not isinstance(found.documents[0][0], dict):
        return None
    return found, found.documents[0][0]


def is_patch_file(ctx: Ctx) -> bool:
    """Whether a kustomization beside the file names it as a patch (its
    objects are read with their base, where patch_file reads them)."""
    located = _kustomization_of(ctx)
    return located is not None and any(patch.file == ctx.name for patch in
                                       _patches(ctx, ctx.path.parent, located[1], [], located[0].documents[0][1]))


def patch_file(ctx: Ctx, documents: list[tuple[int, dict[str, Any], Lines]]) \
        -> tuple[list[Deployment], list[Problem], list[Problem]] | None:
    """The launches of a strategic-merge patch file, its problems and its
    notes; None when no kustomization beside it names it as a patch. A
    Component's patch is no launch of its own: it is read where a
    kustomization lists the Component (a note says so where it gives a
    container its command or args, as component_note does for the Component)."""
    located = _kustomization_of(ctx)
    if located is None:
        return None
    found, kust = located
    problems: list[Problem] = []
    # (an inline patch's problems are the kustomization's, which reports them)
    patches = _patches(ctx, ctx.path.parent, kust, [], found.documents[0][1])
    mine = [patch for patch in patches if patch.file == ctx.name]
    if not mine:
        return None
    if is_component(kust):  # (wg-serving's LMCache Component patches `Deployment "*"`: no object of its own)
        gives = any(_commands(patch, part) for patch in mine for part in patch.content)
        return [], [], [ctx.problem("source.unrecognized", f"a patch of the kustomize Component `{found.display}`: "
                                    "it applies where a kustomization lists the Component in `components:`, and is "
                                    "read there; it is no launch on its own", line=documents[0][2].at() or 1)] \
            if gives else []
    out: list[Deployment] = []
    overlays = _overlaid(ctx, ctx.path.parent, kust, patches)
    generated = _generated(ctx, kust) if overlays else {}
    for overlay in overlays:
        if overlay.anchor.file == ctx.name and not overlay.anchor.json6902:
            others = tuple(shown(ctx, ctx.path.parent / f) for f in overlay.files if f != ctx.name)
            out += _launches(ctx, overlay.obj, (overlay.base, *others, found.display), documents, generated)
    based = {overlay.target for overlay in overlays}
    unbased = [(patch, lines) for _, patch, lines in documents if (patch.get("kind"), _name(patch)) not in based]
    if unbased:
        # The base the audit could not read: what the kustomization lists, or, where that is read,
        # what it lists in turn (an overlay's `../base` that lists a remote one).
        unread = _unread(ctx, ctx.path.parent, kust)
        resources = ", ".join(unread) if unread else \
            ", ".join(str(r) for r in kust["resources"]) if isinstance(kust.get("resources"), list) else "none"
        for patch, lines in unbased:
            out += _unbased(ctx, patch, lines, found.display, resources, problems)
    return out, problems, []


def _launches(ctx: Ctx, obj: dict[str, Any], merged_from: tuple[str, ...],
              documents: list[tuple[int, dict[str, Any], Lines]], generated: dict[str, dict[str, str]],
              line: int | None = None) -> list[Deployment]:
    """The launches of an overlaid object, each container at its line in the
    patch file that anchors it (``documents``), or at ``line``; the
    ConfigMaps the kustomization generates (``generated``, by name) give its
    containers' env."""
    problems: list[Problem] = []
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    if is_inference_service(obj):  # (its runtime's container, with the service's model: KServe's merge)
        at = line or next((lines.key("spec", "predictor", "model") for _, part, lines in documents
                           if part.get("kind") == obj.get("kind") and _name(part) == meta.get("name")), None)
        return [d.replace(format="kustomize", line=at or d.line,
                          chain=tuple(dict.fromkeys((*d.chain[:1], *merged_from, *d.chain[1:]))))
                for d in inference_services(ctx, [(obj, Lines("", 1))], [])[0]]
    config_maps = {(str(meta.get("namespace") or ""), name): data for name, data in generated.items()}
    out = []
    for path, pod, pod_meta, role in pod_templates(obj):
        site = Site(str(obj.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                    str(obj.get("apiVersion")), role, merged_from, "kustomize")
        # One container at a time, each at its own line (the patch lists them in an order of its own).
        sidecars = pod["initContainers"] if isinstance(pod.get("initContainers"), list) else []
        for field, held in (("containers", pod["containers"]), ("initContainers", sidecars)):
            for container in held:
                at = line or _container_line(documents, obj, (*path, field), container)
                alone = {**pod, "containers": [], "initContainers": [], field: [container]}
                out += pod_launches(ctx, alone, pod_meta, site, Lines("", 1), path, config_maps, problems, line=at)
    return out


def _generated(ctx: Ctx, kust: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The data of each ConfigMap a kustomization's ``configMapGenerator``
    makes, by name (kustomize rewrites references to its hashed name):
    ``literals`` and ``envs`` files (``KEY=VALUE`` lines) in the audited paths."""
    out: dict[str, dict[str, str]] = {}
    for generator in kust["configMapGenerator"] if isinstance(kust.get("configMapGenerator"), list) else []:
        if not isinstance(generator, dict) or not isinstance(generator.get("name"), str):
            continue
        data: dict[str, str] = {}
        envs: list[Any] = generator["envs"] if isinstance(generator.get("envs"), list) else [generator.get("env")]
        literals: list[Any] = generator["literals"] if isinstance(generator.get("literals"), list) else []
        for name in envs:
            text = companion_text(ctx, ctx.path.parent / name) if isinstance(name, str) else None
            for raw in (text or "").splitlines():
                key, equals, value = raw.strip().partition("=")
                if equals and key and not key.startswith("#"):
                    data[key] = value
        for literal in literals:
            key, equals, value = str(literal).partition("=")
            if equals:
                data[key] = value
        out[generator["name"]] = data
    return out


def _container_line(documents: list[tuple[int, dict[str, Any], Lines]], obj: dict[str, Any], path: tuple,
                    container: Any) -> int | None:
    """The line of a container's `- name:` in the patch document of its object, else of that document."""
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    for _, patch, lines in documents:
        patch_meta = patch["metadata"] if isinstance(patch.get("metadata"), dict) else {}
        if patch.get("kind") != obj.get("kind") or patch_meta.get("name") != meta.get("name"):
            continue
        *pod_path, field = path
        names = list(_containers_at(patch, tuple(pod_path), field))
        name = str(container.get("name")) if isinstance(container, dict) else None
        if name in names:
            index = names.index(name)
            return lines.first((*path, index, "name"), (*path, index))
        return lines.at()
    return None


def _unbased(ctx: Ctx, patch: dict[str, Any], lines: Lines, kustomization: str, resources: str,
             problems: list[Problem]) -> list[Deployment]:
    """A patch document whose base is not in the audited paths: a container
    with both command and args decides alone; one with only one of them is
    unresolved, even one that gives neither image nor command (its args are
    read as `vllm serve`'s, as the base's command most likely is)."""
    meta = patch["metadata"] if isinstance(patch.get("metadata"), dict) else {}
    site = Site(str(patch.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                str(patch.get("apiVersion")), merged_from=(kustomization,), format="kustomize")
    out = []
    for path, pod, pod_meta, role in pod_templates(patch):
        patched = _containers_at(patch, path)
        read = copy.deepcopy(pod)
        for container in read["containers"]:
            if isinstance(container, dict) and "command" not in container and "image" not in container \
                    and _vllm_args(container.get("args")):
                container["command"] = ["vllm", "serve"]  # (a stand-in: the decision is source.unresolved)
        for d in pod_launches(ctx, read, pod_meta, Site(site.kind, site.name, site.namespace, site.api, role,
                                                        site.merged_from, "kustomize"), lines, path, {}, problems):
            held = patched.get(d.container or "")
            if held is not None and not ("command" in held and "args" in held):
                missing = "args" if "command" in held else "command"
                d = d.replace(document=None, problems=d.problems + (ctx.problem(
                    "source.unresolved", f"{site.kind} {site.name}, container {d.container}: the patch gives no "
                    f"`{missing}`; kustomize takes it from the base ({resources}), which is not in the audited paths",
                    line=d.line, hint="audit the kustomize base too, or the output of `kustomize build`"),))
            out.append(d)
    return out


def _vllm_args(args: Any) -> bool:
    """Whether a container's args are vLLM's options: they name the model or a KV option."""
    return isinstance(args, list) and any(isinstance(a, str) and re.match(r"--(?:model|kv[-_]transfer[-_]config)(?:=|$)", a)
                                          for a in args)


def _containers_at(obj: dict[str, Any], path: tuple, field: str = "containers") -> dict[str, dict[str, Any]]:
    pod: Any = obj
    for part in path:
        pod = pod[part] if isinstance(pod, dict) and part in pod else None
    containers = pod.get(field) if isinstance(pod, dict) else None
    return {str(c.get("name")): c for c in containers if isinstance(c, dict)} if isinstance(containers, list) else {}


def kustomization(ctx: Ctx, kust: dict[str, Any], lines: Lines) -> tuple[list[Deployment], list[Problem]]:
    """The launches a kustomization's JSON6902 patches (inline, or a file
    with a target) and inline strategic-merge patches anchor, at the line
    of a JSON6902 patch's first ``value:`` that gives a command or args (the
    entry's own line for a file or a strategic merge)."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    patches = _patches(ctx, ctx.path.parent, kust, problems, lines)  # (a file's patches are read only from disk)
    overlays = _overlaid(ctx, ctx.path.parent, kust, patches)
    generated = _generated(ctx, kust) if overlays else {}
    for overlay in overlays:
        anchor = overlay.anchor
        if not anchor.json6902 and anchor.component is None and anchor.file is not None:  # (reported at its patch file)
            continue
        others = tuple(shown(ctx, ctx.path.parent / f) for f in overlay.files)
        out += _launches(ctx, overlay.obj, (overlay.base, *others), [], generated, line=_patch_line(lines, anchor))
    applied = {patch for overlay in overlays for patch in overlay.patches}
    for patch in patches:
        target = patch.target or {}
        # (a patch of another program's command, Argo's controller given `--namespaced`, is none of vLLM's)
        if patch.json6902 and any(_commands(patch, part) for part in patch.content) and id(patch) not in applied \
                and mentions_vllm(json.dumps(patch.content)):
            named = " ".join(str(target[key]) for key in ("kind", "name") if target.get(key) is not None) or "object"
            problems.append(ctx.problem("source.unresolved", f"the patch of {named} applies to a base that is not in "
                                        "the audited paths", line=_patch_line(lines, patch)))
    return out, problems


def _patch_line(lines: Lines, patch: _Patch) -> int | None:
    """Where a JSON6902 patch is reported: its first `value:` that gives a command or args (inline), else its entry;
    a Component's patch at the Component's entry in `components`."""
    if patch.component is not None:
        return lines.at("components", patch.component)
    if patch.entry is None:
        return lines.at()
    if patch.file is None and patch.json6902:
        ops = patch.content[0]
        touched = [j for j, op in enumerate(ops) if isinstance(op, dict) and op.get("op") in ("add", "replace")
                   and re.search(r"/containers/\d+/(?:command|args)(?:/|$)", str(op.get("path", "")))]
        if touched:
            return lines.inner("patches", patch.entry, "patch").key(touched[0], "value") or lines.at("patches", patch.entry)
    return lines.at("patches", patch.entry)


def _apply(obj: Any, op: dict[str, Any]) -> None:
    """One JSON6902 add/replace/remove on ``obj`` (others are not read)."""
    parts = pointer_parts(str(op.get("path", "")))
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


def _name(obj: dict[str, Any]) -> Any:
    """An object's `metadata.name` (None where it has none)."""
    meta = obj.get("metadata")
    return meta.get("name") if isinstance(meta, dict) else None
