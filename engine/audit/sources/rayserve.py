"""Ray Serve LLM (``ray.serve.llm``): each LLM config of a Serve application
that builds vLLM engines is one deployment.

A Serve config (the file of ``serve run`` and ``serve deploy``; a KubeRay
``RayService`` holds one as the YAML string ``spec.serveConfigV2``) lists
``applications``, each with the ``import_path`` of its builder and the
builder's ``args``. From Ray's released sources, 2.43 to 2.60 (FORMATS.md):

- ``ray.serve.llm:build_openai_app`` (2.43: ``ray.serve.llm.builders:``;
  before it, ``ray.llm._internal.serve.builders.application_builders:``) and
  the dev ingress take ``args.llm_configs``, a list;
  ``ray.serve.llm:build_dp_openai_app`` takes ``args.llm_config``;
- ``ray.serve.llm:build_pd_openai_app`` (2.49 on; 2.47-2.48
  ``...prefill_decode_disagg:build_app``; Ray's example,
  ``ray.serve.llm.examples.pd_disagg.app:build_app``) takes
  ``args.prefill_config`` and ``args.decode_config``: the roles prefill and decode.

An LLM config is a mapping, or the path of a YAML file that holds one,
relative to where ``serve run`` runs: looked for beside the Serve config,
then in each folder above it, within the audited paths. Ray hands its
``engine_kwargs`` to vLLM's ``AsyncEngineArgs`` by their field names; the
document takes those the decision reads (vLLM's fields are not its option
list, so the others are not checked here). The model is
``model_loading_config.model_source``, else ``model_id``; the environment,
``runtime_env.env_vars`` (the application's, then the config's). Ray writes
nothing the decision reads into a ``kv_transfer_config``, but a prefill or
decode config without one gets deployers.yaml's ``pd-default`` in Ray
2.47-2.50, and from 2.51 Ray refuses it (noted). A RayService's release is
the vLLM its Ray LLM image's Ray release pins (deployers.yaml).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple, cast

from ...core import yamlsafe
from ...core.deployers import config as filled, deployer
from ...core.errors import Problem
from ...core.markers import has_unresolved, show
from ...core.options import ENGINE_FIELDS, ENV_NAMES
from .companions import objects_of_kind
from .context import Ctx
from .deployment import Deployment, SourceFile
from .files import NOT_REGULAR, read_text
from .launch import release_noted, with_facts
from .marks import Lines
from .release import ReleaseHint, from_image, split_image
from .yamlread import YamlError, load as load_anchored

__all__ = ["BUILDERS", "is_serve_config", "serve_file", "ray_service", "ServedModule", "served_modules"]

# Builders by import path, and where their args hold the LLM configs.
_LIST, _ONE, _PD = "llm_configs", "llm_config", "pd"
_OLD_PD = "ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app"  # 2.47-2.48
# Ray's P/D example app (python/ray/serve/llm/examples/pd_disagg/app.py, 0d0aae24): its build_app
# takes prefill_config and decode_config and adds the same default to each that sets none.
_EXAMPLE_PD = "ray.serve.llm.examples.pd_disagg.app:build_app"
BUILDERS = {
    "ray.serve.llm:build_openai_app": _LIST,
    "ray.serve.llm.builders:build_openai_app": _LIST,
    # before ray.serve.llm exported it (python/ray/llm/_internal/serve/builders/application_builders.py, 0238831a)
    "ray.llm._internal.serve.builders.application_builders:build_openai_app": _LIST,
    "ray.llm._internal.serve.core.ingress.dev_ingress:build_dev_openai_app": _LIST,
    "ray.serve.llm:build_dp_openai_app": _ONE,
    "ray.serve.llm:build_pd_openai_app": _PD,
    _OLD_PD: _PD,
    _EXAMPLE_PD: _PD,
}
# Ray's LLM image, whose tag is the Ray release (rayproject/ray-llm:2.56.0-py312-cu130).
_RAY_LLM = "rayproject/ray-llm"


class _Site(NamedTuple):
    """Where a Serve config is: its lines in the file, the object that holds it."""

    lines: Lines
    parts: tuple[str, ...] = ()     # the id's parts before the application's: kind, namespace, name
    resource: tuple[tuple[str, str], ...] = ()
    release: ReleaseHint | None = None


def is_serve_config(value: Any) -> bool:
    """Whether a YAML value is a Serve config with an application that builds vLLM engines."""
    apps = value.get("applications") if isinstance(value, dict) else None
    return isinstance(apps, list) and any(_builder(app) for app in apps)


def _builder(app: Any) -> str | None:
    """The import path of an application that builds vLLM engines, else None."""
    path = app.get("import_path") if isinstance(app, dict) else None
    return path if isinstance(path, str) and path in BUILDERS else None


def serve_file(ctx: Ctx, value: dict[str, Any], lines: Lines) -> SourceFile:
    """The deployments of a Serve config file."""
    return SourceFile(ctx.display, "ray-serve", tuple(_serve_config(ctx, value, _Site(lines))))


def ray_service(ctx: Ctx, obj: dict[str, Any], lines: Lines, base: tuple, resource: tuple[tuple[str, str], ...],
                problems: list[Problem]) -> list[Deployment]:
    """The deployments of a KubeRay RayService's ``spec.serveConfigV2``."""
    spec = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    text = spec.get("serveConfigV2")
    if not isinstance(text, str):
        return []
    path = (*base, "spec", "serveConfigV2")
    meta = dict(resource)
    try:
        value, where = _parse(text)
    except (yamlsafe.YamlProblem, YamlError) as exc:
        at = f" (its line {exc.line})" if exc.line is not None else ""
        problems.append(ctx.problem("input.parse", f"`spec.serveConfigV2` of RayService {meta['name']} is not valid "
                                    f"YAML{at}: {exc.message}", line=lines.key(*path)))
        return []
    if not is_serve_config(value):
        return []
    parts = tuple(p for p in (meta["kind"], meta["namespace"], meta["name"]) if p)
    site = _Site(lines.inner(*path, where=where, value=value), parts, resource, _release(spec))
    return _serve_config(ctx, value, site)


