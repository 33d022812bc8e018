"""Stage 5, evaluate: run the compiled steps through the rule runtime, the
connector graph bottom-up, and assemble the Decision.

Python here only sequences steps, walks the graph children first, copies a
child's error where a rule says ``copy``, fills message templates, and maps
the final facts to the decision contract. Which connector supports HMA and
what a MultiConnector needs are answered by the rules.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Iterator

from ._durable import RuleRuntime, RuntimeFault
from .compiler import Compiled, compile_policy
from .decision import ConnectorVerdict, Decision, Message
from .errors import HMAPolicyError, InputError, Problem, suggest
from .facts import (FACTS, build_graph, document_facts, document_inputs, env_facts, graph_signature, node_facts,
                    offloading_facts)
from .rules import PolicyModel, Rule, StepDef

# A job run by Evaluator._drive: it yields the events of its next round,
# is sent the names of the rules that answered them, and returns its result.
Job = Generator[list[dict[str, Any]], list[str], Any]

__all__ = ["Evaluator", "EvaluationError"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Bounds on the step memo and the ruleset templates: enough for the fact
# combinations a fleet produces, small enough to keep memory flat over millions
# of distinct documents (each is cleared when full).
_MEMO_LIMIT = 16_384
_TEMPLATE_LIMIT = 16_384
# The decision memo is bounded by the nodes its decisions hold (~0.9 KiB
# each in a fleet), and so are the memos of graph plans and results; the
# memo of node results (each holding its facts and messages) by its entries.
# Every memo entry is walked by each full pass of the cyclic garbage
# collector, and a memo of large graphs that seldom repeat is filled and
# cleared over and over: with the wider bounds below for every decision,
# random distinct documents (benchmarks/differential.py) took 25% longer.
# So these are the bounds for decisions one at a time (decide()): plans and
# graph results for a fleet's common small graphs (an 8-leaf tree is 11
# nodes); an audit, which pauses the collector and decides one fleet, widens
# them (Evaluator.fleet_bounds).
_DECISION_NODE_LIMIT = 16_384
_PLAN_NODE_LIMIT = 1_024
_GRAPH_NODE_LIMIT = 1_024
# An audit's: one --jobs 2 process's share of a 20,000-deployment fleet fits
# (~4,100 decisions, ~2,250 graph signatures, ~12,000 plan nodes); a memo
# cleared midway makes its entries again.
_FLEET_LIMITS = {"_decisions": 24_576, "_plans": 16_384, "_graphs": 8_192}
_NODE_RUN_LIMIT = 4_096


def _rendered_facts(steps: Any) -> list[str]:
    """Facts named in the steps' reasons and messages (and `name`, which a
    did-you-mean hint reads)."""
    out: list[str] = []
    for step in steps:
        for rule in step.rules:
            out += _PLACEHOLDER.findall(rule.reason or "")
            for spec in (rule.error, rule.warning):
                if spec:
                    out += _PLACEHOLDER.findall(spec.get("message", ""))
                    if spec.get("suggest"):
                        out.append("name")
    return out


class _Other:
    """A string no rule of a step or ruleset names (see Evaluator._classes)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<any other string>"


_OTHER = _Other()


def _fact_classes(ruleset: str, facts: Any, steps: Any, offset: int,
                  keep: Any = frozenset()) -> tuple[tuple[int, frozenset, bool], ...]:
    """(position in a key, literals, is a list of names) for each of ``facts``
    that ``steps`` only compare with literal strings; those in ``keep`` keep
    their values. ``offset``: where the facts start in the key."""
    out = []
    for at, fact in enumerate(facts):
        kind = FACTS[ruleset].get(fact, {}).get("type")
        literals = _literals(steps, fact) if kind in ("str", "names") and fact not in keep else None
        if literals is not None:
            out.append((at + offset, literals, kind == "names"))
    return tuple(out)


def _literals(steps: Any, fact: str) -> frozenset | None:
    """The strings the rules of ``steps`` compare ``fact`` with; None when a
    rule tests it in another way (an order), so that its value must be kept."""
    out: set[Any] = set()
    for step in steps:
        for rule in step.rules:
            for name, op, operand in rule.when:
                if name != fact:
                    continue
                if op in ("eq", "ne", "contains"):
                    out.add(operand)
                elif op in ("in", "not_in"):
                    out.update(operand)
                else:
                    return None
    return frozenset(out) if all(type(v) is str for v in out) else None


# supports_hma of a node, by its `support` fact (None for the others).
_SUPPORTS_HMA: dict[Any, bool] = {"supported": True, "unsupported": False}


