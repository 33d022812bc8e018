"""Shell expansion, as the shell does it, from what a script has set
(shell_state.py): parameters (``${VAR:-default}``, ``"$@"``), the few
command substitutions whose output the text gives, field splitting at
``IFS``; and the changes a command makes to the variables: an assignment
(bounded by ``max_variable_length``), names set at run time (unknown from
there), a command that may set any variable. Nothing is run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ...core.markers import UNRESOLVED, has_unresolved, unresolved
from ...core.options import Arg
from .shell_state import MAX_NESTING, Run, Scope, Stop, Var
from .shell_syntax import parse_heredoc_text
from .shell_tree import FunctionDef, Group, Lit, Param, Redirect, Simple, Sub, Subshell, Word
from .shell_words import ASSIGNMENT, NAME

__all__ = ["Expander", "common_elements", "common_start", "in_place", "assign", "runtime", "clobber", "stdin_text", "ELEMENT_COST"]

_TOO_LONG = "(a value too long to expand)"


# What an array's element costs the budget beyond its characters: a word of its own is
# made and kept for it, which costs the reader about what copying 16 characters does.
ELEMENT_COST = 16

# Why a substitution's text is not known (Sub.kind), for the notes that name it.
_WHY_UNKNOWN = {"command": "is the output of a command the audit does not run",
                "backtick": "is the output of a command the audit does not run",
                "process": "is a file a command the audit does not run writes",
                "arith": "is arithmetic the audit does not evaluate"}


class Expander:
    """Words to fields, as the shell expands them, from what the script sets."""

    def __init__(self, run: Run, scope: Scope, line: int):
        self.run, self.scope, self.line = run, scope, line

    def param(self, part: Param) -> str | None:
        """The value of a parameter expansion (None: unset and empty)."""
        name, op = part.name, part.op
        subscript = _subscript(part)
        if subscript is None and op == "complex" and name and part.arg is not None and part.arg.literal() is None \
                and (at := self.word(part.arg)).startswith("["):  # `${NAME[$i]}`: the index as the script sets it
            match = _SUBSCRIPT.fullmatch(at) if not has_unresolved(at) else None
            if match is None:
                return unresolved(part.raw, "is an element of an array at an index not known from this file") \
                    if self.elements(name) is not None else unresolved(part.raw)
            subscript = match.group(1)
        if subscript is not None:  # `${NAME[@]}`, `${NAME[*]}`, `${NAME[0]}`
            items = self.elements(name)
            if items is None:
                return unresolved(part.raw)
            if subscript in ("@", "*"):
                return " ".join(items)
            return items[int(subscript)] if int(subscript) < len(items) else ""
        if op == "complex" or not name:
            return unresolved(part.raw)
        if name in ("@", "*", "#") or name.isdigit():
            params = self.scope.params()
            if params is None and name.isdigit() and op in (":-", "-") and not has_unresolved(default := self.word(part.arg)):
                # (`${1:-$DEFAULT_MODEL}`: the script's argument, which only running it gives, else a value it sets)
                return unresolved(part.raw, f"is the script's argument {name}, else `{default}`")
            if params is None:
                return unresolved("$" + name if len(part.raw) < 3 else part.raw)
            if name == "#":
                return str(len(params))
            if name in ("@", "*"):
                return " ".join(params)
            index = int(name)
            if index == 0:  # (`sh -c SCRIPT NAME ...`: NAME; else the script's own name)
                zero = self.scope.lookup("0")
                return zero.value if zero is not None and zero.value is not None else unresolved("$0")
            value: str | None = params[index - 1] if index <= len(params) else None
        elif name in ("?", "$", "!", "-"):
            return unresolved("$" + name)
        else:
            var = self.scope.lookup(name)
            value = var.value if var is not None else None
            if var is None and self.scope.record(name) is None and (why := self.scope.clobbered()) is not None:
                # (never set here, after a command that may set any variable: it may have set this one,
                # whose default, `${KV:-...}`, is then not what runs)
                value = unresolved("$" + name, why)
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
            if NAME.fullmatch(name):
                assign(self.run, self.scope, name, default, defaulted=self.scope.lookup(name) is None)
            return default
        if kind == "+":
            return "" if empty else self.word(part.arg)
        return value if not empty else unresolved("$" + name)  # ? : the shell stops with an error

    def elements(self, name: str) -> tuple[str, ...] | None:
        """The elements of the array ``name`` (a set variable that is no
        array is one of one element, as in bash); None when it is not set."""
        var = self.scope.lookup(name)
        if var is None or var.value is None:
            return None
        return var.items if var.items is not None else (var.value,)

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
                params: Sequence[str] | None = self.scope.params() if part.name == "@" and part.op is None else None
                if params is None and part.quoted and _subscript(part) == "@":
                    params = self.elements(part.name)
                    for element in params or ():
                        self.charge(element, ELEMENT_COST)
                if params is not None and part.quoted:
                    for k, param in enumerate(params):  # "$@", "${NAME[@]}": each parameter (element) a field
                        if k:
                            out.append((None, False))
                        out.append((param, False))
                    continue
                alternate = _array_alternate(part)
                if alternate is not None:  # (`${ARGS[@]+"${ARGS[@]}"}`: `set -u`'s safe expansion of a whole array)
                    colon, word = alternate
                    items = self.elements(part.name)
                    # (set, or not set in the file: the environment's, as `"${ARGS[@]}"` alone reads it)
                    if (items is not None and not (colon and not any(items))) or self.scope.lookup(part.name) is None:
                        out += self.segments(word)
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
        each optionally through `| tr -d SET`, and `$(helper ARGS)` of a
        function that only prints (:meth:`printed`). Any other is unknown."""
        if part.kind == "command" and part.body is not None and len(part.body.items) == 1:
            pipelines = part.body.items[0].pipelines
            folder = self.folder_of(pipelines, part.body.items[0].operators)
            if folder is not None:
                return folder
            commands = pipelines[0].commands if len(pipelines) == 1 else []
            if 1 <= len(commands) <= 2 and all(isinstance(c, Simple) for c in commands):
                text = self.output(commands[0])  # type: ignore[arg-type]
                if text is not None and len(commands) == 2:
                    text = self.deleted(commands[1], text)  # type: ignore[arg-type]
                if text is not None:
                    return text.rstrip("\n")
        return unresolved(part.raw, _WHY_UNKNOWN.get(part.kind))

    def folder_of(self, pipelines: list, operators: list[str]) -> str | None:
        """`cd DIR && pwd` (`pwd -P`, `cd -- DIR`): DIR, where the script gives it (`"$(dirname "$0")"`, the
        script's folder: the idiom of a script that finds the files beside it, `SCRIPT_DIR=$(cd ... && pwd)`)."""
        commands = [pipeline.commands[0] for pipeline in pipelines
                    if len(pipeline.commands) == 1 and isinstance(pipeline.commands[0], Simple)]
        if len(commands) != 2 or len(pipelines) != 2 or operators != ["&&"] or commands[0].redirects:
            return None
        cd, pwd = ([w.literal() for w in command.words] for command in commands)
        if cd[:1] != ["cd"] or pwd not in (["pwd"], ["pwd", "-P"]):
            return None
        fields = [f for w in commands[0].words[1:] for f in self.fields(w)]
        fields = fields[1:] if fields[:1] == ["--"] else fields
        return fields[0] if len(fields) == 1 and not has_unresolved(fields[0]) else None

    def output(self, command: Simple) -> str | None:
        if not command.words:
            return None
        head = command.words[0].literal()
        if head == "cat" and len(command.words) == 1:
            return stdin_text(self.run, self.scope, command.redirects, self.line)
        if command.redirects:
            return None
        fields = [f for w in command.words[1:] for f in self.fields(w)]
        function = self.scope.function(head) if head is not None and NAME.fullmatch(head) else None
        if function is not None:
            return self.printed(function, fields)
        if head == "echo" and not any(f.startswith("-") and f != "-n" for f in fields[:1]):
            newline = fields[:1] != ["-n"]
            return " ".join(fields[0 if newline else 1:]) + ("\n" if newline else "")
        if head == "printf" and fields:
            return _printf(fields[0], fields[1:])
        if head == "dirname" and (fields[1:] if fields[:1] == ["--"] else fields) in self.own_path():
            return ".\n"  # the script's folder, which its relative paths are read from
        return None

    def own_path(self) -> list[list[str]]:
        """The words that are the path of the script the audit reads, as the file runs: `$0` (not of a
        script it makes and runs, `sh -c SCRIPT NAME`, whose `$0` is NAME), and `${BASH_SOURCE[0]}` but in a
        file it sources."""
        names = ["$0", "${0}"] + ([] if self.run.sourcing else ["${BASH_SOURCE[0]}", "$BASH_SOURCE", "${BASH_SOURCE}"])
        return [[unresolved(name)] for name in names]

    def printed(self, function: FunctionDef, args: list[str]) -> str | None:
        """What a function of the script writes, called with ``args``, where
        its body only sets variables (``local`` too) and then prints with
        one `echo` or `printf '%s'`: a helper that builds a JSON config from
        its arguments (ROCm/MAD's `kv_config=$(_moriio_build_kv_transfer_config
        "$role")`). None for any other body. A substitution runs in a
        subshell: what the function sets stays there."""
        steps = _simple_steps(function)
        if not steps or steps[-1].words[0].literal() not in ("echo", "printf") or self.run.nesting >= MAX_NESTING:
            return None
        inner = Expander(self.run, Scope(self.scope, frame=True, positional=list(args)), self.line)
        # A helper that calls itself ends at the nesting bound; one that calls itself several times
        # over, at max_calls; what it writes is charged to the file's budget.
        self.run.call(function.name, self.line)
        self.run.nesting += 1
        try:
            text = inner.output(steps[-1]) if all(inner.set_only(step) for step in steps[:-1]) else None
        finally:
            self.run.nesting -= 1
        if text is not None:
            self.charge(text)
        return text

    def set_only(self, command: Simple) -> bool:
        """Run a command that only sets variables (`NAME=value`, `local NAME=value`,
        `local NAME`) in this scope; False for any other (what it set before
        the word it cannot read is then of no use: the caller gives up)."""
        declared = command.words[0].literal() in ("local", "declare", "typeset")
        if command.redirects:
            return False
        for word in command.words[1:] if declared else command.words:
            head = word.parts[0] if word.parts else None
            match = ASSIGNMENT.match(head.text) if isinstance(head, Lit) and not head.quoted else None
            name = match.group(1) if match is not None else word.literal()
            if match is None and not (declared and name is not None and NAME.fullmatch(name)):
                return False
            value = ""
            if match is not None:
                value = self.word(Word((Lit(head.text[match.end():]),) + word.parts[1:], word.line))  # type: ignore[union-attr]
                current = self.scope.lookup(match.group(1)) if match.group(2) else None
                value = (current.value or "" if current is not None else "") + value
            assign(self.run, self.scope, name, value, exported=False, line=self.line)  # type: ignore[arg-type]
        return True

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

    def charge(self, value: str, extra: int = 0) -> None:
        if not self.run.spend(len(value) + extra, self.line):
            raise Stop

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


