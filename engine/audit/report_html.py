"""The HTML rendering of an audit report (report.py chooses the format):
one self-contained page: inline CSS, an inline SVG chart of the outcomes,
every connector graph drawn as a nested list; no script, no external
resource, readable without JavaScript.
"""

from __future__ import annotations

import html
import json
from typing import Any

from .report_text import OUTCOMES, VERDICT, first_error, nesting_depth, place_text, printable, release_text

__all__ = ["render_html"]

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
    return html.escape(printable(text), quote=True)


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
        depth = nesting_depth(node["path"])
        if previous is not None:
            if depth > previous:
                out.append("<ul>")
            else:
                out.append("</li>")
                out += ["</ul></li>"] * (previous - depth)
        supports = {True: "true", False: "false", None: "unknown"}[node["supports_hma"]]
        name = node["kv_connector"] if node["kv_connector"] is not None else "(no kv_connector)"
        out.append(f'<li class="node" data-supports="{supports}" title="{_e(node["path"])} ({_e(node["rule"])})">'
                   f'<code class="conn">{_e(name)}</code><span class="verdict">{VERDICT[node["supports_hma"]]}</span>')
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


def render_html(data: dict[str, Any]) -> str:
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
        error = first_error(d)
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
        body.append(f'<p class="muted">at {_e(place_text(entry))}</p>')
        if entry["origins"]:
            body.append('<p class="muted">read from: ' + "; ".join(f"<code>{_e(k)}</code> ← {_e(v)}"
                                                                 for k, v in entry["origins"].items()) + "</p>")
        if release_text(entry):
            body.append(f'<p class="muted release">vLLM release: {_e(release_text(entry))}</p>')
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
