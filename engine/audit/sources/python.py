"""Python launchers: a script that starts vLLM in-process (vLLM's offline
examples, LMCache's), each call of vLLM's ``LLM``, ``EngineArgs`` or
``AsyncEngineArgs`` one deployment; or one that runs vLLM's server as a
process (a Modal app, a benchmark harness), each command list that starts it
one deployment: ``["vllm", "serve", MODEL, "--kv-transfer-config",
json.dumps(KV)]`` (or ``[sys.executable, "-m",
"vllm.entrypoints.openai.api_server", ...]``) as ``subprocess`` or
``os.exec*`` is handed it, with the words the lines below it add to the
list (``cmd += [...]``, ``cmd.extend(...)``, ``cmd.append(...)``); or a
command line built as one string (a literal, an f-string, ``a + b``) that
a shell runs (``os.system(cmd)``, ``subprocess.run(cmd, shell=True)``,
``["bash", "-c", cmd]``: read as the shell reader reads a container's ``sh
-c`` string) or that the script splits into words (``cmd.split()``,
``shlex.split(cmd)``), at each call of a function of the script's own that
runs the string it is given. A Modal
image's pin (``uv_pip_install("vllm==0.10.1.1")``) is the release of the
file's launches.

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
calls in the file pass (each the same value, or the default); in a command
list, also ``str(x)`` and ``json.dumps(x)`` of such a value, and a
``*starred`` list. An environment variable read with a default
(``os.environ.get("VLLM_BIN", "vllm")``) is its default, as the shell reader
takes ``${VAR:-default}``. A choice ``a if c else b`` the file does not
settle is read once per branch, and decided where the branches agree. A
word the script adds on some runs only (in an ``if``, a loop) or that is
not known is a word of the command left open. The launch is then read as the command line vLLM
would be given (``vllm serve MODEL --kv-transfer-config JSON ...``), as every
launch is (core.command.read_command): anything else (``args.connector``,
an f-string, a loop variable) is a value not known there, a
``source.unresolved`` problem where the decision reads it and a note where
it does not. An
``EngineArgs`` object passed on whole (``LLM(**asdict(engine_args))``,
``from_engine_args(engine_args)``) is the one launch of its ``EngineArgs``
call, with the fields the script sets on it below the call (``args.kv_transfer_config
= ...``; a call that is given it and bound to it again may change any);
``EngineArgs.from_cli_args(args)`` is a launch whose options all come
from the script's command line, or from the list the file hands
``parser.parse_args([...])``. The environment variables the decision reads
are those the script sets in ``os.environ`` above the call (vLLM reads them
when the call builds its config).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, cast

from ...core.errors import Problem
from ...core.markers import has_unresolved, unresolved
from ...core.options import Arg, find_vllm
from .connector_code import registered_connectors, with_registered
from .context import Ctx
from .deployment import Deployment, SourceFile
from .detect import SHELLS, mentions_vllm, mentions_vllm_outside_data
from .launch import Invocation, apply_facts, config_from_fs, deployment, read_from_env
from .pyforms import (dotted_name, imported_from, ipython_install, ipython_shell, is_environ, is_vllm_module, list_holder,
                      splitting, within)
from .pyengine import LAUNCHES, EngineCalls
from .pyray import RAY_LLM, ray_engine_calls
from .pylists import ImageRun, Readings
from .pyscript import MAX_CALLS
from .pyvalues import as_word, command_text, held_markers, restored_env, restored_words, split_words
from .pyrelease import launcher_release, truss_runs_other
from .release import PIN, ReleaseHint, from_image, from_pin, pinned, platform_of, upgraded
from .shell import release_at, run_script
from .shell_commands import nested_script

__all__ = ["python_file"]

# How a Modal app installs packages in its image (`modal.Image...uv_pip_install("vllm==0.10.1.1")`,
# also given a list), and a Beam app in its (`beam.Image(...).add_python_packages(["vllm==0.5.4"])`).
_PIP_INSTALLS = frozenset({"pip_install", "uv_pip_install", "add_python_packages"})
# The calls that run a command line given as one string through a shell; those that do so
# with `shell=True`, and otherwise run a list of words (a string split into them).
_SHELL_RUNS = frozenset({("os", "system"), ("os", "popen"), ("subprocess", "getoutput"),
                         ("subprocess", "getstatusoutput"), ("asyncio", "create_subprocess_shell")})
_SUBPROCESS = frozenset(("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output"))
# A function of the script's own that runs the string it is given is a launch at each of its
# calls: its first calls in the file, up to this many (a source.limit problem says so).
_MAX_SITES = 64


class _Shell(NamedTuple):
    """A command line the script runs through a shell, as the string it
    builds; and that string once per choice the script makes when it runs
    (``paths``: which branches, the string), where it makes one or two."""

    text: str
    paths: tuple[tuple[str, str], ...] = ()


def _resplit(readings: Readings) -> Readings:
    """A command list's words as a shell splits them once joined with
    blanks: each element split as shlex splits it, where it can be (a value
    not known, or an unclosed quote, stays one word)."""
    def split(words: list[Arg]) -> list[Arg]:
        out: list[Arg] = []
        for arg in words:
            parts = None if arg.many or has_unresolved(arg.text) else split_words(arg.text, True)
            out += [Arg(part, arg.origin) for part in parts] if parts is not None else [arg]
        return out
    words, paths = readings
    return split(words), tuple((which, split(path)) for which, path in paths)


def _as_shell(run: ImageRun) -> _Shell:
    """A command list that runs a vLLM image, as the command line a shell reads (on each path too)."""
    words, paths = run.readings
    return _Shell(command_text(words), tuple((which, command_text(argv)) for which, argv in paths))


class _Listed(NamedTuple):
    """A command list that starts vLLM's server, as a read gave its words
    (``readings``); the name it is assigned to, which reads it again once per
    call of the function it is in where those calls pass it different
    values; and whether they do (``varied``)."""

    readings: Readings
    name: str | None
    varied: bool


class _Split(NamedTuple):
    """A command line the script splits into words: ``cmd.split()``, or
    ``shlex.split(cmd)`` (``shell_like``); ``paths`` as a _Shell's."""

    text: str
    shell_like: bool
    paths: tuple[tuple[str, str], ...] = ()


