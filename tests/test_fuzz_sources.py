"""Fuzzing the source readers (issue 20, "the rest of each class"): shell
scripts, Dockerfiles and compose files generated from their grammars, each
read

- in linear time (CPU time against the same structure at twice the size),
- without raising (every problem a typed, located `source.*`/`input.*` one),
- without running anything (a canary file that a `touch` in the input
  would create never appears),
- in agreement with a reference where one exists: the shell parser's words
  against :func:`shlex.split`, Docker's word splitting against it too, on
  the quoting both define alike.

The default run has a fixed small budget; `-m slow` runs longer, and
HMA_FUZZ_EXAMPLES=N sets the examples of every property (docs/hardening.md).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hma_policy.audit.sources import read_source
from hma_policy.audit.sources.context import Ctx
from hma_policy.audit.sources.dockerfile import DockerWords
from hma_policy.audit.sources.shell_syntax import parse_script
from hma_policy.audit.sources.shell_tree import ShellSyntaxError, Simple
from hma_policy.core.command import _shell_words as split_command
from hma_policy.core.errors import InputError
from hma_policy.core.limits import DEFAULT_SOURCE_LIMITS

EXAMPLES = int(os.environ.get("HMA_FUZZ_EXAMPLES", "0"))
QUICK = settings(max_examples=EXAMPLES or 60, deadline=None, derandomize=not EXAMPLES,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=EXAMPLES or 600, deadline=None, suppress_health_check=list(HealthCheck))
TIMED = settings(max_examples=EXAMPLES or 8, deadline=None, derandomize=not EXAMPLES,
                 suppress_health_check=list(HealthCheck))
CODES = ("source.", "input.")

# -- generators -------------------------------------------------------------------------------------

NAMES = st.sampled_from(["KV", "MODEL", "ROLE", "X", "VLLM_USE_SIMPLE_KV_OFFLOAD", "IFS", "PATH", "1", "@"])
PLAIN = st.text(alphabet="abcxyz019_-./=:{}[],", min_size=1, max_size=6)


# A long word, whose length grows with the file's size in the linear-time test.
LONG_WORD = "@W@"


def _word(canary: str) -> st.SearchStrategy[str]:
    """A shell word: plain text, quotes, expansions, and substitutions that would run a command."""
    return st.one_of(
        PLAIN,
        st.sampled_from([LONG_WORD, f"'{LONG_WORD}'", f'"x$KV{LONG_WORD}"', f"${{X:-{LONG_WORD}}}"]),
        PLAIN.map(lambda t: f"'{t}'"),
        st.tuples(PLAIN, NAMES).map(lambda p: f'"{p[0]}${p[1]}"'),
        NAMES.map(lambda n: f"${{{n}:-d}}"),
        NAMES.map(lambda n: f"${n}"),
        st.just(f"$(touch {canary})"),
        st.just(f"`touch {canary}`"),
        st.just(f"<(touch {canary})"),
        st.just("$((1 + 2))"),
        st.just("$'a\\tb\\x41'"),
        st.just('\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''),
    )


def _command(canary: str) -> st.SearchStrategy[str]:
    words = st.lists(_word(canary), min_size=0, max_size=5).map(" ".join)
    return st.one_of(
        words.map(lambda w: f"vllm serve m --kv-transfer-config {w}"),
        words.map(lambda w: f"echo {w}"),
        st.tuples(NAMES.filter(str.isidentifier), _word(canary)).map(lambda p: f"{p[0]}={p[1]}"),
        NAMES.filter(str.isidentifier).map(lambda n: f"export {n}=1 &"),
        st.just(f"touch {canary}"),
        st.just(f"eval 'touch {canary}'"),
        st.just(f"sh -c 'touch {canary}'"),
        st.just(f"source ./{Path(canary).name}.sh"),
        st.just(f"read KV < {canary}"),
        st.just(f"cat > run.sh <<'EOF'\ntouch {canary}\nvllm serve m\nEOF\nbash run.sh"),
        st.just(f'X=$(cat <<EOF\ntouch {canary}\nEOF\n)'),
        words.map(lambda w: f"docker run vllm/vllm-openai:v0.33.0 {w}"),
        st.just("IFS=, read -ra A <<< \"$X\""),
    )


def _script(canary: str) -> st.SearchStrategy[str]:
    """A script of commands joined by separators and wrapped in compound commands, recursively."""
    def wrap(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            inner.map(lambda c: f"if [ -n \"$X\" ]; then\n{c}\nelse\n{c}\nfi"),
            inner.map(lambda c: f"for i in a b; do {c}; done"),
            inner.map(lambda c: f"while read line; do\n{c}\ndone < /dev/null"),
            inner.map(lambda c: f"case $ROLE in\n  prefill) {c} ;;\n  *) {c} ;;\nesac"),
            inner.map(lambda c: f"f() {{\n  {c}\n}}\nf a b"),
            inner.map(lambda c: f"( {c} ) &"),
            inner.map(lambda c: f"{{ {c}; }} | cat"),
            st.tuples(inner, inner).map(lambda p: f"{p[0]} && {p[1]} || {p[0]}"),
        )
    body = st.recursive(_command(canary), wrap, max_leaves=6)
    return st.lists(body, min_size=1, max_size=6)


def _dockerfile(canary: str) -> st.SearchStrategy[str]:
    instruction = st.one_of(
        st.just("FROM vllm/vllm-openai:v0.33.0"), st.just("FROM python:3.12 AS base"), st.just("FROM base"),
        st.just("ARG V=0.22.0"), st.just("ENV KV=$V X=${V:-d}"), st.just("ENV A=$A$A"),
        st.just(f"RUN touch {canary}"), st.just(f"RUN <<EOF\ntouch {canary}\nEOF"),
        st.just("RUN <<A cat - <<B\nx\nA\nCMD [\"forged\"]\nB"), st.just('RUN cat <<< "x"'),
        st.just("RUN echo 'x <<EOF'"), st.just("COPY <<EOF /app/c.yaml\nkv-transfer-config: '{}'\nEOF"),
        st.just("WORKDIR /app"), st.just("RUN pip install vllm==0.22.0"),
        st.just('CMD ["m", "--config", "/app/c.yaml"]'), st.just("CMD vllm serve m --port $PORT"),
        st.just(f"ENTRYPOINT [\"/bin/sh\", \"-c\", \"touch {canary}\"]"), st.just("RUN a \\\n  # c\n  b"),
        st.just(f"ENV L={LONG_WORD}"), st.just(f"RUN echo {LONG_WORD} > /f"),
    )
    return st.lists(instruction, min_size=1, max_size=10)


def _compose(canary: str) -> st.SearchStrategy[str]:
    service = st.one_of(
        st.just("    image: ${IMG:-vllm/vllm-openai:v0.21.0}\n    command: [m, --port, \"${P:-1}\"]"),
        st.just(f"    image: python:3.12\n    entrypoint: [/bin/sh, -c]\n    command: [\"touch {canary}\"]"),
        st.just("    <<: *base\n    command: m --kv-transfer-config '{}'"),
        st.just("    image: vllm/vllm-openai\n    environment: [A=1, B]\n    env_file: missing.env"),
        st.just("    extends: s0\n    command: \"$${X}\""),
    )
    return st.lists(service, min_size=1, max_size=4)


def text_of(name: str, units: list[str], scale: int = 1) -> str:
    """The file of ``units`` repeated ``scale`` times, its long words ``scale`` times as long."""
    units = units * scale
    if name == "compose.yaml":
        text = "x-base: &base\n  image: vllm/vllm-openai:latest\nservices:\n" + "".join(
            f"  s{i}:\n{unit}\n" for i, unit in enumerate(units))
    else:
        text = "\n".join(units)
    return text.replace(LONG_WORD, "w" * 64 * scale)


# -- properties -------------------------------------------------------------------------------------

def _read_checked(path: Path, canary: Path) -> None:
    source = read_source(path)
    assert not canary.exists(), "a command of the file was run"
    for problem in list(source.problems) + [p for d in source.deployments for p in d.problems]:
        assert problem.code.startswith(CODES), problem
    for deployment in source.deployments:
        assert deployment.document is not None or deployment.problems


def _read_one(tmp_path_factory, name, generator, data) -> None:
    directory = tmp_path_factory.mktemp("fuzz")
    canary = directory / "canary"
    (directory / name).write_text(text_of(name, data.draw(generator(str(canary)))))
    _read_checked(directory / name, canary)


GENERATORS = pytest.mark.parametrize("name, generator", [("run.sh", _script), ("Dockerfile", _dockerfile),
                                                          ("compose.yaml", _compose)])


@GENERATORS
@QUICK
@given(data=st.data())
def test_any_generated_file_is_read_without_raising_or_running_anything(tmp_path_factory, name, generator, data):
    _read_one(tmp_path_factory, name, generator, data)


@pytest.mark.slow
@GENERATORS
@LONG
@given(data=st.data())
def test_many_generated_files_are_read_without_raising_or_running_anything(tmp_path_factory, name, generator, data):
    _read_one(tmp_path_factory, name, generator, data)


def _cpu(path: Path) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        read_source(path)
        best = min(best, time.process_time() - start)
    return best


@GENERATORS
@TIMED
@given(data=st.data())
def test_reading_time_is_linear_in_the_size_of_a_generated_file(tmp_path_factory, name, generator, data):
    directory = tmp_path_factory.mktemp("fuzz")
    canary = directory / "canary"
    units = data.draw(generator(str(canary)))
    base = max(1, 40_000 // len(text_of(name, units)))
    small, large = directory / "small", directory / "large"
    small.mkdir()
    large.mkdir()
    (small / name).write_text(text_of(name, units, base))
    (large / name).write_text(text_of(name, units, base * 2))
    read_source(small / name)
    ratio = min(_cpu(large / name) / max(_cpu(small / name), 1e-3) for _ in range(3))
    # Twice the units, and each long word twice as long: the file is 2 to 4 times the size
    # (4 where long words make most of it). Reading linear in the size takes that many times
    # as long; quadratic, its square.
    size = (large / name).stat().st_size / (small / name).stat().st_size
    assert ratio < 1.5 * size, (ratio, size, units)
    assert not canary.exists()


# -- agreement with a reference -----------------------------------------------------------------------

# Quoting that POSIX shell, shlex and Docker read alike: no expansion ($, `), no newline, no operator, no comment.
QUOTED = st.text(alphabet=st.sampled_from(list("ab z'\"\\")), max_size=30)


def _shell_words(text: str) -> list[str] | None:
    items = list(parse_script(text))
    if not items:
        return []
    if len(items) != 1 or isinstance(items[0], ShellSyntaxError):
        return None
    command = items[0].pipelines[0].commands[0]
    assert isinstance(command, Simple)
    return [w.literal() for w in command.words]  # type: ignore[misc]


def shell_reading(text: str) -> list[str] | None:
    r"""The words POSIX shell makes of ``text`` (in QUOTED's alphabet), as shlex
    reads them; None where the shell refuses it (a quotation never closed).
    A backslash that ends the text, which shlex refuses, the shell keeps, as
    shlex reads an escaped one (`\\`); inside double quotes (`"\`), the
    quotation is never closed, to both."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        if str(exc) == "No escaped character":
            with contextlib.suppress(ValueError):
                return shlex.split(text + "\\")
        return None


@QUICK
@given(QUOTED)
def test_the_shell_parser_splits_words_as_the_shell_does(text):
    assert _shell_words(text) == shell_reading(text)


@QUICK
@given(QUOTED)
def test_the_command_splitter_of_decide_command_splits_words_as_the_shell_does(text):
    # decide_command(str) has its own splitter (core may not use the audit's parser): the same reference holds it.
    expected = shell_reading(text)
    if expected is None:
        with pytest.raises(InputError) as raised:
            split_command(text, {})
        assert raised.value.problems[0].message == "the command cannot be split into words: no closing quotation"
    else:
        assert split_command(text, {}) == expected


@QUICK
@given(QUOTED)
def test_dockers_word_splitting_agrees_with_shlex_on_the_quoting_both_define(text):
    try:
        expected = shlex.split(text)
    except ValueError:
        return  # Docker reads an unbalanced quote to the end; shlex refuses it
    words = DockerWords(Ctx("Dockerfile", "Dockerfile", (), DEFAULT_SOURCE_LIMITS), []).split(text, {}, 1)
    assert words == expected


# -- the deployer config readers (Ray, SkyPilot, OME, KubeAI, llmaz), on mutated real files -------------------------------------------

CORPUS = Path(__file__).resolve().parent / "fleet_corpus"
CONFIG_FILES = sorted(str(p.relative_to(CORPUS)) for d in ("ray-project__ray", "ray-project__kuberay", "skypilot-org__skypilot",
                                                                               "sgl-project__ome", "substratusai__kubeai",
                                                                               "InftyAI__llmaz")
                      for p in (CORPUS / d).rglob("*.yaml"))
# What a mutation puts in place of a value: other JSON types, names that reach the file system, a builder.
ODD = [None, 0, 7, True, "", "x", [], [1], ["a"], {}, {"a": 1}, "./configs/model_config/qwen_3_8B_fp8_1replica.yaml",
       "/etc/hostname", "../" * 8 + "x", "a\x00b", "x" * 5000, "ray.serve.llm:build_pd_openai_app",
       "docker:vllm/vllm-openai:v0.22.0", "vllm serve m --kv-transfer-config \"$KV\""]


def _mutated(value, rng):
    """``value`` with about one value in six replaced by an odd one, and some list items dropped."""
    if rng.random() < 0.16:
        return rng.choice(ODD)
    if isinstance(value, dict):
        return {k: _mutated(v, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [_mutated(v, rng) for v in value if rng.random() > 0.1]
    return value


@QUICK
@given(name=st.sampled_from(CONFIG_FILES), seed=st.integers(0, 2**32))
def test_mutated_ray_skypilot_ome_kubeai_and_llmaz_files_are_read_without_raising_or_running_anything(tmp_path_factory, name, seed):
    import random

    import yaml
    directory = tmp_path_factory.mktemp("configs")
    canary = directory / "canary"
    model = "ray-project__ray/release/llm_tests/serve/configs/model_config/qwen_3_8B_fp8_1replica.yaml"
    (directory / model).parent.mkdir(parents=True)  # so that an LLM config file named by path is found
    (directory / model).write_text((CORPUS / model).read_text(encoding="utf-8"), encoding="utf-8")
    target = directory / name
    target.parent.mkdir(parents=True, exist_ok=True)
    # A few uniform mutations of the file each (Hypothesis' own randoms start from the simplest draws).
    for variant in range(6):
        rng = random.Random(seed * 8 + variant)
        values = [_mutated(v, rng) for v in yaml.safe_load_all((CORPUS / name).read_text(encoding="utf-8"))]
        for value in values:
            if isinstance(value, dict) and isinstance(value.get("run"), str):  # a SkyPilot task's script
                value["run"] = f"touch {canary}\n" + value["run"]
            spec = value.get("spec") if isinstance(value, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("serveConfigV2"), str):  # a RayService's Serve config
                with contextlib.suppress(yaml.YAMLError):  # (unless a mutation put an odd string there)
                    spec["serveConfigV2"] = yaml.safe_dump(_mutated(yaml.safe_load(spec["serveConfigV2"]), rng))
        target.write_text(yaml.safe_dump_all(values), encoding="utf-8")
        _read_checked(target, canary)
