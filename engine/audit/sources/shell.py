"""Shell scripts: each ``vllm serve``, ``python -m
vllm.entrypoints.openai.api_server`` or ``docker run vllm/vllm-openai``
command, after expanding the variables the script itself sets.

Nothing is executed. The script is parsed (shell_syntax.py) and read as the
shell would run it, as far as the text tells: variables the script sets and
exports, ``${VAR:-default}``, functions (called with their arguments),
``eval`` and ``exec``, ``sh -c`` and scripts the file itself writes with a
here-document (``cat > run.sh <<EOF``, then ``bash run.sh``), a
``--config`` file written the same way. What the text cannot tell stays
unknown and is carried as an unresolved marker
(:func:`hma_policy.core.command.unresolved`): ``$1``, ``$(...)``, a
variable never set, and a variable any command may set at run time
(``read``, ``mapfile``, ``getopts``, ``printf -v``, a computed
``declare``/``export``, ``source`` of a file not audited, ``eval`` of an
unknown text): after such a command those variables are unknown.
Subshells, pipelines and background commands (``&``) do not change the
script's variables; after ``if``/``case``/loops a variable set differently
on the paths through them is unknown; ``&&`` and ``||`` are read in order.

Reading is linear in the text: the parser reads each character a bounded
number of times, each value is bounded (``SourceLimits.max_variable_length``)
and all expansion, ``eval`` and function calls share a budget proportional
to the text; where a bound is hit, a ``source.limit`` problem names the line.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...core.command import ENV_NAMES, Arg, ConfigFile, find_vllm, has_unresolved, show, unresolved
from ...core.errors import InputError, Problem
from ...core.limits import DEFAULT_SOURCE_LIMITS
from .context import Ctx
from .deployment import Deployment
from .detect import SHELLS
from .launch import Invocation, apply_facts, config_from_fs, deployment, refuse
from .release import ReleaseHint, from_image, from_pin
from .shell_syntax import parse_body, parse_heredoc_text, parse_script
from .shell_tree import (AndOr, Arith, Array, Case, CommandList, FunctionDef, Group, If, Lit, Loop, Param, Redirect,
                         ShellSyntaxError, Simple, Sub, Subshell, Word)

__all__ = ["shell_file", "argv_invocations", "run_script", "command_words", "VLLM_IMAGE", "Script"]

VLLM_IMAGE = re.compile(r"(^|/)vllm-openai(?:[:@]|$)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_ARITH_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|"
                             r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\+\+|--)|(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)")
_PIP_PIN = re.compile(r"(?i)^vllm(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.+-]*)$")
# How deep function calls, eval, source and scripts run by scripts may nest.
_MAX_NESTING = 8
# Expansion, eval, function calls and sourced text may read this many characters a character of the file.
_BUDGET_FACTOR = 16
_TOO_LONG = "(a value too long to expand)"


class _Var(NamedTuple):
    value: str | None   # None: unset (shadows a value further out)
    exported: bool
    epoch: int          # when it was set: a run-time change later makes it unknown
    line: int = 0       # where it was set (a launch in a text it holds, run by eval, is placed there)


_UNSET = _Var(None, False, 0)


class _Scope:
    """Variables and functions, in layers: a branch, a subshell or a
    function call reads through to the layers below and writes its own,
    which a branch's end merges down (and a subshell's end discards). A
    ``view`` is a new shell's (``bash -c``): it sees only exported variables
    below it. ``barrier``: a command that may have set any variable at run
    time (epoch, why): every variable set before it is unknown."""

    __slots__ = ("parent", "vars", "funcs", "barrier", "view", "frame", "locals", "positional", "terminated")

    def __init__(self, parent: _Scope | None = None, *, view: bool = False, frame: bool = False,
                 positional: list[str] | None = None):
        self.parent = parent
        self.vars: dict[str, _Var] = {}
        self.funcs: dict[str, FunctionDef] = {}
        self.barrier: tuple[int, str] | None = None
        self.view, self.frame = view, frame
        self.locals: set[str] = set()
        # The positional parameters ($1 ...) of a function call or a new shell; None: as the layer below.
        self.positional = positional
        self.terminated = False  # `exit` (or `return` in a function) was met on this path

    def lookup(self, name: str) -> _Var | None:
        """The variable's value where it is set, else None."""
        var = self.record(name)
        return var if var is not None and var.value is not None else None

    def record(self, name: str) -> _Var | None:
        """What this scope knows of a variable: set, unset (value None, maybe exported), or nothing."""
        scope: _Scope | None = self
        barrier: tuple[int, str] | None = None
        exported_only = False
        while scope is not None:
            if scope.barrier is not None and (barrier is None or scope.barrier[0] > barrier[0]):
                barrier = scope.barrier
            var = scope.vars.get(name)
            if var is not None:
                if exported_only and not var.exported:
                    return None
                if var.value is not None and barrier is not None and var.epoch < barrier[0]:
                    return _Var(unresolved("$" + name, barrier[1]), var.exported, var.epoch, var.line)
                return var
            if scope.view:
                exported_only = True
                # A new shell sees the run-time changes of its parent's variables too.
            scope = scope.parent
        return None

    def function(self, name: str) -> FunctionDef | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.funcs:
                return scope.funcs[name]
            if scope.view:
                return None
            scope = scope.parent
        return None

    def params(self) -> list[str] | None:
        scope: _Scope | None = self
        while scope is not None:
            if scope.positional is not None:
                return scope.positional
            if scope.view:
                return None
            scope = scope.parent
        return None

    def frame_scope(self) -> _Scope | None:
        scope: _Scope | None = self
        while scope is not None and not scope.frame:
            if scope.view:
                return None
            scope = scope.parent
        return scope


class Script(NamedTuple):
    """A file a script writes (``cat > run.sh <<EOF``), as the script left it at a point."""
    text: str
    line: int          # where its text starts in the audited file
    in_file: bool      # its lines are the audited file's (a here-document), so launches in it keep their lines


@dataclass
class _Place:
    """Where the text being read sits: lines of the audited file (each
    launch at its own line), or a text made at run time (``eval``, ``sh -c
    STRING``, a container's command) whose launches are all at ``fixed``."""
    origin: Callable[[int], str]
    anchor: Callable[[int], str]
    fixed: int | None = None

    def line(self, line: int) -> int:
        return self.fixed if self.fixed is not None else line

    def inner(self, line: int) -> "_Place":
        """The place of a text made at run time at ``line``."""
        at = self.line(line)
        return _Place(self.origin, self.anchor, at)


