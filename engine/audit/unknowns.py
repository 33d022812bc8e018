"""A deployment whose only problems are values the file does not give, decided
where those values do not change its answer: the same outcome on each path
of its script that sets them differently (``Deployment.paths``), or a
refusal vLLM gives whatever they are (``Deployment.stand_in``). The audit
and the admission webhook answer alike through here."""

from __future__ import annotations

from typing import Any

from ..core.command import refused_whatever
from ..core.decision import Decision
from ..core.errors import InputError
from ..core.policies import Hint, PolicySet
from .sources import Deployment

__all__ = ["agreement", "decision_of", "settled"]


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
        return first if all(_same_answer(other, first) for other in others) else None
    if deployment.stand_in is not None:
        try:
            policy.decide(deployment.stand_in.document, hint=hint)
        except InputError as exc:
            if refused_whatever(exc.problems, deployment.stand_in):
                return policy.refused(exc.problems, deployment.stand_in.document, hint)
    return None


def agreement(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> str:
    """Why a deployment with paths was settled, for its note: the same
    decision on each path, or the same outcome for other reasons (then the
    path whose decision the report shows is named)."""
    first, *others = decisions = _on_paths(policy, deployment, hint)
    count = len(decisions)
    if all(other == first for other in others):
        return f"the decision is the same on each of the {count} paths"
    return (f"{_answer(first)} on each of the {count} paths, for reasons that differ between them; "
            f"the decision shown is that of {deployment.paths[0][0]}")


def _on_paths(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> list[Decision]:
    # Deciding a path again costs a lookup: the decision memo holds its facts.
    return [decision_of(policy, document, hint) for _, document in deployment.paths]


def _same_answer(one: Decision, other: Decision) -> bool:
    return (one.outcome, one.hma_enabled) == (other.outcome, other.hma_enabled)


def _answer(decision: Decision) -> str:
    if decision.outcome == "error":
        return "vLLM refuses the command"
    if decision.outcome == "undetermined":
        return "the outcome is undetermined"
    return f"HMA is {decision.outcome}"