_SUBSCRIPT = re.compile(r"\[(@|\*|[0-9]+)\]")


def _subscript(part: Param) -> str | None:
    """The subscript of `${NAME[@]}`, `${NAME[*]}` or `${NAME[3]}`, else None."""
    if part.op != "complex" or part.arg is None or not part.name:
        return None
    text = part.arg.literal()
    match = _SUBSCRIPT.fullmatch(text) if text is not None else None
    return match.group(1) if match else None


def _array_alternate(part: Param) -> tuple[bool, Word] | None:
    """`${NAME[@]+WORD}` (or `[*]`, `:+`): whether it is the `:+` form, and
    WORD, which it expands to where the array is set; None for any other."""
    first = part.arg.parts[0] if part.op == "complex" and part.arg is not None and part.arg.parts else None
    if not isinstance(first, Lit) or first.quoted or not part.name:
        return None
    match = _ALTERNATE.match(first.text)
    if match is None:
        return None
    rest = first.text[match.end():]
    parts = ((Lit(rest, False),) if rest else ()) + part.arg.parts[1:]  # type: ignore[union-attr]
    return bool(match.group(1)), Word(parts, part.arg.line)  # type: ignore[union-attr]


_ALTERNATE = re.compile(r"\[[@*]\](:?)\+")


