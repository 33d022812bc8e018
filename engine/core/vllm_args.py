"""vLLM's own argument handling, from the words after ``vllm serve`` to the
options the deployment document is made of (command.py makes it),
reproduced where it changes what the decision sees
(``vllm/utils/argparse_utils.py``, FlexibleArgumentParser):

- a ``--config FILE`` (YAML) is read and its options are put before the
  command line, so the command line wins (cli > config > defaults); a
  ``false`` in the file becomes ``--no-KEY`` only when that option exists;
- ``_`` is read as ``-`` in option names (``--kv_transfer_config``);
- dotted options (``--kv-transfer-config.kv_role kv_both``, ``KEY+ a,b``
  for lists) are merged into one JSON value placed last;
- ``--no-X`` and ``--X=VALUE`` forms; the last occurrence of an option wins;
- argparse expands a unique prefix of an option (noted).

Nothing is executed, imported or read from the file system here: a
``--config`` file is read only through the caller's ``read_config``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from .errors import InputError, Problem, suggest
from .input import parse_text
from .markers import UNRESOLVED, has_unresolved, held_markers, outside, references, show, shown_held, unheld
from .optionlist import expanded, flag_options, list_options, rejection
from .options import (DECISION_OPTIONS, FLAG_OPTIONS, NEWER_SPELLINGS, OFF_SWITCHES, VALUE_OPTIONS, Arg, ConfigFile,
                      VllmOptions)

__all__ = ["Reading", "Options", "vllm_tokens", "read_options", "config_args", "scalar_text", "number_value"]


@dataclass
class Reading:
    """The state of one read_command call: where problems are located and
    what they are."""

    file: str | None
    line: int | None
    options: VllmOptions
    read_config: Callable[[str], str | ConfigFile] | None
    require_model: bool
    per_path: frozenset[str] = frozenset()  # read_command's: the unknown values the caller reads on each path
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)

    def problem(self, code: str, message: str, *, path: str = "", hint: str | None = None) -> Problem:
        return Problem(code, message, path, hint, file=self.file, line=self.line)

    def fail(self, code: str, message: str, **kw: Any) -> None:
        self.problems.append(self.problem(code, message, **kw))

    def note(self, code: str, message: str, **kw: Any) -> None:
        self.notes.append(self.problem(code, message, **kw))


# A shell word that expands to any number of words: the script's arguments
# ("$@") or an array's elements ("${ARGS[@]}"). ($* and ${ARGS[*]} are one
# word where quoted, which the unknown value does not record.)
_SHELL_WORDS = re.compile(r"\$(?:@|\{@\}|\{[A-Za-z_][A-Za-z0-9_]*\[@\]\})")


def stands_for_words(arg: Arg) -> bool:
    """Whether a word stands for any number of words that are not known: its
    reader says so (Arg.many), or it is wholly a shell expansion of the
    script's arguments or of an array's elements. Such a word is never taken
    for the model: it may hold the model and options alike."""
    if arg.many:
        return True
    match = UNRESOLVED.fullmatch(arg.text)
    return match is not None and _SHELL_WORDS.fullmatch(match.group(1)) is not None


# The first release whose api_server module takes a positional argument: make_arg_parser
# gained `vllm serve`'s optional model_tag in 0.10.0 (0.9.1 and 0.9.2 have none, read in
# their wheels), and the module's main never reads it.
API_SERVER_MODEL_TAG = "0.10.0"


def extra_words(reading: Reading, extra: list[Arg], serve: bool,
                after_boolean: Mapping[Arg, str] = MappingProxyType({}), *, model_tag: bool = True) -> None:
    """Words argparse takes as positional arguments, past `vllm serve`'s
    model (``extra``: those past it). The api_server module's optional model
    tag takes one word and drops it: a note, since releases before it refuse
    the word. Past that, argparse refuses them ("unrecognized arguments"),
    and vLLM does not start. ``after_boolean``: the boolean option each word
    that follows one follows (the hint names it: vLLM before 0.9 took
    `--enable-chunked-prefill false`). ``model_tag=False``: a module whose
    parser has no positional argument (the gRPC and demo servers)."""
    if not serve and extra and model_tag:
        word, extra = extra[0], extra[1:]
        reading.note("source.ignored_argument", f"the argument `{show(word.text)}` ({word.origin}) is taken by the "
                     f"api_server's optional model tag, which it never reads (vLLM {API_SERVER_MODEL_TAG} and later); "
                     "earlier releases reject it as an unrecognized argument, and vLLM does not start",
                     hint="drop the word; give the model with --model")
    if not extra:
        return
    shown = ", ".join(f"`{show(word.text)}`" for word in extra[:5]) + (", ..." if len(extra) > 5 else "")
    takes = "`vllm serve` takes one model" if serve else "the api_server takes one word, its model tag" if model_tag \
        else "the module takes no positional argument"
    hint = ("give the model once, first; write each option's value after it, or quote a value that holds spaces"
            if serve else "write each option's value after it, or quote a value that holds spaces")
    boolean = after_boolean.get(extra[0])
    if boolean is not None:
        taken = show(extra[0].text)
        off = (f"; write `--no-{boolean[2:]}` to turn it off" if taken.lower() in ("false", "0", "no", "off")
               and "--no-" + boolean[2:] in flag_options() else "")
        hint = f"`{boolean}` takes no value: drop `{taken}`{off}"
    reading.fail("source.extra_argument", f"vLLM rejects the unrecognized argument{'s' if len(extra) > 1 else ''} "
                 f"{shown} ({extra[0].origin}): {takes}, and no option takes "
                 f"{'these words' if len(extra) > 1 else 'this word'}", hint=hint)


def vllm_tokens(reading: Reading, args: list[Arg], serve: bool) -> tuple[list[Arg], Arg | None, bool]:
    """vLLM's FlexibleArgumentParser.parse_args up to argparse: --model moved
    first, --config pulled in, `_` in option names read as `-`, dotted
    options merged into one JSON value placed last. Returns the tokens, the
    model, and whether the command line gave it where argparse takes it as
    `vllm serve`'s positional model (first, or by a --model moved there)."""
    model: Arg | None = None
    if serve:
        rest = args[1:]
        for i, tok in enumerate(rest):
            if tok.text == "--model" or tok.text.startswith("--model="):
                if tok.text == "--model":
                    if i + 1 >= len(rest) or rest[i + 1].text.startswith("-"):
                        reading.fail("source.missing_value", "`--model` has no value")
                        rest = rest[:i] + rest[i + 1:]  # (said once: the options' reading would say it again)
                        break
                    model, rest = rest[i + 1], rest[:i] + rest[i + 2:]
                else:
                    model, rest = Arg(tok.text[len("--model="):], tok.origin), rest[:i] + rest[i + 1:]
                break
        else:
            if rest and not rest[0].text.startswith("-") and not stands_for_words(rest[0]):
                model, rest = rest[0], rest[1:]
        args = rest
    positional = model is not None
    texts = [t.text for t in args]
    if "--config" in texts:
        if texts.count("--config") > 1:
            reading.fail("source.config_multiple", "more than one `--config` file is given; vLLM refuses this")
        else:
            index = texts.index("--config")
            if index == len(args) - 1:
                reading.fail("source.missing_value", "`--config` has no file; vLLM refuses this")
                args = args[:index]
            else:
                config_tokens = _pull_config(reading, args[index + 1].text)
                config_model = next((config_tokens[i + 1] for i, t in enumerate(config_tokens[:-1]) if t.text == "--model"), None)
                if serve and reading.require_model and model is None and config_model is None and not reading.problems:
                    reading.fail("source.no_model", "no model is given, neither on the command line "
                                 "nor in the config file; vLLM refuses this")
                model = model or config_model
                # The config's arguments come first: the command line wins (cli > config > defaults).
                args = config_tokens + args[:index] + args[index + 2:]
    elif any(t.startswith("--config=") for t in texts):
        reading.note("source.config_ignored", "vLLM reads a config file only from `--config FILE`; "
                     "`--config=FILE` is accepted and ignored")
    # Option names: `_` is `-` between the leading `--` and the first `.`, outside the
    # unknown values a name holds (`--disable-$ACCESS_LOG` keeps the variable's name).
    normal: list[Arg] = []
    for tok in args:
        text = tok.text
        if text.startswith("--"):
            key, eq, value = _partition(text, "=")
            head, dot, tail = _partition(key[2:], ".")
            text = "--" + outside(head, lambda part: part.replace("_", "-")) + dot + tail + eq + value
        normal.append(tok._replace(text=text))
    return _merge_dotted(reading, normal), model, positional


