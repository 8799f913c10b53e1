"""One call of CMSIS-NN's LSTM or SVDF kernels compiled for this machine, to compare bytes and time.

The call is serialised in the format documented at the top of bench/cmsisnn_recurrent_runner.c; that
runner, built with gcc against the host libcmsis-nn.a (the same build, keyed by rounding, as
quantcore.verify.host_cmsis_nn uses), makes the call and writes back what the kernel wrote: the output and
the state buffers. The parameters are the reference kernels' own (quantcore.kernels.lstm / svdf), so a test
hands the same objects to both sides.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quantcore.kernels.lstm import Activation, LstmParams, LstmResult
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import SvdfParams
from quantcore.targets import process
from quantcore.targets.cmsis_nn import CmsisNn
from quantcore.verify.host_cmsis_nn import HostRunError, build_c_program

RUNNER_SOURCE = Path(__file__).resolve().parents[2] / "bench" / "cmsisnn_recurrent_runner.c"
RUN_TIMEOUT_S = 600.0
_VERSION = 1
_LSTM_S8, _LSTM_S16, _SVDF_S8, _SVDF_S16 = 1, 2, 3, 4


@dataclass(frozen=True)
class SvdfRun:
    """Every call's output, (calls, batches, units) int8, and the state after the last call."""

    outputs: np.ndarray[Any, Any]
    state: np.ndarray[Any, Any]


def build_recurrent_runner(checkout: CmsisNn, rounding: Rounding = Rounding.DOUBLE) -> Path:
    """The runner executable for `checkout` and `rounding`, compiled (once) beside its libcmsis-nn.a."""
    return build_c_program(checkout, rounding, RUNNER_SOURCE)


# ---------------------------------------------------------------------------------------- serialise


def _i32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *(int(v) for v in values))


def _array(values: np.ndarray[Any, Any], dtype: type[np.generic]) -> bytes:
    given = np.asarray(values)
    typed = given.astype(np.dtype(dtype).newbyteorder("<"))
    if not np.array_equal(typed, given):
        raise HostRunError(f"array of {given.dtype} has values outside {np.dtype(dtype).name}")
    data = np.ascontiguousarray(typed).tobytes()
    return _i32(typed.itemsize, typed.size) + data + bytes(-len(data) % 4)


def serialise_lstm(
    x: np.ndarray[Any, Any],
    params: LstmParams,
    hidden_state: np.ndarray[Any, Any] | None,
    cell_state: np.ndarray[Any, Any] | None,
) -> bytes:
    """The CALL file of one arm_lstm_unidirectional_s8/_s16 call (the dtype of `x` says which)."""
    s16 = x.dtype == np.int16
    io, bias = (np.int16, np.int64) if s16 else (np.int8, np.int32)
    steps, batch = (x.shape[0], x.shape[1]) if params.time_major else (x.shape[1], x.shape[0])
    hidden = params.forget_gate.hidden_weights.shape[0]
    head = b"FXRC" + _i32(_VERSION, _LSTM_S16 if s16 else _LSTM_S8)
    scalars = _i32(
        int(params.time_major), batch, steps, x.shape[2], hidden, 0,
        params.forget_to_cell_multiplier, params.forget_to_cell_shift,
        params.input_to_cell_multiplier, params.input_to_cell_shift,
        params.cell_clip, params.cell_scale_power,
        params.output_multiplier, params.output_shift, params.output_offset,
        int(hidden_state is not None),
    )  # fmt: skip
    gates = b""
    for g in params.gates:
        gates += _i32(g.input_multiplier, g.input_shift, g.hidden_multiplier, g.hidden_shift)
        gates += _i32(int(g.activation is Activation.TANH))
        gates += _array(g.input_weights, np.int8) + _array(g.hidden_weights, np.int8)
        gates += _array(g.input_effective_bias, bias) + _array(g.hidden_effective_bias, bias)
    state = b""
    if hidden_state is not None:
        if cell_state is None:  # as the reference (kernels.lstm) refuses it: the C reads both
            raise HostRunError(
                "cell_state must be given with a hidden_state (the C reads it as the starting cell)"
            )
        state = _array(hidden_state, io) + _array(cell_state, np.int16)
    return head + scalars + gates + _array(x, io) + state


