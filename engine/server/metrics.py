"""The service's Prometheus metrics (prometheus_client), served at /metrics.

- ``hma_policy_decisions_total{endpoint, outcome}``: decisions made, by
  outcome (enabled, disabled, error, undetermined); ``endpoint`` is
  ``decide`` or ``admission`` (one decision per vLLM container reviewed);
- ``hma_policy_admission_reviews_total{result}``: allowed, warned, denied,
  malformed;
- ``hma_policy_http_request_duration_seconds{path}``: latency histogram,
  from the request's start to its response's end;
- ``hma_policy_http_responses_total{path, status}``;
- ``hma_policy_policy_reloads_total{result}`` (loaded, failed) and
  ``hma_policy_policy_info{digest}`` (1 for the policy in force).

``path`` is one of the service's routes, or ``other``, so that no request
can make a new series. With several workers, each process writes its
values to files in ``PROMETHEUS_MULTIPROC_DIR`` (set by ``serve``) and a
scrape adds them up: prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

__all__ = ["Metrics", "CONTENT_TYPE", "ROUTES"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
ROUTES = frozenset({"/v1/decide", "/v1/admission", "/healthz", "/readyz", "/metrics"})
# A decision takes tens of microseconds; the buckets resolve the fast end.
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """One process's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter("hma_policy_decisions", "Decisions made, by endpoint and outcome",
                                 ("endpoint", "outcome"), registry=r)
        self.reviews = Counter("hma_policy_admission_reviews", "AdmissionReviews answered, by result", ("result",),
                               registry=r)
        self.duration = Histogram("hma_policy_http_request_duration_seconds", "HTTP request latency", ("path",),
                                  buckets=BUCKETS, registry=r)
        self.responses = Counter("hma_policy_http_responses", "HTTP responses, by route and status",
                                 ("path", "status"), registry=r)
        self.reloads = Counter("hma_policy_policy_reloads", "Policy reloads, by result", ("result",), registry=r)
        self.policy = Gauge("hma_policy_policy_info", "The policy in force (1), by digest", ("digest",),
                            registry=r, multiprocess_mode="liveall")

    def observe(self, path: str, status: int, seconds: float) -> None:
        route = path if path in ROUTES else "other"
        self.duration.labels(route).observe(seconds)
        self.responses.labels(route, str(status)).inc()

    def policy_changed(self, old: Any, new: Any) -> None:
        """PolicyHolder's ``on_change``: ``new`` None is a reload that failed."""
        if new is None:
            self.reloads.labels("failed").inc()
            return
        if old is not None:
            self.reloads.labels("loaded").inc()
            self.policy.labels(old.digest).set(0)
        self.policy.labels(new.digest).set(1)

    def render(self) -> bytes:
        """The text exposition format, over every worker's values when there are several."""
        if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)
