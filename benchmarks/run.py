"""hma-policy benchmarks: figures and ratios against baselines measured in the same run.

    python benchmarks/run.py                 # full run (a few minutes), writes benchmarks/results.json
    python benchmarks/run.py --quick         # smoke mode for CI: every figure, small counts

Nothing here is a pass/fail test: targets are printed beside each figure with
the ratio that decides them, because these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import hma_policy
from hma_policy.core.schema import load_schema

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from baseline import vllm_decide, vllm_supports_hma_config  # noqa: E402
from common import rss_kib  # noqa: E402

try:
    import orjson
except ImportError:  # the floor is then measured with json alone
    orjson = None


# -- documents ----------------------------------------------------------------

def leaf(name: str = "NixlConnector") -> dict:
    return {"kv_connector": name, "kv_role": "kv_both"}


def multi(children: list) -> dict:
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": children}}


SUPPORTED = ["NixlConnector", "OffloadingConnector", "MooncakeConnector", "MooncakeStoreConnector",
             "NixlPullConnector", "SimpleCPUOffloadConnector", "DecodeBenchConnector", "MoRIIOConnector"]


def tree(nodes: int, fanout: int = 10) -> dict:
    """A MultiConnector tree with ``nodes`` nodes in all (breadth-first, ``fanout`` children each)."""
    root = multi([])
    queue, count = [root], 1
    while count < nodes:
        parent = queue.pop(0)
        for _ in range(fanout):
            if count >= nodes:
                break
            child = multi([]) if count + fanout < nodes and len(queue) < nodes // fanout else leaf(SUPPORTED[count % len(SUPPORTED)])
            parent["kv_connector_extra_config"]["connectors"].append(child)
            count += 1
            if child["kv_connector"] == "MultiConnector":
                queue.append(child)
    # Empty MultiConnectors would not support HMA: give each a leaf.
    stack = [root]
    while stack:
        node = stack.pop()
        kids = node.get("kv_connector_extra_config", {}).get("connectors")
        if kids is not None:
            if not kids:
                kids.append(leaf())
            stack.extend(kids)
    return root


def count_nodes(ktc: dict) -> int:
    total, stack = 0, [ktc]
    while stack:
        node = stack.pop()
        total += 1
        stack.extend(node.get("kv_connector_extra_config", {}).get("connectors", []) if node["kv_connector"] == "MultiConnector" else [])
    return total


CASES = {
    "single supported": {"kv_transfer_config": leaf("NixlConnector")},
    "single unsupported": {"kv_transfer_config": leaf("LMCacheConnectorV1")},
    "multi, 2 children": {"kv_transfer_config": multi([leaf("NixlConnector"), leaf("OffloadingConnector")])},
    "3 levels, 8 leaves": {"kv_transfer_config": multi([
        multi([leaf(n) for n in SUPPORTED[:4]]), multi([leaf(n) for n in SUPPORTED[4:]])])},
    "100-node tree": {"kv_transfer_config": tree(100)},
    "1000-node tree": {"kv_transfer_config": tree(1000)},
}


def fleet_document(rng: random.Random) -> dict:
    names = SUPPORTED + ["ExampleConnector", "LMCacheConnectorV1", "FlexKVConnectorV1", "HF3FSKVConnector"]
    shape = rng.random()
    if shape < 0.4:
        ktc = leaf(rng.choice(names))
    elif shape < 0.8:
        ktc = multi([leaf(rng.choice(names)) for _ in range(rng.randint(1, 3))])
    else:
        ktc = multi([multi([leaf(rng.choice(names)) for _ in range(2)]), leaf(rng.choice(names))])
    ktc["engine_id"] = f"engine-{rng.randrange(10**9)}"
    ktc["kv_port"] = rng.randint(10000, 60000)
    doc: dict[str, Any] = {"name": f"deployment-{rng.randrange(10**9)}", "kv_transfer_config": ktc,
                           "disable_hybrid_kv_cache_manager": rng.choice([None, None, None, True, False])}
    if rng.random() < 0.3:
        doc["model"] = {"layer_kinds": rng.sample(["full_attention", "sliding_window", "mamba"], rng.randint(1, 2))}
    return doc


# -- measurement helpers -------------------------------------------------------

def samples(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    gc.disable()
    try:
        for _ in range(n):
            start = time.perf_counter_ns()
            fn()
            out.append((time.perf_counter_ns() - start) / 1000)
    finally:
        gc.enable()
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- sections ----------------------------------------------------------------

def bench_latency(quick: bool) -> list[dict]:
    import jsonschema

    warm_n = 200 if quick else 5000
    cold_n = 5 if quick else 40
    schema_validator = jsonschema.Draft202012Validator(load_schema("deployment"))
    rows = []
    policy = hma_policy.load_policy()
    for name, doc in CASES.items():
        nodes = count_nodes(doc["kv_transfer_config"])
        text = json.dumps(doc)
        for _ in range(20):
            policy.decide(doc)
        n = max(30, warm_n // max(1, nodes // 10))  # fewer samples for the big trees
        warm = samples(lambda: policy.decide(doc), n)
        # Warm over distinct documents of the same shape: the decision cache
        # misses, the step memo answers (a fleet of similar deployments).
        variants = [json.loads(text) for _ in range(n)]  # every one new to the decision cache
        for i, v in enumerate(variants):
            v["kv_transfer_config"]["engine_id"] = f"e{i}"
        it = iter(variants)
        distinct = samples(lambda: policy.decide(next(it)), n)
        cold, loads = [], []
        for _ in range(cold_n):
            # Cold: a policy just loaded (rules compiled, the rule runtime
            # primed with one bare event per step), nothing of any document
            # cached. The load itself is reported beside it.
            start = time.perf_counter_ns()
            fresh = hma_policy.load_policy()
            loads.append((time.perf_counter_ns() - start) / 1e6)
            cold += samples(lambda: fresh.decide(doc), 1)
            fresh.close()
        ktc = doc["kv_transfer_config"]
        base_supports = samples(lambda: vllm_supports_hma_config(ktc), n)
        base_block = samples(lambda: vllm_decide(doc), n)
        parse_json = samples(lambda: json.loads(text), n)
        parse_orjson = samples(lambda: orjson.loads(text), n) if orjson else []
        validate = samples(lambda: schema_validator.is_valid(doc), max(20, n // 10))
        rows.append({
            "case": name, "nodes": nodes,
            "warm_p50_us": statistics.median(warm), "warm_p99_us": pct(warm, 0.99),
            "warm_distinct_p50_us": statistics.median(distinct), "warm_distinct_p99_us": pct(distinct, 0.99),
            "cold_p50_us": statistics.median(cold), "cold_p99_us": pct(cold, 0.99),
            "load_policy_ms": statistics.median(loads),
            "baseline_supports_hma_config_us": statistics.median(base_supports),
            "baseline_vllm_block_us": statistics.median(base_block),
            "floor_json_loads_us": statistics.median(parse_json),
            "floor_orjson_loads_us": statistics.median(parse_orjson) if parse_orjson else None,
            "jsonschema_validate_us": statistics.median(validate),
        })
    return rows


def bench_scaling(quick: bool) -> dict:
    policy = hma_policy.load_policy()
    sizes = [1, 10, 50, 100, 250, 500, 1000]
    n = 5 if quick else 30
    docs: dict[int, list[dict]] = {}
    for size in sizes:
        text = json.dumps({"kv_transfer_config": tree(size) if size > 1 else leaf()})
        # Distinct documents each time: the decision cache must not answer.
        docs[size] = [json.loads(text) for _ in range(n)]
        for i, d in enumerate(docs[size]):
            d["name"] = f"scale-{i}"
    # The sizes are measured in turn, a document of each per round, so that a
    # slow spell of this shared machine falls on every size alike (measured
    # one size after another, the ratio below moved by half between runs).
    values: dict[int, list[float]] = {size: [] for size in sizes}
    for i in range(n):
        for size in sizes:
            values[size] += samples(lambda: policy.decide(docs[size][i]), 1)
    points = []
    for size in sizes:
        nodes = count_nodes(docs[size][0]["kv_transfer_config"])
        median = statistics.median(values[size])
        points.append({"nodes": nodes, "p50_us": median, "per_node_us": median / nodes})
    xs = [p["nodes"] for p in points]
    ys = [p["p50_us"] for p in points]
    mean_x, mean_y = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    by_nodes = {p["nodes"]: p for p in points}
    n100 = min(by_nodes, key=lambda k: abs(k - 100))
    n1000 = max(by_nodes)
    return {"points": points, "slope_us_per_node": slope, "intercept_us": mean_y - slope * mean_x,
            "per_node_ratio_1000_vs_100": by_nodes[n1000]["per_node_us"] / by_nodes[n100]["per_node_us"]}


def bench_cli(quick: bool) -> dict:
    runs = 3 if quick else 15
    example = str(HERE.parent / "examples" / "nixl-pd-decode.json")

    def wall(cmd: list[str]) -> tuple[float, int]:
        times, peak = [], 0
        for _ in range(runs):
            start = time.perf_counter()
            result = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            try:
                peak = max(peak, int(result.stderr.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                pass
        return statistics.median(times) * 1000, peak

    cli_ms, cli_rss = wall([sys.executable, "-m", "hma_policy", "decide", example])
    js_ms, js_rss = wall([sys.executable, "-c", "import jsonschema"])
    py_ms, _ = wall([sys.executable, "-c", "pass"])
    return {"decide_wall_ms": cli_ms, "decide_peak_rss_kib": cli_rss, "import_jsonschema_wall_ms": js_ms,
            "import_jsonschema_peak_rss_kib": js_rss, "python_startup_ms": py_ms, "ratio": cli_ms / js_ms}


def bench_audit(quick: bool) -> dict:
    count = 2000 if quick else 20000
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="hma-fleet-") as tmp:
        for i in range(count):
            Path(tmp, f"d{i:05}.json").write_text(json.dumps(fleet_document(rng)))
        out: dict[str, Any] = {"documents": count, "runs": 1 if quick else 5}
        rates: dict[int, list[float]] = {1: [], 2: []}
        cpu: dict[int, list[float]] = {1: [], 2: []}
        peak: dict[int, list[int]] = {1: [], 2: []}
        # The median of several runs (one run on a shared machine varies by a
        # third), --jobs 1 and 2 in turn so that a slow spell falls on both.
        for _ in range(out["runs"]):
            for jobs in (1, 2):
                cmd = [sys.executable, "-m", "hma_policy", "audit", tmp, "--jobs", str(jobs), "--format", "json", "-o", os.devnull]
                returncode, elapsed, usage, stderr = _run_measured(cmd)
                if "invalid choice: 'audit'" in stderr:
                    return {"documents": count, "note": "n/a: this build has no audit command"}
                rates[jobs].append(count / elapsed)
                # CPU time of the audit and its workers (each waited for by the audit, so counted
                # in its usage), and the peak RSS of the largest of those processes.
                cpu[jobs].append(usage.ru_utime + usage.ru_stime)
                peak[jobs].append(usage.ru_maxrss)
                out[f"jobs_{jobs}_exit"] = returncode
        for jobs in (1, 2):
            out[f"jobs_{jobs}_docs_per_s"] = statistics.median(rates[jobs])
            out[f"jobs_{jobs}_docs_per_s_runs"] = rates[jobs]
            out[f"jobs_{jobs}_cpu_s"] = statistics.median(cpu[jobs])
            out[f"jobs_{jobs}_peak_rss_kib"] = statistics.median(peak[jobs])
        # The floor: reading and parsing the same files, in one process.
        files = sorted(Path(tmp).iterdir())
        start = time.perf_counter()
        for f in files:
            (orjson.loads if orjson else json.loads)(f.read_bytes())
        out["floor_read_parse_docs_per_s"] = count / (time.perf_counter() - start)
        out["stages_us"] = audit_stages(files)
    return out


def _run_measured(cmd: list[str]) -> tuple[int, float, Any, str]:
    """Run ``cmd``: its exit status, wall time, resource usage (its own and
    its waited-for children's: os.wait4) and standard error."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return process.returncode, elapsed, usage, err.read().decode("utf-8", "replace")


def audit_stages(files: list[Path]) -> dict[str, float]:
    """Where an audit's time goes, in µs a file, in one process with a policy
    just loaded (as each audit process starts): each stage through the
    public API, over every file of the fleet, stage after stage."""
    from hma_policy.audit.run import Entry
    from hma_policy.audit.declog import input_digest
    from hma_policy.core.input import DEFAULT_LIMITS
    from hma_policy.audit.sources import read_source

    def per_file(fn: Callable[[Any], Any], items: list) -> tuple[list, float]:
        gc.disable()
        try:
            start = time.perf_counter()
            out = [fn(item) for item in items]
            return out, (time.perf_counter() - start) / len(items) * 1e6
        finally:
            gc.enable()

    sources, read_us = per_file(read_source, [str(f) for f in files])  # an audit passes names as strings
    deployments = [s.deployments[0] for s in sources]
    documents = [d.document for d in deployments]
    # The audit's own two stages (engine/audit.py): validate, then evaluate
    # without decide()'s document cache.
    policy = hma_policy.load_policy()
    with policy._evaluator.fleet_bounds():  # as an audit holds its memos
        checked, validate_us = per_file(lambda d: policy._validated(d, DEFAULT_LIMITS), documents)
        decisions, evaluate_us = per_file(policy._decided, checked)
    policy.close()
    digests, digest_us = per_file(input_digest, documents)
    _, row_us = per_file(lambda i: Entry(deployments[i], decisions[i].to_dict(), digests[i]).to_dict(), list(range(len(files))))
    validator = load_schema_validator()
    _, jsonschema_us = per_file(validator.is_valid, documents)

    def vllm_file(path: Path) -> Any:
        # Baseline (a) as a script over the fleet would run it: read, parse, decide.
        try:
            return vllm_decide(json.loads(path.read_bytes()))
        except ValueError:  # vLLM refuses the configuration
            return "error"
    _, vllm_us = per_file(vllm_file, files)
    return {"read_and_classify": read_us, "validate": validate_us, "evaluate": evaluate_us,
            "digest": digest_us, "report_row": row_us, "total": read_us + validate_us + evaluate_us + digest_us + row_us,
            "jsonschema_alone": jsonschema_us, "read_parse_vllm_check": vllm_us}


def load_schema_validator() -> Any:
    import jsonschema
    schema = load_schema("deployment")
    return jsonschema.Draft202012Validator(schema)


def bench_memory(quick: bool) -> dict:
    n = 20_000 if quick else 1_000_000
    rng = random.Random(5)
    docs = [fleet_document(rng) for _ in range(2000)]
    policy = hma_policy.load_policy()
    for d in docs:
        policy.decide(d)
    before = rss_kib()
    start = time.perf_counter()
    for i in range(n):
        policy.decide(docs[i % len(docs)])
    elapsed = time.perf_counter() - start
    after = rss_kib()
    return {"decisions": n, "rss_before_kib": before, "rss_after_kib": after,
            "growth_pct": (after - before) / before * 100, "decisions_per_s": n / elapsed}


# -- report --------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: small counts, every figure")
    parser.add_argument("--output", default=str(HERE / "results.json"))
    args = parser.parse_args()
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
               "processor": platform.processor() or platform.machine(), "quick": args.quick}
    results: dict[str, Any] = {"machine": machine}
    results["latency"] = bench_latency(args.quick)
    results["scaling"] = bench_scaling(args.quick)
    results["cli"] = bench_cli(args.quick)
    # Memory first: the audit's stage figures leave a larger heap behind,
    # which would make the RSS baseline of the memory figure depend on them.
    results["memory"] = bench_memory(args.quick)
    results["audit"] = bench_audit(args.quick)
    Path(args.output).write_text(json.dumps(results, indent=2))
    print(render(results))


