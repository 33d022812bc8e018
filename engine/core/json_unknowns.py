"""Unknown values inside a vLLM JSON option (``--kv-transfer-config
'{"kv_port": "$PORT"}'``): where each sits, and whether the decision reads it.

A command read from a file may hold values the file does not give. Inside a
JSON option, the schema of the deployment document tells which of them the
decision reads: one it does not read is shown as written; one it reads for
its type alone, or one that is a fact the rules read as written
(:data:`.facts.READ_AT`), gets a stand-in (core.command.StandIn); any other
makes the option unknown.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from . import lax
from .facts import GIVEN_ONLY, READ_AT
from .markers import has_unresolved, show
from .options import SCHEMA
from .schema import pointer

__all__ = ["ReadAt", "Unread", "unread_json"]


class ReadAt(NamedTuple):
    """Where in a JSON option an unresolved value sits that the decision reads,
    its text, and the fact it is where the rules read it as written."""

    at: str
    text: str
    fact: str | None = None  # the fact its stand-in stands for ...
    inside: str = ""         # ... and where, inside the value (an object of such facts)


class _Read(Exception):
    """Raised at a :class:`ReadAt` (its one argument). The value is returned,
    never the exception: its traceback would hold the reader's frames in a cycle."""


class Unread(NamedTuple):
    """A JSON option's unresolved values, none read for more than its type:
    ``shown``, the value with each the decision does not read shown as
    written and a stand-in for each it reads for its type (StandIn); those
    not read (``unread``: where, and the text), and the first read (None: none is)."""

    shown: str
    unread: list[tuple[str, str]]
    read: ReadAt | None
    stood: tuple[ReadAt, ...]  # where each stand-in stands (JSON Pointers in the option)


# What stands in for a value read for its type alone (core.lax's kinds): one the schema takes.
_STAND_IN: dict[str, Any] = {"int": 0, "float": 0.0, "bool": False}
# What stands in for a string fact the rules read as written (each class of
# its values is tried in its place: audit.unknowns).
_FACT_STAND_IN = ""


def _as_facts(path: list[Any], bare_schema: Any) -> list[tuple[list[Any], str]] | None:
    """The facts an unknown value at ``path`` is, as written (READ_AT): the
    value is one, or, written bare (``bare_schema``: its schema), it is an
    object whose every field its schema knows is one; with where each sits
    in it. None: the value is not read as facts alone."""
    if (fact := READ_AT.get(pointer(path))) is not None:
        return [([], fact.name)]
    properties = _schema_properties(bare_schema) if bare_schema is not None else {}
    facts = [([key], READ_AT.get(pointer(path + [key]))) for key in properties]
    return [(inner, fact.name) for inner, fact in facts if fact is not None] if facts and all(f for _, f in facts) else None


def unread_json(field_name: str, value: str) -> Unread | ReadAt | None:
    """A JSON option's unresolved values: where each sits, and whether the
    decision reads it (:class:`Unread`), or the first one it reads for more
    than its type (:class:`ReadAt`), or None when the value is not JSON.

    What the decision reads comes from the document's schema. Inside a JSON
    string, an unresolved value is read where the schema constrains the
    string's text (an enum, a pattern), or, for its type alone, where vLLM
    reads a number or a boolean from it (``"kv_port": "$PORT"``); elsewhere
    the value is a string whatever it holds (the schema accepts it, or
    refuses any string). A value written bare (``"port": $PORT``) is read
    unless the schema knows nothing of its key (a key of
    ``kv_connector_extra_config``): it may be any JSON at all; where the
    schema reads a number or boolean there, for its type alone.
    """
    try:
        parsed = json.loads(_quote_bare_markers(value), strict=False)  # markers are control characters
    except (ValueError, RecursionError):
        return None
    unread: list[tuple[str, str]] = []
    stood: list[ReadAt] = []
    if field_name in GIVEN_ONLY and isinstance(parsed, str) and has_unresolved(parsed):
        # The whole value not known, of an option the decision reads only for being given (`--kv-events-config
        # "$X"`): given, whatever it holds.
        return Unread(json.dumps(GIVEN_ONLY[field_name]), [], ReadAt("", parsed.removeprefix(_BARE)),
                      (ReadAt("", parsed.removeprefix(_BARE)),))
    try:
        shown = _walk_unread(parsed, SCHEMA["properties"].get(field_name), [field_name], unread, stood)
    except _Read as read:
        return stood[0] if stood else read.args[0]  # the first one read, in the value's order
    except RecursionError:
        return None
    return Unread(json.dumps(shown), unread, stood[0] if stood else None, tuple(stood))


