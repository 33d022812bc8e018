"""vLLM's command line read as vLLM reads it (engine/core/command.py, vllm_args.py): the
public read_command that the audit's readers and decide_command share."""

from __future__ import annotations

import json

import pytest

import hma_policy
from hma_policy.core.command import read_command
from hma_policy.core.markers import unresolved
from hma_policy.core.options import Arg, ConfigFile, VllmOptions, find_vllm
from hma_policy.core.errors import InputError, Problem

NIXL = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'


def codes(items) -> list[str]:
    return [p.code for p in items]


def test_vllm_serve_with_a_model_and_the_options_the_decision_reads():
    result = read_command(["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000", "--kv-transfer-config", NIXL,
                           "--kv-offloading-size", "16", "--disable-hybrid-kv-cache-manager"])
    assert result.problems == () and result.notes == ()
    assert result.document == {"kv_transfer_config": NIXL, "kv_offloading_size": 16,
                               "disable_hybrid_kv_cache_manager": True, "model": {"name": "Qwen/Qwen3-8B"}}
    assert result.model == Arg("Qwen/Qwen3-8B", "command line")
    assert hma_policy.decide(result.document).outcome == "disabled"


def test_the_api_server_module_takes_the_model_from_an_option():
    result = read_command(["python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model=m",
                           "--kv_transfer_config", NIXL])
    assert result.document == {"kv_transfer_config": NIXL, "model": {"name": "m"}}


def test_equals_forms_no_forms_dotted_options_and_the_last_occurrence_wins():
    result = read_command(["vllm", "serve", "m", f"--kv-transfer-config={NIXL}",
                           "--kv-transfer-config.kv_connector", "MooncakeConnector",
                           "--kv-transfer-config.kv_role=kv_consumer",
                           "--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager"])
    assert json.loads(result.document["kv_transfer_config"]) == {"kv_connector": "MooncakeConnector",
                                                                "kv_role": "kv_consumer"}
    assert result.document["disable_hybrid_kv_cache_manager"] is False


def test_a_config_file_comes_first_and_the_command_line_wins():
    asked = []

    def read_config(name: str) -> ConfigFile:
        asked.append(name)
        return ConfigFile(f"model: from-config\nkv-transfer-config: '{NIXL}'\ndisable-hybrid-kv-cache-manager: true\n",
                          "/etc/vllm/c.yaml")

    result = read_command(["vllm", "serve", "--config", "c.yaml", "--no-disable-hybrid-kv-cache-manager"],
                          read_config=read_config)
    assert asked == ["c.yaml"]
    assert result.document["model"] == {"name": "from-config"}
    assert result.document["disable_hybrid_kv_cache_manager"] is False
    assert dict(result.origins)["kv_transfer_config"] == "`/etc/vllm/c.yaml`: --kv-transfer-config"
    # A plain string is the file's text, named as the command names it.
    plain = read_command(["vllm", "serve", "m", "--config", "c.yaml"], read_config=lambda name: f"kv-transfer-config: '{NIXL}'\n")
    assert dict(plain.origins)["kv_transfer_config"] == "`c.yaml`: --kv-transfer-config"


def test_a_config_reader_refuses_with_an_input_error_located_at_the_command():
    def refuse(name: str) -> str:
        raise InputError([Problem("source.config_missing", f"`{name}` is not there")])

    result = read_command(["vllm", "serve", "m", "--config", "c.yaml"], read_config=refuse, file="run.sh", line=7)
    assert result.document is None
    (problem,) = result.problems
    assert (problem.code, problem.message, problem.file, problem.line) == (
        "source.config_missing", "`c.yaml` is not there", "run.sh", 7)
    no_reader = read_command(["vllm", "serve", "m", "--config", "c.yaml"])
    assert no_reader.problems[0].message == "`--config c.yaml` cannot be located from this file"


def test_only_the_environment_the_decision_reads_is_copied_with_its_origin():
    result = read_command(["vllm", "serve", "m"], env={"HF_TOKEN": "hf_secret",
                                                       "VLLM_USE_SIMPLE_KV_OFFLOAD": Arg("1", "line 3: export")})
    assert result.document == {"model": {"name": "m"}, "env": {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}}
    assert dict(result.origins)["env"] == "line 3: export"


def test_an_unresolved_value_the_decision_reads_is_a_problem_naming_it():
    result = read_command(["vllm", "serve", "m", "--kv-transfer-config", unresolved("$KV")], file="f", line=2)
    assert result.document is None
    assert result.problems[0].message == "`--kv-transfer-config` takes its value from `$KV`, which this file does not set"


def test_words_carry_their_origins_into_the_document():
    result = read_command([Arg("vllm", "line 4"), Arg("serve", "line 4"), Arg("m", "line 4"),
                           Arg("--kv-transfer-config", "line 5"), Arg(NIXL, "line 5")])
    assert dict(result.origins) == {"kv_transfer_config": "line 5: --kv-transfer-config", "model": "line 4"}


