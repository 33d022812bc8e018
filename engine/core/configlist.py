"""What a vLLM release's config classes accept, from recorded data, and the
deployment schema of that release.

vLLM checks a deployment's values in its config classes (pydantic
dataclasses): each node of the connector graph in ``KVTransferConfig``, an
explicit ``hisparse_config`` in ``AttentionConfig``, the offloading options in
``CacheConfig``. Releases differ in which fields those classes have, in the
choices of a ``Literal`` field, and in whether an unknown field is refused
(``extra="forbid"``) or ignored (pydantic's default). Each release's classes
were read statically from its wheel (``rules/configs/<release>.json``, named
in ``rules/releases.yaml``; written by ``hma-policy registry from-wheel
--configs``).

:func:`document_schema` is the deployment schema (schemas/deployment.schema.json)
as a release checks it: the schema names the vLLM class of a config object
(``x-vllm-class``) and the vLLM field of a document field (``x-vllm-field``),
and the release's data gives their fields, choices and unknown-field policy.
The schema's own limits (lengths, patterns) stay. Where a release's data says
what the schema already says, the schema is used as it is: for the default
release, 0.33.0, nothing changes. Nothing here branches on a version: the
data decides.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from . import releases
from .errors import InputError, Problem
from .schema import accept_check, iter_problems, load_schema, problems_against
from .accept import compile_schema
from .lax import kind_of

__all__ = ["ConfigField", "ConfigClass", "ReleaseConfigs", "DocumentSchema", "known_configs", "document_schema",
           "release_schema"]

CONFIGS_FORMAT = 1
# An annotation's member names as JSON Schema types (other names, such as a
# nested config class, say nothing the schema can check).
JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
              "list": "array", "None": "null"}


class ConfigField(NamedTuple):
    """One field: its annotation's member names (``("str", "None")``) and,
    for a ``Literal``, its choices."""

    types: tuple[str, ...]
    choices: tuple[Any, ...] | None = None


class ConfigClass(NamedTuple):
    """One config class: ``unknown_fields`` is ``refused`` or ``ignored``."""

    name: str
    unknown_fields: str
    fields: Mapping[str, ConfigField]


class ReleaseConfigs(NamedTuple):
    release: str
    classes: Mapping[str, ConfigClass]


@functools.lru_cache(maxsize=None)
def known_configs(release: str) -> ReleaseConfigs | None:
    """The config classes of ``release`` as the bundle records them (read
    once), or None where it records none. :class:`InputError`
    ``release.configs`` when the file cannot be read."""
    entry = releases.bundled().releases.get(release)
    if entry is None or not entry.configs:
        return None
    name = entry.configs
    try:
        data = json.loads(releases.bundled().root.joinpath(name).read_text(encoding="utf-8"))
        if data["format"] != CONFIGS_FORMAT:
            raise ValueError(f"format {data['format']!r}, not {CONFIGS_FORMAT}")
        classes = {
            cls_name: ConfigClass(cls_name, str(cls["unknown_fields"]), MappingProxyType({
                field: ConfigField(tuple(entry["types"]), tuple(entry["choices"]) if "choices" in entry else None)
                for field, entry in cls["fields"].items()}))
            for cls_name, cls in data["classes"].items()}
        return ReleaseConfigs(str(data["vllm_version"]), MappingProxyType(classes))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError([Problem("release.configs", f"the config classes `{name}` cannot be read: "
                                  f"{type(exc).__name__}: {exc}"[:300])]) from None


def _only_literal(field: ConfigField) -> bool:
    return field.choices is not None and set(field.types) - {"None"} == {"Literal"}


def _kinds(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def _field_schema(field: ConfigField, known: Mapping[str, Any] | None) -> dict[str, Any]:
    """A config field's schema: the deployment schema's own (``known``, with
    its limits) where it has one, its choices and whether it takes null as
    the release declares them; else one from the field's types."""
    nullable = "None" in field.types
    if _only_literal(field):
        choices = [*(field.choices or ()), *([None] if nullable else [])]
        if known is not None and "enum" in known and _same_values(known["enum"], choices):
            return dict(known)
        return {**{k: v for k, v in (known or {}).items() if k not in ("type", "enum")}, "enum": choices}
    if known is None:
        named = [JSON_TYPES.get(name) for name in field.types]
        if None in named:  # a type JSON cannot name (a nested class, Any): vLLM checks it, not the schema
            return {}
        return {"type": named[0] if len(named) == 1 else named}
    if "type" not in known:
        return dict(known)
    kinds = [k for k in _kinds(known) if k != "null"] + (["null"] if nullable else [])
    return {**known, "type": kinds[0] if len(kinds) == 1 else kinds}


