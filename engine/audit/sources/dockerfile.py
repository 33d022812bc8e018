"""Dockerfiles: the container command of the final stage (ENTRYPOINT and
CMD, with ENV). An image built FROM ``vllm/vllm-openai`` inherits its
``ENTRYPOINT ["vllm", "serve"]``.

Here-documents follow BuildKit's rules: in RUN, COPY and ADD a word that
starts with ``<<`` (``<<-`` strips leading tabs) outside quotes opens one,
several may open on one line and their bodies follow in order; ``<<<`` is
no here-document, nor is ``<<EOF`` inside quotes; a quoted delimiter keeps
the body as written, else ARG and ENV values are substituted in it.

A ``--config`` path inside the image is found in a file the Dockerfile
makes: ``COPY <<EOF /app/cfg.yaml``, a RUN script that writes it
(``cat > cfg.yaml <<EOF``), or a COPY from the build context (and between
stages, ``COPY --from``), relative paths read from the WORKDIR. RUN scripts
are read for that and for ``pip install vllm==X.Y.Z`` pins; a launch in a
RUN script runs at build time and is not a deployment.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import NamedTuple

from ...core.markers import has_unresolved, unresolved
from ...core.options import Arg, ConfigFile
from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment
from .detect import mentions_vllm
from .launch import apply_facts, config_from_fs, deployment, refuse
from .release import ReleaseHint, from_image
from .shell import argv_invocations, run_script
from .images import VLLM_IMAGE

__all__ = ["dockerfile", "built_image", "BuiltImage"]

_HEREDOC = re.compile(r"([0-9]*)<<(-?)([^<]*)")   # BuildKit's: no `<` after the `<<` (a here-string has one)
_DIRECTIVE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(\S+)\s*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Heredoc(NamedTuple):
    name: str
    quoted: bool     # the body is kept as written
    strip: bool      # <<-: leading tabs removed
    body: str
    line: int        # the body's first line
    word: str        # the word that opened it


class _Instruction(NamedTuple):
    line: int
    name: str        # upper case
    rest: str
    heredocs: tuple[_Heredoc, ...]


def _instructions(text: str, problems: list[Problem], ctx: Ctx) -> Iterator[_Instruction]:
    """The instructions, with continuations joined, comments removed and
    here-document bodies read."""
    lines = text.split("\n")
    escape = "\\"
    for raw in lines:  # parser directives come first, before any other line
        match = _DIRECTIVE.fullmatch(raw.strip())
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
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
            if nxt.lstrip().startswith("#") or not nxt.strip():
                parts.append(escape)  # a comment or an empty line inside a continuation is dropped; it goes on
                continue
            parts.append(nxt)
        joined = " ".join(p for p in parts if p != escape).strip()
        instruction, _, rest = joined.partition(" ")
        name = instruction.upper()
        heredocs: list[_Heredoc] = []
        if name in ("RUN", "COPY", "ADD"):
            for word in _raw_words(rest, escape):
                match = _HEREDOC.fullmatch(word)
                if not match or not match.group(3):
                    continue
                delimiter = match.group(3)
                quoted = any(q in delimiter for q in "'\"")
                delimiter = delimiter.replace("'", "").replace('"', "")
                strip = match.group(2) == "-"
                body_start = i
                while i < len(lines) and (lines[i].lstrip("\t") if strip else lines[i]) != delimiter:
                    i += 1
                if i >= len(lines):
                    problems.append(ctx.problem("source.dockerfile", f"the here-document `{delimiter}` opened at line "
                                                f"{start} is not closed", line=start))
                body = lines[body_start:i]
                if strip:
                    body = [b.lstrip("\t") for b in body]
                heredocs.append(_Heredoc(delimiter, quoted, strip, "\n".join(body) + ("\n" if body else ""),
                                         body_start + 1, word))
                i += 1
        yield _Instruction(start, name, rest.strip(), tuple(heredocs))


def _raw_words(text: str, escape: str) -> list[str]:
    """Words as written (quotes kept), separated by blanks outside quotes."""
    words: list[str] = []
    start = None
    quote = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = None
            elif c == escape and quote == '"':
                i += 1
        elif c in " \t":
            if start is not None:
                words.append(text[start:i])
                start = None
        else:
            if start is None:
                start = i
            if c in "'\"":
                quote = c
            elif c == escape:
                i += 1
        i += 1
    if start is not None:
        words.append(text[start:])
    return words


class DockerWords:
    """Docker's own word splitting and substitution (ENV, ARG, FROM, COPY,
    WORKDIR): blanks separate words, quotes group, ``$VAR``, ``${VAR}``,
    ``${VAR:-word}`` and ``${VAR:+word}`` are substituted outside single
    quotes, an unset variable is empty (with ``scope`` None nothing is
    substituted: compose's command strings). Each word is bounded."""

    def __init__(self, ctx: Ctx, problems: list[Problem], escape: str = "\\"):
        self.ctx, self.problems, self.escape = ctx, problems, escape
        self.limited = False
        self.length = 0  # of the word being made

    def split(self, text: str, scope: Mapping[str, str] | None, line: int) -> list[str]:
        words: list[str] = []
        current: list[str] = []
        started = False
        i, n = 0, len(text)
        esc = self.escape
        outer, self.length = self.length, 0  # a ${VAR:-word}'s word is split inside the word being made
        while i < n:
            c = text[i]
            if c in " \t\n":
                if started:
                    words.append(self.bounded("".join(current), line))
                    current, started = [], False
                    self.length = 0
                i += 1
                continue
            started = True
            if c == "'":
                end = text.find("'", i + 1)
                end = n if end < 0 else end
                current.append(text[i + 1:end])
                i = end + 1
            elif c == '"':
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == esc and i + 1 < n and text[i + 1] in ('"', "$", esc):
                        current.append(text[i + 1])
                        i += 2
                    elif text[i] == "$" and scope is not None:
                        i = self.substitute(text, i, scope, current, line)
                    else:  # a run of plain characters (at least the one here)
                        j = i + 1
                        while j < n and text[j] not in ('"', "$", esc):
                            j += 1
                        current.append(text[i:j])
                        i = j
                i += 1
            elif c == esc:
                current.append(text[i + 1:i + 2])
                i += 2
            elif c == "$" and scope is not None:
                i = self.substitute(text, i, scope, current, line)
            else:
                j = i + 1
                while j < n and text[j] not in " \t\n'\"$" and text[j] != esc:
                    j += 1
                current.append(text[i:j])
                i = j
        if started:
            words.append(self.bounded("".join(current), line))
        self.length = outer
        return words

    def substitute(self, text: str, i: int, scope: Mapping[str, str], out: list[str], line: int, depth: int = 0) -> int:
        """A substitution at ``text[i]`` ($...) appended to ``out``; where the text goes on."""
        start = len(out)
        end = self._substitute(text, i, scope, out, line, depth)
        added = sum(len(piece) for piece in out[start:])
        self.length += added
        if self.length > self.ctx.limits.max_variable_length:
            # Past the bound: what is substituted from here on is not kept (a word of a thousand
            # copies of a long value would otherwise be built whole).
            del out[start:]
            out.append(self.too_long(line))
        return end

    def _substitute(self, text: str, i: int, scope: Mapping[str, str], out: list[str], line: int, depth: int) -> int:
        n = len(text)
        if i + 1 < n and text[i + 1] == "{":
            end, level = i + 2, 1
            while end < n and level:
                level += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            body = text[i + 2:end - 1]
            match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])(.*))?$", body, re.S)
            if not match or depth > 20:
                out.append(unresolved("${" + body[:40] + "}"))
                return end
            value = scope.get(match.group(1))
            op, word = match.group(2), match.group(3) or ""
            empty = not value if op and op.startswith(":") else value is None
            if op is None:
                out.append(value or "")
            elif op.endswith("-"):
                out.append(" ".join(self.split(word, scope, line)) if empty else value or "")
            else:  # +: the word when set
                out.append("" if empty else " ".join(self.split(word, scope, line)))
            return end
        match = _NAME.match(text, i + 1)
        if match:
            out.append(scope.get(match.group(), ""))
            return match.end()
        out.append("$")
        return i + 1

    def bounded(self, word: str, line: int) -> str:
        """A word past the bound is unknown; a NAME=value word keeps its name."""
        if len(word) <= self.ctx.limits.max_variable_length + 256:
            return word
        head, eq, _ = word.partition("=")
        return (head + "=" if eq and _NAME.fullmatch(head) else "") + self.too_long(line)

    def too_long(self, line: int) -> str:
        if not self.limited:
            self.limited = True
            limit = self.ctx.limits.max_variable_length
            self.problems.append(self.ctx.problem("source.limit", f"a value grows past {limit} characters at line {line}; "
                                                  "it is read as unknown from there", line=line))
        return unresolved("(a value too long to expand)")


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


