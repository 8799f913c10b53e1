"""Observers: exact statistics, exact order-independent merging, serialisation, bad input."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from quantcore.calibrate import (
    EmptyObserverError,
    NonFiniteBatchError,
    Observer,
    ObserverFormatError,
    ObserverMismatchError,
    load_npz,
    save_npz,
)
from quantcore.calibrate.grid import bin_of
from quantcore.errors import QuantcoreError
from tests.calibrate.samples import observed


def test_count_min_max_zeros_of_a_known_array() -> None:
    obs = observed(np.array([[0.5, -2.25, 0.0], [7.0, 0.0, -0.0]], dtype=np.float32), "conv1")
    assert (obs.count, obs.min, obs.max, obs.histogram().zeros) == (6, -2.25, 7.0, 3)


def test_statistics_accumulate_over_batches() -> None:
    obs = Observer("x")
    obs.observe([1.0, 2.0])
    obs.observe(np.array([-3.5], dtype=np.float64))
    obs.observe(np.empty((0, 4), dtype=np.float32))  # an empty batch changes nothing
    assert (obs.count, obs.min, obs.max) == (3, -3.5, 2.0)


def shards(seed: int) -> list[np.ndarray]:
    """Batches whose ranges differ by orders of magnitude, so every merge has to regrid."""
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal(5000) * 0.01).astype(np.float32),
        (rng.standard_normal(3000) * 100).astype(np.float32),
        np.maximum(rng.standard_normal(4000), 0).astype(np.float32),  # ReLU: many exact zeros
        rng.uniform(1000, 1001, 2000).astype(np.float32),
        -rng.uniform(0, 5e-30, 1000).astype(np.float32),
    ]


def exact(observer: Observer) -> str:
    """The observer as text: equal texts mean bit-identical state (-0.0 and 0.0 differ here)."""
    return json.dumps(observer.to_dict())


def merged(observers: list[Observer]) -> Observer:
    total = Observer(observers[0].name)
    for o in observers:
        total.merge(o)
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_merge_of_two_halves_equals_the_whole_in_either_order(seed: int) -> None:
    data = np.concatenate(shards(seed))
    np.random.default_rng(seed).shuffle(data)
    whole = observed(data)
    a, b = observed(data[: data.size // 2]), observed(data[data.size // 2 :])
    ab, ba = merged([a, b]), merged([b, a])
    assert exact(ab) == exact(ba) == exact(whole)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_batching_and_merge_order_gives_the_same_observer(seed: int) -> None:
    batches = shards(seed)
    whole = observed(np.concatenate(batches))
    order = np.random.default_rng(seed).permutation(len(batches))
    sequential = Observer("t")
    for i in order:
        sequential.observe(batches[i])
    per_shard = [observed(batches[i]) for i in order]
    tree = merged([merged(per_shard[:2]), merged(per_shard[2:])])
    assert exact(sequential) == exact(whole) == exact(tree) == exact(merged(per_shard[::-1]))


def test_negative_zero_does_not_make_the_merge_order_visible() -> None:
    a, b = observed(np.array([-0.0, 1.0], dtype=np.float32)), observed(np.array([0.0, 2.0], dtype=np.float32))
    assert exact(merged([a, b])) == exact(merged([b, a]))


def test_counts_equal_binning_every_value_on_the_final_grid() -> None:
    data = np.concatenate(shards(5))
    obs = observed(data)
    h = obs.histogram()
    indices = np.array([bin_of(float(v), h.exponent) for v in data]) - h.first
    np.testing.assert_array_equal(h.counts, np.bincount(indices, minlength=h.counts.size))
    assert h.zeros == np.count_nonzero(data == 0) > 0


def test_resolution_between_bins_and_twice_bins() -> None:
    h = observed(np.random.default_rng(0).standard_normal(100_000), bins=512).histogram()
    assert 512 < h.counts.size <= 1024
    assert h.counts.size * h.width >= h.max - h.min


def test_merging_an_empty_observer_changes_nothing() -> None:
    obs = observed([1.0, -1.0])
    before = obs.to_dict()
    obs.merge(Observer("t"))
    empty = Observer("t")
    empty.merge(obs)
    assert obs.to_dict() == before and empty == obs


def test_merge_refuses_another_tensor_or_resolution() -> None:
    with pytest.raises(ObserverMismatchError, match=r"'conv2'.*'conv1'"):
        Observer("conv1").merge(Observer("conv2"))
    with pytest.raises(ObserverMismatchError, match="1024 bins"):
        Observer("conv1").merge(Observer("conv1", bins=1024))


def test_dict_round_trip_through_json() -> None:
    obs = observed(np.concatenate(shards(0)), "layer2.relu")
    restored = Observer.from_dict(json.loads(json.dumps(obs.to_dict())))
    assert restored == obs and restored.to_dict() == obs.to_dict()
    assert Observer.from_dict(Observer("e").to_dict()) == Observer("e")


def test_npz_round_trip_of_several_observers() -> None:
    observers = [observed(b, f"t{i}") for i, b in enumerate(shards(1))] + [Observer("never fed")]
    buffer = io.BytesIO()
    save_npz(buffer, observers)
    buffer.seek(0)
    loaded = load_npz(buffer)
    assert list(loaded) == [o.name for o in observers]
    assert all(loaded[o.name] == o for o in observers)


def test_npz_refuses_two_observers_of_one_tensor() -> None:
    with pytest.raises(ObserverFormatError, match="'x'"):
        save_npz(io.BytesIO(), [Observer("x"), Observer("x")])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "version"),
        ({"exponent": -30}, "not the canonical grid"),
        ({"first": 0}, "from the bin of min"),
        ({"zeros": 10**6}, "zeros do not fit"),
        ({"counts": "abc"}, "counts"),
        ({"min": math.nan}, "finite"),
    ],
)
def test_malformed_records_are_rejected_with_the_tensor_name(change: dict[str, object], message: str) -> None:
    record = observed([0.0, 1.0, -3.0], "conv3").to_dict() | change
    with pytest.raises(ObserverFormatError, match=f"'conv3'.*{message}"):
        Observer.from_dict(record)


def test_a_batch_with_nan_and_inf_names_the_tensor_and_counts_them() -> None:
    obs = observed([1.0, 2.0], "block3.conv2")
    before = obs.to_dict()
    bad = np.ones((2, 8), dtype=np.float32)
    bad[0, :3] = np.nan
    bad[1, 5] = np.inf
    bad[1, 6] = -np.inf
    with pytest.raises(NonFiniteBatchError, match=r"'block3\.conv2'.* 5 non-finite value\(s\)") as caught:
        obs.observe(bad)
    assert (caught.value.tensor, caught.value.non_finite) == ("block3.conv2", 5)
    assert isinstance(caught.value, QuantcoreError)
    assert obs.to_dict() == before  # the bad batch left no trace


def test_float64_beyond_float32_range_is_non_finite() -> None:
    with pytest.raises(NonFiniteBatchError, match="1 non-finite"):
        Observer("big").observe(np.array([1.0, 1e39]))


def test_extremes_of_float32_do_not_overflow_the_check() -> None:
    top = float(np.finfo(np.float32).max)
    obs = observed(np.array([top, top], dtype=np.float32))
    assert obs.max == top


def test_an_empty_observer_names_the_tensor() -> None:
    obs = Observer("head.fc")
    assert obs.count == 0
    with pytest.raises(EmptyObserverError, match=r"'head\.fc': no calibration values"):
        obs.histogram()
    with pytest.raises(EmptyObserverError, match=r"'head\.fc'"):
        _ = obs.min


@pytest.mark.parametrize("bins", [0, -3, 2.5, True])
def test_bins_must_be_a_positive_integer(bins: object) -> None:
    with pytest.raises(QuantcoreError, match="'t': bins"):
        Observer("t", bins)  # type: ignore[arg-type]
