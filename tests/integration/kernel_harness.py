"""Single CMSIS-NN kernel calls on compiled CMSIS-NN, to compare with the reference kernels byte for byte.

tests/integration/c/kernel_calls.c reads a batch of calls in the binary format documented at its top,
makes each through CMSIS-NN's public API and writes every output back. This module builds it (gcc -O2
against the host libcmsis-nn.a of one rounding, with that rounding's define, cached beside the library),
turns calls written the reference's way (the keyword arguments of a quantcore.kernels function) into its
records, and parses what it writes. That translation - NHWC shapes to cmsis_nn_dims, (h, w) pairs to
cmsis_nn_tile, offsets, filter dims per kernel family - is what the comparison trusts, so it lives in one
place: the `_encode_*` functions below, one per C argument layout.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quantcore.errors import QuantcoreError
from quantcore.kernels import conv, elementwise, fully_connected, pooling, s16, softmax
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.window import Window
from quantcore.targets.cmsis_nn import CmsisNn, CmsisNnBuildError, build_host_library, run_checked

SOURCE = Path(__file__).resolve().parent / "c" / "kernel_calls.c"
_FLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra")
_VERSION = 1

Args = Mapping[str, Any]
Record = tuple[list[int], list[np.ndarray | None]]
"""A call's ints and arrays in the order kernel_calls.c reads them; None is an absent (NULL) array."""


class HarnessError(QuantcoreError):
    """kernel_calls failed, or wrote something other than one result per call."""


@dataclass(frozen=True)
class Result:
    """What CMSIS-NN returned for one call."""

    status: int
    """The kernel's arm_cmsis_nn_status: 0 success, -1 argument error, -2 no implementation, -3 failure."""
    output: np.ndarray
    """The output, flat, int8 or int16 as the kernel writes it; empty unless status is 0."""


@dataclass(frozen=True)
class Kernel:
    """One CMSIS-NN function, the reference that must reproduce it and how a call is encoded for it."""

    name: str
    """The CMSIS-NN function kernel_calls makes."""
    code: int
    """Its kernel number in kernel_calls.c."""
    reference: Callable[..., np.ndarray]
    encode: Callable[[Args], Record]
    """Fully bound reference arguments (defaults applied) -> the C record."""

    @property
    def rounds(self) -> bool:
        """Whether the reference takes a Rounding (its result may depend on the build)."""
        return "rounding" in inspect.signature(self.reference).parameters

    def bind(self, args: Args) -> dict[str, Any]:
        """`args` with the reference's defaults filled in (rounding excluded)."""
        bound = inspect.signature(self.reference).bind(**args)
        bound.apply_defaults()
        return {k: v for k, v in bound.arguments.items() if k != "rounding"}

    def expected(self, args: Args, rounding: Rounding) -> np.ndarray:
        """The reference's output for `args` under `rounding`."""
        extra = {"rounding": rounding} if self.rounds else {}
        return self.reference(**args, **extra)

    def record(self, args: Args) -> tuple[int, Record]:
        return self.code, self.encode(self.bind(args))


# ---------------------------------------------------------------------------------------- encoding


def _typed(value: Any, dtype: type[np.generic]) -> np.ndarray:
    """`value` as a C-ordered little-endian array of `dtype`, refusing values that would not survive."""
    given = np.asarray(value)
    typed = given.astype(np.dtype(dtype).newbyteorder("<"))
    if not np.array_equal(typed, given):
        raise HarnessError(f"array of {given.dtype} has values outside {np.dtype(dtype).name}")
    return np.ascontiguousarray(typed)


def _optional(value: Any, dtype: type[np.generic]) -> np.ndarray | None:
    return None if value is None else _typed(value, dtype)


