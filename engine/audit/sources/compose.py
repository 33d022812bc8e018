"""docker compose files: each service whose image is vLLM's
(``vllm/vllm-openai``, ``lmcache/vllm-openai``, ...) or whose command runs
vLLM is a launch, placed at the service's key.

As compose reads a file: anchors and merge keys (``<<: *gpu``); the file's
own interpolation, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
``${VAR:?err}``, ``${VAR:+alt}`` and ``$$``, from the ``.env`` file beside
it (a variable neither sets is not known: with a default, the default);
``command`` and ``entrypoint`` as a list or a string (split into words as
compose-go splits them, with mattn/go-shellwords, never run through a shell); ``environment`` as a map or a list, with
``env_file`` files; ``extends`` of a service in the same file. An image of
vLLM without an ``entrypoint`` runs ``vllm serve`` with ``command`` as its
arguments. Profiles do not matter: a service in any profile is a launch.
An Akash SDL has compose's ``services`` but runs them as Kubernetes does: it
is read by akash.py.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.markers import has_unresolved, show, unresolved
from ...core.options import Arg, ConfigFile
from ...core.errors import InputError, Problem
from .context import Ctx
from .deployment import Deployment, SourceFile
from .akash import looks_like_sdl, sdl_file
from .companions import companion_text, shown as companion_name
from .dockerfile import BuiltImage, DockerWords, built_image
from .launch import apply_facts, config_from_fs, deployment, platform_of_runtime, refuse
from .release import ReleaseHint, from_image
from .shell import argv_invocations
from .images import VLLM_IMAGE, env_server, env_server_note, presumed_note, presumed_server, vllm_arguments
from .yamlread import YamlError, load

__all__ = ["compose_file", "is_compose_name", "looks_like_compose"]

_NAMES = re.compile(r"(docker-)?compose(\.[^/]*)?\.ya?ml")
_INTERPOLATION = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_ROLE = re.compile(r"(?:^|[-_.])(prefill|decode|prefiller|decoder|leader|worker)(?:$|[-_.])", re.I)


def is_compose_name(name: str) -> bool:
    return bool(_NAMES.fullmatch(name.lower()))


def looks_like_compose(value: Any) -> bool:
    """A top-level `services` mapping of services, some of which give an
    image, a build, a command or the service they `extends` (an override
    file, merged over another with `-f`, may give a service its environment alone)."""
    services = value.get("services") if isinstance(value, dict) else None
    return isinstance(services, dict) and bool(services) and all(isinstance(s, dict) for s in services.values()) \
        and any("image" in s or "build" in s or "command" in s or "extends" in s for s in services.values())


def compose_file(ctx: Ctx) -> SourceFile:
    try:
        value, lines = load(ctx.text)
    except YamlError as exc:
        hint = "this looks like an unrendered template" if "{{" in ctx.text else None
        return SourceFile(ctx.display, None, problems=(Problem("input.parse", f"invalid YAML in `{ctx.display}`"
                                                                + (f" at line {exc.line}" if exc.line else "")
                                                                + f": {exc.message}", hint=hint, file=ctx.display,
                                                                line=exc.line),))
    if looks_like_sdl(value):  # (compose's `services`, run as Akash's provider runs them)
        return sdl_file(ctx, value, lines)
    if not looks_like_compose(value):
        return SourceFile(ctx.display, None, skipped="not a docker compose file (no services with an image, "
                                                     "build, command or extends)")
    problems: list[Problem] = []
    variables, chain = _dotenv(ctx)
    out: list[Deployment] = []
    services: dict[str, Any] = value["services"]
    for name, service in services.items():
        service = _extended(name, services)
        if not isinstance(service, dict):
            continue
        line = lines.get(f"/services/{_escape(name)}")
        found = _service(ctx, name, service, variables, chain, line, problems)
        out += found
    return SourceFile(ctx.display, "compose", tuple(out), tuple(problems))


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _extended(name: str, services: Mapping[str, Any], depth: int = 0) -> Any:
    """A service with what it `extends` from another service of this file under it."""
    service = services.get(name)
    if not isinstance(service, dict) or "extends" not in service or depth > 8:
        return service
    extends = service["extends"]
    base_name = extends if isinstance(extends, str) else extends.get("service") if isinstance(extends, dict) else None
    if not isinstance(base_name, str) or (isinstance(extends, dict) and extends.get("file")) or base_name == name:
        return service
    base = _extended(base_name, services, depth + 1)
    if not isinstance(base, dict):
        return service
    merged = {**base, **{k: v for k, v in service.items() if k != "extends"}}
    if isinstance(base.get("environment"), dict) and isinstance(service.get("environment"), dict):
        merged["environment"] = {**base["environment"], **service["environment"]}
    return merged


def _dotenv(ctx: Ctx) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables of the `.env` file beside the compose file, when there is one to read."""
    if not ctx.fs:
        return {}, ()
    try:
        found = config_from_fs(ctx, ctx.path.parent)(".env")
    except InputError:
        return {}, ()
    return _env_lines(found.text, {}), (found.shown,)


