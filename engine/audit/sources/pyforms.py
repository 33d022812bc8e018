"""The forms of the statements that make and change a script's lists and
dicts, as plain functions of the syntax tree: what a new list is made from
(``BASE + [...]``, ``list(BASE)``, ``BASE.copy()``, ``BASE[:]``), what holds
a list (``cmd``, ``self.cmd``), a dotted name, a dict written out
(``{"k": v}``, ``dict(k=v)``) and what a statement changes in one
(``d["k"] = v``, ``d.update(...)``); the names an assignment binds, and
whether one expression is written inside another. Script (pyscript.py)
records them as it binds a file; the command lists (pylists.py) and the
reader (python.py) read what it recorded.
"""

from __future__ import annotations

import ast
from typing import NamedTuple, cast

__all__ = ["made_from", "copy_of", "added_to_itself", "list_holder", "dotted_name", "DictWritten", "dict_written", "dict_changes",
           "bound_names", "within", "imported_from", "block_ends", "Change", "is_vllm_module", "is_environ", "splitting",
           "imported_by_call", "vllm_imports", "attribute_changes", "CLI_ENGINES", "returned", "string_built", "ipython_shell", "ipython_install"]

# The methods that change a dict: `update` with its keys written out is followed, the others are not.
_DICT_CHANGES = frozenset({"update", "pop", "popitem", "setdefault", "clear"})


def made_from(node: ast.expr) -> tuple[ast.expr, ast.expr | None] | None:
    """The list a new list is made from, and what it adds: ``base + [...]``
    (a display's own ``+`` is its continuation) or ``copy + [...]``, a copy
    (:func:`copy_of`) alone. None for any other expression."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = copy_of(node.left) or node.left
        return (left, node.right) if isinstance(left, (ast.Name, ast.Attribute)) else None
    copied = copy_of(node)
    return (copied, None) if copied is not None else None


def copy_of(node: ast.expr) -> ast.expr | None:
    """What ``list(x)``, ``x.copy()`` or ``x[:]`` copies (None for any other expression)."""
    if isinstance(node, ast.Call) and not node.keywords:
        if isinstance(node.func, ast.Name) and node.func.id == "list" and len(node.args) == 1:
            return node.args[0]
        if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not node.args:
            return node.func.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) \
            and node.slice.lower is None and node.slice.upper is None and node.slice.step is None:
        return node.value
    return None


def added_to_itself(node: ast.Assign) -> ast.Name | None:
    """The name of ``cmd = cmd + more``; None for any other assignment."""
    target, value = node.targets[0] if len(node.targets) == 1 else None, node.value
    if isinstance(target, ast.Name) and isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) \
            and isinstance(value.left, ast.Name) and value.left.id == target.id:
        return target
    return None


def list_holder(node: ast.expr) -> str | None:
    """What holds a list the script grows, as written: a name (``cmd``) or
    a dotted name (``self.cmd``); None for any other target."""
    dotted = dotted_name(node)
    return ".".join(dotted) if dotted else None


def dotted_name(node: ast.expr) -> tuple[str, ...]:
    """A dotted name as its parts (``sys.executable``: ("sys", "executable")); () for any other expression."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ()
    parts.append(node.id)
    return tuple(reversed(parts))


class DictWritten(NamedTuple):
    """A dict written out, ``{"k": v}`` or ``dict(k=v)``, maybe with other
    dicts unpacked into it (``{"k": v, **other}``, ``dict(k=v, **other)``)."""

    entries: list[tuple[str, ast.expr, bool]]  # key, value, whether an unpacking may replace it
    unpacked: list[ast.expr]                   # the expressions unpacked into it


def dict_written(node: ast.expr) -> DictWritten | None:
    """The dict ``node`` writes out, in order; None for any other expression
    (a key computed, ``dict(other)``). In a literal, an unpacking written
    after a key may replace its value; ``dict()`` refuses a key given twice,
    so none of its own can be."""
    if isinstance(node, ast.Dict):
        entries: list[tuple[str, ast.expr, int]] = []
        unpacked: list[ast.expr] = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                unpacked.append(v)
            elif (key := _key(k)) is not None:
                entries.append((key, v, len(unpacked)))
            else:
                return None
        return DictWritten([(k, v, before < len(unpacked)) for k, v, before in entries], unpacked)
    if isinstance(node, ast.Call) and dotted_name(node.func) == ("dict",) and not node.args:
        return DictWritten([(k.arg, k.value, False) for k in node.keywords if k.arg],
                           [k.value for k in node.keywords if not k.arg])
    return None


