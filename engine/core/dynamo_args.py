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
from .releases import release_numbers

__all__ = ["DYNAMO_MODULE", "DYNAMO_MODULES", "Launcher", "dynamo_vllm_argv"]

DYNAMO_MODULE = "dynamo.vllm"
# Dynamo's vLLM workers: `python -m dynamo.vllm`, and its unified entry point (components/src/dynamo/vllm/
# unified_main.py, the path of its disaggregated launchers' `--unified`), which parses the same options
# with dynamo.vllm.args.parse_args.
DYNAMO_MODULES = frozenset({DYNAMO_MODULE, "dynamo.vllm.unified_main"})
_KV_EVENTS = re.compile(r"--kv[-_]events[-_]config(=|$)")
_KV_TRANSFER = re.compile(r"--kv[-_]transfer[-_]config(=|$)")


class Launcher(NamedTuple):
    """What Dynamo's launcher hands vLLM."""

    argv: list[str]  # vLLM's command line: ``vllm serve ...``
    notes: tuple[str, ...]  # what it adds or drops of its own accord, each as a note says it
    refused: str | None = None  # why it refuses the command, as its own error says (it starts no vLLM)


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
    who = f"Dynamo {dynamo}'s vLLM launcher" if dynamo else "Dynamo's vLLM launcher"
    kept, notes = _kv_events(kept, line, mapping, who)
    if line is None and any(w == "--disaggregation-mode" or w.startswith("--disaggregation-mode=") for w in kept):
        # Only Dynamo 1.0.0 and later take `--disaggregation-mode` (earlier launchers' argparse refuses it):
        # their connector rules, not the old default `--connector nixl`, whatever release it is.
        line = _line(mapping, _DISAGGREGATION_MODE)
        who = f"Dynamo's vLLM launcher ({_DISAGGREGATION_MODE} or later, as `--disaggregation-mode` says)"
    at = next((index for index, word in enumerate(kept) if _KV_TRANSFER.match(word)), None)
    if at is not None and line is not None and line["kv-transfer-config"] == "replaced":
        kept = kept[:at] + kept[at + (1 if "=" in kept[at] else 2):]
        notes += (f"{who} replaces the command's --kv-transfer-config with its own",)
        at, connectors = None, None
    refused = _refusal(line, who, connectors, at is not None, kept, mapping)
    defaults = mapping["connector-default"] if line is None else line["connector-default"]
    names = list(defaults) if connectors is None else connectors
    if at is not None or not names or names[0] in mapping["connector-off"]:
        return Launcher(["vllm", "serve", *kept], notes, refused)
    known = mapping["connectors"]
    if len(names) == 1:
        kv: dict[str, Any] = config(known[names[0]]) if names[0] in known \
            else {"kv_connector": unresolved(f"--connector {names[0]}")}
    else:
        children = [config(known[n]) if n in known else {"kv_connector": n} for n in names]
        kv = config(mapping["several"], {"connectors": children})
    if connectors is None and isinstance(kv["kv_connector"], str):
        # (0.4.x has no --connector to turn it off: it replaces any config with its own)
        remedy = "" if line is not None and line["kv-transfer-config"] == "replaced" else \
            "; `--connector none` leaves it out"
        notes += (f"{who} adds {kv['kv_connector']} (its default `--connector {' '.join(names)}`) as vLLM's "
                  f"--kv-transfer-config, as the command names no connector{remedy}",)
    return Launcher(["vllm", "serve", *kept, "--kv-transfer-config", json.dumps(kv)], notes, refused)


# The first Dynamo release whose vLLM launcher takes `--disaggregation-mode` (components/src/dynamo/vllm/
# args.py: v0.9.1 has `--is-prefill-worker`, v1.0.0 `--disaggregation-mode`).
_DISAGGREGATION_MODE = "1.0.0"


def _refusal(line: dict[str, Any] | None, who: str, connectors: list[str] | None, given: bool, kept: list[str],
             mapping: dict[str, Any]) -> str | None:
    """Why the launcher of ``line`` refuses the command, as its own error says (None: it does not)."""
    if line is None:
        return None
    both = "\"Cannot specify both --kv-transfer-config and --connector flags\""
    off = connectors is not None and (not connectors or connectors[0].lower() in mapping["connector-off"])
    if line["connector-refused"] and connectors is not None:
        return f"{who} refuses `--connector`: Dynamo 1.0.0 removed it, and adds no connector; give vLLM's " \
               "--kv-transfer-config instead"
    if line["connector-refused"] and not given and _mode(kept) == "prefill":
        return f"{who} refuses a prefill worker (`--disaggregation-mode prefill`) without a --kv-transfer-config"
    if given and line["kv-transfer-config"] == "refused":
        return f"{who} refuses a --kv-transfer-config: its --connector is always set (default nixl, `none` too): {both}"
    if given and line["kv-transfer-config"] == "refused-unless-off" and not off:
        return f"{who} refuses a --kv-transfer-config unless `--connector none`: {both}"
    return None


def _mode(kept: list[str]) -> str | None:
    """The worker's disaggregation mode: ``--disaggregation-mode MODE`` (``=MODE``), or the older flags."""
    for word, following in zip(kept, [*kept[1:], ""]):
        if word == "--disaggregation-mode":
            return following
        if word.startswith("--disaggregation-mode="):
            return word.split("=", 1)[1]
    return "decode" if "--is-decode-worker" in kept else "prefill" if "--is-prefill-worker" in kept else None


def _line(mapping: dict[str, Any], dynamo: str | None) -> dict[str, Any] | None:
    """The line of deployers.yaml's ``dynamo-vllm.lines`` Dynamo release ``dynamo`` is in (None: not known)."""
    if dynamo is None:
        return None
    found = None
    for line in mapping["lines"]:
        if release_numbers(line["from"]) <= release_numbers(dynamo):
            found = line
    return found


def _kv_events(kept: list[str], line: dict[str, Any] | None, mapping: dict[str, Any],
               who: str) -> tuple[list[str], tuple[str, ...]]:
    """The command's words with the kv_events_config the launcher adds or
    drops (line: the Dynamo release's behaviour), and notes that say so."""
    if line is None:
        return kept, ()
    decode = _mode(kept) == "decode"
    off = "--no-enable-prefix-caching" in kept
    at = next((index for index, word in enumerate(kept) if _KV_EVENTS.match(word)), None)
    erased = line["kv-events-erased"]
    if at is not None and ((erased == "decode-or-off" and (decode or off)) or (erased == "off" and off)):
        why = "prefix caching is off" if off else "the worker is a decode worker"
        width = 1 if "=" in kept[at] else 2
        return kept[:at] + kept[at + width:], (
            f"{who} drops the command's --kv-events-config, as {why}",)
    adds = line["kv-events-adds"]
    if at is None and not off and (adds == "all" or (adds == "not-decode" and not decode)):
        return kept + ["--kv-events-config", json.dumps(mapping["kv-events"])], (
            f"{who} adds a kv_events_config of its own (KV events over ZMQ), as prefix "
            "caching is on and the command gives none; `--no-enable-prefix-caching` leaves it out",)
    return kept, ()
