"""Scratch virtual environments that run one vLLM release's own code on the CPU.

A release's environment holds a CPU build of torch, the release's own
pure-Python requirements (read from the wheel's METADATA, with the GPU-only
and native-kernel packages left out) and the wheel itself, installed with
``--no-deps``. Nothing from vLLM is copied: the wheel is installed as it is.

Every pip call goes through ``VENV/bin/python -m pip`` (a copied venv's
``bin/pip`` keeps the original interpreter in its shebang), and every value
given to pip comes after ``--``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement

# Packages vLLM's configuration code does not need on the CPU: torch and its
# companions (a CPU torch is installed separately), CUDA and ROCm runtimes,
# GPU kernels and the optional connector back ends (nixl, lmcache, mooncake).
# Anything matching is not installed; the list of what was skipped is
# written to the environment's stamp file.
SKIPPED = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|triton|pytorch-triton.*|xformers|flashinfer.*|nvidia-.*|cupy.*"
    r"|pynvvideocodec|apache-tvm-ffi|tilelang|quack-kernels|tokenspeed-mla|humming-kernels|nvtx|fastsafetensors"
    r"|instanttensor|deep-gemm|deep-ep|vllm-flash-attn|flash-attn|cuda-python|cuda-bindings|cuda-.*|mooncake.*"
    r"|lmcache|nixl.*|ray|zentorch|intel-extension-for-pytorch|amdsmi|tpu-.*|jax.*|libtpu.*)$"
)
STAMP = "hma-conformance.json"
# Installed with --no-deps after the requirements: msgpack, which MoRIIO's
# module imports at the top but vLLM does not declare; LMCache, so that
# LMCacheMPConnector resolves to the external class a deployment with LMCache
# installed gets (LMCACHE_USE_UPSTREAM_MP picks vLLM's builtin one), with the
# one module of its own requirements that its connector imports.
EXTRA_PACKAGES = ("msgpack==1.2.4", "lmcache==0.5.6", "sortedcontainers==2.4.0")


class SetupError(Exception):
    """A clear, one-line reason the environment cannot be made."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path) -> tuple[list[str], list[str]]:
    """(requirements to install, requirements skipped) from the wheel's METADATA, extras left out."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            if not names:
                raise SetupError(f"{wheel.name}: no .dist-info/METADATA in the wheel")
            metadata = archive.read(names[0]).decode("utf-8", "replace")
    except zipfile.BadZipFile as exc:
        raise SetupError(f"{wheel}: not a wheel (zip) file: {exc}") from None
    environment = default_environment()
    environment["extra"] = ""
    keep: list[str] = []
    skipped: list[str] = []
    for line in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            skipped.append(line)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        if SKIPPED.match(_normalise(requirement.name)):
            skipped.append(str(requirement))
            continue
        keep.append(str(requirement))
    return keep, skipped


def _run(command: list[str], log: Path, what: str, env: dict | None = None) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    if result.returncode != 0:
        raise SetupError(f"{what} failed (exit {result.returncode}); see {log}")


def wheel_build_day(wheel: Path) -> str:
    """The last moment of the day the wheel was built (its METADATA entry's date), as an ISO 8601 UTC time."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            entries = [i for i in archive.infolist() if i.filename.endswith(".dist-info/METADATA")]
    except zipfile.BadZipFile as exc:
        raise SetupError(f"{wheel}: not a wheel (zip) file: {exc}") from None
    if not entries:
        raise SetupError(f"{wheel.name}: no .dist-info/METADATA in the wheel")
    year, month, day = entries[0].date_time[:3]
    return f"{year:04d}-{month:02d}-{day:02d}T23:59:59Z"


def _as_of_pip(as_of: str | None) -> tuple[list[str], dict | None]:
    """pip options and environment that resolve requirements among what PyPI had at ``as_of`` (None: as today).

    The machine's pip configuration adds local indexes whose files carry no
    upload time, which ``--uploaded-prior-to`` lets through; it is left out
    (PIP_CONFIG_FILE=/dev/null) so that PyPI's upload times decide.
    """
    if as_of is None:
        return [], None
    env = dict(os.environ)
    env["PIP_CONFIG_FILE"] = os.devnull
    return ["--uploaded-prior-to", as_of], env


def ensure_venv(venv: Path, wheel: Path, torch_version: str, log_to=print, as_of: str | None = None) -> dict:
    """Make (or reuse) ``venv`` with the wheel installed; returns the stamp (what was installed).

    ``as_of``: resolve the wheel's requirements among the packages PyPI had
    at that time (an old release breaks on today's transformers).
    """
    wheel_sha = sha256_of(wheel)
    stamp_file = venv / STAMP
    if stamp_file.exists():
        try:
            stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stamp = {}
        if (stamp.get("wheel_sha256") == wheel_sha and stamp.get("torch") == torch_version
                and stamp.get("requirements_as_of") == as_of):
            if stamp.get("extra_packages") != list(EXTRA_PACKAGES):
                log_to(f"installing {', '.join(EXTRA_PACKAGES)} with --no-deps into {venv}")
                _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--"] + list(EXTRA_PACKAGES),
                     venv / "install.log", "installing the extra packages")
                stamp["extra_packages"] = list(EXTRA_PACKAGES)
                stamp_file.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
            log_to(f"reusing {venv} ({wheel.name})")
            return stamp
    requirements, skipped = wheel_requirements(wheel)  # a broken wheel is refused before anything is installed
    venv.mkdir(parents=True, exist_ok=True)
    log = venv / "install.log"
    python = venv / "bin" / "python"
    if not python.exists():
        log_to(f"creating {venv}")
        _run([sys.executable, "-m", "venv", "--", str(venv)], log, "creating the virtual environment")
    pip = [str(python), "-m", "pip"]
    _run(pip + ["install", "--upgrade", "--", "pip", "packaging"], log, "upgrading pip")
    log_to(f"installing torch=={torch_version} (CPU) into {venv}")
    # Exactly this torch: a range would let pip take a CUDA build of several GB.
    _run(pip + ["install", "--", f"torch=={torch_version}"], log, f"installing torch=={torch_version}")
    constraints = venv / "torch-constraint.txt"
    constraints.write_text(f"torch=={torch_version}\n", encoding="utf-8")
    log_to(f"installing {len(requirements)} requirements of {wheel.name} ({len(skipped)} GPU-only left out)"
           + (f", as PyPI had them at {as_of}" if as_of else ""))
    not_installed: list[str] = []
    as_of_options, as_of_env = _as_of_pip(as_of)
    install = pip + ["install", "-c", str(constraints)] + as_of_options + ["--"]
    try:
        _run(install + requirements, log, "installing the requirements", as_of_env)
    except SetupError:
        # One requirement that cannot be had here (a pin on a newer torch, no
        # wheel for this Python) must not cost the rest: one at a time.
        log_to("installing them together failed; one at a time")
        for requirement in requirements:
            try:
                _run(install + [requirement], log, f"installing {requirement}", as_of_env)
            except SetupError:
                not_installed.append(requirement)
    log_to(f"installing {', '.join(EXTRA_PACKAGES)} with --no-deps")
    try:
        _run(pip + ["install", "--no-deps", "--"] + list(EXTRA_PACKAGES), log, "installing the extra packages")
    except SetupError:
        not_installed.extend(EXTRA_PACKAGES)
    log_to(f"installing {wheel.name} with --no-deps")
    _run(pip + ["install", "--no-deps", "--force-reinstall", "--", str(wheel)], log, f"installing {wheel.name}")
    freeze = subprocess.run(pip + ["freeze"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    torch_line = next((l for l in freeze.stdout.splitlines() if l.lower().startswith("torch==")), "")
    stamp = {
        "wheel": wheel.name,
        "wheel_sha256": wheel_sha,
        "torch": torch_version,
        "torch_installed": torch_line.split("==", 1)[-1],
        "requirements_skipped": skipped,
        "requirements_not_installed": not_installed,
        "requirements_as_of": as_of,
        "extra_packages": list(EXTRA_PACKAGES),
    }
    stamp_file.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
    return stamp
