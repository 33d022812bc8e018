"""Evaluate: walk the connector graph, look every step up in the table, and
assemble the Decision.

The order is vLLM's: the offloading shorthand (which may rewrite the
top-level connector), then each node of the connector graph, children first
(post-order), then the decision steps, then the result steps that map the
final facts to the outcome and flag. Each step's answer comes from the step
table, which durable-rules filled. Python here only sequences the steps,
hands a child's values and errors to its parent as the aggregates in
rules/nodes.yaml say, fills message templates, and lists what happened.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .decision import ConnectorVerdict, Decision, Message, Visit, VllmRelease
from .errors import EvaluationError, Problem, suggest
from .facts import UNREACHED, DocumentFacts, Facts, Node, NodeFacts
from .memo import MEMO_ANSWERS, MEMO_NODES, Memo
from .model import Aggregate, PolicyModel, Rule, StepDef
from .table import StepTable

__all__ = ["Evaluator", "GraphResult"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# supports_hma of a node, by the node contract's `support` values (None for the others).
_SUPPORTS_HMA = {"supported": True, "unsupported": False}
# hma_enabled by the `hma_enabled` result step's values.
_FLAG = {True: True, False: False, "unknown": None}


class Run(NamedTuple):
    """What one ruleset's steps gave for one set of facts."""

    facts: dict[str, Any]  # the inputs and every step's value
    fired: tuple[Rule, ...]
    errors: dict[str, Message]  # by the step that raised (or copied) it
    warnings: tuple[Message, ...]
    reasons: dict[str, str]  # by step
    trail: Visit
    halted: Message | None  # the error that ended the run (rulesets that halt)


class Answer(NamedTuple):
    """What a ruleset's steps give for one set of facts, before they are
    placed in a document (a Run adds where: its trail and messages). Shared
    between decisions: never changed once made."""

    facts: dict[str, Any]  # the inputs and every step's value
    picked: tuple[tuple[StepDef, Rule | None], ...]  # each step run, with the rule that fired (None: its default)
    fired: tuple[Rule, ...]
    reasons: dict[str, str]  # by step
    steps: tuple[tuple[str, str | None, tuple[str, ...]], ...]  # for the trail: Visit.steps
    snapshot: tuple[tuple[str, Any], ...]  # for the trail: Visit.facts
    speaks: bool  # a rule that fired raises an error or a warning


class GraphResult(NamedTuple):
    """The node runs of a connector graph, in post-order (the top-level node last)."""

    nodes: tuple[Node, ...]
    runs: tuple[Run, ...]

    @property
    def top(self) -> Run | None:
        return self.runs[-1] if self.runs else None


