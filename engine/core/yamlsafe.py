"""Reading YAML safely and fast: one iterative builder over libyaml's events.

Why not yaml.safe_load: PyYAML's composer is recursive (deep nesting ends in
RecursionError, and in the C extension in C-stack recursion), it expands
aliases (alias bombs), silently keeps the last of duplicate keys, and turns
timestamps into datetime objects that JSON cannot hold. This builder walks the
event stream with an explicit stack, refuses anchors and aliases, refuses
duplicate keys, bounds the depth, keeps timestamps as strings, records the
line and column of every value by JSON Pointer, and never constructs an
object from a tag (only the JSON types).
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlProblem", "load"]

try:  # libyaml's parser when present (it is in the PyPI wheels), else PyYAML's own
    _Parser: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Parser = yaml.SafeLoader


class YamlProblem(Exception):
    """A YAML text that cannot be read as JSON data; ``line``/``column`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, *,
                 limit: bool = False, duplicate: str | None = None, anchored: bool = False, tagged: bool = False,
                 keyed: bool = False):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.limit = limit
        self.duplicate = duplicate  # the key a mapping gives twice
        self.anchored = anchored  # refused only for an anchor or alias (the audit reads those of other formats)
        self.tagged = tagged  # refused for a tag other than JSON's (`!ENV`, `!!python/name:`)
        self.keyed = keyed  # refused for a key that is a number, a boolean or null (`1: mkdocs.yml`)


class _Resolver(yaml.resolver.Resolver):
    """YAML 1.1 implicit types, without timestamps (JSON has no dates)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    }


_RESOLVER = _Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_SCALAR_TAGS = {
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float", "tag:yaml.org,2002:str",
}


def _escape(part: Any) -> str:
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


# Events that only open or close the stream or the document.
_FRAME_EVENTS = (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)


# Short scalars already read, by (tag, text, implicit): a rules folder
# repeats its words (operators, step names, true), and reading one runs YAML
# 1.1's regular expressions. Only JSON scalars, which are immutable, are
# kept, and only short ones: a document's long strings are not held.
_READ: dict[tuple[Any, str, Any], Any] = {}
_READ_LIMIT = 8_192
_READ_LENGTH = 64


def _scalar(event: yaml.ScalarEvent) -> Any:
    if len(event.value) > _READ_LENGTH:
        return _construct(event)
    key = (event.tag, event.value, event.implicit)
    value = _READ.get(key, _READ)  # (the dict itself: no scalar is it)
    if value is not _READ:
        return value
    value = _construct(event)
    if len(_READ) >= _READ_LIMIT:
        _READ.clear()
    _READ[key] = value
    return value


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct(event: yaml.ScalarEvent) -> Any:
    tag = event.tag
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _MERGE_TAG:  # `<<:` (a merge key, `<<: {image: ...}` or `<<: &a {...}` as `<<: *a`): anchors' kin
        raise YamlProblem("YAML merge keys (`<<`) are not allowed", *_start(event), anchored=True)
    if tag not in _SCALAR_TAGS:
        raise YamlProblem(f"the tag `{tag}` is not allowed; only JSON types can be read", *_start(event), tagged=True)
    # (The C parser's marks are yaml._yaml.Mark, which the stubs do not list for a node; a node only holds them.)
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]
    try:
        # The tag's constructor directly: construct_object would remember
        # every node in the shared constructor, for ever.
        return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
    except ValueError:  # Python's limit on the digits of an integer
        raise YamlProblem("a number has too many digits", *_start(event), limit=True) from None


def _start(event: yaml.Event) -> tuple[int | None, int | None]:
    """The 1-based line and column where an event starts (the parser marks every event it makes)."""
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def load(text: str, *, max_depth: int = 256, marks: bool = False,
         untagged: bool = False, repeated: bool = False) -> tuple[Any, dict[str, tuple[int, int]]]:
    """Parse one YAML document into JSON data, and (when ``marks``) the
    (line, column) of every value by JSON Pointer. Raises YamlProblem.
    ``untagged``: a value with a tag other than JSON's is read as if it had
    none, a scalar as its text, and so is a key that is no string (only to
    tell what another tool's file is). ``repeated``: a key given twice keeps
    its last value (an unrendered template, whose `if` and `else` both give it)."""
    loader = _Parser(text)
    where: dict[str, tuple[int, int]] = {}
    # Each open container: [value, pointer, pending key (mappings) or next index (sequences), key mark]
    stack: list[list[Any]] = []
    root: Any = None
    documents = 0
    try:
        while True:
            event = loader.get_event()
            if event is None:
                break
            kind = type(event)
            if kind is yaml.ScalarEvent:  # first: most events are
                mark = event.start_mark
                if event.anchor:
                    raise YamlProblem("YAML anchors and aliases are not allowed", mark.line + 1, mark.column + 1,
                                      anchored=True)
                value = event.value if untagged and event.tag not in (None, "!") and event.tag not in _SCALAR_TAGS \
                    else _scalar(event)
                if not stack:
                    root = value
                    if marks:
                        where[""] = (mark.line + 1, mark.column + 1)
                    continue
                top = stack[-1]
                if type(top[0]) is dict and top[2] is _NO_KEY:
                    if not isinstance(value, str) and untagged:
                        value = event.value
                    elif not isinstance(value, str):
                        raise YamlProblem(f"mapping keys must be strings, got `{event.value}`", mark.line + 1, mark.column + 1,
                                          keyed=True)
                    if value in top[0] and not repeated:
                        raise YamlProblem(f"key `{value}` appears twice in one mapping", mark.line + 1, mark.column + 1,
                                          duplicate=value)
                    top[2] = value
                    continue
                _place(stack, value, where, marks, (mark.line + 1, mark.column + 1))
                continue
            if kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    mark = event.start_mark
                    raise YamlProblem("more than one YAML document; one is expected", mark.line + 1, mark.column + 1)
                continue
            if kind in _FRAME_EVENTS:
                continue
            mark = event.start_mark
            if kind is yaml.AliasEvent or getattr(event, "anchor", None):
                raise YamlProblem("YAML anchors and aliases are not allowed", mark.line + 1, mark.column + 1,
                                  anchored=True)
            if kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value, _, _, _ = stack.pop()
                _place(stack, value, where, marks, None)
                if not stack:
                    root = value
                continue
            if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if event.tag not in (None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq") and not untagged:
                    raise YamlProblem(f"the tag `{event.tag}` is not allowed; only JSON types can be read", mark.line + 1,
                                      mark.column + 1, tagged=True)
                if len(stack) >= max_depth:
                    raise YamlProblem(f"nested deeper than {max_depth} levels", mark.line + 1, mark.column + 1, limit=True)
                path = _child_path(stack, mark)
                if marks:
                    where[path] = (mark.line + 1, mark.column + 1)
                container: Any = {} if kind is yaml.MappingStartEvent else []
                stack.append([container, path, _NO_KEY if kind is yaml.MappingStartEvent else 0, None])
                continue
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = str(getattr(exc, "problem", None) or str(exc).splitlines()[0])
        # PyYAML's context names the construct the problem broke and where it
        # starts ("while parsing a flow mapping" at the `{` never closed):
        # often the real mistake, lines before the problem's own mark.
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None and getattr(exc, "problem", None):
            problem += f" ({context} at line {start.line + 1}, column {start.column + 1})"
        raise YamlProblem(problem, mark.line + 1 if mark else None, mark.column + 1 if mark else None,
                          limit="nesting depth" in problem) from None
    finally:
        loader.dispose()
    return root, where


class _NoKey:
    pass


_NO_KEY = _NoKey()


def _child_path(stack: list[list[Any]], mark: Any) -> str:
    """The JSON Pointer of a collection that starts at ``mark``."""
    if not stack:
        return ""
    container, path, slot, _ = stack[-1]
    if isinstance(container, dict):
        if slot is _NO_KEY:  # a collection used as a mapping key (`{{ ... }}`, a template's, is one)
            raise YamlProblem("mapping keys must be strings, got a mapping or a list", mark.line + 1, mark.column + 1)
        return path + _escape(slot)
    return path + _escape(slot)


def _place(stack: list[list[Any]], value: Any, where: dict, marks: bool, mark: tuple[int, int] | None) -> None:
    if not stack:
        return
    top = stack[-1]
    container = top[0]
    if isinstance(container, dict):
        key = top[2]
        if key is _NO_KEY:
            raise YamlProblem("mapping keys must be strings")
        if marks and mark is not None:
            where[top[1] + _escape(key)] = mark
        container[key] = value
        top[2] = _NO_KEY
    else:
        if marks and mark is not None:
            where[top[1] + _escape(top[2])] = mark
        container.append(value)
        top[2] += 1
