"""An engine call of a Python launcher (``LLM(...)``, ``EngineArgs(...)``,
``AsyncEngineArgs(...)``, ``EngineArgs.from_cli_args(args)``) read as the
command line vLLM would be given for it (``vllm serve MODEL
--kv-transfer-config JSON ...``), as every launch is
(core.command.read_command): its keywords (also those a dict written in the
file unpacks), the fields the script sets on the object below the call, and
what may change them. python.py finds the calls; this module reads one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Any, cast

from ...core.errors import Problem
from ...core.markers import references, unresolved
from ...core.options import ENGINE_FIELDS, FLAG_OPTIONS, OFF_SWITCHES, VALUE_OPTIONS, Arg
from .context import Ctx
from .deployment import Deployment
from .launch import DEVICE_OPTION, Invocation, apply_facts, deployment
from .pyforms import dict_written, within
from .pylists import CommandLists
from .pyscript import ENGINES
from .pyvalues import RUNTIME, Unknown, as_word, source_text
from .release import ReleaseHint

__all__ = ["EngineCalls", "LAUNCHES"]

# The calls that are launches: an engine's arguments written out, or taken from the command line.
LAUNCHES = ENGINES | {"EngineArgs.from_cli_args", "AsyncEngineArgs.from_cli_args"}
# How a script hands an EngineArgs object on whole: LLM(**asdict(args)), LLM(**vars(args)).
_UNPACKERS = frozenset({"asdict", "vars"})
# EngineArgs' methods that make a config and start nothing (the model's, the loader's: kserve's
# huggingfaceserver tests download a model so), and the VllmConfig, read below.
_CONFIG_MAKERS = frozenset({"create_model_config", "create_load_config", "create_engine_config"})
# vLLM's classes and functions that start an engine from the VllmConfig `create_engine_config()`
# makes (its engine core, whose scheduler holds the KV cache manager; vllm/v1/engine/ and the V0
# engines of older releases): a script that names none of them only configures with it.
_CONFIG_ENGINES = frozenset({"LLMEngine", "AsyncLLMEngine", "MQLLMEngine", "AsyncLLM", "EngineCore", "EngineCoreProc",
                             "DPEngineCoreProc", "EngineCoreClient", "CoreEngineProcManager", "from_vllm_config",
                             "make_client", "make_async_mp_client", "launch_core_engines", "run_engine_core"})
# vLLM's option for each field the decision reads (its long spelling), and the flags of the boolean ones.
_OPTIONS = {field: option for option, (field, _) in reversed(VALUE_OPTIONS.items()) if option.startswith("--")}
_FLAGS = {field: {value: flag for flag, (named, value) in FLAG_OPTIONS.items() if named == field}
          for field, _ in FLAG_OPTIONS.values()}
# vLLM's options as a message or an origin names them ("`--kv-transfer-config` takes ..."), and the
# keyword a script writes for each.
_OPTION_NAMED = re.compile("|".join(re.escape(o) for o in sorted({*VALUE_OPTIONS, *FLAG_OPTIONS, *OFF_SWITCHES, DEVICE_OPTION},
                                                                   key=len, reverse=True) if o.startswith("--")))
# An engine call's `device=`, given as `--device`, which names the platform (launch.platform_of_device).
_DEVICE = "device"
_KEYWORD = {**{option: field for option, (field, _) in {**VALUE_OPTIONS, **FLAG_OPTIONS}.items()}, **OFF_SWITCHES,
            DEVICE_OPTION: _DEVICE}
# The fields read only where False turns a default off (core.options.OFF_SWITCHES), and their `--no-` flag.
_SWITCHED = {field: option for option, field in OFF_SWITCHES.items()}
# What ``from_cli_args(args)`` reads where ``args`` is ``parser.parse_args()``: the script's own command line.
_COMMAND_LINE = Unknown("args", "is the script's command line, parsed")


class EngineCalls(CommandLists):
    """A parsed launcher's engine calls, each read as its command line."""

    ctx: Ctx  # the file (the reader that finds the calls sets it)

    def __init__(self, tree: ast.Module):
        super().__init__(tree)
        self._config_engines: bool | None = None  # see _names_config_engines

    def only_hands_on(self, call: ast.Call, scope: Any) -> bool:
        """Whether ``call`` only passes on an EngineArgs object whose own call
        is the launch: ``LLM(**asdict(engine_args))`` (``from_engine_args(args)``
        is no launch at all: its EngineArgs call is), also where each branch of
        an ``if`` binds ``engine_args`` to a call of its own (vLLM's LMCache
        CPU-offloading example)."""
        if self.what(call.func) != "LLM" or call.args:
            return False
        splats = [k.value for k in call.keywords if k.arg is None]
        if len(splats) != 1 or len(call.keywords) != 1:
            return False
        splat = splats[0]
        if isinstance(splat, ast.Call) and isinstance(splat.func, (ast.Name, ast.Attribute)) and len(splat.args) == 1 \
                and (splat.func.id if isinstance(splat.func, ast.Name) else splat.func.attr) in _UNPACKERS:
            target = splat.args[0]
            sources = [self.source(target, scope, 0)]
            if sources[0] is None and isinstance(target, ast.Name):
                sources = self.values(target.id, scope)
            return bool(sources) and all(isinstance(s, ast.Call) and self.what(s.func) in LAUNCHES for s in sources)
        return False

    def only_configures(self, call: ast.Call, scope: Any, what: str) -> bool:
        """Whether ``call`` makes engine arguments that the script only
        turns into a config, starting no engine: a model config
        (``engine_args.create_model_config()``: vLLM's render server does so
        to render chat templates on the CPU, and SkyRL's render server and
        llm-d-kv-cache's tokenizer service after it), or a VllmConfig
        (``create_engine_config()``) that its function keeps to itself, in a
        script that names no engine to start from one (tpu-inference's test
        fixtures, which set up vLLM's distributed state with it). Made by a
        helper of the file that returns them (``def _engine_args(**kw): return
        EngineArgs(**kw)``, vllm-metal's tests), each call of the helper is read so."""
        if what == "LLM":
            return False
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(node, ast.Return) and node.value is call for node in scope.body):
            sites = [(site, where) for site, where in self.calls_of.get(scope.name, []) if not within(site, scope)]
            return bool(sites) and all(self._configured_only(site, where) for site, where in sites)
        return self._configured_only(call, scope)

    def _configured_only(self, made: ast.Call, scope: Any) -> bool:
        """Whether the engine arguments ``made`` gives, in ``scope``, are only made into configs (see only_configures)."""
        # (the object each config call is made from, and which: model or engine)
        configured = {id(n.func.value): (n, n.func.attr) for n in ast.walk(scope) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Attribute) and n.func.attr in _CONFIG_MAKERS}
        name = self.assigned.get(id(made))
        if id(made) in configured:  # `EngineArgs(...).create_engine_config()`: made into a config in place
            uses: list[ast.expr] = [made]
        elif name is None or "." in name:
            return False
        else:
            uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        if not uses or not all(id(use) in configured for use in uses):
            return False
        engine_configs = [config for config, kind in (configured[id(use)] for use in uses) if kind == "create_engine_config"]
        return not engine_configs or (not self._names_config_engines() and
                                      not any(self._handed_out(config, scope) for config in engine_configs))

    def _names_config_engines(self) -> bool:
        """Whether the script names one of vLLM's engines that start from a VllmConfig (_CONFIG_ENGINES)."""
        if self._config_engines is None:
            self._config_engines = any(isinstance(n, ast.Name) and n.id in _CONFIG_ENGINES or isinstance(n, ast.Attribute)
                                       and n.attr in _CONFIG_ENGINES or isinstance(n, ast.alias)
                                       and n.name.rpartition(".")[2] in _CONFIG_ENGINES for n in ast.walk(self.tree))
        return self._config_engines

    def _handed_out(self, made: ast.Call, scope: Any) -> bool:
        """Whether a config its function makes leaves the function, where
        another may start an engine from it: returned or yielded, itself or
        the name it is assigned to, or kept on another object (``self.config
        = ...``; not a field of its own, ``config.quant_config = f(config)``)."""
        held = self.assigned.get(id(made))
        for node in ast.walk(scope):
            if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
                given = node.value
            elif isinstance(node, ast.Assign) and not all(isinstance(t, ast.Name) or _root(t) == held for t in node.targets):
                given = node.value
            else:
                continue
            if any(n is made or (held is not None and isinstance(n, ast.Name) and n.id == held) for n in ast.walk(given)):
                return True
        return False

    def engine_launch(self, call: ast.Call, scope: Any, what: str, env: dict[str, Arg],
                    release: ReleaseHint | None) -> Deployment:
        """The launch as the command line vLLM would be given for it (`vllm
        serve MODEL --kv-transfer-config JSON ...`), read as every launch is
        (core.command.read_command): a value not known is a marker there."""
        line = call.lineno
        here = f"line {line}"
        # Each keyword: its value (an expression, or why it is not known), where to read it, its line.
        keywords: dict[str, tuple[ast.expr | Unknown, Any, int]] = {}
        opened: list[Arg] = []
        # The parsed namespace `from_cli_args` builds from, given as `args` or by keyword (`args=args`).
        cli = what.endswith(".from_cli_args")
        parsed_from = (call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)) \
            if cli else None
        for keyword in call.keywords:
            if keyword.value is parsed_from:
                continue
            if keyword.arg is not None:
                keywords[keyword.arg] = (keyword.value, scope, keyword.value.lineno)
                continue
            unpacked = self._unpacked(keyword.value, scope, line)
            given, splats, changed = unpacked if unpacked is not None else ({}, [keyword.value], [])
            keywords.update(given)
            for splat in splats:  # any keywords at all, the model's and the KV configuration's among them
                opened.append(Arg(unresolved(f"**{source_text(splat)}", "is unpacked when the script runs"), here,
                                  many=True))
            # (`engine_args.update(other)`: any keys, set or replaced; said once where the whole is unknown)
            for at in changed if not any(splat is keyword.value for splat in splats) else ():
                opened.append(Arg(unresolved(f"**{source_text(keyword.value)}", f"is changed at line {at} in a way "
                                             "not read"), here, many=True))
        parsed = (self._parsed_words(parsed_from, scope, line) if parsed_from is not None else _COMMAND_LINE) \
            if cli else None
        # What the script sets on the parsed namespace before the call, which wins over what was parsed.
        namespace: dict[str, tuple[ast.expr | Unknown, Any, int]] = {}
        if parsed_from is not None:
            namespace, changed = self._namespace_set(parsed_from, scope, line)
            for at in changed:  # (`setattr(args, key, value)` in a loop: any fields, set or replaced)
                opened.append(Arg(unresolved(f"{source_text(parsed_from)}.*", f"may be set at line {at} in a way not "
                                             "read"), f"line {at}", many=True))
        if isinstance(parsed, list):  # `parser.parse_args([...])`: the words the script gives it
            opened += parsed
        elif parsed is not None:
            opened.append(Arg(unresolved(source_text(parsed_from) if parsed_from is not None else "the command line",
                                         parsed.why), here))
        first = call.args[0] if call.args and what in ENGINES else None
        if isinstance(first, ast.Starred):  # (`*args`: any of the engine's fields by position, the model first)
            opened.append(Arg(unresolved(f"*{source_text(first.value)}", "is unpacked when the script runs"), here,
                              many=True))
            first = None
        self._changed_after(call, scope, keywords, opened)
        model = keywords.get("model") or ((first, scope, first.lineno) if first is not None else None)

        spelled: set[tuple[str, str]] = set()  # the options written for keywords, and where

        def spell(given: dict[str, tuple[ast.expr | Unknown, Any, int]]) -> list[Arg]:
            """The options of the fields the decision reads, as vLLM's command line spells them."""
            words = []
            for name, (value, origin) in ((n, (self._read(g), f"line {g[2]}")) for n, g in given.items()
                                          if n in ENGINE_FIELDS or n in _SWITCHED or n == _DEVICE):
                if name in _SWITCHED and value is False:  # `enable_chunked_prefill=False`
                    words.append(Arg(_SWITCHED[name], origin))
                if name == _DEVICE and value is not None:  # (the platform it picks: launch.platform_of_device)
                    words += [Arg(DEVICE_OPTION, origin), Arg(as_word(value), origin)]
                if name not in ENGINE_FIELDS or value is None or (name in _FLAGS and not isinstance(value, bool)):
                    continue  # (None: vLLM's default; a flag's other values: _flag_problems)
                words += [Arg(_FLAGS[name][value], origin)] if name in _FLAGS else \
                    [Arg(_OPTIONS[name], origin), Arg(as_word(value), origin)]
            spelled.update((word.text, word.origin) for word in words if word.text in _KEYWORD)
            return words

        def read() -> list[Arg]:
            words = [Arg("vllm", here), Arg("serve", here)]
            if model is not None:
                words.append(Arg(as_word(self._read(model)), f"line {model[2]}: model"))
            elif isinstance(parsed, Unknown) and "model" not in namespace:  # the model is in the namespace too
                written = f"{source_text(call.args[0])}.model" if call.args else "model"
                words.append(Arg(unresolved(written, "is given on the script's command line" if parsed is _COMMAND_LINE
                                            else f"comes from `{parsed.shown}`, which {parsed.why}"), here))
            # (a keyword the decision does not read is not read, so it makes no choice)
            after = [Arg("--model", f"line {namespace['model'][2]}"),
                     Arg(as_word(self._read(namespace["model"])), f"line {namespace['model'][2]}")] \
                if "model" in namespace else []
            return words + spell(keywords) + opened + after + spell(namespace)

        # A choice the script makes (`a if c else b`) is read once per branch, as a command list's is.
        words, paths = self.readings(read)
        problems = self._flag_problems(keywords)
        inv = Invocation(words, line, env, f":{line}", require_model=len(words) > 2, problems=problems, release=release,
                         paths=tuple((which, argv, env) for which, argv in paths))
        apply_facts([inv], self.ctx)
        return _as_keywords(deployment(inv, self.ctx, "python"), spelled)

    def _parsed_words(self, args: ast.expr, scope: Any, line: int) -> list[Arg] | Unknown:
        """The words ``args`` was parsed from, where it is the result of an
        argument parser's ``parse_args`` given a list in the file (SkyRL's
        render server: ``parser.parse_args(["--model", model_path, ...])``,
        verl's ``parse_args(args=server_args)``); otherwise why the namespace is
        not known: it is the script's own command line (``parse_args()``), a
        parameter of a function whose calls do not give it, or built when the
        script runs."""
        found = self.resolved(args, scope)
        if isinstance(found, Unknown):  # (a parameter's calls do not all pass one value: say so; else a guess)
            return found if self.parameter_of(args, scope) is not None else _COMMAND_LINE
        parsed, where = found
        if isinstance(parsed, ast.BoolOp) and isinstance(parsed.op, ast.Or):  # `parser.parse_args() or Namespace()`
            parsed = parsed.values[0]
        if not (isinstance(parsed, ast.Call) and isinstance(parsed.func, ast.Attribute) and parsed.func.attr == "parse_args"):
            return _COMMAND_LINE if parsed is args else Unknown(source_text(args), RUNTIME)
        given = [*parsed.args[:1], *(k.value for k in parsed.keywords if k.arg == "args")]
        if len(given) != 1 or len(parsed.args) > 1 or any(k.arg != "args" for k in parsed.keywords) \
                or (isinstance(given[0], ast.Constant) and given[0].value is None):  # (None: sys.argv)
            return _COMMAND_LINE
        # (a list written there is read as a command list's words: `[*common_args, "--x", "1"]`)
        return self._words(given[0].elts, where) if isinstance(given[0], (ast.List, ast.Tuple)) else \
            self._words_of(given[0], where, line)

    def _changed_after(self, call: ast.Call, scope: Any, keywords: dict[str, tuple[ast.expr | Unknown, Any, int]],
                       opened: list[Arg]) -> None:
        """What the script does to the engine arguments ``call`` builds, below
        it in its scope, where the call is bound to a name: ``args.kv_transfer_config
        = KVTransferConfig(...)`` sets that field (in an ``if`` or a loop: a value
        not known), and ``args = replace(args, **extra)``, or any other call
        given ``args`` and bound to it again, may change any field."""
        name = self.assigned.get(id(call))
        if name is None or "." in name:
            return
        # (a field set by a statement of the block the call is made in, a `with`'s body, is set whenever it is made)
        made_in = next((b.block for b in self.scopes.get(scope, {}).get(name, ()) if b.value is call), 0)
        for attr, value, line, straight, block in self.attributes_set.get((id(scope), name), ()):
            straight = straight or (made_in != 0 and block == made_in)
            if line > call.lineno and attr is None:  # (`setattr(args, key, value)`: any field)
                opened.append(Arg(unresolved(f"{name}.*", f"may be set at line {line} in a way not read"),
                                  f"line {line}", many=True))
            elif line > call.lineno and attr in ENGINE_FIELDS and value is not None:
                keywords[attr] = (value, scope, line) if straight else \
                    (Unknown(f"{name}.{attr}", f"is set at line {line} on some runs only"), scope, line)
        for binding in self.scopes.get(scope, {}).get(name, ()):
            again = binding.value
            if binding.line > call.lineno and isinstance(again, ast.Call) and again is not call \
                    and any(isinstance(a, ast.Name) and a.id == name for a in [*again.args, *(k.value for k in again.keywords)]):
                opened.append(Arg(unresolved(source_text(again), f"may change `{name}` at line {binding.line}"),
                                  f"line {binding.line}", many=True))
        for helper, where in self.calls:  # (a function of the file handed it, which sets any of its fields)
            if where is scope and helper.lineno > call.lineno and self._sets_any(helper, name):
                opened.append(Arg(unresolved(source_text(helper), f"may set any field of `{name}` at line "
                                             f"{helper.lineno}"), f"line {helper.lineno}", many=True))

    def _sets_any(self, helper: ast.Call, name: str) -> bool:
        """Whether ``helper`` is a call of a function the file defines once
        (``f(...)``, ``self.f(...)``) that is given ``name`` and sets any
        attribute of that parameter (``setattr(obj, key, value)``:
        TorchServe's vLLM handler fills its engine arguments so, from
        model-config.yaml)."""
        callee = helper.func.id if isinstance(helper.func, ast.Name) else helper.func.attr \
            if isinstance(helper.func, ast.Attribute) else None
        defined = self.functions.get(callee or "", [])
        at = next((i for i, a in enumerate(helper.args) if isinstance(a, ast.Name) and a.id == name), None)
        if len(defined) != 1 or at is None:
            return False
        parameters = [a.arg for a in (*defined[0].args.posonlyargs, *defined[0].args.args)]
        parameters = parameters[1:] if isinstance(helper.func, ast.Attribute) and parameters[:1] == ["self"] \
            else parameters
        return at < len(parameters) and any(attr is None for attr, *_ in
                                            self.attributes_set.get((id(defined[0]), parameters[at]), ()))

    def _namespace_set(self, args: ast.expr, scope: Any, line: int) \
            -> tuple[dict[str, tuple[ast.expr | Unknown, Any, int]], list[int]]:
        """The fields the script sets on the namespace ``args`` (a name bound
        to ``parser.parse_args(...)``) between that binding and the call at
        ``line``, in its scope (BentoML's OpenLLM services: ``args =
        make_arg_parser(...).parse_args([])``, then ``args.model = ...``):
        each the value it is set to, or, set on some runs of the script
        only, a value not known; and the lines that may set any field
        (``setattr(args, key, value)`` of a key not written,
        ``args.__dict__.update(...)``, ``vars(args).update(...)``), which
        may replace those set before them (values not known), as a dict's
        unpacking may (see _unpacked)."""
        found = self.bound(args, scope) if isinstance(args, ast.Name) else None
        if found is None or not (isinstance(found[0], ast.Call) and isinstance(found[0].func, ast.Attribute)
                                 and found[0].func.attr == "parse_args"):
            return {}, []
        parsed, where = found
        shown = source_text(args)
        changes = [(at, attr, value, straight, 0) for attr, value, at, straight, _
                   in self.attributes_set.get((id(where), cast(ast.Name, args).id), ())]
        # (not above the namespace, nor below the call)
        return self._applied(changes, where, {}, lambda at: at > parsed.lineno and (where is not scope or at < line),
                             lambda k: f"{shown}.{k}")

    def _flag_problems(self, keywords: dict[str, tuple[ast.expr | Unknown, Any, int]]) -> list[Problem]:
        """A problem for each boolean field given a value that is neither True,
        False nor None: one not known, or another."""
        problems: list[Problem] = []
        for name, given in keywords.items():
            value = self._read(given) if name in _FLAGS else None
            if value is None or isinstance(value, bool):
                continue
            if isinstance(value, Unknown):
                problems.append(self.ctx.problem("source.unresolved", f"`{name}` takes its value from "
                                                 f"{references(as_word(value), whole=True)}", line=given[2], path="/" + name))
            else:
                shown = source_text(given[0]) if isinstance(given[0], ast.expr) else str(value)
                problems.append(self.ctx.problem("input.schema", f"`{name}` must be True, False or None, not `{shown}`",
                                                 line=given[2], path="/" + name))
        return problems

    def _read(self, given: tuple[ast.expr | Unknown, Any, int]) -> Any:
        """A keyword's value (see _deployment): read, or why it is not known."""
        node, scope, _ = given
        return node if isinstance(node, Unknown) else self.value(node, scope, 0)

    def _unpacked(self, splat: ast.expr, scope: Any, line: int) \
            -> tuple[dict[str, tuple[ast.expr | Unknown, Any, int]], list[ast.expr], list[int]] | None:
        """The keywords ``**splat`` gives where it is a dict the file writes
        out (``**{...}``, ``**dict(...)``: ray-llm's ``AsyncEngineArgs(**dict(...))``)
        or names one (``llm_kwargs = {...}`` or ``dict(...)``), with the keys
        the statements between it and the call at ``line`` set in its own
        function body (``llm_kwargs["k"] = v``, ``llm_kwargs.update(...)``):
        each the value it is set to, or, set on some runs of the script
        only, a value not known; and the dicts unpacked into it
        (``dict(model=m, **extra)``: NVIDIA/NeMo-RL's ``llm_kwargs``), which
        may give any others (in a literal, a key they may replace is a value
        not known); and the lines of the statements that change it in a way
        not followed (``update(other)``, ``del``, ``pop``: LLaMA-Factory's
        ``engine_args.update(model_args.vllm_config)``), which may set any key
        and replace those set before them (values not known). None where
        ``splat`` names no such dict."""
        if isinstance(splat, ast.Name) and self.parameter_of(splat, scope) is not None:
            return self._parameter_keys(splat, scope, line)
        found = self.bound(splat, scope) if isinstance(splat, ast.Name) else (splat, scope)  # (`**{...}` in the call)
        written = dict_written(found[0]) if found is not None else None
        if found is None or written is None:
            return None
        display, where = found
        held = splat.id if isinstance(splat, ast.Name) else "the dict"
        replaced = "may be replaced by what is unpacked into the dict when the script runs"
        out: dict[str, tuple[ast.expr | Unknown, Any, int]] = {
            k: (Unknown(f"{held}[{k!r}]", replaced) if may_change else v, where, v.lineno)
            for k, v, may_change in written.entries}
        if not isinstance(splat, ast.Name):
            return out, written.unpacked, []
        # (above the dict, or below the call: not its changes)
        out, changed = self._keys_set(splat.id, where, out, lambda at: at > display.lineno and
                                      (where is not scope or at < line), line if where is scope else None)
        return out, written.unpacked, changed

    def _keys_set(self, name: str, where: Any, out: dict[str, tuple[ast.expr | Unknown, Any, int]],
                  within: Any, use: int | None = None) -> tuple[dict[str, tuple[ast.expr | Unknown, Any, int]], list[int]]:
        """``out`` with the keys the statements of ``where`` set on the dict
        ``name`` holds, at the lines ``within`` takes (see _applied)."""
        return self._applied(self.keyed.get((id(where), name), ()), where, out, within, lambda k: f"{name}[{k!r}]", use)

    @staticmethod
    def _applied(changes: Any, where: Any, out: dict[str, tuple[ast.expr | Unknown, Any, int]], within: Any,
                 shown: Any, use: int | None = None) -> tuple[dict[str, tuple[ast.expr | Unknown, Any, int]], list[int]]:
        """``out`` with ``changes`` (line, key, value, straight, the last line
        of its block) at the lines ``within`` takes applied in order of their
        lines: each the value it is set to (on some runs of the script only: a
        value not known, shown as ``shown(key)`` gives it; one in a block that
        holds the use at line ``use`` below it has run before the use, as a
        binding there has); a change of any key (key or value None:
        ``update(other)``, ``del``, ``setattr(obj, k, v)``) makes every key
        before it a value not known, its line among those returned."""
        changed: list[int] = []
        # By line, each line's in the order written (the values themselves are never compared).
        for at, key, value, straight, end in sorted(changes, key=lambda change: change[0]):
            if not within(at):
                continue
            if key is None or value is None:
                changed.append(at)
                out = {k: (Unknown(shown(k), f"may be changed at line {at} in a way not read"), where, at) for k in out}
                continue
            out[key] = (value if straight or (use is not None and at < use <= end) else Unknown(shown(key), "is set on some runs of the script "
                                                       "(in an `if`, a loop or a `try`)"), where, at)
        return out, changed

    def _parameter_keys(self, splat: ast.Name, scope: Any, line: int) \
            -> tuple[dict[str, tuple[ast.expr | Unknown, Any, int]], list[ast.expr], list[int]]:
        """``**kwargs`` of a parameter, whose callers may pass any keys: the
        keys the function's body sets on it above the call at ``line``
        (``kwargs["kv_transfer_config"] = ...``; in an ``if`` or a loop, a
        value not known), which win over what a caller passed, and the
        parameter itself as a dict that may hold others (allenai/open-instruct's
        engine actor: ``kwargs["generation_config"] = "vllm"``, then
        ``AsyncEngineArgs(*args, **kwargs)``)."""
        out, changed = self._keys_set(splat.id, scope, {}, lambda at: at < line, line)  # (not below the call)
        return out, [splat], changed


