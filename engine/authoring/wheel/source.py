"""A wheel's Python source, read statically: the zip, its metadata, each
module's top-level names, and where a name leads across modules.

A wheel is opened as a zip and each module needed is parsed with
:func:`ast.parse`, which builds a syntax tree and runs nothing. Every fact is
read off that tree: a name bound by ``class``, ``import``, ``from ... import``
or an assignment of a dotted name, each binding with the conditions under
which it holds (an ``if`` on an environment variable, a ``try`` around an
import). Nothing from the wheel is imported, executed or evaluated.

:class:`Wheel` resolves a name to its *alternatives*: ``(conditions, ref)``
pairs read first match first, where a ref is ``{"class": "module:Name"}``,
``{"external": "module.Name"}`` (a class outside the wheel) or
``{"unresolved": text}``.
"""

from __future__ import annotations

import ast
import hashlib
import lzma
import re
import zipfile
import zlib
from email.parser import HeaderParser
from typing import Any

from ...core.errors import HMAPolicyError, Problem
from ...fileio import open_regular

__all__ = ["WheelError", "Module", "Wheel", "open_wheel", "wheel_metadata", "file_digest", "module_name", "dotted",
           "const_str", "json_constant", "returns", "plain", "positive", "read_member", "MAX_MEMBER"]

# What zipfile raises for a damaged archive or member (a truncated file,
# a bad CRC, compressed data that does not inflate, an unsupported
# compression method, an encrypted member).
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
              RuntimeError, zlib.error, lzma.LZMAError)
# The largest member read (uncompressed): vLLM's largest Python file is a
# few hundred KiB; a member declaring more is refused rather than inflated.
MAX_MEMBER = 32 * 1024 * 1024


class WheelError(HMAPolicyError):
    """A wheel or facts file that cannot be read or rendered: one problem
    with a stable code (``wheel.unreadable``, ``facts.invalid``, ...) and the
    file it is about, reported by the command line as one line, exit 2."""

    def __init__(self, code: str, message: str, file: str | None = None):
        self.code, self.message = code, message
        super().__init__([Problem(code, message, file=file)])

    def at(self, file: str) -> "WheelError":
        """The same problem, located in ``file`` unless it names a file already."""
        return self if self.problems[0].file is not None else WheelError(self.code, self.message, file)


# -- the zip -------------------------------------------------------------------

def file_digest(path: str) -> tuple[str, int]:
    """(sha256 hex, size in bytes) of a file, or wheel.unreadable."""
    digest, size = hashlib.sha256(), 0
    try:
        with open_regular(path) as stream:  # a FIFO or a device would block, or never end
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    except FileNotFoundError:
        raise WheelError("wheel.unreadable", "no such file", path) from None
    except OSError as exc:
        raise WheelError("wheel.unreadable", f"cannot read it: {exc.strerror or exc}", path) from None
    return digest.hexdigest(), size


def open_wheel(path: str) -> zipfile.ZipFile:
    """The wheel as a zip, or wheel.unreadable."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError("wheel.unreadable", "no such file", path) from None
    except ZIP_ERRORS as exc:
        raise WheelError("wheel.unreadable", f"not a readable zip file ({exc})", path) from None


def wheel_metadata(zf: zipfile.ZipFile, path: str) -> dict:
    """Name and version from the wheel's METADATA; wheel.not_vllm unless it is vLLM's."""
    names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if not names:
        raise WheelError("wheel.not_vllm", "no *.dist-info/METADATA: not a wheel", path)
    text = read_member(zf, names[0], path).decode("utf-8", "replace")
    headers = HeaderParser().parsestr(text)
    name = (headers.get("Name") or "").strip()
    if re.sub(r"[-_.]+", "-", name).lower() != "vllm":
        raise WheelError("wheel.not_vllm", f"the wheel of {name or 'an unnamed project'!r}, not vllm", path)
    return {"name": name, "version": (headers.get("Version") or "").strip()}


def read_member(zf: zipfile.ZipFile, member: str, path: str) -> bytes:
    """A member's bytes, or wheel.unreadable (a member over MAX_MEMBER included)."""
    try:
        size = zf.getinfo(member).file_size
        if size > MAX_MEMBER:
            raise WheelError("wheel.unreadable", f"{member} is {size} bytes uncompressed, over the "
                             f"{MAX_MEMBER // (1024 * 1024)} MiB a file of the wheel may have here", path)
        return zf.read(member)
    except ZIP_ERRORS as exc:
        raise WheelError("wheel.unreadable", f"cannot read {member} from the wheel: {exc}", path) from None