# The Python that parses the files: a file may use the syntax of a later one (an audit on 3.11 of a 3.12 f-string).
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
_UNPARSED = f"not Python that Python {_PYTHON} parses"
# What a launch is written as, found in the text of a file this Python cannot parse: said in a note.
_LAUNCH_WRITTEN = re.compile(r"\b(?:LLM|EngineArgs|AsyncEngineArgs|LLMConfig)\(|\bvllm\s+serve\b|\bvllm\.entrypoints\.")


def python_file(ctx: Ctx) -> SourceFile | None:
    """The launches of a Python file; None when it is not a launcher (no
    launch of an engine it imports from vLLM and no `vllm serve` command
    list); a skipped file, saying why, when it mentions vLLM but this
    Python cannot parse it (Python 2, a template, syntax of a later Python)."""
    if not mentions_vllm(ctx.text) and not RAY_LLM.search(ctx.text):  # (Ray's LLM configs run vLLM unnamed)
        return None
    if len(ctx.text) > ctx.limits.max_config_bytes:  # said, not skipped: it may launch vLLM
        if not mentions_vllm_outside_data(ctx.text) and not RAY_LLM.search(ctx.text):
            return None  # (its only mention is in data it embeds)
        return SourceFile(ctx.display, "python", (), (ctx.problem(
            "source.limit", f"the file is larger than the audit parses as Python ({ctx.limits.max_config_bytes} "
            "bytes, SourceLimits.max_config_bytes); its launches are not read"),))
    try:
        tree = ast.parse(ctx.text)
    except SyntaxError as exc:
        why = f"line {exc.lineno}: {exc.msg}" if exc.lineno else exc.msg
    except (ValueError, RecursionError, MemoryError) as exc:  # nested deeper than the parser goes
        why = f"{type(exc).__name__}: {exc}"[:200]
    else:
        reader = _Reader(ctx, tree)
        found = tuple(reader.deployments())  # (none: no engine of vLLM's and no command list)
        package = vllm_package(ctx) if found else None
        if package is not None:
            return SourceFile(ctx.display, None, skipped=f"vLLM's own code (the package `{package}`): the engines it "
                                                         "starts take what its callers give")
        registered = registered_connectors(ctx, tree) if found and "register_connector" in ctx.text else {}
        found = tuple(with_registered(ctx, d, registered) for d in found) if registered else found
        other = truss_runs_other(ctx) if found else None
        if other is not None:
            return SourceFile(ctx.display, None, skipped=other)
        return SourceFile(ctx.display, "python", found, tuple(reader.problems)) if found or reader.problems else None
    return SourceFile(ctx.display, None, skipped=f"{_UNPARSED} ({why})")


