"""What the differential test and benchmarks/differential.py compare: the
engine's and the reference model's answers in the same fields.

Compared per document, as the conformance suite does: the outcome,
``hma_enabled``, the first error's stage, code and JSON Pointer (for an
invalid document: every problem's code and pointer), the warnings with
source ``vllm``, and which nodes get ``connector.capability_unknown``.
"""

from __future__ import annotations

import hma_policy

import reference_model

FIELDS = ("outcome", "hma_enabled", "error", "vllm_warnings", "input_problems", "capability_unknown")


def snake(path: str) -> str:
    """Decision paths follow the document's spelling; the model speaks snake_case."""
    head, sep, rest = path[1:].partition("/")
    return "/" + head.replace("-", "_") + sep + rest if path else path


def observe(policy: hma_policy.Policy, document) -> tuple:
    """The engine's answer in the compared fields."""
    try:
        d = policy.decide(document)
    except hma_policy.InputError as exc:
        return ("error", None, ("input",), (), frozenset((p.code, p.path) for p in exc.problems), ())
    error = (d.errors[0].stage, d.errors[0].code, snake(d.errors[0].path)) if d.errors else None
    return (
        d.outcome,
        d.hma_enabled,
        error,
        tuple(sorted(w.code for w in d.warnings if w.source == "vllm")),
        frozenset(),
        tuple(sorted(snake(w.path) for w in d.warnings if w.code == "connector.capability_unknown")),
    )


def expected(document) -> tuple:
    """The reference model's answer in the compared fields."""
    e = reference_model.expect(document)
    if e.input_problems:
        return ("error", None, ("input",), (), e.input_problems, ())
    return (e.outcome, e.hma_enabled, e.error, e.vllm_warnings, frozenset(), e.unknown_paths)


def answer(decider, document) -> tuple:
    """Everything a decider answers for ``document``: the Decision, its
    contract dict and its steps; or, for an invalid document, its problems."""
    try:
        d = decider.decide(document)
    except hma_policy.InputError as exc:
        return ("invalid", exc.problems)
    return (d, d.to_dict(), d.steps)
