"""Renderers of an audit report: text, json, md, html and policyreport (and
the CI formats sarif, github and junit, in ci_formats.py).

Each renderer reads only the JSON report (``AuditReport.to_dict()``), so
everything a rendering shows is in the JSON too, and a saved JSON report can
be rendered again. Text taken from the audited files (names, paths,
messages) is escaped for the output format: a connector named
``<script>`` is text in HTML and in Markdown tables.

- ``html`` is one self-contained page: inline CSS, an inline SVG chart of the
  outcomes, every connector graph drawn as a nested list; no script, no
  external resource, readable without JavaScript.
- ``policyreport`` is a Kubernetes PolicyReport (``wgpolicyk8s.io/v1alpha2``,
  the Policy working group's format), as JSON: one result per deployment and
  per file problem. ``pass``: decided, no warning; ``warn``: decided with
  warnings (not scored); ``fail``: vLLM rejects the deployment (config or
  connector stage); ``error``: the deployment could not be decided (invalid
  input, undetermined, or an unreadable file).
"""

from __future__ import annotations

import html
import json
from typing import Any

try:  # optional: the standard-library path below gives the same text
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

__all__ = ["render", "render_bytes", "write", "FORMATS"]

FORMATS = ("text", "json", "md", "html", "policyreport", "sarif", "github", "junit")
OUTCOMES = ("enabled", "disabled", "error", "undetermined")
_VERDICT = {True: "supports HMA", False: "does not support HMA", None: "unknown"}
_CHILDREN = "/kv_connector_extra_config/connectors/"


def render(report: Any, fmt: str) -> str:
    """The report (an AuditReport or its ``to_dict()``) in ``fmt``."""
    data = _names_escaped(report.to_dict() if hasattr(report, "to_dict") else report)
    if fmt == "json":
        return _json_text(data)
    if fmt in ("sarif", "github", "junit"):  # the CI formats: their own module
        from .ci_formats import render as render_ci

        return render_ci(data, fmt)
    return {"text": _text, "md": _markdown, "html": _html, "policyreport": _policy_report}[fmt](data)


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


