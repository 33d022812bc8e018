"""Values a Python script gives, as the words of a command line: a value
the file does not give is an :class:`Unknown`, written into a word as an
unresolved marker; a dict or a list as JSON; a value a string holds as
``str()`` shows it. Script (pyscript.py) computes the values; the command
lists (pylists.py) and the reader (python.py) make words of them.
"""

from __future__ import annotations

import ast
import json
from typing import Any, NamedTuple

from ...core.markers import unresolved

__all__ = ["Unknown", "RUNTIME", "source_text", "as_word", "as_json_word", "as_str"]

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
