"""Fly.io apps (audit/sources/fly.py): a script a Fly app places in its
Machines with ``[[files]]`` and runs, in the shape of fly-apps/vllm-demo
(1e42a6b6: ``fly.toml`` and ``start.sh``, written here, not copied: the
repository has no licence)."""

from __future__ import annotations

from pathlib import Path

from hma_policy.audit.run import audit

# fly-apps/vllm-demo's fly.toml, in outline: vLLM's image, its entrypoint replaced by a file the app writes.
APP = """app = "vllm-demo"

[experimental]
entrypoint = "/start.sh"

[build]
image = "vllm/vllm-openai:v0.4.2"

[[files]]
guest_path = "/start.sh"
local_path = "start.sh"
"""
START = "#!/bin/sh\nset -ex\nexec python3 -m vllm.entrypoints.openai.api_server\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def outcomes(path: Path) -> list[tuple]:
    report = audit([str(path)])
    return [(Path(e.deployment.file).name, e.decision["outcome"], e.decision["vllm"]["release"],
             e.deployment.release.origin if e.deployment.release else None) for e in report.entries]


def test_a_script_a_fly_app_places_and_runs_runs_the_apps_vllm(tmp_path):
    # The script was decided as 0.33.0, `enabled`: vLLM 0.4.2 has no hybrid KV cache manager.
    write(tmp_path / "fly.toml", APP)
    write(tmp_path / "start.sh", START)
    assert outcomes(tmp_path) == [("start.sh", "disabled", "0.4.2", "image tag vllm/vllm-openai:v0.4.2 in "
                                   f"{tmp_path / 'fly.toml'} (the Fly app that runs this file)")]


def test_the_app_must_run_the_file_it_places(tmp_path):
    # A process group's command (a string) or `cmd` (a list) runs it as well; a file placed but
    # run by nothing, or an app built from a Dockerfile, gives no release.
    write(tmp_path / "scripts" / "start.sh", START)
    for app, release in [
        (APP.replace('entrypoint = "/start.sh"', 'cmd = ["/bin/sh", "/start.sh"]'), None),
        (APP.replace('[experimental]\nentrypoint = "/start.sh"', '[processes]\napp = "/bin/sh /start.sh"'), None),
        (APP.replace('entrypoint = "/start.sh"', 'entrypoint = "/other.sh"'), "0.33.0"),
        (APP.replace('image = "vllm/vllm-openai:v0.4.2"', 'dockerfile = "Dockerfile"'), "0.33.0"),
    ]:
        write(tmp_path / "fly.toml", app.replace('local_path = "start.sh"', 'local_path = "scripts/start.sh"'))
        assert [o[2] for o in outcomes(tmp_path)] == [release or "0.4.2"], app


def test_a_fly_toml_that_is_no_toml_gives_no_release(tmp_path):
    write(tmp_path / "fly.toml", APP + "[[files\n")
    write(tmp_path / "start.sh", START)
    assert outcomes(tmp_path) == [("start.sh", "enabled", "0.33.0", None)]
