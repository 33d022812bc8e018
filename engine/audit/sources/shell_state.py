"""What one reading of a shell script knows as it goes (shell.py reads
scripts): the variables and functions in scope, in layers (:class:`Scope`),
the files the script has written (:class:`Script`), where the text being
read sits in the audited file (:class:`Place`), and the reading itself
(:class:`Run`: the launches found, the problems, the budget it may still
spend). Nothing here runs or expands anything.
"""

from __future__ import annotations

import itertools
import math
import posixpath
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from ...core.markers import UNRESOLVED, has_unresolved, unresolved
from ...core.errors import InputError, Problem
from ...core.options import ENV_NAMES, Arg, ConfigFile
from .context import Ctx
from .launch import Invocation
from .release import ReleaseHint
from .shell_reads import DECIDING, merged_name, past, shown, values_read
from .shell_tree import FunctionDef, Param, Simple

__all__ = ["Var", "UNSET", "Scope", "Script", "Pin", "Source", "Place", "Run", "Stop", "written_at", "normal_path", "MAX_NESTING",
           "BUDGET_FACTOR"]

# How deep function calls, eval, source and scripts run by scripts may nest.
MAX_NESTING = 8
# Expansion, eval, function calls and sourced text may read this many characters a character of the file.
BUDGET_FACTOR = 16


class Var(NamedTuple):
    value: str | None   # None: unset (shadows a value further out); an array's: its first element
    exported: bool
    epoch: int          # when it was set: a run-time change later makes it unknown
    line: int = 0       # where it was set (a launch in a text it holds, run by eval, is placed there)
    items: tuple[str, ...] | None = None  # an array's elements (`CMD=(vllm serve ...)`); None: not an array
    defaulted: bool = False  # a default the environment may override (`MODE=${MODE:-a}`): see environment_default


UNSET = Var(None, False, 0)


class Scope:
    """Variables and functions, in layers: a branch, a subshell or a
    function call reads through to the layers below and writes its own,
    which a branch's end merges down (and a subshell's end discards). A
    ``view`` is a new shell's (``bash -c``): it sees only exported variables
    below it. ``barrier``: a command that may have set any variable at run
    time (epoch, why): every variable set before it is unknown."""

    __slots__ = ("parent", "vars", "funcs", "barrier", "view", "frame", "locals", "positional", "written",
                 "terminated")

    def __init__(self, parent: Scope | None = None, *, view: bool = False, frame: bool = False,
                 positional: list[str] | None = None, written: list[int] | None = None):
        self.parent = parent
        self.vars: dict[str, Var] = {}
        self.funcs: dict[str, FunctionDef] = {}
        self.barrier: tuple[int, str] | None = None
        self.view, self.frame = view, frame
        self.locals: set[str] = set()
        # The positional parameters ($1 ...) of a function call or a new shell; None: as the layer below.
        self.positional = positional
        # Where each positional parameter's text was written, where the call passed a variable's (else 0):
        # a launch in it that `eval` runs is placed there, as for the variable itself.
        self.written = written
        self.terminated = False  # `exit` (or `return` in a function) was met on this path

    def lookup(self, name: str) -> Var | None:
        """The variable's value where it is set, else None."""
        var = self.record(name)
        return var if var is not None and var.value is not None else None

    def record(self, name: str) -> Var | None:
        """What this scope knows of a variable: set, unset (value None, maybe exported), or nothing."""
        scope: Scope | None = self
        barrier: tuple[int, str] | None = None
        exported_only = False
        while scope is not None:
            if scope.barrier is not None and (barrier is None or scope.barrier[0] > barrier[0]):
                barrier = scope.barrier
            var = scope.vars.get(name)
            if var is not None:
                if exported_only and not var.exported:
                    return None
                if var.value is not None and barrier is not None and var.epoch < barrier[0]:
                    return Var(unresolved("$" + name, barrier[1]), var.exported, var.epoch, var.line)
                return var
            if scope.view:
                exported_only = True
                # A new shell sees the run-time changes of its parent's variables too.
            scope = scope.parent
        return None

    def clobbered(self) -> str | None:
        """Why a variable this scope's layers never set may still hold any value: the newest command
        that may set any variable (an unread `source`), where one ran; else None."""
        scope: Scope | None = self
        barrier: tuple[int, str] | None = None
        while scope is not None:
            if scope.barrier is not None and (barrier is None or scope.barrier[0] > barrier[0]):
                barrier = scope.barrier
            scope = scope.parent
        return barrier[1] if barrier is not None else None

    def named(self, prefix: str) -> list[str]:
        """The names starting with ``prefix`` of the variables any layer sets
        (lookup() tells which of them this scope reads)."""
        names: set[str] = set()
        scope: Scope | None = self
        while scope is not None:
            names.update(name for name in scope.vars if name.startswith(prefix))
            scope = scope.parent
        return sorted(names)

    def unset_defaults(self, command: Simple) -> list[tuple[str, str, str]]:
        """(NAME, as written, DEFAULT) for each unquoted `${NAME:-DEFAULT}` that
        is a whole word of ``command`` (not an option's value), whose NAME this
        scope does not set and whose DEFAULT is nothing or options (the vllm-tpu
        image's entrypoint runs the server with `${VLLM_ARGS:-}`): the
        environment may give it any options; the reading takes the default."""
        return [(part.name, part.raw, default) for word in command.words if len(word.parts) == 1
                for part in word.parts
                if isinstance(part, Param) and not part.quoted and part.op in (":-", "-") and self.lookup(part.name) is None
                and (default := part.arg.literal() if part.arg is not None else "") is not None
                and (default == "" or default.startswith("-"))]

    def function(self, name: str) -> FunctionDef | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.funcs:
                return scope.funcs[name]
            if scope.view:
                return None
            scope = scope.parent
        return None

    def params(self) -> list[str] | None:
        scope: Scope | None = self
        while scope is not None:
            if scope.positional is not None:
                return scope.positional
            if scope.view:
                return None
            scope = scope.parent
        return None

    def frame_scope(self) -> Scope | None:
        scope: Scope | None = self
        while scope is not None and not scope.frame:
            if scope.view:
                return None
            scope = scope.parent
        return scope


