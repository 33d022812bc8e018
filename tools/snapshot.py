"""Every user-visible output of a build, written to a directory, so that two
builds can be compared byte for byte (``diff -r OLD NEW``).

    OLD_PYTHON tools/snapshot.py --out /tmp/old
    NEW_PYTHON tools/snapshot.py --out /tmp/new
    diff -r /tmp/old /tmp/new

Covers: the shared conformance cases, examples/ and the tests' corpora
through decide (json and text), explain and validate; audits of
examples/fleet and examples/ in every format with SOURCE_DATE_EPOCH fixed
and --jobs 1 and 2; decision logs (decision ids, timestamps and the hashes
that cover them taken out); rules check, rules verify, test and diff; and
random documents (tests/strategies.py, fixed seed) through the Python API,
with every decision's contract and steps.

Only the command line and the public API are used, so any two builds can be
compared. Each command runs from the repository root with the same relative
paths, so that file names in the outputs agree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "hma_policy"]
ENV = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000", "NO_COLOR": "1", "COLUMNS": "120"}


def run(args: list[str], out: Path, *, stdin: bytes | None = None) -> None:
    """Run one command and write its stdout, stderr and exit status to ``out``."""
    done = subprocess.run(CLI + args, cwd=ROOT, input=stdin, capture_output=True, env=ENV, timeout=600)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"$ hma-policy " + " ".join(args).encode() + b"\n" + done.stdout
                    + b"\n--- stderr\n" + done.stderr + f"\n--- exit {done.returncode}\n".encode())


def normalise_log(path: Path) -> bytes:
    """A decision log without what differs between runs: ids, times and the hashes over them."""
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        for key in ("decision_id", "timestamp", "hash", "prev"):
            record.pop(key, None)
        lines.append(json.dumps(record, sort_keys=True))
    return "\n".join(lines).encode() + b"\n"


def documents(scratch: Path) -> list[str]:
    """Document paths (relative to the root) to decide one at a time."""
    out = []
    cases = json.loads((ROOT / "tests/conformance/cases.json").read_text())
    conf = scratch / "conformance"
    conf.mkdir(parents=True, exist_ok=True)
    for case in cases["cases"] if isinstance(cases, dict) else cases:
        path = conf / f"{case['id']}.json"
        path.write_text(json.dumps(case["input"], indent=1))
        out.append(os.path.relpath(path, ROOT))
    for path in sorted((ROOT / "examples").glob("*")):
        if path.suffix in (".json", ".yaml", ".yml"):
            out.append(os.path.relpath(path, ROOT))
    for path in sorted((ROOT / "examples/fleet/documents").glob("*")):
        out.append(os.path.relpath(path, ROOT))
    return out


def random_decisions(out: Path, count: int) -> None:
    """Random documents through the Python API: contract dict and steps of each."""
    sys.path.insert(0, str(ROOT / "tests"))
    import hma_policy
    import strategies

    picker = strategies.RandomPicker(random.Random(20261201))
    policy = hma_policy.load_policy()
    lines = []
    for index in range(count):
        document = strategies.document(picker)
        try:
            decision = policy.decide(document)
        except hma_policy.InputError as exc:
            lines.append(json.dumps({"i": index, "invalid": [[p.code, p.path, p.message, p.hint] for p in exc.problems]}))
            continue
        steps = [[s.ruleset, s.step, s.node, s.rule, s.value, [[k, v] for k, v in s.facts]] for s in decision.steps]
        lines.append(json.dumps({"i": index, "decision": decision.to_dict(), "steps": steps}, default=repr))
    out.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--random", type=int, default=5000, help="random documents through the API (default 5000)")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    scratch = ROOT / "build" / "snapshot-inputs"
    shutil.rmtree(scratch, ignore_errors=True)
    docs = documents(scratch)
    for doc in docs:
        name = doc.replace("/", "__")
        run(["decide", doc, "--format", "json"], out / "decide-json" / name)
        run(["decide", doc], out / "decide-text" / name)
        run(["explain", doc], out / "explain" / name)
        run(["validate", doc], out / "validate" / name)
    for fmt in ("text", "json", "md", "html", "policyreport"):
        for jobs in ("1", "2"):
            run(["audit", "examples/fleet", "--format", fmt, "--jobs", jobs], out / "audit" / f"fleet-{fmt}-j{jobs}")
        run(["audit", "examples", "--format", fmt], out / "audit" / f"examples-{fmt}")
    run(["audit", "examples/fleet", "--fail-on", "error,undetermined,problem"], out / "audit" / "fleet-fail-on")
    log = scratch / "fleet.jsonl"
    run(["audit", "examples/fleet", "--log", os.path.relpath(log, ROOT), "--format", "json", "-o",
         os.path.relpath(scratch / "fleet.json", ROOT)], out / "log" / "audit-command")
    (out / "log" / "audit-records").write_bytes(normalise_log(log))
    run(["log", "verify", os.path.relpath(log, ROOT)], out / "log" / "verify")
    # The last hash covers the records' ids and times, which differ in every run.
    verified = out / "log" / "verify"
    verified.write_bytes(re.sub(rb"last hash sha256:[0-9a-f]+", b"last hash sha256:...", verified.read_bytes()))
    dlog = scratch / "decide.jsonl"
    for doc in docs[:20]:
        run(["decide", doc, "--log", os.path.relpath(dlog, ROOT)], out / "log" / "decide-command" / doc.replace("/", "__"))
    (out / "log" / "decide-records").write_bytes(normalise_log(dlog))
    run(["rules", "check"], out / "rules" / "check")
    run(["rules", "verify"], out / "rules" / "verify")
    for corpus in sorted((ROOT / "tests/rules_corpus").iterdir()):
        if corpus.is_dir():
            run(["rules", "check", os.path.relpath(corpus, ROOT)], out / "rules" / "corpus" / corpus.name)
    run(["test"], out / "test" / "bundled")
    run(["test", "--coverage"], out / "test" / "coverage")
    # The README's impact example: LMCacheConnectorV1 marked HMA-capable.
    head = scratch / "lmcache-hma"
    shutil.copytree(ROOT / "rules", head, ignore=shutil.ignore_patterns("__init__.py", "__pycache__", "tests"))
    # The registry entry, in whichever file of the folder holds it (its layout changes between builds).
    marker = "  LMCacheConnectorV1:\n    supports_hma: false"
    holders = [path for path in sorted(head.rglob("*.yaml")) if marker in path.read_text()]
    assert holders, "no registry entry of LMCacheConnectorV1 to change"
    for path in holders:
        path.write_text(path.read_text().replace(marker, "  LMCacheConnectorV1:\n    supports_hma: true"))
    corpus = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*") if p.suffix in (".json", ".yaml"))
    run(["diff", "--base", "rules", "--head", os.path.relpath(head, ROOT), *corpus], out / "diff" / "lmcache-hma")
    run(["diff", "--base", "rules", "--head", os.path.relpath(head, ROOT), "examples/fleet"], out / "diff" / "lmcache-hma-fleet")
    run(["diff", "--base", "rules", "--head", os.path.relpath(head, ROOT), "--format", "json", *corpus],
        out / "diff" / "lmcache-hma-json")
    random_decisions(out / "random-decisions.jsonl", args.random)
    print(f"wrote {sum(1 for _ in out.rglob('*') if _.is_file())} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
