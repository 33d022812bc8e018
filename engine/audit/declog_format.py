"""The decision log's record format: a record's canonical JSON and its
hash, the masking of the input it holds, the head file, and reading a
line back strictly; declog.py writes records with it, declog_verify.py
checks a whole log.

:func:`read_line` (for verify, and for a writer reopening a log) holds a
line to the exact bytes the writer writes: the record's canonical JSON, a
line of at most MAX_LINE_BYTES. A repeated key,
other whitespace or key order, an escape the canonical form has not, a byte
order mark, a CR, a field of the wrong type (``"seq": true``, a negative
count) are each refused with the line's number, so what one reader of a
line sees is what the hash covers. Only regular files are read: a FIFO or a
device is refused (``log.not_regular``), never waited on.

``input.digest`` is the SHA-256 of the document's canonical JSON as read,
before masking. ``input.document`` is the document with the values under
``kv_connector_extra_config`` replaced by ``"<masked>"`` (MultiConnector
children stay, their own settings masked in turn); ``input.masked`` lists
the JSON Pointers masked. Masking is configured with :class:`Masking`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from ..core.errors import HMAPolicyError, Problem
from ..core.input import STRICT_JSON, DuplicateKey
from ..fileio import atomic_write, open_regular

__all__ = ["FORMAT_VERSION", "GENESIS", "MASKED", "MAX_LINE_BYTES", "LogError", "fail", "Masking", "DEFAULT_MASKING",
           "NO_MASKING", "canonical", "sha256", "input_digest", "mask", "head_path", "read_head", "write_head",
           "LogProblem", "Line", "read_line"]

FORMAT_VERSION = 1
GENESIS = "sha256:" + "0" * 64
MASKED = "<masked>"
_JSON_STRING_FIELDS = ("kv_transfer_config", "kv-transfer-config")
# The longest record line read or written: a record holds at most
# `max_document_bytes` of document (64 KiB by default), so this is far past
# any record the tool writes, and bounds what a forged line costs to read.
MAX_LINE_BYTES = 16 * 1024 * 1024
_MAX_HEAD_BYTES = 4096
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class LogError(HMAPolicyError):
    """The log cannot be opened or written (missing, locked, a torn tail, truncated)."""


def fail(code: str, message: str, hint: str | None = None, file: Any = None) -> LogError:
    return LogError([Problem(code, message, hint=hint, file=str(file) if file is not None else None)])


@dataclass(frozen=True, slots=True)
class Masking:
    """What a record must not show. Every value under a field named in
    ``fields`` is masked, except lists named in ``keep`` (MultiConnector
    children), whose items are walked like connector configs."""

    fields: tuple[str, ...] = ("kv_connector_extra_config",)
    keep: tuple[str, ...] = ("connectors",)


DEFAULT_MASKING = Masking()
NO_MASKING = Masking(fields=())


# One encoder for every digest: json.dumps with options builds one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, ASCII only."""
    if _plain(value):
        # orjson writes a value of these types as the encoder above does, in
        # half its time, but for text that is not printable ASCII (written
        # as UTF-8, and DEL unescaped) and integers past 64 bits (refused).
        try:
            out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass
        else:
            if out.isascii() and b"\x7f" not in out:
                return out
    return _CANONICAL.encode(value).encode("ascii")


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only dicts, lists, tuples, strings, integers,
    booleans and None, each of exactly its type: not a float (written
    otherwise), nor any type orjson writes and the encoder refuses (a
    dataclass, a date, an enum)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:  # a key not a string: orjson refuses it
            children: Any = cast(dict, item).values()
        elif kind is list or kind is tuple:
            children = item
        else:
            if not (kind is str or kind is int or kind is bool or item is None):
                return False
            continue
        for child in children:
            kind = type(child)
            if kind is dict or kind is list or kind is tuple:
                stack.append(child)
            elif not (kind is str or kind is int or kind is bool or child is None):
                return False
    return True


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def input_digest(document: Any) -> str:
    """The SHA-256 of a document's canonical JSON."""
    return sha256(canonical(document))


def _escape(part: Any) -> str:
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


