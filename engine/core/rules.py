"""The policy model: read a policy's rule files, check them, and build its steps.

Every problem found in the rule files is collected (schema first, then the
semantic checks of :mod:`.rulecheck` on files that passed it) and raised at
once as a :class:`PolicyError`, sorted by file and location. The model holds
each ruleset's steps in order, the MultiConnector aggregates, the graph facts
the decision reads from the top-level connector, the registry's names, the
release the policy decides for, and the full fact vocabulary (:mod:`.facts`
plus what the rules add), from which the step table, the evaluator and the
verifier work.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import releases, yamlsafe
from .errors import PolicyError, Problem, suggest
from .facts import DEFAULT_GRAPH, UNREACHED, Fact, Relation, declared, graph_fact, release_facts
from .rulecheck import (ERROR_VALUES, MAX_STEP_FACTS, check_alternatives, check_contract, check_handed_on,
                        check_registry_entries, check_rule)
from .model import FILE_RULESETS, Aggregate, GraphFact, PolicyModel, Rule, StepDef
from .modules import FOLDER_FILE, read_modules
from .rulefiles import RuleFile, folder_release, parse, problem, read_file, read_sources
from .schema import iter_problems, pointer

__all__ = ["read_policy"]

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


def _registry_rules(file: RuleFile) -> tuple[list[Rule], dict[str, str]]:
    """Compile registry entries into rules of the node step ``class_hma``."""
    rules: list[Rule] = []
    connectors = file.data.get("connectors") or {}
    for name, entry in connectors.items():
        base = pointer(["connectors", name])
        verdict = "supported" if entry["supports_hma"] else "unsupported"
        class_name = entry.get("class", name)
        lookups: list[tuple[str, tuple[tuple[str, str, Any], ...]]] = []  # (rule id suffix, the tests that find the entry)
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


def _legacy_sections(rulesets: dict[str, RuleFile]) -> list[Problem]:
    """Give a rule folder of hma-policy 0.1 the bundled aggregates and result
    steps it lacks, which keeps its decisions as they were; and say so."""
    notes = []
    bundle = releases.bundled()
    epoch = bundle.root.joinpath(releases.EPOCHS, bundle.releases[bundle.default].epoch)
    for ruleset, key in _LEGACY:
        file = rulesets[ruleset]
        if key in file.data:
            continue
        source = epoch.joinpath({"node": "nodes.yaml", "decision": "decision.yaml"}[ruleset])
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


def _aggregates(file: RuleFile, node_steps: dict[str, Any], problems: list[Problem]) -> list[Aggregate]:
    out: list[Aggregate] = []
    for index, raw in enumerate(file.data.get("aggregates") or ()):
        path = pointer(["aggregates", index])
        after = (raw["after"]["fact"], raw["after"]["is"]) if "after" in raw else None
        aggregate = Aggregate(raw["fact"], raw["over"], frozenset(raw["skip"]), raw["none"], after,
                              raw.get("description", ""), file.name, path)
        if aggregate.over not in node_steps:
            problems.append(problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` is over `{aggregate.over}`, which is not a node step",
                                     path + "/over", suggest(aggregate.over, node_steps)))
        if after is not None and after[0] not in {a.fact for a in out}:
            problems.append(problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` scans after `{after[0]}`, which is not an earlier aggregate",
                                     path + "/after/fact", suggest(after[0], [a.fact for a in out])))
            continue
        if aggregate.fact in declared("node") or aggregate.fact in node_steps or aggregate.fact in {a.fact for a in out}:
            problems.append(problem(file, "rules.bad_aggregate", f"aggregate `{aggregate.fact}` sets a fact that already exists", path + "/fact"))
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


def _included(registry_rules: list[Rule], module_lookups: str) -> list[Rule]:
    """The registry's rules as an `include` takes them: with ``unregistered``,
    no lookup by module path of a class name the registry registers by name
    (in a release that resolves such a name by its registry, it cannot fire)."""
    if module_lookups == "all":
        return registry_rules
    by_name = {value for rule in registry_rules if ("resolution", "eq", "registry") in rule.when
               for fact, op, value in rule.when if fact == "name"}
    return [rule for rule in registry_rules
            if not (("resolution", "eq", "module") in rule.when
                    and any(fact == "name" and value in by_name for fact, op, value in rule.when))]


def _build_steps(file: RuleFile, ruleset: str, raw_steps: list[Any], known: dict[str, Fact], errorful: set[str],
                 registry_rules: list[Rule], good: list[RuleFile], seen_ids: dict[str, str],
                 problems: list[Problem], base: list[Any]) -> tuple[tuple[StepDef, ...], int]:
    """The steps of one ruleset, checked; ``known`` and ``errorful`` gain each step's fact."""
    built: list[StepDef] = []
    includes = 0
    for s_index, raw_step in enumerate(raw_steps):
        s_path = pointer([*base, s_index])
        name = raw_step["step"]
        if name in known:
            problems.append(problem(file, "rules.duplicate_step", f"step `{name}` sets a fact that already exists", s_path + "/step"))
        rules: list[Rule] = []
        for r_index, raw in enumerate(raw_step["rules"]):
            r_path = s_path + pointer(["rules", r_index])
            if "include" in raw:
                if ruleset != "node":
                    problems.append(problem(file, "rules.bad_include", "the registry can only be included in node rules", r_path,
                                             "move `include: registry` into the node step that sets `class_hma`"))
                    continue
                includes += 1
                rules.extend(replace(r, step=name) for r in _included(registry_rules, raw.get("module_lookups", "all")))
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
                problems.append(problem(rule_file, "rules.duplicate_id", f"rule id `{rule.id}` is used twice (first in `{seen_ids[rule.id]}`)", rule.path + ("/id" if rule_file is file else "")))
            seen_ids.setdefault(rule.id, rule.file)
            problems.extend(check_rule(rule, known, rule_file, errorful))
        read = {fact for rule in rules for fact in rule.reads}
        if len(read) > MAX_STEP_FACTS:
            problems.append(problem(file, "rules.hazard.properties",
                                     f"step `{name}` reads {len(read)} facts; at most {MAX_STEP_FACTS} are allowed", s_path,
                                     "durable-rules crashes on events with more than 252 properties"))
        step = StepDef(ruleset, name, raw_step.get("default"), tuple(rules), raw_step.get("description", ""),
                       file.name, s_path, raw_step.get("hit", "first"), *file.locate(s_path))
        known[name] = _step_fact(step, ruleset)
        if any(v in ERROR_VALUES.get((ruleset, name), ("error",)) for v in step.values):
            errorful.add(name)
        built.append(step)
    return tuple(built), includes


