"""RoleBasedGroups (engine/audit/sources/rbg.py): each role's pods as the RBG
controller builds them, from a role template and its strategic-merge patches
(sgl-project/rbg, survey 42a)."""

from __future__ import annotations

from hma_policy.audit.run import audit
from hma_policy.audit.sources import read_source
from sourcefiles import NIXL, ktc, write


def _group(tmp_path, file: str, name: str, spec: str, version: str = "v1alpha2", kind: str = "RoleBasedGroup"):
    """A RoleBasedGroup file: its header, then ``spec`` (the lines under `spec:`)."""
    return write(tmp_path / file, f"apiVersion: workloads.x-k8s.io/{version}\nkind: {kind}\nmetadata: {{name: {name}}}\n"
                                  f"spec:\n{spec}")


def _launches(path):
    return [(d.line, d.role, d.container, d.release.version if d.release else None) for d in read_source(path).deployments]


def test_a_role_that_names_a_role_template_runs_it_with_its_patch(tmp_path):
    # sgl-project/rbg (993491fb) examples/inference/ecosystem/mooncake/mooncake-transfer-engine/
    # vllm-pd-disagg-with-mooncake-te.yaml: the role template `vllm-base` gives the image, and each role's
    # `templateRef.patch` the command. The template was a launch of its own, and the roles were read
    # without its image (no release).
    group = _group(tmp_path, "pd.yaml", "pd", f"""\
  roleTemplates:
    - name: vllm-base
      template:
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.21.0
              env: [{{name: VLLM_USE_V1, value: "1"}}]
  roles:
    - name: prefill
      standalonePattern:
        templateRef:
          name: vllm-base
          patch:
            spec:
              containers:
                - name: vllm
                  command: [vllm, serve]
                  args: [Qwen/Qwen3-0.6B, --kv-transfer-config, '{NIXL}']
""")
    (d,) = read_source(group).deployments
    assert (d.format, d.line, d.role, d.container, d.release.version, ktc(d)["kv_connector"], d.document["env"]) == (
        "rbg", 21, "prefill", "vllm", "0.21.0", "NixlConnector", {"VLLM_USE_V1": "1"})
    assert d.id == f"{group}#RoleBasedGroup/pd/prefill/vllm"
    (entry,) = audit([str(group)]).entries
    assert (entry.decision["outcome"], entry.decision["warnings"][0]["code"]) == ("disabled", "hma.auto_disabled")


def test_a_leader_and_its_workers_each_run_the_template_with_their_own_patch(tmp_path):
    # AliyunContainerService/rolebasedgroup (77b103e5) examples/base/lws.yaml (v1alpha1): `patchLeaderTemplate`
    # runs vLLM's server, `patchWorkerTemplate` a Ray worker, over the role's template (its image and
    # VLLM_USE_V1=0). The leader's patch was read alone, as role `worker`, and the template as a launch too.
    v1 = _group(tmp_path, "lws.yaml", "vllm-distributed", """\
  roles:
    - name: worker
      leaderWorkerSet:
        size: 2
        patchLeaderTemplate:
          spec:
            containers:
              - name: vllm
                command: [sh, -c, "python3 -m vllm.entrypoints.openai.api_server --model /m"]
        patchWorkerTemplate:
          spec:
            containers:
              - name: vllm
                command: [sh, -c, "ray start --block --address=$(LWS_LEADER_ADDRESS):6379"]
      template:
        spec:
          containers:
            - {name: vllm, image: vllm/vllm-openai:v0.10.0, env: [{name: VLLM_USE_V1, value: "0"}]}
""", version="v1alpha1")
    (leader,) = read_source(v1).deployments
    assert (leader.line, leader.role, leader.release.version, leader.document["env"]) == (
        12, "worker-leader", "0.10.0", {"VLLM_USE_V1": "0"})
    # v1alpha2: a worker patch that gives only `args` runs the template's vLLM image with them (inference-ext-cli's
    # headless workers); neither the template alone nor a patch alone is a pod.
    v2 = _group(tmp_path, "lwp.yaml", "mn", f"""\
  roles:
    - name: decode
      leaderWorkerPattern:
        size: 2
        template:
          spec:
            containers:
              - {{name: vllm, image: vllm/vllm-openai:v0.21.0, args: [--model, m, --kv-transfer-config, '{NIXL}']}}
        workerTemplatePatch:
          spec:
            containers:
              - {{name: vllm, args: [--model, m, --kv-transfer-config, '{NIXL}', --headless]}}
""")
    assert _launches(v2) == [(12, "decode-leader", "vllm", "0.21.0"), (16, "decode-worker", "vllm", "0.21.0")]
    assert [n.message for d in read_source(v2).deployments for n in d.notes] == []


def test_a_group_set_and_custom_components_are_read(tmp_path):
    group_set = _group(tmp_path, "set.yaml", "set", """\
  groupTemplate:
    spec:
      roles:
        - name: prefill
          standalonePattern:
            template:
              spec:
                containers:
                  - {name: vllm, image: vllm/vllm-openai:v0.21.0, args: [--model, m]}
        - name: mixed
          customComponentsPattern:
            components:
              - name: engine
                template:
                  spec:
                    containers:
                      - {name: vllm, image: vllm/vllm-openai:v0.22.0, args: [--model, m]}
              - name: proxy
                template:
                  spec:
                    containers:
                      - {name: proxy, image: nginx:1.27}
""", kind="RoleBasedGroupSet")
    assert _launches(group_set) == [(13, "prefill", "vllm", "0.21.0"), (21, "mixed-engine", "vllm", "0.22.0")]
    # Another group's objects of the same kind name are no RoleBasedGroup.
    other = write(tmp_path / "other.yaml", "apiVersion: example.com/v1\nkind: RoleBasedGroup\nmetadata: {name: x}\n"
                                           "spec:\n  roles:\n    - name: r\n      template:\n        spec:\n"
                                           "          containers: [{name: c, image: vllm/vllm-openai:v0.21.0}]\n")
    assert [d.format for d in read_source(other).deployments] == ["kubernetes"]
