"""Conformance: the engine reproduces what vLLM 0.33.0 itself decides.

tests/conformance/cases.json is vendored byte-for-byte from the shared
conformance set (see tests/conformance/PROVENANCE.md); its expectations come
from running vLLM 0.33.0's own code, never from this engine.

Every case runs twice: with a policy loaded with memo=False (every step goes
through durable-rules) and with memo=True (the step cache is shared by all the
cases of the module, so later cases hit answers memoised by earlier ones).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest

import hma_policy

HERE = Path(__file__).resolve().parent
CASES_FILE = HERE / "conformance" / "cases.json"
PROVENANCE_FILE = HERE / "conformance" / "PROVENANCE.md"
DECISION_SCHEMA = json.loads((HERE.parent / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
DECISION_VALIDATOR = jsonschema.Draft202012Validator(DECISION_SCHEMA)

CASES = json.loads(CASES_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def policies():
    plain = hma_policy.load_policy(None, memo=False)
    memo = hma_policy.load_policy(None, memo=True)
    yield {False: plain, True: memo}
    plain.close()
    memo.close()


def _observe(policy, document):
    """(outcome, hma_enabled, (stage, code) of the first error or None, vllm warning codes)."""
    try:
        decision = policy.decide(document)
    except hma_policy.InputError as exc:
        assert exc.problems, "an InputError must carry at least one problem"
        for problem in exc.problems:
            assert re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", problem.code), problem
            assert problem.path == "" or problem.path.startswith("/"), problem
        return "error", None, ("input", exc.problems[0].code), []
    errors = list(DECISION_VALIDATOR.iter_errors(decision.to_dict()))
    assert not errors, [e.message for e in errors]
    first = (decision.errors[0].stage, decision.errors[0].code) if decision.errors else None
    if decision.outcome == "error":
        assert decision.errors, "an error outcome must carry its error"
    else:
        assert not decision.errors, f"outcome {decision.outcome} with errors {decision.errors}"
    warnings = sorted(w.code for w in decision.warnings if w.source == "vllm")
    return decision.outcome, decision.hma_enabled, first, warnings


@pytest.mark.parametrize("memo", [False, True], ids=["nomemo", "memo"])
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case, memo, policies):
    expect = case["expect"]
    outcome, hma_enabled, first_error, warnings = _observe(policies[memo], case["input"])
    expected_error = (expect["error"]["stage"], expect["error"]["code"]) if expect["error"] else None
    assert (outcome, hma_enabled, first_error, warnings) == (
        expect["outcome"], expect["hma_enabled"], expected_error, sorted(expect["warnings"])
    ), case["description"]


def test_case_ids_are_unique():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) == 63


def test_cases_file_matches_recorded_sha256():
    text = PROVENANCE_FILE.read_text(encoding="utf-8")
    recorded = re.findall(r"sha256:\s*`?([0-9a-f]{64})`?", text)
    assert recorded, "PROVENANCE.md must record the sha256 of cases.json"
    assert len(set(recorded)) == 1, f"PROVENANCE.md records several digests: {recorded}"
    actual = hashlib.sha256(CASES_FILE.read_bytes()).hexdigest()
    assert actual == recorded[0], "cases.json differs from the vendored copy: re-vendor it from shared/, never edit it"


def test_every_case_has_provenance():
    for case in CASES:
        assert set(case) >= {"id", "description", "input", "expect", "provenance"}, case.get("id")
        assert isinstance(case["provenance"], str) and case["provenance"].strip(), case["id"]
        assert "0.33.0" in case["provenance"], case["id"]
