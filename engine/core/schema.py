"""The bundled JSON Schemas: loading, compiled validators, and located problems.

Schemas are found with importlib.resources, so an installed wheel and an
editable install read the same files. jsonschema produces every error report;
a schema node may carry ``x-code`` / ``x-message`` to give the errors below it
a stable code of their own (for example ``connector.role_missing``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any, Callable, Iterator

from typing import TYPE_CHECKING

from .accept import compile_schema
from .errors import Problem, suggest

if TYPE_CHECKING:  # jsonschema is imported when a report is needed, not at start-up
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = ["load_schema", "validator", "accept_check", "is_valid", "iter_problems", "problems_against", "pointer",
           "pointer_parts"]

# Every bundled schema, by the name `hma-policy schema NAME` takes.
SCHEMAS = ("deployment", "rules", "tests", "decision", "releases")


@functools.lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """The parsed ``schemas/<name>.schema.json``."""
    text = resources.files("hma_policy.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=None)
def validator(name: str) -> "Draft202012Validator":
    """A jsonschema validator for the named schema, built once per process."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(name))


@functools.lru_cache(maxsize=None)
def accept_check(name: str) -> Callable[[Any], bool]:
    """The fast accept-path check of the named schema (engine/accept.py),
    compiled once per process: whether an instance is valid; jsonschema
    reports the problems."""
    return compile_schema(load_schema(name))


def is_valid(name: str, instance: Any) -> bool:
    """The fast accept-path answer (engine/accept.py); jsonschema reports the problems."""
    return accept_check(name)(instance)


def pointer(parts: Any) -> str:
    """An RFC 6901 JSON Pointer from path parts."""
    out = []
    for part in parts:
        out.append("/" + str(part).replace("~", "~0").replace("/", "~1"))
    return "".join(out)


def pointer_parts(text: str) -> list[str]:
    """The path parts of an RFC 6901 JSON Pointer (the inverse of :func:`pointer`)."""
    return [raw.replace("~1", "/").replace("~0", "~") for raw in text.split("/")[1:]]


def _annotation(schema: Mapping[str, Any], error: "ValidationError", key: str) -> Any:
    """The innermost ``key`` annotation on the schema path of ``error``."""
    node: Any = schema
    found = None
    parts = list(error.absolute_schema_path)
    for part in parts:
        if isinstance(node, dict) and key in node:
            found = node[key]
        # jsonschema leaves "$ref" out of schema paths: follow it implicitly.
        while isinstance(node, dict) and "$ref" in node and part not in node:
            node = _resolve_local(schema, node["$ref"])
            if isinstance(node, dict) and key in node:
                found = node[key]
        if isinstance(node, dict) and part == "$ref":
            node = _resolve_local(schema, node["$ref"])
        elif isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return found
    if isinstance(node, dict) and key in node:
        found = node[key]
    return found


def _resolve_local(schema: Mapping[str, Any], ref: str) -> Any:
    """Follow a local ``#/...`` reference (the bundled schemas use no others)."""
    node: Any = schema
    for part in pointer_parts(ref.lstrip("#")):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _type_mismatch(errors: "list[ValidationError]") -> bool:
    """True when a branch failed only because the instance has another type
    (directly, or in every branch of a nested anyOf/oneOf)."""
    for e in errors:
        if e.relative_path:
            return False
        if e.validator == "type":
            continue
        if e.validator in ("anyOf", "oneOf") and e.context:
            branches: dict[Any, list] = {}
            for sub in e.context:
                branches.setdefault(sub.relative_schema_path[0], []).append(sub)
            if all(_type_mismatch(b) for b in branches.values()):
                continue
        return False
    return True


