"""Compile: the checked policy model into one durable-rules ruleset
definition (plain dicts; durable-rules itself is imported only by _durable).

Every step becomes a discriminator ``t`` (ruleset.step); every rule a
durable-rules rule on events of that discriminator whose ``pri`` is its
position in the step (lower runs first, and an event is consumed by the first
action, so the first matching rule wins); every step ends with a catch-all
default rule, so that each event runs exactly one action (durable-rules
crashes when a state in which no action ran is deleted).

The verifier asserts step inputs into the same ruleset as durable-rules
facts, which every matching rule fires on (an event is consumed by the first
action): so durable-rules, not Python, says where rules overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import PolicyModel, Rule, StepDef

__all__ = ["Compiled", "compile_policy", "DEFAULT_PRI"]

DEFAULT_PRI = 1_000_000


@dataclass(frozen=True)
class Compiled:
    definition: dict[str, Any]
    rules: dict[str, Rule | None]          # durable rule name -> Rule (None: the step's default)
    step_keys: dict[tuple[str, str], str]  # (ruleset, step) -> discriminator
    step_of: dict[str, tuple[str, str]]    # durable rule name -> (ruleset, step)


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


def step_key(step: StepDef) -> str:
    return f"{step.ruleset}.{step.name}"


def compile_policy(model: PolicyModel) -> Compiled:
    definition: dict[str, Any] = {}
    table: dict[str, Rule | None] = {}
    keys: dict[tuple[str, str], str] = {}
    step_of: dict[str, tuple[str, str]] = {}
    for ruleset, steps in model.steps.items():
        for step in steps:
            key = step_key(step)
            keys[(ruleset, step.name)] = key
            for position, rule in enumerate(step.rules, start=1):
                name = f"r{len(table)}"
                terms = [{"t": key}] + [_term(*condition) for condition in rule.when]
                definition[name] = {"all": [{"m": {"$and": terms}}], "pri": position}
                table[name] = rule
                step_of[name] = (ruleset, step.name)
            name = f"r{len(table)}"
            definition[name] = {"all": [{"m": {"t": key}}], "pri": DEFAULT_PRI}
            table[name] = None
            step_of[name] = (ruleset, step.name)
    return Compiled(definition, table, keys, step_of)
