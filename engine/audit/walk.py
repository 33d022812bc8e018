"""Walking the audited paths: every file under them, in one fixed order
(arguments in order, each directory depth-first with its entries sorted by
name), whatever the file system.

Directories are walked without following symbolic links to directories;
hidden directories (``.git``, ``.venv``, ...), ``__pycache__`` and
``node_modules`` are not entered. A hidden directory other than a version
control system's is listed as skipped (``.buildkite`` and ``.github`` hold
launch scripts), so that the report says what it did not read; naming it
on the command line audits it. A file met through two of the paths is
examined once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path

from ..core.errors import Problem
from .model import AuditError, FileResult

__all__ = ["walk", "roots", "inside", "HIDDEN", "LINK", "LINKED_DIRECTORY"]

_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})
# Version control systems' own folders: never a deployment's, not worth a line of the report.
_VCS_DIRS = frozenset({".git", ".hg", ".svn", ".jj"})
HIDDEN = "a hidden directory (not entered; give its path to audit it)"
# Why a symbolic link is skipped starts with LINK (run.py names a link to nothing).
LINK = "a symbolic link to "
LINKED_DIRECTORY = LINK + "a directory (not followed)"


def inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path`` is one of ``roots`` or under one."""
    return any(path == root or root in path.parents for root in roots)


def walk(paths: Sequence[str]) -> tuple[list[tuple[str, str, bool]], list[FileResult]]:
    """The files under ``paths`` in audit order, each as (display path, path,
    plain: the listing shows a regular file, not a symbolic link), and the
    entries skipped on the way (symbolic links to directories).

    Raises :class:`AuditError` when a path does not exist.
    """
    files: list[tuple[str, str, bool]] = []
    skipped: list[FileResult] = []
    seen: set[str] = set()
    # A file can be met twice only through two paths (`audit deploy deploy/a.yaml`).
    dedupe = len(paths) > 1
    for raw in paths:
        top = Path(raw)
        if not top.exists() and not top.is_symlink():
            raise AuditError([Problem("audit.path", "no such file or directory", file=raw)])
        if not top.is_dir():
            key = os.path.normpath(os.path.abspath(top))
            if key not in seen:
                seen.add(key)
                files.append((_posix(top), str(top), False))
            continue
        found: list[tuple[str, str, bool]] = []
        keys: dict[str, str] = {}  # path -> the key normpath(abspath()) gives, when deduplicating
        # Top-down and depth-first, subdirectories sorted by name (the order
        # of os.walk), from one listing per directory that also gives each
        # entry's type.
        stack = [os.fspath(top)]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError:
                continue  # as os.walk: a directory that cannot be listed is passed over
            subdirectories: list[os.DirEntry[str]] = []
            names: list[os.DirEntry[str]] = []
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                (subdirectories if is_dir else names).append(entry)
            base = Path(directory)
            kept = []
            for entry in sorted(subdirectories, key=lambda e: e.name):
                if entry.is_symlink():
                    skipped.append(FileResult(_posix(base / entry.name), None, 0, skipped=LINKED_DIRECTORY))
                elif entry.name.startswith("."):
                    if entry.name not in _VCS_DIRS:
                        skipped.append(FileResult(_posix(base / entry.name), None, 0, skipped=HIDDEN))
                elif entry.name not in _SKIP_DIRS:
                    kept.append(os.path.join(directory, entry.name))
            stack.extend(reversed(kept))
            # Built once per directory: the display path as
            # Path(directory, name).as_posix() spells it, and the key
            # normpath(abspath()) gives (a file name holds no separator).
            prefix = base.as_posix()
            prefix = "" if prefix == "." else prefix.rstrip("/") + "/"
            absolute = os.path.normpath(os.path.abspath(directory))
            absolute = absolute if absolute.endswith(os.sep) else absolute + os.sep
            for entry in names:
                try:
                    plain = entry.is_file(follow_symlinks=False)
                except OSError:
                    plain = False
                found.append((prefix + entry.name, entry.path, plain))
                if dedupe:
                    keys[entry.path] = absolute + entry.name
        found.sort(key=itemgetter(0))  # one order for every file system: by display path
        if not dedupe:
            files += found
            continue
        for item in found:
            key = keys[item[1]]
            if key not in seen:
                seen.add(key)
                files.append(item)
    # A hidden directory that is itself one of the paths is audited (`audit proj proj/.ci`), not passed over.
    given = {os.path.normpath(os.path.abspath(raw)) for raw in paths} if dedupe else set()
    return files, [result for result in skipped if result.skipped != HIDDEN
                   or os.path.normpath(os.path.abspath(result.file)) not in given]


def _posix(path: Path) -> str:
    return path.as_posix()


def roots(paths: Sequence[str], extra: Sequence[str]) -> tuple[Path, ...]:
    """Where links and ``--config`` files may lead: the audited paths (a
    file's directory) and the ``extra`` directories, resolved."""
    roots = []
    for raw in list(paths) + list(extra):
        path = Path(raw).resolve()
        roots.append(path if path.is_dir() else path.parent)
    return tuple(dict.fromkeys(roots))