class _Made(NamedTuple):
    """A file inside the image: a copy from the build context, or text the Dockerfile gives."""
    context: str | None     # the build-context path it was copied from
    text: str | None        # or its text (a here-document, a file a RUN script wrote)
    shown: str


@dataclass
class _Stage:
    line: int
    name: str | None
    image: str
    env: dict[str, Arg] = field(default_factory=dict)
    entrypoint: tuple[list[str] | str, int] | None = None   # exec form list, or shell form text; and its line
    cmd: tuple[list[str] | str, int] | None = None
    files: dict[str, _Made] = field(default_factory=dict)    # container path -> where its content comes from
    vllm_image: bool = False
    workdir: str = "/"
    pins: list[ReleaseHint] = field(default_factory=list)
    base: ReleaseHint | None = None                          # the release its base image names

    def path(self, name: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, name))


# The arguments `docker run IMAGE ARGS` or a pod's `args` give an image whose Dockerfile has no CMD.
_CONTAINER_ARGUMENTS = unresolved("the container's arguments", "are given where the image runs (`docker run IMAGE "
                                  "ARGS`, a pod's `args`): the Dockerfile has no CMD")


def dockerfile(ctx: Ctx) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    stage = _final_stage(ctx, problems)
    if stage is None:
        return [], problems
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
        elif entry is not None and cmd is None:
            # An ENTRYPOINT without CMD runs with the arguments the image is given where it runs: the model
            # and options of `ENTRYPOINT ["vllm", "serve"]`, the "$@" of a `bash -c` one (kthena's, Intel's).
            argv.append(_CONTAINER_ARGUMENTS)
    reader = _in_image(ctx, stage)
    invocations = argv_invocations(argv, ctx, env=dict(stage.env), line=line, origin=f"line {line}", anchor=f":{line}",
                                   problems=problems, read_file=reader)
    release = stage.pins[-1] if stage.pins else stage.base
    for inv in invocations:
        # (any number of words: never the model alone)
        inv.argv = [arg._replace(many=True) if arg.text == _CONTAINER_ARGUMENTS else arg for arg in inv.argv]
        inv.config_reader = reader
        inv.release = inv.release or release  # a pin in CMD's own script, else the stage's
        inv.image = stage.image
    apply_facts(invocations, ctx)
    return [deployment(inv, ctx, "dockerfile") for inv in invocations], problems