def _spaced(text: str) -> bool:
    """Whether argparse takes ``text``, a word that starts with a dash, as a
    positional argument: one whose option part (up to a `=`) holds a blank,
    such as `--quantization bitsandbytes` written as one word, which no
    option matches (argparse's _parse_optional). vLLM's api_server gives
    it to its model tag and starts without the option
    (kubernetes-sigs/inference-perf's vllm+quantization demo)."""
    if " " not in text:  # (most words: no option part to find)
        return False
    option = _partition(text, "=")[0]
    return " " in (UNRESOLVED.sub("", option) if "\x00" in option else option)


def _partition(text: str, separator: str) -> tuple[str, str, str]:
    """str.partition at the first ``separator`` outside the unknown values
    ``text`` holds (a marker's reason may hold any character)."""
    if "\x00" not in text:
        return text.partition(separator)
    at = UNRESOLVED.sub(lambda m: "\x00" * len(m.group(0)), text).find(separator)
    return (text, "", "") if at < 0 else (text[:at], separator, text[at + 1:])


def _merge_dotted(reading: Reading, normal: list[Arg]) -> list[Arg]:
    """Dotted options, --json-arg.key value, merged per option and appended last."""
    out: list[Arg] = []
    dotted: dict[str, tuple[dict[str, Any], str]] = {}
    skip = False
    for i, tok in enumerate(normal):
        if skip:
            skip = False
            continue
        text = tok.text
        if not (text.startswith("-") and "." in text):
            out.append(tok)
            continue
        key, eq, value = _partition(text, "=")
        if _partition(key, ".")[1] == "":
            out.append(tok)  # the `.` was only in the value, or in an unknown value the name holds
            continue
        if not eq:
            if i + 1 >= len(normal):
                reading.fail("source.missing_value", f"`{show(text)}` has no value")
                continue
            value, skip = normal[i + 1].text, True
        if key.endswith("+"):
            key, value = key[:-1], json.dumps(value.split(","))
        option, *keys = key.split(".")
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            try:
                parsed = _human_int(value)
            except ValueError:
                parsed = value
        nested: Any = parsed
        for part in reversed(keys):
            nested = {part: nested}
        held = dotted.setdefault(option, ({}, tok.origin))
        _merge(held[0], nested)
    for option, (merged, origin) in dotted.items():
        out += [Arg(option, origin), Arg(json.dumps(merged), origin)]
    return out


