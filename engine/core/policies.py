"""Which vLLM release decides a deployment: :class:`PolicySet`, the policies
of one rules folder (or of the bundled rules), one per release.

A deployment is decided for one release, chosen in this order:

1. the release the caller fixes (``--vllm-version``, ``--rules vllm:X``),
   whatever the document says;
2. the release the document names (``vllm_version``);
3. the release what deploys it names, as an audit reads it (an image tag,
   a ``pip install vllm==X`` pin, a directive): a :class:`Hint`;
4. the bundle's default, the newest release.

A hint that names a release older than every one the bundle holds (vLLM
0.8.5, before the hybrid KV cache manager) is decided by the bundle's
``before:`` rule (:meth:`PolicySet.predating`), where it has one, and by
no release's rules.

Every decision says which release it used and why (``Decision.vllm``). A
plain rules folder (no ``releases.yaml``) is one policy for one release: a
document that names another is an input error (``release.mismatch``), and a
hint that names another is noted in the decision's source.

Each release's policy is loaded the first time a deployment needs it, and
kept: a fleet runs a few releases, each loaded once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .command import as_release_reads, command_result, decided
from .decision import Decision, VllmRelease, input_error_decision
from .errors import InputError, Problem
from .input import DEFAULT_LIMITS, Limits
from .policy import Policy, Prepared
from .releases import Releases, bundled, of_folder, parse_version, release_numbers

__all__ = ["PolicySet", "Hint", "DEFAULT_SOURCE", "DOCUMENT_SOURCE", "decide", "decide_command", "supports_hma",
           "default_policies"]

DEFAULT_SOURCE = "default"
DOCUMENT_SOURCE = "document vllm_version"


class Hint(NamedTuple):
    """What deploys a deployment says of its release: ``version`` (None when
    it names none) and where that was read (``image tag vllm/vllm-openai:v0.21.0``)
    or why nothing was."""

    version: str | None
    origin: str


class PolicySet:
    """The policies of ``rules_dir`` (None: the bundled rules), one per
    release, with ``release`` fixed for every decision when given (its
    ``source`` says why: ``--vllm-version``, ``vllm:0.21.0``).

    Loading checks the rules and loads the policy of the fixed or default
    release at once (raising :class:`PolicyError`, or :class:`InputError`
    for an unknown release); the others load when first needed. Safe to share
    between threads.
    """

    def __init__(self, rules_dir: str | Path | None = None, *, release: str | None = None, source: str | None = None):
        self.rules_dir = rules_dir
        self.fixed = parse_version(release) if release is not None else None
        self._fixed_source = source or "requested"
        self._bundle: Releases | None = bundled() if rules_dir is None else of_folder(rules_dir)
        self._policies: dict[str, Policy] = {}
        self._lock = threading.RLock()  # reentrant: a signal handler may decide while a release loads
        self.default = Policy(rules_dir, release=self.fixed, release_source=self._fixed_source if self.fixed else None)
        self._policies[self.default.release] = self.default

    @classmethod
    def wrap(cls, policy: Policy) -> "PolicySet":
        """A set that decides everything with ``policy`` (its release fixed),
        loading nothing."""
        out = cls.__new__(cls)
        out.rules_dir = None if policy.source == "bundled" else policy.source
        out.fixed = policy.release
        out._fixed_source = policy.vllm.source
        out._bundle = None
        out._policies = {policy.release: policy}
        out._lock = threading.RLock()
        out.default = policy
        return out

    # -- what a Policy offers, for the default release ------------------------

    @property
    def spec(self) -> tuple[str | None, str | None, str]:
        """What rebuilds this set in another process: ``PolicySet(*spec)``."""
        return (None if self.rules_dir is None else str(self.rules_dir), self.fixed, self._fixed_source)

    @property
    def source(self) -> str:
        """Where the rules came from (the default release's policy)."""
        return self.default.source

    @property
    def digest(self) -> str:
        """The default release's policy digest."""
        return self.default.digest

    @property
    def registered_names(self) -> tuple[str, ...]:
        """The connector names the default release's registry registers."""
        return self.default.registered_names

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.default.closed

    @property
    def named_release(self) -> str | None:
        """The release every decision is made for, when the caller fixed it
        (None: each deployment's own, else the default)."""
        return self.fixed

    @property
    def releases(self) -> tuple[str, ...]:
        """The releases these rules decide for, oldest first."""
        return tuple(self._bundle.releases) if self._bundle is not None else (self.default.release,)

    def prepare(self, document: Any, *, hint: Hint | None = None, limits: Limits = DEFAULT_LIMITS) -> Prepared:
        """Read and check ``document`` once, for :meth:`decide_prepared`: with
        the schema and options of the release the document names
        (``vllm_version``, when these rules hold it), else the one ``hint``
        names, else of the fixed or default release. The policy that decides
        it checks it again where its release would refuse what the one that
        prepared it accepts."""
        return self._preparer(document, hint).prepare(document, limits=limits)

    def _preparer(self, document: Any, hint: Hint | None) -> Policy:
        """The policy of the release a plain document names (else its hint), else the default."""
        if self.fixed is not None or self._bundle is None or not isinstance(document, dict):
            return self.default
        named = _named_release(document)
        if named is None and hint is not None:
            named = hint.version
        if not isinstance(named, str):
            return self.default
        try:
            version = parse_version(named)
        except InputError:
            return self.default  # reported when the document is decided
        return self.policy(version) if version in self._bundle.releases else self.default

    def close(self) -> None:
        """Release every loaded release's rule runtime."""
        with self._lock:
            for policy in self._policies.values():
                policy.close()

    # -- choosing ---------------------------------------------------------------

    def policy(self, release: str | None = None, path: str = "") -> Policy:
        """The policy of ``release`` (None: the fixed or default one).
        :class:`InputError` ``release.unknown`` (at ``path``) for one the rules do not hold."""
        if release is None:
            return self.default
        version = parse_version(release, path)
        policy = self._policies.get(version)
        if policy is None:
            if self._bundle is None:
                return self.default  # a plain folder: one release (Policy reports a mismatch)
            self._bundle.get(version, path)  # release.unknown, before anything is loaded
            with self._lock:
                policy = self._policies.get(version)
                if policy is None:
                    policy = Policy(self.rules_dir, release=version, release_source=DOCUMENT_SOURCE)
                    self._policies[version] = policy
        return policy

    def choose(self, document: Mapping[str, Any], hint: Hint | None = None) -> tuple[Policy, str | None]:
        """The policy that decides ``document`` (prepared), and the source to
        stamp its decision with (None: the document's own vllm_version, which
        the policy checks)."""
        named = document.get("vllm_version")
        if self.fixed is not None:
            other = [f"{what} names {version}" for what, version in
                     (("the document", named), (hint.origin if hint else "", hint.version if hint else None))
                     if version is not None and _same(version) != self.fixed]
            return self.default, self._fixed_source + (f" ({'; '.join(other)})" if other else "")
        if named is not None:
            return self.policy(named, "/vllm_version"), None
        if hint is None:
            return self.default, DEFAULT_SOURCE if self._bundle is not None else None
        if hint.version is None:
            return self.default, f"{self._default_source()} ({hint.origin})"
        unheld = self.unheld(hint)
        if unheld is not None:
            return self.default, f"{self._default_source()} ({hint.origin}{unheld})"
        if self._bundle is None:
            return self.default, hint.origin
        return self.policy(_same(hint.version)), hint.origin

    def unheld(self, hint: Hint | None) -> str | None:
        """Why the release ``hint`` names does not decide its deployment:
        these rules do not hold it, and the default decides instead (None:
        they hold it, it names none, or a fixed release decides every
        deployment). Said after the hint's origin: "; these rules decide for
        0.33.0 only", ": vLLM 0.6.6 is not a release these rules know; ..."."""
        if self.fixed is not None or hint is None or hint.version is None:
            return None
        version = _same(hint.version)
        if self._bundle is None:
            return None if version == self.default.release else f"; these rules decide for {self.default.release} only"
        if version in self._bundle.releases:
            return None
        known = self.releases
        return f": vLLM {version} is not a release these rules know; they know {known[0]} to {known[-1]}"

    def newest_allowed(self, allowed: Sequence[tuple[str, str]]) -> str | None:
        """The release pip installs for a range of them (``allowed``: PEP
        440's specifiers, each (operator, version): `<=0.6.3`, `>=0.10.1.1`,
        `<0.22.0`, `~=0.10.1`, `!=`, `==`): the newest these rules hold that
        it allows, where it is bounded above; the bound of `<=X` where X is
        older than every release they hold (the bundle's `before` rule
        decides it). None where nothing bounds it above or it allows a release
        newer than they know (the newest when it is installed, not known from
        the files), or it allows none they hold."""
        bounds = [(op, release_numbers(version)) for op, version in allowed]
        if not any(op in ("<", "<=", "~=", "==") for op, _ in bounds):
            return None
        held = [version for version in self.releases
                if all(_allows(op, bound, release_numbers(version)) for op, bound in bounds)]
        if held:
            newest = max(held, key=release_numbers)
            *head, last = release_numbers(self.releases[-1])
            later = (*head, last + 1)  # (a patch release after the newest they know)
            return None if all(_allows(op, bound, later) for op, bound in bounds) else newest
        older = [version for op, version in allowed if op in ("<=", "==")]
        return older[0] if len(older) == 1 and self._bundle is not None and self._bundle.predates(older[0]) else None

    def _default_source(self) -> str:
        return DEFAULT_SOURCE if self._bundle is not None else self.default.vllm.source

    # -- deciding ---------------------------------------------------------------

    def refused(self, problems: Sequence[Problem], document: Any = None, hint: Hint | None = None) -> Decision:
        """The decision of a deployment refused as input (``problems``):
        stamped with the release that reads it, as :meth:`choose` picks it
        from ``document`` (as given, or None) and ``hint``; the default
        release where neither names one these rules hold."""
        policy: Policy = self.default
        source: str | None = self.default.vllm.source
        if self._bundle is not None or self.fixed is not None:
            named = _named_release(document) if isinstance(document, dict) else None
            try:
                policy, source = self.choose({} if named is None else {"vllm_version": named}, hint)
            except InputError:  # the release named is unknown or malformed: one of the problems
                pass
        older = self._older(document, hint)  # (a release older than the rules: named as its decision's, not replaced)
        stamp = VllmRelease(policy.release, source if source is not None else DOCUMENT_SOURCE) if older is None \
            else VllmRelease(older, hint.origin if hint is not None else DOCUMENT_SOURCE)
        return input_error_decision(problems, policy.digest, stamp)

    def _older(self, document: Any, hint: Hint | None) -> str | None:
        """The release ``hint`` names, where it is older than every one these
        rules hold and the bundle has a ``before:`` rule for it (and neither a
        fixed release nor the document names another); else None."""
        bundle = self._bundle
        if bundle is None or bundle.before is None or self.fixed is not None or hint is None or hint.version is None:
            return None
        if isinstance(document, dict) and _named_release(document) is not None:
            return None
        try:
            version = parse_version(hint.version)
        except InputError:
            return None
        return version if bundle.predates(version) else None

    def predating(self, document: Any, hint: Hint | None) -> Decision | None:
        """The decision of a deployment whose deployer names a release older
        than every one these rules hold (``hint``), by the bundle's
        ``before:`` rule; None where another release decides it (a fixed
        release, the document's own vllm_version, a release held or newer,
        a bundle without that rule). Nothing of the document is read: that
        release has no hybrid KV cache manager to decide."""
        version, bundle = self._older(document, hint), self._bundle
        if version is None or bundle is None or bundle.before is None or hint is None:
            return None
        rule, first = bundle.before, next(iter(bundle.releases))

        def filled(text: str) -> str:  # plain replacement: a rule's text is no format string
            return text.replace("{release}", version).replace("{first}", first)

        return Decision(rule.outcome, False if rule.outcome == "disabled" else None, (), (), (), (rule.id,),
                        rule.digest, (filled(rule.reason),),
                        filled(rule.remediation) if rule.remediation else None, vllm=VllmRelease(version, hint.origin))

    def decide_prepared(self, prepared: Prepared, hint: Hint | None = None) -> Decision:
        """Decide a prepared document with the policy of its release."""
        policy, source = self.choose(prepared.document, hint)
        return policy.decide_prepared(prepared, release_source=source)

    def decide(self, document: Any, *, hint: Hint | None = None, limits: Limits = DEFAULT_LIMITS) -> Decision:
        """Decide one deployment document with the policy of its release."""
        return self.predating(document, hint) or self.decide_prepared(self.prepare(document, hint=hint, limits=limits), hint)

    def decide_command(self, argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                       cwd: str | os.PathLike[str] | None = None, config_root: str | os.PathLike[str] | None = None,
                       limits: Limits = DEFAULT_LIMITS) -> Decision:
        """:func:`decide_command` with these policies (a fixed release checks the command's options)."""
        return decided(as_release_reads(command_result(argv, env=env, cwd=cwd, config_root=config_root),
                                        self.named_release),
                       lambda document: self.decide(document, limits=limits))

    def __repr__(self) -> str:
        fixed = f", release={self.fixed!r}" if self.fixed else ""
        return f"PolicySet(source={self.source!r}{fixed})"


def _allows(op: str, bound: tuple[int, ...], version: tuple[int, ...]) -> bool:
    """Whether the specifier ``op`` ``bound`` allows ``version`` (release
    numbers, compared as PEP 440 does: 0.22 is 0.22.0)."""
    width = max(len(bound), len(version))
    a, b = version + (0,) * (width - len(version)), bound + (0,) * (width - len(bound))
    if op == "~=":  # (~=0.10.1: >=0.10.1 and the same 0.10)
        return a >= b and version[:len(bound) - 1] == bound[:-1]
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _named_release(document: dict[Any, Any]) -> Any:
    """The release a document as given names: its ``vllm_version``, in
    either spelling the document takes (None: none). dict's own get: a
    subclass's may raise."""
    named = dict.get(document, "vllm_version")
    return dict.get(document, "vllm-version") if named is None else named


def _same(version: str) -> str:
    """A version as the bundle spells it (a leading v dropped); unchanged when malformed."""
    try:
        return parse_version(version)
    except InputError:
        return version


_DEFAULT: PolicySet | None = None
# Reentrant: decide() from a signal handler that interrupts the first load
# must not wait for a lock its own thread holds (it loads a set of its own).
_DEFAULT_LOCK = threading.RLock()


def default_policies() -> PolicySet:
    """The bundled rules' policies (loaded once, the default release first)."""
    global _DEFAULT
    if _DEFAULT is None:  # the lock only keeps two threads from loading it twice
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = PolicySet()
    return _DEFAULT


def decide(document: Any, *, policy: Policy | PolicySet | None = None, limits: Limits = DEFAULT_LIMITS) -> Decision:
    """Decide whether vLLM runs a deployment with HMA on.

    ``document`` is a deployment document (a mapping, as read from JSON or
    YAML), or one of vLLM's own config objects (KVTransferConfig, VllmConfig),
    read by attribute without importing vLLM. ``policy`` defaults to the
    bundled rules, deciding for the release the document names
    (``vllm_version``), else for the newest; ``decision.vllm`` says which.

    Returns a :class:`Decision` whose outcome is ``enabled``, ``disabled``,
    ``error`` (vLLM rejects the configuration at the config or connector
    stage) or ``undetermined`` (an undeclared external connector).

    Raises :class:`InputError` (every problem, each with a code and a JSON
    Pointer) when the document is invalid or names a release the rules do
    not hold (``release.unknown``); nothing else for any document.
    """
    return (policy or default_policies()).decide(document, limits=limits)


def decide_command(argv: str | Sequence[str], *, env: Mapping[str, str] | None = None, vllm_version: str | None = None,
                   policy: Policy | PolicySet | None = None, cwd: str | os.PathLike[str] | None = None,
                   config_root: str | os.PathLike[str] | None = None, limits: Limits = DEFAULT_LIMITS) -> Decision:
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
    ``vllm_version``: the release that runs the command (as a document's
    ``vllm_version``; default: the newest bundled).
    """
    def decide_document(document: dict[str, Any]) -> Decision:
        if vllm_version is not None:
            document = {**document, "vllm_version": vllm_version}
        return (policy or default_policies()).decide(document, limits=limits)

    named = _same(vllm_version) if isinstance(vllm_version, str) else policy.named_release if policy is not None else None
    return decided(as_release_reads(command_result(argv, env=env, cwd=cwd, config_root=config_root), named),
                   decide_document)


def supports_hma(kv_transfer_config: Any, *, policy: Policy | None = None, env: Mapping[str, Any] | None = None) -> bool | None:
    """The equivalent of vLLM's KVConnectorFactory.supports_hma_config, in
    the newest bundled release (or ``policy``'s).

    Returns True or False, or None when an undeclared external connector
    makes the answer unknown. Raises :class:`ConnectorError` where vLLM
    raises (unknown connector name, missing name, empty module path), and
    :class:`InputError` for an invalid config.
    """
    return (policy or default_policies().default).supports_hma(kv_transfer_config, env=env)
