"""Packaging: rules/ and schemas/ ship inside hma_policy and are found through
importlib.resources, in the editable install the tests run from and in a
built wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import hma_policy

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted(p.name for p in (ROOT / "rules").glob("*.yaml"))
SCHEMA_FILES = sorted(p.name for p in (ROOT / "schemas").glob("*.json"))


def test_resources_resolve_to_the_data_folders():
    rules = sorted(p.name for p in resources.files("hma_policy.rules").iterdir() if p.name.endswith(".yaml"))
    schemas = sorted(p.name for p in resources.files("hma_policy.schemas").iterdir() if p.name.endswith(".json"))
    assert rules == RULE_FILES == ["connectors.yaml", "decision.yaml", "nodes.yaml", "offloading.yaml"]
    assert schemas == SCHEMA_FILES == ["decision.schema.json", "deployment.schema.json", "rules.schema.json", "tests.schema.json"]


def test_bundled_policy_digest_covers_the_rule_files():
    policy = hma_policy.load_policy()
    again = hma_policy.load_policy(ROOT / "rules")
    assert policy.digest == again.digest
    assert policy.source == "bundled"


def test_wheel_contains_the_data_folders(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("hma_policy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in RULE_FILES:
        assert f"hma_policy/rules/{name}" in names
    for name in SCHEMA_FILES:
        assert f"hma_policy/schemas/{name}" in names
    for name in sorted(p.name for p in (ROOT / "rules" / "tests").glob("*.yaml")):
        assert f"hma_policy/rules/tests/{name}" in names
    assert "hma_policy/core/_durable.py" in names and "hma_policy/py.typed" in names
    assert "hma_policy/audit/sources/deployers.yaml" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "hma-policy = hma_policy.cli:run" in zipfile.ZipFile(wheel).read(entry_points).decode()
