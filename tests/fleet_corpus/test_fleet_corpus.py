"""The real-world fleet corpus: EXPECTED.yaml is self-consistent, and the audit
finds and decides every launch in it (see FORMATS.md and BASELINE.md).

The audit tests run `hma-policy audit` once over the per-repository
directories, never this directory's own files (EXPECTED.yaml names them in
`meta_files`), and print the figure: launches found and decided as expected,
per format, as in BASELINE.md."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
EXPECTED = yaml.safe_load((HERE / "EXPECTED.yaml").read_text(encoding="utf-8"))
OUTCOMES = {"enabled", "disabled", "error", "undetermined", "file_problem"}

# The formats whose readers are Kubernetes-like objects, charts, overlays and
# controller CRDs (audit/sources: kubernetes, kserve, dynamo, kustomize, helm,
# helm_template, production_stack, llmdbench, ome, kubeai, llmaz, kaito). Shell scripts and docker compose
# have their own readers.
KUBERNETES_FAMILY = {"kubernetes", "lws", "helm-values", "helm-template", "kserve", "kustomize", "dynamo", "aibrix", "ray-serve", "ome", "kubeai",
                     "llmaz", "kaito", "llmdbench-scenario", "llmdbench-env", "production-stack-crd", "rbg"}

# no_launch files this branch does not note, each with why.
NOT_NOTED = {
    "llm-d__llm-d-benchmark/config/templates/jinja/13_ms-values.yaml.j2":
        "disagreement with EXPECTED.yaml: this Jinja template calls build_vllm_command() and mentions no KV option or "
        "connector setting, so the issue's rule (a file that mentions a vLLM KV option) gives it no note; "
        "_macros.j2, which builds --kv-transfer-config, is noted",
    "vllm-project__aibrix/build/container/Dockerfile.vllm":
        "the Dockerfile reader (sources branch) still takes ENTRYPOINT [vllm, serve] without CMD for a launch",
}


# Launches whose vLLM release the audit does not read as EXPECTED.yaml gives it, each with why.
RELEASE_NOT_READ = {
    **{launch: "the image is named in a kustomize base outside the corpus (REPLACE_MODEL_SERVER_IMAGE), which the "
               "kustomization's images transformer replaces: the audit does not guess the base's image"
       for launch in ("llmd-pd-patch-decode", "llmd-pd-patch-prefill", "llmd-tiered-base-patch",
                      "llmd-tiered-mooncake-store")},
    **{launch: "disagreement with EXPECTED.yaml: the legacy scenario sets no image, and the llm-d-benchmark reader "
               "takes config/templates/values/defaults.yaml's (v0.26.0); EXPECTED.yaml says the tooling that read "
               "this format is gone, so no release"
       for launch in ("llmdb-kubecon-prefill", "llmdb-kubecon-decode")},
}


def _corpus_files() -> list[str]:
    meta = set(EXPECTED["meta_files"])
    return sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*")
                  if p.is_file() and p.name not in meta and "__pycache__" not in p.parts)


def test_expected_is_consistent() -> None:
    ids = set()
    for launch in EXPECTED["launches"]:
        assert launch["id"] not in ids, launch["id"]
        ids.add(launch["id"])
        path = HERE / launch["file"]
        assert path.is_file(), launch["file"]
        lines = path.read_text(encoding="utf-8").split("\n")
        assert launch["anchor"] in lines[launch["line"] - 1], (launch["id"], launch["line"])
        for other in launch.get("merged_from") or []:
            assert (HERE / other).is_file(), (launch["id"], other)
        expect = launch["expect_033"]
        assert expect["outcome"] in OUTCOMES, launch["id"]
        if expect["outcome"] == "enabled":
            assert expect["hma_enabled"] is True and expect["error"] is None, launch["id"]
        if expect["outcome"] == "disabled":
            assert expect["hma_enabled"] is False and expect["error"] is None, launch["id"]
        if expect["outcome"] in ("error", "file_problem"):
            assert expect["error"] and expect["error"]["code"], launch["id"]
        for value in launch.get("unresolved") or []:
            if value["read_by_decision"]:
                assert expect["error"]["code"] == "source.unresolved", launch["id"]
    for entry in EXPECTED["no_launch"]:
        assert (HERE / entry["file"]).is_file(), entry["file"]


def test_every_file_has_provenance() -> None:
    provenance = (HERE / "PROVENANCE.md").read_text(encoding="utf-8")
    missing = [f for f in _corpus_files() if f"`{f}`" not in provenance]
    assert not missing, missing


@pytest.fixture(scope="module")
def audited() -> tuple[dict, float]:
    dirs = sorted(p.name for p in HERE.iterdir() if p.is_dir() and "__" in p.name)
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "hma_policy", "audit", *dirs, "--format", "json"],
                         cwd=HERE, capture_output=True, text=True, check=True)
    return json.loads(out.stdout), time.perf_counter() - began


def _found(report: dict) -> dict[str, dict | None]:
    """Each launch of EXPECTED.yaml that is not a file problem: the report's deployment at its line, or None."""
    deployments, used, out = report["deployments"], set(), {}
    for launch in EXPECTED["launches"]:
        if launch["expect_033"]["outcome"] == "file_problem":
            continue
        lines = {launch["line"], *(launch.get("alt_lines") or [])}
        index = next((i for i, d in enumerate(deployments)
                      if i not in used and d["file"] == launch["file"] and d.get("line") in lines), None)
        if index is not None:
            used.add(index)
        out[launch["id"]] = None if index is None else deployments[index]
    return out


