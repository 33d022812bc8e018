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

Frontends, processors and routers run no vLLM engine. The role is the
service's ``subComponentType``, else prefill for a prefill worker and decode
for the others."""

from __future__ import annotations

import json
import re
from typing import Any

from ...core.markers import unresolved
from ...core.errors import Problem
from .context import Ctx
from .detect import SHELLS
from .dynamo_args import DYNAMO_MODULE, dynamo_vllm_argv
from .deployment import Deployment
from .kubernetes import Site, pod_launches
from .marks import Lines

__all__ = ["dynamo_graphs", "GRAPH_KIND"]

GRAPH_KIND = "DynamoGraphDeployment"
_SERVE = re.compile(r"\bdynamo\s+serve\s+\S+:(\w+)")


def _serve_argv(config_text: str | None, service: str) -> list[str] | None:
    """Dynamo 0.3: the vLLM flags of ``service`` in DYN_DEPLOYMENT_CONFIG."""
    if config_text is None:
        return ["vllm", "serve", "--kv-transfer-config", unresolved("$DYN_DEPLOYMENT_CONFIG")]
    try:
        config = json.loads(config_text)
    except ValueError:
        return ["vllm", "serve", "--kv-transfer-config", unresolved("DYN_DEPLOYMENT_CONFIG (not JSON)")]
    section = config.get(service) if isinstance(config, dict) and isinstance(config.get(service), dict) else {}
    common = config.get("Common") if isinstance(config.get("Common"), dict) else {}
    values = {k: common[k] for k in section.get("common-configs") or [] if k in common}
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
        spec = graph["spec"] if isinstance(graph.get("spec"), dict) else {}
        services = spec["services"] if isinstance(spec.get("services"), dict) else {}
        common_env = spec.get("envs") if isinstance(spec.get("envs"), list) else []
        for name, service in services.items():
            if not isinstance(service, dict):
                continue
            main = ((service.get("extraPodSpec") or {}).get("mainContainer") or {}) \
                if isinstance(service.get("extraPodSpec"), dict) else {}
            if not isinstance(main, dict):
                continue
            words = [str(w) for w in (main.get("command") or []) + (main.get("args") or [])] \
                if isinstance(main.get("command") or [], list) and isinstance(main.get("args") or [], list) else []
            envs = [e for e in common_env + (service.get("envs") if isinstance(service.get("envs"), list) else [])
                    if isinstance(e, dict)]
            argv = _engine_argv(words, str(name), envs)
            if argv is None:
                continue
            role = service.get("subComponentType") or (
                "prefill" if "--is-prefill-worker" in words or str(name).startswith("Prefill") else "decode")
            container = {"name": main.get("name") or "main", "image": main.get("image"), "command": argv,
                         "env": envs + [e for e in main["env"] if isinstance(e, dict)] if isinstance(main.get("env"), list) else envs}
            site = Site(GRAPH_KIND, str(meta.get("name") or ""), str(meta.get("namespace") or ""),
                        str(graph.get("apiVersion")), str(role), format="dynamo")
            line = lines.key("spec", "services", name) or lines.at()
            out += pod_launches(ctx, {"containers": [container]}, None, site, lines, (), {}, problems, line=line)
    return out, problems


def _engine_argv(words: list[str], name: str, envs: list[dict[str, Any]]) -> list[str] | None:
    """The vLLM words of a service's command, or None when it runs no vLLM engine."""
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words[i + 1] == DYNAMO_MODULE:
            return dynamo_vllm_argv(words[i + 2:])
    match = _SERVE.search(" ".join(words))
    if match and re.search(r"(?:Vllm|Prefill)Worker$", match.group(1)):
        config = next((e.get("value") for e in envs if e.get("name") == "DYN_DEPLOYMENT_CONFIG"), None)
        return _serve_argv(config if isinstance(config, str) else None, match.group(1))
    if words and words[0].rsplit("/", 1)[-1] in SHELLS and any(DYNAMO_MODULE in word for word in words[1:]):
        return words  # a script: the shell reader finds the launch in it, and launch.py reads Dynamo's words
    return None
