"""The rules a service with several workers serves: copies of the rules
directory, the newest that loaded published as ``current``.

uvicorn replaces a worker that dies, and the new worker loads its policy as
it starts. Were it to read the rules directory, rules edited since the last
reload (and perhaps not loading) would be what it serves, or it would fail
to start, and uvicorn then stops the service. So a worker loads rules only
from a copy: at start-up the one published last; on SIGHUP a new copy of the
directory, published once it has loaded. A copy, not the directory, is what
the policy is read from, so a policy is never made of files from before and
after an edit. The file ``current`` names the copy published last; it is
replaced atomically, so a worker reads one name or the other.

Copies live in a directory of the service's own, removed when it stops;
one is never removed while the service runs, since a worker may still load
another release's rules from it. A reload whose rules are the ones in force
keeps no copy (state.py), so copies grow with the edits, not the reloads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..core.errors import PolicyError, Problem
from ..fileio import atomic_write

__all__ = ["Snapshots", "MAX_SNAPSHOT_BYTES", "MAX_SNAPSHOT_DEPTH"]

# A rules directory holds YAML and the release data the bundle records (a few
# megabytes, two levels of folders): a directory far larger or deeper is not
# copied on every reload (and a copy is removed with shutil.rmtree, which
# recurses).
MAX_SNAPSHOT_BYTES = 256 << 20
MAX_SNAPSHOT_DEPTH = 32
CURRENT = "current"


class Snapshots:
    """Copies of a rules directory under ``folder`` (made if missing)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def current(self) -> Path | None:
        """The copy published last (its own path: later publications do not move it), or None."""
        try:
            name = (self.folder / CURRENT).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        copy = self.folder / name
        return copy if name.startswith("rules-") and "/" not in name and copy.is_dir() else None

    def copy(self, rules_dir: str | Path) -> Path:
        """A new copy of ``rules_dir``, as the loader reads it: its
        directories and regular files, not hidden ones; a symbolic link to a
        file inside the directory as that file, any other link as the link
        itself. PolicyError (``rules.read``) when it cannot be copied."""
        source = Path(os.path.realpath(rules_dir))
        target = Path(tempfile.mkdtemp(prefix="rules-", dir=self.folder))
        try:
            _copy_tree(source, target)
        except OSError as exc:
            self.discard(target)
            raise PolicyError([Problem("rules.read", f"the rules cannot be copied to be served: {exc}",
                                       file=str(rules_dir))]) from None
        except PolicyError:
            self.discard(target)
            raise
        return target

    def publish(self, copy: Path) -> None:
        """Make ``copy`` the one a worker starting from now on loads: its
        name, written atomically to the file ``current``."""
        with atomic_write(self.folder / CURRENT) as out:
            out.write(copy.name.encode("utf-8"))

    def discard(self, copy: Path) -> None:
        """Remove a copy that was never published."""
        shutil.rmtree(copy, ignore_errors=True)


def _copy_tree(root: Path, target: Path) -> None:
    """Copy ``root`` into the empty directory ``target`` (see :meth:`Snapshots.copy`),
    a directory at a time."""
    size = 0
    pending = [(root, target, 0)]
    while pending:
        folder, into, depth = pending.pop()
        if depth > MAX_SNAPSHOT_DEPTH:
            raise PolicyError([Problem("rules.read", f"the rules directory nests folders more than {MAX_SNAPSHOT_DEPTH} "
                                       "deep; a service with several workers copies it on every reload", file=str(root),
                                       hint="keep only rule files and release data in it")])
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if entry.is_symlink():
                resolved = Path(os.path.realpath(path))
                if os.path.commonpath([root, resolved]) != str(root) or not resolved.is_file():
                    # A link out of the directory (which the loader refuses, as it refuses the original), or
                    # to a directory (not followed, so that a link to an ancestor cannot loop): the link itself.
                    os.symlink(os.readlink(path), into / entry.name)
                    continue
                path = resolved
            if path.is_dir():
                (into / entry.name).mkdir()
                pending.append((path, into / entry.name, depth + 1))
            elif path.is_file():
                size += path.stat().st_size
                if size > MAX_SNAPSHOT_BYTES:
                    raise PolicyError([Problem("rules.read", f"the rules directory holds more than "
                                               f"{MAX_SNAPSHOT_BYTES >> 20} MiB of files; a service with several "
                                               "workers copies it on every reload", file=str(root),
                                               hint="keep only rule files and release data in it")])
                shutil.copyfile(path, into / entry.name)