def _pull_config(reading: Reading, name: str) -> list[Arg]:
    if has_unresolved(name):
        # A name not known is a file only where a script wrote one at these same words (`cat > "$D/c.yaml"
        # <<EOF` ... `--config "$D/c.yaml"`), as it runs scripts it writes so; every reader refuses any other.
        try:
            got: ConfigFile | str | None = reading.read_config(name) if reading.read_config is not None else None
        except InputError:
            got = None
        if got is None or name.split(".")[-1] not in ("yaml", "yml"):
            reading.fail("source.unresolved", f"the `--config` file is {references(name, whole=True)}")
            return []
        return _config_read(reading, name, got)
    if name.split(".")[-1] not in ("yaml", "yml"):
        reading.fail("source.config_extension", f"`--config {name}`: vLLM reads only .yaml or .yml config files")
        return []
    if reading.read_config is None:
        reading.fail("source.config_unresolved", f"`--config {name}` cannot be located from this file")
        return []
    try:
        got = reading.read_config(name)
    except InputError as exc:
        first = exc.problems[0]
        reading.problems.append(Problem(first.code, first.message, first.path, first.hint, file=reading.file,
                                        line=reading.line))
        return []
    return _config_read(reading, name, got)


def _config_read(reading: Reading, name: str, got: ConfigFile | str) -> list[Arg]:
    """The options of a config file read for `--config NAME`."""
    text, shown = (got.text, got.shown) if isinstance(got, ConfigFile) else (got, name)
    shown = show(shown, None)  # (a file written at a path not known: its name as the script writes it)
    reading.configs.append(shown)
    # A config file a script writes may hold values not known (`max-model-len: $LEN`): each is
    # held while the YAML is parsed, and is then a value not known of the option it gives.
    held = held_markers(text) if text and has_unresolved(text) else None
    try:
        config = parse_text(held[0] if held else text or "", source=f"`{shown}`", fmt="yaml")
    except InputError as exc:
        first = exc.problems[0]
        message = shown_held(first.message, held[1]) if held else first.message
        reading.fail(first.code, f"the config file {message.removeprefix('invalid YAML in ')}"
                     if first.code == "input.parse" else message)
        return []
    if held:
        config = unheld(config, held[1])
    if config is None:
        config = {}
    return config_args(reading, config, f"`{shown}`")


