"""Copies of the bundled rules for tests that change them."""

from __future__ import annotations

import shutil
from pathlib import Path

RULES = Path(__file__).resolve().parents[1] / "rules"


def copy_rules(target: Path) -> Path:
    """A copy of rules/ at ``target`` (without byte-code caches)."""
    shutil.copytree(RULES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def lmcache_supported(target: Path) -> Path:
    """A copy of rules/ at ``target`` in which LMCacheConnectorV1 inherits SupportsHMA."""
    copy_rules(target)
    edit(target / "connectors.yaml", "  LMCacheConnectorV1:\n    supports_hma: false\n",
         "  LMCacheConnectorV1:\n    supports_hma: true\n")
    return target


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path`` by ``new``."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path.name}"
    path.write_text(text.replace(old, new), encoding="utf-8")
