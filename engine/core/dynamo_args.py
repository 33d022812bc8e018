"""Dynamo's vLLM launcher, ``python3 -m dynamo.vllm ARGS``: the command
line vLLM gets from it. It takes vLLM's engine arguments plus Dynamo's. In
the Dynamo 0.5-1.x line (``components/src/dynamo/vllm/args.py``), a
``--kv-transfer-config`` given wins; otherwise ``--connector`` (default
``nixl``) makes it, as deployers.yaml's ``dynamo-vllm`` entry says.
:func:`~.command.read_command` applies it to every command that runs the
launcher: ``hma-policy decide -- python3 -m dynamo.vllm ...``,
:func:`hma_policy.decide_command`, each launch the audit reads, and a
DynamoGraphDeployment's services (audit/sources/dynamo.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from .markers import unresolved
from .deployers import config, deployer

__all__ = ["DYNAMO_MODULE", "dynamo_vllm_argv"]

DYNAMO_MODULE = "dynamo.vllm"


def dynamo_vllm_argv(args: list[str]) -> tuple[list[str], str | None]:
    """``vllm serve`` words for ``python -m dynamo.vllm ARGS`` (the 0.5-1.x
    line), and where the launcher adds the connector of its default
    ``--connector`` (none given), which one, as a note says it."""
    kept: list[str] = []
    connectors: list[str] | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--connector" or word.startswith("--connector="):
            connectors = [word.split("=", 1)[1]] if "=" in word else []
            i += 1
            while "=" not in word and i < len(args) and not args[i].startswith("-"):
                connectors.append(args[i])
                i += 1
            continue
        kept.append(word)
        i += 1
    given = any(re.match(r"--kv[-_]transfer[-_]config", w) for w in kept)
    mapping = deployer("dynamo-vllm")
    names = list(mapping["connector-default"]) if connectors is None else connectors
    if given or not names or names[0] in mapping["connector-off"]:
        return ["vllm", "serve", *kept], None
    known = mapping["connectors"]
    if len(names) == 1:
        kv: dict[str, Any] = config(known[names[0]]) if names[0] in known \
            else {"kv_connector": unresolved(f"--connector {names[0]}")}
    else:
        children = [config(known[n]) if n in known else {"kv_connector": n} for n in names]
        kv = config(mapping["several"], {"connectors": children})
    defaulted = f"{kv['kv_connector']} (its default `--connector {' '.join(names)}`)" \
        if connectors is None and isinstance(kv["kv_connector"], str) else None
    return ["vllm", "serve", *kept, "--kv-transfer-config", json.dumps(kv)], defaulted
