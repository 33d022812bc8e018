"""NVIDIA Dynamo ``DynamoGraphDeployment``: each service whose main
container runs a vLLM engine is one launch.

- ``python3 -m dynamo.vllm ARGS`` takes vLLM's engine arguments plus
  Dynamo's. In the Dynamo 0.5-1.x line (``components/src/dynamo/vllm/
  args.py``), a ``--kv-transfer-config`` given wins; otherwise ``--connector``
  (default ``nixl``) makes it: one connector -> ``lmcache``
  LMCacheConnectorV1, ``nixl`` NixlConnector, ``kvbm`` DynamoConnector
  (module ``kvbm.vllm_integration.connector``), each ``kv_both``; several ->
  ``PdConnector`` over them; ``none``/``null`` -> none (dynamo_args.py). A
  main container that runs it from a shell (``sh -c "... exec python3 -m
  dynamo.vllm ..."``) is read as that script.
- Dynamo 0.3 ``dynamo serve graphs.X:Service`` reads the JSON in the
  ``DYN_DEPLOYMENT_CONFIG`` env variable: the service's section, plus the
  ``Common`` keys it lists in ``common-configs``, become vLLM flags.

Both versions of the CRD are read: v1alpha1's ``spec.services`` and
v1beta1's ``spec.components`` (:func:`_services`). Frontends, processors and
routers run no vLLM engine. The role is the service's ``subComponentType``
(v1beta1: a component's ``type`` prefill or decode), else prefill for a
prefill worker and decode for the others."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from ...core.markers import unresolved
from ...core.errors import Problem
from .context import Ctx
from .detect import SHELLS
from ...core.dynamo_args import DYNAMO_MODULE, DYNAMO_MODULES
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["dynamo_graphs", "GRAPH_KIND"]

GRAPH_KIND = "DynamoGraphDeployment"
_SERVE = re.compile(r"\bdynamo\s+serve\s+\S+:(\w+)")
_PREFILL_MODE = re.compile(r"--disaggregation-mode[=\s]+[\"']?prefill\b|(?<![\w-])--is-prefill-worker(?![\w-])")


def _serve_argv(config_text: str | None, service: str) -> list[str] | None:
    """Dynamo 0.3: the vLLM flags of ``service`` in DYN_DEPLOYMENT_CONFIG."""
    if config_text is None:
        return ["vllm", "serve", "--kv-transfer-config", unresolved("$DYN_DEPLOYMENT_CONFIG")]
    try:
        config = json.loads(config_text)
    except ValueError:
        return ["vllm", "serve", "--kv-transfer-config", unresolved("DYN_DEPLOYMENT_CONFIG (not JSON)")]
    if not isinstance(config, dict):  # JSON that is not an object (a list, a number): no section, no Common
        config = {}
    section = config.get(service)
    if not isinstance(section, dict):
        section = {}
    common = config.get("Common")
    if not isinstance(common, dict):
        common = {}
    listed = section.get("common-configs")
    # Only a list of keys names Common keys; JSON keys are strings, so another entry (a number, a list) names none.
    keys = [k for k in listed if isinstance(k, str)] if isinstance(listed, list) else []
    values = {k: common[k] for k in keys if k in common}
    values.update((k, v) for k, v in section.items() if k not in ("common-configs", "ServiceArgs"))
    argv = ["vllm", "serve"]
    for key, value in values.items():
        if value is True:
            argv.append("--" + key)
        elif value is not False and value is not None:
            argv += ["--" + key, value if isinstance(value, str) else json.dumps(value)]
    return argv


def dynamo_graphs(ctx: Ctx, graphs: list[tuple[dict[str, Any], Lines]]) -> tuple[list[Deployment], list[Problem]]:
    problems: list[Problem] = []
    out: list[Deployment] = []
    for graph, lines in graphs:
        meta = graph["metadata"] if isinstance(graph.get("metadata"), dict) else {}
        for service in _services(graph, lines):
            main = service.main
            words = [str(w) for w in (main.get("command") or []) + (main.get("args") or [])] \
                if isinstance(main.get("command") or [], list) and isinstance(main.get("args") or [], list) else []
            argv = _engine_argv(words, service.name, service.env)
            if argv is None:
                continue
            role = service.role or ("prefill" if _prefill_worker(words, service.name) else "decode")
            container = {"name": main.get("name") or "main", "image": main.get("image"), "command": argv,
                         "env": service.env + _dicts(main.get("env"))}
            site = Site(GRAPH_KIND, str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                        str(graph.get("apiVersion")), str(role), format="dynamo")
            # Dynamo's launcher takes options of its own, which change between its releases: the
            # command line's options are not checked against vLLM's lists (as read_command does).
            out += [d.replace(options=()) for d in pod_launches(ctx, {"containers": [container]}, None, site, lines,
                                                                (), {}, problems, line=service.line or lines.at())]
    return out, problems


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The mappings of a list (an env list, containers); none for anything else."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _prefill_worker(words: list[str], name: str) -> bool:
    """Whether a service without a role is a prefill worker: Dynamo's flag
    for one (``--is-prefill-worker`` before 1.0, ``--disaggregation-mode
    prefill`` since, in its words or the script it runs), or its name."""
    return name.startswith("Prefill") or _PREFILL_MODE.search(" ".join(words)) is not None


class _Service(NamedTuple):
    """One service (v1alpha1) or component (v1beta1) of a graph."""

    name: str
    main: dict[str, Any]        # its main container
    env: list[dict[str, Any]]   # the graph's and the service's env, before the container's own
    role: str | None            # as the graph says it (subComponentType, a component's prefill/decode type)
    line: int | None


def _services(graph: dict[str, Any], lines: Lines) -> list[_Service]:
    """The services of a graph, in either version of the CRD: v1alpha1's
    ``spec.services`` map (``extraPodSpec.mainContainer``, ``envs``) and
    v1beta1's ``spec.components`` list (the ``podTemplate`` container named
    ``main``, graph-level ``spec.env``; ``type`` prefill or decode is the
    role), which ai-dynamo/dynamo deploy/operator/api/v1beta1 defines."""
    spec = graph["spec"] if isinstance(graph.get("spec"), dict) else {}
    out: list[_Service] = []
    if isinstance(spec.get("services"), dict):
        for name, service in spec["services"].items():
            extra = service.get("extraPodSpec") if isinstance(service, dict) else None
            main = extra.get("mainContainer") if isinstance(extra, dict) else None
            if isinstance(main, dict):
                out.append(_Service(str(name), main, _dicts(spec.get("envs")) + _dicts(service.get("envs")),
                                    service.get("subComponentType"), lines.key("spec", "services", name)))
    if isinstance(spec.get("components"), list):
        for index, component in enumerate(spec["components"]):
            template = component.get("podTemplate") if isinstance(component, dict) else None
            pod = template.get("spec") if isinstance(template, dict) else None
            main = next((c for c in _dicts(pod.get("containers") if isinstance(pod, dict) else None)
                         if c.get("name") == "main"), None)
            if main is not None:
                kind = component.get("type")
                out.append(_Service(str(component.get("name") or index), main, _dicts(spec.get("env")),
                                    kind if kind in ("prefill", "decode") else None,
                                    lines.at("spec", "components", index)))
    return out


def _engine_argv(words: list[str], name: str, envs: list[dict[str, Any]]) -> list[str] | None:
    """The vLLM words of a service's command, or None when it runs no vLLM engine."""
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words[i + 1] in DYNAMO_MODULES:
            return ["python3", "-m", words[i + 1], *words[i + 2:]]  # (read_command reads Dynamo's words)
    match = _SERVE.search(" ".join(words))
    if match and re.search(r"(?:Vllm|Prefill)Worker$", match.group(1)):
        config = next((e.get("value") for e in envs if e.get("name") == "DYN_DEPLOYMENT_CONFIG"), None)
        return _serve_argv(config if isinstance(config, str) else None, match.group(1))
    if words and words[0].rsplit("/", 1)[-1] in SHELLS and any(DYNAMO_MODULE in word for word in words[1:]):
        return words  # a script: the shell reader finds the launch in it, and read_command reads Dynamo's words
    return None
