"""Renderers of an audit report: text, json, md, html and policyreport (and
the CI formats sarif, github and junit, in ci_formats.py).

Each renderer reads only the JSON report (``AuditReport.to_dict()``), so
everything a rendering shows is in the JSON too, and a saved JSON report can
be rendered again. Text taken from the audited files (names, paths,
messages) is escaped for the output format: a connector named
``<script>`` is text in HTML and in Markdown tables.

The renderers, one module each: text and Markdown (report_text.py, with the
wording every format shares), html (report_html.py), policyreport
(report_policy.py), and the CI formats sarif, github and junit
(ci_formats.py). This module chooses one, and writes the JSON report.
"""

from __future__ import annotations

import json
from typing import Any

try:  # optional: the standard-library path below gives the same text
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

from .report_html import render_html
from .report_policy import render_policy_report
from .report_text import json_text, render_markdown, render_text

__all__ = ["render", "render_bytes", "write", "deployments_json", "FORMATS"]

FORMATS = ("text", "json", "md", "html", "policyreport", "sarif", "github", "junit")


def render(report: Any, fmt: str) -> str:
    """The report (an AuditReport or its ``to_dict()``) in ``fmt``."""
    data = _names_escaped(report.to_dict() if hasattr(report, "to_dict") else report)
    if fmt == "json":
        return json_text(data)
    if fmt in ("sarif", "github", "junit"):  # the CI formats: their own module
        from .ci_formats import render as render_ci

        return render_ci(data, fmt)
    return {"text": render_text, "md": render_markdown, "html": render_html, "policyreport": render_policy_report}[fmt](data)


def render_bytes(report: Any, fmt: str) -> bytes:
    """:func:`render` as UTF-8 bytes ending in a newline, for a file: a
    JSON report is written by orjson as bytes, never decoded to text and
    encoded again (a 20,000-deployment report is about 45 MB). A file name
    in another encoding shows its undecodable bytes as ``\\xHH``
    (_names_escaped); other text UTF-8 cannot hold (a ``\\ud800`` escape in
    a document) is written as its escape, as the command writes it on
    standard output."""
    data = report.to_dict() if hasattr(report, "to_dict") else report
    if fmt == "json" and orjson is not None:
        try:
            return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            pass
    text = render(data, fmt)  # file names escaped (_names_escaped)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8", "backslashreplace")


def write(report: Any, fmt: str, stream: Any) -> None:
    """:func:`render_bytes` written to the binary ``stream``.

    The JSON report of an AuditReport is written a slice of deployments at
    a time: its text (about 2.3 KB a deployment, 46 MB for 20,000) and the
    dicts it is made from are never all held at once, which takes a
    quarter off the peak memory of a 20,000-file audit. The bytes are those of
    render_bytes: the report is rendered with a placeholder for its
    deployments, a NUL byte, which JSON text can only hold escaped (so the
    one raw NUL is the placeholder), and each slice is rendered inside an
    object of the same depth, so that its indentation is the report's.
    """
    if fmt != "json" or orjson is None or not hasattr(report, "iter_deployments"):
        stream.write(render_bytes(report, fmt))
        return
    try:
        head, tail = orjson.dumps(report.report_dict(orjson.Fragment(b"\x00")),
                                  option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).split(b"\x00")
    except TypeError:  # text orjson cannot write (a lone surrogate): the whole report as render_bytes writes it
        stream.write(render_bytes(report, fmt))
        return
    stream.write(head)
    opening = b"["
    # An audit that spread the rendering over its processes (audit(...,
    # prerender=True)) left the deployments' text; else they are rendered now.
    rendered = getattr(report, "rendered", None)
    parts = iter(rendered) if rendered is not None else map(deployments_json, report.iter_deployments(_SLICE))
    for text in parts:
        if text:
            stream.write(opening)
            stream.write(text)
            opening = b","
    stream.write(b"[]" if opening == b"[" else b"\n  ]")
    stream.write(tail)


def deployments_json(items: list[dict[str, Any]]) -> memoryview:
    """The text of deployment dicts as the JSON report's ``deployments``
    holds them, between its brackets: joined by commas, the texts of
    consecutive lists of deployments are the array's. Rendered inside an
    object of the same depth, ``{"": items}``, without its first and last
    lines, so that the indentation is the report's."""
    try:
        text = orjson.dumps({"": items}, option=orjson.OPT_INDENT_2)
    except TypeError:  # text orjson cannot write (a lone surrogate)
        text = json.dumps(_names_escaped({"": items}), indent=2, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return memoryview(text)[len(_SLICE_HEAD):-len(_SLICE_TAIL)]


# Deployments rendered at a time by write(): large enough that a slice
# costs what the whole report would a deployment, small enough to be a
# few megabytes.
_SLICE = 1024
# What {"": [items]} renders around the items (orjson and json alike).
_SLICE_HEAD = b'{\n  "": ['
_SLICE_TAIL = b"\n  ]\n}"


def _names_escaped(data: Any) -> Any:
    """``data`` with every string (keys too) as fileio.escape_name writes it:
    a file name that is not UTF-8, which Python holds with lone surrogates,
    shows each byte UTF-8 could not decode as ``\\xHH``, in every format
    (in JSON, the string ``"caf\\\\xe9.json"``), not as a surrogate that
    UTF-8 cannot write and JSON readers refuse. A copy, made only when some
    string needs it: ``data`` itself when orjson can write it, for orjson
    refuses any lone surrogate."""
    if orjson is not None:
        try:
            orjson.dumps(data)
            return data
        except TypeError:
            pass
    from ..fileio import escape_name

    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(data, holder, 0)]
    while stack:  # iterative: a report holds documents' values, as deep as the input limits allow
        value, parent, key = stack.pop()
        if isinstance(value, dict):
            copy: Any = {}
            for k, v in value.items():
                k = escape_name(k) if isinstance(k, str) else k
                copy[k] = None  # in order now; the value is set when its turn comes
                stack.append((v, copy, k))
        elif isinstance(value, (list, tuple)):
            copy = [None] * len(value)
            stack.extend((item, copy, index) for index, item in enumerate(value))
        else:
            copy = escape_name(value) if isinstance(value, str) else value
        parent[key] = copy
    return holder[0]
