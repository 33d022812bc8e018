"""The bundled data of the vLLM releases: rules/releases.yaml, and the
registries and option lists it names (rules/registries/, rules/options/).

CI has no wheels: what was read from them is recorded in tests/vllm_releases/
(PROVENANCE.md): the facts of every release, and the option list of each
release whose bundled options file is named after an earlier release. The
tests here hold the bundled files to those records:

- every release's recorded facts render, byte for byte, to the bundled
  registry named after it, and, for a release sharing an earlier release's
  registry, to the same content under its own header;
- releases.yaml is valid against schemas/releases.schema.json, names every
  recorded release once, in release order, with its recorded wheel, and each
  file it names exists; two releases share a file exactly when its content
  is the same for both, and the file is named after the first of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

import hma_policy
from hma_policy import cli
from hma_policy.authoring.wheel import load_facts, render_registry
from hma_policy.core import yamlsafe

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules"
RECORDED = ROOT / "tests" / "vllm_releases"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


RECORDED_VERSIONS = sorted((p.stem for p in (RECORDED / "facts").glob("*.json")), key=version_key)


def releases_file() -> dict:
    data, _ = yamlsafe.load((RULES / "releases.yaml").read_text(encoding="utf-8"))
    return data


RELEASES = releases_file()["releases"]


def facts_of(version: str) -> dict:
    return load_facts(str(RECORDED / "facts" / f"{version}.json"))


def registry_content(text: str) -> list[str]:
    """A registry without what names its release: the comment header and vllm_version."""
    return [line for line in text.splitlines() if not line.startswith(("#", "vllm_version:"))]


def options_of(version: str) -> dict:
    """A release's recorded option list: the bundled file named after it, else its record here."""
    own = RULES / "options" / f"{version}.json"
    return json.loads((own if own.exists() else RECORDED / "options" / f"{version}.json").read_text(encoding="utf-8"))


def options_content(options: dict) -> dict:
    return {k: v for k, v in options.items() if k not in ("vllm_version", "wheel")}


# -- releases.yaml ----------------------------------------------------------------------------

def test_releases_file_is_valid_against_its_schema():
    schema = json.loads((ROOT / "schemas" / "releases.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "https://hma-policy.dev/schemas/releases.schema.json"
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(schema).iter_errors(releases_file())]
    assert errors == []
    # and the schema refuses what the loader must not meet
    broken = json.loads(json.dumps(releases_file()))
    broken["releases"]["0.33.0"]["registry"] = "../../etc/passwd"
    broken["releases"]["0.33"] = broken["releases"].pop("0.9.1")
    messages = sorted(e.message for e in Draft202012Validator(schema).iter_errors(broken))
    assert len(messages) == 2 and any("'../../etc/passwd' does not match" in m for m in messages)


def test_releases_file_names_every_release_once_in_order_with_its_wheel():
    data = releases_file()
    assert data["kind"] == "releases"
    # yamlsafe refuses a repeated key, so each release is named once; the order is release order
    assert list(RELEASES) == RECORDED_VERSIONS
    # from the first release with the hybrid KV cache manager; the default is the newest
    assert len(RECORDED_VERSIONS) >= 41 and RECORDED_VERSIONS[0] == "0.9.1" and "0.33.0" in RECORDED_VERSIONS
    assert data["default"] == RECORDED_VERSIONS[-1]
    for version, entry in RELEASES.items():
        wheel = facts_of(version)["wheel"]
        assert (entry["wheel"], entry["sha256"]) == (wheel["file"], wheel["sha256"]), version
        assert entry["wheel"].startswith(f"vllm-{version}-")
        assert (RULES / entry["registry"]).is_file() and (RULES / entry["options"]).is_file(), version
    provenance = (RECORDED / "PROVENANCE.md").read_text(encoding="utf-8")
    for version, entry in RELEASES.items():
        assert f"| {version} | `{entry['wheel']}` |" in provenance and f"`{entry['sha256']}` |" in provenance


SURVEY_ROW = re.compile(r"^\| (E[0-9]+) \| ([0-9.]+)(?: – ([0-9.]+))? \|", re.M)


def test_epochs_follow_the_survey():
    """docs/vllm-releases.md §2: each epoch a run of consecutive releases,
    the one its row of the table gives (`| E7 | 0.23.0 – 0.29.0 |`)."""
    survey = SURVEY_ROW.findall((ROOT / "docs" / "vllm-releases.md").read_text(encoding="utf-8"))
    assert [epoch for epoch, _, _ in survey][:8] == [f"E{n}" for n in range(1, 9)]
    expected = {}
    for epoch, first, last in survey:
        start, end = RECORDED_VERSIONS.index(first), RECORDED_VERSIONS.index(last or first)
        expected.update((version, epoch) for version in RECORDED_VERSIONS[start:end + 1])
    assert {version: entry["epoch"] for version, entry in RELEASES.items()} == expected
    # and the examples
    assert [RELEASES[v]["epoch"] for v in ("0.9.1", "0.21.0", "0.22.0", "0.23.0", "0.33.0")] == ["E1", "E5", "E6", "E7", "E8"]


@pytest.mark.parametrize("kind, folder, suffix", [("registry", "registries", ".yaml"), ("options", "options", ".json")])
def test_every_bundled_file_is_named_after_the_first_release_that_uses_it(kind, folder, suffix):
    users: dict[str, list[str]] = {}
    for version, entry in RELEASES.items():
        users.setdefault(entry[kind], []).append(version)
    bundled = sorted(f"{folder}/{p.name}" for p in (RULES / folder).glob(f"*{suffix}"))
    assert sorted(users) == bundled  # none missing, none unused
    for name, versions in users.items():
        assert name == f"{folder}/{versions[0]}{suffix}"
        # a file serves a run of consecutive releases
        indexes = [RECORDED_VERSIONS.index(v) for v in versions]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes))), name


