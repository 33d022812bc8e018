"""Commands recognised by their words, once expanded (shell_run.py runs
them): those that never run their arguments (``echo vllm serve``), the
script of ``sh -c``, the remote command of ``ssh``, ``docker run``'s image,
environment and entrypoint, the image of ``srun --container-image`` (and of
an sbatch script's ``#SBATCH --container-image``), a clone and build of
vLLM's repository, the manifest ``kubectl apply -f`` applies, the names
``read``/``mapfile`` set, and the server a ``vllm bench sweep`` starts.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ...core.errors import Problem
from ...core.markers import has_unresolved, show
from ...core.options import Arg
from ...core.vllm_args import stands_for_words
from .context import Ctx
from .detect import SHELLS
from .images import VLLM_IMAGE
from .pyvalues import split_words
from .shell_words import ASSIGNMENT

__all__ = ["NOT_RUNNING", "VENV_ACTIVATE_SETS", "venv_activation", "only_markers", "name_operands", "nested_script", "ssh_command", "DockerRun",
           "docker_run", "srun_image", "apptainer_image", "reads_stdin", "batch_image", "applied_file", "git_source", "installs_source", "same_folder",
           "Sweep", "sweep_server", "unread_params"]

# Commands that never run their arguments: `echo vllm serve m` is no launch.
NOT_RUNNING = frozenset({"echo", "printf", "grep", "egrep", "fgrep", "sed", "awk", "cat", "tee", "test", "[", "[[", ":",
                          "logger", "true", "false", "pgrep", "pkill", "which", "type", "read"})


# What a virtual environment's `bin/activate` sets, the same names in CPython's venv and in virtualenv
# (whose scripts uv writes too): sourcing one changes no other variable of the script, so the
# script's own values stay known (ovg-project/kvcached sets a model and a KV config, then activates
# a venv, then starts vLLM with them).
VENV_ACTIVATE_SETS = ("VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "PATH", "PS1", "PYTHONHOME", "PKG_CONFIG_PATH",
                      "TCL_LIBRARY", "TK_LIBRARY")


def venv_activation(args: list[str]) -> bool:
    """Whether `source ARGS` activates a virtual environment: a `bin/activate` given no arguments.
    Conda's `bin/activate ENV` runs the environment's activate.d scripts, which may set anything."""
    path = args[0] if len(args) == 1 else ""
    return (path == "bin/activate" or path.endswith("/bin/activate")) and "conda" not in path.lower()

def only_markers(text: str) -> bool:
    return not re.sub("\x00[^\x00]*\x00", "", text).strip()


def name_operands(args: list[str], with_value: str, array_flag: str | None) -> list[str]:
    """The operands (names) of read/mapfile, past their options; an
    option's value that is a name (`read -a NAME`) is one too."""
    names: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            names += args[index + 1:]
            break
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for position, letter in enumerate(letters):
                if letter in with_value:
                    value = letters[position + 1:] or (args[index + 1] if index + 1 < len(args) else "")
                    if not letters[position + 1:]:
                        index += 1
                    if array_flag and "-" + letter == array_flag:
                        names.append(value)
                    break
            index += 1
            continue
        names.append(arg)
        index += 1
    return names


# The shells' options that take a value (`bash -o pipefail -c ...`, `--rcfile FILE`).
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_SHELL_OPTIONS = re.compile(r"[-+][A-Za-z]+")