def test_a_command_that_is_not_vllm_is_a_problem():
    result = read_command(["python3", "proxy.py", "--port", "8000"])
    assert result.document is None and codes(result.problems) == ["source.not_vllm"]
    assert find_vllm(["env", "A=1", "vllm", "serve", "m"]) == (3, True)
    assert find_vllm(["python", "-m", "vllm.entrypoints.openai.api_server"]) == (3, False)
    assert find_vllm(["vllm", "bench", "serve"]) is None


def test_with_a_releases_option_list_every_unknown_option_is_refused_and_prefixes_expand():
    release = VllmOptions(release="0.21.0", accepted=frozenset({"--kv-transfer-config", "--port", "--model",
                                                                "--disable-hybrid-kv-cache-manager",
                                                                "--no-disable-hybrid-kv-cache-manager",
                                                                "--kv-events-config"}))
    unknown = read_command(["vllm", "serve", "m", "--kv-offloading-size", "8"], options=release)
    assert unknown.problems[0].code == "source.unknown_option"
    assert unknown.problems[0].message == "vLLM 0.21.0 rejects the unrecognized argument `--kv-offloading-size`"
    prefix = read_command(["vllm", "serve", "m", "--kv-transfer", NIXL], options=release)
    assert prefix.document["kv_transfer_config"] == NIXL and codes(prefix.notes) == ["source.abbreviated_option"]
    ambiguous = read_command(["vllm", "serve", "m", "--kv-", NIXL], options=release)
    assert codes(ambiguous.problems) == ["source.ambiguous_option"]
    # Without a list (the default), an option the decision does not read is left alone.
    assert read_command(["vllm", "serve", "m", "--some-new-option", "1"]).problems == ()


@pytest.mark.parametrize("argv", [[], [""], ["vllm"], ["vllm", "serve"], ["vllm", "serve", "--config"],
                                  ["vllm", "serve", "m", "--kv-transfer-config.kv_role"], ["vllm", "serve", "\x00"]])
def test_any_argv_gives_a_result_never_an_exception(argv):
    result = read_command(argv)
    assert result.document is not None or result.problems


def test_a_command_given_as_shell_text_is_split_as_the_shell_splits_it():
    from hma_policy.core.command import _shell_words

    words = _shell_words(f"VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve m --kv-transfer-config '{NIXL}' --port \"$PORT\"", {})
    assert words[:5] == ["VLLM_USE_SIMPLE_KV_OFFLOAD=1", "vllm", "serve", "m", "--kv-transfer-config"]
    result = read_command(words)
    assert json.loads(result.document["kv_transfer_config"]) == json.loads(NIXL)
    assert [n.message for n in result.notes] == [
        "`--port` takes its value from `$PORT` (which is not given in `env`); the decision does not read it"]
    unknown = read_command(_shell_words('vllm serve m --kv-transfer-config "$KV"', {}))
    assert unknown.problems[0].message == "`--kv-transfer-config` takes its value from `$KV` (which is not given in `env`)"
    for text in ("vllm serve 'm", 'vllm serve "m', 'vllm serve "m\\'):
        with pytest.raises(InputError) as raised:
            _shell_words(text, {})
        assert raised.value.problems[0].message == "the command cannot be split into words: no closing quotation"
    # A backslash that ends the text is kept, as the shell keeps it (`sh -c 'printf %s a\'` prints `a\`).
    assert _shell_words("vllm serve m\\", {}) == ["vllm", "serve", "m\\"]


def test_a_shell_string_is_expanded_as_the_shell_expands_it():
    """decide_command(str): `$NAME` from env only outside single quotes; an
    unquoted expansion splits at blanks, a quoted one stays one word; the
    shell's escapes inside double quotes (regression: `'$KV'` was expanded)."""
    from hma_policy.core.command import _shell_words

    kv = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    env = {"KV": kv, "EMPTY": "", "TWO": " a  b "}
    assert _shell_words("vllm serve m --kv-transfer-config '$KV'", env)[-1] == "$KV"
    assert _shell_words('vllm serve m --kv-transfer-config "$KV"', env)[-1] == kv
    assert _shell_words("x $TWO y", env) == ["x", "a", "b", "y"]
    assert _shell_words('x "$TWO" $EMPTY "" y', env) == ["x", " a  b ", "", "y"]
    assert _shell_words('x "a\\"b\\$c" \\$KV a\\\nb', env) == ["x", 'a"b$c', "$KV", "ab"]
    assert _shell_words("x ${NOPE}", env)[1] == unresolved("${NOPE}", "is not given in `env`")
    # as vLLM would: it gets the four characters `$KV`, which are no JSON
    with pytest.raises(InputError) as caught:
        hma_policy.decide_command("vllm serve m --kv-transfer-config '$KV'", env=env)
    assert caught.value.problems[0].code == "input.parse"
    assert hma_policy.decide_command('vllm serve m --kv-transfer-config "$KV"', env=env).outcome == "enabled"
    for text in ("vllm serve 'm", 'vllm serve "m'):
        with pytest.raises(InputError) as caught:
            hma_policy.decide_command(text)
        assert caught.value.problems[0].message == "the command cannot be split into words: no closing quotation"
    # A backslash that ends the text is a word of its own, as the shell gives it (it was refused before).
    assert hma_policy.decide_command("vllm serve m \\").outcome == "enabled"
