"""The text and Markdown renderings of an audit report (report.py chooses
the format), and the wording every rendering shares: the headline, the
outcome line, where a launch is, the release, a connector graph as lines,
text made printable, and the JSON text.
"""

from __future__ import annotations

import json
from typing import Any

from .sources.document import NOT_A_CONFIG
from .walk import HIDDEN, LINK

try:  # optional: the standard-library path below gives the same text
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    orjson = None  # type: ignore[assignment]

__all__ = ["render_text", "render_markdown", "json_text", "printable", "nesting_depth", "outcome_line", "headline",
           "first_error", "release_text", "place_text", "OUTCOMES", "VERDICT"]

OUTCOMES = ("enabled", "disabled", "error", "undetermined")
VERDICT = {True: "supports HMA", False: "does not support HMA", None: "unknown"}
_CHILDREN = "/kv_connector_extra_config/connectors/"
_HIDDEN_SHOWN = 8  # hidden directories named on the text report's line; the JSON report lists them all


def json_text(data: Any) -> str:
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


def printable(text: Any) -> str:
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def nesting_depth(path: str) -> int:
    return path.count(_CHILDREN)


def outcome_line(summary: dict[str, Any], hidden: int = 0) -> str:
    """The counts of outcomes, problems, notes and skipped files; ``hidden``
    of the skipped entries have lines of their own (hidden directories, and
    the files ``unread`` tells)."""
    outcomes = ", ".join(f"{name} {summary['outcomes'][name]}" for name in OUTCOMES)
    extra = f"; {summary['problems']} file problem(s)" if summary["problems"] else ""
    extra += f"; {summary['notes']} file note(s)" if summary.get("notes") else ""
    skipped = summary["files"]["skipped"] - hidden
    return f"outcomes: {outcomes}{extra}" + (f"; {skipped} file(s) skipped (not deployment sources)" if skipped else "")


def hidden_line(hidden: list[str]) -> str:
    """The hidden directories the walk did not enter, by name: CI folders
    (``.ci``, ``.gitlab``) hold launch scripts, and a count of skipped files
    would not tell a reader they went unread."""
    shown = ", ".join(printable(name) for name in hidden[:_HIDDEN_SHOWN])
    if len(hidden) > _HIDDEN_SHOWN:
        shown += f", and {len(hidden) - _HIDDEN_SHOWN} more"
    return f"not entered: {len(hidden)} hidden director{'y' if len(hidden) == 1 else 'ies'} ({shown}); audit one by giving its path"


def unread(reason: str) -> bool:
    """Whether a skipped file looked like a deployment source and was still
    not read (a mapping of vLLM's options but for a key, a symbolic link):
    the text report names those files and why, where it only counts the
    files that are no source at all."""
    return reason.startswith((NOT_A_CONFIG, LINK))


def headline(data: dict[str, Any]) -> str:
    s = data["summary"]
    paths = " ".join(data["paths"])
    return (f"hma-policy audit of {paths}: {s['deployments']} deployment(s) in {s['files']['examined']} file(s) "
            f"(policy {data['policy']['source']}, {data['policy']['digest'][:19]})")


def _tree_lines(connectors: list[dict[str, Any]]) -> list[str]:
    """The connector graph as box-drawing lines, from the pre-order list."""
    depths = [nesting_depth(c["path"]) for c in connectors]
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
        lines.append(f"{prefix}{printable(name)}: {VERDICT[node['supports_hma']]}  [{node['path']}] ({node['rule']})")
    return lines


def first_error(decision: dict[str, Any]) -> dict[str, Any] | None:
    return decision["errors"][0] if decision["errors"] else None


def release_text(entry: dict[str, Any]) -> str:
    """The release what deploys it names; where the decision was made as
    another (one the rules do not hold, or --vllm-version), that one, with
    the decision's own account of why."""
    hint = entry.get("release_hint")
    if not hint:
        return ""
    used = (entry.get("decision") or {}).get("vllm") or {}
    if not hint["version"]:  # nothing named one: the release that decided it (the default, --vllm-version)
        return f"{used['release']} ({used['source']})" if used.get("release") else f"unknown ({hint['origin']})"
    if used.get("release") and used["release"] != hint["version"]:
        return f"{used['release']} ({used['source']})"
    return f"{hint['version']} ({hint['origin']})"


# -- text -----------------------------------------------------------------------

