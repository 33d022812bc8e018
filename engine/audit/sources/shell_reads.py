"""What the decision reads in a shell script's values: vLLM's options it
reads, written in a value; the values a launch gives them and the
environment variables it reads; and the variable a merge's marker stands
for (shell_state.Branches, Run.readings)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...core.markers import UNRESOLVED
from ...core.options import ENGINE_FIELDS, ENV_NAMES, FLAG_OPTIONS, OFF_SWITCHES, VALUE_OPTIONS
from .launch import DEVICE_OPTION

__all__ = ["DECIDING", "past", "shown", "values_read", "merged_name"]

# An option of vLLM's the decision reads, written in a value (`_` for `-` too, as vLLM reads it),
# or `--config`, whose file may give any (not the model, which names the deployment).
DECIDING = re.compile(r"(?<![\w-])(?:" + "|".join(
    "--" + re.escape(option[2:]).replace("\\-", "[-_]") if option.startswith("--") else re.escape(option)
    for option in sorted({*(option for option, (field, _) in (*VALUE_OPTIONS.items(), *FLAG_OPTIONS.items())
                            if field in ENGINE_FIELDS), *OFF_SWITCHES, DEVICE_OPTION, "--config"}, key=len, reverse=True))
    + r")(?![\w-])")


def past(value: str, start: str) -> str:
    """What ``value`` holds past the ``start`` the paths agree on: all of it where it does not start so (none
    where the start ends in a blank this value lacks, as `CMD="$CMD $arg"` grows it on another path)."""
    if value.startswith(start):
        return value[len(start):]
    return "" if start.startswith(value) and start[len(value):].isspace() else value


def shown(marker: str) -> str:
    """How ``marker`` shows the value it stands for (`$ARGS`, `${ARGS[@]}`); "" for no marker."""
    found = UNRESOLVED.fullmatch(marker)
    return found.group(1) if found else ""


def values_read(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """The values a launch (``argv``, its environment ``env``) gives the options and the environment
    variables the decision reads: `--kv-transfer-config "$KV"`, `--kv-transfer-config=$KV`, `$LMCACHE_...`."""
    return [*(value for name, value in env.items() if name in ENV_NAMES),
            *(word for at, word in enumerate(argv) if at > 0 and DECIDING.fullmatch(argv[at - 1]) is not None
              or "=" in word and DECIDING.fullmatch(word.split("=", 1)[0]) is not None)]


def merged_name(as_shown: str) -> str:
    """The variable a merge's marker stands for, from how it is shown (`$KV`, `${ARGS[@]}`)."""
    return as_shown.lstrip("$").strip("{}").removesuffix("[@]")
