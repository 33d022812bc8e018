"""Naming a policy: the one parser of the policy references every command takes.

A reference is what follows ``--rules`` (and diff's ``--base``/``--head``):

- ``bundled`` (or nothing): the rules shipped with the engine, for the
  release each deployment names (else the newest);
- ``vllm:X.Y.Z``: the bundled rules of vLLM X.Y.Z, for every deployment;
- ``SCHEME:REST`` for a scheme in :data:`SCHEMES`: ``git:REV[:PATH]``, the
  rules directory (``rules`` unless PATH says otherwise) at a git revision of
  the repository in the current directory;
- anything else: a rules directory (write ``./bundled`` for a directory of
  that name).

A scheme turns its reference into a directory under a temporary folder that
:func:`resolve`'s caller owns (the command's), and a new one is one line in
:data:`SCHEMES`. A reference to something that is not there (a directory
that does not exist, or a file) is a usage error (:class:`PolicyRefError`),
which every command reports with exit status 2; a directory whose rules are
invalid is not, and each command reports that its own way.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from .core.errors import PolicyError, Problem

__all__ = ["BUNDLED", "RELEASE_SCHEME", "SCHEMES", "PolicyRef", "PolicyRefError", "resolve", "opened", "rules_from_git"]

BUNDLED = "bundled"
RELEASE_SCHEME = "vllm"


def rules_from_git(spec: str, workdir: Path) -> Path:
    """Extract the rules directory at ``git:REV[:PATH]`` into a temporary folder.

    REV and PATH are the user's: each is passed to git after
    ``--end-of-options`` or ``--``, so that `git:--output=FILE` names a
    revision (which does not exist), never an option of git's.
    """
    import tarfile  # (here: most commands never read a git: reference, and tarfile takes 9 ms to import)

    _, _, rest = spec.partition("git:")
    rev, _, sub = rest.partition(":")
    sub = sub or "rules"
    if not rev:
        raise PolicyError([Problem("rules.git", f"`{spec}` names no revision; use git:REV or git:REV:PATH")])
    if Path(sub).is_absolute() or ".." in Path(sub).parts:
        raise PolicyError([Problem("rules.git", f"`{sub}` is not a path inside the repository")])
    found = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"])
    commit = found.decode("ascii", "replace").strip()
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        raise PolicyError([Problem("rules.git", f"cannot read `{sub}` at `{rev}`: no such commit in the repository here")])
    archive = _git(["archive", "--format=tar", "--end-of-options", commit, sub], f"cannot read `{sub}` at `{rev}`")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and not Path(m.name).is_absolute() and ".." not in Path(m.name).parts]
        tar.extractall(workdir, members=members)
    return workdir / sub


def _git(arguments: list[str], failure: str | None = None) -> bytes:
    """What ``git ARGUMENTS`` writes; a ``rules.git`` problem when it cannot
    run or fails (``failure``, then git's last line; or, without it, the
    empty output, for a caller to judge)."""
    try:
        result = subprocess.run(["git", *arguments], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PolicyError([Problem("rules.git", f"cannot run git: {exc}")]) from None
    if result.returncode != 0:
        if failure is None:
            return b""
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PolicyError([Problem("rules.git", f"{failure}: {message[-1] if message else 'git failed'}")])
    return result.stdout


# scheme -> fn(the whole reference, an empty folder it may fill) -> the rules directory
SCHEMES: dict[str, Callable[[str, Path], Path]] = {
    "git": rules_from_git,
}


class PolicyRefError(PolicyError):
    """The reference names no policy (a usage error, exit status 2)."""


class PolicyRef(NamedTuple):
    """A resolved reference: ``name`` as the user wrote it, the rules
    directory to load (None: the bundled rules), and the release it fixes
    (``vllm:X.Y.Z``; None: each deployment's own)."""

    name: str
    directory: Path | None
    release: str | None = None

    @property
    def bundled(self) -> bool:
        return self.directory is None


def _scheme(spec: str | None) -> str | None:
    scheme, colon, _ = (spec or "").partition(":")
    return scheme if colon and scheme in SCHEMES else None


def resolve(spec: str | None, workdir: Path | None = None) -> PolicyRef:
    """The policy ``spec`` names. ``workdir``: an empty folder the caller owns
    (and removes), into which a scheme may write the rules it fetches; a
    scheme reference without one is a usage error."""
    if spec is None or spec == BUNDLED:
        return PolicyRef(BUNDLED, None)
    if spec.startswith(RELEASE_SCHEME + ":"):
        return PolicyRef(spec, None, _release(spec[len(RELEASE_SCHEME) + 1:], spec))
    scheme = _scheme(spec)
    if scheme is not None:
        if workdir is None:
            raise PolicyRefError([Problem("rules.read", f"`{spec}` cannot be read here: use a directory", file=spec)])
        return PolicyRef(spec, SCHEMES[scheme](spec, workdir))
    path = Path(spec)
    if not path.is_dir():
        message = f"`{spec}` is not a directory" if path.exists() else f"`{spec}` does not exist"
        raise PolicyRefError([Problem("rules.read", message, file=spec,
                                      hint="name a rules directory, git:REV[:PATH], vllm:X.Y.Z, or bundled")])
    return PolicyRef(spec, path)


def _release(version: str, spec: str) -> str:
    """The bundled release ``vllm:VERSION`` names; a usage error for one
    that is not a release or not bundled, listing the bundled ones."""
    from .core.errors import InputError
    from .core.releases import bundled

    try:
        return bundled().get(version).version
    except InputError as exc:
        raise PolicyRefError([Problem(p.code, p.message, hint=p.hint, file=spec) for p in exc.problems]) from None


@contextlib.contextmanager
def opened(spec: str | None) -> Iterator[PolicyRef]:
    """:func:`resolve` with a temporary folder for a scheme to fill, removed
    when the block ends (made only for a scheme reference)."""
    if _scheme(spec) is None:
        yield resolve(spec)
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hma-policy-rules-") as tmp:
        yield resolve(spec, Path(tmp))
