"""The options a vLLM release's ``vllm serve`` accepts, from recorded data.

Each release's list (``rules/options/<release>.json``, named in
``rules/releases.yaml``; written by ``hma-policy registry from-wheel
--options``) was read statically from the release's wheel:
every option string, its aliases, whether it has a ``--no-`` form, and its
argparse type. A deployment document and an ``argparse.Namespace`` name
options by their argparse ``dest`` (``--tensor-parallel-size`` is
``tensor_parallel_size``), which :class:`ReleaseOptions` indexes them by.

:func:`known_options` is the one reader of the data: where the lists live
is the bundled releases index (:mod:`.releases`), and nothing else opens them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from . import releases
from .errors import InputError, Problem, suggest

__all__ = ["Option", "ReleaseOptions", "DEFAULT_RELEASE", "known_options", "known_releases", "list_options",
           "expanded", "option_strings", "Refusal", "refusal", "field_refusal", "refused_everywhere", "refused_options",
           "rejection"]

# The release whose list is read until a deployment's release chooses one.
DEFAULT_RELEASE = "0.33.0"


class Option(NamedTuple):
    """One option: its argparse ``dest``, its option string, its type
    (``bool``, ``int``, ``float``, ``str``, ``json``, ``list``, or None
    when the wheel does not say statically), whether ``--no-`` negates it,
    and its inverse spellings, which also negate it (0.33.0's
    ``--enable-x`` for ``--disable-x``, and the reverse)."""

    dest: str
    flag: str
    type: str | None
    no_form: bool
    inverses: tuple[str, ...] = ()


class ReleaseOptions(NamedTuple):
    """A release's options, by dest; ``aliases`` maps the dest-like name of
    each long alias (``device_memory_utilization``) to its option's dest
    (``gpu_memory_utilization``)."""

    release: str
    by_dest: Mapping[str, Option]
    aliases: Mapping[str, str] = MappingProxyType({})

    def dest(self, name: str) -> str | None:
        """The dest of the option ``name`` (a dest or a long alias's, snake_case), or None."""
        return name if name in self.by_dest else self.aliases.get(name)

    def kebab(self, dest: str) -> str:
        """The option as the command line spells it, without its dashes (``tensor-parallel-size``)."""
        return self.by_dest[dest].flag[2:]


def known_releases() -> tuple[str, ...]:
    """The releases whose option list is bundled, oldest first."""
    return tuple(version for version, release in releases.bundled().releases.items() if release.options)


def known_options(release: str | None = None, *, path: str | Path | None = None) -> ReleaseOptions:
    """The options of ``release`` (default: :data:`DEFAULT_RELEASE`), or
    those of the list in the file ``path`` (the same format). Each list is
    read once.

    :class:`InputError`: ``release.unknown`` when no list of that release
    is bundled, ``release.options`` when a list cannot be read.
    """
    if path is not None:
        return _file_options(str(path))
    return _release_options(DEFAULT_RELEASE if release is None else release)


@functools.lru_cache(maxsize=1)
def list_options() -> tuple[frozenset[str], frozenset[str]]:
    """(the option strings that take one or more words, every option string)
    of the default release's list, long aliases included: how a command
    line's words are read before its release is known. A list option of an
    older release only (``--cuda-graph-sizes``) is not listed, so its words
    are read with care (vllm_args.read_options)."""
    newest = known_options()
    spelled = {option.flag: option for option in newest.by_dest.values()}
    spelled.update({"--" + alias.replace("_", "-"): newest.by_dest[dest] for alias, dest in newest.aliases.items()})
    return frozenset(flag for flag, option in spelled.items() if option.type == "list"), frozenset(spelled)


@functools.lru_cache(maxsize=None)
def flag_options() -> frozenset[str]:
    """The option strings of the default release's list that take no word
    (its booleans: each one's ``--no-`` form and inverse spellings too)."""
    strings: set[str] = set()
    for option in known_options().by_dest.values():
        if option.type == "bool":
            strings.add(option.flag)
            strings.update(option.inverses)
            if option.no_form:
                strings.add("--no-" + option.flag[2:])
    return frozenset(strings)


def expanded(option: str, accepted: frozenset[str]) -> list[str]:
    """The option strings of ``accepted`` that argparse reads ``option``
    (``--name``, without a value) as: itself, else every option it is a
    prefix of (argparse expands a unique prefix and refuses an ambiguous one);
    none for an option it rejects."""
    if option in accepted:
        return [option]
    return sorted(o for o in accepted if o.startswith(option))


@functools.lru_cache(maxsize=None)
def option_strings(release: str) -> frozenset[str]:
    """Every long option string vLLM ``release``'s ``vllm serve`` accepts:
    each option's, its ``--no-`` form, its inverse spellings, its long
    aliases, and argparse's own ``--help``. :class:`InputError` as for
    :func:`known_options`."""
    options = known_options(release)
    strings = {"--help"}
    for option in options.by_dest.values():
        strings.add(option.flag)
        strings.update(option.inverses)
        if option.no_form:
            strings.add("--no-" + option.flag[2:])
    strings.update("--" + alias.replace("_", "-") for alias in options.aliases)
    return frozenset(strings)


class Refusal(NamedTuple):
    """vLLM's argparse refusing an option: ``source.unknown_option`` or
    ``source.ambiguous_option``, the message, and a hint (or None)."""

    code: str
    message: str
    hint: str | None


def refusal(release: str, option: str) -> Refusal | None:
    """Why vLLM ``release`` refuses the long option ``option``, as its
    command line gives it once vLLM has read `_` as `-` (``--name``, no
    value); for an unknown one the hint names the bundled releases that
    accept it, else a near spelling. None when it accepts it, or when no
    option list of ``release`` is bundled."""
    if release not in known_releases():
        return None
    accepted = option_strings(release)
    matches = expanded(option, accepted)
    if len(matches) == 1:
        return None
    refused = rejection(release, option, matches, accepted)
    others = [version for version in known_releases() if not matches and option in option_strings(version)]
    return refused._replace(hint=f"an option of vLLM {_span(others)} (of the bundled releases)") if others else refused


def field_refusal(release: str, field: str) -> Refusal | None:
    """Why vLLM ``release``'s engine refuses the keyword ``field`` of a
    Python call (``LLM(..., field=...)``, ``EngineArgs(...)``): its
    EngineArgs has no such field, and the call raises a TypeError. The
    fields a call's keywords are checked for (those the decision reads, and
    ``device``) are fields of a release where its command line has an option
    of that dest, however it spells it (read in the 0.10.0 and 0.33.0
    wheels: ``device`` is neither, ``disable_hybrid_kv_cache_manager`` both,
    whose False the 0.10.0 parser has no spelling for). None when it has the
    field, or when no option list of ``release`` is bundled."""
    if release not in known_releases() or known_options(release).dest(field) is not None:
        return None
    others = [version for version in known_releases() if known_options(version).dest(field) is not None]
    return Refusal("source.unknown_option", f"vLLM {release}'s engine arguments have no field `{field}`",
                   f"a field of vLLM {_span(others)} (of the bundled releases)" if others else None)


def refused_everywhere(option: str) -> Refusal | None:
    """Why every bundled release refuses ``option`` (as :func:`refusal`
    takes it), for a launch whose release nothing names: whichever runs
    it, vLLM exits. None when some release accepts it."""
    if option in _every_option_string():  # most are: no release's prefixes need expanding
        return None
    refusals = [refusal(release, option) for release in known_releases()]
    if any(refused is None for refused in refusals):
        return None
    newest = refusals[-1]
    assert newest is not None
    span = _span(list(known_releases()))
    return newest._replace(message=f"no bundled vLLM release ({span}) accepts the argument `{option}`")


@functools.lru_cache(maxsize=1)
def _every_option_string() -> frozenset[str]:
    return frozenset(option for release in known_releases() for option in option_strings(release))


def refused_options(release: str, options: list[str]) -> tuple[Problem, ...]:
    """The problems of the long options (:data:`.vllm_args.Options.unchecked`)
    that vLLM ``release`` refuses, each once: its argparse exits before the
    engine starts. Only options whose acceptance depends on the release are
    given: those the decision does not read, and spellings only newer
    releases take."""
    found = [refusal(release, option) for option in dict.fromkeys(options)]
    return tuple(Problem(r.code, r.message, hint=r.hint) for r in found if r is not None)


def rejection(release: str, option: str, matches: list[str], accepted: frozenset[str]) -> Refusal:
    """vLLM ``release`` refusing ``option``, which argparse expands to
    ``matches`` (:func:`expanded`; none: it is unknown)."""
    if matches:
        return Refusal("source.ambiguous_option", f"vLLM {release} refuses the ambiguous option `{option}`, which "
                       "could be " + ", ".join(f"`{m}`" for m in matches[:5]) + (", ..." if len(matches) > 5 else ""),
                       None)
    return Refusal("source.unknown_option", f"vLLM {release} rejects the unrecognized argument `{option}`",
                   suggest(option, sorted(accepted)))


def _span(versions: list[str]) -> str:
    """Releases as a reader takes them in: one, a run (``0.9.1 to 0.10.2``), or a list of runs."""
    everyone = known_releases()
    runs: list[list[str]] = []
    for version in versions:
        if runs and everyone.index(version) == everyone.index(runs[-1][-1]) + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs)