def _json_text(data: Any) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False)``, by orjson when it
    is installed (a 20,000-deployment report takes 0.1 s instead of 1 s).
    The two give the same text for a report, which holds no float; orjson
    refuses what it cannot write the same way (integers past 64 bits), and
    json writes that."""
    if orjson is not None:
        try:
            return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode("utf-8")
        except TypeError:
            pass
    return json.dumps(data, indent=2, ensure_ascii=False)


def _printable(text: Any) -> str:
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _depth(path: str) -> int:
    return path.count(_CHILDREN)


def _outcome_line(summary: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{name} {summary['outcomes'][name]}" for name in OUTCOMES)
    extra = f"; {summary['problems']} file problem(s)" if summary["problems"] else ""
    extra += f"; {summary['notes']} file note(s)" if summary.get("notes") else ""
    skipped = summary["files"]["skipped"]
    return f"outcomes: {outcomes}{extra}" + (f"; {skipped} file(s) skipped (not deployment sources)" if skipped else "")


def _headline(data: dict[str, Any]) -> str:
    s = data["summary"]
    paths = " ".join(data["paths"])
    return (f"hma-policy audit of {paths}: {s['deployments']} deployment(s) in {s['files']['examined']} file(s) "
            f"(policy {data['policy']['source']}, {data['policy']['digest'][:19]})")


def _tree_lines(connectors: list[dict[str, Any]]) -> list[str]:
    """The connector graph as box-drawing lines, from the pre-order list."""
    depths = [_depth(c["path"]) for c in connectors]
    lines: list[str] = []
    open_levels: list[bool] = []
    for index, node in enumerate(connectors):
        depth = depths[index]
        following = next((d for d in depths[index + 1:] if d <= depth), -1)
        is_last = following < depth
        del open_levels[max(depth - 1, 0):]
        prefix = "".join("   " if done else "│  " for done in open_levels)
        if depth > 0:
            prefix += "└─ " if is_last else "├─ "
            open_levels.append(is_last)
        name = node["kv_connector"] if node["kv_connector"] is not None else "(no kv_connector)"
        lines.append(f"{prefix}{_printable(name)}: {_VERDICT[node['supports_hma']]}  [{node['path']}] ({node['rule']})")
    return lines


def _first_error(decision: dict[str, Any]) -> dict[str, Any] | None:
    return decision["errors"][0] if decision["errors"] else None


def _release(entry: dict[str, Any]) -> str:
    hint = entry.get("release_hint")
    if not hint:
        return ""
    return f"{hint['version']} ({hint['origin']})" if hint["version"] else f"unknown ({hint['origin']})"


# -- text -----------------------------------------------------------------------

def _place(entry: dict[str, Any]) -> str:
    """Where a launch is: file and line, its object, container and role, and
    the files merged to make it."""
    parts = [entry["file"] + (f":{entry['line']}" if entry.get("line") else "")]
    r = entry.get("resource")
    if r:
        parts.append(f"{r.get('kind')} {r['namespace'] + '/' if r.get('namespace') else ''}{r.get('name')}")
    parts += [f"{key} {entry[key]}" for key in ("container", "role") if entry.get(key)]
    if len(entry.get("chain") or ()) > 1:
        parts.append("from " + " + ".join(entry["chain"]))
    return " · ".join(parts)


def _text(data: dict[str, Any]) -> str:
    out = [_headline(data), _outcome_line(data["summary"])]
    for entry in data["deployments"]:
        d = entry["decision"]
        head = f"{_printable(entry['id'])}: {d['outcome']}"
        if d["hma_enabled"] is not None:
            head += f" (hma_enabled: {json.dumps(d['hma_enabled'])})"
        if d["warnings"]:
            head += "  warnings: " + ", ".join(w["code"] for w in d["warnings"])
        out.append(head)
        out.append(f"  at {_printable(_place(entry))}")
        for error in d["errors"]:
            out.append(f"  error {error['code']} [{error['stage']}] at {error['path'] or '/'}: {_printable(error['message'])}")
            if error.get("hint"):
                out.append(f"    hint: {_printable(error['hint'])}")
            top = error["path"].split("/")[1] if error["path"].count("/") >= 1 else ""
            origin = entry["origins"].get(top.replace("-", "_"))
            if origin:
                out.append(f"    from: {_printable(origin)}")
        for note in entry["notes"]:
            out.append(f"  note {note['code']}: {_printable(note['message'])}")
        if _release(entry):
            out.append(f"  vllm release: {_printable(_release(entry))}")
        if entry.get("remediation") and d["outcome"] != "error":
            out.append(f"  remediation: {_printable(entry['remediation'])}")
    summary = data["summary"]
    if summary.get("by_connector"):
        out.append("by connector (deployments; nodes that support HMA / do not / unknown):")
        for name, row in summary["by_connector"].items():
            out.append(f"  {_printable(name)}: {row['deployments']}; {row['supports_hma']} / {row['does_not']} / {row['unknown']}")
    if data["problems"]:
        out.append("problems:")
        for p in data["problems"]:
            where = p.get("file", "") + (f":{p['line']}" if p.get("line") else "")
            out.append(f"  {_printable(where)}: {p['code']}: {_printable(p['message'])}")
            if p.get("hint"):
                out.append(f"    hint: {_printable(p['hint'])}")
    if data.get("notes"):
        out.append("file notes:")
        for n in data["notes"]:
            where = n.get("file", "") + (f":{n['line']}" if n.get("line") else "")
            out.append(f"  {_printable(where)}: {n['code']}: {_printable(n['message'])}")
    return "\n".join(out)


# -- Markdown -----------------------------------------------------------------------

def _md_code(text: Any) -> str:
    """A Markdown code span that holds any text (a fence longer than any backtick run)."""
    text = _printable(text).replace("|", "\\|")
    longest = current = 0
    for ch in text:
        current = current + 1 if ch == "`" else 0
        longest = max(longest, current)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_text(text: Any) -> str:
    """Text that Markdown shows as written: the characters that start markup
    are escaped (`_` inside words, as in kv_role, is no emphasis in CommonMark)."""
    text = _printable(text)
    for ch in "\\`*[]<>|":
        text = text.replace(ch, "\\" + ch)
    return text


def _markdown(data: dict[str, Any]) -> str:
    s = data["summary"]
    out = ["# hma-policy audit", ""]
    out.append(f"Paths: {', '.join(_md_code(p) for p in data['paths'])} · policy {_md_code(data['policy']['source'])} "
               f"({_md_code(data['policy']['digest'])}) · hma-policy {data['tool']['version']}")
    out.append("")
    out.append(f"{s['deployments']} deployment(s) in {s['files']['examined']} file(s); "
               f"{s['problems']} file problem(s); {s['files']['skipped']} file(s) skipped"
               + (f"; {s['notes']} file note(s)." if s.get("notes") else "."))
    out += ["", "| Outcome | Deployments |", "|---|---:|"]
    out += [f"| {name} | {s['outcomes'][name]} |" for name in OUTCOMES]
    out += ["", "## Deployments", "", "| Deployment | Format | Outcome | hma_enabled | Error | Warnings | Where |",
            "|---|---|---|---|---|---|---|"]
    for entry in data["deployments"]:
        d = entry["decision"]
        error = _first_error(d)
        error_text = f"{_md_code(error['code'])} ({error['stage']})" if error else ""
        warnings = ", ".join(_md_code(w["code"]) for w in d["warnings"])
        out.append(f"| {_md_code(entry['id'])} | {entry['format']} | **{d['outcome']}** | {json.dumps(d['hma_enabled'])} "
                   f"| {error_text} | {warnings} | {_md_text(_place(entry))} |")
    graphs = [e for e in data["deployments"] if e["decision"]["connectors"]]
    if graphs:
        out += ["", "## Connector graphs", ""]
        for entry in graphs:
            out.append(f"### {_md_text(entry['id'])}")
            out.append("")
            out.append("```text")
            out += [line.replace("```", "`\u200b``") for line in _tree_lines(entry["decision"]["connectors"])]
            out.append("```")
            out.append("")
    details = [e for e in data["deployments"] if e["decision"]["errors"] or e["notes"]]
    if details:
        out += ["## Errors and notes", ""]
        for entry in details:
            for error in entry["decision"]["errors"]:
                out.append(f"- {_md_code(entry['id'])}: {_md_code(error['code'])} [{error['stage']}] at "
                           f"{_md_code(error['path'] or '/')}: {_md_text(error['message'])}")
            for note in entry["notes"]:
                out.append(f"- {_md_code(entry['id'])}: note {_md_code(note['code'])}: {_md_text(note['message'])}")
        out.append("")
    placed = [e for e in data["deployments"] if _place(e) or _release(e)]
    if placed:
        out += ["## Where each launch comes from", "", "| Deployment | Line | Place | vLLM release |", "|---|---:|---|---|"]
        for entry in placed:
            out.append(f"| {_md_code(entry['id'])} | {entry.get('line') or ''} | {_md_text(_place(entry))} "
                       f"| {_md_text(_release(entry))} |")
        out.append("")
    if data["problems"]:
        out += ["## File problems", "", "| File | Line | Code | Problem |", "|---|---:|---|---|"]
        for p in data["problems"]:
            out.append(f"| {_md_code(p.get('file', ''))} | {p.get('line') or ''} | {_md_code(p['code'])} | {_md_text(p['message'])} |")
        out.append("")
    if data.get("notes"):
        out += ["## File notes", "", "| File | Line | Code | Note |", "|---|---:|---|---|"]
        for n in data["notes"]:
            out.append(f"| {_md_code(n.get('file', ''))} | {n.get('line') or ''} | {_md_code(n['code'])} | {_md_text(n['message'])} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- HTML ---------------------------------------------------------------------------

_COLOURS = {"enabled": "#2e7d32", "disabled": "#b26a00", "error": "#c62828", "undetermined": "#6a1b9a", "problems": "#455a64"}
_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:96rem;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem}
code{font:13px ui-monospace,Menlo,Consolas,monospace;background:#f3f3f3;padding:0 .2em;border-radius:3px}
table{border-collapse:collapse;width:100%;margin:.5rem 0;table-layout:fixed}
#deployments col.id{width:22%}#deployments col.fmt{width:7%}#deployments col.out{width:8%}#deployments col.hma{width:9%}
#deployments col.tree{width:24%}#problems col.file,#notes col.file{width:30%}#problems col.line,#notes col.line{width:5%}#problems col.code,#notes col.code{width:12%}th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#fafafa}.outcome{font-weight:600;white-space:nowrap}
.enabled{color:#2e7d32}.disabled{color:#b26a00}.error{color:#c62828}.undetermined{color:#6a1b9a}
details{margin:.2rem 0}summary{cursor:pointer}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.3rem}ul.tree{padding-left:0}
ul.tree ul li{position:relative}ul.tree ul li::before{content:"";position:absolute;left:-.9rem;top:0;border-left:1px solid #999;height:100%}
ul.tree ul li:last-child::before{height:.75rem}ul.tree ul li::after{content:"";position:absolute;left:-.9rem;top:.75rem;width:.7rem;border-top:1px solid #999}
.node .verdict{font-size:.85em;padding:0 .3em;border-radius:3px;margin-left:.3em;white-space:nowrap}
td code{overflow-wrap:anywhere}
.node[data-supports=true] .verdict{background:#e8f5e9}.node[data-supports=false] .verdict{background:#fff3e0}.node[data-supports=unknown] .verdict{background:#f3e5f5}
.muted{color:#666;font-size:.9em}.meta{color:#444}
"""


