"""Kubernetes manifests: the containers of any object (Pods, Deployments,
StatefulSets, Jobs, LeaderWorkerSets, ``helm template`` output, ...), from
``command``/``args``, ``sh -c`` scripts or a vLLM image's entrypoint, with
the container's ``env``; a ``--config`` file is found through the
container's volume mounts in a ConfigMap of the same manifest.

To read a new kind (a CRD that keeps its pods in its own fields), register
a reader of its pod templates with :func:`pod_reader`; the containers it
yields are read as every other container. Each launch is placed at its
container's line, with its object, container and role."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from ...core.command import Arg, ConfigFile, find_vllm, scalar_text, unresolved
from ...core.errors import Problem
from ...core.schema import pointer
from ...core.yamlsafe import YamlProblem
from ...core.yamlsafe import load as load_yaml
from .context import FACTS_ANNOTATION, Ctx, parse_facts
from .deployment import Deployment
from .launch import Invocation, deployment, refuse
from .release import from_image
from .shell import VLLM_IMAGE, argv_invocations

__all__ = ["kubernetes", "KubeObject", "PodSite", "POD_READERS", "pod_reader", "generic_pods"]


class KubeObject(NamedTuple):
    """One object of a manifest, with where it sits in the file."""

    value: dict[str, Any]
    kind: str
    name: str
    namespace: str
    meta: dict[str, Any]
    start: int        # the line before its document's first line
    text: str         # its YAML document's text (for the lines of its containers)
    prefix: str       # its JSON Pointer in that document ("" or /items/N of a List)


class PodSite(NamedTuple):
    """A pod template found in an object: its JSON Pointer, its spec (a
    mapping with a `containers` list), the template's metadata, and the role
    the object gives its pods (None: read from the labels)."""

    path: str
    spec: dict[str, Any]
    meta: Any
    role: str | None = None


# The readers of the kinds that keep their pods where the generic search
# would not find them or would not know their role (CRDs). A reader yields
# the object's pod templates; every kind without one is searched for
# `containers` lists at any depth (Pods, Deployments, StatefulSets, Jobs,
# LeaderWorkerSets, ...). Each container is then read alike.
POD_READERS: dict[str, Callable[[KubeObject], Iterable[PodSite]]] = {}


def pod_reader(kind: str) -> Callable[[Callable[[KubeObject], Iterable[PodSite]]], Callable[[KubeObject], Iterable[PodSite]]]:
    """Register the reader of a kind's pod templates."""
    def register(reader: Callable[[KubeObject], Iterable[PodSite]]) -> Callable[[KubeObject], Iterable[PodSite]]:
        POD_READERS[kind] = reader
        return reader
    return register


def generic_pods(obj: KubeObject) -> Iterator[PodSite]:
    for path, spec, meta in _pod_specs(obj.value):
        yield PodSite(path, spec, meta)


class _Manifest:
    """What the readers of one file share: its ConfigMaps (for --config), and the lines of its objects."""

    def __init__(self, ctx: Ctx, items: list[KubeObject]):
        self.ctx = ctx
        self.problems: list[Problem] = []
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in items:
            if obj.kind == "ConfigMap":
                data = obj.value["data"] if isinstance(obj.value.get("data"), dict) else {}
                self.config_maps[(obj.namespace, obj.name)] = data
        self._marks: dict[str, dict[str, tuple[int, int]]] = {}

    def line(self, obj: KubeObject, path: str) -> int | None:
        """The line of the value at ``path`` in ``obj`` (its document parsed again for marks, only when needed)."""
        marks = self._marks.get(obj.text)
        if marks is None:
            try:
                marks = load_yaml(obj.text, marks=True)[1]
            except YamlProblem:
                marks = {}
            self._marks[obj.text] = marks
        mark = marks.get(obj.prefix + path)
        return obj.start + mark[0] if mark else None


def kubernetes(ctx: Ctx, objects: list[dict[str, Any]], starts: list[int], texts: list[str] | None = None
               ) -> tuple[list[Deployment], list[Problem]]:
    items: list[KubeObject] = []
    for obj, start, text in zip(objects, starts, texts or [""] * len(objects)):
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            items += [_object(item, start, text, f"/items/{i}") for i, item in enumerate(obj["items"]) if isinstance(item, dict)]
        else:
            items.append(_object(obj, start, text, ""))
    manifest = _Manifest(ctx, items)
    out: list[Deployment] = []
    for obj in items:
        for site in POD_READERS.get(obj.kind, generic_pods)(obj):
            out += _pod_deployments(manifest, obj, site)
    return out, manifest.problems


