"""JSON and YAML files: this project's deployment documents (a YAML file may
hold several, separated by ``---``), and the dispatch of a JSON or YAML file
to the reader of what it holds (a vLLM config file, Kubernetes manifests)."""

from __future__ import annotations

import re

from ...core.errors import InputError, Problem
from ...core.input import parse_text
from .context import Ctx
from .deployment import Deployment, SourceFile
from .detect import classify, mentions_vllm
from .kubernetes import kubernetes
from .vllm_config import vllm_config_file

__all__ = ["structured_file"]


def _yaml_chunks(text: str) -> list[tuple[int, str]]:
    """Split a YAML stream at its document markers: (first line, text) each.

    A line starting with `---` always starts a document (YAML forbids it
    inside any scalar), so the split is exact.
    """
    lines = text.split("\n")
    starts = [0] + [i for i, line in enumerate(lines) if re.match(r"---(?:[ \t]|$)", line) and i > 0]
    chunks = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        body = "\n".join(lines[start:end])
        chunks.append((start, body))
    # Directives (%YAML) and comments before the first marker belong to the first document.
    if len(chunks) > 1 and all(not l.strip() or l.lstrip().startswith(("#", "%")) for l in chunks[0][1].split("\n")):
        first = chunks.pop(0)
        chunks[0] = (first[0], first[1] + "\n" + chunks[0][1])
    return chunks


def _parse_problem(ctx: Ctx, exc: InputError, offset: int = 0) -> Problem:
    """A parse error located in the file: the line of a document's error is
    shifted by the lines before the document (``offset``)."""
    first = exc.problems[0]
    hint = first.hint
    if "{{" in ctx.text and first.code == "input.parse":
        hint = "this looks like an unrendered Helm or Go template; audit the output of `helm template` instead"
    line = None
    match = re.search(r"at line (\d+)", first.message)
    message = first.message
    if match:
        line = int(match.group(1)) + offset
        message = message[:match.start(1)] + str(line) + message[match.end(1):]
    return Problem(first.code, message, first.path, hint, file=ctx.display, line=line)


def structured_file(ctx: Ctx, fmt: str) -> SourceFile:
    source = f"`{ctx.display}`"
    if fmt == "json":
        try:
            values = [(0, parse_text(ctx.text, source=source, fmt="json"))]
            chunks = [(0, ctx.text)]
        except InputError as exc:
            if not mentions_vllm(ctx.text):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not valid JSON "
                                                             f"({exc.problems[0].message})")
            return SourceFile(ctx.display, None, problems=(_parse_problem(ctx, exc),))
    else:
        chunks = _yaml_chunks(ctx.text)
        if len(chunks) > ctx.limits.max_yaml_documents:
            return SourceFile(ctx.display, None, problems=(ctx.problem(
                "input.limit", f"`{ctx.display}` holds more than {ctx.limits.max_yaml_documents} YAML documents"),))
        values = []
        problems = []
        for start, body in chunks:
            try:
                value = parse_text(body, source=source, fmt="yaml")
            except InputError as exc:
                problems.append(_parse_problem(ctx, exc, start))
                continue
            if value is not None:
                values.append((start, value))
        if problems:
            # A broken document hides what the file is: report the file, decide nothing from it. A
            # YAML file that never mentions vLLM (a CI workflow with `on:`) is skipped, not reported.
            if not mentions_vllm(ctx.text):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not JSON-compatible YAML "
                                                             f"({problems[0].message})")
            return SourceFile(ctx.display, None, problems=tuple(problems))
    kinds = [classify(value, single=len(values) == 1 and fmt == "yaml") for _, value in values]
    if "kubernetes" in kinds:
        texts = dict(chunks)
        deployments, problems = kubernetes(ctx, [v for (s, v), k in zip(values, kinds) if k == "kubernetes"],
                                           [s for (s, v), k in zip(values, kinds) if k == "kubernetes"],
                                           [texts.get(s, ctx.text) for (s, v), k in zip(values, kinds) if k == "kubernetes"])
        return SourceFile(ctx.display, "kubernetes", tuple(deployments), tuple(problems))
    if kinds == ["vllm-config"]:
        return SourceFile(ctx.display, "vllm-config", (vllm_config_file(ctx, values[0][1]),))
    documents = [(start, value) for (start, value), kind in zip(values, kinds) if kind == "document"]
    if not documents:
        return SourceFile(ctx.display, None, skipped="not a deployment document, vLLM config or Kubernetes manifest")
    out = []
    for index, (start, value) in enumerate(documents, 1):
        name = value.get("name") if isinstance(value.get("name"), str) else None
        anchor = f"#{index}" if len(values) > 1 else ""
        out.append(Deployment(ctx.display, "document", anchor, start + 1 if len(values) > 1 else None, name, value))
    return SourceFile(ctx.display, "document", tuple(out))