def common_elements(found: list[Var | None], unknown: str) -> tuple[str, ...]:
    """What several paths agree an array starts with, then ``unknown`` as
    one element for the rest: a command built up on some paths
    (`CMD+=(--kv-transfer-config "$KV")` in an `if`) keeps its known words.
    Unset on a path: ``unknown`` alone."""
    if any(v is None or v.value is None for v in found):
        return (unknown,)
    arrays = [v.items if v.items is not None else (v.value,) for v in found]  # type: ignore[union-attr]
    if all(items == arrays[0] for items in arrays):  # (the paths differ in what they export)
        return arrays[0]  # type: ignore[return-value]
    start: list[str] = []
    for column in zip(*arrays):
        if len(set(column)) != 1:
            break
        start.append(column[0])
    return (*start, unknown)


def common_start(values: list[str | None], unknown: str) -> str:
    """What several paths agree a value starts with, then ``unknown``: a
    command line built up on some paths (`CMD="$CMD $arg"`) keeps its known
    start. Unset on a path, or no common start: ``unknown`` alone."""
    if any(v is None for v in values):
        return unknown
    known = [v for v in values if v is not None]  # all of them
    start = _common_prefix(known)
    if start.count("\x00") % 2:  # never half a marker
        start = start[:start.rfind("\x00")]
    rests = [v[len(start):] for v in known if len(v) > len(start)]
    if rests and not all(r[:1].isspace() for r in rests) and start[-1:] and not start[-1].isspace():
        # The paths differ inside a word of a text of several (`CMD="$CMD --enforce-eager"` on one,
        # `--max-num-seqs 8` on the other; kserve's `--disable-uvicorn-access-log` on one, `--disable-
        # access-log-for-endpoints /health` on the other): that word is the unknown one, not an option
        # `--$CMD` or `--disable-$ARGS`. A value of one word on each path keeps what they agree on.
        cut = _last_word(start)
        if cut or any(_last_word(rest) for rest in rests):
            start = start[:cut]
    return start + (" " if start and rests and all(r[:1].isspace() for r in rests) else "") + unknown


