"""A deployment whose only problems are values the file does not give, decided
where those values do not change its answer: the same outcome on each path
of its script that sets them differently (``Deployment.paths``), or, where
each is a value with a stand-in (``Deployment.stand_in``), a refusal vLLM
gives whatever they are, or the stand-in's decision: vLLM reads a number or
boolean of a JSON option for its type alone (any value it accepts there
gives that decision), and a fact the rules read as written (``StandIn.facts``:
a speculative method) is tried with a value of each class the rules tell
apart, which must all give the same outcome. The audit and the admission
webhook answer alike through here."""

from __future__ import annotations

import itertools
import json
from typing import Any, cast

from ..core.command import StandIn, refused_whatever
from ..core.decision import Decision
from ..core.errors import InputError
from ..core.facts import GIVEN_ONLY, written_at
from ..core.policies import Hint, PolicySet
from ..core.schema import pointer_parts
from ..core.table import OTHER
from .sources import Deployment

__all__ = ["agreement", "decision_of", "settled", "whatever"]

# Deciding a deployment for every combination of its unknown facts' classes
# is done up to this many combinations (the bundled rules tell apart six
# speculative methods; each decision after the first is mostly memo lookups).
MAX_COMBINATIONS = 64


def decision_of(policy: PolicySet, document: Any, hint: Hint | None) -> Decision:
    """The decision of a document, or of its refusal (vLLM's own validation refuses it too)."""
    try:
        return policy.decide(document, hint=hint)
    except InputError as exc:
        return policy.refused(exc.problems, document, hint)


