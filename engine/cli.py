"""The ``hma-policy`` command line.

Exit status of decide/explain/validate: 0 HMA enabled or disabled; 1 vLLM
would reject the configuration (config or connector stage) or the outcome is
undetermined; 2 invalid input, invalid rules, usage error or internal fault
(and, for ``decide --log``, a decision log that cannot be written).
``rules check``/``rules verify``: 0 clean, 1 problems found, 2 usage.
``audit``: 0 the audit completed, whatever the outcomes (broken files and
error outcomes are findings in the report); 1 a ``--fail-on`` condition is
met; 2 usage, invalid rules, a path that does not exist, a report or decision
log that cannot be written, or internal fault.
``log verify``: 0 the log is intact (or its torn tail was repaired with
``--repair``); 1 tampering or a torn tail was found; 2 usage, or the log
cannot be read. Every command: 2 when its output cannot be written (a full
disk); SIGINT (Ctrl-C) exits 130 and SIGTERM 143, saying so, with any file
being written left as it was (fileio.py). No traceback reaches a user.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from typing import Any, NoReturn, Sequence

from .core.policy import load_policy
from .version import __version__
from .core.decision import Decision, input_error_decision
from .core.input import prepare, read_document
from .core.errors import HMAPolicyError, InputError, PolicyError, printable
from .fileio import Interrupted, interrupt_on_signals

EXIT_OK, EXIT_REJECTED, EXIT_INVALID = 0, 1, 2
# Spelled here rather than imported, so that `decide` does not load the audit
# and report modules at start-up; tests/test_cli.py holds them equal.
REPORT_FORMATS = ("text", "json", "md", "html", "policyreport")
FAIL_ON_CONDITIONS = ("error", "undetermined", "disabled", "warning", "problem")


def _exit_code(decision: Decision) -> int:
    if decision.outcome in ("enabled", "disabled"):
        return EXIT_OK
    if decision.errors and decision.errors[0].stage == "input":
        return EXIT_INVALID
    return EXIT_REJECTED


def _tree(decision: Decision) -> list[str]:
    """The connector tree, drawn from the pre-order list and each node's depth."""
    verdicts = {"supported": "supports HMA", "unsupported": "does not support HMA", "unknown": "unknown",
                "error": "raises", "unsupported_or_error": "does not support HMA, or raises"}
    items = list(decision.connectors)
    last = []
    for index, node in enumerate(items):
        following = next((c.depth for c in items[index + 1:] if c.depth <= node.depth), -1)
        last.append(following < node.depth)
    lines, open_levels = [], []
    for node, is_last in zip(items, last):
        del open_levels[max(node.depth - 1, 0):]
        prefix = "".join("   " if done else "│  " for done in open_levels)
        if node.depth > 0:
            prefix += "└─ " if is_last else "├─ "
            open_levels.append(is_last)
        name = node.kv_connector if node.kv_connector is not None else "(no kv_connector)"
        verdict = verdicts.get(node.support or "", {True: "supports HMA", False: "does not support HMA"}.get(node.supports_hma, "unknown"))
        lines.append(f"  {prefix}{name}: {verdict}  [{node.path}] ({node.rule})")
    return lines


def render_text(decision: Decision, *, source: str = "") -> str:
    out = []
    summary = {
        "enabled": "HMA enabled",
        "disabled": "HMA disabled",
        "error": "rejected",
        "undetermined": "cannot be decided from the rules",
    }[decision.outcome]
    if decision.errors:
        stage = decision.errors[0].stage
        summary = {"input": "the document is invalid", "config": "rejected at config construction",
                   "connector": "config accepted, connector creation fails at start-up"}.get(stage, summary)
    head = f"{source}: " if source else ""
    out.append(f"{head}{decision.outcome} ({summary})")
    if decision.hma_enabled is not None:
        out.append(f"  hma_enabled: {json.dumps(decision.hma_enabled)} "
                   f"(disable_hybrid_kv_cache_manager: {json.dumps(decision.disable_hybrid_kv_cache_manager)})")
    if decision.reasons:
        out.append("why:")
        out += [f"  - {r}" for r in decision.reasons]
    for title, items in (("errors", decision.errors), ("warnings", decision.warnings)):
        if items:
            out.append(f"{title}:")
            for m in items:
                tag = m.stage or m.source
                out.append(f"  - {m.code} [{tag}] at {m.path or '/'}: {m.message}")
                if m.hint:
                    out.append(f"    hint: {m.hint}")
    if decision.connectors:
        out.append("connectors:")
        out += _tree(decision)
    out.append(f"policy: {decision.policy_digest}")
    # Messages carry user values: escape control characters so no document
    # can forge lines or move the cursor on the reader's terminal.
    return "\n".join(printable(line) for line in out)