@dataclass
class _Run:
    """One reading of a script: what it found and what it may still spend."""
    ctx: Ctx
    problems: list[Problem]
    budget: int
    found: list[Invocation] = field(default_factory=list)
    files: dict[str, list[tuple[int, Script]]] = field(default_factory=dict)   # path -> (sequence, content), in order
    sequence: int = 0
    epoch: int = 0
    nesting: int = 0
    pins: list[tuple[ReleaseHint, int]] = field(default_factory=list)   # `pip install vllm==X` pins, and where met
    limited: set[str] = field(default_factory=set)
    syntax_errors: int = 0
    collect: bool = True    # launches are collected (not while reading a sourced file)
    sourcing: tuple[str, ...] = ()
    # Functions in the order they were defined, with where their text is; which were called;
    # which came from a sourced file (their launches are that file's).
    defined: list[tuple[FunctionDef, "_Place"]] = field(default_factory=list)
    called: set[int] = field(default_factory=set)
    foreign: set[int] = field(default_factory=set)

    def next_epoch(self) -> int:
        self.epoch += 1
        return self.epoch

    def limit(self, kind: str, message: str, line: int | None) -> None:
        """A bound hit: reported once a file for each kind."""
        if kind not in self.limited:
            self.limited.add(kind)
            self.problems.append(self.ctx.problem("source.limit", message, line=line))

    def spend(self, amount: int, line: int | None) -> bool:
        self.budget -= amount
        if self.budget < 0:
            self.limit("budget", "the script expands to more text than the audit reads for a file of its size "
                       f"(at line {line}); it is not read past this point", line)
            return False
        return True

    def file_at(self, path: str, sequence: int | None = None) -> Script | None:
        return _written(self.files, path, self.sequence if sequence is None else sequence)


def _written(files: dict[str, list[tuple[int, Script]]], path: str, sequence: int | None) -> Script | None:
    """The file ``path`` as the script had written it at ``sequence``."""
    versions = files.get(_normal(path))
    for seq, script in reversed(versions or ()):
        if sequence is None or seq <= sequence:
            return script
    return None


class _Stop(Exception):
    """The budget is spent: the reading ends here."""


def _normal(path: str) -> str:
    return posixpath.normpath(path) if path else path


# -- expansion -------------------------------------------------------------------------

class _Expander:
    """Words to fields, as the shell expands them, from what the script sets."""

    def __init__(self, run: _Run, scope: _Scope, line: int):
        self.run, self.scope, self.line = run, scope, line

    def param(self, part: Param) -> str | None:
        """The value of a parameter expansion (None: unset and empty)."""
        name, op = part.name, part.op
        if op == "complex" or not name:
            return unresolved(part.raw)
        if name in ("@", "*", "#") or name.isdigit():
            params = self.scope.params()
            if params is None:
                return unresolved("$" + name if len(part.raw) < 3 else part.raw)
            if name == "#":
                return str(len(params))
            if name in ("@", "*"):
                return " ".join(params)
            index = int(name)
            if index == 0:
                return unresolved("$0")
            value: str | None = params[index - 1] if index <= len(params) else None
        elif name in ("?", "$", "!", "-"):
            return unresolved("$" + name)
        else:
            var = self.scope.lookup(name)
            value = var.value if var is not None else None
        if op is None:
            return value if value is not None else unresolved(part.raw)
        colon = op.startswith(":")
        empty = value is None or (colon and value == "")
        kind = op[-1]
        if kind == "-":
            return self.word(part.arg) if empty else value
        if kind == "=":
            if not empty:
                return value
            default = self.word(part.arg)
            if _NAME.fullmatch(name):
                _assign(self.run, self.scope, name, default)
            return default
        if kind == "+":
            return "" if empty else self.word(part.arg)
        return value if not empty else unresolved("$" + name)  # ? : the shell stops with an error

    def word(self, word: Word | None) -> str:
        """A word's value as one string (no field splitting): an assignment's value, a default."""
        if word is None:
            return ""
        return "".join(text if text is not None else " " for text, _ in self.segments(word))

    def segments(self, word: Word) -> list[tuple[str | None, bool]]:
        """The word's pieces with whether each is subject to field splitting
        (None: a field break, between two parameters of "$@")."""
        out: list[tuple[str | None, bool]] = []
        for index, part in enumerate(word.parts):
            if isinstance(part, Lit):
                if index == 0 and not part.quoted and part.text.startswith("~"):
                    home, slash, rest = part.text.partition("/")  # ~ or ~user: a home directory, not known
                    out.append((unresolved(home), False))
                    if slash:
                        out.append(("/" + rest, False))
                    continue
                out.append((part.text, False))
            elif isinstance(part, Param):
                params = self.scope.params() if part.name == "@" and part.op is None else None
                if params is not None and part.quoted:
                    for k, param in enumerate(params):  # "$@": each parameter a field
                        if k:
                            out.append((None, False))
                        out.append((param, False))
                    continue
                value = self.param(part)
                if value is None:
                    continue
                self.charge(value)
                out.append((value, not part.quoted))
            elif isinstance(part, Sub):
                value = self.substitution(part)
                out.append((value, not part.quoted and not has_unresolved(value)))
            else:  # an array's value
                out.append((unresolved("(...)"), False))
        return out

    def substitution(self, part: Sub) -> str:
        """The text a few substitutions give, written out (never run):
        `$(cat <<EOF ... EOF)`, `$(echo WORDS)` and `$(printf '%s' WORD)`,
        each optionally through `| tr -d SET`. Any other is unknown."""
        if part.kind == "command" and part.body is not None and len(part.body.items) == 1:
            pipelines = part.body.items[0].pipelines
            commands = pipelines[0].commands if len(pipelines) == 1 else []
            if 1 <= len(commands) <= 2 and all(isinstance(c, Simple) for c in commands):
                text = self.output(commands[0])  # type: ignore[arg-type]
                if text is not None and len(commands) == 2:
                    text = self.deleted(commands[1], text)  # type: ignore[arg-type]
                if text is not None:
                    return text.rstrip("\n")
        return unresolved(part.raw)

    def output(self, command: Simple) -> str | None:
        if not command.words:
            return None
        head = command.words[0].literal()
        if head == "cat" and len(command.words) == 1:
            return _stdin(self.run, self.scope, command.redirects, self.line)
        if command.redirects:
            return None
        fields = [f for w in command.words[1:] for f in self.fields(w)]
        if head == "echo" and not any(f.startswith("-") and f != "-n" for f in fields[:1]):
            newline = fields[:1] != ["-n"]
            return " ".join(fields[0 if newline else 1:]) + ("\n" if newline else "")
        if head == "printf" and fields[:1] in (["%s"], ["%s\\n"]) and len(fields) == 2:
            return fields[1] + ("\n" if fields[0].endswith("n") else "")
        return None

    def deleted(self, command: Simple, text: str) -> str | None:
        """`tr -d SET`: the characters of SET (literal, \\n \\t \\r, [:space:], [:blank:]) removed."""
        fields = [f for w in command.words for f in self.fields(w)]
        if len(fields) != 3 or fields[:2] != ["tr", "-d"] or command.redirects:
            return None
        spec = fields[2]
        for name, chars in (("[:space:]", " \t\n\r\v\f"), ("[:blank:]", " \t")):
            spec = spec.replace(name, chars)
        spec = spec.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
        if "[" in spec or "-" in spec[1:-1] or "\\" in spec or has_unresolved(spec):
            return None  # ranges, classes and escapes not read here
        return text.translate({ord(c): None for c in spec if c != "\x00"})

    def charge(self, value: str) -> None:
        if not self.run.spend(len(value), self.line):
            raise _Stop

    def fields(self, word: Word) -> list[str]:
        """The fields of a word: unquoted expansions split at IFS; an empty
        unquoted expansion is no field; "$@" is one field each parameter."""
        ifs = self.ifs()
        fields: list[list[str]] = [[]]
        for text, split in self.segments(word):
            if text is None:  # between two of "$@"'s fields
                fields.append([])
                continue
            if not split:
                fields[-1].append(text)
                continue
            pieces = _split(text, ifs)
            if pieces is None:
                continue
            lead, words, trail = pieces
            if lead and fields[-1]:
                fields.append([])
            for k, piece in enumerate(words):
                if k:
                    fields.append([])
                fields[-1].append(piece)
            if trail:
                fields.append([])
        return ["".join(f) for f in fields if f]

    def ifs(self) -> str:
        var = self.scope.lookup("IFS")
        if var is None or var.value is None or has_unresolved(var.value):
            return " \t\n"
        return var.value


