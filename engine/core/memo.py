"""The evaluator's memos: values kept by the facts they were made from.

A fleet's graphs repeat, so a decision is made once per set of facts, and a
ruleset's answer once per node facts seen (core/evaluate.py). Both are
bounded by the memory they hold, and emptied whole when full.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Memo", "MEMO_NODES", "MEMO_ANSWERS"]

# The decision memo holds decisions of this many connector nodes in all: a
# fleet's graphs repeat, and each is decided once. Besides the answers it
# shares, a decision holds 0.4 KiB a node (a fleet's small graphs) to 1.1 KiB
# (graphs of 20 random nodes): this bound holds 6 to 18 MiB.
MEMO_NODES = 16_384

# The answers memo holds this many rulesets' answers (each a node's or a
# document's facts and its steps, about 5.5 KiB; about 22 MiB in all): a
# fleet's graphs repeat a few hundred kinds of node.
MEMO_ANSWERS = 4_096


class Memo:
    """Values by the facts they were made from, bounded by the weight they
    hold (a decision weighs its graph's nodes, a ruleset's answer 1): cleared
    whole when full; a limit of 0 keeps nothing. Plain dict reads and writes,
    without a lock, so that a decision made from a signal handler or another
    thread never waits on one."""

    def __init__(self, limit: int):
        self.limit = limit
        self.weight = 0
        self._held: dict[tuple, Any] = {}

    def get(self, key: tuple) -> Any:
        return self._held.get(key)

    def put(self, key: tuple, value: Any, weight: int) -> None:
        if self.limit == 0:
            return
        self.weight += weight
        if self.weight > self.limit:
            self._held = {}
            self.weight = weight
        self._held[key] = value
