"""The step table: every step's answer for every reachable input, from durable-rules.

A rule reads only its step's facts, and a fact that the rules compare only
with literals matters only through the class of its value: which literal it
equals, or none of them (``‹other›``), which literals a list contains, on
which side of each integer bound a number falls. So a step's input is the
tuple of the classes of the facts it reads (:class:`StepKey`), and the space
of inputs is finite.

At load, :func:`reachable` walks that space ruleset by ruleset, step by step,
as the graph and the document allow it (each fact's relations in
:mod:`.facts`: a child is at depth 1 or more, only a container lists
children, ...): facts enter when a step first reads them, leave when no
later step does, and equal states merge. Each step's distinct inputs go to
durable-rules in one batch, and its answers fill :class:`StepTable`, an
immutable mapping from input to :class:`Row`. A decision looks each step up;
an input outside the table (a policy whose fact space is given too large to
walk, say) goes to durable-rules on a miss and is kept, up to a bound.

``hma-policy rules verify`` walks the same space with the same keys, so
evaluation and verification share one reading of the rules, durable-rules'.
"""

from __future__ import annotations

import itertools
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .facts import UNREACHED, Fact, Relation
from .model import PolicyModel, Rule, StepDef

__all__ = ["Row", "StepKey", "StepTable", "State", "classes", "reachable", "step_keys", "OTHER"]

# The class of a string no rule of a step names (and its representative in
# an event: a string no rule can mean, since none names it).
OTHER = "\u2039other\u203a"
# Inputs found on a miss are kept up to this many per table (then answered
# by durable-rules each time: an unbounded table would grow with the inputs).
MISS_LIMIT = 16_384


class Row(NamedTuple):
    """A step's answer for one input: the rule that fired (None: the default) and the value."""

    rule: Rule | None
    value: Any


class StepKey:
    """How one step's input is keyed: each fact it reads mapped to its class,
    whose representative value is also what durable-rules is sent."""

    def __init__(self, step: StepDef, vocabulary: Mapping[str, Fact]):
        self.step = step
        self.reads = step.reads
        atoms = _atoms([step])
        joint = _joint([step], vocabulary)
        self.classes: tuple[Callable[[Any], Any] | None, ...] = tuple(
            _classifier(vocabulary.get(fact), atoms.get(fact, [])) for fact in self.reads)
        # A fact the step compares only beside another (its partner): its
        # class is its value only where the partner's class is the literal
        # it is compared beside, else `other` (the partner comes first).
        self.joint = tuple((self.reads.index(fact), self.reads.index(partner), pairs, _other(frozenset().union(*pairs.values())))
                           for fact, (partner, pairs) in joint.items())

    def __call__(self, facts: Mapping[str, Any]) -> tuple:
        key = tuple(facts[fact] if classify is None else classify(facts[fact])
                    for fact, classify in zip(self.reads, self.classes))
        if not self.joint:
            return key
        out = list(key)
        for at, partner, pairs, other in self.joint:
            if out[at] not in pairs.get(out[partner], ()):
                out[at] = other
        return tuple(out)

    def event(self, key: tuple) -> dict[str, Any]:
        """The durable-rules event for an input: the step's discriminator and the facts."""
        event: dict[str, Any] = {"t": f"{self.step.ruleset}.{self.step.name}"}
        for fact, value in zip(self.reads, key):
            event[fact] = list(value) if isinstance(value, tuple) else value
        return event


def _atoms(steps: Iterable[StepDef]) -> dict[str, list[tuple[str, Any]]]:
    """Each fact's tests (operator, operand) in the rules of ``steps``."""
    atoms: dict[str, list[tuple[str, Any]]] = {}
    for step in steps:
        for rule in step.rules:
            for fact, op, operand in rule.when:
                atoms.setdefault(fact, []).append((op, operand))
    return atoms