def _common_start(values: list[str | None], unknown: str) -> str:
    """What several paths agree a value starts with, then ``unknown``: a
    command line built up on some paths (`CMD="$CMD $arg"`) keeps its known
    start. Unset on a path, or no common start: ``unknown`` alone."""
    if any(v is None for v in values):
        return unknown
    start = posixpath.commonprefix(values)  # type: ignore[type-var]
    if start.count("\x00") % 2:  # never half a marker
        start = start[:start.rfind("\x00")]
    rests = [v[len(start):] for v in values if len(v) > len(start)]  # type: ignore[arg-type]
    return start + (" " if start and rests and all(r[:1].isspace() for r in rests) else "") + unknown


def _split(text: str, ifs: str) -> tuple[bool, list[str], bool] | None:
    """Field splitting of an unquoted expansion's text: (starts with a
    separator, the fields, ends with one); None for empty text."""
    if not text:
        return None
    if not ifs:
        return (False, [text], False)
    if not ifs.strip(" \t\n"):  # whitespace only: runs of it separate, at the ends they vanish
        words = text.split() if ifs == " \t\n" else re.split("[" + re.escape(ifs) + "]+", text.strip(ifs))
        words = [w for w in words if w]
        return (text[0] in ifs, words, text[-1] in ifs)
    words = re.split("[" + re.escape(ifs) + "]", text)
    lead, trail = words[0] == "", len(words) > 1 and words[-1] == ""
    return (lead, words[1 if lead else 0:len(words) - 1 if trail else len(words)], trail)


def _assign(run: _Run, scope: _Scope, name: str, value: str, *, exported: bool | None = None, local: bool = False,
            line: int | None = None) -> None:
    if len(value) > run.ctx.limits.max_variable_length:
        run.limit("variable", f"a value of `{name}` grows past {run.ctx.limits.max_variable_length} characters at line "
                  f"{line}; it is read as unknown from there", line)
        value = unresolved(_TOO_LONG)
    current = scope.record(name)
    if exported is None:
        exported = (current is not None and current.exported) or _allexport(scope)
    if local:
        frame = scope.frame_scope()
        if frame is not None:
            frame.locals.add(name)
    scope.vars[name] = _Var(value, exported, run.next_epoch(), line or 0)


def _allexport(scope: _Scope) -> bool:
    var = scope.lookup("-a")  # `set -a`, kept as a variable no script can name
    return var is not None and var.value == "1"


def _runtime(run: _Run, scope: _Scope, names: Iterable[str], why: str) -> None:
    """Variables a command sets at run time: unknown from here."""
    for name in names:
        current = scope.lookup(name)
        scope.vars[name] = _Var(unresolved("$" + name, why), current is not None and current.exported, run.next_epoch())


def _clobber(run: _Run, scope: _Scope, why: str) -> None:
    """A command that may set any variable: every variable set so far is unknown."""
    scope.barrier = (run.next_epoch(), why)


def _stdin(run: _Run, scope: _Scope, redirects: Sequence[Redirect], line: int) -> str | None:
    """The text a command reads on its standard input, from a here-document or a here-string."""
    text = None
    for redirect in redirects:
        if redirect.op in ("<<", "<<-") and redirect.body is not None and redirect.fd in ("", "0"):
            if redirect.quoted:
                text = redirect.body
            else:
                parts = parse_heredoc_text(redirect.body, redirect.body_line)
                text = _Expander(run, scope, line).word(Word(parts, redirect.body_line))
        elif redirect.op == "<<<" and redirect.target is not None:
            text = _Expander(run, scope, line).word(redirect.target) + "\n"
    return text


# -- interpretation ---------------------------------------------------------------------------

