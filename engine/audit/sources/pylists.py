"""Command lists in a Python script: the words of a list that starts vLLM's
server (``["vllm", "serve", MODEL, ...]``, ``[sys.executable, "-m",
"vllm.entrypoints.openai.api_server", ...]``), as ``subprocess`` or
``os.exec*`` is handed it, with what the script adds to it: ``display +
more``; for a list a name or an attribute holds, the ``+=``, ``extend``,
``append`` and ``insert`` statements below it (in its own function body; in
other functions, a word the command may take); a list made from another
(``BASE + [...]``, ``list(BASE)``, ``[*BASE, ...]``); and where they hold a
choice the script makes (``a if c else b``, ``if c: cmd += [...]``), the
words on each path.

The reader of the file (python.py) makes each such list a launch.
"""

from __future__ import annotations

import ast
import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from ...core.markers import UNRESOLVED, has_unresolved, unresolved
from ...core.optionlist import flag_options, list_options
from ...core.options import ENGINE_FIELDS, FLAG_OPTIONS, VALUE_OPTIONS, Arg, find_vllm
from .images import VLLM_IMAGE
from .pyforms import Change, dotted_name, list_holder, made_from
from .pyscript import INTERPRETER, Script
from .pyvalues import Unknown, as_word, source_text
from .shell_commands import docker_run

__all__ = ["CommandLists", "Readings", "ImageRun", "names_server"]

# A command list's words, and its words on each path through the choices it holds (see readings).
Readings = tuple[list[Arg], tuple[tuple[str, list[Arg]], ...]]
_Read = TypeVar("_Read")  # what one reading gives: a command's words, or the string a shell runs


_PREFIX = "names vLLM's server alone, with no model or option: they are added where the list is used"
_AWAITS = "ends in `{}`, whose value is added where the list is used, with any other options"
# A call's keywords that give a container its command, each with the one that gives its arguments (Vertex AI's
# Model.upload, a Kubernetes client's V1Container or kfp's ContainerSpec, Airflow's KubernetesPodOperator).
_CONTAINER_KEYWORDS = {"serving_container_command": "serving_container_args", "command": "args", "cmds": "arguments"}
_CONTAINER_WORDS = frozenset(_CONTAINER_KEYWORDS) | frozenset(_CONTAINER_KEYWORDS.values())


class ImageRun(NamedTuple):
    """A command list that runs a container of a vLLM image (see CommandLists.image_runs)."""

    node: ast.expr                          # the list, or the `+` that joins it from several
    scope: Any
    lists: tuple[ast.List | ast.Tuple, ...]  # the lists written out in it
    readings: Readings


