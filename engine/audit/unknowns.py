"""A deployment whose only problems are values the file does not give, decided
where those values do not change its decision: the same decision on each
path of its script that sets them differently (``Deployment.paths``), or a
refusal vLLM gives whatever they are (``Deployment.stand_in``). The audit
and the admission webhook answer alike through here."""

from __future__ import annotations

from typing import Any

from ..core.command import refused_whatever
from ..core.decision import Decision
from ..core.errors import InputError
from ..core.policies import Hint, PolicySet
from .sources import Deployment

__all__ = ["decision_of", "settled"]


def decision_of(policy: PolicySet, document: Any, hint: Hint | None) -> Decision:
    """The decision of a document, or of its refusal (vLLM's own validation refuses it too)."""
    try:
        return policy.decide(document, hint=hint)
    except InputError as exc:
        return policy.refused(exc.problems, document, hint)


def settled(policy: PolicySet, deployment: Deployment, hint: Hint | None) -> Decision | None:
    """The decision its unknown values do not change, or None where they may."""
    if deployment.paths:
        first, *others = [decision_of(policy, document, hint) for _, document in deployment.paths]
        return first if all(other == first for other in others) else None
    if deployment.stand_in is not None:
        try:
            policy.decide(deployment.stand_in.document, hint=hint)
        except InputError as exc:
            if refused_whatever(exc.problems, deployment.stand_in):
                return policy.refused(exc.problems, deployment.stand_in.document, hint)
    return None
