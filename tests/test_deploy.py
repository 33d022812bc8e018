"""deploy/kubernetes/: the manifests parse, pass the Kubernetes API's JSON
Schemas (kubernetes-validate, strict: no unknown field), and hold what
issue 18 asks of them; the webhook's rules cover every kind the admission
endpoint reads, and its Service, port and path are the served ones."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
MANIFESTS = ("namespace.yaml", "deployment.yaml", "service.yaml", "pdb.yaml", "webhook.yaml")


def objects() -> dict[str, dict[str, Any]]:
    out = {}
    for name in MANIFESTS:
        for obj in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")):
            out[obj["kind"]] = obj
    return out


OBJECTS = objects()


def test_the_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text(encoding="utf-8"))
    assert sorted(kustomization["resources"]) == sorted(MANIFESTS)


@pytest.mark.parametrize("version", ["1.30", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_each_object_passes_the_kubernetes_schema(kind, version):
    # 1.30: the oldest release with the preStop `sleep` action on by default.
    kubernetes_validate.validate(OBJECTS[kind], version, strict=True)


def test_the_schema_check_catches_a_wrong_field():
    broken = yaml.safe_load(yaml.safe_dump(OBJECTS["Deployment"]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_the_deployment_is_replicated_probed_bounded_and_unprivileged():
    deployment = OBJECTS["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {p["httpGet"]["scheme"] for p in (container["readinessProbe"], container["livenessProbe"])} == {"HTTPS"}
    assert set(container["resources"]["requests"]) == set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    args = container["args"]
    assert args[0] == "serve" and "--tls-cert=/etc/hma-policy/tls/tls.crt" in args
    assert "--tls-key=/etc/hma-policy/tls/tls.key" in args
    # The pod has time to finish its requests: --graceful-timeout and the preStop pause fit the grace period.
    graceful = int(next(a for a in args if a.startswith("--graceful-timeout=")).split("=")[1])
    assert graceful + container["lifecycle"]["preStop"]["sleep"]["seconds"] < pod["terminationGracePeriodSeconds"]


def test_the_pdb_and_service_select_the_deployments_pods():
    labels = OBJECTS["Deployment"]["spec"]["template"]["metadata"]["labels"]
    pdb = OBJECTS["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["minAvailable"] == 1 < OBJECTS["Deployment"]["spec"]["replicas"]
    service = OBJECTS["Service"]["spec"]
    assert service["selector"].items() <= labels.items()
    [port] = service["ports"]
    [container] = OBJECTS["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert port["targetPort"] == container["ports"][0]["name"]
    assert f"--port={container['ports'][0]['containerPort']}" in container["args"]


def test_the_webhook_configuration():
    [webhook] = OBJECTS["ValidatingWebhookConfiguration"]["webhooks"]
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["sideEffects"] == "None"
    assert webhook["failurePolicy"] == "Ignore"
    assert 1 <= webhook["timeoutSeconds"] <= 30
    assert webhook["namespaceSelector"] == {"matchLabels": {"hma-policy.io/admission": "enabled"}}
    # The webhook's own namespace is not opted in: it never reviews the pods that serve it.
    assert "hma-policy.io/admission" not in OBJECTS["Namespace"]["metadata"].get("labels", {})
    service = webhook["clientConfig"]["service"]
    assert (service["name"], service["namespace"], service["path"], service["port"]) == (
        OBJECTS["Service"]["metadata"]["name"], OBJECTS["Service"]["metadata"]["namespace"], "/v1/admission",
        OBJECTS["Service"]["spec"]["ports"][0]["port"])
    covered = {(group, resource) for rule in webhook["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"]}
    assert covered >= {("", "pods"), ("apps", "deployments"), ("apps", "statefulsets"), ("batch", "jobs"),
                       ("leaderworkerset.x-k8s.io", "leaderworkersets"), ("serving.kserve.io", "llminferenceservices"),
                       ("nvidia.com", "dynamographdeployments"), ("production-stack.vllm.ai", "vllmruntimes"),
                       ("llm-d.ai", "modelservices"), ("disaggregatedset.x-k8s.io", "disaggregatedsets"),
                       ("orchestration.aibrix.ai", "stormservices"), ("ray.io", "rayclusters")}
    assert all(rule["operations"] == ["CREATE", "UPDATE"] for rule in webhook["rules"])
    # The choice of failurePolicy is explained where it is made.
    assert re.search(r"^# failurePolicy: Ignore\. ", (DEPLOY / "webhook.yaml").read_text(encoding="utf-8"), re.M)


def test_make_cert_is_strict_bash():
    script = (DEPLOY / "make-cert.sh").read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in script
    assert subprocess.run(["bash", "-n", str(DEPLOY / "make-cert.sh")], timeout=30).returncode == 0
