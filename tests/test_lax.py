"""Values as vLLM's pydantic reads them into the number and boolean fields of
KVTransferConfig (core/lax.py), against pydantic's own answers recorded as
data (tests/pydantic_lax/, PROVENANCE.md there), and in documents."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

import hma_policy
from hma_policy import InputError
from hma_policy.core.lax import NOT_READ, read

CASES = json.loads((Path(__file__).resolve().parent / "pydantic_lax" / "cases.json").read_text())["cases"]
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_the_recording_covers_what_the_rules_hinge_on():
    strings = [c for c in CASES if isinstance(c["value"], str)]
    assert len(strings) > 3000
    for kind in ("int", "float", "bool"):
        taken = sum(1 for c in strings if c[kind] is not None)
        assert 30 < taken < len(strings) / 2, kind  # both answers, often


@pytest.mark.parametrize("kind", ["int", "float", "bool"])
def test_every_recorded_value_reads_as_pydantic_read_it(kind):
    """A value pydantic takes reads as what pydantic gave; one it refuses is
    left for the schema. NOT_READ also stands for a value of the field's own
    JSON type (the schema checks it as pydantic does) and for a non-finite
    float, which the deployment schema refuses everywhere."""
    wrong = []
    for case in CASES:
        value, want = case["value"], case[kind]
        got = read(value, kind)
        if want is None:
            ok = got is NOT_READ
        elif got is NOT_READ:
            gave = eval(want, {"inf": math.inf, "nan": math.nan})  # noqa: S307 - repr() of a number or bool
            own_type = type(value) is not str and (type(value) is bool) == (kind == "bool")
            ok = own_type or (isinstance(gave, float) and not math.isfinite(gave))
        else:
            ok = repr(got) == want and type(got).__name__ == kind
        if not ok:
            wrong.append((value, want, got))
    assert wrong == []


def decided(document, **load):
    return hma_policy.load_policy(**load).decide(document)


def test_a_kv_transfer_config_number_given_as_text_is_the_number_vllm_reads():
    """vLLM's own P2P NCCL example writes "kv_port":"$kv_port": pydantic reads
    the text, and vLLM starts (regression: `input.schema`, "expected integer")."""
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_port": " 8_000 ",
                                       "kv_connector_extra_config": {"connectors": [
                                           {**NIXL, "kv_port": "80.0", "enable_permute_local_kv": "yes"}]}}}
    given = copy.deepcopy(document)
    policy = hma_policy.load_policy()
    assert policy.decide(document).outcome == "enabled"
    ktc = policy.prepare(document).document["kv_transfer_config"]
    assert ktc["kv_port"] == 8000 and ktc["kv_connector_extra_config"]["connectors"][0]["kv_port"] == 80
    assert ktc["kv_connector_extra_config"]["connectors"][0]["enable_permute_local_kv"] is True
    assert document == given  # the caller's document is not changed
    for value in (True, "+0080"):
        assert decided({"kv_transfer_config": {**NIXL, "kv_port": value}}).outcome == "enabled"


@pytest.mark.parametrize("field, value, expected", [
    ("kv_port", "8e3", "expected integer, got `8e3`"),
    ("kv_port", "80.5", "expected integer, got `80.5`"),
    ("kv_port", "8__0", "expected integer, got `8__0`"),
    ("enable_permute_local_kv", " true", "expected boolean, got ` true`"),
    ("enable_permute_local_kv", 2, "expected boolean, got `2`"),
])
def test_text_pydantic_refuses_is_still_refused(field, value, expected):
    with pytest.raises(InputError) as caught:
        decided({"kv_transfer_config": {**NIXL, field: value}})
    (problem,) = caught.value.problems
    assert (problem.code, problem.path, problem.message) == ("input.schema", f"/kv_transfer_config/{field}", expected)


def test_each_release_reads_its_own_fields_leniently():
    """kv_buffer_size, a float field up to 0.10.2: "1e1" is 10.0 there; 0.33.0 has no such field."""
    document = {"kv_transfer_config": {**NIXL, "kv_buffer_size": "1e1", "kv_port": "14579"}}
    old = hma_policy.load_policy(release="0.10.2")
    assert old.prepare(document).document["kv_transfer_config"]["kv_buffer_size"] == 10.0
    assert old.decide(document).outcome == "disabled"  # decided: NixlConnector supports HMA from 0.18.0
    with pytest.raises(InputError) as caught:
        decided(document)
    assert [p.message for p in caught.value.problems] == ["unknown field `kv_buffer_size`"]


def test_a_value_the_file_does_not_give_in_a_number_field_is_not_decided(tmp_path):
    """`"kv_port":"$kv_port"` with $kv_port unknown: whether vLLM starts
    depends on its text, so the launch is not decided (regression: the
    text `$kv_port` was checked as the port, "expected integer")."""
    result = hma_policy.core.command.read_command(
        ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both",'
         '"kv_port":"\x00$kv_port\x00","engine_id":"\x00$ID\x00"}'])
    assert result.document is None
    assert [(p.code, p.message) for p in result.problems] == [
        ("source.unresolved", "`--kv-transfer-config` takes its value at `/kv_port` from `$kv_port`, which this file "
         "does not set")]  # only the value the decision reads: `$ID` (engine_id) is not one


def test_a_path_that_does_not_follow_the_document_changes_nothing():
    """read_refused follows problem paths; one that does not fit the document
    (a list where a key is named, an index past the end) is passed over."""
    from hma_policy.core.lax import read_refused
    document = {"kv_transfer_config": {"kv_port": "80", "kv_connector_extra_config": [1],
                                       "x": {"kv_connector_extra_config": {"connectors": []}}}}
    paths = ["/kv_transfer_config/kv_connector_extra_config/connectors/0/kv_port",
             "/kv_transfer_config/x/kv_connector_extra_config/connectors/3/kv_port", "/model/kv_port"]
    assert read_refused(document, paths, {"kv_port": "int"}) is False
    assert read_refused(document, ["/kv_transfer_config/kv_port"], {"kv_port": "int"}) is True
    assert document["kv_transfer_config"]["kv_port"] == 80
