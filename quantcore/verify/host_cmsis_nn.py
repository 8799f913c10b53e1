"""Running a reference Network on compiled CMSIS-NN on this machine, to compare bytes and time.

The network and a batch of inputs are serialised in the small binary format documented at the top of
bench/cmsisnn_runner.c; that runner, built with gcc against the host libcmsis-nn.a, calls CMSIS-NN's
public API layer by layer and writes the outputs back. The runner and the library are built with the
same rounding define, and the caller compares them with the reference run with the same Rounding.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantcore.conformance.layer_params import ConvParams, FullyConnectedParams, PoolParams, SoftmaxParams
from quantcore.conformance.network import Layer, LayerKind, Network
from quantcore.errors import QuantcoreError
from quantcore.kernels.requantize import Rounding
from quantcore.targets import process
from quantcore.targets.cmsis_nn import CmsisNn, CmsisNnBuildError, build_host_library, run_checked

RUNNER_SOURCE = Path(__file__).resolve().parents[2] / "bench" / "cmsisnn_runner.c"
"""The C harness; it lives in the repository's bench/ (it is not packaged into the wheel yet)."""

RUN_TIMEOUT_S = 600.0
"""A runner call that takes longer is stopped (a benchmark of many repeats takes seconds)."""
_VERSION = 1
_KIND_CODE = {
    LayerKind.CONV_2D: 1,
    LayerKind.DEPTHWISE_CONV_2D: 2,
    LayerKind.AVERAGE_POOL_2D: 3,
    LayerKind.MAX_POOL_2D: 4,
    LayerKind.FULLY_CONNECTED: 5,
    LayerKind.SOFTMAX: 6,
}


class HostRunError(QuantcoreError):
    """The CMSIS-NN runner failed or wrote something other than what the network describes."""


@dataclass(frozen=True)
class HostRun:
    """What one runner invocation computed and how long its inference loop took."""

    outputs: list[np.ndarray]
    """(N, *layer.output_shape) int8 per layer written: every layer, or only the last."""
    elapsed_s: float
    """Wall time of the inference loop alone (all repeats), measured by the runner."""
    batch: int
    repeat: int


# ---------------------------------------------------------------------------------------------- build


def build_runner(checkout: CmsisNn, rounding: Rounding = Rounding.DOUBLE) -> Path:
    """The runner executable for `checkout` and `rounding`, compiled (once) beside its libcmsis-nn.a."""
    return build_c_program(checkout, rounding, RUNNER_SOURCE)


def build_c_program(checkout: CmsisNn, rounding: Rounding, source: Path) -> Path:
    """`source` (a runner in this repository) compiled once per content, checkout and rounding, linked
    with that checkout's host libcmsis-nn.a and kept beside it."""
    library = build_host_library(checkout, rounding)
    if not source.is_file():
        raise CmsisNnBuildError(f"{source} is missing: the host runner is built from the repository")
    if shutil.which("gcc") is None:
        raise CmsisNnBuildError("gcc is not installed; install gcc and retry")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    exe = library.parent / f"{source.stem}-{digest}"
    if exe.is_file():
        return exe
    tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
    define = [f"-D{rounding.define}"] if rounding.define else []
    command = ["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", *define, f"-I{checkout.include_dir}"]
    run_checked([*command, str(source), str(library), "-lm", "-o", str(tmp)], "compiling the runner")
    tmp.replace(exe)
    return exe


# ---------------------------------------------------------------------------------------- serialise


def _i32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *(int(v) for v in values))


