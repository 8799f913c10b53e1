"""The packed int4 (s4) kernels: nibble order, odd counts, hand-computed outputs, the depthwise kernel's
nibble walk, bad input, and CMSIS-NN's own s4 convolution cases read from a checkout.

The shared vectors' arm_convolve_s4 / arm_convolve_1x1_s4_fast cases mix two generations of CMSIS-NN's
test data (their adapter skips them), so the last test reads those cases the way the C tests compile
them: the headers each test_data.h includes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore.errors import CmsisNnNotFound, KernelArgumentError
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.int4 import (
    convolve_s4,
    depthwise_conv_s4,
    depthwise_conv_s4_opt,
    fully_connected_s4,
    unpack_s4,
)
from quantcore.targets import cmsis_nn
from tests import needs

HALF = 1 << 30


def _identity(channels: int) -> dict[str, Any]:
    """Per-channel requantization by 0.5 * 2^1 = 1.0: the accumulator passes through unchanged."""
    return {"multiplier": np.full(channels, HALF, np.int32), "shift": np.full(channels, 1, np.int32)}


def _pack(values: np.ndarray) -> np.ndarray:
    """int4 values, two per byte, low nibble first; an odd count leaves the last high nibble 0."""
    nibbles = values.ravel().astype(np.int64) & 0xF
    if nibbles.size % 2:
        nibbles = np.append(nibbles, 0)
    return (nibbles[0::2] | nibbles[1::2] << 4).astype(np.uint8).view(np.int8)


def test_unpack_takes_the_low_nibble_first_and_sign_extends() -> None:
    packed = np.array([0x21, -8, 0x7F], np.int8)  # -8 is 0xF8
    assert unpack_s4(packed, 6).tolist() == [1, 2, -8, -1, -1, 7]


def test_odd_count_ignores_the_last_high_nibble() -> None:
    packed = np.array([0x21, -93], np.int8)  # -93 is 0xA3: value 3, then an unused -6
    assert unpack_s4(packed, 3).tolist() == [1, 2, 3]


def test_rows_of_odd_length_run_across_bytes() -> None:
    # rows [1, 2, 3], [4, 5, 6], [7, -8, -1] as one stream: 0x21 0x43 0x65 0x87 0x0F
    packed = np.array([0x21, 0x43, 0x65, -121, 0x0F], np.int8)
    x = np.array([[1, 2, 3]], np.int8)
    out = fully_connected_s4(
        x, packed, None, weights_shape=(3, 3), multiplier=HALF, shift=1, input_offset=0, output_offset=0
    )
    assert out.tolist() == [[14, 32, -12]]


def test_conv_with_padding_by_hand() -> None:
    x = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 2, 1)
    packed = np.array([-31, -125], np.int8)  # 0xE1 0x83: the 2x2 kernel [[1, -2], [3, -8]]
    out = convolve_s4(
        x,
        packed,
        np.array([10], np.int32),
        weights_shape=(1, 2, 2, 1),
        input_offset=0,
        output_offset=-5,
        padding=(1, 1),
        output_hw=(3, 3),
        **_identity(1),
    )
    # window sums -8 -13 6 / -26 -26 14 / -6 -5 4, plus bias 10, minus 5
    assert out[0, ..., 0].tolist() == [[-3, -8, 11], [-21, -21, 19], [-1, 0, 9]]


def _random_case(seed: int, weights_shape: tuple[int, ...], in_ch: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    out_ch = weights_shape[0] if weights_shape[0] != 1 else weights_shape[-1]
    return {
        "x": rng.integers(-128, 128, (1, 6, 5, in_ch), dtype=np.int8),
        "weights": rng.integers(-8, 8, weights_shape, dtype=np.int8),
        "bias": rng.integers(-4000, 4000, out_ch, dtype=np.int32),
        "params": {
            "multiplier": rng.integers(HALF, 2**31 - 1, out_ch, dtype=np.int32),
            "shift": rng.integers(-9, -4, out_ch, dtype=np.int32),
            "input_offset": 17,
            "output_offset": -3,
            "stride": (2, 1),
            "padding": (1, 2),
        },
    }


@pytest.mark.parametrize(
    ("s4", "s8", "weights_shape", "in_ch"),
    [
        (convolve_s4, convolve_s8, (5, 3, 3, 3), 3),  # 27 values per filter: rows start mid-byte
        (depthwise_conv_s4, depthwise_conv_s8, (1, 3, 2, 6), 2),  # even input depth: plain indexing
        (depthwise_conv_s4_opt, depthwise_conv_s8, (1, 3, 3, 3), 3),  # _opt indexes odd depths too
    ],
    ids=["conv", "depthwise-even", "depthwise-opt-odd"],
)
def test_equals_the_s8_kernel_on_the_unpacked_weights(
    s4: Callable[..., np.ndarray], s8: Callable[..., np.ndarray], weights_shape: tuple[int, ...], in_ch: int
) -> None:
    case = _random_case(7, weights_shape, in_ch)
    packed = _pack(case["weights"])
    ours = s4(case["x"], packed, case["bias"], weights_shape=weights_shape, **case["params"])
    assert np.array_equal(ours, s8(case["x"], case["weights"], case["bias"], **case["params"]))


def test_depthwise_odd_depth_with_ch_mult_reads_what_the_c_reads() -> None:
    # Weights (tap, channel): (0,0)=1 (0,1)=2 (1,0)=3 (1,1)=4. TFLite's layout gives [1+30, 2+40]; the
    # C's nibble cursor reads taps 0,1 of channel 0 as 1, 2 and of channel 1 as 2, 3.
    x = np.array([1, 10], np.int8).reshape(1, 1, 2, 1)
    packed = np.array([0x21, 0x43], np.int8)
    out = depthwise_conv_s4(
        x, packed, None, weights_shape=(1, 1, 2, 2), input_offset=0, output_offset=0, **_identity(2)
    )
    assert out.ravel().tolist() == [21, 32]


def test_depthwise_odd_depth_clipped_window_reads_what_the_c_reads() -> None:
    # A 1x2 kernel [1, 2] with one column of padding: the first window sees only input 3 through tap 1,
    # which the C reads as the first nibble (weight 1); arm_depthwise_conv_s4_opt reads weight 2.
    x = np.array([3, 5], np.int8).reshape(1, 1, 2, 1)
    params = {"input_offset": 0, "output_offset": 0, "padding": (0, 1), "output_hw": (1, 3), **_identity(1)}
    packed = np.array([0x21], np.int8)
    generic = depthwise_conv_s4(x, packed, None, weights_shape=(1, 1, 2, 1), **params)
    opt = depthwise_conv_s4_opt(x, packed, None, weights_shape=(1, 1, 2, 1), **params)
    assert generic.ravel().tolist() == [3, 13, 5]
    assert opt.ravel().tolist() == [6, 13, 5]


X = np.zeros((1, 2, 2, 2), np.int8)
CONV = {"weights_shape": (1, 1, 1, 2), "input_offset": 0, "output_offset": 0, **_identity(1)}
DEPTHWISE = {"weights_shape": (1, 1, 1, 2), "input_offset": 0, "output_offset": 0, **_identity(2)}
FC = {"weights_shape": (2, 8), "multiplier": HALF, "shift": 1, "input_offset": 0, "output_offset": 0}
ONE_BYTE = np.zeros(1, np.int8)


@pytest.mark.parametrize(
    ("call", "argument", "kernel"),
    [
        (lambda: unpack_s4(np.zeros(2, np.int8), 2), "packed", "unpack_s4"),
        (lambda: convolve_s4(X, np.zeros(2, np.int8), None, **CONV), "weights", "arm_convolve_s4"),
        (lambda: convolve_s4(X, ONE_BYTE.view(np.uint8), None, **CONV), "weights", "arm_convolve_s4"),
        (
            lambda: convolve_s4(X, ONE_BYTE, None, **{**CONV, "weights_shape": (1, 2)}),
            "weights_shape",
            "arm_convolve_s4",
        ),
        (
            lambda: convolve_s4(X, np.zeros(2, np.int8), None, **{**CONV, "weights_shape": (1, 1, 1, 4)}),
            "weights_shape",
            "arm_convolve_s4",
        ),
        (
            lambda: convolve_s4(X, ONE_BYTE, None, **{**CONV, "shift": np.array([31], np.int32)}),
            "shift",
            "arm_convolve_s4",
        ),
        (
            lambda: depthwise_conv_s4(X, np.zeros(2, np.int8), None, **DEPTHWISE),
            "weights",
            "arm_depthwise_conv_s4",
        ),
        (
            lambda: depthwise_conv_s4_opt(np.zeros((2, 2, 2, 2), np.int8), ONE_BYTE, None, **DEPTHWISE),
            "input",
            "arm_depthwise_conv_s4_opt",
        ),
        (
            lambda: fully_connected_s4(X, np.zeros(7, np.int8), None, **FC),
            "weights",
            "arm_fully_connected_s4",
        ),
        (
            lambda: fully_connected_s4(
                X, np.zeros(8, np.int8), None, **{**FC, "multiplier": np.full(2, HALF)}
            ),
            "multiplier",
            "arm_fully_connected_s4",
        ),
    ],
    ids=[
        "unpack-length",
        "conv-length",
        "conv-dtype",
        "conv-shape-rank",
        "conv-depth",
        "conv-shift",
        "depthwise-length",
        "opt-batches",
        "fc-length",
        "fc-per-channel",
    ],
)
def test_bad_arguments_name_the_argument_and_the_s4_kernel(
    call: Callable[[], object], argument: str, kernel: str
) -> None:
    with pytest.raises(KernelArgumentError, match=f"'{argument}'") as err:
        call()
    assert err.value.kernel == kernel


_INCLUDE = re.compile(r'#include "\.\./TestData/(\w+)/test_data\.h"')
_DEFINE = re.compile(r"#define\s+(\w+)\s+(-?\d+)\s*$", re.MULTILINE)
_ARRAY = re.compile(r"const\s+(u?int)(8|16|32)_t\s+(\w+)\[\d+\]\s*=\s*\{([^}]*)\}")
_ALIAS = re.compile(r"const\s+\w+\s*\*\s*const\s+(\w+)\s*=\s*(\w+)\s*;")


def _c_case(folder: Path) -> tuple[dict[str, np.ndarray | None], dict[str, int]]:
    """A case's arrays (aliases resolved, NULL as None) and defines, from the headers test_data.h includes."""
    arrays: dict[str, np.ndarray | None] = {}
    defines: dict[str, int] = {}
    for header in re.findall(r'#include "(\w+\.h)"', (folder / "test_data.h").read_text()):
        text = (folder / header).read_text()
        defines.update((name, int(value)) for name, value in _DEFINE.findall(text))
        for sign, bits, name, body in _ARRAY.findall(text):
            # The generator writes some packed bytes as 128..255; C converts them modulo 2^8, as astype does.
            values = np.array([int(v) for v in body.split(",") if v.strip()], np.int64)
            arrays[name] = values.astype(f"{sign}{bits}")
        for name, target in _ALIAS.findall(text):
            arrays[name] = None if target == "NULL" else arrays[target]
    return arrays, defines