def _runs(count: int) -> str:
    return f"median of {count} runs" if count > 1 else "one run"


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [f"machine: {m['cpus']} CPUs, {m['processor']}, Python {m['python']}{' (quick mode)' if m['quick'] else ''}", ""]
    lines.append("decide() latency in µs (median; p99 in brackets), with baselines from the same run")
    lines.append("| case | nodes | warm | warm, distinct docs | cold | vLLM supports_hma_config | vLLM HMA block | json.loads | orjson.loads | jsonschema | warm / supports_hma_config |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in r["latency"]:
        orj = f"{row['floor_orjson_loads_us']:.1f}" if row["floor_orjson_loads_us"] is not None else "n/a"
        lines.append(
            f"| {row['case']} | {row['nodes']} | {row['warm_p50_us']:.1f} ({row['warm_p99_us']:.1f}) "
            f"| {row['warm_distinct_p50_us']:.0f} ({row['warm_distinct_p99_us']:.0f}) | {row['cold_p50_us']:.0f} ({row['cold_p99_us']:.0f}) "
            f"| {row['baseline_supports_hma_config_us']:.1f} | {row['baseline_vllm_block_us']:.1f} | {row['floor_json_loads_us']:.1f} | {orj} "
            f"| {row['jsonschema_validate_us']:.0f} | {row['warm_p50_us'] / row['baseline_supports_hma_config_us']:.2f}x |")
    loads = [row["load_policy_ms"] for row in r["latency"] if "load_policy_ms" in row]
    if loads:
        lines += ["", f"cold = the first decide() on a policy just loaded; load_policy() itself: {statistics.median(loads):.1f} ms median "
                  f"(target for cold 8-leaf decide: <= 2,000 µs)"]
    s = r["scaling"]
    lines += ["", f"cost against node count (distinct documents): slope {s['slope_us_per_node']:.1f} µs/node, "
              f"intercept {s['intercept_us']:.0f} µs; per-node cost at 1,000 nodes / at 100 nodes = {s['per_node_ratio_1000_vs_100']:.2f}x (target <= 1.2x)"]
    lines.append("  " + ", ".join(f"{p['nodes']}: {p['p50_us']:.0f} µs" for p in s["points"]))
    c = r["cli"]
    lines += ["", f"hma-policy decide FILE: {c['decide_wall_ms']:.0f} ms wall, peak RSS {c['decide_peak_rss_kib'] / 1024:.1f} MiB; "
              f"python -c 'import jsonschema': {c['import_jsonschema_wall_ms']:.0f} ms ({c['import_jsonschema_peak_rss_kib'] / 1024:.1f} MiB); "
              f"ratio {c['ratio']:.2f}x (target <= 1.5x); bare python start {c['python_startup_ms']:.0f} ms"]
    a = r["audit"]
    if "note" in a:
        lines += ["", f"audit of {a['documents']} generated documents: {a['note']}"]
    else:
        lines += ["", f"audit of {a['documents']} generated JSON documents ({_runs(a.get('runs', 1))}): --jobs 1 {a['jobs_1_docs_per_s']:,.0f} docs/s, "
                  f"--jobs 2 {a['jobs_2_docs_per_s']:,.0f} docs/s (target >= 20,000); read+parse floor {a['floor_read_parse_docs_per_s']:,.0f} docs/s"]
        if "jobs_2_cpu_s" in a:
            # No schedule of that much CPU work on this many CPUs ends sooner than CPU time / CPUs.
            cpus = max(1, min(2, r["machine"]["cpus"] or 1))
            lines.append(f"  CPU time (the audit and its workers): --jobs 1 {a['jobs_1_cpu_s']:.2f} s, --jobs 2 {a['jobs_2_cpu_s']:.2f} s; "
                         f"on {cpus} CPUs --jobs 2 cannot end in less than {a['jobs_2_cpu_s'] / cpus:.2f} s, "
                         f"a bound of {a['documents'] * cpus / a['jobs_2_cpu_s']:,.0f} docs/s")
        if "jobs_2_peak_rss_kib" in a:
            lines.append(f"  peak RSS (the largest of the audit's processes): --jobs 1 {a['jobs_1_peak_rss_kib'] / 1024:.0f} MiB, "
                         f"--jobs 2 {a['jobs_2_peak_rss_kib'] / 1024:.0f} MiB")
        st = a["stages_us"]
        floor_us = 1e6 / a["floor_read_parse_docs_per_s"]
        lines.append(f"  per file in one process, cold policy: read and classify {st['read_and_classify']:.0f} µs, validate {st['validate']:.0f}, "
                     f"evaluate {st['evaluate']:.0f}, digest {st['digest']:.0f}, report row {st['report_row']:.0f}; "
                     f"total {st['total']:.0f} µs = {st['total'] / floor_us:.0f}x the read+parse floor ({floor_us:.0f} µs), "
                     f"{st['total'] / st['read_parse_vllm_check']:.1f}x reading, parsing and vLLM's check (transcribed) "
                     f"({st['read_parse_vllm_check']:.0f} µs), {st['total'] / st['jsonschema_alone']:.2f}x jsonschema validation "
                     f"alone ({st['jsonschema_alone']:.0f} µs)")
    mem = r["memory"]
    lines += ["", f"memory: {mem['decisions']:,} warm decisions ({mem['decisions_per_s']:,.0f}/s): RSS {mem['rss_before_kib']} -> "
              f"{mem['rss_after_kib']} KiB ({mem['growth_pct']:+.2f}%, target < 5%)"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