class CommandLists(Script):
    """A parsed script's command lists (see the module's docstring)."""

    def __init__(self, tree: ast.Module):
        super().__init__(tree)
        self._sorted_changes: dict[tuple[int, str], _Grown] = {}  # see _changes
        # For _grown_elsewhere: the changes of each list holder, and the class of each method.
        self._holders: dict[tuple[str, int | None], list[tuple[int, list[Change]]]] | None = None
        self._class_of: dict[int, int] = {}
        self._joined_by: dict[int, ast.BinOp] | None = None  # see _joined

    def command_words(self, display: ast.List | ast.Tuple, scope: Any, name: str | None) -> Readings | None:
        """The words of a command list that starts vLLM's server (``["vllm",
        "serve", MODEL, ...]``, ``[sys.executable, "-m",
        "vllm.entrypoints.openai.api_server", ...]``, as a script hands
        ``subprocess`` or ``os.exec*``), with what the script adds to it:
        ``display + more``, and where the list is assigned to a name, what
        ``name += [...]``, ``name.extend([...])`` and ``name.append(...)``
        add below it; and where they hold a choice the script makes (``a if c
        else b``), the words on each path (:meth:`readings`). None for any other list."""
        first = display.elts[0] if display.elts else None
        if not names_server(display) and not (isinstance(first, ast.Starred) and self._server_list(first.value, scope)):
            return None  # (most lists of a file are no command: not read further)
        if find_vllm([w.text for w in self._words(display.elts, scope)]) is None:
            return None

        def read() -> list[Arg]:
            words = self._words(display.elts, scope)
            if id(display) in self.continued:
                words += self._words_of(self.continued[id(display)], scope, display.lineno)
            words += self._added(name, scope, display.lineno)
            located = find_vllm([w.text for w in words])
            alone = located is not None and len(words) == located[0] + located[1]
            awaits = _awaits_value(words) and not self._run_as_written(display, name)
            if (alone or awaits) and located is not None and not self._grows(name, scope, display.lineno):
                # `command = ["vllm", "serve"]` that a launcher hands on (gpustack's backend), or one
                # that ends in an option whose value it leaves out (vllm-qaic's `[..., "--model"]`): the
                # model and options are added where the list is used; a container's arguments, where it
                # is a call's container command beside them (Vertex AI's `Model.upload`).
                given = self._container_args(display, scope, name)
                if given is not None:
                    return words + self._grown_words(*given)
                why = _PREFIX if alone else _AWAITS.format(words[-1].text)
                # (an option the decision does not read goes with its value: what is added may hold
                # others; one it reads takes it, a value not known)
                words = words if alone or words[-1].text in _DECISION_READS else words[:-1]
                words.append(Arg(unresolved(f"{name or 'the list'} ...", why), f"line {display.lineno}", many=True))
            return words

        return self.readings(read)

    def _container_args(self, display: ast.List | ast.Tuple, scope: Any, name: str | None) -> tuple[ast.expr, Any] | None:
        """The arguments a call gives the container whose command is ``display``
        (or the name that holds it), as Kubernetes' ``command`` and ``args`` do:
        Vertex AI's ``aiplatform.Model.upload(serving_container_command=[...],
        serving_container_args=vllm_args)`` (GoogleCloudPlatform/vertex-ai-samples),
        a Kubernetes client's ``V1Container(command=..., args=...)``, Airflow's
        ``KubernetesPodOperator(cmds=..., arguments=...)``; None elsewhere."""
        found = self._container_call(display, name)
        return (found[1], found[2]) if found is not None and found[1] is not None else None

    def container_image(self, display: ast.List | ast.Tuple, name: str | None) -> str | None:
        """The image, written in the call, of the container whose command is ``display``
        (``image=`` beside ``cmds=``, ``command=``, ``serving_container_command=``)."""
        found = self._container_call(display, name)
        image = next((k.value for k in found[0].keywords if k.arg in ("image", "serving_container_image_uri")), None) \
            if found is not None else None
        return image.value if isinstance(image, ast.Constant) and isinstance(image.value, str) else None

    def _container_call(self, display: ast.List | ast.Tuple, name: str | None) -> tuple[ast.Call, ast.expr | None, Any] | None:
        """The call that gives ``display`` (or the name that holds it) as a container's command, the
        arguments it gives beside it (None: none), and the call's scope."""
        for call, where in self.calls:
            given = {k.arg: k.value for k in call.keywords if k.arg in _CONTAINER_WORDS}
            for command, args in _CONTAINER_KEYWORDS.items():
                value = given.get(command)
                if value is display or (isinstance(value, ast.Name) and value.id == name
                                        and self.source(value, where, 0) is display):
                    return call, given.get(args), where
        return None

    def _grown_words(self, node: ast.expr, scope: Any) -> list[Arg]:
        """The words of a list given by its name, with what the script adds to it below (as a
        command list's), or of any other expression that holds a list."""
        found = self.bound(node, scope) if isinstance(node, ast.Name) else None
        display, where = found if found is not None else (node, scope)
        if isinstance(node, ast.Name) and isinstance(display, (ast.List, ast.Tuple)):
            return self._words(display.elts, where) + self._added(node.id, where, display.lineno)
        return self._words_of(node, scope, node.lineno)

    def made_words(self, node: ast.expr, scope: Any, name: str | None, base: ast.expr, extra: ast.expr | None) -> Readings | None:
        """The words of a command list made from one that starts vLLM's
        server (``prefill = BASE + ["--kv-transfer-config", ...]``,
        ``list(BASE)``, ``BASE.copy()``, ``BASE[:]``): the words of the list
        it is made from, what it adds, and what the script adds to it below
        (as :meth:`command_words`). None for any other."""
        if not self._server_list(base, scope):
            return None

        def read() -> list[Arg]:
            words = self._words_of(base, scope, node.lineno)
            if extra is not None:
                words += self._words_of(extra, scope, node.lineno)
            return words + self._added(name, scope, node.lineno)

        if find_vllm([w.text for w in read()]) is None:
            return None
        return self.readings(read)

    def image_runs(self) -> list[ImageRun]:
        """Each command list that runs a container of a vLLM image
        (``["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.8.5",
        "--model", m]``), also one joined from several with ``+``
        (``["docker"] + ["run", ...] + gpus() + [..., IMAGE, ...]``), with
        what the script adds to it, as :meth:`command_words` reads a list;
        the reader (python.py) reads its words as the shell reads a ``docker
        run`` command line."""
        out: list[ImageRun] = []
        seen: set[int] = set()
        for display, scope, _ in self.lists:
            if not any(self._vllm_image(e, scope) for e in display.elts):
                continue
            node: ast.expr = display
            joined = self._joined()
            while id(node) in joined:
                node = joined[id(node)]
            if id(node) in seen:
                continue
            seen.add(id(node))
            parts = _operands(node)
            name = self.assigned.get(id(node))

            def read(parts: list[ast.expr] = parts, node: ast.expr = node, name: str | None = name,
                     scope: Any = scope) -> list[Arg]:
                words: list[Arg] = []
                for part in parts:
                    words += self._words(part.elts, scope) if isinstance(part, (ast.List, ast.Tuple)) \
                        else self._words_of(part, scope, part.lineno)
                return words + self._added(name, scope, node.lineno)

            readings = self.readings(read)
            if docker_run([w.text for w in readings[0]]) is not None:
                lists = tuple(p for p in parts if isinstance(p, (ast.List, ast.Tuple)))
                out.append(ImageRun(node, scope, lists, readings))
        return out

    def _vllm_image(self, element: ast.expr, scope: Any) -> bool:
        """Whether a list's element names a vLLM image, written there or through a name the file binds
        once to it (``IMAGE = "vllm/vllm-openai:v0.8.5"``, then ``["docker", "run", IMAGE, ...]``)."""
        given = self.source(element, scope, 0) if isinstance(element, ast.Name) else element
        return isinstance(given, ast.Constant) and isinstance(given.value, str) and bool(VLLM_IMAGE.search(given.value))

    def _joined(self) -> dict[int, ast.BinOp]:
        """Each operand of a `+`, by id, with that `+` (found once)."""
        if self._joined_by is None:
            self._joined_by = {id(side): node for node in ast.walk(self.tree)
                               if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
                               for side in (node.left, node.right)}
        return self._joined_by

    def runs_itself(self, name: str | None) -> bool:
        """Whether a call of the file is given the list ``name`` holds itself
        (``subprocess.run(BASE)``), not a list made from it."""
        return name is not None and any(list_holder(arg) == name for call, _ in self.calls if made_from(call) is None
                                        for arg in (*call.args, *(k.value for k in call.keywords)))

    def _run_as_written(self, display: ast.List | ast.Tuple, name: str | None) -> bool:
        """Whether a call of the file is given the list itself (``subprocess.run([...])``, or the name
        that holds it), which it runs as written."""
        return self.runs_itself(name) or any(display is arg for call, _ in self.calls
                                             for arg in (*call.args, *(k.value for k in call.keywords)))

    def _server_list(self, node: ast.expr, scope: Any) -> bool:
        """Whether ``node`` stands for a list display that names vLLM's server (a name bound to one)."""
        display = self.source(node, scope, 0)
        return isinstance(display, (ast.List, ast.Tuple)) and names_server(display)

    def _added(self, name: str | None, scope: Any, line: int) -> list[Arg]:
        """What the script adds below ``line`` to the list ``name`` holds:
        in its own function body (_growth), and for an attribute's or a
        module's list, in other functions (_grown_elsewhere)."""
        if name is None:
            return []
        words = self._growth(name, scope, line)
        if "." in name or scope is self.tree:  # (a function's own name is its own)
            words += self._grown_elsewhere(name, scope)
        return words + self._grown_by_calls(name, scope, line)

    def _grown_by_calls(self, name: str, scope: Any, line: int) -> list[Arg]:
        """An unresolved word for each call below ``line`` in the list's scope that hands the list to a
        function of the file that grows that parameter (`add_user_opts(cmd, opts)`, whose body runs
        `cmd.extend(...)`: vllm-project/vime's forwarded `--vllm-*` options)."""
        out = []
        for call, where in self.calls:
            defined = self.functions.get(call.func.id, []) if isinstance(call.func, ast.Name) else []
            at = next((i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name), None)
            if where is not scope or call.lineno <= line or len(defined) != 1 or at is None:
                continue
            parameters = [a.arg for a in (*defined[0].args.posonlyargs, *defined[0].args.args)]
            if at < len(parameters) and self.grown.get((id(defined[0]), parameters[at])):
                out.append(Arg(unresolved(source_text(call), f"may add words to `{name}` at line {call.lineno}"),
                                f"line {call.lineno}", many=True))
        return out

    def readings(self, read: Callable[[], _Read]) -> tuple[_Read, tuple[tuple[str, _Read], ...]]:
        """The words ``read()`` gives (a command list's here, an engine call's
        in python.py; or the string a script runs as a command line), with each choice the script makes when it runs
        (``a if c else b``, ``if c: cmd += [...]``) left open; and, where there are one or
        two such choices, the words once per combination of branches (at
        most four paths, each named by the branches it takes), which the
        audit decides where they all agree, as it does a shell script's paths.
        No paths where a branch holds a choice of its own."""
        self.choices = {}
        words = read()
        points = list(self.choices.values())
        if not points or len(points) > 2:
            return words, ()
        combinations = list(itertools.product((True, False), repeat=len(points)))
        paths = []
        try:
            for index, taken in enumerate(combinations, 1):
                self.chosen, self.choices = {id(p): t for p, t in zip(points, taken)}, {}
                argv = read()
                if self.choices:
                    return words, ()
                where = " and ".join(f"`{source_text(p.test)}` is {'true' if t else 'false'}" for p, t in zip(points, taken))
                paths.append((f"path {index} of {len(combinations)}, where {where}", argv))
        finally:
            self.chosen = {}
        return words, tuple(paths)

    def _words(self, elements: list[ast.expr], scope: Any) -> list[Arg]:
        """The words of a command list's elements: each as written, a
        ``*starred`` list's words in its place, ``sys.executable`` the Python
        that runs the script."""
        out: list[Arg] = []
        for element in elements:
            if isinstance(element, ast.Starred):
                out += self._words_of(element.value, scope, element.lineno)
            elif dotted_name(element) == INTERPRETER:
                out.append(Arg("python", f"line {element.lineno}: sys.executable"))
            else:
                out.append(Arg(as_word(self.value(element, scope, 0)), f"line {element.lineno}"))
        return out

    def _words_of(self, node: ast.expr, scope: Any, line: int) -> list[Arg]:
        """The words of an expression that holds a list of them; one
        unresolved word for a list not known (it may hold any words)."""
        value = self.value(node, scope, 0)
        if isinstance(value, list):
            return [Arg(as_word(v), f"line {line}") for v in value]
        why = value.why if isinstance(value, Unknown) else "is not a list of words"
        return [Arg(unresolved(source_text(node), why), f"line {line}", many=True)]

    def _grows(self, name: str | None, scope: Any, line: int) -> bool:
        """Whether the script's function body adds to the list ``name``
        below ``line`` (words it may add or not are left out of the reading
        where they are options the decision does not read: the list is
        still not the server's name alone)."""
        return name is not None and bool(self._later_changes(name, scope, line)[0])

    def _later_changes(self, name: str, scope: Any, line: int) -> tuple[list[Change], int]:
        """The changes to the list ``name`` below ``line`` and above the
        name's next assignment (a list of its own), in order: one of the
        scope's own body, or one of the block the list is made in; and the
        id of that block (0: not known)."""
        grown = self._changes(scope, name)
        later = bisect_right(grown.rebound, line)
        stops = [grown.rebound[later]] if later < len(grown.rebound) else []
        made = bisect_right(grown.made, line)
        block = grown.made_in[made - 1] if made else 0
        anew = grown.by_block.get(block, []) if block else []
        after = bisect_right(anew, line)
        stops += [anew[after]] if after < len(anew) else []
        stop = bisect_left(grown.lines, min(stops)) if stops else len(grown.lines)
        return grown.changes[bisect_right(grown.lines, line):stop], block

    def _growth(self, name: str, scope: Any, line: int) -> list[Arg]:
        """What the statements below ``line`` add to the list ``name``: the
        words of each in order where it is a statement of the scope's own
        body, and an unresolved word for one the script may run or not (in an
        ``if``, a loop) or that puts words at a place it computes (``insert``).
        One in a branch of an ``if`` of the scope's own body is a choice
        (readings): on each path, its words or none."""
        out: list[Arg] = []
        changes, made_in = self._later_changes(name, scope, line)
        # A statement of the block the list is made in runs whenever the list is made (FlagScale's
        # runner makes and grows its command inside a `with`); so does an `if` there, whose
        # branches are a choice, as those of an `if` of the scope's own body are.
        runs_with_it = (made_in, id(getattr(scope, "body", None)))
        for at, how, value, straight, branch, block in changes:
            straight = straight or (block != 0 and block == made_in)
            branch = branch if branch is not None and branch[2] in runs_with_it else None
            test: Any = self.value(branch[0].test, scope, 0) if branch is not None and how != "insert" else ...
            if branch is not None and (isinstance(test, (bool, int, float, str)) or test is None):  # (`if USE_PD:`)
                out += self._change_words(how, value, scope, at) if bool(test) == branch[1] and value is not None else []
                continue
            if not straight and how != "insert" and _leaves_decision_options(how, value):
                continue  # (`if port: cmd += ["--port", str(port)]`: with it or without, the same decision)
            if branch is not None and how != "insert" and value is not None:
                # `if c: cmd += [...]`: a choice (readings), where the options it adds are named (a
                # word not known, unless an option's value, could hold any: the paths would not settle it).
                words = self._change_words(how, value, scope, at)
                if _options_named(words):
                    taken = self.chosen.get(id(branch[0]))
                    if taken is not None:
                        out += words if taken == branch[1] else []
                        continue
                    self.choices.setdefault(id(branch[0]), branch[0])
            if straight and value is not None and how != "insert":
                out += self._change_words(how, value, scope, at)
                continue
            if how == "insert" and straight:
                why = f"adds words at line {at}, at a place the script computes"
            elif branch is not None:
                why = f"adds words at line {at} where `{source_text(branch[0].test)}` is {str(branch[1]).lower()}"
            else:
                why = f"adds words at line {at} on some runs of the script: in an `if`, a loop or a `try`"
            # The line tells several such statements apart (arguments added in a loop, one per type).
            out.append(Arg(unresolved(_written(name, how, value), why), f"line {at}", many=True))
        return out

    def _change_words(self, how: str, value: ast.expr, scope: Any, line: int) -> list[Arg]:
        """The words a change adds (``cmd.append(x)``: one)."""
        if how == "append":
            return [Arg(as_word(self.value(value, scope, 0)), f"line {line}")]
        return self._words_of(value, scope, line)

    def _grown_elsewhere(self, holder: str, scope: Any) -> list[Arg]:
        """An unresolved word for each statement of another function that
        grows the list an attribute or a module's name holds
        (``self.cmd.extend(...)`` in another method of the same class,
        ``CMD.append(...)`` in a function that does not bind ``CMD`` itself):
        it may run before the list is used, or not."""
        if self._holders is None:  # indexed once, by holder and class: a file of many classes is read in linear time
            self._class_of = {id(method): id(node) for node in ast.walk(self.tree) if isinstance(node, ast.ClassDef)
                              for method in node.body if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))}
            # (a function that binds the name holds a list of its own; `+=` binds none: it needs `global`)
            local = {(id(where), name) for where, names in self.scopes.items() for name, bound in names.items()
                     if any(b.how != "changed in place" for b in bound)}
            self._holders = {}
            for (where, held), changes in self.grown.items():
                if (where, held) not in local:
                    self._holders.setdefault((held, self._owner(held, where)), []).append((where, changes))
        found: dict[str, int] = {}  # each change as written, at its first line
        for where, changes in self._holders.get((holder, self._owner(holder, id(scope))), ()):
            if where == id(scope):
                continue  # (read by _growth)
            for at, how, value, *_ in changes:
                written = _written(holder, how, value)
                found[written] = min(at, found.get(written, at))
        why = "adds words in another function, which may run before the list is used or not"
        return [Arg(unresolved(written, why), f"line {at}", many=True)
                for written, at in sorted(found.items(), key=lambda item: item[1])]

    def _owner(self, holder: str, scope: int) -> int | None:
        """Whose list ``holder`` is, seen from the function ``scope`` (an id):
        a ``self.`` attribute is its class's (None for any other holder)."""
        return self._class_of.get(scope) if holder.startswith("self.") else None

    def _changes(self, scope: Any, name: str) -> _Grown:
        """How a name's list grows in a scope (see _Grown): sorted once, so
        that each command list finds its own changes by bisection (a file of
        many is read in linear time)."""
        key = (id(scope), name)
        if key not in self._sorted_changes:
            changes = sorted(self.grown.get(key, ()), key=lambda change: change[0])
            made = sorted((b for b in self.scopes.get(scope, {}).get(name, ()) if b.how != "changed in place"),
                          key=lambda b: b.line)
            by_block: dict[int, list[int]] = {}
            for binding in made:
                by_block.setdefault(binding.block, []).append(binding.line)
            self._sorted_changes[key] = _Grown([c[0] for c in changes], changes,
                                               [b.line for b in made if b.straight], [b.line for b in made],
                                               [b.block for b in made], by_block)
        return self._sorted_changes[key]


