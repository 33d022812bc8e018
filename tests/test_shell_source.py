"""Shell scripts read as the shell would run them (engine/audit/sources/shell.py
and shell_syntax.py): in linear time, with run-time assignments unknown, and
the launch forms real fleets use (issues 17 and 20). Each test here failed on
the shlex-based reader it replaced."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import hma_policy
from hma_policy.audit.run import audit
from hma_policy.audit.sources import SourceLimits, read_source
from hma_policy.audit.sources.release import ReleaseHint
from sourcefiles import LMCACHE, NIXL, cpu_seconds, ktc, linear_ratio, only, write


# -- linear time and bounded expansion (issue 20, defect 1) ------------------------------------------


def test_a_terraform_template_of_many_unclosed_directives_is_read_in_linear_time(tmp_path):
    # The first reading looked for each `%{`'s `}` with a lazy pattern: a line of 40,000 `%{ ` took
    # 138 s, a hang for the audit of a hostile file.
    ratio = linear_ratio(lambda n: "vllm: 1\n" + "%{ " * n + "\n" + "${ " * n + "\n", 100_000, tmp_path, "x.tftpl")
    assert ratio < 3.0, ratio

def test_a_long_word_is_read_in_linear_time(tmp_path):
    # shlex grows a word one character at a time: 1 MB took 16 s, 2 MB 67 s.
    ratio = linear_ratio(lambda n: "echo " + "a" * n + f"\nvllm serve m --kv-transfer-config '{NIXL}'\n", 400_000, tmp_path)
    assert ratio < 3.0, ratio
    assert ktc(only(read_source(tmp_path / "large" / "run.sh")))["kv_connector"] == "NixlConnector"


def test_a_long_serve_cmd_of_a_sweep_is_read_in_linear_time(tmp_path):
    # shlex.split of `vllm bench sweep serve --serve-cmd TEXT` is quadratic in a word's length:
    # 800 kB took 7.8 s. A text longer than a command line may be is split into no server.
    ratio = linear_ratio(lambda n: "vllm bench sweep serve --serve-cmd 'vllm serve m --served-model-name "
                                   + "a" * n + "' --bench-cmd x\n", 400_000, tmp_path)
    assert ratio < 3.0, ratio


def test_doubling_a_variable_is_linear_and_bounded(tmp_path):
    # B="$A$A", four levels, 930 kB: 27 s with the old reader.
    def make(n: int) -> str:
        return (f'A="{"x" * n}"\nB="$A$A"\nC="$B$B"\nD="$C$C"\nE="$D$D"\n'
                'vllm serve m --kv-transfer-config "$E"\n')
    assert linear_ratio(make, 30_000, tmp_path) < 3.0


def _grown_by_ifs(n: int, array: bool) -> str:
    """A launch whose options each of ``n`` `if`s may add to one variable."""
    grow = "ARGS+=(--opt{i} x)" if array else 'ARGS="$ARGS --opt{i} x"'
    ifs = "".join(f'if [ -n "$A{i}" ]; then {grow.format(i=i)}; fi\n' for i in range(n))
    words = '"${ARGS[@]}"' if array else "$ARGS"
    return ("ARGS=()\n" if array else 'ARGS=""\n') + ifs + f"vllm serve m {words} --kv-transfer-config '{NIXL}'\n"


@pytest.mark.parametrize("array", [False, True], ids=["text", "array"])
def test_a_value_that_many_ifs_grow_is_read_in_bounded_time(tmp_path, array):
    # Each `if` leaves its marker in the value, and each is read within the next one's values: the
    # reading grew with the square of their number (the text: 2,000 took 15 s and 420 MB), and with
    # the cube for an array, whose paths' elements were queued with `list.pop(0)` (1,000 took 85 s,
    # 4,000 took 34 s and 1.3 GB once that was a deque). Past MAX_MERGED the reading stops.
    assert linear_ratio(lambda n: _grown_by_ifs(n, array), 1000, tmp_path) < 3.0


@pytest.mark.parametrize("array", [False, True], ids=["text", "array"])
def test_a_value_grown_by_more_ifs_than_the_bound_stops_the_reading_where_it_says(tmp_path, array):
    # 256 `if`s are read: the launch is decided, each `if` a note that the command may take more.
    at_bound = read_source(write(tmp_path / "ok" / "run.sh", _grown_by_ifs(256, array)))
    assert ktc(only(at_bound))["kv_connector"] == "NixlConnector"
    assert len(only(at_bound).notes) == 256 and not at_bound.problems
    past = read_source(write(tmp_path / "past" / "run.sh", _grown_by_ifs(300, array)))
    assert past.deployments == ()
    (limit,) = past.problems
    # (line 1 sets ARGS; the 257th `if` is at line 258)
    assert (limit.code, limit.line) == ("source.limit", 258)
    assert limit.message == ("`ARGS` holds what more than 256 `if`s and `case`s set differently on their paths "
                             "(the last: `if` at line 258); the script is not read past this point")


def test_launches_that_read_a_value_many_ifs_grew_read_its_merges_once(tmp_path):
    # Each launch walked again the 250 merges that stand within one another, and asked each whether a
    # path sets what the decision reads: 200 launches took 24 s, 400 took 46 s.
    def make(launches: int) -> str:
        ifs = "".join(f'if [ -n "$A{i}" ]; then ARGS+=(--opt{i} x); fi\n' for i in range(250))
        return "ARGS=()\n" + ifs + "".join(f'vllm serve m{j} "${{ARGS[@]}}" --kv-transfer-config \'{NIXL}\'\n'
                                            for j in range(launches))
    one, many = write(tmp_path / "one" / "run.sh", make(1)), write(tmp_path / "many" / "run.sh", make(40))
    assert len(read_source(many).deployments) == 40
    assert cpu_seconds(read_source, many) / cpu_seconds(read_source, one) < 4.0


@pytest.mark.slow  # about 20 s: the difference shows only past a thousand `if`s
def test_a_launch_that_reads_thousands_of_variables_ifs_set_is_read_in_linear_time(tmp_path):
    # Each merge was asked, of each other one, whether it held it within its values, and of each
    # word of the launch, whether that word was an option's value: 4,000 took 3.7 s, 8,000 15 s.
    def make(n: int) -> str:
        ifs = "".join(f'if [ -n "$A{i}" ]; then V{i}="--opt{i} x"; fi\n' for i in range(n))
        return ifs + "vllm serve m " + " ".join(f"$V{i}" for i in range(n)) + f" --kv-transfer-config '{NIXL}'\n"
    assert linear_ratio(make, 2000, tmp_path) < 3.0


def test_where_a_value_outgrows_its_bound_is_a_located_problem(tmp_path):
    text = "X=ab\n" + "X=$X$X\n" * 40 + 'vllm serve m --kv-transfer-config "$X"\n'
    source = read_source(write(tmp_path / "run.sh", text), limits=SourceLimits(max_variable_length=4096))
    # X doubles on each line: 2 * 2**11 = 4096 characters at line 12, more at line 13.
    (limit,) = [p for p in source.problems if p.code == "source.limit"]
    assert limit.line == 13
    assert limit.message == ("a value of `X` grows past 4096 characters at line 13; it is read as unknown from there")
    assert only(source).problems[0].code == "source.unresolved"


@pytest.mark.parametrize("body", [
    "f; " * 20,  # a function that calls itself 20 times over: 20**8 calls within the nesting bound
    'printf "%s" ' + '"$(f)" ' * 20 + ";",  # a helper read for its output that does the same
])
def test_a_function_that_calls_itself_many_times_over_is_bounded(tmp_path, body):
    # Found on reading the change that reads helpers' output: either took over a minute.
    started = time.perf_counter()
    source = read_source(write(tmp_path / "run.sh", f"f() {{ {body} }}\nf\nvllm serve m --kv-transfer-config \"$(f)\"\n"))
    assert time.perf_counter() - started < 10
    (limit,) = [p for p in source.problems if p.code == "source.limit"]
    assert limit.message.startswith("more than 10000 shell function calls (`f` at line ")


def test_an_array_that_outgrows_its_bounds_is_a_located_problem(tmp_path):
    # X doubles on each line: 2**12 = 4096 elements at line 13, more at line 14.
    text = 'X=("")\n' + 'X=("${X[@]}" "${X[@]}")\n' * 14 + 'vllm serve m --kv-transfer-config "${X[@]}"\n'
    source = read_source(write(tmp_path / "run.sh", text))
    (limit,) = [p for p in source.problems if p.code == "source.limit"]
    assert (limit.line, limit.message) == (14, "the array `X` grows past 4096 elements at line 14; it is read as "
                                               "unknown from there")
    assert only(source).problems[0].code == "source.unresolved"
    # Its characters are bounded too, each element with its separator (empty ones as well).
    source = read_source(write(tmp_path / "run.sh", text),
                         limits=SourceLimits(max_variable_length=4096, max_array_elements=1 << 20))
    (limit,) = [p for p in source.problems if p.code == "source.limit"]
    assert (limit.line, limit.message) == (14, "a value of `X` grows past 4096 characters at line 14; it is read "
                                               "as unknown from there")


def test_doubling_an_array_of_empty_words_again_and_again_is_bounded(tmp_path):
    # Empty elements cost no characters: each reset and doubling was free of the budget,
    # and a file of them ran for minutes.
    cycle = 'A=("")\n' + 'A=("${A[@]}" "${A[@]}")\n' * 20
    path = write(tmp_path / "run.sh", cycle * 30 + "vllm serve m\n")
    start = time.process_time()
    read_source(path)
    assert time.process_time() - start < 3  # about 0.35 s; without the bound, about a minute


@pytest.mark.slow
def test_a_16_mib_script_is_read_in_linear_time(tmp_path):
    block = ("MODEL=${MODEL:-org/m}\nif [ -n \"$X\" ]; then echo \"x $MODEL\" > /dev/null 2>&1; fi\n"
             "for i in a b; do export V=$i; done\ncat > f.json <<EOF\n{\"a\": \"$MODEL\"}\nEOF\n"
             "echo " + "w" * 2000 + "\n")
    launch = f"vllm serve $MODEL --kv-transfer-config '{NIXL}' &\n"
    make = (lambda n: (block * (n // len(block))) + launch)
    ratio = linear_ratio(make, 8 * 2**20, tmp_path)
    assert ratio < 3.0, ratio
    assert ktc(only(read_source(tmp_path / "large" / "run.sh")))["kv_connector"] == "NixlConnector"


# -- run-time assignments (issue 20, defect 5) -----------------------------------------------------------

@pytest.mark.parametrize("command, why", [
    ("read KV < kv.json", "is set at run time by `read` at line 2"),
    ("IFS= read -r -d '' KV < kv.json", "is set at run time by `read` at line 2"),
    ("mapfile -t KV < kv.json", "is set at run time by `mapfile` at line 2"),
    ("readarray KV < kv.json", "is set at run time by `readarray` at line 2"),
    ("getopts k: KV", "is set at run time by `getopts` at line 2"),
    ("printf -v KV '%s' \"$1\"", "is set at run time by `printf -v` at line 2"),
    ("declare \"$1=x\"", "may be set at run time by `declare` of a computed name at line 2"),
    ("export $(cat kv.env)", "may be set at run time by `export` of a computed name at line 2"),
    ("source ./settings.sh", "may be set by `source ./settings.sh` at line 2, a file the audit does not read"),
    (". /etc/profile.d/vllm.sh", "may be set by `source /etc/profile.d/vllm.sh` at line 2, a file the audit does not read"),
    ("eval \"$SETUP\"", "may be set by `eval` of a text this file does not give (line 2)"),
])
def test_a_variable_a_command_may_set_at_run_time_is_unknown_after_it(tmp_path, command, why):
    script = write(tmp_path / "run.sh", f"KV='{NIXL}'\n{command}\nvllm serve m --kv-transfer-config \"$KV\"\n")
    d = only(read_source(script))
    assert d.document is None
    assert d.problems[0].message == f"`--kv-transfer-config` takes its value from `$KV` (which {why})"



def test_a_variable_first_read_after_an_unread_source_may_be_set_by_it(tmp_path):
    # alint77/jupiter-glm52-vllm-worklog (c954a35) experiments/.../run-server.sh: `source agent_space/jupiter-env.sh`,
    # then `${TIERED_MOE_MODEL_PATH:-${GLM52_W4A16_MODEL}}`, which that file sets (survey 44a). A variable never set
    # in the script, first read after a command that may set any variable, took its default with nothing said:
    # a KV config's default was decided as written.
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'.replace('"', '\\"')
    d = only(read_source(write(tmp_path / "d.sh", f"source ./site-env.sh\n"
                                                  f"exec vllm serve m --kv-transfer-config \"${{KV_CONFIG:-{kv}}}\"\n")))
    assert [p.message for p in d.problems] == [
        "`--kv-transfer-config` takes its value from `$KV_CONFIG` (which may be set by `source ./site-env.sh` at line 1, "
        "a file the audit does not read)"]
    # Without such a command, the default is the reading, as the environment the script runs in is not in the file.
    d = only(read_source(write(tmp_path / "e.sh", f"exec vllm serve m --kv-transfer-config \"${{KV_CONFIG:-{kv}}}\"\n")))
    assert (d.problems, ktc(d)["kv_connector"]) == ((), "NixlConnector")


def test_an_array_filled_in_a_loop_may_hold_any_words(tmp_path):
    # aws/deep-learning-containers (e0ecedea) scripts/docker/vllm/omni_sagemaker_entrypoint.sh: ARGS filled
    # by a `read` loop from a helper's output, then `exec vllm serve --omni "${ARGS[@]}"`. The array was one
    # word, `--omni`'s value, "which the decision does not read": it may hold any options, a KV config too.
    script = write(tmp_path / "entrypoint.sh", """ARGS=()
while IFS= read -r -d '' token; do
    ARGS+=("${token}")
done <"${ARGS_FILE}"
ARGS+=(--middleware m.Middleware)
exec vllm serve --omni "${ARGS[@]}"
""")
    d = only(read_source(script))
    assert [(n.code, n.message) for n in d.notes if n.code != "source.option_not_in_release"] == [
        ("source.unresolved_arguments", "the command also takes `${ARGS[@]}` (which is set differently on the paths "
                                        "through the loop at line 2); only the options written here are read, and it "
                                        "may hold others")]


def test_an_ssh_options_array_before_the_host_is_options(tmp_path):
    # NVIDIA/dgx-spark-playbooks (0db7c141) station-connect-two-stations/assets/08_run_perftest_pair.sh:
    # `ssh "${SSH_OPTS[@]}" "${host}" "$@"` in a function. The array, not set in the file, was taken for
    # the host, so the host was read as the remote command's first word: `h if test ...; then` is no
    # script ("unexpected `then`"), and the file was skipped as one the audit cannot read.
    escaped = LMCACHE.replace('"', '\\"')  # (inside the double-quoted remote command)
    script = write(tmp_path / "run.sh", f"""ssh_plain() {{
  local host="$1"
  shift
  ssh "${{SSH_OPTS[@]}}" "${{host}}" "$@"
}}
ssh_plain "${{remote_a}}" "if test -s '${{pid_file}}'; then kill \\"\\$(cat '${{pid_file}}')\\"; fi" || true
ssh_plain "${{remote_a}}" "vllm serve m --kv-transfer-config '{escaped}'"
""")
    found = read_source(script)
    assert found.problems == ()
    (d,) = found.deployments
    assert (d.line, ktc(d)["kv_connector"]) == (4, "LMCacheConnectorV1")  # (the ssh, run by the call at line 7)


def test_a_shift_in_an_if_shifts_only_that_paths_arguments(tmp_path):
    # vllm-project/vllm-metal (211a1e4) scripts/test.sh: `if [ $# -gt 0 ] && [[ "$1" != --* ]]; then alt="$1"; shift;
    # fi` in a function, then `vllm serve "$model" ... "$@"`. The `shift` was applied whatever the branch, so the
    # launch's `--max-num-seqs 1` lost its option: "vLLM rejects the unrecognized argument `1`" (survey 46a).
    script = write(tmp_path / "test.sh", """run() {
  local model="$1"
  shift
  if [ -n "$ALT" ]; then
    shift
  fi
  vllm serve "$model" "$@"
}
run m --max-num-seqs 1
""")
    d = only(read_source(script))
    assert (d.problems, [n.message for n in d.notes]) == ((), [
        "the command also takes `the arguments` (which are shifted or set differently on the paths through `if` at "
        "line 4); only the options written here are read, and it may hold others"])
    # Where every path shifts alike, the arguments are known.
    d = only(read_source(write(tmp_path / "same.sh", "run() {\n  if [ -n \"$A\" ]; then shift; else shift; fi\n"
                                                     f"  vllm serve m \"$@\"\n}}\nrun x --kv-transfer-config '{LMCACHE}'\n")))
    assert (d.problems, ktc(d)["kv_connector"]) == ((), "LMCacheConnectorV1")


def test_an_interpreter_not_known_runs_the_api_server_module(tmp_path):
    script = write(tmp_path / "run.sh", f"\"$PY\" -m vllm.entrypoints.openai.api_server --model m "
                                        f"--kv-transfer-config '{LMCACHE}'\n\"$PY\" -m pytest -m slow\n")
    d = only(read_source(script))
    assert (d.line, d.name, ktc(d)["kv_connector"]) == (1, "m", "LMCacheConnectorV1")


# ovg-project/kvcached e8e64063 examples/08_hybrid_attention_models/start_two_models.sh: a model and a KV
# config set, then `source "$venv/bin/activate"`, then `vllm serve` with them.
@pytest.mark.parametrize("activate", ['source "$HOME/engine/vllm-venv/bin/activate"', ". /opt/venv/bin/activate",
                                      "source .venv/bin/activate"])
def test_activating_a_virtual_environment_keeps_the_script_s_variables(tmp_path, activate):
    script = write(tmp_path / "run.sh", f"MODEL=m\nKV='{LMCACHE}'\n{activate}\n"
                                        "vllm serve \"$MODEL\" --kv-transfer-config \"$KV\" --port \"$VIRTUAL_ENV\"\n")
    d = only(read_source(script))
    assert (d.name, ktc(d)["kv_connector"]) == ("m", "LMCacheConnectorV1")
    assert d.problems == ()
    # What the activate script sets is unknown from there: here a value the decision does not read.
    shown = activate.split(" ", 1)[1].strip('"')
    assert [n.message for n in d.notes] == [f"`--port` takes its value from `$VIRTUAL_ENV` (which is set by "
                                            f"`source {shown}` at line 3); the decision does not read it"]


@pytest.mark.parametrize("activate", ["source /opt/miniconda3/bin/activate vllm", "source activate vllm",
                                      "source ~/anaconda3/bin/activate"])
def test_a_conda_activation_may_set_any_variable(tmp_path, activate):
    script = write(tmp_path / "run.sh", f"KV='{LMCACHE}'\n{activate}\nvllm serve m --kv-transfer-config \"$KV\"\n")
    d = only(read_source(script))
    assert d.document is None
    assert "a file the audit does not read" in d.problems[0].message

def test_a_sourced_file_inside_the_audited_paths_is_read_for_its_variables(tmp_path):
    write(tmp_path / "env.sh", f"KV='{LMCACHE}'\nvllm serve not-reported\n")
    d = only(read_source(write(tmp_path / "run.sh", f"KV='{NIXL}'\n. ./env.sh\nvllm serve m --kv-transfer-config \"$KV\"\n")))
    assert ktc(d)["kv_connector"] == "LMCacheConnectorV1"


def test_an_assignment_in_the_background_or_a_subshell_does_not_change_the_script(tmp_path):
    script = write(tmp_path / "run.sh", "export VLLM_USE_SIMPLE_KV_OFFLOAD=1 &\n(export LMCACHE_USE_UPSTREAM_MP=1)\n"
                                        "echo x | read VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE\n"
                                        "vllm serve m --kv-offloading-size 8\n")
    assert "env" not in only(read_source(script)).document


def test_a_variable_set_differently_on_two_paths_is_unknown_and_the_same_on_both_is_kept(tmp_path):
    script = write(tmp_path / "run.sh", f"""if [ "$ROLE" = prefill ]; then
  KV='{NIXL}'; MODEL=m
