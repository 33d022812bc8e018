"""Where an external KV connector that a launch loads by module path
(``kv_connector_module_path``) is defined in the audited files: a note that
shows its class line. The rules decide a connector's HMA support only from a
registry entry (docs/rules.md, "Declaring an in-house connector"), never
from code; the note shows an auditor what to declare. The module is found
by its dotted path under an audited folder and parsed, never imported
(vllm-project/tpu-inference loads `TPUConnector` from
`tpu_inference.distributed.tpu_connector` so)."""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from ...core.errors import Problem
from .companions import companion_text, shown
from .context import Ctx
from .deployment import Deployment

__all__ = ["connector_notes", "registered_connectors", "with_registered"]

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_DEPTH = 8  # MultiConnector nesting read for external children


def connector_notes(ctx: Ctx, document: dict[str, Any], line: int | None) -> list[Problem]:
    """A note for each external connector of the document's KV transfer
    config (a MultiConnector's children too) whose class the audited files define."""
    config = document.get("kv_transfer_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError):  # (text the deployment checks refuse, with their own problem)
            return []
    notes = []
    for name, module in dict.fromkeys(_external(config, 0)):
        found = _defined(ctx, name, module)
        if found is not None:
            header, where = found
            notes.append(ctx.problem(
                "source.connector_code", f"`{name}` from `{module}` is defined in the audited files: `{header}` at "
                f"{where} (the rules read a connector's HMA support from a registry entry, not from its code)",
                line=line))
    return notes


def _external(config: Any, depth: int) -> list[tuple[str, str]]:
    """(class, module) of each connector loaded by module path, depth first."""
    if not isinstance(config, dict) or depth > _MAX_DEPTH:
        return []
    name, module = config.get("kv_connector"), config.get("kv_connector_module_path")
    out = [(name, module)] if isinstance(name, str) and isinstance(module, str) and _MODULE.fullmatch(module) else []
    extra = config.get("kv_connector_extra_config")
    children = extra.get("connectors") if isinstance(extra, dict) else None
    for child in children if isinstance(children, list) else ():
        out += _external(child, depth + 1)
    return out


def _defined(ctx: Ctx, name: str, module: str) -> tuple[str, str] | None:
    """The class line of ``name`` in the module's file beside the launching
    file (the folder Python puts first on a launcher's path, and the one
    vLLM's test scripts add to PYTHONPATH: vllm-project/vllm's
    kv_load_exception_handling/test.sh and random_drop_connector.py) or under
    an audited folder (``a/b.py`` or ``a/b/__init__.py``, also under
    ``src/``), and where: so the note does not depend on which folder is audited."""
    relative = Path(*module.split("."))
    for base in dict.fromkeys([ctx.path.parent, *(root if root.is_dir() else root.parent for root in ctx.roots)]):
        for candidate in (base / relative.with_suffix(".py"), base / relative / "__init__.py",
                          base / "src" / relative.with_suffix(".py"), base / "src" / relative / "__init__.py"):
            text = companion_text(ctx, candidate)
            if text is None:
                continue
            found = _classes(text).get(name)
            return (found[0], f"{shown(ctx, candidate)}:{found[1]}") if found else None
    return None


@lru_cache(maxsize=16)
def _classes(text: str) -> dict[str, tuple[str, int]]:
    """The class lines of a module's text by class name, and their lines
    (parsed once for all the launches that load a connector from it)."""
    try:
        tree = ast.parse(text)
        return {node.name: (f"class {node.name}({', '.join(ast.unparse(base) for base in node.bases)})", node.lineno)
                for node in tree.body if isinstance(node, ast.ClassDef)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}


class Registered(NamedTuple):
    """A connector a file registers: `KVConnectorFactory.register_connector(NAME, MODULE, CLASS)`."""
    module: str
    cls: str
    line: int


def registered_connectors(ctx: Ctx, tree: ast.Module) -> dict[str, Registered]:
    """The connectors a Python file registers with vLLM's factory, by name,
    where the call writes them out: the name and class as strings (the class
    also `Cls.__name__`), the module as a dotted path or `__name__` (the
    file's own, by its path under the audited folder). vLLM's factory then
    loads CLASS from MODULE for NAME, as it loads a `kv_connector_module_path`."""
    out: dict[str, Registered] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_connector" and len(node.args) == 3):
            continue
        name, module, cls = node.args
        module_path = _own_module(ctx) if isinstance(module, ast.Name) and module.id == "__name__" else \
            module.value if isinstance(module, ast.Constant) and isinstance(module.value, str) else None
        class_name = cls.value if isinstance(cls, ast.Constant) and isinstance(cls.value, str) else cls.value.id \
            if isinstance(cls, ast.Attribute) and cls.attr == "__name__" and isinstance(cls.value, ast.Name) else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and module_path and class_name \
                and _MODULE.fullmatch(module_path):
            out[name.value] = Registered(module_path, class_name, node.lineno)
    return out


def _own_module(ctx: Ctx) -> str | None:
    """The dotted module path of the file, under the audited folder that holds it."""
    path = ctx.real_path()
    if path is None:
        return None
    for root in ctx.roots:
        try:
            parts = path.with_suffix("").relative_to(root.resolve()).parts
        except ValueError:
            continue
        return ".".join(parts) if parts else None
    return path.stem


def with_registered(ctx: Ctx, deployment: Deployment, registered: dict[str, Registered]) -> Deployment:
    """A launch whose KV transfer config names a connector the file
    registers, as vLLM's factory resolves it: that connector's class loaded
    from its module (kv_connector and kv_connector_module_path), noted."""
    document = deployment.document
    if not isinstance(document, dict):
        return deployment
    config = document.get("kv_transfer_config")
    try:
        value = json.loads(config) if isinstance(config, str) else config
    except (ValueError, RecursionError):
        return deployment
    name = value.get("kv_connector") if isinstance(value, dict) else None
    if not isinstance(value, dict) or not isinstance(name, str) or name not in registered \
            or "kv_connector_module_path" in value:
        return deployment
    found = registered[name]
    value = {**value, "kv_connector": found.cls, "kv_connector_module_path": found.module}
    note = ctx.problem("source.connector_code", f"`{name}` is registered by this file at line {found.line} "
                       f"(`KVConnectorFactory.register_connector`): class `{found.cls}` from `{found.module}` (the "
                       "rules read a connector's HMA support from a registry entry, not from its code)",
                       line=deployment.line)
    written = json.dumps(value) if isinstance(config, str) else value
    return deployment.replace(document={**document, "kv_transfer_config": written}, notes=deployment.notes + (note,))