def _hwc(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """A per-sample shape as CMSIS-NN's (h, w, c): (12,) -> (1, 1, 12)."""
    if len(shape) > 3:
        raise HostRunError(f"shape {shape} has more than three dimensions")
    h, w, c = (1,) * (3 - len(shape)) + tuple(int(d) for d in shape)
    return h, w, c


def _array(values: np.ndarray | None, dtype: type[np.generic]) -> bytes:
    """One array record; None (e.g. no bias) is an empty array, which the runner passes as NULL."""
    item = np.dtype(dtype).itemsize
    if values is None:
        return _i32(item, 0)
    given = np.asarray(values)
    typed = given.astype(np.dtype(dtype).newbyteorder("<"))
    if not np.array_equal(typed, given):
        raise HostRunError(f"array of {given.dtype} has values outside {np.dtype(dtype).name}")
    data = np.ascontiguousarray(typed).tobytes()
    return _i32(item, len(data) // item) + data + bytes(-len(data) % 4)


def _conv(layer: Layer) -> tuple[list[int], list[bytes]]:
    p = layer.params_as(ConvParams)
    w = p.window
    scalars = [p.input_offset, p.output_offset, *w.stride, *w.padding, *p.dilation]
    scalars += [w.act_min, w.act_max, *p.weights.shape]
    arrays = [_array(p.weights, np.int8), _array(p.bias, np.int32)]
    return scalars, [*arrays, _array(p.multiplier, np.int32), _array(p.shift, np.int32)]


def _pool(layer: Layer) -> tuple[list[int], list[bytes]]:
    p = layer.params_as(PoolParams)
    w = p.window
    return [*p.kernel, *w.stride, *w.padding, w.act_min, w.act_max], []


def _fully_connected(layer: Layer) -> tuple[list[int], list[bytes]]:
    p = layer.params_as(FullyConnectedParams)
    scalars = [p.input_offset, p.output_offset, p.multiplier, p.shift, p.act_min, p.act_max]
    return scalars, [_array(p.weights, np.int8), _array(p.bias, np.int32)]


def _softmax(layer: Layer) -> tuple[list[int], list[bytes]]:
    p = layer.params_as(SoftmaxParams)
    return [p.mult, p.shift, p.diff_min], []


_RECORDS: dict[LayerKind, Callable[[Layer], tuple[list[int], list[bytes]]]] = {
    LayerKind.CONV_2D: _conv,
    LayerKind.DEPTHWISE_CONV_2D: _conv,
    LayerKind.AVERAGE_POOL_2D: _pool,
    LayerKind.MAX_POOL_2D: _pool,
    LayerKind.FULLY_CONNECTED: _fully_connected,
    LayerKind.SOFTMAX: _softmax,
}


def _layer(layer: Layer) -> bytes:
    scalars, arrays = _RECORDS[layer.kind](layer)
    head = _i32(_KIND_CODE[layer.kind], *_hwc(layer.input_shape), *_hwc(layer.output_shape))
    return head + _i32(len(scalars), *scalars) + _i32(len(arrays)) + b"".join(arrays)


def serialise_network(net: Network) -> bytes:
    """The runner's NETWORK file for `net`."""
    head = b"FXNN" + _i32(_VERSION, len(net.layers), *_hwc(net.input_shape))
    return head + b"".join(_layer(layer) for layer in net.layers)


def serialise_inputs(net: Network, x: np.ndarray) -> bytes:
    """The runner's INPUTS file for the int8 batch `x` of shape (N, *net.input_shape)."""
    if x.dtype != np.int8 or tuple(x.shape[1:]) != tuple(net.input_shape):
        raise HostRunError(f"inputs must be int8 (N, {tuple(net.input_shape)}), got {x.dtype} {x.shape}")
    sample = int(np.prod(net.input_shape))
    return b"FXIN" + _i32(_VERSION, x.shape[0], sample) + np.ascontiguousarray(x).tobytes()


def parse_outputs(data: bytes, net: Network, all_layers: bool) -> list[np.ndarray]:
    """The arrays of a runner's OUTPUTS file, shaped (N, *layer.output_shape)."""
    magic, version, batch, count = data[:4], *struct.unpack_from("<3i", data, 4)
    wanted = list(range(len(net.layers))) if all_layers else [len(net.layers) - 1]
    if magic != b"FXOU" or version != _VERSION or count != len(wanted):
        raise HostRunError(f"the runner's output is not a version-{_VERSION} file with {len(wanted)} layers")
    outputs, offset = [], 16
    for index in wanted:
        got_index, size = struct.unpack_from("<2i", data, offset)
        shape = net.layers[index].output_shape
        if got_index != index or size != int(np.prod(shape)):
            raise HostRunError(
                f"the runner wrote layer {got_index} of {size} bytes where layer {index} was due"
            )
        start = offset + 8
        outputs.append(np.frombuffer(data, np.int8, batch * size, start).reshape(batch, *shape).copy())
        offset = start + batch * size + (-(batch * size) % 4)
    return outputs


# -------------------------------------------------------------------------------------------- run


def run_network(
    runner: Path,
    net: Network,
    x: np.ndarray,
    repeat: int = 1,
    all_layers: bool = False,
    timeout: float = RUN_TIMEOUT_S,
) -> HostRun:
    """Run the batch `x` through `net` on compiled CMSIS-NN `repeat` times; outputs are the last pass's."""
    with tempfile.TemporaryDirectory(prefix="fixpoint-host-") as tmp:
        work = Path(tmp)
        (work / "network.bin").write_bytes(serialise_network(net))
        (work / "inputs.bin").write_bytes(serialise_inputs(net, x))
        args = [str(runner), *(str(work / f) for f in ("network.bin", "inputs.bin", "outputs.bin"))]
        args += ["--repeat", str(repeat)] + (["--all-layers"] if all_layers else [])
        done = process.run_tool(args, timeout, f"running {runner.name}", HostRunError)
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()[-2000:]
            raise HostRunError(f"{runner.name} exited {done.returncode}: {stderr}")
        outputs = parse_outputs((work / "outputs.bin").read_bytes(), net, all_layers)
    fields = _summary(done.stdout.decode("utf-8", "replace"), runner)
    return HostRun(outputs, fields["elapsed_ns"] / 1e9, fields["batch"], fields["repeat"])


def _summary(text: str, runner: Path) -> dict[str, int]:
    """The runner's closing line `elapsed_ns=N batch=N repeat=N`."""
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    try:
        return {key: int(fields[key]) for key in ("elapsed_ns", "batch", "repeat")}
    except (KeyError, ValueError):
        raise HostRunError(
            f"{runner.name} did not print elapsed_ns, batch and repeat: {text[-200:]!r}"
        ) from None
