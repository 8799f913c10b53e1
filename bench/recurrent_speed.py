"""Benchmark: the numpy LSTM/SVDF references beside CMSIS-NN compiled for the host (KWS layers).

    python bench/recurrent_speed.py [--repeat 20] [--seed 0] [--rounding double|single] [--cmsis-nn DIR]

Layers (seeded random int8 weights, TFLite-like scales): an LSTM of 49 time steps of 40 features into 64
units (a 1 s MFCC window), int8 and int16, for batch 1 and batch 16 (the reference runs a batch vectorised,
the C one call); an SVDF of 40 features, 128 filters of rank 1 and 8 steps of memory, over 49 streaming
calls. Both sides compute the same call in the same run, so compare the ratio (a shared machine's wall time
is noisy). The results must be byte-identical (exit 1 otherwise). Without a CMSIS-NN checkout the reference
times are printed with the command that provides one.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from quantcore.errors import CmsisNnNotFound
from quantcore.kernels.lstm import (
    Activation,
    LstmGate,
    LstmParams,
    effective_bias_s8,
    effective_bias_s64,
    lstm_unidirectional_s8,
    lstm_unidirectional_s16,
)
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import SvdfParams, svdf_s8
from quantcore.targets import cmsis_nn
from quantcore.verify.host_recurrent import build_recurrent_runner, run_lstm, run_svdf

STEPS, FEATURES, UNITS = 49, 40, 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per side and layer (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="numpy seed of weights and inputs (default 0)")
    parser.add_argument("--rounding", choices=[r.value for r in Rounding], default=Rounding.DOUBLE.value)
    parser.add_argument(
        "--cmsis-nn", metavar="DIR", help="CMSIS-NN checkout (default: FIXPOINT_CMSIS_NN, cache)"
    )
    return parser.parse_args()


def lstm_layer(rng: np.random.Generator, s16: bool, batch: int) -> tuple[np.ndarray, LstmParams]:
    """TFLite-like scales: gate products at 2^-2 of Q31 into Q3.12, cell Q4.11 (cell_scale_power -11)."""
    io = np.int16 if s16 else np.int8
    in_offset, out_zero = (0, 0) if s16 else (128, 3)
    vector_sum: Any = effective_bias_s64 if s16 else effective_bias_s8

    def gate(activation: Activation) -> LstmGate:
        w_in = rng.integers(-128, 128, (UNITS, FEATURES), dtype=np.int8)
        w_h = rng.integers(-128, 128, (UNITS, UNITS), dtype=np.int8)
        bias = rng.integers(-4000, 4000, UNITS).astype(np.int64 if s16 else np.int32)
        shift = -10 if s16 else -2
        return LstmGate(
            w_in, vector_sum(w_in, in_offset, bias), int(rng.integers(1 << 30, 1 << 31)), shift,
            w_h, vector_sum(w_h, -out_zero, None), int(rng.integers(1 << 30, 1 << 31)), shift, activation,
        )  # fmt: skip

    params = LstmParams(
        time_major=False,
        forget_to_cell_multiplier=1 << 30,
        forget_to_cell_shift=-14,
        input_to_cell_multiplier=1 << 30,
        input_to_cell_shift=-16,
        cell_clip=32767,
        cell_scale_power=-11,
        output_multiplier=1441324494,
        output_shift=-14 if s16 else -22,
        output_offset=out_zero,
        forget_gate=gate(Activation.SIGMOID),
        input_gate=gate(Activation.SIGMOID),
        cell_gate=gate(Activation.TANH),
        output_gate=gate(Activation.SIGMOID),
    )
    info = np.iinfo(io)
    return rng.integers(info.min, int(info.max) + 1, (batch, STEPS, FEATURES), dtype=io), params


def timed(call: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    result = call()
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return result, (time.perf_counter() - start) / repeat


def report(name: str, ref_s: float, c_s: float | None) -> None:
    c_text = (
        f"   CMSIS-NN (host build) {c_s * 1e3:8.3f} ms   reference / C = {ref_s / c_s:6.1f}x" if c_s else ""
    )
    print(f"{name:34} reference {ref_s * 1e3:8.3f} ms{c_text}")


def bench_lstm(runner: Any, rng: np.random.Generator, rounding: Rounding, repeat: int) -> bool:
    same = True
    for s16 in (False, True):
        for batch in (1, 16):
            x, params = lstm_layer(rng, s16, batch)
            run = lstm_unidirectional_s16 if s16 else lstm_unidirectional_s8
            ours, ref_s = timed(functools.partial(run, x, params, rounding=rounding), repeat)
            c_s = None
            if runner is not None:
                theirs, elapsed = run_lstm(runner, x, params, repeat=repeat)
                c_s = elapsed / repeat
                same &= np.array_equal(ours.output, theirs.output)
                same &= np.array_equal(ours.cell_state, theirs.cell_state)
            kind = "s16" if s16 else "s8"
            report(f"LSTM {kind} {STEPS}x{FEATURES}->{UNITS} batch {batch}", ref_s, c_s)
    return same


def bench_svdf(runner: Any, rng: np.random.Generator, rounding: Rounding, repeat: int) -> bool:
    features, time_batches, calls = 128, 8, STEPS
    params = SvdfParams(
        rank=1, input_offset=-3, output_offset=2, input_multiplier=1 << 30, input_shift=-9,
        output_multiplier=1 << 30, output_shift=-12,
        input_activation=(-128, 127), output_activation=(-128, 127),
    )  # fmt: skip
    wf = rng.integers(-128, 128, (features, FEATURES), dtype=np.int8)
    wt = rng.integers(-128, 128, (features, time_batches), dtype=np.int8)
    bias = rng.integers(-5000, 5000, features).astype(np.int32)
    state0 = np.zeros((1, features, time_batches), np.int8)
    inputs = rng.integers(-128, 128, (calls, 1, FEATURES), dtype=np.int8)

    def sequence() -> list[np.ndarray]:
        state, outs = state0, []
        for x in inputs:
            out, state = svdf_s8(x, state, wf, wt, bias, params, rounding=rounding)
            outs.append(out)
        return outs

    ours, ref_s = timed(sequence, repeat)
    c_s, same = None, True
    if runner is not None:
        theirs, elapsed = run_svdf(runner, inputs, state0, wf, wt, bias, params, repeat=repeat)
        c_s = elapsed / repeat
        same = np.array_equal(np.stack(ours), theirs.outputs)
    report(f"SVDF s8 {calls} calls {FEATURES}->{features}x{time_batches}", ref_s, c_s)
    return same


def main() -> int:
    args = parse_args()
    rounding = Rounding(args.rounding)
    try:
        runner = build_recurrent_runner(cmsis_nn.locate(args.cmsis_nn), rounding)
    except CmsisNnNotFound as missing:
        print(f"no CMSIS-NN checkout, reference times only: {missing}", file=sys.stderr)
        runner = None
    rng = np.random.default_rng(args.seed)
    print(f"rounding {rounding.value}, {args.repeat} timed calls each; times per call (the whole sequence)")
    same = bench_lstm(runner, rng, rounding, args.repeat) & bench_svdf(runner, rng, rounding, args.repeat)
    if runner is not None:
        print("outputs byte-identical" if same else "OUTPUTS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