class _Grown(NamedTuple):
    """How a name's list grows in a scope: its changes by line; the lines
    that assign the name anew on every run, statements of the scope's own
    body (on a run that skips one in an `if`, the changes below it grow the
    list before it: a Vertex AI notebook's `if nodes > 1: vllm_args =
    [launcher] + vllm_args`); and every line that makes it a list of its own,
    with the block of each, and those lines by block."""

    lines: list[int]
    changes: list[Change]
    rebound: list[int]
    made: list[int]
    made_in: list[int]
    by_block: dict[int, list[int]]


def _options_named(words: list[Arg]) -> bool:
    """Whether every option among ``words`` is named: each word not known is
    the value of the option before it (``["--kv-transfer-config", kv]``)."""
    before = ""
    for word in words:
        unnamed = word.many or (UNRESOLVED.fullmatch(word.text) and not _is_option(before))
        if unnamed:
            return False
        before = word.text
    return True


def _is_option(word: str) -> bool:
    """Whether a word is an option that may take the next word as its value (``--kv-transfer-config``)."""
    return word.startswith("-") and "=" not in word and not has_unresolved(word)


def _operands(node: ast.expr) -> list[ast.expr]:
    """The operands of a chain of `+` (``a + b + c``), left to right; the node alone for any other."""
    out: list[ast.expr] = []
    stack = [node]
    while stack:  # (without recursion: a long chain nests deeply)
        item = stack.pop()
        if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add):
            stack += [item.right, item.left]
        else:
            out.append(item)
    return out


