"""The measurements of one build, run by that build's Python (benchmarks/run.py runs it).

    python benchmarks/worker.py SECTION [--quick] [--fleet DIR]

Prints one JSON object. It uses the public API only (``load_policy``,
``Policy.decide``, ``Policy.prepare`` / ``decide_prepared``, ``close``, and
the audit as the command line calls it), never a private name, so that a
change inside the engine cannot break it; a build without a call leaves its
figures out ("n/a" in the table). The ``references`` section measures what
the same work costs without the engine (vLLM's own check, parsing,
jsonschema), run once, by this build's Python.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

# documents.py and the rest are found beside this script, which Python puts
# first on sys.path.
from documents import CASES, FIRST_CASE, UNRELATED_CASE, count_nodes, fleet_document, new_facts, same_facts
from common import rss_kib

_started = time.perf_counter()
import hma_policy  # noqa: E402

IMPORT_MS = (time.perf_counter() - _started) * 1000


class Timed(NamedTuple):
    """Timings of ``n`` calls: each call's wall time, and the CPU time of this
    process over all of them. On a shared machine the wall time of a call
    includes waiting for a CPU, and more often the longer the call, so
    the figures compared are CPU time; wall times are kept beside them."""

    wall_us: list[float]
    cpu_us: float  # per call

    def summary(self) -> dict[str, float]:
        return {"cpu": self.cpu_us, "p50": statistics.median(self.wall_us), "p99": pct(self.wall_us, 0.99)}


def samples(fn: Callable[[], Any], n: int) -> Timed:
    """``n`` timings of ``fn()`` in µs, the cyclic collector paused (as a decision's own cost)."""
    out = []
    gc.disable()
    try:
        cpu = time.process_time_ns()  # a system call (~2 µs): read once for all the calls
        for _ in range(n):
            start = time.perf_counter_ns()
            fn()
            out.append((time.perf_counter_ns() - start) / 1000)
        cpu = time.process_time_ns() - cpu
    finally:
        gc.enable()
    return Timed(out, cpu / 1000 / n)


def each(fn: Callable[[Any], Any], items: list) -> Timed:
    """The timings of ``fn(item)`` for each item."""
    it = iter(items)
    return samples(lambda: fn(next(it)), len(items))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- sections -------------------------------------------------------------------

def info(args: argparse.Namespace) -> dict:
    """What build this is: where it is installed and which modules are compiled."""
    package = Path(hma_policy.__file__).parent
    compiled = sorted(str(p.relative_to(package)).split(".")[0] for p in package.rglob("*.so"))
    rules = _folder("hma_policy.rules")
    return {"python": sys.version.split()[0], "package": str(package), "version": getattr(hma_policy, "__version__", "?"),
            "compiled": compiled, "rules": str(rules), "import_ms": IMPORT_MS}


def _folder(package: str) -> Path:
    """Where a data package of the build is (an editable install maps it elsewhere)."""
    return Path(importlib.import_module(package).__file__).parent


def latency(args: argparse.Namespace) -> dict:
    """Warm decide() of each document: the same document again, distinct
    documents with the same facts, and distinct documents with new facts."""
    policy = hma_policy.load_policy()
    rows: dict[str, Any] = {}
    for name, doc in CASES.items():
        nodes = count_nodes(doc["kv_transfer_config"])
        n = sample_count(doc, args.quick)
        for _ in range(20):
            policy.decide(doc)
        row = {"nodes": nodes, "repeated": samples(lambda: policy.decide(doc), n).summary(),
               "same_facts": each(policy.decide, same_facts(doc, n)).summary()}
        fresh = new_facts(doc, n)
        if fresh is not None:
            row["new_facts"] = each(policy.decide, fresh).summary()
        rows[name] = row
    policy.close()
    return {"cases": rows, "scaling": scaling(args)}


def references(args: argparse.Namespace) -> dict:
    """What the same work costs without the engine, in this process: for
    each latency document, vLLM's own check (transcribed), parsing its JSON
    and validating it with jsonschema; and parsing the build's rule files as
    YAML (what any loader of them must do)."""
    import orjson
    import yaml
    from baseline import vllm_decide, vllm_supports_hma_config
    validator = deployment_validator()
    cases = {}
    for name, doc in CASES.items():
        n = sample_count(doc, args.quick)
        text = json.dumps(doc)
        ktc = doc["kv_transfer_config"]
        cases[name] = {"vllm_supports_hma_config": samples(lambda: vllm_supports_hma_config(ktc), n).cpu_us,
                       "vllm_hma_block": samples(lambda: vllm_decide(doc), n).cpu_us,
                       "json_loads": samples(lambda: json.loads(text), n).cpu_us,
                       "orjson_loads": samples(lambda: orjson.loads(text), n).cpu_us,
                       "jsonschema_is_valid": samples(lambda: validator.is_valid(doc), max(20, n // 10)).cpu_us}
    texts = [path.read_text(encoding="utf-8") for path in sorted(_folder("hma_policy.rules").rglob("*.y*ml"))]
    rule_files = [text for text in texts if RULE_FILE.search(text)]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    parse = samples(lambda: [yaml.load(text, Loader=loader) for text in rule_files], 5 if args.quick else 20)
    return {"cases": cases, "rule_files": len(rule_files), "rules_yaml_ms": parse.cpu_us / 1000}


# A rule file of either kind the loader reads (test files are `kind: tests`).
RULE_FILE = re.compile(r"^kind:\s*(registry|rules)\s*$", re.MULTILINE)


def deployment_validator() -> Any:
    """jsonschema's validator of the build's deployment schema."""
    import jsonschema
    schema = json.loads((_folder("hma_policy.schemas") / "deployment.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def sample_count(document: dict, quick: bool) -> int:
    """How many timings of a document: fewer for the big trees."""
    return max(30, (200 if quick else 5000) // max(1, count_nodes(document["kv_transfer_config"]) // 10))


def scaling(args: argparse.Namespace) -> dict:
    """Cost against node count, over distinct documents of the same facts."""
    from documents import leaf, tree
    policy = hma_policy.load_policy()
    sizes = [1, 10, 50, 100, 250, 500, 1000]
    n = 5 if args.quick else 30
    docs = {size: same_facts({"kv_transfer_config": tree(size) if size > 1 else leaf()}, n) for size in sizes}
    # A document of each size per round, so that a slow spell of this shared
    # machine falls on every size alike.
    values: dict[int, list[float]] = {size: [] for size in sizes}
    for i in range(n):
        for size in sizes:
            values[size].append(samples(lambda: policy.decide(docs[size][i]), 1).cpu_us)
    policy.close()
    points = [(count_nodes(docs[size][0]["kv_transfer_config"]), statistics.median(values[size])) for size in sizes]
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
    per_node = {x: y / x for x, y in points}
    return {"points": points, "slope_us_per_node": slope, "intercept_us": mean_y - slope * mean_x,
            "per_node_ratio_1000_vs_100": per_node[max(xs)] / per_node[min(xs, key=lambda x: abs(x - 100))]}


def cold(args: argparse.Namespace) -> dict:
    """A process's first load_policy() and first decide() of the 8-leaf tree;
    then another load in the same process and its first decide(), and the
    median of further loads. CPU time, as the warm figures (wall beside)."""
    doc = CASES[FIRST_CASE]
    out: dict[str, float] = {"import_ms": IMPORT_MS}
    policy = once(hma_policy.load_policy, out, "first_load", 1e3)
    once(lambda: policy.decide(doc), out, "first_decide", 1)
    policy.close()
    again = once(hma_policy.load_policy, out, "reload", 1e3)
    once(lambda: again.decide(doc), out, "first_decide_after_reload", 1)
    again.close()
    loads = [out["reload_cpu"]]
    for _ in range(3):
        further: dict[str, float] = {}
        once(hma_policy.load_policy, further, "load", 1e3).close()
        loads.append(further["load_cpu"])
    out["load_cpu"] = statistics.median(loads)
    # The same first decision after one decision of a document that shares no node with it: the
    # code and data every decision touches are in the CPU's caches then, and no answer is reused.
    primed = hma_policy.load_policy()
    primed.decide(CASES[UNRELATED_CASE])
    once(lambda: primed.decide(doc), out, "first_decide_after_another", 1)
    # A warm decision (b) of the same tree, right after the CPU's caches are flushed by writing
    # more memory than they hold: the same work as a warm one, with the caches as cold as after
    # a load, so it shows what a cold cache alone costs on this machine.
    fresh = new_facts(doc, 52)
    for document in fresh[:50]:
        primed.decide(document)
    flush_caches()
    once(lambda: primed.decide(fresh[50]), out, "warm_decide_after_flush", 1)
    primed.close()
    return out


def flush_caches(size: int = 64 << 20) -> None:
    """Write one byte in each 64-byte line of ``size`` bytes (more than any CPU cache holds)."""
    memory = bytearray(size)
    memory[::64] = b"\x01" * (size // 64)


def once(fn: Callable[[], Any], out: dict[str, float], name: str, unit: float) -> Any:
    """``fn()``, its CPU and wall time put in ``out`` (in µs / ``unit``), the
    cyclic collector paused as in samples(): a full collection costs what the
    whole process holds, and lands on whichever call crosses its threshold."""
    gc.disable()
    try:
        cpu, wall = time.process_time_ns(), time.perf_counter_ns()
        result = fn()
        out[f"{name}_wall"] = (time.perf_counter_ns() - wall) / 1000 / unit
        out[f"{name}_cpu"] = (time.process_time_ns() - cpu) / 1000 / unit
    finally:
        gc.enable()
    return result


def memory(args: argparse.Namespace) -> dict:
    """RSS over many warm decisions of 2,000 fleet documents in turn."""
    n = 20_000 if args.quick else 1_000_000
    rng = random.Random(5)
    docs = [fleet_document(rng) for _ in range(2000)]
    policy = hma_policy.load_policy()
    for d in docs:
        policy.decide(d)
    before = rss_kib()
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        policy.decide(docs[i % len(docs)])
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    after = rss_kib()
    policy.close()
    from baseline import vllm_decide
    vllm = each(vllm_decide, docs)
    return {"decisions": n, "rss_before_kib": before, "rss_after_kib": after,
            "growth_pct": (after - before) / before * 100, "decisions_per_s": n / elapsed,
            "decisions_per_cpu_s": n / cpu, "vllm_decisions_per_cpu_s": 1e6 / vllm.cpu_us}


def stages(args: argparse.Namespace) -> dict:
    """Where an audit's time goes, in µs of CPU a file, in one process with a
    policy just loaded: the whole audit of the fleet (as `hma-policy audit`
    calls it, without the command's start-up and report), and over the same
    documents each decision stage of the public API, with what the same
    work costs without the engine (jsonschema, vLLM's check) beside them."""
    import orjson
    from baseline import vllm_decide
    try:
        from hma_policy.audit.run import audit
    except ImportError:
        from hma_policy.audit import audit  # builds before the audit package was split up
    files = sorted(Path(args.fleet).iterdir())
    documents = [json.loads(path.read_bytes()) for path in files]
    out = {}
    policy = hma_policy.load_policy()
    if hasattr(policy, "prepare"):
        prepared = [policy.prepare(d) for d in documents]
        out["prepare"] = each(policy.prepare, documents).cpu_us
        out["decide_prepared"] = each(policy.decide_prepared, prepared).cpu_us
    policy.close()
    policy = hma_policy.load_policy()  # a policy that has decided nothing yet, as an audit's
    out["audit"] = each(lambda paths: audit(paths, policy=policy, documents=False), [[args.fleet]]).cpu_us / len(files)
    policy.close()
    out["jsonschema_is_valid"] = each(deployment_validator().is_valid, documents).cpu_us
    out["vllm_hma_block"] = each(vllm_decide, documents).cpu_us
    out["orjson_loads"] = each(lambda path: orjson.loads(path.read_bytes()), files).cpu_us
    return out


SECTIONS = {f.__name__: f for f in (info, latency, references, cold, memory, stages)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=sorted(SECTIONS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fleet", help="folder of fleet documents (stages)")
    args = parser.parse_args()
    json.dump(SECTIONS[args.section](args), sys.stdout)


if __name__ == "__main__":
    main()
