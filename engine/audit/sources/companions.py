"""Other files a launch is made from: a kustomize base, a Helm chart's
values, the LLMInferenceServiceConfig a service names. They are read only
inside the audited paths (symbolic links resolved), within the size limit,
and never executed; one that is not there leaves the launch unresolved."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...core.errors import InputError
from ...core.input import parse_text
from .context import Ctx
from .files import read_bytes, read_text, regular
from .marks import Lines, yaml_chunks
from .placeholders import dollar_escapes, template_of

__all__ = ["Companion", "companion_text", "read_companion", "shown", "objects_of_kind", "forget_objects",
           "template_escapes", "nearest_first"]


class Companion:
    """One YAML file read for another: its documents (value, lines), in order."""

    def __init__(self, path: Path, display: str, documents: list[tuple[Any, Lines]]) -> None:
        self.path, self.display, self.documents = path, display, documents


def shown(ctx: Ctx, path: Path) -> str:
    """How a companion file is named in a report: as the audited file is (relative or absolute)."""
    if os.path.isabs(ctx.display):
        return str(path)
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def companion_text(ctx: Ctx, path: Path) -> str | None:
    """The text of a file another file names (a chart's values, a service's
    Dockerfile), where it is a regular file inside the audited paths; None
    where it is missing, outside them, not text or too large. Never raises."""
    if not ctx.fs:
        return None
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # (ValueError: a NUL, a value the file does not give)
        return None
    if not ctx.may_read(real) or not regular(real):
        return None
    text, problem = read_text(real, str(path), ctx.limits.max_file_bytes)
    return text if problem is None else None


def read_companion(ctx: Ctx, path: Path) -> Companion | None:
    """A YAML file inside the audited paths, or None (missing, outside, not
    YAML, too large). Never raises."""
    text = companion_text(ctx, path)
    if text is None:
        return None
    documents = []
    for start, body in yaml_chunks(text):
        try:
            value = parse_text(body, source=str(path), fmt="yaml")
        except InputError:
            return None
        templated = template_of(value, body)  # (as the file is read itself: document.structured_file)
        if templated is not None:
            documents.append((templated[0], Lines(body, start + 1, templated[1], templated[0])))
        elif value is not None:
            documents.append((value, Lines(body, start + 1)))
    return Companion(path, shown(ctx, path), documents)


def template_escapes(ctx: Ctx) -> dict[str, str]:
    """The placeholders of an envsubst template that the shell files beside
    it set to `$` (its `.env`, the script that renders it: aws-do-eks's
    run.sh sources .env, which exports `DOLLAR='$'`, then pipes the template
    through envsubst): placeholders.dollar_escapes."""
    if not ctx.fs:
        return {}
    folder = ctx.path.parent
    try:
        names = sorted(name for name in os.listdir(folder) if name == ".env" or name.endswith((".env", ".sh")))
    except OSError:
        return {}
    texts = (companion_text(ctx, folder / name) for name in names[:_SHELL_FILES_READ])
    return dollar_escapes(text for text in texts if text is not None)


# A bound on the shell files read beside one template: a folder of generated scripts is not read whole.
_SHELL_FILES_READ = 32


# Objects of a kind found in the audited paths: (roots, kind) -> name -> companions. Walked once
# per audit (audit() forgets what an earlier one found: the files may have changed since).
_INDEX: dict[tuple[tuple[Path, ...], str], dict[str, list[tuple[Companion, int]]]] = {}


def forget_objects() -> None:
    """Forget the objects found in the audited paths (a new audit walks them again)."""
    _INDEX.clear()


def objects_of_kind(ctx: Ctx, kind: str) -> dict[str, list[tuple[Companion, int]]]:
    """Every object of ``kind`` in the YAML files of the audited paths, by
    name: (file, document index); none for text that is not in a file (an
    admission request), which reads nothing from the file system."""
    if not ctx.fs:
        return {}
    roots = ctx.config_roots()
    key = (roots, kind)
    if key in _INDEX:
        return _INDEX[key]
    found: dict[str, list[tuple[Companion, int]]] = {}
    marker = f"kind: {kind}"
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.endswith((".yaml", ".yml")):
                    continue
                path = Path(folder) / name
                head, _ = read_bytes(path, str(path), ctx.limits.max_file_bytes)  # a FIFO is refused, never waited on
                if head is None or marker.encode() not in head:
                    continue
                companion = read_companion(ctx, path)
                for index, (value, _) in enumerate(companion.documents if companion else []):
                    if isinstance(value, dict) and value.get("kind") == kind and isinstance(value.get("metadata"), dict):
                        found.setdefault(str(value["metadata"].get("name")), []).append((companion, index))  # type: ignore[arg-type]
    _INDEX[key] = found
    return found


def nearest_first(ctx: Ctx, places: list[tuple[Companion, int]]) -> list[tuple[Companion, int]]:
    """Objects of one name found in the audited paths (objects_of_kind), the
    nearest to the file that names them first: the most folders in common,
    then as walked. Examples kept side by side each name their own (five
    KServe ServingRuntimes `nm-vllm`, one per folder, in
    robertgshaw2-neuralmagic/vllm-k8s): the first walked was another's."""
    here = ctx.path.parent.resolve().parts if ctx.fs else ()

    def shared(place: tuple[Companion, int]) -> int:
        there = place[0].path.parent.resolve().parts
        return next((i for i, (a, b) in enumerate(zip(here, there)) if a != b), min(len(here), len(there)))
    return sorted(places, key=shared, reverse=True)
