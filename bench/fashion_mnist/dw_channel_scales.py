"""Benchmark: per-channel activation scales into depthwise convolutions (issue 20 item 5), off vs auto.

    python bench/fashion_mnist/dw_channel_scales.py [--models dscnn mbv2 examples/fashion/model.onnx]
        [--calib 100] [--calib-sets 1] [--method minmax] [--test-samples 10000] [--held-out]

For each model (a benchmark net's name, or an .onnx file): `pipeline.quantize` with the default automatic
choices and --dw-channel-scales off, then auto (the default), from the same calibration images, each
scored on the first --test-samples images of t10k: float and int8 top-1, output SQNR over the logits,
arg-max agreement with float, and which tensors auto gave per-channel scales (with the calibration-sample
gain it measured). --held-out scores on the 9,000 train-split images neither trained on nor in the
calibration pool as well (fmnist.held_out).

Calibration sets: set i is images [i * N, (i + 1) * N) of calib_1000.npz, N = --calib (set 0 is
calib_N.npz). With --calib-sets K > 1 the K disjoint sets show how much of a top-1 difference is the
choice of calibration images: per set the images whose int8 class differs between off and auto (how many
each gets right, and the float model's margin between its two highest logits on them), then the mean and
spread of the top-1 and SQNR differences over the sets, and a 95 % bootstrap interval of that mean top-1
difference over the evaluation images (resampled with replacement, seeded): the calibration sets share
the evaluation images, so their spread alone misses how much the difference depends on which images
are scored. Run it from a tree without the option to get that tree's figures alone (printed as
"default").
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import fmnist
import numpy as np

from quantcore import data, pipeline
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.verify.evaluate import float_outputs, int8_outputs
from quantcore.verify.metrics import output_sqnr_db


@dataclasses.dataclass
class Split:
    name: str
    data: data.DataSet
    reference: np.ndarray
    """The float model's logits (N, classes)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["dscnn"])
    parser.add_argument("--calib", type=int, default=100)
    parser.add_argument("--calib-sets", type=int, default=1)
    parser.add_argument("--method", default="minmax", choices=[m.value for m in Method])
    parser.add_argument("--test-samples", type=int, default=10000)
    parser.add_argument("--held-out", action="store_true")
    args = parser.parse_args()
    if args.calib * args.calib_sets > fmnist.CALIB_MAX:
        parser.error(
            f"--calib {args.calib} x --calib-sets {args.calib_sets} exceeds the {fmnist.CALIB_MAX} images"
        )
    cache = fmnist.default_cache()
    has_option = any(f.name == "dw_channel_scales" for f in dataclasses.fields(pipeline.QuantizeOptions))
    modes: dict[str, dict[str, bool | None]] = (
        {"off": {"dw_channel_scales": False}, "auto": {}} if has_option else {"default": {}}
    )
    method = RangeMethod(Method(args.method))
    for name in args.models:
        path = Path(name) if name.endswith(".onnx") else cache / f"{name}.onnx"
        model = pipeline.load_model(path)
        shape = pipeline.first_input_shape(model)
        pool = data.load(cache / "calib_1000.npz", shape)
        splits = [_split(model, "test", data.load(cache / "test.npz", shape).head(args.test_samples))]
        if args.held_out:
            x, y = fmnist.held_out()
            splits.append(_split(model, "held-out", data.DataSet(x, y)))
        differences: dict[str, list[tuple[float, float]]] = {s.name: [] for s in splits}
        per_image: dict[str, list[np.ndarray]] = {s.name: [] for s in splits}
        for index in range(args.calib_sets):
            calib = data.DataSet(pool.x[index * args.calib : (index + 1) * args.calib])
            predictions: dict[str, dict[str, np.ndarray]] = {}
            for label, options in modes.items():
                start = time.perf_counter()
                opts = pipeline.QuantizeOptions(method=method, **options)  # type: ignore[arg-type]
                result = pipeline.quantize(model, calib, opts)
                seconds = time.perf_counter() - start
                for split in splits:
                    q = int8_outputs(result.qgraph, split.data, 256)
                    predictions.setdefault(split.name, {})[label] = q
                    print(f"{path.stem:8} set {index} {label:7} {split.name:8} {_figures(split, q)}")
                print(f"{'':17}quantize {seconds:.1f} s")
                entry = result.document.get("transforms", {}).get("dw_channel_scales", {})
                for tensor, record in entry.get("tensors", {}).items():
                    how = "per channel" if record["per_channel"] else "per tensor"
                    print(f"{'':17}{tensor}: {how} ({record['why']})")
            if has_option:
                for split in splits:
                    off, auto = predictions[split.name]["off"], predictions[split.name]["auto"]
                    differences[split.name].append(_flips(path.stem, index, split, off, auto))
                    y = split.data.y
                    per_image[split.name].append((auto.argmax(1) == y).astype(float) - (off.argmax(1) == y))
        for split in splits:
            if len(differences[split.name]) > 1:
                top1, sqnr = np.array(differences[split.name]).T
                print(
                    f"{path.stem:8} {split.name}: auto - off over {len(top1)} calibration sets: top-1"
                    f" {top1.mean():+.3f} points (sd {top1.std(ddof=1):.3f}, {np.sum(top1 < 0)} sets lower,"
                    f" {np.sum(top1 > 0)} higher), output SQNR {sqnr.mean():+.2f} dB (min {sqnr.min():+.2f});"
                    f" 95 % interval over the images {_interval(np.mean(per_image[split.name], axis=0))}"
                )
    return 0


