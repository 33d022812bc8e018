"""What deployers write into vLLM's command line, read from deployers.yaml.

Charts, controllers and launchers turn their own settings into a
``--kv-transfer-config``: production-stack's ``lmcacheConfig``, KServe's
``kvCacheOffloading``, llm-d-benchmark's ``kvTransfer``, Dynamo's
``--connector``. The audit's readers find those settings in a file and which
branch of the deployer's template applies; the configs each branch writes
(and so the connector names) are data, in deployers.yaml next to this
module, each entry citing the file and lines it reproduces. :func:`config`
fills one in. It is core, not audit, data: the command reader applies
Dynamo's launcher to any command line (dynamo_args.py).

The file ships inside the package and is read once per process.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from . import yamlsafe

__all__ = ["deployer", "config"]

_SETTING = "$setting"
_LEFT_OUT = object()


@cache
def _table() -> dict[str, Any]:
    text = resources.files("hma_policy.core").joinpath("deployers.yaml").read_text("utf-8")
    data, _ = yamlsafe.load(text)
    return data


def deployer(name: str) -> dict[str, Any]:
    """The entry of deployers.yaml for ``name`` (a deployer, or one template of it)."""
    return _table()[name]


def config(template: Any, settings: dict[str, Any] | None = None) -> Any:
    """A fresh copy of ``template`` with each ``{$setting: NAME}`` replaced by
    the value of NAME in ``settings`` (deployers.yaml's header has the forms)."""
    filled = _fill(template, settings or {})
    return None if filled is _LEFT_OUT else filled


def _fill(value: Any, settings: dict[str, Any]) -> Any:
    if isinstance(value, dict) and _SETTING in value:
        found = settings.get(value[_SETTING])
        if "default" in value:
            found = found or value["default"]
        return _LEFT_OUT if found is None and value.get("optional") is True else found
    if isinstance(value, dict):
        out = {key: _fill(item, settings) for key, item in value.items()}
        return {key: item for key, item in out.items() if item is not _LEFT_OUT}
    if isinstance(value, list):
        return [_fill(item, settings) for item in value]
    return value