def _joint(steps: Iterable[StepDef], vocabulary: Mapping[str, Fact]) -> dict[str, tuple[str, dict[str, frozenset[str]]]]:
    """The open string facts that the rules of ``steps`` compare only with
    `eq`, and always beside an `eq` on one other open string fact (a module
    path beside a class name): each with that partner and, for each literal
    of the partner, the literals it is compared beside. Where the partner's
    value is not such a literal, no rule can tell the fact's values apart.
    A partner is never itself such a fact."""
    def open_str(fact: str) -> bool:
        declared = vocabulary.get(fact)
        return declared is not None and declared.type == "str" and declared.values is None

    partners: dict[str, list[str]] = {}  # the facts compared beside it in every rule that compares it
    excluded: set[str] = set()  # compared otherwise, at least once
    for step in steps:
        for rule in step.rules:
            equal = [f for f, op, v in rule.when if op == "eq" and isinstance(v, str) and open_str(f)]
            for fact, op, _ in rule.when:
                if fact not in equal:
                    excluded.add(fact)
                    continue
                beside = [f for f in equal if f != fact]
                partners[fact] = [f for f in partners.get(fact, beside) if f in beside]
    chosen = {fact: candidates[0] for fact, candidates in partners.items() if fact not in excluded and candidates}
    out: dict[str, tuple[str, dict[str, frozenset[str]]]] = {}
    for fact, partner in chosen.items():
        if partner in chosen:  # no chains: a partner is classed on its own
            continue
        by_partner: dict[str, set[str]] = {}
        for step in steps:
            for rule in step.rules:
                operands = {f: v for f, op, v in rule.when if op == "eq"}
                if fact in operands:
                    by_partner.setdefault(operands[partner], set()).add(operands[fact])
        out[fact] = (partner, {k: frozenset(v) for k, v in by_partner.items()})
    return out


def _operands(atoms: Iterable[tuple[str, Any]]) -> list[Any]:
    return [v for op, operand in atoms for v in (operand if op in ("in", "not_in") else (operand,))]


def _classifier(fact: Fact | None, atoms: list[tuple[str, Any]]) -> Callable[[Any], Any] | None:
    """The class of a value of ``fact`` as ``atoms`` tell values apart (None: the value itself)."""
    if fact is None or fact.values is not None or fact.type == "bool":
        return None
    operands = _operands(atoms)
    if fact.type == "str":
        literals = frozenset(v for v in operands if isinstance(v, str))
        other = _other(literals)
        return lambda value: value if value in literals else other
    if fact.type == "names":
        literals = frozenset(v for v in operands if isinstance(v, str))
        return lambda value: tuple(sorted(literals.intersection(value)))
    cuts = _cuts(atoms)
    return lambda value: _representative(cuts, value)


def _other(literals: frozenset[str]) -> str:
    other = OTHER
    while other in literals:  # a rule file may name anything, even this
        other += "\u203a"
    return other


def _cuts(atoms: Iterable[tuple[str, Any]]) -> tuple[int, ...]:
    """Where tests of an integer can change their answer: each test splits the
    integers at one or two cuts (`eq 3`: at 3 and 4; `lt 3`: at 3; `le 3`:
    at 4). 0 is always a cut: the facts are counts, never negative."""
    cuts = {0}
    for op, operand in atoms:
        for v in (operand if op in ("in", "not_in") else (operand,)):
            if isinstance(v, int) and not isinstance(v, bool):
                cuts.update({"lt": (v,), "ge": (v,), "le": (v + 1,), "gt": (v + 1,)}.get(op, (v, v + 1)))
    return tuple(sorted(c for c in cuts if c >= 0))


