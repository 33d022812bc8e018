"""The audit's report model: each file examined, each deployment and its
decision, and the summary counted over them. ``report`` renders it.

The report is a pure function of the files, the policy and the tool version,
but for the time it records (``generated_at``; SOURCE_DATE_EPOCH fixes it):
it holds no machine-specific path, and it is the same whatever the number
of processes that made it.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import Any, NamedTuple

from ..core.errors import HMAPolicyError, Problem
from ..core.policies import DEFAULT_SOURCE
from ..core.releases import release_numbers
from ..version import __version__
from .sources import Deployment

__all__ = ["AuditError", "Entry", "FileResult", "AuditReport", "Tally", "FAIL_ON", "OUTCOMES", "problem_dict"]

# Conditions `--fail-on` may name.
FAIL_ON = ("error", "undetermined", "disabled", "warning", "problem")
OUTCOMES = ("enabled", "disabled", "error", "undetermined")


class AuditError(HMAPolicyError):
    """The audit could not run (a path does not exist, a worker died)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One deployment, its decision (``Decision.to_dict()``) and what the
    rules say to change (``Decision.remediation``)."""

    deployment: Deployment
    decision: dict[str, Any]
    input_digest: str | None
    remediation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.deployment
        return {
            "id": d.id,
            "file": d.file,
            "format": d.format,
            "line": d.line,
            "name": d.name,
            "resource": dict(d.resource) if d.resource else None,
            "container": d.container,
            "role": d.role,
            "chain": list(d.chain),
            "release_hint": {"version": d.release.version, "origin": d.release.origin} if d.release else None,
            "origins": dict(d.origins),
            "notes": [problem_dict(n) for n in d.notes],
            "input_digest": self.input_digest,
            "remediation": self.remediation,
            "decision": self.decision,
        }


class FileResult(NamedTuple):
    """One file examined: what it was, how many deployments, its problems and notes.
    (A NamedTuple: an audit's workers send one per file, and a tuple is
    pickled and loaded several times faster than a slotted dataclass.)"""

    file: str
    format: str | None
    deployments: int
    problems: tuple[Problem, ...] = ()
    skipped: str | None = None
    notes: tuple[Problem, ...] = ()


def problem_dict(p: Problem) -> dict[str, Any]:
    out: dict[str, Any] = {"code": p.code, "message": p.message}
    if p.file is not None:
        out["file"] = p.file
    out["line"] = p.line
    out["path"] = p.path
    if p.hint:
        out["hint"] = p.hint
    return out


_VERDICT_KEYS = {True: "supports_hma", False: "does_not"}


class Tally(dict):
    """The counts a summary is made of. Tallies of parts of a report add up
    (:meth:`plus`), so that each process of an audit counts its own files."""

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> "Tally":
        out = cls(outcomes={}, stages={}, codes={}, rules={}, formats={}, warnings=0, connectors={}, releases={},
                  deployments=0, warned=0)
        for e in entries:
            decision, count = e.decision, 1
            out["deployments"] += 1
            out["warned"] += 1 if decision["warnings"] else 0
            _add(out["formats"], e.deployment.format, count)
            _add(out["outcomes"], decision["outcome"], count)
            if decision["errors"]:
                _add(out["stages"], decision["errors"][0]["stage"], count)
            for code in {m["code"] for m in decision["errors"] + decision["warnings"]}:
                _add(out["codes"], code, count)
            for rule in decision["trace"]:
                _add(out["rules"], rule, count)
            out["warnings"] += len(decision["warnings"])
            # Per vLLM release that decided it: how many, and how many of them because nothing names one.
            if decision.get("vllm"):
                row = out["releases"].setdefault(decision["vllm"]["release"], {"deployments": 0, "default": 0})
                row["deployments"] += 1
                row["default"] += decision["vllm"]["source"].startswith(DEFAULT_SOURCE)
            # Per connector name: how many deployments use it, and its nodes' verdicts.
            seen = set()
            for node in decision["connectors"]:
                name = node["kv_connector"] or "(no kv_connector)"
                row = out["connectors"].setdefault(name, {"deployments": 0, "supports_hma": 0, "does_not": 0, "unknown": 0})
                row[_VERDICT_KEYS.get(node["supports_hma"], "unknown")] += 1
                if name not in seen:
                    seen.add(name)
                    row["deployments"] += 1
        return out

    @classmethod
    def total(cls, tallies: Iterable["Tally"]) -> "Tally":
        """The sum of ``tallies``, added into one new tally (each part is read once)."""
        out = cls.of(())
        for other in tallies:
            for part in ("outcomes", "stages", "codes", "rules", "formats"):
                for key, count in other[part].items():
                    _add(out[part], key, count)
            for part in ("warnings", "deployments", "warned"):
                out[part] += other[part]
            for part in ("connectors", "releases"):
                for name, row in other[part].items():
                    into = out[part].setdefault(name, dict.fromkeys(row, 0))
                    for key, count in row.items():
                        into[key] += count
        return out


def _add(counts: dict[str, int], key: str, count: int) -> None:
    counts[key] = counts.get(key, 0) + count


@dataclass(frozen=True)
class AuditReport:
    """Everything an audit found, in a fixed order.

    ``tally``: the entries' counts, when the audit's processes made them as
    they went; else the summary counts them. ``rendered``: the JSON text of
    the deployments, chunk by chunk in order, when the processes rendered it
    as they went (``audit(..., prerender=True)``); else report.write()
    renders them. ``entries`` is empty when the audit was asked to keep
    none (``audit(..., entries=False)``): the tally and the rendered text
    are then the report's deployments."""

    paths: tuple[str, ...]
    policy_source: str
    policy_digest: str
    files: tuple[FileResult, ...]
    entries: tuple[Entry, ...]
    tool_version: str = __version__
    tally: Tally | None = None
    rendered: tuple[bytes, ...] | None = None

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(p for f in self.files for p in f.problems)

    @property
    def notes(self) -> tuple[Problem, ...]:
        """The files' notes (`source.unrecognized`): not problems."""
        return tuple(n for f in self.files for n in f.notes)

    def summary(self) -> dict[str, Any]:
        """Counts over the report."""
        return copy.deepcopy(self._summary)

    @cached_property
    def _tally(self) -> Tally:  # a report is immutable: counted once
        return self.tally if self.tally is not None else Tally.of(self.entries)

    @cached_property
    def _summary(self) -> dict[str, Any]:
        tally = self._tally
        examined = [f for f in self.files if f.skipped is None]
        return {
            "files": {
                "seen": len(self.files),
                "examined": len(examined),
                "with_deployments": sum(1 for f in self.files if f.deployments),
                "with_problems": sum(1 for f in self.files if f.problems),
                "skipped": len(self.files) - len(examined),
            },
            "deployments": tally["deployments"],
            "outcomes": {name: tally["outcomes"].get(name, 0) for name in OUTCOMES},
            "error_stages": {name: tally["stages"].get(name, 0) for name in ("input", "config", "connector")},
            "codes": dict(sorted(tally["codes"].items())),
            "formats": dict(sorted(tally["formats"].items())),
            "warnings": tally["warnings"],
            "by_connector": dict(sorted(tally["connectors"].items())),
            "by_release": dict(sorted(tally["releases"].items(), key=lambda item: release_numbers(item[0]))),
            "by_rule": dict(sorted(tally["rules"].items())),
            "problems": len(self.problems),
            "notes": len(self.notes),
        }

    def generated_at(self) -> str:
        """When the report was made (UTC), or SOURCE_DATE_EPOCH when set, the
        reproducible-builds convention for byte-identical outputs."""
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        seconds = int(epoch) if epoch and epoch.isdigit() else int(time.time())
        return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def failing(self, conditions: Iterable[str]) -> list[str]:
        """The `--fail-on` conditions this report meets, each with a count."""
        summary = self.summary()
        met = []
        for condition in conditions:
            if condition in ("error", "undetermined", "disabled"):
                count = summary["outcomes"][condition]
            elif condition == "warning":
                count = self._tally["warned"]
            else:
                count = summary["problems"]
            if count:
                met.append(f"{condition}: {count}")
        return met

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``hma-policy audit --format json``)."""
        return self.report_dict([e.to_dict() for e in self.entries])

    def iter_deployments(self, size: int = 1024) -> Iterator[list[dict[str, Any]]]:
        """``to_dict()["deployments"]``, ``size`` at a time, in order: for a
        writer that streams a large report (report.write) rather than
        holding every deployment's dict at once."""
        entries, size = self.entries, max(1, size)
        for start in range(0, len(entries), size):
            yield [e.to_dict() for e in entries[start:start + size]]

    def report_dict(self, deployments: Any) -> dict[str, Any]:
        """The JSON report with ``deployments`` as its deployments (a
        streaming writer puts a placeholder there)."""
        return {
            "kind": "hma-policy-audit",
            "version": 1,
            "tool": {"name": "hma-policy", "version": self.tool_version},
            "generated_at": self.generated_at(),
            "policy": {"source": self.policy_source, "digest": self.policy_digest},
            "paths": list(self.paths),
            "summary": self.summary(),
            "deployments": deployments,
            "problems": [problem_dict(p) for p in self.problems],
            "notes": [problem_dict(n) for n in self.notes],
            "skipped": [{"file": f.file, "reason": f.skipped} for f in self.files if f.skipped is not None],
        }
