"""A vLLM command line, read as vLLM reads it, into a deployment document.

:func:`read_command` takes the words of a command that starts vLLM's
OpenAI server (``vllm serve MODEL ...`` or ``python -m
vllm.entrypoints.openai.api_server ...``) and returns the deployment
document the decision reads, with the problems that stop it (vLLM would
refuse the command, or a value is not known) and notes that do not.

vLLM's own argument handling is reproduced where it changes what the
decision sees (``vllm/utils/argparse_utils.py``, FlexibleArgumentParser):

- a ``--config FILE`` (YAML) is read and its options are put before the
  command line, so the command line wins (cli > config > defaults); a
  ``false`` in the file becomes ``--no-KEY`` only when that option exists;
- ``_`` is read as ``-`` in option names (``--kv_transfer_config``);
- dotted options (``--kv-transfer-config.kv_role kv_both``, ``KEY+ a,b``
  for lists) are merged into one JSON value placed last;
- ``--no-X`` and ``--X=VALUE`` forms; the last occurrence of an option wins;
- argparse expands a unique prefix of an option (noted).

Nothing is executed, imported or read from the file system here: a
``--config`` file is read only through the caller's ``read_config``.

A word may carry where it came from (an :class:`Arg`), which the document's
``origins`` then name. A value the caller could not know (a shell variable
set elsewhere) is written into a word as an *unresolved marker*
(:func:`unresolved`): an option whose value holds one is reported, not
decided.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import InputError, Problem, suggest
from .input import parse_text
from .schema import load_schema, pointer
from ..fileio import open_regular

__all__ = ["Arg", "ConfigFile", "CommandResult", "VllmOptions", "DEFAULT_OPTIONS", "read_command", "find_vllm",
           "unresolved", "has_unresolved", "show", "ENV_NAMES", "DECISION_OPTIONS", "command_document"]


class Arg(NamedTuple):
    """One word of a command line and where it came from (``line 12``,
    ``ConfigMap cfg key serve.yaml``): the origin is what a report shows."""

    text: str
    origin: str = "command line"


class ConfigFile(NamedTuple):
    """What ``read_config`` returns for a ``--config`` file: its text, and
    how to name it in messages and origins (a path, ``ConfigMap c key k``)."""

    text: str
    shown: str


@dataclass(frozen=True)
class VllmOptions:
    """The option strings of one vLLM release.

    ``accepted`` is every option string the release's ``vllm serve`` accepts
    (``--kv-transfer-config``, ``--no-enable-prefix-caching``, ...); None
    when not known, and then only the options the decision reads are known:
    an option is refused only when it is a near-certain misspelling of one
    of them, and ``neighbours`` lists real options that look alike.
    ``boolean_optional`` are the keys (``disable-hybrid-kv-cache-manager``)
    of argparse BooleanOptionalAction options, which have a ``--no-KEY``
    form; a config file's ``KEY: false`` becomes ``--no-KEY`` only for those.
    ``flags`` are the accepted options that take no value (used only with
    ``accepted``).
    """

    release: str = "0.33.0"
    accepted: frozenset[str] | None = None
    flags: frozenset[str] = frozenset()
    boolean_optional: frozenset[str] = frozenset({"disable-hybrid-kv-cache-manager"})
    neighbours: frozenset[str] = frozenset({
        "--ec-transfer-config", "--kv-cache-dtype", "--kv-cache-memory-bytes", "--kv-sharing-fast-prefill",
        "--kernel-config", "--profiler-config", "--reasoning-config", "--attention-config", "--compilation-config"})


# vLLM 0.33.0's options as far as the decision needs them.
DEFAULT_OPTIONS = VllmOptions()


@dataclass(frozen=True)
class CommandResult:
    """What a command line says: the deployment ``document`` (None when
    ``problems`` stop it), ``model`` (vLLM's model argument, when known),
    located ``problems`` (the deployment is an input error) and ``notes``
    (things a reader should know that do not stop the decision), and
    ``origins``: each document field and where its value came from."""

    document: dict[str, Any] | None
    model: Arg | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[Problem, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()
    configs: tuple[str, ...] = ()   # the --config file read, as read_config named it


# -- the document's vocabulary ---------------------------------------------------------

_SCHEMA = load_schema("deployment")
# The environment variables the decision reads (declared in the schema). Only
# these are copied from a command's environment: others (tokens, keys) never
# enter a document, a report or a log.
ENV_NAMES = frozenset(_SCHEMA["properties"]["env"]["properties"])

# vLLM options that feed the decision: option string -> (document field, kind).
# `--hisparse-config` follows the document's `hisparse-config` spelling.
_VALUE_OPTIONS = {
    "--kv-transfer-config": ("kv_transfer_config", "json"),
    "--kv-events-config": ("kv_events_config", "json"),
    "--speculative-config": ("speculative_config", "json"),
    "-sc": ("speculative_config", "json"),
    "--hisparse-config": ("hisparse_config", "json"),
    "--kv-offloading-size": ("kv_offloading_size", "number"),
    "--kv-offloading-backend": ("kv_offloading_backend", "str"),
    "--model": ("model", "str"),
}
# argparse.BooleanOptionalAction options: flag -> (field, value).
_FLAG_OPTIONS = {
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", True),
    "--no-disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", False),
}
# Every option the decision reads.
DECISION_OPTIONS = tuple(_VALUE_OPTIONS) + tuple(_FLAG_OPTIONS)
# Modules run with `python -m` that start a vLLM engine from vLLM's own arguments: the OpenAI server, and
# NVIDIA Dynamo's vLLM worker (which takes vLLM's engine arguments, the model by `--model`).
_API_SERVER_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "dynamo.vllm"})


# -- unresolved values ------------------------------------------------------------------

# An unresolved reference, kept in the text so that an option whose value
# holds one is reported instead of decided: NUL, the name as written, then
# optionally SOH and why it is not known. NUL never occurs in a command line
# (argv strings cannot hold it), so a marker cannot be forged by one.
_UNRESOLVED = re.compile("\x00([^\x00\x01]*)(?:\x01([^\x00]*))?\x00")


def unresolved(name: str, reason: str | None = None) -> str:
    """The marker of a value not known, shown as ``name`` (``$KV``,
    ``$(...)``); ``reason`` completes "which ..." ("is set at run time by
    `read` at line 3") where "this file does not set" would not be true."""
    name = name.replace("\x00", "").replace("\x01", "")
    return f"\x00{name}\x01{reason}\x00" if reason else f"\x00{name}\x00"


def has_unresolved(text: str) -> bool:
    return "\x00" in text and bool(_UNRESOLVED.search(text))


def unresolved_names(text: str) -> list[str]:
    """The references in ``text``, each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in _UNRESOLVED.finditer(text)))


def _references(text: str, *, whole: bool = False) -> str:
    """The references of ``text`` for a message, "`$KV`, which this file does
    not set", or with the reasons they carry; ``whole``: the whole text shown
    (a path that holds one)."""
    found = dict.fromkeys((m.group(1), m.group(2)) for m in _UNRESOLVED.finditer(text))
    reasons = [f"`{name}` {reason}" if whole else reason for name, reason in found if reason]
    if whole:
        return f"`{show(text)}`, " + ("; ".join(f"where {r}" for r in reasons) if reasons else "which this file does not set")
    if not reasons:
        return ", ".join(f"`{name}`" for name, _ in found) + ", which this file does not set"
    return ", ".join(f"`{name}` (which {reason or 'this file does not set'})" for name, reason in found)


def show(text: str, limit: int | None = 120) -> str:
    """A value for a message: unresolved references shown as written, at
    most ``limit`` characters (None: all of it)."""
    text = _UNRESOLVED.sub(lambda m: m.group(1), text)
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


# -- finding vLLM in a command ------------------------------------------------------------

def find_vllm(words: Sequence[str]) -> tuple[int, bool] | None:
    """Where vLLM's own arguments start in a command's words, and whether
    they start with the ``serve`` subcommand: ``vllm serve ...`` gives the
    index of ``serve``; ``python -m vllm.entrypoints.openai.api_server ...``
    the index after the module. None when the words run no vLLM server."""
    python = False  # a python interpreter came before
    for i, word in enumerate(words):
        base = word.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return i + 1, True
        if word == "-m" and python and i + 1 < len(words) and words[i + 1] in _API_SERVER_MODULES:
            return i + 2, False
        python = python or bool(_PYTHON.fullmatch(base))
    return None


_PYTHON = re.compile(r"python[0-9.]*")


# -- reading a command --------------------------------------------------------------------

@dataclass
class _Reading:
    """The state of one read_command call: where problems are located and
    what they are."""

    file: str | None
    line: int | None
    options: VllmOptions
    read_config: Callable[[str], str | ConfigFile] | None
    require_model: bool
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)

    def problem(self, code: str, message: str, *, path: str = "", hint: str | None = None) -> Problem:
        return Problem(code, message, path, hint, file=self.file, line=self.line)

    def fail(self, code: str, message: str, **kw: Any) -> None:
        self.problems.append(self.problem(code, message, **kw))

    def note(self, code: str, message: str, **kw: Any) -> None:
        self.notes.append(self.problem(code, message, **kw))


def read_command(argv: Sequence[str | Arg], *, env: Mapping[str, str | Arg] | None = None,
                 read_config: Callable[[str], str | ConfigFile] | None = None,
                 options: VllmOptions | None = None, file: str | None = None, line: int | None = None,
                 require_model: bool = True) -> CommandResult:
    """The deployment document of a vLLM server command line. Never raises
    for any argv.

    ``argv``: the command's words, from the program on (``["vllm", "serve",
    "Qwen/Qwen3-8B", "--kv-transfer-config", "{...}"]``, ``["python3", "-m",
    "vllm.entrypoints.openai.api_server", ...]``); a word may be an
    :class:`Arg` that says where it came from. ``env``: the environment the
    command runs with; only the variables the decision reads are copied into
    the document. ``read_config(name)``: the text of the ``--config`` file
    ``name`` (or a :class:`ConfigFile`); it raises :class:`InputError` to
    refuse it (missing, outside where it may be read), and when it is None
    no config file can be read. ``options``: the option strings of the vLLM
    release (default: 0.33.0's, as far as the decision needs them).
    ``file`` and ``line`` locate the problems. ``require_model=False``: a
    command without a model is not refused (a config file read alone).
    """
    reading = _Reading(file, line, options or DEFAULT_OPTIONS, read_config, require_model)
    words = [w if isinstance(w, Arg) else Arg(w) for w in argv]
    located = find_vllm([w.text for w in words])
    if located is None:
        reading.fail("source.not_vllm", "the command does not start vLLM's server: expected `vllm serve ...` or "
                     "`python -m vllm.entrypoints.openai.api_server ...`")
        return CommandResult(None, None, tuple(reading.problems))
    start, serve = located
    return _read(reading, words[start:], serve, env or {})


def _read(reading: _Reading, args: list[Arg], serve: bool, env: Mapping[str, str | Arg]) -> CommandResult:
    tokens, model = _vllm_tokens(reading, args, serve)
    found, loose = _read_options(reading, tokens)
    document: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if model is None and "model" in found:  # `--model` from a config file, or for the api_server entry point
        value, origin, _ = found["model"]
        model = Arg(value, origin)
    for field_name, (value, origin, option) in found.items():
        if field_name == "model":
            continue
        if isinstance(value, str) and has_unresolved(value):
            unread = _unread_json(field_name, value) if _VALUE_OPTIONS[option][1] == "json" else None
            if unread is None:
                reading.fail("source.unresolved", f"`{option}` takes its value from {_references(value)}",
                             path=pointer([field_name]),
                             hint="give its value in `env`, or write it in the command" if reading.file is None
                             else "the audit reads files and never runs them; write the value in the file")
                continue
            value, unread_at = unread
            held = "; ".join(f"{_references(text)} at `{at}`" for at, text in unread_at)
            reading.note("source.unresolved_unused", f"`{option}` holds {held}; the decision does not read "
                         + ("that value" if len(unread_at) == 1 else "those values"), path=pointer([field_name]))
        document[field_name] = _number(value) if field_name == "kv_offloading_size" else value
        origins[field_name] = f"{origin}: {option}"
    if model is not None and has_unresolved(model.text):
        reading.note("source.unresolved_unused", f"the model is {_references(model.text, whole=True)}; "
                     "the decision does not read the model's name")
    elif model is not None:
        document["model"] = {"name": model.text}
        origins["model"] = model.origin
    _loose_notes(reading, loose)
    command_env: dict[str, Any] = {}
    for name, item in sorted(env.items()):
        if name not in ENV_NAMES:
            continue
        value, origin = (item.text, item.origin) if isinstance(item, Arg) else (item, "environment")
        if has_unresolved(value):
            reading.fail("source.unresolved", f"the environment variable `{name}` takes its value from "
                         f"{_references(value, whole=True)}", path=pointer(["env", name]))
            continue
        command_env[name] = value
        origins["env"] = origin
    if command_env:
        document["env"] = command_env
    return CommandResult(None if reading.problems else document, model, tuple(reading.problems), tuple(reading.notes),
                         tuple(origins.items()), tuple(reading.configs))


class _Read(Exception):
    """An unresolved value where the decision reads it."""


def _unread_json(field_name: str, value: str) -> tuple[str, list[tuple[str, str]]] | None:
    """A JSON option whose unresolved values all sit where the decision
    does not read them (an engine_id, a proxy address in
    kv_connector_extra_config): the value with each shown as written, and
    where each was (a JSON Pointer in the option, and the string). None when
    one of them is read, or the value is not JSON.

    What the decision reads comes from the document's schema. Inside a JSON
    string, an unresolved value is read where the schema constrains the
    string's text (an enum, a pattern); elsewhere the value is a string
    whatever it holds (the schema accepts it, or refuses any string). A
    value written bare (``"port": $PORT``) is read unless the schema knows
    nothing of its key (a key of ``kv_connector_extra_config``).
    """
    try:
        parsed = json.loads(_quote_bare_markers(value), strict=False)  # markers are control characters
    except (ValueError, RecursionError):
        return None
    unread: list[tuple[str, str]] = []
    try:
        shown = _walk_unread(parsed, _SCHEMA["properties"].get(field_name), [], unread)
    except (_Read, RecursionError):
        return None
    return json.dumps(shown), unread


def _walk_unread(node: Any, schema: Any, path: list[Any], unread: list[tuple[str, str]]) -> Any:
    """``node`` with each unresolved string the decision does not read shown
    as written (and listed in ``unread``); raises _Read at one it reads."""
    if isinstance(node, str):
        if not has_unresolved(node):
            return node
        bare = node.startswith(_BARE)
        if bare:
            node = node[len(_BARE):]
        if (schema is not None) if bare else _constrained(schema):
            raise _Read
        unread.append((pointer(path), node))
        return show(node, None)
    if isinstance(node, dict):
        properties = _schema_properties(schema)
        if any(has_unresolved(k) for k in node):
            raise _Read
        return {k: _walk_unread(v, properties.get(k), path + [k], unread) for k, v in node.items()}
    if isinstance(node, list):
        items = _schema_items(schema)
        return [_walk_unread(v, items, path + [i], unread) for i, v in enumerate(node)]
    return node


def _schema_parts(schema: Any) -> list[dict[str, Any]]:
    """A schema and every schema that applies with it ($ref, allOf, the then of an if)."""
    out: list[dict[str, Any]] = []
    stack = [schema]
    seen: set[int] = set()
    while stack:
        part = stack.pop()
        if not isinstance(part, dict) or id(part) in seen:
            continue
        seen.add(id(part))
        out.append(part)
        if isinstance(part.get("$ref"), str) and part["$ref"].startswith("#/$defs/"):
            stack.append(_SCHEMA.get("$defs", {}).get(part["$ref"][len("#/$defs/"):]))
        stack += [part.get("then"), part.get("else")]
        for key in ("allOf", "anyOf", "oneOf"):
            stack += part.get(key) or []
    return out


def _schema_properties(schema: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for part in _schema_parts(schema):
        for key, sub in (part.get("properties") or {}).items():
            properties.setdefault(key, sub)
    return properties


def _schema_items(schema: Any) -> Any:
    return next((part["items"] for part in _schema_parts(schema) if "items" in part), None)


def _constrained(schema: Any) -> bool:
    """Whether the schema reads a string's text (not only that it is a string)."""
    return any(key in part for part in _schema_parts(schema) for key in ("enum", "const", "pattern"))


# What marks a value written bare in JSON (outside a string) once it is quoted to be parsed.
_BARE = "\x02"


def _quote_bare_markers(text: str) -> str:
    """JSON text with each unresolved marker outside a string made a string (marked as bare)."""
    if "\x00" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    start = 0
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "\x00":
            end = text.find("\x00", i + 1)
            if end < 0:
                break
            out += [text[start:i], '"', _BARE, text[i:end + 1], '"']
            i = start = end + 1
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


_SCRIPT_ARGUMENT = re.compile(r"\$(?:[@*]|[0-9]+|\{[0-9]+\}|\{[@*]\})")


def _loose_notes(reading: _Reading, loose: list[tuple[str | None, Arg]]) -> None:
    """Notes for the unresolved values the decision does not read."""
    script_arguments = False
    for option, word in loose:
        names = unresolved_names(word.text)
        if option is not None:
            reading.note("source.unresolved_unused", f"`{option}` takes its value from {_references(word.text)}; "
                         "the decision does not read it")
        elif len(names) == 1 and _UNRESOLVED.fullmatch(word.text):
            # A whole word from a variable: it may hold any number of arguments, options included.
            if _SCRIPT_ARGUMENT.fullmatch(names[0]):
                if not script_arguments:
                    reading.note("source.script_arguments", "the command also takes the script's own arguments "
                                 "(`$@`); only the options written here are read")
                script_arguments = True
            else:
                reading.note("source.unresolved_arguments", f"the command also takes {_references(word.text)}; "
                             "only the options written here are read, and it may hold others")
        else:
            reading.note("source.unresolved_unused", f"the argument {_references(word.text, whole=True)}; "
                         "the decision does not read it")


def _vllm_tokens(reading: _Reading, args: list[Arg], serve: bool) -> tuple[list[Arg], Arg | None]:
    """vLLM's FlexibleArgumentParser.parse_args up to argparse: --model moved
    first, --config pulled in, `_` in option names read as `-`, dotted
    options merged into one JSON value placed last. Returns the tokens and the
    model."""
    model: Arg | None = None
    if serve:
        rest = args[1:]
        for i, tok in enumerate(rest):
            if tok.text == "--model" or tok.text.startswith("--model="):
                if tok.text == "--model":
                    if i + 1 >= len(rest) or rest[i + 1].text.startswith("-"):
                        reading.fail("source.missing_value", "`--model` has no value")
                        break
                    model, rest = rest[i + 1], rest[:i] + rest[i + 2:]
                else:
                    model, rest = Arg(tok.text[len("--model="):], tok.origin), rest[:i] + rest[i + 1:]
                break
        else:
            if rest and not rest[0].text.startswith("-"):
                model, rest = rest[0], rest[1:]
        args = rest
    texts = [t.text for t in args]
    if "--config" in texts:
        if texts.count("--config") > 1:
            reading.fail("source.config_multiple", "more than one `--config` file is given; vLLM refuses this")
        else:
            index = texts.index("--config")
            if index == len(args) - 1:
                reading.fail("source.missing_value", "`--config` has no file; vLLM refuses this")
                args = args[:index]
            else:
                config_tokens = _pull_config(reading, args[index + 1].text)
                config_model = next((config_tokens[i + 1] for i, t in enumerate(config_tokens[:-1]) if t.text == "--model"), None)
                if serve and reading.require_model and model is None and config_model is None and not reading.problems:
                    reading.fail("source.no_model", "no model is given, neither on the command line "
                                 "nor in the config file; vLLM refuses this")
                model = model or config_model
                # The config's arguments come first: the command line wins (cli > config > defaults).
                args = config_tokens + args[:index] + args[index + 2:]
    elif any(t.startswith("--config=") for t in texts):
        reading.note("source.config_ignored", "vLLM reads a config file only from `--config FILE`; "
                     "`--config=FILE` is accepted and ignored")
    # Option names: `_` is `-` between the leading `--` and the first `.`.
    normal: list[Arg] = []
    for tok in args:
        text = tok.text
        if text.startswith("--"):
            key, eq, value = text.partition("=")
            head, dot, tail = key[2:].partition(".")
            text = "--" + head.replace("_", "-") + dot + tail + eq + value
        normal.append(Arg(text, tok.origin))
    return _merge_dotted(reading, normal), model


def _merge_dotted(reading: _Reading, normal: list[Arg]) -> list[Arg]:
    """Dotted options, --json-arg.key value, merged per option and appended last."""
    out: list[Arg] = []
    dotted: dict[str, tuple[dict[str, Any], str]] = {}
    skip = False
    for i, tok in enumerate(normal):
        if skip:
            skip = False
            continue
        text = tok.text
        if not (text.startswith("-") and "." in text):
            out.append(tok)
            continue
        key, eq, value = text.partition("=")
        if eq and "." not in key:
            out.append(tok)  # the `.` was only in the value
            continue
        if not eq:
            if i + 1 >= len(normal):
                reading.fail("source.missing_value", f"`{show(text)}` has no value")
                continue
            value, skip = normal[i + 1].text, True
        if key.endswith("+"):
            key, value = key[:-1], json.dumps(value.split(","))
        option, *keys = key.split(".")
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            try:
                parsed = _human_int(value)
            except ValueError:
                parsed = value
        nested: Any = parsed
        for part in reversed(keys):
            nested = {part: nested}
        held = dotted.setdefault(option, ({}, tok.origin))
        _merge(held[0], nested)
    for option, (merged, origin) in dotted.items():
        out += [Arg(option, origin), Arg(json.dumps(merged), origin)]
    return out


def _pull_config(reading: _Reading, name: str) -> list[Arg]:
    if has_unresolved(name):
        reading.fail("source.unresolved", f"the `--config` file is {_references(name, whole=True)}")
        return []
    if name.split(".")[-1] not in ("yaml", "yml"):
        reading.fail("source.config_extension", f"`--config {name}`: vLLM reads only .yaml or .yml config files")
        return []
    if reading.read_config is None:
        reading.fail("source.config_unresolved", f"`--config {name}` cannot be located from this file")
        return []
    try:
        got = reading.read_config(name)
    except InputError as exc:
        first = exc.problems[0]
        reading.problems.append(Problem(first.code, first.message, first.path, first.hint, file=reading.file,
                                        line=reading.line))
        return []
    text, shown = (got.text, got.shown) if isinstance(got, ConfigFile) else (got, name)
    reading.configs.append(shown)
    try:
        config = parse_text(text or "", source=f"`{shown}`", fmt="yaml")
    except InputError as exc:
        first = exc.problems[0]
        reading.fail(first.code, f"the config file {first.message.removeprefix('invalid YAML in ')}"
                     if first.code == "input.parse" else first.message)
        return []
    if config is None:
        config = {}
    return config_args(reading, config, f"`{shown}`")


def config_args(reading: _Reading, config: Any, origin: str) -> list[Arg]:
    """vLLM's load_config_file: a YAML mapping to command-line arguments."""
    if not isinstance(config, dict):
        reading.fail("source.config_shape", f"the config file {origin} must hold a mapping of vLLM options")
        return []
    boolean_optional = reading.options.boolean_optional
    out: list[Arg] = []
    for key, value in config.items():
        if not isinstance(key, str):  # vLLM would fail on "--" + key
            reading.fail("source.config_shape", f"the config file {origin} has a key that is not a string")
            return []
        if key == "config":
            reading.note("source.config_nested", f"{origin} names another config file; vLLM does not read it")
        if isinstance(value, bool):
            if value:
                out.append(Arg("--" + key, origin))
            elif key in boolean_optional:  # vLLM adds --no-KEY only when that option exists
                out.append(Arg("--no-" + key, origin))
            elif key.replace("_", "-") in boolean_optional:
                # `--no-disable_hybrid_kv_cache_manager` is no option string: vLLM drops the key.
                reading.note("source.config_false_dropped", f"{origin}: `{key}: false` is dropped by vLLM, "
                             "which adds `--no-KEY` only for the dash spelling; the file states no preference",
                             hint=f"write `{key.replace('_', '-')}: false` for an explicit enable")
        elif isinstance(value, list):
            if value:
                out.append(Arg("--" + key, origin))
                out += [Arg(scalar_text(item), origin) for item in value]
        elif isinstance(value, dict):
            out += [Arg("--" + key, origin), Arg(json.dumps(value), origin)]
        else:
            out += [Arg("--" + key, origin), Arg(scalar_text(value), origin)]
    return out


def scalar_text(value: Any) -> str:
    """Python's str(), as vLLM applies it to config values."""
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _human_int(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(text.strip())


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def _looks_like_number(text: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d*)?|-\.\d+", text))


def _read_options(reading: _Reading, tokens: list[Arg]) -> tuple[dict[str, tuple[Any, str, str]], list[tuple[str | None, Arg]]]:
    """argparse over the options the decision needs: the last occurrence
    wins. Also the words holding unresolved values that the decision does
    not read: (the option they are a value of, or None; the word)."""
    found: dict[str, tuple[Any, str, str]] = {}
    loose: list[tuple[str | None, Arg]] = []
    flags = reading.options.flags
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        text = tok.text
        i += 1
        if not text.startswith("-") or text == "--":
            if has_unresolved(text):
                loose.append((None, tok))
            continue
        option, eq, value = text.partition("=")
        accepted = reading.options.accepted
        resolved: str | None = option
        if accepted is not None and option.startswith("--") and option not in accepted:
            resolved = _accepted_option(reading, option, accepted)
        elif option not in _VALUE_OPTIONS and option not in _FLAG_OPTIONS and option.startswith("--"):
            matches = [o for o in DECISION_OPTIONS if o.startswith(option) and o != option]
            if len(matches) == 1 and option.count("-") >= 3:
                reading.note("source.abbreviated_option", f"`{option}` is read as `{matches[0]}`, as argparse "
                             "expands a unique prefix; spell the option out")
                resolved = matches[0]
            else:
                if option not in reading.options.neighbours and _similar(option, DECISION_OPTIONS):
                    reading.fail("source.unknown_option", f"vLLM rejects the unrecognized argument `{show(option)}`",
                                 hint=suggest(option, DECISION_OPTIONS))
                resolved = None
        if resolved is None or resolved not in _VALUE_OPTIONS and resolved not in _FLAG_OPTIONS:
            # An option the decision does not read; a word after it is taken as its value.
            if eq:
                if has_unresolved(value):
                    loose.append((option, Arg(value, tok.origin)))
            elif i < len(tokens) and not tokens[i].text.startswith("-") and (resolved or option) not in flags:
                if has_unresolved(tokens[i].text):
                    loose.append((option, tokens[i]))
                i += 1
            continue
        option = resolved
        if option in _FLAG_OPTIONS:
            if eq:
                reading.fail("source.option_value", f"`{option}` takes no value; vLLM refuses `{show(text)}`")
                continue
            field_name, flag = _FLAG_OPTIONS[option]
            found[field_name] = (flag, tok.origin, option)
            continue
        if not eq:
            if i >= len(tokens) or (tokens[i].text.startswith("-") and not _looks_like_number(tokens[i].text)):
                reading.fail("source.missing_value", f"`{option}` has no value; vLLM refuses this")
                continue
            value = tokens[i].text
            i += 1
        field_name, _ = _VALUE_OPTIONS[option]
        earlier = found.get(field_name)
        if earlier is not None and isinstance(earlier[0], str) and has_unresolved(earlier[0]):
            loose.append((f"{earlier[2]} (a later `{option}` wins)", Arg(earlier[0], earlier[1])))
        found[field_name] = (value, tok.origin, option)
    return found, loose


def _accepted_option(reading: _Reading, option: str, accepted: frozenset[str]) -> str | None:
    """An option the release does not list: argparse's unique-prefix
    expansion, else vLLM refuses it. None when it is not an option the
    release accepts."""
    if has_unresolved(option):
        return None
    matches = sorted(o for o in accepted if o.startswith(option))
    if len(matches) == 1:
        reading.note("source.abbreviated_option", f"`{option}` is read as `{matches[0]}`, as argparse "
                     "expands a unique prefix; spell the option out")
        return matches[0]
    if matches:
        reading.fail("source.ambiguous_option", f"vLLM refuses the ambiguous option `{show(option)}`, which could be "
                     + ", ".join(f"`{m}`" for m in matches[:5]) + (", ..." if len(matches) > 5 else ""))
    else:
        reading.fail("source.unknown_option", f"vLLM {reading.options.release} rejects the unrecognized argument "
                     f"`{show(option)}`", hint=suggest(option, sorted(accepted)))
    return None


def _similar(option: str, candidates: Iterable[str]) -> bool:
    """A near-certain misspelling (a did-you-mean at 0.9 similarity), as
    opposed to one of vLLM's many options that merely look alike."""
    return bool(difflib.get_close_matches(option, list(candidates), n=1, cutoff=0.9))


def _number(text: str) -> Any:
    """argparse's float() for --kv-offloading-size; the text stays when it is
    not a number, so that validation reports it."""
    try:
        return int(text) if re.fullmatch(r"[+-]?\d+", text.strip()) else float(text)
    except ValueError:
        return text


# -- a launcher's command ------------------------------------------------------------------

# A command line is a few kilobytes (Linux takes at most 128 KiB a word): this
# bounds what one call may make the shell-word splitter walk, which is
# quadratic in a word's length (shlex; the audit's own reader is linear).
MAX_COMMAND_BYTES = 64 << 10
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(\([^)]*\)))")


