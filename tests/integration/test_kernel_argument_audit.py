"""The reference computes what compiled CMSIS-NN computes for arguments outside the quantizer's policy.

Issue 21's audit (quantcore/kernels/__init__.py lists every check and why it stays or went) removed the
reference's policy checks - an int8 output zero point in [-128, 127], fully connected input / filter offsets
that are negated int8 zero points, an activation clamp inside the output type and not crossed, an add's
rescaling shift <= 0, a zero offset for the int16 kernels - because the C computes those calls without
undefined behaviour, alike in its builds. Here the seeded random calls of test_kernels_vs_c get such values
and compiled CMSIS-NN (the host build, both roundings) must write the reference's bytes: an output offset of
128 or far outside int8 (the clamp then decides), offsets up to int16's end, clamps wider than the type (the
cast keeps the low bits) or crossed (every value becomes act_max), positive add shifts, int16 offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels import conv, fully_connected, pooling
from quantcore.kernels.int4 import fully_connected_s4
from quantcore.kernels.requantize import Rounding
from tests.integration.kernel_harness import KERNELS, describe, mismatch, run_calls
from tests.integration.test_kernels_vs_c import SEED, cases, executable

pytestmark = pytest.mark.cmsis_nn

Case = dict[str, Any]
Gen = np.random.Generator
CALLS = 60
"""Random calls per kernel and variant: the first CALLS of test_kernels_vs_c's, changed."""

WIDE_OFFSETS = (128, -129, 255, -300, 1000, -(2**20), 2**24)


def _wide_output_offset(key: str) -> Callable[[Case, Gen], Case]:
    """An output offset outside int8 (128 is the offset that used to be refused); clamps left as drawn."""

    def change(case: Case, rng: Gen) -> Case:
        return case | {key: int(rng.choice(WIDE_OFFSETS))}

    return change


