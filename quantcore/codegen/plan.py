"""The plan: a data-only description of the generated C program, built by lower.py, read by the templates.

Nothing here knows C syntax beyond names: constant buffers with their element type and values, the
activation tensors with their arena offsets, one call per layer with the values of the CMSIS-NN structs
it fills, and the sizes the header publishes. Every class is a frozen dataclass, so a plan can be compared,
printed and tested without rendering anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Dims:
    """A cmsis_nn_dims: (n, h, w, c); what each field means depends on the kernel, as in CMSIS-NN."""

    n: int
    h: int
    w: int
    c: int

    @classmethod
    def nhwc(cls, shape: tuple[int, ...]) -> Dims:
        """A tensor shape of up to four dimensions, padded in front with ones: (2, 10) -> (1, 1, 2, 10)."""
        n, h, w, c = (1,) * (4 - len(shape)) + tuple(int(d) for d in shape)
        return cls(n, h, w, c)

    @property
    def count(self) -> int:
        return self.n * self.h * self.w * self.c


@dataclass(frozen=True)
class Tile:
    """A cmsis_nn_tile: (h, w) here; the C struct stores w first, the template names the fields."""

    h: int
    w: int


@dataclass(frozen=True)
class Clamp:
    """A cmsis_nn_activation: the fused activation in the output's quantized domain."""

    min: int
    max: int


@dataclass(frozen=True)
class ConstBuffer:
    """A constant array in model_data.c: weights, biases, per-channel multipliers and shifts."""

    symbol: str
    ctype: str
    """Element type: int8_t, int32_t, int64_t."""
    values: tuple[int, ...]
    """`length` values then zeros up to `padded_length`."""
    length: int
    padded_length: int
    alignment: int
    """Byte alignment of the array (and padded_length * element size is a multiple of it)."""
    description: str
    """What it holds, e.g. "weights (8, 3, 3, 1) OHWI int8"."""
    layer: str = ""
    """The full name of the layer it belongs to (the comment shows it; the symbol is cut short)."""

    def rows(self, per_row: int = 16) -> list[tuple[int, ...]]:
        return [self.values[i : i + per_row] for i in range(0, len(self.values), per_row)]


@dataclass(frozen=True)
class TensorBuffer:
    """An activation tensor: a view of the arena at `offset`."""

    name: str
    """The graph's tensor name."""
    symbol: str
    ctype: str
    """int8_t or int16_t."""
    shape: tuple[int, ...]
    bytes: int
    offset: int
    alias_of: str | None = None
    """The tensor whose bytes this one shares (a reshape's output), else None."""


# -- calls: one per layer, `kind` names the template macro that renders it ------------------------


@dataclass(frozen=True)
class ConvCall:
    """arm_convolve_wrapper_s8/_s16 or arm_depthwise_conv_wrapper_s8/_s16."""

    kind: ClassVar[str] = "conv"
    kernel: str
    depthwise: bool
    wide: bool
    """An s16 kernel: int16 activations, int64 bias."""
    input_offset: int
    output_offset: int
    ch_mult: int
    stride: Tile
    padding: Tile
    dilation: Tile
    clamp: Clamp
    input_dims: Dims
    filter_dims: Dims
    bias_dims: Dims
    output_dims: Dims
    weights: str
    bias: str
    multiplier: str
    shift: str

    @property
    def buffer_size_function(self) -> str:
        return f"{self.kernel}_get_buffer_size"


@dataclass(frozen=True)
class FullyConnectedCall:
    """arm_fully_connected_s8, arm_fully_connected_per_channel_s8 or arm_fully_connected_s16."""

    kind: ClassVar[str] = "fully_connected"
    kernel: str
    wide: bool
    per_channel: bool
    input_offset: int
    filter_offset: int
    output_offset: int
    clamp: Clamp
    multiplier: int | str
    """The per-tensor multiplier, or the symbol of the per-channel array."""
    shift: int | str
    input_dims: Dims
    filter_dims: Dims
    bias_dims: Dims
    output_dims: Dims
    weights: str
    bias: str

    @property
    def buffer_size_function(self) -> str:
        # The per-channel kernel has no size function of its own; it shares arm_fully_connected_s8's.
        return (
            "arm_fully_connected_s16_get_buffer_size"
            if self.wide
            else "arm_fully_connected_s8_get_buffer_size"
        )