def _graph_facts(file: RuleFile, node_steps: tuple[StepDef, ...], node_errorful: set[str],
                 problems: list[Problem]) -> tuple[list[GraphFact], dict[str, Fact], set[str]]:
    """The decision facts read from the top-level node (the decision file's
    `graph:`, else :data:`.facts.DEFAULT_GRAPH`), as facts, and those that
    carry an error."""
    raw = file.data.get("graph")
    entries = ([(e["fact"], e["step"], e.get("description", "")) for e in raw] if raw is not None else DEFAULT_GRAPH)
    by_name = {step.name: step for step in node_steps}
    declared_here = declared("decision")
    out: list[GraphFact] = []
    facts: dict[str, Fact] = {}
    errorful: set[str] = set()
    for index, (name, step_name, description) in enumerate(entries):
        path = pointer(["graph", index])
        step = by_name.get(step_name)
        if step is None:
            problems.append(problem(file, "rules.bad_graph", f"graph fact `{name}` reads node step `{step_name}`, which does not exist",
                                    path + "/step", suggest(step_name, by_name)))
            # Declared all the same, open and able to fail, so that the
            # rules reading it report no second problem for this one.
            facts[name] = graph_fact(name, description, None)
            errorful.add(name)
            continue
        if not all(isinstance(v, str) for v in step.values):
            problems.append(problem(file, "rules.bad_graph", f"graph fact `{name}` reads node step `{step_name}`, whose values "
                                    "are not all strings", path + "/step", "a graph fact is `none` without a connector graph, "
                                    "so it reads a step whose values are strings"))
            continue
        if name in declared_here or name in facts:
            problems.append(problem(file, "rules.bad_graph", f"graph fact `{name}` is a fact that already exists", path + "/fact"))
            continue
        out.append(GraphFact(name, step_name, description))
        facts[name] = graph_fact(name, description or f"the top-level node's `{step_name}`", step.values)
        if step_name in node_errorful:
            errorful.add(name)
    return out, facts, errorful