def _output_hw(a: Args, kernel_hw: tuple[int, int], dilation: tuple[int, int]) -> tuple[int, int]:
    """The output size the caller gave, else the reference's default (symmetric padding)."""
    if a["output_hw"] is not None:
        return int(a["output_hw"][0]), int(a["output_hw"][1])
    window = Window(kernel_hw, tuple(a["stride"]), tuple(a["padding"]), dilation)
    return window.output_hw((a["x"].shape[1], a["x"].shape[2]))


def _pairs(a: Args, *names: str) -> list[int]:
    """(h, w) pairs flattened, h first: kernel_calls.c swaps them into cmsis_nn_tile's {w, h}."""
    return [int(v) for name in names for v in a[name]]


def _conv_dims(a: Args, c_out: int) -> list[int]:
    """input_dims, filter_dims, output_dims (n h w c each). Both weight layouts are the C's filter_dims as
    they are: OHWI [C_OUT, HK, WK, C_IN/groups] for convolutions, [1, HK, WK, C_OUT] for depthwise."""
    n, h, w, c_in = a["x"].shape
    filter_dims = a["weights"].shape
    oh, ow = _output_hw(a, (filter_dims[1], filter_dims[2]), tuple(a["dilation"]))
    return [n, h, w, c_in, *filter_dims, n, oh, ow, c_out]


def _quant_arrays(a: Args, bias_dtype: type[np.generic]) -> list[np.ndarray | None]:
    return [
        _optional(a["bias"], bias_dtype),
        _typed(a["multiplier"], np.int32),
        _typed(a["shift"], np.int32),
    ]


def _encode_conv_s8(a: Args) -> Record:
    ints = [*_conv_dims(a, a["weights"].shape[0]), a["input_offset"], a["output_offset"]]
    ints += [*_pairs(a, "stride", "padding", "dilation"), a["act_min"], a["act_max"]]
    arrays = [_typed(a["x"], np.int8), _typed(a["weights"], np.int8), *_quant_arrays(a, np.int32)]
    return ints, arrays


def _encode_depthwise_s8(a: Args) -> Record:
    # cmsis_nn_dw_conv_params.ch_mult = C_OUT / C_IN.
    ints = _conv_dims(a, a["weights"].shape[3])
    ch_mult = a["weights"].shape[3] // a["x"].shape[3]
    ints += [a["input_offset"], a["output_offset"], ch_mult]
    ints += [*_pairs(a, "stride", "padding", "dilation"), a["act_min"], a["act_max"]]
    arrays = [_typed(a["x"], np.int8), _typed(a["weights"], np.int8), *_quant_arrays(a, np.int32)]
    return ints, arrays


def _encode_conv_s16(a: Args) -> Record:
    # arm_convolve_wrapper_s16 ignores the offsets; the bias type follows cmsis_nn_bias_data.is_int32_bias.
    ints = [*_conv_dims(a, a["weights"].shape[0]), 0, 0]
    ints += [*_pairs(a, "stride", "padding", "dilation"), a["act_min"], a["act_max"], int(a["int32_bias"])]
    bias_dtype = np.int32 if a["int32_bias"] else np.int64
    arrays = [_typed(a["x"], np.int16), _typed(a["weights"], np.int8), *_quant_arrays(a, bias_dtype)]
    return ints, arrays


