"""The decision log (engine/audit/declog.py, declog_format.py, declog_verify.py): records, masking, durability, and
`log verify` catching each kind of tampering, with repair only on request."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit import declog, declog_format, declog_verify
from hma_policy.audit.declog import DecisionLog
from hma_policy.audit.declog_format import DEFAULT_MASKING, NO_MASKING, LogError, Masking, mask
from hma_policy.audit.declog_verify import repair, verify

REPO = Path(__file__).resolve().parents[1]

DOCUMENTS = [
    {"name": "prefill", "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_producer",
                                               "kv_connector_extra_config": {"backends": ["UCX"]}}},
    {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both",
                            "kv_connector_extra_config": {"lmcache.remote_url": "redis://:pw@cache:6379"}},
     "model": {"layer_kinds": ["sliding_window", "full_attention"]}},
    {"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}, "disable_hybrid_kv_cache_manager": False},
    {"kv_transfer_config": {"kv_conector": "NixlConnector", "kv_role": "kv_both"}},
    {"kv-transfer-config": '{"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": '
                           '{"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both", '
                           '"kv_connector_extra_config": {"token": "t0p"}}], "secret": "s3"}}'},
]


class Clock:
    def __init__(self):
        self.now = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)

    def __call__(self):
        self.now += timedelta(seconds=1)
        return self.now


def decisions():
    policy = hma_policy.load_policy()
    out = []
    for document in DOCUMENTS:
        try:
            out.append((policy.decide(document), document))
        except hma_policy.InputError as exc:
            from hma_policy.core.decision import input_error_decision
            out.append((input_error_decision(exc.problems, policy.digest), document))
    return out


def make_log(path: Path, count: int = 5) -> list[dict]:
    ids = iter(f"id-{n}" for n in range(100))
    records = []
    with DecisionLog(path, clock=Clock(), new_id=lambda: next(ids)) as log:
        for decision, document in (decisions() * 3)[:count]:
            records.append(log.append(decision, source="doc.json", document=document))
    return records


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# -- records ---------------------------------------------------------------------------------------

def test_a_record_holds_the_decision_its_input_and_its_provenance(tmp_path):
    path = tmp_path / "log.jsonl"
    first, second, *_ = make_log(path)
    decision = hma_policy.decide(DOCUMENTS[1])
    assert second["decision_id"] == "id-1"
    assert (first["timestamp"], second["timestamp"]) == ("2026-11-29T12:00:01.000000Z", "2026-11-29T12:00:02.000000Z")
    assert second["tool"] == {"name": "hma-policy", "version": hma_policy.__version__}
    assert second["policy"] == {"digest": decision.policy_digest}
    canonical = json.dumps(DOCUMENTS[1], sort_keys=True, separators=(",", ":")).encode()
    assert second["input"]["digest"] == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert second["input"]["source"] == "doc.json"
    assert (second["outcome"], second["hma_enabled"]) == ("disabled", False)
    assert second["warnings"] == ["hma.auto_disabled", "model.hybrid_kv_unoptimized"]
    assert second["reasons"] == list(decision.reasons) and second["trace"] == list(decision.trace)
    assert (first["seq"], second["seq"], first["prev"], second["prev"]) == (0, 1, declog_format.GENESIS, first["hash"])
    # The line is the record's canonical JSON; its hash covers everything but the hash.
    raw = lines(path)[1]
    assert raw == declog_format.canonical(second) + b"\n"
    body = {k: v for k, v in second.items() if k != "hash"}
    assert second["hash"] == "sha256:" + hashlib.sha256(declog_format.canonical(body)).hexdigest()


def test_extra_config_values_are_masked_by_default_at_every_depth(tmp_path):
    records = make_log(tmp_path / "log.jsonl")
    lm = records[1]["input"]
    assert lm["document"]["kv_transfer_config"]["kv_connector_extra_config"] == {"lmcache.remote_url": "<masked>"}
    assert lm["masked"] == ["/kv_transfer_config/kv_connector_extra_config/lmcache.remote_url"]
    multi = records[4]["input"]
    # A kv_transfer_config given as JSON text is read so its extra config can be masked; children stay.
    assert multi["document"]["kv-transfer-config"]["kv_connector_extra_config"] == {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"token": "<masked>"}}],
        "secret": "<masked>"}
    assert multi["masked"] == ["/kv-transfer-config/kv_connector_extra_config/connectors/0/kv_connector_extra_config/token",
                               "/kv-transfer-config/kv_connector_extra_config/secret"]
    assert b"pw@cache" not in (tmp_path / "log.jsonl").read_bytes() and b"t0p" not in (tmp_path / "log.jsonl").read_bytes()


def test_masking_is_configurable():
    document = {"kv_transfer_config": {"kv_connector_extra_config": {"k": 1}}, "env": {"HF_TOKEN": "x"}}
    assert mask(document, NO_MASKING) == (document, [])
    masked, paths = mask(document, Masking(fields=("kv_connector_extra_config", "env")))
    assert masked == {"kv_transfer_config": {"kv_connector_extra_config": {"k": "<masked>"}}, "env": {"HF_TOKEN": "<masked>"}}
    assert paths == ["/env/HF_TOKEN", "/kv_transfer_config/kv_connector_extra_config/k"]
    assert mask(document, DEFAULT_MASKING)[0]["env"] == {"HF_TOKEN": "x"}


def test_each_record_is_flushed_and_fsynced(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(declog.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    path = tmp_path / "log.jsonl"
    with DecisionLog(path) as log:
        fd = log._fd
        for n in range(3):
            log.append(hma_policy.decide(DOCUMENTS[0]), document=DOCUMENTS[0])
            assert synced.count(fd) == n + 1
            assert len(lines(path)) == n + 1  # on disk before append returns
    assert verify(path).ok


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process that opens the log to write, says so, and holds it for ``seconds``."""
    code = ("import sys, time; from hma_policy.audit.declog import DecisionLog\n"
            f"log = DecisionLog({str(path)!r}); print('held', flush=True); time.sleep({seconds}); log.close(); "
            "print('released', flush=True)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_second_writer_waits_for_the_lock(tmp_path):
    path = tmp_path / "log.jsonl"
    holder = hold_lock(path, 1.0)
    try:
        with pytest.raises(LogError) as info:
            DecisionLog(path, lock_timeout=0.2)
        assert str(info.value) == f"{path}: log.locked: the decision log is locked by another writer"
        with DecisionLog(path, lock_timeout=30) as log:  # waits for the other process to close it
            assert holder.stdout.readline() == "released\n"
            log.append(hma_policy.decide(DOCUMENTS[0]))
    finally:
        holder.wait(timeout=30)
    assert verify(path).ok and verify(path).records == 1


# -- verify ------------------------------------------------------------------------------------------

def test_an_untouched_log_is_intact(tmp_path):
    path = tmp_path / "log.jsonl"
    records = make_log(path)
    result = verify(path)
    assert result.ok and result.records == 5 and result.last_hash == records[-1]["hash"]
    assert result.render() == f"{path}: intact: 5 record(s), last hash {records[-1]['hash']}"
    # Appending later continues the chain.
    with DecisionLog(path) as log:
        log.append(hma_policy.decide(DOCUMENTS[0]))
    assert verify(path).records == 6 and verify(path).ok


def tamper(path: Path, how: str) -> None:
    data = lines(path)
    if how == "edited":
        record = json.loads(data[2])
        record["outcome"] = "enabled"
        data[2] = declog_format.canonical(record) + b"\n"
    elif how == "rehashed":  # an edit that recomputes its own hash
        record = json.loads(data[2])
        record["outcome"] = "enabled"
        record.pop("hash")
        record["hash"] = "sha256:" + hashlib.sha256(declog_format.canonical(record)).hexdigest()
        data[2] = declog_format.canonical(record) + b"\n"
    elif how == "deleted":
        del data[2]
    elif how == "swapped":
        data[1], data[2] = data[2], data[1]
    elif how == "truncated":
        data = data[:3]
    elif how == "torn":  # a crash while the last record was written: the head, written on close, counts one less
        last = json.loads(data[-2])
        Path(str(path) + ".head").write_bytes(declog_format.canonical({"v": 1, "records": last["seq"] + 1, "last_hash": last["hash"]}))
        data[-1] = data[-1][:40]
    elif how == "newline":  # the same crash, one byte before the end
        last = json.loads(data[-2])
        Path(str(path) + ".head").write_bytes(declog_format.canonical({"v": 1, "records": last["seq"] + 1, "last_hash": last["hash"]}))
        data[-1] = data[-1][:-1]
    elif how == "cut":  # the last record cut after the head counted it: not a crash
        data[-1] = data[-1][:40]
    path.write_bytes(b"".join(data))


@pytest.mark.parametrize("how, code, first_bad", [
    ("edited", "log.edited", "line 3 (seq 2): log.edited: the record does not match its hash: it was edited"),
    ("rehashed", "log.chain", "line 4 (seq 3): log.chain: `prev` is not the hash of the record before it: "
                              "the record before it was replaced, or this one was inserted"),
    ("deleted", "log.deleted", "line 3 (seq 3): log.deleted: seq 2 is missing before it: 1 record(s) deleted"),
    ("swapped", "log.reordered", "line 2 (seq 2): log.reordered: seq 2 stands where seq 1 belongs, and seq 1 is at line 3: "
                                 "records were reordered"),
    ("truncated", "log.truncated", "line 3 (seq 2): log.truncated: the head records 5 record(s) but the log holds 3: "
                                   "the last 2 record(s) were removed"),
    ("torn", "log.torn_tail", "line 5: log.torn_tail: the last 40 byte(s) are an incomplete record (a write was interrupted); "
                              "`hma-policy log verify --repair` removes them"),
])
def test_verify_names_the_first_bad_record_for_each_kind_of_tampering(tmp_path, how, code, first_bad):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, how)
    before = path.read_bytes()
    result = verify(path)
    assert not result.ok
    assert result.first_bad.code == code
    assert result.first_bad.render() == first_bad
    assert result.render().startswith(f"{path}: NOT intact: ")
    assert path.read_bytes() == before  # verify only reads


