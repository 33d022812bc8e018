"""Scripts a ConfigMap holds: a Python file or a shell script under a
``data`` key named like one (``vllm_serve.py: |``), which a pod mounts and
runs (awslabs/ai-on-eks's RayServices serve ``import_path:
vllm_serve:deployment`` from one). A script a container of the file runs as
its command is read with that container (kubernetes.py); each other one is
read as the file its key names, at its lines in the manifest. Which pod runs
it is not known, so its launches name the release only where the script does."""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment
from .detect import mentions_vllm, source_format
from .kubernetes import applied_namespace
from .marks import Lines
from .python import python_file
from .shell import shell_file

__all__ = ["configmap_scripts"]

# A block scalar's indicator (`key: |`, `key: >-`, `key: |2`): its text starts on the next line.
_BLOCK_INDICATORS = ("|", ">")


def configmap_scripts(ctx: Ctx, config_maps: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    """The launches of the scripts the ConfigMaps hold, and their problems."""
    out: list[Deployment] = []
    problems: list[Problem] = []
    file_lines = ctx.text.splitlines() if config_maps else []
    for obj, lines in config_maps:
        data = obj.get("data")
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        held = (applied_namespace(meta.get("namespace")), str(meta.get("name")))
        for key, text in data.items() if isinstance(data, dict) else ():
            if not isinstance(key, str) or not isinstance(text, str) or not mentions_vllm(text) \
                    or (*held, key) in ctx.config_map_keys:  # (read as the container that runs it)
                continue
            fmt = source_format(key, text[:256].encode("utf-8", "surrogatepass"))
            at = lines.at("data", key)
            if fmt not in ("python", "shell") or at is None:
                continue
            # The script placed at its lines: a block scalar's text starts on the line after its indicator.
            written = file_lines[at - 1].rstrip() if at <= len(file_lines) else ""
            first = at + 1 if written.endswith(_BLOCK_INDICATORS) or written[-2:-1] in _BLOCK_INDICATORS else at
            script = ctx.embedded(text, first - 1)
            if script is None:
                return out, problems + [ctx.embedded_limit(at)]
            if fmt == "python":
                found = python_file(script)
                if found is not None:
                    out += found.deployments
                    problems += found.problems
            else:
                deployments, script_problems, _ = shell_file(script)
                out += deployments
                problems += script_problems
    return out, problems
