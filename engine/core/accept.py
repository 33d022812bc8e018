"""A compiled accept-path check for the bundled JSON Schemas.

jsonschema is the validator of record: it produces every error report. It is
also slow to import (about half of the CLI's start-up) and costs tens to
hundreds of microseconds per document. This module compiles a schema, once,
into a tree of check nodes that only answer "valid or not" for the keywords
the bundled schemas use; when the answer is "not valid" the caller asks
jsonschema for the located problems. A keyword it does not implement makes
compilation fail, so a schema edit can never be silently half-checked, and a
differential test holds the two to the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sized
from typing import Any, Callable, cast

__all__ = ["compile_schema", "UnsupportedSchema"]

# The facets a `type` check takes in its own node (_Typed, _Compiler.typed_check).
_STRING_FACETS = ("maxLength", "minLength", "pattern")
_NUMBER_FACETS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

# Keywords that never affect validity (annotations, and our own x-* extensions).
_ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "default", "examples", "$defs"}


class UnsupportedSchema(Exception):
    """The schema uses a keyword this module does not implement."""


def _is_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise UnsupportedSchema(f"type {kind}")


# The exact Python types json.loads gives for each JSON Schema type.
_EXACT = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
          "integer": (int,), "number": (int, float)}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    )


class _Check:
    """A compiled schema: ``ok(value)`` is whether ``value`` is valid against it.

    Nodes, not closures: compiled (mypyc), a node calls its children's
    ``ok`` through the class's method table, where a closure calls another
    as any Python callable, with its arguments parsed (the validation of a
    document is ~100 such calls)."""

    def ok(self, value: Any) -> bool:
        raise NotImplementedError


class _Always(_Check):
    def ok(self, value: Any) -> bool:
        return True


class _Never(_Check):
    def ok(self, value: Any) -> bool:
        return False


class _Ref(_Check):
    """A ``$ref``, resolved once its target is compiled (schemas may recurse)."""

    def __init__(self) -> None:
        self.target: _Check = _NEVER

    def ok(self, value: Any) -> bool:
        return self.target.ok(value)


class _Both(_Check):
    def __init__(self, first: _Check, second: _Check):
        self.first, self.second = first, second

    def ok(self, value: Any) -> bool:
        return self.first.ok(value) and self.second.ok(value)


# Loops, not any()/all() over a generator: these run for every connector of
# every document, and the generator costs more than the test.
class _AllOf(_Check):
    def __init__(self, checks: list[_Check]):
        self.checks = checks

    def ok(self, value: Any) -> bool:
        for check in self.checks:
            if not check.ok(value):
                return False
        return True


class _Some(_Check):
    """anyOf (one of ``checks`` passes, at least) or, ``only_one``, oneOf."""

    def __init__(self, checks: list[_Check], only_one: bool):
        self.checks, self.only_one = checks, only_one

    def ok(self, value: Any) -> bool:
        matched = 0
        for check in self.checks:
            if check.ok(value):
                if not self.only_one or matched:
                    return not self.only_one
                matched = 1
        return matched == 1


class _Not(_Check):
    def __init__(self, check: _Check):
        self.check = check

    def ok(self, value: Any) -> bool:
        return not self.check.ok(value)


class _If(_Check):
    def __init__(self, condition: _Check, then: _Check, otherwise: _Check):
        self.condition, self.then, self.otherwise = condition, then, otherwise

    def ok(self, value: Any) -> bool:
        return self.then.ok(value) if self.condition.ok(value) else self.otherwise.ok(value)


class _Listed(_Check):
    """properties + required, other keys free: the schema's few properties
    are looked up (an ``if`` names one) rather than every key of the value walked."""

    def __init__(self, required: tuple[str, ...], listed: list[tuple[str, _Check]]):
        self.required, self.listed = required, listed

    def has_required(self, value: dict[str, Any]) -> bool:
        for name in self.required:
            if name not in value:
                return False
        return True

    def ok(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if not self.has_required(value):
            return False
        for name, check in self.listed:
            if name in value and not check.ok(value[name]):
                return False
        return True


class _Object(_Listed):
    """properties + additionalProperties + required in one pass (the hot path)."""

    def __init__(self, required: tuple[str, ...], props: dict[str, _Check], extra: _Check):
        super().__init__(required, [])
        self.props, self.extra = props, extra

    def ok(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if not self.has_required(value):
            return False
        props = self.props
        for key, item in value.items():
            check = props.get(key)
            if check is not None:
                if not check.ok(item):
                    return False
            elif not self.extra.ok(item):
                return False
        return True


# Patterns that exclude only control characters (and DEL): every string of
# printable characters matches them (str.isprintable is false for any control
# character), which that method tells in a tenth of the time of the search
# (the name and module path of every connector take one).
_MATCHED_BY_PRINTABLE = frozenset({"^[^\\u0000-\\u001f\\u007f]*$", "^[^\\u0000-\\u001f]*$", "^[^\\u0000]*$"})


class _Typed(_Check):
    """``type`` with the string and number facets of the same schema: a value
    of an exact JSON type is answered in place; any other (an integral
    float, a subclass) takes the keywords one by one (``slow``)."""

    def __init__(self, schema: dict[str, Any], kinds: list[str], slow: _Check):
        self.longest: Any = schema.get("maxLength")
        self.shortest: Any = schema.get("minLength")
        self.regex: Any = re.compile(schema["pattern"]) if "pattern" in schema else None
        self.printable = schema.get("pattern") in _MATCHED_BY_PRINTABLE
        self.low: Any = schema.get("minimum")
        self.high: Any = schema.get("maximum")
        self.above: Any = schema.get("exclusiveMinimum")
        self.below: Any = schema.get("exclusiveMaximum")
        self.strings = "string" in kinds
        self.ints = "integer" in kinds or "number" in kinds
        self.others = frozenset(t for kind in kinds if kind not in ("string", "integer", "number") for t in _EXACT[kind])
        self.slow = slow

    def ok(self, value: Any) -> bool:
        kind = type(value)
        if kind is str:
            if not self.strings:
                return False
            return ((self.longest is None or len(value) <= self.longest)
                    and (self.shortest is None or len(value) >= self.shortest)
                    and (self.regex is None or (self.printable and value.isprintable())
                         or self.regex.search(value) is not None))
        if kind is int:
            if not self.ints:
                return False
            return ((self.low is None or value >= self.low) and (self.high is None or value <= self.high)
                    and (self.above is None or value > self.above) and (self.below is None or value < self.below))
        if kind in self.others:
            return True
        return self.slow.ok(value)


class _InstanceOf(_Check):
    def __init__(self, types: tuple[type, ...]):
        self.types = types

    def ok(self, value: Any) -> bool:
        return isinstance(value, self.types)


class _Type(_Check):
    """The exact types of parsed JSON answer at once; an integral float (for
    "integer") and subclasses take the full test."""

    def __init__(self, kinds: list[str]):
        self.kinds = kinds
        self.exact = frozenset(t for kind in kinds for t in _EXACT[kind])
        self.integral = "integer" in kinds and "number" not in kinds

    def ok(self, value: Any) -> bool:
        kind = type(value)
        if kind in self.exact:
            return True
        if kind is float and self.integral:
            return bool(value.is_integer())
        for name in self.kinds:
            if _is_type(value, name):
                return True
        return False


class _Enum(_Check):
    def __init__(self, options: list[Any]):
        self.strings = frozenset(option for option in options if isinstance(option, str))
        self.others = [option for option in options if not isinstance(option, str)]

    def ok(self, value: Any) -> bool:
        if type(value) is str:
            return value in self.strings
        for option in self.others:
            if _equal(value, option):
                return True
        return False


class _ConstText(_Check):
    """A string ``const``: what _equal answers for one, without its type tests."""

    def __init__(self, text: str):
        self.text = text

    def ok(self, value: Any) -> bool:
        return type(value) is str and value == self.text


class _Const(_Check):
    def __init__(self, constant: Any):
        self.constant = constant

    def ok(self, value: Any) -> bool:
        return _equal(value, self.constant)


class _Every(_Check):
    """Each item of a value of ``kind`` passes ``check``: an array's items
    (``items``), an object's keys (``propertyNames``); other values pass."""

    def __init__(self, kind: type, check: _Check):
        self.kind, self.check = kind, check

    def ok(self, value: Any) -> bool:
        if isinstance(value, self.kind):
            for item in cast(Iterable[Any], value):  # a list or dict (the types it is made with)
                if not self.check.ok(item):
                    return False
        return True


