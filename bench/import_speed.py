"""Benchmark: import_onnx on a model with megabytes of weights (the figure test_onnx_ops.py once asserted).

    python bench/import_speed.py [--repeat 5]

The model is tests/importers/models.py's megabyte_model: a conv and a fully connected layer, ~2.1 M float
weights (one 8 MB matrix). Prints the best and median wall time of --repeat imports (import_onnx: a forked
child decodes, checks, folds and translates; the weights come back to this process). Vectorised weight
conversion keeps it well under 0.5 s on two shared cores; a per-element Python loop over the weights
takes seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the model lives in the tests

from quantcore.importers import import_onnx  # noqa: E402
from tests.importers.models import megabyte_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="imports timed (default 5)")
    args = parser.parse_args()
    raw, inits = megabyte_model()
    weights = sum(array.size for array in inits.values())
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        import_onnx(raw)
        times.append(time.perf_counter() - start)
    print(f"import_onnx, {len(raw) / 1e6:.1f} MB model, {weights / 1e6:.2f} M weights, {args.repeat} runs:")
    print(f"  best {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
