#!/usr/bin/env python3
"""A launcher that wraps `vllm serve`: it decides first, then runs vLLM or refuses.

    python examples/launcher.py vllm serve MODEL --kv-transfer-config '{...}' ...

A deployment vLLM would refuse at start-up (outcome `error`) is refused here,
before any GPU is taken, with vLLM's reason and the hint; an undetermined one
(an external connector the rules do not know) is refused too unless
HMA_POLICY_ALLOW_UNDETERMINED=1. Otherwise the launcher prints the decision's
warnings and replaces itself with vLLM (os.execvp), with the same words.
"""

import os
import sys

import hma_policy


def main(argv: list[str]) -> int:
    try:
        decision = hma_policy.decide_command(argv, env=dict(os.environ))
    except hma_policy.InputError as exc:
        print(f"launcher: not a vLLM launch this can decide: {exc}", file=sys.stderr)
        return 2
    for warning in decision.warnings:
        print(f"launcher: warning: {warning.code}: {warning.message}", file=sys.stderr)
    refused = decision.outcome == "error" or (
        decision.outcome == "undetermined" and os.environ.get("HMA_POLICY_ALLOW_UNDETERMINED") != "1")
    if refused:
        reason = decision.errors[0] if decision.errors else None
        print(f"launcher: refused ({decision.outcome}): " + (f"{reason.code}: {reason.message}" if reason
              else "; ".join(decision.reasons)) + (f"\n  hint: {decision.remediation}" if decision.remediation else ""),
              file=sys.stderr)
        return 1
    print(f"launcher: HMA {'on' if decision.hma_enabled else 'off'} (vLLM {decision.vllm.release}); starting vLLM",
          file=sys.stderr)
    os.execvp(argv[0], argv)  # the words as given: nothing is added or changed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
