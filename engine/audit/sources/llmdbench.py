"""llm-d-benchmark scenarios (placeholder, filled below)."""
from __future__ import annotations
from typing import Any

__all__ = ["is_scenario", "scenario_file"]


def is_scenario(values: Any) -> bool:
    return False


def scenario_file(ctx, values, lines):
    return [], []
