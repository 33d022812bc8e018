"""Rule files: read a rules directory, check it, and build the policy model.

Every problem found in the rule files is collected (schema first, then the
semantic checks on files that passed it) and raised at once as a
:class:`PolicyError`, sorted by file and location. The model holds each
ruleset's steps in order, the MultiConnector aggregates, the registry's names
and the full fact vocabulary (:mod:`.facts` plus what the rules add), from
which the step table, the evaluator and the verifier work.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from . import yamlsafe
from .errors import PolicyError, Problem, suggest
from .facts import GRAPH_FACTS, UNREACHED, Fact, Relation, declared
from .schema import iter_problems, pointer

__all__ = ["Rule", "StepDef", "Aggregate", "PolicyModel", "read_policy", "RULESETS"]

# Evaluated in this order; the result steps live in the decision rule file.
RULESETS = ("offloading", "node", "decision", "result")
FILE_RULESETS = ("offloading", "node", "decision")
# The steps the engine reads, and the values it understands for each: the
# contract between the rule files and the engine (the offloading shorthand
# rewrites the connector, node steps feed the aggregates and the decision,
# the result steps make the decision's outcome and flag).
CONTRACT: dict[str, dict[str, set[Any] | None]] = {
    "offloading": {"offload_connector": None, "offload_role": None},
    "node": {"support": {"supported", "unsupported", "unknown", "error", "unsupported_or_error"}, "setup": {"ok", "error"}, "construct": {"ok", "error"}},
    "decision": {"hma": {"enabled", "disabled", "unknown", "error"}, "startup": {"ok", "error", "unknown"}},
    "result": {"outcome": {"enabled", "disabled", "error", "undetermined"}, "hma_enabled": {True, False, "unknown"},
               "remediation": None},
}
# The values that carry an error, which a rule giving one must state with
# `error:`. Node support has a second one: `unsupported_or_error`, the answer
# "unsupported, or the helper raises this error" that an external connector of
# unknown capability leaves open (the engine hands the error on as for `error`).
ERROR_VALUES: dict[tuple[str, str], tuple[str, ...]] = {("node", "support"): ("error", "unsupported_or_error")}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
OPS = {"eq", "ne", "in", "not_in", "lt", "le", "gt", "ge", "contains"}
# Placeholders a remediation may name besides facts (filled from the graph).
REMEDIATION_PLACEHOLDERS = {"blocking"}


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

    def rule(self, rule_id: str) -> Rule | None:
        for steps in self.steps.values():
            for step in steps:
                for rule in step.rules:
                    if rule.id == rule_id:
                        return rule
        return None


@dataclass
class _File:
    name: str
    text: str
    data: Any = None
    marks: dict[str, tuple[int, int]] | None = None

    def locate(self, path: str) -> tuple[int | None, int | None]:
        """(line, column) of the JSON Pointer ``path``, or of its nearest located parent."""
        while self.marks is not None:
            if path in self.marks:
                return self.marks[path]
            if not path:
                break
            path = path.rsplit("/", 1)[0]
        return None, None


def _yaml(value: Any) -> str:
    """A rule value as a policy author writes it (true, not True)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _problem(file: _File, code: str, message: str, path: str, hint: str | None = None) -> Problem:
    line, column = file.locate(path)
    return Problem(code=code, message=message, path=path, hint=hint, file=file.name, line=line, column=column)


# -- reading ----------------------------------------------------------------

def _read_sources(rules_dir: str | Path | None) -> tuple[list[_File], str]:
    if rules_dir is None:
        root = resources.files("hma_policy.rules")
        source = "bundled"
    else:
        root = Path(rules_dir)
        source = str(rules_dir)
        if not root.is_dir():
            raise PolicyError([Problem("rules.read", f"`{rules_dir}` is not a directory", file=str(rules_dir))])
    files = []
    inside = os.path.realpath(root) if rules_dir is not None else None
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith((".yaml", ".yml")):
            continue
        if inside is not None and entry.is_symlink():
            # A link can name any file of the machine: one that leaves the
            # directory is refused unread, so that no error quotes its content.
            target = os.path.realpath(entry)
            if os.path.commonpath([inside, target]) != inside:
                raise PolicyError([Problem("rules.read", f"is a symbolic link to `{target}`, outside the rules directory; "
                                           "rule files are read only from inside it", file=entry.name)])
        if not entry.is_file():
            continue
        try:
            raw = entry.read_bytes()
        except OSError as exc:
            raise PolicyError([Problem("rules.read", f"cannot read `{entry.name}`: {exc.strerror or exc}", file=entry.name)]) from None
        if len(raw) > 4 * 1024 * 1024:
            raise PolicyError([Problem("rules.limit", "rule file is larger than 4 MiB", file=entry.name)])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PolicyError([Problem("rules.encoding", f"not UTF-8 text (byte {exc.start})", file=entry.name)]) from None
        files.append(_File(entry.name, text))
    return files, source


