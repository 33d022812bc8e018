"""A vLLM launch found in a file, and the deployment it makes.

Each reader (shell, Dockerfile, Kubernetes, ...) finds launches: the
command's words with where each came from, its environment, and how a
``--config`` file named in it is found. :func:`deployment` then reads the
command as vLLM does (:func:`hma_policy.core.command.read_command`) and adds
what the file's directives say about the model and platform.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from ...core.command import StandIn, read_command
from ...core.markers import UNRESOLVED, has_unresolved, plain, references, show
from ...core.options import DEFAULT_OPTIONS, ENV_NAMES, STORE_BOOLEANS, STORE_BOOLEANS_UNTIL, Arg, ConfigFile, VllmOptions
from ...core.releases import release_numbers
from ...core.errors import InputError, Problem
from .context import RUNTIME_FACTS, Ctx
from .deployment import Deployment
from .files import NOT_REGULAR, read_text, regular
from .connector_code import connector_notes
from .release import ReleaseHint, platform_of

__all__ = ["DEVICE_OPTION", "Invocation", "deployment", "apply_facts", "config_from_fs", "platform_of_env", "platform_of_runtime", "read_from_env", "SPYRE_ENV", "PLATFORM_ENV", "PLUGINS",
           "refuse", "release_noted", "with_facts"]

ConfigReader = Callable[[str], "str | ConfigFile"]


@dataclass
class Invocation:
    """A vLLM server command found in a file, before its options are read."""

    argv: list[Arg]             # the command's words, from the program (`vllm serve ...`, `python3 -m ...`)
    line: int | None
    env: dict[str, Arg]         # the command's environment: name -> value and where it was set
    anchor: str
    name: str | None = None
    resource: tuple[tuple[str, str], ...] = ()
    container: str | None = None
    role: str | None = None
    chain: tuple[str, ...] = ()     # files merged before the --config file (a values file, a .env)
    config_reader: ConfigReader | None = None
    facts: Any = None
    facts_origin: str = ""
    facts_problem: Problem | None = None
    # Alone, a config file is run as `vllm serve MODEL --config FILE`: the model may come from elsewhere.
    require_model: bool = True
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    sequence: int | None = None     # where in its script's reading it was met (files written before it are seen)
    image: str | None = None        # the container image that runs it, when the file names one
    release: ReleaseHint | None = None  # the vLLM release its image or a pin names (a directive's wins)
    # The platform what deploys it says vLLM runs on, and what says so, where its image does not
    # (a container whose environment holds vllm-spyre's settings).
    platform: tuple[str, str] | None = None
    # Read again once per path through the `if` or `case` that made a value it reads unknown
    # (shell_run.Interpreter.paths): (which path, the words, the environment) for each.
    paths: tuple[tuple[str, list[Arg], dict[str, Arg]], ...] = ()
    # The unknown values (their markers) that `if`s or `case`s set on more paths than are read
    # one by one: a word made of one may hold the options a path gives, so it is not a note. Beside
    # paths, those read on one path alone (a chain's merges that do not decide), which they do not settle.
    unread_paths: frozenset[str] = frozenset()


def release_noted(ctx: Ctx, release: ReleaseHint | None, facts: dict[str, Any], facts_origin: str,
                  line: int | None, notes: list[Problem]) -> ReleaseHint | None:
    """A launch's release: a directive's ``vllm_version`` over what deploys
    it; where neither names one, why, as a ``source.release_unknown`` note."""
    if isinstance(facts.get("vllm_version"), str):
        release = ReleaseHint(facts["vllm_version"], facts_origin)
    # (a range, `vllm<=0.6.3`, is noted where the rules cannot tell which release it installs: audit/run.py)
    if release is not None and release.version is None and not release.allowed:
        notes.append(ctx.problem("source.release_unknown", f"the vLLM release is not known: {release.origin}",
                                 line=line))
    return release


def refuse(problem: Problem) -> InputError:
    """The exception a config reader raises to refuse a file."""
    return InputError([problem])


def apply_facts(invocations: list[Invocation], ctx: Ctx) -> None:
    """Each launch's facts: the directive above its line, unless it has its own."""
    for inv in invocations:
        if inv.facts is None and inv.facts_problem is None:
            facts, problem, line = ctx.facts_for(inv.line)
            inv.facts, inv.facts_problem = facts, problem
            inv.facts_origin = f"line {line}: hma-policy directive" if line else ""


