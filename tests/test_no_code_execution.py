"""Nothing named in a document or a rule file is ever imported or executed.

``kv_connector_module_path`` and ``kv_connector`` are data (README; SECURITY.md).
A canary package on sys.path records any import of itself; Python's audit
hooks (PEP 578) record every import, exec/compile, process, socket and
ctypes event raised while documents naming it are decided. YAML tags that
would build Python objects are refused. Through the CLI the same holds for
``decide``, ``explain``, ``validate``, ``rules check`` and ``--rules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import hma_policy

from rulecopy import copy_rules
from hma_policy.isolation import IsolatedPolicy

ROOT = Path(__file__).resolve().parent.parent
CANARY = f"hma_canary_{uuid.uuid4().hex[:12]}"
FORBIDDEN_EVENTS = ("exec", "compile", "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.fork",
                    "socket.connect", "socket.getaddrinfo", "ctypes.dlopen", "urllib.Request", "pickle.find_class",
                    "marshal.loads", "builtins.input")

_recording = False
_events: list[tuple[str, str]] = []


def _hook(event: str, args: tuple) -> None:
    # Audit hooks cannot be removed: this one records only while a test asks.
    if not _recording:
        return
    if event == "import":
        _events.append((event, str(args[0])))
    elif event.startswith(FORBIDDEN_EVENTS) or event == "open" and CANARY in str(args[0]):
        _events.append((event, str(args[0])[:200]))


sys.addaudithook(_hook)


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    """A package that, if ever imported, writes a marker file and defines connector classes."""
    root = tmp_path_factory.mktemp("canary")
    marker = root / "IMPORTED"
    package = root / CANARY
    package.mkdir()
    body = (f"open({str(marker)!r}, 'w').write('imported')\n"
            "class CanaryConnector:\n    pass\nclass MultiConnector:\n    pass\n")
    (package / "__init__.py").write_text(body, encoding="utf-8")
    (package / "connector.py").write_text(body, encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        yield root, marker
    finally:
        sys.path.remove(str(root))


def _documents():
    C = lambda name, module: {"kv_connector": name, "kv_role": "kv_both", "kv_connector_module_path": module}
    yield {"kv_transfer_config": C("CanaryConnector", CANARY)}
    yield {"kv_transfer_config": C("CanaryConnector", f"{CANARY}.connector")}
    yield {"kv_transfer_config": C("MultiConnector", CANARY) | {"kv_connector_extra_config": {"connectors": [
        C("CanaryConnector", f"{CANARY}.connector"), C("os", "os")]}}}
    yield {"kv_transfer_config": C("system", "os"), "disable_hybrid_kv_cache_manager": False}
    yield {"kv_transfer_config": C("Popen", "subprocess"), "disable_hybrid_kv_cache_manager": True}
    yield {"kv_transfer_config": C("CanaryConnector", f"{CANARY}.connector"), "kv_offloading_size": 1}
    yield {"kv_transfer_config": {"kv_connector": f"{CANARY}.connector.CanaryConnector", "kv_role": "kv_both"}}
    yield {"kv-transfer-config": json.dumps(C("CanaryConnector", CANARY))}
    yield {"$schema": f"http://127.0.0.1:9/{CANARY}.json", "kv_transfer_config": None}
    yield {"speculative_config": {"method": f"{CANARY}:main"}, "model": {"attention_chunk_size": 8}}
    yield {"env": {"PYTHONSTARTUP": f"/tmp/{CANARY}.py", "VLLM_PLUGINS": CANARY}}


def _record(action):
    global _recording
    _events.clear()
    _recording = True
    try:
        action()
    finally:
        _recording = False
    return list(_events)


def test_deciding_documents_that_name_modules_imports_and_runs_nothing(canary):
    root, marker = canary
    policy = hma_policy.load_policy(None)
    try:
        for doc in _documents():
            policy.decide(doc)  # warm every lazy import first
        events = _record(lambda: [policy.decide(doc) for doc in _documents()]
                         + [policy.supports_hma(doc.get("kv_transfer_config")) for doc in list(_documents())[:2]])
    finally:
        policy.close()
    assert not marker.exists()
    assert CANARY not in sys.modules and f"{CANARY}.connector" not in sys.modules
    assert [e for e in events if CANARY in e[1] or e[0] != "import"] == []
    # Nothing is imported at all once warm: no module named by data could slip through.
    assert [e for e in events if e[0] == "import"] == []


def test_the_undeclared_canary_is_undetermined_not_imported(canary):
    root, marker = canary
    d = hma_policy.decide({"kv_transfer_config": {"kv_connector": "CanaryConnector", "kv_role": "kv_both",
                                                  "kv_connector_module_path": CANARY}})
    assert d.outcome == "undetermined"
    assert [w.code for w in d.warnings] == ["connector.capability_unknown"]
    assert not marker.exists()


def test_a_rule_file_naming_the_canary_is_data(canary, tmp_path):
    root, marker = canary
    from importlib import resources
    rules = copy_rules(tmp_path / "rules")
    with (rules / "connectors.yaml").open("a", encoding="utf-8") as handle:
        handle.write(f"  CanaryConnector:\n    registered: false\n    supports_hma: true\n    module_path: {CANARY}.connector\n")
    (rules / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n", encoding="utf-8")
    (rules / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n", encoding="utf-8")
    def decide():
        policy = hma_policy.load_policy(rules)
        try:
            d = policy.decide({"kv_transfer_config": {"kv_connector": "CanaryConnector", "kv_role": "kv_both",
                                                      "kv_connector_module_path": f"{CANARY}.connector"}})
            assert (d.outcome, d.hma_enabled) == ("enabled", True)
        finally:
            policy.close()
    events = _record(decide)
    assert not marker.exists()
    assert [e for e in events if CANARY in e[1] or e[0] != "import"] == []


YAML_ATTACKS = [
    "kv_transfer_config: !!python/object/apply:os.system ['touch {marker}']\n",
    "kv_transfer_config: !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n",
    "kv_transfer_config: !!python/name:os.system\n",
    "kv_transfer_config: !!python/module:{canary}\n",
    "!!python/object:{canary}.CanaryConnector {{}}\n",
    "kv_transfer_config: {{kv_connector: !!binary aGVsbG8=, kv_role: kv_both}}\n",
]


@pytest.mark.parametrize("attack", YAML_ATTACKS)
def test_yaml_tags_never_build_python_objects(canary, attack):
    root, marker = canary
    text = attack.format(marker=marker, canary=CANARY)
    with pytest.raises(hma_policy.InputError) as info:
        from hma_policy.core.input import parse_text
        hma_policy.decide(parse_text(text, source="attack.yaml", fmt="yaml"))
    assert info.value.problems[0].code in ("input.parse", "input.type", "input.schema")
    assert not marker.exists()
    assert CANARY not in sys.modules


def test_cli_commands_never_import_named_modules(canary, tmp_path):
    root, marker = canary
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(next(_documents())), encoding="utf-8")
    attack = tmp_path / "attack.yaml"
    attack.write_text(YAML_ATTACKS[0].format(marker=marker, canary=CANARY), encoding="utf-8")
    env_path = f"{root}"
    for args in (["decide", str(doc)], ["explain", str(doc)], ["validate", str(doc)], ["decide", str(attack)],
                 ["validate", str(attack)]):
        result = subprocess.run([sys.executable, "-m", "hma_policy", *args], capture_output=True, timeout=120,
                                cwd=root, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
        assert result.returncode in (0, 1, 2), (args, result.stderr)
        assert b"Traceback" not in result.stderr
    assert not marker.exists()


def test_isolation_worker_never_imports_named_modules(canary):
    root, marker = canary
    with IsolatedPolicy() as policy:
        for doc in _documents():
            policy.decide(doc)
    assert not marker.exists()