def config_args(reading: Reading, config: Any, origin: str) -> list[Arg]:
    """vLLM's load_config_file: a YAML mapping to command-line arguments."""
    if not isinstance(config, dict):
        reading.fail("source.config_shape", f"the config file {origin} must hold a mapping of vLLM options")
        return []
    boolean_optional = reading.options.boolean_optional
    out: list[Arg] = []
    for key, value in config.items():
        if not isinstance(key, str):  # vLLM would fail on "--" + key
            reading.fail("source.config_shape", f"the config file {origin} has a key that is not a string")
            return []
        if key == "config":
            reading.note("source.config_nested", f"{origin} names another config file; vLLM does not read it")
        if isinstance(value, bool):
            if value:
                out.append(Arg("--" + key, origin))
            elif key in boolean_optional:  # vLLM adds --no-KEY only when that option exists
                out.append(Arg("--no-" + key, origin))
            elif key.replace("_", "-") in boolean_optional:
                # `--no-disable_hybrid_kv_cache_manager` is no option string: vLLM drops the key.
                reading.note("source.config_false_dropped", f"{origin}: `{key}: false` is dropped by vLLM, "
                             "which adds `--no-KEY` only for the dash spelling; the file states no preference",
                             hint=f"write `{key.replace('_', '-')}: false` for an explicit enable")
        elif isinstance(value, list):
            if value:
                out.append(Arg("--" + key, origin))
                out += [Arg(scalar_text(item), origin) for item in value]
        elif isinstance(value, dict):
            out += [Arg("--" + key, origin), Arg(json.dumps(value), origin)]
        else:
            out += [Arg("--" + key, origin), Arg(scalar_text(value), origin)]
    return out