else
  KV='{LMCACHE}'; MODEL=m
fi
vllm serve $MODEL --kv-transfer-config "$KV"
""")
    d = only(read_source(script))
    assert d.name == "m"
    assert d.problems[0].message == ("`--kv-transfer-config` takes its value from `$KV` (which is set differently on "
                                     "the paths through `if` at line 1)")


def ktc_of(document: dict) -> dict:
    """The kv_transfer_config of a document (a path's), parsed when given as JSON text."""
    value = document["kv_transfer_config"]
    return json.loads(value) if isinstance(value, str) else value


def decided(path, **kw):
    from hma_policy.audit.run import audit

    return audit([str(path)], **kw).entries


def test_a_launch_decided_alike_on_each_path_of_an_if_gets_that_decision(tmp_path):
    """The shape of LMCache's 1p1d LWS worker: the role picks kv_config on two paths, both
    LMCacheConnectorV1 (regression: source.unresolved, the weaker answer)."""
    producer, consumer = (LMCACHE.replace("kv_both", role) for role in ("kv_producer", "kv_consumer"))
    script = write(tmp_path / "run.sh", f"""if [ $LWS_WORKER_INDEX -eq 1 ]; then
  kv_config='{consumer}'; CONF=decoder.yaml
else
  kv_config='{producer}'; CONF=prefiller.yaml
  echo waiting > wait.log
fi
LMCACHE_CONFIG_FILE=$CONF vllm serve m --kv-transfer-config "$kv_config" > serve.log 2>&1
""")
    d = only(read_source(script))
    assert [which for which, _ in d.paths] == ["path 1 of 2 through `if` at line 1", "path 2 of 2 through `if` at line 1"]
    assert [doc["kv_transfer_config"] for _, doc in d.paths] == [consumer, producer]
    (entry,) = decided(script)
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("disabled", [])
    assert [n.message for n in entry.deployment.notes] == [
        "`--kv-transfer-config` takes its value from `$kv_config` (which is set differently on the paths through `if` "
        "at line 1); the decision is the same on each of the 2 paths"]


def test_a_launch_by_exec_is_read_again_for_each_path_too(tmp_path):
    (entry,) = decided(write(tmp_path / "run.sh", f"""if [ "$R" = a ]; then KV='{NIXL}'; else KV='{NIXL} '; fi
exec vllm serve m --kv-transfer-config "$KV"
"""))
    assert (entry.decision["outcome"], len(entry.deployment.notes)) == ("enabled", 1)


@pytest.mark.parametrize("script, outcome", [
    # Bitbull-Ideas/vllm.qwen3.8-27b (1ff0bb3) vllm-server.sh: ARGS grown in two `if`s, the second adding an option
    # the decision reads (--speculative-config): `error`, where each of the 4 readings is `enabled` (survey 29a)
    ("""ARGS=(m)
if [[ "$L" == "true" ]]; then
  ARGS+=(--language-model-only)
fi
if [[ "$X" == 1 ]]; then
  ARGS+=(--speculative-config '{"method":"mtp","num_speculative_tokens":3}')
fi
exec vllm serve "${ARGS[@]}"
""", "enabled"),
    # a command line grown so in a string (its words split where it is used: a JSON value without blanks)
    ("""KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
CMD="vllm serve m --kv-transfer-config $KV"
if [ "$A" = 1 ]; then CMD="$CMD --enforce-eager"; fi
if [ "$B" = 1 ]; then CMD="$CMD --speculative-config {\\"method\\":\\"mtp\\"}"; fi
$CMD
""", "enabled"),
    # the second `if` adds LMCacheConnectorV1 on one path: the readings disagree
    ("""ARGS=(m)
if [[ "$L" == "true" ]]; then ARGS+=(--language-model-only); fi
if [[ "$X" == 1 ]]; then ARGS+=(--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'); fi
exec vllm serve "${ARGS[@]}"
""", "error"),
])
def test_a_value_grown_in_two_ifs_is_read_on_each_combination_of_their_paths(tmp_path, script, outcome):
    (entry,) = decided(write(tmp_path / "run.sh", f"KV='{NIXL}'\n" + script))
    assert entry.decision["outcome"] == outcome
    if outcome == "enabled":
        assert [n.message.rsplit("; ", 1)[1] for n in entry.deployment.notes] == [
            "the decision is the same on each of the 4 paths"] * 2



NESTED_IFS = """OFFLOAD_ARGS=()
if [ "$A" = 1 ]; then
  if [ "$B" = lmcache ]; then
    OFFLOAD_ARGS=(--kv-transfer-config '{kv}')
  fi
fi
vllm serve m "${{OFFLOAD_ARGS[@]}}"
"""


def test_an_if_within_an_ifs_path_is_read_on_each_of_its_paths_too(tmp_path):
    # The outer `if`'s path holds the inner one's merge: that path was read once, its words "may hold options",
    # and the launch was `enabled`, "the same on each of the 2 paths", where A=1 B=lmcache runs
    # LMCacheConnectorV1 and vLLM turns HMA off (survey 34a, SemiAnalysis' InferenceMAX agentic benchmarks).
    (entry,) = decided(write(tmp_path / "lmcache.sh", NESTED_IFS.format(kv=LMCACHE)))
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 7: the command also takes `${OFFLOAD_ARGS[@]}` (which is set differently on the "
                             "paths through `if` at line 2), which may hold options")]
    d = only(read_source(write(tmp_path / "lmcache.sh", NESTED_IFS.format(kv=LMCACHE))))
    assert [which for which, _ in d.paths] == [
        f"path {i} of 4 through `if` at line 3 and `if` at line 2" for i in range(1, 5)]
    # Each path decided alike: that decision, with the note.
    (entry,) = decided(write(tmp_path / "nixl.sh", NESTED_IFS.format(kv=NIXL)))
    assert entry.decision["outcome"] == "enabled"
    assert [n.message.split("; ", 1)[1] for n in entry.deployment.notes] == [
        "HMA is enabled on each of the 4 paths, for reasons that differ between them; the decision shown is that of "
        "path 1 of 4 through `if` at line 3 and `if` at line 2"]



def test_an_if_within_an_ifs_path_copied_into_a_command_array_stays_unresolved(tmp_path):
    # SemiAnalysisAI/InferenceX (843c6254) agentic/kimik3_fp4_mi355x_mtp.sh, survey 36a: the nested `if`s' value is
    # copied into `VLLM_CMD=(...)` before the launch. The outer merge's value holds only the inner one's marker,
    # which names no option: the launch was `enabled`, where A=1 B=1 runs LMCacheConnectorV1.
    script = write(tmp_path / "run.sh", NESTED_IFS.format(kv=LMCACHE).replace(
        'vllm serve m "${OFFLOAD_ARGS[@]}"', 'CMD=(vllm serve m "${OFFLOAD_ARGS[@]}")\n"${CMD[@]}"'))
    (entry,) = decided(script)
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 8: the command also takes `${OFFLOAD_ARGS[@]}` (which is set differently on the "
                             "paths through `if` at line 2), which may hold options")]
    # Each path's elements in place of the copy's: where the paths agree, their decision.
    script.write_text(script.read_text().replace(LMCACHE, NIXL), encoding="utf-8")
    (entry,) = decided(script)
    assert (entry.decision["outcome"], len(only(read_source(script)).paths)) == ("enabled", 4)


@pytest.mark.parametrize(("kv", "outcome"), [(NIXL, "enabled"), (LMCACHE, "error")])
def test_an_array_a_case_sets_copied_into_a_command_array_is_read_on_each_path(tmp_path, kv, outcome):
    # togethercomputer/InferenceX (178b0ae6) agentic/dsv4_fp4_b200_vllm.sh, survey 36a: OFFLOAD_ARGS set by a `case`,
    # copied into `CMD=(vllm serve ... "${OFFLOAD_ARGS[@]}")`, which runs. A copy of a scalar was read per path, a
    # copy of an array was not: `source.unresolved` where every path is `enabled`.
    script = write(tmp_path / "run.sh", f"""OFFLOAD_ARGS=()
case "$OFFLOADING" in
  none) ;;
  dram) OFFLOAD_ARGS=(--kv-transfer-config '{kv}') ;;
  *) exit 1 ;;
esac
CMD=(vllm serve m --no-disable-hybrid-kv-cache-manager "${{OFFLOAD_ARGS[@]}}")
"${{CMD[@]}}"
""")
    d = only(read_source(script))
    assert [which for which, _ in d.paths] == ["path 1 of 2 through `case` at line 2", "path 2 of 2 through `case` at line 2"]
    assert [document.get("kv_transfer_config") for _, document in d.paths] == [None, kv]
    (entry,) = decided(script)
    assert entry.decision["outcome"] == outcome

def test_a_loop_within_an_ifs_path_that_adds_words_not_known_leaves_the_launch_decided(tmp_path):
    # vllm-project/vllm tests/v1/kv_connector/nixl_integration/run_multi_connector_accuracy_test.sh (fleet corpus):
    # `if [[ -n "$VLLM_SERVE_EXTRA_ARGS" ]]` then a loop adds each of them to the command line, then `eval`. Reading
    # the loop within the `if`'s path made the launch an error; what it adds is a value not known, a note.
    script = write(tmp_path / "run.sh", f"""KV='{NIXL}'
run() {{
  local kv_config=$2
  BASE_CMD="vllm serve $1 --port 8100 --kv-transfer-config '$kv_config'"
  if [[ -n "$VLLM_SERVE_EXTRA_ARGS" ]]; then
    IFS=',' read -r -a extra_args <<< "$VLLM_SERVE_EXTRA_ARGS"
    for arg in "${{extra_args[@]}}"; do
      BASE_CMD="${{BASE_CMD}} $arg"
    done
  fi
  if [[ -n "$ATTENTION_BACKEND" ]]; then
    BASE_CMD="${{BASE_CMD}} --attention-backend $ATTENTION_BACKEND"
  fi
  eval "$BASE_CMD &"
}}
run m "$KV"
""")
    (entry,) = decided(script)
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert [n.code for n in entry.deployment.notes] == ["source.unresolved_arguments"] * 2

MODULE_BY_IF = """if [ "$USE_UNIFIED" = true ]; then
    WORKER_MODULE="dynamo.vllm.unified_main"
else
    WORKER_MODULE="{other}"
fi
CUDA_VISIBLE_DEVICES=0 python3 -m "$WORKER_MODULE" --model Qwen/Qwen3-0.6B \\
    --kv-transfer-config '{kv}' &
"""


def test_a_module_an_if_chooses_is_a_launch_where_each_path_runs_vllm_s(tmp_path):
    """Dynamo's examples/backends/vllm/launch/disagg.sh (ai-dynamo/dynamo): the worker module is
    `dynamo.vllm` or `dynamo.vllm.unified_main` by a flag. The launch was not found at all."""
    (entry,) = decided(write(tmp_path / "disagg.sh", MODULE_BY_IF.format(other="dynamo.vllm", kv=LMCACHE)))
    assert (entry.deployment.line, entry.decision["outcome"]) == (6, "disabled")
    assert [(n.code, n.message) for n in entry.deployment.notes] == [(
        "source.unresolved_unused", "the module `-m` runs is `dynamo.vllm$WORKER_MODULE`, where `$WORKER_MODULE` is "
        "set differently on the paths through `if` at line 1; the decision is the same on each of the 2 paths")]


@pytest.mark.parametrize("other", ["sglang.launch_server", "$FROM_ENV"])
def test_a_module_an_if_chooses_is_no_launch_where_a_path_runs_another_program(tmp_path, other):
    found = read_source(write(tmp_path / "disagg.sh", MODULE_BY_IF.format(other=other, kv=LMCACHE)))
    assert (found.deployments, [p.code for p in found.notes]) == ((), ["source.unrecognized"])


def test_a_module_no_path_sets_is_no_launch(tmp_path):
    found = read_source(write(tmp_path / "run.sh", f"python3 -m \"$MODULE\" --kv-transfer-config '{LMCACHE}'\n"))
    assert (found.deployments, [p.code for p in found.notes]) == ((), ["source.unrecognized"])


def test_reading_a_launch_again_for_each_path_says_its_problems_once(tmp_path):
    found = read_source(write(tmp_path / "run.sh", f"""if [ "$R" = a ]; then KV='{NIXL}'; else KV='{NIXL} '; fi
docker run vllm/vllm-openai:v0.20.0 serve --kv-transfer-config "$KV"
"""))
    assert len(only(found).paths) == 2
    assert [p.code for p in found.problems] == ["source.serve_twice"]


@pytest.mark.parametrize("script", [
    # the paths decide differently (HMA on with NixlConnector, off with LMCacheConnectorV1)
    f"""if [ "$ROLE" = p ]; then KV='{NIXL}'; else KV='{LMCACHE}'; fi
vllm serve m --kv-transfer-config "$KV"
""",
    # the value changed after the `if`: what each path set is no longer what the launch reads
    f"""if [ "$ROLE" = p ]; then KV='{NIXL}'; else KV='{NIXL}  '; fi
KV="$KV$EXTRA"
vllm serve m --kv-transfer-config "$KV"
""",
    # a path whose value is itself unknown
    f"""if [ "$ROLE" = p ]; then KV='{NIXL}'; else KV="$OTHER"; fi
vllm serve m --kv-transfer-config "$KV"
""",
    # more paths than are read again (each alone would give the same decision)
    "case $R in\n" + "".join(f"  {arm}) KV='{NIXL[:-1]}, \"engine_id\": \"e{i}\"}}';;\n"
                               for i, arm in enumerate(["0", "1", "2", "3", "*"])) + "esac\n"
    + 'vllm serve m --kv-transfer-config "$KV"\n',
])
def test_a_launch_the_paths_do_not_decide_alike_stays_unresolved(tmp_path, script):
    (entry,) = decided(write(tmp_path / "run.sh", script))
    assert [e["code"] for e in entry.decision["errors"]] == ["source.unresolved"]


def test_paths_that_reach_one_outcome_for_different_reasons_settle_it(tmp_path):
    # Both connectors support HMA: which path runs does not change what vLLM does, so the
    # launch is no `source.unresolved` error (it was, as the two decisions' reasons differ).
    script = ("if [ -n \"$PD\" ]; then CONNECTOR=NixlConnector; else CONNECTOR=OffloadingConnector; fi\n"
              "vllm serve m --kv-transfer-config \"{\\\"kv_connector\\\":\\\"$CONNECTOR\\\",\\\"kv_role\\\":\\\"kv_both\\\"}\"\n")
    (entry,) = decided(write(tmp_path / "run.sh", script))
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert [c["kv_connector"] for c in entry.decision["connectors"]] == ["NixlConnector"]  # the first path's decision
    assert [n.message for n in entry.deployment.notes] == [
        "`--kv-transfer-config` takes its value at `/kv_connector` from `$CONNECTOR` (which is set differently on the "
        "paths through `if` at line 1); HMA is enabled on each of the 2 paths, for reasons that differ between them; "
        "the decision shown is that of path 1 of 2 through `if` at line 1"]


def test_paths_that_vllm_refuses_each_for_its_own_reason_settle_as_an_error(tmp_path):
    # An explicit enable refused with LMCacheConnectorV1 on one path, a connector vLLM does not know on the other.
    script = (f"if [ -n \"$A\" ]; then KV='{LMCACHE}'; else KV='{NIXL.replace('Nixl', 'NoSuch')}'; fi\n"
              "vllm serve m --no-disable-hybrid-kv-cache-manager --kv-transfer-config \"$KV\"\n")
    (entry,) = decided(write(tmp_path / "run.sh", script))
    assert entry.decision["outcome"] == "error"
    assert entry.decision["errors"][0]["code"] != "source.unresolved"
    assert entry.deployment.notes[0].message.endswith(
        "vLLM refuses the command on each of the 2 paths, for reasons that differ between them; the decision shown "
        "is that of path 1 of 2 through `if` at line 1")


