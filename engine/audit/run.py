"""Stage 7, audit: walk paths, find each vLLM deployment (``sources``),
decide it, and build the report model that ``report`` renders.

The report is a pure function of the files, the policy and the tool version,
but for the time it records (``generated_at``; SOURCE_DATE_EPOCH fixes it):
it holds no machine-specific path, and it is the same for every ``jobs``. Files are examined in a fixed order (arguments in order, each
directory walked sorted); with ``jobs > 1`` chunks of files go to worker
processes and this one, and the results are put back in that order. Workers
are forked where the platform forks and this process runs no other thread
(they start at once, with the loaded policy); otherwise they are spawned, and
each imports the engine and loads its own policy.

Directories are walked without following symbolic links to directories;
hidden directories (``.git``, ``.venv``, ...), ``__pycache__`` and
``node_modules`` are not entered. A file reached through a symbolic link is
read only when its target is inside the audited paths.
"""

from __future__ import annotations

import copy
import gc
import multiprocessing
import os
import pickle
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from operator import itemgetter
from pathlib import Path
from typing import Any

from ..core.policy import load_policy
from ..version import __version__
from ..core.decision import Decision, input_error_decision
from .declog import input_digest
from ..core.input import DEFAULT_LIMITS
from ..core.errors import HMAPolicyError, InputError, Problem
from .sources import DEFAULT_SOURCE_LIMITS, Deployment, SourceLimits, _read_source

__all__ = ["AuditReport", "Entry", "FileResult", "AuditError", "audit", "walk", "progress_bar", "FAIL_ON"]

# Conditions `--fail-on` may name.
FAIL_ON = ("error", "undetermined", "disabled", "warning", "problem")
_OUTCOMES = ("enabled", "disabled", "error", "undetermined")
_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})


class AuditError(HMAPolicyError):
    """The audit could not run (a path does not exist, a worker died)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One deployment and its decision (``Decision.to_dict()``)."""

    deployment: Deployment
    decision: dict[str, Any]
    input_digest: str | None

    def to_dict(self) -> dict[str, Any]:
        return self._to_dict({})

    def _to_dict(self, remedies: dict[int, str | None]) -> dict[str, Any]:
        """:meth:`to_dict`; ``remedies`` holds the remediation of each decision
        dict by identity (entries with equal decisions share one dict)."""
        d = self.deployment
        remedy = remedies.get(id(self.decision), remedies)
        if remedy is remedies:
            remedy = remedies[id(self.decision)] = remediation(self.decision)
        return {
            "id": d.id,
            "file": d.file,
            "format": d.format,
            "line": d.line,
            "name": d.name,
            "resource": dict(d.resource) if d.resource else None,
            "container": d.container,
            "role": d.role,
            "chain": list(d.chain),
            "release_hint": {"version": d.release.version, "origin": d.release.origin} if d.release else None,
            "origins": dict(d.origins),
            "notes": [_problem_dict(n) for n in d.notes],
            "input_digest": self.input_digest,
            "remediation": remedy,
            "decision": self.decision,
        }

    def __reduce__(self) -> tuple:
        # Pickled as its fields and rebuilt by __init__: four times faster to
        # load than the default for slotted classes (audit workers send many).
        return (type(self), (self.deployment, self.decision, self.input_digest))


def remediation(decision: dict[str, Any]) -> str | None:
    """What to change, in one line: the connectors that block HMA and the flag
    that states the intent (built from the decision, so from the rules)."""
    if decision["errors"]:
        hint = decision["errors"][0].get("hint")
        return hint or None
    if decision["outcome"] == "disabled" and any(w["code"] == "hma.auto_disabled" for w in decision["warnings"]):
        blocking = sorted({c["kv_connector"] or "(no kv_connector)" for c in decision["connectors"]
                           if c["supports_hma"] is False and c["kv_connector"] != "MultiConnector"})
        names = ", ".join(f"`{n}`" for n in blocking) or "the connector graph"
        verb = "block" if len(blocking) > 1 else "blocks"
        return (f"{names} {verb} HMA: use connectors that support it, or pass "
                "--disable-hybrid-kv-cache-manager to state that HMA is off on purpose")
    if decision["outcome"] == "undetermined":
        unknown = [w for w in decision["warnings"] if w["code"] == "connector.capability_unknown"]
        return unknown[0].get("hint") if unknown else None
    return None


