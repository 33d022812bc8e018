"""Beaker experiment specs (AI2's cluster scheduler, ``beaker experiment
create spec.yaml``): ``version: v2`` and a list of ``tasks``, each a
container: its ``image`` (``docker`` or ``beaker``), ``command`` and
``arguments`` (Docker's entrypoint and command, as a Kubernetes container's
``command`` and ``args``), ``envVars`` (``name`` with a ``value``, or a
``secret``). Each task that runs vLLM is a launch, read as that container
(kubernetes.py's pod_launches), at its ``name:`` line."""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment, SourceFile
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_beaker_spec", "beaker_spec"]

_KIND = "BeakerExperiment"


def is_beaker_spec(value: Any) -> bool:
    """Whether a YAML value is a Beaker experiment spec (version v2, a list of tasks with an image)."""
    return isinstance(value, dict) and value.get("version") == "v2" and isinstance(value.get("tasks"), list) \
        and any(isinstance(task, dict) and isinstance(task.get("image"), dict) for task in value["tasks"])


def beaker_spec(ctx: Ctx, spec: dict[str, Any], lines: Lines) -> SourceFile:
    """The launches of a Beaker experiment spec's tasks."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    name = ""  # (a spec names no experiment: `beaker experiment create --name` does)
    for index, task in enumerate(spec["tasks"]):
        if not isinstance(task, dict):
            continue
        image: dict[str, Any] = task["image"] if isinstance(task.get("image"), dict) else {}
        container: dict[str, Any] = {"name": str(task.get("name") or index), "image": image.get("docker") or
                                     image.get("beaker"), "env": _env(task.get("envVars"))}
        for field, key in (("command", "command"), ("arguments", "args")):
            if field in task:
                container[key] = task[field]
        site = Site(_KIND, name, "", "v2", format="beaker")
        line = lines.key("tasks", index, "name") or lines.key("tasks", index) or 1
        out += pod_launches(ctx, {"containers": [container]}, None, site, lines, ("tasks", index), {}, problems,
                            line=line, qualify=False)
    return SourceFile(ctx.display, "beaker", tuple(out), tuple(problems))


def _env(variables: Any) -> list[dict[str, Any]]:
    """A task's ``envVars`` as a container's ``env``: a ``secret`` is a value from outside the file."""
    if not isinstance(variables, list):
        return []
    out: list[dict[str, Any]] = []
    for variable in variables:
        if not isinstance(variable, dict) or not isinstance(variable.get("name"), str):
            continue
        if "secret" in variable:
            out.append({"name": variable["name"], "valueFrom": {"secretKeyRef": {"name": str(variable["secret"])}}})
        else:
            out.append({"name": variable["name"], "value": variable.get("value")})
    return out
