"""The vLLM release a launch runs, as far as what deploys it tells: the
container image's tag, a ``pip install vllm==X.Y.Z`` pin, or a
``# hma-policy: {vllm_version: "X.Y.Z"}`` directive (the
``hma-policy.dev/facts`` annotation on Kubernetes).

Only a tag of vLLM's own release image names a release
(``vllm/vllm-openai:v0.21.0``, its CPU builds ``vllm/vllm-openai-cpu`` and
``public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo``, its ROCm build
``vllm/vllm-openai-rocm``; the same path on any registry or mirror:
``docker.io/``, ``ghcr.io/``, ``quay.io/``, ``public.ecr.aws/...``), with
the build-variant suffixes vLLM's release scripts push beside it
(``v0.20.1-cu129``, ``v0.20.1-x86_64-cu129-ubuntu2404``: the same release
built for another architecture, CUDA or base image), of ROCm's
``rocm/vllm`` images the tags that spell ``vllm_X.Y.Z``, and of
vllm-ascend's ``ascend/vllm-ascend`` images (Ascend NPUs) the release
tags, each of which names the vLLM release it runs, and of NVIDIA Dynamo's
``ai-dynamo/vllm-runtime`` the release tags, each Dynamo release's image
installing the vLLM release deployers.yaml records, of AIBrix's
``aibrix/vllm-openai`` builds and Intel's ``intel/llm-scaler-vllm`` (XPU) the release
their tag starts with, and of NVIDIA's NGC ``nvidia/vllm`` the release each
monthly tag ships (deployers.yaml). A digest,
``latest``, ``nightly``, any other tag and any other image (LMCache's
``lmcache/vllm-openai`` is tagged with LMCache's releases) give no version,
with the reason in the origin: nothing is guessed. This module only reads
the release; which policy decides a deployment is chosen elsewhere.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ...core.deployers import deployer
from ...core.markers import UNRESOLVED, has_unresolved, show

__all__ = ["ReleaseHint", "from_image", "from_pin", "from_source", "pinned", "upgraded", "platform_of", "split_image", "valid_version", "VERSION",
           "PIN_VERSION", "PIN", "REQUIREMENT", "RANGE", "specifiers", "from_wheel", "installed"]

# A vLLM release as PyPI spells it: 0.21.0, 0.10.1.1, 0.11.0rc1, 0.6.3.post1.
VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+){1,2}(?:(?:rc|\.post|post|\.dev|dev)[0-9]+)?")
# A version as a pin may spell it, which pip reads by PEP 440's normal form: `0.5.3post1`,
# `0.5.3-post1`, `0.5.3.POST1` and `0.5.3-1` are all 0.5.3.post1 (basetenlabs/truss-examples
# pins `vllm==0.5.3post1`), `0.9.0-rc1` is 0.9.0rc1.
# vLLM's own wheels of a release built for another CUDA, or for the CPU, carry it as a local version
# (the assets of its GitHub releases, `vllm-0.26.0+cu129-cp38-abi3-manylinux_2_28_x86_64.whl`, which
# PrimeIntellect-ai/prime-rl's uv.lock locks as `0.26.0+cu129`; from 0.17.0 on `vllm-0.17.1+cpu-...`,
# setup.py's suffix for VLLM_TARGET_DEVICE=cpu, which vllm-project/vllm-spyre's uv.lock locks): the same
# release, as the `-cu129` image tags are. Any other local version (`0.10.1+gptoss`, a build of vLLM's
# gpt-oss branch) is a build of someone's own: read as a pin, so that a note says it names no release
# the rules hold.
_VLLM_BUILD_LOCAL = re.compile(r"cu[0-9]+|cpu")
_LOCAL = r"(?:\+[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*)?"
PIN_VERSION = re.compile(r"(?i:[0-9]+(?:\.[0-9]+)+(?:[-_.]?(?:rc|c|pre|preview|post|rev|r|dev)[-_.]?[0-9]*|-[0-9]+)*)")
# A pin of vLLM in a command or a package list's entry (`pip install vllm==0.5.3.post1`,
# `uv_pip_install("vllm==0.10.1.1")`), and a requirements line that is one (`vllm[audio]==0.11.0  # tested`).
PIN = re.compile(r"(?<![\w.-])vllm(?:\[[A-Za-z0-9_,.-]*\])?==(" + PIN_VERSION.pattern + _LOCAL + r")(?![\w.+-])",
                 re.I)
REQUIREMENT = re.compile(r"^[ \t]*vllm(?:\[[A-Za-z0-9_,.-]*\])?[ \t]*==[ \t]*(" + PIN_VERSION.pattern + _LOCAL
                         + r")[ \t]*(?:[;#].*)?$", re.M | re.I)
# A requirements line (or a project's dependency) that gives vLLM a range of releases, PEP 440's
# specifiers: `vllm>=0.10.1.1,<0.22.0`, `vllm<=0.6.3`, `vllm~=0.10.1` (a wildcard, `==0.10.*`, is none).
RANGE = re.compile(r"^[ \t]*vllm(?:\[[A-Za-z0-9_,.-]*\])?[ \t]*((?:~=|!=|<=|>=|<|>)[ \t]*[0-9][0-9.]*"
                   r"(?:[ \t]*,[ \t]*(?:~=|!=|<=|>=|<|>|==)[ \t]*[0-9][0-9.]*)*)[ \t]*(?:[;#].*)?$", re.M | re.I)
_SPECIFIER = re.compile(r"(~=|!=|<=|>=|<|>|==)[ \t]*([0-9][0-9.]*)")
_PIN_PARTS = re.compile(r"(?i)([-_.]?)(rc|c|pre|preview|post|rev|r|dev)[-_.]?([0-9]*)|-([0-9]+)")
_NORMAL = {"c": "rc", "pre": "rc", "preview": "rc", "rev": "post", "r": "post"}


def pinned(text: str) -> str:
    """A pinned version in PEP 440's normal form, as pip installs it: a
    release candidate `rcN`, a post release `.postN`, a development one
    `.devN` (a number left out is 0); vLLM's CUDA or CPU build of a release
    (`0.26.0+cu129`, `0.17.1+cpu`) is that release. Any other text (another local version,
    `0.10.1+gptoss`) is returned as written."""
    version, plus, local = text.partition("+")
    if plus and not _VLLM_BUILD_LOCAL.fullmatch(local):
        return text
    text = version
    if not PIN_VERSION.fullmatch(text):
        return text

    def normal(match: re.Match[str]) -> str:
        if match[4] is not None:  # `-1`: a post release
            return f".post{match[4]}"
        kind = match[2].lower()
        kind = _NORMAL.get(kind, kind)
        return f"{'' if kind == 'rc' else '.'}{kind}{match[3] or '0'}"
    return _PIN_PARTS.sub(normal, text)


# The suffixes of vLLM's release tags, in the order they are written
# (vllm-project/vllm .buildkite/scripts/publish-release-images.sh and, for
# earlier releases, annotate-release.sh): the architecture, the CUDA
# build, the base image, the zstd-compressed copy, the ROCm build (on
# vllm/vllm-openai-rocm; its `-base` tag holds no vLLM). Each names a build of
# the same release.
_VARIANT = r"(?:-(?:x86_64|aarch64|arm64))?(?:-cu[0-9]+)?(?:-ubuntu[0-9]+)?(?:-zstd)?(?:-rocm)?"
_TAG_VERSION = re.compile(r"v?(" + VERSION.pattern + ")" + _VARIANT)
# vLLM's release images: the CUDA one, its CPU, ROCm and XPU builds on Docker Hub (vllm/vllm-openai-xpu,
# docker/Dockerfile.xpu's `vllm-openai` stage, ENTRYPOINT ["vllm", "serve"]), and the CPU builds on
# Amazon's public registry that vLLM's CPU install docs pull (`vllm-cpu-release-repo:v0.10.2`).
_RELEASE_IMAGES = ("vllm/vllm-openai", "vllm/vllm-openai-cpu", "vllm/vllm-openai-rocm", "vllm/vllm-openai-xpu",
                   "q9t5s3a7/vllm-cpu-release-repo",
                   "q9t5s3a7/vllm-arm64-cpu-release-repo")
# AMD's rocm/vllm tags name the release after `vllm_` or, in some, `vllm` (rocm6.3.1_instinct_vllm0.8.3_20250410).
_ROCM_TAG_VERSION = re.compile(r"(?:^|_)vllm_?(" + VERSION.pattern + r")(?:_|$)")
# vllm-ascend's images: a release tag is the release (v0.23.0, v0.11.0rc0), with the variants
# its image workflows push (the A3, A5 and 310P cards, openEuler as the base;
# vllm-project/vllm-ascend .github/workflows/_schedule_image_build.yaml). `main` and the
# nightly tags are no release.
_ASCEND_IMAGE = "ascend/vllm-ascend"
_ASCEND_TAG_VERSION = re.compile(r"v?(" + VERSION.pattern + r")(?:-(?:a3|a5|310p))?(?:-openeuler)?")
# A vllm-ascend release runs the vLLM release of its number (its docs' versioning policy),
# but for these, whose root Dockerfile builds on another (ARG VLLM_TAG at the tag).
_ASCEND_VLLM = {"0.10.1rc1": "0.10.1.1", "0.11.0rc0": "0.11.0rc3", "0.14.0rc1": "0.14.1"}
# openEuler's CPU build of vLLM (openeuler/vllm-cpu:0.10.1-oe2403lts): each tag builds vLLM's
# release of its number from source for the CPU (VLLM_TARGET_DEVICE=cpu) on an openEuler release
# (openeuler-mirror/openeuler-docker-images AI/vllm-cpu/<release>/<openEuler>/Dockerfile, listed
# by tag in AI/vllm-cpu/meta.yml), with vLLM's OpenAI server as its ENTRYPOINT.
_OPENEULER_CPU_IMAGE = "openeuler/vllm-cpu"
_OPENEULER_TAG = re.compile(r"v?(" + VERSION.pattern + r")-oe[0-9]{4}(?:lts)?(?:sp[0-9]+)?")
# NVIDIA Dynamo's vLLM runtime image (nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1): its tag
# is Dynamo's release, with the variants Dynamo's release workflow pushes (CUDA 13, EFA, an
# architecture); deployers.yaml (dynamo-vllm) gives the vLLM release each installs.
_DYNAMO_IMAGE = "ai-dynamo/vllm-runtime"
_DYNAMO_TAG = re.compile(r"([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)(?:-cuda13)?(?:-efa)?(?:-(?:amd64|arm64))?")


# AWS's Neuron deep learning containers for vLLM (public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:
# 0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04): the tag starts with the vLLM release the image runs on
# AWS Inferentia and Trainium (`0.21.0.1.0.0`: vLLM 0.21.0 with vllm-neuron 1.0.0), then the Neuron
# SDK's (aws-neuron/deep-learning-containers README.md, vllm/inference/<release>/Dockerfile.neuronx).
_NEURON_IMAGE = "pytorch-inference-vllm-neuronx"
_NEURON_TAG = re.compile(r"([0-9]+\.[0-9]+\.[0-9]+)(?:\.[0-9]+\.[0-9]+\.[0-9]+)?-neuronx(?:-.*)?")


# AIBrix's vLLM images (aibrix/vllm-openai:v0.10.2-aibrix-v0.5.0-nixl-0.7.1-20251123): each is built
# FROM vllm/vllm-openai at the release its tag starts with (vllm-project/aibrix 0b4d2b7b
# build/container/Dockerfile.vllm, and its README's naming convention). volcano-sh/kthena runs a copy
# of one as ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2 (its v0.3.0 to
# v1.0.0 docs name the same tag under aibrix/vllm-openai).
_AIBRIX_IMAGES = ("aibrix/vllm-openai", "volcano-sh/vllm-openai")
# (a build of its own after the release: `v0.7.3.self.post1`, vllm-project/aibrix's DeepSeek-R1 samples)
_AIBRIX_TAG = re.compile(r"v(" + VERSION.pattern + r")(?:[-.].+)?")
# Intel's vLLM for its Arc and Data Center GPUs (XPU), intel/llm-scaler-vllm:0.14.0-b8.3.2: the tag
# is the vLLM release it builds on, then Intel's build (intel/llm-scaler 8d66bf9e README.md: "`0.14.0-b8`
# for vLLM 0.14.0"; vllm/docker/Dockerfile builds with VLLM_TARGET_DEVICE=xpu). Its production tags
# (`1.3`) are each the same image as a build tag, as deployers.yaml (llm-scaler-vllm) records them.
_INTEL_XPU_IMAGE = "intel/llm-scaler-vllm"
_INTEL_XPU_TAG = re.compile(r"(" + VERSION.pattern + r")-b[0-9]+(?:\.[0-9]+)*")
# NVIDIA's vLLM container on NGC (nvcr.io/nvidia/vllm:25.10-py3): its tag is NVIDIA's monthly release (or a
# respin of one, `25.12.post1-py3`, a release of its own);
# deployers.yaml (ngc-vllm) gives the vLLM release each ships, where NVIDIA's release notes say.
# vLLM's TPU image: vLLM with tpu-inference's platform, its release tag the release of both
# (`v0.11.1`; vllm-project/tpu-inference's .buildkite pushes `nightly` and `nightly-DATE-...`, which name none).
_TPU_IMAGE = "vllm/vllm-tpu"
_TPU_TAG = re.compile(r"v?(" + VERSION.pattern + r")")
_NGC_IMAGE = "nvidia/vllm"
_NGC_TAG = re.compile(r"([0-9]{2}\.[0-9]{2}(?:\.post[0-9]+)?)-py3(?:-.+)?")


class _Family(NamedTuple):
    """Images built on one vLLM release that their tag names: their repositories, the tag's form (the
    release its first group) and the build, as the origin names it (``{release}``: the release); and
    the deployers.yaml entry whose ``aliases`` give, for a tag that names no release, the tag of the
    same image that does (None: no such tags)."""

    repositories: tuple[str, ...]
    tag: re.Pattern[str]
    build: str
    aliases: str | None = None


_FAMILIES = (_Family((_NEURON_IMAGE,), _NEURON_TAG, "AWS's Neuron build of vLLM {release}"),
             _Family((_OPENEULER_CPU_IMAGE,), _OPENEULER_TAG, "openEuler's CPU build of vLLM {release}"),
             _Family(_AIBRIX_IMAGES, _AIBRIX_TAG, "AIBrix's build on vllm/vllm-openai:v{release}"),
             _Family((_INTEL_XPU_IMAGE,), _INTEL_XPU_TAG, "Intel's XPU build of vLLM {release}", "llm-scaler-vllm"),
             _Family((_TPU_IMAGE,), _TPU_TAG, "vLLM {release} with tpu-inference's TPU platform"))


class ReleaseHint(NamedTuple):
    """``version`` (None: not known) and where it was read, or why it could not be."""

    version: str | None
    origin: str
    dynamo: str | None = None  # the NVIDIA Dynamo release whose image it is (its launcher differs between them)
    # The platform of the image it was read from, where that is not CUDA: a Dockerfile's base that a
    # launcher is copied into (`FROM vllm/vllm-tpu:v0.11.1`, copied.py) runs it there.
    platform: str | None = None
    # A range of releases the files allow instead of one (`vllm<=0.6.3`), each specifier (operator,
    # version): pip installs the newest it allows, which the rules' releases tell (PolicySet.newest_allowed).
    allowed: tuple[tuple[str, str], ...] = ()


def specifiers(written: str) -> tuple[tuple[str, str], ...]:
    """A range's specifiers as RANGE finds them written, each (operator,
    version); none where nothing bounds it above (`vllm>=0.10`: the newest
    release when it is installed, which says no more than no pin does)."""
    found = tuple((operator, version.rstrip(".")) for operator, version in _SPECIFIER.findall(written))
    return found if any(operator in ("<", "<=", "~=", "==") for operator, _ in found) else ()


def valid_version(text: str) -> bool:
    return bool(VERSION.fullmatch(text))


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """An image reference as (repository path without the registry, tag, digest)."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # the registry
    return "/".join(parts), tag, digest or None


