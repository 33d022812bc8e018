"""The policy author's commands: ``rules check|verify|init``, ``test``,
``diff``, ``registry from-wheel|render``, ``schema`` and ``completion`` (the
command line's parser is in cli.py, which calls these with the parsed
arguments).

Each returns ``(exit status, text for standard output or None)``; errors
that stop a command are raised (clisupport.UsageError, InvalidRules, ...)
and reported by cli.py. Problems are shown as diagnostics.py renders them:
``path:line:col`` from the current directory, with the source line and a
caret (``--format concise``: one line each).
"""

from __future__ import annotations

import contextlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from ..clisupport import UsageError, label, load
from ..core import yamlsafe
from ..core.errors import InputError, PolicyError, Problem
from ..policyref import PolicyRef, opened
from .diagnostics import PLAIN, Diagnostic, Sources, Style, bundled_rules_dir, display_path, from_problem, render

__all__ = ["rules", "test", "diff", "registry", "schema", "completion", "problem_lines"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _rules_base(ref: PolicyRef) -> Path:
    return ref.directory if ref.directory is not None else bundled_rules_dir()


def _diagnostics(problems: Iterable[Problem], ref: PolicyRef) -> list[Diagnostic]:
    """Rule-file problems, their files named from the current directory."""
    spec = str(ref.directory) if ref.directory is not None else "bundled"
    return [from_problem(p, _rules_base(ref), spec=spec) for p in problems]


def problem_lines(problems: Iterable[Problem], ref: PolicyRef, *, style: Style = PLAIN, concise: bool = False,
                  indent: str = "") -> list[str]:
    """Rule-file problems as the lines an author reads."""
    return render(_diagnostics(problems, ref), concise=concise, style=style, indent=indent)


def _finding_dict(d: Diagnostic) -> dict[str, Any]:
    """A located diagnostic as ci_formats reads it."""
    return {"code": d.code, "level": d.level, "message": d.message, "file": d.file, "line": d.line, "column": d.column}


def _problem_json(d: Diagnostic) -> dict[str, Any]:
    return {"code": d.code, "message": d.message, "file": d.file, "line": d.line, "column": d.column, "path": d.path,
            "hint": d.hint}


def _ci(fmt: str, diagnostics: Iterable[Diagnostic], sources: Sources | None = None,
        policy: dict[str, Any] | None = None) -> str:
    from ..audit.ci_formats import github, sarif

    sources = sources or Sources()
    findings = [_finding_dict(sources.located(d)) for d in diagnostics]
    return sarif(findings, policy=policy) if fmt == "sarif" else github(findings)


# -- rules check | verify | init -------------------------------------------------------

def rules(args: Any, stdin: Any) -> tuple[int, str | None]:
    if args.rules_command == "init":
        return _init(args)
    if args.dir is not None and args.rules is not None:
        raise UsageError(f"rules {args.rules_command}: name the rules once, with --rules (DIR is its older spelling)")
    with opened(args.dir if args.dir is not None else args.rules) as ref:
        return _check(args, ref)


def _check(args: Any, ref: PolicyRef) -> tuple[int, str]:
    from ..core.policy import load_policy
    from .verify import verify

    con, fmt = args.console, args.format
    base = _rules_base(ref)
    if fmt == "github":  # the other formats name it
        con.note(f"policy {ref.name}")
    try:
        policy = load_policy(ref.directory, release=ref.release)  # vllm:X checks that release's policy
    except PolicyError as exc:
        diagnostics = _diagnostics(exc.problems, ref)
        if fmt == "json":
            return EXIT_FAILED, json.dumps({"ok": False, "policy": ref.name, "rules_dir": display_path(base), "problems": [
                {"code": p.code, "message": p.message, "file": p.file, "line": p.line, "column": p.column,
                 "path": p.path, "hint": p.hint} for p in exc.problems]}, indent=2)
        if fmt in ("sarif", "github"):
            return EXIT_FAILED, _ci(fmt, diagnostics, policy={"source": ref.name})
        lines = render(diagnostics, concise=fmt == "concise", style=con.out)
        lines.append(f"{len(exc.problems)} problem(s) in {ref.name}")
        return EXIT_FAILED, "\n".join(lines)
    model = policy.model
    for note in model.notes:  # what the loader did for the author (an old rule folder's missing sections)
        con.note(f"note: {note.file}: {note.code}: {note.message}" + (f" (hint: {note.hint})" if note.hint else ""))
    try:
        report = verify(policy)
    finally:
        policy.close()
    errors = report.errors
    shown = report.findings if args.rules_command == "verify" else errors
    sources = Sources()
    by_finding = {id(f): sources.located(_finding_diagnostic(f, base)) for f in report.findings}
    if fmt == "json":
        data = report.to_dict()
        data["digest"] = model.digest
        data["policy"] = ref.name
        data["rules_dir"] = display_path(base)
        for finding, item in zip(report.findings, data["findings"]):
            item.setdefault("line", by_finding[id(finding)].line)
            item.setdefault("column", by_finding[id(finding)].column)
        return (EXIT_FAILED if errors else EXIT_OK), json.dumps(data, indent=2, ensure_ascii=False, default=list)
    if fmt in ("sarif", "github"):
        return (EXIT_FAILED if errors else EXIT_OK), _ci(fmt, [by_finding[id(f)] for f in shown], sources,
                                                          policy={"source": ref.name, "digest": model.digest})
    lines = render([by_finding[id(f)] for f in shown], concise=fmt == "concise", style=con.out, sources=sources)
    verdict = "ok" if not errors else "FAILED"
    if con.out.reset:
        verdict = f"{con.out.level('note' if not errors else 'error')}{verdict}{con.out.reset}"
    lines.append(
        f"{verdict}: {ref.name} ({model.digest[:19]}): "
        f"{report.rules_fired}/{report.rules_total} rules fire; "
        f"{sum(report.combinations.values())} reachable step inputs checked "
        f"({', '.join(f'{k} {v}' for k, v in report.combinations.items())}); "
        f"{report.runtime_checks} checked against durable-rules; "
        f"decision outcomes reachable: {', '.join(sorted(report.outcomes))}; "
        f"{len(errors)} error(s), {len(report.findings) - len(errors)} order-dependent overlap(s) resolved by hit policy first"
    )
    return (EXIT_FAILED if errors else EXIT_OK), "\n".join(lines)


def _finding_diagnostic(f: Any, base: Path) -> Diagnostic:
    """A verifier finding as a diagnostic. Its line is the finding's own
    when it has one, else the line of its JSON Pointer in its file."""
    detail = []
    if f.facts:
        detail.append("facts: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in f.facts))
    if f.document is not None:
        detail.append("counterexample: " + json.dumps(f.document, ensure_ascii=False, sort_keys=True))
    elif f.reproduced is False:
        detail.append("counterexample: none of the witness documents reaches these facts")
    return Diagnostic(f.code, f.message, "error" if f.severity == "error" else "note",
                      display_path(base / f.file) if f.file else None,
                      getattr(f, "line", None), getattr(f, "column", None), f.path, getattr(f, "hint", None), tuple(detail))


# `rules init`: the schema headers of the copy name the schemas written beside
# it, in DIR/schemas/, by a path relative to each file. An editor then
# validates the copy offline, against the schemas of the engine that wrote it
# (the $id URLs are names, not addresses an editor can fetch).
_HEADER = re.compile(r"^(# yaml-language-server: \$schema=)\S*?([a-z]+\.schema\.json)[ \t]*$", re.M)


# The registry's name in a copy (a plain rules folder), as rule folders have
# always named it.
REGISTRY_FILE = "connectors.yaml"


def bundle(release: str | None = None) -> dict[str, bytes]:
    """The files ``rules init`` writes: the policy of one bundled release
    (None: the newest) as a plain rules folder (its epoch's rule files and
    its registry, as connectors.yaml, and its module table, as modules.json),
    its tests in tests/, and schemas/,
    with each yaml-language-server header pointing at schemas/."""
    from ..core.modules import FOLDER_FILE
    from ..core.releases import bundled

    releases = bundled()
    chosen = releases.get(release or releases.default)
    root = resources.files("hma_policy.rules")
    sources = [(name.rsplit("/", 1)[-1], root.joinpath(name)) for name in releases.files(chosen)]
    sources[-1] = (REGISTRY_FILE, sources[-1][1])  # the registry comes last
    if chosen.modules is not None:  # the release's module table, which the node facts read
        sources.append((FOLDER_FILE, root.joinpath(chosen.modules)))
    tests = root.joinpath(releases.tests(chosen))
    if tests.is_dir():
        sources += [("tests/" + e.name, e) for e in sorted(tests.iterdir(), key=lambda e: e.name)
                    if e.is_file() and e.name.endswith((".yaml", ".yml"))]
    files: dict[str, bytes] = {}
    for name, entry in sources:
        depth = name.count("/")
        text = _HEADER.sub(lambda m: f"{m.group(1)}{'../' * depth}schemas/{m.group(2)}", entry.read_text("utf-8"))
        files[name] = text.encode("utf-8")
    for entry in sorted(resources.files("hma_policy.schemas").iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(".schema.json"):
            files["schemas/" + entry.name] = entry.read_bytes()
    return files


def _init(args: Any) -> tuple[int, None]:
    from ..fileio import write_tree

    target = Path(args.target)
    if target.exists() and not target.is_dir():
        raise UsageError(f"rules init: `{args.target}` is a file, not a directory")
    occupied = target.is_dir() and any(target.iterdir())
    if occupied and not args.force:
        raise UsageError(f"rules init: `{args.target}` is not empty; choose another directory, or --force to write into it")
    try:
        files = bundle(args.vllm_version)
    except InputError as exc:
        raise UsageError(f"rules init: --vllm-version: {exc.problems[0].message}") from None
    write_tree(target, files, into_existing=occupied)
    release = yamlsafe.load(files[REGISTRY_FILE].decode("utf-8"))[0].get("vllm_version", "?")
    args.console.note(f"wrote a copy of the bundled rules of vLLM {release} to {display_path(target)} ({len(files)} files); "
                      f"check it with: hma-policy rules check --rules {display_path(target)}")
    return EXIT_OK, None


# -- test --------------------------------------------------------------------------------

def test(args: Any, stdin: Any) -> tuple[int, str | None]:
    from .testing import check_names, default_test_paths, load_cases, run_cases

    con, fmt = args.console, args.format
    for path in args.paths:
        if path != "-" and not Path(path).exists():
            raise UsageError(f"test: no such test file or directory: `{path}`")
    if list(args.paths).count("-") > 1:
        raise UsageError("test: standard input (-) can be read once")
    with opened(args.rules) as ref:
        policy = load(ref, args.vllm_version)
        try:
            con.note(f"policy {label(ref, policy.digest)} for vLLM {policy.release}")
            paths = list(args.paths) or default_test_paths(ref.directory, policy.release if policy.model.bundle else None)
            try:
                cases = load_cases(paths, stdin=stdin)
                problems = check_names(policy.model, cases)
            except PolicyError as exc:
                cases, problems = [], list(exc.problems)
            if problems:
                return _test_problems(fmt, [from_problem(p) for p in sorted(problems, key=Problem.sort_key)], con)
            suite = run_cases(policy, cases)
        finally:
            policy.close()
    below = args.threshold is not None and suite.coverage < args.threshold
    ran = suite.passed + suite.failed
    code = EXIT_FAILED if (suite.failed or below or ran == 0) else EXIT_OK
    data: dict[str, Any] = {  # the JSON report
        "passed": suite.passed, "failed": suite.failed, "skipped": suite.skipped,
        "coverage": round(suite.coverage, 2), "rules": len(suite.rules), "uncovered": suite.uncovered,
        "registry": {"total": len(suite.registry_rules), "uncovered": [r for r in suite.registry_rules if r not in suite.fired]},
        "cases": [{"id": r.case.id, "file": display_path(r.case.path) if r.case.path != "-" else "-", "line": r.case.line,
                   "passed": r.passed, "skipped": r.skipped, "skip": r.case.skip, "mismatches": r.mismatches}
                  for r in suite.results],
    }
    if fmt == "json":
        return code, json.dumps(data, indent=2)
    used = {"source": ref.name, "digest": policy.digest}
    if fmt == "junit":
        from ..audit.ci_formats import junit_test

        return code, junit_test({**data, "policy": used})
    if fmt in ("sarif", "github"):
        diagnostics = [Diagnostic("tests.failed", f"{c['id']}: " + "; ".join(c["mismatches"]), "error", c["file"], c["line"])
                       for c in data["cases"] if not c["passed"]]
        if ran == 0:
            diagnostics.append(Diagnostic("tests.none_ran", "no test ran"))
        if below:
            diagnostics.append(Diagnostic("tests.coverage", f"coverage {suite.coverage:.1f}% is below the threshold {args.threshold:g}%"))
        return code, _ci(fmt, diagnostics, policy=used)
    style = con.out
    tag = {kind: f"{style.level(level)}{kind}{style.reset}" for kind, level in (("PASS", "note"), ("FAIL", "error"), ("SKIP", "warning"))}
    lines = []
    for result in suite.results:
        if result.skipped:
            lines.append(f"{tag['SKIP']} {result.case.id} ({result.case.skip})")
        elif not result.passed:
            where = data["cases"][suite.results.index(result)]
            lines.append(f"{tag['FAIL']} {result.case.id}" + (f"  ({where['file']}:{where['line']})" if where["line"] else ""))
            lines += [f"    {m}" for m in result.mismatches]
        elif args.verbose:
            lines.append(f"{tag['PASS']} {result.case.id}")
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


def _test_problems(fmt: str, diagnostics: list[Diagnostic], con: Any) -> tuple[int, str | None]:
    """Test files that cannot run (invalid, or naming what the policy does
    not define): exit 2; the problems are the output of a data format, else
    errors on standard error."""
    import sys

    if fmt == "json":
        return EXIT_USAGE, json.dumps({"problems": [_problem_json(d) for d in diagnostics]}, indent=2)
    if fmt == "junit":
        from ..audit.ci_formats import junit_test

        return EXIT_USAGE, junit_test({"problems": [_problem_json(d) for d in diagnostics]})
    if fmt in ("sarif", "github"):
        return EXIT_USAGE, _ci(fmt, diagnostics)
    lines = render(diagnostics, concise=fmt == "concise", style=con.err)
    lines.append(f"{len(diagnostics)} problem(s) in the test files; no test ran")
    print("\n".join(lines), file=sys.stderr)
    return EXIT_USAGE, None


# -- diff ----------------------------------------------------------------------------------

def diff(args: Any, stdin: Any) -> tuple[int, str]:
    from .impact import impact, render as render_impact

    con = args.console
    base, head = args.base, args.head
    if base is None and head is None:
        raise UsageError("diff: name the changed policy (--head POLICY), and the one before it (--base POLICY; default: bundled)")
    if head is None:
        # One policy named: it is the change, compared against the bundled rules.
        base, head = None, base
        con.note(f"diff: no --head: comparing {head} against the bundled rules (bundled -> {head}); "
                 "give --head to choose the direction")
    for path in args.corpus:
        if not Path(path).exists():
            raise UsageError(f"diff: no such file or directory: `{path}`")
    with contextlib.ExitStack() as stack:
        base_ref, head_ref = stack.enter_context(opened(base)), stack.enter_context(opened(head))
        base_policy = load(base_ref)
        stack.callback(base_policy.close)
        head_policy = load(head_ref)
        stack.callback(head_policy.close)
        if args.format == "json":
            con.note(f"policies: base {label(base_ref, base_policy.digest)}, head {label(head_ref, head_policy.digest)}")
        report = impact(base_policy, head_policy, args.corpus, base_name=base_ref.name, head_name=head_ref.name,
                        config_roots=args.config_root)
    if args.format == "json":
        return EXIT_OK, json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    return EXIT_OK, render_impact(report)


# -- registry from-wheel | render ------------------------------------------------------------

def registry(args: Any, stdin: Any) -> tuple[int, str | None]:
    """A release's registry from its wheel (with ``--facts``/``--options``/
    ``--configs`` and ``--modules`` too), or from recorded facts. Everything is read and rendered before the
    first file is written, so an error writes nothing; each file is written
    atomically. Errors are WheelError (wheel.*, facts.*, registry.output)."""
    from .wheel import (WheelError, configs_json, facts_json, load_facts, modules_json, options_json, read_configs,
                        read_options, read_wheel, render_registry)

    outputs: list[tuple[str, str]] = []  # (file, text), written in this order
    if args.registry_command == "from-wheel":
        facts = read_wheel(args.wheel)
        if args.facts:
            outputs.append((args.facts, facts_json(facts)))
        if args.options:
            outputs.append((args.options, options_json(read_options(args.wheel))))
        if args.configs:
            outputs.append((args.configs, configs_json(read_configs(args.wheel))))
        source = args.wheel
    else:
        facts = load_facts(args.from_facts)
        source = args.from_facts
    try:
        text = render_registry(facts)
    except WheelError as exc:
        raise exc.at(source) from None
    if args.modules:
        if "modules" not in facts:
            raise WheelError("facts.invalid", "recorded without the module table (read the wheel again)", source)
        outputs.append((args.modules, modules_json(facts)))
    if args.output in (None, "-"):
        _write_all(outputs, args.console)
        return EXIT_OK, text.removesuffix("\n")  # printed with its newline
    _write_all(outputs + [(args.output, text)], args.console)
    return EXIT_OK, None


def _write_all(outputs: list[tuple[str, str]], con: Any) -> None:
    from ..fileio import atomic_write
    from .wheel import WheelError

    for path, text in outputs:
        try:
            with atomic_write(path) as stream:
                stream.write(text.encode("utf-8"))
        except OSError as exc:
            raise WheelError("registry.output", f"cannot write it: {exc.strerror or exc}", path) from None
        con.note(f"wrote {path}")


# -- schema, completion ------------------------------------------------------------------------

def schema(args: Any, stdin: Any) -> tuple[int, str]:
    from ..core.schema import SCHEMAS

    folder = resources.files("hma_policy.schemas")
    if args.name is None:
        return EXIT_OK, "\n".join(f"{name}\t{json.loads(folder.joinpath(f'{name}.schema.json').read_text('utf-8'))['$id']}"
                                  for name in SCHEMAS)
    return EXIT_OK, folder.joinpath(f"{args.name}.schema.json").read_text("utf-8").rstrip("\n")


def completion(args: Any, stdin: Any) -> tuple[int, str]:
    import argcomplete

    return EXIT_OK, argcomplete.shellcode(["hma-policy"], shell=args.shell).rstrip("\n")
