"""A vLLM release's connector registry and option list, read from its wheel
without running it (``hma-policy registry from-wheel``).

- :func:`read_wheel` (registry.py): the *facts* of a wheel: the connectors
  its ``KVConnectorFactory`` registers, every class of the kv_transfer tree
  with its bases and whether it inherits ``SupportsHMA``, and the
  module-level name switches (a class chosen on an environment variable or
  on an import succeeding). Plain JSON data, written by ``--facts``.
- :func:`render_registry` (render.py): facts as a registry rule file
  (``kind: registry``), deterministically, so that recorded facts re-render
  byte for byte.
- :func:`read_options` (options.py): the options ``vllm serve`` accepts.
- :func:`read_configs` (configs.py): the config classes vLLM builds from a
  deployment (``KVTransferConfig``, ``AttentionConfig``, ...): their fields,
  the choices of each ``Literal`` field, and whether unknown fields are refused.
- :func:`modules_json` (modules.py): the facts' module table (the modules of
  the kv_transfer tree and the names each binds), as the bundled
  ``rules/modules/`` file.

How nothing in the wheel runs: the wheel is opened with :mod:`zipfile` and
only its ``.py`` members and ``METADATA`` are read, as bytes; each module is
parsed with :func:`ast.parse`, which builds a syntax tree and executes
nothing, and every fact is read off that tree (source.py). No module of the
wheel is imported, no code object is compiled or run, and nothing is
evaluated (no ``eval``, ``exec``, ``importlib``, ``pickle``): a class's bases,
a registration's arguments and an environment test are matched as syntax.
Errors are :class:`WheelError`, one problem each with a stable code.
"""

from .configs import configs_json, read_configs
from .modules import modules_json
from .options import read_options, options_json
from .registry import FACTS_FORMAT, facts_json, load_facts, read_wheel
from .render import render_registry
from .source import WheelError

__all__ = ["read_wheel", "render_registry", "read_options", "read_configs", "facts_json", "options_json",
           "configs_json", "load_facts", "WheelError", "FACTS_FORMAT", "modules_json"]