def from_image(image: str) -> ReleaseHint:
    """The release an image's tag names, or why it names none."""
    shown = show(image)
    if has_unresolved(image):
        named, colon, after = _one_character_markers(image).rpartition(":")
        tag_only = bool(colon) and "/" not in after and _MARKED not in named
        return ReleaseHint(None, f"image {shown}: {'its tag is' if tag_only else 'the image is'} not known from this file")
    path, tag, digest = split_image(image)
    # vLLM's release image, and its CPU build (vllm/vllm-openai-cpu), on any registry or mirror
    official = any(_is(path, image) for image in _RELEASE_IMAGES)
    rocm = _is(path, "rocm/vllm")
    ascend = _is(path, _ASCEND_IMAGE)
    dynamo = _is(path, _DYNAMO_IMAGE)
    family = next((f for f in _FAMILIES if any(_is(path, repository) for repository in f.repositories)), None)
    ngc = path == _NGC_IMAGE  # (nvcr.io/nvidia/vllm; not a mirror's prefix: rocm/vllm is AMD's)
    if not (official or rocm or ascend or dynamo or family or ngc):
        return ReleaseHint(None, f"image {shown} is not vLLM's release image: its tag is not read as a vLLM release")
    if digest is not None and tag is None:
        return ReleaseHint(None, f"image {shown}: a digest names no release")
    if tag is None:
        return ReleaseHint(None, f"image {shown} (latest, no tag): no release in the tag")
    if family is not None:
        alias = deployer(family.aliases)["aliases"].get(tag) if family.aliases else None
        match = family.tag.fullmatch(alias or tag)
        if match is None:
            return ReleaseHint(None, f"image tag {shown}: no release in the tag")
        same = f"the same image as {family.repositories[0]}:{alias}: " if alias else ""
        return ReleaseHint(match.group(1), f"image tag {shown} ({same}{family.build.format(release=match.group(1))})")
    if ascend:
        match = _ASCEND_TAG_VERSION.fullmatch(tag)
        if match is None:
            return ReleaseHint(None, f"image tag {shown}: no vllm-ascend release in the tag")
        plugin = match.group(1)
        vllm = _ASCEND_VLLM.get(plugin) or re.sub(r"(?:\.?post|rc)[0-9]+$", "", plugin)
        return ReleaseHint(vllm, f"image tag {shown} (vllm-ascend {plugin}, on vLLM {vllm})")
    if dynamo or ngc:  # another product's release: the vLLM release it ships is recorded (deployers.yaml)
        product, pattern, entry, verb = ("Dynamo", _DYNAMO_TAG, "dynamo-vllm", "installs") if dynamo else \
            ("NGC", _NGC_TAG, "ngc-vllm", "ships")
        match = pattern.fullmatch(tag)
        if match is None:
            return ReleaseHint(None, f"image tag {shown}: no {product} release in the tag")
        shipped = deployer(entry)["vllm"].get(match.group(1))
        if shipped is None:
            return ReleaseHint(None, f"image tag {shown}: the vLLM release {product} {match.group(1)}'s image {verb} "
                                     "is not recorded")
        return ReleaseHint(shipped, f"image tag {shown} ({product} {match.group(1)}, which {verb} vLLM {shipped})",
                           match.group(1) if dynamo else None)
    match = _TAG_VERSION.fullmatch(tag) if official else _ROCM_TAG_VERSION.search(tag)
    if match is None:
        return ReleaseHint(None, f"image tag {shown}: no release in the tag")
    return ReleaseHint(match.group(1), f"image tag {shown}")