def _representative(cuts: tuple[int, ...], value: Any) -> Any:
    """The class of an integer: the cut that starts its interval (-1 below them all)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    at = bisect_right(cuts, value)
    return cuts[at - 1] if at > 0 else -1


Answer = Callable[[StepKey, list[tuple]], list[Row]]


class StepTable:
    """Every step's answer for each reachable input, filled by durable-rules
    at load (:func:`reachable`); inputs met later are asked on a miss."""

    def __init__(self, model: PolicyModel, ask: Callable[[list[dict[str, Any]]], list[Rule | None]], *,
                 prefill: bool = True):
        self._ask = ask
        self.keys = step_keys(model)
        self._rows: dict[tuple[str, str], dict[tuple, Row]] = {key: {} for key in self.keys}
        # Without the prefill nothing is kept either: every step goes to durable-rules.
        self._room = MISS_LIMIT if prefill else 0
        self._lock = threading.Lock()  # held only around the dict updates of a miss, never while asking
        if prefill:
            reachable(model, self._fill, keys=self.keys)
        self.size = sum(len(rows) for rows in self._rows.values())

    def _fill(self, key: StepKey, inputs: list[tuple]) -> list[Row]:
        rows = self._rows[(key.step.ruleset, key.step.name)]
        missing = [k for k in dict.fromkeys(inputs) if k not in rows]
        if missing:
            for k, row in zip(missing, self._answer(key, missing)):
                rows[k] = row
        return [rows[k] for k in inputs]

    def _answer(self, key: StepKey, inputs: list[tuple]) -> list[Row]:
        rules = self._ask([key.event(k) for k in inputs])
        step = key.step
        return [Row(rule, step.default if rule is None else rule.value) for rule in rules]

    def row(self, ruleset: str, step: str, facts: Mapping[str, Any]) -> Row:
        """The answer of ``step`` for ``facts`` (which hold every fact it reads)."""
        key = self.keys[(ruleset, step)]
        k = key(facts)
        rows = self._rows[(ruleset, step)]
        row = rows.get(k)
        if row is None:
            row = self._answer(key, [k])[0]
            with self._lock:
                if self._room > 0:
                    self._room -= 1
                    rows[k] = row
        return row

    def rows(self, ruleset: str, step: str) -> Mapping[tuple, Row]:
        """The table of one step (for the verifier and the golden test)."""
        return dict(self._rows[(ruleset, step)])


# -- the walk over the fact space -------------------------------------------

@dataclass
class State:
    """One combination of facts, reached after some steps; ``witness`` keeps
    every fact assigned on the way (for counterexample documents)."""

    facts: dict[str, Any]
    witness: dict[str, Any] = field(default_factory=dict)
    halted: str | None = None  # the step whose error (or gap) ended the evaluation
    stage: str = "none"  # that error's stage, or "gap"


Observe = Callable[[StepDef, State, tuple, Row], None]


def step_keys(model: PolicyModel) -> dict[tuple[str, str], StepKey]:
    """How each step's input is keyed, by (ruleset, step)."""
    return {(ruleset, step.name): StepKey(step, model.vocabulary[ruleset])
            for ruleset, steps in model.steps.items() for step in steps}


def reachable(model: PolicyModel, answer: Answer, observe: Observe | None = None, *,
              keys: Mapping[tuple[str, str], StepKey] | None = None) -> list[State]:
    """Walk every reachable input of every step, asking ``answer`` for each
    step's new inputs in one batch; ``observe`` sees each (step, state, input,
    answer), and with it each state keeps its witness. Returns the final
    states: after the result steps, and those a policy gap stopped. ``keys``:
    the step keys of :func:`step_keys`, when the caller already holds them."""
    keys = step_keys(model) if keys is None else keys
    track = observe is not None
    offloading = _walk(model, "offloading", [State({})], keys, answer, observe, halting=True)
    _walk(model, "node", [State({})], keys, answer, observe, halting=False)
    result_reads = {f for s in model.steps["result"] for f in s.reads}
    decided = _walk(model, "decision", [State({})], keys, answer, observe, halting=True, also_read=result_reads)
    # The result steps read the decision steps' values (`unreached` for those
    # an error stopped before) and the error's stage.
    read = [s.name for s in model.steps["decision"] if s.name in result_reads]
    gaps = [s for s in [*offloading, *decided] if s.stage == "gap"]
    ends = [State({**{name: s.facts.get(name, UNREACHED) for name in read}, "error_stage": s.stage},
                  s.witness if track else {}) for s in decided if s.stage != "gap"]
    ends += [State({**{name: UNREACHED for name in read}, "error_stage": s.stage}, s.witness if track else {})
             for s in offloading if s.halted and s.stage != "gap"]
    finals = _walk(model, "result", _merged(ends), keys, answer, observe, halting=False,
                   also_read={s.name for s in model.steps["result"]})  # the outcome and flag of each end
    return finals + gaps


