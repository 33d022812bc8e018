"""The only module that imports durable-rules: a small locked driver over its C API.

Why not durable.engine.Host: its timer threads crash the process once states
are deleted, it swallows action exceptions, and it is process-global
(../shared/reference/durable-rules.md). This driver:

- creates one ruleset per Policy, under a process-unique name;
- posts events (one per step) under one fixed session id (never user data,
  so there is never more than one live session and no 32-bit hash collision
  between requests), runs each event's single activation, and deletes the
  state: after each post, or at the end of a session (the posts of one
  decision), with event ids unique within it;
- checks every event before it reaches C: identifier keys, at most 64
  properties, booleans, small integers, and short valid strings only (floats,
  oversized strings and deep objects crash the C core);
- holds one lock per ruleset (the C core never releases the GIL, so threads
  gain nothing and must not interleave a session).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import durable_rules_engine as _dre

__all__ = ["RuleRuntime", "RuntimeFault", "check_event", "load_rulesets"]

_SESSION = "0"
_EVENT_ID = "1"
_NAMES = itertools.count(1)
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MAX_PROPERTIES = 64
_MAX_STRING = 4096
_MAX_ITEMS = 100_000
_INT_BOUND = 2**31
# Event ids within one session state. The C core compares ids by their 32-bit
# FNV-1 hash; the decimal ids 1..479,598 hash apart (the first collision is
# 479,599 with 662,382), so a state is renewed well before that.
_MAX_STATE_IDS = 100_000


class RuntimeFault(Exception):
    """The rule runtime refused or failed an evaluation (an engine bug, never user input)."""


def _check_scalar(key: str, value: Any) -> None:
    kind = type(value)
    if kind is bool:
        return
    if kind is str:
        if len(value) > _MAX_STRING or "\x00" in value:
            raise RuntimeFault(f"fact `{key}` is not a short NUL-free string")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise RuntimeFault(f"fact `{key}` is not valid UTF-8") from None
        return
    if kind is int:
        if not -_INT_BOUND < value < _INT_BOUND:
            raise RuntimeFault(f"fact `{key}` is out of the integer range")
        return
    raise RuntimeFault(f"fact `{key}` has type {kind.__name__}, which the rule runtime cannot take safely")


# Fact names already found to be identifiers (there are a few dozen).
_GOOD_KEYS: set[str] = set()


def check_event(event: dict[str, Any]) -> None:
    """Raise RuntimeFault unless ``event`` is safe to post to the C core."""
    if len(event) > _MAX_PROPERTIES:
        raise RuntimeFault("too many facts in one event")
    for key, value in event.items():
        if key not in _GOOD_KEYS:
            if type(key) is not str or not _KEY.match(key) or key in ("sid", "id"):
                raise RuntimeFault(f"fact name `{key}` is not allowed")
            if len(_GOOD_KEYS) < 4096:
                _GOOD_KEYS.add(key)
        if type(value) is list or type(value) is tuple:
            if len(value) > _MAX_ITEMS:
                raise RuntimeFault(f"fact `{key}` has too many items")
            for item in value:
                if type(item) is not str:
                    raise RuntimeFault(f"fact `{key}` must hold strings")
                _check_scalar(key, item)
        else:
            _check_scalar(key, value)


def _activation(message: str) -> tuple[str, str]:
    """The rule name and the event id of an activation ``{"r12": {"m": {..., "id": "3"}}}``.

    Rule names are the compiler's own (``r`` and digits) and ``id`` is the
    last property of every event this driver posts (a fact may not be named
    ``id``, and a quote inside a string value is escaped), so both are read
    without parsing the whole message; anything else is parsed.
    """
    if message.startswith('{"r'):
        end = message.find('"', 2)
        at = message.rfind('"id": "')
        if end > 2 and at > 0:
            close = message.find('"', at + 7)
            event_id = message[at + 7:close]
            if event_id.isdigit():
                return message[2:end], event_id
    name, body = next(iter(json.loads(message).items()))
    return name, str(body["m"]["id"])


class RuleRuntime:
    """One compiled ruleset inside durable-rules' C core."""

    def __init__(self, definition: dict[str, Any]):
        # Re-entrant: a session holds it across the posts of the table's fill.
        self._lock = threading.RLock()
        self._in_session = False
        self._next_id = 1
        self._acted = False  # an action ran in the live state (so it may be deleted)
        self.name = f"hma_policy_{os.getpid()}_{next(_NAMES)}"
        try:
            # json.dumps copies: durable-rules' Python layer mutates definitions, the C API does not.
            self._handle = _dre.create_ruleset(self.name, json.dumps(definition, ensure_ascii=False))
        except Exception as exc:  # the C core reports definition errors as plain Exception
            raise RuntimeFault(f"the rule runtime rejected the compiled rules: {exc}") from None
        self._closed = False
        _LIVE.add(self)
        # A runtime dropped without close() unloads its ruleset when it is
        # collected (each costs about 185 KiB of the C core's memory, which
        # nothing else would free). Not at exit: a daemon thread may still be
        # in a decision then, and the process's memory goes anyway.
        self._unload = weakref.finalize(self, _delete_ruleset, self._handle)
        self._unload.atexit = False

    def session(self) -> "_Session":
        """Hold the runtime for several posts (the step table's batches at
        load): they share one session state, created by the first post and
        deleted at the end, instead of one state per post (a state created
        and deleted per batch was a fifth of the bundled table's fill). Event
        ids keep counting across the posts, so none repeats within the
        state. Nested sessions are the outer one."""
        return _Session(self)

    def _end_state(self) -> None:
        # Deleting a state in which no action ran crashes the C core; every
        # step has a catch-all rule, so each event runs an action.
        if self._acted and not self._closed:
            _dre.delete_state(self._handle, _SESSION)
        self._acted, self._next_id = False, 1

    def fire(self, event: dict[str, Any]) -> str:
        """Post one event and return the name of the rule whose action ran."""
        return self.fire_many([event])[0]

    def fire_many(self, events: list[dict[str, Any]]) -> list[str]:
        """Post independent events in one batch; the name of the rule that
        ran for each event, in the order of ``events``.

        Every event carries its step's discriminator and every step ends in
        a catch-all rule, so each event runs exactly one action (events are
        consumed by their first action); each activation names its event id.
        """
        for event in events:
            check_event(event)
        with self._lock:
            if self._closed:
                raise RuntimeFault("the policy was closed")
            if self._next_id + len(events) > _MAX_STATE_IDS:
                self._end_state()  # ids stay far below the first 32-bit hash collision
            base = self._next_id
            messages = []
            for index, event in enumerate(events, start=base):
                message = dict(event)
                message["sid"] = _SESSION
                message["id"] = str(index)
                messages.append(message)
            self._next_id = base + len(events)
            state = self._assert(_dre.assert_events, "events", messages)
            fired: list[tuple[str, str]] = []
            try:
                self._run_actions(state, fired)
            finally:
                if fired:
                    self._acted = True
                if not self._in_session:
                    self._end_state()
            names: list[str | None] = [None] * len(events)
            for name, event_id in fired:
                index = int(event_id) - base
                if not 0 <= index < len(events) or names[index] is not None:
                    raise RuntimeFault(f"the rule runtime answered event {event_id} of {len(events)} twice or out of range")
                names[index] = name
            if len(fired) != len(events):
                raise RuntimeFault(f"{len(fired)} rules ran for {len(events)} events")
            return names  # type: ignore[return-value]

    def _assert(self, call: Callable[[Any, str], tuple[int, Any]], what: str, messages: list[dict[str, Any]]) -> Any:
        """Post ``messages`` (events or facts, by ``call``) as one JSON batch;
        the state whose actions are pending. RuntimeFault when the C core
        refuses them."""
        payload = json.dumps(messages, ensure_ascii=False, allow_nan=False)
        try:
            code, state = call(self._handle, payload)
        except Exception as exc:
            raise RuntimeFault(f"the rule runtime failed to take the {what}: {exc}") from None
        if code != 0:
            raise RuntimeFault(f"the rule runtime did not handle the {what} (code {code})")
        return state

    def _run_actions(self, state: Any, fired: list[tuple[str, str]]) -> None:
        """Run every action pending in ``state``, appending (rule name, id
        of the event or fact it ran on) to ``fired`` as each one runs, so
        that the caller sees what ran even when a later action fails. The
        actions only record which rule ran: the state is never changed, so
        there is nothing to write back."""
        result = _dre.start_action_for_state(self._handle, state)
        while result:
            fired.append(_activation(result[1]))
            following = _dre.complete_and_start_action(self._handle, state)
            result = (result[0], following) if following else None

    def match_all(self, facts: list[dict[str, Any]]) -> list[list[str]]:
        """Assert independent facts in one batch and retract them all; for
        each fact, in the order of ``facts``, the names of every rule that
        ran on it (a fact, unlike an event, is not consumed by the first
        action, so every matching rule runs). The ruleset must have a
        catch-all rule for every fact, as :func:`.compiler.compile_policy` gives."""
        for fact in facts:
            check_event(fact)
        out: list[list[str]] = [[] for _ in facts]
        with self._lock:
            if self._closed:
                raise RuntimeFault("the policy was closed")
            if self._in_session:
                raise RuntimeFault("facts cannot be asserted inside a session")
            for start in range(0, len(facts), _MAX_STATE_IDS // 2):
                batch = facts[start:start + _MAX_STATE_IDS // 2]
                messages = [{**fact, "sid": _SESSION, "id": str(index)} for index, fact in enumerate(batch, start=1)]
                state = self._assert(_dre.assert_facts, "facts", messages)
                fired: list[tuple[str, str]] = []
                try:
                    self._run_actions(state, fired)
                finally:
                    if fired:  # the state (and its facts) goes: nothing is kept between batches
                        self._acted = True
                        self._end_state()
                for name, fact_id in fired:
                    index = int(fact_id) - 1
                    if not 0 <= index < len(batch):
                        raise RuntimeFault(f"the rule runtime answered fact {fact_id} of {len(batch)}")
                    out[start + index].append(name)
            if any(not names for names in out):
                raise RuntimeFault("no rule ran for a fact")
            return out

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._unload.detach()
                _dre.delete_ruleset(self._handle)


def load_rulesets(definitions: Iterable[dict[str, Any]]) -> tuple[RuleRuntime, ...]:
    """A runtime for each ruleset definition (a large policy needs several:
    a ruleset holds at most 4,096 rules); none is left loaded when one is refused."""
    runtimes: list[RuleRuntime] = []
    try:
        for definition in definitions:
            runtimes.append(RuleRuntime(definition))
    except BaseException:
        for runtime in runtimes:
            runtime.close()
        raise
    return tuple(runtimes)


def _delete_ruleset(handle: Any) -> None:
    try:
        _dre.delete_ruleset(handle)
    except Exception:  # noqa: BLE001 - a finalizer must not raise; the memory is only lost
        pass


class _Session:
    """RuleRuntime.session as a plain context manager (every decision enters
    one: a generator-based one costs twice as much)."""

    __slots__ = ("runtime", "outer")

    def __init__(self, runtime: RuleRuntime):
        self.runtime = runtime
        self.outer = False

    def __enter__(self) -> None:
        runtime = self.runtime
        runtime._lock.acquire()
        self.outer = runtime._in_session
        if not self.outer:
            runtime._in_session, runtime._next_id, runtime._acted = True, 1, False

    def __exit__(self, *exc: Any) -> None:
        runtime = self.runtime
        try:
            if not self.outer:
                runtime._in_session = False
                runtime._end_state()
        finally:
            runtime._lock.release()


_LIVE: "weakref.WeakSet[RuleRuntime]" = weakref.WeakSet()


_FORK_HELD: list[Any] = []


def _before_fork() -> None:
    # Take every runtime's lock, so that no thread is half-way through a
    # decision (a live session in the C core) when the process is copied.
    for runtime in sorted(list(_LIVE), key=id):
        runtime._lock.acquire()
        _FORK_HELD.append(runtime._lock)


def _after_fork_parent() -> None:
    while _FORK_HELD:
        _FORK_HELD.pop().release()


def _after_fork_child() -> None:
    while _FORK_HELD:
        _FORK_HELD.pop()
    for runtime in list(_LIVE):
        runtime._lock = threading.RLock()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)
