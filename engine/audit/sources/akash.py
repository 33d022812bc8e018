"""Akash Network deployments (SDL, ``deploy.yaml``): each service that runs
vLLM is a launch, read as the pod container Akash's provider makes of it.

An SDL has a top-level ``version`` ("2.0", "2.1"), ``services``, ``profiles``
and ``deployment`` (a file with the first two and either of the others is
one: compose has neither at its top level); its ``services`` look like docker compose's, but Akash
runs them as Kubernetes does (akash-network/provider, cluster/kube/builder/
workload.go, ``workload.container``, at 912b76a7): ``command`` is the
container's command, in place of the image's entrypoint, and ``args`` its
arguments; ``env`` is a list of ``NAME=value``, split at the first ``=`` (a
``NAME`` alone is set to the empty value). A vLLM image without a
``command`` runs ``vllm serve`` with the ``args``, as a pod's does
(kubernetes.py's pod_launches). The service's GPU comes from its compute
profile, ``profiles.compute.<service>.resources.gpu.attributes.vendor``: an
``amd`` vendor is ROCm. A launch is placed at the service's key.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from ...core.schema import pointer
from .context import Ctx
from .deployment import Deployment, SourceFile
from .kubernetes import Site, pod_launches
from .marks import NO_LINES

__all__ = ["looks_like_sdl", "sdl_file"]

# The platform a GPU vendor of a compute profile names (CUDA, vLLM's default, for nvidia).
_VENDOR_PLATFORMS = {"amd": "rocm"}


def looks_like_sdl(value: Any) -> bool:
    """An Akash SDL: a version and services beside the profiles or the
    deployment that compose has no top-level key for."""
    return isinstance(value, dict) and isinstance(value.get("version"), str) and isinstance(value.get("services"), dict) \
        and any(isinstance(value.get(key), dict) for key in ("profiles", "deployment"))


def sdl_file(ctx: Ctx, value: dict[str, Any], key_lines: dict[str, int]) -> SourceFile:
    """The launches of an SDL's services; ``key_lines``: the line of each key by its value's pointer."""
    problems: list[Problem] = []
    out: list[Deployment] = []
    compute = value["profiles"].get("compute") if isinstance(value.get("profiles"), dict) else None
    for name, service in value["services"].items():
        if not isinstance(service, dict):
            continue
        name = str(name)
        line = key_lines.get(pointer(("services", name)))
        container = {key: service[key] for key in ("image", "command", "args") if key in service}
        container["name"] = name
        container["env"] = [_env_var(item) for item in service.get("env") or [] if isinstance(item, str)] \
            if isinstance(service.get("env"), list) else []
        profile = compute.get(name) if isinstance(compute, dict) else None
        platform = _platform(profile, name)
        site = Site("service", name, "", f"SDL {value['version']}", format="akash")
        out += pod_launches(ctx, {"containers": [container]}, None, site, NO_LINES, ("services", name), {}, problems,
                            line=line, qualify=False, platform=platform)
    return SourceFile(ctx.display, "akash", tuple(out), tuple(problems))


def _env_var(item: str) -> dict[str, str]:
    name, _, value = item.partition("=")
    return {"name": name, "value": value}


def _platform(profile: Any, name: str) -> tuple[str, str] | None:
    """The platform the service's compute profile asks its GPU of."""
    resources = profile.get("resources") if isinstance(profile, dict) else None
    gpu = resources.get("gpu") if isinstance(resources, dict) else None
    attributes = gpu.get("attributes") if isinstance(gpu, dict) else None
    vendors = attributes.get("vendor") if isinstance(attributes, dict) else None
    # (none, or a choice of vendors: the provider's GPU decides)
    vendor = next(iter(vendors)) if isinstance(vendors, dict) and len(vendors) == 1 else None
    if vendor not in _VENDOR_PLATFORMS:
        return None
    return _VENDOR_PLATFORMS[vendor], f"profiles.compute.{name}: GPU vendor {vendor}"
