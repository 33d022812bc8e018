"""Stage 0 of an audit, sources: find the vLLM deployments a file describes,
and turn each into a deployment document.

Formats (``Deployment.format``):

- ``document``: this project's deployment document (JSON or YAML; a YAML
  file may hold several, separated by ``---``).
- ``vllm-config``: a ``vllm serve --config FILE`` YAML file.
- ``shell``: ``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server``
  / ``docker run vllm/vllm-openai`` command lines in a shell script.
- ``dockerfile``: the container command of the final stage (ENTRYPOINT and
  CMD, with ENV); an image built FROM ``vllm/vllm-openai`` inherits its
  ``ENTRYPOINT ["vllm", "serve"]``.
- ``kubernetes``: the containers of any object in a manifest (Pods,
  Deployments, StatefulSets, Jobs, LeaderWorkerSets, ``helm template``
  output, ...), from ``command``/``args``, ``sh -c`` scripts or a vLLM
  image's entrypoint, with the container's ``env``.

Nothing is executed and nothing named in a file is imported: command lines are
split with :mod:`shlex` after a textual expansion of the variables the file
itself sets. vLLM's own argument handling is reproduced where it changes what
the HMA decision sees (vllm/utils/argparse_utils.py, FlexibleArgumentParser):
``--config`` files inserted before the command line (the command line wins),
``_`` read as ``-`` in option names, dotted options
(``--kv-transfer-config.kv_role kv_both``) merged and placed last, the last
occurrence of an option wins, and a ``false`` in a config file becomes
``--no-<key>`` only when that option exists.

What a command line cannot say (the model's layer kinds, the platform) may be
given by a directive comment, ``# hma-policy: {model: {layer_kinds: [...]}}``,
which applies to the deployments below it in the file, or on a Kubernetes
object by the annotation ``hma-policy.dev/facts``. Only ``model``,
``platform`` and ``env`` may be given this way.

A value the decision needs that the file does not hold (an environment
variable set elsewhere, ``$(...)``, a ``valueFrom``, a ``--config`` file that
cannot be read) makes the deployment an input error with code
``source.*``: the audit never guesses.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path, PurePosixPath
from typing import Any, Final, cast

from ...core.input import parse_text
from ...core.errors import InputError, Problem, suggest
from ...core.limits import DEFAULT_SOURCE_LIMITS, SourceLimits
from ...core.schema import load_schema, pointer

__all__ = ["Deployment", "SourceFile", "SourceLimits", "read_source", "source_format", "FORMATS"]

FORMATS = ("document", "vllm-config", "shell", "dockerfile", "kubernetes")


@dataclass(frozen=True, slots=True)
class Deployment:
    """One vLLM deployment found in a file, as a deployment document.

    ``document`` is None when ``problems`` prevent building it. ``problems``
    are input-stage problems (the deployment is decided as an input error);
    ``notes`` are things a reader should know that do not stop the decision.
    ``origins`` maps each top-level document field to where its value came
    from (``line 12: --kv-transfer-config``).
    """

    file: str
    format: str
    anchor: str = ""          # appended to ``file`` to make ``id``: ":12" (a line) or "#Deployment/x/vllm"
    line: int | None = None
    name: str | None = None
    document: dict[str, Any] | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[Problem, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()
    resource: tuple[tuple[str, str], ...] = ()   # a Kubernetes object reference (apiVersion, kind, name, namespace)

    def __init__(self, file: str, format: str, anchor: str = "", line: int | None = None, name: str | None = None,
                 document: dict[str, Any] | None = None, problems: tuple[Problem, ...] = (),
                 notes: tuple[Problem, ...] = (), origins: tuple[tuple[str, str], ...] = (),
                 resource: tuple[tuple[str, str], ...] = ()) -> None:
        # The dataclass's own __init__, as a frozen class's must, sets each
        # field through object.__setattr__; compiled, this one stores them
        # directly, in a twentieth of the time (an audit makes two a file).
        if not _COMPILED:
            _set_fields(self, zip(_DEPLOYMENT_FIELDS, (file, format, anchor, line, name, document, problems, notes,
                                                       origins, resource)))
            return
        self.file, self.format, self.anchor, self.line, self.name = file, format, anchor, line, name  # type: ignore[misc]
        self.document, self.problems, self.notes = document, problems, notes  # type: ignore[misc]
        self.origins, self.resource = origins, resource  # type: ignore[misc]

    @property
    def id(self) -> str:
        return self.file + self.anchor

    def __reduce__(self) -> tuple:
        # Pickled as its fields and rebuilt by __init__: four times faster to
        # load than the default for slotted classes (audit workers send many).
        return (type(self), (self.file, self.format, self.anchor, self.line, self.name, self.document, self.problems,
                             self.notes, self.origins, self.resource))

    def without_document(self) -> "Deployment":
        """This deployment with ``document`` None (an audit that need not keep it)."""
        return Deployment(self.file, self.format, self.anchor, self.line, self.name, None, self.problems, self.notes,
                          self.origins, self.resource)


# Deployment's fields, in order (its pickled form; a compiled class has no __slots__ to read them from).
_DEPLOYMENT_FIELDS = tuple(f.name for f in dataclass_fields(Deployment))


def _compiled() -> bool:
    """Whether this module runs compiled (mypyc): its functions then have no code object."""
    return not hasattr(_compiled, "__code__")


# Compiled, the frozen classes here set their fields directly in __init__
# (a compiled class's fields are stored past its __setattr__); as Python,
# that would raise FrozenInstanceError, and they set them as a dataclass does.
_COMPILED: Final = _compiled()


def _set_fields(instance: Any, fields: Iterable[tuple[str, Any]]) -> None:
    for name, value in fields:
        object.__setattr__(instance, name, value)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """What reading one file gave: its format, deployments and file-level problems.

    A file-level problem (unreadable, binary, broken YAML) means no deployment
    could be identified in (part of) the file. ``skipped`` gives the reason
    a file was not examined further.
    """

    file: str
    format: str | None
    deployments: tuple[Deployment, ...] = ()
    problems: tuple[Problem, ...] = ()
    skipped: str | None = None

    def __init__(self, file: str, format: str | None, deployments: tuple[Deployment, ...] = (),
                 problems: tuple[Problem, ...] = (), skipped: str | None = None) -> None:
        if not _COMPILED:  # see Deployment.__init__
            _set_fields(self, zip(("file", "format", "deployments", "problems", "skipped"),
                                  (file, format, deployments, problems, skipped)))
            return
        self.file, self.format, self.deployments = file, format, deployments  # type: ignore[misc]
        self.problems, self.skipped = problems, skipped  # type: ignore[misc]


# -- file formats -----------------------------------------------------------

_SHELLS = {"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"}


def _suffix(name: str) -> str:
    """PurePath.suffix of a file name, without building a path object."""
    at = name.rfind(".")
    return name[at:] if 0 < at < len(name) - 1 else ""


def _basename(path: str | Path) -> str:
    """os.path.basename, for a POSIX path given as a string without its
    function call (Python code, a third of source_format's time)."""
    if isinstance(path, str) and os.sep == "/" and not os.altsep:
        return path[path.rfind("/") + 1:]
    return os.path.basename(path)


def source_format(path: str | Path, head: bytes = b"") -> str | None:
    """The reader for ``path`` by its name (or shebang): dockerfile, shell,
    json, yaml; None when it is not a deployment source."""
    name = _basename(path).lower()
    if name in ("dockerfile", "containerfile") or name.startswith(("dockerfile.", "containerfile.")) \
            or name.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    suffix = _suffix(name)
    if suffix in (".sh", ".bash", ".ksh", ".zsh"):
        return "shell"
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if not suffix and head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].decode("latin-1").split()
        if words:
            interpreter = words[0].rsplit("/", 1)[-1]
            if interpreter == "env" and len(words) > 1:
                interpreter = words[1]
            if interpreter in _SHELLS:
                return "shell"
    return None


# -- the deployment document's vocabulary -------------------------------------

