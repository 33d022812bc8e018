"""Values a Python script gives, as the words of a command line: a value
the file does not give is an :class:`Unknown`, written into a word as an
unresolved marker; a dict or a list as JSON; a value a string holds as
``str()`` shows it. Script (pyscript.py) computes the values; the command
lists (pylists.py) and the reader (python.py) make words of them.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from typing import Any, NamedTuple

from ...core.command import MAX_COMMAND_BYTES
from ...core.markers import UNRESOLVED, unresolved
from ...core.options import Arg

__all__ = ["Unknown", "RUNTIME", "source_text", "as_word", "as_json_word", "as_str", "as_field", "passes_on", "split_words",
           "command_text", "held_markers", "restored", "restored_words", "restored_env"]

# A marker held aside while a string is split into words (see split_words).
_HELD = re.compile("\x00([0-9]+)\x00")
# Why a value computed from one the file does not give is not known either.
RUNTIME = "is computed when the script runs"


class Unknown(NamedTuple):
    """A value the file does not give: as written, and why it is not known."""

    shown: str
    why: str


def source_text(node: ast.AST) -> str:
    """An expression as a message shows it: its source, on one line, at most 60 characters."""
    try:
        text = " ".join(ast.unparse(node).split())
    except (ValueError, RecursionError):  # (an AST too deep to print back)
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def as_word(value: Any) -> str:
    """A value as the word vLLM's command line would hold: a string as it
    is, JSON for the rest, each part not known an unresolved marker written
    bare (so that it may stand for any JSON value)."""
    if isinstance(value, Unknown):
        return unresolved(value.shown, value.why)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {as_json_word(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(as_json_word(v) for v in value) + "]"
    return json.dumps(value)


def as_str(value: Any, node: ast.expr) -> str:
    """A value as ``str()`` shows it in a string the script builds (``True``,
    a dict in Python's own notation); a value the file does not give, or one
    that holds such a value, as an unresolved marker."""
    if isinstance(value, str):
        return value
    if isinstance(value, Unknown):
        return as_word(value)
    if _holds_unknown(value):
        return as_word(Unknown(source_text(node), RUNTIME))
    return str(value)


def as_field(text: str, field: ast.expr) -> str:
    """The text of an f-string's ``field`` in the string: where it is a value
    not known shown as the field writes it, in braces, as the file writes it
    (``f"org/{name}-merged"`` shows ``org/{name}-merged``, as a shell
    script's ``org/${NAME}-merged``); one found through a name shows where
    it came from (``sys.argv[1]``), as ``$1`` does in a script."""
    whole = UNRESOLVED.fullmatch(text)
    if whole is None or whole.group(1) != source_text(field):
        return text
    return unresolved("{" + whole.group(1) + "}", whole.group(2))


# A shell command's text from a pipe (not `||`) or a redirection on: no words of the command before it.
_PASSED_ON = re.compile(r"\s*(?:\|(?!\|)|[0-9&]?>|<)")


def passes_on(text: str) -> bool:
    """Whether a piece of a shell command line pipes the command into
    another or redirects it (`` | grep -v "200 OK"``, `` > log 2>&1``): the
    words it holds are not the command's."""
    return _PASSED_ON.match(text) is not None


def _holds_unknown(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Unknown):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def as_json_word(value: Any) -> str:
    """A value inside a JSON word: a string quoted, the markers it holds (an
    f-string's fields not known) kept as markers inside the JSON string."""
    if isinstance(value, str):
        return json.dumps(value).replace("\\u0000", "\x00").replace("\\u0001", "\x01")
    return as_word(value)


def split_words(text: str, shell_like: bool) -> list[str] | None:
    """``text`` split as ``str.split()`` or ``shlex.split()`` would split it,
    each unresolved marker kept whole (a marker's reason may hold blanks and
    quotes); None where shlex refuses it (an unclosed quote) or the text is
    longer than a command line may be."""
    if len(text) > MAX_COMMAND_BYTES:
        return None
    held, plain = held_markers(text)
    try:
        words = shlex.split(plain) if shell_like else plain.split()
    except ValueError:
        return None
    return [restored(word, held) for word in words]


def command_text(words: list[Arg]) -> str:
    """Words as a shell command line that splits back into them: each quoted
    (shlex), but for its unresolved markers, which the shell reader holds
    aside before it splits the line (held_markers)."""
    def quoted(word: str) -> str:
        pieces, last = [], 0
        for match in UNRESOLVED.finditer(word):
            if match.start() > last:
                pieces.append(shlex.quote(word[last:match.start()]))
            pieces.append(match.group(0))
            last = match.end()
        if last < len(word) or not pieces:
            pieces.append(shlex.quote(word[last:]))
        return "".join(pieces)

    return " ".join(quoted(word.text) for word in words)


def held_markers(text: str) -> tuple[list[str], str]:
    """The markers of ``text``, and the text with each replaced by a marker
    of its number alone (NUL, digits, NUL), which holds no blank or quote."""
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(match.group(0))
        return f"\x00{len(held) - 1}\x00"

    return held, UNRESOLVED.sub(hold, text)


def restored(text: str, held: list[str]) -> str:
    """``text`` with each marker :func:`held_markers` held aside put back."""
    return _HELD.sub(lambda match: held[int(match.group(1))], text) if "\x00" in text else text


def restored_words(words: list[Arg], held: list[str]) -> list[Arg]:
    return [word._replace(text=restored(word.text, held)) for word in words]


def restored_env(env: dict[str, Arg], held: list[str]) -> dict[str, Arg]:
    return {name: value._replace(text=restored(value.text, held)) for name, value in env.items()}