@dataclass(frozen=True, slots=True)
class FileResult:
    """One file examined: what it was, how many deployments, its problems."""

    file: str
    format: str | None
    deployments: int
    problems: tuple[Problem, ...] = ()
    skipped: str | None = None
    notes: tuple[Problem, ...] = ()  # a file that mentions vLLM's KV options but yields no launch

    def __reduce__(self) -> tuple:
        return (type(self), (self.file, self.format, self.deployments, self.problems, self.skipped,  # as Entry's
                             self.notes))


def _problem_dict(p: Problem) -> dict[str, Any]:
    out: dict[str, Any] = {"code": p.code, "message": p.message}
    if p.file is not None:
        out["file"] = p.file
    out["line"] = p.line
    out["path"] = p.path
    if p.hint:
        out["hint"] = p.hint
    return out


@dataclass(frozen=True)
class AuditReport:
    """Everything an audit found, in a fixed order."""

    paths: tuple[str, ...]
    policy_source: str
    policy_digest: str
    files: tuple[FileResult, ...]
    entries: tuple[Entry, ...]
    tool_version: str = __version__
    # The entries' counts (see _tally), when the audit made them as it went
    # (each process over its own files); else summary() counts them.
    tally: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # The JSON text of the deployments, when the audit's processes rendered it
    # as they went (see _Spool); else report.write() renders them.
    _rendered: Any = field(default=None, compare=False, repr=False)

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(p for f in self.files for p in f.problems)

    @property
    def notes(self) -> tuple[Problem, ...]:
        """Notes on files: a file that mentions vLLM's KV options but yields no launch."""
        return tuple(n for f in self.files for n in f.notes)

    def summary(self) -> dict[str, Any]:
        """Counts over the report (computed once: a report is immutable)."""
        cached = self.__dict__.get("_summary")
        if cached is None:
            cached = self._summarise()
            object.__setattr__(self, "_summary", cached)
        return copy.deepcopy(cached)

    def _summarise(self) -> dict[str, Any]:
        tally = self.tally if self.tally is not None else _tally(self.entries)
        examined = [f for f in self.files if f.skipped is None]
        return {
            "files": {
                "seen": len(self.files),
                "examined": len(examined),
                "with_deployments": sum(1 for f in self.files if f.deployments),
                "with_problems": sum(1 for f in self.files if f.problems),
                "skipped": len(self.files) - len(examined),
            },
            "deployments": len(self.entries),
            "outcomes": {name: tally["outcomes"].get(name, 0) for name in _OUTCOMES},
            "error_stages": {name: tally["stages"].get(name, 0) for name in ("input", "config", "connector")},
            "codes": dict(sorted(tally["codes"].items())),
            "formats": dict(sorted(tally["formats"].items())),
            "warnings": tally["warnings"],
            "by_connector": dict(sorted(tally["connectors"].items())),
            "by_rule": dict(sorted(tally["rules"].items())),
            "problems": len(self.problems),
            "notes": len(self.notes),
        }

    def generated_at(self) -> str:
        """When the report was made (UTC), or SOURCE_DATE_EPOCH when set, the
        reproducible-builds convention for byte-identical outputs."""
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        seconds = int(epoch) if epoch and epoch.isdigit() else int(time.time())
        return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def failing(self, conditions: Iterable[str]) -> list[str]:
        """The `--fail-on` conditions this report meets, each with a count."""
        summary = self.summary()
        met = []
        for condition in conditions:
            if condition in ("error", "undetermined", "disabled"):
                count = summary["outcomes"][condition]
            elif condition == "warning":
                count = sum(1 for e in self.entries if e.decision["warnings"])
            else:
                count = summary["problems"]
            if count:
                met.append(f"{condition}: {count}")
        return met

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``hma-policy audit --format json``)."""
        remedies: dict[int, str | None] = {}  # by decision dict: each entry's holds it alive meanwhile
        return self._report_dict([e._to_dict(remedies) for e in self.entries])

    def iter_deployments(self, size: int = 1024) -> Iterator[list[dict[str, Any]]]:
        """``to_dict()["deployments"]``, ``size`` at a time, in order: for a
        writer that streams a large report (report.write) rather than
        holding every deployment's dict at once."""
        remedies: dict[int, str | None] = {}
        entries, size = self.entries, max(1, size)
        for start in range(0, len(entries), size):
            yield [e._to_dict(remedies) for e in entries[start:start + size]]

    def _report_dict(self, deployments: Any) -> dict[str, Any]:
        """The JSON report with ``deployments`` as its deployments (a
        streaming writer puts a placeholder there)."""
        return {
            "kind": "hma-policy-audit",
            "version": 1,
            "tool": {"name": "hma-policy", "version": self.tool_version},
            "generated_at": self.generated_at(),
            "policy": {"source": self.policy_source, "digest": self.policy_digest},
            "paths": list(self.paths),
            "summary": self.summary(),
            "deployments": deployments,
            "problems": [_problem_dict(p) for p in self.problems],
            "notes": [_problem_dict(n) for n in self.notes],
            "skipped": [{"file": f.file, "reason": f.skipped} for f in self.files if f.skipped is not None],
        }


