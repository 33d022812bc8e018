"""The shell syntax tree the parser (shell_syntax.py) builds: words as
parts (literal text, parameters, substitutions, arrays), and commands
(simple commands, pipelines, and-or lists, compound commands, functions),
with the line each starts on. :class:`ShellSyntaxError` is a located error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Union

__all__ = ["Lit", "Param", "Sub", "Array", "Part", "Word", "Redirect", "Simple", "Subshell", "Group", "If", "Loop",
           "Case", "FunctionDef", "Arith", "Command", "Pipeline", "AndOr", "CommandList", "ShellSyntaxError",
           "MAX_DEPTH"]

# Nesting of $( ), ( ), ${ }, if/while/case... deeper than this is refused
# (a located error), so that no input can exhaust the parser's stack.
MAX_DEPTH = 50


class Lit(NamedTuple):
    """Literal text; ``quoted`` text is never split into fields or read as an assignment."""
    text: str
    quoted: bool = False


class Param(NamedTuple):
    """``$NAME``, ``${NAME}``, ``${NAME:-word}``, ...; ``op`` is None, one of
    ``- :- = := + :+ ? :?``, or ``complex`` (a form read as unknown)."""
    name: str
    op: str | None
    arg: "Word | None"
    quoted: bool
    raw: str  # as written, for messages


class Sub(NamedTuple):
    """A substitution whose value is known only at run time: ``$(...)``
    (``body`` parsed), backticks, ``$((...))``, ``<(...)``."""
    kind: str   # "command", "backtick", "arith", "process"
    body: "CommandList | None"
    quoted: bool
    raw: str


class Array(NamedTuple):
    """The value of ``NAME=(a b c)``."""
    words: tuple["Word", ...]


Part = Union[Lit, Param, Sub, Array]


class Word(NamedTuple):
    parts: tuple[Part, ...]
    line: int

    def literal(self) -> str | None:
        """The word's text when it holds no expansion (quotes removed), else None."""
        if all(isinstance(p, Lit) for p in self.parts):
            return "".join(p.text for p in self.parts)  # type: ignore[union-attr]
        return None

    def unquoted_literal(self) -> str | None:
        """The word's text when it is one unquoted literal (a reserved word, an assignment's name)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Lit) and not self.parts[0].quoted:
            return self.parts[0].text
        return None


@dataclass
class Redirect:
    op: str                 # "<", ">", ">>", "<<", "<<-", "<<<", ">&", ...
    target: Word | None     # the file, the here-string, or the here-document's delimiter word
    fd: str = ""
    # A here-document: its delimiter, whether it was quoted (then the body is literal), its body and first line.
    delimiter: str = ""
    quoted: bool = False
    body: str | None = None
    body_line: int = 0


@dataclass
class Simple:
    words: list[Word]
    redirects: list[Redirect]
    line: int

    def word_line(self, fields: list[str], index: int, line: int) -> int:
        """The line where the word that gave field ``index`` of the command
        starts (a `-c` script written below the command's first line, `bash
        \\` then `-c "...`), where each word gave one field; else ``line``."""
        return self.words[index].line if len(self.words) == len(fields) and 0 <= index < len(fields) else line


@dataclass
class Subshell:
    body: "CommandList"
    redirects: list[Redirect]
    line: int


@dataclass
class Group:
    body: "CommandList"
    redirects: list[Redirect]
    line: int


@dataclass
class If:
    clauses: list[tuple["CommandList", "CommandList"]]   # (condition, body) of if and each elif
    otherwise: "CommandList | None"
    redirects: list[Redirect]
    line: int


@dataclass
class Loop:
    kind: str                      # while, until, for, select, arith-for
    name: str | None               # for/select: the variable
    words: list[Word] | None       # for/select: the list (None: "$@")
    condition: "CommandList | None"
    body: "CommandList"
    redirects: list[Redirect]
    line: int


@dataclass
class Case:
    word: Word
    arms: list[tuple[list[Word], "CommandList"]]
    redirects: list[Redirect]
    line: int


@dataclass
class FunctionDef:
    name: str
    body: "Command"
    line: int


@dataclass
class Arith:
    """``(( expression ))``: its text (it may assign variables)."""
    text: str
    line: int


Command = Union[Simple, Subshell, Group, If, Loop, Case, FunctionDef, Arith]


@dataclass
class Pipeline:
    commands: list[Command]
    line: int


@dataclass
class AndOr:
    pipelines: list[Pipeline]    # joined by && or ||, which the reading follows in order
    background: bool = False
    line: int = 0
    operators: list[str] = field(default_factory=list)  # `&&` or `||` before each pipeline after the first


@dataclass
class CommandList:
    items: list[AndOr] = field(default_factory=list)


class ShellSyntaxError(Exception):
    def __init__(self, message: str, line: int, *, at_end: bool = False):
        super().__init__(message)
        self.message, self.line, self.at_end = message, line, at_end