def test_a_missing_or_forged_head_is_reported(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    head = Path(str(path) + ".head")
    head.unlink()
    assert verify(path).first_bad.code == "log.head_missing"
    head.write_text(json.dumps({"v": 1, "records": 5, "last_hash": "sha256:" + "1" * 64}))
    assert verify(path).first_bad.code == "log.head_mismatch"


def test_a_torn_tail_is_repaired_only_on_request(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "torn")
    # A writer refuses to append after a torn tail; verify leaves it as it is.
    with pytest.raises(LogError) as info:
        DecisionLog(path)
    assert info.value.problems[0].code == "log.torn_tail"
    assert info.value.problems[0].hint == f"run `hma-policy log verify {path} --repair`"
    assert verify(path).first_bad.code == "log.torn_tail"
    result = repair(path)
    assert result.ok and result.records == 4
    assert result.repaired == "removed 40 byte(s) of an incomplete record after line 4"
    with DecisionLog(path) as log:
        assert log.append(hma_policy.decide(DOCUMENTS[0]))["seq"] == 4
    assert verify(path).ok


def test_a_whole_last_record_without_its_newline_is_completed(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "newline")
    assert verify(path).first_bad.code == "log.torn_tail"
    result = repair(path)
    assert result.ok and result.records == 5
    assert result.repaired == "completed the last record (seq 4), which was whole but lacked its newline"


def test_a_record_cut_after_the_head_counted_it_is_not_a_crash_and_is_not_repaired(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "cut")
    before = path.read_bytes()
    result = repair(path)
    assert [p.code for p in result.problems] == ["log.torn_tail", "log.truncated"]
    assert result.repaired is None and path.read_bytes() == before


def test_repair_refuses_when_the_log_has_other_problems(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "edited")
    tamper(path, "torn")
    before = path.read_bytes()
    result = repair(path)
    assert not result.ok and result.repaired is None
    assert [p.code for p in result.problems] == ["log.edited", "log.torn_tail"]
    assert path.read_bytes() == before


# -- the command line -------------------------------------------------------------------------------

def run(*args: str, cwd: Path = REPO) -> tuple[int, str, str]:
    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], cwd=cwd, capture_output=True, timeout=120)
    out, err = completed.stdout.decode(), completed.stderr.decode()
    assert "Traceback" not in out + err
    return completed.returncode, out, err


