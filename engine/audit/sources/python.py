"""Python launchers: a script that starts vLLM in-process (vLLM's offline
examples, LMCache's), each call of vLLM's ``LLM``, ``EngineArgs`` or
``AsyncEngineArgs`` one deployment.

The file is parsed with :mod:`ast`, never run or imported. The calls are
those of the names the file imports from ``vllm`` (``from vllm import LLM``,
``import vllm`` then ``vllm.LLM``). Their keyword arguments are vLLM's
config field names (``LLM`` passes them on to ``EngineArgs``), as a Ray
Serve config's ``engine_kwargs`` are: the decision reads those of
:data:`ENGINE_FIELDS`, and ``model`` (the first positional argument, or the
keyword) names the deployment. A ``kv_transfer_config`` may be a dict or a
``KVTransferConfig(...)`` call (or ``KVTransferConfig.from_cli(JSON)``).

A value is read as written: a literal, a name bound once in its function
or the module (or more than once by the statements of its own body, the
last above the use), or a parameter of a function, by the argument its
calls in the file pass (each the same value, or the default). The launch is then read as the command line vLLM
would be given (``vllm serve MODEL --kv-transfer-config JSON ...``), as every
launch is (core.command.read_command): anything else (``args.connector``,
an f-string, a loop variable) is a value not known there, a
``source.unresolved`` problem where the decision reads it and a note where
it does not. An
``EngineArgs`` object passed on whole (``LLM(**asdict(engine_args))``,
``from_engine_args(engine_args)``) is the one launch of its ``EngineArgs``
call; ``EngineArgs.from_cli_args(args)`` is a launch whose options all come
from the script's command line. The environment variables the decision reads
are those the script sets in ``os.environ`` above the call (vLLM reads them
when the call builds its config).
"""

from __future__ import annotations

import ast
import json
import re
from bisect import bisect_left
from dataclasses import replace
from typing import Any, NamedTuple

from ...core.errors import Problem
from ...core.markers import has_unresolved, references, unresolved
from ...core.options import ENGINE_FIELDS, ENV_NAMES, FLAG_OPTIONS, VALUE_OPTIONS, Arg
from .context import Ctx
from .deployment import Deployment, SourceFile
from .detect import mentions_vllm
from .launch import Invocation, apply_facts, deployment

__all__ = ["python_file"]

# The classes whose call starts (or configures) an engine, and the KV-transfer config class.
_ENGINES = frozenset({"LLM", "EngineArgs", "AsyncEngineArgs"})
_KV_CONFIG = "KVTransferConfig"
# The calls that are launches: an engine's arguments written out, or taken from the command line.
_LAUNCHES = _ENGINES | {"EngineArgs.from_cli_args", "AsyncEngineArgs.from_cli_args"}
# How a script hands an EngineArgs object on whole: LLM(**asdict(args)), LLM(**vars(args)).
_UNPACKERS = frozenset({"asdict", "vars"})
# How a parameter is bound (see _Reader._argument).
_PARAMETER = "a parameter"
# vLLM's option for each field the decision reads (its long spelling), and the flags of the boolean ones.
_OPTIONS = {field: option for option, (field, _) in reversed(VALUE_OPTIONS.items()) if option.startswith("--")}
_FLAGS = {field: {value: flag for flag, (named, value) in FLAG_OPTIONS.items() if named == field}
          for field, _ in FLAG_OPTIONS.values()}
# vLLM's options as a message or an origin names them ("`--kv-transfer-config` takes ..."), and the
# keyword a script writes for each.
_OPTION_NAMED = re.compile("|".join(re.escape(o) for o in sorted({*VALUE_OPTIONS, *FLAG_OPTIONS}, key=len, reverse=True)
                                    if o.startswith("--")))
_KEYWORD = {option: field for option, (field, _) in {**VALUE_OPTIONS, **FLAG_OPTIONS}.items()}
# A parameter of a function called more often than this is not followed (each call's value is read).
_MAX_CALLS = 8
# Past this depth an expression is a value not known (a literal nested deeper is not a vLLM config).
_MAX_DEPTH = 32


class _Unknown(NamedTuple):
    """A value the file does not give: as written, and why it is not known."""

    shown: str
    why: str


class _Binding(NamedTuple):
    """A name bound in a scope: to ``value`` (None: bound some other way;
    ``how`` completes "which is ...")."""

    value: ast.expr | None
    how: str
    scope: Any  # the scope the value is read in (a function node, or the module)
    line: int = 0
    straight: bool = False  # bound by a statement of the scope's own body (not in an if, a loop, a try)


