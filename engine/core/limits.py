"""Bounds on input: what a document may hold before anything else reads it
(:class:`Limits`, enforced by document.py), and what one source file may make
an audit read (:class:`SourceLimits`, enforced by sources.py).

A module of its own, never compiled: these public classes keep their
docstrings, and pickle as plain dataclasses (audit workers receive them),
where document.py and sources.py are compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT_LIMITS", "SourceLimits", "DEFAULT_SOURCE_LIMITS"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds enforced before any evaluation. All are configurable."""

    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 96
    max_values: int = 2_000_000
    max_string_length: int = 16 * 1024 * 1024
    max_connectors: int = 10_000


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class SourceLimits:
    """Bounds on what one source file may make the audit read."""

    max_file_bytes: int = 16 * 1024 * 1024
    # A --config file or ConfigMap entry; vLLM reads one level only (a
    # `config` key inside a config file is not followed), so depth is 1.
    max_config_bytes: int = 1024 * 1024
    max_yaml_documents: int = 10_000
    max_commands: int = 10_000
    # Shell function calls, a helper read for its output too: `f() { f; f; }` doubles them at
    # each level of nesting, each call costing the audit far more than its words do.
    max_calls: int = 10_000
    # Shell variables: `X=$X$X` repeated doubles a value each time.
    max_variable_length: int = 1024 * 1024
    # Shell arrays (`CMD+=(...)`), whose elements are the words of a command:
    # `A=("${A[@]}" "${A[@]}")` repeated doubles them, and an element costs
    # the audit far more than a character does.
    max_array_elements: int = 4096
    max_script_depth: int = 3  # sh -c "... sh -c '...'" nesting


DEFAULT_SOURCE_LIMITS = SourceLimits()