def read_policy(rules_dir: str | Path | None = None, *, release: str | None = None) -> PolicyModel:
    """Read and check a policy: the rules folder ``rules_dir`` (None: the
    bundled rules), for ``release`` where it is a bundle of releases (None:
    its default). Raises :class:`PolicyError` listing every problem, and
    :class:`InputError` for a release the bundle does not hold."""
    files, source, chosen, bundle = read_sources(rules_dir, release)
    problems: list[Problem] = []
    for file in files:
        problems.extend(parse(file))
    good = [f for f in files if f.marks is not None]
    for file in good:
        # A float is reported once, as the hazard it is, not again as a type error.
        floats = {p.path for p in problems if p.code == "rules.hazard.float" and p.file == file.name}
        for p in iter_problems("rules", file.data, default_code="rules.schema"):
            if p.path not in floats:
                problems.append(problem(file, p.code, p.message, p.path, p.hint))
    if problems:
        raise PolicyError(problems)

    registry_rules: list[Rule] = []
    registered: dict[str, str] = {}
    rulesets: dict[str, RuleFile] = {}
    registries = [f for f in good if f.data["kind"] == "registry"]
    for file in good:
        if file.data["kind"] == "registry":
            rules, names = _registry_rules(file)
            for name in names:
                if name in registered:
                    problems.append(problem(file, "rules.duplicate_connector", f"connector `{name}` is also declared in `{registered[name]}`", pointer(["connectors", name])))
            registered.update(names)
            registry_rules.extend(rules)
        else:
            name = file.data["ruleset"]
            if name in rulesets:
                problems.append(problem(file, "rules.duplicate_ruleset", f"ruleset `{name}` is also defined in `{rulesets[name].name}`", "/ruleset"))
            rulesets[name] = file
    for name in FILE_RULESETS:
        if name not in rulesets:
            problems.append(Problem("rules.missing_ruleset", f"no rule file defines ruleset `{name}`", file=source))
    if not registries:
        problems.append(Problem("rules.missing_registry", "no rule file is a connector registry (kind: registry)", file=source))
    if problems:
        raise PolicyError(problems)
    if bundle is None:
        chosen = folder_release(registries[0].data, release, source)
    assert chosen is not None
    for name, file in rulesets.items():
        for key, owner in (("aggregates", "node"), ("results", "decision"), ("containers", "node"), ("graph", "decision")):
            if key in file.data and name != owner:
                problems.append(problem(file, "rules.misplaced", f"`{key}` belongs in the {owner} rules, not in ruleset `{name}`", "/" + key))
    notes = _legacy_sections(rulesets)

    steps: dict[str, tuple[StepDef, ...]] = {}
    vocabulary: dict[str, dict[str, Fact]] = {}
    aggregates: list[Aggregate] = []
    graph: list[GraphFact] = []
    seen_ids: dict[str, str] = {}
    include_count = 0
    node_errorful: set[str] = set()
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
            graph, graph_known, graph_errorful = _graph_facts(file, steps["node"], node_errorful, problems)
            known.update(graph_known)
            errorful |= graph_errorful
        built, includes = _build_steps(file, ruleset, file.data["steps"], known, errorful, registry_rules, good,
                                       seen_ids, problems, ["steps"])
        if ruleset == "node":
            node_errorful = errorful
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
        check_alternatives(steps[ruleset], rulesets, good, problems)
        check_contract(ruleset, rulesets[ruleset], steps[ruleset], problems)
    if decision_ok:
        check_alternatives(steps["result"], rulesets, good, problems)
        check_contract("result", decision_file, steps["result"], problems)
    check_handed_on(node_file, steps["node"], {a.over for a in aggregates} | {g.step for g in graph}, problems)
    for registry in registries:
        check_registry_entries(registry, problems)
    if include_count != 1 and not any(p.code == "rules.bad_include" for p in problems):
        problems.append(Problem("rules.bad_include", f"the registry must be included exactly once in node rules (found {include_count})", file=node_file.name))
    if problems:
        raise PolicyError(problems)

    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.text.encode() + b"\0")
    # Releases of one epoch share files but not their release facts (vllm_minor,
    # vllm_patch), so they may decide differently: the release is part of the policy.
    digest.update(b"release\0" + chosen.encode())
    modules = _release_modules(bundle, chosen, rules_dir)
    if modules is not None:  # the module table is release data the node facts read
        digest.update(b"modules\0" + modules[0].encode() + b"\0" + modules[1].encode() + b"\0")
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
        graph=tuple(graph),
        release=chosen,
        release_facts=release_facts(chosen),
        bundle=bundle is not None,
        modules=read_modules(modules[1], modules[0]) if modules is not None else None,
    )


def _release_modules(bundle: Any, release: str, rules_dir: str | Path | None) -> tuple[str, str] | None:
    """(name, text) of the module table a bundle names for ``release``, or
    the one a plain folder holds (modules.FOLDER_FILE), or None."""
    if bundle is None:
        found = read_file(Path(rules_dir), FOLDER_FILE) if rules_dir is not None else None
        return (FOLDER_FILE, found.text) if found is not None else None
    name = bundle.releases[release].modules
    if name is None:
        return None
    try:
        return name, bundle.root.joinpath(name).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([Problem("rules.read", f"cannot read `{name}`: {exc}", file=name)]) from None