def _wide_clamp(case: Case, rng: Gen) -> Case:
    """Clamp limits beyond the output type or crossed, from the type's own width."""
    wide = 300 if _is_s8(case) else 40000
    pairs = [(-wide, wide), (wide // 2, wide), (-wide, -wide // 2), (10, -10), (-wide, 5), (-5, wide)]
    lo, hi = pairs[int(rng.integers(len(pairs)))]
    return case | {"act_min": lo, "act_max": hi}


def _crossed_clamp(case: Case, rng: Gen) -> Case:
    """Crossed limits inside the type (the max pools keep their limits in the type)."""
    lo = int(rng.integers(-100, 100))
    return case | {"act_min": lo, "act_max": lo - int(rng.integers(1, 50))}


def _wide_fc_offsets(case: Case, rng: Gen) -> Case:
    """Fully connected input and filter offsets beyond a negated int8 zero point, up to the int16 lanes'."""
    choices = (129, -128, 1000, -5000, 32640, -32640)
    return case | {"input_offset": int(rng.choice(choices)), "filter_offset": int(rng.choice((*choices, 0)))}


def _s64_shifts(case: Case, rng: Gen) -> Case:
    """arm_nn_requantize_s64 shifts beyond its documented [-31, 7]: up to 14 (a shift by 0) and down to -49
    (a shift by 63). A large left shift overflows the int32 the C narrows to, which keeps the low bits."""
    shift = case["shift"]
    drawn = rng.choice((*range(8, 15), *range(-49, -31)), size=np.shape(shift))
    changed = case | {"shift": drawn.astype(np.int32) if isinstance(shift, np.ndarray) else int(drawn)}
    if changed.get("int32_bias"):  # the int32-bias convolution requantizes with arm_nn_requantize instead
        bias = changed["bias"]
        changed |= {"int32_bias": False, "bias": None if bias is None else bias.astype(np.int64)}
    return changed


def _positive_add_shifts(case: Case, rng: Gen) -> Case:
    """An add whose input and output rescaling shifts are positive (TFLite never makes them). The left shift
    is lowered so that (x + offset) << left_shift << shift stays well inside int32."""
    return case | {
        "left_shift": int(rng.integers(0, 4)),
        "input_1_shift": int(rng.integers(0, 3)),
        "input_2_shift": int(rng.integers(0, 3)),
        "out_shift": int(rng.integers(0, 3)),
    }


def _int16_offsets(case: Case, rng: Gen) -> Case:
    """Non-zero offsets for an int16 add or mul: the C ignores them."""
    names = ("input_1_offset", "input_2_offset", "out_offset")
    return case | {name: int(rng.integers(-1000, 1000)) for name in names}


def _is_s8(case: Case) -> bool:
    data: np.ndarray = case["x"] if "x" in case else case["a"]
    return bool(data.dtype == np.int8)


VARIANTS: dict[str, Callable[[Case, Gen], Case]] = {
    "arm_convolve_wrapper_s8/output_offset": _wide_output_offset("output_offset"),
    "arm_convolve_wrapper_s8/clamp": _wide_clamp,
    "arm_depthwise_conv_wrapper_s8/output_offset": _wide_output_offset("output_offset"),
    "arm_depthwise_conv_wrapper_s8/clamp": _wide_clamp,
    "arm_fully_connected_s8/output_offset": _wide_output_offset("output_offset"),
    "arm_fully_connected_s8/clamp": _wide_clamp,
    "arm_fully_connected_per_channel_s8/output_offset": _wide_output_offset("output_offset"),
    "arm_fully_connected_wrapper_s8/clamp": _wide_clamp,
    "arm_fully_connected_s8/offsets": _wide_fc_offsets,
    "arm_fully_connected_per_channel_s8/offsets": _wide_fc_offsets,
    "arm_fully_connected_wrapper_s8/offsets": _wide_fc_offsets,
    "arm_avgpool_s8/clamp": _wide_clamp,
    "arm_max_pool_s8/clamp": _crossed_clamp,
    "arm_elementwise_add_s8/out_offset": _wide_output_offset("out_offset"),
    "arm_elementwise_add_s8/clamp": _wide_clamp,
    "arm_elementwise_add_s8/shifts": _positive_add_shifts,
    "arm_elementwise_add_s16/shifts": _positive_add_shifts,
    "arm_elementwise_add_s16/offsets": _int16_offsets,
    "arm_elementwise_add_s16/clamp": _wide_clamp,
    "arm_elementwise_mul_s8/out_offset": _wide_output_offset("out_offset"),
    "arm_elementwise_mul_s8/clamp": _wide_clamp,
    "arm_elementwise_mul_s16/offsets": _int16_offsets,
    "arm_elementwise_mul_s16/clamp": _wide_clamp,
    "arm_convolve_wrapper_s16/clamp": _wide_clamp,
    "arm_depthwise_conv_wrapper_s16/clamp": _wide_clamp,
    "arm_fully_connected_s16/clamp": _wide_clamp,
    "arm_fully_connected_s16/shift": _s64_shifts,
    "arm_convolve_wrapper_s16/shift": _s64_shifts,
    "arm_depthwise_conv_wrapper_s16/shift": _s64_shifts,
    "arm_avgpool_s16/clamp": _wide_clamp,
    "arm_max_pool_s16/clamp": _crossed_clamp,
}
"""'kernel/what changes' -> how one random call of the kernel is changed."""


def _calls(variant: str) -> list[Case]:
    name = variant.split("/")[0]
    changed = []
    for index, (case, _) in enumerate(cases(name)[:CALLS]):
        rng = np.random.default_rng([SEED, KERNELS[name].code, index, 21])
        changed.append(VARIANTS[variant](case, rng))
    return changed


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_formerly_refused_arguments_give_compiled_cmsis_nns_bytes(variant: str, rounding: Rounding) -> None:
    kernel = KERNELS[variant.split("/")[0]]
    calls = _calls(variant)
    expected = [kernel.expected(case, rounding) for case in calls]
    results = run_calls(executable(rounding), [kernel.record(case) for case in calls])
    for index, (case, out, got) in enumerate(zip(calls, expected, results, strict=True)):
        problem = mismatch(out, got)
        assert problem is None, f"{variant} call {index}: {problem}\n  {describe(kernel.bind(case))}"


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.endswith("/clamp")])
def test_the_changed_clamps_decide_some_outputs(variant: str) -> None:
    # The comparison above could pass with clamps that never act; some outputs must be the clamp's value as
    # the C's cast leaves it (act_max narrowed to the type), which only a clamp outside the policy gives.
    kernel = KERNELS[variant.split("/")[0]]
    reached = 0
    for case in _calls(variant):
        out = kernel.expected(case, Rounding.DOUBLE)
        narrowed = np.array(case["act_max"]).astype(out.dtype)
        outside = not np.iinfo(out.dtype).min <= case["act_max"] <= np.iinfo(out.dtype).max
        reached += bool((outside or case["act_min"] > case["act_max"]) and (out == narrowed).any())
    assert reached >= 5, f"only {reached} calls have an output at a formerly refused clamp"


