"""Stage 1, input: read, bound, normalise and validate a deployment document.

Everything a document holds is data. The caller's object (a mapping, an
``argparse.Namespace`` as vLLM's parser leaves it, one of vLLM's config
objects) is read once, into plain JSON checked against the limits
(:mod:`.bounds`), before anything recursive (jsonschema, the graph walk)
sees it: a hostile document ends in an :class:`InputError`, never in a
RecursionError, MemoryError or hang, nor in an exception of its own. Its
names are the document's fields and the vLLM release's options
(:mod:`.options`); the options the decision does not read are ignored.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from . import lax, yamlsafe
from ..fileio import NotRegularFile, open_regular
from .bounds import bounded, check_values, plain_key, short_key
from .errors import InputError, Problem, suggest
from .limits import DEFAULT_LIMITS, Limits
from .optionlist import ReleaseOptions, known_options
from .configlist import DocumentSchema, document_schema
from .schema import load_schema, pointer

__all__ = ["Limits", "read_document", "parse_text", "prepare", "from_object", "MODEL_FACTS", "STRICT_JSON", "DuplicateKey"]


# Fields given as a JSON string, as vllm serve takes them (hisparse_config is
# no vLLM option, but documents may give it as text too).
JSON_STRING_FIELDS = ("kv_transfer_config", "speculative_config", "hisparse_config", "kv_events_config")


def _fail(code: str, message: str, path: str = "", hint: str | None = None) -> InputError:
    return InputError([Problem(code=code, message=message, path=path, hint=hint)])


class DuplicateKey(ValueError):
    """A JSON object names a key twice (first-wins and last-wins readers
    would read it differently): the key is the argument."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


# One decoder for every parse (json.loads with a hook builds a new one per
# call); it refuses repeated keys with DuplicateKey. The decision log reads
# its records with it too.
STRICT_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def _json_loads(text: str, *, source: str, path: str = "") -> Any:
    """json.loads with duplicate keys, digit limits and deep nesting as InputError."""
    fast, value = _orjson_loads(text)
    if fast:
        return value
    try:
        return STRICT_JSON.decode(text)
    except DuplicateKey as duplicate:
        raise _fail("input.duplicate_key", f"key `{duplicate.args[0]}` appears twice in one object in {source}", path) from None
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _fail("input.limit", f"{source} is nested too deeply to parse", path) from None
    except ValueError as exc:  # Python's limit on the digits of an integer
        raise _fail("input.limit", f"a number in {source} has too many digits ({exc})"[:200], path) from None


def _orjson_loads(text: str) -> tuple[bool, Any]:
    """(True, the value) where orjson's parse of ``text`` is provably the
    standard parser's (above), in a third of its time for a deployment
    document; else (False, None), and the standard parser decides, as
    always. orjson refuses some text the standard parser reads (NaN, a lone
    surrogate, nesting past 1,024), reads an integer past 64 bits as a
    float, and keeps the last of repeated keys silently: so a value holding
    a float, or whose keys may have repeated, is left to the standard parser.

    The text holds a colon after each key, and others only in strings. A
    repeated key is one key fewer in the value than in the text, so no key
    repeated when the text's colons, less the colons in the value's strings,
    are the value's keys. A ``\\u`` escape could write a colon the text does
    not hold: with one in the text, only text with no colon in a string
    (as many colons as keys) is taken."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, None
    keys = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            if isinstance(item, float):
                return False, None
            continue
        for child in items:
            if isinstance(child, (dict, list)):
                stack.append(child)
            elif isinstance(child, float):
                return False, None
    colons = text.count(":")
    if colons != keys and ("\\u" in text or colons - _string_colons(value) != keys):
        return False, None
    return True, value


def _string_colons(value: Any) -> int:
    """The colons in the strings of a parsed value, its keys included."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                count += key.count(":")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            count += item.count(":")
    return count


def _yaml_load(text: str, *, source: str) -> Any:
    try:
        data, _ = yamlsafe.load(text)
    except yamlsafe.YamlProblem as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line else ""
        code = "input.limit" if exc.limit else ("input.duplicate_key" if exc.duplicate is not None else "input.parse")
        raise _fail(code, f"invalid YAML in {source}{where}: {exc.message}") from None
    return data