@pytest.mark.parametrize("build, outcome", [
    # a string, grown on one path of the `if`
    ("""CMD="vllm serve m --port 8000"
if [ -n "$OFFLOAD" ]; then CMD="$CMD --kv-transfer-config {kv_escaped}"; fi
$CMD
""", None),
    # an array, grown on one path (ModelEngine-Group/unified-cache-management's run_vllm.sh)
    ("""CMD=(vllm serve m --port 8000)
if [ -n "$OFFLOAD" ]; then CMD+=(--kv-transfer-config '{kv}'); fi
"${{CMD[@]}}"
""", None),
    # the same on both paths: decided
    ("""CMD=(vllm serve m --port 8000)
if [ -n "$OFFLOAD" ]; then CMD+=(--max-num-seqs 8); fi
"${{CMD[@]}}" --kv-transfer-config '{kv}'
""", "disabled"),
])
def test_a_command_grown_on_one_path_is_decided_per_path(tmp_path, build, outcome):
    # A word the paths set differently may hold options: it was read as "only the options
    # written here", so LMCache added on one path was "enabled" with a note.
    kv = LMCACHE.replace(" ", "")
    (entry,) = decided(write(tmp_path / "run.sh", build.format(kv=kv, kv_escaped=kv.replace('"', '\\"'))))
    if outcome is None:
        assert [e["code"] for e in entry.decision["errors"]] == ["source.unresolved"]
    else:
        assert (entry.decision["outcome"], entry.decision["errors"]) == (outcome, [])


def test_a_launch_is_read_on_each_combination_of_two_ifs_paths(tmp_path):
    # Two `if`s, two paths each: four readings (MAX_BRANCHES), all alike here.
    script = f"""ARGS=""
if [ -n "$A" ]; then ARGS="--max-num-seqs 8"; fi
if [ -n "$B" ]; then EXTRA="--enforce-eager"; else EXTRA="--port 8000"; fi
vllm serve m $ARGS $EXTRA --kv-transfer-config '{LMCACHE}'
"""
    d = only(read_source(write(tmp_path / "run.sh", script)))
    assert [which for which, _ in d.paths] == [
        f"path {i} of 4 through `if` at line 2 and `if` at line 3" for i in range(1, 5)]
    (entry,) = decided(write(tmp_path / "run.sh", script))
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("disabled", [])
    # A third `if` makes eight: more than are read again, and the words stay a note.
    many = script.replace("vllm serve", 'if [ -n "$C" ]; then MORE=-x; else MORE=-y; fi\nvllm serve $MORE')
    d = only(read_source(write(tmp_path / "many.sh", many)))
    assert (d.paths, [p.code for p in d.problems]) == ((), [])



THREE_IFS = """OFFLOAD_ARGS=()
if [[ "$KV_OFFLOADING" == dram ]]; then OFFLOAD_ARGS=(--kv-transfer-config '{kv}'); fi
PARALLEL_ARGS=(--tensor-parallel-size "$TP")
if [[ "$DP_ATTENTION" == "true" ]]; then PARALLEL_ARGS=(--tensor-parallel-size 1 --data-parallel-size "$TP"); fi
EP_ARGS=()
if (( EP_SIZE > 1 )); then EP_ARGS=(--enable-expert-parallel); fi
vllm serve m "${{PARALLEL_ARGS[@]}}" "${{EP_ARGS[@]}}" "${{OFFLOAD_ARGS[@]}}"
"""


@pytest.mark.parametrize(("kv", "outcome"), [(NIXL, "enabled"), (LMCACHE, "error")])
def test_beyond_the_bound_only_the_paths_of_values_the_decision_reads_are_read(tmp_path, kv, outcome):
    # SemiAnalysis' InferenceMAX agentic benchmarks (minimaxm3_fp8_h100.sh, survey 34a): three `if`s make eight
    # combinations, more than are read again, so the KV config's `if` was a source.unresolved error where each of
    # its paths is `enabled`. The `if`s that set a parallel size and expert parallelism set nothing the decision
    # reads: their words stay notes, and only the KV config's two paths are read.
    d = only(read_source(write(tmp_path / "run.sh", THREE_IFS.format(kv=kv))))
    assert [which for which, _ in d.paths] == ["path 1 of 2 through `if` at line 2", "path 2 of 2 through `if` at line 2"]
    (entry,) = decided(write(tmp_path / "run.sh", THREE_IFS.format(kv=kv)))
    assert entry.decision["outcome"] == outcome
    assert [n.message for n in entry.deployment.notes][:2] == [
        "the command also takes `${PARALLEL_ARGS[@]}` (which is set differently on the paths through `if` at line 4); "
        "only the options written here are read, and it may hold others",
        "the command also takes `${EP_ARGS[@]}` (which is set differently on the paths through `if` at line 6); only "
        "the options written here are read, and it may hold others"]
    # A value that names no option, but is one's value, is the decision's all the same (`--kv-transfer-config "$KV"`).
    other = LMCACHE if kv == NIXL else NIXL
    json_value = (f"KV='{other}'\n" + THREE_IFS.format(kv=kv).replace("OFFLOAD_ARGS=(--kv-transfer-config '" + kv + "')",
                                                                     "KV='" + kv + "'")
                  .replace('"${OFFLOAD_ARGS[@]}"', '--kv-transfer-config "$KV"'))
    (entry,) = decided(write(tmp_path / "json.sh", json_value))
    assert (len(entry.deployment.paths), entry.decision["outcome"]) == (2, "error")  # (paths that disagree)


def test_beyond_the_bound_a_value_grown_in_ifs_one_of_which_decides_stays_unresolved(tmp_path):
    # vllm-project/vllm-neuron (a5ef7c88) test/utils/server/start_server.sh grows `cmd_args` in nine `if`s (survey
    # 36b): a chain of merges, each read within the next one's values. With the KV config's `if` first and two
    # more, a reading of the non-deciding ones alone left the launch `enabled`, with no connector.
    script = write(tmp_path / "run.sh", f"""KV='{LMCACHE}'
args=(--model m)
if [[ -n "$USE_KV" ]]; then args+=(--kv-transfer-config "$KV"); fi
if [[ "$A" == true ]]; then args+=(--port 1); fi
if [[ "$B" == true ]]; then args+=(--port 2); fi
vllm serve "${{args[@]}}"
""")
    (entry,) = decided(script)
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 6: the command also takes `${args[@]}` (which is set differently on the paths "
                             "through `if` at line 3), which may hold options")]

def test_beyond_the_bound_a_value_grown_in_ifs_is_read_on_the_paths_of_those_that_decide(tmp_path):
    # jasl/vllm-ds4-sm120-harness (c911a0e) scripts/run_b200_baseline.sh grows OFFICIAL_SERVE_ARGS in three `if`s and
    # `case`s, one of them the speculative config, written out (survey 43b). Beyond the bound, a chain was read on no
    # path, and the launch was an `error`. It is read on the paths of the `if` that decides, each other on its first
    # path (what they add are options the decision does not read), those staying notes.
    script = write(tmp_path / "run.sh", """ARGS=(serve m)
if [ "$A" = 1 ]; then ARGS+=(--enforce-eager); fi
if [ "$V" = mtp ]; then ARGS+=(--speculative-config '{"method":"mtp","num_speculative_tokens":2}'); fi
if [ "$B" = 1 ]; then ARGS+=(--port 9000); fi
vllm "${ARGS[@]}"
""")
    (entry,) = decided(script)
    assert (entry.decision["outcome"], [(n.code, n.message) for n in entry.deployment.notes]) == ("enabled", [
        ("source.unresolved_arguments", "the command also takes `${ARGS[@]}` (which is set differently on the paths "
                                        "through `if` at line 2); only the options written here are read, and it may "
                                        "hold others"),
        ("source.unresolved_arguments", "the command also takes `${ARGS[@]}` (which is set differently on the paths "
                                        "through `if` at line 4); only the options written here are read, and it may "
                                        "hold others"),
        ("source.unresolved_unused", "the command also takes `${ARGS[@]}` (which is set differently on the paths "
                                     "through `if` at line 3), which may hold options; the decision is the same on each "
                                     "of the 2 paths")])
    assert [which for which, _ in only(read_source(script)).paths] == [
        "path 1 of 2 through `if` at line 3", "path 2 of 2 through `if` at line 3"]


def test_a_word_no_path_sets_stays_open_when_the_paths_settle_another_value(tmp_path):
    # The paths read `$KV` as each `if` branch sets it; `$EXTRA_ARGS` is set on none, so they
    # do not settle it: it is the note it would be without the `if`, not "the same on each path".
    nixl = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
    script = (f"if [ \"$ROLE\" = prefill ]; then KV='{nixl % 'kv_producer'}'; else KV='{nixl % 'kv_consumer'}'; fi\n"
              "vllm serve m $EXTRA_ARGS --kv-transfer-config \"$KV\"\n")
    d = only(read_source(write(tmp_path / "run.sh", script)))
    (entry,) = decided(write(tmp_path / "run.sh", script))
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert [(n.code, n.message) for n in entry.deployment.notes] == [
        ("source.unresolved_arguments", "the command also takes `$EXTRA_ARGS`, which this file does not set; only the "
                                        "options written here are read, and it may hold others"),
        ("source.unresolved_unused", "`--kv-transfer-config` takes its value from `$KV` (which is set differently on the "
                                     "paths through `if` at line 1); the decision is the same on each of the 2 paths")]
    assert len(d.paths) == 2


def test_an_evaluated_text_made_before_is_not_read_again_per_path(tmp_path):
    # `eval "$CMD"` runs a text made from the merged value: reading the launch again in
    # a path's variables gives the same words, which is no reading of that path (it
    # said "the decision is the same on each of the 2 paths" without having read them).
    d = only(read_source(write(tmp_path / "run.sh", f"""CMD="vllm serve m --kv-transfer-config '{NIXL}'"
if [ -n "$A" ]; then CMD="$CMD --enforce-eager"; fi
eval "$CMD"
""")))
    assert (d.paths, d.problems, [n.code for n in d.notes]) == ((), (), ["source.unresolved_arguments"])


def test_an_evaluated_text_a_path_gives_an_option_the_decision_reads_is_unresolved(tmp_path):
    # LMCache/LMCache-Ascend (169ee72) benchmark/v1/rag/online.sh: `if [[ -n "$kv_args" ]]; then cmd="$cmd
    # --kv-transfer-config '$kv_args'"; fi` then `eval "$cmd &"` was `enabled`, a note saying `$cmd` may hold others,
    # where the same script without `eval` is source.unresolved (survey 31b).
    kv = '{\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}'
    d = only(read_source(write(tmp_path / "run.sh", (
        f'cmd="vllm serve m --port 8000"\nif [[ -n "$KV" ]]; then\n  cmd="$cmd --kv-transfer-config \'{kv}\'"\nfi\n'
        'eval "$cmd &"\n'))))
    assert [(p.code, p.message) for p in d.problems] == [(
        "source.unresolved", "the command also takes `$cmd` (which is set differently on the paths through `if` at "
                             "line 2), which may hold options")]
    # Each path ends the quoted JSON differently: its text (`producer"}'`) in the place of the merged value's marker
    # kept the quote that `eval` removes, and each path's config was JSON that is none (input.parse), "the same on
    # each of the 2 paths".
    producer, consumer = (kv.replace("kv_both", role) for role in ("kv_producer", "kv_consumer"))
    d = only(read_source(write(tmp_path / "run.sh", (
        f'cmd="vllm serve m"\nif [[ -n "$P" ]]; then\n  cmd="$cmd --kv-transfer-config \'{producer}\'"\nelse\n'
        f'  cmd="$cmd --kv-transfer-config \'{consumer}\'"\nfi\neval "$cmd"\n'))))
    assert [(p.code, p.message) for p in d.problems] == [(
        "source.unresolved", "`--kv-transfer-config` takes its value from `$cmd` (which is set differently on the "
                             "paths through `if` at line 2)")]
    assert d.paths == ()


def test_where_a_path_cannot_be_read_the_words_stay_a_note(tmp_path):
    # The paths settle a word only if every path's command reads: here one gives
    # `--kv-transfer-config` no value, and the launch is read as before, with a note.
    script = f"""if [ -n "$A" ]; then EXTRA="--kv-transfer-config"; else EXTRA="--enforce-eager"; fi
vllm serve m $EXTRA --port 8000
"""
    d = only(read_source(write(tmp_path / "run.sh", script)))
    assert (d.problems, [n.code for n in d.notes]) == ((), ["source.unresolved_arguments"])


def test_a_script_s_unread_launch_is_noted_where_it_is_written_not_at_a_comment(tmp_path):
    # gluesys/lmcache-daos (01605b8) deploy/launchers/run_vllm_mp_c5.sh: a comment at line 7 names LMCacheMPConnector;
    # the launch, in a here-document that `read -d ''` takes, passes DaosMPConnector at line 41. The note pointed at the
    # comment (survey 31d). A comment is where it points only where nothing else mentions a KV option.
    script = write(tmp_path / "launch.sh", (
        "#!/bin/bash\n# vllm serve talks to LMCacheMPConnector over ZMQ\nread -r -d '' INNER <<EOF2\n"
        "exec vllm serve m --kv-transfer-config '{\"kv_connector\":\"DaosMPConnector\",\"kv_role\":\"kv_both\"}'\n"
        "EOF2\npodman run -d localhost/img:local bash -c \"$INNER\"\n"))
    assert [(n.line, n.message) for n in audit([str(script)]).notes] == [
        (4, "mentions `kv-transfer-config` at line 4, no vLLM launch recognised")]
    write(script, "#!/bin/bash\n# uses LMCacheMPConnector\necho start\n")
    assert [n.line for n in audit([str(script)]).notes] == [2]


@pytest.mark.parametrize("name", ["run.sh.bak", "choose-and-deploy.sh.backup", "run.sh.orig"])
def test_a_backup_of_a_script_is_read_for_its_mentions(tmp_path, name):
    # LMCache/LMBench (18fe892) helm-production-stack/choose-and-deploy.sh.backup: a backup that mentions a KV option
    # was skipped without a word, where "no silent miss" promises a note (survey 31a). A backup is kept, not run.
    backup = write(tmp_path / name, "#!/bin/bash\nvllm serve m --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}'\n")
    report = audit([str(backup)])
    assert (report.entries, [(n.line, n.message) for n in report.notes]) == ((), [
        (2, "mentions `kv-transfer-config` at line 2, no vLLM launch recognised")])


@pytest.mark.parametrize("name, text", [
    ("Makefile", "serve:\n\tvllm serve m \\\n\t  --kv-transfer-config '{KV}'\n"),
    ("vllm.mk", "serve:\n\tvllm serve m --kv-transfer-config '{KV}'\n"),
    ("justfile", "serve:\n    vllm serve m --kv-transfer-config '{KV}'\n"),
    ("Procfile", "web: vllm serve m --port $PORT --kv-transfer-config '{KV}'\n"),
    ("Jenkinsfile", "pipeline {\n  stages { stage('serve') { steps { sh \"vllm serve m --kv-transfer-config '{KV}'\" } } }\n}\n"),
], ids=["makefile", "mk", "justfile", "procfile", "jenkinsfile"])
def test_a_file_of_commands_another_tool_runs_is_read_for_its_mentions(tmp_path, name, text):
    # Such a file has no suffix and no shebang: a make recipe that runs vLLM with a KV config was
    # skipped as no deployment source without a word, where "no silent miss" promises a note. The
    # audit reads no make, just, Procfile or Jenkins syntax: it says where the file mentions one.
    commands = write(tmp_path / name, text.replace("{KV}", NIXL))
    report = audit([str(commands)])
    line = 1 + text.split("--kv-transfer-config")[0].count("\n")
    assert (report.entries, [(n.line, n.message) for n in report.notes]) == ((), [
        (line, f"mentions `kv-transfer-config` at line {line}, no vLLM launch recognised")])
    write(commands, "build:\n\tpython -m build\n")  # one that mentions none is skipped, as before
    quiet = audit([str(commands)])
    assert (quiet.notes, quiet.files[0].skipped) == ((), "not a deployment source (not JSON, YAML, a shell "
                                                         "script, Python or a Dockerfile)")


def test_a_value_not_known_in_a_script_the_file_writes_stays_a_value_not_known(tmp_path):
    # khossain4337/dynamo-disagg-alcf (04f35ae) tara_north/run_pd_nemotron_1p1d_N2.sh writes launch_role.sh with a
    # here-document that expands `export LD_PRELOAD=${SHIM}`, SHIM made from `$(cd ... && pwd)`, and runs it. The
    # written text's marker was turned into its text, `$(...)`, read again as a command substitution: the export was
    # "of a computed name", which may set any variable, and the launch's `$KV` unknown (survey 33b).
    script = write(tmp_path / "run.sh", (
        '#!/bin/bash\nDIR="$(cd "$(dirname "$0")" && pwd)"\ncat > run2.sh <<EOF\n'
        "KV='{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\nexport LD_PRELOAD=${DIR}/shim.so\n"
        'vllm serve m --kv-transfer-config "\\${KV}"\nEOF\nbash run2.sh\n'))
    (entry,) = decided(script)
    assert (entry.decision["outcome"], entry.deployment.line, entry.deployment.problems) == ("enabled", 6, ())