_VERDICT_KEYS = {True: "supports_hma", False: "does_not"}


def _tally(entries: Iterable[Entry]) -> dict[str, Any]:
    """The counts a summary is made of, which add up over parts of a report
    (see _merged): an audit's processes each count their own files."""
    # Equal decisions share one dict (audit._as_dict): count each distinct
    # decision once, weighted by how many deployments have it.
    groups: dict[int, list[Any]] = {}
    formats: dict[str, int] = {}
    for e in entries:
        group = groups.get(id(e.decision))
        if group is None:
            groups[id(e.decision)] = [e.decision, 1]
        else:
            group[1] += 1
        formats[e.deployment.format] = formats.get(e.deployment.format, 0) + 1
    # Plain dicts, not Counters: a Counter's item access costs twice a
    # dict's, and a fleet's distinct decisions hold ~15 rules each.
    outcomes: dict[str, int] = {}
    stages: dict[str, int] = {}
    codes: dict[str, int] = {}
    rules: dict[str, int] = {}
    connectors: dict[str, dict[str, int]] = {}
    warnings = 0
    for decision, count in groups.values():
        outcome = decision["outcome"]
        outcomes[outcome] = outcomes.get(outcome, 0) + count
        if decision["errors"]:
            stage = decision["errors"][0]["stage"]
            stages[stage] = stages.get(stage, 0) + count
        for code in {m["code"] for m in decision["errors"] + decision["warnings"]}:
            codes[code] = codes.get(code, 0) + count
        for rule in decision["trace"]:
            rules[rule] = rules.get(rule, 0) + count
        warnings += len(decision["warnings"]) * count
        # Per connector name: how many deployments use it, and its nodes' verdicts.
        seen = set()
        for node in decision["connectors"]:
            name = node["kv_connector"] or "(no kv_connector)"
            row = connectors.get(name)
            if row is None:
                row = connectors[name] = {"deployments": 0, "supports_hma": 0, "does_not": 0, "unknown": 0}
            row[_VERDICT_KEYS.get(node["supports_hma"], "unknown")] += count
            if name not in seen:
                seen.add(name)
                row["deployments"] += count
    return {"outcomes": outcomes, "stages": stages, "codes": codes, "rules": rules, "formats": formats,
            "warnings": warnings, "connectors": connectors}


def _counted(tally: dict[str, Any], results: list[tuple[FileResult, list[Entry]]]) -> dict[str, Any]:
    """``tally`` with a chunk's entries counted: each process of an audit
    counts its chunks as it goes, so that nothing is left to count once the
    last file is examined, when the other processes would wait for it."""
    return _merged((tally, _tally(entry for _, found in results for entry in found)))


