"""Policy tests as data (``hma-policy test``), with rule coverage.

A test file (schemas/tests.schema.json) lists cases: a deployment document,
or a JSON merge patch (RFC 7386) over a named base document, and what the
decision must be: outcome, hma_enabled, the first error, the exact set of
warning codes, and rules that must (not) fire. Coverage counts the rules of
the policy that fired in at least one case.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from ..core import yamlsafe
from ..core.errors import InputError, PolicyError, Problem
from ..core.schema import iter_problems
from ..fileio import open_regular

__all__ = ["Case", "CaseResult", "Suite", "load_cases", "run_cases", "merge_patch", "default_test_paths"]


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
    file: str
    name: str
    document: Any
    expect: dict[str, Any]
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.file} > {self.name}"


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


def default_test_paths(rules_dir: str | Path | None) -> list[Any]:
    """The tests shipped beside a rules directory (``tests/`` inside it)."""
    root = resources.files("hma_policy.rules") if rules_dir is None else Path(rules_dir)
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


def _read_text(path: Any) -> str:
    if isinstance(path, Path):  # a file the user named: a FIFO or a device would block, or never end
        with open_regular(path) as handle:
            return handle.read().decode("utf-8")
    return path.read_text("utf-8")  # a bundled test file (importlib.resources)


def load_cases(paths: Iterable[Any]) -> list[Case]:
    """Read and validate test files; raises PolicyError listing every problem."""
    cases: list[Case] = []
    problems: list[Problem] = []
    for path in _files(paths):
        name = getattr(path, "name", str(path))
        try:
            data, _ = yamlsafe.load(_read_text(path))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("tests.read", f"cannot read test file: {exc}", file=str(path)))
            continue
        except yamlsafe.YamlProblem as exc:
            problems.append(Problem("tests.parse", f"invalid YAML: {exc.message}", file=str(path), line=exc.line, column=exc.column))
            continue
        found = [Problem(p.code, p.message, p.path, p.hint, file=str(path)) for p in iter_problems("tests", data, default_code="tests.schema")]
        if found:
            problems += found
            continue
        bases = data.get("bases") or {}
        for index, raw in enumerate(data["cases"]):
            if "base" in raw:
                if raw["base"] not in bases:
                    problems.append(Problem("tests.unknown_base", f"case `{raw['name']}` patches unknown base `{raw['base']}`",
                                            f"/cases/{index}/base", file=str(path)))
                    continue
                document = merge_patch(bases[raw["base"]], raw.get("patch") or {})
            else:
                document = raw["document"]
            cases.append(Case(name, raw["name"], document, raw["expect"], raw.get("skip")))
    if problems:
        raise PolicyError(problems)
    return cases


def _check(case: Case, decision: Any | None, error: InputError | None) -> tuple[list[str], tuple[str, ...]]:
    expect = case.expect
    if error is not None:
        first = error.problems[0]
        actual = {"outcome": "error", "hma_enabled": None, "error": {"stage": "input", "code": first.code, "path": first.path},
                  "warnings": [], "trace": ()}
    else:
        d = decision.to_dict()
        first = d["errors"][0] if d["errors"] else None
        actual = {"outcome": d["outcome"], "hma_enabled": d["hma_enabled"],
                  "error": {"stage": first["stage"], "code": first["code"], "path": first["path"]} if first else None,
                  "warnings": [w["code"] for w in d["warnings"]], "trace": tuple(d["trace"])}
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
    model = policy.model
    rules = tuple(r.id for steps in model.steps.values() for s in steps for r in s.rules)
    registry = tuple(r for r in rules if r.startswith("registry."))
    results: list[CaseResult] = []
    fired: set[str] = set()
    for case in cases:
        if case.skip:
            results.append(CaseResult(case, True, skipped=True))
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
