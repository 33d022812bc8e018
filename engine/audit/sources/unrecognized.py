"""No silent miss: a file that mentions a vLLM KV option or connector
setting but yields no launch gets a ``source.unrecognized`` note with the
line of the first mention. A note is not a problem: the report shows and
counts it, and ``--fail-on problem`` does not fire on it."""

from __future__ import annotations

import dataclasses
import re

from ...core.errors import Problem
from .deployment import SourceFile

__all__ = ["with_unrecognized", "DOCUMENT_SUFFIXES", "mentions_kv"]

# What makes a file worth the note: vLLM's KV options and the connector config's own keys.
_KV = re.compile(r"kv[-_]transfer[-_]config|kv_connector(?:_module_path)?\b|kv[-_]offloading[-_](?:size|backend)"
                 r"|disable[-_]hybrid[-_]kv[-_]cache[-_]manager", re.I)
# Files that are no deployment source but are read for the note: documentation and templates of other tools.
DOCUMENT_SUFFIXES = frozenset({".md", ".rst", ".txt", ".j2", ".jinja", ".jinja2", ".tpl", ".tmpl", ".gotmpl"})


def mentions_kv(text: str) -> re.Match | None:
    return _KV.search(text)


def with_unrecognized(found: SourceFile, text: str) -> SourceFile:
    """``found`` with the note, when it has no launch and ``text`` mentions a KV option."""
    if found.deployments or any(n.code == "source.unrecognized" for n in found.notes):
        return found
    match = _KV.search(text)
    if match is None:
        return found
    line = text.count("\n", 0, match.start()) + 1
    why = f"; {found.skipped}" if found.skipped else ""
    note = Problem("source.unrecognized", f"mentions `{match.group(0)}` at line {line}, but no vLLM launch is "
                   f"recognised{why}", file=found.file, line=line,
                   hint="if this file starts vLLM, audit what it renders to (`helm template`, `kustomize build`)")
    return dataclasses.replace(found, notes=found.notes + (note,))
