"""A file of Kubernetes-like objects, each read by the reader of its kind:
kustomize overlays (kustomize.py), KServe LLMInferenceServices (kserve.py)
and InferenceServices with their ServingRuntimes (inference_service.py),
NVIDIA Dynamo graphs (dynamo.py), production-stack VLLMRuntimes
(production_stack.py), llm-d ModelServices (modelservice.py), OME runtimes
(ome.py), KubeAI Models (kubeai.py), llmaz Playgrounds (llmaz.py), KAITO
Workspaces, InferenceSets and MultiRoleInferences (kaito.py), Kthena
ModelBoosters (kthena.py), SageMaker HyperPod InferenceEndpointConfigs
(hyperpod.py), the scripts ConfigMaps hold (configmap_scripts.py),
and every
other object's pod templates (kubernetes.py). A kustomize patch file is read
with its base (kustomize.py). Objects a controller only merges into
others (LLMInferenceServiceConfig, an llmaz BackendRuntime) are no
launches."""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from .configmap_scripts import configmap_scripts
from .context import Ctx
from .deployment import Deployment, SourceFile
from .dynamo import GRAPH_KIND, dynamo_graphs
from .kaito import is_kaito, kaito_objects
from .inference_service import RUNTIME_KINDS, inference_services, is_inference_service
from .kserve import CONFIG_KIND, SERVICE_KIND, llm_inference_services
from .hyperpod import endpoint_configs, is_endpoint_config
from .kthena import is_model_booster, model_boosters
from .rbg import is_role_based_group, role_based_groups
from .kubeai import is_model, kubeai_models
from .kubernetes import kubernetes
from .kustomize import component_note, is_component, is_kustomization, is_patch_file, kustomization, patch_file
from .llmaz import is_backend_runtime, is_playground, llmaz_playgrounds, runtime_note
from .marks import Lines, within
from .modelservice import base_config_note, is_base_config, is_model_service, model_services
from .ome import is_runtime, ome_runtimes
from .production_stack import RUNTIME_KIND, vllm_runtimes

__all__ = ["manifest_file"]


