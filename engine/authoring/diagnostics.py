"""Problems as an author reads them: ``path:line:col`` an editor can open, and
the source line with a caret under the column, as ruff and rustc show them.

A :class:`Diagnostic` is a located problem whose file is named as the user's
shell names it: relative to the current directory when the file is inside
it, else absolute (a rule problem names its file inside the rules folder;
:func:`from_problem` joins the folder). :func:`render` gives the ``full``
form (a header line, the source line and a caret, the hint) or the
``concise`` one (one line per problem, the header with the hint appended).
A problem that has a JSON Pointer into a YAML file but no line (the
verifier's findings today) is located by reading that file
(:meth:`Sources.locate`).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Iterable, NamedTuple

from ..core import yamlsafe
from ..fileio import open_regular
from ..core.errors import Problem, printable
from ..clisupport import PLAIN, Style  # (a command's colours)

__all__ = ["Diagnostic", "Sources", "locate", "display_path", "bundled_rules_dir", "from_problem", "render", "Style"]

LEVELS = ("error", "warning", "note")


class Diagnostic(NamedTuple):
    code: str
    message: str
    level: str = "error"  # error | warning | note
    file: str | None = None  # as displayed (display_path)
    line: int | None = None
    column: int | None = None
    path: str = ""  # JSON Pointer inside the file
    hint: str | None = None
    detail: tuple[str, ...] = ()  # further lines: facts, a counterexample

    def location(self) -> str:
        if self.file is None:
            return self.path or "/"
        return self.file + (f":{self.line}:{self.column or 1}" if self.line is not None else "")

    def header(self) -> str:
        """``location: code: message (at pointer)``: the concise form, without the hint."""
        text = f"{self.location()}: {self.code}: {self.message}"
        if self.file is not None and self.path:
            text += f" (at {self.path})"
        return text


def bundled_rules_dir() -> Path:
    """Where the bundled rules are on disk (for their snippets and paths)."""
    return Path(str(resources.files("hma_policy.rules")))


def display_path(path: str | os.PathLike[str], cwd: str | None = None) -> str:
    """``path`` as a shell in the current directory names it: relative when
    it lies inside that directory, else absolute. Editors and terminals open
    either; a path relative to some other folder they cannot."""
    absolute = os.path.abspath(path)
    here = os.path.abspath(cwd or os.getcwd())
    try:
        inside = os.path.commonpath([absolute, here]) == here
    except ValueError:  # another drive
        inside = False
    return os.path.relpath(absolute, here) if inside else absolute


def from_problem(problem: Problem, base: str | os.PathLike[str] | None = None, *, spec: str | None = None,
                 level: str = "error") -> Diagnostic:
    """A core Problem as a Diagnostic. ``base``: the folder its ``file`` is
    named in (a rules directory), None when the name is already a path;
    ``spec``: how the policy named that folder (a problem about the folder
    itself, such as a missing ruleset, names it so)."""
    file = problem.file
    if file is not None:
        if base is not None and file not in (spec, "bundled", str(base)):
            file = display_path(Path(base) / file)
        elif base is not None:
            file = display_path(base)
        else:
            file = display_path(file) if file != "-" else file
    return Diagnostic(problem.code, problem.message, level, file, problem.line, problem.column, problem.path, problem.hint)


def locate(marks: dict[str, tuple[int, int]], pointer: str) -> tuple[int | None, int | None]:
    """The (line, column) of ``pointer`` in a YAML file's marks
    (yamlsafe.load(..., marks=True)), or of its nearest located ancestor."""
    while True:
        if pointer in marks:
            return marks[pointer]
        if not pointer:
            return None, None
        pointer = pointer.rsplit("/", 1)[0]


def _text(file: str) -> str | None:
    """A regular file's text (a FIFO or a device would block: none)."""
    try:
        with open_regular(file) as handle:
            return handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


class Sources:
    """The files diagnostics point into, each read once: their lines for
    snippets, and their YAML marks to locate a JSON Pointer."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str] | None] = {}
        self._marks: dict[str, dict[str, tuple[int, int]] | None] = {}

    def line(self, file: str, number: int) -> str | None:
        if file not in self._lines:
            text = _text(file)
            self._lines[file] = text.splitlines() if text is not None else None
        lines = self._lines[file]
        return lines[number - 1] if lines is not None and 0 < number <= len(lines) else None

    def locate(self, file: str, pointer: str) -> tuple[int | None, int | None]:
        """The line and column of ``pointer`` in the YAML ``file`` (its
        nearest located ancestor), or (None, None)."""
        if file not in self._marks:
            text = _text(file)
            try:
                self._marks[file] = yamlsafe.load(text, marks=True)[1] if text is not None else None
            except yamlsafe.YamlProblem:
                self._marks[file] = None
        marks = self._marks[file]
        return locate(marks, pointer) if marks is not None else (None, None)

    def located(self, diagnostic: Diagnostic) -> Diagnostic:
        """``diagnostic`` with a line, from its pointer, when it has none."""
        if diagnostic.line is not None or diagnostic.file is None or not diagnostic.file.endswith((".yaml", ".yml")):
            return diagnostic
        line, column = self.locate(diagnostic.file, diagnostic.path)
        return diagnostic._replace(line=line, column=column) if line is not None else diagnostic


def render(diagnostics: Iterable[Diagnostic], *, concise: bool = False, style: Style = PLAIN,
           sources: Sources | None = None, indent: str = "") -> list[str]:
    """The lines that show ``diagnostics``: one each when ``concise``, else
    each with its source line, a caret under its column and its hint."""
    sources = sources or Sources()
    out: list[str] = []
    for d in diagnostics:
        d = sources.located(d)
        colour = style.level(d.level)
        head = printable(d.header())
        if style.reset:
            where = d.location()
            head = (f"{style.bold}{printable(where)}{style.reset}: {colour}{printable(d.code)}{style.reset}"
                    + head[len(printable(where)) + 2 + len(printable(d.code)):])
        if concise:
            out.append(indent + head + (f" (hint: {printable(d.hint)})" if d.hint else ""))
            out += [indent + "    " + printable(line) for line in d.detail]
            continue
        out.append(indent + head)
        text = sources.line(d.file, d.line) if d.file is not None and d.line is not None else None
        if text is not None:
            number = str(d.line)
            pad = " " * len(number)
            column = max(1, d.column or 1)
            # The caret sits under the column: the characters before it kept
            # as blanks, tabs as tabs, so that it lines up under the text.
            before = "".join("\t" if ch == "\t" else " " for ch in text[:column - 1])
            g, r = style.gutter, style.reset
            out += [f"{indent}{pad} {g}|{r}",
                    f"{indent}{g}{number} |{r} {printable(text)}",
                    f"{indent}{pad} {g}|{r} {before}{colour}^{r}"]
        out += [indent + "    " + printable(line) for line in d.detail]
        if d.hint:
            out.append(f"{indent}{' ' * (len(str(d.line)) if text is not None else 0)} = hint: {printable(d.hint)}")
    return out