_SCHEMA = load_schema("deployment")
_DOC_FIELDS = frozenset(_SCHEMA["properties"])
# The fields that describe a deployment (a `name` alone describes nothing: package.json has one).
_DECISION_FIELDS = _DOC_FIELDS - {"name", "description", "metadata", "$schema"}
# The environment variables the decision reads (declared in the schema). Only
# these are copied from scripts and manifests: others (tokens, keys) never
# enter a document, a report or a log.
_ENV_NAMES = frozenset(_SCHEMA["properties"]["env"]["properties"])
_RUNTIME_FACTS = ("model", "platform", "env")

# vLLM options that feed the decision: option string -> (document field, kind).
# `--hisparse-config` follows the document's `hisparse-config` spelling.
_VALUE_OPTIONS = {
    "--kv-transfer-config": ("kv_transfer_config", "json"),
    "--kv-events-config": ("kv_events_config", "json"),
    "--speculative-config": ("speculative_config", "json"),
    "-sc": ("speculative_config", "json"),
    "--hisparse-config": ("hisparse_config", "json"),
    "--kv-offloading-size": ("kv_offloading_size", "number"),
    "--kv-offloading-backend": ("kv_offloading_backend", "str"),
    "--model": ("model", "str"),
}
# argparse.BooleanOptionalAction options: flag -> (field, value).
_FLAG_OPTIONS = {
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", True),
    "--no-disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", False),
}
_BOOLEAN_OPTIONAL_KEYS = frozenset({"disable-hybrid-kv-cache-manager"})
_KNOWN_OPTIONS = tuple(_VALUE_OPTIONS) + tuple(_FLAG_OPTIONS)
# Real vLLM options that a did-you-mean would mistake for a misspelt one above.
_VLLM_NEIGHBOURS = frozenset({"--ec-transfer-config", "--kv-cache-dtype", "--kv-cache-memory-bytes",
                              "--kv-sharing-fast-prefill", "--kernel-config", "--profiler-config",
                              "--reasoning-config", "--attention-config", "--compilation-config"})
_API_SERVER_MODULES = frozenset({"vllm.entrypoints.openai.api_server"})
_VLLM_IMAGE = re.compile(r"(^|/)vllm-openai(?:[:@]|$)")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*hma-policy:[ \t]*(.*?)[ \t]*$", re.M)
_FACTS_ANNOTATION = "hma-policy.dev/facts"
# An unresolved shell or Kubernetes reference, kept in the text so that an
# option whose value holds one is reported instead of decided.
_UNRESOLVED = re.compile("\x00([^\x00]*)\x00")


def _unresolved(name: str) -> str:
    return f"\x00{name}\x00"


def _show(text: str) -> str:
    """A value for a message: unresolved references shown as written."""
    text = _UNRESOLVED.sub(lambda m: m.group(1), text)
    return text if len(text) <= 120 else text[:117] + "..."


# -- the context of one file ---------------------------------------------------

@dataclass
class _Ctx:
    source: str | Path  # the file read (a path object only where one is needed)
    display: str
    roots: tuple[Path, ...]
    limits: SourceLimits
    text: str = ""
    directives: list[tuple[int, Any, Problem | None]] = field(default_factory=list)

    def __init__(self, source: str | Path, display: str, roots: tuple[Path, ...], limits: SourceLimits,
                 text: str = "", directives: list[tuple[int, Any, Problem | None]] | None = None) -> None:
        # Written out: compiled, a dataclass __init__ with a default factory
        # is the generated Python one (one context a file).
        self.source, self.display, self.roots, self.limits, self.text = source, display, roots, limits, text
        self.directives = [] if directives is None else directives

    @property
    def path(self) -> Path:
        return self.source if isinstance(self.source, Path) else Path(self.source)

    def config_roots(self) -> tuple[Path, ...]:
        """Where a --config file may be read from: the roots given, else the
        file's own directory (resolved only here: most files name no config)."""
        return self.roots or (self.path.resolve().parent,)

    def problem(self, code: str, message: str, *, line: int | None = None, path: str = "", hint: str | None = None) -> Problem:
        return Problem(code, message, path, hint, file=self.display, line=line)

    def facts_for(self, line: int | None) -> tuple[Any, Problem | None, int | None]:
        """The directive above ``line`` (or the first one when the line is unknown)."""
        chosen = None
        for item in self.directives:
            if line is None or item[0] <= line:
                chosen = item
            if line is None:
                break
        return (chosen[1], chosen[2], chosen[0]) if chosen else (None, None, None)


def _read_directives(ctx: _Ctx) -> None:
    if "hma-policy:" not in ctx.text:  # what every directive holds: skips the scan of most files
        return
    for match in _DIRECTIVE.finditer(ctx.text):
        line = ctx.text.count("\n", 0, match.start()) + 1
        facts, problem = _parse_facts(match.group(1), ctx, line, "an hma-policy directive")
        ctx.directives.append((line, facts, problem))


def _parse_facts(text: str, ctx: _Ctx, line: int | None, what: str) -> tuple[Any, Problem | None]:
    try:
        value = parse_text(text, source=what, fmt="yaml") if text else None
    except InputError as exc:
        return None, ctx.problem("source.directive", f"{what} is not valid YAML: {exc.problems[0].message}", line=line)
    if not isinstance(value, dict) or not value:
        return None, ctx.problem("source.directive", f"{what} must be a mapping of {', '.join(_RUNTIME_FACTS)}", line=line,
                                 hint="for example: # hma-policy: {model: {layer_kinds: [sliding_window, full_attention]}}")
    unknown = [k for k in value if k not in _RUNTIME_FACTS]
    if unknown:
        return None, ctx.problem("source.directive", f"{what} may only give {', '.join(_RUNTIME_FACTS)}; "
                                 f"`{unknown[0]}` must come from the deployment itself", line=line,
                                 hint=suggest(str(unknown[0]), _RUNTIME_FACTS))
    return value, None


# -- reading files -------------------------------------------------------------

