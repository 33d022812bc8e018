"""Run an audit: walk the paths, find each vLLM deployment in each file
(``sources``), decide it, and gather the report (``model``).

Files are examined in chunks, each chunk a stage at a time (read every file,
validate every deployment, decide, digest): a stage's code stays hot over
the chunk. With ``jobs > 1`` the chunks go to the standard library's
process pool, whose ordered ``map`` returns each chunk's results in the
walk's order, with the chunk's counts and, for a JSON report, the text of
its deployments rendered by the process that decided them. The report is
the same for every ``jobs``. The cyclic garbage collector is paused while files
are examined: the results are kept anyway, and its full passes over them
would cost a third of the time.
"""

from __future__ import annotations

import gc
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..core.decision import Decision
from ..core.errors import HMAPolicyError, InputError, Problem
from ..core.optionlist import field_refusal, refusal, refused_everywhere
from ..core.options import FLAG_OPTIONS
from ..core.policies import Hint, PolicySet
from ..core.policy import Policy
from .declog_format import input_digest
from .model import FAIL_ON, AuditError, AuditReport, Entry, FileResult, Tally
from .report import deployments_json
from .unknowns import agreement, settled, whatever
from .sources import (DEFAULT_SOURCE_LIMITS, EMPTY, Deployment, SourceLimits, forget_objects, no_source_by_name,
                      read_source, source_format)
from .walk import LINK, inside, roots, walk

__all__ = ["audit", "AuditReport", "AuditError", "Entry", "FileResult", "FAIL_ON", "progress_bar"]

# The engine fields of the hybrid KV cache manager's flags.
_FLAG_FIELDS = frozenset(field for field, _ in FLAG_OPTIONS.values())

# Files a process examines a stage at a time, and at most what one chunk of
# a parallel audit holds: enough that a stage's code stays hot and a chunk's
# results are worth sending, few enough that every process has work to the end.
CHUNK = 256


class Settings(NamedTuple):
    """What every process of an audit examines files with."""

    roots: tuple[Path, ...]  # where links and --config files may lead
    limits: SourceLimits
    documents: bool  # keep each deployment's document in its entry (the decision log shows them)
    prerender: bool  # render each chunk's deployments as the JSON report holds them
    known: tuple[str, ...]  # connector names whose mention in a file with no launch is noted
    named: frozenset[str] = frozenset()  # the files named on the command line (an empty one is a problem)
    entries: bool = True  # send each deployment's entry back (else only its tally and rendered text)


class Chunk(NamedTuple):
    """What examining a chunk of files gave, in the walk's order."""

    files: list[FileResult]
    entries: list[Entry]
    tally: Tally
    rendered: bytes | None


def audit(paths: Sequence[str], *, rules: str | None = None, jobs: int = 1, config_roots: Sequence[str] = (),
          limits: SourceLimits = DEFAULT_SOURCE_LIMITS, progress: Callable[[int, int], None] | None = None,
          documents: bool = True, policy: Policy | PolicySet | None = None, prerender: bool = False,
          entries: bool = True) -> AuditReport:
    """Audit every deployment under ``paths`` with the rules in ``rules``
    (None: the bundled rules), using ``jobs`` processes. Each deployment is
    decided for the vLLM release it names (vllm_version, or what deploys
    it: an image tag, a pip pin, a directive), else the newest.

    ``config_roots`` are further directories ``--config`` files may be read
    from. ``progress(done, total)`` is called as files complete.
    ``documents=False`` leaves each entry's ``deployment.document`` None once
    it is decided and digested (a report never shows documents): an audit of
    a large fleet then holds, and sends between processes, far less.
    ``policy``, instead of ``rules``: a PolicySet already loaded to audit
    with, or a Policy that then decides every deployment (for its release);
    the audit leaves it open for the caller to close (spawned workers load
    the rules again). ``prerender=True``: the report
    will be written as JSON (report.write), and each process renders the
    deployments it decided as it goes; with ``entries=False`` as well, the
    report keeps no entries, only their counts and that text (what a JSON
    report without a decision log needs): the processes send a third as
    much. Raises :class:`AuditError` for a missing path or a closed policy
    (or ``entries=False`` without prerender) and :class:`PolicyError` for
    invalid rules; nothing in the files makes it raise.
    """
    if jobs < 1:
        raise AuditError([Problem("audit.jobs", f"must be at least 1, got {jobs}", file="--jobs")])
    if policy is not None and rules is not None:
        raise AuditError([Problem("audit.policy", "give the rules or a loaded policy, not both", file="rules")])
    if policy is not None and policy.closed:
        raise AuditError([Problem("audit.policy", "the policy was closed", file="policy")])
    files, skipped = walk(paths)
    forget_objects()  # the companions an earlier audit in this process found (the files may have changed)
    chunks = [files[i:i + CHUNK] for i in range(0, len(files), CHUNK)]
    own = policy is None
    policies = PolicySet(rules) if policy is None else policy if isinstance(policy, PolicySet) else PolicySet.wrap(policy)
    if not entries and not prerender:
        raise AuditError([Problem("audit.entries", "a report without entries needs prerender=True", file="entries")])
    settings = Settings(roots(paths, config_roots), limits, documents, prerender, policies.registered_names,
                        frozenset(str(Path(p)) for p in paths if not Path(p).is_dir()), entries)
    done = 0
    parts: list[Chunk] = []
    paused = gc.isenabled()
    gc.disable()
    try:
        for part in _examined(policies, chunks, settings, jobs):
            parts.append(part)
            done += len(part.files)
            if progress:
                progress(done, len(files))
    finally:
        if paused:
            gc.enable()
        if own:
            policies.close()
    tally = Tally.total(part.tally for part in parts)
    texts = tuple(p.rendered for p in parts if p.rendered is not None)
    rendered = texts if prerender and len(texts) == len(parts) else None
    return AuditReport(tuple(paths), policies.source, policies.digest,
                       tuple(f for p in parts for f in p.files) + tuple(skipped),
                       tuple(e for p in parts for e in p.entries), tally=tally, rendered=rendered)


