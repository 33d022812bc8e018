"""The service's settings, and the policy it decides with.

Settings reach each worker process through one environment variable
(:data:`SETTINGS_VARIABLE`, JSON), since uvicorn starts workers as new
processes that import the application by name.

The policy is replaced whole: :meth:`PolicyHolder.reload` loads and checks
the new rules completely (in a thread, while requests go on being decided
with the old ones), and only then swaps the one reference every request
reads. Rules that do not load leave the old policy in place, and the reason
is logged. Decisions run on the event loop's thread without awaiting, so no
request is ever between the two policies, and the old one can be closed at
once. With several workers, each reads its rules from a copy
(snapshot.py), so that a worker started later serves the rules that loaded
last.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import HMAPolicyError
from ..core.policies import PolicySet
from ..core.policy import Policy
from ..policyref import resolve
from .snapshot import Snapshots

__all__ = ["Settings", "PolicyHolder", "SETTINGS_VARIABLE", "DEFAULT_MAX_BODY"]

SETTINGS_VARIABLE = "HMA_POLICY_SERVER_SETTINGS"
DEFAULT_MAX_BODY = 1 << 20

log = logging.getLogger("hma_policy.server")


@dataclass(frozen=True)
class Settings:
    """``rules``: a rules directory (None: the bundled rules); ``max_body``:
    the largest request body read, in bytes; ``snapshots``: where the
    workers of a service with several keep the copies of the rules they
    serve (None: the rules are read from ``rules`` itself)."""

    rules: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    snapshots: str | None = None

    def to_environment(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_environment(cls) -> "Settings":
        text = os.environ.get(SETTINGS_VARIABLE)
        return cls(**json.loads(text)) if text else cls()


class PolicyHolder:
    """The current policy (None until the first load), and its reloads.
    With ``snapshots``, rules are read from copies of the directory
    (snapshot.py): the one published last at start-up, a new one on reload."""

    def __init__(self, rules: str | None, policy: PolicySet | None = None,
                 on_change: Callable[[PolicySet | None, PolicySet | None], None] | None = None,
                 snapshots: str | None = None):
        self.rules = rules
        self.policy = policy
        self._on_change = on_change
        self._snapshots = Snapshots(snapshots) if snapshots is not None else None
        self._lock = asyncio.Lock()
        self.source = policy.source if policy is not None else None  # where the rules come from, as /readyz says

    def load(self) -> PolicySet:
        """Load the rules (raises PolicyError, or PolicyRefError for a
        directory that is gone) and make them current: with snapshots, the
        copy published last, if there is one."""
        current = self._snapshots.current() if self._snapshots is not None else None
        policy, source = self._load(current)
        self.adopt(policy, source)
        return policy

    def publish_first(self) -> None:
        """With snapshots: copy the rules, check that they load, and publish
        the copy, which the workers then start from (raises as :meth:`load`).
        The bundled rules are read in place: nothing to copy."""
        if self._snapshots is not None and resolve(self.rules).directory is not None:
            policy, _ = self._load()
            policy.close()

    async def reload(self) -> bool:
        """Load the rules again, off the event loop; True when the new policy
        replaced the old one. Reloads run one at a time."""
        async with self._lock:
            try:
                policy, source = await asyncio.get_running_loop().run_in_executor(
                    None, self._load)
            except Exception as exc:  # noqa: BLE001 - whatever stops the load, the old policy stays
                problems = [p.render() for p in exc.problems][:20] if isinstance(exc, HMAPolicyError) else \
                    [f"{type(exc).__name__}: {exc}"[:500]]
                log.error("policy reload failed; the old policy stays in force",
                          extra={"fields": {"event": "reload", "result": "failed", "rules": self.rules or "bundled",
                                            "problems": problems, "digest": self.policy.digest if self.policy else None}})
                if self._on_change is not None:
                    self._on_change(self.policy, None)
                return False
            self.adopt(policy, source)
            return True

    def _load(self, copy: Path | None = None) -> tuple[PolicySet, str]:
        """The policies ``rules`` names: each deployment decided for its own
        release (its ``vllm_version``, or its image tag in a review), unless
        the reference fixes one (``vllm:0.21.0``). Read from ``copy``, a
        published copy of the directory; else, with snapshots, from a new
        copy, published once it loads."""
        ref = resolve(self.rules)
        why = f"rules {ref.name}" if ref.release else None  # why the release, when the reference fixes it
        if self._snapshots is None or ref.directory is None:  # the bundled rules do not change
            policy = PolicySet(ref.directory, release=ref.release, source=why)
            return policy, policy.source
        fresh = copy is None
        if copy is None:
            copy = self._snapshots.copy(ref.directory)
        try:
            policy = PolicySet(copy, release=ref.release, source=why)
        except BaseException:
            if fresh:
                self._snapshots.discard(copy)
            raise
        if fresh and self.policy is not None and policy.digest == self.policy.digest:
            # The same rules again (a reload sent on a timer, say): the policy in force stays, and no
            # copy is kept, so that copies grow with the edits, not with the reloads.
            policy.close()
            self._snapshots.discard(copy)
            return self.policy, self.source or str(ref.directory)
        if fresh:
            self._snapshots.publish(copy)
        return policy, str(ref.directory)  # the directory the copy was made of, as a policy read from it says

    def adopt(self, policy: Policy | PolicySet, source: str | None = None) -> None:
        """Make ``policy`` current (closing the one it replaces), and log it;
        ``source``: where its rules come from (default: its own source)."""
        if isinstance(policy, Policy):
            policy = PolicySet.wrap(policy)
        old, self.policy = self.policy, policy
        self.source = source or policy.source
        if self._on_change is not None:
            self._on_change(old, policy)
        log.info("policy loaded", extra={"fields": {
            "event": "reload" if old is not None else "load", "result": "loaded", "rules": self.rules or "bundled",
            "digest": policy.digest, "previous": old.digest if old is not None else None}})
        if old is not None and old is not policy:
            old.close()
