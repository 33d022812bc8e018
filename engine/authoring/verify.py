"""Verify: exhaustive checks of a policy over its reachable fact space.

The step table (:mod:`hma_policy.core.table`) walks every reachable input of
every step, keyed by the classes of the facts each step reads. The verifier
walks the same space with the same keys, and asks durable-rules, for each
input, which rules of its step match (the input asserted as a durable-rules
fact, which every matching rule fires on). From those answers, for every step:

- gaps: no rule matches and the step has no default (``verify.gap``);
- conflicts: two rules match under hit policy ``unique``, or two rules with
  different values under ``any`` (``verify.conflict``);
- order dependence: two rules with different values match under hit policy
  ``first`` (reported as information: the order decides, by design);
- rules that never match (``verify.unreachable``) or never win
  (``verify.shadowed``); a rule that never matches because it tests the
  release (``vllm_minor``, ``vllm_patch``) against another release of its
  epoch is information (``verify.other_release``), not an error, and so is
  a registry lookup that repeats an earlier one (``verify.registry_alias``:
  two registered names for one class);
- the compiled ruleset picks the first matching rule in order
  (``verify.runtime_mismatch`` otherwise).

Every finding carries the facts of a combination and, where one can be found,
a deployment document that reproduces it (:mod:`.witness`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core._durable import RuleRuntime, load_rulesets
from ..core.compiler import Compiled, compile_policy
from ..core.policy import Policy
from ..core.model import Rule, StepDef
from ..core.table import Row, State, StepKey, reachable

__all__ = ["Finding", "Report", "verify", "for_other_release", "can_fire"]


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str  # error | info
    ruleset: str
    step: str
    rules: tuple[str, ...]
    message: str
    facts: tuple[tuple[str, Any], ...] = ()
    document: Any = None
    file: str = ""
    path: str = ""
    line: int | None = None
    column: int | None = None
    witness: tuple[tuple[str, Any], ...] = ()
    reproduced: bool | None = None
    key: tuple = ()  # the step input, as the table keys it

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code, "severity": self.severity, "ruleset": self.ruleset, "step": self.step,
            "rules": list(self.rules), "message": self.message, "facts": dict(self.facts),
            "document": self.document, "reproduced": self.reproduced, "file": self.file, "path": self.path,
            "line": self.line, "column": self.column,
        }


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    combinations: dict[str, int] = field(default_factory=dict)
    runtime_checks: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    rules_total: int = 0
    rules_fired: int = 0
    reported: set[tuple] = field(default_factory=set, repr=False)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": not self.errors,
            "combinations": self.combinations, "runtime_checks": self.runtime_checks,
            "decision_outcomes": self.outcomes, "rules": {"total": self.rules_total, "fired": self.rules_fired},
            "findings": [f.to_dict() for f in self.findings],
        }


class _Seen:
    """Every step input the walk reached, with the first state that reached it."""

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[tuple, tuple[State, Row]]] = {}
        self.combinations: dict[str, int] = {}
        self.won: set[str] = set()

    def __call__(self, step: StepDef, state: State, key: tuple, row: Row) -> None:
        self.combinations[step.ruleset] = self.combinations.get(step.ruleset, 0) + 1
        seen = self.inputs.setdefault((step.ruleset, step.name), {})
        seen.setdefault(key, (state, row))
        if row.rule is not None:
            self.won.add(row.rule.id)


def verify(policy: Policy, *, witnesses: bool = True) -> Report:
    """Walk every reachable step input of ``policy`` and check each step."""
    model = policy.model
    table = policy.table
    seen = _Seen()

    def answer(key: StepKey, inputs: list[tuple]) -> list[Row]:
        # The table already holds every reachable input (the same walk filled it).
        rows = table.rows(key.step.ruleset, key.step.name)
        return [rows[k] if k in rows else table.row(key.step.ruleset, key.step.name, dict(zip(key.reads, k)))
                for k in inputs]

    finals = reachable(model, answer, seen)
    report = Report(combinations={name: seen.combinations.get(name, 0) for name in ("offloading", "node", "decision", "result")})
    # The policy's own rules, asked with facts: every matching rule runs.
    compiled = compile_policy(model)
    probes = load_rulesets(compiled.definitions)
    matched_any: set[str] = set()
    try:
        for ruleset, steps in model.steps.items():
            for step in steps:
                inputs = seen.inputs.get((ruleset, step.name), {})
                key = table.keys[(ruleset, step.name)]
                matches = _matches(probes, compiled, key, step, list(inputs))
                report.runtime_checks += len(inputs)
                for k, (state, row) in inputs.items():
                    matched = matches[k]
                    matched_any.update(r.id for r in matched)
                    _step_findings(step, key, k, state, row, matched, report)
    finally:
        for probe in probes:
            probe.close()
    for state in finals:
        outcome = "gap" if state.stage == "gap" else state.facts.get("outcome", "undefined")
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
    _rule_findings(model.steps, seen.won, matched_any, report, model.release_facts)
    if witnesses:
        from .witness import attach_documents
        report.findings = attach_documents(report.findings, policy)
    order = {"error": 0, "info": 1}
    report.findings.sort(key=lambda f: (order[f.severity], f.file, f.path, f.code, f.rules))
    return report


def can_fire(rule: Rule, step: StepDef, release: dict[str, int]) -> bool:
    """Whether ``rule`` of ``step`` can fire for the policy's release at all:
    not when it tests another release of its epoch, nor when it repeats an
    earlier registry lookup (what rule coverage counts)."""
    return not for_other_release(rule, release) and _registry_alias(rule, step) is None


def _registry_alias(rule: Rule, step: StepDef) -> Rule | None:
    """The earlier registry rule of ``step`` that ``rule`` repeats (the same
    conditions and value), if any: two registry entries whose class is the
    same (vLLM 0.9.x registers PyNcclConnector and MooncakeConnector as
    simple_connector.SimpleConnector) compile to one module-path lookup twice."""
    if not rule.id.startswith("registry."):
        return None
    return next((r for r in step.rules[:step.rules.index(rule)]
                 if r.id.startswith("registry.") and r.when == rule.when and r.value == rule.value), None)


# How a rule's condition on a release fact reads the policy's one value.
_RELEASE_TESTS = {
    "eq": lambda v, o: v == o, "ne": lambda v, o: v != o, "in": lambda v, o: v in o, "not_in": lambda v, o: v not in o,
    "lt": lambda v, o: v < o, "le": lambda v, o: v <= o, "gt": lambda v, o: v > o, "ge": lambda v, o: v >= o,
}


def for_other_release(rule: Rule, release: dict[str, int]) -> bool:
    """Whether one of the rule's conditions on the release facts fails for
    this policy's release: the rule is written for another release of the
    epoch, so it cannot match here whatever the document says."""
    return any(fact in release and op in _RELEASE_TESTS and not _RELEASE_TESTS[op](release[fact], operand)
               for fact, op, operand in rule.when)


def _matches(probes: tuple[RuleRuntime, ...], compiled: Compiled, key: StepKey, step: StepDef,
             inputs: list[tuple]) -> dict[tuple, list[Rule]]:
    """For each input, the rules of ``step`` that match it, in order, as durable-rules says."""
    ran = compiled.every(lambda ruleset, facts: probes[ruleset].match_all(facts), [key.event(k) for k in inputs]) if inputs else []
    position = {id(rule): index for index, rule in enumerate(step.rules)}
    return {k: sorted(matched, key=lambda rule: position[id(rule)]) for k, matched in zip(inputs, ran)}


def _facts_of(key: StepKey, k: tuple) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(zip(key.reads, k)))


def _step_findings(step: StepDef, key: StepKey, k: tuple, state: State, row: Row, matched: list[Rule], report: Report) -> None:
    def add(code: str, severity: str, rules: tuple[str, ...], message: str) -> None:
        # One finding per code and rules in a step: the first input that shows it.
        if (code, step.ruleset, step.name, rules) in report.reported:
            return
        report.reported.add((code, step.ruleset, step.name, rules))
        report.findings.append(Finding(code, severity, step.ruleset, step.name, rules, message, _facts_of(key, k),
                                       None, step.file, step.path, step.line, step.column,
                                       tuple(sorted(state.witness.items(), key=lambda kv: kv[0])), key=k))

    first = matched[0] if matched else None
    if (first.id if first else None) != (row.rule.id if row.rule else None):
        add("verify.runtime_mismatch", "error", (first.id if first else "(default)", row.rule.id if row.rule else "(default)"),
            f"durable-rules picked `{row.rule.id if row.rule else 'the default'}` where the first matching rule in order is "
            f"`{first.id if first else 'the default'}`")
    if not matched and step.default is None:
        add("verify.gap", "error", (), f"no rule of step `{step.name}` matches and it has no default")
        return
    if len(matched) < 2:
        return
    a, b = matched[0], matched[1]
    if step.hit == "unique":
        add("verify.conflict", "error", (a.id, b.id), f"rules `{a.id}` and `{b.id}` both match (hit policy unique)")
        return
    differing = next((r for r in matched[1:] if r.value != a.value), None)
    if differing is None:
        return
    if step.hit == "any":
        add("verify.conflict", "error", (a.id, differing.id),
            f"rules `{a.id}` and `{differing.id}` both match with different values (hit policy any)")
    else:
        add("verify.order", "info", (a.id, differing.id), f"`{a.id}` wins over `{differing.id}` by order (hit policy first)")


def _rule_findings(steps: dict[str, tuple[StepDef, ...]], won: set[str], matched: set[str], report: Report,
                   release: dict[str, int]) -> None:
    total = fired = 0
    for ruleset, defs in steps.items():
        for step in defs:
            for rule in step.rules:
                total += 1
                if rule.id in won:
                    fired += 1
                elif rule.id in matched and (alias := _registry_alias(rule, step)) is not None:
                    report.findings.append(Finding(
                        "verify.registry_alias", "info", ruleset, step.name, (alias.id, rule.id),
                        f"rule `{rule.id}` is the lookup `{alias.id}` makes: two registry entries name the same "
                        f"module and class",
                        file=rule.file, path=rule.path, line=rule.line, column=rule.column))
                elif rule.id in matched:
                    report.findings.append(Finding(
                        "verify.shadowed", "error", ruleset, step.name, (rule.id,),
                        f"rule `{rule.id}` never fires: an earlier rule of step `{step.name}` always wins where it matches",
                        file=rule.file, path=rule.path, line=rule.line, column=rule.column))
                elif for_other_release(rule, release):
                    report.findings.append(Finding(
                        "verify.other_release", "info", ruleset, step.name, (rule.id,),
                        f"rule `{rule.id}` is for other releases of its epoch: its release condition does not hold "
                        f"for {', '.join(f'{k} {v}' for k, v in sorted(release.items()))}",
                        file=rule.file, path=rule.path, line=rule.line, column=rule.column))
                else:
                    report.findings.append(Finding(
                        "verify.unreachable", "error", ruleset, step.name, (rule.id,),
                        f"rule `{rule.id}` never matches any reachable combination of facts",
                        file=rule.file, path=rule.path, line=rule.line, column=rule.column))
    report.rules_total, report.rules_fired = total, fired
