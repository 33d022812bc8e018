"""Log lines: one JSON object per line on standard error, uvicorn's own
lines included (:data:`LOG_CONFIG`).

Every line has ``time`` (UTC, ISO 8601, milliseconds), ``level``,
``logger`` and ``message``; an access line (logger ``hma_policy.access``)
adds ``method``, ``path``, ``status``, ``duration_ms``, ``client`` and,
where the request has one, ``outcome`` (a decision's outcome, or an
admission review's result with its ``uid``). A traceback, which no response
ever carries, goes into the ``exception`` field of its line.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from typing import Any

__all__ = ["JsonFormatter", "LOG_CONFIG", "access"]

_access = logging.getLogger("hma_policy.access")


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON; ``extra={"fields": {...}}`` adds fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": os.getpid(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def access(method: str, path: str, status: int, seconds: float, client: str | None, extra: dict[str, Any]) -> None:
    """Log one request."""
    if _access.isEnabledFor(logging.INFO):
        _access.info("request", extra={"fields": {"method": method, "path": path, "status": status,
                                                  "duration_ms": round(seconds * 1000, 3), "client": client, **extra}})


# uvicorn's loggers and the service's, all through the JSON formatter; uvicorn's
# own access log is off (the service writes its own, with the outcome).
LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "hma_policy.server.logs.JsonFormatter"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "uvicorn.error": {"level": "INFO"},
        "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        "hma_policy": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
