"""Policy tests as data (``hma-policy test``), with rule coverage.

A test file (schemas/tests.schema.json) lists cases: a deployment document,
or a JSON merge patch (RFC 7386) over a named base document, and what the
decision must be: outcome, hma_enabled, the first error, the exact set of
warning codes, and rules that must (not) fire. Coverage counts the rules of
the policy that fired in at least one case.

The tests of an epoch (rules/epochs/<epoch>/tests/) serve every release of
the epoch: a case that holds for some of them names them (``since``,
``until``), the policy of another release skips it, and coverage counts only
the rules that can fire for the policy's release (a rule that tests another
release of the epoch cannot, nor a registry lookup that repeats another).

Every problem of a test file is located (file, line, column). An expectation
that names a rule id, an error code or a warning code the policy does not
define could never fail (``not_fired: [a typo]``) or never pass: it is an
error (:func:`check_names`), with a did-you-mean.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from ..core import yamlsafe
from ..core.errors import InputError, PolicyError, Problem, suggest
from ..core.schema import iter_problems, load_schema
from ..fileio import open_regular
from .diagnostics import locate

__all__ = ["Case", "CaseResult", "Suite", "load_cases", "check_names", "run_cases", "merge_patch", "default_test_paths",
           "INPUT_CODES"]

# The error codes of stage `input`, which the engine raises before any rule
# runs (docs/decision.md lists them; tests/test_authoring.py holds the two
# equal). The deployment schema's `x-code` annotations add their own.
INPUT_CODES = ("input.schema", "input.parse", "input.duplicate_key", "input.type", "input.encoding", "input.read",
               "input.limit", "input.not_regular", "input.empty", "input.unreadable")


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", version))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (returns a new value)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass(frozen=True)
class Case:
    file: str  # the test file's name
    name: str
    document: Any
    expect: dict[str, Any]
    skip: str | None = None
    path: str = ""  # the test file as given (or found in a directory given)
    index: int = 0  # its position in the file's `cases`
    # Where each value of the file is (JSON Pointer -> line, column), shared by its cases.
    marks: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)
    since: str | None = None  # the releases the case is for (inclusive; None: no bound)
    until: str | None = None

    @property
    def id(self) -> str:
        return f"{self.file} > {self.name}"

    def for_release(self, release: str) -> bool:
        """Whether the case is for vLLM ``release`` (``since``..``until``)."""
        at = _release_key(release)
        return ((self.since is None or _release_key(self.since) <= at)
                and (self.until is None or at <= _release_key(self.until)))

    def releases(self) -> str:
        """The releases the case is for, in words."""
        if self.since and self.until:
            return f"vLLM {self.since} to {self.until}"
        return f"vLLM {self.since} and later" if self.since else f"vLLM {self.until} and earlier"

    def locate(self, pointer: str) -> tuple[int | None, int | None]:
        """The line and column of ``pointer`` (the nearest located ancestor)."""
        return locate(self.marks, pointer)

    @property
    def line(self) -> int | None:
        return self.locate(f"/cases/{self.index}")[0]


@dataclass
class CaseResult:
    case: Case
    passed: bool
    skipped: bool = False
    mismatches: list[str] = field(default_factory=list)
    trace: tuple[str, ...] = ()


@dataclass
class Suite:
    results: list[CaseResult]
    rules: tuple[str, ...]
    registry_rules: tuple[str, ...]
    fired: set[str]

    @property
    def passed(self) -> int:
        return sum(r.passed and not r.skipped for r in self.results)

    @property
    def failed(self) -> int:
        return sum(not r.passed for r in self.results)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.results)

    @property
    def uncovered(self) -> list[str]:
        return [r for r in self.rules if r not in self.fired]

    @property
    def coverage(self) -> float:
        return 100.0 * (len(self.rules) - len(self.uncovered)) / len(self.rules) if self.rules else 100.0


def default_test_paths(rules_dir: str | Path | None, release: str | None = None) -> list[Any]:
    """The tests shipped beside a rules directory: ``tests/`` inside it, or
    in a bundle of releases the tests of the release's epoch
    (``epochs/<epoch>/tests/``; ``release`` None: the default)."""
    from ..core.releases import bundled, of_folder

    root = resources.files("hma_policy.rules") if rules_dir is None else Path(rules_dir)
    releases = bundled() if rules_dir is None else of_folder(rules_dir)
    if releases is not None:
        folder = root.joinpath(releases.tests(releases.get(release or releases.default)))
    else:
        folder = root.joinpath("tests")
    return [folder] if folder.is_dir() else []


def _files(paths: Iterable[Any]) -> list[Any]:
    out = []
    for path in paths:
        path = Path(path) if isinstance(path, str) else path
        if path.is_dir():
            out += sorted((p for p in path.iterdir() if p.name.endswith((".yaml", ".yml"))), key=lambda p: p.name)
        else:
            out.append(path)
    return out


def _located(code: str, message: str, pointer: str, file: str, marks: dict[str, tuple[int, int]],
             hint: str | None = None) -> Problem:
    line, column = locate(marks, pointer)
    return Problem(code, message, pointer, hint, file=file, line=line, column=column)


def _read_text(path: Any, stdin: Any) -> str:
    if str(path) == "-":
        raw = (stdin.buffer if hasattr(stdin, "buffer") else stdin).read()
        return raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
    if isinstance(path, Path):  # a file the user named: a FIFO or a device would block, or never end
        with open_regular(path) as handle:
            return handle.read().decode("utf-8")
    return path.read_text("utf-8")  # a bundled test file (importlib.resources)


def load_cases(paths: Iterable[Any], *, stdin: Any = None) -> list[Case]:
    """Read and validate test files (``-``: the one read from ``stdin``);
    raises PolicyError listing every problem, each with its line."""
    cases: list[Case] = []
    problems: list[Problem] = []
    for path in _files(paths):
        name = getattr(path, "name", str(path))
        where = str(path)
        try:
            data, marks = yamlsafe.load(_read_text(path, stdin), marks=True)
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("tests.read", f"cannot read test file: {exc}", file=where))
            continue
        except yamlsafe.YamlProblem as exc:
            problems.append(Problem("tests.parse", f"invalid YAML: {exc.message}", file=where, line=exc.line, column=exc.column))
            continue
        found = [_located(p.code, p.message, p.path, where, marks, p.hint)
                 for p in iter_problems("tests", data, default_code="tests.schema")]
        if found:
            problems += found
            continue
        bases = data.get("bases") or {}
        for index, raw in enumerate(data["cases"]):
            if "base" in raw:
                if raw["base"] not in bases:
                    problems.append(_located("tests.unknown_base", f"case `{raw['name']}` patches unknown base `{raw['base']}`",
                                             f"/cases/{index}/base", where, marks, suggest(raw["base"], bases)))
                    continue
                document = merge_patch(bases[raw["base"]], raw.get("patch") or {})
            else:
                document = raw["document"]
            cases.append(Case(name, raw["name"], document, raw["expect"], raw.get("skip"), where, index, marks,
                              since=raw.get("since"), until=raw.get("until")))
    if problems:
        raise PolicyError(problems)
    return cases


def _schema_codes(node: Any) -> set[str]:
    """The `x-code` annotations of a schema: codes the schema check raises."""
    out: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("x-code"), str):
                out.add(item["x-code"])
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return out


def check_names(model: Any, cases: Iterable[Case]) -> list[Problem]:
    """Problems for every rule id, error code and warning code that a case's
    expectation names and the policy (``model``, a PolicyModel) does not
    define: such an expectation tests nothing. Error codes are those of
    the rules' errors and the engine's input stage; warning codes those of
    the rules' warnings."""
    rules = [r for steps in model.steps.values() for s in steps for r in s.rules]
    known = {
        "rule": {r.id for r in rules},
        "error": {r.error["code"] for r in rules if r.error and "code" in r.error}
        | set(INPUT_CODES) | _schema_codes(load_schema("deployment")),
        "warning": {r.warning["code"] for r in rules if r.warning and "code" in r.warning},
    }
    problems: list[Problem] = []
    for case in cases:
        if not case.for_release(model.release):
            continue  # it names what another release's registry defines
        base = f"/cases/{case.index}/expect"
        named: list[tuple[str, str, str]] = []  # (kind, name, pointer)
        for key in ("fired", "not_fired"):
            named += [("rule", name, f"{base}/{key}/{i}") for i, name in enumerate(case.expect.get(key, ()))]
        error = case.expect.get("error")
        if isinstance(error, dict) and "code" in error:
            named.append(("error", error["code"], f"{base}/error/code"))
        named += [("warning", name, f"{base}/warnings/{i}") for i, name in enumerate(case.expect.get("warnings", ()))]
        for kind, name, pointer in named:
            if name not in known[kind]:
                what = {"rule": "rule id", "error": "error code", "warning": "warning code"}[kind]
                problems.append(_located(f"tests.unknown_{kind}",
                                         f"case `{case.name}` expects {what} `{name}`, which the policy does not define",
                                         pointer, case.path, case.marks, suggest(name, sorted(known[kind]))))
    return problems


