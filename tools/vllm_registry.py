#!/usr/bin/env python3
"""Generate a vLLM release's connector registry by reading its wheel statically.

vLLM decides whether a KV-transfer connector supports the hybrid KV cache
manager (HMA) by class inheritance: a connector supports HMA when its class
derives, directly or through other classes, from ``SupportsHMA``.  Which class
a connector name means is fixed by ``KVConnectorFactory.register_connector``
calls in ``vllm/distributed/kv_transfer/kv_connector/factory.py``.  Both are
plain facts of the source, so this tool recovers them from a wheel without
running it:

* ``read_wheel(path)`` opens the wheel as a zip, parses Python files with
  ``ast`` and returns "facts": plain JSON data (version, registrations, every
  class of the kv_transfer tree with its bases and resolved HMA support, and
  module-level name switches such as a choice made on an environment
  variable).  Nothing from the wheel is imported, executed or evaluated:
  ``ast.parse`` only builds a tree, and every value is read off that tree.
* ``render_registry(facts)`` turns facts into the registry YAML of
  ``rules/connectors.yaml`` (``kind: registry``), deterministically, so that a
  recorded facts file re-renders byte for byte.
* ``read_options`` lives in ``tools/vllm_options.py``; ``--options FILE``
  here writes them too.

Command line::

    python tools/vllm_registry.py WHEEL [-o FILE] [--facts FILE] [--options FILE]
    python tools/vllm_registry.py --from-facts FACTS.json [-o FILE]

Errors are one line, ``error: <code>: <message>``, with exit status 2.  The
codes are stable: ``wheel.unreadable``, ``wheel.not_vllm``,
``wheel.no_factory``, ``wheel.no_options`` (no parseable
``vllm/engine/arg_utils.py``, with ``--options``), ``facts.invalid``,
``facts.unknown_external``, ``facts.unknown_switch``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import zipfile
from email.parser import HeaderParser

FACTS_FORMAT = 1
KV_TREE = "vllm/distributed/kv_transfer/"
FACTORY_PATH = "vllm/distributed/kv_transfer/kv_connector/factory.py"
FACTORY_MODULE = "vllm.distributed.kv_transfer.kv_connector.factory"
MARKER_NAME = "SupportsHMA"
# The base classes every connector derives from: V1 (``KVConnectorBase_V1``)
# and, in old releases, the V0 ``KVConnectorBase``.  Used only to tell which
# unregistered classes are connectors.
CONNECTOR_BASES = ("KVConnectorBase_V1", "KVConnectorBase")

# A name may be bound to a class that lives outside the wheel (LMCache ships
# its own LMCacheMPConnector, which vLLM prefers when importable).  Whether
# such a class inherits SupportsHMA cannot be read from vLLM's wheel, so the
# renderer takes it from this table, one line per class with its source.
# An external class not listed here stops the render (facts.unknown_external)
# instead of guessing.
KNOWN_EXTERNAL = {
    "lmcache.integration.vllm.lmcache_mp_connector.LMCacheMPConnector": (
        True,
        "LMCache's own LMCacheMPConnector, which inherits SupportsHMA (LMCache PR #3419)",
    ),
}

# Environment switches the policy engine has a fact for (engine/facts.py):
# variable -> the node fact that is true when the variable is set (non-empty).
# A switch on any other variable is kept in the facts but cannot be rendered
# as a `when:` (facts.unknown_switch): the engine would first need the fact.
ENGINE_ENV_FACTS = {"LMCACHE_USE_UPSTREAM_MP": "env_lmcache_use_upstream_mp"}


class RegistryError(Exception):
    """A failure with a stable code, reported as one line, never a traceback."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# ---------------------------------------------------------------------------
# Reading the wheel


