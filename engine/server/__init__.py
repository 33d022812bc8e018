"""``hma-policy serve``: the decision service and Kubernetes admission webhook.

An ASGI application (Starlette) served by uvicorn, installed with the
``server`` extra (``pip install 'hma-policy[server]'``); nothing else in the
package imports this one, so every other command works without it.

- :mod:`.app`: the routes (``/v1/decide``, ``/v1/admission``, ``/healthz``,
  ``/readyz``, ``/metrics``), body limits, error answers;
- :mod:`.admission`: AdmissionReview in, AdmissionReview out (no HTTP here);
- :mod:`.state`: the service's settings and the current policy, replaced
  whole on SIGHUP;
- :mod:`.snapshot`: the copies of the rules that several workers read;
- :mod:`.metrics`: Prometheus metrics; :mod:`.logs`: JSON log lines;
- :mod:`.run`: the ``serve`` command (uvicorn, TLS, workers).

docs/server.md describes the service for its users.
"""