def _examined(policy: PolicySet, chunks: list[list[tuple[str, str, bool]]], settings: Settings, jobs: int) -> Any:
    """Each chunk examined, in order: here, or by a pool of ``jobs`` processes."""
    if jobs == 1 or len(chunks) < 2:
        for chunk in chunks:
            yield examine(policy, chunk, settings)
        return
    # Forked workers start at once and inherit the loaded policy; a fork
    # copies locks held by other threads, held forever, so a process running
    # threads spawns them instead (each loads the rules again).
    forked = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    if not forked and not _spawnable():
        for chunk in chunks:
            yield examine(policy, chunk, settings)
        return
    context = multiprocessing.get_context("fork" if forked else "spawn")
    start = (policy if forked else policy.spec, settings)
    try:
        # The executor's map is ordered as imap is, and unlike a Pool it
        # notices a worker that died (killed, out of memory) and says so.
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=start) as pool:
            yield from pool.map(_examine_in_worker, chunks)
    except HMAPolicyError:
        raise
    except Exception as exc:  # noqa: BLE001 - a worker process died (killed, out of memory)
        raise AuditError([Problem("audit.worker", f"a worker process failed: {type(exc).__name__}: {exc}"[:500],
                                  hint="run again with --jobs 1 to find the file", file="--jobs")]) from None


_WORKER: dict[str, Any] = {}


def _start_worker(policy: PolicySet | tuple[Any, ...], settings: Settings) -> None:
    # A forked worker is given the parent's loaded policies; a spawned one, what to load them from.
    _WORKER["policy"] = policy if isinstance(policy, PolicySet) else PolicySet(*policy[:1], release=policy[1], source=policy[2])
    _WORKER["settings"] = settings
    gc.disable()  # the worker ends with the audit


def _examine_in_worker(chunk: list[tuple[str, str, bool]]) -> Chunk:
    return examine(_WORKER["policy"], chunk, _WORKER["settings"])


