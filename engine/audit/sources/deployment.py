"""What reading a file gives: its deployments (:class:`Deployment`) and
the file's own problems (:class:`SourceFile`), as immutable values."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from ...core.command import StandIn
from ...core.errors import Problem
from .release import ReleaseHint

__all__ = ["Deployment", "SourceFile"]


@dataclass(frozen=True, slots=True)
class Deployment:
    """One vLLM deployment found in a file, as a deployment document.

    ``document`` is None when ``problems`` prevent building it. ``problems``
    are input-stage problems (the deployment is decided as an input error);
    ``notes`` are things a reader should know that do not stop the decision.
    ``origins`` maps each top-level document field to where its value came
    from (``line 12: --kv-transfer-config``). ``stand_in``: when the
    problems are unknown values vLLM reads for their type alone, the
    document with a stand-in for each (core.command.StandIn). ``paths``:
    when the problems are values a script's `if` or `case` sets differently
    on its paths, the document on each path (which path, the document).
    """

    file: str
    format: str
    anchor: str = ""          # appended to ``file`` to make ``id``: ":12" (a line) or "#Deployment/x/vllm"
    line: int | None = None
    name: str | None = None
    document: dict[str, Any] | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[Problem, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()
    resource: tuple[tuple[str, str], ...] = ()   # a Kubernetes object reference (apiVersion, kind, name, namespace)
    container: str | None = None                 # the container (Kubernetes, compose service) that runs it
    role: str | None = None                      # prefill, decode, leader, worker, ... where the object says
    chain: tuple[str, ...] = ()                  # the files merged to make it, in order: the file, a --config file, ...
    release: ReleaseHint | None = None           # the vLLM release that deploys it, where the file tells
    stand_in: StandIn | None = None              # where ``problems`` are values read for their type alone
    paths: tuple[tuple[str, dict[str, Any]], ...] = ()  # the document on each path that makes a value unknown
    # The long options its command line gives that the decision does not read,
    # and where (``--max-num-seqs``, ``line 12``): the audit checks them
    # against the release that runs it, once that is known.
    options: tuple[tuple[str, str], ...] = ()
    # Of the paths, each whose document holds stand-ins (its only problems are values read for their
    # type alone, or tried for each class), with its StandIn: which path, the stand-in.
    stood_paths: tuple[tuple[str, StandIn], ...] = ()

    @property
    def id(self) -> str:
        return self.file + self.anchor

    def __reduce__(self) -> tuple:
        # Pickled as its fields and rebuilt by __init__: four times faster to
        # load than the default for slotted classes (audit workers send many).
        return (type(self), tuple(getattr(self, name) for name in _FIELDS))

    def without_document(self) -> "Deployment":
        """This deployment without its documents (an audit that need not keep them)."""
        return self.replace(document=None, stand_in=None, paths=(), stood_paths=())

    def replace(self, **changes: Any) -> "Deployment":
        values = {name: getattr(self, name) for name in _FIELDS}
        values.update(changes)
        return Deployment(**values)


# Deployment's fields, in order (its pickled form).
_FIELDS = tuple(f.name for f in dataclass_fields(Deployment))


@dataclass(frozen=True, slots=True)
class SourceFile:
    """What reading one file gave: its format, deployments and file-level problems.

    A file-level problem (unreadable, binary, broken YAML) means no deployment
    could be identified in (part of) the file. ``skipped`` gives the reason
    a file was not examined further. ``notes`` are things a reader should
    know about the file: a file that mentions a vLLM KV option or connector
    but yields no launch (``source.unrecognized``), so that no launch is
    missed silently.
    """

    file: str
    format: str | None
    deployments: tuple[Deployment, ...] = ()
    problems: tuple[Problem, ...] = ()
    skipped: str | None = None
    notes: tuple[Problem, ...] = ()
