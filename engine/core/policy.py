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
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ._durable import RuleRuntime, RuntimeFault, load_rulesets
from .compiler import Compiled, Misanswered, compile_policy
from .decision import Decision, VllmRelease
from .errors import ConnectorError, EvaluationError, InputError, Problem
from .evaluate import Evaluator
from .command import as_release_reads, command_result, decided
from .configlist import document_schema
from .facts import STOOD_FOR, Facts, extract
from .input import DEFAULT_LIMITS, Limits, prepare, respell
from .releases import parse_version
from .model import PolicyModel, Rule
from .optionlist import known_options, known_releases
from .rules import read_policy
from .table import StepTable, classes

__all__ = ["Policy", "Prepared", "load_policy", "respelled", "release_problem"]


class Prepared(NamedTuple):
    """A validated, normalised deployment document (:meth:`Policy.prepare`),
    with each top-level name as the caller spelled it (kebab-case or not),
    and the release whose schema checked it (None: not known)."""

    document: dict[str, Any]
    spelled: dict[str, str]
    release: str | None = None


class Policy:
    """A loaded, checked and compiled policy. Build one with :func:`load_policy`.

    A Policy decides for one vLLM release (:attr:`release`), and stamps its
    decisions with it and ``release_source``, why that release (default:
    "default" for the bundled rules' newest release, "requested" for one
    asked for, "rules folder" for a plain rules folder's own).

    A Policy owns its ruleset inside the rule runtime; it is safe to share
    between threads, and several policies may be loaded side by side.
    """

    def __init__(self, rules_dir: str | Path | None = None, *, release: str | None = None,
                 release_source: str | None = None, memo: bool = True):
        self._model = read_policy(rules_dir, release=release)
        if release_source is None:
            release_source = "rules folder" if not self._model.bundle else "requested" if release else "default"
        self._vllm = VllmRelease(self._model.release, release_source)
        # The options the release's `vllm serve` accepts, where the bundle
        # records them (else the default release's). Options a later release
        # added (known_options(): the newest list, read here once) can be
        # refused only where the release has its own, older, list.
        own_options = self._model.release in known_releases()
        self._options = known_options(self._model.release if own_options else None)
        self._may_lack_options = own_options and self._options.release != known_options().release
        # The fields the release's config classes take, where the bundle records them (else 0.33.0's);
        # its check is compiled here, as is all work every decision needs, so that the
        # first decision costs what a warm one does.
        self._schema = document_schema(self._model.release)
        self._registered = frozenset(self._model.registered_names)
        compiled = compile_policy(self._model)
        self._runtimes = load_rulesets(compiled.definitions)
        self._closed = False
        try:
            # memo=False: no table and no memo, every step goes to durable-rules
            # (for tests that compare the two). The fill posts a batch per step,
            # all in one session of each runtime: one state in the C core for
            # the whole fill rather than one created and deleted per batch.
            with ExitStack() as held:
                for runtime in self._runtimes:
                    held.enter_context(runtime.session())
                self._table = StepTable(self._model, _asker(self._runtimes, compiled), prefill=memo)
        except EvaluationError:
            self.close()
            raise
        self._evaluator = Evaluator(self._model, self._table, self._vllm, memo=memo)

    @property
    def digest(self) -> str:
        """sha256 over the rule files' names and contents."""
        return self._model.digest

    @property
    def source(self) -> str:
        """Where the rules were read from ("bundled" or the directory given)."""
        return self._model.source

    @property
    def release(self) -> str:
        """The vLLM release this policy decides for."""
        return self._model.release

    @property
    def vllm(self) -> VllmRelease:
        """Its release, and why that one (the stamp of its decisions)."""
        return self._vllm

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

    def classes(self, fact: str) -> tuple[Any, ...]:
        """One value of each class of a document fact's values that this
        policy's rules tell apart, for a fact a stand-in may stand for (a
        document value as written, or an environment variable:
        facts.STOOD_FOR, by the fact's name)."""
        return classes(self._model, STOOD_FOR[fact])

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (a closed policy decides nothing)."""
        return self._closed

    def prepare(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Prepared:
        """The first half of :meth:`decide`: the validated, normalised document.
        Raises :class:`InputError` for an invalid one."""
        spelled: dict[str, str] = {}
        return Prepared(prepare(document, limits=limits, spelled=spelled, options=self._options, schema=self._schema),
                        spelled, self.release)

    def decide_prepared(self, prepared: Prepared, *, release_source: str | None = None) -> Decision:
        """The second half of :meth:`decide`, for a document :meth:`prepare` made.
        ``release_source``: why the caller chose this policy's release, which
        then also wins over the document's ``vllm_version``. Raises
        :class:`InputError` for a document that names another release
        (``release.mismatch``)."""
        self._check_open()
        document, spelled, checked = prepared
        stamp = self._vllm
        if release_source is not None:
            stamp = VllmRelease(self.release, release_source)
        elif document.get("vllm_version") is not None:
            version = parse_version(document["vllm_version"])
            if version != self.release:
                raise InputError([release_problem(version, self.release)])
            if stamp.source == "default":
                stamp = VllmRelease(self.release, "document vllm_version")
        newer = self._newer_options(document, spelled)
        if checked != self.release:  # prepared by another release's policy (a PolicySet's default)
            newer += [replace(p, path=respell(p.path, spelled)) for p in self._schema.problems(document)]
        if newer:
            raise InputError(newer)
        decision = self._evaluator.decide(self._facts(document))
        if stamp != decision.vllm:
            decision = replace(decision, vllm=stamp)
        if any(name != as_written for name, as_written in spelled.items()):
            decision = respelled(decision, spelled)
        return decision

    def _newer_options(self, document: Mapping[str, Any], spelled: Mapping[str, str]) -> list[Problem]:
        """The document's vLLM options that this release does not have (an
        older release refuses them as an unknown argument), where the bundle
        records its option list. The document's facts (model_facts, platform,
        env, vllm_version) are no options and are not checked, nor is an
        option given as null: that is an option not given (vLLM is passed
        nothing for it)."""
        if not self._may_lack_options:
            return []
        newest = known_options()
        return [Problem("input.schema", f"`{spelled.get(name, name)}` is not an option of vLLM {self.release}",
                        "/" + spelled.get(name, name), hint="a later vLLM release added it")
                for name, value in document.items()
                if value is not None and newest.dest(name) is not None and self._options.dest(name) is None]

    def decide(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Decision:
        """Decide one deployment document. See :func:`decide`."""
        return self.decide_prepared(self.prepare(document, limits=limits))

    def decide_command(self, argv: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                       cwd: str | os.PathLike[str] | None = None, config_root: str | os.PathLike[str] | None = None,
                       limits: Limits = DEFAULT_LIMITS) -> Decision:
        """See :func:`decide_command`; a policy loaded for a named release checks the command's options."""
        return decided(as_release_reads(command_result(argv, env=env, cwd=cwd, config_root=config_root),
                                        self.named_release),
                       lambda document: self.decide(document, limits=limits))

    @property
    def named_release(self) -> str | None:
        """This policy's release where the caller or its rules folder named it (None: the bundle's default)."""
        return None if self._vllm.source == "default" else self.release

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
        top = self._evaluator.graph(self._facts(document).graph).top
        assert top is not None  # a kv_transfer_config makes a graph
        support = top.facts["support"]
        if support == "error":
            error = top.errors["support"]
            raise ConnectorError([Problem(error.code, error.message, error.path, error.hint)])
        return {"supported": True, "unsupported": False}.get(support)

    def _facts(self, document: Mapping[str, Any]) -> Facts:
        """The facts of a prepared document, read with this release's name sets and module table."""
        return extract(document, self._model.containers, self._model.modules, self._registered)

    def _check_open(self) -> None:
        if self._closed:
            raise EvaluationError([Problem("engine.closed", "the policy was closed")])

    def close(self) -> None:
        """Unload the policy's ruleset from the rule runtime."""
        self._closed = True
        for runtime in self._runtimes:
            runtime.close()

    def __repr__(self) -> str:
        return f"Policy(source={self.source!r}, digest={self.digest[:19]!r})"


