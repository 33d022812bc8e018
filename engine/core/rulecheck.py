"""The checks of a policy's rules beyond their schema: what each rule reads
and gives, the contract with the engine, and durable-rules' hazards.

Each check yields or appends the problems it finds, located in the rule file
(:func:`.rulefiles.problem`); :func:`.rules.read_policy` collects them all
and raises them at once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterator

from .compiler import PART_TESTS, rule_tests
from .errors import Problem, suggest
from .facts import Fact
from .rulefiles import RuleFile, problem
from .schema import pointer

if TYPE_CHECKING:
    from .model import Rule, StepDef

__all__ = ["CONTRACT", "ERROR_VALUES", "PLACEHOLDER", "REMEDIATION_PLACEHOLDERS", "MAX_ALTERNATIVES", "MAX_STEP_FACTS",
           "RESERVED_FACTS", "yaml_value", "check_rule", "check_alternatives", "check_contract", "check_handed_on",
           "check_registry_entries"]

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
# Placeholders a remediation may name besides facts (filled from the graph).
REMEDIATION_PLACEHOLDERS = {"blocking"}
# durable-rules hangs defining more than 512 alternatives on one property, and
# crashes on events with more than 252 properties; conditions on `sid`/`id`
# are joins on its 32-bit hash identities (../shared/reference/durable-rules.md).
MAX_ALTERNATIVES = PART_TESTS
MAX_STEP_FACTS = 60
RESERVED_FACTS = {"t", "sid", "id"}


def yaml_value(value: Any) -> str:
    """A rule value as a policy author writes it (true, not True)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


# -- checks -----------------------------------------------------------------

def check_rule(rule: Rule, known: dict[str, Fact], file: RuleFile, errorful: set[str]) -> Iterator[Problem]:
    for fact, op, operand in rule.when:
        path = rule.path + "/when/" + fact
        if fact in RESERVED_FACTS:
            hint = ("`t` is the engine's step discriminator in every event" if fact == "t" else
                    "conditions on sid/id are joins on 32-bit hash identities and corrupt results")
            yield problem(file, "rules.hazard.reserved_fact", f"rule `{rule.id}` tests `{fact}`, which durable-rules reserves",
                           path, hint)
            continue
        spec = known.get(fact)
        if spec is None:
            yield problem(file, "rules.unknown_fact", f"rule `{rule.id}` reads unknown fact `{fact}`", path, suggest(fact, known))
            continue
        ftype = spec.type
        operands = operand if op in ("in", "not_in") else (operand,)
        if op == "contains" and ftype != "names":
            yield problem(file, "rules.bad_operator", f"`contains` needs a list fact, `{fact}` is {ftype}", path)
            continue
        if op != "contains" and ftype == "names":
            yield problem(file, "rules.bad_operator", f"list fact `{fact}` can only be tested with `contains`", path)
            continue
        if op in ("lt", "le", "gt", "ge") and ftype != "int":
            yield problem(file, "rules.bad_operator", f"`{op}` needs an integer fact, `{fact}` is {ftype}", path)
            continue
        for value in operands:
            expected = {"bool": bool, "int": int, "str": str, "names": str}[ftype]
            if not isinstance(value, expected) or (ftype == "int" and isinstance(value, bool)):
                yield problem(file, "rules.bad_value", f"fact `{fact}` is {ftype}, got `{yaml_value(value)}`", path)
            elif spec.values is not None and value not in spec.values:
                choices = ", ".join(f"`{v}`" for v in spec.values)
                yield problem(file, "rules.bad_value", f"fact `{fact}` is never `{yaml_value(value)}`; it is one of {choices}", path,
                               suggest(str(value), [str(v) for v in spec.values]))
    for kind in ("error", "warning"):
        spec = getattr(rule, kind)
        if not spec:
            continue
        if "copy" in spec:
            if spec["copy"] not in errorful:
                yield problem(file, "rules.bad_copy", f"rule `{rule.id}` copies the error of `{spec['copy']}`, which carries none",
                               rule.path + f"/{kind}/copy", suggest(spec["copy"], errorful))
            continue
        for name in PLACEHOLDER.findall(spec.get("message", "")):
            if name not in known:
                yield problem(file, "rules.unknown_fact", f"message of rule `{rule.id}` names unknown fact `{name}`",
                               rule.path + f"/{kind}/message", suggest(name, known))
    for name in PLACEHOLDER.findall(rule.reason or ""):
        if name not in known:
            yield problem(file, "rules.unknown_fact", f"reason of rule `{rule.id}` names unknown fact `{name}`",
                           rule.path + "/reason", suggest(name, known))
    if rule.remediation is not None:
        if not (rule.error or rule.warning):
            yield problem(file, "rules.bad_remediation", f"rule `{rule.id}` has a remediation but raises no error or warning",
                           rule.path + "/remediation", "a remediation says how to fix what the rule's error or warning reports")
        for name in PLACEHOLDER.findall(rule.remediation):
            if name not in known and name not in REMEDIATION_PLACEHOLDERS:
                yield problem(file, "rules.unknown_fact", f"remediation of rule `{rule.id}` names unknown fact `{name}`",
                               rule.path + "/remediation", suggest(name, [*known, *REMEDIATION_PLACEHOLDERS]))
    for kind in ("error", "warning"):
        spec = getattr(rule, kind)
        if spec and "at" in spec:
            at = spec["at"]
            if rule.ruleset == "node" and at.startswith("/"):
                yield problem(file, "rules.bad_at", f"`at` of rule `{rule.id}` must name a field of the node, not `{at}`",
                               rule.path + f"/{kind}/at", "write `kv_connector`, or \"\" for the node itself")
            elif rule.ruleset != "node" and at and not at.startswith("/"):
                yield problem(file, "rules.bad_at", f"`at` of rule `{rule.id}` must be a JSON Pointer starting with `/`, not `{at}`",
                               rule.path + f"/{kind}/at")
    if rule.ruleset == "offloading" and rule.error and rule.error.get("stage", "config") != "config":
        yield problem(file, "rules.bad_stage", f"error of rule `{rule.id}` must have stage `config`",
                       rule.path + "/error/stage", "the offloading shorthand runs inside VllmConfig, before any connector exists")
    if rule.ruleset not in ("node", "result") and rule.error and "stage" not in rule.error:
        yield problem(file, "rules.missing_stage", f"error of rule `{rule.id}` needs a `stage` (config or connector)",
                       rule.path + "/error", "config: VllmConfig rejects the configuration; connector: start-up fails")
    if rule.ruleset == "result" and (rule.error or rule.warning):
        yield problem(file, "rules.bad_result", f"result rule `{rule.id}` raises an error or warning",
                       rule.path, "result steps only map the final facts to the outcome and flag")
    carriers = ERROR_VALUES.get((rule.ruleset, rule.step), ("error",))
    if rule.ruleset != "result":
        if rule.error and rule.value not in carriers:
            spelled = " or ".join(f"`{v}`" for v in carriers)
            yield problem(file, "rules.error_value", f"rule `{rule.id}` raises an error, so its value must be {spelled}", rule.path + "/value")
        if rule.value in carriers and not rule.error:
            yield problem(file, "rules.error_value", f"rule `{rule.id}` has value `{rule.value}` but no `error`", rule.path + "/value")



