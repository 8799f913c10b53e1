"""single_threaded: one OpenBLAS thread inside, the count it found restored after - only once the last
Python thread inside has left (quantize scores a candidate in a thread beside bias correction)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from quantcore.kernels import blas


@pytest.fixture
def control() -> Iterator[Callable[[], int]]:
    found = blas._control()
    if found is None:  # numpy built against another BLAS: single_threaded does nothing there
        pytest.skip("numpy's BLAS here is not OpenBLAS: no thread count to set")
    get, set_ = found
    before = get()
    set_(2)
    yield get
    set_(before)


def test_the_count_comes_back_when_the_last_thread_leaves(control: Callable[[], int]) -> None:
    get = control
    entered, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def other() -> None:
        with blas.single_threaded():
            entered.set()
            leave.wait()
        seen.append(get())

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait()
    with blas.single_threaded():
        assert get() == 1
        leave.set()
        thread.join()
        assert seen == [1]  # the other thread left first: this one still runs on one thread
        assert get() == 1
    assert get() == 2
