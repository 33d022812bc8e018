#!/usr/bin/env python3
"""Record conformance cases for one vLLM release by running that release's own code on the CPU.

    python3 tools/vllm_conformance.py 0.22.0 [--wheel PATH] [--venv DIR] [--cases N] [--seed S] [-o DIR]

Makes (or reuses) a scratch virtual environment with a CPU torch, the
release's pure-Python requirements and the wheel (``--no-deps``), then runs
each case's deployment document through the release's config classes,
connector factory and MultiConnector in a child process
(tools/_vllm_child.py), and writes ``tests/conformance/<release>/cases.json``
and ``PROVENANCE.md``. Every ``expect`` is what the release did; nothing here
knows what any release decides. See tools/README.md.

Exit status: 0 recorded; 2 usage (a bad release string, a missing wheel);
3 the environment could not be made; 4 the release's code could not be run
(an import failure, a case the runner could not map).
"""

from __future__ import annotations

import argparse
import collections
import copy
import datetime
import glob
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _venv  # noqa: E402

RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?((rc|a|b)[0-9]+|\.post[0-9]+)?$")
DEFAULT_WHEELS = Path("/work/wheels")
DEFAULT_VENVS = Path("/work/conformance-venvs")
TORCH = "2.13.0"
V1 = "vllm.distributed.kv_transfer.kv_connector.v1."
# Variables a release reads when a module is imported: a process per value.
IMPORT_TIME_ENV = ("LMCACHE_USE_UPSTREAM_MP",)
INT_SWITCHES = ("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "VLLM_USE_SIMPLE_KV_OFFLOAD")
INT_RE = re.compile(r"^\s*[+-]?[0-9]{1,18}\s*$")


class Fail(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ documents
def _strategies():
    """tests/strategies.py (random deployment documents); hypothesis is only needed for its hypothesis half."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        stub = types.ModuleType("hypothesis")
        stub.strategies = types.SimpleNamespace(composite=lambda f: f)
        sys.modules["hypothesis"] = stub
        sys.modules["hypothesis.strategies"] = stub.strategies
    tests = ROOT / "tests"
    sys.path.insert(0, str(tests))
    try:
        import strategies
    finally:
        sys.path.remove(str(tests))
    return strategies


def normalise(doc: dict, kebab_back: dict) -> dict | None:
    """vLLM's spellings: kebab-case keys and a kv_transfer_config given as JSON text. None if ambiguous."""
    out: dict = {}
    for key, value in doc.items():
        name = kebab_back.get(key, key)
        if name in out:
            return None
        out[name] = value
    if isinstance(out.get("kv_transfer_config"), str):
        try:
            out["kv_transfer_config"] = json.loads(out["kv_transfer_config"])
        except ValueError:
            return None
    return out


def child_env_strings(env: dict) -> dict | None:
    """The document's env as the strings a process would see (None: an integer switch that is not an integer)."""
    out = {}
    for key, value in (env or {}).items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        value = str(value)
        if key in INT_SWITCHES and not INT_RE.match(value):
            return None
        out[key] = value
    return out


def _ktc(name=None, role="kv_both", **extra):
    node = {}
    if name is not None:
        node["kv_connector"] = name
    if role is not None:
        node["kv_role"] = role
    node.update(extra)
    return node


def _multi(children, **extra):
    return _ktc("MultiConnector", kv_connector_extra_config={"connectors": children}, **extra)


PREFS = (("auto", None), ("enable", False), ("disable", True))

# A case id is the same document in every release, so that a reader can put
# the releases side by side. The curated graphs therefore name connectors that
# every release from 0.9.1 to 0.33.0 registers: NixlConnector (SupportsHMA
# from 0.18.0) where an HMA-capable connector belongs, LMCacheConnectorV1
# (never SupportsHMA) where one without HMA support belongs.
SUPPORTED = "NixlConnector"
UNSUPPORTED = "LMCacheConnectorV1"
# Every name a recorded release (0.9.1 ... 0.33.0) registers: each gets its
# single-NAME cases in every release, an unknown connector where it is not
# registered (renames and removals show as such).
EVER_REGISTERED = (
    "DecodeBenchConnector", "ExampleConnector", "ExampleHiddenStatesConnector", "FlexKVConnectorV1",
    "HF3FSKVConnector", "HiSparseConnector", "LMCacheConnector", "LMCacheConnectorV1", "LMCacheMPConnector",
    "MoRIIOConnector", "MooncakeConnector", "MooncakeStoreConnector", "MultiConnector", "NixlConnector",
    "NixlPullConnector", "NixlPushConnector", "OffloadingConnector", "P2pNcclConnector", "PyNcclConnector",
    "SharedStorageConnector", "SimpleCPUOffloadConnector",
)


def curated_cases(info: dict) -> list[tuple[str, str, dict]]:
    """The case kinds of the shared conformance set; each id is the same document in every release."""
    names = info["registered"]
    hma = info["supports_hma"]
    yes, no = SUPPORTED, UNSUPPORTED
    cases: list[tuple[str, str, dict]] = []
    note = ""
    if hma.get(yes) is not True:
        note += f" ({yes} standing in for an HMA-capable connector: it is not one in this release)"
    if hma.get(no) is not False:
        note += f" ({no} standing in for a connector without HMA support: here it is {hma.get(no, 'not registered')})"

    def add(case_id, description, doc):
        text = json.dumps(doc)
        if note and (yes in text or no in text):
            description += note
        cases.append((case_id, description, doc))

    for label, pref in PREFS:
        add(f"none-{label}", f"no connector, preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref})
    for name in EVER_REGISTERED + tuple(n for n in names if n not in EVER_REGISTERED):
        where = "" if name in names else " (not registered in this release)"
        for label, pref in PREFS:
            node = _ktc(name)
            if name == "MultiConnector":
                node = _multi([_ktc(yes)])
            add(f"single-{name}-{label}", f"{name} alone{where}, preference {label}",
                {"kv_transfer_config": node, "disable_hybrid_kv_cache_manager": pref})
    for name in ("NoSuchConnector", "multiconnector"):
        for label, pref in PREFS:
            add(f"unknown-{name}-{label}", f"unregistered name {name}, preference {label}",
                {"kv_transfer_config": _ktc(name), "disable_hybrid_kv_cache_manager": pref})
    paths = (
        ("vllm-example", "ExampleConnector", V1 + "example_connector"),
        ("vllm-nixl", "NixlConnector", V1 + "nixl_connector"),
        ("vllm-nixl-pkg", "NixlConnector", V1 + "nixl"),
        ("vllm-multi", "MultiConnector", V1 + "multi_connector"),
        ("missing-module", "AcmeConnector", "acme.kv.connector"),
        ("missing-class", "NoSuchConnector", V1 + "example_connector"),
        ("empty", "NixlConnector", ""),
    )
    for label_path, name, path in paths:
        for label, pref in PREFS:
            node = _ktc(name, kv_connector_module_path=path)
            if name == "MultiConnector":
                node["kv_connector_extra_config"] = {"connectors": [_ktc(no)]}
            add(f"module-path-{label_path}-{label}", f"{name} from module path {path!r}, preference {label}",
                {"kv_transfer_config": node, "disable_hybrid_kv_cache_manager": pref})
    graphs = (
        ("all-supported", [_ktc(yes, "kv_consumer"), _ktc(yes)]),
        ("mixed", [_ktc(yes), _ktc(no)]),
        ("unsupported-first", [_ktc(no), _ktc(yes)]),
        ("empty-list", []),
        ("nested-unsupported", [_multi([_ktc(yes), _ktc(no)]), _ktc(yes)]),
        ("nested-supported", [_multi([_ktc(yes), _ktc(yes)]), _ktc(yes)]),
        ("nested-empty", [_multi([]), _ktc(yes)]),
        ("deep-unsupported", [_multi([_multi([_ktc(no)])])]),
        ("child-engine-id", [_ktc(yes, engine_id="child-engine"), _ktc(yes)]),
        ("unknown-child", [_ktc(yes), _ktc("NoSuchConnector")]),
        ("unknown-child-after-unsupported", [_ktc(no), _ktc("NoSuchConnector")]),
    )
    for label_graph, children in graphs:
        for label, pref in PREFS:
            add(f"multi-{label_graph}-{label}", f"MultiConnector {label_graph}, preference {label}",
                {"kv_transfer_config": _multi(copy.deepcopy(children)), "disable_hybrid_kv_cache_manager": pref})
    for label, pref in PREFS:
        add(f"multi-missing-key-{label}", f"MultiConnector without a connectors key, preference {label}",
            {"kv_transfer_config": _ktc("MultiConnector", kv_connector_extra_config={}),
             "disable_hybrid_kv_cache_manager": pref})
        add(f"multi-no-extra-{label}", f"MultiConnector without kv_connector_extra_config, preference {label}",
            {"kv_transfer_config": _ktc("MultiConnector"), "disable_hybrid_kv_cache_manager": pref})
        add(f"multi-parent-engine-id-{label}", f"children inherit the parent's engine_id, preference {label}",
            {"kv_transfer_config": _multi([_ktc(yes), _ktc(yes)], engine_id="parent-engine"),
             "disable_hybrid_kv_cache_manager": pref})
        for conn_label, node in (("none", None), ("supported", _ktc(yes)), ("unsupported", _ktc(no))):
            add(f"platform-unsupported-{conn_label}-{label}",
                f"platform without hybrid KV cache support, connector {conn_label}, preference {label}",
                {"kv_transfer_config": node, "disable_hybrid_kv_cache_manager": pref,
                 "platform": {"supports_hybrid_kv_cache": False}})
        for env_label, env in (("default-env", None), ("env0", {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0"})):
            for spec_label, spec in (("", None), ("-eagle", {"method": "eagle"}), ("-ngram", {"method": "ngram"})):
                doc = {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
                       "model": {"attention_chunk_size": 8192, "layer_kinds": ["full_attention", "chunked_local"]}}
                if env:
                    doc["env"] = dict(env)
                if spec:
                    doc["speculative_config"] = dict(spec)
                add(f"chunked-local-{env_label}{spec_label}-{label}",
                    f"chunked local attention, {env_label}{spec_label or ''}, preference {label}", doc)
        for kinds_label, kinds in (("swa", ["full_attention", "sliding_window"]), ("mamba", ["full_attention", "mamba"]),
                                   ("swa-only", ["sliding_window"]), ("mamba-swa", ["sliding_window", "mamba"])):
            for conn_label, node in (("none", None), ("unsupported", _ktc(no)), ("supported", _ktc(yes))):
                add(f"layers-{kinds_label}-{conn_label}-{label}",
                    f"model layers {kinds}, connector {conn_label}, preference {label}",
                    {"kv_transfer_config": node, "disable_hybrid_kv_cache_manager": pref,
                     "model": {"layer_kinds": list(kinds)}})
        add(f"kv-events-{label}", f"kv events enabled, no connector, preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"}})
        add(f"kv-events-connector-{label}", f"kv events enabled with {yes}, preference {label}",
            {"kv_transfer_config": _ktc(yes), "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"}})
        # Until 0.19.x a kv_events_config turned HMA off whether or not it
        # enables events: the releases ask only whether one is given.
        add(f"kv-events-off-{label}", f"a kv events config that does not enable events, no connector, preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": False}})
        add(f"kv-events-mamba-{label}", f"kv events enabled, model layers full attention and mamba, preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"},
             "model": {"layer_kinds": ["full_attention", "mamba"]}})
        add(f"kv-events-swa-{label}", f"kv events enabled, model layers full attention and sliding window, "
            f"preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"},
             "model": {"layer_kinds": ["full_attention", "sliding_window"]}})
        add(f"kv-events-multi-{label}", f"kv events enabled with a MultiConnector of two {yes}s, preference {label}",
            {"kv_transfer_config": _multi([_ktc(yes), _ktc(yes)]), "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"}})
        add(f"kv-events-platform-unsupported-{label}", f"kv events enabled on a platform without hybrid KV cache "
            f"support, preference {label}",
            {"kv_transfer_config": None, "disable_hybrid_kv_cache_manager": pref,
             "kv_events_config": {"enable_kv_cache_events": True, "publisher": "zmq"},
             "platform": {"supports_hybrid_kv_cache": False}})
        if "LMCacheMPConnector" in names:
            add(f"lmcache-mp-upstream-{label}", f"LMCacheMPConnector with LMCACHE_USE_UPSTREAM_MP=1, preference {label}",
                {"kv_transfer_config": _ktc("LMCacheMPConnector"), "disable_hybrid_kv_cache_manager": pref,
                 "env": {"LMCACHE_USE_UPSTREAM_MP": "1"}})
        if "HiSparseConnector" in names:
            for cuda in (True, False):
                add(f"hisparse-cuda-{str(cuda).lower()}-{label}", f"HiSparseConnector, is_cuda {cuda}, preference {label}",
                    {"kv_transfer_config": _ktc("HiSparseConnector", kv_connector_extra_config={"host_pool_gib": 1}),
                     "disable_hybrid_kv_cache_manager": pref, "platform": {"is_cuda": cuda}})
            add(f"hisparse-in-multi-{label}", f"HiSparseConnector beside {no} in a MultiConnector, preference {label}",
                {"kv_transfer_config": _multi([_ktc("HiSparseConnector"), _ktc(no)]),
                 "disable_hybrid_kv_cache_manager": pref})
        if info["cache_fields"]:
            for backend in ("native", "lmcache"):
                for conn_label, node in (("none", None), ("unsupported", _ktc(no, "kv_producer"))):
                    for env_label, env in (("", None), ("-simple", {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"})):
                        doc = {"kv_transfer_config": node, "disable_hybrid_kv_cache_manager": pref,
                               "kv_offloading_size": 2, "kv_offloading_backend": backend}
                        if env:
                            doc["env"] = dict(env)
                        add(f"offload-{backend}-{conn_label}{env_label}-{label}",
                            f"--kv-offloading-size 2 --kv-offloading-backend {backend}, connector {conn_label}"
                            f"{env_label}, preference {label}", doc)
    for label, doc in (
        ("missing-role", {"kv_transfer_config": {"kv_connector": yes}}),
        ("bad-role", {"kv_transfer_config": _ktc(yes, "both")}),
        ("unknown-field", {"kv_transfer_config": _ktc(yes, kv_buffer_devce="cuda")}),
        ("child-missing-role", {"kv_transfer_config": _multi([{"kv_connector": yes}])}),
        ("child-string", {"kv_transfer_config": _multi([yes])}),
        ("children-dict", {"kv_transfer_config": _ktc("MultiConnector", kv_connector_extra_config={"connectors": {"a": _ktc(yes)}})}),
        ("no-name-auto", {"kv_transfer_config": {"kv_role": "kv_both"}}),
        ("no-name-enable", {"kv_transfer_config": {"kv_role": "kv_consumer"}, "disable_hybrid_kv_cache_manager": False}),
    ):
        doc.setdefault("disable_hybrid_kv_cache_manager", None)
        add(f"invalid-{label}", f"invalid or incomplete connector config: {label}", doc)
    return cases


def _outside_module_paths(value) -> bool:
    """Does any node (a kv_transfer_config given as JSON text included) load a module from outside vLLM?"""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    if isinstance(value, dict):
        path = value.get("kv_connector_module_path")
        if isinstance(path, str) and path and not path.startswith("vllm."):
            return True
        return any(_outside_module_paths(v) for v in value.values())
    if isinstance(value, list):
        return any(_outside_module_paths(v) for v in value)
    return False


def random_cases(info: dict, count: int, own: int, seed: int, release: str) -> list[tuple[str, str, dict]]:
    """Random documents from tests/strategies.py: ``count`` shared by every release, ``own`` over this registry.

    The shared ones (``random-SEED-N``) draw connector names from the
    generator's own list (0.33.0's registry), so each id is the same document
    in every release; an option or a name a release lacks is what that
    release answers for it. The release's own (``random-RELEASE-SEED-N``)
    draw from its registry, without the options it lacks, so that an old
    release's graphs are not mostly unknown names.
    """
    strategies = _strategies()
    out = _draw(strategies, count, seed, f"random-{seed}", f"tests/strategies.py, seed {seed}", lambda doc: doc)
    if own:
        lacking = [k for k in ("kv_offloading_size", "kv_offloading_backend") if k not in info["cache_fields"]]
        if not info["has_hisparse"]:
            lacking.append("hisparse_config")

        def fit(doc):
            for key in lacking:
                doc.pop(key, None)
                doc.pop(strategies.KEBAB[key], None)
            return doc

        saved = strategies.REGISTERED_NAMES
        strategies.REGISTERED_NAMES = tuple(info["registered"])  # the generator reads the module's global
        try:
            out += _draw(strategies, own, seed, f"random-{release}-{seed}",
                         f"tests/strategies.py over vllm {release}'s registered names, seed {seed}", fit)
        finally:
            strategies.REGISTERED_NAMES = saved
    return out


def _draw(strategies, count: int, seed: int, prefix: str, source: str, fit) -> list[tuple[str, str, dict]]:
    rng = random.Random(seed)
    picker = strategies.RandomPicker(rng)
    out = []
    index = 0
    while len(out) < count:
        index += 1
        doc = fit(strategies.document(picker, max_nodes=12, max_depth=3))
        if _outside_module_paths(doc):
            # tests/strategies.py's external classes (acme.*, other.pkg)
            # exist in the engine's test registry, not in this environment:
            # vLLM could only fail to import them.
            continue
        out.append((f"{prefix}-{index:04d}", f"random deployment ({source}, #{index})", doc))
    return out


# ---------------------------------------------------------------------- runs
def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder: a stopped run leaves the old file."""
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def find_wheel(release: str, wheel: str | None, download: bool) -> Path:
    if wheel:
        path = Path(wheel)
        if not path.is_file():
            raise Fail(2, f"wheel not found: {path}")
        return path
    found = sorted(glob.glob(str(DEFAULT_WHEELS / f"vllm-{release}-*.whl")))
    found = [f for f in found if re.match(rf"vllm-{re.escape(release)}-(\d+-)?(cp|py)", Path(f).name)]
    if found:
        return Path(found[0])
    if not download:
        raise Fail(2, f"no wheel for vllm {release} in {DEFAULT_WHEELS} (give --wheel PATH, or --download)")
    part = DEFAULT_WHEELS / ".part" / f"conformance-{release}"
    part.mkdir(parents=True, exist_ok=True)
    say(f"downloading vllm=={release} into {part}")
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(part), "--",
                             f"vllm=={release}"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        raise Fail(2, f"cannot download vllm=={release}: {last}")
    wheels = list(part.glob("vllm-*.whl"))
    if not wheels:
        raise Fail(2, f"pip downloaded no wheel for vllm=={release} (an sdist only?)")
    target = DEFAULT_WHEELS / wheels[0].name
    os.replace(wheels[0], target)
    return target


def run_child(venv: Path, release: str, cases: list, describe: bool, import_env: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="hma-conf-") as tmp:
        job = Path(tmp) / "job.json"
        out = Path(tmp) / "out.json"
        job.write_text(json.dumps({"describe": describe, "cases": cases}), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in IMPORT_TIME_ENV}
        env.update(import_env)
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                    "VLLM_DO_NOT_TRACK": "1", "PYTHONHASHSEED": "0"})
        log = Path(tmp) / "child.log"
        with log.open("w") as handle:
            result = subprocess.run([str(venv / "bin" / "python"), str(HERE / "_vllm_child.py"), str(job), str(out),
                                     release], stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=tmp)
        if result.returncode != 0 or not out.exists():
            tail = log.read_text(errors="replace").strip().splitlines()[-6:]
            raise Fail(4, f"vllm {release} could not be run (exit {result.returncode}):\n  " + "\n  ".join(tail))
        return json.loads(out.read_text(encoding="utf-8"))


def run_all(venv: Path, release: str, docs: list) -> tuple[dict, dict]:
    """docs: (id, child_doc). One child process per value of the import-time variables."""
    groups = collections.defaultdict(list)
    for case_id, doc in docs:
        key = tuple((k, (doc.get("env") or {}).get(k)) for k in IMPORT_TIME_ENV)
        groups[key].append((case_id, doc))
    results, info, stubs, loaded, reasons = {}, {}, {}, {}, {}
    for key, batch in sorted(groups.items(), key=lambda kv: str(kv[0])):
        import_env = {k: v for k, v in key if v is not None}
        say(f"running {len(batch)} cases with {import_env or 'no import-time variables'}")
        answer = run_child(venv, release, batch, False, import_env)
        results.update(answer["results"])
        info = dict(answer["info"])
        # Each process finds its own stand-ins (an import-time variable may change what is imported).
        for module, found in info.get("stubs_by_module", {}).items():
            stubs[module] = sorted(set(stubs.get(module, [])) | set(found))
        loaded.update(info.get("loaded_with_stubs", {}))
        for module, why in info.get("stub_reasons", {}).items():
            reasons.setdefault(module, {}).update(why)
    info["stubs_by_module"], info["loaded_with_stubs"], info["stub_reasons"] = stubs, loaded, reasons
    return results, info


def clean_message(text: str) -> str:
    """vLLM's own message: pydantic's wrapper (a ValueError raised in a config's __post_init__) taken off."""
    match = re.search(r"Value error, (.*?) \[type=value_error", text, re.S)
    if match:
        text = "ValueError: " + match.group(1)
    return " ".join(text.split())[:300]


def expectation(result: dict) -> dict:
    error = result["error"]
    return {
        "outcome": result["outcome"],
        "hma_enabled": result["hma_enabled"],
        "error": {"stage": error["stage"], "code": error["code"]} if error else None,
        "warnings": sorted(result["warnings"]),
    }


def provenance(release: str, result: dict) -> str:
    stubs = ""
    if result.get("stubs"):
        stubs = (f"; import-only stand-ins: {', '.join(result['stubs'])} (so that a connector module could be "
                 "imported; see PROVENANCE.md)")
    if result["source_read"]:
        where = ", ".join(result["source_read"])
        return (f"source-read: {where} (MultiConnector.__init__'s HMA assertion, which runs only when connectors are "
                f"built, evaluated as the installed source states it); everything before it by vllm {release} real "
                f"code{stubs}")
    return f"vllm {release} real code{stubs}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", help="vLLM release, e.g. 0.22.0")
    parser.add_argument("--wheel", help="the release's wheel (default: /work/wheels/vllm-RELEASE-*.whl)")
    parser.add_argument("--download", action="store_true", help="pip download the wheel if it is not there")
    parser.add_argument("--venv", help="scratch virtual environment (default: /work/conformance-venvs/RELEASE)")
    parser.add_argument("--cases", type=int, default=300,
                        help="random deployment documents shared by every release (default 300)")
    parser.add_argument("--own-cases", type=int, default=100,
                        help="random deployment documents over this release's registered names (default 100)")
    parser.add_argument("--seed", type=int, default=20261201, help="seed of the random documents")
    parser.add_argument("-o", "--output", help="output folder (default: tests/conformance/RELEASE)")
    parser.add_argument("--inputs", help="also run the inputs of this cases.json and write the comparison to "
                                         "OUTPUT/comparison.json (not recorded as cases)")
    parser.add_argument("--no-curated", action="store_true", help="random documents only")
    parser.add_argument("--requirements-as-of", metavar="WHEN",
                        help="resolve the wheel's requirements among the packages PyPI had then: an ISO 8601 time, "
                             "or 'wheel' for the end of the day the wheel was built (old releases break on today's "
                             "transformers)")
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except Fail as exc:
        say(f"vllm_conformance: {exc}")
        return exc.status
    except _venv.SetupError as exc:
        say(f"vllm_conformance: {exc}")
        return 3
    except KeyboardInterrupt:
        say("vllm_conformance: interrupted")
        return 130


def _main(args) -> int:
    release = args.release
    if not RELEASE_RE.match(release):
        raise Fail(2, f"not a vLLM release: {release!r} (expected X.Y.Z)")
    if args.cases < 0 or args.own_cases < 0:
        raise Fail(2, "--cases and --own-cases must be 0 or more")
    wheel = find_wheel(release, args.wheel, args.download)
    if not re.match(rf"vllm-{re.escape(release)}-", wheel.name):
        raise Fail(2, f"{wheel.name} is not a wheel of vllm {release}")
    venv = Path(args.venv) if args.venv else DEFAULT_VENVS / release
    output = Path(args.output) if args.output else ROOT / "tests" / "conformance" / release
    started = datetime.datetime.now(datetime.timezone.utc)
    as_of = args.requirements_as_of
    if as_of == "wheel":
        as_of = _venv.wheel_build_day(wheel)
    stamp = _venv.ensure_venv(venv, wheel, TORCH, say, as_of)
    info = run_child(venv, release, [], True, {})["info"]
    if info["vllm_version"].split("+")[0] != release:
        raise Fail(4, f"{venv} imports vllm {info['vllm_version']}, not {release}")
    say(f"vllm {release}: {len(info['registered'])} registered connectors")

    strategies = _strategies()
    kebab_back = strategies.KEBAB_BACK
    planned: list[tuple[str, str, dict]] = []
    if not args.no_curated:
        planned += curated_cases(info)
    planned += random_cases(info, args.cases, args.own_cases, args.seed, release)
    comparison_inputs = []
    if args.inputs:
        for case in json.loads(Path(args.inputs).read_text(encoding="utf-8")):
            comparison_inputs.append((f"compare-{case['id']}", case["description"], case["input"], case["expect"]))

    skipped = collections.Counter()
    child_docs, seen = [], {}
    for case_id, _description, doc in planned + [c[:3] for c in comparison_inputs]:
        norm = normalise(doc, kebab_back)
        if norm is None:
            skipped["a key given under both spellings, or kv_transfer_config text that is not JSON"] += 1
            continue
        env = child_env_strings(norm.get("env"))
        if env is None:
            skipped["an integer switch in env that is not an integer"] += 1
            continue
        norm = dict(norm)
        norm["env"] = env
        child_docs.append((case_id, norm))
    results, run_info = run_all(venv, release, child_docs)

    faults = {k: v for k, v in results.items() if "fault" in v}
    unmapped = {k: v for k, v in results.items() if "error" in v and v["error"] and v["error"]["code"].startswith("unmapped.")}
    if faults or unmapped:
        for case_id, value in list(faults.items())[:5]:
            say(f"  {case_id}: {value['fault']}\n{value.get('traceback', '')}")
        for case_id, value in list(unmapped.items())[:10]:
            say(f"  {case_id}: {value['error']['stage']} {value['error']['message']}")
        raise Fail(4, f"{len(faults)} cases the runner could not run, {len(unmapped)} errors with no code: nothing recorded")

    cases, seen_inputs = [], set()
    messages = collections.defaultdict(set)
    unmapped_warnings = set()
    notes = collections.Counter()
    for case_id, description, doc in planned:
        result = results.get(case_id)
        if result is None:
            continue
        if "skip" in result:
            skipped[" ".join(result["skip"].split())[:160]] += 1
            continue
        fingerprint = json.dumps(doc, sort_keys=True)
        if fingerprint in seen_inputs:
            skipped["the same document as an earlier case"] += 1
            continue
        seen_inputs.add(fingerprint)
        if result["error"]:
            messages[(result["error"]["stage"], result["error"]["code"])].add(clean_message(result["error"]["message"]))
        unmapped_warnings.update(result["unmapped_warnings"])
        notes.update(" ".join(n.split())[:160] for n in result["notes"])
        cases.append({"id": case_id, "description": description, "input": doc,
                      "expect": expectation(result), "provenance": provenance(release, result)})

    output.mkdir(parents=True, exist_ok=True)
    write_atomically(output / "cases.json", json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    counts = collections.Counter(c["expect"]["outcome"] for c in cases)
    codes = collections.Counter(c["expect"]["error"]["code"] for c in cases if c["expect"]["error"])
    comparison = None
    if comparison_inputs:
        comparison = []
        for case_id, description, doc, expect in comparison_inputs:
            result = results.get(case_id)
            if result is None or "skip" in result:
                comparison.append({"id": case_id[len("compare-"):], "input": doc, "shared": expect, "status": "not run",
                                   "why": (result or {}).get("skip", "not a valid document")})
                continue
            got = expectation(result)
            comparison.append({"id": case_id[len("compare-"):], "input": doc, "shared": expect, "vllm": got,
                               "status": "agree" if got == expect else "disagree",
                               "message": (result["error"] or {}).get("message"),
                               "provenance": provenance(release, result)})
        write_atomically(output / "comparison.json", json.dumps(comparison, indent=1, ensure_ascii=False) + "\n")
    command = "python3 tools/vllm_conformance.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    write_provenance(output, release, wheel, stamp, run_info, info, started, command, cases, counts, codes,
                     skipped, messages, unmapped_warnings, notes, (args.inputs, comparison))
    say(f"recorded {len(cases)} cases in {output / 'cases.json'}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if skipped:
        say("not recorded: " + "; ".join(f"{n} x {why}" for why, n in skipped.most_common()))
    if comparison is not None:
        disagree = [c for c in comparison if c["status"] != "agree"]
        say(f"compared {len(comparison)} given inputs: {len(comparison) - len(disagree)} agree, {len(disagree)} do not")
    return 0


def preference_kind(adapt: dict) -> str:
    """The PROVENANCE.md row that says how a document's preference reached SchedulerConfig."""
    if adapt["preference_unset"] is None:
        return "tri-state: null, false, true passed as None, False, True"
    return (f"bool: null passed as {adapt['preference_unset']} (the CLI's default when the option is absent), "
            "false as False, true as True")


def adaptation_lines(adapt: dict) -> list[str]:
    """What ran, in the terms of this release (the child found each by attribute or source, tools/_vllm_child.py)."""
    create = adapt["create_connector"]
    if adapt["preference_unset"] is None:
        preference = ("- Preference: `disable_hybrid_kv_cache_manager` is tri-state here (`EngineArgs`' default is None): "
                      "a document's null, false and true are passed to `SchedulerConfig` as None, False and True.")
    else:
        preference = (f"- Preference: `disable_hybrid_kv_cache_manager` is a plain bool here (`EngineArgs`' default is "
                      f"{adapt['preference_unset']}, which `vllm serve` passes when the option is absent). A document's "
                      f"null is passed as {adapt['preference_unset']}, false as False (`--no-disable-hybrid-kv-cache-manager`), "
                      "true as True (`--disable-hybrid-kv-cache-manager`): null and false are the same start-up.")
    if adapt["platform_question"] == "support_hybrid_kv_cache":
        platform = ("`current_platform.support_hybrid_kv_cache` patched to the document's platform (default True) for "
                    "the whole case")
    else:
        platform = ("this release's HMA block asks `current_platform.is_cuda() or current_platform.is_rocm()` "
                    "(no `support_hybrid_kv_cache`): while `VllmConfig` is built, `is_cuda` answers the document's "
                    "`platform.supports_hybrid_kv_cache` (default True) and `is_rocm` False; elsewhere the platform's own "
                    "answer stays (a CUDA answer would load CUDA kernels)")
    if adapt["get_connector_class"]:
        connector = (f"`KVConnectorFactory.{create}` up to the point where it would construct the connector (the "
                     "resolved class's `__init__` is swapped for a sentinel)")
    else:
        connector = (f"`KVConnectorFactory.{create}` up to the point where it would construct the connector (this "
                     "release has no `get_connector_class`: `KVConnectorBase_V1.__new__` raises a sentinel)")
    if adapt["multi_children"] == "_get_connector_classes_and_configs":
        multi = "`MultiConnector._get_connector_classes_and_configs` recursively (it resolves the children without building them)"
    else:
        multi = ("`MultiConnector.__init__` itself (this release has no `_get_connector_classes_and_configs`: `__init__` "
                 "resolves and builds each child through the factory), run for real with the construction of every other "
                 "connector intercepted in `KVConnectorBase_V1.__new__` (it returns an instance of a subclass whose "
                 "`__init__` does nothing), so that no connector is built")
    planning = adapt["planning"]
    if planning.endswith("get_kv_cache_config"):
        planning = (f"`{planning}` (this release has no `get_kv_cache_groups`; given 2**40 bytes of memory so that its "
                    "memory check, which comes first, never decides, and the tiny model's config where the document has "
                    "none, for the `max_model_len` it reads)")
    else:
        planning = f"`{planning}`"
    if adapt.get("async_output_unanswered"):
        platform += ("; the platform leaves `is_async_output_supported` unanswered (it raises), and a `ModelConfig` "
                     "asks it while `VllmConfig` is built: it answers True there, as the CUDA platform does under the "
                     "V1 engine")
    return [
        "- Real code: `KVTransferConfig` (every node of the connector graph), `VllmConfig(device_config=DeviceConfig(\"cpu\"), "
        "scheduler_config=SchedulerConfig(max_model_len=16, is_encoder_decoder=False, disable_hybrid_kv_cache_manager=D), ...)` "
        f"(`is_encoder_decoder` where the release has it; {platform}; `is_cuda` is also patched "
        "(default True) where HiSparse is in play); a real `ModelConfig` of a tiny local Llama config (no weights) carrying "
        f"`attention_chunk_size` and a real `SpeculativeConfig` over it; {planning} over one KV cache spec per "
        f"`model.layer_kinds` entry; {connector}; {multi}.",
        preference,
    ]


def stub_lines(run_info: dict, info: dict, cases: list) -> list[str]:
    """PROVENANCE.md: every import-only stand-in, the connector modules that needed it, and the cases that used it."""
    stubs = run_info.get("stubs_by_module") or info.get("stubs_by_module") or {}
    if not stubs:
        return ["- none: every connector module of this release imported as installed."]
    used = collections.Counter()
    for case in cases:
        match = re.search(r"import-only stand-ins: (.+?) \(so that", case["provenance"])
        if match:
            used.update(match.group(1).split(", "))
    lines = [
        "Some connector modules of this release import an optional back end at their top. Where that package is not",
        "installed, is installed without what the module imports, or raises while vLLM imports it (the LMCache",
        "installed here is later than this release), `tools/_import_stubs.py` stood the whole top-level package in:",
        "every module under it a placeholder whose every attribute is a placeholder class. The packages were found by",
        "importing each connector module in a forked process and standing in the package that the error named or whose",
        "own code raised it (the error is given below; vLLM, and a package vLLM's core had already imported, is never",
        "stood in). Each such module was then imported once, before the first case, with only its own",
        "stand-ins and only for the length of that import; the vLLM modules first loaded during it are listed. No other",
        "import sees a stand-in. No stand-in answers an HMA question: the connector classes are vLLM's own, and a case",
        "whose connector class would come from a stand-in is not recorded. Each case whose imports used such a module",
        "names its stand-ins in its provenance.",
        "",
        "| connector module | stand-ins (the error that called for each) | vLLM modules first loaded while they stood in |",
        "|---|---|---|",
    ]
    loaded = run_info.get("loaded_with_stubs") or {}
    reasons = run_info.get("stub_reasons") or {}
    for module, found in sorted(stubs.items()):
        why = reasons.get(module, {})
        named = "; ".join(f"`{s}` ({why[s].replace('|', '/')})" if s in why else f"`{s}`" for s in found)
        lines.append(f"| `{module}` | {named} | {', '.join(f'`{m}`' for m in loaded.get(module, [])) or 'none'} |")
    lines += ["", "| stand-in | cases whose imports needed it |", "|---|---|"]
    lines += [f"| `{stub}` | {used.get(stub, 0)} |" for stub in sorted({s for found in stubs.values() for s in found})]
    return lines


def short_expect(expect: dict) -> str:
    """An expectation in a table cell: outcome, the first error's stage and code, the warnings."""
    text = expect["outcome"]
    if expect.get("error"):
        text += f" {expect['error']['stage']} `{expect['error']['code']}`"
    if expect.get("warnings"):
        text += " (" + ", ".join(f"`{w}`" for w in expect["warnings"]) + ")"
    return text


def comparison_lines(release: str, inputs: str, comparison: list) -> list[str]:
    """PROVENANCE.md: how this release answers the shared set's inputs, whose expectations are 0.33.0's."""
    differ = [c for c in comparison if c["status"] == "disagree"]
    not_run = [c for c in comparison if c["status"] == "not run"]
    lines = [f"`{inputs}` (its expectations are vLLM 0.33.0's; they stay the contract for 0.33.0) was run through "
             f"vLLM {release} as well and written to `comparison.json`, not recorded as cases: "
             f"{len(comparison) - len(differ) - len(not_run)} of {len(comparison)} inputs decide as the shared set "
             f"says, {len(differ)} differently, {len(not_run)} could not be run here.", ""]
    if differ:
        lines += [f"| shared case | shared set (0.33.0) | vLLM {release} |", "|---|---|---|"]
        lines += [f"| `{c['id']}` | {short_expect(c['shared'])} | {short_expect(c['vllm'])} |" for c in differ]
        lines.append("")
    for c in not_run:
        lines.append(f"- not run: `{c['id']}`: {' '.join(str(c['why']).split())[:160]}")
    return lines


def write_provenance(output, release, wheel, stamp, run_info, info, started, command, cases, counts, codes, skipped,
                     messages, unmapped_warnings, notes, compared=(None, None)):
    kind, where = run_info.get("construction_rule") or info.get("construction_rule") or (None, None)
    lines = [
        f"# vLLM {release}: conformance cases",
        "",
        f"`cases.json` holds {len(cases)} deployment documents with what vLLM {release}'s own code decided for them",
        "on the CPU. Produced by `tools/vllm_conformance.py` (see `tools/README.md`); no expectation was written by hand.",
        "",
        "| | |",
        "|---|---|",
        f"| wheel | `{wheel.name}` |",
        f"| wheel sha256 | `{stamp['wheel_sha256']}` |",
        f"| torch | {stamp.get('torch_installed') or stamp['torch']} (CPU build; the wheel pins another, see below) |",
        f"| vllm imported | {run_info.get('vllm_version') or info.get('vllm_version')} |",
        f"| recorded (UTC) | {started.strftime('%Y-%m-%d %H:%M')} |",
        f"| command | `{command}` |",
        f"| Python | {sys.version.split()[0]} |",
        f"| preference | {preference_kind(run_info.get('adaptations') or info['adaptations'])} |",
        "",
        "## Counts",
        "",
        "| outcome | cases |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    lines += ["", "| first error (stage, code) | cases |", "|---|---|"]
    stage_codes = collections.Counter((c["expect"]["error"]["stage"], c["expect"]["error"]["code"])
                                      for c in cases if c["expect"]["error"])
    lines += [f"| {s} `{c}` | {n} |" for (s, c), n in sorted(stage_codes.items())]
    lines += ["", "## What ran, and what was read from source", "",
              f"- Registered connectors ({len(info['registered'])}), with whether the class the registry resolves "
              "inherits `SupportsHMA` here:",
              ""]
    for name in info["registered"]:
        lines.append(f"  - `{name}`: {info['supports_hma'].get(name)}")
    if not (run_info.get("adaptations") or info["adaptations"])["supports_hma"]:
        lines += ["", "  (`SupportsHMA` does not exist in this release: no class inherits it.)"]
    lines += [""] + adaptation_lines(run_info.get("adaptations") or info["adaptations"]) + [
        ("- Read from source: nothing. This release's `MultiConnector.__init__` has no HMA assertion (its installed "
         f"source, `{where}`, was read to find out)." if kind is None else
         f"- Read from source: `MultiConnector.__init__`'s assertion (\"HMA should not be enabled unless all sub-connectors "
        f"support it\") at `{where}`, form `{kind}` (`children_instances`: `supports_hma` of every direct child instance; "
        "`children_config`: `MultiConnector.all_children_support_hma` of the config). It runs only when connectors are built, "
        "so it is evaluated as that source line states it; cases that reached it say `source-read` in their provenance."),
        f"- Requirements left out of the environment (GPU-only): {', '.join(stamp.get('requirements_skipped', [])) or 'none'}.",
        f"- Requirements that could not be installed: {', '.join(stamp.get('requirements_not_installed', [])) or 'none'}.",
        (f"- Requirements resolved among the packages PyPI had at {stamp['requirements_as_of']} (`pip install "
         "--uploaded-prior-to`, without the machine's local indexes, whose files carry no upload time)."
         if stamp.get("requirements_as_of") else
         "- Requirements resolved among the packages PyPI had when the environment was made (no `--requirements-as-of`)."),
        f"- Installed with `--no-deps` besides: {', '.join(stamp.get('extra_packages', [])) or 'none'} "
        "(so `LMCacheMPConnector` without `LMCACHE_USE_UPSTREAM_MP` resolves as in a deployment with LMCache installed).",
        "",
        "## Errors vLLM raised (first message seen per code)",
        "",
    ]
    for (stage, code), texts in sorted(messages.items()):
        lines.append(f"- `{stage}` `{code}`: {sorted(texts)[0]!r}")
    lines += ["", "## Import-only stand-ins", ""] + stub_lines(run_info, info, cases)
    if unmapped_warnings:
        lines += ["", "## HMA-related log lines with no warning code", ""]
        lines += [f"- {t!r}" for t in sorted(unmapped_warnings)[:20]]
    if notes:
        lines += ["", "## Recorded cases with a note", "",
                  "KV cache planning raised over the synthetic specs (one per layer kind) after the step the HMA "
                  "decides: the specs were unified (HMA off) or needed no unifying (HMA on), and then grouping them "
                  "by page size failed. That is not part of the decision, so the case is recorded as if planning had "
                  "passed. A failure before that step stops the run instead.", ""]
        lines += [f"- {n} x {text}" for text, n in notes.most_common()]
    inputs, comparison = compared
    if comparison is not None:
        lines += ["", "## The shared conformance set under this release", ""] + comparison_lines(release, inputs, comparison)
        while lines[-1] == "":
            lines.pop()
    lines += ["", "## Documents not recorded", ""]
    if skipped:
        lines += [f"- {n} x {why}" for why, n in skipped.most_common()]
    else:
        lines.append("- none")
    write_atomically(output / "PROVENANCE.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
