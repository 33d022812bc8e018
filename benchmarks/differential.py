"""Differential run: the engine against an independent model of vLLM 0.33.0.

Draws N random deployment documents (tests/strategies.py, plain ``random``),
decides each with the engine and with tests/reference_model.py, and prints
how often they agree, where they disagree (grouped, with the smallest
document of each group), throughput, and the process's RSS.

    python benchmarks/differential.py                 # 1,000,000 documents, 2 processes
    python benchmarks/differential.py -n 100000 --jobs 2 --seed 7 [--no-memo]

The compared fields are those of tests/compare.py, shared with the CI
version, tests/test_differential.py (a few thousand documents). Figures
printed here are measurements, never pass/fail thresholds; the exit status is
1 when any document disagrees or crashes the engine.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hma_policy  # noqa: E402
import strategies  # noqa: E402
from common import rss_kib  # noqa: E402
from compare import FIELDS, expected, observe  # noqa: E402


def diagnose(document: dict, engine: tuple, model: tuple) -> str:
    """A first guess at the cause of a disagreement, to group the report by."""
    if model[5] or engine[5]:
        return "external connector of unknown capability"
    if model[4] or engine[4]:
        return "input validation"
    return "unexplained"


def _worker(args: tuple) -> dict:
    seed, count, memo = args
    rng = random.Random(seed)
    picker = strategies.RandomPicker(rng)
    policy = hma_policy.load_policy(None, memo=memo)
    out = {"n": 0, "agree": 0, "outcomes": collections.Counter(), "groups": {}, "crashes": {}, "seconds": 0.0,
           "rss": [rss_kib()]}
    start = time.perf_counter()
    for index in range(count):
        document = strategies.document(picker)
        pristine = copy.deepcopy(document)
        try:
            engine = observe(policy, document)
        except Exception as exc:  # an engine crash is a finding, never a stop
            key = f"{type(exc).__name__}: {str(exc)[:80]}"
            size = len(json.dumps(pristine, default=str))
            if key not in out["crashes"] or size < out["crashes"][key][1]:
                out["crashes"][key] = (pristine, size, out["crashes"].get(key, (None, 0, 0))[2] + 1)
            else:
                out["crashes"][key] = (*out["crashes"][key][:2], out["crashes"][key][2] + 1)
            out["n"] += 1
            continue
        if document != pristine:
            engine = ("mutated the document",) + engine[1:]
        model = expected(pristine)
        out["n"] += 1
        out["outcomes"]["input" if model[4] else model[0]] += 1
        if engine == model:
            out["agree"] += 1
        else:
            fields = tuple(f for f, a, b in zip(FIELDS, engine, model) if a != b)
            cause = diagnose(pristine, engine, model)
            key = f"{cause} | differs in {', '.join(fields)}"
            size = len(json.dumps(pristine))
            count_so_far = out["groups"].get(key, (None, None, None, 0, 0))[4]
            if key not in out["groups"] or size < out["groups"][key][3]:
                out["groups"][key] = (pristine, engine, model, size, count_so_far + 1)
            else:
                old = out["groups"][key]
                out["groups"][key] = (*old[:4], count_so_far + 1)
        if index == min(count - 1, 2000) or (index and index % max(count // 10, 1) == 0):
            out["rss"].append(rss_kib())  # after warm-up, then every tenth of the run
    out["seconds"] = time.perf_counter() - start
    out["rss"].append(rss_kib())
    policy.close()
    return out


def _show(value) -> str:
    if isinstance(value, frozenset):
        value = sorted(value)
    return json.dumps(value, default=list)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--examples", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-memo", action="store_true",
                        help="an empty step table: each step input goes to durable-rules when first met")
    args = parser.parse_args(argv)

    share, rest = divmod(args.examples, args.jobs)
    tasks = [(args.seed * 1000 + job, share + (job < rest), not args.no_memo) for job in range(args.jobs)]
    started = time.perf_counter()
    if args.jobs == 1:
        results = [_worker(tasks[0])]
    else:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(_worker, tasks)
    wall = time.perf_counter() - started

    total = sum(r["n"] for r in results)
    agree = sum(r["agree"] for r in results)
    outcomes = sum((r["outcomes"] for r in results), collections.Counter())
    groups: dict = {}
    crashes: dict = {}
    for r in results:
        for key, (doc, engine, model, size, count) in r["groups"].items():
            if key not in groups or size < groups[key][3]:
                groups[key] = (doc, engine, model, size, count + groups.get(key, (0, 0, 0, 0, 0))[4])
            else:
                groups[key] = (*groups[key][:4], groups[key][4] + count)
        for key, (doc, size, count) in r["crashes"].items():
            if key not in crashes or size < crashes[key][1]:
                crashes[key] = (doc, size, count + crashes.get(key, (0, 0, 0))[2])
            else:
                crashes[key] = (*crashes[key][:2], crashes[key][2] + count)
    crashed = sum(c[2] for c in crashes.values())
    

    print(f"documents: {total:,} in {wall:.1f} s wall ({total / wall:,.0f}/s over {args.jobs} process(es); "
          f"memo {'off' if args.no_memo else 'on'}; seed {args.seed})")
    print("model outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())))
    print(f"agreement: {agree:,}/{total:,} = {100 * agree / max(total, 1):.4f}%")
    print(f"disagreements: {total - agree - crashed:,}; engine exceptions: {crashed:,}")
    for r, (job, *_rest) in zip(results, tasks):
        warm, end = r["rss"][1], r["rss"][-1]
        print(f"process {job}: {r['n']:,} documents in {r['seconds']:.1f} s; RSS start {r['rss'][0]:,} KiB, "
              f"after warm-up {warm:,} KiB, end {end:,} KiB ({end - warm:+,} KiB); "
              f"every tenth: {', '.join(f'{v:,}' for v in r['rss'][2:-1])}")
    for key, (doc, engine, model, _size, count) in sorted(groups.items(), key=lambda kv: -kv[1][4]):
        print(f"\n[{count:,}] {key}")
        print(f"  smallest: {json.dumps(doc, ensure_ascii=False)}")
        for name, a, b in zip(FIELDS, engine, model):
            if a != b:
                print(f"  {name}: engine {_show(a)} / model {_show(b)}")
    for key, (doc, _size, count) in sorted(crashes.items(), key=lambda kv: -kv[1][2]):
        print(f"\n[{count:,}] engine raised {key}")
        print(f"  smallest: {json.dumps(doc, ensure_ascii=False)}")
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main())