def command_document(argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: str | os.PathLike[str] | None = None,
                     config_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The deployment document of a command a launcher holds (see
    :func:`hma_policy.decide_command`); :class:`InputError` when there is none."""
    if argv is None or (isinstance(argv, (str, list, tuple)) and not argv):
        raise InputError([Problem("input.empty", "the command is empty", hint="give `vllm serve MODEL ...`")])
    if isinstance(argv, str):
        words = _shell_words(argv, env or {})
    elif isinstance(argv, (list, tuple)) and all(isinstance(w, str) for w in argv):
        words = list(argv)
    else:
        raise InputError([Problem("input.type", "a command is a list of strings or one shell string")])
    base = os.path.realpath(os.fspath(cwd) if cwd is not None else os.getcwd())
    root = os.path.realpath(os.fspath(config_root)) if config_root is not None else base
    result = read_command(words, env=env, read_config=lambda name: _config_file(name, base, root))
    if result.problems:
        raise InputError(result.problems)
    assert result.document is not None
    return result.document


def _shell_words(text: str, env: Mapping[str, str]) -> list[str]:
    """``text`` split into words as a POSIX shell would, ``$NAME`` taken from
    ``env`` (a name ``env`` lacks, or ``$(...)``, stays unresolved)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        raise InputError([Problem("input.limit", f"the command is longer than {MAX_COMMAND_BYTES} bytes")])
    try:
        words = shlex.split(text, posix=True)
    except ValueError as exc:
        raise InputError([Problem("input.parse", f"the command cannot be split into words: {exc}")]) from None

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name is not None and name in env:
            return env[name]
        return unresolved(match.group(0), "is not given in `env`" if name else "is a command substitution")

    return [_REFERENCE.sub(value, word) for word in words]


def _config_file(name: str, base: str, root: str) -> ConfigFile:
    """A ``--config`` file read relative to ``base``, only inside ``root``."""
    path = os.path.realpath(os.path.join(base, name))
    if os.path.commonpath([path, root]) != root:
        raise InputError([Problem("source.config_outside", f"`{name}` is outside `{root}`, where config files may be read",
                                  hint="pass config_root= to allow another directory")])
    try:
        with open_regular(path) as handle:
            return ConfigFile(handle.read(MAX_COMMAND_BYTES + 1).decode("utf-8"), name)
    except FileNotFoundError:
        raise InputError([Problem("source.config_missing", f"`{name}` does not exist")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem("source.config_unreadable", f"`{name}` cannot be read: {exc}")]) from None
