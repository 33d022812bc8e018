"""OME (sgl-project/ome) ``ClusterServingRuntime`` and ``ServingRuntime``:
each ``runner`` container of the engine and the decoder is a launch.

A runtime's ``spec.engineConfig`` and, for prefill/decode disaggregation,
``spec.decoderConfig`` each hold a ``runner`` container, and for serving
across nodes a ``leader`` and a ``worker`` with a ``runner`` of their own
(config/crd/full/ome.io_clusterservingruntimes.yaml, sgl-project/ome
17b77eda). The controller runs each runner as a container of the component's
pod, with the component's ``volumes``. With a decoder, the engine prefills.
``spec.routerConfig`` runs a router, no vLLM engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, config_maps_of, pod_launches
from .marks import Lines

__all__ = ["is_runtime", "ome_runtimes", "runners"]

KINDS = ("ClusterServingRuntime", "ServingRuntime")


def is_runtime(obj: dict[str, Any]) -> bool:
    return obj.get("kind") in KINDS and str(obj.get("apiVersion", "")).startswith("ome.io/")


def ome_runtimes(ctx: Ctx, runtimes: list[tuple[dict[str, Any], Lines]],
                 config_maps: list[dict[str, Any]]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of each runtime's engine and decoder runners."""
    maps = config_maps_of(config_maps)
    out: list[Deployment] = []
    problems: list[Problem] = []
    for obj, lines in runtimes:
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        site = Site(str(obj.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                    str(obj.get("apiVersion")), format="ome")
        out += _runners(ctx, obj, site, lines, maps, problems)
    return out, problems


def runners(obj: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], dict[str, Any], str | None]]:
    """Each runner container of a runtime's engine and decoder (their leader's and worker's too), as (its path,
    the pod the controller runs it in, its role)."""
    spec = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    disaggregated = isinstance(spec.get("decoderConfig"), dict)
    for component, role in (("engineConfig", "prefill" if disaggregated else None), ("decoderConfig", "decode")):
        config = spec.get(component)
        if not isinstance(config, dict):
            continue
        for part, part_role in (((), role), (("leader",), role or "leader"), (("worker",), "worker")):
            holder = config.get(part[0]) if part else config
            if not isinstance(holder, dict) or not isinstance(holder.get("runner"), dict):
                continue
            volumes = holder.get("volumes") if isinstance(holder.get("volumes"), list) else config.get("volumes")
            pod = {"containers": [holder["runner"]], "volumes": volumes if isinstance(volumes, list) else []}
            yield ("spec", component, *part, "runner"), pod, part_role


def _runners(ctx: Ctx, obj: dict[str, Any], site: Site, lines: Lines,
             config_maps: Mapping[tuple[str, str], dict[str, Any]], problems: list[Problem]) -> list[Deployment]:
    out: list[Deployment] = []
    for path, pod, role in runners(obj):
        out += pod_launches(ctx, pod, None, replace(site, role=role), lines, path, config_maps, problems,
                            object_meta=obj.get("metadata"), line=lines.first((*path, "name"), path))
    return out