class _Interpreter:
    def __init__(self, run: _Run, place: _Place):
        self.run, self.place = run, place

    # lists and compound commands
    def run_list(self, commands: CommandList, scope: _Scope) -> None:
        for item in commands.items:
            if scope.terminated:
                return
            self.run_and_or(item, scope)

    def run_and_or(self, item: AndOr, scope: _Scope) -> None:
        target = _Scope(scope) if item.background else scope  # `cmd &` runs in a subshell
        for index, pipeline in enumerate(item.pipelines):
            before = target.terminated
            if len(pipeline.commands) == 1:
                self.run_command(pipeline.commands[0], target)
            else:  # each command of a pipeline runs in a subshell
                for command in pipeline.commands:
                    self.run_command(command, _Scope(target))
            if index > 0 and not before:
                target.terminated = False  # `cmd || exit 1`: the path may go on

    def run_command(self, command: Any, scope: _Scope) -> None:
        if isinstance(command, Simple):
            self.run_simple(command, scope)
        elif isinstance(command, Subshell):
            self.run_list(command.body, _Scope(scope))
        elif isinstance(command, Group):
            self.run_list(command.body, scope)
        elif isinstance(command, If):
            self.run_if(command, scope)
        elif isinstance(command, Loop):
            self.run_loop(command, scope)
        elif isinstance(command, Case):
            self.run_case(command, scope)
        elif isinstance(command, FunctionDef):
            scope.funcs[command.name] = command
            self.run.defined.append((command, self.place))
            if not self.run.collect:
                self.run.foreign.add(id(command))
        elif isinstance(command, Arith):
            names = {n for match in _ARITH_ASSIGNED.finditer(command.text) for n in match.groups() if n}
            _runtime(self.run, scope, sorted(names), f"is set by `((...))` at line {self.place.line(command.line)}")

    def run_if(self, command: If, scope: _Scope) -> None:
        paths: list[_Scope] = []
        first = True
        for condition, body in command.clauses:
            if first:
                self.run_list(condition, scope)  # the first condition always runs
                branch = _Scope(scope)
                first = False
            else:
                branch = _Scope(scope)
                self.run_list(condition, branch)
            self.run_list(body, branch)
            paths.append(branch)
        otherwise = _Scope(scope)
        if command.otherwise is not None:
            self.run_list(command.otherwise, otherwise)
        paths.append(otherwise)
        self.merge(scope, paths, f"`if` at line {self.place.line(command.line)}")

    def run_loop(self, command: Loop, scope: _Scope) -> None:
        line = self.place.line(command.line)
        if command.kind in ("for", "select") and command.name:
            items = None
            if command.kind == "for" and command.words is not None:
                expander = _Expander(self.run, scope, line)
                items = [f for w in command.words for f in expander.fields(w)]
                if len(items) > 16 or any(has_unresolved(i) or any(ch in i for ch in "*?[") for i in items):
                    items = None
            if items is not None:
                # A list the text gives: each item in turn, as the shell runs them.
                for item in items:
                    _assign(self.run, scope, command.name, item, line=line)
                    self.run_list(command.body, scope)
                    scope.terminated = False
                return
            _runtime(self.run, scope, [command.name], f"is set by `{command.kind}` at line {line}")
        if command.condition is not None:
            self.run_list(command.condition, scope)  # runs at least once
            scope.terminated = False
        body = _Scope(scope)
        self.run_list(command.body, body)
        body.terminated = False
        self.merge(scope, [body, _Scope(scope)], f"the loop at line {line}")

    def run_case(self, command: Case, scope: _Scope) -> None:
        line = self.place.line(command.line)
        expander = _Expander(self.run, scope, line)
        subject = expander.word(command.word)
        chosen = None
        if not has_unresolved(subject):
            for index, (patterns, _) in enumerate(command.arms):
                values = [expander.word(p) for p in patterns]
                if any(has_unresolved(v) for v in values):
                    break
                if any(fnmatch.fnmatchcase(subject, v) for v in values):
                    chosen = index
                    break
            else:
                return  # no arm matches
        if chosen is not None:
            self.run_list(command.arms[chosen][1], scope)
            return
        paths = []
        catch_all = False
        for patterns, body in command.arms:
            branch = _Scope(scope)
            self.run_list(body, branch)
            paths.append(branch)
            catch_all = catch_all or any(p.literal() == "*" and p.unquoted_literal() == "*" for p in patterns)
        if not catch_all:
            paths.append(_Scope(scope))
        self.merge(scope, paths, f"`case` at line {line}")

    def merge(self, scope: _Scope, paths: list[_Scope], where: str) -> None:
        """After paths of which any may have been taken: what they agree on,
        and the rest unknown. Paths that ended (`exit`) are left out."""
        live = [p for p in paths if not p.terminated]
        if not live:
            return
        barriers = [p.barrier for p in live if p.barrier is not None]
        if barriers:
            _clobber(self.run, scope, max(barriers)[1])
        names: dict[str, None] = {}
        for path in live:
            names.update(dict.fromkeys(path.vars))
            for name, fn in path.funcs.items():
                scope.funcs[name] = fn
        for name in names:
            found = [p.lookup(name) for p in live]
            values = {(v.value, v.exported) if v is not None else None for v in found}
            line = min((v.line for v in found if v is not None and v.line), default=0)
            if len(values) == 1:
                (value,) = values
                if value is None:
                    scope.vars[name] = _UNSET
                else:
                    scope.vars[name] = _Var(value[0], value[1], self.run.next_epoch(), line)
            else:
                exported = any(v is not None and v[1] for v in values)
                merged = _common_start([v.value if v is not None else None for v in found],
                                       unresolved("$" + name, f"is set differently on the paths through {where}"))
                scope.vars[name] = _Var(merged, exported, self.run.next_epoch(), line)
        frame = scope.frame_scope()
        if frame is not None:
            for path in live:
                frame.locals |= path.locals

    # simple commands
    def run_simple(self, command: Simple, scope: _Scope) -> None:
        run = self.run
        line = self.place.line(command.line)
        if not run.spend(1 + len(command.words), line):
            raise _Stop
        expander = _Expander(run, scope, line)
        assignments: list[tuple[str, bool, Word]] = []
        index = 0
        for word in command.words:
            head = word.parts[0] if word.parts else None
            match = _ASSIGNMENT.match(head.text) if isinstance(head, Lit) and not head.quoted else None
            if match is None:
                break
            rest = (Lit(head.text[match.end():]),) + word.parts[1:]  # type: ignore[union-attr]
            assignments.append((match.group(1), bool(match.group(2)), Word(rest, word.line)))
            index += 1
        words = command.words[index:]
        if not words:
            for name, append, value_word in assignments:
                self.assign_word(scope, name, append, value_word, line)
            self.write_files(command, [], scope, line)
            return
        name = words[0].literal()
        if name in ("export", "declare", "typeset", "local", "readonly"):
            self.declaration(name, words[1:], scope, line)
            return
        fields = [f for w in words for f in expander.fields(w)]
        env = {n: Arg(self.value(scope, n, value_word, append), self.place.origin(line))
               for n, append, value_word in assignments}
        self.dispatch(fields, env, command, scope, line)

    def value(self, scope: _Scope, name: str, value_word: Word, append: bool) -> str:
        expander = _Expander(self.run, scope, self.place.line(value_word.line))
        if any(isinstance(p, Array) for p in value_word.parts):
            return unresolved(f"${{{name}[@]}}")
        value = expander.word(value_word)
        if append:
            current = scope.lookup(name)
            value = (current.value if current is not None and current.value is not None else "") + value
        return value

    def assign_word(self, scope: _Scope, name: str, append: bool, value_word: Word, line: int, *,
                    exported: bool | None = None, local: bool = False) -> None:
        _assign(self.run, scope, name, self.value(scope, name, value_word, append), exported=exported, local=local,
                line=line)

    def declaration(self, builtin: str, words: list[Word], scope: _Scope, line: int) -> None:
        """export, declare, typeset, local, readonly: their arguments are assignments."""
        expander = _Expander(self.run, scope, line)
        exported: bool | None = True if builtin == "export" else None
        local = builtin == "local" or (builtin in ("declare", "typeset") and scope.frame_scope() is not None)
        array = False
        for word in words:
            literal = word.unquoted_literal()
            if literal is not None and literal[:1] in ("-", "+") and len(literal) > 1:
                letters = literal[1:]
                if "x" in letters:
                    exported = literal[0] == "-"
                if "g" in letters:
                    local = False
                if "a" in letters or "A" in letters or "i" in letters:
                    array = True
                if "n" in letters and literal[0] == "-":
                    _clobber(self.run, scope, f"is set at run time through a name reference (`{builtin} -n` at line {line})")
                if "f" in letters or "F" in letters or "p" in letters:
                    return
                continue
            head = word.parts[0] if word.parts else None
            match = _ASSIGNMENT.match(head.text) if isinstance(head, Lit) and not head.quoted else None
            if match is not None and match.end() > 0:
                name = match.group(1)
                if array:
                    _runtime(self.run, scope, [name], f"is an array or integer `{builtin}` sets at line {line}")
                    continue
                rest = (Lit(head.text[match.end():]),) + word.parts[1:]  # type: ignore[union-attr]
                self.assign_word(scope, name, bool(match.group(2)), Word(rest, word.line), line, exported=exported,
                                 local=local)
                continue
            plain = word.literal()
            if plain is not None and _NAME.fullmatch(plain):
                current = scope.lookup(plain)
                if local:
                    _assign(self.run, scope, plain, "", exported=exported, local=True, line=line)
                    scope.vars[plain] = _UNSET
                elif current is not None and exported is not None:
                    scope.vars[plain] = _Var(current.value, exported, current.epoch)
                elif current is None and exported:
                    scope.vars[plain] = _Var(None, True, self.run.next_epoch())  # exported once it is set
                continue
            # A name made at run time (`export $(cat .env)`, `declare "$n=..."`): any variable may change.
            values = expander.fields(word)
            if all(not has_unresolved(v) and _ASSIGNMENT.match(v) for v in values) and values:
                for value in values:
                    match = _ASSIGNMENT.match(value)
                    _assign(self.run, scope, match.group(1), value[match.end():], exported=exported,  # type: ignore[union-attr]
                            local=local, line=line)
                continue
            _clobber(self.run, scope, f"may be set at run time by `{builtin}` of a computed name at line {line}")

    def dispatch(self, fields: list[str], env: dict[str, Arg], command: Simple, scope: _Scope, line: int) -> None:
        """A simple command's expanded words: a builtin that changes the
        script's variables, a call, a script run, or a vLLM launch."""
        if not fields:
            return
        run = self.run
        name = fields[0]
        args = fields[1:]
        if name == "exec":
            rest = args
            while rest and rest[0].startswith("-") and rest[0] != "--":
                rest = rest[2:] if rest[0] == "-a" else rest[1:]
            if rest and rest[0] == "--":
                rest = rest[1:]
            if rest:
                self.dispatch(rest, env, command, scope, line)
            return
        if name in ("unset",):
            for arg in args:
                if not arg.startswith("-") and _NAME.fullmatch(arg):
                    scope.vars[arg] = _UNSET
                elif has_unresolved(arg):
                    _clobber(run, scope, f"may be unset at run time by `unset` at line {line}")
            return
        if name == "set":
            self.set_options(args, scope)
            return
        if name == "shift":
            params = scope.params()
            if params is not None:
                count = int(args[0]) if args and args[0].isdigit() else 1
                holder = self.params_holder(scope)
                holder.positional = params[count:]
            return
        if name == "read":
            self.runtime_names(scope, _operands(args, "ad" "inNptu", "-a"), ["REPLY"], "read", line)
            return
        if name in ("mapfile", "readarray"):
            names = _operands(args, "dnOsuCc", None)
            self.runtime_names(scope, names[-1:], ["MAPFILE"], name, line)
            return
        if name == "getopts":
            operands = [a for a in args if not a.startswith("-")]
            self.runtime_names(scope, operands[1:2] + ["OPTARG", "OPTIND"], [], "getopts", line)
            return
        if name == "printf" and args[:1] == ["-v"]:
            self.runtime_names(scope, args[1:2], [], "printf -v", line)
            return
        if name == "let":
            names = {n for arg in args for m in _ARITH_ASSIGNED.finditer(arg) for n in m.groups() if n}
            _runtime(run, scope, sorted(names), f"is set by `let` at line {line}")
            return
        if name in ("source", "."):
            self.source(args, scope, line)
            return
        if name == "eval":
            # A launch in the text is placed where the text was written: `CMD="vllm serve ..."; eval "$CMD"`.
            at = line
            first = command.words[1].parts[0] if len(command.words) > 1 and command.words[1].parts else None
            if isinstance(first, Param) and first.op is None and self.place.fixed is None:
                var = scope.lookup(first.name)
                at = var.line if var is not None and var.line else line
            self.eval(" ".join(args), scope, line, at)
            return
        if name == "exit" or (name == "return" and scope.frame_scope() is not None):
            scope.terminated = True
            return
        self.note_pins(fields, line)
        self.write_files(command, fields, scope, line)
        function = scope.function(name)
        if function is not None:
            self.call(function, args, scope, line)
            return
        if self.launch(fields, env, scope, line):
            return
        self.run_scripts(fields, command, scope, line)

    def params_holder(self, scope: _Scope) -> _Scope:
        target: _Scope | None = scope
        while target is not None and target.positional is None:
            target = target.parent
        return target or scope

    def set_options(self, args: list[str], scope: _Scope) -> None:
        options = [a for a in args if a[:1] in "-+" and a != "--"]
        for option in options:
            if option in ("-a", "+a") or ("a" in option[1:] and option[1:].isalpha()):
                scope.vars["-a"] = _Var("1" if option[0] == "-" else "", False, self.run.next_epoch())
        for index, option in enumerate(args):
            if option in ("-o", "+o") and index + 1 < len(args) and args[index + 1] == "allexport":
                scope.vars["-a"] = _Var("1" if option == "-o" else "", False, self.run.next_epoch())
        if "--" in args:
            self.params_holder(scope).positional = args[args.index("--") + 1:]
        elif args and args[0][:1] not in "-+":
            self.params_holder(scope).positional = list(args)

    def runtime_names(self, scope: _Scope, names: list[str], default: list[str], builtin: str, line: int) -> None:
        if any(has_unresolved(n) or not _NAME.fullmatch(n) for n in names):
            _clobber(self.run, scope, f"may be set at run time by `{builtin}` at line {line}")
            return
        _runtime(self.run, scope, names or default, f"is set at run time by `{builtin}` at line {line}")

    # files, scripts and calls
    def write_files(self, command: Simple, fields: list[str], scope: _Scope, line: int) -> None:
        """`cat > FILE <<EOF`, `tee FILE <<EOF`, `echo TEXT > FILE`: the file's content, for a later
        `bash FILE` or `--config FILE`."""
        targets = [r for r in command.redirects if r.op in (">", ">>", ">|") and r.fd in ("", "1") and r.target is not None]
        name = fields[0] if fields else ""
        content: str | None = None
        body_line = self.place.line(command.line)
        in_file = False
        paths: list[str] = []
        if name in ("cat", "tee") and all(not f.startswith("-") for f in fields[1:]):
            content = _stdin(self.run, scope, command.redirects, line)
            heredoc = next((r for r in command.redirects if r.op in ("<<", "<<-") and r.body is not None), None)
            if heredoc is not None and self.place.fixed is None:
                body_line, in_file = heredoc.body_line, True
            if name == "tee":
                paths += fields[1:]
            elif len(fields) > 1:
                content = None  # cat of files: not known
        elif name == "echo" and fields[1:2] != ["-e"]:
            newline = fields[1:2] != ["-n"]
            content = " ".join(fields[2:] if not newline else fields[1:]) + ("\n" if newline else "")
        if content is None:
            return
        expander = _Expander(self.run, scope, line)
        paths += [expander.word(r.target) for r in targets if r.target is not None]  # type: ignore[misc]
        for path in paths:
            if not path or has_unresolved(path):
                continue
            append = any(r.op == ">>" for r in targets)
            previous = self.run.file_at(path) if append else None
            text = (previous.text if previous else "") + content
            self.run.sequence += 1
            self.run.files.setdefault(_normal(path), []).append(
                (self.run.sequence, Script(text, previous.line if previous else body_line, in_file and previous is None)))

    def call(self, function: FunctionDef, args: list[str] | None, scope: _Scope, line: int) -> None:
        """A function run with ``args`` (None: arguments not known)."""
        run = self.run
        if run.nesting >= _MAX_NESTING:
            _clobber(run, scope, f"may be set by `{function.name}`, called more than {_MAX_NESTING} calls deep "
                     f"at line {line}")
            return
        run.called.add(id(function))
        frame = _Scope(scope, frame=True, positional=list(args) if args is not None else None)
        collect = run.collect
        run.collect = collect and id(function) not in run.foreign
        run.nesting += 1
        try:
            self.run_command(function.body, frame)
        finally:
            run.nesting -= 1
            run.collect = collect
        # What the function set that was not local is the caller's now.
        for name, var in frame.vars.items():
            if name not in frame.locals:
                scope.vars[name] = var
        if frame.barrier is not None:
            scope.barrier = frame.barrier
        scope.funcs.update(frame.funcs)

    def source(self, args: list[str], scope: _Scope, line: int) -> None:
        """`source FILE` / `. FILE`: a file this script wrote, or one the audit reads, is read in this
        shell; any other may set any variable."""
        path = args[0] if args else ""
        written = self.run.file_at(path) if path and not has_unresolved(path) else None
        if written is not None:
            self.nested_text(written, scope, line, positional=args[1:] or None, share=True)
            return
        text = self.disk_script(path)
        if text is not None and self.run.nesting < _MAX_NESTING and path not in self.run.sourcing:
            # Read for the variables it sets; its own launches are reported with that file.
            saved_collect, saved_sourcing = self.run.collect, self.run.sourcing
            self.run.collect, self.run.sourcing = False, saved_sourcing + (path,)
            self.run.nesting += 1
            try:
                parsed = parse_body(text.replace("\x00", "\ufffd"))
                if isinstance(parsed, ShellSyntaxError):
                    _clobber(self.run, scope, f"may be set by `source {path}` at line {line}, which cannot be read")
                else:
                    _Interpreter(self.run, self.place.inner(line)).run_list(parsed, scope)
            finally:
                self.run.nesting -= 1
                self.run.collect, self.run.sourcing = saved_collect, saved_sourcing
            return
        _clobber(self.run, scope, f"may be set by `{'source'} {path or '...'}` at line {line}, a file the audit does not read")

    def disk_script(self, path: str) -> str | None:
        """A sourced file's text, when it lies inside the audited paths (never outside)."""
        ctx = self.run.ctx
        if not path or has_unresolved(path) or not ctx.fs:
            return None
        reader = config_from_fs(ctx, ctx.path.parent)
        try:
            return reader(path).text
        except InputError:  # refused (missing, outside the audited paths, too large): not read
            return None

    def eval(self, text: str, scope: _Scope, line: int, at: int) -> None:
        if _only_markers(text):
            _clobber(self.run, scope, f"may be set by `eval` of a text this file does not give (line {line})")
            return
        # An unknown part of the text is read as one word, as in any command line (`vllm serve $ARGS`).
        self.nested_text(Script(text, at, False), scope, at, share=True)

    def nested_text(self, script: Script, scope: _Scope, line: int, *, positional: list[str] | None = None,
                    share: bool = False, fresh: bool = False) -> None:
        """Run a text: in this shell (``share``: eval, source), or a new one
        that sees the exported variables (``fresh``: one that sees nothing,
        a remote shell)."""
        run = self.run
        if run.nesting >= _MAX_NESTING:
            if share:
                _clobber(run, scope, f"may be set by a script nested more than {_MAX_NESTING} deep (line {line})")
            return
        if not run.spend(len(script.text), line):
            raise _Stop
        place = _Place(self.place.origin, self.place.anchor) if script.in_file and self.place.fixed is None \
            else self.place.inner(line)
        parsed = parse_body(script.text.replace("\x00", "\ufffd") if script.in_file else script.text,
                            script.line if script.in_file else line)
        if isinstance(parsed, ShellSyntaxError):
            run.problems.append(run.ctx.problem("source.shell_syntax", f"cannot read the script run at line {line}: "
                                                f"{parsed.message}", line=place.line(parsed.line)))
            if share:
                _clobber(run, scope, f"may be set by a script that cannot be read (line {line})")
            return
        if share:
            target = scope
        elif fresh:
            target = _Scope(None, positional=positional or [])
        else:
            target = _Scope(scope, view=True, positional=positional or [])
        run.nesting += 1
        try:
            _Interpreter(run, place).run_list(parsed, target)
        finally:
            run.nesting -= 1
        if share:
            scope.terminated = False

    def run_scripts(self, fields: list[str], command: Simple, scope: _Scope, line: int) -> None:
        """`bash -c SCRIPT`, `bash FILE` (a file this script wrote), `bash <<EOF`, `./FILE`, `ssh host CMD`."""
        nested = _nested_script(fields)
        if nested is not None:
            script, rest = nested
            self.nested_text(Script(script, line, False), scope, line, positional=rest[1:])
            return
        for index, word in enumerate(fields):
            base = word.rsplit("/", 1)[-1]
            if base in SHELLS:
                operands = [f for f in fields[index + 1:] if not f.startswith("-")]
                if operands:
                    written = self.run.file_at(operands[0]) if not has_unresolved(operands[0]) else None
                    if written is not None:
                        self.nested_text(written, scope, line, positional=operands[1:])
                    return
                stdin = _stdin(self.run, scope, command.redirects, line)
                if stdin is not None:
                    self.nested_text(self.stdin_script(command, stdin, line), scope, line, positional=[])
                return
            written = self.run.file_at(word) if "/" in word or index == 0 else None
            if written is not None and index == 0:
                self.nested_text(written, scope, line, positional=fields[1:])
                return
            if base == "ssh":
                remote = _ssh_command(fields[index + 1:])
                stdin = _stdin(self.run, scope, command.redirects, line)
                if stdin is not None and (not remote or (remote[0].rsplit("/", 1)[-1] in SHELLS and "-c" not in remote)):
                    self.nested_text(self.stdin_script(command, stdin, line), scope, line, fresh=True)
                elif remote:
                    self.nested_text(Script(" ".join(remote), line, False), scope, line, fresh=True)
                return

    def stdin_script(self, command: Simple, text: str, line: int) -> Script:
        heredoc = next((r for r in command.redirects if r.op in ("<<", "<<-") and r.body is not None), None)
        if heredoc is not None and self.place.fixed is None:
            return Script(text, heredoc.body_line, True)
        return Script(text, line, False)

    def note_pins(self, fields: list[str], line: int) -> None:
        """`pip install vllm==X.Y.Z` (also pip3, python -m pip, uv pip): the release the launches after it run."""
        if "install" not in fields or not any(f.rsplit("/", 1)[-1] in ("pip", "pip3", "uv") or f == "pip" for f in fields):
            return
        for word in fields[fields.index("install") + 1:]:
            match = _PIP_PIN.match(word)
            if match or (word.lower().startswith("vllm") and "==" in word and has_unresolved(word)):
                self.run.sequence += 1
                hint = from_pin(match.group(1), line) if match else \
                    ReleaseHint(None, f"pip pin {show(word)} at line {line}: the version is not known from this file")
                self.run.pins.append((hint, self.run.sequence))

    def launch(self, fields: list[str], env: dict[str, Arg], scope: _Scope, line: int) -> bool:
        """A vLLM launch: `vllm serve`, the api_server module, or `docker run` of a vLLM image."""
        run = self.run
        if fields[0].rsplit("/", 1)[-1] in _NOT_RUNNING:
            return False
        located = find_vllm(fields)
        docker = None if located else _docker_run(fields)
        image = None
        if located is not None:
            argv = fields
        elif docker is None:
            return False
        elif docker.entrypoint is not None:
            # The image's entrypoint replaced: `--entrypoint vllm IMAGE serve ...`, or a shell's `-c`.
            argv = [docker.entrypoint] + fields[docker.start:]
            located = find_vllm(argv)
            if located is None:
                nested = _nested_script(argv)
                if nested is not None:
                    self.nested_text(Script(nested[0], line, False), scope, line, positional=nested[1][1:])
                return nested is not None
            image = docker.image
        elif VLLM_IMAGE.search(docker.image):
            argv = ["vllm", "serve"] + fields[docker.start:]
            image = docker.image
            if fields[docker.start:docker.start + 1] == ["serve"]:
                run.problems.append(run.ctx.problem("source.serve_twice", "the vllm/vllm-openai image already runs "
                                                    "`vllm serve`; `serve` in its arguments is taken as the model",
                                                    line=line))
        else:
            return False
        origin = self.place.origin(line)
        launch_env = {name: Arg(var.value, origin) for name in ENV_NAMES
                      if (var := scope.lookup(name)) is not None and var.exported and var.value is not None}
        launch_env.update(env)
        if docker is not None:
            for name, value in docker.env.items():
                launch_env[name] = Arg(value if value is not None else unresolved("$" + name), origin)
        else:
            for word in fields[:located[0]]:  # `env NAME=value vllm serve`
                match = _ASSIGNMENT.match(word)
                if match and not match.group(2):
                    launch_env[match.group(1)] = Arg(word[match.end():], origin)
        if not run.collect:
            return True
        inv = Invocation([Arg(a, origin) for a in argv], line, launch_env, self.place.anchor(line),
                         sequence=run.sequence, image=image)
        run.found.append(inv)
        if len(run.found) > run.ctx.limits.max_commands:
            run.limit("commands", f"more than {run.ctx.limits.max_commands} vLLM commands", line)
            raise _Stop
        return True


