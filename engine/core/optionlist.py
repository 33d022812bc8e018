"""The options a vLLM release's ``vllm serve`` accepts, from recorded data.

Each release's list (``vllm_options/<release>.json``; PROVENANCE.md there
says where it came from) was read statically from the release's wheel:
every option string, its aliases, whether it has a ``--no-`` form, and its
argparse type. A deployment document and an ``argparse.Namespace`` name
options by their argparse ``dest`` (``--tensor-parallel-size`` is
``tensor_parallel_size``), which :class:`ReleaseOptions` indexes them by.

:func:`known_options` is the one reader of the data: where the lists live
is :data:`_DATA`, and nothing else opens them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from .errors import InputError, Problem, suggest

__all__ = ["Option", "ReleaseOptions", "DEFAULT_RELEASE", "known_options", "known_releases"]

# The release whose list is read until a deployment's release chooses one.
DEFAULT_RELEASE = "0.33.0"
# Where the bundled lists are, one `<release>.json` each.
_DATA = resources.files("hma_policy.core").joinpath("vllm_options")


class Option(NamedTuple):
    """One option: its argparse ``dest``, its option string, its type
    (``bool``, ``int``, ``float``, ``str``, ``json``, ``list``, or None
    when the wheel does not say statically) and whether ``--no-`` negates it."""

    dest: str
    flag: str
    type: str | None
    no_form: bool


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
    names = [entry.name[:-len(".json")] for entry in _DATA.iterdir() if entry.name.endswith(".json")]
    return tuple(sorted(names, key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.split("."))))


@functools.lru_cache(maxsize=None)
def known_options(release: str | None = None, *, path: str | Path | None = None) -> ReleaseOptions:
    """The options of ``release`` (default: :data:`DEFAULT_RELEASE`), or
    those of the list in the file ``path`` (the same format). Each list is
    read once.

    :class:`InputError`: ``release.unknown`` when no list of that release
    is bundled, ``release.options`` when a list cannot be read.
    """
    if path is not None:
        return _parse(str(path), lambda: Path(path).read_text(encoding="utf-8"))
    release = DEFAULT_RELEASE if release is None else release
    known = known_releases()
    if release not in known:
        raise InputError([Problem("release.unknown", f"no option list of vLLM {release} is bundled; known: "
                                  + ", ".join(known), hint=suggest(release, known))])
    return _parse(f"{release}.json", lambda: _DATA.joinpath(f"{release}.json").read_text(encoding="utf-8"))


def _parse(name: str, read_text: Callable[[], str]) -> ReleaseOptions:
    try:
        data = json.loads(read_text())
        by_dest: dict[str, Option] = {}
        aliases: dict[str, str] = {}
        for flag, entry in data["options"].items():
            # argparse's dest: the first long option without its dashes, `-` read as `_`.
            dest = flag[2:].replace("-", "_")
            by_dest[dest] = Option(dest, flag, entry.get("type"), bool(entry.get("no_form")))
            for alias in entry.get("aliases") or ():
                if alias.startswith("--"):  # `-tp` names no key; `--device-memory-utilization` does
                    aliases[alias[2:].replace("-", "_")] = dest
        return ReleaseOptions(str(data["vllm_version"]), MappingProxyType(by_dest), MappingProxyType(aliases))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError([Problem("release.options", f"the option list `{name}` cannot be read: "
                                  f"{type(exc).__name__}: {exc}"[:300])]) from None