def _e(text: Any) -> str:
    return html.escape(_printable(text), quote=True)


def _chart(summary: dict[str, Any]) -> str:
    rows = [(name, summary["outcomes"][name]) for name in OUTCOMES] + [("problems", summary["problems"])]
    top = max([count for _, count in rows] + [1])
    width, bar_height, gap, label = 520, 22, 8, 120
    height = len(rows) * (bar_height + gap) + gap
    out = [f'<svg id="summary-chart" xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" aria-labelledby="chart-title">',
           '<title id="chart-title">Deployments by outcome, and file problems</title>']
    for index, (name, count) in enumerate(rows):
        y = gap + index * (bar_height + gap)
        length = round((width - label - 60) * count / top)
        caption = "file problems" if name == "problems" else name
        out.append(f'<text x="{label - 8}" y="{y + 16}" text-anchor="end" font-size="13">{caption}</text>')
        out.append(f'<rect class="bar" data-key="{name}" data-count="{count}" x="{label}" y="{y}" width="{length}" '
                   f'height="{bar_height}" fill="{_COLOURS[name]}"><title>{caption}: {count}</title></rect>')
        out.append(f'<text x="{label + length + 6}" y="{y + 16}" font-size="13">{count}</text>')
    out.append("</svg>")
    return "".join(out)


