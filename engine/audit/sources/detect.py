"""Which reader a file gets: by its name (or shebang) first, then, for JSON
and YAML, by what its values look like."""

from __future__ import annotations

import difflib
import io
import os
import re
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...core.options import DECISION_OPTIONS, ENV_NAMES
from ...core.errors import suggest
from ...core.optionlist import known_options, known_releases, option_strings
from ...core.schema import load_schema

__all__ = ["SHELLS", "interpreter", "source_format", "classify", "mentions_vllm", "mention", "suffix", "basename", "MENTION_SUFFIXES",
           "MENTION_NAMES", "BATCH_SUFFIXES"]

SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"})

_SCHEMA = load_schema("deployment")
DOC_FIELDS = frozenset(_SCHEMA["properties"])
# The fields that describe a deployment (a `name` alone describes nothing: package.json has one).
_DECISION_FIELDS = DOC_FIELDS - {"name", "description", "metadata", "$schema"}
# Those that are vLLM's KV options, and every option of vLLM (a document may name them, as decide() takes it).
_KV_FIELDS = _DECISION_FIELDS - {"model", "model_facts", "platform", "env"}
# What a document's `model` object may hold (its facts): a `model` mapping with other keys is another
# tool's (a recipe's `model: {model_id, ...}`, a chart's `model: {path, tensorParallel}`).
_MODEL_OBJECT = frozenset(_SCHEMA["$defs"]["modelObject"]["properties"])
_OPTIONS = frozenset(known_options().by_dest) | frozenset(known_options().aliases)


def suffix(name: str) -> str:
    """PurePath.suffix of a file name, without building a path object."""
    at = name.rfind(".")
    return name[at:] if 0 < at < len(name) - 1 else ""


def basename(path: str | Path) -> str:
    """os.path.basename, for a POSIX path given as a string without its
    function call (a third of source_format's time)."""
    if isinstance(path, str) and os.sep == "/" and not os.altsep:
        return path[path.rfind("/") + 1:]
    return os.path.basename(path)


# `Dockerfile.<suffix>` and `Dockerfile-<variant>` name a Dockerfile (`Dockerfile.cpu`, `Dockerfile.j2`,
# QwenLM/Qwen2.5-VL's `Dockerfile-2.5-cu121`, built with `docker build -f`), except where the
# suffix is a picture's or a document's: GoogleCloudPlatform/accelerated-platforms' guide holds a
# screenshot `dockerfile.png`, which was a source.binary problem; FlagOpen/FlagScale keeps
# encrypted patches of its Dockerfiles, `Dockerfile.cuda.patch.encrypted`.
_NOT_DOCKERFILES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".pdf", ".md", ".rst",
                              ".txt", ".html", ".patch", ".diff", ".encrypted", ".enc", ".gpg"})
# A `Dockerfile-<name>` with one of these suffixes is a file of that kind (`Dockerfile-build.sh`).
_OTHERS = frozenset({".sh", ".bash", ".py", ".yaml", ".yml", ".json", ".ipynb", ".toml"})


def source_format(path: str | Path, head: bytes = b"") -> str | None:
    """The reader for ``path`` by its name (or, for a name without a suffix
    or a batch job's, by its shebang): dockerfile, shell, json, yaml,
    python, notebook; None when it is not a deployment source."""
    name = basename(path).lower()
    rendered = envsubst_renders(name)
    if rendered is not None:
        return source_format(rendered, head)
    if name.endswith(".tftpl"):  # Terraform's templatefile: the manifests it renders (document.py)
        return "yaml" if suffix(name[:-len(".tftpl")]) in ("", ".yaml", ".yml") and not head.startswith(b"#!") else None
    if name in ("dockerfile", "containerfile") or name.endswith((".dockerfile", ".containerfile")) \
            or (name.startswith(("dockerfile.", "containerfile.")) and suffix(name) not in _NOT_DOCKERFILES) \
            or (name.startswith(("dockerfile-", "containerfile-")) and suffix(name) not in _NOT_DOCKERFILES | _OTHERS):
        return "dockerfile"
    if _COMPOSE_NAME.fullmatch(name):
        return "compose"
    if name.endswith(".service"):  # a systemd service unit (systemd.py)
        return "systemd"
    if name.endswith(".container"):  # a Podman Quadlet container unit (quadlet.py)
        return "quadlet"
    ext = suffix(name)
    if ext in (".sh", ".bash", ".ksh", ".zsh"):
        # (what the shebang runs, where it names Python: malaiwah/vllm-lmcache-cu128's check_sm_in_container.sh)
        return "python" if _interpreter(head).startswith("python") else "shell"
    if ext == ".json":
        return "json"
    if ext in (".yaml", ".yml"):
        return "yaml"
    if ext == ".py":
        return "python"
    if ext == ".ipynb":
        return "notebook"
    if (not ext or ext in BATCH_SUFFIXES) and _interpreter(head) in SHELLS:
        return "shell"
    return None


