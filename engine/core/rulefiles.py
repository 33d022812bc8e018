"""Rule files: find a policy's files, read them within bounds, and parse them.

A policy is either a plain rules folder (its YAML files: the rulesets and a
registry), or one release of a bundle, a folder with a ``releases.yaml``
(the bundled rules are one): the rule files of the release's epoch and its
registry (:mod:`.releases`). Either way the result is a list of
:class:`RuleFile`, named relative to the folder, and the release the policy
decides for.

A symbolic link that leaves the folder is refused unread (so that no error
quotes another file's content), files are bounded in size and must be UTF-8,
and the YAML is read by :mod:`.yamlsafe`. Floats are refused here, before
anything else: durable-rules crashes on some
(../shared/reference/durable-rules.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from . import releases, yamlsafe
from .errors import PolicyError, Problem
from .schema import pointer

__all__ = ["RuleFile", "Sources", "read_sources", "parse", "problem", "folder_release", "read_file", "MAX_FILE_BYTES", "LEGACY_RELEASE"]

MAX_FILE_BYTES = 4 * 1024 * 1024
# The release a plain rules folder decides for when neither its registry's
# `vllm_version` nor the caller names one: rule folders written before
# releases were bundled follow vLLM 0.33.0.
LEGACY_RELEASE = "0.33.0"


@dataclass
class RuleFile:
    """One rule file: its name (relative to the policy's folder), its text,
    and once parsed its data and the (line, column) of each JSON Pointer."""

    name: str
    text: str
    data: Any = None
    marks: dict[str, tuple[int, int]] | None = None

    def locate(self, path: str) -> tuple[int | None, int | None]:
        """(line, column) of the JSON Pointer ``path``, or of its nearest located parent."""
        while self.marks is not None:
            if path in self.marks:
                return self.marks[path]
            if not path:
                break
            path = path.rsplit("/", 1)[0]
        return None, None


def problem(file: RuleFile, code: str, message: str, path: str, hint: str | None = None) -> Problem:
    """A problem at ``path`` of ``file``, with its line and column."""
    line, column = file.locate(path)
    return Problem(code=code, message=message, path=path, hint=hint, file=file.name, line=line, column=column)


class Sources(NamedTuple):
    """A policy's rule files, where they came from, and its release."""

    files: list[RuleFile]
    source: str  # "bundled" or the folder as given
    release: str | None  # a bundle's release (a plain folder's: as asked, see folder_release)
    bundle: releases.Releases | None  # the bundle it came from (None: a plain folder)


def read_sources(rules_dir: str | Path | None, release: str | None = None) -> Sources:
    """The rule files of the policy ``rules_dir`` names (None: the bundled
    rules) for ``release`` (None: the bundle's default, or the release a
    plain folder's registry names). Raises :class:`PolicyError` for files
    that cannot be read, and :class:`InputError` (``release.malformed``,
    ``release.unknown``) for a release the bundle does not hold."""
    if rules_dir is not None and not Path(rules_dir).is_dir():
        raise PolicyError([Problem("rules.read", f"`{rules_dir}` is not a directory", file=str(rules_dir))])
    source = "bundled" if rules_dir is None else str(rules_dir)
    bundle = releases.bundled() if rules_dir is None else releases.of_folder(rules_dir)
    root: Any = resources.files("hma_policy.rules") if rules_dir is None else Path(rules_dir)
    if bundle is not None:
        chosen = bundle.get(release if release is not None else bundle.default)
        entries = [(name, root.joinpath(name)) for name in bundle.files(chosen)]
        files = [_read(entry, name, root if rules_dir is not None else None) for name, entry in entries]
        return Sources(files, source, chosen.version, bundle)
    found = sorted((e for e in root.iterdir() if e.name.endswith((".yaml", ".yml"))), key=lambda e: e.name)
    files = [f for f in (_read(e, e.name, root) for e in found) if f is not None]
    return Sources(files, source, release, None)  # the release is checked against the registry once parsed


def read_file(folder: Path, name: str) -> Any:
    """A further file of a plain rules folder (the module table), read as its
    rule files are: a link out of the folder refused, at most 4 MiB, UTF-8; None
    when there is no such regular file."""
    return _read(folder / name, name, folder)


def _read(entry: Any, name: str, inside: Path | None) -> Any:
    """A rule file's text, or None for a name that is not a regular file
    (skipped in a plain folder; a bundle's missing file is reported)."""
    if inside is not None and entry.is_symlink():
        # A link can name any file of the machine: one that leaves the
        # folder is refused unread, so that no error quotes its content.
        folder, target = os.path.realpath(inside), os.path.realpath(entry)
        if os.path.commonpath([folder, target]) != folder:
            raise PolicyError([Problem("rules.read", f"is a symbolic link to `{target}`, outside the rules directory; "
                                       "rule files are read only from inside it", file=name)])
    if not entry.is_file():
        if "/" in name:  # a file a bundle's releases.yaml names
            raise PolicyError([Problem("rules.read", f"`{name}` is named by {releases.RELEASES_FILE} but is not a file",
                                       file=name)])
        return None
    try:
        raw = entry.read_bytes()
    except OSError as exc:
        raise PolicyError([Problem("rules.read", f"cannot read `{name}`: {exc.strerror or exc}", file=name)]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise PolicyError([Problem("rules.limit", "rule file is larger than 4 MiB", file=name)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError([Problem("rules.encoding", f"not UTF-8 text (byte {exc.start})", file=name)]) from None
    return RuleFile(name, text)


def folder_release(registry: Any, release: str | None, source: str) -> str:
    """The release a plain folder decides for: the one its registry's
    ``vllm_version`` names, else ``release``, else :data:`LEGACY_RELEASE`;
    naming another than the registry's is refused."""
    wanted = releases.parse_version(release) if release is not None else None
    named = registry.get("vllm_version") if isinstance(registry, dict) else None
    if not isinstance(named, str) or not releases.VERSION.fullmatch(named.lstrip("v")):
        return wanted or LEGACY_RELEASE
    named = releases.parse_version(named)
    if wanted is not None and wanted != named:
        raise PolicyError([Problem("rules.release", f"`{source}` decides for vLLM {named} (its registry's vllm_version), "
                                   f"not {wanted}", file=source,
                                   hint=f"name the bundled policy of that release: vllm:{wanted}")])
    return named


def parse(file: RuleFile) -> Iterator[Problem]:
    """Parse ``file`` (its data and marks are set), yielding its problems."""
    try:
        file.data, file.marks = yamlsafe.load(file.text, marks=True)
    except yamlsafe.YamlProblem as exc:
        yield Problem("rules.limit" if exc.limit else "rules.parse", f"invalid YAML: {exc.message}", file=file.name,
                      line=exc.line, column=exc.column)
        return
    stack: list[tuple[Any, str]] = [(file.data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float):
            yield problem(file, "rules.hazard.float", f"`{value}` is a float; rule files hold only strings, booleans and integers",
                          path, "durable-rules crashes on floats such as 1e-05; use an integer or a string")
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((item, path + pointer([key])))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, path + pointer([index])))