def _common_prefix(texts: list[str]) -> str:
    """The longest start that all ``texts`` share. (posixpath.commonprefix
    compares a character at a time in Python: a value that each of a
    script's thousands of `if`s grows made the reading quadratic in the
    script's length.)"""
    first, last = min(texts), max(texts)  # (what these two share, all do)
    low, high = 0, min(len(first), len(last))
    while low < high:  # the longest equal start, found by halves: each comparison runs in C
        middle = (low + high + 1) // 2
        if first[:middle] == last[:middle]:
            low = middle
        else:
            high = middle - 1
    return first[:low]


def in_place(argv: list[str], env: dict[str, Arg], values: dict[str, str | tuple[str, ...] | None]) \
        -> tuple[list[str], dict[str, Arg]] | None:
    """A launch's words and environment with each marker of ``values``
    replaced by its text, where that reads the same however the word was
    quoted: a text without blanks, not empty where it is the whole word;
    an array's elements in place of a word that is its marker alone (a
    copy's element, `"${ARGS[@]}"`); None where a marker cannot be
    replaced so."""
    def placed(text: str) -> str | None:
        for marker, value in values.items():
            if marker in text:
                if value is None or isinstance(value, tuple) or any(c.isspace() for c in value) \
                        or (text == marker and not value):
                    return None
                text = text.replace(marker, value)
        return text

    def spliced(word: str, depth: int = 0) -> tuple[str, ...]:
        elements = values.get(word)  # (an element may be the marker of an `if`'s within that path: its elements)
        if not isinstance(elements, tuple) or depth > len(values):
            return (word,)
        return tuple(part for element in elements for part in spliced(element, depth + 1))

    words = [placed(word) for whole in argv for word in spliced(whole)]
    given = {name: (arg, placed(arg.text)) for name, arg in env.items()}
    if any(word is None for word in words) or any(text is None for _, text in given.values()):
        return None
    return [w for w in words if w is not None], \
        {name: arg._replace(text=t) for name, (arg, t) in given.items() if t is not None}


