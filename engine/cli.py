"""The ``hma-policy`` command line.

Exit status of decide/explain/validate: 0 HMA enabled or disabled; 1 vLLM
would reject the configuration (config or connector stage) or the outcome is
undetermined; 2 invalid input, invalid rules, usage error or internal fault.
``rules check``/``rules verify``: 0 clean, 1 problems found, 2 usage.
No traceback reaches a user.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from . import __version__, load_policy
from .decision import Decision, input_error_decision
from .document import prepare, read_document
from .errors import HMAPolicyError, InputError, PolicyError

EXIT_OK, EXIT_REJECTED, EXIT_INVALID = 0, 1, 2


def _exit_code(decision: Decision) -> int:
    if decision.outcome in ("enabled", "disabled"):
        return EXIT_OK
    if decision.errors and decision.errors[0].stage == "input":
        return EXIT_INVALID
    return EXIT_REJECTED


def _tree(decision: Decision) -> list[str]:
    """The connector tree, drawn from the pre-order list and each node's depth."""
    verdicts = {True: "supports HMA", False: "does not support HMA", None: "unknown"}
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
        lines.append(f"  {prefix}{name}: {verdicts[node.supports_hma]}  [{node.path}] ({node.rule})")
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
    return "\n".join(out)


def render_explain(decision: Decision) -> str:
    out = [f"outcome: {decision.outcome}", "steps (rule that set each fact, and the facts it read):"]
    for step in decision.steps:
        where = f" {step.node}" if step.node else ""
        rule = step.rule or "(default)"
        facts = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in step.facts)
        out.append(f"  [{step.ruleset}{where}] {step.step} = {json.dumps(step.value)}  <- {rule}" + (f"  ({facts})" if facts else ""))
    out.append("trace: " + " ".join(decision.trace))
    return "\n".join(out)


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
    add("explain", "show the rules that fired and the facts they read")
    add("validate", "check a deployment document against the schema")
    return parser


def _decide(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    policy = load_policy(args.rules)
    try:
        document = read_document(args.file, stdin=stdin)
        decision = policy.decide(document)
    except InputError as exc:
        decision = input_error_decision(exc.problems, policy.digest)
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
    from .evaluate import Evaluator
    from .policy import read_policy
    from .verify import verify

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
    from .testing import default_test_paths, load_cases, run_cases

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
                     f"registry entries {reg_covered}/{len(suite.registry_rules)}")
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

    from .impact import impact, render, rules_from_git

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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    stdout, stderr = sys.stdout, sys.stderr
    try:
        args = _parser().parse_args(argv)
        handler = {"validate": _validate, "rules": _rules, "test": _test, "diff": _diff}.get(args.command, _decide)
        code, text = handler(args, sys.stdin)
        try:
            print(text, file=stdout)
            stdout.flush()
        except BrokenPipeError:
            # The reader went away; the exit status still reports the result.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        return code
    except SystemExit as exc:  # argparse: --help, --version, usage errors (exit 2)
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_INVALID
    except PolicyError as exc:
        print("hma-policy: the rules are invalid:", file=stderr)
        for problem in exc.problems:
            print(f"  {problem.render()}", file=stderr)
        return EXIT_INVALID
    except HMAPolicyError as exc:
        print(f"hma-policy: {exc}", file=stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        print(f"hma-policy: internal error: {type(exc).__name__}: {exc}"[:2000], file=stderr)
        return EXIT_INVALID


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