def manifest_file(ctx: Ctx, documents: list[tuple[int, dict[str, Any], Lines]]) -> SourceFile:
    """``documents``: (first line, 0-based; object; its lines) of each object document."""
    # The items of a `kind: List` (`kubectl get -o yaml` output) are objects of the file as any other is: a
    # DynamoGraphDeployment so saved is read by the Dynamo reader (survey 32a: highopes/pd-disaggregation-demo).
    documents = [(start, item, within(lines, "items", index)) if _listed(obj) else (start, obj, lines)
                 for start, obj, lines in documents
                 for index, item in (enumerate(obj["items"]) if _listed(obj) else [(0, obj)]) if isinstance(item, dict)]
    plain: list[tuple[int, dict[str, Any], Lines]] = []
    services: list[tuple[dict[str, Any], Lines]] = []
    isvcs: list[tuple[dict[str, Any], Lines]] = []
    graphs: list[tuple[dict[str, Any], Lines]] = []
    runtimes: list[tuple[dict[str, Any], Lines]] = []
    ome: list[tuple[dict[str, Any], Lines]] = []
    models: list[tuple[dict[str, Any], Lines]] = []
    playgrounds: list[tuple[dict[str, Any], Lines]] = []
    kaito: list[tuple[dict[str, Any], Lines]] = []
    boosters: list[tuple[dict[str, Any], Lines]] = []
    groups: list[tuple[dict[str, Any], Lines]] = []
    endpoints: list[tuple[dict[str, Any], Lines]] = []
    model_service_objects: list[tuple[dict[str, Any], Lines]] = []
    configs: list[dict[str, Any]] = []
    config_maps = [obj for _, obj, _ in documents if obj.get("kind") == "ConfigMap"]
    out: list[Deployment] = []
    problems: list[Problem] = []
    notes: list[Problem] = []
    fmt = "kubernetes"
    for start, obj, lines in documents:
        kind = obj.get("kind")
        if is_kustomization(obj):
            found, found_problems = kustomization(ctx, obj, lines)
            out += found
            problems += found_problems
            fmt = "kustomize"
        elif is_component(obj):
            noted = component_note(ctx, obj, lines)
            notes += [noted] if noted is not None else []
        elif kind == SERVICE_KIND:
            services.append((obj, lines))
        elif is_inference_service(obj) and not is_patch_file(ctx):  # (a patch's: read with its base, below)
            isvcs.append((obj, lines))
        elif kind == CONFIG_KIND:
            configs.append(obj)
            meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
            notes.append(ctx.problem("source.unrecognized", f"{CONFIG_KIND} `{meta.get('name')}` "
                                     "is merged by KServe's controller into the LLMInferenceServices that name it "
                                     "(baseRefs, or a well-known preset); it is no launch on its own",
                                     line=lines.at() or start + 1))
        elif is_model_service(obj):
            model_service_objects.append((obj, lines))
        elif is_base_config(obj):
            notes.append(base_config_note(ctx, obj, lines.at() or start + 1))
        elif kind == GRAPH_KIND:
            graphs.append((obj, lines))
        elif kind == RUNTIME_KIND:
            runtimes.append((obj, lines))
        elif is_runtime(obj):
            ome.append((obj, lines))
        elif is_model(obj):
            models.append((obj, lines))
        elif is_playground(obj):
            playgrounds.append((obj, lines))
        elif is_kaito(obj):
            kaito.append((obj, lines))
        elif is_model_booster(obj):
            boosters.append((obj, lines))
        elif is_role_based_group(obj):
            groups.append((obj, lines))
        elif is_endpoint_config(obj):
            endpoints.append((obj, lines))
        elif is_backend_runtime(obj):
            note = runtime_note(ctx, obj, lines.at("kind") or start + 1)
            notes += [note] if note is not None else []
        else:
            plain.append((start, obj, lines))
    serving_runtimes = [obj for _, obj, _ in documents if obj.get("kind") in RUNTIME_KINDS]
    readers = ((services, "kserve", lambda: llm_inference_services(ctx, services, configs)),
               (isvcs, "kserve", lambda: inference_services(ctx, isvcs, serving_runtimes)),
               (graphs, "dynamo", lambda: dynamo_graphs(ctx, graphs)),
               (runtimes, "production-stack-crd", lambda: vllm_runtimes(ctx, runtimes)),
               (model_service_objects, "modelservice", lambda: model_services(ctx, model_service_objects, config_maps)),
               (ome, "ome", lambda: ome_runtimes(ctx, ome, config_maps)),
               (models, "kubeai", lambda: kubeai_models(ctx, models)),
               (playgrounds, "llmaz", lambda: llmaz_playgrounds(ctx, playgrounds, [o for _, o, _ in documents], notes)),
               (kaito, "kaito", lambda: kaito_objects(ctx, kaito, [o for _, o, _ in documents])),
               (boosters, "kthena", lambda: model_boosters(ctx, boosters)),
               (groups, "rbg", lambda: role_based_groups(ctx, groups)),
               (endpoints, "hyperpod", lambda: endpoint_configs(ctx, endpoints)))
    for items, name, read in readers:
        if items:
            found, found_problems = read()
            out += found
            problems += found_problems
            fmt = name
    if plain:
        patched = patch_file(ctx, plain)
        if patched is not None:
            found, found_problems, found_notes = patched
            notes += found_notes
            fmt = "kustomize"
        else:
            found, found_problems = kubernetes(ctx, [o for _, o, _ in plain], [s for s, _, _ in plain],
                                               [t for _, _, t in plain])
        out += found
        problems += found_problems
    # Last: the scripts no container of the file has read.
    found, found_problems = configmap_scripts(ctx, [(obj, lines) for _, obj, lines in documents
                                                    if obj.get("kind") == "ConfigMap"])
    return SourceFile(ctx.display, fmt, tuple(out + found), tuple(problems + found_problems), notes=tuple(notes))


def _listed(obj: dict[str, Any]) -> bool:
    return str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list)