# Commands that never run their arguments: `echo vllm serve m` is no launch.
_NOT_RUNNING = frozenset({"echo", "printf", "grep", "egrep", "fgrep", "sed", "awk", "cat", "tee", "test", "[", "[[", ":",
                          "logger", "true", "false", "pgrep", "pkill", "which", "type", "read"})


def _only_markers(text: str) -> bool:
    return not re.sub("\x00[^\x00]*\x00", "", text).strip()


def _operands(args: list[str], with_value: str, array_flag: str | None) -> list[str]:
    """The operands (names) of read/mapfile, past their options; an
    option's value that is a name (`read -a NAME`) is one too."""
    names: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            names += args[index + 1:]
            break
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for position, letter in enumerate(letters):
                if letter in with_value:
                    value = letters[position + 1:] or (args[index + 1] if index + 1 < len(args) else "")
                    if not letters[position + 1:]:
                        index += 1
                    if array_flag and "-" + letter == array_flag:
                        names.append(value)
                    break
            index += 1
            continue
        names.append(arg)
        index += 1
    return names


def _nested_script(words: list[str]) -> tuple[str, list[str]] | None:
    """The script of `sh -c SCRIPT [NAME ARGS...]` (also `bash -lc`, `-ec`, ...), and what follows it."""
    for i, word in enumerate(words[:-2]):
        if word.rsplit("/", 1)[-1] in SHELLS and re.fullmatch(r"-[a-z]*c[a-z]*", words[i + 1]):
            return words[i + 2], words[i + 3:]
    return None