def parse_text(text: str, *, source: str = "<document>", fmt: str | None = None) -> Any:
    """Parse JSON or YAML text (JSON when ``fmt`` is json or the text starts like JSON)."""
    stripped = text.lstrip()
    as_json = fmt == "json" or (fmt is None and stripped[:1] in ("{", "["))
    if as_json:
        try:
            return _json_loads(text, source=source)
        except json.JSONDecodeError as exc:
            if fmt == "json":
                raise _fail("input.parse", f"invalid JSON in {source} at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    return _yaml_load(text, source=source)


def read_limited(handle: Any, max_bytes: int) -> bytes | str:
    """At most ``max_bytes + 1`` bytes of a binary file or stream (one more
    than the limit, so that the caller can tell an oversized input); the
    text, for a text stream.

    ``read(max_bytes + 1)`` would allocate the whole limit (64 MiB) for every
    small file; a regular file is read at its size, anything else (a pipe,
    a file that grows) in bounded chunks.
    """
    try:
        size = os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        size = 0
    want = min(size, max_bytes) + 1 if size > 0 else 1 << 16
    data = handle.read(min(want, max_bytes + 1))
    if data is None or len(data) < want or len(data) > max_bytes:
        return data if data is not None else b""
    chunks = [data]
    total = len(data)
    while total <= max_bytes:
        chunk = handle.read(min(1 << 20, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks) if isinstance(data, bytes) else "".join(chunks)


def read_document(path: str | Path, *, limits: Limits = DEFAULT_LIMITS, stdin: Any = None) -> Any:
    """Read a document from a file path, or from ``stdin`` when path is ``-``."""
    source = str(path)
    try:
        if source == "-":
            if stdin is None:  # a process started with standard input closed (`<&-`)
                raise _fail("input.read", "cannot read standard input: it is closed")
            raw = read_limited(stdin.buffer if hasattr(stdin, "buffer") else stdin, limits.max_bytes)
        else:
            # Only a regular file: a FIFO or a device would block, or never end.
            with open_regular(source) as handle:
                raw = read_limited(handle, limits.max_bytes)
    except NotRegularFile as exc:
        raise _fail("input.not_regular", f"cannot read `{source}`: it is {exc.strerror}",
                    hint="give a FIFO's or a device's content on standard input: `-`") from None
    except OSError as exc:
        raise _fail("input.read", f"cannot read `{source}`: {exc.strerror or exc}") from None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > limits.max_bytes:
        raise _fail("input.limit", f"`{source}` is larger than {limits.max_bytes} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail("input.encoding", f"`{source}` is not UTF-8 text (byte {exc.start})") from None
    shown = "standard input" if source == "-" else f"`{source}`"
    # Nothing, or a null, is not a deployment: a missing file piped in must not pass as one without a connector.
    if not text.strip():
        raise _fail("input.empty", f"{shown} is empty", hint=_EMPTY_HINT)
    fmt = "json" if source.endswith(".json") else ("yaml" if source.endswith((".yaml", ".yml")) else None)
    document = parse_text(text, source=f"`{source}`", fmt=fmt)
    if document is None:
        raise _fail("input.empty", f"{shown} holds no document (it reads as null)", hint=_EMPTY_HINT)
    return document


_EMPTY_HINT = "give a deployment document; `{}` is a deployment without a connector"


# -- the document's names ------------------------------------------------------------

_SCHEMA = load_schema("deployment")
# The document's own fields: the schema's top-level names. Those that are
# also vLLM options (kv_transfer_config, model, ...) hold vLLM's values.
DOCUMENT_FIELDS = frozenset(_SCHEMA["properties"])
# What vLLM's `vllm serve` parser sets besides its options
# (vllm/entrypoints/cli/main.py: the subcommand and its handler; serve's
# positional model argument): accepted, never read.
PARSER_NAMES = frozenset({"subparser", "dispatch_function", "model_tag"})
# The model's facts (its layer kinds, attention_chunk_size), under a name no
# vLLM option has. `model` is vLLM's option, the model's name; as an object
# it holds the facts, as documents did before `model_facts` existed.
MODEL_FACTS = "model_facts"
_FACT_NAMES = frozenset(_SCHEMA["$defs"]["modelFacts"]["properties"])


def _select(document: Mapping[Any, Any], options: ReleaseOptions, limits: Limits, spelled: dict[str, str],
            declared: frozenset[str] = frozenset()) -> tuple[dict[str, Any], list[Problem]]:
    """The document's fields by name (vLLM's kebab-case read as snake_case),
    and a problem for each name that is neither a document field nor an
    option of the release (nor one of ``declared``, the fields a dataclass
    such as vLLM's EngineArgs declares). vLLM's other options are accepted
    and left out, their values never read: the decision does not depend on them."""
    items = list(document.items())
    if len(items) > limits.max_values:
        raise _fail("input.limit", f"the document holds more than {limits.max_values} values")
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    unknown: list[Problem] = []
    for raw, value in items:
        key = plain_key(raw, ())
        name = key if key in DOCUMENT_FIELDS or key in declared else key.replace("-", "_")
        dest = options.dest(name)
        same = dest if dest is not None and name not in DOCUMENT_FIELDS else name  # an alias is its option
        if same in seen:
            raise _fail("input.duplicate_key", f"`{same}` is given twice, as `{seen[same]}` and as `{key}`", pointer([key]))
        seen[same] = key
        if name in DOCUMENT_FIELDS:
            out[name] = value
            spelled[name] = key
        elif dest is None and name not in PARSER_NAMES and name not in declared:
            unknown.append(Problem("input.schema", f"unknown field `{short_key(key)}`", pointer([key]),
                                   _unknown_hint(key, options)))
    return out, unknown


def _unknown_hint(key: str, options: ReleaseOptions) -> str | None:
    """A did-you-mean among the document's fields and the release's options, spelled as ``key`` is."""
    if key.replace("-", "_") in _FACT_NAMES:
        return f"the model's facts go under `{MODEL_FACTS}`"
    names = sorted([*DOCUMENT_FIELDS, *options.by_dest])
    return suggest(key, [n.replace("_", "-") for n in names] if "-" in key else names)


def _coerce(document: dict[str, Any], options: ReleaseOptions, limits: Limits, spelled: dict[str, str]) -> bool:
    """String values read as vLLM's argument types read them: JSON text for
    a JSON option (kv_transfer_config), ``true``/``false`` for a boolean
    one, a number for a numeric one. A string that does not read as its
    type is left for the schema to refuse. Whether JSON text was expanded."""
    expanded = False
    for name, value in list(document.items()):
        if type(value) is not str:
            continue
        option = options.by_dest.get(name)
        kind = "json" if name in JSON_STRING_FIELDS else (option.type if option is not None else None)
        if kind == "json":
            if len(value) > limits.max_bytes:
                raise _fail("input.limit", f"`{name}` is longer than {limits.max_bytes} characters", pointer([name]))
            try:
                document[name] = _json_loads(value, source=f"`{spelled[name]}`", path=pointer([spelled[name]]))
            except json.JSONDecodeError as exc:
                raise _fail("input.parse", f"`{spelled[name]}` is not valid JSON: {exc.msg} at column {exc.colno}",
                            pointer([spelled[name]])) from None
            expanded = True
        elif kind == "bool" and value.strip().lower() in ("true", "false"):
            document[name] = value.strip().lower() == "true"
        elif kind == "int" or kind == "float":
            try:
                document[name] = int(value) if kind == "int" else float(value)  # as argparse's type=int, float
            except ValueError:
                pass
    return expanded


def _move_model_facts(document: dict[str, Any], spelled: dict[str, str]) -> None:
    """The decision reads the model's facts from ``model`` (an object): facts
    given as ``model_facts`` move there, with vLLM's model name (``model``,
    a string) kept beside them as ``name``, and ``spelled`` points the
    decision's paths (``/model/layer_kinds``) back to where they were written.
    A document that gives the facts in ``model`` keeps them there."""
    model = document.get("model")
    facts = document.pop(MODEL_FACTS, None)
    if isinstance(model, dict):
        if facts is not None and model.keys() - {"name"}:
            raise InputError([Problem(
                "input.duplicate_key", f"the model's facts are given twice: in `{spelled['model']}` and in "
                f"`{spelled[MODEL_FACTS]}`", pointer([spelled[MODEL_FACTS]]),
                hint=f"give them only in `{MODEL_FACTS}`, and the model's name as `model`")])
        name = model.get("name")
    else:
        name = model
    if facts is None and not isinstance(model, str):
        return  # no facts, or facts in `model`
    merged = dict(facts or {})
    if name is not None:
        merged["name"] = name
    document["model"] = merged
    if facts is not None:
        spelled["model"] = spelled[MODEL_FACTS]


def _count_connectors(document: dict[str, Any], limits: Limits) -> None:
    stack = [document.get("kv_transfer_config")]
    count = 0
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):  # plain by now (prepare)
            continue
        count += 1
        if count > limits.max_connectors:
            raise _fail("input.limit", f"the connector graph has more than {limits.max_connectors} connectors", "/kv_transfer_config")
        extra = node.get("kv_connector_extra_config")
        if isinstance(extra, dict) and isinstance(extra.get("connectors"), list):
            stack.extend(extra["connectors"])


def _read(document: Any, options: ReleaseOptions, limits: Limits,
          spelled: dict[str, str]) -> tuple[dict[str, Any], list[Problem], int]:
    """The caller's object read once, into a plain JSON document of the fields
    the decision reads; the problems of names that are not fields or
    options; how many values it holds. Any failure while reading the
    object (a mapping whose ``items()`` raises, a raising ``__getattr__``)
    is an :class:`InputError` (``input.unreadable``)."""
    try:
        declared = _dataclass_fields(document)
        document = from_object(document)
        if document is None:
            raise _fail("input.empty", "the document is empty (null)", hint=_EMPTY_HINT)
        if not isinstance(document, Mapping):
            raise _fail("input.schema", f"a deployment document must be an object, got {type(document).__name__}")
        selected, unknown = _select(document, options, limits, spelled, declared)
        for name, names in _CONFIG_FIELDS.items():
            value = selected.get(name)
            if value is not None and not isinstance(value, (Mapping, list, tuple, str, int, float)):
                selected[name] = _public_fields(value, names)  # one of vLLM's config objects (a Namespace's value)
        selected, values = bounded(selected, limits)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the caller's object raises
        raise _fail("input.unreadable", f"the document cannot be read: {_failure(exc)}"[:300],
                    hint="give plain data: dicts, lists, strings, numbers, booleans and None") from None
    return selected, unknown, values


def _failure(exc: Exception) -> str:
    """``Type: message`` of an exception the caller's code raised (its __str__ may raise too)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def prepare(document: Any, *, limits: Limits = DEFAULT_LIMITS, spelled: dict[str, str] | None = None,
            options: ReleaseOptions | None = None, schema: DocumentSchema | None = None) -> dict[str, Any]:
    """The validated, normalised document, or :class:`InputError` listing every problem.

    ``document``: a mapping (vLLM's option names in either spelling, the
    model's facts under ``model_facts``), an ``argparse.Namespace`` as
    vLLM's parser leaves it, or one of vLLM's config objects
    (:func:`from_object`). ``options``: the vLLM release's options (default:
    0.33.0's); the ones the decision does not read are accepted and
    ignored. ``schema``: the deployment schema of that release (default:
    the bundled schema, 0.33.0's; :mod:`.configlist`). ``spelled``, when
    given, receives each top-level name as the document spelled it
    (kebab-case or not, ``model_facts``), so that results can point into it.
    """
    options = options if options is not None else known_options()
    schema = schema if schema is not None else document_schema()
    spelled = {} if spelled is None else spelled
    document, unknown, values = _read(document, options, limits, spelled)
    if _coerce(document, options, limits, spelled):
        _, values = check_values(document, limits)  # JSON strings were expanded
    if values > limits.max_connectors:  # else it cannot hold more connectors than that
        _count_connectors(document, limits)
    # The compiled check first, here: the report's generator (jsonschema's,
    # with every problem located) only for a document it refuses.
    problems = schema.problems(document)
    if problems and lax.read_refused(document, [p.path for p in problems], schema.lax):
        problems = schema.problems(document)
    problems = unknown + problems
    size = document.get("kv_offloading_size")
    if isinstance(size, float) and not math.isfinite(size):
        problems.append(Problem("input.schema", f"`{size}` is not a finite number", "/kv_offloading_size"))
    if problems:
        # Point into the document as the user spelled it (kebab-case or not).
        raise InputError([_respell(p, spelled) for p in problems])
    _move_model_facts(document, spelled)
    return document


def respell(path: str, spelled: Mapping[str, str]) -> str:
    """``path`` with its first segment as the document spelled it."""
    head, sep, rest = path[1:].partition("/")
    original = spelled.get(head)
    if not path or original is None or original == head:
        return path
    return pointer([original]) + (sep + rest if sep else "")


def _respell(problem: Problem, spelled: Mapping[str, str]) -> Problem:
    path = respell(problem.path, spelled)
    return problem if path == problem.path else Problem(problem.code, problem.message, path, problem.hint)


def _public_fields(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The attributes ``names`` of a config object (only those: a property
    of the object is never called)."""
    out = {}
    for name in names:
        value = _attribute(obj, name, _ABSENT)
        if value is not _ABSENT:
            out[name] = value
    return out


_ABSENT = object()


def _attribute(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name``, or ``default`` when it has none. Only AttributeError
    means none: any other exception of the caller's ``__getattr__`` is
    raised (``input.unreadable``), in the compiled build too, where
    ``hasattr`` would hide it."""
    try:
        return getattr(obj, name)
    except AttributeError:
        return default


def _declared(field: dict[str, Any]) -> tuple[str, ...]:
    """The names the schema declares for an object field (its own, or its ``then``'s ``$ref``)."""
    ref = (field.get("then") or {}).get("$ref", "")
    target = _SCHEMA["$defs"][ref[len("#/$defs/"):]] if ref.startswith("#/$defs/") else field
    return tuple(target.get("properties") or ())


# vLLM's config objects, read by attribute where a vLLM option holds one
# (vLLM's parser makes --kv-transfer-config a KVTransferConfig): the names
# the schema declares for each.
_CONFIG_FIELDS = {name: _declared(_SCHEMA["properties"][name])
                  for name in ("kv_transfer_config", "speculative_config", "kv_events_config")}
KTC_FIELDS = _CONFIG_FIELDS["kv_transfer_config"]


def _ktc_to_dict(ktc: Any) -> Any:
    if ktc is None or isinstance(ktc, Mapping):
        return ktc
    return _public_fields(ktc, KTC_FIELDS)


def _dataclass_fields(obj: Any) -> frozenset[str]:
    """The fields a dataclass instance's class declares (vLLM's EngineArgs
    declares some that are no command-line option, such as
    ``model_weights``); none for anything else. A declared field is no
    misspelling: the class's constructor refuses any other name."""
    if isinstance(obj, type) or not dataclasses.is_dataclass(obj):
        return frozenset()
    return frozenset(field.name for field in dataclasses.fields(obj))


def _reads_as_namespace(obj: Any) -> bool:
    """An object whose attributes are vLLM's options: an argparse.Namespace
    (as vLLM's parser leaves it), a SimpleNamespace, or any object with a
    ``kv_transfer_config`` attribute of its own (vLLM's EngineArgs)."""
    if isinstance(obj, (argparse.Namespace, SimpleNamespace)):
        return True
    attributes = _attribute(obj, "__dict__")
    return isinstance(attributes, dict) and "kv_transfer_config" in attributes


def from_object(obj: Any) -> Any:
    """Read vLLM's own config objects by attribute (vLLM is never imported).

    A KVTransferConfig becomes ``{"kv_transfer_config": ...}``; a VllmConfig
    gives its kv_transfer_config, scheduler, cache, speculative and model
    facts; an ``argparse.Namespace`` (or an object with vLLM's options as
    attributes) its attributes, vLLM's options by name. Anything else is
    returned unchanged.
    """
    if obj is None or isinstance(obj, (Mapping, list, str, int, float)):
        return obj
    if _attribute(obj, "kv_connector", _ABSENT) is not _ABSENT and _attribute(obj, "kv_role", _ABSENT) is not _ABSENT:
        return {"kv_transfer_config": _ktc_to_dict(obj)}
    sched = _attribute(obj, "scheduler_config", _ABSENT)
    if sched is not _ABSENT and _attribute(obj, "kv_transfer_config", _ABSENT) is not _ABSENT:
        doc: dict[str, Any] = {"kv_transfer_config": _ktc_to_dict(obj.kv_transfer_config)}
        doc["disable_hybrid_kv_cache_manager"] = _attribute(sched, "disable_hybrid_kv_cache_manager")
        cache = _attribute(obj, "cache_config")
        if cache is not None:
            doc["kv_offloading_size"] = _attribute(cache, "kv_offloading_size")
            doc["kv_offloading_backend"] = _attribute(cache, "kv_offloading_backend")
        spec = _attribute(obj, "speculative_config")
        if spec is not None:
            doc["speculative_config"] = {"method": _attribute(spec, "method")}
        model = _attribute(obj, "model_config")
        if model is not None:
            chunk = _attribute(model, "attention_chunk_size")
            doc[MODEL_FACTS] = {"attention_chunk_size": chunk} if chunk is not None else {}
            name = _attribute(model, "model")
            if isinstance(name, str):
                doc["model"] = name
        return doc
    if _reads_as_namespace(obj):
        return dict(vars(obj))
    return obj
