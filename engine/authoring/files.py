"""Writing files so that a crash or a full disk never leaves half of one.

:func:`write_file` writes a temporary file in the target's folder, flushes
and fsyncs it, and renames it over the target (a rename within one file
system is atomic), then fsyncs the folder. :func:`write_tree` writes a new
folder whole: its files go into a temporary sibling folder, renamed into
place at the end, so that the folder appears complete or not at all.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

__all__ = ["write_file", "write_tree"]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform whose folders cannot be opened (Windows): nothing to sync
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (its folder must exist)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def write_tree(target: str | os.PathLike[str], files: Mapping[str, bytes], *, into_existing: bool = False) -> None:
    """Write ``files`` (relative POSIX path -> bytes) under ``target``.

    ``target`` absent or empty: the whole folder is written beside it and
    renamed into place. ``into_existing``: each file is written atomically
    into the existing folder (its other files stay)."""
    target = Path(target)
    if into_existing:
        for name, data in files.items():
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, data)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    # Not mkdtemp, whose folder is private (0700): the copy gets the mode
    # any new folder of the user's gets (their umask).
    staging = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    try:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_new(path, data)
        for folder in sorted({(staging / name).parent for name in files}, key=lambda p: len(p.parts), reverse=True):
            _fsync_dir(folder)
        if target.is_dir():  # empty (the caller checked): replaced by the staged folder
            target.rmdir()
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(target.parent)
