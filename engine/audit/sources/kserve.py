"""KServe ``LLMInferenceService``: each workload pod template (the main or
decode template, the prefill template, and their LeaderWorkerSet workers)
is one launch, merged as the controller merges it
(``pkg/controller/v1alpha2/llmisvc/config_merge.go``):

1. the well-known preset the spec selects (``kserve-config-llm-template``,
   ``...-decode-template``/``...-prefill-template``, their ``-worker-data-
   parallel`` and ``-worker-pipeline-parallel`` forms), then the service's
   ``baseRefs`` in order, then the service itself, each a strategic merge
   (containers and env by name; ``command`` and ``args`` replaced);
2. the merged spec rendered as a Go template (``kvTransferConfig`` builds the
   OffloadingConnector config from ``kvCacheOffloading``);
3. the preset's ``bash -c`` script, whose ``eval "exec vllm serve ...
   ${KV_TRANSFER_ARGS} ${VLLM_ADDITIONAL_ARGS} $@"`` is read with the
   container's ``VLLM_ADDITIONAL_ARGS`` and ``args`` put in as eval sees
   them; the shell reader then reads the script.

An ``LLMInferenceServiceConfig`` is looked up by name in the same file, then
in the audited paths; one that is not there leaves the launch unresolved.
``LLMInferenceServiceConfig`` objects themselves are not launches."""

from __future__ import annotations

import json
import re
from typing import Any

from ...core.markers import unresolved
from ...core.errors import Problem
from .companions import nearest_first, objects_of_kind
from .context import Ctx
from ...core.deployers import config, deployer
from .deployment import Deployment
from .gotemplate import render
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["llm_inference_services", "strategic_merge", "CONFIG_KIND", "SERVICE_KIND"]

SERVICE_KIND, CONFIG_KIND = "LLMInferenceService", "LLMInferenceServiceConfig"
_PREFIX = "kserve-"  # the controller's LLM_INFERENCE_SERVICE_CONFIG_PREFIX default (config_merge.go L77)
# Lists merged entry by entry on `name` (their patchMergeKey); every other list is replaced.
_MERGE_BY_NAME = frozenset({"containers", "initContainers", "env", "volumes", "volumeMounts", "ports"})


def strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    """Kubernetes' strategic merge of two values, as far as pod templates need it."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for name, value in patch.items():
            out[name] = strategic_merge(base[name], value, name) if name in base else value
        return out
    if key in _MERGE_BY_NAME and isinstance(base, list) and isinstance(patch, list):
        out_list = list(base)
        names = {item["name"]: i for i, item in enumerate(out_list) if isinstance(item, dict) and isinstance(item.get("name"), str)}
        for item in patch:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"] in names:
                index = names[item["name"]]
                out_list[index] = strategic_merge(out_list[index], item)
            else:
                out_list.append(item)
        return out_list
    return patch


def _workloads(spec: dict[str, Any]) -> list[tuple[tuple[str, ...], str | None]]:
    """(path of the pod spec, role) of each workload of a merged spec: the
    main template (decode when there is a prefill), its LeaderWorkerSet
    workers, and the same for ``spec.prefill``."""
    prefill = spec.get("prefill") if isinstance(spec.get("prefill"), dict) else None
    out: list[tuple[tuple[str, ...], str | None]] = []
    for base, name, held in (((), "decode" if prefill else None, spec), (("prefill",), "prefill", prefill)):
        if held is None:
            continue
        if isinstance(held.get("worker"), dict):
            out += [(base + ("template",), f"{name}-leader" if name else "leader"),
                    (base + ("worker",), f"{name}-worker" if name else "worker")]
        else:
            out.append((base + ("template",), name))
    return out


def _presets(spec: dict[str, Any]) -> list[str]:
    """The well-known presets the controller merges first (config_merge.go L318-355)."""
    def kind(workload: dict[str, Any]) -> str:
        if not isinstance(workload.get("worker"), dict):
            return "template"
        parallel = workload["parallelism"] if isinstance(workload.get("parallelism"), dict) else {}
        data = any(isinstance(parallel.get(k), int) and parallel[k] > 0 for k in ("data", "dataLocal"))
        return "worker-data-parallel" if data else "worker-pipeline-parallel"
    if isinstance(spec.get("prefill"), dict):
        return [f"{_PREFIX}config-llm-prefill-{kind(spec['prefill'])}", f"{_PREFIX}config-llm-decode-{kind(spec)}"]
    return [f"{_PREFIX}config-llm-{kind(spec)}"]


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _bytes(quantity: Any) -> Any:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(quantity).strip())
    return int(match.group(1)) * _UNITS.get(match.group(2) or "", 1) if match else unresolved(f"cpu: {quantity}")


def kv_transfer_config(offloading: Any) -> str:
    """The controller's ``kvTransferConfig`` (config_merge.go L723-765): the
    OffloadingConnector arguments for ``kvCacheOffloading`` (deployers.yaml
    ``kserve``), or nothing."""
    if not isinstance(offloading, dict):
        return ""
    tiers = offloading["secondary"] if isinstance(offloading.get("secondary"), list) else []
    settings = {"cpu": _bytes(offloading.get("cpu", 0)), "evictionPolicy": offloading.get("evictionPolicy") or None,
                "secondary": [{"type": "fs", "root_dir": f"/mnt/kv-cache-{i}"} for i in range(len(tiers))] or None}
    kv = config(deployer("kserve")["kv-cache-offloading"], settings)
    return "--kv-transfer-config '" + json.dumps(kv, separators=(",", ":")) + "'"


def _env_text(container: dict[str, Any], name: str) -> str | None:
    """A container env variable's value as text ("" when no layer sets it; None when set from elsewhere)."""
    for item in container.get("env") or [] if isinstance(container.get("env"), list) else []:
        if isinstance(item, dict) and item.get("name") == name:
            return item["value"] if isinstance(item.get("value"), str) else None
    return ""


