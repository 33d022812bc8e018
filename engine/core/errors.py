"""Problems as data, and the exceptions that carry them.

A :class:`Problem` is one located finding: a stable code, a one-line message,
the JSON Pointer of the offending element, and an optional hint. Two exception
families keep "the caller's document is wrong" apart from "the policy is
wrong", as jsonschema keeps ValidationError apart from SchemaError.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable

__all__ = [
    "Problem",
    "HMAPolicyError",
    "InputError",
    "PolicyError",
    "ConnectorError",
    "EvaluationError",
    "suggest",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding. ``path`` is an RFC 6901 JSON Pointer ("" is the whole document)."""

    code: str
    message: str
    path: str = ""
    hint: str | None = None
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def location(self) -> str:
        """``file:line:col`` when known, else the JSON Pointer."""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}:{self.column or 1}"
            return where
        return self.path or "/"

    def render(self) -> str:
        """One line: location, code, message, pointer and hint (control characters escaped)."""
        text = f"{self.location()}: {self.code}: {self.message}"
        if self.file is not None and self.path:
            text += f" (at {self.path})"
        if self.hint:
            text += f" (hint: {self.hint})"
        return printable(text)

    def sort_key(self) -> tuple:
        return (self.file or "", self.line or 0, self.column or 0, self.path, self.code, self.message)


class HMAPolicyError(Exception):
    """Base class of every error this package raises on purpose."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: tuple[Problem, ...] = tuple(sorted(problems, key=Problem.sort_key))
        super().__init__(self._summary())

    def _summary(self) -> str:
        if not self.problems:
            return "no problems"
        first = self.problems[0].render()
        more = len(self.problems) - 1
        return first if not more else f"{first} (and {more} more)"


class InputError(HMAPolicyError, ValueError):
    """The deployment document is invalid (stage ``input``)."""


class PolicyError(HMAPolicyError):
    """The rule files are invalid; lists every problem found, sorted by location."""


class ConnectorError(HMAPolicyError, ValueError):
    """:func:`hma_policy.supports_hma` could not answer: vLLM would raise here too."""


class EvaluationError(HMAPolicyError):
    """The rule runtime failed, or the policy has a gap: an engine fault,
    never a property of the document. A gap names its step and the facts."""

    step: tuple[str, str] | None = None
    facts: dict | None = None


def printable(text: str) -> str:
    """``text`` with control and other non-printable characters escaped, for terminals."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """A did-you-mean hint for ``word`` among ``candidates``, or None."""
    if not isinstance(word, str) or len(word) > 256:
        return None
    pool = [c for c in candidates if isinstance(c, str)]
    match = difflib.get_close_matches(word, pool, n=1, cutoff=0.75)
    if not match:
        # Case-only and separator-only slips (kv-role, KV_ROLE) score low in difflib.
        folded = {c.lower().replace("-", "_"): c for c in pool}
        hit = folded.get(word.lower().replace("-", "_"))
        match = [hit] if hit else []
    return f"did you mean `{match[0]}`?" if match else None