#####
def check_alternatives(steps: tuple[StepDef, ...], rulesets: dict[str, RuleFile], good: list[RuleFile], problems: list[Problem]) -> None:
    # durable-rules hangs defining a ruleset when more than about 512 distinct
    # tests hang under one node of its match network (measured: 260 values on
    # each of two facts in one step hang; 520 values on one fact split over
    # two steps load). The compiler cuts a step into parts of at most
    # MAX_ALTERNATIVES tests (compiler.parts_of); only a rule that alone tests
    # more cannot be cut.
    for step in steps:
        for rule in step.rules:
            if len(rule_tests(rule)) > MAX_ALTERNATIVES:
                rule_file = next((f for f in good if f.name == rule.file), rulesets[step.ruleset if step.ruleset != "result" else "decision"])
                problems.append(problem(rule_file, "rules.hazard.alternatives",
                                        f"rule `{rule.id}` tests more than {MAX_ALTERNATIVES} distinct values",
                                        rule.path, "durable-rules hangs defining more than 512 tests after one node; "
                                        "split the rule into several rules of the same step, each with part of the values"))


def check_contract(ruleset: str, file: RuleFile, steps: tuple[StepDef, ...], problems: list[Problem]) -> None:
    defined = {step.name: step for step in steps}
    for name, values in CONTRACT[ruleset].items():
        step = defined.get(name)
        if step is None:
            problems.append(problem(file, "rules.contract", f"ruleset `{ruleset}` must have a step `{name}`; the engine reads it",
                                     "/steps" if ruleset != "result" else "/results", suggest(name, defined)))
            continue
        if values is None:
            continue
        understood = ", ".join(f"`{yaml_value(v)}`" for v in sorted(values, key=str))
        if step.default is not None and step.default not in values:
            problems.append(problem(file, "rules.contract",
                                     f"step `{name}` defaults to `{yaml_value(step.default)}`; the engine understands {understood}", step.path + "/default"))
        for rule in step.rules:
            if rule.value not in values:
                problems.append(problem(file, "rules.contract",
                                         f"rule `{rule.id}` gives step `{name}` the value `{yaml_value(rule.value)}`; the engine understands {understood}",
                                         rule.path + "/value"))


def check_handed_on(node_file: RuleFile, node_steps: tuple[StepDef, ...], read_elsewhere: set[str],
                    problems: list[Problem]) -> None:
    """A node step that can fail must hand its error on: to a later copy, or
    through a step that an aggregate or the decision reads (``read_elsewhere``)."""
    for index, step in enumerate(node_steps):
        if "error" not in step.values or step.name in read_elsewhere:
            continue
        copied = any((r.error or {}).get("copy") == step.name for later in node_steps[index + 1:] for r in later.rules)
        if not copied:
            problems.append(problem(node_file, "rules.error_lost",
                                    f"step `{step.name}` can fail but no later rule copies its error, so it would be lost",
                                    step.path, "add a rule with `error: {copy: " + step.name + "}` to support, setup or construct"))


def check_registry_entries(registry: RuleFile, problems: list[Problem]) -> None:
    """Every registry entry is reachable: by its name, or by its module path."""
    for name, entry in (registry.data.get("connectors") or {}).items():
        if not entry.get("registered", True) and not entry.get("module_path"):
            problems.append(problem(registry, "rules.unreachable_entry",
                                    f"connector `{name}` is neither registered nor reachable by module path",
                                    pointer(["connectors", name]), "give it a `module_path`, or drop `registered: false`"))
