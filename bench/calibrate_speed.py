"""Benchmark: calibration observation throughput against ONNX Runtime's histogram collectors.

    python bench/calibrate_speed.py [--batches 1000] [--shape 64 16 28 28] [--bins 2048] [--seed 0]
                                    [--ort-batches N] [--no-ort]

Feeds --batches float32 batches of --shape to one Observer per tensor kind (a signed conv output and a
ReLU output) and prints values per second. The batches cycle through a few seeded random arrays of
growing spread, so the histogram's range grows and it regrids along the way, as in real calibration.
In the same run it times ONNX Runtime's HistogramCollector fed batch by batch (its streaming path) with
its defaults: Entropy (128 bins) and Percentile (2048 bins, on |x|). Wall time on a shared machine is
noisy: compare the ratios printed, not absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from quantcore.calibrate import Observer

Batches = list[npt.NDArray[np.float32]]
_DISTINCT = 8  # distinct arrays cycled through: generating 1000 batches would dominate the run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1000, help="batches observed per tensor (1000)")
    parser.add_argument("--shape", type=int, nargs="+", default=[64, 16, 28, 28], help="batch shape")
    parser.add_argument("--bins", type=int, default=2048, help="observer resolution (2048)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ort-batches", type=int, help="batches for ONNX Runtime (default: --batches)")
    parser.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime comparison")
    return parser.parse_args()


def make_batches(shape: list[int], seed: int) -> dict[str, Batches]:
    rng = np.random.default_rng(seed)
    signed = [rng.standard_normal(shape, dtype=np.float32) * np.float32(1 + k / 4) for k in range(_DISTINCT)]
    return {"conv (signed)": signed, "relu (>= 0)": [np.maximum(b, 0) for b in signed]}


def throughput(feed: Callable[[npt.NDArray[np.float32]], object], batches: Batches, count: int) -> float:
    """Values per second of feeding `count` batches, cycling through `batches`."""
    start = time.perf_counter()
    for i in range(count):
        feed(batches[i % len(batches)])
    return count * batches[0].size / (time.perf_counter() - start)


def ours(batches: Batches, count: int, bins: int) -> float:
    observer = Observer("bench", bins)
    return throughput(observer.observe, batches, count)


def onnxruntime_collector(batches: Batches, count: int, method: str) -> float | None:
    try:
        from onnxruntime.quantization.calibrate import HistogramCollector  # type: ignore[import-untyped]
    except ImportError:
        return None
    bins = 128 if method == "entropy" else 2048  # ONNX Runtime's defaults for each method
    collector = HistogramCollector(method, False, bins, 128, 99.999, "same")

    def feed(batch: npt.NDArray[np.float32]) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a line per call
            collector.collect({"bench": batch})

    return throughput(feed, batches, count)


def main() -> None:
    args = parse_args()
    data = make_batches(args.shape, args.seed)
    ort_count = args.ort_batches or args.batches
    print(f"{args.batches} batches of {'x'.join(map(str, args.shape))} float32 per tensor")
    for kind, batches in data.items():
        rate = ours(batches, args.batches, args.bins)
        print(f"  {kind:14s} fixpoint Observer ({args.bins} bins): {rate / 1e6:8.1f} M values/s")
        for method in [] if args.no_ort else ["entropy", "percentile"]:
            theirs = onnxruntime_collector(batches, ort_count, method)
            if theirs is None:
                print("  onnxruntime is not installed: no comparison")
                break
            print(
                f"  {kind:14s} onnxruntime {method:10s} collector: {theirs / 1e6:8.1f} M values/s"
                f"  (fixpoint is {rate / theirs:.2f}x)"
            )


if __name__ == "__main__":
    main()