def _regular(path: str | Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # let the read report why it cannot be read


# O_NONBLOCK: opening a FIFO that replaced a file after it was listed
# returns at once (its reader is then refused below) instead of waiting for a writer.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
# What _read_bytes answers for a file that is not a regular file (a FIFO or a
# device would block or never end).
_NOT_REGULAR = Problem("source.not_regular", "not a regular file")


class _NotRegular(Exception):
    pass


def _read_fd(fd: int, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of a regular file (one more than the
    limit, so that the caller can tell an oversized file): the file's size at
    once, then until the end. With the descriptor, not a file object: an
    audit reads thousands of small files, and the buffered object costs more
    than the read. The descriptor, not the path, is checked to be a regular
    file, so nothing swapped in after a check can make the read block."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise _NotRegular
    size = status.st_size
    want = min(size, max_bytes) + 1 if size > 0 else 1 << 16
    chunk = os.read(fd, want)
    if 0 < len(chunk) == size < want:
        # The whole file, at the size it was found to have: one read call a
        # file, not a second one that would only find its end.
        return chunk
    chunks, total = [chunk], len(chunk)
    while chunk and total <= max_bytes:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 2 and not chunks[1] else b"".join(chunks)


def _read_bytes(path: str | Path, display: str, max_bytes: int) -> tuple[bytes | None, Problem | None]:
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            raw = _read_fd(fd, max_bytes)
        finally:
            os.close(fd)
    except _NotRegular:
        return None, _NOT_REGULAR
    except OSError as exc:
        return None, Problem("input.read", f"cannot read `{display}`: {exc.strerror or exc}", file=display)
    if len(raw) > max_bytes:
        return None, Problem("input.limit", f"`{display}` is larger than {max_bytes} bytes", file=display)
    return raw, None


def _decode(raw: bytes, display: str) -> tuple[str | None, Problem | None]:
    if b"\x00" in raw[:8192]:
        return None, Problem("source.binary", f"`{display}` is a binary file, not text", file=display)
    try:
        # utf-8-sig, with the byte-order mark taken off here: that codec is
        # written in Python, the plain one is not (error offsets are the same).
        return (raw[3:] if raw[:3] == b"\xef\xbb\xbf" else raw).decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, Problem("input.encoding", f"`{display}` is not UTF-8 text (byte {exc.start})", file=display)


def read_source(path: str | Path, *, display: str | None = None, roots: tuple[Path, ...] = (),
                limits: SourceLimits = DEFAULT_SOURCE_LIMITS) -> SourceFile:
    """Read one file and find its deployments. Never raises for any content.

    ``roots`` are the directories a ``--config`` file may be read from
    (resolved, symlinks included); by default the file's own directory.
    """
    path = path if isinstance(path, Path) else Path(path)
    return _read_source(path, display if display is not None else str(path), roots, limits)


def _read_source(path: str | Path, display: str, roots: tuple[Path, ...], limits: SourceLimits, *,
                 regular: bool = False) -> SourceFile:
    """:func:`read_source`; ``regular``: the caller knows the file is a
    regular file (an audit's directory listing tells), so it is not asked
    again. An audit passes ``path`` as a string: a path object per file
    costs more than the file's read."""
    not_a_source = "not a deployment source (not JSON, YAML, a shell script or a Dockerfile)"
    fmt = source_format(path)
    if fmt is None and _suffix(_basename(path)):  # decided by the name: a model's weights are never read
        return SourceFile(display, None, skipped=not_a_source)
    if not regular and not _regular(path):  # a FIFO or a device would block or never end
        return SourceFile(display, None, skipped="not a regular file")
    raw, problem = _read_bytes(path, display, limits.max_file_bytes if fmt else 256)
    if fmt is None and problem is not _NOT_REGULAR:
        fmt = source_format(path, raw or b"")
        if fmt is None:
            return SourceFile(display, None, skipped=not_a_source)
        raw, problem = _read_bytes(path, display, limits.max_file_bytes)
    if problem is _NOT_REGULAR:
        return SourceFile(display, None, skipped="not a regular file")
    if problem is not None:
        return SourceFile(display, None, problems=(problem,))
    text, problem = _decode(cast(bytes, raw), display)  # read: no problem
    if problem is not None:
        return SourceFile(display, fmt, problems=(problem,))
    ctx = _Ctx(path, display, roots, limits, cast(str, text))  # decoded: no problem
    _read_directives(ctx)
    if fmt == "shell":
        deployments, problems = _shell_file(ctx)
        found = SourceFile(display, "shell", tuple(deployments), tuple(problems))
    elif fmt == "dockerfile":
        deployments, problems = _dockerfile(ctx)
        found = SourceFile(display, "dockerfile", tuple(deployments), tuple(problems))
    else:
        found = _structured_file(ctx, cast(str, fmt))  # json or yaml: a format was found
    return _unique_ids(found)


def _unique_ids(found: SourceFile) -> SourceFile:
    """Two deployments on one line (`a && b`) get `/2`, `/3`, ... so every id is unique."""
    if len(found.deployments) < 2:
        return found
    seen: dict[str, int] = {}
    out = []
    for deployment in found.deployments:
        count = seen.get(deployment.anchor, 0) + 1
        seen[deployment.anchor] = count
        if count > 1:
            fields = {f: getattr(deployment, f) for f in _DEPLOYMENT_FIELDS}
            fields["anchor"] = f"{deployment.anchor}/{count}"
            deployment = Deployment(**fields)
        out.append(deployment)
    return SourceFile(found.file, found.format, tuple(out), found.problems, found.skipped)


# -- JSON and YAML files -------------------------------------------------------

def _yaml_chunks(text: str) -> list[tuple[int, str]]:
    """Split a YAML stream at its document markers: (first line, text) each.

    A line starting with `---` always starts a document (YAML forbids it
    inside any scalar), so the split is exact.
    """
    lines = text.split("\n")
    starts = [0] + [i for i, line in enumerate(lines) if re.match(r"---(?:[ \t]|$)", line) and i > 0]
    chunks = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        body = "\n".join(lines[start:end])
        chunks.append((start, body))
    # Directives (%YAML) and comments before the first marker belong to the first document.
    if len(chunks) > 1 and all(not l.strip() or l.lstrip().startswith(("#", "%")) for l in chunks[0][1].split("\n")):
        first = chunks.pop(0)
        chunks[0] = (first[0], first[1] + "\n" + chunks[0][1])
    return chunks


def _parse_problem(ctx: _Ctx, exc: InputError, offset: int = 0) -> Problem:
    """A parse error located in the file: the line of a document's error is
    shifted by the lines before the document (``offset``)."""
    first = exc.problems[0]
    hint = first.hint
    if "{{" in ctx.text and first.code == "input.parse":
        hint = "this looks like an unrendered Helm or Go template; audit the output of `helm template` instead"
    line = None
    match = re.search(r"at line (\d+)", first.message)
    message = first.message
    if match:
        line = int(match.group(1)) + offset
        message = message[:match.start(1)] + str(line) + message[match.end(1):]
    return Problem(first.code, message, first.path, hint, file=ctx.display, line=line)


def _structured_file(ctx: _Ctx, fmt: str) -> SourceFile:
    source = f"`{ctx.display}`"
    if fmt == "json":
        try:
            values = [(0, parse_text(ctx.text, source=source, fmt="json"))]
        except InputError as exc:
            if not _mentions_vllm(ctx.text):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not valid JSON "
                                                             f"({exc.problems[0].message})")
            return SourceFile(ctx.display, None, problems=(_parse_problem(ctx, exc),))
    else:
        chunks = _yaml_chunks(ctx.text)
        if len(chunks) > ctx.limits.max_yaml_documents:
            return SourceFile(ctx.display, None, problems=(ctx.problem(
                "input.limit", f"`{ctx.display}` holds more than {ctx.limits.max_yaml_documents} YAML documents"),))
        values = []
        problems = []
        for start, body in chunks:
            try:
                value = parse_text(body, source=source, fmt="yaml")
            except InputError as exc:
                problems.append(_parse_problem(ctx, exc, start))
                continue
            if value is not None:
                values.append((start, value))
        if problems:
            # A broken document hides what the file is: report the file, decide nothing from it. A
            # YAML file that never mentions vLLM (a CI workflow with `on:`) is skipped, not reported.
            if not _mentions_vllm(ctx.text):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not JSON-compatible YAML "
                                                             f"({problems[0].message})")
            return SourceFile(ctx.display, None, problems=tuple(problems))
    kinds = [_classify(value, single=len(values) == 1 and fmt == "yaml") for _, value in values]
    if "kubernetes" in kinds:
        deployments, problems = _kubernetes(ctx, [v for (s, v), k in zip(values, kinds) if k == "kubernetes"],
                                            [s for (s, v), k in zip(values, kinds) if k == "kubernetes"])
        return SourceFile(ctx.display, "kubernetes", tuple(deployments), tuple(problems))
    if kinds == ["vllm-config"]:
        return SourceFile(ctx.display, "vllm-config", (_vllm_config_file(ctx, values[0][1]),))
    documents = [(start, value) for (start, value), kind in zip(values, kinds) if kind == "document"]
    if not documents:
        return SourceFile(ctx.display, None, skipped="not a deployment document, vLLM config or Kubernetes manifest")
    out = []
    for index, (start, value) in enumerate(documents, 1):
        name = value.get("name") if isinstance(value.get("name"), str) else None
        anchor = f"#{index}" if len(values) > 1 else ""
        out.append(Deployment(ctx.display, "document", anchor, start + 1 if len(values) > 1 else None, name, value))
    return SourceFile(ctx.display, "document", tuple(out))


_VLLM_WORDS = re.compile(r"vllm|kv[-_](transfer|connector|offloading|role)|hybrid[-_]kv", re.I)


def _mentions_vllm(text: str) -> bool:
    return bool(_VLLM_WORDS.search(text))