_SSH_VALUE_OPTIONS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def _ssh_command(args: list[str]) -> list[str]:
    """The remote command of `ssh [options] HOST COMMAND...`."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        letters = args[index][1:]
        index += 2 if letters[-1:] in _SSH_VALUE_OPTIONS and len(letters) == 1 else 1
    return args[index + 1:]


_DOCKER_VALUE_OPTIONS = frozenset({"-v", "--volume", "-p", "--publish", "--name", "--network", "--gpus", "-w", "--workdir",
                                   "--mount", "--shm-size", "--ipc", "--runtime", "-u", "--user", "--env-file", "-l",
                                   "--label", "--device", "--platform", "--cpus", "--memory", "-m", "--hostname", "-h",
                                   "--restart", "--ulimit", "--log-driver", "--pull", "--entrypoint-args", "--add-host",
                                   "--cap-add", "--cap-drop", "--security-opt", "--tmpfs", "--group-add", "--log-opt",
                                   "--dns", "--ip", "--pid", "--uts", "--userns", "--cpuset-cpus", "--stop-signal",
                                   "--link", "--expose", "--label-file", "--sysctl", "--volumes-from", "--cidfile"})


class _DockerRun(NamedTuple):
    start: int                      # where the image's arguments start
    env: dict[str, str | None]      # -e/--env (None: passed on from the caller's environment)
    image: str
    entrypoint: str | None          # --entrypoint, replacing the image's own


def _docker_run(words: list[str]) -> _DockerRun | None:
    """`docker run [OPTIONS] IMAGE [ARGS]` (or podman): the image is the
    first word that names a vLLM image, else the first word that is no
    option or option value."""
    for i in range(len(words) - 1):
        if words[i].rsplit("/", 1)[-1] in ("docker", "podman") and words[i + 1] == "run":
            break
    else:
        return None
    env: dict[str, str | None] = {}
    entrypoint = None
    first = None
    j = i + 2
    while j < len(words):
        w = words[j]
        if w == "--entrypoint" and j + 1 < len(words):
            entrypoint = words[j + 1]
            j += 2
            continue
        if w.startswith("--entrypoint="):
            entrypoint = w[len("--entrypoint="):]
        elif w in ("-e", "--env") and j + 1 < len(words):
            name, eq, value = words[j + 1].partition("=")
            env[name] = value if eq else None
            j += 2
            continue
        elif w.startswith("--env="):
            name, eq, value = w[6:].partition("=")
            env[name] = value if eq else None
        elif w in _DOCKER_VALUE_OPTIONS:
            j += 1  # its value (a volume path may well contain `vllm-openai`) is not the image
        elif not w.startswith("-"):
            if VLLM_IMAGE.search(w):
                return _DockerRun(j + 1, env, w, entrypoint)
            if first is None:
                first = j
        j += 1
    if first is not None:
        return _DockerRun(first + 1, env, words[first], entrypoint)
    return None


# -- entry points ---------------------------------------------------------------------------------

def run_script(text: str, ctx: Ctx, *, env: dict[str, Arg], first_line: int, origin: Callable[[int], str],
               anchor: Callable[[int], str], problems: list[Problem], fixed: bool = False,
               positional: list[str] | None = None) -> tuple[list[Invocation], _Run]:
    """The vLLM launches of a script, in order. ``env``: the variables it
    starts with (exported); ``fixed``: the text is not the file's own (a
    container's `sh -c` string), and every launch is at ``first_line``."""
    run = _Run(ctx, problems, _BUDGET_FACTOR * len(text) + 128 * ctx.limits.max_variable_length)
    base = _Scope(None, positional=positional)
    for name, value in env.items():
        base.vars[name] = _Var(value.text, True, 0)
    scope = _Scope(base)
    place = _Place(origin, anchor, first_line if fixed else None)
    interpreter = _Interpreter(run, place)
    text = text.replace("\x00", "\ufffd")  # markers are the reader's own
    try:
        for item in parse_script(text, first_line):
            if isinstance(item, ShellSyntaxError):
                if run.syntax_errors < 20:
                    problems.append(ctx.problem("source.shell_syntax", f"cannot read the script: {item.message}",
                                                line=place.line(item.line)))
                run.syntax_errors += 1
                continue
            interpreter.run_and_or(item, scope)
            if scope.terminated:
                break
        # A function the script never calls by name (one called as "$1", or kept for later) is read
        # once, at the end, with its arguments unknown: its launches are not missed.
        for function, at in run.defined:
            if id(function) not in run.called and id(function) not in run.foreign:
                _Interpreter(run, at).call(function, None, _Scope(scope), function.line)
    except _Stop:
        pass
    return run.found, run