def _html_tree(connectors: list[dict[str, Any]]) -> str:
    """Nested lists from the pre-order list and each node's depth."""
    out = ['<ul class="tree">']
    previous: int | None = None
    for node in connectors:
        depth = _depth(node["path"])
        if previous is not None:
            if depth > previous:
                out.append("<ul>")
            else:
                out.append("</li>")
                out += ["</ul></li>"] * (previous - depth)
        supports = {True: "true", False: "false", None: "unknown"}[node["supports_hma"]]
        name = node["kv_connector"] if node["kv_connector"] is not None else "(no kv_connector)"
        out.append(f'<li class="node" data-supports="{supports}" title="{_e(node["path"])} ({_e(node["rule"])})">'
                   f'<code class="conn">{_e(name)}</code><span class="verdict">{_VERDICT[node["supports_hma"]]}</span>')
        previous = depth
    if previous is not None:
        out.append("</li>")
        out += ["</ul></li>"] * previous
    out.append("</ul>")
    return "".join(out)


def _html_messages(items: list[dict[str, Any]], kind: str) -> str:
    if not items:
        return ""
    rows = []
    for m in items:
        tag = m.get("stage") or m.get("source")
        hint = f'<br><span class="muted">hint: {_e(m["hint"])}</span>' if m.get("hint") else ""
        rows.append(f'<li class="{kind}"><code>{_e(m["code"])}</code> [{_e(tag)}] at <code>{_e(m["path"] or "/")}</code>: '
                    f"{_e(m['message'])}{hint}</li>")
    return f"<p>{kind}s:</p><ul>{''.join(rows)}</ul>"


