"""Shell scripts: each ``vllm serve``, ``python -m
vllm.entrypoints.openai.api_server`` or ``docker run vllm/vllm-openai``
command, after expanding the variables the script itself sets.

Nothing is executed: command lines are split with :mod:`shlex` after a
textual expansion of the variables the file itself sets. Anything not known
from the text (``$1``, ``$(...)``, an unset variable) becomes an unresolved
marker (:func:`hma_policy.core.command.unresolved`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator

from ...core.command import Arg, find_vllm, unresolved
from ...core.errors import Problem
from ...core.limits import SourceLimits
from .context import Ctx
from .deployment import Deployment
from .detect import SHELLS
from .launch import Invocation, apply_facts, config_from_fs, deployment

__all__ = ["shell_file", "argv_invocations", "VLLM_IMAGE"]

VLLM_IMAGE = re.compile(r"(^|/)vllm-openai(?:[:@]|$)")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)

_SPECIAL_PARAMS = set("@*#?$!-0123456789")


class _ShellText:
    """A character scanner over shell text: yields logical lines (with their
    first line number) with comments and heredoc bodies removed and
    ``$VAR``/``${VAR}``/``${VAR:-word}`` expanded from ``variables``, re-quoted
    so that :func:`shlex.split` gives the words the shell would. Anything not
    known from the text (``$1``, ``$(...)``, an unset variable) becomes an
    unresolved marker. The caller updates ``variables`` between lines."""

    def __init__(self, text: str, variables: dict[str, str], limits: SourceLimits, first_line: int = 1):
        self.text = text
        self.vars = variables
        self.limits = limits
        self.first_line = first_line

    def lines(self) -> Iterator[tuple[int, str]]:
        text, n = self.text, len(self.text)
        i, line = 0, self.first_line
        out: list[str] = []
        start = line
        quote: str | None = None
        word_start = True
        heredocs: list[tuple[str, bool]] = []
        while i < n:
            c = text[i]
            if quote == "'":
                out.append(c)
                if c == "'":
                    quote = None
                elif c == "\n":
                    line += 1
                i += 1
                continue
            if c == "\\":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt == "\n":  # a line continuation
                    i += 2
                    line += 1
                    continue
                if quote == '"' and nxt not in ('"', "\\", "$", "`"):
                    out.append("\\\\" + nxt)  # a literal backslash inside double quotes
                elif quote == '"' and nxt in ("$", "`"):
                    out.append(nxt)
                else:
                    out.append(c + nxt)
                word_start = False
                i += 2
                continue
            if quote == '"':
                if c == '"':
                    quote = None
                    out.append(c)
                    i += 1
                elif c in "$`":
                    i = self._expand(i, out, quoted=True)
                else:
                    if c == "\n":
                        line += 1
                    out.append(c)
                    i += 1
                continue
            if c == "#" and word_start:
                while i < n and text[i] != "\n":
                    i += 1
                continue
            if c in "'\"":
                quote = c
                out.append(c)
                word_start = False
                i += 1
            elif c in "$`":
                i = self._expand(i, out, quoted=False)
                word_start = False
            elif c == "\n":
                yield start, "".join(out)
                out = []
                line += 1
                i += 1
                for delimiter, strip in heredocs:
                    while i < n:
                        end = text.find("\n", i)
                        end = n if end < 0 else end
                        body = text[i:end]
                        i = end + 1
                        line += 1
                        if (body.lstrip("\t") if strip else body) == delimiter:
                            break
                heredocs = []
                start = line
                word_start = True
            elif c == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
                j = i + 2
                strip = j < n and text[j] == "-"
                j += 1 if strip else 0
                while j < n and text[j] in " \t":
                    j += 1
                k = j
                while k < n and not text[k].isspace() and text[k] not in ";&|()<>":
                    k += 1
                delimiter = text[j:k].replace("'", "").replace('"', "").replace("\\", "")
                if delimiter:
                    heredocs.append((delimiter, strip))
                i = k
                word_start = True
            else:
                out.append(c)
                word_start = c in " \t;&|()<>"
                i += 1
        if out:
            yield start, "".join(out)

    # -- expansions -------------------------------------------------------------
    def _emit(self, value: str, out: list[str], quoted: bool) -> None:
        if len(value) > self.limits.max_variable_length:
            value = unresolved("(a value too long to expand)")
        if quoted:
            out.append(value.replace("\\", "\\\\").replace('"', '\\"'))
            return
        words = value.split()
        if not words:
            if value:
                out.append(" ")
            return
        lead = " " if value[:1].isspace() else ""
        tail = " " if value[-1:].isspace() else ""
        out.append(lead + " ".join(shlex.quote(w) for w in words) + tail)

    def _matching(self, i: int, opening: str, closing: str) -> int:
        """The index after the `closing` that matches the `opening` at ``i``."""
        text, n = self.text, len(self.text)
        depth, quote = 0, None
        while i < n:
            c = text[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif c == "\\":
                i += 2
                continue
            elif c in "'\"":
                quote = c
            elif c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    def _expand(self, i: int, out: list[str], *, quoted: bool) -> int:
        text, n = self.text, len(self.text)
        if text[i] == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            out.append(unresolved("`...`"))
            return end
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "(":
            end = self._matching(i + 1, "(", ")")
            out.append(unresolved("$((...))" if text.startswith("$((", i) else "$(...)"))
            return end
        if nxt == "{":
            end = self._matching(i + 1, "{", "}")
            self._emit(self._parameter(text[i + 2:end - 1]), out, quoted)
            return end
        match = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i + 1:i + 257])
        if match:
            name = match.group(0)
            value = self.vars.get(name)
            self._emit(value if value is not None else unresolved("$" + name), out, quoted)
            return i + 1 + len(name)
        if nxt and nxt in _SPECIAL_PARAMS:
            out.append(unresolved("$" + nxt))
            return i + 2
        out.append("$")
        return i + 1

    def _parameter(self, body: str, depth: int = 0) -> str:
        """${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:=word}, ${NAME=word}."""
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])(.*))?", body, re.S)
        if not match:
            return unresolved("${" + body[:40] + "}")
        name, op, word = match.groups()
        value = self.vars.get(name)
        if op is None:
            return value if value is not None else unresolved("$" + name)
        empty = value is None or (op.startswith(":") and value == "")
        if not empty:
            return value  # type: ignore[return-value]
        if depth > 8:
            return unresolved("$" + name)
        default = self._word(word, depth)
        if op.endswith("="):
            self.vars[name] = default
        return default

    def _word(self, word: str, depth: int) -> str:
        """A default word: its variables expanded, its quotes removed."""
        def sub(m: re.Match) -> str:
            if m.group(1) is not None:
                return self._parameter(m.group(1), depth + 1)
            value = self.vars.get(m.group(2))
            return value if value is not None else unresolved("$" + m.group(2))
        expanded = re.sub(r"\$\{([^{}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, word)
        if len(expanded) >= 2 and expanded[0] == expanded[-1] and expanded[0] in "'\"":
            expanded = expanded[1:-1]
        return expanded


_SEPARATORS = {";", "&", "&&", "|", "||", ";;", "(", ")", "|&", ";&", "{", "}", "!"}


def _simple_commands(words: list[str]) -> Iterator[list[str]]:
    """Split a logical line's words at operators; drop redirections and their targets."""
    current: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word and all(ch in "();<>|&" for ch in word):
            if "<" in word or ">" in word:
                i += 2  # a redirection and its target
                continue
            if current:
                yield current
            current = []
        elif word in ("{", "}", "!") and not current:
            pass
        else:
            current.append(word)
        i += 1
    if current:
        yield current


