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

Each record is flushed and fsync'd before :meth:`DecisionLog.append`
returns. A writer holds an exclusive lock (``flock``) on the log while open;
a second writer of the same file in the same process (a thread, a signal
handler) is refused at once rather than left waiting on its own process's
lock, and an append re-entered from a signal handler is refused rather than
interleaved. Clocks and ids are injectable (``clock``, ``new_id``) for tests.

The modules: this one writes (:class:`DecisionLog`); the record format
(canonical JSON, hashes, masking, the head file, strict reading) is in
declog_format.py, :func:`~hma_policy.audit.declog_verify.verify` and
:func:`~hma_policy.audit.declog_verify.repair` in declog_verify.py.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..fileio import deferred_signals, escape_name
from .declog_format import (DEFAULT_MASKING, FORMAT_VERSION, GENESIS, MAX_LINE_BYTES, NO_MASKING, LogError, Masking,
                            canonical, fail, head_path, input_digest, mask, read_head, read_line, sha256, write_head)

try:  # POSIX file locks; without them (Windows) a log has one writer by convention
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms CI runs
    fcntl = None  # type: ignore[assignment]

# DecisionLog's parameters and errors, handed on with it.
__all__ = ["DecisionLog", "Masking", "DEFAULT_MASKING", "NO_MASKING", "LogError", "lock", "WRITING", "LOCK_TIMEOUT"]

LOCK_TIMEOUT = 10.0


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


def lock(fd: int, path: Path, timeout: float) -> None:
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
                raise fail("log.locked", "the decision log is locked by another writer", file=path) from None
            time.sleep(0.05)


# The registry of the logs this process has open to write, by file identity
# (device, inode): a second writer in the same process (a signal handler, a
# thread) is refused at once, where flock, which counts open files, not
# processes, would make it wait on the first one for the lock timeout.
# `dict.setdefault` is atomic: no lock, so nothing a signal could deadlock on.
WRITING: dict[tuple[int, int], int] = {}


class DecisionLog:
    """An open decision log, appended to by :meth:`append`.

    Opening checks the end of the log: a torn tail, or a log shorter than
    its head, is refused (``hma-policy log verify FILE`` says what is wrong).
    Use as a context manager, or call :meth:`close`, which writes the head.
    """

    def __init__(self, path: str | Path, *, masking: Masking = DEFAULT_MASKING,
                 clock: Callable[[], datetime] | None = None, new_id: Callable[[], str] | None = None,
                 max_document_bytes: int = 65536, tool_version: str | None = None, lock_timeout: float = LOCK_TIMEOUT):
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
                raise fail("log.open", f"cannot open the decision log: {exc.strerror or exc}", file=self.path) from None
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                os.close(fd)
                raise fail("log.not_regular", "the decision log is not a regular file", file=self.path)
            os.set_blocking(fd, True)
            key = (status.st_dev, status.st_ino)
            if WRITING.setdefault(key, id(self)) != id(self):
                os.close(fd)
                raise fail("log.locked", "the decision log is already open to write in this process", file=self.path)
            try:
                lock(fd, self.path, self.lock_timeout)
                now = os.stat(self.path)
            except BaseException:
                WRITING.pop(key, None)
                os.close(fd)
                raise
            if (now.st_dev, now.st_ino) == key:
                return fd, key
            WRITING.pop(key, None)
            os.close(fd)

    def _release(self) -> None:
        os.close(self._fd)
        self._fd = -1
        WRITING.pop(self._key, None)

    def _tail(self) -> tuple[int, str]:
        """The next seq and the last hash, from the end of the file."""
        size = os.fstat(self._fd).st_size
        head, problem = read_head(self.path)
        hint = f"run `hma-policy log verify {self.path}`"
        if problem:
            raise fail("log.head_invalid", problem, hint, file=self.path)
        if size == 0:
            if head is not None and head["records"] > 0:
                raise fail("log.truncated", f"the decision log is empty but its head records {head['records']} record(s)",
                            hint, file=self.path)
            return 0, GENESIS
        os.lseek(self._fd, size - 1, os.SEEK_SET)
        if os.read(self._fd, 1) != b"\n":
            raise fail("log.torn_tail", "the decision log ends in an incomplete record (an interrupted write)",
                        f"run `hma-policy log verify {self.path} --repair`", file=self.path)
        raw = _last_line(self._fd, size)
        if raw is None:
            raise fail("log.limit", f"the last record of the decision log is longer than {MAX_LINE_BYTES} bytes", hint,
                        file=self.path)
        last = read_line(0, raw)
        if last.problem is not None:
            where = f"the last record of the decision log (the line at byte {size - 1 - len(raw)})"
            raise fail(last.problem.code, f"{where}: {last.problem.message}", hint, file=self.path)
        seq, last_hash = last.seq, last.hash
        assert seq is not None and last_hash is not None  # a record without a problem has both
        if head is not None and head["records"] > seq + 1:
            raise fail("log.truncated", f"the decision log ends at seq {seq} but its head records {head['records']} record(s)",
                        hint, file=self.path)
        return seq + 1, last_hash

    def _guard(self) -> None:
        """Refuse a call made while this thread is inside append() or close()
        already: a signal handler's, which would otherwise write a record in
        the middle of another's (two records with one seq)."""
        if self._busy:
            raise fail("log.locked", "the decision log was written to while a record was being written "
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
            raise fail("log.closed", "the decision log is closed", file=self.path)
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
        record["hash"] = sha256(canonical(record))
        line = canonical(record) + b"\n"
        if len(line) > MAX_LINE_BYTES:  # log verify would refuse it
            raise fail("log.write", f"the record is longer than {MAX_LINE_BYTES} bytes; lower max_document_bytes",
                        file=self.path)
        # Written whole: a SIGINT or SIGTERM of the command waits for the
        # write and its fsync, so that it never leaves a torn record.
        with deferred_signals():
            try:
                _write_all(self._fd, line)
                os.fsync(self._fd)
            except OSError as exc:
                raise fail("log.write", f"cannot write the decision log: {exc.strerror or exc}", file=self.path) from None
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
                if self._appended or not head_path(self.path).exists():
                    write_head(self.path, self._seq, self._last)
            except OSError as exc:
                raise fail("log.write", f"cannot write the head file: {exc.strerror or exc}", file=self.path) from None
            finally:
                self._busy = False
                self._release()

    def __enter__(self) -> "DecisionLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
