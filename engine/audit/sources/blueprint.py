"""OCI AI Blueprints recipes (oracle-quickstart/oci-ai-blueprints): the
JSON payload of a deployment, which the blueprints platform runs as one
container on OKE (``docs/custom_blueprints/blueprint_json_schema.json`` at
1807459d): ``recipe_image_uri`` the image, ``recipe_container_command`` its
command (the image's entrypoint where none is given, as Kubernetes runs it),
``recipe_container_command_args`` its args, and ``recipe_container_env``
its environment (``{key, value}`` pairs, which the args name as
``$(key)``, expanded as Kubernetes expands them). A payload is one recipe,
or a ``deployment_group`` whose ``deployments[].recipe`` are each one.
Recipes of ``recipe_mode`` ``service`` or ``job`` run a container; the
others (``shared_node_pool``, ``team``, ``update``) do not. A launch is
placed at its ``recipe_image_uri`` line."""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from .context import Ctx
from .deployment import Deployment, SourceFile
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["is_blueprint", "blueprint_file"]

_KIND = "Blueprint"
_RUNS = ("service", "job")


def is_blueprint(value: Any) -> bool:
    """Whether a JSON value is a blueprints payload: a recipe, or a deployment group of them."""
    return bool(_recipes(value))


def _recipes(value: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path, recipe) of each recipe in the payload that names an image."""
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("recipe_image_uri"), str) and "recipe_mode" in value:
        return [((), value)]
    group = value.get("deployment_group")
    deployments = group.get("deployments") if isinstance(group, dict) else None
    return [(("deployment_group", "deployments", index, "recipe"), item["recipe"])
            for index, item in enumerate(deployments if isinstance(deployments, list) else [])
            if isinstance(item, dict) and isinstance(item.get("recipe"), dict)
            and isinstance(item["recipe"].get("recipe_image_uri"), str) and "recipe_mode" in item["recipe"]]


def blueprint_file(ctx: Ctx, value: dict[str, Any], lines: Lines) -> SourceFile:
    """The launches of a blueprints payload's recipes."""
    problems: list[Problem] = []
    out: list[Deployment] = []
    for path, recipe in _recipes(value):
        if recipe.get("recipe_mode") not in _RUNS:
            continue
        env = recipe.get("recipe_container_env")
        container: dict[str, Any] = {
            "name": str(recipe.get("deployment_name") or recipe.get("recipe_id") or "recipe"),
            "image": recipe["recipe_image_uri"],
            "env": [{"name": str(e["key"]), "value": str(e["value"])} for e in env
                    if isinstance(e, dict) and "key" in e and e.get("value") is not None] if isinstance(env, list) else []}
        for field, key in (("recipe_container_command", "command"), ("recipe_container_command_args", "args")):
            if isinstance(recipe.get(field), list):
                container[key] = [str(word) for word in recipe[field]]
        line = lines.key(*path, "recipe_image_uri") or lines.at(*path) or 1
        site = Site(_KIND, container["name"], format="oci-blueprint")
        out += pod_launches(ctx, {"containers": [container]}, None, site, lines, path, {}, problems, line=line,
                            qualify=False)
    return SourceFile(ctx.display, "oci-blueprint", tuple(out), tuple(problems))