def render_explain(decision: Decision) -> str:
    out = [f"outcome: {decision.outcome}", "steps (rule that set each fact, and the facts it read):"]
    for step in decision.steps:
        where = f" {step.node}" if step.node else ""
        rule = step.rule or "(default)"
        facts = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in step.facts)
        out.append(f"  [{step.ruleset}{where}] {step.step} = {json.dumps(step.value)}  <- {rule}" + (f"  ({facts})" if facts else ""))
    out.append("trace: " + " ".join(decision.trace))
    return "\n".join(printable(line) for line in out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hma-policy",
        description="Decide whether vLLM 0.33.0 enables its hybrid KV cache manager (HMA) for a deployment.",
        epilog="exit status: 0 enabled/disabled, 1 rejected by vLLM or undetermined, 2 invalid input, rules or usage",
    )
    parser.add_argument("--version", action="version", version=f"hma-policy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.add_argument("file", metavar="FILE", help="deployment document (JSON or YAML), or - for standard input")
        cmd.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules)")
        return cmd

    rules = sub.add_parser("rules", help="check and verify rule files", description="check and verify rule files")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="SUBCOMMAND")
    check = rules_sub.add_parser("check", help="validate the rule files and prove them free of gaps, conflicts and dead rules")
    check.add_argument("dir", nargs="?", metavar="DIR", help="rules directory (default: the bundled rules)")
    check.add_argument("--format", choices=("text", "json"), default="text")
    verify = rules_sub.add_parser("verify", help="exhaustive verification report, with counterexample documents")
    verify.add_argument("dir", nargs="?", metavar="DIR", help="rules directory (default: the bundled rules)")
    verify.add_argument("--format", choices=("text", "json"), default="text")

    test = sub.add_parser("test", help="run policy tests (YAML cases) against the rules, with coverage",
                          description="run policy tests (YAML cases) against the rules, with coverage")
    test.add_argument("paths", nargs="*", metavar="PATH", help="test files or directories (default: the tests/ folder of the rules)")
    test.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules)")
    test.add_argument("--coverage", action="store_true", help="list the rules no test exercised")
    test.add_argument("--threshold", type=float, metavar="N", help="fail when rule coverage is below N percent")
    test.add_argument("--format", choices=("text", "json"), default="text")
    test.add_argument("-v", "--verbose", action="store_true", help="print passing cases too")

    diff = sub.add_parser("diff", help="the impact of a rule change over a corpus of documents",
                          description="the impact of a rule change over a corpus of documents")
    diff.add_argument("--base", required=True, metavar="RULES_A", help="rules before: a directory, or git:REV[:PATH]")
    diff.add_argument("--head", metavar="RULES_B", help="rules after: a directory, or git:REV[:PATH] (default: the bundled rules)")
    diff.add_argument("corpus", nargs="+", metavar="CORPUS", help="document files or directories")
    diff.add_argument("--format", choices=("text", "json"), default="text")

    decide = add("decide", "decide one deployment document")
    decide.add_argument("--format", choices=("text", "json"), default="text")
    _log_options(decide)
    add("explain", "show the rules that fired and the facts they read")
    add("validate", "check a deployment document against the schema")

    audit = sub.add_parser(
        "audit", help="decide every vLLM deployment found in files and directories",
        description="Find vLLM deployments in deployment documents, vLLM --config files, shell scripts, Dockerfiles and "
                    "Kubernetes manifests, decide each one, and report. Nothing found is executed or imported.",
        epilog="exit status: 0 the audit completed (whatever the outcomes), 1 a --fail-on condition is met, "
               "2 usage, invalid rules, a missing path, or the report or log cannot be written")
    audit.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to audit")
    audit.add_argument("--format", choices=REPORT_FORMATS, default="text", help="report format (default: text)")
    audit.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    audit.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                       help="processes (default: 1; auto: one per CPU this process may use); the report is the same for every N")
    audit.add_argument("--rules", metavar="DIR", help="rules directory (default: the bundled rules)")
    audit.add_argument("--fail-on", type=_conditions, default=(), metavar="LIST",
                       help=f"exit 1 when any of these is found (comma-separated): {', '.join(FAIL_ON_CONDITIONS)}")
    audit.add_argument("--config-root", action="append", default=[], metavar="DIR",
                       help="a further directory --config files may be read from (default: only the audited paths)")
    _log_options(audit)

    log = sub.add_parser("log", help="work with decision logs", description="work with decision logs")
    log_sub = log.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")
    log_verify = log_sub.add_parser("verify", help="check a decision log for edits, deletions, reordering, truncation and a torn tail",
                                    description="check a decision log for edits, deletions, reordering, truncation and a torn tail")
    log_verify.add_argument("file", metavar="FILE", help="the decision log")
    log_verify.add_argument("--repair", action="store_true", help="repair a torn tail (and nothing else)")
    return parser


