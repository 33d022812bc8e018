"""decide_command answers as the audit does for every launch in examples/fleet.

The audit reads each launch from a script, a Dockerfile, a manifest or a
document; here each one is written back as the `vllm serve` command line that
would start it (every option it sets, in vLLM's spelling, JSON for the
structured ones, `--no-` for false flags), handed to decide_command with its
environment and release, and the decision must be the audit's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit

FLEET = Path(__file__).resolve().parents[1] / "examples" / "fleet"
# What a command line cannot carry: the run-time facts of a document.
NOT_OPTIONS = ("env", "vllm_version", "model", "model_facts", "platform", "name")


def command_of(document: dict) -> list[str]:
    words = ["vllm", "serve", (document.get("model") or {}).get("name", "the-model")]
    for key, value in document.items():
        if key in NOT_OPTIONS:
            continue
        flag = key.replace("_", "-")
        if value is True:
            words.append(f"--{flag}")
        elif value is False:
            words.append(f"--no-{flag}")
        else:
            words += [f"--{flag}", value if isinstance(value, str) else json.dumps(value)]
    return words


def launches():
    report = audit([str(FLEET)])
    # Those whose facts a command line can carry: the model's name, not its layer kinds.
    return [e for e in report.entries if e.deployment.document is not None
            and not set(e.deployment.document) & {"model_facts", "platform"}
            and set(e.deployment.document.get("model") or {}) <= {"name"}]


LAUNCHES = launches()


def test_the_fleet_has_launches_of_every_kind():
    formats = {e.deployment.format for e in LAUNCHES}
    # 14 of the 38: the others carry model facts (layer kinds) no command line has
    assert len(LAUNCHES) >= 12 and {"shell", "dockerfile", "kubernetes", "vllm-config"} <= formats, formats


@pytest.mark.parametrize("entry", LAUNCHES, ids=lambda e: e.deployment.id.split("examples/fleet/")[-1])
def test_decide_command_gives_the_audits_decision(entry):
    document = entry.deployment.document
    try:
        decision = hma_policy.decide_command(command_of(document), env=document.get("env"),
                                             vllm_version=entry.decision["vllm"]["release"]).to_dict()
    except hma_policy.InputError as exc:  # the audit decided it as an input error too
        decision = {"outcome": "error", "errors": [{"code": p.code} for p in exc.problems]}
        assert entry.decision["outcome"] == "error"
        assert [e["code"] for e in entry.decision["errors"]][:1] == [e["code"] for e in decision["errors"]][:1]
        return
    want = entry.decision
    assert (decision["outcome"], decision["hma_enabled"]) == (want["outcome"], want["hma_enabled"])
    assert [(e["code"], e["path"]) for e in decision["errors"]] == [(e["code"], e["path"]) for e in want["errors"]]
    assert [w["code"] for w in decision["warnings"]] == [w["code"] for w in want["warnings"]]
    assert decision["connectors"] == want["connectors"]
    assert decision["vllm"]["release"] == want["vllm"]["release"]