def _encode_depthwise_s16(a: Args) -> Record:
    ints = _conv_dims(a, a["weights"].shape[3])
    ints += [0, 0, a["weights"].shape[3] // a["x"].shape[3]]
    ints += [*_pairs(a, "stride", "padding", "dilation"), a["act_min"], a["act_max"]]
    arrays = [_typed(a["x"], np.int16), _typed(a["weights"], np.int8), *_quant_arrays(a, np.int64)]
    return ints, arrays


def _fc_dims(a: Args) -> list[int]:
    # As TFLM passes them: input [N, 1, 1, depth], filter [depth, 1, 1, C_OUT], output [N, 1, 1, C_OUT].
    out_ch, depth = a["weights"].shape
    batches = a["x"].shape[0]
    return [batches, 1, 1, depth, depth, 1, 1, out_ch, batches, 1, 1, out_ch]


def _fc_arrays(a: Args, dtype: type[np.generic], bias: type[np.generic]) -> list[np.ndarray | None]:
    # The weights are [out][in], which is the C's row-major rhs as is.
    x = a["x"].reshape(a["x"].shape[0], -1)
    return [_typed(x, dtype), _typed(a["weights"], np.int8), _optional(a["bias"], bias)]


def _encode_fc_s8(a: Args) -> Record:
    if isinstance(a["multiplier"], np.ndarray):
        raise HarnessError("arm_fully_connected_s8 is per tensor: pass int multiplier and shift")
    ints = [*_fc_dims(a), a["input_offset"], a["filter_offset"], a["output_offset"]]
    ints += [a["multiplier"], a["shift"], a["act_min"], a["act_max"]]
    return ints, _fc_arrays(a, np.int8, np.int32)


def _fc_s8_ints(a: Args) -> list[int]:
    """Dims, offsets and clamp: the per-channel and wrapper records (their quantization is in arrays)."""
    offsets = [a["input_offset"], a["filter_offset"], a["output_offset"]]
    return [*_fc_dims(a), *offsets, a["act_min"], a["act_max"]]


def _encode_fc_per_channel_s8(a: Args) -> Record:
    if not isinstance(a["multiplier"], np.ndarray):
        raise HarnessError("arm_fully_connected_per_channel_s8 takes int32 multiplier and shift arrays")
    quant = [_typed(a["multiplier"], np.int32), _typed(a["shift"], np.int32)]
    return _fc_s8_ints(a), _fc_arrays(a, np.int8, np.int32) + quant


def _encode_fc_wrapper_s8(a: Args) -> Record:
    # cmsis_nn_quant_params: per channel exactly when the reference gets arrays.
    per_channel = isinstance(a["multiplier"], np.ndarray)
    quant = [_typed(np.ravel(a["multiplier"]), np.int32), _typed(np.ravel(a["shift"]), np.int32)]
    return [*_fc_s8_ints(a), int(per_channel)], _fc_arrays(a, np.int8, np.int32) + quant


def _encode_fc_s16(a: Args) -> Record:
    ints = [*_fc_dims(a), a["multiplier"], a["shift"], a["act_min"], a["act_max"]]
    return ints, _fc_arrays(a, np.int16, np.int64)


def _pool_encoder(dtype: type[np.generic]) -> Callable[[Args], Record]:
    def encode(a: Args) -> Record:
        # filter_dims [1, HK, WK, 1] (N and C unused); output_dims N is unused, given as the batch count.
        n, h, w, c = a["x"].shape
        kh, kw = a["kernel"]
        oh, ow = _output_hw(a, (kh, kw), (1, 1))
        ints = [n, h, w, c, 1, kh, kw, 1, n, oh, ow, c, *_pairs(a, "stride", "padding")]
        return [*ints, a["act_min"], a["act_max"]], [_typed(a["x"], dtype)]

    return encode


def _rows(x: np.ndarray) -> list[int]:
    return [int(np.prod(x.shape[:-1])), x.shape[-1]]


def _encode_softmax_s8(a: Args) -> Record:
    return [*_rows(a["x"]), a["mult"], a["shift"], a["diff_min"]], [_typed(a["x"], np.int8)]


def _encode_softmax_s16(a: Args) -> Record:
    # The reference builds TFLite Micro's tables itself; the C gets the very same ones.
    luts = [_typed(softmax.exp_lut(), np.int16), _typed(softmax.one_by_one_lut(), np.int16)]
    return [*_rows(a["x"]), a["mult"], a["shift"]], [_typed(a["x"], np.int16), *luts]


def _elementwise_encoder(dtype: type[np.generic], names: Sequence[str]) -> Callable[[Args], Record]:
    def encode(a: Args) -> Record:
        return [a["a"].size, *(a[n] for n in names)], [_typed(a["a"], dtype), _typed(a["b"], dtype)]

    return encode


_ADD = (
    "input_1_offset",
    "input_1_mult",
    "input_1_shift",
    "input_2_offset",
    "input_2_mult",
    "input_2_shift",
    "left_shift",
    "out_offset",
    "out_mult",
    "out_shift",
    "act_min",
    "act_max",
)
_MUL = ("input_1_offset", "input_2_offset", "out_offset", "out_mult", "out_shift", "act_min", "act_max")

_KERNELS = (
    Kernel("arm_convolve_wrapper_s8", 1, conv.convolve_s8, _encode_conv_s8),
    Kernel("arm_depthwise_conv_wrapper_s8", 2, conv.depthwise_conv_s8, _encode_depthwise_s8),
    Kernel("arm_fully_connected_s8", 3, fully_connected.fully_connected_s8, _encode_fc_s8),
    Kernel(
        "arm_fully_connected_per_channel_s8",
        4,
        fully_connected.fully_connected_s8,
        _encode_fc_per_channel_s8,
    ),
    Kernel("arm_fully_connected_wrapper_s8", 5, fully_connected.fully_connected_s8, _encode_fc_wrapper_s8),
    Kernel("arm_avgpool_s8", 6, pooling.avgpool_s8, _pool_encoder(np.int8)),
    Kernel("arm_max_pool_s8", 7, pooling.max_pool_s8, _pool_encoder(np.int8)),
    Kernel("arm_softmax_s8", 8, softmax.softmax_s8, _encode_softmax_s8),
    Kernel("arm_softmax_s8_s16", 9, softmax.softmax_s8_s16, _encode_softmax_s8),
    Kernel("arm_softmax_s16", 10, softmax.softmax_s16, _encode_softmax_s16),
    Kernel("arm_elementwise_add_s8", 11, elementwise.elementwise_add_s8, _elementwise_encoder(np.int8, _ADD)),
    Kernel(
        "arm_elementwise_add_s16", 12, elementwise.elementwise_add_s16, _elementwise_encoder(np.int16, _ADD)
    ),
    Kernel("arm_elementwise_mul_s8", 13, elementwise.elementwise_mul_s8, _elementwise_encoder(np.int8, _MUL)),
    Kernel(
        "arm_elementwise_mul_s16", 14, elementwise.elementwise_mul_s16, _elementwise_encoder(np.int16, _MUL)
    ),
    Kernel("arm_convolve_wrapper_s16", 15, s16.convolve_s16, _encode_conv_s16),
    Kernel("arm_depthwise_conv_wrapper_s16", 16, s16.depthwise_conv_s16, _encode_depthwise_s16),
    Kernel("arm_fully_connected_s16", 17, s16.fully_connected_s16, _encode_fc_s16),
    Kernel("arm_avgpool_s16", 18, pooling.avgpool_s16, _pool_encoder(np.int16)),
    Kernel("arm_max_pool_s16", 19, pooling.max_pool_s16, _pool_encoder(np.int16)),
)
KERNELS: dict[str, Kernel] = {k.name: k for k in _KERNELS}
"""Every kernel kernel_calls.c can call, keyed by the CMSIS-NN function's name."""


# ------------------------------------------------------------------------------------------- build


def build_kernel_calls(checkout: CmsisNn, rounding: Rounding) -> Path:
    """The kernel_calls executable for `checkout` and `rounding`, compiled (once) beside its libcmsis-nn.a."""
    library = build_host_library(checkout, rounding)
    if shutil.which("gcc") is None:
        raise CmsisNnBuildError("gcc is not installed; install gcc and retry")
    define = [f"-D{rounding.define}"] if rounding.define else []
    command = ["gcc", *_FLAGS, *define, f"-I{checkout.include_dir}"]
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(_FLAGS + tuple(define)).encode()).hexdigest()
    exe = library.parent / f"kernel_calls-{digest[:12]}"
    if exe.is_file():
        return exe
    tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
    run_checked([*command, str(SOURCE), str(library), "-lm", "-o", str(tmp)], "compiling kernel_calls.c")
    tmp.replace(exe)
    return exe


