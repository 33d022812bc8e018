"""Each release's config classes (rules/configs/, `registry from-wheel --configs`)
and the input check they make: a document is checked as the release that
decides it checks it, from that data (engine/core/configlist.py).

CI has no wheels: the bundled files are held to their own rendering and to
releases.yaml here; test_vllm_releases.py's slow test regenerates them from
the cached wheels byte for byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.authoring.wheel import configs_json
from hma_policy.core import yamlsafe
from hma_policy.core.configlist import document_schema, known_configs
from hma_policy.core.policies import Hint, PolicySet
from hma_policy.core.schema import load_schema

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules"
RECORDED = ROOT / "tests" / "vllm_releases" / "configs"
RELEASES = yamlsafe.load((RULES / "releases.yaml").read_text(encoding="utf-8"))[0]["releases"]
BUNDLED = sorted(p.name for p in (RULES / "configs").glob("*.json"))
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _content(data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in ("vllm_version", "wheel")}


# -- the data ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUNDLED + [f"recorded/{p.name}" for p in sorted(RECORDED.glob("*.json"))])
def test_each_configs_file_is_what_from_wheel_renders(name):
    """The files are the generator's output: read and rendered again, byte for byte,
    named after the release whose wheel they record."""
    path = RECORDED / name.split("/", 1)[1] if name.startswith("recorded/") else RULES / "configs" / name
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert configs_json(data) == text
    version = data["vllm_version"]
    assert path.name == f"{version}.json"
    assert (data["wheel"]["file"], data["wheel"]["sha256"]) == (RELEASES[version]["wheel"], RELEASES[version]["sha256"])
    assert data["format"] == 1 and "KVTransferConfig" in data["classes"]


def test_every_release_names_a_configs_file_and_every_file_is_used():
    used = {entry["configs"] for entry in RELEASES.values()}
    assert used == {f"configs/{name}" for name in BUNDLED}
    read = {json.loads((RULES / "configs" / n).read_text(encoding="utf-8"))["vllm_version"] for n in BUNDLED}
    read |= {p.stem for p in RECORDED.glob("*.json")}
    for version, entry in RELEASES.items():
        target = entry["configs"][len("configs/"):-len(".json")]
        if version in read and target != version:  # read, and the same as an earlier read release
            own = json.loads((RECORDED / f"{version}.json").read_text(encoding="utf-8"))
            shared = json.loads((RULES / entry["configs"]).read_text(encoding="utf-8"))
            assert _key(target) < _key(version) and _content(own) == _content(shared), version
        elif version not in read:  # not read: the nearest read release, said so in the provenance
            same_minor = [r for r in read if _key(r)[:2] == _key(version)[:2]]
            nearest = min(same_minor, key=_key) if same_minor else max((r for r in read if _key(r) < _key(version)), key=_key)
            assert RELEASES[nearest]["configs"] == entry["configs"], version


def test_the_provenance_lists_the_file_of_every_release():
    provenance = (RULES / "configs" / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([0-9.]+) \| `(configs/[0-9.]+\.json)` \|", provenance, re.M))
    assert rows == {version: entry["configs"] for version, entry in RELEASES.items()}
    assert provenance.count("**not read**") == sum(
        1 for v, e in RELEASES.items() if not (RULES / f"configs/{v}.json").exists() and not (RECORDED / f"{v}.json").exists())


def test_what_the_wheels_say_about_the_classes():
    """A few facts of the read wheels, as vLLM's source states them (tools/_vllm_child.py ran them)."""
    ktc = {v: known_configs(v).classes["KVTransferConfig"]
           for v in ("0.9.1", "0.13.0", "0.15.1", "0.16.0", "0.18.0", "0.33.0")}
    assert [ktc[v].unknown_fields for v in ktc] == ["ignored", "ignored", "ignored", "refused", "refused", "refused"]
    assert "kv_ip" in ktc["0.9.1"].fields and "kv_ip" not in ktc["0.33.0"].fields
    assert ktc["0.33.0"].fields["kv_load_failure_policy"].choices == ("recompute", "fail")
    assert set(ktc["0.9.1"].fields["kv_role"].choices) == {"kv_producer", "kv_consumer", "kv_both"}
    assert "hisparse_config" not in known_configs("0.28.0").classes["AttentionConfig"].fields
    assert "hisparse_config" in known_configs("0.30.0").classes["AttentionConfig"].fields
    assert "AttentionConfig" not in known_configs("0.9.1").classes


def test_the_default_release_checks_with_the_bundled_schema_unchanged():
    """0.33.0's classes say what the bundled schema says: its documents are checked as before."""
    assert document_schema("0.33.0").schema is load_schema("deployment")
    assert document_schema("0.33.0").release is None
    assert document_schema("0.28.0").release == "0.28.0"


# -- the check --------------------------------------------------------------------------------

def _refusal(release: str, document: dict) -> list[tuple[str, str, str]]:
    policy = hma_policy.load_policy(release=release)
    try:
        policy.decide(document)
    except hma_policy.InputError as exc:
        return [(p.code, p.path, p.message) for p in exc.problems]
    finally:
        policy.close()
    return []