def test_a_script_written_at_a_path_not_known_is_run_at_the_same_words(tmp_path):
    # khossain4337/dynamo-disagg-alcf (04f35ae): `cat > ${SHARED}/launch_role.sh <<EOF` then `bash
    # ${SHARED}/launch_role.sh`, SHARED made from `$(date ...)`: the launch was missed, with a note (survey 33b). The
    # same words name the same file, as for `kubectl apply -f "${NAME}.yaml"`.
    script = write(tmp_path / "run.sh", (
        "D=/tmp/run-$(date +%s)\ncat > $D/run.sh <<EOF\nvllm serve m --kv-transfer-config "
        "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\nEOF\nbash $D/run.sh\nbash $D/other.sh\n"))
    (d,) = read_source(script).deployments
    assert (d.line, ktc(d)["kv_connector"], d.problems) == (3, "NixlConnector", ())


def test_a_value_not_known_in_a_single_quoted_script_a_command_runs_keeps_its_quotes_to_itself(tmp_path):
    # bandham-manikanta/vllm-pd-disaggregation-study (8bb5ba5) capture_nsys_traces.sh: `ssh "$NODE1" "nohup
    # bash -c '... vllm serve \"${MODEL}\" ...'"`. Where the value not known carries a reason with an apostrophe
    # ("the script's argument 1"), that apostrophe ended the single-quoted script: "a double quote is not closed", and
    # the launch was lost. A marker in a quoted text made at run time is opaque.
    script = write(tmp_path / "run.sh", (
        '#!/usr/bin/env bash\nMODEL=${1:-"Qwen/Qwen3-8B"}\nssh "${NODE1}" "nohup bash -c \'\n'
        '      vllm serve \\"${MODEL}\\" --port 8000\n    \'"\n'))
    found = read_source(script)
    (d,) = found.deployments
    assert (found.problems, d.line) == ((), 3)


def test_a_path_s_quoted_text_is_put_in_place_of_its_own_marker_beside_another_written_in_the_text(tmp_path):
    # khossain4337/dynamo-disagg-alcf (04f35ae) run_pd_nemotron_1p1d_N2.sh writes its launcher with a here-document:
    # `${MODEL}` (not known) expanded into the written text, and `\${KV_CFG}`, which an `if` in the launcher sets per
    # role to a quoted NixlConnector config. Each path's config, which holds quotes, was refused because some marker
    # stood in the command's own text, and the launch was source.unresolved (survey 33b). Only a marker written in the
    # text (an `eval`'s) is read anew by the shell.
    nixl = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
    script = write(tmp_path / "run.sh", (
        "cat > launch.sh <<EOF\n"
        f'if [ "\\$(hostname)" = p ]; then\n  KV_CFG=\'{nixl % "kv_producer"}\'\nelse\n'
        f'  KV_CFG=\'{nixl % "kv_consumer"}\'\nfi\n'
        'exec vllm serve ${MODEL} --kv-transfer-config "\\${KV_CFG}"\nEOF\nbash launch.sh\n'))
    (entry,) = decided(script)
    assert (entry.decision["outcome"], entry.decision["errors"]) == ("enabled", [])
    assert entry.deployment.notes[-1].message.endswith("the decision is the same on each of the 2 paths")


def test_gcloud_ssh_runs_its_command_option_remotely(tmp_path):
    # synechism/pddisagg (a281e7b) scripts/cloud/start_pd_ici.sh: `gcloud compute tpus tpu-vm ssh "$TPU" ...
    # --command='for port in ...; do ...; done'` was read as OpenSSH's `ssh HOST CMD`, its remote command
    # `--command=for ...`: a false source.shell_syntax problem ("unexpected `do`"), and a launch in it was missed
    # (survey 33b). gcloud's `ssh` runs the text of its `--command` on the VM.
    kv = '\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_both\\"'
    script = write(tmp_path / "run.sh", (
        "gcloud compute tpus tpu-vm ssh tpu --zone z --command='for p in 1 2; do x=0; done'\n"
        f"gcloud compute ssh vm --command='vllm serve m --kv-transfer-config \"{{{kv}}}\"'\n"))
    found = read_source(script)
    (d,) = found.deployments
    assert (found.problems, d.line, ktc(d)) == ((), 2, {"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def test_a_script_argument_with_a_default_says_both(tmp_path):
    # hoaraujerome/vllm-deployment (75cee54) phase1/serve-local.sh: `model="${1:-$DEFAULT_MODEL}"` was "the model is
    # `${1:-$DEFAULT_MODEL}`, which this file does not set", though the file sets the default (survey 32c).
    d = only(read_source(write(tmp_path / "run.sh", (
        'DEFAULT_MODEL="org/m"\nmodel="${1:-$DEFAULT_MODEL}"\nexec vllm serve "$model" --port "${2:-8000}" '
        '--max-model-len "${3:-$UNSET}"\n'))))
    assert [n.message for n in d.notes] == [
        "the model is `${1:-$DEFAULT_MODEL}`, where `${1:-$DEFAULT_MODEL}` is the script's argument 1, else `org/m`; the "
        "decision does not read the model's name",
        "`--port` takes its value from `${2:-8000}` (which is the script's argument 2, else `8000`); the decision does "
        "not read it",
        "`--max-model-len` takes its value from `${3:-$UNSET}`, which this file does not set; the decision does not read it"]


def test_an_array_element_at_an_index_the_script_sets_is_that_element(tmp_path):
    # LMCache/LMBench (18fe892) 2-serving-engines/flat/basic-vllm/4-vanilla-robin.sh: `--port "${free_ports[$i]}"` in a
    # loop was "`${free_ports[$i]}`, which this file does not set", though the file sets the array (survey 31a).
    script = write(tmp_path / "run.sh", (
        "free_ports=(8000 8001)\nfor i in 0 1; do\n  vllm serve m --port \"${free_ports[$i]}\" &\ndone\n"
        "for j in $(seq 0 1); do vllm serve m2 --port \"${free_ports[$j]}\"; done\n"))
    first, second = read_source(script).deployments
    assert (first.line, [n.message for n in first.notes]) == (3, [])
    assert [n.message for n in second.notes] == [
        "`--port` takes its value from `${free_ports[$j]}` (which is an element of an array at an index not known "
        "from this file); the decision does not read it"]


def test_a_command_held_in_an_array_is_read_element_by_element(tmp_path):
    # `"${CMD[@]}"` is each element a word (spaces kept), `${CMD[*]}` them joined,
    # `${CMD[1]}` one; an array was an unknown value, and its launch was not found.
    d = only(read_source(write(tmp_path / "run.sh", f"""KV='{NIXL}'
ARGS=(--served-model-name "my model")
declare -a CMD=(vllm serve m)
CMD+=(--kv-transfer-config "$KV" "${{ARGS[@]}}")
echo "${{CMD[*]}} ${{#CMD[@]}} ${{CMD[1]}}"
"${{CMD[@]}}"
""")))
    assert (d.line, d.problems, ktc(d)["kv_connector"]) == (6, (), "NixlConnector")
    assert dict(d.origins)["kv_transfer_config"] == "line 6: --kv-transfer-config"


def test_an_unknown_value_is_one_word_however_its_reason_reads(tmp_path):
    """Field splitting of `$MODEL` set differently on two paths keeps the unknown
    value whole (regression: the words of its reason were split off as words of
    the command, the model was `\x00$MODEL\x01is`, and `vllm serve` read the
    rest as arguments it would refuse)."""
    script = write(tmp_path / "run.sh", f"""if [ "$ROLE" = prefill ]; then MODEL=a; else MODEL=b; fi
vllm serve $MODEL --kv-transfer-config '{NIXL}'
""")
    d = only(read_source(script))
    assert d.problems == () and "model" not in d.document
    assert [n.message for n in d.notes] == ["the model is `$MODEL`, where `$MODEL` is set differently on the "
                                            "paths through `if` at line 1; the decision does not read the model's name"]


def test_an_unknown_value_whose_reason_quotes_another_reads_as_written(tmp_path):
    """A reason that quotes a word holding an unknown value (`source
    "$(dirname $0)/env.sh"`) shows it as written (regression: the markers
    nested, and the note read "`$A$(...)/env.sh` at line 2, ...`, where
    `$A` may be set by `source ;")."""
    script = write(tmp_path / "run.sh", f"""A=--enforce-eager
. "$(git rev-parse --show-toplevel)/env.sh"
vllm serve m $A --kv-transfer-config '{NIXL}'
""")
    d = only(read_source(script))
    assert d.problems == () and ktc(d)["kv_connector"] == "NixlConnector"
    assert [n.message for n in d.notes] == [
        "the command also takes `$A` (which may be set by `source $(...)/env.sh` at line 2, a file the audit does "
        "not read); only the options written here are read, and it may hold others"]
    # The script's own folder, `$(dirname "$0")`, is where it is read from (a file the audit does not read there).
    script.write_text(script.read_text().replace("git rev-parse --show-toplevel", 'dirname "$0"'), encoding="utf-8")
    assert [n.message for n in only(read_source(script)).notes] == [
        "the command also takes `$A` (which may be set by `source ./env.sh` at line 2, a file the audit does "
        "not read); only the options written here are read, and it may hold others"]



@pytest.mark.parametrize("folder", ['"$(dirname "$0")"', '"$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"',
                                    '$(cd $(dirname $0) && pwd)'])
def test_the_scripts_own_folder_finds_the_files_beside_it(tmp_path, folder):
    # SemiAnalysisAI/InferenceX (843c6254): each benchmark sources "$(dirname "$0")/../benchmark_lib.sh", whose
    # `write_command FILE "${VLLM_CMD[@]}"` only prints the command. The sourced file was not found, and the call
    # was read as a wrapper that runs its arguments: one launch too many for each script (survey 36a).
    write(tmp_path / "lib.sh", "write_command() {\n  local f=\"$1\"; shift\n  printf '%q ' \"$@\" | tee \"$f\"\n}\n")
    write(tmp_path / "c.yaml", f"kv-transfer-config: '{NIXL}'\n")
    script = write(tmp_path / "run.sh", f"""SCRIPT_DIR={folder}
source "$SCRIPT_DIR/lib.sh"
CMD=(vllm serve m --config "$SCRIPT_DIR/c.yaml")
write_command /tmp/cmd.txt "${{CMD[@]}}"
"${{CMD[@]}}" &
""")
    d = only(read_source(script))
    assert (d.line, ktc(d)["kv_connector"]) == (5, "NixlConnector")

def test_an_option_named_by_an_unknown_value_takes_no_word_and_keeps_its_name(tmp_path):
    """`${ACCESS_LOG_ARGS}`, one word on each of two paths, is `--disable-`
    and an unknown rest: an option whose name is not known. It takes no
    word of the command, its variable keeps its underscores, and the notes
    show it as written (regression: `--disable-\x00$ACCESS-LOG-ARGS\x01...`
    took `$SHUTDOWN_ARGS` as its value)."""
    script = write(tmp_path / "run.sh", f"""ACCESS_LOG_ARGS="--disable-uvicorn-access-log"
SHUTDOWN_ARGS=""
if [ -n "$NEW" ]; then
  ACCESS_LOG_ARGS="--disable-log-requests"
  SHUTDOWN_ARGS="--shutdown-timeout 15"
fi
vllm serve m ${{ACCESS_LOG_ARGS}} ${{SHUTDOWN_ARGS}} --kv-transfer-config '{NIXL}'
""")
    d = only(read_source(script))
    assert [(p.code, p.message) for p in d.problems] == [
        ("source.unresolved", "the command also takes the option `--disable-$ACCESS_LOG_ARGS`, where "
         "`$ACCESS_LOG_ARGS` is set differently on the paths through `if` at line 3, whose name is not known"),
        ("source.unresolved", "the command also takes `$SHUTDOWN_ARGS` (which is set differently on the paths "
         "through `if` at line 3), which may hold options")]
    # Each path's command is read as written there, and both decide alike: that is the decision.
    assert [ktc_of(doc)["kv_connector"] for _, doc in d.paths] == ["NixlConnector", "NixlConnector"]
    (entry,) = decided(script)
    assert (entry.decision["outcome"], [n.code for n in entry.deployment.notes]) == (
        "enabled", ["source.unresolved_unused", "source.unresolved_unused"])
    # Where a path's value is several words (kserve's LLMInferenceServiceConfig presets:
    # `--disable-access-log-for-endpoints /health,/metrics`), the whole word is the unknown one: not
    # "the option `--disable-$ACCESS_LOG_ARGS`, whose name is not known" (survey 26a).
    write(script, script.read_text().replace('"--disable-log-requests"',
                                             '"--disable-access-log-for-endpoints /health,/metrics"'))
    assert [p.message for p in only(read_source(script)).problems][0] == (
        "the command also takes `$ACCESS_LOG_ARGS` (which is set differently on the paths through `if` at line 3), "
        "which may hold options")


def test_a_command_line_grown_differently_on_each_path_is_unknown_from_the_word_where_they_differ(tmp_path):
    # vllm-project/vllm (002a105) tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh: BASE_CMD gains
    # `--tensor-parallel-size ...` on one path, `--data-parallel-size ...` on the other. The paths agree
    # on `... --`, and the note named "the option `--$BASE_CMD`, whose name is not known" (survey 25a).
    script = write(tmp_path / "run.sh", 'CMD="vllm serve m"\nif [[ -n "$X" ]]; then\n  CMD="$CMD --enforce-eager"\n'
                                        'else\n  CMD="$CMD --max-num-seqs 8"\nfi\n$CMD &\n')
    (entry,) = decided(script)
    assert (entry.decision["outcome"], [n.message for n in entry.deployment.notes]) == ("enabled", [
        "the command also takes `$CMD` (which is set differently on the paths through `if` at line 2), which may "
        "hold options; the decision is the same on each of the 2 paths"])


@pytest.mark.parametrize("guard", ['[ "$ARM" != "recompute" ] &&', '[ "$ARM" = "recompute" ] ||'])
def test_a_value_set_after_and_or_or_is_set_on_one_path_only(tmp_path, guard):
    # gluesys/lmcache-daos (01605b8) deploy/launchers/run_arm.sh: `[ "$ARM" != "recompute" ] && KV="--kv-transfer-config
    # ..."` was read as always run: `disabled` (LMCacheConnectorV1), where the recompute baseline starts vLLM with no
    # connector and HMA on. What follows `&&` or `||` runs on a condition, as an `if`'s body (survey 31d).
    kv = '"--kv-transfer-config {\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}"'
    script = write(tmp_path / "run.sh", f'ARM=$1\nKV=""; {guard} KV={kv}\nvllm serve m --port 8001 $KV\n')
    (entry,) = decided(script)
    operator = guard.split()[-1]
    assert (entry.decision["outcome"], [p.message for p in entry.deployment.problems]) == ("error", [
        f"the command also takes `$KV` (which is set differently on the paths through `{operator}` at line 2), which "
        "may hold options"])
    # a launch after `&&` is read as before, and a path that ends (`|| exit 1`) is left out
    write(script, 'ARM=$1\n[ -n "$ARM" ] || exit 1\nKV=' + kv + '\ncd /srv && vllm serve m $KV\n')
    (entry,) = decided(script)
    assert (entry.decision["outcome"], entry.deployment.problems) == ("disabled", ())


def test_a_copy_of_a_value_set_on_each_path_is_read_on_each_path(tmp_path):
    # vllm-project/vllm (002a105) tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh: an `if` sets
    # the end of the NixlConnector config, and a second builds KV_CONFIG='{...}'${KV_CONFIG_HETERO_LAYOUT}'}'
    # from it. Every path is NixlConnector; the copy kept the first `if`'s marker, and the launch was an
    # error, `source.unresolved` (survey 25a).
    script = write(tmp_path / "run.sh", """if [[ -n "$P" ]]; then
  A='{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
else
  A='{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
fi
if [[ -n "$H" ]]; then L=',"kv_buffer_device":"cpu"'; else L=''; fi
KV="$A"
KV2='{"kv_connector":"NixlConnector","kv_role":"kv_both"'${L}'}'
vllm serve m --kv-transfer-config "$KV"
vllm serve m --kv-transfer-config "$KV2"
""")
    assert [e.decision["outcome"] for e in decided(script)] == ["enabled", "enabled"]
    first, second = read_source(script).deployments
    assert [json.loads(doc["kv_transfer_config"])["kv_role"] for _, doc in first.paths] == ["kv_producer", "kv_consumer"]
    assert [json.loads(doc["kv_transfer_config"]).get("kv_buffer_device") for _, doc in second.paths] == ["cpu", None]
    # A copy whose text a path gives with blanks reads differently quoted or not: not read per path.
    write(script, 'if [[ -n "$P" ]]; then A="--enforce-eager --kv-transfer-config x"; else A=""; fi\nB="$A"\n'
                  "vllm serve m $B\n")
    assert only(read_source(script)).paths == ()


def test_a_substitution_says_why_its_value_is_not_known(tmp_path):
    """`$(...)` and `$((...))` are set by the file, but only running it gives
    their text: the notes say so (they said "which this file does not set")."""
    script = write(tmp_path / "run.sh", f"""vllm serve m --port $((BASE + 1)) --served-model-name $(hostname) \\
  --kv-transfer-config '{NIXL}'
""")
    d = only(read_source(script))
    assert d.problems == () and ktc(d)["kv_connector"] == "NixlConnector"
    assert [n.message for n in d.notes] == [
        "`--port` takes its value from `$((BASE + 1))` (which is arithmetic the audit does not evaluate); "
        "the decision does not read it",
        "`--served-model-name` takes its value from `$(...)` (which is the output of a command the audit "
        "does not run); the decision does not read it"]


def test_a_case_on_a_value_the_script_sets_takes_its_arm(tmp_path):
    script = write(tmp_path / "run.sh", f"""ROLE=decode
case "$ROLE" in
  prefill) KV='{LMCACHE}' ;;
  decode|both) KV='{NIXL}' ;;
esac
vllm serve m --kv-transfer-config "$KV"
""")
    assert ktc(only(read_source(script)))["kv_connector"] == "NixlConnector"



def test_a_case_on_a_default_of_a_variable_the_script_does_not_set_reads_every_arm(tmp_path):
    # SemiAnalysis' InferenceMAX agentic benchmarks (dsv4_fp4_mi355x_vllm.sh, survey 34a): the workflow picks
    # the backend through the environment. Only the empty default's arm was read: `enabled`, no note, where
    # KV_OFFLOAD_BACKEND=lmcache runs LMCacheConnectorV1. An `if` on the same test reads both of its paths.
    script = write(tmp_path / "run.sh", f"""OFFLOAD_ARGS=()
case "${{KV_OFFLOAD_BACKEND:-}}" in
  lmcache) OFFLOAD_ARGS=(--kv-transfer-config '{LMCACHE}') ;;
esac
vllm serve m "${{OFFLOAD_ARGS[@]}}"
""")
    (entry,) = decided(script)
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 5: the command also takes `${OFFLOAD_ARGS[@]}` (which is set differently on the "
                             "paths through `case` at line 2), which may hold options")]
    # A default of a variable the script sets is its value: that arm alone.
    set_first = write(tmp_path / "set.sh", "KV_OFFLOAD_BACKEND=lmcache\n" + script.read_text())
    assert ktc(only(read_source(set_first)))["kv_connector"] == "LMCacheConnectorV1"


@pytest.mark.parametrize("default", ["MODE=${MODE:-plain}", ": ${MODE:=plain}", "export MODE=\"${MODE-plain}\"",
                                     "PICKED=${MODE:-plain}; MODE=$PICKED"])
def test_a_case_on_a_variable_that_holds_a_default_reads_every_arm(tmp_path, default):
    # The same choice as `case "${MODE:-plain}"`, written in two steps: only the default's arm was read
    # (`enabled` with NixlConnector), where MODE=lmcache in the environment runs LMCacheConnectorV1.
    script = write(tmp_path / "run.sh", f"""{default}
case $MODE in
  lmcache) KV='{LMCACHE}' ;;
  *) KV='{NIXL}' ;;
esac
vllm serve m --kv-transfer-config "$KV"
""")
    (entry,) = decided(script)
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 6: `--kv-transfer-config` takes its value from `$KV` (which is set differently "
                             "on the paths through `case` at line 2)")]
    # A value the script sets after the default is its own: that arm alone.
    set_after = write(tmp_path / "set.sh", script.read_text().replace("case $MODE", "MODE=lmcache\ncase $MODE"))
    assert ktc(only(read_source(set_after)))["kv_connector"] == "LMCacheConnectorV1"