class EvaluationError(HMAPolicyError):
    """The rule runtime failed (an engine fault, never a property of the document)."""

    # A policy gap (no rule and no default): the step and the facts it read.
    step: tuple[str, str] | None = None
    facts: dict[str, Any] | None = None


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if not text.isprintable():  # checked whole first: one call, where the character loop costs ~2 µs a name
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 80 else text[:77] + "..."


def _render(template: str, facts: Mapping[str, Any]) -> str:
    return _PLACEHOLDER.sub(lambda m: _show(facts.get(m.group(1), m.group(0))), template)


@dataclass(frozen=True)
class _Template:
    entries: tuple  # (StepDef, Rule | None, value) per step evaluated
    values: dict[str, Any]
    reasons: dict[str, str]  # rendered from facts only, so shared by every use
    raises: bool = False  # a picked rule raises an error


@dataclass
class _Run:
    """What one ruleset evaluation produced."""

    facts: dict[str, Any]
    errors: dict[str, Message] = field(default_factory=dict)
    warnings: list[Message] = field(default_factory=list)
    steps: list[tuple] = field(default_factory=list)  # (ruleset, StepDef, node, Rule | None, value, facts)
    fired: dict[str, Rule] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    halted: Message | None = None

    # The __init__s of these three classes are written out: compiled, a
    # dataclass __init__ with default factories is the generated Python one
    # (several thousand instructions each, for every new decision).
    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = facts
        self.errors, self.warnings, self.steps, self.fired, self.reasons = {}, [], [], {}, {}
        self.halted = None


