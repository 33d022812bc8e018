"""Results in the formats CI systems read: SARIF 2.1.0, GitHub Actions
workflow commands, and JUnit XML.

Like the other renderers, these read data only: an audit's JSON report
(``AuditReport.to_dict()``), ``hma-policy test --format json``'s dict, or a
list of *findings*, the plain dicts the command line makes of any located
problem::

    {"code": "rules.unknown_fact", "level": "error" | "warning" | "note",
     "message": "...", "file": "rules/decision.yaml" | None, "line": 12 | None, "column": 5 | None}

``file`` is as the shell that ran the command names it (relative to the
current directory, or absolute). SARIF gets one result per finding, its
``ruleId`` the code, and a physical location on the file that holds the
deployment or the rule: a relative path is a URI relative to ``%SRCROOT%``
(the directory the command ran in: a code-scanning upload maps it to the
repository), an absolute one a ``file:`` URI. GitHub annotations are
escaped as the runner reads them (``%``, CR, LF in messages; also ``:`` and
``,`` in properties). JUnit XML has one test case per deployment (an audit)
or per policy test case (``test``).

An audit's findings: each error of a deployment's decision (level error),
each warning (warning), each note the sources made (note), and each file
problem (error). A deployment's line is its own where the source knows it,
the first line for a document or a vLLM config file (the deployment is the
whole file), and no region otherwise (a Kubernetes container: the sources
do not record its line).
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from ..version import __version__

__all__ = ["FORMATS", "render", "audit_findings", "sarif", "github", "junit_audit", "junit_test"]

FORMATS = ("sarif", "github", "junit")
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_WHOLE_FILE_FORMATS = ("document", "vllm-config")


def render(report: dict[str, Any], fmt: str) -> str:
    """An audit's JSON report in ``fmt`` (sarif, github or junit)."""
    if fmt == "junit":
        return junit_audit(report)
    findings = audit_findings(report)
    if fmt == "github":
        return github(findings)
    return sarif(findings, version=report["tool"]["version"], policy=report["policy"])


def _finding(code: str, level: str, message: str, file: str | None, line: int | None,
             column: int | None = None) -> dict[str, Any]:
    return {"code": code, "level": level, "message": message, "file": file, "line": line, "column": column}


def audit_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings of an audit report, deployment by deployment, then the file problems."""
    out = []
    for entry in report["deployments"]:
        line = entry["line"]
        if line is None and entry["format"] in _WHOLE_FILE_FORMATS:
            line = 1
        # Several deployments may share a file: the message names which one.
        who = f" ({entry['id'][len(entry['file']):].lstrip('#:')})" if entry["id"] != entry["file"] else ""
        decision = entry["decision"]
        for error in decision["errors"]:
            out.append(_finding(error["code"], "error", f"{error['message']}{who}", entry["file"], line))
        for warning in decision["warnings"]:
            out.append(_finding(warning["code"], "warning", f"{warning['message']}{who}", entry["file"], line))
        for note in entry["notes"]:
            out.append(_finding(note["code"], "note", f"{note['message']}{who}", entry["file"], line))
    for problem in report["problems"]:
        out.append(_finding(problem["code"], "error", problem["message"], problem.get("file"), problem.get("line")))
    return out


# -- SARIF 2.1.0 ---------------------------------------------------------------------

def _uri(file: str) -> dict[str, str]:
    if os.path.isabs(file):
        return {"uri": Path(file).as_uri()}
    return {"uri": quote(file.replace(os.sep, "/"), safe="/"), "uriBaseId": "%SRCROOT%"}


def sarif(findings: Iterable[dict[str, Any]], *, version: str = __version__, policy: dict[str, Any] | None = None) -> str:
    """A SARIF 2.1.0 log with one run of hma-policy and one result per
    finding; ``policy`` ({source, digest}): the policy used, recorded in the
    run's properties."""
    findings = list(findings)
    codes = sorted({f["code"] for f in findings})
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for f in findings:
        result: dict[str, Any] = {"ruleId": f["code"], "ruleIndex": index[f["code"]], "level": f["level"],
                                  "message": {"text": f["message"]}}
        if f.get("file"):
            physical: dict[str, Any] = {"artifactLocation": _uri(f["file"])}
            if f.get("line"):
                physical["region"] = {"startLine": f["line"], "startColumn": f.get("column") or 1}
            result["locations"] = [{"physicalLocation": physical}]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "hma-policy", "version": version, "semanticVersion": version,
                                "rules": [{"id": code, "name": code, "shortDescription": {"text": code}} for code in codes]}},
            "columnKind": "unicodeCodePoints",
            "results": results,
            **({"properties": {"policy": policy}} if policy else {}),
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False)