# -- syntax helpers --------------------------------------------------------------

def module_name(path: str) -> str:
    """'vllm/a/b.py' -> 'vllm.a.b'; 'vllm/a/__init__.py' -> 'vllm.a'."""
    name = path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def dotted(node: ast.AST) -> str | None:
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def json_constant(value: object) -> bool:
    """Whether a constant of the source is one a JSON document can hold
    (not bytes, ``...`` or a complex number): the wheel's facts are JSON."""
    return value is None or isinstance(value, (str, int, float))


def const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def positive(cond: dict) -> dict:
    """A condition without its negation."""
    return cond["not"] if "not" in cond else cond


def plain(ref: dict) -> str:
    """A ref as one string: 'class:mod:Name', 'external:mod.Name' or 'unresolved:text'."""
    for kind in ("class", "external", "unresolved"):
        if kind in ref:
            return f"{kind}:{ref[kind]}"
    return "unresolved:?"


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
    if isinstance(test, ast.Call) and dotted(test.func) in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
        var = const_str(test.args[0]) if test.args else None
        if var:
            default = const_str(test.args[1]) if len(test.args) > 1 else None
            cond: dict[str, Any] = {"env": var, "test": "set"}
            if default:
                cond["default"] = default
            return cond
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        env = const_str(left)
        if isinstance(op, (ast.In, ast.NotIn)) and dotted(right) in ("os.environ", "environ") and env:
            cond = {"env": env, "test": "present"}
            return cond if isinstance(op, ast.In) else {"not": cond}
        if isinstance(op, (ast.Eq, ast.NotEq)):
            inner = _env_condition(left)
            constant = right.value if isinstance(right, ast.Constant) else None
            # `== b"1"` or `== ...` is not an env test read here (and `== None` is kept as text, below).
            value = constant if json_constant(constant) else None
            if inner and "env" in inner and value is not None:
                cond = {"env": inner["env"], "test": "equals", "value": value}
                return cond if isinstance(op, ast.Eq) else {"not": cond}
    name = dotted(test)
    if name and name.startswith("envs.") and name.count(".") == 1:
        return {"env": name.split(".")[1], "test": "vllm_envs"}
    return None


def _condition(test: ast.AST) -> dict:
    return _env_condition(test) or {"expr": ast.unparse(test)}