@pytest.mark.parametrize("expansion", ['${ARGS[@]+"${ARGS[@]}"}', '${ARGS[*]:+"${ARGS[@]}"}'])
def test_set_u_s_safe_expansion_of_a_whole_array_is_the_array(tmp_path, expansion):
    # vllm-project/vllm-metal (211a1e4b) scripts/test.sh: `vllm serve "$model" ... ${extra_args[@]+"${extra_args[@]}"}`,
    # which `set -u` scripts write for an array that may be empty: "an element of an array at an index not
    # known", and a KV config passed so was dropped (`enabled`; survey 39a).
    script = write(tmp_path / "run.sh", f"""set -u
ARGS=(--kv-transfer-config '{LMCACHE}')
vllm serve m {expansion}
""")
    d = only(read_source(script))
    assert (ktc(d)["kv_connector"], d.notes) == ("LMCacheConnectorV1", ())
    # An empty array gives nothing; one the file never sets may be the environment's, as `"${ARGS[@]}"` is.
    empty = only(read_source(write(tmp_path / "empty.sh", script.read_text().replace(f"'{LMCACHE}'", "").replace(
        "--kv-transfer-config ", ""))))
    assert (empty.notes, "kv_transfer_config" in empty.document) == ((), False)
    unset = only(read_source(write(tmp_path / "unset.sh", f"set -u\nvllm serve m {expansion}\n")))
    assert [n.message for n in unset.notes] == [
        "the command also takes `${ARGS[@]}`, which this file does not set; only the options written here are read, "
        "and it may hold others"]


def test_a_function_runs_with_its_arguments_where_it_is_called(tmp_path):
    script = write(tmp_path / "run.sh", """start() {
  local role=$1
  vllm serve m --kv-transfer-config "{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"$role\\"}" "${@:2}"
}
start kv_producer
start kv_consumer --port 8200
""")
    first, second = read_source(script).deployments
    assert (first.id, second.id) == (f"{script}:3", f"{script}:3/2")
    assert (ktc(first)["kv_role"], ktc(second)["kv_role"]) == ("kv_producer", "kv_consumer")


# -- launch forms of real fleets (issue 17) ----------------------------------------------------------------

def test_a_here_string_is_not_a_here_document(tmp_path):
    # From vLLM's disagg_example_p2p_nccl_xpyd.sh: `<<<` swallowed the rest of the script.
    script = write(tmp_path / "run.sh", f'GPUS=0,1\nIFS=\',\' read -ra GPU_ARRAY <<< "$GPUS"\n'
                                        f"vllm serve m --kv-transfer-config '{NIXL}'\n")
    assert only(read_source(script)).line == 3


def test_eval_and_exec_chains_are_launches(tmp_path):
    script = write(tmp_path / "run.sh", f"""KV='{NIXL}'
eval "exec vllm serve m --kv-transfer-config '$KV'"
exec env VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve n --kv-offloading-size 4
""")
    first, second = read_source(script).deployments
    assert (first.line, ktc(first)["kv_connector"]) == (2, "NixlConnector")
    assert (second.line, second.document["env"]) == (3, {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"})


def test_an_eval_that_parses_only_with_its_unknown_part_known_is_no_syntax_error(tmp_path):
    # vllm-project/tpu-inference (b8692ff) tests/test_generate_support_matrices.sh: a stand-in `mapfile`
    # ends `eval "$array_name=(\"${lines[@]}\")"`, the name from its arguments. Bash reads an array
    # assignment; the audit read `<unknown>=(` as a syntax error of the file (survey 23a).
    script = write(tmp_path / "run.sh", 'f() {\n    local n="$1"\n    eval "$n=(a b)"\n}\nvllm serve m\n')
    found = read_source(script)
    assert (found.problems, [d.line for d in found.deployments]) == ((), [5])
    # A text the file gives whole is read, and its syntax error said.
    broken = read_source(write(tmp_path / "broken.sh", 'eval "vllm serve m --kv-transfer-config (x"\n'))
    assert [(p.code, p.message) for p in broken.problems] == [
        ("source.shell_syntax", "cannot read the script run at line 1: unexpected `(`")]


def test_a_c_script_written_below_its_command_counts_its_lines_from_where_it_starts(tmp_path):
    # ROCm/MAD (2d64760) wideep_disagg_2p2d/run_2p2d.sh: `docker run ... --entrypoint bash "$IMAGE" -c "`
    # opens its script 32 lines below the command's first; a syntax error in it was placed 32 lines too
    # high, at a line of `docker run`'s options (survey 23d).
    body = '-c "\n  echo hi\n  if true; then\n  vllm serve m\n"\n'
    for command in ("bash \\\n  ", "docker run \\\n  --entrypoint bash \\\n  img:1 \\\n  "):
        found = read_source(write(tmp_path / "run.sh", command + body))
        opened = command.count("\n") + 1  # the line of `-c "`
        assert [p.message for p in found.problems] == [
            f"cannot read the script run at line 1: `if` at line {opened + 2} has no `fi`"], command


def test_lines_stay_right_after_a_here_document_inside_a_command_substitution(tmp_path):
    script = write(tmp_path / "run.sh", f"""CONFIG=$(cat <<EOF
{NIXL}
EOF
)
vllm serve m --kv-transfer-config "$CONFIG"
""")
    d = only(read_source(script))
    assert (d.line, ktc(d)["kv_connector"]) == (5, "NixlConnector")


def test_a_launch_script_written_by_a_here_document_is_read_where_it_is_written(tmp_path):
    script = write(tmp_path / "setup.sh", f"""MODEL=org/m
cat > /tmp/run.sh <<EOF
#!/bin/bash
vllm serve $MODEL --kv-transfer-config '{NIXL}'
EOF
chmod +x /tmp/run.sh
nohup bash /tmp/run.sh > log 2>&1 &
""")
    d = only(read_source(script))
    assert (d.id, d.name, ktc(d)["kv_connector"]) == (f"{script}:4", "org/m", "NixlConnector")


def test_a_config_file_written_by_a_here_document_is_the_one_vllm_reads(tmp_path):
    script = write(tmp_path / "run.sh", f"""cat > cfg.yaml <<'EOF'
kv-transfer-config: '{NIXL}'
EOF
vllm serve m --config cfg.yaml
""")
    d = only(read_source(script))
    assert ktc(d)["kv_connector"] == "NixlConnector"
    assert d.chain == (str(script), "cfg.yaml (written at line 2)")



def test_a_config_file_written_at_a_path_not_known_is_the_one_read_at_the_same_words(tmp_path):
    # `cat > "$DIR/c.yaml"` then `--config "$DIR/c.yaml"`, DIR made at run time: the file written is the one
    # vLLM reads, as a script written and run at the same words is; it was "the `--config` file is `$(...)/c.yaml`".
    script = write(tmp_path / "run.sh", f"""DIR=$(mktemp -d)
cat > "$DIR/c.yaml" <<EOF
kv-transfer-config: '{LMCACHE}'
EOF
vllm serve m --config "$DIR/c.yaml"
""")
    d = only(read_source(script))
    assert (ktc(d)["kv_connector"], d.chain) == ("LMCacheConnectorV1", (str(script), "$(...)/c.yaml (written at line 3)"))
    # Other words, or no file written: a name not known.
    other = write(tmp_path / "other.sh", script.read_text().replace('--config "$DIR/c.yaml"', '--config "$DIR/d.yaml"'))
    (entry,) = decided(other)
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 5: the `--config` file is `$(...)/d.yaml`, where `$(...)` is the output of a command "
                             "the audit does not run")]


def test_a_written_config_files_values_not_known_are_values_not_known(tmp_path):
    # SemiAnalysis' InferenceMAX benchmarks (gptoss_fp4_b200_docker.sh, survey 34a) write
    # `max-model-len: $CALCULATED_MAX_MODEL_LEN` into the config they serve with: each such launch was an
    # `input.parse` error, "unacceptable character #x0000", the value's marker reaching the YAML parser.
    script = write(tmp_path / "run.sh", f"""cat > config.yaml << EOF
max-model-len: $MAX_MODEL_LEN
served-model-name: "$NAME-served"
kv-transfer-config: '{NIXL}'
EOF
vllm serve m --config config.yaml
cat > unknown.yaml << EOF
kv-transfer-config: $KV
EOF
vllm serve m --config unknown.yaml
""")
    known, unknown = read_source(script).deployments
    assert ktc(known)["kv_connector"] == "NixlConnector" and known.problems == ()
    assert [(n.code, n.message) for n in known.notes] == [
        ("source.unresolved_unused", "`--max-model-len` takes its value from `$MAX_MODEL_LEN`, which this file does "
                                     "not set; the decision does not read it"),
        ("source.unresolved_unused", "`--served-model-name` takes its value from `$NAME`, which this file does not "
                                     "set; the decision does not read it")]
    assert [(p.code, p.message) for p in unknown.problems] == [
        ("source.unresolved", "`--kv-transfer-config` takes its value from `$KV`, which this file does not set")]

def test_ssh_and_sh_c_run_their_scripts(tmp_path):
    script = write(tmp_path / "run.sh", f"""KV='{NIXL}'
ssh -p 22 gpu-3 "vllm serve a --kv-transfer-config '$KV'"
ssh gpu-4 bash -s <<'EOF'
vllm serve b --kv-transfer-config "$KV"
EOF
""")
    a, b = read_source(script).deployments
    assert ktc(a)["kv_connector"] == "NixlConnector"
    assert b.line == 4 and b.problems[0].code == "source.unresolved"  # a remote shell does not see KV
    # jasl/vllm-ds4-sm120-harness (c911a0e) scripts/dgx_spark_start_mp_serve.sh: the remote shell quoted as one
    # word, `ssh host "bash -s" <<'REMOTE'`, and behind an environment prefix: ssh joins the words and the remote
    # shell splits them again. Both launches were missed (survey 43b).
    quoted = write(tmp_path / "remote.sh", f"""ssh host "bash -s" <<'REMOTE'
vllm serve a --kv-transfer-config '{NIXL}'
REMOTE
ssh host X=1 bash -s <<'REMOTE'
vllm serve b
REMOTE
ssh host "bash -c 'echo hi'" <<'REMOTE'
vllm serve c
REMOTE
""")
    assert [(d.line, d.document["model"]["name"]) for d in read_source(quoted).deployments] == [(2, "a"), (5, "b")]


def test_vllm_bench_sweep_starts_the_server_of_its_serve_cmd(tmp_path):
    # vllm/benchmarks/sweep/serve.py: `--serve-cmd` is split with shlex.split and run without a
    # shell, where the sweep runs (its environment, its container). The launches were missed:
    # MetaX-MACA/vLLM-metax's tools/batched_test/bench_sweep.sh is in the fleet corpus.
    script = write(tmp_path / "sweep.sh", f"""export VLLM_USE_V1=1
KV='{NIXL}'
vllm bench sweep serve --serve-cmd 'vllm serve a --kv-transfer-config {json.dumps(LMCACHE)}' --bench-cmd 'vllm bench serve'
vllm bench sweep serve_sla --bench-cmd x --serve-cmd="env VLLM_USE_V1=0 vllm serve b --kv-transfer-config '$KV'"
docker run --gpus all vllm/vllm-openai:v0.12.0 vllm bench sweep serve_workload --serve-cmd 'vllm serve c' --bench-cmd x
vllm bench sweep serve --serve-cmd 'vllm serve d' --bench-cmd x --dry-run
vllm bench sweep serve --serve-cmd 'vllm serve "e' --bench-cmd x
vllm bench sweep plot results
""")
    a, b, c = read_source(script).deployments
    assert [(d.line, d.document["model"]["name"]) for d in (a, b, c)] == [(3, "a"), (4, "b"), (5, "c")]
    assert ktc(a)["kv_connector"] == "LMCacheConnectorV1" and a.document["env"] == {"VLLM_USE_V1": "1"}
    assert ktc(b)["kv_connector"] == "NixlConnector" and b.document["env"] == {"VLLM_USE_V1": "0"}
    assert c.release == ReleaseHint("0.12.0", "image tag vllm/vllm-openai:v0.12.0")


def test_a_sweeps_serve_params_are_options_the_audit_does_not_read(tmp_path):
    # Each combination in the file adds or replaces options of the command (param_sweep.py's
    # apply_to_cmd), `kv_transfer_config` too: the command alone decides nothing.
    script = write(tmp_path / "sweep.sh", "vllm bench sweep serve --serve-cmd 'vllm serve m' --serve-params "
                                          "p.json --bench-cmd x\n")
    deployment = only(read_source(script))
    assert [(p.code, p.message, p.line) for p in deployment.problems] == [
        ("source.unresolved", "`vllm bench sweep` adds the options of each combination in `--serve-params p.json` "
                              "to this command; the audit does not read that file", 1)]
    assert deployment.document is None


def test_a_container_that_runs_a_sweep_starts_its_server(tmp_path):
    # A container's argv (no shell) is read as the script's words are: the sweep's server in the
    # container's image and environment, and the same problem for a --serve-params file.
    manifest = write(tmp_path / "pod.yaml", f"""apiVersion: v1
kind: Pod
metadata: {{name: sweep}}
spec:
  containers:
  - name: bench
    image: vllm/vllm-openai:v0.14.0
    command: [vllm, bench, sweep, serve]
    args: ["--serve-cmd", {json.dumps("vllm serve m --kv-transfer-config '" + NIXL + "'")}, "--bench-cmd", "x"]
  - name: params
    image: vllm/vllm-openai:v0.14.0
    command: [vllm, bench, sweep, serve_sla, --serve-cmd, vllm serve m, --serve-params, /p.json, --bench-cmd, x]
""")
    bench, params = read_source(manifest).deployments
    assert ktc(bench)["kv_connector"] == "NixlConnector"
    assert bench.release == ReleaseHint("0.14.0", "image tag vllm/vllm-openai:v0.14.0")
    assert [(p.code, p.message) for p in params.problems] == [
        ("source.unresolved", "`vllm bench sweep` adds the options of each combination in `--serve-params /p.json` "
                              "to this command; the audit does not read that file")]


def test_a_value_not_known_in_a_sweeps_serve_cmd_stays_one_word(tmp_path):
    # The reason a value not known carries may hold blanks and quotes, which shlex would split at or take as
    # quoting: `$MODEL` as the outer shell leaves it is one word of the server's.
    script = write(tmp_path / "sweep.sh", """read -r MODEL
vllm bench sweep serve --serve-cmd "vllm serve $MODEL --kv-transfer-config '$KV'" --bench-cmd x
""")
    deployment = only(read_source(script))
    assert [(p.code, p.message) for p in deployment.problems] == [
        ("source.unresolved", "`--kv-transfer-config` takes its value from `$KV`, which this file does not set")]
    assert [n.message for n in deployment.notes] == [
        "the model is `$MODEL`, where `$MODEL` is set at run time by `read` at line 1; the decision does not read "
        "the model's name"]


def test_echo_of_a_command_is_no_launch(tmp_path):
    assert read_source(write(tmp_path / "run.sh", "echo vllm serve m\nprintf '%s\\n' vllm serve m\n")).deployments == ()


# -- only what the decision reads counts (issue 17) ----------------------------------------------------------

