"""Isolation mode: decisions in a long-lived worker process.

durable-rules' C core has crashed the process on ordinary data before
(../shared/reference/durable-rules.md §3); the engine only ever posts checked
facts to it, but "never crash the host" should not rest on every such check
being complete. :class:`IsolatedPolicy` keeps the rule runtime in a worker
process: a worker that dies (SIGSEGV, SIGKILL, an abort in C) or hangs past
the timeout turns the call in flight into an :class:`IsolationError`, and the
next call starts a fresh worker.

>>> from hma_policy.isolation import IsolatedPolicy
>>> with IsolatedPolicy() as policy:                       # doctest: +SKIP
...     policy.decide({"kv_transfer_config": None}).outcome
'enabled'

The caller's document is read and checked in the caller's process (pure
Python: ``prepare`` with its limits), so the same InputError comes back as
from :func:`hma_policy.decide`; only the validated document, as JSON, crosses
to the worker, and only JSON comes back (nothing is unpickled). The Decision
is rebuilt field for field, so it equals the one an in-process Policy gives.
A request that crashed the worker is not retried: the same document might
crash it again.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import weakref
from dataclasses import fields
from pathlib import Path
from typing import Any

from .core.decision import ConnectorVerdict, Decision, Message, Visit, VllmRelease
from .core.input import DEFAULT_LIMITS, Limits, prepare
from .core.errors import HMAPolicyError, InputError, PolicyError, Problem

__all__ = ["IsolatedPolicy", "IsolationError"]

_HEADER = struct.Struct(">I")
_MAX_FRAME = 512 * 1024 * 1024


class IsolationError(HMAPolicyError):
    """The worker process died or did not answer in time (code ``engine.worker_died``
    or ``engine.worker_timeout``); the next call uses a new worker."""


# -- the wire: length-prefixed JSON frames ------------------------------------


def _write(stream: Any, payload: Any) -> None:
    data = json.dumps(payload, ensure_ascii=True, allow_nan=True).encode("ascii")  # encoded before any byte is sent
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: Any) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the stream closed")
    (size,) = _HEADER.unpack(header)
    if size > _MAX_FRAME:
        raise EOFError("oversized frame")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream closed mid-frame")
    return json.loads(data)


def _problems(items: list[dict[str, Any]]) -> list[Problem]:
    return [Problem(**item) for item in items]


def _problem_dicts(problems: Any) -> list[dict[str, Any]]:
    return [{f.name: getattr(p, f.name) for f in fields(Problem)} for p in problems]


# -- Decision <-> JSON, losslessly (to_dict drops rule ids, depths and steps) --


def _tagged(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"tuple": [_tagged(v) for v in value]}
    return value


def _untagged(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(_untagged(v) for v in value["tuple"])
    return value


def _record(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


_DECISION_FIELDS = ("outcome", "hma_enabled", "trace", "policy_digest", "reasons", "remediation")


def encode_decision(decision: Decision) -> dict[str, Any]:
    """A Decision as JSON data, losslessly: to_dict() drops rule ids, depths and the trail."""
    out: dict[str, Any] = {name: getattr(decision, name) for name in _DECISION_FIELDS}
    out["trace"] = list(decision.trace)
    out["reasons"] = list(decision.reasons)
    out["errors"] = [_record(m) for m in decision.errors]
    out["warnings"] = [_record(m) for m in decision.warnings]
    out["connectors"] = [_record(c) for c in decision.connectors]
    out["trail"] = [_tagged(tuple(visit)) for visit in decision.trail]
    out["vllm"] = None if decision.vllm is None else list(decision.vllm)
    return out


def decode_decision(data: dict[str, Any]) -> Decision:
    values: dict[str, Any] = {name: data[name] for name in _DECISION_FIELDS}
    values["trace"] = tuple(data["trace"])
    values["reasons"] = tuple(data["reasons"])
    values["errors"] = tuple(Message(**m) for m in data["errors"])
    values["warnings"] = tuple(Message(**m) for m in data["warnings"])
    values["connectors"] = tuple(ConnectorVerdict(**c) for c in data["connectors"])
    values["trail"] = tuple(Visit(*_untagged(visit)) for visit in data["trail"])
    values["vllm"] = None if data["vllm"] is None else VllmRelease(*data["vllm"])
    return Decision(**values)


# -- the worker ----------------------------------------------------------------


def _serve() -> None:
    """The worker's loop: one request frame in, one answer frame out."""
    from .core.policy import load_policy  # imported here: the parent never loads the rule runtime

    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    # Anything else printing to stdout must not corrupt the frames.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        spec = _read(requests)
        policy = load_policy(spec["rules_dir"], release=spec["release"], memo=spec["memo"])
    except (PolicyError, InputError) as exc:  # broken rules, or a release they do not hold
        _write(answers, {"policy_error": _problem_dicts(exc.problems)})
        return
    _write(answers, {"ready": policy.digest, "source": policy.source})
    while True:
        try:
            request = _read(requests)
        except EOFError:
            return
        answer: dict[str, Any]
        try:
            limits = Limits(**request["limits"])
            answer = {"decision": encode_decision(policy.decide(request["document"], limits=limits))}
        except InputError as exc:
            answer = {"input_error": _problem_dicts(exc.problems)}
        except HMAPolicyError as exc:
            answer = {"fault": _problem_dicts(exc.problems)}
        except Exception as exc:  # noqa: BLE001 - reported to the caller, the worker lives on
            answer = {"fault": [{"code": "engine.fault", "message": f"{type(exc).__name__}: {exc}"[:500], "path": ""}]}
        try:
            _write(answers, answer)
        except (TypeError, ValueError) as exc:  # not JSON data: report it rather than die mid-frame
            _write(answers, {"fault": [{"code": "engine.fault", "message": f"unencodable answer: {exc}"[:500], "path": ""}]})