def _is_type_checking(test: ast.AST) -> bool:
    return dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(dotted(t) in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException") for t in types)


def _try_condition(stmt: ast.Try, module: "Module") -> dict:
    """The condition a try body holds under: the modules it imports succeed."""
    found = []
    for node in (n for s in stmt.body for n in ast.walk(s)):
        if isinstance(node, ast.ImportFrom):
            found.append(module.absolute(node))
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return {"imports": sorted(set(found))} if found else {"expr": "try body runs without error"}


# -- one module ----------------------------------------------------------------------

class Module:
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
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        # the last expression assigned to each module-level name (type
        # aliases such as `ModelDType = Literal[...]`, read by options.py)
        self.values: dict[str, ast.expr] = {}
        self.collect(tree.body, [])

    def absolute(self, node: ast.ImportFrom) -> str:
        """The absolute module of a `from ... import`, relative levels resolved."""
        if not node.level:
            return node.module or ""
        package = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _bind(self, name: str, conds: list[dict], value: dict) -> None:
        old = self.bindings.get(name, [])
        self.bindings[name] = [(conds, value)] + (old if conds else [])

    def collect(self, stmts: list[ast.stmt], conds: list[dict]) -> None:
        """Record the bindings of these statements, each under ``conds``."""
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
                    name = dotted(value)
                    if name:
                        self._bind(target.id, conds, {"kind": "alias", "expr": name, "line": line})
                    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args:
                        self._bind(target.id, conds, {"kind": "call", "function": value.func.id, "line": line})
            elif isinstance(stmt, ast.If):
                if _is_type_checking(stmt.test):
                    self.collect(stmt.orelse, conds)  # the body never runs
                    continue
                cond = _condition(stmt.test)
                # The branches exclude each other; taking `else` first puts
                # the `if` branch's binding in front, as it reads.
                self.collect(stmt.orelse, conds + [{"not": cond}])
                self.collect(stmt.body, conds + [cond])
            elif isinstance(stmt, ast.Try):
                ok = _try_condition(stmt, self)
                self.collect(stmt.body + stmt.orelse, conds + [ok])
                for handler in stmt.handlers:
                    if _catches_import_error(handler):
                        self.collect(handler.body, conds + [{"not": ok}])
                self.collect(stmt.finalbody, conds)


def returns(stmts: list[ast.stmt], conds: list[dict], module: Module) -> list[tuple[list[dict], ast.expr]]:
    """The return statements of a function body, as first-match alternatives."""
    out: list[tuple[list[dict], ast.expr]] = []
    for stmt in stmts:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            out.append((conds, stmt.value))
            return out  # nothing after an unconditional return runs
        if isinstance(stmt, ast.If):
            cond = _condition(stmt.test)
            out += returns(stmt.body, conds + [cond], module)
            out += returns(stmt.orelse, conds + [{"not": cond}], module)
        elif isinstance(stmt, ast.Try):
            ok = _try_condition(stmt, module)
            out += returns(stmt.body + stmt.orelse, conds + [ok], module)
            for handler in stmt.handlers:
                if _catches_import_error(handler):
                    out += returns(handler.body, conds + [{"not": ok}], module)
    return out


# -- the wheel's modules, and names resolved across them ----------------------------

def _dedupe(conds: list[dict]) -> list[dict]:
    """A conjunction without repeats (a nested try repeats its guard)."""
    out: list[dict] = []
    for cond in conds:
        if cond not in out:
            out.append(cond)
    return out


def _via(ref: dict, step: str) -> dict:
    return {**ref, "via": [step] + ref.get("via", [])}


class Wheel:
    """The wheel's Python sources, parsed on demand, and name resolution over them."""

    def __init__(self, zf: zipfile.ZipFile, path: str):
        self.zf, self.path = zf, path
        self.files = {n for n in zf.namelist() if n.endswith(".py")}
        self.modules: dict[str, Module | None] = {}
        self.unparsed: list[str] = []

    def path_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (base + ".py", base + "/__init__.py"):
            if candidate in self.files:
                return candidate
        return None

    def read(self, member: str) -> bytes:
        return read_member(self.zf, member, self.path)

    def module(self, name: str) -> Module | None:
        """The parsed module, or None when the wheel has no such file or it does not parse."""
        if name not in self.modules:
            path = self.path_of(name)
            self.modules[name] = None
            if path is not None:
                source = self.read(path)
                try:
                    tree = ast.parse(source, filename=path)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    self.unparsed.append(path)
                else:
                    self.modules[name] = Module(name, path, path.endswith("/__init__.py"), tree)
        return self.modules[name]

    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> list[tuple[list[dict], dict]]:
        """The alternatives `module.name` stands for; "via" lists the aliases followed."""
        key = (module, name)
        if key in seen:
            return [([], {"unresolved": f"{module}.{name} (import cycle)"})]
        seen = seen | {key}
        mod = self.module(module)
        if mod is None:
            if self.path_of(module) is None and not module.startswith("vllm.") and module != "vllm":
                return [([], {"external": f"{module}.{name}"})]
            if self.path_of(f"{module}.{name}") is not None:
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

    def _resolve_value(self, mod: Module, name: str, value: dict, seen: frozenset) -> list[tuple[list[dict], dict]]:
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
            local = Module(mod.name, mod.path, mod.is_package, ast.Module(body=[], type_ignores=[]))
            for node in ast.walk(func):  # names the function imports locally
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    local.collect([node], [])
            for conds, expr in returns(func.body, [], mod):
                name_read = dotted(expr)
                if name_read is None:
                    out.append((conds, {"unresolved": ast.unparse(expr)}))
                    continue
                for c, r in self.resolve_expr(mod, name_read, seen, local):
                    out.append((conds + c, _via(r, f"{mod.name}:{name} = {value['function']}()")))
            return out or [([], {"unresolved": f"{mod.name}.{name} = {value['function']}()"})]
        return [([], {"unresolved": f"{mod.name}.{name}"})]

    def resolve_expr(self, mod: Module, expr: str, seen: frozenset = frozenset(),
                     local: Module | None = None) -> list[tuple[list[dict], dict]]:
        """Resolve 'Name' or 'alias.Name' as written in `mod` (or first in a function's `local` scope)."""
        head, _, rest = expr.partition(".")
        scope = local if local is not None and head in local.bindings else mod
        if not rest:
            if head not in scope.bindings:
                return [([], {"unresolved": f"{mod.name}: {expr}"})]
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
        module, _, name = expr.rpartition(".")  # import x.y; x.y.Name
        return self.resolve(module, name, seen)