class Evaluator:
    """A checked policy's steps, answered by its step table."""

    def __init__(self, model: PolicyModel, table: StepTable, vllm: VllmRelease | None = None, *, memo: bool = True):
        self.model = model
        self._vllm = vllm
        self.table = table
        self._rules = {rule.id: rule for steps in model.steps.values() for step in steps for rule in step.rules}
        self._aggregates: tuple[Aggregate, ...] = model.aggregates
        # A node's input facts: its own (facts.NodeFacts), then each aggregate; one without
        # children takes each aggregate's value for none.
        self._node_names = (*NodeFacts._fields, *(aggregate.fact for aggregate in model.aggregates))
        self._no_children = tuple(aggregate.none for aggregate in model.aggregates)
        self._registered = model.registered_names
        self._graph = tuple((g.fact, g.step) for g in model.graph)
        # The decision's input facts: the document's (facts.DocumentFacts), then
        # what the top-level node gave (the graph facts); the result steps', each
        # decision step's value and how the evaluation ended.
        self._decision_names = (*DocumentFacts._fields, "has_kv_transfer_config", "top_name", *(f for f, _ in self._graph))
        self._result_names = (*(step.name for step in model.steps["decision"]), "error_stage")
        # The release's facts join every run's: one value for the whole policy.
        self._release_names = tuple(model.release_facts)
        self._release_values = tuple(model.release_facts.values())
        # memo=False: every decision asks the table for every step (for tests that compare).
        self._memo = Memo(MEMO_NODES if memo else 0)
        self._answers = Memo(MEMO_ANSWERS if memo else 0)

    def decide(self, facts: Facts) -> Decision:
        """The decision for these facts: the memo's, or made now."""
        key = facts.key
        decision = self._memo.get(key)
        if decision is None:
            decision, graph_nodes = self._decide(facts)
            if graph_nodes is not None:
                self._memo.put(key, decision, graph_nodes)
        return decision

    def _decide(self, facts: Facts) -> tuple[Decision, int | None]:
        """The decision, and what it weighs in the memo (None: not to be kept)."""
        offload = self.run("offloading", facts.offloading._fields, facts.offloading, halting=True)
        if offload.halted is not None:
            return self._assemble(offload, None, None), 1
        rewrite = offload.facts.get("offload_connector", "none")
        role = offload.facts.get("offload_role", "none")
        nodes = facts.effective_graph(None if rewrite == "none" else rewrite, None if role == "none" else role)
        # A container that the shorthand names reads children that the
        # configured graph (the memo's key) does not hold: not kept.
        keep = None if rewrite in facts.containers and rewrite != facts.document.configured_top_name else len(nodes) + 1
        graph = self.graph(nodes)
        top = graph.top
        values = (*facts.document, top is not None, nodes[-1].kv_connector or "" if nodes else "",
                  *(top.facts[step] if top else "none" for _, step in self._graph))
        inherited = {fact: top.errors[step] for fact, step in self._graph if top and step in top.errors}
        decision = self.run("decision", self._decision_names, values, inherited=inherited, halting=True)
        return self._assemble(offload, graph, decision), keep

    def graph(self, nodes: tuple[Node, ...]) -> GraphResult:
        """Run the node rules over the graph, children first."""
        runs: list[Run] = []
        for node in nodes:
            if not node.children:
                runs.append(self.run("node", self._node_names, node.facts + self._no_children, base=node.path))
                continue
            children = [runs[i] for i in node.children]
            aggregated: dict[str, Any] = {}  # each aggregate's value, in order
            inherited: dict[str, Message] = {}
            given_by: dict[str, int] = {}  # an aggregate -> the position of the child that gave it
            for aggregate in self._aggregates:
                value, at = _aggregate(aggregate, children, aggregated, given_by)
                aggregated[aggregate.fact] = value
                if at is not None:
                    given_by[aggregate.fact] = at
                    if aggregate.over in children[at].errors:
                        inherited[aggregate.fact] = children[at].errors[aggregate.over]
            runs.append(self.run("node", self._node_names, node.facts + tuple(aggregated.values()), base=node.path,
                                 inherited=inherited))
        return GraphResult(nodes, tuple(runs))

    def run(self, ruleset: str, names: tuple[str, ...], values: tuple, *, base: str | None = None,
            inherited: Mapping[str, Message] | None = None, halting: bool = False) -> Run:
        """Each step of ``ruleset`` in order, answered by the table, for the
        input facts ``names`` (each ruleset's in one order) with ``values``
        and the release's; then the reasons and messages of the rules that
        fired, from the final facts."""
        answer = self._answer(ruleset, names, values + self._release_values, halting)
        final = answer.facts
        trail = Visit(base, ruleset, answer.steps, answer.snapshot)
        if not answer.speaks:
            return Run(final, answer.fired, {}, (), answer.reasons, trail, None)
        errors: dict[str, Message] = {}
        warnings: list[Message] = []
        halted = None
        for step, rule in answer.picked:
            if rule is None:
                continue
            if rule.warning:
                warnings.append(self._message(rule.warning, rule, final, base, "warning"))
            if rule.error:
                errors[step.name] = self._error(rule, final, base, errors, inherited or {})
                if halting:
                    halted = errors[step.name]
        return Run(final, answer.fired, errors, tuple(warnings), answer.reasons, trail, halted)

    def _answer(self, ruleset: str, names: tuple[str, ...], values: tuple, halting: bool) -> Answer:
        """What the steps give for these facts, wherever in a document they
        stand: kept by the facts' values, since a fleet's graphs repeat their
        nodes (each ruleset's facts come in one order, so the values alone are the key)."""
        key = (ruleset, values)
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        facts = dict(zip((*names, *self._release_names), values))
        picked: list[tuple[StepDef, Rule | None]] = []
        for step in self.model.steps[ruleset]:
            row = self.table.row(ruleset, step.name, facts)
            if row.rule is None and step.default is None:
                # `hma-policy rules verify` proves this unreachable for a checked policy.
                gap = EvaluationError([Problem("policy.gap", f"no rule of step `{step.name}` matched and it has no default")])
                gap.step = (ruleset, step.name)
                gap.facts = {f: facts[f] for f in step.reads}
                raise gap
            facts[step.name] = row.value
            picked.append((step, row.rule))
            if halting and row.rule is not None and row.rule.error:
                break
        fired = tuple(rule for _, rule in picked if rule is not None)
        snapshot = tuple(facts.items())
        answer = Answer(facts, tuple(picked), fired,
                        {step.name: _render(rule.reason, facts) for step, rule in picked if rule is not None and rule.reason},
                        tuple((step.name, rule.id if rule else None, step.reads) for step, rule in picked), snapshot,
                        any(rule.warning or rule.error for rule in fired))
        self._answers.put(key, answer, 1)
        return answer

    def _error(self, rule: Rule, facts: Mapping[str, Any], base: str | None, raised: Mapping[str, Message],
               inherited: Mapping[str, Message]) -> Message:
        spec = rule.error or {}
        if "copy" not in spec:
            return self._message(spec, rule, facts, base, "error")
        source = raised.get(spec["copy"]) or inherited.get(spec["copy"])
        if source is None:  # the loader rejects copies of facts that carry no error
            raise EvaluationError([Problem("engine.fault", f"rule `{rule.id}` copies a missing error")])
        return Message(code=source.code, message=source.message, path=source.path, hint=source.hint,
                       stage=spec.get("stage", source.stage), rule=source.rule)

    def _message(self, spec: Mapping[str, Any], rule: Rule, facts: Mapping[str, Any], base: str | None, kind: str) -> Message:
        at = spec.get("at", "")
        path = at if base is None else base + ("/" + at if at else "")
        hint = spec.get("hint")
        if spec.get("suggest") == "registered_names":
            hint = suggest(facts.get("name", ""), self._registered) or hint
        return Message(code=spec["code"], message=_render(spec["message"], facts), path=path, hint=hint,
                       stage=spec.get("stage") if kind == "error" else None,
                       source=spec.get("source", "vllm") if kind == "warning" else None, rule=rule.id)

    def _assemble(self, offload: Run, graph: GraphResult | None, decision: Run | None) -> Decision:
        """The Decision: the result steps' outcome and flag, and what the runs gave, in vLLM's order."""
        runs = [offload, *(graph.runs if graph else ()), *([decision] if decision else ())]
        halted = decision.halted if decision is not None else offload.halted
        final = decision.facts if decision is not None else {}
        result = self.run("result", self._result_names, (*(final.get(name, UNREACHED) for name in self._result_names[:-1]),
                                                         halted.stage if halted is not None else "none"))
        reasons = list(offload.reasons.values())
        if graph is not None and graph.top is not None and "support" in graph.top.reasons:
            reasons.append(graph.top.reasons["support"])  # the top node's support leads the why
        if decision is not None:
            reasons += decision.reasons.values()
        errors = (halted,) if halted is not None else ()
        warnings = tuple(w for run in runs for w in run.warnings)
        return Decision(
            outcome=result.facts["outcome"],
            hma_enabled=_FLAG.get(result.facts["hma_enabled"]),
            errors=errors,
            warnings=warnings,
            connectors=_connectors(graph) if graph else (),
            trace=tuple(rule.id for run in runs for rule in run.fired),
            policy_digest=self.model.digest,
            reasons=tuple(dict.fromkeys(reasons)),
            remediation=self._remediation(result.facts.get("remediation", "none"), errors, warnings, graph, final),
            trail=tuple(run.trail for run in (*runs, result)),
            vllm=self._vllm,
        )

    def _remediation(self, which: Any, errors: tuple[Message, ...], warnings: tuple[Message, ...],
                     graph: GraphResult | None, facts: Mapping[str, Any]) -> str | None:
        """The remediation the `remediation` result step names: "error" for the
        first error, or a warning's code; its rule's `remediation`, else its hint."""
        if which == "error":
            message = errors[0] if errors else None
        else:
            message = next((w for w in warnings if w.code == which), None)
        if message is None:
            return None
        rule = self._rules.get(message.rule or "")
        if rule is None or rule.remediation is None:
            return message.hint or None  # an empty hint is no remediation
        return _render(rule.remediation, {**facts, "blocking": _blocking(graph)}) or None


