"""Compile: the checked policy model into one durable-rules ruleset
definition (plain dicts; durable-rules itself is imported only by _durable).

Every step becomes a discriminator ``t`` (ruleset.step); every rule a
durable-rules rule on events of that discriminator whose ``pri`` is its
position in the step (lower runs first, and an event is consumed by the first
action, so the first matching rule wins); every step ends with a catch-all
default rule, so that each event runs exactly one action (durable-rules
crashes when a state in which no action ran is deleted).

durable-rules has two limits a large policy meets (../shared/reference/
durable-rules.md, and rete.c of durable_rules 2.0.28): defining a ruleset
hangs or fails when more than 512 distinct tests follow one node of its
match network, and a ruleset holds at most 4,096 rules (``MAX_ACTIONS``).
Every rule of a step starts with the step's discriminator, and a registry of
hundreds of connectors compiles into one node step. So a step whose rules
test more than :data:`PART_TESTS` distinct values is cut, in rule order,
into *parts*, each with its own discriminator and catch-all rule, and the
parts are laid out over as many durable-rules rulesets as they need, at
most :data:`RULESET_RULES` rules each. A step is asked part by part, in
order, until a rule of one fires: the first matching rule of the step still
wins (:meth:`Compiled.first`). The first part keeps the step's own
discriminator, so a policy that needs no cut compiles as it always did, into
one ruleset.

The verifier asserts step inputs into the same ruleset as durable-rules
facts, which every matching rule fires on (an event is consumed by the first
action): so durable-rules, not Python, says where rules overlap
(:meth:`Compiled.every`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .model import PolicyModel, Rule, StepDef

__all__ = ["Compiled", "Misanswered", "compile_policy", "rule_tests", "parts_of", "DEFAULT_PRI", "PART_TESTS", "RULESET_RULES"]

DEFAULT_PRI = 1_000_000
# The most distinct tests one part of a step holds (durable-rules hangs past
# about 512 after one node; the discriminator and a margin take the rest).
PART_TESTS = 500
# The most rules one durable-rules ruleset holds (MAX_ACTIONS is 4,096).
RULESET_RULES = 4_000


class Misanswered(Exception):
    """The rule runtime ran a rule of another step than the event's (an engine bug)."""


@dataclass(frozen=True)
class Compiled:
    definitions: tuple[dict[str, Any], ...]  # one durable-rules ruleset each
    rules: dict[str, Rule | None]          # durable rule name -> Rule (None: a part's catch-all)
    parts: dict[str, tuple[str, ...]]      # step discriminator -> its parts' discriminators, in order
    part_of: dict[str, str]                # durable rule name -> the discriminator of its part
    ruleset_of: dict[str, int]             # part discriminator -> the definition that holds it

    def first(self, fire_many: Callable[[int, list[dict[str, Any]]], list[str]],
              events: list[dict[str, Any]]) -> list[Rule | None]:
        """The rule that wins each event (None: the step's default), asking
        ``fire_many(ruleset, events)`` part by part: the events no rule of a
        part took go on to the next part."""
        def fire(ruleset: int, batch: list[dict[str, Any]]) -> list[list[str]]:
            return [[name] for name in fire_many(ruleset, batch)]  # an event runs one rule

        won: list[Rule | None] = [None] * len(events)
        pending = list(range(len(events)))
        part = 0
        while pending:
            asked = [i for i in pending if part < len(self.parts[events[i]["t"]])]
            pending = []
            for i, (name,) in zip(asked, self._ask(fire, [self._as_part(events[i], part) for i in asked])):
                won[i] = self.rules[name]
                if won[i] is None:
                    pending.append(i)
            part += 1
        return won

    def every(self, match_all: Callable[[int, list[dict[str, Any]]], list[list[str]]],
              facts: list[dict[str, Any]]) -> list[list[Rule]]:
        """Every rule that matches each fact, over all the parts of its step
        (in rule order within a part, parts in order)."""
        out: list[list[Rule]] = [[] for _ in facts]
        widest = max((len(self.parts[f["t"]]) for f in facts), default=0)
        for part in range(widest):
            asked = [i for i, fact in enumerate(facts) if part < len(self.parts[fact["t"]])]
            for i, names in zip(asked, self._ask(match_all, [self._as_part(facts[i], part) for i in asked])):
                out[i].extend(rule for rule in (self.rules[name] for name in names) if rule is not None)
        return out

    def _as_part(self, event: dict[str, Any], part: int) -> dict[str, Any]:
        return event if part == 0 else {**event, "t": self.parts[event["t"]][part]}

    def _ask(self, post: Callable[[int, list[dict[str, Any]]], list[list[str]]],
             events: list[dict[str, Any]]) -> list[list[str]]:
        """The names of the rules that ran on each event, each posted with
        ``post`` to the ruleset of its part (one batch per ruleset), checked
        to come from that part."""
        answers: list[list[str]] = [[] for _ in events]
        by_ruleset: dict[int, list[int]] = {}
        for i, event in enumerate(events):
            by_ruleset.setdefault(self.ruleset_of[event["t"]], []).append(i)
        for ruleset, indexes in by_ruleset.items():
            for i, names in zip(indexes, post(ruleset, [events[i] for i in indexes])):
                if any(self.part_of[name] != events[i]["t"] for name in names):
                    raise Misanswered("the rule runtime answered for the wrong step")
                answers[i] = names
        return answers