class Script(NamedTuple):
    """A file a script writes (``cat > run.sh <<EOF``), as the script left it at a point."""
    text: str
    line: int          # where its text starts in the audited file
    in_file: bool      # its lines are the audited file's (a here-document), so launches in it keep their lines
    # A here-document of a container's script whose lines are the file's (Place.file_lines): the line
    # its text starts at, where a manifest it holds is read (its launches stay at the container's).
    file_line: int | None = None


class Pin(NamedTuple):
    """A `pip install vllm==X` the script runs: it installs X where it runs,
    the script's own environment (container 0) or a container's shell."""
    hint: ReleaseHint
    sequence: int      # where in the reading it was met
    container: int


class Source(NamedTuple):
    """The source tree of vLLM the script last cloned: the ref it checked
    out (None: the default branch), its folder, the clone's line, and
    whether the script has since changed into another directory (where a
    `git checkout` or `pip install .` is another tree's)."""
    ref: str | None
    folder: str
    line: int
    away: bool = False


@dataclass
class Place:
    """Where the text being read sits: lines of the audited file (each
    launch at its own line), or a text made at run time (``eval``, ``sh -c
    STRING``, a container's command) whose launches are all at ``fixed``."""
    origin: Callable[[int], str]
    anchor: Callable[[int], str]
    fixed: int | None = None
    # A ``fixed`` text whose lines are still the file's (a container's block-scalar `sh -c` script): a
    # manifest it applies from a here-document is read at its lines (Script.file_line).
    file_lines: bool = False

    def line(self, line: int) -> int:
        return self.fixed if self.fixed is not None else line

    def at(self, line: int) -> str:
        """Where a construct at ``line`` of the text is, as a message says it:
        a text made at run time has no lines of the file, only its own place."""
        return f"at line {line}" if self.fixed is None else f"in the script at line {self.fixed}"

    def inner(self, line: int) -> "Place":
        """The place of a text made at run time at ``line``."""
        at = self.line(line)
        return Place(self.origin, self.anchor, at)


# At most this many paths through one `if` or `case` are each read again for
# a launch that reads a value they set differently (shell_run.Interpreter.paths).
MAX_BRANCHES = 4
# At most this many `if`s and `case`s that set one variable differently on their paths may stand in
# its value (`ARGS+=(...)` in each): each is read within the next one's values, so a launch's reading
# grows with the square of their number, in time and memory (checked in shell_flow.merge).
MAX_MERGED = 256