def dict_changes(node: ast.stmt) -> list[tuple[str, str | None, ast.expr | None]]:
    """What the statement ``node`` changes in a dict a name holds: (name,
    key, value) for ``d["k"] = v`` and ``d.update({"k": v})`` or
    ``d.update(k=v)``; (name, None, None) for a change not followed
    (``d[k()] = v``, ``d.update(other)``, ``del d[k]``, ``d.pop(k)``,
    ``d |= other``). None of these binds the name."""
    if isinstance(node, ast.Assign):
        return [(t.value.id, _key(t.slice), node.value if _key(t.slice) is not None else None) for t in node.targets
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
    if isinstance(node, (ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, ast.Delete) else [node.target]
        changed = [t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.BitOr):
            changed.append(node.target.id)
        return [(name, None, None) for name in changed]
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name) and node.value.func.attr in _DICT_CHANGES):
        return []
    call, name, method = node.value, node.value.func.value.id, node.value.func.attr
    given = call.args[0] if len(call.args) == 1 and not call.keywords else None
    written = dict_written(given) if method == "update" and given is not None else None
    if written is not None and not written.unpacked:  # `d.update({"k": v})`, `d.update(dict(k=v))`
        return [(name, key, value) for key, value, _ in written.entries]
    if method == "update" and not call.args and all(k.arg for k in call.keywords):
        return [(name, k.arg, k.value) for k in call.keywords]
    return [(name, None, None)]


def _key(node: ast.expr | None) -> str | None:
    """A dict key written as a string literal (None for any other)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds (a tuple binds each)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in bound_names(element)]
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    return []


def within(node: ast.expr | ast.stmt, outer: ast.expr | ast.stmt) -> bool:
    """Whether ``node`` is written inside ``outer`` (by their places in the file)."""
    return (outer.lineno, outer.col_offset) <= (node.lineno, node.col_offset) and \
        (node.end_lineno or 0, node.end_col_offset or 0) <= (outer.end_lineno or 0, outer.end_col_offset or 0)


def imported_from(scope: ast.AST, name: str) -> str | None:
    """The module a scope's own statements (not those of a function or class
    inside it) import ``name`` from (`from tensorrt_llm import LLM`), or
    None where they import no such name."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return "." * node.level + (node.module or "")
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return None


def block_ends(node: ast.AST) -> dict[int, tuple[int, int]]:
    """The statements of each block (a body of statements) of ``node``, by
    id, each with the last line of its block and the block's id."""
    ends: dict[int, tuple[int, int]] = {}
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            last = block[-1].end_lineno or 0
            ends.update((id(statement), (last, id(block))) for statement in block)
    return ends


class Change(NamedTuple):
    """A statement that grows a list after it is written: ``cmd += [...]`` (``how`` "+="), ``cmd = cmd +
    [...]`` ("= +"), ``cmd.extend(...)``, ``.append(...)`` or ``.insert(...)``, with what it adds (None: nothing read)."""

    line: int
    how: str
    value: ast.expr | None
    straight: bool  # a statement of the scope's own body (not in an if, a loop, a try)
    # Where it is a statement of one branch of an `if`: that `if`, whether the branch is its body
    # (True) or its `else` (False), and the id of the block the `if` is a statement of.
    branch: tuple[ast.If, bool, int] | None = None
    block: int = 0  # the id of the block (a body of statements) it is a statement of


def is_vllm_module(module: str) -> bool:
    return module == "vllm" or module.startswith("vllm.")


def is_environ(node: ast.expr) -> bool:
    """``os.environ`` (or ``environ`` imported from os)."""
    return dotted_name(node) in (("os", "environ"), ("environ",))