def _spawnable() -> bool:
    """Whether spawned workers can start: a spawned process re-imports the
    parent's main script, which it cannot when that is standard input."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return main is None or os.path.exists(main)


def examine(policy: PolicySet, files: list[tuple[str, str, bool]], settings: Settings) -> Chunk:
    """Read and decide files (display path, path, plain), a stage at a time.
    Never raises: a fault in any stage becomes a problem of that file, which
    then has no deployments."""
    out: list[tuple[FileResult, list[Entry]] | None] = [None] * len(files)
    read = []
    for index, (display, name, plain) in enumerate(files):
        out[index], found = _guarded(display, lambda: _read(display, name, plain, settings))
        if isinstance(found, FileResult):  # not read
            out[index] = found, []
        elif found is not None:
            read.append((index, display, found))
    prepared = []
    for index, display, found in read:
        out[index], checked = _guarded(display, lambda: [_prepare(policy, d) for d in found.deployments])
        if checked is not None:
            prepared.append((index, display, found, checked))
    decided = []
    for index, display, found, checked in prepared:
        out[index], decisions = _guarded(display, lambda: [_decide(policy, item, d.release)
                                                           for item, d in zip(checked, found.deployments)])
        if decisions is not None:
            decided.append((index, display, found, decisions))
    for index, display, found, decisions in decided:
        failure, filed = _guarded(display, lambda: _filed(policy, found, decisions, settings))
        out[index] = failure or filed
    results = [r for r in out if r is not None]
    entries = [e for _, found in results for e in found]
    rendered = bytes(deployments_json([e.to_dict() for e in entries])) if settings.prerender else None
    return Chunk([r for r, _ in results], entries if settings.entries else [], Tally.of(entries), rendered)


def _guarded(display: str, stage: Callable[[], Any]) -> tuple[Any, Any]:
    """(None, what ``stage`` gives), or (the file's failure, None)."""
    try:
        return None, stage()
    except Exception as exc:  # noqa: BLE001 - one file must never stop the audit of the others
        if isinstance(exc, RuntimeError) and "loop" in str(exc).lower():  # Path.resolve on a link that loops
            message = f"`{display}` is a symbolic link that loops back on itself ({exc}); it is not read"
            return (FileResult(display, None, 0, (Problem("source.link_loop", message, file=display),)), []), None
        message = f"the audit of `{display}` failed: {type(exc).__name__}: {exc}"[:500]
        return (FileResult(display, None, 0, (Problem("audit.internal", message, file=display),)), []), None


def _read(display: str, name: str, plain: bool, settings: Settings) -> Any:
    """The file's deployments (a SourceFile), or a FileResult saying why it is not read."""
    if not plain and Path(name).is_symlink():
        target = Path(name).resolve(strict=False)
        if not target.exists():  # a link to nothing (an absolute path of another machine): nothing to read
            return FileResult(display, None, 0, skipped=f"{LINK}`{os.readlink(name)}`, which does not exist")
        # A link to a systemd unit enables it (`multi-user.target.wants/x.service`, an image's /etc tree): the
        # unit is read where it is, if that is in the audited paths, not again under the link's name.
        if source_format(name) == "systemd":
            where = "in the audited paths, read there" if inside(target, settings.roots) else \
                "outside the audited paths, not read"
            return FileResult(display, None, 0, skipped=f"{LINK}`{os.readlink(name)}`, a systemd unit (an "
                                                        f"enablement link): the unit is {where}")
        # A name that says the file is no source (a model's weights) is skipped unread wherever it leads.
        if not inside(target, settings.roots) and not no_source_by_name(name):
            return FileResult(display, None, 0, (Problem("source.outside_roots", f"`{display}` links to a file "
                                                         "outside the audited paths; it is not read", file=display),))
    # The path stays a string, and the listing already said whether the file is regular:
    # a path object and a stat per file cost about what reading a small file does.
    found = read_source(name, display=display, roots=settings.roots, limits=settings.limits, known=settings.known,
                        regular=plain)
    if found.skipped == EMPTY and name in settings.named:  # given to decide, as `hma-policy decide FILE` would be
        return FileResult(display, None, 0, (Problem("input.empty", f"`{display}` {EMPTY}", file=display,
                                                     hint="give a deployment document; `{}` is a deployment "
                                                          "without a connector"),))
    return found


def _prepare(policy: PolicySet, deployment: Deployment) -> Any:
    """What the decide stage needs: a prepared document, or the decision
    already known (a source problem or an invalid document)."""
    # The release its source names checks it, as it decides it (an older one may have other fields).
    hint = _hint(policy, deployment.release)
    if deployment.problems:  # decided here: few deployments have them
        return settled(policy, deployment, hint) or policy.refused([_located(p) for p in deployment.problems], None, hint)
    predating = policy.predating(deployment.document, hint)  # a release older than the rules: nothing to read
    if predating is not None:
        return predating
    try:
        return policy.prepare(deployment.document, hint=hint)
    except InputError as exc:
        return policy.refused(exc.problems, deployment.document, hint)


def _decide(policy: PolicySet, checked: Any, release: Any) -> Decision:
    """The decision of a prepared document, with the policy of its release
    (``release``: the ReleaseHint its source read, or None)."""
    if isinstance(checked, Decision):
        return checked
    hint = _hint(policy, release)
    try:
        return policy.decide_prepared(checked, hint)
    except InputError as exc:
        return policy.refused(exc.problems, checked.document, hint)


def _filed(policy: PolicySet, found: Any, decisions: list[Decision], settings: Settings) -> tuple[FileResult, list[Entry]]:
    # Entries that are not kept (only their report text and counts are) go with their chunk, documents and all.
    lean = not settings.documents and settings.entries
    deployments = [_noted(policy, _options_noted(policy, _release_noted(policy, d, decision), decision), decision)
                   for d, decision in zip(found.deployments, decisions)]
    entries = [Entry(d.without_document() if lean and (d.document is not None or d.paths or d.stand_in is not None)
                     else d, decision.to_dict(),
                     input_digest(d.document) if d.document is not None else None, decision.remediation)
               for d, decision in zip(deployments, decisions)]
    return FileResult(found.file, found.format, len(entries), found.problems, found.skipped, found.notes), entries


def _noted(policy: PolicySet, deployment: Deployment, decision: Decision) -> Deployment:
    """The deployment, its unknown values noted where they do not change its
    decision (a decision made of them is never ``source.unresolved``): the
    same on each path of the script (paths), or with a stand-in for each
    (stand_in: audit.unknowns). So the report still shows them."""
    settled = (deployment.paths or deployment.stand_in is not None) and deployment.problems and \
        not any(error.code == "source.unresolved" for error in decision.errors)
    if not settled:
        return deployment
    hint = _hint(policy, deployment.release)

    def why(path: str) -> str:
        return agreement(policy, deployment, hint) if deployment.paths else whatever(policy, deployment, hint, path)

    notes = tuple(Problem("source.unresolved_unused", f"{p.message}; {why(p.path)}", p.path, file=p.file, line=p.line)
                  for p in deployment.problems)
    return deployment.replace(notes=deployment.notes + notes, stand_in=None, paths=(), stood_paths=())


def _release_noted(policy: PolicySet, deployment: Deployment, decision: Decision) -> Deployment:
    """The deployment, noted where what deploys it names a release these
    rules do not hold, so that another release decided it (the default):
    the decision's release line says so, and the note lets a report's
    reader find every such launch by its code."""
    hint = _hint(policy, deployment.release)
    named = deployment.document.get("vllm_version") if deployment.document is not None else None
    if hint is not None and hint.version is None and deployment.release is not None and deployment.release.allowed \
            and named is None:  # (a range whose release the rules cannot tell: as a release not known is noted)
        return deployment.replace(notes=deployment.notes + (Problem(
            "source.release_unknown", f"the vLLM release is not known: {hint.origin}", file=deployment.file,
            line=deployment.line),))
    # A document's own release (vllm_version) decides it; a decision names the release that made it
    # (the one named, where the rules decide a release older than theirs: PolicySet.predating).
    if hint is None or named is not None or decision.vllm is None or policy.unheld(hint) is None \
            or _as_named(decision, hint):
        return deployment
    known = policy.releases
    span = known[0] if len(known) == 1 else f"{known[0]} to {known[-1]}"
    public, _, local = str(hint.version).partition("+")
    # (a local version, `0.10.1+gptoss`: someone's own build of a release, which its number may fall among the rules')
    named_as = f"vLLM {hint.version}, a build of {public} of its own (`+{local}`)," if local else f"vLLM {hint.version},"
    note = Problem("source.release_not_held", f"{hint.origin} names {named_as} not a release these rules "
                   f"decide for ({span}); decided as vLLM {decision.vllm.release}", file=deployment.file, line=deployment.line)
    return deployment.replace(notes=deployment.notes + (note,))


def _options_noted(policy: PolicySet, deployment: Deployment, decision: Decision) -> Deployment:
    """The deployment, noted for each option its command line gives that
    the release deciding it refuses: vLLM's argparse exits before the engine
    starts, whatever the decision says of HMA. Only where something names
    that release (the document's vllm_version, what deploys it, the
    auditor's --vllm-version): the default release may not be the one that
    runs it, so there only an option no bundled release accepts is noted
    (a misspelt key of a config file), unless what deploys it names a
    release the rules do not hold. A note, not the outcome, since what the
    decision answers is how the release runs the launch's KV configuration."""
    if decision.vllm is None:
        return deployment
    named = _release_named(policy, deployment)
    hint = _hint(policy, deployment.release)
    if not named and hint is not None and hint.version is not None:  # a release these rules do not hold
        return _older_options_noted(policy, deployment, decision, hint)
    if not deployment.options:
        return deployment
    notes = []
    for option, origin in dict.fromkeys(deployment.options):
        if option.endswith("="):  # a Python call's keyword (sources/pyengine.py): an engine field of the release
            refused = field_refusal(decision.vllm.release, option[:-1]) if named else None
            if refused is not None:
                notes.append(Problem("source.option_not_in_release", f"{refused.message} ({origin}): the call raises "
                                     "a TypeError, and the launch does not start", hint=refused.hint,
                                     file=deployment.file, line=deployment.line))
            continue
        refused = refusal(decision.vllm.release, option) if named else refused_everywhere(option)
        if refused is not None:
            # (a plugin may add options to vLLM's parser: Arctic Inference's, through vllm.general_plugins)
            unless = " unless a vLLM plugin adds the option" if named else \
                " unless a release outside them runs it, or a vLLM plugin adds the option"
            notes.append(Problem("source.option_not_in_release", f"{refused.message} ({origin}): the launch does "
                                 f"not start{unless}", hint=refused.hint, file=deployment.file, line=deployment.line))
    return deployment.replace(notes=deployment.notes + tuple(notes)) if notes else deployment


def _older_options_noted(policy: PolicySet, deployment: Deployment, decision: Decision, hint: Hint) -> Deployment:
    """A launch on a release older than the rules' (their `before` rule
    decided it, as the release named): noted for each flag of the hybrid
    KV cache manager its command line gives, which no release before the
    oldest the rules hold has, so that its argparse exits. Other options
    may have come and gone before: nothing is said of them."""
    if decision.vllm is None or not _as_named(decision, hint):  # a newer release, decided as the default
        return deployment
    first = policy.releases[0]
    notes = []
    for _, origin in deployment.origins:
        where, _, option = origin.rpartition(": ")
        if option in FLAG_OPTIONS:
            notes.append(Problem("source.option_not_in_release", f"vLLM {decision.vllm.release} rejects the "
                                 f"unrecognized argument `{option}` ({where}): it came with the hybrid KV cache "
                                 f"manager in {first}, and the launch does not start",
                                 hint="drop the option, or run vLLM " + first + " or later",
                                 file=deployment.file, line=deployment.line))
        elif option.endswith("=") and option[:-1] in _FLAG_FIELDS:  # a Python call's keyword (sources/pyengine.py)
            notes.append(Problem("source.option_not_in_release", f"vLLM {decision.vllm.release}'s engine arguments "
                                 f"have no field `{option[:-1]}` ({where}): it came with the hybrid KV cache manager "
                                 f"in {first}, and the call raises a TypeError, so the launch does not start",
                                 hint="drop the argument, or run vLLM " + first + " or later",
                                 file=deployment.file, line=deployment.line))
    return deployment.replace(notes=deployment.notes + tuple(notes)) if notes else deployment


def _as_named(decision: Decision, hint: Hint) -> bool:
    """Whether ``decision`` was made as the release ``hint`` names (not the
    default standing in for one the rules do not hold): for a release older
    than theirs, their `before` rule's decision (PolicySet.predating)."""
    return decision.vllm is not None and decision.vllm.source == hint.origin


def _release_named(policy: PolicySet, deployment: Deployment) -> bool:
    """Whether the release deciding ``deployment`` is one something names,
    not the default standing in for a release nothing says."""
    hint = _hint(policy, deployment.release)
    return (policy.named_release is not None
            or (deployment.document is not None and deployment.document.get("vllm_version") is not None)
            or (hint is not None and hint.version is not None and policy.unheld(hint) is None))


def _hint(policy: PolicySet, release: Any) -> Hint | None:
    """The policy set's hint of the release a source read (a ReleaseHint, or
    None): for a range the files allow (`vllm<=0.6.3`), the newest release
    the rules know that it allows, which pip installs."""
    if release is None:
        return None
    if release.version is None and release.allowed:
        newest = policy.newest_allowed(release.allowed)
        if newest is not None:
            return Hint(newest, f"{release.origin}: {newest}, the newest release it allows, as pip installs it")
        return Hint(None, f"{release.origin}: which release it installs is not one these rules can tell")
    return Hint(release.version, release.origin)


def _located(problem: Problem) -> Problem:
    """A source problem as a decision error: the line goes into the message
    (a decision's errors carry a JSON Pointer, not a line)."""
    message = f"line {problem.line}: {problem.message}" if problem.line else problem.message
    return Problem(problem.code, message, problem.path, problem.hint)


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
