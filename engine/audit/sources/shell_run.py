"""Simple commands, as a script runs them, without running anything (shell.py
reads scripts): ``exec``, ``unset``, ``set``, ``shift``, the builtins that
set variables at run time (``read``, ``mapfile``, ``getopts``, ``printf
-v``, ``let``), ``source``, ``eval``, ``exit``/``return``, function calls,
files written with ``cat > FILE <<EOF`` and scripts run with ``bash FILE``,
``bash -c``, ``ssh``; and each vLLM launch found (``vllm serve``, the
api_server module, ``docker run`` of a vLLM image), with its environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.markers import has_unresolved, unresolved
from ...core.options import ENV_NAMES, Arg, find_vllm, unknown_module
from ...core.errors import InputError
from .detect import SHELLS
from .launch import PLATFORM_ENV, PLUGINS, Invocation, config_from_fs, platform_of_runtime
from .release import ReleaseHint, from_source, installed
from .images import VLLM_IMAGE, presumed_note, presumed_server
from .shell_commands import (NOT_RUNNING, VENV_ACTIVATE_SETS, applied_file, apptainer_image, docker_run, git_source,
                             installs_source, name_operands, nested_script, only_markers, same_folder, srun_image,
                             reads_stdin, ssh_command, Sweep, sweep_server, unread_params, venv_activation)
from .shell_expand import Expander, clobber, in_place, runtime, stdin_text
from .shell_flow import ARITH_ASSIGNED, Flow
from .shell_state import MAX_NESTING, UNSET, Pin, Readings, Place, Script, Scope, Source, Stop, Var, normal_path
from .shell_syntax import parse_body
from .shell_tree import FunctionDef, Param, ShellSyntaxError, Simple, Word
from .shell_words import ASSIGNMENT, NAME, split_assignments

__all__ = ["Interpreter"]


class Interpreter(Flow):
    """Runs a script's simple commands: builtins that change its variables,
    function calls, sourced files, ``eval``, scripts it runs, files it
    writes, ``pip install vllm==X`` pins, and vLLM launches."""

    # simple commands
    def run_simple(self, command: Simple, scope: Scope) -> None:
        run = self.run
        line = self.place.line(command.line)
        if not run.spend(1 + len(command.words), line):
            raise Stop
        assignments, words = split_assignments(command)
        if not words:
            for name, append, value_word in assignments:
                self.assign_word(scope, name, append, value_word, line)
            self.write_files(command, [], scope, line)
            return
        name = words[0].literal()
        if name in ("export", "declare", "typeset", "local", "readonly"):
            self.declaration(name, words[1:], scope, line)
            return
        fields, env = self.expand(assignments, words, scope, line)
        self.dispatch(fields, env, command, scope, line)

    def expand(self, assignments: list[tuple[str, bool, Word]], words: Any, scope: Scope,
               line: int) -> tuple[list[str], dict[str, Arg]]:
        """A simple command's fields, and the environment its assignments give it."""
        expander = Expander(self.run, scope, line)
        fields = [f for w in words for f in expander.fields(w)]
        env = {n: Arg(self.value(scope, n, value_word, append), self.place.origin(line))
               for n, append, value_word in assignments}
        return fields, env

    def dispatch(self, fields: list[str], env: dict[str, Arg], command: Simple, scope: Scope, line: int) -> None:
        """A simple command's expanded words: a builtin that changes the
        script's variables, a call, a script run, or a vLLM launch."""
        if not fields:
            return
        run = self.run
        name = fields[0]
        args = fields[1:]
        if name == "exec":
            rest = args
            while rest and rest[0].startswith("-") and rest[0] != "--":
                rest = rest[2:] if rest[0] == "-a" else rest[1:]
            if rest and rest[0] == "--":
                rest = rest[1:]
            if rest:
                self.dispatch(rest, env, command, scope, line)
            return
        if name in ("unset",):
            for arg in args:
                if not arg.startswith("-") and NAME.fullmatch(arg):
                    scope.vars[arg] = UNSET
                elif has_unresolved(arg):
                    clobber(run, scope, f"may be unset at run time by `unset` at line {line}")
            return
        if name == "set":
            self.set_options(args, scope)
            return
        if name == "shift":
            params = scope.params()
            if params is not None:
                count = int(args[0]) if args and args[0].isdigit() else 1
                written = self.params_holder(scope).written  # (on this path: an `if`'s merge settles the rest)
                scope.positional, scope.written = params[count:], written[count:] if written is not None else None
            return
        if name == "read":
            self.runtime_names(scope, name_operands(args, "ad" "inNptu", "-a"), ["REPLY"], "read", line)
            return
        if name in ("mapfile", "readarray"):
            names = name_operands(args, "dnOsuCc", None)
            self.runtime_names(scope, names[-1:], ["MAPFILE"], name, line)
            return
        if name == "getopts":
            operands = [a for a in args if not a.startswith("-")]
            self.runtime_names(scope, operands[1:2] + ["OPTARG", "OPTIND"], [], "getopts", line)
            return
        if name == "printf" and args[:1] == ["-v"]:
            self.runtime_names(scope, args[1:2], [], "printf -v", line)
            return
        if name == "let":
            assigned = {n for arg in args for m in ARITH_ASSIGNED.finditer(arg) for n in m.groups() if n}
            runtime(run, scope, sorted(assigned), f"is set by `let` at line {line}")
            return
        if name in ("source", "."):
            self.source(args, scope, line)
            return
        if name == "eval":
            # A launch in the text is placed where the text was written: `CMD="vllm serve ..."; eval "$CMD"`.
            first = command.words[1].parts[0] if len(command.words) > 1 and command.words[1].parts else None
            at = (self.param_written(first, scope) or line) if isinstance(first, Param) and self.place.fixed is None \
                else line
            self.eval(" ".join(args), scope, line, at)
            return
        if name == "exit" or (name == "return" and scope.frame_scope() is not None):
            scope.terminated = True
            return
        run.change_folder(fields)
        self.note_pins(fields, line)
        self.write_files(command, fields, scope, line)
        if self.apply_manifest(fields, command, scope, line):
            return
        function = scope.function(name)
        if function is not None:
            # (where each argument's text was written: a variable's where it was set, else here; unknown where
            # words were split)
            written = [self.written_at(w, scope) or self.place.line(line) for w in command.words[1:]] \
                if len(command.words) == len(args) + 1 else None
            self.call(function, args, scope, line, written)
            return
        sweep = sweep_server(fields)
        if sweep is not None:
            self.sweep(sweep, env, scope, line, command)
            return
        if self.launch(fields, env, scope, line, command):
            return
        self.run_scripts(fields, command, scope, line)

    def sweep(self, sweep: Sweep, env: dict[str, Arg], scope: Scope, line: int, command: Simple) -> None:
        """`vllm bench sweep serve --serve-cmd CMD`: the server it starts, CMD's words as the launch, where the
        sweep runs; the combinations of `--serve-params FILE` each add options the audit does not read."""
        found = len(self.run.found)
        if sweep.server is None or not self.launch(sweep.server, env, scope, line, command):
            return
        if sweep.params is not None and len(self.run.found) > found:
            self.run.found[-1].problems.append(unread_params(self.run.ctx, sweep.params, line))

    def set_options(self, args: list[str], scope: Scope) -> None:
        options = [a for a in args if a[:1] in "-+" and a != "--"]
        for option in options:
            if option in ("-a", "+a") or ("a" in option[1:] and option[1:].isalpha()):
                scope.vars["-a"] = Var("1" if option[0] == "-" else "", False, self.run.next_epoch())
        for index, option in enumerate(args):
            if option in ("-o", "+o") and index + 1 < len(args) and args[index + 1] == "allexport":
                scope.vars["-a"] = Var("1" if option == "-o" else "", False, self.run.next_epoch())
        if "--" in args:
            scope.positional, scope.written = args[args.index("--") + 1:], None
        elif args and args[0][:1] not in "-+":
            scope.positional, scope.written = list(args), None

    def runtime_names(self, scope: Scope, names: list[str], default: list[str], builtin: str, line: int) -> None:
        if any(has_unresolved(n) or not NAME.fullmatch(n) for n in names):
            clobber(self.run, scope, f"may be set at run time by `{builtin}` at line {line}")
            return
        runtime(self.run, scope, names or default, f"is set at run time by `{builtin}` at line {line}")

    # files, scripts and calls
    def write_files(self, command: Simple, fields: list[str], scope: Scope, line: int) -> None:
        """`cat > FILE <<EOF`, `tee FILE <<EOF`, `echo TEXT > FILE`: the file's content, for a later
        `bash FILE` or `--config FILE`."""
        if self.run.capturing is not None:  # a launch read again for one path writes nothing new
            return
        targets = [r for r in command.redirects if r.op in (">", ">>", ">|") and r.fd in ("", "1") and r.target is not None]
        name = fields[0] if fields else ""
        content: str | None = None
        # Where its text starts: a here-document's lines, as for a command's standard input.
        start = self.stdin_script(command, "", self.place.line(command.line))
        paths: list[str] = []
        if name in ("cat", "tee") and all(not f.startswith("-") for f in fields[1:]):
            content = stdin_text(self.run, scope, command.redirects, line)
            if name == "tee":
                paths += fields[1:]
            elif len(fields) > 1:
                content = None  # cat of files: not known
        elif name == "echo" and fields[1:2] != ["-e"]:
            newline = fields[1:2] != ["-n"]
            content = " ".join(fields[2:] if not newline else fields[1:]) + ("\n" if newline else "")
        if content is None:
            return
        expander = Expander(self.run, scope, line)
        paths += [expander.word(r.target) for r in targets if r.target is not None]  # type: ignore[misc]
        for path in paths:
            # A path made of a value the file does not set (`"${NAME}.yaml"`) is kept by its text: the
            # same words later (`kubectl apply -f "${NAME}.yaml"`) name the same file.
            if not path:
                continue
            append = any(r.op == ">>" for r in targets)
            previous = self.run.file_at(path) if append else None
            text = (previous.text if previous else "") + content
            self.run.sequence += 1
            self.run.files.setdefault(normal_path(path), []).append(
                (self.run.sequence, Script(text, previous.line, False) if previous else start._replace(text=text)))

    def apply_manifest(self, fields: list[str], command: Simple, scope: Scope, line: int) -> bool:
        """`kubectl apply -f -` (or `create`, `replace`; `oc`) reading a
        here-document, its own or the one a `cat` pipes to it, or `-f FILE`
        of a file this script wrote: the manifest is kept for the manifest
        readers (sources/__init__.py). Whether the command is one."""
        target = applied_file(fields)
        if target is None:
            return False
        run = self.run
        if run.capturing is not None or not run.collect:  # a path read again, or a sourced file's
            return True
        if target == "-":
            stdin = stdin_text(run, scope, command.redirects, line)
            script = self.stdin_script(command, stdin, line) if stdin is not None else run.piped
        else:
            script = run.file_at(target)
        if script is not None:
            run.applied.append(script)
        return True

    def call(self, function: FunctionDef, args: list[str] | None, scope: Scope, line: int,
             written: list[int] | None = None) -> None:
        """A function run with ``args`` (None: arguments not known), each written at ``written``."""
        run = self.run
        run.call(function.name, line)
        if run.nesting >= MAX_NESTING:
            clobber(run, scope, f"may be set by `{function.name}`, called more than {MAX_NESTING} calls deep "
                     f"at line {line}")
            return
        run.called.add(id(function))
        frame = Scope(scope, frame=True, positional=list(args) if args is not None else None,
                      written=written if args is not None else None)
        collect = run.collect
        run.collect = collect and id(function) not in run.foreign
        run.nesting += 1
        try:
            self.run_command(function.body, frame)
        finally:
            run.nesting -= 1
            run.collect = collect
        # What the function set that was not local is the caller's now.
        for name, var in frame.vars.items():
            if name not in frame.locals:
                scope.vars[name] = var
        if frame.barrier is not None:
            scope.barrier = frame.barrier
        scope.funcs.update(frame.funcs)

    def source(self, args: list[str], scope: Scope, line: int) -> None:
        """`source FILE` / `. FILE`: a file this script wrote, or one the audit reads, is read in this
        shell; any other may set any variable."""
        path = args[0] if args else ""
        written = self.run.file_at(path) if path and not has_unresolved(path) else None
        if written is not None:
            self.nested_text(written, scope, line, positional=args[1:] or None, share=True)
            return
        text = self.disk_script(path)
        if text is not None and self.run.nesting < MAX_NESTING and path not in self.run.sourcing:
            # Read for the variables it sets; its own launches are reported with that file.
            saved_collect, saved_sourcing = self.run.collect, self.run.sourcing
            self.run.collect, self.run.sourcing = False, saved_sourcing + (path,)
            self.run.nesting += 1
            try:
                parsed = parse_body(text.replace("\x00", "\ufffd"))
                if isinstance(parsed, ShellSyntaxError):
                    clobber(self.run, scope, f"may be set by `source {path}` at line {line}, which cannot be read")
                else:
                    Interpreter(self.run, self.place.inner(line), self.image, self.container).run_list(parsed, scope)
            finally:
                self.run.nesting -= 1
                self.run.collect, self.run.sourcing = saved_collect, saved_sourcing
            return
        if venv_activation(args):
            runtime(self.run, scope, VENV_ACTIVATE_SETS, f"is set by `source {path}` at line {line}")
            return
        clobber(self.run, scope, f"may be set by `{'source'} {path or '...'}` at line {line}, a file the audit does not read")

    def disk_script(self, path: str) -> str | None:
        """A sourced file's text, when it lies inside the audited paths (never outside)."""
        ctx = self.run.ctx
        if not path or has_unresolved(path) or not ctx.fs:
            return None
        reader = config_from_fs(ctx, ctx.path.parent)
        try:
            return reader(path).text
        except InputError:  # refused (missing, outside the audited paths, too large): not read
            return None

    def eval(self, text: str, scope: Scope, line: int, at: int) -> None:
        if only_markers(text) or has_unresolved(text) and isinstance(parse_body(text, at), ShellSyntaxError):
            # (a text that reads as a script only with its unknown part known, `eval "$name=(a b)"`, where a
            # name makes an assignment of an array, is not a syntax error of the file)
            clobber(self.run, scope, f"may be set by `eval` of a text this file does not give (line {line})")
            return
        # An unknown part of the text is read as one word, as in any command line (`vllm serve $ARGS`).
        self.nested_text(Script(text, at, False), scope, at, share=True)

    def nested_text(self, script: Script, scope: Scope, line: int, *, positional: list[str] | None = None,
                    share: bool = False, fresh: bool = False, image: str | None = None, zero: str | None = None) -> None:
        """Run a text: in this shell (``share``: eval, source), or a new one
        that sees the exported variables (``fresh``: one that sees nothing,
        a remote shell; ``image``: a container's shell, of that image);
        ``zero``: its `$0` (`sh -c SCRIPT NAME ...`)."""
        run = self.run
        if run.nesting >= MAX_NESTING:
            if share:
                clobber(run, scope, f"may be set by a script nested more than {MAX_NESTING} deep (line {line})")
            return
        if not run.spend(len(script.text), line):
            raise Stop
        place = Place(self.place.origin, self.place.anchor) if script.in_file and self.place.fixed is None \
            else self.place.inner(line)
        parsed = parse_body(script.text, script.line)
        if isinstance(parsed, ShellSyntaxError):
            run.problems.append(run.ctx.problem("source.shell_syntax", f"cannot read the script run at line {line}: "
                                                f"{parsed.message}", line=place.line(parsed.line)))
            if share:
                clobber(run, scope, f"may be set by a script that cannot be read (line {line})")
            return
        if share:
            target = scope
        elif fresh:
            target = Scope(None, positional=positional or [])
        else:
            target = Scope(scope, view=True, positional=positional or [])
        if zero is not None and not share:
            target.vars["0"] = Var(zero, False, 0)
        run.nesting += 1
        try:
            if image is not None:  # a new container's shell
                run.containers += 1
                interpreter = Interpreter(run, place, image, run.containers)
            else:
                interpreter = Interpreter(run, place, self.image, self.container)
            interpreter.run_list(parsed, target)
        finally:
            run.nesting -= 1
        if share:
            scope.terminated = False

    def run_scripts(self, fields: list[str], command: Simple, scope: Scope, line: int) -> None:
        """`bash -c SCRIPT`, `bash FILE` (a file this script wrote), `bash <<EOF`, `./FILE`, `ssh host CMD`."""
        nested = nested_script(fields)
        if nested is not None:
            script, rest = nested
            # `docker run ... IMAGE bash -c SCRIPT` (`srun --container-image=IMAGE bash -c SCRIPT`):
            # the script runs in a container of that image.
            docker = docker_run(fields)
            start = len(fields) - len(rest) - 1
            image = docker.image if docker is not None and start >= docker.start else \
                srun_image(fields, start) or apptainer_image(fields, start)
            self.nested_text(Script(script, command.word_line(fields, start, line), False), scope, line,
                             positional=rest[1:], image=image, zero=rest[0] if rest else None)
            return
        for index, word in enumerate(fields):
            base = word.rsplit("/", 1)[-1]
            if base in SHELLS:
                operands = [f for f in fields[index + 1:] if not f.startswith("-")]
                if operands:
                    # (a path with a value not known names the file written at the same words: `$D/run.sh`)
                    written = self.run.file_at(operands[0]) or self.run.mounted_file(operands[0], line)
                    if written is not None:
                        self.nested_text(written, scope, line, positional=operands[1:])
                    return
                stdin = stdin_text(self.run, scope, command.redirects, line)
                if stdin is not None:
                    self.nested_text(self.stdin_script(command, stdin, line), scope, line, positional=[])
                elif self.run.piped is not None:  # `cat <<EOF | bash`
                    self.nested_text(self.run.piped, scope, line, positional=[])
                return
            written = self.run.file_at(word) if "/" in word or index == 0 else None
            if written is None and index == 0 and "/" in word:  # (`./prefill.sh`: a file of the container's)
                written = self.run.mounted_file(word, line)
            if written is not None and index == 0:
                self.nested_text(written, scope, line, positional=fields[1:])
                return
            if base == "ssh":  # (`gcloud compute ssh VM --command=CMD`: gcloud's own options, CMD the remote command)
                remote = ssh_command(fields[index + 1:]) if fields[0].rsplit("/", 1)[-1] != "gcloud" else \
                    [w.partition("=")[2] for w in fields[index + 1:] if w.startswith("--command=")][-1:]
                stdin = stdin_text(self.run, scope, command.redirects, line)
                if stdin is not None and reads_stdin(remote):
                    self.nested_text(self.stdin_script(command, stdin, line), scope, line, fresh=True)
                elif remote:
                    self.nested_text(Script(" ".join(remote), line, False), scope, line, fresh=True)
                return

    def paths(self, command: Simple, scope: Scope, line: int, argv: list[str],
              env: Mapping[str, Arg]) -> tuple[tuple[Any, ...], frozenset[str]]:
        """A launch whose words (``argv``, ``env``'s values) read values that the ends of `if`s or `case`s made
        unknown, still as they left them: read again once per path, each variable set as that path sets it;
        through several such merges, once per combination of their paths (of those the decision reads, beyond
        MAX_BRANCHES), at most MAX_BRANCHES in all. (Which path, the words, the environment) for each; none where
        a path's reading is not one launch of the same program, nor beyond the bound. Where they are not read
        (beyond it, or another shell's merges, which a container's `-c` script reads but cannot set), the
        markers of the values a path sets to what the decision reads."""
        chosen = self.run.readings(argv, {name: arg.text for name, arg in env.items()}, scope)
        if not isinstance(chosen, Readings):
            return (), chosen
        read, direct, nested, unread, markers, merges, kept, inner, combinations = chosen
        count = len(combinations)  # (the merges whose paths a reading tells apart: one read on its first path alone, none)
        through = " and ".join(b.where for i, b in enumerate(merges) if len({c[i] for c in combinations}) > 1)
        written = {marker for marker in markers if any(marker in (word.literal() or "") for word in command.words)}
        assignments, words = split_assignments(command)
        program = self.expand([], words[:1], scope, line)[0][:1]  # (a first word "${CMD[@]}" is many fields)
        origin = self.place.origin(line)
        problems = len(self.run.problems)
        out = []
        for index, combination in enumerate(combinations):
            path = Scope(scope)
            for branches, variables, taken, within in zip(merges, kept, combination, inner):
                for name, var in variables.items():
                    if not within:
                        path.vars[name] = branches.values[name][taken]._replace(
                            exported=var.exported, epoch=self.run.next_epoch(), line=var.line)
            for branches, taken, within in zip(merges, combination, inner):
                if within and not branches.fill_in(path, taken):
                    return (), unread
            fields, env = self.expand(assignments, words, path, line)
            if fields[:len(program)] != program:  # another program on this path: not the same launch
                return (), frozenset()
            captured: list[tuple[list[str], dict[str, Arg]]] = []
            self.run.capturing = captured
            try:
                self.dispatch(fields, env, command, path, line)
            finally:
                self.run.capturing = None
                del self.run.problems[problems:]  # said once, by the reading of the script itself
            if len(captured) != 1:
                return (), frozenset()
            # A copy made after the merge (`KV="$A"`) still holds the marker: the path's text in its place,
            # where that reads alike quoted or not; else the words are not the variables' here (an `eval`'s text).
            on_path = {m: read[m].path_text(m, combination[merges.index(read[m])], scope) for m in markers}
            # (a marker in the command's own text, an `eval` of the merged value: the shell reads a path's
            # text there anew, and a quote in it, `'{"kv_role":"kv_producer"}'`, is none of the word's)
            quoted = any(c in "'\"\\" for marker in written for c in "".join(on_path[marker] or ""))
            placed = None if quoted else in_place(*captured[0], on_path)
            if placed is None:  # (an `eval`'s text, whose words the path's text would make anew)
                return (), nested | frozenset(marker for marker in direct if read[marker].adds_deciding(marker, scope))
            argv, env = placed
            out.append((f"path {index + 1} of {count} through {through}", [Arg(a, origin) for a in argv], env))
        # (the markers of merges read on their first path alone: set on more paths than are read)
        return tuple(out), frozenset(m for m in markers if len({c[merges.index(read[m])] for c in combinations}) == 1)

    def note_pins(self, fields: list[str], line: int) -> None:
        """`pip install vllm==X.Y.Z` (also pip3, python -m pip, uv pip), or a
        build and install of vLLM's source tree the script cloned (`git clone
        -b v0.8.3 https://github.com/vllm-project/vllm` ... `python setup.py
        install`): the release the launches after it run."""
        if self.run.capturing is not None:
            return
        git = git_source(fields)
        source = self.run.source
        if fields[:1] == ["cd"] and source is not None:  # into the clone, or out of it (vllm-gaudi's plugin)
            self.run.source = source._replace(away=not same_folder(fields[1] if len(fields) > 1 else "~", source.folder))
            return
        if git is not None:
            kind, ref, folder = git
            if kind == "clone":
                self.run.source = Source(ref, folder, line)
            elif kind == "other":
                self.run.source = None  # the tree built next is that one
            elif source is not None and not source.away:
                self.run.source = source._replace(ref=ref)
            return
        if source is not None and installs_source(fields, source.folder, here=not source.away):
            self.pin(from_source(source.ref, source.line))
            return
        if "install" not in fields or not any(f.rsplit("/", 1)[-1] in ("pip", "pip3", "uv") or f == "pip" for f in fields):
            return
        for word in fields[fields.index("install") + 1:]:
            hint = installed(word, fields, line)
            if hint is not None:
                self.pin(hint)

    def pin(self, hint: ReleaseHint) -> None:
        """A release the script installs here, in the container it runs in."""
        self.run.sequence += 1
        self.run.pins.append(Pin(hint, self.run.sequence, self.container))

    def launch(self, fields: list[str], env: dict[str, Arg], scope: Scope, line: int, command: Simple) -> bool:
        """A vLLM launch: `vllm serve`, the api_server module, or `docker run` of a vLLM image."""
        run = self.run
        if fields[0].rsplit("/", 1)[-1] in NOT_RUNNING:
            return False
        located = find_vllm(fields)
        docker = docker_run(fields)
        image = self.image
        presumed = None  # the image taken to run vLLM's server from its name and arguments
        # `python3 -m "$MODULE"`, the module set by an `if`: a launch only where each path runs vLLM's.
        module_at = unknown_module(fields) if located is None and docker is None and run.capturing is None else None
        if module_at is not None:
            located = (module_at + 1, False)
        if located is not None:
            argv = fields
            if docker is not None and located[0] > docker.start:
                image = docker.image  # `docker run IMAGE vllm serve ...`: the command runs in the image
            else:
                docker = None
                image = srun_image(fields, located[0]) or apptainer_image(fields, located[0]) or image
        elif docker is None:
            return False
        elif docker.entrypoint is not None:
            # The image's entrypoint replaced: `--entrypoint vllm IMAGE serve ...`, or a shell's `-c`.
            argv = [docker.entrypoint] + fields[docker.start:]
            located = find_vllm(argv)
            if located is None:
                nested = nested_script(argv)
                if nested is not None:
                    at = command.word_line(fields, docker.start + len(argv) - len(nested[1]) - 2, line)
                    self.nested_text(Script(nested[0], at, False), scope, line, positional=nested[1][1:],
                                     image=docker.image, zero=nested[1][0] if nested[1] else None)
                return nested is not None
            image = docker.image
        elif VLLM_IMAGE.search(docker.image) or presumed_server(docker.image, fields[docker.start:]):
            argv = ["vllm", "serve"] + fields[docker.start:]
            image = docker.image
            presumed = None if VLLM_IMAGE.search(docker.image) else docker.image
            if fields[docker.start:docker.start + 1] == ["serve"]:
                run.problems.append(run.ctx.problem("source.serve_twice", "the vllm/vllm-openai image already runs "
                                                    "`vllm serve`; `serve` in its arguments is taken as the model",
                                                    line=line))
        else:
            return False
        origin = self.place.origin(line)
        # The exported variables the decision reads, and those that name a platform (vllm-spyre's, Neuron's, the
        # plugins vLLM loads).
        launch_env = {name: Arg(var.value, origin)
                      for name in (*ENV_NAMES, PLUGINS, *(name for prefix, _ in PLATFORM_ENV for name in scope.named(prefix)))
                      if (var := scope.lookup(name)) is not None and var.exported and var.value is not None}
        launch_env.update(env)
        if docker is not None:
            for name, value in docker.env.items():
                launch_env[name] = Arg(value if value is not None else unresolved("$" + name), origin)
        else:
            assert located is not None  # without a `docker run`, find_vllm located the launch (or it returned above)
            for word in fields[:located[0]]:  # `env NAME=value vllm serve`
                match = ASSIGNMENT.match(word)
                if match and not match.group(2):
                    launch_env[match.group(1)] = Arg(word[match.end():], origin)
        if not run.collect:
            return True
        if run.capturing is not None:  # read again for one path (paths())
            run.capturing.append((argv, launch_env))
            return True
        paths, unread_paths = self.paths(command, scope, line, argv, launch_env)
        if module_at is not None and not paths:
            return False
        # A pin in the container shell the launch runs in installs its release over the image's.
        pinned = [pin.hint for pin in run.pins if pin.container == self.container] \
            if self.container and image == self.image else []
        inv = Invocation([Arg(a, origin) for a in argv], line, launch_env, self.place.anchor(line),
                         sequence=run.sequence, image=image, paths=paths, unread_paths=unread_paths,
                         release=pinned[-1] if pinned else None)
        if presumed is not None:
            inv.notes.append(presumed_note(run.ctx, presumed, line))
        if docker is not None:
            inv.platform = platform_of_runtime(docker.runtime, "docker run --runtime")
        for name, raw, default in scope.unset_defaults(command):
            inv.notes.append(run.ctx.problem(
                "source.unresolved_arguments", f"the command also takes `{raw}`, which this file does not set: its "
                f"default ({f'`{default}`' if default else 'nothing'}) is read, and where the environment sets `{name}` "
                "it may hold other options", line=line))
        run.found.append(inv)
        if len(run.found) > run.ctx.limits.max_commands:
            run.limit("commands", f"more than {run.ctx.limits.max_commands} vLLM commands", line)
            raise Stop
        return True
