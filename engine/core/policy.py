"""The loaded policy: :class:`Policy`, :func:`load_policy`, :func:`decide` and :func:`supports_hma`."""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .decision import Decision
from .input import DEFAULT_LIMITS, Limits, prepare
from .errors import ConnectorError, InputError, Problem
from .evaluate import Evaluator
from .rules import PolicyModel, read_policy

__all__ = ["Policy", "Prepared", "load_policy", "decide", "supports_hma"]


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

    def __init__(self, rules_dir: str | Path | None = None, *, memo: bool = True, cache_size: int = 4096):
        self._model = read_policy(rules_dir)
        self._evaluator = Evaluator(self._model, memo=memo)
        # Decisions are pure functions of (document, limits): a bounded LRU by
        # the document's canonical JSON answers repeats without re-validating.
        self._cache: OrderedDict[tuple, Decision | InputError] = OrderedDict()
        self._cache_size = cache_size if memo else 0
        self._cache_lock = threading.Lock()
        _POLICIES.add(self)

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
        """The checked rule files: steps per ruleset, the registry's names, the digest."""
        return self._model

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (a closed policy decides nothing)."""
        return self._evaluator.closed

    def prepare(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Prepared:
        """The first half of :meth:`decide`: the validated, normalised document.
        Raises :class:`InputError` for an invalid one."""
        spelled: dict[str, str] = {}
        return Prepared(prepare(document, limits=limits, spelled=spelled), spelled)

    def decide_prepared(self, prepared: Prepared) -> Decision:
        """The second half of :meth:`decide`, for a document :meth:`prepare` made."""
        result = self._decided(prepared)
        if isinstance(result, InputError):
            raise result
        return result

    def decide(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Decision:
        """Decide one deployment document. See :func:`decide`."""
        key = _cache_key(document, limits) if self._cache_size else None
        if key is not None:
            with self._cache_lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
            if hit is not None and not self._evaluator.closed:
                if isinstance(hit, InputError):
                    raise InputError(hit.problems)
                return hit
        result = self._evaluate(document, limits)
        if key is not None:
            with self._cache_lock:
                self._cache[key] = result
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if isinstance(result, InputError):
            raise result
        return result

    def _evaluate(self, document: Any, limits: Limits) -> Decision | InputError:
        """The decision, or the InputError, without the document cache."""
        checked = self._validated(document, limits)
        return checked if isinstance(checked, InputError) else self._decided(checked)

    # An audit calls the two halves of _evaluate as two stages, each over a
    # batch of files (each stage's code stays hot), and skips the document
    # cache: its documents seldom repeat whole, and equal connector graphs
    # still share the evaluator's memos.
    def _validated(self, document: Any, limits: Limits) -> tuple[dict[str, Any], dict[str, str]] | InputError:
        """The prepared document and its top-level spellings, or the InputError."""
        spelled: dict[str, str] = {}
        try:
            return prepare(document, limits=limits, spelled=spelled), spelled
        except InputError as exc:
            return exc

    def _decided(self, checked: tuple[dict[str, Any], dict[str, str]]) -> Decision | InputError:
        """The decision of a document :meth:`_validated` prepared."""
        document, spelled = checked
        try:
            result = self._evaluator.decide(document)
        except InputError as exc:  # a fact the runtime cannot take (an unpaired surrogate)
            return exc
        if any(map(str.__ne__, spelled, spelled.values())):  # a name spelled otherwise (without a frame per name)
            result = _respelled(result, spelled)
        return result

    def supports_hma(self, kv_transfer_config: Any, *, env: Mapping[str, Any] | None = None) -> bool | None:
        """See :func:`supports_hma`."""
        if kv_transfer_config is not None and not isinstance(kv_transfer_config, (Mapping, str)):
            document: Any = {"kv_transfer_config": prepare(kv_transfer_config)["kv_transfer_config"]}
        else:
            document = {"kv_transfer_config": kv_transfer_config}
        if env is not None:
            document["env"] = dict(env)
        document = prepare(document)
        ktc = document.get("kv_transfer_config")
        if ktc is None:
            raise InputError([Problem("input.schema", "a kv_transfer_config is required", "/kv_transfer_config")])
        graph = self._evaluator.graph(document, ktc)
        verdict = graph.verdicts[graph.top.path]
        if verdict["support"] == "error":
            error = graph.errors[graph.top.path]["support"]
            raise ConnectorError([Problem(error.code, error.message, error.path, error.hint)])
        return {"supported": True, "unsupported": False}.get(verdict["support"])

    def close(self) -> None:
        """Unload the policy's ruleset from the rule runtime."""
        self._evaluator.close()

    def __repr__(self) -> str:
        return f"Policy(source={self.source!r}, digest={self.digest[:19]!r})"


def load_policy(rules_dir: str | Path | None = None, *, memo: bool = True) -> Policy:
    """Load, check and compile the rule files in ``rules_dir`` (None: the bundled rules).

    Raises :class:`PolicyError` listing every problem found, sorted by file
    and location. ``memo`` caches each step's answer by the facts it reads
    (sound because rules are pure functions of their facts).
    """
    return Policy(rules_dir, memo=memo)


def _respelled(decision: Decision, spelled: dict[str, str]) -> Decision:
    """The decision with its paths pointing into the document as spelled (kebab-case)."""
    from dataclasses import replace

    from .input import respell

    fix = lambda items: tuple(replace(m, path=respell(m.path, spelled)) for m in items)  # noqa: E731
    return replace(decision, errors=fix(decision.errors), warnings=fix(decision.warnings),
                   connectors=fix(decision.connectors), _steps=list(decision._steps))


_MAX_KEY = 4096
_POLICIES: "weakref.WeakSet[Policy]" = weakref.WeakSet()


def _reset_cache_locks() -> None:
    # A fork copies locks as they are: one held by another thread would never
    # be released in the child.
    for policy in list(_POLICIES):
        policy._cache_lock = threading.Lock()
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_cache_locks)


def _cache_key(document: Any, limits: Limits) -> tuple | None:
    """The repr of a plain document (None: do not cache it).

    repr, not JSON: it tells 1 from "1" as a key, True from 1, a tuple from a
    list, so two documents share an entry only when they are the same data.
    Key order is kept: it decides which spelling a duplicate error names.
    """
    if type(document) is not dict:
        return None
    try:
        text = repr(document)
    except (RecursionError, ValueError):
        return None
    if len(text) > _MAX_KEY:
        # Long documents are keyed by a digest of their text, not the text itself.
        return (limits, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest())
    return (limits, text)


_DEFAULT: Policy | None = None
_DEFAULT_LOCK = threading.Lock()


def _default_policy() -> Policy:
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Policy()
        return _DEFAULT


def decide(document: Any, *, policy: Policy | None = None, limits: Limits = DEFAULT_LIMITS) -> Decision:
    """Decide whether vLLM 0.33.0 runs a deployment with HMA on.

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


def supports_hma(kv_transfer_config: Any, *, policy: Policy | None = None, env: Mapping[str, Any] | None = None) -> bool | None:
    """The equivalent of vLLM's KVConnectorFactory.supports_hma_config.

    Returns True or False, or None when an undeclared external connector
    makes the answer unknown. Raises :class:`ConnectorError` where vLLM
    raises (unknown connector name, missing name, empty module path), and
    :class:`InputError` for an invalid config.
    """
    return (policy or _default_policy()).supports_hma(kv_transfer_config, env=env)
