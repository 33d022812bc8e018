#!/usr/bin/env python3
"""Compare recorded cases with an installed hma_policy engine (a cross-check, not a test).

    /work/venv-old/bin/python tools/compare_engine.py tests/conformance/0.33.0/cases.json [--out FILE]

Runs every case's input through ``hma_policy.decide`` and prints, per kind
of difference, how many cases differ and one example. The engine models
vLLM 0.33.0 only, so this is meaningful for 0.33.0's cases.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys


def observe(decide, input_error, document):
    try:
        decision = decide(document)
    except input_error as exc:
        return {"outcome": "error", "hma_enabled": None,
                "error": {"stage": "input", "code": exc.problems[0].code}, "warnings": []}
    first = decision.errors[0] if decision.errors else None
    return {
        "outcome": decision.outcome,
        "hma_enabled": decision.hma_enabled,
        "error": {"stage": first.stage, "code": first.code} if first else None,
        "warnings": sorted(w.code for w in decision.warnings if w.source == "vllm"),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases")
    parser.add_argument("--out", help="write every difference as JSON here")
    args = parser.parse_args()
    try:
        import hma_policy
    except ImportError:
        print("compare_engine: hma_policy is not importable by this Python", file=sys.stderr)
        return 2
    cases = json.load(open(args.cases, encoding="utf-8"))
    kinds = collections.defaultdict(list)
    for case in cases:
        got = observe(hma_policy.decide, hma_policy.InputError, case["input"])
        expect = case["expect"]
        if got != expect:
            key = (json.dumps(expect["error"] and expect["error"]["code"]), expect["outcome"],
                   json.dumps(got["error"] and got["error"]["code"]), got["outcome"])
            kinds[key].append({"id": case["id"], "input": case["input"], "vllm": expect, "engine": got})
    total = sum(len(v) for v in kinds.values())
    print(f"{len(cases)} cases, {len(cases) - total} agree, {total} differ")
    for key, items in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(items)} x vllm {key[1]} {key[0]}  /  engine {key[3]} {key[2]}")
        example = items[0]
        print("  e.g.", example["id"], json.dumps(example["input"])[:400])
        print("  vllm  ", json.dumps(example["vllm"]))
        print("  engine", json.dumps(example["engine"]))
    if args.out:
        json.dump(kinds and {" | ".join(k): v for k, v in kinds.items()}, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
