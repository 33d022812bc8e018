"""The documents and rule files the benchmarks measure with (no engine import:
every build, today's included, is measured on the same inputs)."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

# Connectors that support HMA, all different: the 8-leaf tree has one of each.
SUPPORTED = ["NixlConnector", "OffloadingConnector", "MooncakeConnector", "MooncakeStoreConnector",
             "NixlPullConnector", "SimpleCPUOffloadConnector", "DecodeBenchConnector", "MoRIIOConnector"]


def leaf(name: str = "NixlConnector") -> dict:
    return {"kv_connector": name, "kv_role": "kv_both"}


def multi(children: list) -> dict:
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": children}}


def tree(nodes: int, fanout: int = 10) -> dict:
    """A MultiConnector tree with ``nodes`` nodes in all (breadth-first, ``fanout`` children each)."""
    root = multi([])
    queue, count = [root], 1
    while count < nodes:
        parent = queue.pop(0)
        for _ in range(fanout):
            if count >= nodes:
                break
            child = multi([]) if count + fanout < nodes and len(queue) < nodes // fanout else leaf(SUPPORTED[count % len(SUPPORTED)])
            parent["kv_connector_extra_config"]["connectors"].append(child)
            count += 1
            if child["kv_connector"] == "MultiConnector":
                queue.append(child)
    # Empty MultiConnectors would not support HMA: give each a leaf.
    for node in _nodes(root):
        kids = node.get("kv_connector_extra_config", {}).get("connectors")
        if kids is not None and not kids:
            kids.append(leaf())
    return root


def eight_leaves(names: list[str] = SUPPORTED) -> dict:
    """3 levels of MultiConnector over 8 leaves, named in order."""
    return multi([multi([leaf(n) for n in names[:4]]), multi([leaf(n) for n in names[4:]])])


def _nodes(ktc: dict) -> Iterator[dict]:
    stack = [ktc]
    while stack:
        node = stack.pop()
        yield node
        if node["kv_connector"] == "MultiConnector":
            stack.extend(node.get("kv_connector_extra_config", {}).get("connectors", []))


def count_nodes(ktc: dict) -> int:
    return sum(1 for _ in _nodes(ktc))


# The documents of the latency figures. The 8-leaf tree is also the one the
# first decision after a load is measured on.
CASES = {
    "single connector": {"kv_transfer_config": leaf("NixlConnector")},
    "single unsupported": {"kv_transfer_config": leaf("LMCacheConnectorV1")},
    "multi, 2 children": {"kv_transfer_config": multi([leaf("NixlConnector"), leaf("OffloadingConnector")])},
    "3 levels, 8 leaves": {"kv_transfer_config": eight_leaves()},
    "100-node tree": {"kv_transfer_config": tree(100)},
    "1000-node tree": {"kv_transfer_config": tree(1000)},
}
FIRST_CASE = "3 levels, 8 leaves"
# A case that shares no connector node with FIRST_CASE (LMCacheConnectorV1 is none of its leaves).
UNRELATED_CASE = "single unsupported"


def same_facts(document: dict, count: int) -> list[dict]:
    """``count`` distinct copies of ``document`` that differ only where no rule
    reads (the deployment's name, the engine id, the port): the same facts."""
    out = []
    for i in range(count):
        variant = copy.deepcopy(document)
        variant["name"] = f"deployment-{i}"
        variant["kv_transfer_config"]["engine_id"] = f"engine-{i}"
        variant["kv_transfer_config"]["kv_port"] = 10000 + i % 50000
        out.append(variant)
    return out


def new_facts(document: dict, count: int, seed: int = 3) -> list[dict] | None:
    """``count`` copies of ``document`` whose leaves are another mix of the
    connectors each time, none the same as the document or one another: new
    facts for every decision, made of step inputs seen before. None for a
    document with fewer than 8 leaves (too few mixes to stay new)."""
    leaves = [n for n in _nodes(document["kv_transfer_config"]) if n["kv_connector"] != "MultiConnector"]
    if len(leaves) < 8:
        return None
    rng = random.Random(seed)
    seen = {tuple(n["kv_connector"] for n in leaves)}
    out = []
    while len(out) < count:
        mix = tuple(rng.sample(SUPPORTED, len(SUPPORTED))) if len(leaves) == len(SUPPORTED) else \
            tuple(rng.choice(SUPPORTED) for _ in leaves)
        if mix in seen:
            continue
        seen.add(mix)
        variant = copy.deepcopy(document)
        mixed = iter(mix)
        for node in _nodes(variant["kv_transfer_config"]):
            if node["kv_connector"] != "MultiConnector":
                node["kv_connector"] = next(mixed)
        out.append(variant)
    return out


def fleet_document(rng: random.Random) -> dict:
    """A deployment as a fleet holds them: small graphs of registered connectors, some unsupported."""
    names = SUPPORTED + ["ExampleConnector", "LMCacheConnectorV1", "FlexKVConnectorV1", "HF3FSKVConnector"]
    shape = rng.random()
    if shape < 0.4:
        ktc = leaf(rng.choice(names))
    elif shape < 0.8:
        ktc = multi([leaf(rng.choice(names)) for _ in range(rng.randint(1, 3))])
    else:
        ktc = multi([multi([leaf(rng.choice(names)) for _ in range(2)]), leaf(rng.choice(names))])
    ktc["engine_id"] = f"engine-{rng.randrange(10**9)}"
    ktc["kv_port"] = rng.randint(10000, 60000)
    doc: dict[str, Any] = {"name": f"deployment-{rng.randrange(10**9)}", "kv_transfer_config": ktc,
                           "disable_hybrid_kv_cache_manager": rng.choice([None, None, None, True, False])}
    if rng.random() < 0.3:
        doc["model"] = {"layer_kinds": rng.sample(["full_attention", "sliding_window", "mamba"], rng.randint(1, 2))}
    return doc


def write_fleet(folder: Path, count: int, seed: int = 11) -> None:
    """``count`` fleet documents as JSON files in ``folder``."""
    rng = random.Random(seed)
    for i in range(count):
        (folder / f"d{i:05}.json").write_text(json.dumps(fleet_document(rng)))


def write_scaled_registry(bundled: Path, out: Path, entries: int) -> Path:
    """A copy at ``out`` of the rules folder ``bundled`` (its layout kept)
    whose registry has ``entries`` more connectors, each with 2 conditional
    cases (issue 19, point 10). The registry is found by what it says it is
    (`kind: registry`), not by its file name, so that the benchmark follows
    the rules wherever they are filed. Returns the registry file's path;
    ValueError if the folder has no registry, or more than one."""
    shutil.copytree(bundled, out, ignore=shutil.ignore_patterns("__pycache__"))
    registries = sorted(path for path in out.rglob("*.y*ml") if REGISTRY.search(path.read_text(encoding="utf-8")))
    if len(registries) != 1:
        raise ValueError(f"expected one file of `kind: registry` under {bundled}, found {len(registries)}")
    registry = registries[0]
    lines = registry.read_text(encoding="utf-8").splitlines(keepends=True)
    # The new entries go first under `connectors:`, indented as the entries there.
    at = next(i for i, line in enumerate(lines) if line.rstrip() == "connectors:") + 1
    first = next(line for line in lines[at:] if line.strip() and not line.lstrip().startswith("#"))
    indent = first[:len(first) - len(first.lstrip())]
    entry = ["BenchConnector{i:04}:", "  supports_hma: true", "  module_path: bench.connectors.c{i:04}", "  cases:",
             "    - id: upstream", "      when: {{env_lmcache_use_upstream_mp: true}}", "      supports_hma: false",
             "    - id: child", "      when: {{is_child: true}}", "      supports_hma: false"]
    lines[at:at] = [indent + line.format(i=i) + "\n" for i in range(entries) for line in entry]
    registry.write_text("".join(lines), encoding="utf-8")
    return registry


# A registry file's top-level `kind`, as the rule loader reads it.
REGISTRY = re.compile(r"^kind:\s*registry\s*$", re.MULTILINE)
