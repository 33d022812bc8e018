"""Totality: no input, however hostile, ends in anything but an answer.

For any JSON value, and for mutations of valid documents, ``decide`` returns
a Decision (valid against schemas/decision.schema.json) or raises
InputError whose problems carry a stable code and a JSON Pointer; and
``python -m hma_policy decide FILE`` exits 0, 1 or 2 with no traceback and no
"internal error". The inputs that crash durable-rules' C core when posted
raw (../shared/reference/durable-rules.md §3: floats in exponent form, NaN
and Infinity, more than 252 properties, strings over 16 MiB, integers beyond
64 bits, NUL bytes, non-NFC unicode, deep nesting) are fed in documents and,
through ``--rules``, in rule files.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hma_policy

from rulecopy import copy_rules
from strategies import RandomPicker, document, documents, json_values

ROOT = Path(__file__).resolve().parent.parent
DECISION_VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.schema.json").read_text(encoding="utf-8")))
CODE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+")
CASES = json.loads((ROOT / "tests" / "conformance" / "cases.json").read_text(encoding="utf-8"))
MIB = 1024 * 1024
CLI_TIMEOUT = 120  # a hang is a failure, not a wait


@pytest.fixture(scope="module")
def policy():
    p = hma_policy.load_policy(None)
    yield p
    p.close()


def decide_totally(policy, doc):
    """decide() answers with a schema-valid Decision or a well-formed InputError; nothing else."""
    try:
        decision = policy.decide(doc)
    except hma_policy.InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert CODE.fullmatch(problem.code), problem
            assert problem.path == "" or problem.path.startswith("/"), problem
            assert problem.message and "\n" not in problem.message, problem
        return exc
    errors = [e.message for e in DECISION_VALIDATOR.iter_errors(decision.to_dict())]
    assert not errors, errors
    json.dumps(decision.to_dict(), allow_nan=False)  # the decision is plain JSON data
    return decision


# ---------------------------------------------------------------------------
# Any JSON value, and mutations of valid documents
# ---------------------------------------------------------------------------


@settings(max_examples=800, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_values())
def test_any_json_value(policy, value):
    decide_totally(policy, value)


@settings(max_examples=800, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_values(max_leaves=10).map(lambda v: {"kv_transfer_config": v}))
def test_any_json_value_as_the_connector_config(policy, value):
    decide_totally(policy, value)


def _containers(value, path=()):
    """Every (container, key) slot of a JSON value, for mutation."""
    out = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out += [(node, k) for k in node]
            stack += list(node.values())
        elif isinstance(node, list):
            out += [(node, i) for i in range(len(node))]
            stack += node
    return out


@st.composite
def mutated_documents(draw):
    """A valid-looking document (a conformance input or a random one) with 1-3 of
    its values replaced, deleted or wrapped, or a key added."""
    if draw(st.booleans()):
        doc = copy.deepcopy(draw(st.sampled_from(CASES))["input"])
    else:
        doc = document(RandomPicker(random.Random(draw(st.integers(0, 2**32)))))
    for _ in range(draw(st.integers(1, 3))):
        slots = _containers(doc)
        if not slots:
            break
        parent, key = slots[draw(st.integers(0, len(slots) - 1))]
        action = draw(st.sampled_from(["replace", "delete", "wrap", "add"]))
        if action == "replace":
            parent[key] = copy.deepcopy(draw(json_values(max_leaves=6)))
        elif action == "delete":
            del parent[key]
        elif action == "wrap":
            wrapper = draw(st.sampled_from(["list", "object", "json-string"]))
            parent[key] = {"list": lambda v: [v], "object": lambda v: {"x": v},
                           "json-string": lambda v: json.dumps(v, allow_nan=True)}[wrapper](parent[key])
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = copy.deepcopy(draw(json_values(max_leaves=4)))
    return doc


@settings(max_examples=1000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_documents())
def test_mutated_valid_documents(policy, doc):
    decide_totally(policy, doc)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents(max_nodes=20))
def test_generated_documents_through_the_default_policy(policy, doc):
    # The module-level hma_policy.decide, with its lazily built default policies, answers what
    # the bundled policy answers (the generated documents name no release).
    expected = decide_totally(policy, doc)
    try:
        answered = hma_policy.decide(doc).to_dict()
    except hma_policy.InputError as exc:
        answered = exc.problems
    assert answered == (expected.problems if isinstance(expected, hma_policy.InputError) else expected.to_dict())


# ---------------------------------------------------------------------------
# The inputs that crash durable-rules' C core, in documents
# ---------------------------------------------------------------------------


def C(name="NixlConnector", **extra):
    return {"kv_connector": name, "kv_role": "kv_both", **extra}


def nested(depth, leaf=1, kind=dict):
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind is dict else [value]
    return value


def many_keys(n):
    return {f"k{i}": i for i in range(n)}


BIG = "N" * (16 * MIB + 1)
SWITCH = "VLLM_USE_SIMPLE_KV_OFFLOAD"
CHUNK_SWITCH = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"

DOCUMENT_TRIGGERS = {
    # floats in exponent form, NaN, Infinity
    "offloading-size-1e-05": {"kv_offloading_size": 1e-05},
    "offloading-size-1e+16": {"kv_offloading_size": 1e16},
    "offloading-size-nan": {"kv_offloading_size": math.nan},
    "offloading-size-inf": {"kv_offloading_size": math.inf},
    "offloading-size-minus-inf": {"kv_offloading_size": -math.inf},
    "chunk-size-1e+16": {"model": {"attention_chunk_size": 1e16}},
    "chunk-size-nan": {"model": {"attention_chunk_size": math.nan}},
    "chunk-size-float": {"model": {"attention_chunk_size": 8192.0}},
    "kv-port-1e+16": {"kv_transfer_config": C(kv_port=1e16)},
    "kv-port-inf": {"kv_transfer_config": C(kv_port=math.inf)},
    "extra-config-floats": {"kv_transfer_config": C(kv_connector_extra_config={"a": 1e308, "b": -1e-320, "c": math.nan})},
    "env-switch-float": {"env": {SWITCH: 1.0}},
    "env-switch-exponent": {"env": {SWITCH: 1e16}},
    "env-chunk-switch-float": {"env": {CHUNK_SWITCH: 0.0}, "model": {"attention_chunk_size": 8192}},
    "env-switch-nan": {"env": {SWITCH: math.nan}},
    "env-switch-inf": {"env": {SWITCH: math.inf}},
    "env-switch-string-exponent": {"env": {SWITCH: "1e5"}},
    "env-other-float": {"env": {"LMCACHE_USE_UPSTREAM_MP": 1e-05}},
    "metadata-nan": {"metadata": {"x": math.nan, "y": math.inf}},
    # more than 252 properties
    "extra-config-300-keys": {"kv_transfer_config": C(kv_connector_extra_config=many_keys(300))},
    "env-300-keys": {"env": many_keys(300)},
    "metadata-300-keys": {"metadata": many_keys(300)},
    "top-300-keys": many_keys(300),
    "child-300-keys": {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                              "kv_connector_extra_config": {"connectors": [{**C(), **many_keys(300)}]}}},
    "hisparse-300-keys": {"hisparse_config": many_keys(300)},
    "speculative-300-keys": {"speculative_config": many_keys(300)},
    "300-children": {"kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                            "kv_connector_extra_config": {"connectors": [C() for _ in range(300)]}}},
    # strings over 16 MiB
    "connector-name-16mib": {"kv_transfer_config": C(BIG)},
    "engine-id-16mib": {"kv_transfer_config": C(engine_id=BIG)},
    "env-value-16mib": {"env": {"LMCACHE_USE_UPSTREAM_MP": BIG}},
    "metadata-16mib": {"metadata": {"x": BIG}},
    "key-16mib": {"metadata": {BIG: 1}},
    "extra-config-15mib": {"kv_transfer_config": C(kv_connector_extra_config={"x": "x" * (15 * MIB)})},
    # integers beyond 64 bits
    "kv-port-2**64": {"kv_transfer_config": C(kv_port=2**64)},
    "kv-port-minus-2**64": {"kv_transfer_config": C(kv_port=-(2**64))},
    "chunk-size-2**64": {"model": {"attention_chunk_size": 2**64 + 1}},
    "offloading-size-2**70": {"kv_offloading_size": 2**70},
    "env-switch-2**64": {"env": {SWITCH: 2**64}},
    "env-switch-20-digits": {"env": {SWITCH: "99999999999999999999"}},
    "env-other-2**64": {"env": {"LMCACHE_USE_UPSTREAM_MP": 2**64}},
    "integer-over-1024-bits": {"metadata": {"x": 2**1100}},
    # NUL bytes
    "connector-name-nul": {"kv_transfer_config": C("Nixl\x00Connector")},
    "module-path-nul": {"kv_transfer_config": C(kv_connector_module_path="acme\x00.kv")},
    "role-nul": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both\x00"}},
    "env-key-nul": {"env": {"A\x00B": "1"}},
    "env-value-nul": {"env": {"LMCACHE_USE_UPSTREAM_MP": "1\x00", SWITCH: "1\x00"}},
    "method-nul": {"speculative_config": {"method": "eagle\x00"}, "model": {"attention_chunk_size": 8}},
    "key-nul": {"\x00": 1},
    "engine-id-nul": {"kv_transfer_config": C(engine_id="a\x00b")},
    # non-NFC unicode, lone surrogates, control characters
    "connector-name-nfd": {"kv_transfer_config": C("Nixl\u0301Connector")},
    "multiconnector-nfd": {"kv_transfer_config": {"kv_connector": "MultiConnecto\u0301r", "kv_role": "kv_both"}},
    "key-nfd": {"kv_transfer_config\u0301": 1},
    "method-nfd": {"speculative_config": {"method": "eagle\u0301"}, "model": {"attention_chunk_size": 8}},
    "connector-name-surrogate": {"kv_transfer_config": C("\ud800Connector")},
    "module-path-surrogate": {"kv_transfer_config": C(kv_connector_module_path="acme.\udfff")},
    "method-surrogate": {"speculative_config": {"method": "\ud800"}},
    "key-surrogate": {"\ud800": 1},
    "connector-name-escape": {"kv_transfer_config": C("\x1b[31mNixlConnector\x1b[0m")},
    "unknown-key-newline": {"kv_transfer_config": {**C(), "evil\nFORGED: enabled": 1}},
    # deep nesting
    "metadata-10000-deep": {"metadata": nested(10_000)},
    "metadata-10000-deep-lists": {"metadata": nested(10_000, kind=list)},
    "extra-config-10000-deep": {"kv_transfer_config": C(kv_connector_extra_config=nested(10_000))},
    "multiconnector-chain-3000-deep": {"kv_transfer_config": None},  # filled below
    "multiconnector-chain-30-deep": {"kv_transfer_config": None},  # filled below
}


def _chain(depth):
    node = C()
    for _ in range(depth):
        node = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [node]}}
    return node


DOCUMENT_TRIGGERS["multiconnector-chain-3000-deep"]["kv_transfer_config"] = _chain(3000)
DOCUMENT_TRIGGERS["multiconnector-chain-30-deep"]["kv_transfer_config"] = _chain(30)
JSON_DEEP_LIMIT = 900  # json.dumps itself recurses: deeper documents are written as text below


@pytest.mark.parametrize("name", list(DOCUMENT_TRIGGERS))
def test_durable_rules_trigger_in_a_document(policy, name):
    outcome = decide_totally(policy, DOCUMENT_TRIGGERS[name])
    if name == "multiconnector-chain-30-deep":
        assert isinstance(outcome, hma_policy.Decision) and outcome.outcome == "enabled"


def test_python_values_that_are_not_json(policy):
    for doc in ({"metadata": {1: "x"}}, {"metadata": {("a",): 1}}, {"metadata": {b"k": 1}},
                {"metadata": {"x": {1, 2}}}, {"metadata": {"x": b"bytes"}}, {"metadata": {"x": object()}},
                {"kv_transfer_config": C(kv_connector_extra_config={"x": complex(1, 2)})}, ["not", "an", "object"],
                "text", 7, 2.5, True, b"{}"):
        decide_totally(policy, doc)


def test_a_self_referencing_document(policy):
    doc: dict = {"metadata": {}}
    doc["metadata"]["loop"] = doc
    decide_totally(policy, doc)


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hma_policy", *args], input=stdin, capture_output=True,
                          timeout=CLI_TIMEOUT, cwd=ROOT)


def assert_clean_exit(result: subprocess.CompletedProcess, what: str) -> None:
    out = result.stdout.decode("utf-8", "replace") + result.stderr.decode("utf-8", "replace")
    assert result.returncode in (0, 1, 2), (what, result.returncode, out[-2000:])
    assert "Traceback" not in out, (what, out[-2000:])
    # An internal fault is exit 2 too, but bad input deserves its own code.
    assert "internal error" not in out, (what, out[-2000:])


def _json_text(doc) -> str:
    return json.dumps(doc, allow_nan=True)


def _text_triggers() -> dict[str, bytes]:
    texts: dict[str, bytes] = {}
    for name, doc in DOCUMENT_TRIGGERS.items():
        if "10000-deep" in name or "3000-deep" in name or "16mib" in name or "15mib" in name:
            continue  # written as text below, or covered by big-string.json
        try:
            texts[name + ".json"] = _json_text(doc).encode("utf-8", "surrogatepass")
        except (ValueError, TypeError):
            pass
    deep = 10_000
    texts.update({
        "deep-lists.json": b"[" * deep + b"]" * deep,
        "deep-objects.json": b'{"metadata": ' + b'{"a": ' * deep + b"1" + b"}" * deep + b"}",
        "deep-connectors.json": (
            b'{"kv_transfer_config": '
            + b'{"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [' * deep
            + b'{"kv_connector": "NixlConnector", "kv_role": "kv_both"}' + b"]}}" * deep + b"}"),
        "deep-flow.yaml": b"metadata: " + b"[" * deep + b"]" * deep + b"\n",
        "deep-block.yaml": b"".join(b"  " * i + b"a:\n" for i in range(2000)) + b"  " * 2000 + b"b: 1\n",
        "digits-5000.json": b'{"kv_offloading_size": ' + b"9" * 5000 + b"}",
        "digits-5000.yaml": b"kv_offloading_size: " + b"9" * 5000 + b"\n",
        "nan-token.json": b'{"kv_offloading_size": NaN, "metadata": {"x": Infinity, "y": -Infinity}}',
        "nan.yaml": b"kv_offloading_size: .nan\nmodel: {attention_chunk_size: .inf}\n",
        "exponent-floats.yaml": b"kv_offloading_size: 1.0e-05\nenv: {VLLM_USE_SIMPLE_KV_OFFLOAD: 1.0e+16}\n",
        "raw-nul.json": b'{"kv_transfer_config": {"kv_connector": "Nixl\x00Connector", "kv_role": "kv_both"}}',
        "raw-nul.yaml": b"kv_transfer_config: {kv_connector: Nixl\x00Connector, kv_role: kv_both}\n",
        "escaped-nul.yaml": b'kv_transfer_config: {kv_connector: "Nixl\\0Connector", kv_role: kv_both}\n',
        "lone-surrogate.json": b'{"kv_transfer_config": {"kv_connector": "\\ud800", "kv_role": "kv_both"}, "\\udfff": 1}',
        "lone-surrogate-key.json": b'{"\\ud800": 1}',
        "invalid-utf8.json": b'{"kv_transfer_config": {"kv_connector": "\xff\xfe", "kv_role": "kv_both"}}',
        "utf16.json": '{"kv_transfer_config": null}'.encode("utf-16"),
        "bom.json": b"\xef\xbb\xbf" + b'{"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}',
        "nfd.yaml": "kv_transfer_config: {kv_connector: MultiConnecto\u0301r, kv_role: kv_both}\n".encode(),
        "python-tag.yaml": b"kv_transfer_config: !!python/object/apply:os.system ['true']\n",
        "alias-bomb.yaml": b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n",
        "duplicate-keys.json": b'{"kv_transfer_config": null, "kv_transfer_config": {}}',
        "two-documents.yaml": b"kv_transfer_config: null\n---\nkv_transfer_config: null\n",
        "timestamp.yaml": b"metadata: {when: 2026-11-29}\nkv_offloading_size: 2026-11-29\n",
        "json-string-config.json": json.dumps({"kv_transfer_config": "{" * 5000}).encode(),
        "control-characters.yaml": b'kv_transfer_config: {kv_connector: "\\e[2J\\rFORGED", kv_role: kv_both}\n',
        "empty.json": b"",
        "big-string.json": b'{"metadata": {"x": "' + b"x" * (17 * MIB) + b'"}}',
    })
    return texts


@pytest.fixture(scope="module")
def trigger_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("triggers")
    paths = []
    for name, data in _text_triggers().items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    oversized = folder / "oversized.json"
    with oversized.open("wb") as handle:  # over the 64 MiB input bound
        handle.write(b'{"metadata": {"x": "')
        handle.write(b"x" * (65 * MIB))
        handle.write(b'"}}')
    paths.append(oversized)
    return paths


def test_cli_on_every_trigger_file(trigger_files):
    def one(path):
        fmt = ["--format", "json"] if path.stat().st_size < MIB else []
        return path.name, run_cli("decide", str(path), *fmt)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, trigger_files))
    for name, result in results:
        assert_clean_exit(result, name)
        if name.endswith(".json") and result.returncode == 2 and result.stdout.strip().startswith(b"{"):
            decision = json.loads(result.stdout)
            assert decision["errors"] and all(CODE.fullmatch(e["code"]) for e in decision["errors"]), (name, decision)
            assert all(e["path"] == "" or e["path"].startswith("/") for e in decision["errors"]), (name, decision)


def test_cli_reads_a_hostile_document_from_stdin():
    result = run_cli("decide", "-", stdin=b"[" * 100_000)
    assert_clean_exit(result, "stdin")
    assert result.returncode == 2


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(json_values(max_leaves=20))
def test_cli_on_any_json_value(tmp_path, value):
    path = tmp_path / "doc.json"
    path.write_bytes(json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass"))
    for fmt in ("text", "json"):
        assert_clean_exit(run_cli("decide", str(path), "--format", fmt), json.dumps(value, allow_nan=True)[:200])


def test_cli_output_never_carries_control_characters_from_a_document(tmp_path):
    # Log tampering: a document must not forge lines or terminal escapes in
    # what the CLI prints (SECURITY.md).
    path = tmp_path / "forge.json"
    path.write_text(json.dumps({"kv_transfer_config": {**C(), "evil\nFORGED: enabled\x1b[2J": 1},
                                "metadata": {"x\r": "\x1b[31m"}}), encoding="utf-8")
    for fmt in ("text", "json"):
        result = run_cli("decide", str(path), "--format", fmt)
        assert_clean_exit(result, fmt)
        out = result.stdout.decode()
        assert "\x1b" not in out and "\r" not in out
        assert not any(line.startswith("FORGED") for line in out.splitlines())


# ---------------------------------------------------------------------------
# A launcher's command line (decide_command)
# ---------------------------------------------------------------------------

_STARTS = [["vllm", "serve"], ["vllm", "serve", "m"], ["python3", "-m", "vllm.entrypoints.openai.api_server"],
           ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], ["vllm"], [], ["ls", "-l"]]
_OPTIONS = ["--kv-transfer-config", "--kv-transfer-config.kv_connector", "--kv-transfer-config.kv_role",
            "--kv_transfer_config", "--kv-transfer", "--disable-hybrid-kv-cache-manager",
            "--no-disable-hybrid-kv-cache-manager", "--kv-offloading-size", "--kv-offloading-backend",
            "--speculative-config", "--config", "-O", "--model", "--port", "--kv-events-config", "--"]
_VALUES = ['{"kv_connector": "NixlConnector", "kv_role": "kv_both"}', '{"kv_connector": "MultiConnector", '
           '"kv_connector_extra_config": {"connectors": [{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}]}}',
           "{", "[]", "null", "1e999", "NixlConnector", "kv_both", "8", "lmcache", "$KV", "${KV:-{}}", "'", '"', "\\",
           "\udcff", "=", "c.yaml", "bad.yaml", "/nonexistent/c.yaml", "x" * 2000, '{"method": "eagle"}']
_CONFIGS = {"c.yaml": "kv-transfer-config: '{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_role\": \"kv_both\"}'\n",
            "bad.yaml": "kv-transfer-config: [\n"}


@st.composite
def command_lines(draw):
    """A command line a launcher may hand over: words or one shell string, an environment, a release."""
    words = draw(st.sampled_from(_STARTS)) + draw(st.lists(st.sampled_from(_OPTIONS + _VALUES), max_size=10))
    argv = draw(st.sampled_from([words, " ".join(words), " ".join(shlex.quote(w) for w in words)]))
    env = draw(st.sampled_from([None, {"KV": _VALUES[0]}, {"KV": "{"}, {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}]))
    return argv, env, draw(st.sampled_from([None, "0.33.0", "0.9.0", "0.20.0", "v0.14.1", "x"]))


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(command_lines())
def test_any_command_line_is_decided_or_refused_with_located_problems(tmp_path, line):
    argv, env, release = line
    for name, text in _CONFIGS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    try:
        decision = hma_policy.decide_command(argv, env=env, vllm_version=release, cwd=tmp_path)
    except hma_policy.InputError as exc:
        assert exc.problems, line
        for problem in exc.problems:
            assert CODE.fullmatch(problem.code), (line, problem)
            assert problem.path == "" or problem.path.startswith("/"), (line, problem)
            assert problem.message and "\n" not in problem.message, (line, problem)
        return
    assert [e.message for e in DECISION_VALIDATOR.iter_errors(decision.to_dict())] == [], line
    json.dumps(decision.to_dict(), allow_nan=False)


# ---------------------------------------------------------------------------
# The same triggers in rule files, through load_policy and --rules
# ---------------------------------------------------------------------------


def bundled_rules(folder: Path) -> Path:
    """The installed package's bundled rules of the default release, as a
    plain rules folder (what `hma-policy rules init` writes)."""
    return copy_rules(folder)


def _edit_yaml(folder: Path, name: str, edit) -> None:
    path = folder / name
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**9), encoding="utf-8")


def _first_rule(data):
    return data["steps"][0]["rules"][0]


RULE_TRIGGERS = {
    "when-float-exponent": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"depth": 1e-05})),
    "when-float-big": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"depth": 1e16})),
    "when-nan": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"depth": math.nan})),
    "when-infinity": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"depth": math.inf})),
    "default-float": ("decision.yaml", lambda d: d["steps"][0].update({"default": 1e-05})),
    "value-nan": ("decision.yaml", lambda d: _first_rule(d).update({"value": math.nan})),
    "when-300-keys": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({f"fact{i}": True for i in range(300)})),
    "registry-300-extra-keys": ("connectors.yaml", lambda d: d["connectors"]["NixlConnector"].update(many_keys(300))),
    "in-600-alternatives": ("decision.yaml", lambda d: _first_rule(d)["when"].update(
        {"top_name": {"in": [f"Name{i}" for i in range(600)]}})),
    "not-in-600-alternatives": ("decision.yaml", lambda d: _first_rule(d)["when"].update(
        {"top_name": {"not_in": [f"Name{i}" for i in range(600)]}})),
    "when-string-3mib": ("decision.yaml", lambda d: _first_rule(d)["when"].update({"top_name": "x" * (3 * MIB)})),
    "when-int-2**70": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"depth": 2**70})),
    "when-gt-2**64": ("nodes.yaml", lambda d: _first_rule(d)["when"].update({"children": {"gt": 2**64}})),
    "value-int-2**64": ("decision.yaml", lambda d: _first_rule(d).update({"value": 2**64})),
    "when-nul": ("decision.yaml", lambda d: _first_rule(d)["when"].update({"top_name": "Nixl\x00Connector"})),
    "message-nul": ("nodes.yaml", lambda d: _first_rule(d)["error"].update({"message": "a\x00b"})),
    "id-nul": ("nodes.yaml", lambda d: _first_rule(d).update({"id": "node.a\x00b"})),
    "registry-name-nul": ("connectors.yaml", lambda d: d["connectors"].update({"Evil\x00Connector": {"supports_hma": True}})),
    "when-nfd": ("decision.yaml", lambda d: _first_rule(d)["when"].update({"top_name": "Nixl\u0301Connector"})),
    "registry-name-nfd": ("connectors.yaml", lambda d: d["connectors"].update({"Caf\u0065\u0301": {"supports_hma": True}})),
    "message-escape": ("nodes.yaml", lambda d: _first_rule(d)["error"].update({"message": "\x1b[2J\rFORGED"})),
}
RAW_RULE_TRIGGERS = {
    "note-17mib": ("connectors.yaml", "\n# " + "x" * (17 * MIB) + "\n"),
    "deep-nesting-10000": ("decision.yaml", "\nextra: " + "[" * 10_000 + "]" * 10_000 + "\n"),
    "raw-nul": ("decision.yaml", "\n# \x00\n"),
    "python-tag": ("decision.yaml", "\nextra: !!python/object/apply:os.system ['true']\n"),
    "alias": ("decision.yaml", "\nx: &a 1\ny: *a\n"),
    "bad-utf8": ("decision.yaml", "\n# \udcff\n"),
}


def _rule_folders(base: Path) -> dict[str, Path]:
    folders = {}
    for name, (file, edit) in RULE_TRIGGERS.items():
        folder = bundled_rules(base / name)
        _edit_yaml(folder, file, edit)
        folders[name] = folder
    for name, (file, text) in RAW_RULE_TRIGGERS.items():
        folder = bundled_rules(base / name)
        with (folder / file).open("ab") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
        folders[name] = folder
    return folders


@pytest.fixture(scope="module")
def rule_folders(tmp_path_factory):
    return _rule_folders(tmp_path_factory.mktemp("rules"))


def test_rule_file_triggers_through_load_policy(rule_folders):
    for name, folder in rule_folders.items():
        try:
            loaded = hma_policy.load_policy(folder)
        except hma_policy.PolicyError as exc:
            assert exc.problems, name
            for problem in exc.problems:
                assert CODE.fullmatch(problem.code), (name, problem)
            continue
        try:
            for doc in ({"kv_transfer_config": C()}, {"kv_transfer_config": {"kv_role": "kv_both"}},
                        {"kv_transfer_config": C("Evil")}, {"kv_transfer_config": C("Nixl")}):
                decide_totally(loaded, doc)
        finally:
            loaded.close()


def test_rule_file_triggers_through_the_cli(rule_folders, tmp_path):
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps({"kv_transfer_config": C()}), encoding="utf-8")

    def one(item):
        name, folder = item
        return name, run_cli("decide", str(doc), "--rules", str(folder)), run_cli("rules", "check", str(folder))

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, rule_folders.items()))
    for name, decided, checked in results:
        assert_clean_exit(decided, f"decide --rules {name}")
        assert_clean_exit(checked, f"rules check {name}")
        # A problem in a rule file is reported as one, located: never as a fault of the engine.
        assert b"engine.fault" not in checked.stdout + checked.stderr, (name, checked.stderr[-500:])


def test_a_registry_as_large_as_the_schema_allows_loads_or_is_refused(tmp_path):
    # rules.schema.json admits 2,000 registry entries; each becomes a rule
    # testing `name` for equality in one step, and durable-rules hangs
    # defining more than 512 equality alternatives on one property. Loading
    # must end (a policy or a PolicyError), so it runs in a child with a timeout.
    folder = bundled_rules(tmp_path / "rules")
    _edit_yaml(folder, "connectors.yaml", lambda d: d["connectors"].update(
        {f"Bulk{i}Connector": {"supports_hma": i % 2 == 0} for i in range(2000 - len(d["connectors"]))}))
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps({"kv_transfer_config": C("Bulk1980Connector")}), encoding="utf-8")
    try:
        result = subprocess.run([sys.executable, "-m", "hma_policy", "decide", str(doc), "--rules", str(folder)],
                                capture_output=True, timeout=30, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("loading a 2,000-entry registry did not finish in 30 s (durable-rules hangs past 512 names)")
    assert_clean_exit(result, "2000-entry registry")
    if result.returncode == 0:
        assert b"enabled" in result.stdout


def test_rule_messages_cannot_forge_cli_output(rule_folders, tmp_path):
    # An untrusted rule file's message must not reach the terminal raw (SECURITY.md).
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps({"kv_transfer_config": {"kv_role": "kv_both"}}), encoding="utf-8")
    result = run_cli("decide", str(doc), "--rules", str(rule_folders["message-escape"]))
    assert_clean_exit(result, "message-escape")
    out = result.stdout.decode()
    assert "\x1b" not in out and "\r" not in out


def test_rule_values_are_compared_exactly_not_as_c_strings(tmp_path):
    # durable-rules compares UTF-8 bytes; a NUL or a combining accent in a
    # rule value must not make the runtime match a different name than the
    # rule semantics do (the engine checks rule files before compiling them).
    folder = bundled_rules(tmp_path / "rules")
    _edit_yaml(folder, "decision.yaml", lambda d: d["steps"][0]["rules"].insert(0, {
        "id": "hisparse.nfd", "when": {"top_name": "Nixl\u0301Connector"}, "value": True}))
    try:
        loaded = hma_policy.load_policy(folder)
    except hma_policy.PolicyError:
        return  # refusing the rule file is an answer too
    try:
        d = loaded.decide({"kv_transfer_config": C("NixlConnector"), "platform": {"is_cuda": False}})
        assert d.outcome == "enabled", "an NFD rule value matched the NFC connector name"
    finally:
        loaded.close()


def test_copying_the_bundled_rules_is_a_valid_policy(tmp_path):
    folder = bundled_rules(tmp_path / "rules")
    loaded, bundled = hma_policy.load_policy(folder), hma_policy.load_policy(None)
    try:
        # The same rules (another digest: the copy's schema headers differ).
        def rules_of(policy):
            return {ruleset: [(step.name, [rule.id for rule in step.rules]) for step in steps]
                    for ruleset, steps in policy.model.steps.items()}
        assert rules_of(loaded) == rules_of(bundled)
        assert loaded.model.registered_names == bundled.model.registered_names
    finally:
        loaded.close()
        bundled.close()
    shutil.rmtree(folder)