def _module_name(path: str) -> str:
    """'vllm/a/b.py' -> 'vllm.a.b'; 'vllm/a/__init__.py' -> 'vllm.a'."""
    name = path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _dotted(node: ast.AST) -> str | None:
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _env_condition(test: ast.AST) -> dict | None:
    """Read an environment test, or None when `test` is not one.

    Recognised forms (and their negation with `not`):
    ``os.environ.get("X")`` / ``os.getenv("X")`` (set and non-empty),
    ``"X" in os.environ``, ``envs.X`` (vLLM's own env module), and comparisons
    ``os.getenv("X") == "v"`` / ``!=``.
    """
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _env_condition(test.operand)
        return {"not": inner} if inner else None
    if isinstance(test, ast.Call) and _dotted(test.func) in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
        var = _const_str(test.args[0]) if test.args else None
        if var:
            default = _const_str(test.args[1]) if len(test.args) > 1 else None
            cond = {"env": var, "test": "set"}
            if default:
                cond["default"] = default
            return cond
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)) and _dotted(right) in ("os.environ", "environ") and _const_str(left):
            cond = {"env": _const_str(left), "test": "present"}
            return cond if isinstance(op, ast.In) else {"not": cond}
        if isinstance(op, (ast.Eq, ast.NotEq)):
            inner = _env_condition(left)
            value = right.value if isinstance(right, ast.Constant) else None
            if inner and "env" in inner and value is not None:
                cond = {"env": inner["env"], "test": "equals", "value": value}
                return cond if isinstance(op, ast.Eq) else {"not": cond}
    dotted = _dotted(test)
    if dotted and dotted.startswith("envs.") and dotted.count(".") == 1:
        return {"env": dotted.split(".")[1], "test": "vllm_envs"}
    return None


def _is_type_checking(test: ast.AST) -> bool:
    return _dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = []
    if handler.type is None:
        return True
    for t in handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]:
        names.append(_dotted(t))
    return any(n in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException") for n in names)


def _imported_modules(stmts: list[ast.stmt], module: "_Module") -> list[str]:
    """The modules a try body imports: what its except ImportError guards."""
    found = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom):
                found.append(module.absolute(node))
            elif isinstance(node, ast.Import):
                found.extend(a.name for a in node.names)
    return sorted(set(found))


class _Module:
    """One parsed module: its top-level bindings, each a list of alternatives.

    A binding is a list of ``(conditions, value)`` pairs read first match
    first, the way the registry reads its `cases`: a name bound inside
    ``if env-test:`` is an alternative under that condition in front of what
    was bound before, an unconditional binding replaces all of them.
    """

    def __init__(self, name: str, path: str, is_package: bool, tree: ast.Module):
        self.name, self.path, self.is_package, self.tree = name, path, is_package, tree
        self.bindings: dict[str, list[tuple[list[dict], dict]]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        # the last expression assigned to each module-level name (type
        # aliases such as `ModelDType = Literal[...]`, read by vllm_options)
        self.values: dict[str, ast.expr] = {}
        self._collect(tree.body, [])

    def absolute(self, node: ast.ImportFrom) -> str:
        """The absolute module of a `from ... import`, relative levels resolved."""
        if not node.level:
            return node.module or ""
        package = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _bind(self, name: str, conds: list[dict], value: dict) -> None:
        value = dict(value, line=value.get("line"))
        old = self.bindings.get(name, [])
        self.bindings[name] = [(conds, value)] + (old if conds else [])

    def _collect(self, stmts: list[ast.stmt], conds: list[dict]) -> None:
        for stmt in stmts:
            line = getattr(stmt, "lineno", None)
            if isinstance(stmt, ast.ClassDef):
                self.classes.setdefault(stmt.name, stmt)
                self._bind(stmt.name, conds, {"kind": "class", "line": line})
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ImportFrom):
                source = self.absolute(stmt)
                for alias in stmt.names:
                    if alias.name != "*":
                        self._bind(alias.asname or alias.name, conds,
                                   {"kind": "import", "module": source, "name": alias.name, "line": line})
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self._bind(alias.asname, conds, {"kind": "module", "module": alias.name, "line": line})
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = stmt.value
                for target in targets:
                    if not isinstance(target, ast.Name):
                        continue
                    self.values[target.id] = value
                    dotted = _dotted(value)
                    if dotted:
                        self._bind(target.id, conds, {"kind": "alias", "expr": dotted, "line": line})
                    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args:
                        self._bind(target.id, conds, {"kind": "call", "function": value.func.id, "line": line})
            elif isinstance(stmt, ast.If):
                if _is_type_checking(stmt.test):
                    self._collect(stmt.orelse, conds)  # the body never runs
                    continue
                cond = _env_condition(stmt.test) or {"expr": ast.unparse(stmt.test)}
                # The branches exclude each other; taking `else` first puts
                # the `if` branch's binding in front, as it reads.
                self._collect(stmt.orelse, conds + [{"not": cond}])
                self._collect(stmt.body, conds + [cond])
            elif isinstance(stmt, ast.Try):
                guarded = _imported_modules(stmt.body, self)
                ok = {"imports": guarded} if guarded else {"expr": "try body runs without error"}
                self._collect(stmt.body + stmt.orelse, conds + [ok])
                for handler in stmt.handlers:
                    if _catches_import_error(handler):
                        self._collect(handler.body, conds + [{"not": ok}])
                self._collect(stmt.finalbody, conds)