def nested_script(words: list[str]) -> tuple[str, list[str]] | None:
    """The script of `sh -c SCRIPT [NAME ARGS...]` (also `bash -lc`, `-ec`,
    `bash -o pipefail -c`, `bash -c -- SCRIPT`, ...), and what follows it:
    with `-c` among a shell's options, the script is the first word after
    them, as bash and dash take it."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] not in SHELLS:
            continue
        command, at = False, i + 1
        while at < len(words):
            option = words[at]
            if option in ("--", "-"):  # the end of the options
                at += 1
                break
            if option in _SHELL_VALUE_OPTIONS or (_SHELL_OPTIONS.fullmatch(option) and option[-1] in "oO"):
                command = command or (option[0] == "-" and "c" in option[1:])
                at += 2
            elif option.startswith("--") or _SHELL_OPTIONS.fullmatch(option):
                command = command or (option[0] == "-" and option[1] != "-" and "c" in option[1:])
                at += 1
            else:
                break
        if command and at < len(words):
            return words[at], words[at + 1:]
    return None


# The `vllm bench sweep` commands that start a server for their runs: `serve_sla` and `serve_workload` (its
# later name) take every option of `serve` (vllm/benchmarks/sweep/serve.py, serve_sla.py, serve_workload.py).
_SWEEP_SERVES = frozenset({"serve", "serve_sla", "serve_workload"})


class Sweep(NamedTuple):
    """The server a `vllm bench sweep serve` starts, as words: what runs the
    sweep (its words before `vllm`: `docker run IMAGE`, `env X=1`), whose
    container and environment the server inherits, then the words of
    `--serve-cmd` (None: not given, a text shlex cannot split, or `--dry-run`:
    no server starts); and the `--serve-params` file, whose combinations each
    add options to it (None: not given, one run of the command as written)."""

    server: list[str] | None
    params: str | None


def sweep_server(words: list[str]) -> Sweep | None:
    """The server of a `vllm bench sweep serve` command (None: the words are
    no such command). vLLM splits `--serve-cmd` with shlex.split and runs it
    without a shell; the last of an option given twice wins, as argparse's."""
    start = next((i + 4 for i in range(len(words) - 3) if words[i].rsplit("/", 1)[-1] == "vllm"
                  and words[i + 1:i + 3] == ["bench", "sweep"] and words[i + 3] in _SWEEP_SERVES), None)
    if start is None:
        return None
    given: dict[str, str] = {}
    at = start
    while at < len(words):
        name, equals, value = words[at].partition("=")
        if name == "--dry-run":  # (it prints each server's command and starts none)
            return Sweep(None, None)
        if name in ("--serve-cmd", "--serve-params"):
            if not equals:
                at += 1
                value = words[at] if at < len(words) else ""
            given[name] = value
        at += 1
    command = given.get("--serve-cmd")
    # (as vLLM's shlex.split, each value not known kept whole; None for an unclosed quote, where vLLM
    # raises before any run, or a text longer than a command line, which shlex would take quadratic time over)
    server = split_words(command, True) if command is not None else None
    return Sweep(words[:start - 4] + server if server else None, given.get("--serve-params"))


def unread_params(ctx: Ctx, params: str, line: int | None) -> Problem:
    """The problem of a sweep's launch whose options the combinations of `--serve-params` add."""
    return ctx.problem("source.unresolved", f"`vllm bench sweep` adds the options of each combination in "
                       f"`--serve-params {show(params)}` to this command; the audit does not read that file", line=line,
                       hint="write the options a combination gives in `--serve-cmd` to have the command decided")


_SSH_VALUE_OPTIONS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def ssh_command(args: list[str]) -> list[str]:
    """The remote command of `ssh [options] HOST COMMAND...`. A word that
    stands for any number of words before the host is options
    (`ssh "${SSH_OPTS[@]}" "$host" CMD`), as scripts write them."""
    index = 0
    while index < len(args) and (args[index].startswith("-") or stands_for_words(Arg(args[index], ""))):
        letters = args[index][1:]
        index += 2 if letters[-1:] in _SSH_VALUE_OPTIONS and len(letters) == 1 else 1
    return args[index + 1:]


def reads_stdin(remote: list[str]) -> bool:
    """Whether a remote command (ssh_command) runs a shell that reads its script from standard input:
    none, or a shell without `-c`. ssh joins the words and the remote shell splits them again (`ssh
    host "bash -s"`); an environment prefix is the remote shell's (`ssh host X=1 bash -s`)."""
    words = " ".join(remote).split()
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    return not words or (words[0].rsplit("/", 1)[-1] in SHELLS and "-c" not in words)


_DOCKER_VALUE_OPTIONS = frozenset({"-v", "--volume", "-p", "--publish", "--name", "--network", "--gpus", "-w", "--workdir",
                                   "--mount", "--shm-size", "--ipc", "--runtime", "-u", "--user", "--env-file", "-l",
                                   "--label", "--device", "--platform", "--cpus", "--memory", "-m", "--hostname", "-h",
                                   "--restart", "--ulimit", "--log-driver", "--pull", "--entrypoint-args", "--add-host",
                                   "--cap-add", "--cap-drop", "--security-opt", "--tmpfs", "--group-add", "--log-opt",
                                   "--dns", "--ip", "--pid", "--uts", "--userns", "--cpuset-cpus", "--stop-signal",
                                   "--link", "--expose", "--label-file", "--sysctl", "--volumes-from", "--cidfile"})
_DOCKER_FLAGS = frozenset({"--entrypoint", "-e", "--env", "-d", "--detach", "--rm", "-i", "--interactive", "-t", "--tty",
                           "-it", "-ti", "--privileged", "--init", "--read-only"})


def _docker_option(word: str) -> bool:
    """Whether a word is an option of `docker run` (not of the image's program)."""
    name = word.partition("=")[0]
    return name in _DOCKER_VALUE_OPTIONS or name in _DOCKER_FLAGS


class DockerRun(NamedTuple):
    start: int                      # where the image's arguments start
    env: dict[str, str | None]      # -e/--env (None: passed on from the caller's environment)
    image: str
    entrypoint: str | None          # --entrypoint, replacing the image's own
    runtime: str | None = None      # --runtime (`habana`: Intel Gaudi's container runtime)


