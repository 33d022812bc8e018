"""Acceptance: the policy lives in the rule files, and no document crashes the engine.

(a) Changing one registry entry in a copy of rules/ changes the decision,
    through the API and through the CLI, without touching engine code.
(b) Values that crash durable-rules when posted to it raw (exponent floats,
    NaN, infinities, many keys, huge strings, very deep nesting, NUL bytes)
    give a Decision or an InputError with a stable code, never a crash. Each
    runs in-process and in a subprocess (a segfault shows as a negative return
    code there), and the CLI handles JSON files with NaN/Infinity literals.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import hma_policy
from rulecopy import copy_rules

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DECISION_VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.schema.json").read_text(encoding="utf-8"))
)
SUBPROCESS_TIMEOUT = 60


def _valid(decision_dict):
    problems = [e.message for e in DECISION_VALIDATOR.iter_errors(decision_dict)]
    assert not problems, problems
    return decision_dict


def _run(args, **kwargs):
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
        cwd=str(kwargs.pop("cwd", HERE)), env=env, **kwargs,
    )


def _cli(*args):
    return _run(["-m", "hma_policy", *map(str, args)])


# --------------------------------------------------------------------------
# (a) the registry is data
# --------------------------------------------------------------------------

LMCACHE_V1 = {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}


@pytest.fixture(scope="module")
def flipped_rules_dir(tmp_path_factory):
    target = tmp_path_factory.mktemp("flipped") / "rules"
    copy_rules(target)
    registry_file = target / "connectors.yaml"
    registry = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    assert registry["connectors"]["LMCacheConnectorV1"]["supports_hma"] is False
    registry["connectors"]["LMCacheConnectorV1"]["supports_hma"] = True
    registry_file.write_text(yaml.safe_dump(registry, sort_keys=False), encoding="utf-8")
    return target


def test_flipping_a_registry_entry_flips_the_decision(flipped_rules_dir):
    bundled = hma_policy.load_policy(None, memo=False)
    flipped = hma_policy.load_policy(flipped_rules_dir, memo=False)
    try:
        before = bundled.decide(LMCACHE_V1)
        after = flipped.decide(LMCACHE_V1)
        _valid(before.to_dict())
        _valid(after.to_dict())
        assert (before.outcome, before.hma_enabled) == ("disabled", False)
        assert [w.code for w in before.warnings] == ["hma.auto_disabled"]
        assert (after.outcome, after.hma_enabled) == ("enabled", True)
        assert after.warnings == ()
        # The same rule fired, reading the edited entry.
        assert "registry.LMCacheConnectorV1" in before.trace and "registry.LMCacheConnectorV1" in after.trace
        assert [c.supports_hma for c in before.connectors] == [False]
        assert [c.supports_hma for c in after.connectors] == [True]
        assert flipped.supports_hma(LMCACHE_V1["kv_transfer_config"]) is True
        assert bundled.supports_hma(LMCACHE_V1["kv_transfer_config"]) is False
        # The digest identifies the rules that decided.
        assert before.policy_digest != after.policy_digest
        assert after.to_dict()["policy"]["digest"] == flipped.digest
        assert flipped.source == str(flipped_rules_dir)
        # Other connectors are unaffected.
        example = {"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}}
        assert _valid(flipped.decide(example).to_dict())["outcome"] == "disabled"
    finally:
        bundled.close()
        flipped.close()


def test_flipping_a_registry_entry_through_the_cli(flipped_rules_dir, tmp_path):
    document = tmp_path / "lmcache-v1.json"
    document.write_text(json.dumps(LMCACHE_V1), encoding="utf-8")

    flipped = _cli("decide", document, "--rules", flipped_rules_dir, "--format", "json")
    assert flipped.returncode == 0, flipped.stderr
    assert "Traceback" not in flipped.stderr
    out = _valid(json.loads(flipped.stdout))
    assert (out["outcome"], out["hma_enabled"], out["disable_hybrid_kv_cache_manager"]) == ("enabled", True, False)
    assert out["warnings"] == []

    bundled = _cli("decide", document, "--format", "json")
    assert bundled.returncode == 0, bundled.stderr
    out_bundled = _valid(json.loads(bundled.stdout))
    assert (out_bundled["outcome"], out_bundled["hma_enabled"]) == ("disabled", False)
    assert [w["code"] for w in out_bundled["warnings"]] == ["hma.auto_disabled"]
    assert out_bundled["policy"]["digest"] != out["policy"]["digest"]


def test_cli_reports_broken_rules_without_traceback(flipped_rules_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(flipped_rules_dir, broken)
    (broken / "connectors.yaml").write_text("kind: registry\nconnectors: [\n", encoding="utf-8")
    document = tmp_path / "doc.json"
    document.write_text(json.dumps(LMCACHE_V1), encoding="utf-8")
    result = _cli("decide", document, "--rules", broken)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "connectors.yaml" in result.stderr


# --------------------------------------------------------------------------
# (b) hostile documents
# --------------------------------------------------------------------------


def _nixl(extra):
    return {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                   "kv_connector_extra_config": extra}}


def _deep(levels):
    root = {}
    node = root
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


def _multi_with(child):
    return {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                   "kv_connector_extra_config": {"connectors": [child]}}}


ENABLED = ("decision", "enabled", None)
UNKNOWN_CONNECTOR = ("decision", "error", "connector.unknown")

# id -> (builder, accepted results). A result is ("decision", outcome, first
# error code) or ("input_error", code). vLLM does not validate the values of
# kv_connector_extra_config (reference section 2), so those documents decide
# like any NixlConnector; size limits may reject instead, with input.limit.
HOSTILE = {
    "float-1e-05": (lambda: _nixl({"x": 1e-05, "y": [1e-05], "z": {"w": -1e-05}}), {ENABLED}),
    "float-1e+16": (lambda: _nixl({"x": 1e+16, "y": [1e+16], "z": {"w": -1e+16}}), {ENABLED}),
    "float-nan": (lambda: _nixl({"x": float("nan"), "y": [float("nan")], "z": {"w": float("nan")}}), {ENABLED}),
    "float-inf": (lambda: _nixl({"x": float("inf"), "y": [float("-inf")], "z": {"w": float("inf")}}), {ENABLED}),
    "float-mixed-in-child": (
        lambda: _multi_with({"kv_connector": "NixlConnector", "kv_role": "kv_both",
                             "kv_connector_extra_config": {"a": float("nan"), "b": 1e+16, "c": 1e-05, "d": float("inf")}}),
        {ENABLED},
    ),
    "keys-300": (lambda: _nixl({f"key_{i}": i for i in range(300)}), {ENABLED}),
    "keys-300-floats": (lambda: _nixl({f"k{i}": i * 1e-05 for i in range(300)}), {ENABLED}),
    "string-20MB": (lambda: _nixl({"blob": "x" * (20 * 1024 * 1024)}), {ENABLED, ("input_error", "input.limit")}),
    "name-1e+16": (lambda: {"kv_transfer_config": {"kv_connector": "1e+16", "kv_role": "kv_both"}}, {UNKNOWN_CONNECTOR}),
    "child-name-1e+16": (lambda: _multi_with({"kv_connector": "1e+16", "kv_role": "kv_both"}), {UNKNOWN_CONNECTOR}),
    "nested-10000": (lambda: _nixl(_deep(10_000)), {ENABLED, ("input_error", "input.limit")}),
    "nested-10000-top": (lambda: {"metadata": _deep(10_000)}, {ENABLED, ("input_error", "input.limit")}),
    "nul-in-name": (
        lambda: {"kv_transfer_config": {"kv_connector": "Nixl\x00Connector", "kv_role": "kv_both"}},
        {UNKNOWN_CONNECTOR, ("input_error", "input.schema")},
    ),
    "nul-only-name": (
        lambda: {"kv_transfer_config": {"kv_connector": "\x00", "kv_role": "kv_both"}},
        {UNKNOWN_CONNECTOR, ("input_error", "input.schema")},
    ),
    "nul-in-child-name": (
        lambda: _multi_with({"kv_connector": "\x00NixlConnector\x00", "kv_role": "kv_both"}),
        {UNKNOWN_CONNECTOR, ("input_error", "input.schema")},
    ),
    "nul-in-module-path": (
        lambda: {"kv_transfer_config": {"kv_connector": "Acme", "kv_role": "kv_both", "kv_connector_module_path": "acme\x00.kv"}},
        {("decision", "undetermined", None), ("input_error", "input.schema")},
    ),
    "nul-in-extra-config": (lambda: _nixl({"k\x00": "v\x00"}), {ENABLED}),
}


def _observe(document, policy):
    try:
        decision = policy.decide(document)
    except hma_policy.InputError as exc:
        assert exc.problems
        return ("input_error", exc.problems[0].code)
    _valid(decision.to_dict())
    return ("decision", decision.outcome, decision.errors[0].code if decision.errors else None)


def _child_main(case_id):
    """Entry point of the subprocess: decide one hostile document, print the result as JSON."""
    build, _ = HOSTILE[case_id]
    document = build()
    policy = hma_policy.load_policy(None, memo=False)
    first = _observe(document, policy)
    again = _observe(build(), hma_policy.load_policy(None, memo=True))
    print(json.dumps({"first": list(first), "again": list(again)}))


@pytest.fixture(scope="module")
def plain_policy():
    p = hma_policy.load_policy(None, memo=False)
    yield p
    p.close()


@pytest.mark.parametrize("case_id", list(HOSTILE))
def test_hostile_document_in_process(case_id, plain_policy):
    build, accepted = HOSTILE[case_id]
    result = _observe(build(), plain_policy)
    assert result in accepted, result
    # Stable: the same answer again, and through the default (memoising) policy.
    assert _observe(build(), plain_policy) == result
    try:
        default = hma_policy.decide(build())
        _valid(default.to_dict())
        assert ("decision", default.outcome, default.errors[0].code if default.errors else None) == result
    except hma_policy.InputError as exc:
        assert ("input_error", exc.problems[0].code) == result


@pytest.mark.parametrize("case_id", list(HOSTILE))
def test_hostile_document_in_subprocess(case_id):
    _, accepted = HOSTILE[case_id]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import test_acceptance as t; t._child_main(sys.argv[2])"
    )
    result = _run(["-c", code, str(HERE), case_id])
    assert result.returncode == 0, f"exit {result.returncode} (negative: killed by a signal)\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    first, again = tuple(out["first"]), tuple(out["again"])
    assert first in accepted, first
    assert again == first


def test_hostile_values_never_reach_the_decision_as_data(plain_policy):
    # NaN and infinities inside extra config leave the decision exactly as for
    # an empty extra config (values there are opaque to vLLM's HMA decision).
    plain = plain_policy.decide(_nixl({}))
    weird = plain_policy.decide(_nixl({"a": float("nan"), "b": float("inf"), "c": 1e+16}))
    _valid(plain.to_dict())
    _valid(weird.to_dict())
    assert (weird.outcome, weird.hma_enabled, weird.trace) == ("enabled", True, plain.trace)
    # The decision holds no float at all, so it serialises as strict JSON.
    json.dumps(weird.to_dict(), allow_nan=False)


# The CLI reading JSON (and YAML) files with NaN / Infinity / 1e+16 literals.
CLI_FILES = [
    pytest.param(
        "extra.json",
        '{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both",'
        ' "kv_connector_extra_config": {"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e+16, "e": 1e-05}}}',
        0, "enabled", id="extra-config-literals",
    ),
    pytest.param(
        "child.json",
        '{"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config":'
        ' {"connectors": [{"kv_connector": "ExampleConnector", "kv_role": "kv_both",'
        ' "kv_connector_extra_config": {"x": NaN, "y": 1e+16}}]}}}',
        0, "disabled", id="child-extra-config-literals",
    ),
    pytest.param(
        "name.json",
        '{"kv_transfer_config": {"kv_connector": "1e+16", "kv_role": "kv_both"}}',
        1, "error", id="connector-named-1e+16",
    ),
    # kv_port is an int: an integral float such as 1e+16 is an integer to JSON
    # Schema and to pydantic's lax int; a fractional one is not.
    pytest.param(
        "port.json",
        '{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 1e+16}}',
        0, "enabled", id="integral-float-port",
    ),
    pytest.param(
        "port-fraction.json",
        '{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 1.5e+0}}',
        2, "error", id="fractional-port",
    ),
    pytest.param(
        "preference.json",
        '{"kv_transfer_config": null, "disable_hybrid_kv_cache_manager": NaN}',
        2, "error", id="nan-preference",
    ),
    pytest.param(
        "chunk.json",
        '{"model": {"attention_chunk_size": Infinity}}',
        2, "error", id="infinite-chunk-size",
    ),
    pytest.param("top.json", "NaN", 2, "error", id="nan-document"),
    pytest.param(
        "extra.yaml",
        "kv_transfer_config:\n  kv_connector: NixlConnector\n  kv_role: kv_both\n"
        "  kv_connector_extra_config: {a: .nan, b: .inf, c: -.inf, d: 1.0e+16}\n",
        0, "enabled", id="yaml-nan-inf",
    ),
]


@pytest.mark.parametrize("filename, text, exit_code, outcome", CLI_FILES)
def test_cli_reads_files_with_nan_and_infinity(tmp_path, filename, text, exit_code, outcome):
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    result = _cli("decide", path, "--format", "json")
    assert result.returncode in (0, 1, 2)
    assert "Traceback" not in result.stderr
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    out = _valid(json.loads(result.stdout))
    assert out["outcome"] == outcome
    if exit_code == 2:
        assert out["errors"][0]["stage"] == "input"
    # The text format and explain take the same path without a traceback.
    for command in (["decide", path], ["explain", path], ["validate", path]):
        other = _cli(*command)
        assert other.returncode in (0, 1, 2), command
        assert "Traceback" not in other.stderr, command
        if command[0] != "validate":
            assert other.returncode == exit_code, command