def test_the_scripts_arguments_or_an_array_where_the_model_stands_are_no_model(tmp_path):
    # `exec vllm serve "$@"` (an entrypoint wrapper) and "${EXTRA[@]}" stand for any number of
    # words, the model's and options' alike; a scalar `$MODEL` there is the model, as written.
    script = write(tmp_path / "run.sh", 'exec vllm serve "$@"\nvllm serve "${EXTRA[@]}"\nvllm serve $MODEL\n')
    wrapper, array, scalar = read_source(script).deployments
    assert [(n.code, n.message) for n in wrapper.notes] == [
        ("source.script_arguments", "the command also takes the script's own arguments (`$@`); only the options "
                                    "written here are read")]
    assert [(n.code, n.message) for n in array.notes] == [
        ("source.unresolved_arguments", "the command also takes `${EXTRA[@]}`, which this file does not set; only the "
                                        "options written here are read, and it may hold others")]
    assert "model" not in wrapper.document and "model" not in array.document
    assert [(n.code, n.message) for n in scalar.notes] == [
        ("source.unresolved_unused", "the model is `$MODEL`, which this file does not set; the decision does not read "
                                     "the model's name")]


def test_an_unresolved_value_the_decision_does_not_read_is_a_note(tmp_path):
    kv = ('{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"prefill-${ROLE_REPLICA_INDEX}",'
          '"kv_connector_extra_config":{"proxy_ip":"$PROXY"}}')
    quoted = kv.replace('"', '\\"')
    d = only(read_source(write(tmp_path / "run.sh", f'vllm serve $MODEL --port $PORT --kv-transfer-config "{quoted}"\n')))
    assert d.problems == ()
    assert ktc(d)["engine_id"] == "prefill-${ROLE_REPLICA_INDEX}"
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_unused", "`--kv-transfer-config` takes its values at `/engine_id` from `${ROLE_REPLICA_INDEX}`, "
                                     "which this file does not set, and at `/kv_connector_extra_config/proxy_ip` from "
                                     "`$PROXY`, which this file does not set; the decision does not read those values"),
        ("source.unresolved_unused", "the model is `$MODEL`, which this file does not set; the decision does not read "
                                     "the model's name"),
        ("source.unresolved_unused", "`--port` takes its value from `$PORT`, which this file does not set; the decision "
                                     "does not read it"),
    ]


def test_an_unresolved_value_the_decision_reads_inside_json_is_still_a_problem(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh",
                               'vllm serve m --kv-transfer-config "{\\"kv_connector\\":\\"$CONN\\",\\"kv_role\\":\\"kv_both\\"}"\n')))
    assert d.problems[0].message == ("`--kv-transfer-config` takes its value at `/kv_connector` from `$CONN`, which "
                                     "this file does not set")


def test_a_word_from_an_unset_variable_may_hold_options_and_says_so(tmp_path):
    d = only(read_source(write(tmp_path / "run.sh", f"vllm serve m --kv-transfer-config '{NIXL}' $EXTRA_ARGS\n")))
    assert [(n.code, n.message) for n in d.notes] == [
        ("source.unresolved_arguments", "the command also takes `$EXTRA_ARGS`, which this file does not set; only the "
                                        "options written here are read, and it may hold others")]


# -- syntax ----------------------------------------------------------------------------------------------------

def test_a_function_name_may_hold_dashes_dots_and_colons_as_bash_takes_it(tmp_path):
    # vllm-project/tpu-inference (b8692ff) tests/test_generate_support_matrices.sh defines
    # `buildkite-agent() {`: bash -n takes it; it was three source.shell_syntax problems.
    source = read_source(write(tmp_path / "run.sh", "start-server() {\n  vllm serve m --kv-transfer-config "
                                                    f"'{NIXL}' \"$@\"\n}}\nns::noop() {{ :; }}\nstart-server --port 1\n"))
    assert source.problems == ()
    d = only(source)
    assert (d.line, ktc(d)["kv_connector"]) == (2, "NixlConnector")


def test_shell_syntax_errors_are_located_and_reading_goes_on(tmp_path):
    source = read_source(write(tmp_path / "run.sh", f"IMAGE=<IMAGE_NAME>:<TAG>\nfi\nvllm serve m --kv-transfer-config '{NIXL}'\n"))
    assert [(p.code, p.line) for p in source.problems] == [("source.shell_syntax", 1), ("source.shell_syntax", 2)]
    assert only(source).line == 3


@pytest.mark.parametrize("script", [
    "start() {{\n  {{\n    vllm serve m --kv-transfer-config '{k}'\n  }} 2>&1 | tee log\n}}\nstart\n",
    "( vllm serve m --kv-transfer-config '{k}' ) 2>>err.log >out.log\n",
    "if true; then vllm serve m --kv-transfer-config '{k}'; fi 2>&1 1>log\n",
])
def test_a_compound_command_takes_a_descriptor_redirection(tmp_path, script):
    # `{ ...; } 2>&1 | tee log` (a real launch script's form) was a syntax
    # error, and the script's launch was lost with it.
    source = read_source(write(tmp_path / "run.sh", script.format(k=NIXL)))
    assert source.problems == ()
    assert ktc(only(source))["kv_connector"] == "NixlConnector"


@pytest.mark.parametrize("text", ["$(" * 5000, "${" * 5000, "(" * 5000, "if " * 5000, "f() { " * 5000, "'" + "x" * 100,
                                  "cat <<EOF\n" + "x\n" * 100, "$((" * 3000, "[[ " * 3000, "a=(" * 3000])
def test_deep_or_unterminated_text_is_a_problem_not_a_crash(tmp_path, text):
    source = read_source(write(tmp_path / "run.sh", "# starts vllm serve\n" + text + "\n"))
    # bash reads an unterminated here-document to the end of the file (with a warning).
    assert source.deployments == () and bool(source.problems) is not text.startswith("cat <<EOF")
    assert all(p.code in ("source.shell_syntax", "source.limit") for p in source.problems)


