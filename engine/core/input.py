"""Stage 1, input: read, bound, normalise and validate a deployment document.

Everything a document holds is data. Limits are checked by an iterative walk
before anything recursive (jsonschema, the graph walk) sees the document, so a
hostile document ends in an :class:`InputError`, never in a RecursionError,
MemoryError or hang.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from . import yamlsafe
from ..fileio import NotRegularFile, open_regular
from .errors import InputError, Problem
from .limits import DEFAULT_LIMITS, Limits
from .schema import accept_check, iter_problems, load_schema, pointer

__all__ = ["Limits", "read_document", "parse_text", "prepare", "from_object"]


# vLLM's CLI spellings of the top-level names (vllm serve --kv-transfer-config ...).
ALIASES = {
    "kv-transfer-config": "kv_transfer_config",
    "disable-hybrid-kv-cache-manager": "disable_hybrid_kv_cache_manager",
    "kv-offloading-size": "kv_offloading_size",
    "kv-offloading-backend": "kv_offloading_backend",
    "speculative-config": "speculative_config",
    "hisparse-config": "hisparse_config",
    "kv-events-config": "kv_events_config",
}
# Fields vllm serve accepts as a JSON string.
JSON_STRING_FIELDS = ("kv_transfer_config", "speculative_config", "hisparse_config", "kv_events_config")


def _fail(code: str, message: str, path: str = "", hint: str | None = None) -> InputError:
    return InputError([Problem(code=code, message=message, path=path, hint=hint)])


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


# One decoder for every parse: json.loads with a hook builds a new one per call.
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def _json_loads(text: str, *, source: str, path: str = "") -> Any:
    """json.loads with duplicate keys, digit limits and deep nesting as InputError."""
    fast, value = _orjson_loads(text)
    if fast:
        return value
    try:
        return _DECODER.decode(text)
    except _DuplicateKey as duplicate:
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
        code = "input.limit" if exc.limit else ("input.duplicate_key" if exc.duplicate else "input.parse")
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
    fmt = "json" if source.endswith(".json") else ("yaml" if source.endswith((".yaml", ".yml")) else None)
    return parse_text(text, source=f"`{source}`", fmt=fmt)


def _check_values(document: Any, limits: Limits) -> tuple[bool, int]:
    """Iteratively check JSON-compatibility and size limits; raise on the
    first breach. Whether the document is plain (dicts and lists only), and
    how many values it holds.

    The walk keeps no paths (it runs on every document); the pointer of a
    breach is found by a second, slower walk only when there is one. Strings,
    numbers, booleans and nulls (most values) are checked where their
    container is read, and never put on the stack.
    """
    count = 1
    max_depth, max_string, max_values = limits.max_depth, limits.max_string_length, limits.max_values
    plain = True
    if not _container(document):
        _check_scalar(document, document, limits)
        return True, 1
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is dict or (kind is not list and kind is not tuple):
            plain = plain and kind is dict
            if depth >= max_depth and value:  # its children would be too deep
                _breach(document, limits, "depth")
            for key in value:
                if type(key) is not str:
                    _breach(document, limits, "key")
            items = value.values()
        else:
            plain = plain and kind is list
            if depth >= max_depth and value:
                _breach(document, limits, "depth")
            items = value
        count += len(items)
        if count > max_values:
            raise _fail("input.limit", f"the document holds more than {max_values} values")
        for item in items:
            item_kind = type(item)
            if item_kind is str:
                if len(item) > max_string:
                    _breach(document, limits, "string")
            elif item_kind is dict or item_kind is list:
                stack.append((item, depth + 1))
            elif item is None or item_kind is bool or item_kind is float:
                pass
            elif item_kind is int:
                if item.bit_length() > 1024:
                    _breach(document, limits, "int")
            elif _container(item):
                stack.append((item, depth + 1))
            else:
                _check_scalar(item, document, limits)
    return plain, count


def _container(value: Any) -> bool:
    kind = type(value)
    return kind is list or kind is tuple or isinstance(value, Mapping)


def _check_scalar(value: Any, document: Any, limits: Limits) -> None:
    """A value that is not a container: a JSON scalar within the limits, or a breach."""
    kind = type(value)
    if kind is str:
        if len(value) > limits.max_string_length:
            _breach(document, limits, "string")
    elif value is None or kind is bool or kind is float:
        pass  # any float, NaN included, is opaque data: none reaches the rule runtime
    elif kind is int or isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 1024:
            _breach(document, limits, "int")
    else:
        _breach(document, limits, "type")


def _to_plain(value: Any) -> Any:
    """Tuples become lists and other mappings dicts, as json.dumps reads them
    (so a document and its JSON text always get the same decision)."""
    if isinstance(value, Mapping):
        return {key: _to_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(item) for item in value]
    return value


def _breach(document: Any, limits: Limits, kind: str) -> None:
    """Find the first value breaking ``kind`` (depth-first, in document order) and raise."""
    stack: list[tuple[Any, tuple, int]] = [(document, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        if kind == "depth" and depth > limits.max_depth:
            raise _fail("input.limit", f"the document is nested deeper than {limits.max_depth} levels", pointer(path))
        if isinstance(value, Mapping):
            items = list(value.items())
            for key, _ in items:
                if kind == "key" and not isinstance(key, str):
                    raise _fail("input.type", f"object keys must be strings, got `{key!r}`"[:200], pointer(path))
            items.reverse()
            stack.extend([(item, path + (key,), depth + 1) for key, item in items])
        elif isinstance(value, (list, tuple)):
            pairs = list(enumerate(value))
            pairs.reverse()
            stack.extend([(item, path + (index,), depth + 1) for index, item in pairs])
        elif kind == "string" and isinstance(value, str) and len(value) > limits.max_string_length:
            raise _fail("input.limit", f"a string is longer than {limits.max_string_length} characters", pointer(path))
        elif kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024:
            raise _fail("input.limit", "an integer is too large", pointer(path))
        elif kind == "type" and not (value is None or isinstance(value, (str, int, float, bool))):
            raise _fail("input.type", f"`{type(value).__name__}` values are not JSON data", pointer(path))
    raise _fail("input.limit", "the document breaks a limit")  # pragma: no cover - the fast walk found one


def _normalise(document: Any, limits: Limits, spelled: dict[str, str]) -> dict[str, Any]:
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise _fail("input.schema", f"a deployment document must be an object, got {type(document).__name__}")
    out: dict[str, Any] = {}
    for key, value in document.items():
        name = ALIASES.get(key, key) if isinstance(key, str) else key
        if name in out:
            raise _fail("input.duplicate_key", f"`{name}` is given twice, as `{spelled.get(name, name)}` and as `{key}`", pointer([key]))
        out[name] = value
        spelled[name] = key
    for name in JSON_STRING_FIELDS:
        value = out.get(name)
        if isinstance(value, str):
            if len(value) > limits.max_bytes:
                raise _fail("input.limit", f"`{name}` is longer than {limits.max_bytes} characters", pointer([name]))
            try:
                out[name] = _json_loads(value, source=f"`{spelled[name]}`", path=pointer([spelled[name]]))
            except json.JSONDecodeError as exc:
                raise _fail("input.parse", f"`{spelled[name]}` is not valid JSON: {exc.msg} at column {exc.colno}", pointer([spelled[name]])) from None
    return out


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


def prepare(document: Any, *, limits: Limits = DEFAULT_LIMITS, spelled: dict[str, str] | None = None) -> dict[str, Any]:
    """The validated, normalised document, or :class:`InputError` listing every problem.

    ``spelled``, when given, receives each top-level name as the document
    spelled it (kebab-case or not), so that results can point into it.
    """
    document = from_object(document)
    plain, values = _check_values(document, limits)
    if not plain:
        document = _to_plain(document)  # bounded: the walk above checked depth and size
    spelled = {} if spelled is None else spelled
    raw = document if isinstance(document, dict) else {}
    document = _normalise(document, limits, spelled)
    if any(document.get(name) is not raw.get(spelled.get(name, name)) for name in JSON_STRING_FIELDS):
        _, values = _check_values(document, limits)  # JSON strings were expanded
    if values > limits.max_connectors:  # else it cannot hold more connectors than that
        _count_connectors(document, limits)
    # The compiled check first, here: the report's generator (jsonschema's,
    # with every problem located) only for a document it refuses.
    problems = [] if accept_check("deployment")(document) else list(
        iter_problems("deployment", document, default_code="input.schema"))
    size = document.get("kv_offloading_size")
    if isinstance(size, float) and not math.isfinite(size):
        problems.append(Problem("input.schema", f"`{size}` is not a finite number", "/kv_offloading_size"))
    if problems:
        # Point into the document as the user spelled it (kebab-case or not).
        raise InputError([_respell(p, spelled) for p in problems])
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
    out = {}
    for name in names:
        if hasattr(obj, name):
            out[name] = getattr(obj, name)
    return out


KTC_FIELDS = tuple(load_schema("deployment")["$defs"]["kvTransferConfig"]["properties"])


def _ktc_to_dict(ktc: Any) -> Any:
    if ktc is None or isinstance(ktc, Mapping):
        return ktc
    fields = _public_fields(ktc, KTC_FIELDS)
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in fields.items()}


def from_object(obj: Any) -> Any:
    """Read vLLM's own config objects by attribute (vLLM is never imported).

    A KVTransferConfig becomes ``{"kv_transfer_config": ...}``; a VllmConfig
    gives its kv_transfer_config, scheduler, cache, speculative and model facts.
    Anything else is returned unchanged.
    """
    if obj is None or isinstance(obj, (Mapping, list, str, int, float)):
        return obj
    if hasattr(obj, "kv_connector") and hasattr(obj, "kv_role"):
        return {"kv_transfer_config": _ktc_to_dict(obj)}
    if hasattr(obj, "scheduler_config") and hasattr(obj, "kv_transfer_config"):
        doc: dict[str, Any] = {"kv_transfer_config": _ktc_to_dict(obj.kv_transfer_config)}
        sched = obj.scheduler_config
        doc["disable_hybrid_kv_cache_manager"] = getattr(sched, "disable_hybrid_kv_cache_manager", None)
        cache = getattr(obj, "cache_config", None)
        if cache is not None:
            doc["kv_offloading_size"] = getattr(cache, "kv_offloading_size", None)
            doc["kv_offloading_backend"] = getattr(cache, "kv_offloading_backend", None)
        spec = getattr(obj, "speculative_config", None)
        if spec is not None:
            doc["speculative_config"] = {"method": getattr(spec, "method", None)}
        model = getattr(obj, "model_config", None)
        if model is not None:
            chunk = getattr(model, "attention_chunk_size", None)
            doc["model"] = {"attention_chunk_size": chunk} if chunk is not None else {}
        return doc
    return obj
