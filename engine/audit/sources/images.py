"""Which container images run vLLM's OpenAI server when a container, a
compose service or ``docker run`` gives them only arguments: then the
launch is ``vllm serve ARGS``.

vLLM's release images are known by name. Another image that names vLLM
(``opea/vllm-gaudi``, ``quay.io/.../vllm-openai-ubi9``), given only
arguments that start with an option and name the model with ``--model``,
is read as vLLM's server too, since that is how such images are run; its
entrypoint is not in the file, so the launch carries a note saying so.

Some images start vLLM's server from their environment when given nothing
to run (``vllm/vllm-tpu`` reads ``VLLM_ARGS``): their entrypoint's script is
recorded here, and a container that gives such an image no command runs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ...core.errors import Problem
from ...core.optionlist import refused_everywhere
from .context import Ctx

__all__ = ["VLLM_IMAGE", "presumed_server", "presumed_note", "EnvServer", "env_server", "env_server_note",
           "vllm_arguments", "unread_server_note"]

# vLLM's release image vllm/vllm-openai, its CPU build vllm/vllm-openai-cpu, its ROCm build
# vllm/vllm-openai-rocm, and the CPU builds vLLM's release pipeline pushes to
# public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo and vllm-arm64-cpu-release-repo:
# docker/Dockerfile, Dockerfile.cpu and Dockerfile.rocm end their `vllm-openai` targets with
# ENTRYPOINT ["vllm", "serve"] (the api_server module before it, which takes the same
# options). Images built on vllm-openai keep its name (lmcache/vllm-openai). openEuler's CPU
# builds, openeuler/vllm-cpu, end with ENTRYPOINT ["python", "-m", "vllm.entrypoints.openai.api_server"]
# (openeuler-mirror/openeuler-docker-images AI/vllm-cpu/*/*/Dockerfile).
VLLM_IMAGE = re.compile(r"(^|/)(?:vllm-openai(?:-cpu|-rocm|-xpu)?|vllm(?:-arm64)?-cpu-release-repo|openeuler/vllm-cpu)"
                        r"(?:[:@]|$)")


# llm-d's inference simulator (ghcr.io/llm-d/llm-d-inference-sim, formerly vllm-sim) takes vLLM's
# options to stand in for it in tests, and runs no vLLM; also as a placeholder its deploy files give
# envsubst, `${VLLM_SIMULATOR_IMAGE}` (llm-d/llm-d-inference-sim's deploy/deployments.yaml).
_SIMULATOR = re.compile(r"(?:llm-d-inference-sim|vllm[-_]sim(?:ulator)?(?![a-z]))", re.IGNORECASE)


def _repository(image: str) -> str:
    return image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]


def presumed_server(image: str, args: Sequence[str]) -> bool:
    """Whether ``image``, not one of vLLM's release images, is taken to run
    vLLM's server with ``args``: its repository's name holds `vllm` (not
    llm-d's simulator), the arguments start with an option and name the
    model with `--model` (an image's own program, a router or a proxy,
    takes no `--model`), and where it is given an option no bundled release
    takes, another of vLLM's besides `--model` (a benchmark client's image,
    `vllm-bench-client`, takes `--model` beside its own `--vllm-url` and
    `--runs`; llm-d's images take options of releases newer than the bundled
    ones beside `--port`)."""
    repository = _repository(image)
    options = [a.split("=", 1)[0] for a in args if a.startswith("--")]
    vllms = [o for o in options if refused_everywhere(o) is None]
    return ("vllm" in repository.lower() and not _SIMULATOR.search(repository) and bool(args)
            and args[0].startswith("--") and "--model" in options
            and (len(vllms) == len(options) or any(o != "--model" for o in vllms)))


def vllm_arguments(image: str, args: Sequence[str]) -> bool:
    """Whether ``args`` are options only, `--model` and at least one more,
    each an option of some bundled release of vLLM's server: the arguments
    of an image that may run it (its name does not say; llm-d's simulator,
    which takes them too, does not). Other servers' options differ (TGI's
    `--model-id`, SGLang's `--model-path`)."""
    options = [a.split("=", 1)[0] for a in args if a.startswith("--")]
    return (bool(args) and args[0].startswith("--") and "--model" in options and len(set(options)) > 1
            and not _SIMULATOR.search(_repository(image)) and all(refused_everywhere(o) is None for o in options))