def release_problem(version: str, release: str) -> Problem:
    """A document naming another release than the policy's (``release``)."""
    return Problem("release.mismatch", f"the document is for vLLM {version}; these rules decide for {release}",
                   "/vllm_version", hint=f"decide it with the rules of {version} (--rules vllm:{version}), or drop vllm_version")


def _asker(runtimes: tuple[RuleRuntime, ...], compiled: Compiled) -> Callable[[list[dict[str, Any]]], list[Rule | None]]:
    """The table's question to durable-rules: the rule it picks for each event
    (None: the step's default). A closure, not a Policy method, so that the
    table holds no reference back to its policy."""
    def ask(events: list[dict[str, Any]]) -> list[Rule | None]:
        try:
            return compiled.first(lambda ruleset, batch: runtimes[ruleset].fire_many(batch), events)
        except (RuntimeFault, Misanswered) as exc:
            raise EvaluationError([Problem("engine.fault", str(exc))]) from None
    return ask


def load_policy(rules_dir: str | Path | None = None, *, release: str | None = None, release_source: str | None = None,
                memo: bool = True) -> Policy:
    """Load, check and compile the rule files in ``rules_dir`` (None: the
    bundled rules) for the vLLM ``release`` (None: the newest the bundled
    rules hold, or the release a plain rules folder's registry names).

    Raises :class:`PolicyError` listing every problem found, sorted by file
    and location, and :class:`InputError` for a release the rules do not
    hold (``release.unknown``, with the known ones) or a string that is no
    release (``release.malformed``). ``memo=False`` leaves the step table
    empty, so that every step goes to durable-rules (slow; for comparing the two).
    ``release_source`` says why this release, in every decision (see :class:`Policy`).
    """
    return Policy(rules_dir, release=release, release_source=release_source, memo=memo)


def respelled(decision: Decision, spelled: dict[str, str]) -> Decision:
    """The decision with its paths pointing into the document as spelled (kebab-case)."""
    def fix(items: Any) -> Any:
        return tuple(replace(m, path=respell(m.path, spelled)) for m in items)

    return replace(decision, errors=fix(decision.errors), warnings=fix(decision.warnings),
                   connectors=fix(decision.connectors))
