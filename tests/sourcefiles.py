"""What the tests of the source readers share: writing a file, the one
deployment of a file, its kv_transfer_config, problem codes, and how
reading time grows with a file's size."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hma_policy.audit.sources import read_source

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


def cpu_seconds(function, *args) -> float:
    """The least CPU time of five runs: the fairest figure on a busy machine."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        function(*args)
        best = min(best, time.process_time() - start)
    return best


def linear_ratio(make, size: int, tmp_path: Path, name: str = "run.sh") -> float:
    """CPU time to read a file made by ``make(size * 2)`` over ``make(size)``:
    about 2 when reading is linear, 4 when it is quadratic. The least of
    three measurements: noise on a shared machine only ever adds time, and
    a quadratic reader cannot show a linear ratio in any of them."""
    small, large = write(tmp_path / "small" / name, make(size)), write(tmp_path / "large" / name, make(size * 2))
    read_source(small)  # imports, caches
    return min(cpu_seconds(read_source, large) / max(cpu_seconds(read_source, small), 1e-3) for _ in range(3))
