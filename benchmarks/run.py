"""hma-policy benchmarks: every figure beside its baseline and target, measured in one run, for one or more builds.

    python benchmarks/run.py                     # this build (the Python running this), 3 rounds
    python benchmarks/run.py --quick             # smoke mode for CI: every figure, small counts, one round
    python benchmarks/run.py --against pure=/venvs/pure/bin/python --against today=/work/venv-old/bin/python

Each build is measured by the same code: benchmarks/worker.py, run by that
build's Python, prints its figures as JSON; the command-line figures (decide,
audit, rules check) run that build's `hma-policy`. The builds take turns
within each round, so that a slow spell of this shared machine falls on all of
them; a figure is the median of its rounds. One table shows a column per
build, the ratio of this build to each other, and the target, judged for this
build. Targets that compare with today's build use the build labelled
`today` (LABEL=PYTHON; without a label, a build is named after its venv).

Nothing here is a pass/fail test (the exit status is 0 whatever the figures):
these machines are shared and noisy, so read the ratios, measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from documents import CASES, FIRST_CASE, write_fleet, write_scaled_registry  # noqa: E402

# The floor of an audit: one process that reads and parses every file, and nothing else.
FLOOR = """
import os, sys
from {module} import loads
folder = sys.argv[1]
for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as handle:
        loads(handle.read())
"""
# The rules-check figure may need more memory than a shared machine has: capped.
CHECK_MEMORY = 4 << 30


class Build(NamedTuple):
    label: str
    python: str

    @property
    def cli(self) -> str:
        """The build's `hma-policy` console script, beside its Python."""
        return str(Path(self.python).with_name("hma-policy"))

    def worker(self, section: str, *options: str) -> dict:
        result = subprocess.run([self.python, str(HERE / "worker.py"), section, *options],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"{self.label}: worker {section} failed:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout)


def build_of(spec: str) -> Build:
    """LABEL=PYTHON, or PYTHON (named after its venv: the folder that holds bin/)."""
    label, _, python = spec.rpartition("=")
    return Build(label or Path(python).absolute().parent.parent.name, python)


class Measured(NamedTuple):
    """How a command ran: its exit status, wall time, resource usage and output (both streams)."""

    returncode: int
    seconds: float
    cpu_seconds: float
    peak_rss_kib: int
    output: str


def measured(cmd: list[str], *, timeout: float | None = None, memory: int | None = None) -> Measured | None:
    """Run ``cmd`` (None: it ran over ``timeout``, and was killed). Its
    resource usage (os.wait4) includes the children it waited for (an
    audit's workers); the peak RSS is the largest process's."""
    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, preexec_fn=limit if memory else None)
        pid, status, usage = os.wait4(process.pid, 0 if timeout is None else os.WNOHANG)
        while pid == 0:  # polled only where a timeout is set (the rules check, measured in seconds)
            if time.perf_counter() - start > timeout:
                process.kill()  # SIGKILL: a rule runtime busy in C may never see SIGTERM
                os.wait4(process.pid, 0)
                process.returncode = -9
                return None
            time.sleep(0.05)
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return Measured(process.returncode, elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
                        err.read().decode("utf-8", "replace"))


def run(cmd: list[str]) -> Measured:
    """``measured``, for a command without a timeout."""
    result = measured(cmd)
    assert result is not None
    return result


# -- what each round measures, per build -------------------------------------------

def cli_figures(builds: list[Build], runs: int) -> dict[str, dict[str, float]]:
    """`hma-policy decide FILE`, `python -c 'import jsonschema'` and `python -c pass`
    of each build, the builds and commands taking turns."""
    example = str(HERE.parent / "examples" / "nixl-pd-decode.json")
    commands = {"decide": lambda b: [b.cli, "decide", example], "import_jsonschema": lambda b: [b.python, "-c", "import jsonschema"],
                "python": lambda b: [b.python, "-c", "pass"]}
    out: dict[str, dict[str, list[float]]] = {b.label: {} for b in builds}
    for _ in range(runs):
        for build in builds:
            for name, command in commands.items():
                done = run(command(build))
                for key, value in ((f"{name}_ms", done.seconds * 1000), (f"{name}_cpu_ms", done.cpu_seconds * 1000),
                                   (f"{name}_peak_rss_kib", done.peak_rss_kib)):
                    out[build.label].setdefault(key, []).append(value)
    figures = {}
    for label, values in out.items():
        figures[label] = {key: statistics.median(v) for key, v in values.items()}
        figures[label]["decide_vs_jsonschema"] = figures[label]["decide_ms"] / figures[label]["import_jsonschema_ms"]
        figures[label]["decide_vs_jsonschema_cpu"] = figures[label]["decide_cpu_ms"] / figures[label]["import_jsonschema_cpu_ms"]
    return figures