def mask(document: Any, masking: Masking = DEFAULT_MASKING) -> tuple[Any, list[str]]:
    """A copy of ``document`` with masked values, and the pointers masked.

    Iterative (documents may be as deep as the input limits allow). A
    `kv_transfer_config` given as a JSON string is read so that its extra
    config can be masked; it is logged as an object.
    """
    holder: list[Any] = [None]
    masked: list[str] = []
    # (value, container, key, pointer, state): state "mask" hides the value,
    # "field" is the mapping of a masked field, None copies.
    stack: list[tuple[Any, Any, Any, str, str | None]] = [(document, holder, 0, "", None)]
    while stack:
        value, parent, key, path, state = stack.pop()
        if state == "mask":
            parent[key] = MASKED
            masked.append(path)
            continue
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            parent[key] = out
            for k, v in value.items():
                p = path + _escape(k)
                if state == "field":
                    if k in masking.keep and isinstance(v, list):
                        stack.append((v, out, k, p, None))
                    elif v is not None:
                        stack.append((v, out, k, p, "mask"))
                    else:
                        out[k] = None
                elif k in masking.fields and v is not None:
                    stack.append((v, out, k, p, "field" if isinstance(v, Mapping) else "mask"))
                elif k in _JSON_STRING_FIELDS and isinstance(v, str) and masking.fields:
                    try:
                        parsed = json.loads(v)
                    except (ValueError, RecursionError):
                        parsed = None
                    stack.append((parsed, out, k, p, None) if isinstance(parsed, dict) else (v, out, k, p, "mask"))
                else:
                    stack.append((v, out, k, p, None))
        elif isinstance(value, (list, tuple)):
            items: list[Any] = [None] * len(value)
            parent[key] = items
            for index, item in enumerate(value):
                stack.append((item, items, index, f"{path}/{index}", None))
        else:
            parent[key] = value
    return holder[0], sorted(masked)