def _walk(model: PolicyModel, ruleset: str, start: list[State], keys: Mapping[tuple[str, str], StepKey],
          answer: Answer, observe: Observe | None, *, halting: bool, also_read: frozenset[str] | set[str] = frozenset()) -> list[State]:
    steps = model.steps[ruleset]
    vocabulary = model.vocabulary[ruleset]
    named = _named(model)
    domains = _domains(model, ruleset, named)
    joint = _joint_domains(_joint(steps, vocabulary), domains)
    entering = _entering(steps, vocabulary, domains, {fact: partner for fact, (partner, _, _) in joint.items()})
    track = observe is not None
    states = start
    for index, step in enumerate(steps):
        # What stays after this step: what later steps (and the caller) read,
        # and what a fact that enters later is related to; an open string
        # fact only as the class of its value that those tell apart.
        keep = set(also_read)
        for later, facts in zip(steps[index + 1:], entering[index + 1:]):
            keep.update(later.reads)
            keep.update(r.fact for fact in facts for r in vocabulary[fact].given)
        project = _projections(named, vocabulary, domains, steps[index + 1:], entering[index + 1:], keep - set(also_read))
        expanded: list[State] = []
        for state in states:
            if state.halted:
                expanded.append(state)
            else:
                expanded.extend(_introduce(state, entering[index], vocabulary, domains, joint, named, track))
        key = keys[(ruleset, step.name)]
        inputs = [None if s.halted else key(s.facts) for s in expanded]  # each state's input, once
        live = [k for k in inputs if k is not None]
        rows = dict(zip(live, answer(key, live))) if live else {}
        merged: dict[tuple, State] = {}
        for state, k in zip(expanded, inputs):
            if k is not None:
                row = rows[k]
                if observe is not None:
                    observe(step, state, k, row)
                witness = {**state.witness, step.name: row.value} if track else state.witness
                if row.rule is None and step.default is None:
                    state = State(dict(state.facts), witness, step.name, "gap")  # the engine stops with policy.gap
                else:
                    kept = {f: (project[f](v) if f in project else v) for f, v in state.facts.items() if f in keep}
                    kept[step.name] = row.value
                    error = row.rule.error if row.rule is not None else None
                    if halting and error:
                        state = State(kept, witness, step.name, error.get("stage", "config"))
                    else:
                        state = State(kept, witness)
            merged.setdefault(_identity(state), state)
        states = list(merged.values())
    return states


def _entering(steps: tuple[StepDef, ...], vocabulary: Mapping[str, Fact], domains: Mapping[str, list[Any]],
              partners: Mapping[str, str]) -> list[list[str]]:
    """The input facts that enter at each step: those it reads first, with the
    facts their relations name, each after the facts it is related to (and
    after its partner, :func:`_joint`)."""
    seen: set[str] = set()
    out: list[list[str]] = []
    for step in steps:
        order: list[str] = []
        for fact in step.reads:
            # depth first over relations, without recursion: (fact, its relations done)
            stack = [(fact, False)]
            while stack:
                name, ready = stack.pop()
                if ready:
                    order.append(name)
                elif name not in seen and name in domains:
                    seen.add(name)
                    stack.append((name, True))
                    stack.extend([(relation.fact, False) for relation in vocabulary[name].given[::-1]])
                    if name in partners:
                        stack.append((partners[name], False))
        out.append(order)
    return out


