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

This module is the grammar (commands, from the tokens) and those entry
points; the tree it builds is in shell_tree.py, the tokens and words in
shell_words.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .shell_tree import (AndOr, Arith, Case, Command, CommandList, FunctionDef, Group, If, Lit, Loop, Part,
                         Pipeline, Redirect, ShellSyntaxError, Simple, Subshell, Word)
from .shell_words import Lexer, Token

__all__ = ["parse_script", "parse_body", "parse_heredoc_text"]

_RESERVED = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
                       "in", "function", "select", "{", "}", "!", "[[", "]]", "time"})
_REDIRECTIONS = frozenset({"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"})
_HEREDOC_PLAIN = re.compile(r"[^\\$`\x00]+")
# A function's name: bash takes more than a variable's (`buildkite-agent() {`, `ns::run() {`).
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


class _Parser(Lexer):
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
            out.operators.append(self.take().value)
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
                    text = self.balanced(self.i, 2, line)
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
            text = self.balanced(self.i, 2, line)
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
            self.skip_blanks()
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
                descriptor = self.descriptor(token)
                self.take()
                if descriptor is not None:
                    redirects.append(self.redirect(descriptor))
                    continue
                text = word.unquoted_literal()
                if not words and not redirects and text and _FUNCTION_NAME.fullmatch(text) and self.peek().value == "(":
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
        """The redirections after a compound command (`} > log`, `} 2>&1`)."""
        out = []
        while True:
            token = self.peek()
            descriptor = self.descriptor(token)
            if descriptor is not None:
                self.take()
                out.append(self.redirect(descriptor))
            elif token.kind == "op" and token.value in _REDIRECTIONS:
                out.append(self.redirect(""))
            else:
                return out

    def descriptor(self, token: Token) -> str | None:
        """The descriptor that ``token``, the token just peeked, names: digits
        written right before a redirection (the 2 of `2>file`), else None."""
        text = token.word.unquoted_literal() if token.kind == "word" and token.word is not None else None
        s, i = self.s, self.i
        if text is None or not text.isdigit() or i >= self.n or s[i] not in "<>" or s.startswith("(", i + 1):
            return None  # (`2<(...)`: a word, process substitution)
        return text


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
