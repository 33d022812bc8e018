"""``hma-policy serve``: the service on uvicorn.

One worker runs in this process. With ``--workers N`` (N > 1) uvicorn's
supervisor runs N worker processes on one listening socket, and this
module's subclass of it hands SIGHUP on to each worker, which reloads its
policy itself (state.py): uvicorn's own answer to SIGHUP, replacing every
worker, would start them from the rule files again, so rules that do not
load would take the workers down instead of leaving the old policy in force.
The workers read the rules from copies (snapshot.py): one that uvicorn
starts later, in place of one that died, serves the rules that loaded last.

SIGHUP that comes while the service starts is ignored (its default action
would end the process): the rules are read after it, as they are then. For
the same reason the supervisor hands SIGHUP to a worker only once it has
started (uvicorn's readiness check): a worker installs its handler as it
starts, and reads the rules then.

SIGTERM and SIGINT stop the service gracefully: the listening socket closes,
requests in flight are answered (within ``--graceful-timeout`` seconds),
then the process exits 0. Exit status 2: a usage error, rules that do not
load, or a server that cannot start (the port is taken, TLS files that
cannot be read, a worker that fails to start).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import logging.config
import os
import signal
import tempfile
from dataclasses import replace
from typing import Any, Iterator

from ..clisupport import UsageError, checked, load_set
from ..policyref import opened

__all__ = ["serve", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'hma-policy[server]'"
log = logging.getLogger("hma_policy.server")


class _Stopped(Exception):
    """SIGTERM or SIGINT, after uvicorn's graceful shutdown hands it back."""


@contextlib.contextmanager
def _hangups_ignored() -> Iterator[None]:
    """SIGHUP ignored until a handler replaces it (uvicorn's supervisor, or
    the lifespan of the worker in this process): the default action would
    end the process."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


@contextlib.contextmanager
def _stop_quietly() -> Iterator[None]:
    """SIGTERM and SIGINT end the command with exit status 0, not as an
    interruption: they are how a service is stopped. uvicorn handles them
    while it serves, then raises the signal again for the handler found
    before it (this one)."""
    def stop(signum: int, frame: Any) -> None:
        raise _Stopped

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except _Stopped:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@_hangups_ignored()
def serve(args: argparse.Namespace, stdin: Any) -> tuple[int, None]:
    """The serve command (cli.py's handler)."""
    try:
        import uvicorn
        from uvicorn.supervisors import Multiprocess
        from . import app as _app  # starlette, prometheus_client
    except ImportError as exc:
        raise UsageError(f"`hma-policy serve` needs the server extra, which is not installed "
                         f"(no module `{exc.name}`): {INSTALL_HINT}") from None
    from uvicorn.config import STARTUP_FAILURE

    from .logs import LOG_CONFIG
    from .state import SETTINGS_VARIABLE, PolicyHolder, Settings

    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    for option, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"{option} `{path}` is not a file")
    if args.rules is not None and args.rules.partition(":")[0] == "git":
        raise UsageError("serve reloads its rules from a directory on SIGHUP: give --rules a directory")
    settings = Settings(rules=args.rules, max_body=args.max_body)
    with opened(args.rules) as ref:
        # Rules that do not load stop here, with their problems (exit 2); with several
        # workers, as the first copy of them loads (below), before anything listens.
        # Each deployment is decided for its own release, as a reload and the workers' policies do.
        policy = load_set(ref) if args.workers == 1 else None
    common: dict[str, Any] = dict(
        host=args.host, port=args.port, ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
        log_config=LOG_CONFIG, access_log=False, lifespan="on", server_header=False, proxy_headers=False,
        timeout_graceful_shutdown=args.graceful_timeout)  # uvloop and httptools where installed
    with _stop_quietly():
        try:
            if args.workers == 1:
                # uvicorn sets up the log as it reads its config; the app logs the policy it starts with before.
                logging.config.dictConfig(LOG_CONFIG)
                config = uvicorn.Config(_app.create_app(settings, policy=policy), **common)
                server = uvicorn.Server(config)
                server.run()
                return (0 if server.started else 2), None
            # The workers' metrics files (prometheus_client's multiprocess mode) and the copies of the rules
            # they serve (snapshot.py), removed when the service stops.
            with tempfile.TemporaryDirectory(prefix="hma-policy-serve-") as state:
                os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(state, "metrics")
                os.mkdir(os.environ["PROMETHEUS_MULTIPROC_DIR"])
                settings = replace(settings, snapshots=os.path.join(state, "rules"))
                checked(ref, PolicyHolder(settings.rules, snapshots=settings.snapshots).publish_first)
                os.environ[SETTINGS_VARIABLE] = settings.to_environment()
                config = uvicorn.Config("hma_policy.server.app:app_from_environment", factory=True,
                                        workers=args.workers, **common)
                supervisor = _supervisor(Multiprocess, config, [config.bind_socket()])
                supervisor.run()
                # uvicorn stops every worker, and returns, when one fails to start (its rules no longer load).
                return (2 if any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes) else 0), None
        except SystemExit:  # uvicorn's exit when it cannot start (logged): the port is taken, a TLS file is unreadable
            return 2, None
    return 0, None


def _supervisor(base: Any, config: Any, sockets: list[Any]) -> Any:
    """uvicorn's worker supervisor (``base``), with SIGHUP handed on to every worker."""

    class ReloadingSupervisor(base):  # type: ignore[misc, valid-type]
        def handle_hup(self) -> None:
            log.info("SIGHUP: each worker reloads the policy")
            for process in self.processes:
                if process.pid is None or process.exitcode is not None:
                    continue
                # A worker still starting may not handle SIGHUP yet: it is signalled once it has started.
                # One that does not start in time is left to the supervisor's health check.
                if process.wait_until_ready(self.config.timeout_worker_healthcheck, self.should_exit):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGHUP)
                else:
                    log.warning("a worker did not start in time and did not reload the policy",
                                extra={"fields": {"event": "reload", "result": "skipped", "worker": process.pid}})

    return ReloadingSupervisor(config, sockets=sockets)