def argv_invocations(argv: list[str], ctx: Ctx, *, env: dict[str, Arg], line: int | None, origin: str,
                     anchor: str, problems: list[Problem],
                     read_file: Callable[[str], ConfigFile] | None = None) -> list[Invocation]:
    """The vLLM command of a container's argv: directly, inside `sh -c SCRIPT`,
    or in a script file the container runs (`bash /scripts/start.sh`) that
    ``read_file`` finds (a ConfigMap, a file the Dockerfile makes)."""
    shell = bool(argv) and argv[0].rsplit("/", 1)[-1] in SHELLS
    nested = _nested_script(argv) if shell else None
    if nested is None and shell and read_file is not None:
        operands = [a for a in argv[1:] if not a.startswith("-")]
        try:
            nested = (read_file(operands[0]).text, [operands[0]] + operands[1:]) if operands else None
        except InputError:  # not a file the audit can read: not a launch it can see
            nested = None
    if nested is not None:
        script, rest = nested
        found, run = run_script(script, ctx, env=env, first_line=line or 1, origin=lambda _l: origin,
                                anchor=lambda _l: anchor, problems=problems, fixed=True, positional=rest[1:])
        for inv in found:  # `pip install vllm==X && vllm serve`: the release installed over the image
            inv.release = release_at(run, inv)
        return found
    located = find_vllm(argv)
    if located is None:
        return []
    return [Invocation([Arg(a, origin) for a in argv], line, dict(env), anchor)]