def place_text(entry: dict[str, Any]) -> str:
    """Where a launch is: file and line, its object, container and role, and
    the files merged to make it."""
    parts = [entry["file"] + (f":{entry['line']}" if entry.get("line") else "")]
    r = entry.get("resource")
    if r:
        parts.append(f"{r.get('kind')} {r['namespace'] + '/' if r.get('namespace') else ''}{r.get('name')}".rstrip())
    parts += [f"{key} {entry[key]}" for key in ("container", "role") if entry.get(key)]
    if len(entry.get("chain") or ()) > 1:
        parts.append("from " + " + ".join(entry["chain"]))
    return " · ".join(parts)


def render_text(data: dict[str, Any]) -> str:
    hidden = [s["file"] for s in data.get("skipped", ()) if s["reason"] == HIDDEN]
    unread_files = [s for s in data.get("skipped", ()) if unread(s["reason"])]
    out = [headline(data), outcome_line(data["summary"], len(hidden) + len(unread_files))]
    out += [hidden_line(hidden)] if hidden else []
    for entry in data["deployments"]:
        d = entry["decision"]
        head = f"{printable(entry['id'])}: {d['outcome']}"
        if d["hma_enabled"] is not None:
            head += f" (hma_enabled: {json.dumps(d['hma_enabled'])})"
        if d["warnings"]:
            head += "  warnings: " + ", ".join(w["code"] for w in d["warnings"])
        out.append(head)
        out.append(f"  at {printable(place_text(entry))}")
        for error in d["errors"]:
            out.append(f"  error {error['code']} [{error['stage']}] at {error['path'] or '/'}: {printable(error['message'])}")
            if error.get("hint"):
                out.append(f"    hint: {printable(error['hint'])}")
            top = error["path"].split("/")[1] if error["path"].count("/") >= 1 else ""
            origin = entry["origins"].get(top.replace("-", "_"))
            if origin:
                out.append(f"    from: {printable(origin)}")
        for note in entry["notes"]:
            out.append(f"  note {note['code']}: {printable(note['message'])}")
        if release_text(entry):
            out.append(f"  vllm release: {printable(release_text(entry))}")
        if entry.get("remediation") and d["outcome"] != "error":
            out.append(f"  remediation: {printable(entry['remediation'])}")
    summary = data["summary"]
    if summary.get("by_connector"):
        out.append("by connector (deployments; nodes that support HMA / do not / unknown):")
        for name, row in summary["by_connector"].items():
            out.append(f"  {printable(name)}: {row['deployments']}; {row['supports_hma']} / {row['does_not']} / {row['unknown']}")
    if summary.get("by_release"):
        out.append("by vLLM release (deployments; of them, decided as the default: "
                   "nothing names a release the rules hold):")
        for release, row in summary["by_release"].items():
            out.append(f"  {printable(release)}: {row['deployments']}; {row['default']}")
    if data["problems"]:
        out.append("problems:")
        for p in data["problems"]:
            where = p.get("file", "") + (f":{p['line']}" if p.get("line") else "")
            out.append(f"  {printable(where)}: {p['code']}: {printable(p['message'])}")
            if p.get("hint"):
                out.append(f"    hint: {printable(p['hint'])}")
    if data.get("notes"):
        out.append("file notes:")
        for n in data["notes"]:
            where = n.get("file", "") + (f":{n['line']}" if n.get("line") else "")
            out.append(f"  {printable(where)}: {n['code']}: {printable(n['message'])}")
    if unread_files:
        out.append("skipped, not read:")
        out += [f"  {printable(s['file'])}: {printable(s['reason'])}" for s in unread_files]
    return "\n".join(out)


# -- Markdown -----------------------------------------------------------------------

def _md_code(text: Any) -> str:
    """A Markdown code span that holds any text (a fence longer than any backtick run)."""
    text = printable(text).replace("|", "\\|")
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
    text = printable(text)
    for ch in "\\`*[]<>|":
        text = text.replace(ch, "\\" + ch)
    return text


def render_markdown(data: dict[str, Any]) -> str:
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
        error = first_error(d)
        error_text = f"{_md_code(error['code'])} ({error['stage']})" if error else ""
        warnings = ", ".join(_md_code(w["code"]) for w in d["warnings"])
        out.append(f"| {_md_code(entry['id'])} | {entry['format']} | **{d['outcome']}** | {json.dumps(d['hma_enabled'])} "
                   f"| {error_text} | {warnings} | {_md_text(place_text(entry))} |")
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
    placed = [e for e in data["deployments"] if place_text(e) or release_text(e)]
    if placed:
        out += ["## Where each launch comes from", "", "| Deployment | Line | Place | vLLM release |", "|---|---:|---|---|"]
        for entry in placed:
            out.append(f"| {_md_code(entry['id'])} | {entry.get('line') or ''} | {_md_text(place_text(entry))} "
                       f"| {_md_text(release_text(entry))} |")
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
