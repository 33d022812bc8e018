"""The loaded policy: :class:`Policy`, :func:`load_policy`, :func:`decide` and :func:`supports_hma`.

Loading reads and checks the rule files (:mod:`.rules`), compiles them into
one durable-rules ruleset (:mod:`.compiler`, :mod:`._durable`) and fills the
step table from it (:mod:`.table`). A decision is then three stages, each a
module: :meth:`Policy.prepare` (:mod:`.input`: read, bound, normalise,
validate), :func:`.facts.extract`, and :class:`.evaluate.Evaluator` (the walk
over the connector graph, answered by the table).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ._durable import RuleRuntime, RuntimeFault
from .compiler import Compiled, compile_policy
from .decision import Decision
from .errors import ConnectorError, EvaluationError, InputError, Problem
from .evaluate import Evaluator
from .command import command_document
from .facts import extract
from .input import DEFAULT_LIMITS, Limits, prepare, respell
from .rules import PolicyModel, Rule, read_policy
from .table import StepTable

__all__ = ["Policy", "Prepared", "load_policy", "decide", "decide_command", "supports_hma", "respelled"]


class Prepared(NamedTuple):
    """A validated, normalised deployment document (:meth:`Policy.prepare`),
    with each top-level name as the caller spelled it (kebab-case or not)."""

    document: dict[str, Any]
    spelled: dict[str, str]


class Policy:
    """A loaded, checked and compiled policy. Build one with :func:`load_policy`.

    A Policy owns its ruleset inside the rule runtime; it is safe to share
    between threads, and several policies may be loaded side by side.
    """

    def __init__(self, rules_dir: str | Path | None = None, *, memo: bool = True):
        self._model = read_policy(rules_dir)
        compiled = compile_policy(self._model)
        self._runtime = RuleRuntime(compiled.definition)
        self._closed = False
        try:
            # memo=False: no table, every step goes to durable-rules (for tests
            # that compare the two).
            self._table = StepTable(self._model, _asker(self._runtime, compiled), prefill=memo)
        except EvaluationError:
            self._runtime.close()
            raise
        self._evaluator = Evaluator(self._model, self._table)

    @property
    def digest(self) -> str:
        """sha256 over the rule files' names and contents."""
        return self._model.digest

    @property
    def source(self) -> str:
        """Where the rules were read from ("bundled" or the directory given)."""
        return self._model.source

    @property
    def registered_names(self) -> tuple[str, ...]:
        """Connector names the registry makes reachable by name."""
        return self._model.registered_names

    @property
    def model(self) -> PolicyModel:
        """The checked rule files: steps per ruleset, aggregates, the registry's names, the digest."""
        return self._model

    @property
    def table(self) -> StepTable:
        """Every step's answer for each reachable input, as durable-rules gave it at load."""
        return self._table

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (a closed policy decides nothing)."""
        return self._closed

    def prepare(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Prepared:
        """The first half of :meth:`decide`: the validated, normalised document.
        Raises :class:`InputError` for an invalid one."""
        spelled: dict[str, str] = {}
        return Prepared(prepare(document, limits=limits, spelled=spelled), spelled)

    def decide_prepared(self, prepared: Prepared) -> Decision:
        """The second half of :meth:`decide`, for a document :meth:`prepare` made.
        Raises :class:`InputError` for a string the rule runtime cannot take."""
        self._check_open()
        document, spelled = prepared
        decision = self._evaluator.decide(extract(document, self._model.containers))
        if any(name != as_written for name, as_written in spelled.items()):
            decision = respelled(decision, spelled)
        return decision

    def decide(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Decision:
        """Decide one deployment document. See :func:`decide`."""
        return self.decide_prepared(self.prepare(document, limits=limits))

    def decide_command(self, argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                       cwd: str | os.PathLike[str] | None = None, config_root: str | os.PathLike[str] | None = None,
                       limits: Limits = DEFAULT_LIMITS) -> Decision:
        """See :func:`decide_command`."""
        return self.decide(command_document(argv, env=env, cwd=cwd, config_root=config_root), limits=limits)

    def supports_hma(self, kv_transfer_config: Any, *, env: Mapping[str, Any] | None = None) -> bool | None:
        """See :func:`supports_hma`."""
        self._check_open()
        if kv_transfer_config is not None and not isinstance(kv_transfer_config, (Mapping, str)):
            document: Any = {"kv_transfer_config": prepare(kv_transfer_config)["kv_transfer_config"]}
        else:
            document = {"kv_transfer_config": kv_transfer_config}
        if env is not None:
            document["env"] = dict(env)
        document = prepare(document)
        if document.get("kv_transfer_config") is None:
            raise InputError([Problem("input.schema", "a kv_transfer_config is required", "/kv_transfer_config")])
        top = self._evaluator.graph(extract(document, self._model.containers).graph).top
        assert top is not None  # a kv_transfer_config makes a graph
        support = top.facts["support"]
        if support == "error":
            error = top.errors["support"]
            raise ConnectorError([Problem(error.code, error.message, error.path, error.hint)])
        return {"supported": True, "unsupported": False}.get(support)

    def _check_open(self) -> None:
        if self._closed:
            raise EvaluationError([Problem("engine.closed", "the policy was closed")])

    def close(self) -> None:
        """Unload the policy's ruleset from the rule runtime."""
        self._closed = True
        self._runtime.close()

    def __repr__(self) -> str:
        return f"Policy(source={self.source!r}, digest={self.digest[:19]!r})"