def deployment(inv: Invocation, ctx: Ctx, fmt: str) -> Deployment:
    """The deployment document of one vLLM command, or its input problems."""
    facts = inv.facts if isinstance(inv.facts, dict) else {}
    # Read on each path first: only where every path reads can the paths settle what the command leaves open.
    documents, stood, refused, path_options, opened = _paths(inv, ctx, facts) if inv.paths else ((), (), (), (), ())
    result = read_command(inv.argv, env=inv.env, read_config=inv.config_reader, file=ctx.display,
                          line=inv.line, require_model=inv.require_model, options=_parser_of(inv.release),
                          per_path=_settled(inv) if documents else inv.unread_paths,
                          dynamo=inv.release.dynamo if inv.release is not None else None)
    # The problems of the command as the paths read it: read whole, its unknown words may hold any
    # options (a note says so); read on each path, one path's words are known to leave it undecided
    # (`KVARG=(--kv-transfer-config "$X")` in an `if`, then `vllm serve m "${KVARG[@]}"`), or to leave
    # values read for their type alone (a stand-in's, which the paths may still settle).
    on_path = bool(refused) and (not result.problems or bool(documents))
    read = list(refused) if on_path else list(result.problems)
    problems = inv.problems + read
    if inv.facts_problem is not None:
        problems.append(inv.facts_problem)
    # Where each field came from: a directive's model wins over the command's, the command's env over a directive's.
    origins = {key: inv.facts_origin for key in RUNTIME_FACTS if key in facts}
    origins.update((k, v) for k, v in result.origins if not (k == "model" and "model" in facts))
    platform = _platform(inv)
    if platform is not None:
        origins.setdefault("platform", platform[1])
    device = _device(inv.argv) if platform is None and "platform" not in facts else None
    unknown_device = device is not None and has_unresolved(device[0])
    if device is not None and unknown_device:  # (the platform it picks decides: vLLM 0.9.2's cpu, vllm-gcu's gcu)
        problems.append(ctx.problem("source.unresolved", f"`{DEVICE_OPTION}` takes its value from "
                                    f"{references(device[0])}: the platform it picks decides whether vLLM runs the "
                                    "hybrid KV cache manager", line=inv.line,
                                    hint="the audit reads files and never runs them; write the value in the file"))
    document = _document(inv, result.document or {}, facts)
    # A stand-in answers for the command's own problems only (core.command.StandIn).
    stand_in = result.stand_in if result.stand_in is not None and len(problems) == len(result.problems) else None
    if stand_in is not None:
        stand_in = stand_in._replace(document=_document(inv, stand_in.document, facts))
    paths = documents if read and len(problems) == len(read) else ()
    model = result.model
    called = inv.name or (model.text if model is not None and not has_unresolved(model.text) else None)
    # A path's problems say more than the note that the command's unknown words may hold options; a path
    # whose own words may hold options is read only as far as they go, which its note says (the paths
    # agreeing settles no more than that).
    notes = list(inv.notes) + [n for n in result.notes if not (on_path and n.code == "source.unresolved_arguments")
                               and not (unknown_device and n.message.startswith(f"`{DEVICE_OPTION}` takes"))]
    said = {n.message for n in notes}
    notes += [replace(n, message=f"on {which}: {n.message}") for which, n in opened if paths and n.message not in said]
    release = release_noted(ctx, inv.release, facts, inv.facts_origin, inv.line, notes)
    notes += connector_notes(ctx, document, inv.line)
    chain = tuple(dict.fromkeys((ctx.display,) + inv.chain + result.configs))
    # (notes each once: two values of one option from the same unknown, `--lora-modules a={X} b={X}`, say the same)
    return Deployment(ctx.display, fmt, inv.anchor, inv.line, called, None if problems else document,
                      tuple(problems), tuple(dict.fromkeys(notes)), tuple(sorted(origins.items())), inv.resource,
                      inv.container, inv.role, chain, release, stand_in, paths,
                      tuple(dict.fromkeys((option.text, option.origin) for option in result.unchecked + path_options)),
                      stood if paths else ())


