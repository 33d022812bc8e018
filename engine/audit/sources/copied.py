"""The Dockerfiles that copy a launcher into the image they build, and that
image's release: the release the launcher runs where nothing in it names
one (a Python launcher, pyrelease.py; a shell script, shell.py, such as an
entrypoint `COPY serve /usr/bin/serve` beside `FROM vllm/vllm-openai:vX`).
Each Dockerfile is read only inside the audited paths and never built."""

from __future__ import annotations

from pathlib import Path

from .companions import companion_text, shown as companion_name
from .context import Ctx
from .detect import source_format
from .dockerfile import built_image
from .release import ReleaseHint, platform_of

__all__ = ["built_with"]


def built_with(ctx: Ctx) -> ReleaseHint | None:
    """The release of the image a Dockerfile builds with the launcher in it
    (`RUN pip install vllm==0.4.3`, `COPY vllm_serve.py /app/`): the nearest
    folder, the launcher's own or one above it (at most :data:`_ABOVE`
    folders up, within the audited paths), that holds Dockerfiles whose COPY
    or ADD names the file or a folder that holds it, relative to the
    Dockerfile's folder (runpod-workers/worker-vllm: `COPY src /src` beside
    `src/`), where one release is named so. A Dockerfile that copies its
    whole folder (`COPY . /app`) copies every file and names none. The
    release may be one not known (``version`` None), with why; its
    ``platform`` is the image's, where that is not CUDA."""
    path = ctx.real_path()
    if path is None:
        return None
    here = path.parent
    for _ in range(_ABOVE + 1):
        if not ctx.may_read(here):
            return None
        try:
            beside = sorted(here.iterdir())
        except OSError:
            return None
        relative = path.relative_to(here).as_posix()
        held = {relative, *(parent.as_posix() for parent in Path(relative).parents if parent.as_posix() != ".")}
        found = set()
        for dockerfile in beside:
            if source_format(dockerfile.name) != "dockerfile":
                continue
            text = companion_text(ctx, dockerfile)
            if text is None or not any(name in text for name in held):  # (a Dockerfile that names none copies none)
                continue
            image = built_image(Ctx(dockerfile, companion_name(ctx, dockerfile), ctx.roots, ctx.limits, text))
            if image is not None and held & image.copied and image.release is not None:
                found.add((image.release.version, f"{image.release.origin} in {companion_name(ctx, dockerfile)}, which "
                                                  "copies this file into the image it builds", None,
                           platform_of(image.base)))
        if found:
            # (several releases name none; an image whose release is not known, such as vllm/vllm-tpu:nightly, says why)
            return ReleaseHint(*found.pop()) if len(found) == 1 else None
        if here.parent == here:
            return None
        here = here.parent
    return None


# How many folders above the launcher's a Dockerfile that copies it is looked for.
_ABOVE = 2
