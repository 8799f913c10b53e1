"""OnnxFloat.for_evaluation: the session it makes afterwards runs on one intra-op thread, and computes
the same activations, to the last bit, as onnxruntime's default pool (one thread per core) with the same
optimizations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.runtime import onnx_float
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("threads") / "small.onnx"
    onnx.save(small_cnn(seed=7), path)
    return path


def test_one_thread_session_gives_the_default_pools_bits(path: Path) -> None:
    default, single = pipeline.load_model(path).float_model, pipeline.load_model(path).float_model
    assert isinstance(default, onnx_float.OnnxFloat) and isinstance(single, onnx_float.OnnxFloat)
    single.for_evaluation()
    default._optimized = True  # the same graph optimizations, onnxruntime's own thread count
    assert single._session.session.get_session_options().intra_op_num_threads == 1
    assert default._session.session.get_session_options().intra_op_num_threads == 0
    name = default.graph.inputs[0]
    x = np.random.default_rng(3).uniform(0, 1, (64, 1, 16, 16)).astype(np.float32)
    expected, got = default.activations({name: x}), single.activations({name: x})
    assert got.keys() == expected.keys()
    for tensor, value in expected.items():
        np.testing.assert_array_equal(got[tensor], value)