# --------------------------------------------------------------------------------------- serialise


def _i32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *(int(v) for v in values))


def _array(value: np.ndarray | None) -> bytes:
    if value is None:
        return _i32(1, 0)
    data = value.tobytes()
    return _i32(value.itemsize, value.size) + data + bytes(-len(data) % 4)


def serialise(calls: Sequence[tuple[int, Record]]) -> bytes:
    """The CALLS stream for (kernel code, record) pairs."""
    parts = [b"FXKC", _i32(_VERSION, len(calls))]
    for code, (ints, arrays) in calls:
        parts += [_i32(code, len(ints), *ints, len(arrays)), *(_array(a) for a in arrays)]
    return b"".join(parts)


_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("<i1"), 2: np.dtype("<i2")}


def parse(data: bytes, count: int) -> list[Result]:
    """The RESULTS stream of `count` calls."""
    if data[:4] != b"FXKR" or struct.unpack_from("<2i", data, 4) != (_VERSION, count):
        raise HarnessError(f"kernel_calls did not write a version-{_VERSION} stream of {count} results")
    results, offset = [], 12
    for index in range(count):
        if offset + 12 > len(data):
            raise HarnessError(f"kernel_calls' output ends before result {index}")
        status, size, n = struct.unpack_from("<3i", data, offset)
        if size not in _DTYPES:
            raise HarnessError(f"result {index} has elements of {size} bytes")
        output = np.frombuffer(data, _DTYPES[size], n, offset + 12).astype(_DTYPES[size].newbyteorder("="))
        results.append(Result(status, output))
        offset += 12 + size * n + (-(size * n) % 4)
    return results


