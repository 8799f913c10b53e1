"""Sharded calibration: process-pool shards and torch.distributed ranks give exactly the single-process
result (histograms merge as integer counts on a grid fixed by the union range)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.calibrate.errors import NonFiniteBatchError
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.data import DataSet
from quantcore.passes.equalize import ChannelScaled, equalize
from quantcore.quantize import channel_scales
from tests import needs
from tests.onnx_models import outlier_cnn, small_cnn

METHODS = ["minmax", "percentile", "entropy", "mse"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("shards") / "small.onnx"
    onnx.save(small_cnn(seed=2), path)
    return pipeline.load_model(path)


def _x(n: int = 150) -> np.ndarray:
    # Two halves with different ranges: the shards' histograms sit on different grids before merging.
    rng = np.random.default_rng(5)
    return np.concatenate(
        [rng.uniform(0, 1, (n // 2, 1, 16, 16)), rng.uniform(-2, 3, (n - n // 2, 1, 16, 16))]
    ).astype(np.float32)


def _plan(method: str, workers: int) -> CalibrationPlan:
    return CalibrationPlan(RangeMethod(Method(method)), batch_size=16, workers=workers)


@pytest.mark.parametrize("method", METHODS)
def test_shards_give_exactly_the_single_process_calibration(model: pipeline.LoadedModel, method: str) -> None:
    data = DataSet(_x(), None)  # 150 samples: 10 batches of 16, the last short; shards of 5 and 4 batches
    one, summary = calibrate(model.graph, model.float_model, data, _plan(method, 1))
    for workers in (2, 3):
        many, many_summary = calibrate(model.graph, model.float_model, data, _plan(method, workers))
        assert many.ranges == one.ranges and many.observed == one.observed and many.methods == one.methods
        assert many_summary == summary


def test_shards_merge_the_per_channel_ranges_exactly(model: pipeline.LoadedModel) -> None:
    # The max pool's output (read by the depthwise layer) and relu2 (by the global average pool).
    wanted = channel_scales.possible(model.graph)
    assert wanted == ["pool1", "relu2"]
    # The wide half last, then first: either shard may hold a channel's extremes.
    for x, wide_first in ((_x(), False), (_x()[::-1], True)):
        data = DataSet(np.ascontiguousarray(x), None)
        one, _ = calibrate(model.graph, model.float_model, data, _plan("minmax", 1), wanted)
        for workers in (2, 3):
            many, _ = calibrate(model.graph, model.float_model, data, _plan("minmax", workers), wanted)
            assert list(many.channels) == wanted
            for name in wanted:
                for got, expected in zip(many.channels[name], one.channels[name], strict=True):
                    assert np.array_equal(got, expected)
        # Forward, the first shard alone misses extremes the later ones hold; reversed, it holds them all.
        head = DataSet(np.ascontiguousarray(x[:80]), None)
        first, _ = calibrate(model.graph, model.float_model, head, _plan("minmax", 1), wanted)
        same = all(
            np.array_equal(a, b) for a, b in zip(first.channels["pool1"], one.channels["pool1"], strict=True)
        )
        assert same is wide_first


def test_an_equalized_model_travels_to_the_workers(tmp_path: Path) -> None:
    onnx.save(outlier_cnn(factor=40.0), tmp_path / "outlier.onnx")
    loaded = pipeline.load_model(tmp_path / "outlier.onnx")
    equalized = equalize(loaded.graph)
    scaled = ChannelScaled(loaded.float_model, equalized.divisors)
    data = DataSet(_x(64), None)
    one, _ = calibrate(equalized.graph, scaled, data, _plan("entropy", 1))
    two, _ = calibrate(equalized.graph, scaled, data, _plan("entropy", 2))
    assert two.ranges == one.ranges


def test_a_workers_error_names_the_tensor(model: pipeline.LoadedModel) -> None:
    x = _x(64)
    x[40, 0, 3, 3] = np.nan  # in the second shard
    with pytest.raises(NonFiniteBatchError, match="non-finite"):
        calibrate(model.graph, model.float_model, DataSet(x, None), _plan("minmax", 2))


@pytest.mark.parametrize("method", ["minmax", "entropy"])
def test_torch_distributed_ranks_merge_to_the_single_process_result(
    model: pipeline.LoadedModel, tmp_path: Path, method: str
) -> None:
    needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")
    x = _x(96)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "ranks.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        str(ROOT / "tests" / "calibrate" / "shard_rank.py"),
        str(model.path), str(tmp_path / "x.npy"), str(out), method,
    ]  # fmt: skip
    subprocess.run(command, check=True, env=env, timeout=120, capture_output=True)
    ranks = json.loads(out.read_text())["ranks"]
    one, _ = calibrate(
        model.graph,
        model.float_model,
        DataSet(x, None),
        CalibrationPlan(RangeMethod(Method(method)), batch_size=16),
    )
    assert [r["samples"] for r in ranks] == [96, 96]
    for rank in ranks:
        assert {k: tuple(v) for k, v in rank["ranges"].items()} == dict(one.ranges)
        assert {k: tuple(v) for k, v in rank["observed"].items()} == dict(one.observed)