def test_hisparse_config_is_refused_by_a_release_without_it():
    document = {"kv_transfer_config": None, "hisparse_config": {"index_topk": 2048}}
    assert _refusal("0.28.0", document) == [(
        "input.schema", "/hisparse_config",
        "`hisparse_config` is not in vLLM 0.28.0: it has no `AttentionConfig.hisparse_config`, got "
        '`{"index_topk": 2048}`')]
    assert _refusal("0.30.0", document) == []
    assert _refusal("0.28.0", {"kv_transfer_config": None, "hisparse_config": None}) == []


def test_an_unknown_kv_transfer_config_field_is_ignored_where_the_release_ignores_it():
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"connectors": [{**NIXL, "kv_buffer_devce": "cuda"}]}}}
    assert _refusal("0.13.0", document) == []
    assert _refusal("0.18.0", document) == [(
        "input.schema", "/kv_transfer_config/kv_connector_extra_config/connectors/0/kv_buffer_devce",
        "unknown field `kv_buffer_devce`")]


def test_each_release_takes_the_fields_its_kv_transfer_config_has():
    old = {"kv_transfer_config": {**NIXL, "kv_ip": "10.0.0.1", "kv_rank": None}}
    assert _refusal("0.30.0", old) == []
    assert [p[:2] for p in _refusal("0.33.0", old)] == [("input.schema", "/kv_transfer_config/kv_ip")]
    # 0.9.1's kv_buffer_device is Optional[str]; 0.33.0's is a str
    nullable = {"kv_transfer_config": {**NIXL, "kv_buffer_device": None}}
    assert _refusal("0.9.1", nullable) == []
    assert [p[:2] for p in _refusal("0.33.0", nullable)] == [("input.schema", "/kv_transfer_config/kv_buffer_device")]
    # a field the release has is checked as it declares it
    assert [p[:2] for p in _refusal("0.13.0", {"kv_transfer_config": {**NIXL, "kv_load_failure_policy": "retry"}})] == [
        ("input.schema", "/kv_transfer_config/kv_load_failure_policy")]


def test_0_32_0_refuses_the_kv_transfer_config_fields_it_dropped():
    """0.32.0's KVTransferConfig has no kv_buffer_size, kv_rank, kv_parallel_size or kv_ip
    (read from its wheel; 0.31.0's still has them) and refuses unknown fields (regression:
    0.32.0 was mapped, unread, to 0.30.0's classes and took them)."""
    document = {"kv_transfer_config": {"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer",
                                       "kv_buffer_size": 1e9}}
    assert _refusal("0.30.0", document) == []
    assert _refusal("0.31.0", document) == []
    assert _refusal("0.32.0", document) == [(
        "input.schema", "/kv_transfer_config/kv_buffer_size", "unknown field `kv_buffer_size`")]
    for field, value in (("kv_rank", 0), ("kv_parallel_size", 2), ("kv_ip", "10.0.0.1")):
        assert [p[:2] for p in _refusal("0.32.0", {"kv_transfer_config": {**NIXL, field: value}})] == [
            ("input.schema", f"/kv_transfer_config/{field}")], field


def test_the_releases_once_mapped_to_a_neighbour_check_as_their_wheels_say():
    """0.16.0 is the first release whose KVTransferConfig refuses an unknown field (vLLM's
    @config sets extra="forbid"); 0.11.0's still takes a null kv_buffer_device and has no
    enable_permute_local_kv (regression: mapped, unread, to 0.13.0's and 0.11.1's classes)."""
    typo = {"kv_transfer_config": {**NIXL, "kv_buffer_devce": "cuda"}}
    assert _refusal("0.15.1", typo) == []
    for release in ("0.16.0", "0.17.0", "0.17.1"):
        assert _refusal(release, typo) == [("input.schema", "/kv_transfer_config/kv_buffer_devce",
                                            "unknown field `kv_buffer_devce`")], release
    nullable = {"kv_transfer_config": {**NIXL, "kv_buffer_device": None}}
    assert _refusal("0.11.0", nullable) == []
    assert [p[:2] for p in _refusal("0.11.1", nullable)] == [("input.schema", "/kv_transfer_config/kv_buffer_device")]
    # a field 0.11.0 lacks is one it ignores, whatever its value
    assert _refusal("0.11.0", {"kv_transfer_config": {**NIXL, "enable_permute_local_kv": "yes"}}) == []
    assert "hisparse_config" not in known_configs("0.29.0").classes["AttentionConfig"].fields


def test_an_option_the_release_lacks_given_as_null_is_an_option_not_given():
    """tools/vllm_conformance.py passes vLLM nothing for a null option: nor does the engine refuse it."""
    assert _refusal("0.9.1", {"kv_transfer_config": None, "kv_offloading_size": None,
                              "kv-offloading-backend": None}) == []
    assert _refusal("0.9.1", {"kv_transfer_config": None, "kv_offloading_size": 2}) == [(
        "input.schema", "/kv_offloading_size", "`kv_offloading_size` is not an option of vLLM 0.9.1")]