def _parse(file: _File) -> Iterator[Problem]:
    try:
        file.data, file.marks = yamlsafe.load(file.text, marks=True)
    except yamlsafe.YamlProblem as exc:
        yield Problem("rules.limit" if exc.limit else "rules.parse", f"invalid YAML: {exc.message}", file=file.name,
                      line=exc.line, column=exc.column)
        return
    yield from _hazards(file)


# durable-rules' C core crashes on floats in exponent form and hangs defining
# more than 512 alternatives on one property; conditions on `sid`/`id` are
# joins on its 32-bit hash identities. Rule files are checked for these shapes
# before anything is compiled (../shared/reference/durable-rules.md).
MAX_ALTERNATIVES = 500
MAX_STEP_FACTS = 60
RESERVED_FACTS = {"t", "sid", "id"}


def _hazards(file: _File) -> Iterator[Problem]:
    stack: list[tuple[Any, str]] = [(file.data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float):
            yield _problem(file, "rules.hazard.float", f"`{value}` is a float; rule files hold only strings, booleans and integers",
                           path, "durable-rules crashes on floats such as 1e-05; use an integer or a string")
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((item, path + pointer([key])))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, path + pointer([index])))


def _conditions(when: dict[str, Any]) -> tuple[tuple[str, str, Any], ...]:
    out = []
    for fact, test in when.items():
        if isinstance(test, dict):
            (op, operand), = test.items()
            if op in ("in", "not_in"):
                operand = tuple(operand)
        else:
            op, operand = "eq", test
        out.append((fact, op, operand))
    return tuple(out)


def _registry_rules(file: _File) -> tuple[list[Rule], dict[str, str]]:
    """Compile registry entries into rules of the node step ``class_hma``."""
    rules: list[Rule] = []
    connectors = file.data.get("connectors") or {}
    for name, entry in connectors.items():
        base = pointer(["connectors", name])
        verdict = "supported" if entry["supports_hma"] else "unsupported"
        class_name = entry.get("class", name)
        lookups = []
        if entry.get("registered", True):
            lookups.append(("", (("resolution", "eq", "registry"), ("name", "eq", name))))
        if entry.get("module_path"):
            lookups.append((".module", (("resolution", "eq", "module"), ("module_path_value", "eq", entry["module_path"]), ("name", "eq", class_name))))
        for suffix, keys in lookups:
            for index, case in enumerate(entry.get("cases") or ()):
                value = "supported" if case["supports_hma"] else "unsupported"
                path = base + pointer(["cases", index])
                rules.append(Rule(
                    id=f"registry.{name}{suffix}.{case['id']}", ruleset="node", step="class_hma",
                    when=keys + _conditions(case["when"]), value=value,
                    reason=f"`{name}` {'supports' if case['supports_hma'] else 'does not support'} HMA here: {case.get('note') or case['id']}",
                    file=file.name, path=path, line=file.locate(path)[0], column=file.locate(path)[1],
                ))
            rules.append(Rule(
                id=f"registry.{name}{suffix}", ruleset="node", step="class_hma", when=keys, value=verdict,
                reason=f"`{name}` {'inherits' if entry['supports_hma'] else 'does not inherit'} SupportsHMA (registry)",
                file=file.name, path=base, line=file.locate(base)[0], column=file.locate(base)[1],
            ))
    registered = {name: file.name for name, entry in connectors.items() if entry.get("registered", True)}
    return rules, registered


# -- checks -----------------------------------------------------------------

