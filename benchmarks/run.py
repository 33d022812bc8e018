"""hma-policy benchmarks: every figure beside its baseline and target, measured in one run, for one or more builds.

    python benchmarks/run.py                     # this build (the Python running this), 3 rounds
    python benchmarks/run.py --quick             # smoke mode for CI: every figure, small counts, one round
    python benchmarks/run.py --against old=/work/venv-old/bin/python --against pure=/venvs/pure/bin/python

Each build is measured by the same code: benchmarks/worker.py, run by that
build's Python, prints its figures as JSON; the command-line figures (decide,
audit, rules check) run that build's `hma-policy`. The builds take turns
within each round, so that a slow spell of this shared machine falls on all of
them; a figure is the median of its rounds. One table shows a column per
build, the ratio of this build to each other, a baseline measured in the same
run (what the same work costs without the engine: vLLM's own check, parsing,
jsonschema, a process that only reads the files), and the target, judged for
this build. Targets of the kind "no worse" compare with the first --against
build (LABEL=PYTHON; without a label, a build is named after its venv).
docs/performance.md says what each figure measures.

Nothing here is a pass/fail test (the exit status is 0 whatever the figures):
these machines are shared and noisy, so read the ratios, measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

HERE = Path(__file__).resolve().parent
# documents.py is found beside this script, which Python puts first on
# sys.path. (A test that imports this module puts benchmarks/ last: its
# http.py must not hide the standard library's.)
from documents import CASES, FIRST_CASE, UNRELATED_CASE, count_nodes, write_fleet, write_scaled_registry  # noqa: E402

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
# Issue 19: the checker's time for this many conditional registry entries.
CHECK_TARGET = 1000


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
    """Each build's audit of the fleet with --jobs 1 and 2, and of one of its
    files alone (what an audit costs whatever its size: start-up, the
    policy's load, the report), and the floor, taking turns."""
    figures: dict[str, dict[str, float]] = {b.label: {} for b in builds}
    floors = []
    one = fleet.with_name("one-file")
    one.mkdir(exist_ok=True)
    shutil.copy(next(iter(sorted(fleet.iterdir()))), one)
    for build in builds:
        audit = run([build.cli, "audit", str(one), "--format", "json", "-o", str(report)])
        if not report.exists():
            raise SystemExit(f"{build.label}: the audit of one file wrote no report (exit {audit.returncode}):\n"
                             f"{audit.output[-2000:]}")
        report.unlink()
        figures[build.label]["one_file_s"] = audit.seconds
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
        figures[f"{module}_s"] = floor.seconds
        figures[f"{module}_cpu_s"] = floor.cpu_seconds
    return figures


def check_figures(build: Build, rules: Path, sizes: list[int], timeout: float, scratch: Path) -> dict[str, Any]:
    """`rules check` of a copy of the build's bundled rules with ``size`` more
    registry entries, each with 2 conditional cases (0: the bundled rules
    alone, the baseline); after a size that ran over the timeout or the
    memory cap, larger ones are not tried. Seconds are CPU time."""
    out: dict[str, Any] = {}
    stopped = None
    # A bundle of releases holds several registries: scale the plain folder
    # of the default release that `rules init` writes, where the build has it.
    plain = scratch / f"{build.label}-plain"
    if run([build.cli, "rules", "init", str(plain)]).returncode == 0:
        rules = plain
    for size in sizes:
        if stopped is not None and size > stopped:
            out[str(size)] = {"status": "not tried", "seconds": None}
            continue
        folder = scratch / f"{build.label}-{size}"
        try:
            write_scaled_registry(rules, folder, size)
        except ValueError as exc:  # a layout this benchmark cannot scale
            out[str(size)] = {"status": f"n/a: {exc}", "seconds": None}
            continue
        check = measured([build.cli, "rules", "check", str(folder)], timeout=timeout, memory=CHECK_MEMORY)
        if check is None:
            out[str(size)] = {"status": f"over {timeout:.0f} s", "seconds": None}
        elif check.returncode == 0:
            out[str(size)] = {"status": "ok", "seconds": check.cpu_seconds, "wall_seconds": check.seconds,
                              "peak_rss_kib": check.peak_rss_kib}
        else:
            out[str(size)] = {"status": failure(check), "seconds": check.cpu_seconds, "peak_rss_kib": check.peak_rss_kib}
        if check is None or out[str(size)]["status"].startswith("out of memory"):
            stopped = size
    return out


def failure(check: Measured) -> str:
    """Why `rules check` did not pass: the rule codes it refused the rules
    with, or running out of the memory cap (the rule runtime may then fail
    with an error of its own), or its last line."""
    if "MemoryError" in check.output or check.returncode < 0 or check.peak_rss_kib * 1024 > 0.9 * CHECK_MEMORY:
        return f"out of memory (capped at {CHECK_MEMORY >> 30} GiB)"
    codes = sorted({word.rstrip(":") for line in check.output.splitlines() for word in line.split()
                    if word.startswith("rules.")})
    if codes:
        return "refused: " + ", ".join(codes)
    last = check.output.strip().splitlines()[-1:] or [""]
    return f"exit {check.returncode}: {last[0][:120]}"


# -- the run ------------------------------------------------------------------------

def measure(builds: list[Build], quick: bool, rounds: int) -> dict[str, Any]:
    flag = ["--quick"] if quick else []
    results: dict[str, Any] = {"builds": {b.label: {"python": b.python, **b.worker("info")} for b in builds}}
    print("references (this build's Python)", file=sys.stderr, flush=True)
    results["references"] = builds[0].worker("references", *flag)
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
                figures: dict[str, Any] = {"latency": build.worker("latency", *flag)}
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
        # The target's size first; then the baseline (0) and the sizes that show the growth.
        sizes = [CHECK_TARGET, 0, 1] if quick else [CHECK_TARGET, 0, 1, 4, 16, 64, 200]
        for build in builds:
            print(f"rules check at scale: {build.label}", file=sys.stderr, flush=True)
            per_round[build.label][0]["check"] = check_figures(
                build, Path(results["builds"][build.label]["rules"]), sizes, 60 if quick else 120, scratch)
    results["rounds"] = per_round
    results["floor"] = floors
    results["audit_documents"] = count
    return results


# -- the table --------------------------------------------------------------------------

# A figure of a build: (the results, the build's label) -> its value (a
# status text where a command did not give one; None: not measured).
Figure = Callable[[dict, str], Any]


def at(*path: Any) -> Figure:
    """The median over the build's rounds of the figure at ``path``."""
    return lambda results, label: median_of(results["rounds"][label], path)


def median_of(rounds: list[dict], path: tuple) -> Any:
    """The median over the rounds that hold ``path`` (None if none does)."""
    values = [value for value in (dig(figures, path) for figures in rounds) if isinstance(value, (int, float))]
    return statistics.median(values) if values else None


def dig(value: Any, path: tuple) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def reference(*path: Any) -> Figure:
    """A figure of the references section (measured once, by this build's Python)."""
    return lambda results, label: dig(results["references"], path)


def floor(key: str) -> Figure:
    """The read+parse floor's figure (measured once a round, by this build's Python)."""
    return lambda results, label: median_of(results["floor"], (key,))


def scaled(figure: Figure, factor: float) -> Figure:
    return lambda results, label: _div(figure(results, label), 1 / factor)


def checked(size: int) -> Figure:
    """`rules check` at ``size`` more entries: CPU seconds, or what happened instead."""
    def value(results: dict, label: str) -> Any:
        check = dig(results["rounds"][label][0], ("check", str(size)))
        if check is None:
            return None
        return check["seconds"] if check["status"] == "ok" else check["status"]
    return value


class Judged(NamedTuple):
    """What a target is judged on: this build's figure, its baseline, and the
    reference build's figure (the first --against; None without one)."""

    value: Any
    baseline: float | None
    reference: float | None


class Target(NamedTuple):
    text: str
    met: Callable[[Judged], bool | None]  # None: cannot be judged in this run


def at_most(limit: float) -> Target:
    return Target(f"<= {limit:g}", lambda j: j.value <= limit)


def below(limit: float) -> Target:
    return Target(f"< {limit:g}", lambda j: j.value < limit)


def baseline_times_at_most(factor: float) -> Target:
    return Target(f"<= {factor:g}x baseline", lambda j: None if not j.baseline else j.value / j.baseline <= factor)


def baseline_times_at_least(factor: float) -> Target:
    return Target(f">= {factor:g}x baseline", lambda j: None if not j.baseline else j.value / j.baseline >= factor)


NO_WORSE = Target("<= reference build", lambda j: None if j.reference is None else j.value <= j.reference)


class Row(NamedTuple):
    figure: str
    unit: str
    value: Figure
    baseline: tuple[str, Figure] | None = None  # what the same work costs otherwise, measured in this run
    target: Target | None = None


LARGE, MEDIUM = "1000-node tree", "100-node tree"


def rows() -> list[Row]:
    warm_b = ("warm decide(), distinct, (b) new facts", at("latency", "cases", FIRST_CASE, "new_facts", "cpu"))
    rules_yaml = ("YAML parse of the rule files", reference("rules_yaml_ms"))
    nodes = {case: count_nodes(CASES[case]["kv_transfer_config"]) for case in (MEDIUM, LARGE)}
    vllm_per_node = {case: scaled(reference("cases", case, "vllm_hma_block"), 1 / nodes[case]) for case in nodes}
    out = [
        Row("load_policy(), the first in a process", "ms", at("cold", "first_load_cpu"), rules_yaml, at_most(30)),
        Row("load_policy(), further loads in a process", "ms", at("cold", "load_cpu"), rules_yaml, at_most(30)),
        Row(f"first decide() after a load, fresh process ({FIRST_CASE})", "µs", at("cold", "first_decide_cpu"),
            warm_b, baseline_times_at_most(2)),
        Row(f"first decide() after a second load in a process ({FIRST_CASE})", "µs",
            at("cold", "first_decide_after_reload_cpu"), warm_b, baseline_times_at_most(2)),
        # Not a target: with the CPU's caches warmed by one unrelated decision, what is left of the
        # first decision's cost is computing each node's answer (docs/performance.md).
        Row(f"first decide() after a load and one decision of {UNRELATED_CASE} ({FIRST_CASE})", "µs",
            at("cold", "first_decide_after_another_cpu"), warm_b, None),
        # Not a target: the same work as a warm decision (b), after a 64 MiB write flushed the
        # CPU's caches; the part of a first decision that no design of the engine removes.
        Row(f"warm decide() (b) right after the CPU's caches are flushed ({FIRST_CASE})", "µs",
            at("cold", "warm_decide_after_flush_cpu"), warm_b, None),
    ]
    for case in CASES:
        vllm = ("vLLM's check, same document", reference("cases", case, "vllm_hma_block"))
        for kind, label in (("repeated", "same document"), ("same_facts", "distinct, (a) same facts"),
                            ("new_facts", "distinct, (b) new facts")):
            if kind == "new_facts" and case in ("single connector", "single unsupported", "multi, 2 children"):
                continue
            out.append(Row(f"warm decide(), {case}: {label}", "µs", at("latency", "cases", case, kind, "cpu"),
                           vllm, NO_WORSE))
    vllm_growth = lambda results, label: _div(vllm_per_node[LARGE](results, label), vllm_per_node[MEDIUM](results, label))
    out += [
        Row("cost per node (slope over distinct documents, 1 to 1000 nodes)", "µs",
            at("latency", "scaling", "slope_us_per_node"), (f"vLLM's check per node, {LARGE}", vllm_per_node[LARGE])),
        Row("per-node cost at 1000 nodes / at 100", "x", at("latency", "scaling", "per_node_ratio_1000_vs_100"),
            ("the same for vLLM's check", vllm_growth), at_most(1.2)),
        Row("hma-policy decide FILE, CPU", "ms", at("cli", "decide_cpu_ms"),
            ("python -c 'import jsonschema', CPU", at("cli", "import_jsonschema_cpu_ms")), baseline_times_at_most(1.5)),
        Row("hma-policy decide FILE, wall", "ms", at("cli", "decide_ms"),
            ("python -c 'import jsonschema', wall", at("cli", "import_jsonschema_ms")), baseline_times_at_most(1.5)),
        Row("hma-policy decide FILE, peak RSS", "MiB", scaled(at("cli", "decide_peak_rss_kib"), 1 / 1024),
            ("python -c 'import jsonschema'", scaled(at("cli", "import_jsonschema_peak_rss_kib"), 1 / 1024))),
        Row("audit --jobs 2, wall", "docs/s", at("audit", "jobs_2_docs_per_s"),
            ("one process reads + parses (orjson)", floor("orjson_docs_per_s")), baseline_times_at_least(0.25)),
        # Not a target: the part of every audit's wall time that does not grow with the fleet. At
        # 0.25x the floor, the whole audit may take 4x the floor's time; this row is what is left of it.
        Row("audit of one fleet file, wall (start-up, load, report)", "s", at("audit", "one_file_s"),
            ("one process reads + parses every fleet file, wall", floor("orjson_s"))),
        Row("audit --jobs 1, wall", "docs/s", at("audit", "jobs_1_docs_per_s"),
            ("one process reads + parses (orjson)", floor("orjson_docs_per_s"))),
        Row("audit --jobs 2, CPU with its workers", "s", at("audit", "jobs_2_cpu_s"),
            ("the same read + parse, CPU", floor("orjson_cpu_s"))),
        Row("audit --jobs 1, CPU", "s", at("audit", "jobs_1_cpu_s"), ("the same read + parse, CPU", floor("orjson_cpu_s"))),
        Row("audit --jobs 2, peak RSS (largest process)", "MiB", scaled(at("audit", "jobs_2_peak_rss_kib"), 1 / 1024),
            ("hma-policy decide FILE", scaled(at("cli", "decide_peak_rss_kib"), 1 / 1024))),
        Row("audit() in one process, per file", "µs", at("stages", "audit"),
            ("read + orjson.loads, per file", at("stages", "orjson_loads"))),
        Row("Policy.prepare(), per fleet document", "µs", at("stages", "prepare"),
            ("jsonschema is_valid, same documents", at("stages", "jsonschema_is_valid"))),
        Row("Policy.decide_prepared(), per fleet document", "µs", at("stages", "decide_prepared"),
            ("vLLM's check, same documents", at("stages", "vllm_hma_block"))),
        Row("warm decisions per CPU second, 2,000 fleet documents in turn", "/s", at("memory", "decisions_per_cpu_s"),
            ("vLLM's check, same documents", at("memory", "vllm_decisions_per_cpu_s"))),
        Row("RSS after the memory run's warm decisions", "MiB", scaled(at("memory", "rss_after_kib"), 1 / 1024),
            ("RSS before them", scaled(at("memory", "rss_before_kib"), 1 / 1024))),
        Row("RSS growth over them", "%", at("memory", "growth_pct"), None, below(5)),
        Row(f"rules check, {CHECK_TARGET:,} more conditional registry entries, CPU", "s", checked(CHECK_TARGET),
            ("rules check of the bundled rules", checked(0)), below(30)),
    ]
    return out


def _div(a: Any, b: Any) -> float | None:
    numbers = isinstance(a, (int, float)) and isinstance(b, (int, float))
    return a / b if numbers and b else None


def _show(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def render(results: dict[str, Any]) -> str:
    labels = list(results["rounds"])
    this, others = labels[0], labels[1:]
    machine = results["machine"]
    lines = [f"machine: {machine['cpus']} CPUs, {machine['processor']}, Python {machine['python']}, load average "
             f"{machine['load_before']:.2f} before the run; {machine['rounds']} round(s)"
             f"{' (quick mode)' if machine['quick'] else ''}; {results['audit_documents']:,} audited files"]
    for label, info in results["builds"].items():
        kind = "compiled: " + ", ".join(info["compiled"]) if info["compiled"] else "pure Python"
        role = " (this build)" if label == this else " (the reference build)" if label == labels[1] else ""
        lines.append(f"  {label}{role}: {info['package']} ({kind})")
    lines += ["", "Times in µs, ms and s are CPU time of the measured process (on a shared machine its wall time "
              "includes waiting for a CPU); rows that say wall, and docs/s, are wall-clock. Each figure is the median "
              f"of its rounds. The baseline is what the same work costs without the engine (or, where named, the "
              f"engine's own cost of a cheaper case), measured in this run by the Python of `{this}`; targets are "
              f"judged for `{this}`.", ""]
    header = ["figure", "unit", *labels, *[f"{this} / {other}" for other in others], "baseline", "baseline value",
              f"{this} / baseline", "target", "met?"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    verdicts = []
    for row in rows():
        values = {label: row.value(results, label) for label in labels}
        base = row.baseline[1](results, this) if row.baseline else None
        verdict = ""
        if row.target is not None and values[this] is not None:
            judged = Judged(values[this], base if isinstance(base, (int, float)) else None,
                            values[others[0]] if others and isinstance(values[others[0]], (int, float)) else None)
            met = False if isinstance(values[this], str) else row.target.met(judged)
            verdict = "n/a" if met is None else ("yes" if met else "**no**")
            if met is not None:
                shown = _show(values[this]) + ("" if isinstance(values[this], str) else f" {row.unit}")
                if "baseline" in row.target.text:
                    shown += f", {_times(_div(values[this], base))} baseline"
                verdicts.append(f"  {'met   ' if met else 'MISSED'} {row.figure}: {shown} (target {row.target.text})")
            else:
                verdicts.append(None)
        cells = [row.figure, row.unit, *(_show(values[label]) for label in labels),
                 *(_times(_div(values[this], values[other])) for other in others),
                 row.baseline[0] if row.baseline else "—", _show(base) if row.baseline else "—",
                 _times(_div(values[this], base)) if row.baseline else "—",
                 row.target.text if row.target else "", verdict]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "rules check by the number of registry entries added (2 conditional cases each): CPU seconds, "
              "peak RSS"]
    for label in labels:
        check = results["rounds"][label][0].get("check", {})
        shown = [f"{n}: {c['seconds']:.1f} s, {c['peak_rss_kib'] / 1024:,.0f} MiB" if c["status"] == "ok" else
                 f"{n}: {c['status']}" + (f" after {c['seconds']:.1f} s" if c["seconds"] is not None else "")
                 for n, c in sorted(check.items(), key=lambda item: int(item[0]))]
        lines.append(f"  {label}: " + "; ".join(shown))
    lines += ["", f"targets, {this}:", *(v for v in verdicts if v)]
    if None in verdicts:
        lines.append(f"  ({verdicts.count(None)} more compare with another build: give one with --against)")
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """``text`` to ``path`` through a temporary file in the same folder, so
    that an interrupted run leaves the previous figures whole."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: small counts, one round, every figure")
    parser.add_argument("--against", action="append", default=[], metavar="[LABEL=]PYTHON",
                        help="another build to measure in the same run, by its Python (its hma-policy must be beside "
                             "it); the first one given is the reference build that 'no worse' targets compare with")
    parser.add_argument("--label", default="this", help="this build's name in the table (default: this)")
    parser.add_argument("--rounds", type=int, help="how many times each build is measured (default 3; 1 with --quick)")
    parser.add_argument("--output", default=str(HERE / "results.json"), help="where the figures go, as JSON")
    args = parser.parse_args()
    this = Build(args.label, sys.executable)
    builds = [this, *(build_of(spec) for spec in args.against)]
    if len({b.label for b in builds}) != len(builds):
        parser.error("two builds have the same label: name them LABEL=PYTHON")
    for build in builds[1:]:
        if not (Path(build.python).exists() and Path(build.cli).exists()):
            parser.error(f"--against {build.label}={build.python}: needs that Python and an hma-policy beside it")
    rounds = args.rounds or (1 if args.quick else 3)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results = measure(builds, args.quick, rounds)
    results["machine"] = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                          "processor": platform.processor() or platform.machine(), "quick": args.quick,
                          "rounds": rounds, "load_before": load}
    results["command"] = " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])
    write_atomically(Path(args.output), json.dumps(results, indent=2))
    print(render(results))


if __name__ == "__main__":
    main()