# -- GitHub Actions workflow commands ---------------------------------------------------

def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: Iterable[dict[str, Any]]) -> str:
    """One ``::error``/``::warning``/``::notice`` command per finding."""
    lines = []
    for f in findings:
        command = {"error": "error", "warning": "warning"}.get(f["level"], "notice")
        props = []
        if f.get("file"):
            props.append(f"file={_escape_property(f['file'])}")
            if f.get("line"):
                props.append(f"line={int(f['line'])}")
                props.append(f"col={int(f.get('column') or 1)}")
        props.append(f"title={_escape_property(f['code'])}")
        lines.append(f"::{command} {','.join(props)}::{_escape_data(f['message'])}")
    return "\n".join(lines)


# -- JUnit XML -------------------------------------------------------------------------

# XML 1.0 cannot hold these characters at all, even as references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: Any) -> str:
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def _element(tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    element = ET.Element(tag, {key: _xml_text(value) for key, value in attrs.items() if value is not None})
    if text:
        element.text = _xml_text(text)
    return element


def _suites(name: str, suites: list[tuple[str, list[ET.Element]]], policy: dict[str, Any] | None = None) -> str:
    root = _element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite_name, cases in suites:
        counts = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
                  "errors": sum(c.find("error") is not None for c in cases),
                  "skipped": sum(c.find("skipped") is not None for c in cases)}
        suite = _element("testsuite", name=suite_name, **{k: str(v) for k, v in counts.items()})
        if policy:  # the policy used, as each suite's properties
            properties = ET.SubElement(suite, "properties")
            for key, value in policy.items():
                properties.append(_element("property", name=f"policy.{key}", value=value))
        suite.extend(cases)
        root.append(suite)
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def junit_audit(report: dict[str, Any]) -> str:
    """One test case per deployment (and per file problem), in one suite:
    a failure where vLLM rejects the deployment (config or connector stage),
    an error where it cannot be decided (invalid input, undetermined), and a
    pass otherwise (warnings are in its system-out)."""
    cases = []
    for entry in report["deployments"]:
        d = entry["decision"]
        case = _element("testcase", classname=entry["file"], name=entry["id"], file=entry["file"],
                        line=str(entry["line"]) if entry["line"] else None)
        first = d["errors"][0] if d["errors"] else None
        body = "\n".join(f"{m['code']}: {m['message']}" for m in d["errors"] + d["warnings"])
        if first is not None and first["stage"] != "input":
            case.append(_element("failure", body, message=f"vLLM rejects this deployment: {first['message']}", type=first["code"]))
        elif first is not None:
            case.append(_element("error", body, message=f"cannot be decided: {first['message']}", type=first["code"]))
        elif d["outcome"] == "undetermined":
            case.append(_element("error", body, message="undetermined: an external connector's HMA support is not declared",
                                 type="hma.undetermined"))
        elif d["warnings"]:
            case.append(_element("system-out", body))
        cases.append(case)
    for problem in report["problems"]:
        file = problem.get("file") or ""
        case = _element("testcase", classname=file, name=file + (f":{problem['line']}" if problem.get("line") else ""),
                        file=file or None)
        case.append(_element("error", problem["message"], message=problem["message"], type=problem["code"]))
        cases.append(case)
    return _suites("hma-policy audit", [("hma-policy audit of " + " ".join(report["paths"]), cases)], report["policy"])


def junit_test(data: dict[str, Any]) -> str:
    """``hma-policy test``'s JSON dict as JUnit XML: one suite per test file,
    one test case per policy test case; problems that stopped the run (an
    invalid test file) are errors of a suite of their own."""
    suites: dict[str, list[ET.Element]] = {}
    for c in data.get("cases", ()):
        case = _element("testcase", classname=c["file"], name=c["id"].split(" > ", 1)[-1], file=c["file"],
                        line=str(c["line"]) if c.get("line") else None)
        if c["skipped"]:
            case.append(_element("skipped", message=c.get("skip") or "skipped"))
        elif not c["passed"]:
            case.append(_element("failure", "\n".join(c["mismatches"]), message="; ".join(c["mismatches"]), type="tests.failed"))
        suites.setdefault(c["file"], []).append(case)
    for p in data.get("problems", ()):
        where = (p.get("file") or "") + (f":{p['line']}" if p.get("line") else "")
        case = _element("testcase", classname=p.get("file") or "hma-policy test", name=f"{where} {p['code']}".strip(),
                        file=p.get("file"), line=str(p["line"]) if p.get("line") else None)
        case.append(_element("error", p["message"], message=p["message"], type=p["code"]))
        suites.setdefault("problems", []).append(case)
    return _suites("hma-policy test", list(suites.items()), data.get("policy"))
