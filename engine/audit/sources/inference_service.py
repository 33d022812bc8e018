"""KServe ``InferenceService`` (``serving.kserve.io/v1beta1``) whose
predictor serves a model with a ``ServingRuntime``: the launch is the
runtime's ``kserve-container`` as KServe's controller merges it with the
predictor's model (kserve/kserve aaac4e29,
``pkg/controller/v1beta1/inferenceservice/components/predictor.go`` and
``utils/utils.go``):

1. the runtime is the one ``spec.predictor.model.runtime`` names (a
   ServingRuntime or ClusterServingRuntime in the same file, then in the
   audited paths), else the one there that auto-selects the model's format
   (``supportedModelFormats`` with ``autoSelect: true``);
2. ``MergeRuntimeContainers``: a strategic merge of the model's container
   fields over the runtime's container (env by name; image and command
   replaced), the model's ``args`` appended to the runtime's, not replacing
   them;
3. ``ReplacePlaceholders``: the container rendered as a Go template against
   the service's metadata (``--served-model-name={{.Name}}``);
4. ``UpdateImageTag``: ``runtimeVersion`` replaces the image's tag (not a
   digest's).

A runtime that is not in the audited paths leaves a vLLM-looking service
unresolved (a ``source.unresolved`` problem); the runtime is still read on
its own, as any pod template is."""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import Problem
from ...core.markers import unresolved
from .companions import nearest_first, objects_of_kind
from .context import Ctx
from .deployment import Deployment
from .detect import mentions_vllm
from .gotemplate import render
from .kserve import strategic_merge
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["ISVC_KIND", "RUNTIME_KINDS", "is_inference_service", "inference_services"]

ISVC_KIND = "InferenceService"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
_CONTAINER = "kserve-container"  # constants.InferenceServiceContainerName
# The fields of a Kubernetes container, which the predictor's model spec holds inline beside its own.
_CONTAINER_FIELDS = frozenset({"name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
                               "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe",
                               "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                               "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
                               "tty"})
_TAG = re.compile(r":[\w.\-]*$")  # UpdateImageTag's `(:([\w.\-_]*))$`


def is_inference_service(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is a v1beta1 InferenceService whose predictor serves a model with a runtime."""
    spec = obj.get("spec")
    predictor = spec.get("predictor") if isinstance(spec, dict) else None
    return obj.get("kind") == ISVC_KIND and str(obj.get("apiVersion", "")).startswith("serving.kserve.io/") \
        and isinstance(predictor, dict) and isinstance(predictor.get("model"), dict)


def inference_services(ctx: Ctx, services: list[tuple[dict[str, Any], Lines]],
                       local: list[dict[str, Any]]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of the file's InferenceServices (``local``: the file's
    own ServingRuntimes and ClusterServingRuntimes, found before the
    audited paths')."""
    problems: list[Problem] = []
    out: list[Deployment] = []
    for svc, lines in services:
        meta = svc["metadata"] if isinstance(svc.get("metadata"), dict) else {}
        model = svc["spec"]["predictor"]["model"]
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        line = lines.key("spec", "predictor", "model") or lines.at() or 1  # (its `model:` line: a block starts below)
        found = _runtime(ctx, model, local)
        if isinstance(found, str):
            if mentions_vllm(repr(model)):
                problems.append(ctx.problem("source.unresolved", f"{ISVC_KIND} {name}: {found}", line=line,
                                            hint="audit the ServingRuntime the service runs with it"))
            continue
        runtime, shown = found
        base = next((c for c in _list(runtime.get("containers")) if isinstance(c, dict) and c.get("name") == _CONTAINER),
                    None)
        if base is None:  # KServe refuses it: "failed to find kserve-container in ServingRuntime containers"
            continue
        own = {key: value for key, value in model.items() if key in _CONTAINER_FIELDS}
        merged = strategic_merge(base, own)
        merged["name"] = _CONTAINER
        merged["args"] = [*_list(base.get("args")), *_list(own.get("args"))]  # appended, not replaced
        merged = _placeheld(merged, {**meta, "namespace": meta.get("namespace") or unresolved("{{.Namespace}}")})
        version = model.get("runtimeVersion")
        if isinstance(version, str) and isinstance(merged.get("image"), str) and "@sha256:" not in merged["image"]:
            image = merged["image"]
            merged["image"] = _TAG.sub(":" + version, image) if _TAG.search(image) else f"{image}:{version}"
        site = Site(ISVC_KIND, name, namespace, str(svc.get("apiVersion")),
                    merged_from=(shown,) if shown != ctx.display else (), format="kserve")
        out += pod_launches(ctx, {"containers": [merged]}, None, site, lines, ("spec", "predictor", "model"), {},
                            problems, object_meta=meta, line=line, qualify=False)
    return out, problems


def _runtime(ctx: Ctx, model: dict[str, Any], local: list[dict[str, Any]]) -> tuple[dict[str, Any], str] | str:
    """The spec of the runtime the model runs with and the file it is in;
    else why none is known."""
    named = model.get("runtime")
    here = [(obj, ctx.display) for obj in local]
    if isinstance(named, str):
        for obj, shown in here + _elsewhere(ctx, named):
            if (obj.get("metadata") or {}).get("name") == named and isinstance(obj.get("spec"), dict):
                return obj["spec"], shown
        return f"the ServingRuntime `{named}` it runs with is not in the audited paths"
    model_format = model.get("modelFormat")
    wanted = str(model_format.get("name", "")).lower() if isinstance(model_format, dict) else ""
    chosen: dict[str, tuple[dict[str, Any], str]] = {}  # by name: the file's own first, as KServe holds one of each
    for obj, shown in here + _elsewhere(ctx, None):
        if isinstance(obj.get("spec"), dict) and _selects(obj["spec"], wanted):
            chosen.setdefault(str((obj.get("metadata") or {}).get("name")), (obj["spec"], shown))
    if len(chosen) == 1:
        return next(iter(chosen.values()))
    return (f"{'several ServingRuntimes' if chosen else 'no ServingRuntime'} in the audited paths auto-select its "
            f"model format `{wanted}`")


def _elsewhere(ctx: Ctx, name: str | None) -> list[tuple[dict[str, Any], str]]:
    """The runtimes of the audited paths (``name``: only those of that name)."""
    out = []
    for kind in RUNTIME_KINDS:
        for found_name, places in objects_of_kind(ctx, kind).items():
            if name is None or found_name == name:
                out += [(companion.documents[index][0], companion.display) for companion, index in nearest_first(ctx, places)]
    return out


def _selects(spec: dict[str, Any], wanted: str) -> bool:
    """Whether a runtime auto-selects a model of format ``wanted``."""
    formats = spec.get("supportedModelFormats")
    return bool(wanted) and isinstance(formats, list) and any(
        isinstance(f, dict) and str(f.get("name", "")).lower() == wanted and f.get("autoSelect") is True for f in formats)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _placeheld(container: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The container's command, args and env values rendered against the service's metadata."""
    def text(value: Any) -> Any:
        return render(value, meta, {}) if isinstance(value, str) and "{{" in value else value

    held = dict(container)
    for key in ("command", "args"):
        if isinstance(held.get(key), list):
            held[key] = [text(v) for v in held[key]]
    if isinstance(held.get("env"), list):
        held["env"] = [{**e, "value": text(e["value"])} if isinstance(e, dict) and "value" in e else e
                       for e in held["env"]]
    return held