class ServedModule(NamedTuple):
    """An application of a RayService in the audited paths that runs a module of its own (its
    `import_path` names none of Ray's LLM builders): the module, and what it runs in."""

    module: str          # `ai-ml.gke-ray.rayserve.llm.serve_chat_completion`, of `...:model`
    import_path: str
    runtime_env: dict[str, Any]
    where: str           # the RayService and its file, for a report
    image: ReleaseHint | None  # the vLLM its cluster's image holds, or why that is not known; None: no image


def served_modules(ctx: Ctx) -> list[ServedModule]:
    """Each application of each RayService in the audited paths whose import
    path names a module of its own, which Ray imports in the environment its
    ``runtime_env`` builds (its `pip` packages installed over the image's)."""
    out = []
    for name, places in objects_of_kind(ctx, "RayService").items():
        for companion, index in places:
            spec = companion.documents[index][0].get("spec")
            text = spec.get("serveConfigV2") if isinstance(spec, dict) else None
            try:
                value = _parse(text)[0] if isinstance(text, str) else None
            except (yamlsafe.YamlProblem, YamlError):
                continue  # (said where the RayService itself is read)
            apps = value.get("applications") if isinstance(value, dict) else None
            for app in apps if isinstance(apps, list) else []:
                path = app.get("import_path") if isinstance(app, dict) else None
                if isinstance(path, str) and ":" in path and path not in BUILDERS and not has_unresolved(path):
                    env = app.get("runtime_env")
                    out.append(ServedModule(path.split(":", 1)[0], path, env if isinstance(env, dict) else {},
                                            f"RayService {name} in {companion.display}",
                                            _image_release(spec) if isinstance(spec, dict) else None))
    return out


def _parse(text: str) -> tuple[Any, dict[str, tuple[int, int]]]:
    """A YAML text with the (line, column) of its values; anchors and aliases
    read as Ray's YAML loader reads them (yamlread.py bounds them)."""
    try:
        return yamlsafe.load(text, marks=True)
    except yamlsafe.YamlProblem as refused:
        if not refused.anchored:
            raise
    where: dict[str, tuple[int, int]] = {}
    return load_anchored(text, marks=where)[0], where


def _serve_config(ctx: Ctx, value: dict[str, Any], site: _Site) -> list[Deployment]:
    out = []
    for index, app in enumerate(value["applications"]):
        builder = _builder(app)
        if builder is None:
            continue
        args = app["args"] if isinstance(app.get("args"), dict) else {}
        at: tuple[Any, ...] = ("applications", index, "args")
        configs: list[tuple[str, tuple[Any, ...], Any, str | None]]  # (label, path, config, role)
        if BUILDERS[builder] == _LIST:
            items = args["llm_configs"] if isinstance(args.get("llm_configs"), list) else []
            configs = [(f"llm_configs/{i}", (*at, "llm_configs", i), item, None) for i, item in enumerate(items)]
        elif BUILDERS[builder] == _ONE:
            configs = [("llm_config", (*at, "llm_config"), args["llm_config"], None)] if "llm_config" in args else []
        else:
            configs = [(f"{role}_config", (*at, f"{role}_config"), args[f"{role}_config"], role)
                       for role in ("prefill", "decode") if f"{role}_config" in args]
        app_env = _env_vars(app.get("runtime_env"))
        for label, path, config, role in configs:
            anchor = "#" + "/".join((*site.parts, str(app.get("name") or index), label))
            out.append(_deployment(ctx, site, anchor, path, config, role, app_env, builder))
    return out