# Release images of another platform than CUDA (the audit takes CUDA where nothing says).
_PLATFORM_IMAGES = {"vllm/vllm-openai-cpu": "cpu", "q9t5s3a7/vllm-cpu-release-repo": "cpu",
                    "q9t5s3a7/vllm-arm64-cpu-release-repo": "cpu", "rocm/vllm": "rocm", "vllm/vllm-openai-rocm": "rocm", "vllm/vllm-openai-xpu": "xpu",
                    _ASCEND_IMAGE: "npu", _OPENEULER_CPU_IMAGE: "cpu", _NEURON_IMAGE: "neuron", _INTEL_XPU_IMAGE: "xpu",
                    _TPU_IMAGE: "tpu"}


def platform_of(image: Any) -> str | None:
    """The platform a vLLM release image runs vLLM on, where it is not CUDA
    (its CPU build, AMD's ROCm image, vllm-ascend's, AWS's Neuron build): the
    document's ``platform.name``. Every tag of such an image is that build,
    so a tag not known leaves it (inference-perf's CI server runs
    `vllm/vllm-openai-cpu:$tag`)."""
    path = _known_repository(image) if isinstance(image, str) else None
    return next((name for known, name in _PLATFORM_IMAGES.items() if _is(path, known)), None) if path else None