# Cached by the resolved release, so that known_options() and
# known_options(DEFAULT_RELEASE) read the list once between them.
@functools.lru_cache(maxsize=None)
def _file_options(path: str) -> ReleaseOptions:
    return _parse(path, lambda: Path(path).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _release_options(release: str) -> ReleaseOptions:
    known = known_releases()
    bundle = releases.bundled()
    name = bundle.releases[release].options if release in known else None
    if name is None:
        raise InputError([Problem("release.unknown", f"no option list of vLLM {release} is bundled; known: "
                                  + ", ".join(known), hint=suggest(release, known))])
    return _parse(name, lambda: bundle.root.joinpath(name).read_text(encoding="utf-8"))


def _parse(name: str, read_text: Callable[[], str]) -> ReleaseOptions:
    try:
        data = json.loads(read_text())
        by_dest: dict[str, Option] = {}
        aliases: dict[str, str] = {}
        for flag, entry in data["options"].items():
            # argparse's dest: the first long option without its dashes, `-` read as `_`.
            dest = flag[2:].replace("-", "_")
            by_dest[dest] = Option(dest, flag, entry.get("type"), bool(entry.get("no_form")),
                                   tuple(entry.get("inverses") or ()))
            for alias in entry.get("aliases") or ():
                if alias.startswith("--"):  # `-tp` names no key; `--device-memory-utilization` does
                    aliases[alias[2:].replace("-", "_")] = dest
        return ReleaseOptions(str(data["vllm_version"]), MappingProxyType(by_dest), MappingProxyType(aliases))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError([Problem("release.options", f"the option list `{name}` cannot be read: "
                                  f"{type(exc).__name__}: {exc}"[:300])]) from None
