"""Reading a file safely: regular files only, within a size limit, as UTF-8;
and a TOML text's table (a tool's config, a lock file).

Nothing here blocks: a FIFO or a device (which would block or never end) is
refused by the descriptor it was opened as, not by a check of the path that
something could swap after the check.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the standard library's TOML reader, as a package before Python 3.11
    import tomli as tomllib

from ...core.errors import Problem

__all__ = ["regular", "read_bytes", "read_text", "decode", "toml_table", "NOT_REGULAR"]


def regular(path: str | Path) -> bool:
    """Whether ``path`` is a regular file (True when it cannot be asked: the read then says why)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # let the read report why it cannot be read


# O_NONBLOCK: opening a FIFO that replaced a file after it was listed
# returns at once (its reader is then refused below) instead of waiting for a writer.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
# What read_bytes answers for a file that is not a regular file (a FIFO or a
# device would block or never end).
NOT_REGULAR = Problem("source.not_regular", "not a regular file")


class _NotRegular(Exception):
    pass


def _read_fd(fd: int, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of a regular file (one more than the
    limit, so that the caller can tell an oversized file): the file's size at
    once, then until the end. With the descriptor, not a file object: an
    audit reads thousands of small files, and the buffered object costs more
    than the read. The descriptor, not the path, is checked to be a regular
    file, so nothing swapped in after a check can make the read block."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise _NotRegular
    size = status.st_size
    want = min(size, max_bytes) + 1 if size > 0 else 1 << 16
    chunk = os.read(fd, want)
    if 0 < len(chunk) == size < want:
        # The whole file, at the size it was found to have: one read call a
        # file, not a second one that would only find its end.
        return chunk
    chunks, total = [chunk], len(chunk)
    while chunk and total <= max_bytes:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 2 and not chunks[1] else b"".join(chunks)


def read_bytes(path: str | Path, display: str, max_bytes: int, *, head: bool = False
               ) -> tuple[bytes | None, Problem | None]:
    """The bytes of a regular file, or why not (:data:`NOT_REGULAR`, a read
    error, the size limit). ``head``: its first ``max_bytes`` bytes, whatever
    its size (a shebang)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            raw = _read_fd(fd, max_bytes)
        finally:
            os.close(fd)
    except _NotRegular:
        return None, NOT_REGULAR
    except OSError as exc:
        return None, Problem("input.read", f"cannot read `{display}`: {exc.strerror or exc}", file=display)
    if len(raw) > max_bytes:
        if head:
            return raw[:max_bytes], None
        return None, Problem("input.limit", f"`{display}` is larger than {max_bytes} bytes", file=display)
    return raw, None


def decode(raw: bytes, display: str) -> tuple[str | None, Problem | None]:
    """UTF-8 text with an optional byte-order mark, or UTF-16 or UTF-32 text
    (:func:`_wide_encoding`), its CRLF line ends read as LF; a binary file (a
    NUL in the first 8 KiB of a file in none of them) is refused."""
    wide = _wide_encoding(raw)
    if wide is not None:
        try:
            text = raw.decode(wide).removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            return None, Problem("input.encoding", f"`{display}` is not {wide.upper()} text (byte {exc.start})",
                                 file=display)
        if "\x00" in text:
            return None, Problem("source.binary", f"`{display}` is a binary file, not text", file=display)
    elif b"\x00" in raw[:8192]:
        return None, Problem("source.binary", f"`{display}` is a binary file, not text", file=display)
    else:
        try:
            # utf-8-sig, with the byte-order mark taken off here: that codec is
            # written in Python, the plain one is not (error offsets are the same).
            text = (raw[3:] if raw[:3] == b"\xef\xbb\xbf" else raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, Problem("input.encoding", f"`{display}` is not UTF-8 text (byte {exc.start})", file=display)
    # A file saved on Windows: YAML, JSON and Docker read CRLF as a line end,
    # and the readers split lines at LF (a manifest stream's `---\r` started no
    # document). Lines keep their numbers.
    return (text.replace("\r\n", "\n") if "\r" in text else text), None


def _wide_encoding(raw: bytes) -> str | None:
    """UTF-32 or UTF-16, told from UTF-8 as YAML 1.2 (5.2) and JSON (RFC 4627,
    3) tell them: by a byte-order mark, else by where the NULs of the first
    two characters fall (ASCII in all these formats); None for UTF-8. Windows
    PowerShell's `>` writes UTF-16 with a mark, which kubectl reads
    (cli-runtime's FileVisitor decodes with unicode.BOMOverride)."""
    if raw[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        return "utf-32"
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    head = raw[:4]
    if len(head) < 4 or b"\x00" not in head:
        return None
    nulls = "".join("0" if byte == 0 else "x" for byte in head)  # (the YAML spec's table, 5.2)
    return {"000x": "utf-32-be", "x000": "utf-32-le", "0x0x": "utf-16-be", "x0x0": "utf-16-le"}.get(nulls)


def read_text(path: str | Path, display: str, max_bytes: int) -> tuple[str | None, Problem | None]:
    """The UTF-8 text of a regular file, or why not: :func:`read_bytes`'s
    problems (:data:`NOT_REGULAR` among them), then :func:`decode`'s."""
    raw, problem = read_bytes(path, display, max_bytes)
    return decode(raw, display) if raw is not None else (None, problem)


def toml_table(text: str) -> dict[str, Any] | None:
    """The top-level table of a TOML text (a tool's config, a lock file);
    None for one that is no TOML or nests deeper than the reader recurses."""
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError):
        return None