def test_fully_connected_s4_output_offset_128_is_computed() -> None:
    # The case: arm_fully_connected_s4 adds output_offset to the requantized int32, clamps and casts
    # (arm_nn_vec_mat_mult_t_s4). Hand-derived: x = [1, 2], weights [[3, -1]] packed in one byte 0xF3 (low
    # nibble first), no bias, input_offset 0, multiplier 2^30 with shift 1 (a unit scale): acc = 3 - 2 = 1,
    # + 128 = 129, which int8's clamp makes 127; with act_max 200 the C's int8 cast of 129 gives -127.
    # (arm_fully_connected_s4 compiled for the host writes these two bytes for these calls.)
    x = np.array([[1, 2]], dtype=np.int8)
    packed = np.array([0xF3], dtype=np.uint8).view(np.int8)

    def call(act_max: int) -> list[list[int]]:
        out = fully_connected_s4(
            x,
            packed,
            None,
            weights_shape=(1, 2),
            multiplier=2**30,
            shift=1,
            input_offset=0,
            output_offset=128,
            act_max=act_max,
        )
        return [[int(v) for v in row] for row in out]

    assert call(act_max=127) == [[127]]
    assert call(act_max=200) == [[-127]]


@pytest.mark.parametrize(
    ("call", "argument", "words"),
    [
        # 1 << 31 and a right shift by 32 are undefined in C: kept.
        (lambda: _fc(shift=31), "shift", "must be in [-31, 30]"),
        # The DSP build adds the offsets in int16 lanes: kept where int8 + offset leaves int16.
        (lambda: _fc(input_offset=32641), "input_offset", "must be in [-32640, 32640]"),
        (lambda: _fc(filter_offset=-32641), "filter_offset", "must be in [-32640, 32640]"),
        # (int8_t)-input_offset pads arm_convolve_s8's im2col buffer: kept.
        (lambda: _conv(input_offset=129), "input_offset", "must be in [-127, 128]"),
        # The MVE build of arm_max_pool_s8 narrows its clamp to int8 lanes, the pure-C build does not: kept.
        (lambda: _max_pool(act_max=128), "act_max", "narrows its clamp"),
    ],
)
def test_checks_that_keep_the_c_defined_still_refuse(
    call: Callable[[], Any], argument: str, words: str
) -> None:
    with pytest.raises(KernelArgumentError) as refused:
        call()
    assert refused.value.argument == argument and words in str(refused.value)


def _fc(**change: int) -> Any:
    args: dict[str, Any] = dict(multiplier=2**30, shift=0, input_offset=0, output_offset=0) | change
    x, w = np.zeros((1, 2), np.int8), np.zeros((1, 2), np.int8)
    return fully_connected.fully_connected_s8(x, w, None, **args)


def _conv(input_offset: int) -> Any:
    x, w = np.zeros((1, 2, 2, 1), np.int8), np.zeros((1, 1, 1, 1), np.int8)
    quant = dict(multiplier=np.array([2**30], np.int32), shift=np.array([0], np.int32))
    return conv.convolve_s8(x, w, None, **quant, input_offset=input_offset, output_offset=0)


def _max_pool(act_max: int) -> Any:
    return pooling.max_pool_s8(np.zeros((1, 2, 2, 1), np.int8), kernel=(2, 2), act_max=act_max)