@dataclass(frozen=True)
class PoolCall:
    """arm_avgpool_s8/_s16 or arm_max_pool_s8/_s16."""

    kind: ClassVar[str] = "pool"
    kernel: str
    average: bool
    stride: Tile
    padding: Tile
    clamp: Clamp
    input_dims: Dims
    filter_dims: Dims
    output_dims: Dims

    @property
    def buffer_size_function(self) -> str | None:
        return f"{self.kernel}_get_buffer_size" if self.average else None


@dataclass(frozen=True)
class AddCall:
    """arm_elementwise_add_s8/_s16 (TFLite's add scheme, left_shift headroom)."""

    kind: ClassVar[str] = "add"
    kernel: str
    input_1_offset: int
    input_1_mult: int
    input_1_shift: int
    input_2_offset: int
    input_2_mult: int
    input_2_shift: int
    left_shift: int
    out_offset: int
    out_mult: int
    out_shift: int
    clamp: Clamp
    block_size: int


@dataclass(frozen=True)
class MulCall:
    """arm_elementwise_mul_s8/_s16."""

    kind: ClassVar[str] = "mul"
    kernel: str
    input_1_offset: int
    input_2_offset: int
    out_offset: int
    out_mult: int
    out_shift: int
    clamp: Clamp
    block_size: int


@dataclass(frozen=True)
class SoftmaxCall:
    """arm_softmax_s8 over the last axis: num_rows rows of row_size values."""

    kind: ClassVar[str] = "softmax"
    kernel: str
    num_rows: int
    row_size: int
    mult: int
    shift: int
    diff_min: int


@dataclass(frozen=True)
class RequantizeCall:
    """Fixpoint's own conversion between scales/widths (templates/model/requantize.c.j2)."""

    kind: ClassVar[str] = "requantize"
    kernel: str
    function: str
    """The generated C function for this (input type, output type) pair."""
    count: int
    input_offset: int
    output_offset: int
    multiplier: int
    shift: int
    clamp: Clamp


@dataclass(frozen=True)
class TransposeCall:
    """arm_transpose_s8 on the shapes padded to four dimensions."""

    kind: ClassVar[str] = "transpose"
    kernel: str
    input_dims: Dims
    output_dims: Dims
    perm: tuple[int, int, int, int]


@dataclass(frozen=True)
class PadCall:
    """arm_pad_s8: constant padding with the input's zero point."""

    kind: ClassVar[str] = "pad"
    kernel: str
    input_dims: Dims
    pre_pad: Dims
    post_pad: Dims
    pad_value: int


@dataclass(frozen=True)
class ConcatPart:
    """One input of a concatenation: its tensor, its dims in CMSIS-NN's (x innermost .. w outermost)."""

    tensor: TensorBuffer
    x: int
    y: int
    z: int
    w: int
    offset: int
    """Where it starts along the concatenation axis, in elements of that axis."""


@dataclass(frozen=True)
class ConcatCall:
    """arm_concatenation_s8_<axis>, once per input."""

    kind: ClassVar[str] = "concat"
    kernel: str
    axis: str
    """CMSIS-NN's axis letter: x (innermost, NHWC's C), y (W), z (H), w (N)."""
    output_axis_size: int
    parts: tuple[ConcatPart, ...]


@dataclass(frozen=True)
class AliasCall:
    """A reshape or identity: the output shares the input's bytes, nothing runs."""

    kind: ClassVar[str] = "alias"
    kernel: None = None


