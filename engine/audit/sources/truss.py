"""Baseten Truss configs (``truss push``): a ``config.yaml`` whose
``docker_server`` runs a server of its own in the ``base_image``.

Truss (basetenlabs/truss, truss/base/truss_config.py ``DockerServer``)
builds an image from ``base_image.image``, installs the ``requirements``
list on top of it (pip requirement lines), and runs
``docker_server.start_command``: under supervisord, ``command=`` of its
``program:model-server`` (serving_image_builder.py
``generate_docker_server_supervisord_config``), which splits the command as
``shlex`` does and runs no shell, or, in its slim build, as the image's
``CMD`` under ``ENTRYPOINT ["sh", "-c"]``. The examples write the command
either way (`vllm serve ...`, `sh -c "vllm serve ..."`); it is read as
supervisord splits it, a container's ``command``, with
``environment_variables`` as its environment (``TrussConfig.from_dict``
writes each value as a string: a boolean as ``true``/``false``). A launch is
placed at ``start_command``'s line.

The release: a ``vllm==X`` among ``requirements``, which pip installs over
the base image's, else the base image's tag. A ``no_build: true`` config
runs its start_command too (templates/no_build.Dockerfile.jinja gives it
as the image's CMD); one without a start_command runs the image's own
entrypoint, and is not read.

A Truss's Python model (``model/model.py``) is the Python reader's; its
release is read from the same config (python.py, companions).
"""

from __future__ import annotations

import shlex
from typing import Any

from ...core.command import MAX_COMMAND_BYTES
from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment, SourceFile
from .kubernetes import Site, pod_launches
from .marks import Lines
from .release import REQUIREMENT, ReleaseHint, pinned

__all__ = ["is_truss_config", "truss_config", "truss_pin"]

_KIND = "Truss"


def is_truss_config(value: Any, name: str) -> bool:
    """Whether a YAML value is a Truss config that runs a server of its own:
    a file named config.yaml whose ``docker_server`` gives a ``start_command``."""
    return name in ("config.yaml", "config.yml") and isinstance(value, dict) \
        and isinstance(value.get("docker_server"), dict) and isinstance(value["docker_server"].get("start_command"), str)


def truss_pin(config: Any, lines: Lines | None = None, shown: str = "") -> ReleaseHint | None:
    """The release a Truss config's ``requirements`` pin (the last pin of
    vLLM, as pip's resolver would refuse two), or None; ``shown``: the
    config's name in the origin, where it is another file than the launch's."""
    requirements = config.get("requirements") if isinstance(config, dict) else None
    if not isinstance(requirements, list):
        return None
    found = None
    for index, requirement in enumerate(requirements):
        match = REQUIREMENT.fullmatch(requirement) if isinstance(requirement, str) else None
        if match:
            line = lines.at("requirements", index) if lines and not shown else None
            where = f" in {shown}" if shown else f" at line {line}" if line else ""
            found = ReleaseHint(pinned(match.group(1)), f"requirement vllm=={match.group(1)}{where}")
    return found


def truss_config(ctx: Ctx, config: dict[str, Any], lines: Lines) -> SourceFile:
    """The launch of a Truss config's docker_server."""
    server = config["docker_server"]
    base = config.get("base_image")
    image = base.get("image") if isinstance(base, dict) else None
    line = lines.key("docker_server", "start_command") or lines.key("docker_server") or 1
    if len(server["start_command"]) > MAX_COMMAND_BYTES:  # (shlex would take quadratic time over it)
        return SourceFile(ctx.display, "truss", problems=(ctx.problem(
            "input.limit", f"`docker_server.start_command` of `{ctx.display}` is longer than a command line may be "
            f"({MAX_COMMAND_BYTES} bytes)", line=line),))
    try:
        command = shlex.split(server["start_command"])
    except ValueError as exc:  # an unclosed quote: supervisord refuses the program
        return SourceFile(ctx.display, "truss", problems=(ctx.problem(
            "input.parse", f"`docker_server.start_command` of `{ctx.display}` cannot be split into words: {exc}",
            line=line),))
    variables = config.get("environment_variables")
    env = [{"name": str(k), "value": str(v).lower() if isinstance(v, bool) else str(v)}
           for k, v in variables.items() if v is not None] if isinstance(variables, dict) else []
    container: dict[str, Any] = {"name": "model-server", "image": image if isinstance(image, str) else None, "env": env}
    if command:
        container["command"] = command
    name = config["model_name"] if isinstance(config.get("model_name"), str) else ""
    problems: list[Problem] = []
    out: list[Deployment] = pod_launches(ctx, {"containers": [container]}, None, Site(_KIND, name, format="truss"),
                                         lines, ("docker_server",), {}, problems, line=line, qualify=False,
                                         release=truss_pin(config, lines))
    return SourceFile(ctx.display, "truss", tuple(out), tuple(problems))