def splitting(node: ast.expr) -> tuple[ast.expr, bool] | None:
    """The string ``node`` splits into a command's words, and whether it
    splits it as a shell would (``shlex.split(cmd)``) or at blanks
    (``cmd.split()``); None for any other expression."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "split" and not node.args:
        return node.func.value, False
    if dotted_name(node.func) == ("shlex", "split") and len(node.args) == 1:
        return node.args[0], True
    return None


def imported_by_call(node: ast.Assign, classes: frozenset[str]) -> tuple[str, str] | None:
    """The name and vLLM class of ``LLM, ok = optional_import("vllm", "LLM")``
    (EvolvingLMMs-Lab/lmms-eval; MONAI's and others' helpers that import a
    name when its package is installed): a call of a function whose name
    ends in ``import``, given a vLLM module and one of ``classes`` as strings."""
    call, target = node.value, node.targets[0] if len(node.targets) == 1 else None
    if isinstance(target, ast.Tuple) and target.elts:
        target = target.elts[0]
    if not (isinstance(call, ast.Call) and isinstance(target, ast.Name) and len(call.args) >= 2
            and (dotted_name(call.func) or ("",))[-1].lower().endswith("import")):
        return None
    module, name = (a.value if isinstance(a, ast.Constant) else None for a in call.args[:2])
    return (target.id, name) if isinstance(module, str) and is_vllm_module(module) and name in classes \
        else None


# vLLM's functions that build an engine from a parsed command line, as `AsyncEngineArgs.from_cli_args(args)`
# does: the OpenAI server's `build_async_engine_client(args)`, which BentoML's OpenLLM model services call, and
# its `run_server(args)`, which `vllm serve` runs (`uvloop.run(run_server(args))`, as inclusionAI/AReaL's server does).
CLI_ENGINES = {"build_async_engine_client": "AsyncEngineArgs.from_cli_args", "run_server": "AsyncEngineArgs.from_cli_args"}


def vllm_imports(tree: ast.AST, classes: frozenset[str]) -> tuple[dict[str, str], set[str]]:
    """What ``tree`` imports of vLLM: each local name of one of its
    ``classes`` or :data:`CLI_ENGINES` (by what it is: ``LLM``,
    ``AsyncEngineArgs.from_cli_args``), and the local names of the vllm
    package or a module in it."""
    imported: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and is_vllm_module(node.module or ""):
            for alias in node.names:
                if alias.name in classes or alias.name in CLI_ENGINES:
                    imported[alias.asname or alias.name] = CLI_ENGINES.get(alias.name, alias.name)
        elif isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name.split(".")[0] for alias in node.names if is_vllm_module(alias.name))
        elif isinstance(node, ast.Assign) and (named := imported_by_call(node, classes)) is not None:
            imported[named[0]] = named[1]
    return imported, modules


def attribute_changes(node: ast.stmt) -> list[tuple[str, str | None, ast.expr | None]]:
    """What the statement ``node`` sets on an object a name holds: (name,
    attr, value) for ``name.attr = value`` and ``setattr(name, "attr",
    value)``; (name, None, None) for any attribute at all:
    ``setattr(name, key, value)`` of a name not written,
    ``name.__dict__.update(...)``, ``vars(name).update(...)``."""
    if isinstance(node, ast.Assign):
        return [(t.value.id, t.attr, node.value) for t in node.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)]
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    if call is None:
        return []
    if dotted_name(call.func) == ("setattr",) and len(call.args) == 3 and isinstance(call.args[0], ast.Name):
        attr = _key(call.args[1])
        return [(call.args[0].id, attr, call.args[2] if attr is not None else None)]
    holder = call.func.value if isinstance(call.func, ast.Attribute) and call.func.attr == "update" else None
    if isinstance(holder, ast.Attribute) and holder.attr == "__dict__" and isinstance(holder.value, ast.Name):
        return [(holder.value.id, None, None)]
    if isinstance(holder, ast.Call) and dotted_name(holder.func) == ("vars",) and len(holder.args) == 1 \
            and isinstance(holder.args[0], ast.Name):
        return [(holder.args[0].id, None, None)]
    return []


def returned(function: ast.AST) -> ast.expr | None:
    """What a function without parameters or decorators returns, where its
    body is one `return EXPR`, a docstring aside (`def get_kv_transfer_config():
    return KVTransferConfig(...)`); None for any other."""
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        return None
    arguments = function.args
    if arguments.posonlyargs or arguments.args or arguments.kwonlyargs or arguments.vararg or arguments.kwarg:
        return None
    body = function.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    return body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None


def string_built(node: ast.expr) -> bool:
    """Whether an expression builds a string from a literal one: ``"--x=" + y``, ``y + "x"``, ``"--x=%s" % y``."""
    if not isinstance(node, ast.BinOp):
        return False
    if isinstance(node.op, ast.Mod):
        return isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
    return isinstance(node.op, ast.Add) and any(
        isinstance(side, ast.JoinedStr) or (isinstance(side, ast.Constant) and isinstance(side.value, str))
        for side in (node.left, node.right))


def _ipython(node: ast.Call, method: str) -> bool:
    """Whether ``node`` calls ``get_ipython().<method>``."""
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr == method and isinstance(func.value, ast.Call) \
        and dotted_name(func.value.func) == ("get_ipython",)


def ipython_shell(node: ast.Call) -> ast.expr | None:
    """The script an IPython call runs through a shell, as IPython writes a
    notebook's ``!cmd`` (``get_ipython().system(cmd)``, ``getoutput``) and a
    ``%%bash`` cell (``get_ipython().run_cell_magic('bash', '', cell)``, also
    ``sh``, and ``script`` given ``bash`` or ``sh``); None for any other call."""
    if (_ipython(node, "system") or _ipython(node, "getoutput")) and len(node.args) == 1:
        return node.args[0]
    if _ipython(node, "run_cell_magic") and len(node.args) == 3 and all(
            isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2]):
        name, line = cast(ast.Constant, node.args[0]).value, str(cast(ast.Constant, node.args[1]).value).strip()
        return node.args[2] if name in ("bash", "sh") or (name == "script" and line in ("bash", "sh")) else None
    return None


def ipython_install(node: ast.Call) -> str | None:
    """The command line of a notebook's package install as IPython runs it:
    ``%pip install X`` (``get_ipython().run_line_magic('pip', 'install X')``,
    also ``%uv``) or ``!pip install X`` (a shell escape), where it is written
    out; None for any other call."""
    if _ipython(node, "run_line_magic") and len(node.args) == 2 and all(
            isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
        name, line = (str(cast(ast.Constant, arg).value) for arg in node.args)
        return f"{name} {line}" if name in ("pip", "uv") else None
    script = ipython_shell(node)
    return script.value if isinstance(script, ast.Constant) and isinstance(script.value, str) else None
