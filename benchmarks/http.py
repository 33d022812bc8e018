"""Decisions per second over HTTP: `hma-policy serve` on loopback, with keep-alive clients.

    python benchmarks/http.py                       # 1 and 2 workers, 8 and 32 clients, 10 s each
    python benchmarks/http.py --workers 1 --duration 3

For each worker count a server is started (`hma-policy serve`, as deployed:
JSON access logs written to a file, metrics on), and for 8 and 32 clients
the same run measures, one after the other:

- ``healthz``: GET /healthz, the framework's floor (no body, no decision);
- ``decide``: POST /v1/decide with examples/nixl-pd-decode.json;
- ``command``: POST /v1/decide with a `vllm serve` command line;
- ``admission``: POST /v1/admission, the AdmissionReview of
  tests/server/ around examples/fleet/k8s/typo-connector-pod.yaml (denied).

The load generator is wrk (Debian's package; C, so it takes a small share
of the CPU), run with one thread; without it, a small asyncio client in this
file, which needs far more CPU per request and so lowers the figures. Either
way the load generator shares the machine's cores with the server: the
figures are a floor for a server with cores of its own.

Goal (issue 18): at least 3,000 decisions/s with p99 <= 20 ms on 2 cores.
Nothing here is a pass/fail gate.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on the path, and its name
# would hide the standard library's http package (which urllib imports).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = (REPO / "examples" / "nixl-pd-decode.json").read_bytes()
COMMAND = json.dumps({"command": ["vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2",
                                  "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']}).encode()


def _review() -> bytes:
    review = json.loads((REPO / "tests" / "server" / "admission-review-request.json").read_text(encoding="utf-8"))
    pod = yaml.safe_load((REPO / "examples" / "fleet" / "k8s" / "typo-connector-pod.yaml").read_text(encoding="utf-8"))
    request = review["request"]
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    resource = {"group": "", "version": "v1", "resource": "pods"}
    request.update(kind=kind, resource=resource, requestKind=kind, requestResource=resource, operation="CREATE",
                   name=pod["metadata"]["name"], namespace=pod["metadata"]["namespace"], object=pod, oldObject=None)
    for key in ("subResource", "requestSubResource"):
        request.pop(key)
    return json.dumps(review).encode()


TARGETS = {  # name -> (method, path, body)
    "healthz": ("GET", "/healthz", None),
    "decide": ("POST", "/v1/decide", DOCUMENT),
    "command": ("POST", "/v1/decide", COMMAND),
    "admission": ("POST", "/v1/admission", _review()),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, workers: int, log: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "hma_policy", "serve", "--port", str(self.port),
                                         "--workers", str(workers)], stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=1) as response:
                    if response.status == 200:
                        time.sleep(0.5 * workers)  # every worker up, not just the first
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit(f"the server did not start; see {log}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        self.log.close()


# -- wrk ------------------------------------------------------------------------------

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(number) * _UNITS[unit]


def run_wrk(base: str, target: str, clients: int, seconds: float, tmp: Path) -> dict[str, Any]:
    method, path, body = TARGETS[target]
    script = tmp / f"{target}.lua"
    lua = f'wrk.method = "{method}"\n'
    if body is not None:
        (tmp / f"{target}.json").write_bytes(body)
        lua += (f'local f = io.open("{tmp / (target + ".json")}", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
                'wrk.headers["Content-Type"] = "application/json"\n')
    script.write_text(lua, encoding="utf-8")
    done = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "--latency", "-s", str(script), base + path],
                          capture_output=True, text=True, check=True)
    out = done.stdout
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50_ms": _ms(latency["50"]), "p99_ms": _ms(latency["99"]),
            "non_2xx": int(errors.group(1)) if errors else 0,
            "socket_errors": socket_errors.group(1) if socket_errors else None}


# -- the asyncio client (without wrk) -------------------------------------------------------

async def _client(port: int, request: bytes, until: float, latencies: list[float], failures: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            if not head.startswith(b"HTTP/1.1 2"):
                failures.append(1)
    finally:
        writer.close()


def run_asyncio(base: str, target: str, clients: int, seconds: float, tmp: Path) -> dict[str, Any]:
    method, path, body = TARGETS[target]
    port = int(base.rsplit(":", 1)[1])
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    request = (head + "\r\n").encode() + (body or b"")
    latencies: list[float] = []
    failures: list[int] = []

    async def main() -> None:
        until = time.perf_counter() + seconds
        await asyncio.gather(*(_client(port, request, until, latencies, failures) for _ in range(clients)))

    start = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100)
    return {"rps": len(latencies) / elapsed, "p50_ms": cuts[49] * 1e3, "p99_ms": cuts[98] * 1e3,
            "non_2xx": len(failures), "socket_errors": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--client", choices=("wrk", "asyncio"), default="wrk" if shutil.which("wrk") else "asyncio")
    parser.add_argument("--output", type=Path, help="write the figures as JSON here too")
    args = parser.parse_args()
    measure = run_wrk if args.client == "wrk" else run_asyncio
    results: list[dict[str, Any]] = []
    print(f"load generator: {args.client} (one thread), sharing {os.cpu_count()} cores with the server; "
          f"{args.duration:g} s per figure")
    print(f"{'workers':>7} {'clients':>7} {'target':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    with tempfile.TemporaryDirectory(prefix="hma-policy-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for workers in args.workers:
            server = Server(workers, tmp / f"serve-{workers}.log")
            try:
                for clients in args.clients:
                    for target in args.targets:
                        figure = measure(server.base, target, clients, args.duration, tmp)
                        results.append({"workers": workers, "clients": clients, "target": target, **figure})
                        print(f"{workers:>7} {clients:>7} {target:<10} {figure['rps']:>9.0f} {figure['p50_ms']:>8.2f} "
                              f"{figure['p99_ms']:>8.2f} {figure['non_2xx']:>6}", flush=True)
            finally:
                server.stop()
    best = max((r for r in results if r["target"] == "decide" and r["p99_ms"] <= 20), key=lambda r: r["rps"], default=None)
    goal = "met" if best and best["rps"] >= 3000 else "not met"
    print(f"goal (>= 3000 decisions/s with p99 <= 20 ms): {goal}"
          + (f" ({best['rps']:.0f}/s, p99 {best['p99_ms']:.1f} ms: {best['workers']} worker(s), {best['clients']} clients)" if best else ""))
    if args.output:
        args.output.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                                           "client": args.client, "duration_s": args.duration, "results": results},
                                          indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
