"""Concurrency and isolation: shared policies, side-by-side policies, fork,
and the isolation mode's worker dying mid-stream.

A Policy is documented as safe to share between threads and to load side by
side with others (README, Python API). Every decision made concurrently must
equal the one made alone; a Policy closed under its users must fail their
calls cleanly. hma_policy.isolation.IsolatedPolicy must turn a worker killed
by SIGSEGV or SIGKILL, or hung, into an IsolationError for the call in
flight, and answer the next call from a new worker.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle  # our own forked children's answers, read back
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import hma_policy
from hma_policy.isolation import IsolatedPolicy, IsolationError

from compare import answer as whole_answer
from strategies import RandomPicker, document

DOCUMENTS = [document(RandomPicker(random.Random(seed)), max_nodes=20) for seed in range(600)]


def answer(policy, doc):
    """A comparable answer: the Decision's contract, or the input problems."""
    try:
        return policy.decide(doc).to_dict()
    except hma_policy.InputError as exc:
        return ("input", [(p.code, p.path, p.message) for p in exc.problems])


@pytest.fixture(scope="module")
def sequential():
    policy = hma_policy.load_policy(None, memo=False)
    try:
        yield [answer(policy, doc) for doc in DOCUMENTS]
    finally:
        policy.close()


@pytest.mark.parametrize("memo", [True, False], ids=["memo", "nomemo"])
def test_threads_sharing_one_policy_get_the_sequential_answers(sequential, memo):
    policy = hma_policy.load_policy(None, memo=memo)
    try:
        def work(offset):
            order = list(range(len(DOCUMENTS)))
            random.Random(offset).shuffle(order)
            return [(i, answer(policy, DOCUMENTS[i])) for i in order]

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(8)))
        for run in results:
            for index, got in run:
                assert got == sequential[index], DOCUMENTS[index]
    finally:
        policy.close()


def test_the_default_policy_is_built_once_under_contention(sequential):
    barrier = threading.Barrier(8)

    def work(offset):
        barrier.wait()
        return [answer(hma_policy, DOCUMENTS[i]) for i in range(offset, len(DOCUMENTS), 8)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        for offset, run in enumerate(pool.map(work, range(8))):
            assert run == sequential[offset::8]


def test_policies_side_by_side_in_threads(sequential):
    policies = [hma_policy.load_policy(None, memo=bool(i % 2)) for i in range(4)]
    try:
        def work(i):
            return [answer(policies[i], doc) for doc in DOCUMENTS]

        with ThreadPoolExecutor(max_workers=4) as pool:
            for run in pool.map(work, range(4)):
                assert run == sequential
    finally:
        for policy in policies:
            policy.close()


def test_closing_a_policy_under_its_users_fails_their_calls_cleanly():
    policy = hma_policy.load_policy(None, memo=False)
    errors: list[BaseException] = []
    answered = 0
    stop = threading.Event()

    def work():
        nonlocal answered
        while not stop.is_set():
            for doc in DOCUMENTS[:50]:
                try:
                    policy.decide(doc)
                    answered += 1
                except hma_policy.InputError:
                    pass
                except hma_policy.HMAPolicyError as exc:  # closed: a clean, typed error
                    errors.append(exc)
                    return
                except BaseException as exc:  # noqa: BLE001 - anything else is the finding
                    errors.append(exc)
                    return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    policy.close()
    time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert answered > 0
    assert errors, "calls after close() must fail"
    assert all(isinstance(e, hma_policy.HMAPolicyError) for e in errors), errors
    assert all(e.problems[0].code.startswith("engine.") for e in errors), errors


def _decide_in_child(queue, indexes):
    queue.put([answer(hma_policy, DOCUMENTS[i]) for i in indexes])


def test_fork_while_other_threads_decide(sequential):
    # A child forked while another thread is inside decide() must not inherit
    # a held lock (the rule runtime's, the default policy's, a cache's): each
    # child decides once and reports; a child that hangs is killed by its alarm after 3 s.
    shared = hma_policy.load_policy(None)
    stop = threading.Event()

    busy = {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}

    def churn(policy):
        while not stop.is_set():
            policy.decide(busy)  # as tight as a caller can loop: locks are held most of the time

    churners = [threading.Thread(target=churn, args=(p,)) for p in (hma_policy, shared)]
    for thread in churners:
        thread.start()
    hung, wrong = 0, 0
    try:
        for attempt in range(20):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: no pytest machinery, only os._exit
                os.close(read_end)
                signal.alarm(3)
                try:
                    got = (answer(hma_policy, DOCUMENTS[attempt]), answer(shared, DOCUMENTS[attempt]))
                    os.write(write_end, pickle.dumps(got))
                finally:
                    os._exit(0)
            os.close(write_end)
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not data:
                hung += 1
                continue
            if pickle.loads(data) != (sequential[attempt], sequential[attempt]):
                wrong += 1
    finally:
        stop.set()
        for thread in churners:
            thread.join()
        shared.close()
    assert (hung, wrong) == (0, 0), f"{hung} of 20 forked children hung, {wrong} answered wrongly"


def test_decisions_in_spawned_processes(sequential):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    chunks = [list(range(i, 120, 3)) for i in range(3)]
    children = [context.Process(target=_decide_in_child, args=(queue, chunk)) for chunk in chunks]
    for child in children:
        child.start()
    try:
        results = [queue.get(timeout=60) for _ in children]
    finally:
        for child in children:
            child.join(30)
            if child.is_alive():
                child.terminate()
    assert all(child.exitcode == 0 for child in children)
    expected = sorted(repr(sequential[i]) for chunk in chunks for i in chunk)
    assert sorted(repr(r) for result in results for r in result) == expected


# ---------------------------------------------------------------------------
# Isolation mode
# ---------------------------------------------------------------------------


@pytest.fixture
def isolated():
    policy = IsolatedPolicy(timeout=30)
    yield policy
    policy.close()


def test_isolated_decisions_equal_in_process_decisions(isolated):
    policy = hma_policy.load_policy(None)
    try:
        for doc in DOCUMENTS[:200]:
            assert whole_answer(isolated, doc) == whole_answer(policy, doc)  # steps too
        assert isolated.digest == policy.digest
    finally:
        policy.close()


def _kill_mid_request(isolated, sig):
    """Stop the worker, send a request, kill the worker while the request is in flight."""
    pid = isolated.pid
    os.kill(pid, signal.SIGSTOP)
    outcome: dict = {}

    def call():
        try:
            outcome["decision"] = isolated.decide(DOCUMENTS[1])
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome["error"] = exc

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)  # the request is written into the pipe; the caller waits for the answer
    assert caller.is_alive()
    os.kill(pid, sig)
    os.kill(pid, signal.SIGCONT)
    caller.join(30)
    assert not caller.is_alive()
    return pid, outcome


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT], ids=["SIGSEGV", "SIGKILL", "SIGABRT"])
def test_a_worker_killed_mid_request_is_an_error_then_a_new_worker_answers(isolated, sig):
    before = isolated.decide(DOCUMENTS[1])
    pid, outcome = _kill_mid_request(isolated, sig)
    assert "error" in outcome, outcome
    error = outcome["error"]
    assert isinstance(error, IsolationError)
    assert error.problems[0].code == "engine.worker_died"
    assert signal.Signals(sig).name in error.problems[0].message
    after = isolated.decide(DOCUMENTS[1])
    assert after == before
    assert isolated.pid != pid
    assert isolated.restarts == 1