# Where a format writes a container's command, for a hint (a Kubernetes container's `command:`, else).
_COMMAND_FIELD = {"oci-blueprint": '`recipe_container_command: ["vllm", "serve"]`'}


def unread_server_note(ctx: Ctx, where: str, image: str, args: Sequence[str], line: int | None,
                       fmt: str = "kubernetes") -> Problem:
    """The note of a container given only vLLM's options whose image is not known to run vLLM."""
    shown = ", ".join(f"`{a.split('=', 1)[0]}`" for a in args if a.startswith("--"))
    return ctx.problem("source.unrecognized", f"{where}: the image `{image}` is given only arguments, each an option "
                       f"of vLLM's server ({shown}), but it is not known to run vLLM: not read as a launch", line=line,
                       hint=f"if the image runs vLLM's server, write its command "
                            f"({_COMMAND_FIELD.get(fmt, '`command: [vllm, serve]`')}) in the file; see "
                            "docs/audit-formats.md, Images")


def presumed_note(ctx: Ctx, image: str, line: int | None) -> Problem:
    """The note of a launch read through :func:`presumed_server`."""
    return ctx.problem("source.image_entrypoint", f"the image `{image}` is taken to run vLLM's OpenAI server with "
                       "these arguments: it names vLLM and is given options, `--model` among them, but it is not one "
                       "of vLLM's release images and its entrypoint is not in this file", line=line,
                       hint="if the image runs something else, audit the file that gives its entrypoint")


class EnvServer(NamedTuple):
    """An image whose entrypoint, given no arguments, starts vLLM's server
    with words from its environment, unless a switch of the environment
    turns that off."""

    image: re.Pattern[str]
    script: str  # what the entrypoint runs, as shell: its environment's variables expand as they do there
    switch: str  # the variable that, "true", makes the entrypoint start a shell instead
    source: str  # where the entrypoint is, for the note


# vllm-project/tpu-inference's docker/entrypoint.sh (5184a0537, 7 February 2026; the image ran
# bash before): `exec "$@"` given arguments, a shell with DISABLE_VLLM_SERVER=true, else
# `exec python3 -m vllm.entrypoints.openai.api_server ${VLLM_ARGS:-}` (word-split, unquoted).
ENV_SERVERS = (
    EnvServer(re.compile(r"(^|/)vllm-tpu(?:[:@]|$)"), "exec python3 -m vllm.entrypoints.openai.api_server ${VLLM_ARGS:-}",
              "DISABLE_VLLM_SERVER", "vllm-project/tpu-inference's docker/entrypoint.sh; an image built before "
                                     "February 2026 starts a shell instead"),
)


def env_server(image: str, args: Sequence[str], env: Mapping[str, str | None]) -> EnvServer | None:
    """The entrypoint ``image`` runs vLLM's server with, given ``args`` (none)
    and the container's ``env`` (a value None: not known); None where the
    image is none of these, is given arguments, or its switch is "true"."""
    if args:
        return None
    server = next((s for s in ENV_SERVERS if s.image.search(image.split("@")[0])), None)
    return None if server is None or env.get(server.switch) == "true" else server


def env_server_note(ctx: Ctx, image: str, server: EnvServer, line: int | None) -> Problem:
    """The note of a launch an image's entrypoint starts from its environment."""
    return ctx.problem("source.image_entrypoint", f"the image `{image}`, given no command, runs vLLM's OpenAI server "
                       f"with words of its environment: `{server.script.removeprefix('exec ')}` ({server.source})",
                       line=line, hint=f"set {server.switch}=true in the environment if the container is not to serve")
