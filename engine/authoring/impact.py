"""Impact of a rule change (``hma-policy diff``): decide every deployment of a
corpus under two policies and report what changes, and which rule is
responsible.

The deployments are those ``hma-policy audit`` finds (documents, vLLM config
files, shell scripts, Dockerfiles, Kubernetes manifests): the corpus is
audited once under each policy, and the two audits' entries are paired by
file, line and Kubernetes resource. A deployment that cannot be read (a file
problem, or a command line whose values the file does not hold) is listed as
not decided, never counted as unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..core.errors import InputError
from ..policyref import rules_from_git  # (its home: the `git:` scheme of a policy reference)

__all__ = ["Change", "Impact", "rules_from_git", "impact"]


def _summary(decision: dict[str, Any]) -> dict[str, Any]:
    """What a change is judged on, from a decision's JSON (``Decision.to_dict()``)."""
    first = decision["errors"][0] if decision["errors"] else None
    return {
        "outcome": decision["outcome"], "hma_enabled": decision["hma_enabled"],
        "error": f"{first['stage']}:{first['code']}" if first else None,
        "warnings": sorted({w["code"] for w in decision["warnings"]}),
        "steps": (),
        "trace": tuple(decision["trace"]),
    }


def _steps(policy: Any, document: Any) -> tuple[tuple[Any, ...], ...]:
    """The steps of ``document``'s decision under ``policy``, in evaluation
    order (an audit's report keeps only the trace; a change's cause needs
    every step)."""
    try:
        decision = policy.decide(document)
    except InputError:
        return ()
    return tuple((s.ruleset, s.node, s.step, s.rule, s.value) for s in decision.steps)


@dataclass
class Change:
    source: str
    before: dict[str, Any]
    after: dict[str, Any]
    cause: dict[str, Any] | None

    @property
    def kind(self) -> str:
        b, a = self.before, self.after
        if b["outcome"] != a["outcome"]:
            return f"{b['outcome']} -> {a['outcome']}"
        if b["error"] != a["error"]:
            return "error changed"
        if b["hma_enabled"] != a["hma_enabled"]:
            return "hma_enabled changed"
        return "warnings changed"

    def to_dict(self) -> dict[str, Any]:
        strip = lambda s: {k: v for k, v in s.items() if k not in ("steps", "trace")}  # noqa: E731
        return {"source": self.source, "kind": self.kind, "before": strip(self.before), "after": strip(self.after), "cause": self.cause}


@dataclass
class Impact:
    base: str
    head: str
    documents: int = 0
    changes: list[Change] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for change in self.changes:
            out[change.kind] = out.get(change.kind, 0) + 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base, "head": self.head, "documents": self.documents,
            "changed": len(self.changes), "unchanged": self.documents - len(self.changes),
            "by_kind": self.counts(), "changes": [c.to_dict() for c in self.changes],
            "unreadable": [{"source": s, "problem": p} for s, p in self.unreadable],
            "rules": {"no_longer_fire": self.dead, "newly_fire": self.new, "removed": self.removed},
        }


def _cause(before: dict[str, Any], after: dict[str, Any], base_steps: set, head_steps: set) -> dict[str, Any] | None:
    """The first step, in evaluation order, where the two runs part: the root of the change.

    A step that only one policy defines was added or removed by the change
    (``base_steps``/``head_steps``: the (ruleset, step) names each defines);
    otherwise the step's rule or value changed. The two policies may differ
    in many steps (the rules of two vLLM releases): a step only one defines
    that concluded nothing (its default) caused nothing, and neither did a
    step the other run never reached because an earlier step ended it.
    """
    aligned = _aligned_cause(before["steps"], after["steps"], base_steps, head_steps)
    if aligned is not None:
        return aligned
    b_steps, a_steps = before["steps"], after["steps"]
    side = lambda s: {"rule": s[3], "value": s[4]}  # noqa: E731
    for i in range(max(len(b_steps), len(a_steps))):
        b = b_steps[i] if i < len(b_steps) else None
        a = a_steps[i] if i < len(a_steps) else None
        if b == a:
            continue
        if a is not None and (a[0], a[2]) not in base_steps:
            return {"ruleset": a[0], "node": a[1], "step": a[2], "before": None, "after": side(a)}
        if b is not None and (b[0], b[2]) not in head_steps:
            return {"ruleset": b[0], "node": b[1], "step": b[2], "before": side(b), "after": None}
        step = a if a is not None else b
        assert step is not None  # a == b (both None included) was skipped above
        other = next((s for s in b_steps if s[:3] == step[:3]), None)
        now = next((s for s in a_steps if s[:3] == step[:3]), None)
        return {"ruleset": step[0], "node": step[1], "step": step[2],
                "before": side(other) if other else None, "after": side(now) if now else None}
    return None