def python_file(ctx: Ctx) -> SourceFile | None:
    """The launches of a Python file; None when it is not a launcher (no
    launch of an engine it imports from vLLM, not Python, or larger than a
    config file may be)."""
    if len(ctx.text) > ctx.limits.max_config_bytes or not mentions_vllm(ctx.text):
        return None
    try:
        tree = ast.parse(ctx.text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python (or not this Python's)
        return None
    found = tuple(_Reader(ctx, tree).deployments())  # (none where the file imports nothing of vLLM's)
    return SourceFile(ctx.display, "python", found) if found else None


class _Reader:
    """One parsed file: what it imports from vLLM, the names each scope
    binds, the calls it makes, and the environment it sets."""

    def __init__(self, ctx: Ctx, tree: ast.Module):
        self.ctx, self.tree = ctx, tree
        self.imported: dict[str, str] = {}  # a local name -> the vLLM class it is
        self.modules: set[str] = set()  # local names of the vllm package or a module in it
        self.scopes: dict[Any, dict[str, list[_Binding]]] = {}
        self.parent: dict[Any, Any] = {}  # a node -> its enclosing scope
        self.calls: list[tuple[ast.Call, Any]] = []  # every call, with its scope
        self.calls_of: dict[str, list[tuple[ast.Call, Any]]] = {}  # the calls of a name (a function's), with their scopes
        self.env_assigned: list[tuple[str, ast.expr, Any, int]] = []  # os.environ[NAME] = value: NAME, value, scope, line
        self._following: set[tuple[Any, str]] = set()  # the parameters whose calls are being read
        self._ordered: dict[tuple[int, str], tuple[list[int], list[_Binding], bool]] = {}  # see _in_order
        self._imports()
        if self.imported or self.modules:
            self._bind(tree, tree)

    # -- what the file holds ---------------------------------------------------------------

    def _imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_vllm(node.module or ""):
                for alias in node.names:
                    if alias.name in _ENGINES or alias.name == _KV_CONFIG:
                        self.imported[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _is_vllm(alias.name):
                        self.modules.add(alias.asname or alias.name.split(".")[0])

    def _bind(self, node: ast.AST, scope: Any) -> None:
        """Record the bindings and calls under ``node``, in ``scope``; without
        recursion, so that a deeply nested file cannot exhaust the stack."""
        # (a node, its scope, whether it is a statement of that scope's own body)
        stack: list[tuple[Any, Any, bool]] = [(child, scope, True) for child in ast.iter_child_nodes(node)]
        while stack:
            node, scope, straight = stack.pop()
            names = self.scopes.setdefault(scope, {})
            line = getattr(node, "lineno", 0)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not scope:
                inner = self.scopes.setdefault(node, {})
                self.parent[node] = scope
                arguments = node.args
                for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)):
                    inner.setdefault(arg.arg, []).append(_Binding(None, _PARAMETER, node))
                if not isinstance(node, ast.Lambda):
                    names.setdefault(node.name, []).append(_Binding(None, "a function", scope, line, straight))
                    stack.extend((d, scope, False) for d in node.decorator_list)
                body = node.body if isinstance(node.body, list) else [node.body]
                stack.extend((child, node, not isinstance(node, ast.Lambda)) for child in body)
                stack.extend((d, scope, False) for d in (*arguments.defaults, *(d for d in arguments.kw_defaults if d)))
                continue
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and _is_environ(target.value) \
                            and isinstance(target.slice, ast.Constant) and target.slice.value in ENV_NAMES:
                        self.env_assigned.append((target.slice.value, node.value, scope, line))
                    value = node.value if isinstance(target, ast.Name) else None
                    for name in _targets(target):
                        names.setdefault(name, []).append(_Binding(value, "unpacked from another value", scope, line,
                                                                   straight))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
                for name in _targets(node.target):
                    names.setdefault(name, []).append(_Binding(node.value, "declared without a value", scope, line,
                                                               straight and isinstance(node, ast.AnnAssign)))
            elif isinstance(node, ast.AugAssign):
                for name in _targets(node.target):
                    names.setdefault(name, []).append(_Binding(None, "changed in place", scope, line, straight))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _targets(node.target):
                    names.setdefault(name, []).append(_Binding(None, "a loop variable", scope))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                for name in _targets(node.optional_vars):
                    names.setdefault(name, []).append(_Binding(None, "bound by `with`", scope))
            elif isinstance(node, ast.ClassDef):
                names.setdefault(node.name, []).append(_Binding(None, "a class", scope))
            elif isinstance(node, ast.Call):
                self.calls.append((node, scope))
                if isinstance(node.func, ast.Name):
                    self.calls_of.setdefault(node.func.id, []).append((node, scope))
            stack.extend((child, scope, False) for child in ast.iter_child_nodes(node))

    def _what(self, func: ast.expr) -> str | None:
        """The vLLM class a callee is (``LLM``), or its class method
        (``KVTransferConfig.from_cli``, ``EngineArgs.from_cli_args``); None for any other."""
        chain: list[str] = []  # the attributes after the first name, read without recursion
        while isinstance(func, ast.Attribute):
            chain.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        chain.reverse()
        known = _ENGINES | {_KV_CONFIG}
        if func.id in self.imported:
            owner = self.imported[func.id]
            return owner if not chain else f"{owner}.{chain[0]}" if len(chain) == 1 else None
        if func.id in self.modules and chain:  # vllm.LLM, vllm.config.KVTransferConfig.from_cli
            if chain[-1] in known:
                return chain[-1]
            if len(chain) > 1 and chain[-2] in known:
                return f"{chain[-2]}.{chain[-1]}"
        return None

    # -- the launches ----------------------------------------------------------------------

    def deployments(self) -> list[Deployment]:
        # The launches in line order, each with the environment set above it: one sweep over the settings.
        settings = sorted(self._settings(), key=lambda setting: setting[2])
        seen = 0
        words: dict[str, set[str]] = {}
        first: dict[str, int] = {}
        out = []
        for call, scope in sorted(self.calls, key=lambda item: (item[0].lineno, item[0].col_offset)):
            what = self._what(call.func)
            if what not in _LAUNCHES or self._only_hands_on(call, scope):
                continue
            while seen < len(settings) and settings[seen][2] < call.lineno:
                name, word, line = settings[seen]
                words.setdefault(name, set()).add(word)
                first.setdefault(name, line)
                seen += 1
            env = {name: Arg(next(iter(texts)) if len(texts) == 1 else
                             unresolved(f"os.environ[{name!r}]", "is set to different values in this file"),
                             f"line {first[name]}: os.environ")
                   for name, texts in words.items()}
            out.append(self._deployment(call, scope, what, env))
        return out

    def _only_hands_on(self, call: ast.Call, scope: Any) -> bool:
        """Whether ``call`` only passes on an EngineArgs object whose own call
        is the launch: ``LLM(**asdict(engine_args))`` (``from_engine_args(args)``
        is no launch at all: its EngineArgs call is)."""
        if self._what(call.func) != "LLM" or call.args:
            return False
        splats = [k.value for k in call.keywords if k.arg is None]
        if len(splats) != 1 or len(call.keywords) != 1:
            return False
        splat = splats[0]
        if isinstance(splat, ast.Call) and isinstance(splat.func, (ast.Name, ast.Attribute)) and len(splat.args) == 1 \
                and (splat.func.id if isinstance(splat.func, ast.Name) else splat.func.attr) in _UNPACKERS:
            source = self._source(splat.args[0], scope, 0)
            return isinstance(source, ast.Call) and self._what(source.func) in _LAUNCHES
        return False

    def _source(self, node: ast.expr, scope: Any, depth: int) -> ast.expr | None:
        """The expression a name stands for, through single bindings (None: not known)."""
        while isinstance(node, ast.Name) and depth < _MAX_DEPTH:
            found = self._lookup(node.id, scope, node.lineno, depth)
            if not isinstance(found, tuple):
                return None
            node, scope = found
            depth += 1
        return node

    def _deployment(self, call: ast.Call, scope: Any, what: str, env: dict[str, Arg]) -> Deployment:
        """The launch as the command line vLLM would be given for it (`vllm
        serve MODEL --kv-transfer-config JSON ...`), read as every launch is
        (core.command.read_command): a value not known is a marker there."""
        line = call.lineno
        here = f"line {line}"
        words = [Arg("vllm", here), Arg("serve", here)]
        problems: list[Problem] = []
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        model = keywords.get("model") or (call.args[0] if call.args and what in _ENGINES else None)
        if model is not None:
            words.append(Arg(_word(self._value(model, scope, 0)), f"line {model.lineno}: model"))
        elif what.endswith(".from_cli_args"):  # the model is on the command line too
            given = f"{_shown(call.args[0])}.model" if call.args else "model"
            words.append(Arg(unresolved(given, "is given on the script's command line"), here))
        for name, node in keywords.items():
            value = self._value(node, scope, 0) if name in ENGINE_FIELDS else None
            if value is None:  # not read, or None: vLLM's default, as not given
                continue
            origin = f"line {node.lineno}"
            if name in _FLAGS:
                if isinstance(value, bool):
                    words.append(Arg(_FLAGS[name][value], origin))
                elif isinstance(value, _Unknown):
                    problems.append(self.ctx.problem("source.unresolved", f"`{name}` takes its value from "
                                                     f"{references(_word(value), whole=True)}", line=node.lineno,
                                                     path="/" + name))
                else:
                    problems.append(self.ctx.problem("input.schema", f"`{name}` must be True, False or None, not "
                                                     f"`{_shown(node)}`", line=node.lineno, path="/" + name))
                continue
            words += [Arg(_OPTIONS[name], origin), Arg(_word(value), origin)]
        for splat in (k.value for k in call.keywords if k.arg is None):
            words.append(Arg(unresolved(f"**{_shown(splat)}", "is unpacked when the script runs"), here))
        if what.endswith(".from_cli_args"):
            words.append(Arg(unresolved(_shown(call), "takes the script's command line"), here))
        inv = Invocation(words, line, env, f":{line}", require_model=len(words) > 2,
                         problems=problems)
        apply_facts([inv], self.ctx)
        return _as_keywords(deployment(inv, self.ctx, "python"))

    def _settings(self) -> list[tuple[str, str, int]]:
        """Each setting in ``os.environ`` of a variable the decision reads:
        (name, its value as a word, line), read once for every launch (vLLM
        reads them when a call builds its config: each launch takes those above it)."""
        found: list[tuple[str, ast.expr, Any, int]] = list(self.env_assigned)  # os.environ[NAME] = value
        for call, scope in self.calls:
            func = call.func
            if not (isinstance(func, ast.Attribute) and _is_environ(func.value)):
                continue
            if func.attr == "setdefault" and len(call.args) == 2:
                pairs = [(call.args[0], call.args[1])]
            elif func.attr == "update" and len(call.args) == 1 and isinstance(call.args[0], ast.Dict):
                pairs = [(k, v) for k, v in zip(call.args[0].keys, call.args[0].values) if k is not None]
            else:
                pairs = []
            pairs += [(ast.Constant(k.arg), k.value) for k in call.keywords if func.attr == "update" and k.arg]
            found += [(key.value, value, scope, call.lineno) for key, value in pairs
                      if isinstance(key, ast.Constant) and key.value in ENV_NAMES]
        return [(name, _word(self._value(value, scope, 0)), line) for name, value, scope, line in found]

    # -- values ----------------------------------------------------------------------------

    def _lookup(self, name: str, scope: Any, line: int, depth: int) -> tuple[ast.expr, Any] | _Unknown:
        """What ``name``, read at ``line``, stands for in ``scope``: its value
        (and where to read it), or why it is not known. A name bound more than
        once is known where each binding is a statement of the scope's own
        body, run in order: the last one above the line, in the scope that reads it."""
        innermost = True
        while scope is not None:
            bound = self.scopes.get(scope, {}).get(name)
            if bound:
                if len(bound) > 1:
                    lines, ordered, straight = self._in_order(scope, name, bound)
                    above = bisect_left(lines, line)  # the bindings on lines above the use
                    if not (innermost and above and straight):
                        return _Unknown(name, f"is set {len(bound)} times in this file")
                    bound = [ordered[above - 1]]
                binding = bound[0]
                if binding.value is not None:
                    return binding.value, binding.scope
                if binding.how == _PARAMETER:
                    return self._argument(name, binding.scope, depth)
                return _Unknown(name, f"is {binding.how}")
            scope = self.parent.get(scope)
            innermost = False
        return _Unknown(name, "is not set in this file")

    def _in_order(self, scope: Any, name: str, bound: list[_Binding]) -> tuple[list[int], list[_Binding], bool]:
        """A name's bindings in a scope by line (recorded in no particular
        order), and whether each is a statement of the scope's own body:
        sorted once, so that each use finds its binding by bisection."""
        key = (id(scope), name)
        if key not in self._ordered:
            ordered = sorted(bound, key=lambda b: b.line)
            self._ordered[key] = [b.line for b in ordered], ordered, all(b.straight for b in ordered)
        return self._ordered[key]

    def _argument(self, name: str, function: Any, depth: int) -> tuple[ast.expr, Any] | _Unknown:
        """A parameter's value: the argument of the calls of its function in
        this file, where each passes one that reads the same (or the default)."""
        why = _Unknown(name, f"is a parameter of `{getattr(function, 'name', 'lambda')}`")
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return why
        calls = self.calls_of.get(function.name, [])
        if not calls or len(calls) > _MAX_CALLS:
            return why
        given = [self._passed(name, function, call, scope) for call, scope in calls]
        passed = [g for g in given if g is not None]
        if len(passed) < len(given):
            return why
        if len(passed) > 1:  # the same value from every call, or not known
            if (function, name) in self._following:  # a call inside the function itself: read once, not again
                return why
            self._following.add((function, name))
            try:
                read = {_word(self._value(expr, scope, depth + 1)) for expr, scope in passed}
            finally:
                self._following.discard((function, name))
            if len(read) > 1 or any(has_unresolved(r) for r in read):
                return _Unknown(name, f"is a parameter of `{function.name}`, whose {len(passed)} calls do not all pass "
                                      "one known value")
        return passed[0]

    def _passed(self, name: str, function: Any, call: ast.Call, scope: Any) -> tuple[ast.expr, Any] | None:
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

    def _value(self, node: ast.expr, scope: Any, depth: int) -> Any:
        """A JSON value as written; an unknown part is an :class:`_Unknown`."""
        if depth > _MAX_DEPTH:
            return _Unknown(_shown(node), "is nested too deeply to read")
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str) and ("\x00" in value or "\x01" in value):  # (a marker's own characters)
                return _Unknown(_shown(node), "holds a character no command line can")
            return value if value is None or isinstance(value, (str, int, float, bool)) else _Unknown(_shown(node), "is not JSON")
        if isinstance(node, ast.Name):
            found = self._lookup(node.id, scope, node.lineno, depth)
            return found if isinstance(found, _Unknown) else self._value(found[0], found[1], depth + 1)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return _Unknown(_shown(node), "merges another mapping (`**`)")
            out = {}
            for key, value in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    return _Unknown(_shown(node), "has a key that is not a string")
                out[key.value] = self._value(value, scope, depth + 1)
            return out
        if isinstance(node, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return _Unknown(_shown(node), "unpacks another list (`*`)")
            return [self._value(e, scope, depth + 1) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node, ast.Call):
            return self._called(node, scope, depth)
        return _Unknown(_shown(node), "is computed when the script runs")

    def _called(self, node: ast.Call, scope: Any, depth: int) -> Any:
        what = self._what(node.func)
        is_dict = isinstance(node.func, ast.Name) and node.func.id == "dict" and "dict" not in self.scopes.get(self.tree, {})
        if (what == _KV_CONFIG or is_dict) and not node.args:
            if any(k.arg is None for k in node.keywords):
                return _Unknown(_shown(node), "merges another mapping (`**`)")
            return {k.arg: self._value(k.value, scope, depth + 1) for k in node.keywords}
        if what == f"{_KV_CONFIG}.from_cli" and len(node.args) == 1 and not node.keywords:
            # The JSON text itself, as a command line gives it: the deployment's checks parse it, within their bounds.
            text = self._value(node.args[0], scope, depth + 1)
            if isinstance(text, (str, _Unknown)):
                return text
        return _Unknown(_shown(node), "is computed when the script runs")


def _is_vllm(module: str) -> bool:
    return module == "vllm" or module.startswith("vllm.")


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` (or ``environ`` imported from os)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _targets(target: ast.expr) -> list[str]:
    """The names an assignment target binds (a tuple binds each)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _targets(element)]
    if isinstance(target, ast.Starred):
        return _targets(target.value)
    return []


def _shown(node: ast.AST) -> str:
    """An expression as a message shows it: its source, on one line, at most 60 characters."""
    try:
        text = " ".join(ast.unparse(node).split())
    except (ValueError, RecursionError):  # (an AST too deep to print back)
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _as_keywords(found: Deployment) -> Deployment:
    """A launch read as a command line, its messages and origins naming each
    value by the keyword the script writes (``kv_transfer_config=``), not by
    vLLM's option."""
    def named(text: str) -> str:
        return _OPTION_NAMED.sub(lambda m: _KEYWORD[m.group()], text)

    def origin(text: str) -> str:
        return _OPTION_NAMED.sub(lambda m: _KEYWORD[m.group()] + "=", text)

    return found.replace(problems=tuple(replace(p, message=named(p.message)) for p in found.problems),
                         notes=tuple(replace(n, message=named(n.message)) for n in found.notes),
                         origins=tuple((field, origin(text)) for field, text in found.origins))


def _word(value: Any) -> str:
    """A value as the word vLLM's command line would hold: a string as it
    is, JSON for the rest, each part not known an unresolved marker written
    bare (so that it may stand for any JSON value)."""
    if isinstance(value, _Unknown):
        return unresolved(value.shown, value.why)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_word_in(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_word_in(v) for v in value) + "]"
    return json.dumps(value)


def _word_in(value: Any) -> str:
    """A value inside a JSON word: a string quoted."""
    return json.dumps(value) if isinstance(value, str) else _word(value)