def audit_figures(builds: list[Build], fleet: Path, count: int, report: Path) -> tuple[dict[str, dict[str, float]], dict]:
    """Each build's audit of the fleet with --jobs 1 and 2, and the floor, taking turns."""
    figures: dict[str, dict[str, float]] = {b.label: {} for b in builds}
    floors = []
    for jobs in (1, 2):
        for build in builds:
            audit = run([build.cli, "audit", str(fleet), "--jobs", str(jobs), "--format", "json", "-o", str(report)])
            if not report.exists() or report.stat().st_size == 0:
                raise SystemExit(f"{build.label}: the audit wrote no report (exit {audit.returncode}):\n{audit.output[-2000:]}")
            report.unlink()
            figures[build.label][f"jobs_{jobs}_docs_per_s"] = count / audit.seconds
            figures[build.label][f"jobs_{jobs}_cpu_s"] = audit.cpu_seconds
            figures[build.label][f"jobs_{jobs}_peak_rss_kib"] = audit.peak_rss_kib
        floors.append(floor_figures(builds[0].python, fleet, count))
    return figures, {key: statistics.median(f[key] for f in floors) for key in floors[0]}


def floor_figures(python: str, fleet: Path, count: int) -> dict[str, float]:
    """The floor: one process that reads and parses each file, with orjson (as
    the audit parses) and with the standard library's json."""
    figures = {}
    for module in ("orjson", "json"):
        floor = run([python, "-c", FLOOR.format(module=module), str(fleet)])
        if floor.returncode != 0:
            raise SystemExit(f"the read+parse floor failed:\n{floor.output[-2000:]}")
        figures[f"{module}_docs_per_s"] = count / floor.seconds
        figures[f"{module}_cpu_s"] = floor.cpu_seconds
    return figures


def check_figures(build: Build, rules: Path, sizes: list[int], timeout: float, scratch: Path) -> dict[str, Any]:
    """`rules check` of the build's bundled rules with ``size`` more registry
    entries, each with 2 conditional cases; after the first size over the
    timeout (or the memory cap), the larger ones are not tried."""
    out: dict[str, Any] = {}
    stopped = None
    for size in sizes:
        if stopped is not None and size > stopped:
            out[str(size)] = {"status": "skipped", "seconds": None}
            continue
        folder = scratch / f"{build.label}-{size}"
        write_scaled_registry(rules, folder, size)
        check = measured([build.cli, "rules", "check", str(folder)], timeout=timeout, memory=CHECK_MEMORY)
        if check is None:
            out[str(size)] = {"status": f"over {timeout:.0f} s", "seconds": None}
        elif check.returncode == 0:
            out[str(size)] = {"status": "ok", "seconds": check.seconds}
        elif "MemoryError" in check.output or check.returncode < 0:
            out[str(size)] = {"status": f"out of memory (capped at {CHECK_MEMORY >> 30} GiB)", "seconds": check.seconds}
        else:
            codes = sorted({word.rstrip(":") for line in check.output.splitlines() for word in line.split()
                            if word.startswith("rules.")})
            out[str(size)] = {"status": "refused: " + ", ".join(codes or [f"exit {check.returncode}"]), "seconds": check.seconds}
        if check is None or out[str(size)]["status"].startswith("out of memory"):
            stopped = size
    return out


# -- the run ------------------------------------------------------------------------

