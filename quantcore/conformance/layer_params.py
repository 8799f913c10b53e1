"""The arguments of each layer kind of a CMSIS-NN network case, as its reference kernel takes them.

conformance.network reads them from the case's defines and arrays and runs them; conformance.network_graph
turns them into a quantized graph, verify.host_cmsis_nn into the host runner's records.
"""

from __future__ import annotations

from dataclasses import dataclass

from quantcore.conformance.cases import Array

Pair = tuple[int, int]


@dataclass(frozen=True)
class Window:
    """What every windowed layer (convolution, pool) reads: padding is the "before" side, and the output
    size is the caller's, as in CMSIS-NN's cmsis_nn_conv_params / cmsis_nn_pool_params."""

    stride: Pair
    padding: Pair
    output_hw: Pair
    act_min: int
    act_max: int


@dataclass(frozen=True)
class ConvParams:
    """A CONV_2D or DEPTHWISE_CONV_2D layer: weights OHWI or [1, H, W, C*mult], per-channel requantization."""

    window: Window
    weights: Array
    bias: Array | None
    multiplier: Array
    shift: Array
    input_offset: int
    output_offset: int
    dilation: Pair


@dataclass(frozen=True)
class PoolParams:
    """An AVERAGE_POOL_2D or MAX_POOL_2D layer."""

    window: Window
    kernel: Pair


@dataclass(frozen=True)
class FullyConnectedParams:
    """A FULLY_CONNECTED layer: weights [out, in], one (per-tensor) multiplier and shift."""

    weights: Array
    bias: Array | None
    multiplier: int
    shift: int
    input_offset: int
    output_offset: int
    act_min: int
    act_max: int


@dataclass(frozen=True)
class SoftmaxParams:
    """A SOFTMAX layer: arm_softmax_s8's input multiplier, left shift and diff_min."""

    mult: int
    shift: int
    diff_min: int


LayerParams = ConvParams | PoolParams | FullyConnectedParams | SoftmaxParams
