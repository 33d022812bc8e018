"""Kubernetes manifests: the containers of any object (Pods, Deployments,
StatefulSets, Jobs, LeaderWorkerSets, ``helm template`` output, ...), from
``command``/``args``, ``sh -c`` scripts or a vLLM image's entrypoint, with
the container's ``env``; a ``--config`` file is found through the
container's volume mounts in a ConfigMap of the same manifest."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ...core.command import Arg, ConfigFile, find_vllm, scalar_text, unresolved
from ...core.errors import Problem
from ...core.schema import pointer
from .context import FACTS_ANNOTATION, Ctx, parse_facts
from .deployment import Deployment
from .launch import Invocation, deployment, refuse
from .release import from_image
from .shell import VLLM_IMAGE, argv_invocations

__all__ = ["kubernetes"]


def kubernetes(ctx: Ctx, objects: list[dict[str, Any]], starts: list[int]) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    items: list[tuple[dict[str, Any], int, int]] = []   # object, document number, first line
    for number, (obj, start) in enumerate(zip(objects, starts), 1):
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            items += [(item, number, start) for item in obj["items"] if isinstance(item, dict)]
        else:
            items.append((obj, number, start))
    config_maps: dict[tuple[str, str], dict[str, Any]] = {}
    for obj, _, _ in items:
        if obj.get("kind") == "ConfigMap" and isinstance(obj.get("metadata"), dict):
            held: dict[str, Any] = obj["metadata"]
            data: dict[str, Any] = obj["data"] if isinstance(obj.get("data"), dict) else {}
            config_maps[(str(held.get("namespace") or ""), str(held.get("name")))] = data
    out: list[Deployment] = []
    for obj, number, start in items:
        meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        kind, name = str(obj.get("kind")), str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "")
        for pod_path, pod, pod_meta in _pod_specs(obj):
            facts_text = _annotation(pod_meta) or _annotation(meta)
            containers: list[Any] = pod["containers"]  # a list: _pod_specs found it
            volumes: dict[Any, dict[str, Any]] = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)} \
                if isinstance(pod.get("volumes"), list) else {}
            for index, container in enumerate(containers):
                if not isinstance(container, dict):
                    continue
                cname = str(container.get("name") or index)
                where = f"{kind} {namespace + '/' if namespace else ''}{name}, container {cname}"
                anchor = f"#{kind}/{name}/{cname}" if not namespace else f"#{kind}/{namespace}/{name}/{cname}"
                located = _container_invocations(container, ctx, where, anchor, start + 1, problems)
                if not located:
                    continue
                image = container.get("image")
                for inv in located:
                    inv.name = f"{name}/{cname}" if name else cname
                    inv.resource = (("apiVersion", str(obj.get("apiVersion"))), ("kind", kind), ("name", name),
                                    ("namespace", namespace))
                    inv.container = cname
                    inv.role = _role(pod_meta, meta, pod_path)
                    inv.release = from_image(image) if isinstance(image, str) and image else None
                    inv.config_reader = _config_from_volumes(container, volumes, config_maps, namespace, ctx)
                    if facts_text is not None:
                        facts, problem = parse_facts(facts_text, ctx, None, f"the annotation {FACTS_ANNOTATION} of {kind} {name}")
                        inv.facts, inv.facts_problem = facts, problem
                        inv.facts_origin = f"{kind} {name}: annotation {FACTS_ANNOTATION}"
                    else:
                        facts, problem, line = ctx.facts_for(start + 1)
                        inv.facts, inv.facts_problem = facts, problem
                        inv.facts_origin = f"line {line}: hma-policy directive" if line else ""
                    out.append(deployment(inv, ctx, "kubernetes"))
    return out, problems


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
                           problems: list[Problem]) -> list[Invocation]:
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
    found = argv_invocations(argv, ctx, env=shell_env, line=line, origin=where, anchor=anchor, problems=problems)
    for inv in found:
        inv.line = None
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