def _identity(state: State) -> tuple:
    return (state.halted, state.stage, tuple(sorted(state.facts.items())))


def _merged(states: list[State]) -> list[State]:
    out: dict[tuple, State] = {}
    for state in states:
        out.setdefault(_identity(state), state)
    return list(out.values())


def _introduce(state: State, entering: list[str], vocabulary: Mapping[str, Fact], domains: Mapping[str, list[Any]],
               joint: Mapping[str, tuple[str, Mapping[Any, list[Any]], list[Any]]], named: Mapping[str, frozenset[str]],
               track: bool) -> list[State]:
    """``state`` with each consistent combination of values of the facts
    ``entering`` (in order: a fact after those it is related to, so that each
    is checked as it enters and inconsistent combinations stop early)."""
    partial = [state.facts]
    entering = [f for f in entering if f not in state.facts]  # a start state may hold some already
    for fact in entering:
        declared = vocabulary[fact]
        if fact in joint:
            partner, beside, rest = joint[fact]
            partial = [extended for facts in partial for value in beside.get(facts[partner], rest)
                       if _consistent(declared, extended := {**facts, fact: value}, named)]
            continue
        partial = [extended for facts in partial for value in domains[fact]
                   if _consistent(declared, extended := {**facts, fact: value}, named)]
    if track:
        return [State(facts, {**state.witness, **{f: facts[f] for f in entering}}) for facts in partial]
    return [State(facts, state.witness) for facts in partial]


def _joint_domains(joint: Mapping[str, tuple[str, Mapping[str, frozenset[str]]]], domains: Mapping[str, list[Any]]
                   ) -> dict[str, tuple[str, dict[Any, list[Any]], list[Any]]]:
    """For each fact of :func:`_joint`: its partner, the values it takes beside
    each literal of the partner, and beside any other value. Beside a partner
    value, a literal compared only beside another partner literal is no
    different from `other`, so it is left out (in the domain's order)."""
    out = {}
    for fact, (partner, pairs) in joint.items():
        paired = frozenset().union(*pairs.values())
        rest = [v for v in domains[fact] if v not in paired]
        beside = {literal: [v for v in domains[fact] if v in values or v not in paired] for literal, values in pairs.items()}
        out[fact] = (partner, beside, rest)
    return out


def _projections(named: Mapping[str, frozenset[str]], vocabulary: Mapping[str, Fact], domains: Mapping[str, list[Any]],
                 later: tuple[StepDef, ...], entering: list[list[str]], kept: set[str]) -> dict[str, Callable[[Any], Any]]:
    """For each open string fact kept after a step: its value's class as the
    later steps and the relations of the facts entering later tell values
    apart (a literal they compare, or the ruleset's `other`), so that states
    that differ only in a value nothing later reads merge."""
    literals: dict[str, set[Any]] = {}
    for fact, op, operand in (atom for step in later for rule in step.rules for atom in rule.when):
        literals.setdefault(fact, set()).update(operand if op in ("in", "not_in") else (operand,))
    for relation in (r for facts in entering for fact in facts for r in vocabulary[fact].given):
        literals.setdefault(relation.fact, set()).update(
            named[relation.op] if relation.op in NAMED else (relation.value,))
    out: dict[str, Callable[[Any], Any]] = {}
    for fact in kept:
        declared = vocabulary.get(fact)
        if declared is None or declared.type != "str" or declared.values is not None or fact not in domains:
            continue
        out[fact] = _class_of(frozenset(literals.get(fact, ())),
                              _other(frozenset(v for v in domains[fact] if isinstance(v, str))))
    return out


