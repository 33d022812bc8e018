"""Stage 5, evaluate: run the compiled steps through the rule runtime, the
connector graph bottom-up, and assemble the Decision.

Python here only sequences steps, walks the graph children first, copies a
child's error where a rule says ``copy``, fills message templates, and maps
the final facts to the decision contract. Which connector supports HMA and
what a MultiConnector needs are answered by the rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._durable import RuleRuntime, RuntimeFault
from .compiler import Compiled, compile_policy
from .decision import ConnectorVerdict, Decision, Message, Step
from .errors import HMAPolicyError, Problem, suggest
from .facts import build_graph, document_facts, env_facts, node_facts, offloading_facts
from .policy import PolicyModel, Rule, StepDef

__all__ = ["Evaluator", "EvaluationError"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Bounds on the step memo and the ruleset templates: enough for the fact
# combinations a fleet produces, small enough to keep memory flat over millions
# of distinct documents (each is cleared when full).
_MEMO_LIMIT = 16_384
_TEMPLATE_LIMIT = 4_096


class EvaluationError(HMAPolicyError):
    """The rule runtime failed (an engine fault, never a property of the document)."""


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 80 else text[:77] + "..."


def _render(template: str, facts: Mapping[str, Any]) -> str:
    return _PLACEHOLDER.sub(lambda m: _show(facts.get(m.group(1), m.group(0))), template)


@dataclass(frozen=True)
class _Template:
    entries: tuple  # (StepDef, Rule | None, value) per step evaluated
    values: dict[str, Any]
    reasons: dict[str, str]  # rendered from facts only, so shared by every use


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


class Evaluator:
    """A compiled policy bound to its own ruleset in the rule runtime."""

    def __init__(self, model: PolicyModel, *, memo: bool = True):
        self.model = model
        self.compiled: Compiled = compile_policy(model)
        self.runtime = RuleRuntime(self.compiled.definition)
        self.memo_enabled = memo
        self.closed = False
        self._memo: dict[tuple, str] = {}
        self._templates: dict[tuple, _Template] = {}
        self._registered = model.registered_names
        steps_named = {name: {s.name for s in steps} for name, steps in model.steps.items()}
        # Steps of one level read only inputs and earlier levels' facts, so
        # they can go to the rule runtime in one batch.
        self._levels: dict[str, list[list[StepDef]]] = {}
        for name, steps in model.steps.items():
            level_of: dict[str, int] = {}
            levels: list[list[StepDef]] = []
            for step in steps:
                level = 1 + max((level_of[f] for f in step.reads if f in level_of), default=-1)
                level_of[step.name] = level
                while len(levels) <= level:
                    levels.append([])
                levels[level].append(step)
            self._levels[name] = levels
        self._inputs = {
            name: tuple(dict.fromkeys(f for s in steps for f in s.reads if f not in steps_named[name]))
            for name, steps in model.steps.items()
        }

    # -- one step ---------------------------------------------------------
    def _fire(self, step: StepDef, facts: Mapping[str, Any], *, memo: bool = True) -> Rule | None:
        key = self.compiled.step_keys[(step.ruleset, step.name)]
        event: dict[str, Any] = {"t": key}
        for fact in step.reads:
            value = facts[fact]
            event[fact] = list(value) if isinstance(value, (list, tuple)) else value
        memo_key = None
        if memo and self.memo_enabled:
            # Sound: a step's answer is a pure function of the facts it reads.
            memo_key = (key,) + tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in event.items())
            name = self._memo.get(memo_key)
            if name is not None:
                return self.compiled.rules[name]
        try:
            name = self.runtime.fire(event)
        except RuntimeFault as exc:
            raise EvaluationError([Problem("engine.fault", str(exc))]) from None
        if memo_key is not None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[memo_key] = name
        return self.compiled.rules[name]

    def _event(self, step: StepDef, facts: Mapping[str, Any]) -> dict[str, Any]:
        event: dict[str, Any] = {"t": self.compiled.step_keys[(step.ruleset, step.name)]}
        for fact in step.reads:
            value = facts[fact]
            event[fact] = list(value) if isinstance(value, (list, tuple)) else value
        return event

    def _fire_levels(self, ruleset: str, scratch: dict[str, Any]) -> dict[str, Rule | None]:
        """The rule each step of ``ruleset`` picks, level by level; each
        level's unmemoised steps go to the rule runtime in one batch.

        ``scratch`` receives every step's value (later levels read them). A
        step without a default whose catch-all ran gets None, which the
        caller turns into a gap.
        """
        chosen: dict[str, Rule | None] = {}
        for level in self._levels[ruleset]:
            pending: list[tuple[StepDef, dict[str, Any], tuple | None]] = []
            for step in level:
                event = self._event(step, scratch)
                memo_key = None
                if self.memo_enabled:
                    memo_key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in event.items())
                    name = self._memo.get(memo_key)
                    if name is not None:
                        chosen[step.name] = self.compiled.rules[name]
                        continue
                pending.append((step, event, memo_key))
            if pending:
                try:
                    names = self.runtime.fire_many([event for _, event, _ in pending])
                except RuntimeFault as exc:
                    raise EvaluationError([Problem("engine.fault", str(exc))]) from None
                by_step = {self.compiled.step_of[name][1]: name for name in names}
                if len(by_step) != len(pending):
                    raise EvaluationError([Problem("engine.fault", "the rule runtime answered for the wrong steps")])
                for step, _, memo_key in pending:
                    name = by_step[step.name]
                    if memo_key is not None:
                        if len(self._memo) >= _MEMO_LIMIT:
                            self._memo.clear()
                        self._memo[memo_key] = name
                    chosen[step.name] = self.compiled.rules[name]
            for step in level:
                rule = chosen[step.name]
                if rule is None and step.default is None:
                    return chosen  # a gap: later steps cannot be asked (the caller raises)
                scratch[step.name] = step.default if rule is None else rule.value
        return chosen

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

    def _template(self, ruleset: str, facts: Mapping[str, Any], halt_on_error: bool) -> "_Template":
        """The steps' outcome for these input facts: which rule set each fact.

        Sound to reuse: a ruleset's outcome is a pure function of its input
        facts. Paths and messages are not part of it (they depend on where the
        node stands), so they are filled in by :meth:`run` each time.
        """
        inputs = self._inputs[ruleset]
        key = None
        if self.memo_enabled:
            key = (ruleset, halt_on_error) + tuple(
                tuple(facts[f]) if isinstance(facts[f], list) else facts[f] for f in inputs)
            cached = self._templates.get(key)
            if cached is not None:
                return cached
        scratch = dict(facts)
        chosen = self._fire_levels(ruleset, scratch)
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
        template = _Template(tuple(entries), {step.name: value for step, _, value in entries}, reasons)
        if key is not None:
            if len(self._templates) >= _TEMPLATE_LIMIT:
                self._templates.clear()
            self._templates[key] = template
        return template

    def run(self, ruleset: str, facts: dict[str, Any], *, base: str | None = None,
            inherited: Mapping[str, Message] | None = None, halt_on_error: bool = False) -> _Run:
        template = self._template(ruleset, facts, halt_on_error)
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
        trace: list[str] = []
        steps: list[Step] = []
        reasons: list[str] = []
        warnings: list[Message] = []

        offload = self.run("offloading", offloading_facts(document), halt_on_error=True)
        steps += offload.steps
        trace += [r.id for r in offload.fired.values()]
        reasons += offload.reasons.values()
        warnings += offload.warnings
        if offload.halted is not None:
            return Decision("error", None, (offload.halted,), tuple(warnings), (), tuple(trace),
                            self.model.digest, tuple(dict.fromkeys(reasons)), step_data=tuple(steps))
        ktc = document.get("kv_transfer_config")
        if offload.facts.get("offload_connector", "none") != "none":
            # The offloading ruleset's two steps rewrite the connector and role.
            ktc = dict(ktc or {})
            ktc["kv_connector"] = offload.facts["offload_connector"]
            if offload.facts.get("offload_role", "none") != "none":
                ktc["kv_role"] = offload.facts["offload_role"]

        graph = self.graph(document, ktc)
        steps += graph.steps
        trace += graph.trace
        warnings += graph.warnings
        connectors = graph.connectors
        top = graph.top
        top_verdict = graph.verdicts.get(top.path) if top else None
        reasons += graph.top_reasons

        facts = document_facts(document, top, top_verdict, self.model.containers)
        inherited = {}
        if top is not None:
            errors = graph.errors[top.path]
            inherited = {k: errors[v] for k, v in (("graph_support", "support"), ("top_setup", "setup"), ("top_construct", "construct")) if v in errors}
        run = self.run("decision", facts, inherited=inherited, halt_on_error=True)
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
        # Connectors are listed top-down (pre-order) for reading.
        return Decision(
            outcome=outcome,
            hma_enabled=hma_enabled,
            errors=(error,) if error else (),
            warnings=tuple(warnings),
            connectors=tuple(connectors),
            trace=tuple(trace),
            policy_digest=self.model.digest,
            step_data=tuple(steps),
            reasons=tuple(dict.fromkeys(reasons)),
        )

    def graph(self, document: Mapping[str, Any], ktc: Mapping[str, Any] | None) -> "_Graph":
        """Evaluate the node rules over the connector graph, children first."""
        if self.closed:
            raise EvaluationError([Problem("engine.closed", "the policy was closed")])
        env = env_facts(document)
        nodes = build_graph(ktc, self.model.containers)
        out = _Graph(top=nodes[-1] if nodes else None)
        for node in nodes:
            facts, sources = node_facts(node, out.verdicts, env)
            inherited = {fact: out.errors[path][child_fact] for fact, (path, child_fact) in sources.items()
                         if child_fact in out.errors[path]}
            run = self.run("node", facts, base=node.path, inherited=inherited)
            out.steps += run.steps
            out.trace += [r.id for r in run.fired.values()]
            out.warnings += run.warnings
            out.verdicts[node.path] = run.facts
            out.errors[node.path] = run.errors
            support_rule = run.fired.get("support")
            out.connectors.append(ConnectorVerdict(
                path=node.path, kv_connector=node.name,
                supports_hma={"supported": True, "unsupported": False}.get(run.facts.get("support")),
                rule=support_rule.id if support_rule else None, depth=node.depth, support=run.facts.get("support"),
            ))
            if node is out.top:
                out.top_reasons = [run.reasons["support"]] if "support" in run.reasons else []
        # Listed top-down (pre-order) for reading.
        order = {n.path: i for i, n in enumerate(_preorder(nodes))}
        out.connectors.sort(key=lambda c: order[c.path])
        return out

    def close(self) -> None:
        self.closed = True
        self._memo.clear()
        self.runtime.close()


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


def _preorder(post: list) -> list:
    if not post:
        return []
    out, stack = [], [post[-1]]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out
