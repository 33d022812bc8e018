"""Which modules of a vLLM wheel exist, and which names each binds at module
level (``hma-policy registry from-wheel --modules``).

vLLM's ``KVConnectorFactory`` resolves a ``kv_connector_module_path`` with
``importlib.import_module(path)`` and then ``getattr(module, kv_connector)``:
a path the release does not ship fails with ModuleNotFoundError, a name the
module does not bind with "Class X not found in M". Both are facts of the
release's wheel, read here off the syntax tree (source.py; nothing runs), for
every module under :data:`PREFIX`:

- ``names``: what ``getattr`` finds for sure: the targets of module-level
  ``class``/``def`` statements, imports and assignments, where every way
  through the module binds them (both branches of an ``if``, the body and
  every handler of a ``try``);
- ``maybe``: names bound only on some way through (one branch, a loop, a
  ``try`` body an import error may cut short, a ``del``), and a package's
  submodules (an attribute once some code imports them): ``getattr`` may or
  may not find them;
- ``open``: the module defines ``__getattr__`` or star-imports, so any other
  name may be found as well.

The rules read the answer as facts (``module_in_release``, ``class_in_module``
in engine/core/facts.py); a name neither bound nor possibly bound is ``no``
only in a module that is not ``open``.

Why :data:`PREFIX`: every connector vLLM ships, registered or not, lives in
the KV-transfer tree (the factory is ``...kv_transfer.kv_connector.factory``),
and it is the tree the registry is read from (registry.KV_TREE). A module path
elsewhere in vLLM names no connector of vLLM's; its existence is not
recorded, and the engine treats it as outside vLLM: unknown.
"""

from __future__ import annotations

import ast
import json
import sys

from .source import Wheel, dotted, module_name

# `try`, and `try` with `except*` (ast.TryStar, Python 3.11 and later: the same fields).
if sys.version_info >= (3, 11):
    _TRY = (ast.Try, ast.TryStar)
else:
    _TRY = (ast.Try,)

__all__ = ["PREFIX", "MODULES_FORMAT", "read_modules", "modules_json"]

PREFIX = "vllm.distributed.kv_transfer"
MODULES_FORMAT = 1


class _Bound:
    """The names a run of statements binds: ``sure`` on every way through,
    ``maybe`` on some; ``open`` when a star import or ``__getattr__`` makes
    any name possible."""

    def __init__(self, sure: set[str] | None = None, maybe: set[str] | None = None, open_: bool = False):
        self.sure, self.maybe, self.open = sure or set(), maybe or set(), open_

    def then(self, other: "_Bound") -> None:
        """Statements run one after the other: both bind."""
        self.sure |= other.sure
        self.maybe |= other.maybe
        self.open = self.open or other.open

    @staticmethod
    def either(*ways: "_Bound") -> "_Bound":
        """Exactly one of these ways runs: sure where every way binds."""
        sure = set.intersection(*(w.sure for w in ways))
        every = set().union(*(w.sure | w.maybe for w in ways))
        return _Bound(sure, every - sure, any(w.open for w in ways))

    def perhaps(self) -> "_Bound":
        """These statements may run or not (a loop body)."""
        return _Bound(set(), self.sure | self.maybe, self.open)