def _verdicts(report: dict) -> dict[str, str | None]:
    """Each launch of EXPECTED.yaml: None when found and decided as expected, else what differs."""
    found, out = _found(report), {}
    for launch in EXPECTED["launches"]:
        expect = launch["expect_033"]
        if expect["outcome"] == "file_problem":
            codes = {p["code"] for p in report["problems"] if p["file"] == launch["file"]}
            out[launch["id"]] = None if codes & set(launch.get("acceptable_codes") or [expect["error"]["code"]]) \
                else f"no file problem ({sorted(codes)})"
            continue
        deployment = found[launch["id"]]
        out[launch["id"]] = "not found" if deployment is None else _difference(launch, deployment)
    return out


def _difference(launch: dict, deployment: dict) -> str | None:
    expect, decision = launch["expect_033"], deployment["decision"]
    codes = [e["code"] for e in decision["errors"]]
    warnings = {w["code"] for w in decision["warnings"]}
    accepted = set(launch.get("acceptable_codes") or []) | ({expect["error"]["code"]} if expect["error"] else set())
    if (decision["outcome"], decision["hma_enabled"]) != (expect["outcome"], expect["hma_enabled"]) \
            or (accepted and not accepted & set(codes)) \
            or not set(expect["warnings"]) <= warnings <= set(expect["warnings"]) | set(expect.get("warnings_optional") or []):
        return f"{decision['outcome']} {codes} {sorted(warnings)}"
    if launch.get("resource"):
        kind, namespace, name = launch["resource"].split("/", 2)
        got = deployment["resource"] or {}
        wanted = {"kind": kind, **({"name": name} if "<" not in name else {}),
                  **({"namespace": namespace} if namespace and "<" not in namespace else {})}
        if {k: got.get(k) for k in wanted} != wanted:
            return f"resource {got}"
    if launch.get("container") and deployment["container"] != launch["container"]:
        return f"container {deployment['container']}"
    if launch["format"] in KUBERNETES_FAMILY and launch.get("role") and deployment["role"] != launch["role"]:
        return f"role {deployment['role']}"
    return None


def _table(verdicts: dict[str, str | None]) -> str:
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for launch in EXPECTED["launches"]:
        rows[launch["format"]][0] += 1
        rows[launch["format"]][1] += verdicts[launch["id"]] is None
    lines = ["| format | expected | as expected |", "|---|---|---|"]
    lines += [f"| {name} | {total} | {ok} |" for name, (total, ok) in sorted(rows.items())]
    return "\n".join(lines)


