"""Benchmark: what `fixpoint evaluate` cannot go below, beside how fast it is and how fast it was.

    python bench/evaluate_floor.py --base TREE [--models lenet5 ...] [--samples 10000] [--repeat 2]
                                   [--cache DIR]

Per Fashion-MNIST benchmark net (quantized once by the --base tree with default options, as
bench/evaluate_speed.py does), in the same run:
  base      the whole `fixpoint evaluate` process over --samples images, run from --base (e.g. the code
            before issue 20's work), and its fifth (the issue's "5x faster" target)
  now       the same process run from this checkout
  start-up  the same process over 1 image: interpreter, imports, model import (its child process),
            params and data read - paid whatever the number of images
  float     the float reference alone over --samples images in this process: onnxruntime with
            evaluate's graph optimizations on one intra-op thread in batches of 256, as evaluate runs
            it (in a thread of its own, beside the int8 kernels); evaluate cannot skip it - every
            figure compares against it
  floor     start-up + float: the process cannot end sooner even if the int8 kernels and the figures
            took no time at all (they run beside the float run; a 2-core machine has no third core)
Fastest of --repeat runs for each process figure; the trees are byte-compiled first
(fmnist.byte_compile).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "fashion_mnist"))

import evaluate_speed  # noqa: E402  (bench/ is not a package: this script's folder)
import fmnist  # noqa: E402

BATCH = 256
"""evaluate's float batch on the benchmark nets: verify/evaluate.PART_SAMPLES."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="source tree of the code before")
    parser.add_argument("--models", nargs="+", default=list(evaluate_speed.NETS), choices=evaluate_speed.NETS)
    parser.add_argument("--samples", type=int, default=10000, help="first N test images")
    parser.add_argument("--cache", type=Path, default=fmnist.default_cache(), help="benchmark cache")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each process; the fastest counts")
    return parser.parse_args()


def float_run_seconds(model: Path, data: Path, samples: int) -> float:
    """The float reference over the first `samples` images, as evaluate runs it (for_evaluation)."""
    from quantcore import pipeline

    loaded = pipeline.load_model(model)
    float_model = loaded.float_model
    float_model.for_evaluation()  # type: ignore[union-attr] - an ONNX model: onnxruntime runs it
    with np.load(data) as npz:
        x = npz["x"][:samples]
    name = loaded.graph.inputs[0]
    float_model.activations({name: x[:BATCH]})  # the session made, first-run costs paid
    start = time.perf_counter()
    for begin in range(0, len(x), BATCH):
        float_model.activations({name: x[begin : begin + BATCH]})
    return time.perf_counter() - start


def main() -> int:
    args = parse_args()
    paths = fmnist.write_arrays(args.cache)
    here = HERE.parent
    for tree in (args.base, here):
        fmnist.byte_compile(tree)
    rows = []
    with tempfile.TemporaryDirectory(prefix="evaluate-floor-") as tmp:
        work = Path(tmp)
        for net in args.models:
            model = args.cache / f"{net}.onnx"
            params = work / f"{net}.json"
            evaluate_speed.quantize(args.base, model, paths["calib_100"], params)
            figures: dict[str, float] = {}
            for label, tree, samples in (
                ("base", args.base, args.samples),
                ("now", here, args.samples),
                ("start-up", here, 1),
            ):
                report = work / f"{net}.{label}.json"
                figures[label] = min(
                    evaluate_speed.evaluate(tree, model, params, paths["test"], samples, report, False)[0]
                    for _ in range(args.repeat)
                )
            figures["float"] = min(
                float_run_seconds(model, paths["test"], args.samples) for _ in range(args.repeat)
            )
            rows.append((net, figures))
    print(f"\nfixpoint evaluate over {args.samples} images: process wall seconds (fastest of {args.repeat})")
    print(
        f"{'net':<8}{'base':>8}{'base/5':>8}{'now':>8}{'x':>6}{'start-up':>10}{'float':>8}{'floor':>8}{'base/floor':>12}"
    )
    for net, f in rows:
        floor = f["start-up"] + f["float"]
        print(
            f"{net:<8}{f['base']:8.2f}{f['base'] / 5:8.2f}{f['now']:8.2f}{f['base'] / f['now']:6.1f}"
            f"{f['start-up']:10.2f}{f['float']:8.2f}{floor:8.2f}{f['base'] / floor:12.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