def _html(data: dict[str, Any]) -> str:
    s = data["summary"]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>hma-policy audit</title>", f"<style>{_STYLE}</style></head><body>",
             "<h1>hma-policy audit</h1>",
             f'<p class="meta">Paths: {", ".join(f"<code>{_e(p)}</code>" for p in data["paths"])} · policy '
             f'<code>{_e(data["policy"]["source"])}</code> (<code>{_e(data["policy"]["digest"])}</code>) · '
             f'hma-policy {_e(data["tool"]["version"])}</p>',
             f'<p id="summary">{s["deployments"]} deployment(s) in {s["files"]["examined"]} file(s); '
             f'{s["problems"]} file problem(s); {s["files"]["skipped"]} file(s) skipped'
             + (f'; {s["notes"]} file note(s).</p>' if s.get("notes") else ".</p>"),
             _chart(s),
             "<h2>Deployments</h2>",
             '<table id="deployments"><colgroup><col class="id"><col class="fmt"><col class="out"><col class="hma">'
             '<col class="tree"><col></colgroup><thead><tr><th>Deployment</th><th>Format</th><th>Outcome</th>'
             "<th>hma_enabled</th><th>Connectors</th><th>Details</th></tr></thead><tbody>"]
    for entry in data["deployments"]:
        d = entry["decision"]
        error = _first_error(d)
        summary_text = f"{error['code']} ({error['stage']})" if error else (
            ", ".join(w["code"] for w in d["warnings"]) or "no warnings")
        body = []
        if d["reasons"]:
            body.append("<p>why:</p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in d["reasons"]) + "</ul>")
        body.append(_html_messages(d["errors"], "error"))
        body.append(_html_messages(d["warnings"], "warning"))
        if entry["notes"]:
            body.append("<p>notes:</p><ul>" + "".join(f'<li class="note"><code>{_e(n["code"])}</code>: {_e(n["message"])}</li>'
                                                  for n in entry["notes"]) + "</ul>")
        if d["connectors"]:
            body.append('<p>connector rules:</p><ul class="rules">' + "".join(
                f'<li><code>{_e(c["path"])}</code>: {_e(c["rule"])}</li>' for c in d["connectors"]) + "</ul>")
        body.append(f'<p class="muted">at {_e(_place(entry))}</p>')
        if entry["origins"]:
            body.append('<p class="muted">read from: ' + "; ".join(f"<code>{_e(k)}</code> ← {_e(v)}"
                                                                 for k, v in entry["origins"].items()) + "</p>")
        if _release(entry):
            body.append(f'<p class="muted release">vLLM release: {_e(_release(entry))}</p>')
        parts.append(f'<tr class="deployment" data-outcome="{d["outcome"]}" data-id="{_e(entry["id"])}">'
                     f'<td><code>{_e(entry["id"])}</code></td><td>{_e(entry["format"])}</td>'
                     f'<td class="outcome {d["outcome"]}">{d["outcome"]}</td><td>{json.dumps(d["hma_enabled"])}</td>'
                     f'<td>{_html_tree(d["connectors"]) if d["connectors"] else "—"}</td>'
                     f"<td><details><summary>{_e(summary_text)}</summary>{''.join(body)}</details></td></tr>")
    parts.append("</tbody></table>")
    if data["problems"]:
        parts += ["<h2>File problems</h2>", '<table id="problems"><colgroup><col class="file"><col class="line">'
                  '<col class="code"><col></colgroup><thead><tr><th>File</th><th>Line</th><th>Code</th>'
                  "<th>Problem</th></tr></thead><tbody>"]
        for p in data["problems"]:
            hint = f'<br><span class="muted">hint: {_e(p["hint"])}</span>' if p.get("hint") else ""
            parts.append(f'<tr class="problem"><td><code>{_e(p.get("file", ""))}</code></td><td>{p.get("line") or ""}</td>'
                         f'<td><code>{_e(p["code"])}</code></td><td>{_e(p["message"])}{hint}</td></tr>')
        parts.append("</tbody></table>")
    if data.get("notes"):
        parts += ["<h2>File notes</h2>", '<table id="notes"><colgroup><col class="file"><col class="line">'
                  '<col class="code"><col></colgroup><thead><tr><th>File</th><th>Line</th><th>Code</th>'
                  "<th>Note</th></tr></thead><tbody>"]
        for n in data["notes"]:
            parts.append(f'<tr class="file-note"><td><code>{_e(n.get("file", ""))}</code></td><td>{n.get("line") or ""}</td>'
                         f'<td><code>{_e(n["code"])}</code></td><td>{_e(n["message"])}</td></tr>')
        parts.append("</tbody></table>")
    parts.append(f'<p class="muted">Policy digest <code>{_e(data["policy"]["digest"])}</code>. '
                 "The same files, rules and hma-policy version give the same report.</p></body></html>")
    return "\n".join(parts) + "\n"


# -- PolicyReport -----------------------------------------------------------------------

def _result(entry: dict[str, Any], digest: str) -> dict[str, Any]:
    d = entry["decision"]
    error = _first_error(d)
    if d["outcome"] in ("enabled", "disabled"):
        result = "warn" if d["warnings"] else "pass"
        rule = d["warnings"][0]["code"] if d["warnings"] else f"hma.{d['outcome']}"
        message = f"HMA {d['outcome']}" + (f": {d['warnings'][0]['message']}" if d["warnings"] else "")
    elif d["outcome"] == "error" and error and error["stage"] != "input":
        result, rule = "fail", error["code"]
        message = f"vLLM rejects this deployment ({error['stage']} stage): {error['message']}"
    elif d["outcome"] == "error":
        result, rule = "error", error["code"] if error else "input"
        message = f"the deployment cannot be decided: {error['message'] if error else 'invalid input'}"
    else:
        result = "error"
        rule = next((w["code"] for w in d["warnings"] if w["code"] == "connector.capability_unknown"), "hma.undetermined")
        message = "undetermined: the HMA support of an external connector is not declared in the rules"
    out: dict[str, Any] = {
        "policy": "hma-policy",
        "rule": rule,
        "result": result,
        "scored": result != "warn",
        "category": "vLLM hybrid KV cache manager",
        "source": "hma-policy",
        "message": _printable(message),
        "properties": {
            "deployment": entry["id"],
            "file": entry["file"],
            "format": entry["format"],
            "outcome": d["outcome"],
            "hma_enabled": json.dumps(d["hma_enabled"]),
            "policy_digest": digest,
            "input_digest": entry["input_digest"] or "",
            **({"line": str(entry["line"])} if entry.get("line") else {}),
            **({"chain": ", ".join(entry["chain"])} if len(entry.get("chain") or ()) > 1 else {}),
        },
    }
    for key in ("container", "role"):
        if entry.get(key):
            out["properties"][key] = _printable(entry[key])
    if entry.get("release_hint"):
        out["properties"]["vllm_release"] = _printable(_release(entry))
    if result in ("fail", "error", "warn"):
        out["severity"] = {"fail": "high", "error": "medium", "warn": "low"}[result]
    if entry["resource"]:
        r = entry["resource"]
        ref = {"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"]}
        if r.get("namespace"):
            ref["namespace"] = r["namespace"]
        out["resources"] = [ref]
    return out


