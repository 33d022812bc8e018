"""Shell scripts: each ``vllm serve``, ``python -m
vllm.entrypoints.openai.api_server`` or ``docker run vllm/vllm-openai``
command, after expanding the variables the script itself sets.

Nothing is executed. The script is parsed (shell_syntax.py) and read as the
shell would run it, as far as the text tells: variables the script sets and
exports, ``${VAR:-default}``, functions (called with their arguments),
``eval`` and ``exec``, ``sh -c`` and scripts the file itself writes with a
here-document (``cat > run.sh <<EOF``, then ``bash run.sh``), a
``--config`` file written the same way. What the text cannot tell stays
unknown and is carried as an unresolved marker
(:func:`hma_policy.core.markers.unresolved`): ``$1``, ``$(...)``, a
variable never set, and a variable any command may set at run time
(``read``, ``mapfile``, ``getopts``, ``printf -v``, a computed
``declare``/``export``, ``source`` of a file not audited, ``eval`` of an
unknown text): after such a command those variables are unknown.
Subshells, pipelines and background commands (``&``) do not change the
script's variables; after ``if``/``case``/loops a variable set differently
on the paths through them is unknown; ``&&`` and ``||`` are read in order.

Reading is linear in the text: the parser reads each character a bounded
number of times, each value is bounded (``SourceLimits.max_variable_length``)
and all expansion, ``eval`` and function calls share a budget proportional
to the text; where a bound is hit, a ``source.limit`` problem names the line.

The stages, one module each: parsing (shell_tree.py, shell_words.py,
shell_syntax.py), what a reading knows (shell_state.py), expansion
(shell_expand.py), lists and compound commands (shell_flow.py), simple
commands and launches (shell_run.py, with shell_commands.py recognising
commands by their words). This module holds the entry points.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from ...core.markers import outside
from ...core.options import Arg, ConfigFile, find_vllm
from ...core.errors import InputError, Problem
from .context import Ctx
from .deployment import Deployment
from .detect import SHELLS, interpreter, mentions_vllm
from .launch import Invocation, apply_facts, config_from_fs, deployment, refuse
from .release import ReleaseHint, from_image
from .shell_commands import batch_image, nested_script, sweep_server, unread_params
from .shell_run import Interpreter
from .shell_state import BUDGET_FACTOR, Place, Run, Scope, Script, Stop, Var, written_at
from .shell_syntax import parse_script
from .shell_tree import ShellSyntaxError

__all__ = ["shell_file", "argv_invocations", "run_script", "written_files"]


def run_script(text: str, ctx: Ctx, *, env: dict[str, Arg], first_line: int, origin: Callable[[int], str],
               anchor: Callable[[int], str], problems: list[Problem], fixed: bool = False,
               positional: list[str] | None = None, image: str | None = None,
               zero: str | None = None, mounted: Callable[[str], ConfigFile] | None = None,
               text_line: int | None = None) -> tuple[list[Invocation], Run]:
    """The vLLM launches of a script, in order. ``env``: the variables it
    starts with (exported); ``image``: the container image it runs in (an
    sbatch directive's); ``fixed``: the text is not the file's own (a
    container's `sh -c` string), and every launch is at ``first_line``;
    ``mounted``: the reader of the files of the container it runs in;
    ``text_line``: the file's line of a ``fixed`` text's first line, where the
    reader knows it (a container's `sh -c` script, which its messages count
    lines from)."""
    run = Run(ctx, problems, BUDGET_FACTOR * len(text) + 128 * ctx.limits.max_variable_length, mounted=mounted)
    base = Scope(None, positional=positional)
    for name, value in env.items():
        base.vars[name] = Var(value.text, True, 0)
    if zero is not None:  # `sh -c SCRIPT NAME ...`: `$0` is NAME
        base.vars["0"] = Var(zero, False, 0)
    scope = Scope(base)
    place = Place(origin, anchor, first_line if fixed else None, fixed and text_line is not None)
    if image is not None:  # the script runs in a container of its own
        run.containers += 1
    interpreter = Interpreter(run, place, image, run.containers)
    # Markers are the readers' own: a file's NUL is none. A container's script (``fixed``)
    # keeps those its reader made (a Helm template's `{{ .Values.model }}`), which the
    # lexer reads as one word each.
    text = outside(text, _no_nul) if fixed else _no_nul(text)
    try:
        for item in parse_script(text, text_line or first_line):
            if isinstance(item, ShellSyntaxError):
                if run.syntax_errors < 20:
                    problems.append(ctx.problem("source.shell_syntax", f"cannot read the script: {item.message}",
                                                line=place.line(item.line)))
                run.syntax_errors += 1
                continue
            interpreter.run_and_or(item, scope)
            if scope.terminated:
                break
        # A function the script never calls by name (one called as "$1", or kept for later) is read
        # once, at the end, with its arguments unknown: its launches are not missed.
        for function, at in run.defined:
            if id(function) not in run.called and id(function) not in run.foreign:
                Interpreter(run, at).call(function, None, Scope(scope), function.line)
    except Stop:
        pass
    return run.found, run


def written_files(argv: list[str], ctx: Ctx, line: int) -> dict[str, str]:
    """The files a container's `sh -c SCRIPT` writes (`cat > /scripts/run.sh
    <<EOF`), by path, as the script leaves them: an init container's, which a
    container of the pod runs from a volume both mount. Its launches are
    not read (it runs to completion before the pod's containers start)."""
    nested = nested_script(argv) if argv and argv[0].rsplit("/", 1)[-1] in SHELLS else None
    if nested is None:
        return {}
    _, run = run_script(nested[0], ctx, env={}, first_line=line, origin=lambda _l: "", anchor=lambda _l: "",
                        problems=[], fixed=True, positional=nested[1][1:])
    return {path: script.text for path in run.files if (script := written_at(run.files, path, None)) is not None}


def argv_invocations(argv: list[str], ctx: Ctx, *, env: dict[str, Arg], line: int | None, origin: str,
                     anchor: str, problems: list[Problem],
                     read_file: Callable[[str], ConfigFile] | None = None,
                     word_line: Callable[[int], int | None] | None = None, run_files: bool = False) -> list[Invocation]:
    """The vLLM command of a container's argv: directly, inside `sh -c SCRIPT`,
    or in a script file the container runs (`bash /scripts/start.sh`) that
    ``read_file`` finds (a ConfigMap, a file the Dockerfile makes); ``run_files``:
    also one it runs itself (`/scripts/start.sh`), where the reader's files
    are read nowhere else (a pod's ConfigMap keys and init containers' files;
    a script a Dockerfile copies is read as a file of its own).
    ``word_line``: the file's line of the text of an argv word, by its index."""
    shell = bool(argv) and argv[0].rsplit("/", 1)[-1] in SHELLS
    nested = nested_script(argv) if shell else None
    # (where the `-c` script's text starts in the file: its word's line; a file it runs has its own lines)
    text_line = word_line(len(argv) - len(nested[1]) - 1) if nested is not None and word_line is not None else None
    if nested is None and shell and read_file is not None:
        operands = [a for a in argv[1:] if not a.startswith("-")]
        try:
            nested = (read_file(operands[0]).text, [operands[0]] + operands[1:]) if operands else None
        except InputError:  # not a file the audit can read: not a launch it can see
            nested = None
    elif nested is None and run_files and read_file is not None and argv[:1] and argv[0].startswith("/") \
            and find_vllm(argv) is None:
        try:  # a script the container runs itself (`command: ["/scripts/entrypoint.sh"]`), where its shebang names a shell
            text = read_file(argv[0]).text
        except InputError:
            text = ""
        if interpreter(text) in SHELLS:
            nested = (text, argv)
    if nested is not None:
        script, rest = nested
        own: list[Problem] = []
        found, run = run_script(script, ctx, env=env, first_line=line or 1, origin=lambda _l: origin,
                                anchor=lambda _l: anchor, problems=own, fixed=True, positional=rest[1:],
                                zero=rest[0] if rest else None, mounted=read_file, text_line=text_line)
        # A script the reader cannot parse that never mentions vLLM (a benchmark pod's `export
        # HF_TOKEN=<YOUR_TOKEN_HERE>`) starts none: its syntax is no problem of the audit's, as
        # for a script file (sources/__init__.py).
        if found or any(p.code != "source.shell_syntax" for p in own) or mentions_vllm(script) \
                or any(mentions_vllm(value.text) for value in env.values()):
            problems.extend(own)
        ctx.applied.extend(run.applied)
        for inv in found:  # `pip install vllm==X && vllm serve`: the release installed over the image
            inv.release = release_at(run, inv)
        return found
    sweep = sweep_server(argv)
    if sweep is not None:  # the server `vllm bench sweep serve --serve-cmd CMD` starts (shell_commands.Sweep)
        argv = sweep.server or []
    located = find_vllm(argv)
    if located is None:
        return []
    inv = Invocation([Arg(a, origin) for a in argv], line, dict(env), anchor)
    if sweep is not None and sweep.params is not None:
        inv.problems.append(unread_params(ctx, sweep.params, line))
    return [inv]


def _no_nul(text: str) -> str:
    """A NUL the file wrote itself (a ``\\0`` escape in a YAML string: args no
    container can be started with) is no marker; one that pairs with a
    marker's text is read as a value not known, never run."""
    return text.replace("\x00", "\ufffd")


def shell_file(ctx: Ctx, built: Callable[[], ReleaseHint | None] = lambda: None
               ) -> tuple[list[Deployment], list[Problem], list[Script]]:
    """A script's launches, its problems, and the manifests it applies
    (``kubectl apply -f``), which the manifest readers read (sources/__init__.py).
    ``built``: the release of an image a Dockerfile copies the script into
    (copied.py, which reads Dockerfiles through the Dockerfile reader, which
    reads shell: so it is handed in), for launches the script names none for."""
    problems: list[Problem] = []
    base = ctx.path.parent
    invocations, run = run_script(ctx.text, ctx, env={}, first_line=1, origin=lambda line: f"line {line}",
                                  anchor=lambda line: f":{line}", problems=problems, image=batch_image(ctx.text))
    built = cache(built)  # (read once, where a launch needs it)
    for inv in invocations:
        inv.config_reader = written_or_disk(run, inv.sequence, config_from_fs(ctx, base))
        inv.release = release_at(run, inv)
        if inv.release is None and inv.image is None:
            inv.release = built()
    apply_facts(invocations, ctx)
    return [deployment(inv, ctx, "shell") for inv in invocations], problems, run.applied


def release_at(run: Run, inv: Invocation) -> ReleaseHint | None:
    """A launch's release: a pin in the container shell it runs in (found
    with the launch), else its container image's (`docker run`), else the
    last pin the script itself ran before it."""
    if inv.release is not None:
        return inv.release
    if inv.image is not None:
        return from_image(inv.image)
    pins = [pin.hint for pin in run.pins if pin.container == 0 and (inv.sequence is None or pin.sequence <= inv.sequence)]
    return pins[-1] if pins else None


def written_or_disk(run: Run, sequence: int | None, disk: Callable[[str], ConfigFile]) -> Callable[[str], ConfigFile]:
    """A `--config` reader: a file the script wrote before the launch, else the file on disk."""
    files, ctx = run.files, run.ctx  # not the run itself: it holds the launches, which hold this reader

    def read(name: str) -> ConfigFile:
        written = written_at(files, name, sequence)
        if written is not None:
            if len(written.text.encode("utf-8", "surrogatepass")) > ctx.limits.max_config_bytes:
                raise refuse(ctx.problem("input.limit", f"`{name}` is larger than {ctx.limits.max_config_bytes} bytes"))
            return ConfigFile(written.text, f"{name} (written at line {written.line})")
        return disk(name)
    return read
