"""Shell tokens and words, read from a text without running anything.

:class:`Lexer` holds the position in the text and reads its tokens (words,
operators, newlines) and words: single quotes, double quotes with ``\\``
escapes, ``$'...'``, backslash-newline, comments, ``$NAME`` and ``${...}``,
``$( )``, backquotes, ``$(( ))``, ``<( )``, ``NAME=( ... )`` arrays, and the
bodies of here-documents after the line that opens them. Words are kept as
lists of slices, never grown one character at a time, so reading is linear
in the text (module docstring of shell_syntax.py). The body of ``$( )`` is
read by the grammar, which extends the lexer (shell_syntax.py).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .shell_tree import (MAX_DEPTH, Array, CommandList, Lit, Param, Part, Redirect, ShellSyntaxError, Simple, Sub,
                         Word)

__all__ = ["Lexer", "Token", "NAME", "ASSIGNMENT", "split_assignments"]

_BLANK = re.compile(r"(?:[ \t\r]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`\x00]+")
_SIMPLE_WORD = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`\x00]+(?=[ \t\r\n;&|()<>]|\Z)")
_DQ_PLAIN = re.compile(r"[^\"\\$`\x00]+")
_BRACE_PLAIN = re.compile(r"[^}'\"\\$`\x00]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The start of an assignment word: NAME= or NAME+=.
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_SPECIAL = frozenset("@*#?$!-0123456789")
# Operators, longest first.
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|&>>|&>|<<<|<<-|<<|<>|<&|>>|>&|>\||[;&|()<>]")
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}


class Token(NamedTuple):
    kind: str      # "word", "op", "newline", "eof"
    value: str     # the operator, or "" for a word
    word: Word | None
    line: int


class Lexer:
    """The reading position in a text, its tokens and its words; the
    grammar (shell_syntax.py) reads commands from the tokens."""

    def __init__(self, text: str, first_line: int = 1):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.line = first_line
        self.depth = 0
        self.pending: list[Redirect] = []     # here-documents whose bodies follow the next newline
        self.peeked: Token | None = None

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
    def peek(self) -> Token:
        token = self.peeked
        if token is None:
            token = self.peeked = self._next()
        return token

    def take(self) -> Token:
        token = self.peek()
        self.peeked = None
        return token

    def skip_blanks(self) -> None:
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

    def _next(self) -> Token:
        if self.i < self.n and self.s[self.i] in " \t\r\\#":
            self.skip_blanks()
        s, i = self.s, self.i
        if i >= self.n:
            return Token("eof", "", None, self.line)
        c = s[i]
        if c == "\n":
            line = self.line
            self.i += 1
            self.line += 1
            self._read_heredocs()
            return Token("newline", "\n", None, line)
        if c in "<>" and i + 1 < self.n and s[i + 1] == "(":
            return self._word_token()  # <(...) process substitution: a word
        if c in ";&|()<>":
            op = _OPERATOR.match(s, i).group()  # type: ignore[union-attr]
            self.i += len(op)
            return Token("op", op, None, self.line)
        return self._word_token()

    def _word_token(self) -> Token:
        line = self.line
        match = _SIMPLE_WORD.match(self.s, self.i)
        if match and not (self.s.startswith("(", match.end()) and match.group().endswith("=")):
            # The common case, a word of plain characters: no need to go through word().
            self.i = match.end()
            return Token("word", "", Word((Lit(match.group()),), line), line)
        return Token("word", "", self.word(), line)

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
                        and NAME.fullmatch(text[:-2] if text.endswith("+=") else text[:-1]):
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
        """'...': its text as written (``line``: where the word started, for the error). A marker in
        it (text made by an expansion) is opaque: a quote in its name or reason ends nothing."""
        end = self.s.find("'", self.i + 1)
        while end >= 0 and self.s.count("\x00", self.i + 1, end) % 2:
            closed = self.s.find("\x00", end)
            end = self.s.find("'", closed + 1) if closed >= 0 else -1
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
            self.skip_blanks()
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
        match = NAME.match(s, i + 1)
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
        text = self.balanced(self.i + 3, 2, line)
        return Sub("arith", None, quoted, "$((" + text[:40] + "))" if len(text) <= 40 else "$((...))")

    def balanced(self, start: int, depth: int, line: int) -> str:
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
        match = NAME.match(s, self.i)
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

    def command_list(self, *, closing: str = "", reserved: frozenset[str] = frozenset(), arms: bool = False) -> CommandList:
        """The commands of a substitution's body, up to ``closing``: read by
        the grammar (shell_syntax.py), which overrides this."""
        raise NotImplementedError

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


def split_assignments(command: Simple) -> tuple[list[tuple[str, bool, Word]], Any]:
    """A simple command's leading assignments (name, +=, value) and its other words."""
    assignments: list[tuple[str, bool, Word]] = []
    index = 0
    for word in command.words:
        head = word.parts[0] if word.parts else None
        match = ASSIGNMENT.match(head.text) if isinstance(head, Lit) and not head.quoted else None
        if match is None:
            break
        rest = (Lit(head.text[match.end():]),) + word.parts[1:]  # type: ignore[union-attr]
        assignments.append((match.group(1), bool(match.group(2)), Word(rest, word.line)))
        index += 1
    return assignments, command.words[index:]
