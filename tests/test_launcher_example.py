"""examples/launcher.py: decides a `vllm serve` command, then execs vLLM or refuses.

A stand-in `vllm` on PATH records the words it was started with, so the
test sees what the launcher would have started, without vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parents[1] / "examples" / "launcher.py"
NIXL = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
LMCACHE = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'


def launch(tmp_path: Path, *words: str) -> tuple[subprocess.CompletedProcess, list[str] | None]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "started.json"
    fake = bin_dir / "vllm"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, str(LAUNCHER), *words], capture_output=True, text=True, env=env,
                            timeout=120)
    return result, json.loads(record.read_text()) if record.exists() else None


def test_a_deployment_vllm_starts_is_started_with_the_same_words(tmp_path):
    words = ["vllm", "serve", "m", "--kv-transfer-config", LMCACHE]
    result, started = launch(tmp_path, *words)
    assert result.returncode == 0, result.stderr
    assert started == words[1:]
    assert "launcher: warning: hma.auto_disabled" in result.stderr
    assert "launcher: HMA off (vLLM 0.33.0); starting vLLM" in result.stderr


def test_a_deployment_vllm_would_refuse_is_refused_before_it_starts(tmp_path):
    result, started = launch(tmp_path, "vllm", "serve", "m", "--kv-transfer-config", LMCACHE,
                             "--no-disable-hybrid-kv-cache-manager")
    assert (result.returncode, started) == (1, None)
    assert result.stderr.splitlines()[-2].startswith("launcher: refused (error): hma.connector_unsupported: connector `LMCacheConnectorV1` does not support HMA but HMA is enabled")
    assert result.stderr.splitlines()[-1].startswith("  hint: ")


def test_what_is_not_a_vllm_launch_is_not_started(tmp_path):
    result, started = launch(tmp_path, "vllm", "bench", "m")
    assert (result.returncode, started) == (2, None)
    assert result.stderr.startswith("launcher: not a vLLM launch this can decide: ")