def _same_values(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x in b for x in a)


def release_schema(base: Mapping[str, Any], configs: ReleaseConfigs) -> dict[str, Any]:
    """The deployment schema ``base`` as vLLM ``configs.release`` checks it (see the module docstring)."""
    schema = copy.deepcopy(dict(base))
    for node in [*schema.get("$defs", {}).values(), *schema.get("properties", {}).values()]:
        class_name = node.get("x-vllm-class") if isinstance(node, dict) else None
        cls = configs.classes.get(class_name) if isinstance(class_name, str) else None
        if cls is None:
            continue
        known = node.get("properties", {})
        node["properties"] = {name: _field_schema(field, known.get(name)) for name, field in cls.fields.items()}
        if cls.unknown_fields == "refused":
            node["additionalProperties"] = False
        else:  # pydantic drops a keyword the class has no field for
            node.pop("additionalProperties", None)
    properties = schema.get("properties", {})
    for name, node in list(properties.items()):
        where = node.get("x-vllm-field") if isinstance(node, dict) else None
        if not where:
            continue
        cls_name, _, field_name = where.partition(".")
        cls = configs.classes.get(cls_name)
        field = cls.fields.get(field_name) if cls is not None else None
        if field is None:
            # Only null, which is no value: the release has nowhere to put one.
            properties[name] = {"description": node.get("description", ""), "type": "null",
                                "x-message": f"`{name}` is not in vLLM {configs.release}: it has no "
                                             f"`{cls_name}.{field_name}`"}
    return schema


class DocumentSchema(NamedTuple):
    """The deployment schema one release checks documents with (``release``
    None: the bundled schema as it is)."""

    release: str | None
    schema: Mapping[str, Any]
    accepts: Callable[[Any], bool]
    # The KVTransferConfig fields pydantic reads leniently (core.lax): name -> int, float or bool.
    lax: Mapping[str, str] = MappingProxyType({})

    def problems(self, document: Any) -> list[Problem]:
        """Every problem of ``document`` (none when it is valid)."""
        if self.accepts(document):
            return []
        if self.release is None:
            return list(iter_problems("deployment", document, default_code="input.schema"))
        return list(problems_against(self.schema, _validator(self.release), document, default_code="input.schema"))


@functools.lru_cache(maxsize=None)
def _validator(release: str) -> Any:
    from jsonschema import Draft202012Validator  # imported only to report problems

    return Draft202012Validator(document_schema(release).schema)


@functools.lru_cache(maxsize=None)
def document_schema(release: str | None = None) -> DocumentSchema:
    """The deployment schema of ``release`` (None, or a release whose config
    classes are not recorded: the bundled schema as it is), built once."""
    base = load_schema("deployment")
    configs = known_configs(release) if release is not None else None
    schema = release_schema(base, configs) if configs is not None else base
    if schema == base:
        return DocumentSchema(None, base, accept_check("deployment"), _lax_fields(base))
    return DocumentSchema(release, schema, compile_schema(schema), _lax_fields(schema))


def _lax_fields(schema: Mapping[str, Any]) -> Mapping[str, str]:
    """The fields of the schema's KVTransferConfig typed integer, number or boolean, by kind."""
    node = next((n for n in schema.get("$defs", {}).values()
                 if isinstance(n, dict) and n.get("x-vllm-class") == "KVTransferConfig"), {})
    kinds = {name: kind_of(field) for name, field in node.get("properties", {}).items()}
    return MappingProxyType({name: kind for name, kind in kinds.items() if kind is not None})
