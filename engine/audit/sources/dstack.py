"""dstack run configurations (``.dstack.yml``, ``type: task`` or ``type:
service``): each vLLM launch in the run's ``commands`` is one deployment.

dstack runs a configuration's ``commands`` as one script, ``SHELL -i -c
"cmd1 && cmd2 && ..."``, each command stripped (one that ends with ``&`` in
braces): bash in dstack's own base image, else ``/bin/sh``, or the
configuration's ``shell`` (src/dstack/_internal/server/services/jobs/
configurators/base.py L247-282, L576-582 in dstackai/dstack 511c318c). A
configuration with an ``entrypoint`` runs it, split into words, with the
commands as its arguments. The script runs with ``env`` exported: ``NAME=value``
(or a mapping), or ``NAME`` alone, whose value ``dstack apply`` takes from the
environment it runs in (here a value not known), as is a ``${{ secrets.X }}``;
and with the ``DSTACK_*`` variables the runner sets (runner/internal/runner/
executor/executor.go L488-502), known only when the run starts.

The commands are read one after another as a shell script (the ``&&`` between
them only ends the run at a failure), each at its own line; a ``pip install
vllm==X.Y.Z`` in them, else the ``image`` tag, gives the release.
"""

from __future__ import annotations

import shlex
from typing import Any

from ...core.errors import Problem
from ...core.markers import unresolved
from ...core.options import Arg
from .context import Ctx
from .deployment import SourceFile
from .launch import apply_facts, config_from_fs, deployment
from .marks import Lines
from .pyvalues import split_words
from .release import from_image
from .shell import release_at, run_script, written_or_disk

__all__ = ["is_run_configuration", "run_configuration_file"]

# What the runner exports besides the configuration's env (executor.go L488-502).
_RUN_TIME = ("DSTACK_RUN_ID", "DSTACK_JOB_ID", "DSTACK_RUN_NAME", "DSTACK_REPO_ID", "DSTACK_REPO_DIR",
             "DSTACK_WORKING_DIR", "DSTACK_NODES_IPS", "DSTACK_MASTER_NODE_IP", "DSTACK_NODE_RANK", "DSTACK_NODES_NUM",
             "DSTACK_GPUS_PER_NODE", "DSTACK_GPUS_NUM", "DSTACK_MPI_HOSTFILE")
# Keys of dstack's run configurations that other tools' `type:` files seldom hold together.
_SIGNS = frozenset({"resources", "image", "python", "port", "nodes", "env", "replicas", "model", "volumes", "fleets"})


def is_run_configuration(value: Any, name: str) -> bool:
    """Whether a YAML value is a dstack task or service that runs commands
    (its own, or its replica groups'): in a file named as dstack's are
    (``.dstack.yml``, ``*.dstack.yml``), or with keys only dstack's
    configurations have beside ``type`` and ``commands``."""
    if not isinstance(value, dict) or value.get("type") not in ("task", "service"):
        return False
    if not any(_runs(part) for _, part in _parts(value)):
        return False
    return name.endswith((".dstack.yml", ".dstack.yaml")) or bool(set(value) & _SIGNS)


def _runs(part: dict[str, Any]) -> bool:
    commands = part.get("commands")
    return isinstance(commands, list) and bool(commands) and all(isinstance(c, str) for c in commands) \
        or isinstance(part.get("entrypoint"), str)


# A service's replica groups (dstack 0.20.17 and later, `replicas:` given as a list, or `groups:`:
# dstack's ReplicaGroup, src/dstack/_internal/core/models/configurations.py), each with the commands,
# image and python its replicas run: the prefill and decode workers of a disaggregated service.
_GROUPS = ("replicas", "groups")
_GROUP_FIELDS = ("commands", "entrypoint", "image", "python")