def test_decide_log_and_log_verify(tmp_path):
    log = tmp_path / "d.jsonl"
    for name in ("multi-mixed.json", "explicit-enable-unsupported.yaml", "invalid-typo.json"):
        run("decide", f"examples/{name}", "--log", str(log))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["input"]["source"], r["outcome"]) for r in records] == [
        ("examples/multi-mixed.json", "disabled"), ("examples/explicit-enable-unsupported.yaml", "error"),
        ("examples/invalid-typo.json", "error")]
    assert records[2]["errors"] == [{"code": "input.schema", "stage": "input", "path": "/kv_transfer_config/kv_buffer_devce"}]
    code, out, err = run("log", "verify", str(log))
    assert (code, err) == (0, "") and out.startswith(f"{log}: intact: 3 record(s)")
    tamper(log, "swapped")
    code, out, _ = run("log", "verify", str(log))
    assert code == 1
    assert out.splitlines()[0] == (f"{log}: NOT intact: 1 problem(s); first bad record: line 2 (seq 2): log.reordered: "
                                   "seq 2 stands where seq 1 belongs, and seq 1 is at line 3: records were reordered")
    code, out, _ = run("log", "verify", str(log), "--repair")
    assert code == 1 and out.splitlines()[-1] == "not repaired: --repair mends only a torn tail, and the log has other problems"