def _merged(tallies: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The tally of the parts' entries together."""
    out: dict[str, Any] = {"outcomes": {}, "stages": {}, "codes": {}, "rules": {}, "formats": {}, "warnings": 0,
                           "connectors": {}}
    for tally in tallies:
        for part in ("outcomes", "stages", "codes", "rules", "formats"):
            into = out[part]
            for key, count in tally[part].items():
                into[key] = into.get(key, 0) + count
        out["warnings"] += tally["warnings"]
        for name, row in tally["connectors"].items():
            into = out["connectors"].setdefault(name, dict.fromkeys(row, 0))
            for key, count in row.items():
                into[key] += count
    return out


# -- walking ----------------------------------------------------------------------

def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def walk(paths: Sequence[str]) -> tuple[list[tuple[str, Path]], list[FileResult]]:
    """The files under ``paths`` as (display path, path), in audit order, and
    the entries skipped on the way (symbolic links to directories).

    Raises :class:`AuditError` when a path does not exist.
    """
    files, skipped = _walk(paths)
    return [(display, Path(path)) for display, path, _ in files], skipped


def _walk(paths: Sequence[str]) -> tuple[list[tuple[str, str, bool]], list[FileResult]]:
    """:func:`walk`, each file as (display path, path, plain): plain when the
    directory listing shows a regular file that is no symbolic link, so that
    examining it needs no further system call to learn so."""
    files: list[tuple[str, str, bool]] = []
    skipped: list[FileResult] = []
    seen: set[str] = set()
    # A file can be met twice only through two paths (`audit deploy deploy/a.yaml`).
    dedupe = len(paths) > 1
    for raw in paths:
        top = Path(raw)
        if not top.exists() and not top.is_symlink():
            raise AuditError([Problem("audit.path", "no such file or directory", file=raw)])
        if not top.is_dir():
            key = os.path.normpath(os.path.abspath(top))
            if key not in seen:
                seen.add(key)
                files.append((_posix(top), str(top), False))
            continue
        found: list[tuple[str, str, bool]] = []
        keys: dict[str, str] = {}  # path -> the key normpath(abspath()) gives, when deduplicating
        # Top-down and depth-first, subdirectories sorted by name (the order
        # of os.walk), from one listing per directory that also gives each
        # entry's type.
        stack = [os.fspath(top)]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError:
                continue  # as os.walk: a directory that cannot be listed is passed over
            subdirectories, names = [], []
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                (subdirectories if is_dir else names).append(entry)
            base = Path(directory)
            kept = []
            for entry in sorted(subdirectories, key=lambda e: e.name):
                if entry.is_symlink():
                    skipped.append(FileResult(_posix(base / entry.name), None, 0, skipped="a symbolic link to a directory (not followed)"))
                elif not entry.name.startswith(".") and entry.name not in _SKIP_DIRS:
                    kept.append(os.path.join(directory, entry.name))
            stack.extend(reversed(kept))
            # Built once per directory: the display path as
            # Path(directory, name).as_posix() spells it, and the key
            # normpath(abspath()) gives (a file name holds no separator).
            prefix = base.as_posix()
            prefix = "" if prefix == "." else prefix.rstrip("/") + "/"
            absolute = os.path.normpath(os.path.abspath(directory))
            absolute = absolute if absolute.endswith(os.sep) else absolute + os.sep
            for entry in names:
                try:
                    plain = entry.is_file(follow_symlinks=False)
                except OSError:
                    plain = False
                found.append((prefix + entry.name, entry.path, plain))
                if dedupe:
                    keys[entry.path] = absolute + entry.name
        found.sort(key=itemgetter(0))  # one order for every file system: by display path
        if not dedupe:
            files += found
            continue
        for item in found:
            key = keys[item[1]]
            if key not in seen:
                seen.add(key)
                files.append(item)
    return files, skipped


def _posix(path: Path) -> str:
    return path.as_posix()


def _roots(paths: Sequence[str], extra: Sequence[str]) -> tuple[Path, ...]:
    roots = []
    for raw in list(paths) + list(extra):
        path = Path(raw).resolve()
        roots.append(path if path.is_dir() else path.parent)
    return tuple(dict.fromkeys(roots))


# -- deciding ----------------------------------------------------------------------

def _located(problem: Problem) -> Problem:
    """A source problem as a decision error: the line goes into the message
    (a decision's errors carry a JSON Pointer, not a line)."""
    message = f"line {problem.line}: {problem.message}" if problem.line else problem.message
    return Problem(problem.code, message, problem.path, problem.hint)


# Equal documents of a fleet get the same Decision object from the policy's
# memo; their report dicts are made once (and pickled once per chunk). The
# dicts are read-only from here on.
_AS_DICT: dict[int, tuple[Any, dict[str, Any]]] = {}


def _as_dict(decision: Any) -> dict[str, Any]:
    held = _AS_DICT.get(id(decision))
    if held is not None and held[0] is decision:
        return held[1]
    if len(_AS_DICT) >= 16384:
        _AS_DICT.clear()
    data = decision.to_dict()
    _AS_DICT[id(decision)] = (decision, data)
    return data


def _failed(display: str, exc: Exception) -> tuple[FileResult, list[Entry]]:
    message = f"the audit of `{display}` failed: {type(exc).__name__}: {exc}"[:500]
    return FileResult(display, None, 0, (Problem("audit.internal", message, file=display),)), []


def _validated(policy: Any, deployment: Deployment) -> Any:
    """What the evaluate stage needs: a prepared document, or the decision
    already known (a source problem or an invalid document)."""
    if deployment.problems:
        return input_error_decision([_located(p) for p in deployment.problems], policy.digest)
    try:
        return policy.prepare(deployment.document)
    except InputError as exc:
        return input_error_decision(exc.problems, policy.digest)


def _decided(policy: Any, checked: Any) -> Any:
    if isinstance(checked, Decision):
        return checked
    try:
        return policy.decide_prepared(checked)
    except InputError as exc:
        return input_error_decision(exc.problems, policy.digest)


# Files are examined in batches, one stage at a time over the whole batch
# (read, validate, evaluate, digest): a stage that runs over many files keeps
# its code and data hot, which makes an audit about a quarter faster than
# taking each file through every stage in turn.
_BATCH = 256


@dataclass(frozen=True)
class _Settings:
    """What every process of an audit examines files with."""

    roots: tuple[Path, ...]  # where links and --config files may lead
    limits: SourceLimits
    documents: bool = True  # keep each deployment's document in its entry


def _examine_batch(policy: Any, files: Sequence[tuple[str, str, bool]], settings: _Settings) -> list[tuple[FileResult, list[Entry]]]:
    """Read and decide files (``plain``: known to be a regular file, not a
    symbolic link). Never raises: a fault in any stage becomes a problem of
    that file, which then has no deployments."""
    roots, limits, keep = settings.roots, settings.limits, settings.documents
    out: list[Any] = [None] * len(files)
    read: list[tuple[int, str, Any]] = []
    for index, (display, name, plain) in enumerate(files):
        try:
            if not plain:
                path = Path(name)
                if path.is_symlink() and not _inside(path.resolve(), roots):
                    out[index] = FileResult(display, None, 0, (Problem("source.outside_roots", f"`{display}` links to a file "
                                                                       "outside the audited paths; it is not read", file=display),)), []
                    continue
            read.append((index, display, _read_source(name, display, roots, limits, regular=plain,
                                                      known=getattr(policy, "registered_names", ()))))
        except Exception as exc:  # noqa: BLE001 - one file must never stop the audit of the others
            out[index] = _failed(display, exc)
    checked: list[tuple[int, str, Any, list[Any]]] = []
    for index, display, source in read:
        try:
            checked.append((index, display, source, [_validated(policy, d) for d in source.deployments]))
        except Exception as exc:  # noqa: BLE001
            out[index] = _failed(display, exc)
    decided: list[tuple[int, str, Any, list[Any]]] = []
    for index, display, source, inputs in checked:
        try:
            decided.append((index, display, source, [_as_dict(_decided(policy, item)) for item in inputs]))
        except Exception as exc:  # noqa: BLE001
            out[index] = _failed(display, exc)
    for index, display, source, decisions in decided:
        try:
            entries = [Entry(d if keep or d.document is None else d.without_document(), decision,
                             input_digest(d.document) if d.document is not None else None)
                       for d, decision in zip(source.deployments, decisions)]
            out[index] = FileResult(display, source.format, len(entries), source.problems, source.skipped,
                                    source.notes), entries
        except Exception as exc:  # noqa: BLE001
            out[index] = _failed(display, exc)
    return out


_WORKER: dict[str, Any] = {}


def _worker_init(rules: str | None, settings: _Settings) -> None:
    policy = load_policy(rules)
    _WORKER.update(policy=policy, settings=settings)


def _worker_chunk(chunk: list[tuple[str, str, bool]]) -> list[tuple[FileResult, list[Entry]]]:
    return _examine_all(_WORKER["policy"], chunk, _WORKER["settings"])


def _examine_all(policy: Any, files: list[tuple[str, str, bool]], settings: _Settings,
                 progress: Callable[[int], None] | None = None) -> list[tuple[FileResult, list[Entry]]]:
    """Examine files in order. The cyclic garbage collector is paused
    meanwhile: the results are kept anyway, and its full passes over them
    cost a third of an audit's time; whatever cycles the files made are
    collected when it resumes."""
    paused = gc.isenabled()
    gc.disable()
    try:
        results = []
        for start in range(0, len(files), _BATCH):
            batch = files[start:start + _BATCH]
            results += _examine_batch(policy, batch, settings)
            if progress:
                progress(len(batch))
        return results
    finally:
        if paused:
            gc.enable()


def audit(paths: Sequence[str], *, rules: str | None = None, jobs: int = 1, config_roots: Sequence[str] = (),
          limits: SourceLimits = DEFAULT_SOURCE_LIMITS,
          progress: Callable[[int, int], None] | None = None, documents: bool = True,
          policy: Any = None, prerender: bool = False) -> AuditReport:
    """Audit every deployment under ``paths`` with the rules in ``rules``
    (None: the bundled rules), using ``jobs`` processes.

    ``config_roots`` are further directories ``--config`` files may be read
    from. ``progress(done, total)`` is called as files complete.
    ``documents=False`` leaves each entry's ``deployment.document`` None once
    it is decided and digested (a report never shows documents): an audit
    of a large fleet then holds, and sends between processes, far less.
    ``policy``, instead of ``rules``: a policy already loaded to audit with
    (its memos, warm from earlier audits or decisions, serve this one); the
    audit leaves it open for the caller to close. Where workers must be
    spawned rather than forked, each loads the rules again from
    ``policy.source``. ``prerender=True``: the report will be written as
    JSON (report.write), and forked workers render their deployments' text
    as they examine the files, rather than one process rendering it all at
    the end. Raises :class:`AuditError` for a missing path or a closed
    policy and :class:`PolicyError` for invalid rules; nothing in the files
    makes it raise.
    """
    if jobs < 1:
        raise AuditError([Problem("audit.jobs", f"must be at least 1, got {jobs}", file="--jobs")])
    own = policy is None
    if own:
        policy = load_policy(rules)
    elif rules is not None:
        raise AuditError([Problem("audit.policy", "give the rules or a loaded policy, not both", file="rules")])
    elif policy.closed:
        raise AuditError([Problem("audit.policy", "the policy was closed", file="policy")])
    else:
        rules = None if policy.source == "bundled" else policy.source  # for spawned workers
    results: list[tuple[FileResult, list[Entry]]] = []
    tally = rendered = None
    try:
        files, skipped = _walk(paths)
        settings = _Settings(_roots(paths, config_roots), limits, documents)
        total = len(files)
        # One fleet, its collector paused while files are examined: the
        # memos may hold a process's share of a large fleet (forked workers
        # inherit the bounds, spawned ones widen their own).
        if jobs == 1 or total < 2:
            counter = _Counter(total, progress)
            results = _examine_all(policy, files, settings, counter if progress else None)
        elif _forkable():
            results, tally, rendered = _forked(policy, files, jobs, settings, progress, prerender)
        elif _spawnable():
            results = _parallel(policy, files, rules, jobs, settings, progress)
        else:
            results = _examine_all(policy, files, settings, _Counter(total, progress) if progress else None)
    finally:
        # The report holds the dicts it needs; the audit's policy and its
        # decisions need not outlive it in this module.
        _AS_DICT.clear()
        if own:
            policy.close()
    file_results = [r for r, _ in results] + skipped
    entries = tuple(entry for _, found in results for entry in found)
    return AuditReport(tuple(paths), policy.source, policy.digest, tuple(file_results), entries, tally=tally,
                       _rendered=rendered)


def _forkable() -> bool:
    """Whether workers may be forked: a POSIX fork where this process runs no
    other thread (a fork copies locks held by other threads, held forever).
    The rule runtime is fork-safe (engine/_durable.py takes every runtime's
    lock around a fork, and ../shared/reference/durable-rules.md measured
    forked workers: 0 wrong of 40,000)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _forked(policy: Any, files: list[tuple[str, str, bool]], jobs: int, settings: _Settings,
            progress: Callable[[int, int], None] | None,
            render: bool = False) -> tuple[list[tuple[FileResult, list[Entry]]], dict[str, Any], "_Spool | None"]:
    """``jobs - 1`` forked workers and this process take chunks of files in
    turn from a shared counter. A fork starts at once and inherits the loaded
    policy and its warm memos; each worker appends its results, a chunk at a
    time, to a file of a private temporary directory, and this process reads
    them between its own chunks (what is left to read at the end is then
    about one chunk, not half the fleet's results). Each process also counts
    its own entries for the summary, a chunk at a time (see _counted), and,
    with ``render``, renders their JSON text into its spool (see _Spool)."""
    size = max(1, min(256, len(files) // (jobs * 8) or 1))
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    context = multiprocessing.get_context("fork")
    claimed = context.Value("l", 0)
    counter = _Counter(len(files), progress)
    done: dict[int, list[tuple[FileResult, list[Entry]]]] = {}
    tallies: list[dict[str, Any]] = []
    # Spool 0 is this process's, n + 1 worker n's; opened before the fork.
    try:
        spools = [_Spool.open() for _ in range(jobs)] if render else []
    except OSError:  # no temporary file can be made: report.write renders as ever
        spools = []
    parts: dict[int, tuple[int, int, int] | None] = {}

    def take() -> int:
        with claimed.get_lock():
            index = claimed.value
            claimed.value += 1
        return index

    def child(out: str, ready: Any, number: int) -> None:
        gc.disable()  # the process ends once its results are written
        try:
            with open(out, "wb") as handle:
                # One pickle stream, a record per chunk, then the tally and
                # None (the end): equal decisions are written once. `ready`
                # is how far the file holds whole records.
                pickler = pickle.Pickler(handle, protocol=pickle.HIGHEST_PROTOCOL)
                mine = _tally(())

                def record(item: Any) -> None:
                    pickler.dump(item)
                    handle.flush()
                    ready.value = handle.tell()
                while (index := take()) < len(chunks):
                    results = _examine_all(policy, chunks[index], settings)
                    record((index, results, spools[number].add(number, results) if spools else None))
                    mine = _counted(mine, results)
                record(mine)
                record(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the parent, never as a traceback
            with open(out + ".error", "w", encoding="utf-8") as handle:
                handle.write(f"{type(exc).__name__}: {exc}"[:500])
            os._exit(2)

    def absorb(index: int, results: list[tuple[FileResult, list[Entry]]], part: tuple[int, int, int] | None) -> None:
        # A chunk's results, this process's or a worker's.
        done[index] = results
        parts[index] = part
        counter(len(chunks[index]))

    with tempfile.TemporaryDirectory(prefix="hma-policy-audit-") as private:
        outputs = [(os.path.join(private, f"worker-{n}.pickle"), context.Value("q", 0), n + 1) for n in range(jobs - 1)]
        workers = [context.Process(target=child, args=out, daemon=True) for out in outputs]
        readers = [_WorkerFile(out, ready, absorb, tallies) for out, ready, _ in outputs]
        for worker in workers:
            worker.start()
        own = _tally(())
        # The GC is paused as in _examine_all: reading the workers' results
        # builds as many objects as examining their files did.
        paused = gc.isenabled()
        gc.disable()
        try:
            while (index := take()) < len(chunks):
                results = _examine_all(policy, chunks[index], settings)
                absorb(index, results, spools[0].add(0, results) if spools else None)
                own = _counted(own, results)
                for reader in readers:
                    reader.read()
            tallies.append(own)
            for worker, reader in zip(workers, readers):
                worker.join()
                if worker.exitcode == 0:
                    reader.read()
                if worker.exitcode != 0 or not reader.ended:
                    reason = f"exit status {worker.exitcode}"
                    if os.path.exists(reader.out + ".error"):
                        with open(reader.out + ".error", encoding="utf-8") as handle:
                            reason = handle.read()
                    raise AuditError([Problem("audit.worker", f"a worker process failed ({reason})",
                                              hint="run again with --jobs 1 to find the file", file="--jobs")])
        finally:
            if paused:
                gc.enable()
            for worker in workers:
                worker.join()
            for reader in readers:
                reader.close()
    rendered = None
    if spools:
        order = [parts[index] for index in range(len(chunks))]
        if all(part is not None for part in order):
            rendered = _Spool.joined(spools, order)
        else:  # a spool could not be written (a full disk): report.write renders them
            for spool in spools:
                spool.close()
    return [result for index in range(len(chunks)) for result in done[index]], _merged(tallies), rendered


class _Spool:
    """The JSON text of a forked audit's deployments, rendered by the process
    that examined them, a chunk at a time, as it went (the parent would
    otherwise render it all at the end, with the other CPUs idle). Each
    process writes its own unlinked temporary file, opened before the fork;
    the joined spool lists where each chunk's text is, in the report's
    order, and report.write() copies it. Not kept on the disk: the files
    are gone when the report is (or the process, which a command ends
    without freeing anything), and a pickled or copied report has none."""

    def __init__(self, handle: Any, files: list[Any] | None = None, parts: list[Any] | None = None):
        self.handle, self.files, self.parts, self.size = handle, files, parts, 0

    @classmethod
    def open(cls) -> "_Spool":
        return cls(tempfile.TemporaryFile(prefix="hma-policy-report-"))

    @classmethod
    def joined(cls, spools: list["_Spool"], parts: list[Any]) -> "_Spool":
        return cls(None, [spool.handle for spool in spools], parts)

    def add(self, number: int, results: list[tuple[FileResult, list[Entry]]]) -> tuple[int, int, int] | None:
        """Render a chunk's deployments to this spool: (spool number, offset,
        length) of the text, or None where it could not be written."""
        from .report import _deployments_json

        remedies: dict[int, str | None] = {}  # by decision dict: the chunk's entries hold them meanwhile
        items = [entry._to_dict(remedies) for _, found in results for entry in found]
        text = _deployments_json(items) if items else memoryview(b"")
        offset = self.size
        try:
            written = 0
            while written < len(text):
                count = os.pwrite(self.handle.fileno(), text[written:], offset + written)
                if count <= 0:
                    return None
                written += count
        except OSError:
            return None
        self.size += len(text)
        return number, offset, len(text)

    def __iter__(self) -> Iterator[bytes]:
        for number, offset, length in self.parts or ():
            fd, chunks = self.files[number].fileno(), []
            while length:
                chunk = os.pread(fd, length, offset)
                if not chunk:
                    raise OSError(f"a report spool ended early at byte {offset}")
                chunks.append(chunk)
                offset, length = offset + len(chunk), length - len(chunk)
            yield b"".join(chunks)

    def close(self) -> None:
        for handle in [self.handle] if self.handle is not None else self.files or ():
            handle.close()

    def __reduce__(self) -> tuple:
        return (_no_spool, ())


def _no_spool() -> None:
    return None


class _WorkerFile:
    """The reading side of a forked worker's results file (see _forked):
    whole records only, up to how far the worker says it has written
    (``ready``); each chunk's results go to ``absorb``, the worker's tally
    to ``tallies``. A module-level class: one defined in _forked would hold
    its results in a reference cycle, kept until a collection."""

    def __init__(self, out: str, ready: Any, absorb: Callable[..., None], tallies: list[dict[str, Any]]):
        self.out, self.ready, self.absorb, self.tallies = out, ready, absorb, tallies
        self.handle: Any = None
        self.unpickler: Any = None
        self.ended = False

    def read(self) -> None:
        if self.ended:
            return
        if self.handle is None:
            if not self.ready.value:
                return
            self.handle = open(self.out, "rb")  # written by this audit's own worker, in a private directory
            self.unpickler = pickle.Unpickler(self.handle)
        while self.handle.tell() < self.ready.value:
            item = self.unpickler.load()
            if item is None:
                self.ended = True
                return
            if isinstance(item, dict):  # the worker's tally, after its chunks
                self.tallies.append(item)
                continue
            self.absorb(*item)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.unpickler = None  # its memo holds every object read


def _spawnable() -> bool:
    """Whether spawned workers can start: a spawned process re-imports the
    parent's main script, which it cannot when that is standard input
    (`python - < script`). Then the files are examined in this process."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return main is None or os.path.exists(main)


class _Counter:
    """Files done so far, reported as progress(done, total)."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None):
        self.total, self.done, self.progress = total, 0, progress

    def __call__(self, count: int) -> None:
        self.done += count
        if self.progress:
            self.progress(self.done, self.total)


def _parallel(policy: Any, files: list[tuple[str, str, bool]], rules: str | None, jobs: int, settings: _Settings,
              progress: Callable[[int, int], None] | None) -> list[tuple[FileResult, list[Entry]]]:
    """``jobs - 1`` worker processes take chunks from the front, this process
    takes them from the back (it needs no start-up, and would otherwise wait
    idle), until they meet."""
    # Imported here: only spawned workers need it (about 5 ms of every audit's start-up otherwise).
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Small chunks keep every process busy to the end; large enough that pickling is not the cost.
    size = max(1, min(256, len(files) // (jobs * 8) or 1))
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    done_chunks: dict[int, list[tuple[FileResult, list[Entry]]]] = {}
    counter = _Counter(len(files), progress)
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=max(1, jobs - 1), mp_context=context, initializer=_worker_init,
                                 initargs=(rules, settings)) as pool:
            futures = {pool.submit(_worker_chunk, chunk): index for index, chunk in enumerate(chunks)}
            by_index = {index: future for future, index in futures.items()}
            for index in range(len(chunks) - 1, -1, -1):
                if not by_index[index].cancel():
                    break  # a worker has it: the rest are taken too
                done_chunks[index] = _examine_all(policy, chunks[index], settings)
                counter(len(chunks[index]))
            for future in as_completed([f for f, i in futures.items() if i not in done_chunks]):
                index = futures[future]
                done_chunks[index] = future.result()
                counter(len(chunks[index]))
    except HMAPolicyError:
        raise
    except Exception as exc:  # noqa: BLE001 - a worker process died (killed, out of memory)
        raise AuditError([Problem("audit.worker", f"a worker process failed: {type(exc).__name__}: {exc}"[:500],
                                  hint="run again with --jobs 1 to find the file", file="--jobs")]) from None
    return [result for index in range(len(chunks)) for result in done_chunks[index]]


class ProgressBar:
    """A one-line progress bar on a terminal: ``progress(done, total)``.
    Only for a TTY (:func:`progress_bar` decides); redrawn at most ten times a
    second, and erased at the end so the report is not interleaved with it."""

    def __init__(self, stream: Any, width: int = 30):
        self.stream = stream
        self.width = width
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} files")
        if done >= total:
            self.stream.write("\r\x1b[K")
        self.stream.flush()


def progress_bar(stream: Any) -> ProgressBar | None:
    """A progress bar on ``stream`` when it is a terminal, else None."""
    try:
        return ProgressBar(stream) if stream.isatty() else None
    except (AttributeError, ValueError):  # a closed or unusual stream
        return None