def _check(case: Case, decision: Any | None, error: InputError | None) -> tuple[list[str], tuple[str, ...]]:
    expect = case.expect
    actual: dict[str, Any]  # outcome, hma_enabled, error, warnings, trace
    if error is not None:
        problem = error.problems[0]
        actual = {"outcome": "error", "hma_enabled": None,
                  "error": {"stage": "input", "code": problem.code, "path": problem.path}, "warnings": [], "trace": ()}
    else:
        assert decision is not None  # run_cases passes a decision or the InputError that stopped it
        d = decision.to_dict()
        first = d["errors"][0] if d["errors"] else None
        # Every rule that fired, the result steps' included (they make the outcome).
        fired = tuple(rule for visit in decision.trail for _, rule, _ in visit.steps if rule is not None)
        actual = {"outcome": d["outcome"], "hma_enabled": d["hma_enabled"],
                  "error": {"stage": first["stage"], "code": first["code"], "path": first["path"]} if first else None,
                  "warnings": [w["code"] for w in d["warnings"]], "trace": fired}
    out = []
    for key in ("outcome", "hma_enabled"):
        if key in expect and expect[key] != actual[key]:
            out.append(f"{key}: expected {json.dumps(expect[key])}, got {json.dumps(actual[key])}")
    if "error" in expect:
        want, got = expect["error"], actual["error"]
        if want is None or got is None:
            if want != got:
                out.append(f"error: expected {json.dumps(want)}, got {json.dumps(got)}")
        else:
            for key, value in want.items():
                if got.get(key) != value:
                    out.append(f"error.{key}: expected {json.dumps(value)}, got {json.dumps(got.get(key))}")
    if "warnings" in expect and sorted(set(expect["warnings"])) != sorted(set(actual["warnings"])):
        out.append(f"warnings: expected {sorted(set(expect['warnings']))}, got {sorted(set(actual['warnings']))}")
    for rule in expect.get("fired", ()):
        if rule not in actual["trace"]:
            out.append(f"fired: `{rule}` did not fire")
    for rule in expect.get("not_fired", ()):
        if rule in actual["trace"]:
            out.append(f"not_fired: `{rule}` fired")
    return out, actual["trace"]


def run_cases(policy: Any, cases: list[Case]) -> Suite:
    """Run every case against ``policy`` (a hma_policy.Policy)."""
    from .verify import can_fire

    model = policy.model
    rules = tuple(r.id for steps in model.steps.values() for s in steps for r in s.rules
                  if can_fire(r, s, model.release_facts))
    registry = tuple(r for r in rules if r.startswith("registry."))
    results: list[CaseResult] = []
    fired: set[str] = set()
    for case in cases:
        if case.skip:
            results.append(CaseResult(case, True, skipped=True))
            continue
        if not case.for_release(model.release):
            results.append(CaseResult(replace(case, skip=f"for {case.releases()}, not {model.release}"), True, skipped=True))
            continue
        decision = error = None
        try:
            decision = policy.decide(case.document)
        except InputError as exc:
            error = exc
        mismatches, trace = _check(case, decision, error)
        fired.update(trace)
        results.append(CaseResult(case, not mismatches, mismatches=mismatches, trace=trace))
    return Suite(results, rules, registry, fired)
