"""Where a value of a YAML document is in its file: the line of a JSON
Pointer, found by parsing the document again with marks only when a reader
asks (most files never need a line)."""

from __future__ import annotations

import re
from typing import Any

from ...core import yamlsafe
from ...core.schema import pointer

__all__ = ["Lines", "NO_LINES", "yaml_chunks"]


class Lines:
    """The line in the file of each value of one YAML document (or of a YAML
    text held in a string of another document): ``first`` is the file's line
    of the text's first line."""

    def __init__(self, text: str, first: int, where: dict[str, tuple[int, int]] | None = None,
                 value: Any = None) -> None:
        self._text, self._first = text, first
        self._where = where  # the marks, when the caller parsed the text with them
        self._value = value  # the text's value, when the caller parsed it (None: parsed again when asked)

    @property
    def start(self) -> int:
        """The file's line of the text's first line."""
        return self._first

    def _marks(self) -> dict[str, tuple[int, int]]:
        if self._where is None:
            try:
                self._where = yamlsafe.load(self._text, marks=True)[1]
            except yamlsafe.YamlProblem:
                self._where = {}
        return self._where

    def at(self, *path: Any) -> int | None:
        """The line of the value at ``path`` (keys and indexes), or None."""
        mark = self._marks().get(pointer(path))
        return mark[0] + self._first - 1 if mark else None

    def key(self, *path: Any) -> int | None:
        """The line of the key that holds the value at ``path`` (a block
        mapping's value starts on the line after its key)."""
        line = self.at(*path)
        if line is None or not path:
            return line
        rows = self._text.split("\n")
        pattern = re.compile(r"\s*(?:- )?[\"']?" + re.escape(str(path[-1])) + r"[\"']?\s*:")
        for at in range(line, max(line - 4, self._first - 1), -1):
            if 0 <= at - self._first < len(rows) and pattern.match(rows[at - self._first]):
                return at
        return line

    def first(self, *paths: tuple[Any, ...]) -> int | None:
        """The line of the first of ``paths`` that has one."""
        for path in paths:
            line = self.at(*path)
            if line is not None:
                return line
        return None

    def inner(self, *path: Any, where: dict[str, tuple[int, int]] | None = None, value: Any = None) -> "Lines":
        """The lines of the YAML text held in the string at ``path`` (a block
        scalar's text starts on the line after its indicator); ``where`` and
        ``value``: the caller's parse of that text, with its marks."""
        mark = self._marks().get(pointer(path))
        line = mark[0] + self._first - 1 if mark else self._first
        block = mark is not None and self._text.split("\n")[mark[0] - 1][mark[1] - 1:mark[1]] in ("|", ">")
        return Lines(_string_at(self, path), line + 1 if block else line, where, value)


class _Within(Lines):
    """The lines of a value inside a document (an item of a `kind: List`), by
    the paths within it."""

    def __init__(self, outer: Lines, prefix: tuple[Any, ...]) -> None:
        super().__init__(outer._text, outer.start)
        self._outer, self._prefix = outer, prefix

    def at(self, *path: Any) -> int | None:
        return self._outer.at(*self._prefix, *path)

    def key(self, *path: Any) -> int | None:
        return self._outer.key(*self._prefix, *path)

    def inner(self, *path: Any, where: dict[str, tuple[int, int]] | None = None, value: Any = None) -> Lines:
        return self._outer.inner(*self._prefix, *path, where=where, value=value)


def within(lines: Lines, *prefix: Any) -> Lines:
    """The lines of the value at ``prefix`` of a document, as a document's own."""
    return _Within(lines, prefix)


def _string_at(lines: Lines, path: tuple[Any, ...]) -> str:
    try:
        if lines._value is None:  # (parsed once, and kept: a file's inner() calls would each parse it again)
            lines._value = yamlsafe.load(lines._text)[0]
        value: Any = lines._value
        for part in path:
            value = value[part]
    except (yamlsafe.YamlProblem, KeyError, IndexError, TypeError):
        return ""
    return value if isinstance(value, str) else ""


class _NoLines(Lines):
    """For values that are not in a YAML file of their own (built in memory)."""

    def __init__(self) -> None:
        super().__init__("", 1)
        self._where = {}


NO_LINES = _NoLines()


def yaml_chunks(text: str) -> list[tuple[int, str]]:
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