def _asker(runtime: RuleRuntime, compiled: Compiled) -> Callable[[list[dict[str, Any]]], list[Rule | None]]:
    """The table's question to durable-rules: the rule it picks for each event
    (None: the step's default). A closure, not a Policy method, so that the
    table holds no reference back to its policy."""
    def ask(events: list[dict[str, Any]]) -> list[Rule | None]:
        try:
            names = runtime.fire_many(events)
        except RuntimeFault as exc:
            raise EvaluationError([Problem("engine.fault", str(exc))]) from None
        for event, name in zip(events, names):
            if ".".join(compiled.step_of[name]) != event["t"]:
                raise EvaluationError([Problem("engine.fault", "the rule runtime answered for the wrong step")])
        return [compiled.rules[name] for name in names]
    return ask


def load_policy(rules_dir: str | Path | None = None, *, memo: bool = True) -> Policy:
    """Load, check and compile the rule files in ``rules_dir`` (None: the bundled rules).

    Raises :class:`PolicyError` listing every problem found, sorted by file
    and location. ``memo=False`` leaves the step table empty, so that every
    step goes to durable-rules (slow; for comparing the two).
    """
    return Policy(rules_dir, memo=memo)


def respelled(decision: Decision, spelled: dict[str, str]) -> Decision:
    """The decision with its paths pointing into the document as spelled (kebab-case)."""
    def fix(items: Any) -> Any:
        return tuple(replace(m, path=respell(m.path, spelled)) for m in items)

    return replace(decision, errors=fix(decision.errors), warnings=fix(decision.warnings),
                   connectors=fix(decision.connectors))


_DEFAULT: Policy | None = None
_DEFAULT_LOCK = threading.Lock()


def _default_policy() -> Policy:
    global _DEFAULT
    if _DEFAULT is None:  # loaded once; the lock only keeps two threads from loading it twice
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = Policy()
    return _DEFAULT


def decide(document: Any, *, policy: Policy | None = None, limits: Limits = DEFAULT_LIMITS) -> Decision:
    """Decide whether vLLM runs a deployment with HMA on.

    ``document`` is a deployment document (a mapping, as read from JSON or
    YAML), or one of vLLM's own config objects (KVTransferConfig, VllmConfig),
    read by attribute without importing vLLM. ``policy`` defaults to the
    bundled rules.

    Returns a :class:`Decision` whose outcome is ``enabled``, ``disabled``,
    ``error`` (vLLM rejects the configuration at the config or connector
    stage) or ``undetermined`` (an undeclared external connector).

    Raises :class:`InputError` (every problem, each with a code and a JSON
    Pointer) when the document is invalid; nothing else for any document.
    """
    return (policy or _default_policy()).decide(document, limits=limits)


def decide_command(argv: str | Sequence[str], *, env: Mapping[str, str] | None = None, policy: Policy | None = None,
                   cwd: str | os.PathLike[str] | None = None, config_root: str | os.PathLike[str] | None = None,
                   limits: Limits = DEFAULT_LIMITS) -> Decision:
    """Decide the deployment a ``vllm serve`` command line starts.

    ``argv`` is the command's words (``["vllm", "serve", "Qwen/Qwen3-8B",
    "--kv-transfer-config", "{...}"]``, or ``python -m
    vllm.entrypoints.openai.api_server ...``), or one shell string, split
    as a POSIX shell would (quotes, escapes; ``$NAME`` is taken from ``env``).
    vLLM's own argument handling is reproduced: ``--config FILE`` first (the
    command line wins), ``--no-`` and ``=`` forms, dotted options
    (``--kv-transfer-config.kv_role kv_both``), the last occurrence winning.
    ``env``: the environment vLLM would run with (only the variables the
    decision reads are used). A ``--config`` file is read relative to
    ``cwd`` (default: the current directory) and only inside ``config_root``
    (default: ``cwd``). Nothing named in the command is run or imported.

    Raises :class:`InputError` when the command does not start vLLM's
    server, names a value that is not known (``$KV`` without ``env``), or
    vLLM would refuse it (an unknown option, a missing value).
    """
    return (policy or _default_policy()).decide_command(argv, env=env, cwd=cwd, config_root=config_root, limits=limits)


def supports_hma(kv_transfer_config: Any, *, policy: Policy | None = None, env: Mapping[str, Any] | None = None) -> bool | None:
    """The equivalent of vLLM's KVConnectorFactory.supports_hma_config.

    Returns True or False, or None when an undeclared external connector
    makes the answer unknown. Raises :class:`ConnectorError` where vLLM
    raises (unknown connector name, missing name, empty module path), and
    :class:`InputError` for an invalid config.
    """
    return (policy or _default_policy()).supports_hma(kv_transfer_config, env=env)
