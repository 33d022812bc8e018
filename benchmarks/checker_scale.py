"""How `hma-policy rules check` scales with conditional registry entries.

    python benchmarks/checker_scale.py                # N in 25, 100, 200, 1000
    python benchmarks/checker_scale.py --counts 25 100

Each figure is one `rules check` of a copy of the bundled rules (written by
`hma-policy rules init`) whose registry gains N entries, each reachable by
name and by module path, with two cases (the shape issue 19 measures). It
runs in a child process, so that its time and peak memory are its own; the
bundled rules' own check, measured in the same run, is the baseline each
figure is divided by (these machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COUNTS = (25, 100, 200, 1000)


def conditional_entries(count: int) -> str:
    """``count`` registry entries (YAML, indented under `connectors:`), each
    with a module path and two cases."""
    return "".join(
        f"  Site{i}Connector:\n"
        f"    supports_hma: true\n"
        f"    module_path: site.connectors.c{i}\n"
        f"    cases:\n"
        f"      - id: upstream\n"
        f"        when: {{env_lmcache_use_upstream_mp: true}}\n"
        f"        supports_hma: false\n"
        f"      - id: child\n"
        f"        when: {{is_child: true}}\n"
        f"        supports_hma: false\n"
        for i in range(count))


def rules_copy(directory: Path, count: int) -> Path:
    """A copy of the bundled rules with ``count`` conditional entries added."""
    subprocess.run([sys.executable, "-m", "hma_policy", "rules", "init", "--", str(directory)],
                   check=True, capture_output=True)
    if count:
        with open(directory / "connectors.yaml", "a", encoding="utf-8") as handle:
            handle.write(conditional_entries(count))
    return directory


def check(directory: Path | None) -> dict:
    """One `rules check` in a child process: exit status, seconds, peak RSS (MiB)."""
    cmd = [sys.executable, "-m", "hma_policy", "rules", "check", "--format", "json"]
    if directory is not None:
        cmd += ["--rules", str(directory)]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        # wait4 gives this child's own resource usage (its peak RSS)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        stdout.seek(0)
        stderr.seek(0)
        text, errors = stdout.read().decode(), stderr.read().decode()
    out: dict = {"exit": child.returncode, "seconds": round(seconds, 2), "peak_mib": round(usage.ru_maxrss / 1024, 1)}
    try:
        data = json.loads(text)
        out["combinations"] = data.get("combinations")
        out["problems"] = [p["code"] for p in data.get("problems", [])]
    except json.JSONDecodeError:
        out["stderr"] = errors[-500:]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    args = parser.parse_args(argv)
    env_note = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    base = check(None)
    print(f"rules check, bundled rules: {base['seconds']} s, peak {base['peak_mib']} MiB ({env_note})")
    figures = {"bundled": base}
    with tempfile.TemporaryDirectory(prefix="hma-scale-") as tmp:
        for count in sorted(args.counts):
            figure = check(rules_copy(Path(tmp) / f"n{count}", count))
            figures[f"n{count}"] = figure
        for count in sorted(args.counts):
            figure = figures[f"n{count}"]
            ratio = figure["seconds"] / base["seconds"] if base["seconds"] else float("nan")
            print(f"rules check, {count} conditional registry entries: {figure['seconds']} s "
                  f"({ratio:.1f}x the bundled rules), peak {figure['peak_mib']} MiB, exit {figure['exit']}"
                  + (f", problems {figure['problems']}" if figure.get("problems") else "")
                  + (f", stderr {figure['stderr']!r}" if figure.get("stderr") else ""))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