def _known_repository(image: str) -> str | None:
    """An image's repository path, where the file gives its name (a
    registry or a tag not known leaves it, as a mirror's prefix does);
    None elsewhere."""
    path = split_image(_one_character_markers(image))[0]
    return path if _MARKED not in path.rsplit("/", 1)[-1] else None


# What stands for a value not known in an image's text while it is split: one character, since a
# marker's reason may hold `/` and `:`.
_MARKED = "\x02"


def _one_character_markers(image: str) -> str:
    return UNRESOLVED.sub(_MARKED, image)


def _is(path: str, repository: str) -> bool:
    """Whether an image's repository path is ``repository``, on any registry or mirror (under a prefix)."""
    return path == repository or path.endswith("/" + repository)


def from_pin(version: str, line: int | None) -> ReleaseHint:
    """A `pip install vllm==X` (or `uv pip install`) pin, X as written."""
    return ReleaseHint(pinned(version), f"pip pin vllm=={version}" + (f" at line {line}" if line else ""))


# A wheel of vLLM installed by its path or URL (`vllm-0.27.1+cpu-cp38-abi3-macosx_11_0_arm64.whl`, as a
# GitHub release serves it, `+` written `%2B`): its name's version is the release.
_WHEEL = re.compile(r"(?i)(?:^|/)vllm-([^-/]+)-[^/]*\.whl$")