def measure(builds: list[Build], quick: bool, rounds: int) -> dict[str, Any]:
    flag = ["--quick"] if quick else []
    results: dict[str, Any] = {"builds": {b.label: {"python": b.python, **b.worker("info")} for b in builds}}
    per_round: dict[str, list[dict]] = {b.label: [] for b in builds}
    floors: list[dict] = []
    count = 2000 if quick else 20000
    with tempfile.TemporaryDirectory(prefix="hma-bench-") as tmp:
        fleet = Path(tmp, "fleet")
        fleet.mkdir()
        write_fleet(fleet, count)
        report = Path(tmp, "report.json")
        for index in range(rounds):
            for build in builds:
                print(f"round {index + 1}/{rounds}: {build.label}", file=sys.stderr, flush=True)
                figures: dict[str, Any] = {}
                refs = ["--references"] if build is builds[0] and index == 0 else []
                figures["latency"] = build.worker("latency", *flag, *refs)
                colds = [build.worker("cold") for _ in range(3 if quick else 5)]
                figures["cold"] = {k: statistics.median(c[k] for c in colds) for k in colds[0]}
                if index == 0:  # once: long, or steady from run to run
                    figures["memory"] = build.worker("memory", *flag)
                    figures["stages"] = build.worker("stages", "--fleet", str(fleet))
                per_round[build.label].append(figures)
            print(f"round {index + 1}/{rounds}: commands", file=sys.stderr, flush=True)
            for label, figures in cli_figures(builds, 3 if quick else 5).items():
                per_round[label][-1]["cli"] = figures
            audits, floor = audit_figures(builds, fleet, count, report)
            for label, figures in audits.items():
                per_round[label][-1]["audit"] = figures
            floors.append(floor)
        scratch = Path(tmp, "rules")
        scratch.mkdir()
        sizes = [1000] if quick else [1000, 1, 4, 16, 64, 200]
        for build in builds:
            print(f"rules check at scale: {build.label}", file=sys.stderr, flush=True)
            per_round[build.label][0]["check"] = check_figures(
                build, Path(results["builds"][build.label]["rules"]), sizes, 20 if quick else 120, scratch)
    results["rounds"] = per_round
    results["floor"] = floors
    results["audit_documents"] = count
    return results


def median_of(rounds: list[dict], path: tuple) -> Any:
    """The median over the rounds that hold ``path`` (None if none does)."""
    values = []
    for figures in rounds:
        value: Any = figures
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            values.append(value)
    return statistics.median(values) if values else None


# -- the table --------------------------------------------------------------------------

class Row(NamedTuple):
    figure: str
    unit: str
    value: Callable[[list[dict], list[dict]], float | None]  # (a build's rounds, the floors) -> the figure
    target: str = ""
    met: Callable[[float, dict[str, float | None]], bool | None] | None = None  # (this, every build's) -> met?


def at(*path: Any) -> Callable[[list[dict], list[dict]], Any]:
    return lambda rounds, floors: median_of(rounds, path)


def ratio(top: Callable, bottom: Callable) -> Callable[[list[dict], list[dict]], float | None]:
    def value(rounds: list[dict], floors: list[dict]) -> float | None:
        a, b = top(rounds, floors), bottom(rounds, floors)
        return a / b if a is not None and b else None
    return value


def no_worse_than_today(this: float, builds: dict[str, float | None]) -> bool | None:
    today = builds.get("today")
    return None if today is None else this <= today