def scalar_text(value: Any) -> str:
    """Python's str(), as vLLM applies it to config values."""
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _human_int(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(text.strip())


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def _looks_like_number(text: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d*)?|-\.\d+", text))


class Options(NamedTuple):
    """What :func:`read_options` read from the tokens."""

    found: dict[str, tuple[Any, str, str]]  # field -> (value, origin, option): the options the decision reads
    # Words holding unresolved values the decision does not read, each with its option as a note names it
    # (`--served-model-name`, in backticks, with an aside where a later one overrides it), or None.
    loose: list[tuple[str | None, Arg]]
    positionals: list[Arg]  # the words argparse takes as positional arguments, where that is certain
    # The long options whose acceptance no release's option list has checked
    # yet, as given (before argparse expands a prefix): those the decision does
    # not read, and its fields' spellings only newer releases take.
    unchecked: list[Arg]
    after_boolean: dict[Arg, str]  # positional words right after a boolean option: that option


def read_options(reading: Reading, tokens: list[Arg]) -> Options:
    """argparse over the options the decision needs: the last occurrence
    wins. Also the words holding unresolved values that the decision does
    not read, and the words that are no option and no option's value.

    An option the decision does not read takes the words its type takes in
    the newest bundled release (:func:`.optionlist.list_options`: every word
    up to the next option for a list, such as ``--served-model-name a b``;
    none for a boolean, as in every bundled release), else one word.
    Positional words are listed only while that is certain:
    not after a word that the audit would have to expand (``$ARGS``), nor
    after the value of an option that release does not list (another
    release may take more words)."""
    found: dict[str, tuple[Any, str, str]] = {}
    loose: list[tuple[str | None, Arg]] = []
    positionals: list[Arg] = []
    unchecked: list[Arg] = []
    after_boolean: dict[Arg, str] = {}
    flags = reading.options.flags
    lists, listed = list_options()
    booleans = flag_options() - reading.options.valued  # (an older release's, whose value may follow: STORE_BOOLEANS)
    unsure = False  # a positional word may be something else: list no more of them
    after_unknown = False  # the last option is one the newest release does not list, and it has had its one word
    only_positional = False  # after `--`, every word is a positional argument (argparse)
    boolean: str | None = None  # the boolean option just read
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        text = tok.text
        i += 1
        previous, boolean = boolean, None
        if text == "--" and not only_positional:
            only_positional, after_unknown = True, False
            continue
        if only_positional or not text.startswith("-") or _spaced(text):
            if has_unresolved(text):
                loose.append((None, tok))
                unsure = True
            elif after_unknown:
                unsure = True
            elif not unsure:
                positionals.append(tok)
                if previous is not None:
                    after_boolean[tok] = previous
            continue
        after_unknown = False
        option, eq, value = _partition(text, "=")
        if has_unresolved(option):
            # An option named by an unknown value (`--disable-$ARGS`): neither
            # its name nor how many words it takes is known, as for `$ARGS`.
            loose.append((None, tok))
            unsure = True
            continue
        accepted = reading.options.accepted
        resolved: str | None = option
        if accepted is not None and option.startswith("--") and option not in accepted:
            resolved = _accepted_option(reading, option, accepted)
        elif option not in VALUE_OPTIONS and option not in FLAG_OPTIONS and option.startswith("--"):
            matches = [o for o in DECISION_OPTIONS if o.startswith(option) and o != option]
            if len(matches) == 1 and option.count("-") >= 3:
                reading.note("source.abbreviated_option", f"`{option}` is read as `{matches[0]}`, as argparse "
                             "expands a unique prefix; spell the option out")
                resolved = matches[0]
            else:
                if option not in reading.options.neighbours and _similar(option, DECISION_OPTIONS):
                    reading.fail("source.unknown_option", f"vLLM rejects the unrecognized argument `{show(option)}`",
                                 hint=suggest(option, DECISION_OPTIONS))
                else:
                    unchecked.append(Arg(option, tok.origin))
                resolved = None
        if resolved is None or resolved not in VALUE_OPTIONS and resolved not in FLAG_OPTIONS:
            # An option the decision does not read: the words after it that its type takes are its value.
            name = resolved or option
            switched = OFF_SWITCHES.get(name) or OFF_SWITCHES.get(name.replace("--", "--no-", 1))
            if switched is not None and not eq and name in OFF_SWITCHES:  # `--no-enable-chunked-prefill`: off
                found[switched] = (False, tok.origin, name)
            elif switched is not None and not eq:  # `--enable-chunked-prefill` after it: the default again
                found.pop(switched, None)
            if eq:
                if has_unresolved(value):
                    loose.append((f"`{option}`", Arg(value, tok.origin)))
                continue
            taken = 0
            # A boolean takes no word: the word after it is vLLM's model or an argument it refuses
            # (`--enforce-eager stray`), and a word not known (`--enforce-eager $EXTRA_ARGS`) is more
            # arguments, which may hold options.
            while (i < len(tokens) and name not in flags and name not in booleans and (taken == 0 or name in lists)
                   and (not tokens[i].text.startswith("-") or _looks_like_number(tokens[i].text))):
                if stands_for_words(tokens[i]) or (taken and UNRESOLVED.fullmatch(tokens[i].text)):
                    # Any number of words (`*extra_args`, "$@"): some may be its value, the others
                    # options of their own (`--served-model-name m *extra_args`). So may a list's
                    # further word that is wholly a value not known (`--served-model-name "$N" $EXTRA`).
                    loose.append((None, tokens[i]))
                    i += 1
                    unsure = True
                    break
                if has_unresolved(tokens[i].text):
                    loose.append((f"`{option}`", tokens[i]))
                i += 1
                taken += 1
            after_unknown = name not in listed and name not in booleans
            boolean = option if name in booleans else None
            continue
        written, option = option, resolved
        if option in NEWER_SPELLINGS:  # a spelling of a field older releases have, which they reject
            unchecked.append(Arg(written, tok.origin))
        if option in FLAG_OPTIONS:
            if eq:
                reading.fail("source.option_value", f"`{option}` takes no value; vLLM refuses `{show(text)}`")
                continue
            field_name, flag = FLAG_OPTIONS[option]
            found[field_name] = (flag, tok.origin, option)
            boolean = option
            continue
        if not eq:
            if i >= len(tokens) or (tokens[i].text.startswith("-") and not _looks_like_number(tokens[i].text)):
                reading.fail("source.missing_value", f"`{option}` has no value; vLLM refuses this")
                continue
            value = tokens[i].text
            i += 1
        field_name, _ = VALUE_OPTIONS[option]
        earlier = found.get(field_name)
        if earlier is not None and isinstance(earlier[0], str) and has_unresolved(earlier[0]):
            loose.append((f"`{earlier[2]}` (a later `{option}` wins)", Arg(earlier[0], earlier[1])))
        found[field_name] = (value, tok.origin, option)
    return Options(found, loose, positionals, unchecked, after_boolean)


def _accepted_option(reading: Reading, option: str, accepted: frozenset[str]) -> str | None:
    """An option the release does not list: argparse's unique-prefix
    expansion, else vLLM refuses it. None when it is not an option the
    release accepts."""
    matches = expanded(option, accepted)
    if len(matches) == 1:
        reading.note("source.abbreviated_option", f"`{option}` is read as `{matches[0]}`, as argparse "
                     "expands a unique prefix; spell the option out")
        return matches[0]
    refused = rejection(reading.options.release, show(option), matches, accepted)
    reading.fail(refused.code, refused.message, hint=refused.hint)
    return None


def _similar(option: str, candidates: Iterable[str]) -> bool:
    """A near-certain misspelling (a did-you-mean at 0.9 similarity), as
    opposed to one of vLLM's many options that merely look alike."""
    return bool(difflib.get_close_matches(option, list(candidates), n=1, cutoff=0.9))


def number_value(text: str) -> Any:
    """argparse's float() for --kv-offloading-size; the text stays when it is
    not a number, so that validation reports it."""
    try:
        return int(text) if re.fullmatch(r"[+-]?\d+", text.strip()) else float(text)
    except ValueError:
        return text