def _describe(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    def __init__(self, rules_dir: str | None, release: str | None, memo: bool):
        # The same interpreter, hence the same installed hma_policy.
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from hma_policy.isolation import _serve; _serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        self.pid = self.process.pid
        _write(self.process.stdin, {"rules_dir": rules_dir, "release": release, "memo": memo})

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:  # (both are pipes: Popen was given PIPE for each)
                    stream.close()
            except OSError:
                pass


def _finalize(holder: dict[str, _Worker | None]) -> None:
    worker = holder.get("worker")
    if worker is not None:
        worker.kill()


class IsolatedPolicy:
    """A policy whose rule runtime lives in a worker process: the rules in
    ``rules_dir`` for the vLLM ``release``, as :func:`load_policy` takes them.

    ``decide`` returns the same :class:`Decision` as :meth:`Policy.decide` and
    raises the same :class:`InputError`; a worker that crashes or exceeds
    ``timeout`` seconds raises :class:`IsolationError` for that call, and the
    next call starts a new worker. Safe to share between threads (calls are
    serialised: the worker answers one request at a time).
    """

    def __init__(self, rules_dir: str | Path | None = None, *, release: str | None = None, memo: bool = True,
                 timeout: float | None = 60.0):
        self._rules_dir = None if rules_dir is None else str(rules_dir)
        self._release = release
        self._memo = memo
        self.timeout = timeout
        self._lock = threading.Lock()
        self._holder: dict[str, _Worker | None] = {"worker": None}
        self._finalizer = weakref.finalize(self, _finalize, self._holder)
        self._closed = False
        self.restarts = 0
        with self._lock:
            self._start()

    # -- worker lifecycle ----------------------------------------------------
    def _start(self) -> _Worker:
        worker = _Worker(self._rules_dir, self._release, self._memo)
        self._holder["worker"] = worker
        try:
            hello = self._exchange(worker, None)
        except IsolationError:
            self._holder["worker"] = None
            raise
        if "policy_error" in hello:
            worker.kill()
            self._holder["worker"] = None
            raise PolicyError(_problems(hello["policy_error"]))
        self.digest: str = hello["ready"]
        self.source: str = hello["source"]
        return worker

    def _exchange(self, worker: _Worker, request: Any) -> Any:
        """Send ``request`` (None: only read) and read the answer, within the timeout."""
        result: dict[str, Any] = {}

        def talk() -> None:
            try:
                if request is not None:
                    _write(worker.process.stdin, request)
                result["answer"] = _read(worker.process.stdout)
            except (OSError, EOFError, ValueError) as exc:
                result["error"] = exc

        talker = threading.Thread(target=talk, daemon=True)
        talker.start()
        talker.join(self.timeout)
        if talker.is_alive():
            worker.kill()
            talker.join()
            self._holder["worker"] = None
            raise IsolationError([Problem("engine.worker_timeout",
                                          f"the rule worker did not answer within {self.timeout} s; it was stopped and will be restarted")])
        if "answer" in result:
            return result["answer"]
        code = worker.process.wait()
        worker.kill()
        self._holder["worker"] = None
        raise IsolationError([Problem("engine.worker_died",
                                      f"the rule worker {_describe(code)}; the next call starts a new one")])

    @property
    def pid(self) -> int | None:
        """The worker's process id (None until the next call restarts a dead worker)."""
        worker = self._holder["worker"]
        return worker.pid if worker is not None else None

    # -- the API ---------------------------------------------------------------
    def decide(self, document: Any, *, limits: Limits = DEFAULT_LIMITS) -> Decision:
        """Decide one deployment document in the worker. See :func:`hma_policy.decide`."""
        # Checked here, in pure Python: invalid input never reaches the worker.
        spelled: dict[str, str] = {}
        prepared = prepare(document, limits=limits, spelled=spelled)
        request = {"document": prepared, "limits": {f.name: getattr(limits, f.name) for f in fields(Limits)}}
        with self._lock:
            if self._closed:
                raise IsolationError([Problem("engine.closed", "the policy was closed")])
            worker = self._holder["worker"]
            if worker is None or worker.process.poll() is not None:
                if worker is not None:
                    worker.kill()
                self.restarts += 1
                worker = self._start()
            answer = self._exchange(worker, request)
        if "decision" in answer:
            decision = decode_decision(answer["decision"])
            if any(key != name for name, key in spelled.items()):
                from .core.policy import respelled  # paths point into the document as the caller spelled it
                decision = respelled(decision, spelled)
            return decision
        if "input_error" in answer:
            raise InputError(_problems(answer["input_error"]))
        raise IsolationError(_problems(answer.get("fault") or [{"code": "engine.fault", "message": "no answer", "path": ""}]))

    def close(self) -> None:
        """Stop the worker. Later calls raise IsolationError."""
        with self._lock:
            self._closed = True
            worker = self._holder["worker"]
            self._holder["worker"] = None
            if worker is not None:
                try:
                    if worker.process.stdin is not None:  # (a pipe: Popen was given PIPE)
                        worker.process.stdin.close()  # the worker's loop ends at EOF
                    worker.process.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
                worker.kill()
        self._finalizer.detach()

    def __enter__(self) -> "IsolatedPolicy":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IsolatedPolicy(source={getattr(self, 'source', None)!r}, pid={self.pid})"
