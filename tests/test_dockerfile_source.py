"""Dockerfiles as BuildKit reads them (engine/audit/sources/dockerfile.py):
here-documents (issue 20, defect 4), files the Dockerfile makes, WORKDIR,
COPY --from, and the release its image or a pip pin names."""

from __future__ import annotations

import json

import pytest

from hma_policy.audit.sources import SourceLimits, read_source
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import LMCACHE, NIXL, ktc, linear_ratio, only, write


CMD_DISABLE = f'CMD ["m", "--kv-transfer-config", {json.dumps(LMCACHE)}, "--disable-hybrid-kv-cache-manager"]\n'


@pytest.mark.parametrize("run", [
    'RUN cat <<< "x"',                    # a here-string
    "RUN echo 'x <<EOF'",                 # quoted: no here-document
    'RUN echo "a <<EOF b"',
    "RUN cat <<<EOF",
])
def test_what_is_not_a_here_document_does_not_swallow_the_lines_after_it(tmp_path, run):
    d = only(read_source(write(tmp_path / "Dockerfile", f"FROM vllm/vllm-openai:v0.33.0\n{run}\n{CMD_DISABLE}")))
    assert d.line == 3 and d.document["disable_hybrid_kv_cache_manager"] is True


def test_several_here_documents_on_one_line_are_read_in_order(tmp_path):
    # B's body holds a CMD: it is text, not an instruction.
    dockerfile = write(tmp_path / "Dockerfile", f"""FROM vllm/vllm-openai:v0.33.0
RUN <<A cat - <<B > /dev/null
echo a
A
CMD ["forged", "--kv-transfer-config", {json.dumps(NIXL)}]
B
{CMD_DISABLE}""")
    d = only(read_source(dockerfile))
    assert (d.line, d.name, ktc(d)["kv_connector"]) == (7, "m", "LMCacheConnectorV1")