def _object(value: dict[str, Any], start: int, text: str, prefix: str) -> KubeObject:
    meta: dict[str, Any] = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
    return KubeObject(value, str(value.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                      meta, start, text, prefix)


def _pod_deployments(manifest: _Manifest, obj: KubeObject, site: PodSite) -> list[Deployment]:
    """The vLLM launches of one pod template's containers."""
    ctx, kind, name, namespace = manifest.ctx, obj.kind, obj.name, obj.namespace
    facts_text = _annotation(site.meta) or _annotation(obj.meta)
    containers: list[Any] = site.spec["containers"]
    volumes: dict[Any, dict[str, Any]] = {v.get("name"): v for v in site.spec.get("volumes") or [] if isinstance(v, dict)} \
        if isinstance(site.spec.get("volumes"), list) else {}
    out: list[Deployment] = []
    for index, container in enumerate(containers):
        if not isinstance(container, dict):
            continue
        cname = str(container.get("name") or index)
        where = f"{kind} {namespace + '/' if namespace else ''}{name}, container {cname}"
        anchor = f"#{kind}/{name}/{cname}" if not namespace else f"#{kind}/{namespace}/{name}/{cname}"
        reader = _config_from_volumes(container, volumes, manifest.config_maps, namespace, ctx)
        located = _container_invocations(container, ctx, where, anchor, obj.start + 1, manifest.problems, reader)
        if not located:
            continue
        line = manifest.line(obj, f"{site.path}/containers/{index}")
        image = container.get("image")
        for inv in located:
            inv.line = line
            inv.name = f"{name}/{cname}" if name else cname
            inv.resource = (("apiVersion", str(obj.value.get("apiVersion"))), ("kind", kind), ("name", name),
                            ("namespace", namespace))
            inv.container = cname
            inv.role = site.role or _role(site.meta, obj.meta, site.path)
            inv.release = inv.release or (from_image(image) if isinstance(image, str) and image else None)
            inv.config_reader = reader
            if facts_text is not None:
                facts, problem = parse_facts(facts_text, ctx, None, f"the annotation {FACTS_ANNOTATION} of {kind} {name}")
                inv.facts, inv.facts_problem = facts, problem
                inv.facts_origin = f"{kind} {name}: annotation {FACTS_ANNOTATION}"
            else:
                facts, problem, at = ctx.facts_for(obj.start + 1)
                inv.facts, inv.facts_problem = facts, problem
                inv.facts_origin = f"line {at}: hma-policy directive" if at else ""
            out.append(deployment(inv, ctx, "kubernetes"))
    return out


_ROLE_WORDS = frozenset({"prefill", "decode", "prefiller", "decoder", "leader", "worker", "both", "aggregated"})


def _role(pod_meta: Any, meta: Any, pod_path: str) -> str | None:
    """The role the object gives its pods: a `role` label (`llm-d.ai/role: prefill`, ...), a component
    label naming one, or the template it sits in (a LeaderWorkerSet's leader and worker templates)."""
    for held in (pod_meta, meta):
        labels = held.get("labels") if isinstance(held, dict) else None
        if not isinstance(labels, dict):
            continue
        for key, value in labels.items():
            if isinstance(key, str) and isinstance(value, str) and (key == "role" or key.endswith(("/role", ".role"))):
                return value
        component = labels.get("app.kubernetes.io/component")
        if isinstance(component, str) and component.lower() in _ROLE_WORDS:
            return component
    for template, role in (("/leaderTemplate/", "leader"), ("/workerTemplate/", "worker")):
        if template in pod_path + "/":
            return role
    return None


def _annotation(meta: Any) -> str | None:
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        value = meta["annotations"].get(FACTS_ANNOTATION)
        return value if isinstance(value, str) else None
    return None


def _pod_specs(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every mapping holding a `containers` list of containers, with the pod
    template's metadata (its sibling), at any depth (bounded)."""
    stack: list[tuple[Any, tuple, Any, int]] = [(obj, (), None, 0)]
    found = []
    while stack:
        value, path, parent, depth = stack.pop()
        if depth > 64:
            continue
        if isinstance(value, dict):
            containers = value.get("containers")
            if isinstance(containers, list) and any(isinstance(c, dict) and ("image" in c or "command" in c or "args" in c)
                                                    for c in containers):
                meta = parent.get("metadata") if isinstance(parent, dict) and path and path[-1] == "spec" else None
                found.append((pointer(path), value, meta))
            for key, item in value.items():
                if key != "containers":
                    stack.append((item, path + (key,), value, depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, path + (index,), value, depth + 1))
    found.sort(key=lambda f: f[0])
    yield from found


def _k8s_expand(text: str, env: Mapping[str, str | None]) -> str:
    """Kubernetes' $(VAR) in command and args: replaced from the container's
    env; `$$` escapes; an undefined reference stays as written."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name not in env:
            return m.group(0)
        value = env[name]
        return value if value is not None else unresolved(f"$({name})")
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


def _container_invocations(container: dict[str, Any], ctx: Ctx, where: str, anchor: str, line: int,
                           problems: list[Problem], read_file: Callable[[str], ConfigFile]) -> list[Invocation]:
    env: dict[str, str | None] = {}
    for item in container.get("env") or [] if isinstance(container.get("env"), list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            value = item.get("value")
            env[item["name"]] = _k8s_expand(value, env) if isinstance(value, str) else (None if "valueFrom" in item else "")
    command: list[Any] | None = container["command"] if isinstance(container.get("command"), list) else None
    arguments: list[Any] = container["args"] if isinstance(container.get("args"), list) else []
    bad = [f"{k}[{i}]" for k, seq in (("command", command or []), ("args", arguments)) for i, v in enumerate(seq)
           if not isinstance(v, str)]
    argv = [_k8s_expand(str(v), env) for v in (command or [])] + [_k8s_expand(scalar_text(v), env) for v in arguments]
    image = str(container.get("image") or "")
    if command is None:
        if not VLLM_IMAGE.search(image.split("@")[0]):
            if find_vllm(argv) is None:
                return []
        else:
            if argv[:1] == ["serve"]:
                problems.append(ctx.problem("source.serve_twice", f"{where}: the vllm/vllm-openai image already runs "
                                            "`vllm serve`; `serve` in args is taken as the model"))
            argv = ["vllm", "serve"] + argv
    shell_env = {k: Arg(v if v is not None else unresolved(f"${k}"), f"{where}: env") for k, v in env.items()}
    found = argv_invocations(argv, ctx, env=shell_env, line=line, origin=where, anchor=anchor, problems=problems,
                             read_file=read_file)
    for inv in found:
        if bad:
            inv.problems.append(ctx.problem("source.kubernetes", f"{where}: {', '.join(bad)} must be strings; "
                                            "Kubernetes rejects the manifest"))
    if len(found) > 1:  # several commands in one container script: tell them apart
        for number, inv in enumerate(found, 1):
            inv.anchor = f"{anchor}/{number}"
    return found


def _config_from_volumes(container: dict[str, Any], volumes: Mapping[Any, Any], config_maps: Mapping[tuple[str, str], dict],
                         namespace: str, ctx: Ctx):
    """A reader of `--config FILE` inside a container: the file is found
    through the container's volumeMounts in a ConfigMap of the same manifest."""

    def read(name: str) -> ConfigFile:
        mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict)] \
            if isinstance(container.get("volumeMounts"), list) else []
        best = None
        for mount in mounts:
            mount_path = str(mount.get("mountPath") or "").rstrip("/")
            if name == mount_path or name.startswith(mount_path + "/"):
                if best is None or len(mount_path) > len(str(best.get("mountPath")).rstrip("/")):
                    best = mount
        if best is None or not name.startswith("/"):
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` is not in any volume of the container"))
        volume = volumes.get(best.get("name"))
        config_map = volume.get("configMap") if isinstance(volume, dict) else None
        if not isinstance(config_map, dict):
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` is in volume `{best.get('name')}`, "
                                     "which is not a ConfigMap the audit can read"))
        mount_path = str(best.get("mountPath")).rstrip("/")
        relative = best.get("subPath") if name == mount_path and best.get("subPath") else name[len(mount_path):].lstrip("/")
        key = relative
        if isinstance(config_map.get("items"), list):
            key = next((i.get("key") for i in config_map["items"] if isinstance(i, dict) and i.get("path") == relative), None)
        data = config_maps.get((namespace, str(config_map.get("name"))))
        shown = f"ConfigMap {config_map.get('name')} key {key}"
        if data is None:
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` comes from ConfigMap "
                                     f"`{config_map.get('name')}`, which is not in this file"))
        if key is None or not isinstance(data.get(key), str):
            raise refuse(ctx.problem("source.config_missing", f"`--config {name}`: ConfigMap `{config_map.get('name')}` "
                                     f"has no key `{key}`; vLLM fails to start without the file"))
        if len(data[key].encode("utf-8", "surrogatepass")) > ctx.limits.max_config_bytes:
            raise refuse(ctx.problem("input.limit", f"{shown} is larger than {ctx.limits.max_config_bytes} bytes"))
        return ConfigFile(data[key], shown)

    return read
