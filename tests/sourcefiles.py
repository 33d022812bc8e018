"""What the tests of the source readers share: writing a file, the one
deployment of a file, its kv_transfer_config, problem codes."""

from __future__ import annotations

import json
from pathlib import Path

NIXL = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
LMCACHE = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def only(source):
    """The one deployment of a file."""
    assert len(source.deployments) == 1, source
    return source.deployments[0]


def ktc(deployment) -> dict:
    """The kv_transfer_config of a deployment's document, parsed when given as JSON text."""
    value = deployment.document["kv_transfer_config"]
    return json.loads(value) if isinstance(value, str) else value


def codes(items) -> list[str]:
    return [p.code for p in items]