def _check_rule(rule: Rule, known: dict[str, Fact], file: _File, errorful: set[str]) -> Iterator[Problem]:
    for fact, op, operand in rule.when:
        path = rule.path + "/when/" + fact
        if fact in RESERVED_FACTS:
            hint = ("`t` is the engine's step discriminator in every event" if fact == "t" else
                    "conditions on sid/id are joins on 32-bit hash identities and corrupt results")
            yield _problem(file, "rules.hazard.reserved_fact", f"rule `{rule.id}` tests `{fact}`, which durable-rules reserves",
                           path, hint)
            continue
        spec = known.get(fact)
        if spec is None:
            yield _problem(file, "rules.unknown_fact", f"rule `{rule.id}` reads unknown fact `{fact}`", path, suggest(fact, known))
            continue
        ftype = spec.type
        operands = operand if op in ("in", "not_in") else (operand,)
        if op == "contains" and ftype != "names":
            yield _problem(file, "rules.bad_operator", f"`contains` needs a list fact, `{fact}` is {ftype}", path)
            continue
        if op != "contains" and ftype == "names":
            yield _problem(file, "rules.bad_operator", f"list fact `{fact}` can only be tested with `contains`", path)
            continue
        if op in ("lt", "le", "gt", "ge") and ftype != "int":
            yield _problem(file, "rules.bad_operator", f"`{op}` needs an integer fact, `{fact}` is {ftype}", path)
            continue
        for value in operands:
            expected = {"bool": bool, "int": int, "str": str, "names": str}[ftype]
            if not isinstance(value, expected) or (ftype == "int" and isinstance(value, bool)):
                yield _problem(file, "rules.bad_value", f"fact `{fact}` is {ftype}, got `{_yaml(value)}`", path)
            elif spec.values is not None and value not in spec.values:
                choices = ", ".join(f"`{v}`" for v in spec.values)
                yield _problem(file, "rules.bad_value", f"fact `{fact}` is never `{_yaml(value)}`; it is one of {choices}", path,
                               suggest(str(value), [str(v) for v in spec.values]))
    for kind in ("error", "warning"):
        spec = getattr(rule, kind)
        if not spec:
            continue
        if "copy" in spec:
            if spec["copy"] not in errorful:
                yield _problem(file, "rules.bad_copy", f"rule `{rule.id}` copies the error of `{spec['copy']}`, which carries none",
                               rule.path + f"/{kind}/copy", suggest(spec["copy"], errorful))
            continue
        for name in PLACEHOLDER.findall(spec.get("message", "")):
            if name not in known:
                yield _problem(file, "rules.unknown_fact", f"message of rule `{rule.id}` names unknown fact `{name}`",
                               rule.path + f"/{kind}/message", suggest(name, known))
    for name in PLACEHOLDER.findall(rule.reason or ""):
        if name not in known:
            yield _problem(file, "rules.unknown_fact", f"reason of rule `{rule.id}` names unknown fact `{name}`",
                           rule.path + "/reason", suggest(name, known))
    if rule.remediation is not None:
        if not (rule.error or rule.warning):
            yield _problem(file, "rules.bad_remediation", f"rule `{rule.id}` has a remediation but raises no error or warning",
                           rule.path + "/remediation", "a remediation says how to fix what the rule's error or warning reports")
        for name in PLACEHOLDER.findall(rule.remediation):
            if name not in known and name not in REMEDIATION_PLACEHOLDERS:
                yield _problem(file, "rules.unknown_fact", f"remediation of rule `{rule.id}` names unknown fact `{name}`",
                               rule.path + "/remediation", suggest(name, [*known, *REMEDIATION_PLACEHOLDERS]))
    for kind in ("error", "warning"):
        spec = getattr(rule, kind)
        if spec and "at" in spec:
            at = spec["at"]
            if rule.ruleset == "node" and at.startswith("/"):
                yield _problem(file, "rules.bad_at", f"`at` of rule `{rule.id}` must name a field of the node, not `{at}`",
                               rule.path + f"/{kind}/at", "write `kv_connector`, or \"\" for the node itself")
            elif rule.ruleset != "node" and at and not at.startswith("/"):
                yield _problem(file, "rules.bad_at", f"`at` of rule `{rule.id}` must be a JSON Pointer starting with `/`, not `{at}`",
                               rule.path + f"/{kind}/at")
    if rule.ruleset == "offloading" and rule.error and rule.error.get("stage", "config") != "config":
        yield _problem(file, "rules.bad_stage", f"error of rule `{rule.id}` must have stage `config`",
                       rule.path + "/error/stage", "the offloading shorthand runs inside VllmConfig, before any connector exists")
    if rule.ruleset not in ("node", "result") and rule.error and "stage" not in rule.error:
        yield _problem(file, "rules.missing_stage", f"error of rule `{rule.id}` needs a `stage` (config or connector)",
                       rule.path + "/error", "config: VllmConfig rejects the configuration; connector: start-up fails")
    if rule.ruleset == "result" and (rule.error or rule.warning):
        yield _problem(file, "rules.bad_result", f"result rule `{rule.id}` raises an error or warning",
                       rule.path, "result steps only map the final facts to the outcome and flag")
    carriers = ERROR_VALUES.get((rule.ruleset, rule.step), ("error",))
    if rule.ruleset != "result":
        if rule.error and rule.value not in carriers:
            spelled = " or ".join(f"`{v}`" for v in carriers)
            yield _problem(file, "rules.error_value", f"rule `{rule.id}` raises an error, so its value must be {spelled}", rule.path + "/value")
        if rule.value in carriers and not rule.error:
            yield _problem(file, "rules.error_value", f"rule `{rule.id}` has value `{rule.value}` but no `error`", rule.path + "/value")


