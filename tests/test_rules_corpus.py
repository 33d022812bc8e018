"""A corpus of broken rule directories, as data (tests/rules_corpus/).

Each case is a folder holding ``patch.yaml``, the edits that turn a copy of
the bundled rules/ into a broken rules directory, and ``expect.yaml``, the
exact problems the load-time checks must report for it, sorted by file, line
and column.

patch.yaml::

    description: what the case breaks
    changes:
      - {file: decision.yaml, replace: "<exact text, found once>", with: "<new text>"}
      - {file: extra.yaml, content: "<a whole new file>"}
      - {file: offloading.yaml, delete: true}

expect.yaml holds ``problems``, a list of mappings with these keys, in this
order::

    - code: rules.unknown_fact
      file: "decision.yaml"
      at: "{preferance: disable}"       # exact text, found once in the PATCHED file
      at_offset: 13                     # optional: characters into `at` (default 0), here `disable`
      path: "/steps/6/rules/2/when/preferance"
      message: "rule `hma.explicit_disable` reads unknown fact `preferance`"
      hint: "did you mean `preference`?"

``at`` (plus ``at_offset``) marks where the problem must be reported: the test
finds it in the patched copy of ``file`` and turns it into the line and
(1-based) column that the engine must report. So the corpus survives edits of
the bundled rules that merely move text around (comments, a rule or step
written above, steps re-ordered), and an expectation still says what it is
about. ``path`` stays literal: it names the element as the engine reports it,
and changes when steps or rules are inserted before that element. Choose an anchor
that belongs to the broken element (preferably text the patch wrote, or the
`- id:` of the rule concerned), long enough to occur exactly once; the test
refuses an anchor that is missing or ambiguous.

Where no anchor makes sense, ``line`` and ``column`` replace ``at`` (and
``at_offset``): a problem inside a whole new file the patch wrote, whose lines
are stable, or a problem reported at no position (``line: null, column:
null``). ``file: "{dir}"`` stands for the rules directory itself (the problems
that belong to no file, such as a missing ruleset).

Every case is checked twice: through ``hma_policy.load_policy(DIR)``
(``PolicyError.problems``) and through ``hma-policy rules check DIR --format
json`` (exit status 1). Both run in child processes with a timeout: some of
these directories are about durable-rules hazards, whose C core can hang or
crash the process that compiles them. The children run in parallel, once per
module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from rulecopy import copy_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
CORPUS = Path(__file__).resolve().parent / "rules_corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
KEYS = ("code", "file", "line", "column", "path", "message", "hint")
# The forms a problem may take in expect.yaml: an anchor, or an absolute position.
FORMS = (
    ("code", "file", "at", "path", "message", "hint"),
    ("code", "file", "at", "at_offset", "path", "message", "hint"),
    KEYS,
)
TIMEOUT = 10  # seconds; a healthy load takes well under one, even on a loaded machine

API = r"""
import json, sys
import hma_policy

try:
    policy = hma_policy.load_policy(sys.argv[1])
except hma_policy.PolicyError as exc:
    print(json.dumps({"raised": "PolicyError", "problems": [
        {"code": p.code, "file": p.file, "line": p.line, "column": p.column, "path": p.path,
         "message": p.message, "hint": p.hint} for p in exc.problems]}))
else:
    policy.close()
    print(json.dumps({"raised": None, "problems": []}))
