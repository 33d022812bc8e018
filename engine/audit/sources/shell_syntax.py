"""Shell text parsed into commands, without running anything.

POSIX shell quoting and the bash forms launch scripts use: single quotes,
double quotes with ``\\`` escapes, ``$'...'``, backslash-newline, comments,
``;`` ``&&`` ``||`` ``|`` ``&``, subshells and groups, ``if``/``case``/
loops/functions, ``[[ ]]`` and ``(( ))``, here-documents (``<<``, ``<<-``,
quoted delimiters, several on one line, inside ``$( )``) and here-strings
(``<<<``, which are not here-documents).

The parser reads each character a bounded number of times, so reading is
linear in the text: words are kept as lists of slices, never grown one
character at a time (what made :mod:`shlex` quadratic on long words), and
nothing is scanned twice. Nesting is bounded (:data:`MAX_DEPTH`).

A syntax error is a :class:`ShellSyntaxError` with its line. The top level
(:func:`parse_script`) yields one complete command at a time, so that a
caller interprets a large script as it is read; after an error it resumes
on the line after the one where the error was found (the error's position
only moves forward), and an unterminated quote ends the script, as it does
for the shell.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Union

__all__ = ["Lit", "Param", "Sub", "Array", "Word", "Redirect", "Simple", "Pipeline", "AndOr", "CommandList",
           "Subshell", "Group", "If", "Loop", "Case", "FunctionDef", "Arith", "ShellSyntaxError", "parse_script",
           "parse_body", "parse_heredoc_text", "MAX_DEPTH"]

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


@dataclass
class CommandList:
    items: list[AndOr] = field(default_factory=list)


class ShellSyntaxError(Exception):
    def __init__(self, message: str, line: int, *, at_end: bool = False):
        super().__init__(message)
        self.message, self.line, self.at_end = message, line, at_end


_RESERVED = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
                       "in", "function", "select", "{", "}", "!", "[[", "]]", "time"})
_BLANK = re.compile(r"(?:[ \t\r]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`\x00]+")
_SIMPLE_WORD = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`\x00]+(?=[ \t\r\n;&|()<>]|\Z)")
_DQ_PLAIN = re.compile(r"[^\"\\$`\x00]+")
_HEREDOC_PLAIN = re.compile(r"[^\\$`\x00]+")
_BRACE_PLAIN = re.compile(r"[^}'\"\\$`\x00]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = frozenset("@*#?$!-0123456789")
# Operators, longest first.
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|&>>|&>|<<<|<<-|<<|<>|<&|>>|>&|>\||[;&|()<>]")
_REDIRECTIONS = frozenset({"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"})
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}


class _Token(NamedTuple):
    kind: str      # "word", "op", "newline", "eof"
    value: str     # the operator, or "" for a word
    word: Word | None
    line: int


class _Parser:
    def __init__(self, text: str, first_line: int = 1):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.line = first_line
        self.depth = 0
        self.pending: list[Redirect] = []     # here-documents whose bodies follow the next newline
        self.peeked: _Token | None = None

    # -- errors and nesting ---------------------------------------------------------------
    def error(self, message: str, line: int | None = None) -> ShellSyntaxError:
        return ShellSyntaxError(message, self.line if line is None else line)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep")

    def leave(self) -> None:
        self.depth -= 1

    # -- tokens -------------------------------------------------------------------------------
    def peek(self) -> _Token:
        token = self.peeked
        if token is None:
            token = self.peeked = self._next()
        return token

    def take(self) -> _Token:
        token = self.peek()
        self.peeked = None
        return token

    def _skip_blanks(self) -> None:
        s, n = self.s, self.n
        while self.i < n:
            match = _BLANK.match(s, self.i)
            if match:
                self.line += s.count("\n", match.start(), match.end())
                self.i = match.end()
                continue
            if s[self.i] == "#":  # a comment: blanks or an operator came before
                end = s.find("\n", self.i)
                self.i = n if end < 0 else end
                continue
            break

    def _next(self) -> _Token:
        if self.i < self.n and self.s[self.i] in " \t\r\\#":
            self._skip_blanks()
        s, i = self.s, self.i
        if i >= self.n:
            return _Token("eof", "", None, self.line)
        c = s[i]
        if c == "\n":
            line = self.line
            self.i += 1
            self.line += 1
            self._read_heredocs()
            return _Token("newline", "\n", None, line)
        if c in "<>" and i + 1 < self.n and s[i + 1] == "(":
            return self._word_token()  # <(...) process substitution: a word
        if c in ";&|()<>":
            op = _OPERATOR.match(s, i).group()  # type: ignore[union-attr]
            self.i += len(op)
            return _Token("op", op, None, self.line)
        return self._word_token()

    def _word_token(self) -> _Token:
        line = self.line
        match = _SIMPLE_WORD.match(self.s, self.i)
        if match and not (self.s.startswith("(", match.end()) and match.group().endswith("=")):
            # The common case, a word of plain characters: no need to go through word().
            self.i = match.end()
            return _Token("word", "", Word((Lit(match.group()),), line), line)
        return _Token("word", "", self.word(), line)

    # -- words ----------------------------------------------------------------------------------
    def word(self) -> Word:
        """A word from the current position: up to a blank or an operator."""
        s, n = self.s, self.n
        line = self.line
        parts: list[Part] = []
        while self.i < n:
            c = s[self.i]
            match = _PLAIN.match(s, self.i)
            if match:
                text = match.group()
                self.i = match.end()
                parts.append(Lit(text))
                if text.endswith("=") and self.i < n and s[self.i] == "(" and len(parts) == 1 \
                        and _NAME.fullmatch(text[:-2] if text.endswith("+=") else text[:-1]):
                    parts.append(self.array())
                continue
            if c == "'":
                parts.append(self.single_quoted(line))
            elif c == '"':
                self.i += 1
                parts += self.double_quoted()
            elif c == "\\":
                if self.i + 1 >= n:
                    parts.append(Lit("\\"))
                    self.i += 1
                elif s[self.i + 1] == "\n":
                    self.i += 2
                    self.line += 1
                else:
                    parts.append(Lit(s[self.i + 1], True))
                    self.i += 2
            elif c == "$":
                parts.append(self.dollar(quoted=False))
            elif c == "`":
                parts.append(self.backtick(quoted=False))
            elif c == "\x00":
                parts.append(self.marker())
            elif c in "<>" and self.i + 1 < n and s[self.i + 1] == "(":
                parts.append(self.process_substitution())
            else:
                break
        return Word(tuple(parts), line)

    def single_quoted(self, line: int) -> Lit:
        """'...': its text as written (``line``: where the word started, for the error)."""
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ShellSyntaxError("a single quote is not closed", line, at_end=True)
        text = self.s[self.i + 1:end]
        self.line += text.count("\n")
        self.i = end + 1
        return Lit(text, True)

    def marker(self) -> Lit:
        """An unresolved marker (only in text made by an expansion, e.g. for
        eval): kept whole and opaque, so that its name is not expanded again."""
        end = self.s.find("\x00", self.i + 1)
        end = self.n - 1 if end < 0 else end
        text = self.s[self.i:end + 1]
        self.i = end + 1
        return Lit(text, True)

    def array(self) -> Array:
        """The words of NAME=( ... )."""
        self.i += 1  # (
        self.enter()
        words: list[Word] = []
        while True:
            self._skip_blanks()
            if self.i >= self.n:
                raise ShellSyntaxError("an array's `(` is not closed", self.line, at_end=True)
            c = self.s[self.i]
            if c == ")":
                self.i += 1
                break
            if c == "\n":
                self.i += 1
                self.line += 1
                continue
            word = self.word()
            if not word.parts:
                raise self.error(f"unexpected `{c}` in an array")
            words.append(word)
        self.leave()
        return Array(tuple(words))

    def double_quoted(self) -> list[Part]:
        """The text of "...", after its opening quote."""
        parts = self.quoted_text(closing='"', plain=_DQ_PLAIN, escaped=('"', "\\", "$", "`"))
        return parts or [Lit("", True)]  # "" is an empty word, not none

    def quoted_text(self, *, closing: str | None, plain: re.Pattern[str], escaped: tuple[str, ...]) -> list[Part]:
        """Text read as inside double quotes, up to ``closing`` (None: the
        end of the text, a here-document's body): ``$`` expansions and
        backquotes are read, a backslash escapes only the characters of
        ``escaped`` and a newline."""
        s, n = self.s, self.n
        start_line = self.line
        parts: list[Part] = []
        while True:
            if self.i >= n:
                if closing is None:
                    return parts
                raise ShellSyntaxError("a double quote is not closed", start_line, at_end=True)
            c = s[self.i]
            match = plain.match(s, self.i)
            if match:
                parts.append(Lit(match.group(), True))
                self.line += match.group().count("\n")
                self.i = match.end()
                continue
            if c == closing:
                self.i += 1
                return parts
            if c == "\\":
                nxt = s[self.i + 1] if self.i + 1 < n else ""
                if nxt == "\n":
                    self.line += 1
                    self.i += 2
                elif nxt in escaped:
                    parts.append(Lit(nxt, True))
                    self.i += 2
                else:
                    parts.append(Lit("\\", True))
                    self.i += 1
            elif c == "$":
                parts.append(self.dollar(quoted=True))
            elif c == "`":
                parts.append(self.backtick(quoted=True))
            else:  # NUL
                parts.append(self.marker())

    def dollar(self, *, quoted: bool) -> Part:
        s, n, i = self.s, self.n, self.i
        nxt = s[i + 1] if i + 1 < n else ""
        if nxt == "(":
            if s.startswith("$((", i):
                return self.arithmetic(quoted)
            return Sub("command", self.substituted("$("), quoted, "$(...)")
        if nxt == "{":
            return self.brace_parameter(quoted)
        if nxt == "'" and not quoted:
            return self.ansi_c()
        if nxt == '"' and not quoted:  # $"..." (a translated string): a double-quoted string here
            self.i += 2
            parts = self.double_quoted()
            return Lit("".join(p.text for p in parts if isinstance(p, Lit)), True) if all(
                isinstance(p, Lit) for p in parts) else Sub("command", None, True, '$"..."')
        match = _NAME.match(s, i + 1)
        if match:
            self.i = match.end()
            return Param(match.group(), None, None, quoted, "$" + match.group())
        if nxt and nxt in _SPECIAL:
            self.i += 2
            return Param(nxt, None, None, quoted, "$" + nxt)
        self.i += 1
        return Lit("$", quoted)

    def arithmetic(self, quoted: bool) -> Sub:
        """$(( ... )): up to the parenthesis that closes it."""
        line = self.line
        text = self._balanced(self.i + 3, 2, line)
        return Sub("arith", None, quoted, "$((" + text[:40] + "))" if len(text) <= 40 else "$((...))")

    def _balanced(self, start: int, depth: int, line: int) -> str:
        """Text from ``start`` to the point where ``depth`` open parentheses
        are closed; the position moves past it."""
        s, n = self.s, self.n
        i = start
        while i < n:
            c = s[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    text = s[start:i - 1]
                    self.line += s.count("\n", self.i, i + 1)
                    self.i = i + 1
                    return text
            i += 1
        raise ShellSyntaxError("`$((` or `((` is not closed", line, at_end=True)

    def brace_parameter(self, quoted: bool) -> Part:
        s, n = self.s, self.n
        start = self.i
        line = self.line
        self.i += 2
        self.enter()
        match = _NAME.match(s, self.i)
        op: str | None = None
        arg: Word | None = None
        if match:
            name = match.group()
            self.i = match.end()
        elif self.i < n and s[self.i] in _SPECIAL and s[self.i] not in "#!":
            name = s[self.i]
            self.i += 1
        else:
            name, op = "", "complex"  # ${#X}, ${!X}, ...
        if self.i < n and s[self.i] == "}":
            self.i += 1
        else:
            if op is None:
                for candidate in (":-", ":=", ":+", ":?", "-", "=", "+", "?"):
                    if s.startswith(candidate, self.i):
                        op = candidate
                        self.i += len(candidate)
                        break
                else:
                    op = "complex"
            arg = self.brace_word(line)
        self.leave()
        raw = s[start:self.i]
        return Param(name, op, arg, quoted, raw if len(raw) <= 60 else raw[:57] + "...")

    def brace_word(self, line: int) -> Word:
        """The word inside ${NAME<op>word}, up to the closing brace."""
        s, n = self.s, self.n
        parts: list[Part] = []
        while True:
            if self.i >= n:
                raise ShellSyntaxError("`${` is not closed", line, at_end=True)
            c = s[self.i]
            match = _BRACE_PLAIN.match(s, self.i)
            if match:
                parts.append(Lit(match.group()))
                self.line += match.group().count("\n")
                self.i = match.end()
                continue
            if c == "}":
                self.i += 1
                return Word(tuple(parts), line)
            if c == "'":
                parts.append(self.single_quoted(self.line))
            elif c == '"':
                self.i += 1
                parts += self.double_quoted()
            elif c == "\\":
                if self.i + 1 < n:
                    if s[self.i + 1] == "\n":
                        self.line += 1
                    else:
                        parts.append(Lit(s[self.i + 1], True))
                    self.i += 2
                else:
                    self.i += 1
            elif c == "$":
                parts.append(self.dollar(quoted=False))
            elif c == "`":
                parts.append(self.backtick(quoted=False))
            else:
                parts.append(self.marker())

    def ansi_c(self) -> Lit:
        """$'...': backslash escapes decoded."""
        s, n = self.s, self.n
        i = self.i + 2
        out: list[str] = []
        start = i
        while True:
            if i >= n:
                raise ShellSyntaxError("a `$'` quote is not closed", self.line, at_end=True)
            c = s[i]
            if c == "'":
                break
            if c != "\\":
                j = i
                while j < n and s[j] not in "\\'":
                    j += 1
                out.append(s[i:j])
                i = j
                continue
            esc = s[i + 1] if i + 1 < n else ""
            if esc in _ANSI_C:
                out.append(_ANSI_C[esc])
                i += 2
            elif esc in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[esc]
                digits = re.match(r"[0-9A-Fa-f]{1,%d}" % width, s[i + 2:i + 2 + width])
                if digits:
                    code = int(digits.group(), 16)
                    out.append(chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd")
                    i += 2 + len(digits.group())
                else:
                    out.append("\\" + esc)
                    i += 2
            elif esc and esc in "01234567":
                digits = re.match(r"[0-7]{1,3}", s[i + 1:i + 4])
                out.append(chr(int(digits.group(), 8) & 0xFF))  # type: ignore[union-attr]
                i += 1 + len(digits.group())  # type: ignore[union-attr]
            elif esc == "c" and i + 2 < n:
                out.append(chr(ord(s[i + 2]) & 0x1F))
                i += 3
            else:
                out.append("\\" + esc)
                i += 2
        self.line += s.count("\n", start, i)
        self.i = i + 1
        return Lit("".join(out), True)

    def backtick(self, *, quoted: bool) -> Sub:
        s, n = self.s, self.n
        i = self.i + 1
        line = self.line
        while i < n and s[i] != "`":
            i += 2 if s[i] == "\\" else 1
        if i >= n:
            raise ShellSyntaxError("a backquote is not closed", line, at_end=True)
        self.line += s.count("\n", self.i, i)
        self.i = i + 1
        return Sub("backtick", None, quoted, "`...`")

    def process_substitution(self) -> Sub:
        return Sub("process", self.substituted(self.s[self.i] + "("), False, "<(...)")

    def substituted(self, opening: str) -> CommandList:
        """The commands of $( ... ) or <( ... ), from the opening (two characters) to its parenthesis."""
        self.i += 2
        line = self.line
        self.enter()
        body = self.command_list(closing=")")
        token = self.take()
        if token.value != ")":
            raise ShellSyntaxError(f"`{opening}` is not closed", line, at_end=token.kind == "eof")
        self.leave()
        return body

    # -- here-documents -----------------------------------------------------------------------------
    def _read_heredocs(self) -> None:
        """The bodies of the here-documents of the line just ended, in order."""
        s, n = self.s, self.n
        pending, self.pending = self.pending, []
        for redirect in pending:
            start = self.i
            redirect.body_line = self.line
            strip = redirect.op == "<<-"
            while True:
                if self.i >= n:
                    redirect.body = s[start:n]
                    break
                end = s.find("\n", self.i)
                end = n if end < 0 else end
                text = s[self.i:end]
                if text.endswith("\r"):
                    text = text[:-1]
                if (text.lstrip("\t") if strip else text) == redirect.delimiter:
                    redirect.body = s[start:self.i]
                    self.i = min(end + 1, n)
                    self.line += 1
                    break
                self.i = end + 1
                self.line += 1
            if strip and redirect.body:
                redirect.body = re.sub(r"(?m)^\t+", "", redirect.body)

    # -- commands ---------------------------------------------------------------------------------------
    def at_reserved(self, words: frozenset[str] | set[str]) -> str | None:
        token = self.peeked or self.peek()
        word = token.word
        if word is not None and len(word.parts) == 1:
            part = word.parts[0]
            if type(part) is Lit and not part.quoted and part.text in words:
                return part.text
        return None

    def expect_reserved(self, word: str, opened: str, line: int) -> None:
        self.skip_newlines()
        if self.at_reserved({word}) is None:
            token = self.peek()
            raise ShellSyntaxError(f"`{opened}` at line {line} has no `{word}`", token.line, at_end=token.kind == "eof")
        self.take()

    def skip_newlines(self) -> None:
        while self.peek().kind == "newline":
            self.take()

    def command_list(self, *, closing: str = "", reserved: frozenset[str] = frozenset(), arms: bool = False) -> CommandList:
        """Commands up to ``closing`` (an operator), one of ``reserved`` at a
        command's start, a case arm's end (``arms``) or the end of the text."""
        out = CommandList()
        while True:
            self.skip_newlines()
            token = self.peek()
            if token.kind == "eof" or (closing and token.value == closing) or (arms and token.value in (";;", ";&", ";;&")):
                return out
            if reserved and self.at_reserved(reserved):
                return out
            if token.kind == "op" and token.value == ";":
                self.take()  # an empty command: lenient
                continue
            item = self.and_or()
            out.items.append(item)
            token = self.peek()
            if token.kind == "op" and token.value in (";", "&"):
                self.take()
                item.background = token.value == "&"
            elif token.kind == "newline":
                self.take()
            else:
                return out

    def and_or(self) -> AndOr:
        first = self.pipeline()
        out = AndOr([first], line=first.line)
        while self.peek().kind == "op" and self.peek().value in ("&&", "||"):
            self.take()
            self.skip_newlines()
            out.pipelines.append(self.pipeline())
        return out

    def pipeline(self) -> Pipeline:
        line = self.peek().line
        while self.at_reserved({"!", "time"}):
            self.take()
        commands = [self.command()]
        while self.peek().kind == "op" and self.peek().value in ("|", "|&"):
            self.take()
            self.skip_newlines()
            commands.append(self.command())
        return Pipeline(commands, line)

    def command(self) -> Command:
        token = self.peek()
        line = token.line
        self.enter()
        try:
            if token.kind == "op" and token.value == "(":
                if self.i < self.n and self.s[self.i] == "(" and self.peeked is not None:
                    self.take()
                    self.i += 1
                    text = self._balanced(self.i, 2, line)
                    return Arith(text, line)
                self.take()
                body = self.command_list(closing=")")
                closing = self.take()
                if closing.value != ")":
                    raise ShellSyntaxError(f"`(` at line {line} is not closed", closing.line, at_end=closing.kind == "eof")
                return Subshell(body, self.redirects(), line)
            reserved = self.at_reserved(_RESERVED)
            if reserved == "{":
                self.take()
                body = self.command_list(reserved=frozenset({"}"}))
                self.expect_reserved("}", "{", line)
                return Group(body, self.redirects(), line)
            if reserved == "if":
                return self.if_clause(line)
            if reserved in ("while", "until"):
                self.take()
                condition = self.command_list(reserved=frozenset({"do"}))
                self.expect_reserved("do", reserved, line)
                body = self.command_list(reserved=frozenset({"done"}))
                self.expect_reserved("done", reserved, line)
                return Loop(reserved, None, None, condition, body, self.redirects(), line)
            if reserved in ("for", "select"):
                return self.for_clause(reserved, line)
            if reserved == "case":
                return self.case_clause(line)
            if reserved == "function":
                self.take()
                name_token = self.take()
                name = name_token.word.literal() if name_token.word else None
                if not name:
                    raise self.error("`function` needs a name", line)
                if self.peek().value == "(":
                    self.take()
                    if self.take().value != ")":
                        raise self.error(f"`function {name}(` is not closed", line)
                self.skip_newlines()
                return FunctionDef(name, self.command(), line)
            if reserved == "[[":
                return self.conditional(line)
            if reserved in ("then", "elif", "else", "fi", "do", "done", "esac", "}", "]]", "in"):
                raise self.error(f"unexpected `{reserved}`", line)
            return self.simple(line)
        finally:
            self.leave()

    def if_clause(self, line: int) -> If:
        self.take()
        clauses = []
        otherwise = None
        while True:
            condition = self.command_list(reserved=frozenset({"then"}))
            self.expect_reserved("then", "if", line)
            body = self.command_list(reserved=frozenset({"elif", "else", "fi"}))
            clauses.append((condition, body))
            word = self.at_reserved({"elif", "else", "fi"})
            if word is None:
                token = self.peek()
                raise ShellSyntaxError(f"`if` at line {line} has no `fi`", token.line, at_end=token.kind == "eof")
            self.take()
            if word == "elif":
                continue
            if word == "else":
                otherwise = self.command_list(reserved=frozenset({"fi"}))
                self.expect_reserved("fi", "if", line)
            return If(clauses, otherwise, self.redirects(), line)

    def for_clause(self, kind: str, line: int) -> Loop:
        self.take()
        if self.peek().kind == "op" and self.peek().value == "(" and self.s.startswith("(", self.i):
            self.take()
            self.i += 1
            text = self._balanced(self.i, 2, line)
            self.skip_separator()
            self.expect_reserved("do", kind, line)
            body = self.command_list(reserved=frozenset({"done"}))
            self.expect_reserved("done", kind, line)
            return Loop("arith-for", None, None, CommandList([AndOr([Pipeline([Arith(text, line)], line)])]), body,
                        self.redirects(), line)
        token = self.take()
        name = token.word.literal() if token.word else None
        if not name:
            raise self.error(f"`{kind}` needs a variable name", line)
        self.skip_newlines()
        words: list[Word] | None = None
        if self.at_reserved({"in"}):
            self.take()
            words = []
            while self.peek().kind == "word":
                words.append(self.take().word)  # type: ignore[arg-type]
        self.skip_separator()
        self.expect_reserved("do", kind, line)
        body = self.command_list(reserved=frozenset({"done"}))
        self.expect_reserved("done", kind, line)
        return Loop(kind, name, words, None, body, self.redirects(), line)

    def skip_separator(self) -> None:
        if self.peek().kind == "op" and self.peek().value == ";":
            self.take()
        self.skip_newlines()

    def case_clause(self, line: int) -> Case:
        self.take()
        token = self.take()
        if token.word is None:
            raise self.error("`case` needs a word", line)
        self.skip_newlines()
        if self.at_reserved({"in"}) is None:
            raise self.error(f"`case` at line {line} has no `in`", self.peek().line)
        self.take()
        arms: list[tuple[list[Word], CommandList]] = []
        while True:
            self.skip_newlines()
            if self.at_reserved({"esac"}):
                self.take()
                return Case(token.word, arms, self.redirects(), line)
            if self.peek().kind == "eof":
                raise ShellSyntaxError(f"`case` at line {line} has no `esac`", self.peek().line, at_end=True)
            if self.peek().value == "(":
                self.take()
            patterns: list[Word] = []
            while True:
                pattern = self.take()
                if pattern.word is None:
                    raise self.error("a `case` pattern is missing", pattern.line)
                patterns.append(pattern.word)
                separator = self.take()
                if separator.value == ")":
                    break
                if separator.value != "|":
                    raise self.error("a `case` pattern must end with `)`", separator.line)
            body = self.command_list(reserved=frozenset({"esac"}), arms=True)
            arms.append((patterns, body))
            if self.peek().value in (";;", ";&", ";;&"):
                self.take()

    def conditional(self, line: int) -> Simple:
        """[[ ... ]]: its words, with && || ( ) < > read as words, not operators."""
        words = [self.take().word]  # [[
        s, n = self.s, self.n
        while True:
            self._skip_blanks()
            if self.i >= n:
                raise ShellSyntaxError(f"`[[` at line {line} has no `]]`", self.line, at_end=True)
            c = s[self.i]
            if c == "\n":
                self.i += 1
                self.line += 1
                continue
            if c in ";&|()<>":
                j = self.i
                while j < n and s[j] in "&|()<>" and j - self.i < 2:
                    j += 1
                if j == self.i:
                    raise self.error("unexpected `;` in `[[`")
                words.append(Word((Lit(s[self.i:j]),), self.line))
                self.i = j
                continue
            word = self.word()
            if not word.parts:
                raise self.error(f"unexpected `{c}` in `[[`")
            words.append(word)
            if word.unquoted_literal() == "]]":
                break
        return Simple(words, self.redirects(), line)  # type: ignore[arg-type]

    def simple(self, line: int) -> Command:
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            token = self.peek()
            if token.kind == "word":
                word = token.word
                assert word is not None
                if not word.parts:
                    self.take()
                    raise self.error(f"unexpected `{self.s[self.i:self.i + 1]}`", token.line)
                self.take()
                text = word.unquoted_literal()
                if text is not None and text.isdigit() and self.i < self.n and self.s[self.i] in "<>" \
                        and self.peek().kind == "op" and self.peek().value in _REDIRECTIONS:
                    redirects.append(self.redirect(text))  # 2>file: a redirection of descriptor 2
                    continue
                if not words and not redirects and text and _NAME.fullmatch(text) and self.peek().value == "(":
                    self.take()
                    if self.take().value != ")":
                        raise self.error(f"`{text}(` must be `{text}()`", line)
                    self.skip_newlines()
                    return FunctionDef(text, self.command(), line)
                words.append(word)
            elif token.kind == "op" and token.value in _REDIRECTIONS:
                redirects.append(self.redirect(""))
            else:
                break
        if not words and not redirects:
            token = self.peek()
            raise ShellSyntaxError(f"unexpected `{token.value or 'end of file'}`", token.line, at_end=token.kind == "eof")
        return Simple(words, redirects, line)

    def redirect(self, fd: str) -> Redirect:
        op = self.take().value
        target = self.take()
        if target.kind != "word" or target.word is None or not target.word.parts:
            raise ShellSyntaxError(f"`{op}` has no target", target.line, at_end=target.kind == "eof")
        redirect = Redirect(op, target.word, fd)
        if op in ("<<", "<<-"):
            word = target.word
            redirect.quoted = any(isinstance(p, Lit) and p.quoted for p in word.parts)
            redirect.delimiter = "".join(p.text if isinstance(p, Lit) else p.raw for p in word.parts)  # type: ignore[union-attr]
            self.pending.append(redirect)
        return redirect

    def redirects(self) -> list[Redirect]:
        out = []
        while self.peek().kind == "op" and self.peek().value in _REDIRECTIONS:
            out.append(self.redirect(""))
        return out


def parse_script(text: str, first_line: int = 1) -> Iterator[AndOr | ShellSyntaxError]:
    """The complete commands of a script, in order, each an AndOr (with
    ``background``), or a ShellSyntaxError where one could not be read."""
    parser = _Parser(text, first_line)
    while True:
        try:
            parser.skip_newlines()
            token = parser.peek()
            if token.kind == "eof":
                return
            if token.kind == "op" and token.value in (";", "&"):
                parser.take()
                continue
            item = parser.and_or()
            token = parser.peek()
            if token.kind == "op" and token.value in (";", "&"):
                parser.take()
                item.background = token.value == "&"
            elif token.kind not in ("newline", "eof"):
                raise ShellSyntaxError(f"unexpected `{token.value}`", token.line)
            yield item
        except ShellSyntaxError as exc:
            yield exc
            if exc.at_end:
                return
            # Resume on the line after the error: the position only moves forward.
            at_line_start = parser.peeked.kind == "newline" if parser.peeked is not None \
                else parser.i == 0 or parser.s[parser.i - 1] == "\n"
            if not at_line_start:
                end = parser.s.find("\n", parser.i)
                parser.i = parser.n if end < 0 else end
            parser.peeked = None
            parser.pending = []
            parser.depth = 0
        except RecursionError:  # pragma: no cover - MAX_DEPTH keeps the stack well below the limit
            yield ShellSyntaxError("nested too deeply", parser.line)
            return


def parse_body(text: str, first_line: int = 1) -> CommandList | ShellSyntaxError:
    """A whole text as one command list (an eval's or `sh -c`'s script)."""
    items = CommandList()
    for item in parse_script(text, first_line):
        if isinstance(item, ShellSyntaxError):
            return item
        items.items.append(item)
    return items


def parse_heredoc_text(text: str, first_line: int) -> tuple[Part, ...]:
    """An unquoted here-document's body as parts: ``$`` expansions,
    backquotes and ``\\`` escapes (before ``$ ` \\`` and newline) are read;
    quotes are literal."""
    parser = _Parser(text, first_line)
    try:
        return tuple(parser.quoted_text(closing=None, plain=_HEREDOC_PLAIN, escaped=("$", "`", "\\")))
    except ShellSyntaxError:  # an unclosed $( or ${ in the body: the rest as written
        return (Lit(text, True),)