def _env_lines(text: str, outer: Mapping[str, str]) -> dict[str, str]:
    """`.env` format: NAME=value lines, `export` allowed, quotes, `#` comments; values interpolated."""
    out: dict[str, str] = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, eq, value = line.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
            continue
        value = value.strip()
        if value[:1] in ("'", '"') and value.rfind(value[0]) > 0:
            quote = value[0]
            value = value[1:value.rfind(quote)]
            if quote == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
                value = _interpolate(value, {**outer, **out})
        else:
            value = value.split(" #", 1)[0].rstrip()
            value = _interpolate(value, {**outer, **out})
        out[name] = value
    return out


def _interpolate(text: Any, variables: Mapping[str, str]) -> Any:
    """Compose's interpolation of a string; a variable not set anywhere the audit can see is unknown."""
    if not isinstance(text, str) or "$" not in text:
        return text

    def sub(match: re.Match) -> str:
        whole = match.group(0)
        if whole == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        op, word = match.group(2), match.group(3) or ""
        value = variables.get(name)
        empty = value is None or (op is not None and op.startswith(":") and value == "")
        if op is None:
            return value if value is not None else unresolved(whole)
        if op.endswith("-"):
            return _interpolate(word, variables) if value is None or empty else value  # (empty when None)
        if op.endswith("+"):
            return "" if empty else _interpolate(word, variables)
        return unresolved(whole) if value is None or empty else value  # ?: compose refuses to start without it

    return _INTERPOLATION.sub(sub, text)