@dataclass(frozen=True)
class StateBuffer:
    """A recurrent layer's own static buffer (state or work), declared outside the arena: aligned and
    zero-padded to the plan's alignment like every other array Fixpoint generates (the kernels take the
    element counts from their params, so the padding is never read)."""

    suffix: str
    """`<layer symbol>_<suffix>`: "hidden_state", "state", "filter_sums"..."""
    ctype: str
    length: int
    alignment: int

    @property
    def padded_length(self) -> int:
        item = _ITEMSIZE[self.ctype]
        unit = max(self.alignment, item)
        return -(-self.length * item // unit) * unit // item

    @property
    def padded_bytes(self) -> int:
        return self.padded_length * _ITEMSIZE[self.ctype]


@dataclass(frozen=True)
class LstmGateCall:
    """cmsis_nn_lstm_gate: the gate's two products (weights, effective biases, multipliers) and activation."""

    input_multiplier: int
    input_shift: int
    input_weights: str
    input_effective_bias: str
    hidden_multiplier: int
    hidden_shift: int
    hidden_weights: str
    hidden_effective_bias: str
    activation: str
    """ARM_SIGMOID or ARM_TANH."""


@dataclass(frozen=True)
class LstmCall:
    """arm_lstm_unidirectional_s8 (int8 input and hidden state) or _s16 (int16, TensorFlow's 16x8): its
    hidden and cell state live in the layer's own static buffers outside the arena. Streaming (an
    .tflite's LSTM), they persist from one invoke to the next and are reset by init; not streaming (an
    ONNX LSTM), every invoke is the kernel's stateless call (no hidden state; it zeroes the cell state)."""

    kind: ClassVar[str] = "lstm"
    kernel: str
    streaming: bool
    last_step: bool
    """The layer's output is the last step's hidden state only (ONNX's Y_h): the kernel writes the whole
    sequence into the layer's own buffer, the last step is copied out."""
    time_major: bool
    batch_size: int
    time_steps: int
    input_size: int
    hidden_size: int
    input_offset: int
    forget_to_cell_multiplier: int
    forget_to_cell_shift: int
    input_to_cell_multiplier: int
    input_to_cell_shift: int
    cell_clip: int
    cell_scale_power: int
    output_multiplier: int
    output_shift: int
    output_offset: int
    forget_gate: LstmGateCall
    input_gate: LstmGateCall
    cell_gate: LstmGateCall
    output_gate: LstmGateCall
    alignment: int

    @property
    def state_buffers(self) -> tuple[StateBuffer, ...]:
        """The state (int8 or int16 hidden when streaming, int16 cell), the two int16 work buffers and,
        when the layer's output is the last step, the output sequence the kernel writes."""
        n = self.batch_size * self.hidden_size
        activation = "int16_t" if self.kernel == "arm_lstm_unidirectional_s16" else "int8_t"
        types = [
            *([("hidden_state", activation, n)] if self.streaming else []),
            ("cell_state", "int16_t", n),
            ("temp1", "int16_t", n),
            ("temp2", "int16_t", n),
            *([("sequence", activation, n * self.time_steps)] if self.last_step else []),
        ]
        return tuple(StateBuffer(suffix, ctype, length, self.alignment) for suffix, ctype, length in types)

    @property
    def state_bytes(self) -> int:
        return sum(b.padded_bytes for b in self.state_buffers)


@dataclass(frozen=True)
class SvdfCall:
    """arm_svdf_state_s16_s8 (int16 state and time weights) or arm_svdf_s8 (int8), stateful: its state and
    two int32 work buffers are the layer's own static buffers outside the arena; the state persists from
    one invoke to the next, reset by init. arm_svdf_s8 also takes the shared scratch context: on Helium
    it reads the feature weights' row sums there (times -input_offset), which the call computes first."""

    kind: ClassVar[str] = "svdf"
    kernel: str
    batch: int
    input_size: int
    filters: int
    memory: int
    units: int
    rank: int
    input_offset: int
    output_offset: int
    input_multiplier: int
    input_shift: int
    output_multiplier: int
    output_shift: int
    input_clamp: Clamp
    output_clamp: Clamp
    weights_feature: str
    weights_time: str
    bias: str
    alignment: int

    @property
    def state_ctype(self) -> str:
        """The state's and the time weights' element type."""
        return "int8_t" if self.kernel == "arm_svdf_s8" else "int16_t"

    @property
    def buffer_size_function(self) -> str | None:
        return "arm_svdf_s8_get_buffer_size" if self.kernel == "arm_svdf_s8" else None

    @property
    def state_buffers(self) -> tuple[StateBuffer, ...]:
        """The state, and the int32 work buffers of the filters' and the units' sums."""
        return (
            StateBuffer("state", self.state_ctype, self.batch * self.filters * self.memory, self.alignment),
            StateBuffer("filter_sums", "int32_t", self.batch * self.filters, self.alignment),
            StateBuffer("unit_sums", "int32_t", self.batch * self.units, self.alignment),
        )

    @property
    def state_bytes(self) -> int:
        return sum(b.padded_bytes for b in self.state_buffers)


Call = (
    ConvCall
    | FullyConnectedCall
    | PoolCall
    | AddCall
    | MulCall
    | SoftmaxCall
    | RequantizeCall
    | TransposeCall
    | PadCall
    | ConcatCall
    | AliasCall
    | LstmCall
    | SvdfCall
)


@dataclass(frozen=True)
class Layer:
    """One node of the quantized graph, in graph order."""

    index: int
    name: str
    symbol: str
    """A C identifier unique in the program: l<index>_<the name's c_identifier, cut short>."""
    op: str
    inputs: tuple[TensorBuffer, ...]
    output: TensorBuffer
    call: Call

    @property
    def kernel(self) -> str | None:
        return self.call.kernel


@dataclass(frozen=True)
class IoInfo:
    """The graph input or output as the header publishes it: the contract an application writes to."""

    tensor: TensorBuffer
    scale: float
    zero_point: int
    layout: str | None = None
    """The firmware's layout of the tensor: "NHWC" (4-D), "NC" (2-D), None for other ranks."""
    model_layout: str | None = None
    """The layout the model file gives it (4-D only): "NCHW" (the application transposes) or "NHWC"."""
    model_shape: tuple[int, ...] = ()
    """Its shape in the model file, batch first."""

    @property
    def from_nchw(self) -> bool:
        """Whether the model's values must be transposed (n, c, h, w) -> (n, h, w, c) for the firmware."""
        return self.model_layout == "NCHW" and self.layout == "NHWC"

    @property
    def dims(self) -> tuple[tuple[str, int], ...]:
        """The named dimensions the header defines macros for (<PREFIX>_INPUT_HEIGHT, ...)."""
        names = {"NHWC": ("BATCH", "HEIGHT", "WIDTH", "CHANNELS"), "NC": ("BATCH", "FEATURES")}
        return tuple(zip(names.get(self.layout or "", ()), self.tensor.shape, strict=False))

    @property
    def elements(self) -> int:
        return math.prod(self.tensor.shape)


@dataclass(frozen=True)
class RequantizeFunction:
    """One generated fixpoint_requantize variant."""

    name: str
    input_ctype: str
    output_ctype: str


@dataclass(frozen=True)
class ArenaFigures:
    """The planner's result and the figures to judge it by (see arena.ArenaPlan)."""

    arena_bytes: int
    tensor_bytes: int
    lower_bound: int
    peak_live_bytes: int


@dataclass(frozen=True)
class Plan:
    """The whole generated program."""

    prefix: str
    graph_name: str
    core: str
    rounding: str
    alignment: int
    constants: tuple[ConstBuffer, ...]
    tensors: tuple[TensorBuffer, ...]
    layers: tuple[Layer, ...]
    input: IoInfo
    output: IoInfo
    arena: ArenaFigures
    scratch_bytes: int
    requantize_functions: tuple[RequantizeFunction, ...]

    @property
    def macro(self) -> str:
        return self.prefix.upper()

    @property
    def state_bytes(self) -> int:
        """RAM the recurrent layers keep for themselves outside the arena (state and work buffers)."""
        return sum(
            layer.call.state_bytes for layer in self.layers if isinstance(layer.call, LstmCall | SvdfCall)
        )

    @property
    def weight_bytes(self) -> int:
        return sum(c.padded_length * _ITEMSIZE[c.ctype] for c in self.constants)


_ITEMSIZE = {"int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "uint32_t": 4}