def _convolve_c_case(folder: Path) -> tuple[np.ndarray, Any]:
    """What convolve_s4 computes for one case folder, and the output the C test expects."""
    arrays, defines = _c_case(folder)
    name = folder.name

    def d(key: str, default: int | None = None) -> Any:
        return defines.get(f"{name.upper()}_{key}", default)

    out = convolve_s4(
        arrays[f"{name}_input"].reshape(d("INPUT_BATCHES"), d("INPUT_H"), d("INPUT_W"), d("IN_CH")),
        arrays[f"{name}_weights"],
        arrays.get(f"{name}_biases"),
        weights_shape=(d("OUT_CH"), d("FILTER_Y"), d("FILTER_X"), d("IN_CH")),
        multiplier=arrays[f"{name}_output_mult"],
        shift=arrays[f"{name}_output_shift"],
        input_offset=d("INPUT_OFFSET"),
        output_offset=d("OUTPUT_OFFSET"),
        stride=(d("STRIDE_Y"), d("STRIDE_X")),
        padding=(d("PAD_Y"), d("PAD_X")),
        dilation=(d("DILATION_Y", 1), d("DILATION_X", 1)),
        act_min=d("OUT_ACTIVATION_MIN"),
        act_max=d("OUT_ACTIVATION_MAX"),
        output_hw=(d("OUTPUT_H"), d("OUTPUT_W")),
    )
    return out.ravel(), arrays[f"{name}_output_ref"]


