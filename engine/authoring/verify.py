"""Stage 6, verify: exhaustive checks of a policy over its finite fact space.

Once connector names are mapped to registry entries, every fact a rule reads
ranges over a finite set: booleans, closed enumerations, the values earlier
steps can give, and for open strings and integers one representative per class
of values that no condition tells apart. The verifier enumerates every
reachable combination, step by step (facts are introduced when a step first
reads them and dropped once no later step or constraint needs them; identical
states are merged), and for every step checks:

- gaps: no rule matches and the step has no default (``verify.gap``);
- conflicts: two rules match under hit policy ``unique``, or two rules with
  different values under ``any`` (``verify.conflict``);
- order dependence: two rules with different values match under hit policy
  ``first`` (reported as information: the order decides, by design);
- rules that never match (``verify.unreachable``) or never win
  (``verify.shadowed``);
- the compiled durable-rules ruleset picks the same rule as the reference
  semantics for every distinct combination (``verify.runtime_mismatch``):
  the runtime's own agenda order never changes a decision.

Every finding carries the facts of a combination and, where one can be found,
a deployment document that reproduces it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..core.evaluate import Evaluator
from ..core.facts import FACTS
from ..core.rules import PolicyModel, Rule, StepDef

__all__ = ["Finding", "Report", "verify"]

OTHER = "\u2039other\u203a"  # a string no rule can mention (the rules schema forbids none, but no name looks like this)


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
    witness: tuple[tuple[str, Any], ...] = ()
    reproduced: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code, "severity": self.severity, "ruleset": self.ruleset, "step": self.step,
            "rules": list(self.rules), "message": self.message, "facts": dict(self.facts),
            "document": self.document, "reproduced": self.reproduced, "file": self.file, "path": self.path,
        }


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    combinations: dict[str, int] = field(default_factory=dict)
    runtime_checks: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    rules_total: int = 0
    rules_fired: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": not self.errors,
            "states": self.states, "combinations": self.combinations, "runtime_checks": self.runtime_checks,
            "decision_outcomes": self.outcomes, "rules": {"total": self.rules_total, "fired": self.rules_fired},
            "findings": [f.to_dict() for f in self.findings],
        }


# -- reference semantics of conditions --------------------------------------

def holds(op: str, value: Any, operand: Any) -> bool:
    """The meaning of one condition (the compiler maps the same to durable-rules)."""
    if op == "eq":
        return value == operand and type(value) is type(operand)
    if op == "ne":
        return not (value == operand and type(value) is type(operand))
    if op == "in":
        return any(value == o and type(value) is type(o) for o in operand)
    if op == "not_in":
        return not any(value == o and type(value) is type(o) for o in operand)
    if op == "contains":
        return operand in value
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return {"lt": value < operand, "le": value <= operand, "gt": value > operand, "ge": value >= operand}[op]


def matches(rule: Rule, facts: Mapping[str, Any]) -> bool:
    return all(holds(op, facts[fact], operand) for fact, op, operand in rule.when)


# -- domains ----------------------------------------------------------------

def _atoms(steps: Iterable[StepDef]) -> dict[str, list[tuple[str, Any]]]:
    atoms: dict[str, list[tuple[str, Any]]] = {}
    for step in steps:
        for rule in step.rules:
            for fact, op, operand in rule.when:
                atoms.setdefault(fact, []).append((op, operand))
    return atoms


def _domain(fact: str, spec: Mapping[str, Any], atoms: list[tuple[str, Any]]) -> list[Any]:
    kind = spec["type"]
    if kind == "bool":
        candidates: list[Any] = [False, True]
    elif spec.get("values") is not None:
        candidates = list(spec["values"])
    elif kind == "str":
        literals = []
        for op, operand in atoms:
            literals += list(operand) if op in ("in", "not_in") else [operand]
        candidates = list(dict.fromkeys([v for v in literals if isinstance(v, str)] + ["", OTHER]))
    elif kind == "int":
        numbers = {0, 1, 2, 3}
        for op, operand in atoms:
            for v in (operand if op in ("in", "not_in") else [operand]):
                if isinstance(v, int) and not isinstance(v, bool):
                    numbers |= {v - 1, v, v + 1}
        candidates = sorted(n for n in numbers if n >= 0)
    else:  # names
        literals = [operand for op, operand in atoms if op == "contains"]
        candidates = [[]] + [[v] for v in dict.fromkeys(literals)] + [[OTHER]]
    if kind in ("int", "bool") or spec.get("values") is not None:
        # Small already; and constraints tell apart values no condition does
        # (children 1 from 2, top_setup ok from none).
        return candidates
    # One representative per class of values that no condition tells apart.
    classes: dict[tuple, Any] = {}
    for value in candidates:
        signature = tuple(holds(op, value, operand) for op, operand in atoms)
        classes.setdefault(signature, value)
    return list(classes.values())


# Consistency of input facts: how the facts are read from a document (facts.py),
# not policy. Each constraint is checked once all of its facts are assigned.
Constraint = tuple[tuple[str, ...], Callable[..., bool]]


def _constraints(model: PolicyModel) -> dict[str, list[Constraint]]:
    containers = model.containers
    return {
        "offloading": [],
        "node": [
            (("name_set", "name"), lambda s, n: s or n == ""),
            (("module_path", "module_path_value"), lambda m, v: (v == "") == (m != "set")),
            (("is_child", "sets_engine_id"), lambda c, e: c or not e),
            (("name", "children"), lambda n, k: n in containers or k == 0),
            (("connectors", "children"), lambda c, k: c == "present" or k == 0),
            (("children", "first_nonsupported"), lambda k, f: k > 0 or f == "none"),
            (("children", "first_child_setup"), lambda k, s: k > 0 or s == "ok"),
            (("children", "first_child_construct"), lambda k, s: k > 0 or s == "ok"),
            (("first_nonsupported", "after_unknown"), lambda f, a: f == "unknown" or a == "none"),
            (("children", "after_unknown"), lambda k, a: k > 1 or a == "none"),
        ],
        "decision": [
            (("has_kv_transfer_config", "top_name"), lambda h, n: h or n == ""),
            (("has_kv_transfer_config", "configured_top_name"), lambda h, n: h or n == ""),
            (("has_kv_transfer_config", "configured_child_names"), lambda h, n: h or n == []),
            (("configured_top_name", "configured_child_names"), lambda t, n: t in containers or n == []),
            (("has_kv_transfer_config", "graph_support"), lambda h, g: h == (g != "none")),
            (("has_kv_transfer_config", "top_setup"), lambda h, g: h == (g != "none")),
            (("has_kv_transfer_config", "top_construct"), lambda h, g: h == (g != "none")),
        ],
    }


# -- enumeration ------------------------------------------------------------

@dataclass
class _State:
    facts: dict[str, Any]
    witness: dict[str, Any]
    halted: str | None = None

    def key(self) -> tuple:
        return (self.halted,) + tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in self.facts.items()))


def _ruleset(model: PolicyModel, name: str, evaluator: Evaluator | None, report: Report,
             stats: dict[str, dict[str, int]], halting: bool) -> list[_State]:
    steps = model.steps[name]
    base = FACTS[name]
    atoms = _atoms(steps)
    constraints = _constraints(model)[name]
    domains: dict[str, list[Any]] = {}
    for fact in atoms:
        if fact in base:
            domains[fact] = _domain(fact, base[fact], atoms[fact])
    later_reads: list[set[str]] = []
    for index in range(len(steps)):
        reads: set[str] = set()
        for step in steps[index + 1:]:
            reads |= set(step.reads)
        later_reads.append(reads)
    states = [_State({}, {})]
    runtime_seen: set[tuple] = set()
    combos = 0
    for index, step in enumerate(steps):
        new_facts = [f for f in step.reads if f in domains]
        expanded: list[_State] = []
        for state in states:
            if state.halted:
                expanded.append(state)
                continue
            missing = [f for f in new_facts if f not in state.witness]
            for values in itertools.product(*(domains[f] for f in missing)):
                witness = dict(state.witness)
                witness.update(zip(missing, values))
                ok = True
                for names, predicate in constraints:
                    if all(n in witness for n in names) and any(n in missing for n in names):
                        if not predicate(*(witness[n] for n in names)):
                            ok = False
                            break
                if ok:
                    facts = dict(state.facts)
                    facts.update(zip(missing, values))
                    expanded.append(_State(facts, witness))
        merged: dict[tuple, _State] = {}
        for state in expanded:
            if state.halted:
                merged.setdefault(state.key(), state)
                continue
            combos += 1
            matched = [r for r in step.rules if matches(r, state.facts)]
            first = matched[0] if matched else None
            rec = stats.setdefault(f"{name}:{step.name}", {})
            for rule in matched:
                rec.setdefault("matched:" + rule.id, 0)
                rec["matched:" + rule.id] += 1
            if first is not None:
                rec["won:" + first.id] = rec.get("won:" + first.id, 0) + 1
            _step_findings(name, step, matched, state, report)
            if evaluator is not None:
                event_key = (step.name,) + tuple((f, tuple(state.facts[f]) if isinstance(state.facts[f], list) else state.facts[f]) for f in step.reads)
                if event_key not in runtime_seen:
                    runtime_seen.add(event_key)
                    report.runtime_checks += 1
                    fired = evaluator.fire_uncached(step, state.facts)
                    if (fired.id if fired else None) != (first.id if first else None):
                        report.findings.append(Finding(
                            "verify.runtime_mismatch", "error", name, step.name,
                            tuple(r for r in ((first.id if first else "(default)"), (fired.id if fired else "(default)"))),
                            f"durable-rules picked `{fired.id if fired else 'the default'}` where the rule semantics pick `{first.id if first else 'the default'}`",
                            tuple(sorted((f, state.facts[f]) for f in step.reads)), file=step.file, path=step.path))
            if first is None and step.default is None:
                value, halted = None, f"{step.name}:gap"  # the engine stops with policy.gap
            else:
                value = first.value if first else step.default
                halted = step.name if (halting and first is not None and first.error) else None
            facts = dict(state.facts)
            facts[step.name] = value
            witness = dict(state.witness)
            witness[step.name] = value
            # Keep only what a later step reads or an open constraint needs.
            keep = later_reads[index] | {"hma", "startup"}
            for names, _ in constraints:
                if any(n not in witness for n in names):
                    keep |= {n for n in names if n in witness}
            facts = {k: v for k, v in facts.items() if k in keep}
            merged.setdefault(_State(facts, witness, halted).key(), _State(facts, witness, halted))
        states = list(merged.values())
    report.states[name] = len(states)
    report.combinations[name] = combos
    return states


def _facts_of(step: StepDef, state: _State) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((f, state.facts[f]) for f in step.reads))


def _step_findings(ruleset: str, step: StepDef, matched: list[Rule], state: _State, report: Report) -> None:
    def add(code: str, severity: str, rules: tuple[str, ...], message: str) -> None:
        key = (code, ruleset, step.name, rules)
        if key in report.__dict__.setdefault("_keys", set()):
            return
        report.__dict__["_keys"].add(key)
        report.findings.append(Finding(code, severity, ruleset, step.name, rules, message, _facts_of(step, state),
                                       None, step.file, step.path, tuple(sorted(state.witness.items(), key=lambda kv: kv[0]))))

    if not matched and step.default is None:
        add("verify.gap", "error", (), f"no rule of step `{step.name}` matches and it has no default")
        return
    if len(matched) < 2:
        return
    a, b = matched[0], matched[1]
    if step.hit == "unique":
        add("verify.conflict", "error", (a.id, b.id), f"rules `{a.id}` and `{b.id}` both match (hit policy unique)")
    else:
        differing = next((r for r in matched[1:] if r.value != a.value), None)
        if differing is not None:
            if step.hit == "any":
                add("verify.conflict", "error", (a.id, differing.id),
                    f"rules `{a.id}` and `{differing.id}` both match with different values (hit policy any)")
            else:
                add("verify.order", "info", (a.id, differing.id),
                    f"`{a.id}` wins over `{differing.id}` by order (hit policy first)")


def _rule_findings(model: PolicyModel, stats: dict[str, dict[str, int]], report: Report) -> None:
    total = fired = 0
    for ruleset, steps in model.steps.items():
        for step in steps:
            rec = stats.get(f"{ruleset}:{step.name}", {})
            for rule in step.rules:
                total += 1
                if rec.get("won:" + rule.id):
                    fired += 1
                    continue
                if rec.get("matched:" + rule.id):
                    report.findings.append(Finding(
                        "verify.shadowed", "error", ruleset, step.name, (rule.id,),
                        f"rule `{rule.id}` never fires: an earlier rule of step `{step.name}` always wins where it matches",
                        file=rule.file, path=rule.path))
                else:
                    report.findings.append(Finding(
                        "verify.unreachable", "error", ruleset, step.name, (rule.id,),
                        f"rule `{rule.id}` never matches any reachable combination of facts",
                        file=rule.file, path=rule.path))
    report.rules_total, report.rules_fired = total, fired


def _outcome(state: _State, model: PolicyModel) -> str:
    if state.halted and state.halted.endswith(":gap"):
        return "gap"
    if state.halted:
        return "error"
    hma = state.facts.get("hma")
    if hma == "unknown" or state.facts.get("startup") == "unknown":
        return "undetermined"
    return {"enabled": "enabled", "disabled": "disabled"}.get(hma, "undefined")


def _atoms_by_ruleset(model: PolicyModel) -> dict[str, dict[str, list[tuple[str, Any]]]]:
    return {name: _atoms(steps) for name, steps in model.steps.items()}


def verify(model: PolicyModel, evaluator: Evaluator | None = None, *, witnesses: bool = True) -> Report:
    """Enumerate every reachable fact combination of ``model`` and check each step."""
    report = Report()
    stats: dict[str, dict[str, int]] = {}
    for name in ("offloading", "node"):
        _ruleset(model, name, evaluator, report, stats, halting=False)
    finals = _ruleset(model, "decision", evaluator, report, stats, halting=True)
    for state in finals:
        outcome = _outcome(state, model)
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
    _rule_findings(model, stats, report)
    if witnesses and evaluator is not None:
        from .witness import attach_documents
        report.findings = attach_documents(report.findings, evaluator, _atoms_by_ruleset(model))
    order = {"error": 0, "info": 1}
    report.findings.sort(key=lambda f: (order[f.severity], f.file, f.path, f.code, f.rules))
    return report
