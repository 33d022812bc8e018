"""Helm values files, read through their chart's own mapping from values
to vLLM's command line (Helm is never called):

- vllm-project/production-stack (``servingEngineSpec.modelSpec[]``):
  production_stack.py;
- llm-d-modelservice (``decode``/``prefill`` with ``containers`` and
  ``modelCommand``);
- vLLM's example chart (``image.command``);
- llm-d-benchmark scenarios (llmdbench.py).

A values file of a chart the audit does not know (one beside a
``templates/`` folder) is no deployment document: it is not read as one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .context import Ctx
from .deployment import SourceFile
from .detect import mentions_vllm
from .kubernetes import Site, pod_launches
from .llmdbench import is_scenario, scenario_file
from .marks import Lines
from .production_stack import is_stack_values, stack_values

__all__ = ["chart_values"]


def chart_values(ctx: Ctx, values: Any, lines: Lines) -> SourceFile | None:
    """The launches of a values file, or None when it is not one."""
    if not isinstance(values, dict):
        return None
    if is_stack_values(values):
        found, problems, notes = stack_values(ctx, values, lines)
        return SourceFile(ctx.display, "helm-values", tuple(found), tuple(problems), notes=tuple(notes))
    if is_scenario(values):
        found, problems, notes = scenario_file(ctx, values, lines)
        return SourceFile(ctx.display, "llmdbench-scenario", tuple(found), tuple(problems), notes=tuple(notes))
    if _is_modelservice(values):
        return _modelservice(ctx, values, lines)
    image = values.get("image")
    if isinstance(image, dict) and isinstance(image.get("command"), list) and ctx.fs \
            and (ctx.path.parent / "templates").is_dir():
        container = {"name": "vllm", "image": f"{image.get('repository')}:{image.get('tag')}",
                     "command": [str(w) for w in image["command"]],
                     "env": [e for e in image.get("env") or [] if isinstance(e, dict)] if isinstance(image.get("env"), list) else []}
        problems = []
        site = Site("Deployment", "<release>-deployment-vllm", "<release-namespace>", "apps/v1", format="helm-values")
        found = pod_launches(ctx, {"containers": [container]}, None, site, lines, (), {}, problems,
                             line=lines.key("image", "command"))
        return SourceFile(ctx.display, "helm-values", tuple(found), tuple(problems))
    if ctx.fs and _in_chart_root(ctx.path) and mentions_vllm(ctx.text):  # (a chart's other values: no vLLM's)
        return SourceFile(ctx.display, "helm-values", skipped="the values of a Helm chart whose mapping to vLLM's "
                          "command line the audit does not know; audit the output of `helm template`")
    return None


def _in_chart_root(path: Path) -> bool:
    """Whether a YAML file is a chart's values file: in a chart's folder (a
    Chart.yaml, or templates with Helm's `_helpers.tpl`), or one folder below
    where its name or folder says so (`ci/values-gpu.yaml`, `values/gpu.yaml`;
    not nebius-k8s-applications' `vllm/manifest.yaml` under a chart at the
    repository's root). A folder of other templates is no chart
    (huggingface/trl keeps Jinja templates beside Accelerate's configs), and
    Chart.yaml is no values file."""
    if path.name.lower() in ("chart.yaml", "chart.lock"):
        return False
    below = "values" in path.name.lower() or path.parent.name.lower() in ("ci", "values")
    return any((folder / "Chart.yaml").is_file() or (folder / "templates" / "_helpers.tpl").is_file()
               for folder in ((path.parent, path.parent.parent) if below else (path.parent,)))


def _is_modelservice(values: dict[str, Any]) -> bool:
    return "modelArtifacts" in values and any(isinstance(values.get(k), dict) and "containers" in values[k]
                                              for k in ("decode", "prefill"))


def _modelservice(ctx: Ctx, values: dict[str, Any], lines: Lines) -> SourceFile:
    """llm-d-modelservice (``templates/_helpers.tpl``): each container of an
    enabled ``decode``/``prefill`` becomes a container; ``modelCommand``
    ``vllmServe`` runs ``vllm serve <model> --port ... <args>``,
    ``imageDefault`` the image's entrypoint with ``--model``, ``custom``
    the container's own command."""
    artifacts = values["modelArtifacts"] if isinstance(values.get("modelArtifacts"), dict) else {}
    uri = str(artifacts.get("uri") or "")
    model = uri.split("://", 1)[1] if uri.startswith("hf://") else uri
    problems: list = []
    out = []
    for role in ("decode", "prefill"):
        part = values.get(role)
        if not isinstance(part, dict) or part.get("create") is False or not isinstance(part.get("containers"), list):
            continue
        for index, container in enumerate(part["containers"]):
            if not isinstance(container, dict):
                continue
            mode = container.get("modelCommand") or "custom"
            args = [str(a) for a in container.get("args") or []] if isinstance(container.get("args"), list) else []
            held = dict(container)
            if mode == "vllmServe":
                held["command"], held["args"] = ["vllm", "serve"], [model, *args]
            elif mode == "imageDefault":
                held.pop("command", None)
                held["args"] = ["--model", model, *args]
            site = Site("Deployment", f"<release>-llm-d-modelservice-{role}", "<release-namespace>", "apps/v1", role,
                        format="helm-values")
            out += pod_launches(ctx, {"containers": [held]}, None, site, lines, (), {}, problems,
                                line=lines.first((role, "containers", index, "name"), (role, "containers", index)))
    return SourceFile(ctx.display, "helm-values", tuple(out), tuple(problems))
