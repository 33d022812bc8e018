"""Unrendered Helm chart templates (``templates/*.yaml`` with ``{{ ... }}``),
read without Helm where the vLLM command is written in the template itself
(the aibrix regression chart): lines that are only template actions (``{{-
if ... }}``, ``{{- include ... | nindent 8 }}``, ``{{- end }}``) are left
out, and each inline ``{{ .Values.x }}`` is the chart's default where its
``values.yaml`` gives all the expression reads (as an install without values
of its own renders it; a note says so), else a value the audit does not know
(unresolved: a launch is decided only when the decision does not read it).
A container whose ``command`` or ``args`` a template action builds
(``{{- range .Values.extraArgs }}``) is not read: its arguments come from
the chart's values, and the launch is found at the values file or in the
output of ``helm template``.

The container's image so made names the vLLM release where it is vLLM's
release image with a release in its tag: that release decides the launch,
and its origin says it is the chart's default (an install may give another)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ...core import yamlsafe
from ...core.markers import unresolved
from ...core.errors import Problem
from ...core.options import find_vllm
from ...core.schema import pointer
from .companions import read_companion
from .context import Ctx
from .gotemplate import render
from .deployment import Deployment
from .detect import mentions_vllm
from .images import VLLM_IMAGE, presumed_server
from .kubernetes import Site, pod_launches, pod_templates
from .marks import Lines, yaml_chunks
from .modelservice import base_config_note, is_base_config, is_model_service
from .ome import is_runtime, runners
from .release import ReleaseHint, from_image
from .yamlread import YamlError, load as load_anchored

__all__ = ["in_chart", "chart_template", "Template"]

_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
# An action ends at the first `}}` outside its quoted strings: `{{ "}}" }}` prints `}}` (Helm's idiom for the
# literal braces of a template it writes, `"{{ "{{" }} ChildName .ObjectMeta.Name {{ "}}" }}"`).
_ACTION = re.compile(r"""\{\{(?:"(?:[^"\\\n]|\\.)*"|`[^`\n]*`|[^"`}\n]|\}(?!\}))*\}\}""")
_PLACEHOLDER = re.compile(r"HELMVALUE(\d+)X")
# `{{ .Chart.Name }}`: Helm fills it from the chart's Chart.yaml, whatever the install's values
# (a chart's name is lowercase letters, digits and dashes: text wherever YAML reads it).
_CHART_NAME = re.compile(r"\{\{-?\s*\.Chart\.Name\s*-?\}\}")
_NAME = re.compile(r"[a-z][a-z0-9-]*")
# Kinds whose objects hold no pod and run nothing: a template of these alone starts no vLLM
# (an HPA that scales on the metric `vllm:gpu_cache_usage_perc` is no launch).
_PODLESS = frozenset({"HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "Ingress", "NetworkPolicy",
                      "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceMonitor",
                      "PodMonitor", "PersistentVolumeClaim", "HTTPRoute", "Gateway", "InferencePool", "InferenceModel",
                      "VerticalPodAutoscaler", "ConfigMap", "Secret", "CustomResourceDefinition", "StorageClass",
                      "PriorityClass", "Namespace", "MutatingWebhookConfiguration",
                      "ValidatingWebhookConfiguration",
                      # traffic policies of GKE's and Istio's gateways, and the inference extension's objectives
                      "HealthCheckPolicy", "GCPBackendPolicy", "GCPGatewayPolicy", "DestinationRule",
                      "VirtualService", "EnvoyFilter", "InferenceObjective",
                      # OpenShift's Route (benhurjoel/vllm-deployment-ocp-helm's chart)
                      "Route",
                      # llmaz's runtime definition: a Playground that names it runs it (llmaz.py), never itself
                      "BackendRuntime"})


# The keys of an object that runs something: a pod's containers, or a custom resource's image, command or args.
_RUNS = re.compile(r"^\s*-?\s*(?:initContainers|containers|image|command|args)\s*:", re.M)


def in_chart(ctx: Ctx) -> bool:
    """Whether the file is a template of a Helm chart: in its `templates`
    folder, or a folder in it (Helm renders them all: `templates/tests/`)."""
    return _chart_dir(ctx) is not None


def _chart_dir(ctx: Ctx) -> Path | None:
    """The chart's folder: the one that holds the `templates` folder the file is in (at most 4 deep)."""
    return next((folder.parent for folder in list(ctx.path.parents)[:5] if folder.name == "templates"), None)


class Template(NamedTuple):
    """What a chart template holds, read with its values unknown."""

    deployments: list[Deployment]  # its launches; none when their commands are built from values
    podless: bool  # every object is of a kind that holds no pod (an HPA, a Service): it starts nothing
    # Every object holds no pod, or pods whose containers are all written in the template (none
    # built from values): what they run is known, so a template without launches starts no vLLM.
    read_whole: bool = False
    # Each container whose command or args a template action builds: its name, and the action's line.
    built: tuple[tuple[str, int], ...] = ()
    # A key that an object holding a pod gives twice (on both branches of an `if`): the key, its second line.
    repeated: tuple[str, int] | None = None
    # What the template's objects are where that says why they start nothing (an llm-d ModelService base config).
    notes: tuple[Problem, ...] = ()


def chart_template(ctx: Ctx) -> Template | None:
    """The launches written in a chart template, or None when it is not
    YAML even with its actions left out."""
    text = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), ctx.text)
    name = _chart_name(ctx) if _CHART_NAME.search(text) else None
    if name is not None:
        text = _CHART_NAME.sub(name, text)
    expressions: list[str] = []
    action_lines: dict[int, str] = {}
    rows = []
    for number, row in enumerate(text.split("\n"), 1):
        if _ACTION.search(row) and not _ACTION.sub("", row).strip():
            action_lines[number] = _kind(_ACTION.findall(row))
            rows.append("")
            continue

        def hold(match: re.Match) -> str:
            expressions.append(match.group(0))
            return f"HELMVALUE{len(expressions) - 1}X"
        rows.append(_ACTION.sub(hold, row))
    out: list[Deployment] = []
    problems: list[Problem] = []
    podless = read_whole = True
    notes: list[Problem] = []
    built: list[tuple[str, int]] = []
    chart = _Chart(ctx)
    for start, body in yaml_chunks("\n".join(rows)):
        runs = True  # whether the object may run something
        where: dict[str, tuple[int, int]] | None = None  # (the marks of a document read with its anchors)
        try:
            obj, where = _parsed(body)
        except YamlError:
            return None
        except yamlsafe.YamlProblem as refused:
            # Both branches of an `if` may give a key (conditions are not evaluated): then the
            # object's kind is still known, but not which branch its fields come from.
            both = _repeated(body) if refused.duplicate is not None else None
            obj = both if both is not None and _podless(both, body) else None
            if obj is None and both is not None and _runs_no_vllm(both):
                podless = False  # (a pod, whose containers, all written in it, run no vLLM: read_whole)
                continue
            marked = _quiet_repeat(body, both, refused.line, lambda c: not _may_run_vllm(c, expressions, chart.value)) \
                if obj is None and both is not None and refused.line else None
            if marked is not None:
                obj, where = both, marked  # (read on: its other containers say what the pod runs)
            elif obj is None:
                return Template([], False, repeated=(refused.duplicate, start + refused.line)) \
                    if refused.duplicate is not None and refused.line is not None else None
            else:
                runs = False
        if not isinstance(obj, dict):
            continue
        podless = podless and (obj.get("kind") in _PODLESS or not runs)
        lines = Lines(body, start + 1, where, obj if where is not None else None)
        if is_base_config(obj):  # (its Deployment is a string, which the ModelServices that name it run)
            notes.append(base_config_note(ctx, obj, lines.at() or start + 1))
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        pods = list(pod_templates(obj))
        # (a kind with pods of its own shape; a ModelService's pod is its base config's, which another file holds)
        read_whole = read_whole and (obj.get("kind") in _PODLESS or bool(pods)) and not is_model_service(obj)
        for path, pod, pod_meta, role in pods:
            actions = [_built(lines, path + ("containers", i), c, action_lines, rows) if isinstance(c, dict) else None
                       for i, c in enumerate(pod["containers"])]
            # (one built by actions that cannot run vLLM, a chart's busybox test pod, is as good as written)
            quiet = [c for c, at in zip(pod["containers"], actions)
                     if isinstance(c, dict) and at is not None and not _may_run_vllm(c, expressions, chart.value)]
            built += [(_values(str(c.get("name") or ""), expressions), at) for c, at in zip(pod["containers"], actions)
                      if isinstance(c, dict) and at is not None and not any(c is q for q in quiet)]
            literal = [c for c, at in zip(pod["containers"], actions) if isinstance(c, dict) and at is None]
            read_whole = read_whole and bool(literal or quiet) and len(literal) + len(quiet) == len(pod["containers"])
            if not literal:
                continue
            held = _values(dict(pod, containers=literal), expressions, chart.value)
            for container in literal:
                index = pod["containers"].index(container)
                line = lines.first((*path, "containers", index, "name"), (*path, "containers", index))
                release, values_file = chart.release(container.get("image"), expressions)
                values_file = values_file or (chart.shown if _PLACEHOLDER.search(str(container)) else None)
                site = Site(str(obj.get("kind")), _values(str(meta.get("name") or ""), expressions),
                            _values(str(meta.get("namespace") or ""), expressions), str(obj.get("apiVersion")), role,
                            merged_from=(ctx.display, values_file) if values_file else (), format="helm-template")
                for d in pod_launches(ctx, dict(held, containers=[held["containers"][literal.index(container)]]),
                                      pod_meta, site, lines, path, {}, problems, line=line, release=release):
                    out.append(d.replace(notes=d.notes + (ctx.problem(
                        "source.template", "read from an unrendered Helm template: values written `{{ ... }}` are "
                        + (f"the chart's defaults ({values_file}) where it gives them, else not known"
                           if values_file else "not known")
                        + ", and template conditions are not evaluated",
                        line=line,
                        hint="audit the output of `helm template` for the exact command"),)))
    return Template(out, podless, read_whole, tuple(built), notes=tuple(notes))


def _parsed(body: str) -> tuple[Any, dict[str, tuple[int, int]] | None]:
    """A template's YAML document with its actions held; one with anchors and aliases (`host: &host
    {{ ... }}`, then `- *host`) read as Helm's YAML reads them, with the marks of its values. Raises
    yamlsafe.YamlProblem for another refusal, YamlError for a document yamlread refuses."""
    try:
        return yamlsafe.load(body)[0], None
    except yamlsafe.YamlProblem as refused:
        if not refused.anchored:
            raise
    where: dict[str, tuple[int, int]] = {}
    return load_anchored(body, marks=where)[0], where


def _may_run_vllm(container: dict[str, Any], expressions: list[str], known: Callable[[str], str | None]) -> bool:
    """Whether a container whose command or args a template action builds
    may run vLLM: its text names vLLM (its values as the template writes
    them), or its image is a template's value that the chart's defaults
    (``known``) do not give, or give as an image named for vLLM. A chart's
    test pod that runs `wget` in busybox on both branches of an `if` runs
    none (helm-charts' vllm-kserve, whose file names vLLM only in the
    chart's name), nor does a model download Job in `amazon/aws-cli`."""
    image = container.get("image")
    if not isinstance(image, str):
        return True
    shown = _values(image, expressions, known)
    return mentions_vllm(str(_values(str(container), expressions))) or _PLACEHOLDER.search(image) is not None and (
        not isinstance(shown, str) or "\x00" in shown or mentions_vllm(shown))


def _repeated(body: str) -> dict[str, Any] | None:
    """A template's object that gives a key twice (both branches of an `if`), its last value kept; None where
    it is no mapping even so."""
    try:
        obj = yamlsafe.load(body, repeated=True)[0]
    except yamlsafe.YamlProblem:
        return None
    return obj if isinstance(obj, dict) else None


def _podless(obj: dict[str, Any], body: str) -> bool:
    """Whether such an object holds no pod: its kind holds none, or it names
    no container, image, command or args at all (a GKE HealthCheckPolicy
    whose `if`/`else` both give `config:`; a custom resource that runs vLLM
    names one of them)."""
    return obj.get("kind") in _PODLESS or not (list(pod_templates(obj)) or _RUNS.search(body))


def _runs_no_vllm(obj: dict[str, Any]) -> bool:
    """Whether such an object holds containers, each written in the
    template, that run no vLLM server whichever branch gives its keys: a
    command that is none (llm-d-router's `vllm launch render` sidecar, whose
    server starts no engine), or an image that is no vLLM image and is not
    taken to run its server. (A value the template fills in may be anything.)"""
    pods = [pod for _, pod, _, _ in pod_templates(obj)] + ([pod for _, pod, _ in runners(obj)] if is_runtime(obj) else [])
    containers = [c for pod in pods for c in pod["containers"]]
    for container in containers:
        if not isinstance(container, dict) or _PLACEHOLDER.search(str(container)):
            return False
        command = [str(w) for w in container.get("command") or []] if isinstance(container.get("command"), list) else []
        args = [str(w) for w in container.get("args") or []] if isinstance(container.get("args"), list) else []
        image = str(container.get("image") or "")
        if find_vllm(command + args) is not None or not command and (VLLM_IMAGE.search(image) or presumed_server(image, args)):
            return False
    return bool(containers)


def _quiet_repeat(body: str, both: dict[str, Any], line: int,
                  quiet: Callable[[dict[str, Any]], bool]) -> dict[str, tuple[int, int]] | None:
    """Where a template gives a key twice at ``line`` of ``body`` in a container
    that runs no vLLM whichever branch gives it (``quiet``: castai's model
    downloader, an init container whose `args` an `if` and its `else` both
    give), the marks of ``both``'s values: the pod's other containers still
    say what it runs. None for a key given twice anywhere else."""
    try:
        where = yamlsafe.load(body, repeated=True, marks=True)[1]
    except yamlsafe.YamlProblem:
        return None
    for path, pod, _, _ in pod_templates(both):
        for key in ("initContainers", "containers"):
            listed = pod.get(key)
            for index, container in enumerate(listed if isinstance(listed, list) else []):
                at = pointer((*path, key, index))
                rows = [mark[0] for held, mark in where.items() if held == at or held.startswith(at + "/")]
                if rows and min(rows) <= line <= max(rows):
                    return where if isinstance(container, dict) and quiet(container) else None
    return None


def _chart_name(ctx: Ctx) -> str | None:
    """The `name` of the chart's Chart.yaml (beside `templates/`), or None
    when it is not there, not read or not a chart name."""
    name = _chart_file(ctx, "Chart.yaml")[0].get("name")
    return name if isinstance(name, str) and _NAME.fullmatch(name) else None


def _chart_file(ctx: Ctx, name: str) -> tuple[dict[str, Any], str | None]:
    """The mapping a file of the chart (beside `templates/`) holds, and how
    the report names that file; ({}, None) when it is not there or not read."""
    chart = _chart_dir(ctx)
    found = read_companion(ctx, chart / name) if chart is not None else None
    value = found.documents[0][0] if found is not None and len(found.documents) == 1 else None
    return (value, found.display) if isinstance(value, dict) and found is not None else ({}, None)


class _Chart:
    """The chart's default values, read once a template needs them."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self._values: tuple[dict[str, Any], str | None] | None = None

    def release(self, image: Any, expressions: list[str]) -> tuple[ReleaseHint | None, str | None]:
        """The release the image names with the chart's default values, and
        how the report names the values file, when every value it is
        written with is there and the image so made names a release; else
        (None, None): the image stays unknown."""
        if not isinstance(image, str) or not _PLACEHOLDER.search(image):
            return None, None
        if self._values is None:
            self._values = self._read()
        values, shown = self._values
        if shown is None:
            return None, None
        written = _PLACEHOLDER.sub(lambda m: expressions[int(m.group(1))], image)
        hint = from_image(render(written, values, _FUNCTIONS))
        if hint.version is None:  # a value the defaults do not give stays unknown, and names no release
            return None, None
        return ReleaseHint(hint.version, f"{hint.origin}, the chart's default ({shown})"), shown

    @property
    def shown(self) -> str | None:
        """How the report names the chart's values.yaml (None: it has none the audit reads)."""
        if self._values is None:
            self._values = self._read()
        return self._values[1]

    def value(self, expression: str) -> str | None:
        """What an expression renders to with the chart's default values,
        where they give all it reads (None: it stays unknown)."""
        if self.shown is None:
            return None
        assert self._values is not None
        rendered = render(expression, self._values[0], _FUNCTIONS)
        return None if "\x00" in rendered else rendered

    def _read(self) -> tuple[dict[str, Any], str | None]:
        values, shown = _chart_file(self.ctx, "values.yaml")
        chart = _chart_file(self.ctx, "Chart.yaml")[0]
        return {"Values": values, "Chart": chart}, shown


# Sprig's `default` (`{{ .Values.image.tag | default .Chart.AppVersion }}`): its first
# argument where the value is empty or missing.
# Sprig's `quote` of a whole scalar (`- {{ .Values.port | quote }}`): the YAML parser takes the
# quotes, and the value is its text.
_FUNCTIONS: dict[str, Callable[..., Any]] = {"default": lambda fallback, value=None: value if value not in (None, "", 0, False, [], {}) else fallback,
              "quote": lambda value: value}


# What a line of template actions alone does: prints text (`{{- toYaml .Values.extraArgs | nindent 12 }}`),
# chooses what is printed (`{{- if ... }}`, `{{- range ... }}`, `{{- end }}`), or only sets a template
# variable (`{{- $env := list }}`), which prints nothing.
_CONTROL = re.compile(r"\{\{-?\s*(?:if|else|end|with|range|define)\b")
_ASSIGN = re.compile(r"\{\{-?\s*\$[A-Za-z_][A-Za-z0-9_]*\s*:?=")


def _kind(actions: list[str]) -> str:
    if any(not _CONTROL.match(action) and not _ASSIGN.match(action) for action in actions):
        return "print"
    return "control" if any(_CONTROL.match(action) for action in actions) else "quiet"


def _built(lines: Lines, path: tuple, container: dict[str, Any], action_lines: dict[int, str],
           rows: list[str]) -> int | None:
    """The line of the first template action that builds the container's
    command or args, or None where none does: among the lines of each (from
    its key to the next line indented no deeper), an action that prints, or
    one that chooses what is printed between the lines written there (not
    one that closes a condition around the block, nor one that only sets a
    template variable)."""
    for key in ("command", "args"):
        line = lines.key(*path, key) if key in container else None
        if line is None:
            continue
        written = re.compile(r"\s*(?:- )?" + key + r"\s*:")
        at = line
        while not written.match(rows[at - 1]) and at > 1 and not rows[at - 2].strip():
            at -= 1  # (action lines between the key and its first item: the key is above them)
        if at > 1 and not written.match(rows[line - 1]) and written.match(rows[at - 2]):
            line = at - 1
        indent = _column(rows[line - 1])
        end = line + 1
        while end <= len(rows) and (not rows[end - 1].strip() or end in action_lines
                                    or len(rows[end - 1]) - len(rows[end - 1].lstrip()) > indent
                                    or rows[end - 1].lstrip().startswith("- ") and len(rows[end - 1]) - len(rows[end - 1].lstrip()) == indent):
            end += 1
        last = end
        while last - 1 > line and not rows[last - 2].strip():  # (an action after the block, `{{- end }}` of the file's `if`)
            last -= 1
        inside = sorted(at for at, kind in action_lines.items()
                        if line < at < end and kind == "print" or line < at < last and kind == "control")
        if inside:
            return inside[0]
    return None


def _column(row: str) -> int:
    """The column of a row's key: past the dashes of the list items it starts (`  - command:`: 4)."""
    rest = row.lstrip(" ")
    column = len(row) - len(rest)
    while rest.startswith("- "):
        stripped = rest[2:].lstrip(" ")
        column += len(rest) - len(stripped)
        rest = stripped
    return column


def _values(value: Any, expressions: list[str], known: Callable[[str], str | None] | None = None) -> Any:
    """A value with each template expression as what ``known`` renders it
    to (the chart's defaults), else as an unresolved marker."""
    if isinstance(value, str):
        def sub(match: re.Match) -> str:
            expression = expressions[int(match.group(1))]
            rendered = known(expression) if known is not None else None
            return unresolved(expression) if rendered is None else rendered
        return _PLACEHOLDER.sub(sub, value)
    if isinstance(value, list):
        return [_values(v, expressions, known) for v in value]
    if isinstance(value, dict):
        return {k: _values(v, expressions, known) for k, v in value.items()}
    return value
