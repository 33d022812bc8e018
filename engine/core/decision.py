"""The result of a decision: an immutable value with its reasons and trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Decision", "Message", "ConnectorVerdict", "Step"]

OUTCOMES = ("enabled", "disabled", "error", "undetermined")


@dataclass(frozen=True, slots=True)
class Message:
    """An error (``stage`` set) or a warning (``source`` set) of a decision."""

    code: str
    message: str
    path: str
    stage: str | None = None
    source: str | None = None
    hint: str | None = None
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


@dataclass(frozen=True, slots=True)
class Step:
    """One evaluated step: which rule set which fact, from which facts (for ``explain``)."""

    ruleset: str
    step: str
    node: str | None
    rule: str | None
    value: Any
    facts: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether vLLM 0.33.0 runs with the hybrid KV cache manager, and why.

    ``outcome`` is ``enabled`` or ``disabled`` when vLLM starts with HMA on or
    off, ``error`` when it refuses the configuration (``errors[0]`` is the first
    error vLLM raises), and ``undetermined`` when the answer depends on an
    external connector the rules do not declare. ``hma_enabled`` is vLLM's
    resolved value after config construction (None when the input or config
    stage failed, or when it is unknown).
    """

    outcome: str
    hma_enabled: bool | None
    errors: tuple[Message, ...]
    warnings: tuple[Message, ...]
    connectors: tuple[ConnectorVerdict, ...]
    trace: tuple[str, ...]
    policy_digest: str
    reasons: tuple[str, ...] = ()
    # (ruleset, step, node, rule, value, facts) per evaluated step; Step
    # records are built only when asked for (explain, diff), not per decision.
    step_data: tuple = field(default=(), compare=False, repr=False)
    _steps: list = field(default_factory=list, compare=False, repr=False)

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every evaluated step: which rule set which fact, from which facts (for ``explain``)."""
        if not self._steps and self.step_data:
            built = []
            for ruleset, step, node, rule, value, facts in self.step_data:
                read = tuple((f, tuple(facts[f]) if isinstance(facts[f], list) else facts[f]) for f in step.reads)
                built.append(Step(ruleset, step.name, node, rule.id if rule else None, value, read))
            self._steps.append(tuple(built))
        return self._steps[0] if self._steps else ()

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
        }


def input_error_decision(problems: Any, policy_digest: str) -> Decision:
    """The Decision that stands for an invalid document (stage ``input``)."""
    return Decision(
        outcome="error",
        hma_enabled=None,
        errors=tuple(
            Message(code=p.code, message=p.message, path=p.path, stage="input", hint=p.hint) for p in problems
        ),
        warnings=(),
        connectors=(),
        trace=(),
        policy_digest=policy_digest,
    )
