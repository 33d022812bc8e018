"""vLLM releases: which policy decides for each.

The bundled rules (``rules/``) hold one policy per semantic epoch of vLLM's
HMA decision (``rules/epochs/<epoch>/``: the rule files) and one connector
registry per distinct registry (``rules/registries/``, generated from the
release's wheel by ``hma-policy registry from-wheel``). ``rules/releases.yaml``
names, for every release from the first with the hybrid KV cache manager,
its epoch, its registry, its option list and its config classes. A release's policy is the rule
files of its epoch and its registry; the release itself is a fact the rules
may read (``vllm_minor``, ``vllm_patch``), for what changes between the
releases of one epoch.

A folder with a ``releases.yaml`` is such a bundle (the bundled rules, or a
copy of them); any other rules folder is one policy, for the release its
registry names.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from . import yamlsafe
from .errors import InputError, PolicyError, Problem, suggest

__all__ = ["Before", "Release", "Releases", "bundled", "of_folder", "parse_version", "release_numbers", "VERSION",
           "RELEASES_FILE"]

RELEASES_FILE = "releases.yaml"
EPOCHS = "epochs"
# A vLLM release as PyPI spells it: 0.21.0, 0.10.1.1, 0.11.0rc1.
VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+){1,2}(?:rc[0-9]+|\.post[0-9]+)?")


class Release(NamedTuple):
    """One release: its version, its epoch's rule folder and its registry
    (both relative to the bundle), its option list, its config classes and its module table (modules.py)."""

    version: str
    epoch: str
    registry: str
    options: str | None
    configs: str | None = None
    modules: str | None = None


class Before(NamedTuple):
    """How a deployment is decided whose deployer names a release older than
    every one the bundle holds (``before:`` in releases.yaml): the rule id,
    the outcome, and the texts, with ``{release}`` and ``{first}`` to fill;
    ``digest`` is its decisions' policy digest (the rule and the oldest
    release, which it compares with)."""

    id: str
    outcome: str
    reason: str
    remediation: str | None
    digest: str


class Releases(NamedTuple):
    """The releases a bundle decides for, oldest first, its default, and
    how a release older than all of them is decided (None: as the default)."""

    root: Any  # the bundle's folder (a Path, or the package's resources)
    default: str
    releases: dict[str, Release]
    before: Before | None = None

    def predates(self, version: str) -> bool:
        """Whether ``version`` (a parsed release) is older than every release
        held: a release number below the oldest's (a candidate of the oldest,
        0.9.1rc1, is not known to predate it)."""
        return release_numbers(version) < release_numbers(next(iter(self.releases)))

    def get(self, version: str, path: str = "") -> Release:
        """The release ``version``; :class:`InputError` (``release.malformed``,
        ``release.unknown``, at ``path``) for a string that is no release or
        one the bundle does not hold, listing the known ones."""
        version = parse_version(version, path)
        release = self.releases.get(version)
        if release is None:
            known = list(self.releases)
            raise InputError([Problem(
                "release.unknown", f"vLLM {version} is not a release these rules know; they know "
                f"{known[0]} to {known[-1]}: {', '.join(known)}", path, hint=suggest(version, known))])
        return release

    def files(self, release: Release) -> list[str]:
        """The rule files of a release's policy, relative to the bundle: its
        epoch's (``epochs/<epoch>/*.yaml``), then its registry."""
        folder = f"{EPOCHS}/{release.epoch}"
        entry = self.root.joinpath(folder)
        if not entry.is_dir():
            raise PolicyError([Problem("rules.releases", f"release {release.version} names epoch `{release.epoch}`, "
                                       f"but there is no folder `{folder}`", file=RELEASES_FILE)])
        names = sorted(f.name for f in entry.iterdir() if f.name.endswith((".yaml", ".yml")))
        return [*(f"{folder}/{name}" for name in names), release.registry]


    def tests(self, release: Release) -> str:
        """The policy tests of a release's epoch, relative to the bundle."""
        return f"{EPOCHS}/{release.epoch}/tests"


def parse_version(text: Any, path: str = "") -> str:
    """``text`` as a release version (a leading ``v`` dropped); InputError
    ``release.malformed`` (at ``path``) when it is none."""
    value = text.strip() if isinstance(text, str) else text
    if isinstance(value, str) and value[:1] in ("v", "V"):
        value = value[1:]
    if not isinstance(value, str) or not VERSION.fullmatch(value):
        shown = text if isinstance(text, str) else type(text).__name__
        raise InputError([Problem("release.malformed", f"`{shown}` is not a vLLM release version", path,
                                  hint="write it as PyPI does: 0.22.0, 0.10.1.1")])
    return value


def release_numbers(version: str) -> tuple[int, ...]:
    """A parsed release's numbers, without a candidate's or post release's suffix: 0.9.1rc1 -> (0, 9, 1)."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", re.sub(r"(?:rc|\.post)[0-9]+$", "", version)))


def _read(root: Any, source: str) -> Releases:
    try:
        data, _ = yamlsafe.load(root.joinpath(RELEASES_FILE).read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([Problem("rules.read", f"cannot read {RELEASES_FILE}: {exc}", file=source)]) from None
    except yamlsafe.YamlProblem as exc:
        raise PolicyError([Problem("rules.parse", f"invalid YAML: {exc.message}", file=RELEASES_FILE,
                                   line=exc.line, column=exc.column)]) from None
    from .schema import iter_problems  # the releases file is checked as every rule file is

    problems = [Problem(p.code, p.message, p.path, p.hint, file=RELEASES_FILE)
                for p in iter_problems("releases", data, default_code="rules.schema")]
    if problems:
        raise PolicyError(problems)
    releases = {version: Release(version, entry["epoch"], entry["registry"], entry.get("options"), entry.get("configs"),
                                 entry.get("modules"))
                for version, entry in data["releases"].items()}
    if data["default"] not in releases:
        raise PolicyError([Problem("rules.releases", f"the default release {data['default']} is not listed",
                                   "/default", file=RELEASES_FILE)])
    rule = data.get("before")
    before = None
    if rule:
        texts = (rule["id"], rule["outcome"], rule["reason"], rule.get("remediation"))
        digest = "sha256:" + hashlib.sha256(json.dumps([*texts, next(iter(releases))]).encode()).hexdigest()
        before = Before(*texts, digest)
    return Releases(root, data["default"], releases, before)


_BUNDLED: Releases | None = None


def bundled() -> Releases:
    """The releases of the bundled rules (read once)."""
    global _BUNDLED
    if _BUNDLED is None:
        _BUNDLED = _read(resources.files("hma_policy.rules"), "bundled")
    return _BUNDLED


def of_folder(folder: str | Path) -> Releases | None:
    """The releases of a bundle folder, or None for a plain rules folder."""
    path = Path(folder)
    return _read(path, str(folder)) if (path / RELEASES_FILE).is_file() else None
