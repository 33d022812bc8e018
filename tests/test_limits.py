"""Input limits: each bound of hma_policy.Limits ends in InputError
``input.limit`` at the JSON Pointer of the offending element, just past the
bound, and is not hit just below it; at the default bounds too, for the ones
that are cheap to reach. No limit ends in RecursionError, MemoryError or a
hang (engine/document.py walks documents iteratively before anything
recursive sees them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hma_policy
from hma_policy import Limits

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = Limits()


@pytest.fixture(scope="module")
def policy():
    p = hma_policy.load_policy(None)
    yield p
    p.close()


def C(name="NixlConnector", **extra):
    return {"kv_connector": name, "kv_role": "kv_both", **extra}


def M(*children):
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": list(children)}}


def limit_problem(policy, doc, limits=DEFAULTS):
    with pytest.raises(hma_policy.InputError) as info:
        policy.decide(doc, limits=limits)
    problems = info.value.problems
    assert [p.code for p in problems] == ["input.limit"], problems
    return problems[0]


def nested_metadata(depth):
    """A document whose deepest value sits ``depth`` levels below the document."""
    value = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return {"metadata": value}


def test_documented_defaults():
    # README/docs/decision.md: 64 MiB, nesting depth 96, 2,000,000 values,
    # a 16 MiB string, 10,000 connectors.
    assert (DEFAULTS.max_bytes, DEFAULTS.max_depth, DEFAULTS.max_values, DEFAULTS.max_string_length,
            DEFAULTS.max_connectors) == (64 * 1024 * 1024, 96, 2_000_000, 16 * 1024 * 1024, 10_000)


def test_depth_bound(policy):
    policy.decide(nested_metadata(DEFAULTS.max_depth))
    problem = limit_problem(policy, nested_metadata(DEFAULTS.max_depth + 1))
    assert problem.path == "/metadata" + "/a" * DEFAULTS.max_depth  # the first value past the bound


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_very_deep_documents_are_refused_without_recursion(policy, depth):
    value: object = 1
    for _ in range(depth):
        value = [value]
    problem = limit_problem(policy, {"metadata": value})
    assert problem.path.startswith("/metadata/0/0")


def test_depth_bound_is_configurable(policy):
    small = Limits(max_depth=5)
    policy.decide(nested_metadata(5), limits=small)
    assert limit_problem(policy, nested_metadata(6), small).path == "/metadata/a/a/a/a/a"


def test_string_bound(policy):
    small = Limits(max_string_length=100)
    policy.decide({"metadata": {"x": "x" * 100}}, limits=small)
    assert limit_problem(policy, {"metadata": {"x": "x" * 101}}, small).path == "/metadata/x"
    # Connector names have their own, smaller schema bound (1,024): input.schema, not a limit.
    with pytest.raises(hma_policy.InputError) as info:
        policy.decide({"kv_transfer_config": C("N" * 1025)})
    assert info.value.problems[0].code == "input.schema"


def test_string_bound_at_the_default(policy):
    big = DEFAULTS.max_string_length
    policy.decide({"metadata": {"x": "x" * big}})
    assert limit_problem(policy, {"metadata": {"x": "x" * (big + 1)}}).path == "/metadata/x"


def test_values_bound(policy):
    small = Limits(max_values=50)
    policy.decide({"metadata": {"x": list(range(40))}}, limits=small)
    problem = limit_problem(policy, {"metadata": {"x": list(range(60))}}, small)
    assert problem.path == ""


def test_values_bound_at_the_default(policy):
    many = [0] * DEFAULTS.max_values
    assert limit_problem(policy, {"metadata": {"x": many}}).code == "input.limit"


def test_connector_bound(policy):
    small = Limits(max_connectors=10)
    assert policy.decide({"kv_transfer_config": M(*[C() for _ in range(9)])}, limits=small).outcome == "enabled"
    problem = limit_problem(policy, {"kv_transfer_config": M(*[C() for _ in range(10)])}, small)
    assert problem.path == "/kv_transfer_config"


def test_connector_bound_at_the_default(policy):
    n = DEFAULTS.max_connectors
    wide = {"kv_transfer_config": M(*[C() for _ in range(n - 1)])}
    assert policy.decide(wide).outcome == "enabled"
    nested = {"kv_transfer_config": M(*[M(*[C() for _ in range(99)]) for _ in range(102)])}
    assert limit_problem(policy, nested).path == "/kv_transfer_config"


def test_connector_bound_counts_nested_json_strings(policy):
    # A kv_transfer_config given as a JSON string is expanded, then bounded.
    small = Limits(max_connectors=10)
    doc = {"kv-transfer-config": json.dumps(M(*[C() for _ in range(20)]))}
    assert limit_problem(policy, doc, small).code == "input.limit"


def test_integer_bits(policy):
    policy.decide({"metadata": {"x": 2**1023}})
    assert limit_problem(policy, {"metadata": {"x": 2**1024}}).path == "/metadata/x"
    assert limit_problem(policy, {"metadata": {"x": -(2**1100)}}).path == "/metadata/x"


def test_integers_beyond_a_fields_range_are_schema_errors(policy):
    with pytest.raises(hma_policy.InputError) as info:
        policy.decide({"kv_transfer_config": C(kv_port=2**63)})
    assert [(p.code, p.path) for p in info.value.problems] == [("input.schema", "/kv_transfer_config/kv_port")]


def test_json_string_fields_are_bounded(policy):
    small = Limits(max_bytes=1000)
    doc = {"kv_transfer_config": json.dumps(C(engine_id="e" * 2000))}
    assert limit_problem(policy, doc, small).path == "/kv_transfer_config"


def test_json_string_fields_nested_too_deeply(policy):
    doc = {"kv_transfer_config": "[" * 100_000 + "]" * 100_000}
    problem = limit_problem(policy, doc)
    assert problem.path == "/kv_transfer_config"


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "hma_policy", *args], input=stdin, capture_output=True,
                          timeout=120, cwd=ROOT)


def test_file_size_bound_through_the_cli(tmp_path):
    path = tmp_path / "big.json"
    with path.open("wb") as handle:
        handle.write(b'{"metadata": {"x": "')
        handle.write(b"x" * DEFAULTS.max_bytes)
        handle.write(b'"}}')
    result = run_cli("decide", str(path), "--format", "json")
    assert result.returncode == 2, result.stderr
    decision = json.loads(result.stdout)
    assert [(e["code"], e["stage"], e["path"]) for e in decision["errors"]] == [("input.limit", "input", "")]


def test_stdin_size_bound_through_the_cli():
    result = run_cli("decide", "-", "--format", "json", stdin=b" " * (DEFAULTS.max_bytes + 1))
    assert result.returncode == 2
    assert json.loads(result.stdout)["errors"][0]["code"] == "input.limit"


@pytest.mark.parametrize("text, what", [
    (b"[" * 200_000, "JSON"),
    (b"metadata: " + b"[" * 200_000, "YAML flow"),
    (b'{"kv_offloading_size": ' + b"9" * 10_000 + b"}", "JSON digits"),
    (b"kv_offloading_size: " + b"9" * 10_000, "YAML digits"),
])
def test_parser_bounds_through_the_cli(tmp_path, text, what):
    path = tmp_path / ("doc.json" if what.startswith("JSON") else "doc.yaml")
    path.write_bytes(text)
    result = run_cli("decide", str(path), "--format", "json")
    assert result.returncode == 2, (what, result.stderr)
    assert b"Traceback" not in result.stderr
    assert json.loads(result.stdout)["errors"][0]["code"] == "input.limit", what


# -- the fast walk against a plain statement of the limits --------------------------------------

def _breaches(document, limits):
    """The kinds of limit a value breaks, and whether it is plain JSON (dicts
    and lists only): the limits written as a plain recursive walk."""
    from collections.abc import Mapping

    kinds, state = set(), {"plain": True, "count": 0}

    def walk(value, depth):
        state["count"] += 1
        kind = type(value)
        if kind in (list, tuple) or isinstance(value, Mapping):
            state["plain"] &= kind in (dict, list)
            if depth >= limits.max_depth and value:
                kinds.add("depth")
            if isinstance(value, Mapping):
                kinds.update("key" for key in value if type(key) is not str)
            for item in (value.values() if isinstance(value, Mapping) else value):
                walk(item, depth + 1)
        elif kind is str:
            if len(value) > limits.max_string_length:
                kinds.add("string")
        elif value is None or kind in (bool, float):
            pass
        elif isinstance(value, int):
            if value.bit_length() > 1024:
                kinds.add("int")
        else:
            kinds.add("type")

    walk(document, 0)
    if state["count"] > limits.max_values:
        kinds.add("values")
    return kinds, state["plain"]


_KIND_OF = {"nested deeper": "depth", "string is longer": "string", "integer is too large": "int",
            "holds more than": "values", "object keys must be strings": "key", "are not JSON data": "type"}


def _values():
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers(-10, 10) | st.text(max_size=6)
               | st.just(2**1100) | st.just(frozenset()) | st.just(object()))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                        | st.dictionaries(st.text(max_size=2) | st.integers(0, 3), inner, max_size=4), max_leaves=25)


def test_the_fast_walk_finds_exactly_the_breaches_of_the_plain_walk():
    # engine/document.py checks every value of every document in one fast
    # walk that keeps no paths; whatever it raises must be a breach the plain
    # statement finds, and it must raise whenever there is one.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from hma_policy.core.bounds import bounded
    from hma_policy.core.errors import InputError

    @settings(max_examples=400, deadline=None)
    @given(_values(), st.integers(1, 4), st.integers(1, 6), st.integers(2, 30))
    def check(document, depth, string, values):
        limits = Limits(max_depth=depth, max_string_length=string, max_values=values)
        kinds, plain = _breaches(document, limits)
        try:
            answer, count = bounded(document, limits)
        except InputError as exc:
            message = exc.problems[0].message
            found = [kind for text, kind in _KIND_OF.items() if text in message]
            assert len(found) == 1 and found[0] in kinds, (message, kinds)
        else:
            assert not kinds and count == state_count(document)
            assert _exact(answer) and json.dumps(answer) == json.dumps(document)
            if isinstance(document, (dict, list)):  # (a compiled build boxes a float again)
                assert (answer is document) == plain  # a plain document is not copied

    def _exact(value):
        """Plain JSON all through: dicts with str keys, lists, and exact scalars."""
        if type(value) is dict:
            return all(type(k) is str for k in value) and all(_exact(v) for v in value.values())
        if type(value) is list:
            return all(_exact(v) for v in value)
        return value is None or type(value) in (str, int, float, bool)

    def state_count(document):
        from collections.abc import Mapping
        stack, total = [document], 0
        while stack:
            value = stack.pop()
            total += 1
            if type(value) in (list, tuple) or isinstance(value, Mapping):
                stack.extend(value.values() if isinstance(value, Mapping) else value)
        return total

    check()