def test_copy_of_a_here_document_makes_the_config_file_a_later_config_reads(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", """FROM vllm/vllm-openai:v0.33.0
ENV ROLE=kv_producer
COPY <<EOF /app/cfg.yaml
kv-transfer-config: '{"kv_connector": "NixlConnector", "kv_role": "$ROLE"}'
EOF
COPY <<'EOF' /app/raw.yaml
kv-transfer-config: '{"kv_connector": "NixlConnector", "kv_role": "$ROLE"}'
EOF
CMD ["m", "--config", "/app/cfg.yaml"]
""")
    d = only(read_source(dockerfile))
    assert ktc(d) == {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}  # unquoted: ENV substituted
    assert d.chain == (str(dockerfile), "EOF (here-document at line 4)")
    raw = only(read_source(write(tmp_path / "Dockerfile.raw", dockerfile.read_text().replace("/app/cfg.yaml\"]", "/app/raw.yaml\"]"))))
    assert ktc(raw)["kv_role"] == "$ROLE"  # quoted: kept as written


def test_a_tab_stripping_here_document_and_a_run_script_that_writes_the_config(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", f"""FROM vllm/vllm-openai:v0.33.0
WORKDIR /srv
RUN <<-EOF
\tmkdir -p conf
\tcat > conf/serve.yaml <<'INNER'
\tkv-transfer-config: '{NIXL}'
\tINNER
\tEOF
CMD ["m", "--config", "conf/serve.yaml"]
""")
    d = only(read_source(dockerfile))
    assert ktc(d)["kv_connector"] == "NixlConnector"


def test_copy_from_an_earlier_stage_and_from_the_build_context(tmp_path):
    write(tmp_path / "ctx" / "serve.yaml", f"kv-transfer-config: '{LMCACHE}'\n")
    dockerfile = write(tmp_path / "ctx" / "Dockerfile", f"""FROM python:3.12 AS config
COPY <<EOF /cfg/serve.yaml
kv-transfer-config: '{NIXL}'
EOF
FROM vllm/vllm-openai:v0.33.0
COPY --from=config /cfg/serve.yaml /etc/vllm/a.yaml
COPY serve.yaml /etc/vllm/b.yaml
CMD ["m", "--config", "/etc/vllm/a.yaml"]
""")
    assert ktc(only(read_source(dockerfile)))["kv_connector"] == "NixlConnector"
    other = write(tmp_path / "ctx" / "Dockerfile.b", dockerfile.read_text().replace('/etc/vllm/a.yaml"]', '/etc/vllm/b.yaml"]'))
    assert ktc(only(read_source(other)))["kv_connector"] == "LMCacheConnectorV1"


def test_an_unclosed_here_document_is_a_located_problem(tmp_path):
    source = read_source(write(tmp_path / "Dockerfile", "FROM vllm/vllm-openai\nRUN <<EOF\necho\n"))
    assert [(p.code, p.line) for p in source.problems] == [("source.dockerfile", 2)]



def test_a_run_script_the_shell_cannot_read_is_a_problem_only_of_a_dockerfile_that_names_vllm(tmp_path):
    # All-Hands-AI/OpenHands (156d0686) runtime_templates/Dockerfile.j2, a Jinja template whose RUN holds
    # `{%- if ('mswebench' in base_image) -%}` and never mentions vLLM: a source.shell_syntax file problem, where a
    # shell script that names no vLLM is skipped (survey 35b).
    run = "RUN echo {% if (a) %}\n"
    other = read_source(write(tmp_path / "other" / "Dockerfile", "FROM ubuntu:22.04\n" + run))
    assert (other.deployments, other.problems) == ((), ())
    served = read_source(write(tmp_path / "served" / "Dockerfile", "FROM vllm/vllm-openai:v0.20.0\n" + run))
    assert [(p.code, p.line, p.message) for p in served.problems] == [
        ("source.shell_syntax", 2, "cannot read the script: unexpected `(`")]

def test_env_doubling_is_bounded(tmp_path):
    text = "FROM python:3.12\nENV X=ab\n" + "ENV X=$X$X\n" * 40 + 'CMD vllm serve m --kv-transfer-config "$X"\n'
    source = read_source(write(tmp_path / "Dockerfile", text), limits=SourceLimits(max_variable_length=4096))
    # X doubles on each line from line 3: 2 * 2**12 = 8192 characters at line 14.
    assert [(p.code, p.line) for p in source.problems] == [("source.limit", 14)]
    assert only(source).problems[0].code == "source.unresolved"


def test_run_options_are_buildkits_not_the_scripts(tmp_path):
    # runpod-workers' Dockerfile: `RUN --mount=type=secret,... \` then `if ...; then ... fi`
    # was a shell syntax error ("unexpected `then`"): the options were read as the script's.
    source = read_source(write(tmp_path / "Dockerfile", """FROM python:3.12
RUN --mount=type=secret,id=HF_TOKEN,required=false --network=default \\
    if [ -f /run/secrets/HF_TOKEN ]; then \\
        echo found; \\
    fi
RUN --mount=type=cache,target=/root/.cache pip install "vllm==0.22.0"
""" + f"CMD vllm serve m --kv-transfer-config '{NIXL}'\n"))
    assert source.problems == ()
    assert only(source).release == ReleaseHint("0.22.0", "pip pin vllm==0.22.0 at line 6")


# -- the release (issue 16, part 4) ---------------------------------------------------------------------

def test_the_release_is_the_base_images_tag_or_a_pip_pin_on_top_of_it(tmp_path):
    tagged = only(read_source(write(tmp_path / "a" / "Dockerfile", f"FROM docker.io/vllm/vllm-openai:v0.21.0\n{CMD_DISABLE}")))
    assert tagged.release == ReleaseHint("0.21.0", "image tag docker.io/vllm/vllm-openai:v0.21.0")
    pinned = only(read_source(write(tmp_path / "b" / "Dockerfile", "ARG VLLM=0.22.0\nFROM python:3.12 AS base\n"
                                    "RUN pip install --no-cache-dir \"vllm==${VLLM}\" lmcache\nFROM base\n"
                                    f"CMD vllm serve m --kv-transfer-config '{NIXL}'\n")))
    assert pinned.release == ReleaseHint("0.22.0", "pip pin vllm==0.22.0 at line 3")
    latest = only(read_source(write(tmp_path / "c" / "Dockerfile", f"FROM vllm/vllm-openai:latest\n{CMD_DISABLE}")))
    assert latest.release == ReleaseHint(None, "image tag vllm/vllm-openai:latest: no release in the tag")
    assert [n.message for n in latest.notes] == [
        "the vLLM release is not known: image tag vllm/vllm-openai:latest: no release in the tag"]


@pytest.mark.parametrize("entrypoint", [
    'ENTRYPOINT ["vllm", "serve"]',
    'ENTRYPOINT ["bash", "-c", "exec vllm serve \\"$@\\"", "--"]',  # intel/llm-scaler vllm/docker/Dockerfile
    "",  # vLLM's release image's own ENTRYPOINT
])
def test_an_entrypoint_without_cmd_takes_the_arguments_the_image_is_run_with(tmp_path, entrypoint):
    # volcano-sh/kthena (3cc0572) docker/Dockerfile.mooncake-npu-a3 and intel/llm-scaler (8d66bf9): the
    # model and every option come from `docker run IMAGE ARGS` or a pod's `args` (kthena's own
    # example passes MooncakeConnectorV1 so); the launch was decided with no word of them (survey 24b).
    d = only(read_source(write(tmp_path / "Dockerfile", f"FROM vllm/vllm-openai:v0.13.0\n{entrypoint}\n")))
    assert [(n.code, n.message) for n in d.notes] == [(
        "source.unresolved_arguments", "the command also takes `the container's arguments` (which are given where "
        "the image runs (`docker run IMAGE ARGS`, a pod's `args`): the Dockerfile has no CMD); only the options "
        "written here are read, and it may hold others")]
    # A CMD is what it runs with, unless run with others, as any image: read as written.
    assert only(read_source(write(tmp_path / "b" / "Dockerfile", f"FROM vllm/vllm-openai:v0.13.0\n{entrypoint}\n"
                                  'CMD ["m", "--port", "80"]\n'))).notes == ()


def test_a_build_of_vllms_source_at_a_release_tag_is_that_release(tmp_path):
    # intel/ipex-llm (de6bce27) docker/llm/serving/xpu/docker/Dockerfile builds vLLM from its repository
    # (`git clone -b v0.8.3 https://github.com/vllm-project/vllm /llm/vllm && cd /llm/vllm && ...
    # python setup.py install`), the cpu one with `git checkout v0.6.6.post1`; mlcommons/inference
    # (b66003e1) speech2text at a commit (`pip install . --no-build-isolation`). Their launches were
    # decided as the default release, the base image naming none.
    def release(name: str, run: str) -> ReleaseHint | None:
        return only(read_source(write(tmp_path / name / "Dockerfile", f"FROM ubuntu:22.04\nRUN {run}\n"
                                      f"CMD vllm serve m --kv-transfer-config '{NIXL}'\n"))).release
    assert release("tag", "mkdir -p /llm && cd /llm && \\\n  # Install vllm\n  git clone -b v0.8.3 "
                          "https://github.com/vllm-project/vllm /llm/vllm && cd /llm/vllm && \\\n"
                          "  VLLM_TARGET_DEVICE=xpu python setup.py install") == \
        ReleaseHint("0.8.3", "vLLM built from its repository at tag v0.8.3 (line 2)")
    assert release("checkout", "git clone https://github.com/vllm-project/vllm.git && cd ./vllm && "
                               "git checkout v0.6.6.post1 && VLLM_TARGET_DEVICE=cpu python3 setup.py install") == \
        ReleaseHint("0.6.6.post1", "vLLM built from its repository at tag v0.6.6.post1 (line 2)")
    assert release("commit", "git clone https://github.com/vllm-project/vllm vllm-cpu && cd vllm-cpu && "
                             "git checkout b124e1085b1bf977e3dac96d99ffd9d8ddfdb6cc && pip install . --no-build-isolation") \
        == ReleaseHint(None, "vLLM is built from its repository at `b124e1085b1bf977e3dac96d99ffd9d8ddfdb6cc`, no "
                             "release tag (line 2)")
    assert release("branch", "git clone https://github.com/vllm-project/vllm && pip install -e ./vllm") == \
        ReleaseHint(None, "vLLM is built from its repository at its default branch (line 2)")
    # A clone not built, a build of another project's clone, or `pip install vllm` from PyPI, names none.
    base = ReleaseHint(None, "image ubuntu:22.04 is not vLLM's release image: its tag is not read as a vLLM release")
    assert release("unbuilt", "git clone -b v0.8.3 https://github.com/vllm-project/vllm") == base
    assert release("other", "git clone -b v0.8.3 https://github.com/vllm-project/vllm && "
                            "git clone https://github.com/LMCache/LMCache && cd LMCache && pip install -e .") == base
    assert release("pypi", "git clone -b v0.8.3 https://github.com/vllm-project/vllm && pip install vllm") == base
    # pip's own build of the repository at a ref (rh-aiservices-bu/llm-on-openshift's hpu Containerfile
    # builds HabanaAI's fork so, `pip install git+https://github.com/HabanaAI/vllm-fork.git@v0.6.6.post1+...`;
    # survey 20j): vLLM's repository at a tag is that release, a fork's names none.
    assert release("pip-git", "pip install -v git+https://github.com/vllm-project/vllm.git@v0.8.3") == \
        ReleaseHint("0.8.3", "vLLM built from its repository at tag v0.8.3 (line 2)")
    assert release("pip-main", "pip install 'vllm @ git+https://github.com/vllm-project/vllm@main'") == \
        ReleaseHint(None, "vLLM is built from its repository at `main`, no release tag (line 2)")
    assert release("fork", "pip install git+https://github.com/HabanaAI/vllm-fork.git@v0.6.6.post1+Gaudi-1.20.0") == base
    # A checkout and `pip install .` after the script changed into another tree are that tree's: vllm-gaudi's
    # .cd/Dockerfile.rhel.ubi.vllm (091bbadd) builds vLLM, then `cd $VLLM_PATH2 && git checkout
    # ${VLLM_GAUDI_COMMIT} && pip install .`, its plugin at `main` (survey 22c): that was taken for vLLM's ref.
    tag_0_11 = ReleaseHint("0.11.0", "vLLM built from its repository at tag v0.11.0 (line 2)")
    for name, run, hint in (
            ("plugin", "git clone https://github.com/vllm-project/vllm.git /vllm && cd /vllm && \\\n  git checkout "
                       "v0.11.0 && pip install . && cd /vllm-gaudi && git checkout v0.9.0 && pip install .", tag_0_11),
            ("back", "git clone https://github.com/vllm-project/vllm.git /src/vllm && cd /plugin && git checkout v0.9.0 "
                     "&& cd /src/vllm/ && git checkout v0.11.0 && pip install .", tag_0_11),
            ("elsewhere", "git clone -b v0.11.0 https://github.com/vllm-project/vllm.git /vllm && cd /other && "
                          "pip install .", base),
            # A ref the script sets on one path only: shown as written (its marker's characters were in the origin).
            ("ref", "if [ -z \"$REF\" ]; then REF=main; fi && git clone https://github.com/vllm-project/vllm /vllm && "
                    "cd /vllm && git checkout $REF && pip install .",
             ReleaseHint(None, "vLLM is built from its repository at `$REF`, no release tag (line 2)"))):
        assert release(name, run) == hint, name


def test_a_folder_copied_from_an_earlier_stage_brings_its_files(tmp_path):
    # intel/ipex-llm (de6bce27) xpu Dockerfile: the build stage copies the benchmark scripts into /llm/,
    # the final stage takes `COPY --from=build /llm/ /llm/` and builds vLLM v0.8.3 on top: the scripts
    # run that release (they were decided as the default release).
    write(tmp_path / "bench.py", 'from vllm import LLM\nllm = LLM(model="m")\n')
    write(tmp_path / "Dockerfile", "FROM ubuntu:22.04 AS build\nCOPY ./bench.py ./other.txt /llm/\n"
                                   "FROM ubuntu:22.04\nCOPY --from=build /llm/ /llm/\n"
                                   "RUN git clone -b v0.8.3 https://github.com/vllm-project/vllm /llm/vllm && "
                                   "cd /llm/vllm && python setup.py install\n")
    (launch,) = read_source(tmp_path / "bench.py", roots=[tmp_path]).deployments
    assert launch.release == ReleaseHint("0.8.3", "vLLM built from its repository at tag v0.8.3 (line 5) in "
                                                  f"{tmp_path / 'Dockerfile'}, which copies this file into the image it builds")


def test_a_build_argument_without_a_default_is_a_value_not_known(tmp_path):
    # GoogleCloudPlatform/generative-ai (23b75dab) cloud_run_vllm_gemma3_inference.ipynb writes a Dockerfile
    # with `ARG MODEL`, `ENV HF_MODEL=$MODEL` and `--model ${HF_MODEL}`; cloudbuild.yaml passes
    # `--build-arg MODEL=...`. The build argument was read as empty, so `--model` had no value: a false
    # `source.missing_value` error. It is a value the Dockerfile does not give.
    d = only(read_source(write(tmp_path / "Dockerfile", (
        "FROM vllm/vllm-openai:v0.10.1\nARG MODEL\nARG PORT=8080\nENV HF_MODEL=$MODEL\n"
        "ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --port ${PORT} --model ${HF_MODEL} "
        f"--kv-transfer-config '{NIXL}'\n"))))
    assert (d.problems, ktc(d)["kv_connector"]) == ((), "NixlConnector")
    # (a shell-form ENTRYPOINT expands `${PORT}` when the container starts: a build argument is not there)
    assert sorted(n.message for n in d.notes) == [
        "`--port` takes its value from `${PORT}`, which this file does not set; the decision does not read it",
        "the model is `$MODEL`, where `$MODEL` is a build argument the Dockerfile gives no default; the decision "
        "does not read the model's name"]
    # An empty default is the same idiom (koyeb/example-vllm 08ea12d Dockerfile.bundled_model: `ARG MODEL_NAME=`, the
    # name its CI gives with --build-arg): it was the same false error (survey 42b).
    d = only(read_source(write(tmp_path / "Dockerfile", (
        "FROM vllm/vllm-openai:v0.10.1\nARG MODEL=\nENV HF_MODEL=$MODEL\n"
        "ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --model $HF_MODEL --gpu-memory-utilization 0.95\n"))))
    assert (d.problems, [n.message for n in d.notes]) == ((), [
        "the model is `$MODEL`, where `$MODEL` is a build argument the Dockerfile gives no default; the decision "
        "does not read the model's name"])
    # Another package whose name starts with vllm, its version not known, is no pin of vLLM (vllm-project/aibrix's
    # Dockerfile.vllm: `ARG VLLM_OMNI_VERSION=""`, `pip install vllm-omni==${VLLM_OMNI_VERSION}`).
    d = only(read_source(write(tmp_path / "Dockerfile", (
        "FROM vllm/vllm-openai:v0.21.0\nARG V=\"\"\nRUN pip install vllm-omni==${V}\nCMD [\"--model\", \"m\"]\n"))))
    assert (d.release.version, d.notes) == ("0.21.0", ())


@pytest.mark.parametrize("make, size", [
    # Each instruction made its variables anew from every ENV and ARG before it: 8,000 ENV lines took 2 s.
    (lambda n: "".join(f"ENV A{i}=x{i}\n" for i in range(n)), 2000),
    (lambda n: "".join(f"ARG A{i}=x\n" for i in range(n)), 8000),
    # Each RUN script was handed every ENV as its environment: 4,000 of each took 14 s.
    (lambda n: "".join(f"ENV A{i}=x{i}\n" for i in range(n)) + "".join(f"RUN echo {i} $A{i}\n" for i in range(n)), 1000),
], ids=["env", "arg", "env-and-run"])
def test_many_variables_are_read_in_linear_time(tmp_path, make, size):
    ratio = linear_ratio(lambda n: "FROM vllm/vllm-openai:v0.10.0\n" + make(n) + 'CMD ["vllm", "serve", "m"]\n', size,
                         tmp_path, "Dockerfile")
    assert ratio < 3.0, ratio


def test_a_run_script_reads_the_variables_it_names(tmp_path):
    # A RUN script is handed the variables whose names it holds, no longer every one: the config it
    # writes holds their values.
    dockerfile = write(tmp_path / "Dockerfile", """FROM vllm/vllm-openai:v0.33.0
ENV ROLE=kv_producer OTHER=x
RUN echo "kv-transfer-config: '{\\"kv_connector\\": \\"NixlConnector\\", \\"kv_role\\": \\"$ROLE\\"}'" > /c.yaml
CMD ["m", "--config", "/c.yaml"]
""")
    assert ktc(only(read_source(dockerfile))) == {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}