def docker_run(words: list[str]) -> DockerRun | None:
    """`docker run [OPTIONS] IMAGE [ARGS]` (or podman): the image is the
    first word that names a vLLM image, else the first word that is no
    option or option value."""
    for i in range(len(words) - 1):
        if words[i].rsplit("/", 1)[-1] in ("docker", "podman") and words[i + 1] == "run":
            break
    else:
        return None
    env: dict[str, str | None] = {}
    entrypoint = runtime = None
    first = None
    j = i + 2
    while j < len(words):
        w = words[j]
        if w == "--entrypoint" and j + 1 < len(words):
            entrypoint = words[j + 1]
            j += 2
            continue
        if w == "--runtime" and j + 1 < len(words):
            runtime = words[j + 1]
            j += 2
            continue
        if w.startswith("--entrypoint="):
            entrypoint = w[len("--entrypoint="):]
        elif w.startswith("--runtime="):
            runtime = w[len("--runtime="):]
        elif w in ("-e", "--env") and j + 1 < len(words):
            name, eq, value = words[j + 1].partition("=")
            env[name] = value if eq else None
            j += 2
            continue
        elif w.startswith("--env="):
            name, eq, value = w[6:].partition("=")
            env[name] = value if eq else None
        elif w in _DOCKER_VALUE_OPTIONS:
            j += 1  # its value (a volume path may well contain `vllm-openai`) is not the image
        elif not w.startswith("-"):
            if VLLM_IMAGE.search(w):
                return DockerRun(j + 1, env, w, entrypoint, runtime)
            if first is None and not (has_unresolved(w) and j + 1 < len(words) and _docker_option(words[j + 1])):
                first = j  # a value not known followed by docker's options is options (`$MOUNTS --entrypoint`)
        j += 1
    if first is not None:
        return DockerRun(first + 1, env, words[first], entrypoint, runtime)
    return None


# Slurm's container plugin, pyxis, adds `--container-image` to srun (and to
# sbatch, whose script then runs in the container): the task runs in a
# container of that image, an enroot URI `[USER@][REGISTRY#]IMAGE[:TAG]` or a
# squashfs file, and the image's entrypoint runs only with
# `--container-entrypoint` (NVIDIA/pyxis README.md, `srun --help`, `### sbatch`).
_ENROOT_USER = re.compile(r"^[^@/#:]+@")


def _container_image(words: list[str]) -> str | None:
    """The image of the last `--container-image` among pyxis options, as a
    registry names it (`nvcr.io#nvidia/x` is `nvcr.io/nvidia/x`)."""
    image = None
    for j, word in enumerate(words):
        if word == "--container-image" and j + 1 < len(words):
            image = words[j + 1]
        elif word.startswith("--container-image="):
            image = word.partition("=")[2]
    return _ENROOT_USER.sub("", image.removeprefix("docker://")).replace("#", "/", 1) if image else None


def srun_image(words: list[str], end: int) -> str | None:
    """The image of the `srun --container-image=IMAGE` among the words
    before ``end``, where the command srun runs starts."""
    for i, word in enumerate(words[:end]):
        if word.rsplit("/", 1)[-1] == "srun":
            return _container_image(words[i + 1:end])
    return None


# Apptainer (formerly Singularity) runs `exec IMAGE COMMAND...` in a container of IMAGE: a `docker://`
# reference, a library or oras URI, or an image file (apptainer.org/docs/user/main/cli/apptainer_exec.html).
# The options of `exec` that take a value, as a word of their own.
_APPTAINER = frozenset({"apptainer", "singularity"})
_APPTAINER_VALUES = frozenset({"-B", "--bind", "--mount", "--env", "--env-file", "-H", "--home", "-o", "--overlay",
                               "--pwd", "-W", "--workdir", "--scratch", "-S", "--security", "--network", "--net",
                               "--network-args", "--hostname", "--dns", "--add-caps", "--drop-caps", "--app",
                               "--cpus", "--memory", "--apply-cgroups"})


def apptainer_image(words: list[str], end: int) -> str | None:
    """The image of the `apptainer exec [OPTIONS] IMAGE` (or `singularity`)
    among the words before ``end``, where the command it runs starts."""
    for i, word in enumerate(words[:end]):
        if word.rsplit("/", 1)[-1] in _APPTAINER and i + 1 < end and words[i + 1] == "exec":
            j = i + 2
            while j < end and words[j].startswith("-"):
                j += 2 if words[j] in _APPTAINER_VALUES else 1
            return words[j].removeprefix("docker://") if j < end else None
    return None