def from_wheel(word: str, line: int) -> ReleaseHint | None:
    """The release of a vLLM wheel that `pip install WORD` installs; None for any other word."""
    wheel = _WHEEL.search(word)
    if wheel is None:
        return None
    version = re.sub("(?i)%2b", "+", wheel.group(1))
    name = word.rsplit("/", 1)[-1]
    if has_unresolved(version) or not PIN_VERSION.match(version):
        return ReleaseHint(None, f"the vLLM wheel `{show(name)}` at line {line}: its version is not known from this file")
    return ReleaseHint(pinned(version), f"the vLLM wheel {name} at line {line}")


def upgraded(words: list[str], line: int, *, fresh: bool = False) -> ReleaseHint | None:
    """`pip install -U vllm` (``words``, its command line): whatever release
    is newest when it runs, not known from the file; None for another command.
    ``fresh``: an environment that holds no vLLM before it (a notebook's
    kernel, Colab's or Kaggle's), where `pip install vllm` does the same."""
    upgrade = next((w for w in words if w in ("-U", "--upgrade")), None)
    if (upgrade is None and not fresh) or "install" not in words \
            or not any(w.lower().split("[")[0] == "vllm" for w in words):
        return None
    return ReleaseHint(None, f"`pip install {upgrade + ' ' if upgrade else ''}vllm` at line {line} installs the newest "
                             "release when it runs: not known from this file")


