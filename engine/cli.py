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
cannot be read. ``serve``: 0 stopped by SIGTERM or SIGINT (it does not exit
143); 2 usage, invalid rules, or the server cannot start. Every command: 2 when its output cannot be written (a full
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

from .version import __version__
from .core.decision import Decision
from .core.input import read_document
from .core.errors import HMAPolicyError, InputError, PolicyError
from .core.policies import DEFAULT_SOURCE
from .core.schema import SCHEMAS
from .render import explain_dict, render_explain, render_text
from .clisupport import COLOR_CHOICES, Console, InvalidRules, UsageError, console, label, load_set
from .fileio import Interrupted, interrupt_on_signals
from .policyref import PolicyRefError, opened

EXIT_OK, EXIT_REJECTED, EXIT_INVALID = 0, 1, 2
# Spelled here rather than imported, so that `decide` does not load the audit
# and report modules at start-up; tests/test_cli.py holds them equal.
REPORT_FORMATS = ("text", "json", "md", "html", "policyreport", "sarif", "github", "junit")
FAIL_ON_CONDITIONS = ("error", "undetermined", "disabled", "warning", "problem")


def _exit_code(decision: Decision) -> int:
    if decision.outcome in ("enabled", "disabled"):
        return EXIT_OK
    if decision.errors and decision.errors[0].stage == "input":
        return EXIT_INVALID
    return EXIT_REJECTED


POLICY_HELP = "the policy: a rules directory, git:REV[:PATH], vllm:X.Y.Z (the bundled rules of that release), or bundled (the default)"
VERSION_HELP = ("decide as vLLM X.Y.Z (a bundled release) whatever the deployments name; default: the release each "
                "names (vllm_version, an image tag, a pip pin), else the newest")


def _parser() -> argparse.ArgumentParser:
    # --quiet and --color may come before the command or after it: each
    # command takes them too, without a default of its own (which would
    # overwrite the one given before the command).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no notes on standard error (the policy used, files written, progress); results and errors still")
    common.add_argument("--color", choices=COLOR_CHOICES, default=argparse.SUPPRESS,
                        help="colour: auto (on a terminal, unless NO_COLOR is set), always, never")
    parser = argparse.ArgumentParser(
        prog="hma-policy", parents=[common],
        description="Decide whether vLLM enables its hybrid KV cache manager (HMA) for a deployment, as each vLLM release does.",
        epilog="exit status: 0 enabled/disabled, 1 rejected by vLLM or undetermined, 2 invalid input, rules or usage",
    )
    parser.add_argument("--version", action="version", version=f"hma-policy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(parent: Any, name: str, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
        return parent.add_parser(name, help=help_text, description=kwargs.pop("description", help_text),
                                 parents=[common], **kwargs)

    def policy_option(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--rules", metavar="POLICY", help=POLICY_HELP)

    def version_option(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--vllm-version", metavar="X.Y.Z", help=VERSION_HELP)

    rules = command(sub, "rules", "check, verify and copy rule files")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="SUBCOMMAND")
    check = command(rules_sub, "check", "validate the rule files and prove them free of gaps, conflicts and dead rules")
    verify = command(rules_sub, "verify", "exhaustive verification report, with counterexample documents")
    for cmd in (check, verify):
        cmd.add_argument("dir", nargs="?", metavar="DIR", help="the rules directory (an older spelling of --rules)")
        policy_option(cmd)
    check.add_argument("--format", choices=("text", "concise", "json", "sarif", "github"), default="text")
    verify.add_argument("--format", choices=("text", "concise", "json"), default="text")
    init = command(rules_sub, "init", "write a copy of the bundled rules and their tests, to edit",
                   description="Write a copy of the bundled rules of one vLLM release (its rule files, its registry "
                               "as connectors.yaml, tests/, and the JSON Schemas their yaml-language-server headers "
                               "name, in schemas/) into DIR, atomically: a rules folder to edit.")
    init.add_argument("target", metavar="DIR", help="where to write the copy (must be empty or absent)")
    init.add_argument("--force", action="store_true", help="write into a DIR that is not empty, replacing the files of the copy")
    init.add_argument("--vllm-version", metavar="X.Y.Z", help="copy the rules of this bundled release (default: the newest)")

    test = command(sub, "test", "run policy tests (YAML cases) against the rules, with coverage")
    test.add_argument("paths", nargs="*", metavar="PATH",
                      help="test files or directories, - for standard input (default: the tests/ folder of the rules)")
    policy_option(test)
    version_option(test)
    test.add_argument("--coverage", action="store_true", help="list the rules no test exercised")
    test.add_argument("--threshold", type=float, metavar="N", help="fail when rule coverage is below N percent")
    test.add_argument("--format", choices=("text", "concise", "json", "sarif", "github", "junit"), default="text")
    test.add_argument("-v", "--verbose", action="store_true", help="print passing cases too")

    diff = command(sub, "diff", "the impact of a rule change over every deployment a corpus holds",
                   description="Decide every deployment `hma-policy audit` finds in CORPUS under two policies, and "
                               "report what changes and why. Given one policy only, it is compared with the bundled rules.")
    diff.add_argument("--base", metavar="POLICY", help="the policy before the change (default: the bundled rules)")
    diff.add_argument("--head", "--rules", dest="head", metavar="POLICY", help="the policy after the change (default: the bundled rules)")
    diff.add_argument("corpus", nargs="+", metavar="CORPUS", help="files or directories, as for audit")
    diff.add_argument("--config-root", action="append", default=[], metavar="DIR",
                      help="a further directory --config files may be read from (as for audit)")
    diff.add_argument("--format", choices=("text", "json"), default="text")

    registry = command(sub, "registry", "generate a vLLM release's connector registry from its wheel")
    registry_sub = registry.add_subparsers(dest="registry_command", required=True, metavar="SUBCOMMAND")
    from_wheel = command(registry_sub, "from-wheel", "read a vLLM wheel's connector registry and option list",
                         description="Read a vLLM wheel's connector registry (and, with --options, the options "
                                     "`vllm serve` accepts) statically: the wheel is read as a zip and its Python "
                                     "files parsed with ast; nothing in it is imported or run.",
                         epilog="exit status: 0 written, 2 the wheel or an output file cannot be read or written, or usage")
    from_wheel.add_argument("wheel", metavar="WHEEL", help="a vLLM wheel (.whl), e.g. from pip download --no-deps vllm==X")
    from_wheel.add_argument("--facts", metavar="FILE", help="also write the facts read from the wheel (JSON), to render again later")
    from_wheel.add_argument("--options", metavar="FILE", help="also write the release's option list (JSON)")
    from_wheel.add_argument("--configs", metavar="FILE",
                            help="also write the release's config classes: their fields, choices and whether they "
                                 "refuse unknown fields (JSON)")
    render = command(registry_sub, "render", "render a registry from facts recorded by from-wheel --facts",
                     epilog="exit status: 0 written, 2 the facts cannot be read or rendered, or usage")
    render.add_argument("--from-facts", required=True, metavar="FACTS", help="a facts file written by from-wheel --facts")
    for cmd in (from_wheel, render):
        cmd.add_argument("-o", "--output", metavar="FILE", help="write the registry (YAML) to FILE (default: standard output)")
        cmd.add_argument("--modules", metavar="FILE", help="also write the release's module table (JSON): the modules of "
                         "vLLM's KV-transfer tree and the names each binds")

    decide = command(sub, "decide", "decide deployment documents")
    decide.add_argument("file", nargs="+", metavar="FILE", help="deployment documents (JSON or YAML), - for standard input; "
                        "or, after --, the command that starts vLLM (decide -- vllm serve MODEL ...)")
    policy_option(decide)
    version_option(decide)
    decide.add_argument("--format", choices=("text", "json"), default="text")
    _log_options(decide)
    explain = command(sub, "explain", "show the rules that fired and the facts they read")
    explain.add_argument("file", metavar="FILE", help="deployment document (JSON or YAML), or - for standard input")
    policy_option(explain)
    version_option(explain)
    explain.add_argument("--format", choices=("text", "json"), default="text")
    validate = command(sub, "validate", "check a deployment document against the schema of the release that decides it")
    validate.add_argument("file", metavar="FILE", help="deployment document (JSON or YAML), or - for standard input")
    policy_option(validate)
    version_option(validate)

    audit = command(
        sub, "audit", "decide every vLLM deployment found in files and directories",
        description="Find vLLM deployments in deployment documents, vLLM --config files, shell scripts, Dockerfiles and "
                    "Kubernetes manifests, decide each one, and report. Nothing found is executed or imported.",
        epilog="exit status: 0 the audit completed (whatever the outcomes), 1 a --fail-on condition is met, "
               "2 usage, invalid rules, a missing path, or the report or log cannot be written")
    audit.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to audit")
    audit.add_argument("--format", choices=REPORT_FORMATS, default="text", help="report format (default: text)")
    audit.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output "
                       "(`-`: standard output)")
    audit.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                       help="processes (default: 1; auto: one per CPU this process may use); the report is the same for every N")
    policy_option(audit)
    version_option(audit)
    audit.add_argument("--fail-on", type=_conditions, default=(), metavar="LIST",
                       help=f"exit 1 when any of these is found (comma-separated): {', '.join(FAIL_ON_CONDITIONS)}")
    audit.add_argument("--config-root", action="append", default=[], metavar="DIR",
                       help="a further directory --config files may be read from (default: only the audited paths)")
    _log_options(audit)

    schema = command(sub, "schema", "print a JSON Schema (for editors and validators)")
    schema.add_argument("name", nargs="?", choices=SCHEMAS, metavar="NAME",
                        help=f"one of {', '.join(SCHEMAS)} (default: list them, with their $id)")
    completion = command(sub, "completion", "print the shell completion script",
                         description="Print the completion script for SHELL; for bash: "
                                     "eval \"$(hma-policy completion bash)\" in ~/.bashrc")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), metavar="SHELL", help="bash, zsh or fish")

    serve = command(sub, "serve", "run the decision service and Kubernetes admission webhook (HTTP)",
                    description="Serve decisions over HTTP: POST /v1/decide, POST /v1/admission (a Kubernetes "
                                "admission webhook), GET /healthz, /readyz, /metrics. Needs the server extra: "
                                "pip install 'hma-policy[server]'. SIGHUP reloads the rules; SIGTERM stops gracefully.",
                    epilog="exit status: 0 stopped by SIGTERM or SIGINT, 2 usage, invalid rules, or the server cannot start")
    from .server.options import add_arguments as serve_arguments

    serve_arguments(serve)

    log = command(sub, "log", "work with decision logs")
    log_sub = log.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")
    log_verify = command(log_sub, "verify", "check a decision log for edits, deletions, reordering, truncation and a torn tail")
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


