"""A vLLM wheel's connector facts: what its factory registers, and what
each class inherits.

vLLM decides whether a KV-transfer connector supports the hybrid KV cache
manager (HMA) by class inheritance: a connector supports HMA when its class
derives, directly or through other classes, from ``SupportsHMA``. Which class
a connector name means is fixed by ``KVConnectorFactory.register_connector``
calls in ``vllm/distributed/kv_transfer/kv_connector/factory.py``.
:func:`read_wheel` reads both from the source (source.py) and returns the
*facts*: plain JSON data (the version, the registrations with what each
resolves to, every class of the kv_transfer tree with its bases and resolved
HMA support, the classes its packages re-export, the module-level name
switches, and the modules of the tree with the names each binds
(modules.py)), which render.py turns into a registry and modules.py into
the release's module table.
"""

from __future__ import annotations

import ast
import json
import os

from ...fileio import open_regular
from .modules import read_modules
from .source import (Module, Wheel, WheelError, const_str, dotted, file_digest, module_name, open_wheel, plain,
                     positive, wheel_metadata)

__all__ = ["FACTS_FORMAT", "CONNECTOR_BASES", "MARKER_NAME", "read_wheel", "facts_json", "load_facts"]

FACTS_FORMAT = 1
KV_TREE = "vllm/distributed/kv_transfer/"
FACTORY_PATH = "vllm/distributed/kv_transfer/kv_connector/factory.py"
FACTORY_MODULE = "vllm.distributed.kv_transfer.kv_connector.factory"
MARKER_NAME = "SupportsHMA"
# The base classes every connector derives from: V1 (``KVConnectorBase_V1``)
# and, in old releases, the V0 ``KVConnectorBase``. Used only to tell which
# unregistered classes are connectors.
CONNECTOR_BASES = ("KVConnectorBase_V1", "KVConnectorBase")
# A facts file is a few hundred KiB; one over this is not one.
MAX_FACTS = 64 * 1024 * 1024


def _registrations(factory: Module) -> list[dict]:
    """The factory's register_connector(name, module_path, class_name) calls, in order."""
    found = []
    fields = ["name", "module_path", "class_name"]
    for stmt in factory.tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_connector"):
            continue
        values = dict(zip(fields, (const_str(a) for a in call.args)))
        values.update({k.arg: const_str(k.value) for k in call.keywords if k.arg in fields})
        if all(values.get(f) for f in fields):
            found.append({f: values[f] for f in fields} | {"line": stmt.lineno})
    return found


def read_wheel(path: str) -> dict:
    """Read a vLLM wheel's connector facts statically (see the module docstring).

    Raises WheelError: wheel.unreadable, wheel.not_vllm, wheel.no_factory."""
    sha256, size = file_digest(path)
    name = os.path.basename(path)
    with open_wheel(path) as zf:
        meta = wheel_metadata(zf, path)
        wheel = Wheel(zf, path)
        if FACTORY_PATH not in wheel.files:
            raise WheelError("wheel.no_factory", f"no {FACTORY_PATH} in the wheel", path)
        factory = wheel.module(FACTORY_MODULE)
        if factory is None:
            raise WheelError("wheel.no_factory", f"{FACTORY_PATH} does not parse", path)
        registrations = _registrations(factory)
        if not registrations:
            raise WheelError("wheel.no_factory", f"{FACTORY_PATH} registers no connector", path)
        for member in sorted(wheel.files):
            if member.startswith(KV_TREE):
                wheel.module(module_name(member))
        for reg in registrations:
            reg["resolves"] = [{"when": c, "ref": r} for c, r in wheel.resolve(reg["module_path"], reg["class_name"])]
        classes = _classes(wheel)
        marker = sorted(k for k, c in classes.items()
                        if k.split(":")[1] == MARKER_NAME and c["module"].startswith("vllm.distributed."))
        return {
            "format": FACTS_FORMAT,
            "vllm_version": meta["version"],
            "wheel": {"file": name, "sha256": sha256, "size": size},
            "factory": FACTORY_MODULE,
            "marker": marker[0] if marker else None,
            "registrations": registrations,
            "classes": classes,
            "exports": {k: v for k, v in _exports(wheel).items() if classes.get(k, {}).get("connector")},
            "switches": _switches(wheel),
            "modules": read_modules(wheel),
            "unparsed": sorted(wheel.unparsed),
        }


def _base_refs(wheel: Wheel, mod: Module, node: ast.ClassDef) -> list[str]:
    """Each base of a class statement, resolved.

    A base is fixed when the class statement runs: the alternative that holds
    by default (the last one) is taken."""
    refs = []
    for base in node.bases:
        name = dotted(base)
        resolved = wheel.resolve_expr(mod, name) if name else [([], {"unresolved": ast.unparse(base)})]
        refs.append(plain(resolved[-1][1]))
    return refs


