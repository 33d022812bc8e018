"""llmaz (InftyAI/llmaz) ``Playground`` objects whose backend is vLLM: each
is a launch.

llmaz's Playground controller runs a Playground as one container,
``model-runner``, built from the Playground, the ``OpenModel``s it claims
and the ``BackendRuntime`` it names (pkg/controller/inference/
playground_controller.go, InftyAI/llmaz 3c13ff34: Reconcile L109-117,
buildTemplate L270-394; pkg/controller_helper/backendruntime/
backendruntime.go L51-140):

- the BackendRuntime is ``spec.backendRuntimeConfig.backendName``, else
  ``vllm`` (api/inference/v1alpha1/config_types.go L26-28);
- the command is the BackendRuntime's ``command``; the args are those of its
  ``recommendedConfigs`` entry named ``backendRuntimeConfig.configName``,
  else ``speculative-decoding`` when a claimed model has the role ``draft``,
  else ``default`` (pkg/controller_helper/helper.go L35-63), with
  ``{{ .ModelPath }}``, ``{{ .ModelName }}`` and ``{{ .DraftModelPath }}``
  put in; a variable without a value, or no entry of that name, and the
  controller builds no pod (renderFlags, backendruntime.go L63-86, L115-140);
  then ``backendRuntimeConfig.args``, appended;
- the environment is the BackendRuntime's ``envs``, each replaced by the
  Playground's ``backendRuntimeConfig.envs`` of the same name
  (pkg/util/util.go L44-60);
- the image is the BackendRuntime's ``image``, ``:``, and
  ``backendRuntimeConfig.version``, else the BackendRuntime's ``version``.

The models are the claimed OpenModels (``llmaz.io/v1alpha1``), the main one
first (helper.go L82-99). Their path is the OpenModel's
(pkg/controller_helper/modelsource/modelhub.go L38-61, uri.go L45-79):
``/workspace/models/models--<org>--<name>`` for a model hub ID, or
``/workspace/models/<filename>``; for a URI, the host path, else
``/workspace/models/<last part>`` (``.gguf``) or ``models--<last part>``;
with the annotation ``llmaz.io/skip-model-loader: "true"`` the model ID or
the whole URI. The name is the OpenModel's, an ``ollama://`` URI's address.
An OpenModel is read from the same file only: one that is not there leaves
the path and name unknown (neither is read by the decision).

A BackendRuntime (cluster-scoped) is read from the same file, then from the
audited paths, as KServe's presets are. One named ``vllm`` that is in
neither is taken to be the one llmaz's Helm chart installs
(chart/templates/backends/vllm.yaml, unchanged from 2ca4fee, 2025-04-21,
through llmaz v0.1.4 to 3c13ff34), with a ``source.deployer_default`` note:
its command and recommended args are written below, and its image comes
from the chart's values (``backendRuntime.vllm.image``), which the file does
not tell, so the release is not known. The chart's other BackendRuntimes run
other engines; a Playground naming one that is not found is no launch, and
one naming an unknown BackendRuntime is noted. The model loader
(an init container), the credentials the service controller adds from
Secrets, resources and probes are not read: none is a vLLM setting.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import Problem
from ...core.markers import unresolved
from .companions import nearest_first, objects_of_kind
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_playground", "is_backend_runtime", "runtime_note", "llmaz_playgrounds"]

_API = "inference.llmaz.io/"
_DEFAULT_BACKEND = "vllm"           # config_types.go L27, DefaultBackend
_CONTAINER = "model-runner"         # modelsource.go L36, MODEL_RUNNER_CONTAINER_NAME
_MODELS = "/workspace/models/"      # modelsource.go L28, CONTAINER_MODEL_PATH
_SKIP_LOADER = "llmaz.io/skip-model-loader"  # playground_types.go L78
# What renderFlags replaces in an argument (backendruntime.go L117).
_VARIABLE = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")

# The BackendRuntime `vllm` of llmaz's Helm chart: chart/templates/backends/vllm.yaml
# L11-14 (command) and L37-71 (recommendedConfigs); its image and version are the
# chart's values (L15-16), which the audited file does not tell.
_CHART_VLLM: dict[str, Any] = {
    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
    "recommendedConfigs": [
        {"name": "default", "args": ["--model", "{{ .ModelPath }}", "--served-model-name", "{{ .ModelName }}",
                                     "--host", "0.0.0.0", "--port", "8080"]},
        {"name": "speculative-decoding", "args": [
            "--model", "{{ .ModelPath }}", "--served-model-name", "{{ .ModelName }}",
            "--speculative_model", "{{ .DraftModelPath }}", "--host", "0.0.0.0", "--port", "8080",
            "--num_speculative_tokens", "5", "-tp", "1"]},
    ],
}
_CHART_IMAGE = "backendRuntime.vllm.image of llmaz's Helm values"
_CHART_REPOSITORY = "backendRuntime.vllm.image.repository of llmaz's Helm values"
# The chart's other BackendRuntimes (chart/templates/backends/*.yaml) run other engines.
_CHART_OTHERS = frozenset({"llamacpp", "ollama", "sglang", "tensorrt-llm", "tgi"})


def is_playground(obj: dict[str, Any]) -> bool:
    """An llmaz Playground (whichever backend it names: the reader decides whether vLLM runs it)."""
    return obj.get("kind") == "Playground" and str(obj.get("apiVersion", "")).startswith(_API)


def is_backend_runtime(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "BackendRuntime" and str(obj.get("apiVersion", "")).startswith(_API)


def runtime_note(ctx: Ctx, obj: dict[str, Any], line: int | None) -> Problem | None:
    """The note of a BackendRuntime that runs vLLM: the controller builds the
    Playgrounds' containers from it, so it is no launch on its own (as a
    KServe LLMInferenceServiceConfig is not)."""
    spec = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    configs = spec["recommendedConfigs"] if isinstance(spec.get("recommendedConfigs"), list) else []
    words = _strings(spec.get("command")) + _strings([spec.get("image")])
    for config in configs:
        words += _strings(config.get("args")) if isinstance(config, dict) else []
    if not any("vllm" in word.lower() for word in words):
        return None
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    return ctx.problem("source.unrecognized", f"BackendRuntime `{meta.get('name')}` runs vLLM for the llmaz "
                       "Playgrounds that name it: llmaz's controller builds their container from it, with their "
                       "models and args; it is no launch on its own", line=line)


def llmaz_playgrounds(ctx: Ctx, playgrounds: list[tuple[dict[str, Any], Lines]], objects: list[dict[str, Any]],
                      notes: list[Problem]) -> tuple[list[Deployment], list[Problem]]:
    """The launch of each Playground that vLLM serves, as its controller
    builds the container (``objects``: the file's objects, where its
    OpenModels and BackendRuntimes are looked up first; ``notes``: the file's
    notes, for a Playground whose BackendRuntime is not known)."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in playgrounds:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        spec = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
        config = spec["backendRuntimeConfig"] if isinstance(spec.get("backendRuntimeConfig"), dict) else {}
        backend = config.get("backendName")
        backend = _DEFAULT_BACKEND if backend is None else backend  # (a null field is dropped, as if unset)
        if not isinstance(backend, str):
            continue  # no BackendRuntime has such a name (the API server rejects the Playground)
        name = str(meta.get("name") or "")
        line = lines.first(("spec", "backendRuntimeConfig", "backendName"), ("kind",))
        runtime, shown = _runtime(ctx, backend, objects)
        chart = runtime is None
        added: list[Problem] = []
        if runtime is None:
            if backend in _CHART_OTHERS:
                continue
            if backend != _DEFAULT_BACKEND:
                notes.append(ctx.problem("source.unrecognized", f"Playground `{name}` names the BackendRuntime "
                                         f"`{backend}`, which is not in the audited paths: whether vLLM serves it "
                                         "is not known", line=line, hint="audit the BackendRuntime too"))
                continue
            runtime = _CHART_VLLM
            added.append(ctx.problem("source.deployer_default", "BackendRuntime `vllm` is not in the audited paths: "
                                     "read as the one llmaz's Helm chart installs (chart/templates/backends/vllm.yaml, "
                                     "llmaz v0.1.4), its command and recommended args; its image is the chart's "
                                     "values' (backendRuntime.vllm.image)", line=line))
        container, refused = _container(name, runtime, chart, meta, spec, config, objects)
        site = Site("Playground", name, str(meta.get("namespace") or ""), str(obj.get("apiVersion")),
                    merged_from=(shown,) if shown else (), format="llmaz")
        found = pod_launches(ctx, {"containers": [container]}, None, site, lines, ("spec",), {}, problems,
                             object_meta=meta, line=line)
        # Values the CRDs type as strings that are not: the API server rejects the object, as it does
        # a Pod's container with such values (kubernetes.py); only the strings were read.
        bad = [("Playground", name, _not_strings(spec, "Playground"))]
        bad += [] if chart else [("BackendRuntime", backend, _not_strings(runtime, "BackendRuntime"))]
        for kind, held, where in bad:
            if where:
                must = "must be strings" if len(where) > 1 else "must be a string"
                refused.append(f"{kind} {held}: {', '.join(where)} {must}; the API server rejects the {kind}")
        refusals = tuple(ctx.problem("source.kubernetes", message, line=line) for message in refused)
        out += [d.replace(problems=d.problems + refusals, notes=d.notes + tuple(added)) for d in found]
    return out, problems


