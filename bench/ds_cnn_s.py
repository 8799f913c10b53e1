"""Benchmark: the numpy reference executor against compiled CMSIS-NN on the ds_cnn_s keyword-spotting network.

    python bench/ds_cnn_s.py [--vectors DIR] [--batch 1000] [--seed 0] [--repeat 1] [--rounding double|single]

Both run the same seeded random int8 inputs in one process run, so the ratio is measured under the
same machine load (wall time on a shared machine is noisy; compare ratios, not absolute times). The
reference runs the whole batch vectorised; the C runner calls CMSIS-NN once per sample and layer, as
firmware does, timing its inference loop only. The outputs must be byte-identical (exit 1 otherwise).
Without a CMSIS-NN checkout the reference time is printed with the command that provides one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network import Network, load_network
from quantcore.errors import CmsisNnNotFound
from quantcore.kernels.requantize import Rounding
from quantcore.targets import cmsis_nn
from quantcore.verify.host_cmsis_nn import HostRun, build_runner, run_network

REPO = Path(__file__).resolve().parents[1]
CASE = Path("arm_ds_cnn_s_s8") / "ds_cnn_s.json"


def parse_args() -> argparse.Namespace:
    default_vectors = os.environ.get("FIXPOINT_VECTORS") or str(REPO.parent / "shared" / "cmsisnn-vectors")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--vectors",
        default=default_vectors,
        help="vector dir (default: $FIXPOINT_VECTORS or ../shared/cmsisnn-vectors beside the repository)",
    )
    parser.add_argument("--batch", type=int, default=1000, help="number of random inputs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="numpy random seed of the inputs (default 0)")
    parser.add_argument("--repeat", type=int, default=1, help="passes over the batch, both sides (default 1)")
    parser.add_argument("--rounding", choices=[r.value for r in Rounding], default=Rounding.DOUBLE.value)
    parser.add_argument(
        "--cmsis-nn", metavar="DIR", help="CMSIS-NN checkout (default: FIXPOINT_CMSIS_NN, cache)"
    )
    return parser.parse_args()


def time_reference(net: Network, x: np.ndarray, rounding: Rounding, repeat: int) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    for _ in range(repeat):
        out = net.run(x, rounding)[-1]
    seconds = time.perf_counter() - start
    print(f"reference: {per_inference(seconds, len(x) * repeat)}  (quantcore numpy, batch vectorised)")
    return out, seconds


def per_inference(seconds: float, count: int) -> str:
    return f"{seconds:8.3f} s for {count} inferences = {seconds / count * 1e3:8.4f} ms per inference"


def compare(reference: np.ndarray, host: HostRun) -> bool:
    c_out = host.outputs[-1]
    if reference.dtype == c_out.dtype and reference.tobytes() == c_out.tobytes():
        print(f"outputs:   byte-identical ({reference.shape[0]} x {reference[0].size} int8 values)")
        return True
    differ = np.argwhere(reference.reshape(len(reference), -1) != c_out.reshape(len(c_out), -1))
    first = tuple(int(i) for i in differ[0]) if differ.size else "dtype/shape"
    print(f"outputs:   DIFFER - {len(differ)} values differ, first at (sample, index) {first}")
    return False


def main() -> int:
    args = parse_args()
    if args.batch < 1 or args.repeat < 1:
        print("ds_cnn_s.py: --batch and --repeat must be at least 1", file=sys.stderr)
        return 2
    rounding = Rounding(args.rounding)
    case_path = Path(args.vectors) / CASE
    if not case_path.is_file():
        print(
            f"ds_cnn_s.py: {case_path} not found; pass --vectors DIR or set FIXPOINT_VECTORS", file=sys.stderr
        )
        return 2
    net = load_network(VectorCase.load(case_path))
    x = np.random.default_rng(args.seed).integers(-128, 128, (args.batch, *net.input_shape), dtype=np.int8)
    print(
        f"ds_cnn_s: {len(net.layers)} layers, input {net.input_shape} -> output {net.layers[-1].output_shape}"
    )
    print(
        f"inputs:    {args.batch} random int8 samples (numpy seed {args.seed}), {args.repeat} pass(es), "
        f"rounding {rounding.value}"
    )

    try:
        checkout = cmsis_nn.locate(args.cmsis_nn)
    except CmsisNnNotFound as missing:
        time_reference(net, x, rounding, args.repeat)
        print(f"CMSIS-NN:  not run - {missing}")
        print(f"to get it: fixpoint cmsis-nn install {cmsis_nn.GIT_URL}")
        return 0
    print(
        f"CMSIS-NN:  {checkout.path} ({checkout.describe or checkout.version}, via {checkout.source}); "
        "host library and runner are built once and cached",
        flush=True,
    )
    runner = build_runner(checkout, rounding)

    reference, ref_s = time_reference(net, x, rounding, args.repeat)
    host = run_network(runner, net, x, args.repeat)
    print(
        f"CMSIS-NN:  {per_inference(host.elapsed_s, host.batch * host.repeat)}  "
        "(host libcmsis-nn.a, one sample per call)"
    )
    print(f"ratio:     reference / CMSIS-NN = {ref_s / host.elapsed_s:.2f}x")
    return 0 if compare(reference, host) else 1


if __name__ == "__main__":
    sys.exit(main())