def names_server(display: ast.List | ast.Tuple) -> bool:
    """Whether a list display holds a word of a command that starts vLLM's
    server (``serve``, ``vllm.entrypoints...``): most lists of a file do not,
    and are read no further."""
    return any(isinstance(e, ast.Constant) and isinstance(e.value, str) and (e.value == "serve" or e.value.startswith("vllm."))
               for e in display.elts)


# The option strings whose values the decision reads (the model names a deployment: not one of them).
_DECISION_READS = frozenset(option for option, (field, _) in (*VALUE_OPTIONS.items(), *FLAG_OPTIONS.items())
                            if field in ENGINE_FIELDS)


def _leaves_decision_options(how: str, value: ast.expr | None) -> bool:
    """Whether what a statement adds to a command list is whole options
    the decision does not read, each with the words its type takes in the
    newest release (`"--port", str(port)`; a flag; `"--port=" + str(port)`;
    a list option's literal words, `"--served-model-name", "a", "b"`): the
    script may run it or not, and the options the decision reads stay as
    they are either way."""
    if value is None:
        return False
    words = [value] if how == "append" else list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else []
    if not words:
        return False
    lists, listed = list_options()
    flags = flag_options()
    index = 0
    while index < len(words):
        head = _literal_head(words[index])
        whole = isinstance(words[index], ast.Constant)  # else only its head is literal: the option must end there
        if head is None or not head.startswith("--") or (not whole and "=" not in head):
            return False
        written, eq, _ = head.partition("=")
        option = "--" + written[2:].replace("_", "-")  # (vLLM reads `_` as `-`)
        if option.split(".")[0] in _DECISION_READS or option not in listed:
            return False
        index += 1
        if not eq and option not in flags:  # its first word: a value, never an option or a list of words
            value_word = words[index] if index < len(words) else None
            if value_word is None or isinstance(value_word, ast.Starred) or (
                    isinstance(value_word, ast.Constant) and str(value_word.value).startswith("-")):
                return False
            index += 1
        if option in lists and not eq:
            # Its further words, up to the next option: literals that are no option (argparse ends
            # the list at a word that is one, and a word not known may be).
            while index < len(words) and not _option_head(words[index]):
                word = words[index]
                if not (isinstance(word, ast.Constant) and isinstance(word.value, str) and not word.value.startswith("-")):
                    return False
                index += 1
    return True