def _parts(configuration: dict[str, Any]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """What runs: each replica group that runs commands of its own, with its path in the file, the
    configuration's fields it does not give inherited; else the configuration itself."""
    groups = [((key, index), group) for key in _GROUPS if isinstance(configuration.get(key), list)
              for index, group in enumerate(configuration[key]) if isinstance(group, dict) and _runs(group)]
    return [(path, {**configuration, **{k: group[k] for k in _GROUP_FIELDS if k in group}}) for path, group in groups] \
        or [((), configuration)]


def run_configuration_file(ctx: Ctx, configuration: dict[str, Any], lines: Lines) -> SourceFile:
    """The launches of a run configuration's commands (each replica group's)."""
    env = {name: Arg(unresolved(f"${name}", "is set by dstack's runner when the run starts"), "dstack")
           for name in _RUN_TIME}
    env.update(_env(configuration.get("env"), lines))
    problems: list[Problem] = []
    found_all = []
    for path, part in _parts(configuration):
        text, first = _script(part, lines, path)
        found, run = run_script(text, ctx, env=env, first_line=first, origin=lambda line: f"line {line}",
                                anchor=lambda line: f":{line}", problems=problems)
        image = part.get("image")
        for inv in found:
            inv.config_reader = written_or_disk(run, inv.sequence, config_from_fs(ctx, ctx.path.parent))
            inv.release = release_at(run, inv) or (from_image(image) if isinstance(image, str) and image else None)
            inv.image = inv.image or (image if isinstance(image, str) and image else None)
        found_all += found
    apply_facts(found_all, ctx)
    return SourceFile(ctx.display, "dstack", tuple(deployment(inv, ctx, "dstack") for inv in found_all), tuple(problems))


def _env(declared: Any, lines: Lines) -> dict[str, Arg]:
    """The configuration's ``env``: a list of ``NAME=value`` or ``NAME``, or a mapping."""
    items: list[tuple[str, Any, int | None]] = []
    if isinstance(declared, list):
        for index, entry in enumerate(declared):
            if isinstance(entry, str) and entry:
                name, sign, value = entry.partition("=")
                items.append((name, value if sign else None, lines.at("env", index)))
    elif isinstance(declared, dict):
        items = [(str(name), value, lines.at("env", name)) for name, value in declared.items()]
    out = {}
    for name, value, line in items:
        origin = f"line {line}: env.{name}" if line else f"env.{name}"
        if value is None:
            out[name] = Arg(unresolved(f"${name}", "is taken from the environment `dstack apply` runs in"), origin)
        elif isinstance(value, str) and "${{" in value:
            out[name] = Arg(unresolved(value, "is filled in by dstack when the run starts"), origin)
        else:
            out[name] = Arg(value if isinstance(value, str) else str(value), origin)
    return out


def _script(configuration: dict[str, Any], lines: Lines, path: tuple[Any, ...] = ()) -> tuple[str, int]:
    """The script the run's shell runs, each command at its own line of the
    file (blank lines between), and the file's line of its first line
    (``path``: where its replica group is, which gives its commands)."""
    commands = [c for c in configuration.get("commands") or [] if isinstance(c, str)]
    entrypoint = configuration.get("entrypoint")
    if isinstance(entrypoint, str):  # docker-like: the entrypoint's words, the commands its arguments
        # (None: an unclosed quote, which dstack's own split refuses too, or a text longer than a command
        # line, over which shlex would take quadratic time: the entrypoint read as one word)
        split = split_words(entrypoint, True)
        words = split if split is not None else [entrypoint]
        return " ".join(shlex.quote(w) for w in words + commands), lines.at(*path, "entrypoint") or lines.at("entrypoint") or 1
    lines_of = [lines.inner(*path, "commands", index).start for index in range(len(commands))]
    first = lines_of[0] if lines_of else 1
    text, last = "", first  # the script so far, and the file's line of its last line
    for start, command in zip(lines_of, commands):
        if text:
            gap = max(1, start - last)
            text, last = text + "\n" * gap, last + gap
        text, last = text + command.strip(), last + command.strip().count("\n")
    return text, first
