"""The few Go template constructs controller presets put in container
commands (KServe's LLMInferenceServiceConfig): ``{{ .Spec.A.B }}``, ``{{ if
X }}...{{ else }}...{{ end }}``, ``or``/``and``/``not``, the functions a
caller supplies (``kvTransferConfig``, Sprig's ``default``), and pipelines of
them (``{{ .Values.tag | default "v1" }}``). Anything else renders as an
unresolved marker. Nothing is executed; a condition on a value the files do
not hold is taken as false (the flags such conditions add, TLS or parallel
sizes, are not read by the decision)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ...core.markers import unresolved

__all__ = ["render", "go_field"]

# An action ends at the first `}}` outside its quoted strings (`{{ "}}" }}` prints `}}`).
_ACTION = re.compile(r"""\{\{(-?)\s*((?:"(?:[^"\\]|\\.)*"|`[^`]*`|[^"`}]|\}(?!\}))*?)\s*(-?)\}\}""")
_WORDS = re.compile(r"`[^`]*`|\"(?:[^\"\\]|\\.)*\"|\(|\)|[^\s()]+")
_NAMES = {"KVCacheOffloading": "kvCacheOffloading"}
_UNKNOWN = object()  # what a command the renderer does not know gives: the action stays unresolved


def go_field(name: str) -> str:
    """The JSON name of a Go field (Kubernetes API conventions: lower camel case)."""
    return _NAMES.get(name) or name[:1].lower() + name[1:]


def render(text: str, data: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]) -> str:
    """``text`` with its actions rendered against ``data`` (``Spec``,
    ``ObjectMeta``, ``GlobalConfig`` as JSON-like values)."""
    out: list[str] = []
    stack: list[tuple[bool, bool]] = []  # per open `if`: (this branch renders, some branch rendered)
    position = 0
    for match in _ACTION.finditer(text):
        literal = text[position:match.start()]
        if match.group(1):
            literal = literal.rstrip()
        if all(active for active, _ in stack):
            out.append(literal)
        position = match.end()
        if match.group(3):
            while position < len(text) and text[position].isspace():
                position += 1
        body = match.group(2)
        head = body.split(None, 1)[0] if body else ""
        if head == "if":
            value = bool(_evaluate(body[2:].strip(), data, functions))
            stack.append((value, value))
        elif head == "else" and stack:
            rest = body[4:].strip()
            _, taken = stack.pop()
            value = not taken and (not rest.startswith("if") or bool(_evaluate(rest[2:].strip(), data, functions)))
            stack.append((value, taken or value))
        elif head == "end" and stack:
            stack.pop()
        elif body.startswith("/*") or head in ("range", "with", "define", "template", "block"):
            if head in ("range", "with"):
                stack.append((False, True))  # not read: its body renders nothing here
        elif all(active for active, _ in stack):
            value = _evaluate(body, data, functions)
            # A value the data does not hold is not guessed (Go would print `<no value>`).
            out.append(value if isinstance(value, str) else (unresolved("{{ " + body[:40] + " }}") if value is None
                                                             else _text(value)))
    if all(active for active, _ in stack):
        out.append(text[position:])
    return "".join(out)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _evaluate(expression: str, data: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]) -> Any:
    words = _WORDS.findall(expression)
    if not words:
        return None
    commands: list[list[str]] = [[]]
    for word in words:  # a pipeline: each command's value is the next one's last argument
        if word == "|":
            commands.append([])
        else:
            commands[-1].append(word)
    if "(" in words or not all(commands):
        return unresolved("{{ " + expression[:40] + " }}")
    value = _command(commands[0], data, functions, ())
    for command in commands[1:]:
        value = value if value is _UNKNOWN else _command(command, data, functions, (value,))
    return unresolved("{{ " + expression[:40] + " }}") if value is _UNKNOWN else value


def _command(words: list[str], data: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]],
             piped: tuple[Any, ...]) -> Any:
    head, args = words[0], [*(_operand(w, data) for w in words[1:]), *piped]
    if head.startswith(".") or head[:1] in "\"`" or head.isdigit():
        return _UNKNOWN if piped else _operand(head, data)
    if head == "or":
        return next((a for a in args if a), args[-1] if args else None)
    if head == "and":
        return next((a for a in args if not a), args[-1] if args else None)
    if head == "not":
        return not args[0] if args else True
    if head in functions:
        return functions[head](*args)
    return _UNKNOWN


def _operand(word: str, data: Mapping[str, Any]) -> Any:
    if word[:1] in "\"`":
        return word[1:-1]
    if re.fullmatch(r"-?\d+", word):
        return int(word)
    if word.startswith("."):
        value: Any = data
        for part in word[1:].split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part) if part in value else value.get(go_field(part))
        return value
    return None
