"""``hma-policy serve``'s options: apart from the service (run.py), so that
building the command line's parser, which every command does, imports
nothing the service needs (logging's configuration, the server extra)."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    """The serve command's options (cli.py makes the command)."""
    cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; 0.0.0.0 for every address)")
    cmd.add_argument("--port", type=_port, default=8000, help="port to listen on (default: 8000)")
    cmd.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM; with --tls-key)")
    cmd.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    cmd.add_argument("--rules", metavar="DIR", help="a rules directory, reloaded on SIGHUP (default: the bundled rules)")
    cmd.add_argument("--workers", type=_positive, default=1, metavar="N", help="worker processes (default: 1)")
    cmd.add_argument("--max-body", type=_positive, default=1 << 20, metavar="BYTES",
                     help="largest request body accepted, in bytes (default: 1048576); larger ones get 413")
    cmd.add_argument("--graceful-timeout", type=_positive, default=25, metavar="SECONDS",
                     help="on SIGTERM, how long requests in flight may take to finish (default: 25)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got `{text}`") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, got {value}")
    return value
