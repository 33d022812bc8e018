"""The benchmarks measure what they say: the documents behind the figures, and
the worker every build runs (CI runs the whole benchmark in smoke mode)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import hma_policy

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import documents  # noqa: E402
import run  # noqa: E402
from hma_policy.core.facts import extract  # noqa: E402
from rulecopy import RULES  # noqa: E402


def _facts(policy: hma_policy.Policy, document: dict) -> tuple:
    return extract(policy.prepare(document).document, policy.model.containers).key


def test_same_facts_documents_differ_only_where_no_rule_reads() -> None:
    policy = hma_policy.load_policy()
    base = documents.CASES[documents.FIRST_CASE]
    variants = documents.same_facts(base, 3)
    assert len({json.dumps(v, sort_keys=True) for v in variants}) == 3
    assert all(_facts(policy, v) == _facts(policy, base) for v in variants)
    assert {policy.decide(v).outcome for v in variants} == {"enabled"}


def test_new_facts_documents_are_new_mixes_of_the_same_connectors() -> None:
    policy = hma_policy.load_policy()
    base = documents.CASES[documents.FIRST_CASE]
    variants = documents.new_facts(base, 50)
    keys = {_facts(policy, v) for v in variants}
    assert len(keys) == 50 and _facts(policy, base) not in keys
    names = sorted(n["kv_connector"] for n in documents._nodes(variants[0]["kv_transfer_config"]))
    assert names == sorted(documents.SUPPORTED + ["MultiConnector"] * 3)
    # Too few leaves to stay new: no such documents.
    assert documents.new_facts(documents.CASES["multi, 2 children"], 5) is None


def test_scaled_registry_is_read_as_rules(tmp_path: Path) -> None:
    documents.write_scaled_registry(RULES, tmp_path / "rules", 2)
    policy = hma_policy.load_policy(tmp_path / "rules")
    assert {"BenchConnector0000", "BenchConnector0001"} <= set(policy.registered_names)
    leaf = {"kv_connector": "BenchConnector0001", "kv_role": "kv_both"}
    assert policy.decide({"kv_transfer_config": leaf}).outcome == "enabled"
    child = {"kv_transfer_config": documents.multi([leaf])}
    assert policy.decide(child).outcome == "disabled"  # the `is_child` case
    # The bundled connectors decide as before.
    for case in documents.CASES.values():
        assert policy.decide(case).outcome == hma_policy.decide(case).outcome


def test_scaled_registry_is_found_by_its_kind_wherever_it_is_filed(tmp_path: Path) -> None:
    """The lead may file the registry elsewhere (rules/registries/...): the
    benchmark follows `kind: registry`, not a file name."""
    moved = tmp_path / "moved"
    shutil.copytree(RULES, moved)
    registry = next(p for p in moved.rglob("*.yaml") if documents.REGISTRY.search(p.read_text()))
    (moved / "registries").mkdir()
    registry.rename(moved / "registries" / "0.33.0.yaml")
    written = documents.write_scaled_registry(moved, tmp_path / "scaled", 3)
    assert written == tmp_path / "scaled" / "registries" / "0.33.0.yaml"
    before = yaml.safe_load((moved / "registries" / "0.33.0.yaml").read_text())
    after = yaml.safe_load(written.read_text())
    assert list(after["connectors"]) == ["BenchConnector0000", "BenchConnector0001", "BenchConnector0002",
                                         *before["connectors"]]
    assert after["connectors"]["BenchConnector0002"]["cases"][1] == \
        {"id": "child", "when": {"is_child": True}, "supports_hma": False}
    assert {k: v for k, v in after.items() if k != "connectors"} == {k: v for k, v in before.items() if k != "connectors"}


def test_scaled_registry_without_a_registry_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "nodes.yaml").write_text("kind: rules\n")
    with pytest.raises(ValueError, match="expected one file of `kind: registry`.*found 0"):
        documents.write_scaled_registry(tmp_path / "rules", tmp_path / "out", 1)


def test_builds_are_named_by_label_or_venv() -> None:
    assert run.build_of("today=/work/venv-old/bin/python") == run.Build("today", "/work/venv-old/bin/python")
    assert run.build_of("/venvs/pure/bin/python").label == "pure"
    assert run.Build("x", "/venvs/pure/bin/python").cli == "/venvs/pure/bin/hma-policy"


def test_worker_reports_this_build() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "worker.py"), "info"], capture_output=True, text=True, check=True)
    info = json.loads(done.stdout)
    assert Path(info["package"]) == Path(hma_policy.__file__).parent
    assert (Path(info["rules"]) / "connectors.yaml").exists()