class BuiltImage(NamedTuple):
    """What an image a Dockerfile builds runs, as far as a compose file that
    builds it needs: whether its entrypoint is vLLM's release image's own
    (``vllm serve``, inherited), its environment, and the release it holds."""

    base: str                     # the final stage's FROM image
    runs_vllm_serve: bool         # FROM vLLM's release image, ENTRYPOINT not set again
    env: dict[str, Arg]
    release: ReleaseHint | None   # a pip pin of the stage, else the base image's tag
    copied: frozenset[str] = frozenset()  # the build-context paths its files come from (`.` for the whole context)


def built_image(ctx: Ctx, build_args: Mapping[str, str] = {}) -> BuiltImage | None:
    """The image ``ctx`` (a Dockerfile) builds, or None when it has no stage;
    ``build_args``: the values ``docker build --build-arg`` gives the
    arguments it declares (a compose service's ``build.args``)."""
    stage = _final_stage(ctx, [], build_args)
    if stage is None:
        return None
    copied = frozenset(posixpath.normpath(made.context.lstrip("/") or ".") for made in stage.files.values()
                       if made.context is not None)
    return BuiltImage(stage.image, stage.vllm_image and stage.entrypoint is None, dict(stage.env),
                      stage.pins[-1] if stage.pins else stage.base, copied)