@dataclass(frozen=True, eq=False)  # each merge is its own value (Interpreter.paths gathers them in a set)
class Branches:
    """Variables set differently on the paths through one `if` or `case`
    (``where``), which its end made unknown: each one's value on each path,
    and the epoch of the unknown value the merge gave it. A launch that
    reads one, still as the merge left it, is read again once per path."""

    where: str
    values: dict[str, tuple[Var, ...]]  # name -> the variable on each path
    epochs: dict[str, int]
    merged: dict[str, Var]  # name -> what the merge left it: the start the paths agree on, then the marker

    def rest(self, name: str, path: int) -> tuple[str, tuple[str, ...] | str] | None:
        """What stands for the marker of ``name`` on ``path``: (the marker, the
        path's elements past the agreed start) for an array, (the marker, the
        path's text past it) for a value; None where the path's value does not
        start so. A later merge's paths that grew the value from this one's
        (`ARGS+=(...)` in two `if`s) hold the marker, which each path of this
        one fills in (shell_run.Interpreter.paths)."""
        merged, var = self.merged.get(name), self.values[name][path]
        if merged is None:
            return None
        if merged.items is not None:
            marker = merged.items[-1]
            items = () if var.value is None else var.items if var.items is not None else (var.value,)
            start = merged.items[:-1]
            return (marker, items[len(start):]) if items[:len(start)] == start else None
        found = UNRESOLVED.search(merged.value or "")
        if found is None or merged.value is None:
            return None
        agreed, value = merged.value[:found.start()], var.value or ""
        if not value.startswith(agreed) and agreed.startswith(value) and agreed[len(value):].isspace():
            return found.group(0), ""  # (the agreed start ends in a blank this path's value lacks: it adds nothing)
        return (found.group(0), value[len(agreed):]) if value.startswith(agreed) else None

    def path_text(self, marker: str, path: int, scope: "Scope") -> str | tuple[str, ...] | None:
        """What the variable of ``marker`` holds on ``path`` past the start
        the paths agree on (its value in ``scope``, as the merge left it:
        that start, then the marker): the text a copy of the merged value
        (`KV="$A"`) holds in the marker's place there; for an array, the
        elements a copy (`CMD=(vllm serve "${ARGS[@]}")`) holds in place of
        the marker's element. None where the path's value does not start so."""
        match = UNRESOLVED.fullmatch(marker)
        name = merged_name(match.group(1)) if match else ""
        if name in self.values and self.merged.get(name) is not None and self.merged[name].items is not None:
            found = self.rest(name, path)
            return found[1] if found is not None and found[0] == marker and isinstance(found[1], tuple) else None
        on_paths, merged = self.values.get(name), scope.lookup(name)
        var = on_paths[path] if on_paths is not None else None
        if var is None or var.items is not None or merged is None or merged.value is None or marker not in merged.value:
            return None
        start, value = merged.value[:merged.value.index(marker)], var.value or ""
        return value[len(start):] if value.startswith(start) else None

    def fill_in(self, path: "Scope", taken: int) -> bool:
        """Each variable of this merge, within the values a later merge's path
        gave it (``path``): its marker replaced by what path ``taken`` of this
        one set (an array's elements, or a value's text); False where that
        path's value is not the merge's agreed start and more."""
        for name in self.values:
            filled, var = self.rest(name, taken), path.vars.get(name)
            if filled is None or var is None:
                return False
            marker, rest = filled
            if var.items is not None and isinstance(rest, tuple):
                items = tuple(part for item in var.items for part in (rest if item == marker else (item,)))
                path.vars[name] = var._replace(value=items[0] if items else "", items=items)
            elif var.items is None and isinstance(rest, str) and var.value is not None:
                path.vars[name] = var._replace(value=var.value.replace(marker, rest))
            else:
                return False
        return True

    def adds_deciding(self, marker: str, scope: "Scope") -> bool:
        """may_decide, of what each path adds past the start the paths agree
        on: `CMD="vllm serve m --kv-transfer-config ..."` grown by
        `--enforce-eager` on one path adds nothing the decision reads."""
        match = UNRESOLVED.fullmatch(marker)
        name = merged_name(match.group(1)) if match else ""
        on_paths, merged = self.values.get(name), scope.lookup(name)
        if on_paths is None or merged is None or merged.value is None or marker not in merged.value \
                or any(var is not None and var.items is not None for var in on_paths):
            return self.may_decide
        start = merged.value[:merged.value.index(marker)]
        values = [var.value or "" if var is not None else "" for var in on_paths]
        if not all(value.startswith(start) or start.startswith(value) for value in values):
            return self.may_decide
        return any(n in ENV_NAMES for n in self.values) or \
            any(DECIDING.search(UNRESOLVED.sub("", value[len(start):])) for value in values)

    def decides(self, marker: str, read_values: list[str]) -> bool:
        """adds_options, or where a launch takes the marker of this merge as (part of) one of
        ``read_values``, the values of the options and environment variables the decision reads
        (:func:`values_read`): a JSON value names no option, and decides the launch all the same."""
        return self.adds_options or any(marker in value for value in read_values)

    @cached_property  # (asked of each merge by every launch that reads it: answered once)
    def adds_options(self) -> bool:
        """may_decide, of what each path adds to the start its values agree on (the merge's own): a command
        line that every path holds, grown on one by a value not known, adds no option the decision reads."""
        if any(name in ENV_NAMES for name in self.values):
            return True
        for name, on_paths in self.values.items():
            merged = self.merged.get(name)
            if merged is not None and merged.items is not None:
                start: tuple[str, ...] | str = merged.items[:-1]
                added = [items[len(start):] if items[:len(start)] == start else items for items in (
                    var.items if var.items is not None else (var.value,) if var.value is not None else ()
                    for var in on_paths)]
            else:
                # (the merge's own marker ends the value it left: one before it is a value the paths share)
                found = list(UNRESOLVED.finditer(merged.value or "")) if merged is not None else []
                start = merged.value[:found[-1].start()] if merged is not None and merged.value and found else ""
                added = [(past(var.value or "", start),) for var in on_paths]
            if any(DECIDING.search(UNRESOLVED.sub("", text)) for texts in added for text in texts if text):
                return True
        return False

    @cached_property
    def may_decide(self) -> bool:
        """Whether a path sets a value to what the decision reads: an option
        of it (`KVARG=(--kv-transfer-config ...)`), or a variable of the
        environment it reads. (A value that only holds what the file does not
        give, the script's own arguments, may hold options on each path
        alike: a word made of it stays a note.)"""
        return any(name in ENV_NAMES for name in self.values) or any(
            DECIDING.search(UNRESOLVED.sub("", text)) for on_paths in self.values.values() for var in on_paths
            for text in (var.items if var.items is not None else (var.value,)) if text)

    @cached_property
    def markers_within(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """By variable, the markers (each with how it is shown) that the values its paths give it hold:
        those of earlier merges of it that they grew (found once a merge: a launch's reading walks them)."""
        return {name: tuple((m.group(0), m.group(1)) for var in on_paths
                            for text in (var.items if var.items is not None else (var.value or "",)) if "\x00" in text
                            for m in UNRESOLVED.finditer(text))
                for name, on_paths in self.values.items()}


class Readings(NamedTuple):
    """The paths a launch is read on again (Run.readings): the merges it reads, by marker; the markers its own
    words hold, those of them whose nested merges may decide, and those said to be unread where no path is
    read; the markers of the merges read, which are in the script's order; the variables of each, as the
    launch reads them; whether each is read within a later one's values; and the combinations of their
    paths (a path of each)."""
    read: dict[str, Branches]
    direct: frozenset[str]  # the markers of those the launch's own words hold
    nested: frozenset[str]  # of those, the markers whose nested merges (an `if`'s within a path) may decide
    unread: frozenset[str]  # the markers said to be unread where no path is read
    markers: tuple[str, ...]
    merges: list[Branches]
    kept: list[dict[str, Var]]
    inner: list[bool]
    combinations: list[tuple[int, ...]]


def _paths(branches: Branches) -> int:
    return len(next(iter(branches.values.values())))


@dataclass
class Run:
    """One reading of a script: what it found and what it may still spend."""
    ctx: Ctx
    problems: list[Problem]
    budget: int
    found: list[Invocation] = field(default_factory=list)
    files: dict[str, list[tuple[int, Script]]] = field(default_factory=dict)   # path -> (sequence, content), in order
    sequence: int = 0
    epoch: int = 0
    nesting: int = 0
    calls: int = 0  # shell functions called (max_calls)
    pins: list[Pin] = field(default_factory=list)   # `pip install vllm==X` pins, in the order met
    containers: int = 0     # container shells met so far (`docker run IMAGE bash -c ...`), each numbered
    # The source tree of vLLM the script last cloned: its build and install is a pin (Interpreter.note_pins).
    source: Source | None = None
    limited: set[str] = field(default_factory=set)
    syntax_errors: int = 0
    collect: bool = True    # launches are collected (not while reading a sourced file)
    sourcing: tuple[str, ...] = ()
    # Functions in the order they were defined, with where their text is; which were called;
    # which came from a sourced file (their launches are that file's).
    defined: list[tuple[FunctionDef, "Place"]] = field(default_factory=list)
    called: set[int] = field(default_factory=set)
    foreign: set[int] = field(default_factory=set)
    # The unknown value a path merge gave a variable (its marker) -> the merge (Branches).
    branches: dict[str, Branches] = field(default_factory=dict)
    # merges_read's answers, by the markers a launch holds; emptied by each merge (an `if` run again,
    # in a function called twice, gives its markers to another merge)
    read_by_markers: dict[tuple[tuple[str, str], ...], dict[str, Branches]] = field(default_factory=dict)
    # While a launch is read again for one path: its words and environment, instead of a launch.
    capturing: list[tuple[list[str], dict[str, Arg]]] | None = None
    # Manifests the script hands `kubectl apply -f` (a here-document, a file it wrote), in
    # order; and while a pipeline runs, the here-document its `cat` sends the next command.
    applied: list[Script] = field(default_factory=list)
    piped: Script | None = None
    # The files of the container the script runs in that its reader can open (a ConfigMap key the pod
    # mounts), and the folder a relative path is in where `cd` made it known.
    mounted: Callable[[str], ConfigFile] | None = None
    folder: str | None = None

    def next_epoch(self) -> int:
        self.epoch += 1
        return self.epoch

    def readings(self, argv: list[str], env: Mapping[str, str], scope: "Scope") -> "Readings | frozenset[str]":
        """Which paths a launch (``argv``, its environment ``env``) is read on again: the merges whose
        values it reads (its words hold their markers), still as they left them, and the combinations of
        their paths, at most MAX_BRANCHES; beyond that bound, of the merges whose values the decision
        reads alone (a port, a parallel size, `--enable-expert-parallel` set by `if`s beside a KV config's
        stay values not known, each a note). Else the markers of the values a path sets to what the
        decision reads, which are not read on each path."""
        held = tuple((m.group(0), m.group(1)) for text in (*argv, *env.values()) if "\x00" in text
                     for m in UNRESOLVED.finditer(text))
        read = self.merges_read(held)
        # (those the launch's own words hold: a nested merge's marker is read only through its outer one's paths)
        direct = frozenset(marker for marker, _ in held) & set(read)
        merges = sorted(set(read.values()), key=lambda b: min(b.epochs.values()))  # in the script's order
        kept = [{name: var for name, epoch in branches.epochs.items()
                 if (var := scope.lookup(name)) is not None and var.epoch == epoch} for branches in merges]
        # A merge whose values a later merge of the same variables grew (`ARGS+=(...)` in two `if`s), or an
        # `if`'s within another's path, is read within that one's values: each of its paths fills in its marker.
        outer = {name for names in kept for name in names}
        inner = [not names for names in kept]
        if merges and all(names or set(branches.values) <= outer for branches, names in zip(merges, kept)):
            kept = [names or {name: UNSET for name in branches.values} for names, branches in zip(kept, merges)]
        # A value an `if` within another's path set (nested) may be what decides: the outer merge's value
        # holds only the inner one's marker, and what the inner one adds is what counts.
        # (the inner merges grouped by their variable once: a launch may read thousands of merges)
        within: dict[str, list[Branches]] = {}
        for found, branches in read.items():
            if found not in direct:
                within.setdefault(merged_name(shown(found)), []).append(branches)
        nested = frozenset(marker for marker in direct if any(
            branches.adds_options for branches in within.get(merged_name(shown(marker)), ())))
        unread = nested | frozenset(marker for marker in direct if read[marker].may_decide)
        if not merges or not all(kept):
            return unread
        if math.prod(map(_paths, merges)) > MAX_BRANCHES:
            # (each merge asked once, of its own markers, against the values the decision reads, found
            # once: a launch that reads thousands of variables `if`s set took quadratic time)
            read_values = values_read(argv, env)
            markers_of: dict[Branches, list[str]] = {}
            for marker, merge in read.items():
                markers_of.setdefault(merge, []).append(marker)
            deciding = [index for index, branches in enumerate(merges)
                        if any(branches.decides(marker, read_values) for marker in markers_of.get(branches, ()))]
            if not deciding:
                return frozenset()
            if any(inner[index] for index in deciding):
                # One read within another's values (`ARGS+=(...)` in three `if`s) is read only through the
                # chain of those that grew it: on the paths of those that decide, each other on its first
                # path (what its paths add are options the decision does not read: every path of it gives
                # the same answer, and its marker stays a note).
                chained = list(itertools.product(*(range(_paths(branches)) if index in deciding else range(1)
                                                   for index, branches in enumerate(merges))))
                if len(chained) > MAX_BRANCHES:
                    return unread
                return Readings(read, direct, nested, unread, tuple(m for m, b in read.items() if b in merges), merges,
                                kept, inner, chained)
            merges, kept, inner = [merges[i] for i in deciding], [kept[i] for i in deciding], [inner[i] for i in deciding]
        if math.prod(map(_paths, merges)) > MAX_BRANCHES:
            return unread
        combinations = list(itertools.product(*(range(_paths(branches)) for branches in merges)))
        return Readings(read, direct, nested, unread, tuple(m for m, b in read.items() if b in merges), merges, kept,
                        inner, combinations)

    def merges_read(self, held: tuple[tuple[str, str], ...]) -> dict[str, Branches]:
        """The merges whose markers a launch holds (``held``: each marker, and how it is shown), by
        marker; and within the values a merge's paths give its variable, the merges of that same variable
        whose markers they hold: an `if` within a path of another (nested `if`s) left its marker in the
        value that path sets. (Another variable's marker in such a value, a copy of a value set elsewhere,
        is read as a value not known, as it was set.) Launches that hold the same markers read the same
        merges: found once."""
        read = self.read_by_markers.get(held)
        if read is not None:
            return read
        read = {}
        pending: deque[tuple[str, str, str | None]] = deque((marker, as_shown, None) for marker, as_shown in held)
        while pending:
            marker, as_shown, variable = pending.popleft()
            if marker in read:  # (a value that each of many `if`s grew holds all their markers)
                continue
            branches, name = self.branches.get(marker), merged_name(as_shown)
            if branches is not None and variable in (None, name):
                read[marker] = branches
                pending.extend((inner, inner_shown, name) for inner, inner_shown in branches.markers_within.get(name, ()))
        self.read_by_markers[held] = read
        return read

    def limit(self, kind: str, message: str, line: int | None) -> None:
        """A bound hit: reported once a file for each kind."""
        if kind not in self.limited:
            self.limited.add(kind)
            self.problems.append(self.ctx.problem("source.limit", message, line=line))

    def call(self, name: str, line: int | None) -> None:
        """Count a call of a shell function; past max_calls the reading ends (Stop)."""
        self.calls += 1
        if self.calls > self.ctx.limits.max_calls:
            self.limit("calls", f"more than {self.ctx.limits.max_calls} shell function calls (`{name}` at line "
                       f"{line}); the script is not read past this point", line)
            raise Stop

    def spend(self, amount: int, line: int | None) -> bool:
        self.budget -= amount
        if self.budget < 0:
            self.limit("budget", "the script expands to more text than the audit reads for a file of its size "
                       f"(at line {line}); it is not read past this point", line)
            return False
        return True

    def file_at(self, path: str, sequence: int | None = None) -> Script | None:
        return written_at(self.files, path, self.sequence if sequence is None else sequence)

    def mounted_file(self, path: str, line: int) -> Script | None:
        """A script file of the container that the script did not write
        (kthena's `cd /workspace && ./prefill.sh`, the file a ConfigMap key
        the pod mounts there), where its path is known; else None."""
        if self.mounted is None or has_unresolved(path):
            return None
        where = path if path.startswith("/") else posixpath.join(self.folder, path) if self.folder else None
        try:
            return Script(self.mounted(posixpath.normpath(where)).text, line, False) if where else None
        except InputError:  # (not a file the reader can open: not read, as any file outside the audit)
            return None

    def change_folder(self, fields: list[str]) -> None:
        """`cd DIR`: the folder relative paths are in, where it is known."""
        if fields[:1] == ["cd"]:
            target = fields[1] if len(fields) == 2 else ""
            known = target.startswith("/") or (self.folder is not None and target not in ("", "-") and not target.startswith("~"))
            self.folder = posixpath.normpath(posixpath.join(self.folder or "/", target)) \
                if known and not has_unresolved(target) else None


def written_at(files: dict[str, list[tuple[int, Script]]], path: str, sequence: int | None) -> Script | None:
    """The file ``path`` as the script had written it at ``sequence``."""
    versions = files.get(normal_path(path))
    for seq, script in reversed(versions or ()):
        if sequence is None or seq <= sequence:
            return script
    return None


class Stop(Exception):
    """The budget is spent: the reading ends here."""


def normal_path(path: str) -> str:
    return posixpath.normpath(path) if path else path
