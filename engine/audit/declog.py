"""The decision log: one JSON record per decision, appended and hash-chained,
and :func:`verify`, which finds where a log was tampered with.

A log is a file of JSON Lines. Each record is written as canonical JSON
(sorted keys, no spaces, ASCII) and holds::

    v, seq, decision_id, timestamp, tool {name, version}, policy {digest},
    input {source, digest, document, masked}, outcome, hma_enabled,
    errors [{code, stage, path}], warnings [codes], reasons, trace, prev, hash

``hash`` is the SHA-256 of the record's canonical JSON without ``hash``;
``prev`` is the previous record's ``hash`` (64 zeros for the first), and
``seq`` counts from 0. An edit breaks a record's hash, a deletion leaves a
gap in ``seq``, a move puts ``seq`` out of order. Removing records from the
end leaves a valid chain, so a head file next to the log (``FILE.head``:
the number of records and the last hash) is rewritten, atomically, when a
writer closes; a log shorter than its head was truncated. A torn tail (a
last line without its newline, from a crash during a write) is reported, and
repaired only by :func:`repair`, which writes the repaired log beside the
old one and renames it into place (fileio.atomic_write).

:func:`verify` holds each line to the exact bytes the writer writes: the
record's canonical JSON, a line of at most MAX_LINE_BYTES. A repeated key,
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

Each record is flushed and fsync'd before :meth:`DecisionLog.append`
returns. A writer holds an exclusive lock (``flock``) on the log while open;
a second writer of the same file in the same process (a thread, a signal
handler) is refused at once rather than left waiting on its own process's
lock, and an append re-entered from a signal handler is refused rather than
interleaved. Clocks and ids are injectable (``clock``, ``new_id``) for tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import orjson

from ..core.errors import HMAPolicyError, Problem
from ..fileio import NotRegularFile, atomic_write, deferred_signals, escape_name, open_regular

try:  # POSIX file locks; without them (Windows) a log has one writer by convention
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms CI runs
    fcntl = None  # type: ignore[assignment]

__all__ = ["DecisionLog", "Masking", "DEFAULT_MASKING", "NO_MASKING", "LogError", "LogProblem", "Verification",
           "verify", "repair", "input_digest", "mask", "canonical", "GENESIS"]

FORMAT_VERSION = 1
GENESIS = "sha256:" + "0" * 64
MASKED = "<masked>"
_JSON_STRING_FIELDS = ("kv_transfer_config", "kv-transfer-config")
_LOCK_TIMEOUT = 10.0
# The longest record line read or written: a record holds at most
# `max_document_bytes` of document (64 KiB by default), so this is far past
# any record the tool writes, and bounds what a forged line costs to read.
MAX_LINE_BYTES = 16 * 1024 * 1024
_MAX_HEAD_BYTES = 4096
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class LogError(HMAPolicyError):
    """The log cannot be opened or written (missing, locked, a torn tail, truncated)."""


def _fail(code: str, message: str, hint: str | None = None, file: Any = None) -> LogError:
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


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def input_digest(document: Any) -> str:
    """The SHA-256 of a document's canonical JSON."""
    return _sha256(canonical(document))


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


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_head(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The head record, or None; and a problem reading it. A head with a
    repeated key or a field of the wrong type is not a head."""
    head = _head_path(path)
    try:
        with open_regular(head) as handle:
            raw = handle.read(_MAX_HEAD_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the head file `{head}` cannot be read: {exc.strerror or exc}"
    try:
        data = _STRICT.decode(raw.decode("ascii")) if len(raw) <= _MAX_HEAD_BYTES else None
    except (ValueError, RecursionError):
        data = None
    if type(data) is dict and data.keys() == {"v", "records", "last_hash"} and data["v"] == FORMAT_VERSION \
            and type(data["v"]) is int and _count(data["records"]) and _digest(data["last_hash"]):
        return data, None
    return None, f"the head file `{head}` is not a head record"


def _write_head(path: Path, records: int, last_hash: str) -> None:
    with atomic_write(_head_path(path)) as handle:
        handle.write(canonical({"v": FORMAT_VERSION, "records": records, "last_hash": last_hash}) + b"\n")


def _last_line(fd: int, size: int) -> bytes | None:
    """The last newline-terminated line of the file (without its newline);
    None when it is longer than MAX_LINE_BYTES."""
    end = size - 1  # the final newline
    block = 65536
    buffer = b""
    position = end
    while position > 0:
        start = max(0, position - block)
        os.lseek(fd, start, os.SEEK_SET)
        buffer = os.read(fd, position - start) + buffer
        position = start
        cut = buffer.rfind(b"\n")
        if cut >= 0:
            buffer = buffer[cut + 1:]
            break
        if len(buffer) > MAX_LINE_BYTES:
            return None
    return buffer if len(buffer) <= MAX_LINE_BYTES else None


def _lock(fd: int, path: Path, timeout: float) -> None:
    """The writers' lock on the open log ``fd``, waited for up to ``timeout`` seconds."""
    if fcntl is None:  # pragma: no cover
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise _fail("log.locked", "the decision log is locked by another writer", file=path) from None
            time.sleep(0.05)


# The registry of the logs this process has open to write, by file identity
# (device, inode): a second writer in the same process (a signal handler, a
# thread) is refused at once, where flock, which counts open files, not
# processes, would make it wait on the first one for the lock timeout.
# `dict.setdefault` is atomic: no lock, so nothing a signal could deadlock on.
_WRITING: dict[tuple[int, int], int] = {}


class DecisionLog:
    """An open decision log, appended to by :meth:`append`.

    Opening checks the end of the log: a torn tail, or a log shorter than
    its head, is refused (``hma-policy log verify FILE`` says what is wrong).
    Use as a context manager, or call :meth:`close`, which writes the head.
    """

    def __init__(self, path: str | Path, *, masking: Masking = DEFAULT_MASKING,
                 clock: Callable[[], datetime] | None = None, new_id: Callable[[], str] | None = None,
                 max_document_bytes: int = 65536, tool_version: str | None = None, lock_timeout: float = _LOCK_TIMEOUT):
        from ..version import __version__

        self.path = Path(path)
        self.masking = masking
        self.clock = clock or _utc_now
        self.new_id = new_id or (lambda: str(uuid.uuid4()))
        self.max_document_bytes = max_document_bytes
        self.tool_version = tool_version or __version__
        self.lock_timeout = lock_timeout
        # Appends and close() one at a time: threads wait their turn; the
        # same thread coming back (a signal handler) is refused (_guard).
        self._mutex = threading.RLock()
        self._busy = False
        self._fd, self._key = self._open()
        try:
            self._seq, self._last = self._tail()
        except BaseException:
            self._release()
            raise
        self._appended = 0

    def _open(self) -> tuple[int, tuple[int, int]]:
        """The log opened to append, locked, and registered as this process's
        writer of it. Retried when the file was replaced while this waited
        for its lock (a repair renames a new file into place)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
        while True:
            try:
                fd = os.open(self.path, flags, 0o644)
            except OSError as exc:
                raise _fail("log.open", f"cannot open the decision log: {exc.strerror or exc}", file=self.path) from None
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                os.close(fd)
                raise _fail("log.not_regular", "the decision log is not a regular file", file=self.path)
            os.set_blocking(fd, True)
            key = (status.st_dev, status.st_ino)
            if _WRITING.setdefault(key, id(self)) != id(self):
                os.close(fd)
                raise _fail("log.locked", "the decision log is already open to write in this process", file=self.path)
            try:
                _lock(fd, self.path, self.lock_timeout)
                now = os.stat(self.path)
            except BaseException:
                _WRITING.pop(key, None)
                os.close(fd)
                raise
            if (now.st_dev, now.st_ino) == key:
                return fd, key
            _WRITING.pop(key, None)
            os.close(fd)

    def _release(self) -> None:
        os.close(self._fd)
        self._fd = -1
        _WRITING.pop(self._key, None)

    def _tail(self) -> tuple[int, str]:
        """The next seq and the last hash, from the end of the file."""
        size = os.fstat(self._fd).st_size
        head, problem = _read_head(self.path)
        hint = f"run `hma-policy log verify {self.path}`"
        if problem:
            raise _fail("log.head_invalid", problem, hint, file=self.path)
        if size == 0:
            if head is not None and head["records"] > 0:
                raise _fail("log.truncated", f"the decision log is empty but its head records {head['records']} record(s)",
                            hint, file=self.path)
            return 0, GENESIS
        os.lseek(self._fd, size - 1, os.SEEK_SET)
        if os.read(self._fd, 1) != b"\n":
            raise _fail("log.torn_tail", "the decision log ends in an incomplete record (an interrupted write)",
                        f"run `hma-policy log verify {self.path} --repair`", file=self.path)
        raw = _last_line(self._fd, size)
        if raw is None:
            raise _fail("log.limit", f"the last record of the decision log is longer than {MAX_LINE_BYTES} bytes", hint,
                        file=self.path)
        last = _read_line(0, raw)
        if last.problem is not None:
            where = f"the last record of the decision log (the line at byte {size - 1 - len(raw)})"
            raise _fail(last.problem.code, f"{where}: {last.problem.message}", hint, file=self.path)
        seq, last_hash = last.seq, last.hash
        assert seq is not None and last_hash is not None  # a record without a problem has both
        if head is not None and head["records"] > seq + 1:
            raise _fail("log.truncated", f"the decision log ends at seq {seq} but its head records {head['records']} record(s)",
                        hint, file=self.path)
        return seq + 1, last_hash

    def _guard(self) -> None:
        """Refuse a call made while this thread is inside append() or close()
        already: a signal handler's, which would otherwise write a record in
        the middle of another's (two records with one seq)."""
        if self._busy:
            raise _fail("log.locked", "the decision log was written to while a record was being written "
                        "(from a signal handler?); the record being written is kept, this one is not", file=self.path)

    def append(self, decision: Any, *, source: str | None = None, document: Any = None,
               digest: str | None = None) -> dict[str, Any]:
        """Append the record of one decision (a Decision, or its ``to_dict()``)
        and make it durable. ``document`` is the input as read; its digest is
        computed unless ``digest`` is given. ``source`` names the input (a
        file name that is not UTF-8 is written as fileio.escape_name writes
        it). Returns the record written."""
        with self._mutex:
            self._guard()
            self._busy = True
            try:
                return self._append(decision, source, document, digest)
            finally:
                self._busy = False

    def _append(self, decision: Any, source: str | None, document: Any, digest: str | None) -> dict[str, Any]:
        if self._fd < 0:
            raise _fail("log.closed", "the decision log is closed", file=self.path)
        d = decision.to_dict() if hasattr(decision, "to_dict") else decision
        if digest is None and document is not None:
            digest = input_digest(document)
        logged, masked = (None, []) if document is None else mask(document, self.masking)
        source = escape_name(source) if isinstance(source, str) else source
        entry: dict[str, Any] = {"source": source, "digest": digest, "document": logged, "masked": masked}
        if logged is not None and len(canonical(logged)) > self.max_document_bytes:
            entry.update(document=None, masked=[], omitted=f"the document is larger than {self.max_document_bytes} bytes")
        record = {
            "v": FORMAT_VERSION,
            "seq": self._seq,
            "decision_id": self.new_id(),
            "timestamp": _timestamp(self.clock()),
            "tool": {"name": "hma-policy", "version": self.tool_version},
            "policy": {"digest": d["policy"]["digest"]},
            "input": entry,
            "outcome": d["outcome"],
            "hma_enabled": d["hma_enabled"],
            "errors": [{"code": e["code"], "stage": e.get("stage"), "path": e["path"]} for e in d["errors"]],
            "warnings": [w["code"] for w in d["warnings"]],
            "reasons": list(d.get("reasons", [])),
            "trace": list(d["trace"]),
            "prev": self._last,
        }
        record["hash"] = _sha256(canonical(record))
        line = canonical(record) + b"\n"
        if len(line) > MAX_LINE_BYTES:  # log verify would refuse it
            raise _fail("log.write", f"the record is longer than {MAX_LINE_BYTES} bytes; lower max_document_bytes",
                        file=self.path)
        # Written whole: a SIGINT or SIGTERM of the command waits for the
        # write and its fsync, so that it never leaves a torn record.
        with deferred_signals():
            try:
                _write_all(self._fd, line)
                os.fsync(self._fd)
            except OSError as exc:
                raise _fail("log.write", f"cannot write the decision log: {exc.strerror or exc}", file=self.path) from None
            self._seq += 1
            self._last = record["hash"]
            self._appended += 1
        return record

    def close(self) -> None:
        """Write the head (the record count and last hash) and release the log."""
        with self._mutex:
            self._guard()
            if self._fd < 0:
                return
            self._busy = True
            try:
                if self._appended or not _head_path(self.path).exists():
                    _write_head(self.path, self._seq, self._last)
            except OSError as exc:
                raise _fail("log.write", f"cannot write the head file: {exc.strerror or exc}", file=self.path) from None
            finally:
                self._busy = False
                self._release()

    def __enter__(self) -> "DecisionLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- verification -----------------------------------------------------------------

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


@dataclass(frozen=True, slots=True)
class Verification:
    """What :func:`verify` found. ``problems[0]`` names the first bad record."""

    path: str
    records: int
    problems: tuple[LogProblem, ...]
    notes: tuple[str, ...] = ()
    last_hash: str = GENESIS
    torn_bytes: int = 0
    repaired: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad(self) -> LogProblem | None:
        return self.problems[0] if self.problems else None

    def render(self) -> str:
        lines = []
        if self.repaired:
            lines.append(f"{self.path}: repaired: {self.repaired}")
        if self.ok:
            lines.append(f"{self.path}: intact: {self.records} record(s), last hash {self.last_hash}")
        else:
            first = self.problems[0]
            lines.append(f"{self.path}: NOT intact: {len(self.problems)} problem(s); first bad record: {first.render()}")
            lines += [f"  {p.render()}" for p in self.problems[1:]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class _Line:
    number: int
    seq: int | None = None
    prev: str | None = None
    hash: str | None = None
    hash_ok: bool = False
    problem: LogProblem | None = None


class _Repeated(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


# A parser that refuses repeated keys (which first-wins and last-wins readers
# read differently), one decoder for every line.
_STRICT = json.JSONDecoder(object_pairs_hook=_unique)


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


def _read_line(number: int, raw: bytes) -> _Line:
    """One line of a log (without its newline), checked as a record.

    A line must be, byte for byte, the canonical JSON of the record it
    parses to, as the writer wrote it: a repeated key, whitespace, another
    key order, an escape the canonical form has not (``\\u0041``), a byte
    order mark, a CR before the newline or a field of the wrong type is
    refused, not read past. So the hash, the SHA-256 of the canonical JSON
    of the record less ``hash``, is that of the line's own bytes less its
    ``hash`` member: what one reader sees is what every reader sees.
    """
    line = _Line(number)

    def refuse(code: str, message: str) -> _Line:
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
        record = _STRICT.decode(raw.decode("ascii"))
    except _Repeated as repeated:
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
    line.hash_ok = _sha256(canonical(record)) == line.hash
    return line


def verify(path: str | Path) -> Verification:
    """Check a decision log: every record's hash, the order of ``seq``, the
    chain of ``prev``, the head, and a torn tail. Reads only. Raises
    :class:`LogError` when the file cannot be read."""
    path = Path(path)
    try:
        handle = open_regular(path)  # a FIFO would block, /dev/zero never end
    except NotRegularFile as exc:
        raise _fail("log.not_regular", f"cannot read the decision log: it is {exc.strerror}", file=path) from None
    except OSError as exc:
        raise _fail("log.open", f"cannot read the decision log: {exc.strerror or exc}", file=path) from None
    lines: list[_Line] = []
    torn: bytes = b""
    with handle:
        number = 0
        # A line at a time, and never more than MAX_LINE_BYTES of one.
        while raw := handle.readline(MAX_LINE_BYTES + 2):
            number += 1
            if not raw.endswith(b"\n"):
                if len(raw) <= MAX_LINE_BYTES:
                    torn = raw
                else:
                    lines.append(_read_line(number, raw))  # too long: refused, and nothing after it is read
                break
            lines.append(_read_line(number, raw[:-1]))
    problems: list[LogProblem] = []
    notes: list[str] = []
    chain_ok = True
    previous = GENESIS
    for index, line in enumerate(lines):
        if line.problem is not None:
            problems.append(line.problem)
            chain_ok = False
            break
        if not line.hash_ok:
            problems.append(LogProblem("log.edited", line.number, line.seq, "the record does not match its hash: it was edited"))
            chain_ok = False
            break
        if line.seq != index:
            later = {other.seq: other.number for other in lines[index + 1:]}
            if index in later:
                message = (f"seq {line.seq} stands where seq {index} belongs, and seq {index} is at line {later[index]}: "
                           "records were reordered")
                problems.append(LogProblem("log.reordered", line.number, line.seq, message))
            elif line.seq > index:  # type: ignore[operator]
                missing = line.seq - index  # type: ignore[operator]
                problems.append(LogProblem("log.deleted", line.number, line.seq, f"seq {index}"
                                           + (f" to {line.seq - 1}" if missing > 1 else "")  # type: ignore[operator]
                                           + f" {'is' if missing == 1 else 'are'} missing before it: "
                                           f"{missing} record(s) deleted"))
            else:
                problems.append(LogProblem("log.reordered", line.number, line.seq, f"seq {line.seq} appears again after "
                                           f"seq {index - 1}: a record was copied or moved"))
            chain_ok = False
            break
        if line.prev != previous:
            problems.append(LogProblem("log.chain", line.number, line.seq, "`prev` is not the hash of the record before it: "
                                       "the record before it was replaced, or this one was inserted"))
            chain_ok = False
            break
        previous = line.hash  # type: ignore[assignment]
    complete = len(lines)
    if torn:
        problems.append(LogProblem("log.torn_tail", complete + 1, None, f"the last {len(torn)} byte(s) are an incomplete "
                                   "record (a write was interrupted); `hma-policy log verify --repair` removes them"))
    head, head_problem = _read_head(path)
    if head_problem:
        problems.append(LogProblem("log.head_invalid", None, None, head_problem))
    elif chain_ok:
        if head is None:
            if complete:
                problems.append(LogProblem("log.head_missing", None, None, f"the head file `{_head_path(path)}` is missing, "
                                           "so records removed from the end cannot be detected"))
        elif head["records"] > complete:
            removed = head["records"] - complete
            problems.append(LogProblem("log.truncated", complete or None, complete - 1 if complete else None,
                                       f"the head records {head['records']} record(s) but the log holds {complete}: "
                                       f"the last {removed} record(s) were removed"))
        elif head["records"] and lines[head["records"] - 1].hash != head["last_hash"]:
            at = lines[head["records"] - 1]
            problems.append(LogProblem("log.head_mismatch", at.number, at.seq, "the record the head ends at has another hash: "
                                       "the log was rewritten"))
        elif complete > head["records"]:
            notes.append(f"{complete - head['records']} record(s) after the head: written after the head was last "
                         "updated (an interrupted writer); the chain holds them")
    last = lines[-1].hash if lines and chain_ok else GENESIS
    return Verification(str(path), complete, tuple(problems), tuple(notes), last or GENESIS, len(torn))


def repair(path: str | Path, *, lock_timeout: float = _LOCK_TIMEOUT) -> Verification:
    """Repair a torn tail, and only that: an interrupted last record is
    completed when it is whole and chains on, else removed; the head is then
    rewritten. Any other problem is left as it is (and reported).

    The repaired log is written whole beside the old one and renamed over
    it (fileio.atomic_write), under the writers' lock: an interruption
    leaves the old log, a writer that waited for the lock appends to the
    new one."""
    path = Path(path)
    found = verify(path)
    if not found.torn_bytes or any(p.code != "log.torn_tail" for p in found.problems):
        return found
    with open_regular(path) as handle:
        status = os.fstat(handle.fileno())
        key = (status.st_dev, status.st_ino)
        if key in _WRITING:
            raise _fail("log.locked", "the decision log is open to write in this process", file=path)
        _lock(handle.fileno(), path, lock_timeout)
        found = verify(path)  # again, under the lock: a writer may have come first
        if not found.torn_bytes or any(p.code != "log.torn_tail" for p in found.problems):
            return found
        size = os.fstat(handle.fileno()).st_size
        keep = size - found.torn_bytes
        handle.seek(keep)
        whole = _read_line(found.records + 1, handle.read(found.torn_bytes))
        if whole.problem is None and whole.hash_ok and whole.seq == found.records and whole.prev == found.last_hash:
            keep, ending = size, b"\n"
            action = f"completed the last record (seq {whole.seq}), which was whole but lacked its newline"
            records, last = found.records + 1, whole.hash
        else:
            ending = b""
            action = f"removed {found.torn_bytes} byte(s) of an incomplete record after line {found.records}"
            records, last = found.records, found.last_hash
        handle.seek(0)
        with atomic_write(path) as out:
            while keep:
                chunk = handle.read(min(keep, 1 << 20))
                if not chunk:  # pragma: no cover - the file shrank under its lock
                    break
                out.write(chunk)
                keep -= len(chunk)
            out.write(ending)
        _write_head(path, records, last or GENESIS)
    result = verify(path)
    return Verification(result.path, result.records, result.problems, result.notes, result.last_hash, result.torn_bytes, action)
