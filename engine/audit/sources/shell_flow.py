"""How a script's structure changes what it knows (shell.py reads
scripts): lists and ``&&``/``||`` in order, subshells and pipelines on a
copy of the scope, ``if``/``case``/loops on a scope per path merged after
them (a variable set differently on the paths is unknown), ``for`` over a
list the text gives, assignments and ``export``/``declare``/``local``.
:class:`Flow` is the base of the interpreter (shell_run.py), which runs the
simple commands.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from ...core.markers import has_unresolved, unresolved
from .shell_expand import (Expander, assign, clobber, common_elements, common_start, environment_default, runtime,
                           stdin_text)
from .shell_state import MAX_BRANCHES, MAX_MERGED, UNSET, Branches, Place, Run, Scope, Script, Stop, Var
from .shell_tree import (AndOr, Arith, Array, Case, CommandList, FunctionDef, Group, If, Lit, Loop, Param, Simple, Subshell,
                         Word)
from .shell_words import ASSIGNMENT, NAME

__all__ = ["Flow", "ARITH_ASSIGNED"]

ARITH_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|"
                            r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\+\+|--)|(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)")


class Flow:
    """Runs a script's lists and compound commands over its scopes, and its
    assignments and declarations; a simple command is the interpreter's
    (:meth:`run_simple`, shell_run.py)."""

    def __init__(self, run: Run, place: Place, image: str | None = None, container: int = 0):
        # ``image``: the image the script runs in (`docker run --entrypoint bash IMAGE -c SCRIPT`),
        # whose tag gives its launches their release unless a pin in the same ``container``
        # (Run.containers; 0: the script's own environment) installs another first.
        self.run, self.place, self.image, self.container = run, place, image, container

    # lists and compound commands
    def run_list(self, commands: CommandList, scope: Scope) -> None:
        for item in commands.items:
            if scope.terminated:
                return
            self.run_and_or(item, scope)

    def run_and_or(self, item: AndOr, scope: Scope) -> None:
        target = Scope(scope) if item.background else scope  # `cmd &` runs in a subshell
        self.run_pipeline(item.pipelines[0], target)
        if len(item.pipelines) > 1:
            # What follows `&&` or `||` runs on a condition the audit does not evaluate, as an `if`'s body:
            # `[ "$ARM" != recompute ] && KV="--kv-transfer-config ..."` may leave KV as it was
            # (gluesys/lmcache-daos); `cmd || exit 1` leaves a path that goes on.
            branch = Scope(target)
            for pipeline in item.pipelines[1:]:
                self.run_pipeline(pipeline, branch)
            self.merge(target, [branch, Scope(target)], f"`{item.operators[0]}` {self.place.at(item.line)}", item.line)

    def run_pipeline(self, pipeline: Any, scope: Scope) -> None:
        if len(pipeline.commands) == 1:
            self.run_command(pipeline.commands[0], scope)
            return
        for previous, command in zip((None, *pipeline.commands), pipeline.commands):  # each in a subshell
            # `cat <<EOF | kubectl apply -f -`: what the here-document sends on.
            self.run.piped = self.piped_text(previous, scope)
            self.run_command(command, Scope(scope))
        self.run.piped = None

    def piped_text(self, command: Any, scope: Scope) -> Script | None:
        """The text a pipeline's command sends the next one, where the
        script tells: a here-document read by a plain `cat`, also where that
        is the whole body of a function of the script the pipeline calls
        (kserve's install scripts: `get_manifests | kubectl apply -f -`)."""
        function = scope.function(command.words[0].literal() or "") \
            if isinstance(command, Simple) and len(command.words) == 1 else None
        if function is not None:
            command = _only_command(function.body)
        if not isinstance(command, Simple) or [w.literal() for w in command.words] != ["cat"]:
            return None
        line = self.place.line(command.line)
        text = stdin_text(self.run, scope, command.redirects, line)
        return self.stdin_script(command, text, line) if text is not None else None

    def stdin_script(self, command: Simple, text: str, line: int) -> Script:
        """A command's standard input as a script: a here-document of the
        file's own text keeps its lines."""
        heredoc = next((r for r in command.redirects if r.op in ("<<", "<<-") and r.body is not None), None)
        if heredoc is not None and self.place.fixed is None:
            return Script(text, heredoc.body_line, True)
        return Script(text, line, False, heredoc.body_line if heredoc is not None and self.place.file_lines else None)

    def run_command(self, command: Any, scope: Scope) -> None:
        if isinstance(command, Simple):
            self.run_simple(command, scope)
        elif isinstance(command, Subshell):
            self.run_list(command.body, Scope(scope))
        elif isinstance(command, Group):
            self.run_list(command.body, scope)
        elif isinstance(command, If):
            self.run_if(command, scope)
        elif isinstance(command, Loop):
            self.run_loop(command, scope)
        elif isinstance(command, Case):
            self.run_case(command, scope)
        elif isinstance(command, FunctionDef):
            scope.funcs[command.name] = command
            self.run.defined.append((command, self.place))
            if not self.run.collect:
                self.run.foreign.add(id(command))
        elif isinstance(command, Arith):
            names = {n for match in ARITH_ASSIGNED.finditer(command.text) for n in match.groups() if n}
            runtime(self.run, scope, sorted(names), f"is set by `((...))` {self.place.at(command.line)}")

    def run_if(self, command: If, scope: Scope) -> None:
        paths: list[Scope] = []
        first = True
        for condition, body in command.clauses:
            if first:
                self.run_list(condition, scope)  # the first condition always runs
                branch = Scope(scope)
                first = False
            else:
                branch = Scope(scope)
                self.run_list(condition, branch)
            self.run_list(body, branch)
            paths.append(branch)
        otherwise = Scope(scope)
        if command.otherwise is not None:
            self.run_list(command.otherwise, otherwise)
        paths.append(otherwise)
        self.merge(scope, paths, f"`if` {self.place.at(command.line)}", command.line)

    def run_loop(self, command: Loop, scope: Scope) -> None:
        line = self.place.line(command.line)
        if command.kind in ("for", "select") and command.name:
            items = None
            if command.kind == "for" and command.words is not None:
                expander = Expander(self.run, scope, line)
                items = [f for w in command.words for f in expander.fields(w)]
                if len(items) > 16 or any(has_unresolved(i) or any(ch in i for ch in "*?[") for i in items):
                    items = None
            if items is not None:
                # A list the text gives: each item in turn, as the shell runs them.
                for item in items:
                    assign(self.run, scope, command.name, item, line=line)
                    self.run_list(command.body, scope)
                    scope.terminated = False
                return
            runtime(self.run, scope, [command.name], f"is set by `{command.kind}` {self.place.at(command.line)}")
        if command.condition is not None:
            self.run_list(command.condition, scope)  # runs at least once
            scope.terminated = False
        body = Scope(scope)
        self.run_list(command.body, body)
        body.terminated = False
        self.merge(scope, [body, Scope(scope)], f"the loop {self.place.at(command.line)}", command.line)

    def run_case(self, command: Case, scope: Scope) -> None:
        line = self.place.line(command.line)
        expander = Expander(self.run, scope, line)
        subject = expander.word(command.word)
        chosen = None
        # A subject the file gives only the default of (`case "${BACKEND:-}" in`, `MODE=${MODE:-a}; case $MODE
        # in`) is the environment's to choose: any arm may run, as either path of an `if` that tests it may.
        defaulted = any(environment_default(part, scope) for part in command.word.parts)
        if not has_unresolved(subject) and not defaulted:
            for index, (patterns, _) in enumerate(command.arms):
                values = [expander.word(p) for p in patterns]
                if any(has_unresolved(v) for v in values):
                    break
                if any(fnmatch.fnmatchcase(subject, v) for v in values):
                    chosen = index
                    break
            else:
                return  # no arm matches
        if chosen is not None:
            self.run_list(command.arms[chosen][1], scope)
            return
        paths = []
        catch_all = False
        for patterns, body in command.arms:
            branch = Scope(scope)
            self.run_list(body, branch)
            paths.append(branch)
            catch_all = catch_all or any(p.literal() == "*" and p.unquoted_literal() == "*" for p in patterns)
        if not catch_all:
            paths.append(Scope(scope))
        self.merge(scope, paths, f"`case` {self.place.at(command.line)}", command.line)

    def merge(self, scope: Scope, paths: list[Scope], where: str, at: int) -> None:
        """After paths of which any may have been taken (of the construct at
        line ``at`` of the text): what they agree on, and the rest unknown.
        Paths that ended (`exit`) are left out."""
        live = [p for p in paths if not p.terminated]
        if not live:
            return
        barriers = [p.barrier for p in live if p.barrier is not None]
        if barriers:
            clobber(self.run, scope, max(barriers)[1])
        names: dict[str, None] = {}
        for path in live:
            names.update(dict.fromkeys(path.vars))
            for name, fn in path.funcs.items():
                scope.funcs[name] = fn
        differing: dict[str, tuple[Var, ...]] = {}  # set on every path, differently: for Branches
        epochs: dict[str, int] = {}
        markers: list[str] = []
        for name in names:
            found = [p.lookup(name) for p in live]
            unset_before = scope.lookup(name) is None
            values = {(v.value, v.exported, v.items) if v is not None else None for v in found}
            line = min((v.line for v in found if v is not None and v.line), default=0)
            if len(values) == 1:
                (value,) = values
                if value is None:
                    scope.vars[name] = UNSET
                else:
                    scope.vars[name] = Var(value[0], value[1], self.run.next_epoch(), line, value[2])
            else:
                exported = any(v is not None and v[1] for v in values)
                array = any(v is not None and v.items is not None for v in found)
                # Past the elements the paths agree on, an array holds any number of words (options
                # among them), as `"${NAME[@]}"` of an array not known does.
                marker = unresolved(f"${{{name}[@]}}" if array else "$" + name,
                                    f"is set differently on the paths through {where}")
                epoch = self.run.next_epoch()
                if array:
                    items = common_elements(found, marker)
                    held = sum("\x00" in item for item in items)
                    scope.vars[name] = Var(items[0], exported, epoch, line, items)
                else:
                    merged = common_start([v.value if v is not None else None for v in found], marker)
                    held = merged.count("\x00") // 2
                    scope.vars[name] = Var(merged, exported, epoch, line)
                if held > MAX_MERGED:
                    self.run.limit("merged", f"`{name}` holds what more than {MAX_MERGED} `if`s and `case`s set "
                                   f"differently on their paths (the last: {where}); the script is not read past "
                                   "this point", self.place.line(at))
                    raise Stop
                # Each path's value; a path that leaves a variable never set before the `if` unset
                # leaves it to the environment, as before the `if` (`if ...; then export X=1; fi`).
                on_each = [v if v is not None and v.value is not None else None for v in found]
                if (all(v is not None for v in on_each) or unset_before) and len(live) <= MAX_BRANCHES:
                    differing[name] = tuple(v if v is not None else UNSET for v in on_each)
                    epochs[name] = epoch
                    markers.append(marker)
        if differing:
            branches = Branches(where, differing, epochs, {name: scope.vars[name] for name in differing})
            self.run.branches.update(dict.fromkeys(markers, branches))
            self.run.read_by_markers.clear()
        frame = scope.frame_scope()
        if frame is not None:
            for path in live:
                frame.locals |= path.locals
        if any(path.positional is not None for path in live):
            # `shift` or `set --` on some paths: the parameters the paths agree on, else any words.
            given = [path.params() for path in live]
            scope.positional = given[0] if all(g == given[0] for g in given) else \
                [unresolved("the arguments", f"are shifted or set differently on the paths through {where}")]
            scope.written = None

    def run_simple(self, command: Simple, scope: Scope) -> None:
        """A simple command: run by the interpreter (shell_run.py), which overrides this."""
        raise NotImplementedError

    def value(self, scope: Scope, name: str, value_word: Word, append: bool) -> str:
        expander = Expander(self.run, scope, self.place.line(value_word.line))
        if any(isinstance(p, Array) for p in value_word.parts):
            return unresolved(f"${{{name}[@]}}")
        value = expander.word(value_word)
        if append:
            current = scope.lookup(name)
            value = (current.value if current is not None and current.value is not None else "") + value
        return value

    def written_at(self, word: Word, scope: Scope) -> int:
        """Where the text of a word that is one variable's or parameter's
        value (``"$CMD"``, ``"$1"``) was written: its line, carried through
        copies and function calls (0: not known, or not such a word)."""
        parts = [p for p in word.parts if not (isinstance(p, Lit) and not p.text)]
        return self.param_written(parts[0], scope) if len(parts) == 1 and isinstance(parts[0], Param) else 0

    def param_written(self, param: Param, scope: Scope) -> int:
        """Where the text of the variable or parameter ``param`` expands was written (see written_at)."""
        name = param.name
        if param.op is not None:
            return 0
        if name.isdigit():
            holder = self.params_holder(scope)
            index = int(name) - 1
            return holder.written[index] if holder.written is not None and 0 <= index < len(holder.written) else 0
        var = scope.lookup(name)
        return var.line if var is not None else 0

    def params_holder(self, scope: Scope) -> Scope:
        """The scope whose positional parameters ``scope`` sees."""
        target: Scope | None = scope
        while target is not None and target.positional is None:
            target = target.parent
        return target or scope

    def assign_word(self, scope: Scope, name: str, append: bool, value_word: Word, line: int, *,
                    exported: bool | None = None, local: bool = False) -> None:
        line = (self.written_at(value_word, scope) or line) if not append else line  # (`b="$a"`: a's text, where written)
        parts = [p for p in value_word.parts if not (isinstance(p, Lit) and not p.text)]  # (`NAME=` leaves a '')
        array = parts[0] if len(parts) == 1 and isinstance(parts[0], Array) else None
        if array is not None:  # NAME=(...), NAME+=(...): each element word's fields, as bash expands them
            expander = Expander(self.run, scope, self.place.line(value_word.line))
            items = [field for word in array.words for field in expander.fields(word)]
            if append:
                before = expander.elements(name)
                items = [*(before or ()), *items]
            assign(self.run, scope, name, "", exported=exported, local=local, line=line, items=tuple(items))
            return
        # (`MODE=${MODE:-a}`: the environment's value, else the default; a `case` on it may take any arm)
        defaulted = not append and len(parts) == 1 and environment_default(parts[0], scope)
        assign(self.run, scope, name, self.value(scope, name, value_word, append), exported=exported, local=local,
               line=line, defaulted=defaulted)

    def declaration(self, builtin: str, words: list[Word], scope: Scope, line: int) -> None:
        """export, declare, typeset, local, readonly: their arguments are assignments."""
        expander = Expander(self.run, scope, line)
        exported: bool | None = True if builtin == "export" else None
        local = builtin == "local" or (builtin in ("declare", "typeset") and scope.frame_scope() is not None)
        unfollowed = False  # an associative array or an integer (declare -A, -i)
        for word in words:
            literal = word.unquoted_literal()
            if literal is not None and literal[:1] in ("-", "+") and len(literal) > 1:
                letters = literal[1:]
                if "x" in letters:
                    exported = literal[0] == "-"
                if "g" in letters:
                    local = False
                if "A" in letters or "i" in letters:
                    unfollowed = True
                if "n" in letters and literal[0] == "-":
                    clobber(self.run, scope, f"is set at run time through a name reference (`{builtin} -n` at line {line})")
                if "f" in letters or "F" in letters or "p" in letters:
                    return
                continue
            head = word.parts[0] if word.parts else None
            match = ASSIGNMENT.match(head.text) if isinstance(head, Lit) and not head.quoted else None
            if match is not None and match.end() > 0:
                name = match.group(1)
                if unfollowed:
                    runtime(self.run, scope, [name], f"is an array or integer `{builtin}` sets at line {line}")
                    continue
                rest = (Lit(head.text[match.end():]),) + word.parts[1:]  # type: ignore[union-attr]
                self.assign_word(scope, name, bool(match.group(2)), Word(rest, word.line), line, exported=exported,
                                 local=local)
                continue
            plain = word.literal()
            if plain is not None and NAME.fullmatch(plain):
                current = scope.lookup(plain)
                if local:
                    assign(self.run, scope, plain, "", exported=exported, local=True, line=line)
                    scope.vars[plain] = UNSET
                elif current is not None and exported is not None:
                    scope.vars[plain] = current._replace(exported=exported, line=0)
                elif current is None and exported:
                    scope.vars[plain] = Var(None, True, self.run.next_epoch())  # exported once it is set
                continue
            # A name made at run time (`export $(cat .env)`, `declare "$n=..."`): any variable may change.
            values = expander.fields(word)
            if all(not has_unresolved(v) and ASSIGNMENT.match(v) for v in values) and values:
                for value in values:
                    match = ASSIGNMENT.match(value)
                    assign(self.run, scope, match.group(1), value[match.end():], exported=exported,  # type: ignore[union-attr]
                            local=local, line=line)
                continue
            clobber(self.run, scope, f"may be set at run time by `{builtin}` of a computed name at line {line}")


def _only_command(body: Any) -> Any:
    """The one command of a function's body (`{ cat <<EOF ... EOF; }`), or None."""
    while isinstance(body, Group) and len(body.body.items) == 1 and len(body.body.items[0].pipelines) == 1 \
            and len(body.body.items[0].pipelines[0].commands) == 1:
        body = body.body.items[0].pipelines[0].commands[0]
    return body if isinstance(body, Simple) else None
