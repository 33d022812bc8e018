"""The decision service's routes, as a Starlette application.

=====================  ==================================================
``POST /v1/decide``    a deployment document, or ``{"command": [...] | "...",
                       "env": {...}}`` -> the decision (200, whatever the
                       outcome); 422 with the problems for an invalid one
``POST /v1/admission`` an ``admission.k8s.io/v1`` AdmissionReview ->
                       its response (admission.py)
``GET /healthz``       200 while the process serves
``GET /readyz``        200 once a policy is loaded, else 503
``GET /metrics``       Prometheus text format (metrics.py)
=====================  ==================================================

Every answer that is not a decision or a review is JSON of one shape:
``{"error": {"code", "message"}, "problems": [{"code", "message", "path",
"hint"}]}``, with status 400 (the body is not JSON, or not an object: code
``request.malformed``), 413 (larger than ``max_body``:
``request.too_large``), 422 (an invalid document: ``request.invalid``,
with the engine's located problems), 404/405 (``request.route``), 503
(``server.not_ready``) or 500 (``server.internal``: logged with its
traceback, which no response carries).

A body is read a chunk at a time and dropped as soon as it passes
``max_body``; a ``Content-Length`` past it is refused before any is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Any, AsyncIterator

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.errors import InputError, Problem
from ..core.input import parse_text
from ..core.policies import PolicySet, decide_command
from ..core.policy import Policy
from ..core.schema import pointer
from . import admission
from .logs import access
from .metrics import CONTENT_TYPE, Metrics
from .state import PolicyHolder, Settings

__all__ = ["create_app", "app_from_environment"]

log = logging.getLogger("hma_policy.server")

# Where a request's handler leaves what its access line reports (outcome, uid).
_LOG_KEY = "hma_policy.log"
_COMMAND_FIELDS = ("command", "env", "vllm_version")
# The service reads no files: a `--config FILE` in a command is looked for
# under /dev/null, which is not a directory, so no path under it exists; the
# problems that lookup gives are then said plainly.
_NO_FILES = os.devnull
_FILE_CODES = frozenset({"source.config_unreadable", "source.config_missing", "source.config_outside"})


class _Refusal(Exception):
    """An error answer: HTTP ``status``, a ``code`` and ``message``, the problems behind it."""

    def __init__(self, status: int, code: str, message: str, problems: tuple[Problem, ...] = ()):
        super().__init__(message)
        self.status, self.code, self.message, self.problems = status, code, message, problems


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _problem_dict(problem: Problem) -> dict[str, Any]:
    return {"code": problem.code, "message": problem.message, "path": problem.path, "hint": problem.hint}


def _error(status: int, code: str, message: str, problems: tuple[Problem, ...] = ()) -> Response:
    return _json({"error": {"code": code, "message": message}, "problems": [_problem_dict(p) for p in problems]},
                 status)


async def _body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past ``limit`` bytes without holding more."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:  # nobody to answer; the access log shows it
        raise _malformed((Problem("input.read", "the client closed the connection before the body ended"),)) from None
    return b"".join(chunks)


def _too_large(limit: int) -> _Refusal:
    return _Refusal(413, "request.too_large", f"the request body is larger than {limit} bytes",
                    (Problem("input.limit", f"the body is larger than {limit} bytes",
                             hint="start the service with a larger --max-body"),))


def _malformed(problems: tuple[Problem, ...]) -> _Refusal:
    return _Refusal(400, "request.malformed", problems[0].message, problems)


def _document(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, read as the command line reads a JSON file
    (duplicate keys, digit and depth limits are the document's problems)."""
    try:
        value = parse_text(raw.decode("utf-8"), source="the request body", fmt="json")
    except UnicodeDecodeError as exc:
        raise _malformed((Problem("input.encoding", f"the body is not UTF-8 (byte {exc.start})"),)) from None
    except InputError as exc:
        if exc.problems and exc.problems[0].code == "input.parse":
            raise _malformed(exc.problems) from None
        raise _Refusal(422, "request.invalid", "the document is invalid", exc.problems) from None
    if not isinstance(value, dict):
        raise _malformed((Problem("input.schema", "the body is not a JSON object", "",
                                  hint='send a deployment document, or {"command": [...]}'),))
    return value