@pytest.mark.cmsis_nn
@pytest.mark.parametrize("test", ["test_arm_convolve_s4", "test_arm_convolve_1x1_s4_fast"])
def test_cmsis_nn_s4_convolution_cases_are_bit_exact(test: str) -> None:
    try:
        checkout = cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))
    cases = checkout.path / "Tests" / "UnitTest" / "TestCases"
    source = cases / test / f"{test}.c"
    if not source.is_file():
        needs.absent(f"{source} not found in this CMSIS-NN checkout")
    names = _INCLUDE.findall(source.read_text())
    assert names, f"no test data included by {source}"
    differ = []
    for name in names:
        ours, expected = _convolve_c_case(cases / "TestData" / name)
        if not np.array_equal(ours, expected):
            differ.append(name)
    assert differ == []


@pytest.mark.cmsis_nn
def test_cmsis_nn_s4_fully_connected_cases_are_bit_exact() -> None:
    # Every case test_arm_fully_connected_s4.c includes, among them fully_connected_int4_6 with output_offset
    # 128 (the reference used to refuse it; the C adds the offset and clamps). Issue 21 item 2.
    try:
        checkout = cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))
    cases = checkout.path / "Tests" / "UnitTest" / "TestCases"
    source = cases / "test_arm_fully_connected_s4" / "test_arm_fully_connected_s4.c"
    if not source.is_file():
        needs.absent(f"{source} not found in this CMSIS-NN checkout")
    names = _INCLUDE.findall(source.read_text())
    assert "fully_connected_int4_6" in names
    differ = []
    for name in names:
        arrays, defines = _c_case(cases / "TestData" / name)

        def d(key: str, name: str = name, defines: dict[str, int] = defines) -> Any:
            return defines[f"{name.upper()}_{key}"]

        out = fully_connected_s4(
            arrays[f"{name}_input"].reshape(d("INPUT_BATCHES"), d("ACCUMULATION_DEPTH")),
            arrays[f"{name}_weights"] if f"{name}_weights" in arrays else arrays[f"{name}_input_weights"],
            arrays.get(f"{name}_biases"),
            weights_shape=(d("OUT_CH"), d("ACCUMULATION_DEPTH")),
            multiplier=d("OUTPUT_MULTIPLIER"),
            shift=d("OUTPUT_SHIFT"),
            input_offset=d("INPUT_OFFSET"),
            output_offset=d("OUTPUT_OFFSET"),
            act_min=d("OUT_ACTIVATION_MIN"),
            act_max=d("OUT_ACTIVATION_MAX"),
        )
        if not np.array_equal(out.ravel(), arrays[f"{name}_output_ref"]):
            differ.append(name)
    assert differ == []
