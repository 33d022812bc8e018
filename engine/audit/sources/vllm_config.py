"""vLLM config files: a YAML mapping of ``vllm serve`` options, read alone as
the deployment ``vllm serve [MODEL] --config FILE``."""

from __future__ import annotations

from typing import Any

from ...core.options import Arg, ConfigFile
from .context import Ctx
from .deployment import Deployment
from .launch import Invocation, deployment

__all__ = ["vllm_config_file"]


def vllm_config_file(ctx: Ctx, config: dict[str, Any]) -> Deployment:
    """A config file on its own: the deployment `vllm serve [MODEL] --config FILE`."""
    argv = [Arg(word, "command line") for word in ("vllm", "serve", "--config", ctx.name)]
    inv = Invocation(argv, None, {}, "", require_model=False)
    inv.config_reader = lambda name: ConfigFile(ctx.text, ctx.display)  # the file itself, named as the audit names it
    facts, problem, line = ctx.facts_for(None)
    inv.facts, inv.facts_problem = facts, problem
    inv.facts_origin = f"line {line}: hma-policy directive" if line else ""
    return deployment(inv, ctx, "vllm-config")
