"""The command line, run as a separate process from an unrelated working
directory: outputs, documented exit codes, and no traceback for any input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

import hma_policy

from rulecopy import copy_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
DECISION_SCHEMA = json.loads((REPO / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
BUNDLED_DIGEST = hma_policy.load_policy().digest

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
EXAMPLE = {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}

DOCUMENTS = {
    "enabled": ({"kv_transfer_config": NIXL}, 0),
    "disabled": ({"kv_transfer_config": {
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": [NIXL, EXAMPLE]},
    }}, 0),
    "explicit_disable": ({"kv_transfer_config": NIXL, "disable_hybrid_kv_cache_manager": True}, 0),
    "config_error": ({"kv_transfer_config": NIXL, "disable_hybrid_kv_cache_manager": False,
                      "platform": {"supports_hybrid_kv_cache": False}}, 1),
    "connector_error": ({"kv_transfer_config": EXAMPLE, "disable_hybrid_kv_cache_manager": False}, 1),
    "unknown_connector": ({"kv_transfer_config": {"kv_connector": "NixlConector", "kv_role": "kv_both"}}, 1),
    "undetermined": ({"kv_transfer_config": {"kv_connector": "MyConnector", "kv_role": "kv_both",
                                             "kv_connector_module_path": "my_company.connectors"}}, 1),
    "invalid": ({"kv_transfer_config": {"kv_conector": "NixlConnector", "kv_role": "kv_both"}}, 2),
}
OUTCOMES = {
    "enabled": "enabled", "disabled": "disabled", "explicit_disable": "disabled", "config_error": "error",
    "connector_error": "error", "unknown_connector": "error", "undetermined": "undetermined", "invalid": "error",
}


def run(cwd, *args, stdin=None):
    """Run the CLI in ``cwd`` and return (exit code, stdout, stderr)."""
    completed = subprocess.run(
        [sys.executable, "-m", "hma_policy", *map(str, args)],
        cwd=cwd, input=stdin, capture_output=True, timeout=60,
    )
    out = completed.stdout.decode("utf-8")
    err = completed.stderr.decode("utf-8")
    assert "Traceback" not in out + err, out + err
    return completed.returncode, out, err


@pytest.fixture
def workdir(tmp_path):
    for name, (document, _) in DOCUMENTS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")
    return tmp_path


def test_the_working_directory_is_unrelated_to_the_repository(workdir):
    assert REPO not in workdir.resolve().parents
    assert not (workdir / "rules").exists()


# -- decide --------------------------------------------------------------------

def test_decide_text_shows_outcome_reasons_and_connector_tree(workdir):
    code, out, err = run(workdir, "decide", "disabled.json")
    assert code == 0
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == "disabled.json: disabled (HMA disabled)"
    assert "why:" in lines
    why = lines[lines.index("why:") + 1:]
    assert "  - a child of the MultiConnector does not support HMA" in why
    assert "connectors:" in lines
    tree = lines[lines.index("connectors:") + 1:]
    assert tree[0].startswith("  MultiConnector: does not support HMA  [/kv_transfer_config]")
    assert tree[1].startswith("  ├─ NixlConnector: supports HMA  [/kv_transfer_config/kv_connector_extra_config/connectors/0]")
    assert tree[2].startswith("  └─ ExampleConnector: does not support HMA  [/kv_transfer_config/kv_connector_extra_config/connectors/1]")
    assert "hma.auto_disabled" in out
    assert re.search(r"^policy: sha256:[0-9a-f]{64} \(bundled\)$", out, re.M)


def test_decide_text_for_an_error_shows_the_error_and_hint(workdir):
    code, out, _ = run(workdir, "decide", "unknown_connector.json")
    assert code == 1
    assert out.splitlines()[0] == "unknown_connector.json: error (rejected at config construction)"
    assert "connector.unknown" in out
    assert "unsupported connector type `NixlConector`" in out
    assert "hint: did you mean `NixlConnector`?" in out


def test_decide_text_tree_names_each_open_answer(workdir):
    # An external class of unknown support before a child that raises leaves
    # the MultiConnector "unsupported, or it raises" (docs/decision.md).
    external = {"kv_connector": "MyConnector", "kv_role": "kv_both", "kv_connector_module_path": "my_company.kv.connector"}
    document = {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                       "kv_connector_extra_config": {"connectors": [external, {"kv_connector": "NixlConector", "kv_role": "kv_both"}]}}}
    (workdir / "open.json").write_text(json.dumps(document), encoding="utf-8")
    code, out, _ = run(workdir, "decide", "open.json")
    assert code == 1
    assert out.splitlines()[0] == "open.json: undetermined (cannot be decided from the rules)"
    tree = out[out.index("connectors:"):].splitlines()[1:4]
    assert tree == [
        "  MultiConnector: does not support HMA, or raises  [/kv_transfer_config] (node.support.multi_unknown_then_error)",
        "  ├─ MyConnector: unknown  [/kv_transfer_config/kv_connector_extra_config/connectors/0] (node.support.class_unknown)",
        "  └─ NixlConector: raises  [/kv_transfer_config/kv_connector_extra_config/connectors/1] (node.support.class_error)",
    ]


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_decide_exit_codes_and_json_contract(workdir, name):
    _, expected_code = DOCUMENTS[name]
    code, out, _ = run(workdir, "decide", f"{name}.json", "--format", "json")
    assert code == expected_code
    data = json.loads(out)
    Draft202012Validator(DECISION_SCHEMA).validate(data)
    assert data["outcome"] == OUTCOMES[name]
    assert data["policy"]["digest"] == BUNDLED_DIGEST


@pytest.mark.parametrize("name", ["enabled", "config_error", "undetermined", "invalid"])
def test_text_output_has_the_same_exit_codes(workdir, name):
    code, out, _ = run(workdir, "decide", f"{name}.json")
    assert code == DOCUMENTS[name][1]
    assert out.splitlines()[0].startswith(f"{name}.json: {OUTCOMES[name]} (")


def test_invalid_document_in_json_has_input_stage_errors(workdir):
    code, out, _ = run(workdir, "decide", "invalid.json", "--format", "json")
    assert code == 2
    data = json.loads(out)
    assert data["outcome"] == "error"
    assert data["hma_enabled"] is None
    assert data["errors"] == [{
        "code": "input.schema", "stage": "input", "message": "unknown field `kv_conector`",
        "path": "/kv_transfer_config/kv_conector", "hint": "did you mean `kv_connector`?",
    }]


def test_config_and_connector_errors_carry_their_stage(workdir):
    config = json.loads(run(workdir, "decide", "config_error.json", "--format", "json")[1])
    assert [(e["code"], e["stage"]) for e in config["errors"]] == [("hma.explicit_enable_conflict", "config")]
    assert config["hma_enabled"] is None
    connector = json.loads(run(workdir, "decide", "connector_error.json", "--format", "json")[1])
    assert [(e["code"], e["stage"]) for e in connector["errors"]] == [("hma.connector_unsupported", "connector")]
    assert connector["hma_enabled"] is True  # the config said enabled; the connector refused


def test_missing_file_exits_2(workdir):
    code, out, _ = run(workdir, "decide", "nope.json")
    assert code == 2
    assert "input.read" in out
    assert "cannot read `nope.json`" in out
    code, out, _ = run(workdir, "decide", "nope.json", "--format", "json")
    assert code == 2
    assert json.loads(out)["errors"][0]["code"] == "input.read"


@pytest.mark.parametrize("args", [
    [],
    ["frobnicate", "x.json"],
    ["decide"],
    ["decide", "enabled.json", "--format", "xml"],
    ["decide", "enabled.json", "--no-such-flag"],
])
def test_usage_errors_exit_2(workdir, args):
    code, out, err = run(workdir, *args)
    assert code == 2
    assert "usage:" in err
    assert out == ""


def test_help_exits_0(workdir):
    code, out, _ = run(workdir, "--help")
    assert code == 0
    assert "decide" in out and "explain" in out and "validate" in out


def test_version(workdir):
    code, out, _ = run(workdir, "--version")
    assert code == 0
    assert out.strip() == f"hma-policy {hma_policy.__version__}"


# -- --rules ---------------------------------------------------------------------

def test_rules_pointing_to_a_file_exits_2(workdir):
    code, out, err = run(workdir, "decide", "enabled.json", "--rules", "enabled.json")
    assert code == 2
    assert out == ""
    assert "rules.read" in err
    assert "`enabled.json` is not a directory" in err


def test_rules_pointing_to_a_missing_directory_exits_2(workdir):
    code, _, err = run(workdir, "decide", "enabled.json", "--rules", "no-such-dir")
    assert code == 2
    assert "rules.read" in err


def test_broken_rules_dir_lists_problems_with_file_line_col(workdir):
    rules = workdir / "myrules"
    copy_rules(rules)
    decision = rules / "decision.yaml"
    text = decision.read_text(encoding="utf-8")
    assert text.count("when: {preference: disable}") == 1
    decision.write_text(text.replace("when: {preference: disable}", "when: {preferance: disable}"), encoding="utf-8")
    nodes = rules / "nodes.yaml"
    text = nodes.read_text(encoding="utf-8")
    assert text.count("when: {is_child: true, sets_engine_id: true}") == 1
    nodes.write_text(text.replace("when: {is_child: true, sets_engine_id: true}", "when: {is_chld: true, sets_engine_id: true}"), encoding="utf-8")
    code, out, err = run(workdir, "decide", "enabled.json", "--rules", "myrules")
    assert code == 2
    assert out == ""
    assert "the rules are invalid" in err
    # Each file is named from the current directory (myrules/...), not from the rules folder.
    listed = re.findall(r"^\s+(\S+\.yaml):(\d+):(\d+): (rules\.\w+): ", err, re.M)
    assert [(f, c) for f, _, _, c in listed] == [("myrules/decision.yaml", "rules.unknown_fact"),
                                                  ("myrules/nodes.yaml", "rules.unknown_fact")]
    assert "did you mean `preference`?" in err
    assert "did you mean `is_child`?" in err


def test_a_valid_rules_dir_copy_decides_like_the_bundled_rules(workdir):
    copy_rules(workdir / "rules-copy")
    bundled = json.loads(run(workdir, "decide", "disabled.json", "--format", "json")[1])
    copied = json.loads(run(workdir, "decide", "disabled.json", "--format", "json", "--rules", "rules-copy")[1])
    # The same decision; only the policy's name differs: its digest (of other
    # bytes: the copy's schema headers) and where its release came from.
    assert bundled.pop("vllm") == {"release": "0.33.0", "source": "default"}
    assert copied.pop("vllm") == {"release": "0.33.0", "source": "rules folder"}
    assert bundled.pop("policy") != copied.pop("policy")
    assert copied == bundled


# -- stdin -----------------------------------------------------------------------

def test_decide_reads_stdin(workdir):
    code, out, _ = run(workdir, "decide", "-", "--format", "json", stdin=json.dumps(DOCUMENTS["disabled"][0]).encode())
    assert code == 0
    assert json.loads(out)["outcome"] == "disabled"


def test_decide_reads_yaml_from_stdin(workdir):
    text = b"kv_transfer_config:\n  kv_connector: ExampleConnector\n  kv_role: kv_both\n"
    code, out, _ = run(workdir, "decide", "-", stdin=text)
    assert code == 0
    assert out.splitlines()[0] == "-: disabled (HMA disabled)"


def test_invalid_stdin_exits_2(workdir):
    code, out, _ = run(workdir, "decide", "-", "--format", "json", stdin=b"kv_transfer_config: [")
    assert code == 2
    assert json.loads(out)["errors"][0]["code"] == "input.parse"


# -- explain ------------------------------------------------------------------------

def test_explain_shows_steps_with_rule_ids_and_facts_read(workdir):
    code, out, _ = run(workdir, "explain", "disabled.json")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "outcome: disabled"
    child = "[node /kv_transfer_config/kv_connector_extra_config/connectors/1]"
    expected = [
        (f'  {child} class_hma = "unsupported"  <- registry.ExampleConnector',
         ['resolution="registry"', 'name="ExampleConnector"']),
        ('  [node /kv_transfer_config] support = "unsupported"  <- node.support.multi_child_unsupported',
         ['name="MultiConnector"', 'first_nonsupported="unsupported"']),
        ('  [decision] hma = "disabled"  <- hma.auto_need_disable', ["need_disable=true"]),
        ('  [decision] hisparse_active = false  <- (default)', []),
    ]
    for head, facts in expected:
        found = [line for line in lines if line.startswith(head)]
        assert len(found) == 1, (head, lines)
        shown = re.search(r"  \((.*)\)$", found[0][len(head):])
        for fact in facts:
            assert shown and fact in shown.group(1).split(", "), (fact, found[0])
    trace = [line for line in lines if line.startswith("trace: ")]
    assert len(trace) == 1
    assert trace[0].split()[1:] == json.loads(run(workdir, "decide", "disabled.json", "--format", "json")[1])["trace"]


def test_explain_exit_codes_follow_decide(workdir):
    assert run(workdir, "explain", "connector_error.json")[0] == 1
    code, out, _ = run(workdir, "explain", "invalid.json")
    assert code == 2
    assert "unknown field `kv_conector`" in out


# -- validate -----------------------------------------------------------------------

def test_validate_valid_document(workdir):
    code, out, _ = run(workdir, "validate", "enabled.json")
    assert (code, out.strip()) == (0, "enabled.json: valid")
    # validate checks the document, not the decision: a rejected configuration is still valid.
    assert run(workdir, "validate", "connector_error.json")[0] == 0


def test_validate_reads_a_document_as_the_release_it_names(workdir):
    """kv_buffer_size is a field up to 0.10.2: valid where decide takes it
    (regression: checked against the newest release's fields only)."""
    old = {"vllm_version": "0.10.1", "kv_transfer_config": {
        "kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e1"}}
    (workdir / "old.json").write_text(json.dumps(old), encoding="utf-8")
    assert run(workdir, "validate", "old.json")[:2] == (0, "old.json: valid (vLLM 0.10.1)\n")
    assert run(workdir, "decide", "old.json")[0] == 0
    code, out, _ = run(workdir, "validate", "old.json", "--vllm-version", "0.33.0")
    assert (code, out) == (2, "/kv_transfer_config/kv_buffer_size: input.schema: unknown field `kv_buffer_size`\n")


def test_validate_lists_problems(workdir):
    (workdir / "two.json").write_text(json.dumps({
        "kv_transfer_config": NIXL, "platform": {"gpu": "h100"}, "model": {"layer_kinds": ["sliding_windw"]},
    }), encoding="utf-8")
    code, out, _ = run(workdir, "validate", "two.json")
    assert code == 2
    assert out.splitlines() == [
        "/model/layer_kinds/0: input.schema: `sliding_windw` is not one of `full_attention`, `sliding_window`, "
        "`chunked_local`, `mamba` (hint: did you mean `sliding_window`?)",
        "/platform/gpu: input.schema: unknown field `gpu`",
    ]


# -- garbage never crashes -------------------------------------------------------------

# name -> (content, expected exit code of `decide`, or None where 0, 1 and 2 are all fine)
GARBAGE = {
    "binary.dat": (bytes(range(256)) * 4, 2),
    "binary.json": (b"\x00\x01\xff\xfe\x80{", 2),
    "empty.json": (b"", 2),
    "empty.yaml": (b"", 2),  # nothing is not a deployment (input.empty)
    "list.json": (b"[]", 2),
    "null.json": (b"null", 2),
    "deep.json": (b"[" * 5000 + b"]" * 5000, 2),
    "deep_object.json": (b'{"metadata":' + b'{"a":' * 5000 + b"1" + b"}" * 5001, 2),
    "deep.yaml": (b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", 2),
    "huge_number.json": (b'{"kv_offloading_size": 1e400}', None),
    "huge_int.json": (b'{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": '
                      + b"9" * 5000 + b"}}", 2),
    "nan.json": (b'{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": NaN}}', 2),
    "bom.json": (b"\xef\xbb\xbf" + json.dumps({"kv_transfer_config": NIXL}).encode(), 0),
    "nul.json": (b'{"kv_transfer_config": {"kv_connector": "Nixl\\u0000", "kv_role": "kv_both"}}', 2),
    "surrogate.json": (b'{"kv_transfer_config": {"kv_connector": "Nixl\\ud800", "kv_role": "kv_both"}}', 2),
    "tag.yaml": (b"!!python/object/apply:os.system [false]\n", 2),
    "scalar.yaml": (b"just a string\n", 2),
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_garbage_never_prints_a_traceback(tmp_path, name):
    content, expected = GARBAGE[name]
    (tmp_path / name).write_bytes(content)
    code, out, err = run(tmp_path, "decide", name)  # run() asserts there is no traceback
    assert code in (0, 1, 2)
    assert "internal error" not in err
    if expected is not None:
        assert code == expected
    if code == 2:
        assert out.splitlines()[0] == f"{name}: error (the document is invalid)"


@pytest.mark.parametrize("name", ["binary.dat", "empty.json", "list.json", "deep.json", "huge_int.json", "tag.yaml"])
def test_garbage_validate_exits_2_without_a_traceback(tmp_path, name):
    (tmp_path / name).write_bytes(GARBAGE[name][0])
    code, out, err = run(tmp_path, "validate", name)
    assert code == 2
    assert "internal error" not in err
    assert re.match(r"^/\S*: input\.\w+: ", out)


@pytest.mark.parametrize("name", ["binary.dat", "deep.json", "huge_number.json", "null.json"])
def test_garbage_through_stdin_and_json_output(tmp_path, name):
    code, out, err = run(tmp_path, "decide", "-", "--format", "json", stdin=GARBAGE[name][0])
    assert code in (0, 1, 2)
    assert "internal error" not in err
    Draft202012Validator(DECISION_SCHEMA).validate(json.loads(out))


def test_cli_spells_the_audit_choices_as_the_audit_modules_do():
    # cli.py spells them out so that `decide` starts without importing audit/report.
    from hma_policy import cli
    from hma_policy.audit import run as audit
    from hma_policy.audit import report as report

    assert cli.REPORT_FORMATS == report.FORMATS
    assert cli.FAIL_ON_CONDITIONS == audit.FAIL_ON


def test_main_in_a_program_returns_the_status_and_frees_what_the_audit_made(tmp_path, monkeypatch, capsys):
    # The console command ends its process at once after its output (the
    # cli.run entry point); main() is for programs: it returns the status,
    # and the policy the audit loaded is unloaded from the rule runtime.
    from hma_policy.core import _durable as _durable
    from hma_policy.cli import main

    unloaded = []
    real = _durable._dre.delete_ruleset
    monkeypatch.setattr(_durable._dre, "delete_ruleset", lambda handle: unloaded.append(handle) or real(handle))
    report = tmp_path / "report.json"
    assert main(["audit", str(REPO / "examples" / "fleet"), "--format", "json", "-o", str(report)]) == 0
    written = capsys.readouterr()
    assert written.out == ""  # the report went to the file; what was written is a note
    assert f"hma-policy: wrote {report} (json): 38 deployment(s), enabled 18, disabled 12, error 7," in written.err
    assert json.loads(report.read_text(encoding="utf-8"))["summary"]["deployments"] == 38
    assert len(unloaded) == 1
    assert main(["audit", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"hma-policy: {tmp_path / 'missing'}: audit.path: no such file or directory\n"
    assert len(unloaded) == 2  # closed on the way out of a failed audit too


def test_the_console_command_writes_everything_before_it_ends(workdir, tmp_path):
    # cli.run ends the process without the interpreter's teardown: the
    # output, piped or written to a file, must be whole, and the status kept.
    report = tmp_path / "fleet.md"
    completed = subprocess.run([sys.executable, "-m", "hma_policy", "audit", str(REPO / "examples" / "fleet"),
                                "--format", "md", "-o", str(report), "--fail-on", "error"],
                               cwd=workdir, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1  # --fail-on met
    assert "hma-policy: --fail-on met: error: 7" in completed.stderr.splitlines()
    assert completed.stdout == ""
    assert completed.stderr.splitlines()[-1].startswith(f"hma-policy: wrote {report} (md): 38 deployment(s)")
    assert report.read_text(encoding="utf-8").endswith("\n") and "| **undetermined** |" in report.read_text(encoding="utf-8")
    piped = subprocess.run([sys.executable, "-m", "hma_policy", "audit", str(REPO / "examples" / "fleet"), "--format", "json"],
                           cwd=workdir, capture_output=True, timeout=300)
    assert piped.returncode == 0 and json.loads(piped.stdout)["summary"]["deployments"] == 38


@pytest.mark.parametrize("closed, args, code, out, err", [
    (1, ["audit", "examples/fleet", "--format", "json", "--quiet"], 0, None, ""),
    (1, ["audit", "examples/fleet", "--fail-on", "error"], 1, None, "hma-policy: --fail-on met: error: 7\n"),
    (1, ["decide", "examples/nixl-pd-decode.json"], 0, None, ""),
    (2, ["audit", "no/such/dir"], 2, "", None),
    (2, ["decide", "examples/nixl-pd-decode.json", "--format", "json"], 0, '"outcome": "enabled"', None),
])
def test_a_closed_standard_stream_loses_its_output_not_the_exit_status(closed, args, code, out, err):
    # `hma-policy ... >&-` starts Python with sys.stdout None: the command
    # ended in a traceback (flushing None) instead of its status. What would
    # go to the closed stream is lost, and nothing goes to the other instead.
    import os

    completed = subprocess.run([sys.executable, "-m", "hma_policy", *args], cwd=REPO, capture_output=True, text=True,
                               timeout=300, preexec_fn=lambda: os.close(closed))
    assert completed.returncode == code, completed.stderr
    if closed == 1:
        assert completed.stderr == err
    else:
        assert (completed.stdout == out) if out == "" else (out in completed.stdout), completed.stdout
        assert "Traceback" not in completed.stdout


# -- FIFOs, devices and a closed standard input (issue 20, items 10 and 11) --------------------------

@pytest.mark.parametrize("command", ["decide", "validate", "explain"])
def test_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path, command):
    # The old command opened the FIFO and waited for a writer forever (and read /dev/zero to the limit).
    import os

    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
        code, out, err = run(tmp_path, command, path)  # run() gives up after 60 s
        message = f"cannot read `{path}`: it is {kind}, not a regular file"
        hint = "give a FIFO's or a device's content on standard input: `-`"
        assert code == 2
        if command == "validate":
            assert (out, err) == (f"/: input.not_regular: {message} (hint: {hint})\n", "")
        else:
            assert f"  - input.not_regular [input] at /: {message}\n    hint: {hint}\n" in out


def test_standard_input_may_still_be_a_pipe(workdir):
    code, out, _ = run(workdir, "decide", "-", stdin=json.dumps(DOCUMENTS["enabled"][0]).encode())
    assert code == 0 and out.startswith("-: enabled")


def test_a_closed_standard_input_is_an_input_error_not_an_internal_one(workdir):
    # `hma-policy decide - <&-`: the old command ended in "internal error: AttributeError".
    import os

    completed = subprocess.run([sys.executable, "-m", "hma_policy", "decide", "-", "--format", "json"], cwd=workdir,
                               capture_output=True, text=True, timeout=60, preexec_fn=lambda: os.close(0))
    assert (completed.returncode, completed.stderr) == (2, "hma-policy: policy bundled (" + hma_policy.load_policy().digest[:19] + ")\n")
    errors = json.loads(completed.stdout)["errors"]
    assert [(e["code"], e["message"]) for e in errors] == [("input.read", "cannot read standard input: it is closed")]


# -- decide -- vllm serve ... ---------------------------------------------------

def test_decide_takes_the_command_that_starts_vllm_after_double_dash(tmp_path):
    kv = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'
    code, out, _ = run(tmp_path, "decide", "--format", "json", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                       "--kv-transfer-config", kv)
    assert code == 0
    data = json.loads(out)
    assert (data["outcome"], data["warnings"][0]["code"]) == ("disabled", "hma.auto_disabled")
    # python -m vllm.entrypoints.openai.api_server, and the text's first line names the command
    nixl = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    code, out, _ = run(tmp_path, "decide", "--", "python3", "-m", "vllm.entrypoints.openai.api_server",
                       "--model", "m", "--kv-transfer-config", nixl)
    assert code == 0 and out.splitlines()[0] == "(command): enabled (HMA enabled)"
    # the same decision as the API gives for the same words
    assert json.loads(run(tmp_path, "decide", "--format", "json", "--", "vllm", "serve", "m",
                          "--kv-transfer-config", nixl)[1]) == \
        hma_policy.decide_command(["vllm", "serve", "m", "--kv-transfer-config", nixl], env={}).to_dict()


def test_decide_reads_dynamos_launcher_after_double_dash(tmp_path):
    code, out, _ = run(tmp_path, "decide", "--format", "json", "--", "python3", "-m", "dynamo.vllm", "--model", "m",
                       "--connector", "lmcache")
    data = json.loads(out)
    assert (code, data["outcome"], [c["kv_connector"] for c in data["connectors"]]) == \
        (0, "disabled", ["LMCacheConnectorV1"])


def test_a_command_that_is_not_a_vllm_launch_is_an_input_error_and_files_after_dashes_stay_files(tmp_path):
    code, out, _ = run(tmp_path, "decide", "--format", "json", "--", "vllm", "bench", "m")
    assert code == 2 and json.loads(out)["errors"][0]["stage"] == "input"
    # `--` before a file name that starts with a dash keeps its usual meaning
    (tmp_path / "-doc.json").write_text('{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}')
    code, out, _ = run(tmp_path, "decide", "--", "-doc.json")
    assert code == 0 and out.splitlines()[0] == "-doc.json: enabled (HMA enabled)"


def test_commands_other_than_serve_do_not_load_the_service():
    # Every command builds the whole parser, `serve`'s options included: those
    # live apart from the service, whose imports (logging's configuration, the
    # server extra) would cost every command about 10 ms of start-up.
    script = ("import sys; from hma_policy import cli; cli._parser().parse_args(['serve', '--port', '8001']); "
              "print(sorted(m for m in sys.modules if m.startswith('hma_policy.server')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hma_policy.server', 'hma_policy.server.options']"