def run_calls(exe: Path, calls: Sequence[tuple[int, Record]], timeout_s: float = 300) -> list[Result]:
    """Make every call through compiled CMSIS-NN in one run of `exe`; one Result per call, in order."""
    done = subprocess.run(
        [str(exe)], input=serialise(calls), capture_output=True, check=False, timeout=timeout_s
    )
    if done.returncode != 0:
        raise HarnessError(
            f"{exe.name} exited {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
        )
    return parse(done.stdout, len(calls))


# ------------------------------------------------------------------------------------------ compare


def mismatch(expected: np.ndarray, result: Result) -> str | None:
    """None when CMSIS-NN wrote exactly the reference's bytes, else what differs (first index in NHWC)."""
    if result.status != 0:
        return f"CMSIS-NN returned status {result.status} (the reference accepted the call)"
    if result.output.dtype != expected.dtype or result.output.size != expected.size:
        got = f"{result.output.size} {result.output.dtype}"
        return f"CMSIS-NN wrote {got} values, the reference {expected.size} {expected.dtype}"
    flat = expected.ravel()
    differ = np.flatnonzero(flat != result.output)
    if differ.size == 0:
        return None
    first = int(differ[0])
    where = tuple(int(i) for i in np.unravel_index(first, expected.shape))
    return (
        f"{differ.size} of {flat.size} values differ; first at {where} (flat {first}): "
        f"CMSIS-NN {int(result.output[first])}, reference {int(flat[first])}"
    )


def describe(args: Args, full_up_to: int = 16) -> str:
    """A call's arguments for a failure message: scalars as they are, arrays by dtype and shape (and
    values when they are small)."""
    parts = []
    for name, value in args.items():
        if isinstance(value, np.ndarray) and value.size > full_up_to:
            lo, hi = (int(value.min()), int(value.max())) if value.size else (0, 0)
            parts.append(f"{name}: {value.dtype}{list(value.shape)} in [{lo}, {hi}]")
        elif isinstance(value, np.ndarray):
            parts.append(f"{name}: {value.dtype}{list(value.shape)} {value.tolist()}")
        else:
            parts.append(f"{name}={value!r}")
    return "\n  ".join(parts)