# -- the registries ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", RECORDED_VERSIONS)
def test_recorded_facts_render_to_the_bundled_registry(version, tmp_path, capsys):
    """The bundled registry is the command's output (`hma-policy registry
    render --from-facts`, run here in-process) for the first release that has
    it, byte for byte; a later release sharing it renders the same content
    under its own header."""
    facts = facts_of(version)
    assert facts["vllm_version"] == version
    out = tmp_path / "registry.yaml"
    assert cli.main(["registry", "render", "--from-facts", str(RECORDED / "facts" / f"{version}.json"), "-o", str(out)]) == 0
    assert capsys.readouterr() == ("", f"hma-policy: wrote {out}\n")
    text = out.read_text(encoding="utf-8")
    assert text == render_registry(facts)  # the command writes what the renderer gives, nothing more
    bundled = (RULES / RELEASES[version]["registry"]).read_text(encoding="utf-8")
    if RELEASES[version]["registry"] == f"registries/{version}.yaml":
        assert out.read_bytes() == (RULES / RELEASES[version]["registry"]).read_bytes()
    else:
        assert registry_content(text) == registry_content(bundled)
    assert f"from {facts['wheel']['file']}\n# (sha256 {facts['wheel']['sha256']})." in text


def test_releases_with_different_registries_differ():
    """The sharing is exact: releases name different registries only where
    their content differs (else the later one would have been mapped)."""
    contents = {v: registry_content(render_registry(facts_of(v))) for v in RECORDED_VERSIONS}
    for before, after in zip(RECORDED_VERSIONS, RECORDED_VERSIONS[1:]):
        same_file = RELEASES[before]["registry"] == RELEASES[after]["registry"]
        assert same_file == (contents[before] == contents[after]), (before, after)
    assert len({RELEASES[v]["registry"] for v in RECORDED_VERSIONS}) >= 17  # 17 distinct registries in 0.9.1..0.33.0


@pytest.mark.parametrize("name", sorted(p.name for p in (RULES / "registries").glob("*.yaml")))
def test_each_bundled_registry_is_a_registry_rule_file(name):
    data, _ = yamlsafe.load((RULES / "registries" / name).read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "schemas" / "rules.schema.json").read_text(encoding="utf-8"))
    assert [e.message for e in Draft202012Validator(schema).iter_errors(data)] == []
    assert data["kind"] == "registry" and data["vllm_version"] == name.removesuffix(".yaml")


@pytest.mark.parametrize("version", [v for v, e in RELEASES.items() if (RULES / "epochs" / e["epoch"]).is_dir()])
def test_each_release_with_its_epochs_rules_loads_and_decides(version):
    """Every release whose epoch's rule files are bundled gets a policy from
    them and its generated registry, and decides with it (the 0.33.0 one is
    also held to the epoch's policy tests and the shared conformance cases
    by test_authoring_cli.py and test_conformance*.py)."""
    policy = hma_policy.load_policy(release=version)
    try:
        document = json.loads((ROOT / "examples" / "multi-mixed.json").read_text(encoding="utf-8"))
        decision = policy.decide(document)
    finally:
        policy.close()
    assert decision.vllm.release == version
    # Each child as the release's generated registry says: NixlConnector
    # inherits SupportsHMA from 0.18.0 on, LMCacheConnectorV1 in no release.
    registry = yaml.safe_load((RULES / RELEASES[version]["registry"]).read_text(encoding="utf-8"))["connectors"]
    nixl = registry["NixlConnector"]["supports_hma"]
    assert nixl == (version_key(version) >= version_key("0.18.0"))
    assert [(c.kv_connector, c.supports_hma) for c in decision.connectors] == [
        ("MultiConnector", False), ("NixlConnector", nixl), ("LMCacheConnectorV1", False)]
    assert decision.outcome == "disabled"


