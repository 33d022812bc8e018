"""A compiled accept-path check for the bundled JSON Schemas.

jsonschema is the validator of record: it produces every error report. It is
also slow to import (about half of the CLI's start-up) and costs tens to
hundreds of microseconds per document. This module compiles a schema, once,
into nested closures that only answer "valid or not" for the keywords the
bundled schemas use; when the answer is "not valid" the caller asks
jsonschema for the located problems. A keyword it does not implement makes
compilation fail, so a schema edit can never be silently half-checked, and a
differential test holds the two to the same answers.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["compile_schema", "UnsupportedSchema"]

Check = Callable[[Any], bool]

# The facets a `type` check takes in its own closure (Compiler.typed_check).
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


class _Compiler:
    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if not target.startswith("#/"):
            raise UnsupportedSchema(f"$ref {target}")
        if target not in self.refs:
            holder: list[Check] = []
            self.refs[target] = lambda value: holder[0](value)  # resolved below (recursive schemas)
            node: Any = self.root
            for raw in target[2:].split("/"):
                node = node[raw.replace("~1", "/").replace("~0", "~")]
            holder.append(self.compile(node))
        return self.refs[target]

    def compile(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return lambda value: True
        if schema is False:
            return lambda value: False
        checks: list[Check] = []
        object_keys = {"properties", "additionalProperties", "required"}
        if object_keys & schema.keys():
            checks.append(self.object_check(schema))
        folded: set[str] = set()
        if "type" in schema:
            # The type and the string and number facets in one closure (the
            # hot path of every scalar property).
            checks.append(self.typed_check(schema))
            folded = {"type", *_STRING_FACETS, *_NUMBER_FACETS}
        for key, arg in schema.items():
            if key in _ANNOTATIONS or key in object_keys or key in folded or key.startswith("x-") or key in ("then", "else"):
                continue
            maker = getattr(self, "k_" + key.lstrip("$"), None)
            if maker is None:
                raise UnsupportedSchema(key)
            checks.append(maker(arg, schema))
        return _all_of(checks)

    def object_check(self, schema: dict) -> Check:
        """properties + additionalProperties + required in one pass (the hot path)."""
        if "patternProperties" in schema:
            raise UnsupportedSchema("patternProperties")
        props = {name: self.compile(sub) for name, sub in schema.get("properties", {}).items()}
        extra_schema = schema.get("additionalProperties", True)
        extra = None if extra_schema is True else self.compile(extra_schema)
        required = tuple(schema.get("required", ()))
        if extra is None:
            # Other keys are free: look up the schema's few properties (an
            # `if` names one) rather than walk every key of the value.
            listed = tuple(props.items())

            def check_listed(value: Any) -> bool:
                if not isinstance(value, dict):
                    return True
                for name in required:
                    if name not in value:
                        return False
                for name, fn in listed:
                    if name in value and not fn(value[name]):
                        return False
                return True
            return check_listed

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for name in required:
                if name not in value:
                    return False
            for key, item in value.items():
                fn = props.get(key)
                if fn is not None:
                    if not fn(item):
                        return False
                elif not extra(item):  # additionalProperties (None took the path above)
                    return False
            return True
        return check

    def typed_check(self, schema: dict) -> Check:
        """``type`` with the string facets (maxLength, minLength, pattern) and
        the number facets (minimum, maximum and the exclusive ones) of the
        same schema. A value of an exact JSON type is answered in place; any
        other (an integral float, a subclass) takes the keywords one by one."""
        kinds = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        slow = _all_of([self.k_type(schema["type"], schema)]
                       + [getattr(self, "k_" + key)(schema[key], schema) for key in (*_STRING_FACETS, *_NUMBER_FACETS)
                          if key in schema])
        longest, shortest = schema.get("maxLength"), schema.get("minLength")
        regex = re.compile(schema["pattern"]) if "pattern" in schema else None
        low, high = schema.get("minimum"), schema.get("maximum")
        above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        strings = "string" in kinds
        ints = "integer" in kinds or "number" in kinds
        others = frozenset(t for kind in kinds if kind not in ("string", "integer", "number") for t in _EXACT[kind])
        if not any(key in schema for key in (*_STRING_FACETS, *_NUMBER_FACETS)) and not ("integer" in kinds and "number" not in kinds):
            return slow  # a bare type: k_type is already one closure

        def check(value: Any) -> bool:
            kind = type(value)
            if kind is str:
                if not strings:
                    return False
                return ((longest is None or len(value) <= longest) and (shortest is None or len(value) >= shortest)
                        and (regex is None or regex.search(value) is not None))
            if kind is int:
                if not ints:
                    return False
                return ((low is None or value >= low) and (high is None or value <= high)
                        and (above is None or value > above) and (below is None or value < below))
            if kind in others:
                return True
            return slow(value)
        return check

    # -- keywords ------------------------------------------------------------
    def k_ref(self, arg: str, schema: dict) -> Check:
        return self.ref(arg)

    def k_type(self, arg: Any, schema: dict) -> Check:
        kinds = [arg] if isinstance(arg, str) else list(arg)
        for kind in kinds:
            _is_type(None, kind)  # unknown type names fail compilation
        simple = {"object": dict, "array": list, "string": str}
        if all(kind in simple for kind in kinds):
            types = tuple(simple[kind] for kind in kinds)
            return lambda value: isinstance(value, types)
        # The exact types of parsed JSON answer at once; an integral float
        # (for "integer") and subclasses take the full test.
        exact = frozenset(t for kind in kinds for t in _EXACT[kind])
        integral = "integer" in kinds and "number" not in kinds

        def check(value: Any) -> bool:
            kind = type(value)
            if kind in exact:
                return True
            if kind is float and integral:
                return value.is_integer()
            for name in kinds:
                if _is_type(value, name):
                    return True
            return False
        return check

    def k_enum(self, arg: list, schema: dict) -> Check:
        strings = frozenset(option for option in arg if isinstance(option, str))
        others = [option for option in arg if not isinstance(option, str)]

        def check(value: Any) -> bool:
            if type(value) is str:
                return value in strings
            return any(_equal(value, option) for option in others)
        return check

    def k_const(self, arg: Any, schema: dict) -> Check:
        if isinstance(arg, str):  # what _equal answers for a string, without its type tests
            return lambda value: type(value) is str and value == arg
        return lambda value: _equal(value, arg)

    def k_properties(self, arg: dict, schema: dict) -> Check:
        compiled = {name: self.compile(sub) for name, sub in arg.items()}

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            return all(fn(value[name]) for name, fn in compiled.items() if name in value)
        return check

    def k_additionalProperties(self, arg: Any, schema: dict) -> Check:
        known = set(schema.get("properties", {}))
        if "patternProperties" in schema:
            raise UnsupportedSchema("patternProperties")
        extra = self.compile(arg)

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            return all(extra(item) for key, item in value.items() if key not in known)
        return check

    def k_propertyNames(self, arg: Any, schema: dict) -> Check:
        fn = self.compile(arg)
        return lambda value: not isinstance(value, dict) or all(fn(key) for key in value)

    def k_required(self, arg: list, schema: dict) -> Check:
        return lambda value: not isinstance(value, dict) or all(name in value for name in arg)

    def k_maxProperties(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, dict) or len(value) <= arg

    def k_minProperties(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, dict) or len(value) >= arg

    def k_items(self, arg: Any, schema: dict) -> Check:
        if isinstance(arg, list):
            raise UnsupportedSchema("items as a list")
        fn = self.compile(arg)

        def check(value: Any) -> bool:
            if isinstance(value, list):
                for item in value:
                    if not fn(item):
                        return False
            return True
        return check

    def k_maxItems(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, list) or len(value) <= arg

    def k_minItems(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, list) or len(value) >= arg

    def k_maxLength(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, str) or len(value) <= arg

    def k_minLength(self, arg: int, schema: dict) -> Check:
        return lambda value: not isinstance(value, str) or len(value) >= arg

    def k_pattern(self, arg: str, schema: dict) -> Check:
        regex = re.compile(arg)
        return lambda value: not isinstance(value, str) or regex.search(value) is not None

    def _number(self, test: Callable[[Any], bool]) -> Check:
        return lambda value: isinstance(value, bool) or not isinstance(value, (int, float)) or test(value)

    def k_minimum(self, arg: Any, schema: dict) -> Check:
        return self._number(lambda value: value >= arg)

    def k_maximum(self, arg: Any, schema: dict) -> Check:
        return self._number(lambda value: value <= arg)

    def k_exclusiveMinimum(self, arg: Any, schema: dict) -> Check:
        return self._number(lambda value: value > arg)

    def k_exclusiveMaximum(self, arg: Any, schema: dict) -> Check:
        return self._number(lambda value: value < arg)

    # Loops, not any()/all() over a generator: these run for every
    # connector of every document, and the generator costs more than the test.
    def k_anyOf(self, arg: list, schema: dict) -> Check:
        fns = [self.compile(sub) for sub in arg]

        def check(value: Any) -> bool:
            for fn in fns:
                if fn(value):
                    return True
            return False
        return check

    def k_allOf(self, arg: list, schema: dict) -> Check:
        return _all_of([self.compile(sub) for sub in arg])

    def k_oneOf(self, arg: list, schema: dict) -> Check:
        fns = [self.compile(sub) for sub in arg]
        return lambda value: sum(1 for fn in fns if fn(value)) == 1

    def k_not(self, arg: Any, schema: dict) -> Check:
        fn = self.compile(arg)
        return lambda value: not fn(value)

    def k_if(self, arg: Any, schema: dict) -> Check:
        condition = self.compile(arg)
        then = self.compile(schema.get("then", True))
        otherwise = self.compile(schema.get("else", True))
        return lambda value: then(value) if condition(value) else otherwise(value)


def _all_of(checks: list[Check]) -> Check:
    """All of ``checks`` (a loop, not all() over a generator: see k_anyOf)."""
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)

    def check_all(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True
    return check_all


def compile_schema(schema: dict[str, Any]) -> Check:
    """A predicate equivalent to jsonschema's is_valid for ``schema``."""
    return _Compiler(schema).compile(schema)
