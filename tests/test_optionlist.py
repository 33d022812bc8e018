"""vLLM's option list (engine/core/optionlist.py): 0.33.0's options,
recorded from its wheel with provenance (rules/options/, named in rules/releases.yaml), and the
one function that reads a list, by release or by path."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from hma_policy import InputError
from hma_policy.core.optionlist import DEFAULT_RELEASE, Option, known_options, known_releases

RECORDED = json.loads(resources.files("hma_policy.rules").joinpath("options", "0.33.0.json").read_text("utf-8"))


def test_the_recorded_option_list_is_0_33_0s_with_its_provenance():
    assert (RECORDED["vllm_version"], RECORDED["wheel"]["sha256"]) == (
        "0.33.0", "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa")
    options = known_options()
    assert DEFAULT_RELEASE == options.release == "0.33.0" and "0.33.0" in known_releases()
    assert len(options.by_dest) == len(RECORDED["options"]) == 320
    assert options.by_dest["kv_transfer_config"] == Option("kv_transfer_config", "--kv-transfer-config", "json", False)
    assert options.by_dest["disable_hybrid_kv_cache_manager"] == Option(
        "disable_hybrid_kv_cache_manager", "--disable-hybrid-kv-cache-manager", "bool", True,
        ("--enable-hybrid-kv-cache-manager",))  # 0.33.0's EnableDisableAction
    assert options.by_dest["tensor_parallel_size"].type == "int"
    assert options.kebab("kv_offloading_size") == "kv-offloading-size"


def test_an_unknown_release_is_an_input_error_with_a_did_you_mean():
    with pytest.raises(InputError) as info:
        known_options("0.33.1")
    (problem,) = info.value.problems
    assert problem.code == "release.unknown"
    assert "no option list of vLLM 0.33.1 is bundled; known: " in problem.message
    assert problem.hint == "did you mean `0.33.0`?"


def test_known_options_reads_a_list_given_by_path(tmp_path):
    path = tmp_path / "9.9.9.json"
    path.write_text(json.dumps({"vllm_version": "9.9.9", "options": {
        "--port": {"type": "int", "no_form": False, "aliases": []},
        "--gpu-memory-utilization": {"type": "float", "no_form": False, "aliases": ["--device-memory-utilization"]}}}))
    options = known_options(path=path)
    assert options.release == "9.9.9" and sorted(options.by_dest) == ["gpu_memory_utilization", "port"]
    assert options.dest("device_memory_utilization") == "gpu_memory_utilization" and options.dest("tp") is None
    assert known_options(path=path) is options  # read once


@pytest.mark.parametrize("content, message", [
    (None, "the option list `{}` cannot be read: FileNotFoundError: "),
    ("{", "the option list `{}` cannot be read: JSONDecodeError: "),
    ('{"options": {}}', "the option list `{}` cannot be read: KeyError: 'vllm_version'"),
    ('{"vllm_version": "1", "options": []}', "the option list `{}` cannot be read: AttributeError: "),
])
def test_an_option_list_that_cannot_be_read_is_an_input_error(tmp_path, content, message):
    path = tmp_path / "broken.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as info:
        known_options(path=path)
    (problem,) = info.value.problems
    assert problem.code == "release.options" and problem.message.startswith(message.format(path)), problem


def test_no_release_gives_an_option_more_words_than_the_command_reader_lets_it_take():
    """The command reader takes an option's words by the default release's list
    (list_options): a list option every word up to the next option, any other one
    word, and it refuses no word after an option that list lacks. That never
    refuses a word an older release takes as a value only while every option that
    takes a list in some release is a list option there, or absent from it (then
    the reader stays careful). A bundled list that breaks this fails here."""
    from hma_policy.core.optionlist import list_options

    lists, listed = list_options()
    assert "--served-model-name" in lists and "--port" in listed and "--port" not in lists
    wider = sorted({(release, option.flag) for release in known_releases()
                    for option in known_options(release).by_dest.values()
                    if option.type == "list" and option.flag in listed and option.flag not in lists})
    assert wider == []
    # The options that take a list in older releases only are the ones the reader is careful after.
    older_only = sorted({option.flag for release in known_releases() for option in known_options(release).by_dest.values()
                         if option.type == "list" and option.flag not in listed})
    assert older_only == ["--cuda-graph-sizes", "--long-lora-scaling-factors", "--prompt-adapters"]  # (0.9.x)


def test_no_release_gives_a_word_to_an_option_the_command_reader_takes_as_a_boolean():
    """The command reader lets a boolean of the default release (flag_options) take no word,
    so the word after it is vLLM's model or an argument vLLM refuses. That holds only while
    no bundled release gives such an option a value (as vLLM before 0.9's StoreBoolean,
    `nargs="?"`, did). A bundled list that breaks this fails here."""
    from hma_policy.core.optionlist import flag_options

    booleans = flag_options()
    assert {"--enforce-eager", "--no-enable-prefix-caching", "--disable-hybrid-kv-cache-manager"} <= booleans
    valued = sorted({(release, option.flag) for release in known_releases()
                     for option in known_options(release).by_dest.values()
                     if option.type != "bool" and (option.flag in booleans or
                                                   option.no_form and "--no-" + option.flag[2:] in booleans)})
    assert valued == []