class Evaluator:
    """A compiled policy bound to its own ruleset in the rule runtime."""

    def __init__(self, model: PolicyModel, *, memo: bool = True):
        self.model = model
        self.compiled: Compiled = compile_policy(model)
        self.runtime = RuleRuntime(self.compiled.definition)
        # The C core builds its structures for a ruleset, and for each step's
        # rules, on the first event that reaches them (about 1 ms for the
        # bundled rules). Take that cost here, at load, with one bare event
        # per step (whatever rules they pick are discarded), so that the
        # first decision does not pay it.
        try:
            self.runtime.fire_many([{"t": key} for key in self.compiled.step_keys.values()])
        except RuntimeFault as exc:
            self.runtime.close()
            raise EvaluationError([Problem("engine.fault", str(exc))]) from None
        self.memo_enabled = memo
        self.closed = False
        self._memo: dict[tuple, str] = {}
        self._templates: dict[tuple, _Template] = {}
        self._registered = model.registered_names
        steps_named = {name: {s.name for s in steps} for name, steps in model.steps.items()}
        # Steps of one level read only inputs and earlier levels' facts, so
        # they can go to the rule runtime in one batch.
        self._levels_of: dict[str, list[list[StepDef]]] = {}
        for name, steps in model.steps.items():
            level_of: dict[str, int] = {}
            levels: list[list[StepDef]] = []
            for step in steps:
                level = 1 + max((level_of[f] for f in step.reads if f in level_of), default=-1)
                level_of[step.name] = level
                while len(levels) <= level:
                    levels.append([])
                levels[level].append(step)
            self._levels_of[name] = levels
        # A ruleset's outcome (its template) is keyed by the facts its rules
        # read, and by those its reasons and messages name: a reason is
        # rendered once per template, so a fact it shows must be in the key.
        self._inputs = {
            name: tuple(dict.fromkeys(f for f in [*(f for s in steps for f in s.reads), *_rendered_facts(steps)]
                                      if f not in steps_named[name]))
            for name, steps in model.steps.items()
        }
        # Positions of list-valued input facts (made tuples in keys).
        self._list_inputs = {
            name: tuple(i for i, f in enumerate(inputs) if FACTS[name].get(f, {}).get("type") == "names")
            for name, inputs in self._inputs.items()
        }
        # A string fact that the rules only compare with literal strings
        # (eq, ne, in, not_in; `contains` for a list of names) takes the same
        # rules for every string they do not name: its class (the value when
        # named, else _OTHER; for a list, the names it holds that are named)
        # keys the step memo and the templates, so that documents naming
        # connectors no rule of the step mentions share them. Facts a reason
        # shows keep their value in template keys (a template holds its
        # reasons; messages are rendered for each document). The decision
        # memo and node results keep every value (their steps record them).
        rendered = {name: {fact for step in steps for rule in step.rules for fact in _PLACEHOLDER.findall(rule.reason or "")}
                    for name, steps in model.steps.items()}
        # +2: a template key starts (ruleset, halt); +1: a step key starts with the step.
        self._classes = {name: _fact_classes(name, inputs, model.steps[name], 2, rendered[name])
                         for name, inputs in self._inputs.items()}
        self._step_classes = {self.compiled.step_keys[(name, step.name)]: _fact_classes(name, step.reads, [step], 1)
                              for name, steps in model.steps.items() for step in steps}
        self._decisions: _Bounded = _Bounded(_DECISION_NODE_LIMIT)
        self._node_runs: dict[tuple, tuple] = {}
        self._offload_runs: dict[tuple, _Run] = {}
        self._graphs = _Bounded(_GRAPH_NODE_LIMIT)
        self._plans = _Bounded(_PLAN_NODE_LIMIT)

    # -- one step ---------------------------------------------------------
    def _fire(self, step: StepDef, facts: Mapping[str, Any], *, memo: bool = True) -> Rule | None:
        memo_key = None
        if memo and self.memo_enabled:
            # Sound: a step's answer is a pure function of the facts it reads.
            memo_key = self._memo_key(step, facts)
            name = self._memo.get(memo_key)
            if name is not None:
                return self.compiled.rules[name]
        try:
            name = self.runtime.fire(self._event(step, facts))
        except RuntimeFault as exc:
            raise EvaluationError([Problem("engine.fault", str(exc))]) from None
        if memo_key is not None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[memo_key] = name
        return self.compiled.rules[name]

    def _memo_key(self, step: StepDef, facts: Mapping[str, Any]) -> tuple:
        """The step and the values of the facts it reads (lists as tuples)."""
        values = [facts[fact] for fact in step.reads]
        for index, value in enumerate(values):
            if isinstance(value, list):
                values[index] = tuple(value)
        key = self.compiled.step_keys[(step.ruleset, step.name)]
        classes = self._step_classes[key]
        return _classed((key, *values), classes) if classes else (key, *values)

    def _event(self, step: StepDef, facts: Mapping[str, Any]) -> dict[str, Any]:
        event: dict[str, Any] = {"t": self.compiled.step_keys[(step.ruleset, step.name)]}
        for fact in step.reads:
            value = facts[fact]
            event[fact] = list(value) if isinstance(value, (list, tuple)) else value
        return event

    # -- batches of steps -------------------------------------------------
    # Evaluation is written as generators that yield the events one round
    # needs and receive the rule each event picked; `_drive` runs several
    # in lockstep, so that independent work (nodes of one height, the
    # offloading rules and the configured graph) shares one post to the
    # rule runtime per round. A post of one event costs about 50 µs; each
    # further event about 11 µs. (Deciding an audit's batch of documents in
    # shared rounds was measured and dropped: their events repeat, and the
    # 5x more events cost what the 24x fewer posts saved.)

    def _level_job(self, ruleset: str, scratches: list[dict[str, Any]]) -> Job:
        """The rule each step of ``ruleset`` picks, for each of ``scratches``
        (independent fact sets), one round per level of steps.

        Each scratch receives its steps' values (later levels read them). A
        step without a default whose catch-all ran gets None, which the
        caller turns into a gap; that scratch's later steps are not asked.
        """
        chosen: list[dict[str, Rule | None]] = [{} for _ in scratches]
        alive = [True] * len(scratches)
        rules, memo, memo_on = self.compiled.rules, self._memo, self.memo_enabled
        for level in self._levels_of[ruleset]:
            pending: list[tuple[StepDef, dict[str, Any], tuple | None]] = []
            waiting: list[tuple[int, StepDef, int]] = []  # (scratch, step, index into pending)
            posted: dict[tuple, int] = {}
            for index, scratch in enumerate(scratches):
                if not alive[index]:
                    continue
                for step in level:
                    memo_key = None
                    if memo_on:
                        # Sound: a step's answer is a pure function of the facts it reads
                        # (so equal events in one round are posted once, too).
                        memo_key = self._memo_key(step, scratch)
                        name = memo.get(memo_key)
                        if name is not None:
                            chosen[index][step.name] = rules[name]
                            continue
                        if memo_key in posted:
                            waiting.append((index, step, posted[memo_key]))
                            continue
                        posted[memo_key] = len(pending)
                    waiting.append((index, step, len(pending)))
                    pending.append((step, self._event(step, scratch), memo_key))
            if pending:
                names = yield [event for _, event, _ in pending]
                for (step, _, memo_key), name in zip(pending, names):
                    if self.compiled.step_of.get(name) != (ruleset, step.name):
                        raise EvaluationError([Problem("engine.fault", "the rule runtime answered for the wrong step")])
                    if memo_key is not None:
                        if len(memo) >= _MEMO_LIMIT:
                            memo.clear()
                        memo[memo_key] = name
                for index, step, at in waiting:
                    chosen[index][step.name] = rules[names[at]]
            for index, scratch in enumerate(scratches):
                if not alive[index]:
                    continue
                for step in level:
                    rule = chosen[index][step.name]
                    if rule is None and step.default is None:
                        alive[index] = False  # a gap: later steps cannot be asked (the caller raises)
                        break
                    scratch[step.name] = step.default if rule is None else rule.value
        return chosen

    def _drive(self, *jobs: Job) -> list[Any]:
        """Run generators in lockstep, one post to the rule runtime per
        round; each job's return value, or the exception it raised (so that
        a speculative job cannot fail the others)."""
        results: list[Any] = [None] * len(jobs)
        requests: dict[int, list[dict[str, Any]]] = {}

        def advance(index: int, answer: Any) -> None:
            try:
                requests[index] = jobs[index].send(answer)
            except StopIteration as stop:
                results[index] = stop.value
            except (EvaluationError, InputError) as exc:
                results[index] = exc

        for index in range(len(jobs)):
            advance(index, None)
        while requests:
            round_ = list(requests.items())
            requests.clear()
            try:
                names = self.runtime.fire_many([event for _, events in round_ for event in events])
            except RuntimeFault as exc:
                raise EvaluationError([Problem("engine.fault", str(exc))]) from None
            offset = 0
            for index, events in round_:
                advance(index, names[offset:offset + len(events)])
                offset += len(events)
        return results

    @staticmethod
    def _result(value: Any) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    def fire_uncached(self, step: StepDef, facts: Mapping[str, Any]) -> Rule | None:
        """The rule the runtime picks for ``facts``, bypassing the memo (for verification)."""
        return self._fire(step, facts, memo=False)

    def _problem(self, spec: Mapping[str, Any], rule: Rule, facts: Mapping[str, Any], base: str | None, kind: str) -> Message:
        at = spec.get("at", "")
        if base is None:
            path = at
        else:
            path = base + ("/" + at if at else "")
        hint = spec.get("hint")
        if spec.get("suggest") == "registered_names":
            hint = suggest(facts.get("name", ""), self._registered) or hint
        return Message(
            code=spec["code"],
            message=_render(spec["message"], facts),
            path=path,
            stage=spec.get("stage") if kind == "error" else None,
            source=spec.get("source", "vllm") if kind == "warning" else None,
            hint=hint,
            rule=rule.id,
        )

    def _templates_for(self, ruleset: str, facts_list: list[dict[str, Any]], halt_on_error: bool) -> list["_Template"]:
        return self._result(self._drive(self._template_job(ruleset, facts_list, halt_on_error))[0])[0]

    def _template_job(self, ruleset: str, facts_list: list[dict[str, Any]], halt_on_error: bool) -> Job:
        """The steps' outcome for each of these independent input fact sets:
        which rule set each fact.

        Sound to reuse: a ruleset's outcome is a pure function of its input
        facts. Paths and messages are not part of it (they depend on where the
        node stands), so they are filled in by :meth:`run` each time. The
        fact sets not seen before are evaluated together, one batch per level.
        """
        out: list[_Template | None] = [None] * len(facts_list)
        missing: dict[Any, list[int]] = {}  # by shared key, or by index without the memo
        keys: list[tuple] = []
        for index, facts in enumerate(facts_list):
            key = self._template_key(ruleset, facts, halt_on_error)
            keys.append(key)
            cached = self._template(key) if self.memo_enabled else None
            if cached is not None:
                out[index] = cached
            else:
                missing.setdefault(self._shared_key(key) if self.memo_enabled else index, []).append(index)
        if missing:
            groups = list(missing.items())
            scratches = [dict(facts_list[indexes[0]]) for _, indexes in groups]
            chosen = yield from self._level_job(ruleset, scratches)
            for (shared, indexes), scratch, picked in zip(groups, scratches, chosen):
                template = self._build_template(ruleset, scratch, picked, halt_on_error)
                if self.memo_enabled:
                    if len(self._templates) >= _TEMPLATE_LIMIT:
                        self._templates.clear()
                    self._templates[shared] = template
                for index in indexes:
                    out[index] = template
        return out, keys

    def _template(self, key: tuple) -> "_Template | None":
        """The template held for an exact key (see _template_key). An exact
        key found through its class is held too, so that it is classed once."""
        templates = self._templates
        template = templates.get(key)
        if template is None and self._classes[key[0]]:
            template = templates.get(self._shared_key(key))
            if template is not None:
                if len(templates) >= _TEMPLATE_LIMIT:
                    templates.clear()
                templates[key] = template
        return template

    def _shared_key(self, key: tuple) -> tuple:
        """The key templates are held under: each classed fact's class."""
        classes = self._classes[key[0]]
        return _classed(key, classes) if classes else key

    def _template_key(self, ruleset: str, facts: dict[str, Any], halt_on_error: bool) -> tuple:
        """The key of a ruleset's outcome: the input facts its steps read or show."""
        # One list made into a tuple, the facts read from a dict: compiled,
        # map() over a bound method and a starred tuple are generic calls.
        values: list[Any] = [ruleset, halt_on_error]
        for name in self._inputs[ruleset]:
            values.append(facts.get(name))
        for at in self._list_inputs[ruleset]:
            value = values[at + 2]
            if value is not None:
                values[at + 2] = tuple(value)
        return tuple(values)

    def _build_template(self, ruleset: str, scratch: dict[str, Any], chosen: Mapping[str, Rule | None],
                        halt_on_error: bool) -> "_Template":
        entries: list[tuple[StepDef, Rule | None, Any]] = []
        for step in self.model.steps[ruleset]:
            rule = chosen.get(step.name)
            if rule is None and step.default is None:
                # `hma-policy rules verify` proves this unreachable for a checked policy.
                gap = EvaluationError([Problem("policy.gap", f"no rule of step `{step.name}` matched and it has no default")])
                gap.step = (ruleset, step.name)
                gap.facts = {f: scratch[f] for f in step.reads}
                raise gap
            value = step.default if rule is None else rule.value
            scratch[step.name] = value
            entries.append((step, rule, value))
            if halt_on_error and rule is not None and rule.error:
                break
        reasons = {step.name: _render(rule.reason, scratch) for step, rule, _ in entries if rule is not None and rule.reason}
        return _Template(tuple(entries), {step.name: value for step, _, value in entries}, reasons,
                         any(rule is not None and rule.error for _, rule, _ in entries))

    def run(self, ruleset: str, facts: dict[str, Any], *, base: str | None = None,
            inherited: Mapping[str, Message] | None = None, halt_on_error: bool = False,
            template: "_Template | None" = None) -> _Run:
        if template is None:
            template = self._templates_for(ruleset, [facts], halt_on_error)[0]
        facts.update(template.values)
        run = _Run(facts=facts)
        inherited = inherited or {}
        for step, rule, value in template.entries:
            run.steps.append((ruleset, step, base, rule, value, facts))
            if rule is None:
                continue
            run.fired[step.name] = rule
            if step.name in template.reasons:
                run.reasons[step.name] = template.reasons[step.name]
            if rule.warning:
                run.warnings.append(self._problem(rule.warning, rule, facts, base, "warning"))
            if rule.error:
                if "copy" in rule.error:
                    source = run.errors.get(rule.error["copy"]) or inherited.get(rule.error["copy"])
                    if source is None:  # the loader rejects copies of facts that carry no error
                        raise EvaluationError([Problem("engine.fault", f"rule `{rule.id}` copies a missing error")])
                    error = Message(source.code, source.message, source.path,
                                    stage=rule.error.get("stage", source.stage), hint=source.hint, rule=source.rule)
                else:
                    error = self._problem(rule.error, rule, facts, base, "error")
                run.errors[step.name] = error
                if halt_on_error:
                    run.halted = error
                    break
        return run

    # -- the whole decision -----------------------------------------------
    def decide(self, document: Mapping[str, Any]) -> Decision:
        if self.closed:
            raise EvaluationError([Problem("engine.closed", "the policy was closed")])
        with self.runtime.session():  # one session state for all the rounds of this decision
            return self._decide(document)

    def _decide(self, document: Mapping[str, Any]) -> Decision:
        # Templates already held need no round of the rule runtime: look them
        # up first. Otherwise the offloading rules, which may rewrite the
        # connector, run beside the graph as configured (the same rounds),
        # which is used when they do not rewrite it.
        env = env_facts(document)  # read once: three rulesets use it
        offload_facts = offloading_facts(document, env)
        configured = document.get("kv_transfer_config")
        offload_key = self._template_key("offloading", offload_facts, True)
        offload_template = self._template(offload_key) if self.memo_enabled else None
        speculative = None
        if offload_template is None:
            offload_job, speculative = self._drive(self._template_job("offloading", [offload_facts], True),
                                                   self._plan_job(env, configured))
            offload_template = self._result(offload_job)[0][0]
        if offload_template.raises:
            return self._offload_error(offload_facts, offload_template)
        values = offload_template.values
        ktc = configured
        if values.get("offload_connector", "none") != "none":
            # The offloading ruleset's two steps rewrite the connector and role.
            ktc = dict(configured or {})
            ktc["kv_connector"] = values["offload_connector"]
            if values.get("offload_role", "none") != "none":
                ktc["kv_role"] = values["offload_role"]
            speculative = None
        try:
            inputs: tuple | None = document_inputs(document, self.model.containers, env)
        except InputError:
            # A string the runtime cannot take: the graph's facts, built
            # first, report theirs first (as before this lookup was added).
            inputs = None
        # A decision is a pure function of the offloading facts (all in their
        # exact key), the graph's signature (which fixes its nodes, their
        # facts and so their templates) and the document's own inputs to the
        # decision ruleset: messages, copied errors and reasons derive from
        # them. Documents that differ elsewhere (names of deployments, ports,
        # ids) share it, found before any fact is built.
        signature = graph_signature(ktc, self.model.containers, env) if self.memo_enabled else None
        memo_key = (offload_key, signature, inputs) if signature is not None and inputs is not None else None
        if memo_key is not None:
            hit = self._decisions.get(memo_key)
            if hit is not None:
                return hit
        plan = self._cached_plan(env, ktc, signature) if speculative is None and self.memo_enabled else None
        if plan is None:
            plan = self._result(speculative if speculative is not None else self._drive(self._plan_job(env, ktc))[0])
        top = plan.top
        facts = document_facts(document, top, plan.verdicts.get(top.path) if top else None, self.model.containers, env,
                               inputs)
        decision_key = self._template_key("decision", facts, True)
        decision_template = self._template(decision_key) if self.memo_enabled else None
        if decision_template is None:
            decision_template = self._result(self._drive(self._template_job("decision", [facts], True))[0])[0][0]
        decision = self._assemble(offload_facts, offload_template, plan, facts, decision_template,
                                  offload_key if self.memo_enabled else None)
        if memo_key is not None:
            self._decisions.put(memo_key, decision, len(plan.nodes) + 1)
        return decision

    def _offload_error(self, facts: dict[str, Any], template: "_Template") -> Decision:
        offload = self.run("offloading", facts, halt_on_error=True, template=template)
        # A template that raises halts its run on that error.
        errors = (offload.halted,) if offload.halted is not None else ()
        return Decision("error", None, errors, tuple(offload.warnings), (),
                        tuple(r.id for r in offload.fired.values()), self.model.digest,
                        tuple(dict.fromkeys(offload.reasons.values())), step_data=tuple(offload.steps))

    def _assemble(self, offload_facts: dict[str, Any], offload_template: "_Template", plan: "_Plan",
                  facts: dict[str, Any], decision_template: "_Template", offload_key: tuple | None = None) -> Decision:
        """The Decision from the templates: messages, copied errors, trace."""
        # The offloading ruleset's run is a pure function of its exact key
        # (its facts are all in it): one per key, shared by the decisions.
        offload = self._offload_runs.get(offload_key) if offload_key is not None else None
        if offload is None:
            offload = self.run("offloading", offload_facts, halt_on_error=True, template=offload_template)
            if offload_key is not None:
                if len(self._offload_runs) >= _NODE_RUN_LIMIT:
                    self._offload_runs.clear()
                self._offload_runs[offload_key] = offload
        steps: list[tuple] = list(offload.steps)
        trace: list[str] = [r.id for r in offload.fired.values()]
        reasons: list[str] = list(offload.reasons.values())
        warnings: list[Message] = list(offload.warnings)
        # The graph's results are a pure function of its plan's key (each
        # node's path and template key; what a node inherits follows from
        # its children's), so decisions that differ only elsewhere (the
        # flags, the model) share them. Read-only from here on.
        graph = self._graphs.get(plan.key) if offload_key is not None else None
        if graph is None:
            graph = self._assemble_graph(plan)
            if offload_key is not None:
                self._graphs.put(plan.key, graph, len(plan.nodes))
        steps += graph.steps
        trace += graph.trace
        warnings += graph.warnings
        reasons += graph.top_reasons
        top = graph.top
        inherited = {}
        if top is not None:
            errors = graph.errors[top.path]
            inherited = {k: errors[v] for k, v in (("graph_support", "support"), ("top_setup", "setup"), ("top_construct", "construct")) if v in errors}
        run = self.run("decision", facts, inherited=inherited, halt_on_error=True, template=decision_template)
        steps += run.steps
        trace += [r.id for r in run.fired.values()]
        reasons += run.reasons.values()
        warnings += run.warnings

        error = run.halted
        hma = run.facts.get("hma")
        hma_enabled = {"enabled": True, "disabled": False}.get(hma) if hma is not None else None
        if error is not None:
            outcome = "error"
            if error.stage == "config":
                hma_enabled = None
        elif hma == "unknown" or run.facts.get("startup") == "unknown":
            outcome = "undetermined"
        else:
            outcome = "enabled" if hma_enabled else "disabled"
        return Decision(
            outcome=outcome,
            hma_enabled=hma_enabled,
            errors=(error,) if error else (),
            warnings=tuple(warnings),
            connectors=tuple(graph.connectors),
            trace=tuple(trace),
            policy_digest=self.model.digest,
            step_data=tuple(steps),
            reasons=tuple(dict.fromkeys(reasons)),
        )

    def graph(self, document: Mapping[str, Any], ktc: Mapping[str, Any] | None) -> "_Graph":
        """Evaluate the node rules over the connector graph, children first."""
        if self.closed:
            raise EvaluationError([Problem("engine.closed", "the policy was closed")])
        with self.runtime.session():
            return self._assemble_graph(self._result(self._drive(self._plan_job(env_facts(document), ktc))[0]))

    def _cached_plan(self, env: Mapping[str, bool], ktc: Mapping[str, Any] | None, signature: tuple | None) -> "_Plan | None":
        """The plan :meth:`_plan_job` makes, when every node's template is
        already held (else None): the same facts and keys, without rounds.
        Plans are held by their graph's ``signature`` (see graph_signature;
        None: the plan is not held): read-only, they serve every equal graph."""
        held = self._plans.get(signature) if signature is not None else None
        if held is not None:
            return held
        nodes = build_graph(ktc, self.model.containers)
        plan = _Plan(nodes=nodes, top=nodes[-1] if nodes else None)
        templates, verdicts, planned = self._templates, plan.verdicts, plan.planned
        for node in nodes:  # post-order: a node's children are planned before it
            facts, sources = node_facts(node, verdicts, env)
            key = self._template_key("node", facts, False)
            template = templates.get(key) or self._template(key)
            if template is None:
                return None
            facts.update(template.values)
            verdicts[node.path] = facts
            planned[id(node)] = (facts, sources, template, key)
        plan.key = tuple((node.path, planned[id(node)][3]) for node in nodes)
        if signature is not None:
            self._plans.put(signature, plan, len(nodes) + 1)
        return plan

    def _plan_job(self, env: Mapping[str, bool], ktc: Mapping[str, Any] | None) -> Job:
        """Each node's facts and template, children first (a generator for
        _drive); ``env``: the document's env_facts."""
        nodes = build_graph(ktc, self.model.containers)
        plan = _Plan(nodes=nodes, top=nodes[-1] if nodes else None)
        keys: dict[int, tuple] = {}
        for group in _by_height(nodes):
            # Nodes of one height read only their children's verdicts, so their
            # steps go to the rule runtime together, one batch per level.
            prepared = [node_facts(node, plan.verdicts, env) for node in group]
            templates, group_keys = yield from self._template_job("node", [facts for facts, _ in prepared], False)
            for node, (facts, sources), template, key in zip(group, prepared, templates, group_keys):
                facts.update(template.values)
                plan.verdicts[node.path] = facts
                plan.planned[id(node)] = (facts, sources, template, key)
                keys[id(node)] = key
        plan.key = tuple((node.path, keys[id(node)]) for node in nodes)
        return plan

    def _assemble_graph(self, plan: "_Plan") -> "_Graph":
        out = _Graph(top=plan.top)
        # Results (errors handed on, messages, trace) in post-order, as vLLM meets the nodes.
        for node in plan.nodes:
            # Unpacked here, not as *args: compiled, that call is a direct one.
            facts, sources, template, key = plan.planned[id(node)]
            self._node_result(out, node, facts, sources, template, key)
        # Listed top-down (pre-order) for reading.
        order = {n.path: i for i, n in enumerate(_preorder(plan.nodes))}
        out.connectors.sort(key=lambda c: order[c.path])
        return out

    def _node_result(self, out: "_Graph", node: Any, facts: dict[str, Any], sources: Mapping[str, tuple[str, str]],
                     template: "_Template", key: tuple) -> None:
        inherited = {fact: out.errors[path][child_fact] for fact, (path, child_fact) in sources.items()
                     if child_fact in out.errors[path]}
        # A node's messages, copied errors and verdict are a pure function of
        # its template key, its path and what it inherits from its children.
        memo_key = (node.path, key, tuple(inherited.items())) if self.memo_enabled else None
        done = self._node_runs.get(memo_key) if memo_key is not None else None
        if done is None:
            run = self.run("node", facts, base=node.path, inherited=inherited, template=template)
            support_rule = run.fired.get("support")
            verdict = ConnectorVerdict(
                path=node.path, kv_connector=node.name,
                supports_hma=_SUPPORTS_HMA.get(run.facts.get("support")),
                rule=support_rule.id if support_rule else None, depth=node.depth, support=run.facts.get("support"),
            )
            done = (run, verdict, tuple(r.id for r in run.fired.values()))
            if memo_key is not None:
                if len(self._node_runs) >= _NODE_RUN_LIMIT:
                    self._node_runs.clear()
                self._node_runs[memo_key] = done
        run, verdict, fired = done
        out.steps += run.steps
        out.trace += fired
        out.warnings += run.warnings
        out.verdicts[node.path] = run.facts
        out.errors[node.path] = run.errors
        out.connectors.append(verdict)
        if node is out.top:
            out.top_reasons = [run.reasons["support"]] if "support" in run.reasons else []

    def widen(self) -> dict[str, int]:
        """Widen the memo bounds for a batch over one fleet whose cyclic
        garbage collection is paused (an audit; see _FLEET_LIMITS); the
        bounds before."""
        before = {name: getattr(self, name).limit for name in _FLEET_LIMITS}
        for name, limit in _FLEET_LIMITS.items():
            getattr(self, name).limit = max(limit, before[name])
        return before

    @contextmanager
    def fleet_bounds(self) -> Iterator[None]:
        """:meth:`widen` meanwhile; after, the bounds before, and a memo
        past its bound is cleared."""
        before = self.widen()
        try:
            yield
        finally:
            for name, limit in before.items():
                memo = getattr(self, name)
                memo.limit = limit
                if memo.nodes > limit:
                    memo.clear()

    def close(self) -> None:
        self.closed = True
        self._memo.clear()
        self._templates.clear()
        self._decisions.clear()
        self._node_runs.clear()
        self._offload_runs.clear()
        self._graphs.clear()
        self._plans.clear()
        self.runtime.close()


