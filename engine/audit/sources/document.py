"""JSON and YAML files: this project's deployment documents (a YAML file may
hold several, separated by ``---``), and the dispatch of a JSON or YAML file
to the reader of what it holds (a vLLM config file, Kubernetes manifests, a
Ray Serve config, a SkyPilot task, a chart's values)."""

from __future__ import annotations

import re
from typing import Any

from ...core import yamlsafe
from ...core.errors import InputError, Problem
from ...core.markers import plain, show
from ...core.input import parse_text
from .beaker import beaker_spec, is_beaker_spec
from .blueprint import blueprint_file, is_blueprint
from .companions import template_escapes
from .context import Ctx
from .dstack import is_run_configuration, run_configuration_file
from .deployment import Deployment, SourceFile
from .detect import classify, envsubst_renders, mentions_vllm, not_options
from .helm import chart_values
from .helm_template import chart_template, in_chart
from .kustomize import KUSTOMIZATION_NAMES
from .manifests import manifest_file
from .rayserve import is_serve_config, serve_file
from .skypilot import is_task, task_file
from .triton import is_triton_model, triton_model
from .truss import is_truss_config, truss_config
from .marks import Lines
from .placeholders import PLACEHOLDER, placeheld, template_of
from .marks import yaml_chunks as _yaml_chunks
from .vllm_config import vllm_config_file
from .yamlread import YamlError, load as load_anchored

__all__ = ["structured_file", "EMPTY", "NOT_A_CONFIG"]

# Why a JSON or YAML file that holds no document (nothing, or null) is
# skipped. An audit reports it as a problem (input.empty) when the file was
# named on its command line, as `hma-policy decide` does.
EMPTY = "holds no document (it is empty, or reads as null)"

# A GitHub Actions workflow: its `on:` key is a boolean to a YAML 1.1 reader, so the
# file is no JSON-compatible YAML; it runs CI jobs, and a comment naming vLLM's image
# (kvcache-ai/Mooncake's ROCm workflows) made it a parse problem.
_WORKFLOW = re.compile(r"^on:", re.M), re.compile(r"^jobs:", re.M)
WORKFLOW = "a GitHub Actions workflow (`on:` and `jobs:`): CI jobs, not a deployment"
# A monitoring dashboard (Grafana's panels, Cloud Monitoring's widgets) charting vLLM's metrics;
# one with a `/* license */` comment before it is no JSON (GoogleCloudPlatform/
# kubernetes-engine-samples' getting-started dashboard).
_DASHBOARD = re.compile(r'"(?:panels|widgets?|mosaicLayout|gridLayout)"\s*:')
_CHARTS = re.compile(r'"(?:datasource|targets|expr|timeSeriesQuery|prometheusQuery)"\s*:')
DASHBOARD = "a monitoring dashboard (Grafana, Cloud Monitoring): charts, not a deployment"
# Why a mapping that is mostly vLLM's options, but for a few keys, is skipped: another
# launcher's config, or a vLLM config with a mistyped key, which vLLM would refuse.
NOT_A_CONFIG = "not a vLLM config: "


def _built_problem(ctx: Ctx, built: tuple[str, int]) -> Problem:
    """The problem of a chart template whose container's command or args a
    template action builds (`{{- range .Values.extraArgs }}`): not YAML the
    audit can read, and not a command it can read without Helm."""
    name, line = built
    action = ctx.text.split("\n")[line - 1].strip()
    return ctx.problem("input.parse", f"`{ctx.display}` is an unrendered Helm template: a template action builds the "
                       f"command or args of container `{plain(name)}` (line {line}: `{show(action, 80)}`), which the "
                       "audit does not render", line=line,
                       hint="audit the output of `helm template`, or the chart's values")


def _repeated_problem(ctx: Ctx, repeated: tuple[str, int]) -> Problem:
    """The problem of a chart template whose object, holding a pod, gives a
    key twice: template conditions (`if`/`else`) are not evaluated, so which
    one Helm keeps is not known."""
    key, line = repeated
    return ctx.problem("input.parse", f"`{ctx.display}` is an unrendered Helm template: `{plain(key)}` is given twice "
                       f"(again at line {line}), as on both branches of a template condition, which the audit does "
                       "not evaluate", line=line, hint="audit the output of `helm template`, or the chart's values")


def _reported(text: str) -> bool:
    """Whether a YAML file's broken document is its problem: it is no CI
    workflow, and it mentions vLLM (else the file is skipped)."""
    return not all(pattern.search(text) for pattern in _WORKFLOW) and mentions_vllm(text)