def _uneval(script: str, container: dict[str, Any], offloading: Any) -> str:
    """The preset's script with its final ``eval "exec ..."`` written out as
    the command eval runs: ``${KV_TRANSFER_ARGS}`` and
    ``${VLLM_ADDITIONAL_ARGS}`` put in as text (eval splits them again, so
    their quotes group words), ``$@`` as the container's args. The preset
    adds the offloading config only when neither the additional args nor
    the container args hold a --kv-transfer-config (preset L158-164)."""
    start = script.rfind('eval "exec ')
    end = script.rfind('"')
    if start < 0 or end <= start + 5:
        return script
    additional = _env_text(container, "VLLM_ADDITIONAL_ARGS")
    args = [str(a) for a in container.get("args") or []] if isinstance(container.get("args"), list) else []
    given = (additional or "") + " " + " ".join(args)
    kv = "" if re.search(r"--kv[-_]transfer[-_]config", given) else kv_transfer_config(offloading)
    body = script[start + len('eval "'):end].replace('\\"', '"')
    body = body.replace("${KV_TRANSFER_ARGS}", kv).replace("$KV_TRANSFER_ARGS", kv)
    text = additional if additional is not None else unresolved("$VLLM_ADDITIONAL_ARGS")
    body = body.replace("${VLLM_ADDITIONAL_ARGS}", text).replace("$VLLM_ADDITIONAL_ARGS", text)
    body = body.replace("$@", " ".join(args[1:] if args[:1] == ["--"] else args))
    return script[:start] + body + script[end + 1:]