def rows() -> list[Row]:
    first = ("latency", "cases", FIRST_CASE)
    fresh, second = at("cold", "first_decide_cpu"), at("cold", "first_decide_after_reload_cpu")
    warm_a, warm_b = at(*first, "same_facts", "cpu"), at(*first, "new_facts", "cpu")
    out = [
        Row("load_policy(), further loads in a process", "ms", at("cold", "load_cpu"), "<= 30", lambda v, _: v <= 30),
        Row("load_policy(), the first in a process", "ms", at("cold", "first_load_cpu"), "<= 30", lambda v, _: v <= 30),
        Row(f"first decide() after a load, fresh process ({FIRST_CASE})", "µs", fresh),
        Row("first decide() after a load, second load in a process", "µs", second),
        Row("  fresh process: first / warm (b) new facts", "x", ratio(fresh, warm_b), "<= 2", lambda v, _: v <= 2),
        Row("  fresh process: first / warm (a) same facts", "x", ratio(fresh, warm_a)),
        Row("  second load: first / warm (b) new facts", "x", ratio(second, warm_b), "<= 2", lambda v, _: v <= 2),
        Row("  second load: first / warm (a) same facts", "x", ratio(second, warm_a)),
    ]
    for case in CASES:
        for kind, label in (("repeated", "same document"), ("same_facts", "distinct, (a) same facts"),
                            ("new_facts", "distinct, (b) new facts")):
            if kind == "new_facts" and case in ("single connector", "single unsupported", "multi, 2 children"):
                continue
            out.append(Row(f"warm decide(), {case}: {label}", "µs", at("latency", "cases", case, kind, "cpu"),
                           "<= today", no_worse_than_today))
    out += [
        Row("cost per node, slope (distinct documents, 1 to 1000 nodes)", "µs", at("latency", "scaling", "slope_us_per_node")),
        Row("per-node cost at 1000 nodes / at 100", "x", at("latency", "scaling", "per_node_ratio_1000_vs_100"),
            "<= 1.2", lambda v, _: v <= 1.2),
        Row("hma-policy decide FILE, wall", "ms", at("cli", "decide_ms")),
        Row("python -c 'import jsonschema', wall", "ms", at("cli", "import_jsonschema_ms")),
        Row("  decide FILE / import jsonschema, wall", "x", at("cli", "decide_vs_jsonschema"), "<= 1.5", lambda v, _: v <= 1.5),
        Row("hma-policy decide FILE, CPU", "ms", at("cli", "decide_cpu_ms")),
        Row("python -c 'import jsonschema', CPU", "ms", at("cli", "import_jsonschema_cpu_ms")),
        Row("  decide FILE / import jsonschema, CPU", "x", at("cli", "decide_vs_jsonschema_cpu"), "<= 1.5", lambda v, _: v <= 1.5),
        Row("python -c pass, wall", "ms", at("cli", "python_ms")),
        Row("hma-policy decide FILE, peak RSS", "MiB", lambda r, f: _mib(median_of(r, ("cli", "decide_peak_rss_kib")))),
        Row("audit --jobs 1", "docs/s", at("audit", "jobs_1_docs_per_s")),
        Row("audit --jobs 2", "docs/s", at("audit", "jobs_2_docs_per_s")),
        Row("floor: one process reads + parses (orjson)", "docs/s", lambda r, f: median_of(f, ("orjson_docs_per_s",))),
        Row("floor: one process reads + parses (json)", "docs/s", lambda r, f: median_of(f, ("json_docs_per_s",))),
        Row("  audit --jobs 2 / floor (orjson)", "x",
            lambda r, f: _div(median_of(r, ("audit", "jobs_2_docs_per_s")), median_of(f, ("orjson_docs_per_s",))),
            ">= 0.25", lambda v, _: v >= 0.25),
        Row("  audit --jobs 2 / floor (json)", "x",
            lambda r, f: _div(median_of(r, ("audit", "jobs_2_docs_per_s")), median_of(f, ("json_docs_per_s",)))),
        Row("  the same from CPU time: floor's CPU / (audit's CPU / 2)", "x",
            lambda r, f: _div(2 * median_of(f, ("orjson_cpu_s",)), median_of(r, ("audit", "jobs_2_cpu_s")))),
        Row("audit CPU time, --jobs 1", "s", at("audit", "jobs_1_cpu_s")),
        Row("audit CPU time, --jobs 2 (with its workers)", "s", at("audit", "jobs_2_cpu_s")),
        Row("audit peak RSS (largest process), --jobs 2", "MiB", lambda r, f: _mib(median_of(r, ("audit", "jobs_2_peak_rss_kib")))),
    ]
    for stage in ("read_and_classify", "prepare", "decide_prepared", "digest", "total"):
        out.append(Row(f"audit stage per file, one process: {stage}", "µs", at("stages", stage)))
    out += [
        Row("memory: warm decisions", "count", at("memory", "decisions")),
        Row("memory: RSS growth over them", "%", at("memory", "growth_pct"), "< 5", lambda v, _: v < 5),
        Row("memory: RSS after them", "MiB", lambda r, f: _mib(median_of(r, ("memory", "rss_after_kib")))),
        Row("memory: decisions per CPU second (2,000 fleet documents in turn)", "/s", at("memory", "decisions_per_cpu_s")),
    ]
    return out


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _mib(kib: float | None) -> float | None:
    return None if kib is None else kib / 1024