# -- the option lists ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", RECORDED_VERSIONS)
def test_each_release_shares_exactly_the_options_it_has(version):
    own = options_of(version)
    assert own["vllm_version"] == version
    assert own["wheel"]["sha256"] == RELEASES[version]["sha256"]
    bundled = json.loads((RULES / RELEASES[version]["options"]).read_text(encoding="utf-8"))
    assert options_content(own) == options_content(bundled)
    assert "--disable-hybrid-kv-cache-manager" in own["options"] and "--kv-transfer-config" in own["options"]


def test_releases_with_different_options_differ():
    contents = {v: options_content(options_of(v)) for v in RECORDED_VERSIONS}
    for before, after in zip(RECORDED_VERSIONS, RECORDED_VERSIONS[1:]):
        same_file = RELEASES[before]["options"] == RELEASES[after]["options"]
        assert same_file == (contents[before] == contents[after]), (before, after)


def test_options_are_recorded_here_only_where_they_are_not_bundled():
    recorded = sorted((p.stem for p in (RECORDED / "options").glob("*.json")), key=version_key)
    assert recorded == [v for v in RECORDED_VERSIONS if RELEASES[v]["options"] != f"options/{v}.json"]


# -- the real wheels, when cached ----------------------------------------------------------------

# Where the slow test looks for wheels (pip download --no-deps vllm==X -d DIR):
# the directories of $HMA_POLICY_VLLM_WHEELS (os.pathsep-separated), else /tmp/wheels.
WHEEL_DIRS = [Path(d) for d in os.environ.get("HMA_POLICY_VLLM_WHEELS", "/tmp/wheels").split(os.pathsep) if d]
# At least three releases, from different epochs and sharing registries or not,
# and any other bundled release whose wheel is cached.
WHEEL_RELEASES = sorted({"0.20.2", "0.22.1", "0.25.1"} | {
    v for v, e in RELEASES.items() for d in WHEEL_DIRS if (d / e["wheel"]).is_file()}, key=version_key)


@pytest.mark.slow
@pytest.mark.parametrize("version", WHEEL_RELEASES)
def test_from_wheel_on_the_real_wheel_gives_the_bundled_files(version, tmp_path, capsys):
    """`hma-policy registry from-wheel` on the release's real wheel (the one
    releases.yaml names, checked by sha256) writes the recorded facts, the
    bundled registry, the bundled option list and config classes: byte for
    byte where the file is named after this release, the same content otherwise."""
    entry = RELEASES[version]
    wheel = next((d / entry["wheel"] for d in WHEEL_DIRS if (d / entry["wheel"]).is_file()), None)
    if wheel is None:
        pytest.skip(f"{entry['wheel']} is not cached in {os.pathsep.join(map(str, WHEEL_DIRS))} (set "
                    f"HMA_POLICY_VLLM_WHEELS; fetch it with `pip download --no-deps vllm=={version}`; CI has no wheels)")
    digest = hashlib.sha256()
    with wheel.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == entry["sha256"], f"{wheel} is not the wheel releases.yaml names"
    out = {name: tmp_path / name for name in ("registry.yaml", "facts.json", "options.json", "configs.json")}
    assert cli.main(["registry", "from-wheel", str(wheel), "-o", str(out["registry.yaml"]),
                     "--facts", str(out["facts.json"]), "--options", str(out["options.json"]),
                     "--configs", str(out["configs.json"])]) == 0
    assert "Traceback" not in "".join(capsys.readouterr())
    assert out["facts.json"].read_bytes() == (RECORDED / "facts" / f"{version}.json").read_bytes()
    registry, options = out["registry.yaml"].read_bytes(), out["options.json"].read_bytes()
    if entry["registry"] == f"registries/{version}.yaml":
        assert registry == (RULES / entry["registry"]).read_bytes()
    else:
        assert registry_content(registry.decode()) == registry_content((RULES / entry["registry"]).read_text("utf-8"))
    assert options == ((RULES / entry["options"]) if entry["options"] == f"options/{version}.json"
                       else RECORDED / "options" / f"{version}.json").read_bytes()
    # the config classes (rules/configs/, tests/test_release_configs.py): every cached wheel was read
    assert out["configs.json"].read_bytes() == ((RULES / entry["configs"]) if entry["configs"] == f"configs/{version}.json"
                                                else RECORDED / "configs" / f"{version}.json").read_bytes()
