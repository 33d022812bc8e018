"""hma-policy: decides whether vLLM runs with its hybrid KV cache manager
(HMA), from a deployment's KV-transfer connector graph, as each vLLM release
decides it, with the policy kept in rule files.

>>> import hma_policy
>>> d = hma_policy.decide({"kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both"}})
>>> d.outcome, d.hma_enabled, [w.code for w in d.warnings]
('disabled', False, ['hma.auto_disabled'])

Public API: :func:`decide`, :func:`decide_command`, :func:`load_policy`,
:func:`supports_hma`, :class:`Policy` (one release), :class:`PolicySet`
(every release of a rules folder), :class:`Decision`, :class:`Limits`, and the errors
:class:`InputError`, :class:`PolicyError`, :class:`ConnectorError`.
"""

from __future__ import annotations

from .core.decision import Decision
from .core.errors import ConnectorError, HMAPolicyError, InputError, PolicyError
from .core.limits import Limits
from .core.policies import PolicySet, decide, decide_command, supports_hma
from .core.policy import Policy, load_policy
from .version import __version__

__all__ = [
    "decide",
    "decide_command",
    "load_policy",
    "supports_hma",
    "Policy",
    "PolicySet",
    "Decision",
    "Limits",
    "InputError",
    "PolicyError",
    "ConnectorError",
    "HMAPolicyError",
    "__version__",
]