def _deployment(ctx: Ctx, site: _Site, anchor: str, path: tuple, config: Any, role: str | None,
                app_env: dict[str, Any], builder: str) -> Deployment:
    """One LLM config's deployment."""
    line = site.lines.key(*path)
    chain: tuple[str, ...]
    lines, shown, chain = site.lines, "", (ctx.display,)
    where = line  # the line an origin falls back to: the config's (None in a config file of its own)
    problems: list[Problem] = []
    if isinstance(config, str):  # the path of a YAML file holding the config
        read = _config_file(ctx, config, line)
        if isinstance(read, Problem):
            return Deployment(ctx.display, "ray-serve", anchor, line, problems=(read,), resource=site.resource,
                              role=role, release=site.release)
        config, lines, shown = read
        chain, path, where = (ctx.display, shown), (), None
        shown += ", "
    if not isinstance(config, dict):
        problem = ctx.problem("source.config_shape", f"the LLM config at `{anchor[1:]}` is not a mapping", line=line)
        return Deployment(ctx.display, "ray-serve", anchor, line, problems=(problem,), resource=site.resource,
                          role=role, release=site.release)
    loading = config["model_loading_config"] if isinstance(config.get("model_loading_config"), dict) else {}
    model = next((m for m in (loading.get("model_source"), loading.get("model_id")) if isinstance(m, str)), None)
    kwargs = config["engine_kwargs"] if isinstance(config.get("engine_kwargs"), dict) else {}
    document: dict[str, Any] = {k: v for k, v in kwargs.items() if k in ENGINE_FIELDS}

    def origin(what: str, *keys: str) -> str:
        # A value reached through an alias has no line of its own: the alias's (the config's) then.
        return f"{shown}line {lines.key(*path, *keys) or where}: {what}"

    origins = {k: origin(f"engine_kwargs.{k}", "engine_kwargs", k) for k in document}
    notes: list[Problem] = []
    if role is not None and "kv_transfer_config" not in kwargs:
        default = filled(deployer("ray-serve-llm")["pd-default"])
        document["kv_transfer_config"] = default
        origins["kv_transfer_config"] = "Ray's default for prefill/decode " + \
            ("(its P/D example app)" if builder == _EXAMPLE_PD else "(2.47-2.50)")
        if builder not in (_OLD_PD, _EXAMPLE_PD):  # those builders add it in every release that has them
            notes.append(ctx.problem("source.deployer_default", f"the {role} config sets no "
                                     f"`engine_kwargs.kv_transfer_config`: Ray 2.47-2.50 add {default['kv_connector']} "
                                     f"({default['kv_role']}), as decided here; Ray 2.51 and later refuse the "
                                     "application", line=line))
    env = {k: v for k, v in {**app_env, **_env_vars(config.get("runtime_env"))}.items() if k in ENV_NAMES}
    if env:
        document["env"] = env
        origins["env"] = f"{shown}runtime_env.env_vars"
    if model is not None:
        document["model"] = {"name": model}
        origins["model"] = origin("model_loading_config", "model_loading_config")
    facts, facts_problem, directive = ctx.facts_for(line)
    facts = facts if isinstance(facts, dict) else {}
    if facts_problem is not None:
        problems.append(facts_problem)
    release = release_noted(ctx, site.release, facts, f"line {directive}: hma-policy directive", line, notes)
    served = loading.get("model_id") if isinstance(loading.get("model_id"), str) else model
    return Deployment(ctx.display, "ray-serve", anchor, line, served, None if problems else with_facts(document, facts),
                      tuple(problems), tuple(notes), tuple(sorted(origins.items())), site.resource, None, role, chain,
                      release)


def _env_vars(runtime_env: Any) -> dict[str, Any]:
    env = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    return dict(env) if isinstance(env, dict) else {}


