"""Checking a whole decision log (:func:`verify`), and repairing a torn
tail, and only that (:func:`repair`). The record format is declog_format.py;
the writer, whose lock a repair takes, is declog.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..fileio import NotRegularFile, atomic_write, open_regular
from .declog import LOCK_TIMEOUT, WRITING, lock
from .declog_format import GENESIS, MAX_LINE_BYTES, Line, LogProblem, fail, head_path, read_head, read_line, write_head

__all__ = ["Verification", "verify", "repair"]


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


def verify(path: str | Path) -> Verification:
    """Check a decision log: every record's hash, the order of ``seq``, the
    chain of ``prev``, the head, and a torn tail. Reads only. Raises
    :class:`LogError` when the file cannot be read."""
    path = Path(path)
    try:
        handle = open_regular(path)  # a FIFO would block, /dev/zero never end
    except NotRegularFile as exc:
        raise fail("log.not_regular", f"cannot read the decision log: it is {exc.strerror}", file=path) from None
    except OSError as exc:
        raise fail("log.open", f"cannot read the decision log: {exc.strerror or exc}", file=path) from None
    lines: list[Line] = []
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
                    lines.append(read_line(number, raw))  # too long: refused, and nothing after it is read
                break
            lines.append(read_line(number, raw[:-1]))
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
    head, head_problem = read_head(path)
    if head_problem:
        problems.append(LogProblem("log.head_invalid", None, None, head_problem))
    elif chain_ok:
        if head is None:
            if complete:
                problems.append(LogProblem("log.head_missing", None, None, f"the head file `{head_path(path)}` is missing, "
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


def repair(path: str | Path, *, lock_timeout: float = LOCK_TIMEOUT) -> Verification:
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
        if key in WRITING:
            raise fail("log.locked", "the decision log is open to write in this process", file=path)
        lock(handle.fileno(), path, lock_timeout)
        found = verify(path)  # again, under the lock: a writer may have come first
        if not found.torn_bytes or any(p.code != "log.torn_tail" for p in found.problems):
            return found
        size = os.fstat(handle.fileno()).st_size
        keep = size - found.torn_bytes
        handle.seek(keep)
        whole = read_line(found.records + 1, handle.read(found.torn_bytes))
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
        write_head(path, records, last or GENESIS)
    result = verify(path)
    return Verification(result.path, result.records, result.problems, result.notes, result.last_hash, result.torn_bytes, action)