def test_every_launch_is_found_and_decided_as_expected(audited, capsys) -> None:
    report, seconds = audited
    verdicts = _verdicts(report)
    with capsys.disabled():
        good = sum(v is None for v in verdicts.values())
        print(f"\nfleet corpus: {good} of {len(verdicts)} launches found and decided as expected "
              f"({100 * good / len(verdicts):.1f} %), audit {seconds:.2f} s\n{_table(verdicts)}")
    assert {i: v for i, v in verdicts.items() if v is not None} == {}


def test_every_launch_names_the_release_expected(audited) -> None:
    found = _found(audited[0])
    expected = {launch["id"]: None if launch.get("release") in (None, "latest") else str(launch["release"])
                for launch in EXPECTED["launches"] if launch["id"] in found}  # `latest`: a tag that names no release
    read = {i: ((d or {}).get("release_hint") or {}).get("version") for i, d in found.items()}
    assert {i: v for i, v in read.items() if i not in RELEASE_NOT_READ} == \
        {i: v for i, v in expected.items() if i not in RELEASE_NOT_READ}
    stale = [i for i in RELEASE_NOT_READ if read[i] == expected[i]]
    assert not stale, f"read as expected now: take them off RELEASE_NOT_READ: {stale}"


def test_every_launch_reads_the_connector_expected(audited) -> None:
    """The top-level connector the decision read is the one EXPECTED.yaml gives (`inputs.kv_connector`):
    an outcome can be right with the connector lost (llm-d-benchmark's kubecon scenario, whose
    NixlConnector was dropped with the rest of a value continued over its lines, was `enabled` either
    way). A decision that ends before the graph (a release without HMA, an error) lists none."""
    wrong = {}
    for launch_id, deployment in _found(audited[0]).items():
        launch = next(launch for launch in EXPECTED["launches"] if launch["id"] == launch_id)
        want = (launch.get("inputs") or {}).get("kv_connector")
        decision = (deployment or {}).get("decision")
        if decision is None or (not decision["connectors"] and (decision["outcome"] == "error"
                                                                or "release.before_hma" in decision["trace"])):
            continue
        got = decision["connectors"][0]["kv_connector"] if decision["connectors"] else None
        if got != want:
            wrong[launch_id] = (want, got)
    assert wrong == {}


def test_no_deployment_that_is_not_a_launch(audited) -> None:
    report = audited[0]
    verdicts_used = {(l["file"], line) for l in EXPECTED["launches"] for line in [l["line"], *(l.get("alt_lines") or [])]}
    extra = [d["id"] for d in report["deployments"] if (d["file"], d["line"]) not in verdicts_used
             and d["file"] not in NOT_NOTED]
    assert not extra, extra


def test_no_launch_files_are_noted(audited) -> None:
    report = audited[0]
    deployments = {d["file"] for d in report["deployments"]}
    noted = {n["file"]: n for n in report["notes"] if n["code"] == "source.unrecognized"}
    for entry in EXPECTED["no_launch"]:
        if entry["file"] in NOT_NOTED:
            continue
        assert entry["file"] not in deployments, entry["file"]
        assert entry["file"] in noted, entry["file"]
    assert report["summary"]["notes"] == len(report["notes"])


def test_every_file_problem_is_expected(audited) -> None:
    # A valid file reported broken hides its launches: the GKE chart's HPA and the CRLF
    # InferencePool stream were each a false input.parse problem until 2026-12-03.
    got = sorted((p["file"], p["code"], p["line"]) for p in audited[0]["problems"])
    assert got == sorted((p["file"], p["code"], p["line"]) for p in EXPECTED["file_problems"])


def test_the_corpus_audits_in_seconds(audited) -> None:
    assert audited[1] < 30, f"the audit of the corpus took {audited[1]:.1f} s"