def _config_file(ctx: Ctx, name: str, line: int | None) -> tuple[Any, Lines, str] | Problem:
    """An LLM config file named in a Serve config: its value, lines and name as
    shown. Ray reads it relative to where ``serve run`` runs, which the Serve
    config does not say: beside it first, then in each folder above it, within
    the audited paths (symbolic links resolved)."""
    if not ctx.fs:
        return ctx.problem("source.config_unresolved", f"the LLM config file `{name}` cannot be located from this "
                           "file", line=line)

    def there(path: Path) -> bool:  # a file inside the roots; any name the OS refuses (too long, a NUL) is none
        try:
            return path.is_file() and ctx.may_read(path.resolve())
        except (OSError, ValueError, RuntimeError):
            return False

    folders = [Path("/")] if os.path.isabs(name) else [ctx.path.parent, *ctx.path.parent.parents]
    found = next((f / name for f in folders if there(f / name)), None)
    if found is None:
        return ctx.problem("source.config_missing", f"the LLM config file `{name}` is not beside this file or in a "
                           "folder above it, within the audited paths (Ray reads it relative to where `serve run` "
                           "runs)", line=line, hint="audit the folder `serve run` runs in")
    shown = os.path.normpath(found)
    text, problem = read_text(found, shown, ctx.limits.max_config_bytes)
    if problem is not None:
        return problem if problem is not NOT_REGULAR else ctx.problem(
            "source.config_missing", f"the LLM config file `{shown}` is not a regular file", line=line)
    try:
        value, where = _parse(cast(str, text))
    except (yamlsafe.YamlProblem, YamlError) as exc:
        at = f" at line {exc.line}" if exc.line is not None else ""
        return ctx.problem("input.parse", f"the LLM config file `{shown}` is not valid YAML{at}: {exc.message}",
                           line=line)
    return value, Lines(cast(str, text), 1, where, value), shown


def _release(spec: dict[str, Any]) -> ReleaseHint | None:
    """The vLLM release a RayService's engines run: the one the Ray release of
    its image pins (a worker group's image, else the head's); None when no
    image is written."""
    cluster = spec["rayClusterConfig"] if isinstance(spec.get("rayClusterConfig"), dict) else {}
    workers = cluster["workerGroupSpecs"] if isinstance(cluster.get("workerGroupSpecs"), list) else []
    image = next((i for i in map(_image, (*workers, cluster.get("headGroupSpec"))) if i), None)
    if image is None:
        return None
    path, tag, _ = split_image(image)
    shown = show(image)
    # Ray's image on any registry, also a mirror that keeps only its name (ECR's `<registry>/ray-llm`).
    if has_unresolved(path.rsplit("/", 1)[-1]):  # (`${IMAGE_URI}`: it may be Ray's, or any other)
        return ReleaseHint(None, f"image {shown}: the image is not known from this file")
    if path.rsplit("/", 1)[-1] != _RAY_LLM.rsplit("/", 1)[-1]:
        return ReleaseHint(None, f"image {shown} is not Ray's LLM image ({_RAY_LLM}): its tag is not read as a vLLM release")
    match = re.match(r"(\d+\.\d+)\.\d+", tag or "")
    # A tag the file does not give (`ray-llm:$RAY_LLM_TAG`, filled in at deploy time): the Ray release the
    # cluster declares, which KubeRay asks to match its image's (awslabs/data-on-eks's RayService).
    declared = cluster.get("rayVersion") if match is None and not has_unresolved(str(cluster.get("rayVersion"))) else None
    match = match or re.match(r"(\d+\.\d+)\.\d+$", str(declared or ""))
    if match is None:
        return ReleaseHint(None, f"image tag {shown}: no Ray release in the tag")
    ray = match.group(1)
    said = f"image {shown}, of the Ray release rayVersion {declared} declares" if declared else f"image tag {shown}"
    pinned = deployer("ray-serve-llm")["vllm"].get(ray)
    if pinned is None:
        return ReleaseHint(None, f"{said}: Ray {ray} requires a range of vLLM releases, not one")
    return ReleaseHint(pinned, f"{said}: Ray {ray} pins vllm=={pinned}")


def _image_release(spec: dict[str, Any]) -> ReleaseHint | None:
    """The vLLM that a module of a RayService's own imports where its
    runtime_env installs none: its image's, a vLLM release image's tag, or
    the vLLM that Ray's LLM image pins (_release); None when no image is
    written."""
    ray = _release(spec)
    if ray is None or ray.version is not None:
        return ray
    cluster = spec["rayClusterConfig"] if isinstance(spec.get("rayClusterConfig"), dict) else {}
    workers = cluster["workerGroupSpecs"] if isinstance(cluster.get("workerGroupSpecs"), list) else []
    image = cast(str, next((i for i in map(_image, (*workers, cluster.get("headGroupSpec"))) if i), None))
    if "$" in image:  # (`$VLLM_IMAGE`, that envsubst fills in before the RayService is applied)
        return ReleaseHint(None, f"image {show(image)}: the image is not known from this file")
    own = from_image(image)
    return own if own.version is not None or split_image(image)[0].rsplit("/", 1)[-1] != _RAY_LLM.rsplit("/", 1)[-1] \
        else ray


def _image(group: Any) -> str | None:
    template = group.get("template") if isinstance(group, dict) else None
    spec = template.get("spec") if isinstance(template, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    first = containers[0] if isinstance(containers, list) and containers else None
    image = first.get("image") if isinstance(first, dict) else None
    return image if isinstance(image, str) and image else None