def _step_fact(step: StepDef, ruleset: str) -> Fact:
    """The fact a step sets, as later rules see it."""
    values = step.values
    if all(isinstance(v, bool) for v in values):
        kind, closed = "bool", None
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        kind, closed = "int", tuple(sorted({str(v) for v in values}))
    else:
        kind, closed = "str", tuple(sorted(v for v in set(values) if isinstance(v, str)))
    return Fact(step.name, ruleset, kind, step.description or f"set by step `{step.name}`", closed)


def _unreachable(fact: Fact) -> Fact:
    """A decision step's fact as result steps read it: it may be `unreached`."""
    if fact.type != "str" or fact.values is None:
        return fact._replace(ruleset="result")
    return fact._replace(ruleset="result", values=tuple(sorted({*fact.values, UNREACHED})))


# The sections that rule folders written for hma-policy 0.1 lack: there the
# engine itself computed the MultiConnector aggregates and the outcome.
_LEGACY = (("node", "aggregates"), ("decision", "results"))


def _legacy_sections(rulesets: dict[str, _File]) -> list[Problem]:
    """Give a rule folder of hma-policy 0.1 the bundled aggregates and result
    steps it lacks, which keeps its decisions as they were; and say so."""
    notes = []
    bundled = resources.files("hma_policy.rules")
    for ruleset, key in _LEGACY:
        file = rulesets[ruleset]
        if key in file.data:
            continue
        source = bundled.joinpath({"node": "nodes.yaml", "decision": "decision.yaml"}[ruleset])
        data, _ = yamlsafe.load(source.read_text("utf-8")) if source.is_file() else ({}, None)
        if key not in data:
            continue
        file.data = {**file.data, key: data[key]}
        notes.append(Problem("rules.legacy", f"`{file.name}` has no `{key}` (a rule folder of hma-policy 0.1): "
                             f"the bundled {key} are used", file=file.name,
                             hint=f"copy `{key}` from the bundled {source.name} (`hma-policy rules init` writes them)"))
    return notes


def _raw_values(raw_step: dict[str, Any], registry_rules: list[Rule]) -> tuple[Any, ...]:
    """A step's values as its rule file gives them (the registry's where it is included)."""
    out: dict[Any, None] = {} if raw_step.get("default") is None else {raw_step["default"]: None}
    for raw in raw_step["rules"]:
        for value in ([r.value for r in registry_rules] if "include" in raw else [raw["value"]]):
            out.setdefault(value, None)
    return tuple(out)


