"""Dockerfiles: the container command of the final stage (ENTRYPOINT and
CMD, with ENV). An image built FROM ``vllm/vllm-openai`` inherits its
``ENTRYPOINT ["vllm", "serve"]``; a ``--config`` path inside the image is
found through the COPY instructions."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...core.command import Arg
from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment
from .launch import apply_facts, config_from_fs, deployment
from .shell import VLLM_IMAGE, argv_invocations

__all__ = ["dockerfile"]


def _dockerfile_instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuations joined, comments and heredoc bodies removed."""
    escape = "\\"
    lines = text.split("\n")
    for line in lines[:5]:
        match = re.match(r"\s*#\s*escape\s*=\s*([\\`])\s*$", line, re.I)
        if match:
            escape = match.group(1)
    i = 0
    while i < len(lines):
        raw = lines[i]
        start = i + 1
        i += 1
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [raw]
        while parts[-1].rstrip().endswith(escape) and i < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            nxt = lines[i]
            i += 1
            if nxt.lstrip().startswith("#"):
                parts.append(escape)  # a comment inside a continuation is dropped; the continuation goes on
                continue
            parts.append(nxt)
        joined = " ".join(p for p in parts if p != escape).strip()
        instruction, _, rest = joined.partition(" ")
        heredoc = re.search(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?", rest)
        if heredoc and instruction.upper() in ("RUN", "COPY", "ADD"):
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                i += 1
            i += 1
        yield start, instruction.upper(), rest.strip()


def _exec_form(arguments: str) -> list[str] | None:
    """The JSON array of an exec-form instruction; None means shell form (as Docker decides)."""
    if not arguments.startswith("["):
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


_DOCKER_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _docker_vars(text: str, variables: Mapping[str, str]) -> str:
    """Docker's own substitution in FROM/ENV/COPY: $VAR, ${VAR}, ${VAR:-word},
    ${VAR:+word}; an unset variable is empty, as in Docker."""
    def sub(m: re.Match) -> str:
        value = variables.get(m.group(1) or m.group(4))
        if m.group(2) == "-":
            return value if value else m.group(3)
        if m.group(2) == "+":
            return m.group(3) if value else ""
        return value or ""
    return _DOCKER_VAR.sub(sub, text)


@dataclass
class _Stage:
    line: int
    name: str | None
    env: dict[str, Arg] = field(default_factory=dict)
    entrypoint: tuple[list[str] | str, int] | None = None   # exec form list, or shell form text; and its line
    cmd: tuple[list[str] | str, int] | None = None
    copies: dict[str, str] = field(default_factory=dict)     # container path -> build-context path
    vllm_image: bool = False


def dockerfile(ctx: Ctx) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    stages: list[_Stage] = []
    args: dict[str, str] = {}
    for line, instruction, rest in _dockerfile_instructions(ctx.text):
        if instruction == "FROM":
            words = rest.split()
            words = [w for w in words if not w.startswith("--")]
            image = _docker_vars(words[0], args) if words else ""
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            parent = next((s for s in stages if s.name and s.name == image), None)
            stage = _Stage(line, name)
            if parent is not None:  # FROM an earlier stage inherits its configuration
                stage.env = dict(parent.env)
                stage.entrypoint, stage.cmd, stage.vllm_image = parent.entrypoint, parent.cmd, parent.vllm_image
                stage.copies = dict(parent.copies)
            elif VLLM_IMAGE.search(image.split("@")[0]):
                stage.vllm_image = True  # the image's ENTRYPOINT ["vllm", "serve"]
            stages.append(stage)
            continue
        if instruction == "ARG":
            for word in rest.split():
                name, eq, value = word.partition("=")
                if eq:
                    args[name] = value.strip("\"'")
            continue
        if not stages:
            continue
        stage = stages[-1]
        if instruction == "ENV":
            scope = {**args, **{k: v for k, (v, _) in stage.env.items()}}
            expanded = _docker_vars(rest, scope)
            try:
                words = shlex.split(expanded)
            except ValueError as exc:
                problems.append(ctx.problem("source.shell_syntax", f"cannot read ENV: {exc}", line=line))
                continue
            if words and "=" not in words[0]:  # the legacy form: ENV NAME value...
                stage.env[words[0]] = Arg(" ".join(words[1:]), f"line {line}: ENV")
            else:
                for word in words:
                    name, _, value = word.partition("=")
                    stage.env[name] = Arg(value, f"line {line}: ENV")
        elif instruction == "ENTRYPOINT":
            form = _exec_form(rest)
            stage.entrypoint = (form if form is not None else rest, line)
            stage.cmd = None  # Docker resets CMD when ENTRYPOINT is set
            stage.vllm_image = False
        elif instruction == "CMD":
            form = _exec_form(rest)
            stage.cmd = (form if form is not None else rest, line)
        elif instruction in ("COPY", "ADD"):
            words = [w for w in (_exec_form(rest) or rest.split()) if not w.startswith("--")]
            if len(words) >= 2 and not any(w.startswith("--from") for w in rest.split()):
                *sources, dest = [_docker_vars(w, args) for w in words]
                for src in sources:
                    target = dest + PurePosixPath(src).name if dest.endswith("/") or len(sources) > 1 else dest
                    stage.copies[str(PurePosixPath(target))] = src
    if not stages:
        return [], problems
    stage = stages[-1]  # `docker build` builds the last stage
    entry = stage.entrypoint
    cmd = stage.cmd
    if entry is None and stage.vllm_image:
        entry = (["vllm", "serve"], stage.line)
    argv: list[str] | None
    line = max([x[1] for x in (entry, cmd) if x is not None], default=stage.line)
    script: str | None = None
    if entry is not None and isinstance(entry[0], str):
        script = entry[0]  # shell-form ENTRYPOINT: CMD is ignored
    elif entry is None and cmd is not None and isinstance(cmd[0], str):
        script = cmd[0]
    if script is not None:
        argv = ["/bin/sh", "-c", script]
    else:
        argv = list(entry[0] if entry else []) + list(cmd[0] if cmd and isinstance(cmd[0], list) else [])
        if entry is not None and cmd is not None and isinstance(cmd[0], str):
            argv += ["/bin/sh", "-c", cmd[0]]
    env = dict(stage.env)
    invocations = argv_invocations(argv, ctx, env=env, line=line, origin=f"line {line}", anchor=f":{line}", problems=problems)
    context_dir = ctx.path.parent

    def in_image(name: str) -> Path | None:
        path = str(PurePosixPath(name))
        if path in stage.copies:
            return context_dir / stage.copies[path]
        return None

    for inv in invocations:
        inv.config_reader = config_from_fs(ctx, context_dir, in_image)
    apply_facts(invocations, ctx)
    return [deployment(inv, ctx, "dockerfile") for inv in invocations], problems


