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
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from .core.errors import PolicyError, Problem

__all__ = ["BUNDLED", "RELEASE_SCHEME", "SCHEMES", "PolicyRef", "PolicyRefError", "resolve", "opened"]

BUNDLED = "bundled"
RELEASE_SCHEME = "vllm"


def _from_git(spec: str, workdir: Path) -> Path:
    from .authoring.impact import rules_from_git  # git is run only for a git: reference

    return rules_from_git(spec, workdir)


# scheme -> fn(the whole reference, an empty folder it may fill) -> the rules directory
SCHEMES: dict[str, Callable[[str, Path], Path]] = {
    "git": _from_git,
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
