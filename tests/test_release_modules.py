"""The bundled module tables (rules/modules/, named in rules/releases.yaml):
which modules of vLLM's KV-transfer tree each release ships, and which names
each binds, as `hma-policy registry from-wheel --modules` read them.

CI has no wheels: every release's facts in tests/vllm_releases/facts/ hold
what was read (tests/vllm_releases/PROVENANCE.md), and the tests here hold the
bundled tables to them, as tests/test_vllm_releases.py does for the
registries: byte for byte for the release a table is named after, the same
content for a later release that shares it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hma_policy
from hma_policy import cli
from hma_policy.authoring.wheel import load_facts, modules_json

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules"
RECORDED = ROOT / "tests" / "vllm_releases"

from test_vllm_releases import RECORDED_VERSIONS, RELEASES  # noqa: E402  (one reading of releases.yaml)


def facts_of(version: str) -> dict:
    return load_facts(str(RECORDED / "facts" / f"{version}.json"))


def content(text: str) -> dict:
    """A table without what names the release it was read from."""
    data = json.loads(text)
    return {k: v for k, v in data.items() if k not in ("vllm_version", "wheel")}


@pytest.mark.parametrize("version", RECORDED_VERSIONS)
def test_recorded_facts_render_to_the_bundled_module_table(version, tmp_path, capsys):
    facts = facts_of(version)
    out = tmp_path / "modules.json"
    assert cli.main(["registry", "render", "--from-facts", str(RECORDED / "facts" / f"{version}.json"),
                     "--modules", str(out), "-o", str(tmp_path / "registry.yaml")]) == 0
    capsys.readouterr()
    assert out.read_text(encoding="utf-8") == modules_json(facts)
    name = RELEASES[version]["modules"]
    bundled = (RULES / name).read_text(encoding="utf-8")
    if name == f"modules/{version}.json":
        assert out.read_bytes() == (RULES / name).read_bytes()
    else:
        assert content(out.read_text(encoding="utf-8")) == content(bundled)


def test_every_release_has_its_own_table_shared_exactly_when_equal():
    """Every release was read from its own wheel (none is mapped to another's);
    a table is named after the first of a run of consecutive releases whose
    tables are equal, and releases name different tables only where they differ."""
    users: dict[str, list[str]] = {}
    for version in RECORDED_VERSIONS:
        users.setdefault(RELEASES[version]["modules"], []).append(version)
    assert sorted(users) == sorted(f"modules/{p.name}" for p in (RULES / "modules").glob("*.json"))
    for name, versions in users.items():
        assert name == f"modules/{versions[0]}.json"
        indexes = [RECORDED_VERSIONS.index(v) for v in versions]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes))), name
    tables = {v: content(modules_json(facts_of(v))) for v in RECORDED_VERSIONS}
    for before, after in zip(RECORDED_VERSIONS, RECORDED_VERSIONS[1:]):
        same_file = RELEASES[before]["modules"] == RELEASES[after]["modules"]
        assert same_file == (tables[before] == tables[after]), (before, after)


@pytest.mark.parametrize("version", RECORDED_VERSIONS)
def test_the_table_and_the_registry_agree(version):
    """Two readings of one wheel: the module of every connector the factory
    registers is in the table, and binds the registered class for sure."""
    facts = facts_of(version)
    table = facts["modules"]
    assert table["prefix"] == "vllm.distributed.kv_transfer"
    for registration in facts["registrations"]:
        module = table["modules"].get(registration["module_path"])
        assert module is not None, registration
        assert registration["class_name"] in module["names"], registration


def test_the_examples_of_the_recorded_cases_are_in_the_tables():
    """What the recorded real-vLLM cases show (tests/conformance/): NixlConnector
    moved from v1.nixl_connector to the package v1.nixl in 0.20.0, which has no
    NixlPushConnector before 0.24.0; UMBP arrives in 0.33.0."""
    v1 = "vllm.distributed.kv_transfer.kv_connector.v1"

    def table(version: str) -> dict:
        return json.loads((RULES / RELEASES[version]["modules"]).read_text(encoding="utf-8"))["modules"]

    assert "NixlConnector" in table("0.19.1")[f"{v1}.nixl_connector"]["names"]
    assert f"{v1}.nixl_connector" not in table("0.20.0")
    assert "NixlPushConnector" not in table("0.23.0")[f"{v1}.nixl"]["names"]
    assert "NixlPushConnector" in table("0.24.0")[f"{v1}.nixl"]["names"]
    assert f"{v1}.umbp" not in table("0.32.0") and "UMBPStoreConnector" in table("0.33.0")[f"{v1}.umbp"]["names"]


def test_a_policy_looks_node_module_paths_up_in_its_release_table():
    v1 = "vllm.distributed.kv_transfer.kv_connector.v1"
    policy = hma_policy.load_policy(release="0.19.1")
    try:
        modules = policy.model.modules
        assert modules.release == "0.19.0"  # 0.19.0 and 0.19.1 ship the same tree
        assert modules.facts(f"{v1}.nixl_connector", "NixlConnector") == ("present", "yes")
        assert modules.facts(f"{v1}.nixl", "NixlConnector") == ("missing", "unknown")
        assert modules.facts("acme.kv.connector", "AcmeConnector") == ("unknown", "unknown")
    finally:
        policy.close()
