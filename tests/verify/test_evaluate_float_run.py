"""evaluate's float run in a second thread: each batch gets its own activations, in order, and no more
than the next batch's run is ever started ahead of the one being consumed (memory stays bounded)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from quantcore.data import DataSet
from quantcore.errors import ModelError
from quantcore.verify.evaluate import _with_float_run


class Doubling:
    """A float model whose one activation is twice its input; it records which batches were run."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.started: list[float] = []
        self.lock = threading.Lock()
        self.fail_on = fail_on

    def activations(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = feeds["input"]
        with self.lock:
            self.started.append(float(x[0, 0]))
        if self.fail_on is not None and float(x[0, 0]) == self.fail_on:
            raise ModelError("doubling.onnx", "onnxruntime failed: seeded")
        return {"out": 2 * x}


def test_each_batch_comes_with_its_own_activations_and_one_run_ahead_at_most() -> None:
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    data = DataSet(x, np.arange(10))
    model = Doubling()
    seen: list[list[float]] = []
    for xs, ys, references in _with_float_run(model, "input", data, 3, False):
        # the batch being consumed and at most the next one have been run
        assert len(model.started) <= len(seen) + 2
        np.testing.assert_array_equal(references["out"], 2 * xs)
        assert ys is not None
        np.testing.assert_array_equal(ys, xs[:, 0].astype(np.int64))
        seen.append(xs[:, 0].tolist())
    assert seen == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert model.started == [0, 3, 6, 9]


def test_an_error_of_the_float_run_reaches_the_caller() -> None:
    data = DataSet(np.arange(6, dtype=np.float32).reshape(6, 1))
    with pytest.raises(ModelError, match="seeded"):
        for _ in _with_float_run(Doubling(fail_on=3), "input", data, 3, False):
            pass