def llm_inference_services(ctx: Ctx, services: list[tuple[dict[str, Any], Lines]],
                           local: list[dict[str, Any]]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of the file's LLMInferenceServices (``local``: the
    file's LLMInferenceServiceConfigs, found before the audited paths')."""
    problems: list[Problem] = []
    out: list[Deployment] = []
    here = {str((c.get("metadata") or {}).get("name")): c for c in local if isinstance(c.get("metadata"), dict)}
    for svc, lines in services:
        meta = svc["metadata"] if isinstance(svc.get("metadata"), dict) else {}
        spec = svc["spec"] if isinstance(svc.get("spec"), dict) else {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        site = Site(SERVICE_KIND, name, namespace, str(svc.get("apiVersion")), format="kserve")
        refs = [str(r.get("name")) for r in spec.get("baseRefs") or [] if isinstance(r, dict)] \
            if isinstance(spec.get("baseRefs"), list) else []
        scratch = spec
        missing: list[str] = []
        layers: list[tuple[dict[str, Any], str]] = []
        for ref in refs:  # baseRefs merged into a scratch copy first, to choose the presets (CM L276-289)
            read = _config(ctx, ref, here)
            if read:
                scratch = strategic_merge(read[0], scratch)
        for preset in _presets(scratch) + refs:
            read = _config(ctx, preset, here)
            if read is None:
                missing.append(preset)
            else:
                layers.append(read)
        merged: dict[str, Any] = {}
        for layer, _ in layers:
            merged = strategic_merge(merged, layer)
        merged = strategic_merge(merged, spec)
        merged_from = tuple(dict.fromkeys(shown for _, shown in layers if shown != ctx.display))
        start = lines.at() or 1
        if "workload" in spec:
            problems.append(ctx.problem("source.kserve", f"{SERVICE_KIND} {name}: `spec.workload` is not a field of "
                                        "the LLMInferenceService spec (its workload fields are inlined in `spec`); "
                                        "the API server drops it", line=lines.at("spec", "workload")))
        for path, role in _workloads(merged):
            pod: Any = merged  # any YAML value on the way down the path
            for part in path:
                pod = pod.get(part) if isinstance(pod, dict) else None
            if not isinstance(pod, dict) or not isinstance(pod.get("containers"), list):
                continue
            owner: Any = spec
            for part in path:
                owner = owner.get(part) if isinstance(owner, dict) else None
            index = next((i for i, c in enumerate(owner.get("containers") or []) if isinstance(c, dict)
                          and c.get("name") == "main"), None) if isinstance(owner, dict) else None
            line = lines.first(("spec", *path, "containers", index, "name") if index is not None else ("spec", *path),
                               ("spec", *path)) or start
            offloading = (merged.get("prefill") or {}).get("kvCacheOffloading") if path[0] == "prefill" \
                else merged.get("kvCacheOffloading")
            rendered = _rendered(pod, merged, meta, offloading)
            found = pod_launches(ctx, rendered, None, Site(site.kind, name, namespace, site.api, role, merged_from, "kserve"),
                                 lines, ("spec", *path), {}, problems, line=line)
            own = owner["containers"][index] if index is not None else {}
            if missing and not found and "command" in own and "args" in own:
                # Its own command and args replace the presets' (strategic merge): they start no vLLM
                # (semantic-router's services of the llm-d simulator), whatever the presets hold.
                continue
            if missing and found and "command" in own and "args" in own:
                # Its own command and args replace the presets' (models-as-a-service's qwen3 sample runs
                # `vllm serve` itself): decided, with a note that what the presets add (env) is not read.
                note = ctx.problem(
                    "source.unresolved_arguments", f"{SERVICE_KIND} {name}: the LLMInferenceServiceConfig "
                    + ", ".join(f"`{m}`" for m in missing) + " it is merged with is not in the audited paths; the "
                    "service's own command and args replace its, and the environment it may add is not read", line=line)
                out += [d.replace(notes=(note, *d.notes)) for d in found]
                continue
            if missing:
                problem = ctx.problem(
                    "source.unresolved", f"{SERVICE_KIND} {name}: the LLMInferenceServiceConfig "
                    + ", ".join(f"`{m}`" for m in missing) + " it is merged with is not in the audited paths",
                    line=line, hint="audit KServe's config/llmisvcconfig presets and the service's baseRefs too")
                # Without its preset the container may show no command at all: the launch is still there.
                found = [d.replace(document=None, problems=d.problems + (problem,)) for d in found] or [Deployment(
                    ctx.display, "kserve", "#" + "/".join(p for p in (SERVICE_KIND, namespace, name, role, "main") if p),
                    line, f"{name}/main", None, (problem,), resource=site.resource(), container="main", role=role,
                    chain=(ctx.display, *merged_from))]
            out += found
    return out, problems


def _config(ctx: Ctx, name: str, here: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """The spec of the LLMInferenceServiceConfig ``name`` and the file it is in."""
    if name in here:
        spec = here[name].get("spec")
        return (spec if isinstance(spec, dict) else {}), ctx.display
    for companion, index in nearest_first(ctx, objects_of_kind(ctx, CONFIG_KIND).get(name, []))[:1]:
        spec = companion.documents[index][0].get("spec")
        return (spec if isinstance(spec, dict) else {}), companion.display
    return None


def _rendered(pod: dict[str, Any], spec: dict[str, Any], meta: dict[str, Any], offloading: Any) -> dict[str, Any]:
    """The pod's containers with their command, args and env rendered as the
    controller renders them, and the preset's eval written out."""
    namespace = meta.get("namespace") or unresolved("{{ .ObjectMeta.Namespace }}")
    data = {"Spec": spec, "ObjectMeta": {**meta, "namespace": namespace}, "GlobalConfig": {}}
    # kvTransferConfig renders nothing in the preset's KV_TRANSFER_ARGS="..." (its JSON would end
    # the shell string there): _uneval puts its text where the eval reads it.
    functions = {"kvTransferConfig": lambda *a: "",
                 "shutdownTimeout": lambda *a: unresolved("{{ shutdownTimeout }}"),
                 # kmeta.ChildName: the parent's name and the suffix (shortened past 63 characters with a hash).
                 "ChildName": lambda parent="", suffix="": f"{parent}{suffix}" if isinstance(parent, str) and parent
                 and len(f"{parent}{suffix}") <= 63 else unresolved("{{ ChildName }}")}

    def text(value: Any) -> Any:
        return render(value, data, functions) if isinstance(value, str) and "{{" in value else value

    containers = []
    for container in pod["containers"]:
        if not isinstance(container, dict):
            containers.append(container)
            continue
        held = dict(container)
        for key in ("command", "args"):
            if isinstance(held.get(key), list):
                held[key] = [text(v) for v in held[key]]
        if isinstance(held.get("env"), list):
            held["env"] = [{**e, "value": text(e["value"])} if isinstance(e, dict) and "value" in e else e for e in held["env"]]
        command = held["command"] if isinstance(held.get("command"), list) else []
        for index, word in enumerate(command):
            if isinstance(word, str) and 'eval "exec ' in word:
                held["command"] = command[:index] + [_uneval(word, held, offloading)]
                held["args"] = []  # now inside the script, as `$@`
                break
        containers.append(held)
    return {**pod, "containers": containers}