def _paths(inv: Invocation, ctx: Ctx, facts: dict[str, Any]) -> tuple[tuple[tuple[str, dict[str, Any]], ...],
                                                                      tuple[tuple[str, StandIn], ...],
                                                                      tuple[Problem, ...], tuple[Arg, ...],
                                                                      tuple[tuple[str, Problem], ...]]:
    """The deployment document on each path of ``inv.paths`` (which path,
    the document), none unless each path's command reads without a
    problem, or with only values read for their type alone (a stand-in's
    document: `if c: cmd += ["--speculative-config", c]`), and those
    stand-ins (which path, the StandIn); the problems of the first path whose only problems are
    unknown values the decision reads, each message saying which path it
    is (a path's other problems may come of reading it apart from the
    rest: they are left to the command's own reading); and the options the
    paths give that the decision does not read, to be checked against the
    release as the command's own are (`if t: cmd.append("--opt=...")`);
    and the notes of the paths whose own words may hold options (a list
    the file does not give on one path: flytekit's `+ (extra.split() if
    extra else [])`), each with its path."""
    out: list[tuple[str, dict[str, Any]]] = []
    stood: list[tuple[str, StandIn]] = []
    unknown: tuple[Problem, ...] = ()
    options: list[Arg] = []
    opened: list[tuple[str, Problem]] = []
    for which, argv, env in inv.paths:
        result = read_command(argv, env=env, read_config=inv.config_reader, file=ctx.display,
                              line=inv.line, require_model=inv.require_model, options=_parser_of(inv.release),
                              dynamo=inv.release.dynamo if inv.release is not None else None)
        options += result.unchecked
        if not result.problems and result.document is not None:
            out.append((which, _document(inv, result.document, facts)))
            opened += [(which, n) for n in result.notes if n.code == "source.unresolved_arguments"]
            continue
        if not unknown and result.problems and all(p.code == "source.unresolved" for p in result.problems):
            unknown = tuple(replace(p, message=f"on {which}: {p.message}") for p in result.problems)
        if result.stand_in is not None:
            document = _document(inv, result.stand_in.document, facts)
            out.append((which, document))
            stood.append((which, result.stand_in._replace(document=document)))
            opened += [(which, n) for n in result.notes if n.code == "source.unresolved_arguments"]
    if len(out) < len(inv.paths):
        return (), (), unknown, tuple(options), ()
    # (where a path leaves values unknown, what it leaves says more than that the paths differ)
    return tuple(out), tuple(stood), unknown if stood else (), tuple(options), tuple(opened)


def _parser_of(release: ReleaseHint | None) -> VllmOptions:
    """How the release that runs a launch parses its command line, as far as
    it differs from the default's: before 0.9, some booleans took a value."""
    if release is None or release.version is None or release_numbers(release.version) >= STORE_BOOLEANS_UNTIL:
        return DEFAULT_OPTIONS
    return VllmOptions(release=release.version, valued=STORE_BOOLEANS)


def _settled(inv: Invocation) -> frozenset[str]:
    """The unknown values of a launch that its paths read as each sets them:
    those none of the paths still holds (a value no path sets is in each)."""
    def markers(argv: list[Arg], env: dict[str, Any]) -> set[str]:
        texts = [w.text for w in argv] + [v.text for v in env.values() if isinstance(v, Arg)]
        return {m.group(0) for text in texts if "\x00" in text for m in UNRESOLVED.finditer(text)}

    left = set().union(*(markers(argv, env) for _, argv, env in inv.paths))
    return frozenset(markers(inv.argv, inv.env) - left - inv.unread_paths)