def _log_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--log", metavar="FILE", help="append a hash-chained record of each decision to FILE")
    cmd.add_argument("--log-mask", metavar="FIELDS", default=None,
                     help="fields whose values the log masks, comma-separated, or `none` (default: kv_connector_extra_config)")


def _jobs(text: str) -> int:
    """--jobs: a whole number of at least 1, or `auto`: the CPUs this
    process may run on (its affinity mask, which containers and taskset
    narrow; the machine's count where the platform has no mask)."""
    if text == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got `{text}`") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (or auto), got {value}")
    return value


def _conditions(text: str) -> tuple[str, ...]:
    from .audit.run import FAIL_ON

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FAIL_ON]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown condition `{unknown[0] if unknown else text}`; choose from {', '.join(FAIL_ON)}")
    return names


def _open_log(args: argparse.Namespace) -> Any:
    """The decision log named by --log (opened before deciding, so a log
    that cannot be written stops the command before any output)."""
    from .audit.declog import DEFAULT_MASKING, NO_MASKING, DecisionLog, Masking

    if args.log_mask is None:
        masking = DEFAULT_MASKING
    elif args.log_mask.strip() == "none":
        masking = NO_MASKING
    else:
        masking = Masking(fields=tuple(f.strip() for f in args.log_mask.split(",") if f.strip()))
    return DecisionLog(args.log, masking=masking)