def launch_written(found: SourceFile, text: str) -> tuple[str, int] | None:
    """Where a Python file this Python cannot parse writes a launch (``LLM(``,
    ``vllm serve``, ...), and how: the audit notes such a file as one that
    mentions a KV option (FlagScale's Ray Serve launcher, whose f-strings are
    Python 3.12's, was skipped with no word in the text report)."""
    written = _LAUNCH_WRITTEN.search(text) if (found.skipped or "").startswith(_UNPARSED) else None
    return (written.group(0), text.count("\n", 0, written.start()) + 1) if written is not None else None


def vllm_package(ctx: Ctx) -> str | None:
    """The folder of vLLM's own package that holds the file, where one does
    (a fork's or a vendored copy's: a `vllm` folder with `engine/arg_utils.py`,
    EngineArgs' home), as the audit shows it; None for any other file. Its
    engines and servers are built from what their callers give: no launch."""
    if not ctx.fs:
        return None
    path = ctx.path.resolve()
    for up, folder in enumerate(path.parents):
        if folder.name == "vllm" and (folder / "engine" / "arg_utils.py").is_file():
            shown = Path(ctx.display).parents
            return str(shown[up]) if up < len(shown) - 1 else str(folder)
    return None


class _Reader(EngineCalls):
    """The launches of one parsed file."""

    def __init__(self, ctx: Ctx, tree: ast.Module):
        super().__init__(tree)
        self.ctx = ctx
        self.problems: list[Problem] = []  # the file's: a bound hit (source.limit)
        self._limited: set[int] = set()  # the functions whose calls a bound cut
        self._data: set[int] = set()  # the nodes of a test's data (see deployments)
        self._imported_in: dict[tuple[int, str], str | None] = {}  # (scope, name) -> the module it imports it from

    # -- the launches ----------------------------------------------------------------------

    def deployments(self) -> list[Deployment]:
        self._data = data = {id(node) for root in self.data for node in ast.walk(root)}  # (a test's data: never run as written)
        # An engine's call (what it is), or a command list that starts vLLM's server (its words).
        launches: list[tuple[ast.expr, Any, str | Readings | _Shell | _Split | _Listed]] = [
            (call, scope, what) for call, scope in self.calls if id(call) not in data
            and (what := self.what_called(call.func, scope)) in LAUNCHES and not self.only_hands_on(call, scope)
            and not self.only_configures(call, scope, what) and not self._foreign(call, scope)]
        derived = [(node, scope, argv, base) for node, scope, name, base, extra in self.derived
                   if (argv := self.made_words(node, scope, name, base, extra)) is not None]
        # A list that others are made from is a launch of its own only where the file runs it itself.
        bases = {id(self.source(base, scope, 0)) for _, scope, _, base in derived} | {
            id(self.source(display.elts[0].value, scope, 0)) for display, scope, _ in self.lists
            if display.elts and isinstance(display.elts[0], ast.Starred)}  # ([*BASE, ...])
        # A list that runs a container of a vLLM image is read as the shell reads `docker run`: its image
        # gives the command (its entrypoint) and the release.
        runs = self.image_runs()
        in_runs = {id(display) for run in runs for display in run.lists}
        launches += [(run.node, run.scope, _as_shell(run)) for run in runs]
        launches += [(display, scope, listed) for display, scope, name in self.lists
                     if id(display) not in in_runs and id(display) not in data
                     and (id(display) not in bases or self.runs_itself(name))
                     and (listed := self._listed(display, scope, name)) is not None
                     and not self._expected(display, scope, name, data)]
        launches += [(node, scope, argv) for node, scope, argv, _ in derived]
        ray = ray_engine_calls(self)
        launches += [(call, scope, "LLM") for call, scope, _ in ray]
        runtime_env = {id(call): (env, scope) for call, scope, env in ray if env}
        launches += [launch for call, scope in self.calls for launch in self._string_launches(call, scope)]
        launches += [launch for display, scope, _ in self.lists if id(display) not in in_runs
                     for launch in self._string_launches(display, scope)]
        # (a file with no launch reads no requirements file)
        release = (self._pinned() or launcher_release(self.ctx)) if launches else None
        # The launches in line order, each with the environment set above it: one sweep over the settings.
        settings = sorted(self._settings(), key=lambda setting: setting[2])
        seen = 0
        words: dict[str, set[str]] = {}
        first: dict[str, int] = {}
        out = []
        for node, scope, launch in sorted(launches, key=lambda item: (item[0].lineno, item[0].col_offset)):
            while seen < len(settings) and settings[seen][2] < node.lineno:
                name, word, line = settings[seen]
                words.setdefault(name, set()).add(word)
                first.setdefault(name, line)
                seen += 1
            env = {name: Arg(next(iter(texts)) if len(texts) == 1 else
                             unresolved(f"os.environ[{name!r}]", "is set to different values in this file"),
                             f"line {first[name]}: os.environ")
                   for name, texts in words.items()}
            given, where = runtime_env.get(id(node), ((), scope))  # (a Ray config's: its engine's environment)
            env.update((name, Arg(as_word(self.value(value, where, 0)), f"line {value.lineno}: runtime_env"))
                       for name, value in given)
            # (a container's command beside its image, `KubernetesPodOperator(image=..., cmds=[...])`: its release and platform)
            image = self.container_image(cast(ast.List, node), launch.name) if isinstance(launch, _Listed) else None
            ran = from_image(image)._replace(platform=platform_of(image)) if image is not None else release
            out += self._launch(node, scope, launch, env, ran)
        return out

    def _launch(self, node: ast.expr, scope: Any, launch: str | Readings | _Shell | _Split | _Listed, env: dict[str, Arg],
                release: ReleaseHint | None) -> list[Deployment]:
        """A launch's deployments: one, or, in a function whose calls pass
        different values for a parameter the launch reads, one per call, as
        each call runs it (at most 8; the shell reader reads a function so)."""
        self.varied.clear()
        made = self._read_launch(node, scope, launch, env, release)
        varied = scope in self.varied or (isinstance(launch, _Listed) and launch.varied)
        # (a call inside the function itself runs no launch of its own)
        calls = [call for call in self.calls_of.get(scope.name, []) if not within(call[0], scope)] if varied else []
        if not 1 < len(calls) <= MAX_CALLS:
            return made
        # (a call whose value is a test's expectation, read only in asserts, runs nothing)
        run = [call for call in calls if not self._asserted_only(self.assigned.get(id(call[0])), call[1], self._data)]
        out = []
        for call in sorted(run or calls, key=lambda site: (site[0].lineno, site[0].col_offset)):
            self.calling[scope] = call
            try:
                read = self._read_launch(node, scope, launch, env, release)
            finally:
                del self.calling[scope]
            note = self.ctx.problem("source.call_site", f"read as the call of `{scope.name}` at line {call[0].lineno} "
                                    f"runs it (its {len(calls)} calls pass different values)", line=node.lineno)
            out += [replace(made, notes=(note, *made.notes)) for made in read]
        return out

    def _read_launch(self, node: ast.expr, scope: Any, launch: str | Readings | _Shell | _Split | _Listed, env: dict[str, Arg],
                     release: ReleaseHint | None) -> list[Deployment]:
        if isinstance(launch, str):
            return [self.engine_launch(cast(ast.Call, node), scope, launch, env, release)]
        if isinstance(launch, _Shell):
            return self._shell_deployments(launch, node.lineno, env, release)
        if isinstance(launch, _Split):
            split = split_words(launch.text, launch.shell_like)
            if split is None or find_vllm(split) is None:
                return []
            split_paths = [(which, split_words(text, launch.shell_like)) for which, text in launch.paths]
            paths = tuple((which, [Arg(w, f"line {node.lineno}") for w in words])
                          for which, words in split_paths if words is not None)
            return [self._command_deployment([Arg(w, f"line {node.lineno}") for w in split],
                                             paths if len(paths) == len(launch.paths) else (), node.lineno, env, release)]
        if isinstance(launch, _Listed):
            readings = launch.readings
            again = self._listed(cast(ast.List, node), scope, launch.name) if scope in self.calling else None
            readings = again.readings if again is not None else readings  # (read again, for one call)
            return [self._command_deployment(*readings, node.lineno, env, release)]
        return [self._command_deployment(*launch, node.lineno, env, release)]

    def _listed(self, display: ast.List | ast.Tuple, scope: Any, name: str | None) -> _Listed | None:
        """A command list's launch (:meth:`command_words`); None for a list that starts no vLLM server."""
        self.varied.clear()
        readings = self.command_words(display, scope, name)
        if readings is None:
            return None
        joined = (id(scope), name) in self._shell_joined  # (run through a shell: split as it splits them)
        return _Listed(_resplit(readings) if joined else readings, name, scope in self.varied)

    def _string_launches(self, node: ast.Call | ast.List | ast.Tuple, scope: Any) -> list[tuple[ast.expr, Any, _Shell | _Split]]:
        """The launches of a command line built as one string that ``node``
        runs (:meth:`_string_command`), each where it is written: at ``node``,
        or where the string is a parameter of a function of the script's own
        (``def start(cmd): subprocess.Popen(cmd, shell=True)``), at each call
        of that function, with the string it passes. Only those whose string
        names vLLM."""
        found = self._string_command(node, scope)
        if found is None:
            return []
        string, how = found
        sites: list[tuple[ast.expr, Any, ast.expr]] = [(string, scope, node)]
        function = self.parameter_of(string, scope)
        # (string is a name when it is a parameter: the isinstance check tells the type checker)
        if function is not None and isinstance(string, ast.Name) and self.calls_of.get(function.name):
            calls = sorted(self.calls_of[function.name], key=lambda site: (site[0].lineno, site[0].col_offset))
            if len(calls) > _MAX_SITES and id(function) not in self._limited:
                self._limited.add(id(function))
                self.problems.append(self.ctx.problem(
                    "source.limit", f"`{function.name}` runs the command line it is given, and the file calls it "
                    f"{len(calls)} times; the audit reads the first {_MAX_SITES} calls, to line "
                    f"{calls[_MAX_SITES - 1][0].lineno}", line=function.lineno))
            sites = [(passed[0], passed[1], call) for call, where in calls[:_MAX_SITES]
                     if (passed := self.passed(string.id, function, call, where)) is not None]
        out: list[tuple[ast.expr, Any, _Shell | _Split]] = []
        for expr, where, at in sites:
            # A choice the script makes (`" --opt" if c else ""`) is read once per branch, as a command list's is.
            text, paths = self.readings(lambda: self.text(expr, where))
            if "vllm" in text:
                out.append((at, where, _Shell(text, paths) if how == "shell" else _Split(text, how == "shlex", paths)))
        return out

    def _string_command(self, node: ast.Call | ast.List | ast.Tuple, scope: Any) -> tuple[ast.expr, str] | None:
        """The string ``node`` runs as a command line, and how: through a shell (``os.system(cmd)``,
        ``subprocess.run(cmd, shell=True)``, also ``shell=shell`` of a parameter whose calls leave it True,
        a command list ``["bash", "-c", cmd]``), or split into words (``subprocess.Popen(cmd.split())``,
        ``shlex.split(cmd)``). None for any other call or list."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._list_script(node)
        script = ipython_shell(node)  # (a notebook's `!cmd` or `%%bash` cell, as IPython runs it)
        if script is not None:
            return script, "shell"
        callee = dotted_name(node.func)
        if callee not in _SHELL_RUNS and callee not in _SUBPROCESS:
            return None
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        command = node.args[0] if node.args else keywords.get("args", keywords.get("cmd", keywords.get("command")))
        if command is None or isinstance(command, (ast.List, ast.Tuple)) or isinstance(self.value(command, scope, 0), list):
            return None  # (a list of words: read as a command list)
        split = splitting(command)
        if callee in _SUBPROCESS and split is not None:
            return split[0], "shlex" if split[1] else "split"
        shell = keywords.get("shell")
        if callee in _SUBPROCESS and (shell is None or self.value(shell, scope, 0) is not True):
            return None
        return command, "shell"

    @cached_property
    def _shell_joined(self) -> frozenset[tuple[int, str]]:
        """The command lists (scope, name) the script runs as one line through
        a shell, ``subprocess.Popen(" ".join(cmd), shell=True)``
        (vllm-project/recipes' Modal apps): the shell splits each element
        again (``"--reasoning-parser gemma4"`` is two words). Found once, on
        the first command list read."""
        out = set()
        for call, scope in self.calls:
            found = self._string_command(call, scope)
            command = found[0] if found is not None and found[1] == "shell" else None
            if isinstance(command, ast.Call) and isinstance(command.func, ast.Attribute) \
                    and command.func.attr == "join" and isinstance(command.func.value, ast.Constant) \
                    and command.func.value.value == " " and len(command.args) == 1 \
                    and (name := list_holder(command.args[0])) is not None:
                out.add((id(scope), name))
        return frozenset(out)

    def _list_script(self, display: ast.List | ast.Tuple) -> tuple[ast.expr, str] | None:
        """The script a command list hands a shell (``["bash", "-c", cmd]``, ``["sh", "-lc", cmd]``), as
        the shell reader finds it in a command line; None for a list that runs no shell."""
        if not any(isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.rsplit("/", 1)[-1] in SHELLS
                   for e in display.elts) or any(isinstance(e, ast.Starred) for e in display.elts):
            return None
        # Each word as written where it is a literal; any other stands for itself only (\x00).
        words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else "\x00" for e in display.elts]
        found = nested_script(words)
        if found is None:
            return None
        return display.elts[len(words) - len(found[1]) - 1], "shell"

    def _shell_deployments(self, launch: _Shell, line: int, env: dict[str, Arg],
                           release: ReleaseHint | None) -> list[Deployment]:
        """The launches of a string the script runs through a shell, read as
        a container's ``sh -c`` string is (its unknown pieces are values not
        known), each at the line of the call. Where the script chooses part
        of the string when it runs, each launch is read again on each path,
        as a shell script's are, provided each path's string runs the same
        launches and the shell's own reading made no paths."""
        problems: list[Problem] = []
        found = self._shell_read(launch.text, line, env, problems)
        readings = [(which, self._shell_read(text, line, env, [])) for which, text in launch.paths]
        if readings and all(len(on_path) == len(found) for _, on_path in readings) and not any(i.paths for i in found):
            for index, inv in enumerate(found):
                inv.paths = tuple((which, on_path[index].argv, on_path[index].env) for which, on_path in readings)
        for inv in found:
            inv.release = inv.release or release
            inv.problems = problems + inv.problems  # (the string's own: it cannot be read whole)
        apply_facts(found, self.ctx)
        return [deployment(inv, self.ctx, "python") for inv in found]

    def _shell_read(self, text: str, line: int, env: dict[str, Arg], problems: list[Problem]) -> list[Invocation]:
        """The launches a shell reads in ``text``, their words as written, each with the release its `docker run`
        image or a `pip install vllm==X` before it names. Markers are held aside while the shell reads the string:
        a marker's name and reason are Python source and words, whose quotes would end the shell's own."""
        held, plain = held_markers(text)
        found, run = run_script(plain, self.ctx, env=env, first_line=line, origin=lambda _line: f"line {line}",
                                anchor=lambda _line: f":{line}", problems=problems, fixed=True)
        for inv in found:
            inv.release = release_at(run, inv)
            inv.argv, inv.env = restored_words(inv.argv, held), restored_env(inv.env, held)
            inv.paths = tuple((which, restored_words(argv, held), restored_env(path_env, held))
                              for which, argv, path_env in inv.paths)
        return found

    def _foreign(self, call: ast.Call, scope: Any) -> bool:
        """Whether the callee's name is another library's where the call reads it: imported
        there from a module not vLLM's (TensorRT-LLM's `LLM` in NVIDIA's Model Optimizer tests)."""
        while isinstance(call.func, ast.Name) and scope is not None:
            key = (id(scope), call.func.id)
            if key not in self._imported_in:  # each scope's statements are read once for a name
                self._imported_in[key] = imported_from(scope, call.func.id)
            module = self._imported_in[key]
            if module is not None:
                return not is_vllm_module(module)
            scope = self.parent.get(scope)
        return False

    def _command_deployment(self, words: list[Arg], paths: tuple[tuple[str, list[Arg]], ...], line: int,
                            env: dict[str, Arg], release: ReleaseHint | None) -> Deployment:
        """A command list's launch, read as every command line is (core.command.read_command)."""
        inv = Invocation(words, line, env, f":{line}", config_reader=config_from_fs(self.ctx, self.ctx.path.parent),
                         release=release, paths=tuple((which, argv, env) for which, argv in paths))
        apply_facts([inv], self.ctx)
        return deployment(inv, self.ctx, "python")

    def _expected(self, display: ast.expr, scope: Any, name: str | None, data: set[int]) -> bool:
        """Whether a function's list is a test's expectation: the name it is assigned to (alone,
        or joined with more: `[...] + args`) is read only in asserts (`expected_cmd =
        [sys.executable, "-m", ...]`, `assert cmd == expected_cmd`); or the function returns it,
        and each of its calls in the file is assigned to such a name (neuralmagic/helm-charts'
        `expected_command = get_expected_command(...)`)."""
        joined = self._joined().get(id(display))
        whole = joined if joined is not None else display
        name = name or (self.assigned.get(id(joined)) if joined is not None else None)
        if name is None and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and any(isinstance(node, ast.Return) and node.value is whole for node in ast.walk(scope)):
            calls = self.calls_of.get(scope.name, [])
            return bool(calls) and all(self._asserted_only(self.assigned.get(id(call)), where, data)
                                       for call, where in calls)
        return self._asserted_only(name, scope, data)

    def _asserted_only(self, name: str | None, scope: Any, data: set[int]) -> bool:
        """Whether the name a function assigns a value to is read only in asserts."""
        if name is None or "." in name or scope is self.tree:
            return False
        reads = [node for node in ast.walk(scope) if isinstance(node, ast.Name) and node.id == name
                 and isinstance(node.ctx, ast.Load)]
        return bool(reads) and all(id(node) in data for node in reads)

    def _pinned(self) -> ReleaseHint | None:
        """The vLLM release the file's image holds, where it names one: a
        Modal app's ``Image...pip_install("vllm==0.10.1.1")`` (or
        ``uv_pip_install``), or ``Image.from_registry("vllm/vllm-openai:v0.15.1")``,
        the release every launch of the file runs. None where it names
        none, or several."""
        pins: dict[str, ReleaseHint] = {}
        for call, _ in self.calls:
            installed = ipython_install(call)  # a notebook's `!pip install vllm==X` (`%pip`, `%uv pip`)
            if installed is not None and re.search(r"\binstall\b", installed):
                for found in PIN.finditer(installed):
                    pins.setdefault(pinned(found.group(1)), from_pin(found.group(1), call.lineno))
                # (`!pip install -U vllm`, and `!pip install vllm` in a kernel that holds none before it)
                if (newest := upgraded(installed.split(), call.lineno, fresh=True)) is not None:
                    pins.setdefault("", newest)
                continue
            if not isinstance(call.func, ast.Attribute) or call.func.attr not in (*_PIP_INSTALLS, "from_registry"):
                continue
            given = call.args[:1] if call.func.attr == "from_registry" else \
                [e for a in call.args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
            for arg in given:
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    continue
                if call.func.attr == "from_registry":
                    image = from_image(arg.value)
                    if image.version is not None:
                        pins.setdefault(image.version, ReleaseHint(image.version, f"{image.origin} at line {arg.lineno}"))
                elif match := PIN.fullmatch(arg.value):
                    pins.setdefault(pinned(match.group(1)), from_pin(match.group(1), arg.lineno))
        return next(iter(pins.values())) if len(pins) == 1 else None

    def _settings(self) -> list[tuple[str, str, int]]:
        """Each setting in ``os.environ`` of a variable the decision reads (or that names a platform):
        (name, its value as a word, line), read once for every launch (vLLM
        reads them when a call builds its config: each launch takes those above it)."""
        found: list[tuple[str, ast.expr, Any, int]] = list(self.env_assigned)  # os.environ[NAME] = value
        for call, scope in self.calls:
            func = call.func
            if not (isinstance(func, ast.Attribute) and is_environ(func.value)):
                continue
            if func.attr == "setdefault" and len(call.args) == 2:
                pairs = [(call.args[0], call.args[1])]
            elif func.attr == "update" and len(call.args) == 1 and isinstance(call.args[0], ast.Dict):
                pairs = [(k, v) for k, v in zip(call.args[0].keys, call.args[0].values) if k is not None]
            else:
                pairs = []
            pairs += [(ast.Constant(k.arg), k.value) for k in call.keywords if func.attr == "update" and k.arg]
            found += [(key.value, value, scope, call.lineno) for key, value in pairs
                      if isinstance(key, ast.Constant) and isinstance(key.value, str) and read_from_env(key.value)]
        return [(name, as_word(self.value(value, scope, 0)), line) for name, value, scope, line in found]