# vLLM's release tags in its repository: v0.10.1.1, v0.11.0rc2, v0.6.6.post1.
_SOURCE_TAG = re.compile(r"v(" + VERSION.pattern + ")")


def from_source(ref: str | None, line: int) -> ReleaseHint:
    """vLLM built from a clone of its repository, at ``ref`` (a tag, a
    branch or a commit; None: the default branch), cloned at ``line``."""
    if ref is not None and (match := _SOURCE_TAG.fullmatch(ref)):
        return ReleaseHint(pinned(match.group(1)), f"vLLM built from its repository at tag {ref} (line {line})")
    at = "its default branch" if ref is None else f"`{show(ref)}`, no release tag"
    return ReleaseHint(None, f"vLLM is built from its repository at {at} (line {line})")


_PIP_PIN = re.compile(r"(?i)^vllm(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.+-]*)$")
# pip's build of vLLM's repository at a ref: `pip install git+https://github.com/vllm-project/vllm.git@v0.8.3`
# (also `vllm @ git+...`), as a clone at that tag built with `pip install .` is.
_PIP_GIT = re.compile(r"(?i)^(?:vllm[ \t]*@[ \t]*)?git\+https://github\.com/vllm-project/vllm(?:\.git)?(?:@([^#]+))?(?:#.*)?$")


def installed(word: str, fields: list[str], line: int) -> ReleaseHint | None:
    """The release of vLLM a word of `pip install` (``fields``) installs:
    a build of its repository at a ref, a pin (its version not known where
    the script does not set it), a wheel by its path or URL, a range bounded
    above (the newest it allows, which audit/run.py tells), or `-U vllm`
    (whatever is newest when it runs); None for any other word."""
    if built := _PIP_GIT.match(word):
        return from_source(built.group(1), line)
    if match := _PIP_PIN.match(word):
        return from_pin(match.group(1), line)
    if word.partition("==")[0].split("[")[0].lower() == "vllm" and "==" in word and has_unresolved(word):
        return ReleaseHint(None, f"pip pin {show(word)} at line {line}: the version is not known from this file")
    if (wheel := from_wheel(word, line)) is not None:
        return wheel
    if (ranged := RANGE.match(word)) and (allowed := specifiers(ranged.group(1))):
        return ReleaseHint(None, f"range {word} at line {line}", allowed=allowed)
    return upgraded(fields, line) if word.lower().split("[")[0] == "vllm" else None