def _returns(stmts: list[ast.stmt], conds: list[dict], module: _Module) -> list[tuple[list[dict], ast.expr]]:
    """The return statements of a function body, as first-match alternatives."""
    out: list[tuple[list[dict], ast.expr]] = []
    for stmt in stmts:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            out.append((conds, stmt.value))
            return out  # nothing after an unconditional return runs
        if isinstance(stmt, ast.If):
            cond = _env_condition(stmt.test) or {"expr": ast.unparse(stmt.test)}
            out += _returns(stmt.body, conds + [cond], module)
            out += _returns(stmt.orelse, conds + [{"not": cond}], module)
        elif isinstance(stmt, ast.Try):
            guarded = _imported_modules(stmt.body, module)
            ok = {"imports": guarded} if guarded else {"expr": "try body runs without error"}
            out += _returns(stmt.body + stmt.orelse, conds + [ok], module)
            for handler in stmt.handlers:
                if _catches_import_error(handler):
                    out += _returns(handler.body, conds + [{"not": ok}], module)
    return out


class _Wheel:
    """The wheel's Python sources, parsed on demand, and name resolution over them."""

    def __init__(self, zf: zipfile.ZipFile):
        self.zf = zf
        self.files = {n for n in zf.namelist() if n.endswith(".py")}
        self.modules: dict[str, _Module | None] = {}
        self.unparsed: list[str] = []

    def path_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (base + ".py", base + "/__init__.py"):
            if candidate in self.files:
                return candidate
        return None

    def module(self, name: str) -> _Module | None:
        if name not in self.modules:
            path = self.path_of(name)
            self.modules[name] = None
            if path is not None:
                try:
                    source = self.zf.read(path)
                except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
                    raise RegistryError("wheel.unreadable", f"cannot read {path} from the wheel: {e}") from None
                try:
                    tree = ast.parse(source, filename=path)
                except (SyntaxError, ValueError):
                    self.unparsed.append(path)
                else:
                    self.modules[name] = _Module(name, path, path.endswith("/__init__.py"), tree)
        return self.modules[name]

    # Resolution gives a list of (conditions, ref) alternatives, first match
    # first.  A ref is {"class": "module:Name"}, {"external": "module.Name"}
    # or {"unresolved": text}; "via" lists the aliases followed to get there.
    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> list[tuple[list[dict], dict]]:
        key = (module, name)
        if key in seen:
            return [([], {"unresolved": f"{module}.{name} (import cycle)"})]
        seen = seen | {key}
        mod = self.module(module)
        if mod is None:
            if self.path_of(module) is None and not module.startswith("vllm.") and module != "vllm":
                return [([], {"external": f"{module}.{name}"})]
            if self.path_of(f"{module}.{name}".replace(".", "/") + ".py") is not None:
                return [([], {"unresolved": f"{module}.{name} is a module"})]
            return [([], {"unresolved": f"{module}.{name}"})]
        if name not in mod.bindings:
            # `from package import submodule` binds a module, not a class.
            return [([], {"unresolved": f"{module}.{name} not bound at module level"})]
        out = []
        for conds, value in mod.bindings[name]:
            for sub_conds, ref in self._resolve_value(mod, name, value, seen):
                out.append((_dedupe(conds + sub_conds), ref))
        return out

    def _resolve_value(self, mod: _Module, name: str, value: dict, seen: frozenset):
        kind = value["kind"]
        if kind == "class":
            return [([], {"class": f"{mod.name}:{name}"})]
        if kind == "import":
            return [(c, _via(r, f"{mod.name}:{name}")) for c, r in self.resolve(value["module"], value["name"], seen)]
        if kind == "alias":
            return [(c, _via(r, f"{mod.name}:{name}")) for c, r in self.resolve_expr(mod, value["expr"], seen)]
        if kind == "call":
            func = mod.functions.get(value["function"])
            if func is None:
                return [([], {"unresolved": f"{mod.name}.{name} = {value['function']}()"})]
            out = []
            local = _Module(mod.name, mod.path, mod.is_package, ast.Module(body=[], type_ignores=[]))
            for node in ast.walk(func):  # names the function imports locally
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    local._collect([node], [])
            for conds, expr in _returns(func.body, [], mod):
                dotted = _dotted(expr)
                if dotted is None:
                    out.append((conds, {"unresolved": ast.unparse(expr)}))
                    continue
                for c, r in self.resolve_expr(mod, dotted, seen, local):
                    out.append((conds + c, _via(r, f"{mod.name}:{name} = {value['function']}()")))
            return out or [([], {"unresolved": f"{mod.name}.{name} = {value['function']}()"})]
        return [([], {"unresolved": f"{mod.name}.{name}"})]

    def resolve_expr(self, mod: _Module, dotted: str, seen: frozenset = frozenset(), local: _Module | None = None):
        """Resolve 'Name' or 'alias.Name' as written in `mod` (or first in a function's `local` scope)."""
        head, _, rest = dotted.partition(".")
        scope = local if local is not None and head in local.bindings else mod
        if not rest:
            if head not in scope.bindings:
                return [([], {"unresolved": f"{mod.name}: {dotted}"})]
            if scope is mod:
                return self.resolve(mod.name, head, seen)
            out = []
            for conds, value in scope.bindings[head]:
                out += [(conds + c, r) for c, r in self._resolve_value(scope, head, value, seen)]
            return out
        binding = scope.bindings.get(head, [([], {})])[0][1]
        prefix, _, name = rest.rpartition(".")
        if binding.get("kind") == "module":  # import x.y as z; z.Name
            return self.resolve(binding["module"] + ("." + prefix if prefix else ""), name, seen)
        if binding.get("kind") == "import":  # from x import y; y.Name, y a module
            return self.resolve(f"{binding['module']}.{binding['name']}" + ("." + prefix if prefix else ""), name, seen)
        module, _, name = dotted.rpartition(".")  # import x.y; x.y.Name
        return self.resolve(module, name, seen)