def _unset_defaults(command: Any, variables: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(NAME, as written, DEFAULT) for each whole word of a `command` string
    that is `${NAME:-DEFAULT}` (or `${NAME-DEFAULT}`) of a name no .env sets:
    the environment compose runs in may give it any words."""
    out = []
    for word in command.split() if isinstance(command, str) else ():
        match = _INTERPOLATION.fullmatch(word)
        if match and match.group(1) and (match.group(2) or "").endswith("-") and match.group(1) not in variables:
            out.append((match.group(1), word, match.group(3) or ""))
    return out


def _words(value: Any, variables: Mapping[str, str], words: DockerWords, line: int) -> list[str] | None:
    """`command`/`entrypoint`: a list, or a string split into words as compose does (never by a shell)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [str(_interpolate(v, variables)) if not isinstance(v, str) else _interpolate(v, variables) for v in value]
    return _shellwords(str(_interpolate(value, variables)), words, line)


def _shellwords(text: str, words: DockerWords, line: int) -> list[str]:
    """A command string split into words as compose does (compose-go's
    ShellCommand: mattn/go-shellwords, without substitution). Unlike a
    shell, a backslash outside single quotes escapes whatever follows it,
    inside double quotes too (``\\t`` and ``\\n`` are a tab and a newline):
    a folded ``VLLM_USE_V1=1 \\ python3 -m ...`` reaches bash without it.
    ``;``, ``&``, ``|``, ``<`` and ``>`` outside quotes end the command
    (a digit run before ``>`` with it); what follows is dropped. An
    unknown value (a marker) is one piece of its word."""
    out: list[str] = []
    current: list[str] = []
    started = single = double = escaped = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\x00":  # an unknown value, whole
            end = text.find("\x00", i + 1)
            end = n - 1 if end < 0 else end
            current.append(text[i:end + 1])
            started, escaped, i = True, False, end + 1
            continue
        if escaped:
            current.append({"t": "\t", "n": "\n"}.get(c, c))
            started, escaped = True, False
        elif c == "\\" and not single:
            escaped = True
        elif c in " \t\r\n" and not (single or double):
            if started:
                out.append(words.bounded("".join(current), line))
                current, started = [], False
        elif c == '"' and not single or c == "'" and not double:
            single, double, started = single ^ (c == "'"), double ^ (c == '"'), True
        elif c in ";&|<>" and not (single or double):
            if c == ">" and current and "".join(current).isdigit():
                current, started = [], False
            break
        else:
            current.append(c)
            started = True
        i += 1
    if started:
        out.append(words.bounded("".join(current), line))
    return out


def _unreadable(exc: InputError, target: Path) -> str:
    """Why an env_file cannot be read, in words of its own (the reader's are a `--config` file's)."""
    code = exc.problems[0].code
    if code == "source.config_missing":
        return f"no such regular file: `{os.path.normpath(target)}`"
    return "it is outside the audited paths" if code == "source.config_outside" else exc.problems[0].message


def _environment(ctx: Ctx, service: Mapping[str, Any], variables: Mapping[str, str], where: str, line: int | None,
                 chain: list[str], problems: list[Problem], unknown: list[str]) -> dict[str, Arg]:
    """The service's environment: its env_files' variables, then its own.
    ``problems``: a required env_file that cannot be read; ``unknown``: the
    env_files whose path names a variable set where compose runs
    (`${APPS_DIR}/x.env`), which are not read."""
    env: dict[str, Arg] = {}
    files = service.get("env_file")
    for item in ([files] if isinstance(files, (str, dict)) else files if isinstance(files, list) else []):
        path = item.get("path") if isinstance(item, dict) else item
        required = item.get("required", True) if isinstance(item, dict) else True
        if not isinstance(path, str):
            continue
        path = _interpolate(path, variables)
        if has_unresolved(path):
            unknown.append(path)
            continue
        try:
            found = config_from_fs(ctx, ctx.path.parent)(path)
        except InputError as exc:
            if required:
                problems.append(ctx.problem("source.env_file", f"{where}: the env_file `{path}` cannot be read "
                                            f"({_unreadable(exc, ctx.path.parent / path)}); docker compose refuses to "
                                            "start the service", line=line))
            continue
        chain.append(found.shown)
        env.update((k, Arg(v, f"{where}: env_file {path}")) for k, v in _env_lines(found.text, variables).items())
    given = service.get("environment")
    if isinstance(given, dict):
        items = [(str(k), v) for k, v in given.items()]
    elif isinstance(given, list):
        items = [(str(i).partition("=")[0], str(i).partition("=")[2] if "=" in str(i) else None) for i in given]
    else:
        items = []
    for name, value in items:
        if value is None:  # passed on from where compose runs: not known
            env[name] = Arg(unresolved(f"${name}"), f"{where}: environment")
        else:
            text = value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
            env[name] = Arg(_interpolate(text, variables), f"{where}: environment")
    return env


def _mounted(ctx: Ctx, service: Mapping[str, Any], variables: Mapping[str, str], where: str):
    """A reader of `--config FILE` inside the container: through a bind mount of the service
    (`./conf:/etc/vllm`), to a file beside the compose file."""
    mounts: list[tuple[str, str]] = []   # (target in the container, source on the host)
    for volume in service.get("volumes") or [] if isinstance(service.get("volumes"), list) else []:
        if isinstance(volume, str):
            parts = _interpolate(volume, variables).split(":")
            if len(parts) >= 2 and parts[0].startswith((".", "/", "~")):
                mounts.append((posixpath.normpath(parts[1]), parts[0]))
        elif isinstance(volume, dict) and volume.get("type") == "bind" and isinstance(volume.get("source"), str) \
                and isinstance(volume.get("target"), str):
            mounts.append((posixpath.normpath(_interpolate(volume["target"], variables)),
                           _interpolate(volume["source"], variables)))
    disk = config_from_fs(ctx, ctx.path.parent)

    def read(name: str) -> ConfigFile:
        path = posixpath.normpath(name)
        best = max((m for m in mounts if path == m[0] or path.startswith(m[0].rstrip("/") + "/")),
                   key=lambda m: len(m[0]), default=None)
        if best is None or has_unresolved(best[1]) or best[1].startswith("~"):
            raise refuse(ctx.problem("source.config_unresolved", f"{where}: `--config {name}` is in no bind mount of "
                                     "the service that the audit can read"))
        return disk(posixpath.join(best[1], path[len(best[0]):].lstrip("/")) if path != best[0] else best[1])

    return read


def _built(ctx: Ctx, build: Any, variables: Mapping[str, str]) -> tuple[BuiltImage, str] | str:
    """The image a service's ``build`` (a context directory, or its
    ``context``, ``dockerfile`` and ``args``) makes, and how the report names its
    Dockerfile; where the Dockerfile is not one the audit reads (not in
    the audited paths, a value not known, a remote context), why."""
    context: Any = build.get("context", ".") if isinstance(build, Mapping) else build
    name: Any = build.get("dockerfile", "Dockerfile") if isinstance(build, Mapping) else "Dockerfile"
    if not isinstance(context, str) or not isinstance(name, str):
        return "its build names no Dockerfile the audit can read"
    context, name = str(_interpolate(context, variables)), str(_interpolate(name, variables))
    if has_unresolved(context) or has_unresolved(name):
        return f"the Dockerfile it builds, `{show(posixpath.join(context, name))}`, is not known from this file"
    if "://" in context or context.startswith("git@"):
        return f"it builds its image from `{show(context)}`, which the audit does not fetch"
    path = ctx.path.parent / context / name
    text = companion_text(ctx, path)
    found = built_image(Ctx(path, companion_name(ctx, path), ctx.roots, ctx.limits, text),
                        _build_args(build, variables)) if text is not None else None
    if found is None:
        return f"the Dockerfile it builds, `{show(posixpath.join(context, name))}`, is not in the audited paths" \
            if text is None else f"the Dockerfile it builds, `{show(posixpath.join(context, name))}`, has no stage"
    return found, companion_name(ctx, path)


def _build_args(build: Any, variables: Mapping[str, str]) -> dict[str, str]:
    """The values a service's ``build.args`` (a mapping, or a list of
    ``NAME=value``) gives the Dockerfile's arguments, interpolated; one
    given no value (``NAME``, ``NAME:``) takes the environment's where
    compose runs: a value not known."""
    given = build.get("args") if isinstance(build, Mapping) else None
    pairs: list[tuple[Any, Any]] = list(given.items()) if isinstance(given, Mapping) else \
        [(item.partition("=")[0], item.partition("=")[2] if "=" in item else None)
         for item in given if isinstance(item, str)] if isinstance(given, list) else []
    return {str(key): unresolved(f"${key}", "is a build argument compose takes from the environment it runs in")
            if value is None else str(_interpolate(value, variables)) if isinstance(value, str)
            else str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in pairs}


def _service(ctx: Ctx, name: str, service: Mapping[str, Any], variables: Mapping[str, str], dotenv: tuple[str, ...],
             line: int | None, problems: list[Problem]) -> list[Deployment]:
    words = DockerWords(ctx, problems)
    where = f"service {name}"
    image = _interpolate(service.get("image"), variables) if isinstance(service.get("image"), str) else ""
    entrypoint = _words(service.get("entrypoint"), variables, words, line or 1)
    command = _words(service.get("command"), variables, words, line or 1) or []
    vllm_image = bool(image) and not has_unresolved(image) and bool(VLLM_IMAGE.search(image.split("@")[0]))
    # The image the service builds (`build:`), where its Dockerfile is one the audit reads: the service
    # runs in it (its release, its ENV); FROM vLLM's release image with its ENTRYPOINT, it runs `vllm
    # serve` with the service's command.
    building = _built(ctx, service.get("build"), variables) if not vllm_image and "build" in service else None
    built = building if isinstance(building, tuple) else None
    built_file = built[1] if built is not None else None
    vllm_image = vllm_image or (built is not None and built[0].runs_vllm_serve)
    chain = list(dotenv) + ([built_file] if built_file else [])
    unknown_env: list[str] = []
    unreadable_env: list[Problem] = []  # (the service's own, where it runs vLLM: one that does not is no finding)
    env = _environment(ctx, service, variables, where, line, chain, unreadable_env, unknown_env)
    if built is not None:
        env = {**built[0].env, **env}  # the image's ENV, which the service's environment overrides
    known = not entrypoint and not vllm_image and bool(image) and not has_unresolved(image)
    presumed = known and presumed_server(image, command)
    # An image that starts vLLM's server from its environment, given no command (vllm/vllm-tpu).
    server = env_server(image, command, {k: None if has_unresolved(v.text) else v.text for k, v in env.items()}) \
        if known else None
    if entrypoint:
        argv = entrypoint + command
    elif vllm_image or presumed:
        argv = ["vllm", "serve"] + command
        if command[:1] == ["serve"]:
            problems.append(ctx.problem("source.serve_twice", f"{where}: the vllm/vllm-openai image already runs "
                                        "`vllm serve`; `serve` in its command is taken as the model", line=line))
    elif server is not None:
        argv = ["sh", "-c", server.script]
    else:
        argv = command
    reader = _mounted(ctx, service, variables, where)
    found = argv_invocations(argv, ctx, env=env, line=line, origin=where, anchor=f"#services/{name}", problems=problems,
                             read_file=reader)
    if entrypoint and not found and vllm_arguments(image, command):
        # (vllm-otel's `entrypoint: [/opt/vllm-plugins/vllm_entrypoint.sh]` in its vLLM image, given vLLM's options)
        shown = ", ".join(f"`{a.split('=', 1)[0]}`" for a in command if a.startswith("--"))
        ctx.notes.append(ctx.problem(
            "source.unrecognized", f"{where}: the entrypoint `{show(' '.join(entrypoint))}` is given only arguments, each "
            f"an option of vLLM's server ({shown}), but what it runs is not read: not read as a launch", line=line,
            hint="audit the entrypoint's script too, or write the service's command as `vllm serve ...`"))
    container = service.get("container_name") if isinstance(service.get("container_name"), str) else name
    labels = service.get("labels")
    role = None
    if isinstance(labels, dict):
        role = next((str(v) for k, v in labels.items() if str(k) == "role" or str(k).endswith(("/role", ".role"))), None)
    if role is None:
        match = _ROLE.search(name) or _ROLE.search(str(container))
        role = match.group(1).lower() if match else None
    for number, inv in enumerate(found, 1):
        inv.name, inv.container, inv.role, inv.chain = name, str(container), role, tuple(chain)
        inv.image = image or None
        inv.platform = platform_of_runtime(service.get("runtime"), f"{where}: runtime")
        inv.problems += unreadable_env
        if built is not None and built[0].release is not None:
            # A tag of its own names no release: the Dockerfile's pin or base image does.
            release = built[0].release
            inv.image = built[0].base
            inv.release = inv.release or ReleaseHint(release.version, f"{release.origin} in {built_file}, which the "
                                                                      "service builds")
        if isinstance(building, str) and inv.release is None:  # (a tag the service gives its build names no release)
            inv.release = ReleaseHint(None, f"{where} builds the image it runs, but {building}")
        inv.release = inv.release or (from_image(image) if image else None)
        inv.config_reader = reader
        if presumed:
            inv.notes.append(presumed_note(ctx, image, line))
        if server is not None:
            inv.notes.append(env_server_note(ctx, image, server, line))
        inv.notes += [ctx.problem("source.unresolved_arguments", f"{where}: the env_file `{show(path)}` is not known "
                                  "from this file (its path names what is set where compose runs): the variables it "
                                  "sets are not read", line=line) for path in unknown_env]
        inv.notes += [ctx.problem(  # (as the shell reader says it of `${VAR:-}`: compose takes the environment's first)
            "source.unresolved_arguments", f"{where}: the command also takes `{raw}`, which the .env does not set: its "
            f"default ({f'`{default}`' if default else 'nothing'}) is read, and where the environment sets `{name}` it "
            "may hold other options", line=line) for name, raw, default in _unset_defaults(service.get("command"), variables)]
        if len(found) > 1:
            inv.anchor = f"#services/{name}/{number}"
    apply_facts(found, ctx)
    return [deployment(inv, ctx, "compose") for inv in found]