def _interval(difference: np.ndarray, draws: int = 4000) -> str:
    """95 % bootstrap interval of the mean of `difference` (per image, top-1 points once scaled)."""
    rng = np.random.default_rng(0)
    means = [100 * difference[rng.integers(0, len(difference), len(difference))].mean() for _ in range(draws)]
    low, high = np.percentile(means, [2.5, 97.5])
    return f"[{low:+.3f}, {high:+.3f}] points"


def _split(model: pipeline.LoadedModel, name: str, split: data.DataSet) -> Split:
    return Split(name, split, float_outputs(model.float_model, model.graph, split, 256))


def _figures(split: Split, q: np.ndarray) -> str:
    f, y = split.reference, split.data.y
    assert y is not None
    top1_float, top1_int8 = 100 * np.mean(f.argmax(1) == y), 100 * np.mean(q.argmax(1) == y)
    agreement = 100 * np.mean(q.argmax(1) == f.argmax(1))
    return (
        f"output SQNR {output_sqnr_db([f], [q]):6.2f} dB  top-1 float {top1_float:5.2f} % int8"
        f" {top1_int8:5.2f} %  agreement {agreement:5.2f} %"
    )


def _flips(model: str, index: int, split: Split, off: np.ndarray, auto: np.ndarray) -> tuple[float, float]:
    """Print the images whose class differs between off and auto; return auto - off (top-1 points, dB)."""
    f, y = split.reference, split.data.y
    assert y is not None
    p_off, p_auto = off.argmax(1), auto.argmax(1)
    flipped = p_off != p_auto
    top2 = np.sort(f, axis=1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    margin = margins[flipped]
    gained = int(np.sum(flipped & (p_auto == y)))
    lost = int(np.sum(flipped & (p_off == y)))
    top1 = 100 * (np.mean(p_auto == y) - np.mean(p_off == y))
    sqnr = output_sqnr_db([f], [auto]) - output_sqnr_db([f], [off])
    print(
        f"{model:8} set {index} {split.name}: auto - off top-1 {top1:+.2f} points, SQNR {sqnr:+.2f} dB;"
        f" {int(flipped.sum())} images change class: auto right on {gained}, off right on {lost};"
        f" their float margin median {np.median(margin) if margin.size else 0:.3f}, max"
        f" {margin.max() if margin.size else 0:.3f} (all images: median {np.median(margins):.3f})"
    )
    return float(top1), float(sqnr)


if __name__ == "__main__":
    raise SystemExit(main())
