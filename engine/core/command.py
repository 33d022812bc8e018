"""A vLLM command line, read as vLLM reads it, into a deployment document.

:func:`read_command` takes the words of a command that starts vLLM's
OpenAI server (``vllm serve MODEL ...`` or ``python -m
vllm.entrypoints.openai.api_server ...``) and returns the deployment
document the decision reads, with the problems that stop it (vLLM would
refuse the command, or a value is not known) and notes that do not.

vLLM's own argument handling (``--config``, ``_`` in option names, dotted
options, argparse) is reproduced in vllm_args.py, the option vocabulary is
in options.py and unresolved markers in markers.py.

A word may carry where it came from (an :class:`Arg`), which the document's
``origins`` then name. A value the caller could not know (a shell variable
set elsewhere) is written into a word as an *unresolved marker*
(:func:`unresolved`): an option whose value holds one is reported, not
decided.

:func:`command_document` reads a command a launcher holds (a list of
words, or one shell string), and reads its ``--config`` file from disk. The
names this module has always offered (:class:`Arg`, :func:`unresolved`,
...) are handed on from options.py and markers.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

from .dynamo_args import DYNAMO_MODULES, dynamo_vllm_argv
from .errors import InputError, Problem
from .facts import ENV_READ
from .json_unknowns import Unread, unread_json
from .markers import UNRESOLVED, has_unresolved, references, show, unresolved, unresolved_names
from .optionlist import refused_options
from .options import (DECISION_OPTIONS, DEFAULT_OPTIONS, DEMO_SERVER_LAST, DEMO_SERVER_MODULE, ENV_NAMES, TAGLESS_MODULES,
                      VALUE_OPTIONS, Arg, ConfigFile, VllmOptions, find_vllm, unknown_module)
from .schema import pointer
from .vllm_args import Reading, extra_words, number_value, read_options, vllm_tokens
from ..fileio import open_regular

__all__ = ["Arg", "ConfigFile", "CommandResult", "StandIn", "VllmOptions", "DEFAULT_OPTIONS", "read_command", "find_vllm",
           "unresolved", "has_unresolved", "show", "ENV_NAMES", "DECISION_OPTIONS", "command_document",
           "command_result", "decided", "refused_whatever", "as_release_reads"]


@dataclass(frozen=True)
class CommandResult:
    """What a command line says: the deployment ``document`` (None when
    ``problems`` stop it), ``model`` (vLLM's model argument, when known),
    located ``problems`` (the deployment is an input error) and ``notes``
    (things a reader should know that do not stop the decision), and
    ``origins``: each document field and where its value came from."""

    document: dict[str, Any] | None
    model: Arg | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[Problem, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()
    configs: tuple[str, ...] = ()   # the --config file read, as read_config named it
    stand_in: StandIn | None = None  # when the only problems are values read for their type alone
    # The long options given that the decision does not read, where they came
    # from (for checking against the release that runs the command, once it is
    # known); none for Dynamo's launcher, which also takes options of its own.
    unchecked: tuple[Arg, ...] = ()


_T = TypeVar("_T")


class StandIn(NamedTuple):
    """A command whose only problems are unknown values that vLLM reads for
    their type alone (``"kv_port": "$PORT"``: any number will do), or that
    are facts the rules read as written (``facts``, :data:`.facts.READ_AT`:
    a speculative method): the document with a value standing in for each,
    and where each stands. When vLLM refuses that document for another of
    its values, it refuses the command whatever the unknown ones are: that
    refusal is the answer (:func:`refused_whatever`), not the unknown values.
    The audit also takes the decision of that document (audit.unknowns)."""

    document: dict[str, Any]
    paths: tuple[str, ...]  # JSON Pointers into the document
    facts: tuple[tuple[str, str], ...] = ()  # of ``paths``, those that are a fact as written: (pointer, fact)


def refused_whatever(problems: Sequence[Problem], stand_in: StandIn) -> bool:
    """Whether ``problems``, the refusal of ``stand_in``'s document, hold
    whatever its unknown values are: there is one, and none is at one of
    them (a refused stand-in says nothing of the value it stands for)."""
    return bool(problems) and not any(problem.path == path or problem.path.startswith(path + "/")
                                      for problem in problems for path in stand_in.paths)


def decided(result: CommandResult, decide: Callable[[dict[str, Any]], _T]) -> _T:
    """``decide(result.document)``; for a command with problems, the refusal
    its stand-in shows whatever the unknown values are (an InputError), else
    an InputError of its problems."""
    if not result.problems:
        assert result.document is not None
        return decide(result.document)
    if result.stand_in is not None:
        try:
            decide(result.stand_in.document)
        except InputError as exc:
            if refused_whatever(exc.problems, result.stand_in):
                raise
    raise InputError(list(result.problems))


def as_release_reads(result: CommandResult, release: str | None) -> CommandResult:
    """The command as vLLM ``release`` reads it, where the caller names the
    release (None: not named, so not checked): an option that release's
    argparse refuses (optionlist.refused_options) is a problem of the command."""
    problems = refused_options(release, [arg.text for arg in result.unchecked]) if release is not None else ()
    return replace(result, document=None, problems=result.problems + problems, stand_in=None) if problems else result


# -- reading a command --------------------------------------------------------------------

def read_command(argv: Sequence[str | Arg], *, env: Mapping[str, str | Arg] | None = None,
                 read_config: Callable[[str], str | ConfigFile] | None = None,
                 options: VllmOptions | None = None, file: str | None = None, line: int | None = None,
                 require_model: bool = True, per_path: frozenset[str] = frozenset(),
                 dynamo: str | None = None) -> CommandResult:
    """The deployment document of a vLLM server command line. Never raises
    for any argv.

    ``argv``: the command's words, from the program on (``["vllm", "serve",
    "Qwen/Qwen3-8B", "--kv-transfer-config", "{...}"]``, ``["python3", "-m",
    "vllm.entrypoints.openai.api_server", ...]``, vLLM's gRPC server module,
    or Dynamo's ``python3 -m dynamo.vllm``, read as the command line it hands
    vLLM: dynamo_args.py); a word may be an
    :class:`Arg` that says where it came from. ``env``: the environment the
    command runs with; only the variables the decision reads are copied into
    the document. ``read_config(name)``: the text of the ``--config`` file
    ``name`` (or a :class:`ConfigFile`); it raises :class:`InputError` to
    refuse it (missing, outside where it may be read), and when it is None
    no config file can be read. ``options``: the option strings of the vLLM
    release (default: 0.33.0's, as far as the decision needs them).
    ``file`` and ``line`` locate the problems. ``require_model=False``: a
    command without a model is not refused (a config file read alone).
    ``per_path``: the unknown values (their markers) that the caller reads
    again on each path of a script that sets them differently (the audit's
    readers), so that a word made of such a value, which may hold options,
    is a ``source.unresolved`` problem the paths settle, not a note. A word
    from a value no path sets stays a note. ``dynamo``: the Dynamo release
    that runs a ``python3 -m dynamo.vllm`` command (what its launcher adds
    differs between releases), where known.
    """
    reading = Reading(file, line, options or DEFAULT_OPTIONS, read_config, require_model, per_path)
    words = [w if isinstance(w, Arg) else Arg(w) for w in argv]
    located = find_vllm([w.text for w in words])
    if located is None and (at := unknown_module([w.text for w in words])) is not None:
        # Read on each path that sets it, where the audit's reader found vLLM's on every one.
        reading.fail("source.unresolved", f"the module `-m` runs is {references(words[at].text, whole=True)}")
        return CommandResult(None, None, tuple(reading.problems))
    if located is None:
        reading.fail("source.not_vllm", "the command does not start vLLM's server: expected `vllm serve ...` or "
                     "`python -m vllm.entrypoints.openai.api_server ...`")
        return CommandResult(None, None, tuple(reading.problems))
    start, serve = located
    if not serve and words[start - 1].text in DYNAMO_MODULES:
        # Dynamo's launcher hands vLLM a --kv-transfer-config made of its own
        # --connector: vLLM's command line is that one. Its words take the launcher's origin.
        origin = words[start - 1].origin
        launcher = dynamo_vllm_argv([w.text for w in words[start:]], dynamo)
        for note in launcher.notes:
            reading.note("source.deployer_default", note)
        if launcher.refused is not None:
            reading.fail("source.deployer_refuses", launcher.refused)
        words = [Arg(word, origin) for word in launcher.argv]
        return replace(_read(reading, words[1:], True, env or {}), unchecked=())
    module = words[start - 1].text if not serve else None
    if module == DEMO_SERVER_MODULE:
        reading.note("source.demo_server", f"`{module}` is vLLM's demo server, with the engine's options: releases "
                     f"up to {DEMO_SERVER_LAST} ship it, later ones do not, and there the launch does not start",
                     hint="run `vllm serve` (the OpenAI server) instead")
    return _read(reading, words[start:], serve, env or {}, model_tag=module not in TAGLESS_MODULES)


def _read(reading: Reading, args: list[Arg], serve: bool, env: Mapping[str, str | Arg], *,
          model_tag: bool = True) -> CommandResult:
    tokens, model, positional = vllm_tokens(reading, args, serve)
    found, loose, words, unchecked, after_boolean = read_options(reading, tokens)
    extra_words(reading, words if positional or not serve else words[1:], serve, after_boolean, model_tag=model_tag)
    if serve and not positional and words:  # argparse's model_tag, wherever it stands (it wins over a config file's --model)
        model = words[0]
    document: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if model is None and "model" in found:  # `--model` from a config file, or for the api_server entry point
        value, origin, _ = found["model"]
        model = Arg(value, origin)
    # The document with stand-ins for the values read for their type alone (StandIn).
    standing: dict[str, Any] = {}
    stood: list[str] = []
    stood_facts: list[tuple[str, str]] = []
    covered = 0  # the problems a stand-in answers
    for field_name, (value, origin, option) in found.items():
        if field_name == "model":
            continue
        if isinstance(value, str) and has_unresolved(value):
            unread = unread_json(field_name, value) if VALUE_OPTIONS[option][1] == "json" else None
            read = unread.read if isinstance(unread, Unread) else unread
            if unread is None or read is not None:
                # Where in a JSON value the decision reads the unknown one, when it is inside.
                inner = read if read is not None and read.at else None
                at = f" at `{inner.at}`" if inner is not None else ""
                held = inner.text if inner is not None else value
                reading.fail("source.unresolved", f"`{option}` takes its value{at} from {references(held)}",
                             path=pointer([field_name]),
                             hint="give its value in `env`, or write it in the command" if reading.file is None
                             else "the audit reads files and never runs them; write the value in the file")
                if isinstance(unread, Unread):  # read for their type alone, or as facts: a stand-in for each
                    standing[field_name] = unread.shown
                    stood += dict.fromkeys(pointer([field_name]) + stand.at for stand in unread.stood)
                    stood_facts += [(pointer([field_name]) + stand.at + stand.inside, stand.fact)
                                    for stand in unread.stood if stand.fact]
                    covered += 1
                    _unread_note(reading, option, field_name, unread)
                continue
            assert isinstance(unread, Unread)
            value = unread.shown
            _unread_note(reading, option, field_name, unread)
        if field_name == "kv_offloading_size":
            value = number_value(value)
        document[field_name] = standing[field_name] = value
        origins[field_name] = f"{origin}: {option}"
    if model is not None and has_unresolved(model.text):
        reading.note("source.unresolved_unused", f"the model is {references(model.text, whole=True)}; "
                     "the decision does not read the model's name")
    elif model is not None:
        document["model"] = standing["model"] = {"name": model.text}
        origins["model"] = model.origin
    _loose_notes(reading, loose)
    command_env: dict[str, Any] = {}
    stood_env: dict[str, str] = {}
    for name, item in sorted(env.items()):
        if name not in ENV_NAMES:
            continue
        value, origin = (item.text, item.origin) if isinstance(item, Arg) else (item, "environment")
        if has_unresolved(value):
            reading.fail("source.unresolved", f"the environment variable `{name}` takes its value from "
                         f"{references(value, whole=True)}", path=pointer(["env", name]))
            if name in ENV_READ:  # a fact of one variable: a stand-in, tried with each value the rules tell apart
                stood_env[name] = ENV_READ[name].written[0][1]
                stood.append(pointer(["env", name]))
                stood_facts.append((pointer(["env", name]), ENV_READ[name].fact))
                covered += 1
            continue
        command_env[name] = value
        origins["env"] = origin
    if command_env:
        document["env"] = command_env
    if command_env or stood_env:
        standing["env"] = {**command_env, **stood_env}
    # A stand-in answers only when every problem is an unknown value it stands for.
    stand_in = StandIn(standing, tuple(stood), tuple(stood_facts)) if stood and covered == len(reading.problems) else None
    return CommandResult(None if reading.problems else document, model, tuple(reading.problems), tuple(reading.notes),
                         tuple(origins.items()), tuple(reading.configs), stand_in, tuple(unchecked))



def _unread_note(reading: Reading, option: str, field_name: str, unread: Unread) -> None:
    if unread.unread:
        held = ", and ".join(f"at `{at}` from {references(text)}" for at, text in unread.unread)
        one = len(unread.unread) == 1
        reading.note("source.unresolved_unused", f"`{option}` takes its value{'' if one else 's'} {held}; the decision "
                     f"does not read {'that value' if one else 'those values'}", path=pointer([field_name]))


_SCRIPT_ARGUMENT = re.compile(r"\$(?:[@*]|[0-9]+|\{[0-9]+\}|\{[@*]\})")


def _loose_notes(reading: Reading, loose: list[tuple[str | None, Arg]]) -> None:
    """Notes for the unresolved values the decision does not read."""
    script_arguments = False
    for option, word in loose:
        names = unresolved_names(word.text)
        if option is not None:  # (as the note names it: read_options quotes it)
            reading.note("source.unresolved_unused", f"{option} takes its value from {references(word.text)}; "
                         "the decision does not read it")
        elif len(names) == 1 and UNRESOLVED.fullmatch(word.text):
            # A whole word from a variable: it may hold any number of arguments, options included.
            if _SCRIPT_ARGUMENT.fullmatch(names[0]):
                if not script_arguments:
                    reading.note("source.script_arguments", "the command also takes the script's own arguments "
                                 "(`$@`); only the options written here are read")
                script_arguments = True
            elif _settled_by_paths(word.text, reading):
                reading.fail("source.unresolved", f"the command also takes {references(word.text)}, "
                             "which may hold options")
            else:
                reading.note("source.unresolved_arguments", f"the command also takes {references(word.text)}; "
                             "only the options written here are read, and it may hold others")
        elif word.text.startswith("-") and _settled_by_paths(word.text, reading):
            reading.fail("source.unresolved", f"the command also takes the option {references(word.text, whole=True)}, "
                         "whose name is not known")
        elif word.text.startswith("-"):
            reading.note("source.unresolved_arguments", f"the command also takes the option "
                         f"{references(word.text, whole=True)}; its name is not known, and only the options "
                         "written here are read")
        else:
            reading.note("source.unresolved_unused", f"the argument {references(word.text, whole=True)}; "
                         "the decision does not read it")


def _settled_by_paths(text: str, reading: Reading) -> bool:
    """Whether every unknown value ``text`` holds is one the caller reads again on each path."""
    return bool(reading.per_path) and all(m.group(0) in reading.per_path for m in UNRESOLVED.finditer(text))


# -- a launcher's command ------------------------------------------------------------------

# A command line is a few kilobytes (Linux takes at most 128 KiB a word): this
# bounds what one call may make the shell-word splitter walk, which is
# quadratic in a word's length (shlex; the audit's own reader is linear).
MAX_COMMAND_BYTES = 64 << 10
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(\([^)]*\)))")


def command_document(argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: str | os.PathLike[str] | None = None,
                     config_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The deployment document of a command a launcher holds (see
    :func:`hma_policy.decide_command`); :class:`InputError` when there is none."""
    result = command_result(argv, env=env, cwd=cwd, config_root=config_root)
    if result.problems:
        raise InputError(result.problems)
    assert result.document is not None
    return result.document


def command_result(argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                   cwd: str | os.PathLike[str] | None = None,
                   config_root: str | os.PathLike[str] | None = None) -> CommandResult:
    """What a command a launcher holds says (:func:`read_command`), its
    ``--config`` file read from disk; :class:`InputError` for no command at all."""
    if argv is None or (isinstance(argv, (str, list, tuple)) and not argv):
        raise InputError([Problem("input.empty", "the command is empty", hint="give `vllm serve MODEL ...`")])
    if isinstance(argv, str):
        words = _shell_words(argv, env or {})
    elif isinstance(argv, (list, tuple)) and all(isinstance(w, str) for w in argv):
        words = list(argv)
    else:
        raise InputError([Problem("input.type", "a command is a list of strings or one shell string")])
    base = os.path.realpath(os.fspath(cwd) if cwd is not None else os.getcwd())
    root = os.path.realpath(os.fspath(config_root)) if config_root is not None else base
    return read_command(words, env=env, read_config=lambda name: _config_file(name, base, root))


def _shell_words(text: str, env: Mapping[str, str]) -> list[str]:
    """``text`` split into words as a POSIX shell would: quotes and
    backslashes as the shell reads them; ``$NAME`` and ``${NAME}`` taken
    from ``env`` outside single quotes (split at blanks where unquoted, as
    the shell splits an expansion); a name ``env`` lacks, or ``$(...)``,
    stays unresolved. Nothing is run."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        raise InputError([Problem("input.limit", f"the command is longer than {MAX_COMMAND_BYTES} bytes")])
    words: list[str] = []
    current: list[str] = []
    started = False  # a word has begun (even an empty one, such as '')

    def end_word() -> None:
        nonlocal current, started
        if started:
            words.append("".join(current))
        current, started = [], False

    def expansion(at: int) -> tuple[str, int] | None:
        match = _REFERENCE.match(text, at)
        if match is None:
            return None
        name = match.group(1) or match.group(2)
        if name is not None and name in env:
            return env[name], match.end()
        return unresolved(match.group(0), "is not given in `env`" if name else "is a command substitution"), match.end()

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n":
            end_word()
            i += 1
        elif c == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise _unsplittable("no closing quotation")
            current.append(text[i + 1:close])
            started, i = True, close + 1
        elif c == '"':
            started, i = True, i + 1
            while True:
                if i >= n:
                    raise _unsplittable("no closing quotation")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    current.append("" if text[i + 1] == "\n" else text[i + 1])
                    i += 2
                elif c == "$" and (found := expansion(i)) is not None:
                    current.append(found[0])  # quoted: one word, whatever it holds
                    i = found[1]
                else:
                    current.append(c)
                    i += 1
        elif c == "\\":
            if i + 1 >= n:  # a backslash that ends the text stays, as the shell keeps it
                current.append(c)
                started, i = True, i + 1
            elif text[i + 1] != "\n":  # backslash-newline joins lines
                current.append(text[i + 1])
                started, i = True, i + 2
            else:
                i += 2
        elif c == "$" and (found := expansion(i)) is not None:
            value, i = found
            fields = [value] if has_unresolved(value) else value.split()  # a marker is one word
            if value[:1].isspace():
                end_word()
            for index, field in enumerate(fields):
                if index:
                    end_word()
                current.append(field)
                started = True
            if value[-1:].isspace():
                end_word()
        else:
            current.append(c)
            started, i = True, i + 1
    end_word()
    return words


def _unsplittable(why: str) -> InputError:
    return InputError([Problem("input.parse", f"the command cannot be split into words: {why}")])


def _config_file(name: str, base: str, root: str) -> ConfigFile:
    """A ``--config`` file read relative to ``base``, only inside ``root``."""
    if "\x00" in name:  # (a value not known, which no file has as its name)
        raise InputError([Problem("source.config_unresolved", f"`{show(name)}` is not known")])
    path = os.path.realpath(os.path.join(base, name))
    if os.path.commonpath([path, root]) != root:
        raise InputError([Problem("source.config_outside", f"`{name}` is outside `{root}`, where config files may be read",
                                  hint="pass config_root= to allow another directory")])
    try:
        with open_regular(path) as handle:
            return ConfigFile(handle.read(MAX_COMMAND_BYTES + 1).decode("utf-8"), name)
    except FileNotFoundError:
        raise InputError([Problem("source.config_missing", f"`{name}` does not exist")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem("source.config_unreadable", f"`{name}` cannot be read: {exc}")]) from None
