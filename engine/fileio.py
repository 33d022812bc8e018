"""The files hma-policy writes and the files it must not wait on, and the
signals that may interrupt either.

**Writing.** Every file the tool writes (a report, a decision log's head, a
repaired log) is written by :func:`atomic_write`: into a new temporary file
in the target's directory, which is flushed and fsync'd, then renamed over
the target, and the directory fsync'd. A reader, a crash, a full disk or a
signal at any moment finds the old file or the new one, never a part of
either, and a failed or interrupted write leaves no temporary file behind.
(The decision log itself is the one file appended to rather than replaced:
each record is one ``write`` and an fsync, see ``audit/declog.py``.) A
target that is not a regular file (a terminal, ``/dev/null``, a pipe,
``/dev/full``) is written in place: there is nothing there to keep.
``tests/test_fileio.py`` checks that no other write exists in ``engine/``.

**Reading.** :func:`open_regular` opens a file to read only if it is a
regular file: a FIFO or a device would block, or never end. It opens
without blocking and checks the open descriptor, so nothing swapped in
after a check can make the read wait.

**Signals.** The command line turns SIGINT and SIGTERM into
:class:`Interrupted` (:func:`interrupt_on_signals`), an exception, so that
a write in progress is undone and the command exits 128 + the signal's
number (130, 143) with a message. The handler only raises: it takes no
lock and writes nothing, so it cannot deadlock whatever it interrupts.
:func:`deferred_signals` holds such a signal back for the few steps that
must happen whole (a rename; a log record's write).

**Names.** :func:`escape_name` writes a file name that is not UTF-8 as
JSON and terminals can hold it: each byte UTF-8 could not decode as
``\\xHH``.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["atomic_write", "write_tree", "open_regular", "NotRegularFile", "Interrupted", "interrupt_on_signals",
           "deferred_signals", "escape_name", "kind_of"]


# -- signals -------------------------------------------------------------------

class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT or SIGTERM) ended the command. A KeyboardInterrupt,
    so that code written for Ctrl-C unwinds alike. ``unwritten`` lists the
    files whose write it stopped (each left as it was)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.unwritten: list[str] = []

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:  # pragma: no cover - only SIGINT and SIGTERM are handled
            return f"signal {self.signum}"

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


# Signals that arrived while the main thread was in a deferred section, and
# how deep it is in them. Only the main thread runs signal handlers, and
# only it defers (see deferred_signals), so a plain list and integer serve.
_pending: list[int] = []
_depth = [0]


def _raise(signum: int, frame: Any) -> None:
    if _depth[0]:
        _pending.append(signum)
        return
    raise Interrupted(signum)


@contextmanager
def interrupt_on_signals(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """While the block runs, each of ``signums`` raises :class:`Interrupted`
    in the main thread; the previous handlers are put back after it. In
    another thread (signal handlers can only be set in the main thread),
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """A signal handled by :func:`interrupt_on_signals` that arrives during
    the block is raised when the block ends, not inside it. Nests. Outside
    the main thread there is nothing to defer: signals interrupt only the
    main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        if not _depth[0] and _pending:
            signum = _pending[0]
            _pending.clear()
            raise Interrupted(signum)


# -- writing -------------------------------------------------------------------

@contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file object for the new content of ``path``, which replaces
    the old content (if any) only when the block ends without an exception.

    The new file gets the old one's permission bits, or a new file's (0666
    less the umask). A symbolic link to a file keeps being a link: the file
    it names is replaced. On an exception (an OSError such as ENOSPC, a
    signal's :class:`Interrupted`) the temporary file is removed, ``path``
    is as it was, and the exception goes on, an Interrupted naming
    ``path`` in its ``unwritten``.
    """
    target = os.fspath(path)
    try:
        status: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        status = None
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
    if status is not None and not stat.S_ISREG(status.st_mode):
        # A device or a pipe: no content to keep, and no rename possible.
        with open(target, "wb") as stream:
            yield stream
        return
    real = os.path.realpath(target)
    directory = os.path.dirname(real) or "."
    fd, temporary = _create_beside(real, status)
    renamed = False
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        with deferred_signals():  # renamed and made durable, or not renamed
            os.replace(temporary, real)
            renamed = True
            _sync_directory(directory)
    except BaseException as exc:
        if not renamed:
            try:
                os.unlink(temporary)
            except OSError:  # pragma: no cover - removed by someone else
                pass
            if isinstance(exc, Interrupted):
                exc.unwritten.append(target)
        raise


def _create_beside(real: str, status: os.stat_result | None) -> tuple[int, str]:
    """A new file in ``real``'s directory, named after it (hidden, with a
    random part), created exclusively: never an existing file or a link."""
    directory, name = os.path.split(real)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        # The name's first 40 characters: the whole stays under NAME_MAX in any encoding.
        temporary = os.path.join(directory or ".", f".{name[:40]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temporary, flags, 0o666)  # the umask applies, as to any new file
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        break
    if status is not None:
        try:
            os.fchmod(fd, stat.S_IMODE(status.st_mode))
        except OSError:  # pragma: no cover - a file system without permission bits
            pass
    return fd, temporary


def _sync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (where directories can be opened: not on Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - a file system that cannot sync a directory
        pass
    finally:
        os.close(fd)


# -- reading -------------------------------------------------------------------

class NotRegularFile(OSError):
    """The path names a FIFO, a device or a socket, which the tool does not read."""


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"  # pragma: no cover


def open_regular(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened to read bytes, if it is a regular file; else
    :class:`NotRegularFile` (``IsADirectoryError`` for a directory, as
    ``open`` raises). Opened without blocking (a FIFO's open waits for a
    writer otherwise), then checked by its descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"{kind_of(mode)}, not a regular file", os.fspath(path))
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# -- names ---------------------------------------------------------------------

def escape_name(text: str) -> str:
    """``text`` with each byte that UTF-8 could not decode written as
    ``\\xHH``. Python reads such a byte of a file name as a lone surrogate
    (U+DC80 to U+DCFF, its ``surrogateescape`` form), which UTF-8 cannot
    write and JSON can only write as an escape most readers refuse: a file
    ``caf\\xe9.json`` named in Latin-1 is written ``caf\\xe9.json``. Any
    other lone surrogate (a ``\\ud800`` escape in a document) is left as it is."""
    if text.isascii() or not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    return "".join(f"\\x{ord(ch) - 0xDC00:02x}" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


def write_tree(target: str | os.PathLike[str], files: Mapping[str, bytes], *, into_existing: bool = False) -> None:
    """Write ``files`` (relative POSIX path -> bytes) under ``target``.

    ``target`` absent or empty: the whole folder is written beside it and
    renamed into place, so that it appears complete or not at all.
    ``into_existing``: each file is written atomically into the existing
    folder (its other files stay)."""
    root = os.fspath(target)
    if into_existing:
        for name, data in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with atomic_write(path) as stream:
                stream.write(data)
        return
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    # Not mkdtemp, whose folder is private (0700): the copy gets the mode any
    # new folder of the user's gets (their umask).
    staging = os.path.join(parent, f".{os.path.basename(root)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    os.mkdir(staging)
    try:
        for name, data in files.items():
            path = os.path.join(staging, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "xb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
        for folder in sorted({os.path.dirname(os.path.join(staging, n)) for n in files}, key=len, reverse=True):
            _sync_directory(folder)
        with deferred_signals():
            if os.path.isdir(root):  # empty (the caller checked): replaced by the staged folder
                os.rmdir(root)
            os.rename(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _sync_directory(parent)