def batch_image(text: str) -> str | None:
    """The image of an sbatch script's `#SBATCH --container-image` directive:
    sbatch reads its directives up to the first line that is neither a
    comment nor blank (`\\#` escapes the registry's `#` there)."""
    words: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if stripped.startswith("#SBATCH"):
            words += stripped[len("#SBATCH"):].replace("\\#", "#").split()
    return _container_image(words)


# vLLM's repository, as `git clone` is given it.
_VLLM_REPOSITORY = re.compile(r"(?:https?://|git@|ssh://git@)github\.com[/:]vllm-project/vllm(?:\.git)?/?")
# `git clone`'s options that take a value (as a word of its own); `-b`/`--branch` is the ref.
_CLONE_VALUE_OPTIONS = frozenset({"-o", "--origin", "--depth", "-c", "--config", "--reference", "-u",
                                  "--upload-pack", "--template", "--separate-git-dir", "--filter", "-j", "--jobs"})


def git_source(words: list[str]) -> tuple[str, str | None, str] | None:
    """What a git command does to a vLLM source tree: ("clone", REF, DIR)
    for `git clone [-b REF] URL [DIR]` of vLLM's repository (REF None: its
    default branch), ("other", None, DIR) for a clone of another one,
    ("checkout", REF, "") for `git checkout REF` (or `git switch`; with
    `-b NEW REF`, REF); None for anything else."""
    if not words or words[0].rsplit("/", 1)[-1] != "git":
        return None
    at = 1
    while at + 1 < len(words) and words[at] in ("-C", "-c"):  # `git -C DIR checkout REF`
        at += 2
    command, rest = words[at] if at < len(words) else "", words[at + 1:]
    if command in ("checkout", "switch"):
        operands = [word for word in rest if not word.startswith("-")]
        return ("checkout", operands[-1], "") if operands and "--" not in rest else None  # (`-- FILE`: no switch)
    if command != "clone":
        return None
    ref, operands, index = None, [], 0
    while index < len(rest):
        word = rest[index]
        if word in ("-b", "--branch") and index + 1 < len(rest):
            ref = rest[index + 1]
            index += 1
        elif word.startswith("--branch="):
            ref = word.partition("=")[2]
        elif word in _CLONE_VALUE_OPTIONS:
            index += 1
        elif not word.startswith("-"):
            operands.append(word)
        index += 1
    if not operands:
        return None
    folder = operands[1] if len(operands) > 1 else operands[0].rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return ("clone", ref, folder) if _VLLM_REPOSITORY.fullmatch(operands[0]) else ("other", None, folder)


def installs_source(words: list[str], folder: str, *, here: bool = True) -> bool:
    """Whether a command builds and installs the source tree in ``folder``:
    `python setup.py install` (or `develop`), `pip install [-e] .` (uv's
    `uv pip install`, `python -m pip`) where the script is in it (``here``:
    it has not changed into another directory since the clone), or pip
    given the folder's path."""
    if "setup.py" in words:
        return here and any(word in ("install", "develop") for word in words[words.index("setup.py") + 1:])
    if "install" not in words or not any(word.rsplit("/", 1)[-1] in ("pip", "pip3", "uv") for word in words):
        return False
    # pip reads a word as a path where it holds a `/` or starts with `.` (a bare `vllm` is PyPI's).
    return any((here and word.rstrip("/") == ".") or word.rstrip("/") == "./" + folder or
               ("/" in word and same_folder(word, folder))
               for word in words[words.index("install") + 1:])


def same_folder(path: str, folder: str) -> bool:
    """Whether ``path`` (a `cd`'s, pip's) names the cloned ``folder``, by its last part."""
    return path.rstrip("/").rsplit("/", 1)[-1] == folder.rstrip("/").rsplit("/", 1)[-1]


# kubectl's commands that send a manifest to the API server as it is (`oc` is OpenShift's kubectl).
_KUBECTL = frozenset({"kubectl", "oc"})
_APPLYING = frozenset({"apply", "create", "replace"})


def applied_file(words: list[str]) -> str | None:
    """The file ``kubectl apply -f FILE`` (``create``, ``replace``; ``oc``)
    sends to the API server: ``-`` for its standard input. None for any
    other command, or one without ``-f``/``--filename``."""
    if not words or words[0].rsplit("/", 1)[-1] not in _KUBECTL:
        return None
    command = next((i for i, word in enumerate(words) if word in _APPLYING), None)
    if command is None:
        return None
    rest = words[command + 1:]
    for i, word in enumerate(rest):
        if word in ("-f", "--filename"):
            return rest[i + 1] if i + 1 < len(rest) else None
        if word.startswith("--filename="):
            return word[len("--filename="):]
        if word.startswith("-f") and not word.startswith("--"):
            return word[2:].removeprefix("=")
    return None
