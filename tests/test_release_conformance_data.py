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
import sys
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


def _provenance_text(release):
    return (CONFORMANCE / release / "PROVENANCE.md").read_text(encoding="utf-8")


def _preference_is_bool(release) -> bool:
    """PROVENANCE.md says how a document's preference reached vLLM: tri-state, or a plain bool (null = false)."""
    row = re.search(r"^\| preference \| (tri-state|bool): ", _provenance_text(release), re.M)
    assert row, f"{release}: PROVENANCE.md has no preference row"
    return row.group(1) == "bool"


def _stand_ins(provenance: str) -> list[str]:
    match = re.search(r"; import-only stand-ins: ([\w.]+(?:, [\w.]+)*) \(so that a connector module could be imported",
                      provenance)
    return match.group(1).split(", ") if match else []


# Every semantic epoch of vllm-releases.md (E1 0.9.1-0.11.0 ... E8 0.30.0-0.33.0),
# and a second release of E1, E3, E7 and E8.
EXPECTED_RELEASES = {"0.9.1", "0.10.2", "0.11.1", "0.13.0", "0.18.0", "0.20.0", "0.21.0", "0.22.0", "0.23.0",
                     "0.28.0", "0.30.0", "0.33.0"}


def test_every_epoch_is_recorded():
    assert EXPECTED_RELEASES <= set(RELEASES), sorted(EXPECTED_RELEASES - set(RELEASES))


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
            # vLLM logs it only when it turned HMA off itself, with no
            # preference; where the preference is a plain bool, false is no
            # preference either (it is the CLI's default).
            unset = (None, False) if _preference_is_bool(release) else (None,)
            assert case["input"].get("disable_hybrid_kv_cache_manager") in unset, where
            assert hma in (False, None), where


@pytest.mark.parametrize("release", [r for r in RELEASES if _preference_is_bool(r)])
def test_null_and_false_are_one_preference_where_it_is_a_bool(release):
    """Where vLLM's flag is a plain bool, a document's null is passed as false: both decide alike."""
    cases = {c["id"]: c for c in _cases(release)}
    pairs = 0
    for case_id, case in cases.items():
        if not case_id.endswith("-auto") or case_id.startswith("random-"):
            continue
        twin = cases.get(case_id[:-len("-auto")] + "-enable")
        if twin is None:
            continue
        rest = {k: v for k, v in case["input"].items() if k != "disable_hybrid_kv_cache_manager"}
        if rest != {k: v for k, v in twin["input"].items() if k != "disable_hybrid_kv_cache_manager"}:
            continue  # not the same document but for the preference (invalid-no-name-*)
        assert case["input"].get("disable_hybrid_kv_cache_manager") is None, case_id
        assert twin["input"].get("disable_hybrid_kv_cache_manager") is False, twin["id"]
        assert case["expect"] == twin["expect"], case_id
        pairs += 1
    assert pairs >= 40  # the curated kinds pair up so (0.9.1 has the fewest: no mamba or chunked local layers)


@pytest.mark.parametrize("release", RELEASES)
def test_provenance_of_every_case(release):
    real = f"vllm {release} real code"
    suffix = re.compile(r"; import-only stand-ins: [\w., ]+ \(so that a connector module could be imported; "
                        r"see PROVENANCE\.md\)$")
    for case in _cases(release):
        # The stand-ins, if any, come last; what vLLM ran is said before them.
        provenance = suffix.sub("", case["provenance"])
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


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_recorded_sha256_is_the_wheels(release):
    """Where the wheel is on this machine (not in CI), PROVENANCE.md's sha256 is its digest (300 MB each: slow)."""
    text = _provenance_text(release)
    wheel = re.search(r"\| wheel \| `(vllm-[^`]+\.whl)` \|", text).group(1)
    local = WHEELS / wheel
    if not local.is_file():
        pytest.skip(f"{local} is not on this machine: only the recorded digest can be read")
    digest = hashlib.sha256()
    with local.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    assert f"| wheel sha256 | `{digest.hexdigest()}` |" in text