def _runtime(ctx: Ctx, name: str, objects: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """The spec of the BackendRuntime ``name`` and the other file it is in
    (None: this one): this file's, else the first in the audited paths."""
    for obj in objects:
        meta = obj.get("metadata")
        if is_backend_runtime(obj) and isinstance(meta, dict) and meta.get("name") == name:
            return (obj["spec"] if isinstance(obj.get("spec"), dict) else {}), None
    if not ctx.fs:  # text given in memory: no other file is read
        return None, None
    for companion, index in nearest_first(ctx, objects_of_kind(ctx, "BackendRuntime").get(name, [])):
        value = companion.documents[index][0]
        if is_backend_runtime(value):
            spec = value["spec"] if isinstance(value.get("spec"), dict) else {}
            return spec, companion.display if companion.display != ctx.display else None
    return None, None


def _container(name: str, runtime: dict[str, Any], chart: bool, meta: dict[str, Any], spec: dict[str, Any],
               config: dict[str, Any], objects: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The model-runner container of the Playground ``name`` (buildTemplate,
    L270-366; ``chart``: the runtime is the chart's), and why the controller
    builds none, if it does not."""
    refused: list[str] = []
    annotations = meta["annotations"] if isinstance(meta.get("annotations"), dict) else {}
    skip = annotations.get(_SKIP_LOADER) == "true"
    claims = _claims(spec)
    if not claims:
        refused.append(f"Playground {name}: it claims no model (modelClaim or modelClaims); "
                       "llmaz's webhook rejects it")
    models = {str(m["metadata"].get("name")): m for m in objects if m.get("kind") == "OpenModel"
              and str(m.get("apiVersion", "")).startswith("llmaz.io/") and isinstance(m.get("metadata"), dict)}
    values: dict[str, str] = {}
    for variable, claim in (("ModelPath", claims[0] if claims else None),
                            ("DraftModelPath", claims[1] if len(claims) > 1 else None)):
        if claim is not None:
            values[variable] = _model_path(models.get(claim), claim, skip, variable)
    if claims:
        values["ModelName"] = _model_name(models.get(claims[0]), claims[0])
    wanted = config.get("configName")
    chosen = wanted if isinstance(wanted, str) else _detected(spec)
    configs = runtime["recommendedConfigs"] if isinstance(runtime.get("recommendedConfigs"), list) else []
    entry = next((c for c in configs if isinstance(c, dict) and c.get("name") == chosen), None)
    args: list[str] = []
    missing: list[str] = []
    if entry is None:
        refused.append(f"Playground {name}: the BackendRuntime has no recommendedConfig `{chosen}`; "
                       "llmaz's controller builds no pod")
    else:
        for arg in _strings(entry.get("args")):
            rendered, absent = _rendered(arg, values)
            args.append(rendered)
            missing += [a for a in absent if a not in missing]
    if missing and claims:  # (with no claim, the webhook's refusal says why)
        refused.append(f"Playground {name}: {', '.join(f'`{m}`' for m in missing)} in recommendedConfig "
                       f"`{chosen}` {'have' if len(missing) > 1 else 'has'} no value for its models; llmaz's "
                       "controller builds no pod")
    args += _strings(config.get("args"))
    env: dict[str, Any] = {}
    for item in _env_list(runtime.get("envs")) + _env_list(config.get("envs")):
        env[item["name"]] = item  # the Playground's replace the BackendRuntime's of the same name
    container: dict[str, Any] = {"name": _CONTAINER, "image": _image(runtime, chart, config),
                                 "command": _strings(runtime.get("command")), "args": args, "env": list(env.values())}
    if not container["command"]:
        del container["command"]  # the image's entrypoint runs, as for any container without one
    return container, refused


def _claims(spec: dict[str, Any]) -> list[str]:
    """The names of the claimed models, the main one first (helper.go L69-99;
    a model's role defaults to main, playground CRD)."""
    claim = spec.get("modelClaim")
    if isinstance(claim, dict):
        return [str(claim.get("modelName"))]
    claims = spec.get("modelClaims")
    refs = claims.get("models") if isinstance(claims, dict) else None
    if not isinstance(refs, list):
        return []
    refs = [r for r in refs if isinstance(r, dict)]
    main = [str(r.get("name")) for r in refs if (r.get("role") or "main") == "main"]
    return main + [str(r.get("name")) for r in refs if (r.get("role") or "main") != "main"]


def _detected(spec: dict[str, Any]) -> str:
    """The recommendedConfig the controller picks when the Playground names none (helper.go L47-63)."""
    if isinstance(spec.get("modelClaim"), dict):
        return "default"
    claims = spec.get("modelClaims")
    refs = claims.get("models") if isinstance(claims, dict) else None
    drafted = isinstance(refs, list) and any(isinstance(r, dict) and r.get("role") == "draft" for r in refs)
    return "speculative-decoding" if drafted else "default"


def _rendered(arg: str, values: dict[str, str]) -> tuple[str, list[str]]:
    """An argument with its variables put in (renderFlags), and those without a value."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        # In one pass: a value put in (an unknown one's marker names the variable) is not read again.
        if values.get(match.group(1)):
            return values[match.group(1)]
        missing.append(match.group(0))
        return match.group(0)

    return _VARIABLE.sub(value, arg), missing


def _model_path(model: dict[str, Any] | None, claim: str, skip: bool, variable: str) -> str:
    """What the OpenModel ``claim`` puts in ``{{ .ModelPath }}`` or ``{{ .DraftModelPath }}``."""
    if model is None:
        return unresolved(f"{{{{ .{variable} }}}} of OpenModel {claim}")
    source = model["spec"].get("source") if isinstance(model.get("spec"), dict) else None
    source = source if isinstance(source, dict) else {}
    hub = source.get("modelHub")
    if isinstance(hub, dict):  # modelhub.go L50-61
        model_id = hub.get("modelID")
        if not isinstance(model_id, str):
            return unresolved(f"{{{{ .{variable} }}}} of OpenModel {claim}")  # the webhook rejects it
        if skip:
            return model_id
        filename = hub.get("filename")
        return _MODELS + (filename if isinstance(filename, str) else "models--" + model_id.replace("/", "--"))
    parsed = _uri(source.get("uri"))
    if parsed is None:
        return unresolved(f"{{{{ .{variable} }}}} of OpenModel {claim}")  # the webhook rejects it
    protocol, address, path = parsed
    if protocol == "HOST":  # uri.go L61-79
        return address
    if skip:
        return str(source["uri"])
    last = path.split("/")[-1]
    return _MODELS + (last if ".gguf" in path else "models--" + last)


def _model_name(model: dict[str, Any] | None, claim: str) -> str:
    """What the OpenModel ``claim`` puts in ``{{ .ModelName }}`` (modelhub.go L38-40, uri.go L45-52)."""
    if model is None:
        return unresolved(f"{{{{ .ModelName }}}} of OpenModel {claim}")
    source = model["spec"].get("source") if isinstance(model.get("spec"), dict) else None
    source = source if isinstance(source, dict) else {}
    parsed = None if isinstance(source.get("modelHub"), dict) else _uri(source.get("uri"))
    return parsed[1] if parsed is not None and parsed[0] == "OLLAMA" else claim


def _uri(uri: Any) -> tuple[str, str, str] | None:
    """(protocol, address, model path) of an OpenModel URI (pkg/util/uri.go,
    modelsource.go L81-100), or None where the webhook rejects it
    (openmodel_webhook.go L51-57, L109-127)."""
    parts = uri.split("://") if isinstance(uri, str) else []
    if len(parts) != 2:
        return None
    protocol, address = parts[0].upper(), parts[1]
    if protocol in ("HOST", "OLLAMA"):
        return protocol, address, address
    if protocol == "OSS":  # <bucket>.<endpoint>/<path>
        rest = address.split(".", 1)
        held = rest[1].split("/", 1) if len(rest) == 2 else []
        return (protocol, address, held[1]) if len(held) == 2 else None
    if protocol in ("S3", "GCS"):  # <bucket>/<path>
        held = address.split("/", 1)
        return (protocol, address, held[1]) if len(held) == 2 else None
    return None


def _image(runtime: dict[str, Any], chart: bool, config: dict[str, Any]) -> str:
    """The BackendRuntime's image and the version (backendruntime.go L88-94, playground_controller.go L316-320)."""
    version = config.get("version")
    if not isinstance(version, str):
        version = runtime.get("version")
    if chart:
        return unresolved(_CHART_REPOSITORY) + ":" + version if isinstance(version, str) else unresolved(_CHART_IMAGE)
    image = runtime.get("image")
    if not isinstance(image, str) or not isinstance(version, str):
        return unresolved("the BackendRuntime's image and version")  # the API server requires both
    return image + ":" + version


def _strings(value: Any) -> list[str]:
    """The strings of a list (the others refuse the object: :func:`_not_strings`)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _env_list(value: Any) -> list[dict[str, Any]]:
    """The entries of an ``envs`` list that are Kubernetes EnvVars with a string name and, if any, value."""
    entries = value if isinstance(value, list) else []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)
            and isinstance(e.get("value") or "", str)]


def _not_strings(spec: dict[str, Any], kind: str) -> list[str]:
    """Where a Playground's (``backendRuntimeConfig``) or BackendRuntime's
    args, env and image fields hold a value that is not a string (the
    CRDs' types are strings)."""
    scalars: tuple[str, ...]
    if kind == "Playground":
        base = "spec.backendRuntimeConfig"
        held = spec["backendRuntimeConfig"] if isinstance(spec.get("backendRuntimeConfig"), dict) else {}
        lists = [("args", held.get("args"))]
        scalars = ("version",)
    else:
        base, held = "spec", spec
        configs = spec["recommendedConfigs"] if isinstance(spec.get("recommendedConfigs"), list) else []
        lists = [("command", spec.get("command"))] + [(f"recommendedConfigs[{i}].args", entry.get("args"))
                                                     for i, entry in enumerate(configs) if isinstance(entry, dict)]
        scalars = ("image", "version")
    bad: list[str] = []
    for key, items in lists:
        if isinstance(items, list):
            bad += [f"{base}.{key}[{i}]" for i, v in enumerate(items) if not isinstance(v, str)]
    envs = held.get("envs")
    for i, item in enumerate(envs if isinstance(envs, list) else []):
        if isinstance(item, dict):
            if not isinstance(item.get("name"), str):  # required
                bad.append(f"{base}.envs[{i}].name")
            if item.get("value") is not None and not isinstance(item["value"], str):
                bad.append(f"{base}.envs[{i}].value")
    # A field written null is dropped by the API server, as if unset; list items are not.
    return bad + [f"{base}.{key}" for key in scalars if held.get(key) is not None and not isinstance(held[key], str)]