def _decide(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    policy = load_policy(args.rules)
    log = _open_log(args) if getattr(args, "log", None) else None
    document = None
    try:
        document = read_document(args.file, stdin=stdin)
        decision = policy.decide(document)
    except InputError as exc:
        decision = input_error_decision(exc.problems, policy.digest)
    if log is not None:
        with log:
            log.append(decision, source=args.file, document=document)
    if getattr(args, "format", "text") == "json":
        text = json.dumps(decision.to_dict(), indent=2, ensure_ascii=False)
    elif args.command == "explain":
        text = render_explain(decision) if decision.steps else render_text(decision, source=args.file)
    else:
        text = render_text(decision, source=args.file)
    return _exit_code(decision), text


def _validate(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    try:
        prepare(read_document(args.file, stdin=stdin))
    except InputError as exc:
        return EXIT_INVALID, "\n".join(p.render() for p in exc.problems)
    return EXIT_OK, f"{args.file}: valid"


def _finding_text(f: Any) -> str:
    where = f"{f.file}: " if f.file else ""
    text = f"{where}{f.code}: {f.message} (at {f.path})" if f.path else f"{where}{f.code}: {f.message}"
    if f.facts:
        text += "\n    facts: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in f.facts)
    if f.document is not None:
        text += "\n    counterexample: " + json.dumps(f.document, ensure_ascii=False, sort_keys=True)
    elif f.reproduced is False:
        text += "\n    counterexample: none of the witness documents reaches these facts"
    return text


def _rules(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    from .core.evaluate import Evaluator
    from .core.rules import read_policy
    from .authoring.verify import verify

    try:
        model = read_policy(args.dir)
    except PolicyError as exc:
        if args.format == "json":
            return EXIT_REJECTED, json.dumps({"ok": False, "problems": [
                {"code": p.code, "message": p.message, "file": p.file, "line": p.line, "column": p.column,
                 "path": p.path, "hint": p.hint} for p in exc.problems]}, indent=2)
        lines = [p.render() for p in exc.problems]
        lines.append(f"{len(exc.problems)} problem(s)")
        return EXIT_REJECTED, "\n".join(lines)
    evaluator = Evaluator(model)
    try:
        report = verify(model, evaluator)
    finally:
        evaluator.close()
    errors = report.errors
    if args.format == "json":
        data = report.to_dict()
        data["digest"] = model.digest
        return (EXIT_REJECTED if errors else EXIT_OK), json.dumps(data, indent=2, ensure_ascii=False, default=list)
    shown = report.findings if args.rules_command == "verify" else errors
    lines = [_finding_text(f) for f in shown]
    summary = (
        f"{'ok' if not errors else 'FAILED'}: {model.source} ({model.digest[:19]}): "
        f"{report.rules_fired}/{report.rules_total} rules fire; "
        f"{sum(report.combinations.values())} reachable step inputs checked "
        f"({', '.join(f'{k} {v}' for k, v in report.combinations.items())}); "
        f"{report.runtime_checks} checked against durable-rules; "
        f"decision outcomes reachable: {', '.join(sorted(report.outcomes))}; "
        f"{len(errors)} error(s), {len(report.findings) - len(errors)} order-dependent overlap(s) resolved by hit policy first"
    )
    lines.append(summary)
    return (EXIT_REJECTED if errors else EXIT_OK), "\n".join(lines)


def _test(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    from .authoring.testing import default_test_paths, load_cases, run_cases

    policy = load_policy(args.rules)
    paths = list(args.paths) or default_test_paths(args.rules)
    for path in args.paths:
        from pathlib import Path
        if not Path(path).exists():
            return EXIT_INVALID, f"hma-policy: no such test file or directory: `{path}`"
    try:
        cases = load_cases(paths)
    except PolicyError as exc:
        return EXIT_INVALID, "\n".join(p.render() for p in exc.problems)
    suite = run_cases(policy, cases)
    below = args.threshold is not None and suite.coverage < args.threshold
    ran = suite.passed + suite.failed
    code = EXIT_REJECTED if (suite.failed or below or ran == 0) else EXIT_OK
    if args.format == "json":
        return code, json.dumps({
            "passed": suite.passed, "failed": suite.failed, "skipped": suite.skipped,
            "coverage": round(suite.coverage, 2), "rules": len(suite.rules), "uncovered": suite.uncovered,
            "registry": {"total": len(suite.registry_rules), "uncovered": [r for r in suite.registry_rules if r not in suite.fired]},
            "cases": [{"id": r.case.id, "passed": r.passed, "skipped": r.skipped, "mismatches": r.mismatches} for r in suite.results],
        }, indent=2)
    lines = []
    for result in suite.results:
        if result.skipped:
            lines.append(f"SKIP {result.case.id} ({result.case.skip})")
        elif not result.passed:
            lines.append(f"FAIL {result.case.id}")
            lines += [f"    {m}" for m in result.mismatches]
        elif args.verbose:
            lines.append(f"PASS {result.case.id}")
    if args.coverage or below:
        covered = len(suite.rules) - len(suite.uncovered)
        reg_covered = sum(r in suite.fired for r in suite.registry_rules)
        lines.append(f"coverage: {suite.coverage:.1f}% of rules ({covered}/{len(suite.rules)}); "
                     f"registry lookups {reg_covered}/{len(suite.registry_rules)}")
        if suite.uncovered:
            lines.append("not exercised: " + ", ".join(suite.uncovered))
    if ran == 0:
        lines.append("no test ran")
    if below:
        lines.append(f"coverage {suite.coverage:.1f}% is below the threshold {args.threshold:g}%")
    lines.append(f"{suite.passed} passed, {suite.failed} failed" + (f", {suite.skipped} skipped" if suite.skipped else ""))
    return code, "\n".join(lines)


def _diff(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    import tempfile
    from pathlib import Path

    from .authoring.impact import impact, render, rules_from_git

    with tempfile.TemporaryDirectory(prefix="hma-policy-diff-") as tmp:
        def policy_for(spec: str | None, name: str):
            if spec is None:
                return load_policy(None)
            if spec.startswith("git:"):
                return load_policy(rules_from_git(spec, Path(tmp) / name))
            return load_policy(spec)

        base = policy_for(args.base, "base")
        head = policy_for(args.head, "head")
        for path in args.corpus:
            if not Path(path).exists():
                return EXIT_INVALID, f"hma-policy: no such file or directory: `{path}`"
        report = impact(base, head, args.corpus, base_name=args.base, head_name=args.head or "bundled")
    if args.format == "json":
        return EXIT_OK, json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    return EXIT_OK, render(report)


def _audit(args: argparse.Namespace, stdin: Any) -> tuple[int, str, Any]:
    """The audit command: its exit status, its output, and what it made
    (the report, the policy), which the console command leaves to the
    process's end rather than freeing (see _finish)."""
    # Loaded here, not by audit(): a console command leaves it (and its
    # memos) to the process's end; main() closes it.
    policy = load_policy(args.rules)
    try:
        return _audit_report(args, policy)
    finally:
        if not args.finish:
            policy.close()


def _audit_report(args: argparse.Namespace, policy: Any) -> tuple[int, str, Any]:
    from .audit.run import AuditError, audit, progress_bar
    from .core.errors import Problem
    from .audit.report import render, write
    from .fileio import atomic_write

    log = _open_log(args) if args.log else None
    try:
        # Only the decision log shows documents: without --log they are let go.
        report = audit(args.paths, policy=policy, jobs=args.jobs, config_roots=args.config_root,
                       progress=progress_bar(sys.stderr), documents=log is not None, prerender=args.format == "json")
        if log is not None:
            for entry in report.entries:
                log.append(entry.decision, source=entry.deployment.id, document=entry.deployment.document,
                           digest=entry.input_digest)
    finally:
        if log is not None:
            log.close()
    failing = report.failing(args.fail_on)
    if failing:
        print(f"hma-policy: --fail-on met: {'; '.join(failing)}", file=sys.stderr)
    code = EXIT_REJECTED if failing else EXIT_OK
    if args.output:
        try:
            with atomic_write(args.output) as handle:
                write(report, args.format, handle)
        except OSError as exc:
            raise AuditError([Problem("audit.output", f"cannot write the report: {exc.strerror or exc}", file=args.output)]) from None
        summary = report.summary()
        return code, (f"wrote {args.output} ({args.format}): {summary['deployments']} deployment(s), "
                      + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
                      + f"; {summary['problems']} file problem(s)"), (report, policy)
    if args.format == "json":  # written as bytes, a slice at a time (report.write)
        return code, _Streamed(report, args.format), (report, policy)
    return code, render(report, args.format), (report, policy)


class _Streamed:
    """Output a command writes to standard output's bytes with report.write
    (a JSON audit report: never whole in memory), rather than as one text."""

    def __init__(self, report: Any, fmt: str):
        self.report, self.fmt = report, fmt

    def emit(self, stdout: Any) -> str | None:
        """Written to ``stdout``'s bytes (None), or, for a text-only stream
        (a test's StringIO), the text to print instead."""
        from .audit.report import render, write

        buffer = getattr(stdout, "buffer", None)
        if buffer is None:
            return render(self.report, self.fmt)
        stdout.flush()
        write(self.report, self.fmt, buffer)
        buffer.flush()
        return None


def _log(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    from .audit.declog import repair, verify

    result = repair(args.file) if args.repair else verify(args.file)
    if args.repair and result.torn_bytes == 0 and result.repaired is None and not result.ok:
        return EXIT_REJECTED, result.render() + "\nnot repaired: --repair mends only a torn tail, and the log has other problems"
    return (EXIT_OK if result.ok else EXIT_REJECTED), result.render()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``argv``: its arguments; None: the process's) and
    return its exit status. Everything the command made is freed."""
    return _main(argv, finish=False)


def run() -> NoReturn:
    """Entry point of the console script (and ``python -m hma_policy``):
    :func:`main` for the process's arguments, then the process ends at once
    (see _finish)."""
    # A process started with standard output or error closed (`>&-`) has
    # None there: what would be written to it is lost, as to a reader gone,
    # and the exit status still tells the outcome.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    _finish(_main(None, finish=True))


def _finish(code: int) -> NoReturn:
    """End the process with ``code`` once its output is flushed, without the
    interpreter's teardown: freeing what a large audit made (its report, the
    policy's memos, the modules) takes about 0.1 s and serves nothing, as in
    mypy's fast exit. Every file the command wrote is closed by then, and
    its worker processes have ended. Under coverage measurement, which saves
    its data at exit, the exit is the ordinary one."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more can be written
            pass
    if "coverage" in sys.modules:
        sys.exit(code)
    os._exit(code)


def _main(argv: Sequence[str] | None, *, finish: bool) -> int:
    """:func:`main`; ``finish``: end the process (_finish) after the
    command's output, while what the command made is still held."""
    stdout, stderr = sys.stdout, sys.stderr
    paused = False
    try:
        args = _parser().parse_args(argv)
        args.finish = finish
        # An audit's report and memos are kept to the end of the command: the
        # cyclic collector's passes would only rescan them (a third of a large
        # report's rendering). The audit pauses it while files are examined;
        # the command keeps it paused until its output is written.
        paused = args.command == "audit" and gc.isenabled()
        if paused:
            gc.disable()
        handler = {"validate": _validate, "rules": _rules, "test": _test, "diff": _diff, "audit": _audit,
                   "log": _log}.get(args.command, _decide)
        with interrupt_on_signals():
            code, text, *made = handler(args, sys.stdin)
            try:
                # A program's process may have no standard output: nothing to write to.
                if stdout is not None:
                    if isinstance(text, _Streamed):
                        text = text.emit(stdout)
                    if text is not None:
                        # A lone surrogate from a document cannot be written as UTF-8: escape it.
                        print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=stdout)
                    stdout.flush()
            except BrokenPipeError:
                # The reader went away; the exit status still reports the result.
                _discard(stdout)
            except OSError as exc:  # a full disk, /dev/full: said, not an internal error
                _discard(stdout)
                print(f"hma-policy: cannot write the output: {exc.strerror or exc}", file=stderr)
                code = EXIT_INVALID
        if finish:
            _finish(code)  # `made` is still held: never freed
        return code
    except SystemExit as exc:  # argparse: --help, --version, usage errors (exit 2)
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_INVALID
    except PolicyError as exc:
        if all(p.code == "rules.git" for p in exc.problems):
            print(f"hma-policy: cannot read the rules from git: {exc.problems[0].message}", file=stderr)
            return EXIT_INVALID
        print("hma-policy: the rules are invalid:", file=stderr)
        for problem in exc.problems:
            print(f"  {problem.render()}", file=stderr)
        return EXIT_INVALID
    except HMAPolicyError as exc:
        print(f"hma-policy: {exc}", file=stderr)
        return EXIT_INVALID
    except Interrupted as exc:
        # Raised by the handler, reported here: a handler that printed could
        # re-enter the stream it interrupted.
        kept = "".join(f"; `{path}` was not written and is as it was" for path in exc.unwritten)
        print(f"hma-policy: interrupted by {exc.name}{kept}", file=stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        print(f"hma-policy: internal error: {type(exc).__name__}: {exc}"[:2000], file=stderr)
        return EXIT_INVALID
    finally:
        if paused:
            gc.enable()


def _discard(stdout: Any) -> None:
    """Send what is left in standard output's buffer (and anything later) to
    the null device, so that no later flush fails again."""
    try:
        fileno = stdout.fileno()
    except (OSError, ValueError):  # not a file (a program's StringIO): nothing is flushed later
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