def test_a_policy_set_checks_a_document_with_the_release_it_names():
    policies = PolicySet()
    try:
        ignored = {"vllm_version": "0.13.0", "kv_transfer_config": {**NIXL, "kv_buffer_devce": "cuda"}}
        assert policies.decide(ignored).vllm == ("0.13.0", "document vllm_version")
        with pytest.raises(hma_policy.InputError, match="not in vLLM 0.28.0"):
            policies.decide({"vllm_version": "0.28.0", "hisparse_config": {}})
        # A release chosen after the document was prepared (an audit's image tag) checks it again.
        prepared = policies.prepare({"hisparse-config": {}})
        with pytest.raises(hma_policy.InputError) as caught:
            policies.decide_prepared(prepared, Hint("0.28.0", "image tag vllm/vllm-openai:v0.28.0"))
        assert [(p.code, p.path) for p in caught.value.problems] == [("input.schema", "/hisparse-config")]
        assert policies.decide_prepared(prepared).outcome  # the default release takes it
    finally:
        policies.close()


def test_a_release_named_in_kebab_case_checks_the_document_too():
    """`vllm-version`, as vLLM's options may be spelled, names the release that
    checks the document as well as the one that decides it (regression: 0.10.1
    decided it, after 0.33.0's schema had refused its kv_buffer_size)."""
    document = {"vllm-version": "0.10.1", "kv-transfer-config": {
        "kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e1"}}
    policies = PolicySet()
    try:
        assert policies.decide(document).vllm == ("0.10.1", "document vllm_version")
        refused = policies.refused([], {"vllm-version": "0.10.1"})
        assert refused.vllm == ("0.10.1", "document vllm_version")
    finally:
        policies.close()


def test_a_release_named_by_what_deploys_it_checks_the_fields_the_default_lacks(tmp_path):
    """An image tag of 0.10.1 and a kv_buffer_size (a field up to 0.10.2):
    prepared with the tag's release, not refused by the default's schema
    (regression: the audit and the admission webhook reported `unknown
    field kv_buffer_size` for a launch 0.10.1 starts)."""
    ktc = {"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e1"}
    policies = PolicySet()
    try:
        tagged = policies.decide({"kv_transfer_config": ktc}, hint=Hint("0.10.1", "image tag vllm/vllm-openai:v0.10.1"))
        assert (tagged.outcome, tagged.vllm) == ("disabled", ("0.10.1", "image tag vllm/vllm-openai:v0.10.1"))
        with pytest.raises(hma_policy.InputError, match="unknown field `kv_buffer_size`"):
            policies.decide({"kv_transfer_config": ktc})
    finally:
        policies.close()
    entry = audited_launch_of_0_10_1(tmp_path, ktc)
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("disabled", [])


def audited_launch_of_0_10_1(folder, kv_transfer_config):
    """The audit's entry of a compose service of vLLM 0.10.1's image with this config."""
    (folder / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n"
        f"    command: [--model, m, --kv-transfer-config, '{json.dumps(kv_transfer_config)}']\n", encoding="utf-8")
    (entry,) = audit([str(folder)]).entries
    return entry


def test_a_refused_document_is_stamped_with_the_release_that_read_it(tmp_path):
    """An input error says which release refused it and why that one
    (regression: every refusal said `0.33.0 (default)` and 0.33.0's digest)."""
    bad_role = {"kv_connector": "NixlConnector", "kv_role": "kv_decoder"}
    policies = PolicySet()
    old = hma_policy.load_policy(release="0.10.1")
    try:
        with pytest.raises(hma_policy.InputError) as caught:
            policies.decide({"vllm_version": "0.10.1", "kv_transfer_config": bad_role})
        refused = policies.refused(caught.value.problems, {"vllm_version": "0.10.1"})
        assert (refused.vllm, refused.policy_digest) == (("0.10.1", "document vllm_version"), old.digest)
        tagged = policies.refused(caught.value.problems, None, Hint("0.10.1", "image tag vllm/vllm-openai:v0.10.1"))
        assert tagged.vllm == ("0.10.1", "image tag vllm/vllm-openai:v0.10.1")
        # A release these rules do not hold is one of the problems: the default stamps it.
        unknown = policies.refused(caught.value.problems, {"vllm_version": "0.1.0"})
        assert (unknown.vllm, unknown.policy_digest) == (("0.33.0", "default"), policies.digest)
    finally:
        policies.close()
        old.close()
    fixed = PolicySet(release="0.20.0", source="--vllm-version")
    try:
        assert fixed.refused([], {"vllm_version": "0.10.1"}).vllm == (
            "0.20.0", "--vllm-version (the document names 0.10.1)")
    finally:
        fixed.close()
    entry = audited_launch_of_0_10_1(tmp_path, bad_role)
    assert (entry.decision["outcome"], entry.decision["vllm"]) == (
        "error", {"release": "0.10.1", "source": "image tag vllm/vllm-openai:v0.10.1"})