def test_a_case_id_is_one_document_in_every_release():
    """Releases are compared id by id (tests/conformance/SUMMARY.md): an id never names two documents."""
    seen: dict[str, tuple[str, str]] = {}
    shared = collections.Counter()
    for release in RELEASES:
        for case in _cases(release):
            document = json.dumps(case["input"], sort_keys=True)
            first = seen.setdefault(case["id"], (release, document))
            assert first[1] == document, (case["id"], first[0], release)
            if re.match(r"^random-[0-9]+-[0-9]+$", case["id"]):
                shared[release] += 1
            elif case["id"].startswith("random-"):
                # A release's own random documents carry its name.
                assert case["id"].startswith(f"random-{release}-"), (release, case["id"])
    # The shared random documents are recorded in every release (all but those it cannot express).
    assert all(count >= 200 for count in shared.values()) and set(shared) == set(RELEASES), shared


def test_curated_kinds_are_recorded_in_every_release():
    """The curated graphs use connectors every release registers: each kind is recorded in all, with its three
    preferences (0.9.1 has no KV cache spec for mamba layers: such a model cannot be expressed there)."""
    families = ("none", "single-NixlConnector", "single-LMCacheConnectorV1", "single-MultiConnector", "multi-mixed",
                "multi-nested-unsupported", "multi-empty-list", "platform-unsupported-supported", "layers-swa-unsupported",
                "layers-mamba-unsupported", "kv-events-multi")
    for release in RELEASES:
        ids = {c["id"] for c in _cases(release)}
        for family in families:
            if release == "0.9.1" and family == "layers-mamba-unsupported":
                continue
            assert {f"{family}-{label}" for label in ("auto", "enable", "disable")} <= ids, (release, family)
        assert {"invalid-child-string", "invalid-children-dict", "invalid-missing-role"} <= ids, release


@pytest.mark.parametrize("release", RELEASES)
def test_shared_set_comparison_is_recorded(release):
    """Each release also ran the shared 0.33.0 set's inputs; PROVENANCE.md states the tally of comparison.json."""
    comparison = json.loads((CONFORMANCE / release / "comparison.json").read_text(encoding="utf-8"))
    shared = json.loads((CONFORMANCE / "cases.json").read_text(encoding="utf-8"))
    assert [c["id"] for c in comparison] == [c["id"] for c in shared]
    status = collections.Counter(c["status"] for c in comparison)
    assert set(status) <= {"agree", "disagree", "not run"}
    assert (f"{status['agree']} of {len(comparison)} inputs decide as the shared set says, "
            f"{status['disagree']} differently, {status['not run']} could not be run here.") in _provenance_text(release)
    for entry in comparison:
        if entry["status"] != "not run":
            assert entry["status"] == ("agree" if entry["vllm"] == entry["shared"] else "disagree"), entry["id"]


def test_summary_is_what_the_data_gives():
    """tests/conformance/SUMMARY.md is tools/conformance_summary.py's rendering of the recorded data."""
    sys.path.insert(0, str(HERE.parent / "tools"))
    try:
        import conformance_summary
    finally:
        sys.path.remove(str(HERE.parent / "tools"))
    expected = conformance_summary.render(conformance_summary.load(CONFORMANCE), CONFORMANCE)
    assert (CONFORMANCE / "SUMMARY.md").read_text(encoding="utf-8") == expected, \
        "run python3 tools/conformance_summary.py"


@pytest.mark.parametrize("release", RELEASES)
def test_stand_ins_are_accounted_for(release):
    """Every import-only stand-in a case names is in PROVENANCE.md, with the number of cases that used it."""
    text = _provenance_text(release)
    used = collections.Counter(s for c in _cases(release) for s in _stand_ins(c["provenance"]))
    section = text.split("## Import-only stand-ins", 1)[1].split("\n## ", 1)[0]
    if not used:
        assert "- none: every connector module of this release imported as installed." in section
        return
    for stand_in, count in used.items():
        assert re.search(rf"^\| `vllm\.[\w.]+` \| [^|]*`{re.escape(stand_in)}`", section, re.M), stand_in
        assert f"| `{stand_in}` | {count} |" in section, (stand_in, count)
    for case in _cases(release):
        if _stand_ins(case["provenance"]):
            # Only a connector module needs one: the case names a connector, or the offloading shorthand picks one.
            given = {k.replace("-", "_") for k, v in case["input"].items() if v is not None}
            assert given & {"kv_transfer_config", "kv_offloading_size", "kv_offloading_backend"}, case["id"]


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