def _decide_command(policy: PolicySet, request: dict[str, Any]) -> Any:
    """``{"command": ..., "env": {...}, "vllm_version": ...}``:
    hma_policy.decide_command, reading no file."""
    problems = [Problem("input.schema", f"`{key}` is not a field of a command request", pointer([key]),
                        hint='send {"command": [...] or "...", "env": {...}, "vllm_version": "X.Y.Z"}')
                for key in request if key not in _COMMAND_FIELDS]
    env = request.get("env")
    if env is not None and not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        problems.append(Problem("input.schema", "`env` is an object whose values are strings", "/env"))
    if problems:
        raise InputError(problems)
    try:
        # The release that runs the command, as a document's vllm_version (checked as one).
        return decide_command(request["command"], env=env, vllm_version=request.get("vllm_version"), policy=policy,
                              cwd=_NO_FILES, config_root=_NO_FILES)
    except InputError as exc:
        raise InputError([Problem("request.config_file", "the decision service reads no files, so a `--config` "
                                  "file cannot be read", p.path, hint="put the file's options on the command line")
                          if p.code in _FILE_CODES else p for p in exc.problems]) from None


def create_app(settings: Settings | None = None, *, policy: Policy | PolicySet | None = None) -> Starlette:
    """The service. ``policy``: one already loaded from ``settings.rules``
    (else it is loaded at start-up)."""
    settings = settings or Settings()
    metrics = Metrics()
    holder = PolicyHolder(settings.rules, on_change=metrics.policy_changed, snapshots=settings.snapshots)
    if policy is not None:
        holder.adopt(policy)

    def current() -> PolicySet:
        if holder.policy is None:
            raise _Refusal(503, "server.not_ready", "the policy is not loaded yet")
        return holder.policy

    async def decide(request: Request) -> Response:
        document = _document(await _body(request, settings.max_body))
        policy = current()
        try:
            decision = _decide_command(policy, document) if "command" in document else policy.decide(document)
        except InputError as exc:
            raise _Refusal(422, "request.invalid", "the document is invalid", exc.problems) from None
        metrics.decisions.labels("decide", decision.outcome).inc()
        request.scope[_LOG_KEY]["outcome"] = decision.outcome
        return _json(decision.to_dict())

    async def review(request: Request) -> Response:
        raw = await _body(request, settings.max_body)
        try:
            body = orjson.loads(raw)
            answer = admission.review(body, current())
        except orjson.JSONDecodeError as exc:
            metrics.reviews.labels("malformed").inc()
            raise _malformed((Problem("input.parse", f"the body is not JSON: {exc}"),)) from None
        except admission.MalformedReview as exc:
            metrics.reviews.labels("malformed").inc()
            raise _malformed((exc.problem,)) from None
        for outcome in answer.outcomes:
            metrics.decisions.labels("admission", outcome).inc()
        metrics.reviews.labels(answer.result).inc()
        request.scope[_LOG_KEY].update(outcome=answer.result, uid=answer.uid)
        return _json(answer.response)

    async def healthz(request: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(request: Request) -> Response:
        policy = current()
        return _json({"status": "ready", "policy": {"digest": policy.digest, "source": holder.source}})

    async def metrics_text(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        reloads: set[asyncio.Task[bool]] = set()

        def on_hangup() -> None:
            task = loop.create_task(holder.reload())
            reloads.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(reloads.discard)

        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
            loop.add_signal_handler(signal.SIGHUP, on_hangup)
        if holder.policy is None:
            holder.load()  # a policy that does not load stops the start-up (PolicyError)
        yield
        for task in list(reloads):
            task.cancel()

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Refusal)
        return _error(exc.status, exc.code, exc.message, exc.problems)

    async def route_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, "request.route", f"{request.method} {request.url.path}: {exc.detail}")

    async def internal(request: Request, exc: Exception) -> Response:
        # Logged by uvicorn with its traceback (Starlette raises it on); answered without.
        return _error(500, "server.internal", "internal error; the service's log has the details")

    routes = [
        Route("/v1/decide", decide, methods=["POST"]),
        Route("/v1/admission", review, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={_Refusal: refused, HTTPException: route_error, Exception: internal})
    app.add_middleware(_AccessLog, metrics=metrics)
    app.state.holder = holder
    return app


def app_from_environment() -> Starlette:
    """The application a uvicorn worker imports (``factory=True``), with
    the settings ``serve`` put in the environment."""
    return create_app(Settings.from_environment())


class _AccessLog:
    """ASGI middleware: one JSON log line and the latency metrics for each request."""

    def __init__(self, app: Any, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # unless a response starts
        extra: dict[str, Any] = {}
        scope[_LOG_KEY] = extra

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - start
            self.metrics.observe(scope["path"], status, seconds)
            client = scope.get("client")
            access(scope["method"], scope["path"], status, seconds, client[0] if client else None, extra)
