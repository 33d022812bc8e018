"""Kubernetes admission: an ``admission.k8s.io/v1`` AdmissionReview in, its
response out. No HTTP here (app.py carries it).

The object under review (``request.object``: a Deployment, StatefulSet, Pod,
Job, LeaderWorkerSet, or a CRD the audit reads, such as KServe's
LLMInferenceService) is read exactly as ``hma-policy audit`` reads a file
holding it: :func:`find_deployments` finds every vLLM launch in it, and each
is decided with the rules of its release (:func:`hint_for`: its image tag). Then:

- a container vLLM would refuse to start (outcome ``error``, or a command
  line vLLM rejects) is denied: ``allowed: false``, with a status message
  naming the container, the code and the hint;
- ``disabled`` and ``undetermined`` are allowed with AdmissionReview
  ``warnings`` (kubectl prints them), as is a launch whose values the object
  does not hold (a ``--config`` file in a ConfigMap, a ``valueFrom``, a
  KServe preset): the webhook cannot know them, and refusing what it cannot
  read would block deployments that start fine;
- an object with no vLLM container, and any operation without an object
  (DELETE, CONNECT), are allowed; so is an UPDATE that leaves a refused
  launch as it was (with the refusal as a warning), so that an object made
  before the webhook can still be relabelled, and its finalizers removed.

A body that is not an AdmissionReview raises :class:`MalformedReview`, which
the service answers with HTTP 400: the API server never sends one, and an
AdmissionReview response cannot be made without the request's ``uid``. The
webhook's ``failurePolicy`` decides what the API server does then (see
deploy/kubernetes/webhook.yaml).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from ..audit.sources import Deployment, find_deployments
from ..audit.unknowns import decision_of, settled
from ..core.decision import Decision
from ..core.errors import Problem, printable
from ..core.policies import Hint, PolicySet

__all__ = ["API_VERSION", "MalformedReview", "Review", "review", "hint_for", "NOT_IN_OBJECT"]

API_VERSION = "admission.k8s.io/v1"

# Source problems that say a value is not in the object (it comes from
# another object, a file, or the environment at run time), as opposed to a
# command line vLLM would refuse. A launch with only these is allowed with a
# warning; docs/decision.md lists every source.* code.
NOT_IN_OBJECT = frozenset({
    "source.unresolved", "source.config_missing", "source.config_unresolved", "source.config_outside",
    "source.shell_syntax", "source.directive",
})

# The API server keeps a warning to 256 characters and all of a response's
# warnings to 4,096 (what is past that is dropped, not shown).
MAX_WARNING, MAX_WARNINGS_TOTAL = 256, 4096


class MalformedReview(Exception):
    """The body is not an ``admission.k8s.io/v1`` AdmissionReview request."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


class Review(NamedTuple):
    """What reviewing one request gave: the AdmissionReview to answer, the
    ``result`` (allowed, warned or denied: for metrics and the access log),
    the ``uid``, and the outcome of each vLLM launch found."""

    response: dict[str, Any]
    result: str
    uid: str
    outcomes: tuple[str, ...]


def hint_for(deployment: Deployment) -> Hint | None:
    """What the object says of the launch's vLLM release: its image tag
    (``vllm/vllm-openai:v0.23.0`` -> ``0.23.0``) or a pip pin, as the audit
    reads it; the policy set decides with that release's rules."""
    return Hint(deployment.release.version, deployment.release.origin) if deployment.release is not None else None


def review(body: Any, policy: PolicySet) -> Review:
    """The response to one AdmissionReview ``body`` (parsed JSON)."""
    request = _request(body)
    uid = request["uid"]
    obj = request.get("object")
    if obj is None:  # DELETE and CONNECT carry no object to read
        return _answer(uid, [], [], ())
    if not isinstance(obj, dict):
        raise MalformedReview(Problem("request.admission", "`request.object` is not an object", "/request/object"))
    denials, warnings, outcomes = _examine(obj, request, policy)
    old = request.get("oldObject")
    if denials and request.get("operation") == "UPDATE" and isinstance(old, dict):
        # An update that leaves a refused launch as it was (a label, a finalizer
        # taken off so that a deletion can finish) is let through: refusing it
        # would not make the object start, only keep it from being managed.
        before = set(_examine(old, request, policy)[0])
        if set(denials) <= before:
            warnings = [f"{text} (so before this update too, which is let through)" for text in denials] + warnings
            denials = []
    return _answer(uid, denials, warnings, tuple(outcomes))