def _interpreter(head: bytes) -> str:
    return interpreter(head[:512].decode("latin-1"))


def interpreter(text: str) -> str:
    """The program a text's shebang runs (`env`'s argument), or "" without one."""
    words = text[2:].split("\n", 1)[0].split() if text.startswith("#!") else []
    if not words:
        return ""
    program = words[0].rsplit("/", 1)[-1]
    return words[1].rsplit("/", 1)[-1] if program == "env" and len(words) > 1 else program


def envsubst_renders(name: str) -> str | None:
    """The name of the file an envsubst template renders (``name`` without
    its suffix), or None when ``name`` is no such template. A template is
    read as the file it renders, its ${VAR} placeholders' values not known:
    `envsubst < vllm-k8s.yaml.template | kubectl apply -f -` (meta-llama/
    llama-stack's k8s docs), `cat lws.yaml-template | envsubst > lws.yaml`
    (aws-samples/aws-do-eks)."""
    if name.endswith(_TEMPLATES) and suffix(name[:-len(".template")]) in _TEMPLATED:
        return name[:-len(".template")]
    return None


# A template that a tool such as envsubst renders into the file its name says, without the suffix.
_TEMPLATES = (".template", "-template")
_TEMPLATED = frozenset({".yaml", ".yml", ".json", ".sh"})
# Batch-job scripts (Slurm's sbatch, PBS's qsub): shell scripts with their directives in
# comments, when their shebang names a shell (sbatch requires one).
BATCH_SUFFIXES = frozenset({".slurm", ".sbatch", ".pbs"})
# docker compose's file names: compose.yaml, docker-compose.yml, docker-compose.prod.yaml, ...
_COMPOSE_NAME = re.compile(r"(docker-)?compose(\.[^/]*)?\.ya?ml")
# (`kv_transfer_params`, a field of vLLM's requests and responses, `"kv_transfer_params": null` in a saved chat
# completion, is no option: umesh-khatiwada/aibrix-vllm-deployment keeps a curl transcript as `.json`.)
_VLLM_WORDS = re.compile(r"vllm|kv[-_](transfer(?![-_]params)|connector|offloading|role)|hybrid[-_]kv", re.I)
# The same, where a Prometheus metric of vLLM's (`vllm:num_requests_running`) is no mention.
_VLLM_WORDS_NOT_METRICS = re.compile(r"vllm(?!:[a-z])|kv[-_](transfer(?![-_]params)|connector|offloading|role)"
                                     r"|hybrid[-_]kv", re.I)


def mentions_vllm(text: str, *, metrics: bool = True) -> bool:
    """Whether ``text`` names vLLM or one of its KV options; ``metrics``:
    whether vLLM's metric names count (a Grafana dashboard that charts them
    names what a server reports, not how one runs)."""
    return bool((_VLLM_WORDS if metrics else _VLLM_WORDS_NOT_METRICS).search(text))


def mentions_vllm_outside_data(text: str) -> bool:
    """mentions_vllm, outside runs of base64 (an audio clip or an image a
    file embeds), whose letters spell `vLLm` now and then (tenstorrent's
    audio_payload_60s.py: `...wEKVLLmVwG1...`)."""
    return mentions_vllm(_BASE64_RUN.sub(" ", text)) if mentions_vllm(text) else False


# 200 characters of base64 without a space, a dot or an underscore: data, not code or prose.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{200,}")


# Files read only to look for a mention of a KV option or connector: templates that render
# deployments (Helm, Jinja, Go) and documentation, which the audit cannot decide from.
# (TOML: a tool's own settings, such as BentoML's build args in pyproject.toml, which bentoml/BentoVLLM's
# LMCache service hands vLLM as its --kv-transfer-config. A backup, `run.sh.bak`, is kept, not run:
# LMCache/LMBench's `choose-and-deploy.sh.backup` was skipped without a word. Terraform's HCL: the kubernetes
# provider's `kubernetes_deployment_v1` holds a vLLM container's args, sarvamai/uidai-deployment's models; a Nomad
# job, `*.nomad` (the older name) or `*.nomad.hcl`, its docker task's `config { args = [...] }`.)
MENTION_SUFFIXES = frozenset({".tpl", ".tmpl", ".gotmpl", ".j2", ".jinja", ".jinja2", ".md", ".rst", ".txt", ".toml",
                              ".bak", ".backup", ".orig", ".tf", ".hcl", ".nomad", ".mk"})
