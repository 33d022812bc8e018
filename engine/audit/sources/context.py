"""The file being read, as every reader sees it: its name, where a
``--config`` file may be read from, its limits, and the facts its
``# hma-policy:`` directives give.

What a command line cannot say (the model's layer kinds, the platform) may be
given by a directive comment, ``# hma-policy: {model: {layer_kinds: [...]}}``,
which applies to the deployments below it in the file, or on a Kubernetes
object by the annotation ``hma-policy.dev/facts``. Only ``model``,
``platform`` and ``env`` may be given this way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...core.errors import InputError, Problem, suggest
from ...core.input import parse_text
from ...core.limits import SourceLimits
from .detect import basename
from .release import valid_version

__all__ = ["Ctx", "RUNTIME_FACTS", "FACTS_ANNOTATION", "parse_facts", "read_directives"]

RUNTIME_FACTS = ("model", "model_facts", "platform", "env")
# What a directive may give: the facts above, and the vLLM release (kept apart from the document).
_DIRECTIVE_KEYS = RUNTIME_FACTS + ("vllm_version",)
FACTS_ANNOTATION = "hma-policy.dev/facts"
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*hma-policy:[ \t]*(.*?)[ \t]*$", re.M)
# What the files a file holds may cost to read, placed at their lines (Ctx.embedded): this many times the
# file's size, and this much more for a small file.
_EMBEDDED_FACTOR = 4
_EMBEDDED_SLACK = 1 << 16


class Ctx:
    """One file being read. ``source`` is its path (a string where no path
    object is needed); ``fs``: whether a ``--config`` file may be read from
    the file system (False for text given in memory)."""

    def __init__(self, source: str | Path, display: str, roots: tuple[Path, ...], limits: SourceLimits,
                 text: str = "", *, fs: bool = True) -> None:
        self.source, self.display, self.roots, self.limits, self.text = source, display, roots, limits, text
        # The file's name, which many readers test: a path object per test costs more than a small file's read.
        self.name = basename(source)
        self.fs = fs
        self.directives: list[tuple[int, Any, Problem | None]] = []
        # Notes of the file that a reader deep inside it finds (a container it does not read as a
        # launch, though it may be one), added to the file's own when it has been read.
        self.notes: list[Problem] = []
        # The ConfigMap keys (namespace, name, key) a container of the file reads as a file (a script it
        # runs, a --config file): configmap_scripts.py reads the other scripts a ConfigMap holds.
        self.config_map_keys: set[tuple[str, str, str]] = set()
        # The manifests a container's script applies (`kubectl apply -f - <<EOF` in a Job's `bash -c`),
        # read as manifests of the file when it has been read (sources/__init__.py), as a script file's are.
        self.applied: list[Any] = []  # (shell_state.Script: shell_state reads a Ctx itself)
        self._embedded = 0  # the characters the files held in this one have cost (embedded)

    def embedded(self, text: str, line: int) -> Ctx | None:
        """A file held inside this one (a ConfigMap's script, a notebook's `%%writefile` cell), to read as
        a file whose text stands at the line after ``line`` (blank lines above it), with no file-system
        companions. None once the files it holds have cost more than a bound of this file's size: each
        costs the lines above it, so a file of many small ones would cost its lines squared."""
        self._embedded += line + len(text)
        if self._embedded > _EMBEDDED_FACTOR * len(self.text) + _EMBEDDED_SLACK:
            return None
        return Ctx(self.source, self.display, self.roots, self.limits, "\n" * line + text, fs=False)

    def embedded_limit(self, line: int) -> Problem:
        """The problem of a held file not read: the bound of :meth:`embedded` was reached."""
        return self.problem("source.limit", f"the files this file holds are read up to {_EMBEDDED_FACTOR} times its "
                            "size; the one from this line on and any after it are not read", line=line)

    @property
    def path(self) -> Path:
        return self.source if isinstance(self.source, Path) else Path(self.source)

    def config_roots(self) -> tuple[Path, ...]:
        """Where a --config file may be read from: the roots given, else the
        file's own directory (resolved only here: most files name no config)."""
        return self.roots or (self.path.resolve().parent,)

    def real_path(self) -> Path | None:
        """The file's own path resolved on disk, where it is a file there
        (None: text handed in, or a path that cannot be resolved)."""
        if not self.fs:
            return None
        try:
            return self.path.resolve(strict=True)
        except (OSError, RuntimeError):
            return None

    def may_read(self, real: Path) -> bool:
        """Whether a resolved path lies in the paths another file (a --config
        file, a companion) may be read from."""
        return any(real == root or root in real.parents for root in self.config_roots())

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


def read_directives(ctx: Ctx) -> None:
    if "hma-policy:" not in ctx.text:  # what every directive holds: skips the scan of most files
        return
    for match in _DIRECTIVE.finditer(ctx.text):
        line = ctx.text.count("\n", 0, match.start()) + 1
        facts, problem = parse_facts(match.group(1), ctx, line, "an hma-policy directive")
        ctx.directives.append((line, facts, problem))


def parse_facts(text: str, ctx: Ctx, line: int | None, what: str) -> tuple[Any, Problem | None]:
    try:
        value = parse_text(text, source=what, fmt="yaml") if text else None
    except InputError as exc:
        return None, ctx.problem("source.directive", f"{what} is not valid YAML: {exc.problems[0].message}", line=line)
    if not isinstance(value, dict) or not value:
        return None, ctx.problem("source.directive", f"{what} must be a mapping of {', '.join(RUNTIME_FACTS)}", line=line,
                                 hint="for example: # hma-policy: {model_facts: {layer_kinds: [sliding_window, full_attention]}}")
    unknown = [k for k in value if k not in _DIRECTIVE_KEYS]
    if unknown:
        return None, ctx.problem("source.directive", f"{what} may only give {', '.join(RUNTIME_FACTS)}; "
                                 f"`{unknown[0]}` must come from the deployment itself", line=line,
                                 hint=suggest(str(unknown[0]), _DIRECTIVE_KEYS))
    version = value.get("vllm_version")
    if "vllm_version" in value and not (isinstance(version, str) and valid_version(version)):
        return None, ctx.problem("source.directive", f"{what}: `vllm_version` must be a vLLM release such as \"0.22.0\", "
                                 f"got `{version}`", line=line, hint="quote it: vllm_version: \"0.22.0\"")
    return value, None