def _policy_report(data: dict[str, Any]) -> str:
    digest = data["policy"]["digest"]
    results = [_result(entry, digest) for entry in data["deployments"]]
    for p in data["problems"]:
        results.append({
            "policy": "hma-policy", "rule": p["code"], "result": "error", "scored": True, "severity": "medium",
            "category": "vLLM hybrid KV cache manager", "source": "hma-policy", "message": _printable(p["message"]),
            "properties": {"file": p.get("file", ""), "line": str(p.get("line") or ""), "policy_digest": digest},
        })
    for n in data.get("notes") or ():
        # A file that mentions vLLM's KV options but yields no launch: the policy was not applied to it.
        results.append({
            "policy": "hma-policy", "rule": n["code"], "result": "skip", "scored": False,
            "category": "vLLM hybrid KV cache manager", "source": "hma-policy", "message": _printable(n["message"]),
            "properties": {"file": n.get("file", ""), "line": str(n.get("line") or ""), "policy_digest": digest},
        })
    summary = {key: sum(1 for r in results if r["result"] == key) for key in ("pass", "fail", "warn", "error", "skip")}
    document = {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {
            "name": "hma-policy-audit",
            "labels": {"app.kubernetes.io/managed-by": "hma-policy"},
            "annotations": {"hma-policy.dev/policy-digest": digest, "hma-policy.dev/paths": " ".join(data["paths"]),
                            "hma-policy.dev/version": data["tool"]["version"]},
        },
        "summary": summary,
        "results": results,
    }
    return _json_text(document)
