"""A decision as the terminal shows it: ``decide``'s text (the outcome, why,
the errors and the connector tree), ``explain``'s steps, and ``explain
--format json``."""

from __future__ import annotations

import json
from typing import Any

from .core.decision import Decision
from .core.errors import printable

__all__ = ["render_text", "render_explain", "explain_dict"]

# A node's verdict by supports_hma, where its `support` value has no wording of its own.
_SUPPORTS_HMA: dict[bool | None, str] = {True: "supports HMA", False: "does not support HMA", None: "unknown"}


def _tree(decision: Decision) -> list[str]:
    """The connector tree, drawn from the pre-order list and each node's depth."""
    verdicts = {"supported": "supports HMA", "unsupported": "does not support HMA", "unknown": "unknown",
                "error": "raises", "unsupported_or_error": "does not support HMA, or raises"}
    items = list(decision.connectors)
    last = []
    for index, node in enumerate(items):
        following = next((c.depth for c in items[index + 1:] if c.depth <= node.depth), -1)
        last.append(following < node.depth)
    lines: list[str] = []
    open_levels: list[bool] = []  # at each depth, whether its node was the last of its siblings
    for node, is_last in zip(items, last):
        del open_levels[max(node.depth - 1, 0):]
        prefix = "".join("   " if done else "│  " for done in open_levels)
        if node.depth > 0:
            prefix += "└─ " if is_last else "├─ "
            open_levels.append(is_last)
        name = node.kv_connector if node.kv_connector is not None else "(no kv_connector)"
        verdict = verdicts.get(node.support or "", _SUPPORTS_HMA[node.supports_hma])
        lines.append(f"  {prefix}{name}: {verdict}  [{node.path}] ({node.rule})")
    return lines


def render_text(decision: Decision, *, source: str = "", policy: str | None = None) -> str:
    """A decision as text; ``policy``: how the command was told the policy's name."""
    out = []
    summary = {
        "enabled": "HMA enabled",
        "disabled": "HMA disabled",
        "error": "rejected",
        "undetermined": "cannot be decided from the rules",
    }[decision.outcome]
    if decision.errors:
        stage = decision.errors[0].stage
        summary = {"input": "the document is invalid", "config": "rejected at config construction",
                   "connector": "config accepted, connector creation fails at start-up"}.get(stage or "", summary)
    head = f"{source}: " if source else ""
    out.append(f"{head}{decision.outcome} ({summary})")
    if decision.hma_enabled is not None:
        out.append(f"  hma_enabled: {json.dumps(decision.hma_enabled)} "
                   f"(disable_hybrid_kv_cache_manager: {json.dumps(decision.disable_hybrid_kv_cache_manager)})")
    if decision.reasons:
        out.append("why:")
        out += [f"  - {r}" for r in decision.reasons]
    for title, items in (("errors", decision.errors), ("warnings", decision.warnings)):
        if items:
            out.append(f"{title}:")
            for m in items:
                tag = m.stage or m.source
                out.append(f"  - {m.code} [{tag}] at {m.path or '/'}: {m.message}")
                if m.hint:
                    out.append(f"    hint: {m.hint}")
    if decision.connectors:
        out.append("connectors:")
        out += _tree(decision)
    if decision.vllm is not None:
        out.append(f"vllm: {decision.vllm.release} ({decision.vllm.source})")
    out.append(f"policy: {decision.policy_digest}" + (f" ({policy})" if policy else ""))
    # Messages carry user values: escape control characters so no document
    # can forge lines or move the cursor on the reader's terminal.
    return "\n".join(printable(line) for line in out)


def render_explain(decision: Decision) -> str:
    out = [f"outcome: {decision.outcome}"]
    if decision.vllm is not None:
        out.append(f"vllm: {decision.vllm.release} ({decision.vllm.source})")
    out.append("steps (rule that set each fact, and the facts it read):")
    for step in decision.steps:
        where = f" {step.node}" if step.node else ""
        rule = step.rule or "(default)"
        facts = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in step.facts)
        out.append(f"  [{step.ruleset}{where}] {step.step} = {json.dumps(step.value)}  <- {rule}" + (f"  ({facts})" if facts else ""))
    out.append("trace: " + " ".join(decision.trace))
    return "\n".join(printable(line) for line in out)


def explain_dict(decision: Decision) -> dict[str, Any]:
    """``explain --format json``: the decision's JSON and every step."""
    steps = [{"ruleset": s.ruleset, "node": s.node, "step": s.step, "value": s.value, "rule": s.rule,
              "facts": dict(s.facts)} for s in decision.steps]
    return {**decision.to_dict(), "steps": steps}
