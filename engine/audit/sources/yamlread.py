"""YAML with anchors, aliases and merge keys (``<<: *defaults``), for the
formats whose files use them (docker compose's ``x-`` extension fields).

The engine's own reader (core/yamlsafe.py) refuses anchors; this one reads
them with the same care: libyaml's events walked with an explicit stack
(depth bounded), only JSON types built (no tag constructs an object),
timestamps kept as text, and aliases bounded: an alias is the anchored value
itself, not a copy, and the values a document reaches through its aliases
are counted, so an alias bomb is refused before anything walks it. It also
gives the line of each mapping key by JSON Pointer (a compose service's
line is its key's).
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlError", "load"]

try:
    _Parser: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Parser = yaml.SafeLoader

_TAGS = {"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
         "tag:yaml.org,2002:str"}
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


class YamlError(Exception):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message, self.line = message, line


def _scalar(event: yaml.ScalarEvent) -> Any:
    tag = event.tag
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag not in _TAGS:  # timestamps, binary, custom tags (compose's !reset): the text as written
        return event.value
    try:
        return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, event.value))
    except ValueError:
        return event.value


class _Open:
    __slots__ = ("value", "path", "key", "anchor", "size", "merges")

    def __init__(self, value: Any, path: str, anchor: str | None):
        self.value, self.path, self.anchor = value, path, anchor
        self.key: Any = _NO_KEY
        self.size = 1
        self.merges: list[Any] = []


_NO_KEY = object()
_MERGE = "<<"


def _escape(part: Any) -> str:
    return "/" + str(part).replace("~", "~0").replace("/", "~1")


def load(text: str, *, max_depth: int = 256, max_values: int = 1_000_000,
         marks: dict[str, tuple[int, int]] | None = None) -> tuple[Any, dict[str, int]]:
    """The first YAML document of ``text`` as JSON data, and the line of
    each mapping key by the pointer of its value. ``marks``, when given, is
    filled with the (line, column) where each value starts, by its pointer,
    as core/yamlsafe.py gives them (a value reached through an alias: the
    alias's). Raises YamlError."""
    loader = _Parser(text)
    anchors: dict[str, tuple[Any, int]] = {}
    lines: dict[str, int] = {}
    stack: list[_Open] = []
    total = 0
    root: Any = None
    done = False
    try:
        while not done:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.DocumentEndEvent):
                break
            if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent, yaml.StreamEndEvent)):
                continue
            mark = event.start_mark  # (the parser gives every event its place)
            line = mark.line + 1
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= max_depth:
                    raise YamlError(f"nested deeper than {max_depth} levels", line)
                path = _path(stack)
                if marks is not None:
                    marks[path] = (line, mark.column + 1)
                stack.append(_Open({} if isinstance(event, yaml.MappingStartEvent) else [], path, event.anchor))
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                top = stack.pop()
                if top.merges:  # `<<: *defaults`: keys the mapping does not set itself
                    for merged in top.merges:
                        for key, value in merged.items():
                            top.value.setdefault(key, value)
                value, size = top.value, top.size
                if top.anchor:
                    anchors[top.anchor] = (value, size)
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:
                    raise YamlError(f"the alias `*{event.anchor}` names no anchor before it", line)
                value, size = anchors[event.anchor]
            else:
                value, size = _scalar(event), 1
                if event.anchor:
                    anchors[event.anchor] = (value, 1)
            total += size
            if total > max_values:
                raise YamlError(f"holds more than {max_values} values through its aliases", line)
            if marks is not None and not isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)) \
                    and not (stack and isinstance(stack[-1].value, dict) and stack[-1].key is _NO_KEY):
                marks[_path(stack)] = (line, event.start_mark.column + 1)  # a scalar's or an alias's (not a key's)
            if not stack:
                root, done = value, True
                continue
            top = stack[-1]
            top.size += size
            if isinstance(top.value, list):
                top.value.append(value)
            elif top.key is _NO_KEY:
                if not isinstance(value, (str, int, float, bool)) or value is None:
                    raise YamlError("a mapping key must be a scalar", line)
                top.key = value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
                lines[top.path + _escape(top.key)] = line
            else:
                if top.key == _MERGE and isinstance(event, (yaml.AliasEvent, yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                    top.merges += [value] if isinstance(value, dict) else [m for m in value if isinstance(m, dict)] \
                        if isinstance(value, list) else []
                elif top.key in top.value:
                    raise YamlError(f"key `{top.key}` appears twice in one mapping", lines.get(top.path + _escape(top.key)))
                else:
                    top.value[top.key] = value
                top.key = _NO_KEY
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = str(getattr(exc, "problem", None) or str(exc).splitlines()[0])
        raise YamlError(problem, mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    return root, lines


def _path(stack: list[_Open]) -> str:
    if not stack:
        return ""
    top = stack[-1]
    if isinstance(top.value, list):
        return top.path + _escape(len(top.value))
    return top.path + _escape(top.key)
