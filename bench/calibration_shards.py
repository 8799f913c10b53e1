"""Sharded calibration: wall time of one process against N, and the proof that the results are equal.

    python bench/calibration_shards.py [--model PATH] [--calib PATH] [--repeat 4] [--workers 2]
                                       [--method entropy]

Defaults to the Fashion-MNIST MobileNetV2-like net and its 1,000 calibration images repeated 4 times
(bench/fashion_mnist/train.py makes them). The machine is shared: compare the two figures of one run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.data import DataSet

CACHE = Path.home() / ".cache" / "fixpoint" / "bench" / "fashion_mnist"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=CACHE / "mbv2.onnx")
    parser.add_argument("--calib", type=Path, default=CACHE / "calib_1000.npz")
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--method", default="entropy", choices=[m.value for m in Method])
    args = parser.parse_args()
    if not args.model.exists() or not args.calib.exists():
        print(f"skipped: {args.model} or {args.calib} missing (run bench/fashion_mnist/train.py)")
        return 0
    model = pipeline.load_model(args.model)
    with np.load(args.calib) as npz:
        data = DataSet(np.concatenate([npz["x"]] * args.repeat), None)
    results, seconds = [], []
    for workers in (1, args.workers):
        plan = CalibrationPlan(RangeMethod(Method(args.method)), workers=workers)
        start = time.perf_counter()
        calibration, _ = calibrate(model.graph, model.float_model, data, plan)
        seconds.append(time.perf_counter() - start)
        results.append(calibration)
        print(f"{workers} worker(s): {seconds[-1]:.2f} s for {len(data)} samples ({args.method})")
    equal = results[0].ranges == results[1].ranges and results[0].observed == results[1].observed
    print(f"speed-up {seconds[0] / seconds[1]:.2f}x; ranges and observed extremes identical: {equal}")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