class _Bounded(dict):
    """A memo cleared whole when the nodes its values hold pass ``limit``
    (values differ in size with their graphs, so their count alone bounds
    nothing)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.nodes = limit, 0

    def put(self, key: Any, value: Any, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > self.limit:
            self.clear()
            self.nodes = nodes
        self[key] = value

    def clear(self) -> None:
        super().clear()
        self.nodes = 0


@dataclass
class _Plan:
    """A graph's nodes with their facts and templates, before any message."""

    nodes: list
    top: Any
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    planned: dict[int, tuple] = field(default_factory=dict)
    key: tuple = ()

    def __init__(self, nodes: list, top: Any) -> None:  # see _Run
        self.nodes, self.top, self.verdicts, self.planned, self.key = nodes, top, {}, {}, ()


@dataclass
class _Graph:
    top: Any
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, dict[str, Message]] = field(default_factory=dict)
    connectors: list[ConnectorVerdict] = field(default_factory=list)
    steps: list[tuple] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    warnings: list[Message] = field(default_factory=list)
    top_reasons: list[str] = field(default_factory=list)

    def __init__(self, top: Any) -> None:  # see _Run
        self.top, self.verdicts, self.errors, self.connectors = top, {}, {}, []
        self.steps, self.trace, self.warnings, self.top_reasons = [], [], [], []


def _by_height(post: list) -> list[list]:
    """Nodes grouped by height (leaves first), each group in post-order."""
    height: dict[int, int] = {}
    groups: list[list] = []
    for node in post:
        h = 1 + max((height[id(c)] for c in node.children), default=-1)
        height[id(node)] = h
        while len(groups) <= h:
            groups.append([])
        groups[h].append(node)
    return groups


def _preorder(post: list) -> list:
    if not post:
        return []
    out, stack = [], [post[-1]]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


def _classed(key: tuple, classes: tuple[tuple[int, frozenset, bool], ...]) -> tuple:
    """``key`` with each classed fact replaced by its class (see Evaluator._classes):
    a string the rules do not name becomes _OTHER; a list of names, the sorted
    names of it that they do. Anything else (None, another type) is kept."""
    values = list(key)
    for at, literals, names in classes:
        value = values[at]
        if names:
            if type(value) is tuple:
                values[at] = tuple(sorted(literals.intersection(value)))
        elif type(value) is str and value not in literals:
            values[at] = _OTHER
    return tuple(values)
