"""evaluate's summing thread (verify/evaluate._Beside): calls run in the order submitted, in the
submitter's context, at most `ahead` waiting; an error in one reaches the submitter and stops the rest."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from quantcore.verify.evaluate import _Beside

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def test_calls_run_in_order_on_one_other_thread_in_the_submitters_context() -> None:
    done: list[tuple[int, str, int]] = []

    def call(index: int) -> None:
        time.sleep(0.001 * (index % 3))  # uneven durations: the order still holds
        done.append((index, _SEEN.get(), threading.get_ident()))

    token = _SEEN.set("evaluate's")
    try:
        with _Beside(2) as beside:
            for index in range(20):
                beside.submit(call, index)
    finally:
        _SEEN.reset(token)
    assert [d[0] for d in done] == list(range(20))
    assert {d[1] for d in done} == {"evaluate's"}
    assert len({d[2] for d in done}) == 1 and done[0][2] != threading.get_ident()


def test_no_more_than_ahead_calls_wait() -> None:
    release = threading.Event()
    started: list[int] = []

    def call(index: int) -> None:
        started.append(index)
        release.wait(5)

    submitted = []

    def submit_all(beside: _Beside) -> None:
        for index in range(6):
            beside.submit(call, index)
            submitted.append(index)

    with _Beside(2) as beside:
        submitter = threading.Thread(target=submit_all, args=(beside,))
        submitter.start()
        deadline = time.monotonic() + 10
        while len(submitted) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # time for a third submit to return, if it did not wait
        assert submitted == [0, 1]  # the third submit waits for the first call to end
        release.set()
        submitter.join(5)
    assert started == list(range(6))


def test_an_error_reaches_the_submitter_and_later_calls_do_not_run() -> None:
    ran: list[int] = []

    def call(index: int) -> None:
        if index == 3:
            raise ValueError("layer conv2: the float reference contains NaN")
        ran.append(index)

    with pytest.raises(ValueError, match="layer conv2"), _Beside(1) as beside:
        for index in range(10):
            beside.submit(call, index)
    assert ran == [0, 1, 2]