def _final_stage(ctx: Ctx, problems: list[Problem], build_args: Mapping[str, str] = {}) -> _Stage | None:
    """The stage `docker build` builds (the last), as its instructions make it;
    an argument ``build_args`` gives takes that value over its default."""
    stages: list[_Stage] = []
    named: dict[str, _Stage] = {}  # by name (AS NAME), for FROM NAME and COPY --from=NAME
    args: dict[str, str] = {}
    # What an instruction's `$NAME` reads: the arguments, then the stage's ENV over them. Kept as ARG,
    # ENV and FROM change it, not made again for each instruction, so that reading stays linear.
    scope: dict[str, str] = {}
    words = DockerWords(ctx, problems)
    for ins in _instructions(ctx.text, problems, ctx):
        line, instruction, rest = ins.line, ins.name, ins.rest
        if instruction == "ARG":
            for word in words.split(rest, scope, line):
                name, eq, value = word.partition("=")
                if name in build_args:  # (a declared argument only: docker ignores the others)
                    args[name] = build_args[name]
                elif eq and value:
                    args[name] = value
                elif name and (eq or name not in args):
                    # No default, or an empty one (`ARG MODEL_NAME=`): `docker build --build-arg` gives it, or it is empty.
                    args[name] = unresolved("$" + name, "is a build argument the Dockerfile gives no default")
                else:
                    continue
                if not stages or name not in stages[-1].env:
                    scope[name] = args[name]
            continue
        if instruction == "FROM":
            found = [w for w in words.split(rest, args, line) if not w.startswith("--")]
            image = found[0] if found else ""
            alias = found[2] if len(found) >= 3 and found[1].lower() == "as" else None
            parent = named.get(image)
            stage = _Stage(line, alias, image)
            if parent is not None:  # FROM an earlier stage inherits its configuration
                stage.env, stage.files, stage.pins = dict(parent.env), dict(parent.files), list(parent.pins)
                stage.entrypoint, stage.cmd, stage.vllm_image = parent.entrypoint, parent.cmd, parent.vllm_image
                stage.workdir, stage.base = parent.workdir, parent.base
            else:
                stage.vllm_image = bool(VLLM_IMAGE.search(image.split("@")[0]))  # its ENTRYPOINT ["vllm", "serve"]
                stage.base = from_image(image) if image and image.lower() != "scratch" else None
            stages.append(stage)
            if alias:
                named[alias] = stage
            scope = {**args, **{k: v.text for k, v in stage.env.items()}}
            continue
        if not stages:
            continue
        stage = stages[-1]
        if instruction == "ENV":
            found = words.split(rest, scope, line)
            if found and "=" not in found[0]:  # the legacy form: ENV NAME value...
                stage.env[found[0]] = Arg(" ".join(found[1:]), f"line {line}: ENV")
                scope[found[0]] = stage.env[found[0]].text
            else:
                for word in found:
                    name, _, value = word.partition("=")
                    stage.env[name] = Arg(value, f"line {line}: ENV")
                    scope[name] = value
        elif instruction == "WORKDIR":
            found = words.split(rest, scope, line)
            if found:
                stage.workdir = stage.path(found[0])
        elif instruction == "ENTRYPOINT":
            form = _exec_form(rest)
            stage.entrypoint = (form if form is not None else rest, line)
            stage.cmd = None  # Docker resets CMD when ENTRYPOINT is set
            stage.vllm_image = False
        elif instruction == "CMD":
            form = _exec_form(rest)
            stage.cmd = (form if form is not None else rest, line)
        elif instruction in ("COPY", "ADD"):
            _copy(ctx, stage, named, ins, words, scope)
        elif instruction == "RUN":
            _run(ctx, stage, ins, scope, problems)
    return stages[-1] if stages else None  # `docker build` builds the last stage


def _copy(ctx: Ctx, stage: _Stage, named: Mapping[str, _Stage], ins: _Instruction, words: DockerWords,
          scope: Mapping[str, str]) -> None:
    """COPY/ADD: which image paths it fills, from the build context, another stage, or a here-document."""
    heredoc_words = {h.word for h in ins.heredocs}
    raw = [w for w in _raw_words(ins.rest, words.escape) if w not in heredoc_words]
    form = _exec_form(ins.rest)
    items = form if form is not None else words.split(" ".join(raw), scope, ins.line)
    options = [w for w in items if w.startswith("--")]
    operands = [w for w in items if not w.startswith("--")]
    if not operands:
        return
    *sources, dest = operands
    from_stage = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
    many = len(sources) + len(ins.heredocs) > 1 or dest.endswith("/")
    for heredoc in ins.heredocs:
        text = heredoc.body if heredoc.quoted else _substituted(heredoc.body, scope, words, heredoc.line)
        target = stage.path(posixpath.join(dest, heredoc.name) if many else dest)
        stage.files[target] = _Made(None, text, f"{heredoc.name} (here-document at line {heredoc.line})")
    for src in sources:
        target = stage.path(posixpath.join(dest, PurePosixPath(src).name) if many else dest)
        if from_stage is not None:
            other = named.get(from_stage)
            other = other if other is not stage else None
            source = other.path(src) if other is not None else ""
            made = other.files.get(source) if other is not None else None
            # A folder's files go into the destination folder, as Docker copies a folder's content.
            folder = {path[len(source.rstrip("/")) + 1:]: made for path, made in other.files.items()
                      if path.startswith(source.rstrip("/") + "/")} if other is not None and made is None else {}
            if made is not None:
                stage.files[target] = made
            elif folder:
                for relative, copy in folder.items():
                    stage.files[stage.path(posixpath.join(dest, relative))] = copy
            else:
                stage.files.pop(target, None)
        else:
            stage.files[target] = _Made(src, None, src)