def _as_keywords(found: Deployment, spelled: set[tuple[str, str]]) -> Deployment:
    """A launch read as a command line, its messages and origins naming each
    value by the keyword the script writes (``kv_transfer_config=``), not by
    vLLM's option; and each option written for a keyword (``spelled``: the
    option, where) left for the audit to check as the keyword
    (``disable_hybrid_kv_cache_manager=``): a release takes an engine field
    however its command line spells the option, or whether it has one."""
    def named(text: str) -> str:
        # (the launch is a call: what it takes besides are its arguments, not a command's words)
        text = text.replace("the command also takes", "the call also takes", 1) \
            .replace("only the options written here are read", "only the arguments written here are read", 1)
        return _OPTION_NAMED.sub(lambda m: _KEYWORD[m.group()], text)

    def origin(text: str) -> str:
        return _OPTION_NAMED.sub(lambda m: _KEYWORD[m.group()] + "=", text)

    return found.replace(problems=tuple(replace(p, message=named(p.message)) for p in found.problems),
                         notes=tuple(replace(n, message=named(n.message)) for n in found.notes),
                         origins=tuple((field, origin(text)) for field, text in found.origins),
                         options=tuple((_KEYWORD[option] + "=" if (option, where) in spelled else option, where)
                                       for option, where in found.options))


def _root(target: ast.expr) -> str | None:
    """The name an assignment's target is a field or an item of (``config`` of ``config.a.b = ...``)."""
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None