def _classify(value: Any, *, single: bool) -> str | None:
    """document, vllm-config, kubernetes, or None (not a deployment)."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str):
        return "kubernetes"
    keys = {k.replace("-", "_") for k in value if isinstance(k, str)}
    unknown = keys - _DOC_FIELDS
    if isinstance(value.get("model"), dict):  # a document's model is an object of facts
        return "document"
    if single and isinstance(value.get("model"), str):  # vLLM's is the model's name
        return "vllm-config"
    if keys & _DECISION_FIELDS and not unknown:
        return "document"
    options = {"--" + k.replace("_", "-") for k in value if isinstance(k, str)}
    if single and options & set(_KNOWN_OPTIONS):
        return "vllm-config"
    # A misspelt document: keep it a document so that validation names the typo.
    if unknown and all(suggest(k, _DOC_FIELDS) for k in unknown):
        return "document"
    return None


# -- vLLM command lines ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Tok:
    text: str
    origin: str


@dataclass
class _Invocation:
    """A vLLM server command found in a file, before its options are read."""

    args: list[_Tok]            # vLLM's argv after the program (starting with "serve" for `vllm serve`)
    serve: bool
    line: int | None
    env: dict[str, tuple[str, str]]   # name -> (value, origin)
    anchor: str
    name: str | None = None
    resource: tuple[tuple[str, str], ...] = ()
    config_reader: Callable[[str, _Ctx], tuple[str | None, str, Problem | None]] | None = None
    facts: Any = None
    facts_origin: str = ""
    facts_problem: Problem | None = None
    # Alone, a config file is run as `vllm serve MODEL --config FILE`: the model may come from elsewhere.
    require_model: bool = True
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)


def _find_vllm(words: list[str]) -> tuple[int, bool] | None:
    """Where vLLM's own arguments start in a command's words, and whether
    they start with the `serve` subcommand."""
    for i, word in enumerate(words):
        base = word.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return i + 1, True
        if word == "-m" and i + 1 < len(words) and words[i + 1] in _API_SERVER_MODULES \
                and any(re.fullmatch(r"python[0-9.]*", w.rsplit("/", 1)[-1]) for w in words[:i]):
            return i + 2, False
    return None


_DOCKER_VALUE_OPTIONS = frozenset({"-v", "--volume", "-p", "--publish", "--name", "--network", "--gpus", "-w", "--workdir",
                                   "--mount", "--shm-size", "--ipc", "--runtime", "-u", "--user", "--env-file", "-l",
                                   "--label", "--device", "--platform", "--cpus", "--memory", "-m", "--hostname", "-h",
                                   "--restart", "--ulimit", "--log-driver", "--pull", "--entrypoint-args"})


def _docker_run(words: list[str]) -> tuple[int, dict[str, str | None]] | None:
    """`docker run ... vllm/vllm-openai[:tag] ARGS`: where the image's
    arguments start (the image's ENTRYPOINT is `vllm serve`), and its -e/--env."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in ("docker", "podman") and i + 1 < len(words) and words[i + 1] == "run":
            env: dict[str, str | None] = {}
            j = i + 2
            while j < len(words):
                w = words[j]
                if w == "--entrypoint" or w.startswith("--entrypoint="):
                    return None  # the image's own entrypoint is replaced: not known to be vLLM
                if w in ("-e", "--env") and j + 1 < len(words):
                    name, eq, value = words[j + 1].partition("=")
                    env[name] = value if eq else None
                    j += 2
                    continue
                if w.startswith("--env="):
                    name, eq, value = w[6:].partition("=")
                    env[name] = value if eq else None
                elif w in _DOCKER_VALUE_OPTIONS:
                    j += 1  # its value (a volume path may well contain `vllm-openai`) is not the image
                elif not w.startswith("-") and _VLLM_IMAGE.search(w):
                    return j + 1, env
                j += 1
    return None


def _config_from_fs(ctx: _Ctx, base: Path, in_image: Callable[[str], Path | None] | None = None):
    """A reader of `--config FILE` for a file on disk: a relative name is
    read relative to ``base`` (the file's directory); the file must be inside
    the audited roots (symlinks resolved) and within the size limit. For a
    Dockerfile, ``in_image`` maps a path inside the image to the build
    context through the COPY instructions."""

    def read(name: str, _ctx: _Ctx) -> tuple[str | None, str, Problem | None]:
        target = in_image(name) if in_image else None
        if target is None:
            if in_image is not None and name.startswith("/"):
                return None, name, _ctx.problem("source.config_unresolved", f"`--config {name}` names a path inside the "
                                                "image that no COPY instruction of this Dockerfile provides")
            target = Path(name) if os.path.isabs(name) else base / name
        shown = os.path.normpath(target)
        try:
            real = target.resolve(strict=True)
        except (OSError, RuntimeError):
            return None, shown, _ctx.problem("source.config_missing", f"the config file `{name}` does not exist "
                                             f"(looked for `{shown}`); vLLM fails to start without it")
        if not any(real == root or root in real.parents for root in _ctx.config_roots()):
            return None, shown, _ctx.problem("source.config_outside", f"the config file `{shown}` is outside the audited paths",
                                             hint="audit its directory too, or allow it with --config-root DIR")
        if not _regular(real):
            return None, shown, _ctx.problem("source.config_missing", f"the config file `{shown}` is not a regular file")
        raw, problem = _read_bytes(real, shown, _ctx.limits.max_config_bytes)
        if problem is _NOT_REGULAR:
            return None, shown, _ctx.problem("source.config_missing", f"the config file `{shown}` is not a regular file")
        if problem is not None:
            return None, shown, problem
        text, problem = _decode(cast(bytes, raw), shown)  # read: no problem
        return text, shown, problem

    return read


def _config_args(config: Any, origin: str, ctx: _Ctx, problems: list[Problem], notes: list[Problem]) -> list[_Tok]:
    """vLLM's load_config_file: a YAML mapping to command-line arguments."""
    if not isinstance(config, dict):
        problems.append(ctx.problem("source.config_shape", f"the config file {origin} must hold a mapping of vLLM options"))
        return []
    out: list[_Tok] = []
    for key, value in config.items():
        where = origin
        if not isinstance(key, str):  # vLLM would fail on "--" + key
            problems.append(ctx.problem("source.config_shape", f"the config file {origin} has a key that is not a string"))
            return []
        if key == "config":
            notes.append(ctx.problem("source.config_nested", f"{origin} names another config file; vLLM does not read it"))
        if isinstance(value, bool):
            if value:
                out.append(_Tok("--" + key, where))
            elif key in _BOOLEAN_OPTIONAL_KEYS:  # vLLM adds --no-KEY only when that option exists
                out.append(_Tok("--no-" + key, where))
            elif isinstance(key, str) and key.replace("_", "-") in _BOOLEAN_OPTIONAL_KEYS:
                # `--no-disable_hybrid_kv_cache_manager` is no option string: vLLM drops the key.
                notes.append(ctx.problem("source.config_false_dropped", f"{origin}: `{key}: false` is dropped by vLLM, "
                                         "which adds `--no-KEY` only for the dash spelling; the file states no preference",
                                         hint=f"write `{key.replace('_', '-')}: false` for an explicit enable"))
        elif isinstance(value, list):
            if value:
                out.append(_Tok("--" + key, where))
                out += [_Tok(_scalar_text(item), where) for item in value]
        elif isinstance(value, dict):
            out += [_Tok("--" + key, where), _Tok(json.dumps(value), where)]
        else:
            out += [_Tok("--" + key, where), _Tok(_scalar_text(value), where)]
    return out


def _scalar_text(value: Any) -> str:
    """Python's str(), as vLLM applies it to config values."""
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _human_int(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(text.strip())


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def _vllm_tokens(inv: _Invocation, ctx: _Ctx) -> tuple[list[_Tok], _Tok | None]:
    """vLLM's FlexibleArgumentParser.parse_args up to argparse: --model moved
    first, --config pulled in, `_` in option names read as `-`, dotted
    options merged into one JSON value placed last. Returns the tokens and the
    model tag."""
    args = list(inv.args)
    model: _Tok | None = None
    if inv.serve:
        rest = args[1:]
        for i, tok in enumerate(rest):
            if tok.text == "--model" or tok.text.startswith("--model="):
                if tok.text == "--model":
                    if i + 1 >= len(rest) or rest[i + 1].text.startswith("-"):
                        inv.problems.append(ctx.problem("source.missing_value", "`--model` has no value", line=inv.line))
                        break
                    model, rest = rest[i + 1], rest[:i] + rest[i + 2:]
                else:
                    model, rest = _Tok(tok.text[len("--model="):], tok.origin), rest[:i] + rest[i + 1:]
                break
        else:
            if rest and not rest[0].text.startswith("-"):
                model, rest = rest[0], rest[1:]
        args = rest
    texts = [t.text for t in args]
    if "--config" in texts:
        if texts.count("--config") > 1:
            inv.problems.append(ctx.problem("source.config_multiple", "more than one `--config` file is given; vLLM refuses this",
                                            line=inv.line))
        else:
            index = texts.index("--config")
            if index == len(args) - 1:
                inv.problems.append(ctx.problem("source.missing_value", "`--config` has no file; vLLM refuses this", line=inv.line))
                args = args[:index]
            else:
                config_tokens = _pull_config(inv, ctx, args[index + 1].text)
                config_model = next((config_tokens[i + 1] for i, t in enumerate(config_tokens[:-1]) if t.text == "--model"), None)
                if inv.serve and inv.require_model and model is None and config_model is None and not inv.problems:
                    inv.problems.append(ctx.problem("source.no_model", "no model is given, neither on the command line "
                                                    "nor in the config file; vLLM refuses this", line=inv.line))
                model = model or config_model
                # The config's arguments come first: the command line wins (cli > config > defaults).
                args = config_tokens + args[:index] + args[index + 2:]
    elif any(t.startswith("--config=") for t in texts):
        inv.notes.append(ctx.problem("source.config_ignored", "vLLM reads a config file only from `--config FILE`; "
                                     "`--config=FILE` is accepted and ignored", line=inv.line))
    # Option names: `_` is `-` between the leading `--` and the first `.`.
    normal: list[_Tok] = []
    for tok in args:
        text = tok.text
        if text.startswith("--"):
            key, eq, value = text.partition("=")
            head, dot, tail = key[2:].partition(".")
            text = "--" + head.replace("_", "-") + dot + tail + eq + value
        normal.append(_Tok(text, tok.origin))
    # Dotted options: --json-arg.key value, merged per option and appended last.
    out: list[_Tok] = []
    dotted: dict[str, tuple[dict[str, Any], str]] = {}
    skip = False
    for i, tok in enumerate(normal):
        if skip:
            skip = False
            continue
        text = tok.text
        if not (text.startswith("-") and "." in text):
            out.append(tok)
            continue
        key, eq, value = text.partition("=")
        if eq and "." not in key:
            out.append(tok)  # the `.` was only in the value
            continue
        if not eq:
            if i + 1 >= len(normal):
                inv.problems.append(ctx.problem("source.missing_value", f"`{_show(text)}` has no value", line=inv.line))
                continue
            value, skip = normal[i + 1].text, True
        if key.endswith("+"):
            key, value = key[:-1], json.dumps(value.split(","))
        option, *keys = key.split(".")
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            try:
                parsed = _human_int(value)
            except ValueError:
                parsed = value
        nested: Any = parsed
        for part in reversed(keys):
            nested = {part: nested}
        held = dotted.setdefault(option, ({}, tok.origin))
        _merge(held[0], nested)
    for option, (merged, origin) in dotted.items():
        out += [_Tok(option, origin), _Tok(json.dumps(merged), origin)]
    return out, model


def _pull_config(inv: _Invocation, ctx: _Ctx, name: str) -> list[_Tok]:
    if _UNRESOLVED.search(name):
        inv.problems.append(ctx.problem("source.unresolved", f"the `--config` file is `{_show(name)}`, which this file does not set",
                                        line=inv.line))
        return []
    if name.split(".")[-1] not in ("yaml", "yml"):
        inv.problems.append(ctx.problem("source.config_extension", f"`--config {name}`: vLLM reads only .yaml or .yml config files",
                                        line=inv.line))
        return []
    if inv.config_reader is None:
        inv.problems.append(ctx.problem("source.config_unresolved", f"`--config {name}` cannot be located from this file",
                                        line=inv.line))
        return []
    text, shown, problem = inv.config_reader(name, ctx)
    if problem is not None:
        inv.problems.append(Problem(problem.code, problem.message, problem.path, problem.hint, file=ctx.display, line=inv.line))
        return []
    try:
        config = parse_text(text or "", source=f"`{shown}`", fmt="yaml")
    except InputError as exc:
        first = exc.problems[0]
        inv.problems.append(ctx.problem(first.code, f"the config file {first.message.removeprefix('invalid YAML in ')}"
                                        if first.code == "input.parse" else first.message, line=inv.line))
        return []
    if config is None:
        config = {}
    return _config_args(config, f"`{shown}`", ctx, inv.problems, inv.notes)


def _looks_like_number(text: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d*)?|-\.\d+", text))


def _read_options(tokens: list[_Tok], inv: _Invocation, ctx: _Ctx) -> dict[str, tuple[Any, str, str]]:
    """argparse over the options the decision needs: the last occurrence wins."""
    found: dict[str, tuple[Any, str, str]] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        text = tok.text
        i += 1
        if not text.startswith("-") or text == "--":
            continue
        option, eq, value = text.partition("=")
        if option not in _VALUE_OPTIONS and option not in _FLAG_OPTIONS and option.startswith("--"):
            matches = [o for o in _KNOWN_OPTIONS if o.startswith(option) and o != option]
            if len(matches) == 1 and option.count("-") >= 3:
                inv.notes.append(ctx.problem("source.abbreviated_option", f"`{option}` is read as `{matches[0]}`, as argparse "
                                             "expands a unique prefix; spell the option out", line=inv.line))
                option = matches[0]
            else:
                if option not in _VLLM_NEIGHBOURS and _similar(option, _KNOWN_OPTIONS):
                    inv.problems.append(ctx.problem("source.unknown_option", f"vLLM rejects the unrecognized argument "
                                                    f"`{_show(option)}`", line=inv.line, hint=suggest(option, _KNOWN_OPTIONS)))
                continue
        if option in _FLAG_OPTIONS:
            if eq:
                inv.problems.append(ctx.problem("source.option_value", f"`{option}` takes no value; vLLM refuses `{_show(text)}`",
                                                line=inv.line))
                continue
            field_name, flag = _FLAG_OPTIONS[option]
            found[field_name] = (flag, tok.origin, option)
            continue
        if option not in _VALUE_OPTIONS:
            continue
        if not eq:
            if i >= len(tokens) or (tokens[i].text.startswith("-") and not _looks_like_number(tokens[i].text)):
                inv.problems.append(ctx.problem("source.missing_value", f"`{option}` has no value; vLLM refuses this", line=inv.line))
                continue
            value = tokens[i].text
            i += 1
        field_name, _ = _VALUE_OPTIONS[option]
        found[field_name] = (value, tok.origin, option)
    return found


def _similar(option: str, candidates: tuple[str, ...]) -> bool:
    """A near-certain misspelling (a did-you-mean at 0.9 similarity), as
    opposed to one of vLLM's many options that merely look alike."""
    import difflib

    return bool(difflib.get_close_matches(option, candidates, n=1, cutoff=0.9))


def _number(text: str) -> Any:
    """argparse's float() for --kv-offloading-size; the text stays when it is
    not a number, so that validation reports it."""
    try:
        return int(text) if re.fullmatch(r"[+-]?\d+", text.strip()) else float(text)
    except ValueError:
        return text


def _deployment(inv: _Invocation, ctx: _Ctx, fmt: str) -> Deployment:
    """The deployment document of one vLLM command, or its input problems."""
    tokens, model = _vllm_tokens(inv, ctx)
    options = _read_options(tokens, inv, ctx)
    document: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if inv.name:
        document["name"] = inv.name
    if model is None and "model" in options:  # `--model` from a config file, or for the api_server entry point
        value, origin, _ = options["model"]
        model = _Tok(value, origin)
    for field_name, (value, origin, option) in options.items():
        if field_name == "model":
            continue
        if isinstance(value, str) and _UNRESOLVED.search(value):
            refs = ", ".join(f"`{m}`" for m in dict.fromkeys(_UNRESOLVED.findall(value)))
            inv.problems.append(ctx.problem("source.unresolved", f"`{option}` takes its value from {refs}, "
                                            "which this file does not set", line=inv.line, path=pointer([field_name]),
                                            hint="the audit reads files and never runs them; write the value in the file"))
            continue
        document[field_name] = _number(value) if field_name == "kv_offloading_size" else value
        origins[field_name] = f"{origin}: {option}"
    if inv.facts_problem is not None:
        inv.problems.append(inv.facts_problem)
    facts = inv.facts if isinstance(inv.facts, dict) else {}
    for key in _RUNTIME_FACTS:
        if key in facts:
            document[key] = facts[key]
            origins[key] = inv.facts_origin
    if model is not None and not _UNRESOLVED.search(model.text):
        model_doc = dict(facts["model"]) if isinstance(facts.get("model"), dict) else {}
        if isinstance(model_doc, dict):
            model_doc["name"] = model.text  # the command's model wins over a directive's
            document["model"] = model_doc
            origins.setdefault("model", model.origin)
    env: dict[str, Any] = dict(facts["env"]) if isinstance(facts.get("env"), dict) else {}
    for name, (value, origin) in sorted(inv.env.items()):
        if name not in _ENV_NAMES:
            continue
        if _UNRESOLVED.search(value):
            inv.problems.append(ctx.problem("source.unresolved", f"the environment variable `{name}` takes its value from "
                                            f"`{_show(value)}`, which this file does not set", line=inv.line,
                                            path=pointer(["env", name])))
            continue
        env[name] = value
        origins["env"] = origin
    if env:
        document["env"] = env
    called = inv.name or (model.text if model is not None and not _UNRESOLVED.search(model.text) else None)
    return Deployment(ctx.display, fmt, inv.anchor, inv.line, called, None if inv.problems else document,
                      tuple(inv.problems), tuple(inv.notes), tuple(sorted(origins.items())), inv.resource)


# -- shell scripts -----------------------------------------------------------------

_SPECIAL_PARAMS = set("@*#?$!-0123456789")


class _ShellText:
    """A character scanner over shell text: yields logical lines (with their
    first line number) with comments and heredoc bodies removed and
    ``$VAR``/``${VAR}``/``${VAR:-word}`` expanded from ``variables``, re-quoted
    so that :func:`shlex.split` gives the words the shell would. Anything not
    known from the text (``$1``, ``$(...)``, an unset variable) becomes an
    unresolved marker. The caller updates ``variables`` between lines."""

    def __init__(self, text: str, variables: dict[str, str], limits: SourceLimits, first_line: int = 1):
        self.text = text
        self.vars = variables
        self.limits = limits
        self.first_line = first_line

    def lines(self) -> Iterator[tuple[int, str]]:
        text, n = self.text, len(self.text)
        i, line = 0, self.first_line
        out: list[str] = []
        start = line
        quote: str | None = None
        word_start = True
        heredocs: list[tuple[str, bool]] = []
        while i < n:
            c = text[i]
            if quote == "'":
                out.append(c)
                if c == "'":
                    quote = None
                elif c == "\n":
                    line += 1
                i += 1
                continue
            if c == "\\":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt == "\n":  # a line continuation
                    i += 2
                    line += 1
                    continue
                if quote == '"' and nxt not in ('"', "\\", "$", "`"):
                    out.append("\\\\" + nxt)  # a literal backslash inside double quotes
                elif quote == '"' and nxt in ("$", "`"):
                    out.append(nxt)
                else:
                    out.append(c + nxt)
                word_start = False
                i += 2
                continue
            if quote == '"':
                if c == '"':
                    quote = None
                    out.append(c)
                    i += 1
                elif c in "$`":
                    i = self._expand(i, out, quoted=True)
                else:
                    if c == "\n":
                        line += 1
                    out.append(c)
                    i += 1
                continue
            if c == "#" and word_start:
                while i < n and text[i] != "\n":
                    i += 1
                continue
            if c in "'\"":
                quote = c
                out.append(c)
                word_start = False
                i += 1
            elif c in "$`":
                i = self._expand(i, out, quoted=False)
                word_start = False
            elif c == "\n":
                yield start, "".join(out)
                out = []
                line += 1
                i += 1
                for delimiter, strip in heredocs:
                    while i < n:
                        end = text.find("\n", i)
                        end = n if end < 0 else end
                        body = text[i:end]
                        i = end + 1
                        line += 1
                        if (body.lstrip("\t") if strip else body) == delimiter:
                            break
                heredocs = []
                start = line
                word_start = True
            elif c == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
                j = i + 2
                strip = j < n and text[j] == "-"
                j += 1 if strip else 0
                while j < n and text[j] in " \t":
                    j += 1
                k = j
                while k < n and not text[k].isspace() and text[k] not in ";&|()<>":
                    k += 1
                delimiter = text[j:k].replace("'", "").replace('"', "").replace("\\", "")
                if delimiter:
                    heredocs.append((delimiter, strip))
                i = k
                word_start = True
            else:
                out.append(c)
                word_start = c in " \t;&|()<>"
                i += 1
        if out:
            yield start, "".join(out)

    # -- expansions -------------------------------------------------------------
    def _emit(self, value: str, out: list[str], quoted: bool) -> None:
        if len(value) > self.limits.max_variable_length:
            value = _unresolved("(a value too long to expand)")
        if quoted:
            out.append(value.replace("\\", "\\\\").replace('"', '\\"'))
            return
        words = value.split()
        if not words:
            if value:
                out.append(" ")
            return
        lead = " " if value[:1].isspace() else ""
        tail = " " if value[-1:].isspace() else ""
        out.append(lead + " ".join(shlex.quote(w) for w in words) + tail)

    def _matching(self, i: int, opening: str, closing: str) -> int:
        """The index after the `closing` that matches the `opening` at ``i``."""
        text, n = self.text, len(self.text)
        depth, quote = 0, None
        while i < n:
            c = text[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif c == "\\":
                i += 2
                continue
            elif c in "'\"":
                quote = c
            elif c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    def _expand(self, i: int, out: list[str], *, quoted: bool) -> int:
        text, n = self.text, len(self.text)
        if text[i] == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            out.append(_unresolved("`...`"))
            return end
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "(":
            end = self._matching(i + 1, "(", ")")
            out.append(_unresolved("$((...))" if text.startswith("$((", i) else "$(...)"))
            return end
        if nxt == "{":
            end = self._matching(i + 1, "{", "}")
            self._emit(self._parameter(text[i + 2:end - 1]), out, quoted)
            return end
        match = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i + 1:i + 257])
        if match:
            name = match.group(0)
            value = self.vars.get(name)
            self._emit(value if value is not None else _unresolved("$" + name), out, quoted)
            return i + 1 + len(name)
        if nxt and nxt in _SPECIAL_PARAMS:
            out.append(_unresolved("$" + nxt))
            return i + 2
        out.append("$")
        return i + 1

    def _parameter(self, body: str, depth: int = 0) -> str:
        """${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:=word}, ${NAME=word}."""
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])(.*))?", body, re.S)
        if not match:
            return _unresolved("${" + body[:40] + "}")
        name, op, word = match.groups()
        value = self.vars.get(name)
        if op is None:
            return value if value is not None else _unresolved("$" + name)
        empty = value is None or (op.startswith(":") and value == "")
        if not empty:
            return value  # type: ignore[return-value]
        if depth > 8:
            return _unresolved("$" + name)
        default = self._word(word, depth)
        if op.endswith("="):
            self.vars[name] = default
        return default

    def _word(self, word: str, depth: int) -> str:
        """A default word: its variables expanded, its quotes removed."""
        def sub(m: re.Match) -> str:
            if m.group(1) is not None:
                return self._parameter(m.group(1), depth + 1)
            value = self.vars.get(m.group(2))
            return value if value is not None else _unresolved("$" + m.group(2))
        expanded = re.sub(r"\$\{([^{}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, word)
        if len(expanded) >= 2 and expanded[0] == expanded[-1] and expanded[0] in "'\"":
            expanded = expanded[1:-1]
        return expanded


_SEPARATORS = {";", "&", "&&", "|", "||", ";;", "(", ")", "|&", ";&", "{", "}", "!"}


def _simple_commands(words: list[str]) -> Iterator[list[str]]:
    """Split a logical line's words at operators; drop redirections and their targets."""
    current: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word and all(ch in "();<>|&" for ch in word):
            if "<" in word or ">" in word:
                i += 2  # a redirection and its target
                continue
            if current:
                yield current
            current = []
        elif word in ("{", "}", "!") and not current:
            pass
        else:
            current.append(word)
        i += 1
    if current:
        yield current


def _shell_invocations(script: str, ctx: _Ctx, *, variables: dict[str, str], exported: dict[str, tuple[str, str]],
                       first_line: int, origin: Callable[[int], str], anchor: Callable[[int], str], depth: int = 0,
                       problems: list[Problem]) -> list[_Invocation]:
    """The vLLM commands of a shell script, in order."""
    found: list[_Invocation] = []
    allexport = False
    scanner = _ShellText(script, variables, ctx.limits, first_line)
    for line, text in scanner.lines():
        if not text.strip():
            continue
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        try:
            words = list(lexer)
        except ValueError as exc:
            problems.append(ctx.problem("source.shell_syntax", f"cannot split the command: {exc}", line=line))
            continue
        for command in _simple_commands(words):
            assignments = 0
            while assignments < len(command) and _ASSIGNMENT.match(command[assignments]):
                assignments += 1
            if assignments == len(command):
                for word in command:
                    name, value = _ASSIGNMENT.match(word).groups()  # type: ignore[union-attr]
                    variables[name] = value
                    if allexport or name in exported:
                        exported[name] = (value, origin(line))
                continue
            head = command[assignments]
            if head in ("export", "declare", "typeset", "readonly", "local") and assignments == 0:
                flags = [w for w in command[1:] if w.startswith("-")]
                exporting = head == "export" or any("x" in f for f in flags)
                for word in command[1:]:
                    if word.startswith("-"):
                        continue
                    match = _ASSIGNMENT.match(word)
                    if match:
                        variables[match.group(1)] = match.group(2)
                        if exporting or allexport:
                            exported[match.group(1)] = (match.group(2), origin(line))
                    elif exporting and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word) and word in variables:
                        exported[word] = (variables[word], origin(line))
                continue
            if head == "unset" and assignments == 0:
                for word in command[1:]:
                    variables.pop(word, None)
                    exported.pop(word, None)
                continue
            if head == "set" and assignments == 0:
                if "-a" in command[1:] or "allexport" in command[1:]:
                    allexport = True
                if "+a" in command[1:]:
                    allexport = False
                continue
            env = {name: (value, origin(line)) for name, (value, _) in exported.items()}
            located = _find_vllm(command)
            docker = None if located else _docker_run(command)
            if located is None and docker is None:
                nested = _nested_script(command)
                if nested is not None and depth < ctx.limits.max_script_depth:
                    inner_vars = dict(variables)
                    found += _shell_invocations(nested, ctx, variables=inner_vars, exported=dict(exported), first_line=line,
                                                origin=lambda _l, line=line: origin(line), anchor=lambda _l, line=line: anchor(line),  # type: ignore[misc]
                                                depth=depth + 1, problems=problems)
                continue
            for word in command[:located[0] if located else docker[0]]:  # type: ignore[index]
                match = _ASSIGNMENT.match(word)
                if match:
                    env[match.group(1)] = (match.group(2), origin(line))
            if located:
                start, serve = located
                args = command[start:]
            else:
                start, docker_env = docker  # type: ignore[misc]
                for name, value in docker_env.items():
                    env[name] = (value if value is not None else _unresolved("$" + name), origin(line))
                serve, args = True, ["serve"] + command[start:]
                if command[start:start + 1] == ["serve"]:
                    problems.append(ctx.problem("source.serve_twice", "the vllm/vllm-openai image already runs `vllm serve`; "
                                                "`serve` in its arguments is taken as the model", line=line))
            inv = _Invocation([_Tok(a, origin(line)) for a in args], serve, line, env, anchor(line))
            if any(re.search("\x00\\$[@*1-9]\x00", a) for a in args):
                inv.notes.append(ctx.problem("source.script_arguments", "the command also takes the script's own arguments "
                                             "(`$@`); only the options written here are read", line=line))
            found.append(inv)
            if len(found) > ctx.limits.max_commands:
                problems.append(ctx.problem("input.limit", f"more than {ctx.limits.max_commands} vLLM commands"))
                return found[: ctx.limits.max_commands]
    return found