# Files of commands another tool runs, read for mentions alone too: a make recipe (`Makefile`, an
# included `*.mk`), a just recipe, a Procfile's processes (Heroku, foreman, honcho), a Jenkins pipeline's
# `sh` steps. Their names have no suffix and their text no shebang, so a `vllm serve ...
# --kv-transfer-config ...` in one was skipped as no deployment source without a word.
MENTION_NAMES = frozenset({"makefile", "gnumakefile", "justfile", ".justfile", "procfile", "jenkinsfile"})
# vLLM's KV options in any spelling: --kv-transfer-config, kv_connector, kvTransferConfig (Helm values), ...
# A bare `kv_transfer` or `kv_connector` after a dot or a slash is a module of vLLM's
# (`from vllm.distributed.kv_transfer import ...`, snowflakedb/ArcticInference): library code;
# after a colon, a server's metric (`sglang:kv_transfer_latency_ms`, NVIDIA/NeMo-Agent-Toolkit's
# monitoring README).
# None of a request's `kv_transfer_params`, a connector's `kv_connector_metadata`, a model runner's
# `kv_connector_output` and `kv_connector_stats` (vllm-plugin-FL's vendored copy), or a folder
# named `llama3.1-8b-kv-offloading` (bentoml/BentoVLLM) is an option: only the offloading
# options themselves, --kv-offloading-size and --kv-offloading-backend, are. The HMA switch
# itself, --[no-]disable-hybrid-kv-cache-manager, is one too (vllm-project/recipes' Kimi-K3.yaml
# gives it in a launcher's own `vllm_args`, which no reader reads). A bare one is a name as code
# writes it (kv_transfer, kvTransfer; kv_connector, kvConnector), not prose's "KV-transfer" or
# "KV-connector" (ddps-lab/vllm-disaggregation's Dockerfile comment), nor the start of a longer name
# (a simulator's latency field `kv_transfer_time`, llm-d/llm-d-inference-sim's latency profiles; a
# cost model's `kv_transfer_efficiency`, aws-samples/aws-do-eks' disagg-calculator).
_KV_OPTIONS = (r"(?i:kv[-_]?transfer[-_]?config)|(?<![./:])(?:kv[-_]?t|kvT)ransfer(?![-_]?[A-Za-z0-9])"
               r"|(?<![./:])(?:kv[-_]?c|kvC)onnector(?![-_]?(?:metadata|output|stats))"
               r"|(?i:kv[-_]?offloading[-_]?(?:size|backend)|disable[-_]?hybrid[-_]?kv[-_]?cache[-_]?manager)")


@lru_cache(maxsize=8)
def _mentions(names: tuple[str, ...]) -> re.Pattern[str]:
    words = [re.escape(n) for n in sorted(set(names), key=len, reverse=True) if n]
    return re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join([_KV_OPTIONS] + words) + r")(?![A-Za-z0-9])")


def mention(text: str, names: tuple[str, ...] = (), *, python: bool = False,
            shell: bool = False) -> tuple[str, int] | None:
    """The first mention of a vLLM KV option (kv-transfer-config, kv_connector,
    kv-offloading...) or of a connector name in ``names``, and its line;
    ``python``: outside the code's comments (OpenPipe/ART keeps a field
    commented out, `# kv_transfer_config: KVTransferConfig | None`);
    ``shell``: the first outside a comment line where there is one (a
    comment that describes the launch is not where it is)."""
    if "vllm:" in text:  # (a Prometheus scrape of vLLM's metrics: its labels are the server's settings, no option)
        text = _METRIC_LINE.sub(lambda m: " " * len(m[0]), text)
    match = _mentions(tuple(names)).search(text)
    if match is not None and python:
        text = _uncommented(text)
        match = _mentions(tuple(names)).search(text)
    if match is not None and shell:
        match = _mentions(tuple(names)).search(_SHELL_COMMENT.sub(lambda m: " " * len(m[0]), text)) or match
    if match is None:
        return None
    return match.group(), text.count("\n", 0, match.start()) + 1


# A line of vLLM's metrics as Prometheus scrapes them (`vllm:cache_config_info{kv_offloading_size="None",...} 1.0`;
# alint77/jupiter-glm52-vllm-worklog keeps such dumps beside its runs), or its HELP and TYPE lines.
_METRIC_LINE = re.compile(r"^(?:# (?:HELP|TYPE) )?vllm:[A-Za-z_:]+(?:\{[^}\n]*\})?[^\n]*$", re.M)
# A whole-line comment of a shell script (lines and columns kept where it is blanked).
_SHELL_COMMENT = re.compile(r"^[ \t]*#.*$", re.M)