def test_log_verify_exit_statuses_for_a_torn_tail_and_a_missing_file(tmp_path):
    log = tmp_path / "d.jsonl"
    make_log(log)
    tamper(log, "torn")
    assert run("log", "verify", str(log))[0] == 1
    code, out, _ = run("log", "verify", str(log), "--repair")
    assert code == 0 and out.splitlines()[0] == f"{log}: repaired: removed 40 byte(s) of an incomplete record after line 4"
    code, out, err = run("log", "verify", str(tmp_path / "none.jsonl"))
    assert code == 2 and err == f"hma-policy: {tmp_path / 'none.jsonl'}: log.open: cannot read the decision log: No such file or directory\n"


def test_decide_with_a_torn_log_stops_before_deciding(tmp_path):
    log = tmp_path / "d.jsonl"
    make_log(log)
    tamper(log, "torn")
    before = log.read_bytes()
    code, out, err = run("decide", "examples/multi-mixed.json", "--log", str(log))
    assert (code, out) == (2, "")
    assert err == (f"hma-policy: {log}: log.torn_tail: the decision log ends in an incomplete record (an interrupted write) "
                   f"(hint: run `hma-policy log verify {log} --repair`)\n")
    assert log.read_bytes() == before


def test_log_mask_on_the_command_line(tmp_path):
    log = tmp_path / "d.jsonl"
    run("decide", "examples/nixl-pd-decode.json", "--log", str(log), "--log-mask", "none")
    run("decide", "examples/nixl-pd-decode.json", "--log", str(log), "--log-mask", "kv_connector_extra_config,env")
    unmasked, masked = [json.loads(line)["input"] for line in log.read_text().splitlines()]
    assert unmasked["masked"] == [] and unmasked["document"]["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "10.0.3.17"
    assert masked["document"]["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "<masked>"
    assert masked["document"]["kv_transfer_config"]["kv_connector_extra_config"] == {"backends": "<masked>"}
    assert unmasked["digest"] == masked["digest"]


# -- canonical JSON: orjson where it writes what the standard encoder writes -------

def _standard_canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


@pytest.mark.parametrize("value", [
    {"b": [1, True, None, {"z": 2, "a": (3, 4)}], "a": -0},
    {"n": 2**63, "m": -2**63, "u": 2**64 - 1},
    {"big": 2**64, "neg": -2**64 - 5},  # past 64 bits: orjson refuses them
    {"x": 1.5, "y": 1e16, "z": 1e-7, "nan": float("nan"), "inf": float("-inf")},  # floats: written another way
    {"é": "ü", "emoji": "😀", "surrogate": "\ud800"},  # not ASCII: escaped here
    {"del": "\x7f", "ctl": "\x00\x1f\n\t\"\\/"},  # DEL: orjson leaves it raw
    {1: "int key"}, [True, False, None, "", [], {}], "text", 7, None,
])
def test_canonical_is_the_standard_encoders_text(value):
    assert declog_format.canonical(value) == _standard_canonical(value)


def test_canonical_refuses_what_the_standard_encoder_refuses():
    import dataclasses
    import datetime

    @dataclasses.dataclass
    class Point:
        x: int

    # orjson would write these; the canonical form has no spelling for them.
    for value in ({"when": datetime.date(2026, 1, 1)}, {"p": Point(1)}, {"s": {1, 2}}):
        with pytest.raises(TypeError):
            declog_format.canonical(value)
    with pytest.raises(TypeError):
        _standard_canonical({"when": datetime.date(2026, 1, 1)})


def test_canonical_is_the_standard_encoders_text_for_generated_values():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                        st.floats(allow_nan=True), st.text(max_size=6))
    values = st.recursive(scalars, lambda children: st.one_of(
        st.lists(children, max_size=4), st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), children, max_size=4)), max_leaves=15)

    @settings(max_examples=1500, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(values)
    def check(value):
        assert declog_format.canonical(value) == _standard_canonical(value)
    check()


# -- tamper evidence: the exact bytes of each line (issue 20, item 6) -------------------------------

def forge(path: Path, index: int, edit) -> None:
    """Replace line ``index`` of the log by ``edit(line)`` (bytes, without its newline)."""
    data = lines(path)
    data[index] = edit(data[index][:-1]) + b"\n"
    path.write_bytes(b"".join(data))


@pytest.mark.parametrize("how, code, message", [
    # A forged key before the real one: the old verify parsed the line (last key wins) and called it intact,
    # while first-wins readers and grep saw "enabled".
    ("forged key first", "log.duplicate_key", "line 2: log.duplicate_key: key `outcome` appears twice in one object"),
    ("CRLF", "log.noncanonical", "line 2: log.noncanonical: the line ends in CR LF; the tool ends lines in LF"),
    ("BOM", "log.noncanonical", "line 1: log.noncanonical: the line starts with a byte order mark, which the tool never writes"),
    ("whitespace", "log.noncanonical", "line 2 (seq 1): log.noncanonical: the line is not its record's canonical JSON "
                                       "(sorted keys, no whitespace, no needless escapes): it was rewritten"),
    ("escape", "log.noncanonical", "line 2 (seq 1): log.noncanonical: the line is not its record's canonical JSON "
                                   "(sorted keys, no whitespace, no needless escapes): it was rewritten"),
    ("raw UTF-8", "log.noncanonical", "line 2: log.noncanonical: the line holds bytes that are not ASCII; the tool escapes them"),
    ("seq true", "log.malformed", "line 1: log.malformed: the line is not a decision record: "
                                  "`seq` is not a whole number of 0 or more"),
    ("seq negative", "log.malformed", "line 1: log.malformed: the line is not a decision record: "
                                      "`seq` is not a whole number of 0 or more"),
    ("hma_enabled a string", "log.malformed", "line 2 (seq 1): log.malformed: the line is not a decision record: "
                                              "`hma_enabled` is not true, false or null"),
    ("a field added", "log.malformed", "line 2 (seq 1): log.malformed: the line is not a decision record: "
                                       "it has a field `verdict` a decision record does not have"),
    ("200k deep", "log.limit", "line 2: log.limit: the line is nested too deeply to be a record"),
])
def test_verify_refuses_every_encoding_but_the_canonical_one(tmp_path, how, code, message):
    path = tmp_path / "log.jsonl"
    make_log(path)
    edits = {
        "forged key first": (1, lambda raw: raw.replace(b'{"decision_id"', b'{"outcome":"enabled","decision_id"', 1)),
        "CRLF": (1, lambda raw: raw + b"\r"),
        "BOM": (0, lambda raw: b"\xef\xbb\xbf" + raw),
        "whitespace": (1, lambda raw: raw.replace(b'","', b'", "', 1)),
        "escape": (1, lambda raw: raw.replace(b'"outcome"', b'"\\u006futcome"', 1)),
        "raw UTF-8": (1, lambda raw: raw.replace(b'"doc.json"', '"dóc.json"'.encode(), 1)),
        "seq true": (0, lambda raw: raw.replace(b'"seq":0', b'"seq":true', 1)),
        "seq negative": (0, lambda raw: raw.replace(b'"seq":0', b'"seq":-1', 1)),
        "hma_enabled a string": (1, lambda raw: raw.replace(b'"hma_enabled":false', b'"hma_enabled":"false"', 1)),
        "a field added": (1, lambda raw: raw[:-1] + b',"verdict":"enabled"}'),
        "200k deep": (1, lambda raw: b"[" * 200_000 + b"]" * 200_000),
    }
    index, edit = edits[how]
    forge(path, index, edit)
    result = verify(path)
    assert not result.ok
    assert result.first_bad.code == code
    assert result.first_bad.render() == message


def test_a_forged_key_before_the_real_one_was_intact_for_the_old_verify(tmp_path):
    # What the old verify did, kept as the reason for the test above: json.loads keeps the last of
    # repeated keys, so the record it hashed was the real one, and every first-wins reader saw the forgery.
    path = tmp_path / "log.jsonl"
    make_log(path)
    forge(path, 1, lambda raw: raw.replace(b'{"decision_id"', b'{"outcome":"enabled","decision_id"', 1))
    forged = lines(path)[1]
    assert json.loads(forged)["outcome"] == "disabled" and b'"outcome":"enabled"' in forged
    assert verify(path).first_bad.code == "log.duplicate_key"


def test_a_log_written_by_the_earlier_build_still_verifies():
    # tests/declog/README.md: written by the build of f2d9ee6 (a Latin-1 file name, a lone surrogate,
    # a float, masked and unmasked documents, an audit). Its lines are canonical, so they verify as they did.
    result = verify(REPO / "tests" / "declog" / "written-by-f2d9ee6.jsonl")
    assert (result.ok, result.records) == (True, 12), result.render()
    assert result.last_hash == "sha256:a5741dbcc60044c39a8987db0419ac859d2485c16f7fc8c373a7519667c131e0"


def test_a_log_written_now_verifies_and_its_lines_are_canonical(tmp_path):
    path = tmp_path / "log.jsonl"
    records = make_log(path, 15)
    assert [line[:-1] for line in lines(path)] == [declog_format.canonical(record) for record in records]
    assert verify(path).ok


def test_a_line_is_bounded_and_a_device_or_fifo_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    make_log(path)
    monkeypatch.setattr(declog_format, "MAX_LINE_BYTES", 4096)  # read_line's bound
    monkeypatch.setattr(declog_verify, "MAX_LINE_BYTES", 4096)  # verify's, reading a line
    forge(path, 2, lambda raw: raw.replace(b'"doc.json"', b'"' + b"x" * 5000 + b'"', 1))
    result = verify(path)
    assert result.first_bad.render() == "line 3: log.limit: the line is longer than 4096 bytes"
    path.write_bytes(b"x" * 10_000)  # no newline at all: not read whole, not taken for a torn tail
    assert verify(path).first_bad.render() == "line 1: log.limit: the line is longer than 4096 bytes"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for special, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device")):
        with pytest.raises(LogError) as info:
            verify(special)
        assert str(info.value) == f"{special}: log.not_regular: cannot read the decision log: it is {kind}, not a regular file"


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_log_verify_of_a_fifo_or_a_device_exits_2_at_once(tmp_path, special):
    # The old command blocked on a FIFO forever, and read /dev/zero until memory ran out.
    if special == "fifo":
        special = str(tmp_path / "fifo")
        os.mkfifo(special)
    completed = subprocess.run([sys.executable, "-m", "hma_policy", "log", "verify", special], capture_output=True,
                               text=True, timeout=60)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr.startswith(f"hma-policy: {special}: log.not_regular: cannot read the decision log: it is ")


def test_decide_log_after_a_200k_deep_last_line_is_a_located_log_error(tmp_path):
    log = tmp_path / "d.jsonl"
    make_log(log)
    with open(log, "ab") as handle:
        offset = handle.tell()
        handle.write(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    before = log.read_bytes()
    code, out, err = run("decide", "examples/multi-mixed.json", "--log", str(log))
    assert (code, out) == (2, "")
    assert err == (f"hma-policy: {log}: log.limit: the last record of the decision log (the line at byte {offset}): "
                   f"the line is nested too deeply to be a record (hint: run `hma-policy log verify {log}`)\n")
    assert log.read_bytes() == before
    code, out, _ = run("log", "verify", str(log))
    assert code == 1 and out.splitlines()[0].endswith("first bad record: line 6: log.limit: the line is nested too "
                                                      "deeply to be a record")


def test_a_head_with_a_repeated_key_or_a_negative_count_is_invalid(tmp_path):
    path = tmp_path / "log.jsonl"
    records = make_log(path)
    head = Path(str(path) + ".head")
    for text in ('{"v":1,"records":5,"records":2,"last_hash":"%s"}', '{"v":1,"records":-1,"last_hash":"%s"}',
                 '{"v":true,"records":5,"last_hash":"%s"}'):
        head.write_text(text % records[-1]["hash"])
        assert verify(path).first_bad.render() == f"log: log.head_invalid: the head file `{head}` is not a head record"


# -- the writer: its lock, re-entered from a signal handler (issue 20, item 8) -----------------------

def test_a_signal_handler_opening_the_log_it_interrupted_is_refused_at_once(tmp_path):
    # flock counts open files, not processes: the old writer made a handler's second DecisionLog on
    # the same file wait out the lock timeout (10 s) for a lock its own process held.
    import signal
    import time

    path = tmp_path / "log.jsonl"
    seen = []

    def handler(signum, frame):
        started = time.monotonic()
        try:
            DecisionLog(path)
        except LogError as exc:
            seen.append((exc.problems[0].code, exc.problems[0].message, time.monotonic() - started))
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        with DecisionLog(path) as log:
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            deadline = time.monotonic() + 30
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
            log.append(hma_policy.decide(DOCUMENTS[0]))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert [(code, message) for code, message, _ in seen] == [
        ("log.locked", "the decision log is already open to write in this process")]
    assert seen[0][2] < 1.0
    assert verify(path).ok and verify(path).records == 1
    with DecisionLog(path, lock_timeout=0.5):  # released on close
        pass


def test_a_signal_handler_appending_in_the_middle_of_an_append_is_refused(tmp_path):
    # The old writer let the handler write a whole record with the seq the interrupted append was
    # about to use: two records with seq 0, and a log that no longer verified.
    import signal

    path = tmp_path / "log.jsonl"
    refused = []

    def handler(signum, frame):
        try:
            log.append(hma_policy.decide(DOCUMENTS[2]), source="from the handler")
        except LogError as exc:
            refused.append(str(exc))

    def new_id():  # called inside append, before the record is written
        signal.raise_signal(signal.SIGALRM)
        return "id-main"
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        with DecisionLog(path, new_id=new_id) as log:
            log.append(hma_policy.decide(DOCUMENTS[0]), source="main")
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert refused == [f"{path}: log.locked: the decision log was written to while a record was being written "
                       "(from a signal handler?); the record being written is kept, this one is not"]
    assert [json.loads(line)["input"]["source"] for line in lines(path)] == ["main"]
    assert verify(path).ok


def test_appends_from_threads_each_get_their_own_seq(tmp_path):
    import threading

    path = tmp_path / "log.jsonl"
    decision = hma_policy.decide(DOCUMENTS[0])
    with DecisionLog(path) as log:
        threads = [threading.Thread(target=lambda: [log.append(decision) for _ in range(20)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    result = verify(path)
    assert result.ok and result.records == 80


# -- repair: written atomically ---------------------------------------------------------------------

def test_a_repair_that_fails_midway_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    # The old repair truncated the log in place before its fsync: a failure there (a full disk, an I/O
    # error) had already changed it. The repaired log is now written beside it and renamed.
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "torn")
    before = path.read_bytes()

    def failing(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError):
        repair(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "log.jsonl.head"]
    monkeypatch.undo()
    assert repair(path).ok


def test_a_writer_waiting_while_a_repair_replaces_the_log_appends_to_the_new_one(tmp_path):
    path = tmp_path / "log.jsonl"
    make_log(path)
    tamper(path, "torn")
    old_inode = path.stat().st_ino
    # The repairer takes the lock itself, on a descriptor of its own, and repairs with the lock
    # step switched off (flock would wait on its own descriptor).
    code = ("import sys, time, fcntl, os; from hma_policy.audit import declog, declog_verify\n"
            f"fd = os.open({str(path)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True)\n"
            "time.sleep(1.0); declog.fcntl = None; print(declog_verify.repair(" + repr(str(path)) + ").repaired, flush=True)")
    # A writer waits for the lock another process holds; meanwhile that process repairs the log
    # (renaming a new file over it); the writer then appends to the new file, not the old inode.
    repairer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert repairer.stdout.readline() == "held\n"
    with DecisionLog(path, lock_timeout=30) as log:
        log.append(hma_policy.decide(DOCUMENTS[0]))
    assert repairer.wait(timeout=30) == 0
    assert path.stat().st_ino != old_inode
    result = verify(path)
    assert result.ok and result.records == 5, result.render()


def test_a_source_named_in_another_encoding_is_logged_as_its_bytes(tmp_path):
    # The old writer logged `caf\udce9.json`: a lone surrogate, which JSON readers refuse.
    import os as _os

    path = tmp_path / "log.jsonl"
    with DecisionLog(path) as log:
        log.append(hma_policy.decide(DOCUMENTS[0]), source=_os.fsdecode(b"caf\xe9.json"), document=DOCUMENTS[0])
    assert b'"source":"caf\\\\xe9.json"' in path.read_bytes()
    assert json.loads(lines(path)[0])["input"]["source"] == "caf\\xe9.json"
    assert verify(path).ok