def _aligned_cause(b_steps: Any, a_steps: Any, base_steps: set, head_steps: set) -> dict[str, Any] | None:
    """The first step (by its place in either run) that both runs took with
    another rule or value, or that only one policy defines and a rule of it
    fired; None when there is none."""
    side = lambda s: {"rule": s[3], "value": s[4]}  # noqa: E731
    b_at = {s[:3]: s for s in b_steps}
    a_at = {s[:3]: s for s in a_steps}
    place = {**{s[:3]: (i, 1) for i, s in enumerate(b_steps)}, **{s[:3]: (i, 0) for i, s in enumerate(a_steps)}}
    for key in sorted(place, key=place.__getitem__):
        b, a = b_at.get(key), a_at.get(key)
        cause = {"ruleset": key[0], "node": key[1], "step": key[2]}
        if b is not None and a is not None:
            if (b[3], b[4]) != (a[3], a[4]):
                return {**cause, "before": side(b), "after": side(a)}
        elif a is not None and (a[0], a[2]) not in base_steps and a[3] is not None:
            return {**cause, "before": None, "after": side(a)}
        elif b is not None and (b[0], b[2]) not in head_steps and b[3] is not None:
            return {**cause, "before": side(b), "after": None}
    return None


def _key(entry: Any) -> tuple[Any, ...]:
    d = entry.deployment
    return (d.file, d.line, d.resource, d.id)


def impact(base_policy: Any, head_policy: Any, paths: Iterable[str], *, base_name: str, head_name: str,
           config_roots: Iterable[str] = ()) -> Impact:
    """Audit ``paths`` under both policies (loaded, left open) and compare
    every deployment's decision."""
    from ..audit.run import audit

    paths, config_roots = list(paths), list(config_roots)
    report = Impact(base=f"{base_name} ({base_policy.digest[:19]})", head=f"{head_name} ({head_policy.digest[:19]})")
    before_audit = audit(paths, policy=base_policy, config_roots=config_roots)
    after_audit = audit(paths, policy=head_policy, config_roots=config_roots)
    for result in before_audit.files:
        for problem in result.problems:
            report.unreadable.append((result.file, f"{problem.code}: {problem.message}"))
    fired_base: set[str] = set()
    fired_head: set[str] = set()
    base_steps = {(name, s.name) for name, steps in base_policy.model.steps.items() for s in steps}
    head_steps = {(name, s.name) for name, steps in head_policy.model.steps.items() for s in steps}
    heads = {_key(entry): entry for entry in after_audit.entries}
    for entry in before_audit.entries:
        source = entry.deployment.id
        other = heads.pop(_key(entry), None)
        if other is None:
            report.unreadable.append((source, "found under the base policy only"))
            continue
        document = entry.deployment.document
        if document is None:  # the file does not hold the deployment's values: nothing was decided
            first = entry.decision["errors"][0] if entry.decision["errors"] else None
            report.unreadable.append((source, f"{first['code']}: {first['message']}" if first else "cannot be read"))
            continue
        report.documents += 1
        before, after = _summary(entry.decision), _summary(other.decision)
        fired_base.update(before["trace"])
        fired_head.update(after["trace"])
        keys = ("outcome", "hma_enabled", "error", "warnings")
        if any(before[k] != after[k] for k in keys):
            before["steps"], after["steps"] = _steps(base_policy, document), _steps(head_policy, document)
            report.changes.append(Change(source, before, after, _cause(before, after, base_steps, head_steps)))
    report.unreadable += [(entry.deployment.id, "found under the head policy only") for entry in heads.values()]
    base_rules = {r.id for steps in base_policy.model.steps.values() for s in steps for r in s.rules}
    head_rules = {r.id for steps in head_policy.model.steps.values() for s in steps for r in s.rules}
    report.dead = sorted((fired_base - fired_head) & head_rules)
    report.new = sorted(fired_head - fired_base)
    report.removed = sorted(base_rules - head_rules)
    return report


def render(report: Impact) -> str:
    lines = [f"impact of {report.head} over {report.base} on {report.documents} documents: "
             f"{len(report.changes)} changed, {report.documents - len(report.changes)} unchanged"]
    for kind, count in report.counts().items():
        lines.append(f"  {kind}: {count}")
    for change in report.changes:
        b, a = change.before, change.after
        lines.append(f"{change.source}: {b['outcome']} -> {a['outcome']} (hma_enabled {json.dumps(b['hma_enabled'])} -> {json.dumps(a['hma_enabled'])})")
        if b["error"] != a["error"]:
            lines.append(f"    error: {json.dumps(b['error'])} -> {json.dumps(a['error'])}")
        gone = [w for w in b["warnings"] if w not in a["warnings"]]
        added = [w for w in a["warnings"] if w not in b["warnings"]]
        if gone or added:
            lines.append("    warnings: " + " ".join([f"-{w}" for w in gone] + [f"+{w}" for w in added]))
        if change.cause:
            c = change.cause
            where = f" at {c['node']}" if c["node"] else ""
            side = lambda x: "(step absent)" if x is None else f"{x['rule'] or 'default'} = {x['value']!r}"  # noqa: E731
            lines.append(f"    cause: {c['ruleset']} step `{c['step']}`{where}: {side(c['before'])} -> {side(c['after'])}")
    for source, problem in report.unreadable:
        lines.append(f"{source}: not decided: {problem}")
    if report.dead:
        lines.append("rules that no longer fire on this corpus: " + ", ".join(report.dead))
    if report.new:
        lines.append("rules that now fire: " + ", ".join(report.new))
    if report.removed:
        lines.append("rules removed: " + ", ".join(report.removed))
    return "\n".join(lines)
