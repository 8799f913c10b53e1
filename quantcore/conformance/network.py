"""Whole networks from CMSIS-NN's test data, wired from their layer names and run layer by layer.

CMSIS-NN's network cases (ds_cnn_s, ds_cnn_l, ...) name every layer `<KIND>_<index>` in their defines
(CONV_2D_1_PAD_X, DEPTHWISE_CONV_2D_2_..., AVERAGE_POOL_2D_10_..., FULLY_CONNECTED_12_..., SOFTMAX_13_...)
and `<case>_layer_<index>_<kind>_<weights|bias|output_mult|output_shift>` in their arrays. The layers run in
index order, each on the previous one's output; the network input is `<case>_input` and the expected
result `<case>_output_ref`. Nothing here is specific to one network.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar, overload

import numpy as np

from quantcore.conformance.cases import Array, VectorCase, integer_define
from quantcore.conformance.layer_params import (
    ConvParams,
    FullyConnectedParams,
    LayerParams,
    PoolParams,
    SoftmaxParams,
    Window,
)
from quantcore.errors import VectorCaseError
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.pooling import avgpool_s8, max_pool_s8
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.softmax import softmax_s8

Shape = tuple[int, ...]

_SLICE_ELEMENTS = 1 << 19


class LayerKind(enum.Enum):
    """A layer kind as CMSIS-NN's network test data names it, with the reference kernel that runs it."""

    CONV_2D = ("CONV_2D", "arm_convolve_wrapper_s8")
    DEPTHWISE_CONV_2D = ("DEPTHWISE_CONV_2D", "arm_depthwise_conv_wrapper_s8")
    AVERAGE_POOL_2D = ("AVERAGE_POOL_2D", "arm_avgpool_s8")
    MAX_POOL_2D = ("MAX_POOL_2D", "arm_max_pool_s8")
    FULLY_CONNECTED = ("FULLY_CONNECTED", "arm_fully_connected_s8")
    SOFTMAX = ("SOFTMAX", "arm_softmax_s8")

    def __init__(self, define_prefix: str, c_function: str) -> None:
        self.define_prefix = define_prefix
        self.c_function = c_function

    @property
    def array_stem(self) -> str:
        """How the kind appears in array names: conv_2d, depthwise_conv_2d, fully_connected ..."""
        return self.define_prefix.lower()


_LAYER_DEFINE = re.compile(
    r"^(?P<kind>" + "|".join(k.define_prefix for k in LayerKind) + r")_(?P<index>\d+)_"
)


P = TypeVar("P", ConvParams, PoolParams, FullyConnectedParams, SoftmaxParams)


@dataclass(frozen=True)
class Layer:
    """One layer: where it sits, its per-sample shapes, and its reference kernel's arguments."""

    name: str
    kind: LayerKind
    index: int
    input_shape: Shape
    output_shape: Shape
    params: LayerParams = field(repr=False)

    def params_as(self, cls: type[P]) -> P:
        """The params as the class its kind's builder makes (each kind has one; see _BUILDERS)."""
        if not isinstance(self.params, cls):
            raise TypeError(f"layer {self.name} ({self.kind.name}) has {type(self.params).__name__}")
        return self.params

    def run(self, x: Array, rounding: Rounding) -> Array:
        return _RUNNERS[self.kind](self, x.reshape(x.shape[0], *self.input_shape), rounding)