def _document(inv: Invocation, read: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    document = with_facts(read, facts, inv.name)
    platform = _platform(inv)
    if platform is not None:  # the image's platform, or the environment's, unless a directive names one
        given: dict[str, Any] = document["platform"] if isinstance(document.get("platform"), dict) else {}
        document["platform"] = {"name": platform[0], **given}
    return document


# Settings only a platform's vLLM reads, by the platform an environment that sets one runs vLLM on:
# vllm-spyre's (vllm_spyre/envs.py: VLLM_SPYRE_USE_CB, VLLM_SPYRE_DYNAMO_BACKEND, ...), AWS Neuron's
# (VLLM_NEURON_FRAMEWORK, which vllm-neuron and vLLM's own Neuron backend read), vllm-openvino's
# (vllm_openvino/envs.py: VLLM_OPENVINO_DEVICE, VLLM_OPENVINO_KVCACHE_SPACE, ...), and the devices
# variable of a plugin's platform (its device_control_env_var): vllm-qaic's QaicPlatform
# (platform_base.py, dc7351f5), vllm-gcu's GCUPlatform (vllm_gcu/gcu.py, 7b5aaca9), Cambricon's
# MLUPlatform (vllm_mlu/platforms/mlu.py, b9925203), Moore Threads' MUSAPlatform (and its container
# runtime's MTHREADS_VISIBLE_DEVICES), MetaX's MACA_VISIBLE_DEVICES (vllm_metax, 3aadf084). Not
# Kunlun's XPU_VISIBLE_DEVICES: FastChat sets it beside CUDA_VISIBLE_DEVICES for any GPU, and TorchServe
# for Intel's XPUs.
SPYRE_ENV = "VLLM_SPYRE_"
PLATFORM_ENV = ((SPYRE_ENV, "spyre"), ("VLLM_NEURON_", "neuron"), ("QAIC_VISIBLE_DEVICES", "qaic"),
                ("TOPS_VISIBLE_DEVICES", "gcu"), ("VLLM_OPENVINO_", "openvino"), ("MLU_VISIBLE_DEVICES", "mlu"),
                ("MUSA_VISIBLE_DEVICES", "musa"), ("MTHREADS_VISIBLE_DEVICES", "musa"), ("MACA_VISIBLE_DEVICES", "maca"))


# vLLM loads only the plugins VLLM_PLUGINS names, where it is set (vllm/plugins/__init__.py,
# load_plugins_by_group, platform plugins too): a platform plugin it does not name runs no platform.
# Each plugin platform's entry-point name (its package's `vllm.platform_plugins`): vllm-plugin-FL's
# `fl` beside Enflame's TOPS_VISIBLE_DEVICES runs FL's platform, not vllm-gcu's.
PLUGINS = "VLLM_PLUGINS"
_PLUGIN_NAMES = {"spyre": "spyre", "qaic": "qaic", "gcu": "register_platform_plugins", "openvino": "openvino",
                 "kunlun": "kunlun", "maca": "metax", "mlu": "mlu", "musa": "musa"}


def read_from_env(name: str) -> bool:
    """Whether a launch takes the variable ``name`` from its environment: one
    the decision reads, or one that names the platform (vllm-spyre's, Neuron's,
    the plugins vLLM loads)."""
    return name in ENV_NAMES or name == PLUGINS or any(name.startswith(prefix) for prefix, _ in PLATFORM_ENV)


def _not_loaded(platform: str, env: dict[str, Arg]) -> bool:
    """Whether the environment's VLLM_PLUGINS, written out, leaves out the plugin that runs ``platform``."""
    name, given = _PLUGIN_NAMES.get(platform), env.get(PLUGINS)
    text = given.text if isinstance(given, Arg) else given
    return name is not None and isinstance(text, str) and not has_unresolved(text) and name not in text.split(",")


# Container runtimes that run on one platform only: Intel Gaudi's (habana-container-runtime), which
# `docker run --runtime=habana` and a compose service's `runtime: habana` name, and Moore Threads'
# (mthreads-container-runtime: vllm-musa's docker/README.md runs `docker run --runtime=mthreads`).
RUNTIME_PLATFORMS = {"habana": "hpu", "mthreads": "musa"}


def platform_of_runtime(runtime: Any, where: str) -> tuple[str, str] | None:
    """The platform a container runtime says vLLM runs on, and what says so (``where``: its option)."""
    return (RUNTIME_PLATFORMS[runtime], f"{where} {runtime}") if runtime in RUNTIME_PLATFORMS else None


# vLLM's `--device` (an engine option up to 0.9.2, and of AWS's Neuron fork: `device="neuron"` in
# aws-neuron/upstreaming-to-vllm's examples; vllm-gcu adds `gcu` to its choices), by the platform each
# value picks; `auto` and `cuda` pick none.
DEVICE_OPTION = "--device"
_DEVICE_PLATFORMS = {"neuron": "neuron", "cpu": "cpu", "xpu": "xpu", "hpu": "hpu", "tpu": "tpu", "gcu": "gcu"}


def platform_of_device(argv: list[Arg]) -> tuple[str, str] | None:
    """The platform a command's `--device` picks, and what says so (the last one given wins, as argparse's)."""
    given = _device(argv)
    return (_DEVICE_PLATFORMS[given[0]], f"{given[1]}: {DEVICE_OPTION} {given[0]}") \
        if given is not None and given[0] in _DEVICE_PLATFORMS else None


def _device(argv: list[Arg]) -> tuple[str, str] | None:
    """The value of a command's last `--device`, and its origin."""
    found = None
    for at, arg in enumerate(argv):
        name, eq, value = arg.text.partition("=")
        if name == DEVICE_OPTION:
            found = (value if eq else argv[at + 1].text if at + 1 < len(argv) else "", arg.origin)
    return found


def platform_of_env(names: Iterable[str]) -> tuple[str, str] | None:
    """The platform an environment's variable names say vLLM runs on, and which one says so."""
    names = sorted(names)
    return next(((platform, f"env {name}") for prefix, platform in PLATFORM_ENV for name in names
                 if name.startswith(prefix)), None)


def _platform(inv: Invocation) -> tuple[str, str] | None:
    """The platform a launch runs vLLM on, where something says it is not
    CUDA, and what says so: its image (vLLM's CPU or ROCm build,
    vllm-ascend's), else its deployer (a container's environment), else the
    command's own environment (`docker run -e`, `NAME=value vllm serve`),
    else the image a Dockerfile copies it into, else its `--device`."""
    platform = platform_of(inv.image)
    if platform is not None:
        return platform, f"image {plain(str(inv.image))}"
    built = (inv.release.platform, inv.release.origin) if inv.release is not None and inv.release.platform else None
    found = inv.platform or platform_of_env(inv.env) or built or platform_of_device(inv.argv)
    return None if found is not None and _not_loaded(found[0], inv.env) else found


def with_facts(read: dict[str, Any], facts: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """The deployment document: what a launch ``read`` gives (a command, a
    deployer's config), with the facts a directive gives, named ``name``."""
    document: dict[str, Any] = {}
    if name:
        document["name"] = plain(name)  # a label: its unknown parts as the file writes them
    document.update((k, v) for k, v in read.items() if k not in ("model", "env"))
    for key in RUNTIME_FACTS:
        if key in facts:
            document[key] = facts[key]
    if "model" in read:
        model_doc = dict(facts["model"]) if isinstance(facts.get("model"), dict) else {}
        model_doc["name"] = read["model"]["name"]  # the command's model wins over a directive's
        document["model"] = model_doc
    if "env" in read:
        env: dict[str, Any] = dict(facts["env"]) if isinstance(facts.get("env"), dict) else {}
        env.update(read["env"])
        document["env"] = env
    return document


def config_from_fs(ctx: Ctx, base: Path,
                   in_image: Callable[[str], Path | None] | None = None) -> Callable[[str], ConfigFile]:
    """A reader of `--config FILE` for a file on disk: a relative name is
    read relative to ``base`` (the file's directory); the file must be inside
    the audited roots (symlinks resolved) and within the size limit. For a
    Dockerfile, ``in_image`` maps a path inside the image to the build
    context through the COPY instructions."""

    def read(name: str) -> ConfigFile:
        if "\x00" in name:  # a value not known (`$APPS_DIR/x.yaml`), which no file has as its name
            raise refuse(ctx.problem("source.config_unresolved", f"`{show(name)}` is not known from this file"))
        target = in_image(name) if in_image else None
        if target is None:
            if in_image is not None and name.startswith("/"):
                raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` names a path inside the "
                                         "image that no COPY instruction of this Dockerfile provides"))
            target = Path(name) if os.path.isabs(name) else base / name
        if not ctx.fs:
            raise refuse(ctx.problem("source.config_unresolved", f"`--config {name}` cannot be located from this file"))
        shown = os.path.normpath(target)
        try:
            real = target.resolve(strict=True)
        except (OSError, RuntimeError):
            raise refuse(ctx.problem("source.config_missing", f"the config file `{name}` does not exist "
                                     f"(looked for `{shown}`); vLLM fails to start without it")) from None
        if not ctx.may_read(real):
            raise refuse(ctx.problem("source.config_outside", f"the config file `{shown}` is outside the audited paths",
                                     hint="audit its directory too, or allow it with --config-root DIR"))
        if not regular(real):
            raise refuse(ctx.problem("source.config_missing", f"the config file `{shown}` is not a regular file"))
        text, problem = read_text(real, shown, ctx.limits.max_config_bytes)
        if problem is NOT_REGULAR:
            raise refuse(ctx.problem("source.config_missing", f"the config file `{shown}` is not a regular file"))
        if problem is not None:
            raise refuse(problem)
        return ConfigFile(cast(str, text), shown)

    return read
