"""Seeded random calls of the LSTM and SVDF kernels with their saturation and rounding edges forced.

Shared by the reference's own tests and the differential tests against compiled CMSIS-NN. Edges:
- inputs, states and weights pinned to the type's extremes in a fraction of places (every clamp is hit);
- power-of-two multipliers (2^30 and 2^31 - 1 next to random ones), so requantized products land exactly on
  rounding midpoints, for positive and negative values; negative multipliers too (the C accepts them);
- in half the calls ("fine" scales), small multipliers with right shifts of 0-3 at the cell, output and SVDF
  stages, where single and double rounding disagree on a good share of values (with the usual shifts of
  10-24 they agree on almost all), so each rounding's build is told apart;
- effective biases and gate shifts that push gates past int16 (clamp16 before the LUT) and into the LUT's
  saturated ends; cell_clip 0 (no clip), small, 32767 and wider than int16 (the C truncates);
- SVDF activation limits narrower than, equal to, wider than the type (truncation) and inverted (min > max,
  where the two clamps' orders give different answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.kernels.lstm import (
    Activation,
    LstmGate,
    LstmParams,
    effective_bias_s8,
    effective_bias_s64,
)
from quantcore.kernels.svdf import SvdfParams

Array = np.ndarray[Any, Any]


def extremes(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, pinned: float = 0.15) -> Array:
    """Uniform integers of `dtype` with a fraction `pinned` set to its minimum or maximum."""
    info = np.iinfo(dtype)
    values = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64)
    mask = rng.random(shape) < pinned
    values[mask] = rng.choice([info.min, info.max], int(mask.sum()))
    return values.astype(dtype)


def multiplier(rng: np.random.Generator, fine_bits: int | None = None) -> int:
    """A Q31 multiplier; with `fine_bits`, a small one in [2^(fine_bits-1), 2^fine_bits) of either sign."""
    if fine_bits is not None:
        return int(rng.choice([-1, 1])) * int(rng.integers(1 << (fine_bits - 1), 1 << fine_bits))
    kind = rng.integers(0, 6)
    if kind == 0:
        return 1 << 30
    if kind == 1:
        return 2**31 - 1
    if kind == 2:
        return -int(rng.integers(1 << 30, 2**31))
    return int(rng.integers(1 << 30, 2**31))


@dataclass(frozen=True)
class LstmCall:
    x: Array
    params: LstmParams
    hidden_state: Array | None
    cell_state: Array | None


def lstm_call(rng: np.random.Generator, s16: bool, time_major: bool, stateful: bool) -> LstmCall:
    batch, steps = int(rng.integers(1, 4)), int(rng.integers(1, 6))
    size, hidden = int(rng.integers(1, 24)), int(rng.integers(1, 13))
    io = np.int16 if s16 else np.int8
    in_offset = 0 if s16 else int(rng.integers(-127, 129))
    out_zero = int(rng.integers(-40, 41)) if s16 else int(rng.integers(-140, 141))
    bias_dtype = np.int64 if s16 else np.int32
    # Gate products: s8 sums reach ~2^14 * size, s16 ~2^22 * size; shifts put them around int16 and beyond.
    shifts = (-24, 2) if s16 else (-12, 3)
    bias_scale = 2**36 if s16 else 2**22

    def gate(activation: Activation) -> LstmGate:
        w_in, w_h = extremes(rng, (hidden, size), np.int8), extremes(rng, (hidden, hidden), np.int8)
        bias = rng.integers(-bias_scale, bias_scale, hidden).astype(bias_dtype)
        vector_sum = effective_bias_s64 if s16 else effective_bias_s8
        return LstmGate(
            input_weights=w_in,
            input_effective_bias=vector_sum(w_in, in_offset, bias),  # type: ignore[arg-type]
            input_multiplier=multiplier(rng),
            input_shift=int(rng.integers(*shifts)),
            hidden_weights=w_h,
            hidden_effective_bias=vector_sum(w_h, -out_zero, None),
            hidden_multiplier=multiplier(rng),
            hidden_shift=int(rng.integers(*shifts)),
            activation=activation,
        )

    fine = bool(rng.random() < 0.5)
    # Fine: forget/input x cell products (< 2^30) land near int16 after a 2^-15..2^-19 scale; the output
    # product near the output type after 2^-22..2^-26 (s8) or 2^-15..2^-19 (s16).
    cell_scale = {"fine_bits": 16} if fine else {}
    out_bits = 17 if s16 else 9
    params = LstmParams(
        time_major=time_major,
        forget_to_cell_multiplier=multiplier(rng, **cell_scale),
        forget_to_cell_shift=int(rng.integers(-3, 1) if fine else rng.integers(-16, -9)),
        input_to_cell_multiplier=multiplier(rng, **cell_scale),
        input_to_cell_shift=int(rng.integers(-3, 1) if fine else rng.integers(-20, -9)),
        cell_clip=int(rng.choice([0, int(rng.integers(1, 32767)), 32767, 40000])),
        cell_scale_power=int(rng.integers(-16, 3)),
        output_multiplier=multiplier(rng, out_bits) if fine else multiplier(rng),
        output_shift=int(
            rng.integers(-3, 1) if fine else rng.integers(-20, -5) if s16 else rng.integers(-24, -11)
        ),
        output_offset=out_zero,
        forget_gate=gate(Activation.SIGMOID),
        input_gate=gate(Activation.SIGMOID),
        cell_gate=gate(Activation.TANH),
        output_gate=gate(Activation.SIGMOID),
    )
    shape = (steps, batch, size) if time_major else (batch, steps, size)
    x = extremes(rng, shape, io)
    if not stateful:
        return LstmCall(x, params, None, None)
    return LstmCall(x, params, extremes(rng, (batch, hidden), io), extremes(rng, (batch, hidden), np.int16))


@dataclass(frozen=True)
class SvdfCalls:
    inputs: Array
    """(calls, batches, input_size) int8: one kernel call per slice, in order."""
    state: Array
    weights_feature: Array
    weights_time: Array
    bias: Array | None
    params: SvdfParams


def _ordered_int8(limits: tuple[int, int]) -> tuple[int, int]:
    lo, hi = sorted(max(-128, min(127, v)) for v in limits)
    return lo, hi


def _limits(rng: np.random.Generator, dtype: Any) -> tuple[int, int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    kind = rng.integers(0, 5)
    if kind == 0:
        return lo, hi
    if kind == 1:  # wider than the type: the C's cast truncates
        return lo - int(rng.integers(1, 200)), hi + int(rng.integers(1, 200))
    if kind == 2:  # inverted
        a = int(rng.integers(lo // 2, hi // 2))
        return a + int(rng.integers(1, 50)), a
    a, b = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
    return a, b


def svdf_calls(rng: np.random.Generator, s16_state: bool) -> SvdfCalls:
    batches, size = int(rng.integers(1, 4)), int(rng.integers(1, 21))
    rank, units, time = int(rng.integers(1, 5)), int(rng.integers(1, 7)), int(rng.integers(1, 11))
    features, calls = rank * units + int(rng.integers(0, rank)), int(rng.integers(1, 5))
    state_dtype = np.int16 if s16_state else np.int8
    fine = bool(rng.random() < 0.5)
    # Fine: small values and multipliers, right shifts of 0-3 (see the module docstring).
    magnitude = 4 if fine else None
    params = SvdfParams(
        rank=rank,
        input_offset=int(rng.integers(-128, 128)),
        output_offset=int(rng.integers(-140, 141)),
        # Magnitudes: the feature product is ~2^16, the time product plus bias ~2^16 (fine: ~2^10).
        input_multiplier=multiplier(rng, 29 if s16_state else 23) if fine else multiplier(rng),
        input_shift=int(
            rng.integers(-3, 1) if fine else rng.integers(-4, 3) if s16_state else rng.integers(-12, -5)
        ),
        output_multiplier=multiplier(rng, 28) if fine else multiplier(rng),
        output_shift=int(rng.integers(-3, 1) if fine else rng.integers(-12, -5)),
        input_activation=_limits(rng, state_dtype),
        # Drawn like the input's, then made an ordered int8 pair: the reference refuses other output limits
        # (the MVE build narrows and orders them differently from the pure-C one).
        output_activation=_ordered_int8(_limits(rng, np.int8)),
    )
    bias_bound = 2**10 if fine else 2**16
    bias = None if rng.random() < 0.2 else rng.integers(-bias_bound, bias_bound, units).astype(np.int32)
    return SvdfCalls(
        inputs=extremes(rng, (calls, batches, size), np.int8),
        state=_values(rng, (batches, features, time), state_dtype, magnitude),
        weights_feature=extremes(rng, (features, size), np.int8),
        weights_time=_values(rng, (features, time), state_dtype, magnitude),
        bias=bias,
        params=params,
    )


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, magnitude: int | None) -> Array:
    if magnitude is None:
        return extremes(rng, shape, dtype)
    return rng.integers(-magnitude, magnitude + 1, shape).astype(dtype)
