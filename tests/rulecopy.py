"""Copies of the bundled rules for tests that change them: a plain rules
folder of one release, as `hma-policy rules init` writes it (its epoch's
rule files, its registry as connectors.yaml, tests/)."""

from __future__ import annotations

from pathlib import Path

from hma_policy.authoring.commands import bundle

RULES = Path(__file__).resolve().parents[1] / "rules"


def copy_rules(target: Path, release: str | None = None) -> Path:
    """The bundled rules of ``release`` (None: the newest) as a plain rules
    folder at ``target``, without the schemas."""
    target.mkdir(parents=True, exist_ok=True)
    for name, data in bundle(release).items():
        if name.startswith("schemas/"):
            continue
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return target


def lmcache_supported(target: Path) -> Path:
    """A copy of the rules at ``target`` in which LMCacheConnectorV1 inherits SupportsHMA."""
    copy_rules(target)
    edit(target / "connectors.yaml", "  LMCacheConnectorV1:\n    supports_hma: false\n",
         "  LMCacheConnectorV1:\n    supports_hma: true\n")
    return target


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path`` by ``new``."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path.name}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def bundled_rule_files(release: str | None = None) -> list[Path]:
    """The bundled rule files of ``release`` (None: the default one): its
    epoch's rule files and its registry, as they are in the repository."""
    from hma_policy.core import releases

    table = releases.bundled()
    chosen = table.get(release or table.default)
    return [RULES / name for name in table.files(chosen)]