def _shell_invocations(script: str, ctx: Ctx, *, variables: dict[str, str], exported: dict[str, Arg],
                       first_line: int, origin: Callable[[int], str], anchor: Callable[[int], str], depth: int = 0,
                       problems: list[Problem]) -> list[Invocation]:
    """The vLLM commands of a shell script, in order."""
    found: list[Invocation] = []
    allexport = False
    scanner = _ShellText(script, variables, ctx.limits, first_line)
    for line, text in scanner.lines():
        if not text.strip():
            continue
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        try:
            words = list(lexer)
        except ValueError as exc:
            problems.append(ctx.problem("source.shell_syntax", f"cannot split the command: {exc}", line=line))
            continue
        for command in _simple_commands(words):
            assignments = 0
            while assignments < len(command) and _ASSIGNMENT.match(command[assignments]):
                assignments += 1
            if assignments == len(command):
                for word in command:
                    name, value = _ASSIGNMENT.match(word).groups()  # type: ignore[union-attr]
                    variables[name] = value
                    if allexport or name in exported:
                        exported[name] = Arg(value, origin(line))
                continue
            head = command[assignments]
            if head in ("export", "declare", "typeset", "readonly", "local") and assignments == 0:
                flags = [w for w in command[1:] if w.startswith("-")]
                exporting = head == "export" or any("x" in f for f in flags)
                for word in command[1:]:
                    if word.startswith("-"):
                        continue
                    match = _ASSIGNMENT.match(word)
                    if match:
                        variables[match.group(1)] = match.group(2)
                        if exporting or allexport:
                            exported[match.group(1)] = Arg(match.group(2), origin(line))
                    elif exporting and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word) and word in variables:
                        exported[word] = Arg(variables[word], origin(line))
                continue
            if head == "unset" and assignments == 0:
                for word in command[1:]:
                    variables.pop(word, None)
                    exported.pop(word, None)
                continue
            if head == "set" and assignments == 0:
                if "-a" in command[1:] or "allexport" in command[1:]:
                    allexport = True
                if "+a" in command[1:]:
                    allexport = False
                continue
            env = {name: Arg(value, origin(line)) for name, (value, _) in exported.items()}
            located = find_vllm(command)
            docker = None if located else _docker_run(command)
            if located is None and docker is None:
                nested = _nested_script(command)
                if nested is not None and depth < ctx.limits.max_script_depth:
                    inner_vars = dict(variables)
                    found += _shell_invocations(nested, ctx, variables=inner_vars, exported=dict(exported), first_line=line,
                                                origin=lambda _l, line=line: origin(line), anchor=lambda _l, line=line: anchor(line),  # type: ignore[misc]
                                                depth=depth + 1, problems=problems)
                continue
            for word in command[:located[0] if located else docker[0]]:  # type: ignore[index]
                match = _ASSIGNMENT.match(word)
                if match:
                    env[match.group(1)] = Arg(match.group(2), origin(line))
            if located:
                start, _ = located
                args = command[start:]
                argv = command
            else:
                start, docker_env = docker  # type: ignore[misc]
                for name, value in docker_env.items():
                    env[name] = Arg(value if value is not None else unresolved("$" + name), origin(line))
                args = command[start:]
                argv = ["vllm", "serve"] + args
                if command[start:start + 1] == ["serve"]:
                    problems.append(ctx.problem("source.serve_twice", "the vllm/vllm-openai image already runs `vllm serve`; "
                                                "`serve` in its arguments is taken as the model", line=line))
            inv = Invocation([Arg(a, origin(line)) for a in argv], line, env, anchor(line))
            if any(re.search("\x00\\$[@*1-9]\x00", a) for a in args):
                inv.notes.append(ctx.problem("source.script_arguments", "the command also takes the script's own arguments "
                                             "(`$@`); only the options written here are read", line=line))
            found.append(inv)
            if len(found) > ctx.limits.max_commands:
                problems.append(ctx.problem("input.limit", f"more than {ctx.limits.max_commands} vLLM commands"))
                return found[: ctx.limits.max_commands]
    return found


