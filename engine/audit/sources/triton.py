"""NVIDIA Triton's vLLM backend (triton-inference-server/vllm_backend): a
model of a Triton model repository whose ``config.pbtxt`` names ``backend:
"vllm"`` runs a vLLM engine made from its ``<version>/model.json``, as
``AsyncEngineArgs(**json.load(file))`` (src/model.py, ``_init_engine_args``).
Each such ``model.json`` is one launch: its keys are the engine's fields
(those the decision reads), ``model`` the model. The vLLM release is the
Triton image's (``nvcr.io/nvidia/tritonserver:<yy.mm>-vllm-python-py3``),
which the model repository does not name."""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import Problem
from ...core.options import ENGINE_FIELDS
from .companions import companion_text
from .context import Ctx
from .deployment import Deployment, SourceFile
from .launch import release_noted
from .marks import Lines
from .release import ReleaseHint

__all__ = ["is_triton_model", "triton_model"]

# The engine's arguments file, and the line of a model's config.pbtxt that picks the vLLM backend.
MODEL_FILE = "model.json"
_BACKEND = re.compile(r'^[ \t]*backend[ \t]*:[ \t]*"vllm"[ \t]*$', re.M)
_RELEASE = ReleaseHint(None, "Triton's vLLM backend runs the vLLM of its Triton image, which the model repository "
                             "does not name")


def is_triton_model(ctx: Ctx, value: Any) -> bool:
    """Whether ``value``, the JSON of ``ctx``'s file, is the engine arguments
    of a Triton model whose config.pbtxt (the folder above the version's)
    picks the vLLM backend."""
    if ctx.name != MODEL_FILE or not isinstance(value, dict):
        return False
    config = companion_text(ctx, ctx.path.parent.parent / "config.pbtxt")
    return config is not None and _BACKEND.search(config) is not None


def triton_model(ctx: Ctx, value: dict[str, Any], lines: Lines) -> SourceFile:
    """The launch of a Triton vLLM model's ``model.json``."""
    document: dict[str, Any] = {key: item for key, item in value.items() if key in ENGINE_FIELDS}
    origins = {key: f"line {lines.key(key)}: {key}" for key in document}
    if isinstance(value.get("model"), str):
        document["model"] = {"name": value["model"]}
        origins["model"] = f"line {lines.key('model')}: model"
    line = lines.at() or 1
    notes: list[Problem] = []
    release = release_noted(ctx, _RELEASE, {}, "", line, notes)
    name = document["model"]["name"] if "model" in document else None
    deployment = Deployment(ctx.display, "triton", "", line, name, document, notes=tuple(notes),
                            origins=tuple(sorted(origins.items())), chain=(ctx.display,), release=release)
    return SourceFile(ctx.display, "triton", (deployment,))