def _show(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def render(results: dict[str, Any]) -> str:
    labels = list(results["rounds"])
    this = labels[0]
    machine = results["machine"]
    lines = [f"machine: {machine['cpus']} CPUs, {machine['processor']}, Python {machine['python']}, load average "
             f"{machine['load_before']} before the run; {machine['rounds']} round(s){' (quick mode)' if machine['quick'] else ''}"]
    for label, info in results["builds"].items():
        kind = "compiled: " + ", ".join(info["compiled"]) if info["compiled"] else "pure Python"
        lines.append(f"  {label}{' (this build)' if label == this else ''}: {info['package']} ({kind})")
    lines += ["", "Times in µs and ms are CPU time of the measured process (on a shared machine its wall time includes "
              "waiting for a CPU); rows that say wall, and docs/s, are wall-clock. Each figure: the median of its rounds.", ""]
    header = ["figure", "unit", *labels, *[f"{this} / {other}" for other in labels[1:]], "target", f"{this}: met?"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    verdicts = []
    for row in rows():
        values = {label: row.value(results["rounds"][label], results["floor"]) for label in labels}
        ratios = [_div(values[this], values[other]) for other in labels[1:]]
        verdict = ""
        if row.met is not None and values[this] is not None:
            met = row.met(values[this], values)
            verdict = "n/a" if met is None else ("yes" if met else "**no**")
            verdicts.append(None if met is None else f"  {'met   ' if met else 'MISSED'} {row.figure.strip()}: "
                            f"{_show(values[this])} {row.unit} (target {row.target})")
        cells = [row.figure, row.unit, *(_show(values[label]) for label in labels),
                 *(f"{r:.2f}x" if r is not None else "n/a" for r in ratios), row.target, verdict]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"rules check, bundled rules plus N registry entries of 2 conditional cases each (target: 1,000 in < 30 s):"]
    for label in labels:
        check = results["rounds"][label][0].get("check", {})
        shown = [f"{n}: {c['seconds']:.1f} s" if c["status"] == "ok" else
                 f"{n}: {c['status']}" + (f" after {c['seconds']:.1f} s" if c["seconds"] is not None else "")
                 for n, c in check.items()]
        lines.append(f"  {label}: " + "; ".join(shown))
    refs = results["rounds"][this][0]["latency"]["cases"]
    lines += ["", "references, same documents, same run (µs): vLLM's supports_hma_config (transcribed) | vLLM's HMA block "
              "(transcribed) | json.loads | orjson.loads | jsonschema is_valid"]
    for case, row in refs.items():
        r = row.get("references")
        if r:
            lines.append(f"  {case}: " + " | ".join(_show(r[k]) for k in
                                                    ("vllm_supports_hma_config", "vllm_hma_block", "json_loads",
                                                     "orjson_loads", "jsonschema_is_valid")))
    lines += ["", f"targets, {this}:", *(v for v in verdicts if v)]
    if None in verdicts:
        lines.append(f"  ({verdicts.count(None)} more compare with today's build: give it as --against today=PYTHON)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: small counts, one round, every figure")
    parser.add_argument("--against", action="append", default=[], metavar="[LABEL=]PYTHON",
                        help="another build to measure in the same run (its Python); `today=...` is the one "
                             "'no worse than today' is judged against")
    parser.add_argument("--label", default="this", help="this build's name in the table (default: this)")
    parser.add_argument("--rounds", type=int, help="how many times each build is measured (default 3; 1 with --quick)")
    parser.add_argument("--output", default=str(HERE / "results.json"), help="where the figures go, as JSON")
    args = parser.parse_args()
    this = Build(args.label, sys.executable)
    builds = [this, *(build_of(spec) for spec in args.against)]
    if len({b.label for b in builds}) != len(builds):
        parser.error("two builds have the same label: name them LABEL=PYTHON")
    rounds = args.rounds or (1 if args.quick else 3)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results = measure(builds, args.quick, rounds)
    results["machine"] = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine(), "quick": args.quick,
                          "rounds": rounds, "load_before": load}
    results["command"] = " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])
    Path(args.output).write_text(json.dumps(results, indent=2))
    print(render(results))


if __name__ == "__main__":
    main()