def head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def read_head(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The head record, or None; and a problem reading it. A head with a
    repeated key or a field of the wrong type is not a head."""
    head = head_path(path)
    try:
        with open_regular(head) as handle:
            raw = handle.read(_MAX_HEAD_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the head file `{head}` cannot be read: {exc.strerror or exc}"
    try:
        data = STRICT_JSON.decode(raw.decode("ascii")) if len(raw) <= _MAX_HEAD_BYTES else None
    except (ValueError, RecursionError):
        data = None
    if type(data) is dict and data.keys() == {"v", "records", "last_hash"} and data["v"] == FORMAT_VERSION \
            and type(data["v"]) is int and _count(data["records"]) and _digest(data["last_hash"]):
        return data, None
    return None, f"the head file `{head}` is not a head record"


def write_head(path: Path, records: int, last_hash: str) -> None:
    with atomic_write(head_path(path)) as handle:
        handle.write(canonical({"v": FORMAT_VERSION, "records": records, "last_hash": last_hash}) + b"\n")


@dataclass(frozen=True, slots=True)
class LogProblem:
    """One finding of :func:`verify`; ``line`` is 1-based, ``seq`` the record's own."""

    code: str
    line: int | None
    seq: int | None
    message: str

    def render(self) -> str:
        where = f"line {self.line}" + (f" (seq {self.seq})" if self.seq is not None else "") if self.line else "log"
        return f"{where}: {self.code}: {self.message}"


@dataclass
class Line:
    number: int
    seq: int | None = None
    prev: str | None = None
    hash: str | None = None
    hash_ok: bool = False
    problem: LogProblem | None = None




def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _digest(value: Any) -> bool:
    return type(value) is str and _DIGEST.fullmatch(value) is not None


def _text(value: Any) -> bool:
    return type(value) is str


def _optional_text(value: Any) -> bool:
    return value is None or type(value) is str


def _texts(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _fields(value: Any, checks: dict[str, tuple[Any, str]], optional: tuple[str, ...] = ()) -> str | None:
    """Why the object ``value`` is not ``checks`` (each field's test and what
    it must be), or None."""
    if type(value) is not dict:
        return "is not an object"
    for name in value:
        if name not in checks:
            return f"has a field `{name}` a decision record does not have"
    for name, (test, wanted) in checks.items():
        if name not in value:
            if name not in optional:
                return f"has no `{name}`"
        elif not test(value[name]):
            return f"`{name}` is not {wanted}"
    return None


_TEXT = (_text, "a string")
_TEXTS = (_texts, "a list of strings")
_ERROR = {"code": _TEXT, "stage": (_optional_text, "a string or null"), "path": _TEXT}
_RECORD: dict[str, tuple[Any, str]] = {
    "v": (lambda v: type(v) is int and v == FORMAT_VERSION, f"the number {FORMAT_VERSION}"),
    "seq": (_count, "a whole number of 0 or more"),
    "decision_id": _TEXT,
    "timestamp": _TEXT,
    "tool": (lambda v: _fields(v, {"name": _TEXT, "version": _TEXT}) is None, "{name, version} strings"),
    "policy": (lambda v: _fields(v, {"digest": _TEXT}) is None, "{digest} string"),
    "input": (lambda v: _fields(v, {"source": (_optional_text, ""), "digest": (_optional_text, ""), "document": (lambda _: True, ""),
                                    "masked": _TEXTS, "omitted": _TEXT}, optional=("omitted",)) is None,
              "{source, digest, document, masked} as a writer writes them"),
    "outcome": _TEXT,
    "hma_enabled": (lambda v: v is None or type(v) is bool, "true, false or null"),
    "errors": (lambda v: type(v) is list and all(_fields(e, _ERROR) is None for e in v), "a list of {code, stage, path}"),
    "warnings": _TEXTS,
    "reasons": _TEXTS,
    "trace": _TEXTS,
    "prev": (_digest, "a SHA-256 digest (sha256: and 64 hex digits)"),
    "hash": (_digest, "a SHA-256 digest (sha256: and 64 hex digits)"),
}


def read_line(number: int, raw: bytes) -> Line:
    """One line of a log (without its newline), checked as a record.

    A line must be, byte for byte, the canonical JSON of the record it
    parses to, as the writer wrote it: a repeated key, whitespace, another
    key order, an escape the canonical form has not (``\\u0041``), a byte
    order mark, a CR before the newline or a field of the wrong type is
    refused, not read past. So the hash, the SHA-256 of the canonical JSON
    of the record less ``hash``, is that of the line's own bytes less its
    ``hash`` member: what one reader sees is what every reader sees.
    """
    line = Line(number)

    def refuse(code: str, message: str) -> Line:
        line.problem = LogProblem(code, number, line.seq, message)
        return line

    if len(raw) > MAX_LINE_BYTES:
        return refuse("log.limit", f"the line is longer than {MAX_LINE_BYTES} bytes")
    if raw.startswith(b"\xef\xbb\xbf"):
        return refuse("log.noncanonical", "the line starts with a byte order mark, which the tool never writes")
    if raw.endswith(b"\r"):
        return refuse("log.noncanonical", "the line ends in CR LF; the tool ends lines in LF")
    if not raw.isascii():
        return refuse("log.noncanonical", "the line holds bytes that are not ASCII; the tool escapes them")
    try:
        record = STRICT_JSON.decode(raw.decode("ascii"))
    except DuplicateKey as repeated:
        return refuse("log.duplicate_key", f"key `{repeated.args[0]}` appears twice in one object")
    except RecursionError:
        return refuse("log.limit", "the line is nested too deeply to be a record")
    except ValueError:
        return refuse("log.malformed", "the line is not a JSON record")
    if type(record) is dict and _count(record.get("seq")):
        line.seq = record["seq"]
    wrong = _fields(record, _RECORD)
    if wrong is not None:
        return refuse("log.malformed", f"the line is not a decision record: it {wrong}" if wrong[0] != "`"
                      else f"the line is not a decision record: {wrong}")
    try:
        exact = canonical(record) == raw
    except RecursionError:
        return refuse("log.limit", "the line is nested too deeply to be a record")
    if not exact:
        return refuse("log.noncanonical", "the line is not its record's canonical JSON (sorted keys, no whitespace, "
                      "no needless escapes): it was rewritten")
    line.prev, line.hash = record["prev"], record.pop("hash")
    line.hash_ok = sha256(canonical(record)) == line.hash
    return line
