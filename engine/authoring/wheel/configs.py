"""The config classes a vLLM release builds from a deployment, read statically from its wheel.

vLLM checks what a deployment gives it in its config classes, pydantic
dataclasses under ``vllm.config``: ``KVTransferConfig`` (every node of the
connector graph), ``AttentionConfig`` (``hisparse_config``), ``CacheConfig``
(the offloading options), ``KVEventsConfig`` and ``VllmConfig`` (the config
that holds them). What a release accepts differs between releases: fields are
added and removed, a ``Literal`` field has its choices, and a class either
ignores an unknown keyword (pydantic's default, ``extra="ignore"``) or refuses
it (``extra="forbid"``, which vLLM's ``@config`` decorator sets from 0.18.0; a
plain dataclass refuses it with a TypeError).

:func:`read_configs` returns ``{"format", "vllm_version", "wheel", "classes":
{"KVTransferConfig": {"module", "line", "unknown_fields", "fields": {name:
{"types", "choices"?}}}, ...}}``: for each class found, the module and line
of its ``class`` statement, ``unknown_fields`` (``ignored`` or ``refused``,
read from its decorators) and its fields, bases first, each with the member
names of its annotation (type aliases expanded: ``["str", "None"]``,
``["Literal", "None"]``, ``["HiSparseConfig", "None"]``) and, for a
``Literal``, its choices. A class the release does not have is left out. Files
are parsed with ``ast`` only (source.py): nothing from the wheel is imported
or executed.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from .options import OptionReader, wheel_reader
from .source import Module, Wheel, dotted, json_constant

__all__ = ["read_configs", "configs_json", "CONFIGS_FORMAT", "CONFIG_CLASSES"]

CONFIGS_FORMAT = 1
CONFIG_PACKAGE = "vllm.config"
# The classes vLLM builds from what a deployment document gives (docs/vllm-releases.md).
CONFIG_CLASSES = ("VllmConfig", "KVTransferConfig", "AttentionConfig", "CacheConfig", "KVEventsConfig")
PYDANTIC_DATACLASS = "pydantic.dataclasses.dataclass"
STDLIB_DATACLASS = ("dataclasses.dataclass",)
# pydantic's `extra` settings, as the data names them
EXTRA = {"ignore": "ignored", "allow": "ignored", "forbid": "refused"}


def _extra_keyword(node: ast.AST) -> str | None:
    """The `extra=` of the first ``ConfigDict(extra=...)`` call under ``node``, or None."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and (dotted(call.func) or "").rsplit(".", 1)[-1] == "ConfigDict":
            for keyword in call.keywords:
                if keyword.arg == "extra" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return None


def _function(wheel: Wheel, mod: Module | None, name: str,
              depth: int = 0) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``def`` a decorator name is bound to in ``mod`` (through imports), or None."""
    if depth > 8 or mod is None or "." in name:
        return None
    if name in mod.functions:
        return mod.functions[name]
    binding = mod.bindings.get(name)
    value: dict[str, Any] = binding[-1][1] if binding else {"kind": None}
    if value.get("kind") == "import":
        return _function(wheel, wheel.module(value["module"]), value["name"], depth + 1)
    return None


def _unknown_fields(wheel: Wheel, mod: Module, cls: ast.ClassDef) -> str:
    """``refused`` or ``ignored``: what the class does with a keyword it has no field for.

    Read from its decorators: a ``ConfigDict(extra=...)`` given to one wins;
    else one that vLLM's own decorator function (``@config``) sets; else a
    pydantic dataclass ignores it and a plain dataclass refuses it (TypeError).
    """
    extra = kind = None
    for decorator in cls.decorator_list:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = dotted(func) or ""
        given = _extra_keyword(decorator) if isinstance(decorator, ast.Call) else None
        refs = [ref for _, ref in wheel.resolve_expr(mod, name)] if name else []
        external = next((ref["external"] for ref in refs if "external" in ref), None)
        if external == PYDANTIC_DATACLASS or (external is None and name.rsplit(".", 1)[-1] == "dataclass"
                                              and "pydantic" in name):
            kind = kind or "pydantic"
        elif external in STDLIB_DATACLASS:
            kind = kind or "dataclass"
        else:
            function = _function(wheel, mod, name)
            if function is not None:
                given = given or _extra_keyword(function)
                if any((dotted(n) or "").endswith("dataclass") for n in ast.walk(function)):
                    kind = kind or "pydantic"
        extra = extra or given
    if extra is not None:
        return EXTRA.get(extra, "refused")
    return "refused" if kind == "dataclass" else "ignored"


def _literal_values(reader: OptionReader, mod: Module, node: ast.AST | None, out: list, depth: int = 0) -> list:
    """The constants of every ``Literal[...]`` in an annotation, type aliases expanded."""
    if node is None or depth > 8:
        return out
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            return _literal_values(reader, mod, ast.parse(node.value, mode="eval").body, out, depth + 1)
        except SyntaxError:
            return out
    if isinstance(node, ast.Subscript) and (dotted(node.value) or "").rsplit(".", 1)[-1] == "Literal":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for item in items:  # Literal[KVProducer, KVConsumer]: the names are Literal aliases
            if isinstance(item, ast.Constant):
                if json_constant(item.value):  # (b"x" is no choice a deployment document can make)
                    out.append(item.value)
            else:
                _literal_values(reader, mod, item, out, depth + 1)
        return out
    if isinstance(node, ast.BinOp):
        _literal_values(reader, mod, node.left, out, depth + 1)
        return _literal_values(reader, mod, node.right, out, depth + 1)
    if isinstance(node, ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for item in items:
            _literal_values(reader, mod, item, out, depth + 1)
        return out
    name = dotted(node)
    alias = reader.alias(mod, name) if name else None
    if alias is not None:
        _literal_values(reader, alias[0], alias[1], out, depth + 1)
    return out


def _field(reader: OptionReader, mod: Module, annotation: ast.AST) -> dict:
    names = [n.rsplit(".", 1)[-1] for n in reader.annotation_names(mod, annotation)]
    entry: dict = {"types": list(dict.fromkeys(names))}
    if "Literal" in names:
        entry["choices"] = list(dict.fromkeys(_literal_values(reader, mod, annotation, [])))
    return entry


def read_configs(path: str) -> dict:
    """The config classes of this wheel (see the module docstring).

    Raises WheelError: wheel.unreadable, wheel.not_vllm, wheel.no_options."""
    with wheel_reader(path, CONFIGS_FORMAT) as (head, reader):
        wheel = reader.wheel
        package = wheel.module(CONFIG_PACKAGE)
        classes: dict[str, dict] = {}
        for name in CONFIG_CLASSES:
            mod, cls = reader.class_of(package, name) if package is not None else (None, None)
            if mod is None or cls is None:
                continue
            fields = {field: _field(reader, field_mod, annotation)
                      for field, (field_mod, annotation) in reader.config_fields(mod, cls).items()}
            classes[name] = {"module": mod.name, "line": cls.lineno,
                             "unknown_fields": _unknown_fields(wheel, mod, cls), "fields": fields}
        return {**head, "classes": classes}


def configs_json(configs: dict) -> str:
    """The config classes as the text of a configs file."""
    return json.dumps(configs, indent=1, ensure_ascii=False) + "\n"
