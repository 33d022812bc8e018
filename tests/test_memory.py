"""Memory stays flat over many decisions (a light version for CI).

Each check runs in a fresh interpreter, so pytest's own allocations do not
blur the figures: it decides a warm-up batch, reads its RSS, decides many
more documents, and reads its RSS again. Caches inside the engine are
bounded, so once warm the process must not keep growing; the C core's state
is deleted after every step, so neither must it. The long run, a million
decisions with RSS printed along the way, is a documented command:

    python benchmarks/differential.py -n 1000000      # RSS after warm-up and at the end, per process
    python benchmarks/soak.py --decisions 1000000

Bounds here are generous (a leak of a few hundred bytes per decision shows up
as megabytes over the run); the measured figures go in release notes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import gc, json, random, sys
    sys.path.insert(0, {tests!r})
    import hma_policy
    from strategies import RandomPicker, document

    def rss_kib():
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    mode, warm, total, distinct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(11)
    docs = [document(RandomPicker(rng), max_nodes=20) for _ in range(distinct)]
    if mode == "yaml":
        import yaml
        from hma_policy.core.input import parse_text
        texts = [yaml.safe_dump(d) for d in docs]
        for i in range(total):
            if i == warm:
                gc.collect(); start = rss_kib()
            parse_text(texts[i % distinct], source="doc.yaml", fmt="yaml")
    elif mode == "load-close":
        for i in range(total):
            if i == warm:
                gc.collect(); start = rss_kib()
            policy = hma_policy.load_policy(None)
            try:
                policy.decide(docs[i % distinct])
            except hma_policy.InputError:
                pass
            policy.close()
    else:
        policy = hma_policy.load_policy(None, memo=(mode == "memo"))
        for i in range(total):
            if i == warm:
                gc.collect(); start = rss_kib()
            try:
                policy.decide(docs[i % distinct])
            except hma_policy.InputError:
                pass
    gc.collect()
    print(json.dumps({{"start": start, "end": rss_kib()}}))
""").format(tests=str(TESTS))


def measure(mode: str, warm: int, total: int, distinct: int) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(warm), str(total), str(distinct)],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("mode", ["memo", "nomemo"])
def test_repeated_decisions_do_not_grow_the_process(mode):
    # 2,000 distinct documents cycled: after one pass every cache is warm.
    figures = measure(mode, warm=4_000, total=14_000, distinct=2_000)
    growth = figures["end"] - figures["start"]
    assert growth < 2_048, f"RSS grew by {growth} KiB over 10,000 warm decisions ({figures})"


def test_distinct_documents_grow_the_process_only_up_to_the_cache_bounds():
    # Every document new: the bounded caches fill, then stop growing.
    first = measure("memo", warm=2_000, total=12_000, distinct=30_000)
    second = measure("memo", warm=2_000, total=30_000, distinct=30_000)
    growth_short = first["end"] - first["start"]
    growth_long = second["end"] - second["start"]
    assert growth_long < 64 * 1024, second
    # Nearly three times the decisions must not cost nearly three times the memory.
    assert growth_long < 2 * max(growth_short, 4_096), (first, second)


def test_loading_and_closing_policies_returns_their_memory():
    # Each live ruleset holds about 185 KiB in the C core; close() must free it.
    figures = measure("load-close", warm=50, total=350, distinct=50)
    growth = figures["end"] - figures["start"]
    assert growth < 8 * 1024, f"RSS grew by {growth} KiB over 300 load/close cycles ({figures})"


def test_reading_yaml_documents_does_not_grow_the_process():
    # The same 500 YAML texts read again and again: nothing may be kept per read.
    figures = measure("yaml", warm=1_000, total=21_000, distinct=500)
    growth = figures["end"] - figures["start"]
    assert growth < 2_048, f"RSS grew by {growth} KiB over 20,000 YAML reads ({figures})"
