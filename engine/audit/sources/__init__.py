"""Stage 0 of an audit, sources: find the vLLM deployments a file describes,
and turn each into a deployment document.

Formats (``Deployment.format``), one module each:

- ``document`` (document.py): this project's deployment document (JSON or
  YAML; a YAML file may hold several, separated by ``---``).
- ``vllm-config`` (vllm_config.py): a ``vllm serve --config FILE`` YAML file.
- ``shell`` (shell.py): ``vllm serve`` / ``python -m
  vllm.entrypoints.openai.api_server`` / ``docker run vllm/vllm-openai``
  command lines in a shell script.
- ``dockerfile`` (dockerfile.py): the container command of the final stage.
- ``kubernetes`` (kubernetes.py): the containers of any object in a manifest.

A file is read by files.py (regular files only, within limits, UTF-8), its
reader chosen by detect.py, and each vLLM launch found is read as vLLM reads
its command line by :mod:`hma_policy.core.command`.

Nothing is executed and nothing named in a file is imported. A value the
decision needs that the file does not hold (an environment variable set
elsewhere, ``$(...)``, a ``valueFrom``, a ``--config`` file that cannot be
read) makes the deployment an input error with code ``source.*``: the audit
never guesses.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import cast

from ...core.errors import Problem
from ...core.markers import plain
from ...core.limits import DEFAULT_SOURCE_LIMITS, SourceLimits
from .applied import applied_manifests
from .companions import forget_objects
from .context import Ctx, read_directives
from .deployment import Deployment, SourceFile
from .detect import BATCH_SUFFIXES, MENTION_NAMES, MENTION_SUFFIXES, basename, mention, mentions_vllm, source_format, suffix
from .compose import compose_file
from .dockerfile import dockerfile
from .document import EMPTY, structured_file
from .files import NOT_REGULAR, decode, read_bytes, read_text
from .llmdbench import env_file, is_env_file
from .notebook import read_notebook, without_outputs
from .python import launch_written, python_file
from .files import regular as is_regular
from .shell import shell_file
from .systemd import unit_file
from .quadlet import container_unit
from .copied import built_with
from .pyrelease import truss_script_release
from .fly import fly_script_release
from .release import ReleaseHint

__all__ = ["Deployment", "SourceFile", "SourceLimits", "DEFAULT_SOURCE_LIMITS", "read_source", "find_deployments", "EMPTY",
           "source_format", "FORMATS", "forget_objects", "NOT_A_SOURCE", "no_source_by_name"]

FORMATS = ("document", "vllm-config", "shell", "dockerfile", "kubernetes", "compose")

# Kept under their old names: tests and callers read them here.
_suffix = suffix
_decode = decode

# A YAML file with a top-level `services:` may be a compose file whatever its name.
_SERVICES = re.compile(r"^services:[ \t]*(#.*)?$", re.M)
NOT_A_SOURCE = "not a deployment source (not JSON, YAML, a shell script, Python or a Dockerfile)"
_NOT_A_SOURCE = NOT_A_SOURCE
_NO_LAUNCH = ("Python in which no vLLM launch is read (an engine call, or a command list or string that starts "
              "vLLM's server)")
_NO_NOTEBOOK_LAUNCH = "a notebook in whose code cells no vLLM launch is read"


def read_source(path: str | Path, *, display: str | None = None, roots: tuple[Path, ...] = (),
                limits: SourceLimits = DEFAULT_SOURCE_LIMITS, known: tuple[str, ...] = (),
                regular: bool = False) -> SourceFile:
    """Read one file and find its deployments. Never raises for any content.

    ``roots`` are the directories a ``--config`` file may be read from
    (resolved, symlinks included); by default the file's own directory.
    ``known``: connector names (a policy's ``registered_names``) whose
    mention in a file that yields no launch is noted (``source.unrecognized``).
    ``regular``: the caller knows ``path`` is a regular file (a directory
    listing told it), so it is not asked again.
    """
    return _read_source(path, display if display is not None else str(path), tuple(roots), limits, regular=regular,
                        known=known)  # (a list of roots too: they key the caches of companion files)


def find_deployments(name: str, text: str, *, limits: SourceLimits = DEFAULT_SOURCE_LIMITS,
                     known: tuple[str, ...] = ()) -> SourceFile:
    """The deployments of ``text`` read as a file called ``name`` (its
    format from the name, or a shell script's shebang): for text that is not
    in a file, such as an object sent to an admission webhook. Nothing is
    read from the file system: a ``--config`` file is found only in the text
    itself (a ConfigMap of the same manifest). Never raises for any text."""
    fmt = source_format(name, text[:256].encode("utf-8", "surrogatepass"))
    if fmt is None:
        return SourceFile(name, None, skipped=_NOT_A_SOURCE)
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_file_bytes:
        return SourceFile(name, None, problems=(Ctx(name, name, (), limits).problem(
            "input.limit", f"`{name}` is larger than {limits.max_file_bytes} bytes"),))
    return _noted(_examine(Ctx(name, name, (), limits, text, fs=False), fmt), text, known)


def no_source_by_name(path: str | Path) -> bool:
    """Whether the file's name alone says it is no deployment source, so that
    none of it is read (a model's weights); a name that
    does not tell, or a document read for its mentions, is not one."""
    return _unread_by_name(source_format(path), suffix(basename(path)).lower())


def _unread_by_name(fmt: str | None, ext: str) -> bool:
    """:func:`no_source_by_name`, given the format the name says and its suffix."""
    return fmt is None and bool(ext) and ext not in BATCH_SUFFIXES and ext not in MENTION_SUFFIXES


def _read_source(path: str | Path, display: str, roots: tuple[Path, ...], limits: SourceLimits, *,
                 regular: bool = False, known: tuple[str, ...] = ()) -> SourceFile:
    """:func:`read_source`; ``regular``: the caller knows the file is a
    regular file (an audit's directory listing tells), so it is not asked
    again. An audit passes ``path`` as a string: a path object per file
    costs more than the file's read."""
    fmt = source_format(path)
    name = basename(path).lower()
    ext = suffix(name)
    if fmt is None and (ext in MENTION_SUFFIXES or name in MENTION_NAMES):  # a template, a document: for mentions
        return _mentions_only(path, display, limits, regular, known)
    if _unread_by_name(fmt, ext):  # decided by the name: a model's weights are never read
        return SourceFile(display, None, skipped=_NOT_A_SOURCE)
    if not regular and not is_regular(path):  # a FIFO or a device would block or never end
        return SourceFile(display, None, skipped="not a regular file")
    # A name that does not tell: its first bytes do (a shebang), then the file is read whole.
    raw, problem = read_bytes(path, display, limits.max_file_bytes if fmt else 256, head=fmt is None)
    if fmt is None and problem is not NOT_REGULAR:
        fmt = source_format(path, raw or b"")
        if fmt is None:
            return SourceFile(display, None, skipped=_NOT_A_SOURCE)
        raw, problem = read_bytes(path, display, limits.max_file_bytes)
    if problem is NOT_REGULAR:
        return SourceFile(display, None, skipped="not a regular file")
    if problem is not None:
        return SourceFile(display, None, problems=(problem,))
    text, problem = decode(cast(bytes, raw), display)  # read: no problem
    if problem is not None:
        return SourceFile(display, fmt, problems=(problem,))
    return _noted(_examine(Ctx(path, display, roots, limits, cast(str, text)), cast(str, fmt)), cast(str, text), known)


def _mentions_only(path: str | Path, display: str, limits: SourceLimits, regular: bool,
                   known: tuple[str, ...]) -> SourceFile:
    skipped = SourceFile(display, None, skipped=_NOT_A_SOURCE)
    if not regular and not is_regular(path):
        return skipped
    text, _ = read_text(path, display, limits.max_file_bytes)
    return _noted(skipped, text, known) if text is not None else skipped


def _noted(found: SourceFile, text: str, known: tuple[str, ...]) -> SourceFile:
    """A file that yields no launch but mentions a vLLM KV option or
    connector is noted (beside its problems, if it has any): the audit never
    misses a launch silently."""
    if found.deployments:
        return _beside_launches(found, text, known)
    if any(note.code == "source.unrecognized" for note in found.notes):
        return found  # the reader has already said why the file holds none
    if found.file.endswith(".ipynb"):  # (what its cells printed once is no option it sets)
        text = without_outputs(text)
    mentioned = mention(text, known, python=found.file.endswith(".py"), shell=found.format == "shell") \
        or launch_written(found, text)
    if mentioned is None:
        return found
    word, line = mentioned
    # Why it was not read, where that is more than "not a deployment source": a reader's own reason.
    why = f": {found.skipped}" if found.skipped is not None and found.skipped not in (_NOT_A_SOURCE, _NO_LAUNCH) else ""
    return _with_note(found, f"mentions `{word}` at line {line}, no vLLM launch recognised{why}", line)


# The fields of a deployment document that vLLM's KV options give (a config file's `kv-transfer-config` too).
_KV_FIELDS = frozenset({"kv_transfer_config", "kv_offloading_size", "kv_offloading_backend",
                        "disable_hybrid_kv_cache_manager"})
# A whole-line comment of a shell script, YAML, a Dockerfile (`#`) or JSON with comments (`//`).
_COMMENT_LINE = re.compile(r"^[ \t]*(?:#|//).*$", re.M)


def _beside_launches(found: SourceFile, text: str, known: tuple[str, ...]) -> SourceFile:
    """A file whose launches all read without a KV option, but which mentions
    one (or a connector) outside its comments, is noted: the KV config its
    launches take may be written where the audit does not read it (FlagScale's
    runner writes `vllm serve` then adds `--kv-transfer-config` in an f-string of
    a script it writes). Launches whose documents are not known (a problem,
    paths, a stand-in) are left to their own problems and notes."""
    if any(d.document is None or d.paths or d.stand_in is not None
           or any(key.replace("-", "_") in _KV_FIELDS for key in d.document) for d in found.deployments):
        return found
    if mention(text, known) is None:  # (most files: one search, before their comments are blanked)
        return found
    if found.file.endswith(".ipynb"):
        text = without_outputs(text)
    mentioned = mention(_COMMENT_LINE.sub(lambda m: " " * len(m[0]), text), known, python=found.file.endswith(".py"))
    if mentioned is None:
        return found
    word, line = mentioned
    return _with_note(found, f"mentions `{word}` at line {line}, which none of its launches reads", line)


def _with_note(found: SourceFile, message: str, line: int) -> SourceFile:
    """The file with a `source.unrecognized` note that it mentions a KV option the audit did not read."""
    note = Problem("source.unrecognized", message,
                   hint="if this file deploys vLLM in a way the audit does not read, say so in an issue; "
                        "see docs/audit-formats.md for what is read", file=found.file, line=line)
    return SourceFile(found.file, found.format, found.deployments, found.problems, found.skipped, found.notes + (note,))


def _script_release(ctx: Ctx) -> ReleaseHint | None:
    """The release of the image a script is built into, or a Truss or a Fly app
    runs it in; an image whose release is not known, where none names one."""
    image = built_with(ctx)
    if image is not None and image.version is not None:
        return image
    return truss_script_release(ctx) or fly_script_release(ctx) or image


def _examine(ctx: Ctx, fmt: str) -> SourceFile:
    """The deployments of a file's text, by the reader of its format."""
    read_directives(ctx)
    if fmt == "shell":
        deployments, problems, applied = shell_file(ctx, lambda: _script_release(ctx))
        if applied:  # manifests the script applies: read here, since the manifest readers read shell themselves
            more, more_problems = applied_manifests(ctx, applied)
            deployments, problems = deployments + more, problems + more_problems
        fmt_shown = "shell"
        if is_env_file(ctx.text):  # an llm-d-benchmark env file: its arguments are in variables
            more, more_problems = env_file(ctx)
            deployments, problems, fmt_shown = deployments + more, problems + more_problems, "llmdbench-env"
        found = SourceFile(ctx.display, fmt_shown, tuple(deployments), tuple(problems))
        # As a broken YAML file that never mentions vLLM is: one whose reading stops at a limit too
        # (mudler/LocalAI's audio-cpp-darwin.sh, two functions that call each other until a test
        # only a run decides stops them).
        if not deployments and problems and all(p.code in ("source.shell_syntax", "source.limit") for p in problems) \
                and not mentions_vllm(ctx.text):
            found = SourceFile(ctx.display, None, skipped="mentions no vLLM option, and is not a script the audit "
                                                          f"can read (line {problems[0].line}: {problems[0].message})")
    elif fmt == "dockerfile":
        deployments, problems = dockerfile(ctx)
        found = SourceFile(ctx.display, "dockerfile", tuple(deployments), tuple(problems))
    elif fmt == "python":  # a launcher, or (None) a Python file that starts no vLLM engine
        found = python_file(ctx) or SourceFile(ctx.display, None, skipped=_NO_LAUNCH)
    elif fmt == "notebook":  # its code cells' Python, each line where the notebook has it
        found = _notebook(ctx)
    elif fmt == "systemd":
        found = unit_file(ctx)
    elif fmt == "quadlet":
        found = container_unit(ctx)
    elif fmt == "compose" or (fmt == "yaml" and _SERVICES.search(ctx.text) and compose_file(ctx).skipped is None):
        found = compose_file(ctx)
    else:
        found = structured_file(ctx, fmt)  # json or yaml
    found = _with_applied(ctx, found)
    if ctx.notes:  # what a reader noted deep inside the file; a container read twice (a base and its overlay) once
        fresh = tuple(note for note in dict.fromkeys(ctx.notes) if note not in found.notes)
        found = SourceFile(found.file, found.format, found.deployments, found.problems, found.skipped, found.notes + fresh)
    return _as_written(_unique_ids(found))


def _with_applied(ctx: Ctx, found: SourceFile) -> SourceFile:
    """``found`` with the launches of the manifests that its containers'
    scripts apply (a Job whose `bash -c` runs `kubectl apply -f - <<EOF`),
    and of those that theirs apply in turn, up to 4 deep; a container read
    twice (a kustomize base and its overlay) applies its manifest once."""
    for _ in range(4):
        scripts = list(dict.fromkeys(ctx.applied))
        ctx.applied.clear()
        if not scripts:
            break
        more, problems = applied_manifests(ctx, scripts)
        if more or problems:
            found = SourceFile(found.file, found.format or "kubernetes", found.deployments + tuple(more),
                               found.problems + tuple(problems), None if more or found.deployments else found.skipped,
                               found.notes)
    ctx.applied.clear()
    return found


def _notebook(ctx: Ctx) -> SourceFile:
    """A notebook's launches: its code cells' Python, and the files its `%%writefile` cells write
    (a Dockerfile, a script), each read as that file at its lines in the notebook."""
    book = read_notebook(ctx)
    code = book.code if book is not None else None
    found = (python_file(Ctx(ctx.source, ctx.display, ctx.roots, ctx.limits, code, fs=ctx.fs))
             if code is not None else None) or SourceFile(ctx.display, None, skipped=_NO_NOTEBOOK_LAUNCH)
    for written in book.files if book is not None else ():
        fmt = source_format(written.name, written.text[:256].encode("utf-8", "surrogatepass"))
        if fmt not in ("dockerfile", "shell", "python") or not mentions_vllm(written.text):
            continue
        # (no companion file is read for it: what else the notebook's folder holds is not its image's)
        held = ctx.embedded(written.text, written.line)
        if held is None:
            return SourceFile(found.file, found.format, found.deployments, found.problems + (ctx.embedded_limit(written.line),),
                              found.skipped, found.notes)
        file = _examine(held, fmt)
        if file.deployments or file.problems:
            found = SourceFile(found.file, found.format or file.format, found.deployments + file.deployments,
                               found.problems + file.problems, None if file.deployments else found.skipped, found.notes)
    return found


def _as_written(found: SourceFile) -> SourceFile:
    """What a file gave, as a report shows it: each unknown value as the
    file writes it (`$MODEL`, `{{ .Release.Namespace }}`). Markers are the
    readers' own device, and a report holds no NUL. The documents keep
    theirs: validation reports a value the decision reads that holds one."""
    deployments = tuple(_deployment_as_written(d) for d in found.deployments)
    problems, notes = _problems_as_written(found.problems), _problems_as_written(found.notes)
    if deployments == found.deployments and problems is found.problems and notes is found.notes:
        return found
    return SourceFile(found.file, found.format, deployments, problems, found.skipped, notes)


def _deployment_as_written(d: Deployment) -> Deployment:
    texts = (d.anchor, d.name or "", d.container or "", d.role or "", *(v for _, v in d.resource),
             *(v for _, v in d.origins), *(v for _, v in d.options))
    problems, notes = _problems_as_written(d.problems), _problems_as_written(d.notes)
    if not any("\x00" in t or "\x01" in t for t in texts) and problems is d.problems and notes is d.notes:
        return d
    return d.replace(anchor=plain(d.anchor), name=_optional(d.name), container=_optional(d.container),
                     role=_optional(d.role), resource=tuple((k, plain(v)) for k, v in d.resource),
                     origins=tuple((k, plain(v)) for k, v in d.origins),
                     options=tuple((k, plain(v)) for k, v in d.options), problems=problems, notes=notes)


def _problems_as_written(problems: tuple[Problem, ...]) -> tuple[Problem, ...]:
    if not any(_marked(p) for p in problems):
        return problems
    return tuple(replace(p, message=plain(p.message), path=plain(p.path), hint=_optional(p.hint)) if _marked(p) else p
                 for p in problems)


def _marked(problem: Problem) -> bool:
    return any("\x00" in t or "\x01" in t for t in (problem.message, problem.path, problem.hint or ""))


def _optional(text: str | None) -> str | None:
    return None if text is None else plain(text)


def _unique_ids(found: SourceFile) -> SourceFile:
    """A launch met again with the same reading (a loop, a function called
    twice alike) is one deployment; two different ones at one place (`a && b`,
    a function called with other arguments) get `/2`, `/3`, ... so every id is
    unique."""
    if len(found.deployments) < 2:
        return found
    seen: dict[str, int] = {}
    readings: set[tuple] = set()
    out = []
    for deployment in found.deployments:
        reading = (deployment.anchor, repr((deployment.document, deployment.problems, deployment.notes,
                                            deployment.release, deployment.paths, deployment.stood_paths,
                                            deployment.stand_in)))
        if reading in readings:
            continue
        readings.add(reading)
        count = seen.get(deployment.anchor, 0) + 1
        seen[deployment.anchor] = count
        if count > 1:
            deployment = deployment.replace(anchor=f"{deployment.anchor}/{count}")
        out.append(deployment)
    return SourceFile(found.file, found.format, tuple(out), found.problems, found.skipped, found.notes)
