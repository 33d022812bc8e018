"""The benchmarks measure what they say, through the public API only: the
documents behind the figures, the scaled registry, the worker every build
runs, and the table (CI runs the whole benchmark in smoke mode)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import hma_policy

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCH))  # last: benchmarks/http.py must not hide the standard library's http

import documents  # noqa: E402
import run  # noqa: E402
from hma_policy.core.facts import extract  # noqa: E402
from rulecopy import copy_rules  # noqa: E402

# What the benchmarks may import of the engine: the facade, and the audit as
# the command line calls it.
PUBLIC_MODULES = {"hma_policy", "hma_policy.audit", "hma_policy.audit.run"}


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
    documents.write_scaled_registry(copy_rules(tmp_path / "plain"), tmp_path / "rules", 2)
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
    copy_rules(moved)
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
    assert run.build_of("old=/work/venv-old/bin/python") == run.Build("old", "/work/venv-old/bin/python")
    assert run.build_of("/venvs/pure/bin/python").label == "pure"
    assert run.Build("x", "/venvs/pure/bin/python").cli == "/venvs/pure/bin/hma-policy"


def _private_uses(path: Path) -> list[str]:
    """Where ``path`` reaches past the engine's public API, in line order: an
    attribute or an imported name with a leading underscore, ``getattr`` of
    one, or an import of an engine module other than PUBLIC_MODULES."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and _private(str(node.args[1].value)):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.startswith("hma_policy") and a.name not in PUBLIC_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hma_policy"):
            if node.module not in PUBLIC_MODULES:
                found.append((node.lineno, f"from {node.module}"))
            found += [(node.lineno, f"import {a.name}") for a in node.names if _private(a.name)]
    return [f"{path.name}:{line}: {what}" for line, what in sorted(found)]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_benchmarks_use_only_the_public_api() -> None:
    """main's driver called `policy._evaluator.fleet_bounds()`, and CI's
    smoke run broke when the redesign removed it."""
    scripts = sorted(BENCH.glob("*.py"))
    assert {"run.py", "worker.py"} <= {p.name for p in scripts}
    assert [use for path in scripts for use in _private_uses(path)] == []


def test_private_use_check_finds_what_broke_ci(tmp_path: Path) -> None:
    old = tmp_path / "old.py"
    old.write_text("import hma_policy\nfrom hma_policy.core.input import DEFAULT_LIMITS\n"
                   "policy = hma_policy.load_policy()\nwith policy._evaluator.fleet_bounds():\n"
                   "    getattr(policy, '_decided')\n")
    assert _private_uses(old) == ["old.py:2: from hma_policy.core.input", "old.py:4: ._evaluator",
                                  "old.py:5: getattr(..., '_decided')"]


def _worker(section: str, *options: str) -> dict:
    done = subprocess.run([sys.executable, str(BENCH / "worker.py"), section, *options],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_worker_reports_this_build() -> None:
    info = _worker("info")
    assert Path(info["package"]) == Path(hma_policy.__file__).parent
    assert documents.REGISTRY.search("\n".join(p.read_text() for p in Path(info["rules"]).rglob("*.yaml")))


def test_worker_measures_a_cold_start_and_the_audit_stages(tmp_path: Path) -> None:
    """The smoke run's smallest pieces, on this build: a load and its first
    decision, and an audit of a few files with its stages beside their baselines."""
    cold = _worker("cold")
    assert cold["first_load_cpu"] > 0 and cold["first_decide_cpu"] > 0 and cold["load_cpu"] > 0
    documents.write_fleet(tmp_path, 20)
    stages = _worker("stages", "--fleet", str(tmp_path))
    assert set(stages) == {"audit", "prepare", "decide_prepared", "jsonschema_is_valid", "vllm_hma_block", "orjson_loads"}
    assert all(value > 0 for value in stages.values())


def test_table_shows_what_a_build_did_not_measure_as_na() -> None:
    """An older build lacks figures (no Policy.prepare); the table says n/a
    where they would be, and judges no target of this build on them."""
    figures = {"cold": {"first_load_cpu": 12.0, "load_cpu": 10.0, "first_decide_cpu": 300.0},
               "latency": {"cases": {documents.FIRST_CASE: {"new_facts": {"cpu": 100.0}}}},
               "check": {"1000": {"status": "refused: rules.hazard.alternatives", "seconds": 0.4},
                         "0": {"status": "ok", "seconds": 1.5, "peak_rss_kib": 300 * 1024}}}
    results = {"rounds": {"this": [figures], "old": [{"cold": {"first_load_cpu": 20.0}}]}, "floor": [],
               "references": {}, "audit_documents": 10,
               "builds": {label: {"package": "/p", "compiled": []} for label in ("this", "old")},
               "machine": {"cpus": 2, "processor": "x", "python": "3", "load_before": 0.5, "rounds": 1, "quick": True}}
    table = run.render(results)
    assert "| load_policy(), the first in a process | ms | 12.0 | 20.0 | 0.60x | YAML parse of the rule files | n/a | n/a " \
           "| <= 30 | yes |" in table
    first = next(line for line in table.splitlines() if line.startswith("| first decide() after a load, fresh"))
    assert "| 300 | n/a | n/a | warm decide(), distinct, (b) new facts | 100 | 3.00x | <= 2x baseline | **no** |" in first
    assert "MISSED rules check, 1,000 more conditional registry entries, CPU: refused: rules.hazard.alternatives" in table
    assert "  this: 0: 1.5 s, 300 MiB; 1000: refused: rules.hazard.alternatives after 0.4 s" in table
    assert "  old: " in table


def test_a_failed_rules_check_says_why() -> None:
    """At the memory cap the rule runtime fails with an error of its own
    (exit 2, RuntimeFault): that is running out of memory, not a refusal."""
    def failed(code: int, output: str, rss_mib: int = 300) -> str:
        return run.failure(run.Measured(code, 1.0, 1.0, rss_mib * 1024, output))
    capped = run.CHECK_MEMORY // (1 << 20)
    assert failed(2, "hma-policy: internal error: RuntimeFault: the rule runtime failed to take the events: \n",
                  capped - 100) == "out of memory (capped at 4 GiB)"
    assert failed(-9, "") == "out of memory (capped at 4 GiB)"
    assert failed(1, "connectors.yaml:2399:7: rules.hazard.alternatives: step `class_hma` tests more than 500\n"
                     "1 problem(s) in /tmp/x\n") == "refused: rules.hazard.alternatives"
    assert failed(2, "hma-policy: cannot read /tmp/x\n") == "exit 2: hma-policy: cannot read /tmp/x"