def _awaits_value(words: list[Arg]) -> bool:
    """Whether a command list ends in one of vLLM's options that takes a
    value, without it (`[..., "--model"]`): no command vLLM accepts, but
    the start of one, which the script completes where it uses the list."""
    last = words[-1].text if words else ""
    return last.startswith("--") and "=" not in last and last in list_options()[1] and last not in flag_options()


def _option_head(word: ast.expr) -> bool:
    """Whether a word starts as a long option does (`"--port"`, `"--port=" + p`)."""
    head = _literal_head(word)
    return isinstance(head, str) and head.startswith("--")


def _literal_head(word: ast.expr) -> Any:
    """The literal text a word starts with: the word itself where it is a
    literal string (its node's value), the first piece of `"--x=" + y` or of
    an f-string; None where it starts with anything else."""
    while isinstance(word, ast.BinOp) and isinstance(word.op, ast.Add):
        word = word.left
    if isinstance(word, ast.JoinedStr) and word.values:
        word = word.values[0]
    return word.value if isinstance(word, ast.Constant) and isinstance(word.value, str) else None


def _written(holder: str, how: str, value: ast.expr | None) -> str:
    """A change to a command list as a report shows it: ``cmd += [...]``,
    ``cmd = cmd + [...]``, ``cmd.extend(...)``."""
    if how == "+=" and value is not None:
        return f"{holder} += {source_text(value)}"
    if how == "= +" and value is not None:
        return f"{holder} = {holder} + {source_text(value)}"
    return f"{holder}.{how}(...)"
