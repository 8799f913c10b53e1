"""OnnxFloat.reusing: a batch run again within it gets the first run's outputs - the same bits as a run
of its own, read-only - and outputs past REUSE_BYTES are not kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.runtime import onnx_float
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path: Path = tmp_path_factory.mktemp("reuse") / "small.onnx"
    onnx.save(small_cnn(seed=5), path)
    return pipeline.load_model(path)


def _batch(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, (8, 1, 16, 16)).astype(np.float32)


def test_a_batch_run_again_gets_the_same_bits_in_arrays_of_its_own(model: pipeline.LoadedModel) -> None:
    float_model = model.float_model
    assert isinstance(float_model, onnx_float.OnnxFloat)
    name = model.graph.inputs[0]
    fresh = float_model.activations({name: _batch(1)})
    with float_model.reusing():
        first = float_model.activations({name: _batch(1)})
        output = model.graph.outputs[0]
        with pytest.raises(ValueError, match="read-only"):
            first[output][...] = 0  # shared with the next caller of this batch: not to be written
        again = float_model.activations({name: _batch(1)})
        other = float_model.activations({name: _batch(2)})
        assert len(float_model._kept or {}) == 2
    assert float_model._kept is None  # nothing kept after the block
    assert again.keys() == fresh.keys()
    for tensor in fresh:
        assert again[tensor].dtype == fresh[tensor].dtype
        np.testing.assert_array_equal(again[tensor], fresh[tensor])
    assert not np.array_equal(other[output], fresh[output])


def test_outputs_past_the_bound_are_not_kept(
    model: pipeline.LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    float_model = model.float_model
    assert isinstance(float_model, onnx_float.OnnxFloat)
    name = model.graph.inputs[0]
    one = sum(v.nbytes for v in float_model._run({name: _batch(3)}).values())
    monkeypatch.setattr(onnx_float, "REUSE_BYTES", one + one // 2)  # room for one batch's outputs
    with float_model.reusing():
        float_model.activations({name: _batch(3)})
        float_model.activations({name: _batch(4)})
        assert float_model._kept is not None and len(float_model._kept) == 1
        assert float_model._kept_bytes == one
        fresh = float_model.activations({name: _batch(4)})
    np.testing.assert_array_equal(
        fresh[model.graph.outputs[0]], float_model.activations({name: _batch(4)})[model.graph.outputs[0]]
    )
