"""SkyPilot task YAML (``sky launch``, ``sky serve up``, ``sky jobs launch``):
each vLLM launch in the task's ``run`` script is one deployment.

SkyPilot runs ``setup`` and then ``run`` on every node, each with bash,
with the task's ``envs`` and ``secrets`` exported (a value of null is given
at launch, ``--env NAME=...`` or ``--secret NAME=...``: here a value not
known) and the ``SKYPILOT_*`` variables it sets at run time (not known to a
file either): sky/skylet/log_lib.py L357-437 and sky/task.py L649-800 in
skypilot 0.14.1. Both scripts are read by the shell reader; a ``pip install
vllm==X.Y.Z`` in ``run``, else in ``setup``, else a ``resources.image_id``
of ``docker:`` vLLM's release image gives the release.
"""

from __future__ import annotations

from typing import Any

from ...core.markers import unresolved
from ...core.options import Arg
from ...core.errors import Problem
from .context import Ctx
from .deployment import SourceFile
from .launch import apply_facts, config_from_fs, deployment
from .marks import Lines
from .release import from_image
from .shell import release_at, run_script, written_or_disk

__all__ = ["is_task", "task_file"]

# A task's top-level keys (sky/utils/schemas.py get_task_schema, L1180-1325 in skypilot 0.14.1,
# which refuses others): a file with others is not a task.
_TASK_KEYS = frozenset({"name", "workdir", "event_callback", "num_nodes", "resources", "file_mounts", "service", "pool",
                        "setup", "run", "envs", "secrets", "managed_secrets", "inputs", "outputs", "file_mounts_mapping",
                        "config", "volumes", "volume_mounts", "api_server_access", "_metadata"})
# What SkyPilot exports to `run` besides the task's envs (sky/backends/task_codegen.py L627-670,
# sky/skylet/constants.py L641-646; SKYPILOT_SERVE_REPLICA_ID for a SkyServe replica).
_RUN_TIME = ("SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES", "SKYPILOT_NUM_GPUS_PER_NODE", "SKYPILOT_NODE_RANK",
             "SKYPILOT_INTERNAL_JOB_ID", "SKYPILOT_TASK_ID", "SKYPILOT_CLUSTER_INFO", "SKYPILOT_USER",
             "SKYPILOT_SERVE_REPLICA_ID")
# Keys only a task has besides `run` (a CI file may have a `run` too).
_TASK_SIGNS = frozenset({"resources", "setup", "envs", "secrets", "num_nodes", "service", "file_mounts", "workdir"})


def is_task(value: Any) -> bool:
    """Whether a YAML value is a SkyPilot task that runs a script."""
    return isinstance(value, dict) and isinstance(value.get("run"), str) and set(value) <= _TASK_KEYS \
        and bool(set(value) & _TASK_SIGNS)


def task_file(ctx: Ctx, task: dict[str, Any], lines: Lines) -> SourceFile:
    """The launches of a task's ``run`` script."""
    env = {name: Arg(unresolved(f"${name}", "is set by SkyPilot at run time"), "SkyPilot") for name in _RUN_TIME}
    for section in ("envs", "secrets"):
        values = task[section] if isinstance(task.get(section), dict) else {}
        for name, value in values.items():
            origin = f"line {lines.at(section, name)}: {section}.{name}"
            if value is None:
                option = "--env" if section == "envs" else "--secret"
                env[str(name)] = Arg(unresolved(f"${name}", f"is given at launch (`{option} {name}=...`)"), origin)
            else:
                env[str(name)] = Arg(_text(value), origin)
    problems: list[Problem] = []
    pins = []
    if isinstance(task.get("setup"), str):
        setup = lines.inner("setup")
        _, ran = run_script(task["setup"], ctx, env=env, first_line=setup.start, origin=lambda line: f"line {line}",
                            anchor=lambda line: f":{line}", problems=problems)
        pins = [pin.hint for pin in ran.pins if pin.container == 0]
    script = lines.inner("run")
    found, run = run_script(task["run"], ctx, env=env, first_line=script.start, origin=lambda line: f"line {line}",
                            anchor=lambda line: f":{line}", problems=problems)
    image = _image(task.get("resources"))
    for inv in found:
        inv.config_reader = written_or_disk(run, inv.sequence, config_from_fs(ctx, ctx.path.parent))
        inv.release = release_at(run, inv) or (pins[-1] if pins else None) or (from_image(image) if image else None)
        inv.image = inv.image or image or None
    apply_facts(found, ctx)
    return SourceFile(ctx.display, "skypilot", tuple(deployment(inv, ctx, "skypilot") for inv in found), tuple(problems))


def _text(value: Any) -> str:
    """An env value as SkyPilot exports it (YAML's true is Python's True)."""
    return value if isinstance(value, str) else str(value)


def _image(resources: Any) -> str | None:
    """The vLLM image of ``resources.image_id: docker:IMAGE`` (also in an
    ``any_of``/``ordered`` list of resources: the first that names one)."""
    candidates = [resources] if isinstance(resources, dict) else []
    if isinstance(resources, dict):
        for key in ("any_of", "ordered"):
            if isinstance(resources.get(key), list):
                candidates += [r for r in resources[key] if isinstance(r, dict)]
    for entry in candidates:
        image = entry.get("image_id")
        if isinstance(image, str) and image.startswith("docker:"):
            return image[len("docker:"):]
    return None
