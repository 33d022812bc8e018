"""What a parsed Python file holds, for the Python launcher reader
(python.py): what it imports from vLLM, the names each scope binds, the
calls it makes, the environment it sets and the lists it writes; and the
value of an expression as far as the file gives it, each part it does not
an :class:`Unknown`. Nothing here runs or imports the file: it reads the
syntax tree, without recursion where the tree may be deep.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from bisect import bisect_left, bisect_right
from typing import Any, NamedTuple, cast

from ...core.command import MAX_COMMAND_BYTES
from ...core.markers import has_unresolved
from .launch import read_from_env
from .pyforms import (CLI_ENGINES, Change, added_to_itself, attribute_changes, block_ends, bound_names, copy_of, dict_changes,
                      dotted_name, is_environ, list_holder, made_from, returned, string_built, vllm_imports, within)
from .pyvalues import RUNTIME, Unknown, as_field, as_json_word, as_str, as_word, passes_on, source_text

__all__ = ["ENGINES", "KV_CONFIG", "CONFIGS", "INTERPRETER", "MAX_CALLS", "Script", "Binding"]

# The classes whose call starts (or configures) an engine, and the KV-transfer config class.
ENGINES = frozenset({"LLM", "EngineArgs", "AsyncEngineArgs"})
KV_CONFIG = "KVTransferConfig"
# The config classes an engine takes as they are or as the mapping of their keywords: a call
# of one is read as that mapping (vllm-ascend's tests pass KVEventsConfig(...)).
CONFIGS = frozenset({KV_CONFIG, "KVEventsConfig"})
# How a parameter is bound (see Script._argument).
_PARAMETER = "a parameter"
# How a script changes a command list after writing it (`cmd += [...]`, `cmd.extend([...])`).
_GROWS = frozenset({"extend", "append", "insert"})
# A parameter of a function called more often than this is not followed (each call's value is read).
MAX_CALLS = 8
# How a script reads an environment variable with a default: os.environ.get(NAME, DEFAULT), os.getenv(...).
_ENV_READS = frozenset({("os", "environ", "get"), ("os", "getenv"), ("environ", "get"), ("getenv",)})
# The running Python (`sys.executable`): a command's `python` (`[sys.executable, "-m", ...]`).
INTERPRETER = ("sys", "executable")
# Past this depth an expression is a value not known (a literal nested deeper is not a vLLM config).
_MAX_DEPTH = 32
# A read visits at most this many expressions, and a string the script builds is at most as long
# as a command line may be: names bound to each other (`b = [a, a]`, `c = b + b`) can make a
# value of a few lines grow as 2**n. Past the first bound a value is one not known (a string: the
# piece being read); past the second, the whole string.
_MAX_VISITS = 10_000
_TOO_LARGE = "is larger than the audit reads"


class Binding(NamedTuple):
    """A name bound in a scope: to ``value`` (None: bound some other way;
    ``how`` completes "which is ...")."""

    value: ast.expr | None
    how: str
    scope: Any  # the scope the value is read in (a function node, or the module)
    line: int = 0
    straight: bool = False  # bound by a statement of the scope's own body (not in an if, a loop, a try)
    # The last line of the block (a body of statements) whose statement binds it; 0: bound by
    # no statement of its own. Every use below it in that block comes after it.
    block_end: int = 0
    block: int = 0  # the id of that block


class Script:
    """One parsed file: what it holds (the module's docstring says what), and the value of an expression."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        # A local name -> the vLLM class (or engine builder) it is; the local names of the vllm package or its modules.
        self.imported, self.modules = vllm_imports(tree, ENGINES | CONFIGS)
        self.scopes: dict[Any, dict[str, list[Binding]]] = {}
        self.parent: dict[Any, Any] = {}  # a node -> its enclosing scope
        self.calls: list[tuple[ast.Call, Any]] = []  # every call, with its scope
        self.calls_of: dict[str, list[tuple[ast.Call, Any]]] = {}  # the calls of a name (a function's), with their scopes
        self.env_assigned: list[tuple[str, ast.expr, Any, int]] = []  # os.environ[NAME] = value: NAME, value, scope, line
        # (scope, name) -> each attribute set on it (pyforms.attribute_changes): attr, value, line, straight,
        # and the id of the block whose statement sets it.
        self.attributes_set: dict[tuple[int, str], list[tuple[str | None, ast.expr | None, int, bool, int]]] = {}
        # Command lists: each list or tuple display, with its scope and the one name it is
        # assigned to (None: none); and how a name's list grows after it is written.
        self.lists: list[tuple[ast.List | ast.Tuple, Any, str | None]] = []
        self.assigned: dict[int, str] = {}  # id of a display -> the one name (or `self.x`) it is assigned to
        self.continued: dict[int, ast.expr] = {}  # id of a display -> what `display + ...` adds to it
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}  # by name: each definition
        self.data: list[ast.AST] = []  # decorators and asserts: a test's data (`@pytest.mark.parametrize`), never run
        # Lists made from another (`base + [...]`, `list(base)`, `base.copy()`, `base[:]`): each with
        # its scope, the one name it is assigned to, the expression it is made from and what it adds.
        self.derived: list[tuple[ast.expr, Any, str | None, ast.expr, ast.expr | None]] = []
        self._copied: set[int] = set()  # copies that are the left of `copy + [...]`: not lists of their own
        self._list_bound: set[tuple[int, str]] = set()  # (id of a scope, a name) that a list or tuple is bound to there
        # (scope, name or `self.x`) -> the changes that grow its list
        self.grown: dict[tuple[int, str], list[Change]] = {}
        self._branch: dict[int, tuple[ast.If, bool, int]] = {}  # id of a statement -> Change.branch
        # (scope, name) -> the changes to the dict it holds (pyforms.dict_changes), each with its
        # line, whether it is a statement of the scope's own body, and the last line of its block.
        self.keyed: dict[tuple[int, str], list[tuple[int, str | None, ast.expr | None, bool, int]]] = {}
        # The choices (`a if c else b`, an `if` that grows a list) a reading met that the script
        # makes when it runs, and for a reading once per branch, the branch each takes (see
        # pylists.py's readings).
        self.choices: dict[int, ast.IfExp | ast.If] = {}
        self.chosen: dict[int, bool] = {}
        self._following: set[tuple[Any, str]] = set()  # the parameters whose calls are being read
        self.varied: set[Any] = set()  # functions whose calls pass a read parameter different values
        self.calling: dict[Any, tuple[ast.Call, Any]] = {}  # a function -> the one call it is read for
        self._ordered: dict[tuple[int, str], tuple[list[int], list[Binding], bool]] = {}  # see _in_order
        self._visits = 0  # the expressions the current read has visited (see value)
        self._bind(tree, tree)

    # -- what the file holds ---------------------------------------------------------------

    def _bind(self, node: ast.AST, scope: Any) -> None:
        """Record the bindings and calls under ``node``, in ``scope``, in the
        order they are written (the changes on one line too: `cmd.append(a);
        cmd.append(b)`); without recursion, so that a deeply nested file
        cannot exhaust the stack, whose items are pushed last first."""
        # (a node, its scope, whether it is a statement of that scope's own body, and the last
        # line of the block it is a statement of: 0 for an expression)
        ends = block_ends(node)
        stack: list[tuple[Any, Any, bool, int, int]] = [(child, scope, True, *ends.get(id(child), (0, 0)))
                                                        for child in reversed(list(ast.iter_child_nodes(node)))]
        while stack:
            node, scope, straight, end, block = stack.pop()
            names = self.scopes.setdefault(scope, {})
            line = getattr(node, "lineno", 0)
            if isinstance(node, (ast.BinOp, ast.Call, ast.Subscript)) and id(node) not in self._copied \
                    and (made := made_from(node)) is not None:
                self.derived.append((node, scope, self.assigned.get(id(node)), *made))
                if isinstance(node, ast.BinOp) and copy_of(node.left) is not None:
                    self._copied.add(id(node.left))  # (`copy + [...]` is one list, made once)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not scope:
                inner = self.scopes.setdefault(node, {})
                self.parent[node] = scope
                arguments = node.args
                for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)):
                    inner.setdefault(arg.arg, []).append(Binding(None, _PARAMETER, node))
                body = node.body if isinstance(node.body, list) else [node.body]
                last = (body[-1].end_lineno or 0) if isinstance(node.body, list) else 0
                block = id(node.body) if isinstance(node.body, list) else 0  # (a lambda's body is no block)
                stack.extend((child, node, not isinstance(node, ast.Lambda), last, block) for child in reversed(body))
                defaults = (*arguments.defaults, *(d for d in arguments.kw_defaults if d))
                stack.extend((d, scope, False, 0, 0) for d in reversed(defaults))
                if not isinstance(node, ast.Lambda):
                    names.setdefault(node.name, []).append(Binding(None, "a function", scope, line, straight))
                    self.functions.setdefault(node.name, []).append(node)
                    stack.extend((d, scope, False, 0, 0) for d in reversed(node.decorator_list))
                    self.data += node.decorator_list
                continue
            for name, key, value in (dict_changes(node) if isinstance(node, ast.stmt) else ()):
                self.keyed.setdefault((id(scope), name), []).append((line, key, value, straight, end))
            for name, attr, value in (attribute_changes(node) if isinstance(node, ast.stmt) else ()):
                self.attributes_set.setdefault((id(scope), name), []).append((attr, value, line, straight, block))
            if isinstance(node, ast.Assign) and (grown := added_to_itself(node)) is not None \
                    and (id(scope), grown.id) in self._list_bound:
                # `cmd = cmd + extra`, where `cmd` was a list written out above, grows that list as
                # `cmd += extra` does: read as that change (in an `if`, a word that may hold options),
                # not as a list of its own.
                names[grown.id].append(Binding(None, "changed in place", scope, line, straight, end, block))
                self.grown.setdefault((id(scope), grown.id), []).append(
                    Change(line, "= +", cast(ast.BinOp, node.value).right, straight, self._branch.get(id(node)), block))
                self._copied.add(id(node.value))
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and is_environ(target.value) \
                            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str) \
                            and read_from_env(target.slice.value):
                        self.env_assigned.append((target.slice.value, node.value, scope, line))
                    value = node.value if isinstance(target, ast.Name) else None
                    held = list_holder(target)
                    if held is not None and isinstance(node.value, (ast.List, ast.Tuple, ast.BinOp, ast.Call, ast.Subscript)):
                        self.assigned[id(node.value)] = held
                    for name in bound_names(target):
                        names.setdefault(name, []).append(Binding(value, "unpacked from another value", scope, line,
                                                                   straight, end, block))
                        if isinstance(value, (ast.List, ast.Tuple)):
                            self._list_bound.add((id(scope), name))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
                for name in bound_names(node.target):
                    names.setdefault(name, []).append(Binding(node.value, "declared without a value", scope, line,
                                                               straight and isinstance(node, ast.AnnAssign), end, block))
                    if isinstance(node.value, (ast.List, ast.Tuple)):
                        self._list_bound.add((id(scope), name))
            elif isinstance(node, ast.AugAssign):
                for name in bound_names(node.target):
                    names.setdefault(name, []).append(Binding(None, "changed in place", scope, line, straight, end, block))
                held = list_holder(node.target)
                if held is not None and isinstance(node.op, ast.Add):
                    self.grown.setdefault((id(scope), held), []).append(
                        Change(line, "+=", node.value, straight, self._branch.get(id(node)), block))
                    if isinstance(node.value, (ast.List, ast.Tuple)):
                        # `cmd = []` then `cmd += ["vllm", "serve", ...]`: the list the name holds from
                        # here on, which what the script adds below it grows (containerised launchers).
                        self.assigned[id(node.value)] = held
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in _GROWS \
                    and (held := list_holder(node.value.func.value)) is not None:
                call = node.value
                method = node.value.func.attr
                how = method if len(call.args) == 1 and not call.keywords else "insert"  # (insert: at a place)
                self.grown.setdefault((id(scope), held), []).append(
                    Change(line, how, call.args[0] if call.args else None, straight, self._branch.get(id(node)), block))
            elif isinstance(node, (ast.List, ast.Tuple)) and isinstance(node.ctx, ast.Load):
                self.lists.append((node, scope, self.assigned.get(id(node))))
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, (ast.List, ast.Tuple)):
                self.continued[id(node.left)] = node.right
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in bound_names(node.target):
                    names.setdefault(name, []).append(Binding(None, "a loop variable", scope))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                for name in bound_names(node.optional_vars):
                    names.setdefault(name, []).append(Binding(None, "bound by `with`", scope))
            elif isinstance(node, ast.ClassDef):
                names.setdefault(node.name, []).append(Binding(None, "a class", scope))
                self.data += node.decorator_list
            elif isinstance(node, ast.Assert):
                self.data.append(node)
            elif isinstance(node, ast.With) and any(isinstance(item.context_expr, ast.Call) and dotted_name(
                    item.context_expr.func) in (("pytest", "raises"), ("raises",)) for item in node.items):
                self.data += node.body  # (`with pytest.raises(...)`: what a test expects vLLM to refuse)
            elif isinstance(node, ast.Call):
                self.calls.append((node, scope))
                if isinstance(node.func, ast.Attribute) and node.func.attr.startswith("assert"):
                    self.data.append(node)  # a test's (`self.assertEqual(cmd, [...])`, `run.assert_called_with([...])`)
                if isinstance(node.func, ast.Name):
                    self.calls_of.setdefault(node.func.id, []).append((node, scope))
            if isinstance(node, ast.If):
                self._branch.update((id(statement), (node, True, block)) for statement in node.body)
                self._branch.update((id(statement), (node, False, block)) for statement in node.orelse)
            ends = block_ends(node)
            stack.extend((child, scope, False, *ends.get(id(child), (0, 0)))
                         for child in reversed(list(ast.iter_child_nodes(node))))

    def what(self, func: ast.expr) -> str | None:
        """The vLLM class a callee is (``LLM``), or its class method
        (``KVTransferConfig.from_cli``, ``EngineArgs.from_cli_args``); None for any other."""
        dotted = dotted_name(func)
        if not dotted:
            return None
        first, chain = dotted[0], dotted[1:]  # the name, and the attributes after it
        known = ENGINES | CONFIGS
        if first in self.imported:
            owner = self.imported[first]
            return owner if not chain else f"{owner}.{chain[0]}" if len(chain) == 1 else None
        if first in self.modules and chain:  # vllm.LLM, vllm.config.KVTransferConfig.from_cli
            if chain[-1] in known or chain[-1] in CLI_ENGINES:
                return CLI_ENGINES.get(chain[-1], chain[-1])
            if len(chain) > 1 and chain[-2] in known:
                return f"{chain[-2]}.{chain[-1]}"
        return None

    def what_called(self, func: ast.expr, scope: Any) -> str | None:
        """What a callee is (:meth:`what`), also through a name of the script's own that each of
        its bindings gives an engine class (``engine_cls = AsyncEngineArgs`` in an `if`, ``EngineArgs``
        in its `else`; ``AsyncEngineArgs if a else EngineArgs``): the first one's, or its method's."""
        found = self.what(func)
        method = func.attr if isinstance(func, ast.Attribute) else None
        name = func.value if isinstance(func, ast.Attribute) else func
        if found is not None or not isinstance(name, ast.Name):
            return found
        classes = [self.what(branch) if branch is not None else None for value in self.values(name.id, scope)
                   for branch in ([value.body, value.orelse] if isinstance(value, ast.IfExp) else [value])]
        if not classes or not all(c in ENGINES for c in classes):
            return None
        return classes[0] if method is None else f"{classes[0]}.{method}"

    # -- values ----------------------------------------------------------------------------

    def bound(self, node: ast.expr, scope: Any, depth: int = 0) -> tuple[ast.expr, Any] | None:
        """As :meth:`resolved`; None where the name is not known."""
        found = self.resolved(node, scope, depth)
        return None if isinstance(found, Unknown) else found  # (Unknown is itself a tuple: a NamedTuple)

    def resolved(self, node: ast.expr, scope: Any, depth: int = 0) -> tuple[ast.expr, Any] | Unknown:
        """The expression a name stands for, through single bindings, and the scope to read it in; or why not known."""
        while isinstance(node, ast.Name) and depth < _MAX_DEPTH:
            found = self.lookup(node, scope, depth)
            if isinstance(found, Unknown):
                return found
            node, scope = found
            depth += 1
        return node, scope

    def source(self, node: ast.expr, scope: Any, depth: int) -> ast.expr | None:
        """The expression a name stands for, through single bindings (None: not known)."""
        found = self.bound(node, scope, depth)
        return None if found is None else found[0]

    def lookup(self, use: ast.Name, scope: Any, depth: int) -> tuple[ast.expr, Any] | Unknown:
        """What the name ``use`` reads stands for in ``scope``: its value
        (and where to read it), or why it is not known. A name bound more than
        once is known, in the scope that reads it, by the last binding above
        the line where that one comes before the use on every way to it:
        where each binding is a statement of the scope's own body, run in
        order; or where it is a statement of a block (the body of a loop, an
        ``if``) that holds the use, and no other binding follows it in that
        block (one in a loop inside it could reach the use from a later turn).
        A name read in the value that binds it (``cmd = cmd + " x"``) reads
        the value it had before: not that one."""
        name, line = use.id, use.lineno
        innermost = True
        while scope is not None:
            bound = self.scopes.get(scope, {}).get(name)
            if bound:
                if len(bound) > 1:
                    lines, ordered, straight = self._in_order(scope, name, bound)
                    above = bisect_left(lines, line)  # the bindings on lines above the use
                    last = ordered[above - 1] if innermost and above else None
                    if last is None or not (straight or (line <= last.block_end and
                                                         bisect_right(lines, last.block_end) == above)):
                        return Unknown(name, f"is set {len(bound)} times in this file")
                    bound = [last]
                binding = bound[0]
                if binding.value is not None and within(use, binding.value):
                    return Unknown(name, f"is read in its own assignment, at line {binding.line}")
                if binding.value is not None:
                    return binding.value, binding.scope
                if binding.how == _PARAMETER:
                    return self._argument(name, binding.scope, depth)
                return Unknown(name, f"is {binding.how}")
            scope = self.parent.get(scope)
            innermost = False
        return Unknown(name, "is not set in this file")

    def values(self, name: str, scope: Any) -> list[ast.expr | None]:
        """What each binding of ``name`` in the innermost scope that binds it
        gives it (None: a parameter, an import, a loop's target...)."""
        while scope is not None and name not in self.scopes.get(scope, {}):
            scope = self.parent.get(scope)
        return [binding.value for binding in self.scopes[scope][name]] if scope is not None else []

    def _in_order(self, scope: Any, name: str, bound: list[Binding]) -> tuple[list[int], list[Binding], bool]:
        """A name's bindings in a scope by line (recorded in no particular
        order), and whether each is a statement of the scope's own body:
        sorted once, so that each use finds its binding by bisection."""
        key = (id(scope), name)
        if key not in self._ordered:
            ordered = sorted(bound, key=lambda b: b.line)
            self._ordered[key] = [b.line for b in ordered], ordered, all(b.straight for b in ordered)
        return self._ordered[key]

    def parameter_of(self, node: ast.expr, scope: Any) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function ``node`` is a parameter of: a name that ``scope``, a
        function's body, binds only as its parameter. None for any other."""
        if not isinstance(node, ast.Name) or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        bound = self.scopes.get(scope, {}).get(node.id, [])
        return scope if len(bound) == 1 and bound[0].how == _PARAMETER else None

    def _argument(self, name: str, function: Any, depth: int) -> tuple[ast.expr, Any] | Unknown:
        """A parameter's value: the argument of the calls of its function in
        this file, where each passes one that reads the same (or the default)."""
        why = Unknown(name, f"is a parameter of `{getattr(function, 'name', 'lambda')}`")
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return why
        calls = [self.calling[function]] if function in self.calling else self.calls_of.get(function.name, [])
        if not calls or len(calls) > MAX_CALLS:
            return why
        given = [self.passed(name, function, call, scope) for call, scope in calls]
        passed = [g for g in given if g is not None]
        if len(passed) < len(given):
            return why
        if len(passed) > 1:  # the same value from every call, or not known
            if (function, name) in self._following:  # a call inside the function itself: read once, not again
                return why
            self._following.add((function, name))
            try:
                read = {as_word(self.value(expr, scope, depth + 1)) for expr, scope in passed}
            finally:
                self._following.discard((function, name))
            if len(read) > 1 or any(has_unresolved(r) for r in read):
                if len(read) > 1:
                    self.varied.add(function)
                return Unknown(name, f"is a parameter of `{function.name}`, whose {len(passed)} calls do not all pass "
                                      "one known value")
        return passed[0]

    def passed(self, name: str, function: Any, call: ast.Call, scope: Any) -> tuple[ast.expr, Any] | None:
        """What one call passes for parameter ``name`` (the default where it passes none), and where to read it."""
        arguments = function.args
        positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
        for keyword in call.keywords:
            if keyword.arg == name:
                return keyword.value, scope
        if name in positional:
            at = positional.index(name)
            if at < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:at + 1]):
                return call.args[at], scope
            defaults = arguments.defaults
            first_default = len(positional) - len(defaults)
            if at >= first_default and not any(isinstance(a, ast.Starred) for a in call.args) \
                    and not any(k.arg is None for k in call.keywords):
                return defaults[at - first_default], self.parent.get(function)
        return None

    def value(self, node: ast.expr, scope: Any, depth: int) -> Any:
        """A JSON value as written; an unknown part is an :class:`Unknown`.
        A read (``depth`` 0) that visits more than _MAX_VISITS expressions is
        one value not known."""
        if depth > 0:
            return self._value(node, scope, depth)
        self._visits = 0
        found = self._value(node, scope, 0)
        return found if self._visits <= _MAX_VISITS else Unknown(source_text(node), _TOO_LARGE)

    def _past_bounds(self, node: ast.expr, depth: int) -> Unknown | None:
        """Count a visit of ``node``; why it is not read, where the read has
        visited too many expressions or gone too deep (None: it is read)."""
        self._visits += 1
        if self._visits > _MAX_VISITS:
            return Unknown(source_text(node), _TOO_LARGE)
        if depth > _MAX_DEPTH:
            return Unknown(source_text(node), "is nested too deeply to read")
        return None

    def _value(self, node: ast.expr, scope: Any, depth: int) -> Any:
        past = self._past_bounds(node, depth)
        if past is not None:
            return past
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str) and ("\x00" in value or "\x01" in value):  # (a marker's own characters)
                return Unknown(source_text(node), "holds a character no command line can")
            return value if value is None or isinstance(value, (str, int, float, bool)) else Unknown(source_text(node), "is not JSON")
        if isinstance(node, ast.Name):
            found = self.lookup(node, scope, depth)
            return found if isinstance(found, Unknown) else self.value(found[0], found[1], depth + 1)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return Unknown(source_text(node), "merges another mapping (`**`)")
            out = {}
            for key, item in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    return Unknown(source_text(node), "has a key that is not a string")
                out[key.value] = self.value(item, scope, depth + 1)
            return out
        if isinstance(node, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return Unknown(source_text(node), "unpacks another list (`*`)")
            return [self.value(e, scope, depth + 1) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node, ast.Call):
            return self._called(node, scope, depth)
        if isinstance(node, ast.IfExp):  # `a if c else b`: by `c` where the file gives it, else the branch a reading takes
            test = self.value(node.test, scope, depth + 1)
            taken = bool(test) if isinstance(test, (bool, int, float, str)) or test is None else self.chosen.get(id(node))
            if taken is None:
                self.choices.setdefault(id(node), node)
                return Unknown(source_text(node), "is chosen when the script runs")
            return self.value(node.body if taken else node.orelse, scope, depth + 1)
        if isinstance(node, ast.JoinedStr) or string_built(node):  # a string whatever its fields are (each not known a marker)
            return self.text(node, scope, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # `A + B` of names the file binds
            sides = self.value(node.left, scope, depth + 1), self.value(node.right, scope, depth + 1)
            if any(isinstance(side, str) for side in sides) and all(isinstance(side, (str, Unknown)) for side in sides):
                # (a string added to anything but a string fails: the side not known is one too)
                joined = as_str(sides[0], node.left) + as_str(sides[1], node.right)
                return joined if len(joined) <= MAX_COMMAND_BYTES else Unknown(source_text(node), _TOO_LARGE)
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):  # `0 < target < 1`
            compared = [self.value(side, scope, depth + 1) for side in (node.left, *node.comparators)]
            if all(isinstance(side, (bool, int, float, str)) or side is None for side in compared):
                try:
                    return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, compared, compared[1:]))
                except TypeError:  # (`None < 1`: Python raises; the branch is not known)
                    pass
        if isinstance(node, ast.BoolOp):  # `args or []`: the operand Python stops at, where the file gives them
            for operand in node.values[:-1]:
                known = self.value(operand, scope, depth + 1)
                if isinstance(known, Unknown) or bool(known) == isinstance(node.op, ast.Or):
                    return Unknown(source_text(node), RUNTIME) if isinstance(known, Unknown) else known
            return self.value(node.values[-1], scope, depth + 1)
        return Unknown(source_text(node), RUNTIME)

    def text(self, node: ast.expr, scope: Any, depth: int = 0) -> str:
        """A string as the script builds it (a command line given as one
        string): literal text, an f-string's fields and ``a + b``, through
        names as :meth:`value` follows them; each piece the file does not
        give is an unresolved marker in its place. (``" ".join([...])`` of a
        list of words is not read here: that list is a command list.) A
        string longer than a command line may be is one not known."""
        if depth == 0:
            self._visits = 0
        past = self._past_bounds(node, depth)  # (the piece read when the visits run out is not known)
        if past is not None:
            return as_word(past)
        pieces = node.values if isinstance(node, ast.JoinedStr) else \
            (node.left, node.right) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) else None
        if pieces is not None:
            out = ""
            for piece in pieces:  # (stopped as soon as it is too long: each piece may be as long again)
                out += self._field(piece, scope, depth + 1)
                if len(out) > MAX_COMMAND_BYTES:
                    return as_word(Unknown(source_text(node), _TOO_LARGE))
            return out
        if isinstance(node, ast.Name):
            found = self.lookup(node, scope, depth)
            return as_word(found) if isinstance(found, Unknown) else self.text(found[0], found[1], depth + 1)
        if dotted_name(node) == INTERPRETER:
            return "python"
        if isinstance(node, ast.IfExp):
            return self._choice(node, scope, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str):  # `"--port=%s" % port`
            return self._formatted(node.left.value, node.right, scope, depth)
        return as_str(self.value(node, scope, depth), node)

    def _formatted(self, template: str, operand: ast.expr, scope: Any, depth: int) -> str:
        """``"--port=%s" % port``, ``"%s:%d" % (a, b)``: each ``%s`` or ``%d``
        the operand's text (``%%`` a ``%``); a template with another
        conversion, or a count of them the operand does not match, is a
        string not known."""
        operands = operand.elts if isinstance(operand, ast.Tuple) else [operand]
        pieces = _CONVERSION.split(template)  # literal, conversion, literal, ...
        conversions = pieces[1::2]
        if any(c not in ("%s", "%d", "%%") for c in conversions) or any(isinstance(o, ast.Starred) for o in operands) \
                or sum(c != "%%" for c in conversions) != len(operands):
            return as_word(Unknown(source_text(operand), "is formatted when the script runs"))
        out, given = pieces[0], iter(operands)
        for conversion, literal in zip(pieces[1::2], pieces[2::2]):
            out += "%" if conversion == "%%" else self.text(next(given), scope, depth + 1)
            out += literal
        return out

    def _choice(self, node: ast.IfExp, scope: Any, depth: int) -> str:
        """``a if c else b`` in a string: the branch taken (value()), or, chosen when the script runs, a value
        not known with the blanks each branch giving text starts and ends with, which the shell splits off as
        words (`"vllm serve m" + (" --opt" if c else "")`); a blank where each pipes or redirects the command
        (NVIDIA/NeMo-Skills' `(' | grep -v "200 OK"' if quiet else '')`: no words of its own)."""
        shown = as_str(self.value(node, scope, depth), node)
        if not has_unresolved(shown) or self.chosen.get(id(node)) is not None:
            return shown
        given = [text for text in (self.text(node.body, scope, depth + 1), self.text(node.orelse, scope, depth + 1)) if text]
        if given and all(passes_on(text) for text in given):
            return " "
        lead = " " if given and all(text[0].isspace() for text in given) else ""
        trail = " " if given and all(text[-1].isspace() for text in given) else ""
        return lead + shown + trail

    def _field(self, part: ast.expr, scope: Any, depth: int) -> str:
        """One piece of an f-string: its literal text, or a field as ``str()`` shows it."""
        if isinstance(part, ast.FormattedValue):
            if part.conversion in (-1, ord("s")) and part.format_spec is None:
                return as_field(self.text(part.value, scope, depth), part.value)
            return as_field(as_word(Unknown(source_text(part.value), "is formatted when the script runs")), part.value)
        return self.text(part, scope, depth)

    def _builtin(self, callee: tuple[str, ...], name: str) -> bool:
        """Whether ``callee`` is the built-in ``name`` (the module does not bind that name itself)."""
        return callee == (name,) and name not in self.scopes.get(self.tree, {})

    def _called(self, node: ast.Call, scope: Any, depth: int) -> Any:
        what = self.what(node.func)
        callee = dotted_name(node.func)
        if (what in CONFIGS or self._builtin(callee, "dict")) and not node.args:
            if any(k.arg is None for k in node.keywords):
                return Unknown(source_text(node), "merges another mapping (`**`)")
            return {k.arg: self.value(k.value, scope, depth + 1) for k in node.keywords}
        if callee in _ENV_READS and len(node.args) == 2 and not node.keywords \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            # An environment variable with a default: the default, as the shell reader reads ${VAR:-default}
            # (the environment the script runs in is not in the file).
            return self.value(node.args[1], scope, depth + 1)
        if callee == ("json", "dumps") and len(node.args) == 1 and "json" not in self.scopes.get(self.tree, {}):
            # The JSON text of a value as written (a command list's `--kv-transfer-config` word).
            return as_json_word(self.value(node.args[0], scope, depth + 1))
        if self._builtin(callee, "str") and len(node.args) == 1 and not node.keywords:
            value = self.value(node.args[0], scope, depth + 1)
            if isinstance(value, (bool, str, Unknown)):
                return str(value) if isinstance(value, bool) else value
            if isinstance(value, (int, float)):
                return json.dumps(value)
        if callee == ("shutil", "which") and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):  # the program's path: as a command's word, the program
            return node.args[0].value
        if isinstance(node.func, ast.Name) and not node.args and not node.keywords:  # a function of the file, once
            defined = self.functions.get(node.func.id, [])
            if len(defined) == 1 and len(self.scopes[self.parent[defined[0]]][node.func.id]) == 1 \
                    and (expression := returned(defined[0])) is not None:
                return self.value(expression, defined[0], depth + 1)
        if what == f"{KV_CONFIG}.from_cli" and len(node.args) == 1 and not node.keywords:
            # The JSON text itself, as a command line gives it: the deployment's checks parse it, within their bounds.
            text = self.value(node.args[0], scope, depth + 1)
            if isinstance(text, (str, Unknown)):
                return text
        return Unknown(source_text(node), RUNTIME)


# The comparisons a condition the file gives is read with.
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}
# A conversion of printf-style formatting (`%s`, `%-8d`, `%(name)s`, `%%`): what Script._formatted splits at.
_CONVERSION = re.compile(r"(%(?:\([^)]*\))?[-#0 +]*(?:\*|[0-9]+)?(?:\.(?:\*|[0-9]+))?[a-zA-Z%])")

