"""Ray's LLM configs built in Python, each a vLLM engine it starts: Ray
Data's batch processor (``ray.data.llm.vLLMEngineProcessorConfig(model_source=M,
engine_kwargs={...})``, whose vLLM engine stage hands ``engine_kwargs`` to
vLLM's engine arguments: ray-project/ray python/ray/llm/_internal/batch/stages/
vllm_engine_stage.py) and Ray Serve LLM's deployment config
(``ray.serve.llm.LLMConfig(model_loading_config=dict(model_id=..., model_source=...),
engine_kwargs={...})``, read as its YAML form is in rayserve.py). Each call is
read as the engine call ``LLM(model=M, **engine_kwargs)`` would be
(pyengine.py): ``engine_kwargs`` by vLLM's field names, a dict the file writes
out or one a name holds."""

from __future__ import annotations

import ast
import re
from typing import Any

from .pyforms import dict_written, dotted_name
from .pyscript import Script

__all__ = ["ray_engine_calls", "RAY_LLM"]

# Each class, with the module Ray exports it from.
_CONFIGS = {"vLLMEngineProcessorConfig": "ray.data.llm", "LLMConfig": "ray.serve.llm"}
# A file that names one of these modules may build a vLLM engine without naming vLLM.
RAY_LLM = re.compile(r"\bray\.(?:data|serve)\.llm\b")


def ray_engine_calls(script: Script) -> list[tuple[ast.Call, Any, list[tuple[str, ast.expr]]]]:
    """The engine call each of Ray's LLM configs in ``script`` makes, at the
    config's place, with the scope to read it in and the variables its
    ``runtime_env`` sets for the engine's processes (``env_vars``, written
    out: Ray starts the engine's actors in that environment, as it does for
    a Serve config's YAML in rayserve.py)."""
    imported = {alias.asname or alias.name: alias.name for node in ast.walk(script.tree)
                if isinstance(node, ast.ImportFrom) and node.module in _CONFIGS.values()
                for alias in node.names if _CONFIGS.get(alias.name) == node.module}
    out = []
    for call, scope in script.calls:
        dotted = dotted_name(call.func)  # (empty for a callee that is no name: `f()()`, `fs[0]()`)
        name = None if not dotted else imported.get(dotted[0]) if len(dotted) == 1 else \
            dotted[-1] if ".".join(dotted[:-1]) == _CONFIGS.get(dotted[-1]) else None
        if name is None:
            continue
        given = {k.arg: k.value for k in call.keywords if k.arg}
        loading = _written(script, given.get("model_loading_config"), scope)[0]
        model = given.get("model_source") if name == "vLLMEngineProcessorConfig" else \
            loading.get("model_source", loading.get("model_id"))  # (Serve: model_source, else model_id)
        keywords = [ast.keyword("model", model)] if model is not None else []
        if "engine_kwargs" in given:
            keywords.append(ast.keyword(None, given["engine_kwargs"]))
        runtime_env, where = _written(script, given.get("runtime_env"), scope)
        env = list(_written(script, runtime_env.get("env_vars"), where)[0].items())
        out.append((ast.copy_location(ast.Call(ast.Name("LLM", ast.Load()), [], keywords), call), scope, env))
    return out


def _written(script: Script, node: ast.expr | None, scope: Any) -> tuple[dict[str, ast.expr], Any]:
    """The entries of the dict ``node`` writes out, or a name that holds one
    holds, and the scope to read their values in ({} for any other)."""
    found = script.bound(node, scope) if node is not None else None
    written = dict_written(found[0]) if found is not None else None
    return ({key: value for key, value, _ in written.entries}, found[1]) if written is not None and found else ({}, scope)