def _aggregates(file: _File, node_steps: dict[str, Any], problems: list[Problem]) -> list[Aggregate]:
    out: list[Aggregate] = []
    for index, raw in enumerate(file.data.get("aggregates") or ()):
        path = pointer(["aggregates", index])
        after = (raw["after"]["fact"], raw["after"]["is"]) if "after" in raw else None
        aggregate = Aggregate(raw["fact"], raw["over"], frozenset(raw["skip"]), raw["none"], after,
                              raw.get("description", ""), file.name, path)
        if aggregate.over not in node_steps:
            problems.append(_problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` is over `{aggregate.over}`, which is not a node step",
                                     path + "/over", suggest(aggregate.over, node_steps)))
        if after is not None and after[0] not in {a.fact for a in out}:
            problems.append(_problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` scans after `{after[0]}`, which is not an earlier aggregate",
                                     path + "/after/fact", suggest(after[0], [a.fact for a in out])))
            continue
        if aggregate.fact in declared("node") or aggregate.fact in node_steps or aggregate.fact in {a.fact for a in out}:
            problems.append(_problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` sets a fact that already exists", path + "/fact"))
            continue
        out.append(aggregate)
    return out


def _aggregate_fact(aggregate: Aggregate, over: tuple[Any, ...] | None) -> Fact:
    values = None if over is None else tuple(sorted({str(aggregate.none)} | {str(v) for v in over if v not in aggregate.skip}))
    given = [Relation("children", "ge", 1)]
    if aggregate.after is not None:
        given = [Relation(aggregate.after[0], "eq", aggregate.after[1]), Relation("children", "ge", 2)]
    return Fact(aggregate.fact, "node", "str", aggregate.description or f"aggregate over the children's `{aggregate.over}`",
                values, aggregate.none, tuple(given))


def _build_steps(file: _File, ruleset: str, raw_steps: list[Any], known: dict[str, Fact], errorful: set[str],
                 registry_rules: list[Rule], good: list[_File], seen_ids: dict[str, str],
                 problems: list[Problem], base: list[Any]) -> tuple[tuple[StepDef, ...], int]:
    """The steps of one ruleset, checked; ``known`` and ``errorful`` gain each step's fact."""
    built: list[StepDef] = []
    includes = 0
    for s_index, raw_step in enumerate(raw_steps):
        s_path = pointer([*base, s_index])
        name = raw_step["step"]
        if name in known:
            problems.append(_problem(file, "rules.duplicate_step", f"step `{name}` sets a fact that already exists", s_path + "/step"))
        rules: list[Rule] = []
        for r_index, raw in enumerate(raw_step["rules"]):
            r_path = s_path + pointer(["rules", r_index])
            if "include" in raw:
                if ruleset != "node":
                    problems.append(_problem(file, "rules.bad_include", "the registry can only be included in node rules", r_path,
                                             "move `include: registry` into the node step that sets `class_hma`"))
                    continue
                includes += 1
                rules.extend(replace(r, step=name) for r in registry_rules)
                continue
            rules.append(Rule(
                id=raw["id"], ruleset=ruleset, step=name, when=_conditions(raw["when"]), value=raw["value"],
                error=raw.get("error"), warning=raw.get("warning"), reason=raw.get("reason"),
                remediation=raw.get("remediation"), file=file.name, path=r_path, line=file.locate(r_path)[0],
                column=file.locate(r_path)[1],
            ))
        for rule in rules:
            rule_file = file if rule.file == file.name else next(f for f in good if f.name == rule.file)
            if rule.id in seen_ids:
                problems.append(_problem(rule_file, "rules.duplicate_id", f"rule id `{rule.id}` is used twice (first in `{seen_ids[rule.id]}`)", rule.path + ("/id" if rule_file is file else "")))
            seen_ids.setdefault(rule.id, rule.file)
            problems.extend(_check_rule(rule, known, rule_file, errorful))
        read = {fact for rule in rules for fact in rule.reads}
        if len(read) > MAX_STEP_FACTS:
            problems.append(_problem(file, "rules.hazard.properties",
                                     f"step `{name}` reads {len(read)} facts; at most {MAX_STEP_FACTS} are allowed", s_path,
                                     "durable-rules crashes on events with more than 252 properties"))
        step = StepDef(ruleset, name, raw_step.get("default"), tuple(rules), raw_step.get("description", ""),
                       file.name, s_path, raw_step.get("hit", "first"), *file.locate(s_path))
        known[name] = _step_fact(step, ruleset)
        if any(v in ERROR_VALUES.get((ruleset, name), ("error",)) for v in step.values):
            errorful.add(name)
        built.append(step)
    return tuple(built), includes


def _check_alternatives(steps: tuple[StepDef, ...], rulesets: dict[str, _File], good: list[_File], problems: list[Problem]) -> None:
    # durable-rules hangs defining a ruleset when more than about 512 distinct
    # tests hang under one node of its match network. Every rule of a step
    # starts with the step's discriminator, so the tests of one step share
    # that node: count the distinct (fact, value) tests per step (measured:
    # 260 values on each of two facts in one step hang; 520 values on one
    # fact split over two steps load).
    for step in steps:
        tests: set = set()
        for rule in step.rules:
            before = len(tests)
            for fact, op, operand in rule.when:
                tests.update((fact, type(v).__name__, v) for v in (operand if op in ("in", "not_in") else (operand,)))
            if before <= MAX_ALTERNATIVES < len(tests):
                rule_file = next((f for f in good if f.name == rule.file), rulesets[step.ruleset if step.ruleset != "result" else "decision"])
                advice = ("the registry compiles into this step, so it holds at most about 490 lookups"
                          if rule.id.startswith("registry.") else "move some conditions to another step")
                problems.append(_problem(rule_file, "rules.hazard.alternatives",
                                         f"step `{step.name}` tests more than {MAX_ALTERNATIVES} distinct values",
                                         rule.path, f"durable-rules hangs defining more than 512 tests in one step; {advice}"))


def _check_contract(ruleset: str, file: _File, steps: tuple[StepDef, ...], problems: list[Problem]) -> None:
    defined = {step.name: step for step in steps}
    for name, values in CONTRACT[ruleset].items():
        step = defined.get(name)
        if step is None:
            problems.append(_problem(file, "rules.contract", f"ruleset `{ruleset}` must have a step `{name}`; the engine reads it",
                                     "/steps" if ruleset != "result" else "/results", suggest(name, defined)))
            continue
        if values is None:
            continue
        understood = ", ".join(f"`{_yaml(v)}`" for v in sorted(values, key=str))
        if step.default is not None and step.default not in values:
            problems.append(_problem(file, "rules.contract",
                                     f"step `{name}` defaults to `{_yaml(step.default)}`; the engine understands {understood}", step.path + "/default"))
        for rule in step.rules:
            if rule.value not in values:
                problems.append(_problem(file, "rules.contract",
                                         f"rule `{rule.id}` gives step `{name}` the value `{_yaml(rule.value)}`; the engine understands {understood}",
                                         rule.path + "/value"))


def read_policy(rules_dir: str | Path | None = None) -> PolicyModel:
    """Read and check a rules directory (None: the bundled rules)."""
    files, source = _read_sources(rules_dir)
    problems: list[Problem] = []
    for file in files:
        problems.extend(_parse(file))
    good = [f for f in files if f.marks is not None]
    for file in good:
        # A float is reported once, as the hazard it is, not again as a type error.
        floats = {p.path for p in problems if p.code == "rules.hazard.float" and p.file == file.name}
        for p in iter_problems("rules", file.data, default_code="rules.schema"):
            if p.path not in floats:
                problems.append(_problem(file, p.code, p.message, p.path, p.hint))
    if problems:
        raise PolicyError(problems)

    registry_rules: list[Rule] = []
    registered: dict[str, str] = {}
    rulesets: dict[str, _File] = {}
    for file in good:
        if file.data["kind"] == "registry":
            rules, names = _registry_rules(file)
            for name in names:
                if name in registered:
                    problems.append(_problem(file, "rules.duplicate_connector", f"connector `{name}` is also declared in `{registered[name]}`", pointer(["connectors", name])))
            registered.update(names)
            registry_rules.extend(rules)
        else:
            name = file.data["ruleset"]
            if name in rulesets:
                problems.append(_problem(file, "rules.duplicate_ruleset", f"ruleset `{name}` is also defined in `{rulesets[name].name}`", "/ruleset"))
            rulesets[name] = file
    for name in FILE_RULESETS:
        if name not in rulesets:
            problems.append(Problem("rules.missing_ruleset", f"no rule file defines ruleset `{name}`", file=source))
    if not any(f.data["kind"] == "registry" for f in good):
        problems.append(Problem("rules.missing_registry", "no rule file is a connector registry (kind: registry)", file=source))
    if problems:
        raise PolicyError(problems)
    for name, file in rulesets.items():
        for key, owner in (("aggregates", "node"), ("results", "decision"), ("containers", "node")):
            if key in file.data and name != owner:
                problems.append(_problem(file, "rules.misplaced", f"`{key}` belongs in the {owner} rules, not in ruleset `{name}`", "/" + key))
    notes = _legacy_sections(rulesets)

    steps: dict[str, tuple[StepDef, ...]] = {}
    vocabulary: dict[str, dict[str, Fact]] = {}
    aggregates: list[Aggregate] = []
    seen_ids: dict[str, str] = {}
    include_count = 0
    node_file = rulesets["node"]
    for ruleset in FILE_RULESETS:
        file = rulesets[ruleset]
        known = dict(declared(ruleset))
        errorful: set[str] = set()
        if ruleset == "node":
            # Node rules read the aggregates, which read the node steps'
            # values: those are known from the rule file before it is built.
            values_of = {raw["step"]: _raw_values(raw, registry_rules) for raw in file.data["steps"]}
            for aggregate in _aggregates(file, values_of, problems):
                # An aggregate over a missing step is reported once, above: its
                # fact stays known (any value, carrying errors) so that the
                # rules reading it are not reported too.
                over = values_of.get(aggregate.over)
                known[aggregate.fact] = _aggregate_fact(aggregate, over)
                aggregates.append(aggregate)
                if over is None or any(v in ERROR_VALUES.get(("node", aggregate.over), ("error",)) for v in over):
                    errorful.add(aggregate.fact)
        if ruleset == "decision":
            errorful |= set(GRAPH_FACTS)
        built, includes = _build_steps(file, ruleset, file.data["steps"], known, errorful, registry_rules, good,
                                       seen_ids, problems, ["steps"])
        include_count += includes
        steps[ruleset] = built
        vocabulary[ruleset] = known
    # The result steps read the decision steps' values (`unreached` for a
    # step the evaluation did not reach) and `error_stage`. Problems in the
    # decision steps would make them fail too: they are checked without.
    decision_file = rulesets["decision"]
    decision_ok = not any(p.file == decision_file.name for p in problems)
    result_known = {step.name: _unreachable(vocabulary["decision"][step.name]) for step in steps["decision"]}
    result_known.update(declared("result"))
    result_steps: tuple[StepDef, ...] = ()
    if "results" in decision_file.data and decision_ok:
        result_steps, _ = _build_steps(decision_file, "result", decision_file.data["results"], result_known, set(),
                                       [], good, seen_ids, problems, ["results"])
    steps["result"] = result_steps
    vocabulary["result"] = result_known
    for ruleset in FILE_RULESETS:
        _check_alternatives(steps[ruleset], rulesets, good, problems)
        _check_contract(ruleset, rulesets[ruleset], steps[ruleset], problems)
    if decision_ok:
        _check_alternatives(steps["result"], rulesets, good, problems)
        _check_contract("result", decision_file, steps["result"], problems)
    # A node step that can fail must hand its error on: to a later copy, or
    # through a step that an aggregate or the decision reads.
    handed_on = {a.over for a in aggregates} | set(GRAPH_FACTS.values())
    node_steps = steps["node"]
    for index, step in enumerate(node_steps):
        if "error" not in step.values or step.name in handed_on:
            continue
        copied = any((r.error or {}).get("copy") == step.name for later in node_steps[index + 1:] for r in later.rules)
        if not copied:
            problems.append(_problem(node_file, "rules.error_lost",
                                     f"step `{step.name}` can fail but no later rule copies its error, so it would be lost",
                                     step.path, "add a rule with `error: {copy: " + step.name + "}` to support, setup or construct"))
    for raw_file in good:
        if raw_file.data.get("kind") != "registry":
            continue
        for name, entry in (raw_file.data.get("connectors") or {}).items():
            if not entry.get("registered", True) and not entry.get("module_path"):
                problems.append(_problem(raw_file, "rules.unreachable_entry",
                                         f"connector `{name}` is neither registered nor reachable by module path",
                                         pointer(["connectors", name]), "give it a `module_path`, or drop `registered: false`"))
    if include_count != 1 and not any(p.code == "rules.bad_include" for p in problems):
        problems.append(Problem("rules.bad_include", f"the registry must be included exactly once in node rules (found {include_count})", file=node_file.name))
    if problems:
        raise PolicyError(problems)

    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.text.encode() + b"\0")
    return PolicyModel(
        steps=steps,
        aggregates=tuple(aggregates),
        registered_names=tuple(sorted(registered)),
        containers=frozenset(node_file.data.get("containers") or ()),
        vocabulary=vocabulary,
        digest="sha256:" + digest.hexdigest(),
        source=source,
        files=tuple(f.name for f in files),
        notes=tuple(notes),
    )