def _nested_script(words: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (also `bash -lc`, `-ec`, ...)."""
    for i, word in enumerate(words[:-2]):
        if word.rsplit("/", 1)[-1] in _SHELLS and re.fullmatch(r"-[a-z]*c[a-z]*", words[i + 1]):
            return words[i + 2]
    return None


def _apply_facts(invocations: list[_Invocation], ctx: _Ctx) -> None:
    for inv in invocations:
        if inv.facts is None and inv.facts_problem is None:
            facts, problem, line = ctx.facts_for(inv.line)
            inv.facts, inv.facts_problem = facts, problem
            inv.facts_origin = f"line {line}: hma-policy directive" if line else ""


def _shell_file(ctx: _Ctx) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    base = ctx.path.parent
    invocations = _shell_invocations(ctx.text, ctx, variables={}, exported={}, first_line=1,
                                     origin=lambda line: f"line {line}", anchor=lambda line: f":{line}", problems=problems)
    for inv in invocations:
        inv.config_reader = _config_from_fs(ctx, base)
    _apply_facts(invocations, ctx)
    return [_deployment(inv, ctx, "shell") for inv in invocations], problems


# -- Dockerfiles ---------------------------------------------------------------------

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
    env: dict[str, tuple[str, str]] = field(default_factory=dict)
    entrypoint: tuple[list[str] | str, int] | None = None   # exec form list, or shell form text; and its line
    cmd: tuple[list[str] | str, int] | None = None
    copies: dict[str, str] = field(default_factory=dict)     # container path -> build-context path
    vllm_image: bool = False


def _dockerfile(ctx: _Ctx) -> tuple[list[Deployment], list[Problem]]:
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
            elif _VLLM_IMAGE.search(image.split("@")[0]):
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
                stage.env[words[0]] = (" ".join(words[1:]), f"line {line}: ENV")
            else:
                for word in words:
                    name, _, value = word.partition("=")
                    stage.env[name] = (value, f"line {line}: ENV")
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
    invocations = _argv_invocations(argv, ctx, env=env, line=line, origin=f"line {line}", anchor=f":{line}", problems=problems)
    context_dir = ctx.path.parent

    def in_image(name: str) -> Path | None:
        path = str(PurePosixPath(name))
        if path in stage.copies:
            return context_dir / stage.copies[path]
        return None

    for inv in invocations:
        inv.config_reader = _config_from_fs(ctx, context_dir, in_image)
    _apply_facts(invocations, ctx)
    return [_deployment(inv, ctx, "dockerfile") for inv in invocations], problems


def _argv_invocations(argv: list[str], ctx: _Ctx, *, env: dict[str, tuple[str, str]], line: int | None, origin: str,
                      anchor: str, problems: list[Problem]) -> list[_Invocation]:
    """The vLLM command of a container's argv: directly, or inside `sh -c SCRIPT`."""
    nested = _nested_script(argv) if argv and argv[0].rsplit("/", 1)[-1] in _SHELLS else None
    if nested is not None:
        variables = {name: value for name, (value, _) in env.items()}
        return _shell_invocations(nested, ctx, variables=variables, exported=dict(env), first_line=line or 1,
                                  origin=lambda _l: origin, anchor=lambda _l: anchor, problems=problems)
    located = _find_vllm(argv)
    if located is None:
        return []
    start, serve = located
    return [_Invocation([_Tok(a, origin) for a in argv[start:]], serve, line, dict(env), anchor)]


# -- vLLM config files (vllm serve --config FILE) -------------------------------------

def _vllm_config_file(ctx: _Ctx, config: dict[str, Any]) -> Deployment:
    """A config file on its own: the deployment `vllm serve [MODEL] --config FILE`."""
    inv = _Invocation([_Tok("serve", "command line"), _Tok("--config", "command line"), _Tok(ctx.path.name, "command line")],
                      True, None, {}, "", require_model=False)
    inv.config_reader = lambda name, _ctx: (ctx.text, ctx.display, None)
    facts, problem, line = ctx.facts_for(None)
    inv.facts, inv.facts_problem = facts, problem
    inv.facts_origin = f"line {line}: hma-policy directive" if line else ""
    return _deployment(inv, ctx, "vllm-config")


# -- Kubernetes manifests ---------------------------------------------------------------

def _kubernetes(ctx: _Ctx, objects: list[dict[str, Any]], starts: list[int]) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    items: list[tuple[dict[str, Any], int, int]] = []   # object, document number, first line
    for number, (obj, start) in enumerate(zip(objects, starts), 1):
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            items += [(item, number, start) for item in obj["items"] if isinstance(item, dict)]
        else:
            items.append((obj, number, start))
    config_maps: dict[tuple[str, str], dict[str, Any]] = {}
    for obj, _, _ in items:
        if obj.get("kind") == "ConfigMap" and isinstance(obj.get("metadata"), dict):
            held: dict[str, Any] = obj["metadata"]
            data: dict[str, Any] = obj["data"] if isinstance(obj.get("data"), dict) else {}
            config_maps[(str(held.get("namespace") or ""), str(held.get("name")))] = data
    out: list[Deployment] = []
    for obj, number, start in items:
        meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        kind, name = str(obj.get("kind")), str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "")
        for pod_path, pod, pod_meta in _pod_specs(obj):
            facts_text = _annotation(pod_meta) or _annotation(meta)
            containers: list[Any] = pod["containers"]  # a list: _pod_specs found it
            volumes: dict[Any, dict[str, Any]] = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)} \
                if isinstance(pod.get("volumes"), list) else {}
            for index, container in enumerate(containers):
                if not isinstance(container, dict):
                    continue
                cname = str(container.get("name") or index)
                where = f"{kind} {namespace + '/' if namespace else ''}{name}, container {cname}"
                anchor = f"#{kind}/{name}/{cname}" if not namespace else f"#{kind}/{namespace}/{name}/{cname}"
                located = _container_invocations(container, ctx, where, anchor, start + 1, problems)
                if not located:
                    continue
                for inv in located:
                    inv.name = f"{name}/{cname}" if name else cname
                    inv.resource = (("apiVersion", str(obj.get("apiVersion"))), ("kind", kind), ("name", name),
                                    ("namespace", namespace))
                    inv.config_reader = _config_from_volumes(container, volumes, config_maps, namespace)
                    if facts_text is not None:
                        facts, problem = _parse_facts(facts_text, ctx, None, f"the annotation {_FACTS_ANNOTATION} of {kind} {name}")
                        inv.facts, inv.facts_problem = facts, problem
                        inv.facts_origin = f"{kind} {name}: annotation {_FACTS_ANNOTATION}"
                    else:
                        facts, problem, line = ctx.facts_for(start + 1)
                        inv.facts, inv.facts_problem = facts, problem
                        inv.facts_origin = f"line {line}: hma-policy directive" if line else ""
                    out.append(_deployment(inv, ctx, "kubernetes"))
    return out, problems