def settled(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> Decision | None:
    """The decision its unknown values do not change, or None where they may.
    Paths that reach the same outcome for different reasons (a connector that
    supports HMA on one, none on the other) settle it too, with the first
    path's decision: which path runs does not change what vLLM does."""
    if deployment.paths:
        first, *others = _on_paths(policy, deployment, hint)
        return first if first is not None and all(other is not None and _same_answer(other, first)
                                                  for other in others) else None
    if deployment.stand_in is not None:
        return _stood(policy, deployment.stand_in, hint)
    return None


def _stood(policy: PolicySet, stand_in: StandIn, hint: Hint | None) -> Decision | None:
    """The decision a stand-in settles, or None where the values it stands for may change it."""
    try:
        decision = policy.decide(stand_in.document, hint=hint)
    except InputError as exc:
        if refused_whatever(exc.problems, stand_in):
            return policy.refused(exc.problems, stand_in.document, hint)
        return None  # refused at a stand-in: nothing is known of the value it stands for
    tried = _in_each_class(policy, stand_in, hint)
    if tried is not None and all(_same_answer(other, decision) for _, other in tried):
        return decision
    return None


def whatever(policy: PolicySet, deployment: Deployment, hint: Hint | None, path: str) -> str:
    """Why a deployment with a stand-in was settled, for the note of its
    unknown value at ``path``: vLLM refuses it whatever its unknown values
    are, or the value is read for its type alone, or the answer is the same
    for each value the rules tell apart of the facts it holds."""
    assert deployment.stand_in is not None
    try:
        policy.decide(deployment.stand_in.document, hint=hint)
    except InputError:
        return "vLLM refuses the command whatever that value is"
    here = {fact for at, fact in deployment.stand_in.facts if at == path or at.startswith(path + "/")}
    if not here and path.lstrip("/") in GIVEN_ONLY:
        return "the decision reads only that it is given: the same for any value vLLM accepts there"
    if not here:
        return "vLLM reads it for its type alone: the decision is the same for any value it accepts there"
    tried = [({fact: value for fact, value in values.items() if fact in here}, decision)
             for values, decision in _in_each_class(policy, deployment.stand_in, hint) or []]
    first = tried[0][1]
    values = "; ".join(f"`{fact}`: " + ", ".join("any other" if value.startswith(OTHER) else f"`{value}`"
                                                 for value in told) for fact, told in _told(tried))
    if all(_same_decision(decision, first) for _, decision in tried):
        return f"the decision is the same for each value the rules tell apart ({values})"
    return f"{_answer(first)} for each value the rules tell apart ({values}), for reasons that differ between them"


def _in_each_class(policy: PolicySet, stand_in: StandIn, hint: Hint | None
                   ) -> list[tuple[dict[str, Any], Decision]] | None:
    """The stand-in's document decided with each combination of a value of
    each class of its facts (which facts, then the decision); None where
    there are too many combinations to try."""
    facts = stand_in.facts
    if not facts:
        return []
    chosen, _ = policy.choose(stand_in.document, hint)
    told = [chosen.classes(fact) for _, fact in facts]
    combinations = list(itertools.islice(itertools.product(*told), MAX_COMBINATIONS + 1))
    if len(combinations) > MAX_COMBINATIONS:
        return None
    out = []
    for values in combinations:
        written = [written_at(at, value) for (at, _), value in zip(facts, values)]
        document = stand_in.document
        for (at, _), value in zip(facts, written):
            document = _with(document, at, value)
        out.append(({fact: value for (_, fact), value in zip(facts, written)}, decision_of(policy, document, hint)))
    return out


def _told(tried: list[tuple[dict[str, Any], Decision]]) -> list[tuple[str, list[Any]]]:
    """Each fact and the values of it tried, in order."""
    return [(fact, list(dict.fromkeys(values[fact] for values, _ in tried))) for fact in tried[0][0]]


def _with(document: dict[str, Any], at: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with ``value`` at the JSON Pointer ``at``; a
    field given as JSON text (a command's option) is read and written as such."""
    field, *inside = pointer_parts(at)
    held = document[field]
    tree = json.loads(held) if isinstance(held, str) else held

    def put(node: Any, parts: list[str]) -> Any:
        if not parts:
            return value
        node = dict(node) if isinstance(node, dict) else {}
        node[parts[0]] = put(node.get(parts[0]), parts[1:])
        return node

    tree = put(tree, inside)
    return {**document, field: json.dumps(tree) if isinstance(held, str) else tree}


def agreement(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> str:
    """Why a deployment with paths was settled, for its note: the same
    decision on each path, or the same outcome for other reasons (then the
    path whose decision the report shows is named)."""
    first, *others = decisions = cast(list[Decision], _on_paths(policy, deployment, hint))  # (settled: all decided)
    count = len(decisions)
    # (a path that leaves values read for their type alone, or tried for each class, unknown: whatever they are)
    whatever = " (whatever the values a path leaves unknown)" if deployment.stood_paths else ""
    if all(_same_decision(other, first) for other in others):
        return f"the decision is the same on each of the {count} paths{whatever}"
    return (f"{_answer(first)} on each of the {count} paths{whatever}, for reasons that differ between them; "
            f"the decision shown is that of {deployment.paths[0][0]}")


def _on_paths(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> list[Decision | None]:
    """The decision on each path: None on one whose values read for their type alone may change it."""
    stood = dict(deployment.stood_paths)
    # Deciding a path again costs a lookup: the decision memo holds its facts.
    return [decision_of(policy, document, hint) if which not in stood else _stood(policy, stood[which], hint)
            for which, document in deployment.paths]


def _same_answer(one: Decision, other: Decision) -> bool:
    return (one.outcome, one.hma_enabled) == (other.outcome, other.hma_enabled)


def _same_decision(one: Decision, other: Decision) -> bool:
    # As a report shows them: a decision's trail also holds every fact it read.
    return one.to_dict() == other.to_dict()


def _answer(decision: Decision) -> str:
    if decision.outcome == "error":
        return "vLLM refuses the command"
    if decision.outcome == "undetermined":
        return "the outcome is undetermined"
    return f"HMA is {decision.outcome}"