_ACTIONS = re.compile(r"\{\{.*?\}\}")
_BARE = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}")
# What KServe's controller fills in a ServingRuntime's container from the service's metadata
# (`--served-model-name={{.Name}}`): not a template the file is rendered through before it is applied.
_KSERVE_FIELD = re.compile(r"\{\{\s*\.(?:Name|Namespace|Labels\.\w+|Annotations\.\w+)\s*\}\}")


def _parse_problem(ctx: Ctx, exc: InputError, offset: int = 0) -> Problem:
    """A parse error located in the file: the line of a document's error is
    shifted by the lines before the document (``offset``)."""
    first = exc.problems[0]
    hint = first.hint
    serving_runtime = "ServingRuntime" in ctx.text  # (once, not for each action: the file may hold thousands)
    if "{%" in ctx.text and first.code == "input.parse":  # (a statement tag: Jinja's, never Go's)
        hint = "this looks like an unrendered Jinja template; audit the file it renders instead"
    elif "{{" in ctx.text and first.code == "input.parse" and (actions := [
            action for action in _ACTIONS.findall(ctx.text)
            if not (serving_runtime and _KSERVE_FIELD.fullmatch(action))]) \
            and all(_BARE.fullmatch(action) for action in actions):
        # (`{{HF_TOKEN}}`: no Helm value, which is `.Values.x`; a placeholder a person or a tool such as Jinja fills in)
        hint = (f"`{show(actions[0])}` is a placeholder filled in before the file is applied (not a Helm value, which "
                "reads `{{ .Values.x }}`); audit the file as it is applied")
    elif "{{" in ctx.text and first.code == "input.parse":
        hint = "this looks like an unrendered Helm or Go template; audit the output of `helm template` instead"
    line = None
    match = re.search(r"at line (\d+)", first.message)
    message = first.message
    if match:
        line = int(match.group(1)) + offset
        message = message[:match.start(1)] + str(line) + message[match.end(1):]
    return Problem(first.code, message, first.path, hint, file=ctx.display, line=line)


def _anchored(ctx: Ctx, body: str, start: int) -> tuple[Any, dict[str, tuple[int, int]]] | Problem | None:
    """A YAML document with anchors and aliases (and merge keys), read as
    Kubernetes and Helm read it, the aliases bounded as compose's are
    (yamlread.py). None for a deployment document or a vLLM config file,
    whose reader (core/input.py, as `hma-policy decide` and `--config` read
    them) refuses anchors; a Problem for a document yamlread refuses."""
    where: dict[str, tuple[int, int]] = {}
    try:
        value = load_anchored(body, marks=where)[0]
    except YamlError as exc:
        line = exc.line + start if exc.line is not None else None
        at = f" at line {line}" if line is not None else ""
        return Problem("input.parse", f"invalid YAML in `{ctx.display}`{at}: {exc.message}", file=ctx.display, line=line)
    if classify(value, single=True) in ("document", "vllm-config"):
        return None
    return value, where


def _tagged(body: str, single: bool) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    """A document refused for a tag other than JSON's (MkDocs' `!ENV`,
    `!!python/name:`) or a key that is no string (`1: mkdocs.yml`), read
    without its tags and with such keys as their text where it is then no
    deployment: it is another tool's file, which the audit skips. None where
    it is one (a deployment the audit cannot read as written stays a problem)."""
    try:
        value, where = yamlsafe.load(body, marks=True, untagged=True)
    except yamlsafe.YamlProblem:
        return None
    return None if classify(value, single=single) is not None else (value, where)


# Terraform's templatefile (`*.tftpl`; GoogleCloudPlatform/ai-on-gke renders its manifests so):
# `${EXPR}` interpolates an expression, `$${` is a literal `${`; `%{ for X in XS ~}` ... `%{ endfor ~}`
# repeats its lines, read once; any other directive (`%{ if C }`) keeps or drops lines on a
# condition the audit does not evaluate (developer.hashicorp.com/terraform/language/expressions/strings).
_TF_INTERPOLATION = re.compile(r"(?<!\$)\$\{[^{}\n]*\}")
_TF_LOOP = re.compile(r"^[ \t]*%\{~?[ \t]*(?:for[ \t][^}\n]*|endfor[ \t]*)~?\}[ \t]*$", re.M)
_TF_DIRECTIVE = re.compile(r"(?<!%)%\{")


