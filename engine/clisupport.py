"""What every command of the command line shares: where notes go, colour,
and loading the policy a reference names.

Results go to standard output, errors and notes to standard error; ``--quiet``
drops the notes (which policy was used, what was written) and the progress
bar, never a result or an error. Colour: ``--color auto`` (the default) uses
it on a terminal unless ``NO_COLOR`` is set to a non-empty value
(no-color.org); ``always`` and ``never`` decide regardless.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple

from .core.errors import HMAPolicyError, InputError, PolicyError
from .policyref import PolicyRef

__all__ = ["Style", "PLAIN", "Console", "InvalidRules", "UsageError", "console", "load", "load_set", "release_of", "label"]

COLOR_CHOICES = ("auto", "always", "never")


class Style(NamedTuple):
    """ANSI styles (all empty: no colour)."""

    bold: str = ""
    reset: str = ""
    levels: tuple[tuple[str, str], ...] = ()
    gutter: str = ""

    @classmethod
    def coloured(cls) -> "Style":
        return cls("\033[1m", "\033[0m", (("error", "\033[1;31m"), ("warning", "\033[1;33m"), ("note", "\033[1;36m")),
                   "\033[1;34m")

    def level(self, level: str) -> str:
        return dict(self.levels).get(level, self.bold)


PLAIN = Style()


def _colour(choice: str, stream: Any) -> Style:
    if choice == "always":
        return Style.coloured()
    if choice == "never" or os.environ.get("NO_COLOR"):
        return PLAIN
    isatty = getattr(stream, "isatty", None)
    try:
        return Style.coloured() if isatty is not None and isatty() and os.environ.get("TERM") != "dumb" else PLAIN
    except (OSError, ValueError):
        return PLAIN


class Console(NamedTuple):
    """A command's streams: its styles, and whether notes are shown."""

    quiet: bool = False
    out: Style = PLAIN  # for what goes to standard output
    err: Style = PLAIN  # for what goes to standard error

    def note(self, text: str) -> None:
        """A note on standard error (not under --quiet)."""
        if not self.quiet and sys.stderr is not None:
            print(f"hma-policy: {text}", file=sys.stderr)


def console(args: Any) -> Console:
    choice = getattr(args, "color", None) or "auto"
    return Console(bool(getattr(args, "quiet", False)), _colour(choice, sys.stdout), _colour(choice, sys.stderr))


class UsageError(Exception):
    """The command cannot run as given (exit status 2), with a one-line reason."""


class InvalidRules(HMAPolicyError):
    """The rules a reference names are invalid (``problems``), with the
    reference, so that their files can be named from the current directory."""

    def __init__(self, problems: Any, ref: PolicyRef):
        super().__init__(problems)
        self.ref = ref


def release_of(ref: PolicyRef, vllm_version: str | None) -> tuple[str | None, str | None]:
    """The release a command fixes, and why: ``--vllm-version``, or the
    release a ``vllm:X`` reference names (giving both, different, is a usage
    error); (None, None) when each deployment's own release decides."""
    from .core.errors import InputError
    from .core.releases import parse_version

    if vllm_version is None:
        return (ref.release, ref.name) if ref.release else (None, None)
    try:
        version = parse_version(vllm_version)
    except InputError as exc:
        raise UsageError(f"--vllm-version: {exc.problems[0].message} ({exc.problems[0].hint})") from None
    if ref.release is not None and ref.release != version:
        raise UsageError(f"--vllm-version {version} and --rules {ref.name} name two releases; name one")
    return version, "--vllm-version"


def load(ref: PolicyRef, vllm_version: str | None = None) -> Any:
    """The Policy ``ref`` names (for the release ``--vllm-version`` or the
    reference fixes; else the default); InvalidRules when its rules are
    invalid, UsageError for a release they do not hold."""
    from .core.policy import load_policy

    return _loaded(ref, vllm_version, lambda release, source: load_policy(
        ref.directory, release=release, release_source=source))


def load_set(ref: PolicyRef, vllm_version: str | None = None) -> Any:
    """The PolicySet ``ref`` names: each deployment decided for its own
    release, unless ``--vllm-version`` or the reference fixes one."""
    from .core.policies import PolicySet

    return _loaded(ref, vllm_version, lambda release, source: PolicySet(ref.directory, release=release, source=source))


def _loaded(ref: PolicyRef, vllm_version: str | None, make: Any) -> Any:
    """``make(release, source)``, its errors as the command line reports them."""
    release, source = release_of(ref, vllm_version)
    return checked(ref, lambda: make(release, source), vllm_version)


def checked(ref: PolicyRef, make: Any, vllm_version: str | None = None) -> Any:
    """``make()``, which loads the rules ``ref`` names, its errors as the
    command line reports them: InvalidRules, or UsageError for a release
    the rules do not hold (``vllm_version``: the one asked for, if any)."""
    try:
        return make()
    except PolicyError as exc:
        raise InvalidRules(exc.problems, ref) from None
    except InputError as exc:
        raise UsageError(_release_usage(exc, vllm_version is not None)) from None


def _release_usage(exc: Any, flag: bool) -> str:
    problem = exc.problems[0]
    return f"{'--vllm-version: ' if flag else ''}{problem.message}" + (f" ({problem.hint})" if problem.hint else "")


def label(ref: PolicyRef, digest: str) -> str:
    """How a note names a policy: ``NAME (sha256:0123456789ab)``."""
    return f"{ref.name} ({digest[:19]})"
