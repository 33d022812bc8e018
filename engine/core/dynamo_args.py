"""Dynamo's vLLM launcher, ``python3 -m dynamo.vllm ARGS``: the command
line vLLM gets from it. It takes vLLM's engine arguments plus Dynamo's. A
``--kv-transfer-config`` given wins; otherwise ``--connector`` (default
``nixl`` before Dynamo 1.0.0) makes it; Dynamo 0.4.0 to 1.0.x also add a
``kv_events_config`` of their own, as deployers.yaml's ``dynamo-vllm``
entry says, by Dynamo release where the image names one.
:func:`~.command.read_command` applies it to every command that runs the
launcher: ``hma-policy decide -- python3 -m dynamo.vllm ...``,
:func:`hma_policy.decide_command`, each launch the audit reads, and a
DynamoGraphDeployment's services (audit/sources/dynamo.py)."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from .markers import unresolved
from .deployers import config, deployer

__all__ = ["DYNAMO_MODULE", "Launcher", "dynamo_vllm_argv"]

DYNAMO_MODULE = "dynamo.vllm"
_KV_EVENTS = re.compile(r"--kv[-_]events[-_]config(=|$)")


class Launcher(NamedTuple):
    """What Dynamo's launcher hands vLLM."""

    argv: list[str]  # vLLM's command line: ``vllm serve ...``
    notes: tuple[str, ...]  # what it adds or drops of its own accord, each as a note says it


def dynamo_vllm_argv(args: list[str], dynamo: str | None = None) -> Launcher:
    """``vllm serve`` words for ``python -m dynamo.vllm ARGS`` under Dynamo
    release ``dynamo`` (None: not known, read as the connector default alone)."""
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
    mapping = deployer("dynamo-vllm")
    line = _line(mapping, dynamo)
    kept, notes = _kv_events(kept, line, mapping, dynamo)
    given = any(re.match(r"--kv[-_]transfer[-_]config", w) for w in kept)
    defaults = mapping["connector-default"] if line is None else line["connector-default"]
    names = list(defaults) if connectors is None else connectors
    if given or not names or names[0] in mapping["connector-off"]:
        return Launcher(["vllm", "serve", *kept], notes)
    known = mapping["connectors"]
    if len(names) == 1:
        kv: dict[str, Any] = config(known[names[0]]) if names[0] in known \
            else {"kv_connector": unresolved(f"--connector {names[0]}")}
    else:
        children = [config(known[n]) if n in known else {"kv_connector": n} for n in names]
        kv = config(mapping["several"], {"connectors": children})
    if connectors is None and isinstance(kv["kv_connector"], str):
        notes += (f"Dynamo{' ' + dynamo if dynamo else ''}'s vLLM launcher adds {kv['kv_connector']} (its default `--connector {' '.join(names)}`) as "
                  "vLLM's --kv-transfer-config, as the command names no connector; `--connector none` leaves it out",)
    return Launcher(["vllm", "serve", *kept, "--kv-transfer-config", json.dumps(kv)], notes)


def _line(mapping: dict[str, Any], dynamo: str | None) -> dict[str, Any] | None:
    """The line of deployers.yaml's ``dynamo-vllm.lines`` Dynamo release ``dynamo`` is in (None: not known)."""
    if dynamo is None:
        return None
    found = None
    for line in mapping["lines"]:
        if _order(line["from"]) <= _order(dynamo):
            found = line
    return found


def _order(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", release)[:3])


def _kv_events(kept: list[str], line: dict[str, Any] | None, mapping: dict[str, Any],
               dynamo: str | None) -> tuple[list[str], tuple[str, ...]]:
    """The command's words with the kv_events_config the launcher adds or
    drops (line: the Dynamo release's behaviour), and notes that say so."""
    if line is None:
        return kept, ()
    decode = "--is-decode-worker" in kept or "--disaggregation-mode=decode" in kept or any(
        word == "--disaggregation-mode" and following == "decode" for word, following in zip(kept, kept[1:]))
    off = "--no-enable-prefix-caching" in kept
    at = next((index for index, word in enumerate(kept) if _KV_EVENTS.match(word)), None)
    erased = line["kv-events-erased"]
    if at is not None and ((erased == "decode-or-off" and (decode or off)) or (erased == "off" and off)):
        why = "prefix caching is off" if off else "the worker is a decode worker"
        width = 1 if "=" in kept[at] else 2
        return kept[:at] + kept[at + width:], (
            f"Dynamo {dynamo}'s vLLM launcher drops the command's --kv-events-config, as {why}",)
    adds = line["kv-events-adds"]
    if at is None and not off and (adds == "all" or (adds == "not-decode" and not decode)):
        return kept + ["--kv-events-config", json.dumps(mapping["kv-events"])], (
            f"Dynamo {dynamo}'s vLLM launcher adds a kv_events_config of its own (KV events over ZMQ), as prefix "
            "caching is on and the command gives none; `--no-enable-prefix-caching` leaves it out",)
    return kept, ()
