"""Soak: many decide() calls in one process over varied documents.

Prints decisions/s and RSS at the start, after warm-up and at the end, so
memory stability can be read off (the figures go in release notes, never in
timed unit tests).

    python benchmarks/soak.py --decisions 100000 [--no-memo]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

import hma_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAMES = [
    "NixlConnector", "ExampleConnector", "LMCacheConnectorV1", "OffloadingConnector",
    "MooncakeConnector", "FlexKVConnectorV1", "SimpleCPUOffloadConnector", "NoSuchConnector",
    "HiSparseConnector", "LMCacheMPConnector", "MultiConnector",
]


def rss_kib() -> int:
    # Current RSS; the peak where /proc is missing.
    return common.rss_kib() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def tree(rng: random.Random, depth: int) -> dict:
    name = rng.choice(NAMES) if depth < 3 else rng.choice(NAMES[:-1])
    node = {"kv_connector": name, "kv_role": rng.choice(["kv_both", "kv_producer", "kv_consumer"])}
    if name == "MultiConnector":
        node["kv_connector_extra_config"] = {"connectors": [tree(rng, depth + 1) for _ in range(rng.randint(0, 3))]}
    elif rng.random() < 0.3:
        node["kv_connector_extra_config"] = {"endpoint": f"tcp://10.0.0.{rng.randint(1, 254)}:5555", "ratio": rng.random(), "big": 1e-05}
    return node


def document(rng: random.Random) -> dict:
    doc: dict = {"disable_hybrid_kv_cache_manager": rng.choice([None, None, True, False])}
    doc["kv_transfer_config"] = tree(rng, 0) if rng.random() < 0.9 else None
    if rng.random() < 0.2:
        doc["model"] = {"layer_kinds": rng.sample(["full_attention", "sliding_window", "chunked_local", "mamba"], rng.randint(1, 3))}
    if rng.random() < 0.1:
        doc["model"] = {"attention_chunk_size": 8192}
        doc["speculative_config"] = {"method": rng.choice(["eagle", "ngram", "mtp"])}
    if rng.random() < 0.1:
        doc["platform"] = {"supports_hybrid_kv_cache": rng.random() < 0.5, "is_cuda": rng.random() < 0.8}
    if rng.random() < 0.05:
        doc["kv_offloading_size"] = 4
    if rng.random() < 0.05:
        doc["kv_transfer_config"] = {"kv_connector": "X", "kv_conector": 1}  # invalid
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=5_000, help="distinct documents cycled through")
    parser.add_argument("--no-memo", action="store_true",
                        help="an empty step table: each step input goes to durable-rules when first met")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    docs = [document(rng) for _ in range(args.distinct)]
    policy = hma_policy.load_policy(memo=not args.no_memo)
    outcomes: dict[str, int] = {}
    start_rss = rss_kib()
    warm = max(1, args.decisions // 10)
    t0 = time.perf_counter()
    for i in range(args.decisions):
        try:
            outcome = policy.decide(docs[i % len(docs)]).outcome
        except hma_policy.InputError:
            outcome = "input-error"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if i + 1 == warm:
            warm_rss = rss_kib()
    elapsed = time.perf_counter() - t0
    end_rss = rss_kib()
    print(f"decisions: {args.decisions} over {len(docs)} distinct documents (memo {'off' if args.no_memo else 'on'})")
    print(f"outcomes: {dict(sorted(outcomes.items()))}")
    print(f"time: {elapsed:.1f} s, {args.decisions / elapsed:,.0f} decisions/s, {elapsed / args.decisions * 1e6:.1f} µs each")
    print(f"RSS KiB: start {start_rss}, after {warm} (warm-up) {warm_rss}, end {end_rss}; "
          f"growth after warm-up {end_rss - warm_rss} KiB ({(end_rss - warm_rss) / warm_rss * 100:+.2f}%)")


if __name__ == "__main__":
    main()
