"""`hma-policy serve`, run as a user runs it: uvicorn on a loopback port in a
separate process, asked by real HTTP clients (httpx, and curl where the
machine has it). Admission reviews follow the Kubernetes API reference's
AdmissionReview (tests/server/PROVENANCE.md), around real objects."""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import hma_policy
from rulecopy import copy_rules, lmcache_supported

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "server"
REVIEW = json.loads((FIXTURES / "admission-review-request.json").read_text(encoding="utf-8"))
FLEET = REPO / "examples" / "fleet" / "k8s"
CORPUS = REPO / "tests" / "fleet_corpus"
MAX_BODY = 65536

NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
LMCACHE = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
DOCUMENTS = {
    "enabled": {"kv_transfer_config": NIXL},
    "disabled": {"kv_transfer_config": LMCACHE},
    "error": {"kv_transfer_config": {"kv_connector": "NixlConector", "kv_role": "kv_both"}},
    "undetermined": {"kv_transfer_config": {"kv_connector": "MyConnector", "kv_role": "kv_both",
                                            "kv_connector_module_path": "my_company.connectors"}},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`hma-policy serve` in a child process; its standard error goes to ``log``."""

    def __init__(self, tmp: Path, *args: str, scheme: str = "http", verify: Any = True):
        self.port = free_port()
        self.log = tmp / f"serve-{self.port}.log"
        self.base = f"{scheme}://127.0.0.1:{self.port}"
        self.verify = verify
        with open(self.log, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hma_policy", "serve", "--port", str(self.port), *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp)
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.lines()
            try:
                if httpx.get(self.base + "/readyz", verify=self.verify, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the server did not become ready: {self.lines()}")

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base, verify=self.verify, timeout=30, **kwargs)

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (each line must be one JSON object)."""
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def wait_workers(self, workers: int) -> None:
        """Until every worker has loaded its policy: /readyz answers as soon as one has."""
        self.wait_log(lambda l: l.get("event") == "load", count=workers)

    def wait_log(self, predicate: Any, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [line for line in self.lines() if predicate(line)]
            if len(found) >= count:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no such log line: {self.lines()[-10:]}")

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    # A --config file the service must never read, in its working directory.
    (tmp / "served.yaml").write_text(f"kv-transfer-config: '{json.dumps(LMCACHE)}'\n", encoding="utf-8")
    running = Server(tmp, "--max-body", str(MAX_BODY))
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


# -- /v1/decide ------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_decide_answers_the_decision_the_library_makes(http, name):
    response = http.post("/v1/decide", json=DOCUMENTS[name])
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == hma_policy.decide(DOCUMENTS[name]).to_dict()
    assert response.json()["outcome"] == name


def test_decide_takes_a_command_as_words_or_one_string_with_its_environment(http):
    words = ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-transfer-config", json.dumps(LMCACHE)]
    response = http.post("/v1/decide", json={"command": words})
    assert response.status_code == 200
    assert response.json() == hma_policy.decide_command(words).to_dict()
    assert response.json()["outcome"] == "disabled"
    line = "vllm serve Qwen/Qwen3-8B --kv-transfer-config \"$KV\""
    response = http.post("/v1/decide", json={"command": line, "env": {"KV": json.dumps(NIXL)}})
    assert response.status_code == 200
    assert response.json() == hma_policy.decide_command(line, env={"KV": json.dumps(NIXL)}).to_dict()
    assert response.json()["outcome"] == "enabled"


def test_a_command_is_decided_for_the_release_that_runs_it(http):
    """`vllm_version`, as decide_command(vllm_version=) and `decide --vllm-version` take it:
    kv_buffer_size is a field up to 0.10.2."""
    words = ["vllm", "serve", "m", "--kv-transfer-config",
             '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1"}']
    response = http.post("/v1/decide", json={"command": words, "vllm_version": "0.10.2"})
    assert response.status_code == 200, response.text
    assert response.json() == hma_policy.decide_command(words, vllm_version="0.10.2").to_dict()
    assert response.json()["vllm"] == {"release": "0.10.2", "source": "document vllm_version"}
    response = http.post("/v1/decide", json={"command": words})
    assert response.status_code == 422
    assert [p["message"] for p in response.json()["problems"]] == ["unknown field `kv_buffer_size`"]
    # An option the release refuses: vLLM exits before it starts.
    response = http.post("/v1/decide", json={"command": ["vllm", "serve", "m", "--num-scheduler-steps", "8"],
                                             "vllm_version": "0.30.0"})
    assert response.status_code == 422
    assert [(p["code"], p["message"]) for p in response.json()["problems"]] == [
        ("source.unknown_option", "vLLM 0.30.0 rejects the unrecognized argument `--num-scheduler-steps`")]
    response = http.post("/v1/decide", json={"command": ["vllm", "serve", "m"], "vllm_version": 10})
    assert response.status_code == 422
    assert [(p["code"], p["path"]) for p in response.json()["problems"]] == [("release.malformed", "/vllm_version")]


def test_a_command_naming_an_unset_variable_is_422_naming_it(http):
    response = http.post("/v1/decide", json={"command": "vllm serve m --kv-transfer-config $KV"})
    assert response.status_code == 422
    body = response.json()
    assert body["error"]["code"] == "request.invalid"
    assert [(p["code"], p["path"]) for p in body["problems"]] == [("source.unresolved", "/kv_transfer_config")]
    assert "`$KV`" in body["problems"][0]["message"]


def test_the_service_reads_no_config_file(http):
    # served.yaml exists in the server's working directory and would turn HMA off.
    response = http.post("/v1/decide", json={"command": ["vllm", "serve", "m", "--config", "served.yaml"]})
    assert response.status_code == 422
    [problem] = response.json()["problems"]
    assert problem["code"] == "request.config_file"
    assert problem["message"] == "the decision service reads no files, so a `--config` file cannot be read"
    assert problem["hint"] == "put the file's options on the command line"


def test_a_command_request_with_other_fields_is_422(http):
    response = http.post("/v1/decide", json={"command": ["vllm", "serve", "m"], "env": {"A": 1}, "cwd": "/"})
    assert response.status_code == 422
    problems = {(p["code"], p["path"]) for p in response.json()["problems"]}
    assert problems == {("input.schema", "/cwd"), ("input.schema", "/env")}


def test_an_invalid_document_is_422_with_the_located_problems(http):
    document = {"kv_transfer_config": {"kv_conector": "NixlConnector", "kv_role": "kv_both"}}
    response = http.post("/v1/decide", json=document)
    assert response.status_code == 422
    with pytest.raises(hma_policy.InputError) as raised:
        hma_policy.decide(document)
    assert response.json() == {
        "error": {"code": "request.invalid", "message": "the document is invalid"},
        "problems": [{"code": p.code, "message": p.message, "path": p.path, "hint": p.hint} for p in raised.value.problems],
    }
    assert response.json()["problems"][0]["hint"] == "did you mean `kv_connector`?"


def test_a_repeated_key_is_the_documents_problem_as_on_the_command_line(http):
    response = http.post("/v1/decide", content=b'{"kv_transfer_config": {}, "kv_transfer_config": {}}')
    assert response.status_code == 422
    assert [p["code"] for p in response.json()["problems"]] == ["input.duplicate_key"]


@pytest.mark.parametrize("body, code, words", [
    (b"{not json", "input.parse", "invalid JSON"),
    (b"", "input.parse", "invalid JSON"),
    (b"[1, 2]", "input.schema", "not a JSON object"),
    (b'"vllm serve"', "input.schema", "not a JSON object"),
    (b'{"a": "\xff"}', "input.encoding", "not UTF-8"),
])
def test_a_malformed_body_is_400(http, body, code, words):
    response = http.post("/v1/decide", content=body)
    assert response.status_code == 400
    data = response.json()
    assert data["error"]["code"] == "request.malformed"
    assert data["problems"][0]["code"] == code
    assert words in data["problems"][0]["message"]


def test_a_body_past_the_limit_is_413_whether_its_length_is_declared_or_not(http):
    big = json.dumps({"kv_transfer_config": NIXL, "pad": "x" * MAX_BODY}).encode()
    response = http.post("/v1/decide", content=big)
    assert response.status_code == 413
    assert response.json()["error"] == {"code": "request.too_large",
                                        "message": f"the request body is larger than {MAX_BODY} bytes"}

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked, counted as it comes
        for _ in range(4 * MAX_BODY // 4096):
            yield b" " * 4096

    response = http.post("/v1/decide", content=chunks())
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request.too_large"
    # At the limit exactly, the body is read.
    exact = json.dumps(DOCUMENTS["enabled"]).encode()
    exact += b" " * (MAX_BODY - len(exact))
    assert http.post("/v1/decide", content=exact).json()["outcome"] == "enabled"


def test_unknown_routes_and_methods_answer_json(http):
    response = http.get("/v1/nothing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "request.route"
    response = http.get("/v1/decide")
    assert response.status_code == 405
    assert response.json()["error"] == {"code": "request.route", "message": "GET /v1/decide: Method Not Allowed"}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed on this machine")
def test_curl(server):
    def curl(*args: str) -> tuple[int, str]:
        done = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args], capture_output=True,
                              text=True, timeout=30, check=True)
        body, _, status = done.stdout.rpartition("\n")
        return int(status), body

    status, body = curl("-H", "Content-Type: application/json", "--data-binary", json.dumps(DOCUMENTS["disabled"]),
                        server.base + "/v1/decide")
    assert status == 200 and json.loads(body)["outcome"] == "disabled"
    status, body = curl("--data-binary", "x" * (MAX_BODY + 1), server.base + "/v1/decide")
    assert status == 413 and json.loads(body)["error"]["code"] == "request.too_large"
    status, body = curl(server.base + "/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})


# -- /healthz, /readyz, /metrics, logs -------------------------------------------------------

def test_health_and_readiness(http):
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "policy": {"digest": hma_policy.load_policy().digest, "source": "bundled"}}


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, as the Prometheus text parser reads it."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_decisions_reviews_and_latency(http):
    before = metric_samples(http.get("/metrics").text)
    for _ in range(3):
        http.post("/v1/decide", json=DOCUMENTS["disabled"])
    http.post("/v1/admission", json=review_of(FLEET / "typo-connector-pod.yaml"))
    response = http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=")
    after = metric_samples(response.text)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before.get(key, 0.0)

    assert grew("hma_policy_decisions_total", endpoint="decide", outcome="disabled") == 3
    assert grew("hma_policy_decisions_total", endpoint="admission", outcome="error") == 1
    assert grew("hma_policy_admission_reviews_total", result="denied") == 1
    assert grew("hma_policy_http_request_duration_seconds_count", path="/v1/decide") == 3
    assert grew("hma_policy_http_responses_total", path="/v1/decide", status="200") == 3
    assert after[("hma_policy_http_request_duration_seconds_bucket", (("le", "+Inf"), ("path", "/v1/decide")))] >= 3
    digest = hma_policy.load_policy().digest
    assert after[("hma_policy_policy_info", (("digest", digest),))] == 1


def test_access_log_lines_are_json_with_the_outcome(server, http):
    http.post("/v1/decide", json=DOCUMENTS["undetermined"], headers={"x-test": "access-log"})
    lines = server.wait_log(lambda l: l.get("logger") == "hma_policy.access" and l.get("outcome") == "undetermined")
    line = lines[-1]
    assert set(line) >= {"time", "level", "method", "path", "status", "duration_ms", "client", "outcome"}
    assert (line["method"], line["path"], line["status"]) == ("POST", "/v1/decide", 200)
    assert line["time"].endswith("+00:00") and isinstance(line["duration_ms"], float)


def test_decide_decides_a_document_for_the_release_it_names(http):
    """As `decide` and the audit do (regression: a service of one worker decided every
    document for the newest release, until its first reload)."""
    document = {"vllm_version": "0.10.2", "kv_transfer_config": {
        "kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_buffer_size": "1e1"}}
    response = http.post("/v1/decide", json=document)
    assert response.status_code == 200, response.text
    assert response.json() == hma_policy.decide(document).to_dict()
    assert response.json()["vllm"] == {"release": "0.10.2", "source": "document vllm_version"}


# -- /v1/admission -----------------------------------------------------------------------

def objects_of(path: Path) -> list[dict[str, Any]]:
    return [obj for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")) if obj]


_PLURAL = {"Pod": "pods", "Deployment": "deployments", "StatefulSet": "statefulsets", "Job": "jobs",
           "LeaderWorkerSet": "leaderworkersets",
           "LLMInferenceService": "llminferenceservices", "Service": "services"}


def review_of(path: Path, index: int = 0, *, uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
              operation: str = "CREATE", obj: dict[str, Any] | None = None) -> dict[str, Any]:
    """The documentation's AdmissionReview request, around an object of ``path``."""
    obj = obj if obj is not None else objects_of(path)[index]
    group, _, version = obj["apiVersion"].rpartition("/")
    review = copy.deepcopy(REVIEW)
    request = review["request"]
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    resource = {"group": group, "version": version, "resource": _PLURAL[obj["kind"]]}
    request.update(uid=uid, kind=kind, resource=resource, requestKind=kind, requestResource=resource,
                   name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace", "default"),
                   operation=operation, object=obj)
    for key in ("subResource", "requestSubResource"):
        request.pop(key)
    if operation == "CREATE":
        request["oldObject"] = None
        request["options"] = {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    else:
        request["oldObject"] = obj
    return review


def admit(http: httpx.Client, review: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/v1/admission", json=review)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert body["response"]["uid"] == review["request"]["uid"]
    return body["response"]


def test_a_container_vllm_would_refuse_is_denied_with_the_code_and_hint(http):
    answer = admit(http, review_of(FLEET / "typo-connector-pod.yaml", uid="b2c3d4e5-0000-4000-8000-000000000001"))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    message = answer["status"]["message"]
    assert message.startswith("hma-policy: vLLM would refuse to start container `vllm` of Pod inference/qwen-decode-canary: "
                              "connector.unknown: ")
    assert "NixlConector" in message and "(hint: did you mean `NixlConnector`?)" in message


def test_an_update_that_leaves_a_refused_launch_as_it_was_is_let_through_with_the_refusal_as_warning(http):
    path = FLEET / "typo-connector-pod.yaml"
    relabelled = review_of(path, operation="UPDATE")  # oldObject: the same pod
    relabelled["request"]["object"] = copy.deepcopy(relabelled["request"]["object"])
    relabelled["request"]["object"]["metadata"]["labels"] = {"team": "inference"}
    answer = admit(http, relabelled)
    assert answer["allowed"] is True
    [warning] = answer["warnings"]
    assert warning.startswith("hma-policy: vLLM would refuse to start container `vllm` of Pod "
                              "inference/qwen-decode-canary: connector.unknown: ")
    assert warning.endswith("(hint: did you mean `NixlConnector`?) (so before this update too, which is let through)")
    # An update that makes the launch one vLLM refuses is denied.
    broken = review_of(path, operation="UPDATE")
    fine = copy.deepcopy(broken["request"]["object"])
    fine["spec"]["containers"][0]["args"][2] = json.dumps(NIXL)
    broken["request"]["oldObject"] = fine
    assert admit(http, broken)["allowed"] is False


def test_hma_disabled_is_allowed_with_a_warning(http):
    answer = admit(http, review_of(FLEET / "lws-flexkv-mamba.yaml"))
    assert answer["allowed"] is True and "status" not in answer
    [warning] = answer["warnings"]
    assert warning.startswith("hma-policy: container `vllm-leader` (leader) of LeaderWorkerSet research/nemotron-h: "
                              "HMA disabled (hma.auto_disabled, model.ssm_requires_hma)")
    assert len(warning) <= 256


def test_an_undetermined_container_is_allowed_with_a_warning(http):
    pod = objects_of(FLEET / "typo-connector-pod.yaml")[0]
    pod["spec"]["containers"][0]["args"][2] = json.dumps(DOCUMENTS["undetermined"]["kv_transfer_config"])
    answer = admit(http, review_of(FLEET / "typo-connector-pod.yaml", obj=pod, operation="UPDATE"))
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "hma-policy: container `vllm` of Pod inference/qwen-decode-canary: HMA undetermined (connector.capability_unknown): "
        "whether HMA is on depends on an external connector, so start-up cannot be judged"]


@pytest.mark.parametrize("path, index", [
    (FLEET / "pd-disagg.yaml", 0),
    (FLEET / "pd-disagg.yaml", 1),
    (CORPUS / "vllm-project__production-stack/examples/disaggregated_prefill_orchestrated/prefill-deploy.yaml", 1),
])
def test_objects_vllm_starts_with_hma_on_are_allowed_without_warnings(http, path, index):
    answer = admit(http, review_of(path, index))
    assert answer == {"uid": REVIEW["request"]["uid"], "allowed": True}


def test_each_object_of_the_example_fleet_is_answered_as_the_audit_decides_it(http):
    from hma_policy.audit.run import audit

    report = audit([str(FLEET)])
    outcomes: dict[tuple[str, str], list[str]] = {}
    for entry in report.entries:
        resource = dict(entry.deployment.resource)
        outcomes.setdefault((resource["kind"], resource["name"]), []).append(entry.decision["outcome"])
    reviewed = set()
    for path in sorted(FLEET.glob("*.yaml")):
        for index, obj in enumerate(objects_of(path)):
            if obj["kind"] == "ConfigMap":
                continue
            found = outcomes.get((obj["kind"], obj["metadata"]["name"]), [])
            answer = admit(http, review_of(path, index))
            reviewed.add((obj["kind"], obj["metadata"]["name"]))
            assert answer["allowed"] is ("error" not in found), (path.name, found, answer)
            if (obj["kind"], obj["metadata"]["name"]) == ("Deployment", "granite-engine"):
                # Its --config file is in a ConfigMap: in the file the audit reads, not in the object
                # a review holds, so the webhook cannot know it.
                assert answer["warnings"] == [
                    "hma-policy: container `engine` of Deployment llm/granite-engine: cannot be decided: "
                    "source.config_unresolved: `--config /etc/vllm/serve.yaml` comes from ConfigMap "
                    "`qwen-vllm-config`, which is not in this file"]
                continue
            warned = [o for o in found if o in ("disabled", "undetermined")]
            assert len(answer.get("warnings", [])) == len(warned), (path.name, found, answer)
            for outcome, warning in zip(warned, answer.get("warnings", [])):
                assert f"HMA {outcome}" in warning
    assert reviewed >= set(outcomes) and len(outcomes) == 7


def test_a_launch_whose_values_are_elsewhere_is_allowed_with_a_warning(http):
    path = CORPUS / "kserve__kserve/docs/samples/llmisvc/opt-125m-cpu/llm-inference-service-pd-facebook-opt-125m-cpu.yaml"
    answer = admit(http, review_of(path))
    assert answer["allowed"] is True
    assert len(answer["warnings"]) == 2
    assert all("of LLMInferenceService default/facebook-opt-125m-pd: cannot be decided: source.unresolved:" in w
               for w in answer["warnings"])


def test_a_launch_refused_whatever_its_unknown_port_is_denied(http):
    """The P2P NCCL example's config in a Pod: kv_port from an env var the
    object takes from elsewhere (any number will do), and kv_buffer_size,
    which 0.33.0 refuses: vLLM refuses it whatever the port. Where the image
    is 0.10.2, which has the field, the port is read for its type alone: the
    launch is decided (HMA off with KV transfer in that release)."""
    pod = copy.deepcopy(objects_of(FLEET / "typo-connector-pod.yaml")[0])
    container = pod["spec"]["containers"][0]
    container["env"] = [{"name": "KV_PORT", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['port']"}}}]
    container["args"][2] = ('{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1",'
                            '"kv_port":"$(KV_PORT)"}')
    answer = admit(http, review_of(FLEET / "typo-connector-pod.yaml", obj=pod))
    assert answer["allowed"] is False
    assert answer["status"]["message"].startswith(
        "hma-policy: vLLM would refuse to start container `vllm` of Pod inference/qwen-decode-canary: "
        "input.schema: unknown field `kv_buffer_size`")
    container["image"] = "vllm/vllm-openai:v0.10.2"
    answer = admit(http, review_of(FLEET / "typo-connector-pod.yaml", obj=pod))
    assert answer["allowed"] is True
    [warning] = answer["warnings"]
    assert warning == ("hma-policy: container `vllm` of Pod inference/qwen-decode-canary: HMA disabled: a "
                       "kv_transfer_config is set, and this vLLM release does not run the hybrid KV cache manager "
                       "with KV transfer")


def test_a_script_whose_paths_decide_alike_is_answered_with_that_decision(http):
    """LMCache's 1p1d LWS worker picks kv_config by $LWS_WORKER_INDEX, both paths
    LMCacheConnectorV1: HMA is off either way (regression: "cannot be decided")."""
    answer = admit(http, review_of(CORPUS / "LMCache__LMCache/examples/disagg_prefill/1p1d/k8s/1p1d-lws.yaml"))
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "hma-policy: container `vllm-pd-instance` (worker) of LeaderWorkerSet default/vllm-pd-lws: HMA disabled "
        "(hma.auto_disabled): the connector graph does not support HMA, so vLLM turns the hybrid KV cache manager off"]


def test_an_object_without_vllm_and_a_delete_are_allowed(http):
    service = CORPUS / "vllm-project__production-stack/examples/disaggregated_prefill_orchestrated/prefill-deploy.yaml"
    assert admit(http, review_of(service, 0)) == {"uid": REVIEW["request"]["uid"], "allowed": True}
    delete = review_of(FLEET / "typo-connector-pod.yaml", operation="DELETE")
    delete["request"]["object"] = None
    assert admit(http, delete) == {"uid": REVIEW["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(apiVersion="admission.k8s.io/v1beta1"), "not an admission.k8s.io/v1 AdmissionReview"),
    (lambda r: r.pop("request"), "has no `request` object"),
    (lambda r: r["request"].pop("uid"), "has no `uid`"),
    (lambda r: r["request"].update(object=[1]), "`request.object` is not an object"),
])
def test_a_malformed_review_is_400(http, mutate, message):
    review = review_of(FLEET / "typo-connector-pod.yaml")
    mutate(review)
    response = http.post("/v1/admission", json=review)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "request.malformed" and message in body["error"]["message"]
    assert http.post("/v1/admission", content=b"{").status_code == 400


# -- any request ---------------------------------------------------------------------------------

_JUNK = [None, True, 0, -1, 1e308, "", "x", [], {}, [1], {"a": 1}, "\udcff", "$(touch ran)", "'", "{", "--", "${X:-",
         "--kv-transfer-config", "x" * 5000]
_WORDS = ["vllm", "serve", "m", "--kv-transfer-config", json.dumps(NIXL), json.dumps(LMCACHE), "--config", "/etc/passwd",
          "$KV", "'", "\\", "--disable-hybrid-kv-cache-manager", "--kv-offloading-size", "8", "-O", "{", "`id`"]
_CODE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+")


def _mutated(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """``value`` with one of its values, at any depth, replaced by junk or dropped."""
    if depth < 6 and isinstance(value, dict) and value:
        value = dict(value)
        key = rng.choice(list(value))
        if rng.random() < 0.2:
            del value[key]
        else:
            value[key] = rng.choice(_JUNK) if rng.random() < 0.4 else _mutated(rng, value[key], depth + 1)
    elif depth < 6 and isinstance(value, list) and value:
        value = list(value)
        at = rng.randrange(len(value))
        value[at] = rng.choice(_JUNK) if rng.random() < 0.4 else _mutated(rng, value[at], depth + 1)
    elif rng.random() < 0.5:
        value = rng.choice(_JUNK)
    return value


def _any_request(rng: random.Random) -> tuple[str, bytes]:
    """A route and a body: a document, a command or a review, as made or with a value changed."""
    kind = rng.randrange(3)
    if kind == 0:
        body: Any = _mutated(rng, copy.deepcopy(rng.choice(list(DOCUMENTS.values()))))
    elif kind == 1:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 8))]
        body = {"command": words if rng.random() < 0.5 else " ".join(words)}
        if rng.random() < 0.3:
            body["env"] = rng.choice([{"KV": json.dumps(NIXL)}, {"KV": 1}, [], {"A": "\udcff"}])
        if rng.random() < 0.3:
            body = _mutated(rng, body)
    else:
        review = review_of(FLEET / rng.choice(["typo-connector-pod.yaml", "lmcache-statefulset.yaml", "pd-disagg.yaml"]))
        body = _mutated(rng, review) if rng.random() < 0.8 else review
    # Escaped as JSON text allows (a lone surrogate is `\udcff`), as any client may send it.
    return ("/v1/decide" if kind < 2 else "/v1/admission"), json.dumps(body).encode()


@pytest.mark.parametrize("seed", range(150))
def test_any_request_is_answered_with_json_and_never_500(http, seed):
    route, body = _any_request(random.Random(seed))
    response = http.post(route, content=body)
    assert response.status_code in (200, 400, 422), (response.status_code, response.text[:500], body[:500])
    answer = response.json()
    if response.status_code != 200:
        assert _CODE.fullmatch(answer["error"]["code"]), answer
        assert all(_CODE.fullmatch(p["code"]) for p in answer.get("problems", [])), answer
    elif route == "/v1/decide":
        assert answer["outcome"] in ("enabled", "disabled", "error", "undetermined"), answer
    else:
        assert isinstance(answer["response"]["allowed"], bool), answer


# -- no traceback in a response ----------------------------------------------------------------

def test_an_internal_error_answers_500_with_a_code_and_no_traceback(monkeypatch):
    import asyncio

    from hma_policy.server.app import create_app

    policy = hma_policy.load_policy()
    app = create_app(policy=policy)

    def broken(prepared: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a fault deep in the engine")

    monkeypatch.setattr(policy, "decide_prepared", broken)

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            return await client.post("/v1/decide", json=DOCUMENTS["enabled"])

    response = asyncio.run(ask())
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "server.internal",
                                         "message": "internal error; the service's log has the details"},
                               "problems": []}
    assert "Traceback" not in response.text and "RuntimeError" not in response.text


# -- TLS --------------------------------------------------------------------------------------

def test_tls_with_the_certificate_make_cert_makes(tmp_path):
    certs = tmp_path / "my certs"  # a space: every value in the script is quoted
    done = subprocess.run(["bash", str(REPO / "deploy/kubernetes/make-cert.sh"), str(certs)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "kubectl patch validatingwebhookconfiguration hma-policy" in done.stdout
    server = Server(tmp_path, "--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key"),
                    scheme="https", verify=ssl.create_default_context(cafile=str(certs / "ca.crt")))
    try:
        with server.client() as client:
            answer = admit(client, review_of(FLEET / "typo-connector-pod.yaml"))
            assert answer["allowed"] is False
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(server.base + "/healthz")  # the system's roots do not know the CA
        if shutil.which("curl"):
            done = subprocess.run(["curl", "-sS", "--cacert", str(certs / "ca.crt"), server.base + "/healthz"],
                                  capture_output=True, text=True, timeout=30)
            assert json.loads(done.stdout) == {"status": "ok"}
    finally:
        assert server.stop() == 0


def test_make_cert_refuses_a_name_kubernetes_would_refuse(tmp_path):
    done = subprocess.run(["bash", str(REPO / "deploy/kubernetes/make-cert.sh"), str(tmp_path), "bad name"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "`bad name` is not a Kubernetes name" in done.stderr
    assert not (tmp_path / "tls.crt").exists()


# -- the command --------------------------------------------------------------------------------

WITHOUT_SERVER_EXTRA = ("import sys\n"
                        "for name in ('uvicorn', 'starlette', 'prometheus_client', 'uvloop', 'httptools'):\n"
                        "    sys.modules[name] = None  # import fails, as where the extra is not installed\n"
                        "from hma_policy.cli import main; sys.exit(main(sys.argv[1:]))")


def test_serve_without_the_server_extra_says_how_to_install_it():
    done = subprocess.run([sys.executable, "-c", WITHOUT_SERVER_EXTRA, "serve"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("hma-policy: error: `hma-policy serve` needs the server extra, which is not installed "
                           "(no module `uvicorn`): pip install 'hma-policy[server]'\n")


def test_every_other_command_works_without_the_server_extra():
    done = subprocess.run([sys.executable, "-c", WITHOUT_SERVER_EXTRA, "decide", "--format", "json",
                           str(REPO / "examples" / "nixl-pd-decode.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "enabled"
    done = subprocess.run([sys.executable, "-c", WITHOUT_SERVER_EXTRA, "audit", "-q", str(FLEET)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "qwen-decode-canary" in done.stdout


def test_a_port_in_use_exits_2(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        for workers in ("1", "2"):
            done = subprocess.run([sys.executable, "-m", "hma_policy", "serve", "--port", str(taken.getsockname()[1]),
                                   "--workers", workers], capture_output=True, text=True, timeout=60, cwd=tmp_path)
            assert done.returncode == 2, workers
            assert "address already in use" in done.stderr.lower()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_with_invalid_rules_exits_2_before_listening(tmp_path, workers):
    rules = copy_rules(tmp_path / "rules")
    (rules / "nodes.yaml").write_text("rules: [\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "hma_policy", "serve", "--rules", str(rules), "--port", str(free_port()),
                           "--workers", workers], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "the rules are invalid" in done.stderr and "nodes.yaml" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_usage_errors_exit_2(tmp_path):
    for args, words in ((["--tls-cert", "x.pem"], "--tls-cert and --tls-key go together"),
                        (["--tls-cert", "x.pem", "--tls-key", "y.pem"], "`x.pem` is not a file"),
                        (["--port", "70000"], "a port is at most 65535"),
                        (["--workers", "0"], "must be at least 1")):
        done = subprocess.run([sys.executable, "-m", "hma_policy", "serve", *args], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 2, args
        assert words in done.stderr


# serve with uvicorn's supervisor replaced by one that has already stopped, its workers' exit statuses given.
STOPPED_SUPERVISOR = """
import sys, types
from hma_policy.cli import main
from hma_policy.server import run

class Stopped:
    processes = [types.SimpleNamespace(exitcode=int(status)) for status in sys.argv[1].split(",")]

    def run(self):
        pass

run._supervisor = lambda base, config, sockets: Stopped()
sys.exit(main(["serve", "--workers", "2", "--port", sys.argv[2]]))
"""


def test_a_worker_that_fails_to_start_ends_the_service_with_exit_status_2(tmp_path):
    # uvicorn's supervisor stops every worker and returns when one exits with its start-up failure
    # status, 3 (the rules changed on disk and no longer load): the service then exits 2, not 0.
    for statuses, expected in (("0,3", 2), ("0,0", 0), ("-15,0", 0)):
        done = subprocess.run([sys.executable, "-c", STOPPED_SUPERVISOR, statuses, str(free_port())],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == expected, (statuses, done.stderr)
        assert "Traceback" not in done.stderr


def test_the_supervisor_hands_sighup_only_to_a_worker_that_has_started(caplog):
    # A worker installs its SIGHUP handler as it starts, and SIGHUP's default action ends a process:
    # a worker still starting (it reads the rules as they are then) is left alone.
    from hma_policy.server.run import _supervisor

    class Base:  # the part of uvicorn's supervisor that handle_hup reads
        def __init__(self, config: Any, sockets: list[Any]):
            self.config, self.processes, self.should_exit = config, [], threading.Event()

    class Worker:
        def __init__(self, process: subprocess.Popen[bytes], ready: bool):
            self.pid, self.exitcode, self.ready = process.pid, None, ready

        def wait_until_ready(self, timeout: float, should_exit: threading.Event) -> bool:
            return self.ready

    started, starting = (subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2))
    try:
        supervisor = _supervisor(Base, types.SimpleNamespace(timeout_worker_healthcheck=5), [])
        supervisor.processes = [Worker(started, True), Worker(starting, False)]
        with caplog.at_level(logging.INFO, logger="hma_policy.server"):
            supervisor.handle_hup()
        assert started.wait(10) == -signal.SIGHUP
        assert starting.poll() is None
        # The one left alone is named in the log: it may serve the rules it started with.
        [skipped] = [r for r in caplog.records if getattr(r, "fields", {}).get("result") == "skipped"]
        assert skipped.levelname == "WARNING" and skipped.fields == {"event": "reload", "result": "skipped",
                                                                      "worker": starting.pid}
    finally:
        for process in (started, starting):
            process.kill()
            process.wait()


# -- SIGTERM and SIGHUP ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sighup_while_the_service_starts_does_not_stop_it(tmp_path, workers):
    # SIGHUP's default action ends a process: until the service (and each worker) handles it, it is ignored.
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "hma_policy", "serve", "--port", str(port),
                                    "--workers", workers], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, cwd=tmp_path)
    try:
        # serve has begun once it logs; from then on, a SIGHUP every 20 ms until every worker has started.
        deadline = time.monotonic() + 30
        while not log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.005)

        def started() -> int:
            return log.read_text(encoding="utf-8").count('"message": "Application startup complete."')
        sent = 0
        while started() < int(workers) and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text(encoding="utf-8")
            process.send_signal(signal.SIGHUP)
            sent += 1
            time.sleep(0.02)
        assert sent > 0 and started() == int(workers)
        time.sleep(1)  # the supervisor hands SIGHUP on every 0.5 s
        messages = [line.get("message", "") for line in map(json.loads, log.read_text(encoding="utf-8").splitlines())]
        assert not [m for m in messages if m.endswith("died")]  # no worker ended by it (and replaced)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text(encoding="utf-8")

def load(server: Server, clients: int, stop: threading.Event, results: list[Any]) -> list[threading.Thread]:
    """``clients`` keep-alive clients posting decisions until ``stop`` (bounded in count)."""
    def run() -> None:
        with server.client() as client:
            for _ in range(20000):
                if stop.is_set():
                    return
                try:
                    response = client.post("/v1/decide", json=DOCUMENTS["disabled"])
                    results.append((response.status_code, response.text))
                except httpx.TransportError as exc:  # the connection was closed or refused: never answered
                    results.append((None, type(exc).__name__))
                    if isinstance(exc, httpx.ConnectError):
                        return

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_under_load_finishes_every_request_in_flight(tmp_path, workers):
    server = Server(tmp_path, "--workers", workers)
    stop, results = threading.Event(), []
    threads = load(server, 8, stop, results)

    # One request in flight when SIGTERM comes: its body is still arriving.
    slow: list[Any] = []

    def body() -> Iterator[bytes]:
        text = json.dumps(DOCUMENTS["enabled"]).encode()
        for i in range(0, len(text), 8):
            yield text[i:i + 8]
            time.sleep(0.1)

    def slow_request() -> None:
        with server.client() as client:
            slow.append(client.post("/v1/decide", content=body()))

    slow_thread = threading.Thread(target=slow_request)
    time.sleep(1.0)
    slow_thread.start()
    time.sleep(0.3)
    answered_before = sum(1 for status, _ in results if status == 200)
    server.process.send_signal(signal.SIGTERM)
    slow_thread.join(30)
    assert server.process.wait(30) == 0
    stop.set()
    for thread in threads:
        thread.join(30)

    assert answered_before > 50
    [response] = slow
    assert response.status_code == 200 and response.json()["outcome"] == "enabled"
    answered = [(status, text) for status, text in results if status is not None]
    assert {status for status, _ in answered} == {200}
    assert all(json.loads(text)["outcome"] == "disabled" for _, text in answered)
    # A request the server did not take (refused, or its connection closed while idle) was never answered:
    # the client knows it failed, and no request got a partial or error answer.
    assert {text for status, text in results if status is None} <= {"ConnectError", "RemoteProtocolError", "ReadError"}
    lines = server.lines()
    assert not any("Traceback" in json.dumps(line) for line in lines)
    assert any(line.get("message") == "Shutting down" for line in lines)


def reload_and_wait(server: Server, workers: int, result: str) -> None:
    seen = len([l for l in server.lines() if l.get("event") == "reload"])
    server.process.send_signal(signal.SIGHUP)
    server.wait_log(lambda l: l.get("event") == "reload", count=seen + workers)
    news = [l for l in server.lines() if l.get("event") == "reload"][seen:]
    assert {l["result"] for l in news} == {result}
    assert len({l["pid"] for l in news}) == workers  # every worker reloaded


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_keeps_the_old_policy_when_the_new_one_is_bad_and_serves_a_good_one(tmp_path, workers):
    rules = copy_rules(tmp_path / "rules")
    server = Server(tmp_path, "--rules", str(rules), "--workers", str(workers))
    try:
        # Rules edited while a worker starts are what that worker loads: the edit waits for every worker.
        server.wait_workers(workers)
        old = hma_policy.load_policy(rules).digest
        with server.client() as client:
            def served() -> set[tuple[str, str]]:
                """(digest, outcome of an LMCache deployment) over enough requests to reach every worker."""
                return {(r["policy"]["digest"], r["outcome"])
                        for r in (client.post("/v1/decide", json=DOCUMENTS["disabled"]).json() for _ in range(40))}

            assert served() == {(old, "disabled")}
            # A bad policy: the old one stays, and the log says why.
            original = (rules / "connectors.yaml").read_text(encoding="utf-8")
            (rules / "connectors.yaml").write_text(original + "\n  : [\n", encoding="utf-8")
            reload_and_wait(server, workers, "failed")
            failed = [l for l in server.lines() if l.get("result") == "failed"]
            assert all(l["level"] == "error" and l["digest"] == old and "connectors.yaml" in l["problems"][0]
                       for l in failed)
            assert served() == {(old, "disabled")}
            assert client.get("/readyz").json()["policy"]["digest"] == old
            # A good one: served at once by every worker.
            (rules / "connectors.yaml").write_text(original, encoding="utf-8")
            lmcache_supported(tmp_path / "better")
            shutil.copy(tmp_path / "better" / "connectors.yaml", rules / "connectors.yaml")
            new = hma_policy.load_policy(rules).digest
            assert new != old
            reload_and_wait(server, workers, "loaded")
            assert served() == {(new, "enabled")}
            samples = metric_samples(client.get("/metrics").text)
            assert samples[("hma_policy_policy_reloads_total", (("result", "failed"),))] == workers
            assert samples[("hma_policy_policy_reloads_total", (("result", "loaded"),))] == workers
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_a_worker_started_in_place_of_one_that_died_serves_the_rules_that_loaded_last(tmp_path):
    # The workers read copies of the rules: rules on disk that no longer load neither reach a
    # replacement worker nor stop the service (uvicorn stops it when a worker cannot start).
    rules = copy_rules(tmp_path / "rules")
    server = Server(tmp_path, "--rules", str(rules), "--workers", "2")
    try:
        server.wait_workers(2)
        old = hma_policy.load_policy(rules).digest
        original = (rules / "connectors.yaml").read_text(encoding="utf-8")
        (rules / "connectors.yaml").write_text(original + "\n  : [\n", encoding="utf-8")
        reload_and_wait(server, 2, "failed")
        victim = next(l["pid"] for l in server.lines() if l.get("event") == "load")
        os.kill(victim, signal.SIGKILL)
        server.wait_log(lambda l: l.get("message", "").endswith("died"))
        [replacement] = server.wait_log(lambda l: l.get("event") == "load" and l["pid"] != victim, count=2)[1:]
        assert replacement["digest"] == old and server.process.poll() is None
        with server.client() as client:
            answers = [client.post("/v1/decide", json=DOCUMENTS["disabled"]).json() for _ in range(20)]
            assert {(a["policy"]["digest"], a["outcome"]) for a in answers} == {(old, "disabled")}
            assert client.get("/readyz").json()["policy"]["source"] == str(rules)
        # Rules that load again reach every worker, the replacement among them.
        (rules / "connectors.yaml").write_text(original, encoding="utf-8")
        lmcache_supported(tmp_path / "better")
        shutil.copy(tmp_path / "better" / "connectors.yaml", rules / "connectors.yaml")
        reload_and_wait(server, 2, "loaded")
        loaded = [l for l in server.lines() if l.get("result") == "loaded" and l.get("event") == "reload"]
        assert replacement["pid"] in {l["pid"] for l in loaded}
        assert {l["digest"] for l in loaded} == {hma_policy.load_policy(rules).digest}
    finally:
        assert server.stop() == 0


def test_a_launch_is_decided_with_the_release_its_image_tag_names():
    # The admission webhook reads the release as the audit does: the image
    # tag of the container, and the policy set decides with that release.
    import orjson

    from hma_policy.audit.sources import find_deployments
    from hma_policy.core.policies import PolicySet
    from hma_policy.server.admission import hint_for

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.33.0",  # its entrypoint is `vllm serve`
        "args": ["m", "--kv-transfer-config",
                 '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}']}]}}
    (deployment,) = find_deployments("object.json", orjson.dumps(pod).decode()).deployments
    hint = hint_for(deployment)
    assert hint is not None and hint.version == "0.33.0" and "vllm/vllm-openai:v0.33.0" in hint.origin
    policies = PolicySet()
    try:
        decision = policies.decide(deployment.document, hint=hint)
    finally:
        policies.close()
    assert decision.vllm is not None and decision.vllm.release == "0.33.0"
    assert decision.vllm.source == hint.origin