def _last_word(text: str) -> int:
    """Where the last word of ``text`` starts: after its last blank outside a marker (0: it has none)."""
    end = 0
    for atom in _ATOM.finditer(text):
        if atom.group(0).isspace():
            end = atom.end()
    return end


# An unresolved marker (core.markers) whole, or any other one character.
_ATOM = re.compile(f"(?:{UNRESOLVED.pattern})|[^\x00]|\x00")


def _split(text: str, ifs: str) -> tuple[bool, list[str], bool] | None:
    """Field splitting of an unquoted expansion's text: (starts with a
    separator, the fields, ends with one); None for empty text."""
    if not text:
        return None
    if not ifs:
        return (False, [text], False)
    if "\x00" in text and UNRESOLVED.search(text):
        return _split_atoms([atom.group(0) for atom in _ATOM.finditer(text)], ifs)
    if not ifs.strip(" \t\n"):  # whitespace only: runs of it separate, at the ends they vanish
        words = text.split() if ifs == " \t\n" else re.split("[" + re.escape(ifs) + "]+", text.strip(ifs))
        words = [w for w in words if w]
        return (text[0] in ifs, words, text[-1] in ifs)
    words = re.split("[" + re.escape(ifs) + "]", text)
    lead, trail = words[0] == "", len(words) > 1 and words[-1] == ""
    return (lead, words[1 if lead else 0:len(words) - 1 if trail else len(words)], trail)


def _split_atoms(atoms: list[str], ifs: str) -> tuple[bool, list[str], bool]:
    """:func:`_split` of a text that holds unresolved markers: a marker is
    never split (where the value it stands for would split is not known,
    and the reason it carries is no part of it), so it stays in one field."""
    whitespace = not ifs.strip(" \t\n")
    # The default IFS splits as str.split() does, as _split does for text without markers.
    separates = str.isspace if ifs == " \t\n" else ifs.__contains__
    pieces: list[list[str]] = [[]]
    for atom in atoms:
        if len(atom) == 1 and separates(atom):
            pieces.append([])
        else:
            pieces[-1].append(atom)
    words = ["".join(p) for p in pieces]
    lead, trail = not pieces[0], len(pieces) > 1 and not pieces[-1]
    if whitespace:  # runs of it separate, at the ends they vanish
        return (lead, [w for w in words if w], trail)
    return (lead, words[1 if lead else 0:len(words) - 1 if trail else len(words)], trail)


_PRINTF = re.compile(r"%[s%]|\\[nt\\\"']|[%\\]")
_PRINTF_TEXT = {"%%": "%", "\\n": "\n", "\\t": "\t", "\\\\": "\\", '\\"': '"', "\\'": "'"}


def _printf(form: str, args: list[str]) -> str | None:
    """What `printf FORMAT ARGS...` writes where FORMAT holds no directive
    but `%s` (and `%%`), each taking the next argument (none left: empty),
    and no escape but `\\n`, `\\t` and a quoted backslash or quote; None for
    any other, or for more arguments than `%s`s (printf would repeat FORMAT)."""
    if has_unresolved(form):
        return None
    pieces = _PRINTF.split(form)
    marks = _PRINTF.findall(form)
    if any(mark not in _PRINTF_TEXT and mark != "%s" for mark in marks) or len(args) > marks.count("%s"):
        return None
    values = iter(args)
    out = [pieces[0]]
    for mark, piece in zip(marks, pieces[1:]):
        out.append((next(values, "") if mark == "%s" else _PRINTF_TEXT[mark]) + piece)
    return "".join(out)