def command_words(text: str) -> list[str]:
    """The words of one shell command line given as text (`vllm serve m
    --kv-transfer-config '{...}'`), quotes removed, as the shell splits
    them; a variable or substitution is an unresolved marker, which
    :func:`hma_policy.core.command.read_command` reports by name. Nothing
    is run. Raises ValueError when the text is not one simple command."""
    items = list(parse_script(text.replace("\x00", "\ufffd")))
    if len(items) != 1 or isinstance(items[0], ShellSyntaxError):
        first = next((i for i in items if isinstance(i, ShellSyntaxError)), None)
        raise ValueError(first.message if first is not None else "expected one command")
    pipelines = items[0].pipelines
    if items[0].background or len(pipelines) != 1 or len(pipelines[0].commands) != 1 \
            or not isinstance(pipelines[0].commands[0], Simple):
        raise ValueError("expected one command, without ;, &&, ||, | or &")
    command = pipelines[0].commands[0]
    ctx = Ctx("<command>", "<command>", (), DEFAULT_SOURCE_LIMITS, text, fs=False)
    run = _Run(ctx, [], _BUDGET_FACTOR * len(text) + 128 * ctx.limits.max_variable_length)
    expander = _Expander(run, _Scope(None), command.line)
    try:
        return [field for word in command.words for field in expander.fields(word)]
    except _Stop:
        raise ValueError("the command expands to more than the audit reads") from None


def shell_file(ctx: Ctx) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    base = ctx.path.parent
    invocations, run = run_script(ctx.text, ctx, env={}, first_line=1, origin=lambda line: f"line {line}",
                                  anchor=lambda line: f":{line}", problems=problems)
    for inv in invocations:
        inv.config_reader = written_or_disk(run, inv.sequence, config_from_fs(ctx, base))
        inv.release = release_at(run, inv)
    apply_facts(invocations, ctx)
    return [deployment(inv, ctx, "shell") for inv in invocations], problems


def release_at(run: _Run, inv: Invocation) -> ReleaseHint | None:
    """A launch's release: its container image's (`docker run`), else the last pin before it."""
    if inv.image is not None:
        return from_image(inv.image)
    pins = [hint for hint, sequence in run.pins if inv.sequence is None or sequence <= inv.sequence]
    return pins[-1] if pins else None


def written_or_disk(run: _Run, sequence: int | None, disk: Callable[[str], ConfigFile]) -> Callable[[str], ConfigFile]:
    """A `--config` reader: a file the script wrote before the launch, else the file on disk."""
    files, ctx = run.files, run.ctx  # not the run itself: it holds the launches, which hold this reader

    def read(name: str) -> ConfigFile:
        written = _written(files, name, sequence)
        if written is not None:
            if len(written.text.encode("utf-8", "surrogatepass")) > ctx.limits.max_config_bytes:
                raise refuse(ctx.problem("input.limit", f"`{name}` is larger than {ctx.limits.max_config_bytes} bytes"))
            return ConfigFile(written.text, f"{name} (written at line {written.line})")
        return disk(name)
    return read
