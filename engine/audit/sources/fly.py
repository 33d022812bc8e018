"""Fly.io apps (``fly.toml``): the release of a script a Fly app places in
its Machines and runs.

A Fly app runs its image (``[build] image``) with the entrypoint and command
its config gives (``[experimental] entrypoint`` and ``cmd``, or a process
group's command, ``[processes]``). ``[[files]]`` writes files into each
Machine: one from ``local_path``, read by ``fly deploy`` where it runs, the
app's folder (superfly/flyctl, ``internal/appconfig``: ``File.toMachineFile``).
A script placed so and run by the app (fly-apps/vllm-demo's ``start.sh``,
its entrypoint ``/start.sh``) is read as a shell script of its own, and runs
the vLLM release of the app's image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .companions import companion_text, shown
from .context import Ctx
from .files import toml_table
from .release import ReleaseHint, from_image

__all__ = ["fly_script_release"]

FLY_CONFIG = "fly.toml"
# How far above a script its app's folder may be (a script in `scripts/` beside fly.toml).
_ABOVE = 2


def fly_script_release(ctx: Ctx) -> ReleaseHint | None:
    """The release of the image of the Fly app whose ``[[files]]`` places
    the script ``ctx`` (by its ``local_path``) at a path its entrypoint,
    command or a process group runs: the image's tag, where it names one;
    None elsewhere (also for an app built from a Dockerfile: a Dockerfile
    that copies the script says its release)."""
    path = ctx.real_path()
    if path is None:
        return None
    for folder in path.parents[:_ABOVE + 1]:
        if not ctx.may_read(folder):
            return None
        config = _config(ctx, folder / FLY_CONFIG)
        if config is None:
            continue
        build = config.get("build")
        image = build.get("image") if isinstance(build, dict) else None
        if not isinstance(image, str) or not any(_runs(config, guest) for guest in _placed(config, folder, path)):
            return None
        hint = from_image(image)
        if hint.version is None:
            return None
        return hint._replace(origin=f"{hint.origin} in {shown(ctx, folder / FLY_CONFIG)} (the Fly app that runs this file)")
    return None


def _config(ctx: Ctx, path: Path) -> dict[str, Any] | None:
    """A fly.toml inside the audited paths, parsed; None for any other."""
    text = companion_text(ctx, path) if path.is_file() else None
    return toml_table(text) if text is not None else None


def _placed(config: dict[str, Any], folder: Path, path: Path) -> list[str]:
    """The paths in the Machine where the app's ``[[files]]`` place ``path``."""
    files = config.get("files")
    out = []
    for entry in files if isinstance(files, list) else []:
        local = entry.get("local_path") if isinstance(entry, dict) else None
        guest = entry.get("guest_path") if isinstance(entry, dict) else None
        if isinstance(local, str) and local and isinstance(guest, str) and guest:
            try:
                if (folder / local).resolve() == path:
                    out.append(guest)
            except (OSError, RuntimeError, ValueError):  # (a link that loops, a NUL)
                continue
    return out


def _runs(config: dict[str, Any], guest: str) -> bool:
    """Whether the app's entrypoint, command or a process group's command runs ``guest``."""
    experimental = config.get("experimental")
    processes = config.get("processes")
    commands = [experimental.get(key) for key in ("entrypoint", "cmd")] if isinstance(experimental, dict) else []
    commands += list(processes.values()) if isinstance(processes, dict) else []
    words = [word for command in commands
             for word in (command.split() if isinstance(command, str) else command if isinstance(command, list) else [])]
    return guest in words