def _substituted(body: str, scope: Mapping[str, str], words: DockerWords, line: int) -> str:
    """An unquoted here-document's body with ARG and ENV values substituted (its words and blanks kept)."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        j = body.find("$", i)
        if j < 0:
            out.append(body[i:])
            break
        out.append(body[i:j])
        i = words.substitute(body, j, scope, out, line)
    return words.bounded("".join(out), line)


# BuildKit's options of RUN, before its command: `RUN --mount=type=secret,id=T --network=none ...`.
_RUN_OPTION = re.compile(r"\s*--(?:mount|network|security|device)=(?:\"[^\"]*\"|'[^']*'|\S)+")


def _run(ctx: Ctx, stage: _Stage, ins: _Instruction, scope: Mapping[str, str], problems: list[Problem]) -> None:
    """A RUN script, read for the files it writes into the image and its `pip install vllm==X` pins."""
    command = ins.rest
    while (option := _RUN_OPTION.match(command)) is not None:  # the shell never sees them
        command = command[option.end():]
    command = command.lstrip()
    if _exec_form(command) is not None:
        return
    if ins.heredocs and not " ".join(w for w in _raw_words(command, "\\") if w not in {h.word for h in ins.heredocs}).strip():
        script = "".join(h.body for h in ins.heredocs)  # RUN <<EOF: the body is the script
    else:
        script = command + "\n" + "".join(h.body + h.name + "\n" for h in ins.heredocs)
    # The variables whose names the script holds, which are all the shell reader can read (`${!REF}` is a
    # value not known): handing each RUN the whole scope would make reading quadratic.
    env = {name: Arg(scope[name], f"line {ins.line}") for name in dict.fromkeys(_NAME.findall(script)) if name in scope}
    own: list[Problem] = []
    found, run = run_script(script, ctx, env=env, first_line=ins.line, origin=lambda _l: f"line {ins.line}",
                            anchor=lambda _l: f":{ins.line}", problems=own, fixed=True)
    del found  # a launch in RUN runs at build time
    # A script the shell cannot read is a problem of a Dockerfile that names vLLM, as of a shell script;
    # another's (a Jinja-templated Dockerfile's `{%- if ... -%}`) is none of this audit's.
    problems += [p for p in own if p.code != "source.shell_syntax" or mentions_vllm(ctx.text)]
    stage.pins += [pin.hint for pin in run.pins if pin.container == 0]
    for path, versions in run.files.items():
        script_file = versions[-1][1]
        stage.files[stage.path(path)] = _Made(None, script_file.text, f"{path} (written at line {ins.line})")


def _in_image(ctx: Ctx, stage: _Stage):
    """A reader of `--config FILE` inside the image: a file the Dockerfile
    makes, else one it copies from the build context."""
    disk = config_from_fs(ctx, ctx.path.parent)

    def read(name: str) -> ConfigFile:
        made = stage.files.get(stage.path(name))
        if made is None:
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` names a path inside the image "
                                     "that no COPY instruction of this Dockerfile provides"))
        if made.text is not None:
            if has_unresolved(made.text):
                raise refuse(ctx.problem("source.unresolved", f"`--config {name}`: the file the Dockerfile makes holds "
                                         "values it does not set"))
            return ConfigFile(made.text, made.shown)
        assert made.context is not None  # a file made without a text is a copy from the build context
        return disk(made.context.lstrip("/"))  # a COPY source is inside the build context, even written as /x

    return read
