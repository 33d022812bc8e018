"""A vLLM release's module table: which modules of its KV-transfer tree
exist, and which names each binds at module level.

vLLM resolves ``kv_connector_module_path`` by importing it and looking the
connector name up in it (``getattr``). Whether that module exists in a
release, and binds that name, is a fact of the release's wheel, read
statically by ``hma-policy registry from-wheel --modules`` into
``rules/modules/<release>.json`` (named in ``rules/releases.yaml``). Here it
is only looked up: :meth:`ReleaseModules.facts` gives the node facts
``module_in_release`` and ``class_in_module`` (engine/core/facts.py); what
they mean for a deployment is for the rules to say.

Outside the recorded prefix (vLLM's other modules, any other package) the
answer is ``unknown``: the engine imports nothing, and a module it has no
record of may or may not be importable where the deployment runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from .errors import PolicyError, Problem

__all__ = ["ModuleNames", "ReleaseModules", "read_modules", "UNKNOWN", "FOLDER_FILE"]

UNKNOWN = ("unknown", "unknown")
# The module table's name in a plain rules folder (what `rules init` writes
# beside connectors.yaml); a bundle names its tables in releases.yaml.
FOLDER_FILE = "modules.json"
# A module table is some hundred KiB; one over this is not one.
MAX_BYTES = 16 * 1024 * 1024


class ModuleNames(NamedTuple):
    """What one module binds: ``names`` for sure, ``maybe`` on some way
    through it; ``open`` when it star-imports or defines ``__getattr__``."""

    names: frozenset[str]
    maybe: frozenset[str]
    open: bool


class ReleaseModules(NamedTuple):
    """The modules under ``prefix`` that a release ships."""

    release: str
    prefix: str
    modules: Mapping[str, ModuleNames]

    def facts(self, module_path: str, name: str) -> tuple[str, str]:
        """(module_in_release, class_in_module) for a node that names the
        module ``module_path`` and the connector ``name``."""
        parts = module_path.split(".")
        if not (module_path == self.prefix or module_path.startswith(self.prefix + ".")) or not all(
                part.isidentifier() for part in parts):
            return UNKNOWN  # not recorded (or no module name importlib would look up as written)
        module = self.modules.get(module_path)
        if module is None:
            return "missing", "unknown"
        if name in module.names:
            return "present", "yes"
        if name in module.maybe or module.open:
            return "present", "unknown"
        return "present", "no"


def read_modules(text: str, name: str) -> ReleaseModules:
    """The module table in ``text`` (the file ``name``); PolicyError
    ``rules.modules`` when it is not one."""
    try:
        if len(text) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
        data: Any = json.loads(text)
        if data.get("kind") != "modules" or data.get("format") != 1:
            raise ValueError("not a module table of format 1 (kind: modules)")
        modules = {str(module): ModuleNames(frozenset(map(str, entry["names"])), frozenset(map(str, entry["maybe"])),
                                            entry["open"] is True)
                   for module, entry in data["modules"].items()}
        return ReleaseModules(str(data["vllm_version"]), str(data["prefix"]), MappingProxyType(modules))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PolicyError([Problem("rules.modules", f"the module table `{name}` cannot be read: "
                                   f"{type(exc).__name__}: {exc}"[:300], file=name)]) from None
