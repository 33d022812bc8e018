"""The ``policyreport`` rendering of an audit report (report.py chooses the
format): a Kubernetes PolicyReport (``wgpolicyk8s.io/v1alpha2``, the Policy
working group's format), as JSON: one result per deployment and per file
problem. ``pass``: decided, no warning; ``warn``: decided with warnings (not
scored); ``fail``: vLLM rejects the deployment (config or connector stage);
``error``: the deployment could not be decided (invalid input, undetermined,
or an unreadable file).
"""

from __future__ import annotations

import json
from typing import Any

from .report_text import first_error, json_text, printable, release_text

__all__ = ["render_policy_report"]


def _result(entry: dict[str, Any], digest: str) -> dict[str, Any]:
    d = entry["decision"]
    error = first_error(d)
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
        "message": printable(message),
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
            out["properties"][key] = printable(entry[key])
    if entry.get("release_hint"):
        out["properties"]["vllm_release"] = printable(release_text(entry))
    if result in ("fail", "error", "warn"):
        out["severity"] = {"fail": "high", "error": "medium", "warn": "low"}[result]
    if entry["resource"]:
        r = entry["resource"]
        ref = {"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"]}
        if r.get("namespace"):
            ref["namespace"] = r["namespace"]
        out["resources"] = [ref]
    return out


def render_policy_report(data: dict[str, Any]) -> str:
    digest = data["policy"]["digest"]
    results = [_result(entry, digest) for entry in data["deployments"]]
    for p in data["problems"]:
        results.append({
            "policy": "hma-policy", "rule": p["code"], "result": "error", "scored": True, "severity": "medium",
            "category": "vLLM hybrid KV cache manager", "source": "hma-policy", "message": printable(p["message"]),
            "properties": {"file": p.get("file", ""), "line": str(p.get("line") or ""), "policy_digest": digest},
        })
    for n in data.get("notes") or ():
        # A file that mentions vLLM's KV options but yields no launch: the policy was not applied to it.
        results.append({
            "policy": "hma-policy", "rule": n["code"], "result": "skip", "scored": False,
            "category": "vLLM hybrid KV cache manager", "source": "hma-policy", "message": printable(n["message"]),
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
    return json_text(document)
