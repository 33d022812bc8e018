"""hma-policy: decides whether vLLM 0.33.0 runs with its hybrid KV cache
manager (HMA), from a deployment's KV-transfer connector graph, with the policy
kept in rule files.

>>> import hma_policy
>>> d = hma_policy.decide({"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}})
>>> d.outcome, d.hma_enabled, [w.code for w in d.warnings]
('disabled', False, ['hma.auto_disabled'])

Public API: :func:`decide`, :func:`load_policy`, :func:`supports_hma`,
:class:`Policy`, :class:`Decision`, :class:`Limits`, and the errors
:class:`InputError`, :class:`PolicyError`, :class:`ConnectorError`.
"""

from __future__ import annotations

from .core.decision import Decision
from .core.errors import ConnectorError, HMAPolicyError, InputError, PolicyError
from .core.limits import Limits
from .core.policy import Policy, decide, decide_command, load_policy, supports_hma
from .version import __version__

__all__ = [
    "decide",
    "decide_command",
    "load_policy",
    "supports_hma",
    "Policy",
    "Decision",
    "Limits",
    "InputError",
    "PolicyError",
    "ConnectorError",
    "HMAPolicyError",
    "__version__",
]