def _walk_unread(node: Any, schema: Any, path: list[Any], unread: list[tuple[str, str]], stood: list[ReadAt]) -> Any:
    """``node`` with each unresolved string the decision does not read shown
    as written (and listed in ``unread``), and a stand-in for each it reads
    for its type alone or as a fact (listed in ``stood``); raises _Read at
    one it reads otherwise. ``path`` starts at the option's document field."""
    if isinstance(node, str):
        if not has_unresolved(node):
            return node
        bare = node.startswith(_BARE)
        if bare:
            node = node[len(_BARE):]
        if (kind := _typed_only(schema)) is not None:  # quoted, or written bare (`"kv_port": $PORT`)
            stood.append(ReadAt(pointer(path[1:]), node))
            return _STAND_IN[kind]
        if (facts := _as_facts(path, schema if bare else None)) is not None:
            stood += [ReadAt(pointer(path[1:]), node, fact, pointer(inner)) for inner, fact in facts]
            return _FACT_STAND_IN if facts[0][0] == [] else {inner[0]: _FACT_STAND_IN for inner, _ in facts}
        if (schema is not None) if bare else _constrained(schema):
            raise _Read(ReadAt(pointer(path[1:]), node))
        unread.append((pointer(path[1:]), node))
        return show(node, None)
    if isinstance(node, dict):
        properties = _schema_properties(schema)
        named = next((k for k in node if has_unresolved(k)), None)
        if named is not None:  # a key the file does not give: any field, the read ones too
            raise _Read(ReadAt(pointer(path[1:]), named))
        return {k: _walk_unread(v, properties.get(k), path + [k], unread, stood) for k, v in node.items()}
    if isinstance(node, list):
        items = _schema_items(schema)
        return [_walk_unread(v, items, path + [i], unread, stood) for i, v in enumerate(node)]
    return node


def _schema_parts(schema: Any) -> list[dict[str, Any]]:
    """A schema and every schema that applies with it ($ref, allOf, the then of an if)."""
    out: list[dict[str, Any]] = []
    stack = [schema]
    seen: set[int] = set()
    while stack:
        part = stack.pop()
        if not isinstance(part, dict) or id(part) in seen:
            continue
        seen.add(id(part))
        out.append(part)
        if isinstance(part.get("$ref"), str) and part["$ref"].startswith("#/$defs/"):
            stack.append(SCHEMA.get("$defs", {}).get(part["$ref"][len("#/$defs/"):]))
        stack += [part.get("then"), part.get("else")]
        for key in ("allOf", "anyOf", "oneOf"):
            stack += part.get(key) or []
    return out


def _schema_properties(schema: Any) -> dict[str, Any]:
    """Each property's schema, from every part that names it (a MultiConnector's
    children are known only in the `then` of an `if`): all of them apply."""
    found: dict[str, list[Any]] = {}
    for part in _schema_parts(schema):
        for key, sub in (part.get("properties") or {}).items():
            found.setdefault(key, []).append(sub)
    return {key: subs[0] if len(subs) == 1 else {"allOf": subs} for key, subs in found.items()}


def _schema_items(schema: Any) -> Any:
    return next((part["items"] for part in _schema_parts(schema) if "items" in part), None)


def _typed_only(schema: Any) -> str | None:
    """The kind (core.lax) a schema reads a string's text into when it reads
    it for that alone: a number or boolean field without a choice or a
    pattern; else None."""
    if _constrained(schema):
        return None
    return next((kind for kind in map(lax.kind_of, _schema_parts(schema)) if kind is not None), None)


def _constrained(schema: Any) -> bool:
    """Whether the schema reads a string's text for more than its type: a choice or a pattern."""
    return any(key in part for part in _schema_parts(schema) for key in ("enum", "const", "pattern"))


# What marks a value written bare in JSON (outside a string) once it is quoted to be parsed.
_BARE = "\x02"


def _quote_bare_markers(text: str) -> str:
    """JSON text with each unresolved marker outside a string made a string (marked as bare)."""
    if "\x00" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    start = 0
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "\x00":
            end = text.find("\x00", i + 1)
            if end < 0:
                break
            out += [text[start:i], '"', _BARE, text[i:end + 1], '"']
            i = start = end + 1
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)
