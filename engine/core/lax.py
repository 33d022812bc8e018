"""Values as vLLM's config classes read them: pydantic's lax mode.

vLLM's ``KVTransferConfig`` is a pydantic dataclass, and pydantic reads a
JSON value into an ``int``, ``float`` or ``bool`` field leniently:
``"kv_port": "8000"`` is 8000 and ``true`` is 1; ``"1e1"`` is 10.0 in a
float field; ``"yes"`` is True in a bool one. vLLM's own example scripts
write such values (``"kv_port":"$kv_port"``), and the release starts. The
deployment schema types these fields strictly, so :mod:`.input` reads each
value the schema refused at such a field with :func:`read_refused`, and
checks the document again (a valid document is never read twice).

The rules are pydantic-core's, recorded from the pydantic vLLM runs on
(tools/pydantic_lax.py, tests/pydantic_lax/); a value pydantic refuses is
left as it is, for the schema to refuse. So is text pydantic reads as a
non-finite float (``"inf"``): a decision's document holds finite numbers
only (JSON has no others), as with ``--kv-offloading-size inf``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["KINDS", "kind_of", "read", "read_refused", "NOT_READ"]

# The field types this applies to, by their JSON Schema names.
KINDS = {"integer": "int", "number": "float", "boolean": "bool"}


def kind_of(schema: Mapping[str, Any]) -> str | None:
    """The kind pydantic reads text into for a field of this schema: int,
    float or bool where its type names exactly one of those (null beside it
    or not), and no string (a string stays one); else None."""
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    read = [KINDS[k] for k in kinds if k in KINDS]
    return read[0] if len(read) == 1 and "string" not in kinds else None


class _NotRead:
    def __repr__(self) -> str:
        return "NOT_READ"


NOT_READ: Any = _NotRead()

# What pydantic-core strips around a number (Rust's char::is_whitespace:
# Unicode White_Space, without the ASCII separators U+001C-U+001F).
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
         "\u2028\u2029\u202f\u205f\u3000"
# An integer as pydantic-core reads one: ASCII digits grouped by single
# underscores, a fraction of zeros; and its quirk, a negative number after
# leading zeros (`0-5` is -5, `+0_-5` too).
_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
_ZEROS_THEN_NEGATIVE = re.compile(r"\+?0[0_]*(-[0-9]+(?:_[0-9]+)*)(?:\.0+)?")
# A float as Rust's parser reads one: `1.`, `.5`, `1e5`, `inf`, `infinity`,
# `nan` in any case, an ASCII sign and ASCII digits.
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)
_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "t": True, "y": True,
          "false": False, "no": False, "off": False, "0": False, "f": False, "n": False}


def read(value: Any, kind: str) -> Any:
    """``value`` as pydantic reads it into a field of ``kind`` (int, float,
    bool), or :data:`NOT_READ` when pydantic refuses it or it needs no reading."""
    if kind == "int":
        return _int(value)
    if kind == "float":
        return _float(value)
    if kind == "bool":
        return _bool(value)
    return NOT_READ


def _int(value: Any) -> Any:
    if type(value) is bool:
        return int(value)
    if type(value) is not str:
        return NOT_READ  # a number: the schema reads it as pydantic does (integral, in range)
    text = value.strip(_SPACE)
    if len(text) > 4300:  # pydantic's bound, and Python's on int()
        return NOT_READ
    if _INT.fullmatch(text):
        return int(text.partition(".")[0].replace("_", ""))
    quirk = _ZEROS_THEN_NEGATIVE.fullmatch(text)
    return int(quirk.group(1).replace("_", "")) if quirk else NOT_READ


def _without_underscores(text: str) -> str | None:
    """The text without its underscores, where each stands alone between two other characters."""
    if "_" not in text or text.startswith("_") or text.endswith("_") or "__" in text:
        return None
    return text.replace("_", "")


def _float(value: Any) -> Any:
    if type(value) is bool:
        return float(value)
    if type(value) is not str:
        return NOT_READ
    # pydantic-core: the trimmed text, else the text as given without its underscores.
    text = value.strip(_SPACE)
    if not _FLOAT.fullmatch(text):
        text = _without_underscores(value) or ""
        if not _FLOAT.fullmatch(text):
            return NOT_READ
    number = float(text)
    return number if math.isfinite(number) else NOT_READ


def _bool(value: Any) -> Any:
    if type(value) is str:  # its ASCII letters in either case (Rust's eq_ignore_ascii_case)
        return _BOOLS.get(value.lower(), NOT_READ) if value.isascii() else NOT_READ
    if type(value) in (int, float) and value in (0, 1):
        return bool(value)
    return NOT_READ


# A refused value at a field of a KVTransferConfig: the top-level one, or a child at any depth.
_CONFIG_FIELD = re.compile(r"/kv_transfer_config(?:/kv_connector_extra_config/connectors/[0-9]+)*/([a-z_]+)")


def read_refused(document: dict[str, Any], paths: list[str], fields: Mapping[str, str]) -> bool:
    """Each value at ``paths`` (where the schema refused one) that is a
    KVTransferConfig field of ``fields`` (name -> int, float or bool),
    replaced by what pydantic reads it as. The containers on the way are
    copied: the caller's document is never changed. Whether any value was."""
    changed = False
    copied: set[int] = set()
    for path in paths:
        match = _CONFIG_FIELD.fullmatch(path)
        kind = fields.get(match.group(1)) if match else None
        if kind is None:
            continue
        parts = path[1:].split("/")
        holder: Any = document
        for part in parts[:-1]:
            if isinstance(holder, list):  # a problem's path follows the document; checked all the same
                child = holder[int(part)] if part.isdigit() and int(part) < len(holder) else None
            else:
                child = holder.get(part) if isinstance(holder, dict) else None
            if not isinstance(child, (dict, list)):
                break
            if id(child) not in copied:
                child = dict(child) if isinstance(child, dict) else list(child)
                copied.add(id(child))
                holder[int(part) if isinstance(holder, list) else part] = child  # type: ignore[index]
            holder = child
        else:
            value = read(holder.get(parts[-1]), kind) if isinstance(holder, dict) else NOT_READ
            if value is not NOT_READ:
                holder[parts[-1]] = value
                changed = True
    return changed