def _classes(wheel: Wheel) -> dict:
    """Every class defined in a parsed module, with bases and HMA support resolved.

    Modules outside the kv_transfer tree that were parsed while resolving a
    name (a base class imported from elsewhere in vLLM) are included too.
    """
    out: dict[str, dict] = {}
    # Resolving bases may parse further modules: their classes are taken in
    # a second pass, after the modules known at first.
    for _ in range(2):
        parsed = {n: m for n, m in wheel.modules.items() if m is not None}
        for name, mod in sorted(parsed.items()):
            for cls_name, node in sorted(mod.classes.items()):
                key = f"{name}:{cls_name}"
                if key not in out:
                    out[key] = {"module": name, "name": cls_name, "line": node.lineno,
                                "bases": [ast.unparse(b) for b in node.bases], "base_refs": _base_refs(wheel, mod, node)}
    for key in out:
        _ancestry(out, key)
    return out


def _ancestry(classes: dict, key: str, stack: tuple = ()) -> None:
    """Set supports_hma (and the class that declares SupportsHMA) and connector lineage."""
    cls = classes[key]
    if "supports_hma" in cls:
        return
    if key in stack:  # a cycle cannot happen in Python; stay total anyway
        cls.update(supports_hma=False, hma_from=None, connector=False)
        return
    hma_from, connector = None, cls["name"] in CONNECTOR_BASES and cls["module"].startswith("vllm.distributed.")
    for ref in cls["base_refs"]:
        if not ref.startswith("class:"):
            continue
        base_key = ref[len("class:"):]
        base = classes.get(base_key)
        if base is None:
            continue
        if base["name"] == MARKER_NAME and base["module"].startswith("vllm.distributed."):
            hma_from = hma_from or key
            continue
        _ancestry(classes, base_key, stack + (key,))
        if base["supports_hma"] and hma_from is None:
            hma_from = base["hma_from"]
        connector = connector or base["connector"]
    cls.update(supports_hma=hma_from is not None, hma_from=hma_from, connector=connector)


def _kv_modules(wheel: Wheel) -> list[tuple[str, Module]]:
    return [(n, m) for n, m in sorted(wheel.modules.items()) if m is not None and m.path.startswith(KV_TREE)]


def _exports(wheel: Wheel) -> dict:
    """Classes a package of the kv_transfer tree re-exports: class key -> package.

    When several packages export a class, the shortest module path is kept
    (the one a user would write as kv_connector_module_path).
    """
    out: dict[str, str] = {}
    for name, mod in _kv_modules(wheel):
        if not mod.is_package:
            continue
        for bound, alternatives in sorted(mod.bindings.items()):
            if alternatives[0][1]["kind"] != "import":
                continue
            key = wheel.resolve(name, bound)[-1][1].get("class")
            if key and key.split(":")[1] == bound and (key not in out or len(name) < len(out[key])):
                out[key] = name
    return dict(sorted(out.items()))


def _switches(wheel: Wheel) -> list[dict]:
    """Module-level names whose class depends on a condition (env var, import).

    Reported for every module of the kv_transfer tree, whether or not a
    registration uses the name, so that a new kind of switch is seen.
    """
    out = []
    for name, mod in _kv_modules(wheel):
        for bound in sorted(mod.bindings):
            if not any(v["kind"] in ("alias", "call", "class") for _, v in mod.bindings[bound]):
                continue
            resolved = wheel.resolve(name, bound)
            classes = {plain(r) for _, r in resolved}
            envs = sorted({positive(c)["env"] for conds, _ in resolved for c in conds if "env" in positive(c)})
            if len(classes) > 1 and any(r.get("class") or r.get("external") for _, r in resolved):
                out.append({"module": name, "name": bound, "env": envs,
                            "alternatives": [{"when": c, "ref": plain(r)} for c, r in resolved]})
    return out


def facts_json(facts: dict) -> str:
    """The facts as the text of a facts file."""
    return json.dumps(facts, indent=1, ensure_ascii=False) + "\n"


def load_facts(path: str) -> dict:
    """A facts file (as ``--facts`` writes it), or facts.unreadable / facts.invalid.

    Its shape is checked by render_registry, which reads it."""
    try:
        with open_regular(path) as stream:
            raw = stream.read(MAX_FACTS + 1)
    except FileNotFoundError:
        raise WheelError("facts.unreadable", "no such file", path) from None
    except OSError as exc:
        raise WheelError("facts.unreadable", f"cannot read it: {exc.strerror or exc}", path) from None
    if len(raw) > MAX_FACTS:
        raise WheelError("facts.invalid", f"larger than {MAX_FACTS // (1024 * 1024)} MiB: not a facts file", path)
    try:
        facts = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WheelError("facts.invalid", f"not JSON ({exc})", path) from None
    if not isinstance(facts, dict) or facts.get("format") != FACTS_FORMAT:
        raise WheelError("facts.invalid", f"not a facts file of format {FACTS_FORMAT}", path)
    return facts
