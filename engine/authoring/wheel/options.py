"""The command-line options a vLLM release accepts, read statically from its wheel.

``vllm serve`` builds its parser from these places, all plain source:

* ``EngineArgs.add_cli_args`` / ``AsyncEngineArgs.add_cli_args`` in
  ``vllm/engine/arg_utils.py``: one ``group.add_argument("--name", ...)`` per
  option, mostly with ``**xxx_kwargs["field"]`` where
  ``xxx_kwargs = get_kwargs(SomeConfig)``. The option's argparse type then
  follows from the config field's annotation (``_compute_kwargs``: a config
  dataclass is JSON, anything with ``bool`` is a ``BooleanOptionalAction``
  with a ``--no-`` form, then Literal, tuple/list/set, int, float, dict, str).
* ``make_arg_parser`` in the OpenAI frontend's ``cli_args.py`` (its module
  moved across releases): explicit ``add_argument`` calls, and
  ``FrontendArgs.add_cli_args``, which adds one option per dataclass field of
  ``FrontendArgs`` (with its bases), adjusted in ``_customize_cli_kwargs``.
* the serve subcommand's own ``subparser_init`` (``vllm/entrypoints/cli/serve.py``:
  0.9.1 adds ``--headless`` and ``--config`` there).

An ``add_argument`` in a loop over a written-out list (0.11.0's deprecated
``--guided-decoding-*``) adds one option per element; a field typed
``SkipValidation[bool]`` is a bool, as argparse sees it.

:func:`read_options` returns ``{"format", "vllm_version", "wheel",
"frontend_module", "parser", "options": {"--kebab-name": {...}}}`` where each
option has ``no_form`` (a ``--no-`` form exists), ``type`` (``bool``/``int``/
``float``/``str``/``json``/``list``, or null when it is not statically
clear), ``aliases``, ``source``, the ``line`` of its ``add_argument`` and,
when it comes from a config field, ``field``; where the parser registers an
action that gives each on/off option an inverse spelling (0.33.0's
``EnableDisableAction``), ``parser.inverse_prefixes`` and each such option's
``inverses``. Files are parsed with ``ast`` only (source.py): nothing from
the wheel is imported or executed.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from .source import Module, Wheel, WheelError, dotted, file_digest, open_wheel, wheel_metadata

__all__ = ["read_options", "options_json", "OPTIONS_FORMAT", "OptionReader", "wheel_reader"]

OPTIONS_FORMAT = 1
ARG_UTILS = "vllm.engine.arg_utils"
SERVE_MODULE = "vllm.entrypoints.cli.serve"
FRONTEND_MODULES = ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.common.cli_args",
                    "vllm.entrypoints.launchers.cli_args")
PARSER_MODULES = ("vllm.utils.argparse_utils", "vllm.utils")
# Names of `type=` callables whose result type is clear.
TYPE_CALLABLES = {
    "int": "int", "float": "float", "str": "str", "bool": "bool",
    "json.loads": "json", "loads": "json",
    "human_readable_int": "int", "human_readable_int_or_auto": "int",
}
# Annotation names, as _compute_kwargs sorts them (first match wins).
ORDER = ("bool", "Literal", "tuple", "list", "set", "int", "float", "dict", "str")
CATEGORY = {"bool": "bool", "Literal": "str", "tuple": "list", "list": "list", "set": "list",
            "int": "int", "float": "float", "dict": "json", "str": "str"}


def _annotation_names(node: ast.AST | None, out: list, through_skip: bool = False) -> list:
    """Flatten an annotation into its member names ('int', 'Literal', 'KVTransferConfig', 'None').
    ``through_skip``: read pydantic's ``SkipValidation[T]`` as ``T``, as
    argparse's type does (it is ``Annotated[T, SkipValidation()]`` at run
    time, and get_kwargs reads through Annotated); a config field keeps it,
    since pydantic then checks nothing of the value."""
    if node is None:
        return out
    if isinstance(node, ast.Constant):
        if node.value is None:
            out.append("None")
        elif isinstance(node.value, str):  # a string annotation
            try:
                _annotation_names(ast.parse(node.value, mode="eval").body, out, through_skip)
            except SyntaxError:
                out.append(node.value)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _annotation_names(node.left, out, through_skip)
        _annotation_names(node.right, out, through_skip)
    elif isinstance(node, ast.Subscript):
        head = (dotted(node.value) or "").rsplit(".", 1)[-1]
        if head in ("Optional", "Union"):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for item in inner:
                _annotation_names(item, out, through_skip)
            if head == "Optional":
                out.append("None")
        elif head == "Annotated" or (through_skip and head == "SkipValidation"):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            _annotation_names(first, out, through_skip)
        else:
            out.append(head)  # list[int] -> list, Literal[...] -> Literal
    else:
        name = dotted(node)
        if name:
            out.append(name)
    return out


class OptionReader:
    """The options of one wheel as its add_argument calls add them, and the
    config classes and fields they come from (configs.py reads those too)."""

    def __init__(self, wheel: Wheel):
        self.wheel = wheel
        self.options: dict[str, dict] = {}
        arg_utils = self.wheel.module(ARG_UTILS)
        source = self._source(ARG_UTILS)
        # Releases differ in how get_kwargs treats bool fields.
        self.bool_optional = "BooleanOptionalAction" in source
        self.bool_str_optional = "{bool, str, type(None)}" in source
        if arg_utils is None:
            raise WheelError("wheel.no_options", f"the wheel has no parseable {ARG_UTILS.replace('.', '/')}.py",
                             wheel.path)

    def _source(self, module: str) -> str:
        path = self.wheel.path_of(module)
        return self.wheel.read(path).decode("utf-8", "replace") if path else ""

    # -- config classes and their fields ----------------------------------
    def class_of(self, mod: Module, name: str) -> tuple[Module, ast.ClassDef] | tuple[None, None]:
        """(module, ClassDef) of a class named in `mod`, or (None, None)."""
        for _, ref in reversed(self.wheel.resolve_expr(mod, name)):
            key = ref.get("class")
            if key:
                module_name, cls_name = key.split(":")
                module = self.wheel.module(module_name)
                assert module is not None  # a "class" ref names a class of a module the wheel parsed (cached)
                return module, module.classes[cls_name]
        return None, None

    def config_fields(self, mod: Module, cls: ast.ClassDef, seen: tuple = ()) -> dict[str, tuple]:
        """Dataclass fields of a class, bases first: name -> (module, annotation)."""
        fields: dict[str, tuple] = {}
        for base in cls.bases:
            base_name = dotted(base)
            base_mod, base_cls = self.class_of(mod, base_name) if base_name else (None, None)
            if base_mod is not None and base_cls is not None and (base_mod.name, base_cls.name) not in seen:
                fields.update(self.config_fields(base_mod, base_cls, seen + ((base_mod.name, base_cls.name),)))
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if "ClassVar" in ast.unparse(stmt.annotation) or stmt.target.id.startswith("_"):
                    continue
                fields[stmt.target.id] = (mod, stmt.annotation)
        return fields

    def _is_dataclass(self, mod: Module, name: str) -> bool:
        target_mod, cls = self.class_of(mod, name)
        if cls is None:
            return False
        decorators = {(dotted(d.func) if isinstance(d, ast.Call) else dotted(d)) or "" for d in cls.decorator_list}
        return any(d.rsplit(".", 1)[-1] in ("config", "dataclass") for d in decorators)

    def alias(self, mod: Module | None, name: str, depth: int = 0) -> tuple[Module, ast.expr] | None:
        """(module, annotation) a type alias name stands for, e.g. ModelDType -> Literal[...]."""
        if depth > 8 or mod is None or "." in name:
            return None
        binding = mod.bindings.get(name)
        value: dict[str, Any] = binding[-1][1] if binding else {"kind": None}
        if value["kind"] == "import":
            return self.alias(self.wheel.module(value["module"]), value["name"], depth + 1)
        expr = mod.values.get(name)
        if isinstance(expr, (ast.Subscript, ast.BinOp)):
            return mod, expr
        return None

    def annotation_names(self, mod: Module, annotation: ast.AST | None, depth: int = 0, *,
                         through_skip: bool = False) -> list[str]:
        """Annotation member names, type aliases expanded (``through_skip``: see _annotation_names)."""
        out = []
        for name in _annotation_names(annotation, [], through_skip):
            alias = self.alias(mod, name) if depth < 8 and name not in ORDER and name != "None" else None
            if alias is not None:
                out += self.annotation_names(alias[0], alias[1], depth + 1, through_skip=through_skip)
            else:
                out.append(name)
        return out

    def field_type(self, mod: Module, annotation: ast.AST | None) -> tuple[str | None, bool]:
        """(type, has --no- form) of a config field, following _compute_kwargs."""
        names = [n.rsplit(".", 1)[-1] if n.count(".") else n
                 for n in self.annotation_names(mod, annotation, through_skip=True)]
        members = set(names) - {"None"}
        if any(n not in ORDER and n not in ("Any",) and self._is_dataclass(mod, n) for n in members):
            return "json", False
        if self.bool_str_optional and members == {"bool", "str"} and "None" in names:
            return "str", False
        for name in ORDER:
            if name in members:
                if name == "bool":
                    return "bool", self.bool_optional
                return CATEGORY[name], False
        # _compute_kwargs: any non-builtin type hint (an enum, Any) is parsed as str
        if members - {"bytes", "object", "type", "complex"}:
            return "str", False
        return None, False

    # -- add_argument calls -------------------------------------------------
    def _explicit_type(self, node) -> str | None:
        name = dotted(node)
        if name in TYPE_CALLABLES:
            return TYPE_CALLABLES[name]
        if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in ("optional_type", "parse_type") and node.args:
            return self._explicit_type(node.args[0])
        return None

    def add(self, names: list[str], info: dict) -> None:
        longs = [n for n in names if n.startswith("--")]
        if not longs:
            return
        main = longs[-1] if info.get("field") and longs[-1].lstrip("-").replace("-", "_") == info["field"].split(".")[-1] else longs[0]
        aliases = sorted(n for n in names if n != main)
        entry = {"no_form": info.get("no_form", False), "type": info.get("type"), "aliases": aliases,
                 "source": info["source"]}
        if info.get("field"):
            entry["field"] = info["field"]
        if info.get("line"):
            entry["line"] = info["line"]
        self.options.setdefault(main, entry)

    def _action(self, node) -> tuple[str | None, bool] | None:
        """(type, no_form) fixed by an action=, or None when the action says nothing."""
        if isinstance(node, ast.Constant) and node.value in ("store_true", "store_false"):
            return "bool", False
        if (dotted(node) or "").endswith("BooleanOptionalAction"):
            return "bool", True
        if isinstance(node, ast.Constant) and node.value == "append":
            return None
        return None

    def function(self, mod: Module, func: ast.FunctionDef | ast.AsyncFunctionDef, source: str,
                 kwargs_vars: dict | None = None) -> None:
        """Options added by add_argument calls in one function body."""
        kwargs_vars = dict(kwargs_vars or {})
        for node in ast.walk(func):  # xxx_kwargs = get_kwargs(Cls)
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and (dotted(node.value.func) or "").endswith("get_kwargs")
                    and node.value.args and dotted(node.value.args[0])):
                kwargs_vars[node.targets[0].id] = dotted(node.value.args[0])
        looped = _looped_options(func)
        for node in ast.walk(func):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
                continue
            for name, type_node in looped.get(id(node), ()):  # one option per element of the loop's list
                self.add([name], {"source": source, "line": node.lineno,
                                  "type": self._explicit_type(type_node) if type_node is not None else "str"})
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
            if not names:
                continue
            info: dict = {"source": source, "line": node.lineno}
            keywords = list(node.keywords)
            for kw in node.keywords:  # **{**xxx_kwargs["field"], "default": None}
                if kw.arg is None and isinstance(kw.value, ast.Dict):
                    for key, value in zip(kw.value.keys, kw.value.values):
                        if key is None:
                            keywords.insert(0, ast.keyword(arg=None, value=value))
                        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                            keywords.append(ast.keyword(arg=key.value, value=value))
            for kw in keywords:
                if kw.arg is None and isinstance(kw.value, ast.Subscript):  # **xxx_kwargs["field"]
                    var, field = dotted(kw.value.value), kw.value.slice
                    if var in kwargs_vars and isinstance(field, ast.Constant) and isinstance(field.value, str):
                        cls_mod, cls = self.class_of(mod, kwargs_vars[var])
                        if cls_mod is not None and cls is not None:
                            fields = self.config_fields(cls_mod, cls)
                            info["field"] = f"{cls.name}.{field.value}"
                            if field.value in fields:
                                info["type"], info["no_form"] = self.field_type(*fields[field.value])
            if "field" not in info and not any(kw.arg in ("action", "type") for kw in keywords):
                info["type"] = "str"  # argparse's default: the value as given
            several = info.get("type") == "list"  # get_kwargs gives a list field nargs="+"
            for kw in keywords:  # explicit keywords override the field's
                if kw.arg == "action":
                    fixed = self._action(kw.value)
                    if fixed:
                        info["type"], info["no_form"] = fixed
                elif kw.arg == "type":
                    info["type"] = self._explicit_type(kw.value)
                elif kw.arg == "nargs":
                    several = isinstance(kw.value, ast.Constant) and kw.value.value in ("+", "*")
            if several and info.get("type") != "bool":  # a type= converts each of the words
                info["type"] = "list"
            self.add(names, info)

    def dataclass_args(self, mod: Module, cls: ast.ClassDef, source: str) -> None:
        """Options that a FrontendArgs-style add_cli_args makes from every field."""
        overrides: dict[str, dict[str, ast.expr]] = {}
        unlisted: set[str] = set()  # fields whose nargs is deleted: `del kw["field"]["nargs"]`
        klass: ast.ClassDef | None = cls
        chain = [(mod, cls)]
        while klass is not None:  # the customisations live in the class and its bases
            base = next((dotted(b) for b in klass.bases if dotted(b)), None)
            base_mod, klass = self.class_of(chain[-1][0], base) if base else (None, None)
            if base_mod is not None and klass is not None:
                chain.append((base_mod, klass))
        for _, klass in reversed(chain):
            for node in ast.walk(klass):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    # kw["field"]["key"] = value; a key that is no string names no field or keyword: never looked up
                    if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                            and isinstance(target.slice.value, str)
                            and isinstance(target.value, ast.Subscript) and isinstance(target.value.slice, ast.Constant)
                            and isinstance(target.value.slice.value, str)):
                        overrides.setdefault(target.value.slice.value, {})[target.slice.value] = node.value
                if isinstance(node, ast.Delete):
                    unlisted.update(field for target in node.targets if (field := _nargs_of(target)))
        for name, (field_mod, annotation) in self.config_fields(mod, cls).items():
            info: dict[str, Any] = {"source": source, "field": f"{cls.name}.{name}"}
            info["type"], info["no_form"] = self.field_type(field_mod, annotation)
            extra = overrides.get(name, {})
            # get_kwargs gives a list field nargs="+"; a new type= converts each word, and only
            # deleting nargs makes the option take one (allowed_origins, middleware).
            several = info["type"] == "list" and name not in unlisted
            if "type" in extra:
                info["type"] = self._explicit_type(extra["type"])
            if "action" in extra:
                fixed = self._action(extra["action"])
                if fixed:
                    info["type"], info["no_form"] = fixed
            if several and info["type"] != "bool":
                info["type"] = "list"
            flags = extra.get("flags")
            # option names are strings: `"flags": [None]` names none (add() reads each as a str)
            names = ([e.value for e in flags.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                     if isinstance(flags, ast.List) else [])
            self.add(names + ["--" + name.replace("_", "-")], info)


def _nargs_of(target: ast.expr) -> str | None:
    """The field of ``kw["field"]["nargs"]``, as a ``del`` names it."""
    if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) and target.slice.value == "nargs"
            and isinstance(target.value, ast.Subscript) and isinstance(target.value.slice, ast.Constant)
            and isinstance(target.value.slice.value, str)):
        return target.value.slice.value
    return None


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _looped_options(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, list[tuple[str, ast.expr | None]]]:
    """add_argument calls that a loop over a written-out list makes, one per
    element (0.11.0's deprecated guided-decoding options): ``for arg, type
    in [("--name", str), ...]: group.add_argument(arg, type=type, ...)``.
    By the call's id: each option's name and the expression its ``type=``
    names (None: no type given)."""
    out: dict[int, list[tuple[str, ast.expr | None]]] = {}
    for loop in ast.walk(func):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, (ast.List, ast.Tuple))):
            continue
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        names = [t.id if isinstance(t, ast.Name) else None for t in targets]
        rows = [e.elts if isinstance(e, ast.Tuple) else [e] for e in loop.iter.elts]
        for call in (n for statement in loop.body for n in ast.walk(statement)):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"
                    and call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in names):
                continue
            at = names.index(call.args[0].id)
            type_kw = next((kw.value for kw in call.keywords if kw.arg == "type"), None)
            type_at = names.index(type_kw.id) if isinstance(type_kw, ast.Name) and type_kw.id in names else None
            found: list[tuple[str, ast.expr | None]] = []
            for row in rows:
                name = row[at] if at < len(row) else None
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("-"):
                    found.append((name.value, row[type_at] if type_at is not None and type_at < len(row) else type_kw))
            out[id(call)] = found
    return out


def _loops_over_fields(func: ast.FunctionDef) -> bool:
    """True when add_cli_args adds f"--{key...}" for every get_kwargs(cls) entry."""
    return any(isinstance(n, ast.JoinedStr) for n in ast.walk(func)) and any(
        isinstance(n, ast.For) for n in ast.walk(func))


def _frontend(wheel: Wheel) -> Module | None:
    """The module whose make_arg_parser `vllm serve` uses (it moved across releases).

    Read from the import in vllm/entrypoints/cli/serve.py; failing that, the
    first known location that defines make_arg_parser.
    """
    candidates = []
    serve = wheel.module(SERVE_MODULE)
    if serve is not None and "make_arg_parser" in serve.bindings:
        value = serve.bindings["make_arg_parser"][-1][1]
        if value["kind"] == "import":
            candidates.append(value["module"])
    for name in candidates + list(FRONTEND_MODULES):
        module = wheel.module(name)
        if module is not None and "make_arg_parser" in module.functions:
            return module
    return None


@contextlib.contextmanager
def wheel_reader(path: str, fmt: int) -> Iterator[tuple[dict, OptionReader]]:
    """A reader of the wheel at ``path``, open while the block runs, and the
    head of every file read from it: ``{"format": fmt, "vllm_version",
    "wheel": {"file", "sha256", "size"}}``.

    Raises WheelError: wheel.unreadable, wheel.not_vllm, wheel.no_options."""
    sha256, size = file_digest(path)
    with open_wheel(path) as zf:
        meta = wheel_metadata(zf, path)
        head = {"format": fmt, "vllm_version": meta["version"],
                "wheel": {"file": os.path.basename(path), "sha256": sha256, "size": size}}
        yield head, OptionReader(Wheel(zf, path))


def read_options(path: str) -> dict:
    """The options `vllm serve` accepts in this wheel (see the module docstring).

    Raises WheelError: wheel.unreadable, wheel.not_vllm, wheel.no_options."""
    with wheel_reader(path, OPTIONS_FORMAT) as (head, reader):
        wheel = reader.wheel
        arg_utils = wheel.module(ARG_UTILS)
        assert arg_utils is not None  # OptionReader refuses a wheel without it (wheel.no_options); the parse is cached
        for cls_name, source in (("EngineArgs", "EngineArgs"), ("AsyncEngineArgs", "AsyncEngineArgs")):
            func = _method(arg_utils.classes.get(cls_name), "add_cli_args")
            if func is not None:
                reader.function(arg_utils, func, source)
        serve = wheel.module(SERVE_MODULE)
        for command in (serve.classes.values() if serve is not None else ()):
            init = _method(command, "subparser_init")  # the serve subcommand's own options (0.9.1's --headless)
            if serve is not None and init is not None:
                reader.function(serve, init, command.name)
        frontend = _frontend(wheel)
        if frontend is not None:
            make = frontend.functions["make_arg_parser"]
            reader.function(frontend, make, "make_arg_parser")
            for node in ast.walk(make):  # X.add_cli_args(parser) for a frontend dataclass X
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_cli_args":
                    name = dotted(node.func.value)
                    cls_mod, cls = reader.class_of(frontend, name) if name else (None, None)
                    if cls_mod is None or cls is None or cls_mod.name == ARG_UTILS:
                        continue
                    adder: ast.FunctionDef | None = None
                    klass: ast.ClassDef | None = cls
                    klass_mod: Module | None = cls_mod
                    while adder is None and klass_mod is not None and klass is not None:
                        adder = _method(klass, "add_cli_args")
                        if adder is None:
                            base = next((dotted(b) for b in klass.bases if dotted(b)), None)
                            klass_mod, klass = reader.class_of(klass_mod, base) if base else (None, None)
                    if adder is not None and _loops_over_fields(adder):
                        reader.dataclass_args(cls_mod, cls, cls.name)
                    elif adder is not None:
                        assert klass_mod is not None  # the module of the class whose add_cli_args was found
                        reader.function(klass_mod, adder, cls.name)
        parser_src = ""  # the FlexibleArgumentParser class's own text only
        inverse: dict[str, str] = {}
        for name in PARSER_MODULES:
            module = wheel.module(name)
            if module is not None and "FlexibleArgumentParser" in module.classes:
                node = module.classes["FlexibleArgumentParser"]
                parser_src = "\n".join(reader._source(name).splitlines()[node.lineno - 1:node.end_lineno])
                inverse = _inverse_prefixes(module, parser_src)
                break
        parser: dict[str, Any] = {
            # FlexibleArgumentParser rewrites --foo_bar to --foo-bar
            "underscores_accepted": 'replace("_", "-")' in parser_src,
            # --json-option.key value (dotted keys of a JSON option)
            "dotted_json_keys": 'split(".")' in parser_src,
            "config_file_option": "--config" in parser_src,
        }
        if inverse:
            parser["inverse_prefixes"] = inverse
            for flag, entry in reader.options.items():
                inverses = [to + name[len(prefix):] for name in (flag, *entry["aliases"]) if entry["no_form"]
                            for prefix, to in inverse.items() if name.startswith(prefix)]
                if inverses:
                    entry["inverses"] = inverses
        return {
            **head,
            "frontend_module": frontend.name if frontend else None,
            "parser": parser,
            "options": dict(sorted(reader.options.items())),
        }


def _inverse_prefixes(module: Module, parser_src: str) -> dict[str, str]:
    """The prefixes whose inverse spelling every on/off option also takes
    (0.33.0's ``EnableDisableAction``, which FlexibleArgumentParser registers
    in place of argparse's BooleanOptionalAction: ``--disable-x`` also answers
    to ``--enable-x``, setting the opposite value), from the class's
    ``_inverse_prefixes``; none when the parser registers no such action."""
    cls = module.classes.get("EnableDisableAction")
    if cls is None or 'register("action"' not in parser_src:
        return {}
    for statement in cls.body:
        if (isinstance(statement, ast.Assign) and [dotted(t) for t in statement.targets] == ["_inverse_prefixes"]
                and isinstance(statement.value, ast.Dict)):
            pairs = zip(statement.value.keys, statement.value.values)
            return {k.value: v.value for k, v in pairs if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    and isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return {}


def options_json(options: dict) -> str:
    """The option list as the text of an options file."""
    return json.dumps(options, indent=1, ensure_ascii=False) + "\n"