def _term(fact: str, op: str, operand: Any) -> dict[str, Any]:
    if op == "eq":
        return {fact: operand}
    if op == "ne":
        return {"$neq": {fact: operand}}
    if op == "in":
        return {"$or": [{fact: value} for value in operand]}
    if op == "not_in":
        return {"$and": [{"$neq": {fact: value}} for value in operand]}
    if op in ("lt", "le", "gt", "ge"):
        return {{"lt": "$lt", "le": "$lte", "gt": "$gt", "ge": "$gte"}[op]: {fact: operand}}
    if op == "contains":
        return {"$iany": {fact: {"$i": operand}}}
    raise ValueError(f"unknown operator {op}")  # the rules schema admits no other


def rule_tests(rule: Rule) -> set[tuple[str, str, Any]]:
    """The distinct tests a rule puts after its step's discriminator: one per
    (fact, value) it compares, an `in` list counting each of its values."""
    return {(fact, type(v).__name__, v) for fact, op, operand in rule.when
            for v in (operand if op in ("in", "not_in") else (operand,))}


def parts_of(rules: Iterable[Rule]) -> list[list[Rule]]:
    """The rules of a step cut, in order, into parts of at most
    :data:`PART_TESTS` distinct tests (a rule with more is a part alone; the
    checker refuses it, rules.hazard.alternatives) and fewer rules than a
    ruleset holds."""
    parts: list[list[Rule]] = [[]]
    tests: set = set()
    for rule in rules:
        own = rule_tests(rule)
        if parts[-1] and (len(tests | own) > PART_TESTS or len(parts[-1]) == RULESET_RULES - 1):
            parts.append([])
            tests = set()
        parts[-1].append(rule)
        tests |= own
    return parts


def step_key(step: StepDef) -> str:
    return f"{step.ruleset}.{step.name}"


def compile_policy(model: PolicyModel) -> Compiled:
    definitions: list[dict[str, Any]] = [{}]
    table: dict[str, Rule | None] = {}
    parts: dict[str, tuple[str, ...]] = {}
    part_of: dict[str, str] = {}
    ruleset_of: dict[str, int] = {}
    for steps in model.steps.values():
        for step in steps:
            key = step_key(step)
            keys = []
            for number, rules in enumerate(parts_of(step.rules), start=1):
                part = key if number == 1 else f"{key}/{number}"
                keys.append(part)
                if len(definitions[-1]) + len(rules) + 1 > RULESET_RULES:
                    definitions.append({})
                definition = definitions[-1]
                ruleset_of[part] = len(definitions) - 1
                for position, rule in enumerate(rules, start=1):
                    name = f"r{len(table)}"
                    terms = [{"t": part}] + [_term(*condition) for condition in rule.when]
                    definition[name] = {"all": [{"m": {"$and": terms}}], "pri": position}
                    table[name] = rule
                    part_of[name] = part
                name = f"r{len(table)}"
                definition[name] = {"all": [{"m": {"t": part}}], "pri": DEFAULT_PRI}
                table[name] = None
                part_of[name] = part
            parts[key] = tuple(keys)
    return Compiled(tuple(definitions), table, parts, part_of, ruleset_of)
