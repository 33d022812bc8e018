"""The recorded per-release conformance data (tests/conformance/<release>/) is well formed.

These cases were recorded by tools/vllm_conformance.py from each release's
own code; this test does not run vLLM or the engine. It checks what a
consumer of the data relies on: the case format of the shared conformance
set, expectations that are consistent with themselves (an error outcome has
its error, an input or config error leaves hma_enabled null, ...), known
stages and well-formed codes, a provenance on every case that names the
release (or the source line read), and a PROVENANCE.md whose wheel, sha256,
torch, date, command and counts match the cases.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE / "conformance"
RELEASE_DIR = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$")
RELEASES = sorted((p.name for p in CONFORMANCE.iterdir() if p.is_dir() and RELEASE_DIR.match(p.name)),
                  key=lambda v: tuple(int(x) for x in v.split(".")))
CODE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
STAGES = {"input", "config", "planning", "connector"}
WHEELS = Path("/work/wheels")


def _cases(release):
    return json.loads((CONFORMANCE / release / "cases.json").read_text(encoding="utf-8"))


def test_some_releases_are_recorded():
    assert "0.33.0" in RELEASES
    assert len(RELEASES) >= 3


@pytest.mark.parametrize("release", RELEASES)
def test_case_format(release):
    cases = _cases(release)
    assert isinstance(cases, list)
    assert len(cases) >= 100, "at least 100 cases per recorded release"
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "ids are unique"
    inputs = [json.dumps(c["input"], sort_keys=True) for c in cases]
    assert len(inputs) == len(set(inputs)), "no document is recorded twice"
    for case in cases:
        assert set(case) == {"id", "description", "input", "expect", "provenance"}, case["id"]
        assert isinstance(case["id"], str) and case["id"]
        assert isinstance(case["description"], str) and case["description"]
        assert isinstance(case["input"], dict), case["id"]
        assert set(case["expect"]) == {"outcome", "hma_enabled", "error", "warnings"}, case["id"]


@pytest.mark.parametrize("release", RELEASES)
def test_expectations_are_consistent(release):
    for case in _cases(release):
        expect, where = case["expect"], case["id"]
        outcome, hma, error, warnings = expect["outcome"], expect["hma_enabled"], expect["error"], expect["warnings"]
        assert outcome in {"enabled", "disabled", "error"}, where  # vLLM never answers "undetermined"
        assert warnings == sorted(set(warnings)), where
        assert all(CODE.match(w) for w in warnings), where
        if outcome == "enabled":
            assert hma is True and error is None, where
        elif outcome == "disabled":
            assert hma is False and error is None, where
        else:
            assert set(error) == {"stage", "code"}, where
            assert error["stage"] in STAGES, where
            assert CODE.match(error["code"]), where
            assert not error["code"].startswith("unmapped."), where
            if error["stage"] in ("input", "config"):
                assert hma is None, where
            else:
                assert hma in (True, False), where
            if error["stage"] == "input":
                assert warnings == [], where
        if "hma.auto_disabled" in warnings:
            # vLLM logs it only when it turned HMA off itself, with no preference.
            assert case["input"].get("disable_hybrid_kv_cache_manager") is None, where
            assert hma in (False, None), where


@pytest.mark.parametrize("release", RELEASES)
def test_provenance_of_every_case(release):
    real = f"vllm {release} real code"
    for case in _cases(release):
        provenance = case["provenance"]
        if provenance == real:
            continue
        match = re.match(r"^source-read: (vllm/[\w/]+\.py):([0-9]+)\b", provenance)
        assert match, (case["id"], provenance)
        assert real in provenance, "what was run is said to be run"
        # Only MultiConnector construction is read from source.
        assert "MultiConnector" in json.dumps(case["input"]), case["id"]


@pytest.mark.parametrize("release", RELEASES)
def test_provenance_file_matches_the_cases(release):
    text = (CONFORMANCE / release / "PROVENANCE.md").read_text(encoding="utf-8")
    cases = _cases(release)
    wheel = re.search(r"\| wheel \| `(vllm-[^`]+\.whl)` \|", text)
    assert wheel and wheel.group(1).startswith(f"vllm-{release}-"), "names the release's wheel"
    sha = re.search(r"\| wheel sha256 \| `([0-9a-f]{64})` \|", text)
    assert sha, "records the wheel's sha256"
    assert re.search(r"\| torch \| 2\.[0-9]+\.[0-9]+\+cpu", text), "records the CPU torch"
    assert re.search(r"\| recorded \(UTC\) \| 20[0-9]{2}-[0-9]{2}-[0-9]{2} ", text), "records the date"
    assert f"tools/vllm_conformance.py {release}" in text, "records the command"
    assert f"| vllm imported | {release} |" in text
    assert f"holds {len(cases)} deployment documents" in text
    counts = collections.Counter(c["expect"]["outcome"] for c in cases)
    for outcome, count in counts.items():
        assert f"| {outcome} | {count} |" in text, outcome
    local = WHEELS / wheel.group(1)
    if local.is_file():
        digest = hashlib.sha256()
        with local.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        assert digest.hexdigest() == sha.group(1)


def test_codes_are_documented():
    """Every code in the data is the engine's (docs/decision.md) or proposed in tools/README.md."""
    documented = set(re.findall(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)`",
                                (HERE.parent / "docs" / "decision.md").read_text(encoding="utf-8")))
    documented |= set(re.findall(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)`",
                                 (HERE.parent / "tools" / "README.md").read_text(encoding="utf-8")))
    for release in RELEASES:
        for case in _cases(release):
            codes = list(case["expect"]["warnings"])
            if case["expect"]["error"]:
                codes.append(case["expect"]["error"]["code"])
            for code in codes:
                assert code in documented, (release, case["id"], code)
