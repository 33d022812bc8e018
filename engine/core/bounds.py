"""The limits walk: a document checked against :class:`Limits`, or copied into plain JSON.

Limits are checked by an iterative walk before anything recursive
(jsonschema, the graph walk) sees a document, so that a hostile document
ends in an :class:`InputError`, never in a RecursionError, MemoryError or
hang. A document of plain JSON values (what a parser gives) is only
walked; any other (a Python caller's tuples, mappings, subclasses) is copied
into plain JSON as it is checked, so that nothing the caller's object holds
runs after this stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InputError, Problem, printable
from .limits import Limits
from .schema import pointer

__all__ = ["check_values", "bounded", "plain_key", "short_key"]


def _fail(code: str, message: str, path: str = "") -> InputError:
    return InputError([Problem(code=code, message=message, path=path)])


def check_values(document: Any, limits: Limits) -> tuple[bool, int]:
    """Iteratively check the size limits of a document of plain JSON values
    (dicts, lists, strings, ints, floats, booleans and nulls, as a JSON
    parser gives them); raise on the first breach. Whether the document is
    plain, and how many values it holds: the walk stops at the first value
    of any other type (a tuple, another mapping, a subclass), and the caller
    then makes a plain copy (:func:`_plain_copy`), which checks as it copies.

    The walk keeps no paths (it runs on every document); the pointer of a
    breach is found by a second, slower walk only when there is one. Strings,
    numbers, booleans and nulls (most values) are checked where their
    container is read, and never put on the stack.
    """
    count = 1
    max_depth, max_string, max_values = limits.max_depth, limits.max_string_length, limits.max_values
    if type(document) is not dict and type(document) is not list:
        return False, count  # a scalar (or another type): the copy checks it
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= max_depth and value:  # its children would be too deep
            _breach(document, limits, "depth")
        if type(value) is dict:
            for key in value:
                if type(key) is not str:
                    return False, count
            items = value.values()
        else:
            items = value
        count += len(items)
        if count > max_values:
            raise _fail("input.limit", f"the document holds more than {max_values} values")
        for item in items:
            item_kind = type(item)
            if item_kind is str:
                if len(item) > max_string:
                    _breach(document, limits, "string")
            elif item_kind is dict or item_kind is list:
                stack.append((item, depth + 1))
            elif item is None or item_kind is bool or item_kind is float:
                pass
            elif item_kind is int:
                if item.bit_length() > 1024:
                    _breach(document, limits, "int")
            else:
                return False, count
    return True, count


def bounded(document: Any, limits: Limits) -> tuple[Any, int]:
    """The document as plain JSON, within the limits (:class:`InputError`
    otherwise), and how many values it holds: the document itself when it is
    plain, else a copy."""
    plain, values = check_values(document, limits)
    return (document, values) if plain else _plain_copy(document, limits)


def _plain_copy(document: Any, limits: Limits) -> tuple[Any, int]:
    """A plain JSON copy of a document that holds other types, and how many
    values it holds: tuples become lists, other mappings dicts, and
    subclasses of str, int and float their plain values, as json.dumps
    writes them (so a document and its JSON text always get the same
    decision). The caller's object is read once, here, with the limits
    checked as it is copied: nothing it holds runs again after this.
    Raises a located :class:`InputError` for a breach, or a value that is
    not JSON data."""
    count = 1
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, tuple[Any, ...], int]] = [(document, top, 0, (), 0)]
    while stack:
        value, parent, slot, path, depth = stack.pop()
        if depth > limits.max_depth:
            raise _fail("input.limit", f"the document is nested deeper than {limits.max_depth} levels", pointer(path))
        copy: Any
        if isinstance(value, Mapping):
            items: list[tuple[Any, Any]] = list(value.items())
            copy = {}
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
            copy = [None] * len(items)
        else:
            parent[slot] = _plain_scalar(value, path, limits)
            continue
        parent[slot] = copy
        count += len(items)
        if count > limits.max_values:
            raise _fail("input.limit", f"the document holds more than {limits.max_values} values")
        for key, item in items:
            if type(copy) is dict:
                key = plain_key(key, path)
                if key in copy:  # two keys that are one string (str subclasses)
                    raise _fail("input.duplicate_key", f"key `{short_key(key)}` appears twice in one object",
                                pointer(path + (key,)))
                copy[key] = None  # keeps the order; filled when the item is copied
            stack.append((item, copy, key, path + (key,), depth + 1))
    return top[0], count


def _plain_scalar(value: Any, path: tuple[Any, ...], limits: Limits) -> Any:
    """A JSON scalar as its plain value (a str, int or float subclass read as
    the str, int or float it holds), within the limits."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if isinstance(value, str):
        text = value if kind is str else str.__str__(value)
        if len(text) > limits.max_string_length:
            raise _fail("input.limit", f"a string is longer than {limits.max_string_length} characters", pointer(path))
        return text
    if isinstance(value, int):
        number = value if kind is int else int.__int__(value)
        if number.bit_length() > 1024:
            raise _fail("input.limit", "an integer is too large", pointer(path))
        return number
    if isinstance(value, float):
        return value if kind is float else float.__float__(value)  # any float, NaN included, is opaque data
    raise _fail("input.type", f"`{kind.__name__}` values are not JSON data", pointer(path))


def short_key(key: str) -> str:
    """A key for a one-line message: at most 60 characters, control characters escaped."""
    return printable(key if len(key) <= 60 else key[:57] + "...")


def plain_key(key: Any, path: tuple[Any, ...]) -> str:
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str.__str__(key)
    try:
        shown = repr(key)
    except Exception:  # noqa: BLE001 - the caller's __repr__
        shown = f"a {type(key).__name__}"
    raise _fail("input.type", f"object keys must be strings, got `{shown}`"[:200], pointer(path))


def _breach(document: Any, limits: Limits, kind: str) -> None:
    """Find the first value breaking ``kind`` (depth-first, in document order)
    in a plain document, and raise."""
    stack: list[tuple[Any, tuple, int]] = [(document, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        if kind == "depth" and depth > limits.max_depth:
            raise _fail("input.limit", f"the document is nested deeper than {limits.max_depth} levels", pointer(path))
        if isinstance(value, dict):
            items = list(value.items())
            items.reverse()
            stack.extend([(item, path + (key,), depth + 1) for key, item in items])
        elif isinstance(value, list):
            pairs = list(enumerate(value))
            pairs.reverse()
            stack.extend([(item, path + (index,), depth + 1) for index, item in pairs])
        elif kind == "string" and isinstance(value, str) and len(value) > limits.max_string_length:
            raise _fail("input.limit", f"a string is longer than {limits.max_string_length} characters", pointer(path))
        elif kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024:
            raise _fail("input.limit", "an integer is too large", pointer(path))
    raise _fail("input.limit", "the document breaks a limit")  # pragma: no cover - the fast walk found one