def test_a_script_that_cannot_be_read_and_never_mentions_vllm_is_skipped(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples (2b50365): getdataset.sh writes
    # `export GCS_BUCKET_NAME=<BUCKET_NAME>` for the reader to fill in, and downloads a
    # dataset; it was a file problem of a vLLM audit. A broken YAML file is skipped so.
    text = "#!/bin/bash\nexport GCS_BUCKET_NAME=<BUCKET_NAME>\ngcloud storage buckets create gs://x\n"
    source = read_source(write(tmp_path / "getdataset.sh", text))
    assert (source.problems, source.deployments) == ((), ())
    assert source.skipped == ("mentions no vLLM option, and is not a script the audit can read (line 2: cannot read "
                              "the script: `>` has no target)")
    # Mentioning vLLM, it is the file's problem, as it was.
    source = read_source(write(tmp_path / "serve.sh", text + "vllm serve m\n"))
    assert (source.skipped, [(p.code, p.line) for p in source.problems]) == (None, [("source.shell_syntax", 2)])


def test_a_script_read_to_a_limit_that_never_mentions_vllm_is_skipped(tmp_path):
    # mudler/LocalAI (82c191af) scripts/build/audio-cpp-darwin.sh: `bundle_dylib` and
    # `bundle_dylib_closure` call each other, a test only a run decides ending it; the reading
    # stopped at the limit of function calls (10,000, here 3), which was a source.limit problem of a
    # vLLM audit.
    text = ("#!/bin/bash\nbundle_dylib() {\n  cp -fLv \"$1\" build/darwin/lib/\n}\n"
            "for file in a b c d; do\n  bundle_dylib \"$file\"\ndone\n")
    limits = SourceLimits(max_calls=3)
    source = read_source(write(tmp_path / "audio-cpp-darwin.sh", text), limits=limits)
    assert (source.problems, source.deployments) == ((), ())
    assert source.skipped == ("mentions no vLLM option, and is not a script the audit can read (line 6: more than 3 "
                              "shell function calls (`bundle_dylib` at line 6); the script is not read past this point)")
    # Mentioning vLLM, it is the file's problem, as it was.
    source = read_source(write(tmp_path / "serve.sh", text + "vllm serve m\n"), limits=limits)
    assert (source.skipped, [p.code for p in source.problems]) == (None, ["source.limit"])


def test_a_command_built_up_in_a_variable_and_evaled_is_placed_where_it_is_written(tmp_path):
    # The shape of vLLM's tests/v1/kv_connector/nixl_integration/run_multi_connector_accuracy_test.sh:
    # a JSON config squeezed by `tr`, a command line in a variable, optional extra arguments, `eval "$CMD &"`.
    script = write(tmp_path / "run.sh", """KV='{
  "kv_connector": "NixlConnector",
  "kv_role": "kv_both"
}'
KV=$(echo "$KV" | tr -d '[:space:]')
run() {
  local kv_config=$1
  BASE_CMD="CUDA_VISIBLE_DEVICES=0 vllm serve $MODEL \\
    --kv-transfer-config '$kv_config'"
  if [[ -n "$EXTRA" ]]; then
    for arg in $EXTRA; do
      BASE_CMD="${BASE_CMD} $arg"
    done
  fi
  eval "$BASE_CMD &"
}
run "$KV"
""")
    d = only(read_source(script))
    assert (d.line, ktc(d)) == (8, {"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    assert [n.code for n in d.notes] == ["source.unresolved_unused", "source.unresolved_arguments"]


def test_the_vllm_commands_own_module_is_a_launch(tmp_path):
    # `python -m vllm.entrypoints.cli.main serve ...` is `vllm serve ...` (the console script's
    # module), as a DGX Spark launch script runs it; it was no launch.
    d = only(read_source(write(tmp_path / "run.sh", "args=(serve m --kv-transfer-config "
                                                    f"'{NIXL}')\n\"$VENV/bin/python\" -m vllm.entrypoints.cli.main "
                                                    '"${args[@]}" > log 2>&1 &\n')))
    assert (d.name, ktc(d)["kv_connector"]) == ("m", "NixlConnector")


def test_a_dynamo_vllm_worker_takes_vllm_engine_arguments(tmp_path):
    # ai-dynamo/dynamo examples/backends/vllm/launch/disagg_flexkv.sh
    d = only(read_source(write(tmp_path / "run.sh", "CUDA_VISIBLE_DEVICES=0 python -m dynamo.vllm --model Qwen/Qwen3-0.6B "
                                                    "--disable-hybrid-kv-cache-manager --kv-transfer-config "
                                                    f"'{NIXL}' &\n")))
    assert (d.name, d.document["disable_hybrid_kv_cache_manager"]) == ("Qwen/Qwen3-0.6B", True)


def test_a_dynamo_vllm_worker_without_a_kv_transfer_config_gets_the_one_its_connector_makes(tmp_path):
    # Dynamo's launcher makes a --kv-transfer-config of its own --connector
    # (default nixl). A script's launch was read as vLLM's own command line:
    # no connector, so HMA "on by default" where LMCache turns it off.
    script = write(tmp_path / "run.sh", "python3 -m dynamo.vllm --model m --connector lmcache &\n"
                                        "python3 -m dynamo.vllm --model m\n")
    lmcache, default = read_source(script).deployments
    assert ktc(lmcache) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert ktc(default) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert "connector" not in lmcache.document  # Dynamo's option, not vLLM's
    assert dict(lmcache.origins)["kv_transfer_config"] == "line 1: --kv-transfer-config"


def test_an_expansion_where_a_reserved_word_may_stand_is_a_word(tmp_path):
    # `if` whose body starts with an expansion: once an uncaught AttributeError.
    script = write(tmp_path / "run.sh", f"if true; then\n  $SMI_BIN --query\nfi\nvllm serve m --kv-transfer-config '{NIXL}'\n")
    assert only(read_source(script)).line == 4


def test_a_function_never_called_by_name_is_read_once_with_unknown_arguments(tmp_path):
    write(tmp_path / "lib.sh", f"serve_lib() {{ vllm serve lib --kv-transfer-config '{NIXL}'; }}\n")
    script = write(tmp_path / "run.sh", f"""source ./lib.sh
prefill() {{
  vllm serve m --kv-transfer-config '{NIXL}' --port "$1"
}}
serve_lib
"$@"
""")
    # prefill is run as "$1": read at the end; serve_lib's launch is lib.sh's own.
    d = only(read_source(script))
    assert (d.line, d.name) == (3, "m")
    assert [n.code for n in d.notes] == ["source.unresolved_unused"]


def test_a_script_piped_from_a_here_document_to_a_shell_is_read_at_its_lines(tmp_path):
    # `cat <<EOF | bash` runs the here-document as a script, with the variables the file set;
    # a pipe into a command that does not run it (grep) starts nothing.
    path = write(tmp_path / "run.sh", f"MODEL=m\ncat <<EOF | bash\necho start\nvllm serve $MODEL --kv-transfer-config "
                                      f"'{NIXL}'\nEOF\ncat <<'EOF' | sh -s\nvllm serve x --disable-hybrid-kv-cache-manager\n"
                                      "EOF\ncat <<EOF | grep vllm\nvllm serve y\nEOF\n")
    found = read_source(path, display="run.sh").deployments
    assert [(d.line, d.name, d.document.get("disable_hybrid_kv_cache_manager")) for d in found] == [
        (4, "m", None), (7, "x", True)]
    assert ktc(found[0]) == json.loads(NIXL)


def test_a_shell_run_in_an_images_container_takes_the_images_release(tmp_path):
    # opea-project/GenAIExamples (15b0d46) style: `docker run --entrypoint bash IMAGE -c "vllm serve ..."`
    # was decided as the default release, while the same image running `vllm serve` itself gave its tag's.
    escaped = NIXL.replace('"', '\\"')
    script = write(tmp_path / "run.sh", (
        f"docker run -d --gpus all vllm/vllm-openai:v0.17.0 --model m --kv-transfer-config '{NIXL}'\n"
        f"docker run -d --entrypoint bash vllm/vllm-openai:v0.17.0 -c \"vllm serve m --kv-transfer-config '{escaped}'\"\n"
        f"bash -c \"vllm serve m --kv-transfer-config '{escaped}'\"\n"))
    direct, shelled, host = read_source(script).deployments
    assert [(d.line, d.release.version if d.release else None, ktc(d)["kv_connector"]) for d in (direct, shelled, host)] \
        == [(1, "0.17.0", "NixlConnector"), (2, "0.17.0", "NixlConnector"), (3, None, "NixlConnector")]
    assert shelled.release.origin == "image tag vllm/vllm-openai:v0.17.0"


def test_a_command_given_to_an_image_runs_in_it_and_takes_its_release_and_platform(tmp_path):
    # `docker run [OPTIONS] IMAGE vllm serve ...`, as AMD's ROCm guides and ROCm/MAD's scripts run
    # rocm/vllm: the launch was decided as the default release on CUDA, while the same image given
    # only vLLM's options gave its tag's release (ROCm/MAD and survey repros, 3 December).
    script = write(tmp_path / "run.sh", (
        "docker run -d --device=/dev/kfd --device=/dev/dri --group-add video -e VLLM_USE_V1=1 \\\n"
        f"  rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909 vllm serve m --kv-transfer-config '{NIXL}'\n"
        "docker run -d --gpus all vllm/vllm-openai:v0.14.0 python3 -m vllm.entrypoints.openai.api_server --model m\n"
        "docker run --rm vllm/vllm-openai-rocm:v0.22.1 vllm serve m\n"
        "docker run --rm vllm/vllm-openai-cpu:v0.10.1 vllm serve m\n"))
    rocm, api, rocm_build, cpu = read_source(script).deployments
    assert [(d.line, d.release.version, d.document.get("platform")) for d in (rocm, api, rocm_build, cpu)] == [
        (1, "0.10.1", {"name": "rocm"}), (3, "0.14.0", None), (4, "0.22.1", {"name": "rocm"}), (5, "0.10.1", {"name": "cpu"})]
    assert rocm.release.origin == "image tag rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"
    assert rocm.document["env"] == {"VLLM_USE_V1": "1"} and ktc(rocm)["kv_connector"] == "NixlConnector"
    assert [n.code for d in (rocm, api, rocm_build, cpu) for n in d.notes] == []


MORIIO_HELPER = """KV_PORT=9711
_moriio_build_kv_transfer_config() {
    local kv_role="$1"
    echo '{"kv_connector":"MoRIIOConnector","kv_role":"'"${kv_role}"'","kv_port":"'"${KV_PORT}"'",'\\
'"kv_connector_extra_config":{"proxy_ip":"'"${MASTER_ADDR}"'"}}'
}
connector_launch_worker() {
    local kv_role="$1"
    local kv_config; kv_config=$(_moriio_build_kv_transfer_config "${kv_role}")
    vllm serve ${MODEL_PATH} --tensor-parallel-size 8 --kv-transfer-config "${kv_config}"
}
connector_launch_worker kv_producer
"""


def test_a_helper_function_that_prints_the_config_is_read(tmp_path):
    # ROCm/MAD (d7d8cc3) scripts/vllm_dissag/connectors/moriio.sh, cut: the config is the output of a
    # function of the file that sets its locals and echoes JSON; `$(...)` made every MoRIIO launch
    # `source.unresolved`. The helper's output is read as bash writes it (its own $1, the file's
    # KV_PORT), and what is not known in it (MASTER_ADDR) stays a value the decision does not read.
    (d,) = read_source(write(tmp_path / "moriio.sh", MORIIO_HELPER)).deployments
    assert d.problems == ()
    assert ktc(d) == {"kv_connector": "MoRIIOConnector", "kv_role": "kv_producer", "kv_port": "9711",
                      "kv_connector_extra_config": {"proxy_ip": ktc(d)["kv_connector_extra_config"]["proxy_ip"]}}
    assert "${MASTER_ADDR}" in ktc(d)["kv_connector_extra_config"]["proxy_ip"]


@pytest.mark.parametrize(("body", "expected"), [
    # printf with no directive but %s and %%, and the escapes \n, \t: written out.
    ("printf '{\"kv_connector\":\"%s\",\"kv_role\":\"%s\"}\\n' NixlConnector \"$1\"", "NixlConnector"),
    ("local c=Nixl; c+=Connector; printf '%s' \"{\\\"kv_connector\\\":\\\"$c\\\",\\\"kv_role\\\":\\\"$1\\\"}\"",
     "NixlConnector"),
    # Anything else in the body, another directive or more arguments than %s: not known.
    ("if true; then echo '{}'; fi", None),
    ("printf '{\"kv_connector\":\"%d\"}' 1", None),
    ("printf '%s' a b", None),
    ("echo '{}' > out.json", None),
    ('echo "$(f)"', None),  # a helper that calls itself ends at the nesting bound
])
def test_only_helpers_that_set_variables_and_print_once_are_read(tmp_path, body, expected):
    script = write(tmp_path / "run.sh", f"f() {{ {body}; }}\nvllm serve m --kv-transfer-config \"$(f kv_both)\"\n")
    (d,) = read_source(script).deployments
    if expected is None:
        assert [p.code for p in d.problems] == ["source.unresolved"]
    else:
        assert (d.problems, ktc(d)) == ((), {"kv_connector": expected, "kv_role": "kv_both"})


def test_docker_options_from_a_variable_are_not_taken_for_the_image(tmp_path):
    # ROCm/MAD scripts/vllm/kimik3_mi300x/wideep_disagg_2p2d/run_2p2d.sh: `docker run -d ... ${BNXT_MOUNTS}
    # --entrypoint bash "$IMAGE" -c "... vllm serve ..."`, BNXT_MOUNTS set in an `if`. The unknown word
    # was taken for the image, the script after `-c` was never read, and the launch was missed.
    escaped = LMCACHE.replace('"', '\\"')
    script = write(tmp_path / "run.sh", (
        'if [ "${FIX:-0}" = "1" ]; then\n  MOUNTS="-v /usr/lib/libfoo.so:/usr/lib/libfoo.so:ro"\nelse\n  MOUNTS=""\nfi\n'
        'docker run -d --name prefill ${MOUNTS} --entrypoint bash rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909 -c "\n'
        f"  vllm serve /model --kv-transfer-config '{escaped}'\n\"\n"))
    (d,) = read_source(script).deployments
    assert (d.line, d.release.version, ktc(d)["kv_connector"]) == (6, "0.10.1", "LMCacheConnectorV1")


def test_a_variable_set_on_one_path_only_is_read_once_per_path(tmp_path):
    # HabanaAI/vllm-fork .buildkite/nightly-benchmarks/scripts/run-performance-benchmarks.sh:
    # `if [[ "${ENGINE_VERSION:-v0}" == "v1" ]]; then export VLLM_USE_V1=1; fi`. Only variables
    # set on every path were read per path, so the launch was `source.unresolved` on VLLM_USE_V1,
    # which 0.33.0 does not read; the other path leaves it to the environment, as before the `if`.
    script = write(tmp_path / "bench.sh", 'if [[ "${ENGINE_VERSION:-v0}" == "v1" ]]; then\n  export VLLM_USE_V1=1\nfi\n'
                                          "vllm serve m --tensor-parallel-size 1\n"
                                          'if [ -n "$KV" ]; then\n'
                                          f"  EXTRA='--kv-transfer-config {LMCACHE.replace(' ', '')}'\nfi\n"
                                          "vllm serve m2 $EXTRA\n")
    use_v1, kv = audit([str(script)]).entries
    assert (use_v1.decision["outcome"], [n.code for n in use_v1.deployment.notes]) == (
        "enabled", ["source.unresolved_unused"])
    assert use_v1.deployment.notes[0].message.endswith("the decision is the same on each of the 2 paths")
    # A path that adds a connector decides otherwise: unresolved. (`$EXTRA` is split at blanks, so its
    # JSON is written without them.)
    assert [(e["code"], e["path"]) for e in kv.decision["errors"]] == [("source.unresolved", ""),
                                                                       ("source.unresolved", "/env/VLLM_USE_V1")]


def test_an_option_added_on_one_path_with_an_unknown_value_leaves_the_launch_unresolved(tmp_path):
    # ROCm/MAD scripts/vllm/kimik3_mi300x/wideep_disagg_2p2d/run_2p2d.sh: `KVARG=(--kv-transfer-config
    # "$KVJSON")` on one path of an `if`, KVJSON from `$(... | base64 -d)`, then `"${KVARG[@]}"`. The
    # launch was decided `enabled` with a note that `$KVARG` may hold options; with the JSON written
    # out the paths disagree and it was `source.unresolved` already.
    script = write(tmp_path / "run.sh", (
        'KVARG=()\nif [ -n "$KVCFG_B64" ]; then\n  KVJSON=$(printf \'%s\' "$KVCFG_B64" | base64 -d)\n'
        '  KVARG=(--kv-transfer-config "$KVJSON")\nfi\nvllm serve /model --tensor-parallel-size 2 "${KVARG[@]}"\n'))
    (entry,) = audit([str(script)]).entries
    assert entry.decision["outcome"] == "error"
    assert [(e["code"], e["path"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "/kv_transfer_config",
        "line 6: on path 1 of 2 through `if` at line 2: `--kv-transfer-config` takes its value from `$(...)` "
        "(which is the output of a command the audit does not run)")]
    assert [n.code for n in entry.deployment.notes] == []


def test_a_value_set_on_more_paths_than_are_read_may_hold_options(tmp_path):
    # ROCm/MAD scripts/vllm/kimik3_mi300x/vllm_disagg/Kimik3D_DI/run_2p2d.sh (50ecfa1): the same `KVARG`
    # launch, whose other words also read values that two `case`s and another `if` set: more
    # combinations of paths than the 4 read one by one. `"${KVARG[@]}"` was a note that it "may hold
    # others" and the launch `enabled`, though every run of the script passes MoRIIOConnector (survey 23d).
    kv = "KVARG=(--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}')"
    script = ("pip install vllm==0.11.0\ncase \"$ROLE\" in\n  a) P=1 ;;\n  OTHER) P=2 ;;\nesac\nKVARG=()\n"
              f"if [ -n \"$KV\" ]; then\n  {kv}\nfi\nvllm serve m --port $P \"${{KVARG[@]}}\"\n")
    message = ("line 10: the command also takes `${KVARG[@]}` (which is set differently on the paths through `if` at "
               "line 7), which may hold options")
    for other, paths in (("*", 4), ("b", 6)):  # (without `*)`, the case has a third path: none taken)
        write(tmp_path / "run.sh", script.replace("OTHER", other))
        (entry,) = audit([str(tmp_path / "run.sh")]).entries
        # 0.11.0 turns HMA off with any connector: the paths disagree, and it is read on none past 4.
        assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [("source.unresolved", message)], paths
        assert [n.code for n in entry.deployment.notes] == ["source.unresolved_unused"]  # (`--port $P`)
    # Where no path sets what the decision reads (tpu-inference's mmlu.sh grows its arguments with
    # `--gpu-memory-utilization` and the like through nested ifs), the word stays a note.
    # (Mooncake's tone tests grow a whole command line, `--model` and all, in an if: the model is
    # none of what the decision reads.)
    for words in ("--max-model-len 4096", "--model other"):
        write(tmp_path / "run.sh", script.replace("OTHER", "b").replace(kv, f"KVARG=({words})"))
        (entry,) = audit([str(tmp_path / "run.sh")]).entries
        assert (entry.decision["outcome"], [n.code for n in entry.deployment.notes]) == (
            "enabled", ["source.unresolved_unused", "source.unresolved_arguments"]), words


def test_a_value_a_path_sets_to_a_kv_option_in_a_container_shell_is_read_even_where_no_path_is(tmp_path):
    # The Kimi-K3 launch itself: `KVARG` is set in the container's `bash -c` script, beside values of
    # the host script's `case` (expanded before the container runs it), which the container's shell
    # cannot read per path. The word was a note; a path sets the KV option (survey 23d).
    script = write(tmp_path / "run.sh", (
        'case "$ROLE" in\n  a) P=1 ;;\n  b) P=2 ;;\nesac\n'
        'docker run --entrypoint bash vllm/vllm-openai:v0.11.0 -c "\n  KVARG=()\n'
        '  if [ -n \\"\\$KV\\" ]; then KVARG=(--kv-transfer-config \\"\\$KV\\"); fi\n'
        '  vllm serve m --port $P \\"\\${KVARG[@]}\\"\n"\n'))
    (entry,) = audit([str(script)]).entries
    assert [(e["code"], e["message"]) for e in entry.decision["errors"]] == [(
        "source.unresolved", "line 5: the command also takes `${KVARG[@]}` (which is set differently on the paths "
                             "through `if` in the script at line 5), which may hold options")]


def test_the_scripts_arguments_after_an_option_of_several_values_may_be_options(tmp_path):
    # `--served-model-name m "$@"`: argparse gives --served-model-name the words up to the next
    # option, and "$@" may hold that option; it was noted as a value the decision does not read.
    script = write(tmp_path / "run.sh", 'vllm serve m --served-model-name m "$@"\n')
    (d,) = read_source(script).deployments
    assert [n.code for n in d.notes] == ["source.script_arguments"]


# kvcache-ai/Mooncake (3b5a594) benchmarks/xypd_benchmarks/vllm-benchmarks/benchmarks.sh L26-27,
# L94-112: the V0 engine with vLLM's V0 Mooncake store connector. The file builds vLLM from source;
# a directive names the release here. MooncakeStoreConnector was the false error connector.not_v1
# on 0.10.0 (the V1 engine's check), and the later releases were `disabled`.
MOONCAKE_V0 = ("# hma-policy: {{vllm_version: \"{release}\"}}\nexport VLLM_USE_V1=0\n"
               "MODEL=${{MODEL:-\"Qwen/Qwen2.5-7B-Instruct\"}}\n"
               "MOONCAKE_CONFIG_PATH=mooncake.json \\\n"
               "python3 -m vllm.entrypoints.openai.api_server --model $MODEL --port 8100 \\\n"
               "  --kv-transfer-config '{{\"kv_connector\":\"{connector}\",\"kv_role\":\"kv_producer\"}}'\n")


@pytest.mark.parametrize("release, connector, outcome, code", [
    ("0.10.0", "MooncakeStoreConnector", "disabled", None),  # the V0 engine runs its V0 connector
    ("0.9.2", "NixlConnector", "error", "connector.not_v0"),  # create_connector_v0 asserts a V0 class
    ("0.10.2", "MooncakeStoreConnector", "error", "connector.v0_engine"),  # "V0 is no longer supported"
    ("0.11.0", "NixlConnector", "error", "engine.v0_removed"),  # no V0 engine left
    ("0.12.0", "NixlConnector", "disabled", None),  # VLLM_USE_V1 is no longer read: the V1 engine runs
])
def test_vllm_use_v1_0_starts_the_v0_engine_of_each_release(tmp_path, release, connector, outcome, code):
    write(tmp_path / "benchmarks.sh", MOONCAKE_V0.format(release=release, connector=connector))
    (entry,) = audit([str(tmp_path)]).entries
    decision = entry.decision
    assert (decision["outcome"], [e["code"] for e in decision["errors"]], decision["vllm"]["release"]) == (
        outcome, [code] if code else [], release)
    if outcome == "disabled" and release == "0.10.0":
        assert "VLLM_USE_V1=0 runs the V0 engine, which has no hybrid KV cache manager" in decision["reasons"]


def test_a_script_a_container_runs_with_bash_c_takes_the_containers_image(tmp_path):
    # opea-project/GenAIComps (8130a3f) comps/third_parties/vllm/deployment/docker_compose/
    # launch_vllm_service_openvino.sh: `docker run ... $image /bin/bash -c "... python3 -m
    # vllm.entrypoints.openai.api_server ..."` was read as a launch of no image: no release, no note.
    write(tmp_path / "launch.sh", """\
image="vllm:openvino"
docker run -d --rm --name="vllm-openvino-server" -p 8008:80 --ipc=host $docker_args \\
  -e HF_TOKEN=${HF_TOKEN} $image /bin/bash -c "cd / && python3 -m vllm.entrypoints.openai.api_server --model m"
bash -c "vllm serve m"
""")
    first, second = read_source(tmp_path / "launch.sh").deployments
    assert (first.line, first.release.origin) == (2, "image vllm:openvino is not vLLM's release image: its tag is not "
                                                     "read as a vLLM release")
    assert [n.code for n in first.notes] == ["source.release_unknown"]
    assert (second.line, second.release) == (4, None)  # (a shell of the host's)


def test_a_list_options_further_word_not_known_may_hold_options(tmp_path):
    # jasonacox/TinyLLM (fc933ab) vllm/optional_build/entrypoint.sh: `--served-model-name
    # "${SERVED_MODEL_NAME}" ${additional_args}`, additional_args grown in `if`s with options.
    # `--served-model-name` takes one or more words, and the unknown word after its value was
    # read as another value, "the decision does not read it": a path that adds
    # --disable-hybrid-kv-cache-manager was not seen.
    write(tmp_path / "entrypoint.sh", """\
additional_args=""
if [[ ! -z "${OFF}" ]]; then additional_args="${additional_args} --disable-hybrid-kv-cache-manager"; fi
vllm serve m --served-model-name "${SERVED_MODEL_NAME}" ${additional_args}
vllm serve m --served-model-name a b
""")
    varying, listed = audit([str(tmp_path / "entrypoint.sh")], policy=hma_policy.load_policy(release="0.20.0")).entries
    assert [(e["code"], e["message"]) for e in varying.decision["errors"]] == [("source.unresolved", (
        "line 3: the command also takes `$additional_args` (which is set differently on the paths through `if` at "
        "line 2), which may hold options"))]
    assert (listed.decision["outcome"], listed.deployment.notes) == ("enabled", ())


def test_a_script_a_dockerfile_copies_into_its_image_runs_that_images_release(tmp_path):
    # aws-samples/sagemaker-genai-hosting-examples (80ee5ebf) 02-engines/vLLM/byoc/docker-artifacts: the
    # Dockerfile builds `FROM vllm/vllm-openai:v0.10.1.1`, `COPY sagemaker-entrypoint.sh entrypoint.sh`,
    # `ENTRYPOINT ["./entrypoint.sh"]`; the script execs the api_server. It was decided as the default
    # release, as were six `serve` scripts of the same shape; a Python launcher was read so already.
    write(tmp_path / "Dockerfile", "FROM vllm/vllm-openai:v0.10.1.1\nCOPY sagemaker-entrypoint.sh entrypoint.sh\n"
                                   'RUN chmod +x entrypoint.sh\nENTRYPOINT ["./entrypoint.sh"]\n')
    script = write(tmp_path / "sagemaker-entrypoint.sh", "#!/bin/bash\nARGS=(--port 8080)\n"
                                                         'exec python3 -m vllm.entrypoints.openai.api_server "${ARGS[@]}"\n')
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.file.endswith(".sh")]
    assert (entry.decision["vllm"]["release"], entry.deployment.release.origin) == (
        "0.10.1.1", f"image tag vllm/vllm-openai:v0.10.1.1 in {tmp_path / 'Dockerfile'}, which copies this file into "
                    "the image it builds")
    # A pin in the script names its release first.
    write(script, "#!/bin/bash\npip install vllm==0.9.2\nexec python3 -m vllm.entrypoints.openai.api_server --port 1\n")
    (entry,) = [e for e in audit([str(tmp_path)]).entries if e.deployment.file.endswith(".sh")]
    assert entry.decision["vllm"]["release"] == "0.9.2"


def test_a_range_a_script_or_dockerfile_installs_gives_the_newest_release_it_allows(tmp_path):
    # `pip install "vllm>=0.10,<0.12"`: pip installs the newest release the range allows. Such a line
    # named no release: the default 0.33.0 decided it (the range's requirements-file form, surveys 37b, 38c).
    write(tmp_path / "run.sh", 'pip install "vllm>=0.10,<0.12"\nvllm serve m\n')
    write(tmp_path / "Dockerfile", 'FROM python:3.11\nRUN pip install "vllm<=0.8.5"\nCMD ["vllm", "serve", "m"]\n')
    entries = {Path(e.deployment.file).name: e.decision for e in audit([str(tmp_path)]).entries}
    assert (entries["run.sh"]["vllm"], entries["run.sh"]["outcome"]) == ({
        "release": "0.11.2", "source": "range vllm>=0.10,<0.12 at line 1: 0.11.2, the newest release it allows, "
                                      "as pip installs it"}, "enabled")
    assert (entries["Dockerfile"]["vllm"]["release"], entries["Dockerfile"]["outcome"]) == ("0.8.5", "disabled")


def test_a_device_not_known_leaves_the_platform_and_so_the_decision_open(tmp_path):
    # EnflameTechnology/vllm-gcu (7b5aaca9) benchmarks: `device=args.device` (gcu, cuda or cpu); `--device "$DEV"`
    # was `enabled` with a note that "the decision does not read it", where `--device cpu` on 0.9.2 and
    # vllm-gcu's `--device gcu` run without the hybrid KV cache manager (survey 39b).
    write(tmp_path / "run.sh", 'pip install vllm==0.9.2\nvllm serve m --device "$DEV"\nvllm serve m --device cuda\n')
    write(tmp_path / "run.py", "import argparse\nfrom vllm import LLM\nargs = argparse.ArgumentParser().parse_args()\n"
                               "llm = LLM(model='m', device=args.device)\n")
    entries = {(Path(e.deployment.file).name, e.deployment.line): e for e in audit([str(tmp_path)]).entries}
    assert {key: [(err["code"], err["message"]) for err in e.decision["errors"]] for key, e in entries.items()} == {
        ("run.sh", 2): [("source.unresolved", "line 2: `--device` takes its value from `$DEV`, which this file does not "
                                              "set: the platform it picks decides whether vLLM runs the hybrid KV cache "
                                              "manager")],
        ("run.sh", 3): [],
        ("run.py", 4): [("source.unresolved", "line 4: `device` takes its value from `args.device` (which is computed "
                                              "when the script runs): the platform it picks decides whether vLLM runs "
                                              "the hybrid KV cache manager")]}
    assert entries[("run.sh", 2)].deployment.notes == ()


def test_a_vllm_wheel_a_script_installs_by_its_url_names_its_release(tmp_path):
    # vllm-project/vllm-metal (211a1e4b) install.sh: `uv pip install "$VLLM_WHEEL_URL"`, vLLM's GitHub release
    # wheel, `.../v${VLLM_VERSION}/vllm-${VLLM_VERSION}%2Bcpu-...whl`: decided as the default release with nothing
    # said, where `uv pip install vllm==0.22.0` names its release (survey 39a).
    url = "https://github.com/vllm-project/vllm/releases/download/v${V}/vllm-${V}%2Bcpu-cp38-abi3-macosx_11_0_arm64.whl"
    write(tmp_path / "known.sh", f'V=0.27.1\nuv pip install "{url}"\nvllm serve m\n')
    write(tmp_path / "unknown.sh", f'uv pip install "{url}"\nvllm serve m\n')
    entries = {Path(e.deployment.file).name: e for e in audit([str(tmp_path)]).entries}
    assert entries["known.sh"].decision["vllm"] == {
        "release": "0.27.1", "source": "the vLLM wheel vllm-0.27.1%2Bcpu-cp38-abi3-macosx_11_0_arm64.whl at line 2"}
    unknown = entries["unknown.sh"]
    assert [(n.code, n.message) for n in unknown.deployment.notes] == [(
        "source.release_unknown", "the vLLM release is not known: the vLLM wheel "
                                  "`vllm-${V}%2Bcpu-cp38-abi3-macosx_11_0_arm64.whl` at line 1: its version is not known "
                                  "from this file")]


def test_a_command_apptainer_runs_in_a_container_takes_its_images_release(tmp_path):
    # yichao-yuan-99/vllm-otel (8abc0307) servers/hardcoded-amdhpc/*.sbatch: `apptainer exec --rocm ... "${VLLM_SIF}"
    # bash -c '... exec vllm serve ...'`: decided as the default release, where `docker run` of the same image and
    # `srun --container-image` are decided as its tag's (survey 40b).
    write(tmp_path / "run.sh", "apptainer exec --nv -B /data:/data --env HF_HOME=/data docker://vllm/vllm-openai:v0.8.5 "
                               "vllm serve m\n"
                               "singularity exec --rocm docker://vllm/vllm-openai-rocm:v0.20.0 bash -c "
                               "'vllm serve m --disable-hybrid-kv-cache-manager'\n")
    first, second = audit([str(tmp_path)]).entries
    assert [(e.decision["vllm"]["release"], e.deployment.release.origin, e.decision["outcome"]) for e in (first, second)] == [
        ("0.8.5", "image tag vllm/vllm-openai:v0.8.5", "disabled"),
        ("0.20.0", "image tag vllm/vllm-openai-rocm:v0.20.0", "disabled")]
    assert second.deployment.document["platform"] == {"name": "rocm"}


def test_a_command_srun_runs_in_a_pyxis_container_takes_its_images_release(tmp_path):
    # Slurm's pyxis plugin: `srun --container-image=IMAGE COMMAND` runs COMMAND in a container of
    # IMAGE, an enroot URI (`REGISTRY#IMAGE:TAG`) (NVIDIA/pyxis 10751994 README.md), as
    # NVIDIA/TensorRT-Model-Optimizer (5a4242fa) examples/speculative_decoding/distributed_generate
    # runs its worker script in `vllm/vllm-openai:v0.8.5` (that script, another file, is not followed).
    # Launches so run were decided as the default release.
    escaped = NIXL.replace('"', '\\"')
    script = write(tmp_path / "launch.sh", (
        "srun -N 1 --mpi pmix --overlap --container-image=vllm/vllm-openai:v0.8.5 --container-mounts=/m:/model/ \\\n"
        "    vllm serve /model/ --tensor-parallel-size 8 --port 8000\n"
        "srun --container-image docker.io#vllm/vllm-openai:v0.10.1 --no-container-entrypoint python3 -m "
        f"vllm.entrypoints.openai.api_server --model m --kv-transfer-config '{NIXL}'\n"
        f"srun --container-image=vllm/vllm-openai:v0.30.0 bash -c \"vllm serve m --kv-transfer-config '{escaped}'\"\n"
        "srun -N 1 vllm serve m\n"))
    found = read_source(script).deployments
    assert [(d.line, d.release.version if d.release else None) for d in found] == [
        (1, "0.8.5"), (3, "0.10.1"), (4, "0.30.0"), (5, None)]
    assert found[1].release.origin == "image tag docker.io/vllm/vllm-openai:v0.10.1"
    entries = audit([str(script)]).entries
    assert [e.decision["outcome"] for e in entries] == ["disabled", "disabled", "enabled", "enabled"]


def test_an_sbatch_script_with_a_container_image_directive_runs_in_that_image(tmp_path):
    # pyxis also adds its options to sbatch: `#SBATCH --container-image IMAGE` runs the batch script
    # in the container (NVIDIA/pyxis 10751994 README.md `### sbatch`, where `\#` escapes the registry's
    # `#` in a directive). sbatch reads directives up to the first command; one below it is a comment.
    script = write(tmp_path / "serve.sbatch", (
        "#!/usr/bin/env bash\n#SBATCH -p main\n#SBATCH --gres=gpu:8\n"
        "#SBATCH --container-image=vllm/vllm-openai:v0.9.0\n#SBATCH --no-container-entrypoint\n\n"
        "set -eo pipefail\n#SBATCH --container-image=vllm/vllm-openai:v0.20.0\n"
        f"exec vllm serve m --kv-transfer-config '{LMCACHE}'\n"))
    (served,) = read_source(script).deployments
    assert (served.line, served.release.version, served.release.origin) == (
        9, "0.9.0", "image tag vllm/vllm-openai:v0.9.0")
    escaped = write(tmp_path / "esc.sh", "#!/bin/bash\n#SBATCH --container-image nvcr.io\\#nvidia/vllm:25.09-py3\n"
                                         "vllm serve m\n")
    (entry,) = audit([str(escaped)]).entries
    assert [(n.code, n.message) for n in entry.deployment.notes] == [("source.release_unknown", (
        "the vLLM release is not known: image tag nvcr.io/nvidia/vllm:25.09-py3: the vLLM release NGC 25.09's "
        "image ships is not recorded"))]


def test_a_pin_in_a_container_shell_installs_its_release_there_only(tmp_path):
    # `docker run pytorch/pytorch bash -c "pip install vllm==0.8.5 && vllm serve m"` runs 0.8.5: the
    # launch was decided as the default release, the image's tag naming none ("the vLLM release is not
    # known"). A pin in one container is not the script's own environment, nor another container's.
    script = write(tmp_path / "run.sh", (
        'docker run --gpus all pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime bash -c "pip install vllm==0.8.5 && '
        'vllm serve m"\n'
        'srun --container-image=nvcr.io#nvidia/pytorch:24.05-py3 bash -c "pip install vllm==0.10.1 && vllm serve m"\n'
        'docker run --gpus all pytorch/pytorch:2.4.0 bash -c "vllm serve m"\n'
        "vllm serve on-the-host\n"
        "pip install vllm==0.9.2\n"
        "docker run --gpus all --entrypoint vllm vllm/vllm-openai:v0.14.0 serve m\n"
        "vllm serve on-the-host\n"))
    found = read_source(script).deployments
    assert [(d.line, d.release.version if d.release else None, d.release.origin if d.release else None)
            for d in found] == [
        (1, "0.8.5", "pip pin vllm==0.8.5 at line 1"), (2, "0.10.1", "pip pin vllm==0.10.1 at line 2"),
        (3, None, "image pytorch/pytorch:2.4.0 is not vLLM's release image: its tag is not read as a vLLM release"),
        (4, None, None), (6, "0.14.0", "image tag vllm/vllm-openai:v0.14.0"), (7, "0.9.2", "pip pin vllm==0.9.2 at line 5")]
    assert [e.decision["outcome"] for e in audit([str(script)]).entries][0] == "disabled"  # 0.8.5: no HMA


def test_a_script_that_builds_vllms_source_at_a_tag_runs_that_release(tmp_path):
    # As ipex-llm's Dockerfiles build it (tests/test_dockerfile_source.py), in a script of its own.
    script = write(tmp_path / "run.sh", "git clone --depth 1 --branch v0.9.0 https://github.com/vllm-project/vllm.git\n"
                                        "cd vllm\npip install -e .\nvllm serve m\n")
    (launch,) = read_source(script).deployments
    assert launch.release == ReleaseHint("0.9.0", "vLLM built from its repository at tag v0.9.0 (line 1)")


def test_a_whole_word_defaulted_to_nothing_or_options_may_hold_other_options(tmp_path):
    # vllm-project/tpu-inference (b8692ff0) docker/entrypoint.sh, the vllm/vllm-tpu image's entrypoint:
    # `exec python3 -m vllm.entrypoints.openai.api_server ${VLLM_ARGS:-}`, how every option reaches
    # that server. `$VLLM_ARGS` had a note; `${VLLM_ARGS:-}` was read as its default and had none.
    script = write(tmp_path / "entrypoint.sh", (
        "exec python3 -m vllm.entrypoints.openai.api_server ${VLLM_ARGS:-}\n"
        "vllm serve ${MODEL:-m} --port ${PORT:-8000} --kv-cache-memory-bytes=${BYTES:-} ${EXTRA:---max-model-len 4096}\n"
        'SET=""\nvllm serve m ${SET:-} "${QUOTED:-}"\n'))
    found = read_source(script).deployments
    assert [[(n.code, n.message) for n in d.notes] for d in found] == [
        [("source.unresolved_arguments", "the command also takes `${VLLM_ARGS:-}`, which this file does not set: its "
                                         "default (nothing) is read, and where the environment sets `VLLM_ARGS` it may "
                                         "hold other options")],
        [("source.unresolved_arguments", "the command also takes `${EXTRA:---max-model-len 4096}`, which this file does "
                                         "not set: its default (`--max-model-len 4096`) is read, and where the "
                                         "environment sets `EXTRA` it may hold other options")],
        []]


def test_an_external_connector_defined_in_the_audited_files_is_shown_by_its_class_line(tmp_path):
    # vllm-project/tpu-inference (b8692ff0) examples/disagg/run_disagg_single_host.sh loads `TPUConnector`
    # from `tpu_inference.distributed.tpu_connector`, defined in the same tree as `class
    # TPUConnector(KVConnectorBase_V1)` (its HMA twin is `TPUConnectorHMA(TPUConnector, SupportsHMA)`).
    # The launch stays undetermined (only a registry entry declares support); the note shows the class.
    write(tmp_path / "tpu_inference" / "distributed" / "tpu_connector.py",
          "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1\n\n\n"
          "class TPUConnector(KVConnectorBase_V1):\n    pass\n")
    external = '{"kv_connector":"TPUConnector","kv_connector_module_path":"tpu_inference.distributed.tpu_connector",' \
               '"kv_role":"kv_producer"}'
    write(tmp_path / "examples" / "run.sh", (
        f"vllm serve m --kv-transfer-config '{external}'\n"
        "vllm serve m --kv-transfer-config '{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_both\","
        f"\"kv_connector_extra_config\":{{\"connectors\":[{NIXL},{external}]}}}}'\n"
        "vllm serve m --kv-transfer-config '{\"kv_connector\":\"Other\",\"kv_connector_module_path\":\"elsewhere.x\"}'\n"
        "vllm serve m --kv-transfer-config '{\"kv_connector\":\"X\",\"kv_connector_module_path\":\"..etc.passwd\"}'\n"))
    entries = audit([str(tmp_path)]).entries
    note = ("source.connector_code", "`TPUConnector` from `tpu_inference.distributed.tpu_connector` is defined in the "
                                     "audited files: `class TPUConnector(KVConnectorBase_V1)` at "
                                     f"{tmp_path / 'tpu_inference' / 'distributed' / 'tpu_connector.py'}:4 (the rules "
                                     "read a connector's HMA support from a registry entry, not from its code)")
    assert [[(n.code, n.message) for n in e.deployment.notes] for e in entries] == [[note], [note], [], []]
    assert [e.decision["outcome"] for e in entries][:2] == ["undetermined", "undetermined"]
    # A module beside the launcher is found whichever folder is audited (vllm-project/vllm's
    # kv_load_exception_handling/test.sh adds its folder to PYTHONPATH; audited from tests/v1/kv_connector,
    # the note was missing: survey 25a).
    write(tmp_path / "a" / "b" / "random_drop_connector.py", "class RandomDropConnector(KVConnectorBase_V1):\n    pass\n")
    write(tmp_path / "a" / "b" / "test.sh", "vllm serve m --kv-transfer-config '{\"kv_connector\":\"RandomDropConnector\","
                                            "\"kv_connector_module_path\":\"random_drop_connector\"}'\n")
    for audited in (tmp_path / "a", tmp_path / "a" / "b"):
        (entry,) = audit([str(audited)]).entries
        assert [n.code for n in entry.deployment.notes] == ["source.connector_code"], audited


def test_an_upgrade_of_vllm_over_an_image_leaves_the_release_unknown(tmp_path):
    # `pip install -U vllm` in a vLLM image's shell installs whatever release is newest when it runs: the
    # image's tag (0.8.5, before HMA) decided it, with the remediation to upgrade (survey 22h).
    run = write(tmp_path / "run.sh", "#!/bin/sh\ndocker run --entrypoint sh vllm/vllm-openai:v0.8.5 -c "
                                     "\"pip install --upgrade vllm && vllm serve m\"\n")
    upgraded = only(read_source(run))
    assert upgraded.release == ReleaseHint(None, "`pip install --upgrade vllm` at line 2 installs the newest release "
                                                 "when it runs: not known from this file")
    # A pin after it, or a plain install (pip keeps the image's, already satisfied), is as before.
    write(run, "#!/bin/sh\ndocker run --entrypoint sh vllm/vllm-openai:v0.8.5 -c \"pip install -U vllm && "
               "pip install vllm==0.10.0 && vllm serve m\"\n")
    assert only(read_source(run)).release.version == "0.10.0"
    write(run, "#!/bin/sh\ndocker run --entrypoint sh vllm/vllm-openai:v0.8.5 -c \"pip install vllm && vllm serve m\"\n")
    assert only(read_source(run)).release.version == "0.8.5"


def test_a_command_evaled_through_a_functions_parameter_is_placed_where_its_text_is_written(tmp_path):
    # kvcache-ai/Mooncake (3b5a594) scripts/tone_tests/scripts/common.sh: `launch_and_track_process` runs
    # `local full_cmd="$1"` and `eval "$full_cmd"` for every server it starts; each vLLM launch was placed
    # at that `local` line of the helper, not where its command line is written (survey 22f).
    script = write(tmp_path / "run.sh", "#!/bin/bash\nrun() {\n    local full_cmd=\"$1\"\n    echo running\n"
                                        "    eval \"$full_cmd\"\n}\n"
                                        f"cmd=\"vllm serve m --kv-transfer-config '{NIXL}'\"\n"
                                        "copy=\"$cmd\"\nrun \"$copy\"\nrun \"vllm serve other\"\n")
    assert [(d.line, d.document["model"]["name"]) for d in read_source(script).deployments] == [(7, "m"), (10, "other")]
    # `shift` and `set --` move or replace the parameters, and where their texts were written with them.
    write(script, "#!/bin/bash\nrun() {\n    shift\n    eval \"$1\"\n}\n"
                  "cmd=\"vllm serve m\"\nrun x \"$cmd\"\nset -- \"$cmd\"\neval \"$1\"\n")
    assert [d.line for d in read_source(script).deployments] == [6, 9]


def test_dollar_zero_of_sh_c_is_the_first_word_after_the_script(tmp_path):
    # `bash -c SCRIPT A B`: `$0` is A, `$1` B. redhat-ai-services/helm-charts' vllm-kserve multinode runtime
    # runs `... $0 $@` with the container's args after its command; `$0` was a word not known, and a KV
    # option given so was missed (survey 22i).
    compact = LMCACHE.replace(" ", "")  # (an unquoted `$0` is split at blanks, as bash splits it)
    script = write(tmp_path / "run.sh", f"#!/bin/bash\nbash -c 'exec vllm serve m \"$0\" $1' --kv-transfer-config='{LMCACHE}' "
                                        "--port=8000\n")
    launch = only(read_source(script))
    assert ktc(launch)["kv_connector"] == "LMCacheConnectorV1" and launch.notes == ()
    pod = write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                       "  - name: c\n    image: vllm/vllm-openai:v0.24.0\n"
                                       "    command: [bash, -c, 'exec vllm serve m $0']\n"
                                       f"    args: ['--kv-transfer-config={compact}']\n")
    (entry,) = audit([str(pod)]).entries
    assert (entry.decision["outcome"], entry.decision["warnings"][0]["code"]) == ("disabled", "hma.auto_disabled")
    # A script given no name: `$0` stays the script's own, not known.
    assert only(read_source(write(script, "#!/bin/bash\nbash -c 'vllm serve m $0'\n"))).notes[0].code == \
        "source.script_arguments"


def test_two_values_of_one_option_from_the_same_unknown_are_noted_once(tmp_path):
    # GoogleCloudPlatform/generative-ai (23b75dab) get_started_with_vllm_lora_serving_on_vertex_ai.ipynb:
    # `--lora-modules sql-lora=gs://{PROJECT_ID}-... magicoder-lora=gs://{PROJECT_ID}-...` gave two notes of
    # the same text (survey 22j).
    launch = only(read_source(write(tmp_path / "run.sh", "vllm serve m --enable-lora --lora-modules "
                                                         "a=gs://$PROJECT/a b=gs://$PROJECT/b\n")))
    assert [n.message for n in launch.notes] == [
        "`--lora-modules` takes its value from `$PROJECT`, which this file does not set; the decision does not read it"]