def _simple_steps(function: FunctionDef) -> list[Simple] | None:
    """A function's body as the simple commands it runs one after another
    (`name() { a; b; }`), or None where it holds anything else."""
    body = function.body.body if isinstance(function.body, (Group, Subshell)) else None
    if body is None:
        return None
    steps = []
    for item in body.items:
        if len(item.pipelines) != 1 or len(item.pipelines[0].commands) != 1 or item.background:
            return None
        step = item.pipelines[0].commands[0]
        if not isinstance(step, Simple) or not step.words:
            return None
        steps.append(step)
    return steps


def assign(run: Run, scope: Scope, name: str, value: str, *, exported: bool | None = None, local: bool = False,
            line: int | None = None, items: tuple[str, ...] | None = None, defaulted: bool = False) -> None:
    """Set ``name`` to ``value``, or to the array ``items`` (its value: the
    first); ``defaulted``: the value is a default the environment may override."""
    limits = run.ctx.limits
    if items is not None:
        value = items[0] if items else ""
        if len(items) > limits.max_array_elements:
            run.limit("array", f"the array `{name}` grows past {limits.max_array_elements} elements at line {line}; "
                      "it is read as unknown from there", line)
            value, items = unresolved(_TOO_LONG), None
    if len(value) > limits.max_variable_length or \
            (items is not None and sum(len(item) + 1 for item in items) > limits.max_variable_length):
        run.limit("variable", f"a value of `{name}` grows past {limits.max_variable_length} characters at line "
                  f"{line}; it is read as unknown from there", line)
        value, items = unresolved(_TOO_LONG), None
    current = scope.record(name)
    if exported is None:
        exported = (current is not None and current.exported) or _allexport(scope)
    if local:
        frame = scope.frame_scope()
        if frame is not None:
            frame.locals.add(name)
    scope.vars[name] = Var(value, exported, run.next_epoch(), line or 0, items, defaulted)


def environment_default(part: object, scope: Scope) -> bool:
    """Whether the parameter ``part`` expands to a default that the
    environment may override: `${NAME:-a}` (or `${NAME:=a}`) of a name the
    file leaves unset, or a variable that holds such a default
    (`MODE=${MODE:-a}`). Only running the script says which value it has."""
    if not isinstance(part, Param) or not NAME.fullmatch(part.name):
        return False
    var = scope.lookup(part.name)
    if var is None:
        return part.op in (":-", "-", ":=", "=")
    return var.defaulted and part.op in (None, ":-", "-", ":=", "=")


def _allexport(scope: Scope) -> bool:
    var = scope.lookup("-a")  # `set -a`, kept as a variable no script can name
    return var is not None and var.value == "1"


def runtime(run: Run, scope: Scope, names: Iterable[str], why: str) -> None:
    """Variables a command sets at run time: unknown from here."""
    for name in names:
        current = scope.lookup(name)
        scope.vars[name] = Var(unresolved("$" + name, why), current is not None and current.exported, run.next_epoch())


def clobber(run: Run, scope: Scope, why: str) -> None:
    """A command that may set any variable: every variable set so far is unknown."""
    scope.barrier = (run.next_epoch(), why)


def stdin_text(run: Run, scope: Scope, redirects: Sequence[Redirect], line: int) -> str | None:
    """The text a command reads on its standard input, from a here-document or a here-string."""
    text = None
    for redirect in redirects:
        if redirect.op in ("<<", "<<-") and redirect.body is not None and redirect.fd in ("", "0"):
            if redirect.quoted:
                text = redirect.body
            else:
                parts = parse_heredoc_text(redirect.body, redirect.body_line)
                text = Expander(run, scope, line).word(Word(parts, redirect.body_line))
        elif redirect.op == "<<<" and redirect.target is not None:
            text = Expander(run, scope, line).word(redirect.target) + "\n"
    return text