class _Size(_Check):
    """maxProperties, minProperties, maxItems, minItems, maxLength, minLength:
    the length of a value of ``kind`` within [low, high]."""

    def __init__(self, kind: type, low: int, high: int | None):
        self.kind, self.low, self.high = kind, low, high

    def ok(self, value: Any) -> bool:
        if not isinstance(value, self.kind):
            return True
        size = len(cast(Sized, value))  # a dict, list or str (the types it is made with)
        return size >= self.low and (self.high is None or size <= self.high)


class _Pattern(_Check):
    def __init__(self, pattern: str):
        self.regex = re.compile(pattern)

    def ok(self, value: Any) -> bool:
        return not isinstance(value, str) or self.regex.search(value) is not None


class _Bound(_Check):
    """minimum, maximum, exclusiveMinimum, exclusiveMaximum: any number (not
    a bool) against ``bound``; other values pass."""

    def __init__(self, keyword: str, bound: Any):
        self.keyword, self.bound = keyword, bound

    def ok(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        keyword = self.keyword
        if keyword == "minimum":
            return bool(value >= self.bound)
        if keyword == "maximum":
            return bool(value <= self.bound)
        if keyword == "exclusiveMinimum":
            return bool(value > self.bound)
        return bool(value < self.bound)


_ALWAYS: _Check = _Always()
_NEVER: _Check = _Never()


class _Compiler:
    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.refs: dict[str, _Ref] = {}

    def ref(self, target: str) -> _Check:
        if not target.startswith("#/"):
            raise UnsupportedSchema(f"$ref {target}")
        held = self.refs.get(target)
        if held is None:
            held = self.refs[target] = _Ref()  # resolved below (recursive schemas)
            node: Any = self.root
            for raw in target[2:].split("/"):
                node = node[raw.replace("~1", "/").replace("~0", "~")]
            held.target = self.compile(node)
        return held

    def compile(self, schema: Any) -> _Check:
        if schema is True or schema == {}:
            return _ALWAYS
        if schema is False:
            return _NEVER
        checks: list[_Check] = []
        object_keys = {"properties", "additionalProperties", "required"}
        if object_keys & schema.keys():
            checks.append(self.object_check(schema))
        folded: set[str] = set()
        if "type" in schema:
            # The type and the string and number facets in one node (the hot
            # path of every scalar property).
            checks.append(self.typed_check(schema))
            folded = {"type", *_STRING_FACETS, *_NUMBER_FACETS}
        for key, arg in schema.items():
            if key in _ANNOTATIONS or key in object_keys or key in folded or key.startswith("x-") or key in ("then", "else"):
                continue
            checks.append(self.keyword(key, arg, schema))
        return _all_of(checks)

    def keyword(self, key: str, arg: Any, schema: dict[str, Any]) -> _Check:
        """One keyword of ``schema`` (its ``arg``) as a node."""
        size = _SIZES.get(key)
        if size is not None:
            kind, highest = size
            return _Size(kind, 0, arg) if highest else _Size(kind, arg, None)
        if key in _NUMBER_FACETS:
            return _Bound(key, arg)
        maker = _KEYWORDS.get(key)
        if maker is None:
            raise UnsupportedSchema(key)
        return maker(self, arg, schema)

    def object_check(self, schema: dict[str, Any]) -> _Check:
        if "patternProperties" in schema:
            raise UnsupportedSchema("patternProperties")
        props = {name: self.compile(sub) for name, sub in schema.get("properties", {}).items()}
        extra_schema = schema.get("additionalProperties", True)
        required = tuple(schema.get("required", ()))
        if extra_schema is True:
            return _Listed(required, list(props.items()))
        return _Object(required, props, self.compile(extra_schema))

    def typed_check(self, schema: dict[str, Any]) -> _Check:
        kinds = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        slow = _all_of([self.k_type(schema["type"], schema)]
                       + [self.keyword(key, schema[key], schema) for key in (*_STRING_FACETS, *_NUMBER_FACETS)
                          if key in schema])
        if not any(key in schema for key in (*_STRING_FACETS, *_NUMBER_FACETS)) and not ("integer" in kinds and "number" not in kinds):
            return slow  # a bare type: k_type is already one node
        return _Typed(schema, kinds, slow)

    # -- keywords ------------------------------------------------------------
    def k_ref(self, arg: str, schema: dict[str, Any]) -> _Check:
        return self.ref(arg)

    def k_type(self, arg: Any, schema: dict[str, Any]) -> _Check:
        kinds = [arg] if isinstance(arg, str) else list(arg)
        for kind in kinds:
            _is_type(None, kind)  # unknown type names fail compilation
        simple = {"object": dict, "array": list, "string": str}
        if all(kind in simple for kind in kinds):
            return _InstanceOf(tuple(simple[kind] for kind in kinds))
        return _Type(kinds)

    def k_enum(self, arg: list[Any], schema: dict[str, Any]) -> _Check:
        return _Enum(arg)

    def k_const(self, arg: Any, schema: dict[str, Any]) -> _Check:
        return _ConstText(arg) if isinstance(arg, str) else _Const(arg)

    def k_propertyNames(self, arg: Any, schema: dict[str, Any]) -> _Check:
        return _Every(dict, self.compile(arg))

    def k_items(self, arg: Any, schema: dict[str, Any]) -> _Check:
        if isinstance(arg, list):
            raise UnsupportedSchema("items as a list")
        return _Every(list, self.compile(arg))

    def k_pattern(self, arg: str, schema: dict[str, Any]) -> _Check:
        return _Pattern(arg)

    def k_anyOf(self, arg: list[Any], schema: dict[str, Any]) -> _Check:
        return _Some([self.compile(sub) for sub in arg], False)

    def k_allOf(self, arg: list[Any], schema: dict[str, Any]) -> _Check:
        return _all_of([self.compile(sub) for sub in arg])

    def k_oneOf(self, arg: list[Any], schema: dict[str, Any]) -> _Check:
        return _Some([self.compile(sub) for sub in arg], True)

    def k_not(self, arg: Any, schema: dict[str, Any]) -> _Check:
        return _Not(self.compile(arg))

    def k_if(self, arg: Any, schema: dict[str, Any]) -> _Check:
        return _If(self.compile(arg), self.compile(schema.get("then", True)), self.compile(schema.get("else", True)))


# The keywords that bound a length: the type whose length, and whether the
# bound is the highest (else the lowest).
_SIZES: dict[str, tuple[type, bool]] = {
    "maxProperties": (dict, True), "minProperties": (dict, False), "maxItems": (list, True),
    "minItems": (list, False), "maxLength": (str, True), "minLength": (str, False),
}
# The other keywords a schema may use, each with the method that compiles it
# (properties, additionalProperties and required: _Compiler.object_check; the
# sizes above and the number bounds: _Compiler.keyword).
_KEYWORDS: dict[str, Callable[[_Compiler, Any, dict[str, Any]], _Check]] = {
    name[2:] if name != "k_ref" else "$ref": method
    for name, method in vars(_Compiler).items() if name.startswith("k_")
}


def _all_of(checks: list[_Check]) -> _Check:
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        return _Both(checks[0], checks[1])
    return _AllOf(checks)


def compile_schema(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """A predicate equivalent to jsonschema's is_valid for ``schema``."""
    return _Compiler(schema).compile(schema).ok
