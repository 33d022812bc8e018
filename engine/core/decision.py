"""The result of a decision: an immutable value with its reasons and trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import Problem

__all__ = ["Decision", "Message", "ConnectorVerdict", "Step", "Visit", "VllmRelease", "input_error_decision"]

OUTCOMES = ("enabled", "disabled", "error", "undetermined")


@dataclass(frozen=True, slots=True)
class Message(Problem):
    """A Problem raised by a rule of a decision: an error has its ``stage``, a warning its ``source``, both their rule."""

    stage: str | None = None
    source: str | None = None
    rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code}
        if self.stage is not None:
            out["stage"] = self.stage
        if self.source is not None:
            out["source"] = self.source
        out["message"] = self.message
        out["path"] = self.path
        if self.hint:
            out["hint"] = self.hint
        return out


@dataclass(frozen=True, slots=True)
class ConnectorVerdict:
    """One node of the connector graph and its answer to supports_hma_config."""

    path: str
    kv_connector: str | None
    supports_hma: bool | None
    rule: str | None
    depth: int = 0
    # The node's `support` fact as the rules set it: supported, unsupported,
    # unknown, error, or unsupported_or_error (supports_hma is null for the last three).
    support: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kv_connector": self.kv_connector,
            "supports_hma": self.supports_hma,
            "support": self.support,
            "rule": self.rule,
        }


class Step(NamedTuple):
    """One evaluated step: which rule set which fact, from which facts (for ``explain``)."""

    ruleset: str
    step: str
    node: str | None
    rule: str | None
    value: Any
    facts: tuple[tuple[str, Any], ...]


class VllmRelease(NamedTuple):
    """The vLLM release a decision was made for, and why that one: "default"
    (nothing named one), "--vllm-version", "document vllm_version", "rules
    vllm:0.21.0", "image tag vllm/vllm-openai:v0.21.0", "pip pin vllm==0.22.0"..."""

    release: str
    source: str

    def to_dict(self) -> dict[str, str]:
        return {"release": self.release, "source": self.source}


class Visit(NamedTuple):
    """One ruleset's run at one place: a node of the connector graph (its
    JSON Pointer) or the document (None). ``steps`` are (step, the rule that
    fired or None for the default, the facts it read), in order; ``facts``
    are all of the run's facts at its end, each step's value among them.
    Everything but ``node`` is shared by every run of the same facts, and
    cut to what each step read only when :attr:`Decision.steps` is asked
    for, since most decisions are never explained."""

    node: str | None
    ruleset: str
    steps: tuple[tuple[str, str | None, tuple[str, ...]], ...]
    facts: tuple[tuple[str, Any], ...]

    def to_steps(self) -> tuple[Step, ...]:
        facts = dict(self.facts)
        return tuple(Step(self.ruleset, step, self.node, rule, facts[step], tuple((f, facts[f]) for f in reads))
                     for step, rule, reads in self.steps)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether vLLM runs with the hybrid KV cache manager, and why.

    ``outcome`` is ``enabled`` or ``disabled`` when vLLM starts with HMA on or
    off, ``error`` when it refuses the configuration (``errors[0]`` is the first
    error vLLM raises), and ``undetermined`` when the answer depends on an
    external connector the rules do not declare. ``hma_enabled`` is vLLM's
    resolved value after config construction (None when the input or config
    stage failed, or when it is unknown). ``remediation`` says what to change,
    in one line, where the rules give it.
    """

    outcome: str
    hma_enabled: bool | None
    errors: tuple[Message, ...]
    warnings: tuple[Message, ...]
    connectors: tuple[ConnectorVerdict, ...]
    trace: tuple[str, ...]
    policy_digest: str
    reasons: tuple[str, ...] = ()
    remediation: str | None = None
    trail: tuple[Visit, ...] = ()
    vllm: VllmRelease | None = None

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every evaluated step of vLLM's decision: which rule set which fact,
        from which facts (for ``explain``). The trail also holds the result
        steps that made the outcome and flag from them; these are left out."""
        return tuple(step for visit in self.trail if visit.ruleset != "result" for step in visit.to_steps())

    @property
    def disable_hybrid_kv_cache_manager(self) -> bool | None:
        """vLLM's own name for the result: the negation of ``hma_enabled``."""
        return None if self.hma_enabled is None else not self.hma_enabled

    def to_dict(self) -> dict[str, Any]:
        """The decision contract (schemas/decision.schema.json)."""
        return {
            "outcome": self.outcome,
            "hma_enabled": self.hma_enabled,
            "disable_hybrid_kv_cache_manager": self.disable_hybrid_kv_cache_manager,
            "errors": [m.to_dict() for m in self.errors],
            "warnings": [m.to_dict() for m in self.warnings],
            "connectors": [c.to_dict() for c in self.connectors],
            "reasons": list(self.reasons),
            "trace": list(self.trace),
            "policy": {"digest": self.policy_digest},
            **({"vllm": self.vllm.to_dict()} if self.vllm is not None else {}),
        }


def input_error_decision(problems: Any, policy_digest: str, vllm: VllmRelease | None = None) -> Decision:
    """The Decision that stands for an invalid document (stage ``input``)."""
    errors = tuple(Message(code=p.code, message=p.message, path=p.path, stage="input", hint=p.hint) for p in problems)
    return Decision(outcome="error", hma_enabled=None, errors=errors, warnings=(), connectors=(), trace=(),
                    policy_digest=policy_digest, remediation=errors[0].hint if errors else None, vllm=vllm)