def serialise_svdf(
    inputs: np.ndarray[Any, Any],
    state: np.ndarray[Any, Any],
    weights_feature: np.ndarray[Any, Any],
    weights_time: np.ndarray[Any, Any],
    bias: np.ndarray[Any, Any] | None,
    params: SvdfParams,
) -> bytes:
    """The CALL file of a run of arm_svdf_s8 (int8 state) or arm_svdf_state_s16_s8 (int16 state) calls,
    one per (batches, input_size) slice of `inputs`."""
    s16 = state.dtype == np.int16
    calls, batches, size = inputs.shape
    features, time = weights_time.shape
    head = b"FXRC" + _i32(_VERSION, _SVDF_S16 if s16 else _SVDF_S8)
    scalars = _i32(
        params.rank, params.input_offset, params.output_offset,
        params.input_multiplier, params.input_shift, params.output_multiplier, params.output_shift,
        *params.input_activation, *params.output_activation,
        batches, size, features, time, calls, int(bias is not None),
    )  # fmt: skip
    state_dtype = np.int16 if s16 else np.int8
    arrays = _array(weights_feature, np.int8) + _array(weights_time, state_dtype)
    if bias is not None:
        arrays += _array(bias, np.int32)
    return head + scalars + arrays + _array(state, state_dtype) + _array(inputs, np.int8)


def parse_result(data: bytes) -> tuple[int, list[np.ndarray[Any, Any]]]:
    """(kind, arrays) of a RESULT file; arrays are flat, in their written element type."""
    if data[:4] != b"FXRR":
        raise HostRunError("the runner's result is not an FXRR file")
    version, kind, count = struct.unpack_from("<3i", data, 4)
    if version != _VERSION:
        raise HostRunError(f"the runner's result is version {version}, expected {_VERSION}")
    types = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
    arrays, offset = [], 16
    for _ in range(count):
        size, n = struct.unpack_from("<2i", data, offset)
        if size not in types or offset + 8 + size * n > len(data):
            raise HostRunError("the runner's result is truncated or malformed")
        arrays.append(np.frombuffer(data, np.dtype(types[size]).newbyteorder("<"), n, offset + 8).copy())
        offset += 8 + size * n + (-(size * n) % 4)
    return kind, arrays


# ---------------------------------------------------------------------------------------------- run


def _run(runner: Path, call: bytes, repeat: int, timeout: float) -> tuple[list[np.ndarray[Any, Any]], float]:
    with tempfile.TemporaryDirectory(prefix="fixpoint-recurrent-") as tmp:
        work = Path(tmp)
        (work / "call.bin").write_bytes(call)
        args = [str(runner), str(work / "call.bin"), str(work / "result.bin"), "--repeat", str(repeat)]
        done = process.run_tool(args, timeout, f"running {runner.name}", HostRunError)
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()[-2000:]
            raise HostRunError(f"{runner.name} exited {done.returncode}: {stderr}")
        _, arrays = parse_result((work / "result.bin").read_bytes())
    fields = dict(item.split("=", 1) for item in done.stdout.decode().split() if "=" in item)
    try:
        elapsed = float(fields["elapsed_ns"]) / 1e9
    except (KeyError, ValueError):
        raise HostRunError(f"{runner.name} did not print elapsed_ns") from None
    return arrays, elapsed


def run_lstm(
    runner: Path,
    x: np.ndarray[Any, Any],
    params: LstmParams,
    *,
    hidden_state: np.ndarray[Any, Any] | None = None,
    cell_state: np.ndarray[Any, Any] | None = None,
    repeat: int = 0,
    timeout: float = RUN_TIMEOUT_S,
) -> tuple[LstmResult, float]:
    """The compiled kernel's LstmResult for the call, and the wall time of `repeat` further calls."""
    arrays, elapsed = _run(runner, serialise_lstm(x, params, hidden_state, cell_state), repeat, timeout)
    hidden = params.forget_gate.hidden_weights.shape[0]
    output = arrays[0].reshape(*x.shape[:2], hidden)
    batch = x.shape[1] if params.time_major else x.shape[0]
    final_hidden = arrays[1].reshape(batch, hidden) if hidden_state is not None else None
    return LstmResult(output, final_hidden, arrays[-1].reshape(batch, hidden)), elapsed


def run_svdf(
    runner: Path,
    inputs: np.ndarray[Any, Any],
    state: np.ndarray[Any, Any],
    weights_feature: np.ndarray[Any, Any],
    weights_time: np.ndarray[Any, Any],
    bias: np.ndarray[Any, Any] | None,
    params: SvdfParams,
    *,
    repeat: int = 0,
    timeout: float = RUN_TIMEOUT_S,
) -> tuple[SvdfRun, float]:
    """The compiled kernel's outputs for each (batches, input_size) slice of `inputs`, called in turn from
    `state`, the final state, and the wall time of `repeat` further runs of the whole sequence."""
    call = serialise_svdf(inputs, state, weights_feature, weights_time, bias, params)
    arrays, elapsed = _run(runner, call, repeat, timeout)
    calls, batches, _ = inputs.shape
    return SvdfRun(arrays[0].reshape(calls, batches, -1), arrays[1].reshape(state.shape)), elapsed
