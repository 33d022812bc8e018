"""Values a command holds that are not known where it is read: a shell
variable set elsewhere, ``$(...)``, a ``valueFrom``. A reader writes such a
value into a word as an *unresolved marker* (:func:`unresolved`), so that an
option whose value holds one is reported, not decided; :func:`show` writes a
value for a message with its markers as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["UNRESOLVED", "unresolved", "has_unresolved", "unresolved_names", "references", "show", "plain",
           "outside", "held_markers", "unheld", "shown_held"]


# An unresolved reference, kept in the text so that an option whose value
# holds one is reported instead of decided: NUL, the name as written, then
# optionally SOH and why it is not known. NUL never occurs in a command line
# (argv strings cannot hold it), so a marker cannot be forged by one.
UNRESOLVED = re.compile("\x00([^\x00\x01]*)(?:\x01([^\x00]*))?\x00")


def unresolved(name: str, reason: str | None = None) -> str:
    """The marker of a value not known, shown as ``name`` (``$KV``,
    ``$(...)``); ``reason`` completes "which ..." ("is set at run time by
    `read` at line 3") where "this file does not set" would not be true."""
    # A name or reason made from words that hold markers themselves (`source
    # $(...)/env.sh`) shows them as written: a marker never nests.
    name, reason = plain(name), plain(reason) if reason else reason
    return f"\x00{name}\x01{reason}\x00" if reason else f"\x00{name}\x00"


def has_unresolved(text: str) -> bool:
    return "\x00" in text and bool(UNRESOLVED.search(text))


def unresolved_names(text: str) -> list[str]:
    """The references in ``text``, each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in UNRESOLVED.finditer(text)))


def references(text: str, *, whole: bool = False) -> str:
    """The references of ``text`` for a message, "`$KV`, which this file does
    not set", or with the reasons they carry; ``whole``: the whole text shown
    (a path that holds one)."""
    found = dict.fromkeys((m.group(1), m.group(2)) for m in UNRESOLVED.finditer(text))
    reasons = [f"`{name}` {reason}" if whole else reason for name, reason in found if reason]
    if whole:
        return f"`{show(text)}`, " + ("; ".join(f"where {r}" for r in reasons) if reasons else "which this file does not set")
    if not reasons:
        return ", ".join(f"`{name}`" for name, _ in found) + ", which this file does not set"
    return ", ".join(f"`{name}` (which {reason or 'this file does not set'})" for name, reason in found)


def plain(text: str) -> str:
    """``text`` with its markers shown as written and no other NUL or SOH
    left: what leaves a reader for a report (ids, names, messages)."""
    if "\x00" not in text and "\x01" not in text:
        return text
    return UNRESOLVED.sub(lambda m: m.group(1), text).replace("\x00", "\ufffd").replace("\x01", "\ufffd")


def outside(text: str, transform: Callable[[str], str]) -> str:
    """``text`` with ``transform`` applied to each stretch outside its
    markers, the markers kept whole (an option name's `_` read as `-`
    leaves a variable's name as written)."""
    if "\x00" not in text:
        return transform(text)
    out, at = [], 0
    for marker in UNRESOLVED.finditer(text):
        out += [transform(text[at:marker.start()]), marker.group(0)]
        at = marker.end()
    return "".join(out) + transform(text[at:])


def show(text: str, limit: int | None = 120) -> str:
    """A value for a message: unresolved references shown as written, at
    most ``limit`` characters (None: all of it)."""
    text = UNRESOLVED.sub(lambda m: m.group(1), text)
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


# A marker's NUL is a character YAML refuses, and a marker inside quotes may hold the quote (a
# Go action's `{{ "app_port" | getPort }}`): while a YAML text that holds markers is parsed (a config
# file a script writes with a variable in it, a template rendered with values not known), each is
# held as its number between two characters of Unicode's private-use area, which no YAML indicator
# is and no real file holds, and each is put back in the values read.
_HOLD, _END = "\ue000", "\ue002"
_HELD = re.compile(f"{_HOLD}([0-9]+){_END}")


def held_markers(text: str) -> tuple[str, list[str]] | None:
    """``text`` with each unresolved marker held as characters YAML reads as
    plain text wherever they stand, and the markers, which unheld() puts
    back; None where the text holds those characters itself."""
    if _HOLD in text or _END in text:
        return None
    markers: list[str] = []

    def hold(match: re.Match[str]) -> str:
        markers.append(match[0])
        return f"{_HOLD}{len(markers) - 1}{_END}"
    return UNRESOLVED.sub(hold, text), markers


def unheld(value: Any, markers: list[str]) -> Any:
    """A value parsed from held_markers' text, each marker back where it stood."""
    if isinstance(value, str):
        return _HELD.sub(lambda match: markers[int(match[1])], value) if _END in value else value
    if isinstance(value, dict):
        return {unheld(k, markers): unheld(v, markers) for k, v in value.items()}
    if isinstance(value, list):
        return [unheld(v, markers) for v in value]
    return value


def shown_held(message: str, markers: list[str]) -> str:
    """A parser's message about held_markers' text, each marker shown as the file writes its value."""
    return _HELD.sub(lambda match: UNRESOLVED.sub(r"\1", markers[int(match[1])]), message)
