"""Unrendered Helm chart templates (``templates/*.yaml`` with ``{{ ... }}``),
read without Helm where the vLLM command is written in the template itself
(the aibrix regression chart): lines that are only template actions (``{{-
if ... }}``, ``{{- include ... | nindent 8 }}``, ``{{- end }}``) are left
out, and each inline ``{{ .Values.x }}`` stands for a value the audit does
not know (unresolved: a launch is decided only when the decision does not
read it). A container whose ``command`` or ``args`` a template action builds
(``{{- range .Values.extraArgs }}``) is not read: its arguments come from
the chart's values, and the launch is found at the values file or in the
output of ``helm template``."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ...core.markers import unresolved
from ...core.errors import InputError, Problem
from ...core.input import parse_text
from .companions import read_companion
from .context import Ctx
from .deployment import Deployment
from .kubernetes import Site, pod_launches, pod_templates
from .marks import Lines, yaml_chunks

__all__ = ["in_chart", "chart_template", "Template"]

_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
_ACTION = re.compile(r"\{\{-?.*?-?\}\}")
_PLACEHOLDER = re.compile(r"HELMVALUE(\d+)X")
# `{{ .Chart.Name }}`: Helm fills it from the chart's Chart.yaml, whatever the install's values
# (a chart's name is lowercase letters, digits and dashes: text wherever YAML reads it).
_CHART_NAME = re.compile(r"\{\{-?\s*\.Chart\.Name\s*-?\}\}")
_NAME = re.compile(r"[a-z][a-z0-9-]*")
# Kinds whose objects hold no pod and run nothing: a template of these alone starts no vLLM
# (an HPA that scales on the metric `vllm:gpu_cache_usage_perc` is no launch).
_PODLESS = frozenset({"HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "Ingress", "NetworkPolicy",
                      "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceMonitor",
                      "PodMonitor", "PersistentVolumeClaim", "HTTPRoute", "Gateway", "InferencePool", "InferenceModel",
                      "VerticalPodAutoscaler"})


def in_chart(ctx: Ctx) -> bool:
    """Whether the file is a template of a Helm chart (in a `templates` folder)."""
    return ctx.path.parent.name == "templates"


class Template(NamedTuple):
    """What a chart template holds, read with its values unknown."""

    deployments: list[Deployment]  # its launches; none when their commands are built from values
    podless: bool  # every object is of a kind that holds no pod (an HPA, a Service): it starts nothing


def chart_template(ctx: Ctx) -> Template | None:
    """The launches written in a chart template, or None when it is not
    YAML even with its actions left out."""
    text = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), ctx.text)
    name = _chart_name(ctx) if _CHART_NAME.search(text) else None
    if name is not None:
        text = _CHART_NAME.sub(name, text)
    expressions: list[str] = []
    action_lines: set[int] = set()
    rows = []
    for number, row in enumerate(text.split("\n"), 1):
        if _ACTION.search(row) and not _ACTION.sub("", row).strip():
            action_lines.add(number)
            rows.append("")
            continue

        def hold(match: re.Match) -> str:
            expressions.append(match.group(0))
            return f"HELMVALUE{len(expressions) - 1}X"
        rows.append(_ACTION.sub(hold, row))
    out: list[Deployment] = []
    problems: list[Problem] = []
    podless = True
    for start, body in yaml_chunks("\n".join(rows)):
        try:
            obj = parse_text(body, source=ctx.display, fmt="yaml")
        except InputError:
            return None
        if not isinstance(obj, dict):
            continue
        podless = podless and obj.get("kind") in _PODLESS
        lines = Lines(body, start + 1)
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        for path, pod, pod_meta, role in pod_templates(obj):
            literal = [c for i, c in enumerate(pod["containers"])
                       if isinstance(c, dict) and not _built(lines, path + ("containers", i), c, action_lines, rows)]
            if not literal:
                continue
            held = _values(dict(pod, containers=literal), expressions)
            site = Site(str(obj.get("kind")), _values(str(meta.get("name") or ""), expressions),
                        _values(str(meta.get("namespace") or ""), expressions), str(obj.get("apiVersion")), role,
                        format="helm-template")
            for container in literal:
                index = pod["containers"].index(container)
                line = lines.first((*path, "containers", index, "name"), (*path, "containers", index))
                for d in pod_launches(ctx, dict(held, containers=[held["containers"][literal.index(container)]]),
                                      pod_meta, site, lines, path, {}, problems, line=line):
                    out.append(d.replace(notes=d.notes + (ctx.problem(
                        "source.template", "read from an unrendered Helm template: values written `{{ ... }}` are "
                        "not known, and template conditions are not evaluated", line=line,
                        hint="audit the output of `helm template` for the exact command"),)))
    return Template(out, podless)


def _chart_name(ctx: Ctx) -> str | None:
    """The `name` of the chart's Chart.yaml (beside `templates/`), or None
    when it is not there, not read or not a chart name."""
    found = read_companion(ctx, ctx.path.parent.parent / "Chart.yaml")
    chart = found.documents[0][0] if found is not None and found.documents else None
    name = chart.get("name") if isinstance(chart, dict) else None
    return name if isinstance(name, str) and _NAME.fullmatch(name) else None


def _built(lines: Lines, path: tuple, container: dict[str, Any], action_lines: set[int], rows: list[str]) -> bool:
    """Whether a template action falls among the lines of the container's
    command or args: from the key to the next line indented no deeper."""
    for key in ("command", "args"):
        line = lines.key(*path, key) if key in container else None
        if line is None:
            continue
        indent = len(rows[line - 1]) - len(rows[line - 1].lstrip())
        end = line + 1
        while end <= len(rows) and (not rows[end - 1].strip() or end in action_lines
                                    or len(rows[end - 1]) - len(rows[end - 1].lstrip()) > indent
                                    or rows[end - 1].lstrip().startswith("- ") and len(rows[end - 1]) - len(rows[end - 1].lstrip()) == indent):
            end += 1
        if any(line < at < end for at in action_lines):
            return True
    return False


def _values(value: Any, expressions: list[str]) -> Any:
    """A value with each template expression as an unresolved marker."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: unresolved(expressions[int(m.group(1))]), value)
    if isinstance(value, list):
        return [_values(v, expressions) for v in value]
    if isinstance(value, dict):
        return {k: _values(v, expressions) for k, v in value.items()}
    return value