def _targets(node: ast.AST) -> set[str]:
    """The names an assignment target binds (tuples and starred unpacked)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return set()  # an attribute or a subscript binds no module-level name


def _walrus(stmt: ast.stmt) -> set[str]:
    """Names bound by ``:=`` in a module-level statement (outside nested scopes)."""
    out: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        if node is stmt or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _is_type_checking(test: ast.AST) -> bool:
    return dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _bound(stmts: list[ast.stmt]) -> _Bound:
    """What a run of module-level statements binds (see the module docstring)."""
    out = _Bound()
    for stmt in stmts:
        if isinstance(stmt, ast.Delete):  # bound before, gone after: at most possible
            gone = set().union(*(_targets(t) for t in stmt.targets))
            out.sure -= gone
            out.maybe |= gone
            continue
        out.then(_statement(stmt))
    return out


def _statement(stmt: ast.stmt) -> _Bound:
    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return _Bound({stmt.name}, open_=stmt.name == "__getattr__")
    if isinstance(stmt, ast.Import):
        # `import a.b` binds `a`; `import a.b as c` binds `c`.
        return _Bound({alias.asname or alias.name.split(".")[0] for alias in stmt.names})
    if isinstance(stmt, ast.ImportFrom):
        names = {alias.asname or alias.name for alias in stmt.names if alias.name != "*"}
        return _Bound(names, open_=any(alias.name == "*" for alias in stmt.names))
    if isinstance(stmt, ast.Assign):
        return _Bound(set().union(*(_targets(t) for t in stmt.targets)) | _walrus(stmt))
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        # `x: int` without a value binds nothing; `x += 1` rebinds a bound name.
        bound = _targets(stmt.target) if getattr(stmt, "value", None) is not None else set()
        return _Bound(bound | _walrus(stmt))
    if isinstance(stmt, ast.If):
        if _is_type_checking(stmt.test):
            return _bound(stmt.orelse)  # the body never runs
        test = _Bound(_walrus(ast.Expr(stmt.test)))
        test.then(_Bound.either(_bound(stmt.body), _bound(stmt.orelse)))
        return test
    if isinstance(stmt, _TRY):
        # The body may stop at any statement: what it binds is only sure
        # where every handler binds it too (`try: import x` / `except: x = None`).
        body = _bound(stmt.body + stmt.orelse)
        handlers = [_handler(h) for h in stmt.handlers]
        out = _Bound.either(body, *handlers) if handlers else body.perhaps()
        out.then(_bound(stmt.finalbody))
        return out
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        loop = _Bound(_targets(stmt.target)) if isinstance(stmt, (ast.For, ast.AsyncFor)) else _Bound()
        loop.then(_bound(stmt.body))
        loop.then(_bound(stmt.orelse))
        return loop.perhaps()
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        out = _Bound(set().union(*(_targets(i.optional_vars) for i in stmt.items if i.optional_vars)))
        out.then(_bound(stmt.body))
        return out
    if isinstance(stmt, ast.Match):
        return _Bound.either(_Bound(), *(_bound(case.body) for case in stmt.cases)).perhaps()
    if isinstance(stmt, ast.Global):
        return _Bound()
    return _Bound(_walrus(stmt))


def _handler(handler: ast.ExceptHandler) -> _Bound:
    """What an except clause binds; its `as name` is deleted again at its
    end (Python does), so that name is at most possible."""
    out = _bound(handler.body)
    if handler.name:
        out.maybe.add(handler.name)
    return out


def read_modules(wheel: Wheel) -> dict:
    """Every module under :data:`PREFIX` the wheel ships, with what it binds.

    A module that does not parse is listed with ``open: true`` and no names:
    it exists, and what it binds is unknown."""
    base = PREFIX.replace(".", "/") + "/"
    files = sorted(f for f in wheel.files if f.startswith(base))
    names = {module_name(f) for f in files}
    out: dict[str, dict] = {}
    for name in sorted(names):
        mod = wheel.module(name)
        if mod is None:
            out[name] = {"names": [], "maybe": [], "open": True}
            continue
        bound = _bound(mod.tree.body)
        maybe = set(bound.maybe)
        if mod.is_package:  # `pkg.sub` is an attribute of `pkg` once anything imported it
            maybe |= {n.rsplit(".", 1)[1] for n in names if n.rpartition(".")[0] == name}
        out[name] = {"names": sorted(bound.sure), "maybe": sorted(maybe - bound.sure), "open": bound.open}
    return {"prefix": PREFIX, "modules": out}


def modules_json(facts: dict) -> str:
    """The bundled module table of a release (rules/modules/), from its facts:
    deterministic, so recorded facts re-render it byte for byte."""
    wheel = facts["wheel"]
    data = {
        "kind": "modules",
        "format": MODULES_FORMAT,
        "vllm_version": facts["vllm_version"],
        "wheel": {"file": wheel["file"], "sha256": wheel["sha256"]},
        "prefix": facts["modules"]["prefix"],
        "modules": facts["modules"]["modules"],
    }
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