def _dedupe(conds: list[dict]) -> list[dict]:
    """A conjunction without repeats (a nested try repeats its guard)."""
    out = []
    for cond in conds:
        if cond not in out:
            out.append(cond)
    return out


def _via(ref: dict, step: str) -> dict:
    ref = dict(ref)
    ref["via"] = [step] + ref.get("via", [])
    return ref


def _cond_text(cond: dict) -> str:
    if "not" in cond:
        return "not " + _cond_text(cond["not"])
    if "env" in cond:
        test = cond["test"]
        if test == "equals":
            return f"env {cond['env']} == {cond['value']!r}"
        if test == "present":
            return f"env {cond['env']} present"
        if test == "vllm_envs":
            return f"envs.{cond['env']} true"
        return f"env {cond['env']} set"
    if "imports" in cond:
        return "importable: " + ", ".join(cond["imports"])
    return cond.get("expr", "?")


def _sha256(path: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def open_wheel(path: str) -> zipfile.ZipFile:
    """Open a wheel as a zip, or raise wheel.unreadable / wheel.not_vllm."""
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise RegistryError("wheel.unreadable", f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise RegistryError("wheel.unreadable", f"{path}: not a readable zip file ({e})") from None
    return zf


def wheel_metadata(zf: zipfile.ZipFile, path: str) -> dict:
    """Name and version from the wheel's METADATA; wheel.not_vllm unless it is vLLM."""
    names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if not names:
        raise RegistryError("wheel.not_vllm", f"{os.path.basename(path)}: no *.dist-info/METADATA, not a wheel")
    try:
        text = zf.read(names[0]).decode("utf-8", "replace")
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise RegistryError("wheel.unreadable", f"cannot read {names[0]}: {e}") from None
    headers = HeaderParser().parsestr(text)
    name = (headers.get("Name") or "").strip()
    if re.sub(r"[-_.]+", "-", name).lower() != "vllm":
        raise RegistryError("wheel.not_vllm", f"{os.path.basename(path)} is the wheel of {name or 'an unnamed project'!r}, not vllm")
    return {"name": name, "version": (headers.get("Version") or "").strip()}


def _registrations(factory: _Module) -> list[dict]:
    """The factory's register_connector(name, module_path, class_name) calls, in order."""
    found = []
    for stmt in factory.tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_connector"):
            continue
        args = [_const_str(a) for a in call.args]
        keywords = {k.arg: _const_str(k.value) for k in call.keywords}
        fields = ["name", "module_path", "class_name"]
        values = dict(zip(fields, args))
        values.update({k: v for k, v in keywords.items() if k in fields})
        if all(values.get(f) for f in fields):
            found.append({f: values[f] for f in fields} | {"line": stmt.lineno})
    return found


def read_wheel(path: str) -> dict:
    """Read a vLLM wheel's connector facts statically (see the module docstring)."""
    sha256, size = _sha256_or_error(path)
    with open_wheel(path) as zf:
        meta = wheel_metadata(zf, path)
        wheel = _Wheel(zf)
        if FACTORY_PATH not in wheel.files:
            raise RegistryError("wheel.no_factory", f"{os.path.basename(path)} has no {FACTORY_PATH}")
        factory = wheel.module(FACTORY_MODULE)
        if factory is None:
            raise RegistryError("wheel.no_factory", f"{FACTORY_PATH} in {os.path.basename(path)} does not parse")
        registrations = _registrations(factory)
        if not registrations:
            raise RegistryError("wheel.no_factory", f"{FACTORY_PATH} in {os.path.basename(path)} registers no connector")
        for path_in_wheel in sorted(wheel.files):
            if path_in_wheel.startswith(KV_TREE):
                wheel.module(_module_name(path_in_wheel))
        for reg in registrations:
            reg["resolves"] = [{"when": c, "ref": r} for c, r in wheel.resolve(reg["module_path"], reg["class_name"])]
        classes = _classes(wheel)
        marker = sorted(k for k, c in classes.items() if k.split(":")[1] == MARKER_NAME and c["module"].startswith("vllm.distributed."))
        return {
            "format": FACTS_FORMAT,
            "vllm_version": meta["version"],
            "wheel": {"file": os.path.basename(path), "sha256": sha256, "size": size},
            "factory": FACTORY_MODULE,
            "marker": marker[0] if marker else None,
            "registrations": registrations,
            "classes": classes,
            "exports": {k: v for k, v in _exports(wheel).items() if classes.get(k, {}).get("connector")},
            "switches": _switches(wheel),
            "unparsed": sorted(wheel.unparsed),
        }


def _sha256_or_error(path: str) -> tuple[str, int]:
    try:
        return _sha256(path)
    except FileNotFoundError:
        raise RegistryError("wheel.unreadable", f"{path}: no such file") from None
    except OSError as e:
        raise RegistryError("wheel.unreadable", f"{path}: {e.strerror or e}") from None


def _classes(wheel: _Wheel) -> dict:
    """Every class defined in a parsed module, with bases and HMA support resolved.

    Modules outside the kv_transfer tree that were parsed while resolving a
    name (a base class imported from elsewhere in vLLM) are included too.
    """
    out: dict[str, dict] = {}
    for name in sorted(n for n, m in wheel.modules.items() if m is not None):
        mod = wheel.modules[name]
        for cls_name, node in sorted(mod.classes.items()):
            bases, refs = [], []
            for base in node.bases:
                text = ast.unparse(base)
                bases.append(text)
                dotted = _dotted(base)
                resolved = wheel.resolve_expr(mod, dotted) if dotted else [([], {"unresolved": text})]
                # a base is fixed when the class statement runs: take the
                # alternative that holds by default (the last one) and keep
                # the others only when they differ.
                refs.append(_plain(resolved[-1][1]))
            out[f"{name}:{cls_name}"] = {"module": name, "name": cls_name, "line": node.lineno,
                                         "bases": bases, "base_refs": refs}
    # bases may resolve into modules parsed only now; give those classes too
    for name in sorted(n for n, m in wheel.modules.items() if m is not None):
        for cls_name, node in sorted(wheel.modules[name].classes.items()):
            key = f"{name}:{cls_name}"
            if key not in out:
                out[key] = {"module": name, "name": cls_name, "line": node.lineno,
                            "bases": [ast.unparse(b) for b in node.bases], "base_refs": []}
                for base in node.bases:
                    dotted = _dotted(base)
                    r = wheel.resolve_expr(wheel.modules[name], dotted) if dotted else [([], {"unresolved": ast.unparse(base)})]
                    out[key]["base_refs"].append(_plain(r[-1][1]))
    for key in out:
        _ancestry(out, key)
    return out


def _plain(ref: dict) -> str:
    """A ref as one string: 'class:mod:Name', 'external:mod.Name' or 'unresolved:text'."""
    for kind in ("class", "external", "unresolved"):
        if kind in ref:
            return f"{kind}:{ref[kind]}"
    return "unresolved:?"


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


def _exports(wheel: _Wheel) -> dict:
    """Classes a package of the kv_transfer tree re-exports: class key -> package.

    When several packages export a class, the shortest module path is kept
    (the one a user would write as kv_connector_module_path).
    """
    out: dict[str, str] = {}
    for name in sorted(n for n, m in wheel.modules.items() if m is not None and m.is_package and m.path.startswith(KV_TREE)):
        mod = wheel.modules[name]
        for bound, alternatives in sorted(mod.bindings.items()):
            if alternatives[0][1]["kind"] != "import":
                continue
            ref = wheel.resolve(name, bound)[-1][1]
            key = ref.get("class")
            if key and key.split(":")[1] == bound and (key not in out or len(name) < len(out[key])):
                out[key] = name
    return dict(sorted(out.items()))


def _switches(wheel: _Wheel) -> list[dict]:
    """Module-level names whose class depends on a condition (env var, import).

    Reported for every module of the kv_transfer tree, whether or not a
    registration uses the name, so that a new kind of switch is seen.
    """
    out = []
    for name in sorted(n for n, m in wheel.modules.items() if m is not None and m.path.startswith(KV_TREE)):
        mod = wheel.modules[name]
        for bound in sorted(mod.bindings):
            if not any(v["kind"] in ("alias", "call", "class") for _, v in mod.bindings[bound]):
                continue
            resolved = wheel.resolve(name, bound)
            classes = {_plain(r) for _, r in resolved}
            envs = sorted({c["env"] for conds, _ in resolved for c in _flatten(conds) if "env" in c})
            if len(classes) > 1 and any(r.get("class") or r.get("external") for _, r in resolved):
                out.append({"module": name, "name": bound, "env": envs,
                            "alternatives": [{"when": c, "ref": _plain(r)} for c, r in resolved]})
    return out


def _flatten(conds: list[dict]):
    for c in conds:
        yield c["not"] if "not" in c else c


# ---------------------------------------------------------------------------
# Rendering the registry


def _yaml_str(text: str) -> str:
    """A double-quoted YAML scalar (JSON string syntax is valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _signature(cls: dict) -> str:
    return f"{cls['name']}({', '.join(cls['bases'])})" if cls["bases"] else cls["name"]


def _class_note(facts: dict, key: str) -> str:
    """'Class(Bases)', plus the ancestor that declares SupportsHMA when it is another class."""
    cls = facts["classes"][key]
    note = _signature(cls)
    if cls.get("hma_from") and cls["hma_from"] != key:
        note += "; " + _signature(facts["classes"][cls["hma_from"]])
    return note


def _verdict(facts: dict, ref: str) -> tuple[bool, str, str | None]:
    """(supports_hma, note, class name) for a resolved reference."""
    kind, _, target = ref.partition(":")
    if kind == "class":
        cls = facts["classes"].get(target)
        if cls is None:
            raise RegistryError("facts.invalid", f"reference to an unknown class {target}")
        return cls["supports_hma"], _class_note(facts, target), cls["name"]
    if kind == "external":
        if target not in KNOWN_EXTERNAL:
            raise RegistryError("facts.unknown_external",
                                f"{target} is defined outside vLLM and its HMA support is not known; "
                                "add it to KNOWN_EXTERNAL in tools/vllm_registry.py with its source")
        supports, why = KNOWN_EXTERNAL[target]
        return supports, f"{target}: {why}", target.rsplit(".", 1)[1]
    raise RegistryError("facts.invalid", f"a registration resolves to nothing known: {target}")


def _assumed(cond: dict) -> bool | None:
    """How the registry reads a non-env condition: True/False, or None for an env test.

    A guarded import is taken to succeed: a deployment that names the
    connector has its package installed (the connector module itself imports
    it), and that is the case the registry describes; the fallback is noted.
    """
    if "not" in cond:
        inner = _assumed(cond["not"])
        return None if inner is None else not inner
    if "env" in cond:
        return None
    if "imports" in cond:
        return True
    raise RegistryError("facts.unknown_switch", f"a name switch on an unreadable condition: {cond.get('expr')}")


def _when(conds: list[dict]) -> dict:
    """Engine facts for a conjunction of env tests (facts.unknown_switch if none exists)."""
    when = {}
    for cond in conds:
        negated = "not" in cond
        inner = cond["not"] if negated else cond
        fact = ENGINE_ENV_FACTS.get(inner["env"])
        if fact is None or inner["test"] not in ("set", "vllm_envs"):
            raise RegistryError("facts.unknown_switch",
                                f"a name switch on {_cond_text(cond)}: the engine has no fact for it")
        when[fact] = not negated
    return when


def _entry(facts: dict, reg: dict) -> list[str]:
    """The YAML lines of one registered connector."""
    alternatives = reg["resolves"]
    # Walk the alternatives first match first: one that depends on an env
    # variable becomes a case, the first one that holds without any env
    # condition is the entry's default.  Import guards are read by _assumed.
    # A condition that negates an earlier case's whole condition is implied
    # by first-match order (the `else` of an `if`), so it is dropped.
    cases, default_index = [], None
    for index, alt in enumerate(alternatives):
        env_conds, holds = [], True
        for cond in alt["when"]:
            assumed = _assumed(cond)
            if assumed is None:
                if not ("not" in cond and [cond["not"]] in [c for c, _ in cases]):
                    env_conds.append(cond)
            elif not assumed:
                holds = False
        if not holds:
            continue
        if env_conds:
            cases.append((env_conds, alt["ref"]))
        else:
            default_index = index
            break
    if default_index is None:
        raise RegistryError("facts.invalid", f"{reg['name']}: no alternative holds by default")
    default = alternatives[default_index]
    supports, note, class_name = _verdict(facts, _plain(default["ref"]))
    if class_name != reg["class_name"]:
        note = f"alias of {class_name}; " + note
    # The default rests on an import succeeding: say what vLLM uses otherwise.
    if any("imports" in _flatten_one(c) for c in default["when"]):
        for alt in alternatives[default_index + 1:]:
            if any("imports" in _flatten_one(c) for c in alt["when"]):
                note += f"; if that import fails, {_verdict(facts, _plain(alt['ref']))[1]}"
                break
    lines = [f"  {reg['name']}:", f"    supports_hma: {_yaml_bool(supports)}",
             f"    module_path: {reg['module_path']}"]
    if reg["class_name"] != reg["name"]:
        lines.append(f"    class: {reg['class_name']}")
    lines.append(f"    note: {_yaml_str(note)}")
    if cases:
        lines.append("    cases:")
        used: set[str] = set()
        for conds, ref in cases:
            c_supports, c_note, c_class = _verdict(facts, _plain(ref))
            when = _when(conds)
            lines += [f"      - id: {_case_id(reg['name'], c_class, conds, used)}",
                      "        when: {" + ", ".join(f"{k}: {_yaml_bool(v)}" for k, v in when.items()) + "}",
                      f"        supports_hma: {_yaml_bool(c_supports)}",
                      f"        note: {_yaml_str(' and '.join(_cond_text(c) for c in conds) + ': ' + c_note)}"]
    return lines


def _yaml_bool(value: bool) -> str:
    return "true" if value else "false"


def _flatten_one(cond: dict) -> dict:
    return cond["not"] if "not" in cond else cond


def _case_id(entry: str, class_name: str, conds: list[dict], used: set) -> str:
    """'upstream' for LMCacheMPConnector -> LMCacheMPConnectorUpstream; else the env variable."""
    if class_name.startswith(entry) and class_name != entry:
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", class_name[len(entry):]).lower()
    else:
        base = "_".join(_flatten_one(c)["env"].lower() for c in conds)
    case_id, n = base, 2
    while case_id in used:
        case_id, n = f"{base}_{n}", n + 1
    used.add(case_id)
    return case_id


def render_registry(facts: dict) -> str:
    """The registry YAML for these facts, in the format of rules/connectors.yaml."""
    for field in ("vllm_version", "wheel", "registrations", "classes"):
        if field not in facts:
            raise RegistryError("facts.invalid", f"the facts have no {field!r}")
    wheel = facts["wheel"]
    lines = [
        f"# Generated by `hma-policy registry from-wheel` from {wheel['file']}",
        f"# (sha256 {wheel['sha256']}).",
        "# Do not edit by hand: regenerate with tools/vllm_registry.py (WHEEL, or --from-facts FACTS.json).",
        "#",
        f"# The connectors vLLM {facts['vllm_version']} registers in KVConnectorFactory, in registration",
        "# order, and whether each class inherits SupportsHMA (read from the class bases;",
        "# every note shows the class and, when another class declares SupportsHMA, that one).",
    ]
    if facts.get("marker") is None:
        lines.append("# This release has no SupportsHMA class: no connector supports HMA.")
    lines += ["kind: registry", f"vllm_version: {_yaml_str(facts['vllm_version'])}", "connectors:"]
    seen = set()
    for reg in facts["registrations"]:
        if reg["name"] in seen:  # vLLM raises on a second registration of a name
            raise RegistryError("facts.invalid", f"{reg['name']} is registered twice")
        seen.add(reg["name"])
        lines += _entry(facts, reg)
    unregistered = _unregistered(facts)
    if unregistered:
        lines.append("  # Shipped with vLLM but not registered: reachable only by module path.")
        for key, module_path in unregistered:
            cls = facts["classes"][key]
            if cls["name"] in seen:
                continue
            seen.add(cls["name"])
            lines += [f"  {cls['name']}:", "    registered: false",
                      f"    supports_hma: {_yaml_bool(cls['supports_hma'])}",
                      f"    module_path: {module_path}",
                      f"    note: {_yaml_str(_class_note(facts, key) + '; not in the factory registry')}"]
    return "\n".join(lines) + "\n"


def _unregistered(facts: dict) -> list[tuple[str, str]]:
    """Connector classes of the kv_connector tree that no registration reaches.

    Only leaf classes count (a class no other connector derives from) that a
    package re-exports in its __init__: that is how vLLM ships a connector
    meant to be used by module path (e.g. UMBPStoreConnector, exported by
    kv_connector/v1/umbp/__init__.py).  Helper and base classes inside a
    connector's own module are left out.
    """
    reached = set()
    for reg in facts["registrations"]:
        for alt in reg["resolves"]:
            if "class" in alt["ref"]:
                reached.add(alt["ref"]["class"])
    bases = {r[len("class:"):] for c in facts["classes"].values() for r in c["base_refs"] if r.startswith("class:")}
    out = []
    for key, exported in sorted(facts.get("exports", {}).items()):
        cls = facts["classes"].get(key)
        if cls and cls["connector"] and key not in reached and key not in bases and cls["name"] not in CONNECTOR_BASES:
            out.append((key, exported))
    return out


# ---------------------------------------------------------------------------
# Command line


def _write(path: str | None, text: str) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, path)


def facts_json(facts: dict) -> str:
    return json.dumps(facts, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", nargs="?", help="a vLLM wheel (.whl)")
    parser.add_argument("-o", "--output", help="write the registry YAML here (default: stdout)")
    parser.add_argument("--facts", help="also write the facts JSON here")
    parser.add_argument("--options", help="also write the release's option list (JSON) here")
    parser.add_argument("--from-facts", metavar="FACTS.json", help="render from recorded facts instead of a wheel")
    args = parser.parse_args(argv)
    try:
        if bool(args.wheel) == bool(args.from_facts):
            parser.error("give either WHEEL or --from-facts FACTS.json")
        if args.from_facts:
            try:
                with open(args.from_facts, encoding="utf-8") as f:
                    facts = json.load(f)
            except (OSError, ValueError) as e:
                raise RegistryError("facts.invalid", f"{args.from_facts}: {e}") from None
            if not isinstance(facts, dict) or facts.get("format") != FACTS_FORMAT:
                raise RegistryError("facts.invalid", f"{args.from_facts}: not a facts file of format {FACTS_FORMAT}")
        else:
            facts = read_wheel(args.wheel)
            if args.facts:
                _write(args.facts, facts_json(facts))
            if args.options:
                # vllm_options imports this module by name: give it this copy
                # (run as a script it is __main__), so RegistryError is one class.
                sys.modules.setdefault("vllm_registry", sys.modules[__name__])
                sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                from vllm_options import options_json, read_options

                _write(args.options, options_json(read_options(args.wheel)))
        _write(args.output, render_registry(facts))
    except RegistryError as e:
        print(f"error: {e.code}: {e.message}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: io: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