def test_a_worker_killed_between_requests_is_replaced_transparently(isolated):
    first = isolated.decide(DOCUMENTS[2])
    pid = isolated.pid
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    # No request was in flight: nothing is lost, the next call gets a new worker.
    assert isolated.decide(DOCUMENTS[2]) == first
    assert isolated.pid != pid


def test_a_hung_worker_times_out_then_a_new_worker_answers():
    policy = IsolatedPolicy(timeout=1.0)
    try:
        expected = policy.decide(DOCUMENTS[3])
        pid = policy.pid
        os.kill(pid, signal.SIGSTOP)  # a hang in C looks like this from outside
        started = time.monotonic()
        with pytest.raises(IsolationError) as info:
            policy.decide(DOCUMENTS[3])
        assert info.value.problems[0].code == "engine.worker_timeout"
        assert time.monotonic() - started < 20
        assert policy.decide(DOCUMENTS[3]) == expected
        assert policy.pid != pid
    finally:
        policy.close()


def test_crashes_under_concurrent_callers(isolated):
    # Several threads share the isolated policy while the worker is killed
    # repeatedly: every call answers correctly or raises IsolationError.
    reference = hma_policy.load_policy(None)
    expected = [answer(reference, doc) for doc in DOCUMENTS[:100]]
    reference.close()
    failures: list = []
    crashes = []
    stop = threading.Event()

    def work(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            i = rng.randrange(100)
            try:
                got = answer(isolated, DOCUMENTS[i])
            except IsolationError:
                crashes.append(i)
                continue
            if got != expected[i]:
                failures.append((i, got))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(5):
        time.sleep(0.3)
        pid = isolated.pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGSEGV)
            except ProcessLookupError:
                pass
    time.sleep(0.3)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert not failures
    assert answer(isolated, DOCUMENTS[5]) == expected[5]


def test_isolated_policy_reports_invalid_rules(tmp_path):
    (tmp_path / "decision.yaml").write_text("kind: rules\nruleset: decision\nsteps: []\n", encoding="utf-8")
    with pytest.raises(hma_policy.PolicyError):
        IsolatedPolicy(tmp_path)


def test_isolated_policy_after_close():
    policy = IsolatedPolicy()
    pid = policy.pid
    policy.close()
    with pytest.raises(IsolationError):
        policy.decide({})
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # the worker was reaped, not left a zombie


# ---------------------------------------------------------------------------
# decide() from a signal handler
# ---------------------------------------------------------------------------

SIGNAL_REENTRY = r"""
import signal, sys
import hma_policy
from hma_policy.core import policies

raised = []
real_init = policies.PolicySet.__init__

def loading(self, *args, **kwargs):
    if not raised:  # once: the handler runs while this thread holds the loader's lock
        raised.append(True)
        signal.raise_signal(signal.SIGALRM)
    real_init(self, *args, **kwargs)

answers = []
signal.signal(signal.SIGALRM, lambda *a: answers.append(hma_policy.decide({}).outcome))
policies.PolicySet.__init__ = loading
print(hma_policy.decide({}).outcome, answers)
"""


def test_decide_from_a_signal_handler_during_the_first_load_does_not_deadlock():
    # The bundled policy set is loaded under a lock on first use; a handler
    # that decides while the same thread holds it used to wait forever.
    result = subprocess.run([sys.executable, "-c", SIGNAL_REENTRY], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "enabled ['enabled']"