def _class_of(told: frozenset[Any], other: str) -> Callable[[Any], Any]:
    """A value's class as ``told`` tells values apart: itself, or ``other``."""
    return lambda value: value if value in told else other


# Relations that test a connector name against a set of names the policy holds.
NAMED = ("container", "registered")


def classes(model: PolicyModel, fact: Fact) -> tuple[Any, ...]:
    """One value of each class of ``fact``'s values, as the rules and
    relations of its ruleset tell them apart: deciding a document with each
    gives every answer the fact can make (one value where no rule reads it)."""
    domain = _domains(model, fact.ruleset, _named(model)).get(fact.name)
    return tuple(domain) if domain else (OTHER if fact.empty is None else fact.empty,)


def _named(model: PolicyModel) -> dict[str, frozenset[str]]:
    """The name sets of :data:`NAMED`: the connectors that list children, and
    the names the release's registry registers."""
    return {"container": model.containers, "registered": frozenset(model.registered_names)}


def _consistent(fact: Fact, facts: Mapping[str, Any], named: Mapping[str, frozenset[str]]) -> bool:
    """Whether ``fact``'s value agrees with its relations (declared in facts.py)."""
    if not fact.given:
        return True
    value = facts[fact.name]
    given = all(_holds(r, facts, named) for r in fact.given)
    if not given:
        return bool(value == _as_domain(fact, fact.empty))
    return not (fact.exact and value == _as_domain(fact, fact.empty))


def _holds(relation: Relation, facts: Mapping[str, Any], named: Mapping[str, frozenset[str]]) -> bool:
    value = facts.get(relation.fact)
    if relation.op == "eq":
        return bool(value == relation.value)
    if relation.op == "ne":
        return bool(value != relation.value)
    if relation.op == "ge":
        return isinstance(value, int) and value >= relation.value
    return value in named[relation.op]  # "container", "registered"


def _as_domain(fact: Fact, value: Any) -> Any:
    return tuple(value) if fact.type == "names" else value


def _domains(model: PolicyModel, ruleset: str, named: Mapping[str, frozenset[str]]) -> dict[str, list[Any]]:
    """One representative of each class of every input fact's values, as all
    the rules and relations of the ruleset tell them apart (``named``: the
    name sets of :data:`NAMED`)."""
    vocabulary = model.vocabulary[ruleset]
    step_names = {s.name for s in model.steps[ruleset]}
    atoms = _atoms(model.steps[ruleset])
    # relations and empty values tell values apart too
    for fact in vocabulary.values():
        for relation in fact.given:
            if relation.op in NAMED:
                atoms.setdefault(relation.fact, []).extend(("eq", c) for c in sorted(named[relation.op]))
            elif relation.value is not None:
                atoms.setdefault(relation.fact, []).append(("ge" if relation.op == "ge" else "eq", relation.value))
        if fact.given and fact.type in ("str", "int") and fact.values is None:
            atoms.setdefault(fact.name, []).append(("eq", fact.empty))
    out: dict[str, list[Any]] = {}
    for name, fact in vocabulary.items():
        if name in step_names:
            continue
        if fact.ruleset == "release":  # one value per policy: its own
            out[name] = [model.release_facts[name]]
        elif fact.type == "bool":
            out[name] = [False, True]
        elif fact.values is not None:
            out[name] = list(fact.values)
        elif fact.type == "str":
            literals = list(dict.fromkeys(v for v in _operands(atoms.get(name, [])) if isinstance(v, str)))
            out[name] = literals + [_other(frozenset(literals))]
        elif fact.type == "names":
            literals = sorted({v for v in _operands(atoms.get(name, [])) if isinstance(v, str)})
            width = len(literals) if len(literals) <= 8 else 1  # every subset of a few names; singletons beyond
            out[name] = [tuple(c) for n in range(width + 1) for c in itertools.combinations(literals, n)]
        else:  # int: the start of each interval between cuts
            out[name] = list(_cuts(atoms.get(name, [])))
    return out