"""


def build(case: str, target: Path) -> Path:
    """A copy of the bundled rules with the case's patch applied."""
    copy_rules(target)
    patch = yaml.safe_load((CORPUS / case / "patch.yaml").read_text(encoding="utf-8"))
    assert set(patch) == {"description", "changes"}, f"{case}: unexpected keys in patch.yaml"
    for change in patch["changes"]:
        path = target / change["file"]
        if change.get("delete"):
            assert path.is_file(), f"{case}: cannot delete missing {change['file']}"
            path.unlink()
        elif "content" in change:
            assert not path.exists(), f"{case}: {change['file']} already exists"
            path.write_text(change["content"], encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
            old = change["replace"]
            assert text.count(old) == 1, f"{case}: {old[:60]!r} occurs {text.count(old)} times in {change['file']}"
            path.write_text(text.replace(old, change["with"]), encoding="utf-8")
    return target


def raw_expected(case: str) -> list[dict]:
    """The problems of expect.yaml as written (anchors unresolved), shape-checked."""
    data = yaml.safe_load((CORPUS / case / "expect.yaml").read_text(encoding="utf-8"))
    assert list(data) == ["problems"], f"{case}: expect.yaml holds `problems` only"
    problems = data["problems"]
    assert isinstance(problems, list) and problems, f"{case}: no expected problems"
    for problem in problems:
        assert tuple(problem) in FORMS, f"{case}: expect.yaml keys must be one of {FORMS}, got {tuple(problem)}"
        if "at" in problem:
            assert isinstance(problem["at"], str) and problem["at"], f"{case}: `at` must be non-empty text"
            offset = problem.get("at_offset", 0)
            assert isinstance(offset, int) and 0 <= offset < len(problem["at"]), f"{case}: `at_offset` must fall inside `at`"
            assert problem["file"] != "{dir}", f"{case}: `at` needs a file"
    return problems


def locate(case: str, rules_dir: Path, file: str, anchor: str, offset: int) -> tuple[int, int]:
    """(line, column), both 1-based, of ``offset`` characters into the one
    occurrence of ``anchor`` in the patched ``file``."""
    path = rules_dir / file
    assert path.is_file(), f"{case}: anchor file {file} is not in the patched directory"
    text = path.read_text(encoding="utf-8")
    count = text.count(anchor)
    assert count == 1, f"{case}: anchor {anchor[:60]!r} occurs {count} times in the patched {file}"
    position = text.index(anchor) + offset
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, column


def expected(case: str, rules_dir: Path) -> list[dict]:
    """The expected problems with anchors resolved against the patched ``rules_dir``."""
    out = []
    for problem in raw_expected(case):
        problem = dict(problem)
        if "at" in problem:
            anchor, offset = problem.pop("at"), problem.pop("at_offset", 0)
            problem["line"], problem["column"] = locate(case, rules_dir, problem["file"], anchor, offset)
        if problem["file"] == "{dir}":
            problem["file"] = str(rules_dir)
        out.append({key: problem[key] for key in KEYS})
    return out


def _run(argv: list[str]) -> dict:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO)
    except subprocess.TimeoutExpired:  # the child is killed (SIGKILL) before this is raised
        return {"timeout": True}
    return {"timeout": False, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    """Every case's patched rules directory, built once per module."""
    root = tmp_path_factory.mktemp("rules_corpus")
    return {case: build(case, root / case) for case in CASES}


@pytest.fixture(scope="module")
def runs(dirs):
    """Both checks run on every case (in parallel child processes)."""
    jobs = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for case, rules_dir in dirs.items():
            jobs[case, "api"] = pool.submit(_run, [sys.executable, "-c", API, str(rules_dir)])
            jobs[case, "cli"] = pool.submit(_run, [sys.executable, "-m", "hma_policy", "rules", "check", str(rules_dir), "--format", "json"])
        results = {key: job.result() for key, job in jobs.items()}
    return _Runs(dirs, results)


class _Runs(tuple):
    """(dirs, results), with a short repr for failure reports."""

    def __new__(cls, dirs, results):
        return super().__new__(cls, (dirs, results))

    def __repr__(self) -> str:
        return f"<{len(self[0])} corpus cases>"


def _show(problems: list[dict]) -> str:
    return "\n".join(json.dumps(p, ensure_ascii=False) for p in problems)


@pytest.mark.parametrize("case", CASES)
def test_load_policy_reports_exactly_the_expected_problems(case, runs):
    dirs, results = runs
    result = results[case, "api"]
    assert not result["timeout"], f"load_policy did not return within {TIMEOUT} s"
    assert result["returncode"] == 0, result["stderr"][-2000:]
    data = json.loads(result["stdout"])
    assert data["raised"] == "PolicyError", "load_policy accepted the broken rules"
    want = expected(case, dirs[case])
    assert data["problems"] == want, f"got:\n{_show(data['problems'])}\nexpected:\n{_show(want)}"


@pytest.mark.parametrize("case", CASES)
def test_rules_check_json_reports_exactly_the_expected_problems(case, runs):
    dirs, results = runs
    result = results[case, "cli"]
    assert not result["timeout"], f"`hma-policy rules check` did not return within {TIMEOUT} s"
    assert result["returncode"] == 1, result["stderr"][-2000:]
    assert result["stderr"] == ""
    data = json.loads(result["stdout"])
    assert list(data) == ["ok", "policy", "rules_dir", "problems"]
    assert data["policy"] == str(dirs[case])
    assert data["ok"] is False
    want = expected(case, dirs[case])
    got = [{key: p[key] for key in KEYS} for p in data["problems"]]
    assert all(set(p) == set(KEYS) for p in data["problems"])
    assert got == want, f"got:\n{_show(got)}\nexpected:\n{_show(want)}"


# -- the corpus itself -------------------------------------------------------------

def test_every_case_has_a_patch_and_an_expectation():
    for case in CASES:
        assert {p.name for p in (CORPUS / case).iterdir()} == {"patch.yaml", "expect.yaml"}, case
        assert raw_expected(case)


@pytest.mark.parametrize("case", CASES)
def test_expected_problems_are_anchored_and_sorted_by_file_line_column(case, dirs):
    problems = expected(case, dirs[case])  # every anchor occurs exactly once in the patched file
    keys = [(p["file"] or "", p["line"] or 0, p["column"] or 0) for p in problems]
    assert keys == sorted(keys)


def test_absolute_positions_are_kept_for_new_files_and_unlocated_problems():
    """`line`/`column` only where no anchor makes sense: in a file the patch
    wrote whole, or for a problem reported at no position."""
    for case in CASES:
        patch = yaml.safe_load((CORPUS / case / "patch.yaml").read_text(encoding="utf-8"))
        written = {change["file"] for change in patch["changes"] if "content" in change}
        for problem in raw_expected(case):
            if "line" in problem and problem["line"] is not None:
                assert problem["file"] in written, f"{case}: give {problem['code']} in {problem['file']} an `at` anchor"


def test_anchors_resolve_as_documented(tmp_path):
    """The anchor arithmetic itself: 1-based line and column, offsets in characters."""
    (tmp_path / "f.yaml").write_text("a: 1\nsteps:\n  - step: x\n", encoding="utf-8")
    assert locate("t", tmp_path, "f.yaml", "a: 1", 0) == (1, 1)
    assert locate("t", tmp_path, "f.yaml", "- step: x", 0) == (3, 3)
    assert locate("t", tmp_path, "f.yaml", "steps:\n  - step", 9) == (3, 3)
    assert locate("t", tmp_path, "f.yaml", "step: x", 6) == (3, 11)


def test_the_corpus_covers_every_load_time_check():
    codes = {p["code"] for case in CASES for p in raw_expected(case)}
    assert codes >= {
        "rules.parse", "rules.schema", "rules.duplicate_connector", "rules.duplicate_ruleset",
        "rules.missing_ruleset", "rules.missing_registry", "rules.bad_include", "rules.duplicate_id",
        "rules.unknown_fact", "rules.bad_operator", "rules.bad_value", "rules.bad_copy", "rules.error_value",
        "rules.contract", "rules.missing_stage", "rules.error_lost", "rules.unreachable_entry", "rules.bad_at",
        "rules.hazard.float", "rules.hazard.reserved_fact", "rules.hazard.alternatives", "rules.hazard.properties",
    }


def test_an_unpatched_copy_is_clean(tmp_path):
    """The builder itself: a copy of the bundled rules loads (so every problem
    in the corpus comes from its patch)."""
    copy_rules(tmp_path / "rules")
    result = _run([sys.executable, "-c", API, str(tmp_path / "rules")])
    assert not result["timeout"], f"load_policy did not return within {TIMEOUT} s"
    assert json.loads(result["stdout"]) == {"raised": None, "problems": []}