def _examine(obj: dict[str, Any], request: dict[str, Any], policy: PolicySet) -> tuple[list[str], list[str], list[str]]:
    """The denials and warnings for one object, and the outcome of each vLLM launch in it."""
    found = find_deployments("object.json", orjson.dumps(obj).decode("utf-8"))
    denials: list[str] = []
    warnings: list[str] = []
    outcomes: list[str] = []
    for problem in found.problems:  # the object as a whole (a field its controller drops, ...)
        warnings.append(f"{_object_label(obj, request)}: {problem.code}: {problem.message}")
    for deployment in found.deployments:
        label = _label(deployment, request)
        decision, refused = _decide(deployment, policy)
        outcomes.append(decision.outcome)
        if refused is not None:
            denials.append(f"vLLM would refuse to start {label}: {_problem_text(refused)}")
        elif decision.outcome == "error":  # a value the object does not hold
            unknown = decision.errors[0]
            outcomes[-1] = "undetermined"
            warnings.append(f"{label}: cannot be decided: {unknown.code}: {unknown.message}")
        elif decision.outcome != "enabled" or decision.warnings:
            codes = ", ".join(dict.fromkeys(w.code for w in decision.warnings))
            why = decision.reasons[-1] if decision.reasons else ""
            warnings.append(f"{label}: HMA {decision.outcome}" + (f" ({codes})" if codes else "") + (f": {why}" if why else ""))
    return denials, warnings, outcomes


def _request(body: Any) -> dict[str, Any]:
    """``body["request"]``, checked to be an AdmissionReview request with a uid."""
    if not isinstance(body, dict):
        raise MalformedReview(Problem("request.admission", "the body is not an AdmissionReview object", ""))
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise MalformedReview(Problem(
            "request.admission", f"not an {API_VERSION} AdmissionReview (apiVersion `{body.get('apiVersion')}`, "
            f"kind `{body.get('kind')}`)", "", hint='the webhook takes admissionReviewVersions ["v1"]'))
    request = body.get("request")
    if not isinstance(request, dict):
        raise MalformedReview(Problem("request.admission", "the AdmissionReview has no `request` object", "/request"))
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview(Problem("request.admission", "the AdmissionReview request has no `uid`", "/request/uid"))
    return request


def _decide(deployment: Deployment, policy: PolicySet) -> tuple[Decision, Problem | None]:
    """The launch's decision, and the problem for which vLLM would refuse to start it (None: it starts)."""
    hint = hint_for(deployment)
    if deployment.problems:
        refusing = [p for p in deployment.problems if p.code not in NOT_IN_OBJECT]
        decision = None if refusing else settled(policy, deployment, hint)
        if decision is None:
            return policy.refused(refusing or deployment.problems, None, hint), refusing[0] if refusing else None
    else:
        assert deployment.document is not None  # a launch without problems has its document
        decision = decision_of(policy, deployment.document, hint)
    return decision, decision.errors[0] if decision.outcome == "error" else None


def _problem_text(problem: Problem) -> str:
    return f"{problem.code}: {problem.message}" + (f" (hint: {problem.hint})" if problem.hint else "")


def _label(deployment: Deployment, request: dict[str, Any]) -> str:
    """``container `vllm` (prefill) of Deployment inference/llama``."""
    resource = dict(deployment.resource)
    role = f" ({deployment.role})" if deployment.role else ""
    where = _name(resource.get("kind") or "object", resource.get("namespace") or request.get("namespace"),
                  resource.get("name") or request.get("name"))
    return f"container `{deployment.container}`{role} of {where}"


def _object_label(obj: dict[str, Any], request: dict[str, Any]) -> str:
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    return _name(str(obj.get("kind") or "object"), meta.get("namespace") or request.get("namespace"),
                 meta.get("name") or request.get("name"))


def _name(kind: str, namespace: Any, name: Any) -> str:
    name = str(name) if name else "(generated name)"
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _answer(uid: str, denials: list[str], warnings: list[str], outcomes: tuple[str, ...]) -> Review:
    response: dict[str, Any] = {"uid": uid, "allowed": not denials}
    if denials:
        # Kubernetes shows the message to whoever applied the object.
        response["status"] = {"code": 403, "reason": "Forbidden",
                              "message": printable("hma-policy: " + "; ".join(denials))}
    if warnings:
        response["warnings"] = _bounded(warnings)
    result = "denied" if denials else "warned" if warnings else "allowed"
    return Review({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}, result, uid, outcomes)


def _bounded(warnings: list[str]) -> list[str]:
    """The warnings within the API server's limits, each on one printable line."""
    out, total = [], 0
    for index, text in enumerate(warnings):
        text = printable("hma-policy: " + text)
        if len(text) > MAX_WARNING:
            text = text[:MAX_WARNING - 3] + "..."
        if total + len(text) > MAX_WARNINGS_TOTAL - 64:
            out.append(f"hma-policy: and {len(warnings) - index} more warning(s)")
            break
        out.append(text)
        total += len(text)
    return out
