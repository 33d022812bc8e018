"""The vLLM release a Python launcher runs, where a file beside it names
it: what builds the environment the launcher runs in. The launcher's own
pins (a Modal image's ``pip_install("vllm==X")``) come first; they are
read in python.py. Then, in order:

- the RayServices in the audited paths whose application's ``import_path``
  names the launcher's module: the ``vllm==X`` their ``runtime_env``'s
  ``pip`` installs over the image's (GoogleCloudPlatform/kubernetes-engine-
  samples' Ray Serve apps);
- a Dockerfile in its directory, or up to two above it, that COPYs or ADDs
  it or a folder that holds it, by the release of the image it builds
  (awslabs/ai-on-eks' Ray Serve blueprints, runpod-workers/worker-vllm);
- the Truss it is the model of (``model/model.py`` beside the Truss's
  ``config.yaml``): a ``vllm==X`` among the config's ``requirements``
  (basetenlabs/truss-examples);
- the Cog model whose ``cog.yaml`` beside it names it as ``predict``: a
  ``vllm==X`` among ``build.python_packages`` or in a ``pip install`` of
  ``build.run`` (replicate/cog-vllm);
- the Cerebrium project (its ``cerebrium.toml``, the nearest in its
  directory or above) that builds it: a ``vllm==X`` installed by its
  ``pre_build_commands`` or ``shell_commands``, or pinned among its pip
  dependencies (CerebriumAI/examples);
- the nearest ``requirements.txt``, ``uv.lock`` or ``pyproject.toml`` (its
  PEP 621 dependencies) in its directory or above, within the audited
  paths, where it pins exactly one vLLM (bentoml/BentoVLLM, OpenPipe/ART);
- the Truss's ``base_image``, by its tag (a Truss with no pin of its own
  runs the vLLM its base image holds).

Each file is read only inside the audited paths and never run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .companions import companion_text, read_companion, shown as companion_name
from .context import Ctx
from .copied import built_with
from .files import toml_table
from .rayserve import served_modules
from .release import PIN, RANGE, REQUIREMENT, ReleaseHint, from_image, pinned, specifiers
from .truss import is_truss_config, truss_pin

__all__ = ["launcher_release", "truss_runs_other", "truss_script_release"]

# The folder a Truss keeps its model in, unless its config says another (TrussConfig.model_module_dir).
_TRUSS_MODEL_DIR = "model"


def launcher_release(ctx: Ctx) -> ReleaseHint | None:
    """The release a file beside the launcher ``ctx`` names, or None."""
    path = ctx.real_path()
    if path is None:
        return None
    folder = path.parent
    served = _served_pin(ctx, path)
    if served is not None and not served.images_unknown:
        return served.hint
    truss = _truss_of(ctx, folder)
    image = built_with(ctx)
    if image is not None and image.version is not None:
        return image
    if served is not None:  # (RayServices whose images say nothing: the image a Dockerfile copies it into may)
        return image or served.hint
    # (an image whose release is not known says so where nothing else names one)
    return (truss_pin(truss[0], shown=truss[1]) if truss else None) \
        or _cog_pin(ctx, folder) or _cerebrium_pin(ctx, folder) or _requirements_pin(ctx, folder) \
        or (_base_image(*truss) if truss else None) or image


class _Served(NamedTuple):
    hint: ReleaseHint
    images_unknown: bool  # nothing installs vLLM over the RayServices' images, and no image tells its release


def _served_pin(ctx: Ctx, path: Path) -> _Served | None:
    """The vLLM release that the RayServices whose application runs the
    launcher as its module import: the one their `runtime_env` installs
    (`pip`), else their image's, where each of them gives the same; a
    release not known where they differ (or one installs `vllm` unpinned,
    whatever is newest). None where no RayService runs it."""
    given: dict[str, list[str]] = {}  # the release each application imports ("": not known) -> whence
    images_only = True
    for app in served_modules(ctx):
        if not path.as_posix().endswith("/" + app.module.replace(".", "/") + ".py"):
            continue
        # (Ray's runtime_env installs `pip` or `uv` packages, a list or {packages: [...]}, over the image's)
        installer = app.runtime_env.get("pip", app.runtime_env.get("uv"))
        listed = installer.get("packages") if isinstance(installer, dict) else installer
        packages = [p.strip() for p in (listed if isinstance(listed, list) else []) if isinstance(p, str)]
        pins = [match.group(1) for package in packages if (match := PIN.fullmatch(package))]
        served = f"{app.where} (import_path `{app.import_path}`)"
        if len(pins) == 1:
            given.setdefault(pinned(pins[0]), []).append(f"pip pin vllm=={pinned(pins[0])} in the runtime_env of {served}")
        elif pins or any(_VLLM_PACKAGE.match(package) for package in packages) \
                or installer is not None and not isinstance(listed, list) or "conda" in app.runtime_env:
            given.setdefault("", []).append(f"no pin in {served}")  # (also: a requirements file, a conda environment)
        else:  # (nothing installs vLLM over the image's)
            image = app.image or ReleaseHint(None, "no image")
            given.setdefault(image.version or "", []).append(f"{image.origin}, in {served}")
            continue
        images_only = False
    if not given:
        return None
    whences = "; ".join(sorted(w for whence in given.values() for w in whence))
    if len(given) > 1:
        return _Served(ReleaseHint(None, "the RayServices whose applications run this file run different vLLM "
                                         f"releases: {whences}"), False)
    ((version, whence),) = given.items()
    if len(whence) > 1 and not version:
        return _Served(ReleaseHint(None, f"the RayServices whose applications run this file: {whences}"), images_only)
    return _Served(ReleaseHint(version or None, f"{whence[0]}, whose application runs this file"),
                   images_only and not version)


# A package list's entry that installs vLLM, pinned or not (`vllm`, `vllm[audio]>=0.6`).
_VLLM_PACKAGE = re.compile(r"(?i)vllm(?![\w.-])")


def truss_runs_other(ctx: Ctx) -> str | None:
    """Where the launcher is the model of a Truss whose config runs a server
    of its own (``docker_server.start_command``), which Truss runs instead of
    the model (its supervisord's only program): why it is not run; else None."""
    path = ctx.real_path()
    truss = _truss_of(ctx, path.parent) if path is not None else None
    if truss is None or not is_truss_config(truss[0], "config.yaml"):
        return None
    return (f"the model of a Truss whose config runs a server of its own ({truss[1].split(' (')[0]}: "
            "`docker_server.start_command`), which Truss runs instead of the model")


def truss_script_release(ctx: Ctx) -> ReleaseHint | None:
    """The release of the Truss whose ``docker_server.start_command`` runs
    the script ``ctx`` from the Truss's data folder, which Truss copies to
    ``/app/data`` (``sh -c /app/data/do.sh``): its requirements' pin, else
    its base image's tag; None elsewhere."""
    path = ctx.real_path()
    if path is None:
        return None
    data = next((p for p in path.parents[:3] if p.name == "data"), None)  # (data/do.sh, data/scripts/do.sh)
    read = _mapping(ctx, data.parent / "config.yaml") if data is not None else None
    if data is None or read is None or not is_truss_config(read[0], "config.yaml") \
            or f"/app/data/{path.relative_to(data).as_posix()}" not in read[0]["docker_server"]["start_command"]:
        return None
    shown = f"{read[1]} (the Truss whose start_command runs this file)"
    return truss_pin(read[0], shown=shown) or _base_image(read[0], shown)


def _truss_of(ctx: Ctx, folder: Path) -> tuple[dict[str, Any], str] | None:
    """The config of the Truss whose model folder holds the launcher, and its name in a report."""
    read = _mapping(ctx, folder.parent / "config.yaml")
    if read is None:
        return None
    value, shown = read
    if not any(key in value for key in ("model_name", "model_class_name", "model_metadata", "base_image")) \
            or value.get("model_module_dir", _TRUSS_MODEL_DIR) != folder.name:
        return None
    return value, f"{shown} (the Truss whose model this is)"


def _mapping(ctx: Ctx, path: Path) -> tuple[dict[str, Any], str] | None:
    """A YAML file of one mapping inside the audited paths, and its name in a report; None for any other."""
    if not ctx.may_read(path.parent) or not path.is_file():
        return None
    read = read_companion(ctx, path)
    if read is None or len(read.documents) != 1 or not isinstance(read.documents[0][0], dict):
        return None
    return read.documents[0][0], read.display


def _base_image(config: dict[str, Any], shown: str) -> ReleaseHint | None:
    base = config.get("base_image")
    image = base.get("image") if isinstance(base, dict) else None
    hint = from_image(image) if isinstance(image, str) else None
    return hint._replace(origin=f"{hint.origin}, the base image of {shown}") if hint and hint.version else None


def _cog_pin(ctx: Ctx, folder: Path) -> ReleaseHint | None:
    """The release the Cog model's ``cog.yaml`` beside the launcher pins, where its ``predict`` is this file."""
    read = _mapping(ctx, folder / "cog.yaml")
    if read is None:
        return None
    value, shown = read
    predict = value.get("predict")
    if not isinstance(predict, str) or predict.split(":", 1)[0].lstrip("./") != ctx.name:
        return None
    build: dict[str, Any] = value["build"] if isinstance(value.get("build"), dict) else {}
    texts = [p for p in build.get("python_packages") or [] if isinstance(p, str)]
    for step in build.get("run") or []:  # a command, or {command: ..., mounts: ...}
        command = step.get("command") if isinstance(step, dict) else step
        if isinstance(command, str):
            texts.append(command)
    pins = {pinned(m): m for text in texts for m in PIN.findall(text)}
    if len(pins) != 1:
        return None
    version, written = pins.popitem()
    return ReleaseHint(version, f"pin vllm=={written} in {shown} (the Cog model whose predictor this is)")


def _cerebrium_pin(ctx: Ctx, folder: Path) -> ReleaseHint | None:
    """The release the Cerebrium project holding the launcher installs: its
    ``cerebrium.toml`` (the nearest in its directory or above, within the
    audited paths) builds the image with ``[cerebrium.deployment]``'s
    ``pre_build_commands``, then ``[cerebrium.dependencies.pip]``, then its
    ``shell_commands`` (docs.cerebrium.ai, the TOML reference), where they
    pin exactly one vLLM (``pip install vllm==0.7.3``; a dependency
    ``vllm = "==0.7.3"``: "latest" and ranges pin none)."""
    while ctx.may_read(folder):
        candidate = folder / "cerebrium.toml"
        if candidate.is_file():
            table = toml_table(companion_text(ctx, candidate) or "")
            if table is None:
                return None
            config = table.get("cerebrium")
            deployment = config.get("deployment") if isinstance(config, dict) else None
            dependencies = config.get("dependencies") if isinstance(config, dict) else None
            pip = dependencies.get("pip") if isinstance(dependencies, dict) else None
            commands = [c for key in ("pre_build_commands", "shell_commands")
                        for c in (deployment.get(key) if isinstance(deployment, dict) else None) or [] if isinstance(c, str)]
            texts = commands + ([f"vllm{pip['vllm']}"] if isinstance(pip, dict) and isinstance(pip.get("vllm"), str) else [])
            pins = {pinned(m): m for text in texts for m in PIN.findall(text)}
            if len(pins) != 1:
                return None
            version, written = pins.popitem()
            return ReleaseHint(version, f"pin vllm=={written} in {companion_name(ctx, candidate)} (the Cerebrium "
                                        "project that builds the launcher's image)")
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _requirements_pin(ctx: Ctx, folder: Path) -> ReleaseHint | None:
    """The release the environment of the launcher's Python is built with:
    the nearest of a ``requirements.txt``, a ``uv.lock`` or a
    ``pyproject.toml`` in its directory or above it within the audited paths,
    where it pins exactly one vLLM (a lock file by the version it locks); None
    where the nearest pins none, or cannot be read."""
    while ctx.may_read(folder):
        for name, pins_of, ranges_of, said in _ENVIRONMENT_FILES:
            candidate = folder / name
            if candidate.is_file():  # (a regular file, or a link to one: which must lie in the audited paths too)
                text = companion_text(ctx, candidate) or ""
                pins = {pinned(pin): pin for pin in pins_of(text)}
                if len(pins) == 1:
                    version, written = pins.popitem()
                    return ReleaseHint(version, said.format(written=written, file=companion_name(ctx, candidate)))
                ranges = {written: allowed for written in ranges_of(text) if (allowed := specifiers(written))} \
                    if not pins else {}
                if len(ranges) == 1:  # (`vllm<=0.6.3`: pip installs the newest release it allows)
                    written, allowed = ranges.popitem()
                    return ReleaseHint(None, f"range vllm{''.join(written.split())} in {companion_name(ctx, candidate)}",
                                       allowed=allowed)
                return None  # the nearest one decides, as the environment built from it would
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _pyproject_pins(text: str, written: re.Pattern[str] = REQUIREMENT) -> list[str]:
    """The exact vLLM pins among a pyproject.toml's dependencies (PEP 621:
    ``[project] dependencies`` and each optional group); or, ``written``
    RANGE, the ranges."""
    project = (toml_table(text) or {}).get("project")
    if not isinstance(project, dict):
        return []
    groups = project.get("optional-dependencies")
    lists = [project.get("dependencies"), *(groups.values() if isinstance(groups, dict) else ())]
    return [pin for entries in lists if isinstance(entries, list) for entry in entries if isinstance(entry, str)
            for pin in written.findall(entry)]


def _locked_pins(text: str) -> list[str]:
    """The vLLM version a uv.lock locks (its `[[package]]` named vllm)."""
    packages = (toml_table(text) or {}).get("package")
    return [str(package["version"]) for package in packages if isinstance(package, dict)
            and package.get("name") == "vllm" and isinstance(package.get("version"), str)] \
        if isinstance(packages, list) else []


# What builds a launcher's Python environment, nearest first in each folder (OpenPipe/ART pins
# `vllm==0.8.5.post1` in its pyproject.toml and locks it in uv.lock).
# Each file that builds the launcher's environment: its exact pins, its ranges, and how a pin is said.
_ENVIRONMENT_FILES: tuple[tuple[str, Callable[[str], list[str]], Callable[[str], list[str]], str], ...] = (
    ("requirements.txt", REQUIREMENT.findall, RANGE.findall,
     "pin vllm=={written} in {file} (the launcher's nearest requirements file)"),
    ("uv.lock", _locked_pins, lambda text: [], "vllm {written} locked in {file} (the launcher's nearest lock file)"),
    ("pyproject.toml", _pyproject_pins, lambda text: _pyproject_pins(text, RANGE),
     "pin vllm=={written} in {file} (the dependencies of the launcher's nearest project)"))