def _expand(error: "ValidationError") -> "list[ValidationError]":
    """The errors to report for one error: anyOf/oneOf are opened to the branch
    whose type matches the instance, and all of that branch's errors kept."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    from jsonschema.exceptions import best_match, relevance

    branches: dict[Any, list] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    live = [errs for errs in branches.values() if not _type_mismatch(errs)]
    if not live:
        return [error]
    if len(live) == 1:
        return [leaf for sub in live[0] for leaf in _expand(sub)]
    best = best_match([e for errs in live for e in errs], key=relevance)
    return _expand(best) if best is not None else [error]


def _short(value: Any) -> str:
    """A user value for a one-line message: short, with control characters escaped."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # integers past Python's digit limit
        text = f"<integer of {value.bit_length()} bits>" if isinstance(value, int) else "<value>"
    text = text if len(text) <= 60 else text[:57] + "..."
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _types(schema: Any, root: Mapping[str, Any]) -> list[str]:
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        return _types(_resolve_local(root, schema["$ref"]), root)
    if "anyOf" in schema or "oneOf" in schema:
        branches = schema["anyOf"] if "anyOf" in schema else schema["oneOf"]
        return [t for branch in branches for t in _types(branch, root)]
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else list(kind or [])


def _describe(error: "ValidationError", root: Mapping[str, Any]) -> tuple[str, str | None, str]:
    """(message, hint, path) for one leaf error, in the project's message style."""
    path = pointer(error.absolute_path)
    kind = error.validator
    custom = error.schema.get("x-message") if isinstance(error.schema, dict) else None
    if custom:
        return f"{custom}, got `{_short(error.instance)}`", None, path
    if kind in ("anyOf", "oneOf"):
        expected = [t for branch in error.validator_value for t in _types(branch, root)]
        return f"expected {' or '.join(dict.fromkeys(expected)) or 'another value'}, got `{_short(error.instance)}`", None, path
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list((error.schema or {}).get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            name = extra[0]
            return (
                f"unknown field `{_short(name)}`",
                suggest(name, allowed),
                path + pointer([name]),
            )
    if kind == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        name = missing[0] if missing else "?"
        return f"missing required field `{name}`", None, path
    if kind == "enum":
        choices = ", ".join(f"`{c}`" for c in error.validator_value if c is not None)
        hint = suggest(error.instance, [c for c in error.validator_value if isinstance(c, str)])
        return f"`{_short(error.instance)}` is not one of {choices}", hint, path
    if kind == "type":
        expected = error.validator_value
        shown = " or ".join(expected) if isinstance(expected, list) else expected
        return f"expected {shown}, got `{_short(error.instance)}`", None, path
    if kind == "const":
        return f"expected `{_short(error.validator_value)}`, got `{_short(error.instance)}`", None, path
    if kind == "pattern":
        return f"`{_short(error.instance)}` does not match the pattern `{error.validator_value}`", None, path
    if kind in ("maxLength", "maxItems", "maxProperties"):
        return f"too long: at most {error.validator_value} allowed", None, path
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"`{_short(error.instance)}` is out of range ({kind} {error.validator_value})", None, path
    return error.message.splitlines()[0][:200], None, path


def iter_problems(name: str, instance: Any, *, default_code: str) -> Iterator[Problem]:
    """Every problem of ``instance`` against schema ``name``."""
    if is_valid(name, instance):
        return
    yield from problems_against(load_schema(name), validator(name), instance, default_code=default_code)


def problems_against(schema: Mapping[str, Any], checker: "Draft202012Validator", instance: Any, *,
                     default_code: str) -> Iterator[Problem]:
    """Every problem of ``instance`` against ``schema`` (``checker``: its
    jsonschema validator), such as a release's deployment schema (configlist.py)."""
    seen: set[tuple[str, str, str]] = set()
    for error in checker.iter_errors(instance):
        for leaf in _expand(error):
            message, hint, path = _describe(leaf, schema)
            code = _annotation(schema, leaf, "x-code") or default_code
            custom = _annotation(schema, leaf, "x-message")
            if custom and code != default_code:
                message = custom
            if (code, path, message) not in seen:
                seen.add((code, path, message))
                yield Problem(code=code, message=message, path=path, hint=hint)