def _aggregate(aggregate: Aggregate, children: list[Run], earlier: Mapping[str, Any],
               given_by: Mapping[str, int]) -> tuple[Any, int | None]:
    """An aggregate's value for a node (see model.Aggregate), given the
    earlier aggregates' values, and the position of the child that gave it
    (None: no child did)."""
    start = 0
    if aggregate.after is not None:  # the loader checks that it names an earlier aggregate
        fact, value = aggregate.after
        if earlier.get(fact) != value or fact not in given_by:
            return aggregate.none, None
        start = given_by[fact] + 1
    for at in range(start, len(children)):
        value = children[at].facts[aggregate.over]
        if value not in aggregate.skip:
            return value, at
    return aggregate.none, None


def _connectors(graph: GraphResult) -> tuple[ConnectorVerdict, ...]:
    """Each node's verdict, top-down (pre-order) for reading."""
    verdicts = []
    for node, run in zip(graph.nodes, graph.runs):
        support = run.facts.get("support")
        rule = next((r for r in run.fired if r.step == "support"), None)
        verdicts.append(ConnectorVerdict(node.path, node.kv_connector, _SUPPORTS_HMA.get(str(support)),
                                         rule.id if rule else None, node.depth, support))
    order: list[int] = []
    stack = [len(graph.nodes) - 1] if graph.nodes else []
    while stack:
        index = stack.pop()
        order.append(index)
        stack.extend(reversed(graph.nodes[index].children))
    return tuple(verdicts[i] for i in order)


def _blocking(graph: GraphResult | None) -> str:
    """The connectors without children that do not support HMA, with the verb."""
    names = sorted({node.kv_connector or "(no kv_connector)" for node, run in zip(graph.nodes, graph.runs)
                    if not node.children and run.facts.get("support") == "unsupported"}) if graph else []
    if not names:
        return "the connector graph blocks"
    return ", ".join(f"`{n}`" for n in names) + (" block" if len(names) > 1 else " blocks")


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 80 else text[:77] + "..."


def _render(template: str, facts: Mapping[str, Any]) -> str:
    return _PLACEHOLDER.sub(lambda m: _show(facts.get(m.group(1), m.group(0))), template)