# `hma-policy decide -- vllm serve MODEL ...`: the words after `--` are the
# command a launcher would run, when they start vLLM's server (else they are
# files, as `--` means elsewhere).
LAUNCH = "(command)"


def _launch_words(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` with a launch command after ``--`` taken out (as one
    LAUNCH argument), and the command's words (None: there is none)."""
    if not argv or argv[0] != "decide" or "--" not in argv:
        return argv, None
    at = argv.index("--")
    words = argv[at + 1:]
    program = os.path.basename(words[0]) if words else ""
    if program != "vllm" and not program.startswith("python"):
        return argv, None
    return [*argv[:at], LAUNCH], words


def _decide(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    """decide (FILE...) and explain (FILE): the worst exit status of the files."""
    files = args.file if isinstance(args.file, list) else [args.file]
    with opened(args.rules) as ref:
        policy = load_set(ref, args.vllm_version)
    log = _open_log(args) if getattr(args, "log", None) else None
    fmt = getattr(args, "format", "text")
    if fmt == "json":
        args.console.note(f"policy {label(ref, policy.digest)}")
    codes, texts, data = [], [], []
    try:
        for file in files:
            document = None
            try:
                if file == LAUNCH and getattr(args, "launch", None) is not None:
                    # The environment vLLM would run with is this one; a --config file is read from here.
                    decision = policy.decide_command(args.launch, env=dict(os.environ), cwd=os.getcwd())
                else:
                    document = read_document(file, stdin=stdin)
                    decision = policy.decide(document)
            except InputError as exc:
                decision = policy.refused(exc.problems, document)
            if log is not None:
                log.append(decision, source=file, document=document)
            codes.append(_exit_code(decision))
            if fmt == "json":
                data.append(explain_dict(decision) if args.command == "explain" else decision.to_dict())
            elif args.command == "explain" and decision.steps:
                texts.append(render_explain(decision) + f"\npolicy: {decision.policy_digest} ({ref.name})")
            else:
                texts.append(render_text(decision, source=file, policy=ref.name))
    finally:
        if log is not None:
            log.close()
    if fmt == "json":
        # One document: its decision, as always; several: a list of {file, decision}.
        value: Any = data[0] if len(files) == 1 else [{"file": f, "decision": d} for f, d in zip(files, data)]
        return max(codes), json.dumps(value, indent=2, ensure_ascii=False)
    return max(codes), "\n\n".join(texts)


def _validate(args: argparse.Namespace, stdin: Any) -> tuple[int, str]:
    """validate: the document as the release that decides it reads it (the
    release it names, or --vllm-version, or the newest; its schema and
    options). Not the decision: a configuration vLLM rejects is valid input."""
    with opened(args.rules) as ref:
        policy = load_set(ref, args.vllm_version)
    try:
        decision = policy.decide(read_document(args.file, stdin=stdin))
    except InputError as exc:
        return EXIT_INVALID, "\n".join(p.render() for p in exc.problems)
    named = decision.vllm.source not in (DEFAULT_SOURCE, "rules folder")
    return EXIT_OK, f"{args.file}: valid" + (f" (vLLM {decision.vllm.release})" if named else "")


def _audit(args: argparse.Namespace, stdin: Any) -> tuple[int, str | _Streamed | None, Any]:
    """The audit command: its exit status, its output, and what it made
    (the report, the policy), which the console command leaves to the
    process's end rather than freeing (see _finish)."""
    # Loaded here, not by audit(): a console command leaves it (and its
    # memos) to the process's end; main() closes it.
    with opened(args.rules) as ref:
        policy = load_set(ref, args.vllm_version)
        try:
            return _audit_report(args, policy, ref)
        finally:
            if not args.finish:
                policy.close()


def _audit_report(args: argparse.Namespace, policy: Any, ref: Any) -> tuple[int, str | _Streamed | None, Any]:
    from .audit.run import AuditError, audit, progress_bar
    from .core.errors import Problem
    from .audit.report import render, write
    from .fileio import atomic_write

    if args.format == "github":  # every other report names the policy it was made with
        args.console.note(f"policy {label(ref, policy.digest)}")
    log = _open_log(args) if args.log else None
    try:
        # Only the decision log shows documents: without --log they are let go,
        # and a JSON report without one needs only the rendered text and the counts.
        report = audit(args.paths, policy=policy, jobs=args.jobs, config_roots=args.config_root,
                       progress=None if args.console.quiet else progress_bar(sys.stderr),
                       documents=log is not None, prerender=args.format == "json",
                       entries=log is not None or args.format != "json")
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
    if args.output and args.output != "-":  # (`-o -`: standard output, as `rules wheel -o -` writes)
        try:
            with atomic_write(args.output) as handle:
                write(report, args.format, handle)
        except OSError as exc:
            raise AuditError([Problem("audit.output", f"cannot write the report: {exc.strerror or exc}", file=args.output)]) from None
        summary = report.summary()
        args.console.note(f"wrote {args.output} ({args.format}): {summary['deployments']} deployment(s), "
                          + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
                          + f"; {summary['problems']} file problem(s)")
        return code, None, (report, policy)
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
    from .audit.declog_verify import repair, verify

    result = repair(args.file) if args.repair else verify(args.file)
    if args.repair and result.torn_bytes == 0 and result.repaired is None and not result.ok:
        return EXIT_REJECTED, result.render() + "\nnot repaired: --repair mends only a torn tail, and the log has other problems"
    return (EXIT_OK if result.ok else EXIT_REJECTED), result.render()


def _serve(args: argparse.Namespace, stdin: Any) -> tuple[int, None]:
    from .server.run import serve  # needs the server extra, which serve checks for

    return serve(args, stdin)


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
    con = Console()
    try:
        parser = _parser()
        if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions (hma-policy completion SHELL)
            import argcomplete

            argcomplete.autocomplete(parser)
        argv, launch = _launch_words(list(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)
        args.launch = launch
        args.finish = finish
        args.console = con = console(args)
        # An audit's report and memos are kept to the end of the command: the
        # cyclic collector's passes would only rescan them (a third of a large
        # report's rendering). The audit pauses it while files are examined;
        # the command keeps it paused until its output is written.
        paused = args.command == "audit" and gc.isenabled()
        if paused:
            gc.disable()
        if args.command in ("rules", "test", "diff", "registry", "schema", "completion"):  # the authoring commands
            from .authoring import commands

            handler = getattr(commands, args.command)
        else:
            handler = {"validate": _validate, "audit": _audit, "log": _log, "serve": _serve}.get(args.command, _decide)
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
    except UsageError as exc:
        print(f"hma-policy: error: {exc}", file=stderr)
        return EXIT_INVALID
    except PolicyRefError as exc:  # --rules names nothing: a usage error
        for problem in exc.problems:
            print(f"hma-policy: {problem.render()}", file=stderr)
        return EXIT_INVALID
    except InvalidRules as exc:
        from .authoring.commands import problem_lines

        print(f"hma-policy: the rules are invalid ({exc.ref.name}):", file=stderr)
        print("\n".join(problem_lines(exc.problems, exc.ref, style=con.err, indent="  ")), file=stderr)
        return EXIT_INVALID
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
