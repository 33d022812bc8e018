"""Packaging: rules/ and schemas/ ship inside hma_policy and are found through
importlib.resources, in the editable install the tests run from and in a
built wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import hma_policy

ROOT = Path(__file__).resolve().parents[1]
# Every data file of the bundled rules: releases.yaml, the epochs' rule files
# and tests, the registries, the option lists.
RULE_FILES = sorted(str(p.relative_to(ROOT / "rules")) for p in (ROOT / "rules").rglob("*")
                    if p.suffix in (".yaml", ".json"))


def _resource_files(root, prefix=""):
    for entry in root.iterdir():
        if entry.is_dir():
            yield from _resource_files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith((".yaml", ".json")):
            yield f"{prefix}{entry.name}"
SCHEMA_FILES = sorted(p.name for p in (ROOT / "schemas").glob("*.json"))


def test_resources_resolve_to_the_data_folders():
    rules = sorted(_resource_files(resources.files("hma_policy.rules")))
    schemas = sorted(p.name for p in resources.files("hma_policy.schemas").iterdir() if p.name.endswith(".json"))
    assert rules == RULE_FILES
    assert {"releases.yaml", "epochs/E8/decision.yaml", "epochs/E8/tests/decision.yaml", "registries/0.33.0.yaml"} <= set(rules)
    assert schemas == SCHEMA_FILES == ["decision.schema.json", "deployment.schema.json", "releases.schema.json",
                                       "rules.schema.json", "tests.schema.json"]


def test_bundled_policy_digest_covers_the_rule_files():
    policy = hma_policy.load_policy()
    again = hma_policy.load_policy(ROOT / "rules")
    assert policy.digest == again.digest
    assert policy.source == "bundled"


def test_wheel_contains_the_data_folders(tmp_path):
    # A pure build (the compiled modules are the same files, compiled), of a copy of what a
    # build reads: pip builds in the tree, and its build/ folder left in the checkout would
    # go into a later build's wheel (a module deleted since would still ship).
    source = tmp_path / "src"
    for name in ("engine", "rules", "schemas"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
         str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HMA_POLICY_PURE": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("hma_policy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in RULE_FILES:
        assert f"hma_policy/rules/{name}" in names
    for name in SCHEMA_FILES:
        assert f"hma_policy/schemas/{name}" in names
    # the wheel reader's tables (hma-policy registry from-wheel)
    assert {"hma_policy/authoring/wheel/external.json", "hma_policy/authoring/wheel/facts.schema.json"} <= names
    assert "hma_policy/core/_durable.py" in names and "hma_policy/py.typed" in names
    assert not any(n.endswith(".so") for n in names)  # pure: nothing compiled
    assert "hma_policy/core/deployers.yaml" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "hma-policy = hma_policy.cli:run" in zipfile.ZipFile(wheel).read(entry_points).decode()