@dataclass(frozen=True)
class Network:
    name: str
    input_shape: Shape
    layers: list[Layer]

    def run(self, x: Array, rounding: Rounding = Rounding.DOUBLE) -> list[Array]:
        """Every layer's output for the batch `x` (N, *input_shape); the last is the network's."""
        step = self._samples_per_slice()
        slices = [self._run_slice(x[i : i + step], rounding) for i in range(0, max(len(x), 1), step)]
        return [np.concatenate(per_layer) for per_layer in zip(*slices, strict=True)]

    def _run_slice(self, x: Array, rounding: Rounding) -> list[Array]:
        outputs = []
        for layer in self.layers:
            x = layer.run(x, rounding)
            outputs.append(x)
        return outputs

    def _samples_per_slice(self) -> int:
        # Large batches run in slices whose int64 intermediates stay within a few MB: the same work
        # on the whole batch at once is 2-3x slower, spent in page faults of fresh allocations.
        widest = max(int(np.prod(layer.output_shape)) for layer in self.layers)
        return max(1, _SLICE_ELEMENTS // widest)


def is_network(case: VectorCase) -> bool:
    return any(_LAYER_DEFINE.match(k) for k in case.defines)


def load_network(case: VectorCase) -> Network:
    """Build the network of a whole-network case from its layer names."""
    found = {(LayerKind[m["kind"]], int(m["index"])) for m in map(_LAYER_DEFINE.match, case.defines) if m}
    if not found:
        raise VectorCaseError(str(case.json_path), "no layer defines (<KIND>_<index>_...) in this case")
    ordered = sorted(found, key=lambda kind_index: kind_index[1])
    reader = _LayerReader(case, *ordered[0])
    shape: Shape = (reader.define("INPUT_H"), reader.define("INPUT_W"), reader.define("IN_CH"))
    input_shape = shape
    layers = []
    for kind, index in ordered:
        layer = _BUILDERS[kind](_LayerReader(case, kind, index), shape)
        layers.append(layer)
        shape = layer.output_shape
    return Network(case.name, input_shape, layers)


class _LayerReader:
    """Defines and arrays of one layer, by their short names."""

    def __init__(self, case: VectorCase, kind: LayerKind, index: int) -> None:
        self.case, self.kind, self.index = case, kind, index
        self.name = f"layer_{index}_{kind.array_stem}"

    def define(self, key: str, default: int | None = None) -> int:
        full = f"{self.kind.define_prefix}_{self.index}_{key}"
        if full in self.case.defines:
            return integer_define(self.case.defines[full], full, self.case.json_path)
        if default is None:
            raise VectorCaseError(str(self.case.json_path), f"layer {self.name}: define {full} is missing")
        return default

    @overload
    def array(self, suffix: str, required: Literal[True] = True) -> Array: ...

    @overload
    def array(self, suffix: str, required: bool) -> Array | None: ...

    def array(self, suffix: str, required: bool = True) -> Array | None:
        full = f"{self.case.name}_{self.name}_{suffix}"
        if full in self.case.arrays:
            return self.case.arrays[full]
        if required:
            raise VectorCaseError(str(self.case.json_path), f"layer {self.name}: array {full} is missing")
        return None

    def layer(self, input_shape: Shape, output_shape: Shape, params: LayerParams) -> Layer:
        return Layer(self.name, self.kind, self.index, input_shape, output_shape, params)

    def fail(self, problem: str) -> VectorCaseError:
        return VectorCaseError(str(self.case.json_path), f"layer {self.name}: {problem}")


def _clamp(r: _LayerReader) -> tuple[int, int]:
    """(act_min, act_max); the network data leaves them out where the layer does not clamp."""
    return r.define("OUT_ACTIVATION_MIN", -128), r.define("OUT_ACTIVATION_MAX", 127)


def _window(r: _LayerReader) -> Window:
    act_min, act_max = _clamp(r)
    return Window(
        stride=(r.define("STRIDE_H"), r.define("STRIDE_W")),
        padding=(r.define("PAD_H"), r.define("PAD_W")),
        output_hw=(r.define("OUTPUT_H"), r.define("OUTPUT_W")),
        act_min=act_min,
        act_max=act_max,
    )


def _conv_like(r: _LayerReader, shape: Shape, weights_shape: Shape, out_ch: int) -> Layer:
    weights = r.array("weights")
    if weights.size != int(np.prod(weights_shape)):
        raise r.fail(f"{weights.size} weights do not fit the shape {weights_shape}")
    params = ConvParams(
        window=_window(r),
        weights=weights.reshape(weights_shape),
        bias=r.array("bias", required=False),
        multiplier=r.array("output_mult"),
        shift=r.array("output_shift"),
        input_offset=r.define("INPUT_OFFSET"),
        output_offset=r.define("OUTPUT_OFFSET"),
        dilation=(r.define("DILATION_H", 1), r.define("DILATION_W", 1)),
    )
    return r.layer(shape, (r.define("OUTPUT_H"), r.define("OUTPUT_W"), out_ch), params)


def _build_conv(r: _LayerReader, shape: Shape) -> Layer:
    out_ch = r.define("OUT_CH")
    return _conv_like(r, shape, (out_ch, r.define("FILTER_H"), r.define("FILTER_W"), shape[-1]), out_ch)


def _build_depthwise(r: _LayerReader, shape: Shape) -> Layer:
    out_ch = r.define("OUT_CH")
    return _conv_like(r, shape, (1, r.define("FILTER_H"), r.define("FILTER_W"), out_ch), out_ch)


def _build_pool(r: _LayerReader, shape: Shape) -> Layer:
    params = PoolParams(window=_window(r), kernel=(r.define("FILTER_H"), r.define("FILTER_W")))
    return r.layer(shape, (r.define("OUTPUT_H"), r.define("OUTPUT_W"), shape[-1]), params)


def _build_fully_connected(r: _LayerReader, shape: Shape) -> Layer:
    depth = int(np.prod(shape))
    weights = r.array("weights")
    if weights.size % depth:
        raise r.fail(f"{weights.size} weights are not a whole number of rows of the input's {depth} values")
    out_ch = weights.size // depth
    act_min, act_max = _clamp(r)
    params = FullyConnectedParams(
        weights=weights.reshape(out_ch, depth),
        bias=r.array("bias", required=False),
        multiplier=r.define("OUTPUT_MULTIPLIER"),
        shift=r.define("OUTPUT_SHIFT"),
        input_offset=r.define("INPUT_OFFSET"),
        output_offset=r.define("OUTPUT_OFFSET"),
        act_min=act_min,
        act_max=act_max,
    )
    return r.layer(shape, (out_ch,), params)


def _build_softmax(r: _LayerReader, shape: Shape) -> Layer:
    params = SoftmaxParams(mult=r.define("MULT"), shift=r.define("SHIFT"), diff_min=r.define("DIFF_MIN"))
    return r.layer(shape, shape, params)


def _run_conv(layer: Layer, x: Array, rounding: Rounding) -> Array:
    p = layer.params_as(ConvParams)
    w = p.window
    kernel = depthwise_conv_s8 if layer.kind is LayerKind.DEPTHWISE_CONV_2D else convolve_s8
    return kernel(
        x,
        p.weights,
        p.bias,
        multiplier=p.multiplier,
        shift=p.shift,
        input_offset=p.input_offset,
        output_offset=p.output_offset,
        stride=w.stride,
        padding=w.padding,
        dilation=p.dilation,
        act_min=w.act_min,
        act_max=w.act_max,
        output_hw=w.output_hw,
        rounding=rounding,
    )


def _run_pool(layer: Layer, x: Array, rounding: Rounding) -> Array:
    p = layer.params_as(PoolParams)
    w = p.window
    pool = avgpool_s8 if layer.kind is LayerKind.AVERAGE_POOL_2D else max_pool_s8
    return pool(
        x,
        kernel=p.kernel,
        stride=w.stride,
        padding=w.padding,
        act_min=w.act_min,
        act_max=w.act_max,
        output_hw=w.output_hw,
    )


def _run_fully_connected(layer: Layer, x: Array, rounding: Rounding) -> Array:
    p = layer.params_as(FullyConnectedParams)
    return fully_connected_s8(
        x.reshape(x.shape[0], -1),
        p.weights,
        p.bias,
        multiplier=p.multiplier,
        shift=p.shift,
        input_offset=p.input_offset,
        output_offset=p.output_offset,
        act_min=p.act_min,
        act_max=p.act_max,
        rounding=rounding,
    )


def _run_softmax(layer: Layer, x: Array, rounding: Rounding) -> Array:
    p = layer.params_as(SoftmaxParams)
    return softmax_s8(x, mult=p.mult, shift=p.shift, diff_min=p.diff_min)


_BUILDERS: dict[LayerKind, Callable[[_LayerReader, Shape], Layer]] = {
    LayerKind.CONV_2D: _build_conv,
    LayerKind.DEPTHWISE_CONV_2D: _build_depthwise,
    LayerKind.AVERAGE_POOL_2D: _build_pool,
    LayerKind.MAX_POOL_2D: _build_pool,
    LayerKind.FULLY_CONNECTED: _build_fully_connected,
    LayerKind.SOFTMAX: _build_softmax,
}

_RUNNERS: dict[LayerKind, Callable[[Layer, Array, Rounding], Array]] = {
    LayerKind.CONV_2D: _run_conv,
    LayerKind.DEPTHWISE_CONV_2D: _run_conv,
    LayerKind.AVERAGE_POOL_2D: _run_pool,
    LayerKind.MAX_POOL_2D: _run_pool,
    LayerKind.FULLY_CONNECTED: _run_fully_connected,
    LayerKind.SOFTMAX: _run_softmax,
}