def _uncommented(code: str) -> str:
    """Python code with each comment blanked (its lines and columns kept);
    the code as it is where it cannot be tokenized."""
    lines = io.StringIO(code).readlines()  # (split as tokenize reads them: at "\n" only)
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                (row, start), (_, end) = token.start, token.end
                line = lines[row - 1]
                lines[row - 1] = line[:start] + " " * (end - start) + line[end:]
    except (tokenize.TokenError, SyntaxError, IndexError, RecursionError):  # (IndentationError is a SyntaxError)
        return code
    return "".join(lines)


@lru_cache(maxsize=1)
def _any_release_options() -> frozenset[str]:
    """Every option of every bundled release, as a config file's key (`_` for `-`)."""
    return frozenset(flag[2:].replace("-", "_") for release in known_releases() for flag in option_strings(release))


# How close a config file's key must be to an option to read as a slip of it (a letter
# missed, doubled or swapped scores 0.89 and more); a did-you-mean hint takes 0.75, which
# takes another tool's key for one (hiyouga/LLaMA-Factory's `peft_config`, `pooler_config`).
_MISSPELT = 0.85


def _not_an_option(key: Any) -> bool:
    """Whether a config file's key is neither an option of some vLLM release
    nor reads as a misspelt one (which the audit notes: no release accepts it)."""
    if not isinstance(key, str) or len(key) > 256:
        return True
    known = _any_release_options()
    key = key.replace("-", "_").lower()
    return key not in known and not difflib.get_close_matches(key, known, n=1, cutoff=_MISSPELT)


def _options_of_vllm(keys: set[str]) -> bool:
    """Whether every key is vLLM's option, or a misspelt one. vLLM turns
    each key of a `--config` file into an option and refuses one it lacks,
    so a mapping with a `model` name among keys of its own (a test harness's
    `model:` beside `deployment:` and `server_cmd:`) is not one."""
    return not any(_not_an_option(key) for key in keys)


def not_options(value: Any) -> list[str]:
    """The keys, as written, that keep a mapping with a `model` name from
    being a vLLM config where most of its keys are vLLM's options (a
    launcher's own config beside vLLM's: runpod-workers/worker-vllm's
    `vllm-release:`); none for any other value."""
    if not isinstance(value, dict) or not isinstance(value.get("model"), str):
        return []
    others = [str(key) for key in value if _not_an_option(key)]
    return others if others and len(others) * 2 < len(value) else []


def classify(value: Any, *, single: bool) -> str | None:
    """What a JSON or YAML value is: document, vllm-config, kubernetes, or
    None (not a deployment). ``single``: the file's only YAML document."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str):
        return "kubernetes"
    keys = {k.replace("-", "_") for k in value if isinstance(k, str)}
    unknown = keys - DOC_FIELDS
    model = value.get("model")
    if isinstance(model, dict):  # a document's model facts, or another tool's `model` (vLLM's is a name)
        facts = all(isinstance(k, str) and (k in _MODEL_OBJECT or suggest(k, _MODEL_OBJECT)) for k in model)
        if not facts:
            return None
        if any(k != "name" for k in model):
            return "document"
        # A model named alone holds no fact: a document only beside what one reads (a Helm chart's values
        # `model: {name: gpt2}` beside `gpu:`, triton-inference-server/tutorials, are not one).
    if "model_facts" in keys:
        return "document"
    if single and isinstance(model, str) and _options_of_vllm(keys):  # vLLM's is the model's name
        return "vllm-config"
    fields = keys & _DECISION_FIELDS - ({"model"} if isinstance(model, dict) else set())
    env = value.get("env")
    if not (isinstance(env, dict) and any(name in ENV_NAMES for name in env)):
        fields -= {"env"}  # (another tool's `env:` settings, atropos' trainer configs: no vLLM environment)
    if fields and not unknown or keys & _KV_FIELDS and not unknown - _OPTIONS:
        return "document"
    options = {"--" + k.replace("_", "-") for k in value if isinstance(k, str)}
    if single and options & set(DECISION_OPTIONS) and _options_of_vllm(keys) and not isinstance(model, dict):
        return "vllm-config"
    # A misspelt document: keep it a document so that validation names the typo. The typo
    # must be of a KV field, or sit beside a field a decision reads: a list of `platforms` or
    # of `models` is another tool's (vllm-project/recipes' platforms.yaml).
    if unknown and all(suggest(k, DOC_FIELDS) for k in unknown) \
            and (fields or any(suggest(k, _KV_FIELDS) for k in unknown)):
        return "document"
    return None
