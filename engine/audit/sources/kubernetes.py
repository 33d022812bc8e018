"""Kubernetes manifests: the containers of any object (Pods, Deployments,
StatefulSets, Jobs, LeaderWorkerSets, DisaggregatedSets, StormServices,
RayClusters, ``helm template`` output, ...), from ``command``/``args``,
``sh -c`` scripts or a vLLM image's entrypoint, with the container's ``env``;
a ``--config`` file is found through the container's volume mounts in a
ConfigMap of the same manifest.

Container discovery is shared: :func:`pod_launches` reads one pod spec,
whichever reader found it (this module for plain objects; kserve, dynamo,
kustomize, helm and llm-d-benchmark readers for the pod specs their
controllers or charts make). Each launch reports the line of its
container's ``- name:``, its object, container and role (``prefill``,
``decode``, ``leader``, ``worker``: from the role the object gives the pod
template, else from a role label), and the vLLM release its image tag pins.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...core.markers import unresolved
from ...core.options import Arg, ConfigFile, find_vllm
from ...core.vllm_args import scalar_text
from ...core.errors import Problem
from .context import FACTS_ANNOTATION, Ctx, parse_facts
from .deployment import Deployment
from .launch import Invocation, deployment, platform_of_env, refuse
from .marks import NO_LINES, Lines
from .rayserve import ray_service
from .release import ReleaseHint, from_image
from .shell import argv_invocations, written_files
from .images import (VLLM_IMAGE, env_server, env_server_note, presumed_note, presumed_server, unread_server_note,
                     vllm_arguments)

__all__ = ["kubernetes", "Site", "pod_launches", "pod_templates", "config_maps_of", "applied_namespace", "labels_of"]


@dataclass(frozen=True)
class Site:
    """Where a pod spec is: its object (kind, name, namespace, apiVersion),
    the role the object gives it, the other files merged to make it, and the
    format to report."""

    kind: str
    name: str
    namespace: str = ""
    api: str = ""
    role: str | None = None
    merged_from: tuple[str, ...] = ()
    format: str = "kubernetes"

    def resource(self) -> tuple[tuple[str, str], ...]:
        return (("apiVersion", self.api), ("kind", self.kind), ("name", self.name), ("namespace", self.namespace))


def kubernetes(ctx: Ctx, objects: list[dict[str, Any]], starts: list[int],
               lines_of: list[Lines] | None = None) -> tuple[list[Deployment], list[Problem]]:
    """The launches of a manifest's objects (``starts``: each document's
    first line, 0-based; ``lines_of``: each document's lines)."""
    problems: list[Problem] = []
    items: list[tuple[dict[str, Any], Lines, tuple]] = []   # object, its lines, its path in the document
    for index, (obj, start) in enumerate(zip(objects, starts)):
        lines = lines_of[index] if lines_of else NO_LINES
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            items += [(item, lines, ("items", i)) for i, item in enumerate(obj["items"]) if isinstance(item, dict)]
        else:
            items.append((obj, lines, ()))
    config_maps = config_maps_of(obj for obj, _, _ in items)
    out: list[Deployment] = []
    for obj, lines, base in items:
        meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        site = Site(str(obj.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                    str(obj.get("apiVersion")))
        if site.kind == "RayService" and site.api.startswith("ray.io/"):  # its Serve config starts the engines
            out += ray_service(ctx, obj, lines, base, site.resource(), problems)
        if site.kind == "RayJob" and site.api.startswith("ray.io/"):
            out += _ray_job_entrypoint(ctx, obj, site, lines, base, config_maps, problems)
        templates = list(pod_templates(obj))
        names = [str(c.get("name")) for _, pod, _, _ in templates for c in pod["containers"] if isinstance(c, dict)]
        for path, pod, pod_meta, role in templates:
            # The role is in the id only where it tells containers of one name apart (DisaggregatedSet roles).
            out += pod_launches(ctx, pod, pod_meta, replace(site, role=role), lines, base + path, config_maps, problems,
                                object_meta=meta, qualify=len(names) != len(set(names)))
    return out, problems


def config_maps_of(objects: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """The data of each ConfigMap among ``objects``, by (namespace, name)
    (the namespace as :func:`applied_namespace` gives it)."""
    config_maps: dict[tuple[str, str], dict[str, Any]] = {}
    for obj in objects:
        if obj.get("kind") == "ConfigMap" and isinstance(obj.get("metadata"), dict):
            held: dict[str, Any] = obj["metadata"]
            data: dict[str, Any] = obj["data"] if isinstance(obj.get("data"), dict) else {}
            config_maps[(applied_namespace(held.get("namespace")), str(held.get("name")))] = data
    return config_maps


def applied_namespace(namespace: Any) -> str:
    """The namespace an object lands in, as a ConfigMap's and a pod's are
    compared: one that names none is applied to kubectl's namespace, which is
    `default` unless the context sets another (kthena's examples name it on
    the ModelServing and not on its ConfigMap), so the two are one ("")."""
    return "" if namespace in (None, "", "default") else str(namespace)


def labels_of(meta: Any, key: str = "labels") -> dict[str, Any]:
    held = meta.get(key) if isinstance(meta, dict) else None
    return held if isinstance(held, dict) else {}


# The roles a pod template label may name, as this report names them; the `app` label and the
# object's own name count only when they are a role word (`app: prefill`, Deployment `decode`).
_ROLE_LABELS = ("llm-d.ai/role", "lmcache.ai/pd-role", "role", "app")
_ROLE_WORDS = {"prefill": "prefill", "prefiller": "prefill", "decode": "decode", "decoder": "decode",
               "leader": "leader", "worker": "worker"}
# Path keys that say which role a pod template has: LeaderWorkerSet, RayCluster.
_ROLE_KEYS = {"leaderTemplate": "leader", "workerTemplate": "worker", "headGroupSpec": "leader",
              "workerGroupSpecs": "worker"}


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[tuple, dict[str, Any], Any, str | None]]:
    """Every pod spec of an object (a mapping holding a `containers` list of
    containers, at any depth, bounded), with its template's metadata and the
    role the object gives it: the `name` of a `roles[]` entry (StormService,
    DisaggregatedSet), a LeaderWorkerSet's leader or worker template, a
    RayCluster's head or worker group; a template labelled prefill or decode
    is that (a leader that prefills is a prefill node); else a role label of
    the template."""
    for path, pod, meta in _pod_specs(obj):
        named = structural = None
        holder: Any = obj
        for index, part in enumerate(path):
            if part == "roles" and index + 1 < len(path) and isinstance(holder, dict) \
                    and isinstance(holder.get("roles"), list):
                entry = holder["roles"][path[index + 1]]
                named = str(entry.get("name")) if isinstance(entry, dict) and entry.get("name") else named
            elif part in _ROLE_KEYS and structural is None:
                structural = _ROLE_KEYS[part]
            holder = holder[part] if isinstance(holder, (dict, list)) else None
        labelled = _labelled_role(obj, meta)
        if named is None and labelled in ("prefill", "decode"):
            yield path, pod, meta, labelled
        else:
            yield path, pod, meta, named or structural or labelled


def _labelled_role(obj: dict[str, Any], meta: Any) -> str | None:
    labels = {**labels_of(meta, "annotations"), **labels_of(meta)}
    for key in _ROLE_LABELS:
        value = str(labels.get(key, ""))
        if value and (key != "app" or value in _ROLE_WORDS):
            return _ROLE_WORDS.get(value, value)
    last = str(labels_of(obj, "metadata").get("name", "")).rsplit("-", 1)[-1]
    return _ROLE_WORDS[last] if last in ("prefill", "prefiller", "decode", "decoder") else None


# The scheduler that places pods on IBM Spyre cards (Open Data Hub's Spyre ServingRuntimes name it):
# vLLM runs there through the vllm-spyre plugin.
_SPYRE_SCHEDULER = "spyre-scheduler"
# KubeRay's objects, and the annotation that keeps the Ray container's command as written.
_RAY_KINDS = frozenset({"RayCluster", "RayService", "RayJob"})
_RAY_OVERWRITE = "ray.io/overwrite-container-cmd"


# The device plugins' resources a container asks for, by the platform vLLM runs on there: AWS
# Neuron's (aws-neuron/neuron-device-plugin), Intel Gaudi's (habana.ai), AMD's ROCm GPUs, Intel's
# GPUs (intel/intel-device-plugins-for-kubernetes), GKE's TPUs, Qualcomm's Cloud AI cards, and the
# devices Project-HAMi/HAMi shares: Baidu's Kunlun XPUs, MetaX's and Moore Threads' GPUs, Cambricon's
# MLUs (HAMi's device plugins name each). NVIDIA's (nvidia.com/gpu) is CUDA, the default.
_RESOURCE_PLATFORMS = {"aws.amazon.com/neuron": "neuron", "aws.amazon.com/neuroncore": "neuron",
                       "aws.amazon.com/neurondevice": "neuron", "habana.ai/gaudi": "hpu", "amd.com/gpu": "rocm",
                       "gpu.intel.com/i915": "xpu", "gpu.intel.com/xe": "xpu", "google.com/tpu": "tpu",
                       "qualcomm.com/qaic": "qaic", "kunlunxin.com/xpu": "kunlun", "kunlunxin.com/vxpu": "kunlun",
                       "metax-tech.com/gpu": "maca", "metax-tech.com/sgpu": "maca", "mthreads.com/vgpu": "musa",
                       "cambricon.com/mlu": "mlu", "cambricon.com/vmlu": "mlu"}


def _deployer_platform(container: dict[str, Any], pod: dict[str, Any]) -> tuple[str, str] | None:
    """The platform a container's deployer says vLLM runs on, and what says
    so: its environment's vllm-spyre settings, else the Spyre scheduler its
    pod goes to, else the accelerator it asks its node for (a device
    plugin's resource, in its limits or requests)."""
    env = container.get("env")
    names = [str(item.get("name")) for item in env if isinstance(item, dict)] if isinstance(env, list) else []
    if pod.get("schedulerName") == _SPYRE_SCHEDULER:
        return platform_of_env(names) or ("spyre", f"schedulerName {_SPYRE_SCHEDULER}")
    resources = container.get("resources")
    asked = [name for kind in ("limits", "requests") if isinstance(resources, dict)
             and isinstance(resources.get(kind), dict) for name in resources[kind]]
    device = next((name for name in asked if name in _RESOURCE_PLATFORMS), None)
    return platform_of_env(names) or ((_RESOURCE_PLATFORMS[device], f"resource {device}") if device else None)


def _ray_job_entrypoint(ctx: Ctx, obj: dict[str, Any], site: Site, lines: Lines, base: tuple,
                        config_maps: Mapping[tuple[str, str], dict[str, Any]], problems: list[Problem]) -> list[Deployment]:
    """The launch of a KubeRay RayJob's ``spec.entrypoint``: KubeRay's
    submitter hands it to `ray job submit ... -- ENTRYPOINT`, and Ray runs it
    as a shell command on the head node, in the head's Ray container (its
    image and environment; vllm-project/aibrix's distributed tutorial runs
    `vllm serve` so). Placed at the entrypoint's line."""
    spec = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    entrypoint = spec.get("entrypoint")
    if not isinstance(entrypoint, str):
        return []
    head: Any = spec
    for key in ("rayClusterSpec", "headGroupSpec", "template", "spec"):
        head = head.get(key) if isinstance(head, dict) else None
    pod = head if isinstance(head, dict) else {}
    ray = pod["containers"][0] if isinstance(pod.get("containers"), list) and pod["containers"] \
        and isinstance(pod["containers"][0], dict) else {}
    container = {"name": "entrypoint", "command": ["bash", "-c", entrypoint],
                 **{key: ray[key] for key in ("image", "env", "envFrom", "volumeMounts", "resources") if key in ray}}
    return pod_launches(ctx, {"containers": [container], "volumes": pod.get("volumes") or []}, None, site, lines,
                        base + ("spec",), config_maps, problems, line=lines.key("spec", "entrypoint") or lines.at())


def _ray_node(site: Site, path: tuple, object_meta: Any) -> bool:
    """Whether the pod is a Ray head or worker group of a KubeRay object
    whose Ray container KubeRay gives its own command."""
    return site.kind in _RAY_KINDS and any(part in ("headGroupSpec", "workerGroupSpecs") for part in path) \
        and str(labels_of(object_meta, "annotations").get(_RAY_OVERWRITE, "")).lower() != "true"


def _as_kuberay_runs(container: dict[str, Any]) -> dict[str, Any] | None:
    """The Ray container (the first) as KubeRay runs it (ray-operator
    controllers/ray/common/pod.go BuildPod): unless its command already says
    `ray start`, the command and args become one `bash -lc` script that runs
    them, then `ray start`. So the image's entrypoint never runs: without a
    command or args there is no launch (None), and args alone are that script."""
    command, args = container.get("command"), container.get("args")
    if command:
        return container
    if not isinstance(args, list) or not args:
        return None
    words = [a for a in args if isinstance(a, str)]
    return {**container, "command": ["/bin/bash", "-lc", " ".join(words)], "args": []} if len(words) == len(args) \
        else container


def _pod_specs(obj: dict[str, Any]) -> list[tuple[tuple, dict[str, Any], Any]]:
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
                found.append((path, value, meta))
            for key, item in value.items():
                if key != "containers":
                    stack.append((item, path + (key,), value, depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, path + (index,), value, depth + 1))
    found.sort(key=lambda f: tuple(str(p).zfill(8) if isinstance(p, int) else p for p in f[0]))
    return found


# The LMCache operator's mutating webhook (LMCache operator samples): a pod
# template so labelled gets `--kv-transfer-config` appended at admission,
# from the engine's `<name>-connection` ConfigMap, unless it has one.
_INJECT_LABEL, _ENGINE_ANNOTATION, _CONTAINER_ANNOTATION = \
    "lmcache.ai/lmcache-inject", "lmcache.ai/lmcache-engine", "lmcache.ai/lmcache-container"


def pod_launches(ctx: Ctx, pod: dict[str, Any], pod_meta: Any, site: Site, lines: Lines, path: tuple,
                 config_maps: Mapping[tuple[str, str], dict[str, Any]], problems: list[Problem], *,
                 object_meta: Any = None, env: Mapping[str, str | None] | None = None,
                 line: int | None = None, qualify: bool = True, release: ReleaseHint | None = None,
                 platform: tuple[str, str] | None = None) -> list[Deployment]:
    """The launches of one pod spec at ``path`` of its document. ``env``:
    variables every container has before its own (a controller's);
    ``line``: where a pod spec built by a reader (not in the file as such)
    is reported; ``qualify``: the role is part of the launch's id;
    ``release``: the one a reader read for the containers' image, instead of
    the image as written (a chart template's default values); ``platform``:
    the one a reader read from what the pod runs on (an Akash GPU vendor),
    where the containers name none (platform, why)."""
    facts_text = _annotation(pod_meta) or _annotation(object_meta)
    containers: list[Any] = pod["containers"] if isinstance(pod.get("containers"), list) else []
    # Native sidecars, init containers with restartPolicy: Always, run beside the containers
    # (GoogleCloudPlatform/accelerated-platforms runs vLLM so beside a batch worker).
    inits: list[Any] = pod["initContainers"] if isinstance(pod.get("initContainers"), list) else []
    entries = [("containers", index, c) for index, c in enumerate(containers)] + \
        [("initContainers", index, c) for index, c in enumerate(inits)
         if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    volumes: dict[Any, dict[str, Any]] = {v["name"]: v for v in pod.get("volumes") or []
                                          if isinstance(v, dict) and isinstance(v.get("name"), str)} \
        if isinstance(pod.get("volumes"), list) else {}
    written = _init_written(ctx, inits, volumes, at=line or lines.first((*path, "initContainers"), path))
    injected = str(labels_of(pod_meta).get(_INJECT_LABEL, "")).lower() == "true"
    inject_into = labels_of(pod_meta, "annotations").get(_CONTAINER_ANNOTATION)
    out = []
    for field, index, container in entries:
        if not isinstance(container, dict):
            continue
        if field == "containers" and index == 0 and _ray_node(site, path, object_meta):
            container = _as_kuberay_runs(container)
            if container is None:
                continue
        cname = str(container.get("name") or index)
        shown = f"{site.kind} {site.namespace + '/' if site.namespace else ''}{site.name}".rstrip()  # (unnamed: a Beaker spec)
        where = f"{shown}{f' ({site.role})' if site.role else ''}, container {cname}"
        parts = [p for p in (site.kind, site.namespace, site.name, site.role if qualify else None, cname) if p]
        at = line or lines.first((*path, field, index, "name"), (*path, field, index))
        reader = _config_from_volumes(container, volumes, config_maps, applied_namespace(site.namespace), ctx, written)
        # A ConfigMap of the same manifest (or a kustomization's generator) gives `valueFrom` and `envFrom` values.
        own_maps = {name: data for (namespace, name), data in config_maps.items()
                    if namespace == applied_namespace(site.namespace)}
        located = _container_invocations(container, ctx, where, "#" + "/".join(parts), at, problems, env or {}, reader,
                                         own_maps, site.format, _word_line(lines, (*path, field, index), container))
        for inv in located:
            inv.name = f"{site.name}/{cname}" if site.name else cname
            inv.resource = site.resource()
            inv.container, inv.role, inv.chain = cname, site.role, site.merged_from
            image = container.get("image")
            # (a `pip install vllm==X` in the container's script installs X over its image's: shell.argv_invocations)
            inv.release = inv.release or release or (from_image(image) if isinstance(image, str) and image else None)
            inv.image = inv.image or (image if isinstance(image, str) and image else None)
            inv.config_reader = reader
            inv.platform = _deployer_platform(container, pod) or platform
            if injected and (cname == inject_into or (inject_into is None and (field, index) == ("containers", 0))) \
                    and not any(re.match(r"--kv[-_]transfer[-_]config", a.text) for a in inv.argv):
                engine = labels_of(pod_meta, "annotations").get(_ENGINE_ANNOTATION, "")
                inv.problems.append(ctx.problem(
                    "source.unresolved", f"{where}: the LMCache operator's webhook appends `--kv-transfer-config` at "
                    f"admission (label {_INJECT_LABEL}) from the ConfigMap `{engine}-connection`, which is not in "
                    "the audited files", line=at, hint="audit the pod as admitted (kubectl get pod -o yaml)"))
            if facts_text is not None:
                facts, problem = parse_facts(facts_text, ctx, None, f"the annotation {FACTS_ANNOTATION} of {site.kind} {site.name}")
                inv.facts, inv.facts_problem = facts, problem
                inv.facts_origin = f"{site.kind} {site.name}: annotation {FACTS_ANNOTATION}"
            else:
                facts, problem, directive = ctx.facts_for(at)
                inv.facts, inv.facts_problem = facts, problem
                inv.facts_origin = f"line {directive}: hma-policy directive" if directive else ""
            out.append(deployment(inv, ctx, site.format))
    return out


def _annotation(meta: Any) -> str | None:
    value = labels_of(meta, "annotations").get(FACTS_ANNOTATION)
    return value if isinstance(value, str) else None


def _k8s_expand(text: str, env: Mapping[str, str | None], why: Mapping[str, str] | None = None) -> str:
    """Kubernetes' $(VAR) in command and args: replaced from the container's
    env (a value None is not known, ``why`` says where it comes from); `$$`
    escapes; an undefined reference stays as written."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name not in env:
            return m.group(0)
        value = env[name]
        return value if value is not None else unresolved(f"$({name})", (why or {}).get(name))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


def _word_line(lines: Lines, at: tuple, container: dict[str, Any]) -> Callable[[int], int | None]:
    """The file's line of the text of a word of a container's argv (its
    `command` then its `args`), by its index: a block scalar's starts on the
    line after its indicator; None where the file does not give it."""
    command = container["command"] if isinstance(container.get("command"), list) else []

    def line(index: int) -> int | None:
        key = ("command", index) if index < len(command) else ("args", index - len(command))
        return lines.inner(*at, *key).start if lines.at(*at, *key) is not None else None
    return line


def _container_invocations(container: dict[str, Any], ctx: Ctx, where: str, anchor: str, line: int | None,
                           problems: list[Problem], outer: Mapping[str, str | None],
                           read_file: Callable[[str], ConfigFile],
                           config_maps: Mapping[str, dict[str, Any]] | None = None,
                           fmt: str = "kubernetes", word_line: Callable[[int], int | None] | None = None
                           ) -> list[Invocation]:
    env: dict[str, str | None] = dict(outer)
    maps = config_maps or {}
    # envFrom first: the container's own env wins over it, as Kubernetes sets them.
    for source in container.get("envFrom") or [] if isinstance(container.get("envFrom"), list) else []:
        ref = source.get("configMapRef") if isinstance(source, dict) else None
        data = maps.get(str(ref.get("name"))) if isinstance(ref, dict) else None
        if data is not None:
            prefix = str(source.get("prefix") or "")
            env.update((prefix + str(k), v) for k, v in data.items() if isinstance(v, str))
    why: dict[str, str] = {}  # where each value not known comes from
    for item in container.get("env") or [] if isinstance(container.get("env"), list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            value = item.get("value")
            if isinstance(value, str):
                env[item["name"]] = _k8s_expand(value, env, why)
            elif "valueFrom" in item:
                env[item["name"]], reason = _value_from(item.get("valueFrom"), maps)
                why[item["name"]] = reason
            else:
                env[item["name"]] = ""
    command: list[Any] | None = container["command"] if isinstance(container.get("command"), list) else None
    arguments: list[Any] = container["args"] if isinstance(container.get("args"), list) else []
    bad = [f"{k}[{i}]" for k, seq in (("command", command or []), ("args", arguments)) for i, v in enumerate(seq)
           if not isinstance(v, str)]
    argv = [_k8s_expand(str(v), env, why) for v in (command or [])] + \
        [_k8s_expand(scalar_text(v), env, why) for v in arguments]
    image = str(container.get("image") or "")
    presumed = False
    server = None
    if command is None:
        if not VLLM_IMAGE.search(image.split("@")[0]):
            presumed = find_vllm(argv) is None and presumed_server(image, argv)
            server = env_server(image, argv, env)  # an image that serves from its environment (vllm/vllm-tpu)
            if presumed:
                argv = ["vllm", "serve"] + argv
            elif server is not None:
                argv = ["sh", "-c", server.script]
            elif find_vllm(argv) is None:
                if vllm_arguments(image, argv):
                    ctx.notes.append(unread_server_note(ctx, where, image, argv, line, fmt))
                return []
        else:
            if argv[:1] == ["serve"]:
                problems.append(ctx.problem("source.serve_twice", f"{where}: the vllm/vllm-openai image already runs "
                                            "`vllm serve`; `serve` in args is taken as the model", line=line))
            argv = ["vllm", "serve"] + argv
    shell_env = {k: Arg(v if v is not None else unresolved(f"${k}", why.get(k)), f"{where}: env") for k, v in env.items()}
    found = argv_invocations(argv, ctx, env=shell_env, line=line, origin=where, anchor=anchor, problems=problems,
                             read_file=read_file, word_line=word_line if command is not None else None, run_files=True)
    for inv in found:
        inv.line = line
        if presumed:
            inv.notes.append(presumed_note(ctx, image, line))
        if server is not None:
            inv.notes.append(env_server_note(ctx, image, server, line))
        if bad:
            inv.problems.append(ctx.problem("source.kubernetes", f"{where}: {', '.join(bad)} must be strings; "
                                            "Kubernetes rejects the manifest"))
    if len(found) > 1:  # several commands in one container script: tell them apart
        for number, inv in enumerate(found, 1):
            inv.anchor = f"{anchor}/{number}"
    return found


def _value_from(source: Any, config_maps: Mapping[str, dict[str, Any]]) -> tuple[str | None, str]:
    """The value `valueFrom` gives: a ConfigMap's key where the ConfigMap is
    known; else None, with where Kubernetes takes it from."""
    ref = source.get("configMapKeyRef") if isinstance(source, dict) else None
    if isinstance(ref, dict):
        value = (config_maps.get(str(ref.get("name"))) or {}).get(str(ref.get("key")))
        if isinstance(value, str):
            return value, ""
        return None, f"comes from key `{ref.get('key')}` of ConfigMap `{ref.get('name')}`, which is not in this file"
    kind = next((k for k in ("secretKeyRef", "fieldRef", "resourceFieldRef") if isinstance(source, dict) and k in source),
                None)
    return None, {"secretKeyRef": "comes from a Secret", "fieldRef": "is a field of the pod",
                  "resourceFieldRef": "is a resource of the container"}.get(kind or "", "is set when the pod starts")


def _mounted(container: Any, name: str) -> tuple[Any, str] | None:
    """The volume a path of a container is in, by its volumeMounts, and the
    path within it; None outside them."""
    mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict)] \
        if isinstance(container, dict) and isinstance(container.get("volumeMounts"), list) else []
    best = None
    for mount in mounts:
        mount_path = str(mount.get("mountPath") or "").rstrip("/")
        if name == mount_path or name.startswith(mount_path + "/"):
            if best is None or len(mount_path) > len(str(best.get("mountPath")).rstrip("/")):
                best = mount
    if best is None or not name.startswith("/"):
        return None
    mount_path = str(best.get("mountPath")).rstrip("/")
    return best, str(best["subPath"]) if name == mount_path and best.get("subPath") else name[len(mount_path):].lstrip("/")


def _init_written(ctx: Ctx, inits: list[Any], volumes: Mapping[Any, Any], at: int | None) -> dict[tuple[Any, str], str]:
    """The files that the pod's init containers write into its emptyDir
    volumes with a `sh -c` script (LMCache/LMBench's `cat >
    /scripts/entrypoint.sh <<EOF`, which the vLLM container runs), by
    (volume, path within it)."""
    out = {}
    for init in inits:
        if not isinstance(init, dict) or init.get("restartPolicy") == "Always":
            continue
        argv = [str(w) for key in ("command", "args") if isinstance(init.get(key), list) for w in init[key]]
        for name, text in written_files(argv, ctx, at or 1).items():
            found = _mounted(init, name)
            volume = volumes.get(found[0].get("name")) if found else None
            if found is not None and isinstance(volume, dict) and "emptyDir" in volume:
                out[(found[0].get("name"), found[1])] = text
    return out


def _config_from_volumes(container: dict[str, Any], volumes: Mapping[Any, Any], config_maps: Mapping[tuple[str, str], dict],
                         namespace: str, ctx: Ctx, written: Mapping[tuple[Any, str], str]):
    """A reader of `--config FILE` (or a script) inside a container: the
    file is found through the container's volumeMounts in a ConfigMap of the
    same manifest, or in what an init container writes (_init_written)."""

    def read(name: str) -> ConfigFile:
        found = _mounted(container, name)
        if found is None:
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` is not in any volume of the container"))
        best, relative = found
        if (best.get("name"), relative) in written:
            return ConfigFile(written[(best.get("name"), relative)], f"{name}, which an init container writes")
        volume = volumes.get(best.get("name"))
        config_map = volume.get("configMap") if isinstance(volume, dict) else None
        if not isinstance(config_map, dict):
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` is in volume `{best.get('name')}`, "
                                     "which is not a ConfigMap the audit can read"))
        key: str | None = relative
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
        ctx.config_map_keys.add((namespace, str(config_map.get("name")), key))
        return ConfigFile(data[key], shown)

    return read
