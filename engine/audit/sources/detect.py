"""Which reader a file gets: by its name (or shebang) first, then, for JSON
and YAML, by what its values look like."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...core.command import DECISION_OPTIONS
from ...core.errors import suggest
from ...core.schema import load_schema

__all__ = ["SHELLS", "source_format", "classify", "mentions_vllm", "suffix", "basename"]

SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"})

_SCHEMA = load_schema("deployment")
DOC_FIELDS = frozenset(_SCHEMA["properties"])
# The fields that describe a deployment (a `name` alone describes nothing: package.json has one).
_DECISION_FIELDS = DOC_FIELDS - {"name", "description", "metadata", "$schema"}


def suffix(name: str) -> str:
    """PurePath.suffix of a file name, without building a path object."""
    at = name.rfind(".")
    return name[at:] if 0 < at < len(name) - 1 else ""


def basename(path: str | Path) -> str:
    """os.path.basename, for a POSIX path given as a string without its
    function call (a third of source_format's time)."""
    if isinstance(path, str) and os.sep == "/" and not os.altsep:
        return path[path.rfind("/") + 1:]
    return os.path.basename(path)


def source_format(path: str | Path, head: bytes = b"") -> str | None:
    """The reader for ``path`` by its name (or shebang): dockerfile, shell,
    json, yaml; None when it is not a deployment source."""
    name = basename(path).lower()
    if name in ("dockerfile", "containerfile") or name.startswith(("dockerfile.", "containerfile.")) \
            or name.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    ext = suffix(name)
    if ext in (".sh", ".bash", ".ksh", ".zsh"):
        return "shell"
    if ext == ".json":
        return "json"
    if ext in (".yaml", ".yml"):
        return "yaml"
    if not ext and head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].decode("latin-1").split()
        if words:
            interpreter = words[0].rsplit("/", 1)[-1]
            if interpreter == "env" and len(words) > 1:
                interpreter = words[1]
            if interpreter in SHELLS:
                return "shell"
    return None


_VLLM_WORDS = re.compile(r"vllm|kv[-_](transfer|connector|offloading|role)|hybrid[-_]kv", re.I)


def mentions_vllm(text: str) -> bool:
    return bool(_VLLM_WORDS.search(text))


def classify(value: Any, *, single: bool) -> str | None:
    """What a JSON or YAML value is: document, vllm-config, kubernetes, or
    None (not a deployment). ``single``: the file's only YAML document."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str):
        return "kubernetes"
    keys = {k.replace("-", "_") for k in value if isinstance(k, str)}
    unknown = keys - DOC_FIELDS
    if isinstance(value.get("model"), dict):  # a document's model is an object of facts
        return "document"
    if single and isinstance(value.get("model"), str):  # vLLM's is the model's name
        return "vllm-config"
    if keys & _DECISION_FIELDS and not unknown:
        return "document"
    options = {"--" + k.replace("_", "-") for k in value if isinstance(k, str)}
    if single and options & set(DECISION_OPTIONS):
        return "vllm-config"
    # A misspelt document: keep it a document so that validation names the typo.
    if unknown and all(suggest(k, DOC_FIELDS) for k in unknown):
        return "document"
    return None
