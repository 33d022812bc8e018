"""The policy model's values: rules, steps, aggregates, graph facts and the
checked policy :class:`PolicyModel`, which :mod:`.rules` builds from the rule
files and the step table, the evaluator, the compiler and the author tools
read. Immutable, and free of any reading or checking."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import Problem
from .facts import Fact

__all__ = ["Rule", "StepDef", "Aggregate", "GraphFact", "PolicyModel", "RULESETS", "FILE_RULESETS"]

# Evaluated in this order; the result steps live in the decision rule file.
RULESETS = ("offloading", "node", "decision", "result")
FILE_RULESETS = ("offloading", "node", "decision")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a step. ``when`` is a tuple of (fact, operator, operand)."""

    id: str
    ruleset: str
    step: str
    when: tuple[tuple[str, str, Any], ...]
    value: Any
    error: dict[str, Any] | None = None
    warning: dict[str, Any] | None = None
    reason: str | None = None
    remediation: str | None = None
    file: str = ""
    path: str = ""
    line: int | None = None
    column: int | None = None

    @property
    def reads(self) -> tuple[str, ...]:
        """The facts this rule reads, in the order it names them."""
        return tuple(dict.fromkeys(fact for fact, _, _ in self.when))


@dataclass(frozen=True, slots=True)
class StepDef:
    """A step: the fact it sets, its rules in order (first match wins), its default."""

    ruleset: str
    name: str
    default: Any  # None: no default (verification must prove a rule always matches)
    rules: tuple[Rule, ...]
    description: str = ""
    file: str = ""
    path: str = ""
    hit: str = "first"
    line: int | None = None
    column: int | None = None
    reads: tuple[str, ...] = ()  # every fact a rule of this step reads (filled in by __post_init__)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", tuple(dict.fromkeys(fact for rule in self.rules for fact in rule.reads)))

    @property
    def values(self) -> tuple[Any, ...]:
        """Every value the step can give: its default, then its rules' values."""
        out: dict[Any, None] = {} if self.default is None else {self.default: None}
        for rule in self.rules:
            out.setdefault(rule.value, None)
        return tuple(out)


class Aggregate(NamedTuple):
    """A container node's fact from its children's values of step ``over``:
    the value of the first child (in order) whose value is not in ``skip``, or
    ``none``. With ``after`` (an earlier aggregate and a value), only the
    children after the child that gave it are scanned, and only when it has
    that value. The child's error for ``over`` is handed on with the value."""

    fact: str
    over: str
    skip: frozenset[Any]
    none: Any
    after: tuple[str, Any] | None
    description: str
    file: str
    path: str


class GraphFact(NamedTuple):
    """A decision fact read from the top-level connector's node step ``step``
    (with the error it carries); ``none`` without a connector graph."""

    fact: str
    step: str
    description: str


@dataclass(frozen=True)
class PolicyModel:
    """The checked policy: its steps per ruleset, the aggregates, the registry,
    the fact vocabulary of each ruleset (declared facts, aggregates and step
    values, with their relations), and a digest of the rule files."""

    steps: dict[str, tuple[StepDef, ...]]
    aggregates: tuple[Aggregate, ...]
    registered_names: tuple[str, ...]
    containers: frozenset[str]
    vocabulary: dict[str, dict[str, Fact]]
    digest: str
    source: str
    files: tuple[str, ...] = ()
    notes: tuple[Problem, ...] = ()  # what the loader did that the author should know (never an error)
    graph: tuple[GraphFact, ...] = ()
    release: str = "0.33.0"  # the vLLM release the policy decides for
    release_facts: dict[str, int] = field(default_factory=dict)  # its facts (vllm_minor, vllm_patch)
    bundle: bool = False  # read from a bundle of releases (the bundled rules are one), not a plain folder
    modules: Any = None  # the release's module table (modules.ReleaseModules; None: every module path unknown)

    def rule(self, rule_id: str) -> Rule | None:
        for steps in self.steps.values():
            for step in steps:
                for rule in step.rules:
                    if rule.id == rule_id:
                        return rule
        return None
