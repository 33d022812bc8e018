"""envsubst templates: YAML whose `${NAME}` placeholders a tool fills in before
it is applied (`envsubst < deploy.yaml | kubectl apply -f -`). Each placeholder
is read as a value not known, wherever it stands. A file is read so where its
name says it is a template (detect.envsubst_renders), and a Kubernetes object
where its own text does: a container whose image is wholly a placeholder
(`image: ${VLLM_IMAGE}`, llm-d's dev manifests), which no cluster can pull, is
the mark of a manifest that is rendered before it is applied."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ...core import yamlsafe
from ...core.markers import held_markers, unheld, unresolved

__all__ = ["PLACEHOLDER", "BRACED", "placeheld", "template_of", "dollar_escapes", "load_rendered", "read_as_template",
           "with_placeholders"]

# An envsubst placeholder, `${NAME}` or `$NAME`: envsubst fills in every one, in a script's single
# quotes too, from the environment it runs in, which the audit does not know. Its braces are flow
# indicators to YAML: in a flow mapping (`nodeSelector: { node.kubernetes.io/instance-type:
# ${INSTANCE_TYPE_WORKER} }`, aws-samples/aws-do-eks) they end the scalar, so each placeholder is
# an unresolved marker, held while the template is parsed (markers.held_markers).
PLACEHOLDER = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def placeheld(body: str, placeholder: re.Pattern[str] = PLACEHOLDER,
               known: Mapping[str, str] | None = None) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    """A document of a template, its placeholders unresolved markers
    wherever they stand, except those ``known`` gives the text of (by name),
    which stand as that text; None when it is no YAML that way either (or
    holds the characters the placeholders are held as)."""
    if "\x00" in body:  # (no YAML: nor can a marker of the file's own be told from one made here)
        return None

    def fill(match: re.Match[str]) -> str:
        # (one pass, as envsubst's: the text put in is not read again)
        return known[_name(match[0])] if known and _name(match[0]) in known else unresolved(match[0])
    held = held_markers(placeholder.sub(fill, body))
    if held is None:
        return None
    try:
        value, where = yamlsafe.load(held[0], marks=True)
    except yamlsafe.YamlProblem:
        return None
    return unheld(value, held[1]), {unheld(key, held[1]): mark for key, mark in where.items()}


def load_rendered(text: str, *, repeated: bool = False) -> Any:
    """A YAML text that a renderer left values not known in (a Go template's
    actions the files do not give), each an unresolved marker: parsed with
    each marker where it stands, in a quoted scalar too (its name may hold
    quotes, `{{ "app_port" | getPort }}`), as placeheld() reads a template.
    ``repeated`` as yamlsafe.load's. Raises yamlsafe.YamlProblem."""
    held = held_markers(text) if "\x00" in text else None
    if held is None:
        return yamlsafe.load(text, repeated=repeated)[0]
    return unheld(yamlsafe.load(held[0], repeated=repeated)[0], held[1])


def read_as_template(value: Any) -> bool:
    """Whether a value was read as an envsubst template (template_of): some
    `${NAME}` in it stands as a value not known."""
    if isinstance(value, str):
        return "\x00${" in value
    if isinstance(value, dict):
        return any(read_as_template(v) for v in value.values())
    return isinstance(value, list) and any(read_as_template(v) for v in value)


def with_placeholders(value: Any) -> Any:
    """``value`` (a patch of an object read as an envsubst template, which the
    same envsubst fills in: llm-d's dev overlays pipe `kustomize build` through
    it) with each `${NAME}` in its strings a value not known."""
    if isinstance(value, str):
        return BRACED.sub(lambda match: unresolved(match[0]), value) if "${" in value else value
    if isinstance(value, dict):
        return {k: with_placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [with_placeholders(v) for v in value]
    return value


def _name(placeholder: str) -> str:
    return placeholder.strip("${}")


# `export DOLLAR='$'` in a shell file: the envsubst idiom for a `$` that the rendered file keeps (a
# script's `${DOLLAR}(id -u)` renders as `$(id -u)`), where envsubst would fill in `$(`'s neighbour.
_DOLLAR_ESCAPE = re.compile(r"""^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=(?:'\$'|"\$"|\\\$)[ \t]*(?:;[ \t]*)?(?:#.*)?$""",
                            re.M)


def dollar_escapes(texts: Iterable[str]) -> dict[str, str]:
    """The placeholders that shell files (the environment a template is
    rendered in) set to a lone `$`, by name: each stands for `$` in the
    template. Only that value is taken: any other a file sets may be set
    anew by whoever runs it, but a variable set to `$` exists to escape it."""
    return {match[1]: "$" for text in texts for match in _DOLLAR_ESCAPE.finditer(text)}


# Only the braced form, in a file that is read as a template for its images alone: a `$NAME` in a
# shell script the manifest holds is the shell's as often as the template tool's.
BRACED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def template_of(value: Any, body: str) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    """A Kubernetes object ``value`` (parsed from ``body``) read as an
    envsubst template, each `${NAME}` a value not known, where one of its
    containers' images is wholly such a placeholder; else None."""
    if not (isinstance(value, dict) and isinstance(value.get("kind"), str) and "apiVersion" in value
            and "${" in body and _placeholder_image(value)):
        return None
    return placeheld(body, BRACED)


def _placeholder_image(value: dict[str, Any]) -> bool:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            image = item.get("image")
            if isinstance(image, str) and "name" in item and BRACED.fullmatch(image.strip()):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