def _annotation(meta: Any) -> str | None:
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        value = meta["annotations"].get(_FACTS_ANNOTATION)
        return value if isinstance(value, str) else None
    return None


def _pod_specs(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every mapping holding a `containers` list of containers, with the pod
    template's metadata (its sibling), at any depth (bounded)."""
    stack: list[tuple[Any, tuple, Any, int]] = [(obj, (), None, 0)]
    found = []
    while stack:
        value, path, parent, depth = stack.pop()
        if depth > 64:
            continue
        if isinstance(value, dict):
            containers = value.get("containers")
            if isinstance(containers, list) and any(isinstance(c, dict) and ("image" in c or "command" in c or "args" in c)
                                                    for c in containers):
                meta = parent.get("metadata") if isinstance(parent, dict) and path and path[-1] == "spec" else None
                found.append((pointer(path), value, meta))
            for key, item in value.items():
                if key != "containers":
                    stack.append((item, path + (key,), value, depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, path + (index,), value, depth + 1))
    found.sort(key=lambda f: f[0])
    yield from found


def _k8s_expand(text: str, env: Mapping[str, str | None]) -> str:
    """Kubernetes' $(VAR) in command and args: replaced from the container's
    env; `$$` escapes; an undefined reference stays as written."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name not in env:
            return m.group(0)
        value = env[name]
        return value if value is not None else _unresolved(f"$({name})")
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


def _container_invocations(container: dict[str, Any], ctx: _Ctx, where: str, anchor: str, line: int,
                           problems: list[Problem]) -> list[_Invocation]:
    env: dict[str, str | None] = {}
    for item in container.get("env") or [] if isinstance(container.get("env"), list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            value = item.get("value")
            env[item["name"]] = _k8s_expand(value, env) if isinstance(value, str) else (None if "valueFrom" in item else "")
    command: list[Any] | None = container["command"] if isinstance(container.get("command"), list) else None
    arguments: list[Any] = container["args"] if isinstance(container.get("args"), list) else []
    bad = [f"{k}[{i}]" for k, seq in (("command", command or []), ("args", arguments)) for i, v in enumerate(seq)
           if not isinstance(v, str)]
    argv = [_k8s_expand(str(v), env) for v in (command or [])] + [_k8s_expand(_scalar_text(v), env) for v in arguments]
    image = str(container.get("image") or "")
    if command is None:
        if not _VLLM_IMAGE.search(image.split("@")[0]):
            if _find_vllm(argv) is None:
                return []
        else:
            if argv[:1] == ["serve"]:
                problems.append(ctx.problem("source.serve_twice", f"{where}: the vllm/vllm-openai image already runs "
                                            "`vllm serve`; `serve` in args is taken as the model"))
            argv = ["vllm", "serve"] + argv
    shell_env = {k: ((v if v is not None else _unresolved(f"${k}")), f"{where}: env") for k, v in env.items()}
    found = _argv_invocations(argv, ctx, env=shell_env, line=line, origin=where, anchor=anchor, problems=problems)
    for inv in found:
        inv.line = None
        if bad:
            inv.problems.append(ctx.problem("source.kubernetes", f"{where}: {', '.join(bad)} must be strings; "
                                            "Kubernetes rejects the manifest"))
    if len(found) > 1:  # several commands in one container script: tell them apart
        for number, inv in enumerate(found, 1):
            inv.anchor = f"{anchor}/{number}"
    return found


def _config_from_volumes(container: dict[str, Any], volumes: Mapping[Any, Any], config_maps: Mapping[tuple[str, str], dict],
                         namespace: str):
    """A reader of `--config FILE` inside a container: the file is found
    through the container's volumeMounts in a ConfigMap of the same manifest."""

    def read(name: str, ctx: _Ctx) -> tuple[str | None, str, Problem | None]:
        mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict)] \
            if isinstance(container.get("volumeMounts"), list) else []
        best = None
        for mount in mounts:
            mount_path = str(mount.get("mountPath") or "").rstrip("/")
            if name == mount_path or name.startswith(mount_path + "/"):
                if best is None or len(mount_path) > len(str(best.get("mountPath")).rstrip("/")):
                    best = mount
        if best is None or not name.startswith("/"):
            return None, name, ctx.problem("source.config_unresolved", f"`--config {name}` is not in any volume of the container")
        volume = volumes.get(best.get("name"))
        config_map = volume.get("configMap") if isinstance(volume, dict) else None
        if not isinstance(config_map, dict):
            return None, name, ctx.problem("source.config_unresolved", f"`--config {name}` is in volume `{best.get('name')}`, "
                                           "which is not a ConfigMap the audit can read")
        mount_path = str(best.get("mountPath")).rstrip("/")
        relative = best.get("subPath") if name == mount_path and best.get("subPath") else name[len(mount_path):].lstrip("/")
        key = relative
        if isinstance(config_map.get("items"), list):
            key = next((i.get("key") for i in config_map["items"] if isinstance(i, dict) and i.get("path") == relative), None)
        data = config_maps.get((namespace, str(config_map.get("name"))))
        shown = f"ConfigMap {config_map.get('name')} key {key}"
        if data is None:
            return None, shown, ctx.problem("source.config_unresolved", f"`--config {name}` comes from ConfigMap "
                                            f"`{config_map.get('name')}`, which is not in this file")
        if key is None or not isinstance(data.get(key), str):
            return None, shown, ctx.problem("source.config_missing", f"`--config {name}`: ConfigMap `{config_map.get('name')}` "
                                            f"has no key `{key}`; vLLM fails to start without the file")
        if len(data[key].encode("utf-8", "surrogatepass")) > ctx.limits.max_config_bytes:
            return None, shown, ctx.problem("input.limit", f"{shown} is larger than {ctx.limits.max_config_bytes} bytes")
        return data[key], shown, None

    return read
