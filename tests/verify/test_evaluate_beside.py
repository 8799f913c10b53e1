"""evaluate's summing thread (verify/evaluate._Beside): calls run on a worker thread or, where the
submitter would wait, on the submitter; either way in the submitter's context, and their results are
folded in submission order; no more than `ahead` wait; an error reaches the submitter and stops the rest."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from quantcore.verify.evaluate import _Beside

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def test_results_fold_in_submission_order_wherever_the_calls_ran() -> None:
    """The worker is held on each third call: later calls pile up past `ahead` and the submitter runs
    some itself; the folds still come in order, on the submitting thread, each call in its context."""
    ran: dict[int, tuple[str, int]] = {}
    folded: list[tuple[int, int]] = []

    def call(index: int) -> int:
        if index % 3 == 0 and threading.current_thread() is not threading.main_thread():
            time.sleep(0.02)
        ran[index] = (_SEEN.get(), threading.get_ident())
        return index

    token = _SEEN.set("evaluate's")
    try:
        with _Beside(2, lambda index: folded.append((index, threading.get_ident()))) as beside:
            for index in range(30):
                beside.submit(call, index)
    finally:
        _SEEN.reset(token)
    assert [f[0] for f in folded] == list(range(30))
    assert {f[1] for f in folded} == {threading.get_ident()}
    assert {seen for seen, _ in ran.values()} == {"evaluate's"}
    threads = {thread for _, thread in ran.values()}
    assert len(threads) == 2 and threading.get_ident() in threads  # the worker's and the submitter's


def test_past_ahead_the_submitter_runs_the_waiting_calls_then_waits() -> None:
    """The worker is held on call 0: submit 2 runs calls 2 and 1 on the submitting thread, then waits for
    call 0 (the results it holds stay within `ahead` + 1), and the folds follow in order."""
    release = threading.Event()
    where: dict[int, str] = {}
    submitted: list[int] = []
    folded: list[int] = []

    def call(index: int) -> int:
        if threading.current_thread().name.startswith("fixpoint-sums"):
            where[index] = "worker"
            release.wait(10)
        else:
            where[index] = "submitter"
        return index

    def submit_all(beside: _Beside) -> None:
        for index in range(6):
            beside.submit(call, index)
            submitted.append(index)

    with _Beside(2, folded.append) as beside:
        submitter = threading.Thread(target=submit_all, args=(beside,))
        submitter.start()
        deadline = time.monotonic() + 10
        while len(where) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # time for submit 2 to return, if it did not wait
        assert submitted == [0, 1]
        assert where == {0: "worker", 2: "submitter", 1: "submitter"}
        assert list(where) == [0, 2, 1]  # the latest first: the worker's queue keeps its oldest
        release.set()
        submitter.join(10)
    assert submitted == folded == list(range(6))


def test_help_runs_a_waiting_call_here() -> None:
    release = threading.Event()

    def call(index: int) -> int:
        if threading.current_thread() is not threading.main_thread():
            release.wait(10)
        return index

    folded: list[int] = []
    with _Beside(5, folded.append) as beside:
        beside.submit(call, 0)  # the worker takes it and waits
        beside.submit(call, 1)
        deadline = time.monotonic() + 10
        while not beside._pending[0].future.running() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert beside.help()  # call 1 runs here
        assert not beside.help()  # nothing left that the worker has not started
        release.set()
    assert folded == [0, 1]


def test_an_error_reaches_the_submitter_and_stops_the_rest() -> None:
    ran: list[int] = []

    def call(index: int) -> int:
        if index == 3:
            raise ValueError("layer conv2: the float reference contains NaN")
        ran.append(index)
        return index

    folded: list[int] = []
    with pytest.raises(ValueError, match="layer conv2"), _Beside(1, folded.append) as beside:
        for index in range(10):
            beside.submit(call, index)
    count = len(ran)
    time.sleep(0.05)
    assert len(ran) == count  # nothing runs after the error reached the submitter
    assert 3 not in ran and {0, 1, 2} <= set(ran)
    assert folded == [0, 1, 2]  # nothing after the failed call is folded