def _terraform(ctx: Ctx) -> str | Problem:
    """A Terraform template's text with its loops' directives blanked (each
    body read once); a problem where it holds a directive the audit does not
    evaluate. (The first directive is found once and its text taken up to
    the `}` on its line: a pattern that looked for the `}` from each `%{`
    would read a line of many `%{` in quadratic time.)"""
    text = _TF_LOOP.sub("", ctx.text)
    opening = _TF_DIRECTIVE.search(text)
    if opening is None:
        return text
    line_end = text.find("\n", opening.end())
    line_end = len(text) if line_end < 0 else line_end
    close = text.find("}", opening.end(), line_end)
    directive = text[opening.end():close if close >= 0 else line_end].strip(" \t~")
    shown = directive if len(directive) <= 60 else directive[:57] + "..."
    return ctx.problem("input.parse", f"`{ctx.display}` is an unrendered Terraform template: `%{{ {shown} }}` "
                       "keeps or drops lines on a condition the audit does not evaluate",
                       line=text.count("\n", 0, opening.start()) + 1, hint="audit the manifest Terraform renders from it")


def structured_file(ctx: Ctx, fmt: str) -> SourceFile:
    source = f"`{ctx.display}`"
    if fmt == "json":
        if not ctx.text.strip():
            return SourceFile(ctx.display, None, skipped=EMPTY)
        try:
            values = [(0, parse_text(ctx.text, source=source, fmt="json"))]
            lines: list[Lines] = [Lines(ctx.text, 1)]
        except InputError as exc:
            if _DASHBOARD.search(ctx.text) and _CHARTS.search(ctx.text):
                return SourceFile(ctx.display, None, skipped=DASHBOARD)
            if not mentions_vllm(ctx.text, metrics=False):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not valid JSON "
                                                             f"({exc.problems[0].message})")
            return SourceFile(ctx.display, None, problems=(_parse_problem(ctx, exc),))
    else:
        terraform = ctx.name.lower().endswith(".tftpl")
        text = _terraform(ctx) if terraform else ctx.text
        if isinstance(text, Problem):
            return SourceFile(ctx.display, None, problems=(text,)) if mentions_vllm(ctx.text) else \
                SourceFile(ctx.display, None, skipped="a Terraform template that mentions no vLLM option")
        chunks = _yaml_chunks(text)
        if len(chunks) > ctx.limits.max_yaml_documents:
            return SourceFile(ctx.display, None, problems=(ctx.problem(
                "input.limit", f"`{ctx.display}` holds more than {ctx.limits.max_yaml_documents} YAML documents"),))
        values = []
        lines = []
        problems = []
        envsubst = envsubst_renders(ctx.name.lower()) is not None
        escapes = template_escapes(ctx) if envsubst and "$" in ctx.text else None
        for start, body in chunks:
            held = placeheld(body, _TF_INTERPOLATION if terraform else PLACEHOLDER, escapes) \
                if (envsubst or terraform) and "$" in body else None
            if held is not None:
                values.append((start, held[0]))
                lines.append(Lines(body, start + 1, held[1], held[0]))
                continue
            try:
                # With the line of every value, which the readers report: one parse, not a second one for lines.
                value, where = yamlsafe.load(body, marks=True)
            except yamlsafe.YamlProblem as refused:
                # (a key that is no string is read as text only where the refusal would be reported)
                read = _anchored(ctx, body, start) if refused.anchored else \
                    _tagged(body, len(chunks) == 1) if refused.tagged or refused.keyed and _reported(ctx.text) else None
                if isinstance(read, Problem):
                    problems.append(read)
                    continue
                if read is not None:
                    values.append((start, read[0]))
                    lines.append(Lines(body, start + 1, read[1], read[0]))  # (yamlsafe would refuse it again)
                    continue
                try:
                    parse_text(body, source=source, fmt="yaml")  # the same refusal, as the located input error
                except InputError as exc:
                    problems.append(_parse_problem(ctx, exc, start))
                continue
            templated = template_of(value, body) if not terraform else None
            if templated is not None:  # (`image: ${VLLM_IMAGE}`: its placeholders are filled in before it is applied)
                value, where = templated
                lines.append(Lines(body, start + 1, where, value))
                values.append((start, value))
            elif value is not None:
                values.append((start, value))
                lines.append(Lines(body, start + 1, where))
        if problems:
            # A broken document is the file's problem. A CI workflow, or a YAML file that never
            # mentions vLLM, is skipped, not reported (_reported).
            if all(pattern.search(ctx.text) for pattern in _WORKFLOW):
                return SourceFile(ctx.display, None, skipped=WORKFLOW)
            if not mentions_vllm(ctx.text):
                return SourceFile(ctx.display, None, skipped=f"mentions no vLLM option, and is not JSON-compatible YAML "
                                                             f"({problems[0].message})")
            if "{{" in ctx.text:  # an unrendered template: one problem for the file, and what the chart's own lines say
                template = chart_template(ctx) if ctx.fs and in_chart(ctx) else None
                if template is not None and template.deployments:
                    return SourceFile(ctx.display, "helm-template", tuple(template.deployments))
                if template is not None and template.podless and template.notes:  # (a ModelService base config)
                    return SourceFile(ctx.display, None, notes=template.notes)
                if template is not None and template.podless:  # an HPA's `vllm:...` metric is no launch
                    return SourceFile(ctx.display, None, skipped="a Helm chart template of objects that hold "
                                                                 "no pod (an autoscaler, a Service, ...)")
                if template is not None and template.read_whole:  # a UI's Deployment that only names vLLM
                    return SourceFile(ctx.display, None, skipped="a Helm chart template whose containers, all "
                                                                 "written in it, run no vLLM")
                if template is not None and template.repeated is not None:
                    problems = [_repeated_problem(ctx, template.repeated)]
                else:
                    problems = [_built_problem(ctx, template.built[0])] if template is not None and template.built \
                        else problems[:1]
            # The stream's other documents are Kubernetes objects (a Secret's `{{HF_TOKEN}}` for the
            # reader to fill in beside a Deployment): the file is a manifest, and its launches are read.
            manifests = [(s, v, t) for (s, v), t in zip(values, lines) if classify(v, single=False) == "kubernetes"]
            if manifests:
                found = manifest_file(ctx, manifests)
                return SourceFile(found.file, found.format, found.deployments, tuple(problems) + found.problems,
                                  found.skipped, found.notes)
            return SourceFile(ctx.display, None, problems=tuple(problems))
    if all(value is None for _, value in values):
        return SourceFile(ctx.display, None, skipped=EMPTY)
    if ctx.name in KUSTOMIZATION_NAMES and len(values) == 1 and isinstance(values[0][1], dict) \
            and "kind" not in values[0][1]:
        # kustomize reads a kustomization file whose apiVersion and kind are left out as one.
        values = [(values[0][0], {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                  **values[0][1]})]
    if fmt == "json" and len(values) == 1 and is_triton_model(ctx, values[0][1]):
        return triton_model(ctx, values[0][1], lines[0])
    if fmt == "json" and len(values) == 1 and is_blueprint(values[0][1]):
        return blueprint_file(ctx, values[0][1], lines[0])
    if fmt == "yaml" and len(values) == 1 and is_beaker_spec(values[0][1]):
        return beaker_spec(ctx, values[0][1], lines[0])
    if fmt == "yaml" and len(values) == 1 and is_truss_config(values[0][1], ctx.name):
        return truss_config(ctx, values[0][1], lines[0])
    kinds = [classify(value, single=len(values) == 1 and fmt == "yaml") for _, value in values]
    if "kubernetes" in kinds:
        return manifest_file(ctx, [(s, v, t) for (s, v), t, k in zip(values, lines, kinds) if k == "kubernetes"])
    if len(values) == 1 and is_serve_config(values[0][1]):
        return serve_file(ctx, values[0][1], lines[0])
    if fmt == "yaml" and len(values) == 1 and is_task(values[0][1]):
        return task_file(ctx, values[0][1], lines[0])
    if fmt == "yaml" and len(values) == 1 and is_run_configuration(values[0][1], ctx.name):
        return run_configuration_file(ctx, values[0][1], lines[0])
    if fmt == "yaml" and len(values) == 1:
        chart = chart_values(ctx, values[0][1], lines[0])
        if chart is not None:
            return chart
    if kinds == ["vllm-config"]:
        return SourceFile(ctx.display, "vllm-config", (vllm_config_file(ctx, values[0][1]),))
    documents = [(start, value) for (start, value), kind in zip(values, kinds) if kind == "document"]
    others = not_options(values[0][1]) if fmt == "yaml" and len(values) == 1 else []
    if not documents and others:
        keys = ", ".join(f"`{k}`" for k in others[:5]) + (", ..." if len(others) > 5 else "")
        return SourceFile(ctx.display, None, skipped=f"{NOT_A_CONFIG}{keys} {'is' if len(others) == 1 else 'are'} "
                                                     "no option of any bundled vLLM release, and vLLM refuses a --config file "
                                                     "with such a key")
    if not documents:
        return SourceFile(ctx.display, None, skipped="not a deployment document, vLLM config or Kubernetes manifest")
    out = []
    for index, (start, value) in enumerate(documents, 1):
        name = value.get("name") if isinstance(value.get("name"), str) else None
        anchor = f"#{index}" if len(values) > 1 else ""
        out.append(Deployment(ctx.display, "document", anchor, start + 1 if len(values) > 1 else None, name, value))
    return SourceFile(ctx.display, "document", tuple(out))