def _nested_script(words: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (also `bash -lc`, `-ec`, ...)."""
    for i, word in enumerate(words[:-2]):
        if word.rsplit("/", 1)[-1] in SHELLS and re.fullmatch(r"-[a-z]*c[a-z]*", words[i + 1]):
            return words[i + 2]
    return None


def shell_file(ctx: Ctx) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    base = ctx.path.parent
    invocations = _shell_invocations(ctx.text, ctx, variables={}, exported={}, first_line=1,
                                     origin=lambda line: f"line {line}", anchor=lambda line: f":{line}", problems=problems)
    for inv in invocations:
        inv.config_reader = config_from_fs(ctx, base)
    apply_facts(invocations, ctx)
    return [deployment(inv, ctx, "shell") for inv in invocations], problems


_DOCKER_VALUE_OPTIONS = frozenset({"-v", "--volume", "-p", "--publish", "--name", "--network", "--gpus", "-w", "--workdir",
                                   "--mount", "--shm-size", "--ipc", "--runtime", "-u", "--user", "--env-file", "-l",
                                   "--label", "--device", "--platform", "--cpus", "--memory", "-m", "--hostname", "-h",
                                   "--restart", "--ulimit", "--log-driver", "--pull", "--entrypoint-args"})


def _docker_run(words: list[str]) -> tuple[int, dict[str, str | None]] | None:
    """`docker run ... vllm/vllm-openai[:tag] ARGS`: where the image's
    arguments start (the image's ENTRYPOINT is `vllm serve`), and its -e/--env."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in ("docker", "podman") and i + 1 < len(words) and words[i + 1] == "run":
            env: dict[str, str | None] = {}
            j = i + 2
            while j < len(words):
                w = words[j]
                if w == "--entrypoint" or w.startswith("--entrypoint="):
                    return None  # the image's own entrypoint is replaced: not known to be vLLM
                if w in ("-e", "--env") and j + 1 < len(words):
                    name, eq, value = words[j + 1].partition("=")
                    env[name] = value if eq else None
                    j += 2
                    continue
                if w.startswith("--env="):
                    name, eq, value = w[6:].partition("=")
                    env[name] = value if eq else None
                elif w in _DOCKER_VALUE_OPTIONS:
                    j += 1  # its value (a volume path may well contain `vllm-openai`) is not the image
                elif not w.startswith("-") and VLLM_IMAGE.search(w):
                    return j + 1, env
                j += 1
    return None


def argv_invocations(argv: list[str], ctx: Ctx, *, env: dict[str, Arg], line: int | None, origin: str,
                      anchor: str, problems: list[Problem]) -> list[Invocation]:
    """The vLLM command of a container's argv: directly, or inside `sh -c SCRIPT`."""
    nested = _nested_script(argv) if argv and argv[0].rsplit("/", 1)[-1] in SHELLS else None
    if nested is not None:
        variables = {name: value for name, (value, _) in env.items()}
        return _shell_invocations(nested, ctx, variables=variables, exported=dict(env), first_line=line or 1,
                                  origin=lambda _l: origin, anchor=lambda _l: anchor, problems=problems)
    located = find_vllm(argv)
    if located is None:
        return []
    return [Invocation([Arg(a, origin) for a in argv], line, dict(env), anchor)]


