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


# vLLM's own P2P NCCL example (disagg_example_p2p_nccl_xpyd.sh), as a launcher holds it: kv_port from a
# variable not given, and kv_buffer_size, a field up to 0.10.2 only.
P2P = ('vllm serve m --kv-transfer-config "{\\"kv_connector\\":\\"P2pNcclConnector\\",\\"kv_role\\":\\"kv_producer\\",'
       '\\"kv_buffer_size\\":\\"1e1\\",\\"kv_port\\":\\"$KV_PORT\\",\\"engine_id\\":\\"$ID\\"}"')


def refusal(call):
    with pytest.raises(InputError) as caught:
        call()
    return [(p.code, p.path, p.message) for p in caught.value.problems]


def test_a_number_the_file_does_not_give_is_given_a_stand_in():
    result = hma_policy.core.command.read_command(
        ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both",'
         '"kv_port":"\x00$kv_port\x00","enable_permute_local_kv":"\x00$P\x00","engine_id":"\x00$ID\x00"}'])
    assert result.document is None
    stand_in = result.stand_in
    assert stand_in.paths == ("/kv_transfer_config/kv_port", "/kv_transfer_config/enable_permute_local_kv")
    assert json.loads(stand_in.document["kv_transfer_config"]) == {
        "kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 0, "enable_permute_local_kv": False,
        "engine_id": "$ID"}
    assert stand_in.document["model"] == {"name": "m"}


@pytest.mark.parametrize("argv", [
    # a value read for more than its type: which connector it is
    ["vllm", "serve", "m", "--kv-transfer-config",
     '{"kv_connector":"\x00$C\x00","kv_role":"kv_both","kv_port":"\x00$P\x00"}'],
    # written bare, a whole object the decision reads may hold anything (a MultiConnector's children)
    ["vllm", "serve", "m", "--kv-transfer-config",
     '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":\x00$X\x00,'
     '"kv_port":"\x00$P\x00"}'],
    # another problem, which no stand-in answers
    ["vllm", "serve", "m", "x", "--kv-transfer-config",
     '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_port":"\x00$P\x00"}'],
])
def test_no_stand_in_where_one_would_not_settle_the_command(argv):
    result = hma_policy.core.command.read_command(argv)
    assert result.problems and result.stand_in is None


def test_a_number_written_bare_gets_a_stand_in():
    """`"kv_port": $PORT` in a script's JSON, or a Python dict's unknown value
    through json.dumps: a number where the schema reads one for its type."""
    result = hma_policy.core.command.read_command(
        ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both",'
                                                       '"kv_port":\x00$P\x00}'])
    assert [p.code for p in result.problems] == ["source.unresolved"]
    assert result.stand_in is not None and result.stand_in.paths == ("/kv_transfer_config/kv_port",)
    assert '"kv_port": 0' in result.stand_in.document["kv_transfer_config"]


def test_a_command_refused_whatever_its_unknown_number_is_gets_that_refusal():
    """kv_buffer_size is no field of 0.33.0's KVTransferConfig: vLLM refuses the
    command whatever $KV_PORT holds (regression: source.unresolved at /kv_port)."""
    assert refusal(lambda: hma_policy.decide_command(P2P, env={})) == [
        ("input.schema", "/kv_transfer_config/kv_buffer_size", "unknown field `kv_buffer_size`")]
    # Where the release has the field, whether vLLM starts depends on the number.
    unresolved = [("source.unresolved", "/kv_transfer_config", "`--kv-transfer-config` takes its value at `/kv_port` "
                   "from `$KV_PORT` (which is not given in `env`)")]
    assert refusal(lambda: hma_policy.decide_command(P2P, env={}, vllm_version="0.10.2")) == unresolved
    assert refusal(lambda: hma_policy.load_policy(release="0.10.2").decide_command(P2P, env={})) == unresolved
    assert refusal(lambda: hma_policy.decide_command(P2P.replace('\\"kv_buffer_size\\":\\"1e1\\",', ""), env={})) \
        == unresolved
    assert hma_policy.decide_command(P2P.replace("$KV_PORT", "14579"), env={"ID": "x"}, vllm_version="0.10.2").outcome \
        == "disabled"


def test_a_refusal_holds_whatever_the_values_only_away_from_them():
    from hma_policy.core.command import StandIn, refused_whatever
    from hma_policy.core.errors import Problem
    stand_in = StandIn({}, ("/kv_transfer_config/kv_port",))
    assert refused_whatever([Problem("input.schema", "x", "/kv_transfer_config/kv_buffer_size")], stand_in)
    assert refused_whatever([Problem("input.schema", "x", "/kv_transfer_config")], stand_in)  # kv_role missing
    assert not refused_whatever([], stand_in)
    # the stand-in itself refused (out of the field's range): nothing is known of the value
    assert not refused_whatever([Problem("input.schema", "x", "/kv_transfer_config/kv_buffer_size"),
                                 Problem("input.schema", "x", "/kv_transfer_config/kv_port")], stand_in)
    assert not refused_whatever([Problem("input.schema", "x", "/kv_transfer_config/kv_port/0")], stand_in)
    assert refused_whatever([Problem("input.schema", "x", "/kv_transfer_config/kv_port_x")], stand_in)


def test_the_audit_reports_the_refusal_and_notes_the_unknown_number(tmp_path):
    script = tmp_path / "run.sh"
    ktc = ('{\\"kv_connector\\":\\"P2pNcclConnector\\",\\"kv_role\\":\\"kv_producer\\",\\"kv_buffer_size\\":\\"1e1\\",'
           '\\"kv_port\\":\\"$((21001 + i))\\"}')
    script.write_text(f'vllm serve m --kv-transfer-config "{ktc}"\n'
                      f'# hma-policy: {{"vllm_version": "0.10.2"}}\nvllm serve m --kv-transfer-config "{ktc}"\n',
                      encoding="utf-8")
    from hma_policy.audit.run import audit
    first, older = audit([str(script)]).entries
    assert [(e["code"], e["path"]) for e in first.decision["errors"]] == [
        ("input.schema", "/kv_transfer_config/kv_buffer_size")]
    assert [(n.code, n.line, n.message) for n in first.deployment.notes] == [
        ("source.unresolved_unused", 1, "`--kv-transfer-config` takes its value at `/kv_port` from `$((21001 + i))` "
         "(which is arithmetic the audit does not evaluate); vLLM refuses the command whatever that value is")]
    # Where the release has the field, the port is read for its type alone: any number decides alike.
    assert (older.decision["outcome"], older.decision["errors"]) == ("disabled", [])
    assert [(n.code, n.line, n.message) for n in older.deployment.notes] == [
        ("source.unresolved_unused", 3, "`--kv-transfer-config` takes its value at `/kv_port` from `$((21001 + i))` "
         "(which is arithmetic the audit does not evaluate); vLLM reads it for its type alone: the decision is the "
         "same for any value it accepts there")]


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
